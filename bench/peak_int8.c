/* bench/peak_int8.c: this machine's int8 dot-product peak (GOP/s) on N threads, measured with independent
   vpdpbusd chains (AVX512_VNNI). usage: peak_int8 THREADS [ITERS] -> one JSON line {"threads":N,"vnni":G}
   ("vnni":null without AVX512_VNNI). One vpdpbusd on zmm is 16 lanes x 4 u8*s8 products x 2 ops = 128 ops;
   twelve independent accumulators per thread hide its latency, so the loop runs at the unit's throughput. */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHAINS 12

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

__attribute__((target("avx512f,avx512vnni"))) static int chains(long iters) {
  __m512i acc[CHAINS], x = _mm512_set1_epi8(1), y = _mm512_set1_epi8(-1);
  for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_epi32(i);
  for (long it = 0; it < iters; it++)
#pragma GCC unroll 12
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_dpbusd_epi32(acc[i], x, y);
  int s = 0;
  for (int i = 0; i < CHAINS; i++) s += _mm512_reduce_add_epi32(acc[i]);
  return s;
}

static int has_vnni(void) {
  unsigned a, b, c, d;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
  return __builtin_cpu_supports("avx512f") && (c & (1u << 11));
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  long iters = argc > 2 ? atol(argv[2]) : 50000000L;
  if (threads < 1) threads = 1;
  if (!has_vnni()) { printf("{\"threads\":%d,\"vnni\":null}\n", threads); return 0; }
  int sink = 0;
  double t0 = now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  sink += chains(iters);
  double dt = now() - t0;
  if (sink == 12345) puts("");   /* keep the result alive */
  printf("{\"threads\":%d,\"vnni\":%.1f}\n", threads, threads * (double)iters * CHAINS * 128 / dt / 1e9);
  return 0;
}
