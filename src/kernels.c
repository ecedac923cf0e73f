/* kernels.c: the kernel registry -- every ds_<op>_<dtype> listed in the src/<family>.def files, found by name. */
#include "internal.h"
#include "elementwise_table.h"

#define K(name) int name(ds_tensor *const *t, const double *attrs);
#include "kernels.inc"
#undef K

typedef struct { const char *name; ds_kernel fn; } entry;
static const entry registry[] = {
#define K(name) {#name, name},
#include "kernels.inc"
#undef K
};
#define NKERNELS ((int)(sizeof registry / sizeof registry[0]))

ds_kernel ds_kernel_find(const char *name) {
  if (!name) return NULL;
  for (int i = 0; i < NKERNELS; i++) if (strcmp(registry[i].name, name) == 0) return registry[i].fn;
  return NULL;
}
int ds_kernel_count(void) { return NKERNELS; }
const char *ds_kernel_name(int i) { return (i >= 0 && i < NKERNELS) ? registry[i].name : NULL; }
