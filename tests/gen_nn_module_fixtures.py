# tests/gen_nn_module_fixtures.py: PyTorch 1.13 references for tests/nn_spec.lua and tests/optim_spec.lua.
# Writes tests/fixtures/nn_module.json (layers: weights as state dicts, inputs, outputs, gradients of
# sum(out * r) w.r.t. inputs and parameters; losses) and tests/fixtures/nn_module_optim.json (optimizer
# steps and learning-rate schedules). Run: /usr/bin/python3 tests/gen_nn_module_fixtures.py
import json
import os
import re

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
HERE = os.path.dirname(os.path.abspath(__file__))


def enc(t):
    t = t.detach()
    dt = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64", torch.bool: "bool"}[t.dtype]
    return {"shape": list(t.shape), "dtype": dt, "data": t.reshape(-1).tolist()}


def lua_key(k):
    # Sequential children are 1-based in ds: "0.weight" -> "1.weight", "seq.2.bias" -> "seq.3.bias"
    return ".".join(str(int(p) + 1) if re.fullmatch(r"\d+", p) else p for p in k.split("."))


def layer_case(name, module, inputs, train=False, after_eval_input=None):
    """inputs: list of tensors (float ones get gradients) or ("ids", tensor) / ("kwarg", name, tensor)."""
    module.train(train)
    module.zero_grad(set_to_none=True)
    sd = {lua_key(k): enc(v) for k, v in module.state_dict().items()}
    args, kwargs, float_inputs = [], {}, []
    for x in inputs:
        if isinstance(x, tuple) and x[0] == "kwarg":
            kwargs[x[1]] = x[2]
        else:
            if x.is_floating_point():
                x = x.clone().requires_grad_()
                float_inputs.append(x)
            args.append(x)
    out = module(*args, **kwargs)
    weights = None
    if isinstance(out, tuple):
        out, weights = out
    r = torch.randn(out.shape)
    (out * r).sum().backward()
    case = {
        "name": name,
        "train": train,
        "state_dict": sd,
        "inputs": [enc(a) for a in args],
        "kwargs": {k: enc(v) for k, v in kwargs.items()},
        "output": enc(out),
        "r": enc(r),
        "input_grads": [enc(x.grad) for x in float_inputs],
        "param_grads": {lua_key(n): enc(p.grad) for n, p in module.named_parameters() if p.grad is not None},
        "state_after": {lua_key(k): enc(v) for k, v in module.state_dict().items()},
    }
    if weights is not None:
        case["weights"] = enc(weights)
    if after_eval_input is not None:
        module.eval()
        case["eval_input"] = enc(after_eval_input)
        case["eval_output"] = enc(module(after_eval_input))
    return case


def layers():
    cases = []
    cases.append(layer_case("linear", nn.Linear(5, 3), [torch.randn(4, 5)]))
    cases.append(layer_case("linear_nobias_3d", nn.Linear(5, 3, bias=False), [torch.randn(2, 3, 5)]))
    cases.append(layer_case("conv2d", nn.Conv2d(3, 4, 3, padding=1), [torch.randn(2, 3, 6, 6)]))
    cases.append(layer_case("conv2d_groups", nn.Conv2d(4, 6, 3, stride=2, groups=2, dilation=1), [torch.randn(2, 4, 7, 7)]))
    cases.append(layer_case("conv2d_same", nn.Conv2d(1, 2, 5, padding="same"), [torch.randn(1, 1, 8, 8)]))
    cases.append(layer_case("maxpool2d", nn.MaxPool2d(2), [torch.randn(2, 3, 6, 6)]))
    cases.append(layer_case("avgpool2d", nn.AvgPool2d(3, stride=2, padding=1), [torch.randn(2, 3, 7, 7)]))
    cases.append(layer_case("relu", nn.ReLU(), [torch.randn(3, 4)]))
    cases.append(layer_case("gelu", nn.GELU(), [torch.randn(3, 4)]))
    cases.append(layer_case("gelu_tanh", nn.GELU(approximate="tanh"), [torch.randn(3, 4)]))
    cases.append(layer_case("tanh", nn.Tanh(), [torch.randn(3, 4)]))
    cases.append(layer_case("sigmoid", nn.Sigmoid(), [torch.randn(3, 4)]))
    cases.append(layer_case("softmax", nn.Softmax(dim=-1), [torch.randn(3, 4)]))
    cases.append(layer_case("log_softmax", nn.LogSoftmax(dim=1), [torch.randn(3, 4, 2)]))
    cases.append(layer_case("flatten", nn.Flatten(), [torch.randn(2, 3, 4)]))
    bn1 = nn.BatchNorm1d(4)
    with torch.no_grad():
        bn1.weight.uniform_(0.5, 1.5); bn1.bias.uniform_(-0.5, 0.5)
    cases.append(layer_case("batchnorm1d", bn1, [torch.randn(8, 4)], train=True, after_eval_input=torch.randn(3, 4)))
    bn2 = nn.BatchNorm2d(3, momentum=0.2, eps=1e-3)
    with torch.no_grad():
        bn2.weight.uniform_(0.5, 1.5); bn2.bias.uniform_(-0.5, 0.5)
        bn2.running_mean.uniform_(-1, 1); bn2.running_var.uniform_(0.5, 2)
    cases.append(layer_case("batchnorm2d", bn2, [torch.randn(4, 3, 5, 5) * 2 + 1], train=True, after_eval_input=torch.randn(2, 3, 2, 2)))
    ln = nn.LayerNorm(6)
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5); ln.bias.uniform_(-0.5, 0.5)
    cases.append(layer_case("layernorm", ln, [torch.randn(2, 3, 6)]))
    ln2 = nn.LayerNorm([3, 6], eps=1e-3)
    with torch.no_grad():
        ln2.weight.uniform_(0.5, 1.5); ln2.bias.uniform_(-0.5, 0.5)
    cases.append(layer_case("layernorm_2d", ln2, [torch.randn(2, 3, 6)]))
    emb = nn.Embedding(10, 4, padding_idx=2)
    ids = torch.tensor([[1, 2, 3], [2, 9, 0]])
    case = layer_case("embedding", emb, [ids])
    case["inputs"][0]["data"] = [i + 1 for i in case["inputs"][0]["data"]]  # 1-based ids in ds
    case["padding_idx"] = 3
    cases.append(case)
    cases.append(layer_case("sequential", nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)), [torch.randn(5, 6)]))
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    with torch.no_grad():
        mha.in_proj_bias.uniform_(-0.3, 0.3); mha.out_proj.bias.uniform_(-0.3, 0.3)
    x = torch.randn(2, 5, 8)
    kpm = torch.tensor([[False, False, False, True, True], [False, False, False, False, False]])
    cases.append(layer_case("mha_self", mha, [x, x, x, ("kwarg", "key_padding_mask", kpm)]))
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    cases.append(layer_case("mha_causal", mha, [x, x, x, ("kwarg", "attn_mask", causal)]))
    mha2 = nn.MultiheadAttention(8, 4)
    with torch.no_grad():
        mha2.in_proj_bias.uniform_(-0.3, 0.3)
    cases.append(layer_case("mha_cross", mha2, [torch.randn(3, 2, 8), torch.randn(4, 2, 8), torch.randn(4, 2, 8)]))
    enc_layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, activation="gelu", batch_first=True)
    with torch.no_grad():
        for p in enc_layer.parameters():
            if p.dim() == 1:
                p.uniform_(-0.3, 0.3)
    cases.append(layer_case("transformer_layer", enc_layer, [torch.randn(2, 5, 8), ("kwarg", "src_key_padding_mask", kpm)]))
    return cases


def loss_cases():
    out = []
    logits = torch.randn(6, 5)
    target = torch.tensor([0, 4, 2, 1, 3, 2])
    logits3 = torch.randn(2, 4, 3)
    target3 = torch.tensor([[0, 3, 1], [2, 2, 0]])
    probs = torch.softmax(torch.randn(6, 5), -1)
    x = torch.randn(4, 3)
    y = torch.rand(4, 3)
    pw = torch.tensor([0.5, 1.0, 2.0])

    def add(name, fn, inputs, lua_inputs=None, opts=None):
        ins = [t.clone().requires_grad_() if t.is_floating_point() else t for t in inputs]
        loss = fn(*ins)
        r = torch.randn(loss.shape)
        (loss * r).sum().backward()
        out.append({
            "name": name,
            "opts": opts or {},
            "inputs": [enc(t) for t in (lua_inputs or inputs)],
            "output": enc(loss),
            "r": enc(r),
            "input_grads": [enc(t.grad) if t.is_floating_point() else None for t in ins],
        })

    def one_based(t):
        return t + 1

    for red in ["mean", "sum", "none"]:
        add("cross_entropy_" + red, lambda a, b: F.cross_entropy(a, b, reduction=red), [logits, target],
            [logits, one_based(target)], {"reduction": red})
    add("cross_entropy_smooth", lambda a, b: F.cross_entropy(a, b, label_smoothing=0.1), [logits, target],
        [logits, one_based(target)], {"label_smoothing": 0.1})
    add("cross_entropy_3d", lambda a, b: F.cross_entropy(a, b), [logits3, target3], [logits3, one_based(target3)])
    add("cross_entropy_probs", lambda a, b: F.cross_entropy(a, b, label_smoothing=0.2), [logits, probs], None,
        {"label_smoothing": 0.2})
    add("nll_loss", lambda a, b: F.nll_loss(torch.log_softmax(a, -1), b), [logits, target], [logits, one_based(target)])
    add("mse_loss", lambda a, b: F.mse_loss(a, b), [x, y])
    add("mse_loss_sum", lambda a, b: F.mse_loss(a, b, reduction="sum"), [x, y], None, {"reduction": "sum"})
    add("bce_with_logits", lambda a, b: F.binary_cross_entropy_with_logits(a, b), [x * 3, y])
    add("bce_with_logits_pos_weight", lambda a, b: F.binary_cross_entropy_with_logits(a, b, pos_weight=pw), [x * 3, y],
        None, {"pos_weight": pw.tolist()})
    add("binary_cross_entropy", lambda a, b: F.binary_cross_entropy(a, b), [torch.sigmoid(x), y])
    add("l1_loss", lambda a, b: F.l1_loss(a, b), [x, y])
    return out


def optim_cases():
    cases = []
    p0 = [torch.randn(3, 4), torch.randn(4)]
    grads = [[torch.randn(3, 4), torch.randn(4)] for _ in range(5)]
    configs = [
        ("sgd", torch.optim.SGD, {"lr": 0.1}),
        ("sgd_wd", torch.optim.SGD, {"lr": 0.1, "weight_decay": 0.05}),
        ("sgd_momentum", torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01}),
        ("sgd_nesterov", torch.optim.SGD, {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
        ("adam", torch.optim.Adam, {"lr": 0.01}),
        ("adam_wd", torch.optim.Adam, {"lr": 0.01, "betas": (0.8, 0.99), "eps": 1e-6, "weight_decay": 0.1}),
        ("adamw", torch.optim.AdamW, {"lr": 0.01, "betas": (0.85, 0.995), "weight_decay": 0.1}),
    ]
    for name, cls, opts in configs:
        params = [p.clone().requires_grad_() for p in p0]
        opt = cls(params, **opts)
        steps = []
        for g in grads:
            for p, gi in zip(params, g):
                p.grad = gi.clone()
            opt.step()
            steps.append([enc(p) for p in params])
        state = opt.state_dict()["state"]
        cases.append({
            "name": name,
            "opts": {k: list(v) if isinstance(v, tuple) else v for k, v in opts.items()},
            "params": [enc(p) for p in p0],
            "grads": [[enc(gi) for gi in g] for g in grads],
            "steps": steps,
            "final_state": {str(i + 1): {k: enc(v) for k, v in s.items() if v is not None} for i, s in state.items()},
        })
    scheds = []
    for name, make in [("step_lr", lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5)),
                       ("cosine", lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=4, eta_min=0.001))]:
        opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
        s = make(opt)
        lrs = [opt.param_groups[0]["lr"]]
        for _ in range(10):
            opt.step()
            s.step()
            lrs.append(opt.param_groups[0]["lr"])
        scheds.append({"name": name, "lrs": lrs})
    return {"optimizers": cases, "schedulers": scheds}


def main():
    fixtures = os.path.join(HERE, "fixtures")
    os.makedirs(fixtures, exist_ok=True)
    with open(os.path.join(fixtures, "nn_module.json"), "w") as f:
        json.dump({"layers": layers(), "losses": loss_cases()}, f)
    with open(os.path.join(fixtures, "nn_module_optim.json"), "w") as f:
        json.dump(optim_cases(), f)


if __name__ == "__main__":
    main()
