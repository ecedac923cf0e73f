/* bgemm.c: bf16 products with f32 accumulation, c = a @ b with ds's bf16 dot (bgemm.h): vdpbf16ps on AVX-512
   BF16 hosts, its exact emulation on AVX2 (FMA) and in portable C (DS_ISA=scalar), so the output is the same on
   every host, ISA path, thread count and batch composition. Kernels: ds_matmul_bf16_bf16 (a (..., M, K) bf16 @
   b (K, N) or (..., K, N) bf16 -> (..., M, N) f32, b packed on each call), and for a constant b (the compiler's
   frozen weights) ds_pack_bf16_weight_bf16 (b -> its strips, once) and ds_matmul_bf16_packed_bf16 (reading them). */
#include "internal.h"
#include "bgemm.h"
#include <math.h>
#include <omp.h>
#include <string.h>
#include <immintrin.h>

/* below this many multiply-adds one thread runs the whole product */
#define PAR_MACS (1 << 19)

/* the portable path: the dot of bgemm.h written out, one output at a time */
static void micro_portable(int mr, int nr, int64_t P, const uint32_t *a, int64_t lda, const uint32_t *b, float *c,
                           int64_t ldc) {
  for (int r = 0; r < mr; r++)
    for (int j = 0; j < nr; j++) {
      const uint32_t *w = b + (j / BG_NR) * P * BG_NR + j % BG_NR;
      float acc = 0.0f;
      for (int64_t p = 0; p < P; p++) {
        uint32_t x = a[r * lda + p], y = w[p * BG_NR];
        acc = ds_bgemm_ftz(fmaf(ds_bgemm_odd(x), ds_bgemm_odd(y), acc));
        acc = ds_bgemm_ftz(fmaf(ds_bgemm_even(x), ds_bgemm_even(y), acc));
      }
      if (acc != acc) { uint32_t u = BG_NAN; memcpy(&acc, &u, 4); }
      c[r * ldc + j] = acc;
    }
}
static const bgemm_kernel portable = { 4, 2 * BG_NR, micro_portable };

/* the path: vdpbf16ps on AVX-512 hosts that have it, the AVX2 emulation, or the portable code (DS_ISA=scalar) */
static const bgemm_kernel *bf16_kernel(void) {
  int isa = ds_isa();
  if (ds_isa_avx512bf16()) return &ds_bgemm_avx512bf16;
  if (isa == DS_ISA_SCALAR) return &portable;
  return &ds_bgemm_avx2;
}

const char *ds_bf16_path(void) {
  const bgemm_kernel *k = bf16_kernel();
  return k == &ds_bgemm_avx512bf16 ? "avx512-bf16" : k == &portable ? "scalar" : "avx2";
}

/* ap (M, P) = a (M, K): pairs of k as words, subnormals zeroed, 0 past K; 16 values at a time (a pair is the
   two halves of a little-endian word: the row as it is, a zero exponent clearing the rest but the sign) */
void ds_bgemm_pack_a(const uint16_t *a, int64_t M, int64_t K, uint32_t *ap) {
  int64_t P = (K + 1) / 2;
  const __m256i expo = _mm256_set1_epi16(0x7f80), rest = _mm256_set1_epi16(0x7fff);
  for (int64_t i = 0; i < M; i++) {
    const uint16_t *r = a + i * K;
    uint32_t *d = ap + i * P;
    int64_t p = 0;
    for (; 2 * p + 16 <= K; p += 8) {
      __m256i v = _mm256_loadu_si256((const __m256i *)(r + 2 * p));
      __m256i sub = _mm256_cmpeq_epi16(_mm256_and_si256(v, expo), _mm256_setzero_si256());
      _mm256_storeu_si256((__m256i *)(d + p), _mm256_andnot_si256(_mm256_and_si256(sub, rest), v));
    }
    for (; p < P; p++) {
      uint32_t lo = ds_bgemm_daz(r[2 * p]), hi = 2 * p + 1 < K ? ds_bgemm_daz(r[2 * p + 1]) : 0;
      d[p] = lo | hi << 16;
    }
  }
}

/* strips [s0, s1) of bp = b (K, N) as bgemm.h's strips (a full strip and pair without bounds checks) */
static void pack_b_strips(const uint16_t *b, int64_t K, int64_t N, int64_t s0, int64_t s1, uint32_t *bp) {
  int64_t P = (K + 1) / 2;
  for (int64_t s = s0; s < s1; s++)
    for (int64_t p = 0; p < P; p++) {
      uint32_t *d = bp + (s * P + p) * BG_NR;
      const uint16_t *lo = b + 2 * p * N + s * BG_NR, *hi = lo + N;
      if ((s + 1) * BG_NR <= N && 2 * p + 1 < K) {
        for (int j = 0; j < BG_NR; j++) d[j] = ds_bgemm_daz(lo[j]) | ds_bgemm_daz(hi[j]) << 16;
        continue;
      }
      for (int j = 0; j < BG_NR; j++) {
        int64_t n = s * BG_NR + j;
        d[j] = n < N ? ds_bgemm_daz(lo[j]) | (2 * p + 1 < K ? ds_bgemm_daz(hi[j]) << 16 : 0) : 0;
      }
    }
}

void ds_bgemm_pack_b(const uint16_t *b, int64_t K, int64_t N, uint32_t *bp) {
  pack_b_strips(b, K, N, 0, (N + BG_NR - 1) / BG_NR, bp);
}

typedef struct {
  int64_t M, N, K, P;
  const uint16_t *a;   /* (M, K) bf16 to pack into ap first, or NULL */
  uint32_t *ap;
  const uint16_t *b;   /* (K, N) bf16 to pack into bp first, or NULL */
  uint32_t *bp;
  float *c;
  const bgemm_kernel *kr;
} bgemm_job;

/* thread me of nt: its rows of a and strips of b packed (then a barrier), then units [u0, u1) of its share: unit
   u = column block u / nrow, row block u % nrow (a column block's strips stay in cache while the rows pass) */
static void run_share(const bgemm_job *q, int me, int nt) {
  const int MR = q->kr->mr, NR = q->kr->nr;
  if (q->a) {
    int64_t i0 = q->M * me / nt, i1 = q->M * (me + 1) / nt;
    ds_bgemm_pack_a(q->a + i0 * q->K, i1 - i0, q->K, q->ap + i0 * q->P);
  }
  if (q->b) {
    int64_t S = (q->N + BG_NR - 1) / BG_NR;
    pack_b_strips(q->b, q->K, q->N, S * me / nt, S * (me + 1) / nt, q->bp);
  }
  if ((q->a || q->b) && nt > 1) {
#pragma omp barrier
  }
  int64_t nrow = (q->M + MR - 1) / MR, units = nrow * ((q->N + NR - 1) / NR);
  for (int64_t u = units * me / nt; u < units * (me + 1) / nt; u++) {
    int64_t i = u % nrow * MR, j = u / nrow * NR;
    int mr = (int)(q->M - i < MR ? q->M - i : MR), nr = (int)(q->N - j < NR ? q->N - j : NR);
    q->kr->micro(mr, nr, q->P, q->ap + i * q->P, q->P, q->bp + (j / BG_NR) * q->P * BG_NR, q->c + i * q->N + j,
                 q->N);
  }
}

void ds_bgemm_run(int64_t M, int64_t N, int64_t K, const uint16_t *a, uint32_t *ap, const uint16_t *b, uint32_t *bp,
                  float *c) {
  int64_t P = (K + 1) / 2;
  bgemm_job q = { M, N, K, P, a, ap, b, bp, c, bf16_kernel() };
  if (M == 0 || N == 0) return;
  if (P == 0) { memset(c, 0, (size_t)(M * N) * sizeof(float)); return; }
  int64_t units = ((M + q.kr->mr - 1) / q.kr->mr) * ((N + q.kr->nr - 1) / q.kr->nr);
  double macs = (double)M * (double)N * (double)P * 2;
  if (units > 1 && macs >= PAR_MACS && ds_team() > 1) {
    double t0 = ds_team_start();
#pragma omp parallel
    {
      ds_team_arrive(t0);
      run_share(&q, omp_get_thread_num(), omp_get_num_threads());
    }
    ds_team_done();
  } else run_share(&q, 0, 1);
}

static int check(const ds_tensor *t, int dtype, const char *op, const char *what) {
  DS_CHECK(t, "%s: missing %s", op, what);
  DS_CHECK(t->dtype == dtype, "%s: %s must be %s, got %s", op, what, ds_dtype_name(dtype), ds_dtype_name(t->dtype));
  DS_CHECK(ds_tensor_is_contiguous(t), "%s: %s must be contiguous", op, what);
  return DS_OK;
}

/* c (rows, N) = a (rows, K) @ the packed b bp: a packed here */
static int run_packed(const char *op, const ds_tensor *a, int64_t rows, int64_t K, int64_t N, const uint32_t *bp,
                      float *c) {
  int64_t P = (K + 1) / 2, rounded;
  uint32_t *ap = ds_mem_alloc(rows * P * (int64_t)sizeof(uint32_t) + 64, &rounded);
  if (!ap) return ds_fail(DS_ENOMEM, "%s: out of memory for the packed operand", op);
  ds_bgemm_run(rows, N, K, a->data, ap, NULL, (uint32_t *)bp, c);
  ds_mem_release(ap, rounded);
  return DS_OK;
}

/* t = {bp (ceil(N/16), ceil(K/2), 16) i32, b (K, N) bf16}: b in bgemm.h's strips */
int ds_pack_bf16_weight_bf16(ds_tensor *const *t, const double *attrs) {
  (void)attrs;
  const char *op = "pack_bf16_weight";
  char s1[128], s2[128];
  int rc;
  if ((rc = check(t[0], DS_I32, op, "packed weight")) || (rc = check(t[1], DS_BF16, op, "weight"))) return rc;
  const ds_tensor *bp = t[0], *b = t[1];
  DS_CHECK(b->ndim == 2 && bp->ndim == 3 && bp->shape[0] == (b->shape[1] + BG_NR - 1) / BG_NR &&
               bp->shape[1] == (b->shape[0] + 1) / 2 && bp->shape[2] == BG_NR,
           "%s: %s cannot hold %s packed", op, ds_shape_str(bp, s1), ds_shape_str(b, s2));
  ds_bgemm_pack_b(b->data, b->shape[0], b->shape[1], bp->data);
  return DS_OK;
}

/* t = {c (..., M, N) f32, a (..., M, K) bf16, bp (ceil(N/16), ceil(K/2), 16) i32}; attrs {N}: matmul_bf16 with
   a constant b packed once (passes/autocast.lua) */
int ds_matmul_bf16_packed_bf16(ds_tensor *const *t, const double *attrs) {
  const char *op = "matmul_bf16_packed";
  char s1[128], s2[128], s3[128];
  int rc;
  ds_tensor *c = t[0];
  const ds_tensor *a = t[1], *bp = t[2];
  if ((rc = check(c, DS_F32, op, "output")) || (rc = check(a, DS_BF16, op, "a")) ||
      (rc = check(bp, DS_I32, op, "packed b")))
    return rc;
  int64_t N = (int64_t)attrs[0];
  DS_CHECK(attrs[0] >= 0 && (double)N == attrs[0], "%s: bad N attribute", op);
  int nd = a->ndim;
  DS_CHECK(nd >= 1 && c->ndim == nd, "%s: a %s and out %s: expected a (..., K), out (..., N)", op,
           ds_shape_str(a, s1), ds_shape_str(c, s2));
  int64_t K = a->shape[nd - 1];
  int ok = c->shape[nd - 1] == N && bp->ndim == 3 && bp->shape[0] == (N + BG_NR - 1) / BG_NR &&
           bp->shape[1] == (K + 1) / 2 && bp->shape[2] == BG_NR;
  for (int d = 0; d < nd - 1; d++) ok = ok && c->shape[d] == a->shape[d];
  DS_CHECK(ok, "%s: a %s, packed b %s, out %s do not agree (N = %lld)", op, ds_shape_str(a, s1),
           ds_shape_str(bp, s2), ds_shape_str(c, s3), (long long)N);
  if (c->numel == 0) return DS_OK;
  return run_packed(op, a, c->numel / N, K, N, bp->data, c->data);
}

/* t = {c (..., M, N) f32, a (..., M, K) bf16, b (K, N) or (..., K, N) bf16 (the same leading dims as a)} */
int ds_matmul_bf16_bf16(ds_tensor *const *t, const double *attrs) {
  (void)attrs;
  const char *op = "matmul_bf16";
  char s1[128], s2[128], s3[128];
  int rc;
  ds_tensor *c = t[0];
  const ds_tensor *a = t[1], *b = t[2];
  if ((rc = check(c, DS_F32, op, "output")) || (rc = check(a, DS_BF16, op, "a")) || (rc = check(b, DS_BF16, op, "b")))
    return rc;
  int nd = a->ndim;
  DS_CHECK(nd >= 2 && (b->ndim == 2 || b->ndim == nd) && c->ndim == nd, "%s: a %s, b %s, out %s: expected a "
           "(..., M, K), b (K, N) or (..., K, N), out (..., M, N)", op, ds_shape_str(a, s1), ds_shape_str(b, s2),
           ds_shape_str(c, s3));
  int64_t M = a->shape[nd - 2], K = a->shape[nd - 1], N = b->shape[b->ndim - 1];
  int ok = b->shape[b->ndim - 2] == K && c->shape[nd - 2] == M && c->shape[nd - 1] == N;
  for (int d = 0; d < nd - 2; d++)
    ok = ok && c->shape[d] == a->shape[d] && (b->ndim == 2 || b->shape[d] == a->shape[d]);
  DS_CHECK(ok, "%s: shapes a %s, b %s, out %s do not agree", op, ds_shape_str(a, s1), ds_shape_str(b, s2),
           ds_shape_str(c, s3));
  int64_t batch = M * K > 0 ? a->numel / (M * K) : (M * N > 0 ? c->numel / (M * N) : 0);
  if (c->numel == 0) return DS_OK;
  int64_t P = (K + 1) / 2, S = (N + BG_NR - 1) / BG_NR, rounded;
  int shared = b->ndim == 2;   /* one b for every batch: a is one (batch M, K) product */
  int64_t rows = shared ? batch * M : M;
  int64_t words = rows * P + S * P * BG_NR;
  uint32_t *buf = ds_mem_alloc(words * (int64_t)sizeof(uint32_t) + 64, &rounded);
  if (!buf) return ds_fail(DS_ENOMEM, "%s: out of memory for the packed operands", op);
  uint32_t *ap = buf, *bp = buf + rows * P;
  const uint16_t *ad = a->data, *bd = b->data;
  float *cd = c->data;
  for (int64_t g = 0; g < (shared ? 1 : batch); g++) {
    ds_bgemm_run(rows, N, K, ad + g * M * K, ap, bd + (shared ? 0 : g * K * N), bp, cd + g * M * N);
  }
  ds_mem_release(buf, rounded);
  return DS_OK;
}
