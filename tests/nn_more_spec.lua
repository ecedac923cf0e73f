-- tests/nn_more_spec.lua: the remaining nn calls of issue 28 (losses with CTC, the shrink family, unfold/fold,
-- conv3d and the transposed 1-D/3-D convolutions, nn.Transformer.generate_square_subsequent_mask) against
-- PyTorch's values and gradients (tests/fixtures/nn_more.json from tests/gen_nn_more_fixtures.py): each case
-- eagerly, traced and compiled (both equal to eager bit for bit), its gradient against PyTorch's and a
-- finite-difference gradcheck; then the modules (PyTorch's constructors) and the refusals.
local ds = require("ds")
local H = require("helpers")
local FC = require("fixture_cases")
local F, nn = ds.F, ds.nn

local fixture = H.fixture("nn_more.json")
local fx = fixture.cases

local T, check = FC.T, FC.check

-- nn.Conv3d's padding modes: the module with the fixture's weight and bias
local function padded_conv3d(mode)
  return function(x, w, b)
    local m = nn.Conv3d(4, 6, { 3, 2, 3 }, { padding = { 1, 2, 1 }, padding_mode = mode, groups = 2, dtype = "f64" })
    m.weight, m.bias = w, b
    return m(x)
  end
end

-- nn.Conv2d's / nn.Conv1d's padding modes: the module with the fixture's weight and bias
local function padded_conv2d(mode, padding)
  return function(x, w, b)
    local m = nn.Conv2d(4, 6, { 2, 3 }, { padding = padding, padding_mode = mode, groups = 2, dtype = "f64" })
    m.weight, m.bias = w, b
    return m(x)
  end
end
local function circular_conv1d(x, w, b)
  local m = nn.Conv1d(4, 2, 3, { padding = 2, padding_mode = "circular", stride = 2, dtype = "f64" })
  m.weight, m.bias = w, b
  return m(x)
end

-- case name -> {fn, eager = true (lengths read as values: not traced), nogc = true (PyTorch's gradient is not
-- the derivative: CTC in log_probs)}
local CASES = {
  pairwise_distance = { function(a, b) return F.pairwise_distance(a, b) end },
  pairwise_distance_p1_keepdim = { function(a, b) return F.pairwise_distance(a, b, 1, 1e-3, true) end },
  triplet_margin_loss = { function(a, p, n) return F.triplet_margin_loss(a, p, n) end },
  triplet_margin_loss_p1_swap_none = { function(a, p, n)
    return F.triplet_margin_loss(a, p, n, { margin = 0.5, p = 1, swap = true, reduction = "none" })
  end },
  triplet_margin_loss_p3_eps_sum = { function(a, p, n)
    return F.triplet_margin_loss(a, p, n, { margin = 2, p = 3, eps = 1e-3, reduction = "sum" })
  end },
  triplet_margin_loss_unbatched = { function(a, p, n) return F.triplet_margin_loss(a, p, n, { margin = 3 }) end },
  triplet_margin_loss_f32 = { function(a, p, n) return F.triplet_margin_loss(a, p, n, { margin = 2 }) end },
  cosine_embedding_loss = { function(a, b, y) return F.cosine_embedding_loss(a, b, y) end },
  cosine_embedding_loss_margin_none = { function(a, b, y)
    return F.cosine_embedding_loss(a, b, y, { margin = -0.2, reduction = "none" })
  end },
  cosine_embedding_loss_unbatched_sum = { function(a, b, y)
    return F.cosine_embedding_loss(a, b, y, { reduction = "sum" })
  end },
  hinge_embedding_loss = { function(x, y) return F.hinge_embedding_loss(x, y) end },
  hinge_embedding_loss_margin_sum = { function(x, y)
    return F.hinge_embedding_loss(x, y, { margin = 0.5, reduction = "sum" })
  end },
  soft_margin_loss = { function(x, y) return F.soft_margin_loss(x, y) end },
  soft_margin_loss_none = { function(x, y) return F.soft_margin_loss(x, y, { reduction = "none" }) end },
  multilabel_soft_margin_loss = { function(x, y) return F.multilabel_soft_margin_loss(x, y) end },
  multilabel_soft_margin_loss_weight_none = { function(x, y, w)
    return F.multilabel_soft_margin_loss(x, y, { weight = w, reduction = "none" })
  end },
  multilabel_soft_margin_loss_unbatched = { function(x, y) return F.multilabel_soft_margin_loss(x, y) end },
  multi_margin_loss = { function(x, t) return F.multi_margin_loss(x, t) end },
  multi_margin_loss_p2_weight_none = { function(x, t, w)
    return F.multi_margin_loss(x, t, { p = 2, margin = 0.7, weight = w, reduction = "none" })
  end },
  multi_margin_loss_unbatched_sum = { function(x, t) return F.multi_margin_loss(x, t, { reduction = "sum" }) end },
  multilabel_margin_loss = { function(x, t) return F.multilabel_margin_loss(x, t) end },
  multilabel_margin_loss_none = { function(x, t) return F.multilabel_margin_loss(x, t, { reduction = "none" }) end },
  multilabel_margin_loss_unbatched_sum = { function(x, t)
    return F.multilabel_margin_loss(x, t, { reduction = "sum" })
  end },
  triplet_margin_with_distance_loss = { function(a, p, n) return F.triplet_margin_with_distance_loss(a, p, n) end },
  triplet_margin_with_distance_loss_l1_swap_none = { function(a, p, n)
    local l1 = function(u, v) return (u - v):abs():sum(-1) end
    return F.triplet_margin_with_distance_loss(a, p, n, { distance_function = l1, margin = 2.5, swap = true,
      reduction = "none" })
  end },
  poisson_nll_loss = { function(x, y) return F.poisson_nll_loss(x, y) end },
  poisson_nll_loss_full_none = { function(x, y)
    return F.poisson_nll_loss(x, y, { full = true, reduction = "none" })
  end },
  poisson_nll_loss_linear_full_sum = { function(x, y)
    return F.poisson_nll_loss(x, y, { log_input = false, full = true, eps = 1e-4, reduction = "sum" })
  end },
  gaussian_nll_loss = { function(x, y, v) return F.gaussian_nll_loss(x, y, v) end },
  gaussian_nll_loss_homoscedastic_full = { function(x, y, v)
    return F.gaussian_nll_loss(x, y, v, { full = true, reduction = "sum" })
  end },
  gaussian_nll_loss_var_last1_eps_none = { function(x, y, v)
    return F.gaussian_nll_loss(x, y, v, { eps = 0.5, reduction = "none" })
  end },
  margin_ranking_loss = { function(a, b, y) return F.margin_ranking_loss(a, b, y, { margin = 0.3 }) end },
  margin_ranking_loss_none = { function(a, b, y) return F.margin_ranking_loss(a, b, y, { reduction = "none" }) end },
  kl_div_batchmean = { function(a, b) return F.kl_div(a, b, { reduction = "batchmean" }) end },
  kl_div_log_target_sum = { function(a, b) return F.kl_div(a, b, { reduction = "sum", log_target = true }) end },
  kl_div_zero_target_none = { function(a, b) return F.kl_div(a, b, { reduction = "none" }) end },
  huber_loss_delta = { function(a, b) return F.huber_loss(a, b, { delta = 0.7 }) end },
  huber_loss_none = { function(a, b) return F.huber_loss(a, b, { reduction = "none" }) end },
  smooth_l1_loss_beta = { function(a, b) return F.smooth_l1_loss(a, b, { beta = 0.5, reduction = "sum" }) end },
  smooth_l1_loss_beta0 = { function(a, b) return F.smooth_l1_loss(a, b, { beta = 0 }) end },
  threshold = { function(x) return F.threshold(x, 0.2, -3) end },
  softmin_dim0 = { function(x) return F.softmin(x, 1) end },
  ctc_loss = { function(lp, t, il, tl) return F.ctc_loss(lp, t, il, tl) end, nogc = true },
  ctc_loss_sum = { function(lp, t, il, tl) return F.ctc_loss(lp, t, il, tl, { reduction = "sum" }) end, nogc = true },
  ctc_loss_none_f32 = { function(lp, t, il, tl) return F.ctc_loss(lp, t, il, tl, { reduction = "none" }) end },
  ctc_loss_logits = { function(x, t, il, tl) return F.ctc_loss(x:log_softmax(3), t, il, tl) end },
  -- PyTorch's blank C - 1 is ds's C
  ctc_loss_repeats_blank_last = { function(lp, t, il, tl)
    return F.ctc_loss(lp, t, il, tl, { blank = 5, reduction = "none" })
  end, nogc = true },
  ctc_loss_concatenated = { function(lp, t)
    return F.ctc_loss(lp, t, { 7, 7, 6 }, { 1, 3, 2 }, { reduction = "sum" })
  end, nogc = true },
  ctc_loss_zero_infinity = { function(lp, t, il, tl)
    return F.ctc_loss(lp, t, il, tl, { reduction = "none", zero_infinity = true })
  end, nogc = true },
  ctc_loss_blank_in_target = { function(lp, t, il, tl)
    return F.ctc_loss(lp, t, il, tl, { blank = 3, reduction = "none" })
  end },
  ctc_loss_unbatched = { function(lp, t, il, tl) return F.ctc_loss(lp, t, il, tl) end, nogc = true },
  softshrink = { function(x) return F.softshrink(x) end },
  softshrink_lambd = { function(x) return F.softshrink(x, 1) end },
  hardshrink = { function(x) return F.hardshrink(x) end },
  hardshrink_lambd = { function(x) return F.hardshrink(x, 0.2) end },
  tanhshrink = { function(x) return F.tanhshrink(x) end },
  softshrink_f32 = { function(x) return F.softshrink(x, 0.3) end },
  unfold = { function(x) return F.unfold(x, 2) end },
  unfold_options = { function(x)
    return F.unfold(x, { 2, 3 }, { dilation = { 2, 1 }, padding = 1, stride = { 2, 1 } })
  end },
  unfold_unbatched = { function(x) return F.unfold(x, 3, { stride = 2 }) end },
  fold = { function(x) return F.fold(x, { 5, 6 }, 2) end },
  fold_options = { function(x)
    return F.fold(x, { 5, 6 }, { 2, 3 }, { dilation = { 2, 1 }, padding = 1, stride = { 2, 1 } })
  end },
  fold_unbatched = { function(x) return F.fold(x, 5, 3, { stride = 2, padding = 1 }) end },
  fold_f32 = { function(x) return F.fold(x, { 5, 6 }, 2) end },
  conv3d = { function(x, w) return F.conv3d(x, w:narrow(3, 1, 2)) end },
  conv3d_options = { function(x, w, b)
    return F.conv3d(x, w, b, { stride = { 2, 1, 2 }, padding = { 1, 0, 2 }, dilation = { 1, 2, 1 }, groups = 2 })
  end },
  conv3d_same = { function(x, w, b) return F.conv3d(x, w, b, { padding = "same", groups = 2 }) end },
  conv3d_unbatched = { function(x, w) return F.conv3d(x, w, nil, { stride = 2 }) end },
  conv3d_f32 = { function(x, w, b) return F.conv3d(x, w, b, { padding = 1 }) end },
  conv_transpose1d = { function(x, w) return F.conv_transpose1d(x, w) end },
  conv_transpose1d_options = { function(x, w, b)
    return F.conv_transpose1d(x, w, b, { stride = 3, padding = 2, output_padding = 1, groups = 2, dilation = 2 })
  end },
  conv_transpose1d_unbatched = { function(x, w) return F.conv_transpose1d(x, w, nil, { stride = 2 }) end },
  conv_transpose1d_outpad_dilation = { function(x, w, b)
    return F.conv_transpose1d(x, w, b, { stride = 1, padding = 2, output_padding = 2, dilation = 3 })
  end },
  conv_transpose2d_outpad_dilation = { function(x, w, b)
    return F.conv_transpose2d(x, w, b, { stride = { 1, 2 }, padding = { 0, 1 }, output_padding = { 2, 1 },
      dilation = { 3, 2 }, groups = 2 })
  end },
  conv_transpose3d = { function(x, w) return F.conv_transpose3d(x, w) end },
  conv_transpose3d_options = { function(x, w, b)
    return F.conv_transpose3d(x, w, b, { stride = { 2, 1, 3 }, padding = { 1, 0, 2 }, output_padding = { 1, 0, 2 },
      groups = 2, dilation = { 1, 2, 1 } })
  end },
  conv_transpose3d_unbatched_f32 = { function(x, w, b) return F.conv_transpose3d(x, w, b, { stride = 2 }) end },
  conv3d_padding_reflect = { padded_conv3d("reflect") },
  conv3d_padding_replicate = { padded_conv3d("replicate") },
  conv3d_padding_circular = { padded_conv3d("circular") },
  conv2d_same_even = { function(x, w, b)
    return F.conv2d(x, w, b, { padding = "same", dilation = { 1, 3 }, groups = 2 })
  end },
  conv1d_same_even = { function(x, w) return F.conv1d(x, w, nil, { padding = "same", dilation = 3 }) end },
  conv2d_padding_reflect = { padded_conv2d("reflect", { 1, 2 }) },
  conv2d_padding_replicate = { padded_conv2d("replicate", { 1, 2 }) },
  conv2d_padding_circular = { padded_conv2d("circular", { 1, 2 }) },
  conv2d_padding_reflect_same = { padded_conv2d("reflect", "same") },
  conv1d_padding_circular = { circular_conv1d },
  max_pool3d = { function(x) return F.max_pool3d(x, { 2, 3, 2 }, { stride = { 1, 2, 2 }, padding = { 1, 1, 0 } }) end },
  max_pool3d_ceil_unbatched = { function(x) return F.max_pool3d(x, 2, { ceil_mode = true }) end },
  avg_pool3d = { function(x) return F.avg_pool3d(x, { 3, 2, 2 }, { stride = 2, padding = { 1, 1, 0 } }) end },
  avg_pool3d_ceil_exclude_pad = { function(x)
    return F.avg_pool3d(x, 3, { stride = { 2, 2, 1 }, padding = 1, ceil_mode = true, count_include_pad = false })
  end },
  max_pool3d_dilation = { function(x)
    return F.max_pool3d(x, { 2, 2, 1 }, { stride = { 1, 2, 1 }, padding = { 1, 0, 0 }, dilation = { 2, 1, 3 } })
  end },
  avg_pool3d_divisor_override_ceil = { function(x)
    return F.avg_pool3d(x, 2, { stride = 2, ceil_mode = true, divisor_override = 3 })
  end },
  max_pool2d_dilation = { function(x)
    return F.max_pool2d(x, { 2, 3 }, { stride = { 1, 2 }, padding = 1, dilation = { 3, 2 } })
  end },
  max_pool2d_dilation_ceil_unbatched = { function(x)
    return F.max_pool2d(x, 2, { stride = 2, dilation = 2, ceil_mode = true })
  end },
  avg_pool2d_divisor_override = { function(x)
    return F.avg_pool2d(x, 3, { stride = 2, padding = 1, divisor_override = 4 })
  end },
  max_pool1d_dilation = { function(x) return F.max_pool1d(x, 3, { stride = 1, padding = 1, dilation = 2 }) end },
  adaptive_avg_pool3d = { function(x) return F.adaptive_avg_pool3d(x, { 2, 4, 3 }) end },
  adaptive_max_pool3d_unbatched = { function(x) return F.adaptive_max_pool3d(x, 3) end },
  interpolate_bicubic = { function(x) return F.interpolate(x, { size = { 7, 3 }, mode = "bicubic" }) end },
  interpolate_bicubic_align_corners_scale = { function(x)
    return F.interpolate(x, { scale_factor = { 1.5, 2 }, mode = "bicubic", align_corners = true })
  end },
  interpolate_area_3d = { function(x) return F.interpolate(x, { size = { 2, 3, 5 }, mode = "area" }) end },
  interpolate_area_1d_scale = { function(x) return F.interpolate(x, { scale_factor = 0.5, mode = "area" }) end },
  interpolate_nearest_exact = { function(x) return F.interpolate(x, { size = { 8, 3 }, mode = "nearest-exact" }) end },
  interpolate_recompute_scale_factor = { function(x)
    return F.interpolate(x, { scale_factor = 1.7, mode = "bilinear", recompute_scale_factor = true })
  end },
  bilinear = { function(a, b, w, c) return F.bilinear(a, b, w, c) end },
  bilinear_batched_no_bias = { function(a, b, w) return F.bilinear(a, b, w) end },
  channel_shuffle = { function(x) return F.channel_shuffle(x, 2) end },
  local_response_norm = { function(x) return F.local_response_norm(x, 3, 1e-2, 0.7, 2) end },
  local_response_norm_3d_even = { function(x) return F.local_response_norm(x, 4) end },
  lp_pool2d = { function(x) return F.lp_pool2d(x, 2, { 2, 3 }, { stride = 1 }) end },
  lp_pool2d_p3_ceil = { function(x) return F.lp_pool2d(x:abs() + 0.1, 3, 2, { ceil_mode = true }) end },
  lp_pool1d = { function(x) return F.lp_pool1d(x:abs() + 0.1, 1.5, 2, { stride = 1 }) end },
  rrelu_eval = { function(x) return F.rrelu(x, 0.1, 0.3) end },
  batch_norm3d_train = { function(x)
    local m = nn.BatchNorm3d(3, { momentum = 0.3, dtype = "f64" })
    return m(x), m.running_mean, m.running_var
  end, eager = true },
  instance_norm_3d = { function(x, w, b)
    local m = nn.InstanceNorm3d(3, { affine = true, eps = 1e-3, dtype = "f64" })
    m.weight, m.bias = w, b
    return m(x)
  end },
  max_unpool2d = { function(y, i) return F.max_unpool2d(y, i, 2) end },
  max_unpool2d_output_size = { function(y, i) return F.max_unpool2d(y, i, 2, { output_size = { 7, 9 } }) end },
  max_unpool1d_overlap = { function(y, i) return F.max_unpool1d(y, i, 3, { stride = 2, padding = 1 }) end,
    nogc = true },
  max_unpool3d_unbatched = { function(y, i) return F.max_unpool3d(y, i, 2) end },
  affine_grid = { function(t) return F.affine_grid(t, { 2, 3, 4, 5 }) end },
  affine_grid_align_corners = { function(t) return F.affine_grid(t, { 2, 3, 4, 5 }, true) end },
  grid_sample = { function(x, g) return F.grid_sample(x, g) end },
  grid_sample_border_align = { function(x, g)
    return F.grid_sample(x, g, { padding_mode = "border", align_corners = true })
  end },
  grid_sample_reflection = { function(x, g) return F.grid_sample(x, g, { padding_mode = "reflection" }) end },
  -- nearest: piecewise constant in the grid (finite differences meet the jumps)
  grid_sample_nearest = { function(x, g) return F.grid_sample(x, g, { mode = "nearest" }) end, nogc = true },
  pdist = { function(x) return F.pdist(x) end },
  pdist_p1 = { function(x) return F.pdist(x, 1) end },
  max_pool2d_with_indices = { function(x) return F.max_pool2d_with_indices(x, 2, { stride = 2 }) end },
  upsample_bilinear = { function(x) return F.upsample_bilinear(x, nil, 2) end },
  upsample_nearest = { function(x) return F.upsample_nearest(x, { 7, 9 }) end },
  embedding_max_norm = { function(w, ids)
    local copy = w:clone()
    return F.embedding(ids, copy, nil, 1.5, 3), copy
  end, eager = true },
  -- scale_grad_by_freq: PyTorch's gradient is divided by the counts, not the derivative (no gradcheck)
  embedding_scale_grad_by_freq = { function(w, ids) return F.embedding(ids, w, nil, nil, nil, true) end, nogc = true },
  adaptive_max_pool2d_indices = { function(x) return F.adaptive_max_pool2d(x, { 3, 4 }, true) end },
  adaptive_max_pool1d_indices = { function(x) return F.adaptive_max_pool1d(x, 4, true) end },
  fractional_max_pool2d = { function(x, s)
    return F.fractional_max_pool2d(x, { 2, 3 }, { output_size = { 4, 5 }, return_indices = true, _random_samples = s })
  end },
  fractional_max_pool2d_ratio = { function(x, s)
    return F.fractional_max_pool2d(x, 2, { output_ratio = 0.5, _random_samples = s })
  end },
  fractional_max_pool3d = { function(x, s)
    return F.fractional_max_pool3d(x, 2, { output_size = { 2, 3, 2 }, _random_samples = s })
  end },
  square_subsequent_mask = { function() return nn.Transformer.generate_square_subsequent_mask(5) end },
}

describe("nn calls of issue 28: values, traced, compiled, gradients", function()
  it("every fixture case has a call and every call a fixture", FC.coverage(fx, CASES))
  for name, run in FC.cases(fx, CASES, { compiled_grads = true }) do it(name, run) end
end)

describe("nn calls of issue 28: modules and refusals", function()
  it("the loss modules take PyTorch's constructor arguments and call their ds.F function", function()
    local a, p, n = ds.randn(4, 3), ds.randn(4, 3), ds.randn(4, 3)
    assert(H.bitwise(nn.TripletMarginLoss(0.5, 1, 1e-6, true)(a, p, n),
      F.triplet_margin_loss(a, p, n, { margin = 0.5, p = 1, swap = true })))
    local y = ds.tensor({ 1, -1, 1, -1 })
    assert(H.bitwise(nn.CosineEmbeddingLoss(0.1, nil, nil, "sum")(a, p, y),
      F.cosine_embedding_loss(a, p, y, { margin = 0.1, reduction = "sum" })))
    assert(H.bitwise(nn.HingeEmbeddingLoss({ margin = 2 })(a, a:sign()),
      F.hinge_embedding_loss(a, a:sign(), { margin = 2 })))
    assert(H.bitwise(nn.SoftMarginLoss()(a, a:sign()), F.soft_margin_loss(a, a:sign())))
    local w = ds.tensor({ 1, 2, 3 })
    local t01 = a:gt(0):astype("f32")
    local m = nn.MultiLabelSoftMarginLoss(w)
    assert(H.bitwise(m(a, t01), F.multilabel_soft_margin_loss(a, t01, { weight = w })))
    assert.equal(w, m.weight) -- a buffer, as PyTorch's
    local cls = ds.tensor({ 1, 3, 2, 2 }, { dtype = "i64" })
    assert(H.bitwise(nn.MultiMarginLoss(2, 0.5, w)(a, cls),
      F.multi_margin_loss(a, cls, { p = 2, margin = 0.5, weight = w })))
    assert(H.bitwise(nn.PoissonNLLLoss(false, true, nil, 1e-3)(a:exp(), t01),
      F.poisson_nll_loss(a:exp(), t01, { log_input = false, full = true, eps = 1e-3 })))
    local var = p:abs()
    assert(H.bitwise(nn.GaussianNLLLoss({ full = true })(a, n, var), F.gaussian_nll_loss(a, n, var, { full = true })))
    H.raises(function() nn.GaussianNLLLoss(true) end, "GaussianNLLLoss", "no positional")
    local lp = ds.randn(6, 2, 4):log_softmax(3)
    local tg = ds.tensor({ { 2, 3 }, { 4, 4 } }, { dtype = "i64" })
    assert(H.bitwise(nn.CTCLoss(1, "sum", true)(lp, tg, { 6, 6 }, { 2, 2 }),
      F.ctc_loss(lp, tg, { 6, 6 }, { 2, 2 }, { reduction = "sum", zero_infinity = true })))
    H.raises(function() nn.CTCLoss()(lp, tg, { 6, 6 }, { 2, 2 }, ds.ones(1)) end, "CTCLoss", "4 inputs")
    H.raises(function() nn.TripletMarginLoss(1, 2, 1e-6, false, true) end, "TripletMarginLoss", "size_average")
    local labels = ds.tensor({ { 3, 1, 0, 2 }, { 2, 0, 0, 0 }, { 1, 2, 3, 4 }, { 4, -1, 1, 1 } }, { dtype = "i64" })
    assert(H.bitwise(nn.MultiLabelMarginLoss(nil, nil, "none")(a:narrow(2, 1, 3):repeat_tensor(1, 2):narrow(2, 1, 4),
      labels), F.multilabel_margin_loss(a:narrow(2, 1, 3):repeat_tensor(1, 2):narrow(2, 1, 4), labels,
      { reduction = "none" })))
    local l1 = function(u, v) return (u - v):abs():sum(-1) end
    assert(H.bitwise(nn.TripletMarginWithDistanceLoss({ distance_function = l1, margin = 0.5 })(a, p, n),
      F.triplet_margin_with_distance_loss(a, p, n, { distance_function = l1, margin = 0.5 })))
    local logp, cl = ds.randn(2, 3, 4, 5):log_softmax(2), ds.randint(1, 4, { 2, 4, 5 })
    assert(H.bitwise(nn.NLLLoss2d(w)(logp, cl), F.nll_loss(logp, cl, { weight = w })))
    local x1, x2 = ds.randn(3, 5), ds.randn(3, 5)
    assert(H.bitwise(nn.PairwiseDistance(1, 0, true)(x1, x2), F.pairwise_distance(x1, x2, 1, 0, true)))
    assert(H.bitwise(nn.CosineSimilarity()(x1, x2), F.cosine_similarity(x1, x2)))
  end)

  it("Shrink modules, Unfold and Fold take PyTorch's constructor arguments", function()
    local x = ds.randn(2, 3, 5, 4)
    assert(H.bitwise(nn.Softshrink(0.2)(x), F.softshrink(x, 0.2)))
    assert(H.bitwise(nn.Hardshrink({ lambd = 0.7 })(x), F.hardshrink(x, 0.7)))
    assert(H.bitwise(nn.Tanhshrink()(x), F.tanhshrink(x)))
    assert(H.bitwise(nn.Softmin(1)(x), F.softmax(-x, 1)))
    H.raises(function() F.softshrink(x, -1) end, "softshrink", "lambd")
    local cols = nn.Unfold({ 2, 3 }, 1, 1, 2)(x)
    assert(H.bitwise(cols, F.unfold(x, { 2, 3 }, { padding = 1, stride = 2 })))
    assert(H.bitwise(nn.Fold({ 5, 4 }, { 2, 3 }, { padding = 1, stride = 2 })(cols),
      F.fold(cols, { 5, 4 }, { 2, 3 }, 1, 1, 2)))
    -- fold(unfold(x)) counts each pixel once per block covering it
    local ones = ds.ones(1, 1, 4, 4)
    local counts = F.fold(F.unfold(ones, 2), 4, 2)
    local want = ds.tensor({ { 1, 2, 2, 1 }, { 2, 4, 4, 2 }, { 2, 4, 4, 2 }, { 1, 2, 2, 1 } })
    assert(H.bitwise(counts, want:reshape(1, 1, 4, 4)))
  end)

  it("Conv3d, ConvTranspose1d and ConvTranspose3d: PyTorch's weight shapes, options and module calls", function()
    local c3 = nn.Conv3d(4, 6, { 3, 2, 1 }, { stride = 2, groups = 2, bias = false })
    assert.same({ 6, 2, 3, 2, 1 }, c3.weight.shape)
    assert.is_nil(c3.bias)
    local x = ds.randn(2, 4, 5, 6, 7)
    assert(H.bitwise(c3(x), F.conv3d(x, c3.weight, nil, { stride = 2, groups = 2 })))
    local t1 = nn.ConvTranspose1d(4, 6, 3, { stride = 2, output_padding = 1, groups = 2 })
    assert.same({ 4, 3, 3 }, t1.weight.shape)
    local s = ds.randn(2, 4, 5)
    assert(H.bitwise(t1(s), F.conv_transpose1d(s, t1.weight, t1.bias, { stride = 2, output_padding = 1, groups = 2 })))
    assert.same({ 2, 6, 12 }, t1(s).shape)
    local t3 = nn.ConvTranspose3d(4, 2, 2, { stride = { 1, 2, 2 } })
    assert.same({ 4, 2, 2, 2, 2 }, t3.weight.shape)
    assert.same({ 2, 2, 6, 12, 14 }, t3(x).shape)
    -- forward(x, output_size): the output_padding that reaches it (PyTorch's range: the stride's sizes)
    local t2 = nn.ConvTranspose2d(2, 3, 3, { stride = 2, padding = 1 })
    local img = ds.randn(1, 2, 4, 5)
    assert.same({ 1, 3, 7, 9 }, t2(img).shape)
    assert(H.bitwise(t2(img, { 8, 10 }), F.conv_transpose2d(img, t2.weight, t2.bias,
      { stride = 2, padding = 1, output_padding = 1 })))
    local t1b = nn.ConvTranspose1d(2, 3, 3, { stride = 3, padding = 1 })
    local s1 = ds.randn(1, 2, 4)
    assert(H.bitwise(t1b(s1, { 1, 3, 12 }), F.conv_transpose1d(s1, t1b.weight, t1b.bias,
      { stride = 3, padding = 1, output_padding = 2 })))
    H.raises(function() t1b(s1, { 13 }) end, "ConvTranspose1d", "output_size", "10 to 12")
    assert.same({ 2, 2, 6, 13, 15 }, t3(x, { 6, 13, 15 }).shape)
    H.raises(function() nn.ConvTranspose2d(2, 3, 3, { padding_mode = "circular" }) end, "ConvTranspose2d",
      "padding_mode")
    H.raises(function() nn.ConvTranspose3d(4, 2, 2, { padding_mode = "reflect" }) end, "ConvTranspose3d", "zeros")
    H.raises(function() nn.Conv3d(4, 6, 3, { padding_mode = "mirror" }) end, "Conv3d", "padding_mode")
    H.raises(function() nn.Conv3d(3, 6, 3, { groups = 2 }) end, "Conv3d", "divisible")
    H.raises(function() F.conv3d(ds.randn(1, 4, 3, 3, 3), ds.randn(2, 3, 1, 1, 1)) end, "conv3d", "does not match")
    H.raises(function() F.conv3d(x, c3.weight, nil, { padding = "same", stride = 2, groups = 2 }) end, "conv3d",
      "stride 1")
  end)

  -- m with the fixture's parameters (PyTorch's names; its layer numbers are 0-based)
  local function load_params(m, tf)
    local params = {}
    for name, p in m:named_parameters() do params[name] = p end
    local n = 0
    ds.no_grad(function()
      for name, e in pairs(tf.params) do
        -- PyTorch's layer numbers are 0-based
        local ds_name = name:gsub("layers%.(%d+)", function(i) return "layers." .. (tonumber(i) + 1) end)
        assert(params[ds_name], "no parameter " .. ds_name)
        params[ds_name]:copy_(T(e))
        n = n + 1
      end
    end)
    local count = 0
    for _ in pairs(params) do count = count + 1 end
    assert.equal(count, n)
  end
  it("MaxPool3d, AvgPool3d, AdaptiveAvgPool3d, AdaptiveMaxPool3d take PyTorch's constructor arguments", function()
    local x = ds.randn(2, 3, 5, 6, 4)
    assert(H.bitwise(nn.MaxPool3d(2, 1, 1, 1, false, true)(x), F.max_pool3d(x, 2, { stride = 1, padding = 1,
      ceil_mode = true })))
    assert(H.bitwise(nn.AvgPool3d({ 3, 2, 2 }, nil, 1, false, false)(x), F.avg_pool3d(x, { 3, 2, 2 },
      { padding = 1, count_include_pad = false })))
    assert(H.bitwise(nn.AdaptiveAvgPool3d({ 2, 3, 2 })(x), F.adaptive_avg_pool3d(x, { 2, 3, 2 })))
    assert(H.bitwise(nn.AdaptiveMaxPool3d(2)(x), F.adaptive_max_pool3d(x, 2)))
    assert(H.bitwise(nn.MaxPool3d(2, 1, 0, 2)(x), F.max_pool3d(x, 2, { stride = 1, dilation = 2 })))
    assert(H.bitwise(nn.AvgPool3d(2, nil, 0, true, true, 3)(x), F.avg_pool3d(x, 2, { ceil_mode = true,
      divisor_override = 3 })))
    local img = ds.randn(2, 3, 7, 6)
    assert(H.bitwise(nn.MaxPool2d(2, { dilation = 2 })(img), F.max_pool2d(img, 2, { dilation = 2 })))
    assert(H.bitwise(nn.AvgPool2d(3, { padding = 1, divisor_override = 2 })(img), F.avg_pool2d(img, 3,
      { padding = 1, divisor_override = 2 })))
    assert(H.bitwise(nn.MaxPool1d(2, 1, 0, 3)(img:select(3, 1)), F.max_pool1d(img:select(3, 1), 2,
      { stride = 1, dilation = 3 })))
    H.raises(function() F.avg_pool2d(img, 2, { divisor_override = 0 }) end, "avg_pool2d", "divisor_override")
    H.raises(function() F.max_pool2d(img, 2, { dilation = 2, return_indices = true }) end, "max_pool2d",
      "return_indices")
    H.raises(function() F.avg_pool1d(img:select(3, 1), 2, { dilation = 2 }) end, "avg_pool1d", "dilation")
    H.raises(function() nn.MaxPool3d(2, 1, 1, 2, true)(x) end, "max_pool3d", "return_indices")
    H.raises(function() nn.AdaptiveMaxPool3d(2, true)(x) end, "adaptive_max_pool3d", "return_indices")
    H.raises(function() nn.AvgPool3d() end, "AvgPool3d", "kernel_size")
  end)

  it("nn.Upsample takes every interpolate mode and recompute_scale_factor", function()
    local img = ds.randn(1, 2, 4, 5)
    for _, mode in ipairs { "bicubic", "area", "nearest-exact" } do
      local o = { scale_factor = 1.5, mode = mode, recompute_scale_factor = true }
      assert(H.bitwise(nn.Upsample(o)(img), F.interpolate(img, o)))
    end
  end)

  it("padding modules, Bilinear, ChannelShuffle, LocalResponseNorm, LPPool, RReLU, Softmax2d, Upsampling*, " ..
    "EmbeddingBag take PyTorch's constructor arguments", function()
    local x = ds.randn(2, 6, 4, 5)
    assert(H.bitwise(nn.ReflectionPad2d({ 1, 2, 0, 1 })(x), F.pad(x, { 1, 2, 0, 1 }, "reflect")))
    assert(H.bitwise(nn.ReplicationPad3d(1)(x), F.pad(x, { 1, 1, 1, 1, 1, 1 }, "replicate")))
    assert(H.bitwise(nn.ConstantPad1d(2, 3.5)(x:select(3, 1)), F.pad(x:select(3, 1), { 2, 2 }, "constant", 3.5)))
    assert(H.bitwise(nn.ZeroPad2d({ 1, 0, 2, 1 })(x), F.pad(x, { 1, 0, 2, 1 })))
    H.raises(function() nn.ReflectionPad1d({ 1, 2, 3 }) end, "ReflectionPad1d", "padding")
    H.raises(function() nn.ConstantPad2d(1) end, "ConstantPad2d", "value")
    H.raises(function() nn.ReflectionPad2d(1)(ds.randn(4, 5)) end, "ReflectionPad2d", "3 or 4 dims")
    H.raises(function() nn.Bilinear() end, "Bilinear", "in1_features")
    local bl = nn.Bilinear(4, 5, 2)
    assert.same({ 2, 4, 5 }, bl.weight.shape)
    local a, b = ds.randn(3, 4), ds.randn(3, 5)
    assert(H.bitwise(bl(a, b), F.bilinear(a, b, bl.weight, bl.bias)))
    assert(bl.weight:abs():max():item() <= 0.5)
    assert(H.bitwise(nn.ChannelShuffle(3)(x), F.channel_shuffle(x, 3)))
    assert(H.bitwise(nn.LocalResponseNorm(3, 1e-3)(x), F.local_response_norm(x, 3, 1e-3)))
    assert(H.bitwise(nn.LPPool2d(2, 2, 1)(x), F.lp_pool2d(x, 2, 2, { stride = 1 })))
    assert(H.bitwise(nn.LPPool1d(2, 3)(x:select(3, 1)), F.lp_pool1d(x:select(3, 1), 2, 3)))
    -- RReLU: slopes uniform in [lower, upper] while training, their mean in eval mode
    local r = nn.RReLU(0.1, 0.3)
    local neg = -ds.ones(20000)
    local slopes = -r(neg)
    assert(slopes:min():item() >= 0.1 and slopes:max():item() <= 0.3 and math.abs(slopes:mean():item() - 0.2) < 0.01)
    r:eval()
    assert(H.close(r(neg), neg * 0.2, 1e-6, 1e-6))
    assert(H.bitwise(nn.Softmax2d()(x), F.softmax(x, 2)))
    assert(H.bitwise(nn.UpsamplingBilinear2d(nil, 2)(x), F.interpolate(x, { scale_factor = 2, mode = "bilinear",
      align_corners = true })))
    assert(H.bitwise(nn.UpsamplingNearest2d({ 5, 7 })(x), F.interpolate(x, { size = { 5, 7 } })))
    local pooled, idx = F.max_pool2d(x, 2, { return_indices = true })
    assert(H.bitwise(nn.MaxUnpool2d(2)(pooled, idx, { 4, 5 }),
      F.max_unpool2d(pooled, idx, 2, { output_size = { 4, 5 } })))
    H.raises(function() F.max_unpool2d(pooled, idx, 2, { output_size = { 9, 9 } }) end, "max_unpool2d", "output_size")
    -- Embedding's max_norm, norm_type, scale_grad_by_freq go to F.embedding (in from_pretrained too)
    local ew = ds.randn(6, 3) * 3
    local e = nn.Embedding.from_pretrained(ew, { max_norm = 1, norm_type = 1, freeze = false })
    local eids = ds.tensor({ 2, 5, 5 }, { dtype = "i64" })
    local copy = ew:clone()
    assert(H.bitwise(e(eids), F.embedding(eids, copy, nil, 1, 1)))
    assert(H.bitwise(e.weight:detach(), copy))
    H.raises(function() nn.Embedding(4, 2, { sparse = true }) end, "Embedding", "sparse")
    H.raises(function() nn.Embedding.from_pretrained(ew, { freez = true }) end, "from_pretrained", "freez")
    local av, ai = nn.AdaptiveMaxPool2d({ 2, 3 }, true)(x)
    local fv, fi = F.adaptive_max_pool2d(x, { 2, 3 }, true)
    assert(H.bitwise(av, fv) and H.bitwise(ai, fi))
    H.raises(function() nn.AdaptiveAvgPool2d(2, true) end, "AdaptiveAvgPool2d", "one argument")
    local samples = ds.rand(2, 6, 2)
    assert(H.bitwise(nn.FractionalMaxPool2d(2, { 2, 3 }, nil, false, samples)(x),
      F.fractional_max_pool2d(x, 2, { output_size = { 2, 3 }, _random_samples = samples })))
    local fy = nn.FractionalMaxPool2d(2, nil, 0.5)(x) -- samples from ds's generator
    assert.same({ 2, 6, 2, 2 }, fy.shape)
    H.raises(function() nn.FractionalMaxPool2d(2) end, "FractionalMaxPool2d", "output_size")
    local eb = nn.EmbeddingBag(10, 3, { mode = "sum" })
    local ids = ds.tensor({ 1, 4, 2, 9, 3 }, { dtype = "i64" })
    local offsets = ds.tensor({ 1, 3 }, { dtype = "i64" })
    assert(H.bitwise(eb(ids, offsets), F.embedding_bag(ids, eb.weight, offsets, { mode = "sum" })))
  end)

  it("gumbel_softmax: soft samples sum to 1, hard ones are one-hot with the soft sample's gradient", function()
    ds.manual_seed(4)
    local logits = ds.tensor({ { 2, 0, -1 } }):expand(4000, 3):contiguous()
    local soft = F.gumbel_softmax(logits, { tau = 0.5 })
    assert(H.close(soft:sum(2), ds.ones(4000), 1e-5, 1e-5))
    local hard = F.gumbel_softmax(logits, 1, true)
    assert(ds.equal(hard:sum(2), ds.ones(4000)) and ds.equal(hard:max(2), ds.ones(4000)))
    -- samples follow softmax(logits): class 1 with probability e^2 / (e^2 + 1 + e^-1) = 0.844
    assert(math.abs(hard:select(2, 1):mean():item() - 0.844) < 0.03)
    local l = ds.randn(3, 5):requires_grad_()
    ds.manual_seed(9)
    local g_hard = ds.grad((F.gumbel_softmax(l, { hard = true }) * ds.arange(1, 6)):sum(), { l })[1]
    ds.manual_seed(9)
    local g_soft = ds.grad((F.gumbel_softmax(l) * ds.arange(1, 6)):sum(), { l })[1]
    assert(H.bitwise(g_hard, g_soft))
  end)

  it("nn.AdaptiveLogSoftmaxWithLoss agrees with PyTorch's (its parameters loaded)", function()
    local e = fixture.adaptive_softmax
    local m = nn.AdaptiveLogSoftmaxWithLoss(8, 20, { 5, 12 }, 2, true, { dtype = "f64" })
    local params = {}
    for name, p in m:named_parameters() do params[name] = p end
    local n = 0
    ds.no_grad(function()
      for name, t in pairs(e.params) do
        -- PyTorch's list indices are 0-based
        local ds_name = name:gsub("%.(%d+)", function(i) return "." .. (tonumber(i) + 1) end)
        assert(params[ds_name], "no parameter " .. ds_name)
        params[ds_name]:copy_(T(t))
        n = n + 1
      end
    end)
    local count = 0
    for _ in pairs(params) do count = count + 1 end
    assert.equal(count, n)
    local x, t = T(e.x):requires_grad_(), T(e.t)
    local output, loss = m(x, t)
    check(output, e.output, "output"); check(loss, e.loss, "loss")
    check(ds.grad(loss, { x })[1], e.grad, "gradient of the loss")
    check(m:log_prob(x), e.log_prob, "log_prob"); check(m:predict(x), e.predict, "predict")
    local compiled = ds.compile(function(a, b) return m(a, b) end, { x, t })
    local co, cl = compiled(x, t)
    assert(H.bitwise(co, output) and H.bitwise(cl, loss))
    H.raises(function() m(x, t + 20) end, "AdaptiveLogSoftmaxWithLoss", "1..20")
    H.raises(function() nn.AdaptiveLogSoftmaxWithLoss(8, 20, { 12, 5 }) end, "AdaptiveLogSoftmaxWithLoss", "cutoffs")
  end)

  it("lazy modules become the full module on their first call, initialized as its constructor does", function()
    local x = ds.randn(2, 3, 6, 6)
    local cases = {
      { nn.LazyLinear, { 5, { bias = false } }, nn.Linear, { 6, 5, { bias = false } } },
      { nn.LazyConv2d, { 4, 3, { padding = 1 } }, nn.Conv2d, { 3, 4, 3, { padding = 1 } } },
      { nn.LazyConvTranspose2d, { 2, 2, { stride = 2 } }, nn.ConvTranspose2d, { 3, 2, 2, { stride = 2 } } },
      { nn.LazyBatchNorm2d, { { momentum = 0.2 } }, nn.BatchNorm2d, { 3, { momentum = 0.2 } } },
      { nn.LazyInstanceNorm2d, { { affine = true } }, nn.InstanceNorm2d, { 3, { affine = true } } },
    }
    for _, c in ipairs(cases) do
      local lazy = c[1](unpack(c[2]))
      assert.equal(0, #lazy:parameters())
      ds.manual_seed(7)
      local y = lazy(x)
      ds.manual_seed(7)
      local full = c[3](unpack(c[4]))
      assert.equal(getmetatable(full), getmetatable(lazy))
      assert(H.bitwise(y, full(x)))
      local a, b = lazy:state_dict(), full:state_dict()
      for k, v in pairs(b) do assert(H.bitwise(a[k], v), k) end
    end
    local l3 = nn.LazyConv3d(2, 1)
    assert.same({ 2, 4, 1, 1, 1 }, (function() l3(ds.randn(4, 2, 3, 3)); return l3.weight.shape end)())
    H.raises(function() nn.LazyLinear(3)(7) end, "LazyLinear", "tensor")
  end)

  it("ParameterDict holds named parameters in insertion order, registered on the module", function()
    local pd = nn.ParameterDict({ { "b", ds.ones(2) }, { "a", ds.zeros(3) } })
    assert.same({ "b", "a" }, pd:keys())
    assert.equal(2, pd:len())
    assert.is_true(pd.b.requires_grad)
    pd:update({ c = ds.ones(1, 1) })
    local names = {}
    for name in pd:named_parameters() do names[#names + 1] = name end
    table.sort(names)
    assert.same({ "a", "b", "c" }, names)
    local seen = {}
    for k, p in pd:items() do seen[#seen + 1] = k .. ":" .. p:numel() end
    assert.same({ "b:2", "a:3", "c:1" }, seen)
    H.raises(function() pd:set("forward", ds.ones(1)) end, "ParameterDict", "reserved")
    H.raises(function() pd:set("d", 3) end, "ParameterDict", "not a tensor")
  end)

  it("DataParallel runs its module as it is, its parameters named module.<name>", function()
    local lin = nn.Linear(3, 2)
    local dp = nn.DataParallel(lin)
    local x = ds.randn(4, 3)
    assert(H.bitwise(dp(x), lin(x)))
    local names = {}
    for name in dp:named_parameters() do names[#names + 1] = name end
    table.sort(names)
    assert.same({ "module.bias", "module.weight" }, names)
    H.raises(function() nn.DataParallel(lin, { 0, 1 }) end, "DataParallel", "device_ids")
  end)

  it("nn.Transformer agrees with PyTorch's (its parameters loaded), and has the static mask", function()
    local tf = fixture.transformer
    local m = nn.Transformer(8, 2, 1, 2, 16, 0, { dtype = "f64" })
    load_params(m, tf)
    local mask = nn.Transformer.generate_square_subsequent_mask(4, { dtype = "f64" })
    local out = m(T(tf.src), T(tf.tgt), { tgt_mask = mask })
    check(out, tf.out, "Transformer output")
    H.raises(function() m(T(tf.src), T(tf.tgt), { causal = true }) end, "Transformer", "causal")
    local tf2 = fixture.transformer2
    local m2 = nn.Transformer({ d_model = 8, nhead = 4, num_encoder_layers = 2, num_decoder_layers = 1,
      dim_feedforward = 12, dropout = 0, activation = "gelu", batch_first = true, norm_first = true, dtype = "f64" })
    load_params(m2, tf2)
    local pad = T(tf2.pad)
    -- PyTorch's positional order: src_mask, tgt_mask, memory_mask, src_key_padding_mask, tgt_key_padding_mask, ...
    local out2 = m2(T(tf2.src), T(tf2.tgt), nil, nn.Transformer.generate_square_subsequent_mask(3, { dtype = "f64" }),
      nil, pad, nil, pad)
    check(out2, tf2.out, "Transformer (batch_first, norm_first, gelu, padding masks) output")
    -- activation as a function (PyTorch's callable form) gives the same numbers as its name
    local m3 = nn.Transformer({ d_model = 8, nhead = 4, num_encoder_layers = 2, num_decoder_layers = 1,
      dim_feedforward = 12, dropout = 0, activation = F.gelu, batch_first = true, norm_first = true, dtype = "f64" })
    load_params(m3, tf2)
    local out3 = m3(T(tf2.src), T(tf2.tgt), { tgt_mask = nn.Transformer.generate_square_subsequent_mask(3,
      { dtype = "f64" }), src_key_padding_mask = pad, memory_key_padding_mask = pad })
    assert(H.bitwise(out3, out2))
    H.raises(function() nn.TransformerEncoderLayer(8, 2, { activation = "tanh" }) end, "TransformerEncoderLayer",
      "activation")
  end)

  it("unfold, fold, conv3d and conv_transpose3d compile with a symbolic batch dim", function()
    local w3, wt = ds.randn(4, 3, 2, 2, 2), ds.randn(3, 2, 2, 1, 2)
    for _, c in ipairs {
      { function(x) return F.unfold(x, 2, { padding = 1 }) end, { 3, 5, 6 } },
      { function(x) return F.fold(x, { 5, 6 }, 2) end, { 12, 20 } },
      { function(x) return F.conv3d(x, w3, nil, { stride = 2 }) end, { 3, 5, 4, 4 } },
      { function(x) return F.conv_transpose3d(x, wt, nil, { stride = { 2, 1, 1 } }) end, { 3, 3, 4, 4 } },
    } do
      local spec = { "batch" }
      for _, n in ipairs(c[2]) do spec[#spec + 1] = n end
      local compiled = ds.compile(c[1], { ds.spec(spec, "f32", "x") })
      for _, batch in ipairs { 1, 3 } do
        local x = ds.randn(batch, unpack(c[2]))
        assert(H.bitwise(compiled(x), c[1](x)))
      end
    end
  end)

  it("ctc_loss compiles with a symbolic batch (padded targets, tensor lengths)", function()
    local fn = function(x, t, il, tl) return F.ctc_loss(x:log_softmax(3), t, il, tl, { reduction = "none" }) end
    local compiled = ds.compile(fn, { ds.spec({ 5, "batch", 4 }, "f32", "x"), ds.spec({ "batch", 2 }, "i64", "t"),
      ds.spec({ "batch" }, "i64", "il"), ds.spec({ "batch" }, "i64", "tl") })
    for _, n in ipairs { 1, 3 } do
      local x, t = ds.randn(5, n, 4), ds.randint(2, 5, { n, 2 })
      local il, tl = ds.randint(3, 6, { n }), ds.randint(0, 3, { n })
      assert(H.bitwise(compiled(x, t, il, tl), fn(x, t, il, tl)))
    end
  end)

  it("unknown options are errors naming the op", function()
    local x = ds.randn(2, 3)
    for _, c in ipairs {
      { "triplet_margin_loss", function() F.triplet_margin_loss(x, x, x, { magin = 1 }) end },
      { "cosine_embedding_loss", function() F.cosine_embedding_loss(x, x, ds.ones(2), { p = 1 }) end },
      { "hinge_embedding_loss", function() F.hinge_embedding_loss(x, x, { weight = x }) end },
      { "soft_margin_loss", function() F.soft_margin_loss(x, x, { margin = 1 }) end },
      { "multilabel_soft_margin_loss", function() F.multilabel_soft_margin_loss(x, x, { pos_weight = x }) end },
      { "multilabel_margin_loss", function()
        F.multilabel_margin_loss(x, ds.ones(2, 3, { dtype = "i64" }), { p = 1 })
      end },
      { "triplet_margin_with_distance_loss", function()
        F.triplet_margin_with_distance_loss(x, x, x, { distance = F.pairwise_distance })
      end },
      { "multi_margin_loss", function() F.multi_margin_loss(x, ds.ones(2, { dtype = "i64" }), { swap = true }) end },
      { "poisson_nll_loss", function() F.poisson_nll_loss(x, x, { log = true }) end },
      { "gaussian_nll_loss", function() F.gaussian_nll_loss(x, x, x:abs(), { log_input = true }) end },
      { "ctc_loss", function() F.ctc_loss(ds.randn(3, 2, 4), ds.ones(2, 1, { dtype = "i64" }), { 3, 3 }, { 1, 1 },
        { blank_index = 1 }) end },
      { "unfold", function() F.unfold(ds.randn(1, 1, 4, 4), 2, { strides = 1 }) end },
      { "fold", function() F.fold(ds.randn(1, 4, 9), 4, 2, { pad = 1 }) end },
      { "conv3d", function()
        F.conv3d(ds.randn(1, 1, 2, 2, 2), ds.randn(1, 1, 1, 1, 1), nil, { padding_mode = "zeros" })
      end },
      { "max_pool3d", function() F.max_pool3d(ds.randn(1, 1, 2, 2, 2), 2, { indices = true }) end },
      { "avg_pool3d", function() F.avg_pool3d(ds.randn(1, 1, 2, 2, 2), 2, { dilation = 1 }) end },
      { "adaptive_avg_pool3d", function() F.adaptive_avg_pool3d(ds.randn(1, 1, 2, 2, 2), { 1, 2, 0 }) end },
      { "max_unpool2d", function() F.max_unpool2d(ds.ones(1, 1, 2, 2), ds.ones(1, 1, 2, 2, { dtype = "i64" }), 2,
        { dilation = 1 }) end },
      { "embedding", function()
        F.embedding(ds.ones(2, { dtype = "i64" }), ds.randn(3, 2), nil, nil, nil, false, true)
      end },
      { "grid_sample", function() F.grid_sample(ds.ones(1, 1, 2, 2), ds.zeros(1, 1, 1, 2), { mode = "bicubic" }) end },
      { "conv_transpose1d", function() F.conv_transpose1d(ds.randn(1, 1, 3), ds.randn(1, 1, 2), nil, { out = 1 }) end },
      { "conv_transpose3d", function()
        F.conv_transpose3d(ds.randn(1, 1, 2, 2, 2), ds.randn(1, 1, 1, 1, 1), nil, { output_size = 3 })
      end },
      { "Unfold", function() nn.Unfold(2, { kernel = 2 }) end },
      { "CTCLoss", function() nn.CTCLoss({ blank = 0 }) end },
      { "Softshrink", function() nn.Softshrink({ lambda = 1 }) end },
      { "Transformer", function() nn.Transformer({ heads = 2 }) end },
    } do
      H.raises(c[2], c[1])
    end
  end)

  it("ctc_loss: impossible alignments give inf (0 with zero_infinity); bad inputs are errors naming it", function()
    local lp = ds.randn(3, 2, 4):log_softmax(3)
    local tg = ds.tensor({ { 2, 2 }, { 3, 4 } }, { dtype = "i64" })
    -- 2, 2 needs 3 steps (a blank between the repeats) and has them; 3, 4 needs 2 and has 1
    local loss = F.ctc_loss(lp, tg, { 3, 1 }, { 2, 2 }, { reduction = "none" })
    assert(loss[1]:item() < math.huge)
    assert.equal(math.huge, loss[2]:item())
    assert.equal(0, F.ctc_loss(lp, tg, { 3, 1 }, { 2, 2 }, { reduction = "none", zero_infinity = true })[2]:item())
    -- a target holding the blank: the skip rule goes by position as PyTorch's, the gradient is the derivative
    local logits = ds.randn(6, 2, 4, { dtype = "f64" }):requires_grad_()
    assert(ds.autograd.gradcheck(function(x)
      local targets = ds.tensor({ { 2, 1, 2 }, { 1, 1, 3 } }, { dtype = "i64" })
      return F.ctc_loss(x:log_softmax(3), targets, { 6, 5 }, { 3, 3 })
    end, { logits }))
    -- no input steps: an empty target has probability 1 (loss 0), any other none
    local none = F.ctc_loss(lp, tg, { 0, 0 }, { 0, 1 }, { reduction = "none" })
    assert.equal(0, none[1]:item())
    assert.equal(math.huge, none[2]:item())
    H.raises(function() F.ctc_loss(lp, tg, { 3 }, { 2, 2 }) end, "ctc_loss", "input_lengths")
    H.raises(function() F.ctc_loss(lp, tg, { 4, 3 }, { 2, 2 }) end, "ctc_loss", "input_lengths[1] = 4")
    H.raises(function() F.ctc_loss(lp, tg, { 3, 3 }, { 2, 3 }) end, "ctc_loss", "target_lengths[2] = 3")
    H.raises(function() F.ctc_loss(lp, tg:astype("f32"), { 3, 3 }, { 2, 2 }) end, "ctc_loss", "integer")
    H.raises(function() F.ctc_loss(lp, tg, { 3, 3 }, { 2, 2 }, { blank = 5 }) end, "ctc_loss", "blank")
    H.raises(function() ds.trace(function(l, t, n) return F.ctc_loss(l, t, { 3, 3 }, n) end,
      { lp, ds.tensor({ 2, 3, 4 }, { dtype = "i64" }), ds.tensor({ 1, 2 }, { dtype = "i64" }) }) end,
      "ctc_loss", "target_lengths")
  end)
end)
