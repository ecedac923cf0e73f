/* collective.c: collectives over several processes with a fixed reduction order (same bits on every rank and run),
   driven by MPI functions that ds.distributed registers (ds_comm_set); libds itself does not link MPI.

   Every collective is point-to-point messages between all pairs, waited for with a deadline:
   - reduce-scatter: the tensor is cut into world-size chunks; rank r receives chunk r from every rank and reduces the
     contributions in rank order (((x_0 + x_1) + x_2) + ...), so the bits do not depend on the message order or on
     any algorithm MPI would pick;
   - all-gather: every rank sends its chunk to every other rank (a copy, no arithmetic);
   - all_reduce = reduce-scatter then all-gather (each rank moves 2 (P-1)/P of the tensor, as a ring does).
   Before any data moves, the ranks exchange a header (which collective, reduction, root, dtype, shape) and compare
   them: a difference fails the collective on every rank with the same message naming both ranks and both
   headers (nothing is computed; later collectives still work). The end of a script is a collective of its own
   (ds_comm_finalize), so a rank that ends while another waits in a collective is a difference too.
   A peer that sends nothing within the timeout fails the collective with an error naming it; after a failure
   every later collective fails at once (the buffers of the abandoned messages are kept, never reused). */
#include "internal.h"
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sched.h>
#include <time.h>

static ds_comm world;         /* size 0: not set */
static char failed[256];      /* non-empty after a collective failed */
static int sequence;          /* one tag per collective call, the same on every rank */

int ds_comm_set(const ds_comm *c) {
  if (!c) { memset(&world, 0, sizeof world); failed[0] = 0; return DS_OK; }
  DS_CHECK(c->size >= 1 && c->rank >= 0 && c->rank < c->size, "ds_comm_set: rank %d of %d is out of range",
      c->rank, c->size);
  DS_CHECK(c->size == 1 || (c->isend && c->irecv && c->test && c->wtime), "ds_comm_set: MPI functions missing");
  DS_CHECK(c->timeout > 0, "ds_comm_set: timeout must be positive");
  world = *c;
  failed[0] = 0;
  return DS_OK;
}
int ds_comm_size(void) { return world.size; }

/* Scratch buffers kept from one collective to the next (grown, never shrunk): malloc gave fresh pages to every
   call, and a fault per page made a 247 KB all_reduce between two processes take 1.5 ms instead of 0.2 on a VM
   (Zen 5 Firecracker host). After a failed collective they are abandoned, never reused or freed, like the
   messages that may still land in them (every later collective fails at once anyway). */
enum { SLOT_RECV, SLOT_RESULT, SLOT_HEADERS, NSLOTS };
static char *slot_buf[NSLOTS];
static size_t slot_bytes[NSLOTS];
static char *slot(int i, size_t bytes) {
  if (bytes > slot_bytes[i]) {
    free(slot_buf[i]);
    slot_buf[i] = malloc(bytes);
    slot_bytes[i] = slot_buf[i] ? bytes : 0;
  }
  return slot_buf[i];
}
static int abandon_slots(int rc) {
  for (int i = 0; i < NSLOTS; i++) { slot_buf[i] = NULL; slot_bytes[i] = 0; }
  return rc;
}

static int check_ready(const char *op) {
  DS_CHECK(world.size > 0, "%s: ds.distributed.init() was not called", op);
  DS_CHECK(!failed[0], "%s: an earlier collective failed (%s)", op, failed);
  return DS_OK;
}

/* the messages of one exchange: one receive and one send per peer */
typedef struct { void *recv[2 * 1024]; int peer_of[2 * 1024]; int n; } requests;

static int post(requests *q, int is_send, void *buf, int64_t bytes, int peer, int tag, const char *op) {
  DS_CHECK(bytes <= 0x7fffffff, "%s: a message of %lld bytes exceeds MPI's int count", op, (long long)bytes);
  DS_CHECK(q->n < 2 * 1024, "%s: more than 1024 processes are not supported", op);
  void **req = &q->recv[q->n];
  int rc = is_send ? world.isend(buf, (int)bytes, world.byte, peer, tag, world.comm, req)
                   : world.irecv(buf, (int)bytes, world.byte, peer, tag, world.comm, req);
  if (rc != 0) {
    snprintf(failed, sizeof failed, "MPI error %d %s rank %d", rc, is_send ? "sending to" : "receiving from", peer + 1);
    return ds_fail(DS_EIO, "%s: %s", op, failed);
  }
  q->peer_of[q->n++] = is_send ? -1 - peer : peer;
  return DS_OK;
}

/* wait for every message (forever when `patient`, else until the timeout); a receive still missing at the deadline
   names its (1-based) rank */
static int wait_all(requests *q, const char *op, int patient) {
  double deadline = world.wtime() + world.timeout;
  int pending = q->n, spins = 0;
  while (pending > 0) {
    pending = 0;
    for (int k = 0; k < q->n; k++) {
      if (!q->recv[k]) continue;   /* completed (set to NULL below) */
      int done = 0;
      if (world.test(&q->recv[k], &done, NULL) != 0) {
        snprintf(failed, sizeof failed, "MPI error while talking to rank %d",
            (q->peer_of[k] < 0 ? -1 - q->peer_of[k] : q->peer_of[k]) + 1);
        return ds_fail(DS_EIO, "%s: %s", op, failed);
      }
      if (done) q->recv[k] = NULL; else pending++;
    }
    if (pending && ++spins % 64 == 0) {
      if (!patient && world.wtime() > deadline) {
        char who[160] = "";
        int len = 0;
        for (int k = 0; k < q->n && len < 120; k++)
          if (q->recv[k] && q->peer_of[k] >= 0) len += snprintf(who + len, sizeof who - len, "%s%d", len ? ", " : "",
              q->peer_of[k] + 1);
        snprintf(failed, sizeof failed,
            "rank %d: no message from rank %s within %g s (it is busy elsewhere, failed or hangs)",
                 world.rank + 1, len ? who : "?", world.timeout);
        return ds_fail(DS_EIO, "%s: %s", op, failed);
      }
      if (patient) nanosleep(&(struct timespec){ 0, 1000000 }, NULL);   /* 1 ms: the others may compute for long */
      else sched_yield();
    }
  }
  return DS_OK;
}

/* the element range [lo, hi) of chunk j when n elements are cut into chunks of c */
static int64_t chunk_lo(int64_t c, int64_t n, int j) { int64_t v = c * j; return v < n ? v : n; }

/* every peer's contribution to chunk `me`: recv (P, c) elements, row j from rank j (row `me` is not used) */
static int scatter_phase(const char *src, char *recv, int64_t c, int64_t n, int64_t es, int tag, const char *op) {
  requests q; q.n = 0;
  int me = world.rank;
  int64_t mine = chunk_lo(c, n, me + 1) - chunk_lo(c, n, me);
  for (int j = 0; j < world.size; j++) {
    if (j == me) continue;
    int64_t lo = chunk_lo(c, n, j), len = chunk_lo(c, n, j + 1) - lo;
    int rc = mine > 0 ? post(&q, 0, recv + (int64_t)j * c * es, mine * es, j, tag, op) : DS_OK;
    if (rc == DS_OK && len > 0) rc = post(&q, 1, (void *)(src + lo * es), len * es, j, tag, op);
    if (rc != DS_OK) return rc;
  }
  return wait_all(&q, op, 0);
}

/* every peer's chunk into dst (n elements); chunk `me` is already there */
static int gather_phase(char *dst, int64_t c, int64_t n, int64_t es, int tag, const char *op) {
  requests q; q.n = 0;
  int me = world.rank;
  int64_t mlo = chunk_lo(c, n, me), mine = chunk_lo(c, n, me + 1) - mlo;
  for (int j = 0; j < world.size; j++) {
    if (j == me) continue;
    int64_t lo = chunk_lo(c, n, j), len = chunk_lo(c, n, j + 1) - lo;
    int rc = len > 0 ? post(&q, 0, dst + lo * es, len * es, j, tag, op) : DS_OK;
    if (rc == DS_OK && mine > 0) rc = post(&q, 1, dst + mlo * es, mine * es, j, tag, op);
    if (rc != DS_OK) return rc;
  }
  return wait_all(&q, op, 0);
}

/* what a rank is about to do: every rank must send the same header before any data moves */
enum { KIND_ALL_REDUCE, KIND_REDUCE_SCATTER, KIND_ALL_GATHER, KIND_BROADCAST, KIND_BARRIER, KIND_FINALIZE };
static const char *const kind_names[] = { "all_reduce", "reduce_scatter", "all_gather", "broadcast", "barrier",
  "ended its script (an error, or fewer collectives than the others)" };
typedef struct { int32_t kind, op, root, dtype, ndim, pad; int64_t shape[8]; } header;
enum { HEADER_TAG = 0x4000 };   /* data tags are below it */

static header header_of(int kind, int op, int root, const ds_tensor *t) {
  header h;
  memset(&h, 0, sizeof h);
  h.kind = kind; h.op = op; h.root = root; h.dtype = t ? t->dtype : -1; h.ndim = t ? t->ndim : 0;
  for (int d = 0; t && d < t->ndim && d < 8; d++) h.shape[d] = t->shape[d];
  return h;
}

/* "all_reduce(sum) f32(2,3)", "broadcast(root 1) i64(4)", "barrier" */
static void describe(char *buf, size_t size, const header *h) {
  static const char *const ops[] = { "sum", "mean", "max" };
  int len = snprintf(buf, size, "%s", h->kind >= 0 && h->kind <= KIND_FINALIZE ? kind_names[h->kind] : "?");
  if (h->kind == KIND_ALL_REDUCE || h->kind == KIND_REDUCE_SCATTER)
    len += snprintf(buf + len, size - len, "(%s)", h->op >= 0 && h->op <= DS_REDUCE_MAX ? ops[h->op] : "?");
  if (h->kind == KIND_BROADCAST) len += snprintf(buf + len, size - len, "(root %d)", h->root + 1);
  if (h->dtype < 0) return;
  len += snprintf(buf + len, size - len, " %s(", ds_dtype_name(h->dtype));
  for (int d = 0; d < h->ndim && d < 8 && len < (int)size; d++)
    len += snprintf(buf + len, size - len, "%s%lld", d ? "," : "", (long long)h->shape[d]);
  if (len < (int)size) snprintf(buf + len, size - len, ")");
}

/* every rank sends its header to every other and compares them all: a difference fails the collective on every
   rank with the same message (the first rank whose header differs from rank 1's), before any data moves */
static int agree(const header *mine, const char *op, int patient) {
  if (world.size == 1) return DS_OK;
  header *all = (header *)slot(SLOT_HEADERS, sizeof(header) * (size_t)world.size);
  if (!all) return ds_fail(DS_ENOMEM, "%s: out of memory", op);
  all[world.rank] = *mine;
  requests q; q.n = 0;
  int rc = DS_OK;
  for (int j = 0; j < world.size && rc == DS_OK; j++) {
    if (j == world.rank) continue;
    rc = post(&q, 0, &all[j], sizeof(header), j, HEADER_TAG, op);
    if (rc == DS_OK) rc = post(&q, 1, &all[world.rank], sizeof(header), j, HEADER_TAG, op);
  }
  if (rc == DS_OK) rc = wait_all(&q, op, patient);
  if (rc != DS_OK) return abandon_slots(rc);
  for (int j = 1; j < world.size; j++) {
    if (memcmp(&all[0], &all[j], sizeof(header)) == 0) continue;
    char a[160], b[160];
    describe(a, sizeof a, &all[0]);
    describe(b, sizeof b, &all[j]);
    return ds_fail(DS_EINVAL, "%s: the ranks disagree: rank 1 has %s, rank %d has %s (this is rank %d)", op, a, j + 1, b,
        world.rank + 1);
  }
  return DS_OK;
}

#define MAX_FLOAT(a, b) ((a) != (a) ? (a) : ((b) != (b) || (b) > (a)) ? (b) : (a))   /* NaN wins, as torch.max */
#define MAX_INT(a, b) ((a) > (b) ? (a) : (b))
#define KERNELS "collective_kernels.h"
#define KERNEL_DTYPES (KD_F32 | KD_F64 | KD_I64)
#include "all_kernels.h"

static int check_tensors(const ds_tensor *out, const ds_tensor *in, int op, const char *name) {
  DS_CHECK(out && in, "%s: operand missing", name);
  DS_CHECK(in->dtype == DS_F32 || in->dtype == DS_F64 || in->dtype == DS_I64,
      "%s: dtype %s is not supported (f32, f64, i64)",
           name, ds_dtype_name(in->dtype));
  DS_CHECK(out->dtype == in->dtype, "%s: output dtype differs from the input's", name);
  DS_CHECK(op >= DS_REDUCE_SUM && op <= DS_REDUCE_MAX, "%s: unknown reduction %d", name, op);
  DS_CHECK(op != DS_REDUCE_MEAN || in->dtype != DS_I64, "%s: mean of an i64 tensor is not supported", name);
  DS_CHECK(ds_tensor_is_contiguous(in) && ds_tensor_is_contiguous(out), "%s: operands must be contiguous", name);
  return DS_OK;
}

/* out[lo:lo+len] = the reduction of chunk `me` (c elements per chunk, n in all) of src over the ranks */
static int reduce_scatter(char *out, const char *src, int64_t c, int64_t n, int dtype, int op, const char *name) {
  int64_t es = ds_dtype_size(dtype), lo = chunk_lo(c, n, world.rank), len = chunk_lo(c, n, world.rank + 1) - lo;
  int tag = sequence++ & 0x3fff;
  char *recv = world.size > 1 ? slot(SLOT_RECV, (size_t)(c * world.size * es) + 1) : NULL;
  if (world.size > 1 && !recv) return ds_fail(DS_ENOMEM, "%s: out of memory", name);
  int rc = world.size > 1 ? scatter_phase(src, recv, c, n, es, tag, name) : DS_OK;
  if (rc != DS_OK) return abandon_slots(rc);   /* abandoned receives may still write into recv */
  if (dtype == DS_F32) reduce_f32((float *)out, (const float *)(src + lo * es), recv, c, len, op);
  else if (dtype == DS_F64) reduce_f64((double *)out, (const double *)(src + lo * es), recv, c, len, op);
  else reduce_i64((int64_t *)out, (const int64_t *)(src + lo * es), recv, c, len, op);
  return DS_OK;
}

/* out = the reduction of in over all ranks (same shape); out may be in */
int ds_comm_all_reduce(ds_tensor *out, const ds_tensor *in, int op) {
  int rc = check_ready("all_reduce");
  if (rc == DS_OK) rc = check_tensors(out, in, op, "all_reduce");
  if (rc != DS_OK) return rc;
  DS_CHECK(out->numel == in->numel, "all_reduce: output has %lld elements, input %lld", (long long)out->numel,
      (long long)in->numel);
  header h = header_of(KIND_ALL_REDUCE, op, 0, in);
  rc = agree(&h, "all_reduce", 0);
  int64_t n = in->numel, c = (n + world.size - 1) / world.size, es = ds_dtype_size(in->dtype);
  if (rc != DS_OK || n == 0) return rc;
  /* the gather lands in a private copy of the output, so an abandoned receive never writes into a freed tensor */
  char *tmp = slot(SLOT_RESULT, (size_t)(n * es));
  if (!tmp) return ds_fail(DS_ENOMEM, "all_reduce: out of memory");
  rc = reduce_scatter(tmp + chunk_lo(c, n, world.rank) * es, in->data, c, n, in->dtype, op, "all_reduce");
  if (rc == DS_OK && world.size > 1) rc = gather_phase(tmp, c, n, es, sequence++ & 0x3fff, "all_reduce");
  if (rc != DS_OK) return abandon_slots(rc);
  memcpy(out->data, tmp, (size_t)(n * es));
  return DS_OK;
}

/* out (n/P elements) = this rank's 1/P slice of the reduction of in (n elements, n divisible by P) */
int ds_comm_reduce_scatter(ds_tensor *out, const ds_tensor *in, int op) {
  int rc = check_ready("reduce_scatter");
  if (rc == DS_OK) rc = check_tensors(out, in, op, "reduce_scatter");
  if (rc != DS_OK) return rc;
  int64_t n = in->numel, c = n / world.size;
  DS_CHECK(c * world.size == n && out->numel == c, "reduce_scatter: %lld elements do not split into %d slices of %lld",
           (long long)n, world.size, (long long)out->numel);
  header h = header_of(KIND_REDUCE_SCATTER, op, 0, in);
  rc = agree(&h, "reduce_scatter", 0);
  return rc != DS_OK || n == 0 ? rc : reduce_scatter(out->data, in->data, c, n, in->dtype, op, "reduce_scatter");
}

/* out (P * in's elements) = the inputs of ranks 1..P one after another */
int ds_comm_all_gather(ds_tensor *out, const ds_tensor *in) {
  int rc = check_ready("all_gather");
  if (rc != DS_OK) return rc;
  DS_CHECK(out && in && out->dtype == in->dtype && ds_tensor_is_contiguous(in) && ds_tensor_is_contiguous(out),
      "all_gather: operands must be contiguous, of one dtype");
  int64_t c = in->numel, n = c * world.size, es = ds_dtype_size(in->dtype);
  DS_CHECK(out->numel == n, "all_gather: output has %lld elements, needs %lld", (long long)out->numel, (long long)n);
  header h = header_of(KIND_ALL_GATHER, 0, 0, in);
  rc = agree(&h, "all_gather", 0);
  if (rc != DS_OK || n == 0) return rc;
  char *tmp = slot(SLOT_RESULT, (size_t)(n * es));
  if (!tmp) return ds_fail(DS_ENOMEM, "all_gather: out of memory");
  memcpy(tmp + chunk_lo(c, n, world.rank) * es, in->data, (size_t)(c * es));
  rc = world.size > 1 ? gather_phase(tmp, c, n, es, sequence++ & 0x3fff, "all_gather") : DS_OK;
  if (rc != DS_OK) return abandon_slots(rc);
  memcpy(out->data, tmp, (size_t)(n * es));
  return DS_OK;
}

/* t on every rank = t on rank `root` (0-based) */
int ds_comm_broadcast(ds_tensor *t, int root) {
  int rc = check_ready("broadcast");
  if (rc != DS_OK) return rc;
  DS_CHECK(t && ds_tensor_is_contiguous(t), "broadcast: the tensor must be contiguous");
  DS_CHECK(root >= 0 && root < world.size, "broadcast: root rank %d is not in 1..%d", root + 1, world.size);
  header h = header_of(KIND_BROADCAST, 0, root, t);
  rc = agree(&h, "broadcast", 0);
  int64_t bytes = t->numel * ds_dtype_size(t->dtype);
  if (rc != DS_OK || world.size == 1 || bytes == 0) return rc;
  int tag = sequence++ & 0x3fff;
  requests q; q.n = 0;
  char *tmp = world.rank == root ? t->data : slot(SLOT_RESULT, (size_t)bytes);
  if (!tmp) return ds_fail(DS_ENOMEM, "broadcast: out of memory");
  for (int j = 0; j < world.size && rc == DS_OK; j++)
    if (world.rank == root ? j != root : j == root) rc = post(&q, world.rank == root, tmp, bytes, j, tag, "broadcast");
  if (rc == DS_OK) rc = wait_all(&q, "broadcast", 0);
  if (rc != DS_OK) return abandon_slots(rc);
  if (world.rank != root) memcpy(t->data, tmp, (size_t)bytes);
  return DS_OK;
}

/* every rank waits until all have arrived (the header exchange alone) */
int ds_comm_barrier(void) {
  int rc = check_ready("barrier");
  header h = header_of(KIND_BARRIER, 0, 0, NULL);
  return rc != DS_OK ? rc : agree(&h, "barrier", 0);
}

/* the end of this rank's script: waits (without a deadline) until every rank ends too; a rank still calling
   collectives is a difference (an error naming it), and so is any earlier failure */
int ds_comm_finalize(void) {
  int rc = check_ready("finalize");
  header h = header_of(KIND_FINALIZE, 0, 0, NULL);
  return rc != DS_OK ? rc : agree(&h, "finalize", 1);
}

/* the op-table kernels: t = {out, x}, attrs = {reduction} */
int ds_all_reduce_f32(ds_tensor *const *t, const double *attrs) { return ds_comm_all_reduce(t[0], t[1], (int)*attrs); }
int ds_all_reduce_f64(ds_tensor *const *t, const double *attrs) { return ds_comm_all_reduce(t[0], t[1], (int)*attrs); }
