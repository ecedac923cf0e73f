/* dataio.c: data files and loaders: IDX reading through zlib, row gathering for batches,
   seeded permutations for shuffling, isatty for progress bars. */
#include "internal.h"
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

/* ---- IDX (http://yann.lecun.com/exdb/mnist/ layout): 0 0 type ndim, ndim big-endian u32 dims, data ---- */

/* read exactly n bytes; returns bytes read (< n at end of file), -1 on a zlib error */
static int64_t gz_read_all(gzFile f, void *dst, int64_t n) {
  int64_t got = 0;
  while (got < n) {
    int64_t want = n - got;
    if (want > (1 << 30)) want = 1 << 30;
    int r = gzread(f, (char *)dst + got, (unsigned)want);
    if (r < 0) return -1;
    if (r == 0) break;
    got += r;
  }
  return got;
}

static void swap_bytes(void *data, int64_t count, int width) {
  uint8_t *p = data;
  for (int64_t i = 0; i < count; i++, p += width)
    for (int a = 0, b = width - 1; a < b; a++, b--) { uint8_t t = p[a]; p[a] = p[b]; p[b] = t; }
}

static ds_tensor *idx_fail(gzFile f, ds_tensor *t, int code, const char *path, const char *fmt, ...)
  __attribute__((format(printf, 5, 6)));
static ds_tensor *idx_fail(gzFile f, ds_tensor *t, int code, const char *path, const char *fmt, ...) {
  char msg[256];
  va_list ap; va_start(ap, fmt); vsnprintf(msg, sizeof msg, fmt, ap); va_end(ap);
  if (f) {
    int zerr = 0; const char *zmsg = gzerror(f, &zerr);
    if (zerr < 0 && zerr != Z_BUF_ERROR) ds_fail(code, "%s: %s (zlib: %s)", path, msg, zmsg);
    else ds_fail(code, "%s: %s", path, msg);
    gzclose(f);
  } else ds_fail(code, "%s: %s", path, msg);
  ds_tensor_free(t);
  return NULL;
}

ds_tensor *ds_idx_read(const char *path) {
  gzFile f = gzopen(path, "rb");
  if (!f) return idx_fail(NULL, NULL, DS_EIO, path, "cannot open the file (%s)", strerror(errno));
  uint8_t magic[4];
  int64_t got = gz_read_all(f, magic, 4);
  if (got < 0) return idx_fail(f, NULL, DS_EIO, path, "cannot decompress the header");
  if (got < 4) return idx_fail(f, NULL, DS_EINVAL, path, "truncated: %lld of the 4 magic bytes", (long long)got);
  if (magic[0] != 0 || magic[1] != 0)
    return idx_fail(f, NULL, DS_EINVAL, path, "not an IDX file (magic starts with %d %d, expected 0 0)", magic[0], magic[1]);
  int dtype, width;
  switch (magic[2]) {
    case 0x08: dtype = DS_U8; width = 1; break;
    case 0x0C: dtype = DS_I32; width = 4; break;
    case 0x0D: dtype = DS_F32; width = 4; break;
    case 0x0E: dtype = DS_F64; width = 8; break;
    default: return idx_fail(f, NULL, DS_EINVAL, path,
                             "unsupported IDX element type 0x%02x (supported: 0x08 u8, 0x0C i32, 0x0D f32, 0x0E f64)", magic[2]);
  }
  int ndim = magic[3];
  if (ndim < 1 || ndim > DS_MAXDIM)
    return idx_fail(f, NULL, DS_EINVAL, path, "IDX file has %d dims (supported: 1..%d)", ndim, DS_MAXDIM);
  uint8_t dims[4 * DS_MAXDIM];
  got = gz_read_all(f, dims, 4 * ndim);
  if (got < 0) return idx_fail(f, NULL, DS_EIO, path, "cannot decompress the header");
  if (got < 4 * ndim) return idx_fail(f, NULL, DS_EINVAL, path, "truncated: header has %lld of %d dim bytes", (long long)got, 4 * ndim);
  int64_t shape[DS_MAXDIM];
  for (int i = 0; i < ndim; i++)
    shape[i] = ((int64_t)dims[4 * i] << 24) | (dims[4 * i + 1] << 16) | (dims[4 * i + 2] << 8) | dims[4 * i + 3];
  ds_tensor *t = ds_tensor_new(dtype, ndim, shape);
  if (!t) return idx_fail(f, NULL, DS_ENOMEM, path, "cannot allocate the tensor");
  int64_t nbytes = t->numel * width;
  got = gz_read_all(f, t->data, nbytes);
  if (got < 0) return idx_fail(f, t, DS_EIO, path, "corrupted compressed data within the %lld data bytes", (long long)nbytes);
  if (got < nbytes) return idx_fail(f, t, DS_EINVAL, path, "truncated: %lld of %lld data bytes", (long long)got, (long long)nbytes);
  uint8_t extra;
  got = gz_read_all(f, &extra, 1);
  if (got < 0) return idx_fail(f, t, DS_EIO, path, "corrupted compressed data at the end");
  if (got > 0) return idx_fail(f, t, DS_EINVAL, path, "trailing bytes after the %lld data bytes the header announces", (long long)nbytes);
  int zerr = Z_OK;
  gzerror(f, &zerr);
  if (zerr != Z_OK) return idx_fail(f, t, DS_EINVAL, path, "truncated gzip stream (no end-of-stream trailer)");
  gzclose(f);
  if (width > 1) swap_bytes(t->data, t->numel, width);
  return t;
}

/* ---- batches: out[i] = src[idx[i]] along dim 1, idx 0-based ---- */
int ds_data_gather_rows(ds_tensor *out, const ds_tensor *src, const int64_t *idx, int64_t n) {
  char a[128], b[128];
  DS_CHECK(src->ndim >= 1 && out->ndim == src->ndim, "gather_rows: out %s and src %s differ in rank",
           ds_shape_str(out, a), ds_shape_str(src, b));
  DS_CHECK(out->dtype == src->dtype, "gather_rows: out dtype %d and src dtype %d differ", out->dtype, src->dtype);
  DS_CHECK(ds_tensor_is_contiguous(out) && ds_tensor_is_contiguous(src), "gather_rows: out and src must be contiguous");
  DS_CHECK(out->shape[0] == n, "gather_rows: out %s has %lld rows, %lld indices given", ds_shape_str(out, a),
           (long long)out->shape[0], (long long)n);
  for (int d = 1; d < src->ndim; d++)
    DS_CHECK(out->shape[d] == src->shape[d], "gather_rows: row shapes differ: out %s, src %s",
             ds_shape_str(out, a), ds_shape_str(src, b));
  int64_t rows = src->shape[0];
  for (int64_t i = 0; i < n; i++)
    DS_CHECK(idx[i] >= 0 && idx[i] < rows, "gather_rows: index %lld out of range for %lld rows",
             (long long)idx[i] + 1, (long long)rows);
  int64_t row_bytes = rows ? (src->numel / rows) * ds_dtype_size(src->dtype) : 0;
  for (int64_t i = 0; i < n; i++)
    memcpy((char *)out->data + i * row_bytes, (const char *)src->data + idx[i] * row_bytes, (size_t)row_bytes);
  return DS_OK;
}

/* ---- a seeded permutation of 0..n-1 (Fisher-Yates over splitmix64; same on every machine) ---- */
static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

int ds_data_permutation(int64_t *out, int64_t n, uint64_t seed) {
  DS_CHECK(n >= 0, "permutation: negative length %lld", (long long)n);
  for (int64_t i = 0; i < n; i++) out[i] = i;
  uint64_t s = seed;
  for (int64_t i = n - 1; i > 0; i--) {
    /* unbiased draw in [0, i] by rejection */
    uint64_t bound = (uint64_t)i + 1, limit = UINT64_MAX - UINT64_MAX % bound, r;
    do r = splitmix64(&s); while (r >= limit);
    int64_t j = (int64_t)(r % bound);
    int64_t t = out[i]; out[i] = out[j]; out[j] = t;
  }
  return DS_OK;
}

/* ---- progress bars ---- */
int ds_isatty(int fd) { return isatty(fd); }
