/* The ranks of one symcoll-bench run: threads of this process, forked processes, or this
 * process as one rank of a job a launcher started (mpirun, torchrun, SYMCOLL_RANK; across
 * nodes: both communicators from the environment). Each rank gets a communicator under test
 * and a CPU control communicator (barriers, result exchange), is pinned to a core, and runs
 * the run's body (bench.c). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef SYMCOLL_BENCH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "bench.h"
#include "launch.h"

static const bench_launch_t *B; /* the run being launched */

static int rank_device(int rank) {
  if (strcmp(B->backend, "cuda") != 0) return SYMCOLL_DEVICE_HOST;
  return B->ngpus > 0 ? rank % B->ngpus : 0;
}

/* One core per rank, as mpirun binds by default: a rank that shares a core with its peer
 * waits for the scheduler instead of the peer. */
static void bind_rank(int rank) {
  if (!B->bind) return;
  cpu_set_t all, one;
  if (sched_getaffinity(0, sizeof all, &all) != 0) return;
  int n = CPU_COUNT(&all), k = rank % (n > 0 ? n : 1);
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
    if (CPU_ISSET(cpu, &all) && k-- == 0) {
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      sched_setaffinity(0, sizeof one, &one);
      return;
    }
}

static void rank_setup(bctx_t *c) {
  c->gpu = c->device != SYMCOLL_DEVICE_HOST;
  c->inplace = B->inplace;
  bind_rank(c->rank);
#ifdef SYMCOLL_BENCH_CUDA
  if (c->gpu) {
    cudaSetDevice(c->device);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    c->stream = s;
  }
#endif
  symcoll_status_t s = symcoll_mem_alloc(c->ctl, 4096, &c->ctl_mem);
  if (s != SYMCOLL_OK) bench_fail(c, "control memory", bench_status(s));
}

typedef struct {
  symcoll_comm_t comms[SYMCOLL_MAX_RANKS], ctls[SYMCOLL_MAX_RANKS];
  int devs[SYMCOLL_MAX_RANKS];
} threads_t;

static int thread_rank(int r, void *p) {
  threads_t *t = p;
  bctx_t c = {.comm = t->comms[r], .ctl = t->ctls[r], .rank = r, .nranks = B->nranks, .device = t->devs[r]};
  rank_setup(&c);
  return B->body(&c);
}

static int run_threads(void) {
  const int n = B->nranks;
  threads_t t;
  for (int r = 0; r < n; r++) t.devs[r] = rank_device(r);
  symcoll_status_t s = symcoll_comm_create_all(n, t.devs, t.comms);
  if (s == SYMCOLL_OK) s = symcoll_comm_create_all(n, NULL, t.ctls);
  if (s != SYMCOLL_OK) {
    fprintf(stderr, "symcoll_comm_create_all: %s\n", bench_status(s));
    return 1;
  }
  const int rc = sc_thread_ranks(n, thread_rank, &t).first;
  for (int r = 0; r < n; r++) {
    symcoll_comm_destroy(t.comms[r]);
    symcoll_comm_destroy(t.ctls[r]);
  }
  return rc;
}

static int run_one_process(const char *job, int rank, int n) {
  symcoll_config_t cfg;
  symcoll_config_init(&cfg);
  char ctl_job[96];
  snprintf(ctl_job, sizeof ctl_job, "%s.ctl", job);
  cfg.job_id = ctl_job;
  cfg.rank = rank;
  cfg.nranks = n;
  bctx_t c = {.rank = rank, .nranks = n, .device = rank_device(rank)};
  symcoll_status_t s = symcoll_comm_create(&cfg, &c.ctl);
  cfg.job_id = job;
  cfg.device = c.device;
#ifdef SYMCOLL_BENCH_CUDA
  if (c.device >= 0) cudaSetDevice(c.device);
#endif
  if (s == SYMCOLL_OK) s = symcoll_comm_create(&cfg, &c.comm);
  if (s != SYMCOLL_OK) {
    fprintf(stderr, "rank %d: symcoll_comm_create: %s\n", rank, bench_status(s));
    return 1;
  }
  rank_setup(&c);
  const int rc = B->body(&c);
  symcoll_comm_destroy(c.comm);
  symcoll_comm_destroy(c.ctl);
  return rc;
}

/* Whether this process is one rank of a job spanning nodes (or of emulated nodes). */
bool bench_across_nodes(void) {
  const char *g = getenv("OMPI_COMM_WORLD_SIZE"), *l = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const char *tg = getenv("WORLD_SIZE"), *tl = getenv("LOCAL_WORLD_SIZE");
  const char *k = getenv("SYMCOLL_NODE_RANKS");
  return (g && l && atoi(g) > atoi(l)) || (tg && tl && atoi(tg) > atoi(tl)) || (k && atoi(k) > 0);
}

/* One rank of a job spanning nodes: both communicators from the launcher's environment. */
static int run_job_process(void) {
  bctx_t c = {0};
  symcoll_status_t s = symcoll_comm_create_from_env(SYMCOLL_DEVICE_HOST, &c.ctl);
  const bool gpu = !strcmp(B->backend, "cuda");
  if (s == SYMCOLL_OK) s = symcoll_comm_create_from_env(gpu ? SYMCOLL_DEVICE_LOCAL_RANK : SYMCOLL_DEVICE_HOST, &c.comm);
  if (s != SYMCOLL_OK) {
    fprintf(stderr, "symcoll_comm_create_from_env: %s\n", bench_status(s));
    return 1;
  }
  c.rank = symcoll_comm_rank(c.comm), c.nranks = symcoll_comm_nranks(c.comm), c.device = symcoll_comm_device(c.comm);
#ifdef SYMCOLL_BENCH_CUDA
  if (c.device >= 0) cudaSetDevice(c.device);
#endif
  rank_setup(&c);
  const int rc = B->body(&c);
  symcoll_comm_barrier(c.ctl);
  symcoll_comm_destroy(c.comm);
  symcoll_comm_destroy(c.ctl);
  return rc;
}

static int forked_rank(int r, void *job) {
  return run_one_process(job, r, B->nranks);
}

static int run_processes(void) {
  /* Joined from a launcher (mpirun, torchrun, SYMCOLL_RANK): this process is one rank. */
  if (bench_across_nodes() && !getenv("SYMCOLL_NODE_RANKS")) return run_job_process();
  const char *envs[][3] = {{"SYMCOLL_RANK", "SYMCOLL_NRANKS", "SYMCOLL_JOB_ID"},
                           {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_ess_base_jobid"},
                           {"LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"}};
  for (size_t i = 0; i < sizeof envs / sizeof envs[0]; i++)
    if (getenv(envs[i][0]) && getenv(envs[i][1])) {
      char job[80];
      snprintf(job, sizeof job, "bench.%s", getenv(envs[i][2]) ? getenv(envs[i][2]) : "env");
      for (char *p = job; *p; p++)
        if (*p == '/' || *p == ' ') *p = '_';
      return run_one_process(job, atoi(getenv(envs[i][0])), atoi(getenv(envs[i][1])));
    }
  char job[64];
  snprintf(job, sizeof job, "bench.%d", (int)getpid());
  /* The first rank that fails ends the run: the others lose it within their timeout (or at
   * once, through its pidfd) and fail too; the exit code is the first non-zero one. */
  return sc_fork_ranks(B->nranks, forked_rank, job, 0).first;
}

int bench_launch(const bench_launch_t *l) {
  B = l;
  return !strcmp(l->mode, "thread") ? run_threads() : run_processes();
}
