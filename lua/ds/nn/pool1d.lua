-- nn/pool1d.lua: MaxPool1d, AvgPool1d, AdaptiveAvgPool1d, AdaptiveMaxPool1d, PixelShuffle and PixelUnshuffle
-- as modules over their ds.F functions (PyTorch's constructor arguments, positionally or as options).
local Module = require("ds.nn.module")
local F = require("ds.nn.functional")
local constructor_args = require("ds.nn.constructor_args")
local errors = require("ds.errors")

local M = {}
local NOT_REFUSED = {}

-- kernel_size, then PyTorch's order: stride (kernel_size), padding, dilation, ... (the pool's own flags)
local function pool(name, fn, params, kinds)
  local cls = Module:extend(name)
  function cls:init(kernel_size, ...)
    if kernel_size == nil then errors.raise(name .. ": expects " .. name .. "(kernel_size, ...)") end
    self.kernel_size, self.opts = kernel_size, constructor_args.merge(name, params, kinds, NOT_REFUSED, ...)
  end
  function cls:forward(x) return fn(x, self.kernel_size, self.opts) end
  function cls:extra_repr()
    return string.format("kernel_size=%s, stride=%s, padding=%s", tostring(self.kernel_size),
      tostring(self.opts.stride or self.kernel_size), tostring(self.opts.padding or 0))
  end
  M[name] = cls
end
pool("MaxPool1d", F.max_pool1d, { "stride", "padding", "dilation", "return_indices", "ceil_mode" },
  { stride = "any", padding = "any", dilation = "any", return_indices = "boolean", ceil_mode = "boolean" })
pool("AvgPool1d", F.avg_pool1d, { "stride", "padding", "ceil_mode", "count_include_pad" },
  { stride = "any", padding = "any", ceil_mode = "boolean", count_include_pad = "boolean" })

local function one_arg(name, fn, param, kind, extra)
  local cls = Module:extend(name)
  function cls:init(...)
    local params, kinds = { param }, { [param] = kind }
    if extra then params[2] = extra; kinds[extra] = "boolean" end
    local opts = constructor_args.merge(name, params, kinds, NOT_REFUSED, ...)
    if opts[param] == nil then errors.raise(name .. ": expects " .. name .. "(" .. param .. ")") end
    self[param], self.flag = opts[param], extra and opts[extra]
  end
  function cls:forward(x) return fn(x, self[param], self.flag) end
  function cls:extra_repr() return param .. "=" .. tostring(self[param]) end
  M[name] = cls
end
one_arg("AdaptiveAvgPool1d", F.adaptive_avg_pool1d, "output_size", "any")
one_arg("AdaptiveMaxPool1d", F.adaptive_max_pool1d, "output_size", "any", "return_indices")
one_arg("PixelShuffle", F.pixel_shuffle, "upscale_factor", "integer")
one_arg("PixelUnshuffle", F.pixel_unshuffle, "downscale_factor", "integer")

return M
