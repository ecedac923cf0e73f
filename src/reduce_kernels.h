/* reduce_kernels.h: the folds and kernels of one dtype: sum, prod, amax, amin, all, any, max/min with indices,
   argmax, argmin, cumsum. reduce.c includes it through all_kernels.h (T, DT, FN, FLOATING, LOWEST, HIGHEST).
   Floats sum and multiply in double (f32 sums in float lanes within one run of <= DS_CHUNK); integers and bools
   in 64-bit wrapping arithmetic (unsigned inside, so overflow is defined) and give i64, like PyTorch. */
#if FLOATING
#define WIDE double     /* sum, prod and cumsum accumulate in WIDE, map elements with WIDE_MAP, */
#define WIDE_MAP SAME
#define SUM_LANES T
#define WIDE_OUT T      /* and give WIDE_OUT (dtype WIDE_DT) */
#define WIDE_DT DT
#else
#define WIDE uint64_t
#define WIDE_MAP TO_U64
#define SUM_LANES uint64_t
#define WIDE_OUT int64_t
#define WIDE_DT DS_I64
#endif

/* ==== the folds ==== */
#define FOLD(x) FN(x##_sum)
#define A WIDE
#define L SUM_LANES
#define INIT 0
#define MAP WIDE_MAP
#define COMB ADD
#define PAR_MIN CHEAP_PAR_MIN
#include "reduce_fold.h"

#define FOLD(x) FN(x##_prod)
#define A WIDE
#define L WIDE
#define INIT 1
#define MAP WIDE_MAP
#define COMB MUL
#define PAR_MIN CHEAP_PAR_MIN
#include "reduce_fold.h"

#define FOLD(x) FN(x##_amax)
#define A T
#define L T
#define INIT LOWEST
#define MAP SAME
#define COMB MAXN
#define PAR_MIN CHEAP_PAR_MIN
#include "reduce_fold.h"

#define FOLD(x) FN(x##_amin)
#define A T
#define L T
#define INIT HIGHEST
#define MAP SAME
#define COMB MINN
#define PAR_MIN CHEAP_PAR_MIN
#include "reduce_fold.h"

#define FOLD(x) FN(x##_all)
#define A uint8_t
#define L uint8_t
#define INIT 1
#define MAP NONZERO
#define COMB AND
#define PAR_MIN CHEAP_PAR_MIN
#include "reduce_fold.h"

#define FOLD(x) FN(x##_any)
#define A uint8_t
#define L uint8_t
#define INIT 0
#define MAP NONZERO
#define COMB OR
#define PAR_MIN CHEAP_PAR_MIN
#include "reduce_fold.h"

typedef struct { T v; int64_t i; } FN(arg);
#define FOLD(x) FN(x##_argmax)
#define BETTER BETTER_MAX
#include "reduce_argfold.h"

#define FOLD(x) FN(x##_argmin)
#define BETTER BETTER_MIN
#include "reduce_argfold.h"

/* ==== the kernels ==== */
/* sum/prod: f32 -> f32, f64 -> f64, integers and bool -> i64 */
static int FN(sumlike)(const char *op, const rdesc *d, ds_tensor *const *t, const double *attrs) {
  static const int odt[1] = {WIDE_DT}; rcall rc; char *acc;
  int r = check_call(op, t, 1, DT, odt, attrs, &rc); if (r) return r;
  if ((r = fold_all(d, &rc, t[1], NULL, &acc))) return r;
  WIDE_OUT *o = t[0]->data;
  for (int64_t i = 0; i < rc.plan.nout; i++) o[i] = (WIDE_OUT)((const WIDE *)acc)[i];
  free(acc); return DS_OK;
}
int FN(ds_sum)(ds_tensor *const *t, const double *attrs) { return FN(sumlike)("sum", &FN(desc_sum), t, attrs); }
int FN(ds_prod)(ds_tensor *const *t, const double *attrs) { return FN(sumlike)("prod", &FN(desc_prod), t, attrs); }

/* amax/amin keep the dtype (and refuse an empty dim); all/any give bool */
static int FN(sameout)(const char *op, const rdesc *d, int out_dt, int empty_ok, ds_tensor *const *t,
                       const double *attrs) {
  const int odt[1] = {out_dt}; rcall rc; char *acc;
  int r = check_call(op, t, 1, DT, odt, attrs, &rc); if (r) return r;
  if (!empty_ok && rc.plan.R == 0 && rc.plan.nout > 0)
    return ds_fail(DS_EINVAL, "%s: cannot reduce over an empty dim", op);
  if ((r = fold_all(d, &rc, t[1], NULL, &acc))) return r;
  memcpy(t[0]->data, acc, (size_t)(rc.plan.nout * d->asize));
  free(acc); return DS_OK;
}
int FN(ds_amax)(ds_tensor *const *t, const double *attrs) {
  return FN(sameout)("amax", &FN(desc_amax), DT, 0, t, attrs);
}
int FN(ds_amin)(ds_tensor *const *t, const double *attrs) {
  return FN(sameout)("amin", &FN(desc_amin), DT, 0, t, attrs);
}
int FN(ds_all)(ds_tensor *const *t, const double *attrs) {
  return FN(sameout)("all", &FN(desc_all), DS_BOOL, 1, t, attrs);
}
int FN(ds_any)(ds_tensor *const *t, const double *attrs) {
  return FN(sameout)("any", &FN(desc_any), DS_BOOL, 1, t, attrs);
}

/* max/min over dims with indices: t = values, indices (i64, 1-based), x; argmax/argmin: t = indices, x.
   The index is the flat row-major position among the reduced dims (the dim's index for one dim). */
static int FN(argred)(const char *op, const rdesc *d, ds_tensor *const *t, const double *attrs, int values) {
  static const int odt_vi[2] = {DT, DS_I64}, odt_i[1] = {DS_I64}; rcall rc; char *acc;
  int r = check_call(op, t, values ? 2 : 1, DT, values ? odt_vi : odt_i, attrs, &rc); if (r) return r;
  if (rc.plan.R == 0 && rc.plan.nout > 0) return ds_fail(DS_EINVAL, "%s: cannot reduce over an empty dim", op);
  if ((r = fold_all(d, &rc, t[values ? 2 : 1], NULL, &acc))) return r;
  T *v = t[0]->data; int64_t *ix = t[values ? 1 : 0]->data; const FN(arg) *a = (const void *)acc;
  if (values) for (int64_t i = 0; i < rc.plan.nout; i++) { v[i] = a[i].v; ix[i] = a[i].i + 1; }
  else for (int64_t i = 0; i < rc.plan.nout; i++) ix[i] = a[i].i + 1;
  free(acc); return DS_OK;
}
int FN(ds_max)(ds_tensor *const *t, const double *attrs) { return FN(argred)("max", &FN(desc_argmax), t, attrs, 1); }
int FN(ds_min)(ds_tensor *const *t, const double *attrs) { return FN(argred)("min", &FN(desc_argmin), t, attrs, 1); }
int FN(ds_argmax)(ds_tensor *const *t, const double *attrs) {
  return FN(argred)("argmax", &FN(desc_argmax), t, attrs, 0);
}
int FN(ds_argmin)(ds_tensor *const *t, const double *attrs) {
  return FN(argred)("argmin", &FN(desc_argmin), t, attrs, 0);
}

/* cumsum: attrs = {dim, reverse}; floats accumulate in double (as PyTorch's CPU kernel), integers and bools in
   wrapping 64-bit and give i64 */
static void FN(cumsum_line)(const char *xp, int64_t xs, char *yp, int64_t ys, int64_t n, const double *attrs,
                            char *scratch) {
  const T *x = (const T *)xp; WIDE_OUT *y = (WIDE_OUT *)yp; WIDE acc = 0; (void)scratch;
  if (attrs[1] != 0) for (int64_t i = n - 1; i >= 0; i--) { acc += (WIDE)x[i * xs]; y[i * ys] = (WIDE_OUT)acc; }
  else for (int64_t i = 0; i < n; i++) { acc += (WIDE)x[i * xs]; y[i * ys] = (WIDE_OUT)acc; }
}
int FN(ds_cumsum)(ds_tensor *const *t, const double *attrs) {
  return for_lines("cumsum", t, WIDE_DT, DT, 0, FN(cumsum_line), attrs);
}
#undef WIDE
#undef WIDE_MAP
#undef SUM_LANES
#undef WIDE_OUT
#undef WIDE_DT
