/* Fault injection for tests (SYMCOLL_FAULT=point:rank[:n], internal.h). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The spec is read once per process: a forked child (tests fork ranks, then set the variable)
 * reads it again. */
static const char *fault_spec;
static atomic_int fault_read, fault_hits;
static void fault_forget(void) {
  atomic_store(&fault_read, 0);
  atomic_store(&fault_hits, 0);
}
static void fault_register_once(void) {
  pthread_atfork(NULL, NULL, fault_forget);
}

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
  if (sscanf(spec, "%15[a-z]:%d:%d", name, &r, &n) < 2 || strcmp(name, point) != 0 || r != rank) return;
  if (atomic_fetch_add(&fault_hits, 1) + 1 == n) {
    SYMCOLL_INFO(SYMCOLL_SUBSYS_ALL, "SYMCOLL_FAULT: rank %d killed at %s %d", rank, point, n);
    raise(SIGKILL);
  }
}
