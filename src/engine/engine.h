/*
 * Engines between nodes (hier.c): what a communicator that spans hosts hands the part of a
 * collective that crosses them to. symcoll has no network of its own: the engines are NCCL
 * (GPU ranks; src/cuda/nccl.c), MPI (CPU ranks; src/engine/mpi.c, built as libsymcoll_mpi and
 * opened at run time) and, where the "nodes" are emulated on one host, a symcoll communicator.
 * This header is also the interface of libsymcoll_mpi: keep it free of transport detail.
 */
#ifndef SYMCOLL_ENGINE_H
#define SYMCOLL_ENGINE_H
#include <stddef.h>

#include "symcoll.h"

/* Bumped whenever a struct below changes: libsymcoll refuses an engine library of another. */
#define SYMCOLL_ENGINE_ABI 2 /* 2: coll takes a root; env lends the fp32 conversions */

typedef struct symcoll__engine {
  const char *name; /* "mpi", "nccl", "symcoll" */
  void *ctx;
  int rank, nranks; /* among this engine's ranks */
  /* One collective with symcoll's semantics (counts per rank, NCCL's in-place rules, rank
   * order, every op: AVG is the sum over this engine's ranks divided once by their number);
   * root: broadcast's and reduce's root among this engine's ranks (0 for the others), where
   * only the root's send (broadcast) or recv (reduce) is used and the others' may be NULL. GPU
   * engines enqueue on stream, CPU engines return when it is done or the wait bound / an abort
   * ends it. */
  symcoll_status_t (*coll)(void *ctx, symcoll_coll_t coll, const void *send, void *recv, size_t count,
                           symcoll_dtype_t dtype, symcoll_op_t op, int root, void *stream);
  /* Host bytes from every rank, in rank order (set-up only). Optional. */
  symcoll_status_t (*allgather)(void *ctx, const void *send, void *recv, size_t bytes);
  /* A new engine over the ranks passing the same color, ordered by key (MPI_Comm_split).
   * Collective. Optional. */
  symcoll_status_t (*split)(void *ctx, int color, int key, struct symcoll__engine *out);
  /* The engine's asynchronous error, SYMCOLL_OK if none. Optional. */
  symcoll_status_t (*check)(void *ctx);
  /* From any thread: make waits of this engine end (they return ABORTED). */
  void (*abort)(void *ctx);
  void (*destroy)(void *ctx);
} symcoll__engine_t;

/* What libsymcoll lends an engine library. */
typedef struct symcoll__engine_env {
  int abi;        /* SYMCOLL_ENGINE_ABI */
  int timeout_ms; /* bound on every wait */
  /* dst[i] = op(srcs[0][i], srcs[1][i], ...) with symcoll's accumulation (the CPU reduce loops):
   * for the types an engine does not reduce itself (fp16, bf16, fp8). */
  void (*reduce)(symcoll_dtype_t dtype, symcoll_op_t op, void *dst, const void *const *srcs, int nsrc, size_t n);
  /* symcoll's conversions between those types and fp32, their accumulation type: dst[i] =
   * src[i] widened (exact), and dst[i] = src[i] rounded to nearest even (fp8 saturating). An
   * engine's AVG of those types sums in fp32 and rounds once, after the division. */
  void (*to_f32)(symcoll_dtype_t dtype, float *dst, const void *src, size_t n);
  void (*from_f32)(symcoll_dtype_t dtype, void *dst, const float *src, size_t n);
  /* A line in symcoll's log (level: 1 WARN, 2 INFO). */
  void (*log)(int level, const char *msg);
} symcoll__engine_env_t;

/* libsymcoll_mpi's entry (symbol SYMCOLL_MPI_OPEN): an engine over the MPI communicator at
 * mpi_comm (the address of an MPI_Comm; NULL: MPI_COMM_WORLD, initialising MPI if nobody
 * has). The engine's rank and size are the rank and size in that communicator. */
typedef symcoll_status_t (*symcoll__mpi_open_fn)(const symcoll__engine_env_t *env, const void *mpi_comm,
                                                 symcoll__engine_t *out);
#define SYMCOLL_MPI_OPEN "symcoll__mpi_engine_open"
#endif
