/* qconv_avx2.c: the AVX2 int8 convolution band kernel (qconv.h; hosts without VNNI): tiles of up to 2 x 8 pixels
   by 4 output channels. Each pixel's four taps are split into int16 lanes (taps 0, 2 and 1, 3), multiplied by the
   channel's weights as int16 pairs (w16) with vpmaddwd, whose int32 pair sums cannot saturate: the same exact
   sums as VNNI; qconv.h's epilogue in registers, one lane per pixel. */
#include "qconv.h"
#include <immintrin.h>

#define NV 2   /* pixel vectors per tile */
#define NO 4   /* channels per tile */

/* pixels [p0, p0 + 8 nv) (the band's n cuts the last) by channels [o0, o0 + no); nv, no constant per copy */
__attribute__((always_inline)) static inline void tile(const int nv, const int no, const qconv_band *b, int64_t p0,
                                                       int64_t o0) {
  __m256i acc[NO][NV];
  for (int o = 0; o < no; o++)
    for (int v = 0; v < nv; v++) acc[o][v] = _mm256_setzero_si256();
  const __m256i low = _mm256_set1_epi16(0xff);
  const uint8_t *a = b->a + p0 * 4;
  const int32_t *w16 = b->w16 + o0 * b->G * 2;
  for (int64_t g = 0; g < b->G; g++) {
    __m256i even[NV], odd[NV];
    for (int v = 0; v < nv; v++) {
      __m256i x = _mm256_loadu_si256((const __m256i *)(a + (g * b->bw + 8 * v) * 4));
      even[v] = _mm256_and_si256(x, low);
      odd[v] = _mm256_srli_epi16(x, 8);
    }
    for (int o = 0; o < no; o++) {
      __m256i we = _mm256_set1_epi32(w16[(o * b->G + g) * 2]), wo = _mm256_set1_epi32(w16[(o * b->G + g) * 2 + 1]);
      for (int v = 0; v < nv; v++)
        acc[o][v] = _mm256_add_epi32(acc[o][v], _mm256_add_epi32(_mm256_madd_epi16(even[v], we),
                                                                 _mm256_madd_epi16(odd[v], wo)));
    }
  }
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int o = 0; o < no; o++) {
    int64_t c = o0 + o;
    __m256i zc = _mm256_set1_epi32(b->za * b->cs[c]);
    __m256 scale = _mm256_set1_ps(b->sa * b->ws[c]), bias = _mm256_set1_ps(b->bias[c]);
    float *y = b->y + c * b->ldy + p0;
    for (int v = 0; v < nv; v++) {
      int64_t left = b->n - p0 - 8 * v;
      __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(left < 8 ? left : 8)), lane);
      __m256 d = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(acc[o][v], zc)), scale);
      _mm256_maskstore_ps(y + 8 * v, m, _mm256_add_ps(d, bias));
    }
  }
}

#define ROW(V) \
  case V: \
    switch (no) { \
      case 4: tile(V, 4, b, p0, o0); break; \
      case 3: tile(V, 3, b, p0, o0); break; \
      case 2: tile(V, 2, b, p0, o0); break; \
      default: tile(V, 1, b, p0, o0); \
    } \
    break;
void ds_qconv_band_avx2(const qconv_band *b) {
  for (int64_t p0 = 0; p0 < b->n; p0 += 8 * NV) {
    int nv = b->n - p0 > 8 ? 2 : 1;
    for (int64_t o0 = 0; o0 < b->O; o0 += NO) {
      int no = (int)(b->O - o0 < NO ? b->O - o0 : NO);
      switch (nv) {
        ROW(2)
        default: ROW(1)
      }
    }
  }
}
