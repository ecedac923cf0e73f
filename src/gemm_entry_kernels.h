/* gemm_entry_kernels.h: ds_gemm_f32 / ds_gemm_f64, the BLAS-style row-major entry (internal.h) on ds_sgemm /
   ds_dgemm. blas.c includes it through float_kernels.h (T, FN). */
#define GEMM _Generic((T)0, float: ds_sgemm, double: ds_dgemm)

int FN(ds_gemm)(int ta, int tb, int64_t M, int64_t N, int64_t K, T alpha, const T *A, int64_t lda, const T *B,
                int64_t ldb, T beta, T *C, int64_t ldc) {
  DS_CHECK(beta == 0 || beta == 1, "gemm: beta must be 0 or 1, got %g", (double)beta);
  DS_CHECK(alpha == 1 || beta == 0, "gemm: alpha %g with beta 1 is not supported", (double)alpha);
  int rc = GEMM(M, N, K, A, ta ? 1 : lda, ta ? lda : 1, B, tb ? 1 : ldb, tb ? ldb : 1, C, ldc, beta == 1);
  if (rc || alpha == 1) return rc;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) C[i * ldc + j] *= alpha;
  return DS_OK;
}
#undef GEMM
#undef T
#undef DT
#undef FN
