# tests/onnx/exports/handbuilt.py: ONNX graphs built with onnx.helper in the style other converters write
# (paddle2onnx, tf2onnx), for tests/onnx/gen_export_models.py. Each builder returns (model, two feeds {input name: array}).
import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = 13  # what tf2onnx and paddle2onnx write by default for these graphs
F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def _normal(rng, shape, scale):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _init(rng, name, shape, scale=0.3):
    return numpy_helper.from_array(_normal(rng, shape, scale), name)


def _const(name, values, dtype=np.float32):
    return numpy_helper.from_array(np.array(values, dtype=dtype), name)


def _model(name, nodes, inputs, outputs, inits, opsets=None):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    imports = [helper.make_opsetid("", OPSET)] + [helper.make_opsetid(d, v) for d, v in (opsets or [])]
    return helper.make_model(graph, opset_imports=imports, producer_name="ds-tests", ir_version=7)


def _io(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def clip_relu6(rng):
    """paddle2onnx's relu6 and hard_swish: Clip with min and max given as inputs (0-d initializers); Clip with
    only a lower bound and only an upper bound (the other input left empty). x (N, 3, 8, 8)"""
    nodes = [
        helper.make_node("Conv", ["x", "conv.w", "conv.b"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Clip", ["c", "zero", "six"], ["relu6"]),
        helper.make_node("Add", ["relu6", "three"], ["shifted"]),
        helper.make_node("Clip", ["shifted", "zero", "six"], ["clipped"]),
        helper.make_node("Mul", ["relu6", "clipped"], ["prod"]),
        helper.make_node("Div", ["prod", "six"], ["hard_swish"]),
        helper.make_node("Clip", ["c", "zero", ""], ["relu"]),
        helper.make_node("Clip", ["c", "", "three"], ["capped"]),
    ]
    inits = [_init(rng, "conv.w", (8, 3, 3, 3)), _init(rng, "conv.b", (8,)), _const("zero", 0.0),
             _const("three", 3.0), _const("six", 6.0)]
    outs = [_io(n, F32, ["N", 8, 8, 8]) for n in ("hard_swish", "relu", "capped")]
    return _model("clip_relu6", nodes, [_io("x", F32, ["N", 3, 8, 8])], outs, inits), \
        [{"x": _normal(rng, [1, 3, 8, 8], 3.0)}, {"x": _normal(rng, [3, 3, 8, 8], 3.0)}]


def hardsigmoid_se(rng):
    """a squeeze-excite block as paddle2onnx writes it: GlobalAveragePool, 1x1 convs, HardSigmoid (paddle's slope
    0.2, offset 0.5), Mul. x (N, 16, 6, 6)"""
    nodes = [
        helper.make_node("GlobalAveragePool", ["x"], ["pooled"]),
        helper.make_node("Conv", ["pooled", "se1.w", "se1.b"], ["s1"]),
        helper.make_node("Relu", ["s1"], ["r1"]),
        helper.make_node("Conv", ["r1", "se2.w", "se2.b"], ["s2"]),
        helper.make_node("HardSigmoid", ["s2"], ["gate"], alpha=0.2, beta=0.5),
        helper.make_node("Mul", ["x", "gate"], ["y"]),
    ]
    inits = [_init(rng, "se1.w", (4, 16, 1, 1), 1.0), _init(rng, "se1.b", (4,)),
             _init(rng, "se2.w", (16, 4, 1, 1), 2.0), _init(rng, "se2.b", (16,))]
    return _model("hardsigmoid_se", nodes, [_io("x", F32, ["N", 16, 6, 6])], [_io("y", F32, ["N", 16, 6, 6])], inits), \
        [{"x": _normal(rng, [2, 16, 6, 6], 1.0)}, {"x": _normal(rng, [1, 16, 6, 6], 1.0)}]


def resize_scales(rng):
    """Resize with scales: tf2onnx's nearest (asymmetric, floor; roi left empty) and paddle2onnx's bilinear
    (half_pixel; roi an empty initializer). x (N, 4, 5, 5)"""
    nodes = [
        helper.make_node("Resize", ["x", "", "scales2"], ["nearest"], mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Resize", ["x", "roi", "scales15"], ["bilinear"], mode="linear",
                         coordinate_transformation_mode="half_pixel"),
    ]
    inits = [_const("scales2", [1, 1, 2, 2]), _const("scales15", [1, 1, 1.5, 1.5]), _const("roi", np.zeros(0))]
    outs = [_io("nearest", F32, ["N", 4, 10, 10]), _io("bilinear", F32, ["N", 4, 7, 7])]
    return _model("resize_scales", nodes, [_io("x", F32, ["N", 4, 5, 5])], outs, inits), \
        [{"x": _normal(rng, [1, 4, 5, 5], 1.0)}, {"x": _normal(rng, [2, 4, 5, 5], 1.0)}]


def resize_sizes(rng):
    """Resize with sizes computed at run time as tf2onnx writes them (Shape, Slice of N and C, Concat with the
    target size): bilinear with align_corners, bicubic with pytorch_half_pixel. x (N, 4, 5, 6)"""
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Slice", ["shape", "zero", "two"], ["nc"]),
        helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
        helper.make_node("Resize", ["x", "", "", "sizes"], ["linear"], mode="linear",
                         coordinate_transformation_mode="align_corners"),
        helper.make_node("Resize", ["x", "", "", "sizes"], ["cubic"], mode="cubic",
                         coordinate_transformation_mode="pytorch_half_pixel", cubic_coeff_a=-0.75),
    ]
    inits = [_const("zero", [0], np.int64), _const("two", [2], np.int64), _const("hw", [8, 9], np.int64)]
    outs = [_io("linear", F32, ["N", 4, 8, 9]), _io("cubic", F32, ["N", 4, 8, 9])]
    return _model("resize_sizes", nodes, [_io("x", F32, ["N", 4, 5, 6])], outs, inits), \
        [{"x": _normal(rng, [1, 4, 5, 6], 1.0)}, {"x": _normal(rng, [3, 4, 5, 6], 1.0)}]


def nhwc_conv(rng):
    """tf2onnx's NHWC graph: Transpose to NCHW around the convs (explicit pads; stride 2 with auto_pad SAME_UPPER,
    as tf2onnx writes TensorFlow's 'SAME' when it cannot compute the pads), back to NHWC, Reshape (N, -1) with a 0
    entry, MatMul + Add head. x (N, 8, 8, 3) -> (N, 10)"""
    nodes = [
        helper.make_node("Transpose", ["x"], ["nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["nchw", "conv.w", "conv.b"], ["c"], pads=[1, 1, 1, 1], dilations=[1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Conv", ["r", "down.w", "down.b"], ["d"], strides=[2, 2], auto_pad="SAME_UPPER"),
        helper.make_node("Relu", ["d"], ["rd"]),
        helper.make_node("Transpose", ["rd"], ["nhwc"], perm=[0, 2, 3, 1]),
        helper.make_node("Reshape", ["nhwc", "flat"], ["f"]),
        helper.make_node("MatMul", ["f", "dense.w"], ["m"]),
        helper.make_node("Add", ["m", "dense.b"], ["y"]),
    ]
    inits = [_init(rng, "conv.w", (6, 3, 3, 3)), _init(rng, "conv.b", (6,)), _init(rng, "down.w", (6, 6, 4, 4)),
             _init(rng, "down.b", (6,)), _const("flat", [0, -1], np.int64),
             _init(rng, "dense.w", (4 * 4 * 6, 10), 0.1), _init(rng, "dense.b", (10,))]
    return _model("nhwc_conv", nodes, [_io("x", F32, ["N", 8, 8, 3])], [_io("y", F32, ["N", 10])], inits), \
        [{"x": _normal(rng, [2, 8, 8, 3], 1.0)}, {"x": _normal(rng, [1, 8, 8, 3], 1.0)}]


def if_scalar(rng):
    """an If on a runtime scalar, as in voice-activity detectors (a branch per sample rate): the branches read
    outer-scope values (the input and initializers). x (N, 16) f32, sr () int64 -> (N, 8)"""
    then_graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w16k"], ["m16k"]), helper.make_node("Tanh", ["m16k"], ["t_out"])],
        "then", [], [_io("t_out", F32, ["N", 8])])
    else_graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w8k"], ["m8k"]), helper.make_node("Sigmoid", ["m8k"], ["e_out"])],
        "else", [], [_io("e_out", F32, ["N", 8])])
    nodes = [
        helper.make_node("Equal", ["sr", "rate16k"], ["is16k"]),
        helper.make_node("If", ["is16k"], ["branch"], then_branch=then_graph, else_branch=else_graph),
        helper.make_node("Add", ["branch", "bias"], ["y"]),
    ]
    inits = [_init(rng, "w16k", (16, 8)), _init(rng, "w8k", (16, 8)), _init(rng, "bias", (8,)),
             _const("rate16k", 16000, np.int64)]
    ins = [_io("x", F32, ["N", 16]), _io("sr", I64, [])]
    return _model("if_scalar", nodes, ins, [_io("y", F32, ["N", 8])], inits), \
        [{"x": _normal(rng, [2, 16], 1.0), "sr": np.array(16000, np.int64)},
         {"x": _normal(rng, [3, 16], 1.0), "sr": np.array(8000, np.int64)}]


def if_lstm(rng):
    """a voice-activity detector's core as published (silero-style): If on the sample rate, each branch an LSTM
    over the input with its own weights read from the outer scope, initial states given as inputs, the last
    hidden state through a linear head and a sigmoid. x (T, N, 8), h0, c0 (1, N, 16), sr () int64 -> (N, 1)"""
    def branch(tag):
        nodes = [helper.make_node("LSTM", ["x", "w" + tag, "r" + tag, "b" + tag, "", "h0", "c0"],
                                  ["", "h" + tag], hidden_size=16),
                 helper.make_node("Squeeze", ["h" + tag, "axis0"], ["o" + tag])]
        return helper.make_graph(nodes, "rate" + tag, [], [_io("o" + tag, F32, ["N", 16])])

    nodes = [
        helper.make_node("Equal", ["sr", "rate16k"], ["is16k"]),
        helper.make_node("If", ["is16k"], ["h"], then_branch=branch("16k"), else_branch=branch("8k")),
        helper.make_node("MatMul", ["h", "head.w"], ["m"]),
        helper.make_node("Add", ["m", "head.b"], ["logit"]),
        helper.make_node("Sigmoid", ["logit"], ["prob"]),
    ]
    inits = [_const("rate16k", 16000, np.int64), _const("axis0", [0], np.int64),
             _init(rng, "head.w", (16, 1)), _init(rng, "head.b", (1,))]
    for tag in ("16k", "8k"):
        inits += [_init(rng, "w" + tag, (1, 64, 8)), _init(rng, "r" + tag, (1, 64, 16)), _init(rng, "b" + tag, (1, 128))]
    ins = [_io("x", F32, ["T", "N", 8]), _io("h0", F32, [1, "N", 16]), _io("c0", F32, [1, "N", 16]), _io("sr", I64, [])]

    def feed(t, n, rate):
        return {"x": _normal(rng, [t, n, 8], 1.0), "h0": _normal(rng, [1, n, 16], 0.5),
                "c0": _normal(rng, [1, n, 16], 0.5), "sr": np.array(rate, np.int64)}
    return _model("if_lstm", nodes, ins, [_io("prob", F32, ["N", 1])], inits), [feed(5, 2, 16000), feed(9, 1, 8000)]


def unused_opsets(rng):
    """a model importing operator sets no node uses (ai.onnx.ml, com.microsoft, ai.onnx.preview.training), as
    converters write them. x (N, 12) -> (N, 4)"""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["a"]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Softmax", ["r"], ["y"], axis=-1),
    ]
    inits = [_init(rng, "w", (12, 4)), _init(rng, "b", (4,))]
    opsets = [("ai.onnx.ml", 2), ("com.microsoft", 1), ("ai.onnx.preview.training", 1)]
    return _model("unused_opsets", nodes, [_io("x", F32, ["N", 12])], [_io("y", F32, ["N", 4])], inits, opsets), \
        [{"x": _normal(rng, [2, 12], 1.0)}, {"x": _normal(rng, [5, 12], 1.0)}]


BUILDERS = [clip_relu6, hardsigmoid_se, resize_scales, resize_sizes, nhwc_conv, if_scalar, if_lstm, unused_opsets]
