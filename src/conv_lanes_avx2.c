/* conv_lanes_avx2.c: the 16-images-along-the-lanes convolution kernel on AVX2+FMA (a logical vector is two ymm). */
#pragma GCC target("avx2,fma")
#include "conv_lanes.h"
#include <immintrin.h>

typedef struct { __m256 lo, hi; } vec;
static inline vec vzero(void) { return (vec){ _mm256_setzero_ps(), _mm256_setzero_ps() }; }
static inline vec vset1(float x) { __m256 s = _mm256_set1_ps(x); return (vec){ s, s }; }
static inline vec vload(const float *p) { return (vec){ _mm256_load_ps(p), _mm256_load_ps(p + 8) }; }
static inline void vstore(float *p, vec v) { _mm256_store_ps(p, v.lo); _mm256_store_ps(p + 8, v.hi); }
static inline vec vfma(vec a, vec b, vec c) {
  return (vec){ _mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi) };
}
static inline vec vadd(vec a, vec b) { return (vec){ _mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi) }; }
/* el_relu_f32 per lane: x < 0 ? +0 : x (NaN and -0.0 stay) */
static inline __m256 relu8(__m256 x) {
  return _mm256_blendv_ps(x, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
}
static inline vec vrelu(vec x) { return (vec){ relu8(x.lo), relu8(x.hi) }; }
/* el_hardswish_f32 as conv_vec_avx512.h's vhardswish, per ymm */
static inline __m256 hswish8(__m256 x) {
  const __m256 six = _mm256_set1_ps(6.0f);
  __m256 y = _mm256_min_ps(six, _mm256_max_ps(_mm256_setzero_ps(), _mm256_add_ps(x, _mm256_set1_ps(3.0f))));
  return _mm256_div_ps(_mm256_mul_ps(x, y), six);
}
static inline vec vhardswish(vec x) { return (vec){ hswish8(x.lo), hswish8(x.hi) }; }

#define LANES_ROWS 6   /* 6 x 2 ymm accumulators + 2 pixel ymm + 1 broadcast */
#define LANES_PIX 1
#include "conv_lanes_kernels.h"

static void transpose(const float *src, int64_t lds, int nr, int nc, float *dst, int64_t ldd, int sr, int sc) {
  for (int j = 0; j < sr; j++)
    for (int i = 0; i < sc; i++) dst[j * ldd + i] = i < nr && j < nc ? src[i * lds + j] : 0.0f;
}

const lanes_kernel ds_lanes_avx2 = { LANES_ROWS, lanes_conv, transpose };
