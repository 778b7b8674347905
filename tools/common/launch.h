/* Launching ranks on this machine, for the tests and the benchmark: the GPUs here (asked of a
 * throw-away child), ranks as forked processes under a wall-clock bound, ranks as threads. */
#ifndef SYMCOLL_TOOLS_LAUNCH_H
#define SYMCOLL_TOOLS_LAUNCH_H
#include <stddef.h>

/* The GPUs of this machine and GPU 0's name, or 0 and why not (`why`: "no GPU on this machine
 * (...)", or that the build has no CUDA). A process that initialises CUDA and then forks ranks
 * leaves them unable to use it, so a throw-away child asks; the answer is kept. */
int sc_gpu_count(char *model, size_t model_n, char *why, size_t why_n);

/* A rank's body: returns its exit code (0: all right). */
typedef int (*sc_rank_fn)(int rank, void *arg);

typedef struct {
  int sum;       /* of the exit codes (a rank killed by a signal counts 128 + the signal) */
  int first;     /* the first non-zero exit code, in the order ranks ended; 0 if none */
  int signaled;  /* ranks killed by a signal */
  int timed_out; /* 1: the wall-clock bound passed and every rank left was killed */
} sc_ranks_result_t;

/* Forks n processes running fn(rank, arg) and waits for them all, at most wall_s seconds
 * (0: no bound), then SIGKILLs the ones left. stdio is flushed before the fork. On Linux a rank
 * dies with the calling process, killed or not: none runs on after its launcher. */
sc_ranks_result_t sc_fork_ranks(int n, sc_rank_fn fn, void *arg, int wall_s);

/* Runs fn(rank, arg) on n threads and joins them; the result as sc_fork_ranks'. */
sc_ranks_result_t sc_thread_ranks(int n, sc_rank_fn fn, void *arg);
#endif
