/* symcoll-bench: one harness (bench.c), one file per collective (coll_allreduce.c,
 * coll_allgather.c, coll_reducescatter.c, coll_broadcast.c, coll_reduce.c, coll_alltoall.c)
 * and per peer (peer_nccl.c, peer_mpi.c), in the shape of nccl-tests. */
#ifndef SYMCOLL_BENCH_H
#define SYMCOLL_BENCH_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <symcoll.h>

#define MAX_COLS 16

typedef struct bctx {
  symcoll_comm_t comm; /* the communicator under test */
  symcoll_comm_t ctl;  /* a CPU communicator of the same ranks: barriers, results, ids */
  symcoll_mem_t ctl_mem;
  int rank, nranks, device; /* device -1: CPU */
  bool gpu;
  bool inplace;
  symcoll_op_t op; /* the run's op (-o) and root (--root), for peers' set-up */
  int root;
  void *stream;
} bctx_t;

/* What differs between collectives (nccl-tests' per-collective table). `bytes` is nccl-tests'
 * size: the larger buffer of the call (all_reduce, broadcast, reduce: either; all_gather: the
 * output; reduce_scatter, all_to_all: the input); `count` the call's count argument. */
typedef struct bench_coll {
  symcoll_coll_t kind;
  bool has_op;             /* all_gather, broadcast, all_to_all combine nothing */
  bool has_root;           /* broadcast, reduce: --root picks it */
  double busbw_factor_num; /* busbw = algbw * num * (n - 1) / n: 2 for all_reduce, else 1... */
  bool busbw_whole;        /* ...or algbw * num (broadcast, reduce: nccl-tests) */
  const char *size_is;     /* what `bytes` is, for the table's header */
  size_t (*count_of)(size_t bytes, size_t es, int n);
  size_t (*send_elems)(size_t count, int n);
  size_t (*recv_elems)(size_t count, int n);
  /* Fills this rank's input (send_elems) for op (exact_fill_op: PROD and AVG draw their own). */
  void (*fill)(void *send, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int rank, int n, uint32_t seed);
  /* The output (recv_elems) this rank must see after one call on its fill; in_place: recv
   * held this rank's input before the call (what the call does not write keeps it), else the
   * poison (EXACT_POISON bytes). */
  void (*expect)(void *want, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int rank, int n, int root,
                 bool in_place, uint32_t seed);
  symcoll_status_t (*run)(symcoll_comm_t comm, const void *send, void *recv, size_t count, symcoll_dtype_t dt,
                          symcoll_op_t op, int root, void *stream, const symcoll_coll_opts_t *opts);
} bench_coll_t;

extern const bench_coll_t bench_all_reduce, bench_all_gather, bench_reduce_scatter, bench_broadcast, bench_reduce,
    bench_all_to_all;

typedef struct column column_t;
struct column {
  const char *name;
  bool is_symcoll;  /* counts for "best symcoll column" */
  bool is_baseline; /* the peer speedups are measured against */
  symcoll_algo_t algo;
  int blocks, threads; /* GPU launch shape of a symcoll column ("oneshot@8:256"); 0 = tuned */
  size_t round_bytes;  /* and its round ("oneshot@0:0:4194304"); 0 = tuned */
  char label[32];
  /* init: 0 = usable; else column is n/a with `na` set. Collective over ranks. */
  int (*init)(bctx_t *c, column_t *col, const bench_coll_t *coll);
  /* One call; 0 on success, else a nonzero code and `err` describes it. */
  int (*run)(bctx_t *c, column_t *col, const bench_coll_t *coll, const void *send, void *recv, size_t count,
             symcoll_dtype_t dt, symcoll_op_t op);
  void (*fini)(bctx_t *c, column_t *col);
  void *state;
  char na[160];
  char err[512];
};

/* Broadcast of a small blob from rank 0 through the control communicator. */
void bench_barrier(bctx_t *c);
void bench_bcast(bctx_t *c, void *buf, size_t bytes);
/* Ends the run on a failed call: prints what failed on this rank, makes every communicator of
 * this rank give up, and exits non-zero (peers then see this rank gone and end too). */
_Noreturn void bench_fail(bctx_t *c, const char *what, const char *why);

/* Peers: fill *col and return 1, or return 0 when the peer is not built in. */
int peer_nccl_column(column_t *col);
int peer_mpi_column(column_t *col);
int peer_mpi_active(void); /* launched under mpirun with MPI support built in */
void peer_mpi_init(int *argc, char ***argv);
void peer_mpi_finalize(void);
_Noreturn void peer_mpi_abort(int code);

/* The GEMM operations (coll_matmul.c): a table over shapes instead of sizes. */
typedef struct {
  bool all_gather; /* all_gather_matmul, else matmul_reduce_scatter */
  symcoll_dtype_t dtype;
  const char *shapes; /* helion, kraken, all, small, or M,N,K */
  int reps;
  const char *csv, *mode, *machine;
} bench_mm_opts_t;
/* Runs the table on this rank; 0, or non-zero when a result was wrong. */
int bench_matmul_rank(bctx_t *c, const bench_mm_opts_t *o);

/* bench_launch.c: the ranks of one run, each running body (0: all right; the exit code). */
typedef struct {
  const char *backend, *mode; /* "cuda" or "host"; "thread" or "process" */
  int nranks, ngpus;          /* ranks go to GPUs round robin */
  bool bind, inplace;         /* pin rank r to the r-th allowed CPU; in-place calls */
  int (*body)(bctx_t *c);
} bench_launch_t;
int bench_launch(const bench_launch_t *l);
/* Whether this process is one rank of a job spanning nodes (or of emulated nodes). */
bool bench_across_nodes(void);

int bench_merge(int nfiles, char **files, const char *out_csv, const char *plot, const char *title);
int bench_plot(const char *csv, const char *png, const char *title);
/* A failed call's status and why (symcoll_last_error), for error lines; per thread. */
static inline const char *bench_status(symcoll_status_t s) {
  static __thread char buf[1280];
  const char *why = symcoll_last_error();
  snprintf(buf, sizeof buf, why && *why ? "%s (%s)" : "%s", symcoll_status_string(s), why);
  return buf;
}
#endif
