/* sgemm.h: the contract between sgemm.c's blocking driver and the per-ISA f32 micro-kernels. */
#ifndef DS_SGEMM_H
#define DS_SGEMM_H
#include <stdint.h>

/* c (mr x nr, row stride ldc) = ap (mr x kc) @ b (kc x nr), 1 <= mr <= MR, 1 <= nr <= NR.
   ap: an A panel packed k-major, MR values per k (rows past mr are padding and never read into c).
   b: row k at b + k * ldb (a packed strip, ldb = NR, or B itself); columns past nr are never read.
   Every c element is one FMA chain: acc = load_c ? c : +0, then acc = fmaf(a[k], b[k], acc) for k in
   order. Every kernel keeps this rule exactly, so all ISA paths give the same bits. */
typedef void (*sgemm_micro_fn)(int mr, int nr, int64_t kc, const float *ap, const float *b, int64_t ldb, float *c,
                               int64_t ldc, int load_c);
typedef struct {
  int mr, nr;             /* micro-tile rows and columns */
  sgemm_micro_fn micro;
} sgemm_kernel;

extern const sgemm_kernel ds_sgemm_avx2;     /* sgemm_avx2.c: 6 x 16 */
extern const sgemm_kernel ds_sgemm_avx512;   /* sgemm_avx512.c: 14 x 32 */
#endif
