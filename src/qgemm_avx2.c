/* qgemm_avx2.c: the AVX2 int8 micro-kernel (hosts without VNNI): 2 rows x 16 columns (one packed strip). Each
   weight byte is sign-extended and each activation zero-extended to int16 and multiplied pairwise by vpmaddwd,
   whose int32 pair sums cannot saturate (vpmaddubsw's int16 sums could): the same exact sums as VNNI. */
#include "qgemm.h"
#include <immintrin.h>
#include <string.h>

#define MR 2

/* (c0 .. c7 as lane pairs of lo (columns 0-3) and hi (columns 4-7)) -> the 8 column sums in order */
static inline __m256i pair_sums(__m256i lo, __m256i hi) {
  return _mm256_permute4x64_epi64(_mm256_hadd_epi32(lo, hi), 0xD8);
}

__attribute__((always_inline)) static inline void tile(const int mr, int nr, int64_t G, const uint8_t *a,
                                                       int64_t lda, const int8_t *b, const qgemm_out *o) {
  /* acc[r][q]: columns 4q .. 4q+3, each as two int32 lanes (k pairs 0-1 and 2-3 of every group) */
  __m256i acc[MR][4];
  for (int r = 0; r < mr; r++) for (int q = 0; q < 4; q++) acc[r][q] = _mm256_setzero_si256();
  for (int64_t g = 0; g < G; g++) {
    const int8_t *w = b + g * QG_GROUP;
    __m256i w16[4];
    for (int q = 0; q < 4; q++) w16[q] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + 16 * q)));
    for (int r = 0; r < mr; r++) {
      uint32_t four;
      memcpy(&four, a + r * lda + g * QG_KG, 4);
      __m256i x = _mm256_cvtepu8_epi16(_mm_set1_epi32((int)four));   /* a0 a1 a2 a3 as int16, repeated */
      for (int q = 0; q < 4; q++) acc[r][q] = _mm256_add_epi32(acc[r][q], _mm256_madd_epi16(x, w16[q]));
    }
  }
  int32_t out[MR * QG_NR];
  for (int r = 0; r < mr; r++) {
    _mm256_storeu_si256((__m256i *)(out + r * QG_NR), pair_sums(acc[r][0], acc[r][1]));
    _mm256_storeu_si256((__m256i *)(out + r * QG_NR + 8), pair_sums(acc[r][2], acc[r][3]));
  }
  ds_qgemm_store(out, QG_NR, mr, nr, o);
}

static void micro(int mr, int nr, int64_t G, const uint8_t *a, int64_t lda, const int8_t *b, const qgemm_out *o) {
  if (mr == 2) tile(2, nr, G, a, lda, b, o);
  else tile(1, nr, G, a, lda, b, o);
}

const qgemm_kernel ds_qgemm_avx2 = { MR, QG_NR, micro };
