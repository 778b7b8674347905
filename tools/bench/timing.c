/* The columns of a run and their timing, one method for every column:
 * GPU: CUDA-graph replays of -n calls timed with device events (median of -r replays);
 * CPU: -n back-to-back calls after a barrier, timed with the monotonic clock (median of -r).
 * Every column's result is checked against exact-result inputs first (bench_check_column). */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "exact.h"

double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
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

/* One --algo entry: "algo", "algo@blocks:threads" or "algo@blocks:threads:round_bytes" (a GPU
 * launch shape); exits 2 on a bad one. */
static void algo_column(column_t *col, char *a) {
  memset(col, 0, sizeof *col);
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
}

void bench_build_columns(bench_table_t *t) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", bench_opts.algos);
  for (char *save = NULL, *a = strtok_r(buf, ",", &save); a && t->ncols < MAX_COLS; a = strtok_r(NULL, ",", &save))
    algo_column(&t->cols[t->ncols++], a);
  snprintf(buf, sizeof buf, "%s", bench_opts.peers);
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

/* One call of a column; a failure ends the run. */
static void call(bctx_t *c, column_t *col, const void *send, void *recv, size_t count) {
  const bench_opts_t *o = &bench_opts;
  if (col->run(c, col, o->coll, send, recv, count, o->dtype, o->op) == 0) return;
  char what[128];
  snprintf(what, sizeof what, "%s %s of count %zu (%s)", col->name, bench_coll_label(), count,
           symcoll_dtype_name(o->dtype));
  bench_fail(c, what, col->err[0] ? col->err : "failed");
}

/* ---- GPU ranks -------------------------------------------------------------------------- */

/* The harness's one compile-time switch: what GPU ranks do (buffers, copies, graphs, events)
 * exists in CUDA builds only. Without CUDA no rank is a GPU rank (--backend cuda ends with
 * "no GPU here" before any rank starts), and the stubs below are never called. */
#ifdef SYMCOLL_BENCH_CUDA
#include <cuda_runtime_api.h>

static void *gpu_alloc(size_t b) {
  void *p = NULL;
  return cudaMalloc(&p, b) == cudaSuccess ? p : NULL;
}
static void gpu_free(void *p) {
  cudaFree(p);
}
static void gpu_copy(bctx_t *c, void *d, const void *s, size_t b, int to_dev) {
  cudaMemcpyAsync(d, s, b, to_dev ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, (cudaStream_t)c->stream);
  cudaError_t e = cudaStreamSynchronize((cudaStream_t)c->stream);
  if (e != cudaSuccess) bench_fail(c, "copying test data", cudaGetErrorString(e));
}
/* The communicator's asynchronous error after work completed (a kernel that gave up). */
static void check_comm(bctx_t *c, const char *when) {
  symcoll_status_t s = symcoll_comm_check(c->comm);
  if (s != SYMCOLL_OK) bench_fail(c, when, bench_status(s));
}
static void gpu_sync(bctx_t *c, const char *when) {
  cudaStreamSynchronize((cudaStream_t)c->stream);
  check_comm(c, when);
}

typedef struct {
  cudaGraphExec_t exec[MAX_COLS]; /* a column's -n calls, captured (-G 1) */
  cudaEvent_t e0, e1;
} gpu_timer_t;

static void gpu_timer_init(gpu_timer_t *g) {
  cudaEventCreate(&g->e0);
  cudaEventCreate(&g->e1);
}
/* After the warm-up calls: each column's -n calls captured as a graph (-G 1), replayed once. */
static void gpu_timer_prepare(bctx_t *c, gpu_timer_t *g, column_t *cols, int ncols, void *send, void *recv,
                              size_t count) {
  cudaStream_t s = (cudaStream_t)c->stream;
  gpu_sync(c, "warm-up calls");
  bench_barrier(c);
  for (int k = 0; bench_opts.graph && k < ncols; k++) {
    if (!cols[k].run) continue;
    cudaGraph_t graph;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    for (int i = 0; i < bench_opts.iters; i++) call(c, &cols[k], send, recv, count);
    if (cudaStreamEndCapture(s, &graph) == cudaSuccess) {
      if (cudaGraphInstantiate(&g->exec[k], graph, 0) != cudaSuccess) g->exec[k] = NULL;
      cudaGraphDestroy(graph);
    }
  }
  bench_barrier(c);
  for (int k = 0; k < ncols; k++)
    if (g->exec[k]) cudaGraphLaunch(g->exec[k], s); /* warm replays */
  gpu_sync(c, "warm graph replays");
}
/* One rep of column k: microseconds per call between device events. */
static double gpu_timer_rep(bctx_t *c, gpu_timer_t *g, column_t *cols, int k, void *send, void *recv, size_t count) {
  cudaStream_t s = (cudaStream_t)c->stream;
  cudaEventRecord(g->e0, s);
  if (g->exec[k])
    cudaGraphLaunch(g->exec[k], s);
  else
    for (int i = 0; i < bench_opts.iters; i++) call(c, &cols[k], send, recv, count);
  cudaEventRecord(g->e1, s);
  cudaError_t e = cudaEventSynchronize(g->e1);
  if (e != cudaSuccess) bench_fail(c, cols[k].name, cudaGetErrorString(e));
  check_comm(c, cols[k].name); /* a kernel that gave up must not count as a fast one */
  float ms = 0;
  cudaEventElapsedTime(&ms, g->e0, g->e1);
  return 1e3 * ms / bench_opts.iters;
}
static void gpu_timer_fini(bctx_t *c, gpu_timer_t *g, int ncols) {
  cudaStreamSynchronize((cudaStream_t)c->stream);
  bench_barrier(c);
  for (int k = 0; k < ncols; k++)
    if (g->exec[k]) cudaGraphExecDestroy(g->exec[k]);
  if (g->e0) cudaEventDestroy(g->e0);
  if (g->e1) cudaEventDestroy(g->e1);
}
#else /* a build without CUDA: never called */
typedef struct {
  char none;
} gpu_timer_t;
static void *gpu_alloc(size_t b) {
  (void)b;
  return NULL;
}
static void gpu_free(void *p) {
  (void)p;
}
static void gpu_copy(bctx_t *c, void *d, const void *s, size_t b, int to_dev) {
  (void)c, (void)d, (void)s, (void)b, (void)to_dev;
}
static void gpu_sync(bctx_t *c, const char *when) {
  (void)c, (void)when;
}
static void gpu_timer_init(gpu_timer_t *g) {
  (void)g;
}
static void gpu_timer_prepare(bctx_t *c, gpu_timer_t *g, column_t *cols, int ncols, void *send, void *recv,
                              size_t count) {
  (void)c, (void)g, (void)cols, (void)ncols, (void)send, (void)recv, (void)count;
}
static double gpu_timer_rep(bctx_t *c, gpu_timer_t *g, column_t *cols, int k, void *send, void *recv, size_t count) {
  (void)c, (void)g, (void)cols, (void)k, (void)send, (void)recv, (void)count;
  return NAN;
}
static void gpu_timer_fini(bctx_t *c, gpu_timer_t *g, int ncols) {
  (void)c, (void)g, (void)ncols;
}
#endif

/* ---- buffers on the device under test --------------------------------------------------- */

void *bench_dev_alloc(bctx_t *c, size_t b) {
  if (c->gpu) return gpu_alloc(b);
  void *p = NULL;
  return posix_memalign(&p, 64, b) == 0 ? p : NULL;
}
void bench_dev_free(bctx_t *c, void *p) {
  if (c->gpu)
    gpu_free(p);
  else
    free(p);
}
void bench_dev_copy(bctx_t *c, void *d, const void *s, size_t b, int to_dev) {
  if (c->gpu)
    gpu_copy(c, d, s, b, to_dev);
  else
    memcpy(d, s, b);
}

/* ---- checking and timing ---------------------------------------------------------------- */

/* The output poisoned first, so that elements the call does not write count as wrong. */
double bench_check_column(bctx_t *c, column_t *col, void *send, void *recv, size_t count, char *h, const char *want,
                          uint32_t seed) {
  const bench_opts_t *o = &bench_opts;
  const size_t es = symcoll_dtype_size(o->dtype);
  const size_t sn = o->coll->send_elems(count, c->nranks), rn = o->coll->recv_elems(count, c->nranks);
  o->coll->fill(h, o->dtype, o->op, count, c->rank, c->nranks, seed);
  memset(h + sn * es, EXACT_POISON, rn * es);
  /* Poison the output, then place the input (in place: inside it). */
  bench_dev_copy(c, recv, h + sn * es, rn * es, 1);
  bench_dev_copy(c, send, h, sn * es, 1);
  call(c, col, send, recv, count);
  if (c->gpu) gpu_sync(c, col->name);
  bench_dev_copy(c, h, recv, rn * es, 0);
  double wrong = 0;
  for (size_t i = 0; i < rn; i++) wrong += memcmp(h + i * es, want + i * es, es) != 0;
  return wrong;
}

/* The columns take turns rep by rep, so a change in the machine's state (a noisy neighbour, a
 * migration) hits all of them alike instead of whichever column happened to be running. */
void bench_time_columns(bctx_t *c, column_t *cols, int ncols, void *send, void *recv, size_t count, double *us) {
  static __thread double t[MAX_COLS][256];
  const bench_opts_t *o = &bench_opts;
  const int reps = o->reps > 256 ? 256 : o->reps;
  gpu_timer_t g = {0};
  if (c->gpu) gpu_timer_init(&g);
  /* Phases separated by host barriers: CUDA calls that set things up (graph instantiation,
   * destruction) may wait for the GPU, which must not be busy with a peer's kernel spinning
   * for ours (ranks sharing a GPU). */
  for (int k = 0; k < ncols; k++)
    for (int i = 0; cols[k].run && i < o->warmup; i++) call(c, &cols[k], send, recv, count);
  if (c->gpu) gpu_timer_prepare(c, &g, cols, ncols, send, recv, count);
  for (int r = 0; r < reps; r++)
    for (int k = 0; k < ncols; k++) {
      if (!cols[k].run) continue;
      bench_barrier(c);
      if (c->gpu && !o->enqueue) {
        t[k][r] = gpu_timer_rep(c, &g, cols, k, send, recv, count);
        continue;
      }
      double t0 = bench_now();
      for (int i = 0; i < o->iters; i++) call(c, &cols[k], send, recv, count);
      t[k][r] = 1e6 * (bench_now() - t0) / o->iters;
      if (c->gpu) gpu_sync(c, cols[k].name); /* --enqueue: the calls' work done before the next rep */
    }
  for (int k = 0; k < ncols; k++) {
    us[k] = NAN;
    if (!cols[k].run) continue;
    qsort(t[k], (size_t)reps, sizeof t[k][0], bench_cmp_double);
    us[k] = t[k][reps / 2];
  }
  if (c->gpu) gpu_timer_fini(c, &g, ncols);
}
