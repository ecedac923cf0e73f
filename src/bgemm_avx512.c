/* bgemm_avx512.c: the AVX-512 BF16 micro-kernel: 8 rows x 32 columns (two packed strips), vdpbf16ps (per lane:
   acc += the odd pair's product, then += the even one's, each rounded once, DAZ/FTZ: bgemm.h's dot) into 16 zmm
   accumulators, a NaN stored as BG_NAN. */
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16")
#include "bgemm.h"
#include <immintrin.h>

#define MR 8

/* a NaN lane made BG_NAN */
static inline __m512 canon(__m512 v, __m512 nan) {
  return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), nan);
}

/* one tile; mr and two (a second strip) are constants in each instantiation */
__attribute__((always_inline)) static inline void tile(const int mr, const int two, int nr, int64_t P,
                                                       const uint32_t *a, int64_t lda, const uint32_t *b, float *c,
                                                       int64_t ldc) {
  __m512 acc0[MR], acc1[MR];
  for (int r = 0; r < mr; r++) { acc0[r] = _mm512_setzero_ps(); acc1[r] = _mm512_setzero_ps(); }
  const uint32_t *b1 = b + P * BG_NR;
  for (int64_t p = 0; p < P; p++) {
    __m512bh w0 = (__m512bh)_mm512_loadu_si512(b + p * BG_NR);
    __m512bh w1 = two ? (__m512bh)_mm512_loadu_si512(b1 + p * BG_NR) : w0;
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
      __m512bh x = (__m512bh)_mm512_set1_epi32((int)a[r * lda + p]);
      acc0[r] = _mm512_dpbf16_ps(acc0[r], x, w0);
      if (two) acc1[r] = _mm512_dpbf16_ps(acc1[r], x, w1);
    }
  }
  const __mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? 0xffff : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
  const __m512 nan = _mm512_castsi512_ps(_mm512_set1_epi32((int)BG_NAN));
  for (int r = 0; r < mr; r++) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, canon(acc0[r], nan));
    if (two) _mm512_mask_storeu_ps(c + r * ldc + 16, m1, canon(acc1[r], nan));
  }
}

#define CASE(R) \
  case R: if (two) tile(R, 1, nr, P, a, lda, b, c, ldc); else tile(R, 0, nr, P, a, lda, b, c, ldc); break;
static void micro(int mr, int nr, int64_t P, const uint32_t *a, int64_t lda, const uint32_t *b, float *c,
                  int64_t ldc) {
  int two = nr > BG_NR;
  switch (mr) {
    CASE(8) CASE(7) CASE(6) CASE(5) CASE(4) CASE(3) CASE(2)
    default: if (two) tile(1, 1, nr, P, a, lda, b, c, ldc); else tile(1, 0, nr, P, a, lda, b, c, ldc);
  }
}

const bgemm_kernel ds_bgemm_avx512bf16 = { MR, 2 * BG_NR, micro };
