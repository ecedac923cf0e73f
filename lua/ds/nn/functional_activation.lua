-- nn/functional_activation.lua: ds.F's activations composed from ds ops (leaky_relu, elu, selu, celu, hardtanh,
-- relu6, hardsigmoid, hardswish, mish, logsigmoid, softsign, glu, prelu, threshold, softmin, softshrink,
-- hardshrink, tanhshrink) and normalize, cosine_similarity.
-- Gradients follow PyTorch's, also at the kinks (hardtanh passes none at its bounds).
local ops = require("ds.ops")
local errors = require("ds.errors")
local S = require("ds.shape")
local Tensor = require("ds.tensor")

local M = {}

local function need_tensor(x, opname)
  if not Tensor.is_tensor(x) then errors.raise(string.format("%s: input must be a tensor, got %s", opname, type(x))) end
  return x
end
local function number_or(v, default, opname, what)
  if v == nil then return default end
  if type(v) ~= "number" then errors.raise(string.format("%s: %s must be a number, got %s", opname, what, type(v))) end
  return v
end

-- x where x > 0, else negative_slope * x (the gradient at 0 is negative_slope, as PyTorch's)
function M.leaky_relu(x, negative_slope)
  local s = number_or(negative_slope, 0.01, "leaky_relu", "negative_slope")
  return ops.where(ops.gt(need_tensor(x, "leaky_relu"), 0), x, x * s)
end

-- x where x > 0, else weight * x; weight (C) per channel (dim 2 of x) or (1) (the gradient at 0 is weight's)
function M.prelu(x, weight)
  need_tensor(x, "prelu"); need_tensor(weight, "prelu")
  local n = weight:numel()
  if #weight._shape > 1 or (n ~= 1 and (#x._shape < 2 or not S.same(x._shape[2], n))) then
    errors.raise(string.format("prelu: weight %s must have 1 element or one per channel (dim 2 of %s)",
      S.str(weight._shape), S.str(x._shape)))
  end
  local w = weight
  if n ~= 1 then
    local shape = { n }
    for _ = 3, #x._shape do shape[#shape + 1] = 1 end
    w = weight:reshape(shape)
  elseif #weight._shape == 1 then w = weight:reshape({}) end
  return ops.where(ops.gt(x, 0), x, x * w)
end

-- x where x > threshold, else value
function M.threshold(x, threshold, value)
  need_tensor(x, "threshold")
  if type(threshold) ~= "number" or type(value) ~= "number" then
    errors.raise("threshold: threshold and value must be numbers")
  end
  return ops.where(ops.gt(x, threshold), x, ops.full({}, value, { dtype = x.dtype }))
end

-- softmax(-x, dim) (dim -1 by default, as ds.F.softmax)
function M.softmin(x, dim) return ops.softmax(-need_tensor(x, "softmin"), dim or -1) end

-- alpha * (exp(x) - 1) on x <= 0 (computed on min(x, 0), so a large x never overflows the unused side)
local function negative_exp(x, alpha, inner)
  return ops.expm1(ops.clamp_max(x, 0) * inner) * alpha
end
function M.elu(x, alpha)
  alpha = number_or(alpha, 1, "elu", "alpha")
  return ops.where(ops.gt(need_tensor(x, "elu"), 0), x, negative_exp(x, alpha, 1))
end
local SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
function M.selu(x)
  return ops.where(ops.gt(need_tensor(x, "selu"), 0), x * SELU_SCALE, negative_exp(x, SELU_ALPHA * SELU_SCALE, 1))
end
function M.celu(x, alpha)
  alpha = number_or(alpha, 1, "celu", "alpha")
  if alpha == 0 then errors.raise("celu: alpha must not be 0") end
  return ops.where(ops.gt(need_tensor(x, "celu"), 0), x, negative_exp(x, alpha, 1 / alpha))
end

-- clamp(x, min_val, max_val) with PyTorch's gradient: 1 strictly inside (min_val, max_val), else 0
function M.hardtanh(x, min_val, max_val)
  local lo, hi = number_or(min_val, -1, "hardtanh", "min_val"), number_or(max_val, 1, "hardtanh", "max_val")
  if lo > hi then errors.raise(string.format("hardtanh: min_val %s must not exceed max_val %s", lo, hi)) end
  local inside = ops.logical_and(ops.gt(need_tensor(x, "hardtanh"), lo), ops.lt(x, hi))
  return ops.where(inside, x, ops.clamp(x:detach(), lo, hi))
end
function M.relu6(x) return M.hardtanh(x, 0, 6) end
-- relu6(x + 3) / 6, one elementwise op (ops/elementwise.lua, with PyTorch's gradient)
function M.hardsigmoid(x) return ops.hardsigmoid(need_tensor(x, "hardsigmoid")) end
-- x relu6(x + 3) / 6, one elementwise op (ops/elementwise.lua, with PyTorch's gradient)
function M.hardswish(x) return ops.hardswish(need_tensor(x, "hardswish")) end
function M.mish(x) return need_tensor(x, "mish") * ops.tanh(ops.softplus(x)) end
-- log(sigmoid(x)) = -softplus(-x), stable for large |x|
function M.logsigmoid(x) return -ops.softplus(-need_tensor(x, "logsigmoid")) end
function M.softsign(x) return need_tensor(x, "softsign") / (ops.abs(x) + 1) end

-- the shrinks: lambd (0.5) must not be negative; the gradient is 1 where |x| > lambd, else 0 (as PyTorch's)
local function shrink_lambd(x, lambd, opname)
  need_tensor(x, opname)
  lambd = number_or(lambd, 0.5, opname, "lambd")
  if lambd < 0 then errors.raise(string.format("%s: lambd must be >= 0, got %s", opname, tostring(lambd))) end
  return lambd
end
-- x - lambd above lambd, x + lambd below -lambd, else 0
function M.softshrink(x, lambd)
  lambd = shrink_lambd(x, lambd, "softshrink")
  local zero = ops.zeros_like(x)
  return ops.where(ops.gt(x, lambd), x - lambd, ops.where(ops.lt(x, -lambd), x + lambd, zero))
end
-- x where |x| > lambd, else 0
function M.hardshrink(x, lambd)
  lambd = shrink_lambd(x, lambd, "hardshrink")
  return ops.where(ops.logical_or(ops.gt(x, lambd), ops.lt(x, -lambd)), x, ops.zeros_like(x))
end
-- x - tanh(x)
function M.tanhshrink(x) return need_tensor(x, "tanhshrink") - ops.tanh(x) end

-- a * sigmoid(b) where a, b are the halves of x along dim (default -1; its size must be even)
function M.glu(x, dim)
  need_tensor(x, "glu")
  local d = S.dim(dim or -1, #x._shape, "glu")
  local n = x._shape[d]
  if type(n) ~= "number" or n % 2 ~= 0 then
    errors.raise(string.format("glu: dim %d of %s must have an even size", d, S.str(x._shape)))
  end
  return x:narrow(d, 1, n / 2) * ops.sigmoid(x:narrow(d, n / 2 + 1, n / 2))
end

-- x / max(||x||_p, eps) along dim (default 2, PyTorch's dim 1)
function M.normalize(x, p, dim, eps)
  need_tensor(x, "normalize")
  local n = ops.norm(x, number_or(p, 2, "normalize", "p"), dim or 2, true)
  return x / ops.clamp_min(n, number_or(eps, 1e-12, "normalize", "eps"))
end

-- sum(x1 x2) / (max(||x1||, eps) max(||x2||, eps)) along dim (default 2), x1 and x2 broadcast together
function M.cosine_similarity(x1, x2, dim, eps)
  need_tensor(x1, "cosine_similarity"); need_tensor(x2, "cosine_similarity")
  eps = number_or(eps, 1e-8, "cosine_similarity", "eps")
  local shape = S.broadcast(x1._shape, x2._shape, "cosine_similarity")
  x1, x2 = x1:broadcast_to(shape), x2:broadcast_to(shape)
  local d = dim or 2
  local n1, n2 = ops.clamp_min(ops.norm(x1, 2, d), eps), ops.clamp_min(ops.norm(x2, 2, d), eps)
  return (x1 * x2):sum(d) / (n1 * n2)
end

return M
