/* elementwise_avx512.c: AVX-512 builds of the contiguous f32 unary loops (exp, tanh, gelu, ...): the same
   el_<op>_f32 functions (elementwise_ops.h) at 16 lanes. They use IEEE operations and explicit fma only
   (no contraction: -ffp-contract=off), so they give the AVX2 loops' bits; tests/mathfn_spec.lua checks it. */
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma")
#include "elementwise_ops.h"
#include "elementwise_table.h"

/* one loop per f32 unary row of elementwise.def */
#define WIDE_LOOP_f32(OP) \
  static void wide_##OP(float *o, const float *a, int64_t n) { \
    for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_f32(a[i]); \
  }
#define WIDE_ENTRY_f32(OP) [EW_OP_##OP] = wide_##OP,
#define WIDE_LOOP_EW_UNARY(OP, S, T) WIDE_LOOP_##S(OP)
#define WIDE_ENTRY_EW_UNARY(OP, S, T) WIDE_ENTRY_##S(OP)
#define WIDE_f64(OP)
#define WIDE_i64(OP)
#define WIDE_i32(OP)
#define WIDE_u8(OP)
#define WIDE_bool(OP)
#define WIDE_LOOP_f64 WIDE_f64
#define WIDE_LOOP_i64 WIDE_i64
#define WIDE_LOOP_i32 WIDE_i32
#define WIDE_LOOP_u8 WIDE_u8
#define WIDE_LOOP_bool WIDE_bool
#define WIDE_ENTRY_f64 WIDE_f64
#define WIDE_ENTRY_i64 WIDE_i64
#define WIDE_ENTRY_i32 WIDE_i32
#define WIDE_ENTRY_u8 WIDE_u8
#define WIDE_ENTRY_bool WIDE_bool
#define WIDE_LOOP_OTHER(OP, S, T)
#define WIDE_LOOP_EW_PARAM WIDE_LOOP_OTHER
#define WIDE_LOOP_EW_BINARY WIDE_LOOP_OTHER
#define WIDE_LOOP_EW_COMPARE WIDE_LOOP_OTHER
#define WIDE_LOOP_EW_WHERE WIDE_LOOP_OTHER
#define WIDE_LOOP_EW_CAST WIDE_LOOP_OTHER
#define WIDE_ENTRY_EW_PARAM WIDE_LOOP_OTHER
#define WIDE_ENTRY_EW_BINARY WIDE_LOOP_OTHER
#define WIDE_ENTRY_EW_COMPARE WIDE_LOOP_OTHER
#define WIDE_ENTRY_EW_WHERE WIDE_LOOP_OTHER
#define WIDE_ENTRY_EW_CAST WIDE_LOOP_OTHER

#define EW(name, kind, dtypes, cost, flags) dtypes(WIDE_LOOP_##kind, name)
#include "elementwise.def"
#undef EW

static const ew_f32_loop wide[EW_OP_COUNT] = {
#define EW(name, kind, dtypes, cost, flags) dtypes(WIDE_ENTRY_##kind, name)
#include "elementwise.def"
#undef EW
};

ew_f32_loop ds_ew_wide_f32(int op) {
  return ds_isa() == DS_ISA_AVX512 && op >= 0 && op < EW_OP_COUNT ? wide[op] : NULL;
}
