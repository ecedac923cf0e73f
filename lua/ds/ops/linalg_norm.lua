-- ops/linalg_norm.lua: torch.linalg's norms composed of table ops (abs, pow, sum, amax, amin): vector_norm,
-- matrix_norm ('fro', 1, -1, inf, -inf; 2, -2 and 'nuc' need singular values and are refused), norm.
-- Gradients are PyTorch's: a zero norm gets gradient 0, the maxima of an inf-norm share the gradient evenly.
local C = require("ds.ops.common")
local S = require("ds.shape")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local options = require("ds.options")
local F = C.functions

local is_tensor = C.is_tensor
local inf = math.huge

local M = {}
local pnorm, dims_list

local function is_options(v) return type(v) == "table" and not is_tensor(v) and v[1] == nil and next(v) ~= nil end

-- the input cast to opts.dtype (PyTorch's dtype option), checked to be floating point
local function float_input(name, x, dt)
  if not is_tensor(x) then errors.raise(name .. ": expects a tensor, got " .. type(x)) end
  if dt ~= nil then
    local d = dtype.normalize(dt)
    if not dtype.is_float[d or ""] then errors.raise(name .. ": dtype must be f32 or f64, got " .. tostring(dt)) end
    if not dtype.is_float[x.dtype] then
      errors.raise(string.format("%s: dtype = %s needs a floating point input, got %s", name, d, x.dtype))
    end
    x = x:astype(d)
  end
  if not dtype.is_float[x.dtype] then
    errors.raise(name .. ": expects a floating point tensor, got " .. x.dtype .. " (use x:astype(\"f32\"))")
  end
  return x
end

-- the dims of x as a list of positive dims (nil: every dim), checked
function M.dims_list(name, x, dim)
  if dim == nil then return nil end
  if type(dim) == "number" then dim = { dim } end
  if type(dim) ~= "table" or is_tensor(dim) then errors.raise(name .. ": dim must be a number or a list of numbers") end
  local out, seen, where = {}, {}, name .. " of " .. S.str(x._shape)
  for i, d in ipairs(dim) do
    if type(d) ~= "number" or d ~= math.floor(d) or math.abs(d) == math.huge then
      errors.raise(where .. ": dims must be integers, got " .. tostring(d))
    end
    if #x._shape == 0 and d ~= 1 and d ~= -1 then errors.raise(where .. ": a 0-d tensor takes dim 1 or -1, got " .. d) end
    out[i] = #x._shape == 0 and d or S.dim(d, #x._shape, where)
    if seen[out[i]] then errors.raise(where .. ": dim " .. d .. " repeated") end
    seen[out[i]] = true
  end
  return out
end
dims_list = M.dims_list

-- sum_i |x_i|^ord ^ (1 / ord) over dims; a zero sum gives 0 with gradient 0
function M.pnorm(x, ord, dims, keepdim)
  if ord == inf then return x:abs():amax(dims, keepdim) end
  if ord == -inf then return x:abs():amin(dims, keepdim) end
  if ord == 0 then return x:ne(0):astype(x.dtype):sum(dims, keepdim) end
  if ord == 1 then return x:abs():sum(dims, keepdim) end
  local s = ord == 2 and (x * x):sum(dims, keepdim) or (x:abs() ^ ord):sum(dims, keepdim)
  if ord < 0 then return s ^ (1 / ord) end
  local positive = s:gt(0)
  local root = F.where(positive, s, F.ones({}, { dtype = s.dtype }))
  root = ord == 2 and root:sqrt() or root ^ (1 / ord)
  return F.where(positive, root, F.zeros({}, { dtype = s.dtype }))
end
pnorm = M.pnorm

-- vector_norm(x, ord = 2, dim = nil (all), keepdim = false, {dtype =}) or vector_norm(x, {ord =, dim =, ...})
function M.vector_norm(x, ord, dim, keepdim, opts)
  if is_options(ord) then opts, ord = ord, nil
  elseif is_options(dim) then opts, dim = dim, nil
  elseif is_options(keepdim) then opts, keepdim = keepdim, nil end
  local o = options.check(opts, "linalg.vector_norm", { ord = "number", dim = "any", keepdim = "boolean", dtype = "dtype" })
  ord = ord or o.ord or 2
  dim = dim or o.dim
  if keepdim == nil then keepdim = o.keepdim or false end
  if type(ord) ~= "number" or ord ~= ord then
    errors.raise("linalg.vector_norm: ord must be a number (math.huge for inf), got " .. tostring(ord))
  end
  x = float_input("linalg.vector_norm", x, o.dtype)
  local dims = dims_list("linalg.vector_norm", x, dim)
  if (ord == inf or ord == -inf or ord < 0) and S.numel(x._shape) == 0 then
    errors.raise(string.format("linalg.vector_norm: cannot compute the %s norm of an empty tensor %s", tostring(ord),
      S.str(x._shape)))
  end
  return pnorm(x, ord, dims, keepdim)
end

local MATRIX_ORDS = { fro = true, [1] = true, [-1] = true, [inf] = true, [-inf] = true }

-- matrix_norm(A, ord = 'fro', dim = {-2, -1}, keepdim = false, {dtype =})
function M.matrix_norm(A, ord, dim, keepdim, opts)
  if is_options(ord) then opts, ord = ord, nil
  elseif is_options(dim) then opts, dim = dim, nil
  elseif is_options(keepdim) then opts, keepdim = keepdim, nil end
  local o = options.check(opts, "linalg.matrix_norm", { ord = "any", dim = "any", keepdim = "boolean", dtype = "dtype" })
  ord = ord or o.ord or "fro"
  dim = dim or o.dim or { -2, -1 }
  if keepdim == nil then keepdim = o.keepdim or false end
  if ord == "nuc" or ord == 2 or ord == -2 then
    errors.raise("linalg.matrix_norm: ord = " .. tostring(ord) .. " needs singular values (an SVD), which ds does "
      .. "not have; 'fro', 1, -1, inf and -inf are implemented")
  end
  if not MATRIX_ORDS[ord] then
    errors.raise("linalg.matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got " .. tostring(ord))
  end
  A = float_input("linalg.matrix_norm", A, o.dtype)
  local nd = #A._shape
  if nd < 2 then errors.raise("linalg.matrix_norm: A must have at least 2 dims, got " .. S.str(A._shape)) end
  if type(dim) ~= "table" or #dim ~= 2 then errors.raise("linalg.matrix_norm: dim must be a list of 2 dims") end
  local where = "linalg.matrix_norm of " .. S.str(A._shape)
  local d1, d2 = S.dim(dim[1], nd, where), S.dim(dim[2], nd, where)
  if d1 == d2 then errors.raise(where .. ": dims must differ, got " .. d1 .. " twice") end
  if ord == "fro" then return pnorm(A, 2, { d1, d2 }, keepdim) end
  -- 1 / -1: max / min over columns (d2) of the sums over rows (d1); inf / -inf the other way round
  local sum_dim, ext_dim = d1, d2
  if ord == inf or ord == -inf then sum_dim, ext_dim = d2, d1 end
  if S.numel(A._shape) == 0 and A._shape[ext_dim] == 0 then
    errors.raise(where .. ": cannot compute the " .. tostring(ord) .. " norm over an empty dim")
  end
  local sums = A:abs():sum(sum_dim, true)
  local r = (ord > 0) and sums:amax(ext_dim, true) or sums:amin(ext_dim, true)
  if keepdim then return r end
  return r:squeeze(math.max(d1, d2)):squeeze(math.min(d1, d2))
end

-- norm(A, ord = nil, dim = nil, keepdim = false, {dtype =}): ord nil is the 2-norm of the flattened input
-- (dim nil) or of dim (a number), 'fro' for two dims; a numeric ord with dim nil needs a 1-D or 2-D input
function M.norm(A, ord, dim, keepdim, opts)
  if is_options(ord) then opts, ord = ord, nil
  elseif is_options(dim) then opts, dim = dim, nil
  elseif is_options(keepdim) then opts, keepdim = keepdim, nil end
  local o = options.check(opts, "linalg.norm", { ord = "any", dim = "any", keepdim = "boolean", dtype = "dtype" })
  ord, dim = ord or o.ord, dim or o.dim
  if keepdim == nil then keepdim = o.keepdim or false end
  if not is_tensor(A) then errors.raise("linalg.norm: expects a tensor, got " .. type(A)) end
  local vo = { dtype = o.dtype }
  if dim ~= nil and type(dim) ~= "number" and (type(dim) ~= "table" or (#dim ~= 1 and #dim ~= 2)) then
    errors.raise("linalg.norm: dim must be a number or a list of 1 or 2 dims")
  end
  local matrix = (type(dim) == "table" and #dim == 2) or type(ord) == "string"
    or (dim == nil and ord ~= nil and #A._shape == 2)
  if dim == nil and ord ~= nil and #A._shape ~= 1 and #A._shape ~= 2 then
    errors.raise("linalg.norm: with ord and no dim the input must be 1-D or 2-D, got " .. S.str(A._shape))
  end
  if matrix then
    if type(ord) == "string" and type(dim) == "number" then
      errors.raise("linalg.norm: ord = '" .. ord .. "' is a matrix norm and needs 2 dims")
    end
    return M.matrix_norm(A, ord or "fro", dim or { -2, -1 }, keepdim, vo)
  end
  return M.vector_norm(A, ord or 2, dim, keepdim, vo)
end

return M
