/* tools/mathfn_exhaustive.c: the max ulp error of mathfn.h's f32 erf and gelu over EVERY f32 input of a range,
   against libm in f64 (erf, and gelu as x/2 erfc(-x/sqrt 2)); tests/mathfn_spec.lua checks a strided sample.
   cc -O2 -march=x86-64-v3 -ffp-contract=off -Isrc tools/mathfn_exhaustive.c -lm -o /tmp/mathfn_exhaustive
   /tmp/mathfn_exhaustive gelu 0x80000000 0xc1700000   (all of [-15, -0]; erf 0 0x40800000 is all of [0, 4]) */
#include <stdio.h>
#include <stdlib.h>
#include "mathfn.h"

static double gelu_ref(double x) { return 0.5 * x * erfc(x * -0.70710678118654752440); }

/* |y - r| in units of the f32 ulp at r (the subnormal spacing below 2^-126) */
static double ulp_error(float y, double r) {
  int e;
  frexp(fabs(r), &e);
  return fabs((double)y - r) / ldexp(1.0, (e - 1 < -126 ? -126 : e - 1) - 23);
}

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[1], "erf") && strcmp(argv[1], "gelu"))) {
    fprintf(stderr, "usage: %s erf|gelu <first f32 bits> <last f32 bits>\n", argv[0]);
    return 2;
  }
  int gelu = !strcmp(argv[1], "gelu");
  uint32_t lo = (uint32_t)strtoul(argv[2], NULL, 0), hi = (uint32_t)strtoul(argv[3], NULL, 0);
  double worst = -1;
  float at = 0;
  for (uint64_t b = lo; b <= hi; b++) {
    float x = ds_bits_to_f32((int32_t)(uint32_t)b);
    double u = gelu ? ulp_error(ds_geluf(x), gelu_ref(x)) : ulp_error(ds_erff(x), erf(x));
    if (u > worst) worst = u, at = x;
  }
  printf("%s over [0x%08x, 0x%08x]: max %.3f ulp at x = %.9g\n", argv[1], lo, hi, worst, at);
  return 0;
}
