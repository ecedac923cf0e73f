# bench/torch/eager_memory.py: the 4-layer char GPT of bench/eager_memory.lua in PyTorch; prints peak RSS (VmHWM).
import argparse, math, re, time
import torch
import torch.nn as nn
import torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=40)
ap.add_argument("--threads", type=int, default=2)
args = ap.parse_args()
torch.set_num_threads(args.threads)
V, E, H, L, T, B = 65, 128, 4, 4, 64, 32


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(E), nn.LayerNorm(E)
        self.qkv, self.proj = nn.Linear(E, 3 * E), nn.Linear(E, E)
        self.fc, self.out = nn.Linear(E, 4 * E), nn.Linear(4 * E, E)

    def forward(self, x, mask):
        hd = E // H
        qkv = self.qkv(self.ln1(x)).reshape(B, T, 3, H, hd)
        q, k, v = (qkv.select(2, j).transpose(1, 2) for j in range(3))
        att = ((q @ k.transpose(-2, -1)) * (1 / math.sqrt(hd))).masked_fill(mask, -math.inf).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, E))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, E), nn.Embedding(T, E)
        self.blocks = nn.ModuleList([Block() for _ in range(L)])
        self.ln, self.head = nn.LayerNorm(E), nn.Linear(E, V)

    def forward(self, ids, mask):
        x = self.tok(ids) + self.pos.weight
        for b in self.blocks:
            x = b(x, mask)
        return self.head(self.ln(x))


torch.manual_seed(1)
model = GPT()
opt = torch.optim.Adam(model.parameters(), lr=3e-4)
mask = torch.ones(T, T).triu(1).bool()
t0 = time.perf_counter()
for _ in range(args.steps):
    ids = torch.randint(0, V, (B, T + 1))
    x, y = ids[:, :T].contiguous(), ids[:, 1:].contiguous()
    opt.zero_grad()
    loss = F.cross_entropy(model(x, mask).reshape(B * T, V), y.reshape(B * T))
    loss.backward()
    opt.step()
secs = time.perf_counter() - t0
hwm = int(re.search(r"VmHWM:\s+(\d+) kB", open("/proc/self/status").read()).group(1))
print("RESULT peak_rss_mib=%.1f tokens_per_s=%.0f loss=%.4f" % (hwm / 1024, args.steps * B * T / secs, loss.item()))
