/* conv_direct_avx512.c: the direct convolution kernels on AVX-512 (a logical vector is one zmm). */
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma")
#include "conv_direct.h"
#include "conv_vec_avx512.h"
#define VKEEP(v) __asm__("" : "+v"(v))

#define TILE_ROWS 6   /* 6 x 4 zmm accumulators + 4 B vectors + 1 broadcast */
#define TILE_NV 4
#define DOT_ROWS 3    /* 3 x 8 zmm accumulators + 3 d vectors + 1 B vector */
#define DOT_COLS 8
#include "conv_direct_kernels.h"

const conv_kernel ds_conv_avx512 = { TILE_ROWS, DOT_ROWS, DOT_COLS, conv_rows, conv_dots };
