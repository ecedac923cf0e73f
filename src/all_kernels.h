/* all_kernels.h: instantiates a kernel template once per computing dtype (f32, f64, i64, i32, u8, bool; bf16, f16
   and i8 are storage only, computed in f32/i32 by the dispatch), the all-dtype twin of float_kernels.h. Define
   KERNELS as the template's file name and, for a subset, KERNEL_DTYPES as an | of the KD_* bits below (all six
   when absent), then include this. The template sees T (element type), DT (dtype code), FN(name) (name##_f32,
   name##_i64, ...), NAME (the dtype's name, "f32", ...), FLOATING (1 for f32/f64, else 0; usable in #if), LOWEST
   and HIGHEST (the dtype's range: -INFINITY and INFINITY for floats, 0 and 1 for bool) and UT (T's unsigned twin
   for wrapping integer arithmetic, T itself for floats). all_kernels_one.h #undefs them after each instance; this
   file #undefs KERNELS and KERNEL_DTYPES at its end. */
#define KD_F32 1 /* 1 << the dtype code */
#define KD_F64 2
#define KD_I64 4
#define KD_I32 8
#define KD_U8 16
#define KD_BOOL 32
_Static_assert(KD_F32 == 1 << DS_F32 && KD_F64 == 1 << DS_F64 && KD_I64 == 1 << DS_I64 && KD_I32 == 1 << DS_I32 &&
               KD_U8 == 1 << DS_U8 && KD_BOOL == 1 << DS_BOOL, "all_kernels.h: KD_* bits follow ds.h's dtype codes");
#ifndef KERNEL_DTYPES
#define KERNEL_DTYPES (KD_F32 | KD_F64 | KD_I64 | KD_I32 | KD_U8 | KD_BOOL)
#endif
#if KERNEL_DTYPES & KD_F32
#define T float
#define DT DS_F32
#define FN(name) name##_f32
#define NAME "f32"
#define FLOATING 1
#define LOWEST (-INFINITY)
#define HIGHEST INFINITY
#define UT float
#include "all_kernels_one.h"
#endif
#if KERNEL_DTYPES & KD_F64
#define T double
#define DT DS_F64
#define FN(name) name##_f64
#define NAME "f64"
#define FLOATING 1
#define LOWEST (-INFINITY)
#define HIGHEST INFINITY
#define UT double
#include "all_kernels_one.h"
#endif
#if KERNEL_DTYPES & KD_I64
#define T int64_t
#define DT DS_I64
#define FN(name) name##_i64
#define NAME "i64"
#define FLOATING 0
#define LOWEST INT64_MIN
#define HIGHEST INT64_MAX
#define UT uint64_t
#include "all_kernels_one.h"
#endif
#if KERNEL_DTYPES & KD_I32
#define T int32_t
#define DT DS_I32
#define FN(name) name##_i32
#define NAME "i32"
#define FLOATING 0
#define LOWEST INT32_MIN
#define HIGHEST INT32_MAX
#define UT uint32_t
#include "all_kernels_one.h"
#endif
#if KERNEL_DTYPES & KD_U8
#define T uint8_t
#define DT DS_U8
#define FN(name) name##_u8
#define NAME "u8"
#define FLOATING 0
#define LOWEST 0
#define HIGHEST 255
#define UT uint8_t
#include "all_kernels_one.h"
#endif
#if KERNEL_DTYPES & KD_BOOL
#define T uint8_t
#define DT DS_BOOL
#define FN(name) name##_bool
#define NAME "bool"
#define FLOATING 0
#define LOWEST 0
#define HIGHEST 1
#define UT uint8_t
#include "all_kernels_one.h"
#endif
#undef KERNELS
#undef KERNEL_DTYPES
