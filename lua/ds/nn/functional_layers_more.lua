-- nn/functional_layers_more.lua: ds.F's bilinear, channel_shuffle, local_response_norm, lp_pool1d, lp_pool2d, rrelu,
-- max_unpool1d/2d/3d, pdist and gumbel_softmax, composed from ds ops as PyTorch 1.13 writes them (so they
-- differentiate, trace and compile).
local ops = require("ds.ops")
local errors = require("ds.errors")
local options = require("ds.options")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local random = require("ds.random")
local spatial = require("ds.nn.functional_spatial")
local constructor_args = require("ds.nn.constructor_args")

local M = {}

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end
local function need_tensor(x, opname, what)
  if not Tensor.is_tensor(x) then raise("%s: %s must be a tensor, got %s", opname, what or "input", type(x)) end
  return x
end
local function positive_integer(v, opname, what)
  if type(v) ~= "number" or v < 1 or v ~= math.floor(v) then
    raise("%s: %s must be a positive integer, got %s", opname, what, tostring(v))
  end
  return v
end

-- x1 (..., in1), x2 (..., in2), weight (out, in1, in2), bias (out) -> (..., out): x1^T W_o x2 + b_o
function M.bilinear(x1, x2, weight, bias)
  need_tensor(x1, "bilinear", "input1"); need_tensor(x2, "bilinear", "input2")
  need_tensor(weight, "bilinear", "weight")
  local ws = weight._shape
  if #ws ~= 3 or not S.same(x1._shape[#x1._shape], ws[2]) or not S.same(x2._shape[#x2._shape], ws[3]) then
    raise("bilinear: inputs %s, %s do not match weight %s (out, in1, in2)", S.str(x1._shape), S.str(x2._shape),
      S.str(ws))
  end
  local O, I, J = ws[1], ws[2], ws[3]
  local t = ops.matmul(x1, weight:permute(2, 1, 3):reshape(I, O * J)) -- (..., O * J)
  local lead = {}
  for i = 1, #t._shape - 1 do lead[i] = t._shape[i] end
  lead[#lead + 1] = O; lead[#lead + 1] = J
  local y = (t:reshape(lead) * x2:unsqueeze(-2)):sum(-1)
  if bias ~= nil then y = y + need_tensor(bias, "bilinear", "bias") end
  return y
end

-- x (N, C, ...) -> the channels regrouped: (N, g, C/g, ...) transposed to (N, C/g, g, ...)
function M.channel_shuffle(x, groups)
  need_tensor(x, "channel_shuffle")
  groups = positive_integer(groups, "channel_shuffle", "groups")
  local s = x._shape
  if #s < 3 or type(s[2]) ~= "number" or s[2] % groups ~= 0 then
    raise("channel_shuffle: input must be (N, C, ...) with C divisible by groups %d, got %s", groups, S.str(s))
  end
  local split = { s[1], groups, s[2] / groups }
  for i = 3, #s do split[#split + 1] = s[i] end
  return x:reshape(split):transpose(2, 3):reshape(s)
end

-- x / (k + alpha * mean of x^2 over `size` neighbouring channels (zero padded))^beta; x: (N, C, ...) with at
-- least one dim after C
function M.local_response_norm(x, size, alpha, beta, k)
  need_tensor(x, "local_response_norm")
  size = positive_integer(size, "local_response_norm", "size")
  local s = x._shape
  if #s < 3 then raise("local_response_norm: input must be (N, C, ...) with 3 or more dims, got %s", S.str(s)) end
  local sq = (x * x):reshape(s[1], 1, s[2], -1) -- (N, 1, C, rest)
  sq = spatial.pad(sq, { 0, 0, math.floor(size / 2), math.floor((size - 1) / 2) })
  local div = ops.avg_pool2d(sq, { size, 1 }, { stride = 1 }):reshape(s)
  return x / ops.pow(div * (alpha or 1e-4) + (k or 1), beta or 0.75)
end

-- (sum of x^p over each window)^(1/p), as PyTorch: avg_pool of x^p times the window size, negative sums to 0
local function lp(x, norm_type, kernel, pool, opname)
  if type(norm_type) ~= "number" or norm_type == 0 then raise("%s: norm_type must be a nonzero number", opname) end
  local out = pool(ops.pow(need_tensor(x, opname), norm_type))
  return (ops.sign(out) * ops.relu(ops.abs(out)) * kernel):pow(1 / norm_type)
end
-- x: (N, C, L) or (C, L); lp_pool1d(x, norm_type, kernel_size, [{stride (kernel_size), ceil_mode}])
function M.lp_pool1d(x, norm_type, kernel_size, opts)
  opts = options.check(opts, "lp_pool1d", { stride = "integer", ceil_mode = "boolean" })
  local k = positive_integer(kernel_size, "lp_pool1d", "kernel_size")
  local function pool(t)
    if #t._shape ~= 2 and #t._shape ~= 3 then raise("lp_pool1d: input must be (N, C, L) or (C, L), got %s",
      S.str(t._shape)) end
    local t4 = t:unsqueeze(-2)
    local pool2d = opts.ceil_mode and spatial.ceil_mode.avg_pool2d or ops.avg_pool2d
    return pool2d(t4, { 1, k }, { stride = { 1, opts.stride or k } }):squeeze(-2)
  end
  return lp(x, norm_type, k, pool, "lp_pool1d")
end
-- x: (N, C, H, W) or (C, H, W); lp_pool2d(x, norm_type, kernel_size, [{stride (kernel_size), ceil_mode}])
function M.lp_pool2d(x, norm_type, kernel_size, opts)
  opts = options.check(opts, "lp_pool2d", { stride = "any", ceil_mode = "boolean" })
  local k = type(kernel_size) == "number" and { kernel_size, kernel_size } or kernel_size
  if type(k) ~= "table" or #k ~= 2 then raise("lp_pool2d: kernel_size must be a number or a pair") end
  local function pool(t)
    local pool2d = opts.ceil_mode and spatial.ceil_mode.avg_pool2d or ops.avg_pool2d
    return pool2d(t, k, { stride = opts.stride or k })
  end
  return lp(x, norm_type, positive_integer(k[1], "lp_pool2d", "kernel_size") *
    positive_integer(k[2], "lp_pool2d", "kernel_size"), pool, "lp_pool2d")
end

-- x where x >= 0, else a x: a uniform in [lower, upper] per element while training, (lower + upper) / 2 otherwise;
-- rrelu(x, lower (1/8), upper (1/3), training (false))
function M.rrelu(x, lower, upper, training)
  need_tensor(x, "rrelu")
  lower, upper = lower or 1 / 8, upper or 1 / 3
  if type(lower) ~= "number" or type(upper) ~= "number" or lower > upper then
    raise("rrelu: lower %s and upper %s must be numbers with lower <= upper", tostring(lower), tostring(upper))
  end
  local slope
  if training then slope = random.rand_like(x) * (upper - lower) + lower
  else slope = (lower + upper) / 2 end
  return ops.where(ops.ge(x, 0), x, x * slope)
end

-- max_unpool{n}d(x, indices, kernel_size, [{stride (kernel_size), padding (0), output_size}]): x (N, C, in...) or
-- (C, in...) written at its 1-based indices (max_pool2d's, flat over the n spatial dims) into zeros of
-- (in - 1) stride - 2 padding + kernel per dim, or output_size (its last n entries, within a stride of that)
local function max_unpool(name, n)
  return function(x, indices, kernel_size, opts)
    need_tensor(x, name); need_tensor(indices, name, "indices")
    opts = options.check(opts, name, { stride = "any", padding = "any", output_size = "any" })
    local function tuple(v, what)
      if type(v) == "number" then local t = {}; for i = 1, n do t[i] = v end; v = t end
      if type(v) ~= "table" or #v ~= n then raise("%s: %s must be a number or a list of %d", name, what, n) end
      return v
    end
    local k = tuple(kernel_size, "kernel_size")
    local st, p = tuple(opts.stride or k, "stride"), tuple(opts.padding or 0, "padding")
    local batched = #x._shape == n + 2
    if not batched and #x._shape ~= n + 1 then raise("%s: input must have %d or %d dims, got %s", name, n + 1, n + 2,
      S.str(x._shape)) end
    if not S.equal(indices._shape, x._shape) then
      raise("%s: indices %s must have the input's shape %s", name, S.str(indices._shape), S.str(x._shape))
    end
    if not batched then x, indices = x:unsqueeze(1), indices:unsqueeze(1) end
    local out, total = {}, 1
    for i = 1, n do
      local size = x._shape[i + 2]
      if type(size) ~= "number" then raise("%s: dim %d of %s must have a known size", name, i + 2, S.str(x._shape)) end
      local default = (size - 1) * st[i] - 2 * p[i] + k[i]
      out[i] = default
      if opts.output_size ~= nil then
        local o = opts.output_size
        out[i] = type(o) == "table" and o[#o - n + i] or nil
        if type(out[i]) ~= "number" or out[i] <= default - st[i] or out[i] >= default + st[i] then
          raise("%s: output_size dim %d must be in (%d, %d), got %s", name, i, default - st[i], default + st[i],
            tostring(out[i]))
        end
      end
      total = total * out[i]
    end
    -- values written (a repeated index, from overlapping windows, holds the same element: its max is it) and
    -- PyTorch's gradient, each input element the output gradient at its index (a zero-valued scatter_add term)
    local N, C = x._shape[1], x._shape[2]
    local zeros = ops.zeros({ N, C, total }, { dtype = x.dtype })
    local idx, src = indices:reshape(N, C, -1):astype("i64"), x:reshape(N, C, -1)
    local sums = ops.scatter_add(zeros, 3, idx, src)
    local y = ops.scatter_reduce(zeros, 3, idx, src:detach(), "amax", { include_self = false }) + (sums - sums:detach())
    local shape = { N, C }
    for i = 1, n do shape[i + 2] = out[i] end
    y = y:reshape(shape)
    return batched and y or y:squeeze(1)
  end
end
-- x (N, M) -> (N (N - 1) / 2): the p-norm distances of rows i < j in row-major order; p (2)
function M.pdist(x, p)
  need_tensor(x, "pdist")
  if #x._shape ~= 2 or type(x._shape[1]) ~= "number" then
    raise("pdist: input must be (N, M) with a known N, got %s", S.str(x._shape))
  end
  if p ~= nil and (type(p) ~= "number" or p < 0) then raise("pdist: p must be a number >= 0, got %s", tostring(p)) end
  local n, first, second = x._shape[1], {}, {}
  for i = 1, n - 1 do
    for j = i + 1, n do first[#first + 1] = i; second[#second + 1] = j end
  end
  if #first == 0 then return ops.zeros({ 0 }, { dtype = x.dtype }) end
  local a = ops.index_select(x, 1, ops.tensor(first, { dtype = "i64" }))
  local b = ops.index_select(x, 1, ops.tensor(second, { dtype = "i64" }))
  return ops.norm(a - b, p or 2, 2)
end

-- softmax((logits + g) / tau) with g Gumbel(0, 1) noise (-log of an exponential sample); hard: the one-hot of its
-- argmax with the soft sample's gradient (straight-through); gumbel_softmax(logits, tau (1), hard (false), eps
-- (unused, as PyTorch's), dim (-1)) positionally or with an options table
function M.gumbel_softmax(logits, ...)
  need_tensor(logits, "gumbel_softmax", "logits")
  local opts = constructor_args.merge("gumbel_softmax", { "tau", "hard", "eps", "dim" },
    { tau = "number", hard = "boolean", eps = "number", dim = "integer" }, {}, ...)
  local dim = S.dim(opts.dim or -1, #logits._shape, "gumbel_softmax")
  local exponential = -ops.log1p(-random.rand_like(logits))
  local y = ops.softmax((logits - ops.log(exponential)) / (opts.tau or 1), dim)
  if not opts.hard then return y end
  local index = ops.argmax(y, dim, true)
  local hard = ops.scatter(ops.zeros_like(y), dim, index, 1)
  return hard - y:detach() + y
end

M.max_unpool1d = max_unpool("max_unpool1d", 1)
M.max_unpool2d = max_unpool("max_unpool2d", 2)
M.max_unpool3d = max_unpool("max_unpool3d", 3)

return M
