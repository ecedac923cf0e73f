-- onnx/handlers/quantize.lua: ONNX import handlers of linear quantization: QuantizeLinear, DequantizeLinear,
-- DynamicQuantizeLinear, QLinearMatMul and QLinearConv (per-tensor, per-axis and blocked scales), and ONNX
-- Runtime's com.microsoft DynamicQuantizeMatMul and MatMulIntegerToFloat (its quantization tool writes them).
-- MatMulInteger and ConvInteger are in nn.lua.
--[[ Quantized values have ONNX's integer types, read as ds dtypes (types.lua): UINT8 is u8, INT8 is i8, INT16 /
  UINT16 are i32 holding values of their range; the type of a result is noted on it (V.note_onnx_type).
  quantize(x) = saturate(round(x / scale) + zero_point), round half to even; dequantize(q) = (q - zero_point)
  * scale. QLinearMatMul / QLinearConv accumulate (a - a_zero) (b - b_zero) exactly (MatMulInteger /
  ConvInteger of nn.lua), then requantize as ONNX's reference does: the accumulator (plus the i32 bias) times
  the f32 multiplier a_scale * b_scale / y_scale, in f64 (exact), rounded half to even, plus y_zero_point,
  saturated. The float8 and 4-bit types are refused. ]]
local F = require("ds.ops")
local V = require("ds.onnx.import_values")
local types = require("ds.onnx.types")
local common = require("ds.onnx.handlers.common")
local nn = require("ds.onnx.handlers.nn")

local OPS, def = common.family()
local T, rank, refuse = V.tensor, common.rank, common.refuse

local UINT8 = 2
-- the range of each ONNX integer type a quantized value may have
local RANGE = { [2] = { 0, 255 }, [3] = { -128, 127 }, [4] = { 0, 65535 }, [5] = { -32768, 32767 } }
-- the ONNX types of the higher opsets ds cannot hold (float8, 4-bit)
local UNSUPPORTED = { [17] = "FLOAT8E4M3FN", [18] = "FLOAT8E4M3FNUZ", [19] = "FLOAT8E5M2", [20] = "FLOAT8E5M2FNUZ",
  [21] = "UINT4", [22] = "INT4", [23] = "FLOAT4E2M1" }

-- the range of quantized type t (an ONNX elem_type), refusing one ds does not quantize to
local function range_of(t, op)
  if RANGE[t] then return RANGE[t] end
  refuse(string.format("%s: quantized type %s is not supported (uint8, int8, uint16, int16 are)", op,
    UNSUPPORTED[t] or types.NAME[t] or tostring(t)))
end

--[[ a scale or zero point v of x (rank r) as a tensor that broadcasts against x: a scalar or one-element
  vector per tensor; a vector of x.shape[axis] entries per axis; with block_size > 0, a tensor of x's rank
  whose dim axis has ceil(x.shape[axis] / block_size) entries, each repeated block_size times ]]
local function along_axis(v, x, at, op)
  local t, r = T(v), rank(x)
  if t:numel() == 1 and rank(t) <= 1 and (at.block_size or 0) == 0 then return t:reshape({}) end
  local a = common.axis0(at.axis, r, op)
  local n = x.shape[a + 1]
  if (at.block_size or 0) > 0 then
    if rank(t) ~= r then refuse(op .. ": a blocked scale or zero point must have the input's rank") end
    if type(n) ~= "number" then refuse(op .. ": blocks along the dynamic dim " .. tostring(n)) end
    local idx = {}
    for i = 0, n - 1 do idx[i + 1] = math.floor(i / at.block_size) + 1 end
    return F.index_select(t, a + 1, F.tensor(idx, { dtype = "i64" }))
  end
  if rank(t) ~= 1 or (type(n) == "number" and t.shape[1] ~= n) then
    refuse(string.format("%s: a scale or zero point must be a scalar or a vector of the %d entries of axis %d",
      op, type(n) == "number" and n or -1, a))
  end
  local shape = {}
  for i = 1, r do shape[i] = i == a + 1 and -1 or 1 end
  return t:reshape(shape)
end

-- q (float, whole numbers) plus the zero point, saturated to quantized type t (ONNX elem_type) and cast to its dtype
local function saturate(q, zero, t, op)
  local lo, hi = unpack(range_of(t, op))
  if zero then q = q + zero:astype(q.dtype) end
  return V.note_onnx_type(F.clamp(q, lo, hi):astype(types.DS[t]), t)
end

-- the quantized type of a QuantizeLinear: its zero point's, else output_dtype's (opset 21), else uint8
local function quantized_type(zero, at)
  local t = zero and V.onnx_type(zero) or (at.output_dtype ~= 0 and at.output_dtype) or UINT8
  if zero and at.output_dtype ~= 0 and at.output_dtype ~= t then
    refuse("QuantizeLinear: output_dtype " .. tostring(at.output_dtype) .. " differs from the zero point's type")
  end
  return t
end

-- QuantizeLinear (opsets 10-21): y = saturate(round(x / y_scale) + y_zero_point)
def("QuantizeLinear", { axis = 1, saturate = 1, block_size = 0, output_dtype = 0 }, function(ins, at)
  local x = T(ins[1])
  local t = quantized_type(ins[3], at)
  -- an integer x is divided in f64 (ONNX's reference: NumPy's int32 / float32); FLOAT16 / BFLOAT16 x and
  -- scales in f32, as ONNX Runtime does
  if x.dtype == "f16" or x.dtype == "bf16" then x = x:astype("f32")
  elseif x.dtype ~= "f32" and x.dtype ~= "f64" then x = x:astype("f64") end
  local scale = along_axis(ins[2], x, at, "QuantizeLinear"):astype(x.dtype)
  local q = F.round(x / scale)
  return saturate(q, ins[3] and along_axis(ins[3], x, at, "QuantizeLinear"), t, "QuantizeLinear")
end)

-- DequantizeLinear (opsets 10-21): y = (x - x_zero_point) * x_scale, of the scale's float type
def("DequantizeLinear", { axis = 1, block_size = 0 }, function(ins, at)
  local x = T(ins[1])
  local scale = along_axis(ins[2], x, at, "DequantizeLinear")
  local y = x:astype(scale.dtype)
  if ins[3] then y = y - along_axis(ins[3], x, at, "DequantizeLinear"):astype(scale.dtype) end
  -- a FLOAT16 / BFLOAT16 scale gives a result of its type (ds's f16/bf16: the f32 product rounded to it)
  return y * scale
end)

--[[ DynamicQuantizeLinear (opset 11): x (f32) -> y (uint8), y_scale, y_zero_point (scalars) with the range
  [lo, hi] = [min(0, min x), max(0, max x)] mapped onto [0, 255]: scale = (hi - lo) / 255, or 1 when x is all
  zeros (ONNX Runtime's choice; the formula divides by zero), zero point = saturate(round(-lo / scale)) ]]
def("DynamicQuantizeLinear", {}, function(ins)
  local x = T(ins[1])
  local lo = F.minimum(x:min(), F.zeros({}, { dtype = x.dtype }))
  local hi = F.maximum(x:max(), F.zeros({}, { dtype = x.dtype }))
  local span = hi - lo
  local scale = F.where(F.eq(span, 0), F.full({}, 255, { dtype = x.dtype }), span) / 255
  local zero = saturate(F.round(-lo / scale), nil, UINT8, "DynamicQuantizeLinear")
  return saturate(F.round(x / scale), zero, UINT8, "DynamicQuantizeLinear"), scale, zero
end)

-- the accumulator acc (integer) requantized: round(acc * multiplier) + zero, saturated to the zero point's type
local function requantize(acc, multiplier, zero, op)
  local q = F.round(acc:astype("f64") * multiplier:astype("f64"))
  return saturate(q, T(zero), V.onnx_type(zero), op)
end

-- a per-row scale of a 2-D matrix (an M-entry vector) as (M, 1); scalars and N-D scales broadcast as they are
local function per_row(v)
  local t = T(v)
  if rank(t) == 1 and t:numel() > 1 then return t:reshape(-1, 1) end
  return t
end

-- QLinearMatMul (opsets 10-21): (a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point)
def("QLinearMatMul", {}, function(ins, at, node, opset, ctx)
  local acc = nn.MatMulInteger.run({ ins[1], ins[4], ins[3], ins[6] }, at, node, opset, ctx)
  local multiplier = per_row(ins[2]) * T(ins[5]) / T(ins[7])
  return requantize(acc, multiplier, ins[8], "QLinearMatMul")
end)

-- a per-output-channel vector (M) of a convolution as (1, M, 1, ...) for a rank-r output; scalars as they are
local function per_channel(v, r)
  local t = T(v)
  if t:numel() == 1 then return t:reshape({}) end
  local shape = { 1, -1 }
  for i = 3, r do shape[i] = 1 end
  return t:reshape(shape)
end

-- QLinearConv (opsets 10-21): (x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B)
def("QLinearConv", nn.ConvInteger.attrs, function(ins, at, node, opset, ctx)
  local acc = nn.ConvInteger.run({ ins[1], ins[4], ins[3], ins[6] }, at, node, opset, ctx)
  local r = rank(acc)
  if ins[9] then acc = acc + per_channel(ins[9], r):astype(acc.dtype) end
  local multiplier = T(ins[2]) * per_channel(ins[5], r) / T(ins[7])
  return requantize(acc, multiplier, ins[8], "QLinearConv")
end)

--[[ com.microsoft MatMulIntegerToFloat: (a, b, a_scale, b_scale, a_zero_point, b_zero_point, bias) -> f32
  y = float(MatMulInteger(a, b, a_zero_point, b_zero_point)) * (a_scale * b_scale) + bias, a_scale per tensor,
  b_scale per tensor or per column (N) ]]
local function integer_to_float(acc, a_scale, b_scale, bias)
  local y = acc:astype("f32") * (T(a_scale) * T(b_scale))
  if bias then y = y + T(bias) end
  return y
end
def("MatMulIntegerToFloat", {}, function(ins, at, node, opset, ctx)
  if not (ins[1] and ins[2] and ins[3] and ins[4]) then
    refuse("MatMulIntegerToFloat: needs a, b, a_scale and b_scale")
  end
  local acc = nn.MatMulInteger.run({ ins[1], ins[2], ins[5], ins[6] }, at, node, opset, ctx)
  return integer_to_float(acc, ins[3], ins[4], ins[7])
end)

-- com.microsoft DynamicQuantizeMatMul: (a f32, b, b_scale, b_zero_point, bias) -> f32: a quantized per tensor
-- as DynamicQuantizeLinear does, then MatMulIntegerToFloat
def("DynamicQuantizeMatMul", {}, function(ins, at, node, opset, ctx)
  if not (ins[1] and ins[2] and ins[3]) then refuse("DynamicQuantizeMatMul: needs a, b and b_scale") end
  local q, scale, zero = OPS.DynamicQuantizeLinear.run({ ins[1] }, {}, node, opset, ctx)
  local acc = nn.MatMulInteger.run({ q, ins[2], zero, ins[4] }, at, node, opset, ctx)
  return integer_to_float(acc, scale, ins[3], ins[5])
end)

return OPS
