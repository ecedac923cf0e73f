-- onnx/handlers/reduce.lua: ONNX import handlers of reductions (Reduce*, ArgMax/ArgMin, Det), scans (CumSum) and
-- selection (TopK); outputs keep ONNX's element types (integers stay integers, indices are 0-based int64).
local F = require("ds.ops")
local dtype = require("ds.dtype")
local S = require("ds.shape")
local V = require("ds.onnx.import_values")
local common = require("ds.onnx.handlers.common")

local OPS, def = common.family()
local T = V.tensor
local rank, axis0, refuse = common.rank, common.axis0, common.refuse

-- ---- Reduce*: axes as an attribute (ReduceSum before opset 13, the others before 18) or as an input ----
-- the sorted 1-based dims to reduce, or nil with noop = true when the axes are empty and noop_with_empty_axes
local function reduce_dims(ins, at, op, r)
  local axes = at.axes
  if ins[2] ~= nil then axes = V.ints(ins[2], op .. "'s axes") end
  if axes == nil or #axes == 0 then
    if at.noop_with_empty_axes == 1 then return nil, true end
    axes = {}
    for i = 0, r - 1 do axes[#axes + 1] = i end
  end
  local dims, seen = {}, {}
  for _, a in ipairs(axes) do
    local d = axis0(a, r, op) + 1
    if seen[d] then refuse(op .. ": axis " .. a .. " is repeated") end
    seen[d] = true
    dims[#dims + 1] = d
  end
  table.sort(dims)
  return dims
end

local reduced_shape = S.reduced

-- each reduction: its value over dims of a float tensor (integers reduce in f64 where the op is not exact
-- in integers), and its identity: the value over an empty set
local REDUCE = {
  ReduceSum = { exact = true, identity = 0, f = function(x, dims, keep) return x:sum(dims, keep) end },
  ReduceMean = { identity = 0 / 0, f = function(x, dims, keep) return x:mean(dims, keep) end },
  ReduceProd = { exact = true, identity = 1, f = function(x, dims, keep) return x:prod(dims, keep) end },
  ReduceMax = { exact = true, identity = -math.huge, f = function(x, dims, keep) return x:amax(dims, keep) end },
  ReduceMin = { exact = true, identity = math.huge, f = function(x, dims, keep) return x:amin(dims, keep) end },
  ReduceL1 = { exact = true, identity = 0, f = function(x, dims, keep) return x:abs():sum(dims, keep) end },
  ReduceL2 = { identity = 0, f = function(x, dims, keep) return (x * x):sum(dims, keep):sqrt() end },
  ReduceSumSquare = { exact = true, identity = 0, f = function(x, dims, keep) return (x * x):sum(dims, keep) end },
  ReduceLogSum = { identity = -math.huge, f = function(x, dims, keep) return x:sum(dims, keep):log() end },
  ReduceLogSumExp = { identity = -math.huge, f = function(x, dims, keep) return x:logsumexp(dims, keep) end },
}

-- the identity of an integer dtype for +-inf (the dtype's extremes), else the value itself
local function identity_in(dt, v)
  if dtype.is_float[dt] or v == 0 or v == 1 then return v end
  local bits = dtype.size[dt] * 8
  if dt == "u8" then return v > 0 and 255 or 0 end
  return v > 0 and 2 ^ (bits - 1) - 1 or -2 ^ (bits - 1)
end

for op, r in pairs(REDUCE) do
  def(op, { axes = false, keepdims = 1, noop_with_empty_axes = 0 }, function(ins, at)
    local x = T(ins[1])
    local dims, noop = reduce_dims(ins, at, op, rank(x))
    if noop then return x end
    local keep = at.keepdims ~= 0
    for _, d in ipairs(dims) do
      if x.shape[d] == 0 then
        if r.identity ~= r.identity and not dtype.is_float[x.dtype] then refuse(op .. ": an empty integer mean") end
        return F.full(reduced_shape(x.shape, dims, keep), identity_in(x.dtype, r.identity), { dtype = x.dtype })
      end
    end
    if dtype.is_float[x.dtype] then return r.f(x, dims, keep) end
    local y = r.exact and r.f(x, dims, keep) or r.f(x:astype("f64"), dims, keep)
    return y.dtype == x.dtype and y or y:astype(x.dtype)
  end)
end

-- ---- ArgMax / ArgMin: 0-based int64 indices along axis; ties give the first index, or the last ----
for op, method in pairs({ ArgMax = "argmax", ArgMin = "argmin" }) do
  def(op, { axis = 0, keepdims = 1, select_last_index = 0 }, function(ins, at)
    local x = T(ins[1])
    local d = axis0(at.axis, rank(x), op) + 1
    local keep = at.keepdims ~= 0
    if at.select_last_index ~= 0 then -- the first index in the reversed order, counted from the end
      local flipped = x:flip({ d })
      return x.shape[d] - flipped[method](flipped, d, keep)
    end
    return x[method](x, d, keep) - 1
  end)
end

-- ---- CumSum: along axis (an input), exclusive (each sum without its own element), reverse (from the end) ----
def("CumSum", { exclusive = 0, reverse = 0 }, function(ins, at)
  local x = T(ins[1])
  local d = axis0(V.ints(ins[2], "CumSum's axis")[1], rank(x), "CumSum") + 1
  local reverse = at.reverse ~= 0
  if at.exclusive ~= 0 then -- the input shifted by one step (a zero first) along d, then summed
    local n = x.shape[d]
    if n == 0 then return x end
    local zero = F.zeros_like(x:narrow(d, 1, 1))
    x = reverse and F.cat({ x:narrow(d, 2, n - 1), zero }, d) or F.cat({ zero, x:narrow(d, 1, n - 1) }, d)
  end
  local y = F.cumsum(x, d, { reverse = reverse })
  return y.dtype == x.dtype and y or y:astype(x.dtype)
end)

-- ---- TopK: the k largest (or smallest) along axis, values and 0-based int64 indices; equal values in index
-- order. k is an attribute before opset 10, an input after ----
def("TopK", { axis = -1, largest = 1, sorted = 1, k = false }, function(ins, at)
  local x = T(ins[1])
  local k = at.k
  if ins[2] then k = V.ints(ins[2], "TopK's k")[1] end
  if k == nil then refuse("TopK: k is missing (an attribute before opset 10, an input after)") end
  local d = axis0(at.axis, rank(x), "TopK") + 1
  -- sorted = 0 leaves the order to the implementation: the sorted order is one
  local values, indices = F.topk(x, k, d, at.largest ~= 0)
  return values, indices - 1
end)

-- ---- Det: x (..., n, n) -> (...), by Gaussian elimination with partial pivoting (an LU factorization) in ds
-- ops, n steps of (..., n, n) work each ----
def("Det", {}, function(ins)
  local a = T(ins[1])
  local r = rank(a)
  local n = a.shape[r]
  if r < 2 or type(n) ~= "number" or a.shape[r - 1] ~= n then
    refuse("Det: the input must be (..., n, n) with a static n")
  end
  if not dtype.is_float[a.dtype] then refuse("Det: the input must be floating point, got " .. a.dtype) end
  local row_shape = {}
  for i = 1, r - 2 do row_shape[i] = 1 end
  row_shape[r - 1] = n
  local rows = F.arange(1, n + 1, { dtype = "i64" }):reshape(row_shape) -- (1..., n): each row's number
  local det = F.ones_like(a:select(-1, 1):select(-1, 1)) -- (...)
  for k = 1, n do
    -- the row at or below k with the largest |a[., k]| becomes row k (rows k and p swap; the sign flips)
    local p = a:select(-1, k):narrow(-1, k, n - k + 1):abs():argmax(-1, true) + (k - 1) -- (..., 1)
    local order = F.where(rows:eq(k), p, F.where(rows:eq(p), k, rows)) -- (..., n)
    local shape = a.shape
    a = F.gather(a, -2, order:unsqueeze(-1):expand(shape))
    local pivot = a:select(-2, k):select(-1, k) -- (...)
    det = det * F.where(p:squeeze(-1):eq(k), pivot, -pivot)
    -- rows below k less their multiple of row k (a zero pivot: det is 0 already, divide by 1 instead)
    local safe = F.where(pivot:eq(0), F.ones_like(pivot), pivot)
    local factor = a:select(-1, k) / safe:unsqueeze(-1) * rows:gt(k):astype(a.dtype) -- (..., n)
    a = a - factor:unsqueeze(-1) * a:select(-2, k):unsqueeze(-2)
  end
  return det
end)

return OPS
