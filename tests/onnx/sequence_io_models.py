# tests/onnx/sequence_io_models.py: writes the ONNX models of tests/onnx_sequence_io_spec.lua into a directory
# (graphs with sequence and optional inputs and outputs, built with onnx.helper) and cases.json: for each model,
# calls (input values) and the outputs NumPy computes for them (ONNX Runtime's Node API feeds tensors only).
# A value in cases.json: {"dtype", "shape", "data"} a tensor, {"seq": [values]} a sequence, {"none": true} an
# empty optional. usage: /usr/bin/python3 tests/onnx/sequence_io_models.py DIR
import json
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper

out = sys.argv[1]
rng = np.random.default_rng(11)
F32, I64 = TensorProto.FLOAT, TensorProto.INT64
DTYPE = {np.dtype(np.float32): "f32", np.dtype(np.int64): "i64", np.dtype(np.bool_): "bool"}
cases = []


def tensor_type(elem, dims):
    return helper.make_tensor_type_proto(elem, dims)


def seq_type(elem, dims):
    return helper.make_sequence_type_proto(tensor_type(elem, dims))


def opt_type(inner):
    return helper.make_optional_type_proto(inner)


def save(name, nodes, inputs, outputs, calls, opset=17):
    graph = helper.make_graph(nodes, name, inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, "%s/%s.onnx" % (out, name))
    cases.append({"model": name, "calls": [{"inputs": [enc(v) for v in ins], "outputs": [enc(v) for v in outs]}
                                           for ins, outs in calls]})


# a value as JSON: numpy arrays, lists (sequences), None (an empty optional)
def enc(v):
    if v is None:
        return {"none": True}
    if isinstance(v, list):
        return {"seq": [enc(x) for x in v]}
    return {"dtype": DTYPE[v.dtype], "shape": list(v.shape), "data": v.reshape(-1).tolist()}


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def i64(v):
    return np.array(v, dtype=np.int64)


# ConcatFromSequence of a sequence input: items of different lengths along the concatenated dim
xs3, xs2 = [randn(2, 3), randn(1, 3), randn(4, 3)], [randn(5, 3), randn(2, 3)]
save("seq_concat", [helper.make_node("ConcatFromSequence", ["xs"], ["y"], axis=0)],
     [helper.make_value_info("xs", seq_type(F32, ["n", 3]))], [helper.make_tensor_value_info("y", F32, ["m", 3])],
     [([xs3], [np.concatenate(xs3)]), ([xs2], [np.concatenate(xs2)])])

# SequenceInsert at a position that is a graph input: a sequence output, specialized on the position's value
xs, x = [randn(2), randn(3), randn(1)], randn(4)


def inserted(items, item, pos):
    items = list(items)
    items.insert(pos if pos >= 0 else pos + len(items), item)
    return items


save("seq_insert", [helper.make_node("SequenceInsert", ["xs", "x", "pos"], ["ys"])],
     [helper.make_value_info("xs", seq_type(F32, ["n"])), helper.make_tensor_value_info("x", F32, ["k"]),
      helper.make_tensor_value_info("pos", I64, [])],
     [helper.make_value_info("ys", seq_type(F32, None))],
     [([xs, x, i64(1)], [inserted(xs, x, 1)]), ([xs, x, i64(-1)], [inserted(xs, x, -1)]),
      ([xs[:1], x, i64(0)], [inserted(xs[:1], x, 0)])])

# SequenceMap with two body outputs: each item scaled by a tensor input, and its shape
body = helper.make_graph([helper.make_node("Mul", ["item", "factor"], ["scaled"]),
                          helper.make_node("Shape", ["item"], ["shape"])], "map_body",
                         [helper.make_tensor_value_info("item", F32, None),
                          helper.make_tensor_value_info("factor", F32, [1])],
                         [helper.make_tensor_value_info("scaled", F32, None),
                          helper.make_tensor_value_info("shape", I64, [None])])
xs, s = [randn(2, 3), randn(4), randn(1, 1, 2)], randn(1)
save("seq_map", [helper.make_node("SequenceMap", ["xs", "s"], ["scaled", "shapes"], body=body)],
     [helper.make_value_info("xs", seq_type(F32, None)), helper.make_tensor_value_info("s", F32, [1])],
     [helper.make_value_info("scaled", seq_type(F32, None)), helper.make_value_info("shapes", seq_type(I64, [None]))],
     [([xs, s], [[a * s for a in xs], [i64(a.shape) for a in xs]]), ([[], s], [[], []])])

# an optional tensor input: y = opt + x when it holds a value, else x; and whether it does
then_b = helper.make_graph([helper.make_node("OptionalGetElement", ["opt"], ["v"]), helper.make_node("Add", ["v", "x"],
                                                                                                    ["sum"])],
                           "then_b", [], [helper.make_tensor_value_info("sum", F32, [3])])
else_b = helper.make_graph([helper.make_node("Identity", ["x"], ["same"])], "else_b", [],
                           [helper.make_tensor_value_info("same", F32, [3])])
a, x = randn(3), randn(3)
save("opt_add", [helper.make_node("OptionalHasElement", ["opt"], ["has"]),
                 helper.make_node("If", ["has"], ["y"], then_branch=then_b, else_branch=else_b)],
     [helper.make_value_info("opt", opt_type(tensor_type(F32, [3]))), helper.make_tensor_value_info("x", F32, [3])],
     [helper.make_tensor_value_info("y", F32, [3]), helper.make_tensor_value_info("has", TensorProto.BOOL, [])],
     [([a, x], [a + x, np.array(True)]), ([None, x], [x, np.array(False)])])

# an optional sequence passed through: a list or nothing back, and a sequence output of an optional's value
xs = [randn(2), randn(2)]
save("opt_seq_identity", [helper.make_node("Identity", ["opt"], ["same"])],
     [helper.make_value_info("opt", opt_type(seq_type(F32, [2])))],
     [helper.make_value_info("same", opt_type(seq_type(F32, [2])))],
     [([xs], [xs]), ([None], [None]), ([[]], [[]])])

# SplitToSequence of a plain tensor input: a model with tensor inputs and a sequence output
x = randn(5, 2)
save("split_seq", [helper.make_node("Constant", [], ["split"], value=helper.make_tensor("c", I64, [2], [2, 3])),
                   helper.make_node("SplitToSequence", ["x", "split"], ["parts"], axis=0)],
     [helper.make_tensor_value_info("x", F32, [5, 2])], [helper.make_value_info("parts", seq_type(F32, None))],
     [([x], [[x[:2], x[2:]]])])

# a Loop carrying a sequence, its trip count a graph input (specialized on): ONNX's test_loop13_seq in small
loop_body = helper.make_graph(
    [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
     helper.make_node("Cast", ["i"], ["fi"], to=F32),
     helper.make_node("Mul", ["x", "fi"], ["row"]),
     helper.make_node("SequenceInsert", ["seq_in", "row"], ["seq_out"])], "loop_body",
    [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
     helper.make_value_info("seq_in", seq_type(F32, None))],
    [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
     helper.make_value_info("seq_out", seq_type(F32, None))])
x, start = randn(3), [randn(3)]
save("loop_seq", [helper.make_node("Loop", ["n", "", "seq0"], ["seq"], body=loop_body)],
     [helper.make_tensor_value_info("n", I64, []), helper.make_tensor_value_info("x", F32, [3]),
      helper.make_value_info("seq0", seq_type(F32, [3]))],
     [helper.make_value_info("seq", seq_type(F32, None))],
     [([i64(3), x, start], [start + [x * np.float32(i) for i in range(3)]]), ([i64(1), x, []], [[x * np.float32(0)]])])

with open("%s/cases.json" % out, "w") as f:
    json.dump(cases, f)
