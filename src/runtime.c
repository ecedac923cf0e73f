/* runtime.c: the plan runtime -- buffers (arena views, bound externals, views), kernel steps and loop steps (a
   while loop over a cond and a body sub-plan, docs/FORMAT.md) run in C. */
#include "internal.h"
#include <stdlib.h>
#include <time.h>

#define ATTR_PAD 64      /* zeros after each step's attrs: a kernel reading a fixed index never reads past */

typedef struct {
  int kind, base;        /* DS_BUF_ARENA / EXTERNAL / VIEW; base buffer of a view */
  int64_t offset;        /* arena: bytes; view: elements from the base's data */
  ds_tensor t;           /* shape, strides, dtype; data resolved per run */
  ds_storage st;         /* arena buffers: their own storage over their bytes (kernels compare storages) */
  int bound;             /* external: bound to a tensor (stays bound until rebound) */
} buffer;

typedef struct loop_step loop_step;

typedef struct {
  ds_kernel fn;          /* NULL: a loop step */
  loop_step *loop;
  int nbuf, *bufs;       /* outputs then inputs */
  ds_tensor **targs;     /* nbuf + 1 (NULL-terminated), resolved at finalize */
  double *attrs;         /* nattrs + ATTR_PAD */
  int nattrs;
  char name[64];
} step;

struct ds_plan {
  int64_t arena_bytes;
  char *arena;
  buffer *bufs; int nbufs, capbufs;
  step *steps; int nsteps, capsteps;
  int ready;
  double *step_seconds;  /* per-step wall time summed over runs while profiling (NULL: off) */
};

static int grow(void **p, int *cap, int need, size_t elsize) {
  if (need <= *cap) return 1;
  int nc = *cap ? *cap * 2 : 16;
  while (nc < need) nc *= 2;
  void *q = realloc(*p, (size_t)nc * elsize);
  if (!q) return 0;
  *p = q; *cap = nc;
  return 1;
}

ds_plan *ds_plan_new(int64_t arena_bytes) {
  if (arena_bytes < 0 || arena_bytes > (INT64_C(1) << 40)) {
    ds_fail(DS_EINVAL, "plan: arena size %lld out of range", (long long)arena_bytes);
    return NULL;
  }
  ds_plan *p = calloc(1, sizeof *p);
  if (!p) { ds_fail(DS_ENOMEM, "plan: out of memory"); return NULL; }
  p->arena_bytes = arena_bytes;
  return p;
}

static void loop_free(loop_step *l);

void ds_plan_free(ds_plan *p) {
  if (!p) return;
  for (int i = 0; i < p->nsteps; i++) {
    free(p->steps[i].bufs); free(p->steps[i].targs); free(p->steps[i].attrs); loop_free(p->steps[i].loop);
  }
  free(p->steps); free(p->bufs); ds_pages_free(p->arena, (size_t)p->arena_bytes); free(p->step_seconds); free(p);
}

/* lowest and highest element touched by a strided view (relative to its data), numel > 0;
   0 when a product or sum overflows int64 (huge strides) */
static int extent(int ndim, const int64_t *shape, const int64_t *strides, int64_t *lo, int64_t *hi) {
  *lo = 0; *hi = 0;
  for (int i = 0; i < ndim; i++) {
    int64_t span;
    if (__builtin_mul_overflow(strides[i], shape[i] - 1, &span)) return 0;
    if (span > 0 ? __builtin_add_overflow(*hi, span, hi) : __builtin_add_overflow(*lo, span, lo)) return 0;
  }
  return 1;
}

static int check_shape(int dtype, int ndim, const int64_t *shape, int64_t *numel) {
  if (dtype < 0 || dtype >= DS_NDTYPES) return ds_fail(DS_EINVAL, "plan: unknown dtype code %d", dtype);
  if (ndim < 0 || ndim > DS_MAXDIM) return ds_fail(DS_EINVAL, "plan: %d dims (at most %d)", ndim, DS_MAXDIM);
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0 || shape[i] > (INT64_C(1) << 40))
      return ds_fail(DS_EINVAL, "plan: size %lld in dim %d out of range", (long long)shape[i], i + 1);
    if (shape[i] > 0 && n > (INT64_C(1) << 40) / shape[i]) return ds_fail(DS_EINVAL, "plan: buffer too large");
    n *= shape[i];
  }
  *numel = n;
  return DS_OK;
}

/* kind: DS_BUF_ARENA (offset in bytes into the arena), DS_BUF_EXTERNAL (bound per run, contiguous),
   DS_BUF_VIEW (of buffer base, offset in elements; base must be an arena or external buffer).
   strides may be NULL (contiguous). Returns the buffer id, or -1 with ds_last_error set. */
int ds_plan_add_buffer(ds_plan *p, int kind, int base, int dtype, int ndim, const int64_t *shape,
                       const int64_t *strides, int64_t offset) {
  if (!p) { ds_fail(DS_EINVAL, "plan: NULL plan"); return -1; }
  int64_t numel = 0;
  if (check_shape(dtype, ndim, shape, &numel) != DS_OK) return -1;
  buffer b; memset(&b, 0, sizeof b);
  b.kind = kind; b.base = -1; b.offset = offset;
  b.t.dtype = dtype; b.t.ndim = ndim; b.t.numel = numel;
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    b.t.shape[i] = shape[i];
    b.t.strides[i] = strides ? strides[i] : s;
    s *= shape[i];
  }
  int64_t lo = 0, hi = 0, es = ds_dtype_size(dtype), end;
  if (numel > 0 && !extent(ndim, b.t.shape, b.t.strides, &lo, &hi)) {
    ds_fail(DS_ERANGE, "plan: buffer strides overflow the addressable range"); return -1;
  }
  if (kind == DS_BUF_ARENA) {
    /* bytes [offset, offset + (hi + 1) * es) inside the arena, computed without overflow; an empty buffer still
       starts inside the arena or at its end (resolve points at arena + offset) */
    if (numel == 0 && (offset < 0 || offset > p->arena_bytes)) {
      ds_fail(DS_ERANGE, "plan: empty arena buffer at byte %lld lies outside the %lld-byte arena", (long long)offset,
              (long long)p->arena_bytes);
      return -1;
    }
    if (numel > 0 && (offset < 0 || offset % es != 0 || lo < 0 || __builtin_mul_overflow(hi + 1, es, &end)
                      || __builtin_add_overflow(offset, end, &end) || end > p->arena_bytes)) {
      ds_fail(DS_ERANGE,
              "plan: arena buffer at byte %lld (%lld elements of %lld bytes) lies outside the %lld-byte arena",
              (long long)offset, (long long)hi + 1, (long long)es, (long long)p->arena_bytes);
      return -1;
    }
  } else if (kind == DS_BUF_EXTERNAL) {
    if (strides && !ds_tensor_is_contiguous(&b.t)) {
      ds_fail(DS_EINVAL, "plan: external buffers are contiguous");
      return -1;
    }
  } else if (kind == DS_BUF_VIEW) {
    if (base < 0 || base >= p->nbufs || p->bufs[base].kind == DS_BUF_VIEW) {
      ds_fail(DS_EINVAL, "plan: view base %d is not an arena or external buffer", base); return -1;
    }
    const buffer *bb = &p->bufs[base];
    if (bb->t.dtype != dtype) { ds_fail(DS_EINVAL, "plan: view dtype differs from its base's"); return -1; }
    int64_t blo = 0, bhi = 0, first, last;
    if (bb->t.numel > 0) extent(bb->t.ndim, bb->t.shape, bb->t.strides, &blo, &bhi);  /* checked when added */
    /* an empty view still starts inside its base or right after it (resolve scales the offset to bytes) */
    if (numel == 0 && (offset < blo || offset > bhi + 1)) {
      ds_fail(DS_ERANGE, "plan: empty view's offset %lld outside its base buffer %d (elements %lld..%lld)",
              (long long)offset, base, (long long)blo, (long long)bhi);
      return -1;
    }
    if (numel > 0 && (bb->t.numel == 0 || __builtin_add_overflow(offset, lo, &first)
                      || __builtin_add_overflow(offset, hi, &last) || first < blo || last > bhi)) {
      ds_fail(DS_ERANGE, "plan: view (offset %lld, elements %lld..%lld from it) outside its base buffer %d "
              "(elements %lld..%lld)", (long long)offset, (long long)lo, (long long)hi, base, (long long)blo,
              (long long)bhi);
      return -1;
    }
    b.base = base;
  } else { ds_fail(DS_EINVAL, "plan: unknown buffer kind %d", kind); return -1; }
  if (!grow((void **)&p->bufs, &p->capbufs, p->nbufs + 1, sizeof(buffer))) {
    ds_fail(DS_ENOMEM, "plan: out of memory");
    return -1;
  }
  p->bufs[p->nbufs] = b;
  p->ready = 0;
  return p->nbufs++;
}

/* A step runs kernel `name` (a registry name, e.g. "ds_add_f32") on buffers bufs (outputs then inputs).
   Returns the step index, or -1. */
int ds_plan_add_step(ds_plan *p, const char *name, int nbuf, const int *bufs, int nattrs, const double *attrs) {
  if (!p || !name || (nbuf > 0 && !bufs) || (nattrs > 0 && !attrs)) {
    ds_fail(DS_EINVAL, "plan: NULL argument");
    return -1;
  }
  const ds_kernel_info *k = ds_kernel_info_find(name);
  if (!k) { ds_fail(DS_EINVAL, "plan: unknown kernel '%.64s'", name); return -1; }
  if (nbuf < 1 || nbuf > 256) { ds_fail(DS_EINVAL, "plan: step %s has %d operands", name, nbuf); return -1; }
  if (k->noperands >= 0 && nbuf != k->noperands) {
    ds_fail(DS_EINVAL, "plan: step %s has %d operands, the kernel takes %d", name, nbuf, k->noperands); return -1;
  }
  if (nattrs < 0 || nattrs > (1 << 20)) { ds_fail(DS_EINVAL, "plan: step %s has %d attrs", name, nattrs); return -1; }
  int dtypes[256];
  for (int i = 0; i < nbuf; i++) {
    if (bufs[i] < 0 || bufs[i] >= p->nbufs) {
      ds_fail(DS_EINVAL, "plan: step %s operand %d names buffer %d (plan has %d)", name, i, bufs[i], p->nbufs);
      return -1;
    }
    dtypes[i] = p->bufs[bufs[i]].t.dtype;
  }
  if (k->check && k->check(nbuf, dtypes, nattrs, attrs) != DS_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "plan: step %s: %s", name, ds_last_error());
    ds_set_error(msg);
    return -1;
  }
  if (!grow((void **)&p->steps, &p->capsteps, p->nsteps + 1, sizeof(step))) {
    ds_fail(DS_ENOMEM, "plan: out of memory");
    return -1;
  }
  step s; memset(&s, 0, sizeof s);
  s.fn = k->fn; s.nbuf = nbuf; s.nattrs = nattrs;
  snprintf(s.name, sizeof s.name, "%s", name);
  s.bufs = malloc(sizeof(int) * (size_t)nbuf);
  s.attrs = calloc((size_t)(nattrs + ATTR_PAD), sizeof(double));
  if (!s.bufs || !s.attrs) { free(s.bufs); free(s.attrs); ds_fail(DS_ENOMEM, "plan: out of memory"); return -1; }
  memcpy(s.bufs, bufs, sizeof(int) * (size_t)nbuf);
  if (nattrs) memcpy(s.attrs, attrs, sizeof(double) * (size_t)nattrs);
  p->steps[p->nsteps] = s;
  p->ready = 0;
  free(p->step_seconds); p->step_seconds = NULL;   /* a new step ends profiling (the timings are per step) */
  return p->nsteps++;
}

/* Bind an external buffer to a tensor for the next runs: same dtype and shape, contiguous. */
int ds_plan_bind(ds_plan *p, int id, const ds_tensor *t) {
  if (!p || !t) return ds_fail(DS_EINVAL, "plan: NULL argument");
  if (id < 0 || id >= p->nbufs || p->bufs[id].kind != DS_BUF_EXTERNAL)
    return ds_fail(DS_EINVAL, "plan: buffer %d is not external", id);
  buffer *b = &p->bufs[id];
  char s1[128], s2[128];
  if (t->dtype != b->t.dtype || t->ndim != b->t.ndim) goto mismatch;
  for (int i = 0; i < t->ndim; i++) if (t->shape[i] != b->t.shape[i]) goto mismatch;
  if (!ds_tensor_is_contiguous(t)) return ds_fail(DS_EINVAL, "plan: tensor bound to buffer %d is not contiguous", id);
  b->t.data = t->data; b->t.storage = t->storage; b->t.offset = t->offset;
  b->bound = 1;
  return DS_OK;
mismatch:
  return ds_fail(DS_EINVAL, "plan: buffer %d expects dtype code %d shape %s, got dtype code %d shape %s", id,
                 b->t.dtype, ds_shape_str(&b->t, s1), t->dtype, ds_shape_str(t, s2));
}

static int finalize(ds_plan *p) {
  if (!p->arena && p->arena_bytes > 0) {
    p->arena = ds_pages_alloc((size_t)p->arena_bytes);   /* huge pages: megabytes of fresh 4 KiB pages fault slowly */
    if (!p->arena) return ds_fail(DS_ENOMEM, "plan: cannot allocate a %lld-byte arena", (long long)p->arena_bytes);
  }
  for (int i = 0; i < p->nsteps; i++) {
    step *s = &p->steps[i];
    if (!s->targs) {
      s->targs = calloc((size_t)s->nbuf + 1, sizeof(ds_tensor *));
      if (!s->targs) return ds_fail(DS_ENOMEM, "plan: out of memory");
    }
    for (int k = 0; k < s->nbuf; k++) s->targs[k] = &p->bufs[s->bufs[k]].t;
    s->targs[s->nbuf] = NULL;
  }
  p->ready = 1;
  return DS_OK;
}

/* Resolve every buffer's data pointer (arena slots, bound externals, views of those). */
static void resolve(ds_plan *p) {
  for (int i = 0; i < p->nbufs; i++) {
    buffer *b = &p->bufs[i];
    if (b->kind == DS_BUF_ARENA) {
      b->st.data = p->arena + b->offset; b->st.nbytes = p->arena_bytes - b->offset;
      b->st.refcount = 1; b->st.external = 1;
      b->t.data = b->st.data; b->t.storage = &b->st; b->t.offset = 0; b->bound = 1;
    } else if (b->kind == DS_BUF_VIEW) {
      const buffer *bb = &p->bufs[b->base];
      b->bound = bb->bound;
      b->t.storage = bb->t.storage; b->t.offset = bb->t.offset + b->offset;
      b->t.data = bb->bound ? (char *)bb->t.data + b->offset * ds_dtype_size(b->t.dtype) : NULL;
    }
  }
}

/* ---- loop steps ----
   A loop step's operands (outer buffers, contiguous): nvars results, nvars initial values, nextra extras (the
   values its sub-plans read, and the buffers they update in place). Each trip runs the cond sub-plan (its
   predicate: one element, nonzero = go on), then the body sub-plan, whose outputs (the next values of the loop
   variables) go to buffers of the step's own and are copied into the results. The sub-plans' external buffers
   are bound to the results (the current values), the extras and those next values: one binding per run, none
   per trip. A sub-plan's in-place update of an extra writes the outer buffer itself. */
struct loop_step {
  ds_plan *cond, *body;  /* owned */
  int nvars, nextra;
  int64_t max_trips;     /* < 0: unbounded */
  int ncb, *cb_sub, *cb_src;   /* cond bindings: sub-plan buffer <- source (below) */
  int nbb, *bb_sub, *bb_src;   /* body bindings */
  ds_tensor **next;      /* nvars: the body's outputs */
  ds_tensor *pred;       /* the cond's output */
};
/* a binding's source: 0 .. nvars - 1 loop variable (its result buffer), nvars .. nvars + nextra - 1 an extra,
   -1 the cond's predicate, -(j + 2) the body's output j (0-based) */

static void loop_free(loop_step *l) {
  if (!l) return;
  ds_plan_free(l->cond); ds_plan_free(l->body);
  free(l->cb_sub); free(l->cb_src); free(l->bb_sub); free(l->bb_src);
  if (l->next) for (int i = 0; i < l->nvars; i++) ds_tensor_free(l->next[i]);
  free(l->next); ds_tensor_free(l->pred); free(l);
}

static int same_layout(const ds_tensor *a, const ds_tensor *b) {
  if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
  for (int d = 0; d < a->ndim; d++) if (a->shape[d] != b->shape[d]) return 0;
  return 1;
}

/* check the bindings of sub-plan q (cond: want_pred) against the outer operands; copy them into *sub, *src */
static int loop_bindings(ds_plan *p, ds_plan *q, const char *what, const int *outer, int nvars, int nextra, int n,
                         const int *sub, const int *src, int **osub, int **osrc, const ds_tensor *const *next) {
  if (n < 0 || n > (1 << 20)) return ds_fail(DS_EINVAL, "plan: loop %s: %d bindings", what, n);
  int outputs = 0;
  for (int k = 0; k < n; k++) {
    if (sub[k] < 0 || sub[k] >= q->nbufs || q->bufs[sub[k]].kind != DS_BUF_EXTERNAL)
      return ds_fail(DS_EINVAL, "plan: loop %s binding %d: buffer %d is not an external buffer of the sub-plan", what,
                     k + 1, sub[k]);
    for (int j = 0; j < k; j++)
      if (sub[j] == sub[k]) return ds_fail(DS_EINVAL, "plan: loop %s: buffer %d bound twice", what, sub[k]);
    const ds_tensor *want;
    if (src[k] >= 0 && src[k] < nvars + nextra) want = &p->bufs[outer[src[k] < nvars ? src[k] : nvars + src[k]]].t;
    else if (next == NULL && src[k] == -1) { want = NULL; outputs++; }
    else if (next != NULL && src[k] <= -2 && src[k] >= -(nvars + 1)) {
      want = next[-src[k] - 2]; outputs++;
      for (int j = 0; j < k; j++)
        if (src[j] == src[k]) return ds_fail(DS_EINVAL, "plan: loop body: output %d bound twice", -src[k] - 1);
    } else return ds_fail(DS_EINVAL, "plan: loop %s binding %d: source %d out of range", what, k + 1, src[k]);
    const ds_tensor *t = &q->bufs[sub[k]].t;
    if (want ? !same_layout(t, want) : t->numel != 1)
      return ds_fail(DS_EINVAL, "plan: loop %s binding %d: sub-plan buffer %d has another dtype or shape than its "
                     "source", what, k + 1, sub[k]);
  }
  if (outputs != (next ? nvars : 1))
    return ds_fail(DS_EINVAL, "plan: loop %s: %d of its %d outputs bound", what, outputs, next ? nvars : 1);
  *osub = malloc(sizeof(int) * (size_t)(n + 1)); *osrc = malloc(sizeof(int) * (size_t)(n + 1));
  if (!*osub || !*osrc) return ds_fail(DS_ENOMEM, "plan: out of memory");
  if (n) { memcpy(*osub, sub, sizeof(int) * (size_t)n); memcpy(*osrc, src, sizeof(int) * (size_t)n); }
  return DS_OK;
}

/* Add a loop step (cond and body: sub-plans the step takes over, also on failure). bufs: the outer operands,
   nvars results then nvars initial values then nextra extras, each contiguous; a result has its initial value's
   dtype and shape. Bindings (cb_* for cond, bb_* for body): sub-plan external buffer <- source (the encoding
   above). max_trips < 0: unbounded. Returns the step index, or -1. */
int ds_plan_add_loop(ds_plan *p, ds_plan *cond, ds_plan *body, int nvars, int nextra, const int *bufs,
                     int ncb, const int *cb_sub, const int *cb_src, int nbb, const int *bb_sub, const int *bb_src,
                     int64_t max_trips) {
  loop_step *l = calloc(1, sizeof *l);
  if (!l) { ds_plan_free(cond); ds_plan_free(body); ds_fail(DS_ENOMEM, "plan: out of memory"); return -1; }
  l->cond = cond; l->body = body; l->nvars = nvars; l->nextra = nextra; l->max_trips = max_trips;
  int nbuf = 2 * nvars + nextra;
  if (!p || !cond || !body || cond == p || body == p || cond == body || (nbuf > 0 && !bufs) ||
      (ncb > 0 && (!cb_sub || !cb_src)) || (nbb > 0 && (!bb_sub || !bb_src))) {
    ds_fail(DS_EINVAL, "plan: loop: NULL or repeated argument"); goto fail;
  }
  if (nvars < 1 || nextra < 0 || nbuf > (1 << 16)) {
    ds_fail(DS_EINVAL, "plan: loop with %d variables and %d extras", nvars, nextra); goto fail;
  }
  for (int i = 0; i < nbuf; i++) {
    if (bufs[i] < 0 || bufs[i] >= p->nbufs) {
      ds_fail(DS_EINVAL, "plan: loop operand %d names buffer %d (plan has %d)", i + 1, bufs[i], p->nbufs); goto fail;
    }
    if (!ds_tensor_is_contiguous(&p->bufs[bufs[i]].t)) {
      ds_fail(DS_EINVAL, "plan: loop operand %d (buffer %d) is not contiguous", i + 1, bufs[i]); goto fail;
    }
  }
  for (int i = 0; i < nvars; i++)
    if (!same_layout(&p->bufs[bufs[i]].t, &p->bufs[bufs[nvars + i]].t)) {
      ds_fail(DS_EINVAL, "plan: loop variable %d: its result and initial value differ in dtype or shape", i + 1);
      goto fail;
    }
  l->next = calloc((size_t)nvars, sizeof(ds_tensor *));
  if (!l->next) { ds_fail(DS_ENOMEM, "plan: out of memory"); goto fail; }
  for (int i = 0; i < nvars; i++) {
    const ds_tensor *r = &p->bufs[bufs[i]].t;
    if (!(l->next[i] = ds_tensor_new(r->dtype, r->ndim, r->shape))) goto fail;
  }
  /* the predicate: any dtype, one element; its tensor is made once its buffer's dtype is known */
  if (loop_bindings(p, cond, "cond", bufs, nvars, nextra, ncb, cb_sub, cb_src, &l->cb_sub, &l->cb_src, NULL) ||
      loop_bindings(p, body, "body", bufs, nvars, nextra, nbb, bb_sub, bb_src, &l->bb_sub, &l->bb_src,
                    (const ds_tensor *const *)l->next)) goto fail;
  l->ncb = ncb; l->nbb = nbb;
  for (int k = 0; k < ncb; k++)
    if (cb_src[k] == -1) {
      const ds_tensor *t = &cond->bufs[cb_sub[k]].t;
      if (!(l->pred = ds_tensor_new(t->dtype, t->ndim, t->shape))) goto fail;
    }
  if (!grow((void **)&p->steps, &p->capsteps, p->nsteps + 1, sizeof(step))) {
    ds_fail(DS_ENOMEM, "plan: out of memory"); goto fail;
  }
  step s; memset(&s, 0, sizeof s);
  s.loop = l; s.nbuf = nbuf;
  snprintf(s.name, sizeof s.name, "%s", "while_loop");
  s.bufs = malloc(sizeof(int) * (size_t)(nbuf + 1));
  s.attrs = calloc(ATTR_PAD, sizeof(double));
  if (!s.bufs || !s.attrs) { free(s.bufs); free(s.attrs); ds_fail(DS_ENOMEM, "plan: out of memory"); goto fail; }
  memcpy(s.bufs, bufs, sizeof(int) * (size_t)nbuf);
  p->steps[p->nsteps] = s;
  p->ready = 0;
  free(p->step_seconds); p->step_seconds = NULL;
  return p->nsteps++;
fail:
  loop_free(l);
  return -1;
}

/* point external buffer b of sub-plan q at tensor t's memory (shapes checked when the loop was added) */
static void point(ds_plan *q, int b, const ds_tensor *t) {
  buffer *x = &q->bufs[b];
  x->t.data = t->data; x->t.storage = t->storage; x->t.offset = t->offset; x->bound = 1;
}

static void bind_all(ds_plan *q, int n, const int *sub, const int *src, const loop_step *l,
                     ds_tensor *const *t) {
  for (int k = 0; k < n; k++) {
    int s = src[k];
    point(q, sub[k], s >= 0 ? t[s < l->nvars ? s : l->nvars + s] : s == -1 ? l->pred : l->next[-s - 2]);
  }
}

static int truth(const ds_tensor *t) {
  switch (t->dtype) {
    case DS_F32: return *(const float *)t->data != 0;
    case DS_F64: return *(const double *)t->data != 0;
    case DS_BF16: case DS_F16: return (*(const uint16_t *)t->data & 0x7fff) != 0;
    default: {
      const unsigned char *b = t->data;
      for (int64_t i = 0; i < ds_dtype_size(t->dtype); i++) if (b[i]) return 1;
      return 0;
    }
  }
}

static int run_sub(ds_plan *q, const char *what, int64_t trip) {
  int rc = ds_plan_run(q);
  if (rc != DS_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "while_loop %s, trip %lld: %s", what, (long long)trip, ds_last_error());
    ds_set_error(msg);
  }
  return rc;
}

/* t: the step's operands as resolved (results, initial values, extras) */
static int run_loop(loop_step *l, ds_tensor *const *t) {
  int n = l->nvars;
  for (int i = 0; i < n; i++)
    if (t[i]->data != t[n + i]->data)   /* memmove: a file's result and initial value may overlap */
      memmove(t[i]->data, t[n + i]->data, (size_t)(t[i]->numel * ds_dtype_size(t[i]->dtype)));
  bind_all(l->cond, l->ncb, l->cb_sub, l->cb_src, l, t);
  bind_all(l->body, l->nbb, l->bb_sub, l->bb_src, l, t);
  for (int64_t trip = 1;; trip++) {
    int rc = run_sub(l->cond, "cond", trip);
    if (rc != DS_OK) return rc;
    if (!truth(l->pred)) return DS_OK;
    if (l->max_trips >= 0 && trip > l->max_trips)
      return ds_fail(DS_ERANGE, "while_loop: more than %lld trips (the loop's max_trips; ds.load(path, "
                     "{max_loop_trips = n}) sets it for loaded graphs)", (long long)l->max_trips);
    if ((rc = run_sub(l->body, "body", trip)) != DS_OK) return rc;
    for (int i = 0; i < n; i++)
      memcpy(t[i]->data, l->next[i]->data, (size_t)(t[i]->numel * ds_dtype_size(t[i]->dtype)));
  }
}

/* Run steps [first, last) (0-based); every external a step touches must be bound. */
int ds_plan_run_range(ds_plan *p, int first, int last) {
  if (!p) return ds_fail(DS_EINVAL, "plan: NULL plan");
  if (first < 0 || last > p->nsteps || first > last)
    return ds_fail(DS_EINVAL, "plan: step range %d..%d outside 0..%d", first, last, p->nsteps);
  if (!p->ready) { int rc = finalize(p); if (rc) return rc; }
  resolve(p);
  for (int i = first; i < last; i++) {
    step *s = &p->steps[i];
    for (int k = 0; k < s->nbuf; k++) {
      const buffer *b = &p->bufs[s->bufs[k]];
      if (!b->bound)
        return ds_fail(DS_EINVAL, "plan: step %d (%s) uses external buffer %d, which was not bound", i + 1, s->name,
                       s->bufs[k]);
    }
    struct timespec t0, t1;
    if (p->step_seconds) clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = s->loop ? run_loop(s->loop, s->targs) : s->fn(s->targs, s->attrs);
    if (p->step_seconds) {
      clock_gettime(CLOCK_MONOTONIC, &t1);
      p->step_seconds[i] += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    }
    if (rc != DS_OK) {
      char msg[512];
      snprintf(msg, sizeof msg, "step %d (%s): %s", i + 1, s->name, ds_last_error());
      ds_set_error(msg);
      return rc;
    }
  }
  return DS_OK;
}

int ds_plan_run(ds_plan *p) { return ds_plan_run_range(p, 0, p ? p->nsteps : 0); }

/* The arena allocated and its pages touched (a fresh page faults on its first write: ~4 us each on this VM, 1.5 ms
   for LeNet-5's 1.5 MB arena at batch 64), the steps' operands resolved, a loop's sub-plans likewise: what the
   first run would do before and during its steps, done now, so that a server's first request of a shape runs at
   the speed of the next ones. Only on request: a plan file may declare an arena its steps never fill. */
int ds_plan_prepare(ds_plan *p) {
  if (!p) return ds_fail(DS_EINVAL, "plan: NULL plan");
  int fresh = !p->arena && p->arena_bytes > 0;
  if (!p->ready) { int rc = finalize(p); if (rc) return rc; }
  if (fresh) memset(p->arena, 0, (size_t)p->arena_bytes);
  for (int i = 0; i < p->nsteps; i++) {   /* a loop step's sub-plans too */
    loop_step *l = p->steps[i].loop;
    if (l) { int rc = ds_plan_prepare(l->cond); if (!rc) rc = ds_plan_prepare(l->body); if (rc) return rc; }
  }
  return DS_OK;
}

/* The tensor struct of buffer id as the last run resolved it (for a Lua step between ranges to read). */
const ds_tensor *ds_plan_buffer(ds_plan *p, int id) {
  if (!p || id < 0 || id >= p->nbufs) { ds_fail(DS_EINVAL, "plan: no buffer %d", id); return NULL; }
  if (!p->ready && finalize(p) != DS_OK) return NULL;
  resolve(p);
  return &p->bufs[id].t;
}

/* Profiling: on = 1 starts (or restarts) summing each step's wall time over runs, 0 stops. */
int ds_plan_profile(ds_plan *p, int on) {
  if (!p) return ds_fail(DS_EINVAL, "plan: NULL plan");
  free(p->step_seconds); p->step_seconds = NULL;
  if (on && p->nsteps > 0) {
    p->step_seconds = calloc((size_t)p->nsteps, sizeof(double));
    if (!p->step_seconds) return ds_fail(DS_ENOMEM, "plan: out of memory");
  }
  return DS_OK;
}
double ds_plan_step_seconds(const ds_plan *p, int i) {
  return p && p->step_seconds && i >= 0 && i < p->nsteps ? p->step_seconds[i] : 0.0;
}

int64_t ds_plan_arena_bytes(const ds_plan *p) { return p ? p->arena_bytes : 0; }
int ds_plan_num_steps(const ds_plan *p) { return p ? p->nsteps : 0; }
int ds_plan_num_buffers(const ds_plan *p) { return p ? p->nbufs : 0; }
