-- onnx/handlers/activation.lua: ONNX import handlers of activations (Clip, HardSigmoid, LeakyRelu,
-- PRelu, Elu, Selu, Celu, Softplus, Softsign, Mish, Gelu, ThresholdedRelu, Shrink) and of Softmax, LogSoftmax
-- and Hardmax (opset < 13: over the dims from axis on, as one flattened dim; opset >= 13: over axis alone).
local ffi = require("ffi")
local F = require("ds.ops")
local NF = require("ds.nn.functional")
local S = require("ds.shape")
local dtype = require("ds.dtype")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local T, is_const = V.tensor, V.is_const
local rank, axis0, refuse = common.rank, common.axis0, common.refuse
local FLT_MAX = 3.4028234663852886e38 -- Clip-1/6's default bounds (numeric_limits<float>::lowest/max)

-- ---- Clip: bounds as attributes before opset 11, as optional inputs (scalars, maybe computed) from 11 on ----
-- y (shape of x) limited below by the bound v: clamp by a known number, else maximum/minimum with the tensor
local function bound(y, v, side)
  if is_const(v) and v.data and #v.data == 1 and type(v.data[1]) == "number" then
    return F.clamp(y, { [side] = v.data[1] })
  end
  return (side == "min" and F.maximum or F.minimum)(y, T(v):astype(y.dtype))
end
def("Clip", { min = false, max = false, consumed_inputs = false }, function(ins, at, node, opset)
  local x = T(ins[1])
  if opset < 11 then return F.clamp(x, at.min or -FLT_MAX, at.max or FLT_MAX) end
  local y = x
  if ins[2] ~= nil then y = bound(y, ins[2], "min") end
  if ins[3] ~= nil then y = bound(y, ins[3], "max") end -- applied last: max wins when min > max, as np.clip
  return y
end)

-- ---- activations of one input with attributes ----
local OLD = { consumed_inputs = false } -- opset 1's in-place hint: no effect on the values
local function act(op, attrs, f)
  attrs.consumed_inputs = false
  def(op, attrs, function(ins, at) return f(T(ins[1]), at) end)
end
-- HardSigmoid with PyTorch's alpha (1/6 as a float attribute) and beta (0.5) is hardsigmoid, one pass; any other
-- alpha, beta its formula. (HardSwish, alpha 1/6 and beta 0.5 fixed, is ops/elementwise.lua's hardswish.)
local SIXTH = tonumber(ffi.new("float", 1 / 6))
act("HardSigmoid", { alpha = 0.2, beta = 0.5 }, function(x, at)
  if at.alpha == SIXTH and at.beta == 0.5 then return F.hardsigmoid(x) end
  return F.clamp(x * at.alpha + at.beta, 0, 1)
end)
act("LeakyRelu", { alpha = 0.01 }, function(x, at) return NF.leaky_relu(x, at.alpha) end)
act("Elu", { alpha = 1.0 }, function(x, at) return NF.elu(x, at.alpha) end)
act("Celu", { alpha = 1.0 }, function(x, at) return NF.celu(x, at.alpha) end)
-- gamma x for x > 0, gamma alpha (e^x - 1) otherwise (expm1 of min(x, 0): no overflow on the unused side)
act("Selu", { alpha = 1.67326319217681884765625, gamma = 1.05070102214813232421875 }, function(x, at)
  return F.where(F.gt(x, 0), x * at.gamma, F.expm1(F.clamp(x, { max = 0 })) * (at.alpha * at.gamma))
end)
act("Softplus", {}, function(x) return F.softplus(x) end)
act("Softsign", {}, function(x) return NF.softsign(x) end)
act("Mish", {}, function(x) return NF.mish(x) end)
act("Gelu", { approximate = "none" }, function(x, at)
  if at.approximate == "none" then return F.gelu(x) end
  if at.approximate == "tanh" then return F.gelu_tanh(x) end
  refuse("Gelu: approximate must be 'none' or 'tanh', got '" .. tostring(at.approximate) .. "'")
end)
act("ThresholdedRelu", { alpha = 1.0 }, function(x, at) return F.where(F.gt(x, at.alpha), x, 0) end)
-- x + bias below -lambd, x - bias above lambd, 0 between (integers keep their dtype)
act("Shrink", { bias = 0.0, lambd = 0.5 }, function(x, at)
  local y = F.where(F.lt(x, -at.lambd), x + at.bias, F.where(F.gt(x, at.lambd), x - at.bias, 0))
  return y.dtype == x.dtype and y or y:astype(x.dtype)
end)

-- ---- PRelu: slope broadcast to x (unidirectionally); before opset 7 a 1-D slope may hold one value per
-- channel (dim 2) ----
def("PRelu", OLD, function(ins, at, node, opset)
  local x, slope = T(ins[1]), T(ins[2])
  local xs, ss = x.shape, slope.shape
  if opset < 7 and #ss == 1 and #xs > 2 and ss[1] ~= 1 and ss[1] == xs[2] then
    local shape = { ss[1] }
    for k = 3, #xs do shape[k - 1] = 1 end
    slope = slope:reshape(shape)
  end
  local out = S.broadcast(xs, slope.shape, "PRelu")
  if #out ~= #xs then refuse("PRelu: the slope " .. S.str(slope.shape) .. " does not broadcast to x " .. S.str(xs)) end
  for k = 1, #xs do
    if out[k] ~= xs[k] then
      refuse("PRelu: the slope " .. S.str(slope.shape) .. " does not broadcast to x " .. S.str(xs))
    end
  end
  return F.where(F.lt(x, 0), x * slope, x)
end)

-- ---- Softmax, LogSoftmax, Hardmax ----
-- Hardmax over dim d: 1 at the first largest value, 0 elsewhere (x's dtype)
local function hardmax(x, d)
  local top = F.eq(x, F.amax(x, d, true))
  local first = F.eq(F.cumsum(top:astype("i32"), d), 1)
  return F.logical_and(top, first):astype(x.dtype)
end
-- opset < 13 over the dims from a (0-based) on, as one dim: softmax forms reduce over them together;
-- hardmax picks over their flattened values
local function over_dims(x, a, op)
  local r = rank(x)
  local dims = {}
  for k = a + 1, r do dims[#dims + 1] = k end
  if op == "Hardmax" then
    local outer = {}
    for k = 1, a do outer[k] = x.shape[k] end
    outer[a + 1] = -1
    return hardmax(x:reshape(outer), a + 1):reshape(x.shape)
  end
  local shifted = x - F.amax(x, dims, true)
  local e = F.exp(shifted)
  local total = F.sum(e, dims, true)
  if op == "Softmax" then return e / total end
  return shifted - F.log(total)
end
local ONE_DIM = { Softmax = F.softmax, LogSoftmax = F.log_softmax, Hardmax = hardmax }
for op, f in pairs(ONE_DIM) do
  def(op, { axis = false }, function(ins, at, node, opset)
    local x = T(ins[1])
    if not dtype.is_float[x.dtype] then refuse(op .. ": expects a float tensor, got " .. x.dtype) end
    local r = rank(x)
    if opset >= 13 then return f(x, axis0(at.axis or -1, r, op) + 1) end
    local a = axis0(at.axis or 1, r, op)
    if a == r - 1 then return f(x, r) end
    return over_dims(x, a, op)
  end)
end

return OPS
