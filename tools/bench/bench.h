/* symcoll-bench and symcoll-tune: one harness, in the shape of nccl-tests. Each program has its
 * main (bench_main.c, tune_main.c: its defaults); the harness is the command line (cli.c), the
 * run on each rank (bench.c), the columns, their calls and their timing (timing.c), the table,
 * CSV, JSON and tuning-table output (report.c) and the ranks' launch (bench_launch.c); one file
 * per collective (coll_allreduce.c, coll_allgather.c, coll_reducescatter.c, coll_broadcast.c,
 * coll_reduce.c, coll_alltoall.c, coll_matmul.c, coll_rmsnorm.c; the GPU barriers' round latency:
 * coll_barrier.c, barrier_kernels.cu) and per peer (peer_nccl.c, peer_mpi.c). */
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

/* The fused operations (coll_matmul.c, coll_rmsnorm.c): a table over shapes instead of sizes. */
typedef struct {
  bool all_gather; /* all_gather_matmul, else matmul_reduce_scatter */
  symcoll_dtype_t dtype;
  const char *shapes; /* helion, kraken, all, small, or M,N,K */
  const char *fp8;    /* all_reduce_rmsnorm's quantised output: NULL, "static" or "rows" */
  bool scatter;       /* the norm's reduce-scatter form (reduce_scatter_rmsnorm) */
  int reps;
  int calls; /* the norm table on GPU ranks: calls a graph (-n) */
  const char *csv, *mode, *machine;
  const char *algos; /* the norms' fused columns to run (--algo), NULL: all of them */
} bench_mm_opts_t;
/* Runs the table on this rank: 0; 2 where its options are refused (said on rank 0); 3 where a
 * result was wrong. */
int bench_matmul_rank(bctx_t *c, const bench_mm_opts_t *o);
/* all_reduce_rmsnorm and reduce_scatter_rmsnorm (coll_rmsnorm.c): the same options (all_gather
 * unused), rows x hidden shapes. */
int bench_norm_rank(bctx_t *c, const bench_mm_opts_t *o);
/* --coll barrier (coll_barrier.c): a GPU barrier's round latency per grid, the collectives'
 * posted-epoch barrier against the device API's CAS barrier; reps and csv of the same options. */
int bench_barrier_rank(bctx_t *c, const bench_mm_opts_t *o);

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

/* ---- the command line (cli.c) -------------------------------------------------------------- */

/* The run's options: set by the command line before any rank starts, only read by the ranks
 * (forked ones get a copy). */
typedef struct {
  size_t min_bytes, max_bytes, step;
  const bench_coll_t *coll;
  symcoll_dtype_t dtype;
  symcoll_op_t op;
  int root; /* broadcast, reduce */
  int iters, warmup, reps;
  int graph;
  bool enqueue; /* GPU: time the host's issue of -n eager calls, not the GPU's work */
  const char *backend, *mode;
  int nranks;
  char algos[256], peers[128];
  const char *csv, *json, *plot;
  bool inplace;
  bool send_symmetric; /* inputs in a symcoll allocation: symcoll's zero-copy path */
  bool bind;           /* pin rank r to the r-th allowed CPU */
  const char *tune;    /* write the fastest symcoll column per size as a tuning table */
  int mm; /* 1: all_gather_matmul, 2: matmul_reduce_scatter (coll_matmul.c), 3: all_reduce_rmsnorm (coll_rmsnorm.c),
            4: barrier (coll_barrier.c), 5: reduce_scatter_rmsnorm (coll_rmsnorm.c) */
  const char *shapes;
  const char *fp8; /* --fp8 static|rows (all_reduce_rmsnorm) */
  bool reps_set;
  bool algos_set; /* --algo given (the fused norms' tables run only the columns it names) */
} bench_opts_t;
extern bench_opts_t bench_opts;

/* What the command line says beside bench_opts, and what it found on this machine. */
typedef struct {
  char **merge;
  const char *title;
  int nmerge, warmup_set, reps_set, algos_set, peers_set, range_set;
  bool gpu; /* --backend cuda */
  int ngpu; /* GPUs on this machine */
} bench_args_t;

/* MPI peers started, the machine probed, bench_opts at their defaults, then the command line;
 * the collective's default columns. -1 to go on, else the exit code (--help, --env, --merge,
 * bad usage). A program's own defaults go between this and bench_cli_finish. */
int bench_cli_parse(int *argc, char ***argv, bench_args_t *x);
/* The options checked and completed for the backend (CPU: no graphs, more warm-up and reps;
 * GEMM operations' shapes); -1 to go on, else the exit code (bad usage, 77: no GPU). */
int bench_cli_finish(const char *argv0, const bench_args_t *x);

static inline const char *bench_coll_label(void) {
  return symcoll_coll_name(bench_opts.coll->kind);
}

/* ---- the run (bench.c) -------------------------------------------------------------------- */

/* The ranks of the run, each timing every size (or the GEMM operations' shapes), then the
 * plot; the exit code (0 done, 3 a wrong result, 4 a failed call). */
int bench_run(const bench_args_t *x);

/* ---- columns, calls and timing (timing.c) ------------------------------------------------- */

typedef struct {
  int ncols;
  column_t cols[MAX_COLS];
} bench_table_t;

double bench_now(void); /* the monotonic clock, in seconds */
/* The symcoll columns of --algo, then the peers of --peers that are built in; exits 2 on a
 * bad name. */
void bench_build_columns(bench_table_t *t);
/* Buffers on the device under test (the GPU of a GPU rank, else host memory). */
void *bench_dev_alloc(bctx_t *c, size_t bytes);
void bench_dev_free(bctx_t *c, void *p);
/* dst = src, bytes, from the host to the device under test (to_dev) or back; done on return. */
void bench_dev_copy(bctx_t *c, void *dst, const void *src, size_t bytes, int to_dev);
/* qsort's comparison of doubles. */
int bench_cmp_double(const void *a, const void *b);
/* Elements of the column's output that differ from `want` after one call on the exact-result
 * input of `seed` (h: host staging of send and recv elements). */
double bench_check_column(bctx_t *c, column_t *col, void *send, void *recv, size_t count, char *h, const char *want,
                          uint32_t seed);
/* Median microseconds per call of every usable column at `count` on this rank (NAN: n/a). */
void bench_time_columns(bctx_t *c, column_t *cols, int ncols, void *send, void *recv, size_t count, double *us);

/* ---- the output (report.c) ---------------------------------------------------------------- */

/* GPU 0's name and the CPU model, kept for titles; the number of GPUs here. */
int bench_report_probe(void);
/* This machine for titles: GPU 0's name on GPU runs, else the CPU model. */
const char *bench_report_machine(bool gpu);
void bench_report_plot_title(char *title, size_t n, bool gpu);

typedef struct {
  FILE *csv, *json; /* rank 0's --csv and --json files; NULL when not asked for */
  int json_rows;
  double t0; /* when the first size began (progress) */
} bench_report_t;
/* Rank 0: the run's header lines, the table's header, the CSV and JSON files opened; every
 * rank: the clock of the progress line started. */
void bench_report_open(bctx_t *c, const bench_table_t *t, bench_report_t *r);
/* Rank 0: one size's row (slow: the slowest rank's time per column, -1: n/a; wrong: elements
 * wrong over all ranks and columns) in the table, the CSV, the JSON and the tuning rows. */
void bench_report_row(bctx_t *c, const bench_table_t *t, bench_report_t *r, size_t bytes, size_t count,
                      const double *slow, double wrong);
/* The files closed; rank 0 writes --tune's table. */
void bench_report_close(bctx_t *c, const bench_table_t *t, bench_report_t *r);

/* merge.c: tables of one run joined (--merge), a CSV plotted (--plot). */
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
