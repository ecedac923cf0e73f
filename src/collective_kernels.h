/* collective_kernels.h: the reduction step of a collective for one dtype (f32, f64, i64). collective.c includes it
   through all_kernels.h (T, FN, FLOATING). */
#if FLOATING
#define MAXF MAX_FLOAT
#else
#define MAXF MAX_INT
#endif

/* acc[i] (the own contribution) combined with rank 0, 1, ... in order: the fold starts at rank 0 whatever `me` is */
static void FN(reduce)(T *out, const T *own, const char *recv, int64_t c, int64_t len, int op) {
  const int me = world.rank, P = world.size;
  for (int64_t i = 0; i < len; i++) {
    T acc = me == 0 ? own[i] : ((const T *)recv)[i];
    for (int j = 1; j < P; j++) {
      T v = j == me ? own[i] : ((const T *)(recv + (int64_t)j * c * sizeof(T)))[i];
      acc = op == DS_REDUCE_MAX ? MAXF(acc, v) : acc + v;
    }
    out[i] = op == DS_REDUCE_MEAN ? acc / (T)P : acc;
  }
}
#undef MAXF
