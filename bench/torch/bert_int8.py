"""bench/torch/bert_int8.py: PyTorch's dynamic int8 quantization (torch.ao.quantization.quantize_dynamic of the
nn.Linear layers, FBGEMM) of bench/torch/bert.py's model, timed beside that model in f32 on the same inputs.
Prints one JSON line: ms per single prediction of each, and the max |dprob| between them.
usage: python3 bench/torch/bert_int8.py --threads 1 [--n 200] [--dynamic]
"""
import argparse, json, os, sys, time
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert  # noqa: E402


def ms_per(fn, data):
    for ids, mask in data[:20]:
        fn(ids, mask)
    t0 = time.perf_counter()
    for ids, mask in data:
        fn(ids, mask).argmax(-1)
    return (time.perf_counter() - t0) / len(data) * 1e3


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--dynamic", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    if "fbgemm" in torch.backends.quantized.supported_engines:
        torch.backends.quantized.engine = "fbgemm"
    torch.manual_seed(22)
    model = bert.Bert().eval()
    q = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    data = bert.samples(a.n, a.dynamic, 1)
    with torch.no_grad():
        dprob = max((model(i, m) - q(i, m)).abs().max().item() for i, m in data[:50])
        f32, int8 = ms_per(model, data), ms_per(q, data)
    print(json.dumps({"impl": "torch", "threads": a.threads, "n": a.n, "dynamic": a.dynamic,
                      "engine": torch.backends.quantized.engine, "f32_ms": f32, "int8_ms": int8,
                      "max_dprob": dprob}))


if __name__ == "__main__":
    main()
