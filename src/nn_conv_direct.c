/* nn_conv_direct.c: f32 convolutions read straight from a zero-bordered copy of each image, without a column
   matrix: the forward pass (any stride: the copy split by stride phase, or by kernel column where the wide rows
   would waste vectors, conv_phase.c) and the stride-1 input
   gradient as an implicit GEMM over shifted windows (conv_rows), the stride-1 weight gradient as lane-wise dot
   products (conv_dots). Kernels per ISA behind conv_direct.h. */
#include "internal.h"
#include "nn_conv.h"
#include "conv_direct.h"
#include "elementwise_ops.h"
#include <omp.h>

static const conv_kernel *isa_kernel(void) { return ds_isa() == DS_ISA_AVX512 ? &ds_conv_avx512 : &ds_conv_avx2; }

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* conv_rows walks K shifted windows per block of output columns; with more, the im2col GEMM is faster (Zen 5,
   2 threads, batch 8, 3x3 kernels: K = 576 and 864 direct 1.2-1.8x faster, K = 1152 and 2304 1.4-2.2x slower) */
#define DIRECT_K_MAX 1024
/* the weight gradient keeps G * rows * cols * 16 lanes per run of images; above this many (x 16 runs) the
   im2col path is used instead */
#define DOT_ACC_MAX 32768
/* one image is shared by the threads above this many multiply-adds (rows x wide columns x K), in row tiles or in
   blocks of SPLIT_NV vectors of columns. Was 1e5; on the 2-vCPU VM (busy host) a PyTorch MobileNet-style export at
   batch 1 ran no faster with its stem (1e6, ~26 us) and 1x1 convs (1.4e5 .. 3.7e5) split than on one thread, in
   the best of 3 passes of 200 calls, and ~6% slower in their median over 15 such runs (a worker late by less than
   team.c's 1 ms costs every call); LeNet-5 at batch 1 (1.6e5, 2.7e5) the same. On the quiet VM (two threads at
   twice one's FMA peak) splitting was ~5% faster at best (0.071-0.075 vs 0.076-0.079 ms a call) but 0.097 and
   0.18 ms in 2 of 5 runs: the unsplit model is the steadier */
#define SPLIT_MIN 2e6
#define SPLIT_NV 4

/* the weight gradient's windows: koff[(c * KH + kh) * KW + kw] = where window (c, kh, kw) starts in C planes of
   `plane` floats, rows of `rowlen` */
static void fill_offsets(int64_t *koff, int64_t C, int64_t KH, int64_t KW, int64_t plane, int64_t rowlen,
                         int64_t dh, int64_t dw) {
  for (int64_t c = 0; c < C; c++)
    for (int64_t kh = 0; kh < KH; kh++)
      for (int64_t kw = 0; kw < KW; kw++) koff[(c * KH + kh) * KW + kw] = c * plane + kh * dh * rowlen + kw * dw;
}

/* floats of a buffer of C padded planes (`plane` floats, rows of rowlen) from which every window of a KH x KW
   kernel (dilation dh, dw) reads `span` floats: the planes, or the last window's end if that is further */
static int64_t window_buffer_len(int64_t C, int64_t plane, int64_t rowlen, int64_t KH, int64_t KW, int64_t dh,
                                 int64_t dw, int64_t span) {
  int64_t reach = (C - 1) * plane + (KH - 1) * dh * rowlen + (KW - 1) * dw;
  return max64(C * plane, reach + span);
}

/* C planes (H, W) at src into dst's planes (every pstride floats, rows of rowlen) at row top, column left; the
   rest of dst is left as it is (zero: each thread zeroes its buffers once) */
static void put_planes(const float *src, int64_t C, int64_t H, int64_t W, float *dst, int64_t pstride,
                       int64_t rowlen, int64_t top, int64_t left) {
  for (int64_t c = 0; c < C; c++)
    for (int64_t h = 0; h < H; h++) {
      const float *s = src + (c * H + h) * W;
      float *d = dst + c * pstride + (h + top) * rowlen + left;
      for (int64_t w = 0; w < W; w++) d[w] = s[w];
    }
}

/* the wide columns [l0, l1) of the first C rows of src (row c at src + c * ldc; image row h at h * rowlen, its
   columns past W dropped) into dst (C, H, W), plus bias[c] when given, then the activation act (CONV_ACT_*) */
static void take_cols(const float *src, int64_t ldc, int64_t C, int64_t H, int64_t W, int64_t rowlen, float *dst,
                      const float *bias, int act, int64_t l0, int64_t l1) {
  if (rowlen == W) { W *= H; rowlen = W; H = 1; }   /* no column dropped: each plane is one run */
  for (int64_t c = 0; c < C; c++) {
    float b = bias ? bias[c] : 0.0f;   /* in a register: the stores below cannot change it */
    for (int64_t h = l0 / rowlen; h < H && h * rowlen < l1; h++) {
      const float *restrict s = src + c * ldc + h * rowlen;
      float *restrict d = dst + (c * H + h) * W;
      int64_t w0 = l0 - h * rowlen > 0 ? l0 - h * rowlen : 0, w1 = l1 - h * rowlen < W ? l1 - h * rowlen : W;
      if (bias) for (int64_t w = w0; w < w1; w++) d[w] = s[w] + b;
      else for (int64_t w = w0; w < w1; w++) d[w] = s[w];
      if (act == CONV_ACT_HARDSWISH) for (int64_t w = w0; w < w1; w++) d[w] = el_hardswish_f32(d[w]);
    }
  }
}

/* One shared block (offsets, accumulators) and one block per thread, from the caching allocator. */
typedef struct { char *base; int64_t rounded, shared, per; } scratch;
static int scratch_take(scratch *s, int64_t shared, int64_t per, int nt) {
  s->shared = round_up(shared, 64); s->per = round_up(per, 64);
  s->base = ds_mem_alloc(s->shared + s->per * nt, &s->rounded);
  return s->base != NULL;
}
static float *scratch_thread(const scratch *s) { return (float *)(s->base + s->shared + s->per * omp_get_thread_num()); }
static void scratch_give(scratch *s) { ds_mem_release(s->base, s->rounded); }

/* The convolution both the forward pass and the input gradient reduce to: per image and group, the Ci planes
   (Hi, Wi) of src as phase planes (p: zero border, stride phases); dst's Co planes (Ho, Wo) are a (rows,
   K = Ci*KH*KW, zero rows after Co) @ the K windows (kh*dh, kw*dw) of the phase planes, plus bias[c] if given.
   src holds N images of G groups of Ci planes, dst N images of G groups of Co planes; a holds G blocks. */
typedef struct { int64_t N, G; phase_geom p; int64_t Co, Ho, Wo, KH, KW, dh, dw, rows; } inner_conv;

/* run_inner's work; inner_images shares the images with `omp for` among the threads of the enclosing parallel
   region, or runs them all on the calling thread outside one (an inactive region still costs ~1.2 us) */
typedef struct {
  const inner_conv *v;
  const conv_kernel *kr;
  const float *a, *src, *bias;
  float *dst;
  const scratch *s;
  const int64_t *koff;
  int64_t K, nvec, ldc, blen;   /* blen: 0 when the phase planes are the image itself (read in place) */
  int direct;   /* c is dst itself (ldc = Ho * Wo, no dropped columns, no spare rows): the kernel adds the bias */
  int by_row;   /* output rows of whole vectors from wider phase rows: written to dst row by row (by_rows) */
  int act;      /* the epilogue's activation, applied by the kernel or take_cols as they write (CONV_ACT_*) */
  int half;     /* the wide columns end in the first half of a vector: the kernel computes that half only */
  const conv_ep *ep;   /* the forward pass's epilogue, per (image, group) written, or NULL (none, or act) */
} inner_job;

/* output rows [h0, h1) of one image's group straight into d (Co planes Ho x Wo, Wo a multiple of 16) plus bias:
   row h is the kernel over the windows at b + h * Wq (the wide rows' dropped columns are never computed) */
static void by_rows(const inner_job *j, const float *a, const float *b, float *d, const float *bias, int64_t h0,
                    int64_t h1) {
  const inner_conv *v = j->v;
  for (int64_t h = h0; h < h1; h++)
    j->kr->rows(v->rows, v->Wo / CONV_LANES, j->K, a, j->K, b + h * v->p.Wq, j->koff, d + h * v->Wo,
                v->Ho * v->Wo, bias, j->act, 0);
}

static void inner_images(const inner_job *j) {
  const inner_conv *v = j->v;
  float *buf = scratch_thread(j->s), *c = buf + j->blen;   /* c: (rows, ldc) */
  int64_t in = v->p.C * v->p.H * v->p.W;
  #pragma omp for schedule(static)
  for (int64_t n = 0; n < v->N; n++)
    for (int64_t gi = 0; gi < v->G; gi++) {
      int64_t ig = n * v->G + gi;
      const float *b = j->src + ig * in;
      float *d = j->dst + ig * v->Co * v->Ho * v->Wo;
      const float *bias = j->bias ? j->bias + gi * v->Co : NULL;
      if (j->blen) {
        /* the image's cache lines asked for at once before the copy walks it: a model's input comes from memory
           (the MobileNet stem's 110 KB: ~3 us less per call over 200 inputs, ~0.2 us more on a cached one) */
        for (int64_t o = 0; o < in; o += 16) __builtin_prefetch(b + o);
        conv_phases_f32(&v->p, b, buf, j->blen);
        b = buf;
      }
      const float *a = j->a + gi * v->rows * j->K;
      if (j->by_row) by_rows(j, a, b, d, bias, 0, v->Ho);
      else {
        j->kr->rows(v->rows, j->nvec, j->K, a, j->K, b, j->koff, j->direct ? d : c, j->ldc, j->direct ? bias : NULL,
                    j->direct ? j->act : CONV_ACT_NONE, j->half);
        if (!j->direct) take_cols(c, j->ldc, v->Co, v->Ho, v->Wo, v->p.Wq, d, bias, j->act, 0, v->Ho * v->p.Wq);
      }
      if (j->ep) j->ep->apply(j->ep, n, 1, gi * v->Co, v->Co);
    }
}

/* One image (N = G = 1) shared by the threads of the enclosing region, its phase planes at buf: each
   thread computes its share of c's row tiles (or of its column blocks, when there are fewer row tiles than
   blocks; or of the output rows, by_row), puts it out plus the bias (or writes it to dst plus the bias, direct)
   and runs ep on whole planes.
   Each value is the same FMA chain whatever the split, so the bits do not depend on the thread count. */
static void inner_split(const inner_job *j, const float *buf, float *c) {
  const inner_conv *v = j->v;
  int t = omp_get_thread_num(), nt = omp_get_num_threads();
  int64_t tr = j->kr->tile_rows, tiles = v->rows / tr, blocks = (j->nvec + SPLIT_NV - 1) / SPLIT_NV;
  int64_t L = v->Ho * v->p.Wq, plane = v->Ho * v->Wo;
  if (j->direct) c = j->dst;   /* ldc = plane */
  if (j->by_row) by_rows(j, j->a, buf, j->dst, j->bias, v->Ho * t / nt, v->Ho * (t + 1) / nt);
  else if (tiles >= blocks) {
    int64_t r0 = tiles * t / nt * tr, r1 = tiles * (t + 1) / nt * tr, c1 = r1 < v->Co ? r1 : v->Co;
    if (r1 > r0)
      j->kr->rows(r1 - r0, j->nvec, j->K, j->a + r0 * j->K, j->K, buf, j->koff, c + r0 * j->ldc, j->ldc,
                  j->direct && j->bias ? j->bias + r0 : NULL, j->direct ? j->act : CONV_ACT_NONE, j->half);
    if (c1 <= r0) return;
    if (!j->direct)
      take_cols(c + r0 * j->ldc, j->ldc, c1 - r0, v->Ho, v->Wo, v->p.Wq, j->dst + r0 * plane,
                j->bias ? j->bias + r0 : NULL, j->act, 0, L);
    if (j->ep) j->ep->apply(j->ep, 0, 1, r0, c1 - r0);
    return;
  } else {
    int64_t v0 = blocks * t / nt * SPLIT_NV, v1 = blocks * (t + 1) / nt * SPLIT_NV;
    if (v1 > j->nvec) v1 = j->nvec;
    if (v1 > v0) {
      j->kr->rows(v->rows, v1 - v0, j->K, j->a, j->K, buf + v0 * CONV_LANES, j->koff, c + v0 * CONV_LANES, j->ldc,
                  j->direct ? j->bias : NULL, j->direct ? j->act : CONV_ACT_NONE, v1 == j->nvec && j->half);
      if (!j->direct)
        take_cols(c, j->ldc, v->Co, v->Ho, v->Wo, v->p.Wq, j->dst, j->bias, j->act, v0 * CONV_LANES,
                  v1 * CONV_LANES);
    }
  }
  if (!j->ep) return;
  #pragma omp barrier
  int64_t c0 = v->Co * t / nt, c1 = v->Co * (t + 1) / nt;
  if (c1 > c0) j->ep->apply(j->ep, 0, 1, c0, c1 - c0);
}

static int run_inner(const inner_conv *v, const conv_kernel *kr, const float *a, const float *src, float *dst,
                     const float *bias, int par, const char *op, const conv_ep *ep) {
  int64_t K = v->p.C * v->KH * v->KW, koff[DIRECT_K_MAX];
  int64_t nvec = (v->Ho * v->p.Wq + CONV_LANES - 1) / CONV_LANES, ldc = nvec * CONV_LANES;
  int64_t tail = v->Ho * v->p.Wq % CONV_LANES;   /* wide columns in the last vector: at most 8 take a half one */
  int half = tail > 0 && tail <= CONV_LANES / 2;
  conv_phase_offsets(&v->p, v->KH, v->KW, v->dh, v->dw, koff);
  int64_t blen = conv_phase_len(&v->p, koff, K, ldc);
  if (conv_phase_is_image(&v->p, blen)) blen = 0;   /* 1x1 convs over planes of whole vectors: no copy */
  /* no dropped columns, planes of whole vectors, no spare rows: the kernel writes dst (no take_cols) */
  int direct = v->p.Wq == v->Wo && ldc == v->Ho * v->Wo && v->rows == v->Co;
  /* output rows of at least two whole vectors, no spare rows (the stem's 48 columns of 49-wide phase rows) */
  int by_row = !direct && v->Wo % CONV_LANES == 0 && v->Wo >= 2 * CONV_LANES && v->rows == v->Co;
  /* one image worth sharing: its threads split the image */
  int split = v->N * v->G == 1 && (double)v->rows * (double)ldc * (double)K >= SPLIT_MIN;
  int nt = par || split ? ds_team() : 1;
  par = nt > 1;
  scratch s;
  if (!scratch_take(&s, 0, (blen + (direct || by_row ? CONV_LANES : v->rows * ldc)) * 4, split ? 1 : nt))
    return ds_fail(DS_ENOMEM, "%s: out of memory for the padded images", op);
  /* the epilogue's activation in the kernel's registers (or take_cols) instead of a pass over the output */
  int act = ep ? ep->act : CONV_ACT_NONE;
  inner_job job = { v, kr, a, src, bias, dst, &s, koff, K, nvec, ldc, blen, direct, by_row, act, half,
                    act == CONV_ACT_NONE ? ep : NULL };
  if (par && split) {
    float *buf = (float *)s.base, *c = buf + blen;
    double t0 = ds_team_start();
    #pragma omp parallel num_threads(nt)
    {
      ds_team_arrive(t0);
      if (blen) {   /* the phase planes by rows among the threads */
        conv_phases_part_f32(&v->p, src, buf, blen, omp_get_thread_num(), omp_get_num_threads());
        #pragma omp barrier
      }
      inner_split(&job, blen ? buf : src, c);
    }
    ds_team_done();
  } else if (par) {
    double t0 = ds_team_start();
    #pragma omp parallel num_threads(nt)
    {
      ds_team_arrive(t0);
      inner_images(&job);
    }
    ds_team_done();
  } else inner_images(&job);
  scratch_give(&s);
  return DS_OK;
}

/* G blocks of (rows, K) from the G blocks of (n, K) at w, rows - n zero rows after each: w itself when
   rows == n (*rounded = 0), else a copy from the caching allocator (NULL when out of memory) */
static const float *pad_rows(const float *w, int64_t G, int64_t n, int64_t rows, int64_t K, int64_t *rounded) {
  *rounded = 0;
  if (rows == n) return w;
  float *a = ds_mem_alloc(G * rows * K * 4, rounded);
  if (!a) return NULL;
  for (int64_t gi = 0; gi < G; gi++) {
    memcpy(a + gi * rows * K, w + gi * n * K, (size_t)(n * K) * 4);
    memset(a + (gi * rows + n) * K, 0, (size_t)((rows - n) * K) * 4);
  }
  return a;
}

/* a 1x1 kernel on 1x1 planes (squeeze-excite convs) runs as scalar chains up to this many multiply-adds */
#define DOT_1X1_MAX 1e5

/* y (N, OC, 1, 1) = that conv of x (N, C, 1, 1): per value the FMA chain over the group's input channels in order
   from zero, then + bias (conv_rows' chain, without a 16-lane vector and a row tile for one column); 8 output
   channels' chains interleaved. Not vectorized: across output channels it would need gathers. */
__attribute__((optimize("no-tree-vectorize")))
static void conv_1x1_planes(const geom *g, const float *x, const float *w, const float *b, float *y) {
  for (int64_t n = 0; n < g->N; n++)
    for (int64_t gi = 0; gi < g->G; gi++) {
      const float *xg = x + n * g->C + gi * g->Cg;
      for (int64_t o0 = 0; o0 < g->OCg; o0 += 8) {
        int64_t m = g->OCg - o0 < 8 ? g->OCg - o0 : 8, oc = gi * g->OCg + o0;
        const float *wo = w + oc * g->Cg;
        float acc[8] = { 0 };
        for (int64_t k = 0; k < g->Cg; k++)
          for (int64_t j = 0; j < m; j++) acc[j] = fmaf(wo[j * g->Cg + k], xg[k], acc[j]);
        float *yo = y + n * g->OC + oc;
        if (b) for (int64_t j = 0; j < m; j++) yo[j] = acc[j] + b[oc + j];
        else for (int64_t j = 0; j < m; j++) yo[j] = acc[j];
      }
    }
}

/* column planes (nn_conv.h) instead of the wide rows of the phase planes (Wq columns a row) when they save at least
   1/8 of the vectors a row of output takes (LeNet-5's 10x10 maps from 14x14: 7 instead of 9), at row stride 1 */
static int use_columns(const geom *g, int64_t Wq) {
  int64_t wide = (g->OH * Wq + CONV_LANES - 1) / CONV_LANES, cols = (g->ohw + CONV_LANES - 1) / CONV_LANES;
  return g->sh == 1 && g->KW > 1 && 8 * cols <= 7 * wide;
}

int conv_direct_forward(const geom *g, const float *x, const float *w, const float *b, float *y, const conv_ep *ep) {
  int act = ep ? ep->act : CONV_ACT_NONE, lrc;   /* the lanes path applies act itself, as run_inner does */
  if ((lrc = conv_lanes_forward(g, x, w, b, y, act, NULL, act == CONV_ACT_NONE ? ep : NULL)) != CONV_NOT_DIRECT)
    return lrc;
  if (g->H == 1 && g->W == 1 && g->KH == 1 && g->KW == 1 && g->ph == 0 && g->pw == 0 &&
      (double)g->N * (double)g->OC * (double)g->Cg <= DOT_1X1_MAX) {
    conv_1x1_planes(g, x, w, b, y);
    if (ep && g->N > 0) ep->apply(ep, 0, g->N, 0, g->OC);
    return DS_OK;
  }
  inner_conv v = { g->N, g->G, { 0 }, g->OCg, g->OH, g->OW, g->KH, g->KW, g->dh, g->dw, 0 };
  conv_phase_init(&v.p, g->Cg, g->H, g->W, g->ph, g->pw, g->Hp, g->Wp, g->sh, g->sw);
  if (use_columns(g, v.p.Wq))
    conv_phase_init_cols(&v.p, g->Cg, g->H, g->W, g->ph, g->pw, g->Hp, g->OW, g->KW, g->sw, g->dw);
  else if (2 * v.p.Wq > 3 * g->OW) return CONV_NOT_DIRECT;   /* at most 50% extra columns */
  if (g->ckk > DIRECT_K_MAX) return CONV_NOT_DIRECT;
  if (g->N == 0) return DS_OK;
  const conv_kernel *kr = isa_kernel();
  if (kr == &ds_conv_avx512 && round_up(g->OCg, 8) < round_up(g->OCg, kr->tile_rows))
    kr = &ds_conv_avx512_r8;   /* fewer zero rows: 8-row tiles */
  v.rows = round_up(g->OCg, kr->tile_rows);
  int64_t rounded;
  const float *a = pad_rows(w, g->G, g->OCg, v.rows, g->ckk, &rounded);
  if (!a) return ds_fail(DS_ENOMEM, "conv2d: out of memory");
  int rc = run_inner(&v, kr, a, x, y, b, conv_worth_parallel(g), "conv2d", ep);
  if (rounded) ds_mem_release((float *)a, rounded);
  return rc;
}

/* gx[c, ih, iw] = sum over (oc, kh', kw') of w[oc, c, KH-1-kh', KW-1-kw'] * gy padded by (KH-1)*dh - ph rows
   and (KW-1)*dw - pw columns, at (ih + kh'*dh, iw + kw'*dw): a stride-1 convolution itself */
int conv_direct_backward_input(const geom *g, const float *gy, const float *w, float *gx) {
  int64_t Ph = (g->KH - 1) * g->dh - g->ph, Pw = (g->KW - 1) * g->dw - g->pw;
  int64_t Hq = g->H + (g->KH - 1) * g->dh, Wq = g->W + (g->KW - 1) * g->dw, KK = g->KH * g->KW, K = g->OCg * KK;
  if (g->sh != 1 || g->sw != 1 || Ph < 0 || Pw < 0 || 2 * Wq > 3 * g->W || K > DIRECT_K_MAX) return CONV_NOT_DIRECT;
  if (g->N == 0) return DS_OK;
  const conv_kernel *kr = isa_kernel();
  inner_conv v = { g->N, g->G, { 0 }, g->Cg, g->H, g->W, g->KH, g->KW, g->dh, g->dw, round_up(g->Cg, kr->tile_rows) };
  conv_phase_init(&v.p, g->OCg, g->OH, g->OW, Ph, Pw, Hq, Wq, 1, 1);
  int64_t rounded;
  float *a = ds_mem_alloc(g->G * v.rows * K * 4, &rounded);   /* G blocks of a[c][(oc, kh', kw')] */
  if (!a) return ds_fail(DS_ENOMEM, "conv2d_backward_input: out of memory");
  for (int64_t gi = 0; gi < g->G; gi++)
    for (int64_t c = 0; c < v.rows; c++)
      for (int64_t oc = 0; oc < g->OCg; oc++)
        for (int64_t kk = 0; kk < KK; kk++)
          a[(gi * v.rows + c) * K + oc * KK + kk] =
            c < g->Cg ? w[((gi * g->OCg + oc) * g->Cg + c) * KK + KK - 1 - kk] : 0.0f;
  int rc = run_inner(&v, kr, a, gy, gx, NULL, conv_worth_parallel(g), "conv2d_backward_input", NULL);
  ds_mem_release(a, rounded);
  return rc;
}

/* the 16 lanes of p summed in a fixed tree */
static float lane_tree(const float *p) {
  float h[8], q[4];
  for (int i = 0; i < 8; i++) h[i] = p[i] + p[i + 8];
  for (int i = 0; i < 4; i++) q[i] = h[i] + h[i + 4];
  return (q[0] + q[2]) + (q[1] + q[3]);
}

/* conv_direct_backward_weight's work; weight_runs shares the R runs of images with `omp for` among the threads
   of the enclosing parallel region, or runs them all on the calling thread outside one */
typedef struct {
  const geom *g;
  const conv_kernel *kr;
  const float *gy, *x;
  const scratch *s;
  const int64_t *koff;
  float *acc;
  int64_t rows, cols, nvec, ldd, xlen, per_run, R, nb;
} weight_job;

static void weight_runs(const weight_job *j) {
  const geom *g = j->g;
  int64_t plane = g->Hp * g->Wp, rows = j->rows, cols = j->cols, ldd = j->ldd, xlen = j->xlen, nb = j->nb;
  /* nb padded images (xlen each), then nb copies of gy in the wide layout (rows, ldd) */
  float *xpad = scratch_thread(j->s), *d = xpad + nb * xlen;
  memset(xpad, 0, (size_t)j->s->per);   /* the puts below leave the borders as they are */
  #pragma omp for schedule(static)
  for (int64_t r = 0; r < j->R; r++)
    for (int64_t n0 = r * g->N / j->R, n1 = (r + 1) * g->N / j->R; n0 < n1; n0 += nb) {
      int64_t m = n1 - n0 < nb ? n1 - n0 : nb;
      for (int64_t gi = 0; gi < g->G; gi++) {
        for (int64_t i = 0; i < m; i++) {
          put_planes(j->x + ((n0 + i) * g->C + gi * g->Cg) * g->hw, g->Cg, g->H, g->W, xpad + i * xlen, plane,
                     g->Wp, g->ph, g->pw);
          put_planes(j->gy + ((n0 + i) * g->OC + gi * g->OCg) * g->ohw, g->OCg, g->OH, g->OW, d + i * rows * ldd,
                     ldd, g->Wp, 0, 0);
        }
        j->kr->dots(rows, cols, m, j->nvec, d, ldd, rows * ldd, xpad, xlen, j->koff,
                    j->acc + r * j->per_run + gi * rows * cols * CONV_LANES);
      }
    }
}

int conv_direct_backward_weight(const geom *g, const float *gy, const float *x, float *gw) {
  if (g->sh != 1 || g->sw != 1 || !g->wide) return CONV_NOT_DIRECT;
  const conv_kernel *kr = isa_kernel();
  int64_t rows = round_up(g->OCg, kr->dot_rows), cols = round_up(g->ckk, kr->dot_cols);
  if (g->G * rows * cols > DOT_ACC_MAX) return CONV_NOT_DIRECT;
  if (g->N == 0) { memset(gw, 0, (size_t)(g->OC * g->ckk) * sizeof(float)); return DS_OK; }
  int64_t plane = g->Hp * g->Wp, nvec = (g->L + CONV_LANES - 1) / CONV_LANES, ldd = nvec * CONV_LANES;
  int64_t xlen = window_buffer_len(g->Cg, plane, g->Wp, g->KH, g->KW, g->dh, g->dw, ldd);
  int64_t per_run = g->G * rows * cols * CONV_LANES;
  int64_t R = g->N < 16 ? g->N : 16;   /* runs of images (1 .. 16): from N only */
  int64_t per_img = xlen + rows * ldd, nb = (256 * 1024 / 4) / per_img;   /* images per call: ~256 KB */
  nb = nb < 1 ? 1 : nb > 16 ? 16 : nb;
  int par = conv_worth_parallel(g) && R > 1, nt = par ? ds_team() : 1;
  par = nt > 1;
  scratch s;
  if (!scratch_take(&s, cols * 8 + R * per_run * 4, nb * per_img * 4, nt))
    return ds_fail(DS_ENOMEM, "conv2d_backward_weight: out of memory for the padded images");
  int64_t *koff = (int64_t *)s.base;
  float *acc = (float *)(koff + cols);   /* R runs of G blocks of (rows, cols, 16 lanes) */
  fill_offsets(koff, g->Cg, g->KH, g->KW, plane, g->Wp, g->dh, g->dw);
  for (int64_t j = g->ckk; j < cols; j++) koff[j] = koff[0];   /* spare columns, dropped */
  memset(acc, 0, (size_t)(R * per_run * 4));
  weight_job job = { g, kr, gy, x, &s, koff, acc, rows, cols, nvec, ldd, xlen, per_run, R, nb };
  if (par) {
    double t0 = ds_team_start();
    #pragma omp parallel num_threads(nt)
    {
      ds_team_arrive(t0);
      weight_runs(&job);
    }
    ds_team_done();
  } else weight_runs(&job);
  for (int64_t r = 1; r < R; r++)
    for (int64_t i = 0; i < per_run; i++) acc[i] += acc[r * per_run + i];
  for (int64_t gi = 0; gi < g->G; gi++)
    for (int64_t oc = 0; oc < g->OCg; oc++)
      for (int64_t j = 0; j < g->ckk; j++)
        gw[(gi * g->OCg + oc) * g->ckk + j] = lane_tree(acc + ((gi * rows + oc) * cols + j) * CONV_LANES);
  scratch_give(&s);
  return DS_OK;
}
