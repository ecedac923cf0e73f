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
  DS_CHECK(x && y && x->dtype == dtype && y->dtype == dtype, "%s: operands must all be %s", op, dtype == DS_F32 ? "f32" : "f64");
  DS_CHECK(x->ndim == 4 && y->ndim == 4, "%s: expects 4-D (N,C,H,W) tensors, got %s and %s", op, ds_shape_str(x, s1), ds_shape_str(y, s2));
  DS_CHECK(ds_is_contig(x) && ds_is_contig(y), "%s: operands must be contiguous", op);
  DS_CHECK(attr_int(a[0], 1, &g->kh) && attr_int(a[1], 1, &g->kw), "%s: kernel size must be integers >= 1", op);
  DS_CHECK(attr_int(a[2], 1, &g->sh) && attr_int(a[3], 1, &g->sw), "%s: stride must be integers >= 1", op);
  DS_CHECK(attr_int(a[4], 0, &g->ph) && attr_int(a[5], 0, &g->pw), "%s: padding must be integers >= 0", op);
  DS_CHECK(2 * g->ph <= g->kh && 2 * g->pw <= g->kw, "%s: padding (%lld,%lld) must be at most half the kernel (%lld,%lld)", op,
           (long long)g->ph, (long long)g->pw, (long long)g->kh, (long long)g->kw);
  g->H = x->shape[2]; g->W = x->shape[3];
  DS_CHECK(g->H >= 1 && g->W >= 1, "%s: empty input plane %s", op, ds_shape_str(x, s1));
  DS_CHECK(g->kh <= g->H + 2 * g->ph && g->kw <= g->W + 2 * g->pw, "%s: kernel (%lld,%lld) is larger than the padded input %s", op,
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

#define POOL_KERNELS(T, S, DT)                                                                                         \
  /* one plane: any window; NaN wins (the last NaN of a window, like PyTorch) */                                        \
  static void maxpool_plane_##S(const T *x, T *o, int64_t *ix, const pgeom *g) {                                        \
    for (int64_t oh = 0; oh < g->OH; oh++) {                                                                            \
      int64_t h0, h1;                                                                                                   \
      window(oh, g->sh, g->ph, g->kh, g->H, &h0, &h1);                                                                  \
      for (int64_t ow = 0; ow < g->OW; ow++) {                                                                          \
        int64_t w0, w1;                                                                                                 \
        window(ow, g->sw, g->pw, g->kw, g->W, &w0, &w1);                                                                \
        int64_t best = h0 * g->W + w0;                                                                                  \
        T m = x[best];                                                                                                  \
        int nan = 0;                                                                                                    \
        for (int64_t h = h0; h < h1; h++)                                                                               \
          for (int64_t w = w0; w < w1; w++) { /* one compare, selects: no unpredictable branch */                       \
            T v = x[h * g->W + w];                                                                                      \
            int gt = v > m;                                                                                             \
            best = gt ? h * g->W + w : best;                                                                            \
            m = gt ? v : m;                                                                                             \
            nan |= v != v;                                                                                              \
          }                                                                                                             \
        if (nan)                                                                                                        \
          for (int64_t h = h0; h < h1; h++)                                                                             \
            for (int64_t w = w0; w < w1; w++)                                                                           \
              if (x[h * g->W + w] != x[h * g->W + w]) { m = x[h * g->W + w]; best = h * g->W + w; }                     \
        o[oh * g->OW + ow] = m;                                                                                         \
        ix[oh * g->OW + ow] = best + 1;                                                                                 \
      }                                                                                                                 \
    }                                                                                                                   \
  }                                                                                                                     \
  /* one plane, 2x2 windows at stride 2 without padding; returns 0 (plane left to the general code) on NaN.             \
     The winner of each window is kept as a code 0..3 first, so both loops vectorize. */                                \
  static int maxpool2x2_plane_##S(const T *x, T *o, int64_t *ix, const pgeom *g) {                                      \
    int nan = 0;                                                                                                        \
    int32_t code[64];                                                                                                   \
    for (int64_t oh = 0; oh < g->OH; oh++) {                                                                            \
      const T *r0 = x + 2 * oh * g->W, *r1 = r0 + g->W;                                                                 \
      for (int64_t o0 = 0; o0 < g->OW; o0 += 64) {                                                                      \
        int64_t n = g->OW - o0 < 64 ? g->OW - o0 : 64;                                                                  \
        const T *a0 = r0 + 2 * o0, *a1 = r1 + 2 * o0;                                                                   \
        T *oo = o + oh * g->OW + o0;                                                                                    \
        for (int64_t i = 0; i < n; i++) {                                                                               \
          T a = a0[2 * i], b = a0[2 * i + 1], c = a1[2 * i], d = a1[2 * i + 1];                                         \
          T m = a;                                                                                                      \
          int32_t k = 0;                                                                                                \
          k = b > m ? 1 : k; m = b > m ? b : m;                                                                         \
          k = c > m ? 2 : k; m = c > m ? c : m;                                                                         \
          k = d > m ? 3 : k; m = d > m ? d : m;                                                                         \
          nan |= (a != a) | (b != b) | (c != c) | (d != d);                                                             \
          oo[i] = m;                                                                                                    \
          code[i] = k;                                                                                                  \
        }                                                                                                               \
        int64_t *io = ix + oh * g->OW + o0, base = 2 * oh * g->W + 2 * o0 + 1;                                          \
        for (int64_t i = 0; i < n; i++) io[i] = base + 2 * i + (code[i] & 1) + (code[i] >> 1) * g->W;                   \
      }                                                                                                                 \
    }                                                                                                                   \
    return !nan;                                                                                                        \
  }                                                                                                                     \
  /* out, idx (i64, 1-based flat index in the plane), x */                                                              \
  int ds_max_pool2d_##S(ds_tensor *const *t, const double *attrs) {                                                     \
    const char *op = "max_pool2d";                                                                                      \
    pgeom g;                                                                                                            \
    int rc = make_pgeom(&g, attrs, op, t[2], t[0], DT);                                                                 \
    if (rc) return rc;                                                                                                  \
    DS_CHECK(t[1] && t[1]->dtype == DS_I64 && t[1]->numel == t[0]->numel && ds_is_contig(t[1]),                         \
             "%s: indices must be a contiguous i64 tensor like the output", op);                                        \
    const T *xp = t[2]->data;                                                                                           \
    T *op_ = t[0]->data;                                                                                                \
    int64_t *ip = t[1]->data;                                                                                           \
    int two = g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0;                               \
    _Pragma("omp parallel for schedule(static) if (t[2]->numel > DS_PAR_MIN)")                                          \
    for (int64_t p = 0; p < g.P; p++) {                                                                                 \
      const T *x = xp + p * g.H * g.W;                                                                                  \
      T *o = op_ + p * g.OH * g.OW;                                                                                     \
      int64_t *ix = ip + p * g.OH * g.OW;                                                                               \
      if (!two || !maxpool2x2_plane_##S(x, o, ix, &g)) maxpool_plane_##S(x, o, ix, &g);                                 \
    }                                                                                                                   \
    return DS_OK;                                                                                                       \
  }                                                                                                                     \
  /* gx (N,C,H,W), g (N,C,OH,OW), idx; attrs as forward */                                                            \
  int ds_max_pool2d_backward_##S(ds_tensor *const *t, const double *attrs) {                                          \
    const char *op = "max_pool2d_backward";                                                                           \
    pgeom g;                                                                                                          \
    int rc = make_pgeom(&g, attrs, op, t[0], t[1], DT);                                                               \
    if (rc) return rc;                                                                                                \
    DS_CHECK(t[2] && t[2]->dtype == DS_I64 && t[2]->numel == t[1]->numel && ds_is_contig(t[2]),                       \
             "%s: indices must be a contiguous i64 tensor like the grad output", op);                                 \
    T *xp = t[0]->data;                                                                                               \
    const T *gp = t[1]->data;                                                                                         \
    const int64_t *ip = t[2]->data;                                                                                   \
    int64_t hw = g.H * g.W, ohw = g.OH * g.OW;                                                                        \
    int bad = 0;                                                                                                      \
    _Pragma("omp parallel for schedule(static) if (t[0]->numel > DS_PAR_MIN) reduction(|| : bad)")                   \
    for (int64_t p = 0; p < g.P; p++) {                                                                               \
      T *x = xp + p * hw;                                                                                             \
      const T *gg = gp + p * ohw;                                                                                     \
      const int64_t *ix = ip + p * ohw;                                                                               \
      memset(x, 0, (size_t)hw * sizeof(T));                                                                           \
      for (int64_t i = 0; i < ohw; i++) {                                                                             \
        int64_t k = ix[i] - 1;                                                                                        \
        if (k < 0 || k >= hw) { bad = 1; continue; }                                                                  \
        x[k] += gg[i];                                                                                                \
      }                                                                                                               \
    }                                                                                                                 \
    return bad ? ds_fail(DS_EINVAL, "%s: an index is outside the %lldx%lld plane", op, (long long)g.H, (long long)g.W) \
               : DS_OK;                                                                                               \
  }                                                                                                                   \
  /* out, x; attrs: kh, kw, sh, sw, ph, pw, count_include_pad */                                                      \
  int ds_avg_pool2d_##S(ds_tensor *const *t, const double *attrs) {                                                   \
    pgeom g;                                                                                                          \
    int rc = make_pgeom(&g, attrs, "avg_pool2d", t[1], t[0], DT);                                                     \
    if (rc) return rc;                                                                                                \
    int include_pad = attrs[6] != 0;                                                                                  \
    const T *xp = t[1]->data;                                                                                         \
    T *op_ = t[0]->data;                                                                                              \
    _Pragma("omp parallel for schedule(static) if (t[1]->numel > DS_PAR_MIN)")                                        \
    for (int64_t p = 0; p < g.P; p++) {                                                                               \
      const T *x = xp + p * g.H * g.W;                                                                                \
      T *o = op_ + p * g.OH * g.OW;                                                                                   \
      for (int64_t oh = 0; oh < g.OH; oh++) {                                                                         \
        int64_t h0, h1;                                                                                               \
        window(oh, g.sh, g.ph, g.kh, g.H, &h0, &h1);                                                                  \
        for (int64_t ow = 0; ow < g.OW; ow++) {                                                                       \
          int64_t w0, w1;                                                                                             \
          window(ow, g.sw, g.pw, g.kw, g.W, &w0, &w1);                                                                \
          T s = 0;                                                                                                    \
          for (int64_t h = h0; h < h1; h++)                                                                           \
            for (int64_t w = w0; w < w1; w++) s += x[h * g.W + w];                                                    \
          int64_t cnt = include_pad ? g.kh * g.kw : (h1 - h0) * (w1 - w0);                                            \
          o[oh * g.OW + ow] = s / (T)cnt;                                                                             \
        }                                                                                                             \
      }                                                                                                               \
    }                                                                                                                 \
    return DS_OK;                                                                                                     \
  }                                                                                                                   \
  /* gx (N,C,H,W), g (N,C,OH,OW); attrs as forward */                                                                 \
  int ds_avg_pool2d_backward_##S(ds_tensor *const *t, const double *attrs) {                                          \
    pgeom g;                                                                                                          \
    int rc = make_pgeom(&g, attrs, "avg_pool2d_backward", t[0], t[1], DT);                                            \
    if (rc) return rc;                                                                                                \
    int include_pad = attrs[6] != 0;                                                                                  \
    T *xp = t[0]->data;                                                                                               \
    const T *gp = t[1]->data;                                                                                         \
    _Pragma("omp parallel for schedule(static) if (t[0]->numel > DS_PAR_MIN)")                                        \
    for (int64_t p = 0; p < g.P; p++) {                                                                               \
      T *x = xp + p * g.H * g.W;                                                                                      \
      const T *gg = gp + p * g.OH * g.OW;                                                                             \
      memset(x, 0, (size_t)(g.H * g.W) * sizeof(T));                                                                  \
      for (int64_t oh = 0; oh < g.OH; oh++) {                                                                         \
        int64_t h0, h1;                                                                                               \
        window(oh, g.sh, g.ph, g.kh, g.H, &h0, &h1);                                                                  \
        for (int64_t ow = 0; ow < g.OW; ow++) {                                                                       \
          int64_t w0, w1;                                                                                             \
          window(ow, g.sw, g.pw, g.kw, g.W, &w0, &w1);                                                                \
          int64_t cnt = include_pad ? g.kh * g.kw : (h1 - h0) * (w1 - w0);                                            \
          T v = gg[oh * g.OW + ow] / (T)cnt;                                                                          \
          for (int64_t h = h0; h < h1; h++)                                                                           \
            for (int64_t w = w0; w < w1; w++) x[h * g.W + w] += v;                                                    \
        }                                                                                                             \
      }                                                                                                               \
    }                                                                                                                 \
    return DS_OK;                                                                                                     \
  }

POOL_KERNELS(float, f32, DS_F32)
POOL_KERNELS(double, f64, DS_F64)
