-- nn/pool3d.lua: MaxPool3d, AvgPool3d, AdaptiveAvgPool3d and AdaptiveMaxPool3d as modules over their ds.F
-- functions (PyTorch's constructor arguments, positionally or as options).
local Module = require("ds.nn.module")
local F = require("ds.nn.functional")
local constructor_args = require("ds.nn.constructor_args")
local errors = require("ds.errors")

local M = {}
local NOT_REFUSED = {}

-- kernel_size, then PyTorch's order of the pool's options
local function pool(name, fn, params, kinds)
  local cls = Module:extend(name)
  cls._doc = "ds.F." .. name:gsub("^(%u%l+)Pool3d$", "%1"):lower() .. "_pool3d as a module: " .. name ..
    "(kernel_size, " .. table.concat(params, ", ") .. ")"
  function cls:init(kernel_size, ...)
    if kernel_size == nil then errors.raise(name .. ": expects " .. name .. "(kernel_size, ...)") end
    self.kernel_size, self.opts = kernel_size, constructor_args.merge(name, params, kinds, NOT_REFUSED, ...)
  end
  function cls:forward(x) return fn(x, self.kernel_size, self.opts) end
  M[name] = cls
end
pool("MaxPool3d", F.max_pool3d, { "stride", "padding", "dilation", "return_indices", "ceil_mode" },
  { stride = "any", padding = "any", dilation = "any", return_indices = "boolean", ceil_mode = "boolean" })
pool("AvgPool3d", F.avg_pool3d, { "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override" },
  { stride = "any", padding = "any", ceil_mode = "boolean", count_include_pad = "boolean", divisor_override = "any" })

-- output_size (a number or a list of 3), and return_indices for the max
local function adaptive(name, fn, has_indices)
  local cls = Module:extend(name)
  cls._doc = "ds.F." .. (has_indices and "adaptive_max_pool3d" or "adaptive_avg_pool3d") .. " as a module: " .. name ..
    "(output_size" .. (has_indices and ", return_indices)" or ")")
  function cls:init(...)
    local params, kinds = { "output_size" }, { output_size = "any" }
    if has_indices then params[2] = "return_indices"; kinds.return_indices = "boolean" end
    local opts = constructor_args.merge(name, params, kinds, NOT_REFUSED, ...)
    if opts.output_size == nil then errors.raise(name .. ": expects " .. name .. "(output_size)") end
    self.output_size, self.return_indices = opts.output_size, opts.return_indices
  end
  function cls:forward(x) return fn(x, self.output_size, self.return_indices) end
  M[name] = cls
end
adaptive("AdaptiveAvgPool3d", F.adaptive_avg_pool3d, false)
adaptive("AdaptiveMaxPool3d", F.adaptive_max_pool3d, true)

return M
