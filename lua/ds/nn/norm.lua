-- nn/norm.lua: BatchNorm1d, BatchNorm2d (running stats as buffers, updated in place while
-- training) and LayerNorm.
local Module = require("ds.nn.module")
local options = require("ds.options")
local F = require("ds.nn.functional")
local ops = require("ds.ops")
local autograd = require("ds.autograd")
local errors = require("ds.errors")
local S = require("ds.shape")

local M = {}

-- opts: eps (1e-5), momentum (0.1; false is PyTorch's momentum=None: the running stats are the cumulative
-- average of the batches' statistics, factor 1 / num_batches_tracked), affine (true), track_running_stats
-- (true), dtype
local function batch_norm(name, ndims_ok, dims_text)
  local cls = Module:extend(name)
  cls._doc = name .. "(num_features, [opts]): opts eps (1e-5), momentum (0.1; false = PyTorch's momentum=None, a " ..
    "cumulative moving average), affine (true), track_running_stats (true), dtype"
  function cls:init(num_features, opts)
    if type(num_features) ~= "number" then errors.raise(name .. ": expects " .. name .. "(num_features, [opts])") end
    opts = options.check(opts, name, { eps = { "number", min = 0 }, momentum = "any",
                                       affine = "boolean", track_running_stats = "boolean", dtype = "dtype" })
    local m = opts.momentum -- false: PyTorch's momentum=None (nil is the default, 0.1)
    if m ~= nil and m ~= false and not (type(m) == "number" and m >= 0 and m <= 1) then
      errors.raise(string.format("%s: option 'momentum' must be a number in [0, 1] or false (a cumulative " ..
        "average), got %s", self._name, tostring(m)))
    end
    local dt = opts.dtype or "f32"
    self.num_features, self.eps, self.momentum = num_features, opts.eps or 1e-5, m == nil and 0.1 or m
    self.affine, self.track_running_stats = opts.affine ~= false, opts.track_running_stats ~= false
    if self.affine then
      self.weight = Module.Parameter(ops.ones(num_features, { dtype = dt }))
      self.bias = Module.Parameter(ops.zeros(num_features, { dtype = dt }))
    end
    if self.track_running_stats then
      self:register_buffer("running_mean", ops.zeros(num_features, { dtype = dt }))
      self:register_buffer("running_var", ops.ones(num_features, { dtype = dt }))
      self:register_buffer("num_batches_tracked", ops.zeros({}, { dtype = "i64" }))
    end
  end
  function cls:forward(x)
    local n = #x._shape
    if not ndims_ok[n] then
      errors.raise(string.format("%s: expected %s input, got %s", name, dims_text, S.str(x._shape)))
    end
    if not S.same(x._shape[2], self.num_features) then
      errors.raise(string.format("%s: input %s has %s channels in dim 2, layer has %d", name, S.str(x._shape),
        tostring(x._shape[2]), self.num_features))
    end
    local use_batch = self.training or not self.track_running_stats
    local momentum = self.momentum == false and 0 or self.momentum
    if self.training and self.track_running_stats then
      local nbt, dt = self.num_batches_tracked, self.running_mean.dtype
      autograd.no_grad(function() nbt:add_(1) end)
      -- the cumulative average's factor, a tensor so that a traced step reads the count at every call
      if self.momentum == false then momentum = 1 / nbt:to(dt) end
    end
    return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_batch,
      momentum, self.eps)
  end
  function cls:extra_repr()
    return string.format("%d, eps=%g, momentum=%s, affine=%s, track_running_stats=%s", self.num_features, self.eps,
      self.momentum == false and "None" or string.format("%g", self.momentum), tostring(self.affine),
      tostring(self.track_running_stats))
  end
  return cls
end
M.BatchNorm1d = batch_norm("BatchNorm1d", { [2] = true, [3] = true }, "2-D (N,C) or 3-D (N,C,L)")
M.BatchNorm2d = batch_norm("BatchNorm2d", { [4] = true }, "4-D (N,C,H,W)")

-- x: (..., *normalized_shape); opts: eps (1e-5), elementwise_affine (true), bias (true), dtype
local LayerNorm = Module:extend("LayerNorm")
function LayerNorm:init(normalized_shape, opts)
  if type(normalized_shape) == "number" then normalized_shape = { normalized_shape } end
  if type(normalized_shape) ~= "table" then errors.raise("LayerNorm: expects LayerNorm(normalized_shape, [opts])") end
  opts = options.check(opts, "LayerNorm", { eps = { "number", min = 0 }, elementwise_affine = "boolean",
    bias = "boolean",
                                            dtype = "dtype" })
  local dt = opts.dtype or "f32"
  self.normalized_shape, self.eps = normalized_shape, opts.eps or 1e-5
  self.elementwise_affine = opts.elementwise_affine ~= false
  if self.elementwise_affine then
    self.weight = Module.Parameter(ops.ones(normalized_shape, { dtype = dt }))
    if opts.bias ~= false then self.bias = Module.Parameter(ops.zeros(normalized_shape, { dtype = dt })) end
  end
end
function LayerNorm:forward(x) return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps) end
function LayerNorm:extra_repr()
  return string.format("%s, eps=%g, elementwise_affine=%s", S.str(self.normalized_shape), self.eps,
    tostring(self.elementwise_affine))
end
M.LayerNorm = LayerNorm

return M
