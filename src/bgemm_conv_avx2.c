/* bgemm_conv_avx2.c: the AVX2 band kernel of the bf16 convolution (bgemm_conv.h; hosts without AVX-512 BF16):
   tiles of up to 2 x 8 pixels by 4 output channels, vdpbf16ps's dot written out as bgemm_avx2.c does (per lane
   acc = fma(odd, odd, acc), flushed if subnormal, then the same with the even halves); the NaN made BG_NAN and the
   bias added in registers, one lane per pixel, stored straight into the channel's output row. */
#include "bgemm.h"
#include "bgemm_conv.h"
#include <immintrin.h>

#define NV 2   /* pixel vectors per tile */
#define NO 4   /* channels per tile */

/* a subnormal lane made the zero of its sign (NaN lanes compare false and stay) */
static inline __m256 ftz(__m256 x, __m256 absmask, __m256 tiny) {
  __m256 small = _mm256_cmp_ps(_mm256_and_ps(x, absmask), tiny, _CMP_LT_OQ);
  return _mm256_andnot_ps(_mm256_and_ps(small, absmask), x);
}

/* pixels [p0, p0 + 8 nv) (the band's n cuts the last) by channels [o0, o0 + no); nv, no constant per copy */
__attribute__((always_inline)) static inline void tile(const int nv, const int no, const bconv_band *b, int64_t p0,
                                                       int64_t o0) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 tiny = _mm256_castsi256_ps(_mm256_set1_epi32(0x00800000));
  const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
  __m256 acc[NO][NV];
  for (int o = 0; o < no; o++)
    for (int v = 0; v < nv; v++) acc[o][v] = _mm256_setzero_ps();
  const uint32_t *a = b->a + p0;
  const float *wf = b->wf + o0 * b->P * 2;
  for (int64_t p = 0; p < b->P; p++) {
    __m256 xo[NV], xe[NV];
    for (int v = 0; v < nv; v++) {
      __m256i x = _mm256_loadu_si256((const __m256i *)(a + p * b->bw + 8 * v));
      xo[v] = _mm256_castsi256_ps(_mm256_and_si256(x, hi));
      xe[v] = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
    }
    for (int o = 0; o < no; o++) {
      __m256 wo = _mm256_broadcast_ss(wf + (o * b->P + p) * 2), we = _mm256_broadcast_ss(wf + (o * b->P + p) * 2 + 1);
      for (int v = 0; v < nv; v++) {
        acc[o][v] = ftz(_mm256_fmadd_ps(xo[v], wo, acc[o][v]), absmask, tiny);
        acc[o][v] = ftz(_mm256_fmadd_ps(xe[v], we, acc[o][v]), absmask, tiny);
      }
    }
  }
  __m256i m[NV];   /* the pixels of each vector in the band */
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int v = 0; v < nv; v++) {
    int64_t left = b->n - p0 - 8 * v;
    m[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(left < 8 ? left : 8)), lane);
  }
  const __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32((int)BG_NAN));
  float *y = b->y + o0 * b->ldy + p0;
  for (int o = 0; o < no; o++, y += b->ldy) {
    __m256 bias = _mm256_set1_ps(b->bias[o0 + o]);
    for (int v = 0; v < nv; v++) {
      __m256 c = _mm256_blendv_ps(acc[o][v], nan, _mm256_cmp_ps(acc[o][v], acc[o][v], _CMP_UNORD_Q));
      _mm256_maskstore_ps(y + 8 * v, m[v], _mm256_add_ps(c, bias));
    }
  }
}

void ds_bconv_band_avx2(const bconv_band *b) {
  for (int64_t p0 = 0; p0 < b->n; p0 += 8 * NV) {
    int two = b->n - p0 > 8;
    for (int64_t o0 = 0; o0 < b->O; o0 += NO) {
      int no = (int)(b->O - o0 < NO ? b->O - o0 : NO);
      switch (no) {
        case 4: if (two) tile(2, 4, b, p0, o0); else tile(1, 4, b, p0, o0); break;
        case 3: if (two) tile(2, 3, b, p0, o0); else tile(1, 3, b, p0, o0); break;
        case 2: if (two) tile(2, 2, b, p0, o0); else tile(1, 2, b, p0, o0); break;
        default: if (two) tile(2, 1, b, p0, o0); else tile(1, 1, b, p0, o0);
      }
    }
  }
}
