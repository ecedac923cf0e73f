"""bench/torch/small_ops.py: PyTorch twin of bench/small_ops.lua: microseconds per small eager op (median).

usage: python3 bench/torch/small_ops.py --threads 2 [--iters 20000] [--samples 15]; prints one JSON object.
"""
import argparse, json, statistics, time
import torch


def per_call_us(fn, iters, samples):
    for _ in range(iters // 10):
        fn()
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        times.append((time.perf_counter() - t0) / iters * 1e6)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--samples", type=int, default=15)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    a1, b1 = torch.rand(1), torch.rand(1)
    a, b = torch.rand(10, 10), torch.rand(10, 10)
    acc = torch.zeros(10, 10)

    def chain():  # 10 ops, as in bench/small_ops.lua
        return ((a + b) * b - a).relu().neg().exp().tanh().sigmoid().abs().sqrt()

    cases = {
        "add_1": lambda: a1 + b1,
        "add_10x10": lambda: a + b,
        "add_inplace_10x10": lambda: acc.add_(b),
        "relu_10x10": lambda: a.relu(),
        "chain10_10x10": chain,
    }
    with torch.no_grad():
        out = {name: per_call_us(fn, args.iters, args.samples) for name, fn in cases.items()}
    out["version"] = torch.__version__
    out["threads"] = torch.get_num_threads()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
