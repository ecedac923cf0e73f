-- nn/attention.lua: MultiheadAttention (PyTorch's parameter layout: packed in_proj_weight/bias and
-- out_proj), composed from linear, matmul, softmax, reshape and transpose.
local Module = require("ds.nn.module")
local F = require("ds.nn.functional")
local Linear = require("ds.nn.linear").Linear
local init = require("ds.nn.init_weights")
local ops = require("ds.ops.common").functions
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local S = require("ds.shape")

-- opts: dropout (0), bias (true), batch_first (false), dtype
local MHA = Module:extend("MultiheadAttention")
function MHA:init(embed_dim, num_heads, opts)
  if type(embed_dim) ~= "number" or type(num_heads) ~= "number" then
    errors.raise("MultiheadAttention: expects MultiheadAttention(embed_dim, num_heads, [opts])")
  end
  if embed_dim % num_heads ~= 0 then
    errors.raise(string.format("MultiheadAttention: embed_dim %d is not divisible by num_heads %d", embed_dim, num_heads))
  end
  opts = opts or {}
  local dt = opts.dtype or "f32"
  self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim / num_heads
  self.dropout, self.batch_first = opts.dropout or 0, opts.batch_first == true
  self.in_proj_weight = Module.Parameter(init.xavier_uniform_(ops.empty(3 * embed_dim, embed_dim, { dtype = dt })))
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

-- query: (B,L,E) (batch_first) or (L,B,E); key, value: (B,S,E) or (S,B,E).
-- opts: key_padding_mask (B,S) bool (true = ignore) or float (added), attn_mask (L,S) or (B*H,L,S)
-- bool or float, need_weights (true), average_attn_weights (true).
-- Returns output like query, and the attention weights (B,L,S) (or (B,H,L,S)) when need_weights.
function MHA:forward(query, key, value, opts)
  opts = opts or {}
  key, value = key or query, value or key or query
  local E, H, D = self.embed_dim, self.num_heads, self.head_dim
  for i, x in ipairs { query, key, value } do
    if not Tensor.is_tensor(x) or #x._shape ~= 3 or not S.same(x._shape[3], E) then
      errors.raise(string.format("MultiheadAttention: %s must be 3-D with embed_dim %d last, got %s",
        ({ "query", "key", "value" })[i], E, Tensor.is_tensor(x) and S.str(x._shape) or type(x)))
    end
  end
  local q, k, v = query, key, value
  if not self.batch_first then q, k, v = q:transpose(1, 2), k:transpose(1, 2), v:transpose(1, 2) end
  local W, b = self.in_proj_weight, self.in_proj_bias
  if query == key and key == value then
    local qkv = F.linear(q, W, b)
    q, k, v = qkv:narrow(3, 1, E), qkv:narrow(3, E + 1, E), qkv:narrow(3, 2 * E + 1, E)
  else
    q, k, v = F.linear(q, part(W, 1, E), part(b, 1, E)), F.linear(k, part(W, 2, E), part(b, 2, E)), F.linear(v, part(W, 3, E), part(b, 3, E))
  end
  local B, L, Sk = q._shape[1], q._shape[2], k._shape[2]
  q = heads(q, H, D) / math.sqrt(D)
  k, v = heads(k, H, D), heads(v, H, D)
  local scores = ops.matmul(q, k:transpose(-1, -2))               -- (B,H,L,S)
  local kpm = opts.key_padding_mask
  if kpm ~= nil then
    if not S.equal(kpm._shape, { B, Sk }) then
      errors.raise(string.format("MultiheadAttention: key_padding_mask must be (%d,%d), got %s", B, Sk, S.str(kpm._shape)))
    end
    kpm = kpm:reshape(B, 1, 1, Sk)
    if kpm.dtype == "bool" then scores = ops.masked_fill(scores, kpm, -math.huge) else scores = scores + kpm end
  end
  local am = opts.attn_mask
  if am ~= nil then
    if #am._shape == 3 then am = am:reshape(B, H, L, Sk) end
    if am.dtype == "bool" then scores = ops.masked_fill(scores, am, -math.huge) else scores = scores + am end
  end
  local attn = ops.softmax(scores, -1)
  if self.dropout > 0 then attn = F.dropout(attn, self.dropout, self.training) end
  local out = ops.matmul(attn, v):transpose(2, 3):reshape(B, L, E)
  out = self.out_proj(out)
  if not self.batch_first then out = out:transpose(1, 2) end
  if opts.need_weights == false then return out end
  if opts.average_attn_weights == false then return out, attn end
  return out, attn:mean(2)
end
function MHA:extra_repr()
  return string.format("embed_dim=%d, num_heads=%d, batch_first=%s", self.embed_dim, self.num_heads, tostring(self.batch_first))
end

return { MultiheadAttention = MHA }
