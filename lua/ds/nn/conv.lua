-- nn/conv.lua: Conv2d, MaxPool2d, AvgPool2d.
local Module = require("ds.nn.module")
local options = require("ds.options")
local F = require("ds.nn.functional")
local init = require("ds.nn.init_weights")
local ops = require("ds.ops")
local errors = require("ds.errors")
local conv_padding = require("ds.nn.conv_padding")

local M = {}

local function pair(v) if type(v) == "table" then return v end return { v, v } end
local function pair_str(v)
  if type(v) == "string" then return "'" .. v .. "'" end
  local p = pair(v)
  return "(" .. p[1] .. ", " .. p[2] .. ")"
end

-- x: (N,C,H,W) -> (N,OC,OH,OW); opts: stride, padding (number, pair, "same", "valid"), dilation, groups, bias,
-- padding_mode ("zeros", "reflect", "replicate", "circular"), dtype
local Conv2d = Module:extend("Conv2d")
function Conv2d:init(in_channels, out_channels, kernel_size, opts)
  if type(in_channels) ~= "number" or type(out_channels) ~= "number" or kernel_size == nil then
    errors.raise("Conv2d: expects Conv2d(in_channels, out_channels, kernel_size, [opts])")
  end
  opts = options.check(opts, "Conv2d", { stride = "any", padding = "any", dilation = "any",
    groups = { "integer", min = 1 },
    bias = "boolean", padding_mode = conv_padding.MODES, dtype = "dtype" })
  local groups = opts.groups or 1
  if in_channels % groups ~= 0 or out_channels % groups ~= 0 then
    errors.raise(string.format("Conv2d: in_channels %d and out_channels %d must be divisible by groups %d", in_channels,
      out_channels, groups))
  end
  self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, pair(kernel_size)
  self.stride, self.padding, self.dilation, self.groups = opts.stride or 1, opts.padding or 0,
    opts.dilation or 1, groups
  self.padding_mode = opts.padding_mode or "zeros"
  local k = self.kernel_size
  local dt = opts.dtype or "f32"
  self.weight = Module.Parameter(init.default_weight_(ops.empty(out_channels, in_channels / groups, k[1], k[2],
    { dtype = dt })))
  if opts.bias ~= false then
    self.bias = Module.Parameter(init.default_bias_(ops.empty(out_channels, { dtype = dt }), self.weight))
  end
end
function Conv2d:forward(x)
  local padding = self.padding
  if self.padding_mode ~= "zeros" then
    x = conv_padding.pad(x, self.padding_mode, padding, self.kernel_size, pair(self.dilation), 2)
    padding = 0
  end
  return F.conv2d(x, self.weight, self.bias, { stride = self.stride, padding = padding, dilation = self.dilation,
    groups = self.groups })
end
function Conv2d:extra_repr()
  local s = string.format("%d, %d, kernel_size=%s, stride=%s", self.in_channels, self.out_channels,
    pair_str(self.kernel_size), pair_str(self.stride))
  if self.padding ~= 0 then s = s .. ", padding=" .. pair_str(self.padding) end
  if self.dilation ~= 1 then s = s .. ", dilation=" .. pair_str(self.dilation) end
  if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
  if self.bias == nil then s = s .. ", bias=false" end
  if self.padding_mode ~= "zeros" then s = s .. ", padding_mode=" .. self.padding_mode end
  return s
end
M.Conv2d = Conv2d

-- pools: kernel_size, opts stride (default kernel_size), padding, ceil_mode, and `extra` (the pool's own flags)
local function pool(name, fn, extra)
  local cls = Module:extend(name)
  local spec = { stride = "any", padding = "any", ceil_mode = "boolean" }
  for k, kind in pairs(extra or {}) do spec[k] = kind end
  function cls:init(kernel_size, opts)
    if kernel_size == nil then errors.raise(name .. ": expects " .. name .. "(kernel_size, [opts])") end
    opts = options.check(opts, name, spec)
    self.kernel_size, self.stride, self.padding = kernel_size, opts.stride or kernel_size, opts.padding or 0
    self.flags = {}
    for k in pairs(spec) do if k ~= "stride" and k ~= "padding" then self.flags[k] = opts[k] end end
  end
  function cls:forward(x)
    local o = { stride = self.stride, padding = self.padding }
    for k, v in pairs(self.flags) do o[k] = v end
    return fn(x, self.kernel_size, o)
  end
  function cls:extra_repr()
    return string.format("kernel_size=%s, stride=%s, padding=%s", pair_str(self.kernel_size), pair_str(self.stride),
      pair_str(self.padding))
  end
  return cls
end
M.MaxPool2d = pool("MaxPool2d", F.max_pool2d, { dilation = "any" })
M.AvgPool2d = pool("AvgPool2d", F.avg_pool2d, { count_include_pad = "boolean", divisor_override = "integer" })

return M
