/* nn_conv.c: conv2d (NCHW, stride/padding/dilation/groups) as im2col + GEMM over chunks of images, and its
   backward kernels: input (GEMM + col2im), weight (im2col + GEMM, chunks added in order) and bias. */
#include "internal.h"
#include <stdlib.h>
#include <omp.h>

/* attrs of every conv kernel start with: sh, sw, ph, pw, dh, dw, groups */
typedef struct {
  int64_t N, C, H, W, OC, Cg, OCg, KH, KW, OH, OW, sh, sw, ph, pw, dh, dw, G;
  int64_t ckk, ohw, hw; /* rows of the column matrix (Cg*KH*KW), output and input plane sizes */
  /* wide layout (stride 1): columns run over OH rows of the padded width Wp (the extra Wp - OW
     columns are computed and dropped), so each column row is one contiguous run of a padded copy
     of the image (xpad elements). Otherwise L = ohw and xpad = 0. */
  int64_t wide, Hp, Wp, L, xpad;
} geom;

static int attr_int(double v, int64_t lo, int64_t *out) {
  if (!(v >= (double)lo && v <= 1e9) || v != (double)(int64_t)v) return 0;
  *out = (int64_t)v;
  return 1;
}

/* Fill and check the geometry; C is the input's channel count, Cg = w's second dim. */
static int make_geom(geom *g, const double *a, const char *op, int64_t N, int64_t C, int64_t H, int64_t W,
                     int64_t OC, int64_t Cg, int64_t KH, int64_t KW) {
  DS_CHECK(attr_int(a[0], 1, &g->sh) && attr_int(a[1], 1, &g->sw), "%s: stride must be integers >= 1", op);
  DS_CHECK(attr_int(a[2], 0, &g->ph) && attr_int(a[3], 0, &g->pw), "%s: padding must be integers >= 0", op);
  DS_CHECK(attr_int(a[4], 1, &g->dh) && attr_int(a[5], 1, &g->dw), "%s: dilation must be integers >= 1", op);
  DS_CHECK(attr_int(a[6], 1, &g->G), "%s: groups must be an integer >= 1", op);
  DS_CHECK(KH >= 1 && KW >= 1, "%s: empty kernel (%lld,%lld)", op, (long long)KH, (long long)KW);
  DS_CHECK(C % g->G == 0 && OC % g->G == 0, "%s: groups %lld must divide in channels %lld and out channels %lld", op,
           (long long)g->G, (long long)C, (long long)OC);
  DS_CHECK(Cg * g->G == C, "%s: weight expects %lld input channels per group, input has %lld channels in %lld groups", op,
           (long long)Cg, (long long)C, (long long)g->G);
  int64_t ekh = (KH - 1) * g->dh + 1, ekw = (KW - 1) * g->dw + 1;
  DS_CHECK(ekh <= H + 2 * g->ph && ekw <= W + 2 * g->pw, "%s: kernel (%lld,%lld) (dilated) is larger than the padded input (%lld,%lld)",
           op, (long long)ekh, (long long)ekw, (long long)(H + 2 * g->ph), (long long)(W + 2 * g->pw));
  g->N = N; g->C = C; g->H = H; g->W = W; g->OC = OC; g->Cg = Cg; g->OCg = OC / g->G; g->KH = KH; g->KW = KW;
  g->OH = (H + 2 * g->ph - ekh) / g->sh + 1;
  g->OW = (W + 2 * g->pw - ekw) / g->sw + 1;
  g->ckk = Cg * KH * KW; g->ohw = g->OH * g->OW; g->hw = H * W;
  g->Hp = H + 2 * g->ph; g->Wp = W + 2 * g->pw;
  g->wide = g->sh == 1 && g->sw == 1 && 2 * g->Wp <= 3 * g->OW; /* at most 50% extra columns */
  g->L = g->wide ? g->OH * g->Wp : g->ohw;
  g->xpad = g->wide ? Cg * g->Hp * g->Wp + (KW - 1) * g->dw + 1 : 0;
  return DS_OK;
}

static int check_tensor(const ds_tensor *t, int dtype, int ndim, const char *op, const char *what) {
  DS_CHECK(t, "%s: missing %s", op, what);
  DS_CHECK(t->dtype == dtype, "%s: %s has the wrong dtype", op, what);
  DS_CHECK(t->ndim == ndim, "%s: %s must be %d-D, got %d-D", op, what, ndim, t->ndim);
  DS_CHECK(ds_is_contig(t), "%s: %s must be contiguous", op, what);
  return DS_OK;
}

static int check_shape4(const ds_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d, const char *op, const char *what) {
  char s[128];
  DS_CHECK(t->shape[0] == a && t->shape[1] == b && t->shape[2] == c && t->shape[3] == d,
           "%s: %s has shape %s, expected (%lld,%lld,%lld,%lld)", op, what, ds_shape_str(t, s), (long long)a, (long long)b,
           (long long)c, (long long)d);
  return DS_OK;
}

/* Parallelize over images when there are several and the work is well above a parallel region's cost. */
static int worth_parallel(const geom *g) {
  return g->N > 1 && (double)g->N * (double)g->OC * (double)g->ohw * (double)g->ckk > 5e5;
}

/* Output columns [lo, hi) whose input column ow*sw + off falls inside [0, W). */
static void valid_range(int64_t off, int64_t sw, int64_t W, int64_t OW, int64_t *lo, int64_t *hi) {
  int64_t l = off >= 0 ? 0 : (-off + sw - 1) / sw;
  int64_t h = W - off <= 0 ? 0 : (W - off + sw - 1) / sw;
  if (l > OW) l = OW;
  if (h > OW) h = OW;
  if (h < l) h = l;
  *lo = l; *hi = h;
}

/* One column buffer of `per` bytes per thread from the caching allocator (outside parallel regions). */
typedef struct { char *base; int64_t per, rounded; } workspace;
static int ws_take(workspace *w, int64_t per, int nthreads) {
  w->per = (per + 63) / 64 * 64; w->rounded = 0; w->base = NULL;
  if (per == 0) return 1;
  w->base = ds_mem_alloc(w->per * nthreads, &w->rounded);
  return w->base != NULL;
}
static void *ws_thread(const workspace *w) { return w->base ? w->base + w->per * omp_get_thread_num() : NULL; }
static void ws_give(workspace *w) { if (w->base) ds_mem_release(w->base, w->rounded); }

/* Images per chunk: the column buffer of a chunk stays near 128 KB. From the shapes only, so results
   do not depend on the thread count. */
static int64_t chunk_images(const geom *g, int64_t es) {
  int64_t per = g->ckk * g->L * es, nb = per > 0 ? (128 * 1024) / per : 64;
  if (nb < 1) nb = 1;
  if (nb > 64) nb = 64;
  return nb;
}

/* How every conv kernel walks the batch: nch chunks of nb images, each thread with one scratch buffer
   holding col (ckk, nb*L), then rows (OCg, nb*L), then a padded image (xpad). */
typedef struct { int64_t nb, nch, cl, rl; workspace ws; } chunking;
static void chunking_init(chunking *k, const geom *g, int64_t es) {
  k->nb = chunk_images(g, es);
  k->nch = g->N == 0 ? 0 : (g->N + k->nb - 1) / k->nb;
  k->cl = g->ckk * k->nb * g->L;
  k->rl = g->OCg * k->nb * g->L;
}
static int chunking_take(chunking *k, const geom *g, int64_t es, int nthreads) {
  return ws_take(&k->ws, (k->cl + k->rl + g->xpad) * es, nthreads);
}
/* first image of chunk c; *m = its image count */
static int64_t chunk_start(const chunking *k, const geom *g, int64_t c, int64_t *m) {
  int64_t n0 = c * k->nb;
  *m = n0 + k->nb <= g->N ? k->nb : g->N - n0;
  return n0;
}

/* short row copies: a plain loop, not a memcpy call per 10-element row */
#define NO_MEMCPY __attribute__((optimize("no-tree-loop-distribute-patterns")))

#define CONV_KERNELS(T, S, DT) \
/* Columns of one image (Cg planes at x) into col (ckk rows, row stride ld).                                                                   \
   wide: copy the planes into xpad (zero border), then each row is one contiguous run of L values. */                                          \
NO_MEMCPY static void cols_##S(const T *x, T *col, int64_t ld, const geom *g, T *xpad) {                                                       \
  if (g->wide) {                                                                                                                               \
    for (int64_t i = 0; i < g->xpad; i++) xpad[i] = 0;                                                                                         \
    for (int64_t c = 0; c < g->Cg; c++)                                                                                                        \
      for (int64_t h = 0; h < g->H; h++) {                                                                                                     \
        const T *s = x + c * g->hw + h * g->W;                                                                                                 \
        T *d = xpad + (c * g->Hp + h + g->ph) * g->Wp + g->pw;                                                                                 \
        for (int64_t w = 0; w < g->W; w++) d[w] = s[w];                                                                                        \
      }                                                                                                                                        \
    for (int64_t c = 0; c < g->Cg; c++)                                                                                                        \
      for (int64_t kh = 0; kh < g->KH; kh++)                                                                                                   \
        for (int64_t kw = 0; kw < g->KW; kw++) {                                                                                               \
          const T *s = xpad + (c * g->Hp + kh * g->dh) * g->Wp + kw * g->dw;                                                                   \
          T *d = col + ((c * g->KH + kh) * g->KW + kw) * ld;                                                                                   \
          memcpy(d, s, (size_t)g->L * sizeof(T));                                                                                              \
        }                                                                                                                                      \
    return;                                                                                                                                    \
  }                                                                                                                                            \
  for (int64_t c = 0; c < g->Cg; c++)                                                                                                          \
    for (int64_t kh = 0; kh < g->KH; kh++)                                                                                                     \
      for (int64_t kw = 0; kw < g->KW; kw++) {                                                                                                 \
        T *row = col + ((c * g->KH + kh) * g->KW + kw) * ld;                                                                                   \
        const T *xc = x + c * g->hw;                                                                                                           \
        int64_t off = kw * g->dw - g->pw, lo, hi;                                                                                              \
        valid_range(off, g->sw, g->W, g->OW, &lo, &hi);                                                                                        \
        for (int64_t oh = 0; oh < g->OH; oh++) {                                                                                               \
          int64_t ih = oh * g->sh - g->ph + kh * g->dh;                                                                                        \
          T *r = row + oh * g->OW;                                                                                                             \
          if (ih < 0 || ih >= g->H) { for (int64_t ow = 0; ow < g->OW; ow++) r[ow] = 0; continue; }                                            \
          const T *xr = xc + ih * g->W + off;                                                                                                  \
          for (int64_t ow = 0; ow < lo; ow++) r[ow] = 0;                                                                                       \
          for (int64_t ow = lo; ow < hi; ow++) r[ow] = xr[ow * g->sw];                                                                         \
          for (int64_t ow = hi; ow < g->OW; ow++) r[ow] = 0;                                                                                   \
        }                                                                                                                                      \
      }                                                                                                                                        \
}                                                                                                                                              \
/* Cg planes of one image at x = the sum of col's rows put back where cols_##S took them (x overwritten). */                                   \
NO_MEMCPY static void uncols_##S(const T *col, int64_t ld, T *x, const geom *g, T *xpad) {                                                     \
  if (g->wide) {                                                                                                                               \
    for (int64_t i = 0; i < g->xpad; i++) xpad[i] = 0;                                                                                         \
    for (int64_t c = 0; c < g->Cg; c++)                                                                                                        \
      for (int64_t kh = 0; kh < g->KH; kh++)                                                                                                   \
        for (int64_t kw = 0; kw < g->KW; kw++) {                                                                                               \
          const T *s = col + ((c * g->KH + kh) * g->KW + kw) * ld;                                                                             \
          T *d = xpad + (c * g->Hp + kh * g->dh) * g->Wp + kw * g->dw;                                                                         \
          for (int64_t i = 0; i < g->L; i++) d[i] += s[i];                                                                                     \
        }                                                                                                                                      \
    for (int64_t c = 0; c < g->Cg; c++)                                                                                                        \
      for (int64_t h = 0; h < g->H; h++) {                                                                                                     \
        const T *s = xpad + (c * g->Hp + h + g->ph) * g->Wp + g->pw;                                                                           \
        T *d = x + c * g->hw + h * g->W;                                                                                                       \
        for (int64_t w = 0; w < g->W; w++) d[w] = s[w];                                                                                        \
      }                                                                                                                                        \
    return;                                                                                                                                    \
  }                                                                                                                                            \
  for (int64_t i = 0; i < g->Cg * g->hw; i++) x[i] = 0;                                                                                        \
  for (int64_t c = 0; c < g->Cg; c++)                                                                                                          \
    for (int64_t kh = 0; kh < g->KH; kh++)                                                                                                     \
      for (int64_t kw = 0; kw < g->KW; kw++) {                                                                                                 \
        const T *row = col + ((c * g->KH + kh) * g->KW + kw) * ld;                                                                             \
        T *xc = x + c * g->hw;                                                                                                                 \
        int64_t off = kw * g->dw - g->pw, lo, hi;                                                                                              \
        valid_range(off, g->sw, g->W, g->OW, &lo, &hi);                                                                                        \
        for (int64_t oh = 0; oh < g->OH; oh++) {                                                                                               \
          int64_t ih = oh * g->sh - g->ph + kh * g->dh;                                                                                        \
          if (ih < 0 || ih >= g->H) continue;                                                                                                  \
          const T *r = row + oh * g->OW;                                                                                                       \
          T *xr = xc + ih * g->W + off;                                                                                                        \
          for (int64_t ow = lo; ow < hi; ow++) xr[ow * g->sw] += r[ow];                                                                        \
        }                                                                                                                                      \
      }                                                                                                                                        \
}                                                                                                                                              \
/* rows (OCg, nb*L) from nb images' (OCg, OH, OW) blocks at image stride OC*ohw (zeros in wide padding) */                                     \
NO_MEMCPY static void to_rows_##S(const T *src, T *dst, int64_t nb, const geom *g) {                                                           \
  int64_t rw = g->L / g->OH;                                                                                                                   \
  for (int64_t oc = 0; oc < g->OCg; oc++)                                                                                                      \
    for (int64_t j = 0; j < nb; j++)                                                                                                           \
      for (int64_t oh = 0; oh < g->OH; oh++) {                                                                                                 \
        const T *s = src + j * g->OC * g->ohw + oc * g->ohw + oh * g->OW;                                                                      \
        T *d = dst + (oc * nb + j) * g->L + oh * rw;                                                                                           \
        for (int64_t ow = 0; ow < g->OW; ow++) d[ow] = s[ow];                                                                                  \
        for (int64_t ow = g->OW; ow < rw; ow++) d[ow] = 0;                                                                                     \
      }                                                                                                                                        \
}                                                                                                                                              \
/* the reverse, adding bias[oc] */                                                                                                             \
NO_MEMCPY static void from_rows_##S(const T *src, T *dst, const T *bias, int64_t nb, const geom *g) {                                          \
  int64_t rw = g->L / g->OH;                                                                                                                   \
  for (int64_t oc = 0; oc < g->OCg; oc++)                                                                                                      \
    for (int64_t j = 0; j < nb; j++) {                                                                                                         \
      T b = bias[oc];                                                                                                                          \
      for (int64_t oh = 0; oh < g->OH; oh++) {                                                                                                 \
        const T *s = src + (oc * nb + j) * g->L + oh * rw;                                                                                     \
        T *d = dst + j * g->OC * g->ohw + oc * g->ohw + oh * g->OW;                                                                            \
        for (int64_t ow = 0; ow < g->OW; ow++) d[ow] = s[ow] + b;                                                                              \
      }                                                                                                                                        \
    }                                                                                                                                          \
}                                                                                                                                              \
/* sum of n values with 8 independent lanes (vectorizes without reassociation; fixed order) */                                                 \
static T lanesum_##S(const T *p, int64_t n) {                                                                                                  \
  T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                                                                         \
  int64_t i = 0;                                                                                                                               \
  for (; i + 8 <= n; i += 8)                                                                                                                   \
    for (int j = 0; j < 8; j++) acc[j] += p[i + j];                                                                                            \
  T s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));                                                     \
  for (; i < n; i++) s += p[i];                                                                                                                \
  return s;                                                                                                                                    \
}                                                                                                                                              \
/* out (N,OC,OH,OW) = conv(x (N,C,H,W), w (OC,C/G,KH,KW)) + b (OC).                                                                            \
   Per chunk of images and group: col (ckk, nb*L), rows (OCg, nb*L) = W_g @ col, written out + bias. */                                        \
int ds_conv2d_##S(ds_tensor *const *t, const double *attrs) {                                                                                  \
  const char *op = "conv2d";                                                                                                                   \
  ds_tensor *o = t[0], *x = t[1], *w = t[2], *b = t[3];                                                                                        \
  int rc;                                                                                                                                      \
  if ((rc = check_tensor(o, DT, 4, op, "output")) || (rc = check_tensor(x, DT, 4, op, "input")) ||                                             \
      (rc = check_tensor(w, DT, 4, op, "weight")) || (rc = check_tensor(b, DT, 1, op, "bias")))                                                \
    return rc;                                                                                                                                 \
  geom g;                                                                                                                                      \
  if ((rc = make_geom(&g, attrs, op, x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[0], w->shape[1],                             \
                      w->shape[2], w->shape[3])))                                                                                              \
    return rc;                                                                                                                                 \
  DS_CHECK(b->shape[0] == g.OC, "%s: bias has %lld values for %lld out channels", op, (long long)b->shape[0], (long long)g.OC);                \
  if ((rc = check_shape4(o, g.N, g.OC, g.OH, g.OW, op, "output"))) return rc;                                                                  \
  const T *xp = x->data, *wp = w->data, *bp = b->data;                                                                                         \
  T *yp = o->data;                                                                                                                             \
  chunking k;                                                                                                                                  \
  chunking_init(&k, &g, sizeof(T));                                                                                                            \
  int par = worth_parallel(&g) && k.nch > 1, nt = par ? omp_get_max_threads() : 1;                                                             \
  if (!chunking_take(&k, &g, sizeof(T), nt))                                                                                                   \
    return ds_fail(DS_ENOMEM, "%s: out of memory for the column buffer", op);                                                                  \
  int failed = 0; /* a product ran out of memory for its packing buffers */                                                                    \
  _Pragma("omp parallel num_threads(nt) if (par)") {                                                                                           \
    T *col = ws_thread(&k.ws), *rows = col + k.cl, *xpad = rows + k.rl;                                                                        \
    _Pragma("omp for schedule(static)") for (int64_t c = 0; c < k.nch; c++) {                                                                  \
      int64_t m, n0 = chunk_start(&k, &g, c, &m), ld = m * g.L;                                                                                \
      for (int64_t gi = 0; gi < g.G; gi++) {                                                                                                   \
        for (int64_t j = 0; j < m; j++) cols_##S(xp + ((n0 + j) * g.C + gi * g.Cg) * g.hw, col + j * g.L, ld, &g, xpad);                       \
        if (ds_gemm_##S(0, 0, g.OCg, ld, g.ckk, 1, wp + gi * g.OCg * g.ckk, g.ckk, col, ld, 0, rows, ld)) { _Pragma("omp atomic write") failed = 1; }\
        from_rows_##S(rows, yp + (n0 * g.OC + gi * g.OCg) * g.ohw, bp + gi * g.OCg, m, &g);                                                    \
      }                                                                                                                                        \
    }                                                                                                                                          \
  }                                                                                                                                            \
  ws_give(&k.ws);                                                                                                                              \
  return failed ? ds_fail(DS_ENOMEM, "%s: out of memory for the GEMM packing buffers", op) : DS_OK;                                            \
}                                                                                                                                              \
/* gx (N,C,H,W) from g (N,OC,OH,OW) and w; attrs: conv attrs, H, W.                                                                            \
   Per chunk and group: dY rows (OCg, nb*L), dcol = W_g^T @ dY rows, put back image by image. */                                               \
int ds_conv2d_backward_input_##S(ds_tensor *const *t, const double *attrs) {                                                                   \
  const char *op = "conv2d_backward_input";                                                                                                    \
  ds_tensor *gx = t[0], *gy = t[1], *w = t[2];                                                                                                 \
  int rc;                                                                                                                                      \
  if ((rc = check_tensor(gx, DT, 4, op, "grad input")) || (rc = check_tensor(gy, DT, 4, op, "grad output")) ||                                 \
      (rc = check_tensor(w, DT, 4, op, "weight")))                                                                                             \
    return rc;                                                                                                                                 \
  int64_t H, W, G;                                                                                                                             \
  DS_CHECK(attr_int(attrs[7], 1, &H) && attr_int(attrs[8], 1, &W) && attr_int(attrs[6], 1, &G), "%s: bad input size attrs", op);               \
  geom g;                                                                                                                                      \
  if ((rc = make_geom(&g, attrs, op, gy->shape[0], w->shape[1] * G, H, W, w->shape[0], w->shape[1], w->shape[2], w->shape[3])))                \
    return rc;                                                                                                                                 \
  if ((rc = check_shape4(gy, g.N, g.OC, g.OH, g.OW, op, "grad output")) || (rc = check_shape4(gx, g.N, g.C, g.H, g.W, op, "grad input")))      \
    return rc;                                                                                                                                 \
  const T *gp = gy->data, *wp = w->data;                                                                                                       \
  T *xp = gx->data;                                                                                                                            \
  chunking k;                                                                                                                                  \
  chunking_init(&k, &g, sizeof(T));                                                                                                            \
  int par = worth_parallel(&g) && k.nch > 1, nt = par ? omp_get_max_threads() : 1;                                                             \
  if (!chunking_take(&k, &g, sizeof(T), nt))                                                                                                   \
    return ds_fail(DS_ENOMEM, "%s: out of memory for the column buffer", op);                                                                  \
  int failed = 0; /* a product ran out of memory for its packing buffers */                                                                    \
  _Pragma("omp parallel num_threads(nt) if (par)") {                                                                                           \
    T *col = ws_thread(&k.ws), *rows = col + k.cl, *xpad = rows + k.rl;                                                                        \
    _Pragma("omp for schedule(static)") for (int64_t c = 0; c < k.nch; c++) {                                                                  \
      int64_t m, n0 = chunk_start(&k, &g, c, &m), ld = m * g.L;                                                                                \
      for (int64_t gi = 0; gi < g.G; gi++) {                                                                                                   \
        to_rows_##S(gp + (n0 * g.OC + gi * g.OCg) * g.ohw, rows, m, &g);                                                                       \
        if (ds_gemm_##S(1, 0, g.ckk, ld, g.OCg, 1, wp + gi * g.OCg * g.ckk, g.ckk, rows, ld, 0, col, ld)) { _Pragma("omp atomic write") failed = 1; }\
        for (int64_t j = 0; j < m; j++) uncols_##S(col + j * g.L, ld, xp + ((n0 + j) * g.C + gi * g.Cg) * g.hw, &g, xpad);                     \
      }                                                                                                                                        \
    }                                                                                                                                          \
  }                                                                                                                                            \
  ws_give(&k.ws);                                                                                                                              \
  return failed ? ds_fail(DS_ENOMEM, "%s: out of memory for the GEMM packing buffers", op) : DS_OK;                                            \
}                                                                                                                                              \
/* gw (OC,C/G,KH,KW) from g (N,OC,OH,OW) and x (N,C,H,W); attrs: conv attrs, KH, KW.                                                           \
   Per chunk and group: col @ dY rows^T (OCg, nb*L), summed over fixed runs of chunks, runs added in order. */                                 \
int ds_conv2d_backward_weight_##S(ds_tensor *const *t, const double *attrs) {                                                                  \
  const char *op = "conv2d_backward_weight";                                                                                                   \
  ds_tensor *gw = t[0], *gy = t[1], *x = t[2];                                                                                                 \
  int rc;                                                                                                                                      \
  if ((rc = check_tensor(gw, DT, 4, op, "grad weight")) || (rc = check_tensor(gy, DT, 4, op, "grad output")) ||                                \
      (rc = check_tensor(x, DT, 4, op, "input")))                                                                                              \
    return rc;                                                                                                                                 \
  int64_t KH, KW, G;                                                                                                                           \
  DS_CHECK(attr_int(attrs[7], 1, &KH) && attr_int(attrs[8], 1, &KW) && attr_int(attrs[6], 1, &G), "%s: bad kernel size attrs", op);            \
  DS_CHECK(x->shape[1] % G == 0, "%s: groups %lld do not divide %lld input channels", op, (long long)G, (long long)x->shape[1]);               \
  geom g;                                                                                                                                      \
  if ((rc = make_geom(&g, attrs, op, x->shape[0], x->shape[1], x->shape[2], x->shape[3], gy->shape[1], x->shape[1] / G, KH, KW)))              \
    return rc;                                                                                                                                 \
  if ((rc = check_shape4(gy, g.N, g.OC, g.OH, g.OW, op, "grad output")) || (rc = check_shape4(gw, g.OC, g.Cg, g.KH, g.KW, op, "grad weight"))) \
    return rc;                                                                                                                                 \
  const T *gp = gy->data, *xp = x->data;                                                                                                       \
  T *wp = gw->data;                                                                                                                            \
  int64_t wsz = g.OC * g.ckk;                                                                                                                  \
  chunking k;                                                                                                                                  \
  chunking_init(&k, &g, sizeof(T));                                                                                                            \
  /* P partial sums, each over a fixed run of chunks in order (no thread hand-offs), then added in order */                                    \
  int64_t P = k.nch < 16 ? k.nch : 16, prounded = 0;                                                                                           \
  int par = worth_parallel(&g) && P > 1, nt = par ? omp_get_max_threads() : 1;                                                                 \
  T *part = P > 0 ? ds_mem_alloc(P * wsz * (int64_t)sizeof(T), &prounded) : NULL;                                                              \
  if ((P > 0 && !part) || !chunking_take(&k, &g, sizeof(T), nt)) {                                                                             \
    if (part) ds_mem_release(part, prounded);                                                                                                  \
    return ds_fail(DS_ENOMEM, "%s: out of memory for the column buffer", op);                                                                  \
  }                                                                                                                                            \
  int failed = 0; /* a product ran out of memory for its packing buffers */                                                                    \
  _Pragma("omp parallel num_threads(nt) if (par)") {                                                                                           \
    T *col = ws_thread(&k.ws), *rows = col + k.cl, *xpad = rows + k.rl;                                                                        \
    _Pragma("omp for schedule(static)") for (int64_t s = 0; s < P; s++) {                                                                      \
      T *acc = part + s * wsz; /* G blocks of gw_g^T (ckk, OCg) */                                                                             \
      for (int64_t c = s * k.nch / P; c < (s + 1) * k.nch / P; c++) {                                                                          \
        int64_t m, n0 = chunk_start(&k, &g, c, &m), ld = m * g.L;                                                                              \
        for (int64_t gi = 0; gi < g.G; gi++) {                                                                                                 \
          for (int64_t j = 0; j < m; j++) cols_##S(xp + ((n0 + j) * g.C + gi * g.Cg) * g.hw, col + j * g.L, ld, &g, xpad);                     \
          to_rows_##S(gp + (n0 * g.OC + gi * g.OCg) * g.ohw, rows, m, &g);                                                                     \
          /* col @ rows^T (the chunk's images are the chain; later chunks of the run continue it) */                                                     \
          if (ds_gemm_##S(0, 1, g.ckk, g.OCg, ld, 1, col, ld, rows, ld, c == s * k.nch / P ? 0 : 1, acc + gi * g.OCg * g.ckk, g.OCg)) { _Pragma("omp atomic write") failed = 1; }\
        }                                                                                                                                      \
      }                                                                                                                                        \
    }                                                                                                                                          \
  }                                                                                                                                            \
  for (int64_t gi = 0; gi < g.G; gi++)                                                                                                         \
    for (int64_t oc = 0; oc < g.OCg; oc++)                                                                                                     \
      for (int64_t r = 0; r < g.ckk; r++) {                                                                                                    \
        T v = 0;                                                                                                                               \
        for (int64_t s = 0; s < P; s++) v += part[s * wsz + (gi * g.ckk + r) * g.OCg + oc];                                                    \
        wp[(gi * g.OCg + oc) * g.ckk + r] = v;                                                                                                 \
      }                                                                                                                                        \
  if (part) ds_mem_release(part, prounded);                                                                                                    \
  ws_give(&k.ws);                                                                                                                              \
  return failed ? ds_fail(DS_ENOMEM, "%s: out of memory for the GEMM packing buffers", op) : DS_OK;                                            \
}                                                                                                                                              \
/* gb (OC) = g (N,OC,OH,OW) summed over N, OH, OW: per-plane sums, then images in order */                                                     \
int ds_conv2d_backward_bias_##S(ds_tensor *const *t, const double *attrs) {                                                                    \
  const char *op = "conv2d_backward_bias";                                                                                                     \
  ds_tensor *gb = t[0], *gy = t[1];                                                                                                            \
  int rc;                                                                                                                                      \
  if ((rc = check_tensor(gb, DT, 1, op, "grad bias")) || (rc = check_tensor(gy, DT, 4, op, "grad output"))) return rc;                         \
  int64_t N = gy->shape[0], OC = gy->shape[1], hw = gy->shape[2] * gy->shape[3];                                                               \
  DS_CHECK(gb->shape[0] == OC, "%s: grad bias has %lld values for %lld channels", op, (long long)gb->shape[0], (long long)OC);                 \
  const T *gp = gy->data;                                                                                                                      \
  T *bp = gb->data;                                                                                                                            \
  int64_t rounded;                                                                                                                             \
  T *plane = ds_mem_alloc((N * OC + 1) * (int64_t)sizeof(T), &rounded);                                                                        \
  if (!plane) return ds_fail(DS_ENOMEM, "%s: out of memory", op);                                                                              \
  _Pragma("omp parallel for schedule(static) if (gy->numel > DS_PAR_MIN)")                                                                     \
  for (int64_t i = 0; i < N * OC; i++) plane[i] = lanesum_##S(gp + i * hw, hw);                                                                \
  for (int64_t oc = 0; oc < OC; oc++) {                                                                                                        \
    T s = 0;                                                                                                                                   \
    for (int64_t n = 0; n < N; n++) s += plane[n * OC + oc];                                                                                   \
    bp[oc] = s;                                                                                                                                \
  }                                                                                                                                            \
  ds_mem_release(plane, rounded);                                                                                                              \
  return DS_OK;                                                                                                                                \
}

CONV_KERNELS(float, f32, DS_F32)
CONV_KERNELS(double, f64, DS_F64)
