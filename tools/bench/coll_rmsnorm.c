/*
 * symcoll-bench --coll all_reduce_rmsnorm: the fused all-reduce + residual add + RMSNorm against
 * the unfused chain. Rows are shapes (rows x hidden: --shapes all = hidden 4096 and 8192, rows 1,
 * 8, 32, 128, 512, 2048; small; or R,H). Columns, in the same processes, taking turns rep by rep:
 *   oneshot, twoshot,        symcoll_all_reduce_rmsnorm, fused
 *   lamport, auto
 *   sequential               symcoll_all_reduce, then symcoll's add + norm pass (the unfused
 *                            chain with a fused add + norm kernel of its own)
 *   nccl+norm                (GPU) ncclAllReduce, then the same add + norm pass (a one-rank
 *                            group of each rank runs it)
 *   all_reduce               symcoll_all_reduce of x alone: the communication's floor
 * GPU: each call captured in a CUDA graph, replayed once per rep between device events; CPU:
 * wall clock of `iters` calls. Median of the reps. fused/seq: the fused column the tuning table
 * picks (auto) over sequential. The symcoll columns' outputs (out and residual_out) are compared
 * bit for bit with sequential's (#wrong, must be 0); NCCL's sum may differ in its last bits.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "exact.h"

#ifdef SYMCOLL_BENCH_CUDA
#include <cuda_runtime_api.h>
#endif

#define NORM_COLS 7
enum { COL_ONESHOT, COL_TWOSHOT, COL_LAMPORT, COL_AUTO, COL_SEQUENTIAL, COL_NCCL, COL_ALL_REDUCE };
static const char *const col_names[NORM_COLS] = {"oneshot",    "twoshot",   "lamport",   "auto",
                                                 "sequential", "nccl+norm", "all_reduce"};
static const symcoll_algo_t col_algo[NORM_COLS] = {SYMCOLL_ALGO_ONE_SHOT, SYMCOLL_ALGO_TWO_SHOT, SYMCOLL_ALGO_LAMPORT,
                                                   SYMCOLL_ALGO_AUTO, SYMCOLL_ALGO_SEQUENTIAL};
#define EPS 1e-6f

typedef struct {
  size_t rows, hidden;
} norm_shape_t;

typedef struct {
  bctx_t *c;
  symcoll_comm_t self; /* this rank alone: the add + norm pass after NCCL's all-reduce */
  symcoll_dtype_t dt;
  void *stream;
  norm_shape_t sh;
  size_t es;
  char *x, *res, *w, *out[NORM_COLS], *ro[NORM_COLS];
  column_t nccl;
  bool nccl_ok;
} nx_t;

static int norm_call(nx_t *x, int col, char *err, size_t errn) {
  bctx_t *c = x->c;
  const norm_shape_t s = x->sh;
  symcoll_status_t st;
  if (col == COL_ALL_REDUCE) {
    st = symcoll_all_reduce(c->comm, x->x, x->out[col], s.rows * s.hidden, x->dt, SYMCOLL_SUM, x->stream);
  } else if (col == COL_NCCL) {
    if (x->nccl.run(c, &x->nccl, &bench_all_reduce, x->x, x->out[col], s.rows * s.hidden, x->dt, SYMCOLL_SUM))
      return snprintf(err, errn, "%.*s", (int)(errn > 0 ? errn - 1 : 0), x->nccl.err), 1;
    st = symcoll_all_reduce_rmsnorm(x->self, x->out[col], x->res, x->w, EPS, x->out[col], x->ro[col], s.rows, s.hidden,
                                    x->dt, NULL, x->stream);
  } else {
    symcoll_norm_opts_t o;
    symcoll_norm_opts_init(&o);
    o.algo = col_algo[col];
    st = symcoll_all_reduce_rmsnorm(c->comm, x->x, x->res, x->w, EPS, x->out[col], x->ro[col], s.rows, s.hidden, x->dt,
                                    &o, x->stream);
  }
  if (st != SYMCOLL_OK) snprintf(err, errn, "%.*s", (int)(errn > 0 ? errn - 1 : 0), bench_status(st));
  return st != SYMCOLL_OK;
}

/* ---- a shape ------------------------------------------------------------------------------------ */

typedef struct {
  bool usable[NORM_COLS];
  double us[NORM_COLS];
  size_t wrong[NORM_COLS];
} norm_row_t;

/* Random values of a few bits (so sums stay in range), the residual and weight the same on
 * every rank, x different. */
static void fill_inputs(nx_t *x) {
  bctx_t *c = x->c;
  const size_t count = x->sh.rows * x->sh.hidden;
  char *h = malloc(count * x->es);
  for (size_t i = 0; i < count; i++)
    exact_store(h, x->dt, i, (double)((int)((i * 2654435761u + (uint32_t)c->rank * 97u) % 17) - 8) / 8);
  bench_dev_copy(x->c, x->x, h, count * x->es, 1);
  for (size_t i = 0; i < count; i++) exact_store(h, x->dt, i, (double)((int)((i * 40503u) % 9) - 4) / 4);
  bench_dev_copy(x->c, x->res, h, count * x->es, 1);
  for (size_t i = 0; i < x->sh.hidden; i++) exact_store(h, x->dt, i, 0.75 + (double)(i % 5) / 8);
  bench_dev_copy(x->c, x->w, h, x->sh.hidden * x->es, 1);
  free(h);
}

static void warm_up(nx_t *x, const bool *usable) {
  bctx_t *c = x->c;
  char err[512], what[160];
  for (int k = 0; k < NORM_COLS; k++)
    for (int i = 0; usable[k] && i < 2; i++) {
      bench_barrier(c);
      snprintf(what, sizeof what, "%s all_reduce_rmsnorm %zux%zu", col_names[k], x->sh.rows, x->sh.hidden);
      if (norm_call(x, k, err, sizeof err)) bench_fail(c, what, err);
#ifdef SYMCOLL_BENCH_CUDA
      if (c->gpu) {
        cudaStreamSynchronize((cudaStream_t)x->stream);
        if (symcoll_comm_check(c->comm) != SYMCOLL_OK) bench_fail(c, what, bench_status(symcoll_comm_check(c->comm)));
      }
#endif
    }
}

/* us[k * reps + r]: rep r of column k, per call. GPU: a graph of one call per column, replayed
 * between events; CPU: `iters` calls between two clock reads. */
static void time_reps(nx_t *x, const bool *usable, int reps, int iters, double *us) {
  bctx_t *c = x->c;
  char err[512];
#ifdef SYMCOLL_BENCH_CUDA
  if (c->gpu) {
    cudaStream_t s = (cudaStream_t)x->stream;
    cudaGraphExec_t exec[NORM_COLS] = {0};
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    bench_barrier(c);
    for (int k = 0; k < NORM_COLS; k++) {
      cudaGraph_t g;
      if (!usable[k]) continue;
      cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
      const int bad = norm_call(x, k, err, sizeof err);
      if (cudaStreamEndCapture(s, &g) == cudaSuccess && !bad) {
        if (cudaGraphInstantiate(&exec[k], g, 0) != cudaSuccess) exec[k] = NULL;
        cudaGraphDestroy(g);
      }
    }
    for (int r = 0; r < reps; r++)
      for (int k = 0; k < NORM_COLS; k++) {
        if (!usable[k]) continue;
        cudaStreamSynchronize(s);
        bench_barrier(c);
        cudaEventRecord(e0, s);
        if (exec[k])
          cudaGraphLaunch(exec[k], s);
        else if (norm_call(x, k, err, sizeof err))
          bench_fail(c, col_names[k], err);
        cudaEventRecord(e1, s);
        const cudaError_t e = cudaEventSynchronize(e1);
        if (e != cudaSuccess) bench_fail(c, col_names[k], cudaGetErrorString(e));
        if (symcoll_comm_check(c->comm) != SYMCOLL_OK)
          bench_fail(c, col_names[k], bench_status(symcoll_comm_check(c->comm)));
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        us[(size_t)k * (size_t)reps + (size_t)r] = 1e3 * ms;
      }
    for (int k = 0; k < NORM_COLS; k++)
      if (exec[k]) cudaGraphExecDestroy(exec[k]);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    return;
  }
#endif
  for (int r = 0; r < reps; r++)
    for (int k = 0; k < NORM_COLS; k++) {
      if (!usable[k]) continue;
      bench_barrier(c);
      const double t0 = bench_now();
      for (int i = 0; i < iters; i++)
        if (norm_call(x, k, err, sizeof err)) bench_fail(c, col_names[k], err);
      us[(size_t)k * (size_t)reps + (size_t)r] = 1e6 * (bench_now() - t0) / iters;
    }
}

/* Each symcoll column's out and residual_out against sequential's, bit for bit. */
static void compare(nx_t *x, norm_row_t *row) {
  const size_t bytes = x->sh.rows * x->sh.hidden * x->es;
  char *ref = malloc(2 * bytes), *got = malloc(2 * bytes);
#ifdef SYMCOLL_BENCH_CUDA
  if (x->c->gpu) cudaStreamSynchronize((cudaStream_t)x->stream);
#endif
  bench_dev_copy(x->c, ref, x->out[COL_SEQUENTIAL], bytes, 0);
  bench_dev_copy(x->c, ref + bytes, x->ro[COL_SEQUENTIAL], bytes, 0);
  for (int k = 0; k <= COL_AUTO; k++) {
    if (!row->usable[k]) continue;
    bench_dev_copy(x->c, got, x->out[k], bytes, 0);
    bench_dev_copy(x->c, got + bytes, x->ro[k], bytes, 0);
    for (size_t i = 0; i < 2 * bytes / x->es; i++)
      row->wrong[k] += memcmp(got + i * x->es, ref + i * x->es, x->es) != 0;
  }
  free(ref), free(got);
}

static void run_shape(nx_t *x, norm_shape_t sh, int reps, norm_row_t *row) {
  bctx_t *c = x->c;
  x->sh = sh;
  x->es = symcoll_dtype_size(x->dt);
  const size_t bytes = sh.rows * sh.hidden * x->es;
  memset(row, 0, sizeof *row);
  x->x = bench_dev_alloc(c, bytes), x->res = bench_dev_alloc(c, bytes), x->w = bench_dev_alloc(c, sh.hidden * x->es);
  for (int k = 0; k < NORM_COLS; k++) x->out[k] = bench_dev_alloc(c, bytes), x->ro[k] = bench_dev_alloc(c, bytes);
  fill_inputs(x);
  for (int k = 0; k < NORM_COLS; k++)
    row->usable[k] = k == COL_NCCL   ? x->nccl_ok
                     : k <= COL_AUTO ? col_algo[k] == SYMCOLL_ALGO_AUTO ||
                                           symcoll_coll_algo_supported(c->comm, SYMCOLL_COLL_ALL_REDUCE_RMSNORM,
                                                                       col_algo[k]) == SYMCOLL_OK
                                     : true;
  warm_up(x, row->usable);
  /* CPU: enough calls per rep to pass ~2 ms (a call of 1 row is a few microseconds). */
  const int iters = c->gpu ? 1 : (int)(bytes >= (1u << 20) ? 1 : bytes >= (64u << 10) ? 5 : 50);
  double *t = malloc(sizeof(double) * (size_t)reps * NORM_COLS);
  time_reps(x, row->usable, reps, iters, t);
  for (int k = 0; k < NORM_COLS; k++) {
    row->us[k] = NAN;
    if (!row->usable[k]) continue;
    qsort(t + (size_t)k * (size_t)reps, (size_t)reps, sizeof(double), bench_cmp_double);
    row->us[k] = t[(size_t)k * (size_t)reps + (size_t)reps / 2];
  }
  free(t);
  compare(x, row);
  bench_barrier(c);
  bench_dev_free(c, x->x), bench_dev_free(c, x->res), bench_dev_free(c, x->w);
  for (int k = 0; k < NORM_COLS; k++) bench_dev_free(c, x->out[k]), bench_dev_free(c, x->ro[k]);
}

/* ---- the table ---------------------------------------------------------------------------------- */

static int parse_shapes(const char *what, norm_shape_t *out, int max) {
  int n = 0;
  const size_t rows[] = {1, 8, 32, 128, 512, 2048};
  if (!strcmp(what, "all"))
    for (int h = 0; h < 2; h++)
      for (int r = 0; r < 6 && n < max; r++) out[n++] = (norm_shape_t){rows[r], h ? 8192 : 4096};
  if (!strcmp(what, "small"))
    for (int r = 0; r < 3; r++) out[n++] = (norm_shape_t){rows[r], 1024};
  size_t r, h;
  if (n == 0 && sscanf(what, "%zu,%zu", &r, &h) == 2 && r && h) out[n++] = (norm_shape_t){r, h};
  return n;
}

static void print_header(const nx_t *x, const bench_mm_opts_t *o, const bool *shown, FILE *csv) {
  const bctx_t *c = x->c;
  printf("# all_reduce_rmsnorm, %s, %d ranks (%s), %s\n# us per call (median of %d)\n", symcoll_dtype_name(x->dt),
         c->nranks, o->mode, o->machine, o->reps);
  printf(
      "# oneshot / twoshot / lamport / auto: fused; sequential: symcoll all_reduce, then its add + norm pass; "
      "all_reduce: the all-reduce alone%s\n",
      x->nccl_ok ? "; nccl+norm: ncclAllReduce, then the same pass" : "");
  printf(
      "# fused/seq: auto over sequential (below 1: the fusion pays); #wrong: symcoll columns' bits vs sequential's\n");
  printf("%6s %6s", "rows", "hidden");
  for (int k = 0; k < NORM_COLS; k++)
    if (shown[k]) printf(" %11s", col_names[k]);
  printf(" %9s %6s\n", "fused/seq", "#wrong");
  if (csv) {
    fprintf(csv, "coll,dtype,nranks,rows,hidden");
    for (int k = 0; k < NORM_COLS; k++) fprintf(csv, ",%s_us", col_names[k]);
    fprintf(csv, ",wrong\n");
  }
}

static size_t print_row(const nx_t *x, norm_shape_t sh, const norm_row_t *row, const bool *shown, FILE *csv) {
  size_t wrong = 0;
  printf("%6zu %6zu", sh.rows, sh.hidden);
  for (int k = 0; k < NORM_COLS; k++) {
    wrong += row->wrong[k];
    if (!shown[k]) continue;
    if (row->usable[k])
      printf(" %11.2f", row->us[k]);
    else
      printf(" %11s", "n/a");
  }
  printf(" %9.3f %6zu\n", row->us[COL_AUTO] / row->us[COL_SEQUENTIAL], wrong);
  fflush(stdout);
  if (csv) {
    fprintf(csv, "all_reduce_rmsnorm,%s,%d,%zu,%zu", symcoll_dtype_name(x->dt), x->c->nranks, sh.rows, sh.hidden);
    for (int k = 0; k < NORM_COLS; k++) fprintf(csv, row->usable[k] ? ",%.2f" : ",", row->us[k]);
    fprintf(csv, ",%zu\n", wrong);
  }
  return wrong;
}

int bench_norm_rank(bctx_t *c, const bench_mm_opts_t *o) {
  nx_t x = {.c = c, .dt = o->dtype, .stream = c->stream};
  norm_shape_t shapes[16];
  const int ns = parse_shapes(o->shapes, shapes, 16);
  if (ns == 0) {
    if (c->rank == 0) fprintf(stderr, "unknown --shapes %s (all, small, or ROWS,HIDDEN)\n", o->shapes);
    return 2;
  }
  if (x.dt != SYMCOLL_FLOAT32 && x.dt != SYMCOLL_FLOAT16 && x.dt != SYMCOLL_BFLOAT16) {
    if (c->rank == 0) fprintf(stderr, "all_reduce_rmsnorm takes fp32, fp16 or bf16 (-d)\n");
    return 2;
  }
  if (symcoll_comm_split(c->comm, c->rank, 0, &x.self) != SYMCOLL_OK) bench_fail(c, "split", "one-rank groups");
  x.nccl_ok = c->gpu && peer_nccl_column(&x.nccl) && x.nccl.init(c, &x.nccl, &bench_all_reduce) == 0;
  FILE *csv = c->rank == 0 && o->csv ? fopen(o->csv, "w") : NULL;
  bool shown[NORM_COLS];
  for (int k = 0; k < NORM_COLS; k++) shown[k] = k != COL_NCCL || x.nccl_ok;
  if (c->rank == 0) print_header(&x, o, shown, csv);
  size_t wrong_total = 0;
  for (int i = 0; i < ns; i++) {
    norm_row_t row;
    run_shape(&x, shapes[i], o->reps, &row);
    if (c->rank == 0) wrong_total += print_row(&x, shapes[i], &row, shown, csv);
  }
  if (csv) fclose(csv);
  if (x.nccl_ok && x.nccl.fini) x.nccl.fini(c, &x.nccl);
  symcoll_comm_destroy(x.self);
  return wrong_total ? 3 : 0;
}
