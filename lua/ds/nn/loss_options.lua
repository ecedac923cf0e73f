-- nn/loss_options.lua: the options of each loss (key -> kind, as ds.options checks them), shared by the
-- ds.F loss functions and the loss modules of nn/loss.lua (which check them when constructed).
local REDUCTION = { "mean", "sum", "none" }

return {
  cross_entropy = { reduction = REDUCTION, weight = "tensor", ignore_index = "integer",
    label_smoothing = { "number", min = 0, max = 1 } },
  nll_loss = { reduction = REDUCTION, weight = "tensor", ignore_index = "integer" },
  mse_loss = { reduction = REDUCTION },
  l1_loss = { reduction = REDUCTION },
  smooth_l1_loss = { reduction = REDUCTION, beta = { "number", min = 0 } },
  huber_loss = { reduction = REDUCTION, delta = { "number", min = 0 } },
  kl_div = { reduction = { "mean", "batchmean", "sum", "none" }, log_target = "boolean" },
  margin_ranking_loss = { reduction = REDUCTION, margin = "number" },
  binary_cross_entropy_with_logits = { reduction = REDUCTION, weight = "tensor", pos_weight = "tensor" },
  binary_cross_entropy = { reduction = REDUCTION, weight = "tensor" },
  triplet_margin_loss = { reduction = REDUCTION, margin = "number", p = { "number", min = 0 },
    eps = { "number", min = 0 }, swap = "boolean" },
  triplet_margin_with_distance_loss = { reduction = REDUCTION, margin = "number", swap = "boolean",
    distance_function = "function" },
  multilabel_margin_loss = { reduction = REDUCTION },
  cosine_embedding_loss = { reduction = REDUCTION, margin = "number" },
  hinge_embedding_loss = { reduction = REDUCTION, margin = "number" },
  soft_margin_loss = { reduction = REDUCTION },
  multilabel_soft_margin_loss = { reduction = REDUCTION, weight = "tensor" },
  multi_margin_loss = { reduction = REDUCTION, p = "integer", margin = "number", weight = "tensor" },
  poisson_nll_loss = { reduction = REDUCTION, log_input = "boolean", full = "boolean", eps = { "number", min = 0 } },
  gaussian_nll_loss = { reduction = REDUCTION, full = "boolean", eps = { "number", min = 0 } },
  ctc_loss = { reduction = REDUCTION, blank = { "integer", min = 1 }, zero_infinity = "boolean" },
}
