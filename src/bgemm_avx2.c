/* bgemm_avx2.c: the AVX2 emulation of vdpbf16ps (hosts without AVX-512 BF16): 4 rows x 16 columns (one packed
   strip). Per lane, as bgemm.h's dot: acc = fma(odd, odd, acc), flushed if subnormal, then the same with the even
   halves; a bf16 widened to f32 is its bits shifted up (the product is exact, the fma rounds once). */
#include "bgemm.h"
#include <immintrin.h>

#define MR 4

/* a subnormal lane made the zero of its sign (NaN lanes compare false and stay) */
static inline __m256 ftz(__m256 x, __m256 absmask, __m256 tiny) {
  __m256 small = _mm256_cmp_ps(_mm256_and_ps(x, absmask), tiny, _CMP_LT_OQ);
  return _mm256_andnot_ps(_mm256_and_ps(small, absmask), x);
}

__attribute__((always_inline)) static inline void tile(const int mr, int nr, int64_t P, const uint32_t *a,
                                                       int64_t lda, const uint32_t *b, float *c, int64_t ldc) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 tiny = _mm256_castsi256_ps(_mm256_set1_epi32(0x00800000));
  const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
  __m256 acc[MR][2];
  for (int r = 0; r < mr; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t p = 0; p < P; p++) {
    __m256i w0 = _mm256_loadu_si256((const __m256i *)(b + p * BG_NR));
    __m256i w1 = _mm256_loadu_si256((const __m256i *)(b + p * BG_NR + 8));
    __m256 o0 = _mm256_castsi256_ps(_mm256_and_si256(w0, hi)), e0 = _mm256_castsi256_ps(_mm256_slli_epi32(w0, 16));
    __m256 o1 = _mm256_castsi256_ps(_mm256_and_si256(w1, hi)), e1 = _mm256_castsi256_ps(_mm256_slli_epi32(w1, 16));
#pragma GCC unroll 4
    for (int r = 0; r < mr; r++) {
      __m256i x = _mm256_set1_epi32((int)a[r * lda + p]);
      __m256 xo = _mm256_castsi256_ps(_mm256_and_si256(x, hi)), xe = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
      acc[r][0] = ftz(_mm256_fmadd_ps(xo, o0, acc[r][0]), absmask, tiny);
      acc[r][1] = ftz(_mm256_fmadd_ps(xo, o1, acc[r][1]), absmask, tiny);
      acc[r][0] = ftz(_mm256_fmadd_ps(xe, e0, acc[r][0]), absmask, tiny);
      acc[r][1] = ftz(_mm256_fmadd_ps(xe, e1, acc[r][1]), absmask, tiny);
    }
  }
  const __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32((int)BG_NAN));
  for (int r = 0; r < mr; r++) {
    float t[16];
    for (int h = 0; h < 2; h++)   /* a NaN lane made BG_NAN */
      _mm256_storeu_ps(t + 8 * h, _mm256_blendv_ps(acc[r][h], nan, _mm256_cmp_ps(acc[r][h], acc[r][h], _CMP_UNORD_Q)));
    for (int j = 0; j < nr; j++) c[r * ldc + j] = t[j];
  }
}

static void micro(int mr, int nr, int64_t P, const uint32_t *a, int64_t lda, const uint32_t *b, float *c,
                  int64_t ldc) {
  switch (mr) {
    case 4: tile(4, nr, P, a, lda, b, c, ldc); break;
    case 3: tile(3, nr, P, a, lda, b, c, ldc); break;
    case 2: tile(2, nr, P, a, lda, b, c, ldc); break;
    default: tile(1, nr, P, a, lda, b, c, ldc);
  }
}

const bgemm_kernel ds_bgemm_avx2 = { MR, BG_NR, micro };
