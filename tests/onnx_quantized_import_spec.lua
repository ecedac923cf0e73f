-- tests/onnx_quantized_import_spec.lua: ONNX import of quantized models made with onnx.helper
-- (tests/onnx/gen_quantized_models.py) against ONNX Runtime, eagerly, compiled (freeze) and saved/loaded: the
-- com.microsoft DynamicQuantizeMatMul (int8 and uint8 weights) and MatMulIntegerToFloat, and an MLP quantized as
-- ORT's quantize_dynamic writes it (DynamicQuantizeLinear, MatMulInteger, Cast, Mul, Add), and ds's own f32 export
-- quantized that way by bench/onnx_quantize_dynamic.py (the bench's ORT int8 model). The one-op forms of the
-- standard quantization ops are in tests/onnx_quantize_spec.lua.
local H = require("helpers")
local ds = require("ds")
local one = require("onnx.one_node")
local ort = require("onnx.ort")

local dir = H.tmp_dir()
teardown(function() os.execute("rm -rf '" .. dir .. "'") end)
assert(os.execute(string.format("%s tests/onnx/gen_quantized_models.py '%s'", ort.PYTHON, dir)) == 0 or
  error("tests/onnx/gen_quantized_models.py failed"))

local function randn(seed, ...)
  ds.manual_seed(seed)
  return ds.randn(...)
end

describe("ONNX import of quantized models", function()
  it("com.microsoft DynamicQuantizeMatMul with an int8 weight (per-column scale, bias) and a uint8 one", function()
    one.agrees_feeds(dir .. "/dqmm_i8.onnx", { { { "a", randn(1, 2, 6, 24) * 3 } }, { { "a", randn(2, 1, 6, 24) } } },
      { loaded = dir .. "/dqmm_i8" })
    one.agrees_feeds(dir .. "/dqmm_u8.onnx", { { { "a", randn(3, 5, 20) } }, { { "a", ds.zeros(5, 20) } } })
  end)

  it("com.microsoft MatMulIntegerToFloat with a uint8 input and zero point", function()
    ds.manual_seed(4)
    one.agrees_feeds(dir .. "/mmitf.onnx", { { { "a", ds.randint(0, 256, { 4, 30 }):astype("u8") } } })
  end)

  it("an MLP quantized as ONNX Runtime's quantize_dynamic writes it", function()
    one.agrees_feeds(dir .. "/mlp_dynamic.onnx", { { { "x", randn(5, 3, 32) } }, { { "x", randn(6, 1, 32) * 10 } } },
      { loaded = dir .. "/mlp" })
  end)

  it("ds's f32 export quantized by bench/onnx_quantize_dynamic.py (quantize_dynamic's graph) imports back", function()
    local nn = ds.nn
    ds.manual_seed(8)
    local m = nn.Sequential(nn.Linear(20, 30), nn.Tanh(), nn.Linear(30, 5))
    m:eval()
    local f32_path, int8_path = dir .. "/exported.onnx", dir .. "/exported_int8.onnx"
    ds.onnx.export(ds.trace(m, { ds.spec({ "n", 20 }, "f32", "x") }), f32_path)
    assert(os.execute(string.format("%s bench/onnx_quantize_dynamic.py '%s' '%s' > /dev/null", ort.PYTHON, f32_path,
      int8_path)) == 0)
    local _, count = H.read_file(int8_path):gsub("MatMulInteger", "")
    assert.equal(2, count)   -- one node per Linear
    one.agrees_feeds(int8_path, { { { "x", randn(9, 4, 20) } }, { { "x", randn(10, 1, 20) * 5 } } })
  end)

  it("refuses a com.microsoft op outside its domain and other com.microsoft ops, naming them", function()
    local proto = require("ds.onnx.proto")
    local function model(op, domain)
      local path = string.format("%s/%s_%s.onnx", dir, op, domain == "" and "default" or "ms")
      H.write_file(path, proto.encode("ModelProto", { ir_version = 8,
        opset_import = { { domain = "", version = 13 }, { domain = "com.microsoft", version = 1 } },
        graph = { name = "g", node = { { op_type = op, domain = domain, input = { "a", "b", "s" }, output = { "y" } } },
          input = {}, output = { { name = "y" } } } }))
      return path
    end
    H.raises(function() ds.onnx.load(model("DynamicQuantizeMatMul", "")) end, "DynamicQuantizeMatMul",
      "com.microsoft")
    H.raises(function() ds.onnx.load(model("QOrderedMatMul", "com.microsoft")) end, "QOrderedMatMul",
      "domain 'com.microsoft'")
  end)
end)
