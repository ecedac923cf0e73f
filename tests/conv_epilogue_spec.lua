-- tests/conv_epilogue_spec.lua: compiled graphs run the elementwise chain after a conv2d (relu, relu6 / clamp,
-- hardswish, a bias, a residual add) as `conv2d_ep`, the conv kernel with the chain applied to its output: the
-- printed IR shows it, `epilogue = false` turns it off, and the values are the unfused graph's bit for bit
-- (general, stride 2, depthwise and grouped convs, on one thread and several; f32 and f64; PyTorch's
-- MobileNet-style export). The chain runs on each block of output as the kernel writes it (src/conv_ep.h).
local ds = require("ds")
local H = require("helpers")
local F = ds.nn.functional

-- { name, N, C, H, W, OC, K, stride, padding, groups }
local CONVS = {
  { "3x3 stride 1", 2, 4, 9, 9, 8, 3, 1, 1, 1 },
  { "3x3 stride 2", 1, 3, 15, 14, 6, 3, 2, 1, 1 },
  { "1x1 pointwise", 1, 16, 7, 7, 24, 1, 1, 0, 1 },
  { "depthwise 3x3 stride 2", 2, 8, 10, 11, 8, 3, 2, 1, 8 },
  { "depthwise 5x5 multiplier 2", 1, 4, 9, 9, 8, 5, 1, 2, 4 },
  { "grouped", 1, 8, 8, 8, 12, 3, 1, 1, 4 },
  -- big enough for the kernels' threads: blocks written (and the chain run) on each thread
  { "3x3 stride 1, 4 images", 4, 16, 16, 16, 32, 3, 1, 1, 1 },
  { "3x3 stride 2, 4 images", 4, 16, 18, 18, 32, 3, 2, 1, 1 },
  { "depthwise 3x3, 4 images", 4, 32, 20, 20, 32, 3, 1, 1, 32 },
  -- batch 1 on the direct path, where a lone hardswish runs in the kernel's tiles (or as it puts out the columns):
  -- rows of 48 outputs from 49-wide phase rows (MobileNet's stem), 1x1 written in place, 1x1 put out; then one
  -- image over SPLIT_MIN shared by the threads, by output rows, in place, by row tiles put out
  { "stem: 3x3 stride 2, batch 1", 1, 3, 96, 96, 16, 3, 2, 1, 1 },
  { "1x1 on 8x8 maps, written in place", 1, 16, 8, 8, 24, 1, 1, 0, 1 },
  { "1x1 80 -> 96 on 6x6 maps, columns put out", 1, 80, 6, 6, 96, 1, 1, 0, 1 },
  { "3x3 stride 2 at 128x192, split by output rows", 1, 3, 128, 192, 16, 3, 2, 1, 1 },
  { "1x1 64 -> 64 on 32x32 maps, split, in place", 1, 64, 32, 32, 64, 1, 1, 0, 1 },
  { "3x3 on 29x29 maps, split by row tiles, put out", 1, 32, 29, 29, 48, 3, 1, 1, 1 },
}

-- chain(y, extra): the elementwise chain after the conv; extra is a tensor shaped like the output (residual) or
-- per channel (bias), made by make(oc, out_shape)
local CHAINS = {
  { "relu", function(y) return F.relu(y) end },
  { "relu6 (Clip 0, 6)", function(y) return y:clamp(0, 6) end },
  { "F.relu6 (hardtanh: masks and where)", function(y) return F.relu6(y) end },
  { "clamp", function(y) return y:clamp(-0.5, 0.5) end },
  { "hardswish", function(y) return F.hardswish(y) end },
  { "bias + relu", function(y, e) return F.relu(y + e) end, function(oc) return ds.randn(oc, 1, 1) end },
  { "residual + relu", function(y, e) return F.relu(y + e) end, function(_, shape) return ds.randn(unpack(shape)) end },
}

local function ops_of(cg)
  local s = tostring(cg)
  return s, select(2, s:gsub("conv2d_ep%(", ""))
end

-- compiled with and without the epilogue and eagerly: all three bit for bit; the epilogue visible in the IR
local function check(f, args, what)
  local cg, plain = ds.compile(f, args), ds.compile(f, args, { epilogue = false })
  local s, n = ops_of(cg)
  assert(n == 1, what .. ": no conv2d_ep in\n" .. s)
  assert.equal(0, select(2, ops_of(plain)), what .. ": epilogue = false still fuses")
  local y, y0, ye = cg(unpack(args)), plain(unpack(args)), f(unpack(args))
  assert(H.bitwise(y, y0), what .. ": compiled with the epilogue differs from without")
  assert(H.bitwise(y, ye), what .. ": compiled differs from eager")
  return s
end

describe("conv2d epilogues", function()
  for _, c in ipairs(CONVS) do
    local name, N, C, Hh, W, OC, K, s, p, G = unpack(c)
    for _, chain in ipairs(CHAINS) do
      it(name .. " + " .. chain[1] .. ": bitwise equal to the unfused graph", function()
        ds.manual_seed(5)
        local x, w, b = ds.randn(N, C, Hh, W), ds.randn(OC, C / G, K, K), ds.randn(OC)
        local conv = function(x_, w_, b_) return F.conv2d(x_, w_, b_, { stride = s, padding = p, groups = G }) end
        local shape = conv(x, w, b).shape
        local e = chain[3] and chain[3](OC, shape)
        if e then
          check(function(x_, w_, b_, e_) return chain[2](conv(x_, w_, b_), e_) end, { x, w, b, e }, name)
        else
          check(function(x_, w_, b_) return chain[2](conv(x_, w_, b_)) end, { x, w, b }, name)
        end
      end)
    end
  end

  it("hardswish in the direct kernel: special values (+-inf, NaN, -3, +-0, huge) as the unfused graph", function()
    local vals = { 1 / 0, -1 / 0, 0 / 0, -3, 3, -0.0, 0, -2.9999998, 3.0000002, 1e38, -1e38, 1e-40, 0.5, -0.5, 6, -6 }
    -- a 1x1 conv with weights 1 and bias 0 passes the values through (fma(1, v, +0), then + 0)
    for _, hw in ipairs({ { 16, 16 }, { 6, 6 }, { 1, 48 } }) do
      local n = hw[1] * hw[2]
      local data = {}
      for i = 1, n do data[i] = vals[(i - 1) % #vals + 1] end
      local x = ds.tensor(data):reshape(1, 1, hw[1], hw[2])
      local w, b = ds.ones(8, 1, 1, 1), ds.zeros(8)
      local f = function(x_, w_, b_) return F.hardswish(F.conv2d(x_, w_, b_)) end
      check(f, { x, w, b }, "special values " .. hw[1] .. "x" .. hw[2])
    end
    -- and through a 3x3 stride-2 conv without bias: rows of 48 outputs (the stem's tiles), specials in row 1
    ds.manual_seed(4)
    local data = (ds.randn(96 * 96) * 4):totable()
    for i, v in ipairs(vals) do data[2 * i] = v end
    check(function(x_, w_) return F.hardswish(F.conv2d(x_, w_, nil, { stride = 2, padding = 1 })) end,
      { ds.tensor(data):reshape(1, 1, 96, 96), ds.randn(16, 1, 3, 3) }, "special values, stride 2")
    -- and a depthwise 3x3 stride-2 conv (its AVX-512 planes apply the hardswish): 16 + 4 output columns
    local dw = (ds.randn(4 * 20 * 40) * 4):totable()
    for i, v in ipairs(vals) do dw[3 * i] = v; dw[800 + 2 * i] = v end
    check(function(x_, w_, b_) return F.hardswish(F.conv2d(x_, w_, b_, { stride = 2, padding = 1, groups = 4 })) end,
      { ds.tensor(dw):reshape(1, 4, 20, 40), ds.randn(4, 1, 3, 3), ds.randn(4) }, "special values, depthwise")
  end)

  it("f64 and a conv without bias: the same bits too, the chain shown in the printed IR", function()
    ds.manual_seed(6)
    local x, w = ds.randn(1, 4, 8, 8, { dtype = "f64" }), ds.randn(6, 4, 3, 3, { dtype = "f64" })
    local s = check(function(x_, w_) return F.hardswish(F.conv2d(x_, w_, nil, { padding = 1 })) end, { x, w }, "f64")
    assert.truthy(s:find("conv2d_ep(", 1, true) and s:find("epilogue=[", 1, true))
  end)

  it("the region after a matmul grows the same way: F.relu6 after a product becomes one matmul_ep", function()
    ds.manual_seed(9)
    local x, w, b = ds.randn(8, 16), ds.randn(16, 32), ds.randn(32)
    local f = function(x_) return F.relu6(x_:matmul(w) + b) end
    local cg, plain = ds.compile(f, { x }), ds.compile(f, { x }, { epilogue = false })
    assert.equal(1, select(2, tostring(cg):gsub("matmul_ep%[", "")), tostring(cg))
    assert(H.bitwise(cg(x), plain(x)) and H.bitwise(cg(x), f(x)))
  end)

  it("a conv whose output is also used elsewhere keeps its plain kernel", function()
    local x, w, b = ds.randn(1, 2, 5, 5), ds.randn(3, 2, 3, 3), ds.randn(3)
    local f = function(x_, w_, b_) local y = F.conv2d(x_, w_, b_); return F.relu(y), y end
    local cg = ds.compile(f, { x, w, b })
    assert.equal(0, select(2, ops_of(cg)))
    local a, a2 = cg(x, w, b)
    local e, e2 = f(x, w, b)
    assert(H.bitwise(a, e) and H.bitwise(a2, e2))
  end)

  it("a saved plan (ds.save) runs conv2d_ep in C (src/model.c) with the compiled graph's bits", function()
    local ffi = require("ffi")
    local C = require("ds.ffi").C
    ds.manual_seed(8)
    local x, w, b, r = ds.randn(2, 4, 9, 9), ds.randn(8, 4, 3, 3), ds.randn(8), ds.randn(2, 8, 9, 9)
    local cg = ds.compile(function(x_, r_) return F.relu(F.conv2d(x_, w, b, { padding = 1 }) + r_) end, { x, r })
    assert.equal(1, select(2, ops_of(cg)))
    local path = H.tmp_dir() .. "/conv_ep"
    ds.save(cg, path)
    local m = C.ds_model_load(path)
    assert.truthy(m ~= nil, ffi.string(C.ds_last_error()))
    local y = ds.empty(2, 8, 9, 9)
    local rc = C.ds_model_run(m, ffi.new("const ds_tensor*[2]", { x._c, r._c }), ffi.new("ds_tensor*[1]", { y._c }))
    C.ds_model_free(m)
    assert.equal(0, rc)
    assert(H.bitwise(y, cg(x, r)))
  end)

  local torch = os.execute("env -u LD_PRELOAD /usr/bin/python3 -c 'import torch' 2>/dev/null") == 0
  local mobilenet = torch and it or pending
  mobilenet("PyTorch's MobileNet-style export (bench/torch_exports.py): frozen, with and without epilogues", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("env -u LD_PRELOAD /usr/bin/python3 bench/torch_exports.py " .. dir .. " >/dev/null 2>&1") == 0)
    local g = ds.onnx.load(dir .. "/mobilenet.onnx")
    ds.manual_seed(7)
    local x = ds.randn(1, 3, 96, 96)
    local cg = ds.compile(g, { freeze = true })
    local plain = ds.compile(g, { freeze = true, epilogue = false })
    local s, n = ops_of(cg)
    assert(n >= 5, "few conv epilogues in\n" .. s)
    assert.equal(0, select(2, ops_of(plain)))
    assert(H.bitwise(cg(x), plain(x)))
    os.execute("rm -rf " .. dir)
  end)
end)
