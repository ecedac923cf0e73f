# tests/onnx/train_lenet_torch.py: train LeNet-5 in PyTorch on Fashion-MNIST (Debian's dataset-fashion-mnist) and
# write it with torch.onnx.export (opset 17, batch dynamic, input "image" in [0,1], output logits), for
# examples/onnx_import.lua.   usage: /usr/bin/python3 tests/onnx/train_lenet_torch.py OUT.onnx [BATCHES]
import gzip
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_lenet import LeNet  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"


def idx(name, offset):
    with gzip.open(os.path.join(DATA, name)) as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


out = sys.argv[1]
batches = int(sys.argv[2]) if len(sys.argv) > 2 else 235
torch.manual_seed(1)
torch.set_num_threads(1)
x = torch.from_numpy(idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28).astype(np.float32) / 255)
y = torch.from_numpy(idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64))
model = LeNet()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
perm = torch.randperm(len(x))
for b in range(batches):
    i = perm[(b * 256) % len(x):(b * 256) % len(x) + 256]
    loss = F.cross_entropy(model(x[i]), y[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
model.eval()
torch.onnx.export(model, (torch.rand(1, 1, 28, 28),), out, input_names=["image"], output_names=["logits"],
                  dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}}, opset_version=17)
print("trained %d batches (last loss %.4f), wrote %s" % (batches, loss.item(), out))
