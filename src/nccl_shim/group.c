/*
 * ncclGroupStart/End. Per thread, as NCCL's: a nesting depth; the group ends at the outermost
 * ncclGroupEnd.
 *  - Served calls enqueue at once (a symcoll launch never blocks the host), so one thread may
 *    drive several ranks' calls inside a group.
 *  - Forwarded calls run inside the real ncclGroupStart/End: the real group opens at the first
 *    forwarded call of the group (after that call's real communicator exists: making one
 *    inside a real group would defer it) and ends at the outermost ncclGroupEnd.
 *  - ncclCommInitRank and ncclCommSplit inside a group (one thread making or splitting
 *    several ranks, as nccl-tests does) are deferred: the communicators are made at the
 *    outermost ncclGroupEnd, one thread each where there are several (symcoll_comm_create and
 *    symcoll_comm_split wait for every rank); so are window registrations (memory.c), after
 *    them.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "shim_rt.h"

static __thread int depth;
static __thread bool real_open;
static __thread ncclComm_t *pending;
static __thread int npending, cap_pending;

int shim_group_depth(void) {
  return depth;
}

bool shim_group_defer(ncclComm_t c) {
  if (depth == 0) return false;
  if (npending == cap_pending) {
    int cap = cap_pending ? 2 * cap_pending : 8;
    ncclComm_t *p = realloc(pending, (size_t)cap * sizeof *p);
    if (!p) return false; /* made now instead */
    pending = p;
    cap_pending = cap;
  }
  pending[npending++] = c;
  return true;
}

bool shim_group_holds(ncclComm_t c) {
  for (int i = 0; i < npending; i++)
    if (pending[i] == c) return true;
  return false;
}

ncclResult_t shim_group_forwarding(const shim_real_t *r) {
  if (depth == 0 || real_open) return ncclSuccess;
  ncclResult_t rc = r->GroupStart();
  if (rc == ncclSuccess) real_open = true;
  return rc;
}

SHIM_EXPORT ncclResult_t ncclGroupStart(void) {
  depth++;
  return ncclSuccess;
}

static ncclResult_t create_pending(void) {
  const int n = npending;
  ncclComm_t *p = pending;
  pending = NULL;
  npending = cap_pending = 0;
  ncclResult_t rc = ncclSuccess;
  if (n == 1) {
    rc = shim_comm_create(p[0]);
  } else if (n > 1) {
    /* A parent's splits are chained in the order they were made, on one thread (the ranks
     * pair a parent's splits by that order); every other communicator gets a thread. */
    for (int i = 0; i < n; i++) {
      p[i]->same_thread_peers = true;
      for (int j = i + 1; p[i]->split_parent && j < n; j++)
        if (p[j]->split_parent == p[i]->split_parent) {
          p[i]->split_next = p[j];
          p[j]->split_queued = true;
          break;
        }
    }
    for (int i = 0; i < n; i++)
      if (!p[i]->split_queued) shim_comm_create_async(p[i]);
    int kept = 0;
    for (int i = 0; i < n; i++) {
      ncclResult_t r = shim_comm_ready(p[i], "ncclGroupEnd");
      if (rc == ncclSuccess) rc = r;
      if (!shim_comm_drop_ghost(p[i])) p[kept++] = p[i];
    }
    shim_comm_cohort(p, kept); /* their real communicators, if any, are made together */
  }
  if (n == 1) shim_comm_drop_ghost(p[0]);
  free(p);
  return rc;
}

static ncclResult_t group_end(ncclSimInfo_t *sim) {
  if (depth == 0) {
    shim_error("ncclGroupEnd without ncclGroupStart");
    return ncclInvalidUsage;
  }
  if (--depth > 0) return ncclSuccess;
  ncclResult_t rc = ncclSuccess;
  if (real_open) {
    real_open = false;
    const shim_real_t *r = shim_real();
    rc = sim && r->GroupSimulateEnd ? r->GroupSimulateEnd(sim) : r->GroupEnd();
  } else if (sim) {
    sim->estimatedTime = 0.0f; /* served calls: nothing NCCL would simulate */
  }
  ncclResult_t rc2 = create_pending();
  ncclResult_t rc3 = shim_windows_flush(); /* after the communicators they belong to exist */
  return rc != ncclSuccess ? rc : rc2 != ncclSuccess ? rc2 : rc3;
}

SHIM_EXPORT ncclResult_t ncclGroupEnd(void) {
  return group_end(NULL);
}

SHIM_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *sim) {
  if (!sim) return ncclInvalidArgument;
  return group_end(sim);
}

SHIM_PALIAS(GroupStart)
SHIM_PALIAS(GroupEnd)
SHIM_PALIAS(GroupSimulateEnd)
