/* nn_attention.c: scaled dot-product attention in one kernel, tile by tile: for a few query rows the
   scores (q.k, one FMA chain over E), the mask, softmax and the weighted sum of v (one FMA chain over S),
   with no (L,S) buffer per batch entry; and its segment form for packed sequences of different lengths. */
#include "internal.h"
#include "mathfn.h"
#include <stdlib.h>
#include <string.h>
#include <omp.h>
#include <immintrin.h>

/* Each score is fma(q[i,e], k[j,e], acc) for e = 0 .. E-1 in order from 0, then times scale; the mask
   is applied (bool false or j > i under is_causal: -inf; float: added); softmax takes the exact max,
   exps (ds_expf), their sum in 16 lanes (lane j % 16, lanes added pairwise) and multiplies by 1 / sum;
   each output element is fma(w[i,j], v[j,c], acc) for j = 0 .. S-1 in order (a tile's chains stop after the
   last key any of its rows weighs nonzero when v is finite from there on: the remaining fma(+0, v, acc) = acc
   change nothing; the f32 AVX-512 build also skips exps of 16-key blocks that are all +0, and under a float mask
   the scores of 16-key strips whose bound proves every weight +0 (scores_pruned), as with key padding masked by
   -10000: a padded query costs about its real keys' share). Every element is thus
   one fixed computation: rows do not depend on L, on the tiling, the thread count or the vector width,
   and the AVX-512 build of the tile code (wider vectors, more rows per tile) gives the same bits. A query
   of few rows (a decode step) runs the same sums on k and v in place, without packing them. */
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
   weights (mr x Sp), all zero padded; the largest |k| of each strip of keys (Sp / NR) */
static int64_t scratch_elems(const geom *g, int mr) {
  return g->E * g->Sp + g->S * g->Evp + mr * g->E + mr * g->Sp + g->Sp / NR;
}

/* the element type's fused multiply-add and exp, for the templates */
#define T_FMA(a, b, c) _Generic((a), float: fmaf, default: fma)(a, b, c)
#define T_EXP(x) _Generic((x), float: ds_expf, default: exp)(x)
#define EXPF_ZERO_BELOW -103.972077f   /* ds_expf(x) is +0 for x below this (mathfn.h) */
/* col[e] = element e0 + e of rows 0 .. 15 of k (row stride kr, contiguous columns), rows >= n zero: a 16 x 16
   block transposed in registers (AVX-512 f32 builds) */
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma"), always_inline))
static inline void transpose16_avx512(const float *k, int64_t kr, int n, __m512 col[16]) {
  __m512 r[16], t[16], u[16];
  for (int i = 0; i < 16; i++) r[i] = i < n ? _mm512_loadu_ps(k + i * kr) : _mm512_setzero_ps();
  for (int i = 0; i < 16; i += 2) {       /* 128-bit lane c: (r[i][4c], r[i+1][4c], r[i][4c+1], r[i+1][4c+1]) */
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int g = 0; g < 16; g += 4) {       /* u[g + m], 128-bit lane c: element 4c + m of rows g .. g+3 */
    u[g] = _mm512_shuffle_ps(t[g], t[g + 2], 0x44);
    u[g + 1] = _mm512_shuffle_ps(t[g], t[g + 2], 0xEE);
    u[g + 2] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0x44);
    u[g + 3] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
  }
  for (int m = 0; m < 4; m++) {           /* col[e]: element e of rows 0 .. 15 */
    __m512 x0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x88), x1 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xDD);
    __m512 y0 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x88), y1 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xDD);
    col[m] = _mm512_shuffle_f32x4(x0, y0, 0x88);
    col[8 + m] = _mm512_shuffle_f32x4(x0, y0, 0xDD);
    col[4 + m] = _mm512_shuffle_f32x4(x1, y1, 0x88);
    col[12 + m] = _mm512_shuffle_f32x4(x1, y1, 0xDD);
  }
}

/* scores of n <= 16 keys (rows of k, contiguous columns, row stride kr) for one query row q (column stride qc):
   w[l] = fma(q[e], k[l, e], acc) for e = 0 .. E-1 in order, as in the tile code; 16 x 16 blocks of k are
   transposed in registers (AVX-512 f32 direct path), rows >= n zero; w[n .. 15] are written (w holds Sp) */
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma"), noinline))
static void scores16_avx512(const float *q, int64_t qc, const float *k, int64_t kr, int64_t E, int n, float *w) {
  __m512 acc = _mm512_setzero_ps();
  int64_t e0 = 0;
  for (; e0 + 16 <= E; e0 += 16) {
    __m512 col[16];
    transpose16_avx512(k + e0, kr, n, col);
    for (int e = 0; e < 16; e++) acc = _mm512_fmadd_ps(_mm512_set1_ps(q[(e0 + e) * qc]), col[e], acc);
  }
  _mm512_storeu_ps(w, acc);
  for (int l = 0; l < n; l++)
    for (int64_t e = e0; e < E; e++) w[l] = fmaf(q[e * qc], k[l * kr + e], w[l]);
}

/* kt (E x Sp, row stride Sp) = k^T for rows of k (S x E, row stride kr, contiguous columns), columns >= S zero,
   whole 16 x 16 blocks through registers; km[s] = the largest |k| among strip s's 16 keys (NaN if one is NaN) */
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma"), noinline))
static void pack_kt_avx512(const float *k, int64_t kr, int64_t S, int64_t E, int64_t Sp, float *kt, float *km) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t j0 = 0; j0 < Sp; j0 += 16) {
    int n = (int)(S - j0 < 16 ? S - j0 : 16);
    __m512 mx = _mm512_setzero_ps();
    __mmask16 nan = 0;
    int64_t e0 = 0;
    for (; e0 + 16 <= E; e0 += 16) {
      __m512 col[16];
      transpose16_avx512(k + j0 * kr + e0, kr, n, col);
      for (int e = 0; e < 16; e++) {
        _mm512_storeu_ps(kt + (e0 + e) * Sp + j0, col[e]);
        mx = _mm512_max_ps(_mm512_andnot_ps(sign, col[e]), mx);
        nan |= _mm512_cmp_ps_mask(col[e], col[e], _CMP_UNORD_Q);
      }
    }
    float m = _mm512_reduce_max_ps(mx);
    for (int64_t e = e0; e < E; e++)
      for (int j = 0; j < 16; j++) {
        float x = j < n ? k[(j0 + j) * kr + e] : 0;
        kt[e * Sp + j0 + j] = x;
        if (x != x) nan = 1;
        m = fabsf(x) > m ? fabsf(x) : m;
      }
    km[j0 / 16] = nan ? NAN : m;
  }
}

/* the largest of n <= 16 mask values m[j * mc] (NaN if one is NaN) and sum_e |q[e]| of E values, for the tile
   code's pruned scores (f32 AVX-512 build) */
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma"), noinline))
static double strip_max_avx512(const float *m, int64_t mc, int n) {
  __m512 x = _mm512_set1_ps(-INFINITY);
  if (mc == 1) x = _mm512_mask_loadu_ps(x, (__mmask16)((1u << n) - 1), m);
  else {
    float b[16];
    for (int j = 0; j < 16; j++) b[j] = j < n ? m[j * mc] : -INFINITY;
    x = _mm512_loadu_ps(b);
  }
  if (_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q)) return NAN;
  return _mm512_reduce_max_ps(x);
}
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma"), noinline))
static double abs_sum_avx512(const float *q, int64_t E) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  __m512d a = _mm512_setzero_pd(), b = _mm512_setzero_pd();
  int64_t e = 0;
  for (; e + 16 <= E; e += 16) {
    __m512 v = _mm512_andnot_ps(sign, _mm512_loadu_ps(q + e));
    a = _mm512_add_pd(a, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    b = _mm512_add_pd(b, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  }
  double s = _mm512_reduce_add_pd(_mm512_add_pd(a, b));
  for (; e < E; e++) s += fabs((double)q[e]);
  return s;
}

/* the f32 softmax of a row of scores w (Sp columns) in place, in the tile code's order (softmax_row: w * scale,
   + the mask, -inf from S on; the lanes' max, ds_expf, 16 lane sums added pairwise, 1 / sum) on AVX-512
   registers; fm: a contiguous float mask row or NULL; prepped: w is already scaled and masked (other masks).
   Whole 16-column blocks whose exps are all +0 (every w - max below EXPF_ZERO_BELOW) are set to +0 without
   them. Returns the end (<= S) of the last block whose exps were computed: every weight from there on is +0. */
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma"), noinline))
static int64_t softmax_f32_avx512(float *w, int64_t S, int64_t Sp, float scale, const float *fm, int prepped) {
  const __m512 ninf = _mm512_set1_ps(-INFINITY), vs = _mm512_set1_ps(scale);
  __m512 m = ninf;
  for (int64_t j = 0; j < Sp; j += LANES) {
    __m512 x = _mm512_loadu_ps(w + j);
    if (!prepped) {
      __mmask16 in = S - j >= LANES ? 0xffff : S - j > 0 ? (__mmask16)((1u << (S - j)) - 1) : 0;
      x = _mm512_mul_ps(x, vs);
      if (fm) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(in, fm + j));
      x = _mm512_mask_blend_ps(in, ninf, x);
      _mm512_storeu_ps(w + j, x);
    }
    m = _mm512_max_ps(x, m);   /* x > m ? x : m: no lane is NaN */
  }
  /* the tree of the tile code: lane l against lane l + h, h = 8, 4, 2, 1 (a max is exact: any order) */
  float mx = _mm512_reduce_max_ps(m);
  const __m512 vmx = _mm512_set1_ps(mx), below = _mm512_set1_ps(EXPF_ZERO_BELOW);
  __m512 sum = _mm512_setzero_ps();
  int64_t end = 0;
  for (int64_t j = 0; j < Sp; j += LANES) {
    __m512 d = _mm512_sub_ps(_mm512_loadu_ps(w + j), vmx);
    if (!_mm512_cmp_ps_mask(d, below, _CMP_NLT_UQ)) {   /* all below (NaN is not) */
      _mm512_storeu_ps(w + j, _mm512_setzero_ps());
      continue;
    }
    float x[LANES];
    _mm512_storeu_ps(x, d);
    for (int l = 0; l < LANES; l++) x[l] = ds_expf(x[l]);
    __m512 e = _mm512_loadu_ps(x);
    _mm512_storeu_ps(w + j, e);
    sum = _mm512_add_ps(sum, e);
    end = j + LANES;
  }
  /* lane l += lane l + h for h = 8, 4, 2, 1, as the tile code adds them */
  __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(sum),
                            _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sum), 1)));
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
  const __m512 rs = _mm512_set1_ps(1 / _mm_cvtss_f32(s1));
  end = end < S ? end : S;
  int64_t j = 0;
  for (; j + LANES <= end; j += LANES) _mm512_storeu_ps(w + j, _mm512_mul_ps(_mm512_loadu_ps(w + j), rs));
  if (j < end) {
    __mmask16 k = (__mmask16)((1u << (end - j)) - 1);
    _mm512_mask_storeu_ps(w + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, w + j), rs));
  }
  return end;
}

#include "nn_attention_decode.h"

#define KERNELS "nn_attention_tiles.h"
#include "float_kernels.h"

/* rows per tile of each build: AVX-512 keeps 8 rows x 16 lanes in 8 zmm accumulators, AVX2 4 rows in
   8 ymm pairs; f64 4 rows */
#define MR_AVX512 8
#define MR_AVX2 4
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma")))
static void units_f32_avx512(const geom *g, int64_t u0, int64_t u1, float *scr) {
  units_f32(g, MR_AVX512, 1, u0, u1, scr);
}
static void units_f32_avx2(const geom *g, int64_t u0, int64_t u1, float *scr) {
  units_f32(g, MR_AVX2, 0, u0, u1, scr);
}
static void units_f64_any(const geom *g, int64_t u0, int64_t u1, double *scr) {
  units_f64(g, MR_AVX2, 0, u0, u1, scr);
}

/* queries of few rows (a decode step's one) skip the packing: each build's direct runner and the most rows
   it takes (the f32 AVX-512 build, whose scores transpose k in registers, beats the tiles up to 4) */
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma")))
static void direct_f32_avx512(const geom *g, int64_t u0, int64_t u1, float *w) {
  if (!decode_units_f32(g, u0, u1, w)) direct_f32(g, 1, u0, u1, w);   /* no mask: nn_attention_decode.h */
}
static void direct_f32_avx2(const geom *g, int64_t u0, int64_t u1, float *w) { direct_f32(g, 0, u0, u1, w); }
static void direct_f64_any(const geom *g, int64_t u0, int64_t u1, double *w) { direct_f64(g, 0, u0, u1, w); }
static int64_t pick_direct_f32(void (**run)(const geom *, int64_t, int64_t, float *)) {
  if (ds_isa() == DS_ISA_AVX512) { *run = direct_f32_avx512; return 4; }
  *run = direct_f32_avx2;
  return 1;
}
/* a one-row segment's heads at once (segment_unit): the f32 AVX-512 build's decode_heads_f32 */
static int (*pick_heads_f32(void))(const geom *, int64_t, int64_t, int64_t, int64_t, float *) {
  return ds_isa() == DS_ISA_AVX512 ? decode_heads_f32 : NULL;
}
static int (*pick_heads_f64(void))(const geom *, int64_t, int64_t, int64_t, int64_t, double *) { return NULL; }
static int64_t pick_direct_f64(void (**run)(const geom *, int64_t, int64_t, double *)) {
  *run = direct_f64_any;
  return 1;
}

/* each build's rows per tile and its tile runner, chosen once per call */
static int pick_f32(void (**run)(const geom *, int64_t, int64_t, float *)) {
  if (ds_isa() == DS_ISA_AVX512) { *run = units_f32_avx512; return MR_AVX512; }
  *run = units_f32_avx2;
  return MR_AVX2;
}
static int pick_f64(void (**run)(const geom *, int64_t, int64_t, double *)) { *run = units_f64_any; return MR_AVX2; }

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

#define KERNELS "nn_attention_kernels.h"
#include "float_kernels.h"

