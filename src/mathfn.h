/* mathfn.h: f32 exp/log/log1p/tanh/erf as branch-free arithmetic so loops auto-vectorize; one
   definition shared by eager kernels and fused chains, so both round identically. */
#ifndef DS_MATHFN_H
#define DS_MATHFN_H
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float ds_bits_to_f32(int32_t i) { float f; memcpy(&f, &i, 4); return f; }
static inline int32_t ds_f32_to_bits(float f) { int32_t i; memcpy(&i, &f, 4); return i; }

/* Cephes expf: range reduction by ln2 in two parts, degree-6 polynomial. ~1 ulp, subnormal
   results included (down to 2^-150, below which exp rounds to 0). */
static inline float ds_expf(float x) {
  float xc = x < -103.972077f ? -103.972077f : (x > 88.72283f ? 88.72283f : (x == x ? x : 0.0f)); /* NaN: no UB in the int cast */
  float k = floorf(xc * 1.44269504088896341f + 0.5f);
  float r = xc - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * (r * r) + r + 1.0f;
  int32_t ki = (int32_t)k;
  /* split the scale in two so k = 128 does not overflow the exponent field */
  y = y * ds_bits_to_f32((ki / 2 + 127) << 23) * ds_bits_to_f32((ki - ki / 2 + 127) << 23);
  y = x > 88.72283f ? INFINITY : y;
  y = x < -103.972077f ? 0.0f : y;
  return x != x ? x : y;
}

/* Cephes logf: mantissa in [sqrt(.5), sqrt(2)), degree-8 polynomial. Subnormal inputs are
   scaled by 2^23 first so the exponent field is meaningful. */
static inline float ds_logf(float x) {
  int sub = x < 1.17549435e-38f;
  int32_t bits = ds_f32_to_bits(sub ? x * 8388608.0f : x);
  int32_t e = ((bits >> 23) & 0xff) - (sub ? 149 : 126);
  float m = ds_bits_to_f32((bits & 0x007fffff) | 0x3f000000); /* [0.5, 1) */
  int small = m < 0.707106781186547524f;
  float fe = (float)(small ? e - 1 : e);
  m = small ? m + m - 1.0f : m - 1.0f;
  float z = m * m;
  float p = 7.0376836292e-2f;
  p = p * m - 1.1514610310e-1f;
  p = p * m + 1.1676998740e-1f;
  p = p * m - 1.2420140846e-1f;
  p = p * m + 1.4249322787e-1f;
  p = p * m - 1.6668057665e-1f;
  p = p * m + 2.0000714765e-1f;
  p = p * m - 2.4999993993e-1f;
  p = p * m + 3.3333331174e-1f;
  float y = p * m * z;
  y = y + fe * -2.12194440e-4f;
  y = y - 0.5f * z;
  y = m + y + fe * 0.693359375f;
  y = x == INFINITY ? INFINITY : y;
  y = x == 0.0f ? -INFINITY : y;
  y = (x < 0.0f || x != x) ? NAN : y;
  return y;
}

/* log1p: log(u) * x / (u - 1) with u = 1 + x as rounded (Goldberg), so a small x keeps its relative precision. */
static inline float ds_log1pf(float x) {
  float u = 1.0f + x;
  float d = u - 1.0f;
  float y = ds_logf(u) * (x / (d == 0.0f ? 1.0f : d));
  y = d == 0.0f ? x : y;
  return x == INFINITY ? INFINITY : y;
}

/* tanh: odd polynomial near 0 (Cephes), 1 - 2/(exp(2|x|)+1) elsewhere. */
static inline float ds_tanhf(float x) {
  float ax = fabsf(x);
  float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  float small = x + x * z * p;
  float e = ds_expf(2.0f * (ax > 9.0f ? 9.0f : ax));
  float big = 1.0f - 2.0f / (e + 1.0f);
  big = ax > 9.0f ? 1.0f : big;
  big = x < 0.0f ? -big : big;
  return ax < 0.625f ? small : big;
}

/* erf: |x| < 1: x * P(x^2), a least-squares fit of erf(x)/x on [0, 1] with each coefficient
   refitted after rounding the previous ones to f32 (relative error 1.4e-9). |x| >= 1: 1 - erfc(|x|) with
   erfc = t*exp(-x^2 + P(t)) (Numerical Recipes erfcc, relative error 1.2e-7 of a value <= 0.16). */
static inline float ds_erff(float x) {
  float ax = fabsf(x);
  float z = x * x;
  float q = 7.913451554486528e-05f;
  q = q * z - 8.028957527130842e-04f;
  q = q * z + 5.190568510442972e-03f;
  q = q * z - 2.6855064556002617e-02f;
  q = q * z + 1.1283617466688156e-01f;
  q = q * z - 3.761262893676758e-01f;
  q = q * z + 1.2837916612625122e-01f;
  float small = x + x * q; /* x * (1 + q): the only rounding near the result is the last add */
  float t = 1.0f / (1.0f + 0.5f * ax);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  float ec = t * ds_expf(-ax * ax + p);
  float big = 1.0f - ec;
  big = x < 0.0f ? -big : big;
  return ax < 1.0f ? small : big;
}
#endif
