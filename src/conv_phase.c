/* conv_phase.c: an image's planes, zero-bordered and split by stride phase (or by kernel column), so that every
   window a strided convolution reads is one contiguous run over its wide output (the direct and the depthwise
   forward passes). */
#include "internal.h"
#include "nn_conv.h"

void conv_phase_init(phase_geom *p, int64_t C, int64_t H, int64_t W, int64_t top, int64_t left, int64_t Hp,
                     int64_t Wp, int64_t sh, int64_t sw) {
  p->C = C; p->H = H; p->W = W; p->top = top; p->left = left; p->sh = sh; p->sw = sw;
  p->Hq = (Hp + sh - 1) / sh; p->Wq = (Wp + sw - 1) / sw;
  p->plane = p->Hq * p->Wq;
  p->kx = 0; p->kdw = 1;
}

void conv_phase_init_cols(phase_geom *p, int64_t C, int64_t H, int64_t W, int64_t top, int64_t left, int64_t Hp,
                          int64_t OW, int64_t KW, int64_t sw, int64_t dw) {
  p->C = C; p->H = H; p->W = W; p->top = top; p->left = left; p->sh = 1; p->sw = sw;
  p->Hq = Hp; p->Wq = OW; p->plane = Hp * OW; p->kx = KW; p->kdw = dw;
}

/* window (c, kh, kw) of output (oh, ow) starts in phase plane (c, (kh*dh) % sh, (kw*dw) % sw) at row
   oh + (kh*dh) / sh, column ow + (kw*dw) / sw: at koff + oh * Wq + ow */
void conv_phase_offsets(const phase_geom *p, int64_t KH, int64_t KW, int64_t dh, int64_t dw, int64_t *koff) {
  if (p->kx) {   /* column planes: window (c, kh, kw) is plane (c, kw) from row kh * dh */
    for (int64_t c = 0; c < p->C; c++)
      for (int64_t kh = 0; kh < KH; kh++)
        for (int64_t kw = 0; kw < KW; kw++) koff[(c * KH + kh) * KW + kw] = (c * p->kx + kw) * p->plane + kh * dh * p->Wq;
    return;
  }
  /* the divisions once per tap (kh, kw), the channels inside: a 1x1 conv over 80 channels spent ~1 us on them */
  int64_t cstride = p->sh * p->sw * p->plane, KK = KH * KW;
  for (int64_t kh = 0; kh < KH; kh++)
    for (int64_t kw = 0; kw < KW; kw++) {
      int64_t r = kh * dh, q = kw * dw;
      int64_t o = (r % p->sh * p->sw + q % p->sw) * p->plane + r / p->sh * p->Wq + q / p->sw;
      for (int64_t c = 0, *k = koff + kh * KW + kw; c < p->C; c++, k += KK, o += cstride) *k = o;
    }
}

/* whether a phase buffer of len elements would be the image itself: no border, stride 1, and no window reading
   past the planes */
int conv_phase_is_image(const phase_geom *p, int64_t len) {
  return !p->kx && p->sh == 1 && p->sw == 1 && p->top == 0 && p->left == 0 && p->Hq == p->H && p->Wq == p->W &&
         len == p->C * p->plane;
}

/* elements a phase buffer needs so that each window (offsets koff[0 .. K)) can be read for span elements */
int64_t conv_phase_len(const phase_geom *p, const int64_t *koff, int64_t K, int64_t span) {
  int64_t n = p->C * (p->kx ? p->kx : p->sh * p->sw) * p->plane;
  for (int64_t k = 0; k < K; k++) if (koff[k] + span > n) n = koff[k] + span;
  return n;
}

/* stride-2 columns: input column w of a row goes to phase (w + left) % 2, column (w + left) / 2; the even input
   columns land in phase row e from e0 on (ne of them), the odd ones in phase row o from o0 on (no of them) */
typedef struct { int64_t e_odd, e0, o0, ne, no; int avx512; } split2;   /* avx512: f32 runs by conv_deint2_avx512 */
static split2 split2_of(int64_t W, int64_t left, int64_t Wq) {
  split2 t = { left & 1, left >> 1, (left + 1) >> 1, (W + 1) >> 1, W >> 1, ds_isa() == DS_ISA_AVX512 };
  t.e0 = t.e0 < Wq ? t.e0 : Wq; t.o0 = t.o0 < Wq ? t.o0 : Wq;
  if (t.ne > Wq - t.e0) t.ne = Wq - t.e0;
  if (t.no > Wq - t.o0) t.no = Wq - t.o0;
  return t;
}
/* short row copies: a plain loop, not a memcpy call per 10-element row */
#define NO_MEMCPY __attribute__((optimize("no-tree-loop-distribute-patterns")))
#define KERNELS "conv_phase_kernels.h"
#include "float_kernels.h"
