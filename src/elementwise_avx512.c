/* elementwise_avx512.c: AVX-512 builds of the contiguous f32 unary loops (exp, tanh, gelu, ...): the same
   el_<op>_f32 functions (elementwise_ops.h) at 16 lanes. They use IEEE operations and explicit fma only
   (no contraction: -ffp-contract=off), so they give the AVX2 loops' bits; tests/mathfn_spec.lua checks it. */
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma")
#include "elementwise_ops.h"
#include "elementwise_table.h"
#include <immintrin.h>

/* gelu over blocks of GELU_BLOCK values: the inputs with |x| >= 0.85 or NaN packed together (compress) and their
   lane masks kept, the cheap half (ds_gelu_smallf) on every value, the tail half (ds_gelu_tailf) on the packed
   inputs only (whole vectors, zeros after the last), its results expanded back into their lanes; each value gets
   ds_geluf's result (o may be a: a block's inputs are read before any of its outputs is written). The tail costs
   ~4x the small half, and most activations are small. 1024 values: ~12 KB with the packed buffers, within L1. */
#define GELU_BLOCK 1024
static void wide_gelu_split(float *o, const float *a, int64_t n) {
  float xs[GELU_BLOCK + 16], ys[GELU_BLOCK + 16];
  __mmask16 ks[GELU_BLOCK / 16];
  const __m512 lim = _mm512_set1_ps(0.85f);
  for (int64_t b = 0; b < n; b += GELU_BLOCK) {
    int64_t m = n - b < GELU_BLOCK ? n - b : GELU_BLOCK, nt = 0;
    float *ob = o + b;
    const float *ab = a + b;
    for (int64_t i = 0; i < m; i += 16) {
      __mmask16 in = m - i >= 16 ? 0xffff : (__mmask16)((1u << (m - i)) - 1);
      __m512 x = _mm512_maskz_loadu_ps(in, ab + i);
      __mmask16 k = _mm512_mask_cmp_ps_mask(in, _mm512_abs_ps(x), lim, _CMP_NLT_UQ);
      _mm512_storeu_ps(xs + nt, _mm512_maskz_compress_ps(k, x));
      ks[i / 16] = k;
      nt += __builtin_popcount(k);
    }
    _mm512_storeu_ps(xs + nt, _mm512_setzero_ps());
    for (int64_t i = 0; i < m; i++) ob[i] = ds_gelu_smallf(ab[i]);
    for (int64_t j = 0; j < ((nt + 15) & ~15); j++) ys[j] = ds_gelu_tailf(xs[j]);
    for (int64_t i = 0, j = 0; j < nt; i += 16) {
      __mmask16 k = ks[i / 16];
      if (!k) continue;
      _mm512_mask_storeu_ps(ob + i, k, _mm512_maskz_expand_ps(k, _mm512_loadu_ps(ys + j)));
      j += __builtin_popcount(k);
    }
  }
}

/* hardswish (swish = 1), hardsigmoid: el_clamp_f32(x + 3, 0, 6) as vmaxps(0, x + 3) then vminps(6, .): the same
   values as its two selects (max/min return the second operand on NaN and on equal zeros, as the selects keep
   x), in 2 ops where the compiler emits 3 compares and 2 blends; then the same multiply and divide by 6 */
static void wide_hard(float *o, const float *a, int64_t n, int swish) {
  const __m512 three = _mm512_set1_ps(3.0f), zero = _mm512_setzero_ps(), six = _mm512_set1_ps(6.0f);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 k = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
    __m512 x = _mm512_maskz_loadu_ps(k, a + i);
    __m512 y = _mm512_min_ps(six, _mm512_max_ps(zero, _mm512_add_ps(x, three)));
    _mm512_mask_storeu_ps(o + i, k, _mm512_div_ps(swish ? _mm512_mul_ps(x, y) : y, six));
  }
}

/* one loop per f32 unary row of elementwise.def (gelu's: the split above; hardswish's, hardsigmoid's: wide_hard) */
#define WIDE_LOOP_f32(OP) \
  static void wide_##OP(float *o, const float *a, int64_t n) { \
    if (EW_OP_##OP == EW_OP_gelu) { wide_gelu_split(o, a, n); return; } \
    if (EW_OP_##OP == EW_OP_hardswish || EW_OP_##OP == EW_OP_hardsigmoid) { \
      wide_hard(o, a, n, EW_OP_##OP == EW_OP_hardswish); return; } \
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
