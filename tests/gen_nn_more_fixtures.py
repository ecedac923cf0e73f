# gen_nn_more_fixtures.py: PyTorch 1.13's values and input gradients for the nn calls of issue 28's last list
# (the remaining losses with CTC, the shrink family, unfold/fold, conv3d and the transposed 1-D/3-D convolutions,
# nn.Transformer.generate_square_subsequent_mask), checked by tests/nn_more_spec.lua eagerly, traced, compiled
# and through autograd.
# Run: /usr/bin/python3 tests/gen_nn_more_fixtures.py  (writes tests/fixtures/nn_more.json)
# Each case: inputs (class-index inputs written 1-based, as ds takes them), the outputs and, for the inputs
# marked differentiable, the gradient of sum_k <w_k, out_k> with w_k = cos(1, 2, ..., numel) in out_k's shape.
import json
import os
import torch
import torch.nn.functional as F

DT = {torch.float32: "f32", torch.float64: "f64", torch.int64: "i64", torch.int32: "i32", torch.bool: "bool"}


def enc(t):
    t = t.detach()
    data = t.reshape(-1).tolist()
    if t.dtype == torch.bool:
        data = [1 if v else 0 for v in data]
    return {"shape": list(t.shape), "dtype": DT[t.dtype], "data": data}


class Idx:
    """a class-index input: given to PyTorch as it is, to ds 1-based"""
    def __init__(self, t):
        self.t = t


def weights(o):
    return torch.cos(torch.arange(1, o.numel() + 1, dtype=torch.float64)).reshape(o.shape).to(o.dtype)


cases = {}


def case(name, fn, inputs, grad=()):
    torch_in, ds_in = [], []
    for i, x in enumerate(inputs):
        if isinstance(x, Idx):
            torch_in.append(x.t)
            ds_in.append(enc(x.t + 1))
        else:
            x = x.detach().clone().requires_grad_(i in grad)
            torch_in.append(x)
            ds_in.append(enc(x))
    outs = fn(*torch_in)
    if not isinstance(outs, (tuple, list)):
        outs = (outs,)
    entry = {"inputs": ds_in, "want": [enc(o) for o in outs]}
    if grad:
        total = sum((o * weights(o)).sum() for o in outs if o.dtype.is_floating_point)
        gs = torch.autograd.grad(total, [torch_in[i] for i in grad], allow_unused=True)
        entry["grad"] = {str(i + 1): enc(g if g is not None else torch.zeros_like(torch_in[i]))
                         for i, g in zip(grad, gs)}
    cases[name] = entry


torch.manual_seed(0)
D = torch.float64
f32 = torch.float32


def randn(*s, dtype=D):
    return torch.randn(*s, dtype=dtype)


def pm1(*s):
    return torch.randint(0, 2, s).to(D) * 2 - 1


# ---- losses ----
a, p, n = randn(5, 4), randn(5, 4), randn(5, 4)
case("pairwise_distance", lambda a, b: F.pairwise_distance(a, b), [a, p], grad=(0, 1))
case("pairwise_distance_p1_keepdim", lambda a, b: F.pairwise_distance(a, b, 1, 1e-3, True), [a, p], grad=(0, 1))
case("triplet_margin_loss", lambda a, p, n: F.triplet_margin_loss(a, p, n), [a, p, n], grad=(0, 1, 2))
case("triplet_margin_loss_p1_swap_none",
     lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=0.5, p=1, swap=True, reduction="none"), [a, p, n],
     grad=(0, 1, 2))
case("triplet_margin_loss_p3_eps_sum",
     lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=2.0, p=3, eps=1e-3, reduction="sum"), [a, p, n],
     grad=(0, 1, 2))
case("triplet_margin_loss_unbatched", lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=3.0), [a[0], p[0], n[0]],
     grad=(0, 1, 2))
case("triplet_margin_loss_f32", lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=2.0),
     [a.float(), p.float(), n.float()], grad=(0,))
y = pm1(5)
case("cosine_embedding_loss", lambda a, b, y: F.cosine_embedding_loss(a, b, y), [a, p, y], grad=(0, 1))
case("cosine_embedding_loss_margin_none",
     lambda a, b, y: F.cosine_embedding_loss(a, b, y, margin=-0.2, reduction="none"), [a, p, y], grad=(0, 1))
case("cosine_embedding_loss_unbatched_sum",
     lambda a, b, y: F.cosine_embedding_loss(a, b, y, reduction="sum"), [a[1], p[1], torch.tensor(-1.0, dtype=D)],
     grad=(0, 1))
x, yy = randn(4, 3), pm1(4, 3)
case("hinge_embedding_loss", lambda x, y: F.hinge_embedding_loss(x, y), [x, yy], grad=(0,))
case("hinge_embedding_loss_margin_sum", lambda x, y: F.hinge_embedding_loss(x, y, margin=0.5, reduction="sum"),
     [x, yy], grad=(0,))
case("soft_margin_loss", lambda x, y: F.soft_margin_loss(x, y), [x, yy], grad=(0,))
case("soft_margin_loss_none", lambda x, y: F.soft_margin_loss(x, y, reduction="none"), [x, yy], grad=(0,))
t01 = torch.randint(0, 2, (4, 3)).to(D)
w3 = torch.rand(3, dtype=D) + 0.5
case("multilabel_soft_margin_loss", lambda x, y: F.multilabel_soft_margin_loss(x, y), [x, t01], grad=(0,))
case("multilabel_soft_margin_loss_weight_none",
     lambda x, y, w: F.multilabel_soft_margin_loss(x, y, weight=w, reduction="none"), [x, t01, w3], grad=(0,))
case("multilabel_soft_margin_loss_unbatched", lambda x, y: F.multilabel_soft_margin_loss(x, y), [x[0], t01[0]],
     grad=(0,))
xm, tm = randn(5, 4), torch.tensor([0, 3, 1, 1, 2])
w4 = torch.rand(4, dtype=D) + 0.5
case("multi_margin_loss", lambda x, t: F.multi_margin_loss(x, t), [xm, Idx(tm)], grad=(0,))
case("multi_margin_loss_p2_weight_none",
     lambda x, t, w: F.multi_margin_loss(x, t, p=2, margin=0.7, weight=w, reduction="none"), [xm, Idx(tm), w4],
     grad=(0,))
case("multi_margin_loss_unbatched_sum", lambda x, t: F.multi_margin_loss(x, t, reduction="sum"),
     [xm[0], Idx(tm[0])], grad=(0,))
ml = torch.tensor([[3, 0, -1, 1], [1, 2, 3, -1], [0, 1, 2, 3], [-1, 2, 2, 2], [2, 2, 0, -1]])
case("multilabel_margin_loss", lambda x, t: F.multilabel_margin_loss(x, t), [xm, Idx(ml)], grad=(0,))
case("multilabel_margin_loss_none", lambda x, t: F.multilabel_margin_loss(x, t, reduction="none"), [xm, Idx(ml)],
     grad=(0,))
case("multilabel_margin_loss_unbatched_sum", lambda x, t: F.multilabel_margin_loss(x, t, reduction="sum"),
     [xm[1], Idx(ml[1])], grad=(0,))
case("triplet_margin_with_distance_loss", lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n), [a, p, n],
     grad=(0, 1, 2))
case("triplet_margin_with_distance_loss_l1_swap_none",
     lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n, distance_function=lambda u, v: (u - v).abs().sum(-1),
                                                         margin=2.5, swap=True, reduction="none"), [a, p, n],
     grad=(0, 1, 2))
rate, counts = randn(4, 3), torch.poisson(torch.full((4, 3), 2.0, dtype=D))
case("poisson_nll_loss", lambda x, y: F.poisson_nll_loss(x, y), [rate, counts], grad=(0,))
case("poisson_nll_loss_full_none", lambda x, y: F.poisson_nll_loss(x, y, full=True, reduction="none"),
     [rate, counts], grad=(0,))
case("poisson_nll_loss_linear_full_sum",
     lambda x, y: F.poisson_nll_loss(x, y, log_input=False, full=True, eps=1e-4, reduction="sum"),
     [rate.exp(), counts], grad=(0,))
mu, tgt = randn(4, 3), randn(4, 3)
var = torch.rand(4, 3, dtype=D) + 0.1
case("gaussian_nll_loss", lambda x, y, v: F.gaussian_nll_loss(x, y, v), [mu, tgt, var], grad=(0, 1, 2))
case("gaussian_nll_loss_homoscedastic_full",
     lambda x, y, v: F.gaussian_nll_loss(x, y, v, full=True, reduction="sum"), [mu, tgt, var[:, 0]], grad=(0, 2))
case("gaussian_nll_loss_var_last1_eps_none",
     lambda x, y, v: F.gaussian_nll_loss(x, y, v, eps=0.5, reduction="none"), [mu, tgt, var[:, :1]], grad=(0, 2))

# ---- the losses and activations ds had: checked against PyTorch here too ----
x1, x2 = randn(6), randn(6)
case("margin_ranking_loss", lambda a, b, y: F.margin_ranking_loss(a, b, y, margin=0.3), [x1, x2, pm1(6)],
     grad=(0, 1))
case("margin_ranking_loss_none", lambda a, b, y: F.margin_ranking_loss(a, b, y, reduction="none"), [x1, x2, pm1(6)],
     grad=(0, 1))
logp, q = randn(3, 4).log_softmax(1), torch.rand(3, 4, dtype=D).softmax(1)
case("kl_div_batchmean", lambda a, b: F.kl_div(a, b, reduction="batchmean"), [logp, q], grad=(0, 1))
case("kl_div_log_target_sum", lambda a, b: F.kl_div(a, b, reduction="sum", log_target=True), [logp, q.log()],
     grad=(0, 1))
case("kl_div_zero_target_none", lambda a, b: F.kl_div(a, b, reduction="none"),
     [logp, torch.tensor([[0.5, 0, 0.5, 0], [0.25, 0.25, 0.25, 0.25], [1.0, 0, 0, 0]], dtype=D)], grad=(0,))
case("huber_loss_delta", lambda a, b: F.huber_loss(a, b, delta=0.7), [x * 2, yy], grad=(0, 1))
case("huber_loss_none", lambda a, b: F.huber_loss(a, b, reduction="none"), [x * 2, yy], grad=(0, 1))
case("smooth_l1_loss_beta", lambda a, b: F.smooth_l1_loss(a, b, beta=0.5, reduction="sum"), [x * 2, yy], grad=(0, 1))
case("smooth_l1_loss_beta0", lambda a, b: F.smooth_l1_loss(a, b, beta=0.0), [x * 2, yy], grad=(0, 1))
case("threshold", lambda x: F.threshold(x, 0.2, -3.0), [x], grad=(0,))
case("softmin_dim0", lambda x: F.softmin(x, dim=0), [x], grad=(0,))

# ---- ctc_loss: log_probs as the docs make them (log_softmax'ed, then a leaf), or logits through log_softmax ----
T, N, C, S = 7, 3, 5, 3
lp = randn(T, N, C).log_softmax(2)
tg = torch.randint(1, C, (N, S))
il, tl = torch.tensor([7, 6, 7]), torch.tensor([3, 2, 0])
case("ctc_loss", lambda lp, t, il, tl: F.ctc_loss(lp, t, il, tl), [lp, Idx(tg), il, tl], grad=(0,))
case("ctc_loss_sum", lambda lp, t, il, tl: F.ctc_loss(lp, t, il, tl, reduction="sum"), [lp, Idx(tg), il, tl],
     grad=(0,))
case("ctc_loss_none_f32", lambda lp, t, il, tl: F.ctc_loss(lp, t, il, tl, reduction="none"),
     [lp.float(), Idx(tg), il, tl], grad=(0,))
logits = randn(T, N, C)
case("ctc_loss_logits", lambda x, t, il, tl: F.ctc_loss(x.log_softmax(2), t, il, tl), [logits, Idx(tg), il, tl],
     grad=(0,))
rep = torch.tensor([[2, 2, 3], [1, 1, 1], [4, 3, 4]])
case("ctc_loss_repeats_blank_last",
     lambda lp, t, il, tl: F.ctc_loss(lp, t, il, tl, blank=C - 1, reduction="none"),
     [lp, Idx(rep - 1), torch.tensor([7, 5, 6]), torch.tensor([3, 3, 3])], grad=(0,))
flat = torch.tensor([1, 3, 2, 4, 4, 1])
case("ctc_loss_concatenated", lambda lp, t: F.ctc_loss(lp, t, [7, 7, 6], [1, 3, 2], reduction="sum"),
     [lp, Idx(flat)], grad=(0,))
# sample 2 needs 5 steps for [1, 1, 1] (a blank between repeats) but has 4: impossible, zeroed
case("ctc_loss_zero_infinity",
     lambda lp, t, il, tl: F.ctc_loss(lp, t, il, tl, reduction="none", zero_infinity=True),
     [lp, Idx(rep), torch.tensor([7, 4, 6]), torch.tensor([3, 3, 3])], grad=(0,))
# a target holding the blank (PyTorch forbids it but computes it): values only, PyTorch's gradient there is not
# the derivative (its own gradcheck fails); ds's is checked by gradcheck in the spec
case("ctc_loss_blank_in_target", lambda lp, t, il, tl: F.ctc_loss(lp, t, il, tl, blank=2, reduction="none"),
     [lp, Idx(torch.tensor([[2, 1, 2], [3, 2, 2], [2, 2, 4]])), torch.tensor([7, 6, 7]), torch.tensor([3, 3, 2])])
case("ctc_loss_unbatched", lambda lp, t, il, tl: F.ctc_loss(lp, t, il, tl), [lp[:, 0], Idx(tg[0]), il[0], tl[0]],
     grad=(0,))

# ---- shrink ----
xs = randn(4, 5) * 1.5
case("softshrink", lambda x: F.softshrink(x), [xs], grad=(0,))
case("softshrink_lambd", lambda x: F.softshrink(x, 1.0), [xs], grad=(0,))
case("hardshrink", lambda x: F.hardshrink(x), [xs], grad=(0,))
case("hardshrink_lambd", lambda x: F.hardshrink(x, 0.2), [xs], grad=(0,))
case("tanhshrink", lambda x: F.tanhshrink(x), [xs], grad=(0,))
case("softshrink_f32", lambda x: F.softshrink(x, 0.3), [xs.float()], grad=(0,))

# ---- unfold / fold ----
img = randn(2, 3, 5, 6)
case("unfold", lambda x: F.unfold(x, 2), [img], grad=(0,))
case("unfold_options", lambda x: F.unfold(x, (2, 3), dilation=(2, 1), padding=1, stride=(2, 1)), [img], grad=(0,))
case("unfold_unbatched", lambda x: F.unfold(x, 3, stride=2), [img[0]], grad=(0,))
cols = randn(2, 3 * 2 * 2, 20)
case("fold", lambda x: F.fold(x, (5, 6), 2), [cols], grad=(0,))
cols2 = randn(2, 3 * 2 * 3, 3 * 6)
case("fold_options", lambda x: F.fold(x, (5, 6), (2, 3), dilation=(2, 1), padding=1, stride=(2, 1)), [cols2],
     grad=(0,))
cols3 = randn(2 * 3 * 3, 9)
case("fold_unbatched", lambda x: F.fold(x, 5, 3, stride=2, padding=1), [cols3], grad=(0,))
case("fold_f32", lambda x: F.fold(x, (5, 6), 2), [cols.float()], grad=(0,))

# ---- conv3d, conv_transpose1d, conv_transpose3d (x, weight, bias) ----
vol = randn(2, 4, 4, 5, 4)
w3d = randn(6, 2, 3, 2, 3)
b6 = randn(6)
case("conv3d", lambda x, w: F.conv3d(x, w[:, :, :2]), [vol, randn(6, 4, 3, 2, 3)], grad=(0, 1))
case("conv3d_options", lambda x, w, b: F.conv3d(x, w, b, stride=(2, 1, 2), padding=(1, 0, 2), dilation=(1, 2, 1),
                                                groups=2), [vol, w3d, b6], grad=(0, 1, 2))
case("conv3d_same", lambda x, w, b: F.conv3d(x, w, b, padding="same", groups=2), [vol, w3d, b6], grad=(0, 1, 2))
case("conv3d_unbatched", lambda x, w: F.conv3d(x, w, stride=2), [vol[0], randn(3, 4, 2, 2, 2)], grad=(0, 1))
case("conv3d_f32", lambda x, w, b: F.conv3d(x, w, b, padding=1), [vol.float(), randn(3, 4, 3, 3, 3).float(),
                                                                   randn(3).float()], grad=(0, 1, 2))
seq = randn(2, 4, 7)
case("conv_transpose1d", lambda x, w: F.conv_transpose1d(x, w), [seq, randn(4, 3, 3)], grad=(0, 1))
case("conv_transpose1d_options",
     lambda x, w, b: F.conv_transpose1d(x, w, b, stride=3, padding=2, output_padding=1, groups=2, dilation=2),
     [seq, randn(4, 3, 3), randn(6)], grad=(0, 1, 2))
case("conv_transpose1d_unbatched", lambda x, w: F.conv_transpose1d(x, w, stride=2), [seq[0], randn(4, 2, 2)],
     grad=(0, 1))
# output_padding at or past the stride (allowed below the dilation)
case("conv_transpose1d_outpad_dilation",
     lambda x, w, b: F.conv_transpose1d(x, w, b, stride=1, padding=2, output_padding=2, dilation=3),
     [seq, randn(4, 2, 3), randn(2)], grad=(0, 1, 2))
case("conv_transpose2d_outpad_dilation",
     lambda x, w, b: F.conv_transpose2d(x, w, b, stride=(1, 2), padding=(0, 1), output_padding=(2, 1),
                                        dilation=(3, 2), groups=2),
     [randn(2, 4, 3, 4), randn(4, 1, 2, 3), randn(2)], grad=(0, 1, 2))
small = randn(2, 4, 3, 4, 3)
case("conv_transpose3d", lambda x, w: F.conv_transpose3d(x, w), [small, randn(4, 3, 2, 3, 2)], grad=(0, 1))
case("conv_transpose3d_options",
     lambda x, w, b: F.conv_transpose3d(x, w, b, stride=(2, 1, 3), padding=(1, 0, 2), output_padding=(1, 0, 2),
                                        groups=2, dilation=(1, 2, 1)),
     [small, randn(4, 3, 3, 2, 3), randn(6)], grad=(0, 1, 2))
case("conv_transpose3d_unbatched_f32", lambda x, w, b: F.conv_transpose3d(x, w, b, stride=2),
     [small[0].float(), randn(4, 2, 2, 2, 2).float(), randn(2).float()], grad=(0, 1, 2))

# ---- padding modes (as nn.Conv3d applies them: F.pad with the mode, then a padding-free conv3d) ----
for mode in ["reflect", "replicate", "circular"]:
    case("conv3d_padding_" + mode,
         lambda x, w, b, mode=mode: torch.nn.Conv3d(4, 6, (3, 2, 3), padding=(1, 2, 1), padding_mode=mode,
                                                    groups=2)._conv_forward(x, w, b), [vol, w3d, b6],
         grad=(0, 1, 2))

img2, w2, b2 = randn(2, 4, 6, 5), randn(6, 2, 2, 3), randn(6)
case("conv2d_same_even", lambda x, w, b: F.conv2d(x, w, b, padding="same", dilation=(1, 3), groups=2),
     [img2, w2, b2], grad=(0, 1, 2))
case("conv1d_same_even", lambda x, w: F.conv1d(x, w, padding="same", dilation=3), [seq, randn(2, 4, 4)],
     grad=(0, 1))
for mode in ["reflect", "replicate", "circular"]:
    case("conv2d_padding_" + mode,
         lambda x, w, b, mode=mode: torch.nn.Conv2d(4, 6, (2, 3), padding=(1, 2), padding_mode=mode,
                                                    groups=2)._conv_forward(x, w, b), [img2, w2, b2],
         grad=(0, 1, 2))
case("conv2d_padding_reflect_same",
     lambda x, w, b: torch.nn.Conv2d(4, 6, (2, 3), padding="same", padding_mode="reflect",
                                     groups=2)._conv_forward(x, w, b), [img2, w2, b2], grad=(0, 1, 2))
case("conv1d_padding_circular",
     lambda x, w, b: torch.nn.Conv1d(4, 2, 3, padding=2, padding_mode="circular", stride=2)._conv_forward(x, w, b),
     [seq, randn(2, 4, 3), randn(2)], grad=(0, 1, 2))

# ---- 3-D pools ----
vol3 = randn(2, 3, 5, 6, 4)
case("max_pool3d", lambda x: F.max_pool3d(x, (2, 3, 2), (1, 2, 2), (1, 1, 0)), [vol3], grad=(0,))
case("max_pool3d_ceil_unbatched", lambda x: F.max_pool3d(x, 2, ceil_mode=True), [vol3[0]], grad=(0,))
case("avg_pool3d", lambda x: F.avg_pool3d(x, (3, 2, 2), 2, (1, 1, 0)), [vol3], grad=(0,))
case("avg_pool3d_ceil_exclude_pad", lambda x: F.avg_pool3d(x, 3, (2, 2, 1), 1, ceil_mode=True, count_include_pad=False),
     [vol3], grad=(0,))
case("max_pool3d_dilation", lambda x: F.max_pool3d(x, (2, 2, 1), (1, 2, 1), (1, 0, 0), (2, 1, 3)), [vol3], grad=(0,))
case("avg_pool3d_divisor_override_ceil", lambda x: F.avg_pool3d(x, 2, 2, ceil_mode=True, divisor_override=3),
     [vol3], grad=(0,))
case("max_pool2d_dilation", lambda x: F.max_pool2d(x, (2, 3), (1, 2), (1, 1), (3, 2)), [img], grad=(0,))
case("max_pool2d_dilation_ceil_unbatched", lambda x: F.max_pool2d(x, 2, 2, dilation=2, ceil_mode=True), [img[0]],
     grad=(0,))
case("avg_pool2d_divisor_override", lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=4), [img], grad=(0,))
case("max_pool1d_dilation", lambda x: F.max_pool1d(x, 3, 1, 1, 2), [seq], grad=(0,))
case("adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x, (2, 4, 3)), [vol3], grad=(0,))
case("adaptive_max_pool3d_unbatched", lambda x: F.adaptive_max_pool3d(x, 3), [vol3[1]], grad=(0,))

# ---- interpolate's modes ----
small_img = randn(2, 3, 5, 4)
case("interpolate_bicubic", lambda x: F.interpolate(x, size=(7, 3), mode="bicubic"), [small_img], grad=(0,))
case("interpolate_bicubic_align_corners_scale",
     lambda x: F.interpolate(x, scale_factor=(1.5, 2.0), mode="bicubic", align_corners=True), [small_img], grad=(0,))
case("interpolate_area_3d", lambda x: F.interpolate(x, size=(2, 3, 5), mode="area"), [vol3], grad=(0,))
case("interpolate_area_1d_scale", lambda x: F.interpolate(x, scale_factor=0.5, mode="area"), [seq], grad=(0,))
case("interpolate_nearest_exact", lambda x: F.interpolate(x, size=(8, 3), mode="nearest-exact"), [small_img],
     grad=(0,))
case("interpolate_recompute_scale_factor",
     lambda x: F.interpolate(x, scale_factor=1.7, mode="bilinear", recompute_scale_factor=True), [small_img],
     grad=(0,))

# ---- bilinear, channel_shuffle, local_response_norm, lp pools, rrelu (eval) ----
b1, b2, bw, bb = randn(3, 4), randn(3, 5), randn(2, 4, 5), randn(2)
case("bilinear", lambda a, b, w, c: F.bilinear(a, b, w, c), [b1, b2, bw, bb], grad=(0, 1, 2, 3))
case("bilinear_batched_no_bias", lambda a, b, w: F.bilinear(a, b, w), [randn(2, 3, 4), randn(2, 3, 5), bw],
     grad=(0, 1, 2))
case("channel_shuffle", lambda x: F.channel_shuffle(x, 2), [img2])  # no derivative in PyTorch 1.13
case("local_response_norm", lambda x: F.local_response_norm(x, 3, 1e-2, 0.7, 2.0), [img2], grad=(0,))
case("local_response_norm_3d_even", lambda x: F.local_response_norm(x, 4), [seq], grad=(0,))
case("lp_pool2d", lambda x: F.lp_pool2d(x, 2, (2, 3), stride=1), [img2], grad=(0,))
case("lp_pool2d_p3_ceil", lambda x: F.lp_pool2d(x.abs() + 0.1, 3, 2, ceil_mode=True), [img2], grad=(0,))
case("lp_pool1d", lambda x: F.lp_pool1d(x.abs() + 0.1, 1.5, 2, stride=1), [seq], grad=(0,))
case("rrelu_eval", lambda x: F.rrelu(x, 0.1, 0.3), [img2], grad=(0,))

# ---- BatchNorm3d (training: output and running statistics), instance_norm over 3 spatial dims ----
def batch_norm3d(x):
    m = torch.nn.BatchNorm3d(3, momentum=0.3).double()
    y = m(x)
    return y, m.running_mean, m.running_var
case("batch_norm3d_train", batch_norm3d, [vol3], grad=(0,))
case("instance_norm_3d", lambda x, w, b: F.instance_norm(x, weight=w, bias=b, eps=1e-3),
     [vol3, randn(3), randn(3)], grad=(0, 1, 2))

# ---- max_unpool: max_pool's indices (1-based for ds) written back ----
mp_in = randn(2, 3, 6, 8)
mp_y, mp_i = F.max_pool2d(mp_in, 2, return_indices=True)
case("max_unpool2d", lambda y, i: F.max_unpool2d(y, i, 2), [mp_y, Idx(mp_i)], grad=(0,))
case("max_unpool2d_output_size", lambda y, i: F.max_unpool2d(y, i, 2, output_size=(7, 9)), [mp_y, Idx(mp_i)],
     grad=(0,))
mp1_y, mp1_i = F.max_pool1d(randn(2, 3, 9), 3, 2, 1, return_indices=True)
# overlapping windows: an element picked twice is written once, and gets the gradient of its position from both
case("max_unpool1d_overlap", lambda y, i: F.max_unpool1d(y, i, 3, 2, 1), [mp1_y, Idx(mp1_i)], grad=(0,))
mp3_y, mp3_i = F.max_pool3d(randn(1, 2, 4, 4, 6), 2, return_indices=True)
case("max_unpool3d_unbatched", lambda y, i: F.max_unpool3d(y, i, 2), [mp3_y[0], Idx(mp3_i[0])], grad=(0,))

# ---- affine_grid, grid_sample ----
theta = randn(2, 2, 3) * 0.6
case("affine_grid", lambda t: F.affine_grid(t, (2, 3, 4, 5), align_corners=False), [theta], grad=(0,))
case("affine_grid_align_corners", lambda t: F.affine_grid(t, (2, 3, 4, 5), align_corners=True), [theta], grad=(0,))
gs_in, gs_grid = randn(2, 3, 5, 6), torch.rand(2, 4, 3, 2, dtype=D) * 2.6 - 1.3
case("grid_sample", lambda x, g: F.grid_sample(x, g, align_corners=False), [gs_in, gs_grid], grad=(0, 1))
case("grid_sample_border_align", lambda x, g: F.grid_sample(x, g, padding_mode="border", align_corners=True),
     [gs_in, gs_grid], grad=(0, 1))
case("grid_sample_reflection", lambda x, g: F.grid_sample(x, g, padding_mode="reflection", align_corners=False),
     [gs_in, gs_grid], grad=(0, 1))
case("grid_sample_nearest", lambda x, g: F.grid_sample(x, g, mode="nearest", align_corners=False), [gs_in, gs_grid],
     grad=(0, 1))

# ---- pdist, max_pool2d_with_indices, the deprecated upsample names ----
case("pdist", lambda x: F.pdist(x), [randn(5, 3)], grad=(0,))
case("pdist_p1", lambda x: F.pdist(x, 1.0), [randn(4, 6)], grad=(0,))
case("max_pool2d_with_indices", lambda x: (lambda r: (r[0], r[1] + 1))(F.max_pool2d_with_indices(x, 2, 2)), [img2],
     grad=(0,))
case("upsample_bilinear", lambda x: F.upsample_bilinear(x, scale_factor=2), [small_img], grad=(0,))
case("upsample_nearest", lambda x: F.upsample_nearest(x, size=(7, 9)), [small_img], grad=(0,))

# ---- embedding's max_norm (rows renormalized in the weight) and scale_grad_by_freq ----
emb_w, emb_ids = randn(8, 3) * 2, torch.tensor([[1, 3, 3], [0, 7, 3]])
def embedding_max_norm(w, ids):
    w = w.clone()
    return F.embedding(ids, w, max_norm=1.5, norm_type=3.0), w
case("embedding_max_norm", embedding_max_norm, [emb_w, Idx(emb_ids)])
case("embedding_scale_grad_by_freq", lambda w, ids: F.embedding(ids, w, scale_grad_by_freq=True), [emb_w, Idx(emb_ids)],
     grad=(0,))

# ---- adaptive max pools with indices ----
case("adaptive_max_pool2d_indices",
     lambda x: (lambda r: (r[0], r[1] + 1))(F.adaptive_max_pool2d(x, (3, 4), return_indices=True)), [img2], grad=(0,))
case("adaptive_max_pool1d_indices",
     lambda x: (lambda r: (r[0], r[1] + 1))(F.adaptive_max_pool1d(x, 4, return_indices=True)), [seq], grad=(0,))

# ---- fractional max pools with given samples (PyTorch's _random_samples) ----
frac_in, frac_s2, frac_s3 = randn(2, 3, 7, 8), torch.rand(2, 3, 2, dtype=D), torch.rand(2, 3, 3, dtype=D)
case("fractional_max_pool2d", lambda x, s: (lambda r: (r[0], r[1] + 1))(
    F.fractional_max_pool2d(x, (2, 3), output_size=(4, 5), return_indices=True, _random_samples=s)),
     [frac_in, frac_s2], grad=(0,))
case("fractional_max_pool2d_ratio", lambda x, s: F.fractional_max_pool2d(x, 2, output_ratio=0.5, _random_samples=s),
     [frac_in, frac_s2], grad=(0,))
case("fractional_max_pool3d", lambda x, s: F.fractional_max_pool3d(x, 2, output_size=(2, 3, 2), _random_samples=s),
     [vol3, frac_s3], grad=(0,))

case("square_subsequent_mask", lambda: torch.nn.Transformer.generate_square_subsequent_mask(5), [])

# ---- nn.Transformer (no dropout): its parameters (PyTorch's names), inputs and output ----
torch.manual_seed(1)
tr = torch.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=2, dim_feedforward=16,
                          dropout=0.0).double()
src, tgt = randn(5, 3, 8), randn(4, 3, 8)
mask = torch.nn.Transformer.generate_square_subsequent_mask(4).double()
with torch.no_grad():
    out = tr(src, tgt, tgt_mask=mask)
transformer = {"params": {k: enc(v) for k, v in tr.state_dict().items()}, "src": enc(src), "tgt": enc(tgt),
               "out": enc(out)}
# batch_first, norm_first, gelu, key padding masks (True: ignored)
tr2 = torch.nn.Transformer(d_model=8, nhead=4, num_encoder_layers=2, num_decoder_layers=1, dim_feedforward=12,
                           dropout=0.0, activation="gelu", batch_first=True, norm_first=True).double()
src2, tgt2 = randn(2, 5, 8), randn(2, 3, 8)
src_pad = torch.tensor([[False, False, False, True, True], [False] * 5])
with torch.no_grad():
    out2 = tr2(src2, tgt2, tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(3).double(),
               src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad)
transformer2 = {"params": {k: enc(v) for k, v in tr2.state_dict().items()}, "src": enc(src2), "tgt": enc(tgt2),
                "pad": enc(src_pad), "out": enc(out2)}

# ---- AdaptiveLogSoftmaxWithLoss: parameters (PyTorch's names), input, targets (1-based for ds), outputs ----
torch.manual_seed(2)
als = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [5, 12], div_value=2.0, head_bias=True).double()
als_x = randn(6, 8).requires_grad_()
als_t = torch.tensor([0, 4, 5, 11, 12, 19])
als_out = als(als_x, als_t)
als_g, = torch.autograd.grad(als_out.loss, als_x)
adaptive_softmax = {"params": {k: enc(v) for k, v in als.state_dict().items()}, "x": enc(als_x), "t": enc(als_t + 1),
                    "output": enc(als_out.output), "loss": enc(als_out.loss), "grad": enc(als_g),
                    "log_prob": enc(als.log_prob(als_x)), "predict": enc(als.predict(als_x) + 1)}

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "nn_more.json"), "w") as f:
    json.dump({"cases": cases, "transformer": transformer, "transformer2": transformer2,
               "adaptive_softmax": adaptive_softmax}, f, indent=None,
              separators=(",", ":"), sort_keys=True)
print("wrote", len(cases), "cases")
