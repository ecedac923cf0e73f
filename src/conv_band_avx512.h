/* conv_band_avx512.h: what the AVX-512 band kernels of the int8 and bf16 convolutions (qconv_avx512.c,
   bgemm_conv_avx512.c) share whatever their element type: the lane masks of a tile's pixel vectors and the loop
   over a band's tiles of up to CONV_BAND_NV x 16 pixels by CONV_BAND_NO output channels, each tile shape a call of
   the including file's tile(nv, no, b, p0, o0) with constant nv and no; include after the target pragma. */
#ifndef DS_CONV_BAND_AVX512_H
#define DS_CONV_BAND_AVX512_H
#include <immintrin.h>
#include <stdint.h>

#define CONV_BAND_NV 4   /* pixel vectors per tile */
#define CONV_BAND_NO 6   /* channels per tile */

/* m[v] for v < nv: the lanes of the tile's vector v (pixels p0 + 16 v ..) that lie in the band's n pixels */
#define CONV_BAND_MASKS(m, nv, n, p0) \
  for (int v_ = 0; v_ < (nv); v_++) { \
    int64_t left_ = (n) - (p0) - 16 * v_; \
    (m)[v_] = left_ >= 16 ? 0xffff : (__mmask16)((1u << left_) - 1); \
  }

#define CONV_BAND_ROW(V) \
  case V: \
    switch (no) { \
      case 6: tile(V, 6, b, p0, o0); break; case 5: tile(V, 5, b, p0, o0); break; \
      case 4: tile(V, 4, b, p0, o0); break; case 3: tile(V, 3, b, p0, o0); break; \
      case 2: tile(V, 2, b, p0, o0); break; default: tile(V, 1, b, p0, o0); \
    } \
    break;
/* the tile at (p0, o0) of nv vectors by no channels, nv and no as constants */
#define CONV_BAND_TILE \
  switch (nv) { CONV_BAND_ROW(4) CONV_BAND_ROW(3) CONV_BAND_ROW(2) default: CONV_BAND_ROW(1) }
/* void NAME(const BAND *b): every tile of band b (b->n pixels by b->O channels) through tile() */
#define CONV_BAND_KERNEL(NAME, BAND) \
  void NAME(const BAND *b) { \
    for (int64_t p0 = 0; p0 < b->n; p0 += 16 * CONV_BAND_NV) { \
      int nv = (int)((b->n - p0 + 15) / 16 < CONV_BAND_NV ? (b->n - p0 + 15) / 16 : CONV_BAND_NV); \
      for (int64_t o0 = 0; o0 < b->O; o0 += CONV_BAND_NO) { \
        int no = (int)(b->O - o0 < CONV_BAND_NO ? b->O - o0 : CONV_BAND_NO); \
        CONV_BAND_TILE \
      } \
    } \
  }

#endif
