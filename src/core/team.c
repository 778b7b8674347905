/*
 * Thread mode: the ranks of a communicator are threads of one process (created together by
 * symcoll_comm_create_all). Their out-of-band exchange goes through a shared "team" object:
 * a generation barrier on a mutex and condition variable, bounded by the timeout and woken by
 * symcoll_comm_abort(). File descriptors are process-wide, so passing one is an all-gather of
 * its number followed by a dup.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

typedef struct team {
  int nranks;
  atomic_int refs;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int arrived;
  uint64_t generation;
  symcoll_status_t broken; /* a rank timed out or aborted: every later exchange fails */
  const void *slot[SYMCOLL_MAX_RANKS];
  size_t bytes[SYMCOLL_MAX_RANKS];
} team_t;

static team_t *team_of(symcoll_comm_t comm) {
  return (team_t *)comm->oob_state;
}

/* Waits until all ranks arrive; TIMEOUT / ABORTED break the team for everyone. */
static struct timespec abs_after(uint64_t ns) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  ns += (uint64_t)t.tv_nsec;
  t.tv_sec += (time_t)(ns / 1000000000ull);
  t.tv_nsec = (long)(ns % 1000000000ull);
  return t;
}

static symcoll_status_t team_barrier(symcoll_comm_t comm) {
  team_t *t = team_of(comm);
  const uint64_t timeout_ns = (uint64_t)comm->timeout_ms * 1000000ull;
  const struct timespec dl = abs_after(timeout_ns);
  uint64_t waited_ns = 0;
  pthread_mutex_lock(&t->mu);
  symcoll_status_t s = t->broken;
  if (s == SYMCOLL_OK) {
    uint64_t gen = t->generation;
    if (++t->arrived == t->nranks) {
      t->arrived = 0;
      t->generation++;
      pthread_cond_broadcast(&t->cv);
    } else {
      while (t->generation == gen && t->broken == SYMCOLL_OK) {
        if (atomic_load(&comm->aborted)) {
          t->broken = SYMCOLL_ERR_ABORTED;
          break;
        }
        /* Wake up now and then to say how many ranks are missing. */
        const uint64_t step = SYMCOLL_WAIT_REPORT_NS * (waited_ns ? 2 : 1);
        const bool report = waited_ns + step < timeout_ns;
        const struct timespec until = report ? abs_after(step) : dl;
        int rc = pthread_cond_timedwait(&t->cv, &t->mu, &until);
        if (rc == ETIMEDOUT && report && t->generation == gen) {
          waited_ns += step;
          SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT,
                       "thread team: rank %d still waiting, %d of %d ranks arrived (%.0f s of %.0f s)", comm->rank,
                       t->arrived, t->nranks, (double)waited_ns * 1e-9, (double)timeout_ns * 1e-9);
          continue;
        }
        if (rc == ETIMEDOUT && t->generation == gen) {
          SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "thread team: rank %d timed out; %d of %d arrived", comm->rank, t->arrived,
                       t->nranks);
          t->broken = SYMCOLL_ERR_TIMEOUT;
        }
      }
      if (t->generation == gen) {
        s = atomic_load(&comm->aborted) ? SYMCOLL_ERR_ABORTED : t->broken;
        pthread_cond_broadcast(&t->cv);
      }
    }
  }
  pthread_mutex_unlock(&t->mu);
  return s;
}

static symcoll_status_t team_allgather(symcoll_comm_t comm, const void *in, void *out, size_t bytes) {
  team_t *t = team_of(comm);
  t->slot[comm->rank] = in;
  t->bytes[comm->rank] = bytes;
  SYMCOLL_CHECK(team_barrier(comm));
  symcoll_status_t s = SYMCOLL_OK;
  for (int r = 0; r < t->nranks; r++) {
    if (t->bytes[r] != bytes)
      s = SYMCOLL_ERR_MISMATCH;
    else
      memcpy((char *)out + bytes * (size_t)r, t->slot[r], bytes);
  }
  /* Peers' inputs must stay valid until everyone has copied them. */
  symcoll_status_t s2 = team_barrier(comm);
  return s != SYMCOLL_OK ? s : s2;
}

static symcoll_status_t team_bcast(symcoll_comm_t comm, void *buf, size_t bytes) {
  team_t *t = team_of(comm);
  t->slot[comm->rank] = buf;
  t->bytes[comm->rank] = bytes;
  SYMCOLL_CHECK(team_barrier(comm));
  symcoll_status_t s = t->bytes[0] == bytes ? SYMCOLL_OK : SYMCOLL_ERR_MISMATCH;
  if (s == SYMCOLL_OK && comm->rank != 0) memcpy(buf, t->slot[0], bytes);
  symcoll_status_t s2 = team_barrier(comm);
  return s != SYMCOLL_OK ? s : s2;
}

static symcoll_status_t team_exchange_fd(symcoll_comm_t comm, int my_fd, int *fds_p) {
  int fds[SYMCOLL_MAX_RANKS];
  SYMCOLL_CHECK(team_allgather(comm, &my_fd, fds, sizeof(int)));
  for (int r = 0; r < comm->nranks; r++) {
    fds_p[r] = fcntl(fds[r], F_DUPFD_CLOEXEC, 0);
    if (fds_p[r] < 0) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_BOOT, "dup of rank %d's fd failed: %m", r);
      while (r-- > 0) close(fds_p[r]);
      return SYMCOLL_ERR_SYSTEM;
    }
  }
  /* Nobody may close its fd before every rank has its own copy. */
  symcoll_status_t s = team_barrier(comm);
  if (s != SYMCOLL_OK)
    for (int r = 0; r < comm->nranks; r++) close(fds_p[r]);
  return s;
}

static void team_destroy(symcoll_comm_t comm) {
  team_t *t = team_of(comm);
  if (!t) return;
  /* Wake any rank still waiting, then drop this rank's reference. */
  pthread_mutex_lock(&t->mu);
  if (t->broken == SYMCOLL_OK) t->broken = SYMCOLL_ERR_PEER_LOST;
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
  comm->oob_state = NULL;
  if (atomic_fetch_sub(&t->refs, 1) == 1) {
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
  }
}

static const symcoll__oob_t team_oob = {
    .allgather = team_allgather,
    .bcast = team_bcast,
    .exchange_fd = team_exchange_fd,
    .destroy = team_destroy,
};

void *symcoll__team_new(int nranks) {
  team_t *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->nranks = nranks;
  atomic_init(&t->refs, nranks);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&t->cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&t->mu, NULL);
  return t;
}

/* The comm takes one of the team's nranks references (dropped by its oob's destroy). */
void symcoll__team_join(symcoll_comm_t comm, void *team) {
  comm->oob = &team_oob;
  comm->oob_state = team;
  comm->pids[comm->rank] = getpid();
  comm->thread_mode = true;
}

symcoll_status_t symcoll__team_init(int nranks, symcoll_comm_t *comms) {
  team_t *t = symcoll__team_new(nranks);
  if (!t) return SYMCOLL_ERR_NO_MEMORY;
  for (int r = 0; r < nranks; r++) symcoll__team_join(comms[r], t);
  return SYMCOLL_OK;
}

void symcoll__team_wake(symcoll_comm_t comm) {
  team_t *t = team_of(comm);
  if (!t || comm->oob != &team_oob) return;
  pthread_mutex_lock(&t->mu);
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}
