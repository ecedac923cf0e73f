-- shape.lua: shape arithmetic shared by eager dispatch and tracing (dims may be symbolic there).
local errors = require("ds.errors")
local M = {}

-- Dims are numbers eagerly; while tracing they may be symbolic dims (sym.lua): interned objects, so
-- equal dims are the same Lua value, and their metamethods do the arithmetic.
function M.same(a, b) return a == b end

function M.mul(a, b) return a * b end

function M.numel(shape)
  local n = 1
  for i = 1, #shape do n = M.mul(n, shape[i]) end
  return n
end

function M.str(shape)
  local parts = {}
  for i = 1, #shape do parts[i] = tostring(shape[i]) end
  return "(" .. table.concat(parts, ",") .. ")"
end

function M.equal(a, b)
  if a == b then return true end
  if #a ~= #b then return false end
  for i = 1, #a do if not M.same(a[i], b[i]) then return false end end
  return true
end

-- NumPy broadcasting of two shapes; opname for the message
function M.broadcast(a, b, opname)
  if a == b then return a end
  local na, nb = #a, #b
  local n = na > nb and na or nb
  local out = {}
  for i = 1, n do
    local da = a[na - n + i] or 1
    local db = b[nb - n + i] or 1
    if M.same(da, db) then out[i] = da
    elseif da == 1 then out[i] = db
    elseif db == 1 then out[i] = da
    else
      errors.raise(string.format("%s: shapes %s and %s do not broadcast (dim %d: %s vs %s)",
        opname, M.str(a), M.str(b), i, tostring(da), tostring(db)))
    end
  end
  return out
end

-- normalize a 1-based dim (negative counts from the end) for a tensor of ndim dims
function M.dim(d, ndim, opname, allow_end)
  if type(d) ~= "number" or d ~= math.floor(d) then
    errors.raise(string.format("%s: dim must be an integer, got %s", opname, tostring(d)))
  end
  local hi = allow_end and ndim + 1 or ndim
  local r = d < 0 and hi + 1 + d or d
  if r < 1 or r > hi or (ndim == 0 and not allow_end) then
    if ndim == 0 and (d == 1 or d == -1) and not allow_end then return 1 end
    errors.raise(string.format("%s: dim %d out of range for a %d-d tensor (valid: %d..%d)",
      opname, d, ndim, -hi, hi))
  end
  return r
end

-- the limits every shape obeys (src/ds.h DS_MAXDIM; src/core.c caps the product of non-zero sizes)
M.MAXDIM = 8
M.MAX_EXTENT = 2 ^ 50

-- Check a shape an op is about to build: at most MAXDIM dims, each a non-negative integer (or a
-- symbolic dim while tracing), the product of its non-zero sizes at most MAX_EXTENT (so neither
-- numel, bytes nor strides overflow). Raises "opname: ..." otherwise; returns the shape.
function M.check(shape, opname)
  if type(shape) ~= "table" then
    errors.raise(string.format("%s: a shape must be a list of sizes, got %s", opname, type(shape)))
  end
  local n = #shape
  if n > M.MAXDIM then
    errors.raise(string.format("%s: tensors have at most %d dims, got %d", opname, M.MAXDIM, n))
  end
  local extent = 1
  for i = 1, n do
    local d = shape[i]
    if type(d) == "number" then
      if d < 0 or d ~= math.floor(d) then
        errors.raise(string.format("%s: invalid size %s in dim %d (sizes must be non-negative integers)", opname,
          tostring(d), i))
      end
      if d > 0 then extent = extent * d end
    elseif getmetatable(d) ~= "ds.sym" then -- a symbolic dim (sym.lua) while tracing
      errors.raise(string.format("%s: size %d must be an integer, got %s", opname, i, type(d)))
    end
  end
  if extent > M.MAX_EXTENT then
    errors.raise(string.format("%s: shape %s is too large (more than 2^50 elements)", opname, M.str(shape)))
  end
  return shape
end

-- Strides that view (shape, strides) as new_shape without a copy, or nil when no view can (PyTorch's
-- computeStride): each run of dims that is contiguous within itself may be split or merged, no more.
function M.view_strides(shape, strides, new_shape)
  local numel = M.numel(shape)
  if numel == 0 or #shape == 0 then return M.contiguous_strides(new_shape) end
  local out, view_d = {}, #new_shape
  local chunk_base_stride = strides[#strides]
  local tensor_numel, view_numel = 1, 1
  for d = #shape, 1, -1 do
    tensor_numel = tensor_numel * shape[d]
    if d == 1 or (shape[d - 1] ~= 1 and strides[d - 1] ~= tensor_numel * chunk_base_stride) then
      while view_d >= 1 and (view_numel < tensor_numel or new_shape[view_d] == 1) do
        out[view_d] = view_numel * chunk_base_stride
        view_numel = view_numel * new_shape[view_d]
        view_d = view_d - 1
      end
      if view_numel ~= tensor_numel then return nil end
      if d > 1 then chunk_base_stride, tensor_numel, view_numel = strides[d - 1], 1, 1 end
    end
  end
  if view_d ~= 0 then return nil end
  return out
end

function M.contiguous_strides(shape)
  local st, s = {}, 1
  for i = #shape, 1, -1 do st[i] = s; s = s * shape[i] end
  return st
end

-- shape with the reduced dims (sorted, 1-based) dropped, or kept as 1
function M.reduced(shape, dims, keepdim)
  local out, j = {}, 1
  for i, s in ipairs(shape) do
    if dims[j] == i then
      j = j + 1
      if keepdim then out[#out + 1] = 1 end
    else
      out[#out + 1] = s
    end
  end
  return out
end

return M
