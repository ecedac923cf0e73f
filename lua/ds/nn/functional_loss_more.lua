-- nn/functional_loss_more.lua: ds.F's remaining losses, composed from ds ops as PyTorch 1.13 computes them
-- (so they differentiate, trace and compile): pairwise_distance, triplet_margin_loss, cosine_embedding_loss,
-- triplet_margin_with_distance_loss, hinge_embedding_loss, soft_margin_loss, multilabel_soft_margin_loss,
-- multi_margin_loss, multilabel_margin_loss, poisson_nll_loss, gaussian_nll_loss. Class targets are 1-based
-- (PyTorch's class k is ds's k + 1).
local ops = require("ds.ops")
local errors = require("ds.errors")
local options = require("ds.options")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local LOSS_OPTIONS = require("ds.nn.loss_options")
local activation = require("ds.nn.functional_activation")

local M = {}

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end
local function need_tensor(x, opname, what)
  if not Tensor.is_tensor(x) then raise("%s: %s must be a tensor, got %s", opname, what, type(x)) end
  return x
end
local function reduce(loss, reduction)
  local r = reduction or "mean"
  if r == "mean" then return loss:mean() end
  if r == "sum" then return loss:sum() end
  return loss
end

-- ||x1 - x2 + eps||_p along the last dim of the broadcast inputs; p (2), eps (1e-6), keepdim (false)
function M.pairwise_distance(x1, x2, p, eps, keepdim)
  need_tensor(x1, "pairwise_distance", "x1"); need_tensor(x2, "pairwise_distance", "x2")
  if p ~= nil and type(p) ~= "number" then raise("pairwise_distance: p must be a number, got %s", type(p)) end
  if eps ~= nil and type(eps) ~= "number" then raise("pairwise_distance: eps must be a number, got %s", type(eps)) end
  if #x1._shape == 0 and #x2._shape == 0 then raise("pairwise_distance: inputs must have at least 1 dim") end
  return ops.norm(x1 - x2 + (eps or 1e-6), p or 2, -1, keepdim == true)
end

-- anchor, positive, negative: (N, D) or (D); max(d(a, p) - d(a, n) + margin, 0) with d the pairwise distance
-- (swap: d(a, n) replaced by min(d(a, n), d(p, n))); opts: margin (1), p (2), eps (1e-6), swap (false), reduction
function M.triplet_margin_loss(anchor, positive, negative, opts)
  local op = "triplet_margin_loss"
  need_tensor(anchor, op, "anchor"); need_tensor(positive, op, "positive"); need_tensor(negative, op, "negative")
  opts = options.check(opts, op, LOSS_OPTIONS[op])
  local n = #anchor._shape
  if (n ~= 1 and n ~= 2) or #positive._shape ~= n or #negative._shape ~= n then
    raise("%s: anchor %s, positive %s and negative %s must all be (N, D) or all (D)", op, S.str(anchor._shape),
      S.str(positive._shape), S.str(negative._shape))
  end
  local p, eps = opts.p or 2, opts.eps or 1e-6
  local d_pos = M.pairwise_distance(anchor, positive, p, eps)
  local d_neg = M.pairwise_distance(anchor, negative, p, eps)
  if opts.swap then d_neg = ops.minimum(d_neg, M.pairwise_distance(positive, negative, p, eps)) end
  return reduce(ops.clamp_min(d_pos - d_neg + (opts.margin or 1), 0), opts.reduction)
end

-- triplet_margin_loss with any distance: opts distance_function (f(x1, x2) -> distances; pairwise_distance by
-- default), margin (1), swap (false), reduction
function M.triplet_margin_with_distance_loss(anchor, positive, negative, opts)
  local op = "triplet_margin_with_distance_loss"
  need_tensor(anchor, op, "anchor"); need_tensor(positive, op, "positive"); need_tensor(negative, op, "negative")
  opts = options.check(opts, op, LOSS_OPTIONS[op])
  local dist = opts.distance_function or M.pairwise_distance
  local d_pos, d_neg = dist(anchor, positive), dist(anchor, negative)
  if opts.swap then d_neg = ops.minimum(d_neg, dist(positive, negative)) end
  return reduce(ops.clamp_min(d_pos - d_neg + (opts.margin or 1), 0), opts.reduction)
end

-- x1, x2: (N, D) or (D); y: (N) or () of 1 / -1: 1 - cos where y = 1, max(cos - margin, 0) where y = -1
-- (cos = sum(x1 x2) / sqrt((|x1|^2 + 1e-12) (|x2|^2 + 1e-12))); opts: margin (0), reduction
function M.cosine_embedding_loss(x1, x2, target, opts)
  local op = "cosine_embedding_loss"
  need_tensor(x1, op, "input1"); need_tensor(x2, op, "input2"); need_tensor(target, op, "target")
  opts = options.check(opts, op, LOSS_OPTIONS[op])
  local n = #x1._shape
  if (n ~= 1 and n ~= 2) or #x2._shape ~= n or #target._shape ~= n - 1 then
    raise("%s: inputs %s, %s must be (N, D) with target (N), or (D) with a 0-d target, got target %s", op,
      S.str(x1._shape), S.str(x2._shape), S.str(target._shape))
  end
  local EPSILON = 1e-12
  local prod = (x1 * x2):sum(n)
  local denom = ops.sqrt(((x1 * x1):sum(n) + EPSILON) * ((x2 * x2):sum(n) + EPSILON))
  local cos = prod / denom
  local zero = ops.zeros_like(cos)
  local loss = ops.where(ops.eq(target, 1), 1 - cos, zero)
    + ops.where(ops.eq(target, -1), ops.clamp_min(cos - (opts.margin or 0), 0), zero)
  return reduce(loss, opts.reduction)
end

-- input, target (1 or -1) of one shape: x where y = 1, max(margin - x, 0) where y = -1 (both terms
-- where y is neither); opts: margin (1), reduction
function M.hinge_embedding_loss(input, target, opts)
  local op = "hinge_embedding_loss"
  need_tensor(input, op, "input"); need_tensor(target, op, "target")
  opts = options.check(opts, op, LOSS_OPTIONS[op])
  local zero = ops.zeros_like(input)
  local loss = ops.where(ops.ne(target, 1), ops.clamp_min((opts.margin or 1) - input, 0), zero)
    + ops.where(ops.ne(target, -1), input, zero)
  return reduce(loss, opts.reduction)
end

-- log(1 + exp(-y x)) elementwise, y = 1 or -1; opts: reduction
function M.soft_margin_loss(input, target, opts)
  need_tensor(input, "soft_margin_loss", "input"); need_tensor(target, "soft_margin_loss", "target")
  opts = options.check(opts, "soft_margin_loss", LOSS_OPTIONS.soft_margin_loss)
  return reduce(ops.log1p(ops.exp(-input * target)), opts.reduction)
end

-- input, target (0/1 per class): (N, C) or (C); -(y logsigmoid(x) + (1 - y) logsigmoid(-x)) times weight,
-- averaged over the classes, then reduced over N; opts: weight (broadcast to input), reduction
function M.multilabel_soft_margin_loss(input, target, opts)
  local op = "multilabel_soft_margin_loss"
  need_tensor(input, op, "input"); need_tensor(target, op, "target")
  opts = options.check(opts, op, LOSS_OPTIONS[op])
  if #input._shape == 0 then raise("%s: input must be (N, C) or (C), got %s", op, S.str(input._shape)) end
  local loss = -(target * activation.logsigmoid(input) + (1 - target) * activation.logsigmoid(-input))
  if opts.weight then loss = loss * opts.weight end
  local d = #input._shape
  return reduce(loss:sum(d) / input._shape[d], opts.reduction)
end

-- input (N, C) or (C), target (N) or () 1-based classes: sum over i ~= y of max(0, margin - x[y] + x[i])^p
-- times weight[y], divided by C; opts: p (1 or 2), margin (1), weight (C), reduction
function M.multi_margin_loss(input, target, opts)
  local op = "multi_margin_loss"
  need_tensor(input, op, "input"); need_tensor(target, op, "target")
  opts = options.check(opts, op, LOSS_OPTIONS[op])
  local p = opts.p or 1
  if p ~= 1 and p ~= 2 then raise("%s: p must be 1 or 2, got %s", op, tostring(p)) end
  local n = #input._shape
  if (n ~= 1 and n ~= 2) or #target._shape ~= n - 1 or (n == 2 and not S.same(target._shape[1], input._shape[1])) then
    raise("%s: input (N, C) takes target (N), input (C) a 0-d target; got input %s, target %s", op,
      S.str(input._shape), S.str(target._shape))
  end
  if target.dtype == "f32" or target.dtype == "f64" or target.dtype == "bool" then
    raise("%s: target must hold integer classes (1-based), got %s", op, target.dtype)
  end
  local C = input._shape[n]
  local t = target:unsqueeze(-1)
  local z = ops.clamp_min(input - ops.gather(input, -1, t) + (opts.margin or 1), 0)
  if p == 2 then z = z * z end
  if opts.weight then
    local w = opts.weight
    if #w._shape ~= 1 or not S.same(w._shape[1], C) then
      raise("%s: weight %s must be (%s), one per class", op, S.str(w._shape), tostring(C))
    end
    z = z * ops.index_select(w:astype(input.dtype), 1, t:reshape(-1)):reshape(t._shape)
  end
  local classes = ops.arange(1, C + 1, { dtype = target.dtype })
  z = ops.where(ops.eq(classes, t), ops.zeros_like(z), z)
  return reduce(z:sum(-1) / C, opts.reduction)
end

-- input (N, C) or (C); target of input's shape: 1-based classes, the first value below 1 (PyTorch's -1 is ds's 0
-- or -1) ending the list: sum over listed j and unlisted i of max(0, 1 - (x[y_j] - x[i])) / C; opts: reduction
function M.multilabel_margin_loss(input, target, opts)
  local op = "multilabel_margin_loss"
  need_tensor(input, op, "input"); need_tensor(target, op, "target")
  opts = options.check(opts, op, LOSS_OPTIONS[op])
  local n = #input._shape
  if (n ~= 1 and n ~= 2) or not S.equal(input._shape, target._shape) then
    raise("%s: target %s must have input's shape, (N, C) or (C), got input %s", op, S.str(target._shape),
      S.str(input._shape))
  end
  if target.dtype == "f32" or target.dtype == "f64" or target.dtype == "bool" then
    raise("%s: target must hold integer classes (1-based), got %s", op, target.dtype)
  end
  local C = input._shape[n]
  if type(C) ~= "number" then raise("%s: the class dim of %s must have a known size", op, S.str(input._shape)) end
  -- listed (..., C): before the first end marker; is_target (..., C): class i is listed
  local listed = ops.eq(ops.cumsum(ops.lt(target, 1):astype("i64"), n), 0)
  local t = ops.where(listed, target, ops.ones_like(target))
  local classes = ops.arange(1, C + 1, { dtype = target.dtype })
  local is_target = ops.logical_and(ops.eq(t:unsqueeze(-1), classes), listed:unsqueeze(-1)):any(n)
  local xy = ops.gather(input, n, t) -- (..., C): x at the listed classes
  local z = ops.clamp_min(1 - (xy:unsqueeze(-1) - input:unsqueeze(-2)), 0) -- (..., j, i)
  local keep = ops.logical_and(listed:unsqueeze(-1), ops.logical_not(is_target):unsqueeze(-2))
  return reduce(ops.where(keep, z, ops.zeros_like(z)):sum(n + 1):sum(n) / C, opts.reduction)
end

-- exp(x) - y x (log_input, default) or x - y log(x + eps); full adds Stirling's y log y - y + log(2 pi y) / 2
-- where y > 1; opts: log_input (true), full (false), eps (1e-8), reduction
function M.poisson_nll_loss(input, target, opts)
  local op = "poisson_nll_loss"
  need_tensor(input, op, "input"); need_tensor(target, op, "target")
  opts = options.check(opts, op, LOSS_OPTIONS[op])
  local loss
  if opts.log_input == false then loss = input - target * ops.log(input + (opts.eps or 1e-8))
  else loss = ops.exp(input) - target * input end
  if opts.full then
    local big = ops.gt(target, 1)
    local y = ops.where(big, target, ops.full_like(target, 2))
    local stirling = y * ops.log(y) - y + ops.log(y * (2 * math.pi)) * 0.5
    loss = loss + ops.where(big, stirling, ops.zeros_like(stirling))
  end
  return reduce(loss, opts.reduction)
end

-- (log(max(var, eps)) + (input - target)^2 / max(var, eps)) / 2 (+ log(2 pi) / 2 with full); var of input's
-- shape, or of its shape without the last dim (or with it 1): one variance for the last dim. The clamp passes
-- var's gradient unchanged, as PyTorch's (it clamps under no_grad). opts: full (false), eps (1e-6), reduction
function M.gaussian_nll_loss(input, target, var, opts)
  local op = "gaussian_nll_loss"
  need_tensor(input, op, "input"); need_tensor(target, op, "target"); need_tensor(var, op, "var")
  opts = options.check(opts, op, LOSS_OPTIONS[op])
  local si, sv = input._shape, var._shape
  if not S.equal(si, sv) then
    local lead = {}
    for i = 1, #si - 1 do lead[i] = si[i] end
    local lead_v = {}
    for i = 1, #sv - 1 do lead_v[i] = sv[i] end
    if S.equal(lead, sv) then var = var:unsqueeze(-1)
    elseif not (#sv == #si and S.equal(lead, lead_v) and sv[#sv] == 1) then
      raise("%s: var %s is of incorrect size for input %s", op, S.str(sv), S.str(si))
    end
  end
  if var._c ~= nil and ops.lt(var, 0):any():item() then raise("%s: var has negative entries", op) end
  local eps = opts.eps or 1e-6
  var = ops.where(ops.lt(var, eps), var - var:detach() + eps, var)
  local d = input - target
  local loss = (ops.log(var) + d * d / var) * 0.5
  if opts.full then loss = loss + 0.5 * math.log(2 * math.pi) end
  return reduce(loss, opts.reduction)
end

return M
