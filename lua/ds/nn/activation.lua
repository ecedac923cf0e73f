-- nn/activation.lua: ReLU, GELU, Tanh, Sigmoid, SiLU, Softplus, Softmax, LogSoftmax, Softmin, Threshold and
-- PReLU (a learned slope) as modules.
local Module = require("ds.nn.module")
local constructor_args = require("ds.nn.constructor_args")
local errors = require("ds.errors")
local F = require("ds.nn.functional")
local ops = require("ds.ops")
local init_weights = require("ds.nn.init_weights")

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
along_dim("Softmin", F.softmin)

-- x where x > threshold, else value: Threshold(threshold, value[, inplace = false])
local Threshold = Module:extend("Threshold")
function Threshold:init(...)
  local opts = constructor_args.no_inplace("Threshold", constructor_args.merge("Threshold",
    { "threshold", "value", "inplace" }, { threshold = "number", value = "number", inplace = "boolean" }, NOT_REFUSED, ...))
  if opts.threshold == nil or opts.value == nil then
    errors.raise("Threshold: expects Threshold(threshold, value)")
  end
  self.threshold, self.value = opts.threshold, opts.value
end
function Threshold:forward(x) return F.threshold(x, self.threshold, self.value) end
function Threshold:extra_repr() return string.format("threshold=%s, value=%s", tostring(self.threshold), tostring(self.value)) end
M.Threshold = Threshold

-- PReLU(num_parameters = 1, init = 0.25[, {dtype =}]): weight (num_parameters), one slope per channel or shared
local PReLU = Module:extend("PReLU")
function PReLU:init(...)
  local opts = constructor_args.merge("PReLU", { "num_parameters", "init" },
    { num_parameters = { "integer", min = 1 }, init = "number", dtype = "dtype" }, NOT_REFUSED, ...)
  self.num_parameters = opts.num_parameters or 1
  self.weight = Module.Parameter(init_weights.constant_(ops.empty(self.num_parameters, { dtype = opts.dtype or "f32" }),
    opts.init or 0.25))
end
function PReLU:forward(x) return F.prelu(x, self.weight) end
function PReLU:extra_repr() return "num_parameters=" .. self.num_parameters end
M.PReLU = PReLU

return M
