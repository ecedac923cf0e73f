-- nn/activation_functional.lua: the activations of nn/functional_activation.lua as modules (PyTorch's names and
-- options): LeakyReLU, ELU, SELU, CELU, Hardtanh, ReLU6, Hardsigmoid, Hardswish, Mish, LogSigmoid, Softsign, GLU,
-- Softshrink, Hardshrink, Tanhshrink.
local Module = require("ds.nn.module")
local constructor_args = require("ds.nn.constructor_args")
local F = require("ds.nn.functional")

local M = {}

-- name -> { ds.F function's name, option specs in the order F takes them as arguments, defaults, whether
-- PyTorch's constructor ends with inplace }
local ACTIVATIONS = {
  LeakyReLU = { "leaky_relu", { "negative_slope" }, { 0.01 }, true },
  ELU = { "elu", { "alpha" }, { 1 }, true },
  SELU = { "selu", {}, {}, true },
  CELU = { "celu", { "alpha" }, { 1 }, true },
  Hardtanh = { "hardtanh", { "min_val", "max_val" }, { -1, 1 }, true },
  ReLU6 = { "relu6", {}, {}, true },
  Hardsigmoid = { "hardsigmoid", {}, {}, true },
  Hardswish = { "hardswish", {}, {}, true },
  Mish = { "mish", {}, {}, true },
  LogSigmoid = { "logsigmoid", {}, {}, false },
  Softsign = { "softsign", {}, {}, false },
  GLU = { "glu", { "dim" }, { -1 }, false },
  Softshrink = { "softshrink", { "lambd" }, { 0.5 }, false },
  Hardshrink = { "hardshrink", { "lambd" }, { 0.5 }, false },
  Tanhshrink = { "tanhshrink", {}, {}, false },
}

for name, spec in pairs(ACTIVATIONS) do
  local fn, keys, defaults = F[spec[1]], spec[2], spec[3]
  local kinds, params = {}, {}
  for i, k in ipairs(keys) do kinds[k] = k == "dim" and "integer" or "number"; params[i] = k end
  if spec[4] then kinds.inplace = "boolean"; params[#params + 1] = "inplace" end
  local cls = Module:extend(name)
  local shown = {}
  for i, k in ipairs(keys) do shown[i] = k .. " = " .. tostring(defaults[i]) end
  cls._doc = "ds.F." .. spec[1] .. " as a module" .. (#keys > 0 and " (options: " ..
    table.concat(shown, ", ") .. ")" or "")
  -- Name({key = value}) with the keys of `keys`, or PyTorch's positional form (LeakyReLU(0.2), Hardtanh(-2, 2))
  function cls:init(...)
    local opts = constructor_args.no_inplace(name, constructor_args.merge(name, params, kinds, {}, ...))
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
