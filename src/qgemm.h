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

/* Where a tile's outputs go, offset to its first row and column: y[r][c] = float(acc - za[r] * cs[c]) *
   (sa[r] * ws[c]) + bias[c], each step one int32 or IEEE f32 operation in that order on every path, so the bits
   are the same (ds_qgemm_store writes it out; a vector kernel may compute it in its registers). */
typedef struct {
  const float *sa;          /* row scales */
  const int32_t *za;        /* row zero points */
  const int32_t *cs;        /* weight column sums */
  const float *ws, *bias;   /* weight scales, bias */
  float *y;
  int64_t ldy;
} qgemm_out;

/* y (mr x nr) of o = a (mr x 4 G u8, row stride lda; k past K is any value: it meets zero weights) @ the strips
   at b (G groups of 64 bytes each, one after another), 1 <= mr <= the kernel's mr, 1 <= nr <= its nr. The sums
   are exact in int32 (|sum| < 2^31 for K <= QG_K_MAX), so every path gives the same values. */
typedef void (*qgemm_micro_fn)(int mr, int nr, int64_t G, const uint8_t *a, int64_t lda, const int8_t *b,
                               const qgemm_out *o);
typedef struct {
  int mr, nr;          /* rows and columns per call (nr: 16 or 32, whole strips) */
  qgemm_micro_fn micro;
} qgemm_kernel;

/* the epilogue above from a tile of int32 sums (row stride ldt); |za * cs| <= 255 * 128 * K and the difference,
   sum (q - za) * w, are below 2^31 for K <= QG_K_MAX: int32 gives the same integer as int64 */
static inline void ds_qgemm_store(const int32_t *tile, int64_t ldt, int mr, int nr, const qgemm_out *o) {
  for (int r = 0; r < mr; r++) {
    float *yr = o->y + r * o->ldy;
    int32_t zr = o->za[r];
    float sr = o->sa[r];
    for (int c = 0; c < nr; c++) {
      int32_t v = tile[r * ldt + c] - zr * o->cs[c];
      float scale = sr * o->ws[c];
      float d = (float)v * scale;
      yr[c] = d + o->bias[c];
    }
  }
}

/* 255 * 127 * K < 2^31 */
#define QG_K_MAX 65536

extern const qgemm_kernel ds_qgemm_avx2, ds_qgemm_vnni, ds_qgemm_vnni_wide;

/* The driver's pieces, shared with qconv.c (qgemm.c). Quantization of f32 values to u8 (round half to even):
   the range [lo, hi] = [min(0, min x), max(0, max x)], scale = (hi - lo) / 255, zero point =
   round(clamp(-lo / scale, 0, 255)); q = clamp(round(x / scale) + zero point, 0, 255) (all 0 when scale is 0). */
int ds_qgemm_range(const float *x, int64_t n, float *scale, int32_t *zp);   /* 0: x holds NaN or an infinity */
int ds_qgemm_quantize(const float *x, int64_t n, float scale, int32_t zp, uint8_t *q);   /* 0: NaN or inf */
void ds_qgemm_pack(const int8_t *w, int64_t N, int64_t K, int8_t *wp);   /* the packed layout above */
/* qgemm.c's range over runs and quantization of finite x (scale > 0) on AVX-512 hosts: the same values */
int ds_qgemm_range_runs_avx512(const float *x, int64_t nseg, int64_t len, int64_t step, float *lo, float *hi);
void ds_qgemm_quantize_avx512(const float *x, int64_t n, float scale, int32_t zp, uint8_t *q);
void ds_qgemm_colsums(const int8_t *w, int64_t N, int64_t K, int32_t *cs);

/* One output of a product whose columns go to several tensors (linears over one input, their packed weights one
   after another, each padded to whole strips): columns [c, c + N) of cs, ws and bias, strips from `strip` on of
   wp, written to y (M, N). */
typedef struct {
  int64_t N, c, strip;
  float *y;
} qgemm_part;
#define QG_MAX_PARTS 16

/* y (M, N) = float(qa @ w^T - za * colsum) * (sa * ws) + bias, row m of qa quantized with (sa[m], za[m]). With x
   set, the rows of x are quantized into qa, sa, za first (with fixed, by fscale and fzp; otherwise each by its own
   range); with w set, w is packed into wp and its column sums into cs first (each thread the columns it
   multiplies). With parts set, y is split by columns into them (N their sum; w must be NULL). */
typedef struct {
  int64_t M, N, K, G, Kp;
  const float *x;           /* (M, K) f32 to quantize, or NULL */
  const int64_t *xrow;      /* NULL: row m of x at m * K; else row m at x + xrow[m], as nseg runs of K / nseg */
  int64_t nseg, segstride;  /* unit-stride values, run s at s * segstride */
  int fixed;
  float fscale;
  int32_t fzp;
  uint8_t *qa;              /* (M, Kp) */
  float *sa;                /* (M) row scales */
  int32_t *za;              /* (M) row zero points */
  const int8_t *w;          /* (N, K) s8 to pack, or NULL */
  int8_t *wp;               /* packed weight */
  int32_t *cs;              /* (N) weight column sums */
  const float *ws, *bias;   /* (N) weight scales, bias */
  float *y;                 /* (M, N), or NULL with parts */
  int nparts;
  const qgemm_part *parts;  /* NULL: one part, y */
  const qgemm_kernel *kr;   /* set by ds_qgemm_run */
  int bad;                  /* set by ds_qgemm_run: x holds NaN or an infinity */
} qgemm_job;
int ds_qgemm_run(qgemm_job *q);   /* 0: x holds NaN or an infinity (y is not written) */
#endif
