-- nn/activation_functional.lua: the activations of nn/functional_activation.lua as modules (PyTorch's names and
-- options): LeakyReLU, ELU, SELU, CELU, Hardtanh, ReLU6, Hardsigmoid, Hardswish, Mish, LogSigmoid, Softsign, GLU.
local Module = require("ds.nn.module")
local options = require("ds.options")
local F = require("ds.nn.functional")

local M = {}

-- name -> { ds.F function's name, option specs in the order F takes them as arguments, defaults }
local ACTIVATIONS = {
  LeakyReLU = { "leaky_relu", { "negative_slope" }, { 0.01 } },
  ELU = { "elu", { "alpha" }, { 1 } },
  SELU = { "selu", {}, {} },
  CELU = { "celu", { "alpha" }, { 1 } },
  Hardtanh = { "hardtanh", { "min_val", "max_val" }, { -1, 1 } },
  ReLU6 = { "relu6", {}, {} },
  Hardsigmoid = { "hardsigmoid", {}, {} },
  Hardswish = { "hardswish", {}, {} },
  Mish = { "mish", {}, {} },
  LogSigmoid = { "logsigmoid", {}, {} },
  Softsign = { "softsign", {}, {} },
  GLU = { "glu", { "dim" }, { -1 } },
}

for name, spec in pairs(ACTIVATIONS) do
  local fn, keys, defaults = F[spec[1]], spec[2], spec[3]
  local kinds = {}
  for _, k in ipairs(keys) do kinds[k] = k == "dim" and "integer" or "number" end
  local cls = Module:extend(name)
  local shown = {}
  for i, k in ipairs(keys) do shown[i] = k .. " = " .. tostring(defaults[i]) end
  cls._doc = "ds.F." .. spec[1] .. " as a module" .. (#keys > 0 and " (options: " ..
    table.concat(shown, ", ") .. ")" or "")
  -- Name({key = value}) with the keys of `keys`; or the first key positionally (LeakyReLU(0.2), GLU(2))
  function cls:init(opts)
    if type(opts) == "number" and #keys > 0 then opts = { [keys[1]] = opts } end
    opts = options.check(opts, name, kinds)
    self.args = {}
    for i, k in ipairs(keys) do self.args[i] = opts[k] == nil and defaults[i] or opts[k] end
  end
  function cls:forward(x) return fn(x, unpack(self.args, 1, #keys)) end
  function cls:extra_repr()
    local parts = {}
    for i, k in ipairs(keys) do parts[i] = k .. "=" .. tostring(self.args[i]) end
    return table.concat(parts, ", ")
  end
  M[name] = cls
end

return M
