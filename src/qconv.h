/* qconv.h: the contract between qconv.c's int8 convolution driver and its per-ISA band kernels (u8 input taps
   times s8 weights in exact int32 sums, the pixels along the vector lanes, the output written in (O, pixels)
   order). */
#ifndef DS_QCONV_H
#define DS_QCONV_H
#include <stdint.h>

/* One band of n output pixels of one image. Its taps: a (G, bw, 4) u8, a[(g * bw + p) * 4 + t] = the quantized
   input under tap t of k-group g (qconv.c groups the K = C kh kw taps four by four) of pixel p (the zero point
   in the padding; any value for a missing tap, which meets a zero weight), bw a multiple of 16 >= n rounded up to
   16, the pixels in [n, that) readable (their outputs are not written). Each output is y[o * ldy + p] = float(acc - za * cs[o]) * (sa * ws[o]) + bias[o], acc the exact int32
   sum over k of tap times weight, each step one int32 or IEEE f32 operation in that order on every path (the
   order of qgemm.h's ds_qgemm_store), so the bits are the same. */
typedef struct {
  int64_t G, bw, n, O;
  const uint8_t *a;        /* (G, bw, 4) taps */
  const int32_t *wk;       /* (O, G): the four s8 weights of each group's taps (0 for a missing one) */
  const int32_t *w16;      /* (O, G, 2): the group's weights t = 0, 2 and t = 1, 3 as int16 pairs (AVX2) */
  const int32_t *cs;       /* (O) weight sums over k */
  const float *ws, *bias;  /* (O) weight scales, bias */
  int32_t za;              /* the image's zero point */
  float sa;                /* and scale */
  float *y;                /* the band's first pixel of channel 0 */
  int64_t ldy;             /* channel stride of y */
} qconv_band;

typedef void (*qconv_band_fn)(const qconv_band *b);
void ds_qconv_band_vnni(const qconv_band *b);   /* qconv_avx512.c: 64 pixels x 6 channels per tile */
void ds_qconv_band_avx2(const qconv_band *b);   /* qconv_avx2.c: 16 pixels x 4 channels per tile */
/* qconv_vbmi.c: one k-group's taps of unit-stride pixels on AVX-512 VBMI hosts: d[4 p + t] = base[t][off_p],
   pixel p of n from column ow of the output row at offset row on (rows of OW, rowstep bytes apart); window: the
   four taps are adjacent columns (base[t] = base[0] + t) */
void ds_qconv_gather_vbmi(const uint8_t *const *base, int window, int64_t ow, int64_t row, int64_t OW,
                          int64_t rowstep, int64_t n, uint8_t *d);

/* the epilogue of one output */
static inline float ds_qconv_value(int32_t acc, int32_t zc, float scale, float bias) {
  float d = (float)(acc - zc) * scale;
  return d + bias;
}
#endif
