# tests/onnx/gen_torch_models.py: PyTorch models exported by torch.onnx.export (opset 17) for ds.onnx.load to
# import, with inputs and PyTorch's outputs: LeNet-5, a ResNet-style block with BatchNorm, a BERT-style encoder
# classifier (dynamic batch / sequence length). Writes tests/fixtures/onnx/<name>.onnx and <name>.json.
# usage: /usr/bin/python3 tests/onnx/gen_torch_models.py [OUT_DIR]
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_lenet import LeNet  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "fixtures", "onnx")


class ResBlock(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.short = nn.Conv2d(3, c, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c)  # after the sum: not folded into a Conv, exported as BatchNormalization
        self.fc = nn.Linear(c, 4)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn3(self.bn2(self.conv2(y)) + self.short(x)))
        return self.fc(F.adaptive_avg_pool2d(y, 1).flatten(1))


class Bert(nn.Module):
    def __init__(self, vocab=50, hidden=32, heads=4, layers=2, ffn=64, labels=3, max_len=16):
        super().__init__()
        self.heads = heads
        self.word, self.pos = nn.Embedding(vocab, hidden), nn.Embedding(max_len, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList()
        for _ in range(layers):
            self.layers.append(nn.ModuleDict(dict(qkv=nn.Linear(hidden, 3 * hidden), out=nn.Linear(hidden, hidden),
                                                  n1=nn.LayerNorm(hidden, eps=1e-12), f1=nn.Linear(hidden, ffn),
                                                  f2=nn.Linear(ffn, hidden), n2=nn.LayerNorm(hidden, eps=1e-12))))
        self.pool, self.cls = nn.Linear(hidden, hidden), nn.Linear(hidden, labels)

    def forward(self, ids, mask):
        B, T = ids.shape
        pos = torch.arange(T).unsqueeze(0)
        x = self.norm(self.word(ids) + self.pos(pos))
        bias = ((1.0 - mask) * -10000.0)[:, None, None, :]
        H = x.shape[-1]
        hd = H // self.heads
        for l in self.layers:
            q, k, v = l["qkv"](x).split(H, dim=-1)
            q, k, v = [t.reshape(B, T, self.heads, hd).transpose(1, 2) for t in (q, k, v)]
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd) + bias
            ctx = torch.matmul(s.softmax(-1), v).transpose(1, 2).reshape(B, T, H)
            x = l["n1"](x + l["out"](ctx))
            x = l["n2"](x + l["f2"](F.gelu(l["f1"](x))))
        return self.cls(torch.tanh(self.pool(x[:, 0]))).softmax(-1)


def export(name, model, args, names, dynamic, feeds):
    model.eval()
    path = os.path.join(OUT, name + ".onnx")
    torch.onnx.export(model, args, path, input_names=names, output_names=["output"], dynamic_axes=dynamic,
                      opset_version=17)
    cases = []
    with torch.no_grad():
        for feed in feeds:
            out = model(*feed)
            cases.append({"inputs": [{"name": n, "dtype": "i64" if t.dtype == torch.int64 else "f32",
                                      "shape": list(t.shape), "data": t.flatten().tolist()} for n, t in zip(names, feed)],
                          "output": {"shape": list(out.shape), "data": out.flatten().tolist()}})
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump({"cases": cases}, f)


def main():
    torch.manual_seed(7)
    os.makedirs(OUT, exist_ok=True)
    lenet = LeNet()
    export("lenet", lenet, (torch.rand(1, 1, 28, 28),), ["image"], {"image": {0: "batch"}, "output": {0: "batch"}},
           [(torch.rand(1, 1, 28, 28),), (torch.rand(3, 1, 28, 28),)])

    res = ResBlock()
    with torch.no_grad():  # running statistics that are not the defaults, so BatchNorm's inference form matters
        for bn in (res.bn1, res.bn2, res.bn3):
            bn.running_mean.uniform_(-0.5, 0.5); bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5); bn.bias.uniform_(-0.2, 0.2)
    export("resblock", res, (torch.randn(1, 3, 8, 8),), ["x"], {"x": {0: "batch"}, "output": {0: "batch"}},
           [(torch.randn(2, 3, 8, 8),)])

    bert = Bert()
    ids = torch.randint(0, 50, (2, 7))
    mask = torch.ones(2, 7)
    mask[1, 5:] = 0
    export("bert", bert, (ids, mask), ["ids", "mask"],
           {"ids": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}, "output": {0: "batch"}},
           [(ids, mask), (torch.randint(0, 50, (1, 12)), torch.ones(1, 12))])
    print("wrote", OUT)


if __name__ == "__main__":
    main()
