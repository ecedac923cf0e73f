/* fused.c: one kernel that runs a chain of elementwise ops (a small bytecode) tile by tile in cache,
   calling the per-element functions of elementwise_ops.h, so results equal the unfused ops bit for bit;
   and matmul epilogues (the same matmul kernel, then a fused chain over its cache-hot output). */
#include "internal.h"
#include "elementwise_ops.h"
#include <omp.h>

/* Program (attrs): nout, nin, nregs, ninstr, outreg[nout], then ninstr x {op, dtype, dst, a, b, c}.
   Operands a/b/c: >= 0 register, < 0 input -(v+1). Clamp: b, c are the bounds (numbers).
   Tensors: nout outputs (one shape), then nin inputs (broadcast to it). */
#define TILE 512
#define MAXREG 32
#define MAXINS 256
#define MAXOPS 64
#define WIDTH 6

enum {
  OP_EXP, OP_LOG, OP_SQRT, OP_RSQRT, OP_SIN, OP_COS, OP_TANH, OP_SIGMOID, OP_SILU, OP_ERF, OP_GELU, OP_GELU_TANH,
  OP_ABS, OP_NEG, OP_RELU, OP_SIGN, OP_LOGICAL_NOT,
  OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_MAXIMUM, OP_MINIMUM,
  OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE, OP_LOGICAL_AND, OP_LOGICAL_OR, OP_LOGICAL_XOR,
  OP_WHERE, OP_CLAMP, OP_CAST, OP_COUNT
};

typedef void (*unary_fn)(void *o, const void *a, int64_t sa, int64_t n);
typedef void (*binary_fn)(void *o, const void *a, int64_t sa, const void *b, int64_t sb, int64_t n);
typedef void (*where_fn)(void *o, const void *c, int64_t sc, const void *a, int64_t sa, const void *b, int64_t sb, int64_t n);
typedef void (*clamp_fn)(void *o, const void *a, int64_t sa, int64_t n, double lo, double hi);

/* ---- loops over one tile (contiguous output; operands contiguous, scalar or strided) ---- */
#define U(OP, S, TI, TO) \
  static void u_##OP##_##S(void *o_, const void *a_, int64_t sa, int64_t n) { \
    TO *o = o_; const TI *a = a_; \
    if (sa == 1) for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(a[i]); \
    else for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(a[i * sa]); }
#define B(OP, S, TI, TO) \
  static void b_##OP##_##S(void *o_, const void *a_, int64_t sa, const void *b_, int64_t sb, int64_t n) { \
    TO *o = o_; const TI *a = a_, *b = b_; \
    if (sa == 1 && sb == 1) for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(a[i], b[i]); \
    else if (sa == 1 && sb == 0) { TI y = b[0]; for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(a[i], y); } \
    else if (sa == 0 && sb == 1) { TI x = a[0]; for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(x, b[i]); } \
    else for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(a[i * sa], b[i * sb]); }

#define FLOAT_U(OP) U(OP, f32, float, float) U(OP, f64, double, double)
FLOAT_U(exp) FLOAT_U(log) FLOAT_U(sqrt) FLOAT_U(rsqrt) FLOAT_U(sin) FLOAT_U(cos) FLOAT_U(tanh)
FLOAT_U(sigmoid) FLOAT_U(silu) FLOAT_U(erf) FLOAT_U(gelu) FLOAT_U(gelu_tanh)
#define SIGNED_U(OP) FLOAT_U(OP) U(OP, i64, int64_t, int64_t) U(OP, i32, int32_t, int32_t)
SIGNED_U(abs) SIGNED_U(neg) SIGNED_U(relu) SIGNED_U(sign)
U(logical_not, bool, uint8_t, uint8_t)

#define ARITH4(OP) B(OP, f32, float, float) B(OP, f64, double, double) B(OP, i64, int64_t, int64_t) B(OP, i32, int32_t, int32_t)
#define ARITH5(OP) ARITH4(OP) B(OP, u8, uint8_t, uint8_t)
ARITH5(add) ARITH5(sub) ARITH5(mul) ARITH4(div) ARITH4(pow) ARITH5(maximum) ARITH5(minimum)
#define CMP(OP) B(OP, f32, float, uint8_t) B(OP, f64, double, uint8_t) B(OP, i64, int64_t, uint8_t) \
  B(OP, i32, int32_t, uint8_t) B(OP, u8, uint8_t, uint8_t) B(OP, bool, uint8_t, uint8_t)
CMP(lt) CMP(le) CMP(gt) CMP(ge) CMP(eq) CMP(ne)
B(logical_and, bool, uint8_t, uint8_t) B(logical_or, bool, uint8_t, uint8_t) B(logical_xor, bool, uint8_t, uint8_t)

#define W(S, T) \
  static void w_##S(void *o_, const void *c_, int64_t sc, const void *a_, int64_t sa, const void *b_, int64_t sb, int64_t n) { \
    T *o = o_; const uint8_t *c = c_; const T *a = a_, *b = b_; \
    for (int64_t i = 0; i < n; i++) o[i] = c[i * sc] ? a[i * sa] : b[i * sb]; }
W(f32, float) W(f64, double) W(i64, int64_t) W(i32, int32_t) W(u8, uint8_t) W(bool, uint8_t)

/* clamp bounds are converted to the dtype exactly as ds_clamp_<dtype> does */
#define CL(S, T, CONV) \
  static void c_##S(void *o_, const void *a_, int64_t sa, int64_t n, double lo_, double hi_) { \
    T *o = o_; const T *a = a_; T lo = CONV(lo_), hi = CONV(hi_); \
    for (int64_t i = 0; i < n; i++) o[i] = el_clamp_##S(a[i * sa], lo, hi); }
CL(f32, float, ID_F32) CL(f64, double, ID_F64) CL(i64, int64_t, ds_f2i64) CL(i32, int32_t, ds_f2i32) CL(u8, uint8_t, ds_f2u8)

/* casts: the same conversions (CV_TO_*, elementwise_ops.h) as ds_copy_<dtype> in elementwise.c */
#define CAST_ROW(S, T, SI, TI) \
  static void k_##S##_##SI(void *o_, const void *a_, int64_t sa, int64_t n) { \
    T *o = o_; const TI *a = a_; for (int64_t i = 0; i < n; i++) o[i] = CV_TO_##S(a[i * sa]); }
#define CAST(S, T, D) \
  CAST_ROW(S, T, f32, float) CAST_ROW(S, T, f64, double) CAST_ROW(S, T, u8, uint8_t) CAST_ROW(S, T, bool, uint8_t) \
  static void k_##S##_i64(void *o_, const void *a_, int64_t sa, int64_t n) { \
    T *o = o_; const int64_t *a = a_; \
    for (int64_t i = 0; i < n; i++) { int64_t v = a[i * sa]; o[i] = D == DS_F32 ? (T)(float)v : D == DS_F64 ? (T)(double)v : D == DS_BOOL ? (T)(v != 0) : D == DS_U8 ? (T)(uint8_t)v : (T)v; } } \
  static void k_##S##_i32(void *o_, const void *a_, int64_t sa, int64_t n) { \
    T *o = o_; const int32_t *a = a_; \
    for (int64_t i = 0; i < n; i++) { int32_t v = a[i * sa]; o[i] = D == DS_BOOL ? (T)(v != 0) : D == DS_U8 ? (T)(uint8_t)v : (T)v; } }
CAST(f32, float, DS_F32) CAST(f64, double, DS_F64) CAST(i64, int64_t, DS_I64)
CAST(i32, int32_t, DS_I32) CAST(u8, uint8_t, DS_U8) CAST(bool, uint8_t, DS_BOOL)
#define CAST_TABLE(S) {k_##S##_f32, k_##S##_f64, k_##S##_i64, k_##S##_i32, k_##S##_u8, k_##S##_bool}
static const unary_fn cast_fns[6][6] = {CAST_TABLE(f32), CAST_TABLE(f64), CAST_TABLE(i64), CAST_TABLE(i32), CAST_TABLE(u8), CAST_TABLE(bool)};

/* per op: loop per dtype (NULL: not supported), arity class */
#define FD(OP, P) {P##_##OP##_f32, P##_##OP##_f64, NULL, NULL, NULL, NULL}
#define SD(OP, P) {P##_##OP##_f32, P##_##OP##_f64, P##_##OP##_i64, P##_##OP##_i32, NULL, NULL}
#define ND(OP, P) {P##_##OP##_f32, P##_##OP##_f64, P##_##OP##_i64, P##_##OP##_i32, P##_##OP##_u8, NULL}
#define AD(OP, P) {P##_##OP##_f32, P##_##OP##_f64, P##_##OP##_i64, P##_##OP##_i32, P##_##OP##_u8, P##_##OP##_bool}
#define BD(OP, P) {NULL, NULL, NULL, NULL, NULL, P##_##OP##_bool}
static const unary_fn unary_fns[OP_LOGICAL_NOT + 1][6] = {
  FD(exp, u), FD(log, u), FD(sqrt, u), FD(rsqrt, u), FD(sin, u), FD(cos, u), FD(tanh, u), FD(sigmoid, u),
  FD(silu, u), FD(erf, u), FD(gelu, u), FD(gelu_tanh, u), SD(abs, u), SD(neg, u), SD(relu, u), SD(sign, u),
  BD(logical_not, u)};
static const binary_fn binary_fns[OP_LOGICAL_XOR - OP_ADD + 1][6] = {
  ND(add, b), ND(sub, b), ND(mul, b), SD(div, b), SD(pow, b), ND(maximum, b), ND(minimum, b),
  AD(lt, b), AD(le, b), AD(gt, b), AD(ge, b), AD(eq, b), AD(ne, b),
  BD(logical_and, b), BD(logical_or, b), BD(logical_xor, b)};
static const where_fn where_fns[6] = {w_f32, w_f64, w_i64, w_i32, w_u8, w_bool};
static const clamp_fn clamp_fns[6] = {c_f32, c_f64, c_i64, c_i32, c_u8, NULL};

typedef struct {
  int op, dt, dst, a, b, c;
  double lo, hi;
  void (*fn)(void);
} instr;

typedef struct {
  int nout, nin, nregs, ninstr;
  int outreg[MAXOPS];
  int regdt[MAXREG];
  instr ins[MAXINS];
} program;

static int is_int(double v) { return v == floor(v) && fabs(v) < 1e9; }

/* Decode and check a program: operand indices in range, registers written before read,
   dtypes as each op expects, outputs' dtypes. opdt = dtypes of the nout + nin tensors. */
static int decode(program *p, int ntensors, const int *opdt, int nattrs, const double *at) {
  DS_CHECK(nattrs >= 4, "fused: program too short (%d numbers)", nattrs);
  for (int i = 0; i < 4; i++) DS_CHECK(is_int(at[i]) && at[i] >= 0, "fused: bad program header");
  p->nout = (int)at[0]; p->nin = (int)at[1]; p->nregs = (int)at[2]; p->ninstr = (int)at[3];
  DS_CHECK(p->nout >= 1 && p->nin >= 0 && p->nout + p->nin <= MAXOPS, "fused: %d outputs and %d inputs (at most %d operands)", p->nout, p->nin, MAXOPS);
  DS_CHECK(p->nregs >= 1 && p->nregs <= MAXREG && p->ninstr >= 1 && p->ninstr <= MAXINS, "fused: %d registers, %d instructions out of range", p->nregs, p->ninstr);
  DS_CHECK(p->nout + p->nin == ntensors, "fused: program names %d operands, step has %d", p->nout + p->nin, ntensors);
  DS_CHECK(nattrs == 4 + p->nout + WIDTH * p->ninstr, "fused: program has %d numbers, header implies %d", nattrs, 4 + p->nout + WIDTH * p->ninstr);
  int written[MAXREG] = {0};
  for (int k = 0; k < ntensors; k++) DS_CHECK(opdt[k] >= 0 && opdt[k] <= DS_BOOL, "fused: operand %d has a bad dtype", k);
  const double *ip = at + 4 + p->nout;
  for (int i = 0; i < p->ninstr; i++, ip += WIDTH) {
    instr *in = &p->ins[i];
    for (int j = 0; j < 3; j++) DS_CHECK(is_int(ip[j]), "fused: instruction %d: bad field", i + 1);
    in->op = (int)ip[0]; in->dt = (int)ip[1]; in->dst = (int)ip[2];
    DS_CHECK(in->op >= 0 && in->op < OP_COUNT, "fused: instruction %d: unknown opcode %d", i + 1, in->op);
    DS_CHECK(in->dt >= 0 && in->dt <= DS_BOOL, "fused: instruction %d: bad dtype %d", i + 1, in->dt);
    DS_CHECK(in->dst >= 0 && in->dst < p->nregs, "fused: instruction %d: bad destination register", i + 1);
    int nsrc = in->op <= OP_LOGICAL_NOT || in->op == OP_CLAMP || in->op == OP_CAST ? 1 : in->op == OP_WHERE ? 3 : 2;
    int src[3] = {0, 0, 0};
    for (int j = 0; j < nsrc; j++) {
      DS_CHECK(is_int(ip[3 + j]), "fused: instruction %d: bad operand", i + 1);
      int v = (int)ip[3 + j];
      DS_CHECK(v < p->nregs && v >= -p->nin, "fused: instruction %d: operand %d out of range", i + 1, v);
      DS_CHECK(v < 0 || written[v], "fused: instruction %d reads register %d before it is written", i + 1, v);
      src[j] = v < 0 ? opdt[p->nout + (-v - 1)] : p->regdt[v];
    }
    in->a = (int)ip[3]; in->b = nsrc > 1 ? (int)ip[4] : 0; in->c = nsrc > 2 ? (int)ip[5] : 0;
    int out = in->dt;
    if (in->op <= OP_LOGICAL_NOT) {
      in->fn = (void (*)(void))unary_fns[in->op][in->dt];
      DS_CHECK(src[0] == in->dt, "fused: instruction %d: operand dtype differs from the op's", i + 1);
    } else if (in->op <= OP_LOGICAL_XOR) {
      in->fn = (void (*)(void))binary_fns[in->op - OP_ADD][in->dt];
      DS_CHECK(src[0] == in->dt && src[1] == in->dt, "fused: instruction %d: operand dtypes differ from the op's", i + 1);
      if (in->op >= OP_LT) out = DS_BOOL;
    } else if (in->op == OP_WHERE) {
      in->fn = (void (*)(void))where_fns[in->dt];
      DS_CHECK(src[0] == DS_BOOL && src[1] == in->dt && src[2] == in->dt, "fused: instruction %d: where operand dtypes", i + 1);
    } else if (in->op == OP_CLAMP) {
      in->fn = (void (*)(void))clamp_fns[in->dt];
      DS_CHECK(src[0] == in->dt, "fused: instruction %d: operand dtype differs from the op's", i + 1);
      in->lo = ip[4]; in->hi = ip[5];
    } else {
      in->fn = (void (*)(void))cast_fns[in->dt][src[0]];
    }
    DS_CHECK(in->fn != NULL, "fused: instruction %d: opcode %d has no dtype code %d", i + 1, in->op, in->dt);
    p->regdt[in->dst] = out;
    written[in->dst] = 1;
  }
  for (int k = 0; k < p->nout; k++) {
    DS_CHECK(is_int(at[4 + k]), "fused: bad output register");
    int r = (int)at[4 + k];
    DS_CHECK(r >= 0 && r < p->nregs && written[r], "fused: output %d names register %d, never written", k + 1, r);
    DS_CHECK(p->regdt[r] == opdt[k], "fused: output %d dtype code %d, register holds %d", k + 1, opdt[k], p->regdt[r]);
    p->outreg[k] = r;
  }
  return DS_OK;
}

/* run instructions over one tile: inputs at ptr[k] with inner stride st[k] (elements) */
static void run_tile(const program *p, char *regs, char *const *in, const int64_t *ist, int64_t n,
                     char *const *out, const int64_t *ost) {
  for (int i = 0; i < p->ninstr; i++) {
    const instr *x = &p->ins[i];
    const void *src[3]; int64_t ss[3];
    int ops[3] = {x->a, x->b, x->c};
    int nsrc = x->op <= OP_LOGICAL_NOT || x->op == OP_CLAMP || x->op == OP_CAST ? 1 : x->op == OP_WHERE ? 3 : 2;
    for (int j = 0; j < nsrc; j++) {
      int v = ops[j];
      if (v >= 0) { src[j] = regs + (size_t)v * TILE * 8; ss[j] = 1; }
      else { src[j] = in[-v - 1]; ss[j] = ist[-v - 1]; }
    }
    void *dst = regs + (size_t)x->dst * TILE * 8;
    if (x->op <= OP_LOGICAL_NOT || x->op == OP_CAST) ((unary_fn)x->fn)(dst, src[0], ss[0], n);
    else if (x->op <= OP_LOGICAL_XOR) ((binary_fn)x->fn)(dst, src[0], ss[0], src[1], ss[1], n);
    else if (x->op == OP_WHERE) ((where_fn)x->fn)(dst, src[0], ss[0], src[1], ss[1], src[2], ss[2], n);
    else ((clamp_fn)x->fn)(dst, src[0], ss[0], n, x->lo, x->hi);
  }
  for (int k = 0; k < p->nout; k++) {
    int64_t es = ds_dtype_size(p->regdt[p->outreg[k]]);
    const char *r = regs + (size_t)p->outreg[k] * TILE * 8;
    if (ost[k] == 1) memcpy(out[k], r, (size_t)(n * es));
    else for (int64_t i = 0; i < n; i++) memcpy(out[k] + i * ost[k] * es, r + i * es, (size_t)es);
  }
}

typedef struct {
  const program *p;
  int nd, nops;
  int64_t shape[DS_MAXDIM];
  int64_t st[MAXOPS][DS_MAXDIM];
  char *base[MAXOPS];
  int64_t es[MAXOPS];
} iter;

/* units = rows x tiles per row; run units [u0, u1) */
static void run_units(const iter *it, int64_t u0, int64_t u1) {
  const program *p = it->p;
  _Alignas(64) char regs[MAXREG * TILE * 8];
  char *out[MAXOPS], *in[MAXOPS];
  int64_t ost[MAXOPS], ist[MAXOPS];
  int nd = it->nd;
  int64_t inner = it->shape[nd - 1], tiles = (inner + TILE - 1) / TILE;
  for (int k = 0; k < it->nops; k++) {
    if (k < p->nout) ost[k] = it->st[k][nd - 1]; else ist[k - p->nout] = it->st[k][nd - 1];
  }
  for (int64_t u = u0; u < u1; u++) {
    int64_t row = u / tiles, t0 = (u % tiles) * TILE, n = inner - t0 < TILE ? inner - t0 : TILE;
    for (int k = 0; k < it->nops; k++) {
      int64_t rem = row, off = t0 * it->st[k][nd - 1];
      for (int d = nd - 2; d >= 0; d--) { int64_t i = rem % it->shape[d]; rem /= it->shape[d]; off += i * it->st[k][d]; }
      char *ptr = it->base[k] + off * it->es[k];
      if (k < p->nout) out[k] = ptr; else in[k - p->nout] = ptr;
    }
    run_tile(p, regs, in, ist, n, out, ost);
  }
}

/* work per element in units of one add: transcendental functions (exp .. gelu_tanh) cost ~8 adds each */
static int64_t program_cost(const program *p) {
  int64_t c = 0;
  for (int i = 0; i < p->ninstr; i++) c += p->ins[i].op <= OP_GELU_TANH ? 8 : 1;
  return c > 0 ? c : 1;
}

static int run_program(const program *p, ds_tensor *const *t) {
  iter it;
  it.p = p; it.nops = p->nout + p->nin;
  const ds_tensor *o = t[0];
  char b1[128], b2[128];
  for (int k = 0; k < it.nops; k++) {
    DS_CHECK(t[k] != NULL, "fused: operand %d missing", k);
    if (k < p->nout) {
      DS_CHECK(t[k]->ndim == o->ndim && t[k]->numel == o->numel, "fused: outputs differ in shape");
      for (int d = 0; d < o->ndim; d++) { DS_CHECK(t[k]->shape[d] == o->shape[d], "fused: outputs differ in shape"); it.st[k][d] = t[k]->strides[d]; }
    } else if (!ds_broadcast_strides(o, t[k], it.st[k]))
      return ds_fail(DS_EINVAL, "fused: input shape %s does not broadcast to %s", ds_shape_str(t[k], b1), ds_shape_str(o, b2));
    it.base[k] = t[k]->data;
    it.es[k] = ds_dtype_size(t[k]->dtype);
  }
  if (o->numel == 0) return DS_OK;
  memcpy(it.shape, o->shape, sizeof it.shape);
  it.nd = o->ndim;
  if (it.nd == 0) { it.nd = 1; it.shape[0] = 1; for (int k = 0; k < it.nops; k++) it.st[k][0] = 0; }
  /* collapse dims that are contiguous in every operand (like ds_coalesce, any number of operands) */
  int nd = 0;
  for (int i = 0; i < it.nd; i++) {
    if (it.shape[i] == 1 && it.nd > 1) continue;
    if (nd > 0) {
      int ok = 1;
      for (int k = 0; k < it.nops; k++) if (it.st[k][nd - 1] != it.st[k][i] * it.shape[i]) { ok = 0; break; }
      if (ok) { it.shape[nd - 1] *= it.shape[i]; for (int k = 0; k < it.nops; k++) it.st[k][nd - 1] = it.st[k][i]; continue; }
    }
    it.shape[nd] = it.shape[i];
    for (int k = 0; k < it.nops; k++) it.st[k][nd] = it.st[k][i];
    nd++;
  }
  if (nd == 0) { nd = 1; it.shape[0] = 1; for (int k = 0; k < it.nops; k++) it.st[k][0] = 0; }
  it.nd = nd;
  int64_t rows = 1;
  for (int d = 0; d < nd - 1; d++) rows *= it.shape[d];
  int64_t units = rows * ((it.shape[nd - 1] + TILE - 1) / TILE);
  if (o->numel * program_cost(p) >= DS_PAR_MIN && units > 1 && omp_get_max_threads() > 1) {
    #pragma omp parallel
    {
      int nt = omp_get_num_threads(), id = omp_get_thread_num();
      run_units(&it, units * id / nt, units * (id + 1) / nt);
    }
  } else run_units(&it, 0, units);
  return DS_OK;
}

static int tensor_dtypes(ds_tensor *const *t, int n, int *dt) {
  for (int k = 0; k < n; k++) { DS_CHECK(t[k] != NULL, "fused: operand %d missing", k); dt[k] = t[k]->dtype; }
  return DS_OK;
}

/* ds_fused: t = nout outputs, nin inputs; attrs = the program.
   The operand count comes from the program and is checked against the NULL-terminated list the
   plan runtime passes; eager never calls it. */
static int fused(ds_tensor *const *t, const double *attrs, int dtype) {
  for (int i = 0; i < 4; i++) DS_CHECK(is_int(attrs[i]) && attrs[i] >= 0, "fused: bad program header");
  int dt[MAXOPS], n = (int)attrs[0] + (int)attrs[1];
  DS_CHECK(n >= 1 && n <= MAXOPS && attrs[3] <= MAXINS, "fused: bad operand count");
  DS_CHECK(t[0] != NULL && t[0]->dtype == dtype, "fused: first output's dtype differs from the kernel's");
  for (int k = 0; k < n; k++) DS_CHECK(t[k] != NULL, "fused: program names %d operands, fewer given", n);
  int rc = tensor_dtypes(t, n, dt); if (rc) return rc;
  program p;
  rc = decode(&p, n, dt, 4 + (int)attrs[0] + WIDTH * (int)attrs[3], attrs);
  if (rc) return rc;
  return run_program(&p, t);
}
int ds_fused_f32(ds_tensor *const *t, const double *attrs) { return fused(t, attrs, DS_F32); }
int ds_fused_f64(ds_tensor *const *t, const double *attrs) { return fused(t, attrs, DS_F64); }
int ds_fused_i64(ds_tensor *const *t, const double *attrs) { return fused(t, attrs, DS_I64); }
int ds_fused_i32(ds_tensor *const *t, const double *attrs) { return fused(t, attrs, DS_I32); }
int ds_fused_u8(ds_tensor *const *t, const double *attrs) { return fused(t, attrs, DS_U8); }
int ds_fused_bool(ds_tensor *const *t, const double *attrs) { return fused(t, attrs, DS_BOOL); }

/* ds_matmul_ep_<dtype>: t = out, a, b, extra inputs; out = matmul(a, b), then the program runs in place
   over out with input 1 = out itself and inputs 2.. = the extras (bias, ...). Same kernel, same rounding. */
int ds_matmul_f32(ds_tensor *const *t, const double *attrs);
int ds_matmul_f64(ds_tensor *const *t, const double *attrs);
static int matmul_ep(ds_tensor *const *t, const double *attrs, ds_kernel mm) {
  for (int i = 0; i < 4; i++) DS_CHECK(is_int(attrs[i]) && attrs[i] >= 0 && attrs[i] <= MAXINS, "matmul epilogue: bad program header");
  int nin = (int)attrs[1];
  DS_CHECK(attrs[0] == 1 && nin >= 1 && nin + 2 <= MAXOPS, "matmul epilogue: bad program header");
  for (int k = 0; k < nin + 2; k++) DS_CHECK(t[k] != NULL, "matmul epilogue: program names %d operands, fewer given", nin + 2);
  int rc = mm(t, NULL);
  if (rc) return rc;
  ds_tensor *ops[MAXOPS + 1];
  ops[0] = t[0]; ops[1] = t[0];
  for (int k = 1; k < nin; k++) ops[k + 1] = t[k + 2];
  int dt[MAXOPS];
  rc = tensor_dtypes(ops, nin + 1, dt); if (rc) return rc;
  program p;
  rc = decode(&p, nin + 1, dt, 4 + 1 + WIDTH * (int)attrs[3], attrs);
  if (rc) return rc;
  return run_program(&p, ops);
}
int ds_matmul_ep_f32(ds_tensor *const *t, const double *attrs) { return matmul_ep(t, attrs, ds_matmul_f32); }
int ds_matmul_ep_f64(ds_tensor *const *t, const double *attrs) { return matmul_ep(t, attrs, ds_matmul_f64); }

int ds_fused_validate(const char *kernel, int nbuf, const int *dtypes, int nattrs, const double *attrs) {
  program p;
  if (strncmp(kernel, "ds_fused_", 9) == 0) {
    int rc = decode(&p, nbuf, dtypes, nattrs, attrs);
    if (rc) return rc;
    static const char *suffix[6] = {"f32", "f64", "i64", "i32", "u8", "bool"};
    DS_CHECK(strcmp(kernel + 9, suffix[dtypes[0]]) == 0, "%s: first output has dtype %s", kernel, suffix[dtypes[0]]);
    return DS_OK;
  }
  if (strcmp(kernel, "ds_matmul_ep_f32") == 0 || strcmp(kernel, "ds_matmul_ep_f64") == 0) {
    DS_CHECK(nbuf >= 3 && nbuf - 1 <= MAXOPS, "matmul epilogue: %d operands", nbuf);
    int dt[MAXOPS];
    dt[0] = dtypes[0]; dt[1] = dtypes[0];
    for (int k = 3; k < nbuf; k++) dt[k - 1] = dtypes[k];
    int rc = decode(&p, nbuf - 1, dt, nattrs, attrs);
    if (rc) return rc;
    DS_CHECK(p.nout == 1, "matmul epilogue: one output");
    return DS_OK;
  }
  return ds_fail(DS_EINVAL, "plan: no program check for kernel %s", kernel);
}
