/* reduce_fold.h: one fold of reduce.c (an rdesc: run, runs, cols, merge, init) for one op and dtype. reduce_kernels.h and
   reduce_float_kernels.h include it with T (the element type) and these parameters, which it #undefs at its end:
   FOLD(name) (name + op + dtype: FOLD(run) is run_sum_f32), A (the accumulator type), L (the lanes' type: f32
   sums use float lanes inside a contiguous run of at most DS_CHUNK, each run's total then joins the double
   accumulator), INIT (A's start), MAP(x, c) (an element, with the output's constant c, as it joins), COMB(a, b)
   (the fold) and PAR_MIN (rdesc.par_min). Lanes: LANES independent accumulators under omp simd, each its own
   chain, nothing reassociated; then a fixed pairwise tree and the tail in order. */
static const A FOLD(init) = INIT;

static void FOLD(run)(const char *xp, int64_t n, int64_t s, int64_t r, const void *cp, void *ap) {
  const T *x = (const T *)xp; A c = cp ? *(const A *)cp : (A)0, acc = *(A *)ap; (void)r; (void)c;
  if (s == 1 && n >= LANES) {
    L l[LANES]; int64_t i = 0;
    for (int k = 0; k < LANES; k++) l[k] = (L)(INIT);
    for (; i + LANES <= n; i += LANES) {
      #pragma omp simd
      for (int k = 0; k < LANES; k++) l[k] = COMB(l[k], MAP(x[i + k], c));
    }
    for (int w = LANES / 2; w; w /= 2) for (int k = 0; k < w; k++) l[k] = COMB(l[k], l[k + w]);
    acc = COMB(acc, (A)l[0]);
    for (; i < n; i++) acc = COMB(acc, (A)MAP(x[i], c));
  } else for (int64_t i = 0; i < n; i++) acc = COMB(acc, (A)MAP(x[i * s], c));
  *(A *)ap = acc;
}

/* runs (reduce.c): RUNS outputs at a time, each with run's lanes, tree and tail in run's order, their independent
   chains side by side; the rest one by one through run */
#define RUNS 4
static void FOLD(runs)(const char *xp, int64_t m, int64_t os, int64_t n, const void *cp, void *ap) {
  const T *x = (const T *)xp; const A *cv = (const A *)cp; A *acc = (A *)ap;
  int64_t j = 0;
  for (; j + RUNS <= m; j += RUNS) {
    L l[RUNS][LANES]; A a[RUNS], c[RUNS]; const T *xg[RUNS]; int64_t i = 0;
    for (int g = 0; g < RUNS; g++) {
      a[g] = (A)(INIT); c[g] = cv ? cv[j + g] : (A)0; xg[g] = x + (j + g) * os; (void)c[g];
      for (int k = 0; k < LANES; k++) l[g][k] = (L)(INIT);
    }
    if (n >= LANES) {
      for (; i + LANES <= n; i += LANES) for (int g = 0; g < RUNS; g++) {
        #pragma omp simd
        for (int k = 0; k < LANES; k++) l[g][k] = COMB(l[g][k], MAP(xg[g][i + k], c[g]));
      }
      for (int g = 0; g < RUNS; g++) {
        for (int w = LANES / 2; w; w /= 2) for (int k = 0; k < w; k++) l[g][k] = COMB(l[g][k], l[g][k + w]);
        a[g] = COMB(a[g], (A)l[g][0]);
      }
    }
    for (; i < n; i++) for (int g = 0; g < RUNS; g++) a[g] = COMB(a[g], (A)MAP(xg[g][i], c[g]));
    for (int g = 0; g < RUNS; g++) acc[j + g] = a[g];
  }
  for (; j < m; j++) {
    acc[j] = (A)(INIT);
    FOLD(run)((const char *)(x + j * os), n, 1, 0, cv ? cv + j : NULL, acc + j);
  }
}
#undef RUNS

static void FOLD(cols)(const char *xp, int64_t w, int64_t r, const void *cp, void *ap) {
  const T *x = (const T *)xp; const A *c = (const A *)cp; A *acc = (A *)ap; (void)r;
  if (c) for (int64_t j = 0; j < w; j++) acc[j] = COMB(acc[j], (A)MAP(x[j], c[j]));
  else for (int64_t j = 0; j < w; j++) acc[j] = COMB(acc[j], (A)MAP(x[j], (A)0));
}

static void FOLD(merge)(void *ap, const void *pp) { *(A *)ap = COMB(*(A *)ap, *(const A *)pp); }

static const rdesc FOLD(desc) = {sizeof(T), sizeof(A), FOLD(run), FOLD(cols), FOLD(merge), &FOLD(init), PAR_MIN,
                                 FOLD(runs)};
#undef FOLD
#undef A
#undef L
#undef INIT
#undef MAP
#undef COMB
#undef PAR_MIN
