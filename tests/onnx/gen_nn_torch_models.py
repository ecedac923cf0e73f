# tests/onnx/gen_nn_torch_models.py: small torch.nn layers exported by torch.onnx.export (opsets 13 and 17,
# dynamic batch) for tests/onnx_nn_spec.lua: ConvTranspose2d, interpolate (nearest, bilinear with and without
# align_corners), InstanceNorm2d, GroupNorm, MaxPool2d(ceil_mode), AvgPool1d, Conv1d.
# Writes OUT_DIR/<name>_<opset>.onnx (input "x" of (batch, ...), output "y") and prints one line per model:
# name opset input-shape.
# usage: /usr/bin/python3 tests/onnx/gen_nn_torch_models.py OUT_DIR
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = sys.argv[1]
torch.manual_seed(11)


class Interpolate(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.kw = kw

    def forward(self, x):
        return F.interpolate(x, **self.kw)


def randomized(m):
    # norms start at weight 1, bias 0: random affine parameters make the check meaningful
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p))
    return m


IMAGE, SEQUENCE = (2, 4, 8, 8), (2, 4, 10)
MODELS = [
    ("conv_transpose2d", nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1), IMAGE),
    ("conv_transpose2d_groups", nn.ConvTranspose2d(4, 6, 3, stride=2, padding=2, output_padding=1, groups=2,
                                                   dilation=2), IMAGE),
    ("interpolate_nearest", Interpolate(scale_factor=2, mode="nearest"), IMAGE),
    ("interpolate_nearest_size", Interpolate(size=(5, 11), mode="nearest"), IMAGE),
    ("interpolate_bilinear", Interpolate(size=(7, 13), mode="bilinear", align_corners=False), IMAGE),
    ("interpolate_bilinear_scale", Interpolate(scale_factor=1.5, mode="bilinear", align_corners=False), IMAGE),
    ("interpolate_bilinear_corners", Interpolate(scale_factor=1.5, mode="bilinear", align_corners=True), IMAGE),
    ("instance_norm2d", randomized(nn.InstanceNorm2d(4, affine=True)), IMAGE),
    ("group_norm", randomized(nn.GroupNorm(2, 4)), IMAGE),
    ("max_pool2d_ceil", nn.MaxPool2d(3, stride=2, ceil_mode=True), IMAGE),
    ("max_pool2d_ceil_pad", nn.MaxPool2d(2, stride=3, padding=1, ceil_mode=True), IMAGE),
    ("avg_pool1d", nn.AvgPool1d(3, stride=2, padding=1), SEQUENCE),
    ("avg_pool1d_ceil", nn.AvgPool1d(4, stride=3, padding=2, ceil_mode=True, count_include_pad=False), SEQUENCE),
    ("conv1d", nn.Conv1d(4, 6, 3, padding=2, dilation=2, groups=2), SEQUENCE),
    ("conv1d_stride", nn.Conv1d(4, 5, 4, stride=3, padding=1), SEQUENCE),
]

for name, module, shape in MODELS:
    module.eval()
    for opset in (13, 17):
        path = os.path.join(OUT, "%s_%d.onnx" % (name, opset))
        torch.onnx.export(module, torch.randn(*shape), path, input_names=["x"], output_names=["y"],
                          opset_version=opset, dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
        print(name, opset, " ".join(str(d) for d in shape[1:]))
