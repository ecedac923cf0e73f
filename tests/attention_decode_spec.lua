-- tests/attention_decode_spec.lua: scaled_dot_product_attention's path for queries of few rows (k and v read in
-- place, a KV-cache decode step) gives the bits of the packed tile path: a row alone equals its place in a longer
-- query, a causal prompt row equals its decode step over the cached keys, for masks, scales, strides, odd sizes,
-- f32 and f64, 1 and 2 threads, and segment_attention's short sequences (every ISA path: attention_spec); the f32
-- AVX-512 build's unmasked decode rows (src/nn_attention_decode.h: a segment's heads four at a time) likewise.
local ds = require("ds")
local H = require("helpers")

local sdpa = ds.scaled_dot_product_attention

-- deterministic values of the given shape (no generator involved)
local function wave(phase, shape, dt)
  local n = 1
  for _, d in ipairs(shape) do n = n * d end
  return ds.sin(ds.arange(n, { dtype = dt or "f32" }) * 0.37 + phase):reshape(shape) * 2
end

-- row i of q (..., L, E) as a one-row query, and the same row 6 times (more than 4 rows run the packed tiles)
local function row(q, i) return q:narrow(-2, i, 1) end
local function tiled(q1) return ds.cat({ q1, q1, q1, q1, q1, q1 }, -2) end

describe("one query row (decode path) gives the bits of the tile path", function()
  for _, dt in ipairs { "f32", "f64" } do
    -- k, v: views of a cache of 80 rows holding S = 37 keys (row stride 80 * E, not contiguous)
    local E, Ev, S = 20, 24, 37
    local q = wave(0, { 2, 3, 5, E }, dt)
    local k = wave(1, { 2, 3, 80, E }, dt):narrow(3, 1, S)
    local v = wave(2, { 2, 3, 80, Ev }, dt):narrow(3, 1, S)
    local vt = wave(2, { 2, 3, Ev, S }, dt):transpose(-1, -2)      -- column stride S: v read strided
    local pad = ds.arange(S):lt(29):reshape(1, 1, 1, S)
    local fmask = wave(4, { 2, 1, 5, S }, dt)

    it(dt .. ": no mask, bool and float masks, a scale, v with strides", function()
      for _, c in ipairs {
        { {}, v }, { { mask = pad }, v }, { { scale = 0.3 }, v }, { {}, vt }, { { mask = pad, scale = 1.7 }, vt },
      } do
        local o, vv = c[1], c[2]
        for _, i in ipairs { 1, 4 } do
          local one = sdpa(row(q, i), k, vv, o)
          assert.same({ 2, 3, 1, Ev }, one._shape)
          assert.is_true(H.bitwise(one, row(sdpa(tiled(row(q, i)), k, vv, o), 1)), "row " .. i)
          assert.is_true(H.bitwise(one, row(sdpa(q, k, vv, o), i)), "row " .. i .. " of the whole")
        end
        for _, n in ipairs { 2, 3, 4 } do   -- a few rows at once, against the whole's (5 rows: tiles)
          assert.is_true(H.bitwise(sdpa(q:narrow(3, 1, n), k, vv, o), sdpa(q, k, vv, o):narrow(3, 1, n)), n .. " rows")
        end
      end
      local qt = wave(8, { 2, 3, E, 5 }, dt):transpose(-1, -2)     -- column stride 5: q read strided
      for _, i in ipairs { 1, 5 } do
        assert.is_true(H.bitwise(sdpa(row(qt, i), k, v), row(sdpa(qt, k, v), i)), "strided q row " .. i)
      end
      for i = 1, 5 do   -- a float mask has a row per query: the row of the mask goes with its query
        local o1 = { mask = fmask:narrow(3, i, 1) }
        assert.is_true(H.bitwise(sdpa(row(q, i), k, v, o1), row(sdpa(q, k, v, { mask = fmask }), i)), "row " .. i)
      end
    end)

    it(dt .. ": a causal prompt row equals its decode step over the keys cached so far", function()
      local L = 33   -- keys = queries: row i of the causal call sees keys 1..i
      local qc, kc, vc = wave(5, { 1, 2, L, E }, dt), wave(6, { 1, 2, L, E }, dt), wave(7, { 1, 2, L, Ev }, dt)
      local prompt = sdpa(qc, kc, vc, { is_causal = true })
      for _, i in ipairs { 1, 2, 16, 17, 33 } do
        local step = sdpa(row(qc, i), kc:narrow(3, 1, i), vc:narrow(3, 1, i))
        assert.is_true(H.bitwise(step, row(prompt, i)), "step " .. i)
      end
    end)
  end

  it("a query whose keys are all hidden gets NaN, the others not", function()
    local q, k, v = wave(0, { 3, 1, 4 }), wave(1, { 3, 5, 4 }), wave(2, { 3, 5, 3 })
    local m = ds.tensor({ false, false, false, false, false }, { dtype = "bool" })
    local y = sdpa(q, k, v, { mask = m })
    assert.is_true(y:ne(y):all():item())
    assert.is_true(H.bitwise(sdpa(q, k, v), row(sdpa(tiled(q), k, v), 1)))
  end)

  it("1 and 2 threads agree on a step large enough to be shared", function()
    local q, k, v = wave(0, { 8, 8, 1, 64 }), wave(1, { 8, 8, 300, 64 }), wave(2, { 8, 8, 300, 64 })
    local n0 = ds.get_num_threads()
    ds.set_num_threads(1)
    local one = sdpa(q, k, v)
    ds.set_num_threads(2)
    local two = sdpa(q, k, v)
    ds.set_num_threads(n0)
    assert.is_true(H.bitwise(one, two))
    assert.is_true(H.bitwise(one, row(sdpa(tiled(q), k, v), 1)))
  end)


  it("segment_attention's sequences of 1 to 3 query rows equal the tile path's rows", function()
    local I = function(t) return ds.tensor(t, { dtype = "i64" }) end
    local q, k, v = wave(0, { 6, 4, 16 }), wave(1, { 50, 4, 16 }), wave(2, { 50, 4, 16 })
    local qs, ks = { { 1, 1 }, { 2, 3 }, { 5, 2 } }, { { 1, 9 }, { 10, 23 }, { 33, 18 } }
    local out = ds.segment_attention(q, k, v, I(qs), I(ks))
    for b = 1, 3 do
      local n = qs[b][2]
      local qb = q:narrow(1, qs[b][1], n):transpose(1, 2)                 -- (4, n, 16)
      local kb = k:narrow(1, ks[b][1], ks[b][2]):transpose(1, 2)
      local vb = v:narrow(1, ks[b][1], ks[b][2]):transpose(1, 2)
      local tile = sdpa(tiled(qb), kb, vb):narrow(2, 1, n):transpose(1, 2)   -- (n, 4, 16)
      assert.is_true(H.bitwise(out:narrow(1, qs[b][1], n), tile), "sequence " .. b)
    end
  end)
end)
describe("unmasked decode rows (a KV cache's one-row segments, heads together) give the bits of the tile path", function()
  local I = function(t) return ds.tensor(t, { dtype = "i64" }) end
  -- a cache (slots, heads, L, D) read as KVCache:rows_view does: rows of D, heads L rows apart
  local function rows_view(buf)
    local _, Hh, L, D = unpack(buf._shape)
    return buf:reshape(-1):unfold(1, ((Hh - 1) * L + 1) * D, D):unfold(2, D, L * D)
  end
  -- heads 1, 3, 4, 6 (groups of 4 and the rest), E with and without a tail of E % 8, Ev whole and masked 32s;
  -- key counts across the blocks of 8 and their groups of up to 6 (1 .. 100)
  for _, c in ipairs { { 4, 32, 32 }, { 6, 20, 40 }, { 3, 16, 24 }, { 1, 8, 72 } } do
    local Hh, E, Ev = c[1], c[2], c[3]
    it(("%d heads, E %d, Ev %d: each sequence's row equals its tile-path row"):format(Hh, E, Ev), function()
      local counts = { 1, 5, 8, 9, 37, 49, 100 }
      local kc, vc = wave(1, { #counts, Hh, 104, E }), wave(2, { #counts, Hh, 104, Ev })
      local q = wave(0, { #counts, Hh, E })
      local qs, ks = {}, {}
      for b, n in ipairs(counts) do qs[b], ks[b] = { b, 1 }, { (b - 1) * Hh * 104 + 1, n } end
      local out = ds.segment_attention(q, rows_view(kc), rows_view(vc), I(qs), I(ks))
      for b, n in ipairs(counts) do
        local qb = q:narrow(1, b, 1):transpose(1, 2)                       -- (Hh, 1, E)
        local kb, vb = kc:select(1, b):narrow(2, 1, n), vc:select(1, b):narrow(2, 1, n)
        local tile = sdpa(tiled(qb), kb, vb):narrow(2, 1, 1):transpose(1, 2)   -- (1, Hh, Ev)
        assert.is_true(H.bitwise(out:narrow(1, b, 1), tile), n .. " keys")
        assert.is_true(H.bitwise(sdpa(qb, kb, vb), tile:transpose(1, 2)), n .. " keys, dense")
      end
    end)
  end

  it("a key weighted +0 with an infinite v still makes its column NaN, as the tiles do; large scores", function()
    local q, k, v = wave(0, { 1, 4, 16 }), wave(1, { 40, 4, 16 }), wave(2, { 40, 4, 16 })
    k:narrow(1, 3, 1):copy_(q * -50)             -- key 3: a score far below the others (weight +0)
    k:narrow(1, 7, 1):copy_(q * 20)              -- key 7: large scores (exps near the bottom of the range)
    v:narrow(1, 3, 1):narrow(3, 5, 1):fill_(math.huge)
    local out = ds.segment_attention(q, k, v, I { { 1, 1 } }, I { { 1, 40 } })
    local tile = sdpa(tiled(q:transpose(1, 2)), k:transpose(1, 2), v:transpose(1, 2)):narrow(2, 1, 1):transpose(1, 2)
    assert.is_true(H.bitwise(out, tile))
    assert.is_true(out:narrow(3, 5, 1):ne(out:narrow(3, 5, 1)):all():item())
    assert.is_false(out:narrow(3, 6, 1):ne(out:narrow(3, 6, 1)):any():item())
  end)

  it("gives the same bits on every ISA path", function()
    H.same_bits_on_every_path(H.WAVE_PRELUDE .. [[
      local q, k, v = wave(0, { 3, 6, 20 }), wave(1, { 120, 6, 20 }), wave(2, { 120, 6, 40 })
      local I = function(t) return ds.tensor(t, { dtype = "i64" }) end
      local y = ds.segment_attention(q, k, v, I { { 1, 1 }, { 2, 1 }, { 3, 1 } }, I { { 1, 9 }, { 10, 37 }, { 21, 100 } })
      local p, h = ffi.cast("uint8_t *", y:data_ptr()), 0
      for i = 0, y:numel() * 4 - 1 do h = (h * 31 + p[i]) % 2147483647 end
      io.write(ds.info().isa, " ", h)
    ]])
  end)
end)
