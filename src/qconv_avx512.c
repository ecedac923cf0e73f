/* qconv_avx512.c: the AVX-512 VNNI int8 convolution band kernel (qconv.h): tiles of up to 4 x 16 pixels by 6
   output channels (24 zmm accumulators); per k-group each pixel vector of four taps is loaded once and each
   channel's four weights broadcast once, one vpdpbusd (u8 x s8, no saturation) per pair; qconv.h's epilogue in
   registers, one lane per pixel, stored straight into the channel's output row. */
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni")
#include "qconv.h"
#include "conv_band_avx512.h"
#include <immintrin.h>

#define NV CONV_BAND_NV
#define NO CONV_BAND_NO

/* acc += x (u8) . w (s8) in place (as qgemm_avx512.c: GCC would copy _mm512_dpbusd_epi32's accumulators) */
static inline __m512i dpbusd(__m512i acc, __m512i x, __m512i w) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(x), "v"(w));
  return acc;
}

/* pixels [p0, p0 + 16 nv) (the band's n cuts the last) by channels [o0, o0 + no); nv, no constant per copy */
__attribute__((always_inline)) static inline void tile(const int nv, const int no, const qconv_band *b, int64_t p0,
                                                       int64_t o0) {
  __m512i acc[NO][NV];
  for (int o = 0; o < no; o++)
    for (int v = 0; v < nv; v++) acc[o][v] = _mm512_setzero_si512();
  const uint8_t *a = b->a + p0 * 4;
  const int32_t *wk = b->wk + o0 * b->G;
  for (int64_t g = 0; g < b->G; g++) {
    __m512i x[NV];
    for (int v = 0; v < nv; v++) x[v] = _mm512_loadu_si512(a + (g * b->bw + 16 * v) * 4);
#pragma GCC unroll 6
    for (int o = 0; o < no; o++) {
      __m512i w = _mm512_set1_epi32(wk[o * b->G + g]);
      for (int v = 0; v < nv; v++) acc[o][v] = dpbusd(acc[o][v], x[v], w);
    }
  }
  __mmask16 m[NV];   /* the pixels of each vector in the band, worked out once a tile */
  CONV_BAND_MASKS(m, nv, b->n, p0)
  float *y = b->y + o0 * b->ldy + p0;
  for (int o = 0; o < no; o++, y += b->ldy) {
    int64_t c = o0 + o;
    __m512i zc = _mm512_set1_epi32(b->za * b->cs[c]);
    __m512 scale = _mm512_set1_ps(b->sa * b->ws[c]), bias = _mm512_set1_ps(b->bias[c]);
    for (int v = 0; v < nv; v++) {
      __m512 d = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[o][v], zc)), scale);
      _mm512_mask_storeu_ps(y + 16 * v, m[v], _mm512_add_ps(d, bias));
    }
  }
}

CONV_BAND_KERNEL(ds_qconv_band_vnni, qconv_band)
