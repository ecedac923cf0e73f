/* nn_conv.h: the geometry nn_conv.c checks for every conv kernel, the direct f32 path it hands stride-1
   convolutions to (nn_conv_direct.c) and the depthwise path (nn_conv_depthwise.c). */
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

/* Parallelize over images when there are several and the work is well above a parallel region's cost. */
static inline int conv_worth_parallel(const geom *g) {
  return g->N > 1 && (double)g->N * (double)g->OC * (double)g->ohw * (double)g->ckk > 5e5;
}

/* The direct path (f32, stride 1, the wide layout): each kernel returns DS_OK or an error, or
   CONV_NOT_DIRECT before doing anything when it does not take this geometry (decided from the shapes only,
   never from N or the thread count, so a geometry always gives the same bits). */
#define CONV_NOT_DIRECT 1
/* y (N,OC,OH,OW) = conv(x, w) + b: the same FMA chain per element as im2col + GEMM, so the same bits; ep (or
   NULL) is called on each (image, group) block written */
int conv_direct_forward(const geom *g, const float *x, const float *w, const float *b, float *y, const conv_ep *ep);
/* gx (N,C,H,W): a direct convolution of the padded gy with the flipped, transposed weights */
int conv_direct_backward_input(const geom *g, const float *gy, const float *w, float *gx);
/* gw (OC,Cg,KH,KW): lane-wise dot products over fixed runs of images, runs added in order, then the lanes */
int conv_direct_backward_weight(const geom *g, const float *gy, const float *x, float *gw);
/* y (N,OC,OH,OW) = conv(x, w) + b for depthwise geometries (Cg == 1, G > 1), any stride: nn_conv_depthwise.c;
   ep (or NULL) is called on each plane written */
int conv_depthwise_forward_f32(const geom *g, const float *x, const float *w, const float *b, float *y,
                               const conv_ep *ep);
int conv_depthwise_forward_f64(const geom *g, const double *x, const double *w, const double *b, double *y,
                               const conv_ep *ep);
#endif
