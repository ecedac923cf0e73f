/* bgemm_conv_gather_avx512.c: bgemm_conv.c's gather of one pair of k's taps for unit-stride pixels on AVX-512 hosts,
   sixteen pixels at a time: the two taps' source runs interleaved by one vpermt2w (instead of two unpacks and two
   lane permutes), or widened when the pair has no second tap. Pure data movement: the words of the AVX2 gather. */
#pragma GCC target("avx512f,avx512bw")
#include <stdint.h>
#include <immintrin.h>

/* word i: bf16 i of the first table (bits 0-15), bf16 i of the second (32 + i, bits 16-31) */
#define PAIR(i) i, 32 + i
static const uint16_t PAIRS[32] = { PAIR(0), PAIR(1), PAIR(2), PAIR(3), PAIR(4), PAIR(5), PAIR(6), PAIR(7), PAIR(8),
                                    PAIR(9), PAIR(10), PAIR(11), PAIR(12), PAIR(13), PAIR(14), PAIR(15) };
#undef PAIR

/* d[p] = s0[off_p] | s1[off_p] << 16 (s1 NULL: 0) for p < n, pixel p at column ow_p of output row r_p (pixel 0:
   column ow, its row at offset row; OW columns a row, rows rowstep values apart, unit stride along a row): row by
   row, sixteen pixels at a time, so it may read up to 15 values past a row's last pixel and write up to 15 words
   past a row's end (and d + n) */
void ds_bconv_gather_avx512(const uint16_t *s0, const uint16_t *s1, int64_t ow, int64_t row, int64_t OW,
                            int64_t rowstep, int64_t n, uint32_t *d) {
  const __m512i pairs = _mm512_loadu_si512(PAIRS);
  for (int64_t p = 0; p < n; p += OW - ow, ow = 0, row += rowstep) {
    int64_t run = OW - ow < n - p ? OW - ow : n - p, off = row + ow;
    uint32_t *dr = d + p;
    if (s1)
      for (int64_t i = 0; i < run; i += 16) {
        __m512i a = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(s0 + off + i)));
        __m512i b = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(s1 + off + i)));
        _mm512_storeu_si512(dr + i, _mm512_permutex2var_epi16(a, pairs, b));
      }
    else
      for (int64_t i = 0; i < run; i += 16)
        _mm512_storeu_si512(dr + i, _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(s0 + off + i))));
  }
}
