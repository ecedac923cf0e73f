/* qconv.c: int8 2-D convolution (groups = 1): each image of x (f32) is quantized to u8 with its own scale and
   zero point (dynamic) or the fixed ones of calibration (static), unfolded (im2col: one row of C * kh * kw bytes
   per output pixel, the zero point where the window leaves the padded image, so padding is an exact 0), multiplied
   by the per-output-channel s8 weight in qgemm.c's exact int32 sums and dequantized as linear_int8 is:
   y = float(acc - zp * colsum) * (scale * wscale) + bias. The same bits on every host, ISA path, thread count and
   batch composition. */
#include "internal.h"
#include "qgemm.h"
#include <math.h>
#include <string.h>

static int check(const ds_tensor *t, int dtype, const char *op, const char *what) {
  DS_CHECK(t, "%s: missing %s", op, what);
  DS_CHECK(t->dtype == dtype, "%s: %s must be %s, got %s", op, what, ds_dtype_name(dtype), ds_dtype_name(t->dtype));
  DS_CHECK(ds_tensor_is_contiguous(t), "%s: %s must be contiguous", op, what);
  return DS_OK;
}

typedef struct { int64_t C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW; } geometry;

/* rows (OH * OW, Kp) of the image q (C, H, W) u8, the columns in w's (C, kh, kw) order, zp outside the image and
   0 past K: a kernel row inside the image is copied without bounds checks */
static void im2col(const geometry *g, const uint8_t *q, uint8_t zp, int64_t Kp, uint8_t *rows) {
  int64_t K = g->C * g->kh * g->kw, kw = g->kw;
  for (int64_t oh = 0; oh < g->OH; oh++)
    for (int64_t ow = 0; ow < g->OW; ow++) {
      uint8_t *r = rows + (oh * g->OW + ow) * Kp, *end = r + Kp;
      int64_t w0 = ow * g->sw - g->pw, dw = g->dw;
      int inside = w0 >= 0 && w0 + (kw - 1) * dw < g->W;
      /* a kernel row of at most 8 contiguous bytes moves as one 8-byte word when that stays in this output row
         (the bytes past it are rewritten next); the read may pass the image's end into its 8 spare bytes */
      int word = inside && dw == 1 && kw <= 8;
      for (int64_t c = 0; c < g->C; c++)
        for (int64_t i = 0; i < g->kh; i++, r += kw) {
          int64_t h = oh * g->sh - g->ph + i * g->dh;
          if (h < 0 || h >= g->H) {
            memset(r, zp, (size_t)kw);
            continue;
          }
          const uint8_t *src = q + (c * g->H + h) * g->W;
          if (word && r + 8 <= end) memcpy(r, src + w0, 8);
          else if (inside)
            for (int64_t j = 0; j < kw; j++) r[j] = src[w0 + j * dw];
          else
            for (int64_t j = 0; j < kw; j++) r[j] = w0 + j * dw >= 0 && w0 + j * dw < g->W ? src[w0 + j * dw] : zp;
        }
      memset(r, 0, (size_t)(Kp - K));
    }
}

/* t = {y (B, O, OH, OW), x (B, C, H, W), w (O, C, kh, kw) i8, wscale (O), bias (O)[, x_scale {} f32, x_zero {} u8]};
   attrs: stride h, w, padding h, w, dilation h, w */
static int conv_int8(const char *op, ds_tensor *const *t, const double *attrs, int fixed) {
  ds_tensor *y = t[0], *x = t[1], *w = t[2], *ws = t[3], *bias = t[4];
  char s1[128], s2[128];
  int rc;
  if ((rc = check(y, DS_F32, op, "output")) || (rc = check(x, DS_F32, op, "input")) ||
      (rc = check(w, DS_I8, op, "weight")) || (rc = check(ws, DS_F32, op, "weight scales")) ||
      (rc = check(bias, DS_F32, op, "bias")))
    return rc;
  float fscale = 0;
  int32_t fzp = 0;
  if (fixed) {
    if ((rc = check(t[5], DS_F32, op, "input scale")) || (rc = check(t[6], DS_U8, op, "input zero point"))) return rc;
    DS_CHECK(t[5]->numel == 1 && t[6]->numel == 1, "%s: the input scale and zero point must be single values", op);
    fscale = *(const float *)t[5]->data;
    fzp = *(const uint8_t *)t[6]->data;
    DS_CHECK(isfinite(fscale) && fscale > 0, "%s: the input scale must be positive and finite, got %g", op,
             (double)fscale);
  }
  DS_CHECK(x->ndim == 4 && w->ndim == 4 && x->shape[1] == w->shape[1], "%s: input %s and weight %s must be "
           "(B, C, H, W) and (O, C, kh, kw)", op, ds_shape_str(x, s1), ds_shape_str(w, s2));
  for (int i = 0; i < 6; i++)
    DS_CHECK(attrs[i] == floor(attrs[i]) && attrs[i] >= (i >= 2 && i < 4 ? 0 : 1), "%s: bad stride, padding or "
             "dilation", op);
  geometry g = { x->shape[1], x->shape[2], x->shape[3], w->shape[2], w->shape[3], (int64_t)attrs[0],
                 (int64_t)attrs[1], (int64_t)attrs[2], (int64_t)attrs[3], (int64_t)attrs[4], (int64_t)attrs[5], 0, 0 };
  int64_t B = x->shape[0], O = w->shape[0], K = g.C * g.kh * g.kw;
  g.OH = (g.H + 2 * g.ph - g.dh * (g.kh - 1) - 1) / g.sh + 1;
  g.OW = (g.W + 2 * g.pw - g.dw * (g.kw - 1) - 1) / g.sw + 1;
  DS_CHECK(g.OH >= 1 && g.OW >= 1, "%s: the kernel does not fit the padded input %s", op, ds_shape_str(x, s1));
  DS_CHECK(y->ndim == 4 && y->shape[0] == B && y->shape[1] == O && y->shape[2] == g.OH && y->shape[3] == g.OW,
           "%s: output %s does not match (%lld, %lld, %lld, %lld)", op, ds_shape_str(y, s1), (long long)B,
           (long long)O, (long long)g.OH, (long long)g.OW);
  DS_CHECK(ws->numel == O && bias->numel == O, "%s: weight scales and bias must hold O = %lld values", op,
           (long long)O);
  DS_CHECK(K <= QG_K_MAX, "%s: C * kh * kw = %lld is over %d (the int32 sums could overflow)", op, (long long)K,
           QG_K_MAX);
  int64_t P = g.OH * g.OW, M = B * P, CHW = g.C * g.H * g.W;
  if (M == 0 || O == 0) return DS_OK;
  int64_t G = (K + QG_KG - 1) / QG_KG, Kp = G * QG_KG, S = (O + QG_NR - 1) / QG_NR, rounded;
  int64_t bytes = (M * O + M) * (int64_t)sizeof(float) + (M + O) * (int64_t)sizeof(int32_t) + S * G * QG_GROUP +
                  B * (CHW + 8) + M * Kp + 64;
  char *buf = ds_mem_alloc(bytes, &rounded);
  if (!buf) return ds_fail(DS_ENOMEM, "%s: out of memory for the unfolded input", op);
  float *out = (float *)buf;                 /* (M, O) */
  float *sa = out + M * O;                   /* (M) */
  int32_t *za = (int32_t *)(sa + M);         /* (M) */
  int32_t *cs = za + M;                      /* (O) */
  int8_t *wp = (int8_t *)(cs + O);           /* packed weight */
  uint8_t *qimg = (uint8_t *)(wp + S * G * QG_GROUP);   /* (B, C, H, W), each image followed by 8 spare bytes */
  uint8_t *rows = qimg + B * (CHW + 8);      /* (M, Kp) */
  ds_qgemm_pack(w->data, O, K, wp);
  ds_qgemm_colsums(w->data, O, K, cs);
  const float *xp = x->data;
  int bad = 0, par = B > 1 && M * Kp >= DS_PAR_MIN;
  DS_PAR_FOR(par, b, B, {   /* each image quantized and unfolded on its own */
    float s = fscale;
    int32_t zp = fzp;
    int ok = fixed || ds_qgemm_range(xp + b * CHW, CHW, &s, &zp);
    ok = ok && ds_qgemm_quantize(xp + b * CHW, CHW, s, zp, qimg + b * (CHW + 8));
    if (!ok) __atomic_store_n(&bad, 1, __ATOMIC_RELAXED);
    else {
      im2col(&g, qimg + b * (CHW + 8), (uint8_t)zp, Kp, rows + b * P * Kp);
      for (int64_t p = 0; p < P; p++) { sa[b * P + p] = s; za[b * P + p] = zp; }
    }
  });
  if (bad) {
    ds_mem_release(buf, rounded);
    return ds_fail(DS_EINVAL, "%s: the input holds NaN or an infinity (it cannot be quantized)", op);
  }
  qgemm_job q = { .M = M, .N = O, .K = K, .G = G, .Kp = Kp, .qa = rows, .sa = sa, .za = za, .wp = wp, .cs = cs,
                  .ws = ws->data, .bias = bias->data, .y = out };
  ds_qgemm_run(&q);
  float *yp = y->data;   /* (M, O) -> (B, O, P) */
  DS_PAR_FOR(par, b, B, {
    for (int64_t o = 0; o < O; o++)
      for (int64_t p = 0; p < P; p++) yp[(b * O + o) * P + p] = out[(b * P + p) * O + o];
  });
  ds_mem_release(buf, rounded);
  return DS_OK;
}

int ds_conv2d_int8_f32(ds_tensor *const *t, const double *attrs) { return conv_int8("conv2d_int8", t, attrs, 0); }
int ds_conv2d_int8_static_f32(ds_tensor *const *t, const double *attrs) {
  return conv_int8("conv2d_int8_static", t, attrs, 1);
}
