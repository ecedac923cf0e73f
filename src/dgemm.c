/* dgemm.c: ds's f64 GEMM: C = A @ B or C += A @ B for any operand strides, each element one FMA chain over k. */
#include "internal.h"
#include <omp.h>
#include <stdlib.h>

/* Row by row: a row of C (a block of NCB columns at a time) accumulates fma(A[i,k], B[k,:], c) for k in
   order, so every element is one FMA chain over k from +0 (or from C when accumulating), whatever the
   thread count, the rows around it or the vector width the compiler picks. Rows are split over threads.
   A B whose columns are not contiguous is copied once into a row-major (K, N) buffer. f64 is for checks
   and small models: this is simple rather than fast. */
#define NCB 512                /* columns of C per pass (with K rows of B they are read from L2/L3) */
#define PAR_FLOPS (1 << 20)

/* row i of C = row i of A @ B (B row-major), NCB columns at a time */
static void dgemm_row(int64_t i, int64_t N, int64_t K, const double *A, int64_t ars, int64_t acs, const double *B,
                      int64_t brs, double *C, int64_t ldc, int accumulate) {
  for (int64_t j0 = 0; j0 < N; j0 += NCB) {
    int64_t nc = N - j0 < NCB ? N - j0 : NCB;
    double *c = C + i * ldc + j0;
    if (!accumulate) for (int64_t j = 0; j < nc; j++) c[j] = 0.0;
    for (int64_t k = 0; k < K; k++) {
      const double a = A[i * ars + k * acs], *b = B + k * brs + j0;
      for (int64_t j = 0; j < nc; j++) c[j] = fma(a, b[j], c[j]);
    }
  }
}

int ds_dgemm(int64_t M, int64_t N, int64_t K, const double *A, int64_t ars, int64_t acs, const double *B, int64_t brs,
             int64_t bcs, double *C, int64_t ldc, int accumulate) {
  if (M <= 0 || N <= 0) return DS_OK;
  double *copy = NULL;
  if (bcs != 1 && K > 0) {
    copy = malloc((size_t)(K * N) * sizeof(double));
    if (!copy) return ds_fail(DS_ENOMEM, "matmul: out of memory for a (%lld,%lld) f64 copy",
        (long long)K, (long long)N);
    for (int64_t k = 0; k < K; k++)
      for (int64_t n = 0; n < N; n++) copy[k * N + n] = B[k * brs + n * bcs];
    B = copy; brs = N;
  }
  double flops = 2.0 * (double)M * (double)N * (double)K;
  DS_PAR_FOR(!omp_in_parallel() && M > 1 && flops >= PAR_FLOPS, i, M,
             dgemm_row(i, N, K, A, ars, acs, B, brs, C, ldc, accumulate););
  free(copy);
  return DS_OK;
}
