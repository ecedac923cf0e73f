/* sgemm_rows_t.h: the transposed-B row kernel rows_t() (sgemm.h), included by both ISA files after their row kernel.
   The including file defines T_NV(m), the 8-column groups (1 .. 4) a block gives m rows. Both ISAs use 8-float
   vectors here: transposing is the cost (24 in-lane shuffles per 64 floats, ~3 us of 1 x 256 x 256), and Zen 4 runs
   a 16 x 16 zmm transpose no faster per float (tried: 35-70% slower); the AVX-512 file's build gives it 32 registers. */

/* lanes [0, n) of 8 set (n clamped to 0..8): the mask of _mm256_maskload_ps / _mm256_maskstore_ps */
static inline __m256i t_lanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n < 0 ? 0 : n > 8 ? 8 : n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* t[j] (j < 4) = W's column k + j across rows r0 .. r0 + 7 of the block at wk = w + k (row stride ldw; with clamp,
   rows from n on read as the block's row 0): the 128-bit runs at k of rows i and i + 4 paired as they load
   (vinsertf128 from memory; masked loads of the k's left when tail), then two rounds of in-lane shuffles */
__attribute__((always_inline)) static inline void t_quad(__m256 t[4], const float *wk, int r0, int64_t ldw,
                                                         const int clamp, int64_t n, const int tail, __m128i mk) {
  __m256 s[4];
  for (int i = 0; i < 4; i++) {
    const float *lo_row = wk + (clamp && r0 + i >= n ? 0 : r0 + i) * ldw;
    const float *hi_row = wk + (clamp && r0 + i + 4 >= n ? 0 : r0 + i + 4) * ldw;
    __m128 lo = tail ? _mm_maskload_ps(lo_row, mk) : _mm_loadu_ps(lo_row);
    __m128 hi = tail ? _mm_maskload_ps(hi_row, mk) : _mm_loadu_ps(hi_row);
    s[i] = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
  }
  __m256 u0 = _mm256_unpacklo_ps(s[0], s[1]), u1 = _mm256_unpackhi_ps(s[0], s[1]);
  __m256 u2 = _mm256_unpacklo_ps(s[2], s[3]), u3 = _mm256_unpackhi_ps(s[2], s[3]);
  t[0] = _mm256_shuffle_ps(u0, u2, _MM_SHUFFLE(1, 0, 1, 0));
  t[1] = _mm256_shuffle_ps(u0, u2, _MM_SHUFFLE(3, 2, 3, 2));
  t[2] = _mm256_shuffle_ps(u1, u3, _MM_SHUFFLE(1, 0, 1, 0));
  t[3] = _mm256_shuffle_ps(u1, u3, _MM_SHUFFLE(3, 2, 3, 2));
}

/* m rows x nv groups of 8 columns of c (n of them; clamp: W's rows past n read as row 0, their lanes masked off),
   all K at once: acc = load_c ? c : +0, then one FMA per k in order, so the same chain as every other kernel. W's
   rows are read along k four floats at a time and transposed in registers, each quad feeding all m rows. The
   groups run T_CH k's (a cache line of each row) in turn, group v T_CH * v k's behind group 0: rows whose stride
   is a multiple of 4 KiB share one L1 set at the same k, and 32 of them in step evicted each other's lines before
   their four quads were read (1 x 1024 x 1024, Zen 4: 425 -> 142 us; each group a whole line per turn but in step:
   197). Every row's address is recomputed per turn from w, k and ldw (made opaque to the compiler there): held one
   register a row, the 32 rows of a block spilled and the loop ran at half speed. */
#define T_CH 16
__attribute__((always_inline)) static inline void t_block(const int m, const int nv, const int clamp, int64_t n,
                                                          int64_t K, const float *a, int64_t ars, int64_t acs,
                                                          const float *w, int64_t ldw, float *c, int64_t ldc,
                                                          int load_c) {
  __m256i mk[4];
  __m256 acc[8 * 4];   /* row r, group v at acc[r * nv + v] */
SGEMM_UNROLL_WHOLE(4)
  for (int v = 0; v < nv; v++) mk[v] = t_lanes(n - 8 * v);
SGEMM_UNROLL_WHOLE(8)
  for (int r = 0; r < m; r++)
SGEMM_UNROLL_WHOLE(4)
    for (int v = 0; v < nv; v++)
      acc[r * nv + v] = load_c ? _mm256_maskload_ps(c + r * ldc + 8 * v, mk[v]) : _mm256_setzero_ps();
  const __m128i none = _mm_setzero_si128();
  const int64_t turns = K / T_CH;
  for (int64_t s = 0; s < turns + nv - 1; s++) {
    int64_t L = ldw;
    __asm__("" : "+r"(L));
SGEMM_UNROLL_WHOLE(4)
    for (int v = 0; v < nv; v++) {
      if (s < v || s - v >= turns) continue;
      const int64_t kv = (s - v) * T_CH;
SGEMM_UNROLL_WHOLE(4)
      for (int q = 0; q < T_CH; q += 4) {
        const int64_t k = kv + q;
        __m256 t[4];
        t_quad(t, w + k, 8 * v, L, clamp, n, 0, none);
SGEMM_UNROLL_WHOLE(4)
        for (int j = 0; j < 4; j++)
SGEMM_UNROLL_WHOLE(8)
          for (int r = 0; r < m; r++)
            acc[r * nv + v] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + r * ars + (k + j) * acs), t[j], acc[r * nv + v]);
      }
    }
  }
  int64_t k = turns * T_CH;
  for (; k + 4 <= K; k += 4)
SGEMM_UNROLL_WHOLE(4)
    for (int v = 0; v < nv; v++) {
      __m256 t[4];
      t_quad(t, w + k, 8 * v, ldw, clamp, n, 0, none);
SGEMM_UNROLL_WHOLE(4)
      for (int j = 0; j < 4; j++)
SGEMM_UNROLL_WHOLE(8)
        for (int r = 0; r < m; r++)
          acc[r * nv + v] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + r * ars + (k + j) * acs), t[j], acc[r * nv + v]);
    }
  if (k < K) {   /* the last 1-3 k's: masked loads */
    const int kk = (int)(K - k);
    const __m128i mq = _mm_cmpgt_epi32(_mm_set1_epi32(kk), _mm_setr_epi32(0, 1, 2, 3));
SGEMM_UNROLL_WHOLE(4)
    for (int v = 0; v < nv; v++) {
      __m256 t[4];
      t_quad(t, w + k, 8 * v, ldw, clamp, n, 1, mq);
      for (int j = 0; j < kk; j++)
SGEMM_UNROLL_WHOLE(8)
        for (int r = 0; r < m; r++)
          acc[r * nv + v] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + r * ars + (k + j) * acs), t[j], acc[r * nv + v]);
    }
  }
SGEMM_UNROLL_WHOLE(8)
  for (int r = 0; r < m; r++)
SGEMM_UNROLL_WHOLE(4)
    for (int v = 0; v < nv; v++) _mm256_maskstore_ps(c + r * ldc + 8 * v, mk[v], acc[r * nv + v]);
}

/* the columns of m = M rows in blocks of T_NV(M) groups, then the rest in one block of the fewest groups (W's rows
   past n clamped) */
#define T_AT(j) K, a, ars, acs, w + (j) * ldw, ldw, c + (j), ldc, load_c
#define T_ROWS_CASE(M) case M: { \
    const int nv = T_NV(M); \
    int64_t j = 0; \
    for (; j + 8 * nv <= n; j += 8 * nv) t_block(M, nv, 0, 8 * nv, T_AT(j)); \
    int64_t g = (n - j + 7) / 8; \
    if (g == 1) t_block(M, 1, 1, n - j, T_AT(j)); \
    else if (g == 2 && nv > 2) t_block(M, 2, 1, n - j, T_AT(j)); \
    else if (g > 0) t_block(M, nv, 1, n - j, T_AT(j)); \
    break; \
  }
static void rows_t(int m, int64_t n, int64_t K, const float *a, int64_t ars, int64_t acs, const float *w,
                   int64_t ldw, float *c, int64_t ldc, int load_c) {
  switch (m) {
    T_ROWS_CASE(1) T_ROWS_CASE(2) T_ROWS_CASE(3) T_ROWS_CASE(4)
    T_ROWS_CASE(5) T_ROWS_CASE(6) T_ROWS_CASE(7) T_ROWS_CASE(8)
  }
}
