/* conv_vec_avx512.h: the logical vector of the AVX-512 direct-convolution kernels (one zmm, 16 floats), shared by
   conv_direct_avx512.c and conv_direct_avx512_r8.c; include after the avx512 target pragma. */
#ifndef DS_CONV_VEC_AVX512_H
#define DS_CONV_VEC_AVX512_H
#include <immintrin.h>

typedef __m512 vec;
static inline vec vzero(void) { return _mm512_setzero_ps(); }
static inline vec vset1(float x) { return _mm512_set1_ps(x); }
static inline vec vload(const float *p) { return _mm512_loadu_ps(p); }
static inline void vstore(float *p, vec v) { _mm512_storeu_ps(p, v); }
static inline vec vfma(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }
static inline vec vadd(vec a, vec b) { return _mm512_add_ps(a, b); }
static inline __m256 vlow(vec v) { return _mm512_castps512_ps256(v); }
/* el_hardswish_f32 (x * clamp(x + 3, 0, 6) / 6), the clamp as max(0, .) then min(6, .) (the same values as its
   selects: max/min return the second operand on NaN and on equal zeros), then the multiply and the divide */
static inline vec vhardswish(vec x) {
  const vec six = _mm512_set1_ps(6.0f);
  vec y = _mm512_min_ps(six, _mm512_max_ps(_mm512_setzero_ps(), _mm512_add_ps(x, _mm512_set1_ps(3.0f))));
  return _mm512_div_ps(_mm512_mul_ps(x, y), six);
}
#endif
