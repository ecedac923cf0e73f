/* qgemm.h: the contract between qgemm.c's int8 driver and its per-ISA micro-kernels (u8 activations times s8
   weights, exact int32 sums). */
#ifndef DS_QGEMM_H
#define DS_QGEMM_H
#include <stdint.h>

/* The packed weight: W (N, K) s8 as strips of QG_NR = 16 columns; strip s holds, for k-group g (4 k's), 64
   bytes: byte j * 4 + t = W[16 s + j][4 g + t] (0 past N or K). Shape (ceil(N / 16), ceil(K / 4), 64). Every
   path reads this one layout, so a packed weight is the same on every host. */
#define QG_NR 16
#define QG_KG 4
#define QG_GROUP (QG_NR * QG_KG)

/* c (mr x nr, row stride ldc) = a (mr x 4 G u8, row stride lda; k past K is any value: it meets zero weights)
   @ the strips at b (G groups of 64 bytes each, one after another), 1 <= mr <= the kernel's mr, 1 <= nr <= its
   nr. The sums are exact in
   int32 (|sum| < 2^31 for K <= QG_K_MAX), so every path gives the same values. */
typedef void (*qgemm_micro_fn)(int mr, int nr, int64_t G, const uint8_t *a, int64_t lda, const int8_t *b,
                               int32_t *c, int64_t ldc);
typedef struct {
  int mr, nr;          /* rows and columns per call (nr: 16 or 32, whole strips) */
  qgemm_micro_fn micro;
} qgemm_kernel;

/* 255 * 127 * K < 2^31 */
#define QG_K_MAX 65536

extern const qgemm_kernel ds_qgemm_avx2, ds_qgemm_vnni;
#endif
