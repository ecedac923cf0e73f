/* conv_pool.c: conv2d_pool, a conv2d with its activation and the pooling after it in one plan step
   (lua/ds/passes/conv_pool.lua). Batches the images-along-lanes path takes are pooled block by block as they are
   computed (nn_conv.h's ds_conv2d_pool_lanes_f32); any other geometry runs the conv into a scratch tensor, the
   activation, then the pool kernel. Either way the ops of the three steps, so their bits. */
#include "internal.h"
#include "nn_conv.h"
#include "elementwise_ops.h"

int ds_max_pool2d_values_f32(ds_tensor *const *t, const double *attrs);   /* nn_pool.c */
int ds_avg_pool2d_f32(ds_tensor *const *t, const double *attrs);

#define CONV_ATTRS 7   /* stride h, w, padding h, w, dilation h, w, groups */
#define NATTRS (CONV_ATTRS + 9)   /* then act, pool kind, kh, kw, sh, sw, ph, pw, count_include_pad */

static int attr_int(double v, int64_t lo, int64_t hi, int64_t *out) {
  if (!(v >= (double)lo && v <= (double)hi) || v != (double)(int64_t)v) return 0;
  *out = (int64_t)v;
  return 1;
}

/* the activation as the conv kernels' epilogue callback: over images [n0, n0 + m), channels [c0, c0 + nc) */
typedef struct { conv_ep ep; float *y; int64_t C, plane; int act; } act_ep;
static void act_apply(const conv_ep *e, int64_t n0, int64_t m, int64_t c0, int64_t nc) {
  const act_ep *a = (const act_ep *)e;
  for (int64_t n = n0; n < n0 + m; n++) {
    float *p = a->y + (n * a->C + c0) * a->plane;
    int64_t len = nc * a->plane;
    if (a->act == CONV_ACT_RELU) for (int64_t i = 0; i < len; i++) p[i] = el_relu_f32(p[i]);
    else for (int64_t i = 0; i < len; i++) p[i] = el_hardswish_f32(p[i]);
  }
}

/* the conv (N, OC, OH, OW) into a scratch tensor, the activation as its epilogue, then the pool kernel into out */
static int conv_then_pool(ds_tensor *const *t, const double *attrs, int act, int kind, const double *pool_attrs,
                          int64_t OH, int64_t OW) {
  const ds_tensor *x = t[1], *w = t[2];
  int64_t shape[4] = { x->shape[0], w->shape[0], OH, OW };
  ds_tensor *y = ds_tensor_new(DS_F32, 4, shape);
  if (!y) return ds_fail(DS_ENOMEM, "conv2d_pool: out of memory for the conv's output");
  /* hardswish as conv_ep's act, which the direct kernels apply in their registers (the others call act_apply);
     relu only through act_apply: of the ep->act codes the direct kernels apply hardswish alone */
  act_ep a = { { act_apply, act == CONV_ACT_HARDSWISH ? CONV_ACT_HARDSWISH : CONV_ACT_NONE }, y->data, shape[1],
               OH * OW, act };
  ds_tensor *ct[4] = { y, t[1], t[2], t[3] };
  int rc = ds_conv2d_ep_run_f32(ct, attrs, act == CONV_ACT_NONE ? NULL : &a.ep);
  if (!rc) {
    ds_tensor *pt[2] = { t[0], y };
    rc = kind == CONV_POOL_MAX ? ds_max_pool2d_values_f32(pt, pool_attrs) : ds_avg_pool2d_f32(pt, pool_attrs);
  }
  ds_tensor_free(y);
  return rc;
}

/* t = out (N, OC, PH, PW), x (N, C, H, W), w (OC, C/groups, KH, KW), b (OC); attrs: NATTRS numbers (above). The
   lanes entry checks the operands, the conv's geometry and the pooling's before it takes or declines the batch. */
int ds_conv2d_pool_f32(ds_tensor *const *t, const double *attrs) {
  int64_t a[NATTRS];
  static const int64_t lo[NATTRS] = { 1, 1, 0, 0, 1, 1, 1, CONV_ACT_NONE, CONV_POOL_MAX, 1, 1, 1, 1, 0, 0, 0 };
  static const int64_t hi[NATTRS] = { 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, CONV_ACT_RELU,
                                      CONV_POOL_AVG, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 };
  for (int i = 0; i < NATTRS; i++)
    DS_CHECK(attr_int(attrs[i], lo[i], hi[i], &a[i]), "conv2d_pool: attribute %d is %g, not an integer in [%lld, %lld]",
             i + 1, attrs[i], (long long)lo[i], (long long)hi[i]);
  conv_pool pool = { (int)a[8], (int)a[15], a[9], a[10], a[11], a[12], a[13], a[14] };
  int rc = ds_conv2d_pool_lanes_f32(t, attrs, (int)a[7], &pool);
  if (rc != CONV_NOT_DIRECT) return rc;
  const ds_tensor *x = t[1], *w = t[2];
  int64_t OH = (x->shape[2] + 2 * a[2] - a[4] * (w->shape[2] - 1) - 1) / a[0] + 1;
  int64_t OW = (x->shape[3] + 2 * a[3] - a[5] * (w->shape[3] - 1) - 1) / a[1] + 1;
  return conv_then_pool(t, attrs, (int)a[7], pool.kind, attrs + CONV_ATTRS + 2, OH, OW);
}
