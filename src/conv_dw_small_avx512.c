/* conv_dw_small_avx512.c: f32 depthwise planes at stride 1 whose outputs read at most 8 padded columns (MobileNet's
   6x6 maps) on AVX-512, DW_SMALL_PLANES planes at once: each plane copied with its zero border into rows of 8, so
   one 16-float load holds a tap's window for two output rows; the planes' chains interleaved (latency hidden), the
   two rows of a vector put out by one compress and a masked store. The chain per value is conv_dw_direct.c's (taps
   (kh, kw) in order from zero, padding taps times zeros, then + bias): the same bits on every path. */
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma")
#include "internal.h"
#include "nn_conv.h"
#include <immintrin.h>

#define ROW 8          /* floats a padded row */
#define MAX_PAIRS 4    /* output rows / 2 */
#define MAX_PROWS 24   /* padded rows a plane's outputs read */

/* xp ((prow + 2) rows of ROW) = the input plane's rows and columns the outputs read, at (ph, pw) in zeros; the two
   spare rows cover the second row of an odd plane's last vector and the columns a window reads past its row */
static inline void pad8(const geom *g, const float *x, float *xp, int64_t prow) {
  /* padded column l is input column l - pw: the lanes [pw, pw + W) of a masked load from the row's start - pw */
  int64_t l0 = g->pw, l1 = g->pw + g->W < ROW ? g->pw + g->W : ROW;
  __mmask8 in = l1 <= l0 ? 0 : (__mmask8)(((1u << l1) - 1) & ~((1u << l0) - 1));
  for (int64_t r = 0; r < prow + 2; r++) {
    int64_t h = r - g->ph;
    __m256 v = h >= 0 && h < g->H && r < prow ? _mm256_maskz_loadu_ps(in, x + h * g->W - g->pw) : _mm256_setzero_ps();
    _mm256_storeu_ps(xp + r * ROW, v);
  }
}

/* planes [p, p + np) of y, np <= DW_SMALL_PLANES; np and npair constants per instantiation */
__attribute__((always_inline)) static inline void small_planes(const int np, const int npair, const geom *g,
                                                               const float *x, const float *w, const float *b,
                                                               float *y, int64_t p) {
  float xp[DW_SMALL_PLANES][(MAX_PROWS + 2) * ROW];
  int64_t prow = g->OH + (g->KH - 1) * g->dh, taps = g->KH * g->KW;
  const float *wp[DW_SMALL_PLANES];
  __m512 acc[DW_SMALL_PLANES][MAX_PAIRS];
  for (int i = 0; i < np; i++) {
    int64_t q = p + i, n = q / g->OC, oc = q % g->OC;
    pad8(g, x + (n * g->C + oc / g->OCg) * g->hw, xp[i], prow);
    wp[i] = w + oc * taps;
    for (int j = 0; j < npair; j++) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t kh = 0; kh < g->KH; kh++)
    for (int64_t kw = 0; kw < g->KW; kw++) {
      int64_t off = kh * g->dh * ROW + kw * g->dw, k = kh * g->KW + kw;
      for (int i = 0; i < np; i++) {
        __m512 wv = _mm512_set1_ps(wp[i][k]);
        for (int j = 0; j < npair; j++)
          acc[i][j] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xp[i] + off + 2 * j * ROW), acc[i][j]);
      }
    }
  /* lanes 0 .. OW - 1 (row 2j) and 8 .. 8 + OW - 1 (row 2j + 1) */
  __mmask16 cols = (__mmask16)((1u << g->OW) - 1), both = (__mmask16)(cols | cols << ROW);
  for (int i = 0; i < np; i++) {
    __m512 bias = _mm512_set1_ps(b[(p + i) % g->OC]);
    float *yp = y + (p + i) * g->ohw;
    for (int j = 0; j < npair; j++) {
      int64_t rows = g->OH - 2 * j < 2 ? 1 : 2;
      __m512 v = _mm512_maskz_compress_ps(rows == 2 ? both : cols, _mm512_add_ps(acc[i][j], bias));
      _mm512_mask_storeu_ps(yp + 2 * j * g->OW, (__mmask16)((1u << (rows * g->OW)) - 1), v);
    }
  }
}

int conv_dw_small_avx512(const geom *g, const float *x, const float *w, const float *b, float *y, int64_t p,
                         int64_t np) {
  if (g->sh != 1 || g->sw != 1 || g->OH < 1 || g->OW < 1 || g->OW + (g->KW - 1) * g->dw > ROW ||
      g->OH > 2 * MAX_PAIRS || g->OH + (g->KH - 1) * g->dh > MAX_PROWS || np < 1 || np > DW_SMALL_PLANES)
    return 0;
#define PAIRS(NP, NPAIR) case NPAIR: small_planes(NP, NPAIR, g, x, w, b, y, p); break;
#define PLANES(NP) \
  case NP: switch ((g->OH + 1) / 2) { PAIRS(NP, 1) PAIRS(NP, 2) PAIRS(NP, 3) default: PAIRS(NP, 4) } break;
  switch (np) { PLANES(1) PLANES(2) PLANES(3) default: PLANES(4) }
#undef PLANES
#undef PAIRS
  return 1;
}
