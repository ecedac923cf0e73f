/* bgemm.h: the contract between bgemm.c's bf16 GEMM driver and its per-ISA micro-kernels: c (M, N) f32 =
   a (M, K) bf16 @ b (K, N) bf16 with ds's bf16 dot (docs/DTYPES.md, "bf16 compute"): per output, acc = +0, then
   for each pair of k (2p, 2p + 1) in order acc = ftz(fma(a[2p+1], b[2p+1], acc)), acc = ftz(fma(a[2p], b[2p],
   acc)), each fma rounded once to nearest even, bf16 subnormal inputs read as zeros of their sign and a
   subnormal acc flushed to the zero of its sign; a NaN result is 0x7fc00000. That is exactly what vdpbf16ps
   computes (bench/bf16_dot_probe.c), and the AVX2 and portable paths write it out. */
#ifndef DS_BGEMM_H
#define DS_BGEMM_H
#include <stdint.h>

/* Operands as 32-bit words, one per pair of k: bits 0-15 the bf16 of k = 2p, bits 16-31 that of k = 2p + 1 (0
   past K), subnormals already zeroed (ds_bgemm_pack_*). The packed b: strips of BG_NR = 16 columns; strip s
   holds, for pair p, 16 words: word j = the pair of column 16 s + j (0 past N). Shape (ceil(N / 16), P, 16)
   words, P = ceil(K / 2): the same layout on every host. */
#define BG_NR 16

/* c (mr x nr, row stride ldc) = a (mr rows of P words, row stride lda) @ the strips at b (strip after strip, P *
   16 words each), a NaN stored as BG_NAN, 1 <= mr <= the kernel's mr, 1 <= nr <= its nr */
typedef void (*bgemm_micro_fn)(int mr, int nr, int64_t P, const uint32_t *a, int64_t lda, const uint32_t *b,
                               float *c, int64_t ldc);
typedef struct {
  int mr, nr;          /* rows and columns per call (nr: 16 or 32, whole strips) */
  bgemm_micro_fn micro;
} bgemm_kernel;

extern const bgemm_kernel ds_bgemm_avx2, ds_bgemm_avx512bf16;

#define BG_NAN 0x7fc00000u   /* the one NaN the products give */

/* the bf16 bits with a subnormal made the zero of its sign (vdpbf16ps's denormals-are-zero) */
static inline uint32_t ds_bgemm_daz(uint16_t h) { return (h & 0x7f80u) ? h : (uint32_t)(h & 0x8000u); }
/* the f32 values of a word's halves (k = 2p + 1, k = 2p) */
static inline float ds_bgemm_odd(uint32_t w) { union { uint32_t u; float f; } v = { w & 0xffff0000u }; return v.f; }
static inline float ds_bgemm_even(uint32_t w) { union { uint32_t u; float f; } v = { w << 16 }; return v.f; }
/* a subnormal made the zero of its sign (vdpbf16ps's flush-to-zero) */
static inline float ds_bgemm_ftz(float x) {
  union { float f; uint32_t u; } v = { x };
  if (!(v.u & 0x7f800000u)) v.u &= 0x80000000u;
  return v.f;
}

void ds_bgemm_pack_a(const uint16_t *a, int64_t M, int64_t K, uint32_t *ap);   /* (M, P) words */
void ds_bgemm_pack_b(const uint16_t *b, int64_t K, int64_t N, uint32_t *bp);   /* the strips above */
/* c (M, N) f32 = ap (M, P) @ bp (packed, N columns); with a (M, K) bf16 not NULL, a is packed into ap first, with
   b (K, N) bf16 not NULL, b into bp (the threads splitting its rows, its strips) */
void ds_bgemm_run(int64_t M, int64_t N, int64_t K, const uint16_t *a, uint32_t *ap, const uint16_t *b, uint32_t *bp,
                  float *c);
const char *ds_bf16_path(void);   /* "avx512-bf16", "avx2" or "scalar" */
#endif
