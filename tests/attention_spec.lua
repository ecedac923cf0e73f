-- tests/attention_spec.lua: ds.scaled_dot_product_attention against PyTorch 2's definition (fixtures from
-- tests/gen_attention_fixtures.py), its gradients, the same bits everywhere (traced, compiled, threads,
-- rows, batch entries, ISA path), errors, dropout, and the attention modules running on it.
local ds = require("ds")
local H = require("helpers")

local F = ds.nn.functional
local sdpa = ds.scaled_dot_product_attention

local function tensor(t) return ds.tensor(t.data, { dtype = t.dtype }):reshape(t.shape) end

-- deterministic values of the given shape (no generator involved)
local function wave(phase, shape, dt)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return ds.sin(ds.arange(n, { dtype = dt or "f32" }) * 0.37 + phase):reshape(shape) * 2
end

local function opts_of(c, dt)
  local o = { is_causal = c.is_causal or nil, scale = c.scale }
  if c.mask then o.mask = tensor(c.mask); if o.mask.dtype ~= "bool" then o.mask = o.mask:astype(dt) end end
  return o
end

describe("scaled_dot_product_attention matches PyTorch 2's definition", function()
  local fx = H.fixture("attention.json")
  for _, c in ipairs(fx.cases) do
    it(c.name .. ": f32 output", function()
      local y = sdpa(tensor(c.q), tensor(c.k), tensor(c.v), opts_of(c, "f32"))
      assert.equal("f32", y.dtype)
      assert.same(c.out.shape, y._shape)
      H.close(y, tensor(c.out), 1e-5, 2e-6)
    end)
    it(c.name .. ": f64 output and gradients of q, k, v", function()
      local q, k, v = tensor(c.q):astype("f64"):requires_grad_(), tensor(c.k):astype("f64"):requires_grad_(), tensor(c.v):astype("f64"):requires_grad_()
      local y = sdpa(q, k, v, opts_of(c, "f64"))
      H.close(y, tensor(c.out), 1e-12, 1e-13)
      local loss = (y * tensor(c.r)):sum()
      loss:backward()
      H.close(q.grad, tensor(c.gq), 1e-10, 1e-12)
      H.close(k.grad, tensor(c.gk), 1e-10, 1e-12)
      H.close(v.grad, tensor(c.gv), 1e-10, 1e-12)
    end)
  end
end)

describe("scaled_dot_product_attention gradients (finite differences, f64)", function()
  local function N(...) return ds.randn({ ... }, { dtype = "f64" }):requires_grad_() end
  it("a float mask broadcast over heads gets its gradient too", function()
    ds.manual_seed(3)
    assert.is_true(ds.autograd.gradcheck(function(q, k, v, m) return sdpa(q, k, v, { mask = m }) end,
      { N(2, 2, 3, 4), N(2, 2, 5, 4), N(2, 2, 5, 3), N(1, 3, 5) }))
  end)
  it("bool mask, causal and non-contiguous inputs", function()
    ds.manual_seed(4)
    local m = ds.tensor({ true, false, true, true, true }, { dtype = "bool" })
    assert.is_true(ds.autograd.gradcheck(function(q, k, v) return sdpa(q, k, v, { mask = m }) end,
      { N(2, 3, 4), N(2, 5, 4), N(2, 5, 3) }))
    local qt = ds.randn({ 2, 4, 5 }, { dtype = "f64" }):transpose(-1, -2):requires_grad_()
    assert.is_false(qt:is_contiguous())
    assert.is_true(ds.autograd.gradcheck(function(q, k, v) return sdpa(q, k, v, { is_causal = true, scale = 0.7 }) end,
      { qt, N(2, 5, 4), N(2, 5, 3) }))
  end)
end)

describe("scaled_dot_product_attention gives the same bits everywhere", function()
  local q, k, v = wave(0, { 2, 4, 70, 32 }), wave(1, { 2, 4, 70, 32 }), wave(2, { 2, 4, 70, 24 })
  local pad = ds.arange(70):lt(61):reshape(1, 1, 1, 70)

  it("traced and compiled equal eager, with and without masks", function()
    for _, o in ipairs { {}, { mask = pad }, { is_causal = true }, { mask = wave(3, { 70, 70 }) } } do
      local f = function(a, b, c) return sdpa(a, b, c, o) end
      local eager = f(q, k, v)
      assert.is_true(H.bitwise(eager, ds.trace(f, { q, k, v })(q, k, v)))
      assert.is_true(H.bitwise(eager, ds.compile(f, { q, k, v })(q, k, v)))
    end
  end)

  it("1 and 2 threads agree", function()
    local n0 = ds.get_num_threads()
    ds.set_num_threads(1)
    local one = sdpa(q, k, v, { mask = pad })
    ds.set_num_threads(2)
    local two = sdpa(q, k, v, { mask = pad })
    ds.set_num_threads(n0)
    assert.is_true(H.bitwise(one, two))
  end)

  it("a query row computed alone, and a batch entry alone, equal their place in the whole", function()
    local all = sdpa(q, k, v, { mask = pad })
    for _, i in ipairs { 1, 9, 70 } do
      local row = sdpa(q:narrow(3, i, 1), k, v, { mask = pad })
      assert.is_true(H.bitwise(row, all:narrow(3, i, 1)), "row " .. i)
    end
    local entry = sdpa(q:narrow(1, 2, 1), k:narrow(1, 2, 1), v:narrow(1, 2, 1), { mask = pad })
    assert.is_true(H.bitwise(entry, all:narrow(1, 2, 1)))
    -- causal rows depend on their absolute position, so they are checked as a prefix
    local causal = sdpa(q, k, v, { is_causal = true })
    assert.is_true(H.bitwise(sdpa(q:narrow(3, 1, 33), k, v, { is_causal = true }), causal:narrow(3, 1, 33)))
  end)

  it("gives the same bits on every ISA path and thread count (tiles, and the decode path of 1-4 query rows)", function()
    local paths = H.same_bits_on_every_path(H.WAVE_PRELUDE .. [[
      local k, v = wave(1, { 2, 4, 70, 32 }), wave(2, { 2, 4, 70, 24 })
      local mask = ds.arange(70):lt(61):reshape(1, 1, 1, 70)
      local h = 0
      for _, L in ipairs({ 70, 1, 3 }) do
        local y = ds.scaled_dot_product_attention(wave(0, { 2, 4, L, 32 }), k, v, { mask = mask })
        local p = ffi.cast("uint8_t *", y:data_ptr())
        for i = 0, y:numel() * 4 - 1 do h = (h * 31 + p[i]) % 2147483647 end
      end
      io.write(ds.info().isa, " ", h)
    ]])
    assert.equal(#H.PATH_ENVS, #paths)
  end)
end)

describe("scaled_dot_product_attention with padded keys (the sums stop after a tile's last nonzero weight)", function()
  -- BERT's key padding: 14 of 100 keys visible, the rest -10000 added (their weights exactly 0)
  local q, k, v = wave(0, { 1, 2, 100, 16 }), wave(1, { 1, 2, 100, 16 }), wave(2, { 1, 2, 100, 8 })
  local vis = ds.arange(100):lt(14)
  local bias = ((1 - vis:astype("f32")) * -10000):reshape(1, 1, 1, 100)

  it("equals rows computed alone, the bool mask, PyTorch's definition in f64, and the same bits on every path", function()
    local all = sdpa(q, k, v, { mask = bias })
    for _, i in ipairs { 1, 8, 9, 100 } do
      assert.is_true(H.bitwise(sdpa(q:narrow(3, i, 1), k, v, { mask = bias }), all:narrow(3, i, 1)), "row " .. i)
    end
    assert.is_true(H.bitwise(all, sdpa(q, k, v, { mask = vis:reshape(1, 1, 1, 100) })))
    local ref = sdpa(q:narrow(3, 1, 100):astype("f64"), k:narrow(3, 1, 14):astype("f64"), v:narrow(3, 1, 14):astype("f64"))
    H.close(all, ref:astype("f32"), 1e-5, 2e-6)
    H.same_bits_on_every_path(H.WAVE_PRELUDE .. [[
      local bias = ((1 - ds.arange(100):lt(14):astype("f32")) * -10000):reshape(1, 1, 1, 100)
      local y = ds.scaled_dot_product_attention(wave(0, { 1, 2, 100, 16 }), wave(1, { 1, 2, 100, 16 }),
        wave(2, { 1, 2, 100, 8 }), { mask = bias })
      local p, h = ffi.cast("uint8_t *", y:data_ptr()), 0
      for i = 0, y:numel() * 4 - 1 do h = (h * 31 + p[i]) % 2147483647 end
      io.write(ds.info().isa, " ", h)
    ]])
  end)

  it("a hidden key whose score outweighs the mask still counts; per-row masks; same bits on every path", function()
    local kb = k:clone()
    kb:narrow(3, 60, 1):copy_(q:narrow(3, 5, 1) * 3000)   -- row 5's score for hidden key 60: ~ +1e4 over the mask
    local all = sdpa(q, kb, v, { mask = bias })
    for _, i in ipairs { 1, 5, 6, 100 } do
      assert.is_true(H.bitwise(sdpa(q:narrow(3, i, 1), kb, v, { mask = bias }), all:narrow(3, i, 1)), "row " .. i)
    end
    H.close(all:narrow(3, 5, 1), v:narrow(3, 60, 1), 1e-6, 1e-6)   -- key 60 takes all of row 5's weight
    local rows = ds.arange(100):reshape(100, 1) % 40 + 3                  -- row i sees keys 1 .. 3 + (i-1) % 40
    local per_row = ds.where(ds.arange(100):reshape(1, 100):lt(rows), 0, -10000):astype("f32")
    local y = sdpa(q, k, v, { mask = per_row })
    for _, i in ipairs { 1, 40, 41, 77 } do
      assert.is_true(H.bitwise(sdpa(q:narrow(3, i, 1), k, v, { mask = per_row:narrow(1, i, 1) }), y:narrow(3, i, 1)),
        "per-row mask, row " .. i)
    end
    H.same_bits_on_every_path(H.WAVE_PRELUDE .. [[
      local q, k, v = wave(0, { 1, 2, 100, 16 }), wave(1, { 1, 2, 100, 16 }), wave(2, { 1, 2, 100, 8 })
      k:narrow(3, 60, 1):copy_(q:narrow(3, 5, 1) * 3000)
      local bias = ((1 - ds.arange(100):lt(14):astype("f32")) * -10000):reshape(1, 1, 1, 100)
      local rows = ds.arange(100):reshape(100, 1) % 40 + 3
      local per_row = ds.where(ds.arange(100):reshape(1, 100):lt(rows), 0, -10000):astype("f32")
      local h = 0
      for _, m in ipairs({ bias, per_row }) do
        local y = ds.scaled_dot_product_attention(q, k, v, { mask = m })
        local p = ffi.cast("uint8_t *", y:data_ptr())
        for i = 0, y:numel() * 4 - 1 do h = (h * 31 + p[i]) % 2147483647 end
      end
      io.write(ds.info().isa, " ", h)
    ]])
  end)

  it("a NaN or an infinity in v at a hidden key still makes its column NaN (0 * inf), as in PyTorch", function()
    local clean = sdpa(q, k, v, { mask = bias })
    for _, bad in ipairs { math.huge, 0 / 0 } do
      local vb = v:clone()
      vb:narrow(3, 90, 1):narrow(4, 3, 1):fill_(bad)   -- key 90 (hidden), feature 3
      local y = sdpa(q, k, vb, { mask = bias })
      assert.is_true(y:narrow(4, 3, 1):ne(y:narrow(4, 3, 1)):all():item())
      assert.is_true(H.bitwise(y:narrow(4, 1, 2), clean:narrow(4, 1, 2)))
      assert.is_true(H.bitwise(y:narrow(4, 4, 5), clean:narrow(4, 4, 5)))
    end
  end)
end)

describe("scaled_dot_product_attention options and errors", function()
  local q, k, v = wave(0, { 2, 3, 4 }), wave(1, { 2, 5, 4 }), wave(2, { 2, 5, 3 })
  it("rejects bad input before any work", function()
    H.raises(function() sdpa(q, k, v, { dropout = 0.1 }) end, "scaled_dot_product_attention", "unknown option 'dropout'")
    H.raises(function() sdpa(q, k, v, { mask = ds.ones(3, 5):gt(0), is_causal = true }) end, "scaled_dot_product_attention", "not both")
    H.raises(function() sdpa(q, k, v, { dropout_p = 1.5 }) end, "scaled_dot_product_attention", "dropout_p")
    H.raises(function() sdpa(q, k:narrow(3, 1, 3), v) end, "scaled_dot_product_attention", "last dim E")
    H.raises(function() sdpa(q, k, v:narrow(2, 1, 4)) end, "scaled_dot_product_attention", "sequence dim S")
    H.raises(function() sdpa(q, k, v, { mask = ds.ones(3, 4):gt(0) }) end, "scaled_dot_product_attention", "mask (3,4)", "(2,3,5)")
    H.raises(function() sdpa(q, k, v, { mask = ds.ones(3, 5, { dtype = "i64" }) }) end, "scaled_dot_product_attention", "bool")
    H.raises(function() sdpa(q, k, ds.ones(3, 5, 3)) end, "scaled_dot_product_attention", "broadcast")
    H.raises(function() sdpa(q:reshape(24), k, v) end, "scaled_dot_product_attention", "2-D")
    H.raises(function() sdpa(q, k, v, { scale = "big" }) end, "scaled_dot_product_attention", "scale")
  end)

  it("a query whose keys are all hidden gets NaN, as in PyTorch", function()
    local m = ds.tensor({ { false, false, false, false, false }, { true, true, true, true, true }, { true, false, false, false, false } }, { dtype = "bool" })
    local y = sdpa(q, k, v, { mask = m })
    local nan = y:ne(y)
    assert.is_true(nan:narrow(2, 1, 1):all():item())
    assert.is_false(nan:narrow(2, 2, 2):any():item())
    H.close(y:narrow(2, 3, 1), v:narrow(2, 1, 1))    -- one visible key: its value
  end)

  it("dropout_p draws from ds's generator: eager and compiled agree, and gradients flow", function()
    local f = function(a, b, c) return sdpa(a, b, c, { dropout_p = 0.4 }) end
    ds.manual_seed(11)
    local eager = f(q, k, v)
    local cg = ds.compile(f, { q, k, v })
    ds.manual_seed(11)
    assert.is_true(H.bitwise(eager, cg(q, k, v)))
    assert.is_false(H.bitwise(eager, sdpa(q, k, v)))
    local qg = q:clone():requires_grad_()
    f(qg, k, v):sum():backward()
    assert.same({ 2, 3, 4 }, qg.grad._shape)
    H.close(sdpa(q, k, v, { dropout_p = 1 }), ds.zeros(2, 3, 3))
  end)
end)

describe("attention modules run on the one kernel", function()
  local T, E, Hn = 40, 32, 4
  local layer = ds.nn.TransformerEncoderLayer(E, Hn, { dim_feedforward = 64, dropout = 0, batch_first = true, activation = "gelu" })
  layer:eval()
  local x = wave(0, { 1, T, E })
  local kpm = ds.arange(T):ge(33):reshape(1, T)

  it("TransformerEncoderLayer's graph has the op and no (B,H,T,T) value", function()
    local f = function(a) return layer(a, { src_key_padding_mask = kpm }) end
    local cg = ds.compile(f, { x })
    local ops = {}
    for _, node in ipairs(cg.ir.nodes) do ops[node.op] = true end
    assert.is_true(ops.scaled_dot_product_attention)
    assert.is_nil(ops.softmax)
    for _, val in pairs(cg.ir.values) do
      local s = val.shape
      assert.is_false(#s == 4 and s[3] == T and s[4] == T and s[2] == Hn, "a (B,H,T,T) value in the compiled graph")
    end
    assert.is_true(H.bitwise(f(x), cg(x)))
  end)

  it("MultiheadAttention: the kernel path equals the weights path", function()
    local mha = ds.nn.MultiheadAttention(E, Hn, { batch_first = true })
    local fast = mha(x, x, x, { key_padding_mask = kpm, need_weights = false })
    local slow = mha(x, x, x, { key_padding_mask = kpm })
    H.close(fast, slow, 1e-5, 1e-6)
    local am = ds.arange(T):reshape(T, 1):lt(ds.arange(T):reshape(1, T))   -- bool, true = hidden (PyTorch's MHA)
    H.close(mha(x, x, x, { attn_mask = am, key_padding_mask = kpm, need_weights = false }),
      (mha(x, x, x, { attn_mask = am, key_padding_mask = kpm })), 1e-5, 1e-6)
    local fm = wave(5, { T, T })
    H.close(mha(x, x, x, { attn_mask = fm, key_padding_mask = kpm, need_weights = false }),
      (mha(x, x, x, { attn_mask = fm, key_padding_mask = kpm })), 1e-5, 1e-6)
  end)
end)
