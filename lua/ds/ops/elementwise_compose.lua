-- ops/elementwise_compose.lua: elementwise functions composed of table ops: isnan, isinf, isfinite
-- (bool results), clamp with tensor bounds, clamp_min, clamp_max (one-sided clamp), fmax, fmin.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local EW = require("ds.ops.elementwise") -- the elementwise ops' defs
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

-- clamp(x, min, max) with number bounds is the table op; a tensor bound (broadcast, promoted with x) clamps
-- with where, so the gradient goes to x inside the bounds and to the bound that was taken (as PyTorch)
local clamp_numbers = C.api(EW.clamp)
local function clamp(x, min, max)
  if type(min) == "table" and not C.is_tensor(min) then return clamp_numbers(x, min) end
  if not (C.is_tensor(min) or C.is_tensor(max)) then return clamp_numbers(x, min, max) end
  tensor_arg("clamp", x)
  for _, b in ipairs { min, max } do
    if b ~= nil and not C.is_tensor(b) and type(b) ~= "number" then
      errors.raise("clamp: a bound must be a number or a tensor, got " .. type(b))
    end
  end
  if min == nil and max == nil then errors.raise("clamp: at least one of min and max must be given") end
  local y = x
  if min ~= nil then y = F.where(F.lt(y, min), min, y) end
  if max ~= nil then y = F.where(F.gt(y, max), max, y) end
  return y
end
C.export("clamp", clamp)
C.export("clip", clamp)

local function bound(name, v)
  if type(v) ~= "number" and not C.is_tensor(v) then
    errors.raise(name .. ": the bound must be a number or a tensor, got " .. type(v))
  end
  return v
end
C.export("clamp_min", function(x, min) return clamp(x, bound("clamp_min", min), nil) end)
C.export("clamp_max", function(x, max) return clamp(x, nil, bound("clamp_max", max)) end)

-- fmax/fmin: the larger/smaller of a and b, a NaN on one side giving the other; ties take a (PyTorch's gradient)
local function nan_ignoring(name, keep_a)
  return function(a, b)
    tensor_arg(name, a)
    local take_a = keep_a(a, b)
    if C.is_tensor(b) then take_a = F.logical_or(take_a, F.isnan(b)) end
    return F.where(take_a, a, b)
  end
end
C.export("fmax", nan_ignoring("fmax", function(a, b) return F.ge(a, b) end))
C.export("fmin", nan_ignoring("fmin", function(a, b) return F.le(a, b) end))
