/* nn_attention.c: scaled dot-product attention in one kernel, tile by tile: for a few query rows the
   scores (q.k, one FMA chain over E), the mask, softmax and the weighted sum of v (one FMA chain over S),
   with no (L,S) buffer per batch entry; and its segment form for packed sequences of different lengths. */
#include "internal.h"
#include "mathfn.h"
#include <stdlib.h>
#include <string.h>
#include <omp.h>

/* Each score is fma(q[i,e], k[j,e], acc) for e = 0 .. E-1 in order from 0, then times scale; the mask
   is applied (bool false or j > i under is_causal: -inf; float: added); softmax takes the exact max,
   exps (ds_expf), their sum in 16 lanes (lane j % 16, lanes added pairwise) and multiplies by 1 / sum;
   each output element is fma(w[i,j], v[j,c], acc) for j = 0 .. S-1 in order. Every element is thus
   one fixed computation: rows do not depend on L, on the tiling, the thread count or the vector width,
   and the AVX-512 build of the tile code (wider vectors, more rows per tile) gives the same bits. */
#define NR 16        /* columns per packed strip (K^T columns = keys, V columns = value features) */
#define LANES 16     /* softmax sum lanes */
#define PAR_FLOPS (1 << 20)

enum { MASK_NONE = 0, MASK_BOOL = 1, MASK_FLOAT = 2 };

/* out (..., L, Ev) contiguous; q (..., L, E), k (..., S, E), v (..., S, Ev), mask broadcast to (..., L, S):
   any strides; batch strides are 0 on broadcast dims. */
typedef struct {
  int nbd;
  int64_t bshape[DS_MAXDIM], qb[DS_MAXDIM], kb[DS_MAXDIM], vb[DS_MAXDIM], mb[DS_MAXDIM];
  int64_t nb, L, S, E, Ev, Sp, Evp;  /* Sp, Evp: S and Ev rounded up to NR */
  int64_t qr, qc, kr, kc, vr, vc, mr, mc;
  int64_t orow;                      /* out's row stride: Ev (dense), heads x Ev (segments) */
  double scale;
  int mask, causal;
  const void *q, *k, *v, *m;
  void *out;
} geom;

static int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

/* element offsets of batch entry bi in q, k, v and mask */
static void batch_offsets(const geom *g, int64_t bi, int64_t off[4]) {
  off[0] = off[1] = off[2] = off[3] = 0;
  for (int d = g->nbd - 1; d >= 0; d--) {
    int64_t i = bi % g->bshape[d];
    bi /= g->bshape[d];
    off[0] += i * g->qb[d]; off[1] += i * g->kb[d]; off[2] += i * g->vb[d]; off[3] += i * g->mb[d];
  }
}

/* strides of x's dim that lines up with out's batch dim d (0 when broadcast or absent) */
static int batch_strides(const ds_tensor *x, int lead, const ds_tensor *o, int64_t *st, const char *what) {
  char s1[128], s2[128];
  int nbd = o->ndim - 2, xb = x->ndim - lead;
  DS_CHECK(xb <= nbd, "scaled_dot_product_attention: %s %s has more batch dims than the output %s", what,
           ds_shape_str(x, s1), ds_shape_str(o, s2));
  for (int d = 0; d < nbd; d++) {
    int j = d - (nbd - xb);
    st[d] = 0;
    if (j < 0) continue;
    DS_CHECK(x->shape[j] == o->shape[d] || x->shape[j] == 1,
             "scaled_dot_product_attention: %s %s does not broadcast to %s", what, ds_shape_str(x, s1),
             ds_shape_str(o, s2));
    if (x->shape[j] != 1) st[d] = x->strides[j];
  }
  return DS_OK;
}

/* plan check (its registry row is KV): out, q, k, v, and the mask when attrs[1] names one */
int ds_scaled_dot_product_attention_check(int nbuf, const int *dtypes, int nattrs, const double *attrs) {
  (void)dtypes;
  DS_CHECK(nattrs >= 3 && attrs[1] >= MASK_NONE && attrs[1] <= MASK_FLOAT && attrs[1] == (int)attrs[1],
           "scaled_dot_product_attention: bad attrs");
  int want = attrs[1] == MASK_NONE ? 4 : 5;
  DS_CHECK(nbuf == want, "scaled_dot_product_attention: step has %d operands, its attrs call for %d", nbuf, want);
  return DS_OK;
}

static int make_geom(geom *g, ds_tensor *const *t, const double *attrs, int dtype) {
  const char *op = "scaled_dot_product_attention";
  char s1[128], s2[128], s3[128];
  ds_tensor *o = t[0], *q = t[1], *k = t[2], *v = t[3];
  DS_CHECK(o && q && k && v, "%s: missing operand", op);
  g->mask = (int)attrs[1];
  g->causal = attrs[2] != 0;
  g->scale = attrs[0];
  DS_CHECK(g->mask >= MASK_NONE && g->mask <= MASK_FLOAT, "%s: bad mask kind %d", op, g->mask);
  DS_CHECK(o->dtype == dtype && q->dtype == dtype && k->dtype == dtype && v->dtype == dtype,
           "%s: q, k, v and the output must all be %s", op, ds_dtype_name(dtype));
  DS_CHECK(q->ndim >= 2 && k->ndim >= 2 && v->ndim >= 2 && o->ndim >= 2 && o->ndim <= DS_MAXDIM,
           "%s: q, k, v must be >= 2-D", op);
  DS_CHECK(ds_tensor_is_contiguous(o), "%s: output must be contiguous", op);
  g->L = q->shape[q->ndim - 2]; g->E = q->shape[q->ndim - 1];
  g->S = k->shape[k->ndim - 2]; g->Ev = v->shape[v->ndim - 1];
  DS_CHECK(k->shape[k->ndim - 1] == g->E && v->shape[v->ndim - 2] == g->S && o->shape[o->ndim - 2] == g->L &&
               o->shape[o->ndim - 1] == g->Ev,
           "%s: q %s, k %s, v %s do not fit (..., L, E), (..., S, E), (..., S, Ev)", op, ds_shape_str(q, s1),
           ds_shape_str(k, s2), ds_shape_str(v, s3));
  g->nbd = o->ndim - 2;
  g->nb = 1;
  for (int d = 0; d < g->nbd; d++) { g->bshape[d] = o->shape[d]; g->nb *= o->shape[d]; }
  int rc;
  if ((rc = batch_strides(q, 2, o, g->qb, "q")) || (rc = batch_strides(k, 2, o, g->kb, "k")) ||
      (rc = batch_strides(v, 2, o, g->vb, "v")))
    return rc;
  g->qr = q->strides[q->ndim - 2]; g->qc = q->strides[q->ndim - 1];
  g->kr = k->strides[k->ndim - 2]; g->kc = k->strides[k->ndim - 1];
  g->vr = v->strides[v->ndim - 2]; g->vc = v->strides[v->ndim - 1];
  g->q = q->data; g->k = k->data; g->v = v->data; g->out = o->data; g->m = NULL;
  g->mr = g->mc = 0;
  for (int d = 0; d < DS_MAXDIM; d++) g->mb[d] = 0;
  if (g->mask != MASK_NONE) {
    ds_tensor *m = t[4];
    DS_CHECK(m, "%s: missing mask", op);
    DS_CHECK(g->mask == MASK_BOOL ? m->dtype == DS_BOOL : m->dtype == dtype, "%s: mask must be bool or %s", op,
             ds_dtype_name(dtype));
    int n = m->ndim;
    DS_CHECK(n >= 1 || m->numel == 1, "%s: bad mask", op);
    if (n >= 1) {
      DS_CHECK(m->shape[n - 1] == g->S || m->shape[n - 1] == 1, "%s: mask %s does not broadcast to (L,S) = (%lld,%lld)",
               op, ds_shape_str(m, s1), (long long)g->L, (long long)g->S);
      g->mc = m->shape[n - 1] == 1 ? 0 : m->strides[n - 1];
    }
    if (n >= 2) {
      DS_CHECK(m->shape[n - 2] == g->L || m->shape[n - 2] == 1, "%s: mask %s does not broadcast to (L,S) = (%lld,%lld)",
               op, ds_shape_str(m, s1), (long long)g->L, (long long)g->S);
      g->mr = m->shape[n - 2] == 1 ? 0 : m->strides[n - 2];
    }
    if (n > 2 && (rc = batch_strides(m, 2, o, g->mb, "mask"))) return rc;
    g->m = m->data;
  }
  g->Sp = round_up(g->S, NR); g->Evp = round_up(g->Ev, NR);
  g->orow = g->Ev;
  return DS_OK;
}

/* per-thread scratch: K^T packed (E x Sp), V packed (S x Evp), the query tile (mr x E), scores and
   weights (mr x Sp); all zero padded */
static int64_t scratch_elems(const geom *g, int mr) {
  return g->E * g->Sp + g->S * g->Evp + mr * g->E + mr * g->Sp;
}

/* The tile code, generic in the element type T and its fused multiply-add; MR (rows per tile) is a
   compile-time constant at each use, so the column loops vectorize over NR lanes in registers. */
#define ATTENTION_TILES(SUF, T, FMA, EXP) \
/* c (rows x nr of an mr x NR tile, row stride ldc) = a (mr x K, row stride lda) @ b (K x NR strip, row \
   stride ldb); stored straight from the accumulators (a bounce buffer stalls on store forwarding) */ \
static inline __attribute__((always_inline)) void micro_##SUF(const int mr, int64_t K, const T *a, int64_t lda, \
                                                            const T *b, int64_t ldb, T *c, int64_t ldc, \
                                                            int rows, int nr) { \
  T acc[8][NR]; \
  for (int r = 0; r < mr; r++) for (int j = 0; j < NR; j++) acc[r][j] = 0; \
  for (int64_t kk = 0; kk < K; kk++) { \
    _Pragma("GCC unroll 8") for (int r = 0; r < mr; r++) { \
      T av = a[r * lda + kk]; \
      _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++) acc[r][j] = FMA(av, b[kk * ldb + j], acc[r][j]); \
    } \
  } \
  if (rows == mr && nr == NR) { \
    for (int r = 0; r < mr; r++) for (int j = 0; j < NR; j++) c[r * ldc + j] = acc[r][j]; \
  } else { \
    for (int r = 0; r < rows; r++) for (int j = 0; j < nr; j++) c[r * ldc + j] = acc[r][j]; \
  } \
} \
/* pack K^T (E x Sp) and V (S x Evp) of batch entry with offsets off */ \
static inline __attribute__((always_inline)) void pack_kv_##SUF(const geom *g, const int64_t off[4], T *kt, T *vp) { \
  const T *k = (const T *)g->k + off[1], *v = (const T *)g->v + off[2]; \
  for (int64_t e = 0; e < g->E; e++) { \
    for (int64_t j = 0; j < g->S; j++) kt[e * g->Sp + j] = k[j * g->kr + e * g->kc]; \
    for (int64_t j = g->S; j < g->Sp; j++) kt[e * g->Sp + j] = 0; \
  } \
  for (int64_t j = 0; j < g->S; j++) { \
    for (int64_t c = 0; c < g->Ev; c++) vp[j * g->Evp + c] = v[j * g->vr + c * g->vc]; \
    for (int64_t c = g->Ev; c < g->Evp; c++) vp[j * g->Evp + c] = 0; \
  } \
} \
/* scores of row i (global query index, Sp columns) -> softmax weights in place; columns >= S end 0 */ \
static inline __attribute__((always_inline)) void softmax_row_##SUF(const geom *g, const int64_t off[4], \
    int64_t i, T *w) { \
  const T neg = -(T)INFINITY, scale = (T)g->scale; \
  int64_t S_ = g->S, Sp = g->Sp; \
  for (int64_t j = 0; j < S_; j++) w[j] = w[j] * scale; \
  for (int64_t j = S_; j < Sp; j++) w[j] = neg; \
  if (g->mask == MASK_BOOL) { \
    const uint8_t *m = (const uint8_t *)g->m + off[3] + i * g->mr; \
    for (int64_t j = 0; j < S_; j++) w[j] = m[j * g->mc] ? w[j] : neg; \
  } else if (g->mask == MASK_FLOAT) { \
    const T *m = (const T *)g->m + off[3] + i * g->mr; \
    for (int64_t j = 0; j < S_; j++) w[j] = w[j] + m[j * g->mc]; \
  } \
  if (g->causal) for (int64_t j = i + 1; j < S_; j++) w[j] = neg; \
  T lane[LANES]; \
  for (int l = 0; l < LANES; l++) lane[l] = neg; \
  for (int64_t j = 0; j < Sp; j += LANES) \
    for (int l = 0; l < LANES; l++) lane[l] = w[j + l] > lane[l] ? w[j + l] : lane[l]; \
  for (int h = LANES / 2; h; h /= 2) for (int l = 0; l < h; l++) lane[l] = \
      lane[l + h] > lane[l] ? lane[l + h] : lane[l]; \
  T mx = lane[0]; \
  for (int l = 0; l < LANES; l++) lane[l] = 0; \
  for (int64_t j = 0; j < Sp; j += LANES)      /* columns >= S: exp(-inf) = 0 adds nothing */ \
    for (int l = 0; l < LANES; l++) { T e = EXP(w[j + l] - mx); w[j + l] = e; lane[l] += e; } \
  for (int h = LANES / 2; h; h /= 2) for (int l = 0; l < h; l++) lane[l] += lane[l + h]; \
  T rs = 1 / lane[0]; \
  for (int64_t j = 0; j < S_; j++) w[j] = w[j] * rs; \
} \
/* units u0 .. u1-1 (unit = batch entry x tile of MR query rows); scratch as in scratch_elems */ \
static inline __attribute__((always_inline)) void units_##SUF(const geom *g, const int MR, int64_t u0, \
    int64_t u1, T *scr) { \
  T *kt = scr, *vp = kt + g->E * g->Sp, *qt = vp + g->S * g->Evp, *sc = qt + MR * g->E; \
  int64_t tiles = (g->L + MR - 1) / MR, packed = -1, off[4]; \
  for (int64_t u = u0; u < u1; u++) { \
    int64_t bi = u / tiles, i0 = (u % tiles) * MR; \
    int rows = (int)(g->L - i0 < MR ? g->L - i0 : MR); \
    batch_offsets(g, bi, off); \
    if (packed != bi) { pack_kv_##SUF(g, off, kt, vp); packed = bi; } \
    const T *q = (const T *)g->q + off[0]; \
    for (int r = 0; r < MR; r++) \
      for (int64_t e = 0; e < g->E; e++) qt[r * g->E + e] = r < rows ? q[(i0 + r) * g->qr + e * g->qc] : 0; \
    for (int64_t j0 = 0; j0 < g->Sp; j0 += NR) \
      micro_##SUF(MR, g->E, qt, g->E, kt + j0, g->Sp, sc + j0, g->Sp, MR, NR); \
    for (int r = 0; r < rows; r++) softmax_row_##SUF(g, off, i0 + r, sc + r * g->Sp); \
    T *out = (T *)g->out + bi * g->L * g->Ev + i0 * g->orow; \
    for (int64_t c0 = 0; c0 < g->Evp; c0 += NR) \
      micro_##SUF(MR, g->S, sc, g->Sp, vp + c0, g->Evp, out + c0, g->orow, rows, \
          (int)(g->Ev - c0 < NR ? g->Ev - c0 : NR)); \
  } \
}

ATTENTION_TILES(f32, float, fmaf, ds_expf)
ATTENTION_TILES(f64, double, fma, exp)

/* rows per tile of each build: AVX-512 keeps 8 rows x 16 lanes in 8 zmm accumulators, AVX2 4 rows in
   8 ymm pairs; f64 4 rows */
#define MR_AVX512 8
#define MR_AVX2 4
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma")))
static void units_f32_avx512(const geom *g, int64_t u0, int64_t u1, float *scr) {
  units_f32(g, MR_AVX512, u0, u1, scr);
}
static void units_f32_avx2(const geom *g, int64_t u0, int64_t u1, float *scr) { units_f32(g, MR_AVX2, u0, u1, scr); }
static void units_f64_any(const geom *g, int64_t u0, int64_t u1, double *scr) { units_f64(g, MR_AVX2, u0, u1, scr); }

/* each build's rows per tile and tile runner, chosen once per call (PICK_<dtype> in the kernels below) */
#define PICK_f32 \
  if (ds_isa() == DS_ISA_AVX512) { mr = MR_AVX512; run = units_f32_avx512; } \
  else { mr = MR_AVX2; run = units_f32_avx2; }
#define PICK_f64 mr = MR_AVX2; run = units_f64_any;

/* the kernel of one dtype, and run_share_<SUF>: units [u0, u1) run by the calling thread with a scratch of per
   elements of its own (1 when out of memory) */
#define ATTENTION_KERNEL(SUF, T, DT)                                                                      \
static int run_share_##SUF(const geom *g, void (*run)(const geom *, int64_t, int64_t, T *), int64_t u0,       \
                           int64_t u1, int64_t per) {                                                        \
  T *scr = aligned_alloc(64, (size_t)round_up(per * (int64_t)sizeof(T), 64));                                 \
  if (!scr) return 1;                                                                                         \
  run(g, u0, u1, scr);                                                                                        \
  free(scr);                                                                                                  \
  return 0;                                                                                                   \
}                                                                                                             \
int ds_scaled_dot_product_attention_##SUF(ds_tensor *const *t, const double *attrs) {                          \
  geom g;                                                                                                     \
  int rc = make_geom(&g, t, attrs, DT);                                                                       \
  if (rc) return rc;                                                                                          \
  if (g.nb == 0 || g.L == 0 || g.Ev == 0) return DS_OK;                                                       \
  DS_CHECK(g.S > 0, "scaled_dot_product_attention: no keys (S = 0)");                                        \
  int mr;                                                                                                     \
  void (*run)(const geom *, int64_t, int64_t, T *);                                                           \
  PICK_##SUF                                                                                                  \
  int64_t tiles = (g.L + mr - 1) / mr, units = g.nb * tiles;                                                  \
  double work = 2.0 * (double)g.nb * (double)g.L * (double)g.S * (double)(g.E + g.Ev);                        \
  int64_t per = scratch_elems(&g, mr);                                                                        \
  int failed = 0;                                                                                             \
  if (units > 1 && work >= PAR_FLOPS && ds_team() > 1) {                                                      \
    double t0 = ds_team_start();                                                                              \
    _Pragma("omp parallel")                                                                                   \
    {                                                                                                         \
      ds_team_arrive(t0);                                                                                     \
      int nt = omp_get_num_threads(), me = omp_get_thread_num();                                              \
      /* consecutive units: K, V packed once */                                                               \
      if (run_share_##SUF(&g, run, units * me / nt, units * (me + 1) / nt, per)) {                           \
        _Pragma("omp atomic write") failed = 1;                                                               \
      }                                                                                                       \
    }                                                                                                         \
    ds_team_done();                                                                                           \
  } else failed = run_share_##SUF(&g, run, 0, units, per);   /* no inactive region: it costs ~1.2 us */     \
  return failed ? ds_fail(DS_ENOMEM, "scaled_dot_product_attention: out of memory for scratch") : DS_OK;     \
}

ATTENTION_KERNEL(f32, float, DS_F32)
ATTENTION_KERNEL(f64, double, DS_F64)

/* ---- segment attention: packed sequences of different lengths (serving batches without padding) ----
   q (Nq, heads, E), k (Nk, heads, E), v (Nk, heads, Ev) hold the rows of B sequences one after another;
   qseg and kseg (B, 2) i64 give sequence b's query and key rows as {first (1-based), count}. The queries of
   b attend to b's keys only, head by head: each (sequence, head) runs the tile code above as the dense op
   with L = its query count, S = its key count and no mask, so a sequence's rows are bitwise those of
   scaled_dot_product_attention on that sequence alone, wherever it sits in the batch. Query rows outside
   every sequence, and those of a sequence without keys, are 0. */
typedef struct { int64_t q0, nq, k0, nk; } segment;

/* seg (B, 2) i64 -> rows [first - 1, first - 1 + count) checked against n rows */
static int read_segment(const ds_tensor *s, int64_t b, int64_t n, const char *what, int64_t *r0, int64_t *cnt) {
  const int64_t *p = (const int64_t *)s->data + b * s->strides[0];
  int64_t first = p[0], count = p[s->strides[1]];
  DS_CHECK(count >= 0 && first >= 1 && first <= n + 1 && count <= n + 1 - first,
           "segment_attention: %s segment %lld = {first %lld, count %lld} is outside rows 1..%lld", what,
           (long long)b + 1, (long long)first, (long long)count, (long long)n);
  *r0 = first - 1; *cnt = count;
  return DS_OK;
}

/* the shared geometry of every (sequence, head) unit and the segment list (malloc'ed into *segs) */
static int segment_geom(geom *g, ds_tensor *const *t, const double *attrs, int dtype, segment **segs) {
  const char *op = "segment_attention";
  char s1[128], s2[128], s3[128];
  ds_tensor *o = t[0], *q = t[1], *k = t[2], *v = t[3], *qs = t[4], *ks = t[5];
  DS_CHECK(o && q && k && v && qs && ks, "%s: missing operand", op);
  DS_CHECK(o->dtype == dtype && q->dtype == dtype && k->dtype == dtype && v->dtype == dtype,
           "%s: q, k, v and the output must all be %s", op, ds_dtype_name(dtype));
  DS_CHECK(q->ndim == 3 && k->ndim == 3 && v->ndim == 3 && o->ndim == 3 && q->shape[1] == k->shape[1] &&
               q->shape[1] == v->shape[1] && q->shape[2] == k->shape[2] && k->shape[0] == v->shape[0] &&
               o->shape[0] == q->shape[0] && o->shape[1] == q->shape[1] && o->shape[2] == v->shape[2],
           "%s: q %s, k %s, v %s do not fit (Nq, heads, E), (Nk, heads, E), (Nk, heads, Ev)", op,
           ds_shape_str(q, s1), ds_shape_str(k, s2), ds_shape_str(v, s3));
  DS_CHECK(ds_tensor_is_contiguous(o), "%s: output must be contiguous", op);
  DS_CHECK(qs->dtype == DS_I64 && ks->dtype == DS_I64 && qs->ndim == 2 && ks->ndim == 2 && qs->shape[1] == 2 &&
               ks->shape[1] == 2 && qs->shape[0] == ks->shape[0],
           "%s: qseg %s and kseg %s must both be (B, 2) i64 {first, count}", op, ds_shape_str(qs, s1),
           ds_shape_str(ks, s2));
  memset(g, 0, sizeof *g);
  g->nb = 1; g->scale = attrs[0]; g->mask = MASK_NONE;
  g->E = q->shape[2]; g->Ev = v->shape[2]; g->Evp = round_up(g->Ev, NR);
  g->qr = q->strides[0]; g->qc = q->strides[2];
  g->kr = k->strides[0]; g->kc = k->strides[2];
  g->vr = v->strides[0]; g->vc = v->strides[2];
  g->orow = o->shape[1] * g->Ev;
  int64_t B = qs->shape[0], end = 0;
  segment *sg = malloc((size_t)(B > 0 ? B : 1) * sizeof *sg);
  if (!sg) return ds_fail(DS_ENOMEM, "%s: out of memory", op);
  for (int64_t b = 0; b < B; b++) {
    int rc;
    if ((rc = read_segment(qs, b, q->shape[0], "query", &sg[b].q0, &sg[b].nq)) ||
        (rc = read_segment(ks, b, k->shape[0], "key", &sg[b].k0, &sg[b].nk))) {
      free(sg);
      return rc;
    }
    if (sg[b].nq == 0) continue;
    if (sg[b].q0 < end) {
      free(sg);
      return ds_fail(DS_EINVAL, "%s: query segment %lld overlaps an earlier one (they must be in row order)", op,
                     (long long)b + 1);
    }
    end = sg[b].q0 + sg[b].nq;
  }
  *segs = sg;
  return DS_OK;
}

#define SEGMENT_KERNEL(SUF, T, DT)                                                                     \
int ds_segment_attention_##SUF(ds_tensor *const *t, const double *attrs) {                                \
  geom g0;                                                                                                \
  segment *sg = NULL;                                                                                     \
  int rc = segment_geom(&g0, t, attrs, DT, &sg);                                                          \
  if (rc) return rc;                                                                                      \
  ds_tensor *o = t[0], *q = t[1], *k = t[2], *v = t[3];                                                   \
  int64_t B = t[4]->shape[0], H = q->shape[1], units = B * H, maxS = 0, covered = 0;                      \
  double work = 0;                                                                                        \
  T *out = (T *)o->data;                                                                                  \
  memset(out, 0, (size_t)o->numel * sizeof(T));   /* rows outside every sequence */                      \
  for (int64_t b = 0; b < B; b++) {                                                                       \
    if (sg[b].nq == 0 || sg[b].nk == 0) continue;                                                         \
    if (sg[b].nk > maxS) maxS = sg[b].nk;                                                                 \
    covered += sg[b].nq;                                                                                  \
    work += 2.0 * (double)H * (double)sg[b].nq * (double)sg[b].nk * (double)(g0.E + g0.Ev);              \
  }                                                                                                       \
  int mr;                                                                                                 \
  void (*run)(const geom *, int64_t, int64_t, T *);                                                       \
  PICK_##SUF                                                                                              \
  geom gm = g0;                                                                                           \
  gm.S = maxS; gm.Sp = round_up(maxS, NR);                                                                \
  int64_t per = scratch_elems(&gm, mr);                                                                   \
  int failed = 0;                                                                                         \
  if (covered > 0 && g0.Ev > 0) {                                                                         \
    _Pragma("omp parallel if (units > 1 && work >= PAR_FLOPS && ds_team() > 1)")                         \
    {                                                                                                     \
      T *scr = aligned_alloc(64, (size_t)round_up(per * (int64_t)sizeof(T), 64));                         \
      if (!scr) {                                                                                         \
        _Pragma("omp atomic write") failed = 1;                                                           \
      }                                                                                                   \
      _Pragma("omp for schedule(dynamic)")                                                                \
      for (int64_t u = 0; u < units; u++) {                                                               \
        const segment *s = &sg[u / H];                                                                    \
        int64_t h = u % H;                                                                                \
        if (!scr || s->nq == 0 || s->nk == 0) continue;                                                   \
        geom g = g0;                                                                                      \
        g.L = s->nq; g.S = s->nk; g.Sp = round_up(s->nk, NR);                                             \
        g.q = (const T *)q->data + s->q0 * q->strides[0] + h * q->strides[1];                             \
        g.k = (const T *)k->data + s->k0 * k->strides[0] + h * k->strides[1];                             \
        g.v = (const T *)v->data + s->k0 * v->strides[0] + h * v->strides[1];                             \
        g.out = out + s->q0 * g.orow + h * g.Ev;                                                          \
        run(&g, 0, (g.L + mr - 1) / mr, scr);                                                             \
      }                                                                                                   \
      free(scr);                                                                                          \
    }                                                                                                     \
  }                                                                                                       \
  free(sg);                                                                                               \
  return failed ? ds_fail(DS_ENOMEM, "segment_attention: out of memory for scratch") : DS_OK;             \
}

SEGMENT_KERNEL(f32, float, DS_F32)
SEGMENT_KERNEL(f64, double, DS_F64)
