/* nn_pool.c: max_pool2d (values + 1-based flat indices into each HxW plane, or the values alone) and avg_pool2d
   on NCHW, with their backward kernels; 2x2 f32 max pooling in AVX2 vectors. Planes (n, c) are independent:
   split across threads when large. */
#include "internal.h"
#include <immintrin.h>

/* attrs: kh, kw, sh, sw, ph, pw [, count_include_pad] */
typedef struct { int64_t P, H, W, OH, OW, kh, kw, sh, sw, ph, pw; } pgeom;

static int attr_int(double v, int64_t lo, int64_t *out) {
  if (!(v >= (double)lo && v <= 1e9) || v != (double)(int64_t)v) return 0;
  *out = (int64_t)v;
  return 1;
}

/* x: the 4-D input (or grad input), y: the 4-D output (or grad output) */
static int make_pgeom(pgeom *g, const double *a, const char *op, const ds_tensor *x, const ds_tensor *y, int dtype) {
  char s1[128], s2[128];
  DS_CHECK(x && y && x->dtype == dtype && y->dtype == dtype, "%s: operands must all be %s", op, ds_dtype_name(dtype));
  DS_CHECK(x->ndim == 4 && y->ndim == 4,
           "%s: expects 4-D (N,C,H,W) tensors, got %s and %s", op, ds_shape_str(x, s1), ds_shape_str(y, s2));
  DS_CHECK(ds_tensor_is_contiguous(x) && ds_tensor_is_contiguous(y), "%s: operands must be contiguous", op);
  DS_CHECK(attr_int(a[0], 1, &g->kh) && attr_int(a[1], 1, &g->kw), "%s: kernel size must be integers >= 1", op);
  DS_CHECK(attr_int(a[2], 1, &g->sh) && attr_int(a[3], 1, &g->sw), "%s: stride must be integers >= 1", op);
  DS_CHECK(attr_int(a[4], 0, &g->ph) && attr_int(a[5], 0, &g->pw), "%s: padding must be integers >= 0", op);
  DS_CHECK(2 * g->ph <= g->kh && 2 * g->pw <= g->kw,
           "%s: padding (%lld,%lld) must be at most half the kernel (%lld,%lld)", op,
           (long long)g->ph, (long long)g->pw, (long long)g->kh, (long long)g->kw);
  g->H = x->shape[2]; g->W = x->shape[3];
  DS_CHECK(g->H >= 1 && g->W >= 1, "%s: empty input plane %s", op, ds_shape_str(x, s1));
  DS_CHECK(g->kh <= g->H + 2 * g->ph && g->kw <= g->W + 2 * g->pw,
           "%s: kernel (%lld,%lld) is larger than the padded input %s", op,
           (long long)g->kh, (long long)g->kw, ds_shape_str(x, s1));
  g->OH = (g->H + 2 * g->ph - g->kh) / g->sh + 1;
  g->OW = (g->W + 2 * g->pw - g->kw) / g->sw + 1;
  DS_CHECK(y->shape[0] == x->shape[0] && y->shape[1] == x->shape[1] && y->shape[2] == g->OH && y->shape[3] == g->OW,
           "%s: output %s does not match input %s", op, ds_shape_str(y, s2), ds_shape_str(x, s1));
  g->P = x->shape[0] * x->shape[1];
  return DS_OK;
}

/* window rows [*h0, *h1) of output row oh, clipped to the input */
static void window(int64_t o, int64_t s, int64_t p, int64_t k, int64_t n, int64_t *a, int64_t *b) {
  int64_t lo = o * s - p, hi = lo + k;
  *a = lo < 0 ? 0 : lo;
  *b = hi > n ? n : hi;
}

/* lanes [0, n) of 8 set (n clamped to 0..8): the mask of _mm256_maskload_ps */
static inline __m256i lanes8(int64_t n) {
  __m256i n8 = _mm256_set1_epi32((int)(n < 0 ? 0 : n > 8 ? 8 : n));
  return _mm256_cmpgt_epi32(n8, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
/* even and odd floats of the 16 in lo, hi, each in order */
static inline void deinterleave8(__m256 lo, __m256 hi, __m256 *even, __m256 *odd) {
  *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xd8));
  *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xdd)), 0xd8));
}
/* one f32 plane, 2x2 windows at stride 2 without padding, 8 windows per step (masked at a row's end): the
   scalar code's selects in vector form (a, then b, c, d if strictly greater), so the same value and winner;
   ix NULL: values only. Returns 0 (plane left to the general code) on NaN. */
static int maxpool2x2_plane_avx2(const float *x, float *o, int64_t *ix, const pgeom *g) {
  __m256 nan = _mm256_setzero_ps();
  for (int64_t oh = 0; oh < g->OH; oh++) {
    const float *r0 = x + 2 * oh * g->W, *r1 = r0 + g->W;
    for (int64_t o0 = 0; o0 < g->OW; o0 += 8) {
      int64_t n = g->OW - o0 < 8 ? g->OW - o0 : 8;
      __m256i mlo = lanes8(2 * n), mhi = lanes8(2 * n - 8);
      __m256 a, b, c, d;
      deinterleave8(_mm256_maskload_ps(r0 + 2 * o0, mlo), _mm256_maskload_ps(r0 + 2 * o0 + 8, mhi), &a, &b);
      deinterleave8(_mm256_maskload_ps(r1 + 2 * o0, mlo), _mm256_maskload_ps(r1 + 2 * o0 + 8, mhi), &c, &d);
      nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_UNORD_Q), _mm256_cmp_ps(c, d, _CMP_UNORD_Q)));
      __m256 m = a, k = _mm256_setzero_ps();   /* k: the winner's code 0..3 as a float */
      const __m256 next[3] = { b, c, d };
      for (int q = 0; q < 3; q++) {
        __m256 gt = _mm256_cmp_ps(next[q], m, _CMP_GT_OQ);
        m = _mm256_blendv_ps(m, next[q], gt);
        k = _mm256_blendv_ps(k, _mm256_set1_ps((float)(q + 1)), gt);
      }
      float *oo = o + oh * g->OW + o0;
      if (n == 8) _mm256_storeu_ps(oo, m);
      else {   /* masked stores are slow on AMD cores: a row's tail goes through a buffer */
        float buf[8];
        _mm256_storeu_ps(buf, m);
        for (int i = 0; i < n; i++) oo[i] = buf[i];
      }
      if (!ix) continue;
      /* 1-based flat index: 2 oh W + 2 (o0 + i) + 1 + (k & 1) + (k >> 1) W */
      __m256i kc = _mm256_cvtps_epi32(k);
      __m256i off = _mm256_add_epi32(_mm256_and_si256(kc, _mm256_set1_epi32(1)),
                                     _mm256_mullo_epi32(_mm256_srli_epi32(kc, 1), _mm256_set1_epi32((int)g->W)));
      off = _mm256_add_epi32(off, _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
      __m256i base = _mm256_set1_epi64x(2 * oh * g->W + 2 * o0 + 1);
      int64_t ibuf[8], *io = n == 8 ? ix + oh * g->OW + o0 : ibuf;
      _mm256_storeu_si256((__m256i *)io, _mm256_add_epi64(base, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(off))));
      _mm256_storeu_si256((__m256i *)(io + 4),
                          _mm256_add_epi64(base, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(off, 1))));
      if (n < 8) for (int i = 0; i < n; i++) ix[oh * g->OW + o0 + i] = ibuf[i];
    }
  }
  return _mm256_movemask_ps(nan) == 0;
}

/* the 2x2 fast path of a dtype: f32's, or none (f64 planes take the general code) */
static int no_fast_2x2(const void *x, void *o, int64_t *ix, const pgeom *g) {
  (void)x; (void)o; (void)ix; (void)g;
  return 0;
}
#define MAXPOOL_2X2 _Generic((T)0, float: maxpool2x2_plane_avx2, default: no_fast_2x2)

/* the kernels, once per float dtype */
#define KERNELS "nn_pool_kernels.h"
#include "float_kernels.h"
