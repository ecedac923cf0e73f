/* nn_pool_kernels.h: max_pool2d and avg_pool2d with their backward kernels for one dtype. nn_pool.c includes
   it through float_kernels.h with T (the element type), DT (its dtype code) and FN(name) (name + dtype suffix). */

/* one plane: any window; NaN wins (the last NaN of a window, like PyTorch); ix NULL: values only */
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
      if (ix) ix[oh * g->OW + ow] = best + 1;
    }
  }
}
/* values, and unless idx is NULL indices (i64, 1-based flat index in the plane), of x's windows */
static int FN(max_pool)(ds_tensor *out, ds_tensor *idx, const ds_tensor *x, const double *attrs, const char *op) {
  pgeom g;
  int rc = make_pgeom(&g, attrs, op, x, out, DT);
  if (rc) return rc;
  if (idx)
    DS_CHECK(idx->dtype == DS_I64 && idx->numel == out->numel && ds_tensor_is_contiguous(idx),
             "%s: indices must be a contiguous i64 tensor like the output", op);
  const T *xp = x->data;
  T *op_ = out->data;
  int64_t *ip = idx ? idx->data : NULL;
  int two = g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0;
  DS_PAR_FOR(x->numel > DS_PAR_MIN, p, g.P,
    const T *xs = xp + p * g.H * g.W;
    T *o = op_ + p * g.OH * g.OW;
    int64_t *ix = ip ? ip + p * g.OH * g.OW : NULL;
    if (!two || !MAXPOOL_2X2(xs, o, ix, &g)) FN(maxpool_plane)(xs, o, ix, &g);
  );
  return DS_OK;
}
/* out, idx, x */
int FN(ds_max_pool2d)(ds_tensor *const *t, const double *attrs) {
  DS_CHECK(t[1], "max_pool2d: indices missing");
  return FN(max_pool)(t[0], t[1], t[2], attrs, "max_pool2d");
}
/* out, x: the values alone (compiled inference graphs whose indices nobody reads) */
int FN(ds_max_pool2d_values)(ds_tensor *const *t, const double *attrs) {
  return FN(max_pool)(t[0], NULL, t[1], attrs, "max_pool2d_values");
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
  int two = g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0;
  const T *xp = t[1]->data;
  T *op_ = t[0]->data;
  DS_PAR_FOR(t[1]->numel > DS_PAR_MIN, p, g.P,
    const T *x = xp + p * g.H * g.W;
    T *o = op_ + p * g.OH * g.OW;
    if (two) {   /* 2x2 windows inside the plane: the general code's sum and count, without its per-window setup */
      for (int64_t oh = 0; oh < g.OH; oh++) {
        const T *r0 = x + 2 * oh * g.W, *r1 = r0 + g.W;
        for (int64_t ow = 0; ow < g.OW; ow++)
          o[oh * g.OW + ow] = (((((T)0 + r0[2 * ow]) + r0[2 * ow + 1]) + r1[2 * ow]) + r1[2 * ow + 1]) / (T)4;
      }
      continue;
    }
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
  );
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
  DS_PAR_FOR(t[0]->numel > DS_PAR_MIN, p, g.P,
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
  );
  return DS_OK;
}

#undef T
#undef DT
#undef FN
