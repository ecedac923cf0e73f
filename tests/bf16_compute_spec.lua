-- tests/bf16_compute_spec.lua: matmul_bf16 (src/bgemm.c) and ds.compile's {dtype = "bf16"} (passes/autocast.lua).
-- The GEMM's values are ds's bf16 dot written out here in Lua (docs/DTYPES.md: pairs of k in order, odd k then
-- even k, one rounding per fma, bf16 subnormals read as zero, subnormal sums flushed, NaN 0x7fc00000), bit for
-- bit on edge and random inputs; the same bits on every ISA path (AVX-512 BF16, AVX2, the portable code) and
-- thread count, for a row alone or inside a batch; a bf16-compiled model equals its eager form written with
-- matmul_bf16, frozen or not, and after ds.save/ds.load; bad inputs and options are refused naming them.
local ds = require("ds")
local ffi = require("ffi")
local H = require("helpers")

local u = ffi.new("union { double d; uint64_t u; float f[2]; uint32_t w[2]; }")
local fl = ffi.new("float[1]")
local function f32(v) fl[0] = v; return fl[0] end
local function f32_bits(v) u.f[0] = v; return u.w[0] end
local function bf16_value(h) u.w[0] = h * 65536; return u.f[0] end
local TINY = 2 ^ -126

local function flush(v) if v ~= 0 and math.abs(v) < TINY then return v * 0 end return v end   -- keeps the sign

-- c + a * b rounded once to f32 (a, b bf16 values, c an f32 value): the product and the sum in double, its
-- rounding error found exactly (two-sum) and folded in by rounding to odd, then one rounding to f32
local function fma32(a, b, c)
  local p = a * b
  local s = c + p
  if s ~= s or s == math.huge or s == -math.huge then return f32(s) end
  local bb = s - c
  local e = (c - (s - bb)) + (p - bb)
  if e ~= 0 then
    u.d = s
    if u.u % 2 == 0 then
      if (s > 0) == (e > 0) then u.u = u.u + 1 else u.u = u.u - 1 end
      s = u.d
    end
  end
  return f32(s)
end

-- the documented dot of bf16 bit patterns a[k], b[k] (k = 1..K): its f32 bits
local function dot_bits(a, b, K)
  local acc = 0.0
  for k0 = 1, K, 2 do
    local k1 = k0 + 1
    local a1, b1 = k1 <= K and flush(bf16_value(a[k1])) or 0.0, k1 <= K and flush(bf16_value(b[k1])) or 0.0
    acc = flush(fma32(a1, b1, acc))
    acc = flush(fma32(flush(bf16_value(a[k0])), flush(bf16_value(b[k0])), acc))
  end
  if acc ~= acc then return 0x7fc00000 end
  return f32_bits(acc)
end

-- xorshift bit patterns of a kind: 0 any, 1 moderate, 2 subnormal, 3 huge, 4 tiny normal
local seed = 88172645
local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n end
local function pattern(kind)
  local s, m = rnd(2) * 32768, rnd(128)
  if kind == 0 then return rnd(65536) end
  if kind == 1 then return s + (107 + rnd(40)) * 128 + m end
  if kind == 2 then return s + m end
  if kind == 3 then return s + (234 + rnd(20)) * 128 + m end
  return s + (1 + rnd(20)) * 128 + m
end

-- a bf16 tensor of shape holding the patterns of gen() in order; and the patterns as a Lua list
local function bf16_tensor(shape, gen)
  local t = ds.empty(shape, { dtype = "bf16" })
  local p, list = ffi.cast("uint16_t *", t:data_ptr()), {}
  for i = 0, t:numel() - 1 do list[i + 1] = gen(); p[i] = list[i + 1] end
  return t, list
end

-- c's f32 bits against the documented dot of a (M, K) and b (K, N) patterns
local function check_against_reference(c, al, bl, M, K, N, what)
  local p = ffi.cast("uint32_t *", c:contiguous():data_ptr())
  for i = 0, M - 1 do
    local row = {}
    for k = 1, K do row[k] = al[i * K + k] end
    for j = 0, N - 1 do
      local col = {}
      for k = 1, K do col[k] = bl[(k - 1) * N + j + 1] end
      local want, got = dot_bits(row, col, K), p[i * N + j]
      if want ~= got then
        error(string.format("%s: c[%d][%d] = 0x%08x, the documented dot gives 0x%08x", what, i, j, got, want))
      end
    end
  end
end

describe("matmul_bf16", function()
  it("gives the documented dot bit for bit (edge and random patterns, odd K, ragged tiles)", function()
    local mixes = {
      { "moderate", function() return pattern(1) end },
      { "any bits", function() return pattern(0) end },
      { "mixed kinds", function() return pattern(rnd(5)) end },
      { "tiny and subnormal", function() return pattern(2 + 2 * rnd(2)) end },
      { "huge", function() return pattern(3 - 2 * rnd(2)) end },
    }
    for _, mix in ipairs(mixes) do
      for _, s in ipairs { { 1, 1, 1 }, { 3, 5, 7 }, { 9, 34, 35 }, { 2, 8, 16 }, { 5, 0, 3 } } do
        local M, K, N = s[1], s[2], s[3]
        local a, al = bf16_tensor({ M, K }, mix[2])
        local b, bl = bf16_tensor({ K, N }, mix[2])
        check_against_reference(ds.matmul_bf16(a, b), al, bl, M, K, N, mix[1] .. " " .. table.concat(s, "x"))
      end
    end
  end)

  it("flushes a subnormal sum, reads subnormal inputs as zero, keeps a cancellation's exact residue", function()
    local function one(av, bv)   -- (1, #av) @ (#av, 1) from Lua numbers (exact in bf16)
      return ds.matmul_bf16(ds.tensor({ av }):astype("bf16"), ds.tensor(bv):reshape(#bv, 1):astype("bf16")):item()
    end
    assert.equal(0, one({ 2 ^ -70, 0 }, { 2 ^ -70, 0 }))            -- 2^-140: subnormal in f32, flushed
    assert.equal(2 ^ -126, one({ 2 ^ -63, 0 }, { 2 ^ -63, 0 }))     -- the smallest normal stays
    assert.equal(0, one({ 2 ^ -130, 1 }, { 1, 0 }))                  -- a bf16 subnormal reads as 0
    -- odd k first: 1 - 2^24 is exact, + 2^24 gives 1 (even first: 1 + 2^24 rounds to 2^24, - 2^24 gives 0)
    assert.equal(1, one({ 1, 0, 2 ^ 12, -2 ^ 12 }, { 1, 0, 2 ^ 12, 2 ^ 12 }))
    assert.equal(math.huge, one({ 2 ^ 100, 1 }, { 2 ^ 100, 1 }))      -- 2^200 rounds to f32's inf
    local nan = ds.matmul_bf16(ds.tensor({ { math.huge, 1 } }):astype("bf16"),
      ds.tensor({ { 1 }, { -math.huge } }):astype("bf16"))   -- -inf, then + inf: NaN
    assert.equal(0x7fc00000, ffi.cast("uint32_t *", nan:data_ptr())[0])
  end)

  it("takes b (K, N) for a batch of a, or one b per batch; a row alone equals it inside the batch", function()
    ds.manual_seed(5)
    local a, b = ds.randn(2, 3, 37):astype("bf16"), ds.randn(37, 20):astype("bf16")
    local c = ds.matmul_bf16(a, b)
    assert.same({ 2, 3, 20 }, c:size())
    assert.is_true(H.bitwise(ds.matmul_bf16(a:reshape(6, 37), b):reshape(2, 3, 20), c))
    assert.is_true(H.bitwise(ds.matmul_bf16(a:select(1, 2):narrow(1, 2, 1), b), c:select(1, 2):narrow(1, 2, 1)))
    local bb = ds.randn(2, 37, 20):astype("bf16")
    local cb = ds.matmul_bf16(a, bb)
    assert.is_true(H.bitwise(ds.matmul_bf16(a:select(1, 2), bb:select(1, 2)), cb:select(1, 2)))
    -- a transposed (non-contiguous) operand is read as its values
    local bt = ds.randn(20, 37):astype("bf16")
    assert.is_true(H.bitwise(ds.matmul_bf16(a, bt:t()), ds.matmul_bf16(a, bt:t():contiguous())))
  end)

  it("gives the same bits on every ISA path and thread count", function()
    local script = [[
      local ds = require("ds")
      local ffi = require("ffi")
      ds.manual_seed(11)
      local a, b = ds.randn(70, 301):astype("bf16"), (ds.randn(301, 90) * 1e-19):astype("bf16")
      local c = ds.matmul_bf16(a, b)
      local c2 = ds.matmul_bf16(ds.randn(3, 40, 64):astype("bf16"), ds.randn(3, 64, 50):astype("bf16"))
      local c3 = ds.conv2d_bf16(ds.randn(2, 8, 20, 20):astype("bf16"), ds.randn(24, 8, 3, 3):astype("bf16"),
        ds.randn(24), { padding = 1 })
      local bits = { ds.empty({ 37, 61 }, { dtype = "bf16" }), ds.empty({ 61, 45 }, { dtype = "bf16" }) }
      local seed = 12345
      for _, t in ipairs(bits) do   -- any bit patterns: NaNs, infinities, subnormals, huge and tiny values
        local p = ffi.cast("uint16_t *", t:data_ptr())
        for i = 0, t:numel() - 1 do seed = (seed * 1103515245 + 12345) % 2147483648; p[i] = seed % 65536 end
      end
      local c4 = ds.matmul_bf16(bits[1], bits[2])
      -- the convolution on any bit patterns, the shapes of LeNet-5 in a batch (images over the threads) and one image
      -- (bands over the threads)
      local xb, wb = ds.empty({ 2, 3, 9, 11 }, { dtype = "bf16" }), ds.empty({ 7, 3, 3, 3 }, { dtype = "bf16" })
      for _, t in ipairs({ xb, wb }) do
        local p = ffi.cast("uint16_t *", t:data_ptr())
        for i = 0, t:numel() - 1 do seed = (seed * 1103515245 + 12345) % 2147483648; p[i] = seed % 65536 end
      end
      local c5 = ds.conv2d_bf16(xb, wb, ds.randn(7), { padding = 1 })
      local w1, w2 = ds.randn(6, 1, 5, 5):astype("bf16"), ds.randn(16, 6, 5, 5):astype("bf16")
      local c6 = ds.conv2d_bf16(ds.randn(5, 1, 28, 28):astype("bf16"), w1, ds.randn(6), { padding = 2 })
      local c7 = ds.conv2d_bf16(ds.randn(5, 6, 14, 14):astype("bf16"), w2, ds.randn(16))
      local c8 = ds.conv2d_bf16(ds.randn(1, 1, 28, 28):astype("bf16"), w1, ds.randn(6), { padding = 2 })
      local h = 0
      for _, t in ipairs({ c, c2, c3, c4, c5, c6, c7, c8 }) do
        local p = ffi.cast("uint8_t *", t:data_ptr())
        for i = 0, t:numel() * 4 - 1 do h = (h * 31 + p[i]) % 2147483647 end
      end
      io.write(ds.info().bf16_path, " ", h)
    ]]
    local paths = H.same_bits_on_every_path(script)
    assert.equal("avx2", paths[2])
    assert.equal("scalar", paths[3])
  end)

  it("conv2d_bf16 is PyTorch's unfold (im2col) times the weight on matmul_bf16, plus the bias, bit for bit", function()
    ds.manual_seed(9)
    local x, w, b = ds.randn(2, 3, 7, 6):astype("bf16"), ds.randn(5, 3, 3, 2):astype("bf16"), ds.randn(5)
    local cases = { {}, { stride = 2, padding = 1 }, { padding = { 2, 1 }, dilation = { 2, 1 }, stride = { 1, 2 } },
                    { stride = { 2, 1 }, padding = { 0, 1 } } }
    -- x, w, b, options: the cases above, then K odd (25, 27), 1, 13 and 16 channels, bands of several output rows
    -- and of rows narrower than a vector (LeNet-5's two convolutions), a row wider than a band
    local function unfolded(x_, w_, b_, o)
      local y = ds.conv2d_bf16(x_, w_, b_, o)
      local oc, kh, kw = w_:size(1), w_:size(3), w_:size(4)
      local u = { stride = o.stride or 1, padding = o.padding or 0, dilation = o.dilation or 1 }
      local cols = ds.F.unfold(x_, { kh, kw }, u)
      local mm = ds.matmul_bf16(cols:transpose(2, 3), w_:reshape(oc, -1):t())   -- (N, L, OC)
      assert.is_true(H.bitwise(y, (mm:transpose(2, 3) + b_:reshape(oc, 1)):reshape(y:size())))
    end
    for _, o in ipairs(cases) do unfolded(x, w, b, o) end
    local bf = function(...) return ds.randn(...):astype("bf16") end
    unfolded(bf(3, 1, 28, 28), bf(6, 1, 5, 5), ds.randn(6), { padding = 2 })
    unfolded(bf(2, 6, 14, 14), bf(16, 6, 5, 5), ds.randn(16), {})
    unfolded(bf(2, 3, 11, 9), bf(13, 3, 3, 3), ds.randn(13), { padding = 1 })
    unfolded(bf(1, 64, 3, 200), bf(2, 64, 3, 3), ds.randn(2), { padding = { 0, 1 }, stride = { 1, 3 } })
    unfolded(bf(1, 64, 3, 70), bf(2, 64, 3, 3), ds.randn(2), {})
    -- no input channels: the bias
    local none = ds.conv2d_bf16(bf(2, 0, 5, 5), bf(3, 0, 3, 3), b:narrow(1, 1, 3), { padding = 1 })
    assert.is_true(H.bitwise(none, b:narrow(1, 1, 3):reshape(1, 3, 1, 1):expand(2, 3, 5, 5):contiguous()))
    -- an image alone equals it inside a batch (the images shared among the threads; one image's bands)
    local xb, wb, bb = ds.randn(20, 16, 64, 64):astype("bf16"), ds.randn(8, 16, 3, 3):astype("bf16"), ds.randn(8)
    local yb = ds.conv2d_bf16(xb, wb, bb, { padding = 1 })
    for n = 1, 20, 19 do
      local alone = ds.conv2d_bf16(xb:narrow(1, n, 1), wb, bb, { padding = 1 })
      assert.is_true(H.bitwise(alone, yb:narrow(1, n, 1)))
    end
    H.raises(function() ds.conv2d_bf16(x:astype("f32"), w, b) end, "conv2d_bf16", "input must be bf16")
    H.raises(function() ds.conv2d_bf16(x, w, b:astype("bf16")) end, "conv2d_bf16", "bias must be f32")
    H.raises(function() ds.conv2d_bf16(x, w, b, { groups = 1 }) end, "conv2d_bf16", "groups")
  end)

  it("refuses operands that are not bf16 or do not agree, naming the op", function()
    local a, b = ds.ones(2, 3):astype("bf16"), ds.ones(3, 4):astype("bf16")
    H.raises(function() ds.matmul_bf16(ds.ones(2, 3), b) end, "matmul_bf16", "a must be bf16")
    H.raises(function() ds.matmul_bf16(a, ds.ones(3, 4)) end, "matmul_bf16", "b must be bf16")
    H.raises(function() ds.matmul_bf16(a, ds.ones(4, 4):astype("bf16")) end, "matmul_bf16", "do not agree")
    H.raises(function() ds.matmul_bf16(a, ds.ones(2, 3, 4):astype("bf16")) end, "matmul_bf16", "expected a")
    H.raises(function() ds.matmul_bf16(a, b, { out = 1 }) end, "matmul_bf16", "out")
  end)
end)

-- a small transformer block: linear layers, attention written out, layer_norm, residual adds
local Block = ds.nn.Module:extend("Bf16TestBlock")
function Block:init()
  self.qkv, self.out, self.ff = ds.nn.Linear(16, 48), ds.nn.Linear(16, 16), ds.nn.Linear(16, 16)
  self.norm = ds.nn.LayerNorm(16)
end
function Block:forward(x)   -- x (B, T, 16)
  local q, k, v = unpack(self.qkv(x):chunk(3, -1))
  local att = (q:matmul(k:transpose(-1, -2)) * 0.25):softmax(-1):matmul(v)
  local h = self.norm(x + self.out(att))
  return h + self.ff(h):relu()
end

-- the block as ds.compile {dtype = "bf16"} defines it, written with matmul_bf16: products of bf16 casts, the rest f32
local function emulated(m, x)
  local function mm(a, b) return ds.matmul_bf16(a:astype("bf16"), b:astype("bf16")) end
  local function lin(l, a) return mm(a, l.weight:t()) + l.bias end
  local q, k, v = unpack(lin(m.qkv, x):chunk(3, -1))
  local att = mm((mm(q, k:transpose(-1, -2)) * 0.25):softmax(-1), v)
  local h = m.norm(x + lin(m.out, att))
  return h + lin(m.ff, h):relu()
end

describe("ds.compile {dtype = 'bf16'}", function()
  it("equals the eager form written with matmul_bf16, frozen or not, and after ds.save / ds.load", function()
    ds.manual_seed(7)
    local m = Block()
    m:eval()
    local x = ds.randn(2, 5, 16)
    local want = ds.no_grad(function() return emulated(m, x) end)
    local frozen = ds.compile(m, { ds.spec({ 2, 5, 16 }) }, { dtype = "bf16", freeze = true })
    local live = ds.compile(m, { ds.spec({ 2, 5, 16 }) }, { dtype = "bfloat16" })
    assert.is_true(H.bitwise(frozen(x), want))
    assert.is_true(H.bitwise(live(x), want))
    local f32 = ds.compile(m, { ds.spec({ 2, 5, 16 }) }, { freeze = true })(x)
    assert.is_false(H.bitwise(f32, want))
    local text = tostring(frozen)
    assert.truthy(text:find("matmul_bf16", 1, true))
    assert.truthy(text:find("matmul_bf16_packed(", 1, true))   -- frozen weights packed once
    local saved = tostring(frozen.base)   -- what ds.save writes: the frozen weight stored bf16 (transposed)
    assert.truthy(saved:find("const %%%d+ = [%w_.]+ bf16%(16,48%)"), saved)
    assert.falsy(text:find("= matmul(", 1, true))
    assert.is_true(H.bitwise(ds.compile(m, { dtype = "bf16" })(x), want))   -- the lazy form (traced on call)
    local dir = H.tmp_dir()
    ds.save(frozen, dir .. "/m")
    assert.is_true(H.bitwise(ds.load(dir .. "/m")(x), want))
    -- the C runtime (no Lua) runs the saved plan to the same bits
    local C = require("ds.ffi").C
    local model = C.ds_model_load(dir .. "/m")
    assert(model ~= nil, require("ds.ffi").last_error())
    local out = ds.empty(2, 5, 16)
    local ins, outs = ffi.new("const ds_tensor*[1]", { x._c }), ffi.new("ds_tensor*[1]", { out._c })
    assert.equal(0, C.ds_model_run(model, ins, outs))
    C.ds_model_free(model)
    assert.is_true(H.bitwise(out, want))
    os.execute("rm -rf " .. dir)
  end)

  it("runs a CNN's conv2d (groups 1) as conv2d_bf16 and leaves a grouped one f32", function()
    ds.manual_seed(8)
    local nn = ds.nn
    local m = nn.Sequential(nn.Conv2d(3, 8, 3, { padding = 1 }), nn.ReLU(), nn.Conv2d(8, 8, 3, { groups = 2 }))
    m:eval()
    local x = ds.randn(2, 3, 9, 9)
    local c = ds.compile(m, { ds.spec({ 2, 3, 9, 9 }) }, { dtype = "bf16", freeze = true })
    local h = ds.conv2d_bf16(x:astype("bf16"), m[1].weight:astype("bf16"), m[1].bias, { padding = 1 }):relu()
    assert.is_true(H.bitwise(c(x), ds.no_grad(function() return m[3](h) end)))
    local text = tostring(c)
    assert.truthy(text:find("conv2d_bf16(", 1, true))
    assert.truthy(text:find("= conv2d(", 1, true))   -- the grouped one
  end)

  it("writes out scaled_dot_product_attention (float mask or none) with bf16 products; causal stays f32", function()
    ds.manual_seed(6)
    local q, k, v, m = ds.randn(2, 3, 5, 8), ds.randn(2, 3, 7, 8), ds.randn(2, 3, 7, 4), ds.randn(2, 1, 1, 7)
    local specs = { ds.spec({ 2, 3, 5, 8 }), ds.spec({ 2, 3, 7, 8 }), ds.spec({ 2, 3, 7, 4 }), ds.spec({ 2, 1, 1, 7 }) }
    local function mm(a, b) return ds.matmul_bf16(a:astype("bf16"), b:astype("bf16")) end
    local function attn(q_, k_, v_, m_)
      return ds.F.scaled_dot_product_attention(q_, k_, v_, { mask = m_, scale = 0.3 })
    end
    local c = ds.compile(attn, specs, { dtype = "bf16" })
    local want = mm((mm(q, k:transpose(-1, -2)) * 0.3 + m):softmax(-1), v)
    assert.is_true(H.bitwise(c(q, k, v, m), want))
    local plain = ds.compile(function(q_, k_, v_) return ds.F.scaled_dot_product_attention(q_, k_, v_) end,
      { specs[1], specs[2], specs[3] }, { dtype = "bf16" })
    assert.is_true(H.bitwise(plain(q, k, v), mm((mm(q, k:transpose(-1, -2)) * (1 / math.sqrt(8))):softmax(-1), v)))
    local causal = ds.compile(function(q_, k_, v_) return ds.F.scaled_dot_product_attention(q_, k_, v_,
      { is_causal = true }) end, { specs[1], specs[2], specs[3] }, { dtype = "bf16" })
    assert.truthy(tostring(causal):find("scaled_dot_product_attention(", 1, true))
  end)

  it("leaves a graph without products alone and refuses other dtypes and gradient graphs, naming the option", function()
    local function f(a) return a:softmax(-1) + 1 end
    local c = ds.compile(f, { ds.spec({ 3, 4 }) }, { dtype = "bf16" })
    local x = ds.randn(3, 4)
    assert.is_true(H.bitwise(c(x), f(x)))
    H.raises(function() ds.compile(f, { ds.spec({ 3, 4 }) }, { dtype = "f16" }) end, "compile", "'dtype'", "f16")
    H.raises(function() ds.onnx.export(c, "never_written.onnx") end, "ds.onnx.export", "dtype = 'bf16'", "no ONNX form")
    H.raises(function() ds.compile(f, { ds.spec({ 3, 4 }) }, { dtype = "i8" }) end, "compile", "'dtype'", "ds.quantize")
    H.raises(function() ds.compile(f, { ds.spec({ 3, 4 }) }, { dtype = 3 }) end, "compile", "'dtype'")
    local w = ds.randn(4, 4):requires_grad_()
    local function step(a)
      local loss = a:matmul(w):sum()
      loss:backward()
      return loss
    end
    H.raises(function() ds.compile(step, { ds.spec({ 3, 4 }) }, { dtype = "bf16" }) end, "compile", "inference")
  end)
end)
