# bench/torch_exports.py: the models bench/onnx_torch_bench.lua times, as PyTorch exports them (torch.onnx.export,
# opset 14: LayerNorm decomposed into ReduceMean/Sub/Pow/Sqrt/Div, GELU through Erf, attention as
# MatMul/Div/Add/Softmax/MatMul): a BERT-style classifier (4 layers, hidden 256, 4 heads, FFN 1024; dynamic batch
# and sequence), LeNet-5 (dynamic batch), a MobileNet-style CNN (depthwise convs, hardswish, squeeze-excite) and
# a three-Gemm keyword head (1x24x96 input).
# usage: /usr/bin/python3 bench/torch_exports.py OUT_DIR
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "onnx"))
from gen_torch_models import Bert  # noqa: E402
from torch_lenet import LeNet  # noqa: E402

OPSET = 14


class SqueezeExcite(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, c // 4, 1), nn.Conv2d(c // 4, c, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


class MobileBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.dw = nn.Conv2d(cin, cin, 3, stride=stride, padding=1, groups=cin, bias=False)
        self.bn1 = nn.BatchNorm2d(cin)
        self.se = SqueezeExcite(cin)
        self.pw = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)

    def forward(self, x):
        x = F.hardswish(self.bn1(self.dw(x)))
        return F.hardswish(self.bn2(self.pw(self.se(x))))


class MobileNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16),
                                  nn.Hardswish())
        self.blocks = nn.Sequential(MobileBlock(16, 24, 2), MobileBlock(24, 40, 2), MobileBlock(40, 80, 2),
                                    MobileBlock(80, 96, 1))
        self.head = nn.Linear(96, 10)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


class KeywordHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.f1, self.f2, self.f3 = nn.Linear(24 * 96, 64), nn.Linear(64, 64), nn.Linear(64, 12)

    def forward(self, x):
        return self.f3(F.relu(self.f2(F.relu(self.f1(x.flatten(1))))))


def export(out, name, model, args, names, dynamic):
    model.eval()
    with torch.no_grad():
        torch.onnx.export(model, args, os.path.join(out, name + ".onnx"), input_names=names, output_names=["out"],
                          dynamic_axes=dynamic, opset_version=OPSET)


def main(out):
    torch.manual_seed(3)
    os.makedirs(out, exist_ok=True)
    bert = Bert(vocab=1000, hidden=256, heads=4, layers=4, ffn=1024, labels=2, max_len=128)
    ids, mask = torch.randint(0, 1000, (1, 16)), torch.ones(1, 16)
    export(out, "bert", bert, (ids, mask), ["ids", "mask"], {"ids": {0: "batch", 1: "seq"},
                                                             "mask": {0: "batch", 1: "seq"}})
    export(out, "lenet", LeNet(), (torch.randn(1, 1, 28, 28),), ["image"], {"image": {0: "batch"}})
    export(out, "mobilenet", MobileNet(), (torch.randn(1, 3, 96, 96),), ["image"], {"image": {0: "batch"}})
    export(out, "keyword_head", KeywordHead(), (torch.randn(1, 24, 96),), ["feats"], {"feats": {0: "batch"}})


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: torch_exports.py OUT_DIR")
    main(sys.argv[1])
