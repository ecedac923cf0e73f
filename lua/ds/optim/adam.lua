-- optim/adam.lua: Adam and AdamW (torch 1.13 formulas, bias correction included, amsgrad, maximize), one fused
-- update kernel per parameter; state per parameter: step (f32), exp_avg, exp_avg_sq (and max_exp_avg_sq
-- with amsgrad).
local Optimizer = require("ds.optim.optimizer")
local D = require("ds.dispatch")
local defs = require("ds.ops.optim").defs
local errors = require("ds.errors")
local F = require("ds.ops")

local update, amsgrad_update = defs.adam_update, defs.adam_amsgrad_update

-- lr, eps, betas and weight_decay of a group of Adam or its variants (RAdam, NAdam, Adamax)
local function check_group(g, name)
  if g.lr < 0 then errors.raise(name .. ": invalid lr " .. g.lr) end
  if g.eps < 0 then errors.raise(name .. ": invalid eps " .. g.eps) end
  local b1, b2 = type(g.betas) == "table" and g.betas[1], type(g.betas) == "table" and g.betas[2]
  if type(b1) ~= "number" or type(b2) ~= "number" or not (b1 >= 0 and b1 < 1 and b2 >= 0 and b2 < 1) then
    errors.raise(name .. ": betas must be {beta1, beta2} in [0, 1)")
  end
  if g.weight_decay < 0 then errors.raise(name .. ": invalid weight_decay " .. g.weight_decay) end
end

local function update_of(_, g) return g.amsgrad and amsgrad_update or update end

local function values(_, g)
  return { lr = g.lr, beta1 = g.betas[1], beta2 = g.betas[2], eps = g.eps, weight_decay = g.weight_decay,
    maximize = g.maximize }
end

local function step(self)
  local attrs = { decoupled = self.decoupled }
  for gi, g in ipairs(self.param_groups) do
    local op = self:_update(g)
    local hp = self:_hyper(gi, op)
    for _, p in ipairs(g.params) do
      local grad = Optimizer.grad_of(p)
      if grad then
        local st = self.state[p]
        if not st then
          st = { step = F.zeros({}), exp_avg = F.zeros_like(p), exp_avg_sq = F.zeros_like(p) }
          self.state[p] = st
        end
        if op == amsgrad_update then
          st.max_exp_avg_sq = st.max_exp_avg_sq or F.zeros_like(p)
          D.call(amsgrad_update, { p, grad, st.exp_avg, st.exp_avg_sq, st.max_exp_avg_sq, st.step, hp }, attrs)
        else
          D.call(update, { p, grad, st.exp_avg, st.exp_avg_sq, st.step, hp }, attrs)
        end
      end
    end
  end
end

local POSITIONAL = { "lr", "betas", "eps", "weight_decay", "amsgrad" } -- PyTorch's order, Adam's and AdamW's
local Adam = Optimizer:extend("Adam",
  { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0, amsgrad = false, maximize = false },
  POSITIONAL)
Adam.check_group, Adam.step, Adam.decoupled = check_group, step, false
Adam._update, Adam._values, Adam.update_choice = update_of, values, "amsgrad chooses it"
Adam.updates = { update, amsgrad_update }

local AdamW = Optimizer:extend("AdamW",
  { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 1e-2, amsgrad = false, maximize = false },
  POSITIONAL)
AdamW.check_group, AdamW.step, AdamW.decoupled = check_group, step, true
AdamW._update, AdamW._values, AdamW.update_choice = update_of, values, "amsgrad chooses it"
AdamW.updates = Adam.updates

return { Adam = Adam, AdamW = AdamW, check_group = check_group, values = values }
