-- ops/statistics.lua: order statistics and NaN-aware reductions composed of table ops (sort, gather,
-- where, sum), so they differentiate, trace and compile: median, nanmedian, kthvalue, mode, quantile,
-- nanquantile, count_nonzero, nansum, nanmean, aminmax, logcumsumexp, diff, trapezoid/trapz,
-- cumulative_trapezoid. Indices are 1-based.
local C = require("ds.ops.common")
local S = require("ds.shape")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local options = require("ds.options")
local F = C.functions

local is_tensor = C.is_tensor

local function need_tensor(name, x)
  if not is_tensor(x) then errors.raise(name .. ": expects a tensor, got " .. type(x)) end
  return x
end

-- x with dim d moved last: (..., n); the permutation back is its inverse
local function to_last(x, d)
  local nd, perm = #x._shape, {}
  for i = 1, nd do if i ~= d then perm[#perm + 1] = i end end
  perm[nd] = d
  return x:permute(perm)
end
local function from_last(y, d)
  local nd, perm = #y._shape, {}
  for i = 1, nd do perm[i] = i < d and i or (i == d and nd or i - 1) end
  return y:permute(perm)
end

-- the size of the last dim: a number, or (symbolic while tracing) an i64 tensor (..., 1)
local function last_size(x)
  local n = x._shape[#x._shape]
  if type(n) == "number" then return n end
  return F.ones_like(x, { dtype = "i64" }):sum(-1, true)
end

-- (x, dim) -> x with the dim last (a 0-d x as (1)), and a function that puts a result (..., k) back:
-- dim reduced (k = 1 dropped) or kept as size k at dim
local function along(name, x, dim)
  need_tensor(name, x)
  if #x._shape == 0 then
    S.dim(dim, 0, name .. " of ()")
    return x:reshape(1), function(y) return y:reshape({}) end
  end
  local d = S.dim(dim, #x._shape, name .. " of " .. S.str(x._shape))
  return to_last(x, d), function(y, keepdim)
    if not keepdim then return y:squeeze(-1) end
    return from_last(y, d)
  end
end

-- values and 1-based indices of the sorted x (..., n) at 1-based positions pos (..., 1)
local function at_sorted(x, pos)
  local v, i = F.sort(x, -1)
  return F.gather(v, -1, pos), F.gather(i, -1, pos)
end

-- positions as an i64 tensor (..., 1): a Lua number broadcast over the rows, or a tensor
local function positions(x, p)
  if is_tensor(p) then return p end
  local shape = {}
  for i = 1, #x._shape - 1 do shape[i] = x._shape[i] end
  shape[#shape + 1] = 1
  return F.full(shape, p, { dtype = "i64" })
end

local function nan_count(x) return F.isnan(x):sum(-1, true) end

-- the lower median (position (m + 1) // 2 of the m counted values), skipping NaNs (nanmedian) or,
-- where a row has one, the first NaN (median: NaN propagates, as PyTorch)
local function median(name, skip_nan)
  return function(x, dim, keepdim)
    need_tensor(name, x)
    if dim == nil then
      if keepdim ~= nil then errors.raise(name .. ": keepdim needs a dim") end
      return (median(name, skip_nan)(x:reshape(-1), 1))
    end
    local xl, back = along(name, x, dim)
    local n, nans = last_size(xl), nan_count(xl)
    local pos
    if skip_nan then
      pos = F.clamp_min(F.floor_divide(nans * -1 + n + 1, 2), 1)
    else
      local lower = type(n) == "number" and math.floor((n + 1) / 2) or F.floor_divide(n + 1, 2)
      pos = F.where(nans:gt(0), nans * -1 + n + 1, lower)
    end
    local v, i = at_sorted(xl, positions(xl, pos))
    return back(v, keepdim), back(i, keepdim)
  end
end
C.export("median", median("median", false))
C.export("nanmedian", median("nanmedian", true))

-- kthvalue(x, k, dim = -1, keepdim = false): the k-th smallest (1-based k) and its index
C.export("kthvalue", function(x, k, dim, keepdim)
  local xl, back = along("kthvalue", x, dim or -1)
  local n = xl._shape[#xl._shape]
  if type(k) ~= "number" or k ~= math.floor(k) or k < 1 or (type(n) == "number" and k > n) then
    errors.raise(string.format("kthvalue: k = %s must be in 1..%s", tostring(k), tostring(n)))
  end
  local v, i = at_sorted(xl, positions(xl, k))
  return back(v, keepdim), back(i, keepdim)
end)

-- mode(x, dim = -1, keepdim = false): the most frequent value (the smallest of equally frequent ones) and
-- the index of its last occurrence (PyTorch's); counts by pairwise comparison, (..., n, n)
C.export("mode", function(x, dim, keepdim)
  local xl, back = along("mode", x, dim or -1)
  local v, idx = F.sort(xl, -1)
  local counts = v:unsqueeze(-1):eq(v:unsqueeze(-2)):sum(-1)
  local first = counts:eq(counts:amax(-1, true)):argmax(-1, true)
  local value = F.gather(v, -1, first)
  local index = F.where(v:eq(value), idx, 0):amax(-1, true)
  return back(F.gather(xl, -1, index), keepdim), back(index, keepdim)
end)

-- quantile(x, q, dim = nil, keepdim = false, {interpolation = "linear"}): q a number or a 1-D tensor in
-- [0, 1] (its quantiles first in the result); linear, lower, higher, midpoint or nearest between the sorted
-- values at q (m - 1), m the values counted (every one for quantile, where a NaN makes the row NaN; the
-- non-NaN ones for nanquantile)
local INTERPOLATION = { "linear", "lower", "higher", "midpoint", "nearest" }
local function quantile(name, skip_nan)
  return function(x, q, dim, keepdim, opts)
    need_tensor(name, x)
    if type(keepdim) == "table" then opts, keepdim = keepdim, nil end
    if type(dim) == "table" then opts, dim = dim, nil end
    local how = options.check(opts, name, { interpolation = INTERPOLATION }).interpolation or "linear"
    if not dtype.is_float[x.dtype] then errors.raise(name .. ": input must be f32 or f64, got " .. x.dtype) end
    local listed = is_tensor(q) and #q._shape == 1
    if is_tensor(q) then
      if #q._shape > 1 or q.dtype ~= x.dtype then
        errors.raise(string.format("%s: q must be a number or a 0-d/1-D %s tensor, got %s %s", name, x.dtype, q.dtype,
          S.str(q._shape)))
      end
    elseif type(q) ~= "number" or not (q >= 0 and q <= 1) then
      errors.raise(name .. ": q must be in [0, 1], got " .. tostring(q))
    end
    local src = dim == nil and x:reshape(-1) or x
    local xl = along(name, src, dim or 1)
    local sorted = F.sort(xl, -1)
    local n = last_size(xl)
    local nans = nan_count(xl)
    local m = (skip_nan and nans * -1 + n or n)
    if is_tensor(m) then m = m:astype(x.dtype) end
    local qs = is_tensor(q) and q:reshape(-1) or q
    local pos = (m - 1) * qs                          -- (..., Q)
    if type(pos) == "number" then pos = F.full({ 1 }, pos, { dtype = x.dtype }) end
    local lo, hi = F.floor(pos), F.ceil(pos)
    if how == "lower" then hi = lo elseif how == "higher" then lo = hi elseif how == "nearest" then
      lo = F.round(pos); hi = lo
    end
    local top = n - 1
    local function value_at(p)
      p = F.clamp(p, 0):astype("i64")
      p = F.minimum(p, top) + 1
      return F.gather(sorted, -1, p:expand(S.broadcast(p._shape, nans._shape, name)))
    end
    local vlo, vhi = value_at(lo), value_at(hi)
    local r
    if how == "linear" then -- PyTorch's lerp: from the nearer end
      local w, gap = pos - lo, vhi - vlo
      r = F.where(w:lt(0.5), vlo + gap * w, vhi - gap * (1 - w))
    elseif how == "midpoint" then r = (vlo + vhi) * 0.5
    else r = vlo end
    if not skip_nan then r = F.where(nans:gt(0), F.full({}, 0 / 0, { dtype = x.dtype }), r) end
    -- (..., Q) -> (Q, reduced shape), the reduced dim dropped or kept as 1 (every dim as 1 for dim = nil)
    local shape, d = { r._shape[#r._shape] }, dim and S.dim(dim, #x._shape, name)
    for i, size in ipairs(x._shape) do
      if i == d or (d == nil and keepdim) then
        if keepdim then shape[#shape + 1] = 1 end
      elseif d ~= nil then shape[#shape + 1] = size end
    end
    r = from_last(r, 1):reshape(shape)
    return listed and r or r:squeeze(1)
  end
end
C.export("quantile", quantile("quantile", false))
C.export("nanquantile", quantile("nanquantile", true))

-- count_nonzero(x, dim = nil): the number of non-zero elements over dim (a number or a list), i64
C.export("count_nonzero", function(x, dim)
  return need_tensor("count_nonzero", x):ne(0):sum(dim)
end)

-- nansum / nanmean: sum and mean treating NaN as absent; the arguments of sum / mean (dims, keepdim, options)
local function without_nan(x, name)
  need_tensor(name, x)
  if not dtype.is_float[x.dtype] then return x end
  return F.where(F.isnan(x), F.zeros({}, { dtype = x.dtype }), x)
end
C.export("nansum", function(x, ...) return F.sum(without_nan(x, "nansum"), ...) end)
C.export("nanmean", function(x, ...)
  if not dtype.is_float[need_tensor("nanmean", x).dtype] then
    errors.raise("nanmean: input has dtype " .. x.dtype .. "; nanmean needs floating point, use x:astype(\"f32\")")
  end
  return F.sum(without_nan(x, "nanmean"), ...) / F.sum(F.isnan(x):logical_not():astype(x.dtype), ...)
end)

-- aminmax(x, {dim =, keepdim = false}) -> amin, amax
C.export("aminmax", function(x, opts)
  need_tensor("aminmax", x)
  opts = options.check(opts, "aminmax", { dim = "integer", keepdim = "boolean" })
  local keepdim = opts.keepdim == true
  return F.amin(x, opts.dim, keepdim), F.amax(x, opts.dim, keepdim)
end)

-- logcumsumexp(x, dim): log(sum_{j <= i} exp(x_j)) along dim, as a logsumexp over the masked rows of
-- (..., n, n) (stable for any spread of values)
C.export("logcumsumexp", function(x, dim)
  if dim == nil then errors.raise("logcumsumexp: dim is required") end
  local xl = along("logcumsumexp", x, dim)
  if not dtype.is_float[xl.dtype] then errors.raise("logcumsumexp: input must be f32 or f64, got " .. xl.dtype) end
  local n = xl._shape[#xl._shape]
  local rows = xl:unsqueeze(-2):expand(S.broadcast(xl:unsqueeze(-2)._shape, { n, 1 }, "logcumsumexp"))
  local lower = F.tril(F.ones({ n, n }, { dtype = "bool" }))
  local y = F.where(lower, rows, F.full({}, -math.huge, { dtype = xl.dtype })):logsumexp(-1)
  if #x._shape == 0 then return y:reshape({}) end
  return from_last(y, S.dim(dim, #x._shape, "logcumsumexp"))
end)

-- diff(x, n = 1, dim = -1, prepend = nil, append = nil): the n-th forward difference along dim (bools: xor),
-- after prepend/append are joined to x along dim
C.export("diff", function(x, n, dim, prepend, append)
  need_tensor("diff", x)
  if type(n) == "table" and not is_tensor(n) then
    local o = options.check(n, "diff", { n = "integer", dim = "integer", prepend = "tensor", append = "tensor" })
    n, dim, prepend, append = o.n, o.dim, o.prepend, o.append
  end
  n = n or 1
  if type(n) ~= "number" or n ~= math.floor(n) or n < 0 then errors.raise("diff: n must be a non-negative integer") end
  if #x._shape == 0 then errors.raise("diff: expects at least one dim, got a 0-d tensor") end
  local d = S.dim(dim or -1, #x._shape, "diff of " .. S.str(x._shape))
  local parts = { prepend, x, append }
  local list = {}
  for i = 1, 3 do if parts[i] ~= nil then list[#list + 1] = parts[i] end end
  if #list > 1 then x = F.cat(list, d) end
  for _ = 1, n do
    local len = x._shape[d]
    if len == 0 then break end
    local a, b = x:narrow(d, 2, len - 1), x:narrow(d, 1, len - 1)
    x = x.dtype == "bool" and F.logical_xor(a, b) or a - b
  end
  return x
end)

-- trapezoid(y, x | {x =, dx = 1, dim = -1}) (trapz) and cumulative_trapezoid: the trapezoid rule along dim with
-- sample points x (a tensor broadcasting with y, or 1-D along dim) or spacing dx
local function trapezoid_parts(name, y, x, opts)
  need_tensor(name, y)
  if type(x) == "table" and not is_tensor(x) then opts, x = x, nil end
  local o = options.check(opts, name, { x = "tensor", dx = "number", dim = "integer" })
  x = x or o.x
  if x ~= nil and o.dx ~= nil then errors.raise(name .. ": give x or dx, not both") end
  if #y._shape == 0 then errors.raise(name .. ": y must have at least 1 dim, got a 0-d tensor") end
  local d = S.dim(o.dim or -1, #y._shape, name .. " of " .. S.str(y._shape))
  local n = y._shape[d]
  if n == 0 then return nil, d end
  local avg = (y:narrow(d, 2, n - 1) + y:narrow(d, 1, n - 1)) / 2
  if x == nil then return avg * (o.dx or 1), d end
  need_tensor(name, x)
  local dx
  if #x._shape == 1 then
    if x._shape[1] ~= n then
      errors.raise(string.format("%s: x has %s points, y's dim %d has %s", name, tostring(x._shape[1]), d, tostring(n)))
    end
    local shape = {}
    for i = 1, #y._shape do shape[i] = i == d and n - 1 or 1 end
    dx = (x:narrow(1, 2, n - 1) - x:narrow(1, 1, n - 1)):reshape(shape)
  else
    local xd = S.dim(o.dim or -1, #x._shape, name .. " of x " .. S.str(x._shape))
    dx = x:narrow(xd, 2, n - 1) - x:narrow(xd, 1, n - 1)
  end
  return avg * dx, d
end
local function trapezoid(name)
  -- trapezoid(y, x | {x =, dx = 1, dim = -1}): the integral of y along dim by the trapezoid rule
  return function(y, x, opts)
    local parts, d = trapezoid_parts(name, y, x, opts)
    if parts == nil then return F.zeros(S.reduced(y._shape, { d }, false), { dtype = dtype.is_float[y.dtype] and y.dtype or "f32" }) end
    return parts:sum(d)
  end
end
C.export("trapezoid", trapezoid("trapezoid"))
C.export("trapz", trapezoid("trapz"))
-- cumulative_trapezoid(y, x | {x =, dx = 1, dim = -1}): the running integral (one point fewer along dim)
C.export("cumulative_trapezoid", function(y, x, opts)
  local parts, d = trapezoid_parts("cumulative_trapezoid", y, x, opts)
  if parts == nil then return y:astype(dtype.is_float[y.dtype] and y.dtype or "f32") end
  return parts:cumsum(d)
end)
