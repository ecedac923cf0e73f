/* conv_lanes_kernels.h: lanes_conv (conv_lanes.h) written once over a logical 16-float vector. A kernel file
   defines vec, vzero(), vset1(x), vload(p), vstore(p, v), vfma(a, b, c) (a * b + c, one rounding per lane),
   vadd(a, b), vrelu(v) and vhardswish(v) (el_relu_f32 / el_hardswish_f32 per lane), LANES_ROWS and LANES_PIX (the
   register tile: output channels x pixels), then includes this. */

/* nr channels x np pixels (constants in each instantiation) starting at pixel p0, all K at once */
__attribute__((always_inline)) static inline void lanes_tile(const int nr, const int np, int64_t p0, int64_t K,
                                                             const float *w, const float *xb, const int64_t *koff,
                                                             const int64_t *poff, float *ob, int64_t ldo,
                                                             const float *bias, int act) {
  vec acc[LANES_ROWS * LANES_PIX];   /* channel i, pixel p at acc[i * np + p] */
  const float *base[LANES_PIX];
  for (int p = 0; p < np; p++) base[p] = xb + poff[p0 + p];
  for (int i = 0; i < nr * np; i++) acc[i] = vzero();
  for (int64_t k = 0; k < K; k++) {
    int64_t o = koff[k];
    vec xv[LANES_PIX];
    for (int p = 0; p < np; p++) xv[p] = vload(base[p] + o);
    for (int i = 0; i < nr; i++) {
      vec wv = vset1(w[k * LANES_ROWS + i]);
      for (int p = 0; p < np; p++) acc[i * np + p] = vfma(wv, xv[p], acc[i * np + p]);
    }
  }
  for (int i = 0; i < nr; i++)
    for (int p = 0; p < np; p++) {
      vec v = acc[i * np + p];
      if (bias) v = vadd(v, vset1(bias[i]));
      if (act == CONV_ACT_RELU) v = vrelu(v);
      else if (act == CONV_ACT_HARDSWISH) v = vhardswish(v);
      vstore(ob + i * ldo + (p0 + p) * 16, v);
    }
}

#define LANES_CASE(NR, NP) \
  case NR * 8 + NP: \
    if (NR <= LANES_ROWS && NP <= LANES_PIX) \
      lanes_tile(NR <= LANES_ROWS ? NR : 1, NP <= LANES_PIX ? NP : 1, p0, K, w, xb, koff, poff, ob, ldo, bias, act); \
    break;
#define LANES_CASES(NR) LANES_CASE(NR, 1) LANES_CASE(NR, 2) LANES_CASE(NR, 3) LANES_CASE(NR, 4)

/* the pixels in tiles of LANES_PIX in raster order (a tile may span output rows), the last one smaller */
static void lanes_conv(int64_t rows, int64_t npix, int64_t K, const float *w, const float *xb, const int64_t *koff,
                       const int64_t *poff, float *ob, int64_t ldo, const float *bias, int act) {
  for (int64_t p0 = 0; p0 < npix; p0 += LANES_PIX) {
    int64_t np = npix - p0 < LANES_PIX ? npix - p0 : LANES_PIX;
    switch (rows * 8 + np) {
      LANES_CASES(1) LANES_CASES(2) LANES_CASES(3) LANES_CASES(4) LANES_CASES(5) LANES_CASES(6)
      LANES_CASES(7) LANES_CASES(8)
    }
  }
}
#undef LANES_CASES
#undef LANES_CASE
_Static_assert(LANES_ROWS >= 1 && LANES_ROWS <= 8 && LANES_PIX >= 1 && LANES_PIX <= 4,
               "lanes_conv has one case per tile of 1 .. 8 channels x 1 .. 4 pixels");
