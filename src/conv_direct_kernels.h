/* conv_direct_kernels.h: conv_rows and conv_dots (conv_direct.h) written once over a logical 16-float vector.
   A kernel file defines vec, vzero(), vset1(x), vload(p), vstore(p, v), vfma(a, b, c) (a * b + c, one rounding
   per lane), vadd(a, b), vhardswish(v) (el_hardswish_f32 per lane), vlow(v) (its first 8 lanes as a __m256),
   VKEEP(v) (keeps v in registers: the compiler would otherwise reload it as an FMA operand), TILE_ROWS, TILE_NV (vectors per row of a conv_rows tile, at most
   4), DOT_ROWS and DOT_COLS (or CONV_ROWS_ONLY for conv_rows alone), then includes this. */

/* the activation on a tile just stored (in L1), out of line: inside rows_tile its constants spilled accumulators */
__attribute__((noinline)) static void tile_hardswish(int nv, float *c, int64_t ldc) {
  for (int r = 0; r < TILE_ROWS; r++)
    for (int v = 0; v < nv; v++) vstore(c + r * ldc + CONV_LANES * v, vhardswish(vload(c + r * ldc + CONV_LANES * v)));
}

/* TILE_ROWS rows x nv vectors of c, then h (0 or 1) half vectors (8 floats: a ymm, half the multiply-adds of a
   logical vector), all K at once (nv and h are constants in each instantiation). act applies to the nv vectors
   (conv_rows takes half vectors only without it). */
__attribute__((always_inline)) static inline void rows_tile(const int nv, const int h, int64_t K, const float *a,
                                                            int64_t lda, const float *b, const int64_t *koff,
                                                            float *c, int64_t ldc, const float *bias, int act) {
  vec acc[TILE_ROWS * TILE_NV];   /* row r, vector v at acc[r * nv + v] */
  __m256 hacc[TILE_ROWS];         /* row r's half vector */
  for (int i = 0; i < TILE_ROWS * nv; i++) acc[i] = vzero();
  for (int r = 0; r < TILE_ROWS * h; r++) hacc[r] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; k++) {
    const float *bk = b + koff[k];
    vec bv[TILE_NV];
    __m256 hb = h ? _mm256_loadu_ps(bk + CONV_LANES * nv) : _mm256_setzero_ps();
    for (int v = 0; v < nv; v++) bv[v] = vload(bk + CONV_LANES * v);
    for (int r = 0; r < TILE_ROWS; r++) {
      vec ar = vset1(a[r * lda + k]);
      for (int v = 0; v < nv; v++) acc[r * nv + v] = vfma(ar, bv[v], acc[r * nv + v]);
      if (h) hacc[r] = _mm256_fmadd_ps(vlow(ar), hb, hacc[r]);
    }
  }
  if (bias)
    for (int r = 0; r < TILE_ROWS; r++) {
      for (int v = 0; v < nv; v++) acc[r * nv + v] = vadd(acc[r * nv + v], vset1(bias[r]));
      if (h) hacc[r] = _mm256_add_ps(hacc[r], _mm256_set1_ps(bias[r]));
    }
  for (int r = 0; r < TILE_ROWS; r++) {
    for (int v = 0; v < nv; v++) vstore(c + r * ldc + CONV_LANES * v, acc[r * nv + v]);
    if (h) _mm256_storeu_ps(c + r * ldc + CONV_LANES * nv, hacc[r]);
  }
  if (act == CONV_ACT_HARDSWISH) tile_hardswish(nv, c, ldc);
}

/* NV whole vectors and H half vectors (the combinations a TILE_NV-vector tile holds) */
#define ROWS_CASE(NV, H) \
  case 2 * NV + H: rows_tile(NV + H <= TILE_NV ? NV : 1, NV + H <= TILE_NV ? H : 0, K, a + r0 * lda, lda, \
                             b + v0 * CONV_LANES, koff, c + r0 * ldc + v0 * CONV_LANES, ldc, \
                             bias ? bias + r0 : NULL, act); break;

/* column blocks outside, row blocks inside: a block's K windows of B stay in L1 across the rows; the last vector
   a half one when half is set */
static void conv_rows(int64_t rows, int64_t nvec, int64_t K, const float *a, int64_t lda, const float *b,
                      const int64_t *koff, float *c, int64_t ldc, const float *bias, int act, int half) {
  for (int64_t v0 = 0; v0 < nvec; v0 += TILE_NV) {
    int64_t nv = nvec - v0 < TILE_NV ? nvec - v0 : TILE_NV;
    int h = half && v0 + nv == nvec;
    for (int64_t r0 = 0; r0 < rows; r0 += TILE_ROWS)
      switch (2 * (nv - h) + h) {
        ROWS_CASE(4, 0) ROWS_CASE(3, 1) ROWS_CASE(3, 0) ROWS_CASE(2, 1) ROWS_CASE(2, 0) ROWS_CASE(1, 1)
        ROWS_CASE(0, 1) default: ROWS_CASE(1, 0)
      }
  }
}
#undef ROWS_CASE
_Static_assert(TILE_NV >= 1 && TILE_NV <= 4, "conv_rows has one case per vector count 1 .. 4");

#ifndef CONV_ROWS_ONLY
static void conv_dots(int64_t rows, int64_t cols, int64_t nimg, int64_t nvec, const float *d, int64_t ldd,
                      int64_t dstride, const float *b, int64_t bstride, const int64_t *koff, float *acc) {
  for (int64_t r0 = 0; r0 < rows; r0 += DOT_ROWS)
    for (int64_t j0 = 0; j0 < cols; j0 += DOT_COLS) {
      vec s[DOT_ROWS * DOT_COLS];   /* (row r, column j) at s[r * DOT_COLS + j] */
      for (int r = 0; r < DOT_ROWS; r++)
        for (int j = 0; j < DOT_COLS; j++) s[r * DOT_COLS + j] = vload(acc + ((r0 + r) * cols + j0 + j) * CONV_LANES);
      for (int64_t i = 0; i < nimg; i++) {
        const float *di = d + i * dstride + r0 * ldd, *bj[DOT_COLS];
        for (int j = 0; j < DOT_COLS; j++) bj[j] = b + i * bstride + koff[j0 + j];
        for (int64_t v = 0; v < nvec; v++) {
          vec dv[DOT_ROWS];
          for (int r = 0; r < DOT_ROWS; r++) dv[r] = vload(di + r * ldd + CONV_LANES * v);
          for (int j = 0; j < DOT_COLS; j++) {
            vec bv = vload(bj[j] + CONV_LANES * v);   /* unaligned: loaded once, used DOT_ROWS times */
            VKEEP(bv);
            for (int r = 0; r < DOT_ROWS; r++) s[r * DOT_COLS + j] = vfma(dv[r], bv, s[r * DOT_COLS + j]);
          }
        }
      }
      for (int r = 0; r < DOT_ROWS; r++)
        for (int j = 0; j < DOT_COLS; j++) vstore(acc + ((r0 + r) * cols + j0 + j) * CONV_LANES, s[r * DOT_COLS + j]);
    }
}
#endif
