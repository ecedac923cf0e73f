/* nn_conv_kernels.h: conv2d and its backward kernels for one dtype. nn_conv.c includes it through
   float_kernels.h with T (the element type), DT (its dtype code) and FN(name) (name with the dtype suffix). */

/* Columns of one image (Cg planes at x) into col (ckk rows, row stride ld).
   wide: copy the planes into xpad (zero border), then each row is one contiguous run of L values. */
NO_MEMCPY static void FN(cols)(const T *x, T *col, int64_t ld, const geom *g, T *xpad) {
  if (g->wide) {
    for (int64_t i = 0; i < g->xpad; i++) xpad[i] = 0;
    for (int64_t c = 0; c < g->Cg; c++)
      for (int64_t h = 0; h < g->H; h++) {
        const T *s = x + c * g->hw + h * g->W;
        T *d = xpad + (c * g->Hp + h + g->ph) * g->Wp + g->pw;
        for (int64_t w = 0; w < g->W; w++) d[w] = s[w];
      }
    for (int64_t c = 0; c < g->Cg; c++)
      for (int64_t kh = 0; kh < g->KH; kh++)
        for (int64_t kw = 0; kw < g->KW; kw++) {
          const T *s = xpad + (c * g->Hp + kh * g->dh) * g->Wp + kw * g->dw;
          T *d = col + ((c * g->KH + kh) * g->KW + kw) * ld;
          memcpy(d, s, (size_t)g->L * sizeof(T));
        }
    return;
  }
  for (int64_t c = 0; c < g->Cg; c++)
    for (int64_t kh = 0; kh < g->KH; kh++)
      for (int64_t kw = 0; kw < g->KW; kw++) {
        T *row = col + ((c * g->KH + kh) * g->KW + kw) * ld;
        const T *xc = x + c * g->hw;
        int64_t off = kw * g->dw - g->pw, lo, hi;
        valid_range(off, g->sw, g->W, g->OW, &lo, &hi);
        for (int64_t oh = 0; oh < g->OH; oh++) {
          int64_t ih = oh * g->sh - g->ph + kh * g->dh;
          T *r = row + oh * g->OW;
          if (ih < 0 || ih >= g->H) { for (int64_t ow = 0; ow < g->OW; ow++) r[ow] = 0; continue; }
          const T *xr = xc + ih * g->W + off;
          for (int64_t ow = 0; ow < lo; ow++) r[ow] = 0;
          for (int64_t ow = lo; ow < hi; ow++) r[ow] = xr[ow * g->sw];
          for (int64_t ow = hi; ow < g->OW; ow++) r[ow] = 0;
        }
      }
}
/* Cg planes of one image at x = the sum of col's rows put back where FN(cols) took them (x overwritten). */
NO_MEMCPY static void FN(uncols)(const T *col, int64_t ld, T *x, const geom *g, T *xpad) {
  if (g->wide) {
    for (int64_t i = 0; i < g->xpad; i++) xpad[i] = 0;
    for (int64_t c = 0; c < g->Cg; c++)
      for (int64_t kh = 0; kh < g->KH; kh++)
        for (int64_t kw = 0; kw < g->KW; kw++) {
          const T *s = col + ((c * g->KH + kh) * g->KW + kw) * ld;
          T *d = xpad + (c * g->Hp + kh * g->dh) * g->Wp + kw * g->dw;
          for (int64_t i = 0; i < g->L; i++) d[i] += s[i];
        }
    for (int64_t c = 0; c < g->Cg; c++)
      for (int64_t h = 0; h < g->H; h++) {
        const T *s = xpad + (c * g->Hp + h + g->ph) * g->Wp + g->pw;
        T *d = x + c * g->hw + h * g->W;
        for (int64_t w = 0; w < g->W; w++) d[w] = s[w];
      }
    return;
  }
  for (int64_t i = 0; i < g->Cg * g->hw; i++) x[i] = 0;
  for (int64_t c = 0; c < g->Cg; c++)
    for (int64_t kh = 0; kh < g->KH; kh++)
      for (int64_t kw = 0; kw < g->KW; kw++) {
        const T *row = col + ((c * g->KH + kh) * g->KW + kw) * ld;
        T *xc = x + c * g->hw;
        int64_t off = kw * g->dw - g->pw, lo, hi;
        valid_range(off, g->sw, g->W, g->OW, &lo, &hi);
        for (int64_t oh = 0; oh < g->OH; oh++) {
          int64_t ih = oh * g->sh - g->ph + kh * g->dh;
          if (ih < 0 || ih >= g->H) continue;
          const T *r = row + oh * g->OW;
          T *xr = xc + ih * g->W + off;
          for (int64_t ow = lo; ow < hi; ow++) xr[ow * g->sw] += r[ow];
        }
      }
}
/* rows (OCg, nb*L) from nb images' (OCg, OH, OW) blocks at image stride OC*ohw (zeros in wide padding) */
NO_MEMCPY static void FN(to_rows)(const T *src, T *dst, int64_t nb, const geom *g) {
  int64_t rw = g->L / g->OH;
  for (int64_t oc = 0; oc < g->OCg; oc++)
    for (int64_t j = 0; j < nb; j++)
      for (int64_t oh = 0; oh < g->OH; oh++) {
        const T *s = src + j * g->OC * g->ohw + oc * g->ohw + oh * g->OW;
        T *d = dst + (oc * nb + j) * g->L + oh * rw;
        for (int64_t ow = 0; ow < g->OW; ow++) d[ow] = s[ow];
        for (int64_t ow = g->OW; ow < rw; ow++) d[ow] = 0;
      }
}
/* the reverse, adding bias[oc] */
NO_MEMCPY static void FN(from_rows)(const T *src, T *dst, const T *bias, int64_t nb, const geom *g) {
  int64_t rw = g->L / g->OH;
  for (int64_t oc = 0; oc < g->OCg; oc++)
    for (int64_t j = 0; j < nb; j++) {
      T b = bias[oc];
      for (int64_t oh = 0; oh < g->OH; oh++) {
        const T *s = src + (oc * nb + j) * g->L + oh * rw;
        T *d = dst + j * g->OC * g->ohw + oc * g->ohw + oh * g->OW;
        for (int64_t ow = 0; ow < g->OW; ow++) d[ow] = s[ow] + b;
      }
    }
}
/* sum of n values with 8 independent lanes (vectorizes without reassociation; fixed order) */
static T FN(lanesum)(const T *p, int64_t n) {
  T acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) acc[j] += p[i + j];
  T s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; i++) s += p[i];
  return s;
}
/* out (N,OC,OH,OW) = conv(x (N,C,H,W), w (OC,C/G,KH,KW)) + b (OC).
   Per chunk of images and group: col (ckk, nb*L), rows (OCg, nb*L) = W_g @ col, written out + bias, then
   ep (conv2d_ep's chain, or NULL) on that block. */
int FN(ds_conv2d_ep_run)(ds_tensor *const *t, const double *attrs, const conv_ep *ep) {
  const char *op = "conv2d";
  ds_tensor *o = t[0], *x = t[1], *w = t[2], *b = t[3];
  int rc;
  if ((rc = check_tensor(o, DT, 4, op, "output")) || (rc = check_tensor(x, DT, 4, op, "input")) ||
      (rc = check_tensor(w, DT, 4, op, "weight")) || (rc = check_tensor(b, DT, 1, op, "bias")))
    return rc;
  geom g;
  if ((rc = make_geom(&g, attrs, op, x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[0], w->shape[1],
                      w->shape[2], w->shape[3])))
    return rc;
  DS_CHECK(b->shape[0] == g.OC,
           "%s: bias has %lld values for %lld out channels", op, (long long)b->shape[0], (long long)g.OC);
  if ((rc = check_shape4(o, g.N, g.OC, g.OH, g.OW, op, "output"))) return rc;
  const T *xp = x->data, *wp = w->data, *bp = b->data;
  T *yp = o->data;
  if (g.Cg == 1 && g.G > 1) return FN(conv_depthwise_forward)(&g, xp, wp, bp, yp, ep);
  if ((rc = DIRECT(conv_direct_forward)(&g, xp, wp, bp, yp, ep)) != CONV_NOT_DIRECT) return rc;
  chunking k;
  chunking_init(&k, &g, sizeof(T));
  int par = conv_worth_parallel(&g) && k.nch > 1, nt = par ? omp_get_max_threads() : 1;
  if (!chunking_take(&k, &g, sizeof(T), nt))
    return ds_fail(DS_ENOMEM, "%s: out of memory for the column buffer", op);
  int failed = 0; /* a product ran out of memory for its packing buffers */
  #pragma omp parallel num_threads(nt) if (par)
  {
    T *col = ws_thread(&k.ws), *rows = col + k.cl, *xpad = rows + k.rl;
    #pragma omp for schedule(static)
    for (int64_t c = 0; c < k.nch; c++) {
      int64_t m, n0 = chunk_start(&k, &g, c, &m), ld = m * g.L;
      for (int64_t gi = 0; gi < g.G; gi++) {
        for (int64_t j = 0; j < m; j++) FN(cols)(xp + ((n0 + j) * g.C + gi * g.Cg) * g.hw, col + j * g.L, ld, &g, xpad);
        if (FN(ds_gemm)(0, 0, g.OCg, ld, g.ckk, 1, wp + gi * g.OCg * g.ckk, g.ckk, col, ld, 0, rows, ld)) {
          #pragma omp atomic write
          failed = 1;
        }
        FN(from_rows)(rows, yp + (n0 * g.OC + gi * g.OCg) * g.ohw, bp + gi * g.OCg, m, &g);
        if (ep) ep->apply(ep, n0, m, gi * g.OCg, g.OCg);
      }
    }
  }
  ws_give(&k.ws);
  return failed ? ds_fail(DS_ENOMEM, "%s: out of memory for the GEMM packing buffers", op) : DS_OK;
}
int FN(ds_conv2d)(ds_tensor *const *t, const double *attrs) { return FN(ds_conv2d_ep_run)(t, attrs, NULL); }
/* gx (N,C,H,W) from g (N,OC,OH,OW) and w; attrs: conv attrs, H, W.
   Per chunk and group: dY rows (OCg, nb*L), dcol = W_g^T @ dY rows, put back image by image. */
int FN(ds_conv2d_backward_input)(ds_tensor *const *t, const double *attrs) {
  const char *op = "conv2d_backward_input";
  ds_tensor *gx = t[0], *gy = t[1], *w = t[2];
  int rc;
  if ((rc = check_tensor(gx, DT, 4, op, "grad input")) || (rc = check_tensor(gy, DT, 4, op, "grad output")) ||
      (rc = check_tensor(w, DT, 4, op, "weight")))
    return rc;
  int64_t H, W, G;
  DS_CHECK(attr_int(attrs[7], 1, &H) && attr_int(attrs[8], 1, &W) && attr_int(attrs[6], 1, &G),
           "%s: bad input size attrs", op);
  geom g;
  if ((rc = make_geom(&g, attrs, op, gy->shape[0], w->shape[1] * G, H, W, w->shape[0], w->shape[1], w->shape[2],
                      w->shape[3])))
    return rc;
  if ((rc = check_shape4(gy, g.N, g.OC, g.OH, g.OW, op, "grad output")) ||
      (rc = check_shape4(gx, g.N, g.C, g.H, g.W, op, "grad input")))
    return rc;
  const T *gp = gy->data, *wp = w->data;
  T *xp = gx->data;
  if ((rc = DIRECT(conv_direct_backward_input)(&g, gp, wp, xp)) != CONV_NOT_DIRECT) return rc;
  chunking k;
  chunking_init(&k, &g, sizeof(T));
  int par = conv_worth_parallel(&g) && k.nch > 1, nt = par ? omp_get_max_threads() : 1;
  if (!chunking_take(&k, &g, sizeof(T), nt))
    return ds_fail(DS_ENOMEM, "%s: out of memory for the column buffer", op);
  int failed = 0; /* a product ran out of memory for its packing buffers */
  #pragma omp parallel num_threads(nt) if (par)
  {
    T *col = ws_thread(&k.ws), *rows = col + k.cl, *xpad = rows + k.rl;
    #pragma omp for schedule(static)
    for (int64_t c = 0; c < k.nch; c++) {
      int64_t m, n0 = chunk_start(&k, &g, c, &m), ld = m * g.L;
      for (int64_t gi = 0; gi < g.G; gi++) {
        FN(to_rows)(gp + (n0 * g.OC + gi * g.OCg) * g.ohw, rows, m, &g);
        if (FN(ds_gemm)(1, 0, g.ckk, ld, g.OCg, 1, wp + gi * g.OCg * g.ckk, g.ckk, rows, ld, 0, col, ld)) {
          #pragma omp atomic write
          failed = 1;
        }
        for (int64_t j = 0; j < m; j++)
          FN(uncols)(col + j * g.L, ld, xp + ((n0 + j) * g.C + gi * g.Cg) * g.hw, &g, xpad);
      }
    }
  }
  ws_give(&k.ws);
  return failed ? ds_fail(DS_ENOMEM, "%s: out of memory for the GEMM packing buffers", op) : DS_OK;
}
/* gw (OC,C/G,KH,KW) from g (N,OC,OH,OW) and x (N,C,H,W); attrs: conv attrs, KH, KW.
   Per chunk and group: col @ dY rows^T (OCg, nb*L), summed over fixed runs of chunks, runs added in order. */
int FN(ds_conv2d_backward_weight)(ds_tensor *const *t, const double *attrs) {
  const char *op = "conv2d_backward_weight";
  ds_tensor *gw = t[0], *gy = t[1], *x = t[2];
  int rc;
  if ((rc = check_tensor(gw, DT, 4, op, "grad weight")) || (rc = check_tensor(gy, DT, 4, op, "grad output")) ||
      (rc = check_tensor(x, DT, 4, op, "input")))
    return rc;
  int64_t KH, KW, G;
  DS_CHECK(attr_int(attrs[7], 1, &KH) && attr_int(attrs[8], 1, &KW) && attr_int(attrs[6], 1, &G),
           "%s: bad kernel size attrs", op);
  DS_CHECK(x->shape[1] % G == 0,
           "%s: groups %lld do not divide %lld input channels", op, (long long)G, (long long)x->shape[1]);
  geom g;
  if ((rc = make_geom(&g, attrs, op, x->shape[0], x->shape[1], x->shape[2], x->shape[3], gy->shape[1], x->shape[1] / G,
                      KH, KW)))
    return rc;
  if ((rc = check_shape4(gy, g.N, g.OC, g.OH, g.OW, op, "grad output")) ||
      (rc = check_shape4(gw, g.OC, g.Cg, g.KH, g.KW, op, "grad weight")))
    return rc;
  const T *gp = gy->data, *xp = x->data;
  T *wp = gw->data;
  if ((rc = DIRECT(conv_direct_backward_weight)(&g, gp, xp, wp)) != CONV_NOT_DIRECT) return rc;
  int64_t wsz = g.OC * g.ckk;
  chunking k;
  chunking_init(&k, &g, sizeof(T));
  /* P partial sums, each over a fixed run of chunks in order (no thread hand-offs), then added in order */
  int64_t P = k.nch < 16 ? k.nch : 16, prounded = 0;
  int par = conv_worth_parallel(&g) && P > 1, nt = par ? omp_get_max_threads() : 1;
  T *part = P > 0 ? ds_mem_alloc(P * wsz * (int64_t)sizeof(T), &prounded) : NULL;
  if ((P > 0 && !part) || !chunking_take(&k, &g, sizeof(T), nt)) {
    if (part) ds_mem_release(part, prounded);
    return ds_fail(DS_ENOMEM, "%s: out of memory for the column buffer", op);
  }
  int failed = 0; /* a product ran out of memory for its packing buffers */
  #pragma omp parallel num_threads(nt) if (par)
  {
    T *col = ws_thread(&k.ws), *rows = col + k.cl, *xpad = rows + k.rl;
    #pragma omp for schedule(static)
    for (int64_t s = 0; s < P; s++) {
      T *acc = part + s * wsz; /* G blocks of gw_g^T (ckk, OCg) */
      for (int64_t c = s * k.nch / P; c < (s + 1) * k.nch / P; c++) {
        int64_t m, n0 = chunk_start(&k, &g, c, &m), ld = m * g.L;
        for (int64_t gi = 0; gi < g.G; gi++) {
          for (int64_t j = 0; j < m; j++)
            FN(cols)(xp + ((n0 + j) * g.C + gi * g.Cg) * g.hw, col + j * g.L, ld, &g, xpad);
          FN(to_rows)(gp + (n0 * g.OC + gi * g.OCg) * g.ohw, rows, m, &g);
          /* col @ rows^T (the chunk's images are the chain; later chunks of the run continue it) */
          if (FN(ds_gemm)(0, 1, g.ckk, g.OCg, ld, 1, col, ld, rows, ld, c == s * k.nch / P ? 0 : 1,
                          acc + gi * g.OCg * g.ckk, g.OCg)) {
#pragma omp atomic write
            failed = 1;
          }
        }
      }
    }
  }
  for (int64_t gi = 0; gi < g.G; gi++)
    for (int64_t oc = 0; oc < g.OCg; oc++)
      for (int64_t r = 0; r < g.ckk; r++) {
        T v = 0;
        for (int64_t s = 0; s < P; s++) v += part[s * wsz + (gi * g.ckk + r) * g.OCg + oc];
        wp[(gi * g.OCg + oc) * g.ckk + r] = v;
      }
  if (part) ds_mem_release(part, prounded);
  ws_give(&k.ws);
  return failed ? ds_fail(DS_ENOMEM, "%s: out of memory for the GEMM packing buffers", op) : DS_OK;
}
/* gb (OC) = g (N,OC,OH,OW) summed over N, OH, OW: per-plane sums, then images in order */
int FN(ds_conv2d_backward_bias)(ds_tensor *const *t, const double *attrs) {
  const char *op = "conv2d_backward_bias";
  ds_tensor *gb = t[0], *gy = t[1];
  int rc;
  if ((rc = check_tensor(gb, DT, 1, op, "grad bias")) || (rc = check_tensor(gy, DT, 4, op, "grad output"))) return rc;
  int64_t N = gy->shape[0], OC = gy->shape[1], hw = gy->shape[2] * gy->shape[3];
  DS_CHECK(gb->shape[0] == OC,
           "%s: grad bias has %lld values for %lld channels", op, (long long)gb->shape[0], (long long)OC);
  const T *gp = gy->data;
  T *bp = gb->data;
  int64_t rounded;
  T *plane = ds_mem_alloc((N * OC + 1) * (int64_t)sizeof(T), &rounded);
  if (!plane) return ds_fail(DS_ENOMEM, "%s: out of memory", op);
  DS_PAR_FOR(gy->numel > DS_PAR_MIN, i, N * OC,
             plane[i] = FN(lanesum)(gp + i * hw, hw););
  for (int64_t oc = 0; oc < OC; oc++) {
    T s = 0;
    for (int64_t n = 0; n < N; n++) s += plane[n * OC + oc];
    bp[oc] = s;
  }
  ds_mem_release(plane, rounded);
  return DS_OK;
}

#undef T
#undef DT
#undef FN
