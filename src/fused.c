/* fused.c: one kernel that runs a chain of elementwise ops (a small bytecode) tile by tile in cache,
   calling the per-element functions of elementwise_ops.h, so results equal the unfused ops bit for bit;
   and matmul epilogues (the same matmul kernel, then a fused chain over its cache-hot output). */
#include "internal.h"
#include "elementwise_ops.h"
#include "elementwise_table.h"
#include "conv_ep.h"
#include "sgemm_ep.h"
#include <omp.h>

/* Program (attrs): nout, nin, nregs, ninstr, outreg[nout], then ninstr x {op, dtype, dst, a, b, c}.
   op: a row of elementwise.def (its position). Operands a/b/c: >= 0 register, < 0 input -(v+1).
   EW_PARAM ops: b, c are the two params (numbers). Tensors: nout outputs (one shape), then nin inputs
   (broadcast to it). */
#define TILE 512
#define MAXREG 32
#define MAXINS 256
#define MAXOPS 64
#define WIDTH 6

typedef void (*unary_fn)(void *o, const void *a, int64_t sa, int64_t n);
typedef void (*param_fn)(void *o, const void *a, int64_t sa, int64_t n, double p0, double p1);
typedef void (*binary_fn)(void *o, const void *a, int64_t sa, const void *b, int64_t sb, int64_t n);
typedef void (*where_fn)(void *o, const void *c, int64_t sc, const void *a, int64_t sa, const void *b, int64_t sb,
                         int64_t n);
typedef void (*loop_fn)(void);

/* ---- loops over one tile (contiguous output; operands contiguous, scalar or strided) ---- */
#define U(OP, S, TI, TO) \
  static void u_##OP##_##S(void *o_, const void *a_, int64_t sa, int64_t n) { \
    TO *o = o_; const TI *a = a_; \
    if (sa == 1) { WIDE_RUN_##S(OP, o, a, n) for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(a[i]); } \
    else for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(a[i * sa]); }
/* params are converted to the dtype exactly as the eager kernel ds_<op>_<dtype> does */
#define PRM(OP, S, T) \
  static void p_##OP##_##S(void *o_, const void *a_, int64_t sa, int64_t n, double p0_, double p1_) { \
    T *o = o_; const T *a = a_; T p0 = CV_TO_##S(p0_), p1 = CV_TO_##S(p1_); \
    for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(a[i * sa], p0, p1); }
#define B(OP, S, TI, TO) \
  static void b_##OP##_##S(void *o_, const void *a_, int64_t sa, const void *b_, int64_t sb, int64_t n) { \
    TO *o = o_; const TI *a = a_, *b = b_; \
    if (sa == 1 && sb == 1) for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(a[i], b[i]); \
    else if (sa == 1 && sb == 0) { TI y = b[0]; for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(a[i], y); } \
    else if (sa == 0 && sb == 1) { TI x = a[0]; for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(x, b[i]); } \
    else for (int64_t i = 0; i < n; i++) o[i] = el_##OP##_##S(a[i * sa], b[i * sb]); }
#define W(OP, S, T) \
  static void w_##OP##_##S(void *o_, const void *c_, int64_t sc, const void *a_, int64_t sa, const void *b_, \
                           int64_t sb, int64_t n) { \
    T *o = o_; const uint8_t *c = c_; const T *a = a_, *b = b_; \
    for (int64_t i = 0; i < n; i++) o[i] = c[i * sc] ? a[i * sa] : b[i * sb]; }
/* casts: the same conversions (CV, elementwise_ops.h) as ds_copy_<dtype> in elementwise.c */
#define CAST_FROM(S, T, SI, TI) \
  static void k_##S##_##SI(void *o_, const void *a_, int64_t sa, int64_t n) { \
    T *o = o_; const TI *a = a_; for (int64_t i = 0; i < n; i++) o[i] = CV(S, SI, a[i * sa]); }
#define CAST(OP, S, T) \
  CAST_FROM(S, T, f32, float) CAST_FROM(S, T, f64, double) CAST_FROM(S, T, i64, int64_t) \
  CAST_FROM(S, T, i32, int32_t) CAST_FROM(S, T, u8, uint8_t) CAST_FROM(S, T, bool, uint8_t)

#define LOOPS_EW_UNARY(OP, S, T) U(OP, S, T, T)
#define LOOPS_EW_PARAM(OP, S, T) PRM(OP, S, T)
#define LOOPS_EW_BINARY(OP, S, T) B(OP, S, T, T)
#define LOOPS_EW_COMPARE(OP, S, T) B(OP, S, T, uint8_t)
#define LOOPS_EW_WHERE(OP, S, T) W(OP, S, T)
#define LOOPS_EW_CAST(OP, S, T) CAST(OP, S, T)
#define EW(name, kind, dtypes, cost, flags) dtypes(LOOPS_##kind, name)
#include "elementwise.def"
#undef EW

/* each opcode's loop per dtype code (NULL: the op does not run in that dtype); casts use cast_fns */
#define ENTRY_EW_UNARY(OP, S, T) [EW_CODE(S)] = (loop_fn)u_##OP##_##S,
#define ENTRY_EW_PARAM(OP, S, T) [EW_CODE(S)] = (loop_fn)p_##OP##_##S,
#define ENTRY_EW_BINARY(OP, S, T) [EW_CODE(S)] = (loop_fn)b_##OP##_##S,
#define ENTRY_EW_COMPARE(OP, S, T) [EW_CODE(S)] = (loop_fn)b_##OP##_##S,
#define ENTRY_EW_WHERE(OP, S, T) [EW_CODE(S)] = (loop_fn)w_##OP##_##S,
#define ENTRY_EW_CAST(OP, S, T)
static const loop_fn loops[EW_OP_COUNT][DS_BOOL + 1] = {
#define EW(name, kind, dtypes, cost, flags) [EW_OP_##name] = {dtypes(ENTRY_##kind, name)},
#include "elementwise.def"
#undef EW
};
/* cast_fns[to][from] */
#define CAST_ENTRY(OP, S, T) \
  [EW_CODE(S)] = {k_##S##_f32, k_##S##_f64, k_##S##_i64, k_##S##_i32, k_##S##_u8, k_##S##_bool},
static const unary_fn cast_fns[DS_BOOL + 1][DS_BOOL + 1] = {EW_ALL(CAST_ENTRY, copy)};

/* the properties of each opcode, for decoding here and for the fusion pass (ds_ew_*) */
typedef struct { const char *name; int kind, sources, cost, flags; } ew_op;
static const ew_op ew_ops[] = {
#define EW(name, kind, dtypes, cost, flags) {#name, EW_KIND(kind), EW_SOURCES(kind), cost, flags},
#include "elementwise.def"
#undef EW
};
_Static_assert(sizeof ew_ops / sizeof ew_ops[0] == EW_OP_COUNT, "one ew_ops entry per row of elementwise.def");
_Static_assert(DS_BOOL == 5, "dtype codes 0..5 index the loop tables");

int ds_ew_count(void) { return EW_OP_COUNT; }
const char *ds_ew_name(int op) { return op >= 0 && op < EW_OP_COUNT ? ew_ops[op].name : NULL; }
int ds_ew_kind(int op) { return op >= 0 && op < EW_OP_COUNT ? ew_ops[op].kind : -1; }
int ds_ew_flags(int op) { return op >= 0 && op < EW_OP_COUNT ? ew_ops[op].flags : 0; }
int ds_ew_opcode(const char *name) {
  for (int op = 0; name && op < EW_OP_COUNT; op++) if (strcmp(ew_ops[op].name, name) == 0) return op;
  return -1;
}

typedef struct {
  int op, kind, dt, dst, a, b, c;
  double p0, p1;
  loop_fn fn;
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
  DS_CHECK(p->nout >= 1 && p->nin >= 0 && p->nout + p->nin <= MAXOPS,
      "fused: %d outputs and %d inputs (at most %d operands)", p->nout, p->nin, MAXOPS);
  DS_CHECK(p->nregs >= 1 && p->nregs <= MAXREG && p->ninstr >= 1 && p->ninstr <= MAXINS,
      "fused: %d registers, %d instructions out of range", p->nregs, p->ninstr);
  DS_CHECK(p->nout + p->nin == ntensors, "fused: program names %d operands, step has %d", p->nout + p->nin, ntensors);
  DS_CHECK(nattrs == 4 + p->nout + WIDTH * p->ninstr, "fused: program has %d numbers, header implies %d", nattrs,
      4 + p->nout + WIDTH * p->ninstr);
  int written[MAXREG] = {0};
  for (int k = 0; k < ntensors; k++) DS_CHECK(opdt[k] >= 0 && opdt[k] <= DS_BOOL,
      "fused: operand %d has a bad dtype", k);
  const double *ip = at + 4 + p->nout;
  for (int i = 0; i < p->ninstr; i++, ip += WIDTH) {
    instr *in = &p->ins[i];
    for (int j = 0; j < 3; j++) DS_CHECK(is_int(ip[j]), "fused: instruction %d: bad field", i + 1);
    in->op = (int)ip[0]; in->dt = (int)ip[1]; in->dst = (int)ip[2];
    DS_CHECK(in->op >= 0 && in->op < EW_OP_COUNT, "fused: instruction %d: unknown opcode %d", i + 1, in->op);
    DS_CHECK(in->dt >= 0 && in->dt <= DS_BOOL, "fused: instruction %d: bad dtype %d", i + 1, in->dt);
    DS_CHECK(in->dst >= 0 && in->dst < p->nregs, "fused: instruction %d: bad destination register", i + 1);
    const ew_op *op = &ew_ops[in->op];
    in->kind = op->kind;
    int src[3] = {0, 0, 0};
    for (int j = 0; j < op->sources; j++) {
      DS_CHECK(is_int(ip[3 + j]), "fused: instruction %d: bad operand", i + 1);
      int v = (int)ip[3 + j];
      DS_CHECK(v < p->nregs && v >= -p->nin, "fused: instruction %d: operand %d out of range", i + 1, v);
      DS_CHECK(v < 0 || written[v], "fused: instruction %d reads register %d before it is written", i + 1, v);
      src[j] = v < 0 ? opdt[p->nout + (-v - 1)] : p->regdt[v];
    }
    in->a = (int)ip[3]; in->b = op->sources > 1 ? (int)ip[4] : 0; in->c = op->sources > 2 ? (int)ip[5] : 0;
    int out = op->kind == EW_KIND_COMPARE ? DS_BOOL : in->dt;
    if (op->kind == EW_KIND_CAST) in->fn = (loop_fn)cast_fns[in->dt][src[0]];
    else {
      in->fn = loops[in->op][in->dt];
      int first = op->kind == EW_KIND_WHERE ? 1 : 0;   /* where's condition is bool */
      DS_CHECK(first == 0 || src[0] == DS_BOOL, "fused: instruction %d: where condition is not bool", i + 1);
      for (int j = first; j < op->sources; j++)
        DS_CHECK(src[j] == in->dt, "fused: instruction %d: operand dtypes differ from the op's", i + 1);
    }
    if (op->kind == EW_KIND_PARAM) { in->p0 = ip[4]; in->p1 = ip[5]; }
    DS_CHECK(in->fn != NULL, "fused: instruction %d: %s has no dtype code %d", i + 1, op->name, in->dt);
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

/* run instructions over one tile: inputs at ptr[k] with inner stride st[k] (elements). A lone output at unit
   stride that the last instruction writes is written by it directly (an epilogue's in place: each element from
   the same element or registers), not through its register and a copy */
static void run_tile(const program *p, char *regs, char *const *in, const int64_t *ist, int64_t n,
                     char *const *out, const int64_t *ost) {
  int last = p->ninstr - 1, direct = p->nout == 1 && last >= 0 && ost[0] == 1 && p->ins[last].dst == p->outreg[0];
  for (int i = 0; i < p->ninstr; i++) {
    const instr *x = &p->ins[i];
    const void *src[3]; int64_t ss[3];
    int ops[3] = {x->a, x->b, x->c};
    for (int j = 0; j < ew_ops[x->op].sources; j++) {
      int v = ops[j];
      if (v >= 0) { src[j] = regs + (size_t)v * TILE * 8; ss[j] = 1; }
      else { src[j] = in[-v - 1]; ss[j] = ist[-v - 1]; }
    }
    void *dst = direct && i == last ? (void *)out[0] : regs + (size_t)x->dst * TILE * 8;
    switch (x->kind) {
    case EW_KIND_UNARY: case EW_KIND_CAST: ((unary_fn)x->fn)(dst, src[0], ss[0], n); break;
    case EW_KIND_PARAM: ((param_fn)x->fn)(dst, src[0], ss[0], n, x->p0, x->p1); break;
    case EW_KIND_BINARY: case EW_KIND_COMPARE: ((binary_fn)x->fn)(dst, src[0], ss[0], src[1], ss[1], n); break;
    default: ((where_fn)x->fn)(dst, src[0], ss[0], src[1], ss[1], src[2], ss[2], n); break;
    }
  }
  for (int k = direct; k < p->nout; k++) {
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
      for (int d = nd - 2; d >= 0; d--) {
        int64_t i = rem % it->shape[d];
        rem /= it->shape[d];
        off += i * it->st[k][d];
      }
      char *ptr = it->base[k] + off * it->es[k];
      if (k < p->nout) out[k] = ptr; else in[k - p->nout] = ptr;
    }
    run_tile(p, regs, in, ist, n, out, ost);
  }
}

/* work per element in units of one add (the cost column of elementwise.def) */
static int64_t program_cost(const program *p) {
  int64_t c = 0;
  for (int i = 0; i < p->ninstr; i++) c += ew_ops[p->ins[i].op].cost;
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
      for (int d = 0; d < o->ndim; d++) {
        DS_CHECK(t[k]->shape[d] == o->shape[d], "fused: outputs differ in shape");
        it.st[k][d] = t[k]->strides[d];
      }
    } else if (!ds_broadcast_strides(o, t[k], it.st[k]))
      return ds_fail(DS_EINVAL, "fused: input shape %s does not broadcast to %s", ds_shape_str(t[k], b1),
          ds_shape_str(o, b2));
    it.base[k] = t[k]->data;
    it.es[k] = ds_dtype_size(t[k]->dtype);
  }
  if (o->numel == 0) return DS_OK;
  memcpy(it.shape, o->shape, sizeof it.shape);
  it.nd = ds_coalesce(o->ndim, it.shape, it.nops, it.st); /* dims contiguous in every operand collapse */
  int nd = it.nd;
  int64_t rows = 1;
  for (int d = 0; d < nd - 1; d++) rows *= it.shape[d];
  int64_t units = rows * ((it.shape[nd - 1] + TILE - 1) / TILE);
  if (o->numel * program_cost(p) >= DS_PAR_MIN && units > 1 && ds_team() > 1) {
    double t0 = ds_team_start();
    #pragma omp parallel
    {
      ds_team_arrive(t0);
      int nt = omp_get_num_threads(), id = omp_get_thread_num();
      run_units(&it, units * id / nt, units * (id + 1) / nt);
    }
    ds_team_done();
  } else run_units(&it, 0, units);
  if (ds_take_zero_division()) return ds_fail(DS_ERANGE, "fused: ZeroDivisionError: integer division by zero");
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

/* ds_matmul_ep_<dtype>, ds_matmul_packed_ep_f32: t = out, a, b (prepacked for the second), extra inputs;
   out = matmul(a, b), then the program runs in place over out with input 1 = out itself and inputs 2.. = the
   extras (bias, ...). Same kernel, same rounding. A f32 chain that is add(out, bias) with one bias value per
   column, then maybe relu, is the GEMM's own epilogue instead (sgemm_ep.h: on each tile as it is done, no pass
   over out of its own: frozen relu(x @ W^T + b), 1 thread, 256 x 84 x 10 16.3 -> 10.9 us, 256 x 120 x 84
   70 -> 66, indicative). */
int ds_matmul_f32(ds_tensor *const *t, const double *attrs);
int ds_matmul_f64(ds_tensor *const *t, const double *attrs);
typedef int (*matmul_ep_fn)(ds_tensor *const *t, const ds_sgemm_ep *ep);

/* *ep = the program over ops (out, out, bias) as the GEMM's epilogue; 0 when it is not one */
static int as_sgemm_ep(const program *p, ds_tensor *const *ops, ds_sgemm_ep *ep) {
  if (p->nin != 2 || p->ninstr > 2) return 0;
  const ds_tensor *o = ops[0], *b = ops[2];
  if (o->dtype != DS_F32 || b->dtype != DS_F32) return 0;
  const instr *add = &p->ins[0], *last = &p->ins[p->ninstr - 1];
  if (add->op != EW_OP_add || add->dt != DS_F32 || add->a != -1 || add->b != -2 || p->outreg[0] != last->dst) return 0;
  if (p->ninstr == 2 && (last->op != EW_OP_relu || last->dt != DS_F32 || last->a != add->dst)) return 0;
  int64_t st[DS_MAXDIM];
  if (!ds_broadcast_strides(o, b, st)) return 0;
  for (int d = 0; d < o->ndim - 1; d++) if (st[d] != 0) return 0;
  if (st[o->ndim - 1] != 1 && o->shape[o->ndim - 1] > 1) return 0;
  ep->bias = b->data;
  ep->relu = p->ninstr == 2;
  return 1;
}

static int matmul_ep(ds_tensor *const *t, const double *attrs, ds_kernel mm, matmul_ep_fn mm_ep) {
  for (int i = 0; i < 4; i++) DS_CHECK(is_int(attrs[i]) && attrs[i] >= 0 && attrs[i] <= MAXINS,
      "matmul epilogue: bad program header");
  int nin = (int)attrs[1];
  DS_CHECK(attrs[0] == 1 && nin >= 1 && nin + 2 <= MAXOPS, "matmul epilogue: bad program header");
  for (int k = 0; k < nin + 2; k++) DS_CHECK(t[k] != NULL,
      "matmul epilogue: program names %d operands, fewer given", nin + 2);
  ds_tensor *ops[MAXOPS + 1];
  ops[0] = t[0]; ops[1] = t[0];
  for (int k = 1; k < nin; k++) ops[k + 1] = t[k + 2];
  int dt[MAXOPS];
  int rc = tensor_dtypes(ops, nin + 1, dt); if (rc) return rc;
  program p;
  rc = decode(&p, nin + 1, dt, 4 + 1 + WIDTH * (int)attrs[3], attrs);
  if (rc) return rc;
  ds_sgemm_ep ep;
  if (mm_ep && as_sgemm_ep(&p, ops, &ep)) return mm_ep(t, &ep);
  rc = mm(t, NULL);
  if (rc) return rc;
  return run_program(&p, ops);
}
int ds_matmul_ep_f32(ds_tensor *const *t, const double *attrs) {
  return matmul_ep(t, attrs, ds_matmul_f32, ds_matmul_f32_ep);
}
int ds_matmul_ep_f64(ds_tensor *const *t, const double *attrs) { return matmul_ep(t, attrs, ds_matmul_f64, NULL); }
int ds_matmul_packed_f32(ds_tensor *const *t, const double *attrs);
int ds_matmul_packed_ep_f32(ds_tensor *const *t, const double *attrs) {
  return matmul_ep(t, attrs, ds_matmul_packed_f32, ds_matmul_packed_f32_ep);
}

/* ds_conv2d_ep_<dtype>: t = out, x, w, b, extra inputs; attrs = conv2d's 7 (stride, padding, dilation, groups),
   then the program, which sees out (as output and input 1), then the extras. The conv kernel calls back on each
   block of output it has written (conv_ep.h) and the program runs over that block in place, on the writing
   thread: the chain's elementwise ops on the conv's values, so the unfused graph's bits. */
#define CONV_ATTRS 7
typedef struct {
  conv_ep ep;
  iter whole;   /* the program's operands over the whole output (strides broadcast to (N, OC, OH, OW)) */
} conv_block_ep;
static void conv_block_apply(const conv_ep *e, int64_t n0, int64_t m, int64_t c0, int64_t nc) {
  const iter *w = &((const conv_block_ep *)e)->whole;
  iter it;   /* the operands' rows only: a whole iter is ~5 KB, copied per block */
  it.p = w->p; it.nops = w->nops;
  memcpy(it.shape, w->shape, sizeof it.shape);
  it.shape[0] = m; it.shape[1] = nc;
  for (int k = 0; k < it.nops; k++) {
    memcpy(it.st[k], w->st[k], sizeof it.st[k]);
    it.es[k] = w->es[k];
    it.base[k] = w->base[k] + (n0 * it.st[k][0] + c0 * it.st[k][1]) * it.es[k];
  }
  int nd = it.nd = ds_coalesce(4, it.shape, it.nops, it.st);
  int64_t rows = 1;
  for (int d = 0; d < nd - 1; d++) rows *= it.shape[d];
  run_units(&it, 0, rows * ((it.shape[nd - 1] + TILE - 1) / TILE));
}
static int conv2d_ep(ds_tensor *const *t, const double *attrs,
                     int (*conv)(ds_tensor *const *, const double *, const conv_ep *)) {
  const double *pa = attrs + CONV_ATTRS;
  for (int i = 0; i < 4; i++) DS_CHECK(is_int(pa[i]) && pa[i] >= 0 && pa[i] <= MAXINS,
      "conv2d epilogue: bad program header");
  int nin = (int)pa[1];
  DS_CHECK(pa[0] == 1 && nin >= 1 && nin + 2 <= MAXOPS, "conv2d epilogue: bad program header");
  for (int k = 0; k < nin + 3; k++) DS_CHECK(t[k] != NULL,
      "conv2d epilogue: program names %d operands, fewer given", nin + 3);
  ds_tensor *ops[MAXOPS + 1];
  ops[0] = t[0]; ops[1] = t[0];
  for (int k = 1; k < nin; k++) ops[k + 1] = t[k + 3];
  int dt[MAXOPS];
  int rc = tensor_dtypes(ops, nin + 1, dt); if (rc) return rc;
  program p;
  rc = decode(&p, nin + 1, dt, 4 + 1 + WIDTH * (int)pa[3], pa);
  if (rc) return rc;
  const ds_tensor *o = t[0];
  DS_CHECK(o->ndim == 4, "conv2d epilogue: output must be 4-D");
  conv_block_ep cb;
  cb.ep.apply = conv_block_apply;
  /* hardswish alone on the f32 output: the direct conv kernels may apply it as they write (conv_ep.h) */
  const instr *i0 = &p.ins[0];
  cb.ep.act = p.ninstr == 1 && nin == 1 && i0->op == EW_OP_hardswish && i0->dt == DS_F32 && i0->a == -1 &&
              p.outreg[0] == i0->dst ? CONV_ACT_HARDSWISH : CONV_ACT_NONE;
  iter *it = &cb.whole;
  it->p = &p; it->nops = nin + 1; it->nd = 4;
  char b1[128], b2[128];
  for (int k = 0; k < it->nops; k++) {
    if (k == 0) for (int d = 0; d < 4; d++) it->st[0][d] = o->strides[d];
    else if (!ds_broadcast_strides(o, ops[k], it->st[k]))
      return ds_fail(DS_EINVAL, "conv2d epilogue: input shape %s does not broadcast to %s", ds_shape_str(ops[k], b1),
          ds_shape_str(o, b2));
    it->base[k] = ops[k]->data;
    it->es[k] = ds_dtype_size(ops[k]->dtype);
  }
  memcpy(it->shape, o->shape, sizeof it->shape);
  rc = conv(t, attrs, &cb.ep);
  if (rc) return rc;
  if (ds_take_zero_division())
    return ds_fail(DS_ERANGE, "conv2d epilogue: ZeroDivisionError: integer division by zero");
  return DS_OK;
}
int ds_conv2d_ep_f32(ds_tensor *const *t, const double *attrs) { return conv2d_ep(t, attrs, ds_conv2d_ep_run_f32); }
int ds_conv2d_ep_f64(ds_tensor *const *t, const double *attrs) { return conv2d_ep(t, attrs, ds_conv2d_ep_run_f64); }

/* plan checks (the registry's KV rows): a step's program against its operands' dtypes */
static int fused_check(int dtype, int nbuf, const int *dtypes, int nattrs, const double *attrs) {
  program p;
  int rc = decode(&p, nbuf, dtypes, nattrs, attrs);
  if (rc) return rc;
  DS_CHECK(dtypes[0] == dtype, "fused: first output has dtype %s, the kernel's is %s", ds_dtype_name(dtypes[0]),
           ds_dtype_name(dtype));
  return DS_OK;
}
#define FUSED_CHECK(op, S, T) \
  int ds_fused_check_##S(int nbuf, const int *dtypes, int nattrs, const double *attrs) { \
    return fused_check(EW_CODE(S), nbuf, dtypes, nattrs, attrs); }
EW_ALL(FUSED_CHECK, fused)

/* matmul_ep steps: out, a, b, extras; the program sees out (as output and input 1), then the extras */
int ds_matmul_ep_check(int nbuf, const int *dtypes, int nattrs, const double *attrs) {
  DS_CHECK(nbuf >= 3 && nbuf - 1 <= MAXOPS, "matmul epilogue: %d operands", nbuf);
  int dt[MAXOPS];
  dt[0] = dtypes[0]; dt[1] = dtypes[0];
  for (int k = 3; k < nbuf; k++) dt[k - 1] = dtypes[k];
  program p;
  int rc = decode(&p, nbuf - 1, dt, nattrs, attrs);
  if (rc) return rc;
  DS_CHECK(p.nout == 1, "matmul epilogue: one output");
  return DS_OK;
}

/* conv2d_ep steps: out, x, w, b, extras; attrs: the conv's, then the program, which sees out (as output and
   input 1), then the extras */
int ds_conv2d_ep_check(int nbuf, const int *dtypes, int nattrs, const double *attrs) {
  DS_CHECK(nbuf >= 4 && nbuf - 2 <= MAXOPS && nattrs > CONV_ATTRS, "conv2d epilogue: %d operands", nbuf);
  int dt[MAXOPS];
  dt[0] = dtypes[0]; dt[1] = dtypes[0];
  for (int k = 4; k < nbuf; k++) dt[k - 2] = dtypes[k];
  program p;
  int rc = decode(&p, nbuf - 2, dt, nattrs - CONV_ATTRS, attrs + CONV_ATTRS);
  if (rc) return rc;
  DS_CHECK(p.nout == 1, "conv2d epilogue: one output");
  return DS_OK;
}
