/* mathfn.h: f32 exp, log, log1p, tanh, erf, sigmoid, silu, gelu, softplus as branch-free arithmetic
   that loops auto-vectorize; one definition shared by eager kernels, fused chains and epilogues, so all
   round identically. Only IEEE operations and explicit fma(): no result depends on the vector width
   (the build uses -ffp-contract=off), so AVX2 and AVX-512 code give the same bits.
   exp and log work in f32 (Cephes, < 1 ulp). erf and gelu work in f32 too (the hot activations: 8/16
   lanes, fma, one division each): over every f32 input erf is within 1.33 ulp and gelu within 1.88 ulp,
   its negative tail in relative terms down to the subnormals (exp(-x^2/2) with x^2 carried as hi + lo).
   The rest evaluate in f64 and round once, so the error is the final rounding plus ~1e-10 relative:
   <= 0.51 ulp, and no cancellation near the tails (sigmoid, silu of large negative x keep their tiny values).
   tests/mathfn_spec.lua measures it. */
#ifndef DS_MATHFN_H
#define DS_MATHFN_H
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float ds_bits_to_f32(int32_t i) { float f; memcpy(&f, &i, 4); return f; }
static inline int32_t ds_f32_to_bits(float f) { int32_t i; memcpy(&i, &f, 4); return i; }
static inline double ds_bits_to_f64(uint64_t i) { double f; memcpy(&f, &i, 8); return f; }
static inline uint64_t ds_f64_to_bits(double f) { uint64_t i; memcpy(&i, &f, 8); return i; }

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

/* exp(h + l) * m for h in [-120, 0] with |l| <= ulp(h), m in [0.25, 2]: h - k ln2 exact (Cody-Waite, 9-bit ln2 high
   part), the low parts added after; the scale 2^k applied as 2^(k + 64) (exact: k >= -174) then 2^-64, so a
   subnormal result rounds once. */
static inline float ds_exp_hilo_mulf(float h, float l, float m) {
  float k = (h * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round(h / ln2) */
  float r = fmaf(-k, 0.693359375f, h);
  r = fmaf(-k, -2.12194440e-4f, r) + l;
  float p = 1.9875691500e-4f;
  p = fmaf(p, r, 1.3981999507e-3f);
  p = fmaf(p, r, 8.3334519073e-3f);
  p = fmaf(p, r, 4.1665795894e-2f);
  p = fmaf(p, r, 1.6666665459e-1f);
  p = fmaf(p, r, 5.0000001201e-1f);
  float q = fmaf(p, r * r, r);     /* exp(r) - 1 */
  int32_t ki = (int32_t)k;
  return fmaf(m, q, m) * ds_bits_to_f32((ki + 64 + 127) << 23) * 0x1p-64f;
}

/* ---- f64 cores (arguments from f32 inputs; relative error ~1e-13 unless noted) ---- */

/* exp(x) for x clamped to [-120, 120] (a NaN stays NaN): x = k ln2 + r, |r| <= ln2/2, Taylor to r^10. */
static inline double ds_exp_d(double x) {
  x = x < -120.0 ? -120.0 : (x > 120.0 ? 120.0 : x);
  double t = x * 1.4426950408889634 + 0x1.8p52; /* k = round(x / ln2) in t's low mantissa bits */
  double k = t - 0x1.8p52;
  double r = fma(-k, 0x1.62e42fefa39efp-1, x);
  r = fma(-k, 0x1.abc9e3b39803fp-56, r);
  double p = 1.0 / 3628800;
  p = fma(p, r, 1.0 / 362880);
  p = fma(p, r, 1.0 / 40320);
  p = fma(p, r, 1.0 / 5040);
  p = fma(p, r, 1.0 / 720);
  p = fma(p, r, 1.0 / 120);
  p = fma(p, r, 1.0 / 24);
  p = fma(p, r, 1.0 / 6);
  p = fma(p, r, 0.5);
  p = fma(p, r, 1.0);
  p = fma(p, r, 1.0);
  return p * ds_bits_to_f64((ds_f64_to_bits(t) + 1023) << 52); /* 2^k: k + 1023 in the exponent field */
}

/* log(u) for a positive finite u: u = 2^e m, m in [sqrt(.5), sqrt(2)), log m = 2 atanh(s), s = (m-1)/(m+1). */
static inline double ds_log_d(double u) {
  uint64_t b = ds_f64_to_bits(u);
  double m = ds_bits_to_f64((b & 0xfffffffffffffull) | 0x3ff0000000000000ull); /* [1, 2) */
  int big = m > 1.4142135623730951;
  m = big ? m * 0.5 : m;
  double e = ds_bits_to_f64((b >> 52) | 0x4330000000000000ull) - (0x1p52 + 1023.0) + (big ? 1.0 : 0.0);
  double s = (m - 1.0) / (m + 1.0), w = s * s;
  double p = 1.0 / 15;
  p = fma(p, w, 1.0 / 13);
  p = fma(p, w, 1.0 / 11);
  p = fma(p, w, 1.0 / 9);
  p = fma(p, w, 1.0 / 7);
  p = fma(p, w, 1.0 / 5);
  p = fma(p, w, 1.0 / 3);
  p = fma(p, w, 1.0);
  return fma(e, 0x1.62e42fefa39efp-1, 2.0 * s * p);
}

/* log(1 + y) for y > -1 finite: log(u) * y / (u - 1) with u = 1 + y as rounded (Goldberg). */
static inline double ds_log1p_d(double y) {
  double u = 1.0 + y, d = u - 1.0;
  return d == 0.0 ? y : ds_log_d(u) * (y / (d == 0.0 ? 1.0 : d));
}

/* 1 / (1 + exp(-u)): exactly 0 or 1 beyond |u| = 120 (a NaN gives 0: callers pass NaN through). */
static inline double ds_sigmoid_d(double u) {
  double a = fabs(u);
  double e = ds_exp_d(-a);
  double s = (u >= 0.0 ? 1.0 : e) / (1.0 + e);
  return a < 120.0 ? s : (u > 0.0 ? 1.0 : 0.0);
}

/* ---- f32 functions ---- */

/* log1p: 1 + x is exact in f64 for |x| >= 2^-29; below, log1p(x) = x (1 - x/2) to f32 precision. */
static inline float ds_log1pf(float x) {
  double y = x > -1.0f && x < INFINITY ? (double)x : 0.0;
  double r = fabs(y) < 0x1p-29 ? y * (1.0 - 0.5 * y) : ds_log1p_d(y);
  float f = (float)r;
  f = x == INFINITY ? INFINITY : f;
  f = x == -1.0f ? -INFINITY : f;
  return (x < -1.0f || x != x) ? NAN : f;
}

/* tanh(|x|) = (e - 1) / (e + 1), e = exp(2|x|); |x| - |x|^3/3 below 2^-12; the sign copied. */
static inline float ds_tanhf(float x) {
  double a = fabs((double)x);
  a = a < 10.0 ? a : 10.0;
  double e = ds_exp_d(a + a);
  double t = a < 0x1p-12 ? a - a * a * a * (1.0 / 3) : (e - 1.0) / (e + 1.0);
  float f = copysignf((float)t, x);
  return x != x ? x : f;
}

/* erf: x (c0 + P(x^2)) below 0.9 (c0 = 2/sqrt(pi) rounded, P its remainder), else sign(x) (1 - exp(-x^2) R(t)),
   t = 1/(1 + |x|/2) - mid, R a fit of erfc(a) exp(a^2) on a in [0.9, 4]; erf(4) rounds to 1. P, Q, R, S:
   least-squares fits (Lawson's weights: minimax relative error) with f32 coefficients rounded one at a time. */
static inline float ds_erff(float x) {
  float a = fabsf(x);
  a = a < 4.0f ? a : 4.0f;
  float w = a * a;
  float p = 0x1.62b7f8p-14f;
  p = fmaf(p, w, -0x1.ac0594p-11f);
  p = fmaf(p, w, 0x1.54fb48p-8f);
  p = fmaf(p, w, -0x1.b813eap-6f);
  p = fmaf(p, w, 0x1.ce2e4ap-4f);
  p = fmaf(p, w, -0x1.812744p-2f);
  p = fmaf(p, w, -0x1.fa2f42p-25f);
  float small = fmaf(a, 0x1.20dd76p+0f, a * p);
  float t = 1.0f / fmaf(0.5f, a, 1.0f) - 0.511494279f;
  float q = 0x1.6f1484p-2f;
  q = fmaf(q, t, 0x1.81cbf4p-4f);
  q = fmaf(q, t, -0x1.211fd8p-4f);
  q = fmaf(q, t, -0x1.cec62ap-3f);
  q = fmaf(q, t, 0x1.842346p-5f);
  q = fmaf(q, t, 0x1.44be06p-1f);
  q = fmaf(q, t, 0x1.fa1754p-1f);
  q = fmaf(q, t, 0x1.c0f1b2p-1f);
  q = fmaf(q, t, 0x1.0fb688p-2f);
  float big = 1.0f - ds_exp_hilo_mulf(-w, -fmaf(a, a, -w), q);
  float f = copysignf(a < 0.9f ? small : big, x);
  return x != x ? x : f;
}

static inline float ds_sigmoidf(float x) {
  float f = (float)ds_sigmoid_d((double)x);
  return x != x ? x : f;
}

/* silu(x) = x sigmoid(x); silu(-inf) = -inf * 0 = NaN, as x / (1 + exp(-x)) gives */
static inline float ds_siluf(float x) { return (float)((double)x * ds_sigmoid_d((double)x)); }

/* gelu(x) = x/2 erfc(-x/sqrt 2) = x + gelu(-x). Below |x| = 0.85: x/2 (1 + erf(x/sqrt 2)), erf(x/sqrt 2) =
   x (c0 + Q(x^2)) with c0 = sqrt(2/pi) rounded and Q its remainder. Above, g = gelu(-|x|) = -exp(-x^2/2) S(t) with
   S = z erfc(z) exp(z^2) / sqrt 2 (z = |x|/sqrt 2) a fit in t = 1/(1 + |x|/2) - mid: S varies slowly, t carries
   1/(1 + |x|/2)'s rounding errors (d + de, t0 (1 + tr)), x^2 = h + l exactly, so the tail keeps its relative
   accuracy; gelu(x) = g for x < 0, x + g for x > 0. mid = 0.5711 puts S(mid) within 0.001 ulp of an f32.
   The two halves are separate functions: ds_gelu_smallf for |x| < 0.85, ds_gelu_tailf for the rest (NaN, +-inf
   included); ds_geluf picks one per element, and the AVX-512 loop (elementwise_avx512.c) runs the tail only on
   the lanes that need it, so every path gives the same bits. */
static inline float ds_gelu_smallf(float x) {
  float h = x * x;
  float p = -0x1.0cd6c4p-16f;
  p = fmaf(p, h, 0x1.df06b8p-13f);
  p = fmaf(p, h, -0x1.371f6ap-9f);
  p = fmaf(p, h, 0x1.46cf86p-6f);
  p = fmaf(p, h, -0x1.105836p-3f);
  p = fmaf(p, h, -0x1.86d47ep-26f);
  float e = fmaf(x, 0x1.988454p-1f, x * p);
  float hx = 0.5f * x;
  float small = fmaf(hx, e, hx);
  return x == 0.0f ? x : small;
}

static inline float ds_gelu_tailf(float x) {
  float a = fabsf(x);
  a = a < 15.0f ? a : 15.0f;   /* gelu(-15) rounds to -0 */
  float h = a * a, l = fmaf(a, a, -h);
  float d = fmaf(0.5f, a, 1.0f), de = fmaf(0.5f, a, 1.0f - d);  /* 1 + a/2 = d + de exactly */
  float t0 = 1.0f / d, tr = fmaf(-d, t0, 1.0f);                /* 1/d = t0 (1 + tr) to 2^-48 */
  float t = (t0 - 0.5711f) + t0 * fmaf(-de, t0, tr); /* 1/(1 + a/2) - mid */
  float s = -0x1.7a5fa2p-2f;
  s = fmaf(s, t, -0x1.3d019cp-1f);
  s = fmaf(s, t, -0x1.34a7b8p-4f);
  s = fmaf(s, t, 0x1.1d234ap-3f);
  s = fmaf(s, t, -0x1.b845d2p-3f);
  s = fmaf(s, t, 0x1.1800f6p-7f);
  s = fmaf(s, t, 0x1.3e8c98p-2f);
  s = fmaf(s, t, -0x1.67cf84p-3f);
  s = fmaf(s, t, -0x1.4dd3acp-1f);
  s = fmaf(s, t, -0x1.b8f2p-2f);
  s = fmaf(s, t, 0x1.3c395cp-2f);
  float g = -ds_exp_hilo_mulf(-0.5f * h, -0.5f * l, s);
  float f = x < 0.0f ? g : x + g;
  f = x == -INFINITY ? NAN : f;
  return x != x ? x : f;
}

static inline float ds_geluf(float x) {
  float small = ds_gelu_smallf(x), tail = ds_gelu_tailf(x);
  return fabsf(x) < 0.85f ? small : tail;
}

/* gelu, tanh form: x/2 (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3) */
static inline float ds_gelu_tanhf(float x) {
  double xd = x;
  double u2 = 1.5957691216057308 * (xd + 0.044715 * xd * xd * xd);
  return (float)(xd * ds_sigmoid_d(u2));
}

/* softplus as PyTorch: x where beta x > threshold, else log1p(exp(beta x)) / beta (beta x in f32) */
static inline float ds_softplusf(float x, float beta, float threshold) {
  float z = x * beta;
  double e = ds_exp_d((double)z);
  float f = (float)(ds_log1p_d(e) / (double)beta);
  return z > threshold ? x : f;
}
#endif
