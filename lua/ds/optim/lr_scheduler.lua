-- optim/lr_scheduler.lua: StepLR and CosineAnnealingLR with torch 1.13's recursive formulas
-- (so learning rates match PyTorch's to the last bit); scheduler:step() once per epoch.
local errors = require("ds.errors")

local Scheduler = {}
Scheduler.__index = Scheduler

local function extend(name)
  local cls = setmetatable({ name = name }, { __index = Scheduler, __call = function(c, ...) return c.new(c, ...) end })
  cls.__index = cls
  return cls
end

local function init(cls, optimizer, opts)
  if type(optimizer) ~= "table" or type(optimizer.param_groups) ~= "table" then
    errors.raise(cls.name .. ": first argument must be an optimizer")
  end
  local self = setmetatable({ optimizer = optimizer, last_epoch = opts.last_epoch or -1, base_lrs = {} }, cls)
  for i, g in ipairs(optimizer.param_groups) do
    if self.last_epoch == -1 then g.initial_lr = g.lr end
    if g.initial_lr == nil then errors.raise(cls.name .. ": param group " .. i .. " has no initial_lr (last_epoch given)") end
    self.base_lrs[i] = g.initial_lr
  end
  self._step_count = 0
  return self
end

function Scheduler:step()
  self._step_count = self._step_count + 1
  self.last_epoch = self.last_epoch + 1
  local lrs = self:get_lr()
  for i, g in ipairs(self.optimizer.param_groups) do g.lr = lrs[i] end
  self._last_lr = lrs
end

function Scheduler:get_last_lr() return self._last_lr end

function Scheduler:state_dict()
  return { last_epoch = self.last_epoch, base_lrs = { unpack(self.base_lrs) }, _step_count = self._step_count,
           _last_lr = self._last_lr and { unpack(self._last_lr) } }
end

function Scheduler:load_state_dict(sd)
  for k, v in pairs(sd) do self[k] = v end
end

-- lr *= gamma every step_size epochs
local StepLR = extend("StepLR")
function StepLR.new(cls, optimizer, opts)
  opts = opts or {}
  if type(opts.step_size) ~= "number" or opts.step_size < 1 then errors.raise("StepLR: step_size must be a positive integer") end
  local self = init(cls, optimizer, opts)
  self.step_size, self.gamma = opts.step_size, opts.gamma or 0.1
  self:step()
  return self
end
function StepLR:get_lr()
  local out = {}
  for i, g in ipairs(self.optimizer.param_groups) do
    if self.last_epoch == 0 or self.last_epoch % self.step_size ~= 0 then out[i] = g.lr else out[i] = g.lr * self.gamma end
  end
  return out
end

-- cosine from the base lr down to eta_min over T_max epochs
local CosineAnnealingLR = extend("CosineAnnealingLR")
function CosineAnnealingLR.new(cls, optimizer, opts)
  opts = opts or {}
  if type(opts.T_max) ~= "number" or opts.T_max <= 0 then errors.raise("CosineAnnealingLR: T_max must be a positive number") end
  local self = init(cls, optimizer, opts)
  self.T_max, self.eta_min = opts.T_max, opts.eta_min or 0
  self:step()
  return self
end
function CosineAnnealingLR:get_lr()
  local e, T, emin, out = self.last_epoch, self.T_max, self.eta_min, {}
  for i, g in ipairs(self.optimizer.param_groups) do
    local base = self.base_lrs[i]
    if e == 0 then
      out[i] = g.lr
    elseif self._step_count == 1 and e > 0 then
      out[i] = emin + (base - emin) * (1 + math.cos(e * math.pi / T)) / 2
    elseif (e - 1 - T) % (2 * T) == 0 then
      out[i] = g.lr + (base - emin) * (1 - math.cos(math.pi / T)) / 2
    else
      out[i] = (1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T)) * (g.lr - emin) + emin
    end
  end
  return out
end

return { StepLR = StepLR, CosineAnnealingLR = CosineAnnealingLR }
