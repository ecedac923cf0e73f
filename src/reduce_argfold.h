/* reduce_argfold.h: the fold of a value and its flat reduced index (argmax, argmin) for one dtype: ties keep the
   first, NaN beats numbers (PyTorch's max/argmax). reduce_kernels.h includes it with T, FN and the parameters
   FOLD(name) (as in reduce_fold.h) and BETTER(v, a) (v replaces a), which it #undefs at its end. The accumulator is
   FN(arg) = {v, i}, i = -1 while empty. */
static const FN(arg) FOLD(init) = {0, -1};

static void FOLD(run)(const char *xp, int64_t n, int64_t s, int64_t r, const void *cp, void *ap) {
  const T *x = (const T *)xp; FN(arg) a = *(FN(arg) *)ap; (void)cp;
  for (int64_t k = 0; k < n; k++) { T v = x[k * s]; if (a.i < 0 || BETTER(v, a.v)) { a.v = v; a.i = r + k; } }
  *(FN(arg) *)ap = a;
}

static void FOLD(cols)(const char *xp, int64_t w, int64_t r, const void *cp, void *ap) {
  const T *x = (const T *)xp; FN(arg) *a = (FN(arg) *)ap; (void)cp;
  for (int64_t j = 0; j < w; j++) if (a[j].i < 0 || BETTER(x[j], a[j].v)) { a[j].v = x[j]; a[j].i = r; }
}

static void FOLD(merge)(void *ap, const void *pp) {
  FN(arg) *a = ap; const FN(arg) *p = pp;
  if (p->i >= 0 && (a->i < 0 || BETTER(p->v, a->v))) *a = *p;
}

static const rdesc FOLD(desc) = {sizeof(T), sizeof(FN(arg)), FOLD(run), FOLD(cols), FOLD(merge), &FOLD(init),
                                 DS_PAR_MIN, NULL}; /* argmax/argmin fold their runs one by one */
#undef FOLD
#undef BETTER
