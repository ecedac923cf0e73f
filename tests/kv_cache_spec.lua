-- tests/kv_cache_spec.lua: nn.KVCache, keys and values preallocated and written in place at a position tensor: a
-- compiled decode step builds one plan for 20 steps and equals the eager step bitwise; the cached decode equals the
-- full causal forward; a saved step reloads; a position per row (continuous batching) writes each row's slot; rows
-- by slot (the running requests' rows only) are written and read alone.
local ds = require("ds")
local H = require("helpers")
local nn = ds.nn

local V, E, H_, L = 13, 8, 2, 24
local D_ = E / H_

-- a one-layer decoder with a KV cache: step(tok (1, t) i64, pos (1) i64 1-based) -> logits (1, t, V)
local function model()
  ds.manual_seed(4)
  local m = { tok = nn.Embedding(V, E), pos = nn.Embedding(L, E), qkv = nn.Linear(E, 3 * E), head = nn.Linear(E, V),
              cache = nn.KVCache(1, H_, L, D_) }
  local function heads(x, t) return x:reshape(1, t, H_, D_):transpose(2, 3) end   -- (1, H, t, D)
  function m.step(tok, pos)
    local t = tok:size(2)
    local at = pos + ds.arange(0, t, { dtype = "i64" })                               -- (t) positions
    local h = m.tok(tok) + m.pos(at:reshape(1, t))                                   -- (1, t, E)
    local q, k, v = unpack(m.qkv(h):chunk(3, -1))
    local a = m.cache(heads(q, t), heads(k, t), heads(v, t), pos)                    -- (1, H, t, D)
    return m.head(h + a:transpose(2, 3):reshape(1, t, E))
  end
  return m
end

local function pos_of(p) return ds.tensor({ p }, { dtype = "i64" }) end

describe("nn.KVCache", function()
  it("a compiled decode step: one plan for 20 steps, bitwise equal to eager, caches written in place", function()
    local eager, compiled = model(), model()
    local cg = ds.compile(compiled.step, { ds.spec({ 1, 1 }, "i64"), ds.spec({ 1 }, "i64") })
    local k_before = compiled.cache.k_cache
    local tok = ds.tensor({ { 1 } }, { dtype = "i64" })
    for p = 1, 20 do
      local e = eager.step(tok, pos_of(p))
      local c = cg(tok, pos_of(p))
      assert(H.bitwise(e, c), "step " .. p .. " differs")
      tok = e:select(2, 1):argmax(-1, true)                                           -- greedy next token (1, 1)
    end
    assert.equal(1, cg:plan_count())
    assert.equal(k_before, compiled.cache.k_cache)                                   -- the same tensor, updated
    assert(H.bitwise(eager.cache.k_cache, compiled.cache.k_cache))
    assert(H.bitwise(eager.cache.v_cache, compiled.cache.v_cache))
  end)

  it("decoding token by token equals one pass over the prompt (the prompt through the cache at once)", function()
    local a, b = model(), model()
    local ids = ds.tensor({ { 3, 1, 4, 1, 5, 9 } }, { dtype = "i64" })
    local all = a.step(ids, pos_of(1))                                               -- (1, 6, V)
    for p = 1, 6 do
      H.close(b.step(ids:narrow(2, p, 1), pos_of(p)), all:narrow(2, p, 1), 1e-5, 1e-6)
    end
  end)

  it("a saved decode step reloads and continues from its caches", function()
    local m = model()
    local cg = ds.compile(m.step, { ds.spec({ 1, 1 }, "i64"), ds.spec({ 1 }, "i64") })
    local dir = H.tmp_dir()
    ds.save(cg, dir .. "/step")
    local loaded, ref = ds.load(dir .. "/step"), model()
    local tok = ds.tensor({ { 2 } }, { dtype = "i64" })
    for p = 1, 5 do assert(H.bitwise(ref.step(tok, pos_of(p)), loaded(tok, pos_of(p)))) end
  end)

  it("a position per row: row b written at pos[b] and masked to positions <= pos[b], eagerly and compiled", function()
    local function update(c, k, pos) local kc, _, mask = c:update(k, k * 2, pos); return kc + 0, mask end
    local k = ds.arange(1, 13):reshape(2, 2, 1, 3):astype("f32")                    -- (batch 2, heads 2, t 1, 3)
    local pos = ds.tensor({ 3, 1 }, { dtype = "i64" })
    local eager = nn.KVCache(2, 2, 4, 3)
    local kc, mask = update(eager, k, pos)
    assert.same({ 2, 1, 1, 4 }, mask:size())
    assert.same({ { { { true, true, true, false } } }, { { { true, false, false, false } } } }, mask:totable())
    assert(H.bitwise(kc:select(3, 3):narrow(1, 1, 1), k:select(3, 1):narrow(1, 1, 1)))      -- row 1 at 3
    assert(H.bitwise(kc:select(3, 1):narrow(1, 2, 1), k:select(3, 1):narrow(1, 2, 1)))      -- row 2 at 1
    assert.equal(0, kc:select(3, 1):narrow(1, 1, 1):abs():sum():item())                      -- the rest untouched
    assert(H.bitwise(eager.v_cache, eager.k_cache * 2))
    local c = nn.KVCache(2, 2, 4, 3)
    local cg = ds.compile(function(x, p) return update(c, x, p) end, { ds.spec({ 2, 2, 1, 3 }), ds.spec({ 2 }, "i64") })
    local ckc, cmask = cg(k, pos)
    assert(H.bitwise(kc, ckc)); assert(H.bitwise(mask, cmask))
    assert(H.bitwise(eager.k_cache, c.k_cache))
    H.raises(function() eager:update(ds.zeros(2, 2, 2, 3), ds.zeros(2, 2, 2, 3), pos) end,
      "KVCache.update: a position per row (pos (2)) writes one token per row")
  end)

  it("rows by slot: t tokens of each given row written at its positions, the other rows untouched, the attention "
    .. "that of the row alone; compiled equals eager", function()
    local function attend(c, q, k, v, pos, slots) return c(q, k, v, pos, slots) end
    ds.manual_seed(3)
    local q, k, v = ds.randn(2, 2, 4, 3), ds.randn(2, 2, 4, 3), ds.randn(2, 2, 4, 3)   -- (n 2, heads 2, t 4, 3)
    local pos, slots = ds.tensor({ 1, 3 }, { dtype = "i64" }), ds.tensor({ 3, 1 }, { dtype = "i64" })
    local eager = nn.KVCache(3, 2, 8, 3)
    local out = attend(eager, q, k, v, pos, slots)                                   -- (2, 2, 4, 3)
    local kc = eager.k_cache:reshape(3, 2, 8, 3)
    assert(H.bitwise(kc:narrow(1, 3, 1):narrow(3, 1, 4), k:narrow(1, 1, 1)))           -- slot 3 at 1..4
    assert(H.bitwise(kc:narrow(1, 1, 1):narrow(3, 3, 4), k:narrow(1, 2, 1)))           -- slot 1 at 3..6
    assert.equal(0, kc:narrow(1, 2, 1):abs():sum():item())                             -- slot 2 untouched
    assert.equal(0, kc:narrow(1, 1, 1):narrow(3, 1, 2):abs():sum():item())
    -- slot 3's prompt alone: causal attention over its own 4 tokens (the rest of its row is masked)
    H.close(out:narrow(1, 1, 1), ds.scaled_dot_product_attention(q:narrow(1, 1, 1), k:narrow(1, 1, 1),
      v:narrow(1, 1, 1), { is_causal = true }), 1e-5, 1e-6)
    local c = nn.KVCache(3, 2, 8, 3)
    local cg = ds.compile(function(...) return attend(c, ...) end, { ds.spec({ "n", 2, "t", 3 }),
      ds.spec({ "n", 2, "t", 3 }), ds.spec({ "n", 2, "t", 3 }), ds.spec({ "n" }, "i64"), ds.spec({ "n" }, "i64") })
    assert(H.bitwise(out, cg(q, k, v, pos, slots)))
    assert(H.bitwise(eager.k_cache, c.k_cache)); assert(H.bitwise(eager.v_cache, c.v_cache))
    H.raises(function() eager(q, k, v, pos, ds.tensor({ 3, 4 }, { dtype = "i64" })) end,
      "KVCache.update: slot 4 is outside the cache's rows 1..3")
    H.raises(function() eager(q, k, v, ds.tensor({ 1 }, { dtype = "i64" }), slots) end,
      "KVCache.update: pos must be (n) i64 with n = (2)")
    H.raises(function() eager(q, k, v, ds.tensor({ 1, 6 }, { dtype = "i64" }), slots) end,
      "KVCache.update: position 9 is outside the cache's 1..8")
  end)

  it("refuses bad shapes and positions, naming the call", function()
    local c = nn.KVCache(1, 2, 4, 3)
    H.raises(function() c:update(ds.zeros(1, 2, 1, 3), ds.zeros(1, 2, 2, 3), 1) end, "KVCache.update: k (1,2,1,3)")
    H.raises(function() c:update(ds.zeros(1, 2, 1, 3), ds.zeros(1, 2, 1, 3), ds.tensor({ 1.0 })) end,
      "KVCache.update: pos must be an i64 tensor")
    H.raises(function() c:update(ds.zeros(1, 2, 1, 3), ds.zeros(1, 2, 1, 3), 5) end, "KVCache.update: position 5 is outside the cache's 1..4")
    H.raises(function() nn.KVCache(1, 0, 4, 3) end, "KVCache: heads must be >= 1")
  end)
end)
