-- tests/quantized_spec.lua: linear_int8 and linear_int8_static (src/qgemm.c): their values are the documented
-- computation exactly (row quantization or a fixed one, exact integer products, the f32 dequantization), bit for
-- bit; the same bits on every ISA path (VNNI, AVX2, the portable code), thread count, and for a row alone or
-- inside a batch; compiled (the weight packed once) equals eager; bad inputs are refused naming the op. ds.quantize
-- in dynamic and static mode (min-max and percentile observers).
local ds = require("ds")
local ffi = require("ffi")
local H = require("helpers")

local f = ffi.new("float[1]")
local function f32(v) f[0] = v; return f[0] end
local function rint(v)   -- round half to even
  local r = math.floor(v + 0.5)
  if r - v == 0.5 and r % 2 ~= 0 then r = r - 1 end
  return r
end

-- the documented computation, in Lua numbers rounded to f32 where the kernel rounds; fixed = {scale, zero
-- point} quantizes every row with them (static), else each row with its own range (dynamic)
local function reference(x, w, ws, b, fixed)
  local xs, wt, wst, bt = x:totable(), w:totable(), ws:totable(), b:totable()
  local N, K = #wt, #wt[1]
  local out = {}
  for m, row in ipairs(xs) do
    local lo, hi = 0, 0
    for k = 1, K do lo = math.min(lo, row[k]); hi = math.max(hi, row[k]) end
    local s = f32(f32(hi - lo) / 255)
    local q, zp = {}, 0
    if s ~= 0 then zp = rint(math.max(0, math.min(255, f32(-lo / s)))) end
    if fixed then s, zp = fixed[1], fixed[2] end
    if s ~= 0 then
      for k = 1, K do q[k] = math.max(0, math.min(255, f32(rint(f32(row[k] / s)) + zp))) end
    else
      for k = 1, K do q[k] = 0 end
    end
    out[m] = {}
    for n = 1, N do
      local acc, cs = 0, 0
      for k = 1, K do acc = acc + q[k] * wt[n][k]; cs = cs + wt[n][k] end
      out[m][n] = f32(f32(f32(acc - zp * cs) * f32(s * wst[n])) + bt[n])
    end
  end
  return ds.tensor(out)
end

local function case(M, K, N, seed)
  ds.manual_seed(seed)
  local x = ds.randn(M, K) * 3
  local w = (ds.randn(N, K) * 50):clamp(-127, 127):round():astype("i8")
  return x, w, ds.rand(N) * 0.01 + 0.001, ds.randn(N)
end

local SHAPES = { { 1, 4, 16 }, { 3, 10, 20 }, { 9, 37, 33 }, { 17, 64, 70 }, { 2, 1, 1 }, { 5, 130, 47 },
  { 13, 100, 130 }, { 7, 36, 96 }, { 20, 9, 64 } }   -- (the last three: VNNI's wide tiles, each strip count)

describe("linear_int8", function()
  it("is the documented computation, bit for bit", function()
    for i, s in ipairs(SHAPES) do
      local x, w, ws, b = case(s[1], s[2], s[3], i)
      assert.is_true(H.bitwise(ds.linear_int8(x, w, ws, b), reference(x, w, ws, b)), table.concat(s, "x"))
    end
  end)

  it("a row alone gives the bits it gets inside a batch; leading dims and an all-zero row", function()
    for _, N in ipairs({ 50, 80 }) do   -- (VNNI: 8 x 32 tiles, then 6 x 64)
      local x, w, ws, b = case(12, 40, N, 7)
      x[{ 5 }] = 0
      local all = ds.linear_int8(x, w, ws, b)
      for m = 1, 12 do
        assert.is_true(H.bitwise(ds.linear_int8(x:narrow(1, m, 1), w, ws, b), all:narrow(1, m, 1)), "row " .. m)
      end
      assert.is_true(H.bitwise(ds.linear_int8(x:reshape(3, 4, 40), w, ws, b), all:reshape(3, 4, N)))
      assert.is_true(H.bitwise(all:narrow(1, 5, 1), b:reshape(1, N)))
    end
  end)

  it("gives the same bits on every ISA path and thread count", function()
    local script = [[
      local ds = require("ds")
      ds.manual_seed(3)
      local x = ds.randn(130, 300) * 2
      local w = (ds.randn(200, 300) * 60):clamp(-127, 127):round():astype("i8")
      local ws, b = ds.rand(200) * 0.01, ds.randn(200)
      local y = ds.linear_int8(x, w, ws, b)
      local ys = ds.linear_int8_static(x, w, ws, b, ds.full({}, 0.02), ds.full({}, 117, {dtype = "u8"}))
      local w2, ws2, b2 = w:narrow(1, 1, 72):contiguous(), ws:narrow(1, 1, 72):contiguous(), b:narrow(1, 1, 72):contiguous()
      local pair = ds.compile(function(a) return ds.linear_int8(a, w, ws, b), ds.linear_int8(a, w2, ws2, b2) end,
        { ds.spec({ 130, 300 }) }, { freeze = true, convert = false })
      local m1, m2 = pair(x)
      local w3, ws3, b3 = w:narrow(2, 1, 64):contiguous(), ws, b
      local heads = ds.compile(function(t) return ds.linear_int8((t * 1):transpose(1, 2):reshape(130, 64), w3, ws3, b3) end,
        { ds.spec({ 4, 130, 16 }) }, { freeze = true, convert = false })
      local hy = heads(x:narrow(2, 1, 64):contiguous():reshape(130, 4, 16):transpose(1, 2):contiguous())
      assert(heads.ir.nodes[3].attrs.xdims == 2)
      local ffi = require("ffi")
      local h = 0
      for _, t in ipairs({ y, ys, m1, m2, hy }) do
        local p = ffi.cast("uint8_t *", t:data_ptr())
        for i = 0, t:numel() * 4 - 1 do h = (h * 31 + p[i]) % 2147483647 end
      end
      io.write(ds.info().int8_path, " ", h)
    ]]
    local paths = H.same_bits_on_every_path(script)
    assert.equal("scalar", paths[3])
  end)

  it("compiled and frozen (the weight packed once) equals eager bitwise", function()
    local x, w, ws, b = case(6, 100, 40, 9)
    local function fn(a) return ds.linear_int8(a, w, ws, b):relu() end
    local eager = fn(x)
    for _, o in ipairs { {}, { freeze = true } } do
      local cg = ds.compile(fn, { ds.spec({ "n", 100 }) }, o)
      assert.is_true(H.bitwise(cg(x), eager))
      assert.is_true(H.bitwise(cg(x:narrow(1, 2, 3)), eager:narrow(1, 2, 3)))
    end
  end)

  it("frozen linears over one input run as one product (linear_int8_multi), each output the eager bits", function()
    ds.manual_seed(12)
    local widths, ws_, shared = { 20, 33, 7, 64 }, {}, ds.randn(3, 40)
    for p, N in ipairs(widths) do
      local w = (ds.randn(N, 40) * 50):clamp(-127, 127):round():astype("i8")
      ws_[p] = { w, ds.rand(N) * 0.01 + 0.001, ds.randn(N) }
    end
    local function fn(a)   -- four linears of a, one of another value (not merged)
      local out = {}
      for p = 1, #widths do out[p] = ds.linear_int8(a, ws_[p][1], ws_[p][2], ws_[p][3]) end
      out[#out + 1] = ds.linear_int8(a + 1, ws_[1][1], ws_[1][2], ws_[1][3])
      return unpack(out)
    end
    local cg = ds.compile(fn, { ds.spec({ "n", 40 }) }, { freeze = true })
    local ops = {}
    for _, node in ipairs(cg.ir.nodes) do ops[node.op] = (ops[node.op] or 0) + 1 end
    assert.equal(1, ops.linear_int8_multi4)
    assert.equal(1, ops.linear_int8_packed)
    for _, x in ipairs({ ds.randn(5, 40) * 2, ds.randn(1, 40), shared }) do
      local got, want = { cg(x) }, { fn(x) }
      assert.equal(#want, #got)
      for p = 1, #want do assert.is_true(H.bitwise(got[p], want[p]), "output " .. p) end
    end
  end)

  it("frozen linears read attention's heads (B, H, T, D) transposed in place (xdims 2), the eager bits", function()
    ds.manual_seed(13)
    local w = (ds.randn(24, 48) * 50):clamp(-127, 127):round():astype("i8")
    local w2 = (ds.randn(40, 48) * 50):clamp(-127, 127):round():astype("i8")
    local ws, b, ws2, b2 = ds.rand(24) * 0.01, ds.randn(24), ds.rand(40) * 0.01, ds.randn(40)
    local function heads(t)   -- t (B, 4, T, 12) from a kernel -> (B, T, 48)
      local B, T = t:size(1), t:size(3)
      return (t * 1):transpose(2, 3):reshape(B, T, 48)
    end
    local one = function(t) return ds.linear_int8(heads(t), w, ws, b) end
    local two = function(t) local x = heads(t); return ds.linear_int8(x, w, ws, b), ds.linear_int8(x, w2, ws2, b2) end
    local last = function(t) return ds.linear_int8((t * 1):transpose(3, 4):reshape(t:size(1), t:size(3), 48), w, ws, b) end
    for _, c in ipairs({ { one, "linear_int8_packed", true }, { two, "linear_int8_multi2", true },
                         { last, "linear_int8_packed", false } }) do
      local cg = ds.compile(c[1], { ds.spec({ "b", 4, "t", 12 }) }, { freeze = true })
      local seen
      for _, node in ipairs(cg.ir.nodes) do if node.op == c[2] then seen = node.attrs.xdims == 2 end end
      assert.equal(c[3], seen, c[2])
      for _, x in ipairs({ ds.randn(2, 4, 5, 12), ds.randn(1, 4, 9, 12) * 3 }) do
        local got, want = { cg(x) }, { c[1](x) }
        for p = 1, #want do assert.is_true(H.bitwise(got[p], want[p]), c[2] .. " output " .. p) end
      end
    end
    local bad = ds.randn(1, 4, 5, 12)
    bad[{ 1, 3, 2, 7 }] = 0 / 0
    local cg = ds.compile(one, { ds.spec({ 1, 4, 5, 12 }) }, { freeze = true })
    H.raises(function() cg(bad) end, "linear_int8_packed", "NaN or an infinity")
  end)

  it("static: x quantized with a fixed scale and zero point is the documented computation, bit for bit", function()
    for i, sh in ipairs(SHAPES) do
      local x, w, ws, b = case(sh[1], sh[2], sh[3], 40 + i)
      for _, fixed in ipairs({ { f32(0.013), 131 }, { f32(0.04), 0 }, { f32(0.002), 255 } }) do
        local y = ds.linear_int8_static(x, w, ws, b, ds.full({}, fixed[1]), ds.full({}, fixed[2], { dtype = "u8" }))
        assert.is_true(H.bitwise(y, reference(x, w, ws, b, fixed)), table.concat(sh, "x") .. " " .. fixed[2])
      end
    end
  end)

  it("static: quotients on halves round to even, beyond the range saturate (vector body and scalar tail)", function()
    local row = { 0.25, 0.75, 1.25, -0.25, -0.75, 2.25, 63.75, -64.25, 100, -100, 0.5, 1.75, -1.25, 3.25, 0, -0,
      5.75, -5.75, 7.25 }
    local x = ds.tensor({ row, row })
    local _, w, ws, b = case(2, #row, 9, 77)
    local y = ds.linear_int8_static(x, w, ws, b, ds.full({}, 0.5), ds.full({}, 128, { dtype = "u8" }))
    assert.is_true(H.bitwise(y, reference(x, w, ws, b, { 0.5, 128 })))
  end)

  it("static: compiled and frozen equals eager bitwise; bad scales and zero points are refused", function()
    local x, w, ws, b = case(7, 66, 35, 12)
    local xs, xz = ds.full({}, 0.025), ds.full({}, 100, { dtype = "u8" })
    local function fn(a) return ds.linear_int8_static(a, w, ws, b, xs, xz) end
    local eager = fn(x)
    for _, o in ipairs { {}, { freeze = true } } do
      local cg = ds.compile(fn, { ds.spec({ "n", 66 }) }, o)
      assert.is_true(H.bitwise(cg(x), eager))
      assert.is_true(H.bitwise(cg(x:narrow(1, 3, 2)), eager:narrow(1, 3, 2)))
    end
    H.raises(function() ds.linear_int8_static(x, w, ws, b, ds.full({}, 0), xz) end, "linear_int8_static", "positive")
    H.raises(function() ds.linear_int8_static(x, w, ws, b, xs, ds.full({}, 100)) end, "linear_int8_static",
      "x_zero_point must be u8")
    H.raises(function() ds.linear_int8_static(x, w, ws, b, ds.full({ 2 }, 0.1), xz) end, "linear_int8_static",
      "single values")
  end)

  it("refuses NaN inputs, wrong dtypes and shapes, naming the op", function()
    local x, w, ws, b = case(2, 8, 4, 1)
    x[{ 1, 1 }] = 0 / 0
    H.raises(function() ds.linear_int8(x, w, ws, b) end, "linear_int8", "NaN")
    H.raises(function() ds.linear_int8(ds.randn(2, 8), w:astype("f32"), ws, b) end, "linear_int8", "weight must be i8")
    H.raises(function() ds.linear_int8(ds.randn(2, 7), w, ws, b) end, "linear_int8", "does not end in K")
    H.raises(function() ds.linear_int8(ds.randn(2, 8), w, ds.rand(3), b) end, "linear_int8", "wscale")
  end)

  it("refuses an infinity in a product large enough to split its rows across threads (packed per call or once)",
    function()
      local x, w, ws, b = case(130, 300, 200, 2)
      x[{ 130, 7 }] = math.huge   -- the last row: the last thread's share
      H.raises(function() ds.linear_int8(x, w, ws, b) end, "linear_int8", "NaN or an infinity")
      local frozen = ds.compile(function(a) return ds.linear_int8(a, w, ws, b) end, { ds.spec({ 130, 300 }) },
        { freeze = true })
      H.raises(function() frozen(x) end, "linear_int8_packed", "NaN or an infinity")
      x[{ 130, 7 }] = 1
      assert.is_true(H.bitwise(frozen(x), ds.linear_int8(x, w, ws, b)))
    end)
end)

describe("ds.quantize", function()
  local nn = ds.nn
  local function mlp()
    ds.manual_seed(21)
    local m = nn.Sequential(nn.Linear(48, 96), nn.GELU(), nn.Linear(96, 7))
    m:eval()
    return m
  end

  it("replaces every Linear by a QuantizedLinear holding the per-channel int8 weight; the model is unchanged", function()
    local m = mlp()
    local before = m[1].weight:clone()
    local q = ds.quantize(m)
    assert.equal("QuantizedLinear", q[1]._name)
    assert.equal("QuantizedLinear", q[3]._name)
    assert.equal("Linear", m[1]._name)
    assert.is_true(H.bitwise(m[1].weight, before))
    local w, scale = m[1].weight, q[1].scale
    assert.equal("i8", q[1].weight.dtype)
    assert.is_true(H.bitwise(scale, (w:abs():amax(2) / 127):contiguous()))
    assert.is_true(H.bitwise(q[1].weight, (w / scale:reshape(-1, 1)):round():clamp(-127, 127):astype("i8")))
    local x = ds.randn(4, 48)
    assert.is_true(H.bitwise(q(x), q[3](q[2](ds.linear_int8(x, q[1].weight, q[1].scale, m[1].bias)))))
  end)

  it("compiles with specs; compiled, saved and loaded give the eager bits; skip keeps a layer in f32", function()
    local m = mlp()
    local q = ds.quantize(m)
    local cq = ds.quantize(m, { specs = { ds.spec({ "n", 48 }) } })
    local x = ds.randn(5, 48)
    assert.is_true(H.bitwise(cq(x), q(x)))
    local dir = H.tmp_dir()
    ds.save(cq, dir .. "/m")
    assert.is_true(H.bitwise(ds.load(dir .. "/m")(x), q(x)))
    os.execute("rm -rf " .. dir)
    local partly = ds.quantize(m, { skip = { "3" } })
    assert.equal("QuantizedLinear", partly[1]._name)
    assert.equal("Linear", partly[3]._name)
  end)

  it("reports each layer's error against f32 on calibration batches", function()
    local m = mlp()
    local batches = { { ds.randn(6, 48) }, { ds.randn(3, 48) } }
    local q, rows = ds.quantize(m, { calibration = batches })
    assert.equal(2, #rows)
    assert.same({ "1", "3" }, { rows[1].name, rows[2].name })
    local worst = 0
    for _, b in ipairs(batches) do
      worst = math.max(worst, (q[1](b[1]) - m[1](b[1])):abs():max():item())
    end
    assert.equal(worst, rows[1].max_abs_error)
    assert.is_true(rows[1].max_abs_error > 0 and rows[1].max_abs_error < 0.05 * rows[1].max_abs)
  end)

  it("static: min-max observers fix each layer's input scale and zero point; compiled, saved, loaded", function()
    local m = mlp()
    local batches = { { ds.randn(6, 48) * 2 }, { ds.randn(3, 48) } }
    local q, rows = ds.quantize(m, { mode = "static", calibration = batches })
    local lo, hi = 0, 0
    for _, b in ipairs(batches) do lo = math.min(lo, b[1]:min():item()); hi = math.max(hi, b[1]:max():item()) end
    local s = f32(f32(hi - lo) / 255)
    assert.equal(s, q[1].input_scale:item())
    assert.equal(rint(math.min(255, f32(-lo / s))), q[1].input_zero_point:item())
    local x = ds.randn(4, 48)
    assert.is_true(H.bitwise(q[1](x), reference(x, q[1].weight, q[1].scale, m[1].bias, { s, rint(f32(-lo / s)) })))
    assert.equal(2, #rows)
    assert.is_true(rows[2].max_abs_error > 0 and rows[2].max_abs_error < 0.05 * rows[2].max_abs)
    local cq = ds.quantize(m, { mode = "static", calibration = batches, specs = { ds.spec({ "n", 48 }) } })
    assert.is_true(H.bitwise(cq(x), q(x)))
    local dir = H.tmp_dir()
    ds.save(cq, dir .. "/m")
    assert.is_true(H.bitwise(ds.load(dir .. "/m")(x), q(x)))
    os.execute("rm -rf " .. dir)
  end)

  it("static: the percentile observer clips the rare outliers min-max keeps", function()
    local m = mlp()
    local x = ds.randn(40, 48)
    x[{ 1, 1 }] = 1000
    local mm = ds.quantize(m, { mode = "static", calibration = { { x } } })
    local pc = ds.quantize(m, { mode = "static", calibration = { { x } }, observer = "percentile", percentile = 99.9 })
    assert.equal(f32(f32(1000 - x:min():item()) / 255), mm[1].input_scale:item())
    local sorted = x:reshape(-1):sort()
    local n = sorted:numel()
    local p_lo = sorted[math.floor(0.1 / 100 * (n - 1) + 0.5) + 1]:item()
    local p_hi = sorted[math.floor(99.9 / 100 * (n - 1) + 0.5) + 1]:item()
    assert.is_true(p_hi < 10)
    assert.equal(f32(f32(p_hi - p_lo) / 255), pc[1].input_scale:item())
  end)

  it("refuses what it does not implement, naming it", function()
    local m = mlp()
    H.raises(function() ds.quantize(m, { mode = "static" }) end, "quantize", "static", "calibration")
    H.raises(function() ds.quantize(m, { mode = "weekly" }) end, "quantize", "weekly", "not implemented")
    H.raises(function() ds.quantize(m, { observer = "minmax" }) end, "quantize", "observer", "static")
    H.raises(function() ds.quantize(m, { mode = "static", calibration = {}, observer = "kl" }) end, "quantize",
      "observer 'kl'")
    H.raises(function() ds.quantize(m, { mode = "static", calibration = {}, percentile = 99 }) end, "quantize",
      "percentile")
    H.raises(function() ds.quantize(m, { ops = { "matmul" } }) end, "quantize", "matmul", "not implemented")
    H.raises(function() ds.quantize(m, { per_channel = false }) end, "quantize", "per_channel")
    H.raises(function() ds.quantize(m, { bogus = 1 }) end, "quantize", "bogus")
    H.raises(function() ds.quantize(nn.Sequential(nn.ReLU())) end, "quantize", "no layer")
  end)
end)
