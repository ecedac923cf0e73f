# tests/gen_attention_fixtures.py: references for ds.scaled_dot_product_attention (tests/attention_spec.lua).
# PyTorch 1.13 has no F.scaled_dot_product_attention, so the reference is PyTorch 2's definition written
# out in f64: softmax(q k^T * scale + mask) v, bool mask True = attend, is_causal = tril(ones(L, S)).
# Writes tests/fixtures/attention.json: f32 inputs, the f64 output and the grads of sum(out * r).
# Run: /usr/bin/python3 tests/gen_attention_fixtures.py
import json
import math
import os

import torch

torch.manual_seed(0)
HERE = os.path.dirname(os.path.abspath(__file__))


def enc(t):
    t = t.detach()
    dt = {torch.float32: "f32", torch.float64: "f64", torch.bool: "bool"}[t.dtype]
    return {"shape": list(t.shape), "dtype": dt, "data": t.reshape(-1).tolist()}


def reference(q, k, v, mask=None, is_causal=False, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ k.transpose(-1, -2)) * scale
    if is_causal:
        L, S = q.shape[-2], k.shape[-2]
        mask = torch.ones(L, S, dtype=torch.bool).tril()
    if mask is not None:
        if mask.dtype == torch.bool:
            s = s.masked_fill(mask.logical_not(), float("-inf"))
        else:
            s = s + mask.double()
    return torch.softmax(s, -1) @ v


def case(name, qs, ks, vs, mask=None, is_causal=False, scale=None):
    q, k, v = torch.randn(qs), torch.randn(ks), torch.randn(vs)
    q64, k64, v64 = (x.double().requires_grad_() for x in (q, k, v))
    out = reference(q64, k64, v64, mask, is_causal, scale)
    r = torch.randn(out.shape, dtype=torch.float64)
    (out * r).sum().backward()
    c = {"name": name, "q": enc(q), "k": enc(k), "v": enc(v), "out": enc(out), "r": enc(r),
         "gq": enc(q64.grad), "gk": enc(k64.grad), "gv": enc(v64.grad), "is_causal": is_causal}
    if mask is not None:
        c["mask"] = enc(mask)
    if scale is not None:
        c["scale"] = scale
    return c


cases = [
    case("plain", (2, 3, 7, 8), (2, 3, 9, 8), (2, 3, 9, 5)),
    case("3-D, Ev > 16 and S > 16", (2, 19, 12), (2, 21, 12), (2, 21, 33)),
    case("bool key padding mask (B,1,1,S)", (2, 3, 7, 8), (2, 3, 9, 8), (2, 3, 9, 5),
         mask=torch.tensor([[True] * 6 + [False] * 3, [True] * 9]).reshape(2, 1, 1, 9)),
    case("float mask (L,S)", (2, 3, 7, 8), (2, 3, 9, 8), (2, 3, 9, 5), mask=torch.randn(7, 9)),
    case("is_causal, L < S", (2, 2, 6, 8), (2, 2, 9, 8), (2, 2, 9, 8), is_causal=True),
    case("is_causal, L = S", (1, 2, 9, 8), (1, 2, 9, 8), (1, 2, 9, 8), is_causal=True),
    case("scale 0.3, k and v shared over heads", (2, 3, 7, 8), (2, 1, 9, 8), (2, 1, 9, 5), scale=0.3),
    case("BERT head shape (1,4,40,64), padding mask", (1, 4, 40, 64), (1, 4, 40, 64), (1, 4, 40, 64),
         mask=(torch.arange(40) < 33).reshape(1, 1, 1, 40)),
]

with open(os.path.join(HERE, "fixtures", "attention.json"), "w") as f:
    json.dump({"cases": cases}, f)
print("wrote", len(cases), "cases")
