# gen_nn_fixtures.py: PyTorch references for tests/nn_ops_spec.lua (conv2d, pools, layer_norm, batch_norm).
# Run: /usr/bin/python3 tests/gen_nn_fixtures.py  (writes tests/fixtures/nn_{conv,pool,norm}.json)
import json
import os

import torch
import torch.nn.functional as F

torch.manual_seed(22)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def t(x):
    x = x.detach().to(torch.float64)
    # 12 significant digits: inputs are exact (4 decimals), references are compared with a tolerance
    return {"shape": list(x.shape), "data": [float("%.12g" % v) for v in x.reshape(-1).tolist()]}


def rnd(*shape):
    return torch.round(torch.randn(*shape, dtype=torch.float64) * 1e4) / 1e4


def conv_case(name, xs, ws, bias=True, **opts):
    x, w = rnd(*xs).requires_grad_(), rnd(*ws).requires_grad_()
    b = rnd(ws[0]).requires_grad_() if bias else None
    y = F.conv2d(x, w, b, **opts)
    gy = rnd(*y.shape)
    grads = torch.autograd.grad(y, [x, w] + ([b] if bias else []), gy)
    case = {"name": name, "x": t(x), "w": t(w), "opts": opts, "y": t(y), "gy": t(gy), "gx": t(grads[0]), "gw": t(grads[1])}
    if bias:
        case["b"], case["gb"] = t(b), t(grads[2])
    return case


def pool_case(name, op, xs, kernel, **opts):
    x = rnd(*xs).requires_grad_()
    if op == "max":
        y, idx = F.max_pool2d(x, kernel, return_indices=True, **opts)
    else:
        y, idx = F.avg_pool2d(x, kernel, **opts), None
    gy = rnd(*y.shape)
    (gx,) = torch.autograd.grad(y, [x], gy)
    case = {"name": name, "op": op, "kernel": kernel, "opts": opts, "x": t(x), "y": t(y), "gy": t(gy), "gx": t(gx)}
    if idx is not None:
        case["idx"] = t(idx + 1)  # ds indices are 1-based
    return case


def ln_case(name, xs, ns, affine=True, eps=1e-5):
    x = rnd(*xs).requires_grad_()
    w = (1 + 0.5 * rnd(*ns)).requires_grad_() if affine else None
    b = rnd(*ns).requires_grad_() if affine else None
    y = F.layer_norm(x, ns, w, b, eps)
    gy = rnd(*y.shape)
    grads = torch.autograd.grad(y, [x] + ([w, b] if affine else []), gy)
    case = {"name": name, "ns": list(ns), "eps": eps, "x": t(x), "y": t(y), "gy": t(gy), "gx": t(grads[0])}
    if affine:
        case.update(w=t(w), b=t(b), gw=t(grads[1]), gb=t(grads[2]))
    return case


def bn_case(name, xs, training, momentum=0.1, eps=1e-5):
    c = xs[1]
    x = rnd(*xs).requires_grad_()
    w, b = (1 + 0.5 * rnd(c)).requires_grad_(), rnd(c).requires_grad_()
    rm, rv = 0.3 * rnd(c), 1 + torch.rand(c, dtype=torch.float64)
    case = {"name": name, "training": training, "momentum": momentum, "eps": eps, "x": t(x), "w": t(w), "b": t(b),
            "rm": t(rm), "rv": t(rv)}
    y = F.batch_norm(x, rm, rv, w, b, training, momentum, eps)
    gy = rnd(*y.shape)
    gx, gw, gb = torch.autograd.grad(y, [x, w, b], gy)
    case.update(y=t(y), gy=t(gy), gx=t(gx), gw=t(gw), gb=t(gb), rm_after=t(rm), rv_after=t(rv))
    return case


conv = [
    conv_case("basic 3x3", (2, 3, 7, 7), (4, 3, 3, 3)),
    conv_case("stride 2 padding 1", (2, 3, 8, 7), (4, 3, 3, 3), stride=2, padding=1),
    conv_case("dilation 2 padding 2", (2, 2, 9, 9), (3, 2, 3, 3), dilation=2, padding=2),
    conv_case("groups 2", (2, 4, 6, 5), (6, 2, 3, 3), groups=2, padding=1),
    conv_case("depthwise", (2, 4, 8, 8), (4, 1, 3, 3), groups=4, padding=1),
    conv_case("odd sizes, no bias", (1, 3, 9, 11), (5, 3, 2, 4), bias=False, stride=(2, 3), padding=(1, 2)),
    conv_case("rectangular dilation and stride", (2, 3, 10, 9), (2, 3, 3, 2), stride=(1, 2), dilation=(2, 1), padding=(0, 1)),
    conv_case("pointwise 1x1", (2, 3, 5, 5), (4, 3, 1, 1)),
    conv_case("1x1 stride 2", (2, 3, 5, 6), (4, 3, 1, 1), stride=2),
    conv_case("lenet conv1 28x28 6@5x5 padding 2", (1, 1, 28, 28), (6, 1, 5, 5), padding=2),
    conv_case("lenet conv2 14x14 16@5x5", (2, 6, 14, 14), (16, 6, 5, 5)),
    conv_case("batch 5 groups 3 (parallel path)", (5, 6, 12, 12), (6, 2, 3, 3), groups=3, padding=1),
]

pool = [
    pool_case("max 2x2 (lenet)", "max", (2, 3, 8, 8), 2),
    pool_case("max 3x3 stride 2 padding 1, odd sizes", "max", (2, 2, 7, 9), 3, stride=2, padding=1),
    pool_case("max (2,3) stride (1,2)", "max", (1, 2, 5, 7), [2, 3], stride=[1, 2]),
    pool_case("avg 2x2", "avg", (2, 3, 8, 8), 2),
    pool_case("avg 3x3 stride 2 padding 1 count_include_pad", "avg", (2, 2, 7, 9), 3, stride=2, padding=1),
    pool_case("avg 3x3 stride 2 padding 1 exclude pad", "avg", (2, 2, 7, 9), 3, stride=2, padding=1, count_include_pad=False),
]

norm = {
    "layer_norm": [
        ln_case("last dim", (3, 4, 5), (5,)),
        ln_case("last two dims", (2, 3, 4, 5), (4, 5)),
        ln_case("no affine, eps 1e-3", (6, 7), (7,), affine=False, eps=1e-3),
    ],
    "batch_norm": [
        bn_case("2d training", (4, 3, 5, 5), True),
        bn_case("1d training momentum 0.2", (8, 3), True, momentum=0.2),
        bn_case("2d eval", (4, 3, 5, 5), False),
    ],
}

os.makedirs(OUT, exist_ok=True)
for fname, data in (("nn_conv.json", conv), ("nn_pool.json", pool), ("nn_norm.json", norm)):
    with open(os.path.join(OUT, fname), "w") as f:
        json.dump(data, f, separators=(",", ":"))
    print("wrote", fname)
