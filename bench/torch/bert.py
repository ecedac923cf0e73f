"""bench/torch/bert.py: PyTorch twin of examples/bert_sentiment.lua (same architecture and sizes).

Times N single predictions (padded to 128 or real length) and batch-32 throughput in one mode:
eager, trace (torch.jit.trace), freeze (jit.trace + jit.freeze), nested (nn.TransformerEncoder
fast path that skips padding through nested tensors). Prints one JSON line.
usage: python3 bench/torch/bert.py --mode eager --threads 1 [--n 1000] [--batch 1] [--dynamic]
"""
import argparse, json, math, time
import torch
import torch.nn as nn

V, H, L, NH, FF, T, C = 21128, 256, 4, 4, 1024, 128, 6


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.query, self.key, self.value, self.out = (nn.Linear(H, H) for _ in range(4))

    def forward(self, x, mask_bias):
        b, t, _ = x.shape
        heads = lambda z: z.reshape(b, t, NH, H // NH).transpose(1, 2)
        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        scores = q.matmul(k.transpose(2, 3)) * (1 / math.sqrt(H // NH)) + mask_bias
        ctx = scores.softmax(-1).matmul(v)
        return self.out(ctx.transpose(1, 2).reshape(b, t, H))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = Attention()
        self.norm1, self.norm2 = nn.LayerNorm(H, eps=1e-12), nn.LayerNorm(H, eps=1e-12)
        self.ffn_in, self.ffn_out = nn.Linear(H, FF), nn.Linear(FF, H)

    def forward(self, x, mask_bias):
        x = self.norm1(x + self.attention(x, mask_bias))
        return self.norm2(x + self.ffn_out(torch.nn.functional.gelu(self.ffn_in(x))))


class Bert(nn.Module):
    def __init__(self):
        super().__init__()
        self.word, self.position = nn.Embedding(V, H), nn.Embedding(T, H)
        self.emb_norm = nn.LayerNorm(H, eps=1e-12)
        self.layers = nn.ModuleList(Layer() for _ in range(L))
        self.pooler, self.classifier = nn.Linear(H, H), nn.Linear(H, C)

    def forward(self, ids, mask):
        t = ids.shape[1]
        x = self.emb_norm(self.word(ids) + self.position.weight[:t])
        mask_bias = ((1 - mask) * -10000.0)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, mask_bias)
        return self.classifier(torch.tanh(self.pooler(x[:, 0]))).softmax(-1)


class BertNested(nn.Module):
    """Same sizes on nn.TransformerEncoder, whose eval fast path skips padding (nested tensors)."""

    def __init__(self):
        super().__init__()
        self.word, self.position = nn.Embedding(V, H), nn.Embedding(T, H)
        self.emb_norm = nn.LayerNorm(H, eps=1e-12)
        layer = nn.TransformerEncoderLayer(H, NH, FF, dropout=0.0, activation="gelu", batch_first=True,
                                           layer_norm_eps=1e-12)
        self.encoder = nn.TransformerEncoder(layer, L, enable_nested_tensor=True)
        self.pooler, self.classifier = nn.Linear(H, H), nn.Linear(H, C)

    def forward(self, ids, mask):
        t = ids.shape[1]
        x = self.emb_norm(self.word(ids) + self.position.weight[:t])
        x = self.encoder(x, src_key_padding_mask=mask == 0)
        return self.classifier(torch.tanh(self.pooler(x[:, 0]))).softmax(-1)


def samples(n, dynamic, batch):
    g = torch.Generator().manual_seed(22)
    out = []
    for i in range(n):
        length = 8 + (i * 7) % 14          # the example's sentences are 10-20 characters long
        ids = torch.randint(5, 60, (batch, T), generator=g)
        mask = torch.zeros(batch, T)
        mask[:, :length] = 1
        ids[:, length:] = 1
        if dynamic:
            ids, mask = ids[:, :length].contiguous(), mask[:, :length].contiguous()
        out.append((ids, mask))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", default="eager", choices=["eager", "trace", "freeze", "nested"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--dynamic", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(22)
    model = (BertNested() if a.mode == "nested" else Bert()).eval()
    data = samples(a.n, a.dynamic, a.batch)
    with torch.no_grad():
        fn = model
        if a.mode in ("trace", "freeze"):
            fn = torch.jit.trace(model, data[0])
            if a.mode == "freeze":
                fn = torch.jit.freeze(fn)
        for ids, mask in data[:20]:
            fn(ids, mask)
        t0 = time.perf_counter()
        for ids, mask in data:
            fn(ids, mask).argmax(-1)
        total = time.perf_counter() - t0
    print(json.dumps({"impl": "torch", "mode": a.mode, "threads": a.threads, "n": a.n, "batch": a.batch,
                      "dynamic": a.dynamic, "total_s": total, "ms_per_call": total / a.n * 1e3}))


if __name__ == "__main__":
    main()
