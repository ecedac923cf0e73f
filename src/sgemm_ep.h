/* sgemm_ep.h: the f32 GEMM's own epilogue: a bias per column and a relu, applied by the driver (sgemm.c) to each
   block of C right after its last k block, on the thread that computed it, while the block is in the caches (a
   micro-kernel tile, in L1; a row kernel's rows) (fused.c's matmul_ep and matmul_packed_ep take it for a chain that
   is just that; any other chain stays a pass of its own). */
#ifndef DS_SGEMM_EP_H
#define DS_SGEMM_EP_H
#include "ds.h"
#include <stdint.h>

/* c = c + bias[col] when bias (N floats, one per column of C), then c = c < 0 ? 0 : c when relu (NaN and -0.0
   stay): elementwise_ops.h's el_add_f32 (c the first operand) and el_relu_f32, so the unfused ops' bits */
typedef struct {
  const float *bias;
  int relu;
} ds_sgemm_ep;

/* sgemm.c: ds_sgemm_batch / ds_sgemm_packed_batch (internal.h) with ep applied to every C (NULL: none) */
int ds_sgemm_batch_ep(int64_t nbatch, const float *const *A, const float *const *B, float *const *C, int64_t M,
                      int64_t N, int64_t K, int64_t ars, int64_t acs, int64_t brs, int64_t bcs, int64_t ldc,
                      int accumulate, const ds_sgemm_ep *ep);
int ds_sgemm_packed_batch_ep(int64_t nbatch, const float *const *A, const float *bp, float *const *C, int64_t M,
                             int64_t N, int64_t K, int64_t ars, int64_t acs, int64_t ldc, int accumulate,
                             const ds_sgemm_ep *ep);
/* blas.c: matmul_f32 and matmul_packed_f32 (t = out, a, b) with ep applied to out (NULL: none) */
int ds_matmul_f32_ep(ds_tensor *const *t, const ds_sgemm_ep *ep);
int ds_matmul_packed_f32_ep(ds_tensor *const *t, const ds_sgemm_ep *ep);
#endif
