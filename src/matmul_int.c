/* matmul_int.c: integer matmul (i64, i32, u8) keeping the dtype, as PyTorch does: wrapping arithmetic,
   each element summed over k in order; batch dims broadcast (size-1 or missing dims of an operand repeat). */
#include "internal.h"

#define KERNELS "matmul_int_kernels.h"
#define KERNEL_DTYPES (KD_I64 | KD_I32 | KD_U8)
#include "all_kernels.h"
