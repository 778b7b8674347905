/*
 * symcoll-bench: latency of a collective (all_reduce, all_gather, reduce_scatter, broadcast, reduce,
 * all_to_all; one file each, coll_*.c) for symcoll's
 * algorithms and for peers, side by side, in the same processes and the same run, with one
 * timing method for every column:
 * GPU: CUDA-graph replays of -n calls timed with device events (median of -r replays);
 * CPU: -n back-to-back calls after a barrier, timed with the monotonic clock (median of -r).
 * Every column's result is checked against exact-result inputs (#wrong). Any call that fails
 * ends the run: the rank says which call and why, its communicators give up, and it exits
 * non-zero; its peers then lose it and end the same way (no row is printed for that size).
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef SYMCOLL_BENCH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "bench.h"
#include "exact.h"
#include "launch.h"

typedef struct {
  size_t min_bytes, max_bytes, step;
  const bench_coll_t *coll;
  symcoll_dtype_t dtype;
  symcoll_op_t op;
  int root; /* broadcast, reduce */
  int iters, warmup, reps;
  int graph;
  const char *backend, *mode;
  int nranks;
  char algos[256], peers[128];
  const char *csv, *json, *plot;
  bool inplace;
  bool send_symmetric; /* inputs in a symcoll allocation: symcoll's zero-copy path */
  bool bind;           /* pin rank r to the r-th allowed CPU */
  const char *tune;    /* write the fastest symcoll column per size as a tuning table */
  int mm;              /* 1: all_gather_matmul, 2: matmul_reduce_scatter (coll_matmul.c) */
  const char *shapes;
  bool reps_set;
} opts_t;
static opts_t O;
static int ngpus;

/* ---- utilities -------------------------------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t parse_size(const char *s) {
  char *end;
  double v = strtod(s, &end);
  switch (*end) {
    case 'k':
    case 'K':
      v *= 1024;
      break;
    case 'm':
    case 'M':
      v *= 1024 * 1024;
      break;
    case 'g':
    case 'G':
      v *= 1024.0 * 1024 * 1024;
      break;
  }
  return (size_t)v;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static const char *coll_label(void) {
  return symcoll_coll_name(O.coll->kind);
}

_Noreturn void bench_fail(bctx_t *c, const char *what, const char *why) {
  fprintf(stderr, "symcoll-bench: rank %d: %s: %s; ending the run\n", c->rank, what, why);
  fflush(NULL);
  if (c->comm) symcoll_comm_abort(c->comm);
  if (c->ctl) symcoll_comm_abort(c->ctl);
  if (peer_mpi_active()) peer_mpi_abort(4);
  _exit(4); /* process mode: peers see this rank gone; thread mode: the whole run ends */
}

/* Control communicator helpers: a float all-reduce doubles as a barrier. */
void bench_barrier(bctx_t *c) {
  float x = 0;
  symcoll_status_t s = symcoll_all_reduce(c->ctl, &x, &x, 1, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL);
  if (s != SYMCOLL_OK) bench_fail(c, "control barrier", bench_status(s));
}
static void ctl_reduce(bctx_t *c, double *v, int n, symcoll_op_t op) {
  double f[MAX_COLS * 2];
  memcpy(f, v, sizeof(double) * (size_t)n);
  symcoll_status_t s = symcoll_all_reduce(c->ctl, f, v, (size_t)n, SYMCOLL_FLOAT64, op, NULL);
  if (s != SYMCOLL_OK) bench_fail(c, "control all_reduce", bench_status(s));
}
/* Rank 0's bytes to every rank: an all_gather, so that it also works where the control
 * communicator spans nodes (its symmetric memory is node-local there). */
void bench_bcast(bctx_t *c, void *buf, size_t bytes) {
  char *all = malloc(bytes * (size_t)c->nranks);
  if (!all) bench_fail(c, "control broadcast", "out of memory");
  symcoll_status_t s = symcoll_all_gather(c->ctl, buf, all, bytes, SYMCOLL_UINT8, NULL);
  if (s != SYMCOLL_OK) bench_fail(c, "control broadcast", bench_status(s));
  memcpy(buf, all, bytes);
  free(all);
}

/* ---- buffers on the device under test --------------------------------------------------- */

static void *dev_alloc(bctx_t *c, size_t b) {
#ifdef SYMCOLL_BENCH_CUDA
  if (c->gpu) {
    void *p = NULL;
    return cudaMalloc(&p, b) == cudaSuccess ? p : NULL;
  }
#endif
  (void)c;
  void *p = NULL;
  return posix_memalign(&p, 64, b) == 0 ? p : NULL;
}
static void dev_free(bctx_t *c, void *p) {
#ifdef SYMCOLL_BENCH_CUDA
  if (c->gpu) {
    cudaFree(p);
    return;
  }
#endif
  (void)c;
  free(p);
}
static void copy(bctx_t *c, void *d, const void *s, size_t b, int to_dev) {
#ifdef SYMCOLL_BENCH_CUDA
  if (c->gpu) {
    cudaMemcpyAsync(d, s, b, to_dev ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, (cudaStream_t)c->stream);
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)c->stream);
    if (e != cudaSuccess) bench_fail(c, "copying test data", cudaGetErrorString(e));
    return;
  }
#endif
  (void)c;
  (void)to_dev;
  memcpy(d, s, b);
}

/* ---- symcoll columns ------------------------------------------------------------------- */

static int sc_init(bctx_t *c, column_t *col, const bench_coll_t *coll) {
  if (symcoll_coll_algo_supported(c->comm, coll->kind, col->algo) == SYMCOLL_OK) return 0;
  snprintf(col->na, sizeof col->na, "n/a: %s",
           col->algo == SYMCOLL_ALGO_NCCL ? "no NCCL communicator held (SYMCOLL_NCCL=1 and one rank per GPU)"
                                          : "not an algorithm of this collective on this communicator");
  return 1;
}
static int sc_run(bctx_t *c, column_t *col, const bench_coll_t *coll, const void *send, void *recv, size_t count,
                  symcoll_dtype_t dt, symcoll_op_t op) {
  symcoll_coll_opts_t o;
  symcoll_coll_opts_init(&o);
  o.algo = col->algo;
  o.blocks = col->blocks;
  o.threads = col->threads;
  o.round_bytes = col->round_bytes;
  symcoll_status_t s = coll->run(c->comm, send, recv, count, dt, op, c->root, c->stream, &o);
  if (s != SYMCOLL_OK) snprintf(col->err, sizeof col->err, "%.*s", (int)sizeof col->err - 1, bench_status(s));
  return s != SYMCOLL_OK;
}

/* One call of a column; a failure ends the run. */
static void call(bctx_t *c, column_t *col, const void *send, void *recv, size_t count) {
  if (col->run(c, col, O.coll, send, recv, count, O.dtype, O.op) == 0) return;
  char what[128];
  snprintf(what, sizeof what, "%s %s of count %zu (%s)", col->name, coll_label(), count, symcoll_dtype_name(O.dtype));
  bench_fail(c, what, col->err[0] ? col->err : "failed");
}

/* GPU: the communicator's asynchronous error after work completed (a kernel that gave up). */
static __attribute__((unused)) void check_comm(bctx_t *c, const char *when) {
  symcoll_status_t s = symcoll_comm_check(c->comm);
  if (s != SYMCOLL_OK) bench_fail(c, when, bench_status(s));
}

/* ---- timing -------------------------------------------------------------------------------- */

/* Median microseconds per call of every usable column at `count`, on this rank. The columns
 * take turns rep by rep, so a change in the machine's state (a noisy neighbour, a migration)
 * hits all of them alike instead of whichever column happened to be running. */
static void time_columns(bctx_t *c, column_t *cols, int ncols, void *send, void *recv, size_t count, double *us) {
  static __thread double t[MAX_COLS][256];
  int reps = O.reps > 256 ? 256 : O.reps;
#ifdef SYMCOLL_BENCH_CUDA
  cudaGraphExec_t exec[MAX_COLS] = {0};
  cudaEvent_t e0 = NULL, e1 = NULL;
  cudaStream_t s = (cudaStream_t)c->stream;
  if (c->gpu) {
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
  }
#endif
  /* Phases separated by host barriers: CUDA calls that set things up (graph instantiation,
   * destruction) may wait for the GPU, which must not be busy with a peer's kernel spinning
   * for ours (ranks sharing a GPU). */
  for (int k = 0; k < ncols; k++)
    for (int i = 0; cols[k].run && i < O.warmup; i++) call(c, &cols[k], send, recv, count);
#ifdef SYMCOLL_BENCH_CUDA
  if (c->gpu) {
    cudaStreamSynchronize(s);
    check_comm(c, "warm-up calls");
    bench_barrier(c);
    for (int k = 0; O.graph && k < ncols; k++) {
      if (!cols[k].run) continue;
      cudaGraph_t g;
      cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
      for (int i = 0; i < O.iters; i++) call(c, &cols[k], send, recv, count);
      if (cudaStreamEndCapture(s, &g) == cudaSuccess) {
        if (cudaGraphInstantiate(&exec[k], g, 0) != cudaSuccess) exec[k] = NULL;
        cudaGraphDestroy(g);
      }
    }
    bench_barrier(c);
    for (int k = 0; k < ncols; k++)
      if (exec[k]) cudaGraphLaunch(exec[k], s); /* warm replays */
    cudaStreamSynchronize(s);
    check_comm(c, "warm graph replays");
  }
#endif
  for (int r = 0; r < reps; r++)
    for (int k = 0; k < ncols; k++) {
      if (!cols[k].run) continue;
      bench_barrier(c);
#ifdef SYMCOLL_BENCH_CUDA
      if (c->gpu) {
        cudaEventRecord(e0, s);
        if (exec[k])
          cudaGraphLaunch(exec[k], s);
        else
          for (int i = 0; i < O.iters; i++) call(c, &cols[k], send, recv, count);
        cudaEventRecord(e1, s);
        cudaError_t e = cudaEventSynchronize(e1);
        if (e != cudaSuccess) bench_fail(c, cols[k].name, cudaGetErrorString(e));
        check_comm(c, cols[k].name); /* a kernel that gave up must not count as a fast one */
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        t[k][r] = 1e3 * ms / O.iters;
        continue;
      }
#endif
      double t0 = now_s();
      for (int i = 0; i < O.iters; i++) call(c, &cols[k], send, recv, count);
      t[k][r] = 1e6 * (now_s() - t0) / O.iters;
    }
  for (int k = 0; k < ncols; k++) {
    us[k] = NAN;
    if (!cols[k].run) continue;
    qsort(t[k], (size_t)reps, sizeof t[k][0], cmp_double);
    us[k] = t[k][reps / 2];
  }
#ifdef SYMCOLL_BENCH_CUDA
  if (c->gpu) {
    cudaStreamSynchronize(s);
    bench_barrier(c);
  }
  for (int k = 0; k < ncols; k++)
    if (exec[k]) cudaGraphExecDestroy(exec[k]);
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
#endif
}

/* Elements of the output that differ from the exact result (output poisoned first). */
static double check_column(bctx_t *c, column_t *col, void *send, void *recv, size_t count, char *h, char *want,
                           uint32_t seed) {
  const size_t es = symcoll_dtype_size(O.dtype);
  const size_t sn = O.coll->send_elems(count, c->nranks), rn = O.coll->recv_elems(count, c->nranks);
  O.coll->fill(h, O.dtype, O.op, count, c->rank, c->nranks, seed);
  memset(h + sn * es, EXACT_POISON, rn * es);
  /* Poison the output, then place the input (in place: inside it). */
  copy(c, recv, h + sn * es, rn * es, 1);
  copy(c, send, h, sn * es, 1);
  call(c, col, send, recv, count);
#ifdef SYMCOLL_BENCH_CUDA
  if (c->gpu) {
    cudaStreamSynchronize((cudaStream_t)c->stream);
    check_comm(c, col->name);
  }
#endif
  copy(c, h, recv, rn * es, 0);
  double wrong = 0;
  for (size_t i = 0; i < rn; i++) wrong += memcmp(h + i * es, want + i * es, es) != 0;
  return wrong;
}

/* ---- the run on one rank --------------------------------------------------------------------- */

typedef struct {
  int ncols;
  column_t cols[MAX_COLS];
} table_t;

/* --tune FILE: the fastest symcoll column per size, written as a tuning table (docs/tuning.md). */
typedef struct {
  size_t bytes;
  int best, second;
  double best_us, second_us;
} tune_row_t;
static tune_row_t tune_rows[64];
static int ntune;

static void write_tune(bctx_t *c, const table_t *t) {
  FILE *f = fopen(O.tune, "w");
  if (!f) {
    fprintf(stderr, "cannot write %s\n", O.tune);
    return;
  }
  const char *backend = c->gpu ? "cuda" : "host", *dt = symcoll_dtype_name(O.dtype), *coll = coll_label();
  fprintf(f, "# symcoll tuning table, written by symcoll-tune: %s, %s, %d ranks, %s\n", coll, backend, c->nranks, dt);
  fprintf(f, "# coll backend nranks dtype max_bytes algo blocks threads round_bytes\n");
  printf("\n# chosen per size (runner-up in brackets) -> %s\n", O.tune);
  for (int i = 0; i < ntune; i++) {
    const column_t *b = &t->cols[tune_rows[i].best];
    /* A row covers its power-of-two bucket; the last one covers everything above. */
    char max[32];
    if (i + 1 < ntune)
      snprintf(max, sizeof max, "%zu", tune_rows[i].bytes);
    else
      snprintf(max, sizeof max, "inf");
    fprintf(f, "%s %s %d %s %s %s %d %d %zu\n", coll, backend, c->nranks, dt, max, symcoll_algo_name(b->algo),
            b->blocks, b->threads, b->round_bytes);
    printf("%12zu  %-18s %8.2f us", tune_rows[i].bytes, b->label, tune_rows[i].best_us);
    if (tune_rows[i].second >= 0) printf("   [%s %.2f us]", t->cols[tune_rows[i].second].label, tune_rows[i].second_us);
    printf("\n");
  }
  fclose(f);
}

static void build_columns(table_t *t) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", O.algos);
  for (char *save = NULL, *a = strtok_r(buf, ",", &save); a && t->ncols < MAX_COLS; a = strtok_r(NULL, ",", &save)) {
    column_t *col = &t->cols[t->ncols];
    memset(col, 0, sizeof *col);
    /* "algo", "algo@blocks:threads" or "algo@blocks:threads:round_bytes" (a GPU launch shape) */
    char *shape = strchr(a, '@');
    snprintf(col->label, sizeof col->label, "%s", a);
    if (shape) {
      *shape = 0;
      if (sscanf(shape + 1, "%d:%d:%zu", &col->blocks, &col->threads, &col->round_bytes) < 2) {
        fprintf(stderr, "bad launch shape in %s (want algo@blocks:threads[:round_bytes])\n", col->label);
        exit(2);
      }
    }
    col->algo = SYMCOLL_NUM_ALGOS;
    for (int k = 0; k < SYMCOLL_NUM_ALGOS; k++)
      if (!strcmp(a, symcoll_algo_name((symcoll_algo_t)k))) col->algo = (symcoll_algo_t)k;
    if (col->algo == SYMCOLL_NUM_ALGOS) {
      fprintf(stderr, "unknown algorithm %s\n", a);
      exit(2);
    }
    /* symcoll through its NCCL engine; "nccl" names NCCL's own column */
    if (col->algo == SYMCOLL_ALGO_NCCL && !shape) snprintf(col->label, sizeof col->label, "via_nccl");
    col->name = col->label;
    col->is_symcoll = true;
    col->init = sc_init;
    col->run = sc_run;
    t->ncols++;
  }
  snprintf(buf, sizeof buf, "%s", O.peers);
  for (char *save = NULL, *p = strtok_r(buf, ",", &save); p && t->ncols < MAX_COLS; p = strtok_r(NULL, ",", &save)) {
    column_t *col = &t->cols[t->ncols];
    int ok = !strcmp(p, "nccl") ? peer_nccl_column(col) : !strcmp(p, "mpi") ? peer_mpi_column(col) : -1;
    if (ok < 0) {
      fprintf(stderr, "unknown peer %s (nccl, mpi)\n", p);
      exit(2);
    }
    if (ok == 0) continue; /* not built in: say nothing, as nccl-tests does for missing peers */
    t->ncols++;
  }
}

static void print_header(FILE *f, const table_t *t, bool csv) {
  if (csv) {
    fprintf(f, "bytes,elements,dtype,nranks,backend");
    for (int i = 0; i < t->ncols; i++) fprintf(f, ",%s_us", t->cols[i].name);
    fprintf(f, ",busbw_GBps,wrong,coll\n");
    return;
  }
  fprintf(f, "%12s %10s %8s", "bytes", "elements", "dtype");
  for (int i = 0; i < t->ncols; i++) fprintf(f, " %10s", t->cols[i].name);
  fprintf(f, " %11s %7s %8s %s\n", "busbw(GB/s)", "#wrong", "speedup", "best");
}

static double total_wrong; /* rank 0: wrong elements over all columns and sizes */

/* Progress, by sizes done; time left assumes each size costs its bytes' share of the whole
 * range (large sizes dominate). On a terminal a bar redrawn in place; otherwise a line at
 * most every 10 s, so that logs of long runs show them alive. */
static void progress(size_t done_bytes, double t0) {
  static double last;
  if (last == 0) last = t0;
  size_t total = 0, done = 0, n = 0, k = 0;
  for (size_t b = O.min_bytes; b <= O.max_bytes; b = O.step > 1 ? b * O.step : b + 1, n++) {
    total += b;
    if (b <= done_bytes) done += b, k++;
  }
  const double now = now_s(), spent = now - t0, left = done ? spent * (double)(total - done) / (double)done : 0;
  if (isatty(2)) {
    const int width = 30, fill = (int)(width * (double)done / (double)total);
    fprintf(stderr, "\r[%.*s%*s] %zu/%zu sizes, %.0f s, ~%.0f s left ", fill, "##############################",
            width - fill, "", k, n, spent, left);
  } else if (now - last >= 10 && k < n) {
    last = now;
    fprintf(stderr, "symcoll-bench: %zu/%zu sizes done in %.0f s, ~%.0f s left\n", k, n, spent, left);
  }
}

/* This machine for titles: the CPU model, or GPU 0's name on GPU runs (set by main). */
static char cpu_model[128] = "unknown CPU", gpu_model[128] = "";
static char plot_title[256];

static void read_cpu_model(void) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if ((!strncmp(line, "model name", 10) || !strncmp(line, "Model name", 10)) && strchr(line, ':')) {
      snprintf(cpu_model, sizeof cpu_model, "%s", strchr(line, ':') + 2);
      cpu_model[strcspn(cpu_model, "\n")] = 0;
      break;
    }
  if (f) fclose(f);
}

static void run_rank(bctx_t *c) {
  if (O.mm) {
    const bench_mm_opts_t mo = {.all_gather = O.mm == 1,
                                .dtype = O.dtype,
                                .shapes = O.shapes,
                                .reps = O.reps_set ? O.reps : 20,
                                .csv = O.csv,
                                .mode = O.mode,
                                .machine = c->gpu && gpu_model[0] ? gpu_model : cpu_model};
    if (bench_matmul_rank(c, &mo) != 0) total_wrong += 1;
    return;
  }
  c->op = O.op;
  c->root = O.coll->has_root ? O.root : 0;
  if (c->root >= c->nranks) {
    char why[64];
    snprintf(why, sizeof why, "not a rank of %d", c->nranks);
    bench_fail(c, "--root", why);
  }
  table_t t = {0};
  build_columns(&t);
  for (int i = 0; i < t.ncols; i++)
    if (t.cols[i].init(c, &t.cols[i], O.coll) != 0) t.cols[i].run = NULL;
  const size_t es = symcoll_dtype_size(O.dtype);
  const size_t maxc = O.coll->count_of(O.max_bytes, es, c->nranks);
  const size_t send_b = O.coll->send_elems(maxc, c->nranks) * es + 64;
  const size_t recv_b = O.coll->recv_elems(maxc, c->nranks) * es + 64;
  symcoll_mem_t send_mem = NULL;
  char *send = NULL, *recv = NULL;
  /* In place: the input lies in the output (all_gather: rank's block; reduce_scatter: the
   * output is rank's block of the input). */
  const size_t buf_b = O.inplace ? (send_b > recv_b ? send_b : recv_b) : send_b;
  if (O.send_symmetric && symcoll_mem_alloc(c->comm, buf_b, &send_mem) == SYMCOLL_OK)
    send = symcoll_mem_ptr(send_mem, c->rank);
  else
    send = dev_alloc(c, buf_b);
  recv = O.inplace ? send : dev_alloc(c, recv_b);
  char *h = malloc(send_b + recv_b), *want = malloc(recv_b);
  if (!send || !recv || !h || !want) bench_fail(c, "allocating buffers", "out of memory");
  bench_barrier(c); /* every rank has allocated before any collective runs (see time_columns) */
  FILE *csv = NULL, *json = NULL;
  int json_rows = 0;
  const char *coll = coll_label();
  const char *machine = c->gpu && gpu_model[0] ? gpu_model : cpu_model;
  if (c->rank == 0) {
    const char *mode = c->gpu ? (O.graph ? "CUDA-graph replays, device events" : "stream launches, device events")
                              : "back-to-back calls, monotonic clock";
    char root[32] = "";
    if (O.coll->has_root) snprintf(root, sizeof root, ", root %d", c->root);
    printf("# symcoll-bench: %s %s%s%s%s, backend %s, %d ranks (%s mode) on %s%s\n", coll, symcoll_dtype_name(O.dtype),
           O.coll->has_op ? " " : "", O.coll->has_op ? symcoll_op_name(O.op) : "", root, c->gpu ? "cuda" : "host",
           c->nranks, O.mode, machine,
           c->gpu && !strcmp(O.mode, "thread") && c->nranks > 1
               ? ", EMULATION: ranks share GPUs, not a measure of NVLink"
               : "");
    printf("# time: median over %d reps of %d calls (%s; columns take turns), us per call; %s%s\n", O.reps, O.iters,
           mode, O.inplace ? "in place" : "out of place",
           O.send_symmetric ? "; inputs in symmetric memory (zero-copy)" : "; inputs in ordinary memory (copied in)");
    printf(
        "# bytes: nccl-tests' size (%s); busbw: bytes / time x %s, nccl-tests' bus bandwidth of the best "
        "symcoll column; speedup: the baseline peer's time / the best symcoll column's; best: the fastest column\n",
        O.coll->size_is,
        O.coll->busbw_whole             ? "1"
        : O.coll->busbw_factor_num == 2 ? "2(n-1)/n"
                                        : "(n-1)/n");
    for (int i = 0; i < t.ncols; i++)
      if (!t.cols[i].run) printf("# %s: %s\n", t.cols[i].name, t.cols[i].na);
    print_header(stdout, &t, false);
    if (O.csv && (csv = fopen(O.csv, "w"))) print_header(csv, &t, true);
    if (O.json && (json = fopen(O.json, "w")))
      fprintf(json,
              "{\"collective\": \"%s\", \"backend\": \"%s\", \"nranks\": %d, \"mode\": \"%s\", "
              "\"dtype\": \"%s\", \"op\": \"%s\", \"graph\": %d, \"iters\": %d, \"reps\": %d, \"machine\": \"%s\", "
              "\"rows\": [",
              coll, c->gpu ? "cuda" : "host", c->nranks, O.mode, symcoll_dtype_name(O.dtype), symcoll_op_name(O.op),
              c->gpu && O.graph, O.iters, O.reps, machine);
  }
  const double t0 = now_s();
  uint32_t seed = 12345;
  for (size_t bytes = O.min_bytes; bytes <= O.max_bytes; bytes = O.step > 1 ? bytes * O.step : bytes + 1) {
    const size_t count = O.coll->count_of(bytes, es, c->nranks);
    if (count == 0) continue;
    seed += 7919;
    O.coll->expect(want, O.dtype, O.op, count, c->rank, c->nranks, c->root, O.inplace, seed);
    char *in = send, *out = recv;
    if (O.inplace && O.coll->kind == SYMCOLL_COLL_ALL_GATHER) in = recv + (size_t)c->rank * count * es;
    if (O.inplace && O.coll->kind == SYMCOLL_COLL_REDUCE_SCATTER) out = send + (size_t)c->rank * count * es;
    double us[MAX_COLS], wrong = 0;
    for (int i = 0; i < t.ncols; i++) {
      if (!t.cols[i].run) continue;
      double w = check_column(c, &t.cols[i], in, out, count, h, want, seed);
      ctl_reduce(c, &w, 1, SYMCOLL_SUM);
      wrong += w;
    }
    time_columns(c, t.cols, t.ncols, in, out, count, us);
    /* The slowest rank's median is the collective's time. */
    double slow[MAX_COLS];
    for (int i = 0; i < t.ncols; i++) slow[i] = isnan(us[i]) ? -1 : us[i];
    ctl_reduce(c, slow, t.ncols, SYMCOLL_MAX);
    if (c->rank != 0) continue;
    total_wrong += wrong;
    int best = -1, best_sc = -1, base = -1;
    for (int i = 0; i < t.ncols; i++) {
      if (slow[i] < 0) continue;
      if (best < 0 || slow[i] < slow[best]) best = i;
      if (t.cols[i].is_symcoll && (best_sc < 0 || slow[i] < slow[best_sc])) best_sc = i;
      if (t.cols[i].is_baseline && base < 0) base = i;
    }
    if (O.tune && best_sc >= 0 && ntune < 64) {
      int second = -1;
      for (int i = 0; i < t.ncols; i++)
        if (i != best_sc && t.cols[i].is_symcoll && t.cols[i].algo != SYMCOLL_ALGO_AUTO && slow[i] >= 0 &&
            (second < 0 || slow[i] < slow[second]))
          second = i;
      tune_rows[ntune++] = (tune_row_t){bytes, best_sc, second, slow[best_sc], second >= 0 ? slow[second] : 0};
    }
    const double bus_factor = O.coll->busbw_factor_num * (O.coll->busbw_whole ? 1.0 : (c->nranks - 1.0) / c->nranks);
    const double busbw = best_sc >= 0 ? (double)bytes / (slow[best_sc] * 1e3) * bus_factor : 0;
    if (isatty(2)) fprintf(stderr, "\r\033[K"); /* the progress bar gives way to the row */
    printf("%12zu %10zu %8s", bytes, count, symcoll_dtype_name(O.dtype));
    for (int i = 0; i < t.ncols; i++)
      if (slow[i] < 0)
        printf(" %10s", "n/a");
      else
        printf(" %10.2f", slow[i]);
    char speed[16] = "-";
    if (base >= 0 && best_sc >= 0) snprintf(speed, sizeof speed, "%.3f", slow[base] / slow[best_sc]);
    printf(" %11.2f %7.0f %8s %s\n", busbw, wrong, speed, best >= 0 ? t.cols[best].name : "-");
    fflush(stdout);
    if (csv) {
      fprintf(csv, "%zu,%zu,%s,%d,%s", bytes, count, symcoll_dtype_name(O.dtype), c->nranks, c->gpu ? "cuda" : "host");
      for (int i = 0; i < t.ncols; i++)
        if (slow[i] < 0)
          fprintf(csv, ",");
        else
          fprintf(csv, ",%.3f", slow[i]);
      fprintf(csv, ",%.3f,%.0f,%s\n", busbw, wrong, coll);
      fflush(csv);
    }
    if (json) {
      fprintf(json, "%s\n  {\"bytes\": %zu, \"count\": %zu, \"us\": {", json_rows++ ? "," : "", bytes, count);
      for (int i = 0, k = 0; i < t.ncols; i++)
        if (slow[i] >= 0) fprintf(json, "%s\"%s\": %.3f", k++ ? ", " : "", t.cols[i].name, slow[i]);
      fprintf(json, "}, \"busbw_GBps\": %.3f, \"wrong\": %.0f, \"best\": \"%s\"}", busbw, wrong,
              best >= 0 ? t.cols[best].name : "");
    }
    progress(bytes, t0);
  }
  if (c->rank == 0 && isatty(2)) fprintf(stderr, "\r\033[K");
  if (csv) fclose(csv);
  if (json) {
    fprintf(json, "\n]}\n");
    fclose(json);
  }
  if (c->rank == 0 && O.tune) write_tune(c, &t);
  fflush(stdout);
  for (int i = 0; i < t.ncols; i++)
    if (t.cols[i].run && t.cols[i].fini) t.cols[i].fini(c, &t.cols[i]);
  /* Every rank is done with every peer's memory before any frees (a clean end). */
  bench_barrier(c);
  if (!O.inplace) dev_free(c, recv);
  if (send_mem)
    symcoll_mem_free(send_mem);
  else
    dev_free(c, send);
  free(h);
  free(want);
}

/* ---- the ranks (bench_launch.c) ------------------------------------------------------------ */

/* One rank's run; 3 where a column gave a wrong result (rank 0 counts them). */
static int rank_body(bctx_t *c) {
  run_rank(c);
  return total_wrong > 0 ? 3 : 0;
}

/* ---- options ------------------------------------------------------------------------------------ */

static void print_env(const char *name, const char *dflt, const char *help, void *arg) {
  (void)arg;
  printf("%-26s %-8s %s\n", name, *dflt ? dflt : "(unset)", help);
}

static void usage(const char *argv0) {
  printf(
      "usage: %s [options]\n"
      "  --coll all_reduce|all_gather|reduce_scatter|broadcast|reduce|all_to_all   the collective\n"
      "                     (default all_reduce)\n"
      "  --coll all_gather_matmul|matmul_reduce_scatter --shapes helion|kraken|all|small|M,N,K\n"
      "                     the fused GEMM operations over shapes (per-rank M; default all on GPUs)\n"
      "  -b SIZE / -e SIZE / -f FACTOR   size range in bytes (K, M, G suffixes) and step factor; the size is\n"
      "                     nccl-tests': all_gather's output, reduce_scatter's and all_to_all's input\n"
      "  -d DTYPE           fp32 fp16 bf16 fp64 int8 uint8 int32 uint32 int64 uint64 fp8_e4m3 fp8_e5m2\n"
      "  -o sum|prod|max|min|avg  -n ITERS  -w WARMUP  -r REPS\n"
      "  --root R           broadcast's and reduce's root (default 0)\n"
      "  -G 0|1             CUDA-graph mode (default 1)\n"
      "  --algo LIST        symcoll columns: auto and the collective's algorithms (default: all of them)\n"
      "  --peers LIST       peer columns: nccl (GPU), mpi (CPU, under mpirun)\n"
      "  --backend cuda|host  --ranks N  --mode process|thread  --inplace\n"
      "  --no-bind          do not pin rank r to the r-th allowed CPU\n"
      "  --send-symmetric   inputs in symmetric memory (symcoll's zero-copy paths)\n"
      "  --csv FILE  --json FILE  --plot FILE.png  --merge A.csv B.csv ... [--title T] (joins tables of one run)\n"
      "  --tune FILE        write the fastest symcoll column per size as a tuning table\n"
      "  --env              print every SYMCOLL_* knob with its default and help\n"
      "Exit codes: 0 done, 2 bad usage, 3 a column gave a wrong result, 4 a call failed (the run ends\n"
      "at the first failed call, on every rank), 77 no GPU for --backend cuda.\n",
      argv0);
}

static const char *default_algos(symcoll_coll_t coll, bool gpu) {
  if (bench_across_nodes()) return "hierarchical,engine,auto";
  switch (coll) {
    case SYMCOLL_COLL_ALL_GATHER:
    case SYMCOLL_COLL_ALL_TO_ALL:
      return gpu ? "pull,push,lamport,copy_engine,auto" : "pull,push,auto";
    case SYMCOLL_COLL_REDUCE_SCATTER:
      return gpu ? "pull,lamport,auto" : "pull,auto";
    case SYMCOLL_COLL_BROADCAST:
      return gpu ? "pull,lamport,copy_engine,auto" : "pull,auto";
    case SYMCOLL_COLL_REDUCE:
      return "oneshot,auto";
    case SYMCOLL_COLL_ALL_REDUCE:
    case SYMCOLL_COLL_ALL_GATHER_MATMUL:
    case SYMCOLL_COLL_MATMUL_REDUCE_SCATTER:
    case SYMCOLL_COLL_ALL_REDUCE_RMSNORM:
    case SYMCOLL_NUM_COLL_KINDS:
      break;
  }
  return gpu ? "oneshot,oneshot_db,lamport,twoshot,auto" : "oneshot,twoshot,auto";
}

/* What the command line says beside O. */
typedef struct {
  char **merge;
  const char *title;
  int nmerge, warmup_set, reps_set, algos_set, peers_set, range_set;
} args_t;

/* The plain collectives, by the name --coll takes (symcoll_coll_name). */
static const bench_coll_t *const bench_colls[] = {&bench_all_reduce, &bench_all_gather, &bench_reduce_scatter,
                                                  &bench_broadcast,  &bench_reduce,     &bench_all_to_all};

/* The command line into O and *x: -1 to go on, else the exit code (help, --env, bad usage). */
static int parse_args(int argc, char **argv, args_t *x) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define TAKE (i++, v)
    if (!strcmp(a, "-b") && v)
      O.min_bytes = parse_size(TAKE), x->range_set = 1;
    else if (!strcmp(a, "-e") && v)
      O.max_bytes = parse_size(TAKE), x->range_set = 1;
    else if (!strcmp(a, "-f") && v)
      O.step = (size_t)atoi(TAKE);
    else if (!strcmp(a, "-n") && v)
      O.iters = atoi(TAKE);
    else if (!strcmp(a, "-w") && v)
      O.warmup = atoi(TAKE), x->warmup_set = 1;
    else if (!strcmp(a, "-r") && v)
      O.reps = atoi(TAKE), x->reps_set = 1;
    else if (!strcmp(a, "-G") && v)
      O.graph = atoi(TAKE);
    else if (!strcmp(a, "-d") && v) {
      const char *d = TAKE;
      int found = -1;
      for (int k = 0; k < SYMCOLL_NUM_DTYPES; k++)
        if (!strcmp(d, symcoll_dtype_name((symcoll_dtype_t)k))) found = k;
      if (!strcmp(d, "float")) found = SYMCOLL_FLOAT32;
      if (found < 0) {
        fprintf(stderr, "unknown dtype %s\n", d);
        return 2;
      }
      O.dtype = (symcoll_dtype_t)found;
    } else if (!strcmp(a, "-o") && v) {
      const char *o = TAKE;
      int found = -1;
      for (int k = 0; k < SYMCOLL_NUM_OPS; k++)
        if (!strcmp(o, symcoll_op_name((symcoll_op_t)k))) found = k;
      if (found < 0) {
        fprintf(stderr, "unknown op %s\n", o);
        return 2;
      }
      O.op = (symcoll_op_t)found;
    } else if (!strcmp(a, "--coll") && v) {
      const char *c = TAKE;
      O.mm = !strcmp(c, "all_gather_matmul") ? 1 : !strcmp(c, "matmul_reduce_scatter") ? 2 : 0;
      O.coll = O.mm ? &bench_all_gather : NULL;
      for (size_t k = 0; k < sizeof bench_colls / sizeof bench_colls[0]; k++)
        if (!strcmp(c, symcoll_coll_name(bench_colls[k]->kind))) O.coll = bench_colls[k];
      if (!O.coll) {
        fprintf(stderr, "unknown collective %s (", c);
        for (size_t k = 0; k < sizeof bench_colls / sizeof bench_colls[0]; k++)
          fprintf(stderr, "%s, ", symcoll_coll_name(bench_colls[k]->kind));
        fprintf(stderr, "all_gather_matmul, matmul_reduce_scatter)\n");
        return 2;
      }
    } else if (!strcmp(a, "--root") && v) {
      O.root = atoi(TAKE);
      if (O.root < 0) {
        fprintf(stderr, "--root %d: a rank, >= 0\n", O.root);
        return 2;
      }
    } else if (!strcmp(a, "--algo") && v)
      snprintf(O.algos, sizeof O.algos, "%s", TAKE), x->algos_set = 1;
    else if (!strcmp(a, "--peers") && v)
      snprintf(O.peers, sizeof O.peers, "%s", TAKE), x->peers_set = 1;
    else if (!strcmp(a, "--backend") && v)
      O.backend = TAKE;
    else if (!strcmp(a, "--ranks") && v)
      O.nranks = atoi(TAKE);
    else if (!strcmp(a, "--mode") && v)
      O.mode = TAKE;
    else if (!strcmp(a, "--csv") && v)
      O.csv = TAKE;
    else if (!strcmp(a, "--json") && v)
      O.json = TAKE;
    else if (!strcmp(a, "--plot") && v)
      O.plot = TAKE;
    else if (!strcmp(a, "--title") && v)
      x->title = TAKE;
    else if (!strcmp(a, "--inplace"))
      O.inplace = true;
    else if (!strcmp(a, "--send-symmetric"))
      O.send_symmetric = true;
    else if (!strcmp(a, "--no-bind"))
      O.bind = false;
    else if (!strcmp(a, "--tune") && v)
      O.tune = TAKE;
    else if (!strcmp(a, "--shapes") && v)
      O.shapes = TAKE;
    else if (!strcmp(a, "--env")) {
      symcoll_env_foreach(print_env, NULL);
      return 0;
    } else if (!strcmp(a, "--merge")) {
      x->merge = &argv[i + 1];
      while (i + 1 < argc && argv[i + 1][0] != '-') {
        i++;
        x->nmerge++;
      }
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(argv[0]);
      return 0;
    } else {
      fprintf(stderr, "unknown option %s\n", a);
      usage(argv[0]);
      return 2;
    }
  }
  return -1;
}

#ifdef SYMCOLL_TUNE_TOOL
/* symcoll-tune: candidates only, a wide size range, the table where the library looks. */
static void tune_tool_defaults(const args_t *x, bool gpu, int ngpu) {
  static char default_tune[512];
  if (!O.tune) {
    const char *home = getenv("HOME") ? getenv("HOME") : ".";
    snprintf(default_tune, sizeof default_tune, "%s/.cache/symcoll", home);
    for (char *p = default_tune + 1; *p; p++) /* mkdir -p */
      if (*p == '/') {
        *p = 0;
        mkdir(default_tune, 0755);
        *p = '/';
      }
    mkdir(default_tune, 0755);
    strncat(default_tune, "/tune.txt", sizeof default_tune - strlen(default_tune) - 1);
    O.tune = default_tune;
  }
  if (!x->algos_set && O.coll->kind == SYMCOLL_COLL_ALL_REDUCE)
    snprintf(O.algos, sizeof O.algos, "%s",
             gpu ? "oneshot,oneshot_db,lamport,twoshot,oneshot_db@0:256,lamport@0:256,twoshot@0:256,oneshot_db@0:1024,"
                   "lamport@0:1024,twoshot@0:1024"
                 : "oneshot,twoshot");
  else if (!x->algos_set) { /* the collective's algorithms without auto */
    char *autop = strstr(O.algos, ",auto");
    if (autop) *autop = 0;
  }
  /* NCCL through symcoll's engine is a candidate where NCCL runs: one process per GPU. */
  if (!x->algos_set && gpu && !strcmp(O.mode, "process") && O.nranks > 1 && O.nranks <= ngpu) {
    strncat(O.algos, ",nccl", sizeof O.algos - strlen(O.algos) - 1);
    setenv("SYMCOLL_NCCL", "1", 0);
  }
  if (!x->peers_set) O.peers[0] = 0;
  if (!x->range_set) {
    O.min_bytes = 1024;
    O.max_bytes = 64u << 20;
  }
}
#endif

int main(int argc, char **argv) {
  peer_mpi_init(&argc, &argv);
  int ngpu = sc_gpu_count(gpu_model, sizeof gpu_model, NULL, 0);
  read_cpu_model();
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  O = (opts_t){.min_bytes = 8192,
               .max_bytes = 2 << 20,
               .step = 2,
               .coll = &bench_all_reduce,
               .dtype = SYMCOLL_BFLOAT16,
               .op = SYMCOLL_SUM,
               .iters = 20,
               .warmup = 5,
               .reps = 20,
               .graph = 1,
               .backend = ngpu > 0 ? "cuda" : "host",
               .mode = "process",
               .bind = true};
  snprintf(O.peers, sizeof O.peers, "%s", peer_mpi_active() ? "mpi" : "nccl");
  O.nranks = ngpu > 0 ? ngpu : (int)(cores < 2 ? 2 : cores > 8 ? 8 : cores);
  args_t x = {0};
  const int parsed = parse_args(argc, argv, &x);
  if (parsed >= 0) return parsed;
  if (x.merge) return bench_merge(x.nmerge, x.merge, O.csv, O.plot, x.title);
  const bool gpu = !strcmp(O.backend, "cuda");
  if (!x.algos_set) snprintf(O.algos, sizeof O.algos, "%s", default_algos(O.coll->kind, gpu));
  if (!O.coll->has_op) O.op = SYMCOLL_SUM;
#ifdef SYMCOLL_TUNE_TOOL
  tune_tool_defaults(&x, gpu, ngpu);
#endif
  if (O.iters < 1 || O.reps < 1 || O.nranks < 1 || O.nranks > SYMCOLL_MAX_RANKS || O.min_bytes < 1 ||
      O.max_bytes < O.min_bytes) {
    usage(argv[0]);
    return 2;
  }
  ngpus = ngpu;
  if (gpu && ngpu == 0) {
    printf("SKIPPED: no GPU here (use --backend host)\n");
    return 77;
  }
  if (!gpu) {
    O.graph = 0;
    if (!x.warmup_set) O.warmup = 20; /* first touches of new pages dominate otherwise */
    if (!x.reps_set) O.reps = 100;
  }
  /* Thread-mode ranks sharing a GPU need a hardware queue per stream (symcoll_comm_create_all);
   * not for processes, where MPS clients asking for 32 queues each can stall its server. */
  if (!strcmp(O.mode, "thread")) setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  /* cuBLASLt loads a kernel on its first launch, which waits for the GPU to go idle: never,
   * while a peer rank's kernel on the same GPU waits for ours. Load them all up front. */
  if (O.mm && !strcmp(O.mode, "thread")) setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  if (O.mm) {
    O.reps_set = x.reps_set;
    O.plot = NULL; /* a table of shapes, not of sizes */
    if (!O.shapes) O.shapes = gpu ? "all" : "small";
    if (!gpu) setenv("OPENBLAS_NUM_THREADS", "1", 0); /* ranks share the cores */
  }
  /* The plot's title, known before any rank starts (ranks may be child processes). */
  snprintf(plot_title, sizeof plot_title, "%s %s%s%s, %d ranks (%s mode), %s%s", coll_label(),
           symcoll_dtype_name(O.dtype), O.coll->has_op ? " " : "", O.coll->has_op ? symcoll_op_name(O.op) : "",
           O.nranks, O.mode, gpu && gpu_model[0] ? gpu_model : cpu_model,
           gpu && !strcmp(O.mode, "thread") && O.nranks > 1 ? " (EMULATION: ranks share GPUs)" : "");
  const bench_launch_t launch = {.backend = O.backend,
                                 .mode = O.mode,
                                 .nranks = O.nranks,
                                 .ngpus = ngpus,
                                 .bind = O.bind,
                                 .inplace = O.inplace,
                                 .body = rank_body};
  int rc = bench_launch(&launch);
  peer_mpi_finalize();
  const char *world_rank = getenv("OMPI_COMM_WORLD_RANK");
  if (rc == 0 && O.plot && O.csv && (!world_rank || atoi(world_rank) == 0)) rc = bench_plot(O.csv, O.plot, plot_title);
  return rc;
}
