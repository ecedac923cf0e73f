-- ops/division.lua: floor_divide for floating point, composed of fmod/div/floor/where as PyTorch's
-- div_floor_floating (a // b rounded as Python's, b = 0 gives a / b); integers keep the integer kernel.
-- Loaded before ops/init.lua generates the elementwise API, so ds.floor_divide and x:floor_divide are this.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local dtype = require("ds.dtype")
local options = require("ds.options")
local EW = require("ds.ops.elementwise") -- the elementwise ops' defs
local F = C.functions

local is_tensor = C.is_tensor
local integer_kernel = C.api(EW.floor_divide)

local function is_float(v)
  if is_tensor(v) then return dtype.is_float[v.dtype] end
  return type(v) == "number" and v ~= math.floor(v)
end

-- floor_divide(a, b): a float tensor or a fractional number on either side makes the result floating point
C.export("floor_divide", function(a, b, opts)
  options.check(opts, "floor_divide", {})
  if not (is_float(a) or is_float(b)) then return integer_kernel(a, b) end
  local dt = C.result_dtype({ a, b })
  if not dtype.is_float[dt] then dt = "f32" end
  a = is_tensor(a) and a:astype(dt) or F.full({}, a, { dtype = dt })
  b = is_tensor(b) and b:astype(dt) or F.full({}, b, { dtype = dt })
  local mod = F.fmod(a, b)
  local div = (a - mod) / b
  div = F.where(F.logical_and(mod:ne(0), F.logical_xor(b:lt(0), mod:lt(0))), div - 1, div)
  local fl = F.floor(div)
  fl = F.where((div - fl):gt(0.5), fl + 1, fl)
  local q = a / b
  fl = F.where(div:eq(0), q * 0, fl)
  return F.where(b:eq(0), q, fl)
end)
