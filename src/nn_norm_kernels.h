/* nn_norm_kernels.h: layer_norm and its backward for one dtype. nn_norm.c includes it through float_kernels.h with
   T (the element type), DT (its dtype code) and FN(name) (name with the dtype suffix). */

/* sum of p[i] and of (p[i] - m) * (q[i] - m2) style row statistics in double, 8 lanes in a fixed order */
static double FN(rowsum)(const T *p, int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) acc[j] += (double)p[i + j];
  double s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; i++) s += (double)p[i];
  return s;
}
static double FN(rowsqdev)(const T *p, int64_t n, double m) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) { double d = (double)p[i + j] - m; acc[j] += d * d; }
  double s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; i++) { double d = (double)p[i] - m; s += d * d; }
  return s;
}
/* y, mean (R), rstd (R), x (R*D), w (D), b (D); attrs: D, eps. Statistics accumulate in double. */
int FN(ds_layer_norm)(ds_tensor *const *t, const double *attrs) {
  const char *op = "layer_norm";
  int64_t D, R;
  int rc;
  DS_CHECK(t[3], "%s: missing input", op);
  if ((rc = norm_rows(t[3], attrs, op, &D, &R))) return rc;
  if ((rc = check(t[3], DT, R * D, op, "input")) || (rc = check(t[0], DT, R * D, op, "output")) ||
      (rc = check(t[1], DT, R, op, "mean")) || (rc = check(t[2], DT, R, op, "rstd")) ||
      (rc = check(t[4], DT, D, op, "weight")) || (rc = check(t[5], DT, D, op, "bias")))
    return rc;
  double eps = attrs[1];
  DS_CHECK(eps >= 0, "%s: eps must be >= 0", op);
  T *y = t[0]->data, *mp = t[1]->data, *rp = t[2]->data;
  const T *x = t[3]->data, *w = t[4]->data, *b = t[5]->data;
  DS_PAR_FOR(R * D > DS_PAR_MIN && R > 1, r, R,
    const T *xr = x + r * D;
    T *yr = y + r * D;
    double mean = FN(rowsum)(xr, D) / (double)D;
    double rstd = 1.0 / sqrt(FN(rowsqdev)(xr, D, mean) / (double)D + eps);
    T m = (T)mean, rs = (T)rstd;
    mp[r] = m; rp[r] = rs;
    for (int64_t i = 0; i < D; i++) yr[i] = (xr[i] - m) * rs * w[i] + b[i];
  );
  return DS_OK;
}
/* gx, gw (D), gb (D), g, x, mean, rstd, w; attrs: D.
   gx = rstd * (g*w - mean(g*w) - xhat * mean(g*w * xhat)) per row; gw, gb summed over fixed row chunks. */
int FN(ds_layer_norm_backward)(ds_tensor *const *t, const double *attrs) {
  const char *op = "layer_norm_backward";
  int64_t D, R;
  int rc;
  DS_CHECK(t[4], "%s: missing input", op);
  if ((rc = norm_rows(t[4], attrs, op, &D, &R))) return rc;
  if ((rc = check(t[0], DT, R * D, op, "grad input")) || (rc = check(t[1], DT, D, op, "grad weight")) ||
      (rc = check(t[2], DT, D, op, "grad bias")) || (rc = check(t[3], DT, R * D, op, "grad output")) ||
      (rc = check(t[4], DT, R * D, op, "input")) || (rc = check(t[5], DT, R, op, "mean")) ||
      (rc = check(t[6], DT, R, op, "rstd")) || (rc = check(t[7], DT, D, op, "weight")))
    return rc;
  T *gx = t[0]->data, *gw = t[1]->data, *gb = t[2]->data;
  const T *g = t[3]->data, *x = t[4]->data, *mp = t[5]->data, *rp = t[6]->data, *w = t[7]->data;
  int64_t rc_ = row_chunk(R), nch = (R + rc_ - 1) / rc_, rounded;
  /* per chunk: partial gw, gb (2D) and the row's xhat, g*w scratch (2D) */
  T *part = ds_mem_alloc((4 * D * (nch > 0 ? nch : 1)) * (int64_t)sizeof(T), &rounded);
  if (!part) return ds_fail(DS_ENOMEM, "%s: out of memory", op);
  DS_PAR_FOR(R * D > DS_PAR_MIN && nch > 1, c, nch,
    T *pw = part + 4 * D * c, *pb = pw + D, *xh = pb + D, *gh = xh + D;
    for (int64_t i = 0; i < D; i++) { pw[i] = 0; pb[i] = 0; }
    int64_t r1 = (c + 1) * rc_ < R ? (c + 1) * rc_ : R;
    for (int64_t r = c * rc_; r < r1; r++) {
      const T *gr = g + r * D, *xr = x + r * D;
      T *gxr = gx + r * D, m = mp[r], rs = rp[r];
      for (int64_t i = 0; i < D; i++) {
        xh[i] = (xr[i] - m) * rs;
        gh[i] = gr[i] * w[i];
        pw[i] += gr[i] * xh[i];
        pb[i] += gr[i];
      }
      T a2 = (T)(FN(rowsum)(gh, D) / (double)D);
      for (int64_t i = 0; i < D; i++) gxr[i] = gh[i] * xh[i]; /* scratch: g*w*xhat, overwritten below */
      T a1 = (T)(FN(rowsum)(gxr, D) / (double)D);
      for (int64_t i = 0; i < D; i++) gxr[i] = rs * (gh[i] - xh[i] * a1 - a2);
    }
  );
  for (int64_t i = 0; i < D; i++) {
    T sw = 0, sb = 0;
    for (int64_t c = 0; c < nch; c++) { sw += part[4 * D * c + i]; sb += part[4 * D * c + D + i]; }
    gw[i] = sw; gb[i] = sb;
  }
  ds_mem_release(part, rounded);
  return DS_OK;
}

#undef T
#undef DT
#undef FN
