/* elementwise_ops.h: the per-element code of every unary/binary op, one inline function each;
   eager kernels (elementwise.c) and fused chains (fused.c) both call exactly these. */
#ifndef DS_ELEMENTWISE_OPS_H
#define DS_ELEMENTWISE_OPS_H
#include "mathfn.h"

typedef uint8_t ds_bool;

/* ---- unary: float only (f32 uses mathfn.h, f64 uses libm) ---- */
static inline float el_exp_f32(float x) { return ds_expf(x); }
static inline double el_exp_f64(double x) { return exp(x); }
static inline float el_log_f32(float x) { return ds_logf(x); }
static inline double el_log_f64(double x) { return log(x); }
static inline float el_sqrt_f32(float x) { return sqrtf(x); }
static inline double el_sqrt_f64(double x) { return sqrt(x); }
static inline float el_rsqrt_f32(float x) { return 1.0f / sqrtf(x); }
static inline double el_rsqrt_f64(double x) { return 1.0 / sqrt(x); }
static inline float el_sin_f32(float x) { return sinf(x); }
static inline double el_sin_f64(double x) { return sin(x); }
static inline float el_cos_f32(float x) { return cosf(x); }
static inline double el_cos_f64(double x) { return cos(x); }
static inline float el_tanh_f32(float x) { return ds_tanhf(x); }
static inline double el_tanh_f64(double x) { return tanh(x); }
static inline float el_sigmoid_f32(float x) { return ds_sigmoidf(x); }
static inline double el_sigmoid_f64(double x) { return 1.0 / (1.0 + exp(-x)); }
static inline float el_silu_f32(float x) { return ds_siluf(x); }
static inline double el_silu_f64(double x) { return x / (1.0 + exp(-x)); }
static inline float el_erf_f32(float x) { return ds_erff(x); }
static inline double el_erf_f64(double x) { return erf(x); }
static inline float el_gelu_f32(float x) { return ds_geluf(x); }
/* f64 gelu as x/2 erfc(-x/sqrt 2) and x sigmoid(2u): 1 + erf, 1 + tanh would cancel for negative x */
static inline double el_gelu_f64(double x) { return 0.5 * x * erfc(x * -0.70710678118654752440); }
static inline float el_gelu_tanh_f32(float x) { return ds_gelu_tanhf(x); }
static inline double el_gelu_tanh_f64(double x) {
  return x / (1.0 + exp(-1.5957691216057308 * (x + 0.044715 * x * x * x)));
}

static inline float el_log1p_f32(float x) { return ds_log1pf(x); }
static inline double el_log1p_f64(double x) { return log1p(x); }
static inline float el_expm1_f32(float x) { return expm1f(x); }
static inline double el_expm1_f64(double x) { return expm1(x); }
static inline float el_log2_f32(float x) { return log2f(x); }
static inline double el_log2_f64(double x) { return log2(x); }
/* rounding: round is half to even (rint in the default rounding mode), as PyTorch */
static inline float el_floor_f32(float x) { return floorf(x); }
static inline double el_floor_f64(double x) { return floor(x); }
static inline float el_ceil_f32(float x) { return ceilf(x); }
static inline double el_ceil_f64(double x) { return ceil(x); }
static inline float el_round_f32(float x) { return nearbyintf(x); }
static inline double el_round_f64(double x) { return nearbyint(x); }
static inline float el_trunc_f32(float x) { return truncf(x); }
static inline double el_trunc_f64(double x) { return trunc(x); }
/* integers are already whole: the rounding ops give them back unchanged (as PyTorch) */
#define DS_INT_ROUNDING(T, S) \
  static inline T el_floor_##S(T x) { return x; } \
  static inline T el_ceil_##S(T x) { return x; } \
  static inline T el_round_##S(T x) { return x; } \
  static inline T el_trunc_##S(T x) { return x; }
DS_INT_ROUNDING(int64_t, i64)
DS_INT_ROUNDING(int32_t, i32)
DS_INT_ROUNDING(uint8_t, u8)
#undef DS_INT_ROUNDING

/* trigonometric and hyperbolic functions: f32 evaluates in f64 and rounds once (libm's double functions) */
#define DS_LIBM_UNARY(OP) \
  static inline float el_##OP##_f32(float x) { return (float)OP((double)x); } \
  static inline double el_##OP##_f64(double x) { return OP(x); }
DS_LIBM_UNARY(tan)
DS_LIBM_UNARY(asin)
DS_LIBM_UNARY(acos)
DS_LIBM_UNARY(atan)
DS_LIBM_UNARY(sinh)
DS_LIBM_UNARY(cosh)
DS_LIBM_UNARY(asinh)
DS_LIBM_UNARY(acosh)
DS_LIBM_UNARY(atanh)
#undef DS_LIBM_UNARY

/* round_f16 / round_bf16: x rounded to the nearest float16 / bfloat16 value (ties to even, subnormals kept,
   beyond the format's largest finite value +-inf, NaN and +-inf unchanged), kept in x's dtype (as
   torch's x.half().to(x.dtype)). One rounding from x itself: an f64 is not rounded to f32 first. */
static inline double ds_round_to_format(double x, int mantissa_bits, int min_exponent, double largest) {
  if (x == 0.0 || !(fabs(x) <= 1.7976931348623157e308)) return x; /* zeros, NaN, infinities */
  int e;
  (void)frexp(x, &e); /* |x| in [2^(e-1), 2^e) */
  int lead = e - 1 < min_exponent ? min_exponent : e - 1;
  double ulp = ldexp(1.0, lead - mantissa_bits);
  double r = nearbyint(x / ulp) * ulp;
  return fabs(r) > largest ? copysign(INFINITY, x) : r;
}
static inline float el_round_f16_f32(float x) { return (float)ds_round_to_format(x, 10, -14, 65504.0); }
static inline double el_round_f16_f64(double x) { return ds_round_to_format(x, 10, -14, 65504.0); }
static inline float el_round_bf16_f32(float x) {
  return (float)ds_round_to_format(x, 7, -126, 3.3895313892515355e38);
}
static inline double el_round_bf16_f64(double x) { return ds_round_to_format(x, 7, -126, 3.3895313892515355e38); }

/* ---- bitwise ops on integers: not, and, or, xor; shifts as PyTorch's: by BITS or more (or a negative
   count) a left shift gives 0 and a right shift the sign fill; >> is arithmetic on signed types ---- */
#define DS_BITWISE(T, S, U, BITS, SIGN_FILL) \
  static inline T el_bitwise_not_##S(T x) { return (T)~x; } \
  static inline T el_bitwise_and_##S(T a, T b) { return (T)(a & b); } \
  static inline T el_bitwise_or_##S(T a, T b) { return (T)(a | b); } \
  static inline T el_bitwise_xor_##S(T a, T b) { return (T)(a ^ b); } \
  static inline T el_bitwise_left_shift_##S(T a, T b) { \
    return ((U)b >= (U)(BITS)) ? (T)0 : (T)((U)a << (U)b); } \
  static inline T el_bitwise_right_shift_##S(T a, T b) { \
    return ((U)b >= (U)(BITS)) ? SIGN_FILL(a) : (T)(a >> (U)b); }
#define DS_SIGN_FILL_SIGNED(a) ((a) < 0 ? -1 : 0)
#define DS_SIGN_FILL_UNSIGNED(a) 0
DS_BITWISE(int64_t, i64, uint64_t, 64, DS_SIGN_FILL_SIGNED)
DS_BITWISE(int32_t, i32, uint32_t, 32, DS_SIGN_FILL_SIGNED)
DS_BITWISE(uint8_t, u8, uint32_t, 8, DS_SIGN_FILL_UNSIGNED)
#undef DS_BITWISE
#undef DS_SIGN_FILL_SIGNED
#undef DS_SIGN_FILL_UNSIGNED

/* ---- unary: all numeric dtypes ---- */
/* NEG: float negation, or integer negation that wraps (INT64_MIN stays INT64_MIN, as in PyTorch) */
#define DS_SIGNED_UNARY(T, S, NEG) \
  static inline T el_neg_##S(T x) { return NEG(x); } \
  static inline T el_relu_##S(T x) { return x < 0 ? (T)0 : x; /* NaN and -0.0 stay, as in PyTorch */ } \
  static inline T el_sign_##S(T x) { return (T)((x > 0) - (x < 0)); }
#define DS_NEG_F(x) (-(x))
#define DS_NEG_I64(x) ((int64_t)(0 - (uint64_t)(x)))
#define DS_NEG_I32(x) ((int32_t)(0u - (uint32_t)(x)))
DS_SIGNED_UNARY(float, f32, DS_NEG_F)
DS_SIGNED_UNARY(double, f64, DS_NEG_F)
DS_SIGNED_UNARY(int64_t, i64, DS_NEG_I64)
DS_SIGNED_UNARY(int32_t, i32, DS_NEG_I32)
static inline float el_abs_f32(float x) { return fabsf(x); } /* abs(-0.0) is +0.0 */
static inline double el_abs_f64(double x) { return fabs(x); }
static inline int64_t el_abs_i64(int64_t x) { return x < 0 ? DS_NEG_I64(x) : x; }
static inline int32_t el_abs_i32(int32_t x) { return x < 0 ? DS_NEG_I32(x) : x; }

/* ---- binary arithmetic ---- */
/* W: the type + - * compute in; unsigned for integers, so overflow wraps (as in PyTorch) instead of being UB */
#define DS_ARITH(T, S, W) \
  static inline T el_add_##S(T a, T b) { return (T)((W)a + (W)b); } \
  static inline T el_sub_##S(T a, T b) { return (T)((W)a - (W)b); } \
  static inline T el_mul_##S(T a, T b) { return (T)((W)a * (W)b); } \
  static inline T el_maximum_##S(T a, T b) { return (a > b || a != a) ? a : b; } \
  static inline T el_minimum_##S(T a, T b) { return (a < b || a != a) ? a : b; }
DS_ARITH(float, f32, float)
DS_ARITH(double, f64, double)
DS_ARITH(int64_t, i64, uint64_t)
DS_ARITH(int32_t, i32, uint32_t)
DS_ARITH(uint8_t, u8, uint32_t)
/* maximum/minimum propagate NaN like PyTorch (a != a is false for integers) */
#undef DS_ARITH
static inline float el_div_f32(float a, float b) { return a / b; }
static inline double el_div_f64(double a, double b) { return a / b; }
static inline float el_pow_f32(float a, float b) {
  return b == 2.0f ? a * a : (b == 1.0f ? a : (b == 0.5f ? sqrtf(a) : powf(a, b)));
}
static inline double el_pow_f64(double a, double b) { return pow(a, b); }
/* integer division floors (Python's //, torch.div rounding_mode="floor"). x // 0 has no result: it gives 0
   and raises ds_zero_division (a relaxed store, from any thread); the kernel that ran it (apply in
   elementwise.c, run_program in fused.c) takes the flag and fails with ZeroDivisionError, as PyTorch does */
extern int ds_zero_division;
static inline int ds_take_zero_division(void) { return __atomic_exchange_n(&ds_zero_division, 0, __ATOMIC_RELAXED); }
#define DS_INT_DIVPOW(T, S) \
  static inline T el_div_##S(T a, T b) { \
    if (b == 0) { __atomic_store_n(&ds_zero_division, 1, __ATOMIC_RELAXED); return 0; } \
    if (b == -1) return (T)(0 - (uint64_t)a); \
    T q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; } \
  static inline T el_pow_##S(T a, T b) { \
    if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0); \
    uint64_t r = 1, x = (uint64_t)a; uint64_t e = (uint64_t)b; \
    while (e) { if (e & 1) r *= x; x *= x; e >>= 1; } return (T)r; }
DS_INT_DIVPOW(int64_t, i64)
DS_INT_DIVPOW(int32_t, i32)

/* fmod: remainder with the dividend's sign (C's fmod, %); remainder: with the divisor's sign (Python's %).
   Integers: x mod 0 raises ds_zero_division (ZeroDivisionError, as div), x mod -1 gives 0 (no INT_MIN / -1
   overflow). */
static inline float el_fmod_f32(float a, float b) { return fmodf(a, b); }
static inline double el_fmod_f64(double a, double b) { return fmod(a, b); }
static inline float el_remainder_f32(float a, float b) {
  float r = fmodf(a, b); return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;
}
static inline double el_remainder_f64(double a, double b) {
  double r = fmod(a, b); return (r != 0.0 && ((r < 0.0) != (b < 0.0))) ? r + b : r;
}
#define DS_INT_MOD(T, S) \
  static inline T el_fmod_##S(T a, T b) { \
    if (b == 0) { __atomic_store_n(&ds_zero_division, 1, __ATOMIC_RELAXED); return 0; } \
    return b == -1 ? 0 : a % b; } \
  static inline T el_remainder_##S(T a, T b) { \
    T r = el_fmod_##S(a, b); return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
DS_INT_MOD(int64_t, i64)
DS_INT_MOD(int32_t, i32)
#undef DS_INT_MOD

/* ---- comparisons (output bool) and logic ---- */
#define DS_CMP(T, S) \
  static inline ds_bool el_lt_##S(T a, T b) { return a < b; } \
  static inline ds_bool el_le_##S(T a, T b) { return a <= b; } \
  static inline ds_bool el_gt_##S(T a, T b) { return a > b; } \
  static inline ds_bool el_ge_##S(T a, T b) { return a >= b; } \
  static inline ds_bool el_eq_##S(T a, T b) { return a == b; } \
  static inline ds_bool el_ne_##S(T a, T b) { return a != b; }
DS_CMP(float, f32)
DS_CMP(double, f64)
DS_CMP(int64_t, i64)
DS_CMP(int32_t, i32)
DS_CMP(uint8_t, u8)
DS_CMP(uint8_t, bool)
static inline ds_bool el_logical_and_bool(ds_bool a, ds_bool b) { return a && b; }
static inline ds_bool el_logical_or_bool(ds_bool a, ds_bool b) { return a || b; }
static inline ds_bool el_logical_xor_bool(ds_bool a, ds_bool b) { return (a != 0) != (b != 0); }
static inline ds_bool el_logical_not_bool(ds_bool a) { return !a; }

/* ---- params ops: p0, p1 already in the tensor's dtype ---- */
/* clamp: min(max(x, lo), hi) as in PyTorch: hi wins when lo > hi; NaN stays NaN */
#define DS_CLAMP(T, S) static inline T el_clamp_##S(T x, T lo, T hi) { T y = x < lo ? lo : x; return y > hi ? hi : y; }
DS_CLAMP(float, f32)
DS_CLAMP(double, f64)
DS_CLAMP(int64_t, i64)
DS_CLAMP(int32_t, i32)
DS_CLAMP(uint8_t, u8)
#undef DS_CLAMP
/* hardswish, hardsigmoid: PyTorch's x * min(max(x + 3, 0), 6) / 6 and min(max(x + 3, 0), 6) / 6, the same float
   ops in the same order as the composition F.hardswish/F.hardsigmoid wrote before (add 3, clamp, mul x, div 6) */
#define DS_HARD(T, S) \
  static inline T el_hardsigmoid_##S(T x) { return el_clamp_##S(x + (T)3, (T)0, (T)6) / (T)6; } \
  static inline T el_hardswish_##S(T x) { return x * el_clamp_##S(x + (T)3, (T)0, (T)6) / (T)6; }
DS_HARD(float, f32)
DS_HARD(double, f64)
#undef DS_HARD
/* softplus(x, beta, threshold) as PyTorch: x where beta * x > threshold, else log1p(exp(beta * x)) / beta */
static inline float el_softplus_f32(float x, float beta, float threshold) {
  return ds_softplusf(x, beta, threshold);
}
static inline double el_softplus_f64(double x, double beta, double threshold) {
  double z = x * beta; return z > threshold ? x : log1p(exp(z)) / beta;
}

/* ---- casts: float -> integer saturates, NaN -> 0 (C leaves these undefined) ---- */
static inline int64_t ds_f2i64(double x) {
  return x != x ? 0 : (x >= 9.2233720368547758e18 ? INT64_MAX : (x <= -9.2233720368547758e18 ? INT64_MIN : (int64_t)x));
}
static inline int32_t ds_f2i32(double x) {
  return x != x ? 0 : (x >= 2147483647.0 ? INT32_MAX : (x <= -2147483648.0 ? INT32_MIN : (int32_t)x));
}
static inline uint8_t ds_f2u8(double x) { return x != x ? 0 : (x >= 255.0 ? 255 : (x <= 0.0 ? 0 : (uint8_t)x)); }
/* a value converted to dtype S, as copy/cast and params (clamp bounds) do it */
#define CV_TO_f32(x) ((float)(x))
#define CV_TO_f64(x) ((double)(x))
#define CV_TO_i64(x) ds_f2i64((double)(x))
#define CV_TO_i32(x) ds_f2i32((double)(x))
#define CV_TO_u8(x) ds_f2u8((double)(x))
#define CV_TO_bool(x) ((uint8_t)((x) != 0))
/* integer sources convert directly (through double an i64 would lose precision), wrapping like C casts */
#define CV_INT_TO_f32(x) ((float)(x))
#define CV_INT_TO_f64(x) ((double)(x))
#define CV_INT_TO_i64(x) ((int64_t)(x))
#define CV_INT_TO_i32(x) ((int32_t)(x))
#define CV_INT_TO_u8(x) ((uint8_t)(x))
#define CV_INT_TO_bool(x) ((uint8_t)((x) != 0))
/* CV(S, SI, x): x of dtype SI converted to dtype S */
#define CV(S, SI, x) CV_FROM_##SI(S, x)
#define CV_FROM_f32(S, x) CV_TO_##S(x)
#define CV_FROM_f64(S, x) CV_TO_##S(x)
#define CV_FROM_u8(S, x) CV_TO_##S(x)
#define CV_FROM_bool(S, x) CV_TO_##S(x)
#define CV_FROM_i64(S, x) CV_INT_TO_##S(x)
#define CV_FROM_i32(S, x) CV_INT_TO_##S(x)
#include "lowp.h" /* the same for bf16, f16, i8 */
#endif
