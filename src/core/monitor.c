/* The peer monitor of process mode: a thread per communicator that fails it (PEER_LOST) and
 * makes its transport give up the moment a peer process exits (pidfds, else kill(pid, 0)). */
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

/* ---- peer monitor (process mode) ------------------------------------------------------ */

static void *monitor_main(void *arg) {
  symcoll_comm_t c = arg;
  struct pollfd p[SYMCOLL_MAX_RANKS + 1];
  int idx[SYMCOLL_MAX_RANKS + 1], n = 0;
  p[n] = (struct pollfd){.fd = c->monitor_stop_fd, .events = POLLIN};
  idx[n++] = -1;
  for (int r = 0; r < c->nranks; r++)
    if (r != c->rank && c->pidfds[r] >= 0) {
      p[n] = (struct pollfd){.fd = c->pidfds[r], .events = POLLIN};
      idx[n++] = r;
    }
  for (;;) {
    /* Peers without a pidfd are looked at every 100 ms. */
    int rc = poll(p, (nfds_t)n, 100);
    if (rc < 0 && errno != EINTR) return NULL;
    if (p[0].revents) return NULL; /* destroy */
    int lost = -1;
    for (int i = 1; i < n && lost < 0; i++)
      if (p[i].revents) lost = idx[i];
    for (int r = 0; r < c->nranks && lost < 0; r++)
      if (r != c->rank && c->pidfds[r] < 0 && kill(c->pids[r], 0) != 0 && errno == ESRCH) lost = r;
    if (lost >= 0) {
      SYMCOLL_INFO(SYMCOLL_SUBSYS_COLL, "rank %d (pid %d) exited", lost, (int)c->pids[lost]);
      symcoll__comm_fail(c, SYMCOLL_ERR_PEER_LOST);
      if (c->tp->abort) c->tp->abort(c, SYMCOLL_ERR_PEER_LOST);
      return NULL;
    }
  }
}

void symcoll__monitor_start(symcoll_comm_t c) {
  c->monitor_stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (c->monitor_stop_fd < 0) return;
  if (pthread_create(&c->monitor, NULL, monitor_main, c) == 0) {
    c->monitor_running = true;
  } else {
    close(c->monitor_stop_fd);
    c->monitor_stop_fd = -1;
  }
}

void symcoll__monitor_stop(symcoll_comm_t c) {
  if (!c->monitor_running) return;
  uint64_t one = 1;
  if (write(c->monitor_stop_fd, &one, sizeof one) < 0) { /* the join below still ends it */
  }
  pthread_join(c->monitor, NULL);
  close(c->monitor_stop_fd);
  c->monitor_running = false;
}
