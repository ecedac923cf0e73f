-- nn/conv3d.lua: Conv3d, ConvTranspose1d and ConvTranspose3d (PyTorch's constructors, weight layouts,
-- initialization and padding modes) over ds.F.conv3d / conv_transpose1d / conv_transpose3d.
local Module = require("ds.nn.module")
local options = require("ds.options")
local F = require("ds.nn.functional")
local init = require("ds.nn.init_weights")
local ops = require("ds.ops")
local errors = require("ds.errors")
local conv_padding = require("ds.nn.conv_padding")

local M = {}

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end
local function tuple(v, n)
  if type(v) == "table" then return v end
  local t = {}
  for i = 1, n do t[i] = v end
  return t
end
local function tuple_str(v)
  if type(v) == "string" then return "'" .. v .. "'" end
  local parts = {}
  for i, x in ipairs(v) do parts[i] = tostring(x) end
  return "(" .. table.concat(parts, ", ") .. (#parts == 1 and ",)" or ")")
end

-- the shared constructor: name, spatial dims n, transposed; weight (OC, C/g, k...) or (C, OC/g, k...)
local function conv_class(name, n, transposed, fn)
  local spec = { stride = "any", padding = "any", dilation = "any", groups = { "integer", min = 1 }, bias = "boolean",
    padding_mode = conv_padding.MODES, dtype = "dtype" }
  if transposed then spec.output_padding = "any" end
  local cls = Module:extend(name)
  cls._doc = "ds.F." .. (transposed and "conv_transpose" or "conv") .. n .. "d as a module: " .. name ..
    "(in_channels, out_channels, kernel_size, [{stride, padding, " .. (transposed and "output_padding, " or "") ..
    "dilation, groups, bias, padding_mode, dtype}])"
  function cls:init(in_channels, out_channels, kernel_size, opts)
    if type(in_channels) ~= "number" or type(out_channels) ~= "number" or kernel_size == nil then
      raise("%s: expects %s(in_channels, out_channels, kernel_size, [opts])", name, name)
    end
    opts = options.check(opts, name, spec)
    local groups = opts.groups or 1
    if in_channels % groups ~= 0 or out_channels % groups ~= 0 then
      raise("%s: in_channels %d and out_channels %d must be divisible by groups %d", name, in_channels, out_channels,
        groups)
    end
    local mode = opts.padding_mode or "zeros"
    if transposed and mode ~= "zeros" then raise("%s: only padding_mode 'zeros' is supported, got '%s'", name, mode) end
    if transposed and type(opts.padding) == "string" then
      raise("%s: padding must be a number or a list, got '%s'", name, opts.padding)
    end
    local k = tuple(kernel_size, n)
    if #k ~= n then raise("%s: kernel_size must be a number or a list of %d", name, n) end
    self.in_channels, self.out_channels, self.kernel_size, self.groups = in_channels, out_channels, k, groups
    self.stride, self.padding = tuple(opts.stride or 1, n), opts.padding or 0
    self.dilation = tuple(opts.dilation or 1, n)
    if type(self.padding) ~= "string" then self.padding = tuple(self.padding, n) end
    if self.padding == "same" and mode ~= "zeros" then
      for i = 1, n do
        if self.stride[i] ~= 1 then raise("%s: padding 'same' needs stride 1", name) end
      end
    end
    self.output_padding = transposed and tuple(opts.output_padding or 0, n) or nil
    self.padding_mode = mode
    local shape = transposed and { in_channels, out_channels / groups } or { out_channels, in_channels / groups }
    for i = 1, n do shape[#shape + 1] = k[i] end
    local dt = opts.dtype or "f32"
    self.weight = Module.Parameter(init.default_weight_(ops.empty(shape, { dtype = dt })))
    if opts.bias ~= false then
      self.bias = Module.Parameter(init.default_bias_(ops.empty(out_channels, { dtype = dt }), self.weight))
    end
  end
  -- a padding mode other than zeros pads with F.pad first (nn/conv_padding.lua)
  -- forward(x[, output_size]) (transposed: the output_padding that gives output_size)
  function cls:forward(x, output_size)
    local o = { stride = self.stride, dilation = self.dilation, groups = self.groups, padding = self.padding,
      output_padding = self.output_padding }
    if output_size ~= nil then
      if not transposed then raise("%s: forward takes one input", name) end
      o.output_padding = conv_padding.output_padding(name, x, output_size, self.kernel_size, self.stride, self.padding,
        self.dilation, n)
    end
    if n == 1 and transposed then
      for _, key in ipairs { "stride", "dilation", "padding", "output_padding" } do o[key] = o[key][1] end
    end
    if self.padding_mode ~= "zeros" then
      x = conv_padding.pad(x, self.padding_mode, self.padding, self.kernel_size, self.dilation, n)
      o.padding = 0
    end
    return fn(x, self.weight, self.bias, o)
  end
  function cls:extra_repr()
    local s = string.format("%d, %d, kernel_size=%s, stride=%s", self.in_channels, self.out_channels,
      tuple_str(self.kernel_size), tuple_str(self.stride))
    if self.padding ~= 0 then s = s .. ", padding=" .. tuple_str(self.padding) end
    if self.output_padding then s = s .. ", output_padding=" .. tuple_str(self.output_padding) end
    s = s .. ", dilation=" .. tuple_str(self.dilation)
    if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
    if self.bias == nil then s = s .. ", bias=false" end
    if self.padding_mode ~= "zeros" then s = s .. ", padding_mode=" .. self.padding_mode end
    return s
  end
  M[name] = cls
end
conv_class("Conv3d", 3, false, F.conv3d)
conv_class("ConvTranspose1d", 1, true, F.conv_transpose1d)
conv_class("ConvTranspose3d", 3, true, F.conv_transpose3d)

return M
