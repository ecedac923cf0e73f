/* bench/bf16_dot_probe.c: what vdpbf16ps computes, by experiment: one lane of the instruction against candidate
   emulations over random and edge inputs (any bits, moderate, huge, tiny and subnormal bf16s, cancellations,
   sums straddling the smallest normal). Prints each candidate's mismatch count (NaN vs NaN counted equal:
   ds makes every NaN result 0x7fc00000, src/bgemm.h). The one with 0 is ds's bf16 dot (docs/DTYPES.md).
   usage: cc -O2 bench/bf16_dot_probe.c -o /tmp/probe -lm && /tmp/probe [iterations]   (AVX512_BF16 host) */
#pragma GCC target("avx512f,avx512bf16,avx512vl,fma")
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t fbits(float x) { uint32_t u; memcpy(&u, &x, 4); return u; }
static float bitsf(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
static float b2f(uint16_t h) { return bitsf((uint32_t)h << 16); }
static float flush(float x) { uint32_t u = fbits(x); return (u & 0x7f800000u) ? x : bitsf(u & 0x80000000u); }
static uint64_t rs = 88172645463325252ull;
static uint64_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs; }

/* the instruction on one lane: acc + a . b of the pairs (a0, a1), (b0, b1) (index 0 = the even, low half) */
static float hw(float acc, const uint16_t a[2], const uint16_t b[2]) {
  __m512 c = _mm512_set1_ps(acc);
  __m512bh x = (__m512bh)_mm512_set1_epi32((int)(a[0] | (uint32_t)a[1] << 16));
  __m512bh y = (__m512bh)_mm512_set1_epi32((int)(b[0] | (uint32_t)b[1] << 16));
  float o[16];
  _mm512_storeu_ps(o, _mm512_dpbf16_ps(c, x, y));
  return o[0];
}

typedef float (*cand_fn)(float, float, float, float, float);   /* acc, a0, a1, b0, b1 (inputs flushed) */
/* ds's dot: acc = ftz(fma(a1, b1, acc)), then ftz(fma(a0, b0, acc)) */
static float odd_then_even_fma(float c, float a0, float a1, float b0, float b1) {
  return flush(fmaf(a0, b0, flush(fmaf(a1, b1, c))));
}
static float even_then_odd_fma(float c, float a0, float a1, float b0, float b1) {
  return flush(fmaf(a1, b1, flush(fmaf(a0, b0, c))));
}
/* the two products rounded to f32 (and flushed) before the adds */
static float odd_then_even_rounded(float c, float a0, float a1, float b0, float b1) {
  float p1 = flush(a1 * b1), p0 = flush(a0 * b0);
  return flush(flush(c + p1) + p0);
}
/* the pair's sum rounded once, then added to acc */
static float pair_sum_first(float c, float a0, float a1, float b0, float b1) {
  return flush(c + flush((float)((double)a0 * b0 + (double)a1 * b1)));
}
static const struct { const char *name; cand_fn f; int daz; } CANDS[] = {
  { "odd then even, fma, DAZ/FTZ (ds)", odd_then_even_fma, 1 },
  { "even then odd, fma, DAZ/FTZ", even_then_odd_fma, 1 },
  { "odd then even, products rounded", odd_then_even_rounded, 1 },
  { "pair sum rounded, then + acc", pair_sum_first, 1 },
  { "odd then even, fma, no DAZ/FTZ", odd_then_even_fma, 0 },
};
#define NCAND (int)(sizeof CANDS / sizeof CANDS[0])

/* a bf16 of the given kind: 0 any bits, 1 moderate, 2 subnormal, 3 huge, 4 tiny normal */
static uint16_t gen(int kind) {
  uint64_t r = rnd();
  uint16_t s = (uint16_t)((r >> 40) & 0x8000u), m = (uint16_t)(r & 0x7f);
  unsigned e = (unsigned)((r >> 8) % 40);
  switch (kind) {
    case 0: return (uint16_t)r;
    case 1: return (uint16_t)(s | (e + 107) << 7 | m);
    case 2: return (uint16_t)(s | m);
    case 3: return (uint16_t)(s | (e % 20 + 234) << 7 | m);
    default: return (uint16_t)(s | (e % 20 + 1) << 7 | m);
  }
}

int main(int argc, char **argv) {
  long iters = argc > 1 ? atol(argv[1]) : 20000000, bad[NCAND] = { 0 }, flushed = 0;
  for (long it = 0; it < iters; it++) {
    uint16_t a[2], b[2];
    float acc;
    if (it % 2 == 0) {   /* mixed kinds; acc random, moderate or cancelling the products */
      int k = (int)(rnd() % 5);
      a[0] = gen(k); a[1] = gen((int)(rnd() % 5)); b[0] = gen((int)(rnd() % 5)); b[1] = gen(k);
      double p = (double)b2f(a[0]) * b2f(b[0]) + (double)b2f(a[1]) * b2f(b[1]);
      uint64_t r = rnd();
      acc = r % 3 == 0 ? bitsf((uint32_t)(r >> 16)) : r % 3 == 1 ? (float)-p * (1 + 0x1p-20f * (float)(r % 7))
                       : bitsf((uint32_t)((r >> 8) % 40 + 107) << 23 | (uint32_t)(r >> 32 & 0x807fffffu));
    } else {             /* one product, the sum straddling the smallest normal 2^-126 */
      uint32_t ab = 0x00800000u + (uint32_t)(rnd() % 64) - 32 + (uint32_t)(rnd() % 3 << 23);
      acc = bitsf(ab | (uint32_t)(rnd() & 1) << 31);
      int ea = (int)(rnd() % 40) + 40, eb = 118 - ea + (int)(rnd() % 16);
      a[0] = b[0] = 0;
      a[1] = (uint16_t)((rnd() & 0x807f) | (unsigned)ea << 7);
      b[1] = (uint16_t)((rnd() & 0x807f) | (unsigned)(eb < 1 ? 1 : eb) << 7);
    }
    float h = hw(acc, a, b);
    if (fbits(h) << 1 == 0) flushed++;
    for (int c = 0; c < NCAND; c++) {
      float (*in)(float) = CANDS[c].daz ? flush : NULL;
      float x[5] = { acc, b2f(a[0]), b2f(a[1]), b2f(b[0]), b2f(b[1]) };
      if (in) for (int i = 0; i < 5; i++) x[i] = in(x[i]);
      float e = CANDS[c].f(x[0], x[1], x[2], x[3], x[4]);
      if (!(isnan(h) && isnan(e)) && fbits(h) != fbits(e)) bad[c]++;
    }
  }
  printf("%ld lanes (%ld zero results)\n", iters, flushed);
  for (int c = 0; c < NCAND; c++) printf("%-36s %ld mismatches\n", CANDS[c].name, bad[c]);
  return 0;
}
