-- nn/activation.lua: ReLU, GELU, Tanh, Sigmoid, SiLU, Softplus, Softmax, LogSoftmax as modules.
local Module = require("ds.nn.module")
local options = require("ds.options")
local F = require("ds.nn.functional")
local ops = require("ds.ops.common").functions

local M = {}

local function simple(name, fn)
  local cls = Module:extend(name)
  cls._doc = "elementwise " .. name:lower()
  function cls:forward(x) return fn(x) end
  M[name] = cls
end
simple("ReLU", F.relu)
simple("Tanh", F.tanh)
simple("Sigmoid", F.sigmoid)
simple("SiLU", F.silu)

-- opts.approximate: "none" (default) or "tanh"
local GELU = Module:extend("GELU")
function GELU:init(opts)
  self.approximate = options.check(opts, "GELU", { approximate = { "none", "tanh" } }).approximate or "none"
end
function GELU:forward(x) return F.gelu(x, { approximate = self.approximate }) end
function GELU:extra_repr() return self.approximate ~= "none" and "approximate='" .. self.approximate .. "'" or "" end
M.GELU = GELU

-- log(1 + exp(beta x)) / beta, x where beta x > threshold; opts: beta (1), threshold (20)
local Softplus = Module:extend("Softplus")
function Softplus:init(opts)
  opts = options.check(opts, "Softplus", { beta = "number", threshold = "number" })
  self.beta, self.threshold = opts.beta or 1, opts.threshold or 20
end
function Softplus:forward(x) return ops.softplus(x, self.beta, self.threshold) end
function Softplus:extra_repr() return string.format("beta=%s, threshold=%s", tostring(self.beta), tostring(self.threshold)) end
M.Softplus = Softplus

local function along_dim(name, fn)
  local cls = Module:extend(name)
  function cls:init(dim) self.dim = dim or -1 end
  function cls:forward(x) return fn(x, self.dim) end
  function cls:extra_repr() return "dim=" .. self.dim end
  M[name] = cls
end
along_dim("Softmax", F.softmax)
along_dim("LogSoftmax", F.log_softmax)

return M
