# tests/gen_loss_fixtures.py: PyTorch 1.13 reference values for the loss options (weight, ignore_index,
# label_smoothing, pos_weight) checked by tests/hardening_spec.lua.
# Run from the repo root: /usr/bin/python3 tests/gen_loss_fixtures.py -> tests/fixtures/losses.json
# Each case: {fn, input, target, opts, value, grad}; class targets are written 1-based (Lua's),
# ignore_index as given to ds (1-based space), tensors as {shape, data} in f64.
import json
import torch
import torch.nn.functional as F

torch.manual_seed(12)


def enc(t):
    return {"shape": list(t.shape), "data": t.detach().double().reshape(-1).tolist()}


cases = []


def add(fn, x, target, opts, torch_opts, one_based_target=False):
    x = x.clone().double().requires_grad_(True)
    y = getattr(F, fn)(x, target, **torch_opts)
    y.sum().backward()
    t = target + 1 if one_based_target else target
    o = {}
    for k, v in opts.items():
        o[k] = enc(v) if isinstance(v, torch.Tensor) else v
    cases.append({"fn": fn, "input": enc(x), "target": enc(t), "target_dtype": "i64" if one_based_target else "f64",
                  "opts": o, "value": enc(y), "grad": enc(x.grad)})


x = torch.randn(5, 4, dtype=torch.float64)
t = torch.tensor([0, 3, 1, 2, 3])
t_ign = torch.tensor([0, 3, -100, 2, -100])
w = torch.tensor([0.5, 2.0, 1.0, 3.0], dtype=torch.float64)
for red in ["mean", "sum", "none"]:
    add("cross_entropy", x, t, {"weight": w, "reduction": red}, {"weight": w, "reduction": red}, True)
    # ds's ignore_index is compared with the 1-based target: torch's -100 becomes -99 after the +1
    add("cross_entropy", x, t_ign, {"ignore_index": -99, "reduction": red}, {"ignore_index": -100, "reduction": red}, True)
    add("cross_entropy", x, t_ign, {"ignore_index": -99, "weight": w, "label_smoothing": 0.2, "reduction": red},
        {"ignore_index": -100, "weight": w, "label_smoothing": 0.2, "reduction": red}, True)
    add("nll_loss", F.log_softmax(x, 1), t_ign, {"ignore_index": -99, "weight": w, "reduction": red},
        {"ignore_index": -100, "weight": w, "reduction": red}, True)
    add("nll_loss", F.log_softmax(x, 1), t, {"weight": w, "reduction": red}, {"weight": w, "reduction": red}, True)
# (N,C,d) inputs: classes in dim 2
x3 = torch.randn(2, 3, 4, dtype=torch.float64)
t3 = torch.tensor([[0, 1, 2, -100], [2, 2, 0, 1]])
w3 = torch.tensor([1.5, 0.25, 1.0], dtype=torch.float64)
add("cross_entropy", x3, t3, {"ignore_index": -99, "weight": w3, "label_smoothing": 0.1},
    {"ignore_index": -100, "weight": w3, "label_smoothing": 0.1}, True)
# probabilities as targets, with weight and smoothing
p = torch.softmax(torch.randn(5, 4, dtype=torch.float64), 1)
add("cross_entropy", x, p, {"weight": w, "label_smoothing": 0.3}, {"weight": w, "label_smoothing": 0.3})
# binary cross entropy with logits: weight broadcast to the input, pos_weight one per class (last dim)
xb = torch.randn(4, 3, dtype=torch.float64)
yb = torch.rand(4, 3, dtype=torch.float64)
wb = torch.rand(4, 3, dtype=torch.float64)
pw = torch.tensor([0.5, 2.0, 4.0], dtype=torch.float64)
for red in ["mean", "sum", "none"]:
    add("binary_cross_entropy_with_logits", xb, yb, {"weight": wb, "pos_weight": pw, "reduction": red},
        {"weight": wb, "pos_weight": pw, "reduction": red})
add("binary_cross_entropy_with_logits", xb, yb, {"weight": torch.tensor([1.0, 0.0, 2.0], dtype=torch.float64)},
    {"weight": torch.tensor([1.0, 0.0, 2.0], dtype=torch.float64)})
add("binary_cross_entropy", torch.sigmoid(xb), yb, {"weight": wb}, {"weight": wb})

with open("tests/fixtures/losses.json", "w") as f:
    json.dump(cases, f)
print(len(cases), "cases")
