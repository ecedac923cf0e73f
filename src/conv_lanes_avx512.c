/* conv_lanes_avx512.c: the 16-images-along-the-lanes convolution kernel on AVX-512 (a logical vector is one zmm). */
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma")
#include "conv_lanes.h"
#include "conv_vec_avx512.h"

/* el_relu_f32 per lane: x < 0 ? +0 : x (NaN and -0.0 stay) */
static inline vec vrelu(vec x) { return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, vzero(), _CMP_NLT_UQ), x); }

#define LANES_ROWS 6   /* 6 x 4 zmm accumulators + 4 pixel vectors + 1 broadcast */
#define LANES_PIX 4
#include "conv_lanes_kernels.h"

/* r[j] = column j of the 16 x 16 block whose row i is r[i]: pairs, then quads within 128-bit lanes, then lanes */
static inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; i++)   /* r[4i + c], lane q: rows 4i .. 4i+3 of column 4q + c */
    for (int h = 0; h < 2; h++) {
      __m512d a = _mm512_castps_pd(t[4 * i + h]), b = _mm512_castps_pd(t[4 * i + h + 2]);
      r[4 * i + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      r[4 * i + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  for (int c = 0; c < 4; c++) {
    __m512 u0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88), u1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);
    __m512 v0 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88), v1 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
    t[c] = _mm512_shuffle_f32x4(u0, v0, 0x88);
    t[8 + c] = _mm512_shuffle_f32x4(u0, v0, 0xdd);
    t[4 + c] = _mm512_shuffle_f32x4(u1, v1, 0x88);
    t[12 + c] = _mm512_shuffle_f32x4(u1, v1, 0xdd);
  }
  for (int i = 0; i < 16; i++) r[i] = t[i];
}

static void transpose(const float *src, int64_t lds, int nr, int nc, float *dst, int64_t ldd, int sr, int sc) {
  __m512 r[16];
  __mmask16 lm = (__mmask16)((1u << nc) - 1), sm = (__mmask16)((1u << sc) - 1);
  for (int i = 0; i < 16; i++) r[i] = i < nr ? _mm512_maskz_loadu_ps(lm, src + i * lds) : _mm512_setzero_ps();
  transpose16(r);
  for (int j = 0; j < sr; j++) _mm512_mask_storeu_ps(dst + j * ldd, sm, r[j]);
}

const lanes_kernel ds_lanes_avx512 = { LANES_ROWS, lanes_conv, transpose };
