/* float_kernels.h: instantiates a kernel template once per float dtype. Define KERNELS as the template's
   file name ("nn_pool_kernels.h"), then include this: the template sees T (element type), DT (dtype code)
   and FN(name) (name##_f32 / name##_f64) and #undefs them at its end. */
#define T float
#define DT DS_F32
#define FN(name) name##_f32
#include KERNELS
#define T double
#define DT DS_F64
#define FN(name) name##_f64
#include KERNELS
#undef KERNELS
