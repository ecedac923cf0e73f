/* nn_conv.h: the geometry nn_conv.c checks for every conv kernel, the direct f32 path it hands convolutions to
   (nn_conv_direct.c), the depthwise path (nn_conv_depthwise.c) and the stride-phase planes both read
   (conv_phase.c). */
#ifndef DS_NN_CONV_H
#define DS_NN_CONV_H
#include <stdint.h>
#include "conv_ep.h"

typedef struct {
  int64_t N, C, H, W, OC, Cg, OCg, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, G;
  int64_t ckk, ohw, hw; /* rows of the column matrix (Cg*KH*KW), output and input plane sizes */
  /* wide layout (stride 1): columns run over OH rows of the padded width Wp (the extra Wp - OW
     columns are computed and dropped), so each column row is one contiguous run of a padded copy
     of the image (xpad elements). Otherwise L = ohw and xpad = 0. */
  int64_t wide, Hp, Wp, L, xpad;
} geom;

/* An image's C planes (H, W) placed at (top, left) in zero-bordered planes (Hp, Wp) and split by stride phase
   into C * sh * sw planes (Hq, Wq) (conv_phase.c): a window of a convolution with strides (sh, sw) is then one
   contiguous run over the wide output (OH rows of Wq, the columns past OW dropped). Stride 1: the padded planes.
   Column planes (kx > 0, row stride 1 only): C * kx planes (Hq = Hp, Wq = OW), plane (c, kw) holding padded
   column ow * sw + kw * kdw at column ow: every window is then one run over the output itself (no dropped
   columns), for kx times the copy. */
typedef struct { int64_t C, H, W, top, left, sh, sw, Hq, Wq, plane, kx, kdw; } phase_geom;
void conv_phase_init(phase_geom *p, int64_t C, int64_t H, int64_t W, int64_t top, int64_t left, int64_t Hp,
                     int64_t Wp, int64_t sh, int64_t sw);
/* column planes of a KW-wide kernel (column stride sw, dilation dw) with OW output columns */
void conv_phase_init_cols(phase_geom *p, int64_t C, int64_t H, int64_t W, int64_t top, int64_t left, int64_t Hp,
                          int64_t OW, int64_t KW, int64_t sw, int64_t dw);
/* koff[(c * KH + kh) * KW + kw] = where window (c, kh, kw) of output (0, 0) starts in the phase planes */
void conv_phase_offsets(const phase_geom *p, int64_t KH, int64_t KW, int64_t dh, int64_t dw, int64_t *koff);
/* elements of a phase buffer from which each of the K windows can be read for span elements */
int64_t conv_phase_len(const phase_geom *p, const int64_t *koff, int64_t K, int64_t span);
/* 1 when a phase buffer of len elements equals the image (the planes need no copy) */
int conv_phase_is_image(const phase_geom *p, int64_t len);
/* dst (len elements) = the phase planes of the image at x, zeros after them */
void conv_phases_f32(const phase_geom *p, const float *x, float *dst, int64_t len);
void conv_phases_f64(const phase_geom *p, const double *x, double *dst, int64_t len);
/* part `part` of `parts` of conv_phases_f32 (the phase rows [Hq * part / parts, Hq * (part + 1) / parts) of every
   plane and that share of the zeros after them; column planes all in part 0): the parts together write it all */
void conv_phases_part_f32(const phase_geom *p, const float *x, float *dst, int64_t len, int part, int parts);
/* e[k] = s[2k], o[k] = s[2k + 1] for k below n rounded down to 16, on AVX-512 (conv_phase_avx512.c): that count */
int64_t conv_deint2_avx512(float *e, float *o, const float *s, int64_t n);

/* Parallelize over images when there are several and the work is well above a parallel region's cost. */
static inline int conv_worth_parallel(const geom *g) {
  return g->N > 1 && (double)g->N * (double)g->OC * (double)g->ohw * (double)g->ckk > 5e5;
}

/* The direct path (f32; the forward pass at any stride, the gradients at stride 1; wide layouts with at most 50%
   extra columns, K = Cg*KH*KW up to a bound): each kernel returns DS_OK or an error, or
   CONV_NOT_DIRECT before doing anything when it does not take this geometry (decided from the shapes, never from
   the thread count; every path computes each value's same FMA chain, so the choice never changes the bits).
   Negative: never a ds_status, so an error (DS_EINVAL is 1) is never taken for "not taken". */
#define CONV_NOT_DIRECT (-1)
/* y (N,OC,OH,OW) = conv(x, w) + b: the same FMA chain per element as im2col + GEMM, so the same bits; ep (or
   NULL) is called on each (image, group) block written */
int conv_direct_forward(const geom *g, const float *x, const float *w, const float *b, float *y, const conv_ep *ep);
/* gx (N,C,H,W): a direct convolution of the padded gy with the flipped, transposed weights */
int conv_direct_backward_input(const geom *g, const float *gy, const float *w, float *gx);
/* gw (OC,Cg,KH,KW): lane-wise dot products over fixed runs of images, runs added in order, then the lanes */
int conv_direct_backward_weight(const geom *g, const float *gy, const float *x, float *gw);
/* The lanes path (conv_lanes.c, f32, N >= 16): 16 images along the lanes of each vector. conv_lanes_takes: 1 when it
   takes g (from the shapes and N). conv_lanes_forward: y = conv(x, w) + b (b may be NULL; the direct path's FMA
   chain, so the same bits), then act (CONV_ACT_*), then, when pool is not NULL, that pooling per (image, channel)
   plane (y (N, OC, PH, PW)); ep (or NULL) is called on each block of images written; CONV_NOT_DIRECT before doing
   anything when it does not take g */
int conv_lanes_takes(const geom *g);
int conv_lanes_forward(const geom *g, const float *x, const float *w, const float *b, float *y, int act,
                       const conv_pool *pool, const conv_ep *ep);
/* conv2d (t = out (N, OC, PH, PW) pooled, x, w, b or NULL; attrs conv2d's) + b, then act (CONV_ACT_*), then pool,
   on the lanes path: CONV_NOT_DIRECT having written nothing when that does not take the geometry, else DS_OK or an
   error naming conv2d_pool */
int ds_conv2d_pool_lanes_f32(ds_tensor *const *t, const double *attrs, int act, const conv_pool *pool);
/* y (N,OC,OH,OW) = conv(x, w) + b for depthwise geometries (Cg == 1, G > 1), any stride: nn_conv_depthwise.c;
   ep (or NULL) is called on each plane written */
int conv_depthwise_forward_f32(const geom *g, const float *x, const float *w, const float *b, float *y,
                               const conv_ep *ep);
/* one f32 depthwise plane y (OH, OW) from its input plane x (H, W), taps w (KH*KW) and bias, straight from x
   (conv_dw_direct.c): returns 1, or 2 when it also applied the activation act (conv_ep.h's CONV_ACT_*: the AVX-512
   3x3 stride-2 plane does), or 0 when it does not take the geometry (strides other than 1, except 3x3 at stride 2
   with padding 1 and dilation 1) */
int conv_dw_direct_f32(const geom *g, const float *x, const float *w, float bias, float *y, int act);
/* its 3x3 stride-2 padding-1 plane on AVX-512 (conv_dw_direct_avx512.c), then act */
void conv_dw3x3s2_avx512(const geom *g, const float *x, const float *w, float bias, float *y, int act);
/* planes [p, p + np) (np <= DW_SMALL_PLANES) of y (N * OC planes) at once, on AVX-512, for stride-1 planes whose
   outputs read at most 8 padded columns (conv_dw_small_avx512.c): returns 1, or 0 when it does not take them */
#define DW_SMALL_PLANES 4
int conv_dw_small_avx512(const geom *g, const float *x, const float *w, const float *b, float *y, int64_t p,
                         int64_t np);
int conv_depthwise_forward_f64(const geom *g, const double *x, const double *w, const double *b, double *y,
                               const conv_ep *ep);
#endif
