# gen_lowp_fixtures.py: PyTorch reference values for the bf16, f16 and i8 dtypes (tests/lowp_dtypes_spec.lua).
# Run: /usr/bin/python3 tests/gen_lowp_fixtures.py   Writes tests/fixtures/lowp.json:
#   convert   f32 bit patterns -> torch's bf16/f16 bits (edge cases: ties, subnormals, overflow, NaNs; then a
#             sweep of random patterns over every exponent); NaN inputs also carry the IEEE quieting rule's bits
#             (sign and top payload bits kept, quiet bit set), computed here from the bits
#   widen     bf16/f16 bit patterns -> torch's f32 bits (every subnormal, every exponent, a stride through the rest)
#   ops       elementwise ops, reductions and matmul on bf16/f16/i8 tensors: inputs and torch's outputs
#   promotion torch.result_type for pairs involving bf16/f16/i8
#   safetensors  a file of BF16/F16/I8 tensors written by hand (struct + json) from torch's bytes, as hex
import json
import os
import random
import struct

import numpy as np
import torch

torch.manual_seed(3)
random.seed(3)
DT = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64", torch.int32: "i32", torch.uint8: "u8",
      torch.bool: "bool", torch.bfloat16: "bf16", torch.float16: "f16", torch.int8: "i8"}


def f32_of_bits(bits):
    return torch.from_numpy(np.array(bits, dtype=np.uint32).view(np.float32).copy())


def bits16(t):
    return t.view(torch.int16).numpy().astype(np.int64).__and__(0xFFFF).tolist()


def bits32(t):
    return t.view(torch.int32).numpy().astype(np.int64).__and__(0xFFFFFFFF).tolist()


def is_nan32(b):
    return (b & 0x7FFFFFFF) > 0x7F800000


def quiet_bf16(b):  # IEEE conversion of a NaN: sign and top payload bits kept, quiet bit set
    return (b >> 16) | 0x0040


def quiet_f16(b):
    return ((b >> 16) & 0x8000) | 0x7E00 | ((b >> 13) & 0x1FF)


# ---- f32 -> bf16 / f16 ----
def f32bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


edge = [0x00000000, 0x80000000, f32bits(1.0), f32bits(-1.0), 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000,
        0x00008000, 0x00018000, 0x00017FFF, 0x00010000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F7FFF, 0x7F7F8000,
        0x7F800000, 0xFF800000,
        # bf16 ties: 1 + 2^-8 (to even: down), 1 + 3 * 2^-8 (to even: up), one ulp either side of a tie
        0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001, 0x3F80FFFF,
        # f16: the largest finite 65504, halfway to 65536 (rounds to inf), just below; the smallest normal
        # 2^-14 and its neighbours; the smallest subnormal 2^-24; 2^-25 (a tie: to 0), just above it (to 2^-24),
        # 1.5 * 2^-24 (a tie: to 2 * 2^-24), 2.5 * 2^-24 (a tie: to 2 * 2^-24), the subnormal/normal boundary tie
        f32bits(65504.0), f32bits(65520.0), 0x477FEFFF, f32bits(65536.0), f32bits(-65520.0), f32bits(1e6),
        f32bits(2.0 ** -14), 0x387FFFFF, 0x38800001, 0x387FF000, 0x387FE000, f32bits(2.0 ** -24), f32bits(2.0 ** -25),
        0x33000001, f32bits(1.5 * 2.0 ** -24), f32bits(2.5 * 2.0 ** -24), f32bits(-(2.0 ** -25)), f32bits(2.0 ** -26),
        f32bits(1.0 + 2.0 ** -11), f32bits(1.0 + 3 * 2.0 ** -11), f32bits(0.1), f32bits(-0.1), f32bits(3.14159265),
        # NaNs: quiet, negative quiet, signaling with a low payload, payloads in the kept and dropped bits
        0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FA00000, 0x7F812345, 0x7FFFFFFF, 0xFFFFFFFF, 0x7F802000]
sweep = []
for e in range(0, 255):
    for _ in range(12):
        sweep.append((random.getrandbits(1) << 31) | (e << 23) | random.getrandbits(23))
convert = []
for bits in edge + sweep:
    x = f32_of_bits([bits])
    entry = {"f32": bits, "bf16": bits16(x.to(torch.bfloat16))[0], "f16": bits16(x.to(torch.float16))[0]}
    if is_nan32(bits):
        entry["nan"] = True
        entry["bf16_ieee"], entry["f16_ieee"] = quiet_bf16(bits), quiet_f16(bits)
    convert.append(entry)

# ---- Python floats (f64) -> bf16 / f16: through f32, two roundings (torch.tensor(v, dtype=...), f64 tensors) ----
doubles = [1 + 2.0 ** -8 + 2.0 ** -30, 1 + 2.0 ** -11 + 2.0 ** -40, 0.1, -1e-300, 1e300, 65519.999, 3.3961e38,
           2.0 ** -24 * 0.5000001, 1 / 3]
from_f64 = [{"value": v, "bf16": torch.tensor([v], dtype=torch.bfloat16).item(),
             "f16": torch.tensor([v], dtype=torch.float16).item(),
             "bf16_of_f64": torch.tensor([v], dtype=torch.float64).to(torch.bfloat16).item(),
             "f16_of_f64": torch.tensor([v], dtype=torch.float64).to(torch.float16).item()} for v in doubles]

# ---- bf16 / f16 -> f32 ----
patterns = sorted(set(list(range(0, 0x400)) + list(range(0x8000, 0x8400)) + list(range(0x7C00, 0x8000))
                      + list(range(0xFC00, 0x10000)) + list(range(0x7F00, 0x7F90)) + list(range(0, 0x10000, 37))))
p16 = torch.from_numpy(np.array(patterns, dtype=np.uint16).view(np.int16).copy())
widen = {"bits": patterns, "bf16": bits32(p16.view(torch.bfloat16).float()),
         "f16": bits32(p16.view(torch.float16).float())}


# ---- ops ----
def enc(t):
    t = t.detach()
    data = t.reshape(-1).tolist()
    if t.dtype == torch.bool:
        data = [1 if v else 0 for v in data]
    return {"shape": list(t.shape), "dtype": DT[t.dtype], "data": data}


ops = []


def add(op, ins, fn, attrs=None):
    """fn(*ins) by torch; where torch 1.13 has no CPU kernel for Half, the op on f32 rounded back (what torch's
    Half kernels compute where they exist; the case notes it)"""
    c = {"op": op, "inputs": [{"number": t} if isinstance(t, float) else enc(t) for t in ins]}
    try:
        out = fn(*ins)
    except RuntimeError:
        low = [t.dtype for t in ins if not isinstance(t, float) and t.dtype in (torch.bfloat16, torch.float16)][0]
        out = fn(*[t.float() if not isinstance(t, float) and t.dtype == low else t for t in ins])
        out = out.to(low) if out.dtype == torch.float32 else out
        c["torch_kernel"] = "f32"
    c["out"] = enc(out)
    if attrs:
        c["attrs"] = attrs
    ops.append(c)


for dt in (torch.bfloat16, torch.float16):
    a = (torch.randn(6, 5) * 3).to(dt)
    b = (torch.randn(6, 5) * 3).to(dt)
    pos = (torch.rand(6, 5) * 10 + 0.01).to(dt)
    other = torch.bfloat16 if dt == torch.float16 else torch.float16
    add("add", [a, b], lambda x, y: x + y)
    add("sub", [a, b], lambda x, y: x - y)
    add("mul", [a, b], lambda x, y: x * y)
    add("div", [a, b], lambda x, y: x / y)
    add("maximum", [a, b], torch.maximum)
    add("neg", [a], lambda x: -x)
    add("abs", [a], torch.abs)
    add("relu", [a], torch.relu)
    add("exp", [a], torch.exp)
    add("log", [pos], torch.log)
    add("sqrt", [pos], torch.sqrt)
    add("tanh", [a], torch.tanh)
    add("sigmoid", [a], torch.sigmoid)
    add("lt", [a, b], torch.lt)
    add("where", [a > 0, a, b], torch.where)
    add("sum", [a], lambda x: x.sum(1), {"dim": 2})
    add("sum", [a], lambda x: x.sum())
    # mean: one rounding of the f32 mean (torch 1.13's CPU mean rounds the sum to bf16/f16 first, then divides)
    add("mean", [a], lambda x: x.float().mean(0).to(x.dtype), {"dim": 1})
    add("amax", [a], lambda x: x.amax(1), {"dim": 2})
    add("argmax", [a], lambda x: x.argmax(1), {"dim": 2})
    add("softmax", [a], lambda x: torch.softmax(x, 1), {"dim": 2})
    add("cumsum", [a], lambda x: x.cumsum(1), {"dim": 2})
    # matmul: torch's bf16 GEMM on this CPU rounds once from an f32 accumulation, as ds's f32 GEMM then a cast
    add("matmul", [a, b.t().contiguous()], lambda x, y: x.float().matmul(y.float()).to(dt))
    add("add", [a, torch.randn(6, 5)], lambda x, y: x + y)  # with f32: f32
    add("add", [a, a.to(other)], lambda x, y: x + y)  # bf16 with f16: f32
    # a Python number with a bf16/f16 tensor: the number is rounded to the tensor's dtype first (torch 1.13)
    for num in (0.1, 1 / 3, 2.7):
        add("add", [a, num], lambda x, y: x + y)
        add("mul", [a, num], lambda x, y: x * y)
        add("div", [a, num], lambda x, y: x / y)
        add("lt", [a, num], torch.lt)
big = (torch.randn(4, 64) * 2).to(torch.bfloat16)
add("sum", [big], lambda x: x.sum(1), {"dim": 2})
i8a = torch.randint(-128, 128, (5, 4), dtype=torch.int8)
i8b = torch.randint(-128, 128, (5, 4), dtype=torch.int8)
i8nz = torch.randint(1, 100, (5, 4), dtype=torch.int8)
add("add", [i8a, i8b], lambda x, y: x + y)  # wraps
add("sub", [i8a, i8b], lambda x, y: x - y)
add("mul", [i8a, i8b], lambda x, y: x * y)
add("neg", [i8a], lambda x: -x)
add("maximum", [i8a, i8b], torch.maximum)
add("div", [i8a, i8nz], lambda x, y: x / y)  # true division: f32
add("eq", [i8a, i8b], torch.eq)
add("sum", [i8a], lambda x: x.sum(1), {"dim": 2})  # i64
add("bitwise_and", [i8a, i8b], torch.bitwise_and)
add("add", [i8a, i8a.to(torch.int32)], lambda x, y: x + y)

# ---- promotion ----
promotion = []
every = list(DT)
for a in every:
    for b in every:
        if torch.bfloat16 in (a, b) or torch.float16 in (a, b) or torch.int8 in (a, b):
            r = torch.result_type(torch.ones(2, dtype=a), torch.ones(2, dtype=b))
            promotion.append({"a": DT[a], "b": DT[b], "out": DT.get(r, str(r))})
    if a in (torch.bfloat16, torch.float16, torch.int8):
        for num in (2, 2.5):
            promotion.append({"a": DT[a], "number": num, "out": DT[torch.result_type(torch.ones(2, dtype=a), num)]})

# ---- safetensors written by hand: header as ds writes it (metadata first, names sorted, compact JSON, padded
# with spaces to 8 bytes), then each tensor's bytes as torch holds them ----
st_tensors = {
    "w.bf16": torch.tensor([[1.5, -2.25, 3.0e38], [1e-40, -0.0, 65504.0]]).to(torch.bfloat16),
    "w.f16": torch.tensor([1.5, -2.25, 65504.0, 6e-8, -0.0, 0.1]).to(torch.float16),
    "q.i8": torch.tensor([[-128, -1, 0], [1, 64, 127]], dtype=torch.int8),
    "scalar.bf16": torch.tensor(0.333).to(torch.bfloat16),
    "empty.f16": torch.zeros(0, 3, dtype=torch.float16),
}
ST = {torch.bfloat16: "BF16", torch.float16: "F16", torch.int8: "I8"}
parts, chunks, off = ['"__metadata__":{"format":"pt"}'], [], 0
for name in sorted(st_tensors):
    t = st_tensors[name]
    raw = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
    parts.append('%s:{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}' % (
        json.dumps(name), ST[t.dtype], ",".join(str(d) for d in t.shape), off, off + len(raw)))
    chunks.append(raw)
    off += len(raw)
header = "{" + ",".join(parts) + "}"
header += " " * ((8 - len(header) % 8) % 8)
file_bytes = struct.pack("<Q", len(header)) + header.encode() + b"".join(chunks)
safetensors = {"hex": file_bytes.hex(), "metadata": {"format": "pt"},
               "tensors": {n: {**enc(t), "bits": bits16(t.reshape(-1)) if t.dtype != torch.int8 else None}
                           for n, t in st_tensors.items()}}

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "lowp.json")
with open(path, "w") as f:
    json.dump({"generator": "tests/gen_lowp_fixtures.py", "torch": torch.__version__, "convert": convert,
               "from_f64": from_f64,
               "widen": widen, "ops": ops, "promotion": promotion, "safetensors": safetensors}, f)
print(len(convert), "conversions,", len(patterns), "widened patterns,", len(ops), "op cases,", len(promotion),
      "promotion rows")
