/* optim_kernels.h: the optimizer updates for one dtype. optim.c includes it through float_kernels.h with T (the
   element type), DT (its dtype code) and FN(name) (name + dtype suffix). Each kernel's comment lists its operands
   and its hyper-parameters (the last operand, f64); maximize negates the gradient first, as torch does. */

/* sgd: param, grad, hyper = {lr, weight_decay}.  p -= lr * (g + wd * p). (maximize: SGD passes -lr and -wd,
   which gives torch's result bit for bit.) */
int FN(ds_sgd_update)(ds_tensor *const *t, const double *attrs) {
  int rc = check_update(t, 2, 0, 2, DT, "sgd_update");
  if (rc) return rc;
  (void)attrs;
  const double *h = t[2]->data;
  T *p = t[0]->data;
  const T *g = t[1]->data;
  const T lr_neg = (T)(-h[0]), wd = (T)h[1];
  const int64_t n = t[0]->numel;
  FOR_EACH(n, t[1], {
    T d = g[gk];
    if (wd != 0) d = d + wd * p[i];
    p[i] = p[i] + lr_neg * d;
  })
  return DS_OK;
}

/* sgd with momentum: param, grad, buf, step, hyper = {lr, momentum, dampening, weight_decay, nesterov, maximize}.
   The first step (step == 0) sets buf = d as torch does; step is incremented. */
int FN(ds_sgd_momentum_update)(ds_tensor *const *t, const double *attrs) {
  int rc = check_update(t, 3, 1, 6, DT, "sgd_momentum_update");
  if (rc) return rc;
  (void)attrs;
  const double *h = t[4]->data;
  T *p = t[0]->data, *buf = t[2]->data;
  const T *g = t[1]->data;
  float *step = t[3]->data;
  const T lr_neg = (T)(-h[0]), mom = (T)h[1], damp1 = (T)(1 - h[2]), wd = (T)h[3];
  const int nesterov = h[4] != 0, maximize = h[5] != 0, first = *step == 0;
  const int64_t n = t[0]->numel;
  FOR_EACH(n, t[1], {
    T d = maximize ? -g[gk] : g[gk];
    if (wd != 0) d = d + wd * p[i];
    T b = first ? d : buf[i] * mom + damp1 * d;
    buf[i] = b;
    if (nesterov) d = d + mom * b; else d = b;
    p[i] = p[i] + lr_neg * d;
  })
  *step = *step + 1;
  return DS_OK;
}

/* adam / adamw: param, grad, exp_avg, exp_avg_sq, [max_exp_avg_sq with amsgrad], step, hyper = {lr, beta1, beta2,
   eps, weight_decay, maximize}; attrs = decoupled (1: AdamW's p *= 1 - lr * wd; 0: Adam's g += wd * p). step is
   incremented first; amsgrad keeps the running max of exp_avg_sq and divides by its root. */
static int FN(adam)(ds_tensor *const *t, const double *attrs, int amsgrad, const char *op) {
  const int ns = 4 + amsgrad;
  int rc = check_update(t, ns, 1, 6, DT, op);
  if (rc) return rc;
  const double *h = t[ns + 1]->data;
  T *p = t[0]->data, *m = t[2]->data, *v = t[3]->data, *vmax = amsgrad ? t[4]->data : NULL;
  const T *g = t[1]->data;
  float *stepp = t[ns]->data;
  const double lr = h[0], beta1 = h[1], beta2 = h[2], eps = h[3], wdd = h[4];
  const int decoupled = attrs[0] != 0, maximize = h[5] != 0;
  *stepp = *stepp + 1;
  const double step = *stepp;
  const double bc1 = 1 - pow(beta1, step), bc2 = 1 - pow(beta2, step);
  const T step_size_neg = (T)(-(lr / bc1)), bc2_sqrt = (T)sqrt(bc2);
  const T b1 = (T)beta1, b2 = (T)beta2, a1 = (T)(1 - beta1), a2 = (T)(1 - beta2), e = (T)eps;
  const T wd = (T)wdd, shrink = (T)(1 - lr * wdd);
  const int64_t n = t[0]->numel;
  FOR_EACH(n, t[1], {
    T gi = maximize ? -g[gk] : g[gk], pi = p[i];
    if (decoupled) pi = pi * shrink; else if (wd != 0) gi = gi + wd * pi;
    T mi = m[i] * b1; mi = mi + a1 * gi;
    T vi = v[i] * b2; vi = vi + a2 * gi * gi;
    T vm = vi;
    if (amsgrad) { vm = vmax[i] > vi ? vmax[i] : vi; vmax[i] = vm; }
    T denom = SQRT(vm) / bc2_sqrt + e;
    m[i] = mi; v[i] = vi;
    p[i] = pi + step_size_neg * mi / denom;
  })
  return DS_OK;
}
int FN(ds_adam_update)(ds_tensor *const *t, const double *attrs) { return FN(adam)(t, attrs, 0, "adam_update"); }
int FN(ds_adam_amsgrad_update)(ds_tensor *const *t, const double *attrs) {
  return FN(adam)(t, attrs, 1, "adam_amsgrad_update");
}

/* rmsprop: param, grad, square_avg, step, hyper = {lr, alpha, eps, weight_decay, maximize}.
   sq = alpha sq + (1 - alpha) g g; p -= lr g / (sqrt(sq) + eps) */
int FN(ds_rmsprop_update)(ds_tensor *const *t, const double *attrs) {
  int rc = check_update(t, 3, 1, 5, DT, "rmsprop_update");
  if (rc) return rc;
  (void)attrs;
  const double *h = t[4]->data;
  T *p = t[0]->data, *sq = t[2]->data;
  const T *g = t[1]->data;
  float *step = t[3]->data;
  const T lr_neg = (T)(-h[0]), alpha = (T)h[1], a1 = (T)(1 - h[1]), e = (T)h[2], wd = (T)h[3];
  const int maximize = h[4] != 0;
  const int64_t n = t[0]->numel;
  FOR_EACH(n, t[1], {
    T gi = maximize ? -g[gk] : g[gk];
    if (wd != 0) gi = gi + wd * p[i];
    T si = sq[i] * alpha; si = si + a1 * gi * gi;
    sq[i] = si;
    p[i] = p[i] + lr_neg * gi / (SQRT(si) + e);
  })
  *step = *step + 1;
  return DS_OK;
}

/* rmsprop with momentum and/or centering: param, grad, square_avg, grad_avg, momentum_buffer, step,
   hyper = {lr, alpha, eps, weight_decay, momentum, centered, maximize}. centered: avg = sqrt(sq - ga ga) + eps with
   ga = alpha ga + (1 - alpha) g; momentum > 0: buf = momentum buf + g / avg, p -= lr buf. */
int FN(ds_rmsprop_full_update)(ds_tensor *const *t, const double *attrs) {
  int rc = check_update(t, 5, 1, 7, DT, "rmsprop_full_update");
  if (rc) return rc;
  (void)attrs;
  const double *h = t[6]->data;
  T *p = t[0]->data, *sq = t[2]->data, *ga = t[3]->data, *buf = t[4]->data;
  const T *g = t[1]->data;
  float *step = t[5]->data;
  const T lr_neg = (T)(-h[0]), alpha = (T)h[1], a1 = (T)(1 - h[1]), e = (T)h[2], wd = (T)h[3], mom = (T)h[4];
  const int centered = h[5] != 0, with_momentum = h[4] > 0, maximize = h[6] != 0;
  const int64_t n = t[0]->numel;
  FOR_EACH(n, t[1], {
    T gi = maximize ? -g[gk] : g[gk];
    if (wd != 0) gi = gi + wd * p[i];
    T si = sq[i] * alpha; si = si + a1 * gi * gi;
    sq[i] = si;
    T avg;
    if (centered) {
      T gai = ga[i] * alpha; gai = gai + a1 * gi; ga[i] = gai;
      avg = SQRT(si + (T)(-1) * gai * gai) + e;
    } else avg = SQRT(si) + e;
    if (with_momentum) { T b = buf[i] * mom; b = b + gi / avg; buf[i] = b; p[i] = p[i] + lr_neg * b; }
    else p[i] = p[i] + lr_neg * gi / avg;
  })
  *step = *step + 1;
  return DS_OK;
}

/* adagrad: param, grad, sum, step, hyper = {lr, lr_decay, weight_decay, eps, maximize}. step is incremented
   first; clr = lr / (1 + (step - 1) lr_decay); sum += g g; p -= clr g / (sqrt(sum) + eps) */
int FN(ds_adagrad_update)(ds_tensor *const *t, const double *attrs) {
  int rc = check_update(t, 3, 1, 5, DT, "adagrad_update");
  if (rc) return rc;
  (void)attrs;
  const double *h = t[4]->data;
  T *p = t[0]->data, *sum = t[2]->data;
  const T *g = t[1]->data;
  float *stepp = t[3]->data;
  *stepp = *stepp + 1;
  const double clr = h[0] / (1 + ((double)*stepp - 1) * h[1]);
  const T clr_neg = (T)(-clr), wd = (T)h[2], e = (T)h[3];
  const int maximize = h[4] != 0;
  const int64_t n = t[0]->numel;
  FOR_EACH(n, t[1], {
    T gi = maximize ? -g[gk] : g[gk];
    if (wd != 0) gi = gi + wd * p[i];
    T si = sum[i] + (T)1 * gi * gi;
    sum[i] = si;
    p[i] = p[i] + clr_neg * gi / (SQRT(si) + e);
  })
  return DS_OK;
}

/* radam: param, grad, exp_avg, exp_avg_sq, step, hyper = {lr, beta1, beta2, eps, weight_decay, maximize}. step
   is incremented first; rho_t = rho_inf - 2 step beta2^step / bc2; above 5 the update is rectified:
   p -= (m / bc1) lr (sqrt(bc2) / (sqrt(v) + eps)) rect, else p -= (m / bc1) lr */
int FN(ds_radam_update)(ds_tensor *const *t, const double *attrs) {
  int rc = check_update(t, 4, 1, 6, DT, "radam_update");
  if (rc) return rc;
  (void)attrs;
  const double *h = t[5]->data;
  T *p = t[0]->data, *m = t[2]->data, *v = t[3]->data;
  const T *g = t[1]->data;
  float *stepp = t[4]->data;
  const double lr = h[0], beta1 = h[1], beta2 = h[2];
  const int maximize = h[5] != 0;
  *stepp = *stepp + 1;
  const double step = *stepp, bc1 = 1 - pow(beta1, step), bc2 = 1 - pow(beta2, step);
  const double rho_inf = 2 / (1 - beta2) - 1, rho_t = rho_inf - 2 * step * pow(beta2, step) / bc2;
  const int rectify = rho_t > 5;
  const double rect = rectify ? sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) : 0;
  const T b1 = (T)beta1, b2 = (T)beta2, a1 = (T)(1 - beta1), a2 = (T)(1 - beta2), e = (T)h[3], wd = (T)h[4];
  const T tbc1 = (T)bc1, tlr = (T)lr, bc2_sqrt = (T)sqrt(bc2), trect = (T)rect;
  const int64_t n = t[0]->numel;
  FOR_EACH(n, t[1], {
    T gi = maximize ? -g[gk] : g[gk];
    if (wd != 0) gi = gi + wd * p[i];
    T mi = m[i] * b1; mi = mi + a1 * gi;
    T vi = v[i] * b2; vi = vi + a2 * gi * gi;
    m[i] = mi; v[i] = vi;
    T bcm = mi / tbc1;
    if (rectify) p[i] = p[i] - bcm * tlr * ((T)1 / (SQRT(vi) + e) * bc2_sqrt) * trect; /* torch: x / t is 1/t * x */
    else p[i] = p[i] - bcm * tlr;
  })
  return DS_OK;
}

/* nadam: param, grad, exp_avg, exp_avg_sq, mu_product, step, hyper = {lr, beta1, beta2, eps, weight_decay,
   momentum_decay, maximize}. mu = beta1 (1 - 0.96^(step momentum_decay) / 2) (mu_next at step + 1);
   mu_product *= mu (f32, as torch keeps it); denom = sqrt(v / bc2) + eps;
   p += -lr (1 - mu) / (1 - mu_product) g / denom, then += -lr mu_next / (1 - mu_product mu_next) m / denom */
int FN(ds_nadam_update)(ds_tensor *const *t, const double *attrs) {
  int rc = check_update(t, 4, 2, 7, DT, "nadam_update");
  if (rc) return rc;
  (void)attrs;
  const double *h = t[6]->data;
  T *p = t[0]->data, *m = t[2]->data, *v = t[3]->data;
  const T *g = t[1]->data;
  float *mup = t[4]->data, *stepp = t[5]->data;
  const double lr = h[0], beta1 = h[1], beta2 = h[2], md = h[5];
  const int maximize = h[6] != 0;
  *stepp = *stepp + 1;
  const double step = *stepp, bc2 = 1 - pow(beta2, step);
  const double mu = beta1 * (1. - 0.5 * pow(0.96, step * md));
  const double mu_next = beta1 * (1. - 0.5 * pow(0.96, (step + 1) * md));
  const float mp = *mup * (float)mu, mp_next = mp * (float)mu * (float)mu_next;
  *mup = mp;
  const T c1 = (T)(-lr * (1. - mu) / (1. - (double)mp)), c2 = (T)(-lr * mu_next / (1. - (double)mp_next));
  const T b1 = (T)beta1, b2 = (T)beta2, a1 = (T)(1 - beta1), a2 = (T)(1 - beta2), e = (T)h[3], wd = (T)h[4];
  const T tbc2 = (T)bc2;
  const int64_t n = t[0]->numel;
  FOR_EACH(n, t[1], {
    T gi = maximize ? -g[gk] : g[gk];
    if (wd != 0) gi = gi + wd * p[i];
    T mi = m[i] * b1; mi = mi + a1 * gi;
    T vi = v[i] * b2; vi = vi + a2 * gi * gi;
    m[i] = mi; v[i] = vi;
    T denom = SQRT(vi / tbc2) + e;
    T pi = p[i] + c1 * gi / denom;
    p[i] = pi + c2 * mi / denom;
  })
  return DS_OK;
}

/* adamax: param, grad, exp_avg, exp_inf, step, hyper = {lr, beta1, beta2, eps, weight_decay, maximize}. step is
   incremented first; exp_inf = max(beta2 exp_inf, |g| + eps); p -= lr / bc1 m / exp_inf */
int FN(ds_adamax_update)(ds_tensor *const *t, const double *attrs) {
  int rc = check_update(t, 4, 1, 6, DT, "adamax_update");
  if (rc) return rc;
  (void)attrs;
  const double *h = t[5]->data;
  T *p = t[0]->data, *m = t[2]->data, *u = t[3]->data;
  const T *g = t[1]->data;
  float *stepp = t[4]->data;
  const int maximize = h[5] != 0;
  *stepp = *stepp + 1;
  const T clr_neg = (T)(-(h[0] / (1 - pow(h[1], (double)*stepp))));
  const T b1 = (T)h[1], b2 = (T)h[2], a1 = (T)(1 - h[1]), e = (T)h[3], wd = (T)h[4];
  const int64_t n = t[0]->numel;
  FOR_EACH(n, t[1], {
    T gi = maximize ? -g[gk] : g[gk];
    if (wd != 0) gi = gi + wd * p[i];
    T mi = m[i] * b1; mi = mi + a1 * gi;
    T ui = u[i] * b2, ai = ABS(gi) + e;
    ui = (ui >= ai || ui != ui) ? ui : ai; /* torch.amax: NaN wins */
    m[i] = mi; u[i] = ui;
    p[i] = p[i] + clr_neg * mi / ui;
  })
  return DS_OK;
}

/* adadelta: param, grad, square_avg, acc_delta, step, hyper = {lr, rho, eps, weight_decay, maximize}.
   sq = rho sq + (1 - rho) g g; delta = sqrt(acc + eps) / sqrt(sq + eps) g; acc = rho acc + (1 - rho) delta delta;
   p -= lr delta; step is incremented */
int FN(ds_adadelta_update)(ds_tensor *const *t, const double *attrs) {
  int rc = check_update(t, 4, 1, 5, DT, "adadelta_update");
  if (rc) return rc;
  (void)attrs;
  const double *h = t[5]->data;
  T *p = t[0]->data, *sq = t[2]->data, *acc = t[3]->data;
  const T *g = t[1]->data;
  float *step = t[4]->data;
  const T lr_neg = (T)(-h[0]), rho = (T)h[1], a1 = (T)(1 - h[1]), e = (T)h[2], wd = (T)h[3];
  const int maximize = h[4] != 0;
  const int64_t n = t[0]->numel;
  FOR_EACH(n, t[1], {
    T gi = maximize ? -g[gk] : g[gk];
    if (wd != 0) gi = gi + wd * p[i];
    T si = sq[i] * rho; si = si + a1 * gi * gi;
    sq[i] = si;
    T delta = SQRT(acc[i] + e) / SQRT(si + e) * gi;
    T ai = acc[i] * rho; ai = ai + a1 * delta * delta;
    acc[i] = ai;
    p[i] = p[i] + lr_neg * delta;
  })
  *step = *step + 1;
  return DS_OK;
}

#undef T
#undef DT
#undef FN
