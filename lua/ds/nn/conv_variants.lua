-- nn/conv_variants.lua: Conv1d and ConvTranspose2d (PyTorch's weight layouts and initialization), the
-- adaptive pools AdaptiveAvgPool2d / AdaptiveMaxPool2d, and Upsample.
local Module = require("ds.nn.module")
local options = require("ds.options")
local F = require("ds.nn.functional")
local init = require("ds.nn.init_weights")
local ops = require("ds.ops")
local errors = require("ds.errors")
local conv_padding = require("ds.nn.conv_padding")

local M = {}

local function pair(v) if type(v) == "table" then return v end return { v, v } end
local function check_channels(name, in_channels, out_channels, groups)
  if type(in_channels) ~= "number" or type(out_channels) ~= "number" then
    errors.raise(name .. ": expects " .. name .. "(in_channels, out_channels, kernel_size, [opts])")
  end
  if in_channels % groups ~= 0 or out_channels % groups ~= 0 then
    errors.raise(string.format("%s: in_channels %d and out_channels %d must be divisible by groups %d", name,
      in_channels, out_channels, groups))
  end
end
-- weight of `shape` (kaiming uniform, a = sqrt(5)) and bias (uniform by fan-in), as PyTorch's conv layers
local function parameters(self, shape, out_channels, opts)
  local dt = opts.dtype or "f32"
  self.weight = Module.Parameter(init.default_weight_(ops.empty(shape, { dtype = dt })))
  if opts.bias ~= false then
    self.bias = Module.Parameter(init.default_bias_(ops.empty(out_channels, { dtype = dt }), self.weight))
  end
end

-- x: (N,C,L) -> (N,OC,OL); weight (OC, C/groups, K); opts stride, padding (number, "same", "valid"), dilation, groups,
-- bias, padding_mode ("zeros", "reflect", "replicate", "circular"), dtype
local Conv1d = Module:extend("Conv1d")
function Conv1d:init(in_channels, out_channels, kernel_size, opts)
  opts = options.check(opts, "Conv1d", { stride = { "integer", min = 1 }, padding = "any",
    dilation = { "integer", min = 1 },
    groups = { "integer", min = 1 }, bias = "boolean", padding_mode = conv_padding.MODES, dtype = "dtype" })
  local groups = opts.groups or 1
  check_channels("Conv1d", in_channels, out_channels, groups)
  if type(kernel_size) ~= "number" then errors.raise("Conv1d: kernel_size must be a number") end
  self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel_size
  self.stride, self.padding, self.dilation, self.groups = opts.stride or 1, opts.padding or 0,
    opts.dilation or 1, groups
  self.padding_mode = opts.padding_mode or "zeros"
  parameters(self, { out_channels, in_channels / groups, kernel_size }, out_channels, opts)
end
function Conv1d:forward(x)
  local padding = self.padding
  if self.padding_mode ~= "zeros" then
    x = conv_padding.pad(x, self.padding_mode, padding, { self.kernel_size }, { self.dilation }, 1)
    padding = 0
  end
  return F.conv1d(x, self.weight, self.bias, { stride = self.stride, padding = padding, dilation = self.dilation,
    groups = self.groups })
end
function Conv1d:extra_repr()
  return string.format("%d, %d, kernel_size=%d, stride=%d", self.in_channels, self.out_channels,
    self.kernel_size, self.stride)
end
M.Conv1d = Conv1d

-- x: (N,C,H,W) -> (N,OC,OH,OW); weight (C, OC/groups, KH, KW); opts stride, padding, output_padding, dilation, groups,
-- bias, padding_mode ("zeros" only, as PyTorch), dtype; forward(x[, output_size]) as PyTorch's
local ConvTranspose2d = Module:extend("ConvTranspose2d")
function ConvTranspose2d:init(in_channels, out_channels, kernel_size, opts)
  opts = options.check(opts, "ConvTranspose2d", { stride = "any", padding = "any", output_padding = "any",
    dilation = "any",
    groups = { "integer", min = 1 }, bias = "boolean", padding_mode = { "zeros" }, dtype = "dtype" })
  local groups = opts.groups or 1
  check_channels("ConvTranspose2d", in_channels, out_channels, groups)
  local k = pair(kernel_size)
  self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, k
  self.conv_opts = { stride = opts.stride or 1, padding = opts.padding or 0, output_padding = opts.output_padding or 0,
                     dilation = opts.dilation or 1, groups = groups }
  parameters(self, { in_channels, out_channels / groups, k[1], k[2] }, out_channels, opts)
end
function ConvTranspose2d:forward(x, output_size)
  if output_size == nil then return F.conv_transpose2d(x, self.weight, self.bias, self.conv_opts) end
  local o = {}
  for k, v in pairs(self.conv_opts) do o[k] = v end
  o.output_padding = conv_padding.output_padding("ConvTranspose2d", x, output_size, self.kernel_size, pair(o.stride),
    pair(o.padding), pair(o.dilation), 2)
  return F.conv_transpose2d(x, self.weight, self.bias, o)
end
function ConvTranspose2d:extra_repr()
  return string.format("%d, %d, kernel_size=(%d, %d)", self.in_channels, self.out_channels, self.kernel_size[1],
    self.kernel_size[2])
end
M.ConvTranspose2d = ConvTranspose2d

-- output_size: a number or {OH, OW}; the max pool also takes return_indices (PyTorch's second argument)
local function adaptive(name, fn)
  local cls = Module:extend(name)
  function cls:init(output_size, return_indices)
    if type(output_size) ~= "number" and type(output_size) ~= "table" then
      errors.raise(name .. ": expects " .. name .. "(output_size)")
    end
    if return_indices ~= nil and (name ~= "AdaptiveMaxPool2d" or type(return_indices) ~= "boolean") then
      errors.raise(name .. ": takes " .. (name == "AdaptiveMaxPool2d" and "(output_size, return_indices)" or
        "one argument (output_size)"))
    end
    self.output_size, self.return_indices = output_size, return_indices
  end
  function cls:forward(x) return fn(x, self.output_size, self.return_indices) end
  M[name] = cls
end
adaptive("AdaptiveAvgPool2d", F.adaptive_avg_pool2d)
adaptive("AdaptiveMaxPool2d", F.adaptive_max_pool2d)

-- opts as F.interpolate: size or scale_factor, mode, align_corners, recompute_scale_factor
local Upsample = Module:extend("Upsample")
function Upsample:init(opts)
  self.opts = options.check(opts, "Upsample", { size = "any", scale_factor = "any", mode = "string",
    align_corners = "boolean", recompute_scale_factor = "boolean" })
end
function Upsample:forward(x) return F.interpolate(x, self.opts) end
M.Upsample = Upsample

return M
