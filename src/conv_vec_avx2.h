/* conv_vec_avx2.h: the logical vector of the AVX2 convolution kernels (two ymm, 16 floats), shared by
   conv_direct_avx2.c and conv_lanes_avx2.c; include after the avx2 target pragma. */
#ifndef DS_CONV_VEC_AVX2_H
#define DS_CONV_VEC_AVX2_H
#include <immintrin.h>

typedef struct { __m256 lo, hi; } vec;
static inline vec vzero(void) { return (vec){ _mm256_setzero_ps(), _mm256_setzero_ps() }; }
static inline vec vset1(float x) { __m256 s = _mm256_set1_ps(x); return (vec){ s, s }; }
static inline vec vload(const float *p) { return (vec){ _mm256_loadu_ps(p), _mm256_loadu_ps(p + 8) }; }
static inline void vstore(float *p, vec v) { _mm256_storeu_ps(p, v.lo); _mm256_storeu_ps(p + 8, v.hi); }
static inline vec vfma(vec a, vec b, vec c) {
  return (vec){ _mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi) };
}
static inline vec vadd(vec a, vec b) { return (vec){ _mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi) }; }
static inline __m256 vlow(vec v) { return v.lo; }
/* el_hardswish_f32 as conv_vec_avx512.h's vhardswish, per ymm */
static inline __m256 hswish8(__m256 x) {
  const __m256 six = _mm256_set1_ps(6.0f);
  __m256 y = _mm256_min_ps(six, _mm256_max_ps(_mm256_setzero_ps(), _mm256_add_ps(x, _mm256_set1_ps(3.0f))));
  return _mm256_div_ps(_mm256_mul_ps(x, y), six);
}
static inline vec vhardswish(vec x) { return (vec){ hswish8(x.lo), hswish8(x.hi) }; }
#endif
