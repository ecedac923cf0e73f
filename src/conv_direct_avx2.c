/* conv_direct_avx2.c: the direct convolution kernels on AVX2+FMA (a logical vector is two ymm). */
#pragma GCC target("avx2,fma")
#include "conv_direct.h"
#include "conv_vec_avx2.h"
#define VKEEP(v) __asm__("" : "+x"((v).lo), "+x"((v).hi))

#define TILE_ROWS 6   /* 6 x 2 ymm accumulators + 2 B + 1 broadcast */
#define TILE_NV 1
#define DOT_ROWS 1    /* 5 x 2 ymm accumulators + 2 d + 2 B */
#define DOT_COLS 5
#include "conv_direct_kernels.h"

const conv_kernel ds_conv_avx2 = { TILE_ROWS, DOT_ROWS, DOT_COLS, conv_rows, conv_dots };
