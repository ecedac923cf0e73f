-- tests/onnx_quantized_export_spec.lua: ONNX export of int8 models (linear_int8 written out as per-row
-- quantization, QuantizeLinear, MatMulInteger and the f32 dequantization): the exported model passes ONNX's
-- checker and ONNX Runtime (graph optimizations off) gives ds's bits exactly, for a lone op with a dynamic
-- batch and for ds.quantize'd models (dynamic and static, Linear and Conv2d) compiled frozen (ReLU between their
-- layers: ORT's erf is not ds's).
local H = require("helpers")
local ds = require("ds")
local ort = require("onnx.ort")

local dir = H.tmp_dir()
teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

-- exports compiled cg to dir/name.onnx, checks it, and runs each input list of feeds in ORT: the outputs must
-- equal ds's bit for bit
local function same_bits_in_ort(name, cg, feeds)
  local path = dir .. "/" .. name .. ".onnx"
  ds.onnx.export(cg, path)
  assert.equal("ok", ort.check({ path })[path])
  local runs = {}
  for i, x in ipairs(feeds) do runs[i] = { model = path, feeds = { { x = x } } } end
  for i, r in ipairs(ort.run(runs)) do
    assert.is_nil(r.error, r.error)
    local got, want = r.outputs[1][r.names[1]], cg(feeds[i])
    assert.is_true(H.bitwise(got, want), name .. " feed " .. i .. ": max |diff| " ..
      (got - want):abs():max():item())
  end
end

describe("ONNX export of linear_int8", function()
  it("ONNX Runtime gives ds's bits: leading dims, a dynamic batch, zero rows, tiny and wide rows", function()
    ds.manual_seed(4)
    local N, K = 45, 70
    local w = (ds.randn(N, K) * 60):clamp(-127, 127):round():astype("i8")
    local ws, b = ds.rand(N) * 0.01 + 0.0005, ds.randn(N)
    local cg = ds.compile(function(x) return ds.linear_int8(x, w, ws, b) end, { ds.spec({ "n", 3, K }) })
    local x = ds.randn(4, 3, K) * 2
    x[{ 1, 2 }] = 0                        -- an all-zero row: the output is the bias
    x[{ 2, 1 }] = x[{ 2, 1 }]:abs() * 1e3  -- all positive, wide
    x[{ 3, 3 }] = x[{ 3, 3 }] * 1e-30      -- tiny
    x[{ 4, 2 }] = -x[{ 4, 2 }]:abs()       -- all negative
    same_bits_in_ort("lone", cg, { x, ds.randn(1, 3, K), ds.randn(7, 3, K) * 100 })
  end)

  it("a ds.quantize'd model compiled frozen exports with ds's bits", function()
    ds.manual_seed(5)
    local nn = ds.nn
    local m = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    m:eval()
    local cq = ds.quantize(m, { specs = { ds.spec({ "n", 32 }) } })
    same_bits_in_ort("mlp", cq, { ds.randn(5, 32), ds.randn(1, 32) * 4 })
  end)

  it("a model quantized in static mode (QuantizeLinear per tensor) exports with ds's bits", function()
    ds.manual_seed(6)
    local nn = ds.nn
    local m = nn.Sequential(nn.Linear(24, 40), nn.ReLU(), nn.Linear(40, 6))
    m:eval()
    local cq = ds.quantize(m, { mode = "static", calibration = { { ds.randn(16, 24) } },
      specs = { ds.spec({ "n", 24 }) } })
    -- inputs beyond the calibrated range saturate at 0 and 255
    same_bits_in_ort("static", cq, { ds.randn(5, 24), ds.randn(3, 24) * 10 })
  end)

  it("int8 convolutions (dynamic and static; stride, padding, dilation) export with ds's bits", function()
    ds.manual_seed(7)
    local nn = ds.nn
    local m = nn.Sequential(nn.Conv2d(2, 6, 3, { padding = 2, stride = 2 }), nn.ReLU(),
      nn.Conv2d(6, 4, { 3, 2 }, { dilation = { 1, 2 }, padding = { 1, 0 } }))
    m:eval()
    local x = ds.randn(3, 2, 11, 10)
    local zero_image = x * 2
    zero_image[{ 2 }] = 0
    for _, mode in ipairs({ "dynamic", "static" }) do
      local cq = ds.quantize(m, { mode = mode, ops = { "conv2d" }, calibration = { { x } },
        specs = { ds.spec({ "n", 2, 11, 10 }) } })
      same_bits_in_ort("conv_" .. mode, cq, { x, zero_image })
    end
  end)
end)
