/* nn_pool_kernels.h: max_pool2d and avg_pool2d with their backward kernels for one dtype. nn_pool.c includes
   it once per dtype with T (the element type), DT (its dtype code) and FN(name) (name with the dtype suffix). */

/* one plane: any window; NaN wins (the last NaN of a window, like PyTorch) */
static void FN(maxpool_plane)(const T *x, T *o, int64_t *ix, const pgeom *g) {
  for (int64_t oh = 0; oh < g->OH; oh++) {
    int64_t h0, h1;
    window(oh, g->sh, g->ph, g->kh, g->H, &h0, &h1);
    for (int64_t ow = 0; ow < g->OW; ow++) {
      int64_t w0, w1;
      window(ow, g->sw, g->pw, g->kw, g->W, &w0, &w1);
      int64_t best = h0 * g->W + w0;
      T m = x[best];
      int nan = 0;
      for (int64_t h = h0; h < h1; h++)
        for (int64_t w = w0; w < w1; w++) { /* one compare, selects: no unpredictable branch */
          T v = x[h * g->W + w];
          int gt = v > m;
          best = gt ? h * g->W + w : best;
          m = gt ? v : m;
          nan |= v != v;
        }
      if (nan)
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++)
            if (x[h * g->W + w] != x[h * g->W + w]) { m = x[h * g->W + w]; best = h * g->W + w; }
      o[oh * g->OW + ow] = m;
      ix[oh * g->OW + ow] = best + 1;
    }
  }
}
/* one plane, 2x2 windows at stride 2 without padding; returns 0 (plane left to the general code) on NaN.
   The winner of each window is kept as a code 0..3 first, so both loops vectorize. */
static int FN(maxpool2x2_plane)(const T *x, T *o, int64_t *ix, const pgeom *g) {
  int nan = 0;
  int32_t code[64];
  for (int64_t oh = 0; oh < g->OH; oh++) {
    const T *r0 = x + 2 * oh * g->W, *r1 = r0 + g->W;
    for (int64_t o0 = 0; o0 < g->OW; o0 += 64) {
      int64_t n = g->OW - o0 < 64 ? g->OW - o0 : 64;
      const T *a0 = r0 + 2 * o0, *a1 = r1 + 2 * o0;
      T *oo = o + oh * g->OW + o0;
      for (int64_t i = 0; i < n; i++) {
        T a = a0[2 * i], b = a0[2 * i + 1], c = a1[2 * i], d = a1[2 * i + 1];
        T m = a;
        int32_t k = 0;
        k = b > m ? 1 : k; m = b > m ? b : m;
        k = c > m ? 2 : k; m = c > m ? c : m;
        k = d > m ? 3 : k; m = d > m ? d : m;
        nan |= (a != a) | (b != b) | (c != c) | (d != d);
        oo[i] = m;
        code[i] = k;
      }
      int64_t *io = ix + oh * g->OW + o0, base = 2 * oh * g->W + 2 * o0 + 1;
      for (int64_t i = 0; i < n; i++) io[i] = base + 2 * i + (code[i] & 1) + (code[i] >> 1) * g->W;
    }
  }
  return !nan;
}
/* out, idx (i64, 1-based flat index in the plane), x */
int FN(ds_max_pool2d)(ds_tensor *const *t, const double *attrs) {
  const char *op = "max_pool2d";
  pgeom g;
  int rc = make_pgeom(&g, attrs, op, t[2], t[0], DT);
  if (rc) return rc;
  DS_CHECK(t[1] && t[1]->dtype == DS_I64 && t[1]->numel == t[0]->numel && ds_tensor_is_contiguous(t[1]),
           "%s: indices must be a contiguous i64 tensor like the output", op);
  const T *xp = t[2]->data;
  T *op_ = t[0]->data;
  int64_t *ip = t[1]->data;
  int two = g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0;
  #pragma omp parallel for schedule(static) if (t[2]->numel > DS_PAR_MIN)
  for (int64_t p = 0; p < g.P; p++) {
    const T *x = xp + p * g.H * g.W;
    T *o = op_ + p * g.OH * g.OW;
    int64_t *ix = ip + p * g.OH * g.OW;
    if (!two || !FN(maxpool2x2_plane)(x, o, ix, &g)) FN(maxpool_plane)(x, o, ix, &g);
  }
  return DS_OK;
}
/* gx (N,C,H,W), g (N,C,OH,OW), idx; attrs as forward */
int FN(ds_max_pool2d_backward)(ds_tensor *const *t, const double *attrs) {
  const char *op = "max_pool2d_backward";
  pgeom g;
  int rc = make_pgeom(&g, attrs, op, t[0], t[1], DT);
  if (rc) return rc;
  DS_CHECK(t[2] && t[2]->dtype == DS_I64 && t[2]->numel == t[1]->numel && ds_tensor_is_contiguous(t[2]),
           "%s: indices must be a contiguous i64 tensor like the grad output", op);
  T *xp = t[0]->data;
  const T *gp = t[1]->data;
  const int64_t *ip = t[2]->data;
  int64_t hw = g.H * g.W, ohw = g.OH * g.OW;
  int bad = 0;
  #pragma omp parallel for schedule(static) if (t[0]->numel > DS_PAR_MIN) reduction(|| : bad)
  for (int64_t p = 0; p < g.P; p++) {
    T *x = xp + p * hw;
    const T *gg = gp + p * ohw;
    const int64_t *ix = ip + p * ohw;
    memset(x, 0, (size_t)hw * sizeof(T));
    for (int64_t i = 0; i < ohw; i++) {
      int64_t k = ix[i] - 1;
      if (k < 0 || k >= hw) { bad = 1; continue; }
      x[k] += gg[i];
    }
  }
  return bad ? ds_fail(DS_EINVAL, "%s: an index is outside the %lldx%lld plane", op, (long long)g.H, (long long)g.W)
             : DS_OK;
}
/* out, x; attrs: kh, kw, sh, sw, ph, pw, count_include_pad */
int FN(ds_avg_pool2d)(ds_tensor *const *t, const double *attrs) {
  pgeom g;
  int rc = make_pgeom(&g, attrs, "avg_pool2d", t[1], t[0], DT);
  if (rc) return rc;
  int include_pad = attrs[6] != 0;
  const T *xp = t[1]->data;
  T *op_ = t[0]->data;
  #pragma omp parallel for schedule(static) if (t[1]->numel > DS_PAR_MIN)
  for (int64_t p = 0; p < g.P; p++) {
    const T *x = xp + p * g.H * g.W;
    T *o = op_ + p * g.OH * g.OW;
    for (int64_t oh = 0; oh < g.OH; oh++) {
      int64_t h0, h1;
      window(oh, g.sh, g.ph, g.kh, g.H, &h0, &h1);
      for (int64_t ow = 0; ow < g.OW; ow++) {
        int64_t w0, w1;
        window(ow, g.sw, g.pw, g.kw, g.W, &w0, &w1);
        T s = 0;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) s += x[h * g.W + w];
        int64_t cnt = include_pad ? g.kh * g.kw : (h1 - h0) * (w1 - w0);
        o[oh * g.OW + ow] = s / (T)cnt;
      }
    }
  }
  return DS_OK;
}
/* gx (N,C,H,W), g (N,C,OH,OW); attrs as forward */
int FN(ds_avg_pool2d_backward)(ds_tensor *const *t, const double *attrs) {
  pgeom g;
  int rc = make_pgeom(&g, attrs, "avg_pool2d_backward", t[0], t[1], DT);
  if (rc) return rc;
  int include_pad = attrs[6] != 0;
  T *xp = t[0]->data;
  const T *gp = t[1]->data;
  #pragma omp parallel for schedule(static) if (t[0]->numel > DS_PAR_MIN)
  for (int64_t p = 0; p < g.P; p++) {
    T *x = xp + p * g.H * g.W;
    const T *gg = gp + p * g.OH * g.OW;
    memset(x, 0, (size_t)(g.H * g.W) * sizeof(T));
    for (int64_t oh = 0; oh < g.OH; oh++) {
      int64_t h0, h1;
      window(oh, g.sh, g.ph, g.kh, g.H, &h0, &h1);
      for (int64_t ow = 0; ow < g.OW; ow++) {
        int64_t w0, w1;
        window(ow, g.sw, g.pw, g.kw, g.W, &w0, &w1);
        int64_t cnt = include_pad ? g.kh * g.kw : (h1 - h0) * (w1 - w0);
        T v = gg[oh * g.OW + ow] / (T)cnt;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) x[h * g.W + w] += v;
      }
    }
  }
  return DS_OK;
}

#undef T
#undef DT
#undef FN
