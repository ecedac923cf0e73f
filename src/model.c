/* model.c: the C embedding API: load a saved graph's plan (name.plan + name.safetensors, written by
   ds.save) and run it on the plan runtime, with no Lua. The plan file is binary (docs/FORMAT.md). */
#include "internal.h"
#include <stdlib.h>
#include <zlib.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

typedef struct { char magic[8]; uint32_t version, nbuffers, nsteps, ninputs, noutputs, params_crc32;
                 int64_t arena_bytes, params_bytes; } file_header;
typedef struct { int32_t kind, base, dtype, ndim, role, index, has_strides, pad;
                 int64_t offset, data_offset, data_bytes; int64_t shape[8], strides[8]; } file_buffer;
typedef struct { char kernel[64]; int32_t nbuf, nattrs; } file_step;
enum { ROLE_ARENA, ROLE_INPUT, ROLE_OUTPUT, ROLE_STATE, ROLE_CONST, ROLE_VIEW };

struct ds_model {
  ds_plan *plan;
  int ninputs, noutputs, nowned;
  int *in_buf, *out_buf;      /* buffer id of input i / output i */
  ds_tensor *in_spec, *out_spec; /* dtype and shape of each (data NULL) */
  ds_tensor **owned;          /* state and constant tensors (copied out of the params file) */
};

uint32_t ds_crc32(const void *p, int64_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (int64_t off = 0; off < n; off += (1 << 30)) {
    int64_t k = n - off < (1 << 30) ? n - off : (1 << 30);
    crc = crc32(crc, (const Bytef *)p + off, (uInt)k);
  }
  return (uint32_t)crc;
}

/* Map a whole file copy-on-write: pages are shared between processes until written. */
void *ds_file_map(const char *path, int64_t *size) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) { ds_fail(DS_EIO, "cannot open %s", path); return NULL; }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { close(fd); ds_fail(DS_EIO, "%s is not a regular file", path); return NULL; }
  *size = st.st_size;
  void *p = mmap(NULL, st.st_size > 0 ? (size_t)st.st_size : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) { ds_fail(DS_EIO, "cannot map %s", path); return NULL; }
  return p;
}
void ds_file_unmap(void *p, int64_t size) { if (p) munmap(p, size > 0 ? (size_t)size : 1); }

static char *read_all(const char *path, int64_t *size, int64_t limit) {
  FILE *f = fopen(path, "rb");
  if (!f) { ds_fail(DS_EIO, "model: cannot open %s", path); return NULL; }
  char *buf = NULL;
  if (fseek(f, 0, SEEK_END) != 0) goto io;
  long n = ftell(f);
  if (n < 0 || n > limit) { fclose(f); ds_fail(DS_EIO, "model: %s has %ld bytes (limit %lld)", path, n, (long long)limit); return NULL; }
  if (fseek(f, 0, SEEK_SET) != 0) goto io;
  buf = malloc((size_t)n + 1);
  if (!buf) { fclose(f); ds_fail(DS_ENOMEM, "model: out of memory reading %s", path); return NULL; }
  if (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) goto io;
  fclose(f);
  *size = n;
  return buf;
io:
  free(buf); fclose(f);
  ds_fail(DS_EIO, "model: cannot read %s", path);
  return NULL;
}

void ds_model_free(ds_model *m) {
  if (!m) return;
  ds_plan_free(m->plan);
  for (int i = 0; i < m->nowned; i++) ds_tensor_free(m->owned[i]);
  free(m->owned); free(m->in_buf); free(m->out_buf); free(m->in_spec); free(m->out_spec);
  free(m);
}

#define FAIL(...) do { ds_fail(DS_EINVAL, __VA_ARGS__); goto fail; } while (0)

/* path: "dir/name" (reads dir/name.plan and dir/name.safetensors). NULL on error (ds_last_error). */
ds_model *ds_model_load(const char *path) {
  if (!path || strlen(path) > 4000) { ds_fail(DS_EINVAL, "model: bad path"); return NULL; }
  char fname[4100];
  int64_t psize = 0, xsize = 0;
  snprintf(fname, sizeof fname, "%s.plan", path);
  char *pf = read_all(fname, &psize, (int64_t)1 << 30), *params = NULL;
  if (!pf) return NULL;
  ds_model *m = calloc(1, sizeof *m);
  if (!m) { free(pf); ds_fail(DS_ENOMEM, "model: out of memory"); return NULL; }
  file_header h;
  if (psize < (int64_t)sizeof h) FAIL("model: %s is truncated (%lld bytes)", fname, (long long)psize);
  memcpy(&h, pf, sizeof h);
  if (memcmp(h.magic, "DSPLAN01", 8) != 0 || h.version != 1) FAIL("model: %s is not a version 1 ds plan file", fname);
  if (h.nbuffers > (1u << 20) || h.nsteps > (1u << 20) || h.ninputs > 4096 || h.noutputs > 4096 || h.noutputs < 1)
    FAIL("model: %s: counts out of range", fname);
  snprintf(fname, sizeof fname, "%s.safetensors", path);
  params = read_all(fname, &xsize, (int64_t)1 << 40);
  if (!params) goto fail;
  if (xsize != h.params_bytes) FAIL("model: %s has %lld bytes, the plan expects %lld (replaced or truncated?)", fname, (long long)xsize, (long long)h.params_bytes);
  if (ds_crc32(params, xsize) != h.params_crc32) FAIL("model: %s does not match the plan's checksum", fname);
  m->plan = ds_plan_new(h.arena_bytes);
  if (!m->plan) goto fail;
  m->ninputs = (int)h.ninputs; m->noutputs = (int)h.noutputs;
  m->in_buf = malloc(sizeof(int) * (h.ninputs + 1)); m->out_buf = malloc(sizeof(int) * h.noutputs);
  m->in_spec = calloc(h.ninputs + 1, sizeof(ds_tensor)); m->out_spec = calloc(h.noutputs, sizeof(ds_tensor));
  m->owned = calloc(h.nbuffers + 1, sizeof(ds_tensor *));
  if (!m->in_buf || !m->out_buf || !m->in_spec || !m->out_spec || !m->owned) FAIL("model: out of memory");
  for (uint32_t i = 0; i < h.ninputs; i++) m->in_buf[i] = -1;
  for (uint32_t i = 0; i < h.noutputs; i++) m->out_buf[i] = -1;
  int64_t pos = sizeof h;
  if ((int64_t)h.nbuffers * (int64_t)sizeof(file_buffer) > psize - pos) FAIL("model: plan file truncated in its buffers");
  for (uint32_t i = 0; i < h.nbuffers; i++, pos += sizeof(file_buffer)) {
    file_buffer b;
    memcpy(&b, pf + pos, sizeof b);
    if (b.ndim < 0 || b.ndim > DS_MAXDIM) FAIL("model: buffer %u: %d dims", i, b.ndim);
    int id = ds_plan_add_buffer(m->plan, b.kind, b.base, b.dtype, b.ndim, b.shape, b.has_strides ? b.strides : NULL, b.offset);
    if (id < 0) goto fail;
    int want_kind = b.role == ROLE_ARENA ? DS_BUF_ARENA : b.role == ROLE_VIEW ? DS_BUF_VIEW : DS_BUF_EXTERNAL;
    if (b.role < ROLE_ARENA || b.role > ROLE_VIEW || b.kind != want_kind) FAIL("model: buffer %u: role %d does not fit kind %d", i, b.role, b.kind);
    if (b.role == ROLE_INPUT || b.role == ROLE_OUTPUT) {
      int n = b.role == ROLE_INPUT ? m->ninputs : m->noutputs;
      int *ids = b.role == ROLE_INPUT ? m->in_buf : m->out_buf;
      ds_tensor *spec = b.role == ROLE_INPUT ? m->in_spec : m->out_spec;
      if (b.index < 1 || b.index > n || ids[b.index - 1] >= 0) FAIL("model: buffer %u: bad or repeated %s index %d", i, b.role == ROLE_INPUT ? "input" : "output", b.index);
      ids[b.index - 1] = id;
      ds_tensor *s = &spec[b.index - 1];
      s->dtype = b.dtype; s->ndim = b.ndim; s->numel = 1;
      for (int d = 0; d < b.ndim; d++) { s->shape[d] = b.shape[d]; s->numel *= b.shape[d]; }
      int64_t st = 1;
      for (int d = b.ndim - 1; d >= 0; d--) { s->strides[d] = st; st *= b.shape[d]; }
    } else if (b.role == ROLE_STATE || b.role == ROLE_CONST) {
      ds_tensor *t = ds_tensor_new(b.dtype, b.ndim, b.shape);
      if (!t) goto fail;
      m->owned[m->nowned++] = t;
      int64_t need = t->numel * ds_dtype_size(b.dtype);
      if (b.data_bytes != need || b.data_offset < 8 || b.data_offset > xsize || b.data_bytes > xsize - b.data_offset)
        FAIL("model: buffer %u: its data (%lld bytes at %lld) does not fit the params file or its shape", i, (long long)b.data_bytes, (long long)b.data_offset);
      if (need) memcpy(t->data, params + b.data_offset, (size_t)need);
      if (ds_plan_bind(m->plan, id, t) != DS_OK) goto fail;
    }
  }
  for (int i = 0; i < m->ninputs; i++) if (m->in_buf[i] < 0) FAIL("model: input %d has no buffer", i + 1);
  for (int i = 0; i < m->noutputs; i++) if (m->out_buf[i] < 0) FAIL("model: output %d has no buffer", i + 1);
  for (uint32_t i = 0; i < h.nsteps; i++) {
    file_step s;
    if ((int64_t)sizeof s > psize - pos) FAIL("model: plan file truncated at step %u", i + 1);
    memcpy(&s, pf + pos, sizeof s); pos += sizeof s;
    if (memchr(s.kernel, 0, sizeof s.kernel) == NULL) FAIL("model: step %u: kernel name not terminated", i + 1);
    if (s.nbuf < 1 || s.nbuf > 256 || s.nattrs < 0 || s.nattrs > (1 << 20)) FAIL("model: step %u: bad operand counts", i + 1);
    if ((int64_t)s.nbuf * 4 + (int64_t)s.nattrs * 8 > psize - pos) FAIL("model: plan file truncated at step %u", i + 1);
    int bufs[256];
    memcpy(bufs, pf + pos, (size_t)s.nbuf * 4); pos += (int64_t)s.nbuf * 4;
    double *attrs = malloc(sizeof(double) * ((size_t)s.nattrs + 1));
    if (!attrs) FAIL("model: out of memory");
    if (s.nattrs) memcpy(attrs, pf + pos, (size_t)s.nattrs * 8);
    pos += (int64_t)s.nattrs * 8;
    int rc = ds_plan_add_step(m->plan, s.kernel, s.nbuf, bufs, s.nattrs, attrs);
    free(attrs);
    if (rc < 0) goto fail;
  }
  if (pos != psize) FAIL("model: plan file has %lld trailing bytes", (long long)(psize - pos));
  free(pf); free(params);
  return m;
fail:
  free(pf); free(params);
  ds_model_free(m);
  return NULL;
}

int ds_model_num_inputs(const ds_model *m) { return m ? m->ninputs : 0; }
int ds_model_num_outputs(const ds_model *m) { return m ? m->noutputs : 0; }
const ds_tensor *ds_model_input_spec(const ds_model *m, int i) { return m && i >= 0 && i < m->ninputs ? &m->in_spec[i] : NULL; }
const ds_tensor *ds_model_output_spec(const ds_model *m, int i) { return m && i >= 0 && i < m->noutputs ? &m->out_spec[i] : NULL; }

/* inputs[i] / outputs[i]: contiguous tensors of the specs' dtypes and shapes (outputs written). */
int ds_model_run(ds_model *m, const ds_tensor *const *inputs, ds_tensor *const *outputs) {
  if (!m || (!inputs && m->ninputs) || !outputs) return ds_fail(DS_EINVAL, "model: NULL argument");
  for (int i = 0; i < m->ninputs; i++) {
    if (!inputs[i]) return ds_fail(DS_EINVAL, "model: input %d missing", i + 1);
    int rc = ds_plan_bind(m->plan, m->in_buf[i], inputs[i]);
    if (rc) { char msg[512]; snprintf(msg, sizeof msg, "model: input %d: %s", i + 1, ds_last_error()); ds_set_error(msg); return rc; }
  }
  for (int i = 0; i < m->noutputs; i++) {
    if (!outputs[i]) return ds_fail(DS_EINVAL, "model: output %d missing", i + 1);
    int rc = ds_plan_bind(m->plan, m->out_buf[i], outputs[i]);
    if (rc) { char msg[512]; snprintf(msg, sizeof msg, "model: output %d: %s", i + 1, ds_last_error()); ds_set_error(msg); return rc; }
  }
  return ds_plan_run(m->plan);
}
