/* nn_attention_decode.h: the f32 AVX-512 direct path's query rows without a mask (a KV-cache decode step, a
   segment's one row), in registers: scores of 8 keys from 8 x 8 blocks of k transposed in ymm (half of each block
   by 128-bit loads), softmax with a 16-lane ds_expf, the weighted sums of v, up to 4 rows (a segment's heads)
   interleaved. The same sums in the same order as the tile code (nn_attention.c includes this after
   softmax_f32_avx512, whose order it keeps), so the same bits. */
#define DECODE_TARGET __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,fma")))

/* ds_expf (mathfn.h) on 16 lanes: the same IEEE operations in the same order, so the same bits */
DECODE_TARGET static inline __attribute__((always_inline)) __m512 decode_expf16(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-103.972077f), hi = _mm512_set1_ps(88.72283f);
  __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), below = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ),
            above = _mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ);
  __m512 xc = _mm512_mask_blend_ps(nan, x, _mm512_setzero_ps());
  xc = _mm512_mask_blend_ps(above, xc, hi);
  xc = _mm512_mask_blend_ps(below, xc, lo);
  __m512 k = _mm512_roundscale_ps(_mm512_add_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                                _mm512_set1_ps(0.5f)), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_sub_ps(xc, _mm512_mul_ps(k, _mm512_set1_ps(0.693359375f)));
  r = _mm512_sub_ps(r, _mm512_mul_ps(k, _mm512_set1_ps(-2.12194440e-4f)));
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(5.0000001201e-1f));
  __m512 y = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(p, _mm512_mul_ps(r, r)), r), _mm512_set1_ps(1.0f));
  __m512i ki = _mm512_cvttps_epi32(k), half = _mm512_srai_epi32(_mm512_add_epi32(ki, _mm512_srli_epi32(ki, 31)), 1);
  const __m512i bias = _mm512_set1_epi32(127);
  y = _mm512_mul_ps(y, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(half, bias), 23)));
  y = _mm512_mul_ps(y, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(_mm512_sub_epi32(ki, half), bias), 23)));
  y = _mm512_mask_blend_ps(above, y, _mm512_set1_ps(INFINITY));
  y = _mm512_mask_blend_ps(below, y, _mm512_setzero_ps());
  return _mm512_mask_blend_ps(nan, y, x);
}

/* w[8b + l] for NB blocks of 8 keys (rows of k, row stride kr, contiguous columns; full: all 8 NB keys real, else
   only the first n, the others score 0): fma(q[e], k[j, e], acc) for e = 0 .. E-1 in order, as the tile code. Each
   8 x 8 block of k: rows i and i + 4 side by side by 128-bit loads, then two in-lane stages of shuffles. */
DECODE_TARGET static inline __attribute__((always_inline)) void decode_scores(const int NB, const int full,
    const float *q, int64_t qc, const float *k, int64_t kr, int64_t E, int64_t n, float *w) {
  __m256 acc[6];
  _Pragma("GCC unroll 6") for (int b = 0; b < NB; b++) acc[b] = _mm256_setzero_ps();
  int64_t e0 = 0;
  for (; e0 + 8 <= E; e0 += 8) {
    __m256 qe[8];
    _Pragma("GCC unroll 8") for (int e = 0; e < 8; e++) qe[e] = _mm256_set1_ps(q[(e0 + e) * qc]);
    _Pragma("GCC unroll 6") for (int b = 0; b < NB; b++) {
      __m256 t[8];
      const float *kb = k + 8 * b * kr + e0;
      _Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {   /* t[4h + i] = elements 4h .. 4h+3 of rows i | i + 4 */
        int h = i / 4, r = i % 4;
        const float *r0 = kb + r * kr + 4 * h, *r1 = kb + (r + 4) * kr + 4 * h;
        __m128 x0, x1;
        if (full || b < NB - 1) { x0 = _mm_loadu_ps(r0); x1 = _mm_loadu_ps(r1); }
        else {   /* masked loads: the rows past the keys are not read */
          x0 = _mm_maskz_loadu_ps(8 * b + r < n ? 0xF : 0, r0);
          x1 = _mm_maskz_loadu_ps(8 * b + r + 4 < n ? 0xF : 0, r1);
        }
        t[i] = _mm256_insertf128_ps(_mm256_castps128_ps256(x0), x1, 1);
      }
      _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
        __m256 a0 = _mm256_unpacklo_ps(t[4 * h], t[4 * h + 1]), a1 = _mm256_unpackhi_ps(t[4 * h], t[4 * h + 1]);
        __m256 a2 = _mm256_unpacklo_ps(t[4 * h + 2], t[4 * h + 3]), a3 = _mm256_unpackhi_ps(t[4 * h + 2], t[4 * h + 3]);
        /* element 4h + m of the 8 rows, m = 0 .. 3 */
        acc[b] = _mm256_fmadd_ps(qe[4 * h], _mm256_shuffle_ps(a0, a2, 0x44), acc[b]);
        acc[b] = _mm256_fmadd_ps(qe[4 * h + 1], _mm256_shuffle_ps(a0, a2, 0xEE), acc[b]);
        acc[b] = _mm256_fmadd_ps(qe[4 * h + 2], _mm256_shuffle_ps(a1, a3, 0x44), acc[b]);
        acc[b] = _mm256_fmadd_ps(qe[4 * h + 3], _mm256_shuffle_ps(a1, a3, 0xEE), acc[b]);
      }
    }
  }
  _Pragma("GCC unroll 6") for (int b = 0; b < NB; b++) {
    _mm256_storeu_ps(w + 8 * b, acc[b]);
    for (int64_t i = 8 * b; e0 < E && i < 8 * b + 8 && (full || i < n); i++)
      for (int64_t e = e0; e < E; e++) w[i] = fmaf(q[e * qc], k[i * kr + e], w[i]);
  }
}

/* the scores of one query row q (column stride qc) over S keys k, in w (Sp = S rounded up to 16; w * scale from
   the softmax on): groups of up to 6 blocks of 8 keys, as even as they come, the last may be partial */
DECODE_TARGET static void decode_scores_f32(const geom *g, const float *q, const float *k, float *w) {
  int64_t S = g->S, nb = (S + 7) / 8;
  for (int64_t b0 = 0; b0 < nb;) {
    int64_t left = nb - b0, n = (left + (left + 5) / 6 - 1) / ((left + 5) / 6), j0 = 8 * b0;
    const float *kj = k + j0 * g->kr;
    int full = j0 + 8 * n <= S;
#define DECODE_GROUP(NB) \
  if (full) decode_scores(NB, 1, q, g->qc, kj, g->kr, g->E, S - j0, w + j0); \
  else decode_scores(NB, 0, q, g->qc, kj, g->kr, g->E, S - j0, w + j0); \
  break;
    switch (n) {
      case 1: DECODE_GROUP(1)
      case 2: DECODE_GROUP(2)
      case 3: DECODE_GROUP(3)
      case 4: DECODE_GROUP(4)
      case 5: DECODE_GROUP(5)
      default: DECODE_GROUP(6)
    }
#undef DECODE_GROUP
    b0 += n;
  }
}

/* G rows of scores (w + u Sp, S each) -> softmax weights in place, as softmax_f32_avx512 computes them: w * scale,
   -inf from S on, the max, ds_expf, the sums of lanes j % 16 added in its tree, times 1 / sum up to the end of the
   last 16 exps not all +0 (the rest are +0); the G rows' steps interleaved, so their latencies overlap */
DECODE_TARGET static inline __attribute__((always_inline)) void decode_softmax(const int G, const geom *g, float *w) {
  int64_t S = g->S, Sp = g->Sp, end[4] = {0, 0, 0, 0};
  const __m512 ninf = _mm512_set1_ps(-INFINITY), vs = _mm512_set1_ps((float)g->scale),
               below = _mm512_set1_ps(EXPF_ZERO_BELOW);
  __m512 m[4], vmx[4], sum[4];
  _Pragma("GCC unroll 4") for (int u = 0; u < G; u++) m[u] = ninf;
  for (int64_t j = 0; j < Sp; j += 16) {
    __mmask16 in = S - j >= 16 ? 0xffff : (__mmask16)((1u << (S - j)) - 1);
    _Pragma("GCC unroll 4") for (int u = 0; u < G; u++) {
      float *wu = w + u * Sp + j;
      __m512 x = _mm512_mask_blend_ps(in, ninf, _mm512_mul_ps(_mm512_maskz_loadu_ps(in, wu), vs));
      _mm512_storeu_ps(wu, x);
      m[u] = _mm512_max_ps(x, m[u]);   /* no lane is NaN: x > m ? x : m, exact in any order */
    }
  }
  _Pragma("GCC unroll 4") for (int u = 0; u < G; u++) {
    vmx[u] = _mm512_set1_ps(_mm512_reduce_max_ps(m[u]));
    sum[u] = _mm512_setzero_ps();
  }
  for (int64_t j = 0; j < Sp; j += 16)
    _Pragma("GCC unroll 4") for (int u = 0; u < G; u++) {
      float *wu = w + u * Sp + j;
      __m512 d = _mm512_sub_ps(_mm512_loadu_ps(wu), vmx[u]);
      if (_mm512_cmp_ps_mask(d, below, _CMP_NLT_UQ)) end[u] = j + 16;
      __m512 e = decode_expf16(d);   /* +0 where below: as the skipped blocks */
      _mm512_storeu_ps(wu, e);
      sum[u] = _mm512_add_ps(sum[u], e);
    }
  _Pragma("GCC unroll 4") for (int u = 0; u < G; u++) {   /* lane l += lane l + h, h = 8, 4, 2, 1 */
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(sum[u]),
                              _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(sum[u]), 1)));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
    const __m512 rs = _mm512_set1_ps(1 / _mm_cvtss_f32(s1));
    int64_t e = end[u] < S ? end[u] : S;
    for (int64_t j = 0; j < e; j += 16) {
      __mmask16 in = e - j >= 16 ? 0xffff : (__mmask16)((1u << (e - j)) - 1);
      _mm512_mask_storeu_ps(w + u * Sp + j, in, _mm512_mul_ps(_mm512_maskz_loadu_ps(in, w + u * Sp + j), rs));
    }
  }
}

/* columns c0 .. c0+31 of G query rows' weighted sums over their own S keys: out_u = sum_j w_u[j] v_u[j, :], each
   element fma(w[j], v[j, c], acc) for j = 0 .. S-1 in order (the G rows' chains interleaved: they hide each other's
   latency); w_u = w + u * Sp; cm: the columns < Ev of each half (masked: the last columns) */
DECODE_TARGET static inline __attribute__((always_inline)) void decode_wsum(const int G, const int masked,
    const geom *g, const float *w, const float *const *v, float *const *out, int64_t c0, const __mmask16 cm[2]) {
  __m512 acc[4][2];
  _Pragma("GCC unroll 4") for (int u = 0; u < G; u++) acc[u][0] = acc[u][1] = _mm512_setzero_ps();
  for (int64_t j = 0; j < g->S; j++)
    _Pragma("GCC unroll 4") for (int u = 0; u < G; u++) {
      __m512 wj = _mm512_set1_ps(w[u * g->Sp + j]);
      const float *vj = v[u] + j * g->vr + c0;
      _Pragma("GCC unroll 2") for (int i = 0; i < 2; i++)
        acc[u][i] = _mm512_fmadd_ps(wj, masked ? _mm512_maskz_loadu_ps(cm[i], vj + 16 * i) : _mm512_loadu_ps(vj + 16 * i),
                                    acc[u][i]);
    }
  _Pragma("GCC unroll 4") for (int u = 0; u < G; u++)
    _Pragma("GCC unroll 2") for (int i = 0; i < 2; i++) {
      if (masked) _mm512_mask_storeu_ps(out[u] + c0 + 16 * i, cm[i], acc[u][i]);
      else _mm512_storeu_ps(out[u] + c0 + 16 * i, acc[u][i]);
    }
}
/* all Ev columns, 32 at a time */
DECODE_TARGET static inline __attribute__((always_inline)) void decode_wsums(const int G, const geom *g,
    const float *w, const float *const *v, float *const *out) {
  const __mmask16 all[2] = {0xffff, 0xffff};
  int64_t c0 = 0;
  for (; c0 + 32 <= g->Ev; c0 += 32) decode_wsum(G, 0, g, w, v, out, c0, all);
  if (c0 < g->Ev) {
    int64_t n = g->Ev - c0;
    __mmask16 cm[2] = {n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1), n > 16 ? (__mmask16)((1u << (n - 16)) - 1) : 0};
    decode_wsum(G, 1, g, w, v, out, c0, cm);
  }
}

/* n <= 4 query rows with the same S keys (q[u], k[u], v[u] -> out[u]), scratch w of 4 Sp */
DECODE_TARGET static void decode_rows_f32(const geom *g, int n, const float *const *q, const float *const *k,
                                          const float *const *v, float *const *out, float *w) {
  for (int u = 0; u < n; u++) decode_scores_f32(g, q[u], k[u], w + u * g->Sp);
  switch (n) {
    case 1: decode_softmax(1, g, w); decode_wsums(1, g, w, v, out); break;
    case 2: decode_softmax(2, g, w); decode_wsums(2, g, w, v, out); break;
    case 3: decode_softmax(3, g, w); decode_wsums(3, g, w, v, out); break;
    default: decode_softmax(4, g, w); decode_wsums(4, g, w, v, out); break;
  }
}

/* the direct runner's units u0 .. u1-1 (batch entry x query row), scratch w of Sp, when k and v have contiguous
   columns and there is no mask: one at a time; returns 0 (nothing done) otherwise */
DECODE_TARGET static int decode_units_f32(const geom *g, int64_t u0, int64_t u1, float *w) {
  if (g->kc != 1 || g->vc != 1 || g->mask != MASK_NONE || g->causal) return 0;
  int64_t off[4];
  for (int64_t u = u0; u < u1; u++) {
    int64_t bi = u / g->L, i = u % g->L;
    batch_offsets(g, bi, off);
    const float *q = (const float *)g->q + off[0] + i * g->qr, *k = (const float *)g->k + off[1],
                *v = (const float *)g->v + off[2];
    float *out = (float *)g->out + bi * g->L * g->Ev + i * g->orow;
    decode_rows_f32(g, 1, &q, &k, &v, &out, w);
  }
  return 1;
}

/* a segment's one query row (g: its geometry at head 0) over its keys, all H heads (head strides qh, kh, vh; out's
   Ev), four at a time; scratch w of 4 Sp. Returns 0 (nothing done) unless k and v have contiguous columns */
DECODE_TARGET static int decode_heads_f32(const geom *g, int64_t H, int64_t qh, int64_t kh, int64_t vh, float *w) {
  if (g->kc != 1 || g->vc != 1 || g->L != 1) return 0;
  for (int64_t h0 = 0; h0 < H; h0 += 4) {
    const float *q[4], *k[4], *v[4];
    float *out[4];
    int n = (int)(H - h0 < 4 ? H - h0 : 4);
    for (int u = 0; u < n; u++) {
      q[u] = (const float *)g->q + (h0 + u) * qh;
      k[u] = (const float *)g->k + (h0 + u) * kh;
      v[u] = (const float *)g->v + (h0 + u) * vh;
      out[u] = (float *)g->out + (h0 + u) * g->Ev;
    }
    decode_rows_f32(g, n, q, k, v, out, w);
  }
  return 1;
}
#undef DECODE_TARGET
