/*
 * One rank of a job started by a launcher (mpirun, torchrun, srun): the communicator comes
 * from symcoll_comm_create_from_env. Modes:
 *   --kill RANK [--at N]: RANK SIGKILLs itself at its Nth all_reduce (default 10); every
 *     other rank must end its calls with an error (PEER_LOST, TIMEOUT, ABORTED) within the
 *     timeout + 1 s of the call that failed: it prints "rank R: call I: STATUS after S s".
 *   --barriers N: N barriers and all_reduces, then a clean end (every rank prints "ok").
 * Exit: 0 when the rank saw what it should, 1 otherwise.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <symcoll.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  int kill_rank = -1, at = 10, calls = 200;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--kill") && i + 1 < argc)
      kill_rank = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--at") && i + 1 < argc)
      at = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
      calls = atoi(argv[++i]);
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  symcoll_comm_t comm;
  symcoll_status_t s = symcoll_comm_create_from_env(SYMCOLL_DEVICE_HOST, &comm);
  if (s != SYMCOLL_OK) {
    printf("comm_create_from_env: %s\n", symcoll_status_string(s));
    return 1;
  }
  const int me = symcoll_comm_rank(comm), n = symcoll_comm_nranks(comm);
  const char *t = getenv("SYMCOLL_TIMEOUT_MS");
  const double timeout_s = (t ? atof(t) : 30000) * 1e-3;
  enum { COUNT = 4099 };
  static float buf[COUNT];
  for (int i = 0; i < calls; i++) {
    if (me == kill_rank && i + 1 == at) raise(SIGKILL);
    for (int k = 0; k < COUNT; k++) buf[k] = (float)(me + k % 7);
    const double t0 = now();
    s = symcoll_all_reduce(comm, buf, buf, COUNT, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL);
    const double dt = now() - t0;
    if (s != SYMCOLL_OK) {
      printf("rank %d: call %d: %s after %.3f s\n", me, i + 1, symcoll_status_string(s), dt);
      symcoll_comm_abort(comm);
      symcoll_comm_destroy(comm);
      /* An error is what a survivor must see, in time. */
      return kill_rank >= 0 && dt <= timeout_s + 1.0 ? 0 : 1;
    }
    for (int k = 0; k < COUNT; k++)
      if (buf[k] != (float)(n * (n - 1) / 2 + n * (k % 7))) {
        printf("rank %d: call %d: element %d is %g\n", me, i + 1, k, buf[k]);
        return 1;
      }
    if (kill_rank < 0 && i % 10 == 0 && (s = symcoll_comm_barrier(comm)) != SYMCOLL_OK) {
      printf("rank %d: barrier: %s\n", me, symcoll_status_string(s));
      return 1;
    }
  }
  s = symcoll_comm_barrier(comm);
  symcoll_comm_destroy(comm);
  if (kill_rank >= 0) {
    printf("rank %d: all %d calls succeeded although rank %d was killed\n", me, calls, kill_rank);
    return 1;
  }
  printf("rank %d of %d: ok\n", me, n);
  return s == SYMCOLL_OK ? 0 : 1;
}
