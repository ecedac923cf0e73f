-- nn/functional_layers_more.lua: ds.F's bilinear, channel_shuffle, local_response_norm, lp_pool1d, lp_pool2d and
-- rrelu, composed from ds ops as PyTorch 1.13 writes them (so they differentiate, trace and compile).
local ops = require("ds.ops.common").functions
local errors = require("ds.errors")
local options = require("ds.options")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local random = require("ds.random")
local spatial = require("ds.nn.functional_spatial")

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
  need_tensor(x1, "bilinear", "input1"); need_tensor(x2, "bilinear", "input2"); need_tensor(weight, "bilinear", "weight")
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

return M
