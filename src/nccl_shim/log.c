/*
 * The shim's log lines (SYMCOLL_DEBUG: NONE, WARN (default), INFO: one line per call saying
 * whether symcoll served it or NCCL did, and why; TRACE as INFO) and the per-thread text
 * ncclGetLastError returns. Needs neither CUDA nor libsymcoll.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

#include "shim.h"

static int log_level = SHIM_LOG_WARN;

static void log_init(void) {
  const char *s = getenv("SYMCOLL_DEBUG");
  if (!s || !*s) return;
  static const char *const names[] = {"NONE", "WARN", "INFO", "TRACE"};
  for (int i = 0; i < 4; i++)
    if (!strcasecmp(s, names[i])) log_level = i;
}

int shim_log_level(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, log_init);
  return log_level;
}

static void vlog(int level, const char *fmt, va_list ap) {
  static const char *const names[] = {"NONE", "WARN", "INFO", "TRACE"};
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  fprintf(stderr, "symcoll %d %s nccl-shim: %s\n", (int)getpid(), names[level & 3], msg);
}

void shim_log(int level, const char *fmt, ...) {
  if (shim_log_level() < level) return;
  va_list ap;
  va_start(ap, fmt);
  vlog(level, fmt, ap);
  va_end(ap);
}

static __thread char last_error[1024];

void shim_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  if (shim_log_level() >= SHIM_LOG_WARN) fprintf(stderr, "symcoll %d WARN nccl-shim: %s\n", (int)getpid(), last_error);
}

const char *shim_last_error(void) {
  return last_error;
}
