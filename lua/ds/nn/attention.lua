-- nn/attention.lua: MultiheadAttention (PyTorch's parameter layout: packed in_proj_weight/bias and
-- out_proj): linear projections around F.scaled_dot_product_attention (one kernel).
local Module = require("ds.nn.module")
local options = require("ds.options")
local F = require("ds.nn.functional")
local Linear = require("ds.nn.linear").Linear
local init = require("ds.nn.init_weights")
local ops = require("ds.ops")
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local S = require("ds.shape")
local attention_weights = require("ds.ops.attention").weights

-- opts: dropout (0), bias (true), batch_first (false), kdim, vdim (key / value sizes, embed_dim), dtype
local MHA = Module:extend("MultiheadAttention", { forward = { "tensor", "tensor?", "tensor?", "table?" } })
function MHA:init(embed_dim, num_heads, opts)
  if type(embed_dim) ~= "number" or type(num_heads) ~= "number" then
    errors.raise("MultiheadAttention: expects MultiheadAttention(embed_dim, num_heads, [opts])")
  end
  if embed_dim % num_heads ~= 0 then
    errors.raise(string.format("MultiheadAttention: embed_dim %d is not divisible by num_heads %d",
      embed_dim, num_heads))
  end
  opts = options.check(opts, "MultiheadAttention", { dropout = { "number", min = 0, max = 1 }, bias = "boolean",
                                                     batch_first = "boolean", dtype = "dtype",
                                                     kdim = { "integer", min = 1 }, vdim = { "integer", min = 1 } })
  local dt = opts.dtype or "f32"
  self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim / num_heads
  self.dropout, self.batch_first = opts.dropout or 0, opts.batch_first == true
  self.kdim, self.vdim = opts.kdim or embed_dim, opts.vdim or embed_dim
  if self.kdim == embed_dim and self.vdim == embed_dim then
    self.in_proj_weight = Module.Parameter(init.xavier_uniform_(ops.empty(3 * embed_dim, embed_dim, { dtype = dt })))
  else -- PyTorch's layout when key or value have other sizes: one projection weight each
    self.q_proj_weight = Module.Parameter(init.xavier_uniform_(ops.empty(embed_dim, embed_dim, { dtype = dt })))
    self.k_proj_weight = Module.Parameter(init.xavier_uniform_(ops.empty(embed_dim, self.kdim, { dtype = dt })))
    self.v_proj_weight = Module.Parameter(init.xavier_uniform_(ops.empty(embed_dim, self.vdim, { dtype = dt })))
  end
  if opts.bias ~= false then self.in_proj_bias = Module.Parameter(ops.zeros(3 * embed_dim, { dtype = dt })) end
  self.out_proj = Linear(embed_dim, embed_dim, { bias = opts.bias ~= false, dtype = dt })
  if opts.bias ~= false then init.zeros_(self.out_proj.bias) end
end

local function part(t, i, E)
  if t == nil then return nil end
  return t:narrow(1, (i - 1) * E + 1, E)
end

-- (B,T,E) -> (B,H,T,D)
local function heads(x, H, D)
  local s = x._shape
  return x:reshape(s[1], s[2], H, D):transpose(2, 3)
end

-- one SDPA mask (true / 0 = attend) from MHA's key_padding_mask (B,S) and attn_mask (L,S) or (B*H,L,S),
-- each bool (true = ignore) or float (added); nil when neither is given. Bool masks combine as bool
-- (B,1,L,S) at most; a float one makes the combination float (a hidden position -inf).
local function attention_mask(kpm, am, B, H, L, Sk, dt)
  local parts = {}
  if kpm ~= nil then
    if not S.equal(kpm._shape, { B, Sk }) then
      errors.raise(string.format("MultiheadAttention: key_padding_mask must be (%s,%s), got %s", tostring(B),
        tostring(Sk), S.str(kpm._shape)))
    end
    parts[#parts + 1] = kpm:reshape(B, 1, 1, Sk)
  end
  if am ~= nil then
    if #am._shape == 3 then am = am:reshape(B, H, L, Sk)
    elseif #am._shape ~= 2 then
      errors.raise("MultiheadAttention: attn_mask must be (L,S) or (B*H,L,S), got " .. S.str(am._shape))
    end
    parts[#parts + 1] = am
  end
  if #parts == 0 then return nil end
  local all_bool = true
  for _, m in ipairs(parts) do all_bool = all_bool and m.dtype == "bool" end
  local mask
  for _, m in ipairs(parts) do
    if not all_bool and m.dtype == "bool" then m = ops.zeros_like(m, { dtype = dt }):masked_fill(m, -math.huge) end
    if mask == nil then mask = m elseif all_bool then mask = ops.logical_or(mask, m) else mask = mask + m end
  end
  return all_bool and ops.logical_not(mask) or mask
end

-- unbatched (PyTorch's): query (L,E), key and value (S,E), key_padding_mask (S), attn_mask (L,S) or (H,L,S)
-- -> output (L,E), weights (L,S) (or (H,L,S)): the batched forward on a batch of one
local function unbatched(self, query, key, value, opts)
  for i, x in ipairs { key, value } do
    if not Tensor.is_tensor(x) or #x._shape ~= 2 then
      errors.raise(string.format("MultiheadAttention: for an unbatched (2-D) query, %s must be 2-D too, got %s",
        ({ "key", "value" })[i], Tensor.is_tensor(x) and S.str(x._shape) or type(x)))
    end
  end
  local bdim = self.batch_first and 1 or 2
  local kpm = opts.key_padding_mask
  if kpm ~= nil then
    if #kpm._shape ~= 1 then
      errors.raise("MultiheadAttention: for an unbatched query, key_padding_mask must be (S), got " ..
        S.str(kpm._shape))
    end
    kpm = kpm:unsqueeze(1)
  end
  local one = { key_padding_mask = kpm, attn_mask = opts.attn_mask, need_weights = opts.need_weights,
                average_attn_weights = opts.average_attn_weights }
  local same_kv = key == value
  local q = query:unsqueeze(bdim)
  local k = key == query and q or key:unsqueeze(bdim)
  local v = same_kv and k or value == query and q or value:unsqueeze(bdim)
  local out, attn = self:forward(q, k, v, one)
  out = out:squeeze(bdim)
  if attn == nil then return out end
  return out, attn:squeeze(1)
end

-- query: (B,L,E) (batch_first) or (L,B,E); key, value: (B,S,E) or (S,B,E); or unbatched (L,E), (S,E).
-- opts: key_padding_mask (B,S) (unbatched (S)) bool (true = ignore) or float (added), attn_mask (L,S) or
-- (B*H,L,S) bool or float, need_weights (true), average_attn_weights (true).
-- Returns output like query, and the attention weights (B,L,S) (or (B,H,L,S)) when need_weights, without B
-- when unbatched.
function MHA:forward(query, key, value, opts)
  opts = options.check(opts, "MultiheadAttention", { key_padding_mask = "tensor", attn_mask = "tensor",
    need_weights = "boolean",
                                                     average_attn_weights = "boolean" })
  key, value = key or query, value or key or query
  if Tensor.is_tensor(query) and #query._shape == 2 then return unbatched(self, query, key, value, opts) end
  local E, H, D = self.embed_dim, self.num_heads, self.head_dim
  for i, x in ipairs { query, key, value } do
    local size = ({ E, self.kdim, self.vdim })[i]
    if not Tensor.is_tensor(x) or #x._shape ~= 3 or not S.same(x._shape[3], size) then
      errors.raise(string.format("MultiheadAttention: %s must be 3-D (or all 2-D: unbatched) with %s %d last, " ..
        "got %s",
        ({ "query", "key", "value" })[i], ({ "embed_dim", "kdim", "vdim" })[i], size,
        Tensor.is_tensor(x) and S.str(x._shape) or type(x)))
    end
  end
  local q, k, v = query, key, value
  if not self.batch_first then q, k, v = q:transpose(1, 2), k:transpose(1, 2), v:transpose(1, 2) end
  local W, b = self.in_proj_weight, self.in_proj_bias
  if W == nil then
    q, k, v = F.linear(q, self.q_proj_weight, part(b, 1, E)), F.linear(k, self.k_proj_weight, part(b, 2, E)),
      F.linear(v, self.v_proj_weight, part(b, 3, E))
  elseif query == key and key == value then
    local qkv = F.linear(q, W, b)
    q, k, v = qkv:narrow(3, 1, E), qkv:narrow(3, E + 1, E), qkv:narrow(3, 2 * E + 1, E)
  else
    q, k, v = F.linear(q, part(W, 1, E), part(b, 1, E)), F.linear(k, part(W, 2, E), part(b, 2, E)),
      F.linear(v, part(W, 3, E), part(b, 3, E))
  end
  local B, L, Sk = q._shape[1], q._shape[2], k._shape[2]
  q, k, v = heads(q, H, D), heads(k, H, D), heads(v, H, D)
  local mask = attention_mask(opts.key_padding_mask, opts.attn_mask, B, H, L, Sk, q.dtype)
  local kind = mask == nil and "none" or mask.dtype == "bool" and "bool" or "float"
  local p = self.training and self.dropout or 0
  local out, attn
  if opts.need_weights == false then
    out = F.scaled_dot_product_attention(q, k, v, { mask = mask, scale = 1 / math.sqrt(D), dropout_p = p })
  else   -- the weights are a result: computed as ds ops, as PyTorch's MHA does when it returns them
    attn = attention_weights(q, k, mask, { scale = 1 / math.sqrt(D), mask = kind, is_causal = false })
    if p > 0 then attn = F.dropout(attn, p, true) end
    out = ops.matmul(attn, v)
  end
  out = out:transpose(2, 3):reshape(B, L, E)
  out = self.out_proj(out)
  if not self.batch_first then out = out:transpose(1, 2) end
  if opts.need_weights == false then return out end
  if opts.average_attn_weights == false then return out, attn end
  return out, attn:mean(2)
end
function MHA:extra_repr()
  return string.format("embed_dim=%d, num_heads=%d, batch_first=%s", self.embed_dim, self.num_heads,
    tostring(self.batch_first))
end

return { MultiheadAttention = MHA }
