/* reduce.c: reductions (sum, mean, prod, var, std, amax/amin, max/min with indices, argmax/argmin,
   logsumexp, all/any), softmax, log_softmax and cumsum; results do not depend on the thread count. */
#include "internal.h"
#include "mathfn.h"
#include <stdlib.h>
#include <omp.h>


/* ==== the reduction plan ========================================================================
   x's dims split into kept dims (one output element each, row-major = the output's order) and
   reduced dims, each group coalesced. Every output folds its R reduced elements in flat row-major
   order, in fixed blocks of DS_CHUNK: inside a block elements fold in a fixed order (16 lanes
   over a contiguous run), block partials then merge in block order. Threads take whole
   (output, block) items, so the bits never depend on how many threads ran. */
typedef struct {
  int64_t nout, R;
  int nk, nr;
  int64_t ksh[DS_MAXDIM], kst[DS_MAXDIM]; /* kept dims: sizes, strides in x (elements) */
  int64_t rsh[DS_MAXDIM], rst[DS_MAXDIM]; /* reduced dims */
} rplan;

static void plan_push(int *n, int64_t *sh, int64_t *st, int64_t size, int64_t stride) {
  if (*n > 0 && st[*n - 1] == stride * size) { sh[*n - 1] *= size; st[*n - 1] = stride; return; }
  sh[*n] = size; st[*n] = stride; (*n)++;
}

static void make_plan(const ds_tensor *x, const int *mask, rplan *p) {
  p->nk = p->nr = 0; p->nout = 1; p->R = 1;
  for (int d = 0; d < x->ndim; d++) {
    int64_t s = x->shape[d];
    if (mask[d]) p->R *= s; else p->nout *= s;
    if (s == 1) continue;
    if (mask[d]) plan_push(&p->nr, p->rsh, p->rst, s, x->strides[d]);
    else plan_push(&p->nk, p->ksh, p->kst, s, x->strides[d]);
  }
  if (p->nk == 0) { p->nk = 1; p->ksh[0] = 1; p->kst[0] = 0; }
  if (p->nr == 0) { p->nr = 1; p->rsh[0] = 1; p->rst[0] = 0; }
}

/* offset in x (elements) of the first element of output o, over kept dims [0, nk) */
static int64_t kept_offset(const rplan *p, int nk, int64_t o) {
  int64_t off = 0;
  for (int i = nk - 1; i >= 0; i--) { off += (o % p->ksh[i]) * p->kst[i]; o /= p->ksh[i]; }
  return off;
}

/* ==== fold descriptors: how one op folds elements into its accumulator ======================== */
/* run: fold n elements x[0], x[s], ... (flat reduced index of the first: r) into *acc;
   cols: fold x[0..w) into acc[0..w) (w outputs side by side); c: per-output constant(s) or NULL;
   merge: acc = acc (+) part. Accumulators are at most 16 bytes. */
typedef void (*run_fn)(const char *x, int64_t n, int64_t s, int64_t r, const void *c, void *acc);
typedef void (*cols_fn)(const char *x, int64_t w, int64_t r, const void *c, void *acc);
typedef void (*merge_fn)(void *acc, const void *part);
/* runs: m outputs of n contiguous elements each, output j's at x + j * os (in elements): run's fold of each
   (acc[j] from init), several side by side (GlobalAveragePool's small planes: no per-plane call) */
typedef void (*runs_fn)(const char *x, int64_t m, int64_t os, int64_t n, const void *c, void *acc);
/* par_min: the element count from which a fold is worth a parallel region (~11 us); runs may be NULL */
typedef struct {
  int64_t esize, asize;
  run_fn run;
  cols_fn cols;
  merge_fn merge;
  const void *init;
  int64_t par_min;
  runs_fn runs;
} rdesc;
/* a vectorized add/max fold runs ~0.1 ns per element: only large ones go parallel */
#define CHEAP_PAR_MIN (8 * DS_PAR_MIN)

/* the lanes of a fold (reduce_fold.h) and of softmax's max */
#define LANES 16

/* ==== the driver ================================================================================ */
#define TILE 256 /* outputs folded side by side by cols */

static void fold_range(const rdesc *d, const rplan *p, const char *x0, int64_t r0, int64_t r1,
    const void *c, void *acc) {
  int nr = p->nr; int64_t idx[DS_MAXDIM], rem = r0;
  for (int i = nr - 1; i >= 0; i--) { idx[i] = rem % p->rsh[i]; rem /= p->rsh[i]; }
  for (int64_t r = r0; r < r1;) {
    int64_t off = 0;
    for (int i = 0; i < nr; i++) off += idx[i] * p->rst[i];
    int64_t n = p->rsh[nr - 1] - idx[nr - 1];
    if (n > r1 - r) n = r1 - r;
    d->run(x0 + off * d->esize, n, p->rst[nr - 1], r, c, acc);
    r += n; idx[nr - 1] += n;
    for (int i = nr - 1; i > 0 && idx[i] >= p->rsh[i]; i--) { idx[i] = 0; idx[i - 1]++; }
  }
}

static void cols_range(const rdesc *d, const rplan *p, const char *x0, int64_t w, int64_t r0, int64_t r1,
    const void *c, void *acc) {
  int nr = p->nr; int64_t idx[DS_MAXDIM], rem = r0, off = 0;
  for (int i = nr - 1; i >= 0; i--) { idx[i] = rem % p->rsh[i]; rem /= p->rsh[i]; off += idx[i] * p->rst[i]; }
  for (int64_t r = r0; r < r1; r++) {
    d->cols(x0 + off * d->esize, w, r, c, acc);
    idx[nr - 1]++; off += p->rst[nr - 1];
    if (idx[nr - 1] >= p->rsh[nr - 1]) {
      for (int i = nr - 1; i > 0 && idx[i] >= p->rsh[i]; i--) { idx[i] = 0; idx[i - 1]++; }
      off = 0;
      for (int i = 0; i < nr; i++) off += idx[i] * p->rst[i];
    }
  }
}

typedef struct {
  const rdesc *d; const rplan *p; const char *x; const void *cbuf; char *part;
  int64_t nb, w, ntile; int cols;
} exec_ctx;

/* one work item: block b of output o, or of a tile of up to TILE side-by-side outputs */
static void exec_item(const exec_ctx *e, int64_t it) {
  const rdesc *d = e->d; const rplan *p = e->p;
  int64_t nb = e->nb, as = d->asize, R = p->R;
  int64_t b = it % nb, r0 = b * DS_CHUNK, r1 = r0 + DS_CHUNK < R ? r0 + DS_CHUNK : R;
  const char *cbuf = e->cbuf;
  if (!e->cols) {
    int64_t o = it / nb;
    char *a = e->part + (o * nb + b) * as;
    memcpy(a, d->init, as);
    fold_range(d, p, e->x + kept_offset(p, p->nk, o) * d->esize, r0, r1, cbuf ? cbuf + o * as : NULL, a);
    return;
  }
  int64_t w = e->w, t = (it / nb) % e->ntile, q = it / (nb * e->ntile), j0 = t * TILE;
  int64_t tw = w - j0 < TILE ? w - j0 : TILE, o0 = q * w + j0;
  int64_t tile[TILE * 2]; /* 16 bytes per accumulator at most, 8-byte aligned */
  char *tp = (char *)tile;
  for (int64_t j = 0; j < tw; j++) memcpy(tp + j * as, d->init, as);
  const char *x0 = e->x + (kept_offset(p, p->nk - 1, q) + j0) * d->esize;
  cols_range(d, p, x0, tw, r0, r1, cbuf ? cbuf + o0 * as : NULL, tp);
  for (int64_t j = 0; j < tw; j++) memcpy(e->part + ((o0 + j) * nb + b) * as, tp + j * as, as);
}

/* outputs [o0, o1) whole (one block each): the kept-dims odometer avoids a division per output */
static void exec_outputs(const exec_ctx *e, int64_t o0, int64_t o1) {
  const rdesc *d = e->d; const rplan *p = e->p;
  int64_t as = d->asize, idx[DS_MAXDIM], off = 0, rem = o0;
  if (d->runs && p->nk == 1 && p->nr == 1 && p->rst[0] == 1) { /* contiguous runs at a fixed stride (planes) */
    d->runs(e->x + o0 * p->kst[0] * d->esize, o1 - o0, p->kst[0], p->R,
            e->cbuf ? (const char *)e->cbuf + o0 * as : NULL, e->part + o0 * as);
    return;
  }
  for (int i = p->nk - 1; i >= 0; i--) { idx[i] = rem % p->ksh[i]; rem /= p->ksh[i]; off += idx[i] * p->kst[i]; }
  for (int64_t o = o0; o < o1; o++) {
    char *a = e->part + o * as;
    const char *xo = e->x + off * d->esize, *c = e->cbuf ? (const char *)e->cbuf + o * as : NULL;
    memcpy(a, d->init, as);
    if (p->nr == 1) d->run(xo, p->R, p->rst[0], 0, c, a);
    else fold_range(d, p, xo, 0, p->R, c, a);
    for (int i = p->nk - 1; i >= 0; i--) {
      off += p->kst[i];
      if (++idx[i] < p->ksh[i]) break;
      off -= idx[i] * p->kst[i]; idx[i] = 0;
    }
  }
}

/* acc[o] (nout accumulators of d->asize bytes) = fold of output o's reduced elements;
   cbuf: nout per-output constants (same size as an accumulator) or NULL */
static int reduce_exec(const rdesc *d, const rplan *p, const ds_tensor *x, const void *cbuf, char *acc) {
  int64_t nout = p->nout, R = p->R, as = d->asize;
  if (nout == 0) return DS_OK;
  if (R == 0) { for (int64_t o = 0; o < nout; o++) memcpy(acc + o * as, d->init, as); return DS_OK; }
  int64_t nb = R > DS_CHUNK ? (R + DS_CHUNK - 1) / DS_CHUNK : 1;
  int64_t w = p->ksh[p->nk - 1];
  int cols = p->kst[p->nk - 1] == 1 && w >= 8 && !(p->nr == 1 && p->rst[0] == 1);
  int64_t ntile = cols ? (w + TILE - 1) / TILE : 1;
  int64_t nitems = cols ? (nout / w) * ntile * nb : nout * nb;
  char *part = acc;
  if (nb > 1) {
    part = malloc((size_t)(nout * nb * as));
    if (!part) return ds_fail(DS_ENOMEM, "reduce: cannot allocate %lld partial sums", (long long)(nout * nb));
  }
  exec_ctx e = {d, p, x->data, cbuf, part, nb, w, ntile, cols};
  int par = nout * R >= d->par_min && nitems > 1 && ds_team() > 1;
  if (!cols && nb == 1) {
    if (par) {
      double t0 = ds_team_start();
      #pragma omp parallel
      {
        ds_team_arrive(t0);
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        exec_outputs(&e, nout * id / nt, nout * (id + 1) / nt);
      }
      ds_team_done();
    } else {
      exec_outputs(&e, 0, nout);
    }
  } else if (par) {
    DS_PAR_FOR(1, it, nitems, exec_item(&e, it););
  } else {
    for (int64_t it = 0; it < nitems; it++) exec_item(&e, it);
  }
  if (nb > 1) {
    for (int64_t o = 0; o < nout; o++) {
      char *a = acc + o * as;
      memcpy(a, d->init, as);
      for (int64_t b = 0; b < nb; b++) d->merge(a, part + (o * nb + b) * as);
    }
    free(part);
  }
  return DS_OK;
}

/* ==== checking a kernel call ====================================================================
   attrs = {ndims, dims... (0-based), keepdim, extra...}; t = outputs then x. */
typedef struct { int mask[DS_MAXDIM]; int keepdim; const double *extra; rplan plan; } rcall;

static int check_call(const char *op, ds_tensor *const *t, int nouts, int in_dt, const int *out_dt,
    const double *attrs, rcall *rc) {
  const ds_tensor *x = t[nouts];
  if (!x || x->dtype != in_dt)
    return ds_fail(DS_EINVAL, "%s: input has dtype %s, kernel expects %s", op, x ? ds_dtype_name(x->dtype) : "none",
        ds_dtype_name(in_dt));
  char b1[128], b2[128];
  double nd = attrs[0];
  if (nd != floor(nd) || nd < 0 || nd > x->ndim)
    return ds_fail(DS_EINVAL, "%s: bad dim count %g for input %s", op, nd, ds_shape_str(x, b1));
  memset(rc->mask, 0, sizeof rc->mask);
  for (int i = 0; i < (int)nd; i++) {
    double d = attrs[1 + i];
    if (d != floor(d) || d < 0 || d >= x->ndim || rc->mask[(int)d])
      return ds_fail(DS_EINVAL, "%s: bad or repeated dim %g for input %s", op, d + 1, ds_shape_str(x, b1));
    rc->mask[(int)d] = 1;
  }
  rc->keepdim = attrs[1 + (int)nd] != 0;
  rc->extra = attrs + 2 + (int)nd;
  int64_t want[DS_MAXDIM]; int wn = 0;
  for (int d = 0; d < x->ndim; d++) {
    if (!rc->mask[d]) want[wn++] = x->shape[d];
    else if (rc->keepdim) want[wn++] = 1;
  }
  for (int k = 0; k < nouts; k++) {
    const ds_tensor *o = t[k];
    if (!o || o->dtype != out_dt[k] || !ds_tensor_is_contiguous(o))
      return ds_fail(DS_EINVAL, "%s: output %d must be a contiguous %s tensor", op, k + 1, ds_dtype_name(out_dt[k]));
    int ok = o->ndim == wn;
    for (int d = 0; ok && d < wn; d++) ok = o->shape[d] == want[d];
    if (!ok) return ds_fail(DS_EINVAL, "%s: output shape %s does not match input %s reduced", op, ds_shape_str(o, b1),
        ds_shape_str(x, b2));
  }
  make_plan(x, rc->mask, &rc->plan);
  return DS_OK;
}

/* run one fold into a temporary accumulator array; the caller frees *acc */
static int fold_all(const rdesc *d, const rcall *rc, const ds_tensor *x, const void *cbuf, char **acc) {
  *acc = malloc((size_t)((rc->plan.nout ? rc->plan.nout : 1) * d->asize));
  if (!*acc) return ds_fail(DS_ENOMEM, "reduce: out of memory");
  int r = reduce_exec(d, &rc->plan, x, cbuf, *acc);
  if (r != DS_OK) { free(*acc); *acc = NULL; }
  return r;
}

/* ==== the operations folds combine with (reduce_fold.h's MAP and COMB) ====================== */
#define ADD(a, b) ((a) + (b))
#define MUL(a, b) ((a) * (b))
#define AND(a, b) ((a) & (b))
#define OR(a, b) ((a) | (b))
#define MAXN(a, b) ((((b) > (a)) | ((b) != (b))) ? (b) : (a))
#define MINN(a, b) ((((b) < (a)) | ((b) != (b))) ? (b) : (a))
#define TO_U64(x, c) ((uint64_t)(int64_t)(x))
#define SAME(x, c) (x)
#define NONZERO(x, c) ((uint8_t)((x) != 0))
#define BETTER_MAX(v, a) ((v) > (a) || ((v) != (v) && (a) == (a)))
#define BETTER_MIN(v, a) ((v) < (a) || ((v) != (v) && (a) == (a)))

/* ==== line ops: softmax, log_softmax, cumsum along one dim ======================================
   A line is the dim's elements for one index of the other dims; lines are split across threads
   whole. y is contiguous with x's shape. attrs[0] = dim (0-based). */
typedef void (*line_fn)(const char *x, int64_t xs, char *y, int64_t ys, int64_t n, const double *attrs, char *scratch);

typedef struct {
  const ds_tensor *x; ds_tensor *y; line_fn fn; const double *attrs;
  int dim; int64_t n, xs, ys, es_x, es_y, scratch_bytes;
} lines_ctx;

/* lines [l0, l1); returns 1 when scratch memory was not available */
static int run_lines(const lines_ctx *c, int64_t l0, int64_t l1) {
  const ds_tensor *x = c->x, *y = c->y;
  char *scratch = c->scratch_bytes ? malloc((size_t)c->scratch_bytes) : NULL;
  if (c->scratch_bytes && !scratch) return 1;
  /* odometer over the other dims (idx[c->dim] stays 0), started at line l0 */
  int64_t idx[DS_MAXDIM] = {0}, rem = l0, xo = 0, yo = 0;
  for (int d = x->ndim - 1; d >= 0; d--) {
    if (d == c->dim) continue;
    idx[d] = rem % x->shape[d]; rem /= x->shape[d];
    xo += idx[d] * x->strides[d]; yo += idx[d] * y->strides[d];
  }
  for (int64_t l = l0; l < l1; l++) {
    c->fn((const char *)x->data + xo * c->es_x, c->xs, (char *)y->data + yo * c->es_y, c->ys, c->n, c->attrs, scratch);
    for (int d = x->ndim - 1; d >= 0; d--) {
      if (d == c->dim) continue;
      xo += x->strides[d]; yo += y->strides[d];
      if (++idx[d] < x->shape[d]) break;
      xo -= idx[d] * x->strides[d]; yo -= idx[d] * y->strides[d]; idx[d] = 0;
    }
  }
  free(scratch);
  return 0;
}

static int for_lines(const char *op, ds_tensor *const *t, int out_dt, int in_dt, int64_t scratch_per_el,
                     line_fn fn, const double *attrs) {
  ds_tensor *y = t[0]; const ds_tensor *x = t[1];
  char b1[128], b2[128];
  if (!x || !y || x->dtype != in_dt || y->dtype != out_dt || !ds_tensor_is_contiguous(y))
    return ds_fail(DS_EINVAL, "%s: expects a %s input and a contiguous %s output", op, ds_dtype_name(in_dt),
        ds_dtype_name(out_dt));
  int ok = x->ndim == y->ndim;
  for (int d = 0; ok && d < x->ndim; d++) ok = x->shape[d] == y->shape[d];
  if (!ok) return ds_fail(DS_EINVAL, "%s: output %s does not match input %s", op, ds_shape_str(y, b1),
      ds_shape_str(x, b2));
  double dd = attrs[0];
  int nd = x->ndim ? x->ndim : 1;
  if (dd != floor(dd) || dd < 0 || dd >= nd) return ds_fail(DS_EINVAL, "%s: dim %g out of range for %s", op, dd + 1,
      ds_shape_str(x, b1));
  if (x->numel == 0) return DS_OK;
  int dim = (int)dd;
  int64_t n = x->ndim ? x->shape[dim] : 1, xs = x->ndim ? x->strides[dim] : 0, ys = x->ndim ? y->strides[dim] : 0;
  int64_t nlines = x->numel / n, es_x = ds_dtype_size(in_dt), es_y = ds_dtype_size(out_dt);
  lines_ctx c = {x, y, fn, attrs, dim, n, xs, ys, es_x, es_y,
                 (xs == 1 && ys == 1) ? 0 : n * scratch_per_el};
  int failed = 0;
  if (x->numel >= DS_PAR_MIN && nlines > 1 && ds_team() > 1) {
    double t0 = ds_team_start();
    #pragma omp parallel reduction(|:failed)
    {
      ds_team_arrive(t0);
      int nt = omp_get_num_threads(), id = omp_get_thread_num();
      failed |= run_lines(&c, nlines * id / nt, nlines * (id + 1) / nt);
    }
    ds_team_done();
  } else {
    failed = run_lines(&c, 0, nlines);
  }
  return failed ? ds_fail(DS_ENOMEM, "%s: out of memory", op) : DS_OK;
}

/* ==== the folds and kernels per dtype ========================================================== */
#define EXP_LANES 8 /* softmax's exps: fewer lanes, the inlined exp needs the registers */
#define KERNELS "reduce_kernels.h"
#include "all_kernels.h"
#define KERNELS "reduce_float_kernels.h"
#include "float_kernels.h"
