/* optim.c: fused optimizer updates, one kernel call per parameter tensor, updating state in place.
   Formulas follow torch 1.13's single-tensor paths (same operation order, scalars rounded to the
   tensor dtype as PyTorch does), so results match torch.optim to rounding. No outputs: every
   kernel writes into its inputs (the op table lists them in `mutates`). */
#include "internal.h"

/* Every kernel's last operand is its hyper-parameters: a contiguous f64 tensor of k numbers in the order
   the comment above the kernel gives (booleans as 0/1). They are an operand, not attrs, so a compiled train
   step reads the optimizer's current values (a scheduler's lr) at every run. */
static int check_hyper(const ds_tensor *h, int64_t k, const char *op) {
  DS_CHECK(h && h->dtype == DS_F64 && h->numel == k && ds_tensor_is_contiguous(h),
           "%s: hyper-parameters must be a contiguous f64 tensor of %d numbers", op, (int)k);
  return DS_OK;
}

/* param and state tensors: same dtype and numel, contiguous; grad: the parameter's dtype and shape,
   any strides (a weight grad is often a transposed view); the step counter: a 1-element f32 tensor. */
static int check_operands(ds_tensor *const *t, int n, int dtype, const char *op) {
  char b1[128], b2[128];
  for (int k = 0; k < n; k++) {
    DS_CHECK(t[k], "%s: operand %d missing", op, k + 1);
    DS_CHECK(t[k]->dtype == dtype, "%s: operand %d has the wrong dtype", op, k + 1);
    DS_CHECK(t[k]->numel == t[0]->numel, "%s: operand %d has shape %s, parameter has %s", op, k + 1,
             ds_shape_str(t[k], b1), ds_shape_str(t[0], b2));
    DS_CHECK(k == 1 || ds_tensor_is_contiguous(t[k]), "%s: operand %d must be contiguous", op, k + 1);
  }
  if (!ds_tensor_is_contiguous(t[1])) {
    int same = t[1]->ndim == t[0]->ndim;
    for (int d = 0; same && d < t[0]->ndim; d++) same = t[1]->shape[d] == t[0]->shape[d];
    DS_CHECK(same, "%s: grad shape %s differs from parameter shape %s", op, ds_shape_str(t[1], b1),
             ds_shape_str(t[0], b2));
  }
  for (int k = 2; k < n; k++)
    for (int j = 0; j < k; j++)
      DS_CHECK(j == 1 || t[k]->data != t[j]->data, "%s: operands %d and %d share memory", op, j + 1, k + 1);
  return DS_OK;
}

/* element offset of row r (all dims but the last) of a strided tensor */
static int64_t row_offset(const ds_tensor *t, int64_t r) {
  int64_t off = 0;
  for (int d = t->ndim - 2; d >= 0; d--) { off += (r % t->shape[d]) * t->strides[d]; r /= t->shape[d]; }
  return off;
}

/* run the body (the macro's last argument) for every element i of the parameter (row-major), with gk the grad's
   element offset; split over threads above DS_PAR_MIN elements */
#define FOR_EACH(n, gt, ...) \
  if (ds_tensor_is_contiguous(gt)) { \
    DS_PAR_FOR(n > DS_PAR_MIN, i, n, const int64_t gk = i; __VA_ARGS__); \
  } else if (n > 0) { \
    const int64_t inner = (gt)->shape[(gt)->ndim - 1], gs = (gt)->strides[(gt)->ndim - 1], rows = n / inner; \
    DS_PAR_FOR(n > DS_PAR_MIN, r, rows, \
      const int64_t base = row_offset(gt, r); \
      for (int64_t j = 0; j < inner; j++) { const int64_t i = r * inner + j, gk = base + j * gs; __VA_ARGS__ }); \
  }

static int check_step(const ds_tensor *s, const char *op) {
  DS_CHECK(s && s->dtype == DS_F32 && s->numel == 1, "%s: step counter must be a 1-element f32 tensor", op);
  return DS_OK;
}

/* sgd: param, grad, hyper = {lr, weight_decay}.  p -= lr * (g + wd * p) */
#define SGD(S, T, D) \
  int ds_sgd_update_##S(ds_tensor *const *t, const double *attrs) { \
    int rc = check_operands(t, 2, D, "sgd_update"); if (rc) return rc; \
    if ((rc = check_hyper(t[2], 2, "sgd_update"))) return rc; \
    (void)attrs; const double *h = t[2]->data; \
    T *p = t[0]->data; const T *g = t[1]->data; \
    const T lr_neg = (T)(-h[0]), wd = (T)h[1]; const int64_t n = t[0]->numel; \
    FOR_EACH(n, t[1], { \
      T d = g[gk]; \
      if (wd != 0) d = d + wd * p[i]; \
      p[i] = p[i] + lr_neg * d; \
    }) \
    return DS_OK; }

/* sgd with momentum: param, grad, buf, step, hyper = {lr, momentum, dampening, weight_decay, nesterov}.
   The first step (step == 0) sets buf = d as torch does; step is incremented. */
#define SGD_MOMENTUM(S, T, D) \
  int ds_sgd_momentum_update_##S(ds_tensor *const *t, const double *attrs) { \
    int rc = check_operands(t, 3, D, "sgd_momentum_update"); if (rc) return rc; \
    if ((rc = check_step(t[3], "sgd_momentum_update"))) return rc; \
    if ((rc = check_hyper(t[4], 5, "sgd_momentum_update"))) return rc; \
    (void)attrs; const double *h = t[4]->data; \
    T *p = t[0]->data, *buf = t[2]->data; const T *g = t[1]->data; float *step = t[3]->data; \
    const T lr_neg = (T)(-h[0]), mom = (T)h[1], damp1 = (T)(1 - h[2]), wd = (T)h[3]; \
    const int nesterov = h[4] != 0, first = *step == 0; const int64_t n = t[0]->numel; \
    FOR_EACH(n, t[1], { \
      T d = g[gk]; \
      if (wd != 0) d = d + wd * p[i]; \
      T b = first ? d : buf[i] * mom + damp1 * d; \
      buf[i] = b; \
      if (nesterov) d = d + mom * b; else d = b; \
      p[i] = p[i] + lr_neg * d; \
    }) \
    *step = *step + 1; \
    return DS_OK; }

/* adam / adamw: param, grad, exp_avg, exp_avg_sq, step, hyper = {lr, beta1, beta2, eps, weight_decay}; attrs =
   decoupled (1: AdamW's p *= 1 - lr * wd; 0: Adam's g += wd * p). step is incremented first. */
#define ADAM(S, T, D, SQRT) \
  int ds_adam_update_##S(ds_tensor *const *t, const double *attrs) { \
    int rc = check_operands(t, 4, D, "adam_update"); if (rc) return rc; \
    if ((rc = check_step(t[4], "adam_update"))) return rc; \
    if ((rc = check_hyper(t[5], 5, "adam_update"))) return rc; \
    const double *h = t[5]->data; \
    T *p = t[0]->data, *m = t[2]->data, *v = t[3]->data; const T *g = t[1]->data; float *stepp = t[4]->data; \
    const double lr = h[0], beta1 = h[1], beta2 = h[2], eps = h[3], wdd = h[4]; \
    const int decoupled = attrs[0] != 0; \
    *stepp = *stepp + 1; \
    const double step = *stepp; \
    const double bc1 = 1 - pow(beta1, step), bc2 = 1 - pow(beta2, step); \
    const T step_size_neg = (T)(-(lr / bc1)), bc2_sqrt = (T)sqrt(bc2); \
    const T b1 = (T)beta1, b2 = (T)beta2, a1 = (T)(1 - beta1), a2 = (T)(1 - beta2), e = (T)eps; \
    const T wd = (T)wdd, shrink = (T)(1 - lr * wdd); \
    const int64_t n = t[0]->numel; \
    FOR_EACH(n, t[1], { \
      T gi = g[gk], pi = p[i]; \
      if (decoupled) pi = pi * shrink; else if (wd != 0) gi = gi + wd * pi; \
      T mi = m[i] * b1; mi = mi + a1 * gi; \
      T vi = v[i] * b2; vi = vi + a2 * gi * gi; \
      T denom = SQRT(vi) / bc2_sqrt + e; \
      m[i] = mi; v[i] = vi; \
      p[i] = pi + step_size_neg * mi / denom; \
    }) \
    return DS_OK; }

/* adam / adamw with amsgrad: param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, hyper; hyper and attrs as adam.
   max_exp_avg_sq = max(max_exp_avg_sq, exp_avg_sq) and the denominator uses it. */
#define ADAM_AMSGRAD(S, T, D, SQRT) \
  int ds_adam_amsgrad_update_##S(ds_tensor *const *t, const double *attrs) { \
    int rc = check_operands(t, 5, D, "adam_amsgrad_update"); if (rc) return rc; \
    if ((rc = check_step(t[5], "adam_amsgrad_update"))) return rc; \
    if ((rc = check_hyper(t[6], 5, "adam_amsgrad_update"))) return rc; \
    const double *h = t[6]->data; \
    T *p = t[0]->data, *m = t[2]->data, *v = t[3]->data, *vmax = t[4]->data; const T *g = t[1]->data; \
    float *stepp = t[5]->data; \
    const double lr = h[0], beta1 = h[1], beta2 = h[2], eps = h[3], wdd = h[4]; \
    const int decoupled = attrs[0] != 0; \
    *stepp = *stepp + 1; \
    const double step = *stepp; \
    const double bc1 = 1 - pow(beta1, step), bc2 = 1 - pow(beta2, step); \
    const T step_size_neg = (T)(-(lr / bc1)), bc2_sqrt = (T)sqrt(bc2); \
    const T b1 = (T)beta1, b2 = (T)beta2, a1 = (T)(1 - beta1), a2 = (T)(1 - beta2), e = (T)eps; \
    const T wd = (T)wdd, shrink = (T)(1 - lr * wdd); \
    const int64_t n = t[0]->numel; \
    FOR_EACH(n, t[1], { \
      T gi = g[gk], pi = p[i]; \
      if (decoupled) pi = pi * shrink; else if (wd != 0) gi = gi + wd * pi; \
      T mi = m[i] * b1; mi = mi + a1 * gi; \
      T vi = v[i] * b2; vi = vi + a2 * gi * gi; \
      T vm = vmax[i] > vi ? vmax[i] : vi; \
      T denom = SQRT(vm) / bc2_sqrt + e; \
      m[i] = mi; v[i] = vi; vmax[i] = vm; \
      p[i] = pi + step_size_neg * mi / denom; \
    }) \
    return DS_OK; }

/* rmsprop: param, grad, square_avg, step, hyper = {lr, alpha, eps, weight_decay}.
   sq = alpha sq + (1 - alpha) g g; p -= lr g / (sqrt(sq) + eps) */
#define RMSPROP(S, T, D, SQRT) \
  int ds_rmsprop_update_##S(ds_tensor *const *t, const double *attrs) { \
    int rc = check_operands(t, 3, D, "rmsprop_update"); if (rc) return rc; \
    if ((rc = check_step(t[3], "rmsprop_update"))) return rc; \
    if ((rc = check_hyper(t[4], 4, "rmsprop_update"))) return rc; \
    (void)attrs; const double *h = t[4]->data; \
    T *p = t[0]->data, *sq = t[2]->data; const T *g = t[1]->data; float *step = t[3]->data; \
    const T lr_neg = (T)(-h[0]), alpha = (T)h[1], a1 = (T)(1 - h[1]), e = (T)h[2], wd = (T)h[3]; \
    const int64_t n = t[0]->numel; \
    FOR_EACH(n, t[1], { \
      T gi = g[gk]; \
      if (wd != 0) gi = gi + wd * p[i]; \
      T si = sq[i] * alpha; si = si + a1 * gi * gi; \
      sq[i] = si; \
      p[i] = p[i] + lr_neg * gi / (SQRT(si) + e); \
    }) \
    *step = *step + 1; \
    return DS_OK; }

/* rmsprop with momentum and/or centering: param, grad, square_avg, grad_avg, momentum_buffer, step,
   hyper = {lr, alpha, eps, weight_decay, momentum, centered}. centered: avg = sqrt(sq - ga ga) + eps with
   ga = alpha ga + (1 - alpha) g; momentum > 0: buf = momentum buf + g / avg, p -= lr buf. */
#define RMSPROP_FULL(S, T, D, SQRT) \
  int ds_rmsprop_full_update_##S(ds_tensor *const *t, const double *attrs) { \
    int rc = check_operands(t, 5, D, "rmsprop_full_update"); if (rc) return rc; \
    if ((rc = check_step(t[5], "rmsprop_full_update"))) return rc; \
    if ((rc = check_hyper(t[6], 6, "rmsprop_full_update"))) return rc; \
    (void)attrs; const double *h = t[6]->data; \
    T *p = t[0]->data, *sq = t[2]->data, *ga = t[3]->data, *buf = t[4]->data; const T *g = t[1]->data; \
    float *step = t[5]->data; \
    const T lr_neg = (T)(-h[0]), alpha = (T)h[1], a1 = (T)(1 - h[1]), e = (T)h[2], wd = (T)h[3]; \
    const T mom = (T)h[4]; const int centered = h[5] != 0, with_momentum = h[4] > 0; \
    const int64_t n = t[0]->numel; \
    FOR_EACH(n, t[1], { \
      T gi = g[gk]; \
      if (wd != 0) gi = gi + wd * p[i]; \
      T si = sq[i] * alpha; si = si + a1 * gi * gi; \
      sq[i] = si; \
      T avg; \
      if (centered) { T gai = ga[i] * alpha; gai = gai + a1 * gi; ga[i] = gai; \
          avg = SQRT(si + (T)(-1) * gai * gai) + e; } \
      else avg = SQRT(si) + e; \
      if (with_momentum) { T b = buf[i] * mom; b = b + gi / avg; buf[i] = b; p[i] = p[i] + lr_neg * b; } \
      else p[i] = p[i] + lr_neg * gi / avg; \
    }) \
    *step = *step + 1; \
    return DS_OK; }

/* adagrad: param, grad, sum, step, hyper = {lr, lr_decay, weight_decay, eps}. step is incremented first;
   clr = lr / (1 + (step - 1) lr_decay); sum += g g; p -= clr g / (sqrt(sum) + eps) */
#define ADAGRAD(S, T, D, SQRT) \
  int ds_adagrad_update_##S(ds_tensor *const *t, const double *attrs) { \
    int rc = check_operands(t, 3, D, "adagrad_update"); if (rc) return rc; \
    if ((rc = check_step(t[3], "adagrad_update"))) return rc; \
    if ((rc = check_hyper(t[4], 4, "adagrad_update"))) return rc; \
    (void)attrs; const double *h = t[4]->data; \
    T *p = t[0]->data, *sum = t[2]->data; const T *g = t[1]->data; float *stepp = t[3]->data; \
    *stepp = *stepp + 1; \
    const double clr = h[0] / (1 + ((double)*stepp - 1) * h[1]); \
    const T clr_neg = (T)(-clr), wd = (T)h[2], e = (T)h[3]; \
    const int64_t n = t[0]->numel; \
    FOR_EACH(n, t[1], { \
      T gi = g[gk]; \
      if (wd != 0) gi = gi + wd * p[i]; \
      T si = sum[i] + (T)1 * gi * gi; \
      sum[i] = si; \
      p[i] = p[i] + clr_neg * gi / (SQRT(si) + e); \
    }) \
    return DS_OK; }

SGD(f32, float, DS_F32) SGD(f64, double, DS_F64)
SGD_MOMENTUM(f32, float, DS_F32) SGD_MOMENTUM(f64, double, DS_F64)
ADAM(f32, float, DS_F32, sqrtf) ADAM(f64, double, DS_F64, sqrt)
ADAM_AMSGRAD(f32, float, DS_F32, sqrtf) ADAM_AMSGRAD(f64, double, DS_F64, sqrt)
RMSPROP(f32, float, DS_F32, sqrtf) RMSPROP(f64, double, DS_F64, sqrt)
RMSPROP_FULL(f32, float, DS_F32, sqrtf) RMSPROP_FULL(f64, double, DS_F64, sqrt)
ADAGRAD(f32, float, DS_F32, sqrtf) ADAGRAD(f64, double, DS_F64, sqrt)
