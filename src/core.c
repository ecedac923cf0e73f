/* core.c: errors, tensor structs (new/view/wrap/free), strided iteration, element access, threads. */
#include "internal.h"
#include "lowp.h"
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <omp.h>

static __thread char err_buf[512];

const char *ds_last_error(void) { return err_buf; }
void ds_set_error(const char *msg) { snprintf(err_buf, sizeof err_buf, "%s", msg); }
int ds_fail(int code, const char *fmt, ...) {
  va_list ap; va_start(ap, fmt); vsnprintf(err_buf, sizeof err_buf, fmt, ap); va_end(ap);
  return code;
}

const char *ds_dtype_name(int dtype) {
  static const char *names[DS_NDTYPES] = {"f32", "f64", "i64", "i32", "u8", "bool", "bf16", "f16", "i8"};
  return dtype >= 0 && dtype < DS_NDTYPES ? names[dtype] : "?";
}

int64_t ds_dtype_size(int dtype) {
  static const int64_t sz[DS_NDTYPES] = {4, 8, 8, 4, 1, 1, 2, 2, 1};
  return (dtype >= 0 && dtype < DS_NDTYPES) ? sz[dtype] : 0;
}

const char *ds_shape_str(const ds_tensor *t, char *buf) {
  int n = 0; n += snprintf(buf + n, 128 - n, "(");
  for (int i = 0; i < t->ndim && n < 110; i++)
    n += snprintf(buf + n, 128 - n, i ? ",%lld" : "%lld", (long long)t->shape[i]);
  snprintf(buf + n, 128 - n, ")");
  return buf;
}

/* ---- tensor structs: a small free list avoids malloc per eager op (locked: threads may share libds) ---- */
static ds_tensor *tensor_pool;
static pthread_mutex_t tensor_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static ds_tensor *tensor_struct(void) {
  pthread_mutex_lock(&tensor_pool_lock);
  ds_tensor *t = tensor_pool;
  if (t) tensor_pool = (ds_tensor *)t->data;
  pthread_mutex_unlock(&tensor_pool_lock);
  if (!t) t = malloc(sizeof *t);
  if (t) memset(t, 0, sizeof *t);
  return t;
}

static int set_shape(ds_tensor *t, int dtype, int ndim, const int64_t *shape) {
  if (dtype < 0 || dtype >= DS_NDTYPES) return ds_fail(DS_EINVAL, "unknown dtype code %d", dtype);
  if (ndim < 0 || ndim > DS_MAXDIM) return ds_fail(DS_EINVAL, "tensors have at most %d dims, got %d", DS_MAXDIM, ndim);
  /* extent: the product of the non-zero sizes, so contiguous strides cannot overflow even when numel is 0 */
  int64_t n = 1, extent = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return ds_fail(DS_EINVAL, "negative size %lld in dim %d", (long long)shape[i], i + 1);
    if (shape[i] > 0 && extent > (INT64_C(1) << 50) / shape[i]) return ds_fail(DS_ENOMEM, "size too large");
    if (shape[i] > 0) extent *= shape[i];
    n *= shape[i];
    t->shape[i] = shape[i];
  }
  t->dtype = dtype; t->ndim = ndim; t->numel = n;
  return DS_OK;
}

static void contiguous_strides(ds_tensor *t) {
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) { t->strides[i] = s; s *= t->shape[i]; }
}

ds_tensor *ds_tensor_new(int dtype, int ndim, const int64_t *shape) {
  ds_tensor *t = tensor_struct();
  if (!t) { ds_fail(DS_ENOMEM, "out of memory"); return NULL; }
  if (set_shape(t, dtype, ndim, shape) != DS_OK) { ds_tensor_free(t); return NULL; }
  contiguous_strides(t);
  int64_t bytes = t->numel * ds_dtype_size(dtype), rounded;
  ds_storage *st = malloc(sizeof *st);
  void *p = st ? ds_mem_alloc(bytes, &rounded) : NULL;
  if (!p) {
    free(st); ds_tensor_free(t);
    ds_fail(DS_ENOMEM, "cannot allocate %lld bytes", (long long)bytes);
    return NULL;
  }
  st->data = p; st->nbytes = rounded; st->refcount = 1; st->external = 0;
  t->storage = st; t->data = p;
  return t;
}

int ds_tensor_view_fill(ds_tensor *t, const ds_tensor *src, int ndim, const int64_t *shape, const int64_t *strides,
                        int64_t offset) {
  memset(t, 0, sizeof *t);
  if (!src) return ds_fail(DS_EINVAL, "view: the base tensor has no storage");
  int rc = set_shape(t, src->dtype, ndim, shape);
  if (rc != DS_OK) return rc;
  int64_t es = ds_dtype_size(src->dtype), lo = offset, hi = offset, step, bytes;
  int overflow = offset < 0;
  for (int i = 0; i < ndim; i++) {
    t->strides[i] = strides[i];
    if (shape[i] == 0) { lo = hi = offset; overflow = 0; break; }
    overflow |= __builtin_mul_overflow(strides[i], shape[i] - 1, &step);
    if (step > 0) overflow |= __builtin_add_overflow(hi, step, &hi);
    else overflow |= __builtin_add_overflow(lo, step, &lo);
  }
  if (t->numel > 0 && (overflow || lo < 0 || __builtin_add_overflow(hi, 1, &hi) ||
                       __builtin_mul_overflow(hi, es, &bytes) || bytes > src->storage->nbytes))
    return ds_fail(DS_ERANGE, "view out of the storage's bounds");
  t->offset = offset;
  t->storage = src->storage;
  t->data = (char *)t->storage->data + offset * es;
  return DS_OK;
}

ds_tensor *ds_tensor_view(const ds_tensor *src, int ndim, const int64_t *shape, const int64_t *strides,
                          int64_t offset) {
  ds_tensor *t = tensor_struct();
  if (!t) { ds_fail(DS_ENOMEM, "out of memory"); return NULL; }
  if (ds_tensor_view_fill(t, src, ndim, shape, strides, offset) != DS_OK) {
    t->storage = NULL;
    ds_tensor_free(t);
    return NULL;
  }
  t->storage->refcount++;
  return t;
}

int ds_tensor_init(ds_tensor *t, ds_storage *s, void *data, int64_t nbytes, int dtype, int ndim, const int64_t *shape) {
  memset(t, 0, sizeof *t);
  int rc = set_shape(t, dtype, ndim, shape);
  if (rc != DS_OK) return rc;
  if (t->numel * ds_dtype_size(dtype) > nbytes)
    return ds_fail(DS_ERANGE, "buffer of %lld bytes is too small", (long long)nbytes);
  contiguous_strides(t);
  s->data = data; s->nbytes = nbytes; s->refcount = 1; s->external = 1;
  t->storage = s; t->data = data;
  return DS_OK;
}

ds_tensor *ds_tensor_wrap(void *data, int64_t nbytes, int dtype, int ndim, const int64_t *shape) {
  ds_tensor *t = tensor_struct();
  if (!t) { ds_fail(DS_ENOMEM, "out of memory"); return NULL; }
  if (set_shape(t, dtype, ndim, shape) != DS_OK) { ds_tensor_free(t); return NULL; }
  if (t->numel * ds_dtype_size(dtype) > nbytes) {
    ds_tensor_free(t);
    ds_fail(DS_ERANGE, "buffer of %lld bytes is too small", (long long)nbytes);
    return NULL;
  }
  contiguous_strides(t);
  ds_storage *st = malloc(sizeof *st);
  if (!st) { ds_tensor_free(t); ds_fail(DS_ENOMEM, "out of memory"); return NULL; }
  st->data = data; st->nbytes = nbytes; st->refcount = 1; st->external = 1;
  t->storage = st; t->data = data;
  return t;
}

void ds_tensor_free(ds_tensor *t) {
  if (!t) return;
  ds_storage *st = t->storage;
  if (st && --st->refcount == 0) {
    if (!st->external) ds_mem_release(st->data, st->nbytes);
    free(st);
  }
  pthread_mutex_lock(&tensor_pool_lock);
  t->data = tensor_pool; tensor_pool = t;
  pthread_mutex_unlock(&tensor_pool_lock);
}

int ds_tensor_is_contiguous(const ds_tensor *t) {
  int64_t s = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->strides[i] != s) return 0;
    s *= t->shape[i];
  }
  return 1;
}

/* ---- broadcasting and strided iteration ---- */
int ds_broadcast_strides(const ds_tensor *out, const ds_tensor *src, int64_t *strides) {
  int off = out->ndim - src->ndim;
  if (off < 0) return 0;
  for (int i = 0; i < out->ndim; i++) {
    int j = i - off;
    if (j < 0) { strides[i] = 0; continue; }
    if (src->shape[j] == out->shape[i]) strides[i] = src->shape[j] == 1 ? 0 : src->strides[j];
    else if (src->shape[j] == 1) strides[i] = 0;
    else return 0;
  }
  return 1;
}

int ds_coalesce(int ndim, int64_t *shape, int nops, int64_t strides[][DS_MAXDIM]) {
  if (ndim == 0) { shape[0] = 1; for (int k = 0; k < nops; k++) strides[k][0] = 0; return 1; }
  int nd = 0; /* write index */
  for (int i = 0; i < ndim; i++) {
    if (shape[i] == 1 && ndim > 1) continue;
    if (nd > 0) {
      int ok = 1;
      for (int k = 0; k < nops; k++) if (strides[k][nd - 1] != strides[k][i] * shape[i]) { ok = 0; break; }
      if (ok) {
        shape[nd - 1] *= shape[i];
        for (int k = 0; k < nops; k++) strides[k][nd - 1] = strides[k][i];
        continue;
      }
    }
    shape[nd] = shape[i];
    for (int k = 0; k < nops; k++) strides[k][nd] = strides[k][i];
    nd++;
  }
  if (nd == 0) { shape[0] = 1; for (int k = 0; k < nops; k++) strides[k][0] = 0; nd = 1; }
  return nd;
}

static void rows_range(int ndim, const int64_t *shape, int nops, char **base, int64_t strides[][DS_MAXDIM],
                       const int64_t *elsize, ds_row_fn fn, void *ctx, int64_t r0, int64_t r1) {
  int64_t inner[4]; char *ptrs[4];
  for (int k = 0; k < nops; k++) inner[k] = strides[k][ndim - 1];
  for (int64_t r = r0; r < r1; r++) {
    int64_t rem = r;
    for (int k = 0; k < nops; k++) ptrs[k] = base[k];
    for (int d = ndim - 2; d >= 0; d--) {
      int64_t i = rem % shape[d]; rem /= shape[d];
      for (int k = 0; k < nops; k++) ptrs[k] += i * strides[k][d] * elsize[k];
    }
    fn(ctx, ptrs, shape[ndim - 1], inner);
  }
}

void ds_for_rows(int ndim, const int64_t *shape, int nops, char **base, int64_t strides[][DS_MAXDIM],
                 const int64_t *elsize, ds_row_fn fn, void *ctx, int parallel) {
  int64_t rows = 1;
  for (int d = 0; d < ndim - 1; d++) rows *= shape[d];
  int64_t total = rows * shape[ndim - 1];
  if (total == 0) return;
  if (parallel && total >= DS_PAR_MIN && rows > 1 && ds_team() > 1) {
    double t0 = ds_team_start();
    #pragma omp parallel
    {
      ds_team_arrive(t0);
      int nt = omp_get_num_threads(), id = omp_get_thread_num();
      int64_t r0 = rows * id / nt, r1 = rows * (id + 1) / nt;
      rows_range(ndim, shape, nops, base, strides, elsize, fn, ctx, r0, r1);
    }
    ds_team_done();
  } else if (parallel && total >= DS_PAR_MIN && rows == 1 && ds_team() > 1) {
    /* one long row: split it */
    int64_t n = shape[ndim - 1];
    double t0 = ds_team_start();
    #pragma omp parallel
    {
      ds_team_arrive(t0);
      int nt = omp_get_num_threads(), id = omp_get_thread_num();
      int64_t i0 = n * id / nt, i1 = n * (id + 1) / nt;
      char *ptrs[4]; int64_t inner[4];
      for (int k = 0; k < nops; k++) { inner[k] = strides[k][ndim - 1]; ptrs[k] = base[k] + i0 * inner[k] * elsize[k]; }
      if (i1 > i0) fn(ctx, ptrs, i1 - i0, inner);
    }
    ds_team_done();
  } else {
    rows_range(ndim, shape, nops, base, strides, elsize, fn, ctx, 0, rows);
  }
}

/* ---- threads and BLAS info ---- */
extern char *openblas_get_corename(void);
extern char *openblas_get_config(void);
extern int openblas_get_num_threads(void);
extern void openblas_set_num_threads(int);
void ds_set_num_threads(int n) { if (n < 1) n = 1; ds_team_set(n); openblas_set_num_threads(n); }
int ds_get_num_threads(void) { return ds_team_configured(); }
const char *ds_blas_corename(void) { return openblas_get_corename(); }
const char *ds_blas_config(void) { return openblas_get_config(); }
int ds_blas_num_threads(void) { return openblas_get_num_threads(); }

/* ---- element access ---- */
#define READ_AS(T, p, dtype) \
  ((dtype) == DS_F32 ? (T)*(const float *)(p) : (dtype) == DS_F64 ? (T)*(const double *)(p) : \
   (dtype) == DS_I64 ? (T)*(const int64_t *)(p) : (dtype) == DS_I32 ? (T)*(const int32_t *)(p) : \
   (dtype) == DS_BF16 ? (T)ds_bf16_to_f32(*(const uint16_t *)(p)) : \
   (dtype) == DS_F16 ? (T)ds_f16_to_f32(*(const uint16_t *)(p)) : (dtype) == DS_I8 ? (T)*(const int8_t *)(p) : \
   (T)*(const uint8_t *)(p))

static void write_from_double(void *p, int dtype, double v) {
  switch (dtype) {
    case DS_F32: *(float *)p = (float)v; break;
    case DS_F64: *(double *)p = v; break;
    case DS_I64: *(int64_t *)p = (isfinite(v) && fabs(v) < 9.3e18) ? (int64_t)v : 0; break;
    case DS_I32: *(int32_t *)p = (isfinite(v) && fabs(v) < 2.2e9) ? (int32_t)v : 0; break;
    case DS_U8:
      *(uint8_t *)p =
          (isfinite(v) && v >= 0 && v < 256) ? (uint8_t)v : (uint8_t)(int64_t)(isfinite(v) && fabs(v) < 9e18 ? v : 0);
      break;
    /* bf16/f16 through f32 (double rounding, as torch's c10::BFloat16(double)); i8 wraps like u8 */
    case DS_BF16: *(uint16_t *)p = ds_f32_to_bf16((float)v); break;
    case DS_F16: *(uint16_t *)p = ds_f32_to_f16((float)v); break;
    case DS_I8:
      *(int8_t *)p = (isfinite(v) && v >= -128 && v < 128) ? (int8_t)v
                                                             : (int8_t)(uint8_t)(int64_t)(isfinite(v) && fabs(v) < 9e18 ? v : 0);
      break;
    default: *(uint8_t *)p = v != 0; break;
  }
}

#define FOR_EACH_ELEMENT(t, BODY) do { \
  int64_t idx_[DS_MAXDIM] = {0}; int64_t es_ = ds_dtype_size((t)->dtype); \
  for (int64_t n_ = 0; n_ < (t)->numel; n_++) { \
    int64_t off_ = 0; for (int d_ = 0; d_ < (t)->ndim; d_++) off_ += idx_[d_] * (t)->strides[d_]; \
    char *p_ = (char *)(t)->data + off_ * es_; BODY; \
    for (int d_ = (t)->ndim - 1; d_ >= 0; d_--) { if (++idx_[d_] < (t)->shape[d_]) break; idx_[d_] = 0; } \
  } } while (0)

/* NaNs are read as the one quiet NaN: LuaJIT (GC64) takes a negative NaN with high payload bits for a tagged
   value (nil, a string, a prototype...), so a NaN a file or a bit pattern put in a tensor would reach Lua from
   totable/item as another type, or hang the interpreter in a math function that retries forever. */
int ds_read_flat(const ds_tensor *t, double *out) {
  FOR_EACH_ELEMENT(t, double v_ = READ_AS(double, p_, t->dtype); out[n_] = v_ != v_ ? NAN : v_);
  return DS_OK;
}
int ds_write_flat(ds_tensor *t, const double *in) {
  FOR_EACH_ELEMENT(t, write_from_double(p_, t->dtype, in[n_]));
  return DS_OK;
}
int ds_read_flat_i64(const ds_tensor *t, int64_t *out) {
  FOR_EACH_ELEMENT(t, out[n_] = (t->dtype == DS_F32 || t->dtype == DS_F64 || t->dtype == DS_BF16 || t->dtype == DS_F16)
                                    ? (int64_t)READ_AS(double, p_, t->dtype)
                                                                           : READ_AS(int64_t, p_, t->dtype));
  return DS_OK;
}
int ds_write_flat_i64(ds_tensor *t, const int64_t *in) {
  FOR_EACH_ELEMENT(t, switch (t->dtype) {
    case DS_I64: *(int64_t *)p_ = in[n_]; break;
    case DS_I32: *(int32_t *)p_ = (int32_t)in[n_]; break;
    default: write_from_double(p_, t->dtype, (double)in[n_]); });
  return DS_OK;
}
