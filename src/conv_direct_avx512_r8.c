/* conv_direct_avx512_r8.c: conv_rows on AVX-512 in tiles of 8 output rows x 3 vectors, for row counts that 8
   divides and 6 does not (16, 40, 80 channels: no zero rows computed); conv_direct.h's ds_conv_avx512_r8. */
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma")
#include "conv_direct.h"
#include "conv_vec_avx512.h"

#define TILE_ROWS 8   /* 8 x 3 zmm accumulators + 3 B vectors + 1 broadcast */
#define TILE_NV 3
#define CONV_ROWS_ONLY
#include "conv_direct_kernels.h"

const conv_kernel ds_conv_avx512_r8 = { TILE_ROWS, 0, 0, conv_rows, NULL };
