"""bench/torch/lenet.py: PyTorch twin of examples/lenet_fashion_mnist.lua (bench/lenet_bench.lua runs both).

LeNet-5 as in the TensorFlow article (Keras' Glorot-uniform weights, zero biases), Adam 1e-3, batch 256, seed 22, Fashion-MNIST from Debian's
dataset-fashion-mnist; per epoch: train seconds (the loop only), mean train loss, test accuracy.
usage: python3 bench/torch/lenet.py --threads 1 [--epochs 1] [--limit N]; prints one JSON object.
"""
import argparse, gzip, json, time
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = "/usr/share/datasets/fashion-mnist"


def idx(path):
    data = gzip.open(path, "rb").read()
    ndim = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return torch.frombuffer(bytearray(data), dtype=torch.uint8, offset=4 + 4 * ndim).reshape(shape)


def split(name):
    prefix = "train" if name == "train" else "t10k"
    return idx(f"{ROOT}/{prefix}-images-idx3-ubyte.gz"), idx(f"{ROOT}/{prefix}-labels-idx1-ubyte.gz").long()


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding="same"), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
        for name, p in self.named_parameters():  # Keras' defaults, as in the article (and the ds example)
            if name.endswith("weight"):
                nn.init.xavier_uniform_(p)
            else:
                nn.init.zeros_(p)

    def forward(self, x):
        return self.classifier(self.features(x))


def scale(x):
    return (x.float() * (1 / 255)).unsqueeze(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(22)
    xtr, ytr = split("train")
    xte, yte = split("test")
    model = LeNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    bs = 256
    nb = (len(xtr) + bs - 1) // bs
    if args.limit:
        nb = min(nb, args.limit)
    epochs = []
    for _ in range(args.epochs):
        perm = torch.randperm(len(xtr))
        t0 = time.perf_counter()
        total = 0.0
        for i in range(nb):
            idx_ = perm[i * bs:(i + 1) * bs]
            x, y = scale(xtr[idx_]), ytr[idx_]
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        seconds = time.perf_counter() - t0
        with torch.no_grad():
            correct = sum((model(scale(xte[j:j + 1000])).argmax(-1) == yte[j:j + 1000]).sum().item()
                          for j in range(0, len(xte), 1000))
        epochs.append({"seconds": seconds, "loss": total / nb, "accuracy": correct / len(xte), "batches": nb})
    print(json.dumps({"version": torch.__version__, "threads": args.threads, "epochs": epochs}))


if __name__ == "__main__":
    main()
