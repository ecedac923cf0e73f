/* sgemm.c: ds's f32 GEMM driver: C = A @ B or C += A @ B for any operand strides, blocked for the caches and
   split over threads, on the micro-kernel of the ISA in use (sgemm_avx2.c, sgemm_avx512.c; sgemm.h). */
#include "internal.h"
#include "sgemm.h"
#include "sgemm_ep.h"
#include <immintrin.h>
#include <omp.h>
#include <stdlib.h>

/* Every C element is one FMA chain over k = 0 .. K-1 in order, starting from +0 (or from C when
   accumulating). K is cut into KC blocks; between blocks the chain's value waits in C (an exact f32 store)
   and the next block continues it, so the blocking changes no bit. Nothing else touches an element: its
   bits do not depend on M, N, the tiling, which rows share a tile, the batch, the thread count or the ISA
   (each micro-kernel keeps the same chain; tails use masks, not another order). */
#define KC 256          /* k per block: a B strip (KC x NR) stays in L1 while the A block's panels stream past */
#define MC_ROWS 336     /* rows per packed A block at most (MC x KC floats: ~336 KiB, stays in L2) */
#define NC 2048         /* columns per packed B panel (KC x NC floats: 2 MiB, shared by the threads, in L3) */
#define PAR_FLOPS (1 << 20)  /* below it a parallel region costs more than it saves */

static const sgemm_kernel *isa_kernel(void) { return ds_isa() == DS_ISA_AVX512 ? &ds_sgemm_avx512 : &ds_sgemm_avx2; }

typedef struct {
  int64_t M, N, K;
  const float *A; int64_t ars, acs;   /* A (i, k) at A[i * ars + k * acs] */
  const float *B; int64_t brs, bcs;   /* B (k, n) at B[k * brs + n * bcs] */
  int64_t sstride;                    /* > 0: B is prepacked strips (sgemm.h's layouts), brs = 32, bcs = 1 */
  float *C; int64_t ldc;              /* C (i, n) at C[i * ldc + n] */
  int accumulate;                     /* chains start from C's values instead of +0 */
  const ds_sgemm_ep *ep;              /* applied to each block of C once its chains are done, or NULL */
} product;

/* the epilogue (sgemm_ep.h) over m rows x n columns of C from column j (c: that block's first element, row stride
   ldc), 8 columns at a time: max(0, x) is x < 0 ? 0 : x (vmaxps returns its second operand for NaN and for -0.0) */
static void apply_ep(const ds_sgemm_ep *ep, float *c, int64_t ldc, int64_t m, int64_t j, int64_t n) {
  const __m256 zero = _mm256_setzero_ps();
  const float *bias = ep->bias ? ep->bias + j : NULL;
  for (int64_t r = 0; r < m; r++, c += ldc) {
    int64_t q = 0;
    for (; q + 8 <= n; q += 8) {
      __m256 x = _mm256_loadu_ps(c + q);
      if (bias) x = _mm256_add_ps(x, _mm256_loadu_ps(bias + q));
      if (ep->relu) x = _mm256_max_ps(zero, x);
      _mm256_storeu_ps(c + q, x);
    }
    for (; q < n; q++) {
      float x = c[q];
      if (bias) x = x + bias[q];
      if (ep->relu) x = x < 0 ? 0.0f : x;
      c[q] = x;
    }
  }
}

/* r[i] (8 floats of row i) -> r[j] (8 floats of column j): an 8 x 8 transpose in registers */
static inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; i++) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

/* d[0 .. width) = v's first width (< 8) lanes: plain 4-, 2- and 1-float stores. A vmaskmovps store (the last
   6-row block of each 14-row A panel) cost Zen 4 far more: frozen 256 x 400 x 120, 1 thread, pack_transposed's
   share of the product 14% -> 6%, the product 266 -> 247 us (indicative). */
static inline void store_lanes(float *d, __m256 v, int width) {
  __m128 h = _mm256_castps256_ps128(v);
  if (width & 4) { _mm_storeu_ps(d, h); d += 4; h = _mm256_extractf128_ps(v, 1); }
  if (width & 2) { _mm_storel_pi((__m64 *)d, h); d += 2; h = _mm_movehl_ps(h, h); }
  if (width & 1) _mm_store_ss(d, h);
}

/* dst (kc x R, k-major) = rows [0, nrows) of src, row r at src + r * rs with k unit-stride; rows nrows .. R-1
   zero. Eight rows at a time: each read sequentially along k, transposed in registers, stored by k. */
static void pack_transposed(float *dst, const float *src, int64_t rs, int nrows, int R, int64_t kc) {
  const int64_t k8end = kc / 8 * 8;
  for (int r0 = 0; r0 < R; r0 += 8) {
    int width = R - r0 < 8 ? R - r0 : 8;              /* lanes of dst this block owns */
    int valid = nrows - r0 < 0 ? 0 : nrows - r0 < width ? nrows - r0 : width;
    for (int64_t k8 = 0; k8 < k8end; k8 += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; i++) r[i] = i < valid ? _mm256_loadu_ps(src + (r0 + i) * rs + k8) : _mm256_setzero_ps();
      transpose8(r);
      for (int j = 0; j < 8; j++) {
        float *d = dst + (k8 + j) * R + r0;
        if (width == 8) _mm256_storeu_ps(d, r[j]);
        else store_lanes(d, r[j], width);
      }
    }
    for (int i = 0; i < width; i++)
      for (int64_t k = k8end; k < kc; k++) dst[k * R + r0 + i] = i < valid ? src[(r0 + i) * rs + k] : 0.0f;
  }
}

/* dst (kc x R, k-major) = src's k-th row of nrows floats at src + k * ks for each k, zeros after nrows.
   Rows are short (R <= 32): inline 8-float moves, where a memcpy call per row cost more. */
static void pack_rows(float *dst, const float *src, int64_t ks, int nrows, int R, int64_t kc) {
  for (int64_t k = 0; k < kc; k++) {
    float *d = dst + k * R;
    const float *s = src + k * ks;
    int c = 0;
    for (; c + 8 <= nrows; c += 8) _mm256_storeu_ps(d + c, _mm256_loadu_ps(s + c));
    for (; c < nrows; c++) d[c] = s[c];
    for (; c < R; c++) d[c] = 0.0f;
  }
}

/* dst (kc x R, k-major) = element (r, k) at src[r * rs + k * ks] for r < nrows, zeros after: any strides */
static void pack_strided(float *dst, const float *src, int64_t rs, int64_t ks, int nrows, int R, int64_t kc) {
  for (int64_t k = 0; k < kc; k++)
    for (int r = 0; r < R; r++) dst[k * R + r] = r < nrows ? src[r * rs + k * ks] : 0.0f;
}

/* ap = rows [i0, i0 + m) x k in [k0, k0 + kc) of A as panels of MR rows, each k-major (kc x MR, zero rows after m) */
static void pack_a(float *ap, const product *p, int64_t i0, int64_t m, int64_t k0, int64_t kc, int MR) {
  for (int64_t q = 0; q < m; q += MR, ap += kc * MR) {
    const float *src = p->A + (i0 + q) * p->ars + k0 * p->acs;
    int rows = (int)(m - q < MR ? m - q : MR);
    if (p->acs == 1) pack_transposed(ap, src, p->ars, rows, MR, kc);
    else if (p->ars == 1) pack_rows(ap, src, p->acs, rows, MR, kc);
    else pack_strided(ap, src, p->ars, p->acs, rows, MR, kc);
  }
}

/* dst (kc x NR, k-major) = B[k0 : k0 + kc, n0 : n0 + NR] with zero columns past N, for B of any strides (a
   transposed weight: each column's k run is read in order and transposed in registers) */
static void pack_strip(float *dst, const product *p, int64_t k0, int64_t kc, int64_t n0, int NR) {
  int nr = (int)(p->N - n0 < NR ? p->N - n0 : NR);
  const float *src = p->B + k0 * p->brs + n0 * p->bcs;
  if (p->bcs == 1) pack_rows(dst, src, p->brs, nr, NR, kc);
  else if (p->brs == 1) pack_transposed(dst, src, p->bcs, nr, NR, kc);
  else pack_strided(dst, src, p->bcs, p->brs, nr, NR, kc);
}

/* strips s0 .. s1-1 of the panel starting at column jc, each (kc x NR, k-major) = B[k0 : k0 + kc, columns of
   the strip] with zero columns past N. Strip s sits at bp + s * KC * NR in every k block, so a thread that
   packs only its own strips never writes where another still reads. A row-major B is copied PACK_B_ROWS k
   rows at a time across all the strips: eight B rows read along in step, each strip written in contiguous
   runs (row by row, 32 strips' writes 32 KiB apart fought over two L1 sets: 1024 x 1024 packed in 0.28 ms,
   now 0.10 ms, Zen 5); a transposed B (a weight used as W^T) is transposed strip by strip. */
#define PACK_B_ROWS 8
static void pack_b(float *bp, const product *p, int64_t k0, int64_t kc, int64_t jc, int64_t s0, int64_t s1, int NR) {
  if (p->bcs == 1) {
    for (int64_t k = 0; k < kc; k += PACK_B_ROWS) {
      int64_t rows = kc - k < PACK_B_ROWS ? kc - k : PACK_B_ROWS;
      for (int64_t s = s0; s < s1; s++) {
        int64_t n0 = jc + s * NR;
        int nr = (int)(p->N - n0 < NR ? p->N - n0 : NR);
        pack_rows(bp + s * KC * NR + k * NR, p->B + (k0 + k) * p->brs + n0, p->brs, nr, NR, rows);
      }
    }
    return;
  }
  for (int64_t s = s0; s < s1; s++) pack_strip(bp + s * KC * NR, p, k0, kc, jc + s * NR, NR);
}

/* The C tiles thread tid of nth computes: rows [*i0, *i1), columns [*j0, *j1). The threads split the rows
   (in MR panels) or the columns (in NR strips), whichever leaves the largest part smaller; on a tie the
   columns, so each thread packs the B strips it uses itself and they stay in its own caches (row splits made
   each thread read half of B from the other core: BERT's 128 x 1024 x 256 ran at 220 GFLOP/s on 2 threads
   split by rows, 340 by columns, Zen 5). */
static int thread_part(const product *p, const sgemm_kernel *kr, int tid, int nth, int64_t *i0, int64_t *i1,
                       int64_t *j0, int64_t *j1) {
  int64_t P = (p->M + kr->mr - 1) / kr->mr, S = (p->N + kr->nr - 1) / kr->nr;
  int64_t by_rows = (P + nth - 1) / nth * S, by_cols = P * ((S + nth - 1) / nth);
  *i0 = 0; *i1 = p->M; *j0 = 0; *j1 = p->N;
  if (by_rows < by_cols) {
    *i0 = tid * P / nth * kr->mr;
    *i1 = (tid + 1) * P / nth * kr->mr;
  } else {
    *j0 = tid * S / nth * kr->nr;
    *j1 = (tid + 1) * S / nth * kr->nr;
  }
  if (*i1 > p->M) *i1 = p->M;
  if (*j1 > p->N) *j1 = p->N;
  return by_rows >= by_cols;
}

/* rows per A block: the thread's rows cut into equal blocks of at most MC_ROWS (whole MR panels), so no
   block is a small remainder that would cost a pass over the B panel of its own */
static int64_t block_rows(int64_t rows, int MR) {
  int64_t blocks = (rows + MC_ROWS - 1) / MC_ROWS;
  if (blocks < 1) blocks = 1;
  int64_t per = (rows + blocks - 1) / blocks;
  return (per + MR - 1) / MR * MR;
}

/* B's strip stride in sgemm.h's layouts: prepacked, or a matrix read in place (unit column stride) */
static int64_t strip_stride(const product *p) { return p->sstride ? p->sstride : SGEMM_STRIP; }

/* rows [i0, i0 + m) x columns [j0, j1) (j0 starts a strip) by the kernel's rows(): more than rows_group + 2 rows in
   its two groups over the whole strips while all of B is under ROWS_GROUPS_MAX floats, the columns past them by all m
   rows at once. Past the caches (the threads share the L3) a second pass over B costs more than it saves: AVX2,
   8 x 4096 x 1024, 1 thread, 1337 us in one group, 1776 in two; 7 x 4096 x 1024, 2 threads (a half each),
   ~500 us W^T in place, 916 frozen in two groups (busy host, indicative). */
#define ROWS_GROUPS_MAX (1 << 22)
static void rows_at(const product *p, const sgemm_kernel *kr, int64_t i0, int m, int64_t j0, int64_t j1) {
  const int64_t ss = strip_stride(p);
  const float *a = p->A + i0 * p->ars;
  float *c = p->C + i0 * p->ldc;
  const int g = kr->rows_group && m > kr->rows_group + 2 && p->K * p->N < ROWS_GROUPS_MAX ? kr->rows_group : 0;
  const int64_t js = g && j1 > j0 ? j0 + (j1 - j0) / SGEMM_STRIP * SGEMM_STRIP : j0;   /* the grouped strips' end */
  if (js > j0) {
    kr->rows(g, js - j0, p->K, a, p->ars, p->acs, SGEMM_COL(p->B, j0, ss), p->brs, ss, c + j0, p->ldc, p->accumulate);
    kr->rows(m - g, js - j0, p->K, a + g * p->ars, p->ars, p->acs, SGEMM_COL(p->B, j0, ss), p->brs, ss,
             c + g * p->ldc + j0, p->ldc, p->accumulate);
  }
  if (j1 > js)
    kr->rows(m, j1 - js, p->K, a, p->ars, p->acs, SGEMM_COL(p->B, js, ss), p->brs, ss, c + js, p->ldc, p->accumulate);
  if (p->ep && j1 > j0) apply_ep(p->ep, c + j0, p->ldc, m, j0, j1 - j0);
}

/* A product of at most SGEMM_ROWS_MAX rows with B read in place (unit column stride or prepacked): thread tid
   of nth takes its share of the columns (in 32-column strips, as run_rows_t does) and the kernel's rows() walks B's
   rows along them. In 64-column units a 64-column weight went whole to one thread, and unfrozen (split in two) came
   out faster than frozen: AVX-512 8 x 1024 x 64 9.5 vs 7.9 us, 8 x 2400 x 64 21.5 vs 16.4 (Zen 4, 2 threads). */
static void run_rows(const product *p, const sgemm_kernel *kr, int tid, int nth) {
  int64_t units = (p->N + SGEMM_STRIP - 1) / SGEMM_STRIP;
  int64_t j0 = tid * units / nth * SGEMM_STRIP, j1 = (tid + 1) * units / nth * SGEMM_STRIP;
  rows_at(p, kr, 0, (int)p->M, j0, j1 < p->N ? j1 : p->N);
}

/* Whether rows() takes the product: at most SGEMM_ROWS_MAX rows, B read in place. A frozen weight used to go to
   the 6 x 16 micro-kernel from 7 rows on AVX2 when wide (N >= 256, K x N >= 256 Ki floats), while rows() gave those
   rows one vector per block; with 7-8 rows in two groups (rows_at) rows() is as fast or faster. Zen 4,
   1 thread, kernel alone, frozen, us, micro -> rows (busy host, indicative): 7 x 2400 x 1024 492 -> 359,
   7 x 4096 x 1024 1431 -> 1104-1226 (W^T in place 1202), 8 x 1024 x 1024 205 -> 197, 8 x 256 x 1024 48 -> 45,
   8 x 4096 x 256 225 -> 196, 8 x 4096 x 1024 1543 -> 1337; the micro-kernel ran 7 rows as 6 + 1, its one-row tile
   of 2 accumulators waiting on the FMA latency (frozen 7 x 4096 x 1024 came out slower than unfrozen). */
static int rows_take(const product *p) { return p->M <= SGEMM_ROWS_MAX && p->bcs == 1; }

/* A prepacked weight of one strip (N <= 32) against more rows than rows() takes goes to rows() in chunks of
   SGEMM_ROWS_MAX rows, the threads taking whole chunks: the micro-kernel would fill 16- or 32-column tiles with a
   few columns and pack A first. Zen 4, 1 thread (team.c held the busy host to one), kernel us, micro -> chunks
   (indicative): AVX2 16 x 1024 x 8 17.5 -> 3.8, 16 x 4096 x 8 52 -> 14, 128 x 1024 x 8 93 -> 29, x 16 123 -> 57,
   x 32 160 -> 108; AVX-512 16 x 1024 x 8 19 -> 12, 128 x 1024 x 32 123 -> 78. At 64 columns AVX2 was mixed
   (128 x 256 x 64 63 -> 69). */
static void run_row_chunks(const product *p, const sgemm_kernel *kr, int tid, int nth) {
  int64_t chunks = (p->M + SGEMM_ROWS_MAX - 1) / SGEMM_ROWS_MAX;
  for (int64_t q = tid * chunks / nth; q < (tid + 1) * chunks / nth; q++) {
    int64_t i0 = q * SGEMM_ROWS_MAX;
    rows_at(p, kr, i0, (int)(p->M - i0 < SGEMM_ROWS_MAX ? p->M - i0 : SGEMM_ROWS_MAX), 0, p->N);
  }
}

/* B of one strip (N <= 32) not prepacked, against more rows than rows() takes: read in place when row-major (rows()
   reads B's rows at any stride), else packed whole into one strip at bp (by thread 0 while the others wait), then
   in chunks as a prepacked one, instead of packing A and filling the micro-kernel's tiles with a few columns. Zen 4,
   1 thread, kernel us (indicative): AVX-512 x @ W^T 256 x 84 x 10 9.9 -> 6.7, 1024 x 400 x 10 188 -> 126,
   128 x 1024 x 32 100 -> 77; x @ W 16 x 1024 x 8 9.9 -> 4.2, 128 x 1024 x 32 100 -> 73; AVX2 x @ W^T 256 x 84 x 10
   13.7 -> 9.5, 128 x 1024 x 32 107 -> 83. */
static void run_one_strip(const product *p, const sgemm_kernel *kr, int tid, int nth, float *bp) {
  product q = *p;
  const int pack = !p->sstride && p->bcs != 1;
  if (pack) {
    if (tid == 0) pack_strip(bp, p, 0, p->K, 0, SGEMM_STRIP);
    if (nth > 1) {
#pragma omp barrier
    }
    q.B = bp; q.brs = SGEMM_STRIP; q.bcs = 1; q.sstride = SGEMM_STRIP * p->K;
  }
  run_row_chunks(&q, kr, tid, nth);
  if (pack && nth > 1) {   /* the next product of the batch packs into bp again */
#pragma omp barrier
  }
}

/* A product of at most SGEMM_ROWS_MAX rows against a transposed B read in place (B (k, n) at B[n * bcs + k]: x @ W^T
   of a linear layer with W (N, K) not prepacked): thread tid of nth takes its share of the columns (in 32-column
   units) and the kernel's rows_t() runs over them, transposing W in registers. Packing 32-column strips of W for
   the micro-kernel cost 2-5x as much (Zen 4, 1 thread, us, indicative: 1 x 256 x 256 11.8 -> 5.7, 4 x 256 x 256
   13.1 -> 8.9, 1 x 1024 x 1024 174 -> 119, 8 x 1024 x 8 11.7 -> 4.1); from 9 rows on the micro-kernel's one
   transpose per strip for all its rows costs less than a pass of rows_t() per 8 rows (16 x 1024 x 1024 458 us
   packed, 551 in two passes). */
static int rows_t_take(const product *p) {
  return !p->sstride && p->brs == 1 && p->bcs != 1 && p->M <= SGEMM_ROWS_MAX;
}

static void run_rows_t(const product *p, const sgemm_kernel *kr, int tid, int nth) {
  int64_t units = (p->N + 31) / 32, j0 = tid * units / nth * 32, j1 = (tid + 1) * units / nth * 32;
  if (j1 > p->N) j1 = p->N;
  if (j0 < j1) {
    kr->rows_t((int)p->M, j1 - j0, p->K, p->A, p->ars, p->acs, p->B + j0 * p->bcs, p->bcs, p->C + j0, p->ldc,
               p->accumulate);
    if (p->ep) apply_ep(p->ep, p->C + j0, p->ldc, p->M, j0, j1 - j0);
  }
}

/* One product by thread tid of the nth threads working on it. Per panel of NC columns and block of KC k's,
   the panel's B strips are packed into bp (shared): one panel split by columns, each thread packs the strips it
   computes and no thread waits; otherwise the threads pack all strips together and meet at barriers (the same
   number of times each). Then each thread, per block of its rows (ap, packed once per panel and k block),
   runs strip by strip (in L1) over the block's A panels (in L2). */
/* a row-major B (unit column stride) against at most IN_PLACE_ROWS rows is read in place: each strip stays in the
   caches for the next row panel, and packing it cost more (Zen 4, 1 thread, AVX2, x @ W (K, N), us, indicative:
   9 x 256 x 256 21.3 -> 13.7, 12 x 256 x 256 33.4 -> 15.9, 16 x 4096 x 256 550 -> 359; AVX-512 16 x 256 x 256
   32.7 -> 20.9, 16 x 1024 x 1024 527 -> 420) */
#define IN_PLACE_ROWS 16
static void run_product(const product *p, const sgemm_kernel *kr, int tid, int nth, float *ap, float *bp) {
  if (rows_take(p)) { run_rows(p, kr, tid, nth); return; }
  if (rows_t_take(p)) { run_rows_t(p, kr, tid, nth); return; }
  if (p->N <= SGEMM_STRIP && (p->sstride || p->bcs == 1 || p->K * SGEMM_STRIP <= KC * NC)) {
    run_one_strip(p, kr, tid, nth, bp);
    return;
  }
  const int MR = kr->mr, NR = kr->nr;
  int64_t i0, i1, j0, j1;
  int by_cols = thread_part(p, kr, tid, nth, &i0, &i1, &j0, &j1);
  int shared_b = nth > 1 && !(by_cols && p->N <= NC);   /* one panel split by columns: no strip is shared */
  const int64_t MC = block_rows(i1 - i0, MR);
  /* B read in place when prepacked or row-major with few row panels to reuse a packed copy */
  int packed = !p->sstride && !(p->bcs == 1 && p->M <= IN_PLACE_ROWS);
  /* a thread with one row panel and its own strips uses each packed strip once: it packs the strip right before
     that use, into the slot of its first strip (in L1), instead of its whole share of the panel first */
  int at_use = packed && !shared_b && i1 - i0 <= MR && p->bcs != 1;
  for (int64_t jc = 0; jc < p->N; jc += NC) {
    int64_t nc = p->N - jc < NC ? p->N - jc : NC, ns = (nc + NR - 1) / NR;
    int64_t lo = j0 > jc ? j0 : jc, hi = j1 < jc + nc ? j1 : jc + nc;
    float *own = bp + (lo - jc) / NR * KC * NR;   /* the slot of this thread's first strip */
    for (int64_t pc = 0; pc < p->K; pc += KC) {
      int64_t kc = p->K - pc < KC ? p->K - pc : KC;
      int load_c = p->accumulate || pc > 0;
      const ds_sgemm_ep *ep = pc + kc == p->K ? p->ep : NULL;   /* on the last k block's tiles */
      if (packed && !at_use) {
        if (!shared_b) pack_b(bp, p, pc, kc, jc, (lo - jc) / NR, (hi - jc + NR - 1) / NR, NR);
        else {
          pack_b(bp, p, pc, kc, jc, tid * ns / nth, (tid + 1) * ns / nth, NR);
#pragma omp barrier
        }
      }
      for (int64_t ic = i0; ic < i1 && lo < hi; ic += MC) {
        int64_t mc = i1 - ic < MC ? i1 - ic : MC;
        pack_a(ap, p, ic, mc, pc, kc, MR);
        for (int64_t j = lo; j < hi; j += NR) {
          if (at_use) pack_strip(own, p, pc, kc, j, NR);
          const float *b = at_use ? own : packed ? bp + (j - jc) / NR * KC * NR
                                                 : SGEMM_COL(p->B, j, strip_stride(p)) + pc * p->brs;
          for (int64_t i = 0; i < mc; i += MR) {
            /* the next tile: the next A panel's rows, or the block's first rows of the next strip */
            const float *next_c = i + MR < mc ? p->C + (ic + i + MR) * p->ldc + j
                                  : j + NR < hi ? p->C + ic * p->ldc + j + NR : NULL;
            int mr = (int)(mc - i < MR ? mc - i : MR), nr = (int)(hi - j < NR ? hi - j : NR);
            float *c = p->C + (ic + i) * p->ldc + j;
            kr->micro(mr, nr, kc, ap + i * kc, b, packed ? NR : p->brs, c, p->ldc, load_c, next_c);
            if (ep) apply_ep(ep, c, p->ldc, mr, j, nr);
          }
        }
      }
      if (packed && shared_b) {
#pragma omp barrier
      }
    }
  }
}

/* Per-thread packing buffers, kept between calls (grown when a call needs more, never shrunk). */
static __thread float *scratch_buf;
static __thread size_t scratch_floats;
static float *scratch(size_t floats) {
  if (floats > scratch_floats) {
    free(scratch_buf);
    scratch_buf = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
    scratch_floats = scratch_buf ? floats : 0;
  }
  return scratch_buf;
}

/* nbatch products of one shape (A[t], B[t], C[t] in the template's strides) and how the threads share them */
typedef struct {
  product shape;   /* strides and flags; its A, B, C are set per product */
  int64_t nbatch;
  const float *const *A, *const *B;
  float *const *C;
  int by_batch;    /* each thread takes whole products (else the threads share each product) */
  float *buf;      /* packing buffers: per thread an A area (and a B panel when by_batch), else one shared B panel */
  size_t a_floats, b_floats;
  const sgemm_kernel *kr;
} batch_job;

/* thread tid of team's part of the job */
static void run_share(const batch_job *job, int tid, int team) {
  product p = job->shape;
  if (job->by_batch) {
    float *ap = job->buf + (size_t)tid * (job->a_floats + job->b_floats), *bp = ap + job->a_floats;
    for (int64_t t = tid * job->nbatch / team; t < (tid + 1) * job->nbatch / team; t++) {
      p.A = job->A[t]; p.B = job->B[t]; p.C = job->C[t];
      run_product(&p, job->kr, 0, 1, ap, bp);
    }
  } else {
    float *bp = job->buf, *ap = job->buf + job->b_floats + (size_t)tid * job->a_floats;
    for (int64_t t = 0; t < job->nbatch; t++) {
      p.A = job->A[t]; p.B = job->B[t]; p.C = job->C[t];
      run_product(&p, job->kr, tid, team, ap, bp);
    }
  }
}

/* nbatch products of one shape; sstride > 0: every B[t] is prepacked (sgemm.h's layouts). One thread runs the
   job without entering a parallel region (an inactive one still costs ~1.2 us, as much as an 8 x 8 product). */
static int sgemm_run(int64_t nbatch, const float *const *A, const float *const *B, float *const *C, int64_t M,
                     int64_t N, int64_t K, int64_t ars, int64_t acs, int64_t brs, int64_t bcs, int64_t sstride,
                     int64_t ldc, int accumulate, const ds_sgemm_ep *ep) {
  if (M <= 0 || N <= 0 || nbatch <= 0) return DS_OK;
  if (K <= 0) {
    for (int64_t t = 0; t < nbatch; t++) {
      if (!accumulate)
        for (int64_t i = 0; i < M; i++) memset(C[t] + i * ldc, 0, (size_t)N * sizeof(float));
      if (ep) apply_ep(ep, C[t], ldc, M, 0, N);
    }
    return DS_OK;
  }
  const sgemm_kernel *kr = isa_kernel();
  double flops = 2.0 * (double)nbatch * (double)M * (double)N * (double)K;
  int nth = omp_in_parallel() || flops < PAR_FLOPS ? 1 : ds_team();
  int by_batch = nth > 1 && (nbatch % nth == 0 || nbatch >= 4 * nth);
  size_t a_floats = (size_t)(MC_ROWS + kr->mr) * KC, b_floats = (size_t)KC * NC;
  float *buf = scratch((size_t)nth * (a_floats + (by_batch ? b_floats : 0)) + (by_batch ? 0 : b_floats));
  if (!buf) return ds_fail(DS_ENOMEM, "matmul: out of memory for the packing buffers");
  batch_job job = { { M, N, K, NULL, ars, acs, NULL, brs, bcs, sstride, NULL, ldc, accumulate, ep }, nbatch, A, B, C,
                    by_batch, buf, a_floats, b_floats, kr };
  if (nth == 1) run_share(&job, 0, 1);
  else {
    double t0 = ds_team_start();
#pragma omp parallel num_threads(nth)
    {
      ds_team_arrive(t0);
      run_share(&job, omp_get_thread_num(), omp_get_num_threads());
    }
    ds_team_done();
  }
  return DS_OK;
}

int ds_sgemm_batch_ep(int64_t nbatch, const float *const *A, const float *const *B, float *const *C, int64_t M,
                      int64_t N, int64_t K, int64_t ars, int64_t acs, int64_t brs, int64_t bcs, int64_t ldc,
                      int accumulate, const ds_sgemm_ep *ep) {
  return sgemm_run(nbatch, A, B, C, M, N, K, ars, acs, brs, bcs, 0, ldc, accumulate, ep);
}

int ds_sgemm_batch(int64_t nbatch, const float *const *A, const float *const *B, float *const *C, int64_t M, int64_t N,
                   int64_t K, int64_t ars, int64_t acs, int64_t brs, int64_t bcs, int64_t ldc, int accumulate) {
  return sgemm_run(nbatch, A, B, C, M, N, K, ars, acs, brs, bcs, 0, ldc, accumulate, NULL);
}

int ds_sgemm(int64_t M, int64_t N, int64_t K, const float *A, int64_t ars, int64_t acs, const float *B, int64_t brs,
             int64_t bcs, float *C, int64_t ldc, int accumulate) {
  return ds_sgemm_batch(1, &A, &B, &C, M, N, K, ars, acs, brs, bcs, ldc, accumulate);
}

void ds_sgemm_pack_b(int64_t K, int64_t N, const float *B, int64_t brs, int64_t bcs, float *bp) {
  product p = { .M = 0, .N = N, .K = K, .B = B, .brs = brs, .bcs = bcs };
  for (int64_t s = 0; s * SGEMM_STRIP < N; s++)
    pack_strip(bp + s * K * SGEMM_STRIP, &p, 0, K, s * SGEMM_STRIP, SGEMM_STRIP);
}

int ds_sgemm_packed_batch_ep(int64_t nbatch, const float *const *A, const float *bp, float *const *C, int64_t M,
                             int64_t N, int64_t K, int64_t ars, int64_t acs, int64_t ldc, int accumulate,
                             const ds_sgemm_ep *ep) {
  const float *one = bp, **pb = &one;
  if (nbatch > 1) {
    pb = malloc(sizeof *pb * (size_t)nbatch);
    if (!pb) return ds_fail(DS_ENOMEM, "matmul: out of memory");
    for (int64_t t = 0; t < nbatch; t++) pb[t] = bp;
  }
  int rc = sgemm_run(nbatch, A, pb, C, M, N, K, ars, acs, SGEMM_STRIP, 1, SGEMM_STRIP * K, ldc, accumulate, ep);
  if (nbatch > 1) free(pb);
  return rc;
}

int ds_sgemm_packed_batch(int64_t nbatch, const float *const *A, const float *bp, float *const *C, int64_t M,
                          int64_t N, int64_t K, int64_t ars, int64_t acs, int64_t ldc, int accumulate) {
  return ds_sgemm_packed_batch_ep(nbatch, A, bp, C, M, N, K, ars, acs, ldc, accumulate, NULL);
}
