# tests/onnx/rnn_control_models.py: writes the ONNX models of tests/onnx_rnn_control_spec.lua into a directory:
# recurrent layers with every attribute (onnx.helper), control flow (If on a runtime scalar, Loop, Scan) and
# PyTorch's exports of nn.LSTM / nn.GRU / nn.RNN (torch.onnx.export, opsets 13 and 17, dynamic batch and
# sequence dims). usage: /usr/bin/python3 tests/onnx/rnn_control_models.py DIR
import sys
import warnings
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(7)
F32, I32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL


def init(name, *shape):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), name)


def const(name, value, dtype=np.int64):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(value, dtype=dtype)))


def save(name, nodes, inputs, outputs, inits=(), opset=14):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(model, "%s/%s.onnx" % (out, name))


def vi(name, dtype, dims):
    return helper.make_tensor_value_info(name, dtype, dims)


# a recurrent layer: op, gates G, hidden H, inputs I, directions D; T the sequence dim (number or name)
def recurrent(name, op, G, H, I, D, T, attrs, lens=False, states=False, peepholes=False, layout=0, N=2):
    xdims = [N, T, I] if layout else [T, N, I]
    sdims = [N, D, H] if layout else [D, N, H]
    inputs = [vi("X", F32, xdims)]
    inits = [init("W", D, G * H, I), init("R", D, G * H, H), init("B", D, 2 * G * H)]
    names = ["X", "W", "R", "B", "", "", "", ""]
    if lens:
        inputs.append(vi("lens", I32, [N]))
        names[4] = "lens"
    if states:
        inputs.append(vi("h0", F32, sdims))
        names[5] = "h0"
        if op == "LSTM":
            inputs.append(vi("c0", F32, sdims))
            names[6] = "c0"
    if peepholes:
        inits.append(init("P", D, 3 * H))
        names[7] = "P"
    while names[-1] == "":
        names.pop()
    outs = ["Y", "Y_h", "Y_c"] if op == "LSTM" else ["Y", "Y_h"]
    node = helper.make_node(op, names, outs, hidden_size=H, layout=layout, **attrs)
    save(name, [node], inputs, [vi(o, F32, None) for o in outs], inits)


for T in (4, "seq"):
    tag = "static" if T == 4 else "dynamic"
    recurrent("lstm_bidirectional_" + tag, "LSTM", 4, 3, 4, 2, T, {"direction": "bidirectional", "clip": 2.5},
              lens=True, states=True, peepholes=True)
    recurrent("lstm_reverse_forget_" + tag, "LSTM", 4, 3, 4, 1, T,
              {"direction": "reverse", "input_forget": 1, "activations": ["HardSigmoid", "Tanh", "ScaledTanh"],
               "activation_alpha": [0.3, 0.8], "activation_beta": [0.4, 1.2]})
    recurrent("gru_bidirectional_" + tag, "GRU", 3, 5, 4, 2, T,
              {"direction": "bidirectional", "linear_before_reset": 1,
               "activations": ["Sigmoid", "Tanh", "HardSigmoid", "Softsign"], "activation_alpha": [0.25],
               "activation_beta": [0.45]}, lens=True, states=True)
    recurrent("gru_reverse_" + tag, "GRU", 3, 5, 4, 1, T, {"direction": "reverse", "clip": 1.5}, states=True)
    recurrent("rnn_reverse_" + tag, "RNN", 1, 4, 3, 1, T,
              {"direction": "reverse", "activations": ["LeakyRelu"], "activation_alpha": [0.2]}, lens=True)
    recurrent("rnn_bidirectional_" + tag, "RNN", 1, 4, 3, 2, T,
              {"direction": "bidirectional", "activations": ["Relu", "Softplus"]}, states=True)
    # layout 1 (which ONNX Runtime does not run) and its layout-0 twin with the same weights, the reference
    for layout, name in ((1, "lstm_batchwise_"), (0, "lstm_batchwise_twin_")):
        rng = np.random.default_rng(11)
        recurrent(name + tag, "LSTM", 4, 3, 4, 2, T, {"direction": "bidirectional"}, lens=True, states=True,
                  layout=layout)
recurrent("lstm_unknown_activation", "LSTM", 4, 3, 4, 1, 4, {"activations": ["Sigmoid", "Gelu", "Tanh"]})

# If on a runtime scalar; the branches read the outer initializer w
w = init("w", 3)
then_g = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["t"])], "then", [], [vi("t", F32, ["n", 3])])
else_g = helper.make_graph([helper.make_node("Sub", ["x", "w"], ["e"]), helper.make_node("Relu", ["e"], ["r"])],
                           "else", [], [vi("r", F32, ["n", 3])])
save("if_runtime", [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
     [vi("x", F32, ["n", 3]), vi("c", BOOL, [])], [vi("y", F32, ["n", 3])], [w], opset=13)

# Loop whose body computes its condition (a while loop): x doubles while sum(x) < limit
body = helper.make_graph([
    helper.make_node("Mul", ["x_in", "two"], ["x_out"]),
    helper.make_node("ReduceSum", ["x_out"], ["s"], keepdims=0),
    helper.make_node("Less", ["s", "limit"], ["cond_out"]),
], "body", [vi("i", I64, []), vi("cond_in", BOOL, []), vi("x_in", F32, ["n"])],
    [vi("cond_out", BOOL, []), vi("x_out", F32, ["n"])],
    [numpy_helper.from_array(np.array(2, np.float32), "two")])
save("loop_while", [helper.make_node("Loop", ["", "c", "x"], ["y"], body=body)],
     [vi("x", F32, ["n"]), vi("c", BOOL, []), vi("limit", F32, [])], [vi("y", F32, ["n"])], opset=13)

# Loop over the rows of x (trip count Shape(x)[0], a dynamic dim): running sum carried, each sum a scan output
body = helper.make_graph([
    helper.make_node("Identity", ["cond_in"], ["cond_out"]),
    helper.make_node("Gather", ["x", "i"], ["row"]),
    helper.make_node("Add", ["acc_in", "row"], ["acc_out"]),
    helper.make_node("Mul", ["acc_out", "acc_out"], ["sq"]),
], "body", [vi("i", I64, []), vi("cond_in", BOOL, []), vi("acc_in", F32, [3])],
    [vi("cond_out", BOOL, []), vi("acc_out", F32, [3]), vi("sq", F32, [3])])
save("loop_rows", [
    helper.make_node("Shape", ["x"], ["shape"]), const("zero", 0), helper.make_node("Gather", ["shape", "zero"], ["m"]),
    helper.make_node("Loop", ["m", "", "acc0"], ["acc", "squares"], body=body),
], [vi("x", F32, ["rows", 3]), vi("acc0", F32, [3])], [vi("acc", F32, [3]), vi("squares", F32, ["rows", 3])],
    opset=13)

# Scan: a state, two scan inputs (axis 1 forward, axis 0 backward), outputs on axis 1 and built backwards
body = helper.make_graph([
    helper.make_node("Add", ["s_in", "a"], ["s1"]),
    helper.make_node("Mul", ["s1", "b"], ["s_out"]),
    helper.make_node("Tanh", ["s_out"], ["y1"]),
    helper.make_node("Sub", ["a", "b"], ["y2"]),
], "body", [vi("s_in", F32, [2]), vi("a", F32, [2]), vi("b", F32, [2])],
    [vi("s_out", F32, [2]), vi("y1", F32, [2]), vi("y2", F32, [2])])
for tag, T in (("static", 5), ("dynamic", "t")):
    save("scan_axes_" + tag, [helper.make_node("Scan", ["s0", "xa", "xb"], ["s", "ya", "yb"], body=body,
                                               num_scan_inputs=2, scan_input_axes=[1, 0],
                                               scan_input_directions=[0, 1], scan_output_axes=[1, 0],
                                               scan_output_directions=[0, 1])],
         [vi("s0", F32, [2]), vi("xa", F32, [2, T]), vi("xb", F32, [T, 2])],
         [vi("s", F32, [2]), vi("ya", F32, [2, T]), vi("yb", F32, [T, 2])], opset=11)

# sequence and optional ops inside the graph (its inputs and outputs tensors)
nodes = [
    const("split", [1, 3]), const("zero", 0),
    helper.make_node("SplitToSequence", ["x", "split"], ["s"], axis=1),
    helper.make_node("Mul", ["x", "x"], ["x2"]),
    helper.make_node("Slice", ["x2", "st", "en", "ax"], ["x2s"]),
    helper.make_node("SequenceInsert", ["s", "x2s", "zero"], ["s2"]),
    helper.make_node("SequenceLength", ["s2"], ["n"]),
    helper.make_node("SequenceErase", ["s2"], ["s3"]),
    helper.make_node("SequenceAt", ["s3", "zero"], ["a"]),
    helper.make_node("ConcatFromSequence", ["s3"], ["c"], axis=0, new_axis=1),
    helper.make_node("SplitToSequence", ["x"], ["s4"], axis=0, keepdims=0),
    helper.make_node("ConcatFromSequence", ["s4"], ["d"], axis=-1),
    helper.make_node("Optional", ["x"], ["o"]),
    helper.make_node("OptionalHasElement", ["o"], ["has"]),
    helper.make_node("OptionalGetElement", ["o"], ["g"]),
    helper.make_node("SequenceConstruct", ["x", "g"], ["sc"]),
    helper.make_node("SequenceMap", ["sc", "y"], ["m"], body=helper.make_graph(
        [helper.make_node("Add", ["p", "q"], ["r"])], "map", [vi("p", F32, None), vi("q", F32, None)],
        [vi("r", F32, None)])),
    helper.make_node("ConcatFromSequence", ["m"], ["f"], axis=0),
]
inits = [numpy_helper.from_array(np.array([v], np.int64), k) for k, v in (("st", 0), ("en", 1), ("ax", 1))]
save("sequences", nodes, [vi("x", F32, [3, 4]), vi("y", F32, [4])],
     [vi("n", I64, []), vi("a", F32, None), vi("c", F32, None), vi("d", F32, None), vi("has", BOOL, []),
      vi("f", F32, None)], inits, opset=17)

# a Loop with a constant trip count that grows a sequence (unrolled: the sequence is a Lua list)
body = helper.make_graph([
    helper.make_node("Identity", ["cond_in"], ["cond_out"]),
    helper.make_node("Add", ["i", "one"], ["end"]),
    helper.make_node("Unsqueeze", ["end", "axes"], ["ends"]),
    helper.make_node("Slice", ["x", "starts", "ends"], ["part"]),
    helper.make_node("SequenceInsert", ["seq_in", "part"], ["seq_out"]),
], "body", [vi("i", I64, []), vi("cond_in", BOOL, []), helper.make_tensor_sequence_value_info("seq_in", F32, None)],
    [vi("cond_out", BOOL, []), helper.make_tensor_sequence_value_info("seq_out", F32, None)],
    [numpy_helper.from_array(np.array(1, np.int64), "one"), numpy_helper.from_array(np.array([0], np.int64), "axes"),
     numpy_helper.from_array(np.array([0], np.int64), "starts")])
save("loop_sequence", [
    const("m", 3), helper.make_node("SequenceEmpty", [], ["empty"]),
    helper.make_node("Loop", ["m", "", "empty"], ["seq"], body=body),
    helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0),
], [vi("x", F32, [5])], [vi("y", F32, [6])], opset=13)

# PyTorch's exports
import torch  # noqa: E402

torch.manual_seed(0)


class Seq(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        if kind == "lstm":
            self.rnn = torch.nn.LSTM(5, 7, num_layers=2, bidirectional=True, batch_first=True)
        elif kind == "gru":
            self.rnn = torch.nn.GRU(5, 6, num_layers=2)
        else:
            self.rnn = torch.nn.RNN(5, 4, bidirectional=True)

    def forward(self, x):
        y, h = self.rnn(x)
        return (y, h[0], h[1]) if self.kind == "lstm" else (y, h)


warnings.simplefilter("ignore")
for opset in (13, 17):
    for kind in ("lstm", "gru", "rnn"):
        names = ["y", "h", "c"] if kind == "lstm" else ["y", "h"]
        dims = {0: "batch", 1: "seq"} if kind == "lstm" else {0: "seq", 1: "batch"}
        torch.onnx.export(Seq(kind).eval(), (torch.randn(3, 4, 5),), "%s/torch_%s%d.onnx" % (out, kind, opset),
                          opset_version=opset, input_names=["x"], output_names=names, dynamic_axes={"x": dims})
