/* nn_attention_tiles.h: the tile code of scaled dot-product attention for one dtype (nn_attention.c includes it
   through float_kernels.h with T, DT and FN(name)); MR (rows per tile) is a compile-time constant at each use,
   so the column loops vectorize over NR lanes in registers. */
/* c (rows x nr of an mr x NR tile, row stride ldc) = a (mr x K, row stride lda) @ b (K x NR strip, row
   stride ldb); stored straight from the accumulators (a bounce buffer stalls on store forwarding) */
static inline __attribute__((always_inline)) void FN(micro)(const int mr, int64_t K, const T *a, int64_t lda,
                                                          const T *b, int64_t ldb, T *c, int64_t ldc, int rows,
                                                          int nr) {
  T acc[8][NR];
  for (int r = 0; r < mr; r++) for (int j = 0; j < NR; j++) acc[r][j] = 0;
  for (int64_t kk = 0; kk < K; kk++) {
    _Pragma("GCC unroll 8") for (int r = 0; r < mr; r++) {
      T av = a[r * lda + kk];
      _Pragma("GCC unroll 16") for (int j = 0; j < NR; j++) acc[r][j] = T_FMA(av, b[kk * ldb + j], acc[r][j]);
    }
  }
  if (rows == mr && nr == NR) {
    for (int r = 0; r < mr; r++) for (int j = 0; j < NR; j++) c[r * ldc + j] = acc[r][j];
  } else {
    for (int r = 0; r < rows; r++) for (int j = 0; j < nr; j++) c[r * ldc + j] = acc[r][j];
  }
}
/* pack K^T (E x Sp) and V (S x Evp) of batch entry with offsets off (wide: the f32 AVX-512 build, which
   transposes contiguous k columns in registers); returns 1 + the last key whose v row holds NaN or an infinity
   (0 if none): weights of 0 may skip the keys after it (units) */
static inline __attribute__((always_inline)) int64_t FN(pack_kv)(const geom *g, const int wide,
                                                               const int64_t off[4], T *kt, T *vp, float *km) {
  const T *k = (const T *)g->k + off[1], *v = (const T *)g->v + off[2];
  if (wide && sizeof(T) == sizeof(float) && g->kc == 1)
    pack_kt_avx512((const float *)k, g->kr, g->S, g->E, g->Sp, (float *)kt, km);
  else
    for (int64_t e = 0; e < g->E; e++) {
      for (int64_t j = 0; j < g->S; j++) kt[e * g->Sp + j] = k[j * g->kr + e * g->kc];
      for (int64_t j = g->S; j < g->Sp; j++) kt[e * g->Sp + j] = 0;
    }
  int64_t vbad = 0;
  for (int64_t j = 0; j < g->S; j++) {
    const T *vj = v + j * g->vr;
    T *d = vp + j * g->Evp;
    int bad = 0;   /* x - x is 0 exactly when x is finite */
    if (g->vc == 1) for (int64_t c = 0; c < g->Ev; c++) { d[c] = vj[c]; bad |= !(vj[c] - vj[c] == 0); }
    else for (int64_t c = 0; c < g->Ev; c++) { d[c] = vj[c * g->vc]; bad |= !(d[c] - d[c] == 0); }
    for (int64_t c = g->Ev; c < g->Evp; c++) d[c] = 0;
    if (bad) vbad = j + 1;
  }
  return vbad;
}

/* scores of row i (global query index, Sp columns) -> softmax weights in place; columns >= S end 0. Returns
   n <= S with every weight from n on +0 (wide, the f32 AVX-512 build: softmax_f32_avx512, which skips whole
   blocks of +0 exps; else S) */
static inline __attribute__((always_inline)) int64_t FN(softmax_row)(const geom *g, const int wide,
    const int64_t off[4], int64_t i, T *w) {
  const T neg = -(T)INFINITY, scale = (T)g->scale;
  int64_t S_ = g->S, Sp = g->Sp;
  if (wide && sizeof(T) == sizeof(float) && !g->causal && (g->mask == MASK_NONE || (g->mask == MASK_FLOAT &&
      g->mc == 1)))   /* scale and mask in the same pass as the max */
    return softmax_f32_avx512((float *)w, S_, Sp, (float)scale,
                              g->mask == MASK_FLOAT ? (const float *)g->m + off[3] + i * g->mr : NULL, 0);
  for (int64_t j = 0; j < S_; j++) w[j] = w[j] * scale;
  for (int64_t j = S_; j < Sp; j++) w[j] = neg;
  if (g->mask == MASK_BOOL) {
    const uint8_t *m = (const uint8_t *)g->m + off[3] + i * g->mr;
    if (g->mc == 1) for (int64_t j = 0; j < S_; j++) w[j] = m[j] ? w[j] : neg;
    else for (int64_t j = 0; j < S_; j++) w[j] = m[j * g->mc] ? w[j] : neg;
  } else if (g->mask == MASK_FLOAT) {
    const T *m = (const T *)g->m + off[3] + i * g->mr;
    if (g->mc == 1) for (int64_t j = 0; j < S_; j++) w[j] = w[j] + m[j];
    else for (int64_t j = 0; j < S_; j++) w[j] = w[j] + m[j * g->mc];
  }
  if (g->causal) for (int64_t j = i + 1; j < S_; j++) w[j] = neg;
  if (wide && sizeof(T) == sizeof(float)) return softmax_f32_avx512((float *)w, S_, Sp, 1, NULL, 1);
  T lane[LANES];
  for (int l = 0; l < LANES; l++) lane[l] = neg;
  for (int64_t j = 0; j < Sp; j += LANES)
    for (int l = 0; l < LANES; l++) lane[l] = w[j + l] > lane[l] ? w[j + l] : lane[l];
  for (int h = LANES / 2; h; h /= 2) for (int l = 0; l < h; l++) lane[l] =
      lane[l + h] > lane[l] ? lane[l + h] : lane[l];
  T mx = lane[0];
  for (int l = 0; l < LANES; l++) lane[l] = 0;
  for (int64_t j = 0; j < Sp; j += LANES)      /* columns >= S: exp(-inf) = 0 adds nothing */
    for (int l = 0; l < LANES; l++) { T e = T_EXP(w[j + l] - mx); w[j + l] = e; lane[l] += e; }
  for (int h = LANES / 2; h; h /= 2) for (int l = 0; l < h; l++) lane[l] += lane[l + h];
  T rs = 1 / lane[0];
  for (int64_t j = 0; j < S_; j++) w[j] = w[j] * rs;
  return S_;
}
/* query rows without packing (few rows: a pack would serve only them), the tile code's sums in the same
   order: units u0 .. u1-1 (unit = batch entry x query row), k and v read in place; w: Sp scores; wide:
   the f32 AVX-512 build (scores16_avx512 for contiguous k columns) */
static inline __attribute__((always_inline)) void FN(direct)(const geom *g, const int wide, int64_t u0,
    int64_t u1, T *w) {
  int64_t off[4];
  for (int64_t u = u0; u < u1; u++) {
    int64_t bi = u / g->L, i = u % g->L;
    batch_offsets(g, bi, off);
    const T *q = (const T *)g->q + off[0] + i * g->qr, *k = (const T *)g->k + off[1];
    const T *v = (const T *)g->v + off[2];
    int64_t j0 = 0;
    if (wide && sizeof(T) == sizeof(float) && g->kc == 1)    /* the last keys too (fewer rows) */
      for (; j0 < g->S; j0 += NR)
        scores16_avx512((const float *)q, g->qc, (const float *)k + j0 * g->kr, g->kr, g->E,
                        (int)(g->S - j0 < NR ? g->S - j0 : NR), (float *)w + j0);
    for (; j0 + NR <= g->S; j0 += NR) {       /* NR keys at a time: NR independent chains over E */
      T acc[NR];
      for (int l = 0; l < NR; l++) acc[l] = 0;
      for (int64_t e = 0; e < g->E; e++) {
        T qe = q[e * g->qc];
        _Pragma("GCC unroll 16") for (int l = 0; l < NR; l++)
          acc[l] = T_FMA(qe, k[(j0 + l) * g->kr + e * g->kc], acc[l]);
      }
      for (int l = 0; l < NR; l++) w[j0 + l] = acc[l];
    }
    for (; j0 < g->S; j0++) {
      T acc = 0;
      for (int64_t e = 0; e < g->E; e++) acc = T_FMA(q[e * g->qc], k[j0 * g->kr + e * g->kc], acc);
      w[j0] = acc;
    }
    FN(softmax_row)(g, wide, off, i, w);
    T *out = (T *)g->out + bi * g->L * g->Ev + i * g->orow;
    for (int64_t c0 = 0; c0 < g->Ev; c0 += NR) {
      int nr = (int)(g->Ev - c0 < NR ? g->Ev - c0 : NR);
      if (nr == NR && g->vc == 1) {       /* a whole strip of contiguous v columns: the tile micro kernel */
        FN(micro)(1, g->S, w, g->Sp, v + c0, g->vr, out + c0, g->orow, 1, NR);
        continue;
      }
      T acc[NR];
      for (int c = 0; c < nr; c++) acc[c] = 0;
      for (int64_t j = 0; j < g->S; j++)
        for (int c = 0; c < nr; c++) acc[c] = T_FMA(w[j], v[j * g->vr + (c0 + c) * g->vc], acc[c]);
      for (int c = 0; c < nr; c++) out[c0 + c] = acc[c];
    }
  }
}
/* the scores of a tile (qt: MR x E) against K^T (kt) under a float mask, strip by strip, except strips no row
   can weigh (f32 AVX-512 build, K^T packed with km: scale > 0): there every exp is +0, so the scores are set to
   -inf instead (the same weights, the same max). A strip is skipped when, for every row r, a bound on its scores,
   U = sum_e |q_e| * km * scale * (1 + (2E + 4) 2^-24) + (the strip's largest mask value), is below a score the
   row already has (lo: the first computed strip's largest) by 110: |the fma chain| <= (1 + 1.07 E 2^-24) sum
   |q_e k_e| for E < 2^20 (sum |q_e| in f64), the f32 roundings of the product by scale, the mask add and the subtraction of the max
   stay under 1 while |U|, |lo| < 1e6, so w - max < -109 < EXPF_ZERO_BELOW. */
static inline __attribute__((always_inline)) void FN(scores_pruned)(const geom *g, const int MR,
    const int64_t off[4], int64_t i0, int rows, const T *qt, const T *kt, const float *km, T *sc) {
  double A[8], lo[8], slack = 1 + (2.0 * (double)g->E + 4) * 0x1p-24;
  for (int r = 0; r < rows; r++) {
    A[r] = abs_sum_avx512((const float *)qt + r * g->E, g->E) * g->scale * slack;
    lo[r] = -INFINITY;
  }
  int have_lo = 0;
  for (int64_t j0 = 0; j0 < g->Sp; j0 += NR) {
    int n = (int)(g->S - j0 < NR ? g->S - j0 : NR), skip = have_lo && km[j0 / NR] <= 3e38f;
    double mx = 0;
    for (int r = 0; r < rows && skip; r++) {
      if (r == 0 || g->mr != 0)   /* the strip's largest mask value (one for all rows of a key padding mask) */
        mx = strip_max_avx512((const float *)g->m + off[3] + (i0 + r) * g->mr + j0 * g->mc, g->mc, n);
      double U = A[r] * km[j0 / NR] + mx;
      skip = fabs(U) < 1e6 && U - lo[r] < -110;
    }
    if (skip) {
      for (int r = 0; r < MR; r++) for (int j = 0; j < NR; j++) sc[r * g->Sp + j0 + j] = -(T)INFINITY;
      continue;
    }
    FN(micro)(MR, g->E, qt, g->E, kt + j0, g->Sp, sc + j0, g->Sp, MR, NR);
    if (have_lo) continue;
    have_lo = 1;   /* lo: this strip's largest scaled, masked score per row, as softmax_row computes them */
    for (int r = 0; r < rows; r++) {
      const T *m = (const T *)g->m + off[3] + (i0 + r) * g->mr + j0 * g->mc;
      for (int j = 0; j < n; j++) {
        T w = sc[r * g->Sp + j0 + j] * (T)g->scale;
        w = w + m[j * g->mc];
        lo[r] = w > lo[r] ? w : lo[r];
      }
      if (!(fabs(lo[r]) < 1e6)) have_lo = 0;   /* no usable bound for this row: keep computing */
    }
  }
}
/* units u0 .. u1-1 (unit = batch entry x tile of MR query rows); scratch as in scratch_elems */
static inline __attribute__((always_inline)) void FN(units)(const geom *g, const int MR, const int wide, int64_t u0,
    int64_t u1, T *scr) {
  T *kt = scr, *vp = kt + g->E * g->Sp, *qt = vp + g->S * g->Evp, *sc = qt + MR * g->E;
  float *km = (float *)(sc + MR * g->Sp);
  const int prune = wide && sizeof(T) == sizeof(float) && g->kc == 1 && g->mask == MASK_FLOAT && g->scale > 0 &&
                    g->scale < 1e30 && g->E < (1 << 20);   /* scores_pruned's bound holds for E < 2^20 */
  int64_t tiles = (g->L + MR - 1) / MR, packed = -1, off[4], vbad = 0;
  for (int64_t u = u0; u < u1; u++) {
    int64_t bi = u / tiles, i0 = (u % tiles) * MR;
    int rows = (int)(g->L - i0 < MR ? g->L - i0 : MR);
    batch_offsets(g, bi, off);
    if (packed != bi) { vbad = FN(pack_kv)(g, wide, off, kt, vp, km); packed = bi; }
    const T *q = (const T *)g->q + off[0];
    for (int r = 0; r < MR; r++) {
      const T *qr = q + (i0 + r) * g->qr;
      T *d = qt + r * g->E;
      if (r >= rows) for (int64_t e = 0; e < g->E; e++) d[e] = 0;
      else if (g->qc == 1) for (int64_t e = 0; e < g->E; e++) d[e] = qr[e];
      else for (int64_t e = 0; e < g->E; e++) d[e] = qr[e * g->qc];
    }
    if (prune) FN(scores_pruned)(g, MR, off, i0, rows, qt, kt, km, sc);
    else
      for (int64_t j0 = 0; j0 < g->Sp; j0 += NR)
        FN(micro)(MR, g->E, qt, g->E, kt + j0, g->Sp, sc + j0, g->Sp, MR, NR);
    /* the keys the output's sums need: those before the tile rows' trailing +0 weights, and any non-finite v
       row. The rest would add fma(+0, v, acc) = acc for finite v (acc starts at +0 and a sum from +0 is never
       -0), so the chains end there with the same bits. */
    int64_t live = vbad;
    for (int r = 0; r < rows; r++) {
      int64_t n = FN(softmax_row)(g, wide, off, i0 + r, sc + r * g->Sp);
      live = n > live ? n : live;
    }
    T *out = (T *)g->out + bi * g->L * g->Ev + i0 * g->orow;
    for (int64_t c0 = 0; c0 < g->Evp; c0 += NR)
      FN(micro)(MR, live, sc, g->Sp, vp + c0, g->Evp, out + c0, g->orow, rows,
          (int)(g->Ev - c0 < NR ? g->Ev - c0 : NR));
  }
}

#undef T
#undef DT
#undef FN
