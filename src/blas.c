/* blas.c: matmul on OpenBLAS (the only file that includes cblas.h); batched with broadcasting. */
#include "internal.h"
#include <stdlib.h>
#include <cblas.h>

/* How a (rows, cols) matrix with strides (rs, cs) is passed to BLAS: transposed flag and ld.
   Returns 0 if it needs a copy (neither stride is 1). */
static int blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int *trans, int64_t *ld) {
  if (cs == 1 && (rs >= cols || rows == 1)) { *trans = 0; *ld = rows == 1 ? (cols > 0 ? cols : 1) : rs; return 1; }
  if (rs == 1 && (cs >= rows || cols == 1)) { *trans = 1; *ld = cols == 1 ? (rows > 0 ? rows : 1) : cs; return 1; }
  return 0;
}

static void gather_matrix(const ds_tensor *t, const char *p, int64_t rows, int64_t cols, int64_t rs, int64_t cs, void *dst) {
  int64_t es = ds_dtype_size(t->dtype);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) memcpy((char *)dst + (i * cols + j) * es, p + (i * rs + j * cs) * es, es);
}

/* byte offsets of batch bi's matrices in a and b (batch strides as, bs over out's batch dims) */
static void batch_offsets(const ds_tensor *o, int nb, const int64_t *as, const int64_t *bs, int64_t bi, int64_t *ao, int64_t *bo) {
  int64_t rem = bi; *ao = 0; *bo = 0;
  for (int i = nb - 1; i >= 0; i--) { int64_t idx = rem % o->shape[i]; rem /= o->shape[i]; *ao += idx * as[i]; *bo += idx * bs[i]; }
}

/* f32 matmul on ds's own GEMM (sgemm.c): a's rows have unit stride (row stride lda), b any strides */
static int sgemm_batches(ds_tensor *o, const ds_tensor *a, const ds_tensor *b, int nb, const int64_t *as, const int64_t *bs,
                         int64_t batches, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t brs, int64_t bcs) {
  const float *one_a, *one_b; float *one_c;
  const float **pa = &one_a, **pb = &one_b; float **pc = &one_c;
  if (batches > 1) {
    pa = malloc(sizeof *pa * (size_t)batches); pb = malloc(sizeof *pb * (size_t)batches); pc = malloc(sizeof *pc * (size_t)batches);
    if (!pa || !pb || !pc) { free(pa); free(pb); free(pc); return ds_fail(DS_ENOMEM, "matmul: out of memory"); }
  }
  for (int64_t bi = 0; bi < batches; bi++) {
    int64_t ao, bo;
    batch_offsets(o, nb, as, bs, bi, &ao, &bo);
    pa[bi] = (const float *)a->data + ao; pb[bi] = (const float *)b->data + bo; pc[bi] = (float *)o->data + bi * M * N;
  }
  int rc = ds_sgemm_batch(batches, pa, pb, pc, M, N, K, lda, brs, bcs, N);
  if (batches > 1) { free(pa); free(pb); free(pc); }
  return rc;
}

/* out (..., M, N) = a (..., M, K) @ b (..., K, N); batch dims broadcast to out's. f32 products with
   weight-sized b (ds_sgemm_fits: K <= 1024, N*K <= 2^22) run on sgemm.c, the rest on OpenBLAS. */
static int matmul(ds_tensor *const *t, int dtype) {
  ds_tensor *o = t[0], *a = t[1], *b = t[2];
  char s1[128], s2[128], s3[128];
  DS_CHECK(o && a && b, "matmul: missing operand");
  DS_CHECK(o->dtype == dtype && a->dtype == dtype && b->dtype == dtype, "matmul: dtypes must all be %s", dtype == DS_F32 ? "f32" : "f64");
  DS_CHECK(a->ndim >= 2 && b->ndim >= 2 && o->ndim >= 2, "matmul: kernel needs >= 2-D operands");
  DS_CHECK(ds_is_contig(o), "matmul: output must be contiguous");
  int64_t M = a->shape[a->ndim - 2], K = a->shape[a->ndim - 1], N = b->shape[b->ndim - 1];
  DS_CHECK(b->shape[b->ndim - 2] == K && o->shape[o->ndim - 2] == M && o->shape[o->ndim - 1] == N,
           "matmul: shapes %s @ %s -> %s do not match", ds_shape_str(a, s1), ds_shape_str(b, s2), ds_shape_str(o, s3));
  /* batch strides of a and b broadcast against out's batch dims */
  int nb = o->ndim - 2;
  int64_t as[DS_MAXDIM] = {0}, bs[DS_MAXDIM] = {0};
  for (int i = 0; i < nb; i++) {
    int ja = i - (o->ndim - a->ndim), jb = i - (o->ndim - b->ndim);
    if (ja >= 0) { DS_CHECK(a->shape[ja] == o->shape[i] || a->shape[ja] == 1, "matmul: batch dims of %s do not broadcast to %s", ds_shape_str(a, s1), ds_shape_str(o, s2)); as[i] = a->shape[ja] == 1 ? 0 : a->strides[ja]; }
    if (jb >= 0) { DS_CHECK(b->shape[jb] == o->shape[i] || b->shape[jb] == 1, "matmul: batch dims of %s do not broadcast to %s", ds_shape_str(b, s1), ds_shape_str(o, s2)); bs[i] = b->shape[jb] == 1 ? 0 : b->strides[jb]; }
  }
  int64_t es = ds_dtype_size(dtype);
  int64_t batches = (M * N == 0) ? 0 : o->numel / (M * N);
  /* (..., M, K) @ (K, N) with a contiguous and b shared by every batch: one GEMM over all rows */
  int b_shared = 1;
  for (int i = 0; i < nb; i++) if (bs[i] != 0) b_shared = 0;
  int folded = nb > 0 && batches > 1 && b_shared && ds_is_contig(a) && a->numel == batches * M * K;
  if (folded) { M *= batches; batches = 1; }
  int64_t ars = folded ? K : a->strides[a->ndim - 2], acs = folded ? 1 : a->strides[a->ndim - 1];
  int64_t brs = b->strides[b->ndim - 2], bcs = b->strides[b->ndim - 1];
  if (dtype == DS_F32 && K > 0 && batches > 0 && acs == 1 && ds_sgemm_fits(N, K))
    return sgemm_batches(o, a, b, nb, as, bs, batches, M, N, K, ars, brs, bcs);
  int ta, tb; int64_t lda, ldb;
  int copy_a = !blas_layout(M, K, ars, acs, &ta, &lda), copy_b = !blas_layout(K, N, brs, bcs, &tb, &ldb);
  void *tmp_a = NULL, *tmp_b = NULL;
  if (copy_a) { tmp_a = malloc((size_t)(M * K * es) + 1); ta = 0; lda = K > 0 ? K : 1; }
  if (copy_b) { tmp_b = malloc((size_t)(K * N * es) + 1); tb = 0; ldb = N > 0 ? N : 1; }
  if ((copy_a && !tmp_a) || (copy_b && !tmp_b)) { free(tmp_a); free(tmp_b); return ds_fail(DS_ENOMEM, "matmul: out of memory"); }
  for (int64_t bi = 0; bi < batches; bi++) {
    int64_t ao, bo;
    batch_offsets(o, nb, as, bs, bi, &ao, &bo);
    const char *pa = (const char *)a->data + ao * es, *pb = (const char *)b->data + bo * es;
    char *po = (char *)o->data + bi * M * N * es;
    if (copy_a) { gather_matrix(a, pa, M, K, ars, acs, tmp_a); pa = tmp_a; }
    if (copy_b) { gather_matrix(b, pb, K, N, brs, bcs, tmp_b); pb = tmp_b; }
    if (K == 0) { memset(po, 0, (size_t)(M * N * es)); continue; }
    if (dtype == DS_F32)
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
                  1.0f, (const float *)pa, (int)lda, (const float *)pb, (int)ldb, 0.0f, (float *)po, (int)(N > 0 ? N : 1));
    else
      cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
                  1.0, (const double *)pa, (int)lda, (const double *)pb, (int)ldb, 0.0, (double *)po, (int)(N > 0 ? N : 1));
  }
  free(tmp_a); free(tmp_b);
  return DS_OK;
}

int ds_matmul_f32(ds_tensor *const *t, const double *attrs) { (void)attrs; return matmul(t, DS_F32); }
int ds_matmul_f64(ds_tensor *const *t, const double *attrs) { (void)attrs; return matmul(t, DS_F64); }

/* ds_gemm_*: plain row-major GEMM for other kernel files (conv), declared in internal.h. */
void ds_gemm_f32(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
              alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}
void ds_gemm_f64(int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A, int64_t lda,
                 const double *B, int64_t ldb, double beta, double *C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
              alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}
