# tests/gen_reduce_fixtures.py: PyTorch reference values for the reduction family
# (tests/reduce_spec.lua). Run from the repo root: /usr/bin/python3 tests/gen_reduce_fixtures.py
# Writes tests/fixtures/reduce.json: a list of cases {op, args, input, transpose, outputs}.
# Dims in the JSON are 1-based (Lua's); max/min/argmax indices are written 1-based.
import json
import torch

torch.manual_seed(22)

TORCH_DT = {"f32": torch.float32, "f64": torch.float64, "i64": torch.int64,
            "i32": torch.int32, "u8": torch.uint8, "bool": torch.bool}
DT_NAME = {v: k for k, v in TORCH_DT.items()}


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def formula_input(shape, dt):
    """large inputs are not stored: value i (0-based, row-major) is ((i * 7919) % 10007) / 100 - 5,
    exact in doubles on both sides and distinct for fewer than 10007 elements"""
    vals = [((i * 7919) % 10007) / 100 - 5 for i in range(numel(shape))]
    return torch.tensor(vals, dtype=torch.float64).reshape(shape).to(TORCH_DT[dt])


def make_input(shape, dt, distinct=False):
    n = numel(shape)
    if distinct:  # no ties, so the index of a max/min is unambiguous
        v = torch.randperm(n).reshape(shape).to(torch.float64) - n // 2
        if dt in ("f32", "f64"):
            v = v + torch.rand(shape, dtype=torch.float64) * 0.5
        if dt == "u8":
            v = v + n // 2
        return v.to(TORCH_DT[dt])
    if dt in ("f32", "f64"):
        return torch.randn(shape, dtype=TORCH_DT[dt])
    if dt == "bool":
        return torch.rand(shape) > 0.3
    lo, hi = (0, 4) if dt == "u8" else (-3, 4)
    return torch.randint(lo, hi, shape).to(TORCH_DT[dt])


def tensor_json(t):
    t = t.contiguous()
    vals = t.reshape(-1).tolist()
    if t.dtype == torch.bool:
        vals = [1 if v else 0 for v in vals]
    if t.dtype == torch.float32:  # 9 significant digits give back the same f32
        vals = [float("%.9g" % v) for v in vals]
    return {"shape": list(t.shape), "dtype": DT_NAME[t.dtype], "data": vals}


def tdims(dims):  # 1-based Lua dims -> torch dims
    if dims is None:
        return None
    return [d - 1 if d > 0 else d for d in dims]


def run(op, x, args):
    dims, keep = tdims(args.get("dims")), args.get("keepdim", False)
    alld = tuple(range(x.dim())) if dims is None else tuple(d % x.dim() for d in dims)
    if op in ("sum", "mean", "amax", "amin", "logsumexp"):
        f = {"sum": torch.sum, "mean": torch.mean, "amax": torch.amax, "amin": torch.amin,
             "logsumexp": torch.logsumexp}[op]
        return [f(x, dim=alld, keepdim=keep)]
    if op in ("var", "std"):
        f = torch.var if op == "var" else torch.std
        return [f(x, dim=alld, correction=args.get("correction", 1), keepdim=keep)]
    if op in ("prod", "all", "any"):  # torch takes one dim: reduce one at a time, last first
        f = {"prod": torch.prod, "all": torch.all, "any": torch.any}[op]
        y = x
        for d in sorted(alld, reverse=True):
            y = f(y, dim=d, keepdim=True)
        if not keep:
            y = y.reshape([s for i, s in enumerate(x.shape) if i not in alld])
        return [y.bool() if op != "prod" else y]
    if op in ("max", "min"):
        if dims is None:
            return [x.max() if op == "max" else x.min()]
        v, i = (torch.max if op == "max" else torch.min)(x, dim=dims[0], keepdim=keep)
        return [v, i + 1]
    if op in ("argmax", "argmin"):
        f = torch.argmax if op == "argmax" else torch.argmin
        if dims is None:
            return [f(x, keepdim=keep) + 1] if keep else [f(x) + 1]
        return [f(x, dim=dims[0], keepdim=keep) + 1]
    d = tdims([args["dim"]])[0]
    xf = x if x.dtype.is_floating_point or op == "cumsum" else x.float()
    return [{"softmax": torch.softmax, "log_softmax": torch.log_softmax, "cumsum": torch.cumsum}[op](xf, d)]


cases = []


def case(op, shape, dt, args, transpose=None, distinct=False):
    big = numel(shape) > 1000
    x = formula_input(shape, dt) if big else make_input(shape, dt, distinct)
    xin = x
    if transpose:  # the Lua side applies the same transpose view to the contiguous input
        x = x.transpose(transpose[0] - 1, transpose[1] - 1)
    outs = run(op, x, args)
    inp = {"shape": shape, "dtype": dt, "formula": True} if big else tensor_json(xin)
    cases.append({"op": op, "args": args, "input": inp, "transpose": transpose,
                  "outputs": [tensor_json(o) for o in outs]})


FLOATS = ["f32", "f64"]
ALL = ["f32", "f64", "i64", "i32", "u8", "bool"]
DIM_FORMS = [{}, {"dims": [2]}, {"dims": [2], "keepdim": True}, {"dims": [1, 3]},
             {"dims": [1, 3], "keepdim": True}, {"dims": [-1]}, {"dims": [1, 2, 3], "keepdim": True}]

for op in ["sum", "mean", "amax", "amin", "logsumexp", "var", "std", "prod", "all", "any"]:
    dts = FLOATS if op in ("mean", "var", "std", "logsumexp") else ALL
    if op in ("amax", "amin"):
        dts = ["f32", "f64", "i64", "i32", "u8"]
    for dt in dts:
        for args in DIM_FORMS:
            case(op, [3, 4, 5], dt, dict(args))
        case(op, [5, 6], dt, {"dims": [1]}, transpose=[1, 2])  # non-contiguous input
        case(op, [4, 3, 7], dt, {"dims": [2, 3]}, transpose=[1, 3])
for op in ["var", "std"]:
    for corr in [0, 2]:
        case(op, [4, 6], "f64", {"dims": [2], "correction": corr})
# long rows and a large multi-block reduction (several DS_CHUNK blocks)
case("sum", [3, 5000], "f64", {"dims": [2]})
case("sum", [9000, 3], "f64", {"dims": [1]})
case("mean", [70, 300], "f32", {})
case("var", [2, 9000], "f64", {"dims": [2]})
case("logsumexp", [300, 40], "f64", {"dims": [1]}, transpose=[1, 2])
case("sum", [300, 40], "i32", {"dims": [1, 2]})
# columns side by side over several blocks (the kernel's strided "cols" path)
case("sum", [5000, 20], "f32", {"dims": [1]})
case("mean", [4500, 10], "f64", {"dims": [1], "keepdim": True})
case("amax", [5000, 12], "f32", {"dims": [1]})
case("var", [30, 200], "f32", {"dims": [1]})

for op in ["max", "min", "argmax", "argmin"]:
    for dt in ["f32", "f64", "i64", "i32", "u8"]:
        for args in [{}, {"dims": [2]}, {"dims": [2], "keepdim": True}, {"dims": [-1]}, {"dims": [1]}]:
            if op in ("max", "min") and args.get("keepdim") and "dims" not in args:
                continue
            case(op, [3, 4, 5], dt, dict(args), distinct=True)
        case(op, [5, 6], dt, {"dims": [2]}, transpose=[1, 2], distinct=True)
    case(op, [2, 5000], "f32", {"dims": [2]}, distinct=True)
    case(op, [2, 5000], "f64", {}, distinct=True)
    case(op, [9000, 10], "f64", {"dims": [1]})  # ties (values repeat every 10007): the first index wins

for op in ["softmax", "log_softmax"]:
    for dt in FLOATS:
        for d in [1, 2, -1]:
            case(op, [3, 4, 5], dt, {"dim": d})
        case(op, [5, 6], dt, {"dim": 2}, transpose=[1, 2])
        case(op, [4, 37], dt, {"dim": -1})
    case(op, [3, 4], "i64", {"dim": 2})
for dt in ALL:
    for d in [1, 3, -2]:
        case("cumsum", [3, 4, 5], dt, {"dim": d})
    case("cumsum", [5, 6], dt, {"dim": 2}, transpose=[1, 2])

with open("tests/fixtures/reduce.json", "w") as f:
    json.dump(cases, f, separators=(",", ":"))
print(len(cases), "cases")
