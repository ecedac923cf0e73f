/* lowp.h: bf16 and f16 <-> f32 conversions (round to nearest even, IEEE NaN/inf/subnormals, integer bit
   arithmetic only: the same bits whatever the FPU's DAZ/FTZ state) and the casts of the bf16/f16/i8 dtypes. */
#ifndef DS_LOWP_H
#define DS_LOWP_H
#include <stdint.h>
#include <string.h>

static inline uint32_t ds_f32_bits(float x) { uint32_t u; memcpy(&u, &x, sizeof u); return u; }
static inline float ds_bits_f32(uint32_t u) { float x; memcpy(&x, &u, sizeof x); return x; }

/* f32 -> bf16: the top 16 bits, rounded to nearest even on the 16 dropped ones (subnormals alike); past the
   largest bf16 the rounding carries into the exponent and gives +-inf. A NaN keeps its sign and top 7 payload
   bits and is made quiet (a payload living in the dropped bits only would otherwise turn into inf). */
static inline uint16_t ds_f32_to_bf16(float x) {
  uint32_t u = ds_f32_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
/* bf16 -> f32: exact, the bits shifted up (a signaling NaN stays signaling, as torch) */
static inline float ds_bf16_to_f32(uint16_t h) { return ds_bits_f32((uint32_t)h << 16); }

/* f32 -> f16: round to nearest even; |x| >= 65520 (halfway past 65504) gives +-inf; below 2^-14 the f16
   subnormals (steps of 2^-24), |x| <= 2^-25 gives +-0. A NaN keeps its sign and top 9 payload bits, quiet. */
static inline uint16_t ds_f32_to_f16(float x) {
  uint32_t u = ds_f32_bits(x), a = u & 0x7fffffffu;
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x1ffu));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (a >= 0x38800000u) { /* normal f16: rebias the exponent (127 - 15), round at bit 13 */
    uint32_t r = a + 0x0fffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | ((r >> 13) - (112u << 10)));
  }
  uint32_t e = a >> 23;
  if (e < 102) return sign; /* below 2^-25: +-0 */
  /* subnormal f16: the significand (implicit bit made explicit) in units of 2^-24, rounded to nearest even;
     a carry into bit 10 gives the smallest normal, whose encoding follows on */
  uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e, q = m >> shift;
  uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) q++;
  return (uint16_t)(sign | q);
}
/* f16 -> f32: exact; subnormals normalized; a NaN keeps sign and payload and is made quiet (as torch and F16C) */
static inline float ds_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return ds_bits_f32(sign | 0x7f800000u | (m ? 0x400000u | (m << 13) : 0));
  if (e) return ds_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
  if (!m) return ds_bits_f32(sign);
  uint32_t shift = 0;
  while (!(m & 0x400u)) { m <<= 1; shift++; }
  return ds_bits_f32(sign | ((113u - shift) << 23) | ((m & 0x3ffu) << 13));
}

/* float -> i8 saturates, NaN -> 0 (ds's rule for every float -> integer cast, dtype.lua) */
static inline int8_t ds_f2i8(double x) { return x != x ? 0 : (x >= 127.0 ? 127 : (x <= -128.0 ? -128 : (int8_t)x)); }

/* The cast macros of elementwise_ops.h for the new dtypes. CV_TO_<S>(x): a float (or u8/bool) value x to S;
   CV_INT_TO_<S>(x): an integer value (wraps to a narrower integer, like PyTorch). Any value becomes bf16/f16
   through f32 (an f64 or i64 rounds twice, as torch's static_cast<BFloat16>). */
#define CV_TO_bf16(x) ds_f32_to_bf16((float)(x))
#define CV_TO_f16(x) ds_f32_to_f16((float)(x))
#define CV_TO_i8(x) _Generic((x), uint8_t: (int8_t)(x), default: ds_f2i8((double)(x))) /* u8/bool: wraps */
#define CV_INT_TO_bf16(x) ds_f32_to_bf16((float)(x))
#define CV_INT_TO_f16(x) ds_f32_to_f16((float)(x))
#define CV_INT_TO_i8(x) ((int8_t)(uint8_t)(x))
/* from bf16/f16: the f32 value, converted on; to its own dtype the bits are kept (a copy keeps NaN payloads) */
#define CV_FROM_bf16(S, x) CV_BF16_TO_##S(x)
#define CV_BF16_TO_bf16(x) (x)
#define CV_BF16_TO_f32(x) ds_bf16_to_f32(x)
#define CV_BF16_TO_f64(x) ((double)ds_bf16_to_f32(x))
#define CV_BF16_TO_i64(x) CV_TO_i64(ds_bf16_to_f32(x))
#define CV_BF16_TO_i32(x) CV_TO_i32(ds_bf16_to_f32(x))
#define CV_BF16_TO_u8(x) CV_TO_u8(ds_bf16_to_f32(x))
#define CV_BF16_TO_bool(x) CV_TO_bool(ds_bf16_to_f32(x))
#define CV_BF16_TO_f16(x) ds_f32_to_f16(ds_bf16_to_f32(x))
#define CV_BF16_TO_i8(x) ds_f2i8(ds_bf16_to_f32(x))
#define CV_FROM_f16(S, x) CV_F16_TO_##S(x)
#define CV_F16_TO_f16(x) (x)
#define CV_F16_TO_f32(x) ds_f16_to_f32(x)
#define CV_F16_TO_f64(x) ((double)ds_f16_to_f32(x))
#define CV_F16_TO_i64(x) CV_TO_i64(ds_f16_to_f32(x))
#define CV_F16_TO_i32(x) CV_TO_i32(ds_f16_to_f32(x))
#define CV_F16_TO_u8(x) CV_TO_u8(ds_f16_to_f32(x))
#define CV_F16_TO_bool(x) CV_TO_bool(ds_f16_to_f32(x))
#define CV_F16_TO_bf16(x) ds_f32_to_bf16(ds_f16_to_f32(x))
#define CV_F16_TO_i8(x) ds_f2i8(ds_f16_to_f32(x))
#define CV_FROM_i8(S, x) CV_INT_TO_##S(x)
#endif
