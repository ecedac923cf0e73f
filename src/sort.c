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
#define KERNELS "sort_kernels.h"
#define KERNEL_DTYPES (KD_F32 | KD_F64 | KD_I64 | KD_I32 | KD_U8)
#include "all_kernels.h"

/* cumprod: t = {y, x}; attrs = {dim}. Floats multiply in double (as cumsum does, PyTorch's CPU
   accumulation), integers in wrapping 64-bit and give i64. */
#define KERNELS "cumprod_kernels.h"
#include "all_kernels.h"
