/* matmul_int_kernels.h: integer matmul for one dtype (i64, i32, u8). matmul_int.c includes it through all_kernels.h
   (T, DT, FN, NAME, UT: products and sums wrap in T's unsigned twin). */

/* t = {y (..., M, N), a (..., M, K), b (..., K, N)}; batch dims of y are the broadcast of a's and b's */
int FN(ds_matmul)(ds_tensor *const *t, const double *attrs) {
  ds_tensor *y = t[0]; const ds_tensor *a = t[1], *b = t[2]; char b1[128], b2[128]; (void)attrs;
  if (!y || !a || !b || y->dtype != DT || a->dtype != DT || b->dtype != DT)
    return ds_fail(DS_EINVAL, "matmul: expects " NAME " operands and output");
  if (a->ndim < 2 || b->ndim < 2 || y->ndim < 2 || a->shape[a->ndim - 1] != b->shape[b->ndim - 2])
    return ds_fail(DS_EINVAL, "matmul: operands %s and %s do not multiply", ds_shape_str(a, b1),
        ds_shape_str(b, b2));
  int nb = y->ndim - 2;
  int64_t M = y->shape[nb], N = y->shape[nb + 1], K = a->shape[a->ndim - 1];
  if (a->shape[a->ndim - 2] != M || b->shape[b->ndim - 1] != N)
    return ds_fail(DS_EINVAL, "matmul: output %s does not match %s @ %s", ds_shape_str(y, b1),
        ds_shape_str(a, b2), "b");
  int64_t sa[DS_MAXDIM] = {0}, sb[DS_MAXDIM] = {0}, idx[DS_MAXDIM] = {0}, nbatch = 1;
  for (int d = 0; d < nb; d++) {
    int da = d - (nb - (a->ndim - 2)), db = d - (nb - (b->ndim - 2));
    if (da >= 0 && a->shape[da] != 1) sa[d] = a->strides[da];
    if (db >= 0 && b->shape[db] != 1) sb[d] = b->strides[db];
    nbatch *= y->shape[d];
  }
  int64_t am = a->strides[a->ndim - 2], ak = a->strides[a->ndim - 1];
  int64_t bk = b->strides[b->ndim - 2], bn = b->strides[b->ndim - 1];
  int64_t ym = y->strides[nb], yn = y->strides[nb + 1];
  int64_t ao = 0, bo = 0, yo = 0;
  for (int64_t p = 0; p < nbatch; p++) {
    const T *A = (const T *)a->data + ao, *B = (const T *)b->data + bo; T *Y = (T *)y->data + yo;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        UT acc = 0;
        for (int64_t k = 0; k < K; k++) acc += (UT)A[i * am + k * ak] * (UT)B[k * bk + j * bn];
        Y[i * ym + j * yn] = (T)acc;
      }
    for (int d = nb - 1; d >= 0; d--) {
      ao += sa[d]; bo += sb[d]; yo += y->strides[d];
      if (++idx[d] < y->shape[d]) break;
      ao -= sa[d] * idx[d]; bo -= sb[d] * idx[d]; yo -= y->strides[d] * idx[d]; idx[d] = 0;
    }
  }
  return DS_OK;
}
