# tests/gen_diff_fixtures.py: PyTorch's forward and gradient for every row of tests/diff_cases.txt
# (the differential harness; tests/diff_spec.lua compares ds with it). Run from the repo root:
#   /usr/bin/python3 tests/gen_diff_fixtures.py        -> tests/fixtures/diff.json
# A row is "ops | inputs | ds expression | torch expression" (see the header of diff_cases.txt).
# Inputs are drawn here from a seed derived from the row, stored in the fixture, and read back by
# the spec; the loss is sum(w_k * output_k) with stored random weights w_k, and the gradients are
# d loss / d (every floating input).
import hashlib
import json
import math
import re
import torch
import torch.nn.functional as F
import unary_cases

ROWS = "tests/diff_cases.txt"
# the block at the end of ROWS written from tests/unary_cases.txt's rows (one per op: f64 values in [0.5, 2)
# mapped onto the middle 80% of the op's [lo, hi])
GENERATED = ("# ---- generated from tests/unary_cases.txt by tests/gen_diff_fixtures.py (edit that file, not these "
             "rows) ----\n")
OUT = "tests/fixtures/diff.json"
TORCH_DT = {"f32": torch.float32, "f64": torch.float64, "i64": torch.int64, "i32": torch.int32,
            "u8": torch.uint8, "bool": torch.bool, "index": torch.int64}
DT_NAME = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64", torch.int32: "i32",
           torch.uint8: "u8", torch.bool: "bool"}
SPEC = re.compile(r"^(\w+)=(\w+)\[([\d,]*)\]([T+~]*)(?:\{(-?\d+),(-?\d+)\})?$")


def num(v):
    """v as a short literal, read alike by Lua and Python"""
    return repr(round(v, 6)).rstrip("0").rstrip(".") if v != int(v) else str(int(v))


def unary_rows():
    """the differential row of each op of tests/unary_cases.txt"""
    out = []
    for name, fn, lo, hi in unary_cases.rows():
        arg = "(x - 1.25) * %s" % num(0.8 * (hi - lo) / 2 / 0.75)
        if (lo + hi) / 2 != 0:
            arg = "%s + %s" % (arg, num((lo + hi) / 2))
        out.append("%s | x=f64[3,4]+ | ds.%s(%s) | %s(%s)\n" % (name, name, arg, fn, arg))
    return out


def write_generated():
    """ROWS with its generated block rewritten from tests/unary_cases.txt"""
    with open(ROWS) as f:
        text = f.read()
    head = text.split(GENERATED)[0].rstrip("\n") + "\n\n"
    with open(ROWS, "w") as f:
        f.write(head + GENERATED + "".join(unary_rows()))


def rows():
    out = []
    for line in unary_cases.lines(ROWS):
        parts = [p.strip() for p in line.split(" | ", 3)]
        if len(parts) != 4:
            raise SystemExit("%s: a row needs 4 columns: %s" % (ROWS, line))
        out.append(parts)
    return out


def parse_inputs(text):
    specs = []
    for tok in text.split():
        if tok == "-":
            continue
        m = SPEC.match(tok)
        if not m:
            raise SystemExit("%s: bad input spec %r" % (ROWS, tok))
        name, dt, dims, mods, lo, hi = m.groups()
        shape = [int(d) for d in dims.split(",")] if dims else []
        specs.append({"name": name, "dtype": dt, "shape": shape, "mods": mods,
                      "range": [int(lo), int(hi)] if lo is not None else None})
    return specs


def draw(spec, gen):
    """the stored (contiguous) base values; 'T' stores the last two dims swapped and transposes back"""
    shape = list(spec["shape"])
    if "T" in spec["mods"]:
        shape[-1], shape[-2] = shape[-2], shape[-1]
    dt = spec["dtype"]
    if dt in ("f32", "f64"):
        if "+" in spec["mods"]:
            v = torch.rand(shape, generator=gen, dtype=torch.float64) * 1.5 + 0.5
        elif "~" in spec["mods"]:
            u = torch.rand(shape, generator=gen, dtype=torch.float64) + 0.3
            s = (torch.rand(shape, generator=gen) > 0.5).double() * 2 - 1
            v = u * s
        else:
            v = torch.randn(shape, generator=gen, dtype=torch.float64)
        return v.to(TORCH_DT[dt])
    if dt == "bool":
        return torch.rand(shape, generator=gen) > 0.5
    lo, hi = spec["range"] or ((0, 3) if dt == "index" else (0, 4) if dt == "u8" else (-3, 4))
    return torch.randint(lo, hi, shape, generator=gen).to(TORCH_DT[dt])


def tensor_json(t):
    t = t.detach().contiguous()
    vals = t.reshape(-1).tolist()
    if t.dtype == torch.bool:
        vals = [1 if v else 0 for v in vals]
    return {"shape": list(t.shape), "dtype": DT_NAME[t.dtype], "data": vals}


def flatten(r):
    if isinstance(r, (tuple, list)):
        out = []
        for v in r:
            out.extend(flatten(v))
        return out
    return [r]


def run_row(ops, inputs, ds_expr, torch_expr):
    case = {"ops": ops.split(), "inputs_text": inputs, "ds": ds_expr, "torch": torch_expr}
    if torch_expr.startswith("skip:"):
        case["skip"] = torch_expr[5:].strip()
        return case
    seed = int(hashlib.md5((inputs + " | " + ds_expr).encode()).hexdigest()[:8], 16)
    gen = torch.Generator().manual_seed(seed)
    env = {"torch": torch, "F": F, "math": math}
    case["inputs"] = []
    float_inputs = []
    for spec in parse_inputs(inputs):
        base = draw(spec, gen)
        x = base
        if base.dtype.is_floating_point:
            base.requires_grad_()
        if "T" in spec["mods"]:
            x = base.transpose(-1, -2)
        if base.dtype.is_floating_point:
            float_inputs.append((spec["name"], x))
        env[spec["name"]] = x
        j = tensor_json(base)
        j.update(name=spec["name"], transposed="T" in spec["mods"], index=spec["dtype"] == "index")
        case["inputs"].append(j)
    try:
        res = flatten(eval(torch_expr, env))
    except Exception as e:
        raise SystemExit("%s: row '%s': %s" % (ROWS, ds_expr, e))
    case["outputs"], case["weights"] = [], []
    loss = None
    for r in res:
        if isinstance(r, torch.Tensor):
            case["outputs"].append(tensor_json(r))
            if r.requires_grad and r.dtype.is_floating_point:
                w = torch.randn(r.shape, generator=gen, dtype=torch.float64).to(r.dtype)
                case["weights"].append(tensor_json(w))
                term = (r * w).sum()
                loss = term if loss is None else loss + term
            else:
                case["weights"].append(None)
        else:
            case["outputs"].append({"scalar": r})
            case["weights"].append(None)
    if loss is not None and float_inputs:
        try:
            grads = torch.autograd.grad(loss, [x for _, x in float_inputs], allow_unused=True)
        except Exception as e:
            raise SystemExit("%s: row '%s' (gradient): %s" % (ROWS, ds_expr, e))
        case["grads"] = {name: (tensor_json(g) if g is not None else None)
                         for (name, _), g in zip(float_inputs, grads)}
    return case


def main():
    torch.use_deterministic_algorithms(True)
    write_generated()
    cases = [run_row(*r) for r in rows()]
    with open(OUT, "w") as f:
        json.dump(cases, f, separators=(",", ":"))
        f.write("\n")
    print("%s: %d cases" % (OUT, len(cases)))


if __name__ == "__main__":
    main()
