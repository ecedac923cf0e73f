-- ops/arrange.lua: splitting, index-producing and broadcasting helpers composed of table ops: tensor_split,
-- tril_indices/triu_indices, diag_embed, broadcast_shapes/broadcast_tensors, argwhere. Indices are 1-based.
local C = require("ds.ops.common")
local S = require("ds.shape")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local options = require("ds.options")
local F = C.functions

local is_tensor = C.is_tensor

local MAX_EMPTY_PIECES = 4096 -- tensor_split makes at most max(size, this) pieces

local function is_int(v) return type(v) == "number" and v == math.floor(v) and math.abs(v) < math.huge end

-- tensor_split(x, sections | indices, dim = 1) -> list of views along dim: sections n gives n pieces, the first
-- size % n of them one longer; indices (a list or a 1-D integer tensor, 1-based) are where each new piece
-- starts (PyTorch's 0-based split points + 1; negative ones count from the end; out of range ones clamp)
C.export("tensor_split", function(x, split, dim)
  if not is_tensor(x) then errors.raise("tensor_split: expects a tensor, got " .. type(x)) end
  if #x._shape == 0 then errors.raise("tensor_split: expects at least 1 dim, got a 0-d tensor") end
  local d = S.dim(dim or 1, #x._shape, "tensor_split of " .. S.str(x._shape))
  local n = x._shape[d]
  if type(n) ~= "number" then errors.raise("tensor_split: dim " .. d .. " must have a concrete size") end
  if is_tensor(split) then
    if not dtype.is_int[split.dtype] or #split._shape > 1 then
      errors.raise("tensor_split: a tensor of sections or indices must be a 0-d or 1-D integer tensor, got "
        .. split.dtype .. " " .. S.str(split._shape))
    end
    split = #split._shape == 0 and split:item() or split:totable()
  end
  local bounds = { 0 } -- 0-based piece starts, then n
  if type(split) == "number" then
    if not is_int(split) or split < 1 or split > math.max(n, MAX_EMPTY_PIECES) then
      errors.raise(string.format("tensor_split: sections must be an integer in 1..%d (dim %d has size %d), got %s",
        math.max(n, MAX_EMPTY_PIECES), d, n, tostring(split)))
    end
    local base, extra = math.floor(n / split), n % split
    for i = 1, split - 1 do bounds[i + 1] = bounds[i] + base + (i <= extra and 1 or 0) end
  elseif type(split) == "table" then
    for i, v in ipairs(split) do
      if not is_int(v) or v == 0 then
        errors.raise("tensor_split: indices must be non-zero integers (1-based), got " .. tostring(v))
      end
      local b = v > 0 and v - 1 or n + v
      bounds[i + 1] = math.min(math.max(b, 0), n)
    end
  else
    errors.raise("tensor_split: expects a number of sections or a list of indices, got " .. type(split))
  end
  bounds[#bounds + 1] = n
  local out = {}
  for i = 1, #bounds - 1 do
    local s = math.min(bounds[i], n)
    out[i] = x:narrow(d, s + 1, math.max(bounds[i + 1] - s, 0))
  end
  return out
end)

-- tril_indices / triu_indices(row, col, offset = 0, {dtype = "i64"}) -> (2, N): the 1-based (row, col) of the
-- elements on and below (above) diagonal offset of a row x col matrix, row by row
local function triangle_indices(name, keep)
  return function(row, col, offset, opts)
    if type(offset) == "table" then opts, offset = offset, nil end
    local o = options.check(opts, name, { dtype = "dtype" })
    offset = offset or 0
    if not (is_int(row) and is_int(col) and is_int(offset)) then
      errors.raise(string.format("%s: row, col and offset must be integers, got %s, %s, %s", name, tostring(row),
        tostring(col), tostring(offset)))
    end
    if row < 0 or col < 0 or row * col > 2 ^ 26 then
      errors.raise(string.format("%s: row and col must be >= 0 with row * col <= 2^26, got %d, %d", name, row, col))
    end
    local rs, cs = {}, {}
    for r = 0, col > 0 and row - 1 or -1 do
      for c = 0, col - 1 do
        if keep(c - r, offset) then rs[#rs + 1] = r + 1; cs[#cs + 1] = c + 1 end
      end
    end
    local dt = o.dtype and dtype.normalize(o.dtype) or "i64"
    if #rs == 0 then return F.zeros({ 2, 0 }, { dtype = dt }) end
    return F.tensor({ rs, cs }, { dtype = dt })
  end
end
C.export("tril_indices", triangle_indices("tril_indices", function(k, off) return k <= off end), { method = false })
C.export("triu_indices", triangle_indices("triu_indices", function(k, off) return k >= off end), { method = false })

-- diag_embed(x (..., n), offset = 0, dim1 = -2, dim2 = -1) -> x's last dim on diagonal offset of the
-- (dim1, dim2) planes (size n + |offset|) of a result with one more dim, zero elsewhere
C.export("diag_embed", function(x, offset, dim1, dim2)
  if type(offset) == "table" then
    local o = options.check(offset, "diag_embed", { offset = "integer", dim1 = "integer", dim2 = "integer" })
    offset, dim1, dim2 = o.offset, o.dim1, o.dim2
  end
  if not is_tensor(x) then errors.raise("diag_embed: expects a tensor, got " .. type(x)) end
  offset = offset or 0
  if not is_int(offset) then errors.raise("diag_embed: offset must be an integer, got " .. tostring(offset)) end
  local nd = #x._shape + 1
  local where = "diag_embed of " .. S.str(x._shape)
  local d1, d2 = S.dim(dim1 or -2, nd, where), S.dim(dim2 or -1, nd, where)
  if d1 == d2 then errors.raise(where .. ": dim1 and dim2 are both " .. d1) end
  if #x._shape == 0 then x = x:reshape(1) end
  local n = x._shape[#x._shape]
  if type(n) ~= "number" then errors.raise(where .. ": the last dim must have a concrete size") end
  local m = n + math.abs(offset)
  local r0, c0 = math.max(-offset, 0), math.max(offset, 0)
  local pos = {}
  for i = 0, n - 1 do pos[i + 1] = (i + r0) * m + i + c0 + 1 end
  local flat_shape, out_shape = {}, {}
  for i = 1, #x._shape - 1 do flat_shape[i] = x._shape[i]; out_shape[i] = x._shape[i] end
  flat_shape[#flat_shape + 1] = m * m
  out_shape[#out_shape + 1] = m; out_shape[#out_shape + 1] = m
  local y = F.zeros(flat_shape, { dtype = x.dtype })
  if n > 0 then y = F.index_add(y, -1, F.tensor(pos, { dtype = "i64" }), x) end
  return F.movedim(y:reshape(out_shape), { nd - 1, nd }, { d1, d2 })
end)

-- broadcast_shapes(shape...) -> the shape they broadcast to (each a list of sizes or one number)
local function broadcast_shapes(...)
  local shape = {}
  for i = 1, select("#", ...) do
    local s = select(i, ...)
    if type(s) == "number" then s = { s } end
    if type(s) ~= "table" or is_tensor(s) then
      errors.raise("broadcast_shapes: shape " .. i .. " must be a list of sizes or a number, got " .. type(s))
    end
    for _, v in ipairs(s) do
      if not is_int(v) or v < 0 then errors.raise("broadcast_shapes: sizes must be integers >= 0, got " .. tostring(v)) end
    end
    shape = S.broadcast(shape, s, "broadcast_shapes")
  end
  return shape
end
C.export("broadcast_shapes", broadcast_shapes, { method = false })

-- broadcast_tensors(t...) or broadcast_tensors({t...}) -> the tensors expanded to their common shape (views)
C.export("broadcast_tensors", function(...)
  local list = { ... }
  if select("#", ...) == 1 and type(list[1]) == "table" and not is_tensor(list[1]) then list = list[1] end
  local shape = {}
  for i = 1, table.maxn(list) do
    if not is_tensor(list[i]) then
      errors.raise("broadcast_tensors: argument " .. i .. " must be a tensor, got " .. type(list[i]))
    end
    shape = S.broadcast(shape, list[i]._shape, "broadcast_tensors")
  end
  local out = {}
  for i, t in ipairs(list) do out[i] = t:expand(shape) end
  return unpack(out, 1, #list)
end, { method = false })

-- argwhere(x) -> (n, ndim) i64: the 1-based indices of the non-zero elements (nonzero's; eager only)
C.export("argwhere", function(x) return F.nonzero(x) end)
