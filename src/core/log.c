/* Logging: levels and subsystems from SYMCOLL_DEBUG / SYMCOLL_DEBUG_SUBSYS. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

int symcoll__log_level = SYMCOLL_LOG_WARN;
int symcoll__log_subsys = SYMCOLL_SUBSYS_ALL;

static void log_init_once(void) {
  /* Choices in SYMCOLL_ENV_MAP follow SYMCOLL_LOG_* and SYMCOLL_SUBSYS_* in order. */
  symcoll__log_level = symcoll__env_choice("SYMCOLL_DEBUG");
  symcoll__log_subsys = (int)symcoll__env_list("SYMCOLL_DEBUG_SUBSYS", SYMCOLL_SUBSYS_ALL);
}

void symcoll__log_init(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, log_init_once);
}

void symcoll__log_write(int level, int subsys, const char *file, int line, const char *fmt,
                        ...) {
  static const char *const level_names[] = {"NONE", "WARN", "INFO", "TRACE"};
  (void)subsys;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *base = strrchr(file, '/');
  fprintf(stderr, "symcoll %d %s %s:%d %s\n", (int)getpid(), level_names[level],
          base ? base + 1 : file, line, msg);
}

static __thread char last_error[1024];

const char *symcoll_last_error(void) { return last_error; }

void symcoll__log_warn(int subsys, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  if (symcoll__log_level >= SYMCOLL_LOG_WARN && (symcoll__log_subsys & subsys))
    symcoll__log_write(SYMCOLL_LOG_WARN, subsys, file, line, "%s", last_error);
}

uint64_t symcoll__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* IEEE half conversions, round to nearest even (matches F16C / CUDA __float2half_rn). */
float symcoll__f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { /* subnormal: normalise */
      int e = -1;
      do { e++; mant <<= 1; } while (!(mant & 0x400u));
      bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0);
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  union { uint32_t u; float f; } v = {.u = bits};
  return v.f;
}

uint16_t symcoll__f32_to_f16(float f) {
  union { uint32_t u; float f; } v = {.f = f};
  uint32_t x = v.u, sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((absx >> 13) & 0x3ffu)); /* NaN */
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow to inf */
  if (absx < 0x38800000u) { /* result is subnormal or zero */
    if (absx < 0x33000000u) return (uint16_t)sign;
    uint32_t e = absx >> 23, m = (absx & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
  }
  uint32_t q = ((absx - 0x38000000u) >> 13);
  uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) q++;
  return (uint16_t)(sign | q);
}

/* The spec is read once per process: a forked child (tests fork ranks, then set the variable)
 * reads it again. */
static const char *fault_spec;
static atomic_int fault_read, fault_hits;
static void fault_forget(void) {
  atomic_store(&fault_read, 0);
  atomic_store(&fault_hits, 0);
}
static void fault_register_once(void) { pthread_atfork(NULL, NULL, fault_forget); }

void symcoll__fault_point(int rank, const char *point) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  /* On the launch path: one load, no getenv per call. */
  if (!atomic_load_explicit(&fault_read, memory_order_acquire)) {
    pthread_once(&once, fault_register_once);
    fault_spec = getenv("SYMCOLL_FAULT");
    atomic_store_explicit(&fault_read, 1, memory_order_release);
  }
  const char *spec = fault_spec;
  if (!spec || !*spec) return;
  char name[16];
  int r = -1, n = 1;
  if (sscanf(spec, "%15[a-z]:%d:%d", name, &r, &n) < 2 || strcmp(name, point) != 0 || r != rank)
    return;
  if (atomic_fetch_add(&fault_hits, 1) + 1 == n) {
    SYMCOLL_INFO(SYMCOLL_SUBSYS_ALL, "SYMCOLL_FAULT: rank %d killed at %s %d", rank, point, n);
    raise(SIGKILL);
  }
}
