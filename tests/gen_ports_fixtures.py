# gen_ports_fixtures.py: PyTorch's values and gradients for the calls PyTorch ports hit first (issue 28),
# checked by tests/ports_spec.lua eagerly, traced, compiled and through autograd.
# Run: /usr/bin/python3 tests/gen_ports_fixtures.py  (writes tests/fixtures/ports.json)
# Each case: inputs (index inputs written 1-based, negative ones unchanged, as ds takes them), the outputs
# (index outputs 1-based) and, for the inputs marked differentiable, the gradient of sum_k <w_k, out_k> with
# w_k = cos(1, 2, ..., numel) in out_k's shape.
import json
import os
import torch
import torch.nn.functional as F

DT = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64", torch.int32: "i32",
      torch.uint8: "u8", torch.bool: "bool"}


def enc(t):
    t = t.detach()
    data = t.reshape(-1).tolist()
    if t.dtype == torch.bool:
        data = [1 if v else 0 for v in data]
    data = [None if isinstance(v, float) and v != v else v for v in data]  # NaN as null
    return {"shape": list(t.shape), "dtype": DT[t.dtype], "data": data}


class Idx:
    """an index input: given to PyTorch as it is, to ds 1-based (negative values unchanged)"""
    def __init__(self, t):
        self.t = t


def weights(o):
    return torch.cos(torch.arange(1, o.numel() + 1, dtype=torch.float64)).reshape(o.shape).to(o.dtype)


cases = {}


def case(name, fn, inputs, grad=(), index_out=()):
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
nan = float("nan")

# ---- cross_entropy / nll_loss: PyTorch's default ignore_index -100 ----
logits = torch.randn(5, 4, dtype=D)
tgt = torch.tensor([1, -100, 3, 0, -100])
case("cross_entropy_ignore", lambda x, t: F.cross_entropy(x, t), [logits, Idx(tgt)], grad=(0,))
case("cross_entropy_ignore_none", lambda x, t: F.cross_entropy(x, t, reduction="none"), [logits, Idx(tgt)], grad=(0,))
w = torch.rand(4, dtype=D) + 0.5
case("cross_entropy_ignore_weight_smooth", lambda x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.1),
     [logits, Idx(tgt), w], grad=(0,))
seq = torch.randn(2, 4, 3, dtype=D)
seq_t = torch.tensor([[0, -100, 2], [-100, 3, 1]])
case("cross_entropy_ignore_seq", lambda x, t: F.cross_entropy(x, t), [seq, Idx(seq_t)], grad=(0,))
case("cross_entropy_ignore_index_1", lambda x, t: F.cross_entropy(x, t, ignore_index=1), [logits, Idx(tgt.clamp(min=0))],
     grad=(0,))
case("nll_loss_ignore", lambda x, t: F.nll_loss(x.log_softmax(1), t), [logits, Idx(tgt)], grad=(0,))

# ---- dtype = ----
xi = torch.tensor([[1, 2, 3], [2147483647, 5, -6]], dtype=torch.int32)
case("sum_dtype_i32", lambda x: x.sum(dtype=torch.int32), [xi])
case("sum_dim_dtype_f64", lambda x: x.sum(1, dtype=torch.float64), [xi])
case("mean_dtype_f64", lambda x: x.mean(0, dtype=torch.float64), [xi])
xf = torch.randn(3, 4)
case("cumsum_dtype_f64", lambda x: x.cumsum(1, dtype=torch.float64), [xf], grad=(0,))
case("sum_f32_as_f64", lambda x: x.sum(0, keepdim=True, dtype=torch.float64), [xf], grad=(0,))
case("softmax_dtype_f64", lambda x: x.softmax(1, dtype=torch.float64), [xf], grad=(0,))

# ---- order statistics ----
x = torch.randn(4, 5, dtype=D)
case("median_all", lambda x: x.median(), [x], grad=(0,))
case("median_dim", lambda x: x.median(1), [x], grad=(0,), index_out=(1,))
case("median_dim_keepdim", lambda x: x.median(0, keepdim=True), [x], grad=(0,), index_out=(1,))
xn = torch.tensor([[1., nan, 2., 0.5], [3., 1., 2., 4.], [nan, nan, 1., 7.]], dtype=D)
case("median_nan", lambda x: x.median(1), [xn], index_out=(1,))
case("nanmedian_dim", lambda x: x.nanmedian(1), [xn], index_out=(1,))
case("nanmedian_all", lambda x: x.nanmedian(), [xn])
case("kthvalue", lambda x: x.kthvalue(2, 1), [x], grad=(0,), index_out=(1,))
case("kthvalue_dim0_keepdim", lambda x: x.kthvalue(3, 0, True), [x], grad=(0,), index_out=(1,))
xm = torch.tensor([[1., 3, 3, 1, 2], [2, 2, 5, 5, 7], [4, 1, 4, 1, 9]], dtype=D)
case("mode", lambda x: x.mode(1), [xm], grad=(0,), index_out=(1,))
case("mode_dim0", lambda x: x.mode(0), [xm.t().contiguous()], grad=(0,), index_out=(1,))
case("quantile_scalar", lambda x: x.quantile(0.3, dim=1), [x], grad=(0,))
case("quantile_all", lambda x: x.quantile(0.75), [x], grad=(0,))
q = torch.tensor([0.1, 0.5, 0.9], dtype=D)
case("quantile_list_keepdim", lambda x, q: x.quantile(q, dim=0, keepdim=True), [x, q], grad=(0,))
case("quantile_list_all_keepdim", lambda x, q: x.quantile(q, keepdim=True), [x, q], grad=(0,))
for how in ["lower", "higher", "midpoint", "nearest"]:
    case("quantile_" + how, lambda x, how=how: x.quantile(0.4, dim=1, interpolation=how), [x], grad=(0,))
case("quantile_nan", lambda x: x.quantile(0.5, dim=1), [xn])
case("nanquantile", lambda x, q: x.nanquantile(q, dim=1), [xn, q])

# ---- reductions ----
xz = torch.tensor([[0., 1., 0., 2.], [3., 0., 0., 0.]], dtype=D)
case("count_nonzero", lambda x: torch.count_nonzero(x), [xz])
case("count_nonzero_dim", lambda x: torch.count_nonzero(x, dim=1), [xz])
case("nansum", lambda x: x.nansum(1), [xn])
case("nanmean", lambda x: x.nanmean(1, keepdim=True), [xn])
case("nanmean_all", lambda x: x.nanmean(), [xn])
case("aminmax_dim", lambda x: torch.aminmax(x, dim=0), [x])
case("aminmax_all", lambda x: torch.aminmax(x), [x])
case("logcumsumexp", lambda x: x.logcumsumexp(1), [torch.tensor([[-1000., 0., 3.], [1., 2., 3.]], dtype=D)], grad=(0,))
case("logcumsumexp_dim0", lambda x: x.logcumsumexp(0), [x], grad=(0,))
case("diff", lambda x: x.diff(), [x], grad=(0,))
case("diff_n2_dim0_prepend", lambda x, p: torch.diff(x, n=2, dim=0, prepend=p), [x, torch.randn(1, 5, dtype=D)],
     grad=(0, 1))
case("diff_bool", lambda x: x.diff(), [torch.tensor([True, True, False, True])])
case("var_mean", lambda x: torch.var_mean(x, 1), [x], grad=(0,))
case("std_mean_keepdim_biased", lambda x: torch.std_mean(x, 0, unbiased=False, keepdim=True), [x], grad=(0,))

# ---- indexing ----
xs = torch.randn(3, 4, dtype=D)
case("repeat_interleave_int", lambda x: x.repeat_interleave(2, dim=1), [xs], grad=(0,))
case("repeat_interleave_flat", lambda x: x.repeat_interleave(3), [xs], grad=(0,))
case("repeat_interleave_tensor", lambda x, r: x.repeat_interleave(r, dim=0), [xs, torch.tensor([1, 0, 3])], grad=(0,))
case("repeat_interleave_counts", lambda r: torch.repeat_interleave(r), [torch.tensor([2, 0, 3])], index_out=(0,))
ix = torch.tensor([2, 0])
case("index_fill", lambda x, i: x.index_fill(1, i, -1.5), [xs, Idx(ix)], grad=(0,))
case("index_fill_tensor_value", lambda x, i, v: x.index_fill(0, i, v), [xs, Idx(ix), torch.tensor(2.5, dtype=D)],
     grad=(0, 2))
src = torch.randn(3, 2, dtype=D)
case("index_copy", lambda x, i, s: x.index_copy(1, i, s), [xs, Idx(torch.tensor([3, 1])), src], grad=(0, 2))
mask = torch.tensor([[True, False, True, False], [False, False, True, True], [True, True, False, False]])
case("masked_scatter", lambda x, m, s: x.masked_scatter(m, s), [xs, mask, torch.randn(8, dtype=D)], grad=(0, 2))
case("masked_scatter_broadcast", lambda x, m, s: x.masked_scatter(m, s),
     [xs, torch.tensor([True, False, False, True]), torch.randn(3, 5, dtype=D)], grad=(0, 2))
case("take_along_dim", lambda x, i: torch.take_along_dim(x, i, dim=1), [xs, Idx(xs.argsort(1))], grad=(0,))
case("take_along_dim_broadcast", lambda x, i: torch.take_along_dim(x, i, dim=0),
     [xs, Idx(torch.tensor([[2], [0]]))], grad=(0,))
case("take_along_dim_flat", lambda x, i: torch.take_along_dim(x, i), [xs, Idx(torch.tensor([11, 0, 5]))], grad=(0,))
bounds = torch.tensor([1., 3., 5., 7.], dtype=D)
vals = torch.tensor([[0., 3., 6.], [7., 8., 1.]], dtype=D)
case("searchsorted", lambda s, v: torch.searchsorted(s, v), [bounds, vals], index_out=(0,))
case("searchsorted_right", lambda s, v: torch.searchsorted(s, v, right=True), [bounds, vals], index_out=(0,))
case("searchsorted_nd", lambda s, v: torch.searchsorted(s, v, side="right"),
     [torch.tensor([[1., 2., 3.], [2., 4., 6.]], dtype=D), torch.tensor([[2.], [5.]], dtype=D)], index_out=(0,))
case("bucketize", lambda v, b: torch.bucketize(v, b), [vals, bounds], index_out=(0,))
case("bucketize_right_int32", lambda v, b: torch.bucketize(v, b, right=True, out_int32=True), [vals, bounds],
     index_out=(0,))

# ---- linear algebra ----
x3 = torch.randn(2, 3, 4, dtype=D)
case("diagonal", lambda x: x.diagonal(), [xs], grad=(0,))
case("diagonal_offset_dims", lambda x: x.diagonal(1, 1, 2), [x3], grad=(0,))
case("diagonal_negative", lambda x: torch.diagonal(x, -1, 2, 0), [x3], grad=(0,))
case("trace", lambda x: x.trace(), [xs], grad=(0,))
case("trace_int", lambda x: torch.trace(x), [torch.arange(9).reshape(3, 3)])
case("mT", lambda x: x.mT, [x3], grad=(0,))
case("movedim", lambda x: torch.movedim(x, (0, 2), (2, 0)), [x3], grad=(0,))
lo, hi = torch.randn(3, 4, dtype=D) - 0.5, torch.randn(4, dtype=D) + 0.5
case("clamp_tensors", lambda x, a, b: x.clamp(a, b), [xs, lo, hi], grad=(0, 1, 2))
case("clamp_min_tensor", lambda x, a: torch.clamp(x, min=a), [xs, lo], grad=(0, 1))
xa = torch.tensor([1., nan, 3., nan, 2.], dtype=D)
xb = torch.tensor([nan, 2., 1., nan, 2.], dtype=D)
case("fmax", lambda a, b: torch.fmax(a, b), [xa, xb], grad=(0, 1))
case("fmin", lambda a, b: torch.fmin(a, b), [xa, xb], grad=(0, 1))
b1, b2 = torch.randn(2, 3, 4, dtype=D), torch.randn(2, 4, 5, dtype=D)
case("baddbmm", lambda i, a, b: torch.baddbmm(i, a, b, beta=0.5, alpha=2), [torch.randn(3, 5, dtype=D), b1, b2],
     grad=(0, 1, 2))
case("addbmm", lambda i, a, b: torch.addbmm(i, a, b), [torch.randn(3, 5, dtype=D), b1, b2], grad=(0, 1, 2))
case("addmv", lambda i, m, v: torch.addmv(i, m, v, beta=2, alpha=-1),
     [torch.randn(3, dtype=D), xs, torch.randn(4, dtype=D)], grad=(0, 1, 2))
case("tensordot", lambda a, b: torch.tensordot(a, b, dims=2), [x3, torch.randn(3, 4, 2, dtype=D)], grad=(0, 1))
case("tensordot_lists", lambda a, b: torch.tensordot(a, b, dims=([0, 2], [1, 0])),
     [x3, torch.randn(4, 2, 6, dtype=D)], grad=(0, 1))
p1, p2 = torch.randn(4, 3, dtype=D), torch.randn(5, 3, dtype=D)
case("cdist", lambda a, b: torch.cdist(a, b), [p1, p2], grad=(0, 1))
case("cdist_p1_batched", lambda a, b: torch.cdist(a, b, p=1), [x3, torch.randn(2, 5, 4, dtype=D)], grad=(0, 1))
case("cdist_p3", lambda a, b: torch.cdist(a, b, p=3), [p1, p2], grad=(0, 1))
case("cdist_inf", lambda a, b: torch.cdist(a, b, p=float("inf")), [p1, p2], grad=(0, 1))
case("kron", lambda a, b: torch.kron(a, b), [torch.randn(2, 3, dtype=D), torch.randn(3, 2, dtype=D)], grad=(0, 1))
case("kron_ranks", lambda a, b: torch.kron(a, b), [torch.randn(2, dtype=D), torch.randn(2, 3, dtype=D)], grad=(0, 1))

# ---- nn.functional ----
xc = torch.randn(2, 3, 7, dtype=D)
case("prelu", lambda x, w: F.prelu(x, w), [xc, torch.tensor([0.25, -0.5, 2.], dtype=D)], grad=(0, 1))
case("prelu_shared", lambda x, w: F.prelu(x, w), [xc, torch.tensor([0.1], dtype=D)], grad=(0, 1))
case("threshold", lambda x: F.threshold(x, 0.1, 20.), [xc], grad=(0,))
case("softmin", lambda x: F.softmin(x, dim=1), [xc], grad=(0,))
case("max_pool1d", lambda x: F.max_pool1d(x, 3, stride=2, padding=1), [xc], grad=(0,))
case("max_pool1d_ceil", lambda x: F.max_pool1d(x, 2, ceil_mode=True), [xc], grad=(0,))
case("avg_pool1d", lambda x: F.avg_pool1d(x, 3, stride=2, padding=1, count_include_pad=False), [xc], grad=(0,))
case("avg_pool1d_unbatched", lambda x: F.avg_pool1d(x, 2), [xc[0]], grad=(0,))
case("adaptive_avg_pool1d", lambda x: F.adaptive_avg_pool1d(x, 3), [xc], grad=(0,))
case("adaptive_max_pool1d", lambda x: F.adaptive_max_pool1d(x, 4), [xc], grad=(0,))
case("pixel_shuffle", lambda x: F.pixel_shuffle(x, 2), [torch.randn(2, 8, 3, 2, dtype=D)], grad=(0,))
case("pixel_unshuffle", lambda x: F.pixel_unshuffle(x, 2), [torch.randn(1, 2, 4, 6, dtype=D)], grad=(0,))

# ---- cells (their parameters are inputs 3..6 / 4..7) ----
for name, cls, H in [("lstm_cell", torch.nn.LSTMCell, 4), ("gru_cell", torch.nn.GRUCell, 4),
                     ("rnn_cell_relu", torch.nn.RNNCell, 4)]:
    kwargs = {"nonlinearity": "relu"} if name == "rnn_cell_relu" else {}
    m = cls(3, H, dtype=D, **kwargs)
    params = [m.weight_ih, m.weight_hh, m.bias_ih, m.bias_hh]
    xin, h0 = torch.randn(2, 3, dtype=D), torch.randn(2, H, dtype=D)
    if name == "lstm_cell":
        def run(x, h, c, *p, m=m):
            return m(x, (h, c))
        case(name, run, [xin, h0, torch.randn(2, H, dtype=D)] + [p.detach() for p in params], grad=(0, 1, 2))
    else:
        def run(x, h, *p, m=m):
            return m(x, h)
        case(name, run, [xin, h0] + [p.detach() for p in params], grad=(0, 1))

case("square_subsequent_mask", lambda: torch.nn.Transformer.generate_square_subsequent_mask(4), [])

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "ports.json"), "w") as f:
    json.dump(cases, f, indent=None, separators=(",", ":"), sort_keys=True)
print("wrote", len(cases), "cases")
