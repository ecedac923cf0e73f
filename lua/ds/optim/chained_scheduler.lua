-- optim/chained_scheduler.lua: ChainedScheduler (torch 1.13): steps every scheduler of a list (all on one
-- optimizer) at each step(), so their chainable factors multiply; get_last_lr is the groups' lr after the last.
local errors = require("ds.errors")

local ChainedScheduler = { name = "ChainedScheduler" }
ChainedScheduler.__index = ChainedScheduler

local function group_lrs(optimizer)
  local out = {}
  for i, g in ipairs(optimizer.param_groups) do out[i] = g.lr end
  return out
end

-- ChainedScheduler(schedulers): a list of schedulers of one optimizer (already built: each made its initial step)
local function new(cls, schedulers, ...)
  if select("#", ...) > 0 then errors.raise("ChainedScheduler: takes one argument, the list of schedulers") end
  if type(schedulers) ~= "table" or #schedulers == 0 then
    errors.raise("ChainedScheduler: expects a list of schedulers")
  end
  for i, s in ipairs(schedulers) do
    if type(s) ~= "table" or type(s.step) ~= "function" or type(s.optimizer) ~= "table" then
      errors.raise(string.format("ChainedScheduler: element %d is not a scheduler", i))
    end
    if s.optimizer ~= schedulers[1].optimizer then
      errors.raise(string.format("ChainedScheduler: schedulers 1 and %d belong to different optimizers", i))
    end
  end
  local list = {}
  for i, s in ipairs(schedulers) do list[i] = s end
  local self = setmetatable({ _schedulers = list, optimizer = list[1].optimizer }, cls)
  self._last_lr = group_lrs(self.optimizer)
  return self
end
setmetatable(ChainedScheduler, { __call = new })

function ChainedScheduler:step(...)
  if select("#", ...) > 0 then errors.raise("ChainedScheduler.step: takes no epoch") end
  for _, s in ipairs(self._schedulers) do s:step() end
  self._last_lr = group_lrs(self.optimizer)
end

function ChainedScheduler:get_last_lr() return self._last_lr end

-- torch's layout: the chain's own fields and _schedulers, the list of the schedulers' state dicts
function ChainedScheduler:state_dict()
  local sd = { _last_lr = { unpack(self._last_lr) }, _schedulers = {} }
  for i, s in ipairs(self._schedulers) do sd._schedulers[i] = s:state_dict() end
  return sd
end

function ChainedScheduler:load_state_dict(sd)
  if type(sd) ~= "table" or type(sd._schedulers) ~= "table" or #sd._schedulers ~= #self._schedulers then
    errors.raise(string.format("ChainedScheduler.load_state_dict: expects a state with %d schedulers' states",
      #self._schedulers))
  end
  for i, s in ipairs(self._schedulers) do s:load_state_dict(sd._schedulers[i]) end
  self._last_lr = { unpack(sd._last_lr or group_lrs(self.optimizer)) }
end

return ChainedScheduler
