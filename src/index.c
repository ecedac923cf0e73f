/* index.c: joining and indexing kernels: cat, gather, scatter_add, scatter_reduce, index_select, index_add,
   embedding, one_hot. Index tensors hold 1-based i64 values (Lua's convention); every index is
   range-checked here, since compiled graphs call these kernels without the Lua-side checks. */
#include "internal.h"
#include <stdlib.h>


/* An odometer over a shape that moves a byte offset in up to 3 tensors at once. */
typedef struct {
  int nd, nops;
  int64_t shape[DS_MAXDIM], ix[DS_MAXDIM];
  int64_t st[3][DS_MAXDIM]; /* byte strides per operand (0 on dims an operand does not walk) */
  int64_t off[3];           /* current byte offset per operand */
} walk;

static void walk_init(walk *w, int nd, const int64_t *shape, int nops) {
  memset(w, 0, sizeof *w);
  w->nd = nd; w->nops = nops;
  for (int d = 0; d < nd; d++) w->shape[d] = shape[d];
}
/* operand k walks with tensor t's strides, except on dim skip (pass -1 to skip none) */
static void walk_operand(walk *w, int k, const ds_tensor *t, int skip) {
  int64_t es = ds_dtype_size(t->dtype);
  for (int d = 0; d < w->nd; d++) w->st[k][d] = d == skip ? 0 : t->strides[d] * es;
}
static inline void walk_next(walk *w) {
  for (int d = w->nd - 1; d >= 0; d--) {
    for (int k = 0; k < w->nops; k++) w->off[k] += w->st[k][d];
    if (++w->ix[d] < w->shape[d]) return;
    for (int k = 0; k < w->nops; k++) w->off[k] -= w->st[k][d] * w->shape[d];
    w->ix[d] = 0;
  }
}

static inline void copy_el(char *d, const char *s, int64_t es) {
  if (es == 4) memcpy(d, s, 4); else if (es == 8) memcpy(d, s, 8); else *d = *s;
}
static inline void add_el(char *d, const char *s, int dt) {
  switch (dt) {
    case DS_F32: *(float *)d += *(const float *)s; break;
    case DS_F64: *(double *)d += *(const double *)s; break;
    case DS_I64: *(int64_t *)d = (int64_t)((uint64_t)*(int64_t *)d + (uint64_t)*(const int64_t *)s); break;
    default: *(int32_t *)d = (int32_t)((uint32_t)*(int32_t *)d + (uint32_t)*(const int32_t *)s); break;
  }
}

/* ---- shared checks ---- */
static int check_dtypes(const char *op, int dt, ds_tensor *const *t, int n) {
  for (int k = 0; k < n; k++) {
    if (!t[k]) return ds_fail(DS_EINVAL, "%s: operand %d is missing", op, k);
    if (t[k]->dtype != dt)
      return ds_fail(DS_EINVAL, "%s: operand %d has dtype %s, kernel expects %s", op, k, ds_dtype_name(t[k]->dtype),
                     ds_dtype_name(dt));
  }
  return DS_OK;
}
static int check_index(const char *op, const ds_tensor *ix) {
  if (!ix) return ds_fail(DS_EINVAL, "%s: index is missing", op);
  if (ix->dtype != DS_I64)
    return ds_fail(DS_EINVAL, "%s: index must be an i64 tensor, got %s", op, ds_dtype_name(ix->dtype));
  return DS_OK;
}
/* attrs value a (0-based dim) must name one of ndim dims */
static int get_dim(const char *op, double a, const ds_tensor *x, int *dim) {
  char b[128];
  if (!(a >= 0 && a < x->ndim) || a != (double)(int)a)
    return ds_fail(DS_EINVAL, "%s: dim %g out of range for a %d-d tensor %s", op, a + 1, x->ndim, ds_shape_str(x, b));
  *dim = (int)a;
  return DS_OK;
}
static int out_of_range(const char *op, int64_t v, int dim, int64_t size) {
  return ds_fail(DS_ERANGE, "%s: index %lld out of range for dim %d of size %lld (indices are 1-based)", op,
                 (long long)v, dim + 1, (long long)size);
}
static int same_shape(const ds_tensor *a, const ds_tensor *b) {
  if (a->ndim != b->ndim) return 0;
  for (int d = 0; d < a->ndim; d++) if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}
static int same_view(const ds_tensor *a, const ds_tensor *b) {
  if (a->data != b->data || !same_shape(a, b)) return 0;
  for (int d = 0; d < a->ndim; d++) if (a->shape[d] > 1 && a->strides[d] != b->strides[d]) return 0;
  return 1;
}
/* o = x element by element (same shape, same dtype), skipped when o is x */
static void copy_into(ds_tensor *o, const ds_tensor *x) {
  if (same_view(o, x)) return;
  int64_t es = ds_dtype_size(o->dtype);
  if (ds_tensor_is_contiguous(o) && ds_tensor_is_contiguous(x)) {
    if (o->numel) memmove(o->data, x->data, o->numel * es);
    return;
  }
  walk w; walk_init(&w, o->ndim, o->shape, 2);
  walk_operand(&w, 0, o, -1); walk_operand(&w, 1, x, -1);
  for (int64_t i = 0; i < o->numel; i++, walk_next(&w))
    copy_el((char *)o->data + w.off[0], (const char *)x->data + w.off[1], es);
}

/* ---- cat: out, in_1..in_n; attrs = {dim, n} ---- */
/* plan check (its registry row is KV): a step gives the output and the n inputs attrs[1] names */
int ds_cat_check(int nbuf, const int *dtypes, int nattrs, const double *attrs) {
  (void)dtypes;
  DS_CHECK(nattrs >= 2, "cat: attrs {dim, n} missing");
  double n = attrs[1];
  DS_CHECK(n >= 1 && n <= 4096 && n == (double)(int)n && nbuf == (int)n + 1,
           "cat: step has %d operands, its attrs name %g inputs", nbuf, n);
  return DS_OK;
}
static int cat_impl(ds_tensor *const *t, const double *attrs, int dt) {
  ds_tensor *o = t[0];
  char b1[128], b2[128];
  double nn = attrs[1];
  DS_CHECK(nn >= 1 && nn <= 4096 && nn == (double)(int)nn, "cat: bad input count %g", nn);
  int n = (int)nn, dim = 0, rc;
  if ((rc = check_dtypes("cat", dt, t, n + 1))) return rc;
  DS_CHECK(o->ndim >= 1, "cat: cannot concatenate 0-d tensors");
  if ((rc = get_dim("cat", attrs[0], o, &dim))) return rc;
  int64_t total = 0;
  for (int k = 1; k <= n; k++) {
    const ds_tensor *x = t[k];
    DS_CHECK(x->ndim == o->ndim, "cat: input %d has shape %s, output %s", k, ds_shape_str(x, b1), ds_shape_str(o, b2));
    for (int d = 0; d < o->ndim; d++)
      DS_CHECK(d == dim || x->shape[d] == o->shape[d],
               "cat: input %d has shape %s, output %s (they may differ only in dim %d)", k, ds_shape_str(x, b1),
               ds_shape_str(o, b2), dim + 1);
    total += x->shape[dim];
  }
  DS_CHECK(total == o->shape[dim], "cat: inputs add up to %lld in dim %d, output has %lld", (long long)total, dim + 1,
           (long long)o->shape[dim]);
  int64_t es = ds_dtype_size(dt), outer = 1, inner = es;
  for (int d = 0; d < dim; d++) outer *= o->shape[d];
  for (int d = dim + 1; d < o->ndim; d++) inner *= o->shape[d];
  int64_t start = 0;
  for (int k = 1; k <= n; k++) {
    const ds_tensor *x = t[k];
    if (ds_tensor_is_contiguous(o) && ds_tensor_is_contiguous(x)) {
      int64_t blk = x->shape[dim] * inner, row = o->shape[dim] * inner;
      for (int64_t r = 0; r < outer; r++)
        if (blk) memcpy((char *)o->data + r * row + start * inner, (const char *)x->data + r * blk, blk);
    } else {
      walk w; walk_init(&w, x->ndim, x->shape, 2);
      walk_operand(&w, 0, o, -1); walk_operand(&w, 1, x, -1);
      char *po = (char *)o->data + start * o->strides[dim] * es;
      for (int64_t i = 0; i < x->numel; i++, walk_next(&w))
        copy_el(po + w.off[0], (const char *)x->data + w.off[1], es);
    }
    start += x->shape[dim];
  }
  return DS_OK;
}

/* ---- gather: out, x, index; attrs = {dim}. out[..i..] = x[..index[..i..]..] along dim ---- */
static int gather_impl(ds_tensor *const *t, const double *attrs, int dt) {
  ds_tensor *o = t[0];
  const ds_tensor *x = t[1], *ix = t[2];
  char b1[128], b2[128];
  int dim = 0, rc;
  ds_tensor *const ox[2] = {t[0], t[1]};
  if ((rc = check_dtypes("gather", dt, ox, 2)) || (rc = check_index("gather", ix))) return rc;
  DS_CHECK(x->ndim >= 1 && x->ndim == ix->ndim, "gather: input %s and index %s need the same number of dims (>= 1)",
           ds_shape_str(x, b1), ds_shape_str(ix, b2));
  DS_CHECK(same_shape(o, ix), "gather: output %s does not match index %s", ds_shape_str(o, b1), ds_shape_str(ix, b2));
  if ((rc = get_dim("gather", attrs[0], x, &dim))) return rc;
  for (int d = 0; d < x->ndim; d++)
    DS_CHECK(d == dim || ix->shape[d] <= x->shape[d], "gather: index %s is larger than input %s in dim %d",
             ds_shape_str(ix, b1), ds_shape_str(x, b2), d + 1);
  int64_t es = ds_dtype_size(dt), n = x->shape[dim], sd = x->strides[dim] * es;
  walk w; walk_init(&w, ix->ndim, ix->shape, 3);
  walk_operand(&w, 0, o, -1); walk_operand(&w, 1, x, dim); walk_operand(&w, 2, ix, -1);
  for (int64_t i = 0; i < ix->numel; i++, walk_next(&w)) {
    int64_t v = *(const int64_t *)((const char *)ix->data + w.off[2]);
    if (v < 1 || v > n) return out_of_range("gather", v, dim, n);
    copy_el((char *)o->data + w.off[0], (const char *)x->data + w.off[1] + (v - 1) * sd, es);
  }
  return DS_OK;
}

/* how scatter combines an element already in the output with one of src */
enum { SCATTER_SUM, SCATTER_PROD, SCATTER_AMAX, SCATTER_AMIN, SCATTER_MODES };

/* *d = *d * *s (integers wrap, as add_el's sums) */
static inline void mul_el(char *d, const char *s, int dt) {
  switch (dt) {
    case DS_F32: *(float *)d *= *(const float *)s; break;
    case DS_F64: *(double *)d *= *(const double *)s; break;
    case DS_I64: *(int64_t *)d = (int64_t)((uint64_t)*(int64_t *)d * (uint64_t)*(const int64_t *)s); break;
    default: *(int32_t *)d = (int32_t)((uint32_t)*(int32_t *)d * (uint32_t)*(const int32_t *)s); break;
  }
}
/* *d = the larger (amax) or smaller of *d and s; a NaN on either side wins (as torch's amax) */
static inline void pick_f64(double *d, double s, int want_max) {
  if (s != s || (*d == *d && (want_max ? s > *d : s < *d))) *d = s;
}
static inline void pick_i64(int64_t *d, int64_t s, int want_max) { if (want_max ? s > *d : s < *d) *d = s; }
static inline void pick_el(char *d, const char *s, int dt, int want_max) {
  switch (dt) {
    case DS_F32: { double v = *(float *)d; pick_f64(&v, *(const float *)s, want_max); *(float *)d = (float)v; break; }
    case DS_F64: pick_f64((double *)d, *(const double *)s, want_max); break;
    case DS_I64: pick_i64((int64_t *)d, *(const int64_t *)s, want_max); break;
    default: { int64_t v = *(int32_t *)d; pick_i64(&v, *(const int32_t *)s, want_max); *(int32_t *)d = (int32_t)v; break; }
  }
}
static inline void combine_el(char *d, const char *s, int dt, int mode) {
  if (mode == SCATTER_SUM) add_el(d, s, dt);
  else if (mode == SCATTER_PROD) mul_el(d, s, dt);
  else pick_el(d, s, dt, mode == SCATTER_AMAX);
}

/* ---- scatter_add / scatter_reduce: out, x, index, src; attrs = {dim} / {dim, mode}.
   out = x; out[..index[..i..]..] = combine(out[..], src[..i..]) in src's row-major order ---- */
static int scatter_impl(ds_tensor *const *t, int dt, const char *op, double dim_attr, int mode) {
  ds_tensor *o = t[0];
  const ds_tensor *x = t[1], *ix = t[2], *src = t[3];
  char b1[128], b2[128];
  int dim = 0, rc;
  ds_tensor *const oxs[3] = {t[0], t[1], t[3]};
  if ((rc = check_dtypes(op, dt, oxs, 3)) || (rc = check_index(op, ix))) return rc;
  DS_CHECK(same_shape(o, x), "%s: output %s does not match input %s", op, ds_shape_str(o, b1), ds_shape_str(x, b2));
  DS_CHECK(same_shape(ix, src), "%s: index %s and src %s must have the same shape", op, ds_shape_str(ix, b1),
           ds_shape_str(src, b2));
  DS_CHECK(x->ndim >= 1 && x->ndim == ix->ndim, "%s: input %s and index %s need the same number of dims (>= 1)", op,
           ds_shape_str(x, b1), ds_shape_str(ix, b2));
  if ((rc = get_dim(op, dim_attr, x, &dim))) return rc;
  for (int d = 0; d < x->ndim; d++)
    DS_CHECK(d == dim || ix->shape[d] <= x->shape[d], "%s: index %s is larger than input %s in dim %d", op,
             ds_shape_str(ix, b1), ds_shape_str(x, b2), d + 1);
  int64_t n = x->shape[dim], sd = o->strides[dim] * ds_dtype_size(dt);
  walk w; walk_init(&w, ix->ndim, ix->shape, 3);
  walk_operand(&w, 0, ix, -1); walk_operand(&w, 1, src, -1); walk_operand(&w, 2, o, dim);
  for (int64_t i = 0; i < ix->numel; i++, walk_next(&w)) { /* check all indices before writing */
    int64_t v = *(const int64_t *)((const char *)ix->data + w.off[0]);
    if (v < 1 || v > n) return out_of_range(op, v, dim, n);
  }
  copy_into(o, x);
  walk_init(&w, ix->ndim, ix->shape, 3);
  walk_operand(&w, 0, ix, -1); walk_operand(&w, 1, src, -1); walk_operand(&w, 2, o, dim);
  for (int64_t i = 0; i < ix->numel; i++, walk_next(&w)) {
    int64_t v = *(const int64_t *)((const char *)ix->data + w.off[0]);
    combine_el((char *)o->data + w.off[2] + (v - 1) * sd, (const char *)src->data + w.off[1], dt, mode);
  }
  return DS_OK;
}
static int scatter_add_impl(ds_tensor *const *t, const double *attrs, int dt) {
  return scatter_impl(t, dt, "scatter_add", attrs[0], SCATTER_SUM);
}
static int scatter_reduce_impl(ds_tensor *const *t, const double *attrs, int dt) {
  double m = attrs[1];
  if (!(m >= 0 && m < SCATTER_MODES) || m != (double)(int)m)
    return ds_fail(DS_EINVAL, "scatter_reduce: reduce mode %g is not one of 0 (sum), 1 (prod), 2 (amax), 3 (amin)", m);
  return scatter_impl(t, dt, "scatter_reduce", attrs[0], (int)m);
}

/* Read and check a 0-d or 1-D index (values 1..size) into a fresh array; NULL on error. */
static int64_t *read_index(const char *op, const ds_tensor *ix, int dim, int64_t size, int *rc) {
  char b[128];
  if ((*rc = check_index(op, ix))) return NULL;
  if (ix->ndim > 1) {
    *rc = ds_fail(DS_EINVAL, "%s: index must be 0-d or 1-D, got %s", op, ds_shape_str(ix, b));
    return NULL;
  }
  int64_t m = ix->numel, st = ix->ndim ? ix->strides[0] : 0;
  int64_t *v = malloc((m ? m : 1) * sizeof *v);
  if (!v) { *rc = ds_fail(DS_ENOMEM, "%s: out of memory", op); return NULL; }
  for (int64_t j = 0; j < m; j++) {
    v[j] = ((const int64_t *)ix->data)[j * st];
    if (v[j] < 1 || v[j] > size) { *rc = out_of_range(op, v[j], dim, size); free(v); return NULL; }
  }
  *rc = DS_OK;
  return v;
}

/* x and y agree in every dim but dim, where y has size m */
static int shape_but_dim(const ds_tensor *x, const ds_tensor *y, int dim, int64_t m) {
  if (x->ndim != y->ndim) return 0;
  for (int d = 0; d < x->ndim; d++) if (d == dim ? y->shape[d] != m : y->shape[d] != x->shape[d]) return 0;
  return 1;
}

/* ---- index_select: out, x, index (1-D); attrs = {dim}. out.select(dim, j) = x.select(dim, index[j]) ---- */
static int index_select_impl(ds_tensor *const *t, const double *attrs, int dt) {
  ds_tensor *o = t[0];
  const ds_tensor *x = t[1], *ix = t[2];
  char b1[128], b2[128];
  int dim = 0, rc;
  if ((rc = check_dtypes("index_select", dt, t, 2))) return rc;
  DS_CHECK(x->ndim >= 1, "index_select: input must have at least 1 dim");
  if ((rc = get_dim("index_select", attrs[0], x, &dim))) return rc;
  int64_t *v = read_index("index_select", ix, dim, x->shape[dim], &rc);
  if (!v) return rc;
  if (!shape_but_dim(x, o, dim, ix->numel)) {
    free(v);
    return ds_fail(DS_EINVAL, "index_select: output %s does not fit input %s with %lld indices in dim %d",
                   ds_shape_str(o, b1), ds_shape_str(x, b2), (long long)ix->numel, dim + 1);
  }
  int64_t es = ds_dtype_size(dt);
  if (ds_tensor_is_contiguous(o) && ds_tensor_is_contiguous(x)) {
    int64_t outer = 1, inner = es, n = x->shape[dim], m = ix->numel;
    for (int d = 0; d < dim; d++) outer *= x->shape[d];
    for (int d = dim + 1; d < x->ndim; d++) inner *= x->shape[d];
    for (int64_t r = 0; r < outer; r++)
      for (int64_t j = 0; j < m; j++)
        memcpy((char *)o->data + (r * m + j) * inner, (const char *)x->data + (r * n + v[j] - 1) * inner, inner);
  } else {
    int64_t sd = x->strides[dim] * es;
    walk w; walk_init(&w, o->ndim, o->shape, 2);
    walk_operand(&w, 0, o, -1); walk_operand(&w, 1, x, dim);
    for (int64_t i = 0; i < o->numel; i++, walk_next(&w))
      copy_el((char *)o->data + w.off[0], (const char *)x->data + w.off[1] + (v[w.ix[dim]] - 1) * sd, es);
  }
  free(v);
  return DS_OK;
}

/* ---- index_add: out, x, index (1-D), src; attrs = {dim}.
   out = x; out.select(dim, index[j]) += src.select(dim, j) ---- */
static int index_add_impl(ds_tensor *const *t, const double *attrs, int dt) {
  ds_tensor *o = t[0];
  const ds_tensor *x = t[1], *ix = t[2], *src = t[3];
  char b1[128], b2[128];
  int dim = 0, rc;
  ds_tensor *const oxs[3] = {t[0], t[1], t[3]};
  if ((rc = check_dtypes("index_add", dt, oxs, 3))) return rc;
  DS_CHECK(x->ndim >= 1 && same_shape(o, x), "index_add: output %s does not match input %s (>= 1 dim)",
           ds_shape_str(o, b1), ds_shape_str(x, b2));
  if ((rc = get_dim("index_add", attrs[0], x, &dim))) return rc;
  int64_t *v = read_index("index_add", ix, dim, x->shape[dim], &rc);
  if (!v) return rc;
  if (!shape_but_dim(x, src, dim, ix->numel)) {
    free(v);
    return ds_fail(DS_EINVAL, "index_add: src %s does not fit input %s with %lld indices in dim %d",
                   ds_shape_str(src, b1), ds_shape_str(x, b2), (long long)ix->numel, dim + 1);
  }
  copy_into(o, x);
  int64_t sd = o->strides[dim] * ds_dtype_size(dt);
  walk w; walk_init(&w, src->ndim, src->shape, 2);
  walk_operand(&w, 0, o, dim); walk_operand(&w, 1, src, -1);
  for (int64_t i = 0; i < src->numel; i++, walk_next(&w))
    add_el((char *)o->data + w.off[0] + (v[w.ix[dim]] - 1) * sd, (const char *)src->data + w.off[1], dt);
  free(v);
  return DS_OK;
}

/* ---- embedding: out (..., D), ids (...) i64, weight (V, D). out[..., :] = weight[ids[...], :] ---- */
static int embedding_impl(ds_tensor *const *t, const double *attrs, int dt) {
  ds_tensor *o = t[0];
  const ds_tensor *ids = t[1], *wt = t[2];
  char b1[128], b2[128];
  int rc;
  ds_tensor *const ow[2] = {t[0], t[2]};
  if ((rc = check_dtypes("embedding", dt, ow, 2)) || (rc = check_index("embedding", ids))) return rc;
  DS_CHECK(wt->ndim == 2, "embedding: weight must be 2-D (num_embeddings, dim), got %s", ds_shape_str(wt, b1));
  int nd = ids->ndim, ok = o->ndim == nd + 1 && o->shape[nd] == wt->shape[1];
  for (int d = 0; ok && d < nd; d++) ok = o->shape[d] == ids->shape[d];
  DS_CHECK(ok, "embedding: output %s does not fit ids %s and weight dim %lld", ds_shape_str(o, b1),
           ds_shape_str(ids, b2), (long long)wt->shape[1]);
  int64_t es = ds_dtype_size(dt), V = wt->shape[0], Dm = wt->shape[1];
  int64_t ws0 = wt->strides[0] * es, ws1 = wt->strides[1] * es, os1 = o->strides[nd] * es;
  int rows_contig = (Dm <= 1 || (wt->strides[1] == 1 && o->strides[nd] == 1));
  walk w; walk_init(&w, nd, ids->shape, 2);
  walk_operand(&w, 0, ids, -1);
  for (int d = 0; d < nd; d++) w.st[1][d] = o->strides[d] * es;
  for (int64_t i = 0; i < ids->numel; i++, walk_next(&w)) {
    int64_t v = *(const int64_t *)((const char *)ids->data + w.off[0]);
    if (v < 1 || v > V)
      return ds_fail(DS_ERANGE, "embedding: id %lld out of range for %lld embeddings (ids are 1-based)", (long long)v,
                     (long long)V);
    const char *src = (const char *)wt->data + (v - 1) * ws0;
    char *dst = (char *)o->data + w.off[1];
    if (rows_contig) memcpy(dst, src, Dm * es);
    else for (int64_t j = 0; j < Dm; j++) copy_el(dst + j * os1, src + j * ws1, es);
  }
  return DS_OK;
}

/* ---- one_hot: out (..., C), labels (...) i64; attrs = {num_classes}. out[..., labels[...]] = 1 ---- */
static int one_hot_impl(ds_tensor *const *t, const double *attrs, int dt) {
  ds_tensor *o = t[0];
  const ds_tensor *lab = t[1];
  char b1[128], b2[128];
  int rc;
  if ((rc = check_dtypes("one_hot", dt, t, 1)) || (rc = check_index("one_hot", lab))) return rc;
  int nd = lab->ndim, ok = o->ndim == nd + 1 && (double)o->shape[nd] == attrs[0];
  for (int d = 0; ok && d < nd; d++) ok = o->shape[d] == lab->shape[d];
  DS_CHECK(ok, "one_hot: output %s does not fit labels %s and num_classes %g", ds_shape_str(o, b1),
           ds_shape_str(lab, b2), attrs[0]);
  int64_t es = ds_dtype_size(dt), nc = o->shape[nd], sc = o->strides[nd] * es;
  walk w; walk_init(&w, nd, lab->shape, 2);
  walk_operand(&w, 0, lab, -1);
  for (int d = 0; d < nd; d++) w.st[1][d] = o->strides[d] * es;
  for (int64_t i = 0; i < lab->numel; i++, walk_next(&w)) {
    int64_t v = *(const int64_t *)((const char *)lab->data + w.off[0]);
    if (v < 1 || v > nc)
      return ds_fail(DS_ERANGE, "one_hot: class %lld out of range for %lld classes (classes are 1-based)", (long long)v,
                     (long long)nc);
  }
  walk_init(&w, o->ndim, o->shape, 1);
  walk_operand(&w, 0, o, -1);
  for (int64_t i = 0; i < o->numel; i++, walk_next(&w)) memset((char *)o->data + w.off[0], 0, es);
  walk_init(&w, nd, lab->shape, 2);
  walk_operand(&w, 0, lab, -1);
  for (int d = 0; d < nd; d++) w.st[1][d] = o->strides[d] * es;
  for (int64_t i = 0; i < lab->numel; i++, walk_next(&w)) {
    int64_t v = *(const int64_t *)((const char *)lab->data + w.off[0]);
    char *p = (char *)o->data + w.off[1] + (v - 1) * sc;
    if (dt == DS_F32) *(float *)p = 1.0f; else if (dt == DS_F64) *(double *)p = 1.0; else *(int64_t *)p = 1;
  }
  return DS_OK;
}

#define KERNEL(OP, S, D) int ds_##OP##_##S(ds_tensor *const *t, const double *attrs) { return OP##_impl(t, attrs, D); }
#define ARITH_KERNELS(OP)                                                                                              \
  KERNEL(OP, f32, DS_F32) KERNEL(OP, f64, DS_F64) KERNEL(OP, i64, DS_I64) KERNEL(OP, i32, DS_I32)
#define ALL_KERNELS(OP) ARITH_KERNELS(OP) KERNEL(OP, u8, DS_U8) KERNEL(OP, bool, DS_BOOL)
ALL_KERNELS(cat) ALL_KERNELS(gather) ALL_KERNELS(index_select) ALL_KERNELS(embedding)
ARITH_KERNELS(scatter_add) ARITH_KERNELS(scatter_reduce) ARITH_KERNELS(index_add)
KERNEL(one_hot, i64, DS_I64) KERNEL(one_hot, f32, DS_F32) KERNEL(one_hot, f64, DS_F64)
