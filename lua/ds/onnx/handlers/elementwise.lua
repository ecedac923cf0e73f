-- onnx/handlers/elementwise.lua: ONNX import handlers of elementwise ops: arithmetic (folded on consts),
-- comparisons, logic, activations, math functions, Cast, Where, Softmax.
local F = require("ds.ops")
local sym = require("ds.sym")
local dtype = require("ds.dtype")
local types = require("ds.onnx.types")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local REQUIRED, T, is_const = common.REQUIRED, V.tensor, V.is_const
local dim, rank, axis0, refuse, all_const = common.dim, common.rank, common.axis0, common.refuse, common.all_const

local function int_div(x, y)
  if type(x) == "number" and type(y) == "number" then
    local q = x / y
    return q >= 0 and math.floor(q) or math.ceil(q) -- ONNX integer Div truncates
  end
  return sym.div(x, y, "Div")
end
local FOLD = {
  Add = sym.add, Sub = sym.sub, Mul = sym.mul,
  Equal = function(x, y) return x == y and 1 or 0 end,
}

-- ---- elementwise ----
local BINARY = { Add = F.add, Sub = F.sub, Mul = F.mul, Div = F.div, Pow = F.pow }
for op, f in pairs(BINARY) do
  def(op, {}, function(ins)
    local a, b = ins[1], ins[2]
    if all_const(ins) and (FOLD[op] or (op == "Div" and not dtype.is_float[a.dtype])) then
      local r = common.broadcast2(a, b, FOLD[op] or int_div)
      if r then return r end
    end
    if op == "Div" and not dtype.is_float[V.dtype(a)] then
      refuse("integer Div of tensors (ONNX truncates, ds's div gives floats) is not supported")
    end
    return f(T(a), T(b))
  end)
end
local COMPARE = { Equal = F.eq, Less = F.lt, Greater = F.gt, LessOrEqual = F.le, GreaterOrEqual = F.ge }
for op, f in pairs(COMPARE) do
  def(op, {}, function(ins)
    if op == "Equal" and all_const(ins) then
      local r = common.broadcast2(ins[1], ins[2], FOLD.Equal, "bool")
      if r then return r end
    end
    return f(T(ins[1]), T(ins[2]))
  end)
end
def("And", {}, function(ins) return F.logical_and(T(ins[1]), T(ins[2])) end)
def("Or", {}, function(ins) return F.logical_or(T(ins[1]), T(ins[2])) end)
def("Not", {}, function(ins) return F.logical_not(T(ins[1])) end)
local UNARY = { Relu = F.relu, Tanh = F.tanh, Sigmoid = F.sigmoid, Erf = F.erf, Exp = F.exp, Log = F.log,
  Sqrt = F.sqrt, Neg = F.neg, Abs = F.abs, Sin = F.sin, Cos = F.cos }
for op, f in pairs(UNARY) do def(op, {}, function(ins) return f(T(ins[1])) end) end
def("Reciprocal", {}, function(ins) return 1 / T(ins[1]) end)
def({ "Identity", "Dropout" }, { seed = false, ratio = false, training_mode = false }, function(ins, at, node)
  if node.op_type == "Dropout" then
    if ins[3] ~= nil and (not is_const(ins[3]) or V.data(ins[3])[1] ~= 0) then
      refuse("Dropout in training mode is not supported (inference only)")
    end
    if (node.output[2] or "") ~= "" then refuse("Dropout: the mask output is not supported") end
  end
  return ins[1]
end)
def("Where", {}, function(ins) return F.where(T(ins[1]), T(ins[2]), T(ins[3])) end)
def("Cast", { to = REQUIRED, saturate = false }, function(ins, at)
  local dt = types.DS[at.to] or refuse("Cast to " .. (types.NAME[at.to] or tostring(at.to)) .. " is not supported")
  local x = ins[1]
  if is_const(x) and x.data then
    local out = {}
    for i, v in ipairs(x.data) do
      if type(v) ~= "number" then out[i] = v
      elseif dt == "bool" then out[i] = v ~= 0 and 1 or 0
      elseif not dtype.is_float[dt] then out[i] = v >= 0 and math.floor(v) or math.ceil(v)
      else out[i] = v end
    end
    return V.const(dt, x.shape, out)
  end
  return T(x):astype(dt)
end)
def("Softmax", { axis = -1 }, function(ins, at) return F.softmax(T(ins[1]), dim(at.axis)) end)
def("LogSoftmax", { axis = -1 }, function(ins, at) return F.log_softmax(T(ins[1]), dim(at.axis)) end)

return OPS
