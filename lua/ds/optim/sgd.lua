-- optim/sgd.lua: SGD with momentum, dampening, Nesterov, weight decay and maximize (torch 1.13 formulas),
-- one fused update kernel per parameter (the hyper-parameters its operand: compiled steps follow schedulers).
local Optimizer = require("ds.optim.optimizer")
local D = require("ds.dispatch")
local defs = require("ds.ops.optim").defs
local errors = require("ds.errors")
local F = require("ds.ops")

local SGD = Optimizer:extend("SGD", { lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false,
                                    maximize = false },
  { "lr", "momentum", "dampening", "weight_decay", "nesterov" })

function SGD.check_group(g)
  if g.lr < 0 then errors.raise("SGD: invalid lr " .. g.lr) end
  if g.momentum < 0 then errors.raise("SGD: invalid momentum " .. g.momentum) end
  if g.weight_decay < 0 then errors.raise("SGD: invalid weight_decay " .. g.weight_decay) end
  if g.nesterov and (g.momentum <= 0 or g.dampening ~= 0) then
    errors.raise("SGD: nesterov needs momentum > 0 and dampening = 0")
  end
end

local plain, with_momentum = defs.sgd_update, defs.sgd_momentum_update

SGD.updates, SGD.update_choice = { plain, with_momentum }, "momentum 0 or not chooses it"
function SGD:_update(g) return g.momentum == 0 and plain or with_momentum end

-- maximize without momentum: p -= (-lr) * (-g + (-wd) * p), torch's p -= lr * (-g + wd * p) bit for bit
-- (negation is exact and rounding symmetric); with momentum the kernel negates the gradient
function SGD:_values(g)
  if g.maximize == true and g.momentum == 0 then
    return { lr = -g.lr, weight_decay = -g.weight_decay }
  end
  return g
end

function SGD:step()
  for gi, g in ipairs(self.param_groups) do
    local update = self:_update(g)
    local hp = self:_hyper(gi, update)
    for _, p in ipairs(g.params) do
      local grad = Optimizer.grad_of(p)
      if grad then
        if update == plain then
          D.call(plain, { p, grad, hp })
        else
          local st = self.state[p]
          if not st then
            st = { momentum_buffer = F.zeros_like(p), step = F.zeros({}) }
            self.state[p] = st
          end
          D.call(with_momentum, { p, grad, st.momentum_buffer, st.step, hp })
        end
      end
    end
  end
end

return SGD
