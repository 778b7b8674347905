/* What core hands a transport: the resolved call (symcoll__coll_args_t, the GEMM operations' arguments), the
 * out-of-band exchange, and the transport's table of functions. Included through internal.h. */
#ifndef SYMCOLL_TRANSPORT_H
#define SYMCOLL_TRANSPORT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symcoll.h"

#ifndef SYMCOLL_HIDDEN
#define SYMCOLL_HIDDEN __attribute__((visibility("hidden")))
#endif

struct symcoll_mem;

typedef struct symcoll__coll_args {
  symcoll_coll_t coll;
  const void *send;
  void *recv;
  size_t count; /* the call's count: all_reduce count, all_gather sendcount, reduce_scatter recvcount */
  symcoll_dtype_t dtype;
  symcoll_op_t op;     /* SUM for all_gather */
  int root;            /* broadcast, reduce: the root rank; 0 for the others */
  symcoll_algo_t algo; /* never AUTO here: core resolved it */
  int blocks, threads;
  size_t round_bytes; /* 0: the transport's own */
  void *stream;
  /* Zero-copy: send lies in this symmetric allocation at this offset on every rank. */
  struct symcoll_mem *send_mem;
  size_t send_off;
  /* recv lies in a symmetric allocation at this offset on every rank (push can store straight
   * into peers'; a reduction's input read in place there, where the protocol allows it). */
  struct symcoll_mem *recv_mem;
  size_t recv_off;
  /* The call's identity (collective, count, dtype, op, algorithm), never 0: peers compare it
   * where they meet, so that ranks in different calls never pair up (symcoll.h). */
  uint32_t sig;
} symcoll__coll_args_t;

/* A local GEMM, row-major: c[m x n] = a[m x k] @ b[k x n], leading dimensions in elements;
 * fp32 accumulation; enqueued on stream (GPU) or done now (CPU). */
typedef struct symcoll__gemm {
  const void *a, *b;
  void *c;
  size_t m, n, k, lda, ldb, ldc;
  symcoll_dtype_t dtype;
  void *stream;
} symcoll__gemm_t;

/* A collective fused with a GEMM (symcoll.h), as core hands it to a transport's matmul entry
 * (the OVERLAP algorithm; core runs SEQUENTIAL itself from coll and gemm). */
typedef struct symcoll__matmul_args {
  symcoll_coll_t coll;  /* ALL_GATHER_MATMUL or MATMUL_REDUCE_SCATTER */
  const void *a, *b;    /* all_gather_matmul: a is the shard */
  void *c;              /* all_gather_matmul: the whole C; matmul_reduce_scatter: the shard */
  void *a_out;          /* all_gather_matmul: the gathered A, or NULL */
  size_t m_shard, n, k; /* rows per rank (matmul_reduce_scatter: of the output), columns, depth */
  symcoll_dtype_t dtype;
  symcoll_algo_t algo;
  void *stream;
  struct symcoll_mem *a_mem; /* all_gather_matmul: the shard lies in this allocation... */
  size_t a_off;              /* ...at this offset, on every rank (zero-copy) */
  uint32_t sig;
} symcoll__matmul_args_t;

/* symcoll_all_reduce_rmsnorm and symcoll_reduce_scatter_rmsnorm as core hands them to a
 * transport's norm entry (symcoll.h). algo is ONE_SHOT, TWO_SHOT or LAMPORT (all_reduce_rmsnorm),
 * PULL (reduce_scatter_rmsnorm: x holds nranks x rows rows, this rank's results are rows
 * rank x rows ...), or SEQUENTIAL, for either: then x already holds the sum over ranks (rows
 * rows) and the call is the local add + norm pass alone, with no peer involved (core runs the
 * all-reduce or reduce-scatter before it, and uses it alone for one rank). */
typedef struct symcoll__norm_args {
  symcoll_coll_t coll;               /* SYMCOLL_COLL_ALL_REDUCE_RMSNORM or ..._REDUCE_SCATTER_RMSNORM */
  const void *x, *residual, *weight; /* residual may be NULL */
  void *out, *residual_out;          /* either may be NULL (out only with fp8_out) */
  void *fp8_out;                     /* NULL, or e4m3 rows x hidden with... */
  const float *fp8_scale;            /* ...a static scale, or */
  float *fp8_row_scales;             /* ...per-row scales written */
  float *fp8_scale_out;              /* static: NULL, or where the scale used is written too */
  float eps;
  size_t rows, hidden;
  symcoll_dtype_t dtype;
  symcoll_algo_t algo;
  bool from_table; /* algo is the tuning table's pick: the transport may decline it for this shape
                      (SYMCOLL_ERR_UNSUPPORTED, decided alike on every rank), and core runs the chain */
  void *stream;
  struct symcoll_mem *x_mem; /* x lies in this symmetric allocation at x_off on every rank */
  size_t x_off;
  uint32_t sig;
} symcoll__norm_args_t;

/* Out-of-band exchange among the ranks of a communicator (bootstrap.c, team.c). */
typedef struct symcoll__oob {
  symcoll_status_t (*allgather)(symcoll_comm_t comm, const void *in, void *out, size_t bytes);
  /* Rank 0's `bytes` at buf reach every rank's buf. */
  symcoll_status_t (*bcast)(symcoll_comm_t comm, void *buf, size_t bytes);
  /* fds_p[r] = rank r's fd as a descriptor valid in this process (own rank: a dup). */
  symcoll_status_t (*exchange_fd)(symcoll_comm_t comm, int my_fd, int *fds_p);
  void (*destroy)(symcoll_comm_t comm);
} symcoll__oob_t;

/* A transport: one table of function pointers, filled in by src/host or src/cuda. */
typedef struct symcoll__transport {
  const char *name;
  symcoll_status_t (*comm_init)(symcoll_comm_t comm);
  void (*comm_fini)(symcoll_comm_t comm);
  symcoll_status_t (*mem_alloc)(symcoll_comm_t comm, size_t bytes, struct symcoll_mem *mem);
  void (*mem_free)(struct symcoll_mem *mem);
  symcoll_status_t (*mem_device_view)(struct symcoll_mem *mem, symcoll_device_view_t *view);
  /* Optional (NULL: UNSUPPORTED). Collective: makes the caller's [ptr, ptr + bytes) symmetric
   * (mem->ptrs filled, mem->registered set); mem_free then undoes it on this rank alone. Every
   * rank returns the same status: a rank whose memory cannot be shared makes all refuse. */
  symcoll_status_t (*mem_register)(symcoll_comm_t comm, void *ptr, size_t bytes, struct symcoll_mem *mem);
  /* Optional: memory of `device` that mem_register can later map for peers (no communicator);
   * local_free answers INVALID_ARGUMENT for a pointer local_alloc did not return. */
  symcoll_status_t (*local_alloc)(int device, size_t bytes, void **p);
  symcoll_status_t (*local_free)(void *p);
  /* Runs (CPU) or enqueues (GPU) one collective; args->coll says which. */
  symcoll_status_t (*coll)(symcoll_comm_t comm, const symcoll__coll_args_t *args);
  /* dst = src, enqueued on stream (GPU) or done now (CPU): a one-rank collective. */
  symcoll_status_t (*copy)(symcoll_comm_t comm, void *dst, const void *src, size_t bytes, void *stream);
  /* Optional (NULL: a scale in a call's options is UNSUPPORTED): dst[i] = src[i] x scale, the
   * product of SYMCOLL_PROD (the dtype's combine type, one rounding), enqueued on stream (GPU)
   * or done now (CPU); on_device: scale is GPU memory, read when the work runs. */
  symcoll_status_t (*scale)(symcoll_comm_t comm, void *dst, const void *src, size_t count, symcoll_dtype_t dtype,
                            const void *scale, bool on_device, void *stream);
  symcoll_status_t (*check)(symcoll_comm_t comm);
  /* Optional. Collective, once every rank holds rank 0's tuning table: set up what the
   * table asks for (CUDA: an NCCL communicator). Without it, NCCL rows are dropped. */
  symcoll_status_t (*tune_ready)(symcoll_comm_t comm);
  /* Whether this transport runs `algo` for `coll` (core has already checked that the
   * algorithm belongs to the collective). */
  bool (*has_algo)(symcoll_comm_t comm, symcoll_coll_t coll, symcoll_algo_t algo);
  /* Optional (NULL: the GEMM operations are UNSUPPORTED). Whether the GEMM library could be
   * opened (it is opened, and set up for comm, on first use); core calls the other three only
   * once has_gemm said yes: a local GEMM; scratch memory of the call's lifetime, ordered on
   * stream (GPU: stream-ordered allocation, so capturable); the OVERLAP algorithm of the fused
   * operations. */
  symcoll_status_t (*gemm)(symcoll_comm_t comm, const symcoll__gemm_t *g);
  bool (*has_gemm)(symcoll_comm_t comm);
  symcoll_status_t (*scratch_alloc)(symcoll_comm_t comm, size_t bytes, void *stream, void **p);
  void (*scratch_free)(symcoll_comm_t comm, void *p, void *stream);
  symcoll_status_t (*matmul)(symcoll_comm_t comm, const symcoll__matmul_args_t *a);
  /* Optional (NULL: symcoll_all_reduce_rmsnorm is UNSUPPORTED): the fused all-reduce + add +
   * RMSNorm, or its local pass (algo SEQUENTIAL); has_algo says which algorithms it runs. */
  symcoll_status_t (*norm)(symcoll_comm_t comm, const symcoll__norm_args_t *a);
  /* Optional: the machine class tuning rows may name after the backend ("host:avx2"). */
  const char *(*tune_class)(symcoll_comm_t comm);
  /* Makes work already enqueued give up (GPU: raise the device error word with `status`).
   * Called from any thread: by symcoll_comm_abort, and by the peer monitor when a peer dies. */
  void (*abort)(symcoll_comm_t comm, symcoll_status_t status);
} symcoll__transport_t;

extern SYMCOLL_HIDDEN const symcoll__transport_t symcoll__host_transport;
#ifdef SYMCOLL_HAVE_CUDA
extern SYMCOLL_HIDDEN const symcoll__transport_t symcoll__cuda_transport;
#endif

#endif /* SYMCOLL_TRANSPORT_H */
