-- onnx/handlers/index.lua: ONNX import handlers of indexing ops (Gather, ...), with ONNX's 0-based indices.
local F = require("ds.ops")
local sym = require("ds.sym")
local dtype = require("ds.dtype")
local types = require("ds.onnx.types")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local REQUIRED, T, is_const = common.REQUIRED, V.tensor, V.is_const
local dim, rank, axis0, refuse, all_const = common.dim, common.rank, common.axis0, common.refuse, common.all_const

-- Gather with ONNX's 0-based (negative from the end) indices
def("Gather", { axis = 0 }, function(ins, at)
  local x, ix = ins[1], ins[2]
  local s = V.shape(x)
  local a = axis0(at.axis, #s) + 1
  if is_const(x) and x.data and #s == 1 and is_const(ix) and ix.data then
    local out = {}
    for i, k in ipairs(ix.data) do
      if type(k) ~= "number" then refuse("Gather: a dynamic index") end
      local j = k < 0 and k + #x.data or k
      if j < 0 or j >= #x.data then refuse("Gather: index " .. k .. " out of range for " .. #x.data .. " values") end
      out[i] = x.data[j + 1]
    end
    return V.const(x.dtype, ix.shape, out)
  end
  local t = T(x)
  if is_const(ix) and ix.data and #ix.shape == 0 then
    local k = ix.data[1]
    return t:select(a, k < 0 and k or k + 1)
  end
  local it = T(ix)
  local flat = it:reshape(-1) + 1
  local g = F.index_select(t, a, flat)
  local shape = {}
  for i = 1, a - 1 do shape[#shape + 1] = s[i] end
  for _, d in ipairs(it.shape) do shape[#shape + 1] = d end
  for i = a + 1, #s do shape[#shape + 1] = s[i] end
  return g:reshape(shape)
end)

return OPS
