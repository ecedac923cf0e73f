/* reduce_float_kernels.h: the float-only reductions of one dtype: mean, var, std, logsumexp (with their folds of
   squared deviations and of exps), softmax and log_softmax. reduce.c includes it through float_kernels.h (T, DT,
   FN), after reduce_kernels.h (the sum and amax folds). */
#define EXP(x) _Generic((x), float: ds_expf, default: exp)(x)
#define LOG(x) _Generic((x), float: ds_logf, default: log)(x)
#define SQDEV(x, c) (((x) - (T)(c)) * ((x) - (T)(c)))
#define EXPDEV(x, c) EXP((x) - (T)(c))

#define FOLD(x) FN(x##_sqdev)
#define A double
#define L T
#define INIT 0
#define MAP SQDEV
#define COMB ADD
#define PAR_MIN CHEAP_PAR_MIN
#include "reduce_fold.h"

#define FOLD(x) FN(x##_expdev)
#define A double
#define L T
#define INIT 0
#define MAP EXPDEV
#define COMB ADD
#define PAR_MIN DS_PAR_MIN
#include "reduce_fold.h"

/* mean, var, std, logsumexp. var/std: extra[0] = correction (1 = unbiased); two passes (mean, then squared
   deviations), divisor max(0, R - correction). logsumexp: shift by the max (0 when it is infinite), log of the
   sum of exps, shift back. */
int FN(ds_mean)(ds_tensor *const *t, const double *attrs) {
  static const int odt[1] = {DT}; rcall rc; char *acc;
  int r = check_call("mean", t, 1, DT, odt, attrs, &rc); if (r) return r;
  if ((r = fold_all(&FN(desc_sum), &rc, t[1], NULL, &acc))) return r;
  T *o = t[0]->data; const double *a = (const double *)acc;
  for (int64_t i = 0; i < rc.plan.nout; i++) o[i] = (T)(a[i] / (double)rc.plan.R);
  free(acc); return DS_OK;
}

static int FN(var)(const char *op, ds_tensor *const *t, const double *attrs, int take_sqrt) {
  static const int odt[1] = {DT}; rcall rc; char *mean, *acc;
  int r = check_call(op, t, 1, DT, odt, attrs, &rc); if (r) return r;
  if ((r = fold_all(&FN(desc_sum), &rc, t[1], NULL, &mean))) return r;
  double *m = (double *)mean;
  for (int64_t i = 0; i < rc.plan.nout; i++) m[i] /= (double)rc.plan.R;
  r = fold_all(&FN(desc_sqdev), &rc, t[1], mean, &acc); free(mean); if (r) return r;
  double den = (double)rc.plan.R - rc.extra[0]; if (den < 0) den = 0;
  T *o = t[0]->data; const double *a = (const double *)acc;
  for (int64_t i = 0; i < rc.plan.nout; i++) o[i] = (T)(take_sqrt ? sqrt(a[i] / den) : a[i] / den);
  free(acc); return DS_OK;
}
int FN(ds_var)(ds_tensor *const *t, const double *attrs) { return FN(var)("var", t, attrs, 0); }
int FN(ds_std)(ds_tensor *const *t, const double *attrs) { return FN(var)("std", t, attrs, 1); }

int FN(ds_logsumexp)(ds_tensor *const *t, const double *attrs) {
  static const int odt[1] = {DT}; rcall rc; char *mx, *acc;
  int r = check_call("logsumexp", t, 1, DT, odt, attrs, &rc); if (r) return r;
  if ((r = fold_all(&FN(desc_amax), &rc, t[1], NULL, &mx))) return r;
  double *c = malloc((size_t)((rc.plan.nout ? rc.plan.nout : 1) * sizeof(double)));
  if (!c) { free(mx); return ds_fail(DS_ENOMEM, "logsumexp: out of memory"); }
  for (int64_t i = 0; i < rc.plan.nout; i++) { double v = ((const T *)mx)[i]; c[i] = isinf(v) ? 0.0 : v; }
  free(mx);
  r = fold_all(&FN(desc_expdev), &rc, t[1], c, &acc); if (r) { free(c); return r; }
  T *o = t[0]->data; const double *a = (const double *)acc;
  for (int64_t i = 0; i < rc.plan.nout; i++) o[i] = (T)(log(a[i]) + c[i]);
  free(c); free(acc); return DS_OK;
}

/* softmax over one contiguous line (n >= 1): max (16 lanes), exps and their sum (8 lanes, then the tail in
   order), then scale by 1 / sum (or x - max - log sum). Strided lines are gathered into scratch first, so every
   layout gives the same bits. */
static void FN(softmax_core)(const T *x, T *y, int64_t n, int logsm) {
  T l[LANES], m = x[0], s = 0; int64_t i = 0;
  if (n >= LANES) {
    for (int k = 0; k < LANES; k++) l[k] = x[k];
    for (i = LANES; i + LANES <= n; i += LANES) {
      #pragma omp simd
      for (int k = 0; k < LANES; k++) l[k] = MAXN(l[k], x[i + k]);
    }
    for (int w = LANES / 2; w; w /= 2) for (int k = 0; k < w; k++) l[k] = MAXN(l[k], l[k + w]);
    m = l[0];
  }
  for (; i < n; i++) m = MAXN(m, x[i]);
  i = 0;
  if (n >= EXP_LANES) { /* fewer lanes here: the inlined exp needs the registers */
    for (int k = 0; k < EXP_LANES; k++) l[k] = 0;
    for (; i + EXP_LANES <= n; i += EXP_LANES) {
      #pragma omp simd
      for (int k = 0; k < EXP_LANES; k++) {
        T e = EXP(x[i + k] - m); y[i + k] = e; l[k] += e;
      }
    }
    for (int w = EXP_LANES / 2; w; w /= 2) for (int k = 0; k < w; k++) l[k] += l[k + w];
    s = l[0];
  }
  for (; i < n; i++) { T e = EXP(x[i] - m); y[i] = e; s += e; }
  if (logsm) { T ls = LOG(s); for (i = 0; i < n; i++) y[i] = (x[i] - m) - ls; }
  else { T r = 1 / s; for (i = 0; i < n; i++) y[i] = y[i] * r; }
}

static void FN(softmax_line)(const char *xp, int64_t xs, char *yp, int64_t ys, int64_t n, const double *attrs,
                             char *scratch) {
  int logsm = attrs[1] != 0;
  if (xs == 1 && ys == 1) { FN(softmax_core)((const T *)xp, (T *)yp, n, logsm); return; }
  const T *x = (const T *)xp; T *y = (T *)yp, *a = (T *)scratch, *b = a + n;
  for (int64_t i = 0; i < n; i++) a[i] = x[i * xs];
  FN(softmax_core)(a, b, n, logsm);
  for (int64_t i = 0; i < n; i++) y[i * ys] = b[i];
}

int FN(ds_softmax)(ds_tensor *const *t, const double *attrs) {
  double a[2] = {attrs[0], 0}; return for_lines("softmax", t, DT, DT, 2 * sizeof(T), FN(softmax_line), a);
}
int FN(ds_log_softmax)(ds_tensor *const *t, const double *attrs) {
  double a[2] = {attrs[0], 1}; return for_lines("log_softmax", t, DT, DT, 2 * sizeof(T), FN(softmax_line), a);
}
#undef EXP
#undef LOG
#undef SQDEV
#undef EXPDEV
#undef T
#undef DT
#undef FN
