"""bench/torch/gemm.py: PyTorch twin of bench/gemm.lua: f32 GEMM GFLOP/s (median) for square n x n.

usage: python3 bench/torch/gemm.py --threads 2 --sizes 256,512,1024,2048; prints one JSON object {n: gflops}.
"""
import argparse, json, statistics, time
import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sizes", default="256,512,1024,2048")
    ap.add_argument("--samples", type=int, default=7)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    out = {}
    with torch.no_grad():
        for n in (int(s) for s in args.sizes.split(",")):
            a, b = torch.rand(n, n), torch.rand(n, n)
            flop = 2.0 * n ** 3
            reps = max(1, int(2e9 / flop))      # ~ a few ms per sample at hundreds of GFLOP/s
            for _ in range(max(3, -(-256 * 2**20 // (4 * n * n)))):   # the warm-up of bench/gemm.lua
                torch.mm(a, b)
            rates = []
            for _ in range(args.samples):
                t0 = time.perf_counter()
                for _ in range(reps):
                    torch.mm(a, b)
                rates.append(flop * reps / (time.perf_counter() - t0) / 1e9)
            out[str(n)] = statistics.median(rates)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
