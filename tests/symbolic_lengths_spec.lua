-- tests/symbolic_lengths_spec.lua: what a decoder does with a symbolic length T (ds.spec({1, "t"})): arange(1, T + 1)
-- positions, narrow with symbolic starts and lengths, cat on a symbolic dim, writes into a preallocated cache at a
-- symbolic position, causal masks; a small decoder compiled once equals eager bitwise for several T and reloads.
local ds = require("ds")
local H = require("helpers")

local function i64(t) return ds.tensor(t, { dtype = "i64" }) end

describe("symbolic lengths", function()
  it("arange with symbolic start and end (and an integer step)", function()
    local cg = ds.compile(function(ids)
      local T = ids:size(2)
      return ds.arange(1, T + 1, { dtype = "i64" }), ds.arange(T, 2 * T), ds.arange(0, T, 2)
    end, { ds.spec({ 1, "t" }, "i64") })
    for _, T in ipairs { 1, 4, 7 } do
      local a, b, c = cg(ds.zeros(1, T, { dtype = "i64" }))
      assert(H.bitwise(a, ds.arange(1, T + 1, { dtype = "i64" })))
      assert(H.bitwise(b, ds.arange(T, 2 * T)) and H.bitwise(c, ds.arange(0, T, 2)))
    end
  end)

  it("narrow and select with symbolic starts and lengths", function()
    local w = ds.randn(10, 4)
    local cg = ds.compile(function(past, x)
      local p, T = past:size(2), x:size(2)
      return w:narrow(1, p + 1, 1), w:narrow(1, p + 1, T), w:select(1, p + T), x:narrow(2, -1, 1)
    end, { ds.spec({ 1, "p" }, "f32"), ds.spec({ 1, "t" }, "f32") })
    local a, b, c, d = cg(ds.zeros(1, 3), ds.arange(1, 3):reshape(1, 2):float())
    assert(H.bitwise(a, w:narrow(1, 4, 1)) and H.bitwise(b, w:narrow(1, 4, 2)) and H.bitwise(c, w[5]))
    assert.equal(2, d:item())
    H.raises(function() cg(ds.zeros(1, 9), ds.zeros(1, 2)) end, "narrow: start 10, length 2 out of range for dim 1")
  end)

  it("cat on a symbolic dim", function()
    local cg = ds.compile(function(a, b) return ds.cat({ a, b, a }, 2) end,
      { ds.spec({ 2, "s" }, "f32"), ds.spec({ 2, "t" }, "f32") })
    local a, b = ds.randn(2, 3), ds.randn(2, 1)
    assert(H.bitwise(cg(a, b), ds.cat({ a, b, a }, 2)))
  end)

  it("narrow():copy_() and index_copy_ into a preallocated cache at a symbolic position", function()
    local cache = ds.zeros(1, 8)
    local other = ds.zeros(8, 1)
    local cg = ds.compile(function(past, x)
      local p, T = past:size(2), x:size(2)
      cache:narrow(2, p + 1, T):copy_(x)
      ds.index_copy_(other, 1, ds.arange(p + 1, p + T + 1, { dtype = "i64" }), x:t())
      return cache * 1
    end, { ds.spec({ 1, "p" }, "f32"), ds.spec({ 1, "t" }, "f32") })
    local got = cg(ds.zeros(1, 2), ds.tensor({ { 5, 6 } }))
    assert.same({ { 0, 0, 5, 6, 0, 0, 0, 0 } }, got:totable())
    assert.same({ { 0, 0, 5, 6, 0, 0, 0, 0 } }, cache:totable())         -- the captured cache was written
    assert.same({ 0, 0, 5, 6, 0, 0, 0, 0 }, other:reshape(-1):totable())
    cg(ds.zeros(1, 5), ds.tensor({ { 7 } }))
    assert.same({ { 0, 0, 5, 6, 0, 7, 0, 0 } }, cache:totable())
  end)

  it("refusals name the symbolic argument", function()
    local spec = { ds.spec({ 1, "t" }, "i64") }
    H.raises(function() ds.trace(function(ids) return ds.arange(0, ids:size(2), 0.5) end, spec) end,
      "arange: end is symbolic (t), so step must be an integer, got 0.5")
    H.raises(function() ds.trace(function(ids) return ds.arange(0, 4, ids:size(2)) end, spec) end,
      "arange: step is symbolic (t)")
    H.raises(function() ds.trace(function(ids) return ds.multinomial(ds.ones(ids:size(2)), ids:size(2)) end, spec) end,
      "multinomial")
  end)
end)

-- a one-layer decoder: token + position embeddings, causal self-attention, a head; positions arange(1, T + 1)
local function decoder(V, E, Lmax)
  ds.manual_seed(3)
  local m = { tok = ds.nn.Embedding(V, E), pos = ds.nn.Embedding(Lmax, E), q = ds.nn.Linear(E, E),
              k = ds.nn.Linear(E, E), v = ds.nn.Linear(E, E), head = ds.nn.Linear(E, V) }
  return m, function(ids)
    local T = ids:size(2)
    local h = m.tok(ids) + m.pos(ds.arange(1, T + 1, { dtype = "i64" }):reshape(1, T))   -- (1, T, E)
    local mask = ds.ones(T, T, { dtype = "bool" }):tril()                                  -- (T, T)
    local a = ds.F.scaled_dot_product_attention(m.q(h), m.k(h), m.v(h), { mask = mask })
    return m.head(h + a)                                                                  -- (1, T, V)
  end
end

describe("a decoder compiled for any length", function()
  it("equals eager bitwise for several T, one graph, and reloads from ds.save", function()
    local _, fwd = decoder(11, 8, 16)
    local cg = ds.compile(fwd, { ds.spec({ 1, "t" }, "i64") })
    local dir = H.tmp_dir()
    ds.save(cg, dir .. "/dec")
    local loaded = ds.load(dir .. "/dec")
    for _, T in ipairs { 1, 2, 5, 9, 16 } do
      local ids = ds.randint(1, 12, { 1, T })
      local eager = fwd(ids)
      assert(H.bitwise(eager, cg(ids)), "compiled differs at T = " .. T)
      assert(H.bitwise(eager, loaded(ids)), "loaded differs at T = " .. T)
    end
  end)
end)
