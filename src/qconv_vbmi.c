/* qconv_vbmi.c: qconv.c's gather of unit-stride taps on AVX-512 VBMI hosts, a k-group's output rows in one call,
   sixteen pixels (64 bytes) at a time: four source rows interleaved byte by byte by two vpermt2b and a blend
   (instead of eight 16-byte unpacks and four stores), or, for four adjacent columns of one kernel row, the
   overlapping 4-byte windows of one 32-byte run by one vpermb. Pure data movement: the same bytes as the
   portable gather. */
#pragma GCC target("avx512f,avx512bw,avx512vbmi")
#include <stdint.h>
#include <immintrin.h>

/* byte 4 i + t: pixel i of the first table (t even: s0 or s2) or the second (t odd: s1 or s3) ... */
#define PIX(i) i, 64 + i, i, 64 + i
static const uint8_t PAIRS[64] = { PIX(0), PIX(1), PIX(2), PIX(3), PIX(4), PIX(5), PIX(6), PIX(7), PIX(8), PIX(9),
                                   PIX(10), PIX(11), PIX(12), PIX(13), PIX(14), PIX(15) };
#undef PIX
/* ... or byte i + t of one run (a window) */
#define WIN(i) i, i + 1, i + 2, i + 3
static const uint8_t WINDOWS[64] = { WIN(0), WIN(1), WIN(2), WIN(3), WIN(4), WIN(5), WIN(6), WIN(7), WIN(8),
                                     WIN(9), WIN(10), WIN(11), WIN(12), WIN(13), WIN(14), WIN(15) };
#undef WIN

/* d[4 p + t] = s_t[off_p] for p < n, where pixel p is column ow_p of output row r_p (pixel 0: column ow, the row
   at offset row; OW columns a row, rows rowstep bytes apart, unit stride along a row) and s_t = base[t]: row by
   row, sixteen pixels at a time, so it may read up to 15 bytes past a row's last pixel (a window: 31 past s_0's)
   and write up to 60 past a row's end (and d + 4 n) */
void ds_qconv_gather_vbmi(const uint8_t *const *base, int window, int64_t ow, int64_t row, int64_t OW,
                          int64_t rowstep, int64_t n, uint8_t *d) {
  const __m512i pairs = _mm512_loadu_si512(PAIRS), windows = _mm512_loadu_si512(WINDOWS);
  const __mmask64 upper = 0xCCCCCCCCCCCCCCCCull;   /* t = 2, 3 */
  const uint8_t *s0 = base[0], *s1 = base[1], *s2 = base[2], *s3 = base[3];
  for (int64_t p = 0; p < n; p += OW - ow, ow = 0, row += rowstep) {
    int64_t run = OW - ow < n - p ? OW - ow : n - p, off = row + ow;
    uint8_t *dr = d + 4 * p;
    if (window)
      for (int64_t i = 0; i < run; i += 16) {
        __m512i x = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(s0 + off + i)));
        _mm512_storeu_si512(dr + 4 * i, _mm512_permutexvar_epi8(windows, x));
      }
    else
      for (int64_t i = 0; i < run; i += 16) {
        __m512i x0 = _mm512_zextsi128_si512(_mm_loadu_si128((const __m128i *)(s0 + off + i)));
        __m512i x1 = _mm512_zextsi128_si512(_mm_loadu_si128((const __m128i *)(s1 + off + i)));
        __m512i x2 = _mm512_zextsi128_si512(_mm_loadu_si128((const __m128i *)(s2 + off + i)));
        __m512i x3 = _mm512_zextsi128_si512(_mm_loadu_si128((const __m128i *)(s3 + off + i)));
        __m512i r01 = _mm512_permutex2var_epi8(x0, pairs, x1), r23 = _mm512_permutex2var_epi8(x2, pairs, x3);
        _mm512_storeu_si512(dr + 4 * i, _mm512_mask_blend_epi8(upper, r01, r23));
      }
  }
}
