-- nn/activation.lua: ReLU, GELU, Tanh, Sigmoid, SiLU, Softmax, LogSoftmax as modules.
local Module = require("ds.nn.module")
local options = require("ds.options")
local F = require("ds.nn.functional")

local M = {}

local function simple(name, fn)
  local cls = Module:extend(name)
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
