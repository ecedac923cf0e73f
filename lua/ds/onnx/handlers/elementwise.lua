-- onnx/handlers/elementwise.lua: ONNX import handlers of elementwise ops: arithmetic (folded on consts), Pow
-- and Div with ONNX's element types, Mod, comparisons, logic and bitwise ops, variadic Max/Min/Sum/Mean, math
-- functions, rounding, IsNaN/IsInf, Cast/CastLike to every type ds reads, Where, Identity, Dropout (inference).
local F = require("ds.ops")
local EW = require("ds.ops.elementwise") -- the elementwise ops' defs, each naming its ONNX form
local sym = require("ds.sym")
local dtype = require("ds.dtype")
local types = require("ds.onnx.types")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local REQUIRED, T, is_const = common.REQUIRED, V.tensor, V.is_const
local rank, axis0, refuse, all_const = common.rank, common.axis0, common.refuse, common.all_const

-- opsets 1-6 broadcast only with broadcast = 1: b's dims then align with a's from axis (default: a's trailing
-- dims, as NumPy's); consumed_inputs (opset 1) is an in-place hint without effect on the values
local LEGACY = { broadcast = false, axis = false, consumed_inputs = false }
local function legacy_operand(a, b, at)
  if at.broadcast ~= 1 or at.axis == nil then return b end
  local ra, rb = rank(a), rank(b)
  local trailing = ra - axis0(at.axis, ra, "broadcast") - rb
  if trailing < 0 then refuse(string.format("broadcast axis %d leaves no room for a rank-%d operand", at.axis, rb)) end
  if trailing == 0 then return b end
  local shape = {}
  for k, d in ipairs(V.shape(b)) do shape[k] = d end
  for _ = 1, trailing do shape[#shape + 1] = 1 end
  return T(b):reshape(shape)
end
local function binary(names, attrs, run)
  def(names, attrs, function(ins, at, node, opset)
    return run(ins[1], legacy_operand(ins[1], ins[2], at), at, node, opset)
  end)
end

-- ---- arithmetic ----
local function int_div(x, y)
  if y == 0 then refuse("Div: integer division by the constant 0") end
  if type(x) == "number" and type(y) == "number" then
    local q = x / y
    return q >= 0 and math.floor(q) or math.ceil(q) -- ONNX integer Div truncates
  end
  return sym.div(x, y, "Div")
end
-- on numbers (floats too) plain arithmetic, on dynamic dims sym's
local function folding(on_dims, on_numbers)
  return function(x, y)
    if type(x) == "number" and type(y) == "number" then return on_numbers(x, y) end
    return on_dims(x, y)
  end
end
local FOLD = { Add = folding(sym.add, function(x, y) return x + y end),
  Sub = folding(sym.sub, function(x, y) return x - y end), Mul = folding(sym.mul, function(x, y) return x * y end) }
-- float Div of consts: numbers only (a dynamic dim divided as a float is not a shape value)
local function float_div(x, y)
  if type(x) == "number" and type(y) == "number" then return x / y end
  refuse("Div of the shape values " .. tostring(x) .. " and " .. tostring(y) .. " as floats is not known at import time")
end
-- integer a / b truncated toward zero: a - fmod(a, b) is a multiple of b, so its floor division is exact
-- (u8 goes through i32, which has the kernels)
local function trunc_div(a, b)
  local dt = a.dtype
  local wide = dt == "u8" and "i32" or dt
  if wide ~= dt then a, b = a:astype(wide), b:astype(wide) end
  local q = F.floor_divide(a - F.fmod(a, b), b)
  return q.dtype == dt and q or q:astype(dt)
end
-- Pow keeps the base's type: a mixed pair (an integer base with a float exponent, ...) computes in f64
local function pow(a, b)
  if a.dtype == b.dtype and a.dtype ~= "u8" then return F.pow(a, b) end
  return F.pow(a:astype("f64"), b:astype("f64")):astype(a.dtype)
end
local BINARY = { Add = F.add, Sub = F.sub, Mul = F.mul, Div = F.div, Pow = pow }
for op, f in pairs(BINARY) do
  binary(op, LEGACY, function(a, b)
    if all_const({ a, b }) and (FOLD[op] or op == "Div") then
      local r = common.broadcast2(a, b, FOLD[op] or (dtype.is_float[a.dtype] and float_div or int_div))
      if r then return r end
    end
    if op == "Div" and not dtype.is_float[V.dtype(a)] then return trunc_div(T(a), T(b):astype(V.dtype(a))) end
    return f(T(a), T(b))
  end)
end
-- Mod: fmod = 0 takes the divisor's sign (Python's %, remainder), fmod = 1 the dividend's (C's fmod)
def("Mod", { fmod = 0 }, function(ins, at)
  local a, b = T(ins[1]), T(ins[2])
  if at.fmod ~= 0 and at.fmod ~= 1 then refuse("Mod: fmod must be 0 or 1, got " .. tostring(at.fmod)) end
  local f = at.fmod == 1 and F.fmod or F.remainder
  if a.dtype == "u8" then return f(a:astype("i32"), b:astype("i32")):astype("u8") end
  return f(a, b)
end)

-- ---- variadic Max, Min, Sum, Mean (broadcasting; Max/Min/Sum keep integer types) ----
local VARIADIC = { Max = F.maximum, Min = F.minimum, Sum = F.add, Mean = F.add }
-- Max/Min of consts: numbers, or a dynamic dim with itself
local function pick(f, op)
  return function(x, y)
    if type(x) == "number" and type(y) == "number" then return f(x, y) end
    if sym.same(x, y) then return x end
    refuse(string.format("%s of the shape values %s and %s is not known at import time", op, tostring(x), tostring(y)))
  end
end
local VARIADIC_FOLD = { Max = pick(math.max, "Max"), Min = pick(math.min, "Min"), Sum = sym.add }
for op, f in pairs(VARIADIC) do
  def(op, { consumed_inputs = false }, function(ins, at, node)
    local n = #node.input
    local y = ins[1]
    for k = 2, n do
      local folded = VARIADIC_FOLD[op] and all_const({ y, ins[k] }) and
        common.broadcast2(y, ins[k], VARIADIC_FOLD[op])
      y = folded or f(T(y), T(ins[k]))
    end
    if op == "Mean" then y = T(y) / n end
    return y
  end)
end

-- ---- comparisons, logic, bitwise ----
local COMPARE = { Equal = F.eq, Less = F.lt, Greater = F.gt, LessOrEqual = F.le, GreaterOrEqual = F.ge }
-- comparisons of consts: numbers, a dynamic dim with itself, or a dynamic dim (never negative) with a
-- negative number (exporters test shape values against -1)
local function comparing(test)
  return function(x, y)
    if type(x) == "number" and type(y) == "number" then return test(x, y) and 1 or 0 end
    if sym.same(x, y) then return test(0, 0) and 1 or 0 end
    if type(y) == "number" and y < 0 and sym.is(x) then return test(0, -1) and 1 or 0 end
    if type(x) == "number" and x < 0 and sym.is(y) then return test(-1, 0) and 1 or 0 end
    refuse("comparing the shape values " .. tostring(x) .. " and " .. tostring(y) .. " is not known at import time")
  end
end
local COMPARE_FOLD = { Equal = comparing(function(x, y) return x == y end),
  Less = comparing(function(x, y) return x < y end), Greater = comparing(function(x, y) return x > y end),
  LessOrEqual = comparing(function(x, y) return x <= y end),
  GreaterOrEqual = comparing(function(x, y) return x >= y end) }
for op, f in pairs(COMPARE) do
  binary(op, LEGACY, function(a, b)
    if all_const({ a, b }) then
      local r = common.broadcast2(a, b, COMPARE_FOLD[op], "bool")
      if r then return r end
    end
    return f(T(a), T(b))
  end)
end
local LOGIC = { And = F.logical_and, Or = F.logical_or, Xor = F.logical_xor, BitwiseAnd = F.bitwise_and,
  BitwiseOr = F.bitwise_or, BitwiseXor = F.bitwise_xor }
for op, f in pairs(LOGIC) do binary(op, LEGACY, function(a, b) return f(T(a), T(b)) end) end
def("Not", {}, function(ins)
  if all_const(ins) then return common.map(ins[1], function(x) return x == 0 and 1 or 0 end) end
  return F.logical_not(T(ins[1]))
end)
def("BitwiseNot", {}, function(ins) return F.bitwise_not(T(ins[1])) end)
-- ONNX's BitShift is for unsigned types (UINT16/32/64 are read as i32/i64, types.lua)
def("BitShift", { direction = REQUIRED }, function(ins, at)
  local f = ({ LEFT = F.bitwise_left_shift, RIGHT = F.bitwise_right_shift })[at.direction]
  if not f then refuse("BitShift: direction must be LEFT or RIGHT, got '" .. tostring(at.direction) .. "'") end
  return f(T(ins[1]), T(ins[2]))
end)

-- ---- functions of one input ----
-- the ONNX op each unary elementwise op's entry names as its form (ops/elementwise.lua: onnx = "Exp"), but Not and
-- Identity, which have handlers of their own here; then the ONNX ops ds computes otherwise
local OWN = { Not = true, Identity = true }
local UNARY = {}
for name, d in pairs(EW) do
  if d.ew_kind == "unary" and type(d.onnx) == "string" and not OWN[d.onnx] then UNARY[d.onnx] = F[name] end
end
UNARY.Floor, UNARY.Ceil, UNARY.Round, UNARY.IsNaN = F.floor, F.ceil, F.round, F.isnan
UNARY.Reciprocal = function(x) return 1 / x end
UNARY.Sign = function(x) return x.dtype == "u8" and F.ne(x, 0):astype("u8") or F.sign(x) end
-- consts fold: Neg, Abs, Ceil, Floor, Relu of shape values (a dynamic dim is a non-negative integer)
local function on_numbers(f) return function(x) return type(x) == "number" and f(x) or x end end
local UNARY_FOLD = { Neg = function(x) return sym.mul(x, -1) end, Abs = on_numbers(math.abs),
  Ceil = on_numbers(math.ceil), Floor = on_numbers(math.floor), Relu = on_numbers(function(x) return math.max(x, 0) end) }
for op, f in pairs(UNARY) do
  def(op, { consumed_inputs = false }, function(ins)
    if UNARY_FOLD[op] and all_const(ins) then return common.map(ins[1], UNARY_FOLD[op]) end
    return f(T(ins[1]))
  end)
end
def("IsInf", { detect_positive = 1, detect_negative = 1 }, function(ins, at)
  local x = T(ins[1])
  local pos, neg = F.eq(x, math.huge), F.eq(x, -math.huge)
  if at.detect_positive ~= 0 and at.detect_negative ~= 0 then return F.logical_or(pos, neg) end
  if at.detect_positive ~= 0 then return pos end
  if at.detect_negative ~= 0 then return neg end
  return F.logical_and(pos, neg) -- detects nothing: all false
end)

-- ---- Cast, CastLike (types.lua: the ds dtype of each ONNX type, narrow integers wrapped, FLOAT16 and
-- BFLOAT16 rounded by ds's casts) ----
local function wrap(v, bits, signed) -- an integer wrapped to `bits` bits, as a C conversion does
  local m = 2 ^ bits
  local r = v % m
  if signed and r >= m / 2 then r = r - m end
  return r
end
-- a Cast to ONNX type `to` of the const x, or nil when x is not foldable (unknown data, float targets)
local function cast_const(x, to, dt)
  if not (is_const(x) and x.data) or types.NARROW_FLOAT[to] then return nil end
  local narrow, out = types.NARROW_INT[to], {}
  for i, v in ipairs(x.data) do
    if type(v) ~= "number" then out[i] = v
    elseif dt == "bool" then out[i] = v ~= 0 and 1 or 0
    elseif not dtype.is_float[dt] then
      v = v >= 0 and math.floor(v) or math.ceil(v)
      out[i] = narrow and wrap(v, narrow.bits, narrow.signed) or v
    else out[i] = v end
  end
  return V.const(dt, x.shape, out)
end
local function cast(x, to)
  local dt = types.DS[to]
  if not dt then refuse("Cast to " .. (types.NAME[to] or tostring(to)) .. " is not supported") end
  local c = cast_const(x, to, dt)
  if c then return V.note_onnx_type(c, to) end
  local t = T(x)
  local narrow = types.NARROW_INT[to]
  local y
  if narrow or (dt == "u8" and dtype.is_float[t.dtype]) then -- whole numbers first, then wrapped (C casts)
    local bits = narrow and narrow.bits or 8
    local m = 2 ^ bits
    local whole = t:astype("i64")
    y = (narrow and narrow.signed) and F.remainder(whole + m / 2, m) - m / 2 or F.remainder(whole, m)
    y = y:astype(dt)
  else -- the same tensor when nothing changes (a copy when the ONNX type does: CastLike reads it)
    y = (t.dtype == dt and V.onnx_type(t) == to) and t or t:astype(dt)
  end
  return V.note_onnx_type(y, to)
end
def("Cast", { to = REQUIRED, saturate = false }, function(ins, at)
  local to = at.to
  if type(to) == "string" then -- Cast-1 names the type
    for code, name in pairs(types.NAME) do if name == to then to = code end end
  end
  return cast(ins[1], to)
end)
def("CastLike", { saturate = false }, function(ins) return cast(ins[1], V.onnx_type(ins[2])) end)

-- ---- Where, Identity, Dropout (inference: the output is the input, the mask all true) ----
-- Where of consts folds (each input of one entry or of the largest's count: shape computations)
local function where_fold(c, x, y)
  local big = c
  for _, v in ipairs({ x, y }) do if #v.data > #big.data then big = v end end
  local n, out = #big.data, {}
  for _, v in ipairs({ c, x, y }) do if #v.data ~= 1 and #v.data ~= n then return nil end end
  local function at(v, i) return v.data[#v.data == 1 and 1 or i] end
  for i = 1, n do out[i] = at(c, i) ~= 0 and at(x, i) or at(y, i) end
  return V.const(x.dtype, big.shape, out)
end
def("Where", {}, function(ins)
  if all_const(ins) and #ins[1].shape <= 1 and #ins[2].shape <= 1 and #ins[3].shape <= 1 then
    local r = where_fold(ins[1], ins[2], ins[3])
    if r then return r end
  end
  return F.where(T(ins[1]), T(ins[2]), T(ins[3]))
end)
def("Identity", {}, function(ins) return ins[1] end)
def("Dropout", { seed = false, ratio = false, is_test = false, consumed_inputs = false }, function(ins, at, node,
  opset)
  if opset < 7 and at.is_test ~= 1 then
    refuse("Dropout: is_test = 0 (opset < 7) is training mode, which is not supported (inference only)")
  end
  if ins[3] ~= nil and V.data(ins[3], "Dropout's training_mode")[1] ~= 0 then
    -- training mode drops nothing at ratio 0; any other ratio is random, which an import does not reproduce
    local ratio = ins[2] and V.data(ins[2], "Dropout's ratio")[1] or 0.5
    if ratio ~= 0 then refuse("Dropout in training mode is not supported (inference only)") end
  end
  if (node.output[2] or "") == "" then return ins[1] end
  local x = T(ins[1])
  return x, F.ones_like(x, { dtype = opset >= 10 and "bool" or x.dtype }) -- opsets 7-9: the mask has x's type
end)

return OPS
