/* All-reduce across CPU ranks: forks --ranks N processes, each one rank of one job.
 *   build/bin/symcoll-example-host --ranks 4
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <symcoll.h>

static int run_rank(const char *job, int rank, int nranks) {
  symcoll_config_t cfg;
  symcoll_config_init(&cfg);
  cfg.job_id = job;
  cfg.rank = rank;
  cfg.nranks = nranks;
  cfg.device = SYMCOLL_DEVICE_HOST;
  symcoll_comm_t comm;
  symcoll_status_t s = symcoll_comm_create(&cfg, &comm);
  if (s != SYMCOLL_OK) {
    fprintf(stderr, "rank %d: %s\n", rank, symcoll_status_string(s));
    return 1;
  }
  enum { N = 1000 };
  float *x = malloc(N * sizeof *x);
  for (int i = 0; i < N; i++) x[i] = (float)(rank + 1) * (float)(i % 7);
  s = symcoll_all_reduce(comm, x, x, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL);
  int bad = s != SYMCOLL_OK;
  float want_scale = (float)nranks * (float)(nranks + 1) / 2;
  for (int i = 0; i < N && !bad; i++) bad = x[i] != want_scale * (float)(i % 7);
  if (rank == 0)
    printf("%d ranks: x[1] = %g (expected %g), %s\n", nranks, x[1], want_scale,
           bad ? "WRONG" : "all 1000 elements correct");
  fflush(stdout);
  free(x);
  symcoll_comm_destroy(comm);
  return bad;
}

int main(int argc, char **argv) {
  int nranks = 4;
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--ranks")) nranks = atoi(argv[i + 1]);
  if (nranks < 1 || nranks > SYMCOLL_MAX_RANKS) {
    fprintf(stderr, "usage: %s --ranks N (1..%d)\n", argv[0], SYMCOLL_MAX_RANKS);
    return 2;
  }
  char job[64];
  snprintf(job, sizeof job, "example.%d", (int)getpid());
  for (int r = 0; r < nranks; r++)
    if (fork() == 0) _exit(run_rank(job, r, nranks));
  int failed = 0, st;
  while (wait(&st) > 0) failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  return failed;
}
