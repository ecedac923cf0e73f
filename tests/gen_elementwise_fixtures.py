# gen_elementwise_fixtures.py: PyTorch reference values for every elementwise op of ds
# (tests/elementwise_spec.lua). Run: /usr/bin/python3 tests/gen_elementwise_fixtures.py
# Writes tests/fixtures/elementwise.json (the unary float ops of tests/unary_cases.txt get their cases from its
# rows). Each case: op (ds function name or "op+" etc. for Lua
# operators), inputs (a tensor with an optional permutation making it a strided view, or a Lua
# number), attrs, the expected output, and a tolerance class:
#   exact  bit-exact (NaN == NaN);  ulp2  at most 2 f32 ulps from torch;
#   rtol6  f32, |d| <= 1e-6 |want| + atol;  rtol12  f64, |d| <= 1e-12 |want| + 1e-15.
import json
import math
import numpy as np
import os
import torch
import torch.nn.functional as F
import unary_cases

torch.manual_seed(1)
DT = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64", torch.int32: "i32",
      torch.uint8: "u8", torch.bool: "bool"}
TD = {v: k for k, v in DT.items()}
FLOATS = (torch.float32, torch.float64)
INTS = (torch.int64, torch.int32)


def enc(t):
    t = t.detach()
    data = t.reshape(-1).tolist()
    if t.dtype == torch.bool:
        data = [1 if v else 0 for v in data]
    return {"shape": list(t.shape), "dtype": DT[t.dtype], "data": data}


def tin(t, perm=None):
    """a tensor input; with perm, ds builds the contiguous base and permutes it (a strided view)"""
    if perm is None:
        return {"tensor": enc(t)}, t
    base = t.permute(*[perm.index(i) for i in range(len(perm))]).contiguous()
    view = base.permute(*perm)
    assert torch.equal(view, t) or (t.is_floating_point() and torch.allclose(view, t, equal_nan=True))
    return {"tensor": enc(base), "perm": [p + 1 for p in perm]}, view


def rnd(shape, dt, lo=-20, hi=20):
    if dt in FLOATS:
        return (torch.randn(shape, dtype=torch.float64) * 3).to(dt)
    if dt == torch.bool:
        return torch.rand(shape) > 0.5
    if dt == torch.uint8:
        return torch.randint(0, 256, shape, dtype=dt)
    return torch.randint(lo, hi + 1, shape, dtype=dt)


cases = []


def add(op, ins, out, tol="exact", attrs=None):
    c = {"op": op, "inputs": ins, "out": enc(out), "tol": tol}
    if attrs:
        c["attrs"] = attrs
    cases.append(c)


SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, math.inf, -math.inf, math.nan, 1e-30, -1e-30, 1e30, -1e30,
           1e-40, 88.0, 88.7, 89.0, -87.0, -88.0, -100.0, -104.0, -110.0, 0.625, -0.625, 0.99, 1.01, 3.9, 9.5, 20.0]


def sample(dt, lo, hi, n):
    """n values spread over [lo, hi] (half evenly, half random), plus the special values"""
    even = torch.linspace(lo, hi, n // 2, dtype=torch.float64)
    r = torch.rand(n - n // 2, dtype=torch.float64) * (hi - lo) + lo
    return torch.cat([even, r, torch.tensor(SPECIAL, dtype=torch.float64)]).to(dt)


# ---- unary float math: f32 against torch within 2 ulps (exp/log/tanh/erf) or rtol 1e-6 ----
UNARY_MATH = {
    "exp": (torch.exp, -110, 90, "ulp2"), "log": (torch.log, 0, 50, "ulp2"),
    "tanh": (torch.tanh, -10, 10, "ulp2"), "erf": (torch.erf, -5, 5, "ulp2"),
    "sqrt": (torch.sqrt, 0, 100, "exact"), "rsqrt": (torch.rsqrt, 0, 100, "rtol6"),
    "sin": (torch.sin, -20, 20, "rtol6"), "cos": (torch.cos, -20, 20, "rtol6"),
    "sigmoid": (torch.sigmoid, -30, 30, "rtol6"), "silu": (F.silu, -30, 30, "rtol6"),
    "gelu": (F.gelu, -8, 8, "rtol6"), "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), -8, 8, "rtol6"),
}
for name, (fn, lo, hi, tol) in UNARY_MATH.items():
    n = 600 if tol == "ulp2" else 120
    x = sample(torch.float32, lo, hi, n)
    if name == "log":  # tiny and subnormal inputs too
        x = torch.cat([x, torch.tensor([1e-38, 1e-42, 3e-45, 1e-10, 1e20, 3e38])])
    if name in ("exp", "log", "tanh", "erf"):  # small magnitudes where relative error shows
        x = torch.cat([x, torch.logspace(-30, 0, 100).to(torch.float32), -torch.logspace(-8, 0, 40).to(torch.float32)])
    i, _ = tin(x)
    add(name, [i], fn(x), tol)
    x64 = sample(torch.float64, lo, hi, 60)
    i, _ = tin(x64)
    add(name, [i], fn(x64), "rtol12")
# integer inputs promote to f32
for name in ("exp", "log", "sqrt", "sin", "sigmoid", "tanh"):
    for dt in (torch.int64, torch.int32, torch.uint8, torch.bool):
        x = rnd((7,), dt, 0, 9)
        i, _ = tin(x)
        add(name, [i], UNARY_MATH[name][0](x), "rtol6")

# ---- unary on every signed dtype, strided views ----
for name, fn in {"abs": torch.abs, "neg": torch.neg, "relu": torch.relu, "sign": torch.sign}.items():
    for dt in FLOATS + INTS:
        x = rnd((3, 4), dt)
        if dt in FLOATS:
            x[0, :] = torch.tensor([0.0, -0.0, math.nan, -math.inf])
        i, _ = tin(x)
        add(name, [i], fn(x))
        i, v = tin(rnd((4, 3), dt).t(), [1, 0])
        add(name, [i], fn(v))
x = torch.rand(5) > 0.5
add("logical_not", [tin(x)[0]], torch.logical_not(x))
x = torch.tensor([0.0, 2.0, -1.0, math.nan])
add("logical_not", [tin(x)[0]], torch.logical_not(x))

# ---- binary arithmetic: dtypes x broadcasting x strided views ----
SHAPES = [((3, 4), (3, 4)), ((3, 1, 4), (2, 4)), ((4,), (3, 4)), ((), (3,)), ((2, 3), (1,)), ((5,), ())]
ARITH = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
         "maximum": torch.maximum, "minimum": torch.minimum}


def operands(name, dt, sa, sb):
    a, b = rnd(sa, dt), rnd(sb, dt)
    if name == "pow":
        if dt in FLOATS:
            a = a.abs() + 0.1
            b = (torch.rand(sb, dtype=torch.float64) * 5 - 2).to(dt)
            if b.numel() > 3:
                b.view(-1)[:3] = torch.tensor([2.0, 0.5, 1.0], dtype=dt)
        else:
            a, b = rnd(sa, dt, -5, 5), rnd(sb, dt, 0, 6)
    if name == "div" and dt not in FLOATS:
        b = torch.where(b == 0, torch.ones_like(b), b)
    if name in ("maximum", "minimum") and dt in FLOATS and a.numel() > 1:
        a.view(-1)[0] = math.nan
    return a, b


for name, fn in ARITH.items():
    for dt in FLOATS + INTS + (torch.uint8,):
        if dt == torch.uint8 and name in ("div", "pow"):
            continue
        for sa, sb in SHAPES:
            a, b = operands(name, dt, sa, sb)
            tol = "rtol6" if (name == "pow" and dt == torch.float32) else \
                  "rtol12" if (name == "pow" and dt == torch.float64) else "exact"
            add(name, [tin(a)[0], tin(b)[0]], fn(a, b), tol)
        a, b = operands(name, dt, (4, 3), (3, 4))
        ia, va = tin(a.t(), [1, 0])
        add(name, [ia, tin(b)[0]], fn(va, b), "rtol6" if name == "pow" and dt == torch.float32 else
            "rtol12" if name == "pow" else "exact")
# integer floor division (torch.div rounding_mode="floor")
for dt in INTS:
    a, b = rnd((4, 5), dt), rnd((5,), dt)
    b = torch.where(b == 0, torch.ones_like(b), b)
    add("floor_divide", [tin(a)[0], tin(b)[0]], torch.div(a, b, rounding_mode="floor"))

# ---- Lua operators with tensors and numbers on either side ----
OPS = {"op+": lambda a, b: a + b, "op-": lambda a, b: a - b, "op*": lambda a, b: a * b,
       "op/": lambda a, b: a / b, "op^": lambda a, b: a ** b}
for op, fn in OPS.items():
    for dt in (torch.float32, torch.float64, torch.int64, torch.int32):
        x = rnd((2, 3), dt)
        if op == "op^":
            x = x.abs() + 1 if dt in FLOATS else rnd((2, 3), dt, 0, 4)
        if op == "op/":
            x = torch.where(x == 0, torch.ones_like(x), x)
        y = rnd((3,), dt) if op != "op^" else (rnd((3,), dt, 0, 3).abs() if dt not in FLOATS else rnd((3,), dt).abs())
        tol = "rtol6" if op == "op^" else "exact"
        add(op, [tin(x)[0], tin(y)[0]], fn(x, y), tol)
        for num in ((2, 2.5) if op != "op^" else (2, 3, 0.5)):
            if op == "op^" and dt not in FLOATS and num != int(num):
                continue
            add(op, [tin(x)[0], {"number": num}], fn(x, num), tol)
            if op == "op^" and dt not in FLOATS:
                continue  # torch.pow(int, int tensor) is defined, but keep exponents nonnegative
            # torch computes number / x as reciprocal(x) * number (two roundings); ds divides once
            rtol = tol if op != "op/" else ("rtol12" if dt == torch.float64 else "rtol6")
            add(op, [{"number": num}, tin(x)[0]], fn(num, x), rtol)
    x = rnd((2, 3), torch.float32)
    add("op-unm", [tin(x)[0]], -x)
x = rnd((2, 3), torch.int64)
add("op-unm", [tin(x)[0]], -x)

# ---- comparisons and logic on every dtype, with numbers and NaN ----
CMP = {"lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge, "eq": torch.eq, "ne": torch.ne}
for name, fn in CMP.items():
    for dt in FLOATS + INTS + (torch.uint8, torch.bool):
        a, b = rnd((3, 4), dt, -3, 3), rnd((4,), dt, -3, 3)
        if dt in FLOATS:
            a[0, 0] = math.nan
            a[1, :] = b
        add(name, [tin(a)[0], tin(b)[0]], fn(a, b))
        if dt != torch.bool:
            add(name, [tin(a)[0], {"number": 1}], fn(a, 1))
    a, b = rnd((2, 3), torch.float32), rnd((2, 3), torch.int64, -2, 2)
    add(name, [tin(a)[0], tin(b)[0]], fn(a, b))  # mixed dtypes promote first
for name, fn in {"logical_and": torch.logical_and, "logical_or": torch.logical_or, "logical_xor": torch.logical_xor}.items():
    a, b = torch.rand(3, 4) > 0.5, torch.rand(4) > 0.5
    add(name, [tin(a)[0], tin(b)[0]], fn(a, b))
    a, b = rnd((3,), torch.float32), torch.tensor([0, 1, 2])
    a[0] = 0.0
    add(name, [tin(a)[0], tin(b)[0]], fn(a, b))

# ---- where, clamp ----
for dt in FLOATS + INTS + (torch.uint8, torch.bool):
    c = torch.rand(3, 1) > 0.5
    a, b = rnd((3, 4), dt), rnd((4,), dt)
    add("where", [tin(c)[0], tin(a)[0], tin(b)[0]], torch.where(c, a, b))
a = rnd((2, 3), torch.float32)
add("where", [tin(a > 0)[0], tin(a)[0], {"number": 0}], torch.where(a > 0, a, torch.zeros(())))
for dt, lo, hi in [(torch.float32, -1.0, 1.0), (torch.float32, None, 0.5), (torch.float32, -0.5, None),
                   (torch.float64, -2.0, 2.5), (torch.int64, -3, 4), (torch.int32, 0, None), (torch.uint8, 10, 100),
                   (torch.int64, -2.5, 3.5)]:
    x = rnd((3, 4), dt)
    if dt in FLOATS:
        x[0, 0] = math.nan
    attrs = {}
    if lo is not None:
        attrs["min"] = lo
    if hi is not None:
        attrs["max"] = hi
    add("clamp", [tin(x)[0]], torch.clamp(x, lo, hi), attrs=attrs)

# ---- softplus with default and given (beta, threshold) ----
for dt, tol in ((torch.float32, "rtol6"), (torch.float64, "rtol12")):
    x = sample(dt, -30, 30, 120)
    for attrs in ({}, {"beta": 2.0, "threshold": 5.0}):
        add("softplus", [tin(x)[0]], F.softplus(x, **attrs), tol, attrs=attrs)

# ---- astype between every pair of dtypes (values representable in every target) ----
for src in FLOATS + INTS + (torch.uint8, torch.bool):
    if src in FLOATS:
        x = torch.tensor([0.0, 1.0, 2.75, 7.5, 100.25, 255.0, 0.5, 3.0], dtype=src)
    elif src == torch.bool:
        x = torch.tensor([True, False, True])
    else:
        x = torch.tensor([0, 1, 2, 7, 100, 255, 3], dtype=src)
    for dst in FLOATS + INTS + (torch.uint8, torch.bool):
        add("astype", [tin(x)[0]], x.to(dst), attrs={"dtype": DT[dst]})
x = torch.tensor([-3.7, -0.5, 2.5, -100.9], dtype=torch.float32)
for dst in (torch.int64, torch.int32, torch.bool):
    add("astype", [tin(x)[0]], x.to(dst), attrs={"dtype": DT[dst]})
x = torch.tensor([2 ** 40 + 1, -(2 ** 35) - 3, 70000], dtype=torch.int64)
for dst in (torch.int32, torch.uint8, torch.float64):
    add("astype", [tin(x)[0]], x.to(dst), attrs={"dtype": DT[dst]})

# ---- log1p, expm1, log2; rounding (half to even) on every numeric dtype; fmod and remainder ----
for name, fn, lo, hi in (("log1p", torch.log1p, -0.999, 50), ("expm1", torch.expm1, -20, 20), ("log2", torch.log2, 0, 100)):
    x = torch.cat([sample(torch.float32, lo, hi, 120), torch.logspace(-30, 0, 40).to(torch.float32)])
    add(name, [tin(x)[0]], fn(x), "rtol6")
    x = sample(torch.float64, lo, hi, 60)
    add(name, [tin(x)[0]], fn(x), "rtol12")
for name, fn in {"floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc}.items():
    for dt in FLOATS + INTS + (torch.uint8,):
        if dt in FLOATS:
            x = torch.cat([torch.tensor(SPECIAL + [2.5, -2.5, 0.5000001, -1.5, 3.5], dtype=torch.float64), torch.randn(20, dtype=torch.float64) * 5]).to(dt)
        else:
            x = rnd((12,), dt)
        add(name, [tin(x)[0]], fn(x))
        i, v = tin(rnd((4, 3), dt).t(), [1, 0])
        add(name, [i], fn(v))
for name, fn in {"fmod": torch.fmod, "remainder": torch.remainder}.items():
    for dt in FLOATS + INTS:
        a, b = rnd((3, 4), dt), rnd((4,), dt, 1, 6)
        b = b * torch.tensor([1, -1, 1, -1], dtype=dt)
        if dt in FLOATS:
            a[0, :] = torch.tensor([0.0, -0.0, math.inf, math.nan])
        add(name, [tin(a)[0], tin(b)[0]], fn(a, b))
        add(name, [tin(a)[0], {"number": 3}], fn(a, 3))
    x = rnd((2, 3), torch.float64)
    for num in (2, -2.5):
        add("op%" if name == "remainder" else name, [tin(x)[0], {"number": num}], fn(x, num))

# ---- the unary float ops of tests/unary_cases.txt (the trigonometric and hyperbolic functions and their inverses
# first): f32 and f64 over [lo, hi], integers promoted to f32, a strided view ----
TRIG_SPECIAL = [0.0, -0.0, math.nan, math.inf, -math.inf, 1e-30, -1e-30, 1.5, -2.0]
for name, fn, lo, hi in unary_cases.rows():
    fn = eval(fn, {"torch": torch, "F": F})
    for dt, tol in ((torch.float32, "rtol6"), (torch.float64, "rtol12")):
        even = torch.linspace(lo, hi, 60, dtype=torch.float64)
        r = torch.rand(60, dtype=torch.float64) * (hi - lo) + lo
        x = torch.cat([even, r, torch.tensor(TRIG_SPECIAL, dtype=torch.float64)]).to(dt)
        add(name, [tin(x)[0]], fn(x), tol)
    x = rnd((7,), torch.int64, 1, 3)  # ds promotes it to f32, as torch.tan does (F.hardswish takes no integers)
    add(name, [tin(x)[0]], fn(x.to(torch.float32)), "rtol6")
    i, v = tin((torch.rand(4, 3, dtype=torch.float64) * (hi - lo) + lo).to(torch.float32).t(), [1, 0])
    add(name, [i], fn(v), "rtol6")

# ---- hardsigmoid, not a tests/unary_cases.txt row: PyTorch 1.13's f64 gradient multiplies by 1/6 rounded to f32
# (docs/differences.md), so its differential row is hand-written in f32; the forward is bit-exact in both ----
for dt in FLOATS:
    x = torch.cat([torch.linspace(-5, 5, 81, dtype=torch.float64), torch.tensor(TRIG_SPECIAL + [3.0, -3.0])]).to(dt)
    add("hardsigmoid", [tin(x)[0]], F.hardsigmoid(x), "exact")

# ---- rounding to float16 / bfloat16, kept in the input's dtype (f64 -> float16 is NumPy's direct rounding;
# bfloat16 from f64 on values exact in f32, where torch's route through f32 rounds once) ----
R16 = [65504.0, 65519.99, 65520.0, -65520.0, 1e5, 6.1e-5, 6.0e-5, 1e-7, 2.98e-8, 2.99e-8, 5.96e-8, 1e-9, -1e-9,
       0.0, -0.0, 1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, 3.4e38, -3.39e38, 1e-39,
       math.nan, math.inf, -math.inf]
x32 = torch.cat([torch.tensor(R16, dtype=torch.float32), (torch.randn(60, dtype=torch.float64) * 1000).to(torch.float32)])
x64 = torch.cat([torch.tensor(R16, dtype=torch.float64), torch.randn(60, dtype=torch.float64) * 1000])
add("round_f16", [tin(x32)[0]], x32.half().float())
add("round_f16", [tin(x64)[0]], torch.from_numpy(x64.numpy().astype(np.float16).astype(np.float64)))
add("round_bf16", [tin(x32)[0]], x32.bfloat16().float())
add("round_bf16", [tin(x32.double())[0]], x32.bfloat16().double())
for name in ("round_f16", "round_bf16"):
    x = rnd((5,), torch.int64, -300, 300)
    add(name, [tin(x)[0]], x.float().half().float() if name == "round_f16" else x.float().bfloat16().float())

# ---- bitwise ops on every integer dtype (shift counts within the dtype's width) ----
BITWISE = {"bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
           "bitwise_left_shift": lambda a, b: a << b, "bitwise_right_shift": lambda a, b: a >> b}
WIDTH = {torch.int64: 64, torch.int32: 32, torch.uint8: 8}
for dt in INTS + (torch.uint8,):
    lo, hi = (0, 255) if dt == torch.uint8 else (-2 ** 20, 2 ** 20)
    for name, fn in BITWISE.items():
        a = torch.randint(lo, hi, (3, 4), dtype=dt)
        b = torch.randint(0, WIDTH[dt], (4,), dtype=dt) if "shift" in name else torch.randint(lo, hi, (4,), dtype=dt)
        add(name, [tin(a)[0], tin(b)[0]], fn(a, b))
        add(name, [tin(a)[0], {"number": 3}], fn(a, 3))
        i, v = tin(torch.randint(lo, hi, (4, 3), dtype=dt).t(), [1, 0])
        add(name, [i, tin(b)[0]], fn(v, b))
    x = torch.randint(lo, hi, (3, 4), dtype=dt)
    add("bitwise_not", [tin(x)[0]], torch.bitwise_not(x))
    i, v = tin(torch.randint(lo, hi, (4, 3), dtype=dt).t(), [1, 0])
    add("bitwise_not", [i], torch.bitwise_not(v))

# ---- dtype promotion: result dtype of add for every pair of tensor dtypes, and with numbers ----
promotion = []
for a in DT:
    for b in DT:
        promotion.append({"a": DT[a], "b": DT[b], "out": DT[torch.result_type(torch.ones(2, dtype=a), torch.ones(2, dtype=b))]})
    for num in (2, 2.5):
        promotion.append({"a": DT[a], "number": num, "out": DT[torch.result_type(torch.ones(2, dtype=a), num)]})

# ---- astype to and from the storage-only dtypes bf16, f16, i8 (edge cases: tests/gen_lowp_fixtures.py) ----
DT.update({torch.bfloat16: "bf16", torch.float16: "f16", torch.int8: "i8"})
ALL = FLOATS + INTS + (torch.uint8, torch.bool, torch.bfloat16, torch.float16, torch.int8)
for src in (torch.bfloat16, torch.float16, torch.int8):
    if src == torch.int8:
        x = torch.tensor([0, 1, 2, 7, 100, 127, -3, -128], dtype=src)
    else:
        x = torch.tensor([0.0, 1.0, 2.75, 7.5, 100.5, -0.5, 3.0, -0.0], dtype=src)
    for dst in ALL:
        add("astype", [tin(x)[0]], x.to(dst), attrs={"dtype": DT[dst]})
x = torch.tensor([0.1, -2.7, 1e5, 3.14159, 1e-6, 65519.0, 65520.0], dtype=torch.float64)
for dst in (torch.bfloat16, torch.float16):
    add("astype", [tin(x)[0]], x.to(dst), attrs={"dtype": DT[dst]})
    add("astype", [tin(x.float())[0]], x.float().to(dst), attrs={"dtype": DT[dst]})
x = torch.tensor([0.1, -2.7, 3.9, -127.5, 126.99], dtype=torch.float64)  # in range (out of range: ds saturates)
for src in (torch.float64, torch.float32):
    add("astype", [tin(x.to(src))[0]], x.to(src).to(torch.int8), attrs={"dtype": "i8"})
x = torch.tensor([0, 1, 200, 255, 128], dtype=torch.uint8)  # u8 -> i8 wraps, as every integer narrowing
add("astype", [tin(x)[0]], x.to(torch.int8), attrs={"dtype": "i8"})
x = torch.tensor([300, -129, 2 ** 40 + 5, 16777217], dtype=torch.int64)
for dst in (torch.int8, torch.bfloat16, torch.float16):
    add("astype", [tin(x)[0]], x.to(dst), attrs={"dtype": DT[dst]})

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "elementwise.json")
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path, "w") as f:
    json.dump({"generator": "tests/gen_elementwise_fixtures.py", "torch": torch.__version__, "cases": cases,
               "promotion": promotion}, f)
print(len(cases), "cases,", len(promotion), "promotion rows")
