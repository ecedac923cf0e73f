-- optim/adagrad.lua: Adagrad (torch 1.13 formulas: lr_decay, weight_decay, initial_accumulator_value, maximize),
-- one fused update kernel per parameter; state per parameter: step, sum.
local Optimizer = require("ds.optim.optimizer")
local D = require("ds.dispatch")
local defs = require("ds.ops.optim").defs
local errors = require("ds.errors")
local F = require("ds.ops")

local update = defs.adagrad_update

local Adagrad = Optimizer:extend("Adagrad", { lr = 1e-2, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0,
                                              eps = 1e-10, maximize = false },
  { "lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps" })

function Adagrad.check_group(g)
  for _, k in ipairs { "lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps" } do
    if type(g[k]) ~= "number" or g[k] < 0 then errors.raise("Adagrad: invalid " .. k .. " " .. tostring(g[k])) end
  end
end

Adagrad.updates, Adagrad.update_choice = { update }, "one update"
function Adagrad:_update() return update end

function Adagrad:step()
  for gi, g in ipairs(self.param_groups) do
    local hp = self:_hyper(gi, update)
    for _, p in ipairs(g.params) do
      local grad = Optimizer.grad_of(p)
      if grad then
        local st = self.state[p]
        if not st then
          st = { step = F.zeros({}), sum = F.full_like(p, g.initial_accumulator_value) }
          self.state[p] = st
        end
        D.call(update, { p, grad, st.sum, st.step, hp })
      end
    end
  end
end

return Adagrad
