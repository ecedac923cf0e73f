/* sgemm.h: the contract between sgemm.c's blocking driver and the per-ISA f32 micro-kernels. */
#ifndef DS_SGEMM_H
#define DS_SGEMM_H
#include <stdint.h>

/* c (mr x nr, row stride ldc) = ap (mr x kc) @ b (kc x nr), 1 <= mr <= MR, 1 <= nr <= NR.
   ap: an A panel packed k-major, MR values per k (rows past mr are padding and never read into c).
   b: row k at b + k * ldb (a packed strip, ldb = NR, or B itself); columns past nr are never read.
   Every c element is one FMA chain: acc = load_c ? c : +0, then acc = fmaf(a[k], b[k], acc) for k in
   order. Every kernel keeps this rule exactly, so all ISA paths give the same bits.
   next_c: the C tile the driver's next call will use (same ldc), or NULL. The kernel prefetches its rows (for
   writing where the ISA has PREFETCHW: the AVX-512 kernel), one row per SGEMM_CPF_K k's, while this tile
   computes: a tile's first read (or first store) of C would otherwise wait on memory (ds writes into fresh
   outputs, and C goes out to L3 between k blocks). Zen 5, 1 thread, outputs cold like the bench's: n = 512
   161 -> 185 GFLOP/s, 1024 180 -> 197, 2048 153 -> 184; 2 threads n = 1024 308 -> 346. A prefetch never
   faults, so rows past C's end are harmless. */
#define SGEMM_CPF_K 8
typedef void (*sgemm_micro_fn)(int mr, int nr, int64_t kc, const float *ap, const float *b, int64_t ldb, float *c,
                               int64_t ldc, int load_c, const float *next_c);
/* B layouts: element (k, col) at b[k * ldb + (col >> 5) * sstride + (col & 31)]. A matrix with unit column
   stride has sstride = 32 (row k at b + k * ldb); prepacked strips (ds_sgemm_pack_b) have ldb = 32 and
   sstride = 32 * K: strip s holds columns 32s .. 32s+31 for every k, contiguous, so a weight streams from
   memory in order. Kernels take b at a column that starts a strip or lies inside one with the whole block
   (NR divides 32; rows() blocks are multiples of 32 columns or divide 32).
   c (m x n, row stride ldc) = a (m x K, a (i, k) at a[i * ars + k * acs]) @ b (K x n, either layout),
   1 <= m <= SGEMM_ROWS_MAX, any n, all K in one pass: for a few rows against a B read in place (a frozen
   weight), walking each B row along its columns instead of down NR-column strips. The same FMA chain per c
   element as micro(), so the same bits. */
#define SGEMM_ROWS_MAX 8
/* the row kernel's loops over rows and vectors, unrolled whole by GCC so every accumulator stays a register; clang,
   which builds only the sanitizer and fuzz libraries, is left to choose: unrolled whole under its sanitizers one
   file took over 5 minutes to compile. Unrolling changes no arithmetic (the same bits either way). */
#define SGEMM_PRAGMA(x) _Pragma(#x)
#ifdef __clang__
#define SGEMM_UNROLL_WHOLE(n)
#else
#define SGEMM_UNROLL_WHOLE(n) SGEMM_PRAGMA(GCC unroll n)   /* n: the most trips (ACC, the accumulators) */
#endif
#define SGEMM_STRIP 32
typedef void (*sgemm_rows_fn)(int m, int64_t n, int64_t K, const float *a, int64_t ars, int64_t acs, const float *b,
                              int64_t ldb, int64_t sstride, float *c, int64_t ldc, int load_c);
/* c (m x n, row stride ldc) = a (m x K, as rows()) @ W^T for W (n x K) row-major (row stride ldw, k unit-stride: a
   linear layer's weight not prepacked), 1 <= m <= SGEMM_ROWS_MAX, any n, all K in one pass: W's rows read along k
   and transposed in registers (sgemm_rows_t.h). The same FMA chain per c element as micro(), so the same bits. */
typedef void (*sgemm_rows_t_fn)(int m, int64_t n, int64_t K, const float *a, int64_t ars, int64_t acs, const float *w,
                                int64_t ldw, float *c, int64_t ldc, int load_c);
typedef struct {
  int mr, nr;             /* micro-tile rows and columns */
  sgemm_micro_fn micro;
  sgemm_rows_fn rows;
  sgemm_rows_t_fn rows_t;
  int rows_group;         /* > 0: rows() is faster on m > rows_group + 2 rows in two groups, rows_group rows and the
                             rest, each a pass over B (the driver runs them so: sgemm.c's rows_at) */
} sgemm_kernel;

/* A kernel file defines MR, NR and tile(mr, full, ahead, nr, kc, ap, b, ldb, c, ldc, load_c, next_c) (always
   inline), then SGEMM_MICRO: its micro() calls tile with mr (1 .. MR <= 14), full (nr == NR) and ahead as
   constants, so each instantiation keeps its accumulators in registers. ahead: B is read in place (ldb != NR,
   a frozen weight streamed from L3 once per call), so tile() prefetches the row SGEMM_AHEAD rows on (14 x 1024
   @ 1024 x 256 with 48 weights in turn, Zen 5: 1 thread 90 -> 128-139 GFLOP/s, 2 threads 157-162 -> 179-191;
   packed strips are in L1/L2 and take no prefetch). */
#define SGEMM_AHEAD 8
#define SGEMM_CASE(R, full, ahead) \
  case R: if (R <= MR) tile(R <= MR ? R : 1, full, ahead, nr, kc, ap, b, ldb, c, ldc, load_c, next_c); break;
#define SGEMM_SWITCH(full, ahead) \
  switch (mr) { \
    SGEMM_CASE(14, full, ahead) SGEMM_CASE(13, full, ahead) SGEMM_CASE(12, full, ahead) \
    SGEMM_CASE(11, full, ahead) SGEMM_CASE(10, full, ahead) SGEMM_CASE(9, full, ahead) SGEMM_CASE(8, full, ahead) \
    SGEMM_CASE(7, full, ahead) SGEMM_CASE(6, full, ahead) SGEMM_CASE(5, full, ahead) SGEMM_CASE(4, full, ahead) \
    SGEMM_CASE(3, full, ahead) SGEMM_CASE(2, full, ahead) \
    default: tile(1, full, ahead, nr, kc, ap, b, ldb, c, ldc, load_c, next_c); \
  }
#define SGEMM_MICRO \
  static void micro(int mr, int nr, int64_t kc, const float *ap, const float *b, int64_t ldb, float *c, int64_t ldc, \
                    int load_c, const float *next_c) { \
    if (nr != NR) SGEMM_SWITCH(0, 0) \
    else if (ldb != NR) SGEMM_SWITCH(1, 1) \
    else SGEMM_SWITCH(1, 0) \
  }

/* A kernel file also defines V (floats per vector), ACC (the most vector accumulators a row block holds),
   ROWS_ACC(m) (the accumulators it gives m rows) and row_block(m, nv, full, n, K, a, ars, acs, b, ldb, sstride, c,
   ldc, load_c, ahead) (always inline: m rows x nv vectors of accumulators, masked past n unless full; vector v at
   b + ROW_VEC(v, sstride); ahead: prefetch the whole 32-column strip row SGEMM_ROWS_AHEAD rows on), then
   SGEMM_ROWS: rows() walks the columns in blocks of ROWS_NV(ROWS_ACC(m) / m) vectors: a multiple of the vectors in
   a 32-column strip, or a divisor of them, so a block never straddles strips in part. Blocks narrower than a strip
   (AVX2 from 4 rows) against a share of B of at least SGEMM_ROWS_BIG floats (past the L2) take the strip's passes
   SGEMM_ROWS_KC k's at a time, the first pass prefetching whole strip rows for the others (an exact f32 store of c
   between k blocks continues each chain, as in the driver's KC blocks): the passes then find B and A in L1 instead
   of each streaming half-used lines from L3 or memory. AVX2, Zen 4, 1 thread, kernel alone, frozen, us, one pass
   per block -> k blocks (busy host, ranges over runs, indicative): 7 x 4096 x 1024 1146-1606 -> 946-989 (the 6 x 16
   micro-kernel 990-1340, W^T in place 1085-1185), 6 x 4096 x 1024 782-1168 -> 568-580; smaller weights, in L2,
   lost 5-10% to the extra passes' c and k-block overhead and keep one pass. The columns left after the last whole
   block go strip by strip (sv vectors), then the rest in one pass of the fewest vectors that hold it, unmasked when
   it fills them (masked-off lanes cost FMAs all the same, and a masked load more than a plain one: AVX-512,
   8 x 4096 @ 4096 x 8 frozen 46 -> 23 us, Zen 4; AVX2, 6 x 4096 @ 4096 x 8 7.7 us masked, 5.2 plain; a pass per
   vector instead costs a pass over B each). A block
   wider than the columns left would load (masked) vectors of strips past B's end: a masked load of an unmapped
   page costs a fault assist, and a frozen 1 x 2400 @ 2400 x 32 (one strip, 14 masked vectors per k) took 8.4 ms
   instead of microseconds (Zen 5). */
#define ROW_VEC(v, sstride) ((v) * V / SGEMM_STRIP * (sstride) + (v) * V % SGEMM_STRIP)
#define ROWS_NV(nv) ((nv) >= SGEMM_STRIP / V ? (nv) / (SGEMM_STRIP / V) * (SGEMM_STRIP / V) : (nv) >= 2 ? 2 : 1)
#define SGEMM_COL(b, col, sstride) ((b) + ((col) >> 5) * (sstride) + ((col) & 31))
#define SGEMM_ROWS_KC 256        /* k's per pass over a strip's rows: 32 KiB of a strip, in L1 */
#define SGEMM_ROWS_BIG (1 << 20)  /* K x columns of B (floats, 4 MiB) from which the passes go by k blocks */
#define SGEMM_ROWS_AHEAD 48       /* strip rows a k-block pass prefetches ahead */
/* row_block's arguments after n for the block at column j: all K, or the k block at k0 (ahead: prefetching) */
#define ROWS_AT(j) K, a, ars, acs, SGEMM_COL(b, j, sstride), ldb, sstride, c + (j), ldc, load_c, 0
#define ROWS_AT_K(j, k0, ahead) (K - (k0) < SGEMM_ROWS_KC ? K - (k0) : SGEMM_ROWS_KC), a + (k0) * acs, ars, acs, \
    SGEMM_COL(b, j, sstride) + (k0) * ldb, ldb, sstride, c + (j), ldc, load_c || (k0) > 0, ahead
/* the columns [j, n) left after the whole strips, in one pass (the case's locals j, n; sv) */
#define SGEMM_ROWS_TAIL(M, sv) \
    if (j + V == n) row_block(M, 1, 1, V, ROWS_AT(j)); \
    else if (j < n && n - j < V) row_block(M, 1, 0, n - j, ROWS_AT(j)); \
    else if ((sv) >= 2 && j + 2 * V == n) row_block(M, 2, 1, 2 * V, ROWS_AT(j)); \
    else if ((sv) >= 2 && j < n && n - j < 2 * V) row_block(M, 2, 0, n - j, ROWS_AT(j)); \
    else if (j < n) row_block(M, sv, 0, n - j, ROWS_AT(j));
/* the whole strips from column j on, their passes of w-column blocks SGEMM_ROWS_KC k's at a time (the case's locals) */
#define SGEMM_ROWS_KBLOCKS(M, nv, w) \
    for (; j + SGEMM_STRIP <= n; j += SGEMM_STRIP) \
      for (int64_t k0 = 0; k0 < K; k0 += SGEMM_ROWS_KC) \
        for (int64_t jj = j; jj < j + SGEMM_STRIP; jj += w) row_block(M, nv, 1, w, ROWS_AT_K(jj, k0, jj == j));
/* rows_M(): rows() for M rows, a function of its own (noinline): with every M's loops in one function GCC kept row
   pointers in stack slots across them (AVX2 2 x 1024 x 32: 1.55 -> 2.07 us when the k-block loops came in) */
#define SGEMM_ROWS_M(M) \
  static __attribute__((noinline)) void rows_##M(int64_t n, int64_t K, const float *a, int64_t ars, int64_t acs, \
      const float *b, int64_t ldb, int64_t sstride, float *c, int64_t ldc, int load_c) { \
    const int nv = ROWS_NV(ROWS_ACC(M) / M), sv = nv * V > SGEMM_STRIP ? SGEMM_STRIP / V : nv; \
    const int64_t w = nv * V; int64_t j = 0; \
    if (w < SGEMM_STRIP && K * n >= SGEMM_ROWS_BIG) SGEMM_ROWS_KBLOCKS(M, nv, w) \
    for (; j + w <= n; j += w) row_block(M, nv, 1, w, ROWS_AT(j)); \
    for (; j + sv * V <= n; j += sv * V) row_block(M, sv, 1, sv * V, ROWS_AT(j)); \
    SGEMM_ROWS_TAIL(M, sv) \
  }
#define SGEMM_ROWS_CALL(M) case M: rows_##M(n, K, a, ars, acs, b, ldb, sstride, c, ldc, load_c); break;
#define SGEMM_ROWS \
  SGEMM_ROWS_M(1) SGEMM_ROWS_M(2) SGEMM_ROWS_M(3) SGEMM_ROWS_M(4) \
  SGEMM_ROWS_M(5) SGEMM_ROWS_M(6) SGEMM_ROWS_M(7) SGEMM_ROWS_M(8) \
  static void rows(int m, int64_t n, int64_t K, const float *a, int64_t ars, int64_t acs, const float *b, \
                   int64_t ldb, int64_t sstride, float *c, int64_t ldc, int load_c) { \
    if (n > 0) switch (m) { SGEMM_ROWS_CALL(1) SGEMM_ROWS_CALL(2) SGEMM_ROWS_CALL(3) SGEMM_ROWS_CALL(4) \
                            SGEMM_ROWS_CALL(5) SGEMM_ROWS_CALL(6) SGEMM_ROWS_CALL(7) SGEMM_ROWS_CALL(8) } \
  }
_Static_assert(SGEMM_ROWS_MAX == 8, "SGEMM_ROWS has one case per row count 1 .. SGEMM_ROWS_MAX");

extern const sgemm_kernel ds_sgemm_avx2;     /* sgemm_avx2.c: 6 x 16 */
extern const sgemm_kernel ds_sgemm_avx512;   /* sgemm_avx512.c: 14 x 32 */
#endif
