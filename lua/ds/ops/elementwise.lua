-- ops/elementwise.lua: unary, binary, comparison, logic, where, clamp, cast; with backward rules.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local S = require("ds.shape")
local sum_to = require("ds.autograd").sum_to
local dsffi = require("ds.ffi")
local first = #D.list + 1 -- this family's ops, returned at the end
local F = C.functions -- ds.* functions, resolved at call time (backward uses them)

-- The C op table (src/elementwise.def, read through ds_ew_*, src/ds.h) gives each op its name, kind and
-- dtypes; an entry below adds what C cannot know: promotion, backward, doc, attrs (the two params of a param
-- row) and its ONNX form (opset 17), read by onnx/export_ops.lua (and onnx/handlers/elementwise.lua imports the
-- named ONNX ops of unary rows as their ops): `onnx = "Exp"` names the ONNX op of the same meaning, one node on
-- the inputs cast as ds computes them (unary, cast and binary rows: to the result's dtype; compare rows:
-- to the inputs' common dtype); `onnx = function(w, n, X)` writes a decomposition (export_ops.lua describes w and n; X
-- is {last = a node writing n's output, A = onnx/attr.lua, onnx_type = onnx/types.lua's}); `no_onnx = "why"`
-- says why it has none (exporting it fails with the reason). An entry is keyed by its op's name, which is its
-- row's unless `row =` names another (one row can serve
-- two ops: div's float kernels are div, its integer ones floor_divide, each picking its dtypes with `only =`;
-- astype and contiguous both run copy, adding the storage-only dtypes whose casts follow the table in
-- elementwise.c with `storage = true`). A row without an entry, an entry without its row, or an entry that
-- restates or contradicts its row is an error at load time naming the op.
local float, arith, same, bool = C.promote_float, C.promote_arith, C.promote_same, C.promote_bool
local E = {}

-- ---- unary (float math promotes integers to f32, like PyTorch) ----
E.exp = { doc = "e^x", onnx = "Exp", promote = float, backward = function(ctx, g) return g * ctx.outputs[1] end }
E.log = { doc = "natural logarithm", onnx = "Log", promote = float,
  backward = function(ctx, g) return g / ctx.inputs[1] end }
E.sqrt = { doc = "square root", onnx = "Sqrt", promote = float,
  backward = function(ctx, g) return g / (2 * ctx.outputs[1]) end }
E.rsqrt = { doc = "1 / sqrt(x)", promote = float,
  onnx = function(w, n, X) X.last(w, n, "Reciprocal", { w:one("Sqrt", { n.ins[1] }) }) end,
  backward = function(ctx, g) local y = ctx.outputs[1]; return g * (-0.5) * y * y * y end }
E.sin = { doc = "sine", onnx = "Sin", promote = float, backward = function(ctx, g) return g * F.cos(ctx.inputs[1]) end }
E.cos = { doc = "cosine", onnx = "Cos", promote = float,
  backward = function(ctx, g) return -(g * F.sin(ctx.inputs[1])) end }
E.tanh = { doc = "hyperbolic tangent", onnx = "Tanh", promote = float,
  backward = function(ctx, g) local y = ctx.outputs[1]; return g * (1 - y * y) end }
E.sigmoid = { doc = "logistic 1 / (1 + e^-x)", onnx = "Sigmoid", promote = float,
  backward = function(ctx, g) local y = ctx.outputs[1]; return g * y * (1 - y) end }
E.silu = { doc = "x * sigmoid(x) (torch.nn.functional.silu)", promote = float,
  onnx = function(w, n, X) X.last(w, n, "Mul", { n.ins[1], w:one("Sigmoid", { n.ins[1] }) }) end,
  backward = function(ctx, g)
  local x = ctx.inputs[1]; local s = F.sigmoid(x); return g * s * (1 + x * (1 - s)) end }
E.gelu = { doc = "x * Phi(x), the exact erf form (torch.nn.functional.gelu)", promote = float,
  onnx = function(w, n, X) -- x/2 (1 + erf(x / sqrt 2))
    local x, dt = n.ins[1], n.outm[1].dtype
    local e = w:one("Erf", { w:one("Div", { x, w:scalar(math.sqrt(2), dt) }) })
    local half_x = w:one("Mul", { x, w:scalar(0.5, dt) })
    X.last(w, n, "Mul", { half_x, w:one("Add", { e, w:scalar(1, dt) }) })
  end,
  backward = function(ctx, g)
    local x = ctx.inputs[1]
    local cdf = 0.5 * (1 + F.erf(x * 0.7071067811865476))
    local pdf = F.exp(-0.5 * x * x) * 0.3989422804014327
    return g * (cdf + x * pdf) end }
E.gelu_tanh = { doc = "GELU's tanh approximation (torch.nn.functional.gelu(x, approximate='tanh'))",
  promote = float,
  onnx = function(w, n, X) -- x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    local x, dt = n.ins[1], n.outm[1].dtype
    local x3 = w:one("Mul", { w:one("Mul", { x, x }), x })
    local inner = w:one("Mul", { w:one("Add", { x, w:one("Mul", { x3, w:scalar(0.044715, dt) }) }),
      w:scalar(math.sqrt(2 / math.pi), dt) })
    local half_x = w:one("Mul", { x, w:scalar(0.5, dt) })
    X.last(w, n, "Mul", { half_x, w:one("Add", { w:one("Tanh", { inner }), w:scalar(1, dt) }) })
  end,
  backward = function(ctx, g)
    local x = ctx.inputs[1]
    local k = 0.7978845608028654
    local inner = k * (x + 0.044715 * x * x * x)
    local t = F.tanh(inner)
    local dinner = k * (1 + 3 * 0.044715 * x * x)
    return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * dinner) end }
E.erf = { doc = "Gauss error function", onnx = "Erf", promote = float, backward = function(ctx, g)
  local x = ctx.inputs[1]; return g * 1.1283791670955126 * F.exp(-(x * x)) end }
E.abs = { doc = "absolute value", onnx = "Abs", promote = arith,
  backward = function(ctx, g) return g * F.sign(ctx.inputs[1]) end }
E.neg = { doc = "-x", onnx = "Neg", promote = arith, backward = function(ctx, g) return -g end }
E.relu = { doc = "max(x, 0)", onnx = "Relu", promote = arith, backward = function(ctx, g)
  return g * F.gt(ctx.inputs[1], 0):astype(g.dtype) end }
-- hardswish, hardsigmoid: PyTorch's formulas, one pass each (src/elementwise_ops.h); PyTorch's gradients:
-- hardswish's 0 below -3, x / 3 + 0.5 on [-3, 3], 1 above; hardsigmoid's 1/6 strictly inside (-3, 3), else 0
-- (the gradient check's sample: fixed values below -3, inside and above 3, none near the kinks)
local function hard_sample(name)
  return function()
    return { (F.sin(F.arange(12, { dtype = "f64" }) * 0.37) * 5):reshape(3, 4) }, {}, function(x) return F[name](x) end
  end
end
E.hardswish = { doc = "x * min(max(x + 3, 0), 6) / 6 (torch.nn.functional.hardswish)", onnx = "HardSwish",
  promote = float, sample = hard_sample("hardswish"), backward = function(ctx, g)
  local x = ctx.inputs[1]
  return F.where(F.lt(x, -3), 0, F.where(F.le(x, 3), g * (x / 3 + 0.5), g)) end }
E.hardsigmoid = { doc = "min(max(x + 3, 0), 6) / 6 (torch.nn.functional.hardsigmoid)", promote = float,
  sample = hard_sample("hardsigmoid"),
  onnx = function(w, n, X)
    X.last(w, n, "HardSigmoid", { n.ins[1] }, { alpha = X.A.float(1 / 6), beta = X.A.float(0.5) })
  end,
  backward = function(ctx, g)
  local x = ctx.inputs[1]
  return F.where(F.logical_and(F.gt(x, -3), F.lt(x, 3)), g / 6, 0) end }
E.sign = { doc = "-1, 0 or 1 by the sign of x", onnx = "Sign", promote = arith,
  backward = function(ctx, g) return g * 0 end }
E.log1p = { doc = "log(1 + x), accurate near 0", promote = float,
  no_onnx = "ONNX has no log1p, and log(1 + x) loses ds's accuracy near 0",
  backward = function(ctx, g) return g / (ctx.inputs[1] + 1) end }
E.expm1 = { doc = "e^x - 1, accurate near 0", promote = float,
  no_onnx = "ONNX has no expm1, and exp(x) - 1 loses ds's accuracy near 0",
  backward = function(ctx, g) return g * (ctx.outputs[1] + 1) end }
E.log2 = { doc = "base-2 logarithm", promote = float,
  onnx = function(w, n, X)
    X.last(w, n, "Div", { w:one("Log", { n.ins[1] }), w:scalar(math.log(2), n.outm[1].dtype) })
  end,
  backward = function(ctx, g) return g / (ctx.inputs[1] * 0.6931471805599453) end }
-- trigonometric and hyperbolic functions and their inverses
local function one_minus_sq(x) return 1 - x * x end
local trig = { -- {ONNX op, doc, backward}
  tan = { "Tan", "tangent", function(ctx, g) local y = ctx.outputs[1]; return g * (1 + y * y) end },
  asin = { "Asin", "inverse sine", function(ctx, g) return g / F.sqrt(one_minus_sq(ctx.inputs[1])) end },
  acos = { "Acos", "inverse cosine", function(ctx, g) return -(g / F.sqrt(one_minus_sq(ctx.inputs[1]))) end },
  atan = { "Atan", "inverse tangent", function(ctx, g) local x = ctx.inputs[1]; return g / (x * x + 1) end },
  sinh = { "Sinh", "hyperbolic sine", function(ctx, g) return g * F.cosh(ctx.inputs[1]) end },
  cosh = { "Cosh", "hyperbolic cosine", function(ctx, g) return g * F.sinh(ctx.inputs[1]) end },
  asinh = { "Asinh", "inverse hyperbolic sine",
    function(ctx, g) local x = ctx.inputs[1]; return g / F.sqrt(x * x + 1) end },
  acosh = { "Acosh", "inverse hyperbolic cosine",
    function(ctx, g) local x = ctx.inputs[1]; return g / F.sqrt((x - 1) * (x + 1)) end },
  atanh = { "Atanh", "inverse hyperbolic tangent", function(ctx, g) return g / one_minus_sq(ctx.inputs[1]) end },
}
for name, spec in pairs(trig) do E[name] = { onnx = spec[1], doc = spec[2], promote = float, backward = spec[3] } end
-- rounding to a 16-bit float format, the value kept in x's dtype (ONNX's Cast to FLOAT16/BFLOAT16); a step
-- function, given no backward
local function round_to(onnx_t) -- a Cast to the 16-bit ONNX type onnx_t and back
  return function(w, n, X)
    X.last(w, n, "Cast", { w:one("Cast", { n.ins[1] }, { to = X.A.int(onnx_t) }) },
      { to = X.A.int(X.onnx_type(n.outm[1].dtype, n.node.op)) })
  end
end
E.round_f16 = { doc = "x rounded to the nearest float16 value, ties to even (torch's x.half().to(x.dtype))",
  onnx = round_to(10), promote = float }
E.round_bf16 = { doc = "x rounded to the nearest bfloat16 value, ties to even (torch's x.bfloat16().to(x.dtype))",
  onnx = round_to(16), promote = float }
-- rounding (integers come back unchanged; round is half to even): the gradient is 0, as PyTorch's. ONNX's
-- Floor/Ceil/Round are for floats (Round is half to even, as ds's); integers are already whole
local function rounding_form(onnx)
  return function(w, n, X) X.last(w, n, dtype.is_float[n.outm[1].dtype] and onnx or "Identity", { n.ins[1] }) end
end
local rounding = { floor = { "round down to an integer value", rounding_form("Floor") },
  ceil = { "round up to an integer value", rounding_form("Ceil") },
  round = { "round to the nearest integer value, halves to even", rounding_form("Round") },
  -- trunc(x) = ceil(x) where x < 0, else floor(x) (opset 17 has no Trunc)
  trunc = { "round toward zero to an integer value", function(w, n, X)
    local x, dt = n.ins[1], n.outm[1].dtype
    if not dtype.is_float[dt] then return X.last(w, n, "Identity", { x }) end
    X.last(w, n, "Where", { w:one("Less", { x, w:scalar(0, dt) }), w:one("Ceil", { x }), w:one("Floor", { x }) })
  end } }
for name, spec in pairs(rounding) do
  E[name] = { doc = spec[1], onnx = spec[2], promote = arith, backward = function(ctx, g) return g * 0 end }
end
E.logical_not = { doc = "not x, on bool tensors", onnx = "Not", promote = bool }

-- ---- binary ----
E.add = { doc = "a + b", onnx = "Add", promote = arith, backward = function(ctx, g)
  return ctx.needs[1] and sum_to(g, ctx.inputs[1]._shape) or nil,
    ctx.needs[2] and sum_to(g, ctx.inputs[2]._shape) or nil end }
E.sub = { doc = "a - b", onnx = "Sub", promote = arith, backward = function(ctx, g)
  return ctx.needs[1] and sum_to(g, ctx.inputs[1]._shape) or nil,
    ctx.needs[2] and sum_to(-g, ctx.inputs[2]._shape) or nil end }
E.mul = { doc = "a * b", onnx = "Mul", promote = arith, backward = function(ctx, g)
  local a, b = ctx.inputs[1], ctx.inputs[2]
  return ctx.needs[1] and sum_to(g * b, a._shape) or nil, ctx.needs[2] and sum_to(g * a, b._shape) or nil end }
E.div = { doc = "a / b, true division (integers promote to f32)", only = { "f32", "f64" }, onnx = "Div",
  promote = float,
  backward = function(ctx, g)
    local a, b = ctx.inputs[1], ctx.inputs[2]
    return ctx.needs[1] and sum_to(g / b, a._shape) or nil,
           ctx.needs[2] and sum_to(-(g * a) / (b * b), b._shape) or nil end }
E.floor_divide = { doc = "a // b on integer tensors (the integer kernel of div)", row = "div",
  only = { "i64", "i32" }, promote = same,
  onnx = function(w, n, X) -- floats floor(a / b); integers (a - mod(a, b)) / b with mod's sign the divisor's (exact)
    local dt = n.outm[1].dtype
    local a, b = w:cast(n.ins[1], n.inm[1].dtype, dt), w:cast(n.ins[2], n.inm[2].dtype, dt)
    if dtype.is_float[dt] then return X.last(w, n, "Floor", { w:one("Div", { a, b }) }) end
    local r = w:one("Mod", { a, b }, { fmod = X.A.int(0) })
    X.last(w, n, "Div", { w:one("Sub", { a, r }), b })
  end }
-- an integer base to a negative Lua-number power has no integer result: an error, as PyTorch's
-- (a tensor exponent's negative elements give 0 there, and here)
local function promote_pow(inputs, attrs)
  local out = C.promote_arith(inputs, attrs)
  local e = inputs[2]
  if type(e) == "number" and e < 0 and not dtype.is_float[out[1].dtype] then
    errors.raise(string.format("pow: integers to negative integer powers are not allowed (%s ^ %s)", out[1].dtype,
      tostring(e)))
  end
  return out
end
E.pow = { doc = "a ^ b", onnx = "Pow", promote = promote_pow, backward = function(ctx, g)
  local a, b, y = ctx.inputs[1], ctx.inputs[2], ctx.outputs[1]
  local ga, gb
  -- as PyTorch: b a^(b-1) is 0 where b == 0 (also at a == 0); y log a is 0 where a == 0 and b >= 0
  if ctx.needs[1] then ga = sum_to(g * F.where(F.eq(b, 0), 0, b * F.pow(a, b - 1)), a._shape) end
  if ctx.needs[2] then
    gb = sum_to(g * F.where(F.logical_and(F.eq(a, 0), F.ge(b, 0)), 0, y * F.log(a)), b._shape)
  end
  return ga, gb end }
-- the gradient goes to the larger (maximum) / smaller (minimum) side; ties split it 0.5 / 0.5 as PyTorch
local function minmax_bw(pick)
  return function(ctx, g)
    local a, b = ctx.inputs[1], ctx.inputs[2]
    local take_a = pick(a, b):astype(g.dtype) + F.eq(a, b):astype(g.dtype) * 0.5
    return ctx.needs[1] and sum_to(g * take_a, a._shape) or nil,
      ctx.needs[2] and sum_to(g * (1 - take_a), b._shape) or nil
  end
end
-- fmod (sign of a, C's fmod) and remainder (sign of b, Python's and Lua's %): d/db = -trunc(a/b) / -floor(a/b)
local function mod_bw(whole)
  return function(ctx, g)
    local a, b = ctx.inputs[1], ctx.inputs[2]
    return ctx.needs[1] and sum_to(g, a._shape) or nil, ctx.needs[2] and sum_to(-(g * whole(a / b)), b._shape) or nil
  end
end
-- ONNX: fmod is Mod with fmod = 1; remainder that moved into the divisor's sign, as ds's kernels do
local function fmod_node(w, n, X)
  local dt = n.outm[1].dtype
  local a, b = w:cast(n.ins[1], n.inm[1].dtype, dt), w:cast(n.ins[2], n.inm[2].dtype, dt)
  return w:one("Mod", { a, b }, { fmod = X.A.int(1) }), b, dt
end
E.fmod = { doc = "remainder of a / b with the sign of a (C's fmod)", promote = arith,
  onnx = function(w, n, X) X.last(w, n, "Identity", { (fmod_node(w, n, X)) }) end,
  backward = mod_bw(function(q) return F.trunc(q) end) }
E.remainder = { doc = "a % b with the sign of b (Python's and Lua's %)", promote = arith,
  onnx = function(w, n, X)
    local r, b, dt = fmod_node(w, n, X)
    local zero = w:scalar(0, dt)
    local fix = w:one("And", { w:one("Not", { w:one("Equal", { r, zero }) }),
      w:one("Xor", { w:one("Less", { r, zero }), w:one("Less", { b, zero }) }) })
    X.last(w, n, "Where", { fix, w:one("Add", { r, b }), r })
  end,
  backward = mod_bw(function(q) return F.floor(q) end) }
E.maximum = { doc = "larger of a and b", onnx = "Max", promote = arith,
  backward = minmax_bw(function(a, b) return F.gt(a, b) end) }
E.minimum = { doc = "smaller of a and b", onnx = "Min", promote = arith,
  backward = minmax_bw(function(a, b) return F.lt(a, b) end) }
local comparisons = { lt = { "a < b", "Less" }, le = { "a <= b", "LessOrEqual" }, gt = { "a > b", "Greater" },
  ge = { "a >= b", "GreaterOrEqual" }, eq = { "a == b", "Equal" },
  ne = { "a ~= b (torch.ne, !=)", function(w, n, X) -- Not(Equal) on the inputs' common dtype
    local dt = dtype.promote(n.inm[1].dtype, n.inm[2].dtype)
    local a, b = w:cast(n.ins[1], n.inm[1].dtype, dt), w:cast(n.ins[2], n.inm[2].dtype, dt)
    X.last(w, n, "Not", { w:one("Equal", { a, b }) })
  end } }
for name, spec in pairs(comparisons) do
  E[name] = { doc = spec[1] .. ", a bool tensor", onnx = spec[2], promote = same }
end
local logical = { logical_and = { "a and b", "And" }, logical_or = { "a or b", "Or" },
  logical_xor = { "a xor b", "Xor" } }
for name, spec in pairs(logical) do
  E[name] = { doc = spec[1] .. ", on bool tensors", onnx = spec[2], promote = bool }
end

-- bitwise ops on integer tensors (PyTorch's bitwise_*): >> is arithmetic on signed dtypes; a shift by the
-- dtype's width or more gives 0 (<<) or the sign fill (>>)
local function promote_integer(name)
  return function(inputs, attrs)
    local out = C.promote_same(inputs, attrs)
    if not dtype.is_int[out[1].dtype] then -- i8 has no kernel: it runs in i32 (dispatch.lua), which wraps alike
      errors.raise(string.format("%s: expects integer tensors (i64, i32, u8, i8), got %s", name, out[1].dtype))
    end
    return out
  end
end
local OPSET18 = "ONNX's Bitwise* ops are in opset 18; ds writes opset 17"
local UNSIGNED = "ONNX's BitShift takes unsigned types only (ds's shifts are for i32/i64/u8)"
E.bitwise_not = { doc = "~x, bit by bit, on integers", no_onnx = OPSET18, promote = promote_integer("bitwise_not") }
local bitwise = { bitwise_and = { "a & b", OPSET18 }, bitwise_or = { "a | b", OPSET18 },
  bitwise_xor = { "a ^ b (exclusive or)", OPSET18 }, bitwise_left_shift = { "a << b", UNSIGNED },
  bitwise_right_shift = { "a >> b (arithmetic for signed dtypes)", UNSIGNED } }
for name, spec in pairs(bitwise) do
  E[name] = { doc = spec[1] .. ", bit by bit, on integer tensors", no_onnx = spec[2], promote = promote_integer(name) }
end

-- where(cond, a, b): cond bool, a/b promoted together
E.where = {
  doc = "a where cond is true, else b (torch.where(cond, a, b))",
  onnx = function(w, n, X)
    local dt = n.outm[1].dtype
    X.last(w, n, "Where", { w:cast(n.ins[1], n.inm[1].dtype, "bool"), w:cast(n.ins[2], n.inm[2].dtype, dt),
      w:cast(n.ins[3], n.inm[3].dtype, dt) })
  end,
  promote = function(inputs)
    local dt = C.result_dtype { inputs[2], inputs[3] }
    return { D.cast(inputs[1], "bool"), D.cast(inputs[2], dt), D.cast(inputs[3], dt) }
  end,
  infer = function(inputs)
    local s = inputs[1]._shape
    s = S.broadcast(s, inputs[2]._shape, "where")
    s = S.broadcast(s, inputs[3]._shape, "where")
    return { shape = s, dtype = inputs[2].dtype }
  end,
  kernel_dtype = function(inputs) return inputs[2].dtype end,
  backward = function(ctx, g)
    local c, a, b = ctx.inputs[1], ctx.inputs[2], ctx.inputs[3]
    local z = F.zeros_like(g)
    return nil, ctx.needs[2] and sum_to(F.where(c, g, z), a._shape) or nil,
                ctx.needs[3] and sum_to(F.where(c, z, g), b._shape) or nil
  end,
}

-- clamp(x, min, max): absent bounds are -inf/+inf
E.clamp = {
  doc = "x limited to [min, max]",
  onnx = function(w, n, X)
    local a, dt = n.node.attrs, n.outm[1].dtype
    local x = w:cast(n.ins[1], n.inm[1].dtype, dt)
    local lo = a.min ~= -math.huge and w:scalar(a.min, dt) or ""
    local hi = a.max ~= math.huge and w:scalar(a.max, dt) or ""
    X.last(w, n, "Clip", { x, lo, hi })
  end,
  attrs = { { "min", "float", -math.huge }, { "max", "float", math.huge } }, args = { "min", "max" },
  promote = function(inputs, attrs)
    local dt = inputs[1].dtype
    if not dtype.is_float[dt] and ((attrs.min ~= math.floor(attrs.min) and attrs.min > -math.huge)
      or (attrs.max ~= math.floor(attrs.max) and attrs.max < math.huge)) then dt = "f32" end
    return { D.cast(inputs[1], dt == "bool" and "i64" or dt) }
  end,
  backward = function(ctx, g)
    local x = ctx.inputs[1]
    local inside = F.logical_and(F.ge(x, ctx.attrs.min), F.le(x, ctx.attrs.max))
    return g * inside:astype(g.dtype)
  end,
}

-- softplus(x, beta, threshold) = log(1 + exp(beta * x)) / beta, x itself where beta * x > threshold (PyTorch)
E.softplus = {
  doc = "log(1 + e^(beta x)) / beta, x above the threshold (torch.nn.functional.softplus)",
  onnx = function(w, n, X)
    local a, x, dt = n.node.attrs, n.ins[1], n.outm[1].dtype
    local bx = w:one("Mul", { x, w:scalar(a.beta, dt) })
    local soft = w:one("Div", { w:one("Softplus", { bx }), w:scalar(a.beta, dt) })
    X.last(w, n, "Where", { w:one("Greater", { bx, w:scalar(a.threshold, dt) }), x, soft })
  end,
  attrs = { { "beta", "float", 1 }, { "threshold", "float", 20 } }, args = { "beta", "threshold" },
  promote = float,
  backward = function(ctx, g)
    local x, beta, threshold = ctx.inputs[1], ctx.attrs.beta, ctx.attrs.threshold
    local z = F.exp(x * beta)
    return F.where(F.gt(x * beta, threshold), g, g * z / (z + 1))
  end,
}

-- astype (cast through the copy kernel; also used by dispatch to promote operands)
E.astype = {
  doc = "x converted to dtype (torch's x.to(dtype))", row = "copy", storage = true,
  onnx = function(w, n, X)
    X.last(w, n, "Cast", { n.ins[1] }, { to = X.A.int(X.onnx_type(n.outm[1].dtype, "astype")) })
  end,
  attrs = { { "dtype", "dtype" } }, args = { "dtype" },
  prepare = function(inputs, attrs)
    local dt = dtype.normalize(attrs.dtype)
    if not dt then errors.raise("astype: unknown dtype '" .. tostring(attrs.dtype) .. "'") end
    attrs.dtype = dt
  end,
  infer = function(inputs, attrs) return { shape = inputs[1]._shape, dtype = attrs.dtype } end,
  kernel_dtype = function(inputs, outputs) return outputs[1].dtype end,
  pack = function() return {} end,
  backward = function(ctx, g)
    if not dtype.is_float[ctx.inputs[1].dtype] then return nil end
    return g:astype(ctx.inputs[1].dtype)
  end,
}
-- contiguous copy of a (possibly strided) tensor, same dtype
E.contiguous = {
  doc = "a contiguous copy of x (x:copy_(y) is its in-place form)", inplace_name = "copy_", row = "copy",
  storage = true, onnx = "Identity",
  infer = function(inputs) return { shape = inputs[1]._shape, dtype = inputs[1].dtype } end,
  backward = function(ctx, g) return g end,
}

-- ---- the entries checked against the C rows and defined, in row order ----
local KINDS = { [0] = "unary", "param", "binary", "compare", "where", "cast" } -- ds_ew_kind's numbers (ds.h)
local OP_KIND = { unary = "unary", param = "unary", cast = "unary", binary = "binary", compare = "binary",
  where = "where" }
local NINPUTS = { unary = 1, param = 1, cast = 1, binary = 2, compare = 2, where = 3 }
local FROM_C = { "name", "kind", "ew_kind", "dtypes", "kernel", "ninputs", "elementwise" }
local function fail(op, msg) error("ops/elementwise.lua: " .. op .. ": " .. msg, 0) end

-- the op def of entry e (op `name`) on C row r {name, kind, dtypes}
local function def_of(name, e, r)
  for _, k in ipairs(FROM_C) do
    if e[k] ~= nil then fail(name, "the entry sets '" .. k .. "', which comes from its row of src/elementwise.def") end
  end
  if not e.doc then fail(name, "the entry has no doc") end
  if (e.onnx == nil) == (e.no_onnx == nil) then
    fail(name, "the entry needs its ONNX form (onnx = \"Op\" or a function) or no_onnx = the reason it has none")
  end
  if type(e.onnx) == "string" and (r.kind == "param" or r.kind == "where") then
    fail(name, "onnx = \"" .. e.onnx .. "\" on a " .. r.kind .. " row (a one-node form is for unary, cast, binary "
      .. "and compare rows; write a function)")
  end
  local dtypes = r.dtypes
  if e.only then
    dtypes = C.set(e.only)
    for dt in pairs(dtypes) do
      if not r.dtypes[dt] then fail(name, "only = " .. dt .. ", which its row '" .. r.name .. "' has no kernel for") end
    end
  end
  if e.storage then
    if r.kind ~= "cast" then fail(name, "storage = true on a " .. r.kind .. " row (only casts have those kernels)") end
    dtypes = C.set(dtype.names)
  end
  local two_params = e.attrs and #e.attrs >= 2 and e.attrs[1][2] == "float" and e.attrs[2][2] == "float"
  if (r.kind == "param") ~= (two_params or false) then
    fail(name, "a param row's two params are its op's first two attrs (floats); other rows take no such pair")
  end
  -- ew_kind: the row's own kind (unary, param, binary, compare, where, cast), which passes/fuse.lua reads
  local def = { name = name, kind = OP_KIND[r.kind], ew_kind = r.kind, kernel = "ds_" .. r.name .. "_%s",
    dtypes = dtypes, ninputs = NINPUTS[r.kind], elementwise = true,
    infer = C.infer_broadcast(r.kind == "compare" and "bool" or nil) }
  for k, v in pairs(e) do if k ~= "row" and k ~= "only" and k ~= "storage" then def[k] = v end end
  return def
end

local ffi, lib = dsffi.ffi, dsffi.C
local served = {} -- row name -> the names of the entries it serves
for name, e in pairs(E) do
  local row = e.row or name
  served[row] = served[row] or {}
  table.insert(served[row], name)
end
for op = 0, lib.ds_ew_count() - 1 do
  local r = { name = ffi.string(lib.ds_ew_name(op)), kind = KINDS[lib.ds_ew_kind(op)],
    dtypes = dtype.from_bits(lib.ds_ew_dtypes(op)) }
  local names = served[r.name]
  if not names then fail(r.name, "a row of src/elementwise.def with no entry here") end
  served[r.name] = nil
  table.sort(names)
  for _, name in ipairs(names) do D.define(def_of(name, E[name], r)) end
end
for row, names in pairs(served) do fail(names[1], "no row '" .. row .. "' in src/elementwise.def") end

-- this family's op defs by name (callers require the family and read them)
return D.defined_since(first)
