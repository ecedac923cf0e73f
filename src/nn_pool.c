/* nn_pool.c: max_pool2d (values + 1-based flat indices into each HxW plane) and avg_pool2d on NCHW,
   with their backward kernels. Planes (n, c) are independent: split across threads when large. */
#include "internal.h"

/* attrs: kh, kw, sh, sw, ph, pw [, count_include_pad] */
typedef struct { int64_t P, H, W, OH, OW, kh, kw, sh, sw, ph, pw; } pgeom;

static int attr_int(double v, int64_t lo, int64_t *out) {
  if (!(v >= (double)lo && v <= 1e9) || v != (double)(int64_t)v) return 0;
  *out = (int64_t)v;
  return 1;
}

/* x: the 4-D input (or grad input), y: the 4-D output (or grad output) */
static int make_pgeom(pgeom *g, const double *a, const char *op, const ds_tensor *x, const ds_tensor *y, int dtype) {
  char s1[128], s2[128];
  DS_CHECK(x && y && x->dtype == dtype && y->dtype == dtype, "%s: operands must all be %s", op, ds_dtype_name(dtype));
  DS_CHECK(x->ndim == 4 && y->ndim == 4,
           "%s: expects 4-D (N,C,H,W) tensors, got %s and %s", op, ds_shape_str(x, s1), ds_shape_str(y, s2));
  DS_CHECK(ds_tensor_is_contiguous(x) && ds_tensor_is_contiguous(y), "%s: operands must be contiguous", op);
  DS_CHECK(attr_int(a[0], 1, &g->kh) && attr_int(a[1], 1, &g->kw), "%s: kernel size must be integers >= 1", op);
  DS_CHECK(attr_int(a[2], 1, &g->sh) && attr_int(a[3], 1, &g->sw), "%s: stride must be integers >= 1", op);
  DS_CHECK(attr_int(a[4], 0, &g->ph) && attr_int(a[5], 0, &g->pw), "%s: padding must be integers >= 0", op);
  DS_CHECK(2 * g->ph <= g->kh && 2 * g->pw <= g->kw,
           "%s: padding (%lld,%lld) must be at most half the kernel (%lld,%lld)", op,
           (long long)g->ph, (long long)g->pw, (long long)g->kh, (long long)g->kw);
  g->H = x->shape[2]; g->W = x->shape[3];
  DS_CHECK(g->H >= 1 && g->W >= 1, "%s: empty input plane %s", op, ds_shape_str(x, s1));
  DS_CHECK(g->kh <= g->H + 2 * g->ph && g->kw <= g->W + 2 * g->pw,
           "%s: kernel (%lld,%lld) is larger than the padded input %s", op,
           (long long)g->kh, (long long)g->kw, ds_shape_str(x, s1));
  g->OH = (g->H + 2 * g->ph - g->kh) / g->sh + 1;
  g->OW = (g->W + 2 * g->pw - g->kw) / g->sw + 1;
  DS_CHECK(y->shape[0] == x->shape[0] && y->shape[1] == x->shape[1] && y->shape[2] == g->OH && y->shape[3] == g->OW,
           "%s: output %s does not match input %s", op, ds_shape_str(y, s2), ds_shape_str(x, s1));
  g->P = x->shape[0] * x->shape[1];
  return DS_OK;
}

/* window rows [*h0, *h1) of output row oh, clipped to the input */
static void window(int64_t o, int64_t s, int64_t p, int64_t k, int64_t n, int64_t *a, int64_t *b) {
  int64_t lo = o * s - p, hi = lo + k;
  *a = lo < 0 ? 0 : lo;
  *b = hi > n ? n : hi;
}

/* the kernels once per dtype (the file #undefs T, DT and FN at its end) */
#define T float
#define DT DS_F32
#define FN(name) name##_f32
#include "nn_pool_kernels.h"
#define T double
#define DT DS_F64
#define FN(name) name##_f64
#include "nn_pool_kernels.h"
