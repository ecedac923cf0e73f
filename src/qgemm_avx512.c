/* qgemm_avx512.c: the AVX-512 VNNI int8 micro-kernels: vpdpbusd (u8 x s8, four products per int32 lane, no
   saturation) into zmm accumulators, and qgemm.h's epilogue (zero point, scales, bias) on them in registers, one
   lane per column as ds_qgemm_store computes it. ds_qgemm_vnni: 8 rows x 32 columns (two packed strips, 16
   accumulators, a broadcast of four activation bytes per two vpdpbusd); ds_qgemm_vnni_wide: 6 rows x 64 columns
   (four strips, 24 accumulators, a broadcast per four vpdpbusd), faster on Zen 4 where the outputs are wide
   enough to fill it (int8 linears 128 x 256 -> 768 or 1024: 6-9%, timed on a busy host). Not for its fewer
   broadcasts: with the data in L1, 8 x 32, 6 x 64 and an embedded-broadcast variant all reach the same 472
   GOP/s per core; the gain is likely memory traffic (each activation row read once per 64 output columns
   instead of per 32), which was not measured apart. */
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni")
#include "qgemm.h"
#include <immintrin.h>
#include <string.h>

#define MR 8

/* row r's 16 columns from mask m of the strip whose column sums, scales and bias are cs, ws, bias:
   float(acc - za * cs) * (sa * ws) + bias, each step one operation as in ds_qgemm_store */
static inline void store16(__m512i acc, int32_t za, float sa, __m512i cs, __m512 ws, __m512 bias, float *y,
                           __mmask16 m) {
  __m512i v = _mm512_sub_epi32(acc, _mm512_mullo_epi32(_mm512_set1_epi32(za), cs));
  __m512 scale = _mm512_mul_ps(_mm512_set1_ps(sa), ws);
  __m512 d = _mm512_mul_ps(_mm512_cvtepi32_ps(v), scale);
  _mm512_mask_storeu_ps(y, m, _mm512_add_ps(d, bias));
}

/* acc += x (u8) . w (s8) in place (GCC copies the accumulators of _mm512_dpbusd_epi32 between registers and
   the stack each step) */
static inline __m512i dpbusd(__m512i acc, __m512i x, __m512i w) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(x), "v"(w));
  return acc;
}

/* one tile; mr and two (a second strip) are constants in each instantiation */
__attribute__((always_inline)) static inline void tile(const int mr, const int two, int nr, int64_t G,
                                                       const uint8_t *a, int64_t lda, const int8_t *b,
                                                       const qgemm_out *o) {
  __m512i acc0[MR], acc1[MR];
  for (int r = 0; r < mr; r++) { acc0[r] = _mm512_setzero_si512(); acc1[r] = _mm512_setzero_si512(); }
  const int8_t *b1 = b + G * QG_GROUP;
  for (int64_t g = 0; g < G; g++) {
    __m512i w0 = _mm512_loadu_si512(b + g * QG_GROUP);
    __m512i w1 = two ? _mm512_loadu_si512(b1 + g * QG_GROUP) : w0;
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
      int32_t four;
      memcpy(&four, a + r * lda + g * QG_KG, 4);
      __m512i x = _mm512_set1_epi32(four);
      acc0[r] = dpbusd(acc0[r], x, w0);
      if (two) acc1[r] = dpbusd(acc1[r], x, w1);
    }
  }
  const __mmask16 m0 = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32 ? 0xffff : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
  __m512i cs0 = _mm512_maskz_loadu_epi32(m0, o->cs), cs1 = _mm512_maskz_loadu_epi32(m1, o->cs + 16);
  __m512 ws0 = _mm512_maskz_loadu_ps(m0, o->ws), ws1 = _mm512_maskz_loadu_ps(m1, o->ws + 16);
  __m512 bi0 = _mm512_maskz_loadu_ps(m0, o->bias), bi1 = _mm512_maskz_loadu_ps(m1, o->bias + 16);
  for (int r = 0; r < mr; r++) {
    float *y = o->y + r * o->ldy;
    store16(acc0[r], o->za[r], o->sa[r], cs0, ws0, bi0, y, m0);
    if (two) store16(acc1[r], o->za[r], o->sa[r], cs1, ws1, bi1, y + 16, m1);
  }
}

#define CASE(R) \
  case R: if (two) tile(R, 1, nr, G, a, lda, b, o); else tile(R, 0, nr, G, a, lda, b, o); break;
static void micro(int mr, int nr, int64_t G, const uint8_t *a, int64_t lda, const int8_t *b, const qgemm_out *o) {
  int two = nr > QG_NR;
  switch (mr) {
    CASE(8) CASE(7) CASE(6) CASE(5) CASE(4) CASE(3) CASE(2)
    default: if (two) tile(1, 1, nr, G, a, lda, b, o); else tile(1, 0, nr, G, a, lda, b, o);
  }
}

const qgemm_kernel ds_qgemm_vnni = { MR, 2 * QG_NR, micro };

#define WMR 6
#define WNS 4
/* the wide kernel's tile: mr rows, ns strips (constants in each instantiation) */
__attribute__((always_inline)) static inline void wtile(const int mr, const int ns, int nr, int64_t G,
                                                        const uint8_t *a, int64_t lda, const int8_t *b,
                                                        const qgemm_out *o) {
  __m512i acc[WMR][WNS];
  for (int r = 0; r < mr; r++)
    for (int s = 0; s < ns; s++) acc[r][s] = _mm512_setzero_si512();
  for (int64_t g = 0; g < G; g++) {
    __m512i w[WNS];
    for (int s = 0; s < ns; s++) w[s] = _mm512_loadu_si512(b + (s * G + g) * QG_GROUP);
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
      int32_t four;
      memcpy(&four, a + r * lda + g * QG_KG, 4);
      __m512i x = _mm512_set1_epi32(four);
      for (int s = 0; s < ns; s++) acc[r][s] = dpbusd(acc[r][s], x, w[s]);
    }
  }
  for (int s = 0; s < ns; s++) {
    int left = nr - 16 * s;
    const __mmask16 m = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
    __m512i cs = _mm512_maskz_loadu_epi32(m, o->cs + 16 * s);
    __m512 ws = _mm512_maskz_loadu_ps(m, o->ws + 16 * s), bi = _mm512_maskz_loadu_ps(m, o->bias + 16 * s);
    for (int r = 0; r < mr; r++) store16(acc[r][s], o->za[r], o->sa[r], cs, ws, bi, o->y + r * o->ldy + 16 * s, m);
  }
}

#define WROW(R) \
  case R: \
    switch (ns) { \
      case 4: wtile(R, 4, nr, G, a, lda, b, o); break; \
      case 3: wtile(R, 3, nr, G, a, lda, b, o); break; \
      case 2: wtile(R, 2, nr, G, a, lda, b, o); break; \
      default: wtile(R, 1, nr, G, a, lda, b, o); \
    } \
    break;
static void wmicro(int mr, int nr, int64_t G, const uint8_t *a, int64_t lda, const int8_t *b, const qgemm_out *o) {
  int ns = (nr + QG_NR - 1) / QG_NR;
  switch (mr) {
    WROW(6) WROW(5) WROW(4) WROW(3) WROW(2)
    default: WROW(1)
  }
}

const qgemm_kernel ds_qgemm_vnni_wide = { WMR, WNS * QG_NR, wmicro };

/* qgemm.c's row quantization 16 lanes at a time, each lane the same IEEE operations as its 8-lane code: the range
   (a masked tail reads zeros, which min(0, .) and max(0, .) ignore) ... */
int ds_qgemm_range_runs_avx512(const float *x, int64_t nseg, int64_t len, int64_t step, float *lo_out,
                               float *hi_out) {
  __m512 lo = _mm512_setzero_ps(), hi = lo;
  __mmask16 bad = 0;
  for (int64_t s = 0; s < nseg; s++) {
    const float *xs = x + s * step;
    for (int64_t k = 0; k < len; k += 16) {
      __mmask16 m = len - k >= 16 ? 0xffff : (__mmask16)((1u << (len - k)) - 1);
      __m512 v = _mm512_maskz_loadu_ps(m, xs + k), d = _mm512_sub_ps(v, v);
      lo = _mm512_min_ps(lo, v);
      hi = _mm512_max_ps(hi, v);
      bad |= _mm512_cmp_ps_mask(d, d, _CMP_UNORD_Q);
    }
  }
  if (bad) return 0;
  /* min(0, lanes) and max(0, lanes): the lanes reduced in a tree (a zero may come out of it either sign, so
     anything not below / above 0 gives +0, as a strict-compare merge from +0 does; a 16-step scalar merge was
     ~40% of a 256-value row's range time) */
  float a = _mm512_reduce_min_ps(lo), b = _mm512_reduce_max_ps(hi);
  *lo_out = a < 0 ? a : 0.0f;
  *hi_out = b > 0 ? b : 0.0f;
  return 1;
}

/* ... and q = clamp(round(x / scale) + zp, 0, 255) of finite x, scale > 0 (the quotient rounded half to even) */
void ds_qgemm_quantize_avx512(const float *x, int64_t n, float scale, int32_t zp, uint8_t *q) {
  const __m512 s = _mm512_set1_ps(scale), z = _mm512_set1_ps((float)zp), zero = _mm512_setzero_ps(),
               top = _mm512_set1_ps(255);
  for (int64_t k = 0; k < n; k += 16) {
    __mmask16 m = n - k >= 16 ? 0xffff : (__mmask16)((1u << (n - k)) - 1);
    __m512 v = _mm512_roundscale_ps(_mm512_div_ps(_mm512_maskz_loadu_ps(m, x + k), s),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(v, z), zero), top);
    _mm512_mask_cvtusepi32_storeu_epi8(q + k, m, _mm512_cvtps_epi32(v));
  }
}
