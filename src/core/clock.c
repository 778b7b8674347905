/* The monotonic clock every bounded wait reads. */
#define _GNU_SOURCE
#include <time.h>

#include "internal.h"

uint64_t symcoll__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
