/* bench/peak_bf16.c: this machine's bf16 dot-product peak (GFLOP/s) on N threads, measured with independent
   vdpbf16ps chains (AVX512_BF16). usage: peak_bf16 THREADS [ITERS] -> one JSON line {"threads":N,"bf16":G}
   ("bf16":null without AVX512_BF16). One vdpbf16ps on zmm is 16 lanes x 2 products x 2 flops = 64 flops; twelve
   independent accumulators per thread hide its latency, so the loop runs at the unit's throughput. */
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

__attribute__((target("avx512f,avx512bf16"))) static float chains(long iters) {
  __m512 acc[CHAINS];
  __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x33d633d6); /* 1, 1e-7 */
  for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
  for (long it = 0; it < iters; it++)
#pragma GCC unroll 12
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_dpbf16_ps(acc[i], x, y);
  float s = 0;
  for (int i = 0; i < CHAINS; i++) s += _mm512_reduce_add_ps(acc[i]);
  return s;
}

static int has_bf16(void) {
  unsigned a, b, c, d;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(1));
  return __builtin_cpu_supports("avx512f") && (a & (1u << 5));
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  long iters = argc > 2 ? atol(argv[2]) : 50000000L;
  if (threads < 1) threads = 1;
  if (!has_bf16()) { printf("{\"threads\":%d,\"bf16\":null}\n", threads); return 0; }
  float sink = 0;
  double t0 = now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  sink += chains(iters);
  double dt = now() - t0;
  if (sink == 12345.0f) puts("");   /* keep the result alive */
  printf("{\"threads\":%d,\"bf16\":%.1f}\n", threads, threads * (double)iters * CHAINS * 64 / dt / 1e9);
  return 0;
}
