-- nn/activation.lua: ReLU, GELU, Tanh, Sigmoid, SiLU, Softplus, Softmax, LogSoftmax as modules.
local Module = require("ds.nn.module")
local constructor_args = require("ds.nn.constructor_args")
local F = require("ds.nn.functional")
local ops = require("ds.ops.common").functions

local M = {}

local NO_OPTIONS, INPLACE, NOT_REFUSED = {}, { inplace = "boolean" }, {}

-- has_inplace: PyTorch's constructor takes inplace (ReLU(inplace), SiLU(inplace)); ds takes false only
local function simple(name, fn, has_inplace)
  local cls = Module:extend(name)
  cls._doc = "elementwise " .. name:lower()
  function cls:init(...)
    if has_inplace then
      constructor_args.no_inplace(name, constructor_args.merge(name, { "inplace" }, INPLACE, NOT_REFUSED, ...))
    else constructor_args.merge(name, {}, NO_OPTIONS, NOT_REFUSED, ...) end
  end
  function cls:forward(x) return fn(x) end
  M[name] = cls
end
simple("ReLU", F.relu, true)
simple("Tanh", F.tanh, false)
simple("Sigmoid", F.sigmoid, false)
simple("SiLU", F.silu, true)

-- approximate: "none" (default) or "tanh", positionally or as an option
local GELU = Module:extend("GELU")
function GELU:init(...)
  local opts = constructor_args.merge("GELU", { "approximate" }, { approximate = { "none", "tanh" } }, NOT_REFUSED, ...)
  self.approximate = opts.approximate or "none"
end
function GELU:forward(x) return F.gelu(x, { approximate = self.approximate }) end
function GELU:extra_repr() return self.approximate ~= "none" and "approximate='" .. self.approximate .. "'" or "" end
M.GELU = GELU

-- log(1 + exp(beta x)) / beta, x where beta x > threshold; beta (1), threshold (20) positionally or as options
local Softplus = Module:extend("Softplus")
function Softplus:init(...)
  local opts = constructor_args.merge("Softplus", { "beta", "threshold" }, { beta = "number", threshold = "number" },
    NOT_REFUSED, ...)
  self.beta, self.threshold = opts.beta or 1, opts.threshold or 20
end
function Softplus:forward(x) return ops.softplus(x, self.beta, self.threshold) end
function Softplus:extra_repr()
  return string.format("beta=%s, threshold=%s", tostring(self.beta), tostring(self.threshold))
end
M.Softplus = Softplus

local function along_dim(name, fn)
  local cls = Module:extend(name)
  function cls:init(...)
    self.dim = constructor_args.merge(name, { "dim" }, { dim = "integer" }, NOT_REFUSED, ...).dim or -1
  end
  function cls:forward(x) return fn(x, self.dim) end
  function cls:extra_repr() return "dim=" .. self.dim end
  M[name] = cls
end
along_dim("Softmax", F.softmax)
along_dim("LogSoftmax", F.log_softmax)

return M
