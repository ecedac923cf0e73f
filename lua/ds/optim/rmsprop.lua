-- optim/rmsprop.lua: RMSprop (torch 1.13 formulas: weight decay, momentum, centered, maximize), one fused update
-- kernel per parameter; state per parameter: step, square_avg, and with momentum or centering
-- momentum_buffer and grad_avg (both kept when either is on: the kernel updates them together).
local Optimizer = require("ds.optim.optimizer")
local D = require("ds.dispatch")
local defs = require("ds.ops.optim").defs
local errors = require("ds.errors")
local F = require("ds.ops")

local plain, full = defs.rmsprop_update, defs.rmsprop_full_update

local RMSprop = Optimizer:extend("RMSprop", { lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0,
                                              centered = false, maximize = false },
  { "lr", "alpha", "eps", "weight_decay", "momentum", "centered" })

function RMSprop.check_group(g)
  for _, k in ipairs { "lr", "alpha", "eps", "weight_decay", "momentum" } do
    if type(g[k]) ~= "number" or g[k] < 0 then errors.raise("RMSprop: invalid " .. k .. " " .. tostring(g[k])) end
  end
end

RMSprop.updates, RMSprop.update_choice = { plain, full }, "momentum > 0 or centered chooses it"
function RMSprop:_update(g) return (g.momentum > 0 or g.centered) and full or plain end

function RMSprop:step()
  for gi, g in ipairs(self.param_groups) do
    local update = self:_update(g)
    local hp = self:_hyper(gi, update)
    for _, p in ipairs(g.params) do
      local grad = Optimizer.grad_of(p)
      if grad then
        local st = self.state[p]
        if not st then
          st = { step = F.zeros({}), square_avg = F.zeros_like(p) }
          self.state[p] = st
        end
        if update == full then
          st.grad_avg = st.grad_avg or F.zeros_like(p)
          st.momentum_buffer = st.momentum_buffer or F.zeros_like(p)
          D.call(full, { p, grad, st.square_avg, st.grad_avg, st.momentum_buffer, st.step, hp })
        else
          D.call(plain, { p, grad, st.square_avg, st.step, hp })
        end
      end
    end
  end
end

return RMSprop
