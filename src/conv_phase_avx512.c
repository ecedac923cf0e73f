/* conv_phase_avx512.c: the stride-2 column split of conv_phase.c's f32 phase rows on AVX-512: 16 even and 16 odd
   input columns a step, de-interleaved by two-source permutes (copies only: the same values on every path). */
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma")
#include "internal.h"
#include "nn_conv.h"
#include <immintrin.h>

int64_t conv_deint2_avx512(float *e, float *o, const float *s, int64_t n) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    __m512 lo = _mm512_loadu_ps(s + 2 * k), hi = _mm512_loadu_ps(s + 2 * k + 16);
    _mm512_storeu_ps(e + k, _mm512_permutex2var_ps(lo, even, hi));
    _mm512_storeu_ps(o + k, _mm512_permutex2var_ps(lo, odd, hi));
  }
  return k;
}
