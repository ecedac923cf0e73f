/* nn_conv.c: conv2d (NCHW, stride/padding/dilation/groups) as im2col + GEMM over chunks of images, and its
   backward kernels: input (GEMM + col2im), weight (im2col + GEMM, chunks added in order) and bias. f32
   convolutions (the forward pass at any stride, the gradients at stride 1) go to the direct path
   (nn_conv_direct.c) when it takes their geometry. */
#include "internal.h"
#include "nn_conv.h"
#include <stdlib.h>
#include <omp.h>

/* attrs of every conv kernel start with: sh, sw, ph, pw, dh, dw, groups */
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
  DS_CHECK(Cg * g->G == C,
           "%s: weight expects %lld input channels per group, input has %lld channels in %lld groups", op,
           (long long)Cg, (long long)C, (long long)g->G);
  int64_t ekh = (KH - 1) * g->dh + 1, ekw = (KW - 1) * g->dw + 1;
  DS_CHECK(ekh <= H + 2 * g->ph && ekw <= W + 2 * g->pw,
           "%s: kernel (%lld,%lld) (dilated) is larger than the padded input (%lld,%lld)",
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
  DS_CHECK(ds_tensor_is_contiguous(t), "%s: %s must be contiguous", op, what);
  return DS_OK;
}

static int check_shape4(const ds_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d, const char *op,
                        const char *what) {
  char s[128];
  DS_CHECK(t->shape[0] == a && t->shape[1] == b && t->shape[2] == c && t->shape[3] == d,
           "%s: %s has shape %s, expected (%lld,%lld,%lld,%lld)", op, what, ds_shape_str(t, s), (long long)a,
           (long long)b, (long long)c, (long long)d);
  return DS_OK;
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

/* the direct path, f32 only: DIRECT(conv_direct_forward)(...) calls it for float and declines for double */
static int not_direct(const geom *g, ...) { return CONV_NOT_DIRECT; }
#define DIRECT(f32_fn) _Generic((T)0, float: f32_fn, default: not_direct)

/* the kernels, once per float dtype */
#define KERNELS "nn_conv_kernels.h"
#include "float_kernels.h"

int ds_conv2d_pool_lanes_f32(ds_tensor *const *t, const double *attrs, int act, const conv_pool *pool) {
  const char *op = "conv2d_pool";
  ds_tensor *o = t[0], *x = t[1], *w = t[2], *b = t[3];
  int rc;
  if ((rc = check_tensor(o, DS_F32, 4, op, "output")) || (rc = check_tensor(x, DS_F32, 4, op, "input")) ||
      (rc = check_tensor(w, DS_F32, 4, op, "weight")) || (b && (rc = check_tensor(b, DS_F32, 1, op, "bias"))))
    return rc;
  geom g;
  if ((rc = make_geom(&g, attrs, op, x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[0], w->shape[1],
                      w->shape[2], w->shape[3])))
    return rc;
  DS_CHECK(!b || b->shape[0] == g.OC,
           "%s: bias has %lld values for %lld out channels", op, (long long)b->shape[0], (long long)g.OC);
  DS_CHECK(act == CONV_ACT_NONE || act == CONV_ACT_RELU || act == CONV_ACT_HARDSWISH, "%s: unknown activation %d",
           op, act);
  DS_CHECK(pool && (pool->kind == CONV_POOL_MAX || pool->kind == CONV_POOL_AVG), "%s: unknown pooling", op);
  DS_CHECK(pool->kh >= 1 && pool->kw >= 1 && pool->sh >= 1 && pool->sw >= 1 && pool->ph >= 0 && pool->pw >= 0 &&
           2 * pool->ph <= pool->kh && 2 * pool->pw <= pool->kw,
           "%s: pooling window (%lld,%lld) stride (%lld,%lld) padding (%lld,%lld): expected sizes and strides >= 1, "
           "padding at most half the window", op, (long long)pool->kh, (long long)pool->kw, (long long)pool->sh,
           (long long)pool->sw, (long long)pool->ph, (long long)pool->pw);
  DS_CHECK(pool->kh <= g.OH + 2 * pool->ph && pool->kw <= g.OW + 2 * pool->pw,
           "%s: pooling window (%lld,%lld) is larger than the padded conv output (%lld,%lld)", op,
           (long long)pool->kh, (long long)pool->kw, (long long)(g.OH + 2 * pool->ph), (long long)(g.OW + 2 * pool->pw));
  if ((rc = check_shape4(o, g.N, g.OC, (g.OH + 2 * pool->ph - pool->kh) / pool->sh + 1,
                         (g.OW + 2 * pool->pw - pool->kw) / pool->sw + 1, op, "output")))
    return rc;
  return conv_lanes_forward(&g, x->data, w->data, b ? b->data : NULL, o->data, act, pool, NULL);
}
