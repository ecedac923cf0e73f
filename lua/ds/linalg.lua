-- linalg.lua: the ds.linalg namespace (torch.linalg): norms (ops/linalg_norm.lua), inv/det/slogdet/solve/
-- matrix_power/cross (ops/linalg_solve.lua), cholesky/solve_triangular (ops/linalg_triangular.lua),
-- multi_dot/vecdot (ops/products.lua), and matmul/diagonal.
local F = require("ds.ops")
local options = require("ds.options")
local norm = require("ds.ops.linalg_norm")
local solve = require("ds.ops.linalg_solve")
local products = require("ds.ops.products")
local triangular = require("ds.ops.linalg_triangular")

local M = {
  norm = norm.norm,
  vector_norm = norm.vector_norm,
  matrix_norm = norm.matrix_norm,
  solve = solve.solve,
  matmul = F.matmul,
  diagonal = F.diagonal,
  vecdot = products.vecdot,
  solve_triangular = triangular.solve_triangular,
}

-- cholesky(A (..., n, n), {upper = false}) -> L with A = L L^T (A symmetric positive-definite; its lower triangle)
function M.cholesky(A, opts) return triangular.cholesky(A, opts) end

-- multi_dot({A, B, ...}): the product left to right; a 1-D first operand is a row, a 1-D last one a column
function M.multi_dot(list) return products.multi_dot(list) end

-- inv(A (..., n, n)) -> A^-1 (..., n, n), by Gauss-Jordan elimination with partial pivoting; singular: an error
function M.inv(A) return solve.inv(A) end

-- det(A (..., n, n)) -> (...): the product of the elimination's pivots, signed by its row swaps
function M.det(A) return solve.det(A) end

-- slogdet(A (..., n, n)) -> sign (...), logabsdet (...): det = sign * exp(logabsdet); singular: 0, -inf
function M.slogdet(A) return solve.slogdet(A) end

-- matrix_power(A (..., n, n), k): A^k by repeated squaring; k < 0 inverts first, k = 0 is the identity
function M.matrix_power(A, k) return solve.matrix_power(A, k) end

-- cross(a, b, dim = -1) or cross(a, b, {dim =}): the cross product of 3-vectors along dim (a and b broadcast)
function M.cross(a, b, dim)
  if type(dim) == "table" then dim = options.check(dim, "linalg.cross", { dim = "integer" }).dim end
  return solve.cross("linalg.cross", a, b, dim or -1)
end

return M
