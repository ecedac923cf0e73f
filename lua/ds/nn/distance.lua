-- nn/distance.lua: PairwiseDistance and CosineSimilarity (PyTorch's constructors) over ds.F.pairwise_distance /
-- ds.F.cosine_similarity.
local Module = require("ds.nn.module")
local F = require("ds.nn.functional")
local constructor_args = require("ds.nn.constructor_args")

local M = {}

-- PairwiseDistance(p = 2, eps = 1e-6, keepdim = false), positionally or as options
local PairwiseDistance = Module:extend("PairwiseDistance")
PairwiseDistance._doc = "ds.F.pairwise_distance as a module: PairwiseDistance(p, eps, keepdim)"
function PairwiseDistance:init(...)
  local o = constructor_args.merge("PairwiseDistance", { "p", "eps", "keepdim" },
    { p = "number", eps = "number", keepdim = "boolean" }, {}, ...)
  self.p, self.eps, self.keepdim = o.p or 2, o.eps or 1e-6, o.keepdim == true
end
function PairwiseDistance:forward(x1, x2) return F.pairwise_distance(x1, x2, self.p, self.eps, self.keepdim) end
M.PairwiseDistance = PairwiseDistance


-- CosineSimilarity(dim = 2 (PyTorch's 1), eps = 1e-8), positionally or as options
local CosineSimilarity = Module:extend("CosineSimilarity")
CosineSimilarity._doc = "ds.F.cosine_similarity as a module: CosineSimilarity(dim, eps) (dim 2 = PyTorch's 1)"
function CosineSimilarity:init(...)
  local o = constructor_args.merge("CosineSimilarity", { "dim", "eps" }, { dim = "integer", eps = "number" }, {}, ...)
  self.dim, self.eps = o.dim or 2, o.eps or 1e-8
end
function CosineSimilarity:forward(x1, x2) return F.cosine_similarity(x1, x2, self.dim, self.eps) end
M.CosineSimilarity = CosineSimilarity

return M
