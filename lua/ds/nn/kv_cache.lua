-- nn/kv_cache.lua: KVCache, keys and values preallocated to max_len and written in place at a position tensor
-- (ds.index_copy_), so a compiled decode step is one plan for every cache length. The buffers are kept as rows
-- (batch * heads * max_len, head_dim), each (row, head, position) one row, so a write touches only the rows of
-- the tokens written, also with a position per row (continuous batching); attention reads a 4-d view, or with
-- `slots` only the cache rows of the requests running, in place (segment_attention over an overlapping view).
local Module = require("ds.nn.module")
local ops = require("ds.ops")
local errors = require("ds.errors")
local options = require("ds.options")
local S = require("ds.shape")
local state = require("ds.state")
require("ds.ops.index_copy") -- ds.index_copy_, the in-place write

local M = {}

local KVCache = Module:extend("KVCache", {
  init = { "integer", "integer", "integer", "integer", "table?" },
  update = { "tensor", "tensor", "tensor|integer" },
  forward = { "tensor", "tensor", "tensor", "tensor|integer", "tensor?" },
})

-- KVCache(batch, heads, max_len, head_dim, {dtype = "f32"}): buffers k_cache, v_cache (batch * heads * max_len,
-- head_dim), zeros, not in state_dict; self.shape = {batch, heads, max_len, head_dim}
function KVCache:init(batch, heads, max_len, head_dim, opts)
  opts = options.check(opts, "KVCache", { dtype = "dtype" })
  for _, p in ipairs { { "batch", batch }, { "heads", heads }, { "max_len", max_len }, { "head_dim", head_dim } } do
    if p[2] < 1 then errors.raise(string.format("KVCache: %s must be >= 1, got %d", p[1], p[2])) end
  end
  self.max_len = max_len
  self.shape = { batch, heads, max_len, head_dim }
  local rows = { batch * heads * max_len, head_dim }
  -- not persistent (as PyTorch's caches): a state_dict holds the weights, whatever batch the caches were made for
  self:register_buffer("k_cache", ops.zeros(rows, { dtype = opts.dtype or "f32" }), false)
  self:register_buffer("v_cache", ops.zeros(rows, { dtype = opts.dtype or "f32" }), false)
end

-- the positions at (i64, 1-based), checked when not tracing (a compiled step is not: an index of 0 makes index_copy_
-- refuse) -> at's validity (bool, at's shape)
function KVCache:valid(at, opname)
  local L = self.max_len
  if not state.trace then
    for _, p in ipairs(at:reshape(-1):totable()) do
      if p < 1 or p > L then
        errors.raise(string.format("%s: position %d is outside the cache's 1..%d (max_len)", opname, p, L))
      end
    end
  end
  return at:ge(1):logical_and(at:le(L))
end

-- k, v (.., head_dim) written at the buffer rows rows (k's numel / head_dim, 0-based; 0 where invalid: refused)
function KVCache:write(k, v, rows)
  local Dh = self.shape[4]
  ops.index_copy_(self.k_cache, 1, rows, k:detach():astype(self.k_cache.dtype):reshape(-1, Dh)) -- a cache is for
  ops.index_copy_(self.v_cache, 1, rows, v:detach():astype(self.v_cache.dtype):reshape(-1, Dh)) -- inference: no grad
end

-- k, v (batch, heads, t, head_dim) written at the cache rows of positions at ((batch * heads, t) i64, 1-based:
-- each row's own positions) -> the caches as (batch, heads, max_len, head_dim) views
function KVCache:write_all(k, v, at)
  local B, H, L, Dh = unpack(self.shape)
  local valid = self:valid(at, "KVCache.update")
  local first = ops.arange(0, B * H, { dtype = "i64" }):reshape(B * H, 1) * L   -- (B * H, 1) row 0 of each head
  self:write(k, v, ops.where(valid, first + at, 0):reshape(-1))
  return self.k_cache:reshape(B, H, L, Dh), self.v_cache:reshape(B, H, L, Dh)
end

-- update(k, v, pos): k, v (batch, heads, t, head_dim) written at positions pos .. pos + t - 1 (pos: 1-based, an i64
-- tensor of one element or a number) -> k_cache, v_cache (batch, heads, max_len, head_dim) and the mask (t, max_len)
-- bool: query i (0-based) sees the keys at positions <= pos + i.
-- pos (batch) i64 with t == 1: each row at its own position (rows of a continuously batched decode); the mask is then
-- (batch, 1, 1, max_len)
function KVCache:update(k, v, pos)
  local t = k._shape[3]
  if #k._shape ~= 4 or not S.equal(k._shape, v._shape) then
    errors.raise(string.format("KVCache.update: k %s and v %s must both be (batch, heads, t, head_dim)",
      S.str(k._shape), S.str(v._shape)))
  end
  if type(pos) == "number" then pos = ops.tensor({ pos }, { dtype = "i64" }) end
  local batch = self.shape[1]
  if pos.dtype == "i64" and #pos._shape == 1 and pos._shape[1] == batch and batch ~= 1 then
    return self:update_rows(k, v, pos)
  end
  if pos.dtype ~= "i64" or S.numel(pos._shape) ~= 1 then
    errors.raise(string.format("KVCache.update: pos must be an i64 tensor of one element or of one per row (%d), "
      .. "got %s %s", batch, pos.dtype, S.str(pos._shape)))
  end
  local at = pos:reshape(1) + ops.arange(0, t, { dtype = "i64" })   -- (t) positions written
  local kc, vc = self:write_all(k, v, at:reshape(1, t))
  local mask = ops.arange(1, self.max_len + 1, { dtype = "i64" }):reshape(1, self.max_len):le(at:reshape(t, 1))
  return kc, vc, mask
end

-- update_rows(k, v, pos): k, v (batch, heads, 1, head_dim) written at row b's position pos[b] (pos (batch) i64,
-- 1-based) -> k_cache, v_cache and the mask (batch, 1, 1, max_len): row b sees the keys at positions <= pos[b]
function KVCache:update_rows(k, v, pos)
  local B, H, L = self.shape[1], self.shape[2], self.max_len
  if k._shape[3] ~= 1 then
    errors.raise(string.format("KVCache.update: a position per row (pos (%d)) writes one token per row, got k %s", B,
      S.str(k._shape)))
  end
  local kc, vc = self:write_all(k, v, pos:reshape(B, 1):expand(B, H):reshape(B * H, 1))   -- row b's heads at pos[b]
  local mask = ops.arange(1, L + 1, { dtype = "i64" }):reshape(1, 1, 1, L):le(pos:reshape(B, 1, 1, 1))  -- (B,1,1,L)
  return kc, vc, mask
end

-- slots_write(k, v, pos, slots): k, v (n, heads, t, head_dim) of the batch rows slots (n) i64 (1-based, distinct)
-- written at row b's positions pos[b] .. pos[b] + t - 1 (pos (n) i64) -> those positions (n, 1, t) i64
function KVCache:slots_write(k, v, pos, slots)
  local B, H, L, Dh = unpack(self.shape)
  local n, t = k._shape[1], k._shape[3]
  if #k._shape ~= 4 or not S.equal(k._shape, v._shape) or k._shape[2] ~= H or k._shape[4] ~= Dh then
    errors.raise(string.format("KVCache.update: k %s and v %s must both be (n, %d, t, %d)", S.str(k._shape),
      S.str(v._shape), H, Dh))
  end
  for _, p in ipairs { { "pos", pos }, { "slots", slots } } do
    if p[2].dtype ~= "i64" or #p[2]._shape ~= 1 or not S.equal(p[2]._shape, { n }) then
      errors.raise(string.format("KVCache.update: %s must be (n) i64 with n = %s (k's rows), got %s %s", p[1],
        S.str({ n }), p[2].dtype, S.str(p[2]._shape)))
    end
  end
  if not state.trace then
    for _, s in ipairs(slots:totable()) do
      if s < 1 or s > B then
        errors.raise(string.format("KVCache.update: slot %d is outside the cache's rows 1..%d", s, B))
      end
    end
  end
  local at = pos:reshape(-1, 1, 1) + ops.arange(0, t, { dtype = "i64" }):reshape(1, 1, -1)     -- (n, 1, t)
  local head = ops.arange(0, H, { dtype = "i64" }):reshape(1, H, 1) * L                         -- (1, H, 1)
  local rows = ((slots - 1) * (H * L)):reshape(-1, 1, 1) + head + at                           -- (n, H, t)
  self:write(k, v, ops.where(self:valid(at, "KVCache.update"), rows, 0):reshape(-1))
  return at
end

-- a cache buffer (batch * heads * max_len, head_dim) as the overlapping view (batch * heads * max_len - (heads - 1)
-- * max_len, heads, head_dim): element [r, h] is buffer row r + h * max_len, so the keys of cache row s (1-based)
-- and head h at positions 1 .. p are rows (s - 1) * heads * max_len + 1 .. + p of it, in place
function KVCache:rows_view(buf)
  local _, H, L, Dh = unpack(self.shape)
  return buf:reshape(-1):unfold(1, ((H - 1) * L + 1) * Dh, Dh):unfold(2, Dh, L * Dh)
end

-- attend_slots(q, k, v, pos, slots): q (n, heads, t, head_dim) of the cache rows slots over their keys, read in place
-- (segment_attention, one segment per query: query i of row b sees positions 1 .. pos[b] + i) -> q's shape. The
-- same sums as scaled_dot_product_attention over the copied rows with the mask: a masked key adds 0 to them.
function KVCache:attend_slots(q, k, v, pos, slots)
  local H, L, Dh = self.shape[2], self.max_len, self.shape[4]
  local n, t = q._shape[1], q._shape[3]
  local at = self:slots_write(k, v, pos, slots):reshape(-1, t)                                  -- (n, t)
  local first = ((slots - 1) * (H * L) + 1):reshape(-1, 1) + at * 0                            -- (n, t)
  local qfirst = ops.arange(0, n, { dtype = "i64" }):reshape(-1, 1) * t
    + ops.arange(1, t + 1, { dtype = "i64" }):reshape(1, -1)                                    -- (n, t)
  local qseg = ops.cat({ qfirst:reshape(-1, 1), (at * 0 + 1):reshape(-1, 1) }, 2)             -- (n * t, 2)
  local kseg = ops.cat({ first:reshape(-1, 1), at:reshape(-1, 1) }, 2)                        -- (n * t, 2)
  local out = ops.segment_attention(q:transpose(2, 3):reshape(-1, H, Dh), self:rows_view(self.k_cache),
    self:rows_view(self.v_cache), qseg, kseg)                                                  -- (n * t, H, Dh)
  return out:reshape(n, t, H, Dh):transpose(2, 3)
end

-- forward(q, k, v, pos[, slots]): q (batch, heads, t, head_dim) attending over the cache after k, v are written at
-- pos (update), or q (n, heads, t, head_dim) over the rows slots (attend_slots) -> q's shape
function KVCache:forward(q, k, v, pos, slots)
  if slots ~= nil then return self:attend_slots(q, k, v, pos, slots) end
  local kc, vc, mask = self:update(k, v, pos)
  return ops.scaled_dot_product_attention(q, kc, vc, { mask = mask })
end

function KVCache:extra_repr()
  return string.format("%s, max_len=%d", S.str(self.shape), self.max_len)
end
M.KVCache = KVCache

return M
