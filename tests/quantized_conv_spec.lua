-- tests/quantized_conv_spec.lua: conv2d_int8 and conv2d_int8_static (src/qconv.c): their values are the
-- documented computation written out here (each image quantized as a whole, or with the fixed scale and zero
-- point; padding taps hold the zero point; exact integer sums; the f32 dequantization), bit for bit; the same
-- bits on every ISA path and for an image alone or inside a batch; compiled = eager (the weight packed once);
-- nn.QuantizedConv2d through ds.quantize {ops = {"linear", "conv2d"}} (dynamic and static), saved and loaded;
-- refusals naming the op.
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

-- x (B, C, H, W), w (O, C, kh, kw) i8, ws (O), b (O), o = {stride, padding, dilation} (pairs), fixed = {s, zp}
local function reference(x, w, ws, b, o, fixed)
  local xt, wt, wst, bt = x:totable(), w:totable(), ws:totable(), b:totable()
  local C, Hh, W = #xt[1], #xt[1][1], #xt[1][1][1]
  local O, kh, kw = #wt, #wt[1][1], #wt[1][1][1]
  local st, pd, dl = o.stride, o.padding, o.dilation
  local OH = math.floor((Hh + 2 * pd[1] - dl[1] * (kh - 1) - 1) / st[1]) + 1
  local OW = math.floor((W + 2 * pd[2] - dl[2] * (kw - 1) - 1) / st[2]) + 1
  local out = {}
  for n, img in ipairs(xt) do
    local lo, hi = 0, 0
    for c = 1, C do for i = 1, Hh do for j = 1, W do
      lo = math.min(lo, img[c][i][j]); hi = math.max(hi, img[c][i][j])
    end end end
    local s = f32(f32(hi - lo) / 255)
    local zp = s ~= 0 and rint(math.max(0, math.min(255, f32(-lo / s)))) or 0
    if fixed then s, zp = fixed[1], fixed[2] end
    local function q(c, i, j)
      if i < 1 or i > Hh or j < 1 or j > W then return zp end
      if s == 0 then return 0 end
      return math.max(0, math.min(255, f32(rint(f32(img[c][i][j] / s)) + zp)))
    end
    out[n] = {}
    for oc = 1, O do
      out[n][oc] = {}
      for oh = 1, OH do
        out[n][oc][oh] = {}
        for ow = 1, OW do
          local acc, cs = 0, 0
          for c = 1, C do for i = 1, kh do for j = 1, kw do
            local wv = wt[oc][c][i][j]
            local hi_ = (oh - 1) * st[1] - pd[1] + (i - 1) * dl[1] + 1
            local wi_ = (ow - 1) * st[2] - pd[2] + (j - 1) * dl[2] + 1
            acc = acc + q(c, hi_, wi_) * wv
            cs = cs + wv
          end end end
          out[n][oc][oh][ow] = f32(f32(f32(acc - zp * cs) * f32(s * wst[oc])) + bt[oc])
        end
      end
    end
  end
  return ds.tensor(out)
end

local function case(B, C, Hh, W, O, kh, kw, seed)
  ds.manual_seed(seed)
  local x = ds.randn(B, C, Hh, W) * 2 + 0.5
  local w = (ds.randn(O, C, kh, kw) * 50):clamp(-127, 127):round():astype("i8")
  return x, w, ds.rand(O) * 0.01 + 0.001, ds.randn(O)
end

local CASES = {
  { { 2, 3, 7, 6, 5, 3, 3 }, { stride = { 1, 1 }, padding = { 1, 1 }, dilation = { 1, 1 } } },
  { { 1, 2, 9, 8, 17, 3, 2 }, { stride = { 2, 1 }, padding = { 2, 0 }, dilation = { 1, 2 } } },
  { { 3, 1, 5, 5, 4, 5, 5 }, { stride = { 1, 1 }, padding = { 0, 0 }, dilation = { 1, 1 } } },
  { { 2, 5, 6, 6, 33, 1, 1 }, { stride = { 2, 2 }, padding = { 0, 0 }, dilation = { 1, 1 } } },
  -- 1600 output pixels: two bands of taps, the second starting inside an output row; 13 channels: partial tiles
  { { 1, 3, 40, 40, 13, 3, 3 }, { stride = { 1, 1 }, padding = { 1, 1 }, dilation = { 1, 1 } } },
  -- kernel rows of 5, 4 and 7 taps: a window of four adjacent columns per row, the rest grouped after them
  { { 2, 3, 11, 12, 7, 5, 5 }, { stride = { 1, 1 }, padding = { 2, 2 }, dilation = { 1, 1 } } },
  { { 1, 2, 9, 10, 5, 3, 4 }, { stride = { 1, 1 }, padding = { 1, 0 }, dilation = { 1, 1 } } },
  { { 1, 2, 10, 9, 6, 2, 7 }, { stride = { 1, 1 }, padding = { 0, 3 }, dilation = { 1, 1 } } },
}

describe("conv2d_int8", function()
  it("is the documented computation, bit for bit (dynamic and static)", function()
    for i, c in ipairs(CASES) do
      local x, w, ws, b = case(c[1][1], c[1][2], c[1][3], c[1][4], c[1][5], c[1][6], c[1][7], i)
      assert.is_true(H.bitwise(ds.conv2d_int8(x, w, ws, b, c[2]), reference(x, w, ws, b, c[2])), "case " .. i)
      local fixed = { f32(0.021), 97 }
      local y = ds.conv2d_int8_static(x, w, ws, b, ds.full({}, fixed[1]), ds.full({}, fixed[2], { dtype = "u8" }), c[2])
      assert.is_true(H.bitwise(y, reference(x, w, ws, b, c[2], fixed)), "static case " .. i)
    end
  end)

  it("an image alone gives the bits it gets inside a batch; an all-zero image (or none) gives the bias", function()
    local x, w, ws, b = case(4, 3, 8, 8, 6, 3, 3, 9)
    x[{ 3 }] = 0
    local o = { padding = 1 }
    local all = ds.conv2d_int8(x, w, ws, b, o)
    for n = 1, 4 do assert.is_true(H.bitwise(ds.conv2d_int8(x:narrow(1, n, 1), w, ws, b, o), all:narrow(1, n, 1))) end
    assert.is_true(H.bitwise(all[3], b:reshape(6, 1, 1):expand(6, 8, 8):contiguous()))
    -- no input channels (no taps at all): the bias too
    local none = ds.conv2d_int8(ds.zeros(2, 0, 8, 8), w:narrow(2, 1, 0), ws, b, o)
    assert.is_true(H.bitwise(none, b:reshape(1, 6, 1, 1):expand(2, 6, 8, 8):contiguous()))
  end)

  it("gives the same bits on every ISA path and thread count (one image split in bands over the threads too)", function()
    local script = [[
      local ds = require("ds")
      ds.manual_seed(3)
      local x = ds.randn(2, 16, 12, 12)
      local w = (ds.randn(40, 16, 3, 3) * 60):clamp(-127, 127):round():astype("i8")
      local ws, b = ds.rand(40) * 0.01, ds.randn(40)
      local y = ds.conv2d_int8(x, w, ws, b, { padding = 1 })
      local xs, xz = ds.full({}, 0.03), ds.full({}, 120, { dtype = "u8" })
      local ys = ds.conv2d_int8_static(x, w, ws, b, xs, xz, { stride = 2 })
      local x1 = ds.randn(1, 4, 48, 48)
      local w1 = (ds.randn(10, 4, 3, 5) * 60):clamp(-127, 127):round():astype("i8")
      local y1 = ds.conv2d_int8(x1, w1, ds.rand(10) * 0.01, ds.randn(10), { padding = { 1, 2 } })
      local cg = ds.compile(function(a) return ds.conv2d_int8(a, w, ws, b, { padding = 1 }) end,
        { ds.spec({ 2, 16, 12, 12 }) }, { freeze = true, convert = false })
      local yc = cg(x)   -- the weight packed once
      local ffi = require("ffi")
      local h = 0
      for _, t in ipairs({ y, ys, y1, yc }) do
        local p = ffi.cast("uint8_t *", t:data_ptr())
        for i = 0, t:numel() * 4 - 1 do h = (h * 31 + p[i]) % 2147483647 end
      end
      io.write(ds.info().int8_path, " ", h)
    ]]
    H.same_bits_on_every_path(script)
  end)

  it("compiled (a dynamic batch) equals eager bitwise", function()
    local x, w, ws, b = case(3, 2, 9, 9, 7, 3, 3, 11)
    local function fn(a) return ds.conv2d_int8(a, w, ws, b, { stride = 2, padding = 1 }):relu() end
    local cg = ds.compile(fn, { ds.spec({ "n", 2, 9, 9 }) }, { freeze = true })
    assert.is_true(H.bitwise(cg(x), fn(x)))
    assert.is_true(H.bitwise(cg(x:narrow(1, 2, 1)), fn(x):narrow(1, 2, 1)))
  end)

  it("compiled with a frozen weight reads it packed once (dynamic, static, dilated), the same bits", function()
    local xs, xz = ds.full({}, 0.04), ds.full({}, 100, { dtype = "u8" })
    for _, o in ipairs({ { padding = 1 }, { dilation = { 1, 2 }, padding = { 0, 2 }, stride = { 2, 1 } } }) do
      local x, w, ws, b = case(2, 3, 9, 11, 5, 3, 5, 13)
      local function fn(a) return ds.conv2d_int8(a, w, ws, b, o), ds.conv2d_int8_static(a, w, ws, b, xs, xz, o) end
      local cg = ds.compile(fn, { ds.spec({ "n", 3, 9, 11 }) }, { freeze = true })
      local text = tostring(cg)
      assert.truthy(text:find("conv2d_int8_packed(", 1, true))
      assert.truthy(text:find("conv2d_int8_static_packed(", 1, true))
      local y, ys = cg(x)
      local e, es = fn(x)
      assert.is_true(H.bitwise(y, e))
      assert.is_true(H.bitwise(ys, es))
    end
    -- a packed weight is checked against the convolution that reads it (its shape and column dilation)
    local Q, D = require("ds.ops.quantized"), require("ds.dispatch")
    local x, w, ws, b = case(1, 2, 7, 7, 3, 3, 3, 1)
    local pack = Q.pack_int8_conv_weight
    local wp = D.run_kernel(pack, { w }, { dilation = 1 }, { pack.infer({ w }) })[1]
    assert.is_true(H.bitwise(D.call(Q.conv2d_int8_packed, { x, wp, ws, b }, { kernel = { 3, 3 } }),
      ds.conv2d_int8(x, w, ws, b)))
    H.raises(function() D.call(Q.conv2d_int8_packed, { x, wp, ws, b }, { kernel = { 3, 3 }, dilation = { 1, 2 } }) end,
      "conv2d_int8_packed", "not that of (3, 2, 3, 3) with this dilation")
    H.raises(function() D.call(Q.conv2d_int8_packed, { x, wp, ws, b }, { kernel = { 3, 2 } }) end,
      "conv2d_int8_packed", "packed weight")
    local taps = wp:numel() - 12 * 5   -- (5 groups of four taps: channel, row, column each)
    wp[taps + 1] = 2   -- the first tap's channel past C = 2
    H.raises(function() D.call(Q.conv2d_int8_packed, { x, wp, ws, b }, { kernel = { 3, 3 } }) end,
      "conv2d_int8_packed", "do not fit its (3, 3) kernel")
  end)

  it("refuses NaN, wrong dtypes, shapes and options, naming the op", function()
    local x, w, ws, b = case(1, 2, 5, 5, 3, 3, 3, 1)
    H.raises(function() ds.conv2d_int8(x, w:astype("f32"), ws, b) end, "conv2d_int8", "weight must be i8")
    H.raises(function() ds.conv2d_int8(ds.randn(1, 3, 5, 5), w, ws, b) end, "conv2d_int8", "(B, C, H, W)")
    H.raises(function() ds.conv2d_int8(x, w, ws, b, { groups = 2 }) end, "conv2d_int8", "groups")
    H.raises(function() ds.conv2d_int8(ds.randn(1, 2, 2, 2), w, ws, b) end, "conv2d_int8", "larger than")
    x[{ 1, 1, 1, 1 }] = 0 / 0
    H.raises(function() ds.conv2d_int8(x, w, ws, b) end, "conv2d_int8", "NaN")
    -- a batch large enough to quantize its images in parallel, the NaN in the last one
    local xb, wb, wsb, bb = case(4, 2, 24, 24, 5, 3, 3, 2)
    xb[{ 4, 2, 24, 24 }] = 0 / 0
    H.raises(function() ds.conv2d_int8(xb, wb, wsb, bb) end, "conv2d_int8", "NaN")
  end)
end)

describe("ds.quantize with conv2d", function()
  local nn = ds.nn
  local function lenet()
    ds.manual_seed(21)
    local m = nn.Sequential(nn.Conv2d(1, 6, 5, { padding = "same" }), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5),
      nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 10))
    m:eval()
    return m
  end

  it("replaces each Conv2d by a QuantizedConv2d (per-channel int8 weight); compiled, saved, loaded", function()
    local m = lenet()
    local q = ds.quantize(m, { ops = { "linear", "conv2d" } })
    assert.equal("QuantizedConv2d", q[1]._name)
    assert.equal("QuantizedLinear", q[8]._name)
    local w = m[1].weight:reshape(6, -1)
    local scale = (w:abs():amax(2) / 127):contiguous()
    assert.is_true(H.bitwise(q[1].scale, scale))
    assert.is_true(H.bitwise(q[1].weight, (w / scale:reshape(-1, 1)):round():clamp(-127, 127):astype("i8")
      :reshape(6, 1, 5, 5)))
    local x = ds.randn(2, 1, 28, 28)
    assert.is_true(H.bitwise(q[1](x), ds.conv2d_int8(x, q[1].weight, q[1].scale, m[1].bias, { padding = 2 })))
    assert.is_true((q(x) - m(x)):abs():max():item() < 0.05 * m(x):abs():max():item())
    local cq = ds.quantize(m, { ops = { "linear", "conv2d" }, specs = { ds.spec({ "n", 1, 28, 28 }) } })
    assert.is_true(H.bitwise(cq(x), q(x)))
    local dir = H.tmp_dir()
    ds.save(cq, dir .. "/m")
    assert.is_true(H.bitwise(ds.load(dir .. "/m")(x), q(x)))
    os.execute("rm -rf " .. dir)
    assert.equal("Conv2d", ds.quantize(m)[1]._name)   -- ops defaults to {"linear"}
  end)

  it("static: the conv layers' inputs get calibrated scales; the report covers every layer", function()
    local m = lenet()
    local x = ds.randn(4, 1, 28, 28)
    local q, rows = ds.quantize(m, { mode = "static", ops = { "conv2d" }, calibration = { { x } } })
    assert.equal("Linear", q[8]._name)
    assert.equal(f32(f32(x:max():item() - x:min():item()) / 255), q[1].input_scale:item())
    assert.same({ "1", "4" }, { rows[1].name, rows[2].name })
    for _, r in ipairs(rows) do assert.is_true(r.max_abs_error > 0 and r.max_abs_error < 0.05 * r.max_abs, r.name) end
  end)

  it("refuses grouped convolutions and 'same' padding it cannot split evenly, naming them", function()
    local m = nn.Sequential(nn.Conv2d(4, 4, 3, { groups = 2 }))
    H.raises(function() ds.quantize(m, { ops = { "conv2d" } }) end, "quantize", "groups = 2")
    H.raises(function() ds.quantize(nn.Sequential(nn.Conv2d(2, 2, 4, { padding = "same" })), { ops = { "conv2d" } })
    end, "QuantizedConv2d", "same")
    H.raises(function() ds.quantize(nn.Sequential(nn.ReLU()), { ops = { "conv2d" } }) end, "quantize", "no layer")
  end)
end)
