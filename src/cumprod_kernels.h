/* cumprod_kernels.h: cumprod for one dtype. sort.c includes it through all_kernels.h (T, DT, FN, NAME, FLOATING):
   floats multiply in double, integers and bools in wrapping 64-bit and give i64. */
#if FLOATING
#define A double
#define TO T
#define DO DT
#else
#define A uint64_t
#define TO int64_t
#define DO DS_I64
#endif

static int FN(cumprod_line)(const char *xp, int64_t xs, char *yp, char *unused, int64_t ys, int64_t us, int64_t n,
                            double opt) {
  const T *x = (const T *)xp; TO *y = (TO *)yp; A acc = 1;
  for (int64_t i = 0; i < n; i++) { acc *= (A)x[i * xs]; y[i * ys] = (TO)acc; }
  return 0;
}

int FN(ds_cumprod)(ds_tensor *const *t, const double *attrs) {
  if (!t[0] || !t[1] || t[1]->dtype != DT || t[0]->dtype != DO)
    return ds_fail(DS_EINVAL, "cumprod: expects a " NAME " input and a matching output");
  return for_each_line("cumprod", t[1], t[0], NULL, attrs[0], 0, FN(cumprod_line));
}
#undef A
#undef TO
#undef DO
