-- ops/elementwise_compose.lua: elementwise functions composed of table ops: isnan, isinf, isfinite
-- (bool results), clamp_min, clamp_max (one-sided clamp).
local C = require("ds.ops.common")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local F = C.functions

local function tensor_arg(name, x)
  if not C.is_tensor(x) then errors.raise(name .. ": expects a tensor, got " .. type(x)) end
  return x
end

-- NaN is the one value unequal to itself (integers never are)
C.export("isnan", function(x) return F.ne(tensor_arg("isnan", x), x) end)
-- integers are never infinite (x ~= x is all false for them)
C.export("isinf", function(x)
  if not dtype.is_float[tensor_arg("isinf", x).dtype] then return F.ne(x, x) end
  return F.eq(F.abs(x), math.huge)
end)
-- x - x is 0 for a finite x and NaN for +-inf and NaN
C.export("isfinite", function(x) return F.eq(tensor_arg("isfinite", x) - x, 0) end)

local function bound(name, v)
  if type(v) ~= "number" then errors.raise(name .. ": the bound must be a number, got " .. type(v)) end
  return v
end
C.export("clamp_min", function(x, min) return F.clamp(x, { min = bound("clamp_min", min) }) end)
C.export("clamp_max", function(x, max) return F.clamp(x, { max = bound("clamp_max", max) }) end)
