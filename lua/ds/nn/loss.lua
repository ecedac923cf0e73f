-- nn/loss.lua: the losses as modules (PyTorch's names): each takes PyTorch's positional arguments and/or
-- an options table, checks them when constructed and calls its ds.F function; tensor options (weight,
-- pos_weight) are registered as buffers, as in PyTorch.
local Module = require("ds.nn.module")
local F = require("ds.nn.functional")
local LOSS_OPTIONS = require("ds.nn.loss_options")
local Tensor = require("ds.tensor")
local errors = require("ds.errors")
local constructor_args = require("ds.nn.constructor_args")

local M = {}

-- PyTorch 1.13's deprecated constructor arguments: a value there is refused (ds takes reduction only)
local REDUCTION_ONLY = 'deprecated there and not taken here: give {reduction = "mean"|"sum"|"none"}'
local DEPRECATED = { size_average = REDUCTION_ONLY, reduce = REDUCTION_ONLY }

-- name -> the F function it calls, its number of tensor inputs and PyTorch 1.13's constructor parameters in
-- order (the positional form: nn.NLLLoss(weight), nn.HuberLoss("sum", 0.5))
local LOSSES = {
  CrossEntropyLoss = { "cross_entropy", 2, { "weight", "size_average", "ignore_index", "reduce", "reduction",
    "label_smoothing" } },
  NLLLoss = { "nll_loss", 2, { "weight", "size_average", "ignore_index", "reduce", "reduction" } },
  NLLLoss2d = { "nll_loss", 2, { "weight", "size_average", "ignore_index", "reduce", "reduction" } }, -- deprecated alias
  MSELoss = { "mse_loss", 2, { "size_average", "reduce", "reduction" } },
  L1Loss = { "l1_loss", 2, { "size_average", "reduce", "reduction" } },
  BCEWithLogitsLoss = { "binary_cross_entropy_with_logits", 2, { "weight", "size_average", "reduce", "reduction",
    "pos_weight" } },
  BCELoss = { "binary_cross_entropy", 2, { "weight", "size_average", "reduce", "reduction" } },
  SmoothL1Loss = { "smooth_l1_loss", 2, { "size_average", "reduce", "reduction", "beta" } },
  HuberLoss = { "huber_loss", 2, { "reduction", "delta" } },
  KLDivLoss = { "kl_div", 2, { "size_average", "reduce", "reduction", "log_target" } },
  MarginRankingLoss = { "margin_ranking_loss", 3, { "margin", "size_average", "reduce", "reduction" } },
  TripletMarginLoss = { "triplet_margin_loss", 3, { "margin", "p", "eps", "swap", "size_average", "reduce",
    "reduction" } },
  CosineEmbeddingLoss = { "cosine_embedding_loss", 3, { "margin", "size_average", "reduce", "reduction" } },
  HingeEmbeddingLoss = { "hinge_embedding_loss", 2, { "margin", "size_average", "reduce", "reduction" } },
  SoftMarginLoss = { "soft_margin_loss", 2, { "size_average", "reduce", "reduction" } },
  MultiLabelSoftMarginLoss = { "multilabel_soft_margin_loss", 2, { "weight", "size_average", "reduce",
    "reduction" } },
  MultiMarginLoss = { "multi_margin_loss", 2, { "p", "margin", "weight", "size_average", "reduce", "reduction" } },
  PoissonNLLLoss = { "poisson_nll_loss", 2, { "log_input", "full", "size_average", "eps", "reduce", "reduction" } },
  GaussianNLLLoss = { "gaussian_nll_loss", 3, {} }, -- keyword-only in PyTorch: an options table only
  CTCLoss = { "ctc_loss", 4, { "blank", "reduction", "zero_infinity" } },
  MultiLabelMarginLoss = { "multilabel_margin_loss", 2, { "size_average", "reduce", "reduction" } },
  TripletMarginWithDistanceLoss = { "triplet_margin_with_distance_loss", 3, {} }, -- keyword-only in PyTorch
}

-- the inputs each loss's forward takes, by their count (for the error naming them)
local INPUT_NAMES = { [2] = "input, target", [3] = "three tensors",
  [4] = "log_probs, targets, input_lengths, target_lengths" }

for name, spec in pairs(LOSSES) do
  local fname, ninputs, params = spec[1], spec[2], spec[3]
  local fn = F[fname]
  local cls = Module:extend(name)
  cls._doc = "ds.F." .. fname .. " as a module: nn." .. name .. "(" .. table.concat(params, ", ")
    .. ") positionally as PyTorch's (size_average and reduce refused) and/or an options table; "
    .. "tensor options become buffers"
  function cls:init(...)
    local o = {}
    for k, v in pairs(constructor_args.merge(name, params, LOSS_OPTIONS[fname], DEPRECATED, ...)) do
      if Tensor.is_tensor(v) then self:register_buffer(k, v) else o[k] = v end
    end
    self.opts = o
  end
  -- the options with the buffers' current tensors (they follow :to(dtype) and load_state_dict)
  function cls:forward(...)
    local o = {}
    for k, v in pairs(self.opts) do o[k] = v end
    for _, k in ipairs { "weight", "pos_weight" } do o[k] = rawget(self, k) end
    local args = { ... }
    if select("#", ...) > ninputs and args[ninputs + 1] ~= nil then
      errors.raise(string.format("%s: takes %d inputs (%s), got more", name, ninputs, INPUT_NAMES[ninputs]))
    end
    args[ninputs + 1] = o
    return fn(unpack(args, 1, ninputs + 1))
  end
  function cls:extra_repr()
    local keys, parts = {}, {}
    for k in pairs(self.opts) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. tostring(self.opts[k]) end
    return table.concat(parts, ", ")
  end
  M[name] = cls
end

return M
