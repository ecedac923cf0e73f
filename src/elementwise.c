/* elementwise.c: unary, binary, compare, logic, where, clamp, copy/cast, fill, arange kernels. */
#include "internal.h"
#include "elementwise_ops.h"
#include "elementwise_table.h"


int ds_zero_division; /* elementwise_ops.h: set by an integer x // 0 */
#define ZERO_DIVISION_CHECK(op) \
  if (ds_take_zero_division()) return ds_fail(DS_ERANGE, "%s: ZeroDivisionError: integer division by zero", op)

/* Check dtypes and broadcasting, then run fn over rows of t[0..nops-1] (t[0] is the output). */
static int apply(ds_tensor *const *t, int nops, const char *op, const int *dtypes, ds_row_fn fn, void *ctx) {
  ds_tensor *o = t[0];
  int fast = ds_tensor_is_contiguous(o);
  for (int k = 0; k < nops; k++) {
    if (!t[k] || t[k]->dtype != dtypes[k])
      return ds_fail(DS_EINVAL, "%s: operand %d has dtype %s, kernel expects %s", op, k,
                     t[k] ? ds_dtype_name(t[k]->dtype) : "none", ds_dtype_name(dtypes[k]));
    if (k && (t[k]->numel != o->numel || !ds_tensor_is_contiguous(t[k]))) fast = 0;
  }
  int64_t es[4];
  for (int k = 0; k < nops; k++) es[k] = ds_dtype_size(dtypes[k]);
  char *base[4];
  for (int k = 0; k < nops; k++) base[k] = t[k]->data;
  int64_t st[4][DS_MAXDIM], shape[DS_MAXDIM];
  if (fast) { /* same shape, all contiguous: one flat row */
    shape[0] = o->numel;
    for (int k = 0; k < nops; k++) st[k][0] = 1;
    ds_for_rows(1, shape, nops, base, st, es, fn, ctx, 1);
    ZERO_DIVISION_CHECK(op);
    return DS_OK;
  }
  memcpy(shape, o->shape, sizeof shape);
  memcpy(st[0], o->strides, sizeof st[0]);
  for (int k = 1; k < nops; k++)
    if (!ds_broadcast_strides(o, t[k], st[k])) {
      char b1[128], b2[128];
      return ds_fail(DS_EINVAL, "%s: operand shape %s does not broadcast to %s", op, ds_shape_str(t[k], b1),
          ds_shape_str(o, b2));
    }
  int nd = ds_coalesce(o->ndim, shape, nops, st);
  ds_for_rows(nd, shape, nops, base, st, es, fn, ctx, 1);
  ZERO_DIVISION_CHECK(op);
  return DS_OK;
}

#define UNARY(OP, S, TI, TO, DI, DO) \
  static void row_##OP##_##S(void *ctx, char **p, int64_t n, const int64_t *s) { \
    TO *o = (TO *)p[0]; const TI *a = (const TI *)p[1]; (void)ctx; \
    if (s[0] == 1 && s[1] == 1) { WIDE_RUN_##S(OP, o, a, \
        n) for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(a[i]); } \
    else for (int64_t i = 0; i < n; i++) o[i * s[0]] = el_##OP##_##S(a[i * s[1]]); } \
  int ds_##OP##_##S(ds_tensor *const *t, const double *attrs) { \
    static const int dt[2] = {DO, DI}; (void)attrs; return apply(t, 2, #OP, dt, row_##OP##_##S, NULL); }

#define BINARY_ROW(OP, S, TI, TO) \
  static void row_##OP##_##S(void *ctx, char **p, int64_t n, const int64_t *s) { \
    TO *o = (TO *)p[0]; const TI *a = (const TI *)p[1], *b = (const TI *)p[2]; (void)ctx; \
    if (s[0] == 1 && s[1] == 1 && s[2] == 1) for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(a[i], b[i]); \
    else if (s[0] == 1 && s[1] == 1 && s[2] == 0) { TI y = b[0]; \
        for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(a[i], y); } \
    else if (s[0] == 1 && s[1] == 0 && s[2] == 1) { TI x = a[0]; \
        for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(x, b[i]); } \
    else for (int64_t i = 0; i < n; i++) o[i * s[0]] = el_##OP##_##S(a[i * s[1]], b[i * s[2]]); }
#define BINARY(OP, S, TI, TO, DI, DO) \
  BINARY_ROW(OP, S, TI, TO) \
  int ds_##OP##_##S(ds_tensor *const *t, const double *attrs) { \
    static const int dt[3] = {DO, DI, DI}; (void)attrs; return apply(t, 3, #OP, dt, row_##OP##_##S, NULL); }

/* param: out, a; attrs = {p0, p1} converted to the dtype (clamp's bounds, -inf/+inf when absent) */
#define PARAM(OP, S, T, D) \
  static void row_##OP##_##S(void *ctx, char **p, int64_t n, const int64_t *s) { \
    const T *pp = ctx; T *o = (T *)p[0]; const T *a = (const T *)p[1]; \
    for (int64_t i = 0; i < n; i++) o[i * s[0]] = el_##OP##_##S(a[i * s[1]], pp[0], pp[1]); } \
  int ds_##OP##_##S(ds_tensor *const *t, const double *attrs) { \
    static const int dt[2] = {D, D}; T pp[2] = {CV_TO_##S(attrs[0]), CV_TO_##S(attrs[1])}; \
    return apply(t, 2, #OP, dt, row_##OP##_##S, pp); }

/* where: out, cond (bool), a, b */
#define WHERE(S, T, D) \
  static void row_where_##S(void *ctx, char **p, int64_t n, const int64_t *s) { \
    T *o = (T *)p[0]; const uint8_t *c = (const uint8_t *)p[1]; const T *a = (const T *)p[2], *b = (const T *)p[3]; \
    (void)ctx; for (int64_t i = 0; i < n; i++) o[i * s[0]] = c[i * s[1]] ? a[i * s[2]] : b[i * s[3]]; } \
  int ds_where_##S(ds_tensor *const *t, const double *attrs) { \
    static const int dt[4] = {D, DS_BOOL, D, D}; (void)attrs; return apply(t, 4, "where", dt, row_where_##S, NULL); }

/* copy: out (dtype S), src (any dtype, broadcast to out) -- also the cast kernel (CV, elementwise_ops.h) */
#define COPY_ROW(S, T, SI, TI) \
  static void row_copy_##S##_##SI(void *ctx, char **p, int64_t n, const int64_t *s) { \
    T *o = (T *)p[0]; const TI *a = (const TI *)p[1]; (void)ctx; \
    if (s[0] == 1 && s[1] == 1) for (int64_t i = 0; i < n; i++) o[i] = CV(S, SI, a[i]); \
    else for (int64_t i = 0; i < n; i++) o[i * s[0]] = CV(S, SI, a[i * s[1]]); }
#define COPY_ROWS(S, T) \
  COPY_ROW(S, T, f32, float) COPY_ROW(S, T, f64, double) COPY_ROW(S, T, i64, int64_t) \
  COPY_ROW(S, T, i32, int32_t) COPY_ROW(S, T, u8, uint8_t) COPY_ROW(S, T, bool, uint8_t) \
  COPY_ROW(S, T, bf16, uint16_t) COPY_ROW(S, T, f16, uint16_t) COPY_ROW(S, T, i8, int8_t)
#define COPY(S, T, D) \
  COPY_ROWS(S, T) \
  int ds_copy_##S(ds_tensor *const *t, const double *attrs) { \
    static const ds_row_fn rows[DS_NDTYPES] = {row_copy_##S##_f32, row_copy_##S##_f64, row_copy_##S##_i64, \
        row_copy_##S##_i32, row_copy_##S##_u8, row_copy_##S##_bool, row_copy_##S##_bf16, row_copy_##S##_f16, \
        row_copy_##S##_i8}; \
    (void)attrs; \
    if (!t[1] || t[1]->dtype < 0 || t[1]->dtype >= DS_NDTYPES) return ds_fail(DS_EINVAL, "copy: bad source"); \
    int dt[2] = {D, t[1]->dtype}; return apply(t, 2, "copy", dt, rows[t[1]->dtype], NULL); }

/* one kernel per row of elementwise.def and dtype of that row */
#define EAGER_EW_UNARY(OP, S, T) UNARY(OP, S, T, T, EW_CODE(S), EW_CODE(S))
#define EAGER_EW_PARAM(OP, S, T) PARAM(OP, S, T, EW_CODE(S))
#define EAGER_EW_BINARY(OP, S, T) BINARY(OP, S, T, T, EW_CODE(S), EW_CODE(S))
#define EAGER_EW_COMPARE(OP, S, T) BINARY(OP, S, T, uint8_t, EW_CODE(S), DS_BOOL)
#define EAGER_EW_WHERE(OP, S, T) WHERE(S, T, EW_CODE(S))
#define EAGER_EW_CAST(OP, S, T) COPY(S, T, EW_CODE(S))
#define EW(name, kind, dtypes, cost, flags) dtypes(EAGER_##kind, name)
#include "elementwise.def"
#undef EW
/* each row's dtype list as a bit set of ds_dtype codes (ds_ew_dtypes, ds.h): the Lua op table takes its dtypes
   from here (lua/ds/ops/elementwise.lua) */
#define EW_DTYPE_BIT(OP, S, T) | (1 << EW_CODE(S))
static const int ew_dtypes[] = {
#define EW(name, kind, dtypes, cost, flags) 0 dtypes(EW_DTYPE_BIT, name),
#include "elementwise.def"
#undef EW
};
_Static_assert(sizeof ew_dtypes / sizeof ew_dtypes[0] == EW_OP_COUNT, "one dtype set per row of elementwise.def");
int ds_ew_dtypes(int op) { return op >= 0 && op < EW_OP_COUNT ? ew_dtypes[op] : 0; }

/* the storage-only dtypes (their math runs in f32/i32, dispatch.lua): casts to them */
COPY(bf16, uint16_t, DS_BF16) COPY(f16, uint16_t, DS_F16) COPY(i8, int8_t, DS_I8)

/* fill: out; attrs[0] = value */
#define FILL(S, T, D) \
  static void row_fill_##S(void *ctx, char **p, int64_t n, const int64_t *s) { \
    T v = *(const T *)ctx; T *o = (T *)p[0]; for (int64_t i = 0; i < n; i++) o[i * s[0]] = v; } \
  int ds_fill_##S(ds_tensor *const *t, const double *attrs) { \
    static const int dt[1] = {D}; T v = CV_TO_##S(attrs[0]); return apply(t, 1, "fill", dt, row_fill_##S, &v); }
FILL(f32, float, DS_F32) FILL(f64, double, DS_F64) FILL(i64, int64_t, DS_I64)
FILL(i32, int32_t, DS_I32) FILL(u8, uint8_t, DS_U8) FILL(bool, uint8_t, DS_BOOL)
FILL(bf16, uint16_t, DS_BF16) FILL(f16, uint16_t, DS_F16) FILL(i8, int8_t, DS_I8)

/* arange: out (contiguous 1-D); attrs = {start, step}; value i is start + i * step, computed in double */
#define ARANGE(S, T, D) \
  int ds_arange_##S(ds_tensor *const *t, const double *attrs) { \
    ds_tensor *o = t[0]; \
    DS_CHECK(o && o->dtype == D && ds_tensor_is_contiguous(o), "arange: output must be a contiguous " #S " tensor"); \
    T *p = o->data; for (int64_t i = 0; i < o->numel; i++) p[i] = CV_TO_##S(attrs[0] + (double)i * attrs[1]); \
    return DS_OK; }
ARANGE(f32, float, DS_F32) ARANGE(f64, double, DS_F64) ARANGE(i64, int64_t, DS_I64) ARANGE(i32, int32_t, DS_I32)
