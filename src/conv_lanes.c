/* conv_lanes.c: f32 convolutions of batches with 16 images along the lanes of each vector: per block of 16 images
   and group, the input transposed into zero-bordered planes of 16-float pixels, every output vector one (channel,
   pixel) of the 16 images (conv_lanes.h's kernels), then bias, activation and an optional pooling per lane before
   the values are transposed back to NCHW. Each value is the direct path's FMA chain, so the same bits. */
#include "internal.h"
#include "nn_conv.h"
#include "conv_lanes.h"
#include <omp.h>

static const lanes_kernel *isa_kernel(void) { return ds_isa() == DS_ISA_AVX512 ? &ds_lanes_avx512 : &ds_lanes_avx2; }

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* Taken for N >= 16 with at most N/4 unused lanes in the last block, kernels larger than 1x1, output maps larger than
   16 pixels and a block's input (C/G padded planes x 16 lanes) up to 1 MB. Eager conv2d, lanes / direct time (best
   of 7 x 20 calls, Zen 4, 2 threads, busy host: indicative): LeNet-5 conv2 (6->16 5x5 on 14x14) 0.73-0.90 at
   N = 32 .. 256, 0.85-1.06 at 16, 1.01 at 24, 1.31 at 17 (15 of 32 lanes unused); conv1 (1->6 5x5 pad 2, 28x28)
   1.0-1.1 alone (its 4.8 MB output dominates) but fused with relu + 2x2 max pooling 0.45 against 0.61 ms for the
   direct conv then the pool at N = 256; 3x3 pad 1: 32->32 on 16x16 0.87-0.96 (N = 16 .. 64), on 8x8 0.84-0.87
   (1.53 at N = 17, 0.92 at 28), 64->64 on 8x8 0.93-0.96, 128->128 on 8x8 0.69, 64->64 on 4x4 1.06; 3->16 3x3
   stride 2 on 32x32 0.83-0.86 at N = 32; 1x1 64->64 on 8x8 1.44-1.49 and 16->32 on 16x16 2.15 (the direct path
   reads those in place: no transposes). Fewer items than twice the threads are split by output rows: at N = 16
   LeNet-5's conv1 fused with relu + max pooling takes 0.034 ms (0.055 unsplit on one thread; 0.039 for the direct
   conv then the pool), conv2 0.046 (direct then pool 0.068), eager 3x3 32->32 on 8x8 and 16x16 1.02-1.04. */
int conv_lanes_takes(const geom *g) {
  int64_t unused = (g->N + 15) / 16 * 16 - g->N;
  return g->N >= 16 && 4 * unused <= g->N && g->KH * g->KW > 1 && g->ohw > 16 &&
         (double)g->Cg * (double)g->Hp * (double)g->Wp * 64 <= 1 << 20;
}

typedef struct {
  const geom *g;
  const lanes_kernel *kr;
  const float *x, *w, *bias;   /* w: G * tiles blocks of (K, tile_rows) */
  float *y;                    /* (N, OC, OH, OW), or (N, OC, PH, PW) pooled */
  const conv_pool *pool;
  int64_t PH, PW, tiles, segs;   /* segs: parts of each output plane's rows, one item each */
  int act;
  const conv_ep *ep;
  const int64_t *koff, *poff;
  char *scratch;
  int64_t per, xlen, olen;   /* per thread: bytes; its input block xb and output tile ob (floats), then pb */
} lanes_job;

/* xb (C planes (Hp, Wp) of 16-float pixels) at (top, left) = lane l of pixel (c, h, w) from image l's plane c at
   x + l * ldn + c * H * W (lanes m .. 15 zero), in blocks of 16 columns */
static void put_in(const lanes_kernel *kr, const float *x, int64_t ldn, int m, int64_t C, int64_t H, int64_t W,
                   float *xb, int64_t Hp, int64_t Wp, int64_t top, int64_t left) {
  for (int64_t c = 0; c < C; c++)
    for (int64_t h = 0; h < H; h++) {
      float *d = xb + ((c * Hp + h + top) * Wp + left) * 16;
      const float *s = x + (c * H + h) * W;
      for (int64_t w = 0; w < W; w += 16) {
        int n = W - w < 16 ? (int)(W - w) : 16;
        kr->transpose(s + w, ldn, m, n, d + w * 16, 16, n, 16);
      }
    }
}

/* image l < m's n values at dst + l * ldn = lane l of the n 16-float pixels at src, in blocks of 16 pixels */
static void put_out(const lanes_kernel *kr, const float *src, int64_t n, float *dst, int64_t ldn, int m) {
  for (int64_t p = 0; p < n; p += 16) {
    int np = n - p < 16 ? (int)(n - p) : 16;
    kr->transpose(src + p * 16, 16, np, 16, dst + p, ldn, m, np);
  }
}

/* window [*a, *b) of output o, clipped to [0, n) (nn_pool.c's) */
static void window(int64_t o, int64_t s, int64_t p, int64_t k, int64_t n, int64_t *a, int64_t *b) {
  int64_t lo = o * s - p, hi = lo + k;
  *a = lo < 0 ? 0 : lo;
  *b = hi > n ? n : hi;
}

/* half a 16-float pixel as a GCC vector (one ymm at the build's x86-64-v3), its compare masks */
typedef float hp __attribute__((vector_size(32), aligned(4)));
typedef int32_t hpi __attribute__((vector_size(32), aligned(4)));

/* rows [r0, r1) of dst (PH, PW) pixels = pool's windows over src (OH, OW) pixels, lane by lane: max from the
   window's first value, v taken when v > m or v is NaN (the last NaN wins); avg the window summed from +0 in
   row-major order / count (nn_pool_kernels.h's values) */
static void pool_lanes(const conv_pool *pl, const float *src, int64_t OH, int64_t OW, float *dst, int64_t r0,
                       int64_t r1, int64_t PW) {
  for (int64_t i = r0; i < r1; i++) {
    int64_t h0, h1;
    window(i, pl->sh, pl->ph, pl->kh, OH, &h0, &h1);
    for (int64_t j = 0; j < PW; j++) {
      int64_t w0, w1;
      window(j, pl->sw, pl->pw, pl->kw, OW, &w0, &w1);
      for (int e = 0; e < 16; e += 8) {
        hp a;
        if (pl->kind == CONV_POOL_MAX) {
          a = *(const hp *)(src + (h0 * OW + w0) * 16 + e);
          for (int64_t h = h0; h < h1; h++)
            for (int64_t w = h == h0 ? w0 + 1 : w0; w < w1; w++) {
              hp v = *(const hp *)(src + (h * OW + w) * 16 + e);
              hpi take = (v > a) | (v != v);
              a = (hp)(((hpi)v & take) | ((hpi)a & ~take));
            }
        } else {
          a = (hp){ 0 };
          for (int64_t h = h0; h < h1; h++)
            for (int64_t w = w0; w < w1; w++) a += *(const hp *)(src + (h * OW + w) * 16 + e);
          a /= (float)(pl->include_pad ? pl->kh * pl->kw : (h1 - h0) * (w1 - w0));
        }
        *(hp *)(dst + (i * PW + j) * 16 + e) = a;
      }
    }
  }
}

/* the (block of 16 images, group, channel tile, rows segment) items, shared with `omp for` among the threads of the
   enclosing region (or all on the caller): a thread transposes a block's group in when its previous item had
   another one. A segment computes the conv rows its output rows (pooled or not) read. */
static void lanes_items(const lanes_job *j) {
  const geom *g = j->g;
  int64_t R = j->kr->tile_rows, K = g->ckk, S = j->segs, nitems = (g->N + 15) / 16 * g->G * j->tiles * S, in = -1;
  int64_t OR = j->pool ? j->PH : g->OH, OC_ = j->pool ? j->PW : g->OW, plane = OR * OC_;   /* the output plane */
  float *xb = (float *)(j->scratch + j->per * omp_get_thread_num()), *ob = xb + j->xlen, *pb = ob + j->olen;
  memset(xb, 0, (size_t)j->xlen * 4);   /* the borders: put_in writes the same interior every block */
  #pragma omp for schedule(static)
  for (int64_t it = 0; it < nitems; it++) {
    int64_t bg = it / S / j->tiles, t = it / S % j->tiles, sg = it % S, gi = bg % g->G, n0 = bg / g->G * 16;
    int m = g->N - n0 < 16 ? (int)(g->N - n0) : 16;
    if (bg != in)
      put_in(j->kr, j->x + (n0 * g->C + gi * g->Cg) * g->hw, g->C * g->hw, m, g->Cg, g->H, g->W, xb, g->Hp, g->Wp,
             g->ph, g->pw);
    in = bg;
    int64_t r0 = OR * sg / S, r1 = OR * (sg + 1) / S, c0 = r0, c1 = r1;   /* output rows, conv rows */
    if (r1 == r0) continue;
    if (j->pool) {
      c0 = r0 * j->pool->sh - j->pool->ph; c1 = (r1 - 1) * j->pool->sh - j->pool->ph + j->pool->kh;
      c0 = c0 < 0 ? 0 : c0; c1 = c1 > g->OH ? g->OH : c1;
    }
    int64_t oc0 = gi * g->OCg + t * R, nr = g->OCg - t * R < R ? g->OCg - t * R : R;
    j->kr->conv(nr, (c1 - c0) * g->OW, K, j->w + (gi * j->tiles + t) * K * R, xb, j->koff, j->poff + c0 * g->OW,
                ob + c0 * g->OW * 16, g->ohw * 16, j->bias ? j->bias + oc0 : NULL, j->act);
    for (int64_t i = 0; i < nr; i++) {
      const float *o = ob + i * g->ohw * 16;
      if (j->pool) { pool_lanes(j->pool, o, g->OH, g->OW, pb, r0, r1, j->PW); o = pb; }
      put_out(j->kr, o + r0 * OC_ * 16, (r1 - r0) * OC_, j->y + (n0 * g->OC + oc0 + i) * plane + r0 * OC_,
              g->OC * plane, m);
    }
    if (j->ep) j->ep->apply(j->ep, n0, m, oc0, nr);   /* whole planes: one segment (segs = 1) */
  }
}

int conv_lanes_forward(const geom *g, const float *x, const float *w, const float *b, float *y, int act,
                       const conv_pool *pool, const conv_ep *ep) {
  if (!conv_lanes_takes(g)) return CONV_NOT_DIRECT;
  const lanes_kernel *kr = isa_kernel();
  int64_t R = kr->tile_rows, K = g->ckk, tiles = (g->OCg + R - 1) / R;
  lanes_job j = { g, kr, x, NULL, b, y, pool, 0, 0, tiles, 1, act, ep, NULL, NULL, NULL, 0, 0, 0 };
  if (pool) {
    j.PH = (g->OH + 2 * pool->ph - pool->kh) / pool->sh + 1;
    j.PW = (g->OW + 2 * pool->pw - pool->kw) / pool->sw + 1;
  }
  j.xlen = g->Cg * g->Hp * g->Wp * 16;   /* a multiple of 16: ob and pb 64-byte aligned as xb */
  j.olen = R * g->ohw * 16;
  j.per = round_up((j.xlen + j.olen + (pool ? j.PH * j.PW * 16 : 0)) * 4, 64);
  int64_t shared = round_up((K + g->ohw) * 8 + g->G * tiles * K * R * 4, 64);
  int64_t items = (g->N + 15) / 16 * g->G * tiles;
  int nt = conv_worth_parallel(g) ? ds_team() : 1, par = nt > 1;
  /* fewer items than twice the threads (and no epilogue, which takes whole planes): each plane's rows in segments */
  if (par && !ep && items < 2 * nt) {
    j.segs = (2 * nt + items - 1) / items;
    int64_t rows = pool ? j.PH : g->OH;
    if (j.segs > rows) j.segs = rows;
  }
  int64_t rounded;
  char *base = ds_mem_alloc(shared + j.per * nt, &rounded);
  if (!base) return ds_fail(DS_ENOMEM, "conv2d: out of memory for the image blocks");
  int64_t *koff = (int64_t *)base, *poff = koff + K;
  float *wt = (float *)(poff + g->ohw);
  for (int64_t c = 0; c < g->Cg; c++)
    for (int64_t kh = 0; kh < g->KH; kh++)
      for (int64_t kw = 0; kw < g->KW; kw++)
        koff[(c * g->KH + kh) * g->KW + kw] = ((c * g->Hp + kh * g->dh) * g->Wp + kw * g->dw) * 16;
  for (int64_t oh = 0; oh < g->OH; oh++)
    for (int64_t ow = 0; ow < g->OW; ow++) poff[oh * g->OW + ow] = (oh * g->sh * g->Wp + ow * g->sw) * 16;
  /* wt[((gi * tiles + t) * K + k) * R + i] = w[gi * OCg + t * R + i][k], zero past the group's channels */
  for (int64_t gi = 0; gi < g->G; gi++)
    for (int64_t t = 0; t < tiles; t++)
      for (int64_t k = 0; k < K; k++)
        for (int64_t i = 0; i < R; i++) {
          int64_t oc = t * R + i;
          wt[((gi * tiles + t) * K + k) * R + i] = oc < g->OCg ? w[(gi * g->OCg + oc) * K + k] : 0.0f;
        }
  j.w = wt; j.koff = koff; j.poff = poff; j.scratch = base + shared;
  if (par) {
    double t0 = ds_team_start();
    #pragma omp parallel num_threads(nt)
    {
      ds_team_arrive(t0);
      lanes_items(&j);
    }
    ds_team_done();
  } else lanes_items(&j);
  ds_mem_release(base, rounded);
  return DS_OK;
}
