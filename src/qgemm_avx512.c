/* qgemm_avx512.c: the AVX-512 VNNI int8 micro-kernels: vpdpbusd (u8 x s8, four products per int32 lane, no
   saturation) into zmm accumulators, and qgemm.h's epilogue (zero point, scales, bias) on them in registers, one
   lane per column as ds_qgemm_store computes it. ds_qgemm_vnni: 8 rows x 32 columns (two packed strips, 16
   accumulators, a broadcast of four activation bytes per two vpdpbusd); ds_qgemm_vnni_wide: 6 rows x 64 columns
   (four strips, 24 accumulators, a broadcast per four vpdpbusd), faster on Zen 4 where the outputs are wide
   enough to fill it (int8 linears 128 x 256 -> 768 or 1024: 6-9%, timed on a busy host). */
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
