/* Logging: levels and subsystems from SYMCOLL_DEBUG / SYMCOLL_DEBUG_SUBSYS. */
#define _GNU_SOURCE
#include <pthread.h>
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

void symcoll__log_write(int level, int subsys, const char *file, int line, const char *fmt, ...) {
  static const char *const level_names[] = {"NONE", "WARN", "INFO", "TRACE"};
  (void)subsys;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *base = strrchr(file, '/');
  fprintf(stderr, "symcoll %d %s %s:%d %s\n", (int)getpid(), level_names[level], base ? base + 1 : file, line, msg);
}

static __thread char last_error[1024];

const char *symcoll_last_error(void) {
  return last_error;
}

void symcoll__log_warn(int subsys, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  if (symcoll__log_level >= SYMCOLL_LOG_WARN && (symcoll__log_subsys & subsys))
    symcoll__log_write(SYMCOLL_LOG_WARN, subsys, file, line, "%s", last_error);
}
