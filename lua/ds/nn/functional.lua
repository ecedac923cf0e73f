-- nn/functional.lua: ds.nn.functional (ds.F): layers as functions and the losses, composed from ds
-- ops (log_softmax + gather, ...) so autograd and tracing need nothing extra; the activations, spatial
-- functions, norms, 1-D pools, channel dropouts, decoding samplers, further losses, CTC, unfold/fold, the 3-D and
-- transposed 1-D convolutions, the 3-D pools, bilinear, channel_shuffle, local_response_norm, lp pools, rrelu,
-- unpooling, affine_grid, grid_sample, fractional max pools and in-place activations (relu_, elu_, ...) of
-- functional_activation/_spatial/_norm/_pool1d/_dropout/_sampling/_loss_more/_ctc/_fold/_conv3d/_pool3d/
-- _layers_more/_grid/_fractional/_inplace.lua are part of it.
local ops = require("ds.ops")
local errors = require("ds.errors")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local options = require("ds.options")
local autograd = require("ds.autograd")
local random = require("ds.random")
local activation = require("ds.nn.functional_activation")
local spatial = require("ds.nn.functional_spatial")
local norm = require("ds.nn.functional_norm")
local pool1d = require("ds.nn.functional_pool1d")
local dropout = require("ds.nn.functional_dropout")
local sampling = require("ds.nn.functional_sampling")
local loss_more = require("ds.nn.functional_loss_more")
local ctc = require("ds.nn.functional_ctc")
local fold = require("ds.nn.functional_fold")
local conv3d = require("ds.nn.functional_conv3d")
local pool3d = require("ds.nn.functional_pool3d")
local pool_window = require("ds.nn.functional_pool_window")
local layers_more = require("ds.nn.functional_layers_more")
local grid = require("ds.nn.functional_grid")
local fractional = require("ds.nn.functional_fractional")
local inplace = require("ds.nn.functional_inplace")
local LOSS_OPTIONS = require("ds.nn.loss_options")

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
-- "same" (an odd total padding has its extra one on the right, as PyTorch's) or "valid"), dilation, groups
function F.conv2d(x, w, b, opts)
  if is_tensor(opts) or (opts == nil and type(b) == "table" and not is_tensor(b)) then
    errors.raise("conv2d: call as F.conv2d(x, w, b, {stride =, padding =, dilation =, groups =})")
  end
  return spatial.conv.conv2d(x, w, b, opts)
end

-- opts as ds.max_pool2d / ds.avg_pool2d, plus ceil_mode (the last window may hang over the input's end), max's
-- dilation and avg's divisor_override (nn/functional_pool_window.lua): the options without ceil_mode (and without
-- max's dilation of 1), and ceil_mode
local function split_ceil_mode(opts, opname)
  if opts == nil then return nil, false end
  if type(opts) ~= "table" then errors.raise(opname .. ": options must be a table, got " .. type(opts)) end
  local o = {}
  for k, v in pairs(opts) do
    if k ~= "ceil_mode" and not (k == "dilation" and opname == "max_pool2d") then o[k] = v end
  end
  return o, opts.ceil_mode == true
end
function F.max_pool2d(x, kernel_size, opts)
  if pool_window.dilated(opts) then return pool_window.max_pool2d(x, kernel_size, opts) end
  local o, ceil_mode = split_ceil_mode(opts, "max_pool2d")
  if ceil_mode then return spatial.ceil_mode.max_pool2d(x, kernel_size, o) end
  return ops.max_pool2d(x, kernel_size, o)
end
function F.avg_pool2d(x, kernel_size, opts)
  if type(opts) == "table" and opts.divisor_override ~= nil then return pool_window.avg_pool2d(x, kernel_size, opts) end
  local o, ceil_mode = split_ceil_mode(opts, "avg_pool2d")
  if ceil_mode then return spatial.ceil_mode.avg_pool2d(x, kernel_size, o) end
  return ops.avg_pool2d(x, kernel_size, o)
end

-- max_pool2d(x, kernel_size, opts) with return_indices: values and 1-based indices (flat over H, W)
function F.max_pool2d_with_indices(x, kernel_size, opts)
  local o = {}
  for k, v in pairs(type(opts) == "table" and opts or {}) do o[k] = v end
  o.return_indices = true
  return F.max_pool2d(x, kernel_size, o)
end

-- PyTorch's deprecated names of interpolate: upsample(x, opts); upsample_nearest / upsample_bilinear(x, size,
-- scale_factor) (bilinear with align_corners = true)
function F.upsample(x, opts) return spatial.interpolate(x, opts) end
function F.upsample_nearest(x, size, scale_factor)
  return spatial.interpolate(x, { size = size, scale_factor = scale_factor, mode = "nearest" })
end
function F.upsample_bilinear(x, size, scale_factor)
  return spatial.interpolate(x, { size = size, scale_factor = scale_factor, mode = "bilinear", align_corners = true })
end

function F.relu(x) return ops.relu(x) end
function F.tanh(x) return ops.tanh(x) end
function F.sigmoid(x) return ops.sigmoid(x) end
function F.silu(x) return ops.silu(x) end
function F.softplus(x, beta, threshold) return ops.softplus(x, beta, threshold) end
-- opts.approximate: "none" (erf, default) or "tanh"
function F.gelu(x, opts)
  opts = options.check(opts, "gelu", { approximate = { "none", "tanh" } })
  if opts.approximate == "tanh" then return ops.gelu_tanh(x) end
  return ops.gelu(x)
end
function F.softmax(x, dim) return ops.softmax(x, dim or -1) end
function F.log_softmax(x, dim) return ops.log_softmax(x, dim or -1) end
-- q (..., L, E), k (..., S, E), v (..., S, Ev) -> (..., L, Ev); opts mask, is_causal, scale, dropout_p
-- (PyTorch 2's semantics; see ops/attention.lua)
function F.scaled_dot_product_attention(q, k, v, opts) return ops.scaled_dot_product_attention(q, k, v, opts) end
-- packed sequences: q (Nq, heads, E), k/v (Nk, heads, E/Ev), qseg/kseg (B, 2) i64 {first, count}; opts scale
-- (see ops/segment_attention.lua)
function F.segment_attention(q, k, v, qseg, kseg, opts) return ops.segment_attention(q, k, v, qseg, kseg, opts) end
function F.dropout(x, p, training) return random.dropout(x, p == nil and 0.5 or p, training ~= false) end

-- x: (..., *normalized_shape)
function F.layer_norm(x, normalized_shape, w, b, eps)
  if type(normalized_shape) == "number" then normalized_shape = { normalized_shape } end
  return ops.layer_norm(x, normalized_shape, w, b, eps or 1e-5)
end

-- x: (N,C) / (N,C,L) / (N,C,H,W); running stats updated in place when training
function F.batch_norm(x, running_mean, running_var, w, b, training, momentum, eps)
  return ops.batch_norm(x, running_mean, running_var, w, b, training == true, momentum, eps)
end

-- ids (...) i64 1-based, weight (V, D) -> (..., D); PyTorch's further arguments: max_norm (the rows ids reads whose
-- norm_type-norm (2) exceeds it are rescaled to max_norm / (norm + 1e-7) in weight itself, without gradient, before
-- the lookup), scale_grad_by_freq (each row's gradient divided by how often ids reads it); sparse must be false
function F.embedding(ids, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
  if sparse then errors.raise("embedding: sparse gradients are not implemented (sparse = false)") end
  if max_norm ~= nil then
    need_tensor(ids, "embedding", "input"); need_tensor(weight, "embedding", "weight")
    if type(max_norm) ~= "number" then errors.raise("embedding: max_norm must be a number") end
    local V = weight._shape[1]
    autograd.no_grad(function()
      local read = ops.index_add(ops.zeros(V, { dtype = "i64" }), 1, ids:reshape(-1),
        ops.ones(S.numel(ids._shape), { dtype = "i64" })):gt(0):unsqueeze(2)
      local norm = ops.norm(weight, norm_type or 2, 2, true)
      local over = ops.logical_and(read, ops.gt(norm, max_norm))
      weight:copy_(ops.where(over, weight * (max_norm / (norm + 1e-7)), weight))
    end)
  end
  local rows = ops.embedding(ids, weight, padding_idx)
  if scale_grad_by_freq then
    local flat = ids:reshape(-1)
    local counts = ops.index_add(ops.zeros(weight._shape[1], { dtype = rows.dtype }), 1, flat,
      ops.ones(S.numel(ids._shape), { dtype = rows.dtype }))
    local scale = ops.index_select(counts, 1, flat):reshape(ids._shape):unsqueeze(-1)
    rows = rows + (rows - rows:detach()) * (1 / scale - 1) -- value unchanged, gradient / count
  end
  return rows
end

-- labels (...) 1-based i64 -> (..., num_classes) i64 (num_classes from the data when absent, eager only)
function F.one_hot(labels, num_classes) return ops.one_hot(labels, num_classes or -1) end

-- ---- losses ----
-- Options as PyTorch's; weights follow its rules: a weighted 'mean' divides by the summed weights of
-- the counted targets, so ignored targets count neither in the sum nor in the divisor.
local function reduce(loss, reduction, divisor)
  local r = reduction or "mean"
  if r == "mean" then return divisor and loss:sum() / divisor:sum() or loss:mean() end
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

-- a per-class weight: a (C) tensor of input's dtype
local function class_weight(w, logp, opname)
  if w == nil then return nil end
  local C = logp._shape[#logp._shape]
  if #w._shape ~= 1 or not S.same(w._shape[1], C) then
    errors.raise(string.format("%s: weight %s must be (%s), one per class", opname, S.str(w._shape), tostring(C)))
  end
  return w:astype(logp.dtype)
end

-- logp: (..., C) with classes last; target: (...) integer 1-based classes.
-- -> loss (...) = -w[t] logp[t], zero where target == ignore_index, and the weights counted (...)
-- ignore_index is compared with the targets as given (PyTorch's default -100, the label padded batches carry,
-- is ds's default too: a negative sentinel is the same number in both; a class k of PyTorch is ds's k + 1)
local IGNORE_INDEX = -100
local function pick(logp, target, weight, ignore_index, opname)
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
  local keep = target:ne(ignore_index or IGNORE_INDEX)
  target = ops.where(keep, target, 1) -- an ignored entry reads class 1, then counts 0
  local counted = keep:astype(logp.dtype)
  if weight then counted = counted * ops.index_select(weight, 1, target:reshape(-1)):reshape(ts) end
  local loss = -(ops.gather(logp, -1, target:unsqueeze(-1)):squeeze(-1))
  return loss * counted, counted
end

-- input: (N,C) / (N,C,d...) / (C) logits; target: i64 1-based classes (N) / (N,d...) / (),
-- or class probabilities of input's shape. opts: reduction, weight (C), ignore_index (-100), label_smoothing
function F.cross_entropy(input, target, opts)
  need_tensor(input, "cross_entropy", "input")
  opts = options.check(opts, "cross_entropy", LOSS_OPTIONS.cross_entropy)
  local eps = opts.label_smoothing or 0
  local x = classes_last(input)
  local logp = ops.log_softmax(x, -1)
  local C = x._shape[#x._shape]
  local w = class_weight(opts.weight, logp, "cross_entropy")
  if is_tensor(target) and target.dtype == input.dtype and S.equal(target._shape, input._shape) then
    if opts.ignore_index ~= nil then
      errors.raise("cross_entropy: ignore_index applies to class-index targets, not probabilities")
    end
    local p = classes_last(target)
    if eps > 0 then p = p * (1 - eps) + eps / C end
    local wlogp = w and logp * w or logp
    return reduce(-((wlogp * p):sum(-1)), opts.reduction)
  end
  local loss, counted = pick(logp, target, w, opts.ignore_index, "cross_entropy")
  if eps > 0 then
    -- PyTorch: (1 - eps) nll + eps / C * (-sum_c w_c logp_c), the smooth term zero where ignored
    local smooth = -((w and logp * w or logp):sum(-1))
    smooth = smooth * target:ne(opts.ignore_index or IGNORE_INDEX):astype(smooth.dtype)
    loss = loss * (1 - eps) + smooth * (eps / C)
  end
  return reduce(loss, opts.reduction, counted)
end

-- input: log-probabilities (N,C) / (N,C,d...); target: i64 1-based classes; opts: reduction, weight,
-- ignore_index (-100)
function F.nll_loss(input, target, opts)
  need_tensor(input, "nll_loss", "input")
  opts = options.check(opts, "nll_loss", LOSS_OPTIONS.nll_loss)
  local logp = classes_last(input)
  local loss, counted = pick(logp, target, class_weight(opts.weight, logp, "nll_loss"), opts.ignore_index, "nll_loss")
  return reduce(loss, opts.reduction, counted)
end

function F.mse_loss(input, target, opts)
  need_tensor(input, "mse_loss", "input"); need_tensor(target, "mse_loss", "target")
  opts = options.check(opts, "mse_loss", LOSS_OPTIONS.mse_loss)
  local d = input - target
  return reduce(d * d, opts.reduction)
end

function F.l1_loss(input, target, opts)
  need_tensor(input, "l1_loss", "input"); need_tensor(target, "l1_loss", "target")
  opts = options.check(opts, "l1_loss", LOSS_OPTIONS.l1_loss)
  return reduce(ops.abs(input - target), opts.reduction)
end

-- the Huber terms of d = |input - target|: 0.5 d^2 below delta, delta (d - 0.5 delta) above
local function huber_terms(d, delta) return ops.where(ops.lt(d, delta), d * d * 0.5, (d - 0.5 * delta) * delta) end
local function abs_difference(input, target, opname)
  need_tensor(input, opname, "input"); need_tensor(target, opname, "target")
  return ops.abs(input - target)
end

-- huber / beta: 0.5 d^2 / beta below beta, d - 0.5 beta above (beta = 0: l1); opts: reduction, beta (1)
function F.smooth_l1_loss(input, target, opts)
  local d = abs_difference(input, target, "smooth_l1_loss")
  opts = options.check(opts, "smooth_l1_loss", LOSS_OPTIONS.smooth_l1_loss)
  local beta = opts.beta or 1
  return reduce(beta == 0 and d or huber_terms(d, beta) / beta, opts.reduction)
end

-- opts: reduction, delta (1)
function F.huber_loss(input, target, opts)
  local d = abs_difference(input, target, "huber_loss")
  opts = options.check(opts, "huber_loss", LOSS_OPTIONS.huber_loss)
  return reduce(huber_terms(d, opts.delta or 1), opts.reduction)
end

-- input: log-probabilities; target: probabilities (log-probabilities with log_target) of input's shape:
-- target (log target - input), 0 where target is 0; opts: reduction ("mean" of every element, "batchmean"
-- = sum / N, "sum", "none"), log_target (false)
function F.kl_div(input, target, opts)
  need_tensor(input, "kl_div", "input"); need_tensor(target, "kl_div", "target")
  opts = options.check(opts, "kl_div", LOSS_OPTIONS.kl_div)
  local loss
  if opts.log_target then loss = ops.exp(target) * (target - input)
  else
    local positive = ops.gt(target, 0)
    loss = target * (ops.log(ops.where(positive, target, 1)) - input)
  end
  if opts.reduction == "batchmean" then return loss:sum() / (#input._shape > 0 and input._shape[1] or 1) end
  return reduce(loss, opts.reduction)
end

-- max(0, -y (x1 - x2) + margin), y = 1 or -1; opts: reduction, margin (0)
function F.margin_ranking_loss(input1, input2, target, opts)
  need_tensor(input1, "margin_ranking_loss", "input1"); need_tensor(input2, "margin_ranking_loss", "input2")
  need_tensor(target, "margin_ranking_loss", "target")
  opts = options.check(opts, "margin_ranking_loss", LOSS_OPTIONS.margin_ranking_loss)
  return reduce(ops.clamp_min(-target * (input1 - input2) + (opts.margin or 0), 0), opts.reduction)
end

-- stable: (1 - y) x + (1 + (pw - 1) y) (log(1 + exp(-|x|)) + max(-x, 0)), times weight;
-- opts: reduction, weight (broadcast to input), pos_weight (broadcast along the last dim, one per class)
function F.binary_cross_entropy_with_logits(input, target, opts)
  local op = "binary_cross_entropy_with_logits"
  need_tensor(input, op, "input"); need_tensor(target, op, "target")
  opts = options.check(opts, op, LOSS_OPTIONS.binary_cross_entropy_with_logits)
  local softplus_neg = ops.log(ops.exp(-ops.abs(input)) + 1) + ops.relu(-input)
  local pw = opts.pos_weight
  local loss
  if pw ~= nil then
    loss = (1 - target) * input + ((pw - 1) * target + 1) * softplus_neg
  else
    loss = (1 - target) * input + softplus_neg
  end
  if opts.weight then loss = loss * opts.weight end
  return reduce(loss, opts.reduction)
end

-- input: probabilities; log terms clamped at -100 as in PyTorch; opts: reduction, weight
function F.binary_cross_entropy(input, target, opts)
  need_tensor(input, "binary_cross_entropy", "input"); need_tensor(target, "binary_cross_entropy", "target")
  opts = options.check(opts, "binary_cross_entropy", LOSS_OPTIONS.binary_cross_entropy)
  local lp = ops.clamp(ops.log(input), -100)
  local lq = ops.clamp(ops.log(1 - input), -100)
  local loss = -(target * lp + (1 - target) * lq)
  if opts.weight then loss = loss * opts.weight end
  return reduce(loss, opts.reduction)
end

local FAMILIES = { activation, spatial, norm, pool1d, dropout, sampling, loss_more, ctc, fold, conv3d, pool3d,
  layers_more, grid, fractional, inplace }
for _, family in ipairs(FAMILIES) do
  for name, fn in pairs(family) do if type(fn) == "function" then F[name] = fn end end
end

return F
