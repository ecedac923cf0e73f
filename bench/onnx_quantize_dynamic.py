"""bench/onnx_quantize_dynamic.py IN OUT: ONNX Runtime's dynamic quantization of a float model, built with
onnx.helper as onnxruntime.quantization.quantize_dynamic writes it (its Python tool is not installed here):
Transposes of initializers folded first (as its pre-processing's optimizer does), then every MatMul whose B is a
2-D float initializer becomes DynamicQuantizeLinear(A) -> MatMulInteger(A_q, B_q, A_zp, 0) -> Cast -> Mul by
A_scale * B_scale, with B quantized to int8 symmetric per tensor (weight_type QInt8, per_channel False: the
tool's defaults; scale = max|B| / 127, zero point 0). ORT fuses the pattern into its int8 kernels at session
creation (graph optimization "all")."""
import sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

src, dst = sys.argv[1], sys.argv[2]
m = onnx.load(src)
g = m.graph
inits = {i.name: i for i in g.initializer}

# fold Transpose(initializer)
nodes = []
for n in g.node:
    if n.op_type == "Transpose" and n.input[0] in inits:
        a = numpy_helper.to_array(inits[n.input[0]])
        perm = [p for a_ in n.attribute if a_.name == "perm" for p in a_.ints] or list(range(a.ndim))[::-1]
        t = numpy_helper.from_array(np.ascontiguousarray(a.transpose(perm)), n.output[0])
        g.initializer.append(t)
        inits[n.output[0]] = t
    else:
        nodes.append(n)

out, count = [], 0
for n in nodes:
    b = n.input[1] if n.op_type == "MatMul" else None
    if b in inits and inits[b].data_type == TensorProto.FLOAT and len(inits[b].dims) == 2:
        w = numpy_helper.to_array(inits[b])
        scale = np.float32(max(np.abs(w).max(), 1e-8) / 127)
        q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
        a, tag = n.input[0], f"q{count}"
        count += 1
        g.initializer.extend([numpy_helper.from_array(q, f"{tag}_W"), numpy_helper.from_array(scale, f"{tag}_Ws"),
                              numpy_helper.from_array(np.int8(0), f"{tag}_Wz")])
        out += [
            helper.make_node("DynamicQuantizeLinear", [a], [f"{tag}_a", f"{tag}_as", f"{tag}_az"]),
            helper.make_node("MatMulInteger", [f"{tag}_a", f"{tag}_W", f"{tag}_az", f"{tag}_Wz"], [f"{tag}_mm"]),
            helper.make_node("Cast", [f"{tag}_mm"], [f"{tag}_f"], to=TensorProto.FLOAT),
            helper.make_node("Mul", [f"{tag}_as", f"{tag}_Ws"], [f"{tag}_s"]),
            helper.make_node("Mul", [f"{tag}_f", f"{tag}_s"], [n.output[0]]),
        ]
    else:
        out.append(n)
del g.node[:]
g.node.extend(out)
used = {i for n in g.node for i in n.input}
keep = [i for i in g.initializer if i.name in used]
del g.initializer[:]
g.initializer.extend(keep)
onnx.checker.check_model(m)
onnx.save(m, dst)
print(f"{count} MatMuls quantized")
