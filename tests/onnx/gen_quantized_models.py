"""tests/onnx/gen_quantized_models.py DIR: quantized ONNX models made with onnx.helper, for
tests/onnx_quantized_import_spec.lua: ONNX Runtime's com.microsoft DynamicQuantizeMatMul and MatMulIntegerToFloat,
and a two-layer MLP quantized as ORT's quantize_dynamic writes it (DynamicQuantizeLinear, MatMulInteger, Cast, the
scales multiplied, Mul, Add: onnxruntime's Python tool is not installed here, so its graph is built by hand).
Weights are drawn from a fixed seed; the inputs are fed by the spec."""
import sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

out = sys.argv[1]
rng = np.random.default_rng(31)
MS = helper.make_opsetid("com.microsoft", 1)


def save(name, nodes, inputs, outputs, inits, ms=False):
    g = helper.make_graph(nodes, name, inputs, outputs, [numpy_helper.from_array(a, n) for n, a in inits])
    ops = [helper.make_opsetid("", 13)] + ([MS] if ms else [])
    m = helper.make_model(g, opset_imports=ops, producer_name="gen_quantized_models")
    m.ir_version = 8
    onnx.save(m, f"{out}/{name}.onnx")


def f32(name, shape): return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def weight_i8(n, k): return rng.integers(-127, 128, size=(k, n)).astype(np.int8)


# DynamicQuantizeMatMul: A (batch, 6, 24) f32, B (24, 16) int8, b_scale per column, bias
save("dqmm_i8", [helper.make_node("DynamicQuantizeMatMul", ["a", "b", "bs", "", "bias"], ["y"],
                                  domain="com.microsoft")],
     [f32("a", ["n", 6, 24])], [f32("y", None)],
     [("b", weight_i8(16, 24)), ("bs", (rng.random(16) * 0.02 + 0.001).astype(np.float32)),
      ("bias", rng.standard_normal(16).astype(np.float32))], ms=True)
# DynamicQuantizeMatMul: B uint8 with a per-tensor scale and zero point, no bias
save("dqmm_u8", [helper.make_node("DynamicQuantizeMatMul", ["a", "b", "bs", "bz"], ["y"], domain="com.microsoft")],
     [f32("a", [5, 20])], [f32("y", None)],
     [("b", rng.integers(0, 256, size=(20, 12)).astype(np.uint8)), ("bs", np.array(0.013, np.float32)),
      ("bz", np.array(121, np.uint8))], ms=True)
# MatMulIntegerToFloat: A uint8 input with its scale and zero point, B int8 per column, bias
save("mmitf", [helper.make_node("MatMulIntegerToFloat", ["a", "b", "as", "bs", "az", "", "bias"], ["y"],
                                domain="com.microsoft")],
     [helper.make_tensor_value_info("a", TensorProto.UINT8, [4, 30])], [f32("y", None)],
     [("b", weight_i8(9, 30)), ("as", np.array(0.05, np.float32)),
      ("bs", (rng.random(9) * 0.02 + 0.001).astype(np.float32)), ("az", np.array(130, np.uint8)),
      ("bias", rng.standard_normal(9).astype(np.float32))], ms=True)


# an MLP x (n, 32) -> Linear(32, 48) -> Relu -> Linear(48, 10), each MatMul as quantize_dynamic writes it
def quantized_matmul(x, w, b, tag, nodes, inits):
    inits += [(f"W{tag}", w), (f"W{tag}_zp", np.array(0, np.int8)),
              (f"W{tag}_scale", np.array(np.abs(w).max() / 127 * 0.01, np.float32)), (f"B{tag}", b)]
    nodes += [
        helper.make_node("DynamicQuantizeLinear", [x], [f"{x}_q", f"{x}_scale", f"{x}_zp"]),
        helper.make_node("MatMulInteger", [f"{x}_q", f"W{tag}", f"{x}_zp", f"W{tag}_zp"], [f"mm{tag}"]),
        helper.make_node("Cast", [f"mm{tag}"], [f"mm{tag}_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", [f"{x}_scale", f"W{tag}_scale"], [f"scale{tag}"]),
        helper.make_node("Mul", [f"mm{tag}_f", f"scale{tag}"], [f"mul{tag}"]),
        helper.make_node("Add", [f"mul{tag}", f"B{tag}"], [f"lin{tag}"]),
    ]
    return f"lin{tag}"


nodes, inits = [], []
h = quantized_matmul("x", weight_i8(48, 32), rng.standard_normal(48).astype(np.float32), "1", nodes, inits)
nodes.append(helper.make_node("Relu", [h], ["h"]))
y = quantized_matmul("h", weight_i8(10, 48), rng.standard_normal(10).astype(np.float32), "2", nodes, inits)
nodes.append(helper.make_node("Identity", [y], ["y"]))
save("mlp_dynamic", nodes, [f32("x", ["n", 32])], [f32("y", None)], inits)
