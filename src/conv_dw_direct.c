/* conv_dw_direct.c: one f32 depthwise plane straight from its input plane (no phase planes, no accumulator run in
   memory), 8 outputs a vector and up to DW_ROWS output rows at once (independent FMA chains, so the FMA latency is
   hidden on small planes): any kernel at stride 1 (up to 8 rows from a zero-bordered copy of planes up to
   DW_PAD_MAX floats, masked loads of the shifted input rows above), and 3x3 at stride 2
   with padding 1 (the even and odd input columns de-interleaved in registers; on the AVX-512 path 16 outputs a
   vector, conv_dw_direct_avx512.c). The chain per value is depthwise_plane's (nn_conv_depthwise_kernels.h): the
   taps (kh, kw) in order from zero, padding taps multiplying zeros, then + bias, so the same bits on every path.
   AVX2 + FMA (the build's baseline) on every DS_ISA path otherwise. */
#include "internal.h"
#include "nn_conv.h"
#include <immintrin.h>

#define DW_ROWS 4

/* lanes [0, n) of 8 set (n clamped to 0..8): the mask of _mm256_maskload_ps */
static inline __m256i lanes8(int64_t n) {
  __m256i n8 = _mm256_set1_epi32((int)(n < 0 ? 0 : n > 8 ? 8 : n));
  return _mm256_cmpgt_epi32(n8, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* the lanes whose column c + lane lies inside [0, W) */
static inline __m256i inside8(int64_t c, int64_t W) {
  __m256i col = _mm256_add_epi32(_mm256_set1_epi32((int)c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  return _mm256_and_si256(_mm256_cmpgt_epi32(col, _mm256_set1_epi32(-1)),
                          _mm256_cmpgt_epi32(_mm256_set1_epi32((int)W), col));
}

/* the first n (1..8) outputs of row y from v: 4, 2 and 1 lanes at a time below 8 (a masked store, which the
   compiler would make of a short copy loop, is slow on AMD) */
static inline void store8(float *y, int64_t n, __m256 v) {
  if (n >= 8) { _mm256_storeu_ps(y, v); return; }
  __m128 q = _mm256_castps256_ps128(v);
  if (n & 4) { _mm_storeu_ps(y, q); y += 4; q = _mm256_extractf128_ps(v, 1); }
  if (n & 2) { _mm_storel_pi((__m64 *)y, q); y += 2; q = _mm_movehl_ps(q, q); }
  if (n & 1) _mm_store_ss(y, q);
}

/* output rows [oh0, oh0 + nr), columns [ow0, ow0 + 8) of a stride-1 plane, nr <= DW_ROWS (a constant per call) */
__attribute__((always_inline)) static inline void s1_rows(const int nr, const geom *g, const float *x,
                                                          const float *w, __m256 bias, float *y, int64_t oh0,
                                                          int64_t ow0) {
  __m256 acc[DW_ROWS];
  for (int i = 0; i < nr; i++) acc[i] = _mm256_setzero_ps();
  for (int64_t kh = 0; kh < g->KH; kh++)
    for (int64_t kw = 0; kw < g->KW; kw++) {
      __m256 wv = _mm256_set1_ps(w[kh * g->KW + kw]);
      int64_t c = ow0 - g->pw + kw * g->dw;
      __m256i m = inside8(c, g->W);
#pragma GCC unroll 4
      for (int i = 0; i < nr; i++) {
        int64_t h = oh0 + i - g->ph + kh * g->dh;
        __m256 v = h >= 0 && h < g->H ? _mm256_maskload_ps(x + h * g->W + c, m) : _mm256_setzero_ps();
        acc[i] = _mm256_fmadd_ps(wv, v, acc[i]);
      }
    }
  for (int i = 0; i < nr; i++) store8(y + (oh0 + i) * g->OW + ow0, g->OW - ow0, _mm256_add_ps(acc[i], bias));
}

/* a stride-1 plane whose zero-bordered copy takes at most this many floats (stack) is read from the copy */
#define DW_PAD_MAX 4096
/* output rows at once from the copy: 8 independent FMA chains cover the FMA latency on two ports */
#define DW_PAD_ROWS 8

/* output rows [oh0, oh0 + nr), nr <= DW_PAD_ROWS, columns [ow0, ow0 + 8) of a stride-1 plane from its
   zero-bordered copy xp (rows of R, padded row 0 = input row -ph, padded column 0 = input column -pw): plain
   loads, the lanes past OW reading spare columns whose results are not stored; padding taps multiply the copy's
   zeros (s1_rows' chain) */
__attribute__((always_inline)) static inline void s1_rows_pad(const int nr, const geom *g, const float *xp,
                                                              int64_t R, const float *w, __m256 bias, float *y,
                                                              int64_t oh0, int64_t ow0) {
  __m256 acc[DW_PAD_ROWS];
  for (int i = 0; i < nr; i++) acc[i] = _mm256_setzero_ps();
  for (int64_t kh = 0; kh < g->KH; kh++)
    for (int64_t kw = 0; kw < g->KW; kw++) {
      __m256 wv = _mm256_set1_ps(w[kh * g->KW + kw]);
      const float *s = xp + (oh0 + kh * g->dh) * R + ow0 + kw * g->dw;
#pragma GCC unroll 8
      for (int i = 0; i < nr; i++) acc[i] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(s + i * R), acc[i]);
    }
  for (int i = 0; i < nr; i++) store8(y + (oh0 + i) * g->OW + ow0, g->OW - ow0, _mm256_add_ps(acc[i], bias));
}

/* xp (rows, R) + 8 spare zeros = the input plane read by a stride-1 conv, at (ph, pw) in zeros */
static void pad_plane(const geom *g, const float *x, float *xp, int64_t rows, int64_t R) {
  memset(xp, 0, (size_t)(rows * R + 8) * sizeof(float));
  for (int64_t r = 0; r < rows; r++) {
    int64_t h = r - g->ph, c0 = g->pw > 0 ? 0 : -g->pw, c1 = g->W < R - g->pw ? g->W : R - g->pw;
    if (h < 0 || h >= g->H || c1 <= c0) continue;
    memcpy(xp + r * R + c0 + g->pw, x + h * g->W + c0, (size_t)(c1 - c0) * sizeof(float));
  }
}

/* input row h's columns 2 ow - 1, 2 ow, 2 ow + 1 for the 8 outputs from ow0 (zeros outside the plane) */
static inline void s2_cols(const float *x, int64_t H, int64_t W, int64_t h, int64_t ow0, __m256 *a, __m256 *b,
                           __m256 *c) {
  *a = *b = *c = _mm256_setzero_ps();
  if (h < 0 || h >= H) return;
  const __m256i back = _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6);
  const float *r = x + h * W;
  int64_t c0 = 2 * ow0;   /* the input column of output ow0's centre tap */
  __m256 lo = _mm256_maskload_ps(r + c0, lanes8(W - c0)), hi = _mm256_maskload_ps(r + c0 + 8, lanes8(W - c0 - 8));
  *b = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xd8));
  *c = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xdd)), 0xd8));
  *a = _mm256_blend_ps(_mm256_permutevar8x32_ps(*c, back), _mm256_set1_ps(c0 > 0 ? r[c0 - 1] : 0.0f), 1);
}

/* output rows [oh0, oh0 + nr), columns [ow0, ow0 + 8) of a 3x3 stride-2 padding-1 plane */
__attribute__((always_inline)) static inline void s2_rows(const int nr, const geom *g, const float *x,
                                                          const __m256 *wk, __m256 bias, float *y, int64_t oh0,
                                                          int64_t ow0) {
  __m256 acc[DW_ROWS];
  for (int i = 0; i < nr; i++) acc[i] = _mm256_setzero_ps();
  for (int kh = 0; kh < 3; kh++)
    for (int i = 0; i < nr; i++) {
      __m256 a, b, c;
      s2_cols(x, g->H, g->W, 2 * (oh0 + i) - 1 + kh, ow0, &a, &b, &c);
      acc[i] = _mm256_fmadd_ps(wk[3 * kh], a, acc[i]);
      acc[i] = _mm256_fmadd_ps(wk[3 * kh + 1], b, acc[i]);
      acc[i] = _mm256_fmadd_ps(wk[3 * kh + 2], c, acc[i]);
    }
  for (int i = 0; i < nr; i++) store8(y + (oh0 + i) * g->OW + ow0, g->OW - ow0, _mm256_add_ps(acc[i], bias));
}

#define ROWS_CASES(CALL) \
  switch (g->OH - oh0 < DW_ROWS ? g->OH - oh0 : DW_ROWS) { \
    case 1: CALL(1); break; case 2: CALL(2); break; case 3: CALL(3); break; default: CALL(DW_ROWS); }

int conv_dw_direct_f32(const geom *g, const float *x, const float *w, float bias, float *y, int act) {
  int s1 = g->sh == 1 && g->sw == 1;
  int s2k3 = g->KH == 3 && g->KW == 3 && g->sh == 2 && g->sw == 2 && g->ph == 1 && g->pw == 1 && g->dh == 1 &&
             g->dw == 1;
  if (!(s1 || s2k3) || g->Wp + 16 >= INT32_MAX) return 0;   /* columns as 32-bit lanes */
  if (s2k3 && ds_isa() == DS_ISA_AVX512) {
    conv_dw3x3s2_avx512(g, x, w, bias, y, act);
    return act == CONV_ACT_NONE ? 1 : 2;
  }
  __m256 bv = _mm256_set1_ps(bias), wk[9];
  /* a small stride-1 plane: the rows and columns its outputs read, copied once with their zero border */
  int64_t prow = g->OH + (g->KH - 1) * g->dh, R = g->OW + (g->KW - 1) * g->dw;
  if (s1 && prow * R + 8 <= DW_PAD_MAX) {
    float xp[DW_PAD_MAX];
    pad_plane(g, x, xp, prow, R);
    for (int64_t ow0 = 0; ow0 < g->OW; ow0 += 8)
      for (int64_t oh0 = 0; oh0 < g->OH; oh0 += DW_PAD_ROWS) {
#define P1(NR) case NR: s1_rows_pad(NR, g, xp, R, w, bv, y, oh0, ow0); break;
        switch (g->OH - oh0 < DW_PAD_ROWS ? g->OH - oh0 : DW_PAD_ROWS) {
          P1(1) P1(2) P1(3) P1(4) P1(5) P1(6) P1(7) default: P1(8)
        }
#undef P1
      }
    return 1;
  }
  if (s2k3) for (int k = 0; k < 9; k++) wk[k] = _mm256_set1_ps(w[k]);
  for (int64_t ow0 = 0; ow0 < g->OW; ow0 += 8)
    for (int64_t oh0 = 0; oh0 < g->OH; oh0 += DW_ROWS) {
#define S1(NR) s1_rows(NR, g, x, w, bv, y, oh0, ow0)
#define S2(NR) s2_rows(NR, g, x, wk, bv, y, oh0, ow0)
      if (s1) { ROWS_CASES(S1) } else { ROWS_CASES(S2) }
#undef S1
#undef S2
    }
  return 1;
}
