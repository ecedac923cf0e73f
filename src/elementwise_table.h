/* elementwise_table.h: what the rows of elementwise.def expand with -- kinds, flags, dtype lists, opcodes. */
#ifndef DS_ELEMENTWISE_TABLE_H
#define DS_ELEMENTWISE_TABLE_H
#include "internal.h"

/* kinds (the numbers Lua reads through ds_ew_kind) */
enum { EW_KIND_UNARY, EW_KIND_PARAM, EW_KIND_BINARY, EW_KIND_COMPARE, EW_KIND_WHERE, EW_KIND_CAST };
/* a row's kind token -> its number, operands read (sources), tensors the eager kernel takes */
#define EW_KIND(kind) kind##_KIND
#define EW_UNARY_KIND EW_KIND_UNARY
#define EW_PARAM_KIND EW_KIND_PARAM
#define EW_BINARY_KIND EW_KIND_BINARY
#define EW_COMPARE_KIND EW_KIND_COMPARE
#define EW_WHERE_KIND EW_KIND_WHERE
#define EW_CAST_KIND EW_KIND_CAST
#define EW_SOURCES(kind) kind##_SOURCES
#define EW_UNARY_SOURCES 1
#define EW_PARAM_SOURCES 1
#define EW_BINARY_SOURCES 2
#define EW_COMPARE_SOURCES 2
#define EW_WHERE_SOURCES 3
#define EW_CAST_SOURCES 1

/* flags (a bit set; Lua reads them through ds_ew_flags) */
#define EW_TRANSCENDENTAL 1

/* dtype lists: M(op, suffix, C type) once per dtype the op runs in */
#define EW_FLOAT(M, op) M(op, f32, float) M(op, f64, double)
#define EW_SIGNED(M, op) EW_FLOAT(M, op) M(op, i64, int64_t) M(op, i32, int32_t)
#define EW_NUMERIC(M, op) EW_SIGNED(M, op) M(op, u8, uint8_t)
#define EW_ALL(M, op) EW_NUMERIC(M, op) M(op, bool, uint8_t)
#define EW_LOGIC(M, op) M(op, bool, uint8_t)
#define EW_INTEGER(M, op) M(op, i64, int64_t) M(op, i32, int32_t) M(op, u8, uint8_t)
/* a dtype suffix -> its ds_dtype code */
#define EW_CODE(S) EW_CODE_##S
#define EW_CODE_f32 DS_F32
#define EW_CODE_f64 DS_F64
#define EW_CODE_i64 DS_I64
#define EW_CODE_i32 DS_I32
#define EW_CODE_u8 DS_U8
#define EW_CODE_bool DS_BOOL

/* opcodes: a row's position. Fused programs carry them, so a saved plan holding fused steps is tied to this
   table: ds_ew_fingerprint() (fused.c) names the table's rows in order for the plan file to record. */
enum {
#define EW(name, kind, dtypes, cost, flags) EW_OP_##name,
#include "elementwise.def"
#undef EW
  EW_OP_COUNT
};

/* the AVX-512 build of a f32 unary op's contiguous loop while that ISA path is in use, else NULL
   (elementwise_avx512.c); WIDE_<dtype>(op, o, a, n) runs it and returns from the calling loop function */
typedef void (*ew_f32_loop)(float *o, const float *a, int64_t n);
ew_f32_loop ds_ew_wide_f32(int op);
#define WIDE_RUN_f32(OP, o, a, n) \
  { ew_f32_loop wide_ = ds_ew_wide_f32(EW_OP_##OP); if (wide_) { wide_(o, a, n); return; } }
#define WIDE_RUN_f64(OP, o, a, n)
#define WIDE_RUN_i64(OP, o, a, n)
#define WIDE_RUN_i32(OP, o, a, n)
#define WIDE_RUN_u8(OP, o, a, n)
#define WIDE_RUN_bool(OP, o, a, n)
#endif
