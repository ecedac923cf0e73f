/* kernels.c: the kernel registry -- every ds_<op>_<dtype> listed in the src/<family>.def files, found by name,
   with what a plan step must give it: K(name, operands) a fixed operand count (outputs then inputs);
   KV(name, check) a count the step's attrs decide (a fused program, cat's input count), checked by `check`. */
#include "internal.h"
#include "elementwise_table.h"

#define K(name, nops) int name(ds_tensor *const *t, const double *attrs);
#define KV(name, check) int name(ds_tensor *const *t, const double *attrs); ds_kernel_check check;
#include "kernels.inc"
#undef K
#undef KV

static const ds_kernel_info registry[] = {
#define K(name, nops) {#name, name, nops, NULL},
#define KV(name, check) {#name, name, -1, check},
#include "kernels.inc"
#undef K
#undef KV
};
#define NKERNELS ((int)(sizeof registry / sizeof registry[0]))

const ds_kernel_info *ds_kernel_info_find(const char *name) {
  if (!name) return NULL;
  for (int i = 0; i < NKERNELS; i++) if (strcmp(registry[i].name, name) == 0) return &registry[i];
  return NULL;
}
ds_kernel ds_kernel_find(const char *name) {
  const ds_kernel_info *k = ds_kernel_info_find(name);
  return k ? k->fn : NULL;
}
int ds_kernel_operands(const char *name) {
  const ds_kernel_info *k = ds_kernel_info_find(name);
  return k ? k->noperands : -2;
}
int ds_kernel_count(void) { return NKERNELS; }
const char *ds_kernel_name(int i) { return (i >= 0 && i < NKERNELS) ? registry[i].name : NULL; }
