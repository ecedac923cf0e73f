-- optim/single_update.lua: an Optimizer class whose groups all take one fused update kernel (RAdam, NAdam, Adamax,
-- Adadelta): its step() builds a parameter's state on first use and calls the kernel.
local Optimizer = require("ds.optim.optimizer")
local D = require("ds.dispatch")

-- name, defaults, positional: as Optimizer:extend; def: the update (ops/optim.lua); values(self, g): the group's
-- hyper-parameters by the def's names; state(p) builds a new parameter's state; operands(st) lists the state
-- operands between the grad and the hyper-parameters, in the kernel's order
local function single_update(name, defaults, positional, def, state, operands, values)
  local cls = Optimizer:extend(name, defaults, positional)
  cls.updates, cls.update_choice = { def }, "one update"
  function cls._update() return def end
  cls._values = values
  function cls:step()
    for gi, g in ipairs(self.param_groups) do
      local hp = self:_hyper(gi, def)
      for _, p in ipairs(g.params) do
        local grad = Optimizer.grad_of(p)
        if grad then
          local st = self.state[p]
          if not st then st = state(p); self.state[p] = st end
          local inputs = { p, grad }
          for _, x in ipairs(operands(st)) do inputs[#inputs + 1] = x end
          inputs[#inputs + 1] = hp
          D.call(def, inputs, {})
        end
      end
    end
  end
  return cls
end

return single_update

