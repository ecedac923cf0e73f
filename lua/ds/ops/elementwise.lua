-- ops/elementwise.lua: unary, binary, comparison, logic, where, clamp, cast; with backward rules.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local S = require("ds.shape")
local sum_to = require("ds.autograd").sum_to
local first = #D.list + 1 -- this family's ops, returned at the end
local F = C.functions -- ds.* functions, resolved at call time (backward uses them)


local function def_unary(name, dtypes, promote, backward, extra)
  local def = {
    name = name, kind = "unary", kernel = "ds_" .. name .. "_%s", dtypes = dtypes, ninputs = 1,
    promote = promote or C.promote_same, infer = C.infer_broadcast(), backward = backward,
    elementwise = true,
  }
  for k, v in pairs(extra or {}) do def[k] = v end
  return D.define(def)
end

local function def_binary(name, doc, dtypes, promote, backward, out_dtype, kernel)
  return D.define {
    name = name, doc = doc, kind = "binary", kernel = "ds_" .. (kernel or name) .. "_%s", dtypes = dtypes, ninputs = 2,
    promote = promote, infer = C.infer_broadcast(out_dtype), backward = backward, elementwise = true,
  }
end

-- ---- unary (float math promotes integers to f32, like PyTorch) ----
local unary = {
  exp = { doc = "e^x", C.FLOAT, C.promote_float, function(ctx, g) return g * ctx.outputs[1] end },
  log = { doc = "natural logarithm", C.FLOAT, C.promote_float, function(ctx, g) return g / ctx.inputs[1] end },
  sqrt = { doc = "square root", C.FLOAT, C.promote_float, function(ctx, g) return g / (2 * ctx.outputs[1]) end },
  rsqrt = { doc = "1 / sqrt(x)", C.FLOAT, C.promote_float,
    function(ctx, g) local y = ctx.outputs[1]; return g * (-0.5) * y * y * y end },
  sin = { doc = "sine", C.FLOAT, C.promote_float, function(ctx, g) return g * F.cos(ctx.inputs[1]) end },
  cos = { doc = "cosine", C.FLOAT, C.promote_float, function(ctx, g) return -(g * F.sin(ctx.inputs[1])) end },
  tanh = { doc = "hyperbolic tangent", C.FLOAT, C.promote_float,
    function(ctx, g) local y = ctx.outputs[1]; return g * (1 - y * y) end },
  sigmoid = { doc = "logistic 1 / (1 + e^-x)", C.FLOAT, C.promote_float,
    function(ctx, g) local y = ctx.outputs[1]; return g * y * (1 - y) end },
  silu = { doc = "x * sigmoid(x) (torch.nn.functional.silu)", C.FLOAT, C.promote_float, function(ctx, g)
    local x = ctx.inputs[1]; local s = F.sigmoid(x); return g * s * (1 + x * (1 - s)) end },
  gelu = { doc = "x * Phi(x), the exact erf form (torch.nn.functional.gelu)", C.FLOAT, C.promote_float, function(ctx, g)
    local x = ctx.inputs[1]
    local cdf = 0.5 * (1 + F.erf(x * 0.7071067811865476))
    local pdf = F.exp(-0.5 * x * x) * 0.3989422804014327
    return g * (cdf + x * pdf) end },
  gelu_tanh = { doc = "GELU's tanh approximation (torch.nn.functional.gelu(x, approximate='tanh'))",
    C.FLOAT, C.promote_float, function(ctx, g)
    local x = ctx.inputs[1]
    local k = 0.7978845608028654
    local inner = k * (x + 0.044715 * x * x * x)
    local t = F.tanh(inner)
    local dinner = k * (1 + 3 * 0.044715 * x * x)
    return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * dinner) end },
  erf = { doc = "Gauss error function", C.FLOAT, C.promote_float, function(ctx, g)
    local x = ctx.inputs[1]; return g * 1.1283791670955126 * F.exp(-(x * x)) end },
  abs = { doc = "absolute value", C.SIGNED, C.promote_arith, function(ctx, g) return g * F.sign(ctx.inputs[1]) end },
  neg = { doc = "-x", C.SIGNED, C.promote_arith, function(ctx, g) return -g end },
  relu = { doc = "max(x, 0)", C.SIGNED, C.promote_arith, function(ctx, g)
    return g * F.gt(ctx.inputs[1], 0):astype(g.dtype) end },
  sign = { doc = "-1, 0 or 1 by the sign of x", C.SIGNED, C.promote_arith, function(ctx, g) return g * 0 end },
  log1p = { doc = "log(1 + x), accurate near 0", C.FLOAT, C.promote_float,
    function(ctx, g) return g / (ctx.inputs[1] + 1) end },
  expm1 = { doc = "e^x - 1, accurate near 0", C.FLOAT, C.promote_float,
    function(ctx, g) return g * (ctx.outputs[1] + 1) end },
  log2 = { doc = "base-2 logarithm", C.FLOAT, C.promote_float,
    function(ctx, g) return g / (ctx.inputs[1] * 0.6931471805599453) end },
}
-- trigonometric and hyperbolic functions and their inverses
local function one_minus_sq(x) return 1 - x * x end
local trig = {
  tan = { "tangent", function(ctx, g) local y = ctx.outputs[1]; return g * (1 + y * y) end },
  asin = { "inverse sine", function(ctx, g) return g / F.sqrt(one_minus_sq(ctx.inputs[1])) end },
  acos = { "inverse cosine", function(ctx, g) return -(g / F.sqrt(one_minus_sq(ctx.inputs[1]))) end },
  atan = { "inverse tangent", function(ctx, g) local x = ctx.inputs[1]; return g / (x * x + 1) end },
  sinh = { "hyperbolic sine", function(ctx, g) return g * F.cosh(ctx.inputs[1]) end },
  cosh = { "hyperbolic cosine", function(ctx, g) return g * F.sinh(ctx.inputs[1]) end },
  asinh = { "inverse hyperbolic sine", function(ctx, g) local x = ctx.inputs[1]; return g / F.sqrt(x * x + 1) end },
  acosh = { "inverse hyperbolic cosine",
    function(ctx, g) local x = ctx.inputs[1]; return g / F.sqrt((x - 1) * (x + 1)) end },
  atanh = { "inverse hyperbolic tangent", function(ctx, g) return g / one_minus_sq(ctx.inputs[1]) end },
}
for name, spec in pairs(trig) do unary[name] = { doc = spec[1], C.FLOAT, C.promote_float, spec[2] } end
-- rounding to a 16-bit float format, the value kept in x's dtype (ONNX's Cast to FLOAT16/BFLOAT16); a step
-- function, given no backward
unary.round_f16 = { doc = "x rounded to the nearest float16 value, ties to even (torch's x.half().to(x.dtype))",
  C.FLOAT, C.promote_float }
unary.round_bf16 = { doc = "x rounded to the nearest bfloat16 value, ties to even (torch's x.bfloat16().to(x.dtype))",
  C.FLOAT, C.promote_float }
-- rounding (integers come back unchanged; round is half to even): the gradient is 0, as PyTorch's
local rounding = { floor = "round down to an integer value", ceil = "round up to an integer value",
  round = "round to the nearest integer value, halves to even", trunc = "round toward zero to an integer value" }
for name, doc in pairs(rounding) do
  unary[name] = { doc = doc, C.NUMERIC, C.promote_arith, function(ctx, g) return g * 0 end }
end
for name, spec in pairs(unary) do def_unary(name, spec[1], spec[2], spec[3], { doc = spec.doc }) end
def_unary("logical_not", C.BOOL, C.promote_bool, nil, { doc = "not x, on bool tensors" })

-- ---- binary ----
local function mul_bw(ctx, g)
  local a, b = ctx.inputs[1], ctx.inputs[2]
  return ctx.needs[1] and sum_to(g * b, a._shape) or nil, ctx.needs[2] and sum_to(g * a, b._shape) or nil
end
def_binary("add", "a + b", C.NUMERIC, C.promote_arith, function(ctx, g)
  return ctx.needs[1] and sum_to(g, ctx.inputs[1]._shape) or nil,
    ctx.needs[2] and sum_to(g, ctx.inputs[2]._shape) or nil end)
def_binary("sub", "a - b", C.NUMERIC, C.promote_arith, function(ctx, g)
  return ctx.needs[1] and sum_to(g, ctx.inputs[1]._shape) or nil,
    ctx.needs[2] and sum_to(-g, ctx.inputs[2]._shape) or nil end)
def_binary("mul", "a * b", C.NUMERIC, C.promote_arith, mul_bw)
def_binary("div", "a / b, true division (integers promote to f32)", C.FLOAT, C.promote_float, function(ctx, g)
  local a, b = ctx.inputs[1], ctx.inputs[2]
  return ctx.needs[1] and sum_to(g / b, a._shape) or nil,
         ctx.needs[2] and sum_to(-(g * a) / (b * b), b._shape) or nil end)
def_binary("floor_divide", "a // b on integer tensors (the integer kernel of div)", C.set { "i64", "i32" },
  C.promote_same, nil, nil, "div")
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
def_binary("pow", "a ^ b", C.SIGNED, promote_pow, function(ctx, g)
  local a, b, y = ctx.inputs[1], ctx.inputs[2], ctx.outputs[1]
  local ga, gb
  -- as PyTorch: b a^(b-1) is 0 where b == 0 (also at a == 0); y log a is 0 where a == 0 and b >= 0
  if ctx.needs[1] then ga = sum_to(g * F.where(F.eq(b, 0), 0, b * F.pow(a, b - 1)), a._shape) end
  if ctx.needs[2] then
    gb = sum_to(g * F.where(F.logical_and(F.eq(a, 0), F.ge(b, 0)), 0, y * F.log(a)), b._shape)
  end
  return ga, gb end)
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
def_binary("fmod", "remainder of a / b with the sign of a (C's fmod)", C.SIGNED, C.promote_arith,
  mod_bw(function(q) return F.trunc(q) end))
def_binary("remainder", "a % b with the sign of b (Python's and Lua's %)", C.SIGNED, C.promote_arith,
  mod_bw(function(q) return F.floor(q) end))
def_binary("maximum", "larger of a and b", C.NUMERIC, C.promote_arith, minmax_bw(function(a, b) return F.gt(a, b) end))
def_binary("minimum", "smaller of a and b", C.NUMERIC, C.promote_arith, minmax_bw(function(a, b) return F.lt(a, b) end))
local comparisons = { lt = "a < b", le = "a <= b", gt = "a > b", ge = "a >= b", eq = "a == b",
  ne = "a ~= b (torch.ne, !=)" }
for name, relation in pairs(comparisons) do
  def_binary(name, relation .. ", a bool tensor", C.ALL, C.promote_same, nil, "bool")
end
local logical = { logical_and = "a and b", logical_or = "a or b", logical_xor = "a xor b" }
for name, relation in pairs(logical) do
  def_binary(name, relation .. ", on bool tensors", C.BOOL, C.promote_bool, nil, "bool")
end

-- bitwise ops on integer tensors (PyTorch's bitwise_*): >> is arithmetic on signed dtypes; a shift by the
-- dtype's width or more gives 0 (<<) or the sign fill (>>)
local INTEGER = C.set { "i64", "i32", "u8" }
local function promote_integer(name)
  return function(inputs, attrs)
    local out = C.promote_same(inputs, attrs)
    if not dtype.is_int[out[1].dtype] then -- i8 has no kernel: it runs in i32 (dispatch.lua), which wraps alike
      errors.raise(string.format("%s: expects integer tensors (i64, i32, u8, i8), got %s", name, out[1].dtype))
    end
    return out
  end
end
def_unary("bitwise_not", INTEGER, promote_integer("bitwise_not"), nil, { doc = "~x, bit by bit, on integers" })
local bitwise = { bitwise_and = "a & b", bitwise_or = "a | b", bitwise_xor = "a ^ b (exclusive or)",
  bitwise_left_shift = "a << b", bitwise_right_shift = "a >> b (arithmetic for signed dtypes)" }
for name, relation in pairs(bitwise) do
  def_binary(name, relation .. ", bit by bit, on integer tensors", INTEGER, promote_integer(name), nil)
end

-- where(cond, a, b): cond bool, a/b promoted together
D.define {
  name = "where", doc = "a where cond is true, else b (torch.where(cond, a, b))", kind = "where",
  kernel = "ds_where_%s", dtypes = C.ALL, ninputs = 3, elementwise = true,
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
D.define {
  name = "clamp", doc = "x limited to [min, max]", kind = "unary", kernel = "ds_clamp_%s", dtypes = C.NUMERIC,
  ninputs = 1, elementwise = true,
  attrs = { { "min", "float", -math.huge }, { "max", "float", math.huge } }, args = { "min", "max" },
  promote = function(inputs, attrs)
    local dt = inputs[1].dtype
    if not dtype.is_float[dt] and ((attrs.min ~= math.floor(attrs.min) and attrs.min > -math.huge)
      or (attrs.max ~= math.floor(attrs.max) and attrs.max < math.huge)) then dt = "f32" end
    return { D.cast(inputs[1], dt == "bool" and "i64" or dt) }
  end,
  infer = C.infer_broadcast(),
  backward = function(ctx, g)
    local x = ctx.inputs[1]
    local inside = F.logical_and(F.ge(x, ctx.attrs.min), F.le(x, ctx.attrs.max))
    return g * inside:astype(g.dtype)
  end,
}

-- softplus(x, beta, threshold) = log(1 + exp(beta * x)) / beta, x itself where beta * x > threshold (PyTorch)
def_unary("softplus", C.FLOAT, C.promote_float, function(ctx, g)
  local x, beta, threshold = ctx.inputs[1], ctx.attrs.beta, ctx.attrs.threshold
  local z = F.exp(x * beta)
  return F.where(F.gt(x * beta, threshold), g, g * z / (z + 1))
end, { doc = "log(1 + e^(beta x)) / beta, x above the threshold (torch.nn.functional.softplus)",
  attrs = { { "beta", "float", 1 }, { "threshold", "float", 20 } }, args = { "beta", "threshold" } })

-- astype (cast through the copy kernel; also used by dispatch to promote operands)
D.define {
  name = "astype", doc = "x converted to dtype (torch's x.to(dtype))", kind = "unary", kernel = "ds_copy_%s",
  dtypes = C.set(dtype.names), ninputs = 1, elementwise = true,
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
D.define {
  name = "contiguous", doc = "a contiguous copy of x (x:copy_(y) is its in-place form)", inplace_name = "copy_",
  kind = "unary", kernel = "ds_copy_%s", dtypes = C.set(dtype.names), ninputs = 1, elementwise = true,
  infer = function(inputs) return { shape = inputs[1]._shape, dtype = inputs[1].dtype } end,
  backward = function(ctx, g) return g end,
}

-- this family's op defs by name (callers require the family and read them)
return D.defined_since(first)
