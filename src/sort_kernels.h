/* sort_kernels.h: the stable sort for one dtype (f32, f64, i64, i32, u8; bool sorts as u8). sort.c includes it through
   all_kernels.h (T, DT, FN, FLOATING). */
#if FLOATING
#define ISNAN isnan
#else
#define ISNAN(v) 0
#endif

static int FN(before)(T a, T b, int desc) { /* a strictly before b */
  if (ISNAN(a)) return desc && !ISNAN(b);
  if (ISNAN(b)) return !desc;
  return desc ? a > b : a < b;
}

static int FN(sort_line)(const char *xp, int64_t xs, char *vp, char *ip, int64_t vs, int64_t is, int64_t n,
                         double desc) {
  const T *x = (const T *)xp; T *v = (T *)vp; int64_t *ix = (int64_t *)ip;
  int64_t *a = malloc((size_t)n * 2 * sizeof(int64_t));
  if (!a) return ds_fail(DS_ENOMEM, "sort: out of memory for a line of %lld", (long long)n);
  int64_t *b = a + n; int d = desc != 0;
  for (int64_t i = 0; i < n; i++) a[i] = i;
  for (int64_t w = 1; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, k = lo;
      while (i < mid && j < hi) b[k++] = FN(before)(x[a[j] * xs], x[a[i] * xs], d) ? a[j++] : a[i++];
      while (i < mid) b[k++] = a[i++];
      while (j < hi) b[k++] = a[j++];
    }
    int64_t *t = a; a = b; b = t;
  }
  for (int64_t i = 0; i < n; i++) { v[i * vs] = x[a[i] * xs]; ix[i * is] = a[i] + 1; }
  free(a < b ? a : b);
  return 0;
}

int FN(ds_sort)(ds_tensor *const *t, const double *attrs) {
  if (!t[0] || !t[1] || !t[2] || t[2]->dtype != DT || t[0]->dtype != DT || t[1]->dtype != DS_I64)
    return ds_fail(DS_EINVAL, "sort: expects values of the input's dtype and i64 indices");
  return for_each_line("sort", t[2], t[0], t[1], attrs[0], attrs[1], FN(sort_line));
}
#undef ISNAN
