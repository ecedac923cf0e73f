-- optim/cyclic_lr.lua: CyclicLR (torch 1.13): the lr cycles between base_lr and max_lr (step_size_up batches up,
-- step_size_down down), scaled per cycle or per iteration (triangular, triangular2, exp_range, or scale_fn with
-- scale_mode); with cycle_momentum the momentum (or Adam-like optimizers' beta1) cycles the other way between
-- base_momentum and max_momentum. step() once per batch.
local Scheduler = require("ds.optim.lr_scheduler").Scheduler
local errors = require("ds.errors")

local CyclicLR = Scheduler.extend("CyclicLR", { "base_lr", "max_lr", "step_size_up", "step_size_down", "mode",
  "gamma", "scale_fn", "scale_mode", "cycle_momentum", "base_momentum", "max_momentum" },
  { base_lr = "any", max_lr = "any", step_size_up = { "number", min = 0 }, step_size_down = { "number", min = 0 },
    mode = "string", gamma = "number", scale_fn = "function", scale_mode = { "cycle", "iterations" },
    cycle_momentum = "boolean", base_momentum = "any", max_momentum = "any" })

-- the built-in scale functions of x (the cycle, or the iteration for exp_range) and their scale modes
local MODES = {
  triangular = { function() return 1. end, "cycle" },
  triangular2 = { function(_, x) return 1 / (2. ^ (x - 1)) end, "cycle" },
  exp_range = { function(self, x) return self.gamma ^ x end, "iterations" },
}

-- a number, or a list of one number per param group
local function per_group(optimizer, name, v)
  local n, out = #optimizer.param_groups, {}
  if type(v) == "table" and #v ~= n then
    errors.raise(string.format("CyclicLR: expected %d values for %s, got %d", n, name, #v))
  end
  for i = 1, n do
    out[i] = type(v) == "table" and v[i] or v
    if type(out[i]) ~= "number" then
      errors.raise("CyclicLR: " .. name .. " must be a number or one number per param group")
    end
  end
  return out
end

-- the group's momentum, or beta1 of its betas
local function get_momentum(use_beta1, g) if use_beta1 then return g.betas[1] end return g.momentum end
local function set_momentum(use_beta1, g, m)
  if use_beta1 then g.betas = { m, g.betas[2] } else g.momentum = m end
end

-- opts: base_lr, max_lr (required); step_size_up (2000), step_size_down (step_size_up), mode ("triangular"),
-- gamma (1), scale_fn (nil), scale_mode ("cycle"), cycle_momentum (true), base_momentum (0.8),
-- max_momentum (0.9), last_epoch (-1)
function CyclicLR.new(cls, optimizer, opts)
  if type(optimizer) ~= "table" or type(optimizer.param_groups) ~= "table" then
    errors.raise("CyclicLR: first argument must be an optimizer")
  end
  if opts.base_lr == nil or opts.max_lr == nil then errors.raise("CyclicLR: base_lr and max_lr are required") end
  local last_epoch = opts.last_epoch or -1
  local base_lrs = per_group(optimizer, "base_lr", opts.base_lr)
  if last_epoch == -1 then
    for i, g in ipairs(optimizer.param_groups) do g.lr = base_lrs[i] end
  end
  local max_lrs = per_group(optimizer, "max_lr", opts.max_lr)
  local up = opts.step_size_up or 2000
  local down = opts.step_size_down or up
  if up + down <= 0 then errors.raise("CyclicLR: step_size_up + step_size_down must be positive") end
  local mode = opts.mode or "triangular"
  if not MODES[mode] and opts.scale_fn == nil then
    errors.raise("CyclicLR: mode must be 'triangular', 'triangular2' or 'exp_range' (or give scale_fn), got " ..
      tostring(mode))
  end
  local cycle = opts.cycle_momentum ~= false
  local use_beta1, base_m, max_m = false, nil, nil
  if cycle then
    local d = optimizer.defaults or {}
    if d.momentum == nil and d.betas == nil then
      errors.raise("CyclicLR: the optimizer has neither momentum nor betas; pass cycle_momentum = false")
    end
    use_beta1 = d.momentum == nil
    local m = per_group(optimizer, "base_momentum", opts.base_momentum or 0.8)
    base_m = {}
    for i, g in ipairs(optimizer.param_groups) do
      if last_epoch == -1 then set_momentum(use_beta1, g, m[i]) end
      base_m[i] = get_momentum(use_beta1, g)
    end
    max_m = per_group(optimizer, "max_momentum", opts.max_momentum or 0.9)
  end
  local self = Scheduler.init(cls, optimizer, { last_epoch = last_epoch })
  self.max_lrs, self.total_size = max_lrs, up + down
  self.step_ratio = up / self.total_size
  self.mode, self.gamma = mode, opts.gamma or 1.
  if opts.scale_fn then
    self._scale_fn_custom, self.scale_mode = opts.scale_fn, opts.scale_mode or "cycle"
  else
    self.scale_mode = MODES[mode][2]
  end
  self.cycle_momentum, self.use_beta1 = cycle, use_beta1
  self.base_momentums, self.max_momentums = base_m, max_m
  self:_initial_step()
  self.base_lrs = base_lrs
  return self
end

function CyclicLR:scale_fn(x)
  if self._scale_fn_custom then return self._scale_fn_custom(x) end
  return MODES[self.mode][1](self, x)
end

function CyclicLR:get_lr()
  local e = self.last_epoch
  local cycle = math.floor(1 + e / self.total_size)
  local x = 1. + e / self.total_size - cycle
  local scale_factor
  if x <= self.step_ratio then scale_factor = x / self.step_ratio
  else scale_factor = (x - 1) / (self.step_ratio - 1) end
  local scale = self:scale_fn(self.scale_mode == "cycle" and cycle or e)
  local lrs = {}
  for i, base in ipairs(self.base_lrs) do
    lrs[i] = base + (self.max_lrs[i] - base) * scale_factor * scale
  end
  if self.cycle_momentum then
    for i, g in ipairs(self.optimizer.param_groups) do
      local maxm = self.max_momentums[i]
      set_momentum(self.use_beta1, g, maxm - (maxm - self.base_momentums[i]) * scale_factor * scale)
    end
  end
  return lrs
end

return CyclicLR
