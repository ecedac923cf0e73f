-- nn/linear.lua: Linear and Identity.
local Module = require("ds.nn.module")
local options = require("ds.options")
local F = require("ds.nn.functional")
local init = require("ds.nn.init_weights")
local ops = require("ds.ops")
local errors = require("ds.errors")

local M = {}

-- x: (..., in_features) -> (..., out_features); opts: bias (default true), dtype
local Linear = Module:extend("Linear")
function Linear:init(in_features, out_features, opts)
  if type(in_features) ~= "number" or type(out_features) ~= "number" then
    errors.raise("Linear: expects Linear(in_features, out_features, [opts])")
  end
  opts = options.check(opts, "Linear", { bias = "boolean", dtype = "dtype" })
  self.in_features, self.out_features = in_features, out_features
  local dt = opts.dtype or "f32"
  self.weight = Module.Parameter(init.default_weight_(ops.empty(out_features, in_features, { dtype = dt })))
  if opts.bias ~= false then
    self.bias = Module.Parameter(init.default_bias_(ops.empty(out_features, { dtype = dt }), self.weight))
  end
end
function Linear:forward(x) return F.linear(x, self.weight, self.bias) end
function Linear:extra_repr()
  return string.format("in_features=%d, out_features=%d, bias=%s", self.in_features, self.out_features,
    tostring(self.bias ~= nil))
end
M.Linear = Linear

local Identity = Module:extend("Identity")
function Identity:forward(x) return x end
M.Identity = Identity

return M
