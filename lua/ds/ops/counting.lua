-- ops/counting.lua: running extremes, counts and membership composed of table ops: cummax, cummin (values
-- gathered at their 1-based indices, so gradients go where PyTorch sends them), bincount, histc, isin, take,
-- msort, unique_consecutive (eager: its size depends on the values).
local C = require("ds.ops.common")
local S = require("ds.shape")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local options = require("ds.options")
local state = require("ds.state")
local F = C.functions

local is_tensor = C.is_tensor

local function need_tensor(name, x, what)
  if not is_tensor(x) then errors.raise(string.format("%s: %s must be a tensor, got %s", name, what or "input", type(x))) end
  return x
end

-- cummax/cummin(x, dim) -> values, indices (1-based): the running extreme along dim and the index of its last
-- occurrence so far (a NaN, once seen, is the extreme, PyTorch's rule); compared over (..., n, n) masked rows
local function running(name, pick)
  return function(x, dim)
    need_tensor(name, x)
    if dim == nil then errors.raise(name .. ": dim is required") end
    if #x._shape == 0 then
      S.dim(dim, 0, name .. " of ()")
      return x:clone(), F.ones({}, { dtype = "i64" })
    end
    local d = S.dim(dim, #x._shape, name .. " of " .. S.str(x._shape))
    local n = x._shape[d]
    if type(n) ~= "number" then errors.raise(name .. ": dim " .. d .. " must have a concrete size") end
    if n == 0 then return x:clone(), F.zeros(x._shape, { dtype = "i64" }) end
    local xl = x:detach():transpose(d, -1)                         -- (..., n)
    local pos = F.arange(1, n + 1, { dtype = "i64" })
    local before = pos:reshape(n, 1):ge(pos)                       -- (n, n): j <= i
    local rows = xl:unsqueeze(-2)                                  -- (..., 1, n): x_j
    local nan = F.isnan(rows)
    local value = pick(rows, before)                               -- (..., n, 1): the extreme of x_1..x_i
    local seen_nan = F.logical_and(nan, before):any(-1, true)
    local hit = F.logical_and(before, F.where(seen_nan, nan, rows:eq(value)))
    local idx = F.where(hit, pos, 0):amax(-1)                      -- (..., n): the last hit
    idx = idx:transpose(d, -1):contiguous()
    return F.gather(x, d, idx), idx
  end
end
C.export("cummax", running("cummax", function(rows, before)
  local low = dtype.is_float[rows.dtype] and -math.huge or rows:amin()
  return F.where(before, rows, low):amax(-1, true)
end))
C.export("cummin", running("cummin", function(rows, before)
  local high = dtype.is_float[rows.dtype] and math.huge or rows:amax()
  return F.where(before, rows, high):amin(-1, true)
end))

-- bincount(x, {weights =, minlength = 0}): for 1-D non-negative integers, the count (or weight sum) of each value
-- 0, 1, ..., max(x) at positions 1, 2, ... (length max(max(x) + 1, minlength)); eager: the length reads x
C.export("bincount", function(x, opts)
  need_tensor("bincount", x)
  local o = options.check(opts, "bincount", { weights = "tensor", minlength = { "integer", min = 0 } })
  if #x._shape ~= 1 or not dtype.is_int[x.dtype] then
    errors.raise("bincount: input must be a 1-D tensor of integers, got " .. x.dtype .. " " .. S.str(x._shape))
  end
  if state.trace then
    errors.raise("bincount: its length depends on the values, so it cannot be traced; compute it eagerly, or use "
      .. "ds.index_add into zeros of a fixed length")
  end
  local n = x._shape[1]
  local top = n > 0 and x:amax():item() or -1
  if n > 0 and x:amin():item() < 0 then errors.raise("bincount: input must be non-negative") end
  local w = o.weights
  if w and not S.equal(w._shape, x._shape) then
    errors.raise(string.format("bincount: weights %s must have input's shape %s", S.str(w._shape), S.str(x._shape)))
  end
  local len = math.max(top + 1, o.minlength or 0)
  local out = F.zeros({ len }, { dtype = w and w.dtype or "i64" })
  if n == 0 then return out end
  return F.index_add(out, 1, x:astype("i64") + 1, w or F.ones({ n }, { dtype = "i64" }))
end)

-- histc(x, bins = 100, min = 0, max = 0): counts of x in bins equal-width bins over [min, max] (min = max: the
-- data's min and max); values outside are not counted, max goes to the last bin; x's float dtype
C.export("histc", function(x, bins, lo, hi)
  need_tensor("histc", x)
  if type(bins) == "table" then
    local o = options.check(bins, "histc", { bins = "integer", min = "number", max = "number" })
    bins, lo, hi = o.bins, o.min, o.max
  end
  if not dtype.is_float[x.dtype] then errors.raise("histc: input must be f32 or f64, got " .. x.dtype) end
  bins, lo, hi = bins or 100, lo or 0, hi or 0
  if type(bins) ~= "number" or bins < 1 or bins ~= math.floor(bins) or bins > 2 ^ 24 then
    errors.raise("histc: bins must be a positive integer, got " .. tostring(bins))
  end
  if type(lo) ~= "number" or type(hi) ~= "number" or lo > hi then
    errors.raise(string.format("histc: min %s must not exceed max %s", tostring(lo), tostring(hi)))
  end
  local flat = x:detach():reshape(-1)
  local low, high = F.full({}, lo, { dtype = x.dtype }), F.full({}, hi, { dtype = x.dtype })
  if lo == hi then
    if S.numel(flat._shape) == 0 then return F.zeros({ bins }, { dtype = x.dtype }) end
    low, high = flat:amin(), flat:amax()
    local same = low:eq(high)
    low, high = F.where(same, low - 1, low), F.where(same, high + 1, high)
  end
  local inside = F.logical_and(flat:ge(low), flat:le(high))
  local bin = F.floor((flat - low) * bins / (high - low)):clamp(0, bins - 1)
  bin = F.where(inside, bin, 0):astype("i64") + 1
  return F.index_add(F.zeros({ bins }, { dtype = x.dtype }), 1, bin, inside:astype(x.dtype))
end)

-- isin(elements, test_elements, {invert = false, assume_unique = false}): true where an element is among
-- test_elements (numbers or tensors on either side)
C.export("isin", function(elements, test, opts)
  local o = options.check(opts, "isin", { invert = "boolean", assume_unique = "boolean" })
  for _, v in pairs { elements = elements or false, test_elements = test or false } do
    if not is_tensor(v) and type(v) ~= "number" then
      errors.raise("isin: elements and test_elements must be tensors or numbers, got " .. type(v))
    end
  end
  if not (is_tensor(elements) or is_tensor(test)) then errors.raise("isin: expects a tensor on one side") end
  local e = is_tensor(elements) and elements or F.full({}, elements, { dtype = test.dtype })
  local t = is_tensor(test) and test:reshape(-1) or F.full({ 1 }, test, { dtype = e.dtype })
  local r = e:unsqueeze(-1):eq(t):any(-1)
  return o.invert and r:logical_not() or r
end)

-- take(x, index): the elements of the flattened x at 1-based (negative: from the end) indices, in index's shape
C.export("take", function(x, index)
  need_tensor("take", x); need_tensor("take", index, "index")
  if not dtype.is_int[index.dtype] then errors.raise("take: index must be an integer tensor, got " .. index.dtype) end
  local flat, n = x:reshape(-1), S.numel(x._shape)
  local i = index:reshape(-1):astype("i64")
  if not state.trace and S.numel(i._shape) > 0 then
    local lo, hi = i:amin():item(), i:amax():item()
    if lo < -n or hi > n or i:eq(0):any():item() then
      errors.raise(string.format("take: indices must be in 1..%d or -%d..-1 (1-based), got %d..%d", n, n, lo, hi))
    end
  end
  i = F.where(i:lt(0), i + n + 1, i)
  return F.gather(flat, 1, i):reshape(index._shape)
end)

-- msort(x): x sorted along dim 1 (values only)
C.export("msort", function(x) return (F.sort(need_tensor("msort", x), 1)) end)

-- unique_consecutive(x, {return_inverse = false, return_counts = false, dim =}): each run of equal consecutive
-- elements (or slices along dim) kept once [, inverse (1-based run of each)] [, counts]; eager only
C.export("unique_consecutive", function(x, opts)
  need_tensor("unique_consecutive", x)
  local o = options.check(opts, "unique_consecutive", { return_inverse = "boolean", return_counts = "boolean",
    dim = "integer" })
  if state.trace then
    errors.raise("unique_consecutive: its output shape depends on the values, so it cannot be traced")
  end
  local rows, d = x:reshape(-1), nil
  if o.dim ~= nil then
    if #x._shape == 0 then errors.raise("unique_consecutive: dim needs a tensor with dims, got a 0-d tensor") end
    d = S.dim(o.dim, #x._shape, "unique_consecutive of " .. S.str(x._shape))
    rows = F.movedim(x, d, 1)
    local width = 1
    for i = 2, #rows._shape do width = width * rows._shape[i] end
    rows = rows:reshape(rows._shape[1], width)
  end
  local keys = rows:astype(x.dtype == "bool" and "u8" or x.dtype):astype("f64"):totable()
  local firsts, counts, inverse = {}, {}, {}
  local function same(a, b)
    if type(a) ~= "table" then return a == b end
    for j = 1, #a do if a[j] ~= b[j] then return false end end
    return true
  end
  for i, k in ipairs(keys) do
    if i == 1 or not same(k, keys[i - 1]) then firsts[#firsts + 1] = i; counts[#counts + 1] = 0 end
    counts[#counts] = counts[#counts] + 1
    inverse[i] = #firsts
  end
  local function i64(list) return #list > 0 and F.tensor(list, { dtype = "i64" }) or F.zeros({ 0 }, { dtype = "i64" }) end
  local out = { F.index_select(d and x or rows, d or 1, i64(firsts)) }
  if o.return_inverse then out[#out + 1] = d and i64(inverse) or i64(inverse):reshape(x._shape) end
  if o.return_counts then out[#out + 1] = i64(counts) end
  return unpack(out)
end)
