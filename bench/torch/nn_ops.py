"""bench/torch/nn_ops.py: PyTorch twin of bench/nn_ops_bench.lua: LeNet-5 conv/pool layers at batch 256, ms (median).

usage: python3 bench/torch/nn_ops.py --threads 2 [--reps 15] [--cpu]; prints one JSON object {name: ms}.
--cpu times process CPU time instead of wall time.
"""
import argparse, json, statistics, time
import torch
import torch.nn.functional as F


clock = time.perf_counter


def ms(fn, reps):
    fn()
    times = []
    for _ in range(reps):
        t0 = clock()
        fn()
        times.append((clock() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--cpu", action="store_true")
    args = ap.parse_args()
    global clock
    if args.cpu:
        clock = time.process_time
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x = torch.randn(256, 1, 28, 28)
    w1, b1 = torch.randn(6, 1, 5, 5, requires_grad=True), torch.randn(6, requires_grad=True)
    w2, b2 = torch.randn(16, 6, 5, 5, requires_grad=True), torch.randn(16, requires_grad=True)
    p1 = torch.randn(256, 6, 14, 14)
    h1 = torch.randn(256, 6, 28, 28)

    def stack():
        a = F.max_pool2d(F.relu(F.conv2d(x, w1, b1, padding=2)), 2)
        return F.max_pool2d(F.relu(F.conv2d(a, w2, b2)), 2)

    def stack_fb():
        y = stack()
        y.backward(torch.ones_like(y))

    def conv2_fb():
        p = p1.detach().requires_grad_()
        y = F.conv2d(p, w2, b2)
        y.backward(torch.ones_like(y))

    def pool1_fb():
        h = h1.detach().requires_grad_()
        y = F.max_pool2d(h, 2)
        y.backward(torch.ones_like(y))

    with torch.no_grad():
        res = {
            "conv1 fwd": ms(lambda: F.conv2d(x, w1, b1, padding=2), args.reps),
            "conv2 fwd": ms(lambda: F.conv2d(p1, w2, b2), args.reps),
            "max_pool 28->14 fwd": ms(lambda: F.max_pool2d(h1, 2), args.reps),
            "lenet conv stack fwd": ms(stack, args.reps),
        }
    res["conv2 fwd+bwd"] = ms(conv2_fb, args.reps)
    res["max_pool 28->14 fwd+bwd"] = ms(pool1_fb, args.reps)
    res["lenet conv stack fwd+bwd"] = ms(stack_fb, args.reps)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
