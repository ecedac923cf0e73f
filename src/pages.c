/* pages.c: buffers of 2 MiB and more as anonymous mappings on 2 MiB boundaries that ask for transparent huge
   pages; smaller ones from the C heap. */
/* A fresh 4 KiB page costs a fault on first touch; on a VM such a fault is dear (12-16 us each for a 34 MB
   buffer on the Firecracker host of bench/RESULTS.md: 108-145 ms to touch it, 3-4 ms with huge pages).
   With THP in "madvise" mode (Debian's default) only madvise(MADV_HUGEPAGE) regions get huge pages, and
   only their 2 MiB-aligned parts, hence the alignment. Under AddressSanitizer (gcc's or clang's) every
   buffer comes from the heap, so overruns stay visible. */
#include "internal.h"
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_BYTES ((size_t)2 << 20)

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

static int from_heap(size_t n) { return UNDER_ASAN || n < HUGE_BYTES; }

static size_t page_round(size_t n) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  return (n + page - 1) / page * page;
}

void *ds_pages_alloc(size_t n) {
  if (from_heap(n)) {
    void *q = NULL;
    return posix_memalign(&q, 64, n ? n : 1) == 0 ? q : NULL;
  }
  size_t len = page_round(n), span = len + HUGE_BYTES;
  char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return NULL;
  char *p = (char *)(((uintptr_t)raw + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
  if (p > raw) munmap(raw, (size_t)(p - raw));                                   /* the unaligned head */
  if (raw + span > p + len) munmap(p + len, (size_t)(raw + span - (p + len)));   /* and the tail */
  madvise(p, len, MADV_HUGEPAGE);
  return p;
}

void ds_pages_free(void *p, size_t n) {
  if (!p) return;
  if (from_heap(n)) free(p);
  else munmap(p, page_round(n));
}
