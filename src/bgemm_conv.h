/* bgemm_conv.h: the contract between bgemm_conv.c's bf16 convolution driver and its per-ISA band kernels: the
   output pixels along the vector lanes, each output ds's bf16 dot (bgemm.h) over the pairs of k plus the f32
   bias, written in (OC, pixels) order. */
#ifndef DS_BGEMM_CONV_H
#define DS_BGEMM_CONV_H
#include <stdint.h>

/* One band of n output pixels of one image. a (P, bw) words: a[p * bw + i] = the taps k = 2p (bits 0-15) and
   2p + 1 (bits 16-31, 0 past K) of pixel i, k = (c, kh, kw) in PyTorch's unfold order, subnormals zeroed, 0 in the
   padding; bw a multiple of 16 >= n, the pixels in [n, n rounded up to 16) readable (their outputs are not
   written). Output o of pixel i: y[o * ldy + i] = dot(a[., i], w[o, .]) (a NaN made BG_NAN) + bias[o]. */
typedef struct {
  int64_t P, bw, n, O;
  const uint32_t *a;    /* (P, bw) taps */
  const uint32_t *w;    /* (O, P) the weight's pairs, as the taps */
  const float *wf;      /* (O, P, 2) the same as f32: the odd k, then the even k (AVX2, portable) */
  const float *bias;    /* (O) */
  float *y;             /* the band's first pixel of channel 0 */
  int64_t ldy;          /* channel stride of y */
} bconv_band;

typedef void (*bconv_band_fn)(const bconv_band *b);
void ds_bconv_band_avx512bf16(const bconv_band *b);   /* bgemm_conv_avx512.c: 64 pixels x 6 channels a tile */
void ds_bconv_band_avx2(const bconv_band *b);         /* bgemm_conv_avx2.c: 16 pixels x 4 channels a tile */
/* bgemm_conv_gather_avx512.c: one pair's taps of n unit-stride pixels on AVX-512 hosts, d[p] = s0[off_p] |
   s1[off_p] << 16 (s1 NULL: 0), pixel p from column ow of the output row at offset row on (rows of OW, rowstep
   values apart) */
void ds_bconv_gather_avx512(const uint16_t *s0, const uint16_t *s1, int64_t ow, int64_t row, int64_t OW,
                            int64_t rowstep, int64_t n, uint32_t *d);
#endif
