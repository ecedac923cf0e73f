-- tests/tensor_more_spec.lua: ds.linalg and the tensor calls of issue 28's second list against PyTorch's values and
-- gradients (tests/fixtures/tensor_more.json from tests/gen_tensor_more_fixtures.py): each case eagerly, traced and
-- compiled (both equal to eager bit for bit), its gradient against PyTorch's and a finite-difference gradcheck;
-- then the refusals.
local ds = require("ds")
local H = require("helpers")
local FC = require("fixture_cases")
local LA = ds.linalg

local fx = H.fixture("tensor_more.json")
local inf = math.huge

local function list(t) return unpack(t) end

-- case name -> {fn, eager = true (values decide shapes), nogc = true (ties or kinks: no finite differences)}
local CASES = {
  vector_norm = { function(x) return LA.vector_norm(x) end },
  vector_norm_ord_inf = { function(x) return LA.vector_norm(x, inf, 2) end },
  vector_norm_ord_ninf = { function(x) return LA.vector_norm(x, -inf, 2) end },
  vector_norm_ord_0 = { function(x) return LA.vector_norm(x, 0, 2) end },
  vector_norm_ord_1 = { function(x) return LA.vector_norm(x, 1, 2) end },
  vector_norm_ord_3 = { function(x) return LA.vector_norm(x, 3, 2) end },
  vector_norm_ord_half = { function(x) return LA.vector_norm(x, 0.5, 2) end },
  vector_norm_ord_neg1 = { function(x) return LA.vector_norm(x, { ord = -1, dim = 2 }) end },
  vector_norm_dims_keepdim = { function(x) return LA.vector_norm(x, 2, { 1, -1 }, true) end },
  vector_norm_negdim = { function(x) return LA.vector_norm(x, 3, -2) end },
  vector_norm_zero_row = { function(x) return LA.vector_norm(x, nil, 2) end, nogc = true },
  vector_norm_empty = { function(x) return LA.vector_norm(x, 2, 1) end },
  vector_norm_f32_dtype = { function(x) return LA.vector_norm(x, { dtype = "f64" }) end },
  vector_norm_nan = { function(x) return LA.vector_norm(x, 2, 2) end },
  matrix_norm_fro = { function(a) return LA.matrix_norm(a) end },
  matrix_norm_1 = { function(a) return LA.matrix_norm(a, 1) end },
  matrix_norm_neg1 = { function(a) return LA.matrix_norm(a, -1) end },
  matrix_norm_inf = { function(a) return LA.matrix_norm(a, inf) end },
  matrix_norm_ninf = { function(a) return LA.matrix_norm(a, -inf) end },
  matrix_norm_1_dims_keepdim = { function(a) return LA.matrix_norm(a, 1, { 3, 1 }, true) end },
  matrix_norm_inf_dims = { function(a) return LA.matrix_norm(a, { ord = inf, dim = { -1, 1 } }) end },
  linalg_norm_default = { function(a) return LA.norm(a) end },
  linalg_norm_matrix_1 = { function(a) return LA.norm(a, 1) end },
  linalg_norm_vector_inf = { function(a) return LA.norm(a, inf) end },
  linalg_norm_dim = { function(a) return LA.norm(a, 3, 2, true) end },
  linalg_norm_fro_dims = { function(a) return LA.norm(a, "fro", { 1, 3 }) end },
  inv = { function(a) return LA.inv(a) end },
  inv_batched = { function(a) return LA.inv(a) end },
  inv_f32 = { function(a) return LA.inv(a) end },
  inv_pivoting = { function(a) return LA.inv(a) end },
  inverse = { function(a) return a:inverse() end },
  det = { function(a) return LA.det(a) end },
  det_batched = { function(a) return LA.det(a) end },
  det_singular = { function(a) return LA.det(a) end },
  det_1x1 = { function(a) return ds.det(a) end },
  slogdet = { function(a) return LA.slogdet(a) end },
  logdet = { function(a) return a:logdet() end },
  solve = { function(a, b) return LA.solve(a, b) end },
  solve_vector = { function(a, b) return LA.solve(a, b) end },
  solve_batched_vector = { function(a, b) return LA.solve(a, b) end },
  solve_broadcast = { function(a, b) return LA.solve(a, b) end },
  solve_left_false = { function(a, b) return LA.solve(a, b, { left = false }) end },
  matrix_power_0 = { function(a) return LA.matrix_power(a, 0) end },
  matrix_power_1 = { function(a) return LA.matrix_power(a, 1) end },
  matrix_power_2 = { function(a) return LA.matrix_power(a, 2) end },
  matrix_power_3 = { function(a) return LA.matrix_power(a, 3) end },
  matrix_power_5 = { function(a) return LA.matrix_power(a, 5) end },
  matrix_power_neg2 = { function(a) return LA.matrix_power(a, -2) end },
  matrix_power_batched = { function(a) return a:matrix_power(6) end },
  linalg_cross = { function(a, b) return LA.cross(a, b) end },
  linalg_cross_broadcast_dim = { function(a, b) return LA.cross(a, b, { dim = 1 }) end },
  cross_default_dim = { function(a, b) return a:cross(b) end },

  argwhere = { function(x) return ds.argwhere(x) end, eager = true },
  argwhere_empty = { function(x) return x:argwhere() end, eager = true },
  tensor_split_sections = { function(x) return list(ds.tensor_split(x, 3)) end },
  tensor_split_indices = { function(x) return list(x:tensor_split({ 2, 6 })) end },
  tensor_split_negdim_neg_index = { function(x) return list(x:tensor_split({ -2, 10 }, -1)) end },
  tensor_split_more_sections = { function(x) return list(ds.tensor_split(x, 4, 2)) end },
  tensor_split_tensor_indices = { function(x, i) return list(ds.tensor_split(x, i)) end, eager = true },
  tril_indices = { function() return ds.tril_indices(4, 3, -1) end },
  tril_indices_offset = { function() return ds.tril_indices(3, 5, 2) end },
  triu_indices = { function() return ds.triu_indices(3, 3, 1) end },
  triu_indices_empty = { function() return ds.triu_indices(2, 2, 5) end },
  diag_embed = { function(x) return ds.diag_embed(x) end },
  diag_embed_offset = { function(x) return x:diag_embed(1) end },
  diag_embed_dims = { function(x) return ds.diag_embed(x, -1, 1, 3) end },
  diag_embed_dims_swapped = { function(x) return ds.diag_embed(x, { offset = 2, dim1 = -1, dim2 = 1 }) end },
  broadcast_tensors = { function(a, b, c) return ds.broadcast_tensors(a, b, c) end },

  einsum_diagonal = { function(a) return ds.einsum("ii->i", a) end },
  einsum_trace = { function(a) return ds.einsum("ii", a) end },
  einsum_batch_diagonal = { function(a) return ds.einsum("bii->bi", a) end },
  einsum_ellipsis_matmul = { function(a, b) return ds.einsum("...ij,...jk->...ik", a, b) end },
  einsum_ellipsis_implicit = { function(a, b) return ds.einsum("...ij,jk", a, b) end },
  einsum_ellipsis_sum = { function(a) return ds.einsum("i...->...", a) end },
  einsum_ellipsis_broadcast = { function(a, b) return ds.einsum("...i,...i->...", a, b) end },
  einsum_diag_times = { function(a, b) return ds.einsum("ii,ij->j", a, b) end },

  topk_unsorted = { function(x) return x:topk(3, { sorted = false }) end },
  unique_dim0 = { function(x) return x:unique({ dim = 1, return_inverse = true, return_counts = true }) end,
    eager = true },
  unique_dim1 = { function(x) return ds.unique(x, { dim = 2, return_inverse = true }) end, eager = true },
  unique_flat = { function(x) return x:unique({ return_inverse = true, return_counts = true }) end, eager = true },
  sort_bool = { function(x) return x:sort() end },
  sort_bool_descending = { function(x) return ds.sort(x, 1, true) end },
  argsort_bool = { function(x) return x:argsort() end },
  full_nan = { function() return ds.full({ 2, 2 }, 0 / 0) end },
  full_inf_f64 = { function() return ds.full({ 3 }, -inf, { dtype = "f64" }) end },
  floor_divide_float = { function(a, b) return ds.floor_divide(a, b) end },
  floor_divide_f32_scalar = { function(a) return a:floor_divide(0.7) end },
  floor_divide_int = { function(a, b) return ds.floor_divide(a, b) end },

  take_along_dim_negdim = { function(x, i) return ds.take_along_dim(x, i, -1) end },
  searchsorted_sorter = { function(s, v, so) return ds.searchsorted(s, v, { sorter = so }) end },
  searchsorted_side_right_2d = { function(s, v) return ds.searchsorted(s, v, { side = "right" }) end },
  searchsorted_scalar = { function(s) return ds.searchsorted(s, 2.0) end },
  bucketize_right = { function(v, b) return ds.bucketize(v, b, { right = true }) end },
  repeat_interleave_negdim = { function(x) return x:repeat_interleave(2, -1) end },
  repeat_interleave_output_size = { function(x, r) return x:repeat_interleave(r, 1, { output_size = 4 }) end,
    eager = true },
  index_fill_negdim = { function(x, i) return x:index_fill(-1, i, 0 / 0) end, nogc = true }, -- NaN in the sum
  index_copy_negdim = { function(x, i, s) return x:index_copy(-2, i, s) end },
  masked_scatter_all = { function(x, m, s) return x:masked_scatter(m, s) end },
  scatter_reduce_2d_mean = { function(x, i, s) return x:scatter_reduce(2, i, s, "mean") end },
  scatter_reduce_int_mean = { function(x, i, s) return x:scatter_reduce(1, i, s, "mean", { include_self = false }) end },
  index_put_accumulate = { function(x, i, v) return x:index_put({ i }, v, { accumulate = true }) end },

  var_mean_correction0 = { function(x) return ds.var_mean(x, 2, { correction = 0 }) end },
  var_mean_unbiased_all = { function(x) return x:var_mean(false) end },
  std_mean_dims_keepdim = { function(x) return ds.std_mean(x, { 1, 2 }, { keepdim = true }) end },
  std_mean_correction2 = { function(x) return x:std_mean(-1, { correction = 2 }) end },
  count_nonzero_dims = { function(x) return ds.count_nonzero(x, { 1, -1 }) end },
  nansum_dims = { function(x) return x:nansum({ 1, 2 }) end },
  nanmean_all_nan_row = { function(x) return x:nanmean(2) end },
  nansum_int = { function(x) return x:nansum() end },
  aminmax_keepdim_negdim = { function(x) return ds.aminmax(x, { dim = -1, keepdim = true }) end },
  aminmax_nan = { function(x) return x:aminmax() end },
  diff_append = { function(x, a) return ds.diff(x, { n = 2, dim = 1, append = a }) end },
  diff_n0 = { function(x) return x:diff(0) end },
  diff_n_too_big = { function(x) return x:diff(7, 2) end },
  logcumsumexp_ninf = { function(x) return x:logcumsumexp(-1) end },
  logcumsumexp_negdim = { function(x) return x:logcumsumexp(-2) end },
  fmax_nan = { function(a, b) return ds.fmax(a, b) end },
  fmin_nan = { function(a, b) return a:fmin(b) end },
  fmax_int = { function(a, b) return ds.fmax(a, b) end },
  cdist_p0 = { function(a, b) return ds.cdist(a, b, 0) end },
  cdist_p15 = { function(a, b) return ds.cdist(a, b, { p = 1.5 }) end },
  kron_3d = { function(a, b) return ds.kron(a, b) end },
  tensordot_0 = { function(a, b) return ds.tensordot(a, b, 0) end },
  tensordot_1 = { function(a, b) return ds.tensordot(a, b, 1) end },
  tensordot_pairs_neg = { function(a, b) return ds.tensordot(a, b, { { -1, 1 }, { 1, 3 } }) end },
  baddbmm_beta0_nan = { function(i, a, b) return ds.baddbmm(i, a, b, { beta = 0, alpha = 1.5 }) end },
  addbmm_broadcast = { function(i, a, b) return ds.addbmm(i, a, b, { beta = 2, alpha = 0.5 }) end },
  addmv_defaults = { function(i, m, v) return ds.addmv(i, m, v) end },
  median_even = { function(x) return x:median(1) end },
  median_ties = { function(x) return x:median(-1, true) end },
  nanmedian_all_nan = { function(x) return x:nanmedian(2) end },
  kthvalue_negdim = { function(x) return x:kthvalue(2, -2) end },
  mode_ties = { function(x) return x:mode() end },
  quantile_tensor_q_nearest = { function(x, q) return x:quantile(q, 2, false, { interpolation = "nearest" }) end },
  quantile_linear_grad = { function(x) return x:quantile(0.35, 1, true) end },
  nanquantile_midpoint = { function(x) return x:nanquantile(0.5, 2, { interpolation = "midpoint" }) end },
  sum_dtype_bool_i32 = { function(x) return x:sum({ dtype = "i32" }) end },
  cumsum_dtype_negdim = { function(x) return x:cumsum(-1, { dtype = "f64" }) end },
  mean_dtype_f64_dims = { function(x) return x:mean({ 1, 2 }, { dtype = "f64" }) end },
  clamp_tensor_broadcast = { function(x, lo, hi) return x:clamp(lo, hi) end },
  clamp_max_tensor_only = { function(x, hi) return ds.clamp(x, nil, hi) end },
  diagonal_3d_negdims = { function(x) return x:diagonal(-1, -1, 1) end },
  diagonal_offset_out = { function(x) return x:diagonal(5) end },
  trace_rect = { function(x) return x:trace() end },
  mT_3d = { function(x) return x.mT end },

  norm_zero_grad = { function(x) return ds.norm(x) end, nogc = true },
  norm_p1_dims = { function(x) return x:norm(1, { 1, 2 }) end },
  norm_fro_dim_keepdim = { function(x) return ds.norm(x, "fro", 2, true) end },
  norm_p3_negdim = { function(x) return x:norm({ p = 3, dim = -1 }) end },
  vector_norm_empty_dims = { function(x) return LA.vector_norm(x, 2, {}) end },
  vector_norm_0d = { function(x) return LA.vector_norm(x, 1) end },
  matrix_norm_empty_fro = { function(a) return LA.matrix_norm(a) end },
  matrix_norm_f32_inf = { function(a) return LA.matrix_norm(a, inf) end },
  linalg_norm_vector_dim_list = { function(a) return LA.norm(a, nil, { 2 }) end },
  det_empty_batch = { function(a) return LA.det(a) end },
  det_0x0 = { function(a) return LA.det(a) end },
  inv_0x0 = { function(a) return LA.inv(a) end },
  slogdet_singular = { function(a) return a:slogdet() end },
  slogdet_f32 = { function(a) return LA.slogdet(a) end },
  solve_batched_A_vector_B = { function(a, b) return LA.solve(a, b) end },
  solve_f32 = { function(a, b) return LA.solve(a, b) end },
  linalg_cross_negdim = { function(a, b) return LA.cross(a, b, -2) end },
  einsum_spaces_upper = { function(a, b) return ds.einsum("Ab, bC -> CA", a, b) end },
  einsum_three_ellipsis = { function(a, b, c) return ds.einsum("...i,...i,...->...", a, b, c) end },
  einsum_ellipsis_middle = { function(a) return ds.einsum("b...i->i...b", a) end },
  einsum_list_operands = { function(a, b) return ds.einsum("ij,jk", { a, b }) end },
  einsum_repeat_and_sum = { function(a) return ds.einsum("iij->j", a) end },
  tensor_split_more_than_size = { function(x) return list(x:tensor_split(5)) end },
  tensor_split_unordered = { function(x) return list(x:tensor_split({ 4, 2 })) end },
  topk_k0 = { function(x) return x:topk(0) end },
  topk_smallest_dim0 = { function(x) return x:topk(2, 1, false) end },
  argwhere_0d = { function(x) return x:argwhere() end, eager = true },
  tril_indices_zero_rows = { function() return ds.tril_indices(0, 3) end },
  triu_indices_neg_offset = { function() return ds.triu_indices(4, 2, -2) end },
  broadcast_tensors_0d = { function(a, b) return ds.broadcast_tensors({ a, b }) end },
  unique_bool_dim = { function(x) return x:unique({ dim = 1, return_counts = true }) end, eager = true },
  unique_empty = { function(x) return x:unique({ return_inverse = true, return_counts = true }) end, eager = true },
  scatter_reduce_2d_amax_noself = { function(x, i, s)
    return x:scatter_reduce(1, i, s, "amax", { include_self = false }) end, nogc = true },
  floor_divide_by_zero_inf = { function(a, b) return a:floor_divide(b) end },
  floor_divide_int_by_float = { function(a) return ds.floor_divide(a, 2.5) end },
  searchsorted_right_int32_sorter_2d = { function(s, v, so)
    return ds.searchsorted(s, v, { right = true, out_int32 = true, sorter = so }) end },
  diag_embed_3d_neg_dims = { function(x) return x:diag_embed(0, -3, -1) end },

  hstack_1d = { function(a, b) return ds.hstack(a, b) end },
  hstack_2d = { function(a, b) return ds.hstack({ a, b }) end },
  vstack = { function(a, b) return ds.vstack(a, b) end },
  row_stack = { function(a, b) return ds.row_stack(a, b) end },
  dstack = { function(a, b) return ds.dstack(a, b) end },
  column_stack = { function(a, b, c) return ds.column_stack(a, b, c) end },
  atleast_3d = { function(a, b, c) return ds.atleast_3d(a, b, c) end },
  atleast_2d_one = { function(a) return a:atleast_2d() end },
  unflatten = { function(x) return x:unflatten(-1, { 2, -1 }) end },
  rot90 = { function(x) return x:rot90() end },
  rot90_k3_dims = { function(x) return ds.rot90(x, 3, { 3, 1 }) end },
  rot90_neg = { function(x) return x:rot90(-2, { 1, 2 }) end },
  flipud_fliplr = { function(x) return x:flipud(), ds.fliplr(x) end },
  ravel_swapaxes = { function(x) return x.mT:ravel(), x:swapaxes(1, -1), ds.swapdims(x, 2, 1) end },
  meshgrid_ij = { function(a, b, c) return ds.meshgrid(a, b, c) end },
  meshgrid_xy = { function(a, b) return ds.meshgrid(a, b, { indexing = "xy" }) end },
  block_diag = { function(a, b, c) return ds.block_diag(a, b, c) end },
  block_diag_promote = { function(a, b) return ds.block_diag(a, b) end },
  cartesian_prod = { function(a, b, c) return ds.cartesian_prod(a, b, c) end },
  diagflat = { function(x) return x:diagflat(-1) end },
  cummax = { function(x) return x:cummax(1) end, nogc = true }, -- NaN inputs
  cummax_2d_negdim = { function(x) return ds.cummax(x, -1) end },
  cummin_dim0_int = { function(x) return x:cummin(1) end },
  cummin_ties = { function(x) return x:cummin(2) end, nogc = true },
  bincount = { function(x) return x:bincount() end, eager = true },
  bincount_weights_minlength = { function(x, w) return ds.bincount(x, { weights = w, minlength = 6 }) end, eager = true },
  histc = { function(x) return x:histc(4) end },
  histc_range = { function(x) return ds.histc(x, { bins = 5, min = -1, max = 1 }) end },
  histc_constant = { function(x) return x:histc(3) end },
  isin = { function(a, b) return ds.isin(a, b) end },
  isin_invert = { function(a, b) return a:isin(b, { invert = true }) end },
  take = { function(x, i) return x:take(i) end },
  msort = { function(x) return x:msort() end },
  unique_consecutive = { function(x) return x:unique_consecutive({ return_inverse = true, return_counts = true }) end,
    eager = true },
  unique_consecutive_dim = { function(x) return ds.unique_consecutive(x, { dim = 2 }) end, eager = true },
  addr = { function(i, a, b) return i:addr(a, b, { beta = 0.5, alpha = 2 }) end },
  addr_beta0_nan = { function(i, a, b) return ds.addr(i, a, b, { beta = 0 }) end },
  inner = { function(a, b) return a:inner(b) end },
  inner_0d = { function(a, b) return ds.inner(a, b) end },
  multi_dot = { function(a, b, c) return LA.multi_dot({ a, b, c }) end },
  multi_dot_vectors = { function(a, b, c) return LA.multi_dot({ a, b, c }) end },
  chain_matmul = { function(a, b) return ds.chain_matmul(a, b) end },
  vecdot = { function(a, b) return LA.vecdot(a, b, { dim = 1 }) end },
  dist = { function(a, b) return a:dist(b) end },
  dist_p1_inf = { function(a, b) return ds.dist(a, b, 1), ds.dist(a, b, inf) end, nogc = true },
  cov = { function(x) return x:cov() end },
  cov_1d_correction0 = { function(x) return ds.cov(x, { correction = 0 }) end },
  cov_weights = { function(x, f, a) return x:cov({ fweights = f, aweights = a }) end },
  cov_int = { function(x) return x:cov() end },
  corrcoef = { function(x) return x:corrcoef() end },
  vander = { function(x) return ds.vander(x) end },
  vander_n_increasing = { function(x) return ds.vander(x, 4, true) end },

  cholesky = { function(a) return LA.cholesky(a) end, nogc = true }, -- symmetric gradient: a symmetric input's
  cholesky_upper_batched = { function(a) return LA.cholesky(a, { upper = true }) end, nogc = true }, -- (see the
  cholesky_f32 = { function(a) return LA.cholesky(a) end },                              -- second-derivative test)
  cholesky_lower_only = { function(a) return LA.cholesky(a) end },
  torch_cholesky_upper = { function(a) return a:cholesky(true) end, nogc = true },
  solve_triangular_lower = { function(a, b) return LA.solve_triangular(a, b, { upper = false }) end },
  solve_triangular_upper_unit = { function(a, b)
    return LA.solve_triangular(a, b, { upper = true, unitriangular = true }) end },
  solve_triangular_right = { function(a, b) return LA.solve_triangular(a, b, { upper = true, left = false }) end },
  -- PyTorch's gradient in L is that of solve(L L^T, B) in all of L, while the values read L's triangle
  cholesky_solve = { function(b, l) return ds.cholesky_solve(b, l) end, nogc = true },
  cholesky_solve_upper = { function(b, l) return b:cholesky_solve(l, true) end, nogc = true },

  trapezoid = { function(y) return y:trapezoid() end },
  trapezoid_x_dim0 = { function(y, x) return ds.trapezoid(y, x, { dim = 1 }) end },
  trapz_dx = { function(y) return ds.trapz(y, { dx = 0.3 }) end },
  trapezoid_x_broadcast = { function(y, x) return ds.trapezoid(y, x) end },
  trapezoid_int = { function(y) return ds.trapezoid(y) end },
  cumulative_trapezoid = { function(y, x) return y:cumulative_trapezoid(x, { dim = -1 }) end },
  cumulative_trapezoid_dx_dim0 = { function(y) return ds.cumulative_trapezoid(y, { dx = 2, dim = 1 }) end },
}
for _, red in ipairs { "sum", "prod", "amax", "amin", "mean" } do
  for _, inc in ipairs { true, false } do
    CASES["scatter_reduce_" .. red .. "_" .. (inc and "self" or "noself")] = {
      function(x, i, s) return x:scatter_reduce(1, i, s, red, { include_self = inc }) end,
      nogc = red == "amax" or red == "amin" }
  end
end

describe("ds.linalg and more tensor calls: values, traced, compiled, gradients", function()
  it("every fixture case has a call and every call a fixture", FC.coverage(fx, CASES))
  for name, run in FC.cases(fx, CASES) do it(name, run) end
end)

describe("ds.linalg and more tensor calls: refusals", function()
  it("refuse what they do not take, naming the call", function()
    H.raises(function() LA.matrix_norm(ds.randn(3, 3), "nuc") end, "linalg.matrix_norm", "SVD")
    H.raises(function() LA.matrix_norm(ds.randn(3, 3), 2) end, "linalg.matrix_norm", "SVD")
    H.raises(function() LA.vector_norm(ds.randn(3), { p = 2 }) end, "linalg.vector_norm", "p")
    H.raises(function() LA.vector_norm(ds.tensor({ 1, 2 }, { dtype = "i64" })) end, "linalg.vector_norm", "floating")
    H.raises(function() LA.vector_norm(ds.zeros(0), inf) end, "linalg.vector_norm", "empty")
    H.raises(function() LA.inv(ds.tensor({ { 1, 2 }, { 2, 4 } })) end, "linalg.inv", "singular")
    H.raises(function() LA.solve(ds.zeros(2, 2), ds.ones(2)) end, "linalg.solve", "singular")
    H.raises(function() LA.inv(ds.randn(2, 3)) end, "linalg.inv", "square")
    H.raises(function() LA.det(ds.ones(2, 2, { dtype = "i64" })) end, "linalg.det", "f32 or f64")
    H.raises(function() LA.solve(ds.randn(3, 3), ds.randn(2, 2)) end, "linalg.solve", "does not fit")
    H.raises(function() LA.matrix_power(ds.randn(2, 2), 1.5) end, "linalg.matrix_power", "integer")
    H.raises(function() LA.cross(ds.randn(4, 2), ds.randn(4, 2)) end, "linalg.cross", "size 3")
    H.raises(function() ds.cross(ds.randn(4, 2), ds.randn(4, 2)) end, "cross", "no dim of size 3")
    H.raises(function() ds.tensor_split(ds.randn(4), 0) end, "tensor_split", "sections")
    H.raises(function() ds.tensor_split(ds.randn(4), { 0 }) end, "tensor_split", "1-based")
    H.raises(function() ds.tril_indices(3, 3, 0, { device = "cpu" }) end, "tril_indices", "device")
    H.raises(function() ds.diag_embed(ds.randn(3), 0, 1, 1) end, "diag_embed", "dim1 and dim2")
    H.raises(function() ds.broadcast_tensors(ds.randn(3), ds.randn(4)) end, "broadcast_tensors")
    H.raises(function() ds.broadcast_shapes({ 2 }, { 3 }) end, "broadcast_shapes")
    H.raises(function() ds.einsum("ij,jk->ii", ds.randn(2, 2), ds.randn(2, 2)) end, "einsum", "twice")
    H.raises(function() ds.einsum("...i...", ds.randn(2, 2)) end, "einsum", "'...' appears twice")
    H.raises(function() ds.randn(4):topk(2, { sorted = false, k = 3 }) end, "topk", "k")
    H.raises(function() ds.randn(4):unique({ axis = 1 }) end, "unique", "axis")
    H.raises(function() ds.randn(4):scatter_reduce(1, ds.tensor({ 1 }, { dtype = "i64" }), ds.randn(1), "sum",
      { include = true }) end, "scatter_reduce", "include")
  end)
  it("inv, det, slogdet, solve and the norms have second derivatives (finite differences of the gradients)", function()
    local function well(...)
      return (ds.randn({ ... }, { dtype = "f64" }) + ds.eye(3, 3, { dtype = "f64" }) * 3):requires_grad_()
    end
    local A, B = well(2, 3, 3), ds.randn(3, 2, { dtype = "f64" }):requires_grad_()
    local gg = ds.autograd.gradgradcheck
    assert(gg(function(a) return LA.inv(a) end, { A }), "inv")
    assert(gg(function(a) return LA.det(a) end, { A }), "det")
    assert(gg(function(a) return (LA.slogdet(a)) end, { A }), "slogdet sign")
    assert(gg(function(a) return select(2, LA.slogdet(a)) end, { A }), "slogdet logabsdet")
    assert(gg(function(a, b) return LA.solve(a, b) end, { A, B }), "solve")
    assert(gg(function(a) return LA.matrix_power(a, -2) end, { A }), "matrix_power")
    assert(gg(function(a) return LA.vector_norm(a, 3, -1) end, { A }), "vector_norm")
    assert(gg(function(a) return LA.matrix_norm(a) end, { A }), "matrix_norm")
    -- cholesky reads a symmetric matrix: checked through a symmetric parametrization, as PyTorch's gradcheck
    local sym = function(a) return LA.cholesky(a:matmul(a:transpose(-1, -2))) end
    assert(gg(sym, { A }), "cholesky")
    assert(ds.autograd.gradcheck(sym, { A }), "cholesky (first derivatives)")
    -- PyTorch 1.13 cannot differentiate these two (an in-place write in its backward): finite differences only
    local X = ds.randn(3, 5, { dtype = "f64" }):requires_grad_()
    assert(ds.autograd.gradcheck(function(x) return x:corrcoef() end, { X }), "corrcoef")
    assert(ds.autograd.gradcheck(function(x) return ds.vander(x:reshape(-1), 4) end, { X }), "vander")
  end)
  it("inv, det and solve trace and compile for a traced batch, and agree with each other", function()
    local A = ds.randn(3, 4, 4, { dtype = "f64" }) + ds.eye(4, 4, { dtype = "f64" }) * 4
    local f = function(a) return LA.inv(a), LA.det(a), LA.solve(a, ds.ones(4, { dtype = "f64" })) end
    local inv, det, x = ds.compile(f, { A })(A)
    H.close(inv:matmul(A), ds.eye(4, 4, { dtype = "f64" }):expand(3, 4, 4), 1e-10, 1e-10)
    H.close(x, inv:sum(-1), 1e-10, 1e-10)
    H.close(det, LA.det(A), 0, 0)
  end)
end)
