# bench/torch/char_gpt.py: the character GPT of examples/char_gpt_model.lua in PyTorch 1.13 with its own KV cache
# (keys and values concatenated per token, as Hugging Face's past_key_values): tokens/s for training (AdamW, eager),
# greedy generation without the cache (the whole sequence per token) and with it, batch 1. Prints one RESULT line.
import argparse, math, time
import torch
import torch.nn as nn
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=50)
ap.add_argument("--batch", type=int, default=32)
ap.add_argument("--tokens", type=int, default=200)
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--threads", type=int, default=2)
args = ap.parse_args()
torch.set_num_threads(args.threads)
V, E, H, L, T, MAXLEN, PROMPT = 65, 128, 4, 4, 64, 256, 8
HD = E // H


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(E), nn.LayerNorm(E)
        self.qkv, self.proj = nn.Linear(E, 3 * E), nn.Linear(E, E)
        self.fc, self.out = nn.Linear(E, 4 * E), nn.Linear(4 * E, E)

    def heads(self, x):
        B, t, _ = x.shape
        qkv = self.qkv(self.ln1(x)).reshape(B, t, 3, H, HD)
        return (qkv.select(2, j).transpose(1, 2) for j in range(3))

    def finish(self, x, a):
        B, t, _ = x.shape
        x = x + self.proj(a.transpose(1, 2).reshape(B, t, E))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))

    # past: (k, v) (B, H, p, HD) or None -> x (B, t, E), the new past
    def forward(self, x, past=None):
        q, k, v = self.heads(x)
        t = x.shape[1]
        if past is not None:
            k, v = torch.cat([past[0], k], 2), torch.cat([past[1], v], 2)
        att = (q @ k.transpose(-2, -1)) * (1 / math.sqrt(HD))
        p = k.shape[2]
        mask = torch.ones(t, p, dtype=torch.bool).triu(p - t + 1)  # query i sees keys <= p - t + i
        att = att.masked_fill(mask, -math.inf).softmax(-1)
        return self.finish(x, att @ v), (k, v)


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, E), nn.Embedding(MAXLEN, E)
        self.blocks = nn.ModuleList([Block() for _ in range(L)])
        self.ln, self.head = nn.LayerNorm(E), nn.Linear(E, V)

    # ids (B, t) at positions start .. start + t - 1 (0-based) -> logits (B, t, V), the new caches
    def forward(self, ids, start=0, past=None):
        t = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(start, start + t))
        new = []
        for j, b in enumerate(self.blocks):
            x, kv = b(x, past[j] if past is not None else None)
            new.append(kv)
        return self.head(self.ln(x)), new


def rate(fn, tokens, reps):
    fn()  # warm-up
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return tokens * reps / (time.perf_counter() - t0)


torch.manual_seed(1)
model = GPT()
opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)


def train_step():
    ids = torch.randint(0, V, (args.batch, T + 1))
    x, y = ids[:, :T], ids[:, 1:]
    opt.zero_grad()
    loss = F.cross_entropy(model(x)[0].reshape(-1, V), y.reshape(-1))
    loss.backward()
    opt.step()


train_step()
t0 = time.perf_counter()
for _ in range(args.steps):
    train_step()
train = args.steps * args.batch * T / (time.perf_counter() - t0)

prompt = torch.randint(0, V, (1, PROMPT))
n = args.tokens


@torch.no_grad()
def no_cache():
    ids = prompt
    for _ in range(n):
        nxt = model(ids)[0][:, -1].argmax(-1, keepdim=True)
        ids = torch.cat([ids, nxt], 1)


@torch.no_grad()
def cached():
    logits, past = model(prompt)
    nxt = logits[:, -1].argmax(-1, keepdim=True)
    for i in range(n - 1):
        logits, past = model(nxt, PROMPT + i, past)
        nxt = logits[:, -1].argmax(-1, keepdim=True)


model.eval()
print("RESULT train_eager=%.1f gen_no_cache=%.1f gen_cache=%.1f" % (train, rate(no_cache, n, args.reps),
                                                                    rate(cached, n, args.reps)))
