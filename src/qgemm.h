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

/* The driver's pieces, shared with qconv.c (qgemm.c). Quantization of f32 values to u8 (round half to even):
   the range [lo, hi] = [min(0, min x), max(0, max x)], scale = (hi - lo) / 255, zero point =
   round(clamp(-lo / scale, 0, 255)); q = clamp(round(x / scale) + zero point, 0, 255) (all 0 when scale is 0). */
int ds_qgemm_range(const float *x, int64_t n, float *scale, int32_t *zp);   /* 0: x holds NaN or an infinity */
int ds_qgemm_quantize(const float *x, int64_t n, float scale, int32_t zp, uint8_t *q);   /* 0: NaN or inf */
void ds_qgemm_pack(const int8_t *w, int64_t N, int64_t K, int8_t *wp);   /* the packed layout above */
void ds_qgemm_colsums(const int8_t *w, int64_t N, int64_t K, int32_t *cs);

/* y (M, N) = float(qa @ w^T - za * colsum) * (sa * ws) + bias, row m of qa quantized with (sa[m], za[m]) */
typedef struct {
  int64_t M, N, K, G, Kp;
  const uint8_t *qa;        /* (M, Kp) */
  const float *sa;          /* (M) row scales */
  const int32_t *za;        /* (M) row zero points */
  const int8_t *wp;         /* packed weight */
  const int32_t *cs;        /* (N) weight column sums */
  const float *ws, *bias;   /* (N) weight scales, bias */
  float *y;                 /* (M, N) */
  const qgemm_kernel *kr;   /* set by ds_qgemm_run */
} qgemm_job;
void ds_qgemm_run(qgemm_job *q);
#endif
