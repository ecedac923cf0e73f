-- nn/functional_ctc.lua: ds.F.ctc_loss (connectionist temporal classification, PyTorch 1.13's semantics),
-- composed from ds ops so it traces, compiles and differentiates: the forward (alpha) recursion in log space
-- over the extended label sequence (blank, l1, blank, l2, ..., blank), one step of ops per time step.
-- Impossible states hold a large finite negative number instead of -inf, so no NaN reaches the gradient;
-- a log-likelihood still below half of it is an impossible alignment: loss inf (0 with zero_infinity).
-- Gradient: PyTorch's ctc_loss backward returns exp(log_probs) - (the label occupancies) for t < input_length,
-- the gradient with respect to logits under log_softmax, not the derivative in log_probs (the two differ by
-- exp(log_probs)); a zero-valued term exp(lp) - detach(exp(lp)) reproduces it, so gradients equal PyTorch's,
-- and the finite-difference gradient is PyTorch's too through log_softmax, as CTC is used.
local ops = require("ds.ops")
local errors = require("ds.errors")
local options = require("ds.options")
local S = require("ds.shape")
local Tensor = require("ds.tensor")
local LOSS_OPTIONS = require("ds.nn.loss_options")

local M = {}

local NEG = -1e30 -- log(0) for the recursion; exp(NEG - x) is 0 for any finite x
local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end

-- lengths (a tensor or a list of integers) as an i64 tensor of n entries ((n) batched, () unbatched)
local function lengths(v, n, batched, what)
  if type(v) == "number" then v = { v } end
  if type(v) == "table" and not Tensor.is_tensor(v) then v = ops.tensor(v, { dtype = "i64" }) end
  if not Tensor.is_tensor(v) then raise("ctc_loss: %s must be a tensor or a list of integers", what) end
  if v.dtype == "f32" or v.dtype == "f64" or v.dtype == "bool" then
    raise("ctc_loss: %s must hold integers, got %s", what, v.dtype)
  end
  if not S.same(S.numel(v._shape), n) or (batched and #v._shape ~= 1) or (not batched and #v._shape > 1) then
    raise("ctc_loss: %s must have %s entries, got shape %s", what, tostring(n), S.str(v._shape))
  end
  return v:reshape(n):astype("i64")
end

-- the targets as a padded (N, Smax) i64 tensor: given (N, S), or concatenated (sum of target_lengths),
-- which needs the lengths' values (eagerly, or as a list)
local function padded_targets(targets, tlen_given, tl, N, batched)
  if not batched then return targets:reshape(1, -1) end
  if #targets._shape == 2 then return targets end
  if #targets._shape ~= 1 then raise("ctc_loss: targets must be (N, S) or 1-D concatenated, got %s",
    S.str(targets._shape)) end
  if type(N) ~= "number" then raise("ctc_loss: concatenated targets need a known batch size; pad the targets") end
  local list = type(tlen_given) == "table" and not Tensor.is_tensor(tlen_given) and tlen_given
  if not list then
    if tl._c == nil then
      raise("ctc_loss: concatenated targets need target_lengths' values: give them as a list, or pad the targets")
    end
    list = tl:totable()
  end
  local smax, rows, first = 1, {}, 1
  for i = 1, N do smax = math.max(smax, list[i]) end
  for i = 1, N do
    local row = targets:narrow(1, first, list[i])
    if list[i] < smax then row = ops.cat({ row, ops.ones(smax - list[i], { dtype = targets.dtype }) }, 1) end
    rows[i] = row
    first = first + list[i]
  end
  return ops.stack(rows, 1)
end

-- log_probs (T, N, C) or (T, C); targets (N, S), 1-D concatenated or (S) unbatched, 1-based classes;
-- input_lengths, target_lengths (N) or () (tensors or lists); opts: blank (1, PyTorch's 0), reduction ("mean":
-- each loss divided by its target length, then the batch mean), zero_infinity (false)
function M.ctc_loss(log_probs, targets, input_lengths, target_lengths, opts)
  if not Tensor.is_tensor(log_probs) then raise("ctc_loss: log_probs must be a tensor, got %s", type(log_probs)) end
  if not Tensor.is_tensor(targets) then raise("ctc_loss: targets must be a tensor, got %s", type(targets)) end
  opts = options.check(opts, "ctc_loss", LOSS_OPTIONS.ctc_loss)
  local batched = #log_probs._shape == 3
  if not batched and #log_probs._shape ~= 2 then
    raise("ctc_loss: log_probs must be (T, N, C) or (T, C), got %s", S.str(log_probs._shape))
  end
  if log_probs.dtype ~= "f32" and log_probs.dtype ~= "f64" then
    raise("ctc_loss: log_probs must be f32 or f64, got %s", log_probs.dtype)
  end
  if targets.dtype == "f32" or targets.dtype == "f64" or targets.dtype == "bool" then
    raise("ctc_loss: targets must hold integer classes (1-based), got %s", targets.dtype)
  end
  local lp = batched and log_probs or log_probs:unsqueeze(2)
  local T, N, C = lp._shape[1], lp._shape[2], lp._shape[3]
  if type(T) ~= "number" then raise("ctc_loss: T (dim 1) of log_probs %s must have a known size", S.str(lp._shape)) end
  local blank = opts.blank or 1
  if type(C) == "number" and blank > C then raise("ctc_loss: blank %d is not a class (C = %d)", blank, C) end
  local il = lengths(input_lengths, N, batched, "input_lengths")
  local tl = lengths(target_lengths, N, batched, "target_lengths")
  local tg = padded_targets(targets, target_lengths, tl, N, batched):astype("i64")
  local width = tg._shape[2] -- the longest target length possible
  if width == 0 then tg = ops.full({ N, 1 }, blank, { dtype = "i64" }) end -- empty targets: one padding column
  local Smax = tg._shape[2]
  if #tg._shape ~= 2 or not S.same(tg._shape[1], N) or type(Smax) ~= "number" then
    raise("ctc_loss: targets %s do not match a batch of %s", S.str(targets._shape), tostring(N))
  end
  if il._c ~= nil and tl._c ~= nil then -- eagerly, the lengths' ranges as PyTorch checks them
    for i, n in ipairs(il:totable()) do
      if n < 0 or n > T then raise("ctc_loss: input_lengths[%d] = %d must be in 0..%d (T)", i, n, T) end
    end
    for i, n in ipairs(tl:totable()) do
      if n < 0 or n > width then raise("ctc_loss: target_lengths[%d] = %d must be in 0..%d (S)", i, n, width) end
    end
  end
  local L = 2 * Smax + 1
  -- the extended labels (N, L): blank between and around the targets (padding read as blank)
  local pos = ops.arange(1, Smax + 1, { dtype = "i64" })
  tg = ops.where(ops.le(pos, tl:unsqueeze(2)), tg, ops.full_like(tg, blank))
  local blanks = ops.full({ N, Smax }, blank, { dtype = "i64" })
  local ext = ops.cat({ ops.stack({ blanks, tg }, 3):reshape(N, 2 * Smax),
    ops.full({ N, 1 }, blank, { dtype = "i64" }) }, 2)
  -- a skip from s - 2 to s: s is a label position (even, 1-based) whose label differs from the one at s - 2
  -- (PyTorch's rule: by position, so a target equal to blank is a label too)
  local label_pos = ops.eq(ops.remainder(ops.arange(3, L + 1, { dtype = "i64" }), 2), 0)
  local skip = ops.cat({ ops.zeros({ N, 2 }, { dtype = "bool" }),
    ops.logical_and(label_pos, ops.ne(ext:narrow(2, 3, L - 2), ext:narrow(2, 1, L - 2))) }, 2)
  -- log-probabilities of the extended labels per time step: (T, N, L)
  local lpe = ops.gather(lp, 3, ext:unsqueeze(1):expand(T, -1, -1):contiguous())
  local dt = lp.dtype
  local neg1 = ops.full({ N, 1 }, NEG, { dtype = dt })
  local neg2 = ops.full({ N, 2 }, NEG, { dtype = dt })
  local negL = ops.full({ N, L }, NEG, { dtype = dt })
  local first = ops.le(ops.arange(1, L + 1, { dtype = "i64" }), 2):unsqueeze(1)
  local alpha = ops.where(first, lpe:select(1, 1), negL)
  for t = 2, T do
    local a1 = ops.cat({ neg1, alpha:narrow(2, 1, L - 1) }, 2)
    local a2 = ops.where(skip, ops.cat({ neg2, alpha:narrow(2, 1, L - 2) }, 2), negL)
    local nxt = ops.stack({ alpha, a1, a2 }, 3):logsumexp(3) + lpe:select(1, t)
    alpha = ops.where(ops.gt(il, t - 1):unsqueeze(2), nxt, alpha)
  end
  -- the log-likelihood: the last blank or the last label (the latter only for a non-empty target)
  local last = (tl * 2 + 1):unsqueeze(2)
  local prev = ops.where(ops.gt(tl, 0), ops.gather(alpha, 2, ops.clamp_min(tl * 2, 1):unsqueeze(2)):squeeze(2),
    ops.full({ N }, NEG, { dtype = dt }))
  local ll = ops.stack({ ops.gather(alpha, 2, last):squeeze(2), prev }, 2):logsumexp(2)
  -- no input steps: the empty target has probability 1, any other none (alpha's first step did not happen)
  ll = ops.where(ops.eq(il, 0), ops.where(ops.eq(tl, 0), ops.zeros_like(ll), ops.full_like(ll, NEG)), ll)
  -- PyTorch's gradient term (value 0): exp(lp) at every t < input_length
  local e = ops.exp(lp)
  local valid = ops.lt(ops.arange(0, T, { dtype = "i64" }):unsqueeze(2), il):unsqueeze(3)
  local extra = ops.where(valid, e - e:detach(), ops.zeros_like(e)):sum(3):sum(1)
  local loss = -ll + extra
  local impossible = ops.lt(ll, NEG / 2)
  loss = ops.where(impossible, ops.full({ N }, opts.zero_infinity and 0 or math.huge, { dtype = dt }), loss)
  local r = opts.reduction or "mean"
  if r == "sum" then return loss:sum() end
  if r == "mean" then return (loss / ops.clamp_min(tl, 1):astype(dt)):mean() end
  return batched and loss or loss:reshape({})
end

return M
