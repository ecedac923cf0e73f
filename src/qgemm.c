/* qgemm.c: int8 linear layers: each row of x (f32) is quantized to u8 with its own scale and zero point
   (dynamic) or with the fixed ones of calibration (static), multiplied by a per-output-channel s8 weight in
   exact int32 sums (VNNI, AVX2 or the portable path: the same integers), and dequantized with the bias in one
   fixed f32 computation, so the output is the same on every host, ISA path, thread count and batch composition.
   Kernels: ds_linear_int8_f32 (the weight as stored, packed on each call), ds_linear_int8_packed_f32 (a frozen
   weight packed once: ds_pack_int8_weight and ds_int8_colsum, run by the prepack pass), and their static forms
   ds_linear_int8_static[_packed]_f32; the quantization, packing and product pieces qconv.c shares (qgemm.h). */
#include "internal.h"
#include "qgemm.h"
#include <math.h>
#include <omp.h>
#include <string.h>
#include <immintrin.h>

/* below this many multiply-adds one thread runs the whole product */
#define PAR_MACS (1 << 19)

/* the portable path: the same sums as the vector kernels, one row and column at a time */
static void micro_portable(int mr, int nr, int64_t G, const uint8_t *a, int64_t lda, const int8_t *b,
                           const qgemm_out *o) {
  int32_t tile[4 * 2 * QG_NR];
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < nr; j++) {
      const int8_t *w = b + (j / QG_NR) * G * QG_GROUP + (j % QG_NR) * QG_KG;
      int32_t s = 0;
      for (int64_t g = 0; g < G; g++)
        for (int t = 0; t < QG_KG; t++) s += (int32_t)a[r * lda + g * QG_KG + t] * (int32_t)w[g * QG_GROUP + t];
      tile[r * 2 * QG_NR + j] = s;
    }
  ds_qgemm_store(tile, 2 * QG_NR, mr, nr, o);
}
static const qgemm_kernel portable = { 4, 2 * QG_NR, micro_portable };

/* the path: VNNI on AVX-512 hosts that have it (6 x 64 tiles when every output is at least 64 wide: a quarter
   of a broadcast per vpdpbusd instead of half; 8 x 32 below, where the wide tile would be mostly empty), AVX2, or
   the portable code under DS_ISA=scalar */
static const qgemm_kernel *int8_kernel(int64_t narrowest) {
  int isa = ds_isa();
  if (ds_isa_vnni()) return narrowest >= 64 ? &ds_qgemm_vnni_wide : &ds_qgemm_vnni;
  if (isa == DS_ISA_SCALAR) return &portable;
  return &ds_qgemm_avx2;
}

const char *ds_int8_path(void) {
  const qgemm_kernel *k = int8_kernel(0);
  return k == &ds_qgemm_vnni ? "avx512-vnni" : k == &portable ? "scalar" : "avx2";
}

/* strips [s0, s1) of wp (ceil(N/16), ceil(K/4), 64) = w (N, K) s8 in qgemm.h's layout: four bytes of a row
   at a time */
static void pack_strips(const int8_t *w, int64_t N, int64_t K, int64_t s0, int64_t s1, int8_t *wp) {
  int64_t G = (K + QG_KG - 1) / QG_KG, full = K / QG_KG;
  for (int64_t s = s0; s < s1; s++)
    for (int j = 0; j < QG_NR; j++) {
      int64_t n = s * QG_NR + j;
      int8_t *d = wp + s * G * QG_GROUP + j * QG_KG;
      if (n >= N) {
        for (int64_t g = 0; g < G; g++) memset(d + g * QG_GROUP, 0, QG_KG);
        continue;
      }
      const int8_t *r = w + n * K;
      for (int64_t g = 0; g < full; g++) memcpy(d + g * QG_GROUP, r + g * QG_KG, QG_KG);
      if (full < G) {
        int8_t last[QG_KG] = { 0 };
        memcpy(last, r + full * QG_KG, (size_t)(K - full * QG_KG));
        memcpy(d + full * QG_GROUP, last, QG_KG);
      }
    }
}

void ds_qgemm_pack(const int8_t *w, int64_t N, int64_t K, int8_t *wp) {
  pack_strips(w, N, K, 0, (N + QG_NR - 1) / QG_NR, wp);
}

static void colsums(const int8_t *w, int64_t n0, int64_t n1, int64_t K, int32_t *cs) {
  for (int64_t n = n0; n < n1; n++) {
    int32_t s = 0;
    for (int64_t k = 0; k < K; k++) s += w[n * K + k];
    cs[n] = s;
  }
}

void ds_qgemm_colsums(const int8_t *w, int64_t N, int64_t K, int32_t *cs) { colsums(w, 0, N, K, cs); }

/* lo = min(0, min x), hi = max(0, max x) over nseg runs of len values, run s at x + s * step (exact: the order
   does not matter); 0 when x holds NaN or an infinity (x - x is NaN exactly then) */
static int finite_range_runs(const float *x, int64_t nseg, int64_t len, int64_t step, float *lo_out,
                             float *hi_out) {
  if (ds_isa() == DS_ISA_AVX512) return ds_qgemm_range_runs_avx512(x, nseg, len, step, lo_out, hi_out);
  __m256 lo = _mm256_setzero_ps(), hi = lo, bad = lo;
  float a = 0, b = 0;
  for (int64_t s = 0; s < nseg; s++) {
    const float *xs = x + s * step;
    int64_t k = 0;
    for (; k + 8 <= len; k += 8) {
      __m256 v = _mm256_loadu_ps(xs + k), d = _mm256_sub_ps(v, v);
      lo = _mm256_min_ps(lo, v);
      hi = _mm256_max_ps(hi, v);
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(d, d, _CMP_UNORD_Q));
    }
    for (; k < len; k++) {
      if (!isfinite(xs[k])) return 0;
      a = xs[k] < a ? xs[k] : a;
      b = xs[k] > b ? xs[k] : b;
    }
  }
  if (_mm256_movemask_ps(bad)) return 0;
  float l[8], h[8];
  _mm256_storeu_ps(l, lo);
  _mm256_storeu_ps(h, hi);
  for (int i = 0; i < 8; i++) { a = l[i] < a ? l[i] : a; b = h[i] > b ? h[i] : b; }
  *lo_out = a; *hi_out = b;
  return 1;
}

static int finite_range(const float *x, int64_t n, float *lo_out, float *hi_out) {
  return finite_range_runs(x, 1, n, 0, lo_out, hi_out);
}

/* ONNX's DynamicQuantizeLinear's scale and zero point of the range [lo, hi] (qgemm.h) */
static void range_params(float lo, float hi, float *scale, int32_t *zp) {
  float s = (hi - lo) / 255.0f;
  *scale = s; *zp = 0;
  if (s == 0) return;   /* an all-zero row (or one too tiny to span a step) */
  float z = -lo / s;
  z = z < 0 ? 0 : z > 255 ? 255 : z;
  *zp = (int32_t)nearbyintf(z);
}

int ds_qgemm_range(const float *x, int64_t n, float *scale, int32_t *zp) {
  float lo, hi;
  if (!finite_range(x, n, &lo, &hi)) return 0;
  range_params(lo, hi, scale, zp);
  return 1;
}

/* q = clamp(round(x / scale) + zp, 0, 255) of finite x (all 0 when scale is 0); 8 at a time as the scalar tail
   computes it: the IEEE quotient, rounded half to even, plus zp, clamped */
static void quantize_finite(const float *x, int64_t n, float scale, int32_t zp, uint8_t *q) {
  if (scale == 0) {
    memset(q, 0, (size_t)n);
    return;
  }
  if (ds_isa() == DS_ISA_AVX512) {
    ds_qgemm_quantize_avx512(x, n, scale, zp, q);
    return;
  }
  const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps((float)zp), zero = _mm256_setzero_ps(),
               top = _mm256_set1_ps(255);
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    __m256 v = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + k), s), _MM_FROUND_TO_NEAREST_INT |
                               _MM_FROUND_NO_EXC);
    v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, z), zero), top);
    __m256i i = _mm256_cvtps_epi32(v);
    __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
    _mm_storel_epi64((__m128i *)(q + k), _mm_packus_epi16(w, w));
  }
  for (; k < n; k++) {
    float v = nearbyintf(x[k] / scale) + (float)zp;
    q[k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
  }
}

int ds_qgemm_quantize(const float *x, int64_t n, float scale, int32_t zp, uint8_t *q) {
  float lo, hi;
  if (!finite_range(x, n, &lo, &hi)) return 0;
  quantize_finite(x, n, scale, zp, q);
  return 1;
}

/* row m of q->x into q->qa (zeros past K), q->sa, q->za; 0: it holds NaN or an infinity. A row in runs (q->xrow)
   gets the range and values it would get whole: min, max and the quantization are per value. */
static int quantize_row(const qgemm_job *q, int64_t m) {
  int64_t nseg = q->xrow ? q->nseg : 1, len = q->K / nseg, step = q->xrow ? q->segstride : 0;
  const float *xr = q->xrow ? q->x + q->xrow[m] : q->x + m * q->K;
  uint8_t *qr = q->qa + m * q->Kp;
  float lo, hi;
  if (!finite_range_runs(xr, nseg, len, step, &lo, &hi)) return 0;
  if (q->fixed) { q->sa[m] = q->fscale; q->za[m] = q->fzp; }
  else range_params(lo, hi, &q->sa[m], &q->za[m]);
  for (int64_t s = 0; s < nseg; s++) quantize_finite(xr + s * step, len, q->sa[m], q->za[m], qr + s * len);
  memset(qr + q->K, 0, (size_t)(q->Kp - q->K));
  return 1;
}

/* the kernel-width column tiles [u0, u1) of the parts, numbered part after part, over every row */
static void run_units(const qgemm_job *q, int64_t u0, int64_t u1) {
  const int NRK = q->kr->nr;
  int64_t ub = 0;   /* the first tile of part p */
  for (int p = 0; p < q->nparts && ub < u1; p++) {
    const qgemm_part *pt = &q->parts[p];
    int64_t up = (pt->N + NRK - 1) / NRK;
    for (int64_t u = u0 > ub ? u0 : ub; u < u1 && u < ub + up; u++) {
      int64_t j = (u - ub) * NRK;
      int nr = (int)(pt->N - j < NRK ? pt->N - j : NRK);
      const int8_t *b = q->wp + (pt->strip + j / QG_NR) * q->G * QG_GROUP;
      int64_t c = pt->c + j;
      for (int64_t i = 0; i < q->M; i += q->kr->mr) {
        int mr = (int)(q->M - i < q->kr->mr ? q->M - i : q->kr->mr);
        qgemm_out o = { q->sa + i, q->za + i, q->cs + c, q->ws + c, q->bias + c, pt->y + i * pt->N + j, pt->N };
        q->kr->micro(mr, nr, q->G, q->qa + i * q->Kp, q->Kp, b, &o);
      }
    }
    ub += up;
  }
}

/* the column tiles of every part */
static int64_t total_units(const qgemm_job *q) {
  int64_t units = 0;
  for (int p = 0; p < q->nparts; p++) units += (q->parts[p].N + q->kr->nr - 1) / q->kr->nr;
  return units;
}

/* thread me of nt: its share of the rows to quantize and of the weight to pack, then (once every row is
   quantized) its share of the column tiles */
static void run_share(qgemm_job *q, int me, int nt) {
  const int NRK = q->kr->nr;
  int64_t units = total_units(q), u0 = units * me / nt, u1 = units * (me + 1) / nt;
  if (q->x) {
    int ok = 1;
    for (int64_t m = q->M * me / nt; m < q->M * (me + 1) / nt && ok; m++) ok = quantize_row(q, m);
    if (!ok) __atomic_store_n(&q->bad, 1, __ATOMIC_RELAXED);
  }
  int64_t j0 = u0 * NRK, j1 = u1 * NRK < q->N ? u1 * NRK : q->N;   /* one part when w is set */
  if (q->w && j0 < j1) {
    pack_strips(q->w, q->N, q->K, j0 / QG_NR, (j1 + QG_NR - 1) / QG_NR, q->wp);
    colsums(q->w, j0, j1, q->K, q->cs);
  }
  if (q->x && nt > 1) {
#pragma omp barrier
  }
  if (!__atomic_load_n(&q->bad, __ATOMIC_RELAXED) && u0 < u1) run_units(q, u0, u1);
}

/* the product of a quantized x against a packed weight, split by column tiles (in the kernel's widths) */
int ds_qgemm_run(qgemm_job *q) {
  qgemm_part whole = { q->N, 0, 0, q->y };
  if (!q->parts) { q->parts = &whole; q->nparts = 1; }
  int64_t narrowest = q->parts[0].N;
  for (int p = 1; p < q->nparts; p++) narrowest = q->parts[p].N < narrowest ? q->parts[p].N : narrowest;
  q->kr = int8_kernel(narrowest);
  q->bad = 0;
  int64_t units = total_units(q);
  double macs = (double)q->M * (double)q->N * (double)q->K;
  if (units > 1 && macs >= PAR_MACS && ds_team() > 1) {
    double t0 = ds_team_start();
#pragma omp parallel
    {
      ds_team_arrive(t0);
      run_share(q, omp_get_thread_num(), omp_get_num_threads());
    }
    ds_team_done();
  } else run_share(q, 0, 1);
  if (q->parts == &whole) { q->parts = NULL; q->nparts = 0; }
  return !q->bad;
}

static int check(const ds_tensor *t, int dtype, const char *op, const char *what) {
  DS_CHECK(t, "%s: missing %s", op, what);
  DS_CHECK(t->dtype == dtype, "%s: %s must be %s, got %s", op, what, ds_dtype_name(dtype), ds_dtype_name(t->dtype));
  DS_CHECK(ds_tensor_is_contiguous(t), "%s: %s must be contiguous", op, what);
  return DS_OK;
}

/* the input's fixed quantization (static mode): t_scale {} f32 > 0, t_zero {} u8 */
static int fixed_params(const char *op, const ds_tensor *t_scale, const ds_tensor *t_zero, float *scale,
                        int32_t *zp) {
  int rc;
  if ((rc = check(t_scale, DS_F32, op, "input scale")) || (rc = check(t_zero, DS_U8, op, "input zero point")))
    return rc;
  DS_CHECK(t_scale->numel == 1 && t_zero->numel == 1, "%s: the input scale and zero point must be single values",
           op);
  *scale = *(const float *)t_scale->data;
  *zp = *(const uint8_t *)t_zero->data;
  DS_CHECK(isfinite(*scale) && *scale > 0, "%s: the input scale must be positive and finite, got %g", op,
           (double)*scale);
  return DS_OK;
}

/* the shared part of the linear kernels: y_p (..., N_p), p < n, from x (..., K): the columns of the product with
   the weight (N = sum N_p, K) split in turn between them, each part's packed strips starting on a strip of its
   own; wp/cs given (packed) or to fill from w (not NULL, n = 1: packed on this call); fixed: NULL (each row
   quantized with its own range) or the input's scale and zero point */
static int linear_int8(const char *op, ds_tensor *const *ys, const int64_t *Ns, int n, const ds_tensor *x, int xdims,
                       const int8_t *w, int8_t *wp, int32_t *cs, const ds_tensor *ws, const ds_tensor *bias,
                       int64_t K, const ds_tensor *const *fixed) {
  char s1[128], s2[128];
  int rc;
  float fscale = 0;
  int32_t fzp = 0;
  if ((rc = check(ws, DS_F32, op, "weight scales")) || (rc = check(bias, DS_F32, op, "bias"))) return rc;
  DS_CHECK(x, "%s: missing input", op);
  DS_CHECK(x->dtype == DS_F32, "%s: input must be f32, got %s", op, ds_dtype_name(x->dtype));
  if (fixed && (rc = fixed_params(op, fixed[0], fixed[1], &fscale, &fzp))) return rc;
  int nd = x->ndim, lead = nd - xdims;
  DS_CHECK(lead >= 0 && x->shape[nd - 1] * (xdims == 2 ? x->shape[nd - 2] : 1) == K,
           "%s: input %s does not end in K = %lld", op, ds_shape_str(x, s1), (long long)K);
  int contiguous = ds_tensor_is_contiguous(x);
  DS_CHECK(contiguous || x->shape[nd - 1] == 1 || x->strides[nd - 1] == 1,
           "%s: input %s must have a unit-stride last dim", op, ds_shape_str(x, s1));
  int64_t M = 1, N = 0;
  for (int d = 0; d < lead; d++) M *= x->shape[d];
  qgemm_part parts[QG_MAX_PARTS];
  for (int p = 0, strip = 0; p < n; p++) {
    const ds_tensor *y = ys[p];
    if ((rc = check(y, DS_F32, op, "output"))) return rc;
    DS_CHECK(y->ndim == lead + 1 && y->shape[lead] == Ns[p] && y->numel == M * Ns[p],
             "%s: output %s does not match input %s and N = %lld", op, ds_shape_str(y, s1), ds_shape_str(x, s2),
             (long long)Ns[p]);
    parts[p] = (qgemm_part){ Ns[p], N, strip, y->data };
    N += Ns[p];
    strip += (int)((Ns[p] + QG_NR - 1) / QG_NR);
  }
  DS_CHECK(ws->numel == N && bias->numel == N, "%s: weight scales and bias must hold N = %lld values", op,
           (long long)N);
  DS_CHECK(K <= QG_K_MAX, "%s: K = %lld is over %d (the int32 sums could overflow)", op, (long long)K, QG_K_MAX);
  if (M == 0 || N == 0) return DS_OK;
  int64_t G = (K + QG_KG - 1) / QG_KG, Kp = G * QG_KG, rounded;
  int64_t rows = contiguous ? 0 : M;   /* row offsets of a strided x */
  int64_t bytes = rows * (int64_t)sizeof(int64_t) + M * Kp + M * (int64_t)(sizeof(float) + sizeof(int32_t)) + 64;
  char *buf = ds_mem_alloc(bytes, &rounded);
  if (!buf) return ds_fail(DS_ENOMEM, "%s: out of memory for the quantized input", op);
  int64_t *xrow = (int64_t *)buf;
  float *sa = (float *)(xrow + rows);
  int32_t *za = (int32_t *)(sa + M);
  uint8_t *qa = (uint8_t *)(za + M);
  for (int64_t m = 0; m < rows; m++) {   /* the leading dims' strides, the last one fastest */
    int64_t off = 0, rest = m;
    for (int d = lead - 1; d >= 0; d--) { off += rest % x->shape[d] * x->strides[d]; rest /= x->shape[d]; }
    xrow[m] = off;
  }
  qgemm_job q = { .M = M, .N = N, .K = K, .G = G, .Kp = Kp, .x = x->data, .xrow = contiguous ? NULL : xrow,
                  .nseg = xdims == 2 ? x->shape[nd - 2] : 1, .segstride = xdims == 2 ? x->strides[nd - 2] : 0,
                  .fixed = fixed != NULL, .fscale = fscale, .fzp = fzp, .qa = qa, .sa = sa, .za = za, .w = w,
                  .wp = wp, .cs = cs, .ws = ws->data, .bias = bias->data, .nparts = n, .parts = parts };
  int ok = ds_qgemm_run(&q);
  ds_mem_release(buf, rounded);
  if (!ok) return ds_fail(DS_EINVAL, "%s: the input holds NaN or an infinity (it cannot be quantized)", op);
  return DS_OK;
}

/* y, x, w (N, K) i8, wscale, bias[, x_scale, x_zero]: the weight packed on this call */
static int linear_unpacked(const char *op, ds_tensor *const *t, const ds_tensor *const *fixed) {
  ds_tensor *w = t[2];
  char s1[128];
  int rc;
  if ((rc = check(w, DS_I8, op, "weight"))) return rc;
  DS_CHECK(w->ndim == 2, "%s: weight must be (N, K), got %s", op, ds_shape_str(w, s1));
  int64_t N = w->shape[0], K = w->shape[1], rounded;
  int64_t packed = ((N + QG_NR - 1) / QG_NR) * ((K + QG_KG - 1) / QG_KG) * QG_GROUP;
  char *buf = ds_mem_alloc(packed + N * (int64_t)sizeof(int32_t) + 64, &rounded);
  if (!buf) return ds_fail(DS_ENOMEM, "%s: out of memory for the packed weight", op);
  int32_t *cs = (int32_t *)buf;
  int8_t *wp = (int8_t *)(cs + N);
  rc = linear_int8(op, t, &N, 1, t[1], 1, w->data, wp, cs, t[3], t[4], K, fixed);
  ds_mem_release(buf, rounded);
  return rc;
}

/* ys (n outputs), then in = {x, wp (sum ceil(N_p/16), ceil(K/4), 64) i8, colsum (N) i32, wscale, bias[, x_scale,
   x_zero]}; Ns: the outputs' widths (NULL: one output as wide as colsum); a = {K, xdims}: x (..., K) or, xdims 2,
   (..., H, D) read as rows of K = H * D (any strides but a unit-stride last dim: attention's heads, transposed) */
static int linear_packed(const char *op, ds_tensor *const *ys, const int64_t *Ns, int n, ds_tensor *const *in,
                         const double *a, const ds_tensor *const *fixed) {
  ds_tensor *wp = in[1], *cs = in[2];
  char s1[128];
  int rc;
  if ((rc = check(wp, DS_I8, op, "packed weight")) || (rc = check(cs, DS_I32, op, "column sums"))) return rc;
  int64_t whole = cs->numel, K = (int64_t)a[0], strips = 0, N = 0;
  DS_CHECK(a[0] >= 0 && a[0] <= QG_K_MAX && (double)K == a[0], "%s: bad K attribute", op);
  DS_CHECK(a[1] == 0 || a[1] == 1 || a[1] == 2, "%s: bad xdims attribute %g (1 or 2)", op, a[1]);
  if (!Ns) Ns = &whole;
  for (int p = 0; p < n; p++) { strips += (Ns[p] + QG_NR - 1) / QG_NR; N += Ns[p]; }
  DS_CHECK(N == cs->numel, "%s: the outputs' widths add up to %lld, the column sums hold %lld", op, (long long)N,
           (long long)cs->numel);
  DS_CHECK(wp->ndim == 3 && wp->shape[0] == strips && wp->shape[1] == (K + QG_KG - 1) / QG_KG &&
               wp->shape[2] == QG_GROUP,
           "%s: packed weight %s does not hold (N, K) = (%lld, %lld)", op, ds_shape_str(wp, s1), (long long)N,
           (long long)K);
  return linear_int8(op, ys, Ns, n, in[0], a[1] == 2 ? 2 : 1, NULL, wp->data, cs->data, in[3], in[4], K, fixed);
}

/* t = {y (..., N) f32, x (..., K) f32, w (N, K) i8, wscale (N) f32, bias (N) f32} */
int ds_linear_int8_f32(ds_tensor *const *t, const double *attrs) {
  (void)attrs;
  return linear_unpacked("linear_int8", t, NULL);
}

/* t = {y (..., N) f32, x (..., K) f32, wp (ceil(N/16), ceil(K/4), 64) i8, colsum (N) i32, wscale (N), bias (N)};
   attrs: {K, xdims} (the packed weight rounds K up to a multiple of 4; xdims: linear_packed) */
int ds_linear_int8_packed_f32(ds_tensor *const *t, const double *attrs) {
  return linear_packed("linear_int8_packed", t, NULL, 1, t + 1, attrs, NULL);
}

/* static mode: t = {y, x, w, wscale, bias, x_scale {} f32, x_zero {} u8} */
int ds_linear_int8_static_f32(ds_tensor *const *t, const double *attrs) {
  (void)attrs;
  return linear_unpacked("linear_int8_static", t, (const ds_tensor *const *)t + 5);
}

/* static mode, packed: t = {y, x, wp, colsum, wscale, bias, x_scale, x_zero}; attrs: {K, xdims} */
int ds_linear_int8_static_packed_f32(ds_tensor *const *t, const double *attrs) {
  return linear_packed("linear_int8_static_packed", t, NULL, 1, t + 1, attrs, (const ds_tensor *const *)t + 6);
}

/* plan check (its registry row is KV): a step gives n outputs and 5 inputs, attrs {K, xdims, n, N_1 .. N_n} */
int ds_linear_int8_multi_check(int nbuf, const int *dtypes, int nattrs, const double *attrs) {
  (void)dtypes;
  DS_CHECK(nattrs >= 3, "linear_int8_multi: attrs {K, xdims, n, N_1 .. N_n} missing");
  double n = attrs[2];
  DS_CHECK(n >= 1 && n <= QG_MAX_PARTS && n == (double)(int)n && nattrs == 3 + (int)n && nbuf == (int)n + 5,
           "linear_int8_multi: step has %d operands and %d attrs for %g outputs", nbuf, nattrs, n);
  return DS_OK;
}

/* several int8 linears over one x, one product: t = {y_1 (..., N_1) .. y_n, x, wp (sum ceil(N_p/16), ceil(K/4),
   64) i8 (each weight's strips in turn), colsum (N) i32, wscale (N), bias (N)} with N = sum N_p; attrs {K, xdims,
   n, N_1 .. N_n} (x as linear_packed reads it). Each y_p gets the bits linear_int8_packed gives it alone (the
   same row quantization, the same sums and dequantization per column), with x quantized once and one parallel
   region. */
int ds_linear_int8_multi_f32(ds_tensor *const *t, const double *attrs) {
  const char *op = "linear_int8_multi";
  DS_CHECK(attrs[2] >= 1 && attrs[2] <= QG_MAX_PARTS && attrs[2] == (double)(int)attrs[2],
           "%s: bad output count %g (1 to %d)", op, attrs[2], QG_MAX_PARTS);
  int n = (int)attrs[2];
  int64_t Ns[QG_MAX_PARTS];
  for (int p = 0; p < n; p++) {
    Ns[p] = (int64_t)attrs[3 + p];
    DS_CHECK(attrs[3 + p] >= 0 && (double)Ns[p] == attrs[3 + p], "%s: bad output width %g", op, attrs[3 + p]);
  }
  return linear_packed(op, t, Ns, n, t + n, attrs, NULL);
}

/* t = {wp (ceil(N/16), ceil(K/4), 64) i8, w (N, K) i8} */
int ds_pack_int8_weight_i8(ds_tensor *const *t, const double *attrs) {
  (void)attrs;
  const char *op = "pack_int8_weight";
  char s1[128], s2[128];
  int rc;
  if ((rc = check(t[0], DS_I8, op, "packed weight")) || (rc = check(t[1], DS_I8, op, "weight"))) return rc;
  const ds_tensor *wp = t[0], *w = t[1];
  DS_CHECK(w->ndim == 2 && wp->ndim == 3 && wp->shape[0] == (w->shape[0] + QG_NR - 1) / QG_NR &&
               wp->shape[1] == (w->shape[1] + QG_KG - 1) / QG_KG && wp->shape[2] == QG_GROUP,
           "%s: %s cannot hold %s packed", op, ds_shape_str(wp, s1), ds_shape_str(w, s2));
  ds_qgemm_pack(w->data, w->shape[0], w->shape[1], wp->data);
  return DS_OK;
}

/* t = {colsum (N) i32, w (N, K) i8} */
int ds_int8_colsum_i8(ds_tensor *const *t, const double *attrs) {
  (void)attrs;
  const char *op = "int8_colsum";
  int rc;
  if ((rc = check(t[0], DS_I32, op, "column sums")) || (rc = check(t[1], DS_I8, op, "weight"))) return rc;
  DS_CHECK(t[1]->ndim == 2 && t[0]->numel == t[1]->shape[0], "%s: column sums must hold one value per weight row",
           op);
  ds_qgemm_colsums(t[1]->data, t[1]->shape[0], t[1]->shape[1], t[0]->data);
  return DS_OK;
}
