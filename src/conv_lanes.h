/* conv_lanes.h: the contract between conv_lanes.c (f32 convolutions with 16 images along the lanes) and its per-ISA
   kernels (conv_lanes_avx512.c, conv_lanes_avx2.c). */
#ifndef DS_CONV_LANES_H
#define DS_CONV_LANES_H
#include <stdint.h>
#include "conv_ep.h"

/* One output channel tile of one block of 16 images: for i < rows (at most tile_rows), each of the npix output
   pixels p, and lane l, ob[i * ldo + 16 p + l] = the FMA chain from +0 over k < K in order of
   fma(w[k * tile_rows + i], xb[poff[p] + koff[k] + l], .), then + bias[i] (one add) when bias is not NULL, then
   act (CONV_ACT_NONE, _RELU or _HARDSWISH as el_relu_f32 / el_hardswish_f32 per lane). xb, poff and koff in floats,
   multiples of 16, xb 64-byte aligned. */
typedef void (*lanes_conv_fn)(int64_t rows, int64_t npix, int64_t K, const float *w, const float *xb,
                              const int64_t *koff, const int64_t *poff, float *ob, int64_t ldo, const float *bias,
                              int act);

/* dst[j * ldd + i] = src[i * lds + j] for j < sr, i < sc: a 16 x 16 block transposed, src's rows i >= nr and columns
   j >= nc read as zeros (not read); sr, sc, nr, nc in 0 .. 16 */
typedef void (*lanes_transpose_fn)(const float *src, int64_t lds, int nr, int nc, float *dst, int64_t ldd, int sr,
                                   int sc);

typedef struct {
  int tile_rows;   /* output channels of a register tile */
  lanes_conv_fn conv;
  lanes_transpose_fn transpose;
} lanes_kernel;

extern const lanes_kernel ds_lanes_avx512;   /* conv_lanes_avx512.c */
extern const lanes_kernel ds_lanes_avx2;     /* conv_lanes_avx2.c */
#endif
