/* ds.h: the whole public C API of libds (plain declarations, fed to LuaJIT's ffi.cdef). */
/* No preprocessor lines below the guard except DS_MAXDIM: lua/ds/ffi.lua strips '#' lines. */
#ifndef DS_H
#define DS_H
#include <stdint.h>
#include <stddef.h>
#define DS_MAXDIM 8

/* ---- core types ---------------------------------------------------------------- */
/* dtype codes: every file format and lua/ds/dtype.lua take them from here (ds_dtype_name, ds_dtype_size) */
typedef enum { DS_F32 = 0, DS_F64 = 1, DS_I64 = 2, DS_I32 = 3, DS_U8 = 4, DS_BOOL = 5,
               DS_BF16 = 6, DS_F16 = 7, DS_I8 = 8, DS_NDTYPES = 9 } ds_dtype;
typedef enum { DS_OK = 0, DS_EINVAL = 1, DS_ENOMEM = 2, DS_ERANGE = 3, DS_EIO = 4 } ds_status;

typedef struct ds_storage {
  void *data;
  int64_t nbytes;
  int64_t refcount;
  int32_t external;        /* 1: memory not owned (mmap, caller buffer); never freed here */
  int32_t pad;
} ds_storage;

/* A strided view on a storage. shape/strides in elements; data = storage->data + offset. */
typedef struct ds_tensor {
  void *data;
  ds_storage *storage;
  int64_t offset;
  int64_t numel;
  int32_t dtype;
  int32_t ndim;
  int64_t shape[8];
  int64_t strides[8];
} ds_tensor;

/* Every kernel has this signature: t = outputs then inputs (count fixed per op),
   attrs = numbers packed by the op table (dims already 0-based). Returns ds_status. */
typedef int (*ds_kernel)(ds_tensor *const *t, const double *attrs);

/* ---- errors, memory, threads (core.c, mem.c) ------------------------------------ */
const char *ds_last_error(void);
void ds_set_error(const char *msg);
int64_t ds_dtype_size(int dtype);
const char *ds_dtype_name(int dtype);   /* "f32" .. "i8"; "?" for a bad code (codes 0 .. DS_NDTYPES - 1) */
ds_tensor *ds_tensor_new(int dtype, int ndim, const int64_t *shape);
ds_tensor *ds_tensor_view(const ds_tensor *src, int ndim, const int64_t *shape, const int64_t *strides, int64_t offset);
ds_tensor *ds_tensor_wrap(void *data, int64_t nbytes, int dtype, int ndim, const int64_t *shape);
void ds_tensor_free(ds_tensor *t);
/* Fill caller-owned structs (Lua keeps them in GC memory, so small tensors need no finalizer):
   init: contiguous tensor over data (s becomes an external storage); view_fill: a view of src. */
int ds_tensor_init(ds_tensor *t, ds_storage *s, void *data, int64_t nbytes, int dtype, int ndim, const int64_t *shape);
int ds_tensor_view_fill(ds_tensor *dst, const ds_tensor *src, int ndim, const int64_t *shape, const int64_t *strides,
    int64_t offset);
int ds_tensor_is_contiguous(const ds_tensor *t);
int64_t ds_mem_live_bytes(void);
int64_t ds_mem_cached_bytes(void);
int64_t ds_mem_peak_bytes(void);
void ds_mem_empty_cache(void);
void ds_set_num_threads(int n);
int ds_get_num_threads(void);
/* parallel regions whose threads started late, and the holds on one thread they started (a busy host; team.c) */
long ds_team_starved(void);
long ds_team_holds(void);
const char *ds_blas_corename(void);
const char *ds_blas_config(void);
int ds_blas_num_threads(void);
/* isa.c: kernels run AVX-512 micro-kernels when the CPU has them, else AVX2+FMA; every path gives the same
   bits. DS_ISA=avx2 (environment) forces the narrower path, DS_ISA=scalar the portable integer kernels.
   ds_isa_check: NULL, or why DS_ISA was refused. ds_int8_path (qgemm.c): "avx512-vnni", "avx2" or "scalar";
   ds_bf16_path (bgemm.c): "avx512-bf16", "avx2" or "scalar". */
const char *ds_isa_name(void);
const char *ds_isa_check(void);
const char *ds_int8_path(void);
const char *ds_bf16_path(void);

/* ---- kernel registry (kernels.c) ---------------------------------------------- */
/* Every kernel ds_<op>_<dtype> is listed in one src/<family>.def file and found by name here;
   the op table (lua/ds/ops/<family>.lua) names them, the graph runtime resolves plans by name. */
ds_kernel ds_kernel_find(const char *name);
int ds_kernel_count(void);
const char *ds_kernel_name(int i);
/* the tensors (outputs then inputs) a plan step gives kernel `name`: a fixed count, -1 when its attrs decide it
   (fused programs, cat), -2 for an unknown kernel */
int ds_kernel_operands(const char *name);
/* The elementwise op table (src/elementwise.def, one row per op; fused.c): an opcode is a row's position, the
   number fused programs use. kind: 0 unary, 1 unary with two params (attrs), 2 binary, 3 compare (bool
   result), 4 where, 5 cast; flags: 1 transcendental; dtypes: bit (1 << code) set for each ds_dtype the row has
   kernels for (its dtype list). Unknown names give -1, unknown opcodes kind -1 and flags/dtypes 0. */
int ds_ew_count(void);
const char *ds_ew_name(int op);
int ds_ew_opcode(const char *name);
int ds_ew_kind(int op);
int ds_ew_flags(int op);
int ds_ew_dtypes(int op);

/* ---- element access (core.c): item, totable, printing, tensor from a table --------- */
int ds_read_flat(const ds_tensor *t, double *out);            /* all elements, row-major */
int ds_write_flat(ds_tensor *t, const double *in);
int ds_read_flat_i64(const ds_tensor *t, int64_t *out);       /* exact for i64 */
int ds_write_flat_i64(ds_tensor *t, const int64_t *in);

/* ---- data files (dataio.c) ---- */
/* An IDX file (gzip or plain) as a new contiguous tensor (element types u8, i32, f32, f64);
   NULL on error, ds_last_error() names the file and what is wrong. */
ds_tensor *ds_idx_read(const char *path);
/* out[i] = src[idx[i]] along dim 1 (idx 0-based, n of them); both contiguous, same dtype. */
int ds_data_gather_rows(ds_tensor *out, const ds_tensor *src, const int64_t *idx, int64_t n);
/* out = a permutation of 0..n-1 drawn from seed (Fisher-Yates over splitmix64). */
int ds_data_permutation(int64_t *out, int64_t n, uint64_t seed);
int ds_isatty(int fd);   /* for progress bars: redraw a line on a terminal, plain lines otherwise */

/* ---- plan runtime (runtime.c) ---- */
/* A plan: buffers (views into one arena, bound external tensors, or views of those) and steps
   (a registry kernel on buffer ids, outputs then inputs, with packed attrs), run in C in order.
   Built by lua/ds/compile.lua (or src/model.c); every call validates and returns -1/NULL or a ds_status. */
typedef struct ds_plan ds_plan;
enum { DS_BUF_ARENA = 0, DS_BUF_EXTERNAL = 1, DS_BUF_VIEW = 2 };
ds_plan *ds_plan_new(int64_t arena_bytes);
void ds_plan_free(ds_plan *p);
int ds_plan_add_buffer(ds_plan *p, int kind, int base, int dtype, int ndim, const int64_t *shape,
                       const int64_t *strides, int64_t offset);
int ds_plan_add_step(ds_plan *p, const char *kernel, int nbuf, const int *bufs, int nattrs, const double *attrs);
int ds_plan_bind(ds_plan *p, int buffer, const ds_tensor *t);
/* a while loop over sub-plans cond and body (taken over); binding sources: 0.. loop variables then extras, -1 the
   cond's predicate, -(j + 2) the body's output j; max_trips < 0: unbounded (src/runtime.c, docs/FORMAT.md) */
int ds_plan_add_loop(ds_plan *p, ds_plan *cond, ds_plan *body, int nvars, int nextra, const int *bufs,
                     int ncb, const int *cb_sub, const int *cb_src, int nbb, const int *bb_sub, const int *bb_src,
                     int64_t max_trips);
int ds_plan_run(ds_plan *p);
int ds_plan_run_range(ds_plan *p, int first, int last);   /* steps [first, last), 0-based */
int ds_plan_prepare(ds_plan *p);                          /* arena allocated and touched before the first run */
const ds_tensor *ds_plan_buffer(ds_plan *p, int buffer); /* a buffer as resolved for the current run */
int64_t ds_plan_arena_bytes(const ds_plan *p);
int ds_plan_num_steps(const ds_plan *p);
int ds_plan_num_buffers(const ds_plan *p);
int ds_plan_profile(ds_plan *p, int on);                  /* 1: sum each step's wall time over runs; 0: stop */
double ds_plan_step_seconds(const ds_plan *p, int step);  /* 0-based; seconds summed while profiling */

/* model.c: the C embedding API. ds_model_load("dir/name") reads name.plan and the params file it names
   (written by ds.save; docs/FORMAT.md): one plan per input-shape binding saved. ds_model_run picks the plan
   whose input shapes match and runs it on contiguous input/output tensors (outputs of that plan's output
   specs). NULL / nonzero / -1 on error, with ds_last_error. */
typedef struct ds_model ds_model;
ds_model *ds_model_load(const char *path);
/* the same from the two files' bytes in memory (read, not kept; the plan's params_file is not opened) */
ds_model *ds_model_load_bytes(const void *plan, int64_t plan_bytes, const void *params, int64_t params_bytes);
int ds_model_num_inputs(const ds_model *m);
int ds_model_num_outputs(const ds_model *m);
int ds_model_num_plans(const ds_model *m);
const ds_tensor *ds_model_input_spec(const ds_model *m, int plan, int i);   /* 0-based; dtype, shape, no data */
const ds_tensor *ds_model_output_spec(const ds_model *m, int plan, int i);
int64_t ds_model_arena_bytes(const ds_model *m, int plan);   /* the memory plan's arena, allocated on first run */
int ds_model_find_plan(const ds_model *m, const ds_tensor *const *inputs);  /* the plan for these shapes, or -1 */
int ds_model_run(ds_model *m, const ds_tensor *const *inputs, ds_tensor *const *outputs);
void ds_model_free(ds_model *m);
/* The plan file (docs/FORMAT.md), little-endian, no padding: one file header; its body: nops elementwise op
   names (char[32] each, in the saving engine's opcode order: fused programs' opcodes index it), then nrecords
   records, each a record header, nbuffers buffers, nsteps steps (each followed by i32 buffers[nbuf], f64
   attrs[nattrs]). Written by lua/ds/io/plan_writer.lua, read by model.c. */
typedef struct { char magic[8]; uint32_t version, nrecords, params_crc32, body_crc32, nops, reserved;
                 int64_t params_bytes, body_bytes; char params_file[256]; } ds_planfile_header;
typedef struct { char name[32]; } ds_planfile_opname;
typedef struct { uint32_t nbuffers, nsteps, ninputs, noutputs; int64_t arena_bytes; } ds_planfile_record;
typedef struct { int32_t kind, base, dtype, ndim, role, index, has_strides, pad;
                 int64_t offset, data_offset, data_bytes; int64_t shape[8], strides[8]; } ds_planfile_buffer;
typedef struct { char kernel[64]; int32_t nbuf, nattrs; } ds_planfile_step;
enum { DS_ROLE_ARENA, DS_ROLE_INPUT, DS_ROLE_OUTPUT, DS_ROLE_STATE, DS_ROLE_CONST, DS_ROLE_VIEW };

/* fileio.c: files for savers and loaders. ds_file_read: a whole regular file copied into new memory, and
   its CRC-32 if crc is not NULL (FIFOs, devices, directories refused before reading; free with ds_file_free).
   ds_file_sync: fsync of a file or directory. ds_dir_list: NUL-separated names, returns the bytes needed.
   ds_dir_lock: an exclusive flock on a directory (a handle, or -1). */
uint32_t ds_crc32(const void *p, int64_t n);
void *ds_file_read(const char *path, int64_t limit, int64_t *size, uint32_t *crc);
void ds_file_free(void *p);
int ds_file_sync(const char *path);
int64_t ds_dir_list(const char *dir, char *out, int64_t cap);
int ds_dir_lock(const char *dir);
void ds_dir_unlock(int handle);
int ds_process_id(void);
int ds_process_alive(int pid);

/* collective.c: collectives with a fixed reduction order over MPI functions registered from Lua (ds.distributed);
   libds does not link MPI. Handles are Open MPI's (pointers); rank is 0-based here, 1-based in Lua. A
   world of size 1 needs no functions. The collectives fail (naming the silent rank) after `timeout` seconds, and
   on every rank when the ranks disagree on the collective, its dtype, shape, reduction or root. */
enum { DS_REDUCE_SUM = 0, DS_REDUCE_MEAN = 1, DS_REDUCE_MAX = 2 };
typedef struct ds_comm {
  int32_t rank, size;
  double timeout;
  void *comm, *byte;   /* MPI_Comm, MPI_Datatype MPI_BYTE */
  int (*isend)(const void *buf, int count, void *type, int dest, int tag, void *comm, void **req);
  int (*irecv)(void *buf, int count, void *type, int source, int tag, void *comm, void **req);
  int (*test)(void **req, int *flag, void *status);
  double (*wtime)(void);
} ds_comm;
int ds_comm_set(const ds_comm *c);     /* NULL: forget the world */
int ds_comm_size(void);                /* 0 when not set */
int ds_comm_all_reduce(ds_tensor *out, const ds_tensor *in, int op);
int ds_comm_reduce_scatter(ds_tensor *out, const ds_tensor *in, int op);
int ds_comm_all_gather(ds_tensor *out, const ds_tensor *in);
int ds_comm_broadcast(ds_tensor *t, int root);
int ds_comm_barrier(void);
int ds_comm_finalize(void);            /* every rank ends here (no deadline); else an error naming the one that does not */

#endif
