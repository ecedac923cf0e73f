/* sort.c: per-line kernels of the sorting family: sort (stable, values and 1-based i64 indices) and cumprod. */
#include "internal.h"
#include <math.h>
#include <stdlib.h>

/* one line of n elements along dim; fn gets x's line (stride xs), and the outputs' lines (strides ys) */
typedef int (*line_fn)(const char *x, int64_t xs, char *y0, char *y1, int64_t ys0, int64_t ys1, int64_t n, double opt);

/* runs fn over every line of x along dim; outputs y0 (and y1 when given) have x's shape */
static int for_each_line(const char *op, const ds_tensor *x, ds_tensor *y0, ds_tensor *y1, double dim_attr, double opt,
                         line_fn fn) {
  char b1[128], b2[128];
  int nd = x->ndim ? x->ndim : 1;
  if (dim_attr != floor(dim_attr) || dim_attr < 0 || dim_attr >= nd)
    return ds_fail(DS_EINVAL, "%s: dim %g out of range for %s", op, dim_attr + 1, ds_shape_str(x, b1));
  ds_tensor *ys[2] = {y0, y1};
  for (int k = 0; k < 2; k++) {
    if (!ys[k]) continue;
    int ok = ys[k]->ndim == x->ndim;
    for (int d = 0; ok && d < x->ndim; d++) ok = ys[k]->shape[d] == x->shape[d];
    if (!ok)
      return ds_fail(DS_EINVAL, "%s: output %s does not match input %s", op, ds_shape_str(ys[k], b1),
                     ds_shape_str(x, b2));
  }
  if (x->numel == 0) return DS_OK;
  int dim = (int)dim_attr;
  int64_t n = x->ndim ? x->shape[dim] : 1, nlines = x->numel / n;
  int64_t es_x = ds_dtype_size(x->dtype), es0 = ds_dtype_size(y0->dtype), es1 = y1 ? ds_dtype_size(y1->dtype) : 0;
  int64_t xs = x->ndim ? x->strides[dim] : 0, s0 = x->ndim ? y0->strides[dim] : 0,
          s1 = (y1 && x->ndim) ? y1->strides[dim] : 0;
  int64_t idx[DS_MAXDIM] = {0}, xo = 0, o0 = 0, o1 = 0;
  for (int64_t l = 0; l < nlines; l++) {
    int rc = fn((const char *)x->data + xo * es_x, xs, (char *)y0->data + o0 * es0,
                y1 ? (char *)y1->data + o1 * es1 : NULL, s0, s1, n, opt);
    if (rc) return rc;
    for (int d = x->ndim - 1; d >= 0; d--) {
      if (d == dim) continue;
      xo += x->strides[d]; o0 += y0->strides[d]; if (y1) o1 += y1->strides[d];
      if (++idx[d] < x->shape[d]) break;
      xo -= idx[d] * x->strides[d]; o0 -= idx[d] * y0->strides[d]; if (y1) o1 -= idx[d] * y1->strides[d];
      idx[d] = 0;
    }
  }
  return DS_OK;
}

/* sort: t = {values, indices (i64), x}; attrs = {dim, descending}. A stable merge sort of positions;
   NaN sorts above every number (last ascending, first descending), as in PyTorch. */
#define SORT(S, T, DT, ISNAN) \
  static int before_##S(T a, T b, int desc) { /* a strictly before b */ \
    if (ISNAN(a)) return desc && !ISNAN(b); \
    if (ISNAN(b)) return !desc; \
    return desc ? a > b : a < b; } \
  static int sort_line_##S(const char *xp, int64_t xs, char *vp, char *ip, int64_t vs, int64_t is, \
      int64_t n, double desc) { \
    const T *x = (const T *)xp; T *v = (T *)vp; int64_t *ix = (int64_t *)ip; \
    int64_t *a = malloc((size_t)n * 2 * sizeof(int64_t)); \
    if (!a) return ds_fail(DS_ENOMEM, "sort: out of memory for a line of %lld", (long long)n); \
    int64_t *b = a + n; int d = desc != 0; \
    for (int64_t i = 0; i < n; i++) a[i] = i; \
    for (int64_t w = 1; w < n; w *= 2) { \
      for (int64_t lo = 0; lo < n; lo += 2 * w) { \
        int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, k = lo; \
        while (i < mid && j < hi) b[k++] = before_##S(x[a[j] * xs], x[a[i] * xs], d) ? a[j++] : a[i++]; \
        while (i < mid) b[k++] = a[i++]; \
        while (j < hi) b[k++] = a[j++]; \
      } \
      int64_t *t = a; a = b; b = t; \
    } \
    for (int64_t i = 0; i < n; i++) { v[i * vs] = x[a[i] * xs]; ix[i * is] = a[i] + 1; } \
    free(a < b ? a : b); \
    return 0; } \
  int ds_sort_##S(ds_tensor *const *t, const double *attrs) { \
    if (!t[0] || !t[1] || !t[2] || t[2]->dtype != DT || t[0]->dtype != DT || t[1]->dtype != DS_I64) \
      return ds_fail(DS_EINVAL, "sort: expects values of the input's dtype and i64 indices"); \
    return for_each_line("sort", t[2], t[0], t[1], attrs[0], attrs[1], sort_line_##S); }
#define NOT_NAN(v) 0
SORT(f32, float, DS_F32, isnan) SORT(f64, double, DS_F64, isnan) SORT(i64, int64_t, DS_I64, NOT_NAN)
SORT(i32, int32_t, DS_I32, NOT_NAN) SORT(u8, uint8_t, DS_U8, NOT_NAN)

/* cumprod: t = {y, x}; attrs = {dim}. Floats multiply in double (as cumsum does, PyTorch's CPU
   accumulation), integers in wrapping 64-bit and give i64. */
#define CUMPROD(S, T, DT, A, TO, DO) \
  static int cumprod_line_##S(const char *xp, int64_t xs, char *yp, char *unused, int64_t ys, int64_t us, \
      int64_t n, double opt) { \
    const T *x = (const T *)xp; TO *y = (TO *)yp; A acc = 1; \
    for (int64_t i = 0; i < n; i++) { acc *= (A)x[i * xs]; y[i * ys] = (TO)acc; } \
    return 0; } \
  int ds_cumprod_##S(ds_tensor *const *t, const double *attrs) { \
    if (!t[0] || !t[1] || t[1]->dtype != DT || t[0]->dtype != DO) \
      return ds_fail(DS_EINVAL, "cumprod: expects a " #S " input and a matching output"); \
    return for_each_line("cumprod", t[1], t[0], NULL, attrs[0], 0, cumprod_line_##S); }
CUMPROD(f32, float, DS_F32, double, float, DS_F32) CUMPROD(f64, double, DS_F64, double, double, DS_F64)
CUMPROD(i64, int64_t, DS_I64, uint64_t, int64_t, DS_I64) CUMPROD(i32, int32_t, DS_I32, uint64_t, int64_t, DS_I64)
CUMPROD(u8, uint8_t, DS_U8, uint64_t, int64_t, DS_I64) CUMPROD(bool, uint8_t, DS_BOOL, uint64_t, int64_t, DS_I64)
