-- ops/stacking.lua: PyTorch's joining and rearranging conveniences composed of cat, reshape, flip, transpose and
-- expand: hstack, vstack (row_stack), dstack, column_stack, atleast_1d/2d/3d, unflatten, rot90, flipud, fliplr,
-- ravel, swapaxes/swapdims, meshgrid, block_diag, cartesian_prod, diagflat. Dims are 1-based.
local C = require("ds.ops.common")
local S = require("ds.shape")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local options = require("ds.options")
local F = C.functions

local is_tensor = C.is_tensor

local function need_tensor(name, x, i)
  if not is_tensor(x) then
    errors.raise(string.format("%s: argument %d must be a tensor, got %s", name, i or 1, type(x)))
  end
  return x
end

-- the tensors of a call: t1, t2, ... or one list {t1, t2, ...}; at least one
local function tensor_list(name, ...)
  local list = { ... }
  if select("#", ...) == 1 and type(list[1]) == "table" and not is_tensor(list[1]) then list = list[1] end
  local n = table.maxn(list)
  if n == 0 then errors.raise(name .. ": expects at least one tensor") end
  for i = 1, n do need_tensor(name, list[i], i) end
  return list
end

-- atleast_nd: a 0-d x as (1...), 1-D (n) as (1, n) for 2 and (1, n, 1) for 3, 2-D (m, n) as (m, n, 1) for 3
local function atleast(x, nd)
  local s, r = x._shape, #x._shape
  if r >= nd then return x end
  if r == 0 then
    local ones = {}
    for i = 1, nd do ones[i] = 1 end
    return x:reshape(ones)
  end
  if nd == 2 then return x:reshape(1, s[1]) end
  if r == 1 then return x:reshape(1, s[1], 1) end
  return x:reshape(s[1], s[2], 1)
end
for nd = 1, 3 do
  local name = "atleast_" .. nd .. "d"
  -- atleast_<n>d(t...) or atleast_<n>d({t...}): each tensor with at least n dims (one result per tensor)
  C.export(name, function(...)
    local list, out = tensor_list(name, ...), {}
    for i, t in ipairs(list) do out[i] = atleast(t, nd) end
    return unpack(out, 1, #list)
  end)
end

local function stacker(name, nd, dim_of)
  return function(...)
    local list, parts = tensor_list(name, ...), {}
    for i, t in ipairs(list) do parts[i] = atleast(t, nd) end
    return F.cat(parts, dim_of(parts))
  end
end
-- hstack(t...): joined along dim 1 when all are 1-D (0-d count as 1-D), else along dim 2
C.export("hstack", stacker("hstack", 1, function(p) return #p[1]._shape == 1 and 1 or 2 end), { method = false })
-- vstack(t...) / row_stack: joined along dim 1 after atleast_2d
C.export("vstack", stacker("vstack", 2, function() return 1 end), { method = false })
C.export("row_stack", stacker("row_stack", 2, function() return 1 end), { method = false })
-- dstack(t...): joined along dim 3 after atleast_3d
C.export("dstack", stacker("dstack", 3, function() return 3 end), { method = false })
-- column_stack(t...): 0-d and 1-D tensors become columns (n, 1), then joined along dim 2
C.export("column_stack", function(...)
  local list, parts = tensor_list("column_stack", ...), {}
  for i, t in ipairs(list) do parts[i] = #t._shape <= 1 and t:reshape(-1, 1) or t end
  return F.cat(parts, 2)
end, { method = false })

-- unflatten(x, dim, sizes): dim split into sizes (one may be -1)
C.export("unflatten", function(x, dim, sizes)
  need_tensor("unflatten", x)
  if type(sizes) ~= "table" or is_tensor(sizes) or #sizes == 0 then
    errors.raise("unflatten: sizes must be a non-empty list of sizes")
  end
  local d = S.dim(dim, #x._shape, "unflatten of " .. S.str(x._shape))
  local shape = {}
  for i = 1, d - 1 do shape[#shape + 1] = x._shape[i] end
  for _, s in ipairs(sizes) do shape[#shape + 1] = s end
  for i = d + 1, #x._shape do shape[#shape + 1] = x._shape[i] end
  local known, free = 1, 0
  for _, s in ipairs(sizes) do
    if s == -1 then free = free + 1 elseif type(s) ~= "number" or s < 0 or s ~= math.floor(s) then
      errors.raise("unflatten: sizes must be integers >= 0 or one -1, got " .. tostring(s))
    else known = known * s end
  end
  if free > 1 or (free == 0 and known ~= x._shape[d]) or (free == 1 and (known == 0 or x._shape[d] % known ~= 0)) then
    errors.raise(string.format("unflatten: sizes {%s} do not multiply to dim %d's size %s", table.concat(sizes, ", "), d,
      tostring(x._shape[d])))
  end
  return x:reshape(shape)
end)

-- rot90(x, k = 1, dims = {1, 2}): rotated by 90 degrees k times from dims[1] towards dims[2]
C.export("rot90", function(x, k, dims)
  need_tensor("rot90", x)
  k = k or 1
  if type(k) ~= "number" or k ~= math.floor(k) or math.abs(k) == math.huge then
    errors.raise("rot90: k must be an integer, got " .. tostring(k))
  end
  dims = dims or { 1, 2 }
  if type(dims) ~= "table" or #dims ~= 2 or #x._shape < 2 then
    errors.raise("rot90: dims must be a list of 2 dims of a tensor with at least 2 dims, got " .. S.str(x._shape))
  end
  local where = "rot90 of " .. S.str(x._shape)
  local a, b = S.dim(dims[1], #x._shape, where), S.dim(dims[2], #x._shape, where)
  if a == b then errors.raise(where .. ": the two dims must differ") end
  k = k % 4
  if k == 1 then return x:flip(b):transpose(a, b) end
  if k == 2 then return x:flip({ a, b }) end
  if k == 3 then return x:flip(a):transpose(a, b) end
  return x:clone()
end)
-- flipud(x): x reversed along dim 1; fliplr(x): along dim 2 (at least 2 dims)
C.export("flipud", function(x)
  if #need_tensor("flipud", x)._shape < 1 then errors.raise("flipud: expects at least 1 dim, got a 0-d tensor") end
  return x:flip(1)
end)
C.export("fliplr", function(x)
  if #need_tensor("fliplr", x)._shape < 2 then errors.raise("fliplr: expects at least 2 dims, got " .. S.str(x._shape)) end
  return x:flip(2)
end)
-- ravel(x): x flattened (1-D)
C.export("ravel", function(x) return need_tensor("ravel", x):reshape(-1) end)
-- swapaxes / swapdims(x, dim0, dim1): transpose
C.export("swapaxes", function(x, a, b) return need_tensor("swapaxes", x):transpose(a, b) end)
C.export("swapdims", function(x, a, b) return need_tensor("swapdims", x):transpose(a, b) end)

-- meshgrid(t..., {indexing = "ij"}): 0-d/1-D tensors as grids of shape (n1, n2, ...) ("xy": the first two swapped)
C.export("meshgrid", function(...)
  local args = { ... }
  local n = select("#", ...)
  local opts
  if n > 0 and type(args[n]) == "table" and not is_tensor(args[n]) and args[n][1] == nil then opts = args[n]; n = n - 1 end
  local indexing = options.check(opts, "meshgrid", { indexing = { "ij", "xy" } }).indexing or "ij"
  local list = tensor_list("meshgrid", unpack(args, 1, n))
  local shape = {}
  for i, t in ipairs(list) do
    if #t._shape > 1 then errors.raise("meshgrid: tensors must be 0-d or 1-D, got " .. S.str(t._shape)) end
    shape[i] = S.numel(t._shape)
  end
  local xy = indexing == "xy" and #list >= 2
  if xy then shape[1], shape[2] = shape[2], shape[1] end
  local out = {}
  for i, t in ipairs(list) do
    local pos = i
    if xy and i <= 2 then pos = 3 - i end
    local view = {}
    for j = 1, #list do view[j] = j == pos and shape[pos] or 1 end
    out[i] = t:reshape(view):expand(shape)
  end
  return unpack(out, 1, #list)
end, { method = false })

-- block_diag(t...): the tensors (0-d as (1, 1), 1-D as (1, n)) on the diagonal of a zero matrix, dtype promoted
C.export("block_diag", function(...)
  local list = tensor_list("block_diag", ...)
  local mats, rows, cols, dt = {}, 0, 0, nil
  for i, t in ipairs(list) do
    if #t._shape > 2 then errors.raise("block_diag: tensors must have at most 2 dims, got " .. S.str(t._shape)) end
    mats[i] = #t._shape == 2 and t or t:reshape(1, -1)
    rows, cols = rows + mats[i]._shape[1], cols + mats[i]._shape[2]
    dt = dt and dtype.promote(dt, t.dtype) or t.dtype
  end
  local blocks, left = {}, 0
  for i, m in ipairs(mats) do
    local r, c = m._shape[1], m._shape[2]
    local parts = {} -- zeros left of the block, the block, zeros right of it
    if left > 0 then parts[#parts + 1] = F.zeros({ r, left }, { dtype = dt }) end
    parts[#parts + 1] = m:astype(dt)
    if cols - left - c > 0 then parts[#parts + 1] = F.zeros({ r, cols - left - c }, { dtype = dt }) end
    blocks[i] = #parts > 1 and F.cat(parts, 2) or parts[1]
    left = left + c
  end
  return F.cat(blocks, 1)
end, { method = false })

-- cartesian_prod(t...): the rows (n1 * n2 * ..., k) of every combination of the 1-D tensors' elements (one
-- tensor: itself)
C.export("cartesian_prod", function(...)
  local list = tensor_list("cartesian_prod", ...)
  for _, t in ipairs(list) do
    if #t._shape ~= 1 then errors.raise("cartesian_prod: tensors must be 1-D, got " .. S.str(t._shape)) end
  end
  if #list == 1 then return list[1] end
  local grids = { F.meshgrid(list) }
  for i, g in ipairs(grids) do grids[i] = g:reshape(-1) end
  return F.stack(grids, 2)
end, { method = false })

-- diagflat(x, offset = 0): the flattened x on diagonal offset of a square matrix
C.export("diagflat", function(x, offset)
  need_tensor("diagflat", x)
  offset = offset or 0
  if type(offset) ~= "number" or offset ~= math.floor(offset) or math.abs(offset) == math.huge then
    errors.raise("diagflat: offset must be an integer, got " .. tostring(offset))
  end
  if x.dtype == "bool" then errors.raise("diagflat: bool tensors are not supported") end
  return F.diag(x:reshape(-1), offset)
end)
