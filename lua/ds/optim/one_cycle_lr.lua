-- optim/one_cycle_lr.lua: OneCycleLR (torch 1.13): lr rises from max_lr / div_factor to max_lr over
-- pct_start of total_steps, then anneals (cos or linear) to initial_lr / final_div_factor (three_phase:
-- back to initial_lr first); momentum (or Adam's beta1) cycles the other way. step() once per batch.
local Scheduler = require("ds.optim.lr_scheduler").Scheduler
local errors = require("ds.errors")

local OneCycleLR = Scheduler.extend("OneCycleLR", { "max_lr", "total_steps", "epochs", "steps_per_epoch",
  "pct_start", "anneal_strategy", "cycle_momentum", "base_momentum", "max_momentum", "div_factor", "final_div_factor",
  "three_phase" }, { max_lr = "any", total_steps = { "integer", min = 1 },
  epochs = { "integer", min = 1 }, steps_per_epoch = { "integer", min = 1 }, pct_start = "number",
  anneal_strategy = { "cos", "linear" }, cycle_momentum = "boolean", base_momentum = "any", max_momentum = "any",
  div_factor = "number", final_div_factor = "number", three_phase = "boolean" })

local anneal = {
  cos = function(a, b, pct) return b + (a - b) / 2 * (math.cos(math.pi * pct) + 1) end,
  linear = function(a, b, pct) return (b - a) * pct + a end,
}

-- a number, or one per param group
local function per_group(optimizer, name, v)
  local out = {}
  for i = 1, #optimizer.param_groups do
    out[i] = type(v) == "table" and v[i] or v
    if type(out[i]) ~= "number" then
      errors.raise("OneCycleLR: " .. name .. " must be a number or one per param group")
    end
  end
  return out
end

-- opts: max_lr; total_steps or epochs and steps_per_epoch; pct_start (0.3), anneal_strategy ("cos"),
-- cycle_momentum (true), base_momentum (0.85), max_momentum (0.95), div_factor (25),
-- final_div_factor (1e4), three_phase (false), last_epoch (-1)
function OneCycleLR.new(cls, optimizer, opts)
  opts = opts or {}
  if type(optimizer) ~= "table" or type(optimizer.param_groups) ~= "table" then
    errors.raise("OneCycleLR: first argument must be an optimizer")
  end
  local total = opts.total_steps
  if total == nil then
    if type(opts.epochs) ~= "number" or type(opts.steps_per_epoch) ~= "number" then
      errors.raise("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
    end
    total = opts.epochs * opts.steps_per_epoch
  end
  if type(total) ~= "number" or total <= 0 then errors.raise("OneCycleLR: total_steps must be positive") end
  local pct = opts.pct_start or 0.3
  if pct < 0 or pct > 1 then errors.raise("OneCycleLR: pct_start must be in [0, 1]") end
  local strategy = opts.anneal_strategy or "cos"
  if not anneal[strategy] then errors.raise("OneCycleLR: anneal_strategy must be 'cos' or 'linear'") end
  local phases
  if opts.three_phase then
    phases = {
      { pct * total - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum" },
      { 2 * pct * total - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum" },
      { total - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum" },
    }
  else
    phases = {
      { pct * total - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum" },
      { total - 1, "max_lr", "min_lr", "base_momentum", "max_momentum" },
    }
  end
  local last_epoch = opts.last_epoch or -1
  local div, final_div = opts.div_factor or 25, opts.final_div_factor or 1e4
  local max_lrs = per_group(optimizer, "max_lr", opts.max_lr)
  if last_epoch == -1 then
    for i, g in ipairs(optimizer.param_groups) do
      g.initial_lr = max_lrs[i] / div
      g.max_lr = max_lrs[i]
      g.min_lr = g.initial_lr / final_div
    end
  end
  local cycle = opts.cycle_momentum ~= false
  local use_beta1 = false
  if cycle then
    local d = optimizer.defaults or {}
    if d.momentum == nil and d.betas == nil then
      errors.raise("OneCycleLR: optimizer has neither momentum nor betas; pass cycle_momentum = false")
    end
    use_beta1 = d.betas ~= nil
    local maxm = per_group(optimizer, "max_momentum", opts.max_momentum or 0.95)
    local basem = per_group(optimizer, "base_momentum", opts.base_momentum or 0.85)
    if last_epoch == -1 then
      for i, g in ipairs(optimizer.param_groups) do
        if use_beta1 then g.betas = { maxm[i], g.betas[2] } else g.momentum = maxm[i] end
        g.max_momentum, g.base_momentum = maxm[i], basem[i]
      end
    end
  end
  local self = Scheduler.init(cls, optimizer, { last_epoch = last_epoch })
  self.total_steps, self.phases, self.anneal_strategy = total, phases, strategy
  self.cycle_momentum, self.use_beta1 = cycle, use_beta1
  self:_initial_step()
  return self
end

function OneCycleLR:get_lr()
  local step = self.last_epoch
  if step > self.total_steps then
    errors.raise(string.format("OneCycleLR: stepped %d times, more than total_steps %d", step, self.total_steps))
  end
  local fn, lrs = anneal[self.anneal_strategy], {}
  for gi, g in ipairs(self.optimizer.param_groups) do
    local start = 0
    for i, ph in ipairs(self.phases) do
      local stop = ph[1]
      if step <= stop or i == #self.phases then
        local pct = (step - start) / (stop - start)
        lrs[gi] = fn(g[ph[2]], g[ph[3]], pct)
        if self.cycle_momentum then
          local m = fn(g[ph[4]], g[ph[5]], pct)
          if self.use_beta1 then g.betas = { m, g.betas[2] } else g.momentum = m end
        end
        break
      end
      start = stop
    end
  end
  return lrs
end

return OneCycleLR
