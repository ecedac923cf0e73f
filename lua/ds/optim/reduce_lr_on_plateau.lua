-- optim/reduce_lr_on_plateau.lua: ReduceLROnPlateau (torch 1.13): lr *= factor when a metric has not
-- improved for more than patience epochs; scheduler:step(metric) once per epoch.
local errors = require("ds.errors")
local constructor_args = require("ds.nn.constructor_args")
local Scheduler = require("ds.optim.lr_scheduler").Scheduler

local Plateau = { name = "ReduceLROnPlateau" }
Plateau.__index = Plateau
setmetatable(Plateau, { __call = function(cls, ...) return cls.new(cls, ...) end })

local MODES = { min = true, max = true }
local THRESHOLD_MODES = { rel = true, abs = true }

local KINDS = { mode = { "min", "max" }, factor = "number", patience = { "integer", min = 0 }, threshold = "number",
  threshold_mode = { "rel", "abs" }, cooldown = { "integer", min = 0 }, min_lr = "any", eps = "number" }
-- PyTorch's order
local PARAMS = { "mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr", "eps" }
local NOT_REFUSED = {}

-- mode ("min"), factor (0.1), patience (10), threshold (1e-4), threshold_mode ("rel"), cooldown (0), min_lr (0,
-- or one per group), eps (1e-8): positionally in PyTorch's order and/or as options
function Plateau.new(cls, optimizer, ...)
  local opts = constructor_args.merge("ReduceLROnPlateau", PARAMS, KINDS, NOT_REFUSED, ...)
  if type(optimizer) ~= "table" or type(optimizer.param_groups) ~= "table" then
    errors.raise("ReduceLROnPlateau: first argument must be an optimizer")
  end
  local self = setmetatable({ optimizer = optimizer, mode = opts.mode or "min", factor = opts.factor or 0.1,
    patience = opts.patience or 10, threshold = opts.threshold or 1e-4, threshold_mode = opts.threshold_mode or "rel",
    cooldown = opts.cooldown or 0, eps = opts.eps or 1e-8, min_lrs = {}, last_epoch = 0, num_bad_epochs = 0,
    cooldown_counter = 0 }, cls)
  if self.factor >= 1 then errors.raise("ReduceLROnPlateau: factor must be < 1") end
  if not MODES[self.mode] then errors.raise("ReduceLROnPlateau: mode must be 'min' or 'max'") end
  if not THRESHOLD_MODES[self.threshold_mode] then
    errors.raise("ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs'")
  end
  for i = 1, #optimizer.param_groups do
    local m = opts.min_lr or 0
    self.min_lrs[i] = type(m) == "table" and m[i] or m
  end
  self.best = self.mode == "min" and math.huge or -math.huge
  return self
end

local function is_better(self, a)
  local best, th = self.best, self.threshold
  if self.mode == "min" then
    if self.threshold_mode == "rel" then return a < best * (1 - th) end
    return a < best - th
  end
  if self.threshold_mode == "rel" then return a > best * (th + 1) end
  return a > best + th
end

-- metric: a number or a one-element tensor
function Plateau:step(metric)
  local current = type(metric) == "number" and metric or (type(metric) == "table" and metric.item and metric:item())
  if type(current) ~= "number" then errors.raise("ReduceLROnPlateau.step: expects the metric (a number)") end
  self.last_epoch = self.last_epoch + 1
  if is_better(self, current) then
    self.best, self.num_bad_epochs = current, 0
  else
    self.num_bad_epochs = self.num_bad_epochs + 1
  end
  if self.cooldown_counter > 0 then
    self.cooldown_counter = self.cooldown_counter - 1
    self.num_bad_epochs = 0
  end
  if self.num_bad_epochs > self.patience then
    for i, g in ipairs(self.optimizer.param_groups) do
      local new = math.max(g.lr * self.factor, self.min_lrs[i])
      if g.lr - new > self.eps then g.lr = new end
    end
    self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
  end
  self._last_lr = {}
  for i, g in ipairs(self.optimizer.param_groups) do self._last_lr[i] = g.lr end
end

function Plateau:get_last_lr() return self._last_lr end

function Plateau:state_dict()
  local sd = {}
  for k, v in pairs(self) do
    if k ~= "optimizer" then sd[k] = type(v) == "table" and { unpack(v) } or v end
  end
  return sd
end

Plateau.load_state_dict = Scheduler.load_state_dict

return Plateau
