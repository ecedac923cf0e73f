# tests/gen_optim_more_fixtures.py: PyTorch 1.13 references for tests/optim_more_spec.lua, written to
# tests/fixtures/optim_more.json: optimizer trajectories (the weights after every step, from fixed gradients, and
# the final state) of RAdam, NAdam, Adamax, Adadelta and of every optimizer with maximize, under several option
# sets; learning-rate (and momentum) sequences of ConstantLR, PolynomialLR, MultiplicativeLR, CyclicLR,
# ChainedScheduler and SequentialLR over 30 steps, and the closed forms of step(epoch).
# Run: /usr/bin/python3 tests/gen_optim_more_fixtures.py
import json
import os
import warnings

import torch
from torch.optim import lr_scheduler as S

warnings.simplefilter("ignore")  # step(epoch)'s deprecation warning
torch.manual_seed(0)
HERE = os.path.dirname(os.path.abspath(__file__))
O = torch.optim


def enc(t):
    if not torch.is_tensor(t):  # Adadelta's step is a Python int in 1.13
        t = torch.tensor(float(t))
    t = t.detach()
    dt = {torch.float32: "f32", torch.float64: "f64"}[t.dtype]
    return {"shape": list(t.shape), "dtype": dt, "data": t.reshape(-1).tolist()}


# name, class, options (Lua's: betas as a list), dtype, steps, negate: torch 1.13's RAdam and NAdam have no
# maximize; later torch negates the gradient first, which is 1.13 run on the negated gradients
OPTIMIZERS = [
    ("radam", "RAdam", {"lr": 0.01}, torch.float32, 10, False),
    ("radam_rectified", "RAdam", {"lr": 0.01, "betas": [0.8, 0.9], "eps": 1e-6, "weight_decay": 0.05},
     torch.float32, 10, False),
    ("radam_maximize", "RAdam", {"lr": 0.01, "betas": [0.8, 0.9], "weight_decay": 0.05, "maximize": True},
     torch.float32, 10, True),
    ("radam_f64", "RAdam", {"lr": 0.01, "betas": [0.85, 0.9]}, torch.float64, 10, False),
    ("nadam", "NAdam", {}, torch.float32, 8, False),
    ("nadam_options", "NAdam", {"lr": 0.01, "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": 0.1,
                                "momentum_decay": 0.01}, torch.float32, 8, False),
    ("nadam_maximize", "NAdam", {"lr": 0.01, "weight_decay": 0.1, "maximize": True}, torch.float32, 8, True),
    ("nadam_f64", "NAdam", {"lr": 0.01, "momentum_decay": 0.02}, torch.float64, 8, False),
    ("adamax", "Adamax", {}, torch.float32, 8, False),
    ("adamax_options", "Adamax", {"lr": 0.02, "betas": [0.8, 0.95], "eps": 1e-4, "weight_decay": 0.1},
     torch.float32, 8, False),
    ("adamax_maximize", "Adamax", {"lr": 0.02, "weight_decay": 0.1, "maximize": True}, torch.float32, 8, False),
    ("adamax_f64", "Adamax", {"lr": 0.02, "betas": [0.7, 0.9]}, torch.float64, 8, False),
    ("adadelta", "Adadelta", {}, torch.float32, 8, False),
    ("adadelta_options", "Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-5, "weight_decay": 0.1},
     torch.float32, 8, False),
    ("adadelta_maximize", "Adadelta", {"lr": 0.5, "rho": 0.95, "maximize": True}, torch.float32, 8, False),
    ("adadelta_f64", "Adadelta", {"lr": 0.5, "rho": 0.8}, torch.float64, 8, False),
    ("sgd_maximize", "SGD", {"lr": 0.1, "weight_decay": 0.05, "maximize": True}, torch.float32, 6, False),
    ("sgd_momentum_maximize", "SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01,
                                      "maximize": True}, torch.float32, 6, False),
    ("adam_maximize", "Adam", {"lr": 0.01, "weight_decay": 0.1, "amsgrad": True, "maximize": True},
     torch.float32, 6, False),
    ("adamw_maximize", "AdamW", {"lr": 0.01, "betas": [0.85, 0.99], "maximize": True}, torch.float32, 6, False),
    ("rmsprop_maximize", "RMSprop", {"lr": 0.01, "weight_decay": 0.1, "maximize": True}, torch.float32, 6, False),
    ("rmsprop_full_maximize", "RMSprop", {"lr": 0.01, "momentum": 0.5, "centered": True, "maximize": True},
     torch.float32, 6, False),
    ("adagrad_maximize", "Adagrad", {"lr": 0.1, "lr_decay": 0.01, "weight_decay": 0.1,
                                     "initial_accumulator_value": 0.1, "maximize": True}, torch.float32, 6, False),
]


def optimizer_case(name, cls, opts, dtype, nsteps, negate):
    p0 = [torch.randn(3, 4, dtype=dtype), torch.randn(5, dtype=dtype)]
    grads = [[torch.randn(3, 4, dtype=dtype), torch.randn(5, dtype=dtype)] for _ in range(nsteps)]
    params = [p.clone().requires_grad_() for p in p0]
    topts = {k: tuple(v) if isinstance(v, list) else v for k, v in opts.items()}
    if negate:
        del topts["maximize"]
    opt = getattr(O, cls)(params, **topts)
    steps = []
    for g in grads:
        for p, gi in zip(params, g):
            p.grad = -gi if negate else gi.clone()
        opt.step()
        steps.append([enc(p) for p in params])
    state = opt.state_dict()["state"]
    return {
        "name": name, "class": cls, "opts": opts,
        "params": [enc(p) for p in p0],
        "grads": [[enc(gi) for gi in g] for g in grads],
        "steps": steps,
        "final_state": {str(i + 1): {k: enc(v) for k, v in s.items() if v is not None} for i, s in state.items()},
    }


# name -> a function of the optimizer making the scheduler (tests/optim_more_spec.lua builds the same by name)
SCHEDULERS = {
    "constant": lambda o: S.ConstantLR(o, factor=0.5, total_iters=4),
    "constant_default": lambda o: S.ConstantLR(o),
    "polynomial": lambda o: S.PolynomialLR(o, total_iters=6, power=2.0),
    "polynomial_default": lambda o: S.PolynomialLR(o),
    "polynomial_sqrt": lambda o: S.PolynomialLR(o, total_iters=20, power=0.5),
    "multiplicative": lambda o: S.MultiplicativeLR(o, lr_lambda=lambda e: 0.95),
    "multiplicative_epoch": lambda o: S.MultiplicativeLR(o, lr_lambda=lambda e: 1 / (1 + 0.1 * e)),
    "cyclic_triangular": lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4),
    "cyclic_triangular2": lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3, step_size_down=5,
                                               mode="triangular2", base_momentum=0.85, max_momentum=0.95),
    "cyclic_exp_range": lambda o: S.CyclicLR(o, base_lr=0.001, max_lr=0.1, step_size_up=4, mode="exp_range",
                                             gamma=0.9),
    "cyclic_scale_fn_cycle": lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2, step_size_down=3,
                                                  scale_fn=lambda x: 1.0 / (1.0 + 0.1 * x)),
    "cyclic_scale_fn_iterations": lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=3,
                                                       scale_fn=lambda x: 1.0 / (1.0 + 0.1 * x),
                                                       scale_mode="iterations"),
    "cyclic_groups": lambda o: S.CyclicLR(o, base_lr=[0.01, 0.02], max_lr=[0.1, 0.05], step_size_up=3,
                                          base_momentum=[0.8, 0.7], max_momentum=[0.9, 0.95]),
    "cyclic_no_momentum": lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=5, cycle_momentum=False),
    "chained": lambda o: S.ChainedScheduler([S.ConstantLR(o, factor=0.1, total_iters=2),
                                             S.ExponentialLR(o, gamma=0.9)]),
    "chained_three": lambda o: S.ChainedScheduler([S.LinearLR(o, start_factor=0.5, total_iters=5),
                                                   S.MultiplicativeLR(o, lr_lambda=lambda e: 0.97),
                                                   S.PolynomialLR(o, total_iters=20, power=1.5)]),
    "sequential_constant_polynomial": lambda o: S.SequentialLR(
        o, [S.ConstantLR(o, factor=0.5, total_iters=3), S.PolynomialLR(o, total_iters=8)], milestones=[4]),
    "sequential_exponential_constant": lambda o: S.SequentialLR(
        o, [S.ExponentialLR(o, gamma=0.9), S.ConstantLR(o, factor=0.25, total_iters=6)], milestones=[5]),
    "sequential_three": lambda o: S.SequentialLR(
        o, [S.LinearLR(o, start_factor=0.2, total_iters=4), S.MultiplicativeLR(o, lr_lambda=lambda e: 0.9),
            S.StepLR(o, step_size=3, gamma=0.5)], milestones=[6, 15]),
}
TWO_GROUPS = {"cyclic_groups"}
NO_MOMENTUM = {"cyclic_no_momentum"}


def optimizer_for(name):
    ps = [torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)]
    momentum = 0 if name in NO_MOMENTUM else 0.9
    if name in TWO_GROUPS:
        return O.SGD([{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.2}], lr=0.1, momentum=momentum)
    return O.SGD([ps[0]], lr=0.1, momentum=momentum)


def scheduler_case(name, make, nsteps=30):
    opt = optimizer_for(name)
    s = make(opt)
    groups = lambda key: [g[key] for g in opt.param_groups]
    lrs, momentums, last = [groups("lr")], [groups("momentum")], [list(s.get_last_lr())]
    for _ in range(nsteps):
        opt.step()
        s.step()
        lrs.append(groups("lr"))
        momentums.append(groups("momentum"))
        last.append(list(s.get_last_lr()))
    return {"name": name, "lrs": lrs, "momentums": momentums, "last_lrs": last}


# step(epoch): the closed form where the scheduler has one
EPOCHS = [3, 1, 7, 4, 10, 0, 2]
CLOSED = {
    "constant": lambda o: S.ConstantLR(o, factor=0.5, total_iters=4),
    "polynomial": lambda o: S.PolynomialLR(o, total_iters=6, power=2.0),
    "multiplicative": lambda o: S.MultiplicativeLR(o, lr_lambda=lambda e: 0.95),
    "cyclic_triangular": lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4),
}


def closed_case(name, make):
    opt = optimizer_for(name)
    s = make(opt)
    lrs = []
    for e in EPOCHS:
        opt.step()
        s.step(e)
        lrs.append(opt.param_groups[0]["lr"])
    return {"name": name, "epochs": EPOCHS, "lrs": lrs}


def main():
    out = {
        "optimizers": [optimizer_case(*c) for c in OPTIMIZERS],
        "schedulers": [scheduler_case(n, m) for n, m in SCHEDULERS.items()],
        "closed_forms": [closed_case(n, m) for n, m in CLOSED.items()],
    }
    path = os.path.join(HERE, "fixtures", "optim_more.json")
    with open(path, "w") as f:
        json.dump(out, f)
    print("wrote", path)


if __name__ == "__main__":
    main()
