/* index_copy.c: index_copy in place -- x.select(dim, index[j]) = src.select(dim, j) for each j, any dtype (bytes
   copied), any strides; indices 1-based and range-checked before any write; repeated indices: the last wins. */
#include "internal.h"
#include <string.h>

/* t[0] = x (written in place), t[1] = index (1-D i64, m entries), t[2] = src (x's shape with m in dim); attrs = {dim} */
static int index_copy(ds_tensor *const *t, const double *attrs, int dt) {
  ds_tensor *x = t[0], *ix = t[1], *src = t[2];
  char b1[128], b2[128];
  DS_CHECK(x && ix && src, "index_copy_: missing operand");
  DS_CHECK(x->dtype == dt && src->dtype == dt, "index_copy_: x and src must be %s, got %s and %s", ds_dtype_name(dt),
           ds_dtype_name(x->dtype), ds_dtype_name(src->dtype));
  DS_CHECK(ix->dtype == DS_I64 && ix->ndim <= 1, "index_copy_: index must be a 1-D i64 tensor");
  int dim = (int)attrs[0];
  DS_CHECK(attrs[0] == dim && dim >= 0 && dim < x->ndim, "index_copy_: dim %g out of range for %s", attrs[0] + 1,
           ds_shape_str(x, b1));
  int ok = src->ndim == x->ndim && src->shape[dim] == ix->numel;
  for (int d = 0; ok && d < x->ndim; d++) if (d != dim && src->shape[d] != x->shape[d]) ok = 0;
  DS_CHECK(ok, "index_copy_: src %s must be x %s with %lld in dim %d", ds_shape_str(src, b2), ds_shape_str(x, b1),
           (long long)ix->numel, dim + 1);
  DS_CHECK(x->storage != ix->storage && x->storage != src->storage, "index_copy_: x shares storage with an operand");
  const int64_t *iv = (const int64_t *)ix->data;
  int64_t istride = ix->ndim ? ix->strides[0] : 0, size = x->shape[dim];
  for (int64_t j = 0; j < ix->numel; j++) {
    int64_t v = iv[j * istride];
    if (v < 1 || v > size)
      return ds_fail(DS_ERANGE, "index_copy_: index %lld out of range for dim %d of size %lld (indices are 1-based)",
                     (long long)v, dim + 1, (long long)size);
  }
  /* the slice: every dim but dim, walked with a counter per dim; a last dim other than dim, unit-stride in x and
     src, is copied as one run */
  int last = x->ndim - 1, inner = last != dim && x->strides[last] == 1 && src->strides[last] == 1 ? last : -1;
  int64_t es = ds_dtype_size(dt), slice = ix->numel ? src->numel / ix->numel : 0, pos[DS_MAXDIM] = { 0 };
  int64_t run = inner >= 0 ? x->shape[last] : 1;
  for (int64_t e = 0; e < slice; e += run) {
    int64_t xo = 0, so = 0;
    for (int d = 0; d < x->ndim; d++)
      if (d != dim && d != inner) { xo += pos[d] * x->strides[d]; so += pos[d] * src->strides[d]; }
    for (int64_t j = 0; j < ix->numel; j++)
      memcpy((char *)x->data + (xo + (iv[j * istride] - 1) * x->strides[dim]) * es,
             (const char *)src->data + (so + j * src->strides[dim]) * es, (size_t)(run * es));
    for (int d = x->ndim - 1; d >= 0; d--) {
      if (d == dim || d == inner) continue;
      if (++pos[d] < x->shape[d]) break;
      pos[d] = 0;
    }
  }
  return DS_OK;
}

int ds_index_copy_f32(ds_tensor *const *t, const double *attrs) { return index_copy(t, attrs, DS_F32); }
int ds_index_copy_f64(ds_tensor *const *t, const double *attrs) { return index_copy(t, attrs, DS_F64); }
int ds_index_copy_i64(ds_tensor *const *t, const double *attrs) { return index_copy(t, attrs, DS_I64); }
int ds_index_copy_i32(ds_tensor *const *t, const double *attrs) { return index_copy(t, attrs, DS_I32); }
int ds_index_copy_u8(ds_tensor *const *t, const double *attrs) { return index_copy(t, attrs, DS_U8); }
int ds_index_copy_bool(ds_tensor *const *t, const double *attrs) { return index_copy(t, attrs, DS_BOOL); }
