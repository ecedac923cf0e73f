# gen_semantics_fixtures.py: PyTorch's answers for the calls a port writes without thinking
# (tests/pytorch_semantics_spec.lua): assignment through masks, index tensors and index tuples, index_put,
# one-element index reads, index_add's alpha, 0-d type promotion, autograd through assignments.
# Run: /usr/bin/python3 tests/gen_semantics_fixtures.py  (writes tests/fixtures/semantics.json)
# Indices are written 1-based (negative ones as they are), as ds takes them.
import json
import os
import torch

DT = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64", torch.int32: "i32",
      torch.uint8: "u8", torch.bool: "bool"}


def enc(t):
    t = t.detach()
    data = t.reshape(-1).tolist()
    if t.dtype == torch.bool:
        data = [1 if v else 0 for v in data]
    return {"shape": list(t.shape), "dtype": DT[t.dtype], "data": data}


def ds_index(t):
    """a PyTorch index tensor as ds takes it: non-negative indices 1-based, negative ones unchanged"""
    return enc(torch.where(t >= 0, t + 1, t))


torch.manual_seed(0)
out = {}

# y[y < 0] = 0 (the example)
y = torch.tensor([-1., 2., -3.])
y[y < 0] = 0
out["mask_scalar"] = {"x": [-1, 2, -3], "want": enc(y)}

# x[mask] = v: a mask over the leading dims with a row value, and a full mask with one value per selected element
x = torch.randn(3, 4, dtype=torch.float64)
m = torch.tensor([True, False, True])
v = torch.randn(4, dtype=torch.float64)
r = x.clone()
r[m] = v
m2 = x > 0
v2 = torch.randn(int(m2.sum()), dtype=torch.float64)
r2 = x.clone()
r2[m2] = v2
out["mask_tensor"] = {"x": enc(x), "rows": enc(m), "row_value": enc(v), "want_rows": enc(r),
                      "value_per_element": enc(v2), "want_elements": enc(r2)}

# x[idx] = v, x[{i, j}] = v, x[{i, j}] reads: numbers select, tensors index (broadcast together)
x = torch.randn(4, 3, 5, dtype=torch.float64)
idx = torch.tensor([0, -1])
i = torch.tensor([[0], [3]])
j = torch.tensor([2, 0, 1])
cases = []
for key, value in [
    ((idx,), torch.randn(2, 3, 5, dtype=torch.float64)),
    ((idx,), torch.randn(5, dtype=torch.float64)),
    ((1, 2), torch.randn(5, dtype=torch.float64)),
    ((1, 2, 3), torch.tensor(7., dtype=torch.float64)),
    ((i, j), torch.randn(2, 3, 5, dtype=torch.float64)),
    ((i, 1, torch.tensor([4, -1])), torch.randn(2, 2, dtype=torch.float64)),
    ((-1, torch.tensor([2, 0])), torch.randn(2, 5, dtype=torch.float64)),
]:
    r = x.clone()
    r[key] = value
    ds_key = [{"number": k + 1 if k >= 0 else k} if isinstance(k, int) else {"index": ds_index(k)} for k in key]
    cases.append({"key": ds_key, "value": enc(value), "read": enc(x[key]), "want": enc(r)})
out["keys"] = {"x": enc(x), "cases": cases}

# one-element index tensors: 1-D keeps the dim, 0-d drops it
x = torch.arange(12.).reshape(3, 4)
out["one_element"] = {"x": enc(x), "keep": enc(x[torch.tensor([1])]), "drop": enc(x[torch.tensor(1)])}

# index_put_ with and without accumulate (repeated indices)
x = torch.randn(5, 2, dtype=torch.float64)
idx = torch.tensor([0, 0, 3, -1])
v = torch.randn(4, 2, dtype=torch.float64)
out["index_put"] = {"x": enc(x), "index": ds_index(idx), "value": enc(v),
                    "accumulate": enc(x.clone().index_put_((idx,), v, accumulate=True)),
                    "put_unique": enc(x.clone().index_put_((idx[1:],), v[1:]))}

# gradients through assignments: y = x * 2; y[y < 0] = w (0-d); y[idx] = v * 3; loss = (y * y * c).sum()
x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
w = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
v = torch.randn(3, dtype=torch.float64, requires_grad=True)
c = torch.randn(4, 3, dtype=torch.float64)
idx = torch.tensor([1, -1])
y = x * 2
y[y < 0] = w
y[idx] = v * 3
loss = (y * y * c).sum()
loss.backward()
out["grad"] = {"x": enc(x), "w": enc(w), "v": enc(v), "c": enc(c), "index": ds_index(idx), "y": enc(y),
               "gx": enc(x.grad), "gw": enc(w.grad), "gv": enc(v.grad)}

# index_put_ accumulate gradients: z = a.clone(); z.index_put_((idx,), b, accumulate=True); (z * c).sum()
a = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
b = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
c = torch.randn(3, 2, dtype=torch.float64)
idx = torch.tensor([2, 0, 2])
z = a * 1
z.index_put_((idx,), b, accumulate=True)
(z * c).sum().backward()
out["grad_accumulate"] = {"a": enc(a), "b": enc(b), "c": enc(c), "index": ds_index(idx), "z": enc(z),
                          "ga": enc(a.grad), "gb": enc(b.grad)}

# index_add with alpha
x = torch.randn(4, 2, dtype=torch.float64)
idx = torch.tensor([3, 0, 3])
src = torch.randn(3, 2, dtype=torch.float64)
out["index_add_alpha"] = {"x": enc(x), "index": ds_index(idx), "src": enc(src),
                          "want": enc(x.index_add(0, idx, src, alpha=2.5))}

# type promotion: a tensor with dims against a 0-d tensor
promo = []
for a in DT:
    for b in DT:
        promo.append({"dims": DT[a], "zero": DT[b],
                      "out": DT[torch.result_type(torch.ones(2, dtype=a), torch.ones((), dtype=b))]})
out["promotion"] = promo

# full: the fill value's kind gives the dtype; NaN and infinities fill
out["full"] = {"bool": DT[torch.full((3,), True).dtype]}

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "semantics.json")
with open(path, "w") as f:
    json.dump(out, f, allow_nan=True)
print("wrote", path)
