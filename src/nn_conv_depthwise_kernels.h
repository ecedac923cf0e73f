/* nn_conv_depthwise_kernels.h: the depthwise conv2d forward for one dtype. nn_conv_depthwise.c includes it through
   float_kernels.h with T (the element type), DT (its dtype code) and FN(name) (name with the dtype suffix). */

/* acc[0 .. len) = sum over the taps k in order, from zero, of w[k] * the run at buf + koff[k] + off */
static void FN(taps_run)(const T *buf, const int64_t *koff, int64_t taps, const T *w, int64_t off, int64_t len,
                         T *acc) {
  const T *s = buf + koff[0] + off;
  for (int64_t l = 0; l < len; l++) acc[l] = FMA(w[0], s[l], (T)0);
  for (int64_t k = 1; k < taps; k++) {
    T wv = w[k];
    s = buf + koff[k] + off;
    for (int64_t l = 0; l < len; l++) acc[l] = FMA(wv, s[l], acc[l]);
  }
}

/* one output plane y (OH, OW) from the input plane's phase planes at buf: acc holds OH rows of Wq, computed as one
   run over the wide rows (wide) or row by row */
static void FN(depthwise_plane)(const dw_plan *d, const T *buf, const T *w, T bias, T *acc, T *y) {
  int64_t OH = d->OH, OW = d->OW, Wq = d->p.Wq;
  if (d->wide) FN(taps_run)(buf, d->koff, d->taps, w, 0, (OH - 1) * Wq + OW, acc);
  else for (int64_t oh = 0; oh < OH; oh++) FN(taps_run)(buf, d->koff, d->taps, w, oh * Wq, OW, acc + oh * Wq);
  for (int64_t oh = 0; oh < OH; oh++)
    for (int64_t ow = 0; ow < OW; ow++) y[oh * OW + ow] = acc[oh * Wq + ow] + bias;
}

/* planes [p0, p1) of y (N * OC planes), ep on runs of them within one image (a plane whose kernel applied ep's
   activation itself ends the run before it) */
static void FN(depthwise_planes)(const dw_plan *d, const geom *g, const T *x, const T *w, const T *b, T *y,
                                 const conv_ep *ep, int64_t p0, int64_t p1, T *buf) {
  T *acc = buf + d->blen;
  int64_t filled = -1, run0 = p0;   /* the input plane in buf; the first plane of the run ep has not seen */
  int64_t done = p0;   /* planes before it computed several at once */
  int act = ep ? ep->act : CONV_ACT_NONE;
  for (int64_t p = p0; p < p1; p++) {
    int64_t n = p / g->OC, oc = p % g->OC, in = n * g->C + oc / g->OCg;
    int64_t np = p1 - p < DW_SMALL_PLANES ? p1 - p : DW_SMALL_PLANES;
    int direct = 0;   /* 2: the plane's kernel applied act */
    if (p >= done && FN(dw_small)(g, x, w, b, y, p, np)) done = p + np;
    if (p >= done && !(direct = FN(dw_direct)(g, x + in * g->hw, w + oc * d->taps, b[oc], y + p * g->ohw, act))) {
      if (in != filled) FN(conv_phases)(&d->p, x + in * g->hw, buf, d->blen);
      filled = in;
      FN(depthwise_plane)(d, buf, w + oc * d->taps, b[oc], acc, y + p * g->ohw);
    }
    if (ep && direct == 2) {
      if (p > run0) ep->apply(ep, run0 / g->OC, 1, run0 % g->OC, p - run0);
      run0 = p + 1;
    } else if (ep && (p + 1 == p1 || (p + 1) % g->OC == 0 || (p + 1 - run0) * g->ohw >= DW_EP_RUN)) {
      ep->apply(ep, run0 / g->OC, 1, run0 % g->OC, p + 1 - run0);
      run0 = p + 1;
    }
  }
}

/* y (N, OC, OH, OW) = depthwise conv(x (N, C, H, W), w (OC, 1, KH, KW)) + b (OC): output channel oc reads input
   channel oc / OCg. Planes are independent, so the thread count never changes a value. */
int FN(conv_depthwise_forward)(const geom *g, const T *x, const T *w, const T *b, T *y, const conv_ep *ep) {
  if (g->N == 0 || g->OC == 0) return DS_OK;
  int64_t planes = g->N * g->OC, rounded, taps = g->KH * g->KW;
  int par = planes > 1 && (double)planes * (double)g->ohw * (double)g->ckk > DW_PAR_MIN;
  int nt = par ? ds_team() : 1;
  dw_plan d;
  conv_phase_init(&d.p, 1, g->H, g->W, g->ph, g->pw, g->Hp, g->Wp, g->sh, g->sw);
  d.OH = g->OH; d.OW = g->OW; d.taps = taps; d.wide = 2 * d.p.Wq <= 3 * g->OW;
  /* a window's run ends inside its phase plane: the planes are all the buffer needs */
  d.blen = d.p.sh * d.p.sw * d.p.plane;
  int64_t shared = (taps * 8 + 63) / 64 * 64, per = ((d.blen + g->OH * d.p.Wq) * (int64_t)sizeof(T) + 63) / 64 * 64;
  char *scratch = ds_mem_alloc(shared + per * nt, &rounded);   /* koff, then per thread the phase planes and acc */
  if (!scratch) return ds_fail(DS_ENOMEM, "conv2d: out of memory for the depthwise scratch");
  conv_phase_offsets(&d.p, g->KH, g->KW, g->dh, g->dw, (int64_t *)scratch);
  d.koff = (const int64_t *)scratch;
  if (nt > 1) {
    double t0 = ds_team_start();
    #pragma omp parallel num_threads(nt)
    {
      ds_team_arrive(t0);
      int t = omp_get_thread_num(), n = omp_get_num_threads();
      FN(depthwise_planes)(&d, g, x, w, b, y, ep, t * planes / n, (t + 1) * planes / n,
                           (T *)(scratch + shared + per * t));
    }
    ds_team_done();
  } else FN(depthwise_planes)(&d, g, x, w, b, y, ep, 0, planes, (T *)(scratch + shared));
  ds_mem_release(scratch, rounded);
  return DS_OK;
}

#undef T
#undef DT
#undef FN
