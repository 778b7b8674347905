/* symcoll-bench: one harness (bench.c), one file per collective (allreduce.c) and per peer
 * (peer_nccl.c, peer_mpi.c), in the shape of nccl-tests. */
#ifndef SYMCOLL_BENCH_H
#define SYMCOLL_BENCH_H
#include <stdbool.h>
#include <stddef.h>

#include <symcoll.h>

#define MAX_COLS 12

typedef struct bctx {
  symcoll_comm_t comm; /* the communicator under test */
  symcoll_comm_t ctl;  /* a CPU communicator of the same ranks: barriers, results, ids */
  symcoll_mem_t ctl_mem;
  int rank, nranks, device; /* device -1: CPU */
  bool gpu;
  void *stream;
} bctx_t;

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
  int (*init)(bctx_t *c, column_t *col);
  int (*run)(bctx_t *c, column_t *col, const void *send, void *recv, size_t count,
             symcoll_dtype_t dt, symcoll_op_t op);
  void (*fini)(bctx_t *c, column_t *col);
  void *state;
  char na[160];
};

/* Broadcast of a small blob from rank 0 through the control communicator. */
void bench_bcast(bctx_t *c, void *buf, size_t bytes);
void bench_barrier(bctx_t *c);

/* Peers: fill *col and return 1, or return 0 when the peer is not built in. */
int peer_nccl_column(column_t *col);
int peer_mpi_column(column_t *col);
int peer_mpi_active(void); /* launched under mpirun with MPI support built in */
void peer_mpi_init(int *argc, char ***argv);
void peer_mpi_finalize(void);
#endif
