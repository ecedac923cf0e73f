-- ops/attention.lua: scaled_dot_product_attention (PyTorch 2 semantics) on one C kernel (src/nn_attention.c);
-- its backward recomputes the attention weights with ds ops; dropout (training) runs as ds ops.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local errors = require("ds.errors")
local sum_to = require("ds.autograd").sum_to
local random = require("ds.random")
local creation = require("ds.ops.creation") -- the full / arange defs
local F = C.functions

local function raise(fmt, ...) errors.raise(string.format(fmt, ...)) end
local OP = "scaled_dot_product_attention"

-- bool (L,S): true above the diagonal (key j after query i), the positions is_causal hides
local function causal_hidden(L, Sk)
  local function range(n) return D.call(creation.arange, {}, { start = 0, step = 1, length = n, dtype = "i64" }) end
  local i, j = range(L):reshape(L, 1), range(Sk):reshape(1, Sk)
  return F.lt(i, j)
end

-- the attention weights (..., L, S) with ds ops, the kernel's definition: softmax(q k^T * scale + mask);
-- a = {scale =, mask = "none" | "bool" | "float", is_causal =}
local function weights(q, k, mask, a)
  local s = F.matmul(q, k:transpose(-1, -2)) * a.scale
  if a.mask == "bool" then s = F.masked_fill(s, F.logical_not(mask), -math.huge)
  elseif a.mask == "float" then s = s + mask end
  if a.is_causal then
    s = F.masked_fill(s, causal_hidden(q._shape[#q._shape - 1], k._shape[#k._shape - 1]), -math.huge)
  end
  return F.softmax(s, -1)
end

-- q (..., L, E), k (..., S, E), v (..., S, Ev) -> (batch..., L, Ev); the mask broadcasts to (batch..., L, S)
local function infer(inputs, a)
  local q, k, v = inputs[1]._shape, inputs[2]._shape, inputs[3]._shape
  local nq, nk, nv = #q, #k, #v
  if nq < 2 or nk < 2 or nv < 2 then
    raise("%s: q, k, v must be at least 2-D (..., L, E), got %s, %s, %s", OP, S.str(q), S.str(k), S.str(v))
  end
  if not S.same(q[nq], k[nk]) then raise("%s: q %s and k %s differ in the last dim E", OP, S.str(q), S.str(k)) end
  if not S.same(k[nk - 1], v[nv - 1]) then
    raise("%s: k %s and v %s differ in the sequence dim S", OP, S.str(k), S.str(v))
  end
  local function lead(s, n) local b = {}; for i = 1, n - 2 do b[i] = s[i] end; return b end
  local batch = S.broadcast(S.broadcast(lead(q, nq), lead(k, nk), OP), lead(v, nv), OP)
  if (a.mask == "none") ~= (inputs[4] == nil) then
    raise("%s: mask kind '%s' needs %s mask input", OP, a.mask, a.mask == "none" and "no" or "a")
  end
  if inputs[4] then
    local scores = {}
    for i, d in ipairs(batch) do scores[i] = d end
    scores[#scores + 1] = q[nq - 1]; scores[#scores + 1] = k[nk - 1]
    local m = inputs[4]._shape
    local ok, s = pcall(S.broadcast, scores, m, OP)
    if not ok or not S.equal(s, scores) then
      raise("%s: mask %s does not broadcast to the scores' shape %s", OP, S.str(m), S.str(scores))
    end
  end
  local out = {}
  for i, d in ipairs(batch) do out[i] = d end
  out[#out + 1] = q[nq - 1]; out[#out + 1] = v[nv]
  return { shape = out, dtype = inputs[1].dtype }
end

-- grads of q, k, v (and of a float mask) from g (..., L, Ev): the weights recomputed, then
-- dv = p^T g, dp = g v^T, ds = p * (dp - rowsum(dp * p)), dq = ds k * scale, dk = ds^T q * scale
local function backward(ctx, g)
  local q, k, v, mask = ctx.inputs[1], ctx.inputs[2], ctx.inputs[3], ctx.inputs[4]
  local a = ctx.attrs
  local p = weights(q, k, mask, a)
  local dv = ctx.needs[3] and sum_to(F.matmul(p:transpose(-1, -2), g), v._shape) or nil
  local dp = F.matmul(g, v:transpose(-1, -2))
  local ds = p * (dp - (dp * p):sum(-1, true))
  local dq = ctx.needs[1] and sum_to(F.matmul(ds, k) * a.scale, q._shape) or nil
  local dk = ctx.needs[2] and sum_to(F.matmul(ds:transpose(-1, -2), q) * a.scale, k._shape) or nil
  local dm = ctx.needs[4] and a.mask == "float" and sum_to(ds, mask._shape) or nil
  return dq, dk, dv, dm
end

local def = D.define {
  name = OP,
  doc = "softmax(q k^T * scale + mask) v in one kernel, with bool/float mask or causal "
    .. "(F.scaled_dot_product_attention)",
  kind = "nn", kernel = "ds_scaled_dot_product_attention_%s", dtypes = C.FLOAT, ninputs = 4, variadic = true,
  attrs = { { "scale", "float" }, { "mask", "enum", "none", { "none", "bool", "float" } },
    { "is_causal", "bool", false } },
  promote = function(inputs, a)
    local qkv = C.promote_float { inputs[1], inputs[2], inputs[3] }
    if inputs[4] ~= nil and a.mask == "float" then qkv[4] = D.cast(inputs[4], qkv[1].dtype) else qkv[4] = inputs[4] end
    return qkv
  end,
  pack = function(a)
    return { a.scale, a.mask == "bool" and 1 or a.mask == "float" and 2 or 0, a.is_causal and 1 or 0 }
  end,
  infer = infer,
  backward = backward,
  sample = function()   -- fixed values (the spec calls it more than once)
    local function wave(phase, ...)
      local shape = { ... }
      local n = 1
      for _, d in ipairs(shape) do n = n * d end
      return F.sin(F.arange(n, { dtype = "f32" }) * 0.7 + phase):reshape(shape)
    end
    local q, k, v, m = wave(0, 2, 3, 4), wave(1, 2, 5, 4), wave(2, 2, 5, 3), wave(3, 3, 5)
    return { q, k, v, m }, {}, function(q_, k_, v_, m_)
      return F.scaled_dot_product_attention(q_, k_, v_, { mask = m_, scale = 0.5 })
    end
  end,
}

-- ds.scaled_dot_product_attention(q, k, v, {mask =, is_causal =, scale =, dropout_p =}): PyTorch 2's
-- F.scaled_dot_product_attention. mask: bool (true = attend) or float (added to the scores), broadcast
-- to (..., L, S); is_causal: key j hidden from query i when j > i; scale: 1/sqrt(E) by default;
-- dropout_p > 0 drops weights with ds's Philox generator (ds.dropout) and runs as ds ops.
C.export(OP, function(q, k, v, opts)
  opts = opts or {}
  if type(opts) ~= "table" or C.is_tensor(opts) then
    raise("%s: options must be a table {mask =, is_causal =, scale =, dropout_p =}", OP)
  end
  for key in pairs(opts) do
    if key ~= "mask" and key ~= "is_causal" and key ~= "scale" and key ~= "dropout_p" then
      raise("%s: unknown option '%s'", OP, tostring(key))
    end
  end
  for i, x in ipairs { q, k, v } do
    if not C.is_tensor(x) then raise("%s: %s must be a tensor, got %s", OP, ({ "q", "k", "v" })[i], type(x)) end
  end
  local mask = opts.mask
  if mask ~= nil and not C.is_tensor(mask) then raise("%s: mask must be a tensor, got %s", OP, type(mask)) end
  if mask ~= nil and opts.is_causal then raise("%s: give either mask or is_causal, not both", OP) end
  local kind = mask == nil and "none" or mask.dtype == "bool" and "bool" or "float"
  if kind == "float" and mask.dtype ~= "f32" and mask.dtype ~= "f64" then
    raise("%s: mask must be bool (true = attend) or float (added), got %s", OP, mask.dtype)
  end
  local E = q._shape[#q._shape]
  local scale = opts.scale
  if scale == nil then
    if type(E) ~= "number" then
      raise("%s: the default scale needs a static last dim E, got %s; pass scale", OP, tostring(E))
    end
    scale = 1 / math.sqrt(E)
  end
  if type(scale) ~= "number" then raise("%s: scale must be a number, got %s", OP, type(scale)) end
  local p = opts.dropout_p or 0
  if type(p) ~= "number" or p < 0 or p > 1 then
    raise("%s: dropout_p must be a number in [0, 1], got %s", OP, tostring(p))
  end
  local a = { scale = scale, mask = kind, is_causal = opts.is_causal == true }
  if p == 0 then return D.call(def, { q, k, v, mask }, a) end
  local attn = weights(q, k, mask and (kind == "float" and mask:astype(q.dtype) or mask), a)
  return F.matmul(random.dropout(attn, p, true), v)
end, { method = false, args = { "tensor", "tensor", "tensor", "table?" } })

return { weights = weights }
