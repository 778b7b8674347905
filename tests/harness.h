/* Shared test harness: launching ranks (processes or threads), exact-result data, buffers
 * on the host or on a GPU behind one small table of operations. */
#ifndef SYMCOLL_TEST_HARNESS_H
#define SYMCOLL_TEST_HARNESS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <symcoll.h>

#define TH_SKIP 77 /* CTest SKIP_RETURN_CODE */

/* Where a rank's test buffers live. */
typedef struct th_buf_ops {
  const char *name;
  void *(*alloc)(size_t bytes);
  void (*free)(void *p);
  void (*to_dev)(void *dst, const void *src, size_t bytes);
  void (*to_host)(void *dst, const void *src, size_t bytes);
  void *(*stream)(void);   /* the stream collectives go on (NULL on the host) */
  void (*sync)(void);       /* waits for the stream */
  int (*bind)(int device);  /* makes device current in this thread; 0 on success */
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
  int timeout_ms;      /* communicator timeout; 0 = default */
  int wall_s;          /* the whole run is killed after this */
} th_launch_t;

/* Runs fn on every rank; returns the total failures, or -1 if ranks crashed or hung.
 * Devices: all ranks on GPU 0 when there is one GPU, else rank % ngpus. */
int th_run(const th_launch_t *l, th_rank_fn fn, void *arg);
/* A job id unique to this process and call. */
void th_job_id(char *buf, size_t n, const char *tag);

/* Exact inputs: small integers (fp8: -1, 0, 1; int8: -4..4; unsigned types: 0..7; int64:
 * multiples of 2^32), so every order of combining gives the same result in every dtype, and
 * no result of up to 16 ranks has TH_POISON's bits. Element i of rank r's input is
 * th_value(dt, r, i, seed). */
#define TH_POISON 0xa5 /* byte written over outputs before a call */
double th_value(symcoll_dtype_t dt, int rank, size_t i, uint32_t seed);
/* host[0..count) = rank's elements first .. first + count. */
void th_fill_range(void *host, symcoll_dtype_t dt, size_t first, size_t count, int rank, uint32_t seed);
void th_fill(void *host, symcoll_dtype_t dt, size_t count, int rank, uint32_t seed);
/* host[0..count) = op over nranks ranks of elements first .. first + count. */
void th_expect_range(void *host, symcoll_dtype_t dt, symcoll_op_t op, size_t first, size_t count, int nranks,
                     uint32_t seed);
void th_expect(void *host, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int nranks,
               uint32_t seed);
void th_store(void *host, symcoll_dtype_t dt, size_t i, double v);
double th_load(const void *host, symcoll_dtype_t dt, size_t i);
double th_now(void);
/* Sets CUDA_DEVICE_MAX_CONNECTIONS=32 unless set: call before the process starts CUDA. */
void th_cuda_env(void);
/* Leftovers of ours: entries in /dev/shm and sockets named "symcoll." in the abstract namespace. */
int th_leftovers(const char *job_id);
#endif
