/* internal.h: helpers shared by the C engine's files (errors, dtype switch, strided iteration). */
#ifndef DS_INTERNAL_H
#define DS_INTERNAL_H
#include "ds.h"
#include <stdio.h>
#include <string.h>
#include <math.h>

/* Set the thread-local error message and return DS_EINVAL (or the given code). */
int ds_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define DS_CHECK(cond, ...) do { if (!(cond)) return ds_fail(DS_EINVAL, __VA_ARGS__); } while (0)

/* team.c: the threads a parallel region may use now (one while the host starves ds's workers). A region:
   gate on ds_team() > 1, take t0 = ds_team_start() before it, call ds_team_arrive(t0) first thing in it on every
   thread and ds_team_done() after it. */
int ds_team(void);
double ds_team_start(void);
void ds_team_arrive(double t0);
void ds_team_done(void);
void ds_team_set(int n);
int ds_team_configured(void);

/* Work above this many elements is split across OpenMP threads (a parallel region costs ~11 us). */
#define DS_PAR_MIN 32768
/* Fixed chunk for deterministic reductions and tiles for fused chains, independent of threads. */
#define DS_CHUNK 4096
/* for (int64_t V = 0; V < N; V++) { body } split over the OpenMP threads when PAR, else a plain loop on the
   calling thread: an inactive `parallel for if (0)` region still costs ~1.2 us a call, more than a small kernel */
#define DS_PAR_FOR(PAR, V, N, ...) \
  do { \
    if ((PAR) && ds_team() > 1) { \
      double t0_ = ds_team_start(); \
      _Pragma("omp parallel") { ds_team_arrive(t0_); \
        _Pragma("omp for schedule(static)") for (int64_t V = 0; V < (N); V++) { __VA_ARGS__ } } \
      ds_team_done(); \
    } else for (int64_t V = 0; V < (N); V++) { __VA_ARGS__ } \
  } while (0)

/* Broadcast src (ndim_s dims, right-aligned) to out's shape: strides with 0 on broadcast dims.
   Returns 0 when shapes are incompatible. */
int ds_broadcast_strides(const ds_tensor *out, const ds_tensor *src, int64_t *strides);

/* Collapse dims of up to 3 operands sharing one shape so the innermost loop is as long as possible.
   In: ndim, shape, strides[k][ndim]. Out: new ndim (>= 1). */
int ds_coalesce(int ndim, int64_t *shape, int nops, int64_t strides[][DS_MAXDIM]);

/* Iterate rows of the innermost dim: for each row call fn(ctx, ptrs, n, inner_strides).
   Rows are split across threads when the total is large and parallel != 0. */
typedef void (*ds_row_fn)(void *ctx, char **ptrs, int64_t n, const int64_t *inner);
void ds_for_rows(int ndim, const int64_t *shape, int nops, char **base, int64_t strides[][DS_MAXDIM],
                 const int64_t *elsize, ds_row_fn fn, void *ctx, int parallel);

/* isa.c: the kernel path in use (chosen once from cpuid and DS_ISA); a kernel with an AVX-512 variant
   branches on it. Variants live in files compiled for their ISA with #pragma GCC target. */
/* DS_ISA_SCALAR (DS_ISA=scalar): the integer kernels' portable code; float kernels run their AVX2 code */
enum { DS_ISA_AVX2 = 1, DS_ISA_AVX512 = 2, DS_ISA_SCALAR = 3 };
int ds_isa(void);
int ds_isa_vnni(void);        /* the AVX-512 path with AVX512_VNNI */
int ds_isa_avx512bf16(void);  /* the AVX-512 path with AVX512_BF16 */
int ds_isa_vbmi(void);        /* the AVX-512 path with AVX512_VBMI */

/* kernels.c: a registry row. noperands: the tensors a plan step passes (outputs then inputs), or -1 when the
   step's attrs decide the count, checked by check (dtypes: of the nbuf operands) before the step is added. */
typedef int ds_kernel_check(int nbuf, const int *dtypes, int nattrs, const double *attrs);
typedef struct { const char *name; ds_kernel fn; int noperands; ds_kernel_check *check; } ds_kernel_info;
const ds_kernel_info *ds_kernel_info_find(const char *name);

void *ds_mem_alloc(int64_t nbytes, int64_t *rounded);
void ds_mem_release(void *p, int64_t rounded);
/* pages.c: n bytes (64-byte aligned, not zeroed), from 2 MiB on as huge pages where the kernel grants them;
   freed with the same n. */
void *ds_pages_alloc(size_t n);
void ds_pages_free(void *p, size_t n);
/* Shapes as text for messages: "(2,3)". buf must hold 128 bytes. */
const char *ds_shape_str(const ds_tensor *t, char *buf);
/* ds's own GEMM: every product in ds (matmul, linear, conv, their backward) goes through these. Each C
   element is one FMA chain over k = 0 .. K-1 in order, starting from +0 (from C's value when accumulate
   is set), so results do not depend on the thread count, the batch, the rows around a row or the ISA
   path. Operands take any strides: A (i, k) at A[i * ars + k * acs], B (k, n) at B[k * brs + n * bcs];
   C is row-major with row stride ldc. Called inside an OpenMP parallel region they run on the calling
   thread. They return DS_OK or DS_ENOMEM (message set).
   sgemm.c: ds_sgemm_batch does nbatch products of one shape (A[t], B[t], C[t]), threads over the batch
   or inside each product. dgemm.c: the f64 product (simple, row by row). */
int ds_sgemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t ars, int64_t acs, const float *B, int64_t brs,
             int64_t bcs, float *C, int64_t ldc, int accumulate);
int ds_sgemm_batch(int64_t nbatch, const float *const *A, const float *const *B, float *const *C, int64_t M, int64_t N,
                   int64_t K, int64_t ars, int64_t acs, int64_t brs, int64_t bcs, int64_t ldc, int accumulate);
/* Prepacked weights: ds_sgemm_pack_b writes B (K x N, any strides) as ceil(N / 32) strips of K x 32 floats,
   zero columns past N (sgemm.h's layouts), into bp; ds_sgemm_packed_batch multiplies nbatch A's by that one B.
   Same chains, same bits as ds_sgemm_batch on B itself; nothing is repacked per call. */
void ds_sgemm_pack_b(int64_t K, int64_t N, const float *B, int64_t brs, int64_t bcs, float *bp);
int ds_sgemm_packed_batch(int64_t nbatch, const float *const *A, const float *bp, float *const *C, int64_t M,
                          int64_t N, int64_t K, int64_t ars, int64_t acs, int64_t ldc, int accumulate);
int ds_dgemm(int64_t M, int64_t N, int64_t K, const double *A, int64_t ars, int64_t acs, const double *B, int64_t brs,
             int64_t bcs, double *C, int64_t ldc, int accumulate);
/* The BLAS-style row-major entry on the same kernels (blas.c), for kernels written against that shape:
   C (M,N) = alpha * op(A) (M,K) @ op(B) (K,N) + beta * C; ta/tb nonzero transpose A/B (lda/ldb are the
   stored matrices' row strides). beta must be 0 (overwrite) or 1 (the chains continue from C); alpha
   other than 1 scales the finished product (beta 0 only). */
int ds_gemm_f32(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
int ds_gemm_f64(int ta, int tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A, int64_t lda,
                const double *B, int64_t ldb, double beta, double *C, int64_t ldc);
#endif
