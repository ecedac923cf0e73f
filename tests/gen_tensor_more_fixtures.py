# gen_tensor_more_fixtures.py: PyTorch's values and gradients for ds.linalg and the tensor calls of issue 28's
# second list (tensor_split, diag_embed, einsum with '...' and diagonals, unique with dim, ...), several option sets
# per call with edge cases (empty dims, negative dims, NaN); checked by tests/tensor_more_spec.lua eagerly, traced,
# compiled and through autograd.
# Run: /usr/bin/python3 tests/gen_tensor_more_fixtures.py  (writes tests/fixtures/tensor_more.json)
# Each case: inputs (index inputs written 1-based, negative ones unchanged, as ds takes them), the outputs
# (index outputs 1-based) and, for the inputs marked differentiable, the gradient of sum_k <w_k, out_k> with
# w_k = cos(1, 2, ..., numel) in out_k's shape.
import json
import os
import torch

DT = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64", torch.int32: "i32",
      torch.uint8: "u8", torch.bool: "bool"}


def enc(t):
    t = t.detach()
    data = t.reshape(-1).tolist()
    if t.dtype == torch.bool:
        data = [1 if v else 0 for v in data]
    data = [None if isinstance(v, float) and v != v else v for v in data]  # NaN as null
    data = ["inf" if v == float("inf") else "-inf" if v == float("-inf") else v for v in data]
    return {"shape": list(t.shape), "dtype": DT[t.dtype], "data": data}


class Idx:
    """an index input: given to PyTorch as it is, to ds 1-based (negative values unchanged)"""
    def __init__(self, t):
        self.t = t


def weights(o):
    return torch.cos(torch.arange(1, o.numel() + 1, dtype=torch.float64)).reshape(o.shape).to(o.dtype)


cases = {}


def case(name, fn, inputs, grad=(), index_out=()):
    assert name not in cases, name
    torch_in, ds_in = [], []
    for i, x in enumerate(inputs):
        if isinstance(x, Idx):
            torch_in.append(x.t)
            ds_in.append(enc(torch.where(x.t >= 0, x.t + 1, x.t)))
        else:
            x = x.detach().clone().requires_grad_(i in grad)
            torch_in.append(x)
            ds_in.append(enc(x))
    outs = fn(*torch_in)
    if not isinstance(outs, (tuple, list)):
        outs = (outs,)
    want = [enc(o + 1 if k in index_out else o) for k, o in enumerate(outs)]
    entry = {"inputs": ds_in, "want": want}
    if grad:
        total = sum((o * weights(o)).sum() for o in outs if o.dtype.is_floating_point)
        gs = torch.autograd.grad(total, [torch_in[i] for i in grad], allow_unused=True)
        entry["grad"] = {str(i + 1): enc(g if g is not None else torch.zeros_like(torch_in[i]))
                         for i, g in zip(grad, gs)}
    cases[name] = entry


torch.manual_seed(0)
D = torch.float64
nan, inf = float("nan"), float("inf")
LA = torch.linalg


def well(*shape, dtype=D):
    """a batch of well-conditioned square matrices (diagonally dominated, with negative entries)"""
    n = shape[-1]
    return torch.randn(*shape, dtype=dtype) + n * torch.eye(n, dtype=dtype) * torch.tensor(
        [1.0 if i % 2 == 0 else -1.0 for i in range(n)], dtype=dtype)


# ---- ds.linalg: norms ----
x34 = torch.randn(3, 4, dtype=D)
case("vector_norm", lambda x: LA.vector_norm(x), [x34], grad=(0,))
for tag, o in [("inf", inf), ("ninf", -inf), ("0", 0), ("1", 1), ("3", 3), ("half", 0.5), ("neg1", -1)]:
    case("vector_norm_ord_" + tag, lambda x, o=o: LA.vector_norm(x, o, dim=1),
         [x34], grad=() if o in (0,) else (0,))
case("vector_norm_dims_keepdim", lambda x: LA.vector_norm(x, 2, dim=(0, -1), keepdim=True),
     [torch.randn(2, 3, 4, dtype=D)], grad=(0,))
case("vector_norm_negdim", lambda x: LA.vector_norm(x, 3, dim=-2), [torch.randn(2, 3, 4, dtype=D)], grad=(0,))
case("vector_norm_zero_row", lambda x: LA.vector_norm(x, dim=1),
     [torch.tensor([[0.0, 0.0, 0.0], [3.0, -4.0, 0.0]], dtype=D)], grad=(0,))
case("vector_norm_empty", lambda x: LA.vector_norm(x, dim=0), [torch.zeros(0, 3, dtype=D)])
case("vector_norm_f32_dtype", lambda x: LA.vector_norm(x, dtype=torch.float64), [torch.randn(5)])
case("vector_norm_nan", lambda x: LA.vector_norm(x, dim=1), [torch.tensor([[1.0, nan], [1.0, 2.0]], dtype=D)])
case("matrix_norm_fro", lambda a: LA.matrix_norm(a), [torch.randn(2, 3, 4, dtype=D)], grad=(0,))
for tag, o in [("1", 1), ("neg1", -1), ("inf", inf), ("ninf", -inf)]:
    case("matrix_norm_" + tag, lambda a, o=o: LA.matrix_norm(a, o), [torch.randn(2, 3, 4, dtype=D)], grad=(0,))
case("matrix_norm_1_dims_keepdim", lambda a: LA.matrix_norm(a, 1, dim=(2, 0), keepdim=True),
     [torch.randn(3, 2, 4, dtype=D)], grad=(0,))
case("matrix_norm_inf_dims", lambda a: LA.matrix_norm(a, inf, dim=(-1, 0)), [torch.randn(3, 2, 4, dtype=D)], grad=(0,))
case("linalg_norm_default", lambda a: LA.norm(a), [torch.randn(2, 3, 4, dtype=D)], grad=(0,))
case("linalg_norm_matrix_1", lambda a: LA.norm(a, 1), [x34], grad=(0,))
case("linalg_norm_vector_inf", lambda a: LA.norm(a, inf), [torch.randn(5, dtype=D)], grad=(0,))
case("linalg_norm_dim", lambda a: LA.norm(a, 3, dim=1, keepdim=True), [x34], grad=(0,))
case("linalg_norm_fro_dims", lambda a: LA.norm(a, "fro", dim=(0, 2)), [torch.randn(2, 3, 4, dtype=D)], grad=(0,))

# ---- ds.linalg: inv, det, slogdet, solve, matrix_power, cross ----
case("inv", lambda a: LA.inv(a), [well(4, 4)], grad=(0,))
case("inv_batched", lambda a: LA.inv(a), [well(2, 3, 3)], grad=(0,))
case("inv_f32", lambda a: LA.inv(a), [well(3, 3, dtype=torch.float32)], grad=(0,))
case("inv_pivoting", lambda a: LA.inv(a), [torch.tensor([[0.0, 2.0, 1.0], [1.0, 0.0, 0.0], [3.0, 1.0, 1.0]], dtype=D)],
     grad=(0,))
case("inverse", lambda a: torch.inverse(a), [well(3, 3)], grad=(0,))
case("det", lambda a: LA.det(a), [well(3, 3)], grad=(0,))
case("det_batched", lambda a: LA.det(a), [torch.randn(2, 4, 4, dtype=D)], grad=(0,))
case("det_singular", lambda a: LA.det(a), [torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=D)])
case("det_1x1", lambda a: torch.det(a), [torch.tensor([[-2.5]], dtype=D)], grad=(0,))
case("slogdet", lambda a: LA.slogdet(a), [torch.randn(2, 3, 3, dtype=D)], grad=(0,))
case("logdet", lambda a: torch.logdet(a), [well(3, 3) @ well(3, 3).mT], grad=(0,))
case("solve", lambda a, b: LA.solve(a, b), [well(3, 3), torch.randn(3, 2, dtype=D)], grad=(0, 1))
case("solve_vector", lambda a, b: LA.solve(a, b), [well(3, 3), torch.randn(3, dtype=D)], grad=(0, 1))
case("solve_batched_vector", lambda a, b: LA.solve(a, b), [well(2, 3, 3), torch.randn(2, 3, dtype=D)], grad=(0, 1))
case("solve_broadcast", lambda a, b: LA.solve(a, b), [well(2, 3, 3), torch.randn(3, 2, dtype=D)], grad=(0, 1))
case("solve_left_false", lambda a, b: LA.solve(a, b, left=False), [well(3, 3), torch.randn(2, 3, dtype=D)], grad=(0, 1))
m33 = torch.randn(3, 3, dtype=D) * 0.6
for k in (0, 1, 2, 3, 5, -2):
    case("matrix_power_" + str(k).replace("-", "neg"), lambda a, k=k: LA.matrix_power(a, k),
         [well(3, 3) * 0.3 if k < 0 else m33], grad=() if k == 0 else (0,))
case("matrix_power_batched", lambda a: torch.matrix_power(a, 6), [torch.randn(2, 2, 2, dtype=D) * 0.7], grad=(0,))
case("linalg_cross", lambda a, b: LA.cross(a, b), [torch.randn(4, 3, dtype=D), torch.randn(4, 3, dtype=D)], grad=(0, 1))
case("linalg_cross_broadcast_dim", lambda a, b: LA.cross(a, b, dim=0),
     [torch.randn(3, 1, dtype=D), torch.randn(3, 4, dtype=D)], grad=(0, 1))
case("cross_default_dim", lambda a, b: torch.cross(a, b), [torch.randn(2, 3, 3, dtype=D), torch.randn(2, 3, 3, dtype=D)],
     grad=(0, 1))

# ---- new tensor calls ----
case("argwhere", lambda x: torch.argwhere(x), [torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, nan]])], index_out=(0,))
case("argwhere_empty", lambda x: torch.argwhere(x), [torch.zeros(2, 0)], index_out=(0,))
x7 = torch.randn(7, 2, dtype=D)
case("tensor_split_sections", lambda x: torch.tensor_split(x, 3), [x7], grad=(0,))
case("tensor_split_indices", lambda x: torch.tensor_split(x, [1, 5]), [x7], grad=(0,))
case("tensor_split_negdim_neg_index", lambda x: torch.tensor_split(x, [-2, 9], dim=-1), [torch.randn(2, 5, dtype=D)],
     grad=(0,))
case("tensor_split_more_sections", lambda x: torch.tensor_split(x, 4, dim=1), [torch.randn(2, 3, dtype=D)], grad=(0,))
case("tensor_split_tensor_indices", lambda x, i: torch.tensor_split(x, i), [x7, Idx(torch.tensor([2, 3]))], grad=(0,))
case("tril_indices", lambda: torch.tril_indices(4, 3, -1), [], index_out=(0,))
case("tril_indices_offset", lambda: torch.tril_indices(3, 5, 2), [], index_out=(0,))
case("triu_indices", lambda: torch.triu_indices(3, 3, 1), [], index_out=(0,))
case("triu_indices_empty", lambda: torch.triu_indices(2, 2, 5), [], index_out=(0,))
case("diag_embed", lambda x: torch.diag_embed(x), [torch.randn(2, 3, dtype=D)], grad=(0,))
case("diag_embed_offset", lambda x: torch.diag_embed(x, 1), [torch.randn(2, 3, dtype=D)], grad=(0,))
case("diag_embed_dims", lambda x: torch.diag_embed(x, -1, 0, 2), [torch.randn(2, 3, dtype=D)], grad=(0,))
case("diag_embed_dims_swapped", lambda x: torch.diag_embed(x, 2, -1, 0), [torch.randn(3, dtype=D)], grad=(0,))
case("broadcast_tensors", lambda a, b, c: torch.broadcast_tensors(a, b, c),
     [torch.randn(3, 1, dtype=D), torch.randn(4, dtype=D), torch.randn(2, 1, 1, dtype=D)], grad=(0, 1, 2))

# ---- einsum with '...' and repeated letters ----
A33 = torch.randn(3, 3, dtype=D)
case("einsum_diagonal", lambda a: torch.einsum("ii->i", a), [A33], grad=(0,))
case("einsum_trace", lambda a: torch.einsum("ii", a), [A33], grad=(0,))
case("einsum_batch_diagonal", lambda a: torch.einsum("bii->bi", a), [torch.randn(2, 3, 3, dtype=D)], grad=(0,))
case("einsum_ellipsis_matmul", lambda a, b: torch.einsum("...ij,...jk->...ik", a, b),
     [torch.randn(2, 3, 4, dtype=D), torch.randn(4, 5, dtype=D)], grad=(0, 1))
case("einsum_ellipsis_implicit", lambda a, b: torch.einsum("...ij,jk", a, b),
     [torch.randn(2, 2, 3, dtype=D), torch.randn(3, 2, dtype=D)], grad=(0, 1))
case("einsum_ellipsis_sum", lambda a: torch.einsum("i...->...", a), [torch.randn(2, 3, 4, dtype=D)], grad=(0,))
case("einsum_ellipsis_broadcast", lambda a, b: torch.einsum("...i,...i->...", a, b),
     [torch.randn(2, 1, 3, dtype=D), torch.randn(4, 3, dtype=D)], grad=(0, 1))
case("einsum_diag_times", lambda a, b: torch.einsum("ii,ij->j", a, b), [A33, torch.randn(3, 2, dtype=D)], grad=(0, 1))

# ---- probes: sorting, unique, creation, division ----
def topk_unsorted(x):
    """PyTorch leaves the order of sorted=False unspecified; ds gives it sorted, so compare sorted"""
    v, i = torch.topk(x, 3, sorted=False)
    order = torch.argsort(v, descending=True)
    return v[order], i[order]


case("topk_unsorted", topk_unsorted, [torch.tensor([3.0, 1.0, 4.0, 1.5, 5.0, 9.0])],
     index_out=(1,))
u = torch.tensor([[1, 2], [0, 5], [1, 2], [0, 1]])
case("unique_dim0", lambda x: torch.unique(x, dim=0, return_inverse=True, return_counts=True), [u], index_out=(1,))
case("unique_dim1", lambda x: torch.unique(x, dim=1, return_inverse=True), [u.T.contiguous()], index_out=(1,))
case("unique_flat", lambda x: torch.unique(x, return_inverse=True, return_counts=True),
     [torch.tensor([3.0, 1.0, 3.0, -2.0, 1.0])], index_out=(1,))
case("sort_bool", lambda x: torch.sort(x, stable=True), [torch.tensor([True, False, True, False])], index_out=(1,))
case("sort_bool_descending", lambda x: torch.sort(x, dim=0, descending=True, stable=True),
     [torch.tensor([[True, False], [False, True], [True, True]])], index_out=(1,))
case("argsort_bool", lambda x: torch.argsort(x, stable=True), [torch.tensor([True, False, True])], index_out=(0,))
case("full_nan", lambda: torch.full((2, 2), nan), [])
case("full_inf_f64", lambda: torch.full((3,), -inf, dtype=D), [])
case("floor_divide_float", lambda a, b: torch.floor_divide(a, b),
     [torch.tensor([7.5, -7.5, 7.5, -7.5, 3.0, 0.0], dtype=D), torch.tensor([2.0, 2.0, -2.0, -2.0, 1.5, 3.0], dtype=D)])
case("floor_divide_f32_scalar", lambda a: torch.floor_divide(a, 0.7), [torch.tensor([1.4, -1.3, 2.0, 5.6])])
case("floor_divide_int", lambda a, b: torch.floor_divide(a, b), [torch.tensor([7, -7, 7, -7]), torch.tensor([2, 2, -2, -2])])

# ---- probes: index calls ----
xi = torch.randn(3, 4, dtype=D)
case("take_along_dim_negdim", lambda x, i: torch.take_along_dim(x, i, dim=-1),
     [xi, Idx(torch.tensor([[0, 3], [1, 1], [2, 0]]))], grad=(0,))
case("searchsorted_sorter", lambda s, v, so: torch.searchsorted(s, v, sorter=so),
     [torch.tensor([3.0, 1.0, 2.0, 5.0], dtype=D), torch.tensor([0.5, 2.0, 4.0, 6.0], dtype=D),
      Idx(torch.tensor([1, 2, 0, 3]))], index_out=(0,))
case("searchsorted_side_right_2d", lambda s, v: torch.searchsorted(s, v, side="right"),
     [torch.tensor([[1.0, 2.0, 2.0], [0.0, 5.0, 9.0]], dtype=D), torch.tensor([[2.0, 0.0], [5.0, 10.0]], dtype=D)],
     index_out=(0,))
case("searchsorted_scalar", lambda s: torch.searchsorted(s, 2.0), [torch.tensor([1.0, 2.0, 3.0], dtype=D)], index_out=(0,))
case("bucketize_right", lambda v, b: torch.bucketize(v, b, right=True),
     [torch.tensor([[1.0, 2.5], [3.0, 0.0]], dtype=D), torch.tensor([1.0, 2.0, 3.0], dtype=D)], index_out=(0,))
case("repeat_interleave_negdim", lambda x: torch.repeat_interleave(x, 2, dim=-1), [torch.randn(2, 3, dtype=D)], grad=(0,))
case("repeat_interleave_output_size", lambda x, r: torch.repeat_interleave(x, r, dim=0, output_size=4),
     [torch.randn(3, 2, dtype=D), torch.tensor([1, 0, 3])], grad=(0,))
case("index_fill_negdim", lambda x, i: x.index_fill(-1, i, nan), [xi, Idx(torch.tensor([0, 2]))], grad=(0,))
case("index_copy_negdim", lambda x, i, s: x.index_copy(-2, i, s),
     [xi, Idx(torch.tensor([2, 0])), torch.randn(2, 4, dtype=D)], grad=(0, 2))
case("masked_scatter_all", lambda x, m, s: x.masked_scatter(m, s),
     [torch.randn(2, 2, dtype=D), torch.tensor([[True, True], [True, True]]), torch.randn(5, dtype=D)], grad=(0, 2))
sx, si, ss = torch.randn(5, dtype=D), torch.tensor([0, 1, 0, 4, 1, 0]), torch.randn(6, dtype=D)
for red in ("sum", "prod", "amax", "amin", "mean"):
    for inc in (True, False):
        case("scatter_reduce_%s_%s" % (red, "self" if inc else "noself"),
             lambda x, i, s, red=red, inc=inc: x.scatter_reduce(0, i, s, red, include_self=inc),
             [sx, Idx(si), ss], grad=(0, 2))
case("scatter_reduce_2d_mean", lambda x, i, s: x.scatter_reduce(1, i, s, "mean"),
     [torch.randn(2, 3, dtype=D), Idx(torch.tensor([[0, 0], [2, 1]])), torch.randn(2, 2, dtype=D)], grad=(0, 2))
case("scatter_reduce_int_mean", lambda x, i, s: x.scatter_reduce(0, i, s, "mean", include_self=False),
     [torch.tensor([5, 7, 9]), Idx(torch.tensor([0, 0, 2])), torch.tensor([4, -5, 3])])
case("index_put_accumulate", lambda x, i, v: x.index_put((i,), v, accumulate=True),
     [torch.randn(4, dtype=D), Idx(torch.tensor([0, 2, 0])), torch.randn(3, dtype=D)], grad=(0, 2))

# ---- probes: statistics and reductions ----
xs = torch.randn(4, 5, dtype=D)
case("var_mean_correction0", lambda x: torch.var_mean(x, dim=1, correction=0), [xs], grad=(0,))
case("var_mean_unbiased_all", lambda x: torch.var_mean(x, unbiased=False), [xs], grad=(0,))
case("std_mean_dims_keepdim", lambda x: torch.std_mean(x, dim=(0, 1), keepdim=True), [xs], grad=(0,))
case("std_mean_correction2", lambda x: torch.std_mean(x, -1, correction=2), [xs], grad=(0,))
case("count_nonzero_dims", lambda x: torch.count_nonzero(x, dim=(0, -1)),
     [torch.tensor([[[0.0, 1.0], [2.0, 0.0]], [[0.0, 0.0], [nan, 3.0]]])])
case("nansum_dims", lambda x: torch.nansum(x, dim=(0, 1)), [torch.tensor([[[nan, 1.0], [2.0, 0.5]]], dtype=D)], grad=(0,))
case("nanmean_all_nan_row", lambda x: torch.nanmean(x, dim=1), [torch.tensor([[nan, nan], [1.0, nan]], dtype=D)])
case("nansum_int", lambda x: torch.nansum(x), [torch.tensor([1, 2, 3])])
case("aminmax_keepdim_negdim", lambda x: torch.aminmax(x, dim=-1, keepdim=True), [xs])
case("aminmax_nan", lambda x: torch.aminmax(x), [torch.tensor([1.0, nan, -2.0])])
case("diff_append", lambda x, a: torch.diff(x, n=2, dim=0, append=a), [xs, torch.randn(2, 5, dtype=D)], grad=(0, 1))
case("diff_n0", lambda x: torch.diff(x, n=0), [xs])
case("diff_n_too_big", lambda x: torch.diff(x, n=7, dim=1), [xs], grad=(0,))
case("logcumsumexp_ninf", lambda x: torch.logcumsumexp(x, -1),
     [torch.tensor([[-inf, 0.0, 1.0], [2.0, -inf, -inf]], dtype=D)])
case("logcumsumexp_negdim", lambda x: torch.logcumsumexp(x, -2), [xs], grad=(0,))
case("fmax_nan", lambda a, b: torch.fmax(a, b),
     [torch.tensor([nan, 1.0, nan, 3.0], dtype=D), torch.tensor([2.0, nan, nan, -1.0], dtype=D)])
case("fmin_nan", lambda a, b: torch.fmin(a, b),
     [torch.tensor([nan, 1.0, nan, 3.0], dtype=D), torch.tensor([2.0, nan, nan, -1.0], dtype=D)])
case("fmax_int", lambda a, b: torch.fmax(a, b), [torch.tensor([1, 5]), torch.tensor([3, 2])])
case("cdist_p0", lambda a, b: torch.cdist(a, b, p=0), [torch.tensor([[1.0, 2.0], [0.0, 0.0]], dtype=D),
                                                      torch.tensor([[1.0, 3.0], [0.0, 0.0], [5.0, 2.0]], dtype=D)])
case("cdist_p15", lambda a, b: torch.cdist(a, b, p=1.5), [torch.randn(2, 3, 4, dtype=D), torch.randn(2, 2, 4, dtype=D)],
     grad=(0, 1))
case("kron_3d", lambda a, b: torch.kron(a, b), [torch.randn(2, 1, 2, dtype=D), torch.randn(3, 2, dtype=D)], grad=(0, 1))
case("tensordot_0", lambda a, b: torch.tensordot(a, b, dims=0), [torch.randn(2, 3, dtype=D), torch.randn(2, dtype=D)],
     grad=(0, 1))
case("tensordot_1", lambda a, b: torch.tensordot(a, b, dims=1), [torch.randn(2, 3, dtype=D), torch.randn(3, 4, dtype=D)],
     grad=(0, 1))
case("tensordot_pairs_neg", lambda a, b: torch.tensordot(a, b, dims=([-1, 0], [0, 2])),
     [torch.randn(2, 3, 4, dtype=D), torch.randn(4, 5, 2, dtype=D)], grad=(0, 1))
case("baddbmm_beta0_nan", lambda i, a, b: torch.baddbmm(i, a, b, beta=0, alpha=1.5),
     [torch.full((2, 2, 2), nan, dtype=D), torch.randn(2, 2, 3, dtype=D), torch.randn(2, 3, 2, dtype=D)], grad=(1, 2))
case("addbmm_broadcast", lambda i, a, b: torch.addbmm(i, a, b, beta=2, alpha=0.5),
     [torch.randn(2, dtype=D), torch.randn(3, 2, 4, dtype=D), torch.randn(3, 4, 2, dtype=D)], grad=(0, 1, 2))
case("addmv_defaults", lambda i, m, v: torch.addmv(i, m, v),
     [torch.randn(1, dtype=D), torch.randn(3, 2, dtype=D), torch.randn(2, dtype=D)], grad=(0, 1, 2))
case("median_even", lambda x: torch.median(x, dim=0), [torch.tensor([[4.0, 1.0], [2.0, 3.0], [1.0, 3.0], [8.0, 0.0]])],
     index_out=(1,))
case("median_ties", lambda x: torch.median(x, -1, keepdim=True), [torch.tensor([[2.0, 2.0, 1.0, 2.0]])], index_out=(1,))
case("nanmedian_all_nan", lambda x: torch.nanmedian(x, 1), [torch.tensor([[nan, nan], [1.0, nan]])], index_out=(1,))
case("kthvalue_negdim", lambda x: torch.kthvalue(x, 2, -2), [torch.tensor([[3.0, 1.0], [1.0, 2.0], [2.0, 0.0]])],
     index_out=(1,))
case("mode_ties", lambda x: torch.mode(x), [torch.tensor([[1.0, 2.0, 2.0, 1.0, 3.0], [5.0, 5.0, 4.0, 4.0, 4.0]])],
     index_out=(1,))
case("quantile_tensor_q_nearest", lambda x, q: torch.quantile(x, q, dim=1, interpolation="nearest"),
     [torch.tensor([[1.0, 4.0, 2.0, 8.0], [0.0, -1.0, 5.0, 3.0]], dtype=D), torch.tensor([0.0, 0.25, 0.5, 1.0], dtype=D)])
case("quantile_linear_grad", lambda x: torch.quantile(x, 0.35, dim=0, keepdim=True), [xs], grad=(0,))
case("nanquantile_midpoint", lambda x: torch.nanquantile(x, 0.5, dim=1, interpolation="midpoint"),
     [torch.tensor([[1.0, nan, 3.0, 4.0], [nan, nan, nan, nan]], dtype=D)])
case("sum_dtype_bool_i32", lambda x: torch.sum(x, dtype=torch.int32), [torch.tensor([True, True, False])])
case("cumsum_dtype_negdim", lambda x: torch.cumsum(x, -1, dtype=torch.float64), [torch.tensor([[1, 2, 3], [4, 5, 6]])])
case("mean_dtype_f64_dims", lambda x: torch.mean(x, (0, 1), dtype=D), [torch.randn(2, 3, 2)])
case("clamp_tensor_broadcast", lambda x, lo, hi: torch.clamp(x, lo, hi),
     [xs, torch.full((5,), -0.3, dtype=D), torch.tensor([[0.1], [0.5], [1.0], [2.0]], dtype=D)], grad=(0, 1, 2))
case("clamp_max_tensor_only", lambda x, hi: torch.clamp(x, max=hi), [xs, torch.zeros(4, 1, dtype=D)], grad=(0, 1))
case("diagonal_3d_negdims", lambda x: torch.diagonal(x, offset=-1, dim1=-1, dim2=0), [torch.randn(3, 2, 4, dtype=D)],
     grad=(0,))
case("diagonal_offset_out", lambda x: torch.diagonal(x, offset=5), [torch.randn(3, 4, dtype=D)])
case("trace_rect", lambda x: torch.trace(x), [torch.randn(2, 4, dtype=D)], grad=(0,))
case("mT_3d", lambda x: x.mT, [torch.randn(2, 3, 4, dtype=D)], grad=(0,))

# ---- edge cases: empty and 0-d inputs, zero norms, singular matrices, more option sets ----
case("norm_zero_grad", lambda x: torch.norm(x), [torch.zeros(3, dtype=D)], grad=(0,))
case("norm_p1_dims", lambda x: torch.norm(x, p=1, dim=(0, 1)), [x34], grad=(0,))
case("norm_fro_dim_keepdim", lambda x: torch.norm(x, p="fro", dim=1, keepdim=True), [x34], grad=(0,))
case("norm_p3_negdim", lambda x: torch.norm(x, 3, -1), [x34], grad=(0,))
case("vector_norm_empty_dims", lambda x: LA.vector_norm(x, dim=()), [x34], grad=(0,))
case("vector_norm_0d", lambda x: LA.vector_norm(x, 1), [torch.tensor(-2.5, dtype=D)], grad=(0,))
case("matrix_norm_empty_fro", lambda a: LA.matrix_norm(a), [torch.zeros(2, 0, 3, dtype=D)])
case("matrix_norm_f32_inf", lambda a: LA.matrix_norm(a, inf), [torch.randn(3, 5)], grad=(0,))
case("linalg_norm_vector_dim_list", lambda a: LA.norm(a, dim=(1,)), [x34], grad=(0,))
case("det_empty_batch", lambda a: LA.det(a), [torch.zeros(0, 3, 3, dtype=D)])
case("det_0x0", lambda a: LA.det(a), [torch.zeros(2, 0, 0, dtype=D)])
case("inv_0x0", lambda a: LA.inv(a), [torch.zeros(0, 0, dtype=D)])
case("slogdet_singular", lambda a: LA.slogdet(a), [torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=D)])
case("slogdet_f32", lambda a: LA.slogdet(a), [well(4, 4, dtype=torch.float32)], grad=(0,))
case("solve_batched_A_vector_B", lambda a, b: LA.solve(a, b), [well(2, 3, 3), torch.randn(3, dtype=D)], grad=(0, 1))
case("solve_f32", lambda a, b: LA.solve(a, b), [well(4, 4, dtype=torch.float32), torch.randn(4, 3)], grad=(0, 1))
case("linalg_cross_negdim", lambda a, b: LA.cross(a, b, dim=-2), [torch.randn(2, 3, 2, dtype=D), torch.randn(2, 3, 2, dtype=D)],
     grad=(0, 1))
case("einsum_spaces_upper", lambda a, b: torch.einsum("Ab, bC -> CA", a, b),
     [torch.randn(2, 3, dtype=D), torch.randn(3, 4, dtype=D)], grad=(0, 1))
case("einsum_three_ellipsis", lambda a, b, c: torch.einsum("...i,...i,...->...", a, b, c),
     [torch.randn(2, 3, dtype=D), torch.randn(3, dtype=D), torch.randn(2, dtype=D)], grad=(0, 1, 2))
case("einsum_ellipsis_middle", lambda a: torch.einsum("b...i->i...b", a), [torch.randn(2, 3, 4, 5, dtype=D)], grad=(0,))
case("einsum_list_operands", lambda a, b: torch.einsum("ij,jk", [a, b]), [torch.randn(2, 3, dtype=D), torch.randn(3, 2, dtype=D)],
     grad=(0, 1))
case("einsum_repeat_and_sum", lambda a: torch.einsum("iij->j", a), [torch.randn(3, 3, 2, dtype=D)], grad=(0,))
case("tensor_split_more_than_size", lambda x: torch.tensor_split(x, 5), [torch.randn(3, dtype=D)], grad=(0,))
case("tensor_split_unordered", lambda x: torch.tensor_split(x, [3, 1]), [torch.randn(5, dtype=D)], grad=(0,))
case("topk_k0", lambda x: torch.topk(x, 0), [torch.tensor([1.0, 2.0, 3.0])], index_out=(1,))
case("topk_smallest_dim0", lambda x: torch.topk(x, 2, dim=0, largest=False),
     [torch.tensor([[3.0, 1.0], [1.0, 2.0], [2.0, 0.0]], dtype=D)], grad=(0,), index_out=(1,))
case("argwhere_0d", lambda x: torch.argwhere(x), [torch.tensor(5.0)], index_out=(0,))
case("tril_indices_zero_rows", lambda: torch.tril_indices(0, 3), [], index_out=(0,))
case("triu_indices_neg_offset", lambda: torch.triu_indices(4, 2, -2), [], index_out=(0,))
case("broadcast_tensors_0d", lambda a, b: torch.broadcast_tensors(a, b),
     [torch.tensor(2.0, dtype=D), torch.randn(2, 3, dtype=D)], grad=(0, 1))
case("unique_bool_dim", lambda x: torch.unique(x, dim=0, return_counts=True),
     [torch.tensor([[True, False], [False, False], [True, False]])])
case("unique_empty", lambda x: torch.unique(x, return_inverse=True, return_counts=True), [torch.zeros(0)], index_out=(1,))
case("scatter_reduce_2d_amax_noself", lambda x, i, s: x.scatter_reduce(0, i, s, "amax", include_self=False),
     [torch.randn(3, 2, dtype=D), Idx(torch.tensor([[0, 2], [0, 2]])), torch.randn(2, 2, dtype=D)], grad=(0, 2))
case("floor_divide_by_zero_inf", lambda a, b: torch.floor_divide(a, b),
     [torch.tensor([1.0, -1.0, 0.0, inf, 5.0], dtype=D), torch.tensor([0.0, 0.0, 2.0, 3.0, inf], dtype=D)])
case("floor_divide_int_by_float", lambda a: torch.floor_divide(a, 2.5), [torch.tensor([5, -6, 7])])
case("searchsorted_right_int32_sorter_2d", lambda s, v, so: torch.searchsorted(s, v, right=True, out_int32=True, sorter=so),
     [torch.tensor([[3.0, 1.0, 2.0], [0.0, 9.0, 5.0]], dtype=D), torch.tensor([[2.0], [5.0]], dtype=D),
      Idx(torch.tensor([[1, 2, 0], [0, 2, 1]]))], index_out=(0,))
case("diag_embed_3d_neg_dims", lambda x: torch.diag_embed(x, 0, -3, -1), [torch.randn(2, 2, 3, dtype=D)], grad=(0,))

# ---- joining, counting and product conveniences ----
r2, r3 = torch.randn(2, dtype=D), torch.randn(3, dtype=D)
case("hstack_1d", lambda a, b: torch.hstack((a, b)), [r2, r3], grad=(0, 1))
case("hstack_2d", lambda a, b: torch.hstack((a, b)), [torch.randn(2, 1, dtype=D), torch.randn(2, 3, dtype=D)], grad=(0, 1))
case("vstack", lambda a, b: torch.vstack((a, b)), [r3, torch.randn(2, 3, dtype=D)], grad=(0, 1))
case("row_stack", lambda a, b: torch.row_stack((a, b)), [r3, r3 * 2], grad=(0, 1))
case("dstack", lambda a, b: torch.dstack((a, b)), [torch.randn(2, 3, dtype=D), torch.randn(2, 3, 2, dtype=D)], grad=(0, 1))
case("column_stack", lambda a, b, c: torch.column_stack((a, b, c)),
     [r2, torch.randn(2, 2, dtype=D), torch.randn(2, dtype=D)], grad=(0, 1, 2))
case("atleast_3d", lambda a, b, c: torch.atleast_3d((a, b, c)),
     [torch.tensor(2.0, dtype=D), r3, torch.randn(2, 3, dtype=D)], grad=(0, 1, 2))
case("atleast_2d_one", lambda a: torch.atleast_2d(a), [r3], grad=(0,))
case("unflatten", lambda x: torch.unflatten(x, -1, (2, -1)), [torch.randn(3, 6, dtype=D)], grad=(0,))
case("rot90", lambda x: torch.rot90(x), [torch.randn(2, 3, dtype=D)], grad=(0,))
case("rot90_k3_dims", lambda x: torch.rot90(x, 3, [2, 0]), [torch.randn(2, 3, 4, dtype=D)], grad=(0,))
case("rot90_neg", lambda x: torch.rot90(x, -2, [0, 1]), [torch.randn(2, 3, dtype=D)], grad=(0,))
case("flipud_fliplr", lambda x: (torch.flipud(x), torch.fliplr(x)), [torch.randn(2, 3, dtype=D)], grad=(0,))
case("ravel_swapaxes", lambda x: (torch.ravel(x.mT), torch.swapaxes(x, 0, -1), torch.swapdims(x, 1, 0)),
     [torch.randn(2, 3, dtype=D)], grad=(0,))
case("meshgrid_ij", lambda a, b, c: torch.meshgrid(a, b, c, indexing="ij"), [r2, r3, torch.tensor(1.5, dtype=D)],
     grad=(0, 1, 2))
case("meshgrid_xy", lambda a, b: torch.meshgrid(a, b, indexing="xy"), [r2, r3], grad=(0, 1))
case("block_diag", lambda a, b, c: torch.block_diag(a, b, c),
     [torch.tensor(1.5, dtype=D), r3, torch.randn(2, 2, dtype=D)], grad=(0, 1, 2))
case("block_diag_promote", lambda a, b: torch.block_diag(a, b), [torch.tensor([[1, 2]]), torch.randn(1, 1, dtype=D)])
case("cartesian_prod", lambda a, b, c: torch.cartesian_prod(a, b, c), [r2, r3, torch.randn(2, dtype=D)], grad=(0, 1, 2))
case("diagflat", lambda x: torch.diagflat(x, -1), [torch.randn(2, 2, dtype=D)], grad=(0,))
case("cummax", lambda x: torch.cummax(x, 0),
     [torch.tensor([1.0, 3.0, 3.0, nan, 2.0, nan], dtype=D)], grad=(0,), index_out=(1,))
case("cummax_2d_negdim", lambda x: torch.cummax(x, -1), [torch.randn(3, 5, dtype=D)], grad=(0,), index_out=(1,))
case("cummin_dim0_int", lambda x: torch.cummin(x, 0), [torch.tensor([[3, 1], [1, 1], [2, 0], [0, 4]])], index_out=(1,))
case("cummin_ties", lambda x: torch.cummin(x, 1), [torch.tensor([[2.0, 1.0, 1.0, 3.0, 1.0]], dtype=D)], grad=(0,),
     index_out=(1,))
case("bincount", lambda x: torch.bincount(x), [torch.tensor([1, 3, 1, 0])])
case("bincount_weights_minlength", lambda x, w: torch.bincount(x, w, minlength=6),
     [torch.tensor([1, 3, 1]), torch.tensor([0.5, 1.0, 2.0], dtype=D)])
case("histc", lambda x: torch.histc(x, bins=4), [torch.tensor([1.0, 2.0, 1.0, 4.0])])
case("histc_range", lambda x: torch.histc(x, bins=5, min=-1, max=1), [torch.randn(20, dtype=D)])
case("histc_constant", lambda x: torch.histc(x, bins=3), [torch.tensor([2.0, 2.0])])
case("isin", lambda a, b: torch.isin(a, b), [torch.tensor([[1, 2], [3, 4]]), torch.tensor([2, 3, 9])])
case("isin_invert", lambda a, b: torch.isin(a, b, invert=True), [torch.tensor([1.0, nan, 2.5]), torch.tensor([[2.5, nan]])])
case("take", lambda x, i: torch.take(x, i), [torch.randn(2, 3, dtype=D), Idx(torch.tensor([[5, 0], [-1, 2]]))], grad=(0,))
case("msort", lambda x: torch.msort(x), [torch.randn(3, 2, dtype=D)], grad=(0,))
case("unique_consecutive", lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True),
     [torch.tensor([1, 1, 2, 2, 3, 1, 1, 2])], index_out=(1,))
case("unique_consecutive_dim", lambda x: torch.unique_consecutive(x, dim=1),
     [torch.tensor([[1, 1, 2, 1], [0, 0, 3, 0]])])
case("addr", lambda i, a, b: torch.addr(i, a, b, beta=0.5, alpha=2), [torch.randn(2, 3, dtype=D), r2, r3], grad=(0, 1, 2))
case("addr_beta0_nan", lambda i, a, b: torch.addr(i, a, b, beta=0), [torch.full((2, 3), nan, dtype=D), r2, r3], grad=(1, 2))
case("inner", lambda a, b: torch.inner(a, b), [torch.randn(2, 3, dtype=D), torch.randn(4, 3, dtype=D)], grad=(0, 1))
case("inner_0d", lambda a, b: torch.inner(a, b), [torch.tensor(2.0, dtype=D), torch.randn(2, dtype=D)], grad=(0, 1))
case("multi_dot", lambda a, b, c: LA.multi_dot([a, b, c]),
     [r3, torch.randn(3, 4, dtype=D), torch.randn(4, 2, dtype=D)], grad=(0, 1, 2))
case("multi_dot_vectors", lambda a, b, c: LA.multi_dot([a, b, c]), [r3, torch.randn(3, 2, dtype=D), r2], grad=(0, 1, 2))
case("chain_matmul", lambda a, b: torch.chain_matmul(a, b), [torch.randn(2, 3, dtype=D), torch.randn(3, 2, dtype=D)],
     grad=(0, 1))
case("vecdot", lambda a, b: LA.vecdot(a, b, dim=0), [torch.randn(3, 2, dtype=D), torch.randn(3, 1, dtype=D)], grad=(0, 1))
case("dist", lambda a, b: torch.dist(a, b), [torch.randn(2, 3, dtype=D), torch.randn(3, dtype=D)], grad=(0, 1))
case("dist_p1_inf", lambda a, b: (torch.dist(a, b, 1), torch.dist(a, b, inf)), [r3, r3.flip(0)], grad=(0, 1))
case("cov", lambda x: torch.cov(x), [torch.randn(3, 5, dtype=D)], grad=(0,))
case("cov_1d_correction0", lambda x: torch.cov(x, correction=0), [torch.randn(5, dtype=D)], grad=(0,))
case("cov_weights", lambda x, f, a: torch.cov(x, fweights=f, aweights=a),
     [torch.randn(2, 4, dtype=D), torch.tensor([1, 2, 1, 3]), torch.tensor([0.5, 1.0, 2.0, 1.0], dtype=D)], grad=(0,))
case("cov_int", lambda x: torch.cov(x), [torch.tensor([[1, 2, 4], [0, 3, 3]])])
case("corrcoef", lambda x: torch.corrcoef(x), [torch.randn(3, 6, dtype=D)])  # 1.13 cannot differentiate it
case("vander", lambda x: torch.vander(x), [r3])  # 1.13 cannot differentiate it
case("vander_n_increasing", lambda x: torch.vander(x, N=4, increasing=True), [torch.tensor([1, 2, -3])])

# ---- triangular factorization and solves ----
def spd(*shape, dtype=D):
    m = torch.randn(*shape, dtype=dtype)
    return m @ m.mT + shape[-1] * torch.eye(shape[-1], dtype=dtype)


case("cholesky", lambda a: LA.cholesky(a), [spd(4, 4)], grad=(0,))
case("cholesky_upper_batched", lambda a: LA.cholesky(a, upper=True), [spd(2, 3, 3)], grad=(0,))
case("cholesky_f32", lambda a: LA.cholesky(a), [spd(3, 3, dtype=torch.float32)], grad=(0,))
case("cholesky_lower_only", lambda a: LA.cholesky(a), [spd(3, 3) + torch.triu(torch.ones(3, 3, dtype=D), 1) * 5])
case("torch_cholesky_upper", lambda a: torch.cholesky(a, True), [spd(3, 3)], grad=(0,))
tri = torch.randn(3, 3, dtype=D) + 3 * torch.eye(3, dtype=D)
case("solve_triangular_lower", lambda a, b: LA.solve_triangular(a, b, upper=False), [tri, torch.randn(3, 2, dtype=D)],
     grad=(0, 1))
case("solve_triangular_upper_unit", lambda a, b: LA.solve_triangular(a, b, upper=True, unitriangular=True),
     [tri, torch.randn(2, 3, 2, dtype=D)], grad=(0, 1))
case("solve_triangular_right", lambda a, b: LA.solve_triangular(a, b, upper=True, left=False),
     [tri, torch.randn(4, 3, dtype=D)], grad=(0, 1))
case("cholesky_solve", lambda b, l: torch.cholesky_solve(b, l), [torch.randn(3, 2, dtype=D), LA.cholesky(spd(3, 3))],
     grad=(0, 1))
case("cholesky_solve_upper", lambda b, l: torch.cholesky_solve(b, l, upper=True),
     [torch.randn(2, 3, 1, dtype=D), LA.cholesky(spd(2, 3, 3), upper=True)], grad=(0, 1))

# ---- the trapezoid rule ----
yt = torch.randn(3, 4, dtype=D)
case("trapezoid", lambda y: torch.trapezoid(y), [yt], grad=(0,))
case("trapezoid_x_dim0", lambda y, x: torch.trapezoid(y, x, dim=0), [yt, torch.tensor([0.0, 0.5, 2.0], dtype=D)], grad=(0, 1))
case("trapz_dx", lambda y: torch.trapz(y, dx=0.3), [yt], grad=(0,))
case("trapezoid_x_broadcast", lambda y, x: torch.trapezoid(y, x), [yt, torch.randn(3, 4, dtype=D)], grad=(0, 1))
case("trapezoid_int", lambda y: torch.trapezoid(y), [torch.tensor([1, 2, 4])])
case("cumulative_trapezoid", lambda y, x: torch.cumulative_trapezoid(y, x, dim=-1), [yt, torch.arange(4, dtype=D) ** 2],
     grad=(0, 1))
case("cumulative_trapezoid_dx_dim0", lambda y: torch.cumulative_trapezoid(y, dx=2, dim=0), [yt], grad=(0,))

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "tensor_more.json"), "w") as f:
    json.dump(cases, f, indent=None, separators=(",", ":"), sort_keys=True)
print("wrote", len(cases), "cases")
