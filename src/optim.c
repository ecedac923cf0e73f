/* optim.c: fused optimizer updates, one kernel call per parameter tensor, updating state in place.
   Formulas follow torch 1.13's single-tensor paths (same operation order, scalars rounded to the
   tensor dtype as PyTorch does), so results match torch.optim to rounding. No outputs: every
   kernel writes into its inputs (the op table lists them in `mutates`). The kernels are the template
   optim_kernels.h, instantiated once per float dtype; this file holds the checks they share. */
#include "internal.h"

/* Every kernel's last operand is its hyper-parameters: a contiguous f64 tensor of k numbers in the order
   the comment above the kernel gives (booleans as 0/1). They are an operand, not attrs, so a compiled train
   step reads the optimizer's current values (a scheduler's lr) at every run. */
static int check_hyper(const ds_tensor *h, int64_t k, const char *op) {
  DS_CHECK(h && h->dtype == DS_F64 && h->numel == k && ds_tensor_is_contiguous(h),
           "%s: hyper-parameters must be a contiguous f64 tensor of %d numbers", op, (int)k);
  return DS_OK;
}

/* param and state tensors: same dtype and numel, contiguous; grad: the parameter's dtype and shape,
   any strides (a weight grad is often a transposed view) */
static int check_operands(ds_tensor *const *t, int n, int dtype, const char *op) {
  char b1[128], b2[128];
  for (int k = 0; k < n; k++) {
    DS_CHECK(t[k], "%s: operand %d missing", op, k + 1);
    DS_CHECK(t[k]->dtype == dtype, "%s: operand %d has the wrong dtype", op, k + 1);
    DS_CHECK(t[k]->numel == t[0]->numel, "%s: operand %d has shape %s, parameter has %s", op, k + 1,
             ds_shape_str(t[k], b1), ds_shape_str(t[0], b2));
    DS_CHECK(k == 1 || ds_tensor_is_contiguous(t[k]), "%s: operand %d must be contiguous", op, k + 1);
  }
  if (!ds_tensor_is_contiguous(t[1])) {
    int same = t[1]->ndim == t[0]->ndim;
    for (int d = 0; same && d < t[0]->ndim; d++) same = t[1]->shape[d] == t[0]->shape[d];
    DS_CHECK(same, "%s: grad shape %s differs from parameter shape %s", op, ds_shape_str(t[1], b1),
             ds_shape_str(t[0], b2));
  }
  for (int k = 2; k < n; k++)
    for (int j = 0; j < k; j++)
      DS_CHECK(j == 1 || t[k]->data != t[j]->data, "%s: operands %d and %d share memory", op, j + 1, k + 1);
  return DS_OK;
}

/* the step counter (and NAdam's mu_product): a 1-element f32 tensor */
static int check_counter(const ds_tensor *s, const char *op) {
  DS_CHECK(s && s->dtype == DS_F32 && s->numel == 1, "%s: step counter must be a 1-element f32 tensor", op);
  return DS_OK;
}

/* n tensor operands (param, grad, state...), then c counters, then k hyper-parameters: all checked */
static int check_update(ds_tensor *const *t, int n, int c, int k, int dtype, const char *op) {
  int rc = check_operands(t, n, dtype, op);
  for (int j = n; !rc && j < n + c; j++) rc = check_counter(t[j], op);
  return rc ? rc : check_hyper(t[n + c], k, op);
}

/* element offset of row r (all dims but the last) of a strided tensor */
static int64_t row_offset(const ds_tensor *t, int64_t r) {
  int64_t off = 0;
  for (int d = t->ndim - 2; d >= 0; d--) { off += (r % t->shape[d]) * t->strides[d]; r /= t->shape[d]; }
  return off;
}

/* run the body (the macro's last argument) for every element i of the parameter (row-major), with gk the grad's
   element offset; split over threads above DS_PAR_MIN elements */
#define FOR_EACH(n, gt, ...) \
  if (ds_tensor_is_contiguous(gt)) { \
    DS_PAR_FOR(n > DS_PAR_MIN, i, n, const int64_t gk = i; __VA_ARGS__); \
  } else if (n > 0) { \
    const int64_t inner = (gt)->shape[(gt)->ndim - 1], gs = (gt)->strides[(gt)->ndim - 1], rows = n / inner; \
    DS_PAR_FOR(n > DS_PAR_MIN, r, rows, \
      const int64_t base = row_offset(gt, r); \
      for (int64_t j = 0; j < inner; j++) { const int64_t i = r * inner + j, gk = base + j * gs; __VA_ARGS__ }); \
  }

/* the element type's sqrt and fabs */
#define SQRT(x) _Generic((x), float: sqrtf, default: sqrt)(x)
#define ABS(x) _Generic((x), float: fabsf, default: fabs)(x)

/* the kernels, once per float dtype */
#define KERNELS "optim_kernels.h"
#include "float_kernels.h"
