# tests/gen_training_fixtures.py: PyTorch 1.13 references for tests/nn_modules_spec.lua and
# tests/optim_spec.lua: gradient clipping, hooks, parameters_to_vector, optimizer trajectories
# (RMSprop, Adagrad, Adam amsgrad) and learning-rate sequences of the schedulers.
# Writes tests/fixtures/training.json. Run: /usr/bin/python3 tests/gen_training_fixtures.py
import json
import math
import os

import torch

from gen_nn_module_fixtures import enc

torch.manual_seed(0)
HERE = os.path.dirname(os.path.abspath(__file__))


def clip_cases():
    grads = [torch.randn(3, 4), torch.randn(5), torch.randn(2, 2) * 10]
    out = []
    for name, fn, args in [
        ("norm_2", torch.nn.utils.clip_grad_norm_, {"max_norm": 1.0}),
        ("norm_1", torch.nn.utils.clip_grad_norm_, {"max_norm": 2.0, "norm_type": 1.0}),
        ("norm_inf", torch.nn.utils.clip_grad_norm_, {"max_norm": 0.5, "norm_type": math.inf}),
        ("norm_3", torch.nn.utils.clip_grad_norm_, {"max_norm": 3.0, "norm_type": 3.0}),
        ("norm_large", torch.nn.utils.clip_grad_norm_, {"max_norm": 1000.0}),
        ("value", torch.nn.utils.clip_grad_value_, {"clip_value": 0.7}),
    ]:
        params = [torch.zeros(g.shape, requires_grad=True) for g in grads]
        for p, g in zip(params, grads):
            p.grad = g.clone()
        if name == "value":
            fn(params, args["clip_value"])
            total = None
        else:
            total = fn(params, args["max_norm"], norm_type=args.get("norm_type", 2.0))
        out.append({"name": name, "args": {k: ("inf" if v == math.inf else v) for k, v in args.items()},
                    "grads": [enc(g) for g in grads], "clipped": [enc(p.grad) for p in params],
                    "total": None if total is None else enc(total)})
    return out


def optim_cases():
    p0 = [torch.randn(3, 4), torch.randn(4)]
    grads = [[torch.randn(3, 4), torch.randn(4)] for _ in range(6)]
    configs = [
        ("rmsprop", torch.optim.RMSprop, {"lr": 0.01}),
        ("rmsprop_all", torch.optim.RMSprop, {"lr": 0.01, "alpha": 0.9, "eps": 1e-6, "weight_decay": 0.1, "momentum": 0.8,
                                              "centered": True}),
        ("rmsprop_momentum", torch.optim.RMSprop, {"lr": 0.02, "momentum": 0.5}),
        ("adagrad", torch.optim.Adagrad, {"lr": 0.1}),
        ("adagrad_all", torch.optim.Adagrad, {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.1,
                                              "initial_accumulator_value": 0.3, "eps": 1e-8}),
        ("adam_amsgrad", torch.optim.Adam, {"lr": 0.01, "amsgrad": True, "weight_decay": 0.05}),
        ("adamw_amsgrad", torch.optim.AdamW, {"lr": 0.01, "amsgrad": True, "betas": (0.8, 0.9)}),
    ]
    cases = []
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
            "name": name, "class": cls.__name__,
            "opts": {k: list(v) if isinstance(v, tuple) else v for k, v in opts.items()},
            "params": [enc(p) for p in p0], "grads": [[enc(gi) for gi in g] for g in grads], "steps": steps,
            "final_state": {str(i + 1): {k: enc(v) for k, v in s.items() if torch.is_tensor(v)} for i, s in state.items()},
        })
    return cases


def sched_cases():
    S = torch.optim.lr_scheduler
    makers = [
        ("multistep", "SGD", lambda o: S.MultiStepLR(o, milestones=[2, 5, 5, 8], gamma=0.5)),
        ("exponential", "SGD", lambda o: S.ExponentialLR(o, gamma=0.9)),
        ("lambda", "SGD", lambda o: S.LambdaLR(o, lr_lambda=lambda e: 1 / (1 + e))),
        ("linear", "SGD", lambda o: S.LinearLR(o, start_factor=0.25, end_factor=1.0, total_iters=4)),
        ("linear_down", "SGD", lambda o: S.LinearLR(o, start_factor=1.0, end_factor=0.1, total_iters=6)),
        ("onecycle_cos", "SGD", lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=15)),
        ("onecycle_linear_3phase", "Adam", lambda o: S.OneCycleLR(o, max_lr=0.5, epochs=3, steps_per_epoch=5,
                                                                   anneal_strategy="linear", three_phase=True,
                                                                   pct_start=0.25)),
        ("warm_restarts", "SGD", lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, eta_min=0.01)),
        ("warm_restarts_mult", "SGD", lambda o: S.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=2)),
        ("sequential", "SGD", lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=3),
                                                           S.ExponentialLR(o, gamma=0.8)], milestones=[4])),
        ("sequential_cosine", "SGD", lambda o: S.SequentialLR(o, [S.ExponentialLR(o, gamma=0.9),
                                                                  S.CosineAnnealingLR(o, T_max=5)], milestones=[3])),
    ]
    cases = []
    for name, opt_name, make in makers:
        opt = getattr(torch.optim, opt_name)([torch.zeros(1, requires_grad=True)], lr=0.1,
                                             **({"momentum": 0.9} if opt_name == "SGD" else {}))
        s = make(opt)
        lrs, moms = [opt.param_groups[0]["lr"]], []
        for _ in range(14):
            opt.step()
            s.step()
            g = opt.param_groups[0]
            lrs.append(g["lr"])
            moms.append(g["betas"][0] if "betas" in g else g["momentum"])
        cases.append({"name": name, "optimizer": opt_name, "lrs": lrs, "momentums": moms})
    # ReduceLROnPlateau: lr after each metric
    metrics = [1.0, 0.9, 0.95, 0.95, 0.96, 0.89, 0.9, 0.9, 0.9, 0.9, 0.9, 0.5, 0.6, 0.6, 0.6, 0.6]
    for name, kw in [("plateau", {"patience": 2, "factor": 0.5}),
                     ("plateau_max_abs_cooldown", {"mode": "max", "threshold_mode": "abs", "threshold": 0.01,
                                                   "patience": 1, "cooldown": 2, "factor": 0.3, "min_lr": 0.005})]:
        opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
        s = S.ReduceLROnPlateau(opt, **kw)
        lrs = []
        for m in metrics:
            opt.step()
            s.step(m if kw.get("mode") != "max" else -m)
            lrs.append(opt.param_groups[0]["lr"])
        cases.append({"name": name, "opts": kw, "metrics": [m if kw.get("mode") != "max" else -m for m in metrics],
                      "lrs": lrs})
    return cases


def hook_case():
    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x * x
    y.retain_grad()
    y.register_hook(lambda g: g * 3)
    x.register_hook(lambda g: g.clamp(-5, 5))
    (y * torch.tensor([1.0, 2.0, -1.0])).sum().backward()
    return {"x": enc(x), "y_grad": enc(y.grad), "x_grad": enc(x.grad)}


def main():
    with open(os.path.join(HERE, "fixtures", "training.json"), "w") as f:
        json.dump({"clip": clip_cases(), "optimizers": optim_cases(), "schedulers": sched_cases(), "hooks": hook_case()}, f)


if __name__ == "__main__":
    main()
