/* conv_direct.h: the contract between nn_conv.c's direct f32 convolution (stride 1) and its per-ISA kernels. */
#ifndef DS_CONV_DIRECT_H
#define DS_CONV_DIRECT_H
#include <stdint.h>
#include "conv_ep.h"

/* Every path works on logical vectors of 16 floats (one zmm, or two ymm on AVX2), so the lane a value falls in
   and each lane's FMA chain are the same on every ISA path: the same bits. */
#define CONV_LANES 16

/* The implicit GEMM of a convolution: c (rows x 16*nvec, row stride ldc) = a (rows x K, row stride lda) @ B,
   where B's row k is the 16*nvec floats at b + koff[k] (a shifted window of a padded image). rows is a
   multiple of tile_rows (the caller pads a and c with spare rows). Each c element is one FMA chain from +0
   over k in order, then + bias[row] (one add) when bias is not NULL, then the activation act (conv_ep.h's
   CONV_ACT_*: hardswish as el_hardswish_f32's ops) unless it is CONV_ACT_NONE. With half set (and act none), only
   the first 8 floats of the last vector are computed and written (the columns after them are not needed: MobileNet's
   6x6 maps, 36 columns in 2.5 vectors instead of 3). */
typedef void (*conv_rows_fn)(int64_t rows, int64_t nvec, int64_t K, const float *a, int64_t lda, const float *b,
                             const int64_t *koff, float *c, int64_t ldc, const float *bias, int act, int half);

/* The weight gradient's dot products, lane by lane, over nimg images (image i's d and b at d + i * dstride,
   b + i * bstride): for i < nimg, then v < nvec in order, for each r < rows, j < cols and lane l,
   acc[(r * cols + j) * 16 + l] = fma(d[r * ldd + 16 v + l], b[koff[j] + 16 v + l], acc[...]).
   rows is a multiple of dot_rows, cols of dot_cols (the caller pads with zero rows and repeated offsets). */
typedef void (*conv_dots_fn)(int64_t rows, int64_t cols, int64_t nimg, int64_t nvec, const float *d, int64_t ldd,
                             int64_t dstride, const float *b, int64_t bstride, const int64_t *koff, float *acc);

typedef struct {
  int tile_rows;          /* conv_rows: output rows per register tile */
  int dot_rows, dot_cols; /* conv_dots: the register tile */
  conv_rows_fn rows;
  conv_dots_fn dots;
} conv_kernel;

extern const conv_kernel ds_conv_avx2;     /* conv_direct_avx2.c */
extern const conv_kernel ds_conv_avx512;   /* conv_direct_avx512.c */
extern const conv_kernel ds_conv_avx512_r8;   /* conv_direct_avx512_r8.c: conv_rows in 8-row tiles, no conv_dots */
#endif
