-- onnx/handlers/reduce.lua: ONNX import handlers of reductions (Reduce*).
local F = require("ds.ops")
local sym = require("ds.sym")
local dtype = require("ds.dtype")
local types = require("ds.onnx.types")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local REQUIRED, T, is_const = common.REQUIRED, V.tensor, V.is_const
local dim, rank, axis0, refuse, all_const = common.dim, common.rank, common.axis0, common.refuse, common.all_const

-- ---- reductions ----
local function reduce_axes(ins, at, opset, op, r)
  local axes = at.axes
  if ins[2] ~= nil then axes = V.ints(ins[2], op .. "'s axes") end
  if axes == nil or #axes == 0 then
    if at.noop_with_empty_axes == 1 then return nil, true end
    axes = {}
    for i = 0, r - 1 do axes[#axes + 1] = i end
  end
  local dims = {}
  for i, a in ipairs(axes) do dims[i] = axis0(a, r) + 1 end
  return dims
end
for op, method in pairs({ ReduceMean = "mean", ReduceSum = "sum", ReduceMax = "amax", ReduceMin = "amin",
  ReduceProd = "prod" }) do
  def(op, { axes = false, keepdims = 1, noop_with_empty_axes = 0 }, function(ins, at, _, opset)
    local x = T(ins[1])
    local dims, noop = reduce_axes(ins, at, opset, op, rank(x))
    if noop then return x end
    return x[method](x, dims, at.keepdims ~= 0)
  end)
end

return OPS
