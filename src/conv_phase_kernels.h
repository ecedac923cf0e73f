/* conv_phase_kernels.h: conv_phases for one dtype. conv_phase.c includes it through float_kernels.h with T (the
   element type), DT (its dtype code) and FN(name) (name with the dtype suffix). */

/* dst (C, sh, sw, Hq, Wq) = the C planes (H, W) at x placed at (top, left) in zeros, phase plane (c, r, q) holding
   the padded rows r, r + sh, ... and columns q, q + sw, ...; every element of the planes is written, then
   dst[planes .. len) is zeroed */
void FN(conv_phases)(const phase_geom *p, const T *x, T *dst, int64_t len) {
  int64_t sh = p->sh, sw = p->sw, Wq = p->Wq;
  for (int64_t c = 0; c < p->C; c++)
    for (int64_t r = 0; r < sh; r++)
      for (int64_t q = 0; q < sw; q++) {
        T *d = dst + ((c * sh + r) * sw + q) * p->plane;
        /* padded column j * sw + q is input column j * sw + q - left: inside for j in [j0, j1) */
        int64_t j0 = q >= p->left ? 0 : (p->left - q + sw - 1) / sw;
        int64_t j1 = p->W - 1 + p->left - q < 0 ? 0 : (p->W - 1 + p->left - q) / sw + 1;
        if (j1 > Wq) j1 = Wq;
        if (j0 > j1) j0 = j1;
        for (int64_t i = 0; i < p->Hq; i++, d += Wq) {
          int64_t h = i * sh + r - p->top;
          if (h < 0 || h >= p->H) { for (int64_t j = 0; j < Wq; j++) d[j] = 0; continue; }
          const T *s = x + (c * p->H + h) * p->W;
          int64_t o = q - p->left;
          for (int64_t j = 0; j < j0; j++) d[j] = 0;
          if (sw == 1) for (int64_t j = j0; j < j1; j++) d[j] = s[j + o];
          else for (int64_t j = j0; j < j1; j++) d[j] = s[j * sw + o];
          for (int64_t j = j1; j < Wq; j++) d[j] = 0;
        }
      }
  for (int64_t i = p->C * sh * sw * p->plane; i < len; i++) dst[i] = 0;
}

#undef T
#undef DT
#undef FN
