/* bgemm_conv.c: 2-D convolution (groups 1) of bf16 operands with f32 accumulation: each image of x is copied,
   subnormals zeroed, into a zero-bordered padded copy; its output pixels are taken in bands whose taps are
   gathered pair by pair of k (k = (c, kh, kw), PyTorch's unfold order; bgemm_conv.h's layout), multiplied by the
   weight with the pixels along the vector lanes (vdpbf16ps, its AVX2 emulation or the portable dot: bgemm.h's dot
   of the column and the weight's row) and the f32 bias added, written straight into (N, OC, OH, OW). The same bits
   on every host, ISA path, thread count and batch composition (images, or with few images bands, split over the
   threads). Kernel: ds_conv2d_bf16_bf16. */
#include "internal.h"
#include "bgemm.h"
#include "bgemm_conv.h"
#include <math.h>
#include <omp.h>
#include <string.h>
#include <immintrin.h>

/* below this many multiply-adds one thread runs the whole convolution */
#define PAR_MACS (1 << 19)
/* a band's taps are kept near this size (bytes; but 64 pixels at least), to stay in L1/L2 while every channel
   block reads them */
#define BAND_BYTES 32768
/* spare words after each padded image and band: the 16-pixel gathers read and write up to 15 past a run's end */
#define SLACK 32

typedef struct { int64_t N, C, H, W, OC, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw; } geom;

typedef struct {
  geom g;
  int64_t K, P, L, Hp, Wp, img;   /* L = OH OW pixels; img: words per padded image, (C, Hp, Wp) then SLACK */
  int64_t bw, nb, band;           /* pixels per band (a multiple of 16), bands per image, words per band */
  const uint16_t *x;
  float *y;
  uint16_t *xp;                   /* (N) padded images */
  const int64_t *tap;             /* (2 P) offset of tap k in a padded image, -1 past K */
  const uint32_t *w;              /* (OC, P) */
  const float *wf, *bias;         /* (OC, P, 2), (OC) */
  uint32_t *taps;                 /* one band per thread */
  bconv_band_fn fn;
  int avx512;                     /* gather unit-stride taps with ds_bconv_gather_avx512 */
} bconv_job;

/* the portable path: bgemm.h's dot written out, one output at a time */
static void band_portable(const bconv_band *b) {
  for (int64_t o = 0; o < b->O; o++) {
    const float *wf = b->wf + o * b->P * 2;
    for (int64_t i = 0; i < b->n; i++) {
      float acc = 0.0f;
      for (int64_t p = 0; p < b->P; p++) {
        uint32_t x = b->a[p * b->bw + i];
        acc = ds_bgemm_ftz(fmaf(ds_bgemm_odd(x), wf[2 * p], acc));
        acc = ds_bgemm_ftz(fmaf(ds_bgemm_even(x), wf[2 * p + 1], acc));
      }
      if (acc != acc) { uint32_t u = BG_NAN; memcpy(&acc, &u, 4); }
      b->y[o * b->ldy + i] = acc + b->bias[o];
    }
  }
}

/* the path, as bgemm.c chooses: vdpbf16ps on AVX-512 BF16 hosts, the portable code under DS_ISA=scalar, AVX2
   otherwise */
static bconv_band_fn band_kernel(void) {
  if (ds_isa_avx512bf16()) return ds_bconv_band_avx512bf16;
  if (ds_isa() == DS_ISA_SCALAR) return band_portable;
  return ds_bconv_band_avx2;
}

/* d = s (n bf16) with subnormals made the zeros of their signs, 16 at a time */
static void copy_daz(const uint16_t *s, int64_t n, uint16_t *d) {
  const __m256i expo = _mm256_set1_epi16(0x7f80), rest = _mm256_set1_epi16(0x7fff);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i v = _mm256_loadu_si256((const __m256i *)(s + i));
    __m256i sub = _mm256_cmpeq_epi16(_mm256_and_si256(v, expo), _mm256_setzero_si256());
    _mm256_storeu_si256((__m256i *)(d + i), _mm256_andnot_si256(_mm256_and_si256(sub, rest), v));
  }
  for (; i < n; i++) d[i] = (uint16_t)ds_bgemm_daz(s[i]);
}

/* image n of x into its padded copy: zeros around it, then the slack */
static void pad_image(const bconv_job *j, int64_t n) {
  const geom *g = &j->g;
  int64_t hw = g->H * g->W, padded = g->C * j->Hp * j->Wp;
  const uint16_t *xi = j->x + n * g->C * hw;
  uint16_t *q = j->xp + n * j->img;
  if (padded == g->C * hw) copy_daz(xi, padded, q);
  else {
    memset(q, 0, (size_t)padded * sizeof(uint16_t));
    for (int64_t r = 0; r < g->C * g->H; r++)
      copy_daz(xi + r * g->W, g->W, q + (r / g->H * j->Hp + r % g->H + g->ph) * j->Wp + g->pw);
  }
  memset(q + padded, 0, SLACK * sizeof(uint16_t));
}

/* d[i] = s0[i step] | s1[i step] << 16 (s1 NULL: 0) for i < n; with step 1 sixteen at a time, which may read up to
   15 values past s0 + n and s1 + n and write up to 15 words past d + n */
static inline void pairs(const uint16_t *s0, const uint16_t *s1, int64_t step, int64_t n, uint32_t *d) {
  if (step != 1) {
    for (int64_t i = 0; i < n; i++) d[i] = (uint32_t)s0[i * step] | (s1 ? (uint32_t)s1[i * step] << 16 : 0);
    return;
  }
  for (int64_t i = 0; i < n; i += 16) {
    __m256i a = _mm256_loadu_si256((const __m256i *)(s0 + i));
    __m256i b = s1 ? _mm256_loadu_si256((const __m256i *)(s1 + i)) : _mm256_setzero_si256();
    __m256i lo = _mm256_unpacklo_epi16(a, b), hi = _mm256_unpackhi_epi16(a, b);   /* pixels 0-3 8-11, 4-7 12-15 */
    _mm256_storeu_si256((__m256i *)(d + i), _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256((__m256i *)(d + i + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
  }
}

/* the taps (P, bw) of pixels [p0, p0 + n) of padded image q: per pair of k, each output row's run of pixels, in
   increasing pixel order (what a run writes past its end is rewritten by the next run or pair), the pixels from n
   to the next multiple of 16 zeroed */
static void gather_band(const bconv_job *j, const uint16_t *q, int64_t p0, int64_t n, uint32_t *a) {
  const geom *g = &j->g;
  int64_t n16 = (n + 15) / 16 * 16, rowstep = g->sh * j->Wp;
  for (int64_t p = 0; p < j->P; p++) {
    int64_t t0 = j->tap[2 * p], t1 = j->tap[2 * p + 1];
    uint32_t *d = a + p * j->bw;
    int64_t ow = p0 % g->OW, row = p0 / g->OW * rowstep;   /* the run's first column, its row's offset */
    if (j->avx512 && g->sw == 1)
      ds_bconv_gather_avx512(q + t0, t1 >= 0 ? q + t1 : NULL, ow, row, g->OW, rowstep, n, d);
    else
      for (int64_t i = 0; i < n; i += g->OW - ow, ow = 0, row += rowstep) {
        int64_t run = g->OW - ow < n - i ? g->OW - ow : n - i, off = row + ow * g->sw;
        pairs(q + t0 + off, t1 >= 0 ? q + t1 + off : NULL, g->sw, run, d + i);
      }
    memset(d + n, 0, (size_t)(n16 - n) * sizeof(uint32_t));
  }
}

/* band u (of image u / nb) gathered into a and multiplied */
static void run_band(const bconv_job *j, int64_t u, uint32_t *a) {
  int64_t n = u / j->nb, p0 = u % j->nb * j->bw, len = j->L - p0 < j->bw ? j->L - p0 : j->bw;
  gather_band(j, j->xp + n * j->img, p0, len, a);
  bconv_band b = { j->P, j->bw, len, j->g.OC, a, j->w, j->wf, j->bias, j->y + n * j->g.OC * j->L + p0, j->L };
  j->fn(&b);
}

/* thread me of nt: with two images or more a thread, its share of the images, each padded and then its bands run
   while it is in cache; with fewer, its share of the images to pad, then (once all are) of the bands */
static void run_share(const bconv_job *j, int me, int nt) {
  uint32_t *a = j->taps + me * j->band;
  int64_t N = j->g.N, n0 = N * me / nt, n1 = N * (me + 1) / nt;
  if (N >= 2 * nt) {
    for (int64_t n = n0; n < n1; n++) {
      pad_image(j, n);
      for (int64_t u = n * j->nb; u < (n + 1) * j->nb; u++) run_band(j, u, a);
    }
    return;
  }
  for (int64_t n = n0; n < n1; n++) pad_image(j, n);
  if (nt > 1) {
#pragma omp barrier
  }
  int64_t units = N * j->nb;
  for (int64_t u = units * me / nt; u < units * (me + 1) / nt; u++) run_band(j, u, a);
}

static int check(const ds_tensor *t, int dtype, const char *op, const char *what) {
  DS_CHECK(t, "%s: missing %s", op, what);
  DS_CHECK(t->dtype == dtype, "%s: %s must be %s, got %s", op, what, ds_dtype_name(dtype), ds_dtype_name(t->dtype));
  DS_CHECK(ds_tensor_is_contiguous(t), "%s: %s must be contiguous", op, what);
  return DS_OK;
}

/* the band width and count: as many bands as BAND_BYTES of taps a band (but 64 pixels at least) need, sharing the
   pixels evenly; at least two per thread when the batch alone gives fewer and the work is parallel */
static void bands(bconv_job *j, int nt, int par) {
  int64_t L16 = (j->L + 15) / 16 * 16, bw = j->P > 0 ? BAND_BYTES / (4 * j->P) / 16 * 16 : L16;
  bw = bw < 64 ? 64 : bw > L16 ? L16 : bw;
  int64_t nb = (j->L + bw - 1) / bw;
  bw = ((j->L + nb - 1) / nb + 15) / 16 * 16;   /* the pixels shared evenly (100: 64 + 36, not 96 + 4) */
  if (par && j->g.N * nb < 2 * nt) {
    int64_t want = (2 * nt + j->g.N - 1) / j->g.N, split = ((j->L + want - 1) / want + 15) / 16 * 16;
    bw = split < bw ? split : bw;
    nb = (j->L + bw - 1) / bw;
  }
  j->bw = bw;
  j->nb = nb;
  j->band = j->P * bw + SLACK;
}

/* t = {y (N, OC, OH, OW) f32, x (N, C, H, W) bf16, w (OC, C, KH, KW) bf16, b (OC) f32}; attrs: stride (2),
   padding (2), dilation (2) */
int ds_conv2d_bf16_bf16(ds_tensor *const *t, const double *attrs) {
  const char *op = "conv2d_bf16";
  char s1[128], s2[128], s3[128];
  int rc;
  ds_tensor *y = t[0];
  const ds_tensor *x = t[1], *w = t[2], *b = t[3];
  if ((rc = check(y, DS_F32, op, "output")) || (rc = check(x, DS_BF16, op, "input")) ||
      (rc = check(w, DS_BF16, op, "weight")) || (rc = check(b, DS_F32, op, "bias")))
    return rc;
  DS_CHECK(x->ndim == 4 && w->ndim == 4 && y->ndim == 4 && b->ndim == 1, "%s: input %s, weight %s, output %s: "
           "expected 4-D", op, ds_shape_str(x, s1), ds_shape_str(w, s2), ds_shape_str(y, s3));
  for (int i = 0; i < 6; i++)
    DS_CHECK(attrs[i] == floor(attrs[i]) && attrs[i] >= (i >= 2 && i < 4 ? 0 : 1) && attrs[i] < 2147483648.0,
             "%s: bad stride, padding or dilation", op);
  geom g = { x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[0], w->shape[2], w->shape[3],
             y->shape[2], y->shape[3], (int64_t)attrs[0], (int64_t)attrs[1], (int64_t)attrs[2], (int64_t)attrs[3],
             (int64_t)attrs[4], (int64_t)attrs[5] };
  int64_t eh = (g.KH - 1) * g.dh + 1, ew = (g.KW - 1) * g.dw + 1;
  int64_t oh = g.H + 2 * g.ph >= eh ? (g.H + 2 * g.ph - eh) / g.sh + 1 : 0;
  int64_t ow = g.W + 2 * g.pw >= ew ? (g.W + 2 * g.pw - ew) / g.sw + 1 : 0;
  DS_CHECK(w->shape[1] == g.C && b->shape[0] == g.OC && y->shape[0] == g.N && y->shape[1] == g.OC &&
               g.OH == oh && g.OW == ow,
           "%s: input %s, weight %s, output %s do not agree", op, ds_shape_str(x, s1), ds_shape_str(w, s2),
           ds_shape_str(y, s3));
  if (y->numel == 0) return DS_OK;
  int64_t K = g.C * g.KH * g.KW, P = (K + 1) / 2, Hp = g.H + 2 * g.ph, Wp = g.W + 2 * g.pw;
  bconv_job j = { .g = g, .K = K, .P = P, .L = g.OH * g.OW, .Hp = Hp, .Wp = Wp, .img = g.C * Hp * Wp + SLACK,
                  .x = x->data, .y = y->data, .bias = b->data, .fn = band_kernel(),
                  .avx512 = ds_isa() == DS_ISA_AVX512 };
  int nt = ds_team(), par = nt > 1 && (double)g.N * j.L * g.OC * K >= PAR_MACS;
  bands(&j, nt, par);
  par = par && g.N * j.nb > 1;
  int64_t rounded, wn = g.OC * P;
  int64_t bytes = 2 * P * (int64_t)sizeof(int64_t) + 3 * wn * (int64_t)sizeof(uint32_t) +
                  (g.N * j.img + 1) * (int64_t)sizeof(uint16_t) + (par ? nt : 1) * j.band * (int64_t)sizeof(uint32_t) +
                  64;
  char *buf = ds_mem_alloc(bytes, &rounded);
  if (!buf) return ds_fail(DS_ENOMEM, "%s: out of memory for the padded input", op);
  int64_t *tap = (int64_t *)buf;                      /* (2 P) */
  uint32_t *wp = (uint32_t *)(tap + 2 * P);           /* (OC, P) */
  float *wf = (float *)(wp + wn);                     /* (OC, P, 2) */
  j.taps = (uint32_t *)(wf + 2 * wn);                 /* a band per thread */
  j.xp = (uint16_t *)(j.taps + (par ? nt : 1) * j.band);   /* (N) padded images */
  int64_t k = 0;   /* tap k = (c, kh, kw) in order, then -1 past K */
  for (int64_t c = 0; c < g.C; c++)
    for (int64_t i = 0; i < g.KH; i++)
      for (int64_t jw = 0; jw < g.KW; jw++) tap[k++] = (c * Hp + i * g.dh) * Wp + jw * g.dw;
  if (k < 2 * P) tap[k] = -1;
  const uint16_t *wd = w->data;
  uint16_t *wh = (uint16_t *)wp;   /* the weight's pairs of k as the taps': the rows, subnormals zeroed, 0 past K */
  for (int64_t o = 0; o < g.OC; o++) {
    copy_daz(wd + o * K, K, wh + o * 2 * P);
    if (K % 2) wh[o * 2 * P + K] = 0;
  }
  if (j.fn != ds_bconv_band_avx512bf16)   /* the f32 halves the other paths read */
    for (int64_t i = 0; i < wn; i++) {
      uint32_t v;
      memcpy(&v, (const char *)wp + 4 * i, 4);
      wf[2 * i] = ds_bgemm_odd(v);
      wf[2 * i + 1] = ds_bgemm_even(v);
    }
  j.tap = tap;
  j.w = wp;
  j.wf = wf;
  if (par) {
    double t0 = ds_team_start();
#pragma omp parallel num_threads(nt)
    {
      ds_team_arrive(t0);
      run_share(&j, omp_get_thread_num(), omp_get_num_threads());
    }
    ds_team_done();
  } else run_share(&j, 0, 1);
  ds_mem_release(buf, rounded);
  return DS_OK;
}
