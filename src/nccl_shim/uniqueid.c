/*
 * The ncclUniqueId of a shim communicator: a magic, a version and a symcoll job id (the name
 * of symcoll's rendezvous on one node), zero-padded to NCCL_UNIQUE_ID_BYTES:
 *   bytes 0..15   SHIM_ID_MAGIC (NUL-terminated)
 *   bytes 16..19  SHIM_ID_VERSION, little endian
 *   bytes 20..23  zero (reserved)
 *   bytes 24..87  the job id, NUL-terminated (<= 63 chars, printable ASCII)
 *   bytes 88..127 zero (reserved)
 * Pure apart from the random source, so the unit tests compile it in.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"

enum { ID_VERSION_AT = 16, ID_JOB_AT = 24 };
_Static_assert(sizeof(ncclUniqueId) == 128, "ncclUniqueId is 128 bytes");
_Static_assert(ID_JOB_AT + SHIM_JOB_ID_MAX <= 128, "the job id fits the id");

int shim_id_encode(const char *job_id, ncclUniqueId *id) {
  const size_t n = job_id ? strlen(job_id) : 0;
  if (n == 0 || n >= SHIM_JOB_ID_MAX) return -1;
  for (size_t i = 0; i < n; i++)
    if (job_id[i] <= ' ' || job_id[i] > '~') return -1;
  memset(id, 0, sizeof *id);
  memcpy(id->internal, SHIM_ID_MAGIC, sizeof SHIM_ID_MAGIC);
  for (int i = 0; i < 4; i++) id->internal[ID_VERSION_AT + i] = (char)((SHIM_ID_VERSION >> (8 * i)) & 0xff);
  memcpy(id->internal + ID_JOB_AT, job_id, n);
  return 0;
}

int shim_id_decode(const ncclUniqueId *id, char *job_id) {
  if (memcmp(id->internal, SHIM_ID_MAGIC, sizeof SHIM_ID_MAGIC) != 0) return -1;
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)(unsigned char)id->internal[ID_VERSION_AT + i] << (8 * i);
  if (v != SHIM_ID_VERSION) return -1;
  const char *s = id->internal + ID_JOB_AT;
  size_t n = 0;
  while (n < SHIM_JOB_ID_MAX && s[n]) {
    if (s[n] <= ' ' || s[n] > '~') return -1;
    n++;
  }
  if (n == 0 || n >= SHIM_JOB_ID_MAX) return -1;
  memcpy(job_id, s, n);
  job_id[n] = '\0';
  return 0;
}

void shim_job_id_new(char *job_id) {
  unsigned char r[16];
  size_t got = 0;
  while (got < sizeof r) {
    ssize_t k = getrandom(r + got, sizeof r - got, GRND_NONBLOCK);
    if (k <= 0) break;
    got += (size_t)k;
  }
  if (got < sizeof r) {
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ssize_t k = read(fd, r + got, sizeof r - got);
      if (k > 0) got += (size_t)k;
      close(fd);
    }
  }
  if (got < sizeof r) { /* no random source: time and pid, still distinct between two jobs */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t a = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, b = (uint64_t)getpid();
    memcpy(r, &a, 8);
    memcpy(r + 8, &b, 8);
  }
  char *p = job_id + sprintf(job_id, "nccl-");
  for (size_t i = 0; i < sizeof r; i++) p += sprintf(p, "%02x", r[i]);
}
