/* mem.c: storage allocation with a size-class caching allocator and live/peak byte accounting (blocks from
   pages.c: megabytes on huge pages). */
/* One lock guards the free lists and counters: several threads of one process may run ds (the nginx worker
   threads of examples/serve, each with its own Lua VM); the lock is uncontended in single-threaded use. */
#include "internal.h"
#include <pthread.h>
#include <stdlib.h>

#define NCLASS 256
#define CACHE_LIMIT_DEFAULT ((int64_t)2 << 30)  /* keep at most 2 GiB of freed blocks */

typedef struct block { struct block *next; int64_t bytes; } block;   /* a cached free block */
static block *free_lists[NCLASS];
static int64_t live_bytes, cached_bytes, peak_bytes;
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;

/* size class: 64-byte steps up to 1 KiB, then 4 steps per power of two (<= 25% slack). */
static int size_class(int64_t n, int64_t *rounded) {
  if (n <= 1024) { int64_t r = (n + 63) & ~(int64_t)63; if (r == 0) r = 64; *rounded = r; return (int)(r / 64 - 1); }
  int p = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^p < n <= 2^(p+1) */
  int64_t step = (int64_t)1 << (p - 2);
  int64_t r = ((n + step - 1) / step) * step;
  *rounded = r;
  int cls = 16 + (p - 10) * 4 + (int)((r >> (p - 2)) - 5);
  return cls < NCLASS ? cls : -1;
}

static void empty_cache_locked(void) {
  for (int i = 0; i < NCLASS; i++)
    while (free_lists[i]) { block *b = free_lists[i]; free_lists[i] = b->next; ds_pages_free(b, (size_t)b->bytes); }
  cached_bytes = 0;
}

void *ds_mem_alloc(int64_t nbytes, int64_t *rounded) {
  int cls = size_class(nbytes, rounded);
  void *p = NULL;
  pthread_mutex_lock(&mem_lock);
  if (cls >= 0 && free_lists[cls]) {
    block *b = free_lists[cls]; free_lists[cls] = b->next; p = b; cached_bytes -= *rounded;
  } else {
    p = ds_pages_alloc((size_t)*rounded);
    if (!p && cached_bytes > 0) { empty_cache_locked(); p = ds_pages_alloc((size_t)*rounded); }
    if (!p) { pthread_mutex_unlock(&mem_lock); return NULL; }
  }
  live_bytes += *rounded;
  if (live_bytes > peak_bytes) peak_bytes = live_bytes;
  pthread_mutex_unlock(&mem_lock);
  return p;
}

void ds_mem_release(void *p, int64_t rounded) {
  int64_t r; int cls = size_class(rounded, &r);
  pthread_mutex_lock(&mem_lock);
  live_bytes -= rounded;
  int cached = cls >= 0 && r == rounded && cached_bytes + rounded <= CACHE_LIMIT_DEFAULT;
  if (cached) { block *b = p; b->next = free_lists[cls]; b->bytes = rounded; free_lists[cls] = b; cached_bytes += rounded; }
  pthread_mutex_unlock(&mem_lock);
  if (!cached) ds_pages_free(p, (size_t)rounded);
}

void ds_mem_empty_cache(void) {
  pthread_mutex_lock(&mem_lock);
  empty_cache_locked();
  pthread_mutex_unlock(&mem_lock);
}
int64_t ds_mem_live_bytes(void) { return live_bytes; }
int64_t ds_mem_cached_bytes(void) { return cached_bytes; }
int64_t ds_mem_peak_bytes(void) { return peak_bytes; }
