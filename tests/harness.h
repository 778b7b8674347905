/* Shared test harness: launching ranks (processes or threads), exact-result data, buffers
 * on the host or on a GPU behind one small table of operations. */
#ifndef SYMCOLL_TEST_HARNESS_H
#define SYMCOLL_TEST_HARNESS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <symcoll.h>

#include "exact.h"
#define TH_POISON EXACT_POISON

#define TH_SKIP 77 /* CTest SKIP_RETURN_CODE */

/* Where a rank's test buffers live. */
typedef struct th_buf_ops {
  const char *name;
  void *(*alloc)(size_t bytes);
  void (*free)(void *p);
  void (*to_dev)(void *dst, const void *src, size_t bytes);
  void (*to_host)(void *dst, const void *src, size_t bytes);
  void *(*stream)(void);   /* the stream collectives go on (NULL on the host) */
  void (*sync)(void);      /* waits for the stream */
  int (*bind)(int device); /* makes device current in this thread; 0 on success */
} th_buf_ops_t;

extern const th_buf_ops_t th_host_ops;
/* NULL when the build has no CUDA or the machine has no GPU (reason in *why). */
const th_buf_ops_t *th_cuda_ops(const char **why);
int th_cuda_device_count(void);

/* The function a rank runs; returns its number of failures. */
typedef int (*th_rank_fn)(symcoll_comm_t comm, const th_buf_ops_t *ops, void *arg);

typedef struct th_launch {
  const char *backend; /* "host" or "cuda" */
  const char *mode;    /* "process" or "thread" */
  int nranks;
  int timeout_ms; /* communicator timeout; 0 = default */
  int wall_s;     /* the whole run is killed after this */
} th_launch_t;

/* Runs fn on every rank; returns the total failures, or -1 if ranks crashed or hung.
 * Devices: all ranks on GPU 0 when there is one GPU, else rank % ngpus. Mode "env": this
 * process is one rank of a job started by a launcher (mpirun, torchrun, srun): the
 * communicator comes from symcoll_comm_create_from_env, fn runs once, its failures return. */
int th_run(const th_launch_t *l, th_rank_fn fn, void *arg);
/* Takes argv[*i] into l when it is --backend B, --mode M or --ranks N (and *i past its value);
 * false for any other argument, which the test's own parser then reads. */
bool th_launch_arg(th_launch_t *l, int argc, char **argv, int *i);
/* True, having printed why, when `backend` is "cuda" and this build or machine has no GPU: the
 * test then exits with TH_SKIP. */
bool th_skip_without_gpu(const char *backend);
/* The seed of a test's data: TH_SEED, else the same on every rank (fork: taken before the
 * ranks start; env mode: from the launcher's job id). th_set_mode tells it the mode first. */
uint32_t th_seed(void);
/* The tests' draws: xorshift32 from a state th_rng_start makes of a seed, one to one (but for
 * the seed that maps to 0, where xorshift cannot start), so seeds that differ in one bit give
 * different streams. */
uint32_t th_rng_start(uint32_t seed);
uint32_t th_rng_next(uint32_t *state);
void th_set_mode(const char *mode);
bool th_launched_by_env(void);
/* A job id unique to this process and call. */
void th_job_id(char *buf, size_t n, const char *tag);

double th_now(void);
/* Sets CUDA_DEVICE_MAX_CONNECTIONS=32 unless set: call before the process starts CUDA. */
void th_cuda_env(void);
/* Leftovers of ours: entries in /dev/shm and sockets named "symcoll." in the abstract namespace. */
int th_leftovers(const char *job_id);
#endif
