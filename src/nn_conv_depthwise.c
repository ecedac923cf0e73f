/* nn_conv_depthwise.c: the forward pass of depthwise convolutions (one input channel per group: MobileNet's
   3x3 and 5x5 convs, any stride, padding, dilation, channel multiplier) as plane-by-plane FMA chains over the
   kernel's taps, in the order (kh, kw) from zero, then + bias: the same chain per element as im2col + GEMM, so
   the same bits, without a GEMM call per channel. f32 planes at stride 1, and 3x3 at stride 2, come straight from
   the input plane (conv_dw_direct.c; small stride-1 planes 4 at once on AVX-512, conv_dw_small_avx512.c);
   otherwise each input plane is split by stride phase (conv_phase.c), so every tap's window is one contiguous run
   over the wide output rows. */
#include "internal.h"
#include "nn_conv.h"
#include <math.h>
#include <omp.h>

/* above this many multiply-adds (planes * OH * OW * taps) the planes are shared among the threads (was 5e4: a
   MobileNet-style export's 16 x 24x24 stride-2 planes, 8e4 in ~6 us, gained nothing from a region on the busy
   2-vCPU VM; see nn_conv_direct.c's SPLIT_MIN) */
#define DW_PAR_MIN 5e5
/* the epilogue runs on at most this many output elements at a time (cache-hot) */
#define DW_EP_RUN 8192

/* one depthwise convolution's plan: the phase geometry, the taps' window offsets, the output plane, whether a
   plane is computed as one run over its wide rows (at most 50% extra columns) or row by row */
typedef struct {
  phase_geom p;
  const int64_t *koff;
  int64_t taps, OH, OW, blen, wide;
} dw_plan;

/* a plane straight from the input plane where conv_dw_direct.c takes the geometry (f32; 2: act applied too); f64
   takes the phase planes */
static int dw_direct_f32(const geom *g, const float *x, const float *w, float bias, float *y, int act) {
  return conv_dw_direct_f32(g, x, w, bias, y, act);
}
static int dw_direct_f64(const geom *g, const double *x, const double *w, double bias, double *y, int act) {
  return 0;
}
/* np small planes from p at once (conv_dw_small_avx512.c, f32 on the AVX-512 path): 1 when done */
static int dw_small_f32(const geom *g, const float *x, const float *w, const float *b, float *y, int64_t p,
                        int64_t np) {
  return ds_isa() == DS_ISA_AVX512 && conv_dw_small_avx512(g, x, w, b, y, p, np);
}
static int dw_small_f64(const geom *g, const double *x, const double *w, const double *b, double *y, int64_t p,
                        int64_t np) {
  return 0;
}

#define FMA(a, b, c) _Generic((a), float: fmaf, default: fma)(a, b, c)
#define KERNELS "nn_conv_depthwise_kernels.h"
#include "float_kernels.h"
