/* bench/peak_flops.c: this machine's fp32 FMA peak (GFLOP/s) on N threads, measured with independent FMA chains. */
/* usage: peak_flops THREADS -> one JSON line {"threads":N,"avx2":G,"avx512":G or null,"peak":max}.
   Twelve independent accumulators per thread hide the FMA latency, so the loop runs at the FMA units'
   throughput: 2 flops x lanes x FMAs per cycle x clock. A CPU whose AVX-512 units are half width (Zen 4)
   gives the same figure for both. */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHAINS 12
#define ITERS 100000000L

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

__attribute__((target("avx2,fma"))) static float chains256(long iters) {
  __m256 acc[CHAINS], m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
  for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_set1_ps((float)i);
  for (long it = 0; it < iters; it++)
#pragma GCC unroll 12
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_fmadd_ps(acc[i], m, c);
  float out[8], s = 0;
  for (int i = 0; i < CHAINS; i++) { _mm256_storeu_ps(out, acc[i]); s += out[0]; }
  return s;
}

__attribute__((target("avx512f"))) static float chains512(long iters) {
  __m512 acc[CHAINS], m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
  for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
  for (long it = 0; it < iters; it++)
#pragma GCC unroll 12
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], m, c);
  float s = 0;
  for (int i = 0; i < CHAINS; i++) s += _mm512_reduce_add_ps(acc[i]);
  return s;
}

/* GFLOP/s of all threads running the chains at once (lanes: 8 or 16) */
static double rate(int threads, int lanes) {
  float sink = 0;
  double t0 = now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  sink += lanes == 16 ? chains512(ITERS) : chains256(ITERS);
  double dt = now() - t0;
  if (sink == 12345.0f) puts("");   /* keep the result alive */
  return threads * (double)ITERS * CHAINS * lanes * 2 / dt / 1e9;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  if (threads < 1) threads = 1;
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    printf("{\"threads\":%d,\"avx2\":null,\"avx512\":null,\"peak\":null}\n", threads);
    return 0;
  }
  double g256 = rate(threads, 8);
  double g512 = __builtin_cpu_supports("avx512f") ? rate(threads, 16) : 0;
  double peak = g512 > g256 ? g512 : g256;
  if (g512 > 0) printf("{\"threads\":%d,\"avx2\":%.1f,\"avx512\":%.1f,\"peak\":%.1f}\n", threads, g256, g512, peak);
  else printf("{\"threads\":%d,\"avx2\":%.1f,\"avx512\":null,\"peak\":%.1f}\n", threads, g256, peak);
  return 0;
}
