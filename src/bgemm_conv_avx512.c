/* bgemm_conv_avx512.c: the AVX-512 BF16 band kernel of the bf16 convolution (bgemm_conv.h): tiles of up to 4 x 16
   pixels by 6 output channels (24 zmm accumulators); per pair of k each pixel vector of taps is loaded once and
   each channel's weight pair broadcast once, one vdpbf16ps (bgemm.h's dot) per vector and channel; the NaN made
   BG_NAN and the bias added in registers, one lane per pixel, stored straight into the channel's output row. */
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16")
#include "bgemm.h"
#include "bgemm_conv.h"
#include <immintrin.h>

#define NV 4   /* pixel vectors per tile */
#define NO 6   /* channels per tile */

/* acc += the pairs' products in place (GCC would copy _mm512_dpbf16_ps's accumulators) */
static inline __m512 dpbf16(__m512 acc, __m512i x, __m512i w) {
  __asm__("vdpbf16ps %2, %1, %0" : "+v"(acc) : "v"(x), "v"(w));
  return acc;
}

/* pixels [p0, p0 + 16 nv) (the band's n cuts the last) by channels [o0, o0 + no); nv, no constant per copy */
__attribute__((always_inline)) static inline void tile(const int nv, const int no, const bconv_band *b, int64_t p0,
                                                       int64_t o0) {
  __m512 acc[NO][NV];
  for (int o = 0; o < no; o++)
    for (int v = 0; v < nv; v++) acc[o][v] = _mm512_setzero_ps();
  const uint32_t *a = b->a + p0, *w = b->w + o0 * b->P;
  for (int64_t p = 0; p < b->P; p++) {
    __m512i x[NV];
    for (int v = 0; v < nv; v++) x[v] = _mm512_loadu_si512(a + p * b->bw + 16 * v);
#pragma GCC unroll 6
    for (int o = 0; o < no; o++) {
      __m512i wo = _mm512_set1_epi32((int)w[o * b->P + p]);
      for (int v = 0; v < nv; v++) acc[o][v] = dpbf16(acc[o][v], x[v], wo);
    }
  }
  __mmask16 m[NV];   /* the pixels of each vector in the band */
  for (int v = 0; v < nv; v++) {
    int64_t left = b->n - p0 - 16 * v;
    m[v] = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
  }
  const __m512 nan = _mm512_castsi512_ps(_mm512_set1_epi32((int)BG_NAN));
  float *y = b->y + o0 * b->ldy + p0;
  for (int o = 0; o < no; o++, y += b->ldy) {
    __m512 bias = _mm512_set1_ps(b->bias[o0 + o]);
    for (int v = 0; v < nv; v++) {
      __m512 c = _mm512_mask_mov_ps(acc[o][v], _mm512_cmp_ps_mask(acc[o][v], acc[o][v], _CMP_UNORD_Q), nan);
      _mm512_mask_storeu_ps(y + 16 * v, m[v], _mm512_add_ps(c, bias));
    }
  }
}

#define ROW(V) \
  case V: \
    switch (no) { \
      case 6: tile(V, 6, b, p0, o0); break; case 5: tile(V, 5, b, p0, o0); break; \
      case 4: tile(V, 4, b, p0, o0); break; case 3: tile(V, 3, b, p0, o0); break; \
      case 2: tile(V, 2, b, p0, o0); break; default: tile(V, 1, b, p0, o0); \
    } \
    break;
void ds_bconv_band_avx512bf16(const bconv_band *b) {
  for (int64_t p0 = 0; p0 < b->n; p0 += 16 * NV) {
    int nv = (int)((b->n - p0 + 15) / 16 < NV ? (b->n - p0 + 15) / 16 : NV);
    for (int64_t o0 = 0; o0 < b->O; o0 += NO) {
      int no = (int)(b->O - o0 < NO ? b->O - o0 : NO);
      switch (nv) {
        ROW(4) ROW(3) ROW(2)
        default: ROW(1)
      }
    }
  }
}
