"""bench/torch/mlp.py: PyTorch twin of bench/mlp_bench.lua: MLP 784-128-10 training step (batch 64, Adam 1e-3).
Prints one JSON line with the median milliseconds per step over several samples.
usage: python3 bench/torch/mlp.py --threads 1 [--steps 500] [--samples 5]
"""
import argparse, json, statistics, time
import torch
import torch.nn as nn


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--samples", type=int, default=5)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(22)
    model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.rand(64, 784), torch.randint(0, 10, (64,))
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(100):
        step()
    times = []
    for _ in range(a.samples):
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        times.append((time.perf_counter() - t0) / a.steps * 1e3)
    print(json.dumps({"impl": "torch", "threads": a.threads, "ms_per_step": statistics.median(times)}))


if __name__ == "__main__":
    main()
