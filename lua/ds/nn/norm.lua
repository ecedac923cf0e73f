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

-- opts: eps (1e-5), momentum (0.1), affine (true), track_running_stats (true), dtype
local function batch_norm(name, ndims_ok, dims_text)
  local cls = Module:extend(name)
  function cls:init(num_features, opts)
    if type(num_features) ~= "number" then errors.raise(name .. ": expects " .. name .. "(num_features, [opts])") end
    -- momentum: a number; PyTorch's momentum=None (a cumulative average) is not implemented
    opts = options.check(opts, name, { eps = { "number", min = 0 }, momentum = { "number", min = 0, max = 1 },
                                       affine = "boolean", track_running_stats = "boolean", dtype = "dtype" })
    local dt = opts.dtype or "f32"
    self.num_features, self.eps, self.momentum = num_features, opts.eps or 1e-5, opts.momentum or 0.1
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
    if self.training and self.track_running_stats then
      local nbt = self.num_batches_tracked
      autograd.no_grad(function() nbt:add_(1) end)
    end
    return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_batch,
      self.momentum, self.eps)
  end
  function cls:extra_repr()
    return string.format("%d, eps=%g, momentum=%g, affine=%s, track_running_stats=%s", self.num_features, self.eps,
      self.momentum, tostring(self.affine), tostring(self.track_running_stats))
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
