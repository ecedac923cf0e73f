/* conv_lanes_avx2.c: the 16-images-along-the-lanes convolution kernel on AVX2+FMA (a logical vector is two ymm). */
#pragma GCC target("avx2,fma")
#include "conv_lanes.h"
#include "conv_vec_avx2.h"

/* el_relu_f32 per lane: x < 0 ? +0 : x (NaN and -0.0 stay) */
static inline __m256 relu8(__m256 x) {
  return _mm256_blendv_ps(x, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
}
static inline vec vrelu(vec x) { return (vec){ relu8(x.lo), relu8(x.hi) }; }

#define LANES_ROWS 6   /* 6 x 2 ymm accumulators + 2 pixel ymm + 1 broadcast */
#define LANES_PIX 1
#include "conv_lanes_kernels.h"

/* lanes [0, n) of 8 set (n clamped to 0 .. 8): a maskload / maskstore mask */
static inline __m256i lanes8(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n < 0 ? 0 : n > 8 ? 8 : n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* r[j] = column j of the 8 x 8 block whose row i is r[i] */
static inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int h = 0; h < 2; h++)
    for (int i = 0; i < 2; i++) {
      u[4 * h + 2 * i] = _mm256_shuffle_ps(t[4 * h + i], t[4 * h + i + 2], 0x44);
      u[4 * h + 2 * i + 1] = _mm256_shuffle_ps(t[4 * h + i], t[4 * h + i + 2], 0xee);
    }
  for (int i = 0; i < 4; i++) {
    r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
    r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
  }
}

/* the 16 x 16 block as four 8 x 8 ones, loads and stores masked to the block's columns */
static void transpose(const float *src, int64_t lds, int nr, int nc, float *dst, int64_t ldd, int sr, int sc) {
  for (int bj = 0; bj < 16 && bj < sr; bj += 8)
    for (int bi = 0; bi < 16 && bi < sc; bi += 8) {
      __m256 r[8];
      __m256i lm = lanes8(nc - bj), sm = lanes8(sc - bi);
      for (int i = 0; i < 8; i++)
        r[i] = bi + i < nr ? _mm256_maskload_ps(src + (bi + i) * lds + bj, lm) : _mm256_setzero_ps();
      transpose8(r);
      for (int j = 0; j < 8 && bj + j < sr; j++) _mm256_maskstore_ps(dst + (bj + j) * ldd + bi, sm, r[j]);
    }
}

const lanes_kernel ds_lanes_avx2 = { LANES_ROWS, lanes_conv, transpose };
