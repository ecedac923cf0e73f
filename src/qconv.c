/* qconv.c: int8 2-D convolution (groups = 1): each image of x (f32) is quantized to u8 with its own scale and
   zero point (dynamic) or the fixed ones of calibration (static) into a copy padded with the zero point (so
   padding is an exact 0), its output pixels taken in bands whose taps are gathered four per pixel (qconv.h's
   layout; group_taps), multiplied by the per-output-channel s8 weight in exact int32 sums with the pixels along
   the vector lanes (VNNI, AVX2 or the portable path: the same integers) and dequantized as linear_int8 is:
   y = float(acc - zp * colsum) * (scale * wscale) + bias, written straight into (B, O, OH, OW). The same bits on
   every host, ISA path, thread count and batch composition (images, or with few images bands, split over the
   threads). The weight's layout (its sums, its k-groups, its taps' positions) is made on each call, or once for a
   constant weight (ds_pack_int8_conv_weight_i8, passes/prepack.lua) and read by the _packed kernels. */
#include "internal.h"
#include "qgemm.h"
#include "qconv.h"
#include <math.h>
#include <omp.h>
#include <string.h>
#include <immintrin.h>

/* below this many multiply-adds one thread runs the whole convolution */
#define PAR_MACS (1 << 19)
/* a band's taps are kept near this size (bytes; but 64 pixels at least), to stay in L1/L2 while every channel
   block reads them */
#define BAND_BYTES 32768
/* spare bytes after each padded image and band: the 16-pixel gathers may read and write past a run's end */
#define SLACK 64

static int check(const ds_tensor *t, int dtype, const char *op, const char *what) {
  DS_CHECK(t, "%s: missing %s", op, what);
  DS_CHECK(t->dtype == dtype, "%s: %s must be %s, got %s", op, what, ds_dtype_name(dtype), ds_dtype_name(t->dtype));
  DS_CHECK(ds_tensor_is_contiguous(t), "%s: %s must be contiguous", op, what);
  return DS_OK;
}

typedef struct { int64_t C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW; } geometry;

typedef struct {
  geometry g;
  int64_t B, O, K, G, P, Hp, Wp, img;   /* img: bytes per image: padded (C, Hp, Wp), slack[, flat (C, H, W)] */
  int64_t bw, nb, band;                 /* pixels per band (a multiple of 16), bands per image, bytes per band */
  const float *x;
  float *y;
  int fixed;
  float fscale;
  int32_t fzp;
  uint8_t *qp;                          /* (B) padded images */
  float *sa;                            /* (B) image scales */
  int32_t *za;                          /* (B) image zero points */
  const int64_t *tap;                   /* (G, 4) offset of each group's taps' first pixel in a padded image
                                           (group_taps; a missing tap repeats its group's first: it meets a zero
                                           weight) */
  const int32_t *wk, *w16, *cs;
  const float *ws, *bias;
  uint8_t *taps;                        /* one band per thread */
  qconv_band_fn fn;
  int vbmi;                             /* gather unit-stride taps with ds_qconv_gather_vbmi */
  int bad;
} qconv_job;

/* the portable path: the same sums as the vector kernels, one output at a time */
static void band_portable(const qconv_band *b) {
  for (int64_t o = 0; o < b->O; o++) {
    int32_t zc = b->za * b->cs[o];
    float scale = b->sa * b->ws[o];
    for (int64_t p = 0; p < b->n; p++) {
      int32_t acc = 0;
      for (int64_t g = 0; g < b->G; g++) {
        int8_t w[4];
        memcpy(w, &b->wk[o * b->G + g], 4);
        const uint8_t *a = b->a + (g * b->bw + p) * 4;
        for (int t = 0; t < 4; t++) acc += (int32_t)a[t] * (int32_t)w[t];
      }
      b->y[o * b->ldy + p] = ds_qconv_value(acc, zc, scale, b->bias[o]);
    }
  }
}

/* the path: VNNI on AVX-512 hosts that have it, the portable code under DS_ISA=scalar, AVX2 otherwise (as
   qgemm.c chooses) */
static qconv_band_fn band_kernel(void) {
  if (ds_isa_vnni()) return ds_qconv_band_vnni;
  if (ds_isa() == DS_ISA_SCALAR) return band_portable;
  return ds_qconv_band_avx2;
}

/* image b of x quantized into its padded copy (the zero point around it): in one call, straight into place
   without padding, else into the flat copy after the slack and moved row by row; 0: NaN or an infinity */
static int quantize_image(qconv_job *j, int64_t b) {
  const geometry *g = &j->g;
  int64_t CHW = g->C * g->H * g->W, padded = g->C * j->Hp * j->Wp;
  const float *xb = j->x + b * CHW;
  float s = j->fscale;
  int32_t zp = j->fzp;
  if (!j->fixed && !ds_qgemm_range(xb, CHW, &s, &zp)) return 0;
  uint8_t *q = j->qp + b * j->img, *flat = padded == CHW ? q : q + padded + SLACK;
  if (!j->fixed && s > 0 && ds_isa() == DS_ISA_AVX512)   /* x is finite: ds_qgemm_quantize without its range */
    ds_qgemm_quantize_avx512(xb, CHW, s, zp, flat);
  else if (!ds_qgemm_quantize(xb, CHW, s, zp, flat)) return 0;
  if (flat != q) {
    memset(q, zp, (size_t)padded);
    for (int64_t r = 0; r < g->C * g->H; r++)
      memcpy(q + (r / g->H * j->Hp + r % g->H + g->ph) * j->Wp + g->pw, flat + r * g->W, (size_t)g->W);
  }
  memset(q + padded, 0, SLACK);
  j->sa[b] = s;
  j->za[b] = zp;
  return 1;
}

/* d[4 i + t] = s_t[i * step] for i < n; with step 1 sixteen pixels at a time, which may read up to 15 bytes
   past each s_t + n and write up to 60 past d + 4 n */
static inline void interleave4(const uint8_t *const *s, int64_t step, int64_t n, uint8_t *d) {
  if (step != 1) {
    for (int64_t i = 0; i < n; i++)
      for (int t = 0; t < 4; t++) d[4 * i + t] = s[t][i * step];
    return;
  }
  for (int64_t i = 0; i < n; i += 16) {
    __m128i a = _mm_loadu_si128((const __m128i *)(s[0] + i)), b = _mm_loadu_si128((const __m128i *)(s[1] + i));
    __m128i c = _mm_loadu_si128((const __m128i *)(s[2] + i)), e = _mm_loadu_si128((const __m128i *)(s[3] + i));
    __m128i ab0 = _mm_unpacklo_epi8(a, b), ab1 = _mm_unpackhi_epi8(a, b);
    __m128i ce0 = _mm_unpacklo_epi8(c, e), ce1 = _mm_unpackhi_epi8(c, e);
    _mm_storeu_si128((__m128i *)(d + 4 * i), _mm_unpacklo_epi16(ab0, ce0));
    _mm_storeu_si128((__m128i *)(d + 4 * i + 16), _mm_unpackhi_epi16(ab0, ce0));
    _mm_storeu_si128((__m128i *)(d + 4 * i + 32), _mm_unpacklo_epi16(ab1, ce1));
    _mm_storeu_si128((__m128i *)(d + 4 * i + 48), _mm_unpackhi_epi16(ab1, ce1));
  }
}

/* the taps (G, bw, 4) of pixels [p0, p0 + n) of padded image q: per k-group, each output row's run of pixels
   from four source rows (j->tap; on VBMI hosts a window of four adjacent columns from one); in increasing pixel
   order, so what a run writes past its end is rewritten by the next run or group, and the pixels from n to the
   next multiple of 16 are zeroed */
static void gather_band(const qconv_job *j, const uint8_t *q, int64_t p0, int64_t n, uint8_t *a) {
  const geometry *g = &j->g;
  int64_t n16 = (n + 15) / 16 * 16;
  for (int64_t gi = 0; gi < j->G; gi++) {
    const int64_t *tap = j->tap + 4 * gi;
    const uint8_t *base[4] = { q + tap[0], q + tap[1], q + tap[2], q + tap[3] };
    uint8_t *d = a + gi * j->bw * 4;
    int64_t ow = p0 % g->OW, row = p0 / g->OW * g->sh * j->Wp;   /* the run's first column, its row's offset */
    int window = tap[1] == tap[0] + 1 && tap[2] == tap[0] + 2 && tap[3] == tap[0] + 3;
    if (j->vbmi && g->sw == 1) ds_qconv_gather_vbmi(base, window, ow, row, g->OW, g->sh * j->Wp, n, d);
    else
      for (int64_t p = 0; p < n; p += g->OW - ow, ow = 0, row += g->sh * j->Wp) {
        int64_t run = g->OW - ow < n - p ? g->OW - ow : n - p, off = row + ow * g->sw;
        const uint8_t *s[4] = { base[0] + off, base[1] + off, base[2] + off, base[3] + off };
        interleave4(s, g->sw, run, d + p * 4);
      }
    memset(d + n * 4, 0, (size_t)((n16 - n) * 4));
  }
}

/* band u (of image u / nb) gathered into a and multiplied */
static void run_band(const qconv_job *j, int64_t u, uint8_t *a) {
  int64_t b = u / j->nb, p0 = u % j->nb * j->bw, n = j->P - p0 < j->bw ? j->P - p0 : j->bw;
  gather_band(j, j->qp + b * j->img, p0, n, a);
  qconv_band cb = { j->G, j->bw, n, j->O, a, j->wk, j->w16, j->cs, j->ws, j->bias, j->za[b], j->sa[b],
                    j->y + b * j->O * j->P + p0, j->P };
  j->fn(&cb);
}

/* thread me of nt: with two images or more a thread, its share of the images, each quantized and then its bands
   run while it is in cache; with fewer, its share of the images to quantize, then (once all are) of the bands */
static void run_share(qconv_job *j, int me, int nt) {
  uint8_t *a = j->taps + me * j->band;
  int64_t b0 = j->B * me / nt, b1 = j->B * (me + 1) / nt;
  if (j->B >= 2 * nt) {
    for (int64_t b = b0; b < b1; b++) {
      if (!quantize_image(j, b)) {
        __atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED);
        return;
      }
      for (int64_t u = b * j->nb; u < (b + 1) * j->nb; u++) run_band(j, u, a);
    }
    return;
  }
  int ok = 1;
  for (int64_t b = b0; b < b1 && ok; b++) ok = quantize_image(j, b);
  if (!ok) __atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED);
  if (nt > 1) {
#pragma omp barrier
  }
  if (__atomic_load_n(&j->bad, __ATOMIC_RELAXED)) return;
  int64_t units = j->B * j->nb;
  for (int64_t u = units * me / nt; u < units * (me + 1) / nt; u++) run_band(j, u, a);
}

/* the k of each group's four taps (-1: none): for each input channel and kernel row its whole windows of four
   adjacent columns (window: unit dilation; gathered from one source run on VBMI hosts), then the other taps in k
   order, four by four; the int32 sums are exact, so the grouping does not change them */
static void group_taps(int64_t C, int64_t kh, int64_t kw, int window, int64_t G, int32_t *gk) {
  int64_t n = 0, nw = window ? kw / 4 : 0;
  for (int64_t r = 0; r < C * kh; r++)
    for (int64_t t = 0; t < 4 * nw; t++) gk[n++] = (int32_t)(r * kw + t);
  for (int64_t r = 0; r < C * kh; r++)
    for (int64_t c = 4 * nw; c < kw; c++) gk[n++] = (int32_t)(r * kw + c);
  while (n < 4 * G) gk[n++] = -1;
}

/* the packed weight (int32 words): a header {O, C, kh, kw, window}, cs (O) the weight sums over k, qconv.h's wk
   (O, G) and w16 (O, G, 2), then for the 4 G taps of the groups their channel, kernel row and column (a missing
   tap: its group's first, which meets a zero weight) */
#define PK_HEAD 5
static int64_t packed_len(int64_t O, int64_t G) { return PK_HEAD + O * (1 + 3 * G) + 12 * G; }

/* w (O, C, kh, kw) s8 packed into p (packed_len words) */
static void pack_conv_weight(const int8_t *w, int64_t O, int64_t C, int64_t kh, int64_t kw, int window, int32_t *p) {
  int64_t K = C * kh * kw, G = (K + 3) / 4;
  int32_t *cs = p + PK_HEAD, *wk = cs + O, *w16 = wk + O * G, *tc = w16 + 2 * O * G, *ti = tc + 4 * G;
  int32_t *tj = ti + 4 * G, *gk = tj;   /* the groups' k in tj's place, replaced from the last tap down */
  int32_t head[PK_HEAD] = { (int32_t)O, (int32_t)C, (int32_t)kh, (int32_t)kw, window };
  memcpy(p, head, sizeof head);
  ds_qgemm_colsums(w, O, K, cs);
  group_taps(C, kh, kw, window, G, gk);
  for (int64_t o = 0; o < O; o++)
    for (int64_t g = 0; g < G; g++) {
      int8_t four[4];
      for (int t = 0; t < 4; t++) four[t] = gk[4 * g + t] < 0 ? 0 : w[o * K + gk[4 * g + t]];
      memcpy(&wk[o * G + g], four, 4);
      w16[(o * G + g) * 2] = (int32_t)((uint32_t)(uint16_t)four[0] | (uint32_t)(uint16_t)four[2] << 16);
      w16[(o * G + g) * 2 + 1] = (int32_t)((uint32_t)(uint16_t)four[1] | (uint32_t)(uint16_t)four[3] << 16);
    }
  for (int64_t q = 4 * G - 1; q >= 0; q--) {   /* gk[q] and its group's first (at or below q) are still unread */
    int64_t k = gk[q] >= 0 ? gk[q] : gk[q / 4 * 4];
    tc[q] = (int32_t)(k / (kh * kw));
    ti[q] = (int32_t)(k % (kh * kw) / kw);
    tj[q] = (int32_t)(k % kw);
  }
}

/* t = {wp (packed_len) i32, w (O, C, kh, kw) i8}; attrs: dilation w: w packed once (passes/prepack.lua) */
int ds_pack_int8_conv_weight_i8(ds_tensor *const *t, const double *attrs) {
  const char *op = "pack_int8_conv_weight";
  char s1[128], s2[128];
  int rc;
  if ((rc = check(t[0], DS_I32, op, "packed weight")) || (rc = check(t[1], DS_I8, op, "weight"))) return rc;
  const ds_tensor *wp = t[0], *w = t[1];
  DS_CHECK(w->ndim == 4 && w->shape[1] * w->shape[2] * w->shape[3] <= QG_K_MAX && attrs[0] >= 1 &&
               wp->numel == packed_len(w->shape[0], (w->shape[1] * w->shape[2] * w->shape[3] + 3) / 4),
           "%s: %s cannot hold %s packed", op, ds_shape_str(wp, s1), ds_shape_str(w, s2));
  pack_conv_weight(w->data, w->shape[0], w->shape[1], w->shape[2], w->shape[3], attrs[0] == 1, wp->data);
  return DS_OK;
}

/* t = {y (B, O, OH, OW), x (B, C, H, W), w (O, C, kh, kw) i8 or, packed, its words (packed_len) i32, wscale (O),
   bias (O)[, x_scale {} f32, x_zero {} u8]}; attrs: stride h, w, padding h, w, dilation h, w[, packed: kh, kw] */
static int conv_int8(const char *op, ds_tensor *const *t, const double *attrs, int fixed, int packed) {
  ds_tensor *y = t[0], *x = t[1], *w = t[2], *ws = t[3], *bias = t[4];
  char s1[128], s2[128];
  int rc;
  if ((rc = check(y, DS_F32, op, "output")) || (rc = check(x, DS_F32, op, "input")) ||
      (rc = check(w, packed ? DS_I32 : DS_I8, op, packed ? "packed weight" : "weight")) ||
      (rc = check(ws, DS_F32, op, "weight scales")) || (rc = check(bias, DS_F32, op, "bias")))
    return rc;
  float fscale = 0;
  int32_t fzp = 0;
  if (fixed) {
    if ((rc = check(t[5], DS_F32, op, "input scale")) || (rc = check(t[6], DS_U8, op, "input zero point"))) return rc;
    DS_CHECK(t[5]->numel == 1 && t[6]->numel == 1, "%s: the input scale and zero point must be single values", op);
    fscale = *(const float *)t[5]->data;
    fzp = *(const uint8_t *)t[6]->data;
    DS_CHECK(isfinite(fscale) && fscale > 0, "%s: the input scale must be positive and finite, got %g", op,
             (double)fscale);
  }
  DS_CHECK(x->ndim == 4 && (packed || (w->ndim == 4 && x->shape[1] == w->shape[1])), "%s: input %s and weight %s "
           "must be (B, C, H, W) and (O, C, kh, kw)", op, ds_shape_str(x, s1), ds_shape_str(w, s2));
  for (int i = 0; i < (packed ? 8 : 6); i++)
    DS_CHECK(attrs[i] == floor(attrs[i]) && attrs[i] >= (i >= 2 && i < 4 ? 0 : 1) && attrs[i] < 2147483648.0,
             "%s: bad stride, padding, "
             "dilation or kernel size", op);
  geometry g = { x->shape[1], x->shape[2], x->shape[3], packed ? (int64_t)attrs[6] : w->shape[2],
                 packed ? (int64_t)attrs[7] : w->shape[3], (int64_t)attrs[0], (int64_t)attrs[1], (int64_t)attrs[2],
                 (int64_t)attrs[3], (int64_t)attrs[4], (int64_t)attrs[5], 0, 0 };
  int64_t B = x->shape[0], O = packed ? ws->numel : w->shape[0], K = g.C * g.kh * g.kw, G = (K + 3) / 4;
  DS_CHECK(K <= QG_K_MAX, "%s: C * kh * kw = %lld is over %d (the int32 sums could overflow)", op, (long long)K,
           QG_K_MAX);
  if (packed) {
    const int32_t *h = w->data;
    DS_CHECK(w->numel == packed_len(O, G) && h[0] == O && h[1] == g.C && h[2] == g.kh && h[3] == g.kw &&
                 h[4] == (g.dw == 1),
             "%s: the packed weight %s is not that of (%lld, %lld, %lld, %lld) with this dilation", op,
             ds_shape_str(w, s1), (long long)O, (long long)g.C, (long long)g.kh, (long long)g.kw);
  }
  g.OH = (g.H + 2 * g.ph - g.dh * (g.kh - 1) - 1) / g.sh + 1;
  g.OW = (g.W + 2 * g.pw - g.dw * (g.kw - 1) - 1) / g.sw + 1;
  DS_CHECK(g.OH >= 1 && g.OW >= 1, "%s: the kernel does not fit the padded input %s", op, ds_shape_str(x, s1));
  DS_CHECK(y->ndim == 4 && y->shape[0] == B && y->shape[1] == O && y->shape[2] == g.OH && y->shape[3] == g.OW,
           "%s: output %s does not match (%lld, %lld, %lld, %lld)", op, ds_shape_str(y, s1), (long long)B,
           (long long)O, (long long)g.OH, (long long)g.OW);
  DS_CHECK(ws->numel == O && bias->numel == O, "%s: weight scales and bias must hold O = %lld values", op,
           (long long)O);
  int64_t P = g.OH * g.OW;
  if (B == 0 || P == 0 || O == 0) return DS_OK;
  qconv_job j = { .g = g, .B = B, .O = O, .K = K, .G = G, .P = P, .Hp = g.H + 2 * g.ph,
                  .Wp = g.W + 2 * g.pw, .x = x->data, .y = y->data, .fixed = fixed, .fscale = fscale, .fzp = fzp,
                  .ws = ws->data, .bias = bias->data, .fn = band_kernel(), .vbmi = ds_isa_vbmi() };
  j.img = g.C * j.Hp * j.Wp + SLACK + (g.ph || g.pw ? g.C * g.H * g.W : 0);   /* padded, slack, flat */
  /* bands of about BAND_BYTES of taps; at least two per thread when the batch alone gives fewer */
  int64_t P16 = (P + 15) / 16 * 16, bw = j.G > 0 ? BAND_BYTES / (4 * j.G) / 16 * 16 : P16;   /* (C = 0: no taps) */
  bw = bw < 64 ? 64 : bw > P16 ? P16 : bw;   /* at least a whole VNNI tile of pixels */
  int nt = ds_team(), par = nt > 1 && (double)B * P * O * K >= PAR_MACS;
  int64_t nb = (P + bw - 1) / bw;
  if (par && B * nb < 2 * nt) {
    int64_t want = (2 * nt + B - 1) / B, split = ((P + want - 1) / want + 15) / 16 * 16;
    bw = split < bw ? split : bw;
    nb = (P + bw - 1) / bw;
  }
  par = par && B * nb > 1;
  j.bw = bw;
  j.nb = nb;
  j.band = j.G * bw * 4 + SLACK;
  int64_t rounded, words = packed ? 0 : packed_len(O, G);
  int64_t bytes = 4 * j.G * (int64_t)sizeof(int64_t) + B * (int64_t)(sizeof(float) + sizeof(int32_t)) +
                  words * (int64_t)sizeof(int32_t) + B * j.img + (par ? nt : 1) * j.band + 64;
  char *buf = ds_mem_alloc(bytes, &rounded);
  if (!buf) return ds_fail(DS_ENOMEM, "%s: out of memory for the quantized input", op);
  int64_t *tap = (int64_t *)buf;             /* (G, 4) */
  j.sa = (float *)(tap + 4 * j.G);           /* (B) */
  j.za = (int32_t *)(j.sa + B);              /* (B) */
  int32_t *pk = packed ? w->data : j.za + B; /* the packed weight, or its place here */
  j.qp = (uint8_t *)(j.za + B + words);      /* (B) padded images */
  j.taps = j.qp + B * j.img;                 /* a band per thread */
  if (!packed) pack_conv_weight(w->data, O, g.C, g.kh, g.kw, g.dw == 1, pk);
  j.cs = pk + PK_HEAD;
  j.wk = j.cs + O;
  j.w16 = j.wk + O * G;
  const int32_t *tc = j.w16 + 2 * O * G, *ti = tc + 4 * G, *tj = ti + 4 * G;
  int inside = 1;   /* a packed weight's taps within the kernel, its sums possible (a crafted plan's could be any) */
  for (int64_t o = 0; o < O; o++) inside &= j.cs[o] >= -128 * K && j.cs[o] <= 127 * K;
  for (int64_t q = 0; q < 4 * G; q++) {
    inside &= tc[q] >= 0 && tc[q] < g.C && ti[q] >= 0 && ti[q] < g.kh && tj[q] >= 0 && tj[q] < g.kw;
    tap[q] = ((int64_t)tc[q] * j.Hp + ti[q] * g.dh) * j.Wp + tj[q] * g.dw;
  }
  if (!inside) {
    ds_mem_release(buf, rounded);
    return ds_fail(DS_EINVAL, "%s: the packed weight's taps or sums do not fit its (%lld, %lld) kernel", op,
                   (long long)g.kh, (long long)g.kw);
  }
  j.tap = tap;
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
  if (j.bad) return ds_fail(DS_EINVAL, "%s: the input holds NaN or an infinity (it cannot be quantized)", op);
  return DS_OK;
}

int ds_conv2d_int8_f32(ds_tensor *const *t, const double *attrs) { return conv_int8("conv2d_int8", t, attrs, 0, 0); }
int ds_conv2d_int8_static_f32(ds_tensor *const *t, const double *attrs) {
  return conv_int8("conv2d_int8_static", t, attrs, 1, 0);
}
/* the same reading the weight packed by ds_pack_int8_conv_weight_i8 (attrs: the six above, then kh, kw) */
int ds_conv2d_int8_packed_f32(ds_tensor *const *t, const double *attrs) {
  return conv_int8("conv2d_int8_packed", t, attrs, 0, 1);
}
int ds_conv2d_int8_static_packed_f32(ds_tensor *const *t, const double *attrs) {
  return conv_int8("conv2d_int8_static_packed", t, attrs, 1, 1);
}
