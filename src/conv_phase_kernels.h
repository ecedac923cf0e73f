/* conv_phase_kernels.h: conv_phases for one dtype. conv_phase.c includes it through float_kernels.h with T (the
   element type), DT (its dtype code) and FN(name) (name with the dtype suffix). */

/* d[0 .. j0) = 0, d[j0 .. j1) = s[j * sw + o], d[j1 .. n) = 0 */
static void FN(phase_row)(T *d, const T *s, int64_t sw, int64_t o, int64_t j0, int64_t j1, int64_t n) {
  for (int64_t j = 0; j < j0; j++) d[j] = 0;
  if (sw == 1) memcpy(d + j0, s + j0 + o, (size_t)(j1 - j0) * sizeof(T));
  else for (int64_t j = j0; j < j1; j++) d[j] = s[j * sw + o];
  for (int64_t j = j1; j < n; j++) d[j] = 0;
}

/* the two column phases d0, d1 (Wq values each) of the input row s at once */
static void FN(phase_row2)(T *restrict d0, T *restrict d1, const T *restrict s, const split2 *t, int64_t Wq) {
  T *restrict e = t->e_odd ? d1 : d0, *restrict o = t->e_odd ? d0 : d1;
  int64_t e0 = t->e0, o0 = t->o0, ne = t->ne, no = t->no, k = 0;
  for (int64_t j = 0; j < e0; j++) e[j] = 0;
  for (int64_t j = 0; j < o0; j++) o[j] = 0;
  if (sizeof(T) == 4 && t->avx512)
    k = conv_deint2_avx512((float *)(e + e0), (float *)(o + o0), (const float *)s, no < ne ? no : ne);
  for (; k < no && k < ne; k++) { e[e0 + k] = s[2 * k]; o[o0 + k] = s[2 * k + 1]; }
  for (; k < ne; k++) e[e0 + k] = s[2 * k];
  for (int64_t j = e0 + ne; j < Wq; j++) e[j] = 0;
  for (int64_t j = o0 + no; j < Wq; j++) o[j] = 0;
}

/* dst (C, kx, Hq, OW) = column planes (nn_conv.h): plane (c, kw) row i column ow = padded input (c, i,
   ow * sw + kw * kdw), zeros outside the input; then dst[planes .. len) is zeroed */
NO_MEMCPY static void FN(column_planes)(const phase_geom *p, const T *x, T *dst, int64_t len) {
  int64_t OW = p->Wq, sw = p->sw;
  T *d = dst;
  for (int64_t c = 0; c < p->C; c++)
    for (int64_t kw = 0; kw < p->kx; kw++) {
      /* input column ow * sw + kw * kdw - left: inside for ow in [j0, j1) */
      int64_t o = kw * p->kdw - p->left, j0 = o >= 0 ? 0 : (-o + sw - 1) / sw;
      int64_t j1 = p->W - o <= 0 ? 0 : (p->W - o + sw - 1) / sw;
      if (j1 > OW) j1 = OW;
      if (j0 > j1) j0 = j1;
      for (int64_t i = 0; i < p->Hq; i++, d += OW) {
        int64_t h = i - p->top;
        if (h < 0 || h >= p->H) { for (int64_t j = 0; j < OW; j++) d[j] = 0; continue; }
        const T *s = x + (c * p->H + h) * p->W + o;   /* a plain loop: a memcpy call per short row costs more */
        for (int64_t j = 0; j < j0; j++) d[j] = 0;
        if (sw == 1) for (int64_t j = j0; j < j1; j++) d[j] = s[j];
        else for (int64_t j = j0; j < j1; j++) d[j] = s[j * sw];
        for (int64_t j = j1; j < OW; j++) d[j] = 0;
      }
    }
  for (int64_t i = d - dst; i < len; i++) dst[i] = 0;
}

/* dst (C, sh, sw, Hq, Wq) = the C planes (H, W) at x placed at (top, left) in zeros, phase plane (c, r, q) holding
   the padded rows r, r + sh, ... and columns q, q + sw, ...; every element of the planes is written, then
   dst[planes .. len) is zeroed. Part `part` of `parts` of it: the phase rows [i0, i1) of every plane, and that
   share of the zeros after them (column planes: all in part 0). */
void FN(conv_phases_part)(const phase_geom *p, const T *x, T *dst, int64_t len, int part, int parts) {
  if (p->kx) { if (part == 0) FN(column_planes)(p, x, dst, len); return; }
  int64_t sh = p->sh, sw = p->sw, Wq = p->Wq, plane = p->plane;
  int64_t i0 = p->Hq * part / parts, i1 = p->Hq * (part + 1) / parts, n = p->C * sh * sw * plane;
  split2 t2 = split2_of(p->W, p->left, Wq);
  for (int64_t c = 0; c < p->C; c++) {
    const T *xc = x + c * p->H * p->W;
    T *dc = dst + c * sh * sw * plane;
    if (sh == 1 && sw == 1 && p->top == 0 && p->left == 0 && p->Hq == p->H && Wq == p->W) {
      memcpy(dc + i0 * Wq, xc + i0 * Wq, (size_t)((i1 - i0) * Wq * (int64_t)sizeof(T)));   /* no border: the plane */
      continue;
    }
    for (int64_t ii = i0; ii < i1; ii++)
      for (int64_t r = 0; r < sh; r++) {   /* padded row ii * sh + r: row ii of the phase planes (c, r, .) */
        T *d = dc + r * sw * plane + ii * Wq;
        int64_t h = ii * sh + r - p->top;
        if (h < 0 || h >= p->H) {
          for (int64_t q = 0; q < sw; q++) for (int64_t j = 0; j < Wq; j++) d[q * plane + j] = 0;
          continue;
        }
        const T *s = xc + h * p->W;
        if (sw == 2) { FN(phase_row2)(d, d + plane, s, &t2, Wq); continue; }
        for (int64_t q = 0; q < sw; q++) {
          /* padded column j * sw + q is input column j * sw + q - left: inside for j in [j0, j1) */
          int64_t j0 = q >= p->left ? 0 : (p->left - q + sw - 1) / sw;
          int64_t j1 = p->W - 1 + p->left - q < 0 ? 0 : (p->W - 1 + p->left - q) / sw + 1;
          if (j1 > Wq) j1 = Wq;
          if (j0 > j1) j0 = j1;
          FN(phase_row)(d + q * plane, s, sw, q - p->left, j0, j1, Wq);
        }
      }
  }
  for (int64_t i = n + (len - n) * part / parts, e = n + (len - n) * (part + 1) / parts; i < e; i++) dst[i] = 0;
}

void FN(conv_phases)(const phase_geom *p, const T *x, T *dst, int64_t len) {
  FN(conv_phases_part)(p, x, dst, len, 0, 1);
}

#undef T
#undef DT
#undef FN
