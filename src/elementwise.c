/* elementwise.c: unary, binary, compare, logic, where, clamp, copy/cast, fill, arange kernels. */
#include "internal.h"
#include "elementwise_ops.h"

static const char *dtname[] = {"f32", "f64", "i64", "i32", "u8", "bool"};

/* Check dtypes and broadcasting, then run fn over rows of t[0..nops-1] (t[0] is the output). */
static int apply(ds_tensor *const *t, int nops, const char *op, const int *dtypes, ds_row_fn fn, void *ctx) {
  ds_tensor *o = t[0];
  int fast = ds_is_contig(o);
  for (int k = 0; k < nops; k++) {
    if (!t[k] || t[k]->dtype != dtypes[k])
      return ds_fail(DS_EINVAL, "%s: operand %d has dtype %s, kernel expects %s", op, k,
                     t[k] ? dtname[t[k]->dtype] : "none", dtname[dtypes[k]]);
    if (k && (t[k]->numel != o->numel || !ds_is_contig(t[k]))) fast = 0;
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
    return DS_OK;
  }
  memcpy(shape, o->shape, sizeof shape);
  memcpy(st[0], o->strides, sizeof st[0]);
  for (int k = 1; k < nops; k++)
    if (!ds_broadcast_strides(o, t[k], st[k])) {
      char b1[128], b2[128];
      return ds_fail(DS_EINVAL, "%s: operand shape %s does not broadcast to %s", op, ds_shape_str(t[k], b1), ds_shape_str(o, b2));
    }
  int nd = ds_coalesce(o->ndim, shape, nops, st);
  ds_for_rows(nd, shape, nops, base, st, es, fn, ctx, 1);
  return DS_OK;
}

#define UNARY(OP, S, TI, TO, DI, DO) \
  static void row_##OP##_##S(void *ctx, char **p, int64_t n, const int64_t *s) { \
    TO *o = (TO *)p[0]; const TI *a = (const TI *)p[1]; (void)ctx; \
    if (s[0] == 1 && s[1] == 1) for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(a[i]); \
    else for (int64_t i = 0; i < n; i++) o[i * s[0]] = el_##OP##_##S(a[i * s[1]]); } \
  int ds_##OP##_##S(ds_tensor *const *t, const double *attrs) { \
    static const int dt[2] = {DO, DI}; (void)attrs; return apply(t, 2, #OP, dt, row_##OP##_##S, NULL); }

#define BINARY(OP, S, TI, TO, DI, DO) \
  static void row_##OP##_##S(void *ctx, char **p, int64_t n, const int64_t *s) { \
    TO *o = (TO *)p[0]; const TI *a = (const TI *)p[1], *b = (const TI *)p[2]; (void)ctx; \
    if (s[0] == 1 && s[1] == 1 && s[2] == 1) for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(a[i], b[i]); \
    else if (s[0] == 1 && s[1] == 1 && s[2] == 0) { TI y = b[0]; for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(a[i], y); } \
    else if (s[0] == 1 && s[1] == 0 && s[2] == 1) { TI x = a[0]; for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(x, b[i]); } \
    else for (int64_t i = 0; i < n; i++) o[i * s[0]] = el_##OP##_##S(a[i * s[1]], b[i * s[2]]); } \
  int ds_##OP##_##S(ds_tensor *const *t, const double *attrs) { \
    static const int dt[3] = {DO, DI, DI}; (void)attrs; return apply(t, 3, #OP, dt, row_##OP##_##S, NULL); }

#define FLOAT_UNARY(OP) UNARY(OP, f32, float, float, DS_F32, DS_F32) UNARY(OP, f64, double, double, DS_F64, DS_F64)
FLOAT_UNARY(exp) FLOAT_UNARY(log) FLOAT_UNARY(sqrt) FLOAT_UNARY(rsqrt) FLOAT_UNARY(sin) FLOAT_UNARY(cos)
FLOAT_UNARY(tanh) FLOAT_UNARY(erf) FLOAT_UNARY(sigmoid) FLOAT_UNARY(silu) FLOAT_UNARY(gelu) FLOAT_UNARY(gelu_tanh)

#define SIGNED_UNARY(OP) FLOAT_UNARY(OP) UNARY(OP, i64, int64_t, int64_t, DS_I64, DS_I64) UNARY(OP, i32, int32_t, int32_t, DS_I32, DS_I32)
SIGNED_UNARY(abs) SIGNED_UNARY(neg) SIGNED_UNARY(relu) SIGNED_UNARY(sign)
UNARY(logical_not, bool, uint8_t, uint8_t, DS_BOOL, DS_BOOL)

#define ARITH_ALL(OP) \
  BINARY(OP, f32, float, float, DS_F32, DS_F32) BINARY(OP, f64, double, double, DS_F64, DS_F64) \
  BINARY(OP, i64, int64_t, int64_t, DS_I64, DS_I64) BINARY(OP, i32, int32_t, int32_t, DS_I32, DS_I32)
ARITH_ALL(add) ARITH_ALL(sub) ARITH_ALL(mul) ARITH_ALL(div) ARITH_ALL(pow) ARITH_ALL(maximum) ARITH_ALL(minimum)
BINARY(add, u8, uint8_t, uint8_t, DS_U8, DS_U8) BINARY(sub, u8, uint8_t, uint8_t, DS_U8, DS_U8)
BINARY(mul, u8, uint8_t, uint8_t, DS_U8, DS_U8) BINARY(maximum, u8, uint8_t, uint8_t, DS_U8, DS_U8)
BINARY(minimum, u8, uint8_t, uint8_t, DS_U8, DS_U8)

#define CMP_ALL(OP) \
  BINARY(OP, f32, float, uint8_t, DS_F32, DS_BOOL) BINARY(OP, f64, double, uint8_t, DS_F64, DS_BOOL) \
  BINARY(OP, i64, int64_t, uint8_t, DS_I64, DS_BOOL) BINARY(OP, i32, int32_t, uint8_t, DS_I32, DS_BOOL) \
  BINARY(OP, u8, uint8_t, uint8_t, DS_U8, DS_BOOL) BINARY(OP, bool, uint8_t, uint8_t, DS_BOOL, DS_BOOL)
CMP_ALL(lt) CMP_ALL(le) CMP_ALL(gt) CMP_ALL(ge) CMP_ALL(eq) CMP_ALL(ne)
BINARY(logical_and, bool, uint8_t, uint8_t, DS_BOOL, DS_BOOL)
BINARY(logical_or, bool, uint8_t, uint8_t, DS_BOOL, DS_BOOL)
BINARY(logical_xor, bool, uint8_t, uint8_t, DS_BOOL, DS_BOOL)

/* where: out, cond (bool), a, b */
#define WHERE(S, T, D) \
  static void row_where_##S(void *ctx, char **p, int64_t n, const int64_t *s) { \
    T *o = (T *)p[0]; const uint8_t *c = (const uint8_t *)p[1]; const T *a = (const T *)p[2], *b = (const T *)p[3]; (void)ctx; \
    for (int64_t i = 0; i < n; i++) o[i * s[0]] = c[i * s[1]] ? a[i * s[2]] : b[i * s[3]]; } \
  int ds_where_##S(ds_tensor *const *t, const double *attrs) { \
    static const int dt[4] = {D, DS_BOOL, D, D}; (void)attrs; return apply(t, 4, "where", dt, row_where_##S, NULL); }
WHERE(f32, float, DS_F32) WHERE(f64, double, DS_F64) WHERE(i64, int64_t, DS_I64)
WHERE(i32, int32_t, DS_I32) WHERE(u8, uint8_t, DS_U8) WHERE(bool, uint8_t, DS_BOOL)

/* clamp: out, a; attrs = {lo, hi} (-inf/+inf when absent), converted to the dtype */
#define CLAMP(S, T, D, CONV) \
  static void row_clamp_##S(void *ctx, char **p, int64_t n, const int64_t *s) { \
    const T *lh = ctx; T *o = (T *)p[0]; const T *a = (const T *)p[1]; \
    for (int64_t i = 0; i < n; i++) o[i * s[0]] = el_clamp_##S(a[i * s[1]], lh[0], lh[1]); } \
  int ds_clamp_##S(ds_tensor *const *t, const double *attrs) { \
    static const int dt[2] = {D, D}; T lh[2] = {CONV(attrs[0]), CONV(attrs[1])}; \
    return apply(t, 2, "clamp", dt, row_clamp_##S, lh); }
CLAMP(f32, float, DS_F32, ID_F32) CLAMP(f64, double, DS_F64, ID_F64)
CLAMP(i64, int64_t, DS_I64, ds_f2i64) CLAMP(i32, int32_t, DS_I32, ds_f2i32) CLAMP(u8, uint8_t, DS_U8, ds_f2u8)

/* copy: out (dtype S), src (any dtype, broadcast to out) -- also the cast kernel (CV_TO_*, elementwise_ops.h) */
#define COPY_ROW(S, T, SI, TI) \
  static void row_copy_##S##_##SI(void *ctx, char **p, int64_t n, const int64_t *s) { \
    T *o = (T *)p[0]; const TI *a = (const TI *)p[1]; (void)ctx; \
    if (s[0] == 1 && s[1] == 1) for (int64_t i = 0; i < n; i++) o[i] = CV_TO_##S(a[i]); \
    else for (int64_t i = 0; i < n; i++) o[i * s[0]] = CV_TO_##S(a[i * s[1]]); }
/* integer -> integer copies must not go through double (i64 precision) */
#define CV_INT(T, x) ((T)(x))
#define COPY(S, T, D) \
  COPY_ROW(S, T, f32, float) COPY_ROW(S, T, f64, double) COPY_ROW(S, T, u8, uint8_t) COPY_ROW(S, T, bool, uint8_t) \
  static void row_copy_##S##_i64(void *ctx, char **p, int64_t n, const int64_t *s) { \
    T *o = (T *)p[0]; const int64_t *a = (const int64_t *)p[1]; (void)ctx; \
    for (int64_t i = 0; i < n; i++) { int64_t v = a[i * s[1]]; o[i * s[0]] = D == DS_F32 ? (T)(float)v : D == DS_F64 ? (T)(double)v : D == DS_BOOL ? (T)(v != 0) : D == DS_U8 ? (T)(uint8_t)v : (T)v; } } \
  static void row_copy_##S##_i32(void *ctx, char **p, int64_t n, const int64_t *s) { \
    T *o = (T *)p[0]; const int32_t *a = (const int32_t *)p[1]; (void)ctx; \
    for (int64_t i = 0; i < n; i++) { int32_t v = a[i * s[1]]; o[i * s[0]] = D == DS_BOOL ? (T)(v != 0) : D == DS_U8 ? (T)(uint8_t)v : (T)v; } } \
  int ds_copy_##S(ds_tensor *const *t, const double *attrs) { \
    static const ds_row_fn rows[6] = {row_copy_##S##_f32, row_copy_##S##_f64, row_copy_##S##_i64, row_copy_##S##_i32, row_copy_##S##_u8, row_copy_##S##_bool}; \
    (void)attrs; if (!t[1] || t[1]->dtype < 0 || t[1]->dtype > DS_BOOL) return ds_fail(DS_EINVAL, "copy: bad source"); \
    int dt[2] = {D, t[1]->dtype}; return apply(t, 2, "copy", dt, rows[t[1]->dtype], NULL); }
COPY(f32, float, DS_F32) COPY(f64, double, DS_F64) COPY(i64, int64_t, DS_I64)
COPY(i32, int32_t, DS_I32) COPY(u8, uint8_t, DS_U8) COPY(bool, uint8_t, DS_BOOL)

/* fill: out; attrs[0] = value */
#define FILL(S, T, D) \
  static void row_fill_##S(void *ctx, char **p, int64_t n, const int64_t *s) { \
    T v = *(const T *)ctx; T *o = (T *)p[0]; for (int64_t i = 0; i < n; i++) o[i * s[0]] = v; } \
  int ds_fill_##S(ds_tensor *const *t, const double *attrs) { \
    static const int dt[1] = {D}; T v = CV_TO_##S(attrs[0]); return apply(t, 1, "fill", dt, row_fill_##S, &v); }
FILL(f32, float, DS_F32) FILL(f64, double, DS_F64) FILL(i64, int64_t, DS_I64)
FILL(i32, int32_t, DS_I32) FILL(u8, uint8_t, DS_U8) FILL(bool, uint8_t, DS_BOOL)

/* arange: out (contiguous 1-D); attrs = {start, step}; value i is start + i * step, computed in double */
#define ARANGE(S, T, D) \
  int ds_arange_##S(ds_tensor *const *t, const double *attrs) { \
    ds_tensor *o = t[0]; \
    DS_CHECK(o && o->dtype == D && ds_is_contig(o), "arange: output must be a contiguous " #S " tensor"); \
    T *p = o->data; for (int64_t i = 0; i < o->numel; i++) p[i] = CV_TO_##S(attrs[0] + (double)i * attrs[1]); \
    return DS_OK; }
ARANGE(f32, float, DS_F32) ARANGE(f64, double, DS_F64) ARANGE(i64, int64_t, DS_I64) ARANGE(i32, int32_t, DS_I32)
