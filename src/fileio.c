/* fileio.c: the file primitives of savers and loaders: CRC-32, whole-file reads into memory (regular
   files only: FIFOs, devices and directories are refused before a byte is read), fsync by path,
   directory listing and locking, and process liveness (for stale temporary files). */
#include "internal.h"
#include <stdlib.h>
#include <errno.h>
#include <zlib.h>
#include <fcntl.h>
#include <dirent.h>
#include <signal.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>

uint32_t ds_crc32(const void *p, int64_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (int64_t off = 0; off < n; off += (1 << 30)) {
    int64_t k = n - off < (1 << 30) ? n - off : (1 << 30);
    crc = crc32(crc, (const Bytef *)p + off, (uInt)k);
  }
  return (uint32_t)crc;
}

/* open path for reading if it is a regular file: O_NONBLOCK so a FIFO without a writer cannot block the
   open, then fstat refuses anything that is not a regular file before any read */
static int open_regular(const char *path, struct stat *st) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) { ds_fail(DS_EIO, "cannot open %s: %s", path, strerror(errno)); return -1; }
  if (fstat(fd, st) != 0) { close(fd); ds_fail(DS_EIO, "cannot stat %s: %s", path, strerror(errno)); return -1; }
  if (!S_ISREG(st->st_mode)) {
    close(fd);
    ds_fail(DS_EIO, "%s is not a regular file (%s)", path,
            S_ISDIR(st->st_mode)                           ? "a directory"
            : S_ISFIFO(st->st_mode)                        ? "a FIFO"
            : S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode) ? "a device"
                                                           : "not a file");
    return -1;
  }
  return fd;
}

/* Memory for a file's bytes: large buffers on huge pages (pages.c: one fault per 4 KiB page of a 34 MB file
   cost more than reading it), small ones from malloc. The size is kept in the 64 bytes before the returned
   pointer (which stays 64-byte aligned). */
#define FILE_HEADROOM 64
static void *file_alloc(int64_t n) {
  char *base = ds_pages_alloc((size_t)n + FILE_HEADROOM);
  if (!base) return NULL;
  memcpy(base, &n, sizeof n);
  return base + FILE_HEADROOM;
}
void ds_file_free(void *p) {
  if (!p) return;
  char *base = (char *)p - FILE_HEADROOM;
  int64_t n;
  memcpy(&n, base, sizeof n);
  ds_pages_free(base, (size_t)n + FILE_HEADROOM);
}

/* The whole file in new 64-byte aligned memory (free with ds_file_free); the copy belongs to the caller,
   so replacing or truncating the file later cannot affect it. crc (if not NULL) receives the CRC-32 of
   the bytes, computed chunk by chunk as they arrive. NULL (ds_last_error) when the file is missing, not
   regular, larger than limit, or changes size while it is read. */
void *ds_file_read(const char *path, int64_t limit, int64_t *size, uint32_t *crc) {
  struct stat st;
  int fd = open_regular(path, &st);
  if (fd < 0) return NULL;
  int64_t n = st.st_size;
  if (n > limit) {
    close(fd);
    ds_fail(DS_EIO, "%s has %lld bytes (limit %lld)", path, (long long)n, (long long)limit);
    return NULL;
  }
  char *buf = file_alloc(n);
  if (!buf) { close(fd); ds_fail(DS_ENOMEM, "out of memory reading %s (%lld bytes)", path, (long long)n); return NULL; }
  uLong sum = crc32(0L, Z_NULL, 0);
  int64_t got = 0;
  while (got < n) {
    size_t want = (size_t)(n - got) < ((size_t)1 << 20) ? (size_t)(n - got) : ((size_t)1 << 20);
    ssize_t r = read(fd, buf + got, want);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    sum = crc32(sum, (const Bytef *)buf + got, (uInt)r);
    got += r;
  }
  char extra;
  ssize_t more = got == n ? read(fd, &extra, 1) : 0;
  close(fd);
  if (got != n || more != 0) {
    ds_file_free(buf);
    ds_fail(DS_EIO, "%s changed size while it was read (%lld bytes expected)", path, (long long)n);
    return NULL;
  }
  *size = n;
  if (crc) *crc = (uint32_t)sum;
  return buf;
}

/* fsync a file or a directory (after a rename: makes the new directory entry durable). 0 or -1. */
int ds_file_sync(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) { ds_fail(DS_EIO, "cannot open %s to sync it: %s", path, strerror(errno)); return -1; }
  int rc = fsync(fd);
  int err = errno;
  close(fd);
  if (rc != 0 && err != EINVAL) { ds_fail(DS_EIO, "cannot sync %s: %s", path, strerror(err)); return -1; }
  return 0;
}

/* The names in dir (without . and ..), each NUL-terminated, written into out[cap]. Returns the bytes
   needed (call again with a larger buffer when it exceeds cap), or -1. */
int64_t ds_dir_list(const char *dir, char *out, int64_t cap) {
  DIR *d = opendir(dir);
  if (!d) { ds_fail(DS_EIO, "cannot list %s: %s", dir, strerror(errno)); return -1; }
  int64_t used = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    int64_t k = (int64_t)strlen(e->d_name) + 1;
    if (used + k <= cap) memcpy(out + used, e->d_name, (size_t)k);
    used += k;
  }
  closedir(d);
  return used;
}

/* An exclusive lock on a directory (flock; waits for the holder), released by ds_dir_unlock or when the
   process dies. Returns a handle >= 0, or -1. */
int ds_dir_lock(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) { ds_fail(DS_EIO, "cannot open directory %s: %s", dir, strerror(errno)); return -1; }
  while (flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    ds_fail(DS_EIO, "cannot lock %s: %s", dir, strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}
void ds_dir_unlock(int handle) { if (handle >= 0) close(handle); }

int ds_process_id(void) { return (int)getpid(); }
/* 1 if a process with this id runs (exists, and is not a zombie waiting to be reaped), else 0 */
int ds_process_alive(int pid) {
  if (pid <= 0 || (kill(pid, 0) != 0 && errno != EPERM)) return 0;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *state = strrchr(buf, ')');   /* "pid (comm) S ...": comm may hold spaces and parens */
  return !(state && (state[1] == ' ') && (state[2] == 'Z' || state[2] == 'X'));
}
