-- optim/adadelta.lua: Adadelta (torch 1.13 formulas and defaults: lr 1, rho, eps, weight_decay, maximize), one
-- fused update kernel per parameter; state per parameter: step, square_avg, acc_delta.
local variant = require("ds.optim.single_update")
local errors = require("ds.errors")
local defs = require("ds.ops.optim").defs
local F = require("ds.ops")

local Adadelta = variant("Adadelta", { lr = 1.0, rho = 0.9, eps = 1e-6, weight_decay = 0, maximize = false },
  { "lr", "rho", "eps", "weight_decay" }, defs.adadelta_update,
  function(p) return { step = F.zeros({}), square_avg = F.zeros_like(p), acc_delta = F.zeros_like(p) } end,
  function(st) return { st.square_avg, st.acc_delta, st.step } end,
  function(_, g) return g end)

function Adadelta.check_group(g)
  for _, k in ipairs { "lr", "eps", "weight_decay" } do
    if type(g[k]) ~= "number" or g[k] < 0 then errors.raise("Adadelta: invalid " .. k .. " " .. tostring(g[k])) end
  end
  if type(g.rho) ~= "number" or g.rho < 0 or g.rho > 1 then
    errors.raise("Adadelta: invalid rho " .. tostring(g.rho))
  end
end

return Adadelta
