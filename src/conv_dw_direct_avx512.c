/* conv_dw_direct_avx512.c: conv_dw_direct.c's 3x3 stride-2 padding-1 f32 depthwise plane on AVX-512: 16 outputs a
   vector (8 in a ymm for the last 8 columns or fewer: MobileNet's 24- and 6-wide maps), the even and odd input
   columns de-interleaved by two-source permutes, and each input row loaded once for the up to DW2_ROWS output
   rows that read it. The chain per value is the AVX2 kernel's (taps (kh, kw) in
   order from zero, padding taps times zeros, then + bias), so the same bits on every path; then
   a conv2d_ep's hardswish when act asks for it (el_hardswish_f32's ops, in registers before the store). */
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma")
#include "internal.h"
#include "nn_conv.h"
#include <immintrin.h>

#define DW2_ROWS 4

/* lanes [0, n) of 16 (n clamped to 0..16) */
static inline __mmask16 lanes16(int64_t n) { return n <= 0 ? 0 : n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1); }

/* input row h's columns 2 ow - 1, 2 ow, 2 ow + 1 (a, b, c) for the 16 outputs from ow0 (zeros outside the plane) */
static inline void cols16(const float *x, int64_t H, int64_t W, int64_t h, int64_t ow0, __m512 *a, __m512 *b,
                          __m512 *c) {
  *a = *b = *c = _mm512_setzero_ps();
  if (h < 0 || h >= H) return;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const float *r = x + h * W;
  int64_t c0 = 2 * ow0;   /* the input column of output ow0's centre tap */
  __m512 lo = _mm512_maskz_loadu_ps(lanes16(W - c0), r + c0), hi = _mm512_maskz_loadu_ps(lanes16(W - c0 - 16), r + c0 + 16);
  *b = _mm512_permutex2var_ps(lo, even, hi);
  *c = _mm512_permutex2var_ps(lo, odd, hi);
  __m512 left = _mm512_set1_ps(c0 > 0 ? r[c0 - 1] : 0.0f);   /* column 2 ow0 - 1, then c's lanes shifted up one */
  *a = _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(*c), _mm512_castps_si512(left), 15));
}

/* lanes [0, n) of 8 (n clamped to 0..8) */
static inline __mmask8 lanes8(int64_t n) { return n <= 0 ? 0 : n >= 8 ? 0xff : (__mmask8)((1u << n) - 1); }

/* cols16 for the 8 outputs from ow0, in a ymm */
static inline void cols8(const float *x, int64_t H, int64_t W, int64_t h, int64_t ow0, __m256 *a, __m256 *b,
                         __m256 *c) {
  *a = *b = *c = _mm256_setzero_ps();
  if (h < 0 || h >= H) return;
  const __m256i even = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14), odd = _mm256_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15);
  const float *r = x + h * W;
  int64_t c0 = 2 * ow0;
  __m256 lo = _mm256_maskz_loadu_ps(lanes8(W - c0), r + c0), hi = _mm256_maskz_loadu_ps(lanes8(W - c0 - 8), r + c0 + 8);
  *b = _mm256_permutex2var_ps(lo, even, hi);
  *c = _mm256_permutex2var_ps(lo, odd, hi);
  __m256 left = _mm256_set1_ps(c0 > 0 ? r[c0 - 1] : 0.0f);
  *a = _mm256_castsi256_ps(_mm256_alignr_epi32(_mm256_castps_si256(*c), _mm256_castps_si256(left), 7));
}

/* el_hardswish_f32 per lane (conv_vec_avx512.h's vhardswish), at 16 and at 8 lanes */
static inline __m512 hswish16(__m512 x) {
  const __m512 six = _mm512_set1_ps(6.0f);
  __m512 y = _mm512_min_ps(six, _mm512_max_ps(_mm512_setzero_ps(), _mm512_add_ps(x, _mm512_set1_ps(3.0f))));
  return _mm512_div_ps(_mm512_mul_ps(x, y), six);
}
static inline __m256 hswish8(__m256 x) {
  const __m256 six = _mm256_set1_ps(6.0f);
  __m256 y = _mm256_min_ps(six, _mm256_max_ps(_mm256_setzero_ps(), _mm256_add_ps(x, _mm256_set1_ps(3.0f))));
  return _mm256_div_ps(_mm256_mul_ps(x, y), six);
}

/* rows16 for the (at most 8) outputs from ow0, in a ymm */
__attribute__((always_inline)) static inline void rows8(const int nr, const geom *g, const float *x, const __m512 *wk,
                                                        __m512 bias, float *y, int64_t oh0, int64_t ow0, int act) {
  __m256 acc[DW2_ROWS];
  for (int i = 0; i < nr; i++) acc[i] = _mm256_setzero_ps();
#pragma GCC unroll 9
  for (int j = 0; j < 2 * nr + 1; j++) {
    __m256 a, b, c;
    cols8(x, g->H, g->W, 2 * oh0 - 1 + j, ow0, &a, &b, &c);
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++) {
      int kh = j - 2 * i;
      if (kh < 0 || kh > 2) continue;
      acc[i] = _mm256_fmadd_ps(_mm512_castps512_ps256(wk[3 * kh]), a, acc[i]);
      acc[i] = _mm256_fmadd_ps(_mm512_castps512_ps256(wk[3 * kh + 1]), b, acc[i]);
      acc[i] = _mm256_fmadd_ps(_mm512_castps512_ps256(wk[3 * kh + 2]), c, acc[i]);
    }
  }
  __mmask8 m = lanes8(g->OW - ow0);
  for (int i = 0; i < nr; i++) {
    __m256 v = _mm256_add_ps(acc[i], _mm512_castps512_ps256(bias));
    _mm256_mask_storeu_ps(y + (oh0 + i) * g->OW + ow0, m, act == CONV_ACT_HARDSWISH ? hswish8(v) : v);
  }
}

/* output rows [oh0, oh0 + nr), columns [ow0, ow0 + 16): input rows 2 oh0 - 1 + j, j < 2 nr + 1, each loaded once;
   row j is tap row kh = j - 2 i of output row i, so each output sees kh = 0, 1, 2 in order */
__attribute__((always_inline)) static inline void rows16(const int nr, const geom *g, const float *x,
                                                         const __m512 *wk, __m512 bias, float *y, int64_t oh0,
                                                         int64_t ow0, int act) {
  __m512 acc[DW2_ROWS];
  for (int i = 0; i < nr; i++) acc[i] = _mm512_setzero_ps();
#pragma GCC unroll 9
  for (int j = 0; j < 2 * nr + 1; j++) {
    __m512 a, b, c;
    cols16(x, g->H, g->W, 2 * oh0 - 1 + j, ow0, &a, &b, &c);
#pragma GCC unroll 4
    for (int i = 0; i < nr; i++) {
      int kh = j - 2 * i;
      if (kh < 0 || kh > 2) continue;
      acc[i] = _mm512_fmadd_ps(wk[3 * kh], a, acc[i]);
      acc[i] = _mm512_fmadd_ps(wk[3 * kh + 1], b, acc[i]);
      acc[i] = _mm512_fmadd_ps(wk[3 * kh + 2], c, acc[i]);
    }
  }
  __mmask16 m = lanes16(g->OW - ow0);
  for (int i = 0; i < nr; i++) {
    __m512 v = _mm512_add_ps(acc[i], bias);
    _mm512_mask_storeu_ps(y + (oh0 + i) * g->OW + ow0, m, act == CONV_ACT_HARDSWISH ? hswish16(v) : v);
  }
}

void conv_dw3x3s2_avx512(const geom *g, const float *x, const float *w, float bias, float *y, int act) {
  __m512 bv = _mm512_set1_ps(bias), wk[9];
  for (int k = 0; k < 9; k++) wk[k] = _mm512_set1_ps(w[k]);
  for (int64_t ow0 = 0; ow0 < g->OW; ow0 += 16) {
    int narrow = g->OW - ow0 <= 8;
    for (int64_t oh0 = 0; oh0 < g->OH; oh0 += DW2_ROWS)
#define R(NR) \
  if (narrow) rows8(NR, g, x, wk, bv, y, oh0, ow0, act); else rows16(NR, g, x, wk, bv, y, oh0, ow0, act); break;
      switch (g->OH - oh0 < DW2_ROWS ? g->OH - oh0 : DW2_ROWS) {
        case 1: R(1) case 2: R(2) case 3: R(3) default: R(DW2_ROWS)
      }
#undef R
  }
}
