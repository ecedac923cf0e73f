/* blas.c: matmul (batched with broadcasting, any strides) and the BLAS-style entry, all on ds's own GEMM. */
#include "internal.h"
#include "sgemm_ep.h"
#include <stdlib.h>

/* byte offsets of batch bi's matrices in a and b (batch strides as, bs over out's batch dims) */
static void batch_offsets(const ds_tensor *o, int nb, const int64_t *as, const int64_t *bs, int64_t bi, int64_t *ao,
                          int64_t *bo) {
  int64_t rem = bi; *ao = 0; *bo = 0;
  for (int i = nb - 1; i >= 0; i--) {
    int64_t idx = rem % o->shape[i];
    rem /= o->shape[i];
    *ao += idx * as[i];
    *bo += idx * bs[i];
  }
}

/* f32: every batch's product in one ds_sgemm_batch call (threads over batches or inside products), ep applied */
static int sgemm_batches(ds_tensor *o, const ds_tensor *a, const ds_tensor *b, int nb, const int64_t *as,
                         const int64_t *bs, int64_t batches, int64_t M, int64_t N, int64_t K, int64_t ars, int64_t acs,
                         int64_t brs, int64_t bcs, const ds_sgemm_ep *ep) {
  const float *one_a, *one_b; float *one_c;
  const float **pa = &one_a, **pb = &one_b; float **pc = &one_c;
  if (batches > 1) {
    pa = malloc(sizeof *pa * (size_t)batches);
    pb = malloc(sizeof *pb * (size_t)batches);
    pc = malloc(sizeof *pc * (size_t)batches);
    if (!pa || !pb || !pc) { free(pa); free(pb); free(pc); return ds_fail(DS_ENOMEM, "matmul: out of memory"); }
  }
  for (int64_t bi = 0; bi < batches; bi++) {
    int64_t ao, bo;
    batch_offsets(o, nb, as, bs, bi, &ao, &bo);
    pa[bi] = (const float *)a->data + ao; pb[bi] = (const float *)b->data + bo; pc[bi] = (float *)o->data + bi * M * N;
  }
  int rc = ds_sgemm_batch_ep(batches, pa, pb, pc, M, N, K, ars, acs, brs, bcs, N, 0, ep);
  if (batches > 1) { free(pa); free(pb); free(pc); }
  return rc;
}

/* out (..., M, N) = a (..., M, K) @ b (..., K, N); batch dims broadcast to out's; operands with any strides
   are read in place (sgemm.c packs them). f32: ep (sgemm_ep.h, or NULL) applied to out. */
static int matmul(ds_tensor *const *t, int dtype, const ds_sgemm_ep *ep) {
  ds_tensor *o = t[0], *a = t[1], *b = t[2];
  char s1[128], s2[128], s3[128];
  DS_CHECK(o && a && b, "matmul: missing operand");
  DS_CHECK(o->dtype == dtype && a->dtype == dtype && b->dtype == dtype, "matmul: dtypes must all be %s",
           ds_dtype_name(dtype));
  DS_CHECK(a->ndim >= 2 && b->ndim >= 2 && o->ndim >= 2, "matmul: kernel needs >= 2-D operands");
  DS_CHECK(ds_tensor_is_contiguous(o), "matmul: output must be contiguous");
  int64_t M = a->shape[a->ndim - 2], K = a->shape[a->ndim - 1], N = b->shape[b->ndim - 1];
  DS_CHECK(b->shape[b->ndim - 2] == K && o->shape[o->ndim - 2] == M && o->shape[o->ndim - 1] == N,
           "matmul: shapes %s @ %s -> %s do not match", ds_shape_str(a, s1), ds_shape_str(b, s2), ds_shape_str(o, s3));
  /* batch strides of a and b broadcast against out's batch dims */
  int nb = o->ndim - 2;
  int64_t as[DS_MAXDIM] = {0}, bs[DS_MAXDIM] = {0};
  for (int i = 0; i < nb; i++) {
    int ja = i - (o->ndim - a->ndim), jb = i - (o->ndim - b->ndim);
    if (ja >= 0) {
      DS_CHECK(a->shape[ja] == o->shape[i] || a->shape[ja] == 1, "matmul: batch dims of %s do not broadcast to %s",
               ds_shape_str(a, s1), ds_shape_str(o, s2));
      as[i] = a->shape[ja] == 1 ? 0 : a->strides[ja];
    }
    if (jb >= 0) {
      DS_CHECK(b->shape[jb] == o->shape[i] || b->shape[jb] == 1, "matmul: batch dims of %s do not broadcast to %s",
               ds_shape_str(b, s1), ds_shape_str(o, s2));
      bs[i] = b->shape[jb] == 1 ? 0 : b->strides[jb];
    }
  }
  int64_t batches = (M * N == 0) ? 0 : o->numel / (M * N);
  /* (..., M, K) @ (K, N) with a contiguous and b shared by every batch: one GEMM over all rows */
  int b_shared = 1;
  for (int i = 0; i < nb; i++) if (bs[i] != 0) b_shared = 0;
  int folded = nb > 0 && batches > 1 && b_shared && ds_tensor_is_contiguous(a) && a->numel == batches * M * K;
  if (folded) { M *= batches; batches = 1; }
  int64_t ars = folded ? K : a->strides[a->ndim - 2], acs = folded ? 1 : a->strides[a->ndim - 1];
  int64_t brs = b->strides[b->ndim - 2], bcs = b->strides[b->ndim - 1];
  if (dtype == DS_F32) return sgemm_batches(o, a, b, nb, as, bs, batches, M, N, K, ars, acs, brs, bcs, ep);
  for (int64_t bi = 0; bi < batches; bi++) {
    int64_t ao, bo;
    batch_offsets(o, nb, as, bs, bi, &ao, &bo);
    int rc = ds_dgemm(M, N, K, (const double *)a->data + ao, ars, acs, (const double *)b->data + bo, brs, bcs,
                      (double *)o->data + bi * M * N, N, 0);
    if (rc) return rc;
  }
  return DS_OK;
}

int ds_matmul_f32(ds_tensor *const *t, const double *attrs) { (void)attrs; return matmul(t, DS_F32, NULL); }
int ds_matmul_f64(ds_tensor *const *t, const double *attrs) { (void)attrs; return matmul(t, DS_F64, NULL); }
int ds_matmul_f32_ep(ds_tensor *const *t, const ds_sgemm_ep *ep) { return matmul(t, DS_F32, ep); }

/* bp (ceil(N / 32), K, 32) = b (K, N) in sgemm's strip layout (internal.h's prepacked weights) */
int ds_pack_weight_f32(ds_tensor *const *t, const double *attrs) {
  (void)attrs;
  ds_tensor *bp = t[0], *b = t[1];
  char s1[128], s2[128];
  DS_CHECK(bp && b && bp->dtype == DS_F32 && b->dtype == DS_F32, "pack_weight: f32 operands expected");
  DS_CHECK(b->ndim == 2 && bp->ndim == 3 && ds_tensor_is_contiguous(bp) && bp->shape[0] == (b->shape[1] + 31) / 32 &&
           bp->shape[1] == b->shape[0] && bp->shape[2] == 32,
           "pack_weight: %s does not hold %s as strips of 32 columns", ds_shape_str(bp, s1), ds_shape_str(b, s2));
  ds_sgemm_pack_b(b->shape[0], b->shape[1], (const float *)b->data, b->strides[0], b->strides[1], (float *)bp->data);
  return DS_OK;
}

/* out (..., M, N) = a (..., M, K) @ W with W prepacked (bp from ds_pack_weight_f32): the same chains, the same
   bits as matmul with W, without repacking W on every call (compile's prepack pass, for frozen weights); ep
   (sgemm_ep.h, or NULL) applied to out */
int ds_matmul_packed_f32_ep(ds_tensor *const *t, const ds_sgemm_ep *ep) {
  ds_tensor *o = t[0], *a = t[1], *bp = t[2];
  char s1[128], s2[128], s3[128];
  DS_CHECK(o && a && bp && o->dtype == DS_F32 && a->dtype == DS_F32 && bp->dtype == DS_F32,
           "matmul_packed: f32 operands expected");
  DS_CHECK(a->ndim >= 2 && o->ndim == a->ndim && bp->ndim == 3 && ds_tensor_is_contiguous(o) &&
           ds_tensor_is_contiguous(bp),
           "matmul_packed: needs out and a of one rank >= 2, a contiguous 3-D packed weight");
  int nb = o->ndim - 2;
  int64_t M = a->shape[nb], K = a->shape[nb + 1], N = o->shape[nb + 1];
  int ok = o->shape[nb] == M && bp->shape[0] == (N + 31) / 32 && bp->shape[1] == K && bp->shape[2] == 32;
  for (int i = 0; i < nb; i++) ok = ok && o->shape[i] == a->shape[i];
  DS_CHECK(ok, "matmul_packed: shapes %s @ packed %s -> %s do not match", ds_shape_str(a, s1), ds_shape_str(bp, s2),
           ds_shape_str(o, s3));
  int64_t batches = (M * N == 0) ? 0 : o->numel / (M * N);
  if (batches == 0) return DS_OK;
  const float *pb = (const float *)bp->data;
  if (ds_tensor_is_contiguous(a)) {   /* one product over all rows */
    const float *pa = a->data;
    float *pc = o->data;
    return ds_sgemm_packed_batch_ep(1, &pa, pb, &pc, M * batches, N, K, K, 1, N, 0, ep);
  }
  const float **pa = malloc(sizeof *pa * (size_t)batches);
  float **pc = malloc(sizeof *pc * (size_t)batches);
  if (!pa || !pc) { free(pa); free(pc); return ds_fail(DS_ENOMEM, "matmul_packed: out of memory"); }
  int64_t none[DS_MAXDIM] = {0};   /* the packed weight is shared by every batch */
  for (int64_t bi = 0; bi < batches; bi++) {
    int64_t ao, bo;
    batch_offsets(o, nb, a->strides, none, bi, &ao, &bo);
    pa[bi] = (const float *)a->data + ao;
    pc[bi] = (float *)o->data + bi * M * N;
  }
  int rc = ds_sgemm_packed_batch_ep(batches, pa, pb, pc, M, N, K, a->strides[nb], a->strides[nb + 1], N, 0, ep);
  free(pa); free(pc);
  return rc;
}

int ds_matmul_packed_f32(ds_tensor *const *t, const double *attrs) {
  (void)attrs;
  return ds_matmul_packed_f32_ep(t, NULL);
}

/* ds_gemm_*: the BLAS-style row-major entry (internal.h) */
#define KERNELS "gemm_entry_kernels.h"
#include "float_kernels.h"
