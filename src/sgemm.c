/* sgemm.c: ds's own f32 GEMM (AVX2+FMA) for the matmuls of models: C = A @ B, every C element one FMA chain over k. */
#include "internal.h"
#include <immintrin.h>
#include <stdlib.h>

/* Each C element is computed as acc = fma(a[i,k], b[k,j], acc) for k = 0 .. K-1 in order, starting from 0,
   with no K blocking. So a row's result does not depend on M, on the tiling, on which rows share a tile or
   on the thread count: C[i,:] of an (M,K) @ (K,N) product equals the (1,K) @ (K,N) product of row i, bit
   for bit. Tiles are MC rows x NR columns; each tile packs its NR-column strip of B (K x NR, zero padded)
   into a per-thread buffer, so B may have any strides (a transposed weight needs no copy). */
#define MR 6          /* rows per micro-tile: 12 accumulators of 8 floats */
#define NR 16         /* columns per strip: two ymm registers */
#define MC 96         /* rows per tile (A rows stay in L1/L2 while a strip is reused) */
#define PAR_FLOPS (1 << 20)  /* flops (+ 16 per packed element): below it a parallel region costs more than it saves */

static int cpu_ok = -1;
static int have_avx2_fma(void) {
  if (cpu_ok < 0) cpu_ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return cpu_ok;
}

/* The shapes ds_sgemm takes (a rule on N and K only, so eager and compiled make the same choice and a
   row's result does not depend on M): weight-sized B, K <= 1024 and N * K <= 2^22. Without K blocking
   longer rows fall out of L1 and OpenBLAS is faster (n = 2048: 88% of it). */
int ds_sgemm_fits(int64_t N, int64_t K) {
  return N > 0 && K > 0 && K <= 1024 && N * K <= (INT64_C(1) << 22) && have_avx2_fma();
}

/* out[i] (8 floats at dst + i * NR) = column i of the 8 x 8 block whose row r starts at src + r * ld */
__attribute__((target("avx2,fma"))) static inline void transpose8(const float *src, int64_t ld, float *dst) {
  __m256 r[8], t[8], u[8];
  for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * ld);
  for (int i = 0; i < 8; i += 2) { t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]); t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]); }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; i++) {
    _mm256_store_ps(dst + i * NR, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
    _mm256_store_ps(dst + (i + 4) * NR, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
  }
}

/* strip (K x NR, row-major) = B[:, n0 : n0 + nr] with zero columns after nr; B(k, n) at b[k * brs + n * bcs] */
__attribute__((target("avx2,fma"))) static void
pack_strip(float *strip, const float *b, int64_t K, int64_t brs, int64_t bcs, int64_t n0, int nr) {
  int64_t k = 0;
  if (nr == NR && bcs == 1) {          /* row-major B: 16 contiguous floats per k */
    for (; k < K; k++) {
      const float *src = b + k * brs + n0;
      _mm256_store_ps(strip + k * NR, _mm256_loadu_ps(src));
      _mm256_store_ps(strip + k * NR + 8, _mm256_loadu_ps(src + 8));
    }
  } else if (nr == NR && brs == 1) {   /* transposed B (a weight used as W^T): 8 x 8 transposes */
    for (; k + 8 <= K; k += 8)
      for (int h = 0; h < NR; h += 8) transpose8(b + (n0 + h) * bcs + k, bcs, strip + k * NR + h);
  }
  for (; k < K; k++) {
    float *dst = strip + k * NR;
    int j = 0;
    for (; j < nr; j++) dst[j] = b[k * brs + (n0 + j) * bcs];
    for (; j < NR; j++) dst[j] = 0.0f;
  }
}

/* c (mr x nr, row stride ldc) = a (mr x K, row stride lda) @ strip (K x NR) */
__attribute__((target("avx2,fma"), always_inline)) static inline void
micro(const int mr, int64_t K, const float *a, int64_t lda, const float *strip, float *c, int64_t ldc, int nr) {
  __m256 acc[MR][2];
  const float *ar[MR];
#pragma GCC unroll 6
  for (int r = 0; r < mr; r++) { acc[r][0] = _mm256_setzero_ps(); acc[r][1] = _mm256_setzero_ps(); ar[r] = a + r * lda; }
  for (int64_t k = 0; k < K; k++) {
    __m256 b0 = _mm256_load_ps(strip + k * NR), b1 = _mm256_load_ps(strip + k * NR + 8);
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++) {
      __m256 av = _mm256_broadcast_ss(ar[r] + k);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < mr; r++) {
    if (nr == NR) {
      _mm256_storeu_ps(c + r * ldc, acc[r][0]);
      _mm256_storeu_ps(c + r * ldc + 8, acc[r][1]);
    } else {
      float tmp[NR];
      _mm256_storeu_ps(tmp, acc[r][0]);
      _mm256_storeu_ps(tmp + 8, acc[r][1]);
      for (int j = 0; j < nr; j++) c[r * ldc + j] = tmp[j];
    }
  }
}

__attribute__((target("avx2,fma"))) static void
rows(int64_t m, int64_t K, const float *a, int64_t lda, const float *strip, float *c, int64_t ldc, int nr) {
  int64_t i = 0;
  for (; i + MR <= m; i += MR) micro(MR, K, a + i * lda, lda, strip, c + i * ldc, ldc, nr);
  switch (m - i) {
    case 5: micro(5, K, a + i * lda, lda, strip, c + i * ldc, ldc, nr); break;
    case 4: micro(4, K, a + i * lda, lda, strip, c + i * ldc, ldc, nr); break;
    case 3: micro(3, K, a + i * lda, lda, strip, c + i * ldc, ldc, nr); break;
    case 2: micro(2, K, a + i * lda, lda, strip, c + i * ldc, ldc, nr); break;
    case 1: micro(1, K, a + i * lda, lda, strip, c + i * ldc, ldc, nr); break;
    default: break;
  }
}

/* For each batch entry t < nbatch: C[t] (M x N, row stride ldc) = A[t] (M x K, row stride lda, unit column
   stride) @ B[t] (K x N, element (k, n) at B[t][k * brs + n * bcs]). Needs ds_sgemm_fits(N, K). */
int ds_sgemm_batch(int64_t nbatch, const float *const *A, const float *const *B, float *const *C,
                   int64_t M, int64_t N, int64_t K, int64_t lda, int64_t brs, int64_t bcs, int64_t ldc) {
  if (!ds_sgemm_fits(N, K)) return ds_fail(DS_EINVAL, "matmul: internal sgemm given N=%lld K=%lld", (long long)N, (long long)K);
  if (M <= 0 || nbatch <= 0) return DS_OK;
  int64_t nstrips = (N + NR - 1) / NR, nmc = (M + MC - 1) / MC;
  int64_t ntiles = nbatch * nstrips * nmc;
  double work = 2.0 * (double)nbatch * (double)M * (double)N * (double)K + 16.0 * (double)nbatch * (double)N * (double)K;
  int failed = 0;
#pragma omp parallel if (ntiles > 1 && work >= PAR_FLOPS)
  {
    float *strip = aligned_alloc(32, (size_t)(K * NR) * sizeof(float));
    if (!strip) {
#pragma omp atomic write
      failed = 1;
    }
    int64_t packed = -1;   /* (batch, strip) index of the strip in the buffer */
#pragma omp for schedule(static)
    for (int64_t t = 0; t < ntiles; t++) {
      if (!strip) continue;
      int64_t bs = t / nmc, mc = t % nmc;      /* tiles of one strip are consecutive: a thread packs it once */
      int64_t bi = bs / nstrips, s = bs % nstrips;
      int64_t n0 = s * NR, m0 = mc * MC;
      int nr = (int)(N - n0 < NR ? N - n0 : NR);
      if (packed != bs) { pack_strip(strip, B[bi], K, brs, bcs, n0, nr); packed = bs; }
      int64_t m = M - m0 < MC ? M - m0 : MC;
      rows(m, K, A[bi] + m0 * lda, lda, strip, C[bi] + m0 * ldc + n0, ldc, nr);
    }
    free(strip);
  }
  return failed ? ds_fail(DS_ENOMEM, "matmul: out of memory for a %lld x %d packing buffer", (long long)K, NR) : DS_OK;
}
