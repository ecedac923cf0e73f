/* nn_conv.c: conv2d (NCHW, stride/padding/dilation/groups) as im2col + GEMM, and its backward kernels:
   input (GEMM + col2im), weight (im2col + GEMM, fixed image chunks summed in order) and bias. */
#include "internal.h"
#include <stdlib.h>

/* attrs of every conv kernel start with: sh, sw, ph, pw, dh, dw, groups */
typedef struct {
  int64_t N, C, H, W, OC, Cg, OCg, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, G;
  int64_t ckk, ohw, hw; /* rows of the column matrix (Cg*KH*KW), output and input plane sizes */
} geom;

static int attr_int(double v, int64_t lo, int64_t *out) {
  if (!(v >= (double)lo && v <= 1e9) || v != (double)(int64_t)v) return 0;
  *out = (int64_t)v;
  return 1;
}

/* Fill and check the geometry; C is the input's channel count, Cg = w's second dim. */
static int make_geom(geom *g, const double *a, const char *op, int64_t N, int64_t C, int64_t H, int64_t W,
                     int64_t OC, int64_t Cg, int64_t KH, int64_t KW) {
  DS_CHECK(attr_int(a[0], 1, &g->sh) && attr_int(a[1], 1, &g->sw), "%s: stride must be integers >= 1", op);
  DS_CHECK(attr_int(a[2], 0, &g->ph) && attr_int(a[3], 0, &g->pw), "%s: padding must be integers >= 0", op);
  DS_CHECK(attr_int(a[4], 1, &g->dh) && attr_int(a[5], 1, &g->dw), "%s: dilation must be integers >= 1", op);
  DS_CHECK(attr_int(a[6], 1, &g->G), "%s: groups must be an integer >= 1", op);
  DS_CHECK(KH >= 1 && KW >= 1, "%s: empty kernel (%lld,%lld)", op, (long long)KH, (long long)KW);
  DS_CHECK(C % g->G == 0 && OC % g->G == 0, "%s: groups %lld must divide in channels %lld and out channels %lld", op,
           (long long)g->G, (long long)C, (long long)OC);
  DS_CHECK(Cg * g->G == C, "%s: weight expects %lld input channels per group, input has %lld channels in %lld groups", op,
           (long long)Cg, (long long)C, (long long)g->G);
  int64_t ekh = (KH - 1) * g->dh + 1, ekw = (KW - 1) * g->dw + 1;
  DS_CHECK(ekh <= H + 2 * g->ph && ekw <= W + 2 * g->pw, "%s: kernel (%lld,%lld) (dilated) is larger than the padded input (%lld,%lld)",
           op, (long long)ekh, (long long)ekw, (long long)(H + 2 * g->ph), (long long)(W + 2 * g->pw));
  g->N = N; g->C = C; g->H = H; g->W = W; g->OC = OC; g->Cg = Cg; g->OCg = OC / g->G; g->KH = KH; g->KW = KW;
  g->OH = (H + 2 * g->ph - ekh) / g->sh + 1;
  g->OW = (W + 2 * g->pw - ekw) / g->sw + 1;
  g->ckk = Cg * KH * KW; g->ohw = g->OH * g->OW; g->hw = H * W;
  return DS_OK;
}

static int check_tensor(const ds_tensor *t, int dtype, int ndim, const char *op, const char *what) {
  DS_CHECK(t, "%s: missing %s", op, what);
  DS_CHECK(t->dtype == dtype, "%s: %s has the wrong dtype", op, what);
  DS_CHECK(t->ndim == ndim, "%s: %s must be %d-D, got %d-D", op, what, ndim, t->ndim);
  DS_CHECK(ds_is_contig(t), "%s: %s must be contiguous", op, what);
  return DS_OK;
}

static int check_shape4(const ds_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d, const char *op, const char *what) {
  char s[128];
  DS_CHECK(t->shape[0] == a && t->shape[1] == b && t->shape[2] == c && t->shape[3] == d,
           "%s: %s has shape %s, expected (%lld,%lld,%lld,%lld)", op, what, ds_shape_str(t, s), (long long)a, (long long)b,
           (long long)c, (long long)d);
  return DS_OK;
}

/* A 1x1 kernel with stride 1 and no padding reads the input planes as the column matrix itself. */
static int is_pointwise(const geom *g) {
  return g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}

/* Parallelize over images when there are several and the work is well above a parallel region's cost. */
static int worth_parallel(const geom *g) {
  return g->N > 1 && (double)g->N * (double)g->OC * (double)g->ohw * (double)g->ckk > 5e5;
}

/* Output columns [lo, hi) whose input column ow*sw + off falls inside [0, W). */
static void valid_range(int64_t off, int64_t sw, int64_t W, int64_t OW, int64_t *lo, int64_t *hi) {
  int64_t l = off >= 0 ? 0 : (-off + sw - 1) / sw;
  int64_t h = W - off <= 0 ? 0 : (W - off + sw - 1) / sw;
  if (l > OW) l = OW;
  if (h > OW) h = OW;
  if (h < l) h = l;
  *lo = l; *hi = h;
}

#define CONV_KERNELS(T, S, DT)                                                                                       \
  /* col (ckk, ohw) from Cg planes of x starting at x */                                                            \
  static void im2col_##S(const T *x, T *col, const geom *g) {                                                       \
    for (int64_t c = 0; c < g->Cg; c++)                                                                             \
      for (int64_t kh = 0; kh < g->KH; kh++)                                                                        \
        for (int64_t kw = 0; kw < g->KW; kw++) {                                                                    \
          T *row = col + ((c * g->KH + kh) * g->KW + kw) * g->ohw;                                                  \
          const T *xc = x + c * g->hw;                                                                              \
          int64_t off = kw * g->dw - g->pw, lo, hi;                                                                 \
          valid_range(off, g->sw, g->W, g->OW, &lo, &hi);                                                           \
          for (int64_t oh = 0; oh < g->OH; oh++) {                                                                  \
            int64_t ih = oh * g->sh - g->ph + kh * g->dh;                                                           \
            T *r = row + oh * g->OW;                                                                                \
            if (ih < 0 || ih >= g->H) { for (int64_t ow = 0; ow < g->OW; ow++) r[ow] = 0; continue; }               \
            const T *xr = xc + ih * g->W + off;                                                                     \
            for (int64_t ow = 0; ow < lo; ow++) r[ow] = 0;                                                          \
            if (g->sw == 1) memcpy(r + lo, xr + lo, (size_t)(hi - lo) * sizeof(T));                                 \
            else for (int64_t ow = lo; ow < hi; ow++) r[ow] = xr[ow * g->sw];                                       \
            for (int64_t ow = hi; ow < g->OW; ow++) r[ow] = 0;                                                      \
          }                                                                                                         \
        }                                                                                                           \
  }                                                                                                                 \
  /* x (Cg planes, zeroed by the caller) += col2im(col) */                                                          \
  static void col2im_##S(const T *col, T *x, const geom *g) {                                                       \
    for (int64_t c = 0; c < g->Cg; c++)                                                                             \
      for (int64_t kh = 0; kh < g->KH; kh++)                                                                        \
        for (int64_t kw = 0; kw < g->KW; kw++) {                                                                    \
          const T *row = col + ((c * g->KH + kh) * g->KW + kw) * g->ohw;                                            \
          T *xc = x + c * g->hw;                                                                                    \
          int64_t off = kw * g->dw - g->pw, lo, hi;                                                                 \
          valid_range(off, g->sw, g->W, g->OW, &lo, &hi);                                                           \
          for (int64_t oh = 0; oh < g->OH; oh++) {                                                                  \
            int64_t ih = oh * g->sh - g->ph + kh * g->dh;                                                           \
            if (ih < 0 || ih >= g->H) continue;                                                                     \
            const T *r = row + oh * g->OW;                                                                          \
            T *xr = xc + ih * g->W + off;                                                                           \
            if (g->sw == 1) for (int64_t ow = lo; ow < hi; ow++) xr[ow] += r[ow];                                   \
            else for (int64_t ow = lo; ow < hi; ow++) xr[ow * g->sw] += r[ow];                                      \
          }                                                                                                         \
        }                                                                                                           \
  }                                                                                                                 \
  /* sum of n values with 8 independent lanes (vectorizes without reassociation; fixed order) */                    \
  static T lanesum_##S(const T *p, int64_t n) {                                                                     \
    T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                                            \
    int64_t i = 0;                                                                                                  \
    for (; i + 8 <= n; i += 8)                                                                                      \
      for (int j = 0; j < 8; j++) acc[j] += p[i + j];                                                               \
    T s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));                        \
    for (; i < n; i++) s += p[i];                                                                                   \
    return s;                                                                                                       \
  }                                                                                                                 \
  /* out (N,OC,OH,OW) = conv(x (N,C,H,W), w (OC,C/G,KH,KW)) + b (OC) */                                             \
  int ds_conv2d_##S(ds_tensor *const *t, const double *attrs) {                                                     \
    const char *op = "conv2d";                                                                                      \
    ds_tensor *o = t[0], *x = t[1], *w = t[2], *b = t[3];                                                           \
    int rc;                                                                                                         \
    if ((rc = check_tensor(o, DT, 4, op, "output")) || (rc = check_tensor(x, DT, 4, op, "input")) ||                \
        (rc = check_tensor(w, DT, 4, op, "weight")) || (rc = check_tensor(b, DT, 1, op, "bias")))                   \
      return rc;                                                                                                    \
    geom g;                                                                                                         \
    if ((rc = make_geom(&g, attrs, op, x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[0],             \
                        w->shape[1], w->shape[2], w->shape[3])))                                                    \
      return rc;                                                                                                    \
    DS_CHECK(b->shape[0] == g.OC, "%s: bias has %lld values for %lld out channels", op, (long long)b->shape[0],     \
             (long long)g.OC);                                                                                      \
    if ((rc = check_shape4(o, g.N, g.OC, g.OH, g.OW, op, "output"))) return rc;                                     \
    const T *xp = x->data, *wp = w->data, *bp = b->data;                                                            \
    T *op_ = o->data;                                                                                               \
    int pointwise = is_pointwise(&g), failed = 0;                                                                   \
    _Pragma("omp parallel if (worth_parallel(&g))") {                                                               \
      T *col = pointwise ? NULL : malloc((size_t)(g.ckk * g.ohw) * sizeof(T) + 1);                                  \
      if (!pointwise && !col) failed = 1;                                                                           \
      _Pragma("omp for schedule(static)") for (int64_t n = 0; n < g.N; n++) {                                       \
        if (!pointwise && !col) continue;                                                                           \
        for (int64_t gi = 0; gi < g.G; gi++) {                                                                      \
          const T *xg = xp + (n * g.C + gi * g.Cg) * g.hw;                                                          \
          T *og = op_ + (n * g.OC + gi * g.OCg) * g.ohw;                                                            \
          for (int64_t oc = 0; oc < g.OCg; oc++) {                                                                  \
            T bv = bp[gi * g.OCg + oc];                                                                             \
            for (int64_t i = 0; i < g.ohw; i++) og[oc * g.ohw + i] = bv;                                            \
          }                                                                                                         \
          const T *cm = xg;                                                                                         \
          if (!pointwise) { im2col_##S(xg, col, &g); cm = col; }                                                    \
          ds_gemm_##S(0, 0, g.OCg, g.ohw, g.ckk, 1, wp + gi * g.OCg * g.ckk, g.ckk, cm, g.ohw, 1, og, g.ohw);       \
        }                                                                                                           \
      }                                                                                                             \
      free(col);                                                                                                    \
    }                                                                                                               \
    return failed ? ds_fail(DS_ENOMEM, "%s: out of memory for the column buffer", op) : DS_OK;                      \
  }                                                                                                                 \
  /* gx (N,C,H,W) from g (N,OC,OH,OW) and w; attrs: conv attrs, H, W */                                             \
  int ds_conv2d_backward_input_##S(ds_tensor *const *t, const double *attrs) {                                      \
    const char *op = "conv2d_backward_input";                                                                       \
    ds_tensor *gx = t[0], *gy = t[1], *w = t[2];                                                                    \
    int rc;                                                                                                         \
    if ((rc = check_tensor(gx, DT, 4, op, "grad input")) || (rc = check_tensor(gy, DT, 4, op, "grad output")) ||    \
        (rc = check_tensor(w, DT, 4, op, "weight")))                                                                \
      return rc;                                                                                                    \
    int64_t H, W, G;                                                                                                \
    DS_CHECK(attr_int(attrs[7], 1, &H) && attr_int(attrs[8], 1, &W) && attr_int(attrs[6], 1, &G),                  \
             "%s: bad input size attrs", op);                                                                       \
    geom g;                                                                                                         \
    if ((rc = make_geom(&g, attrs, op, gy->shape[0], w->shape[1] * G, H, W, w->shape[0], w->shape[1], w->shape[2],  \
                        w->shape[3])))                                                                              \
      return rc;                                                                                                    \
    if ((rc = check_shape4(gy, g.N, g.OC, g.OH, g.OW, op, "grad output")) ||                                        \
        (rc = check_shape4(gx, g.N, g.C, g.H, g.W, op, "grad input")))                                              \
      return rc;                                                                                                    \
    const T *gp = gy->data, *wp = w->data;                                                                          \
    T *xp = gx->data;                                                                                               \
    int pointwise = is_pointwise(&g), failed = 0;                                                                   \
    _Pragma("omp parallel if (worth_parallel(&g))") {                                                               \
      T *col = pointwise ? NULL : malloc((size_t)(g.ckk * g.ohw) * sizeof(T) + 1);                                  \
      if (!pointwise && !col) failed = 1;                                                                           \
      _Pragma("omp for schedule(static)") for (int64_t n = 0; n < g.N; n++) {                                       \
        if (!pointwise && !col) continue;                                                                           \
        for (int64_t gi = 0; gi < g.G; gi++) {                                                                      \
          T *xg = xp + (n * g.C + gi * g.Cg) * g.hw;                                                                \
          const T *gg = gp + (n * g.OC + gi * g.OCg) * g.ohw, *wg = wp + gi * g.OCg * g.ckk;                        \
          if (pointwise) {                                                                                          \
            ds_gemm_##S(1, 0, g.ckk, g.ohw, g.OCg, 1, wg, g.ckk, gg, g.ohw, 0, xg, g.ohw);                          \
            continue;                                                                                               \
          }                                                                                                         \
          ds_gemm_##S(1, 0, g.ckk, g.ohw, g.OCg, 1, wg, g.ckk, gg, g.ohw, 0, col, g.ohw);                           \
          memset(xg, 0, (size_t)(g.Cg * g.hw) * sizeof(T));                                                         \
          col2im_##S(col, xg, &g);                                                                                  \
        }                                                                                                           \
      }                                                                                                             \
      free(col);                                                                                                    \
    }                                                                                                               \
    return failed ? ds_fail(DS_ENOMEM, "%s: out of memory for the column buffer", op) : DS_OK;                      \
  }                                                                                                                 \
  /* gw (OC,C/G,KH,KW) from g (N,OC,OH,OW) and x (N,C,H,W); attrs: conv attrs, KH, KW.                              \
     Images are summed in fixed chunks (chosen from the shapes only), chunks added in order. */                     \
  int ds_conv2d_backward_weight_##S(ds_tensor *const *t, const double *attrs) {                                     \
    const char *op = "conv2d_backward_weight";                                                                      \
    ds_tensor *gw = t[0], *gy = t[1], *x = t[2];                                                                    \
    int rc;                                                                                                         \
    if ((rc = check_tensor(gw, DT, 4, op, "grad weight")) || (rc = check_tensor(gy, DT, 4, op, "grad output")) ||   \
        (rc = check_tensor(x, DT, 4, op, "input")))                                                                 \
      return rc;                                                                                                    \
    int64_t KH, KW, G;                                                                                              \
    DS_CHECK(attr_int(attrs[7], 1, &KH) && attr_int(attrs[8], 1, &KW) && attr_int(attrs[6], 1, &G),                \
             "%s: bad kernel size attrs", op);                                                                      \
    DS_CHECK(x->shape[1] % G == 0, "%s: groups %lld do not divide %lld input channels", op, (long long)G,           \
             (long long)x->shape[1]);                                                                               \
    geom g;                                                                                                         \
    if ((rc = make_geom(&g, attrs, op, x->shape[0], x->shape[1], x->shape[2], x->shape[3], gy->shape[1],            \
                        x->shape[1] / G, KH, KW)))                                                                  \
      return rc;                                                                                                    \
    if ((rc = check_shape4(gy, g.N, g.OC, g.OH, g.OW, op, "grad output")) ||                                        \
        (rc = check_shape4(gw, g.OC, g.Cg, g.KH, g.KW, op, "grad weight")))                                         \
      return rc;                                                                                                    \
    const T *gp = gy->data, *xp = x->data;                                                                          \
    T *wp = gw->data;                                                                                               \
    int64_t wsz = g.OC * g.ckk;                                                                                     \
    if (g.N == 0) { memset(wp, 0, (size_t)wsz * sizeof(T)); return DS_OK; }                                         \
    int64_t nch = g.N < 16 ? g.N : 16;                                                                              \
    while (nch > 1 && nch * wsz > (INT64_C(1) << 22)) nch /= 2;                                                     \
    if (!worth_parallel(&g)) nch = 1;                                                                               \
    T *part = nch > 1 ? malloc((size_t)(nch * wsz) * sizeof(T)) : wp;                                               \
    if (!part) return ds_fail(DS_ENOMEM, "%s: out of memory", op);                                                  \
    int pointwise = is_pointwise(&g), failed = 0;                                                                   \
    _Pragma("omp parallel if (nch > 1)") {                                                                          \
      T *col = pointwise ? NULL : malloc((size_t)(g.ckk * g.ohw) * sizeof(T) + 1);                                  \
      if (!pointwise && !col) failed = 1;                                                                           \
      _Pragma("omp for schedule(static)") for (int64_t c = 0; c < nch; c++) {                                       \
        if (!pointwise && !col) continue;                                                                           \
        T *pc = part + c * wsz;                                                                                     \
        for (int64_t n = c * g.N / nch; n < (c + 1) * g.N / nch; n++)                                               \
          for (int64_t gi = 0; gi < g.G; gi++) {                                                                    \
            const T *xg = xp + (n * g.C + gi * g.Cg) * g.hw, *gg = gp + (n * g.OC + gi * g.OCg) * g.ohw;            \
            const T *cm = xg;                                                                                       \
            if (!pointwise) { im2col_##S(xg, col, &g); cm = col; }                                                  \
            ds_gemm_##S(0, 1, g.OCg, g.ckk, g.ohw, 1, gg, g.ohw, cm, g.ohw, n == c * g.N / nch ? 0 : 1,             \
                        pc + gi * g.OCg * g.ckk, g.ckk);                                                            \
          }                                                                                                         \
      }                                                                                                             \
      free(col);                                                                                                    \
    }                                                                                                               \
    if (nch > 1) {                                                                                                  \
      for (int64_t i = 0; i < wsz; i++) {                                                                           \
        T s = part[i];                                                                                              \
        for (int64_t c = 1; c < nch; c++) s += part[c * wsz + i];                                                   \
        wp[i] = s;                                                                                                  \
      }                                                                                                             \
      free(part);                                                                                                   \
    }                                                                                                               \
    return failed ? ds_fail(DS_ENOMEM, "%s: out of memory for the column buffer", op) : DS_OK;                      \
  }                                                                                                                 \
  /* gb (OC) = g (N,OC,OH,OW) summed over N, OH, OW: per-plane sums, then images in order */                        \
  int ds_conv2d_backward_bias_##S(ds_tensor *const *t, const double *attrs) {                                       \
    const char *op = "conv2d_backward_bias";                                                                        \
    ds_tensor *gb = t[0], *gy = t[1];                                                                               \
    int rc;                                                                                                         \
    if ((rc = check_tensor(gb, DT, 1, op, "grad bias")) || (rc = check_tensor(gy, DT, 4, op, "grad output")))       \
      return rc;                                                                                                    \
    int64_t N = gy->shape[0], OC = gy->shape[1], hw = gy->shape[2] * gy->shape[3];                                  \
    DS_CHECK(gb->shape[0] == OC, "%s: grad bias has %lld values for %lld channels", op, (long long)gb->shape[0],    \
             (long long)OC);                                                                                        \
    const T *gp = gy->data;                                                                                         \
    T *bp = gb->data;                                                                                               \
    T *plane = malloc((size_t)(N * OC) * sizeof(T) + 1);                                                            \
    if (!plane) return ds_fail(DS_ENOMEM, "%s: out of memory", op);                                                 \
    _Pragma("omp parallel for schedule(static) if (gy->numel > DS_PAR_MIN)")                                       \
    for (int64_t i = 0; i < N * OC; i++) plane[i] = lanesum_##S(gp + i * hw, hw);                                   \
    for (int64_t oc = 0; oc < OC; oc++) {                                                                           \
      T s = 0;                                                                                                      \
      for (int64_t n = 0; n < N; n++) s += plane[n * OC + oc];                                                      \
      bp[oc] = s;                                                                                                   \
    }                                                                                                               \
    free(plane);                                                                                                    \
    return DS_OK;                                                                                                   \
  }

CONV_KERNELS(float, f32, DS_F32)
CONV_KERNELS(double, f64, DS_F64)
