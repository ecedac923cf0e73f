/* sgemm_avx2.c: the AVX2+FMA f32 micro-kernel (6 x 16 tile: 12 ymm accumulators, A broadcast, B two ymm). */
#pragma GCC target("avx2,fma")
#include "sgemm.h"
#include <immintrin.h>

#define MR 6
#define NR 16

/* lanes [0, n) of 8 set (n clamped to 0..8): the mask of _mm256_maskload_ps / _mm256_maskstore_ps */
static inline __m256i lanes(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* one tile; mr, full (nr == NR) and ahead (prefetch B) are constants in each instantiation; a partial strip
   uses masks */
__attribute__((always_inline)) static inline void tile(const int mr, const int full, const int ahead, int nr,
                                                       int64_t kc, const float *ap, const float *b, int64_t ldb,
                                                       float *c, int64_t ldc, int load_c, const float *next_c) {
  const __m256i m0 = lanes(full ? 8 : nr), m1 = lanes(full ? 8 : nr - 8);
  __m256 acc0[MR], acc1[MR];
#pragma GCC unroll 6
  for (int r = 0; r < mr; r++) {
    if (!load_c) { acc0[r] = _mm256_setzero_ps(); acc1[r] = _mm256_setzero_ps(); }
    else if (full) { acc0[r] = _mm256_loadu_ps(c + r * ldc); acc1[r] = _mm256_loadu_ps(c + r * ldc + 8); }
    else { acc0[r] = _mm256_maskload_ps(c + r * ldc, m0); acc1[r] = _mm256_maskload_ps(c + r * ldc + 8, m1); }
  }
  for (int64_t k0 = 0; k0 < kc; k0 += SGEMM_CPF_K) {
    if (next_c && k0 / SGEMM_CPF_K < mr) {   /* one row of the next tile per group of k's */
      const float *row = next_c + (k0 / SGEMM_CPF_K) * ldc;
      __builtin_prefetch(row, 1, 3);
      __builtin_prefetch(row + NR - 1, 1, 3);
    }
    const int64_t kend = k0 + SGEMM_CPF_K < kc ? k0 + SGEMM_CPF_K : kc;
#pragma GCC unroll 8
    for (int64_t k = k0; k < kend; k++) {
      __m256 b0 = full ? _mm256_loadu_ps(b) : _mm256_maskload_ps(b, m0);
      __m256 b1 = full ? _mm256_loadu_ps(b + 8) : _mm256_maskload_ps(b + 8, m1);
      if (ahead) {
        _mm_prefetch((const char *)(b + SGEMM_AHEAD * ldb), _MM_HINT_T0);
      }
#pragma GCC unroll 6
      for (int r = 0; r < mr; r++) {
        __m256 a = _mm256_broadcast_ss(ap + r);
        acc0[r] = _mm256_fmadd_ps(a, b0, acc0[r]);
        acc1[r] = _mm256_fmadd_ps(a, b1, acc1[r]);
      }
      ap += MR;
      b += ldb;
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < mr; r++) {
    if (full) { _mm256_storeu_ps(c + r * ldc, acc0[r]); _mm256_storeu_ps(c + r * ldc + 8, acc1[r]); }
    else { _mm256_maskstore_ps(c + r * ldc, m0, acc0[r]); _mm256_maskstore_ps(c + r * ldc + 8, m1, acc1[r]); }
  }
}

/* m rows x nv vectors of c, all K at once; lanes past n masked unless full */
#define V 8
/* 12 accumulators from 2 rows (3 rows x a whole 32-column strip, 5-6 rows x 16 columns; the compiler reads B
   vectors as FMA memory operands where registers run out), 8 for one row (two strips; 12 spilled): 3 rows used
   to take 16 columns, half of every strip row per pass, and 5-6 rows 8. Zen 4, 2 threads, kernel alone, us
   (busy host, indicative), warm / weight cold: 3 x 4096 x 1024 652 -> 234 / 1131 -> 537, 3 x 2400 x 256
   49 -> 32 / 116 -> 60, 6 x 2400 x 1024 (was the micro-kernel's) 296 -> 277 / 786 -> 650. */
#define ACC 12
#define ROWS_ACC(m) ((m) == 1 ? 8 : ACC)
/* rows_group: 7-8 rows as 4 + 3-4, each group 2 vectors (8 and 6-8 accumulators) over B in turn: in one group one
   vector (a B load and m broadcasts per m FMAs, load-bound). Zen 4, 1 thread, kernel alone, frozen, us, one group
   -> two (busy host, indicative): 7 x 1024 x 1024 216 -> 153 (the 6 x 16 micro-kernel 200), 7 x 4096 x 256
   220 -> 152, 8 x 2400 x 256 126 -> 109 (micro 131), 8 x 1024 x 64 14.2 -> 9.9, 8 x 256 x 32 1.67 -> 1.42;
   8 x 4096 x 1024 (16 MiB of weight, one pass by k blocks) 1337 in one group, 1776 in two (micro 1543). */
#define ROWS_GROUP 4
__attribute__((always_inline)) static inline void row_block(const int m, const int nv, const int full, int64_t n,
                                                            int64_t K, const float *a, int64_t ars, int64_t acs,
                                                            const float *b, int64_t ldb, int64_t sstride, float *c,
                                                            int64_t ldc, int load_c, int ahead) {
  __m256i mk[ACC];
  __m256 acc[ACC];   /* row r, vector v at acc[r * nv + v] (m * nv <= ACC); the loops unrolled whole, so every
                        accumulator stays a register (3 rows x 2 vectors kept copies in memory: 4.7 -> 8.5 us) */
SGEMM_UNROLL_WHOLE(12)
  for (int v = 0; v < nv; v++) mk[v] = lanes(full ? 8 : (int)(n - 8 * v < 8 ? n - 8 * v : 8));
SGEMM_UNROLL_WHOLE(12)
  for (int r = 0; r < m; r++)
SGEMM_UNROLL_WHOLE(12)
    for (int v = 0; v < nv; v++)
      acc[r * nv + v] = !load_c ? _mm256_setzero_ps() : full ? _mm256_loadu_ps(c + r * ldc + 8 * v)
                                                      : _mm256_maskload_ps(c + r * ldc + 8 * v, mk[v]);
  const float *pf = b + SGEMM_ROWS_AHEAD * ldb;   /* the strip row to prefetch when ahead */
  for (int64_t k = 0; k < K; k++) {
    __m256 bv[ACC];
    if (ahead) {
      _mm_prefetch((const char *)pf, _MM_HINT_T0);
      _mm_prefetch((const char *)(pf + SGEMM_STRIP / 2), _MM_HINT_T0);
      pf += ldb;
    }
SGEMM_UNROLL_WHOLE(12)
    for (int v = 0; v < nv; v++)
      bv[v] = full ? _mm256_loadu_ps(b + ROW_VEC(v, sstride)) : _mm256_maskload_ps(b + ROW_VEC(v, sstride), mk[v]);
    int64_t rs = ars;   /* opaque per k: GCC then forms the m row addresses from it in registers; hoisted, they
                           went to stack slots read every k (AVX2 8 x 2400 x 8: 3.5 us, 5.1 hoisted) */
    __asm__("" : "+r"(rs));
SGEMM_UNROLL_WHOLE(12)
    for (int r = 0; r < m; r++) {
      __m256 ar = _mm256_broadcast_ss(a + r * rs + k * acs);
SGEMM_UNROLL_WHOLE(12)
      for (int v = 0; v < nv; v++) acc[r * nv + v] = _mm256_fmadd_ps(ar, bv[v], acc[r * nv + v]);
    }
    b += ldb;
  }
SGEMM_UNROLL_WHOLE(12)
  for (int r = 0; r < m; r++)
SGEMM_UNROLL_WHOLE(12)
    for (int v = 0; v < nv; v++) {
      if (full) _mm256_storeu_ps(c + r * ldc + 8 * v, acc[r * nv + v]);
      else _mm256_maskstore_ps(c + r * ldc + 8 * v, mk[v], acc[r * nv + v]);
    }
}

SGEMM_MICRO
SGEMM_ROWS

/* transposed-B blocks: 4 groups (4 chains in flight) for one row, 2 for 2-4, 1 from 5 (16 registers) */
#define T_NV(m) ((m) == 1 ? 4 : (m) <= 4 ? 2 : 1)
#include "sgemm_rows_t.h"

const sgemm_kernel ds_sgemm_avx2 = { MR, NR, micro, rows, rows_t, ROWS_GROUP };
