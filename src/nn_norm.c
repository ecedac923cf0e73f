/* nn_norm.c: layer_norm over the last D elements of each row (fused: y, mean, rstd in one kernel) and
   its backward (grad input per row; grad weight/bias summed over fixed row chunks, chunks in order). */
#include "internal.h"

/* rows = x->numel / D; attrs[0] = D */
static int norm_rows(const ds_tensor *x, const double *attrs, const char *op, int64_t *D, int64_t *R) {
  double d = attrs[0];
  DS_CHECK(d >= 1 && d <= 1e15 && d == (double)(int64_t)d, "%s: normalized size must be an integer >= 1", op);
  *D = (int64_t)d;
  DS_CHECK(x->numel % *D == 0, "%s: %lld elements are not rows of %lld", op, (long long)x->numel, (long long)*D);
  *R = x->numel / *D;
  return DS_OK;
}

static int check(const ds_tensor *t, int dtype, int64_t numel, const char *op, const char *what) {
  DS_CHECK(t && t->dtype == dtype, "%s: %s must be %s", op, what, ds_dtype_name(dtype));
  DS_CHECK(t->numel == numel,
           "%s: %s has %lld elements, expected %lld", op, what, (long long)t->numel, (long long)numel);
  DS_CHECK(ds_tensor_is_contiguous(t), "%s: %s must be contiguous", op, what);
  return DS_OK;
}

/* rows per chunk for the grad weight/bias sums: from the shape only (not the thread count) */
static int64_t row_chunk(int64_t R) {
  int64_t c = (R + 63) / 64;
  return c < 16 ? 16 : c;
}

/* the kernels once per dtype (the file #undefs T, DT and FN at its end) */
#define T float
#define DT DS_F32
#define FN(name) name##_f32
#include "nn_norm_kernels.h"
#define T double
#define DT DS_F64
#define FN(name) name##_f64
#include "nn_norm_kernels.h"
