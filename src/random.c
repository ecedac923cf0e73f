/* random.c: counter-based random numbers (Philox4x32-10): uniform, normal, integers, multinomial draws.
   Every kernel's LAST input is the generator state, an i64 tensor {seed, offset}. Element i of the
   output is a pure function of (seed, offset + i / per), per = values drawn from one 128-bit Philox
   block, so results do not depend on the thread count; the kernel then advances offset in place by
   the number of blocks it used. Eager and a compiled graph thus draw the same stream. */
#include "internal.h"
#include <stdint.h>
#include <omp.h>
#include <stdlib.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

/* Philox4x32-10 on blocks ctr0 .. ctr0 + TILE - 1 (counter (ctr, 0) under key seed): w[k][j] is word k of
   block j. Written lane-parallel so the compiler vectorizes the 32x32->64 products. */
#define TILE 64
static void philox_tile(uint64_t seed, uint64_t ctr0, uint32_t w[4][TILE]) {
  uint32_t *c0 = w[0], *c1 = w[1], *c2 = w[2], *c3 = w[3];
  for (int j = 0; j < TILE; j++) {
    uint64_t c = ctr0 + (uint64_t)j;
    c0[j] = (uint32_t)c; c1[j] = (uint32_t)(c >> 32); c2[j] = 0; c3[j] = 0;
  }
  uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
  for (int r = 0; r < 10; r++) {
    for (int j = 0; j < TILE; j++) {
      uint64_t p0 = (uint64_t)PHILOX_M0 * c0[j], p1 = (uint64_t)PHILOX_M1 * c2[j];
      uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[j] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3[j] ^ k1;
      c1[j] = (uint32_t)p1; c3[j] = (uint32_t)p0; c0[j] = n0; c2[j] = n2;
    }
    k0 += PHILOX_W0; k1 += PHILOX_W1;
  }
}

enum { GEN_UNIFORM, GEN_NORMAL, GEN_INT };

typedef struct {
  int kind, dtype, per;       /* per: values per Philox block */
  uint64_t seed, offset;
  double a, b;                /* uniform: low, high; normal: mean, std */
  int64_t low;                /* integers: low + [0, range) */
  uint64_t range;
} gen;

static inline double u53(uint32_t hi, uint32_t lo) {      /* [0, 1) with 53 random bits */
  return (double)((((uint64_t)hi << 32) | lo) >> 11) * 0x1p-53;
}
static inline double u24(uint32_t x) { return (double)(x >> 8) * 0x1p-24; } /* [0, 1), exact in f32 */

/* The values of TILE blocks from block b, in element order (element j*per + k comes from block j):
   doubles in d (floats) or integers in iv. */
static void tile_values(const gen *g, uint64_t b, double *d, int64_t *iv) {
  uint32_t w[4][TILE];
  philox_tile(g->seed, g->offset + b, w);
  if (g->kind == GEN_UNIFORM) {
    double lo = g->a, scale = g->b - g->a;
    if (g->per == 4)
      for (int j = 0; j < TILE; j++)
        for (int k = 0; k < 4; k++) d[4 * j + k] = lo + scale * u24(w[k][j]);
    else for (int j = 0; j < TILE; j++) {
      d[2 * j] = lo + scale * u53(w[0][j], w[1][j]);
      d[2 * j + 1] = lo + scale * u53(w[2][j], w[3][j]);
    }
  } else if (g->kind == GEN_NORMAL) { /* Box-Muller: u1 in (0, 1] so log never sees 0 */
    for (int j = 0; j < TILE; j++) {
      double u[4]; int pairs;
      if (g->per == 4) { for (int k = 0; k < 4; k++) u[k] = u24(w[k][j]); pairs = 2; }
      else { u[0] = u53(w[0][j], w[1][j]); u[1] = u53(w[2][j], w[3][j]); pairs = 1; }
      for (int p = 0; p < pairs; p++) {
        double r = sqrt(-2.0 * log(1.0 - u[2 * p])), th = 6.283185307179586 * u[2 * p + 1];
        d[g->per * j + 2 * p] = g->a + g->b * (r * cos(th));
        d[g->per * j + 2 * p + 1] = g->a + g->b * (r * sin(th));
      }
    }
  } else { /* integers: the high 64 bits of r * range (Lemire), range <= 2^64 */
    for (int j = 0; j < TILE; j++)
      for (int k = 0; k < 2; k++) {
        uint64_t r = ((uint64_t)w[2 * k][j] << 32) | w[2 * k + 1][j];
        uint64_t v = (uint64_t)(((unsigned __int128)r * g->range) >> 64);
        iv[2 * j + k] = (int64_t)((uint64_t)g->low + v);
      }
  }
}

/* Element offset of flat (row-major) element i in a possibly strided tensor. */
static int64_t elem_offset(const ds_tensor *o, int64_t i) {
  int64_t off = 0;
  for (int d = o->ndim - 1; d >= 0; d--) { off += (i % o->shape[d]) * o->strides[d]; i /= o->shape[d]; }
  return off;
}

/* Write n values (flat elements i0 ..) into o. */
static void store(const gen *g, ds_tensor *o, int contig, int64_t i0, int64_t n, const double *d, const int64_t *iv) {
  int ints = g->kind == GEN_INT;
  for (int64_t k = 0; k < n; k++) {
    int64_t e = contig ? i0 + k : elem_offset(o, i0 + k);
    switch (o->dtype) {
      case DS_F32: ((float *)o->data)[e] = ints ? (float)iv[k] : (float)d[k]; break;
      case DS_F64: ((double *)o->data)[e] = ints ? (double)iv[k] : d[k]; break;
      case DS_I64: ((int64_t *)o->data)[e] = iv[k]; break;
      case DS_I32: ((int32_t *)o->data)[e] = (int32_t)iv[k]; break;
    }
  }
}

/* Elements of blocks [b0, b1). */
static void fill_blocks(const gen *g, ds_tensor *o, int contig, int64_t b0, int64_t b1) {
  double d[4 * TILE]; int64_t iv[4 * TILE];
  for (int64_t b = b0; b < b1; b += TILE) {
    tile_values(g, (uint64_t)b, d, iv);
    int64_t i0 = b * g->per, end = (b + TILE < b1 ? b + TILE : b1) * g->per;
    if (end > o->numel) end = o->numel;
    store(g, o, contig, i0, end - i0, d, iv);
  }
}

/* t[0] = output, t[1] = state {seed, offset} (i64, 2 elements), advanced in place. */
static int run(ds_tensor *const *t, const char *op, gen *g, int dtype) {
  ds_tensor *o = t[0], *s = t[1];
  DS_CHECK(o && s, "%s: missing operand", op);
  DS_CHECK(o->dtype == dtype, "%s: output has dtype %s, kernel expects %s", op, ds_dtype_name(o->dtype),
           ds_dtype_name(dtype));
  DS_CHECK(s->dtype == DS_I64 && s->ndim == 1 && s->numel == 2,
           "%s: generator state must be an i64 tensor of shape (2) {seed, offset}", op);
  DS_CHECK(s->storage != o->storage, "%s: output and generator state share storage", op);
  int64_t *st = (int64_t *)s->data, sstride = s->strides[0];
  g->seed = (uint64_t)st[0]; g->offset = (uint64_t)st[sstride];
  g->dtype = dtype;
  int64_t n = o->numel, nblocks = (n + g->per - 1) / g->per;
  int contig = ds_tensor_is_contiguous(o);
  if (n >= DS_PAR_MIN && ds_team() > 1) {
    double t0 = ds_team_start();
    #pragma omp parallel
    {
      ds_team_arrive(t0);
      int nt = omp_get_num_threads(), id = omp_get_thread_num();
      fill_blocks(g, o, contig, nblocks * id / nt, nblocks * (id + 1) / nt);
    }
    ds_team_done();
  } else fill_blocks(g, o, contig, 0, nblocks);
  st[sstride] = (int64_t)(g->offset + (uint64_t)nblocks);
  return DS_OK;
}

/* rand: attrs = {low, high}: uniform in [low, high) */
static int uniform(ds_tensor *const *t, const double *attrs, int dtype) {
  DS_CHECK(isfinite(attrs[0]) && isfinite(attrs[1]) && attrs[0] <= attrs[1],
           "rand: bounds must be finite with low <= high, got [%g, %g)", attrs[0], attrs[1]);
  gen g = { .kind = GEN_UNIFORM, .per = dtype == DS_F32 ? 4 : 2, .a = attrs[0], .b = attrs[1] };
  return run(t, "rand", &g, dtype);
}
/* randn: attrs = {mean, std} */
static int normal(ds_tensor *const *t, const double *attrs, int dtype) {
  DS_CHECK(isfinite(attrs[0]) && isfinite(attrs[1]) && attrs[1] >= 0,
           "randn: mean and std must be finite with std >= 0, got mean %g, std %g", attrs[0], attrs[1]);
  gen g = { .kind = GEN_NORMAL, .per = dtype == DS_F32 ? 4 : 2, .a = attrs[0], .b = attrs[1] };
  return run(t, "randn", &g, dtype);
}
/* randint: attrs = {low, high}: integers in [low, high) */
static int integers(ds_tensor *const *t, const double *attrs, int dtype) {
  double lo = attrs[0], hi = attrs[1];
  DS_CHECK(lo == floor(lo) && hi == floor(hi) && lo < hi && lo >= -0x1p63 && hi <= 0x1p63,
           "randint: needs integer bounds low < high within i64, got [%g, %g)", lo, hi);
  double lim = dtype == DS_I32 ? 0x1p31 : dtype == DS_F32 ? 0x1p24 : dtype == DS_F64 ? 0x1p53 : 0x1p63;
  DS_CHECK(lo >= -lim && hi <= lim, "randint: bounds [%g, %g) do not fit the output dtype", lo, hi);
  gen g = { .kind = GEN_INT, .per = 2, .low = (int64_t)lo };
  g.range = hi - lo >= 0x1p64 ? UINT64_MAX : (uint64_t)(hi - lo);
  return run(t, "randint", &g, dtype);
}

int ds_rand_f32(ds_tensor *const *t, const double *attrs) { return uniform(t, attrs, DS_F32); }
int ds_rand_f64(ds_tensor *const *t, const double *attrs) { return uniform(t, attrs, DS_F64); }
int ds_randn_f32(ds_tensor *const *t, const double *attrs) { return normal(t, attrs, DS_F32); }
int ds_randn_f64(ds_tensor *const *t, const double *attrs) { return normal(t, attrs, DS_F64); }
int ds_randint_i64(ds_tensor *const *t, const double *attrs) { return integers(t, attrs, DS_I64); }
int ds_randint_i32(ds_tensor *const *t, const double *attrs) { return integers(t, attrs, DS_I32); }
int ds_randint_f32(ds_tensor *const *t, const double *attrs) { return integers(t, attrs, DS_F32); }
int ds_randint_f64(ds_tensor *const *t, const double *attrs) { return integers(t, attrs, DS_F64); }

/* ---- multinomial: t[0] = out i64 (R, n) or (n), t[1] = probs (R, k) or (k), t[2] = state; attrs = {n, replacement}.
   Row r draws from blocks offset + r * per_row .. (2 f64 uniforms of 53 bits per block; per_row from n with
   replacement, from k without), so a row's draws depend on (seed, offset, r) only. With replacement: the inverse
   CDF, summed in f64 in index order (the first category whose cumulative sum exceeds u * total). Without: the
   exponential race PyTorch uses, keys p_j / E_j with E_j = -log(1 - u_j), the n largest (ties: lower index first;
   zero-probability categories last, in index order). Indices are 1-based. */
typedef struct { double key; int64_t idx; } keyed;
static int by_key_desc(const void *a, const void *b) {
  const keyed *x = a, *y = b;
  if (x->key != y->key) return x->key > y->key ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* m uniforms in [0, 1) from the blocks at counter ctr0 .. */
static void uniforms(uint64_t seed, uint64_t ctr0, int64_t m, double *u) {
  uint32_t w[4][TILE];
  for (int64_t b = 0; 2 * b < m; b += TILE) {
    philox_tile(seed, ctr0 + (uint64_t)b, w);
    for (int j = 0; j < TILE && 2 * (b + j) < m; j++) {
      u[2 * (b + j)] = u53(w[0][j], w[1][j]);
      if (2 * (b + j) + 1 < m) u[2 * (b + j) + 1] = u53(w[2][j], w[3][j]);
    }
  }
}

static double prob_at(const ds_tensor *p, int64_t r, int64_t j) {
  int nd = p->ndim;
  int64_t off = (nd == 2 ? r * p->strides[0] : 0) + j * p->strides[nd - 1];
  return p->dtype == DS_F32 ? (double)((const float *)p->data)[off] : ((const double *)p->data)[off];
}

static int multinomial(ds_tensor *const *t, const double *attrs, int dtype) {
  ds_tensor *o = t[0], *p = t[1], *s = t[2];
  DS_CHECK(o && p && s, "multinomial: missing operand");
  DS_CHECK(p->dtype == dtype && (p->ndim == 1 || p->ndim == 2), "multinomial: probs must be a 1-D or 2-D %s tensor",
           ds_dtype_name(dtype));
  DS_CHECK(s->dtype == DS_I64 && s->ndim == 1 && s->numel == 2,
           "multinomial: generator state must be an i64 tensor of shape (2) {seed, offset}");
  int64_t n = (int64_t)attrs[0], k = p->shape[p->ndim - 1], rows = p->ndim == 2 ? p->shape[0] : 1;
  int repl = attrs[1] != 0;
  DS_CHECK(n >= 1 && (double)n == attrs[0], "multinomial: cannot sample n_sample <= 0 samples");
  DS_CHECK(repl || n <= k, "multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  DS_CHECK(o->dtype == DS_I64 && o->ndim == p->ndim && o->shape[o->ndim - 1] == n && (p->ndim == 1 ||
           o->shape[0] == rows) && ds_tensor_is_contiguous(o), "multinomial: output must be a contiguous i64 tensor "
           "of %lld draws per row", (long long)n);
  DS_CHECK(s->storage != o->storage && s->storage != p->storage, "multinomial: operands share storage");
  for (int64_t r = 0; r < rows; r++) {
    double total = 0;
    for (int64_t j = 0; j < k; j++) {
      double v = prob_at(p, r, j);
      DS_CHECK(isfinite(v) && v >= 0, "multinomial: probability tensor contains either `inf`, `nan` or element < 0");
      total += v;
    }
    DS_CHECK(total > 0, "multinomial: invalid multinomial distribution (sum of probabilities <= 0)");
  }
  int64_t *st = (int64_t *)s->data, sstride = s->strides[0];
  uint64_t seed = (uint64_t)st[0], offset = (uint64_t)st[sstride];
  int64_t m = repl ? n : k, per_row = (m + 1) / 2;
  double *u = malloc((size_t)(m + k) * sizeof(double));
  keyed *kv = repl ? NULL : malloc((size_t)k * sizeof(keyed));
  if (!u || (!repl && !kv)) {
    free(u); free(kv);
    return ds_fail(DS_ENOMEM, "multinomial: out of memory (%lld categories)", (long long)k);
  }
  double *cdf = u + m;
  int64_t *out = (int64_t *)o->data;
  for (int64_t r = 0; r < rows; r++) {
    uniforms(seed, offset + (uint64_t)(r * per_row), m, u);
    int64_t *row = out + r * n;
    if (repl) {
      double c = 0;
      int64_t last = 0;
      for (int64_t j = 0; j < k; j++) { double v = prob_at(p, r, j); c += v; cdf[j] = c; if (v > 0) last = j; }
      for (int64_t i = 0; i < n; i++) {
        double target = u[i] * c;
        int64_t lo = 0, hi = k;  /* first j with target < cdf[j], by bisection */
        while (lo < hi) { int64_t mid = lo + (hi - lo) / 2; if (target < cdf[mid]) hi = mid; else lo = mid + 1; }
        row[i] = (lo < k ? lo : last) + 1;
      }
    } else {
      for (int64_t j = 0; j < k; j++) {
        double v = prob_at(p, r, j);
        kv[j].key = v > 0 ? v / -log1p(-u[j]) : -1.0;
        kv[j].idx = j;
      }
      qsort(kv, (size_t)k, sizeof(keyed), by_key_desc);
      for (int64_t i = 0; i < n; i++) row[i] = kv[i].idx + 1;
    }
  }
  free(u); free(kv);
  st[sstride] = (int64_t)(offset + (uint64_t)(rows * per_row));
  return DS_OK;
}

int ds_multinomial_f32(ds_tensor *const *t, const double *attrs) { return multinomial(t, attrs, DS_F32); }
int ds_multinomial_f64(ds_tensor *const *t, const double *attrs) { return multinomial(t, attrs, DS_F64); }
