-- optim/sequential_lr.lua: SequentialLR (torch 1.13): runs schedulers one after another, switching at
-- the milestone epochs (a scheduler that takes over restarts at its epoch 0).
local Scheduler = require("ds.optim.lr_scheduler").Scheduler
local errors = require("ds.errors")

local SequentialLR = Scheduler.extend("SequentialLR", { "schedulers", "milestones" },
  { schedulers = "table", milestones = "table" })

-- opts: schedulers (list, all on this optimizer), milestones (one fewer), last_epoch (-1)
function SequentialLR.new(cls, optimizer, opts)
  opts = opts or {}
  local list, ms = opts.schedulers, opts.milestones
  if type(list) ~= "table" or #list == 0 or type(ms) ~= "table" then
    errors.raise("SequentialLR: expects {schedulers = {...}, milestones = {...}}")
  end
  for i, s in ipairs(list) do
    if type(s) ~= "table" or s.optimizer ~= optimizer then
      errors.raise(string.format("SequentialLR: scheduler %d does not belong to the optimizer given", i))
    end
  end
  if #ms ~= #list - 1 then
    errors.raise(string.format("SequentialLR: %d schedulers need %d milestones, got %d", #list, #list - 1, #ms))
  end
  local self = setmetatable({ optimizer = optimizer, _schedulers = list, _milestones = ms,
                              last_epoch = (opts.last_epoch or -1) + 1 }, cls)
  for _, g in ipairs(optimizer.param_groups) do g.lr = g.initial_lr end
  for _, s in ipairs(list) do s.last_epoch = s.last_epoch - 1 end
  list[1]:_initial_step()
  self._last_lr = list[1]:get_last_lr()
  return self
end

function SequentialLR:step()
  self.last_epoch = self.last_epoch + 1
  local idx = 1
  while idx <= #self._milestones and self._milestones[idx] <= self.last_epoch do idx = idx + 1 end
  local s = self._schedulers[idx]
  if idx > 1 and self._milestones[idx - 1] == self.last_epoch then s:step(0) else s:step() end
  self._last_lr = s:get_last_lr()
end

function SequentialLR:state_dict()
  local sd = { last_epoch = self.last_epoch, _milestones = { unpack(self._milestones) },
    _last_lr = { unpack(self._last_lr) },
               _schedulers = {} }
  for i, s in ipairs(self._schedulers) do sd._schedulers[i] = s:state_dict() end
  return sd
end

function SequentialLR:load_state_dict(sd)
  self.last_epoch, self._milestones, self._last_lr = sd.last_epoch, { unpack(sd._milestones) }, { unpack(sd._last_lr) }
  for i, s in ipairs(self._schedulers) do s:load_state_dict(sd._schedulers[i]) end
end

return SequentialLR
