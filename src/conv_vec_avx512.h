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
#endif
