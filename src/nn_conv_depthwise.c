/* nn_conv_depthwise.c: the forward pass of depthwise convolutions (one input channel per group: MobileNet's
   3x3 and 5x5 convs, any stride, padding, dilation, channel multiplier) as plane-by-plane FMA chains over the
   kernel's taps, in the order (kh, kw) from zero, then + bias: the same chain per element as im2col + GEMM, so
   the same bits, without a GEMM call per channel. Each input plane is split by stride phase (conv_phase.c), so
   every tap's window is one contiguous run over the wide output rows. */
#include "internal.h"
#include "nn_conv.h"
#include <math.h>
#include <omp.h>
#include <immintrin.h>

/* above this many multiply-adds (planes * OH * OW * taps) the planes are shared among the threads */
#define DW_PAR_MIN 5e4
/* the epilogue runs on at most this many output elements at a time (cache-hot) */
#define DW_EP_RUN 8192

/* one depthwise convolution's plan: the phase geometry, the taps' window offsets, the output plane, whether a
   plane is computed as one run over its wide rows (at most 50% extra columns) or row by row */
typedef struct {
  phase_geom p;
  const int64_t *koff;
  int64_t taps, OH, OW, blen, wide;
  int s2k3;   /* 3x3, stride 2, padding 1, dilation 1: dw3x3s2 where the dtype has it */
} dw_plan;

/* lanes [0, n) of 8 set (n clamped to 0..8): the mask of _mm256_maskload_ps */
static inline __m256i lanes8(int64_t n) {
  __m256i n8 = _mm256_set1_epi32((int)(n < 0 ? 0 : n > 8 ? 8 : n));
  return _mm256_cmpgt_epi32(n8, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* One f32 plane of a 3x3 depthwise conv at stride 2, padding 1, dilation 1 (MobileNet's downsampling conv): y (OH,
   OW) straight from the input plane x (H, W), 8 outputs at a time, the input row's even and odd columns
   de-interleaved in registers (no phase planes). The same chain per value as depthwise_plane: the taps (kh, kw) in
   order from zero, padding taps multiplying zeros, then + bias. */
static void dw3x3s2_plane(const float *x, int64_t H, int64_t W, const float *w, float bias, float *y, int64_t OH,
                          int64_t OW) {
  __m256 wk[9];
  for (int k = 0; k < 9; k++) wk[k] = _mm256_set1_ps(w[k]);
  const __m256i back = _mm256_setr_epi32(7, 0, 1, 2, 3, 4, 5, 6);
  for (int64_t oh = 0; oh < OH; oh++)
    for (int64_t ow0 = 0; ow0 < OW; ow0 += 8) {
      int64_t c0 = 2 * ow0;   /* the input column of output ow0's centre tap */
      __m256 acc = _mm256_setzero_ps();
      for (int kh = 0; kh < 3; kh++) {
        int64_t h = 2 * oh - 1 + kh;
        __m256 a = _mm256_setzero_ps(), b = a, c = a;   /* columns 2 ow - 1, 2 ow, 2 ow + 1 */
        if (h >= 0 && h < H) {
          const float *r = x + h * W;
          __m256 lo = _mm256_maskload_ps(r + c0, lanes8(W - c0)), hi = _mm256_maskload_ps(r + c0 + 8, lanes8(W - c0 - 8));
          b = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xd8));
          c = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xdd)), 0xd8));
          a = _mm256_blend_ps(_mm256_permutevar8x32_ps(c, back), _mm256_set1_ps(c0 > 0 ? r[c0 - 1] : 0.0f), 1);
        }
        acc = _mm256_fmadd_ps(wk[3 * kh], a, acc);
        acc = _mm256_fmadd_ps(wk[3 * kh + 1], b, acc);
        acc = _mm256_fmadd_ps(wk[3 * kh + 2], c, acc);
      }
      float out[8], *d = y + oh * OW + ow0;
      _mm256_storeu_ps(out, _mm256_add_ps(acc, _mm256_set1_ps(bias)));
      for (int64_t i = 0; i < 8 && ow0 + i < OW; i++) d[i] = out[i];
    }
}
/* the kernel of a dtype for the 3x3 stride-2 case: f32's, or none (f64 takes the phase planes) */
static int dw3x3s2_f32(const geom *g, const float *x, const float *w, float bias, float *y) {
  dw3x3s2_plane(x, g->H, g->W, w, bias, y, g->OH, g->OW);
  return 1;
}
static int dw3x3s2_f64(const geom *g, const double *x, const double *w, double bias, double *y) { return 0; }

#define FMA(a, b, c) _Generic((a), float: fmaf, default: fma)(a, b, c)
#define KERNELS "nn_conv_depthwise_kernels.h"
#include "float_kernels.h"
