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

/* A kernel file defines MR, NR and tile(mr, full, nr, kc, ap, b, ldb, c, ldc, load_c) (always inline), then
   SGEMM_MICRO: its micro() calls tile with mr (1 .. MR <= 14) and full (nr == NR) as constants, so each
   instantiation keeps its accumulators in registers. */
#define SGEMM_CASE(R, full) \
  case R: if (R <= MR) tile(R <= MR ? R : 1, full, nr, kc, ap, b, ldb, c, ldc, load_c); break;
#define SGEMM_SWITCH(full) \
  switch (mr) { \
    SGEMM_CASE(14, full) SGEMM_CASE(13, full) SGEMM_CASE(12, full) SGEMM_CASE(11, full) SGEMM_CASE(10, full) \
    SGEMM_CASE(9, full) SGEMM_CASE(8, full) SGEMM_CASE(7, full) SGEMM_CASE(6, full) SGEMM_CASE(5, full) \
    SGEMM_CASE(4, full) SGEMM_CASE(3, full) SGEMM_CASE(2, full) default: tile(1, full, nr, kc, ap, b, ldb, c, ldc, load_c); \
  }
#define SGEMM_MICRO \
  static void micro(int mr, int nr, int64_t kc, const float *ap, const float *b, int64_t ldb, float *c, int64_t ldc, \
                    int load_c) { \
    if (nr == NR) SGEMM_SWITCH(1) else SGEMM_SWITCH(0) \
  }

extern const sgemm_kernel ds_sgemm_avx2;     /* sgemm_avx2.c: 6 x 16 */
extern const sgemm_kernel ds_sgemm_avx512;   /* sgemm_avx512.c: 14 x 32 */
#endif
