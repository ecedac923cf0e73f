-- tests/onnx_elementwise_spec.lua: ds.onnx.load of elementwise ops and element types in the forms ONNX's
-- conformance cases leave out (older opsets' attributes, narrow integer and 16-bit float types, Cast's wrapping
-- and rounding, Softmax/Hardmax before opset 13, Dropout's mask, legacy broadcasting). Each model is built by
-- onnx.helper and its expected outputs computed by NumPy (/usr/bin/python3, below); ds runs it eagerly and
-- compiled. (The family's conformance cases run in tests/onnx_conformance_spec.lua.)
local ds = require("ds")
local H = require("helpers")
local proto = require("ds.onnx.proto")
local V = require("ds.onnx.import_values")
local conformance = require("onnx.conformance")

-- writes DIR/<case>/{model.onnx, input_N.pb, output_N.pb}, one case per entry of CASES
local GENERATOR = [==[
import sys, os, numpy as np, onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as TP
out = sys.argv[1]
rng = np.random.default_rng(5)

def f16_bits(a): return a.astype(np.float16).view(np.uint16)
def bf16_round(a):  # float32 -> bfloat16 value (round to nearest even), as float32
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(a), a, r)

def case(name, opset, nodes, inputs, outputs, inits=()):
    """inputs: (name, elem_type, array); outputs: (name, elem_type, expected array as stored)"""
    d = os.path.join(out, name); os.makedirs(d, exist_ok=True)
    g = h.make_graph(nodes, name, [h.make_tensor_value_info(n, t, a.shape) for n, t, a in inputs],
                     [h.make_tensor_value_info(n, t, None) for n, t, _ in outputs], list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    onnx.save(m, os.path.join(d, "model.onnx"))
    for k, (n, t, a) in enumerate(inputs):
        onnx.save_tensor(nh.from_array(a, n), os.path.join(d, "input_%d.pb" % k))
    for k, (n, t, a) in enumerate(outputs):
        onnx.save_tensor(nh.from_array(a, n), os.path.join(d, "output_%d.pb" % k))

F32 = TP.FLOAT
x = rng.standard_normal((2, 3, 4)).astype(np.float32) * 3
N = h.make_node
# Clip before opset 11: bounds as attributes, absent ones the float limits
case("clip_opset6", 6, [N("Clip", ["x"], ["y"], min=-1.0, max=2.0)], [("x", F32, x)], [("y", F32, np.clip(x, -1, 2))])
case("clip_opset6_default", 6, [N("Clip", ["x"], ["y"], min=0.5)], [("x", F32, x)],
     [("y", F32, np.clip(x, 0.5, np.finfo(np.float32).max))])
# Clip 13 with a computed bound and an integer input
xi = rng.integers(-50, 50, (3, 4)).astype(np.int32)
case("clip_int_computed", 13, [N("Neg", ["lo"], ["hi"]), N("Clip", ["x", "lo", "hi"], ["y"])],
     [("x", TP.INT32, xi), ("lo", TP.INT32, np.array(-7, np.int32))], [("y", TP.INT32, np.clip(xi, -7, 7))])
# Softmax, LogSoftmax, Hardmax before opset 13: over the dims from axis on, flattened
def softmax2d(a, axis):
    s = a.reshape(int(np.prod(a.shape[:axis])), -1)
    e = np.exp(s - s.max(1, keepdims=True)); return (e / e.sum(1, keepdims=True)).reshape(a.shape)
def hardmax2d(a, axis):
    s = a.reshape(int(np.prod(a.shape[:axis])), -1)
    r = np.zeros_like(s); r[np.arange(s.shape[0]), s.argmax(1)] = 1; return r.reshape(a.shape)
case("softmax_opset11_axis1", 11, [N("Softmax", ["x"], ["y"])], [("x", F32, x)], [("y", F32, softmax2d(x, 1))])
case("logsoftmax_opset1_axis0", 1, [N("LogSoftmax", ["x"], ["y"], axis=0)], [("x", F32, x)],
     [("y", F32, np.log(softmax2d(x, 0)))])
xt = x.copy(); xt[0, 1, 2] = xt[0].max() + 1; xt[1, 0, 0] = xt[1].max() + 1; xt[1, 2, 3] = xt[1, 0, 0]  # a tie
case("hardmax_opset11_axis1", 11, [N("Hardmax", ["x"], ["y"])], [("x", F32, xt)], [("y", F32, hardmax2d(xt, 1))])
case("hardmax_opset13_axis1", 13, [N("Hardmax", ["x"], ["y"], axis=1)], [("x", F32, xt)],
     [("y", F32, np.moveaxis(hardmax2d(np.moveaxis(xt, 1, -1), 2), -1, 1))])
# opset 6 broadcasting: b aligned with a's dims from axis
b = rng.standard_normal((3,)).astype(np.float32)
case("add_opset6_axis1", 6, [N("Add", ["a", "b"], ["y"], broadcast=1, axis=1)], [("a", F32, x), ("b", F32, b)],
     [("y", F32, x + b[:, None])])
# Dropout's mask (all true when not training), at opset 13 and at opset 7 (the mask has x's type)
case("dropout_mask_opset13", 13, [N("Dropout", ["x", "r", "t"], ["y", "m"])],
     [("x", F32, x), ("r", F32, np.array(0.3, np.float32))], [("y", F32, x), ("m", TP.BOOL, np.ones(x.shape, bool))],
     inits=[nh.from_array(np.array(False), "t")])
case("dropout_mask_opset7", 7, [N("Dropout", ["x"], ["y", "m"], ratio=0.2)], [("x", F32, x)],
     [("y", F32, x), ("m", F32, np.ones(x.shape, np.float32))])
# Gelu (opset 20), Mish (opset 18), Selu with attributes
xs = np.linspace(-6, 6, 25, dtype=np.float32)
import math
erf = np.vectorize(math.erf)
case("gelu_none", 20, [N("Gelu", ["x"], ["y"])], [("x", F32, xs)],
     [("y", F32, (0.5 * xs * (1 + erf(xs / np.sqrt(2)))).astype(np.float32))])
case("gelu_tanh", 20, [N("Gelu", ["x"], ["y"], approximate="tanh")], [("x", F32, xs)],
     [("y", F32, (0.5 * xs * (1 + np.tanh(np.sqrt(2 / np.pi) * (xs + 0.044715 * xs ** 3)))).astype(np.float32))])
case("mish", 18, [N("Mish", ["x"], ["y"])], [("x", F32, xs)], [("y", F32, xs * np.tanh(np.log1p(np.exp(xs))))])
case("selu_attrs", 6, [N("Selu", ["x"], ["y"], alpha=2.0, gamma=3.0)], [("x", F32, xs)],
     [("y", F32, np.where(xs > 0, 3 * xs, 3 * 2 * (np.exp(xs) - 1)).astype(np.float32))])
# PRelu before opset 7: a 1-D slope per channel
xc = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
sl = np.array([0.1, 0.2, 0.3], np.float32)
case("prelu_opset6_channel", 6, [N("PRelu", ["x", "s"], ["y"])], [("x", F32, xc), ("s", F32, sl)],
     [("y", F32, np.where(xc < 0, xc * sl[:, None, None], xc))])
# IsInf detecting neither, Sign and Mod of uint8, integer Div truncating, Pow of an integer base
xf = np.array([np.inf, -np.inf, np.nan, 1.0, -2.0], np.float32)
case("isinf_none", 10, [N("IsInf", ["x"], ["y"], detect_positive=0, detect_negative=0)], [("x", F32, xf)],
     [("y", TP.BOOL, np.zeros(5, bool))])
u = np.array([0, 3, 200, 255], np.uint8)
case("sign_uint8", 13, [N("Sign", ["x"], ["y"])], [("x", TP.UINT8, u)], [("y", TP.UINT8, np.sign(u))])
a64, b64 = np.array([-7, 7, -8, 9, 5], np.int64), np.array([2, -2, 3, -4, 5], np.int64)
case("div_int64_trunc", 14, [N("Div", ["a", "b"], ["y"])], [("a", TP.INT64, a64), ("b", TP.INT64, b64)],
     [("y", TP.INT64, (np.trunc(a64 / b64)).astype(np.int64))])
case("mod_int64_python", 13, [N("Mod", ["a", "b"], ["y"])], [("a", TP.INT64, a64), ("b", TP.INT64, b64)],
     [("y", TP.INT64, np.mod(a64, b64))])
# element types ds widens: INT8/INT16/UINT16 initializers and inputs (i32), UINT32/UINT64 (i64), FLOAT16/BFLOAT16 (f32)
i8 = np.array([-128, -1, 0, 127], np.int8)
u16 = np.array([0, 1, 65535, 40000], np.uint16)
case("int8_uint16_inputs_max", 13, [N("Cast", ["a"], ["a32"], to=TP.INT32), N("Cast", ["b"], ["b32"], to=TP.INT32),
     N("Max", ["a32", "b32", "c"], ["y"])], [("a", TP.INT8, i8), ("b", TP.UINT16, u16)],
     [("y", TP.INT32, np.maximum(np.maximum(i8.astype(np.int32), u16.astype(np.int32)), np.array([5, -5, 5, -5], np.int32)))],
     inits=[nh.from_array(np.array([5, -5, 5, -5], np.int32), "c")])
h16 = np.array([1.5, -2.25, 65504, 6e-8, 0.1], np.float16)
case("float16_initializer", 13, [N("Add", ["x", "w"], ["y"])], [("x", F32, np.ones(5, np.float32))],
     [("y", F32, (1 + h16.astype(np.float32)))], inits=[nh.from_array(h16, "w")])
u64 = np.array([0, 1, 2 ** 40 + 3], np.uint64)
case("uint64_initializer", 13, [N("Cast", ["w"], ["y"], to=TP.INT64)], [], [("y", TP.INT64, u64.astype(np.int64))],
     inits=[nh.from_array(u64, "w")])
bf = TP(name="w", data_type=TP.BFLOAT16, dims=[3], int32_data=[0x3FC0, 0xC010, 0x7F80])  # 1.5, -2.25, inf
case("bfloat16_initializer", 13, [N("Cast", ["w"], ["y"], to=F32)], [], [("y", F32, np.array([1.5, -2.25, np.inf], np.float32))],
     inits=[bf])
# Cast to narrow integers wraps (NumPy's astype), to FLOAT16 / BFLOAT16 rounds (ds's f16 / bf16)
big = np.array([-129, 128, 300, -40000, 70000, 2 ** 33 + 5], np.int64)
for to, npt in ((TP.INT8, np.int8), (TP.UINT8, np.uint8), (TP.INT16, np.int16), (TP.UINT16, np.uint16),
                (TP.UINT32, np.uint32)):
    wide = np.int64 if npt == np.uint32 else np.int32 if npt != np.uint8 else np.uint8
    case("cast_int64_to_" + TP.DataType.Name(to), 13, [N("Cast", ["x"], ["y"], to=to), N("Cast", ["y"], ["z"], to=TP.INT64)],
         [("x", TP.INT64, big)], [("z", TP.INT64, big.astype(npt).astype(np.int64))])
fl = np.array([-3.7, 2.9, 127.5, -0.2], np.float32)
case("cast_float_to_int8", 13, [N("Cast", ["x"], ["y"], to=TP.INT8), N("Cast", ["y"], ["z"], to=TP.INT32)],
     [("x", F32, fl)], [("z", TP.INT32, fl.astype(np.int8).astype(np.int32))])
vals = np.array([1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11, 65519, 65520, 1e-8, 3e-5, -0.1, np.nan], np.float32)
case("cast_float_to_float16_and_back", 13, [N("Cast", ["x"], ["y"], to=TP.FLOAT16), N("Cast", ["y"], ["z"], to=F32)],
     [("x", F32, vals)], [("z", F32, vals.astype(np.float16).astype(np.float32))])
case("cast_int_to_float16", 13, [N("Cast", ["x"], ["y"], to=TP.FLOAT16), N("Cast", ["y"], ["z"], to=F32)],
     [("x", TP.INT64, np.array([2049, 4097, 70000], np.int64))],
     [("z", F32, np.array([2049, 4097, 70000]).astype(np.float16).astype(np.float32))])
case("cast_float_to_bfloat16_and_back", 13, [N("Cast", ["x"], ["y"], to=TP.BFLOAT16), N("Cast", ["y"], ["z"], to=F32)],
     [("x", F32, vals)], [("z", F32, bf16_round(vals))])
case("castlike_float16_initializer", 15, [N("CastLike", ["x", "like"], ["y"]), N("Cast", ["y"], ["z"], to=F32)],
     [("x", F32, vals)], [("z", F32, vals.astype(np.float16).astype(np.float32))],
     inits=[nh.from_array(np.zeros(1, np.float16), "like")])
case("cast_opset1_string_to", 1, [N("Cast", ["x"], ["y"], to="INT32")], [("x", F32, fl)],
     [("y", TP.INT32, fl.astype(np.int32))])
# BitShift of UINT16 (read as i32), BitwiseAnd/Not (opset 18)
s16 = np.array([1, 255, 4096], np.uint16)
case("bitshift_uint16", 11, [N("BitShift", ["x", "n"], ["y"], direction="RIGHT")],
     [("x", TP.UINT16, s16), ("n", TP.UINT16, np.array([1, 4, 12], np.uint16))],
     [("y", TP.INT32, (s16 >> np.array([1, 4, 12], np.uint16)).astype(np.int32))])
ia, ib = rng.integers(-1000, 1000, (3, 4)).astype(np.int32), rng.integers(-1000, 1000, (4,)).astype(np.int32)
case("bitwise_and_not", 18, [N("BitwiseAnd", ["a", "b"], ["c"]), N("BitwiseNot", ["c"], ["y"])],
     [("a", TP.INT32, ia), ("b", TP.INT32, ib)], [("y", TP.INT32, ~(ia & ib))])
]==]

local function read_tensor(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local bytes = f:read("*a")
  f:close()
  return V.tensor(V.tensor_of(proto.decode("TensorProto", bytes, path), path))
end
local function tensors(dir, kind)
  local list = {}
  for k = 0, 100 do
    local t = read_tensor(string.format("%s/%s_%d.pb", dir, kind, k))
    if not t then return list end
    list[#list + 1] = t
  end
end

describe("ds.onnx.load of elementwise forms the conformance cases leave out (NumPy references)", function()
  local dir = H.tmp_dir()
  local script = dir .. "/gen.py"
  H.write_file(script, GENERATOR)
  assert(os.execute("/usr/bin/python3 " .. script .. " " .. dir) == 0, "the model generator failed")
  local names = {}
  for name in io.popen("ls " .. dir):lines() do if name ~= "gen.py" then names[#names + 1] = name end end
  table.sort(names)
  it("builds its cases", function() assert.is_true(#names >= 30) end)
  for _, name in ipairs(names) do
    it(name .. " (eager and compiled)", function()
      local case = dir .. "/" .. name
      local g = ds.onnx.load(case .. "/model.onnx")
      local inputs, want = tensors(case, "input"), tensors(case, "output")
      for _, f in ipairs { g, ds.compile(g, { freeze = true }) } do
        local got = { f(unpack(inputs)) }
        for k, w in ipairs(want) do
          local d = conformance.differs(got[k], w)
          assert(d == nil, string.format("output %d: %s", k, tostring(d)))
        end
      end
    end)
  end
end)

describe("ds.onnx.load refuses what it does not implement", function()
  local dir = H.tmp_dir()
  local function model(opset, node_py, input_py)
    local script = string.format([[
import onnx
from onnx import helper as h, TensorProto as TP
n = %s
g = h.make_graph([n], "g", [%s], [h.make_tensor_value_info("y", TP.FLOAT, None)])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", %d)]), "%s/m.onnx")
]], node_py, input_py, opset, dir)
    H.write_file(dir .. "/m.py", script)
    assert(os.execute("/usr/bin/python3 " .. dir .. "/m.py") == 0)
    return dir .. "/m.onnx"
  end
  local X = 'h.make_tensor_value_info("x", TP.FLOAT, [3])'
  it("Dropout in training mode, and before opset 7 without is_test", function()
    H.raises(function() ds.onnx.load(model(6, 'h.make_node("Dropout", ["x"], ["y"])', X)) end, "is_test = 0")
    -- training_mode as a graph input: the model specializes on its value; training at ratio 0.5 is refused
    local m = ds.onnx.load(model(13, 'h.make_node("Dropout", ["x", "", "t"], ["y"])',
      X .. ', h.make_tensor_value_info("t", TP.BOOL, [])'))
    local x = ds.tensor({ 1, 2, 3 })
    H.raises(function() m(x, ds.tensor(true)) end, "training mode")
    assert.same({ 1, 2, 3 }, m(x, ds.tensor(false)):totable())
  end)
  it("Gelu with an unknown approximation, BitShift with an unknown direction, Cast to STRING", function()
    H.raises(function() ds.onnx.load(model(20, 'h.make_node("Gelu", ["x"], ["y"], approximate="erf")', X)) end,
      "approximate must be")
    H.raises(function()
      ds.onnx.load(model(11, 'h.make_node("BitShift", ["x", "x"], ["y"], direction="UP")',
        'h.make_tensor_value_info("x", TP.UINT8, [3])'))
    end, "LEFT or RIGHT")
    H.raises(function() ds.onnx.load(model(13, 'h.make_node("Cast", ["x"], ["y"], to=TP.STRING)', X)) end,
      "Cast to STRING")
  end)
end)
