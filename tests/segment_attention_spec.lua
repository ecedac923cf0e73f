-- tests/segment_attention_spec.lua: ds.segment_attention on packed sequences: each sequence's rows bitwise those of
-- scaled_dot_product_attention on it alone (f32 and f64, any position, query subsets, views), rows outside the
-- sequences 0, bad segments and shapes a clear error, no gradient (a clear error).
local ds = require("ds")
local H = require("helpers")

local function I(t) return ds.tensor(t, { dtype = "i64" }) end

-- lens packed one after another, `extra` rows after them: q, k, v (N, heads, E) and seg {first, count}
local function packed(lens, heads, E, dtype, extra)
  local n, seg = 0, {}
  for b, l in ipairs(lens) do seg[b] = { n + 1, l }; n = n + l end
  local function r() return ds.randn({ n + extra, heads, E }, { dtype = dtype }) end
  return r(), r(), r(), seg
end

-- sdpa on rows first .. first+count-1 of q and k/v, as (count, heads, Ev)
local function alone(q, k, v, qs, ks, scale)
  local function h(t, s) return t:narrow(1, s[1], s[2]):transpose(1, 2) end
  return ds.scaled_dot_product_attention(h(q, qs), h(k, ks), h(v, ks), { scale = scale }):transpose(1, 2)
end

describe("segment_attention", function()
  for _, dtype in ipairs { "f32", "f64" } do
    it("gives each packed sequence the bits of attention on it alone (" .. dtype .. ")", function()
      ds.manual_seed(5)
      local lens = { 5, 1, 17, 33, 8 }
      local q, k, v, seg = packed(lens, 4, 16, dtype, 3)
      local out = ds.segment_attention(q, k, v, I(seg), I(seg))
      assert.same({ 67, 4, 16 }, out.shape)
      for b = 1, #lens do
        H.bitwise(alone(q, k, v, seg[b], seg[b], 0.25), out:narrow(1, seg[b][1], seg[b][2]))
      end
      assert.equal(0, out:narrow(1, 65, 3):abs():max():item())
    end)
  end

  it("takes query rows apart from key rows (one query per sequence) and views of any strides", function()
    ds.manual_seed(6)
    local lens = { 9, 20, 3 }
    local q, k, v, seg = packed(lens, 2, 8, "f32", 0)
    local first = {}
    for b = 1, #lens do first[b] = seg[b][1] end
    local qc = q:index_select(1, I(first))
    local kt = k:transpose(2, 3):contiguous():transpose(2, 3)       -- same values, other strides
    local out = ds.segment_attention(qc, kt, v, I { { 1, 1 }, { 2, 1 }, { 3, 1 } }, I(seg))
    for b = 1, #lens do
      H.bitwise(alone(q, k, v, { seg[b][1], 1 }, seg[b], 1 / math.sqrt(8)), out:narrow(1, b, 1))
    end
  end)

  it("answers 0 for rows of a sequence without keys, and for empty sequences", function()
    local q, k, v = ds.ones({ 4, 1, 2 }), ds.ones({ 4, 1, 2 }), ds.ones({ 4, 1, 2 })
    local out = ds.segment_attention(q, k, v, I { { 1, 2 }, { 3, 2 }, { 1, 0 } }, I { { 1, 2 }, { 1, 0 }, { 2, 0 } })
    assert.same({ 1, 1, 0, 0 }, out:select(3, 1):reshape(4):totable())
  end)

  it("traces and compiles with dynamic row and sequence counts, bitwise equal to eager", function()
    ds.manual_seed(7)
    local q, k, v, seg = packed({ 3, 6 }, 2, 4, "f32", 1)
    local f = ds.compile(function(a, b, c, s) return ds.segment_attention(a, b, c, s, s) end,
      { ds.spec({ "n", 2, 4 }), ds.spec({ "n", 2, 4 }), ds.spec({ "n", 2, 4 }), ds.spec({ "b", 2 }, "i64") })
    H.bitwise(ds.segment_attention(q, k, v, I(seg), I(seg)), f(q, k, v, I(seg)))
  end)

  it("refuses bad segments and shapes with a message naming them", function()
    local x = ds.ones({ 6, 2, 4 })
    local function run(qs, ks, q) return function() ds.segment_attention(q or x, x, x, I(qs), I(ks)) end end
    H.raises(run({ { 1, 4 }, { 3, 2 } }, { { 1, 4 }, { 3, 2 } }), "segment_attention", "query segment 2 overlaps")
    H.raises(run({ { 1, 7 } }, { { 1, 6 } }), "query segment 1", "outside rows 1..6")
    H.raises(run({ { 1, 2 } }, { { 0, 2 } }), "key segment 1", "outside rows 1..6")
    H.raises(run({ { 1, 2 } }, { { 5, -1 } }), "key segment 1", "count -1")
    H.raises(run({ { 1, 2 } }, { { 1, 2 }, { 3, 1 } }), "qseg", "kseg", "differ in B")
    H.raises(function() ds.segment_attention(x, x, x, ds.ones({ 1, 2 }), I { { 1, 2 } }) end, "qseg must be (B, 2) i64")
    H.raises(run({ { 1, 2 } }, { { 1, 2 } }, ds.ones({ 6, 3, 4 })), "do not fit (Nq, heads, E)")
    H.raises(function() ds.segment_attention(x, x, x, I { { 1, 2 } }, I { { 1, 2 } }, { mask = x }) end,
      "unknown option 'mask'")
  end)

  it("has no gradient: differentiating through it is a clear error", function()
    local q = ds.randn({ 3, 1, 2 }):requires_grad_()
    local y = ds.segment_attention(q, q, q, I { { 1, 3 } }, I { { 1, 3 } })
    H.raises(function() y:sum():backward() end, "segment_attention: no gradient")
  end)
end)
