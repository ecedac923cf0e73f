/* model.c: the C embedding API: load a saved graph's plans (name.plan + name.safetensors, written by
   ds.save) and run them on the plan runtime, with no Lua. The plan file is binary (docs/FORMAT.md):
   one record per input-shape binding; ds_model_run picks the record whose input shapes match. */
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
#define MAX_PLANS 4096

/* the plan of one input-shape binding */
typedef struct {
  ds_plan *plan;
  int *in_buf, *out_buf;         /* buffer id of input i / output i */
  ds_tensor *in_spec, *out_spec; /* dtype and shape of each (data NULL) */
} model_plan;

struct ds_model {
  model_plan *plans;
  int nplans, ninputs, noutputs, nowned, capowned;
  ds_tensor **owned;             /* state and constant tensors, copied once out of the params file */
  int64_t *owned_offset;         /* where each one's bytes are in the params file (plans share them) */
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
  for (int i = 0; i < m->nplans; i++) {
    model_plan *q = &m->plans[i];
    ds_plan_free(q->plan); free(q->in_buf); free(q->out_buf); free(q->in_spec); free(q->out_spec);
  }
  for (int i = 0; i < m->nowned; i++) ds_tensor_free(m->owned[i]);
  free(m->plans); free(m->owned); free(m->owned_offset);
  free(m);
}

#define FAIL(...) do { ds_fail(DS_EINVAL, __VA_ARGS__); return -1; } while (0)

/* the state/constant tensor whose bytes are at b->data_offset: made once, shared by every plan */
static ds_tensor *owned_tensor(ds_model *m, const file_buffer *b, const char *params, int64_t xsize) {
  for (int i = 0; i < m->nowned; i++) {
    ds_tensor *t = m->owned[i];
    if (m->owned_offset[i] == b->data_offset && t->dtype == b->dtype && t->ndim == b->ndim &&
        memcmp(t->shape, b->shape, sizeof(int64_t) * (size_t)b->ndim) == 0) return t;
  }
  if (m->nowned == m->capowned) {
    int cap = m->capowned ? 2 * m->capowned : 64;
    ds_tensor **o = realloc(m->owned, sizeof *o * (size_t)cap);
    if (o) m->owned = o;
    int64_t *off = o ? realloc(m->owned_offset, sizeof *off * (size_t)cap) : NULL;
    if (!o || !off) { ds_fail(DS_ENOMEM, "model: out of memory"); return NULL; }
    m->owned_offset = off; m->capowned = cap;
  }
  ds_tensor *t = ds_tensor_new(b->dtype, b->ndim, b->shape);
  if (!t) return NULL;
  m->owned[m->nowned] = t; m->owned_offset[m->nowned] = b->data_offset; m->nowned++;
  int64_t need = t->numel * ds_dtype_size(b->dtype);
  if (b->data_bytes != need || b->data_offset < 8 || b->data_offset > xsize || b->data_bytes > xsize - b->data_offset) {
    ds_fail(DS_EINVAL, "model: a state tensor's data (%lld bytes at %lld) does not fit the params file or its shape",
            (long long)b->data_bytes, (long long)b->data_offset);
    return NULL;
  }
  if (need) memcpy(t->data, params + b->data_offset, (size_t)need);
  return t;
}

/* One plan record at pf + *pos (advanced past it) into q. 0, or -1 with ds_last_error set. */
static int load_plan(ds_model *m, model_plan *q, const char *pf, int64_t psize, int64_t *pos,
                     const char *params, int64_t xsize, uint32_t params_crc) {
  file_header h;
  if (psize - *pos < (int64_t)sizeof h) FAIL("model: plan file truncated in a plan header");
  memcpy(&h, pf + *pos, sizeof h); *pos += sizeof h;
  if (memcmp(h.magic, "DSPLAN01", 8) != 0 || h.version != 1) FAIL("model: not a version 1 ds plan file");
  if (h.nbuffers > (1u << 20) || h.nsteps > (1u << 20) || h.ninputs > 4096 || h.noutputs > 4096 || h.noutputs < 1)
    FAIL("model: plan counts out of range");
  if (h.params_bytes != xsize || h.params_crc32 != params_crc)
    FAIL("model: the params file (%lld bytes) is not the one the plan was saved with (replaced or truncated?)", (long long)xsize);
  if (q == &m->plans[0]) { m->ninputs = (int)h.ninputs; m->noutputs = (int)h.noutputs; }
  else if ((int)h.ninputs != m->ninputs || (int)h.noutputs != m->noutputs) FAIL("model: plans disagree on their inputs/outputs");
  q->plan = ds_plan_new(h.arena_bytes);
  if (!q->plan) return -1;
  q->in_buf = malloc(sizeof(int) * (h.ninputs + 1)); q->out_buf = malloc(sizeof(int) * h.noutputs);
  q->in_spec = calloc(h.ninputs + 1, sizeof(ds_tensor)); q->out_spec = calloc(h.noutputs, sizeof(ds_tensor));
  if (!q->in_buf || !q->out_buf || !q->in_spec || !q->out_spec) FAIL("model: out of memory");
  for (uint32_t i = 0; i < h.ninputs; i++) q->in_buf[i] = -1;
  for (uint32_t i = 0; i < h.noutputs; i++) q->out_buf[i] = -1;
  if ((int64_t)h.nbuffers * (int64_t)sizeof(file_buffer) > psize - *pos) FAIL("model: plan file truncated in its buffers");
  for (uint32_t i = 0; i < h.nbuffers; i++, *pos += sizeof(file_buffer)) {
    file_buffer b;
    memcpy(&b, pf + *pos, sizeof b);
    if (b.ndim < 0 || b.ndim > DS_MAXDIM) FAIL("model: buffer %u: %d dims", i, b.ndim);
    int id = ds_plan_add_buffer(q->plan, b.kind, b.base, b.dtype, b.ndim, b.shape, b.has_strides ? b.strides : NULL, b.offset);
    if (id < 0) return -1;
    int want_kind = b.role == ROLE_ARENA ? DS_BUF_ARENA : b.role == ROLE_VIEW ? DS_BUF_VIEW : DS_BUF_EXTERNAL;
    if (b.role < ROLE_ARENA || b.role > ROLE_VIEW || b.kind != want_kind) FAIL("model: buffer %u: role %d does not fit kind %d", i, b.role, b.kind);
    if (b.role == ROLE_INPUT || b.role == ROLE_OUTPUT) {
      int n = b.role == ROLE_INPUT ? m->ninputs : m->noutputs;
      int *ids = b.role == ROLE_INPUT ? q->in_buf : q->out_buf;
      ds_tensor *spec = b.role == ROLE_INPUT ? q->in_spec : q->out_spec;
      if (b.index < 1 || b.index > n || ids[b.index - 1] >= 0) FAIL("model: buffer %u: bad or repeated %s index %d", i, b.role == ROLE_INPUT ? "input" : "output", b.index);
      ids[b.index - 1] = id;
      ds_tensor *s = &spec[b.index - 1];
      s->dtype = b.dtype; s->ndim = b.ndim; s->numel = 1;
      int64_t st = 1;
      for (int d = b.ndim - 1; d >= 0; d--) { s->shape[d] = b.shape[d]; s->strides[d] = st; st *= b.shape[d]; s->numel *= b.shape[d]; }
    } else if (b.role == ROLE_STATE || b.role == ROLE_CONST) {
      ds_tensor *t = owned_tensor(m, &b, params, xsize);
      if (!t || ds_plan_bind(q->plan, id, t) != DS_OK) return -1;
    }
  }
  for (int i = 0; i < m->ninputs; i++) if (q->in_buf[i] < 0) FAIL("model: input %d has no buffer", i + 1);
  for (int i = 0; i < m->noutputs; i++) if (q->out_buf[i] < 0) FAIL("model: output %d has no buffer", i + 1);
  for (uint32_t i = 0; i < h.nsteps; i++) {
    file_step s;
    if ((int64_t)sizeof s > psize - *pos) FAIL("model: plan file truncated at step %u", i + 1);
    memcpy(&s, pf + *pos, sizeof s); *pos += sizeof s;
    if (memchr(s.kernel, 0, sizeof s.kernel) == NULL) FAIL("model: step %u: kernel name not terminated", i + 1);
    if (s.nbuf < 1 || s.nbuf > 256 || s.nattrs < 0 || s.nattrs > (1 << 20)) FAIL("model: step %u: bad operand counts", i + 1);
    if ((int64_t)s.nbuf * 4 + (int64_t)s.nattrs * 8 > psize - *pos) FAIL("model: plan file truncated at step %u", i + 1);
    int bufs[256];
    memcpy(bufs, pf + *pos, (size_t)s.nbuf * 4); *pos += (int64_t)s.nbuf * 4;
    double *attrs = malloc(sizeof(double) * ((size_t)s.nattrs + 1));
    if (!attrs) FAIL("model: out of memory");
    if (s.nattrs) memcpy(attrs, pf + *pos, (size_t)s.nattrs * 8);
    *pos += (int64_t)s.nattrs * 8;
    int rc = ds_plan_add_step(q->plan, s.kernel, s.nbuf, bufs, s.nattrs, attrs);
    free(attrs);
    if (rc < 0) return -1;
  }
  return 0;
}

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
  snprintf(fname, sizeof fname, "%s.safetensors", path);
  params = read_all(fname, &xsize, (int64_t)1 << 40);
  if (!params) goto fail;
  uint32_t crc = ds_crc32(params, xsize);
  int64_t pos = 0;
  int cap = 0;
  while (pos < psize) {
    if (m->nplans == MAX_PLANS) { ds_fail(DS_EINVAL, "model: more than %d plans", MAX_PLANS); goto fail; }
    if (m->nplans == cap) {
      cap = cap ? 2 * cap : 4;
      model_plan *p = realloc(m->plans, sizeof *p * (size_t)cap);
      if (!p) { ds_fail(DS_ENOMEM, "model: out of memory"); goto fail; }
      m->plans = p;
    }
    model_plan *q = &m->plans[m->nplans++];
    memset(q, 0, sizeof *q);
    if (load_plan(m, q, pf, psize, &pos, params, xsize, crc) != 0) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s (%s.plan, plan %d)", ds_last_error(), path, m->nplans);
      ds_set_error(msg);
      goto fail;
    }
  }
  if (m->nplans == 0) { ds_fail(DS_EINVAL, "model: %s.plan holds no plan", path); goto fail; }
  free(pf); free(params);
  return m;
fail:
  free(pf); free(params);
  ds_model_free(m);
  return NULL;
}

int ds_model_num_inputs(const ds_model *m) { return m ? m->ninputs : 0; }
int ds_model_num_outputs(const ds_model *m) { return m ? m->noutputs : 0; }
int ds_model_num_plans(const ds_model *m) { return m ? m->nplans : 0; }
const ds_tensor *ds_model_input_spec(const ds_model *m, int plan, int i) {
  return m && plan >= 0 && plan < m->nplans && i >= 0 && i < m->ninputs ? &m->plans[plan].in_spec[i] : NULL;
}
const ds_tensor *ds_model_output_spec(const ds_model *m, int plan, int i) {
  return m && plan >= 0 && plan < m->nplans && i >= 0 && i < m->noutputs ? &m->plans[plan].out_spec[i] : NULL;
}

static int same_shape(const ds_tensor *a, const ds_tensor *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
  for (int d = 0; d < a->ndim; d++) if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

/* inputs[i] / outputs[i]: contiguous tensors; the plan whose input shapes match runs (outputs must have
   that plan's output shapes: ds_model_output_spec of the plan ds_model_find_plan gives). */
int ds_model_find_plan(const ds_model *m, const ds_tensor *const *inputs) {
  if (!m || (!inputs && m->ninputs)) { ds_fail(DS_EINVAL, "model: NULL argument"); return -1; }
  for (int k = 0; k < m->nplans; k++) {
    int ok = 1;
    for (int i = 0; i < m->ninputs && ok; i++) ok = inputs[i] && same_shape(inputs[i], &m->plans[k].in_spec[i]);
    if (ok) return k;
  }
  char b1[128], b2[128];
  if (m->ninputs && inputs[0])
    ds_fail(DS_EINVAL, "model: no plan for these input shapes (input 1 is %s; plan 1 takes %s); save the model after "
            "calling it with these shapes", ds_shape_str(inputs[0], b1), ds_shape_str(&m->plans[0].in_spec[0], b2));
  else ds_fail(DS_EINVAL, "model: no plan for these inputs");
  return -1;
}

int ds_model_run(ds_model *m, const ds_tensor *const *inputs, ds_tensor *const *outputs) {
  if (!outputs) return ds_fail(DS_EINVAL, "model: NULL argument");
  int k = ds_model_find_plan(m, inputs);
  if (k < 0) return DS_EINVAL;
  model_plan *q = &m->plans[k];
  for (int i = 0; i < m->ninputs; i++) {
    int rc = ds_plan_bind(q->plan, q->in_buf[i], inputs[i]);
    if (rc) { char msg[512]; snprintf(msg, sizeof msg, "model: input %d: %s", i + 1, ds_last_error()); ds_set_error(msg); return rc; }
  }
  for (int i = 0; i < m->noutputs; i++) {
    if (!outputs[i]) return ds_fail(DS_EINVAL, "model: output %d missing", i + 1);
    int rc = ds_plan_bind(q->plan, q->out_buf[i], outputs[i]);
    if (rc) { char msg[512]; snprintf(msg, sizeof msg, "model: output %d: %s", i + 1, ds_last_error()); ds_set_error(msg); return rc; }
  }
  return ds_plan_run(q->plan);
}
