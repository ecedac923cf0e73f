/* sgemm_avx512.c: the AVX-512 f32 micro-kernel (14 x 32 tile: 28 zmm accumulators, A broadcast, B two zmm). */
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma,prfchw")
#include "sgemm.h"
#include <immintrin.h>

#define MR 14
#define NR 32

/* one tile; mr, full (nr == NR) and ahead (prefetch B) are constants in each instantiation; a partial strip
   uses masks */
__attribute__((always_inline)) static inline void tile(const int mr, const int full, const int ahead, int nr,
                                                       int64_t kc, const float *ap, const float *b, int64_t ldb,
                                                       float *c, int64_t ldc, int load_c, const float *next_c) {
  const __mmask16 m0 = full || nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
  const __mmask16 m1 = full ? 0xffff : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
  __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 14
  for (int r = 0; r < mr; r++) {
    acc0[r] = load_c ? _mm512_maskz_loadu_ps(m0, c + r * ldc) : _mm512_setzero_ps();
    acc1[r] = load_c ? _mm512_maskz_loadu_ps(m1, c + r * ldc + 16) : _mm512_setzero_ps();
  }
  for (int64_t k0 = 0; k0 < kc; k0 += SGEMM_CPF_K) {
    if (next_c && k0 / SGEMM_CPF_K < mr) {   /* one row of the next tile per group of k's */
      const float *row = next_c + (k0 / SGEMM_CPF_K) * ldc;
      __builtin_prefetch(row, 1, 3);
      __builtin_prefetch(row + 16, 1, 3);
      __builtin_prefetch(row + NR - 1, 1, 3);
    }
    const int64_t kend = k0 + SGEMM_CPF_K < kc ? k0 + SGEMM_CPF_K : kc;
#pragma GCC unroll 8
    for (int64_t k = k0; k < kend; k++) {
      __m512 b0 = full ? _mm512_loadu_ps(b) : _mm512_maskz_loadu_ps(m0, b);
      __m512 b1 = full ? _mm512_loadu_ps(b + 16) : _mm512_maskz_loadu_ps(m1, b + 16);
      if (ahead) {
        _mm_prefetch((const char *)(b + SGEMM_AHEAD * ldb), _MM_HINT_T0);
        _mm_prefetch((const char *)(b + SGEMM_AHEAD * ldb + 16), _MM_HINT_T0);
      }
#pragma GCC unroll 14
      for (int r = 0; r < mr; r++) {
        __m512 a = _mm512_set1_ps(ap[r]);
        acc0[r] = _mm512_fmadd_ps(a, b0, acc0[r]);
        acc1[r] = _mm512_fmadd_ps(a, b1, acc1[r]);
      }
      ap += MR;
      b += ldb;
    }
  }
#pragma GCC unroll 14
  for (int r = 0; r < mr; r++) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, acc0[r]);
    _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc1[r]);
  }
}

/* m rows x nv vectors of c, all K at once; lanes past n masked unless full. Each B vector loaded feeds all m
   rows, so a weight is read once per call whatever m. Zen 4, 1 thread, kernel alone, prepacked weights in L2
   (K = 128-512, N = 65-512; indicative): 8 rows (one strip a block, 16 accumulators) run at ~95% of the FMA
   peak (one zmm FMA a cycle), 4-7 rows at ~95% too; one row is L2-bound (64 bytes of weight per FMA: ~48% of
   the peak), 2 rows ~81%, 3 rows ~77%. So 8 rows cost ~4x one row by the FLOPs and L2 bandwidth alone: 24
   accumulators for 3-6 rows gave at most 6% (3 rows) and cost narrow N (3 x 128 x 65 687 -> 800 ns). */
#define V 16
#define ACC 16
#define ROWS_ACC(m) ACC
/* m rows x n <= 8 columns (a last block of one vector), a ymm each: Zen 4 runs a zmm FMA as two 256-bit halves,
   so a zmm with its upper half masked off costs a whole FMA slot, and from 5 rows such a tail was FMA-bound (m
   cycles per k) where ymm leaves it at the FMA latency (4 cycles per k). The same FMA per lane, so the same bits.
   Zen 4, 1 thread, kernel alone, frozen, us (indicative): 5 x 4096 x 8 5.83 -> 4.57 (W^T in place 6.4),
   6 x 2400 x 8 3.99 -> 3.12, 8 x 4096 x 8 9.80 -> 7.37, 8 x 1024 x 8 2.49 -> 1.87. */
__attribute__((always_inline)) static inline void row_half(const int m, int64_t n, int64_t K, const float *a,
                                                           int64_t ars, int64_t acs, const float *b, int64_t ldb,
                                                           float *c, int64_t ldc, int load_c) {
  const __mmask8 mk = (__mmask8)((1u << n) - 1);
  __m256 acc[SGEMM_ROWS_MAX];
SGEMM_UNROLL_WHOLE(8)
  for (int r = 0; r < m; r++) acc[r] = load_c ? _mm256_maskz_loadu_ps(mk, c + r * ldc) : _mm256_setzero_ps();
  for (int64_t k = 0; k < K; k++) {
    const __m256 bv = _mm256_maskz_loadu_ps(mk, b);
SGEMM_UNROLL_WHOLE(8)
    for (int r = 0; r < m; r++) acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(a[r * ars + k * acs]), bv, acc[r]);
    b += ldb;
  }
SGEMM_UNROLL_WHOLE(8)
  for (int r = 0; r < m; r++) _mm256_mask_storeu_ps(c + r * ldc, mk, acc[r]);
}

__attribute__((always_inline)) static inline void row_block(const int m, const int nv, const int full, int64_t n,
                                                            int64_t K, const float *a, int64_t ars, int64_t acs,
                                                            const float *b, int64_t ldb, int64_t sstride, float *c,
                                                            int64_t ldc, int load_c, int ahead) {
  /* ahead is never set here: an AVX-512 block of m <= 8 rows is a whole strip or wider (sgemm.h) */
  if (nv == 1 && !full && n <= V / 2) {
    row_half(m, n, K, a, ars, acs, b, ldb, c, ldc, load_c);
    return;
  }
  __mmask16 mk[ACC];
  __m512 acc[ACC];   /* row r, vector v at acc[r * nv + v] (m * nv <= ACC); the loops unrolled whole, so every
                        accumulator stays a register (5 x 2400 @ 2400 x 8, one masked vector, 7.5 -> 3.4 us) */
SGEMM_UNROLL_WHOLE(16)
  for (int v = 0; v < nv; v++) {
    int64_t left = n - 16 * v;
    mk[v] = full || left >= 16 ? 0xffff : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
  }
SGEMM_UNROLL_WHOLE(16)
  for (int r = 0; r < m; r++)
SGEMM_UNROLL_WHOLE(16)
    for (int v = 0; v < nv; v++)
      acc[r * nv + v] = load_c ? _mm512_maskz_loadu_ps(mk[v], c + r * ldc + 16 * v) : _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k++) {
    __m512 bv[ACC];
SGEMM_UNROLL_WHOLE(16)
    for (int v = 0; v < nv; v++)
      bv[v] = full ? _mm512_loadu_ps(b + ROW_VEC(v, sstride)) : _mm512_maskz_loadu_ps(mk[v], b + ROW_VEC(v, sstride));
SGEMM_UNROLL_WHOLE(16)
    for (int r = 0; r < m; r++) {
      __m512 ar = _mm512_set1_ps(a[r * ars + k * acs]);
SGEMM_UNROLL_WHOLE(16)
      for (int v = 0; v < nv; v++) acc[r * nv + v] = _mm512_fmadd_ps(ar, bv[v], acc[r * nv + v]);
    }
    b += ldb;
  }
SGEMM_UNROLL_WHOLE(16)
  for (int r = 0; r < m; r++)
SGEMM_UNROLL_WHOLE(16)
    for (int v = 0; v < nv; v++) _mm512_mask_storeu_ps(c + r * ldc + 16 * v, mk[v], acc[r * nv + v]);
}

SGEMM_MICRO
SGEMM_ROWS

/* transposed-B blocks: 4 groups up to 4 rows, 2 from 5 (at most 16 accumulators of the 32 registers) */
#define T_NV(m) ((m) <= 4 ? 4 : 2)
#include "sgemm_rows_t.h"

/* rows_group 0: 16 accumulators give every row count 1 .. 8 a whole strip or more in one group */
const sgemm_kernel ds_sgemm_avx512 = { MR, NR, micro, rows, rows_t, 0 };
