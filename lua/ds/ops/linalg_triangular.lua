-- ops/linalg_triangular.lua: triangular factorization and solves over batches (..., n, n) written with table ops
-- (n unrolled steps of matmul/where, as ops/linalg_solve.lua, so they trace, compile and differentiate):
-- cholesky (linalg.cholesky, torch.cholesky), solve_triangular (linalg.solve_triangular), cholesky_solve.
local C = require("ds.ops.common")
local S = require("ds.shape")
local errors = require("ds.errors")
local options = require("ds.options")
local state = require("ds.state")
local solve = require("ds.ops.linalg_solve")
local F = C.functions

local is_tensor = C.is_tensor

local M = {}

-- the 1-based positions 1..n as an (n, 1) column and a (1, n) row
local function positions(n)
  local p = F.arange(1, n + 1, { dtype = "i64" })
  return p:reshape(n, 1), p:reshape(1, n)
end

-- cholesky(A (..., n, n), {upper = false}) -> L lower triangular with A = L L^T (upper: U = L^T, A = U^T U);
-- A must be symmetric positive-definite (only its lower triangle is read); eagerly an error otherwise
function M.cholesky(A, opts, name)
  name = name or "linalg.cholesky"
  local upper = options.check(opts, name, { upper = "boolean" }).upper
  local n = solve.square(name, A, "A")
  if S.numel(A._shape) == 0 then return A:clone() end
  local rows, cols = positions(n)
  -- the symmetric matrix of A's lower triangle, with PyTorch's symmetric gradient ((G + G^T) / 2): the values
  -- of where(lower, A, A^T) plus (S - S) for S = (A + A^T) / 2, which adds 0 and carries S's gradient
  local sym = (A + A:transpose(-1, -2)) * 0.5
  A = F.where(rows:ge(cols), A, A:transpose(-1, -2)):detach() + (sym - sym:detach())
  local L = F.zeros_like(A)
  local diag = {}
  for j = 1, n do
    local row_j = L:narrow(-2, j, 1)                                  -- (..., 1, n): L's row j (columns < j set)
    local col = A:narrow(-1, j, 1) - F.matmul(L, row_j:transpose(-1, -2)) -- (..., n, 1)
    local dd = col:narrow(-2, j, 1)                                   -- (..., 1, 1)
    diag[j] = dd
    local d = F.sqrt(dd)
    local new = F.where(rows:gt(j), col / d, F.where(rows:eq(j), d, F.zeros({}, { dtype = A.dtype })))
    L = F.where(cols:eq(j), new, L)
  end
  if not state.trace then
    local dd = F.cat(diag, -1)
    local bad = F.logical_not(dd:gt(0))
    if bad:any():item() then
      local k = bad:reshape(-1, n):any(1):astype("i64"):argmax():item()
      errors.raise(string.format("%s: the input is not positive-definite (the leading minor of order %d is not "
        .. "positive-definite)", name, k))
    end
  end
  return upper and L:transpose(-1, -2) or L
end

-- X with A X = B for triangular A (..., n, n) and B (..., n, k) by substitution, row by row
local function substitute(A, B, upper, unit)
  local n = A._shape[#A._shape]
  local batch = S.broadcast(S.reduced(A._shape, { #A._shape - 1, #A._shape }, false),
    S.reduced(B._shape, { #B._shape - 1, #B._shape }, false), "solve_triangular")
  local sa, sb = {}, {}
  for i, s in ipairs(batch) do sa[i] = s; sb[i] = s end
  sa[#sa + 1] = n; sa[#sa + 1] = n
  sb[#sb + 1] = n; sb[#sb + 1] = B._shape[#B._shape]
  A, B = A:expand(sa), B:expand(sb)
  local rows = positions(n)
  local X = F.zeros_like(B)
  for step = 1, n do
    local i = upper and n + 1 - step or step
    local a = A:narrow(-2, i, 1)                                      -- (..., 1, n)
    local r = B:narrow(-2, i, 1) - F.matmul(a, X)                     -- X's rows not yet solved are 0
    if not unit then r = r / a:narrow(-1, i, 1) end
    X = F.where(rows:eq(i), r, X)
  end
  return X
end

-- solve_triangular(A (..., n, n), B, {upper (required), left = true, unitriangular = false}) -> X with A X = B
-- (left = false: X A = B); only A's upper or lower triangle is read (its diagonal taken as 1 with unitriangular)
function M.solve_triangular(A, B, opts)
  local name = "linalg.solve_triangular"
  local o = options.check(opts, name, { upper = "boolean", left = "boolean", unitriangular = "boolean" })
  if o.upper == nil then errors.raise(name .. ": the option upper (true or false) is required, as PyTorch's") end
  local n = solve.square(name, A, "A")
  if not is_tensor(B) or #B._shape < 2 then
    errors.raise(name .. ": B must be a matrix (..., n, k), got " .. (is_tensor(B) and S.str(B._shape) or type(B)))
  end
  if B.dtype ~= A.dtype then errors.raise(string.format("%s: A is %s and B is %s (they must agree)", name, A.dtype, B.dtype)) end
  local upper, unit = o.upper, o.unitriangular == true
  local tri = upper and F.triu(A) or F.tril(A)
  if o.left == false then
    return substitute(tri:transpose(-1, -2), B:transpose(-1, -2), not upper, unit):transpose(-1, -2)
  end
  if not S.same(B._shape[#B._shape - 1], n) then
    errors.raise(string.format("%s: B %s does not fit A %s (B needs %s rows)", name, S.str(B._shape), S.str(A._shape),
      tostring(n)))
  end
  if n == 0 or S.numel(B._shape) == 0 then return B:clone() end
  return substitute(tri, B, upper, unit)
end

-- cholesky_solve(B (..., n, k), L (..., n, n), upper = false): X with (L L^T) X = B (upper: (U^T U) X = B).
-- The values are two triangular solves (reading L's triangle); the gradient is PyTorch's, that of
-- solve(L L^T, B) in the whole of L: the values plus (Y - Y) for Y that solve, which adds 0
C.export("cholesky_solve", function(B, L, upper)
  if type(upper) == "table" then upper = options.check(upper, "cholesky_solve", { upper = "boolean" }).upper end
  if not is_tensor(B) then errors.raise("cholesky_solve: B must be a tensor, got " .. type(B)) end
  solve.square("cholesky_solve", L, "L")
  local lower = upper and L:transpose(-1, -2) or L
  local y = M.solve_triangular(lower:detach(), B:detach(), { upper = false })
  local x = M.solve_triangular(lower:transpose(-1, -2):detach(), y, { upper = true })
  if not (L.requires_grad or B.requires_grad) then return x end
  local full = solve.solve(F.matmul(lower, lower:transpose(-1, -2)), B)
  return x + (full - full:detach())
end)

-- torch.cholesky(A, upper = false): linalg.cholesky with upper positional
C.export("cholesky", function(A, upper)
  if type(upper) == "table" then return M.cholesky(A, upper, "cholesky") end
  return M.cholesky(A, { upper = upper }, "cholesky")
end)

return M
