/* nn_conv_depthwise_kernels.h: the depthwise conv2d forward for one dtype. nn_conv_depthwise.c includes it through
   float_kernels.h with T (the element type), DT (its dtype code) and FN(name) (name with the dtype suffix). */

/* One output plane y (OH, OW) = sum over (kh, kw) of w[kh, kw] * the shifted input windows, + bias.
   ph holds the input plane zero-bordered and split by column phase: phase p (< sw) holds the padded columns
   p, p + sw, p + 2 sw, ... as rows of Wq values, so every window row is a contiguous run. acc holds OW values. */
static void FN(depthwise_plane)(const geom *g, const T *x, const T *w, T bias, T *y, T *phases, int64_t Wq,
                                T *acc) {
  int64_t plane = g->Hp * Wq;
  for (int64_t i = 0; i < g->sw * plane; i++) phases[i] = 0;
  for (int64_t p = 0; p < g->sw; p++) {
    /* padded column j * sw + p is input column j * sw + p - pw: the phase's run of input columns [c0, W) */
    int64_t j0 = p >= g->pw ? 0 : (g->pw - p + g->sw - 1) / g->sw, c0 = j0 * g->sw + p - g->pw;
    for (int64_t h = 0; h < g->H; h++) {
      const T *s = x + h * g->W;
      T *d = phases + p * plane + (h + g->ph) * Wq;
      for (int64_t j = j0, c = c0; c < g->W; j++, c += g->sw) d[j] = s[c];
    }
  }
  for (int64_t oh = 0; oh < g->OH; oh++) {
    for (int64_t ow = 0; ow < g->OW; ow++) acc[ow] = 0;
    for (int64_t kh = 0; kh < g->KH; kh++) {
      int64_t row = oh * g->sh + kh * g->dh;
      for (int64_t kw = 0; kw < g->KW; kw++) {
        int64_t col = kw * g->dw; /* padded column of output column 0: col + ow * sw */
        const T *s = phases + (col % g->sw) * plane + row * Wq + col / g->sw;
        T wv = w[kh * g->KW + kw];
        for (int64_t ow = 0; ow < g->OW; ow++) acc[ow] = FMA(wv, s[ow], acc[ow]);
      }
    }
    T *d = y + oh * g->OW;
    for (int64_t ow = 0; ow < g->OW; ow++) d[ow] = acc[ow] + bias;
  }
}

/* y (N, OC, OH, OW) = depthwise conv(x (N, C, H, W), w (OC, 1, KH, KW)) + b (OC): output channel oc reads input
   channel oc / OCg. Planes are independent, so the thread count never changes a value. ep runs on each plane. */
int FN(conv_depthwise_forward)(const geom *g, const T *x, const T *w, const T *b, T *y, const conv_ep *ep) {
  if (g->N == 0 || g->OC == 0) return DS_OK;
  int64_t Wq = (g->Wp + g->sw - 1) / g->sw, per = (g->sw * g->Hp * Wq + g->OW) * (int64_t)sizeof(T), planes = g->N * g->OC;
  int par = planes > 1 && (double)planes * (double)g->ohw * (double)g->ckk > 2e5;
  int nt = par ? omp_get_max_threads() : 1;
  per = (per + 63) / 64 * 64;
  int64_t rounded;
  char *scratch = ds_mem_alloc(per * nt, &rounded);
  if (!scratch) return ds_fail(DS_ENOMEM, "conv2d: out of memory for the depthwise scratch");
  #pragma omp parallel num_threads(nt) if (par)
  {
    T *phases = (T *)(scratch + per * omp_get_thread_num()), *acc = phases + g->sw * g->Hp * Wq;
    #pragma omp for schedule(static)
    for (int64_t p = 0; p < planes; p++) {
      int64_t n = p / g->OC, oc = p % g->OC, ic = oc / g->OCg;
      FN(depthwise_plane)(g, x + (n * g->C + ic) * g->hw, w + oc * g->KH * g->KW, b[oc], y + p * g->ohw, phases,
                          Wq, acc);
      if (ep) ep->apply(ep, n, 1, oc, 1);
    }
  }
  ds_mem_release(scratch, rounded);
  return DS_OK;
}

#undef T
#undef DT
#undef FN
