-- ops/linalg_solve.lua: square-matrix functions over batches (..., n, n) by Gauss-Jordan elimination with
-- partial pivoting written with table ops: inv, det, slogdet, solve, matrix_power; and cross.
-- Why table ops rather than a C LU kernel: the elimination is n unrolled steps of batched where/gather/mul/sub,
-- so it runs eagerly, traces and compiles with no new kernel, and autograd differentiates it exactly (the
-- pivots are chosen by the values; each step is smooth in the entries), to any order. Its derivatives are
-- PyTorch's formulas up to rounding (inv: -A^-T g A^-T, det: g det A^-T, solve: A^-T g and -(A^-T g) X^T).
-- Cost: n steps over the whole (n, n + m) block, about 3x LAPACK's flops, for the small matrices ports use
-- (3x3 transforms, covariances of tens of features). n must be a concrete size (also when traced).
local C = require("ds.ops.common")
local S = require("ds.shape")
local dtype = require("ds.dtype")
local errors = require("ds.errors")
local options = require("ds.options")
local state = require("ds.state")
local F = C.functions

local is_tensor = C.is_tensor

local M = {}

-- x must be a float tensor (..., n, n) with n concrete; returns n
local function square(name, x, what)
  if not is_tensor(x) then errors.raise(string.format("%s: %s must be a tensor, got %s", name, what, type(x))) end
  local nd = #x._shape
  if nd < 2 or not S.same(x._shape[nd], x._shape[nd - 1]) then
    errors.raise(string.format("%s: %s must be a batch of square matrices (..., n, n), got %s", name, what,
      S.str(x._shape)))
  end
  if not dtype.is_float[x.dtype] then
    errors.raise(string.format("%s: %s must be f32 or f64, got %s", name, what, x.dtype))
  end
  local n = x._shape[nd]
  if type(n) ~= "number" then
    errors.raise(string.format("%s: the matrix size of %s must be concrete, got a symbolic size", name, S.str(x._shape)))
  end
  return n
end
M.square = square

-- the n x n identity (ds.eye writes through a view, which a trace cannot record)
local function identity(n, dt)
  local i = F.arange(1, n + 1, { dtype = "i64" })
  return i:reshape(n, 1):eq(i):astype(dt)
end

local function batch_of(shape, drop)
  local b = {}
  for i = 1, #shape - drop do b[i] = shape[i] end
  return b
end

-- eagerly, a zero pivot (a singular matrix) is PyTorch's error; traced, the result holds inf/NaN
local function refuse_singular(name, pivots)
  if state.trace then return end
  local zero = pivots:eq(0)
  if zero:any():item() then
    local k = zero:reshape(-1, pivots._shape[#pivots._shape]):any(1):astype("i64"):argmax():item()
    errors.raise(string.format("%s: the diagonal element %d is zero, the input matrix is singular", name, k))
  end
end

-- eliminate(A (..., n, n), B (..., n, m) or nil) -> X = A^-1 B (nil without B), pivots (..., n), sign (...):
-- det(A) = sign * prod(pivots). Without B only the rows below each pivot are eliminated (LU's pivots).
local function eliminate(A, B)
  local nd, n = #A._shape, A._shape[#A._shape]
  local dt = A.dtype
  local Mx = A
  if B then
    local batch = S.broadcast(batch_of(A._shape, 2), batch_of(B._shape, 2), "linalg.solve")
    local sa, sb = batch_of(batch, 0), batch_of(batch, 0)
    sa[#sa + 1] = n; sa[#sa + 1] = n
    sb[#sb + 1] = n; sb[#sb + 1] = B._shape[#B._shape]
    Mx = F.cat({ A:expand(sa), B:expand(sb) }, -1)
    nd = #Mx._shape
  end
  local w = Mx._shape[nd]
  local rows = F.arange(1, n + 1, { dtype = "i64" }):reshape(n, 1)
  local minus_one = F.full({}, -1, { dtype = dt })
  local one, zero = F.ones({}, { dtype = dt }), F.zeros({}, { dtype = dt })
  local sign = F.ones(batch_of(Mx._shape, 2), { dtype = dt })
  local pivots = {}
  local row_shape = batch_of(Mx._shape, 2)
  row_shape[#row_shape + 1] = 1; row_shape[#row_shape + 1] = w
  for k = 1, n do
    local col = Mx:narrow(-1, k, 1)                                   -- (..., n, 1)
    local p = F.where(rows:ge(k), col:abs(), minus_one):argmax(-2, true) -- (..., 1, 1), 1-based
    local rk = Mx:narrow(-2, k, 1)                                    -- (..., 1, w)
    local rp = F.gather(Mx, -2, p:expand(row_shape))
    Mx = F.where(rows:eq(k), rp, F.where(rows:eq(p), rk, Mx))
    sign = F.where(p:squeeze(-1):squeeze(-1):eq(k), sign, -sign)
    local piv = Mx:narrow(-2, k, 1):narrow(-1, k, 1)                  -- (..., 1, 1)
    pivots[k] = piv:squeeze(-1)
    local factors = Mx:narrow(-1, k, 1) / F.where(piv:eq(0), one, piv)
    factors = F.where(B and rows:eq(k) or rows:le(k), zero, factors)
    Mx = Mx - factors * Mx:narrow(-2, k, 1)
  end
  local piv = F.cat(pivots, -1)                                       -- (..., n)
  local X
  if B then X = Mx:narrow(-1, n + 1, w - n) / piv:unsqueeze(-1) end
  return X, piv, sign
end

-- an empty batch has nothing to eliminate (and the compiler's plans refuse some views of empty buffers)
local function empty_batch(A) return S.numel(A._shape) == 0 end

-- inv(A (..., n, n)) -> (..., n, n); name: the function called, for errors
function M.inv(A, name)
  name = name or "linalg.inv"
  local n = square(name, A, "A")
  if empty_batch(A) then return A:clone() end
  local X, piv = eliminate(A, identity(n, A.dtype))
  refuse_singular(name, piv)
  return X
end

-- det(A (..., n, n)) -> (...)
function M.det(A, name)
  local n = square(name or "linalg.det", A, "A")
  if empty_batch(A) then return F.ones(batch_of(A._shape, 2), { dtype = A.dtype }) end
  local _, piv, sign = eliminate(A)
  return sign * piv:prod(-1)
end

-- slogdet(A) -> sign (...), logabsdet (...): det = sign * exp(logabsdet); singular: sign 0, logabsdet -inf
function M.slogdet(A, name)
  local n = square(name or "linalg.slogdet", A, "A")
  if empty_batch(A) then
    local b = batch_of(A._shape, 2)
    return F.ones(b, { dtype = A.dtype }), F.zeros(b, { dtype = A.dtype })
  end
  local _, piv, sign = eliminate(A)
  return sign * F.sign(piv):prod(-1), piv:abs():log():sum(-1)
end

-- solve(A (..., n, n), B (..., n, k) or (..., n), {left = true}) -> X with A X = B (left = false: X A = B)
function M.solve(A, B, opts)
  local left = options.check(opts, "linalg.solve", { left = "boolean" }).left ~= false
  local n = square("linalg.solve", A, "A")
  if not is_tensor(B) then errors.raise("linalg.solve: B must be a tensor, got " .. type(B)) end
  if B.dtype ~= A.dtype then
    errors.raise(string.format("linalg.solve: A is %s and B is %s (they must agree)", A.dtype, B.dtype))
  end
  -- B is a (batch of) vector(s) when 1-D or when its shape is A's without the last dim (PyTorch's rule)
  local vector = #B._shape == 1
  if not vector and #B._shape == #A._shape - 1 then
    vector = true
    for i = 1, #B._shape do if not S.same(B._shape[i], A._shape[i]) then vector = false end end
  end
  if not left then
    if vector then errors.raise("linalg.solve: left = false needs B as a matrix (..., k, n)") end
    return M.solve(A:transpose(-1, -2), B:transpose(-1, -2)):transpose(-1, -2)
  end
  local Bm = vector and B:unsqueeze(-1) or B
  if #Bm._shape < 2 or not S.same(Bm._shape[#Bm._shape - 1], n) then
    errors.raise(string.format("linalg.solve: B %s does not fit A %s (B needs %s rows)", S.str(B._shape),
      S.str(A._shape), tostring(n)))
  end
  if empty_batch(A) or S.numel(Bm._shape) == 0 then
    local shape = S.broadcast(batch_of(A._shape, 2), batch_of(Bm._shape, 2), "linalg.solve")
    shape[#shape + 1] = n
    if not vector then shape[#shape + 1] = Bm._shape[#Bm._shape] end
    return F.zeros(shape, { dtype = A.dtype })
  end
  local X, piv = eliminate(A, Bm)
  refuse_singular("linalg.solve", piv)
  return vector and X:squeeze(-1) or X
end

-- matrix_power(A (..., n, n), k): A^k by repeated squaring (PyTorch's order); k < 0 inverts first, k = 0 is I
function M.matrix_power(A, k, name)
  name = name or "linalg.matrix_power"
  local n = square(name, A, "A")
  if type(k) ~= "number" or k ~= math.floor(k) or math.abs(k) == math.huge then
    errors.raise(name .. ": the exponent must be an integer, got " .. tostring(k))
  end
  if k == 0 then return identity(n, A.dtype):expand(A._shape):contiguous() end
  if k < 0 then A, k = M.inv(A, name), -k end
  if k == 1 then return A:clone() end
  if k == 2 then return F.matmul(A, A) end
  if k == 3 then return F.matmul(F.matmul(A, A), A) end
  local z, result
  while k > 0 do
    local bit = k % 2
    k = math.floor(k / 2)
    z = z and F.matmul(z, z) or A
    if bit == 1 then result = result and F.matmul(result, z) or z end
  end
  return result
end

-- cross(a, b, dim): the cross product of 3-vectors along dim (a and b broadcast); dim nil is the first dim of
-- size 3 (torch.cross), linalg.cross defaults to -1
function M.cross(name, a, b, dim)
  if not (is_tensor(a) and is_tensor(b)) then errors.raise(name .. ": expects two tensors") end
  if #a._shape ~= #b._shape then
    errors.raise(string.format("%s: a %s and b %s must have the same number of dims", name, S.str(a._shape),
      S.str(b._shape)))
  end
  local shape = S.broadcast(a._shape, b._shape, name)
  if dim == nil then
    for i, s in ipairs(shape) do if s == 3 then dim = i; break end end
    if dim == nil then errors.raise(name .. ": no dim of size 3 in " .. S.str(shape)) end
  end
  local d = S.dim(dim, #shape, name .. " of " .. S.str(shape))
  if shape[d] ~= 3 then
    errors.raise(string.format("%s: dim %d of %s must have size 3, got %s", name, d, S.str(shape), tostring(shape[d])))
  end
  a, b = a:expand(shape), b:expand(shape)
  local function at(x, i) return x:narrow(d, i, 1) end
  local a1, a2, a3, b1, b2, b3 = at(a, 1), at(a, 2), at(a, 3), at(b, 1), at(b, 2), at(b, 3)
  return F.cat({ a2 * b3 - a3 * b2, a3 * b1 - a1 * b3, a1 * b2 - a2 * b1 }, d)
end

-- torch's top-level names: ds.inverse, ds.det, ds.logdet, ds.slogdet, ds.matrix_power, ds.cross (and methods)
C.export("inverse", function(A) return M.inv(A, "inverse") end)
C.export("det", function(A) return M.det(A, "det") end)
C.export("slogdet", function(A) return M.slogdet(A, "slogdet") end)
C.export("logdet", function(A)
  local sign, logabs = M.slogdet(A, "logdet")
  return F.where(sign:lt(0), F.full({}, 0 / 0, { dtype = A.dtype }), logabs)
end)
C.export("matrix_power", function(A, k) return M.matrix_power(A, k, "matrix_power") end)
C.export("cross", function(a, b, dim) return M.cross("cross", a, b, dim) end)

return M
