-- ops/shaping.lua: compositions that cut, repeat and rearrange tensors (chunk, split, unbind, flip, roll,
-- tril/triu, diag, repeat/tile, broadcast_to, scatter) and new_ones/new_full; all built from table ops
-- (narrow, select, index_select, index_add, cat, expand, where, scatter_add), so they trace and compile.
local C = require("ds.ops.common")
local D = require("ds.dispatch")
local S = require("ds.shape")
local errors = require("ds.errors")
local options = require("ds.options")
local sizes_and_opts = require("ds.ops.sizes").sizes_and_opts
local F = C.functions

local is_tensor = C.is_tensor

local function check_tensor(name, x)
  if not is_tensor(x) then errors.raise(name .. ": expects a tensor, got " .. type(x)) end
end
local function dim_of(name, x, d)
  return S.dim(d or 1, #x._shape, name .. " of " .. S.str(x._shape))
end
local function size_of(name, x, d)
  local n = x._shape[d]
  if type(n) ~= "number" then
    errors.raise(name .. ": dim " .. d .. " must have a fixed size (it is " .. tostring(n) .. ")")
  end
  return n
end
local function index_list(t) return F.tensor(t, { dtype = "i64" }) end

-- split(x, size | {sizes}, dim = 1) -> list of narrow views
C.export("split", function(x, sizes, dim)
  check_tensor("split", x)
  local d = dim_of("split", x, dim)
  local n = size_of("split", x, d)
  local list = {}
  if type(sizes) == "number" then
    if sizes < 1 or sizes ~= math.floor(sizes) then
      errors.raise("split: size must be a positive integer, got " .. sizes)
    end
    for start = 1, math.max(n, 1), sizes do list[#list + 1] = math.min(sizes, n - start + 1) end
  elseif type(sizes) == "table" and not is_tensor(sizes) then
    local total = 0
    for i, s in ipairs(sizes) do
      if type(s) ~= "number" or s < 0 or s ~= math.floor(s) then
        errors.raise("split: sizes must be integers >= 0, got " .. tostring(s))
      end
      list[i] = s; total = total + s
    end
    if total ~= n then
      errors.raise(string.format("split: sizes sum to %d, but dim %d of %s has %d", total, d, S.str(x._shape), n))
    end
  else
    errors.raise("split: expects a size or a list of sizes, got " .. type(sizes))
  end
  local out, start = {}, 1
  for i, s in ipairs(list) do out[i] = x:narrow(d, start, s); start = start + s end
  return out
end)

-- chunk(x, chunks, dim = 1): pieces of ceil(size / chunks) (the last smaller; maybe fewer pieces), as torch
C.export("chunk", function(x, chunks, dim)
  check_tensor("chunk", x)
  if type(chunks) ~= "number" or chunks < 1 or chunks ~= math.floor(chunks) then
    errors.raise("chunk: chunks must be a positive integer, got " .. tostring(chunks))
  end
  local d = dim_of("chunk", x, dim)
  local n = size_of("chunk", x, d)
  return F.split(x, math.max(math.ceil(n / chunks), 1), d)
end)

-- unbind(x, dim = 1) -> list of selects
C.export("unbind", function(x, dim)
  check_tensor("unbind", x)
  local d = dim_of("unbind", x, dim)
  local out = {}
  for i = 1, size_of("unbind", x, d) do out[i] = x:select(d, i) end
  return out
end)

-- the dims argument of flip/roll: a number or a list
local function dims_list(name, x, dims)
  if type(dims) == "number" then dims = { dims } end
  if type(dims) ~= "table" or is_tensor(dims) then errors.raise(name .. ": dims must be a number or a list") end
  local out = {}
  for i, d in ipairs(dims) do out[i] = dim_of(name, x, d) end
  return out
end

-- flip(x, dims): reversed along each dim (an index_select with n..1)
C.export("flip", function(x, dims)
  check_tensor("flip", x)
  for _, d in ipairs(dims_list("flip", x, dims)) do
    local n, rev = size_of("flip", x, d), {}
    for i = 1, n do rev[i] = n - i + 1 end
    x = F.index_select(x, d, index_list(rev))
  end
  return x
end)

-- roll(x, shifts, dims): elements shifted along dims (wrapping); without dims, over the flattened tensor
C.export("roll", function(x, shifts, dims)
  check_tensor("roll", x)
  if dims == nil then
    if type(shifts) ~= "number" then errors.raise("roll: without dims, shifts must be one number") end
    return F.roll(x:reshape(-1), shifts, 1):reshape(x._shape)
  end
  local ds_ = dims_list("roll", x, dims)
  if type(shifts) == "number" then shifts = { shifts } end
  if #shifts ~= #ds_ then errors.raise(string.format("roll: %d shifts for %d dims", #shifts, #ds_)) end
  for i = 1, #shifts do
    if type(shifts[i]) ~= "number" or shifts[i] ~= math.floor(shifts[i]) then
      errors.raise("roll: shifts must be integers")
    end
  end
  for i, d in ipairs(ds_) do
    local n = size_of("roll", x, d)
    local s = n > 0 and shifts[i] % n or 0
    if s ~= 0 then x = F.cat({ x:narrow(d, n - s + 1, s), x:narrow(d, 1, n - s) }, d) end
  end
  return x
end, { args = { "tensor", "integer|table", "integer|table?" } })

-- 1, 2, ..., n (i64) along dim d of shape: arange for a fixed n, a running sum of ones for a dynamic one
local function positions(n, shape, d)
  if type(n) == "number" then return F.arange(1, n + 1, { dtype = "i64" }):reshape(shape) end
  return F.full(shape, 1, { dtype = "i64" }):cumsum(d)
end

-- tril/triu(x, diagonal = 0) on the last two dims: where(col - row <= k (tril) / >= k (triu), x, 0)
local function triangle(name, keep)
  return function(x, k)
    check_tensor(name, x)
    k = k or 0
    local nd = #x._shape
    if nd < 2 then errors.raise(name .. ": expects at least 2 dims, got " .. S.str(x._shape)) end
    local r, c = x._shape[nd - 1], x._shape[nd]
    local offset = positions(c, { 1, c }, 2) - positions(r, { r, 1 }, 1)
    return F.where(keep(offset, k), x, F.zeros({}, { dtype = x.dtype }))
  end
end
C.export("tril", triangle("tril", function(off, k) return off:le(k) end))
C.export("triu", triangle("triu", function(off, k) return off:ge(k) end))

-- diag(x, k = 0): a 1-D x gives the square matrix with x on diagonal k; a 2-D x gives its diagonal k
C.export("diag", function(x, k)
  check_tensor("diag", x)
  k = k or 0
  if type(k) ~= "number" or k ~= math.floor(k) or math.abs(k) == math.huge then
    errors.raise("diag: the diagonal k must be an integer, got " .. tostring(k))
  end
  local nd = #x._shape
  local r0, c0 = math.max(-k, 0), math.max(k, 0) -- 0-based row and column where diagonal k starts
  if nd == 1 then
    local n = size_of("diag", x, 1)
    local m = n + math.abs(k)
    local pos = {}
    for i = 0, n - 1 do pos[i + 1] = (i + r0) * m + i + c0 + 1 end
    return F.index_add(F.zeros({ m * m }, { dtype = x.dtype }), 1, index_list(pos), x):reshape(m, m)
  elseif nd == 2 then
    local r, c = size_of("diag", x, 1), size_of("diag", x, 2)
    local pos = {}
    for i = 0, math.min(r - r0, c - c0) - 1 do pos[i + 1] = (i + r0) * c + i + c0 + 1 end
    return F.index_select(x:reshape(-1), 1, index_list(pos))
  end
  errors.raise("diag: expects a 1-D or 2-D tensor, got " .. S.str(x._shape))
end)

-- the sizes of repeat/tile/broadcast_to: numbers or one list
local function sizes_arg(name, ...)
  local first = ...
  local listed = type(first) == "table" and not is_tensor(first)
  local sizes = listed and first or { ... }
  for i = 1, listed and table.maxn(sizes) or select("#", ...) do -- a nil among the sizes is an error too
    local s = sizes[i]
    if type(s) ~= "number" or s < 0 or s ~= math.floor(s) then
      errors.raise(name .. ": sizes must be non-negative integers")
    end
  end
  return sizes
end

-- repeat(x, sizes...): x tiled sizes[i] times along dim i (x gets leading 1-dims when sizes is longer)
local function repeat_(x, ...)
  check_tensor("repeat", x)
  local reps = sizes_arg("repeat", ...)
  local nd, nr = #x._shape, #reps
  if nr < nd then errors.raise(string.format("repeat: %d sizes for a %d-d tensor (need at least %d)", nr, nd, nd)) end
  local inter, expanded, final = {}, {}, {}
  for i = 1, nr do
    local s = x._shape[i - (nr - nd)] or 1
    inter[#inter + 1] = 1; inter[#inter + 1] = s
    expanded[#expanded + 1] = reps[i]; expanded[#expanded + 1] = s
    final[i] = S.mul(reps[i], s)
  end
  return x:reshape(inter):expand(expanded):reshape(final)
end
-- `repeat` is a Lua keyword: x:repeat_tensor(2, 1) (Torch7's repeatTensor), or x["repeat"](x, 2, 1)
C.export("repeat", repeat_)
C.export("repeat_tensor", repeat_)
-- tile(x, reps): as repeat, but fewer reps than dims are padded with leading 1s
C.export("tile", function(x, ...)
  check_tensor("tile", x)
  local reps = sizes_arg("tile", ...)
  local padded = {}
  for _ = 1, #x._shape - #reps do padded[#padded + 1] = 1 end
  for _, r in ipairs(reps) do padded[#padded + 1] = r end
  return repeat_(x, padded)
end)
C.export("broadcast_to", function(x, ...)
  check_tensor("broadcast_to", x)
  return x:expand(sizes_arg("broadcast_to", ...))
end)

-- scatter(x, dim, index, src | value[, {reduce = "add"}]): x with src's elements written at index along dim
-- (as torch.scatter; duplicate indices sum, where PyTorch leaves the winner unspecified)
local function scatter(x, dim, index, src, opts)
  check_tensor("scatter", x)
  if not is_tensor(index) then
    errors.raise("scatter: index must be a tensor of 1-based i64 indices, got " .. type(index))
  end
  local reduce = options.check(opts, "scatter", { reduce = "string" }).reduce
  if reduce ~= nil and reduce ~= "add" then
    errors.raise("scatter: reduce = '" .. tostring(reduce) .. "' is not implemented (only 'add')")
  end
  if not is_tensor(src) then src = F.full(index._shape, src, { dtype = x.dtype }) end
  local d = dim_of("scatter", x, dim)
  if reduce == "add" then return F.scatter_add(x, d, index, src) end
  local zeros = F.zeros_like(x)
  local hit = F.scatter_add(F.zeros_like(x, { dtype = "i64" }), d, index, F.ones_like(index)):gt(0)
  return F.where(hit, F.scatter_add(zeros, d, index, src:astype(x.dtype)), x)
end
C.export("scatter", scatter)
C.export("scatter_", function(x, dim, index, src, opts) return x:copy_(scatter(x, dim, index, src, opts)) end)

-- new_ones / new_full: x's dtype unless opts.dtype
C.export("new_ones", function(x, ...)
  local shape, opts = sizes_and_opts("new_ones", ...)
  return F.ones(shape, { dtype = opts.dtype or x.dtype })
end)
C.export("new_full", function(x, size, value, opts)
  check_tensor("new_full", x)
  return F.full(size, value, { dtype = options.check(opts, "new_full", { dtype = "dtype" }).dtype or x.dtype })
end)
