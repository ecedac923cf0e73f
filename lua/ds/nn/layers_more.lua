-- nn/layers_more.lua: Bilinear, ChannelShuffle, LocalResponseNorm, LPPool1d, LPPool2d, RReLU, Softmax2d,
-- UpsamplingNearest2d, UpsamplingBilinear2d, EmbeddingBag, MaxUnpool1d/2d/3d and FractionalMaxPool2d/3d (PyTorch's
-- constructors, positionally or as options) over their ds.F functions.
local Module = require("ds.nn.module")
local F = require("ds.nn.functional")
local init = require("ds.nn.init_weights")
local ops = require("ds.ops")
local constructor_args = require("ds.nn.constructor_args")
local errors = require("ds.errors")
local S = require("ds.shape")

local M = {}
local NOT_REFUSED = {}

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end

-- Bilinear(in1_features, in2_features, out_features, [{bias = true, dtype}]): weight (out, in1, in2) and bias
-- uniform in +-1/sqrt(in1_features), as PyTorch's
local Bilinear = Module:extend("Bilinear")
Bilinear._doc = "ds.F.bilinear as a module: Bilinear(in1_features, in2_features, out_features, [bias])"
function Bilinear:init(in1, in2, out, ...)
  for i = 1, 3 do
    local v = select(i, in1, in2, out)
    if type(v) ~= "number" or v < 1 or v ~= math.floor(v) then
      raise("Bilinear: expects Bilinear(in1_features, in2_features, out_features, [bias])")
    end
  end
  local o = constructor_args.merge("Bilinear", { "bias" }, { bias = "boolean", dtype = "dtype" }, NOT_REFUSED, ...)
  local bound, dt = 1 / math.sqrt(in1), o.dtype or "f32"
  self.in1_features, self.in2_features, self.out_features = in1, in2, out
  self.weight = Module.Parameter(init.uniform_(ops.empty(out, in1, in2, { dtype = dt }), -bound, bound))
  if o.bias ~= false then self.bias = Module.Parameter(init.uniform_(ops.empty(out, { dtype = dt }), -bound, bound)) end
end
function Bilinear:forward(x1, x2) return F.bilinear(x1, x2, self.weight, self.bias) end
function Bilinear:extra_repr()
  return string.format("in1_features=%d, in2_features=%d, out_features=%d", self.in1_features, self.in2_features,
    self.out_features)
end
M.Bilinear = Bilinear

-- a module calling fn(x, args...) with PyTorch's positional parameters (defaults as fn's)
local function simple(name, fn, params, kinds, required, doc)
  local cls = Module:extend(name)
  cls._doc = doc
  function cls:init(...)
    local o = constructor_args.merge(name, params, kinds, NOT_REFUSED, ...)
    for i = 1, required do
      if o[params[i]] == nil then
        raise("%s: expects %s(%s, ...)", name, name, table.concat(params, ", ", 1, required))
      end
    end
    self.args = {}
    for i, k in ipairs(params) do self.args[i] = o[k] end
  end
  function cls:forward(x) return fn(x, unpack(self.args, 1, #params)) end
  M[name] = cls
end
simple("ChannelShuffle", F.channel_shuffle, { "groups" }, { groups = "integer" }, 1,
  "ds.F.channel_shuffle as a module: ChannelShuffle(groups)")
simple("LocalResponseNorm", F.local_response_norm, { "size", "alpha", "beta", "k" },
  { size = "integer", alpha = "number", beta = "number", k = "number" }, 1,
  "ds.F.local_response_norm as a module: LocalResponseNorm(size, alpha = 1e-4, beta = 0.75, k = 1)")

-- LPPool1d / LPPool2d(norm_type, kernel_size, stride = kernel_size, ceil_mode = false)
local function lp_pool(name, fn)
  local cls = Module:extend(name)
  cls._doc = "ds.F." .. name:lower():gsub("pool", "_pool") .. " as a module: " .. name ..
    "(norm_type, kernel_size, stride, ceil_mode)"
  function cls:init(norm_type, kernel_size, ...)
    if type(norm_type) ~= "number" or kernel_size == nil then
      raise("%s: expects %s(norm_type, kernel_size, [stride, ceil_mode])", name, name)
    end
    self.norm_type, self.kernel_size = norm_type, kernel_size
    self.opts = constructor_args.merge(name, { "stride", "ceil_mode" }, { stride = "any", ceil_mode = "boolean" },
      NOT_REFUSED, ...)
  end
  function cls:forward(x) return fn(x, self.norm_type, self.kernel_size, self.opts) end
  M[name] = cls
end
lp_pool("LPPool1d", F.lp_pool1d)
lp_pool("LPPool2d", F.lp_pool2d)

-- RReLU(lower = 1/8, upper = 1/3[, inplace = false]): random slopes while training, their mean in eval mode
local RReLU = Module:extend("RReLU")
RReLU._doc = "ds.F.rrelu as a module: RReLU(lower = 1/8, upper = 1/3); random slopes in train mode"
function RReLU:init(...)
  local o = constructor_args.no_inplace("RReLU", constructor_args.merge("RReLU", { "lower", "upper", "inplace" },
    { lower = "number", upper = "number", inplace = "boolean" }, NOT_REFUSED, ...))
  self.lower, self.upper = o.lower or 1 / 8, o.upper or 1 / 3
end
function RReLU:forward(x) return F.rrelu(x, self.lower, self.upper, self.training) end
M.RReLU = RReLU

-- Softmax2d: softmax over the channels of (N, C, H, W) or (C, H, W)
local Softmax2d = Module:extend("Softmax2d")
Softmax2d._doc = "softmax over the channel dim of (N, C, H, W) or (C, H, W)"
function Softmax2d:forward(x)
  if #x._shape ~= 3 and #x._shape ~= 4 then
    raise("Softmax2d: input must be (N, C, H, W) or (C, H, W), got %s", S.str(x._shape))
  end
  return F.softmax(x, -3)
end
M.Softmax2d = Softmax2d

-- UpsamplingNearest2d / UpsamplingBilinear2d(size, scale_factor): F.interpolate nearest / bilinear with
-- align_corners = true, as PyTorch's
local function upsampling(name, mode, align_corners)
  local cls = Module:extend(name)
  cls._doc = "F.interpolate (" .. mode .. (align_corners and ", align_corners" or "") .. ") as a module: " .. name ..
    "(size, scale_factor)"
  function cls:init(...)
    local o = constructor_args.merge(name, { "size", "scale_factor" }, { size = "any", scale_factor = "any" },
      NOT_REFUSED, ...)
    self.opts = { size = o.size, scale_factor = o.scale_factor, mode = mode, align_corners = align_corners }
  end
  function cls:forward(x) return F.interpolate(x, self.opts) end
  M[name] = cls
end
upsampling("UpsamplingNearest2d", "nearest", nil)
upsampling("UpsamplingBilinear2d", "bilinear", true)

-- EmbeddingBag(num_embeddings, embedding_dim, [{mode = "mean" | "sum", dtype}]): weight ~ N(0, 1);
-- forward(input, offsets, per_sample_weights) as ds.F.embedding_bag
local EmbeddingBag = Module:extend("EmbeddingBag")
EmbeddingBag._doc = "ds.F.embedding_bag as a module: EmbeddingBag(num_embeddings, embedding_dim, [{mode, dtype}]); " ..
  "forward(input, [offsets, per_sample_weights])"
function EmbeddingBag:init(num_embeddings, embedding_dim, opts)
  if type(num_embeddings) ~= "number" or type(embedding_dim) ~= "number" then
    raise("EmbeddingBag: expects EmbeddingBag(num_embeddings, embedding_dim, [opts])")
  end
  opts = constructor_args.merge("EmbeddingBag", {}, { mode = { "mean", "sum" }, dtype = "dtype" }, NOT_REFUSED, opts)
  self.num_embeddings, self.embedding_dim, self.mode = num_embeddings, embedding_dim, opts.mode or "mean"
  self.weight = Module.Parameter(init.normal_(ops.empty(num_embeddings, embedding_dim,
    { dtype = opts.dtype or "f32" })))
end
function EmbeddingBag:forward(input, offsets, per_sample_weights)
  return F.embedding_bag(input, self.weight, offsets, { mode = self.mode, per_sample_weights = per_sample_weights })
end
M.EmbeddingBag = EmbeddingBag

-- MaxUnpool{n}d(kernel_size, stride = kernel_size, padding = 0); forward(x, indices, [output_size])
local function max_unpool(name, fn)
  local cls = Module:extend(name)
  cls._doc = "ds.F." .. name:lower():gsub("unpool", "_unpool") .. " as a module: " .. name ..
    "(kernel_size, stride, padding); forward(x, indices, [output_size])"
  function cls:init(kernel_size, ...)
    if kernel_size == nil then raise("%s: expects %s(kernel_size, [stride, padding])", name, name) end
    self.kernel_size = kernel_size
    self.opts = constructor_args.merge(name, { "stride", "padding" }, { stride = "any", padding = "any" }, NOT_REFUSED,
      ...)
  end
  function cls:forward(x, indices, output_size)
    return fn(x, indices, self.kernel_size, { stride = self.opts.stride, padding = self.opts.padding,
      output_size = output_size })
  end
  M[name] = cls
end
max_unpool("MaxUnpool1d", F.max_unpool1d)
max_unpool("MaxUnpool2d", F.max_unpool2d)
max_unpool("MaxUnpool3d", F.max_unpool3d)

-- FractionalMaxPool{n}d(kernel_size, output_size, output_ratio, return_indices, _random_samples)
local function fractional(name, fn)
  local cls = Module:extend(name)
  cls._doc = "ds.F." .. name:gsub("^Fractional", "fractional_"):gsub("MaxPool", "max_pool") .. " as a module: " ..
    name .. "(kernel_size, output_size, output_ratio, return_indices)"
  function cls:init(kernel_size, ...)
    if kernel_size == nil then raise("%s: expects %s(kernel_size, output_size | output_ratio, ...)", name, name) end
    self.kernel_size = kernel_size
    self.opts = constructor_args.merge(name, { "output_size", "output_ratio", "return_indices", "_random_samples" },
      { output_size = "any", output_ratio = "any", return_indices = "boolean", _random_samples = "tensor" },
      NOT_REFUSED, ...)
    if (self.opts.output_size == nil) == (self.opts.output_ratio == nil) then
      raise("%s: give exactly one of output_size and output_ratio", name)
    end
  end
  function cls:forward(x) return fn(x, self.kernel_size, self.opts) end
  M[name] = cls
end
fractional("FractionalMaxPool2d", F.fractional_max_pool2d)
fractional("FractionalMaxPool3d", F.fractional_max_pool3d)

return M
