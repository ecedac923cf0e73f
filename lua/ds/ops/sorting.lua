-- ops/sorting.lua: sort (stable, values and 1-based indices), argsort, topk, cumprod, and the eager-only
-- ops whose output shape depends on the values: nonzero, masked_select, unique, one-argument where.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local errors = require("ds.errors")
local options = require("ds.options")
local state = require("ds.state")
local ffi = require("ffi")
local EW = require("ds.ops.elementwise") -- the elementwise ops' defs
local first = #D.list + 1 -- this family's ops, returned at the end
local F = C.functions

local is_tensor = C.is_tensor

local function along_dim(name)
  return function(inputs, a)
    local x = inputs[1]
    if not is_tensor(x) then errors.raise(name .. ": expects a tensor, got " .. type(x)) end
    a.dim = S.dim(a.dim, #x._shape, name .. " of " .. S.str(x._shape))
  end
end

-- sort(x, dim = -1, descending = false) -> values (x's dtype), indices (i64, 1-based); always stable
D.define {
  name = "sort", kind = "sort", kernel = "ds_sort_%s", dtypes = C.NUMERIC, ninputs = 1, noutputs = 2,
  doc = "values and 1-based indices sorted along dim (stable; NaN above every number)",
  attrs = { { "dim", "dim", -1 }, { "descending", "bool", false }, { "stable", "bool", true } },
  args = { "dim", "descending" },
  prepare = along_dim("sort"),
  -- x: (...) -> values (...), indices (...) i64
  infer = function(inputs)
    local x = inputs[1]
    return { { shape = x._shape, dtype = x.dtype }, { shape = x._shape, dtype = "i64" } }
  end,
  backward = function(ctx, g)
    local x, idx = ctx.inputs[1], ctx.outputs[2]
    return F.scatter_add(F.zeros_like(x), ctx.attrs.dim, idx, g)
  end,
}
local sort = D.by_name.sort
-- sort's call for every dtype: bools sort as u8 (false before true)
local function sort_call(x, attrs)
  if is_tensor(x) and x.dtype == "bool" then
    local v, i = D.call(sort, { x:astype("u8") }, attrs)
    return v:astype("bool"), i
  end
  return D.call(sort, { x }, attrs)
end
local sort_api = C.api(sort)
C.export("sort", function(x, ...)
  if is_tensor(x) and x.dtype == "bool" then
    local v, i = sort_api(x:astype("u8"), ...)
    return v:astype("bool"), i
  end
  return sort_api(x, ...)
end)
-- argsort(x, dim = -1, descending = false) or argsort(x, {dim =, descending =, stable =})
C.export("argsort", function(x, dim, descending, opts)
  if type(dim) == "table" then
    opts, dim = dim, nil
  elseif type(descending) == "table" then
    opts, descending = descending, nil
  end
  opts = options.check(opts, "argsort", { dim = "integer", descending = "boolean", stable = "boolean" })
  local _, idx = sort_call(x, { dim = opts.dim or dim, descending = opts.descending or descending,
    stable = opts.stable })
  return idx
end)

-- topk(x, k, dim = -1, largest = true, sorted = true) or topk(x, k, {dim =, largest =, sorted =}) -> values,
-- indices (1-based): the first k of a stable sort. sorted = false leaves the order unspecified (PyTorch's
-- words): here it is sorted too
C.export("topk", function(x, k, dim, largest, sorted)
  local opts = type(dim) == "table" and not is_tensor(dim) and dim or nil
  if opts then
    opts = options.check(opts, "topk", { dim = "integer", largest = "boolean", sorted = "boolean" })
    dim, largest, sorted = opts.dim, opts.largest, opts.sorted
  end
  if sorted ~= nil and type(sorted) ~= "boolean" then errors.raise("topk: sorted must be a boolean, got " .. type(sorted)) end
  if largest == nil then largest = true end
  if not is_tensor(x) then errors.raise("topk: expects a tensor, got " .. type(x)) end
  local d = S.dim(dim or -1, #x._shape, "topk of " .. S.str(x._shape))
  local n = #x._shape == 0 and 1 or x._shape[d]
  if type(k) ~= "number" or k ~= math.floor(k) or k < 0 or (type(n) == "number" and k > n) then
    errors.raise(string.format("topk: k = %s must be an integer in 0..%s (dim %d of %s)", tostring(k), tostring(n), d,
      S.str(x._shape)))
  end
  local v, i = sort_call(x, { dim = d, descending = largest })
  if #x._shape == 0 then return v, i end
  return v:narrow(d, 1, k), i:narrow(d, 1, k)
end)

-- cumprod(x, dim): floats multiply in double; integers and bools give i64 (as PyTorch)
D.define {
  name = "cumprod", kind = "reduce", kernel = "ds_cumprod_%s", dtypes = C.ALL, ninputs = 1,
  doc = "cumulative product along dim",
  attrs = { { "dim", "dim" } }, args = { "dim" },
  prepare = function(inputs, a)
    if a.dim == nil then errors.raise("cumprod: dim is required") end
    along_dim("cumprod")(inputs, a)
  end,
  infer = function(inputs)
    local x = inputs[1]
    return { shape = x._shape, dtype = (x.dtype == "f32" or x.dtype == "f64") and x.dtype or "i64" }
  end,
  -- d y_j / d x_i = y_j / x_i for j >= i: a reverse cumsum of g * y, divided by x (undefined where x = 0)
  backward = function(ctx, g)
    local x, y, d = ctx.inputs[1], ctx.outputs[1], ctx.attrs.dim
    return F.cumsum(g * y, d, { reverse = true }) / x
  end,
}
C.export("cumprod", C.api(D.by_name.cumprod))

-- ---- eager-only: the output shape depends on the values (PyTorch's tracer refuses these too) ----
local function eager_only(name)
  if state.trace then
    errors.raise(name .. ": its output shape depends on the values, so it cannot be traced (as torch.jit.trace "
      .. "refuses it); compute it eagerly before tracing, or use a mask with ds.where")
  end
end

-- flat 0-based positions of the true elements of a bool tensor
local function true_positions(mask)
  local c = mask:contiguous()
  local p = ffi.cast("const uint8_t *", c:data_ptr())
  local pos = {}
  for i = 0, c:numel() - 1 do if p[i] ~= 0 then pos[#pos + 1] = i end end
  return pos
end

-- nonzero(x[, {as_tuple = true}]) -> (n, ndim) i64 of 1-based indices, or a list of ndim columns
local function nonzero(x, opts)
  eager_only("nonzero")
  if not is_tensor(x) then errors.raise("nonzero: expects a tensor, got " .. type(x)) end
  local shape, nd = x._shape, #x._shape
  local pos = true_positions(x:ne(0))
  local flat = {}
  for k, p in ipairs(pos) do
    for d = nd, 1, -1 do
      flat[(k - 1) * nd + d] = p % shape[d] + 1
      p = math.floor(p / shape[d])
    end
  end
  local out = F.tensor(flat, { dtype = "i64" }):reshape(#pos, nd)
  if options.check(opts, "nonzero", { as_tuple = "boolean" }).as_tuple then
    local cols = {}
    for d = 1, nd do cols[d] = out:select(2, d) end
    return cols
  end
  return out
end
C.export("nonzero", nonzero)

-- where(cond) with one argument: nonzero(cond, {as_tuple = true}); with three, the elementwise op
local where3 = C.api(EW.where)
C.export("where", function(c, a, b, opts)
  options.check(opts, "where", {})
  if a == nil and b == nil then return nonzero(c, { as_tuple = true }) end
  return where3(c, a, b)
end)

-- masked_select(x, mask) -> 1-D: the elements of x (broadcast with mask) where mask is true, in order
C.export("masked_select", function(x, mask)
  eager_only("masked_select")
  if not (is_tensor(x) and is_tensor(mask)) then errors.raise("masked_select: expects a tensor and a bool mask") end
  if mask.dtype ~= "bool" then errors.raise("masked_select: mask must be bool, got " .. mask.dtype) end
  local s = S.broadcast(x._shape, mask._shape, "masked_select")
  local pos = true_positions(mask:expand(s))
  for k = 1, #pos do pos[k] = pos[k] + 1 end
  return F.index_select(x:expand(s):reshape(-1), 1, F.tensor(pos, { dtype = "i64" }))
end)

-- the groups of equal consecutive keys of keys[order[1]], keys[order[2]], ... (numbers, or lists compared element
-- by element; NaN unequal to itself): starts (the first slot of each group), counts, group (per slot)
local function groups(keys, order)
  local function same(a, b)
    local ka, kb = keys[a], keys[b]
    if type(ka) ~= "table" then return ka == kb end
    for j = 1, #ka do if ka[j] ~= kb[j] then return false end end
    return true
  end
  local starts, counts, group = {}, {}, {}
  for k, i in ipairs(order) do
    if k == 1 or not same(i, order[k - 1]) then starts[#starts + 1] = k; counts[#counts + 1] = 0 end
    counts[#counts] = counts[#counts] + 1
    group[k] = #starts
  end
  return starts, counts, group
end

-- the positions of rows (lists of numbers) in lexicographic order, stable; NaN above every number
local function lexicographic(rows)
  local order = {}
  for i = 1, #rows do order[i] = i end
  local function lt(u, v)
    if u ~= u then return false end
    return v ~= v or u < v
  end
  table.sort(order, function(a, b)
    local ka, kb = rows[a], rows[b]
    for j = 1, #ka do if lt(ka[j], kb[j]) or lt(kb[j], ka[j]) then return lt(ka[j], kb[j]) end end
    return a < b
  end)
  return order
end

local function i64(list) return #list > 0 and F.tensor(list, { dtype = "i64" }) or F.zeros({ 0 }, { dtype = "i64" }) end

-- unique(x[, {sorted = true, return_inverse = false, return_counts = false, dim =}]) -> values (sorted, 1-D;
-- with dim: the distinct slices along dim in lexicographic order) [, inverse (x's shape, or (size of dim):
-- 1-based positions in values)] [, counts (i64)]
C.export("unique", function(x, opts)
  eager_only("unique")
  opts = options.check(opts, "unique", { sorted = "boolean", return_inverse = "boolean", return_counts = "boolean",
    dim = "integer" })
  if not is_tensor(x) then errors.raise("unique: expects a tensor, got " .. type(x)) end
  local rows, d, keys, order = x:reshape(-1), nil, nil, nil
  if opts.dim ~= nil then
    d = S.dim(opts.dim, #x._shape, "unique of " .. S.str(x._shape))
    rows = F.movedim(x, d, 1)
    rows = rows:reshape(rows._shape[1], -1)
    keys = rows:astype(x.dtype == "bool" and "u8" or x.dtype):astype("f64"):totable()
    order = lexicographic(keys)
  else
    local _, idx = sort_call(rows, { dim = 1 })
    keys, order = rows:astype(x.dtype == "bool" and "u8" or x.dtype):astype("f64"):totable(), idx:totable()
  end
  local starts, counts, group = groups(keys, order)
  local firsts, inverse = {}, {}
  for g, k in ipairs(starts) do firsts[g] = order[k] end
  for k, i in ipairs(order) do inverse[i] = group[k] end
  local out = { F.index_select(d and x or rows, d or 1, i64(firsts)) }
  if opts.return_inverse then out[#out + 1] = d and i64(inverse) or i64(inverse):reshape(x._shape) end
  if opts.return_counts then out[#out + 1] = i64(counts) end
  return unpack(out)
end, { args = { "tensor", "table?" } })

-- this family's op defs by name (callers require the family and read them)
return D.defined_since(first)
