# gen_index_fixtures.py: PyTorch reference values for the index/join ops (tests/index_spec.lua).
# Run: /usr/bin/python3 tests/gen_index_fixtures.py  (writes tests/fixtures/index.json)
# Indices and dims are written 1-based, as ds takes them; gradients are for a given upstream grad gy.
import json
import os
import torch

torch.manual_seed(0)
DT = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64", torch.int32: "i32",
      torch.uint8: "u8", torch.bool: "bool"}


def enc(t, plus=0):
    t = t.detach()
    data = t.reshape(-1).tolist()
    if t.dtype == torch.bool:
        data = [1 if v else 0 for v in data]
    return {"shape": list(t.shape), "dtype": DT[t.dtype], "data": [v + plus for v in data]}


def rnd(shape, dtype=torch.float64):
    if dtype in (torch.float32, torch.float64):
        return torch.randn(shape, dtype=dtype)
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    return torch.randint(0, 9, shape, dtype=dtype)


def grads(out, inputs):
    gy = torch.randn(out.shape, dtype=out.dtype)
    gs = torch.autograd.grad(out, inputs, gy)
    return enc(gy), [enc(g) for g in gs]


cases = []

# cat: dims, dtype promotion, grads
for shapes, dim, dts in [
    ([(2, 3), (4, 3)], 0, (torch.float64, torch.float64)),
    ([(2, 3), (2, 1), (2, 2)], 1, (torch.float64,) * 3),
    ([(2, 3, 4), (2, 2, 4)], 1, (torch.float64, torch.float64)),
    ([(2, 3, 4), (2, 3, 1)], -1, (torch.float64, torch.float64)),
    ([(3,), (0,), (2,)], 0, (torch.float64,) * 3),
    ([(2, 2), (1, 2)], 0, (torch.float32, torch.float64)),
    ([(2, 2), (1, 2)], 0, (torch.int64, torch.float32)),
    ([(2, 2), (2, 2)], 1, (torch.int32, torch.int64)),
    ([(2, 2), (2, 2)], 1, (torch.bool, torch.bool)),
    ([(2, 2), (2, 2)], 0, (torch.uint8, torch.int32)),
]:
    xs = [rnd(s, d) for s, d in zip(shapes, dts)]
    for x in xs:
        if x.dtype == torch.float64:
            x.requires_grad_()
    out = torch.cat(xs, dim)
    case = {"op": "cat", "inputs": [enc(x) for x in xs], "dim": dim + 1 if dim >= 0 else dim, "out": enc(out)}
    if all(x.dtype == torch.float64 for x in xs):
        case["gy"], case["grads"] = grads(out, xs)
    cases.append(case)

# stack
for shape, dim, n in [((2, 3), 0, 2), ((2, 3), 1, 3), ((2, 3), 2, 2), ((2, 3), -1, 2), ((4,), 0, 3), ((), 0, 2)]:
    xs = [rnd(shape).requires_grad_() for _ in range(n)]
    out = torch.stack(xs, dim)
    gy, gs = grads(out, xs)
    cases.append({"op": "stack", "inputs": [enc(x) for x in xs], "dim": dim + 1 if dim >= 0 else dim,
                  "out": enc(out), "gy": gy, "grads": gs})

# gather (repeated indices make scatter_add accumulate in the gradient)
for xshape, ishape, dim in [((3, 4), (3, 4), 0), ((3, 4), (2, 3), 1), ((2, 3, 4), (2, 3, 5), 2),
                            ((2, 3, 4), (2, 6, 4), 1), ((5,), (7,), 0), ((3, 4), (3, 0), 1)]:
    x = rnd(xshape).requires_grad_()
    ix = torch.randint(0, xshape[dim], ishape)
    out = torch.gather(x, dim, ix)
    gy, gs = grads(out, [x])
    cases.append({"op": "gather", "x": enc(x), "index": enc(ix, 1), "dim": dim + 1, "out": enc(out), "gy": gy, "grads": gs})
for dt in (torch.float32, torch.int64, torch.int32, torch.uint8, torch.bool):
    x = rnd((3, 4), dt)
    ix = torch.randint(0, 3, (2, 4))
    cases.append({"op": "gather", "x": enc(x), "index": enc(ix, 1), "dim": 1, "out": enc(torch.gather(x, 0, ix))})

# scatter_add
for xshape, ishape, dim in [((3, 4), (3, 4), 0), ((3, 4), (2, 6), 1), ((2, 3, 4), (2, 3, 2), 2)]:
    x = rnd(xshape).requires_grad_()
    src = rnd(ishape).requires_grad_()
    ix = torch.randint(0, xshape[dim], ishape)
    out = torch.scatter_add(x, dim, ix, src)
    gy, gs = grads(out, [x, src])
    cases.append({"op": "scatter_add", "x": enc(x), "index": enc(ix, 1), "src": enc(src), "dim": dim + 1,
                  "out": enc(out), "gy": gy, "grads": gs})
for dt in (torch.float32, torch.int64, torch.int32):
    x, src = rnd((3, 4), dt), rnd((5, 4), dt)
    ix = torch.randint(0, 3, (5, 4))
    cases.append({"op": "scatter_add", "x": enc(x), "index": enc(ix, 1), "src": enc(src), "dim": 1,
                  "out": enc(torch.scatter_add(x, 0, ix, src))})

# index_select
for xshape, n, dim in [((5, 3), 4, 0), ((3, 5), 7, 1), ((2, 3, 4), 2, 1), ((2, 3, 4), 5, 2), ((6,), 0, 0)]:
    x = rnd(xshape).requires_grad_()
    ix = torch.randint(0, xshape[dim], (n,))
    out = torch.index_select(x, dim, ix)
    gy, gs = grads(out, [x])
    cases.append({"op": "index_select", "x": enc(x), "index": enc(ix, 1), "dim": dim + 1, "out": enc(out), "gy": gy, "grads": gs})
for dt in (torch.float32, torch.int64, torch.int32, torch.uint8, torch.bool):
    x = rnd((4, 3), dt)
    ix = torch.tensor([3, 0, 3])
    cases.append({"op": "index_select", "x": enc(x), "index": enc(ix, 1), "dim": 1, "out": enc(torch.index_select(x, 0, ix))})

# index_add
for xshape, n, dim in [((5, 3), 4, 0), ((3, 5), 7, 1), ((2, 3, 4), 6, 2)]:
    x = rnd(xshape).requires_grad_()
    ix = torch.randint(0, xshape[dim], (n,))
    sshape = list(xshape)
    sshape[dim] = n
    src = rnd(sshape).requires_grad_()
    out = torch.index_add(x, dim, ix, src)
    gy, gs = grads(out, [x, src])
    cases.append({"op": "index_add", "x": enc(x), "index": enc(ix, 1), "src": enc(src), "dim": dim + 1,
                  "out": enc(out), "gy": gy, "grads": gs})

# masked_fill (mask broadcast to x)
for xshape, mshape, value, dt in [((3, 4), (3, 4), -1.5, torch.float64), ((3, 4), (4,), 2.0, torch.float64),
                                  ((2, 3, 4), (3, 1), 0.0, torch.float64), ((2, 3), (), 7.0, torch.float64),
                                  ((3, 4), (1, 4), -1e9, torch.float32), ((3, 4), (3, 1), 5, torch.int64),
                                  ((3, 4), (3, 4), 2.7, torch.int32)]:
    x = rnd(xshape, dt)
    if dt == torch.float64:
        x.requires_grad_()
    mask = torch.rand(mshape) > 0.5
    out = x.masked_fill(mask, value)
    case = {"op": "masked_fill", "x": enc(x), "mask": enc(mask), "value": value, "out": enc(out)}
    if dt == torch.float64:
        case["gy"], case["grads"] = grads(out, [x])
    cases.append(case)

# one_hot (labels 1-based in ds)
for lshape, nc in [((5,), 4), ((2, 3), 6), ((), 3), ((4,), None)]:
    lab = torch.randint(0, nc or 5, lshape)
    out = torch.nn.functional.one_hot(lab, nc if nc else -1)
    cases.append({"op": "one_hot", "labels": enc(lab, 1), "num_classes": nc, "out": enc(out)})

# embedding (ids 1-based in ds; padding_idx 1-based too)
for ishape, V, Dm, pad in [((5,), 6, 3, None), ((2, 4), 5, 4, 1), ((3, 2, 2), 4, 2, -1), ((), 3, 5, None)]:
    w = rnd((V, Dm)).requires_grad_()
    ids = torch.randint(0, V, ishape)
    if pad is not None and ids.numel() > 0:
        ids.view(-1)[0] = pad % V  # make sure the padding row is used
    out = torch.nn.functional.embedding(ids, w, padding_idx=pad)
    gy, gs = grads(out, [w])
    cases.append({"op": "embedding", "ids": enc(ids, 1), "weight": enc(w), "out": enc(out), "gy": gy, "grads": gs,
                  "padding_idx": (pad + 1 if pad >= 0 else pad) if pad is not None else None})

os.makedirs(os.path.join(os.path.dirname(__file__), "fixtures"), exist_ok=True)
with open(os.path.join(os.path.dirname(__file__), "fixtures", "index.json"), "w") as f:
    json.dump({"generator": "tests/gen_index_fixtures.py", "torch": torch.__version__, "cases": cases}, f)
print(len(cases), "cases")
