/* nn_conv_depthwise.c: the forward pass of depthwise convolutions (one input channel per group: MobileNet's
   3x3 and 5x5 convs, any stride, padding, dilation, channel multiplier) as plane-by-plane FMA chains over the
   kernel's taps, in the order (kh, kw) from zero, then + bias: the same chain per element as im2col + GEMM, so
   the same bits, without a GEMM call per channel. */
#include "internal.h"
#include "nn_conv.h"
#include <math.h>
#include <omp.h>

#define FMA(a, b, c) _Generic((a), float: fmaf, default: fma)(a, b, c)
#define KERNELS "nn_conv_depthwise_kernels.h"
#include "float_kernels.h"
