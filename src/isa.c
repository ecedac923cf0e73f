/* isa.c: the instruction set the kernels use, chosen once from cpuid; DS_ISA=avx2 forces the narrower path,
   DS_ISA=scalar the portable integer kernels (float kernels then run their AVX2 code). */
#include "internal.h"
#include <cpuid.h>
#include <pthread.h>
#include <stdlib.h>

static int isa_level = -1;          /* DS_ISA_AVX2, DS_ISA_AVX512 or DS_ISA_SCALAR once chosen */
static int has_vnni, has_bf16, has_vbmi; /* AVX512_VNNI, _BF16, _VBMI on an AVX-512 host (probed with the level) */
static char isa_error[160];

/* AVX-512 F/DQ/BW/VL usable: cpuid bits and the OS saving the zmm/opmask state (XCR0 bits 1,2,5,6,7). */
static int host_has_avx512(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE)) return 0;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 0xe6) != 0xe6) return 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
  unsigned need = bit_AVX512F | bit_AVX512DQ | bit_AVX512BW | bit_AVX512VL;
  return (b & need) == need;
}

static void isa_choose(void) {
  int host = host_has_avx512() ? DS_ISA_AVX512 : DS_ISA_AVX2;
  if (host == DS_ISA_AVX512) {
    unsigned a, b, c, d;
    has_vnni = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 11));
    has_vbmi = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 1));
    has_bf16 = __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
  }
  const char *want = getenv("DS_ISA");
  isa_level = host;
  if (!want || !*want) return;
  if (strcmp(want, "avx2") == 0) isa_level = DS_ISA_AVX2;
  else if (strcmp(want, "scalar") == 0) isa_level = DS_ISA_SCALAR;
  else if (strcmp(want, "avx512") == 0 && host == DS_ISA_AVX512) isa_level = DS_ISA_AVX512;
  else
    snprintf(isa_error, sizeof isa_error, "DS_ISA=%s: expected avx2, avx512 or scalar%s", want,
             strcmp(want, "avx512") == 0 ? " (this CPU has no AVX-512 F/DQ/BW/VL)" : "");
}

static pthread_once_t isa_once = PTHREAD_ONCE_INIT;   /* threads sharing libds choose once */

int ds_isa(void) {
  pthread_once(&isa_once, isa_choose);
  return isa_level;
}

/* the AVX-512 path is in use and the host has vpdpbusd (VNNI) / vdpbf16ps (BF16) / vpermb (VBMI); cpuid ran once
   with the choice (in a virtual machine each cpuid traps to the hypervisor, microseconds a call) */
int ds_isa_vnni(void) { return ds_isa() == DS_ISA_AVX512 && has_vnni; }
int ds_isa_avx512bf16(void) { return ds_isa() == DS_ISA_AVX512 && has_bf16; }
int ds_isa_vbmi(void) { return ds_isa() == DS_ISA_AVX512 && has_vbmi; }

const char *ds_isa_name(void) {
  int isa = ds_isa();
  return isa == DS_ISA_AVX512 ? "avx512" : isa == DS_ISA_SCALAR ? "scalar" : "avx2";
}

const char *ds_isa_check(void) {
  ds_isa();
  return isa_error[0] ? isa_error : NULL;
}
