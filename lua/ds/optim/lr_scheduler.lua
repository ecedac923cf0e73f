-- optim/lr_scheduler.lua: the Scheduler base (torch 1.13's _LRScheduler: step(), step(epoch) with the
-- closed form, state_dict) and the epoch-based schedulers with torch's recursive (chainable) formulas,
-- so learning rates match PyTorch's to the last bit; scheduler:step() once per epoch.
local errors = require("ds.errors")
local constructor_args = require("ds.nn.constructor_args")

local Scheduler = {}
Scheduler.__index = Scheduler

-- a subclass whose options have these kinds (ds.options), params: PyTorch 1.13's constructor parameters after
-- the optimizer, in order (last_epoch is every scheduler's, last); Class(optimizer, positional..., [opts])
-- merges and checks the options, then calls Class.new(cls, optimizer, opts)
local NOT_REFUSED = {}
function Scheduler.extend(name, params, kinds)
  kinds.last_epoch = { "integer", min = -1 }
  params[#params + 1] = "last_epoch"
  local cls = setmetatable({ name = name }, { __index = Scheduler, __call = function(c, optimizer, ...)
    return c.new(c, optimizer, constructor_args.merge(name, params, kinds, NOT_REFUSED, ...))
  end })
  cls.__index = cls
  return cls
end

local function check_optimizer(cls, optimizer)
  if type(optimizer) ~= "table" or type(optimizer.param_groups) ~= "table" then
    errors.raise(cls.name .. ": first argument must be an optimizer")
  end
end

-- the base state; groups get initial_lr (if they have none yet) when last_epoch is -1
function Scheduler.init(cls, optimizer, opts)
  check_optimizer(cls, optimizer)
  local self = setmetatable({ optimizer = optimizer, last_epoch = opts.last_epoch or -1, base_lrs = {} }, cls)
  for i, g in ipairs(optimizer.param_groups) do
    if self.last_epoch == -1 and g.initial_lr == nil then g.initial_lr = g.lr end
    if g.initial_lr == nil then
      errors.raise(cls.name .. ": param group " .. i .. " has no initial_lr (last_epoch given)")
    end
    self.base_lrs[i] = g.initial_lr
  end
  return self
end

-- the step every constructor ends with
function Scheduler:_initial_step()
  self._step_count = 0
  self:step()
end

-- step(): the next epoch; step(epoch): jump to epoch (the closed form where the class has one)
function Scheduler:step(epoch)
  if epoch ~= nil and (type(epoch) ~= "number" or epoch ~= epoch) then
    errors.raise(string.format("%s.step: epoch must be a number, got %s", self.name, tostring(epoch)))
  end
  self._step_count = self._step_count + 1
  local lrs
  if epoch == nil then
    self.last_epoch = self.last_epoch + 1
    lrs = self:get_lr()
  else
    self.last_epoch = epoch
    lrs = self.closed_form_lr and self:closed_form_lr() or self:get_lr()
  end
  for i, g in ipairs(self.optimizer.param_groups) do g.lr = lrs[i] end
  self._last_lr = lrs
end

function Scheduler:get_last_lr() return self._last_lr end

-- a deep copy of a state value (name: the scheduler, for the error on a cycle or deep nesting)
local function copy(v, name, depth)
  if type(v) ~= "table" then return v end
  depth = (depth or 0) + 1
  if depth > 16 then errors.raise(name .. ".load_state_dict: the state is nested too deep (a cycle?)") end
  local out = {}
  for k, x in pairs(v) do out[k] = copy(x, name, depth) end
  return out
end

-- every field but the optimizer and functions (PyTorch's state_dict: its __dict__ minus the optimizer)
function Scheduler:state_dict()
  local sd = {}
  for k, v in pairs(self) do
    if k ~= "optimizer" and type(v) ~= "function" then sd[k] = copy(v) end
  end
  return sd
end

-- sd's fields into the scheduler: only fields of its own state (not its optimizer, not its functions),
-- each of the kind it has now; checked before any is written
function Scheduler:load_state_dict(sd)
  local name = self.name
  if type(sd) ~= "table" then errors.raise(name .. ".load_state_dict: expects a table") end
  local copies = {}
  for k, v in pairs(sd) do
    local cur = rawget(self, k)
    if type(k) ~= "string" or k == "optimizer" or type(cur) == "function" or type(v) == "function" then
      errors.raise(string.format("%s.load_state_dict: '%s' is not a field of the scheduler's state", name, tostring(k)))
    end
    if cur ~= nil and type(v) ~= type(cur) then
      errors.raise(string.format("%s.load_state_dict: '%s' must be a %s, got %s", name, k, type(cur), type(v)))
    end
    copies[k] = copy(v, name)
  end
  for k, v in pairs(copies) do self[k] = v end
end

-- per group lr list from a function of (group, base_lr, i)
local function each_group(self, fn)
  local out = {}
  for i, g in ipairs(self.optimizer.param_groups) do out[i] = fn(g, self.base_lrs[i], i) end
  return out
end

Scheduler._each_group = each_group -- for the schedulers of other files

local function need_number(cls, opts, key, check)
  local v = opts[key]
  if type(v) ~= "number" or not check(v) then
    errors.raise(string.format("%s: invalid %s %s", cls.name, key, tostring(v)))
  end
  return v
end

local M = { Scheduler = Scheduler }

-- lr *= gamma every step_size epochs
local StepLR = Scheduler.extend("StepLR", { "step_size", "gamma" },
  { step_size = { "integer", min = 1 }, gamma = "number" })
function StepLR.new(cls, optimizer, opts)
  opts = opts or {}
  if type(opts.step_size) ~= "number" or opts.step_size < 1 then
    errors.raise("StepLR: step_size must be a positive integer")
  end
  local self = Scheduler.init(cls, optimizer, opts)
  self.step_size, self.gamma = opts.step_size, opts.gamma or 0.1
  self:_initial_step()
  return self
end
function StepLR:get_lr()
  return each_group(self, function(g)
    if self.last_epoch == 0 or self.last_epoch % self.step_size ~= 0 then return g.lr end
    return g.lr * self.gamma
  end)
end
function StepLR:closed_form_lr()
  return each_group(self, function(_, base) return base * self.gamma ^ math.floor(self.last_epoch / self.step_size) end)
end
M.StepLR = StepLR

-- lr *= gamma at each milestone epoch (a milestone listed k times multiplies by gamma^k)
local MultiStepLR = Scheduler.extend("MultiStepLR", { "milestones", "gamma" },
  { milestones = "table", gamma = "number" })
function MultiStepLR.new(cls, optimizer, opts)
  opts = opts or {}
  if type(opts.milestones) ~= "table" then errors.raise("MultiStepLR: milestones must be a list of epochs") end
  local self = Scheduler.init(cls, optimizer, opts)
  self.milestones, self.gamma = {}, opts.gamma or 0.1
  for _, m in ipairs(opts.milestones) do self.milestones[#self.milestones + 1] = m end
  table.sort(self.milestones)
  self:_initial_step()
  return self
end
local function count_le(list, e, strict)
  local n = 0
  for _, m in ipairs(list) do if (strict and m == e) or (not strict and m <= e) then n = n + 1 end end
  return n
end
function MultiStepLR:get_lr()
  local k = count_le(self.milestones, self.last_epoch, true)
  return each_group(self, function(g) return k == 0 and g.lr or g.lr * self.gamma ^ k end)
end
function MultiStepLR:closed_form_lr()
  local k = count_le(self.milestones, self.last_epoch, false)
  return each_group(self, function(_, base) return base * self.gamma ^ k end)
end
M.MultiStepLR = MultiStepLR

-- lr *= gamma every epoch
local ExponentialLR = Scheduler.extend("ExponentialLR", { "gamma" }, { gamma = "number" })
function ExponentialLR.new(cls, optimizer, opts)
  opts = opts or {}
  local self = Scheduler.init(cls, optimizer, opts)
  self.gamma = need_number(cls, opts, "gamma", function(v) return v > 0 end)
  self:_initial_step()
  return self
end
function ExponentialLR:get_lr()
  return each_group(self, function(g) return self.last_epoch == 0 and g.lr or g.lr * self.gamma end)
end
function ExponentialLR:closed_form_lr()
  return each_group(self, function(_, base) return base * self.gamma ^ self.last_epoch end)
end
M.ExponentialLR = ExponentialLR

-- lr = base_lr * lr_lambda(epoch); lr_lambda: a function or one per group (not in state_dict)
local LambdaLR = Scheduler.extend("LambdaLR", { "lr_lambda" }, { lr_lambda = "any" })
function LambdaLR.new(cls, optimizer, opts)
  opts = opts or {}
  check_optimizer(cls, optimizer)
  local fns = opts.lr_lambda
  if type(fns) == "function" then
    fns = {}
    for i = 1, #optimizer.param_groups do fns[i] = opts.lr_lambda end
  end
  if type(fns) ~= "table" or #fns ~= #optimizer.param_groups then
    errors.raise("LambdaLR: lr_lambda must be a function or one function per param group")
  end
  local self = Scheduler.init(cls, optimizer, opts)
  self.lr_lambdas = fns
  self:_initial_step()
  return self
end
function LambdaLR:get_lr()
  return each_group(self, function(_, base, i) return base * self.lr_lambdas[i](self.last_epoch) end)
end
function LambdaLR:state_dict()
  local sd = Scheduler.state_dict(self)
  sd.lr_lambdas = nil
  return sd
end
M.LambdaLR = LambdaLR

-- the factor goes linearly from start_factor to end_factor over total_iters epochs
local LinearLR = Scheduler.extend("LinearLR", { "start_factor", "end_factor", "total_iters" },
  { start_factor = "number", end_factor = "number", total_iters = { "integer", min = 1 } })
function LinearLR.new(cls, optimizer, opts)
  opts = opts or {}
  local self = Scheduler.init(cls, optimizer, opts)
  self.start_factor, self.end_factor, self.total_iters = opts.start_factor or 1 / 3, opts.end_factor or 1,
    opts.total_iters or 5
  if self.start_factor <= 0 or self.start_factor > 1 or self.end_factor < 0 or self.end_factor > 1 then
    errors.raise("LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1]")
  end
  self:_initial_step()
  return self
end
function LinearLR:get_lr()
  local e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
  return each_group(self, function(g)
    if e == 0 then return g.lr * s end
    if e > n then return g.lr end
    return g.lr * (1 + (f - s) / (n * s + (e - 1) * (f - s)))
  end)
end
function LinearLR:closed_form_lr()
  local s, f, n = self.start_factor, self.end_factor, self.total_iters
  return each_group(self, function(_, base) return base * (s + (f - s) * math.min(n, self.last_epoch) / n) end)
end
M.LinearLR = LinearLR

-- cosine from the base lr down to eta_min over T_max epochs
local CosineAnnealingLR = Scheduler.extend("CosineAnnealingLR", { "T_max", "eta_min" },
  { T_max = { "number", min = 1 }, eta_min = "number" })
function CosineAnnealingLR.new(cls, optimizer, opts)
  opts = opts or {}
  if type(opts.T_max) ~= "number" or opts.T_max <= 0 then
    errors.raise("CosineAnnealingLR: T_max must be a positive number")
  end
  local self = Scheduler.init(cls, optimizer, opts)
  self.T_max, self.eta_min = opts.T_max, opts.eta_min or 0
  self:_initial_step()
  return self
end
function CosineAnnealingLR:get_lr()
  local e, T, emin = self.last_epoch, self.T_max, self.eta_min
  return each_group(self, function(g, base)
    if e == 0 then return g.lr end
    if self._step_count == 1 and e > 0 then return emin + (base - emin) * (1 + math.cos(e * math.pi / T)) / 2 end
    if (e - 1 - T) % (2 * T) == 0 then return g.lr + (base - emin) * (1 - math.cos(math.pi / T)) / 2 end
    return (1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T)) * (g.lr - emin) + emin
  end)
end
function CosineAnnealingLR:closed_form_lr()
  return each_group(self, function(_, base)
    return self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
  end)
end
M.CosineAnnealingLR = CosineAnnealingLR

-- cosine annealing restarted every T_i epochs (T_0, then T_i *= T_mult); step(epoch) takes fractional
-- epochs for per-batch schedules
local WarmRestarts = Scheduler.extend("CosineAnnealingWarmRestarts", { "T_0", "T_mult", "eta_min" },
  { T_0 = "number", T_mult = "number", eta_min = "number" })
function WarmRestarts.new(cls, optimizer, opts)
  opts = opts or {}
  local T_0 = need_number(cls, opts, "T_0", function(v) return v >= 1 and v % 1 == 0 end)
  local self = Scheduler.init(cls, optimizer, opts)
  self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, opts.T_mult or 1, opts.eta_min or 0
  if self.T_mult < 1 or self.T_mult % 1 ~= 0 then
    errors.raise("CosineAnnealingWarmRestarts: T_mult must be an integer >= 1")
  end
  self.T_cur = self.last_epoch
  self:_initial_step()
  return self
end
function WarmRestarts:get_lr()
  return each_group(self, function(_, base)
    return self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
  end)
end
function WarmRestarts:step(epoch)
  if epoch == nil and self.last_epoch < 0 then epoch = 0 end
  if epoch == nil then
    epoch = self.last_epoch + 1
    self.T_cur = self.T_cur + 1
    if self.T_cur >= self.T_i then
      self.T_cur = self.T_cur - self.T_i
      self.T_i = self.T_i * self.T_mult
    end
  else
    if epoch < 0 then errors.raise("CosineAnnealingWarmRestarts: epoch must be non-negative, got " .. epoch) end
    if epoch >= self.T_0 then
      if self.T_mult == 1 then
        self.T_cur = epoch % self.T_0
      else
        local n = math.floor(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1) / math.log(self.T_mult))
        self.T_cur = epoch - self.T_0 * (self.T_mult ^ n - 1) / (self.T_mult - 1)
        self.T_i = self.T_0 * self.T_mult ^ n
      end
    else
      self.T_i, self.T_cur = self.T_0, epoch
    end
  end
  self.last_epoch = math.floor(epoch)
  self._step_count = self._step_count + 1
  local lrs = self:get_lr()
  for i, g in ipairs(self.optimizer.param_groups) do g.lr = lrs[i] end
  self._last_lr = lrs
end
M.CosineAnnealingWarmRestarts = WarmRestarts

return M
