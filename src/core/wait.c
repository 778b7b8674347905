/* Bounded waiting: spin, then yield, then sleep, with the timeout and the peers' liveness
 * looked at on the way. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "internal.h"

/* ---- waiting --------------------------------------------------------------------------- */

void symcoll__waiter_init(symcoll__waiter_t *w, symcoll_comm_t comm, int peer) {
  w->comm = comm;
  w->peer = peer;
  w->spins = 0;
  uint64_t now = symcoll__now_ns();
  w->deadline_ns = now + (uint64_t)comm->timeout_ms * 1000000ull;
  w->next_peer_check_ns = now + 1000000ull;
  w->start_ns = now;
  w->next_report_ns = now + SYMCOLL_WAIT_REPORT_NS;
}

symcoll_status_t symcoll__comm_peers_alive(symcoll_comm_t comm, int peer) {
  if (comm->thread_mode || comm->nranks == 1) return SYMCOLL_OK;
  struct pollfd p[SYMCOLL_MAX_RANKS];
  int idx[SYMCOLL_MAX_RANKS], n = 0;
  for (int r = 0; r < comm->nranks; r++) {
    if (r == comm->rank || (peer >= 0 && r != peer)) continue;
    if (comm->pidfds[r] >= 0) {
      p[n] = (struct pollfd){.fd = comm->pidfds[r], .events = POLLIN};
      idx[n++] = r;
    } else if (kill(comm->pids[r], 0) != 0 && errno == ESRCH) {
      SYMCOLL_INFO(SYMCOLL_SUBSYS_COLL, "rank %d (pid %d) is gone", r, (int)comm->pids[r]);
      return SYMCOLL_ERR_PEER_LOST;
    }
  }
  if (n > 0 && poll(p, (nfds_t)n, 0) > 0)
    for (int i = 0; i < n; i++)
      if (p[i].revents) {
        SYMCOLL_INFO(SYMCOLL_SUBSYS_COLL, "rank %d (pid %d) is gone", idx[i], (int)comm->pids[idx[i]]);
        return SYMCOLL_ERR_PEER_LOST;
      }
  return SYMCOLL_OK;
}

symcoll_status_t symcoll__waiter_slow(symcoll__waiter_t *w) {
  symcoll_comm_t c = w->comm;
  if (atomic_load_explicit(&c->aborted, memory_order_relaxed)) return SYMCOLL_ERR_ABORTED;
  /* Ranks may outnumber cores: after a short spin, give the core away. */
  if (w->spins > c->spin_before_yield) sched_yield();
  uint64_t now = symcoll__now_ns();
  if (now >= w->next_peer_check_ns) {
    w->next_peer_check_ns = now + 2000000ull;
    symcoll_status_t s = symcoll__comm_peers_alive(c, w->peer);
    if (s != SYMCOLL_OK) return s;
    s = symcoll__comm_status(c);
    if (s != SYMCOLL_OK) return s;
  }
  if (now >= w->deadline_ns) return SYMCOLL_ERR_TIMEOUT;
  if (now >= w->next_report_ns) { /* a long wait says whom it waits for */
    w->next_report_ns = now + 2 * SYMCOLL_WAIT_REPORT_NS;
    char who[24] = "any rank";
    if (w->peer >= 0) snprintf(who, sizeof who, "rank %d", w->peer);
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL,
                 "job %s: rank %d still waiting for %s in call %llu (%.0f s of the %.0f s timeout)", c->job_id, c->rank,
                 who, (unsigned long long)c->coll_seq, (double)(now - w->start_ns) * 1e-9, c->timeout_ms * 1e-3);
  }
  return SYMCOLL_OK;
}
