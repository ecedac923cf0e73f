-- linalg.lua: the ds.linalg namespace (torch.linalg): norms (ops/linalg_norm.lua), inv/det/slogdet/solve/
-- matrix_power/cross (ops/linalg_solve.lua), and matmul/diagonal, which torch.linalg also names.
local F = require("ds.ops")
local options = require("ds.options")
local norm = require("ds.ops.linalg_norm")
local solve = require("ds.ops.linalg_solve")

local M = {
  norm = norm.norm,
  vector_norm = norm.vector_norm,
  matrix_norm = norm.matrix_norm,
  inv = function(A) return solve.inv(A) end,
  det = function(A) return solve.det(A) end,
  slogdet = function(A) return solve.slogdet(A) end,
  solve = solve.solve,
  matrix_power = function(A, n) return solve.matrix_power(A, n) end,
  matmul = F.matmul,
  diagonal = F.diagonal,
}
-- cross(a, b, dim = -1) or cross(a, b, {dim =}): the cross product of 3-vectors along dim (a and b broadcast)
function M.cross(a, b, dim)
  if type(dim) == "table" then dim = options.check(dim, "linalg.cross", { dim = "integer" }).dim end
  return solve.cross("linalg.cross", a, b, dim or -1)
end

return M
