-- nn/embedding.lua: Embedding (weight ~ N(0, 1), the padding_idx row zero and without gradient).
local Module = require("ds.nn.module")
local options = require("ds.options")
local F = require("ds.nn.functional")
local init = require("ds.nn.init_weights")
local ops = require("ds.ops")
local autograd = require("ds.autograd")
local errors = require("ds.errors")
local Tensor = require("ds.tensor")

local OPTIONS = { padding_idx = "integer", max_norm = "number", norm_type = "number", scale_grad_by_freq = "boolean",
  sparse = "boolean", dtype = "dtype" }
-- ids: (...) i64 1-based -> (..., embedding_dim); opts: padding_idx (1-based, negative from the end), max_norm,
-- norm_type (2), scale_grad_by_freq (as ds.F.embedding), sparse (false only), dtype
local Embedding = Module:extend("Embedding")
function Embedding:init(num_embeddings, embedding_dim, opts)
  if type(num_embeddings) ~= "number" or type(embedding_dim) ~= "number" then
    errors.raise("Embedding: expects Embedding(num_embeddings, embedding_dim, [opts])")
  end
  opts = options.check(opts, "Embedding", OPTIONS)
  if opts.sparse then errors.raise("Embedding: sparse gradients are not implemented (sparse = false)") end
  self.max_norm, self.norm_type, self.scale_grad_by_freq = opts.max_norm, opts.norm_type, opts.scale_grad_by_freq
  local p = opts.padding_idx
  if p ~= nil then
    if p < 0 then p = num_embeddings + 1 + p end
    if p < 1 or p > num_embeddings then
      errors.raise(string.format("Embedding: padding_idx %d out of range for %d embeddings", opts.padding_idx,
        num_embeddings))
    end
  end
  self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, p
  local w = init.normal_(ops.empty(num_embeddings, embedding_dim, { dtype = opts.dtype or "f32" }))
  if p then autograd.no_grad(function() w:select(1, p):fill_(0) end) end
  self.weight = Module.Parameter(w)
end
-- Embedding.from_pretrained(weight (V, D), opts): the given rows as the weight; opts.freeze (true:
-- the weight gets no gradient), padding_idx (1-based; its row is used as given, as in PyTorch), and the
-- constructor's max_norm, norm_type, scale_grad_by_freq, sparse
function Embedding.from_pretrained(weight, opts)
  if not Tensor.is_tensor(weight) or weight:dim() ~= 2 then
    errors.raise("Embedding.from_pretrained: weight must be a 2-d tensor (num_embeddings, embedding_dim)")
  end
  local spec = { freeze = "boolean" }
  for k, kind in pairs(OPTIONS) do if k ~= "dtype" then spec[k] = kind end end
  opts = options.check(opts, "Embedding.from_pretrained", spec)
  local o = { dtype = weight.dtype }
  for k in pairs(OPTIONS) do if k ~= "dtype" then o[k] = opts[k] end end
  local e = Embedding(weight._shape[1], weight._shape[2], o)
  e.weight = Module.Parameter(weight:detach():clone(), opts.freeze == false)
  return e
end
function Embedding:forward(ids)
  return F.embedding(ids, self.weight, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq)
end
function Embedding:extra_repr()
  local s = string.format("%d, %d", self.num_embeddings, self.embedding_dim)
  if self.padding_idx then s = s .. ", padding_idx=" .. self.padding_idx end
  return s
end

return { Embedding = Embedding }
