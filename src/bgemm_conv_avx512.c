/* bgemm_conv_avx512.c: the AVX-512 BF16 band kernel of the bf16 convolution (bgemm_conv.h): tiles of up to 4 x 16
   pixels by 6 output channels (24 zmm accumulators); per pair of k each pixel vector of taps is loaded once and
   each channel's weight pair broadcast once, one vdpbf16ps (bgemm.h's dot) per vector and channel; the NaN made
   BG_NAN and the bias added in registers, one lane per pixel, stored straight into the channel's output row. */
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16")
#include "bgemm.h"
#include "bgemm_conv.h"
#include "conv_band_avx512.h"
#include <immintrin.h>

#define NV CONV_BAND_NV
#define NO CONV_BAND_NO

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
  CONV_BAND_MASKS(m, nv, b->n, p0)
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

CONV_BAND_KERNEL(ds_bconv_band_avx512bf16, bconv_band)
