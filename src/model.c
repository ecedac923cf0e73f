/* model.c: the C embedding API: load a saved graph's plans (name.plan and the params file it names,
   written by ds.save) and run them on the plan runtime, with no Lua. The plan file is binary
   (docs/FORMAT.md, structs in ds.h): a header with its own checksum, then one record per input-shape
   binding; ds_model_run picks the record whose input shapes match. Every count, offset, shape, stride
   and view bound of the file is checked here with overflow-safe arithmetic before the runtime sees it. */
#include "internal.h"
#include <stdlib.h>

#define MAX_PLANS 4096
#define MAX_PLAN_FILE ((int64_t)1 << 30)
#define MAX_PARAMS_FILE ((int64_t)1 << 40)

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

/* the state/constant tensor whose bytes are at b->data_offset: made once, shared by every plan. numel: the
   buffer's element count (buffer_span, overflow-checked); its bytes must lie in the params file before any
   allocation, so a small file cannot ask for a large tensor. */
static ds_tensor *owned_tensor(ds_model *m, const ds_planfile_buffer *b, const char *params, int64_t xsize,
                               int64_t numel) {
  int64_t size = ds_dtype_size(b->dtype);
  if (size <= 0 || numel > (INT64_MAX / size) || b->data_bytes != numel * size || b->data_offset < 8 ||
      b->data_offset > xsize || b->data_bytes > xsize - b->data_offset) {
    ds_fail(DS_EINVAL, "model: a state tensor's data (%lld bytes at %lld) does not fit the params file or its shape",
            (long long)b->data_bytes, (long long)b->data_offset);
    return NULL;
  }
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
  if (b->data_bytes) memcpy(t->data, params + b->data_offset, (size_t)b->data_bytes);
  return t;
}

/* The element range [lo, hi] a buffer spans (shape and strides of the file), overflow-checked; also its
   element count. 0, or -1 with ds_last_error set. */
static int buffer_span(const ds_planfile_buffer *b, uint32_t i, int64_t *numel, int64_t *lo, int64_t *hi) {
  if (b->dtype < DS_F32 || b->dtype >= DS_NDTYPES) FAIL("model: buffer %u: dtype %d", i, b->dtype);
  if (b->ndim < 0 || b->ndim > DS_MAXDIM) FAIL("model: buffer %u: %d dims", i, b->ndim);
  int64_t n = 1, l = 0, h = 0, contiguous = 1;
  for (int d = b->ndim - 1; d >= 0; d--) {
    int64_t size = b->shape[d], stride = b->has_strides ? b->strides[d] : contiguous, reach;
    if (size < 0) FAIL("model: buffer %u: dim %d is %lld", i, d + 1, (long long)size);
    if (__builtin_mul_overflow(n, size, &n) || (size > 0 && __builtin_mul_overflow(contiguous, size, &contiguous)))
      FAIL("model: buffer %u: shape overflows", i);
    if (size == 0 || stride == INT64_MIN || __builtin_mul_overflow(size - 1, stride < 0 ? -stride : stride, &reach))
      { if (size != 0) FAIL("model: buffer %u: strides overflow", i); continue; }
    if (stride < 0 ? __builtin_sub_overflow(l, reach, &l) : __builtin_add_overflow(h, reach, &h))
      FAIL("model: buffer %u: strides overflow", i);
  }
  *numel = n; *lo = l; *hi = h;
  return 0;
}

/* The bounds of buffer i against the arena or its view base (spans of the buffers before it). */
static int check_buffer(const ds_planfile_buffer *b, uint32_t i, const int64_t (*span)[2],
                        const ds_planfile_buffer *bufs, int64_t arena_bytes) {
  int64_t numel, lo, hi, end;
  if (buffer_span(b, i, &numel, &lo, &hi) != 0) return -1;
  int64_t es = ds_dtype_size(b->dtype);
  if (b->kind == DS_BUF_ARENA && numel > 0) {
    if (b->offset < 0 || b->offset % es != 0 || lo < 0 || __builtin_mul_overflow(hi + 1, es, &end) ||
        __builtin_add_overflow(end, b->offset, &end) || end > arena_bytes)
      FAIL("model: buffer %u lies outside the %lld-byte arena", i, (long long)arena_bytes);
  } else if (b->kind == DS_BUF_VIEW) {
    if (b->base < 0 || (uint32_t)b->base >= i || bufs[b->base].kind == DS_BUF_VIEW || bufs[b->base].dtype != b->dtype)
      FAIL("model: buffer %u: view base %d is not an earlier arena or external buffer of its dtype", i, b->base);
    int64_t first, last;
    if (numel > 0 && (__builtin_add_overflow(b->offset, lo, &first) || __builtin_add_overflow(b->offset, hi, &last) ||
                      span[b->base][1] < span[b->base][0] || first < span[b->base][0] || last > span[b->base][1]))
      FAIL("model: buffer %u: view outside its base buffer %d", i, b->base);
  } else if (b->kind != DS_BUF_ARENA && b->kind != DS_BUF_EXTERNAL) FAIL("model: buffer %u: kind %d", i, b->kind);
  return 0;
}

/* a loop step's sub-plan record (docs/FORMAT.md): its inputs are the loop's sources (loop variables, then
   extras), its outputs the cond's predicate or the body's next loop variables; nsrc, nout: their counts.
   n, sub, src: the bindings for ds_plan_add_loop. */
typedef struct {
  int cond, nsrc, nout, n, *sub, *src;
  ds_plan *plan;
} sub_record;

#define DS_LOOP_STEP "ds_loop"   /* the kernel name of a loop step (no registry kernel has it) */
#define MAX_LOOP_DEPTH 8
#define MAX_LOOP_TRIPS 1000000   /* ds.load's default bound (lua/ds/io.lua MAX_LOOP_TRIPS) */

static int load_record(ds_model *m, model_plan *q, sub_record *sr, const char *pf, int64_t psize, int64_t *pos,
                       const char *params, int64_t xsize, int depth);

/* the loop step whose header is s (*pos past its operands ops): two attrs (nvars, max_trips), then its cond and
   body records, added to plan */
static int load_loop(ds_model *m, ds_plan *plan, const ds_planfile_step *s, const int *ops, const char *pf,
                     int64_t psize, int64_t *pos, const char *params, int64_t xsize, int depth, uint32_t i) {
  double a[2];
  if (s->nattrs != 2) FAIL("model: step %u: a loop step has 2 attrs, got %d", i + 1, s->nattrs);
  memcpy(a, pf + *pos, sizeof a); *pos += (int64_t)sizeof a;
  if (!(a[0] >= 1 && a[0] <= s->nbuf / 2 && a[0] == (int)a[0]))
    FAIL("model: step %u: a loop of %g variables with %d operands", i + 1, a[0], s->nbuf);
  if (!(a[1] >= 1 && a[1] <= MAX_LOOP_TRIPS && a[1] == (double)(int64_t)a[1]))
    FAIL("model: step %u: loop max_trips %g is not an integer in 1..%d", i + 1, a[1], MAX_LOOP_TRIPS);
  if (depth >= MAX_LOOP_DEPTH) FAIL("model: step %u: loops nested deeper than %d", i + 1, MAX_LOOP_DEPTH);
  int nvars = (int)a[0], nextra = s->nbuf - 2 * nvars;
  sub_record c = { 1, nvars + nextra, 1, 0, NULL, NULL, NULL }, b = { 0, nvars + nextra, nvars, 0, NULL, NULL, NULL };
  int rc = -1;
  if (load_record(m, NULL, &c, pf, psize, pos, params, xsize, depth + 1) == 0 &&
      load_record(m, NULL, &b, pf, psize, pos, params, xsize, depth + 1) == 0) {
    rc = ds_plan_add_loop(plan, c.plan, b.plan, nvars, nextra, ops, c.n, c.sub, c.src, b.n, b.sub, b.src,
                          (int64_t)a[1]) < 0 ? -1 : 0;
    c.plan = b.plan = NULL;   /* the loop step took them (and freed them when it failed) */
  }
  if (rc != 0) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s (the loop at step %u)", ds_last_error(), i + 1);
    ds_set_error(msg);
  }
  ds_plan_free(c.plan); ds_plan_free(b.plan);
  free(c.sub); free(c.src); free(b.sub); free(b.src);
  return rc;
}

/* buffer b's role in a model plan q: inputs, outputs (their specs), state and constants (bound to tensors made
   from the params file) */
static int model_role(ds_model *m, model_plan *q, const ds_planfile_buffer *b, uint32_t i, int id, int64_t numel,
                      const char *params, int64_t xsize) {
  if (b->role == DS_ROLE_INPUT || b->role == DS_ROLE_OUTPUT) {
    int n = b->role == DS_ROLE_INPUT ? m->ninputs : m->noutputs;
    int *ids = b->role == DS_ROLE_INPUT ? q->in_buf : q->out_buf;
    ds_tensor *spec = b->role == DS_ROLE_INPUT ? q->in_spec : q->out_spec;
    if (b->index < 1 || b->index > n || ids[b->index - 1] >= 0)
      FAIL("model: buffer %u: bad or repeated %s index %d", i, b->role == DS_ROLE_INPUT ? "input" : "output",
           b->index);
    ids[b->index - 1] = id;
    ds_tensor *s = &spec[b->index - 1];
    s->dtype = b->dtype; s->ndim = b->ndim; s->numel = numel;
    int64_t st = 1;
    for (int d = b->ndim - 1; d >= 0; d--) {
      s->shape[d] = b->shape[d];
      s->strides[d] = st;
      st *= b->shape[d] ? b->shape[d] : 1;
    }
  } else if (b->role == DS_ROLE_STATE || b->role == DS_ROLE_CONST) {
    ds_tensor *t = owned_tensor(m, b, params, xsize, numel);
    if (!t || ds_plan_bind(q->plan, id, t) != DS_OK) return -1;
  }
  return 0;
}

/* buffer b's role in a loop's sub-plan: an input is bound to loop source index - 1, output j to the cond's
   predicate or the body's output j; no state or constants (the loop's extras carry them) */
static int sub_role(sub_record *sr, const ds_planfile_buffer *b, uint32_t i, int id) {
  if (b->role == DS_ROLE_STATE || b->role == DS_ROLE_CONST)
    FAIL("model: buffer %u: a loop sub-plan has no state or constant buffers", i);
  if (b->role != DS_ROLE_INPUT && b->role != DS_ROLE_OUTPUT) return 0;
  int n = b->role == DS_ROLE_INPUT ? sr->nsrc : sr->nout;
  if (b->index < 1 || b->index > n)
    FAIL("model: buffer %u: %s index %d of a loop sub-plan (1..%d)", i, b->role == DS_ROLE_INPUT ? "input" : "output",
         b->index, n);
  sr->sub[sr->n] = id;
  sr->src[sr->n++] = b->role == DS_ROLE_INPUT ? b->index - 1 : sr->cond ? -1 : -(b->index + 1);
  return 0;
}

/* One plan record at pf + *pos (advanced past it) into q (a model's plan) or sr (a loop's sub-plan, depth loops
   deep). 0, or -1 with ds_last_error set. */
static int load_record(ds_model *m, model_plan *q, sub_record *sr, const char *pf, int64_t psize, int64_t *pos,
                       const char *params, int64_t xsize, int depth) {
  ds_planfile_record h;
  if (psize - *pos < (int64_t)sizeof h) FAIL("model: plan file truncated in a record header");
  memcpy(&h, pf + *pos, sizeof h); *pos += sizeof h;
  if (h.nbuffers > (1u << 20) || h.nsteps > (1u << 20) || h.ninputs > 65536 || h.noutputs > 65536 ||
      h.noutputs < 1 || h.arena_bytes < 0)
    FAIL("model: plan counts out of range");
  if (sr) {
    if ((int)h.ninputs != sr->nsrc || (int)h.noutputs != sr->nout)
      FAIL("model: a loop sub-plan has %u inputs and %u outputs, its loop gives %d and takes %d", h.ninputs,
           h.noutputs, sr->nsrc, sr->nout);
  } else if (h.ninputs > 4096 || h.noutputs > 4096) {
    FAIL("model: plan counts out of range");
  } else if (q == &m->plans[0]) {
    m->ninputs = (int)h.ninputs;
    m->noutputs = (int)h.noutputs;
  } else if ((int)h.ninputs != m->ninputs || (int)h.noutputs != m->noutputs)
    FAIL("model: plans disagree on their inputs/outputs");
  if ((int64_t)h.nbuffers * (int64_t)sizeof(ds_planfile_buffer) > psize - *pos)
    FAIL("model: plan file truncated in its buffers");
  ds_plan *plan = ds_plan_new(h.arena_bytes);
  if (!plan) return -1;
  if (sr) sr->plan = plan; else q->plan = plan;
  ds_planfile_buffer *bufs = malloc(sizeof *bufs * ((size_t)h.nbuffers + 1));
  int64_t (*span)[2] = malloc(sizeof *span * ((size_t)h.nbuffers + 1));
  int *ops = NULL;
  int rc = -1;
  if (sr) {
    sr->sub = malloc(sizeof(int) * ((size_t)h.nbuffers + 1)); sr->src = malloc(sizeof(int) * ((size_t)h.nbuffers + 1));
    if (!sr->sub || !sr->src) { ds_fail(DS_ENOMEM, "model: out of memory"); goto done; }
  } else {
    q->in_buf = malloc(sizeof(int) * (h.ninputs + 1)); q->out_buf = malloc(sizeof(int) * h.noutputs);
    q->in_spec = calloc(h.ninputs + 1, sizeof(ds_tensor)); q->out_spec = calloc(h.noutputs, sizeof(ds_tensor));
    if (!q->in_buf || !q->out_buf || !q->in_spec || !q->out_spec) { ds_fail(DS_ENOMEM, "model: out of memory"); goto done; }
    for (uint32_t i = 0; i < h.ninputs; i++) q->in_buf[i] = -1;
    for (uint32_t i = 0; i < h.noutputs; i++) q->out_buf[i] = -1;
  }
  if (!bufs || !span) { ds_fail(DS_ENOMEM, "model: out of memory"); goto done; }
  for (uint32_t i = 0; i < h.nbuffers; i++, *pos += sizeof(ds_planfile_buffer)) {
    ds_planfile_buffer *b = &bufs[i];
    memcpy(b, pf + *pos, sizeof *b);
    int64_t numel;
    if (check_buffer(b, i, (const int64_t (*)[2])span, bufs, h.arena_bytes) != 0 ||
        buffer_span(b, i, &numel, &span[i][0], &span[i][1]) != 0) goto done;
    if (numel == 0) span[i][1] = span[i][0] - 1;   /* an empty buffer holds no element a view could reach */
    int id = ds_plan_add_buffer(plan, b->kind, b->base, b->dtype, b->ndim, b->shape,
                                b->has_strides ? b->strides : NULL, b->offset);
    if (id < 0) goto done;
    int want_kind = b->role == DS_ROLE_ARENA ? DS_BUF_ARENA : b->role == DS_ROLE_VIEW ? DS_BUF_VIEW : DS_BUF_EXTERNAL;
    if (b->role < DS_ROLE_ARENA || b->role > DS_ROLE_VIEW || b->kind != want_kind) {
      ds_fail(DS_EINVAL, "model: buffer %u: role %d does not fit kind %d", i, b->role, b->kind); goto done;
    }
    if (sr ? sub_role(sr, b, i, id) : model_role(m, q, b, i, id, numel, params, xsize)) goto done;
  }
  for (int i = 0; !sr && i < m->ninputs; i++)
    if (q->in_buf[i] < 0) {
      ds_fail(DS_EINVAL, "model: input %d has no buffer", i + 1);
      goto done;
    }
  for (int i = 0; !sr && i < m->noutputs; i++)
    if (q->out_buf[i] < 0) {
      ds_fail(DS_EINVAL, "model: output %d has no buffer", i + 1);
      goto done;
    }
  for (uint32_t i = 0; i < h.nsteps; i++) {
    ds_planfile_step s;
    if ((int64_t)sizeof s > psize - *pos) {
      ds_fail(DS_EINVAL, "model: plan file truncated at step %u", i + 1);
      goto done;
    }
    memcpy(&s, pf + *pos, sizeof s); *pos += sizeof s;
    if (memchr(s.kernel, 0, sizeof s.kernel) == NULL) {
      ds_fail(DS_EINVAL, "model: step %u: kernel name not terminated", i + 1);
      goto done;
    }
    int loop = strcmp(s.kernel, DS_LOOP_STEP) == 0;
    if (!loop && !ds_kernel_find(s.kernel)) {
      ds_fail(DS_EINVAL, "model: step %u: kernel '%s' is not in this libds (saved by a newer ds?)", i + 1, s.kernel);
      goto done;
    }
    if (s.nbuf < 1 || s.nbuf > (loop ? 65536 : 256) || s.nattrs < 0 || s.nattrs > (1 << 20)) {
      ds_fail(DS_EINVAL, "model: step %u: bad operand counts", i + 1);
      goto done;
    }
    if ((int64_t)s.nbuf * 4 + (int64_t)s.nattrs * 8 > psize - *pos) {
      ds_fail(DS_EINVAL, "model: plan file truncated at step %u", i + 1);
      goto done;
    }
    free(ops);
    ops = malloc(sizeof(int) * (size_t)s.nbuf);
    if (!ops) { ds_fail(DS_ENOMEM, "model: out of memory"); goto done; }
    memcpy(ops, pf + *pos, (size_t)s.nbuf * 4); *pos += (int64_t)s.nbuf * 4;
    for (int k = 0; k < s.nbuf; k++)
      if (ops[k] < 0 || (uint32_t)ops[k] >= h.nbuffers) {
        ds_fail(DS_EINVAL, "model: step %u: operand %d is buffer %d", i + 1, k + 1, ops[k]);
        goto done;
      }
    if (loop) {
      if (load_loop(m, plan, &s, ops, pf, psize, pos, params, xsize, depth, i) != 0) goto done;
      continue;
    }
    double *attrs = malloc(sizeof(double) * ((size_t)s.nattrs + 1));
    if (!attrs) { ds_fail(DS_ENOMEM, "model: out of memory"); goto done; }
    if (s.nattrs) memcpy(attrs, pf + *pos, (size_t)s.nattrs * 8);
    *pos += (int64_t)s.nattrs * 8;
    int src = ds_plan_add_step(plan, s.kernel, s.nbuf, ops, s.nattrs, attrs);
    free(attrs);
    if (src < 0) goto done;
  }
  rc = 0;
done:
  free(bufs); free(span); free(ops);
  return rc;
}

/* One plan record at pf + *pos (advanced past it) into q. 0, or -1 with ds_last_error set. */
static int load_plan(ds_model *m, model_plan *q, const char *pf, int64_t psize, int64_t *pos,
                     const char *params, int64_t xsize) {
  return load_record(m, q, NULL, pf, psize, pos, params, xsize, 0);
}

/* Fused programs number elementwise ops by their position in the engine's table: the file's table must
   agree with this engine's for every op it names (ops appended since are fine), else the plan is refused
   naming the op. 0, or -1. */
static int check_opcodes(const char *pf, int64_t psize, uint32_t nops, int64_t *pos) {
  if (nops > 4096 || (int64_t)nops * (int64_t)sizeof(ds_planfile_opname) > psize - *pos)
    FAIL("model: bad elementwise op table");
  for (uint32_t i = 0; i < nops; i++, *pos += sizeof(ds_planfile_opname)) {
    ds_planfile_opname op;
    memcpy(&op, pf + *pos, sizeof op);
    if (memchr(op.name, 0, sizeof op.name) == NULL) FAIL("model: elementwise op %u: name not terminated", i);
    int mine = ds_ew_opcode(op.name);
    if (mine < 0)
      FAIL("model: the plan uses elementwise op '%s', which this libds does not have (save the model again)", op.name);
    if (mine != (int)i)
      FAIL("model: elementwise op '%s' is opcode %u in the plan and %d in this libds (save the model again)", op.name,
           i, mine);
  }
  return 0;
}

/* The records of a plan file whose header checked out, into m. 0, or -1 (the message names the record). */
static int load_records(ds_model *m, const char *pf, int64_t psize, const ds_planfile_header *h, const char *params,
                        int64_t xsize) {
  int64_t pos = sizeof(ds_planfile_header);
  uint32_t nrecords = h->nrecords;
  if (check_opcodes(pf, psize, h->nops, &pos) != 0) return -1;
  if (nrecords < 1 || nrecords > MAX_PLANS) FAIL("model: the plan file holds %u plans (1..%d)", nrecords, MAX_PLANS);
  m->plans = calloc(nrecords, sizeof *m->plans);
  if (!m->plans) { ds_fail(DS_ENOMEM, "model: out of memory"); return -1; }
  for (uint32_t k = 0; k < nrecords; k++) {
    m->nplans = (int)k + 1;
    if (load_plan(m, &m->plans[k], pf, psize, &pos, params, xsize) != 0) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s (plan %u)", ds_last_error(), k + 1);
      ds_set_error(msg);
      return -1;
    }
  }
  if (pos != psize) FAIL("model: %lld bytes after the last plan", (long long)(psize - pos));
  return 0;
}

/* the file header: magic, version, its body's size and checksum; the params file's name (next to the plan) */
static int check_header(const char *pf, int64_t psize, ds_planfile_header *h) {
  if (psize < (int64_t)sizeof *h) FAIL("model: plan file truncated (%lld bytes)", (long long)psize);
  memcpy(h, pf, sizeof *h);
  if (memcmp(h->magic, "DSPLAN", 6) != 0) FAIL("model: not a ds plan file");
  if (memcmp(h->magic, "DSPLAN02", 8) != 0 || h->version != 2)
    FAIL("model: plan file version %.8s is not supported (this libds reads DSPLAN02; save the model again)", h->magic);
  if (h->body_bytes != psize - (int64_t)sizeof *h)
    FAIL("model: plan file truncated or extended (%lld bytes, its header says %lld)", (long long)psize,
         (long long)(h->body_bytes + (int64_t)sizeof *h));
  if (ds_crc32(pf + sizeof *h, h->body_bytes) != h->body_crc32)
    FAIL("model: plan file does not match its checksum (corrupted)");
  if (memchr(h->params_file, 0, sizeof h->params_file) == NULL || h->params_file[0] == 0 || h->params_file[0] == '.' ||
      strchr(h->params_file, '/')) FAIL("model: the plan file names no valid params file");
  return 0;
}

static ds_model *load_checked(const char *pf, int64_t psize, const ds_planfile_header *h, const char *params,
                              int64_t xsize) {
  if (h->params_bytes != xsize || h->params_crc32 != ds_crc32(params, xsize)) {
    ds_fail(DS_EINVAL,
            "model: the params file %s (%lld bytes) is not the one the plan was saved with (replaced or truncated?)",
            h->params_file, (long long)xsize);
    return NULL;
  }
  ds_model *m = calloc(1, sizeof *m);
  if (!m) { ds_fail(DS_ENOMEM, "model: out of memory"); return NULL; }
  if (load_records(m, pf, psize, h, params, xsize) != 0) { ds_model_free(m); return NULL; }
  return m;
}

ds_model *ds_model_load_bytes(const void *plan, int64_t plan_bytes, const void *params, int64_t params_bytes) {
  ds_planfile_header h;
  if (!plan || plan_bytes < 0 || params_bytes < 0 || (!params && params_bytes)) {
    ds_fail(DS_EINVAL, "model: bad arguments");
    return NULL;
  }
  if (check_header(plan, plan_bytes, &h) != 0) return NULL;
  return load_checked(plan, plan_bytes, &h, params ? params : "", params_bytes);
}

/* path: "dir/name" (reads dir/name.plan and the params file it names). NULL on error (ds_last_error). */
ds_model *ds_model_load(const char *path) {
  if (!path || strlen(path) > 3000) { ds_fail(DS_EINVAL, "model: bad path"); return NULL; }
  char fname[3400];
  int64_t psize = 0, xsize = 0;
  snprintf(fname, sizeof fname, "%s.plan", path);
  char *pf = ds_file_read(fname, MAX_PLAN_FILE, &psize, NULL), *params = NULL;
  if (!pf) { char msg[512]; snprintf(msg, sizeof msg, "model: %s", ds_last_error()); ds_set_error(msg); return NULL; }
  ds_model *m = NULL;
  ds_planfile_header h;
  if (check_header(pf, psize, &h) == 0) {
    const char *slash = strrchr(path, '/');
    snprintf(fname, sizeof fname, "%.*s%s", slash ? (int)(slash - path + 1) : 0, path, h.params_file);
    params = ds_file_read(fname, MAX_PARAMS_FILE, &xsize, NULL);
    if (!params) { char msg[512]; snprintf(msg, sizeof msg, "model: %s", ds_last_error()); ds_set_error(msg); }
    else m = load_checked(pf, psize, &h, params, xsize);
  }
  if (!m) { char msg[512]; snprintf(msg, sizeof msg, "%s (%s.plan)", ds_last_error(), path); ds_set_error(msg); }
  ds_file_free(pf); ds_file_free(params);
  return m;
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
int64_t ds_model_arena_bytes(const ds_model *m, int plan) {
  return m && plan >= 0 && plan < m->nplans ? ds_plan_arena_bytes(m->plans[plan].plan) : 0;
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
    if (rc) {
      char msg[512];
      snprintf(msg, sizeof msg, "model: input %d: %s", i + 1, ds_last_error());
      ds_set_error(msg);
      return rc;
    }
  }
  for (int i = 0; i < m->noutputs; i++) {
    if (!outputs[i]) return ds_fail(DS_EINVAL, "model: output %d missing", i + 1);
    int rc = ds_plan_bind(q->plan, q->out_buf[i], outputs[i]);
    if (rc) {
      char msg[512];
      snprintf(msg, sizeof msg, "model: output %d: %s", i + 1, ds_last_error());
      ds_set_error(msg);
      return rc;
    }
  }
  return ds_plan_run(q->plan);
}
