-- tests/onnx_quantize_spec.lua: ONNX import of the quantization ops (QuantizeLinear, DequantizeLinear,
-- DynamicQuantizeLinear, QLinearMatMul, QLinearConv) against ONNX Runtime, eagerly and compiled (freeze):
-- one-op models with uint8 / int8 / int32 values, and QDQ graphs around a MatMul and a Conv as quantization
-- tools write them. int8 results reach ORT's output through a Cast to INT32 (the ORT runner reads no int8).
local H = require("helpers")
local ds = require("ds")
local one = require("onnx.one_node")
local proto = require("ds.onnx.proto")

local dir = H.tmp_dir()
teardown(function() os.execute("rm -rf '" .. dir .. "'") end)

local ELEM = { f32 = 1, u8 = 2, i8 = 3, i32 = 6, i64 = 7, f16 = 10 } -- f16 initializers: their bit patterns
local FIELD = { f32 = "float_data", i64 = "int64_data" } -- others: int32_data

local attribute = one.attribute

--[[ m = {opset, nodes = {{op, inputs, outputs, attrs}, ...}, inits = {{name, type, shape, data}, ...},
  inputs = {{name, tensor}, ...}, outputs = {names}} written as dir/<name>.onnx; the path ]]
local function write_model(name, m)
  local graph = { name = "g", node = {}, input = {}, output = {}, initializer = {} }
  for i, n in ipairs(m.nodes) do
    local attrs = {}
    for k, v in pairs(n[4] or {}) do attrs[#attrs + 1] = attribute(k, v) end
    table.sort(attrs, function(a, b) return a.name < b.name end)
    graph.node[i] = { op_type = n[1], input = n[2], output = n[3], attribute = attrs }
  end
  for i, c in ipairs(m.inits or {}) do
    graph.initializer[i] = { name = c[1], data_type = ELEM[c[2]], dims = c[3], [FIELD[c[2]] or "int32_data"] = c[4] }
  end
  for i, inp in ipairs(m.inputs) do
    local dims = {}
    for j, d in ipairs(inp[2].shape) do dims[j] = { dim_value = d } end
    local tensor_type = { elem_type = ELEM[inp[2].dtype], shape = { dim = dims } }
    graph.input[i] = { name = inp[1], type = { tensor_type = tensor_type } }
  end
  for i, o in ipairs(m.outputs) do graph.output[i] = { name = o } end
  local path = string.format("%s/%s.onnx", dir, name)
  H.write_file(path, proto.encode("ModelProto", { ir_version = m.opset >= 21 and 10 or 8,
    opset_import = { { domain = "", version = m.opset } }, graph = graph }))
  return path
end

-- ds agrees with ORT on model m (write_model's table): integers exactly, floats at 1e-5
local function agrees(name, m)
  one.agrees_at(write_model(name, m), m.inputs, #m.outputs, name, 1e-5, 1e-5)
end

local function randn(shape, seed)
  ds.manual_seed(seed)
  return ds.randn(shape)
end
local function bytes(shape, seed, lo, hi)
  ds.manual_seed(seed)
  return ds.randint(lo or 0, (hi or 255) + 1, shape)
end
local function u8(shape, seed) return bytes(shape, seed):astype("u8") end
local function list(t) return t:reshape(-1):totable() end

describe("ONNX import of QuantizeLinear and DequantizeLinear", function()
  it("quantizes to uint8 per tensor: ties to even, saturation, at opsets 10, 13 and 19", function()
    -- x / 0.5 lands on halves (0.5, 1.5, -2.5, ...) and beyond [0, 255] after the zero point
    local x = ds.tensor({ 0.25, 0.75, -1.25, 1.25, 200, -20, 62.75, -5.25, 0, 3.3, -0.74, 117.6 }):reshape(2, 6)
    for _, opset in ipairs({ 10, 13, 19 }) do
      agrees("quantize_u8_" .. opset, { opset = opset, nodes = { { "QuantizeLinear", { "x", "s", "z" }, { "y" },
        opset >= 19 and { saturate = 1 } or nil } }, inits = { { "s", "f32", {}, { 0.5 } }, { "z", "u8", {}, { 10 } } },
        inputs = { { "x", x } }, outputs = { "y" } })
    end
    agrees("quantize_u8_random", { opset = 13, nodes = { { "QuantizeLinear", { "x", "s", "z" }, { "y" } } },
      inits = { { "s", "f32", { 1 }, { 0.0173 } }, { "z", "u8", { 1 }, { 131 } } },
      inputs = { { "x", randn({ 4, 50 }, 1) } }, outputs = { "y" } })
  end)

  it("quantizes to int8 per axis (negative axis too), and without a zero point to uint8", function()
    local x = randn({ 2, 3, 4 }, 2) * 40
    for _, axis in ipairs({ 1, -2 }) do
      agrees("quantize_i8_axis" .. axis, { opset = 13, nodes = {
        { "QuantizeLinear", { "x", "s", "z" }, { "q" }, { axis = axis } }, { "Cast", { "q" }, { "y" }, { to = 6 } } },
        inits = { { "s", "f32", { 3 }, { 0.5, 0.25, 1.5 } }, { "z", "i8", { 3 }, { -3, 0, 100 } } },
        inputs = { { "x", x } }, outputs = { "y" } })
    end
    agrees("quantize_no_zero", { opset = 13, nodes = { { "QuantizeLinear", { "x", "s" }, { "y" } } },
      inits = { { "s", "f32", {}, { 0.3 } } }, inputs = { { "x", x } }, outputs = { "y" } })
  end)

  it("quantizes and dequantizes with blocked scales (opset 21)", function()
    local x = randn({ 3, 8 }, 3) * 10
    agrees("qdq_blocked", { opset = 21, nodes = {
      { "QuantizeLinear", { "x", "s", "z" }, { "q" }, { axis = 1, block_size = 3 } },
      { "DequantizeLinear", { "q", "s", "z" }, { "y" }, { axis = 1, block_size = 3 } } },
      inits = { { "s", "f32", { 3, 3 }, { 0.1, 0.2, 0.3, 0.05, 0.5, 0.25, 0.4, 0.15, 0.35 } },
        { "z", "i8", { 3, 3 }, { -5, 0, 7, 1, -1, 2, 0, 3, -4 } } },
      inputs = { { "x", x } }, outputs = { "y" } })
  end)

  it("dequantizes uint8 per axis, int8 initializers and int32 values", function()
    agrees("dequantize_u8_axis", { opset = 13, nodes = { { "DequantizeLinear", { "x", "s", "z" }, { "y" },
      { axis = -1 } } }, inits = { { "s", "f32", { 5 }, { 0.5, 0.02, 3, 1, 0.125 } },
      { "z", "u8", { 5 }, { 0, 128, 255, 17, 3 } } }, inputs = { { "x", u8({ 3, 4, 5 }, 4) } }, outputs = { "y" } })
    agrees("dequantize_i8_init", { opset = 13, nodes = {
      { "DequantizeLinear", { "w", "s", "z" }, { "d" }, { axis = 0 } },
      { "Add", { "d", "x" }, { "y" } } },
      inits = { { "w", "i8", { 2, 3 }, { -128, -1, 0, 1, 64, 127 } }, { "s", "f32", { 2 }, { 0.01, 2 } },
        { "z", "i8", { 2 }, { -2, 5 } } }, inputs = { { "x", randn({ 2, 3 }, 5) } }, outputs = { "y" } })
    agrees("dequantize_i32", { opset = 13, nodes = { { "DequantizeLinear", { "x", "s" }, { "y" } } },
      inits = { { "s", "f32", {}, { 0.0007 } } },
      inputs = { { "x", bytes({ 4, 6 }, 6, -100000, 100000):astype("i32") } }, outputs = { "y" } })
  end)

  it("quantizes and dequantizes with float16 scales (opset 19): FLOAT16 quotients and results", function()
    -- scales 0.1, 0.5, 3 as float16 bit patterns; x cast to FLOAT16 first, the result back to FLOAT for ORT's runner
    local scales = { "s", "f16", { 3 }, { 0x2E66, 0x3800, 0x4200 } }
    agrees("qdq_float16", { opset = 19, nodes = { { "Cast", { "x" }, { "h" }, { to = 10 } },
      { "QuantizeLinear", { "h", "s", "z" }, { "q" }, { axis = 0 } },
      { "DequantizeLinear", { "q", "s", "z" }, { "d" }, { axis = 0 } }, { "Cast", { "d" }, { "y" }, { to = 1 } },
      { "Cast", { "q" }, { "yq" }, { to = 6 } } },
      inits = { scales, { "z", "i8", { 3 }, { 3, -7, 0 } } },
      inputs = { { "x", randn({ 3, 40 }, 23) * 12 } }, outputs = { "y", "yq" } })
  end)

  it("refuses the float8 and 4-bit types", function()
    local path = write_model("quantize_float8", { opset = 19, nodes = { { "QuantizeLinear", { "x", "s" }, { "y" },
      { output_dtype = 17 } } }, inits = { { "s", "f32", {}, { 0.5 } } }, inputs = { { "x", randn({ 3 }, 7) } },
      outputs = { "y" } })
    local ok, err = pcall(ds.onnx.load, path)
    assert.is_false(ok)
    assert.matches("QuantizeLinear: quantized type FLOAT8E4M3FN is not supported", err, 1, true)
  end)
end)

describe("ONNX import of DynamicQuantizeLinear", function()
  it("agrees with ONNX Runtime on mixed, all-positive, all-negative and all-zero inputs", function()
    local inputs = { randn({ 3, 5 }, 8), randn({ 7 }, 9):abs() + 0.5, -(randn({ 2, 2 }, 10):abs()) - 1,
      ds.zeros({ 4 }) }
    for i, x in ipairs(inputs) do
      agrees("dynamic_quantize_" .. i, { opset = 11, nodes = { { "DynamicQuantizeLinear", { "x" },
        { "y", "s", "z" } } }, inputs = { { "x", x } }, outputs = { "y", "s", "z" } })
    end
  end)
end)

describe("ONNX import of QLinearMatMul and QLinearConv", function()
  it("QLinearMatMul: uint8 times uint8 per tensor (2-D, batched) and uint8 times int8 per column", function()
    local scalars = { { "as", "f32", {}, { 0.023 } }, { "az", "u8", {}, { 121 } }, { "bs", "f32", {}, { 0.0091 } },
      { "bz", "u8", {}, { 130 } }, { "ys", "f32", {}, { 0.07 } }, { "yz", "u8", {}, { 119 } } }
    local ins = { "a", "as", "az", "b", "bs", "bz", "ys", "yz" }
    agrees("qlinear_matmul_batched", { opset = 10, nodes = { { "QLinearMatMul", ins, { "y" } } }, inits = scalars,
      inputs = { { "a", u8({ 2, 3, 6 }, 11) }, { "b", u8({ 2, 6, 4 }, 12) } }, outputs = { "y" } })
    agrees("qlinear_matmul_per_column", { opset = 21, nodes = { { "QLinearMatMul", ins, { "y" } } },
      inits = { scalars[1], scalars[2], { "b", "i8", { 6, 4 }, list(bytes({ 24 }, 13, -127, 127)) },
        { "bs", "f32", { 4 }, { 0.01, 0.02, 0.005, 0.03 } }, { "bz", "i8", { 4 }, { 0, 0, 0, 0 } },
        scalars[5], scalars[6] },
      inputs = { { "a", u8({ 5, 6 }, 14) } }, outputs = { "y" } })
  end)

  it("QLinearConv: int8 per-channel weights, int32 bias, pads, strides, groups; uint8 per tensor", function()
    local ins = { "x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b" }
    agrees("qlinear_conv_per_channel", { opset = 10, nodes = { { "QLinearConv", ins, { "y" },
      { pads = { 1, 0, 1, 2 }, strides = { 2, 1 }, group = 2 } } },
      inits = { { "xs", "f32", {}, { 0.02 } }, { "xz", "u8", {}, { 128 } },
        { "w", "i8", { 6, 2, 3, 3 }, list(bytes({ 108 }, 15, -127, 127)) },
        { "ws", "f32", { 6 }, { 0.003, 0.004, 0.0025, 0.006, 0.001, 0.005 } },
        { "wz", "i8", { 6 }, { 0, 0, 0, 0, 0, 0 } },
        { "ys", "f32", {}, { 0.05 } }, { "yz", "u8", {}, { 100 } },
        { "b", "i32", { 6 }, { 100, -2000, 0, 35000, -7, 512 } } },
      inputs = { { "x", u8({ 1, 4, 7, 6 }, 16) } }, outputs = { "y" } })
    agrees("qlinear_conv_u8", { opset = 10, nodes = { { "QLinearConv", { "x", "xs", "xz", "w", "ws", "wz", "ys", "yz" },
      { "y" }, { auto_pad = "SAME_UPPER" } } },
      inits = { { "xs", "f32", {}, { 0.01 } }, { "xz", "u8", {}, { 7 } }, { "ws", "f32", {}, { 0.004 } },
        { "wz", "u8", {}, { 140 } }, { "ys", "f32", {}, { 0.03 } }, { "yz", "u8", {}, { 90 } } },
      inputs = { { "x", u8({ 2, 3, 5, 5 }, 17) }, { "w", u8({ 2, 3, 2, 2 }, 18) } }, outputs = { "y" } })
  end)
end)

-- QLinearMatMul with per-row scales and zero points of a (2-D: an M-vector; N-D: (..., M, 1)), which ONNX
-- Runtime refuses: NumPy's reference (ONNX's: exact int32 accumulation times the f32 multiplier, in f64)
local PER_ROW_REFERENCE = [[
import numpy as np, json, sys
rng = np.random.default_rng(0)
out = []
for shape_a, rows in [((3, 4), (3,)), ((2, 3, 4), (2, 3, 1))]:
    a = rng.integers(0, 256, shape_a).astype(np.uint8)
    b = rng.integers(0, 256, (4, 2)).astype(np.uint8)
    a_scale = (rng.random(rows) * 0.05 + 0.005).astype(np.float32)
    a_zero = rng.integers(0, 256, rows).astype(np.uint8)
    col = (lambda v: v.reshape(-1, 1)) if len(rows) == 1 else (lambda v: v)
    acc = np.matmul(a.astype(np.int32) - col(a_zero).astype(np.int32), b.astype(np.int32) - np.int32(120))
    y = np.clip(np.round(acc * (col(a_scale) * np.float32(0.013) / np.float32(0.2)) + 100), 0, 255)
    out.append(dict(a=a.tolist(), b=b.tolist(), a_scale=a_scale.tolist(), a_zero=a_zero.tolist(),
                    y=y.astype(np.uint8).tolist(), shape_a=shape_a, rows=rows))
json.dump(out, sys.stdout)
]]

describe("ONNX import of QLinearMatMul with per-row quantization of a", function()
  it("equals NumPy's reference (2-D and batched)", function()
    local script = dir .. "/per_row.py"
    H.write_file(script, PER_ROW_REFERENCE)
    local p = assert(io.popen("env -u LD_PRELOAD /usr/bin/python3 " .. script))
    local cases = require("cjson").decode(p:read("*a"))
    p:close()
    local function flat(v, out)
      out = out or {}
      if type(v) == "table" then for _, x in ipairs(v) do flat(x, out) end else out[#out + 1] = v end
      return out
    end
    for i, c in ipairs(cases) do
      local a = ds.tensor(flat(c.a), { dtype = "u8" }):reshape(c.shape_a)
      local b = ds.tensor(flat(c.b), { dtype = "u8" }):reshape(4, 2)
      local path = write_model("qlinear_matmul_per_row_" .. i, { opset = 10, nodes = { { "QLinearMatMul",
        { "a", "as", "az", "b", "bs", "bz", "ys", "yz" }, { "y" } } },
        inits = { { "as", "f32", c.rows, flat(c.a_scale) }, { "az", "u8", c.rows, flat(c.a_zero) },
          { "bs", "f32", {}, { 0.013 } }, { "bz", "u8", {}, { 120 } }, { "ys", "f32", {}, { 0.2 } },
          { "yz", "u8", {}, { 100 } } }, inputs = { { "a", a }, { "b", b } }, outputs = { "y" } })
      local g = ds.onnx.load(path)
      for _, run in ipairs({ g, ds.compile(g, { freeze = true }) }) do
        local y = run(a, b)
        assert.equal("u8", y.dtype)
        assert.same(flat(c.y), y:reshape(-1):totable())
      end
    end
  end)
end)

describe("ONNX import of QDQ graphs", function()
  -- x quantized to uint8 and back, as quantization tools place QDQ pairs on activations
  local function qdq(x, s, z, out)
    return { "QuantizeLinear", { x, s, z }, { x .. "_q" } }, { "DequantizeLinear", { x .. "_q", s, z }, { out } }
  end
  -- the f32 bias scale x_scale * w_scale of each channel, rounded to f32 as ORT's tools compute it
  local function bias_scale(xs, ws) return list(ds.tensor(ws, { dtype = "f32" }) * xs) end

  it("a MatMul with int8 per-column weights and a bias, activations uint8", function()
    local qx, dx = qdq("x", "xs", "xz", "xd")
    local qy, dy = qdq("m", "ys", "yz", "y")
    local ws = { 0.011, 0.007, 0.02, 0.004, 0.015 }
    agrees("qdq_matmul", { opset = 13, nodes = { qx, dx,
      { "DequantizeLinear", { "w", "ws", "wz" }, { "wd" }, { axis = 1 } },
      { "MatMul", { "xd", "wd" }, { "mm" } }, { "Add", { "mm", "bias" }, { "m" } }, qy, dy },
      inits = { { "xs", "f32", {}, { 0.03 } }, { "xz", "u8", {}, { 128 } }, { "ys", "f32", {}, { 0.05 } },
        { "yz", "u8", {}, { 110 } }, { "w", "i8", { 8, 5 }, list(bytes({ 40 }, 19, -127, 127)) },
        { "ws", "f32", { 5 }, ws }, { "wz", "i8", { 5 }, { 0, 0, 0, 0, 0 } },
        { "bias", "f32", { 5 }, { 0.1, -0.2, 0.3, 0, 1 } } },
      inputs = { { "x", randn({ 3, 8 }, 20) } }, outputs = { "y" } })
  end)

  it("a Conv with int8 per-channel weights and an int32 bias, then Relu, activations uint8", function()
    local qx, dx = qdq("x", "xs", "xz", "xd")
    local qy, dy = qdq("r", "ys", "yz", "y")
    local ws = { 0.004, 0.006, 0.003, 0.005 }
    agrees("qdq_conv", { opset = 13, nodes = { qx, dx,
      { "DequantizeLinear", { "w", "ws", "wz" }, { "wd" }, { axis = 0 } },
      { "DequantizeLinear", { "b", "bs" }, { "bd" }, { axis = 0 } },
      { "Conv", { "xd", "wd", "bd" }, { "c" }, { pads = { 1, 1, 1, 1 } } }, { "Relu", { "c" }, { "r" } }, qy, dy },
      inits = { { "xs", "f32", {}, { 0.025 } }, { "xz", "u8", {}, { 128 } }, { "ys", "f32", {}, { 0.02 } },
        { "yz", "u8", {}, { 0 } }, { "w", "i8", { 4, 3, 3, 3 }, list(bytes({ 108 }, 21, -127, 127)) },
        { "ws", "f32", { 4 }, ws }, { "wz", "i8", { 4 }, { 0, 0, 0, 0 } },
        { "b", "i32", { 4 }, { 40, -300, 0, 1200 } }, { "bs", "f32", { 4 }, bias_scale(0.025, ws) } },
      inputs = { { "x", randn({ 2, 3, 8, 8 }, 22) } }, outputs = { "y" } })
  end)
end)
