# tests/gen_nn_leftovers_fixtures.py: PyTorch 1.13 references for tests/nn_leftovers_spec.lua: Tensor.unfold,
# BatchNorm1d/2d/3d with momentum=None (cumulative average), unbatched MultiheadAttention, LSTM with
# proj_size and F.relu_/elu_/leaky_relu_/hardtanh_; outputs and gradients of sum(out * r).
# Writes tests/fixtures/nn_leftovers.json.
# Run: /usr/bin/python3 tests/gen_nn_leftovers_fixtures.py
import json
import os

import torch
import torch.nn as nn

from gen_nn_module_fixtures import enc

torch.manual_seed(0)
HERE = os.path.dirname(os.path.abspath(__file__))


def unfold_cases():
    out = []
    x0 = torch.randn(3, 7, 4, dtype=torch.float64)
    for dim, size, step in [(1, 3, 2), (-1, 2, 1), (0, 3, 3), (1, 7, 1), (1, 2, 5), (2, 1, 2)]:
        x = x0.clone().requires_grad_()
        y = x.unfold(dim, size, step)
        r = torch.randn(y.shape, dtype=torch.float64)
        (y * r).sum().backward()
        # ds dims are 1-based
        out.append({"dim": dim + 1 if dim >= 0 else dim, "size": size, "step": step, "input": enc(x),
                    "output": enc(y), "r": enc(r), "grad": enc(x.grad)})
    return out


def batchnorm_cases():
    out = []
    for ctor, shape in [("BatchNorm1d", (4, 3)), ("BatchNorm1d", (4, 3, 5)), ("BatchNorm2d", (2, 3, 4, 2)),
                        ("BatchNorm3d", (2, 3, 2, 3, 2))]:
        m = getattr(nn, ctor)(3, momentum=None)
        with torch.no_grad():
            m.weight.copy_(torch.randn(3))
            m.bias.copy_(torch.randn(3))
        xs = [torch.randn(shape) * 2 + 1 for _ in range(3)]
        m.train()
        for x in xs[:-1]:
            m(x)
        last = xs[-1].clone().requires_grad_()
        y = m(last)
        r = torch.randn(y.shape)
        (y * r).sum().backward()
        m.eval()
        xe = torch.randn(shape)
        out.append({"ctor": ctor, "weight": enc(m.weight), "bias": enc(m.bias), "inputs": [enc(x) for x in xs],
                    "output": enc(y), "r": enc(r), "grad": enc(last.grad),
                    "running_mean": enc(m.running_mean), "running_var": enc(m.running_var),
                    "num_batches_tracked": int(m.num_batches_tracked), "eval_input": enc(xe),
                    "eval_output": enc(m(xe))})
    return out


def mha_case(name, E, H, L, S, kwargs, self_attn=False, kpm=False, fwd=None, attn_mask=None):
    fwd = dict(fwd or {})
    m = nn.MultiheadAttention(E, H, dtype=torch.float64, **kwargs)
    with torch.no_grad():
        for p in m.parameters():  # nonzero biases too
            p.copy_(torch.randn(p.shape, dtype=torch.float64) * 0.5)
    kd, vd = kwargs.get("kdim", E), kwargs.get("vdim", E)
    q = torch.randn(L, E, dtype=torch.float64, requires_grad=True)
    if self_attn:
        k = v = q
    else:
        k = torch.randn(S, kd, dtype=torch.float64, requires_grad=True)
        v = torch.randn(S, vd, dtype=torch.float64, requires_grad=True)
    mask = None
    if kpm:
        mask = torch.zeros(S, dtype=torch.bool)
        mask[1] = True
        mask[-1] = True
    am = None
    if attn_mask == "float":
        am = torch.randn(L, S, dtype=torch.float64)
    elif attn_mask == "bool_heads":
        am = torch.rand(H, L, S) < 0.3
        am[:, :, 0] = False  # every query sees a key
    out, w = m(q, k, v, key_padding_mask=mask, attn_mask=am, **fwd)
    r, rw = torch.randn(out.shape, dtype=torch.float64), torch.randn(w.shape, dtype=torch.float64)
    ((out * r).sum() + (w * rw).sum()).backward()
    leaves = [q] if self_attn else [q, k, v]
    return {"name": name, "E": E, "H": H, "opts": kwargs, "fwd": fwd, "self_attn": self_attn,
            "state_dict": {k2: enc(t) for k2, t in m.state_dict().items()},
            "inputs": [enc(t) for t in leaves], "key_padding_mask": enc(mask) if kpm else None,
            "attn_mask": enc(am) if am is not None else None,
            "output": enc(out), "weights": enc(w), "r": enc(r), "rw": enc(rw),
            "input_grads": [enc(t.grad) for t in leaves],
            "param_grads": {n: enc(p.grad) for n, p in m.named_parameters()}}


def lstm_case(name, sizes, kwargs, x, h0=None, c0=None):
    m = nn.LSTM(*sizes, **kwargs).double()
    x = x.double().requires_grad_()
    leaves = [x]
    hx = None
    if h0 is not None:
        h0, c0 = h0.double().requires_grad_(), c0.double().requires_grad_()
        leaves += [h0, c0]
        hx = (h0, c0)
    out, (hn, cn) = m(x, hx)
    rs = [torch.randn(t.shape, dtype=torch.float64) for t in (out, hn, cn)]
    sum((t * r).sum() for t, r in zip((out, hn, cn), rs)).backward()
    return {"name": name, "sizes": sizes, "opts": kwargs,
            "state_dict": {k: enc(v) for k, v in m.state_dict().items()},
            "state_names": list(m.state_dict().keys()),
            "input": enc(x), "hx": [enc(t) for t in leaves[1:]], "output": enc(out),
            "finals": [enc(hn), enc(cn)], "r": [enc(r) for r in rs],
            "input_grads": [enc(t.grad) for t in leaves],
            "param_grads": {n: enc(p.grad) for n, p in m.named_parameters()}}


def inplace_cases():
    # F.relu_ / elu_ / leaky_relu_ / hardtanh_ on a non-leaf h = x * 2: h's values and x's gradient
    import torch.nn.functional as F
    out = []
    for name, args in [("relu_", []), ("elu_", []), ("elu_", [0.5]), ("leaky_relu_", []), ("leaky_relu_", [0.2]),
                       ("hardtanh_", []), ("hardtanh_", [-0.5, 1.5])]:
        x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
        h = x * 2
        y = getattr(F, name)(h, *args)
        assert y is h
        r = torch.randn(h.shape, dtype=torch.float64)
        (h * r).sum().backward()
        out.append({"name": name, "args": args, "input": enc(x), "output": enc(h), "r": enc(r), "grad": enc(x.grad)})
    return out


def transformer_case():
    # an unbatched (S, E) input through TransformerEncoderLayer (its self-attention unbatched), eval mode
    m = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dtype=torch.float64).eval()
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn(p.shape, dtype=torch.float64) * 0.1)
    x = torch.randn(5, 8, dtype=torch.float64, requires_grad=True)
    y = m(x)
    r = torch.randn(y.shape, dtype=torch.float64)
    (y * r).sum().backward()
    return {"state_dict": {k: enc(v) for k, v in m.state_dict().items()}, "input": enc(x), "output": enc(y),
            "r": enc(r), "grad": enc(x.grad)}


def main():
    mha = [
        mha_case("self", 8, 2, 4, 4, {}, self_attn=True),
        mha_case("cross_kpm", 8, 2, 3, 5, {}, kpm=True),
        mha_case("per_head_weights", 8, 4, 3, 5, {}, fwd={"average_attn_weights": False}),
        mha_case("kdim_vdim_batch_first", 6, 3, 2, 4, {"kdim": 5, "vdim": 3, "batch_first": True}, kpm=True),
        mha_case("float_attn_mask_kpm", 8, 2, 3, 4, {}, kpm=True, attn_mask="float"),
        mha_case("bool_attn_mask_per_head", 8, 2, 3, 4, {}, attn_mask="bool_heads",
                 fwd={"average_attn_weights": False}),
    ]
    lstm = [
        lstm_case("proj", [4, 6], {"proj_size": 3}, torch.randn(5, 2, 4)),
        lstm_case("proj_bi_2layer_h0", [4, 6], {"proj_size": 2, "num_layers": 2, "bidirectional": True},
                  torch.randn(4, 3, 4), torch.randn(4, 3, 2), torch.randn(4, 3, 6)),
        lstm_case("proj_batch_first_nobias", [3, 5], {"proj_size": 4, "batch_first": True, "bias": False},
                  torch.randn(2, 3, 3)),
        lstm_case("proj_unbatched_h0", [3, 5], {"proj_size": 2, "bidirectional": True},
                  torch.randn(4, 3), torch.randn(2, 2), torch.randn(2, 5)),
    ]
    data = {"unfold": unfold_cases(), "batchnorm": batchnorm_cases(), "mha": mha, "lstm": lstm,
            "inplace": inplace_cases(), "transformer": transformer_case()}
    with open(os.path.join(HERE, "fixtures", "nn_leftovers.json"), "w") as f:
        json.dump(data, f)


if __name__ == "__main__":
    main()
