/* all_kernels_one.h: one instance of all_kernels.h's template: includes KERNELS with this dtype's parameters, then
   #undefs them. */
#include KERNELS
#undef T
#undef DT
#undef FN
#undef NAME
#undef FLOATING
#undef LOWEST
#undef HIGHEST
#undef UT
