# tests/onnx/gen_export_models.py: the models of tests/onnx_exports_spec.lua, built at test time: everyday
# PyTorch models (tests/onnx/exports/torch_models.py) exported by torch.onnx.export at opsets 13 and 17 with
# dynamic batch / sequence dims, and hand-built graphs in other converters' style (tests/onnx/exports/handbuilt.py),
# each with two feeds of different batch / sequence sizes and, for PyTorch models, PyTorch's outputs on them.
# usage: /usr/bin/python3 tests/onnx/gen_export_models.py OUT_DIR
#   writes OUT_DIR/<name>.onnx and OUT_DIR/manifest.json:
#   {"models": [{"name", "file", "source": "torch" | "handbuilt",
#                "feeds": [{"inputs": [{"name", "dtype", "shape", "data"}], "torch": [{"dtype", "shape", "data"}]}]}]}
import json
import os
import sys

import numpy as np
import onnx
import torch

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "exports"))
import handbuilt  # noqa: E402
import torch_models as tm  # noqa: E402

DTYPES = {"float32": "f32", "int64": "i64", "bool": "bool"}


def as_json(name, a):
    a = np.asarray(a)
    entry = {"dtype": DTYPES[str(a.dtype)], "shape": list(a.shape), "data": a.reshape(-1).tolist()}
    if name is not None:
        entry["name"] = name
    return entry


def ids(g, shape, vocab=40):
    return torch.randint(0, vocab, shape, generator=g)


def normal(g, shape):
    return torch.randn(shape, generator=g)


def bert_feed(g, batch, seq):
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[-1, seq - 2:] = 0  # the last sequence padded
    return ids(g, (batch, seq), 60), mask


def gather_feed(g, batch, seq):
    return normal(g, (batch, seq)), torch.randint(0, seq, (batch, 3), generator=g)


BATCH = {0: "batch"}
BATCH_SEQ = {0: "batch", 1: "seq"}
# name, model class, input names, output names, dynamic axes, feeds(generator) -> two input tuples, opsets
TORCH = [
    ("mobilenet", tm.MobileNetBlock, ["x"], ["logits"], {"x": BATCH, "logits": BATCH},
     lambda g: [(normal(g, (1, 3, 16, 16)),), (normal(g, (3, 3, 16, 16)),)], (13, 17)),
    ("unet_decoder", tm.UNetDecoder, ["bottom", "skip1", "skip2"], ["mask"],
     {"bottom": BATCH, "skip1": BATCH, "skip2": BATCH, "mask": BATCH},
     lambda g: [tuple(normal(g, (b, c, s, s)) for c, s in ((32, 4), (16, 8), (8, 16))) for b in (1, 2)], (13, 17)),
    ("lstm_classifier", tm.LSTMClassifier, ["ids"], ["logits"], {"ids": BATCH_SEQ, "logits": BATCH},
     lambda g: [(ids(g, (2, 5)),), (ids(g, (3, 9)),)], (13, 17)),
    ("gru_classifier", tm.GRUClassifier, ["ids"], ["logits"], {"ids": BATCH_SEQ, "logits": BATCH},
     lambda g: [(ids(g, (2, 5)),), (ids(g, (3, 9)),)], (13, 17)),
    ("keyword_spotter", tm.KeywordSpotter, ["feats"], ["log_probs"],
     {"feats": {0: "batch", 2: "time"}, "log_probs": BATCH},
     lambda g: [(normal(g, (2, 10, 16)),), (normal(g, (3, 10, 25)),)], (13, 17)),
    ("crnn_ocr", tm.CRNN, ["image"], ["log_probs", "best"],
     {"image": {0: "batch", 3: "width"}, "log_probs": {0: "steps", 1: "batch"}, "best": {0: "steps", 1: "batch"}},
     lambda g: [(normal(g, (1, 1, 8, 16)),), (normal(g, (2, 1, 8, 28)),)], (13, 17)),
    # torch 1.13 exports torch.triu from opset 14 (Trilu) only: opsets 14 and 17
    ("causal_transformer", tm.CausalTransformer, ["ids"], ["logits", "top_values", "top_indices"],
     {"ids": BATCH_SEQ, "logits": BATCH_SEQ, "top_values": BATCH, "top_indices": BATCH},
     lambda g: [(ids(g, (1, 6)),), (ids(g, (2, 11)),)], (14, 17)),
    ("bert_classifier", tm.BertClassifier, ["input_ids", "attention_mask"], ["logits", "labels"],
     {"input_ids": BATCH_SEQ, "attention_mask": BATCH_SEQ, "logits": BATCH, "labels": BATCH},
     lambda g: [bert_feed(g, 2, 7), bert_feed(g, 3, 12)], (13, 17)),
    ("norm_activations", tm.NormActivations, ["x"], ["y"], {"x": BATCH, "y": BATCH},
     lambda g: [(normal(g, (1, 3, 8, 8)),), (normal(g, (2, 3, 8, 8)),)], (13, 17)),
    ("gather_scatter", tm.GatherScatter, ["x", "idx"], ["gathered", "assigned"],
     {"x": BATCH_SEQ, "idx": BATCH, "gathered": BATCH, "assigned": BATCH_SEQ},
     lambda g: [gather_feed(g, 2, 5), gather_feed(g, 3, 8)], (13, 17)),
    ("rounding_scan", tm.RoundingScan, ["x"], ["floor", "cumsum", "clamp", "clamp_min"],
     {"x": BATCH_SEQ, "floor": BATCH_SEQ, "cumsum": BATCH_SEQ, "clamp": BATCH_SEQ, "clamp_min": BATCH_SEQ},
     lambda g: [(normal(g, (2, 5)),), (normal(g, (3, 9)),)], (13, 17)),
]


def export_torch(out, name, cls, in_names, out_names, dynamic, make_feeds, opsets):
    torch.manual_seed(11)
    model = tm.randomize_batch_norms(cls()).eval()
    feeds = make_feeds(torch.Generator().manual_seed(5))
    entries = []
    for opset in opsets:
        full = "%s_op%d" % (name, opset)
        path = os.path.join(out, full + ".onnx")
        torch.onnx.export(model, feeds[0], path, input_names=in_names, output_names=out_names,
                          dynamic_axes=dynamic, opset_version=opset)
        onnx.checker.check_model(onnx.load(path), full_check=True)
        cases = []
        with torch.no_grad():
            for feed in feeds:
                res = model(*feed)
                res = res if isinstance(res, tuple) else (res,)
                cases.append({"inputs": [as_json(n, t.numpy()) for n, t in zip(in_names, feed)],
                              "torch": [as_json(None, t.numpy()) for t in res]})
        entries.append({"name": full, "file": full + ".onnx", "source": "torch", "feeds": cases})
    return entries


def export_handbuilt(out, builder):
    model, feeds = builder(np.random.default_rng(3))
    onnx.checker.check_model(model, full_check=True)
    name = model.graph.name
    onnx.save(model, os.path.join(out, name + ".onnx"))
    cases = [{"inputs": [as_json(n, a) for n, a in feed.items()]} for feed in feeds]
    return {"name": name, "file": name + ".onnx", "source": "handbuilt", "feeds": cases}


def main(out):
    os.makedirs(out, exist_ok=True)
    models = []
    for spec in TORCH:
        models += export_torch(out, *spec)
    models += [export_handbuilt(out, b) for b in handbuilt.BUILDERS]
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump({"models": models}, f)


if __name__ == "__main__":
    main(sys.argv[1])
