-- nn/functional.lua: ds.nn.functional (ds.F): layers as functions and the losses, composed from ds
-- ops (log_softmax + gather, ...) so autograd and tracing need nothing extra.
local ops = require("ds.ops.common").functions
local errors = require("ds.errors")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local random = require("ds.random")

local F = {}
local is_tensor = Tensor.is_tensor

local function need_tensor(x, opname, what)
  if not is_tensor(x) then errors.raise(string.format("%s: %s must be a tensor, got %s", opname, what, type(x))) end
end

-- ---- layers ----
-- x: (..., in), w: (out, in), b: (out) -> (..., out)
function F.linear(x, w, b)
  need_tensor(x, "linear", "input"); need_tensor(w, "linear", "weight")
  if #w._shape ~= 2 or not S.same(x._shape[#x._shape], w._shape[2]) then
    errors.raise(string.format("linear: input %s does not match weight %s (in_features %s)", S.str(x._shape),
      S.str(w._shape), tostring(w._shape[2])))
  end
  local y = ops.matmul(x, w:t())
  if b ~= nil then y = y + b end
  return y
end

-- x: (N,C,H,W), w: (OC,C/groups,KH,KW), b: (OC) -> (N,OC,OH,OW); opts stride, padding (number, pair,
-- "same" or "valid"), dilation, groups
function F.conv2d(x, w, b, opts)
  if is_tensor(opts) or (opts == nil and type(b) == "table" and not is_tensor(b)) then
    errors.raise("conv2d: call as F.conv2d(x, w, b, {stride =, padding =, dilation =, groups =})")
  end
  return ops.conv2d(x, w, b, opts)
end

function F.max_pool2d(x, kernel_size, opts) return ops.max_pool2d(x, kernel_size, opts) end
function F.avg_pool2d(x, kernel_size, opts) return ops.avg_pool2d(x, kernel_size, opts) end

function F.relu(x) return ops.relu(x) end
function F.tanh(x) return ops.tanh(x) end
function F.sigmoid(x) return ops.sigmoid(x) end
function F.silu(x) return ops.silu(x) end
function F.softplus(x, beta, threshold) return ops.softplus(x, beta, threshold) end
-- opts.approximate: "none" (erf, default) or "tanh"
function F.gelu(x, opts)
  local approx = opts and opts.approximate or "none"
  if approx == "tanh" then return ops.gelu_tanh(x) end
  if approx ~= "none" then errors.raise("gelu: approximate must be 'none' or 'tanh', got '" .. tostring(approx) .. "'") end
  return ops.gelu(x)
end
function F.softmax(x, dim) return ops.softmax(x, dim or -1) end
function F.log_softmax(x, dim) return ops.log_softmax(x, dim or -1) end
-- q (..., L, E), k (..., S, E), v (..., S, Ev) -> (..., L, Ev); opts mask, is_causal, scale, dropout_p
-- (PyTorch 2's semantics; see ops/attention.lua)
function F.scaled_dot_product_attention(q, k, v, opts) return ops.scaled_dot_product_attention(q, k, v, opts) end
function F.dropout(x, p, training) return random.dropout(x, p == nil and 0.5 or p, training ~= false) end

-- x: (..., *normalized_shape)
function F.layer_norm(x, normalized_shape, w, b, eps)
  if type(normalized_shape) == "number" then normalized_shape = { normalized_shape } end
  return ops.layer_norm(x, normalized_shape, w, b, eps or 1e-5)
end

-- x: (N,C) / (N,C,L) / (N,C,H,W); running stats updated in place when training
function F.batch_norm(x, running_mean, running_var, w, b, training, momentum, eps)
  return ops.batch_norm(x, running_mean, running_var, w, b, training == true, momentum or 0.1, eps or 1e-5)
end

-- ids (...) i64 1-based, weight (V, D) -> (..., D)
function F.embedding(ids, weight, padding_idx)
  return ops.embedding(ids, weight, padding_idx)
end

-- ---- losses ----
local REDUCTIONS = { mean = true, sum = true, none = true }
local function reduce(loss, opts, opname)
  local r = opts and opts.reduction or "mean"
  if not REDUCTIONS[r] then errors.raise(string.format("%s: reduction must be 'mean', 'sum' or 'none', got '%s'", opname, tostring(r))) end
  if r == "mean" then return loss:mean() end
  if r == "sum" then return loss:sum() end
  return loss
end

-- move the class dim (2 of (N,C,d...)) last: (N,d...,C); a 1-D input is one sample
local function classes_last(x)
  local n = #x._shape
  if n <= 2 then return x end
  local perm = { 1 }
  for i = 3, n do perm[#perm + 1] = i end
  perm[#perm + 1] = 2
  return x:permute(perm)
end

-- logp: (..., C) with classes last; target: (...) i64 1-based -> -logp[target]: (...)
local function pick(logp, target, opname)
  if not is_tensor(target) then errors.raise(opname .. ": target must be a tensor of class indices") end
  local ls, ts = logp._shape, target._shape
  local ok = #ts == #ls - 1
  for i = 1, #ts do ok = ok and S.same(ts[i], ls[i]) end
  if not ok then
    errors.raise(string.format("%s: target %s does not match input %s (classes in dim %d)", opname, S.str(ts),
      S.str(ls), #ls > 1 and 2 or 1))
  end
  if target.dtype == "f32" or target.dtype == "f64" or target.dtype == "bool" then
    errors.raise(opname .. ": class targets must be integers (i64, 1-based), got " .. target.dtype)
  end
  return -(ops.gather(logp, -1, target:unsqueeze(-1)):squeeze(-1))
end

-- input: (N,C) / (N,C,d...) / (C) logits; target: i64 1-based classes (N) / (N,d...) / (),
-- or class probabilities of input's shape. opts: reduction, label_smoothing
function F.cross_entropy(input, target, opts)
  need_tensor(input, "cross_entropy", "input")
  local eps = opts and opts.label_smoothing or 0
  if type(eps) ~= "number" or eps < 0 or eps > 1 then errors.raise("cross_entropy: label_smoothing must be in [0, 1]") end
  local x = classes_last(input)
  local logp = ops.log_softmax(x, -1)
  local C = x._shape[#x._shape]
  local loss
  if is_tensor(target) and target.dtype == input.dtype and S.equal(target._shape, input._shape) then
    local p = classes_last(target)
    if eps > 0 then p = p * (1 - eps) + eps / C end
    loss = -((logp * p):sum(-1))
  else
    loss = pick(logp, target, "cross_entropy")
    if eps > 0 then loss = loss * (1 - eps) + (logp:sum(-1) * (-eps / C)) end
  end
  return reduce(loss, opts, "cross_entropy")
end

-- input: log-probabilities (N,C) / (N,C,d...); target: i64 1-based classes
function F.nll_loss(input, target, opts)
  need_tensor(input, "nll_loss", "input")
  return reduce(pick(classes_last(input), target, "nll_loss"), opts, "nll_loss")
end

function F.mse_loss(input, target, opts)
  need_tensor(input, "mse_loss", "input"); need_tensor(target, "mse_loss", "target")
  local d = input - target
  return reduce(d * d, opts, "mse_loss")
end

function F.l1_loss(input, target, opts)
  need_tensor(input, "l1_loss", "input"); need_tensor(target, "l1_loss", "target")
  return reduce(ops.abs(input - target), opts, "l1_loss")
end

-- stable: (1 - y) x + (1 + (pw - 1) y) (log(1 + exp(-|x|)) + max(-x, 0)); opts: reduction, pos_weight
function F.binary_cross_entropy_with_logits(input, target, opts)
  need_tensor(input, "binary_cross_entropy_with_logits", "input")
  need_tensor(target, "binary_cross_entropy_with_logits", "target")
  local softplus_neg = ops.log(ops.exp(-ops.abs(input)) + 1) + ops.relu(-input)
  local pw = opts and opts.pos_weight
  local loss
  if pw ~= nil then
    loss = (1 - target) * input + ((pw - 1) * target + 1) * softplus_neg
  else
    loss = (1 - target) * input + softplus_neg
  end
  return reduce(loss, opts, "binary_cross_entropy_with_logits")
end

-- input: probabilities; log terms clamped at -100 as in PyTorch
function F.binary_cross_entropy(input, target, opts)
  need_tensor(input, "binary_cross_entropy", "input"); need_tensor(target, "binary_cross_entropy", "target")
  local lp = ops.clamp(ops.log(input), -100)
  local lq = ops.clamp(ops.log(1 - input), -100)
  return reduce(-(target * lp + (1 - target) * lq), opts, "binary_cross_entropy")
end

return F
