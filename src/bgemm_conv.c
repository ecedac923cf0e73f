/* bgemm_conv.c: 2-D convolution (groups 1) of bf16 operands with f32 accumulation: for a run of images, im2col
   straight into the GEMM's packed rows (one row per output position, k = (c, kh, kw) as PyTorch's unfold orders
   it, zero past the borders) times the weight packed as b (C KH KW, OC), then the f32 bias added: every output is
   ds's bf16 dot (bgemm.h) plus the bias, the same bits on every path and run length. Kernel: ds_conv2d_bf16_bf16. */
#include "internal.h"
#include "bgemm.h"
#include <string.h>

typedef struct { int64_t N, C, H, W, OC, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw; } geom;

/* the packed rows of images [n0, n0 + m) of x: row (n, oh, ow) is uint16 (2 P) = its column, k = (c, kh, kw),
   then a 0 when K is odd (the words of bgemm.h are pairs of uint16 in memory order); koff/kh/kw: per k, the offset
   of the tap in an image and its row and column shifts */
static void im2col(const uint16_t *x, const geom *g, int64_t n0, int64_t m, int64_t P, const int64_t *koff,
                   const int64_t *khd, const int64_t *kwd, uint16_t *a) {
  int64_t K = g->C * g->KH * g->KW, hw = g->H * g->W;
  for (int64_t n = 0; n < m; n++) {
    const uint16_t *xi = x + (n0 + n) * g->C * hw;
    for (int64_t oh = 0; oh < g->OH; oh++)
      for (int64_t ow = 0; ow < g->OW; ow++) {
        uint16_t *r = a + ((n * g->OH + oh) * g->OW + ow) * 2 * P;
        int64_t ih0 = oh * g->sh - g->ph, iw0 = ow * g->sw - g->pw;
        for (int64_t k = 0; k < K; k++) {
          int64_t ih = ih0 + khd[k], iw = iw0 + kwd[k];
          r[k] = ih < 0 || ih >= g->H || iw < 0 || iw >= g->W ? 0
                 : (uint16_t)ds_bgemm_daz(xi[koff[k] + ih0 * g->W + iw0]);
        }
        if (K % 2) r[K] = 0;
      }
  }
}

/* images per GEMM: about 4M words of packed rows (at least one image) */
#define CHUNK_WORDS ((int64_t)1 << 22)

static int check(const ds_tensor *t, int dtype, const char *op, const char *what) {
  DS_CHECK(t, "%s: missing %s", op, what);
  DS_CHECK(t->dtype == dtype, "%s: %s must be %s, got %s", op, what, ds_dtype_name(dtype), ds_dtype_name(t->dtype));
  DS_CHECK(ds_tensor_is_contiguous(t), "%s: %s must be contiguous", op, what);
  return DS_OK;
}

/* t = {y (N, OC, OH, OW) f32, x (N, C, H, W) bf16, w (OC, C, KH, KW) bf16, b (OC) f32}; attrs: stride (2),
   padding (2), dilation (2) */
int ds_conv2d_bf16_bf16(ds_tensor *const *t, const double *attrs) {
  const char *op = "conv2d_bf16";
  char s1[128], s2[128], s3[128];
  int rc;
  ds_tensor *y = t[0];
  const ds_tensor *x = t[1], *w = t[2], *b = t[3];
  if ((rc = check(y, DS_F32, op, "output")) || (rc = check(x, DS_BF16, op, "input")) ||
      (rc = check(w, DS_BF16, op, "weight")) || (rc = check(b, DS_F32, op, "bias")))
    return rc;
  DS_CHECK(x->ndim == 4 && w->ndim == 4 && y->ndim == 4 && b->ndim == 1, "%s: input %s, weight %s, output %s: "
           "expected 4-D", op, ds_shape_str(x, s1), ds_shape_str(w, s2), ds_shape_str(y, s3));
  geom g = { x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[0], w->shape[2], w->shape[3],
             y->shape[2], y->shape[3], (int64_t)attrs[0], (int64_t)attrs[1], (int64_t)attrs[2], (int64_t)attrs[3],
             (int64_t)attrs[4], (int64_t)attrs[5] };
  DS_CHECK(g.sh >= 1 && g.sw >= 1 && g.ph >= 0 && g.pw >= 0 && g.dh >= 1 && g.dw >= 1, "%s: bad stride, padding "
           "or dilation", op);
  int64_t eh = (g.KH - 1) * g.dh + 1, ew = (g.KW - 1) * g.dw + 1;
  int64_t oh = g.H + 2 * g.ph >= eh ? (g.H + 2 * g.ph - eh) / g.sh + 1 : 0;
  int64_t ow = g.W + 2 * g.pw >= ew ? (g.W + 2 * g.pw - ew) / g.sw + 1 : 0;
  DS_CHECK(w->shape[1] == g.C && b->shape[0] == g.OC && y->shape[0] == g.N && y->shape[1] == g.OC &&
               g.OH == oh && g.OW == ow,
           "%s: input %s, weight %s, output %s do not agree", op, ds_shape_str(x, s1), ds_shape_str(w, s2),
           ds_shape_str(y, s3));
  int64_t L = g.OH * g.OW, K = g.C * g.KH * g.KW, P = (K + 1) / 2, S = (g.OC + BG_NR - 1) / BG_NR, rounded;
  if (y->numel == 0) return DS_OK;
  int64_t per = L * P > 0 ? CHUNK_WORDS / (L * P) : g.N;
  int64_t m = per < 1 ? 1 : per > g.N ? g.N : per;
  int64_t bytes = (m * L * P + S * P * BG_NR) * (int64_t)sizeof(uint32_t) + m * L * g.OC * (int64_t)sizeof(float) +
                  3 * K * (int64_t)sizeof(int64_t) + 64;
  uint32_t *ap = ds_mem_alloc(bytes, &rounded);
  if (!ap) return ds_fail(DS_ENOMEM, "%s: out of memory for the packed operands", op);
  uint32_t *bp = ap + m * L * P;
  float *c = (float *)(bp + S * P * BG_NR);
  int64_t *koff = (int64_t *)(c + m * L * g.OC), *khd = koff + K, *kwd = khd + K;
  for (int64_t k = 0; k < K; k++) {
    int64_t kk = g.KH * g.KW, ch = k / kk, kh = k % kk / g.KW, kw = k % g.KW;
    khd[k] = kh * g.dh;
    kwd[k] = kw * g.dw;
    koff[k] = (ch * g.H + khd[k]) * g.W + kwd[k];
  }
  const uint16_t *wd = w->data;
  for (int64_t s = 0; s < S; s++)   /* b (K, OC) = w (OC, K) transposed, in strips */
    for (int64_t p = 0; p < P; p++)
      for (int j = 0; j < BG_NR; j++) {
        int64_t n = s * BG_NR + j;
        uint32_t lo = n < g.OC ? ds_bgemm_daz(wd[n * K + 2 * p]) : 0;
        uint32_t hi = n < g.OC && 2 * p + 1 < K ? ds_bgemm_daz(wd[n * K + 2 * p + 1]) : 0;
        bp[(s * P + p) * BG_NR + j] = lo | hi << 16;
      }
  const float *bias = b->data;
  float *yd = y->data;
  for (int64_t n0 = 0; n0 < g.N; n0 += m) {
    int64_t mm = g.N - n0 < m ? g.N - n0 : m;
    im2col(x->data, &g, n0, mm, P, koff, khd, kwd, (uint16_t *)ap);
    ds_bgemm_run(mm * L, g.OC, K, NULL, ap, NULL, bp, c);
    for (int64_t n = 0; n < mm; n++) {
      float *yi = yd + (n0 + n) * g.OC * L;
      const float *ci = c + n * L * g.OC;
      for (int64_t o = 0; o < g.OC; o++)
        for (int64_t l = 0; l < L; l++) yi[o * L + l] = ci[l * g.OC + o] + bias[o];
    }
  }
  ds_mem_release(ap, rounded);
  return DS_OK;
}
