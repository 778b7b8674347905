/*
 * symcoll-bench --coll all_reduce_rmsnorm: the fused all-reduce + residual add + RMSNorm against
 * the unfused chain. Rows are shapes (rows x hidden: --shapes all = hidden 4096 and 8192, rows 1,
 * 8, 32, 128, 512, 2048; small; or R,H). --coll reduce_scatter_rmsnorm: its reduce-scatter form,
 * rows per rank (x: nranks x rows), with the columns pull (fused), auto, sequential
 * (symcoll_reduce_scatter, then the pass), nccl+norm (ncclReduceScatter, then the pass) and
 * reduce_scatter (the floor). Columns, in the same processes, taking turns rep by rep:
 *   oneshot, twoshot,        symcoll_all_reduce_rmsnorm, fused
 *   lamport, auto
 *   sequential               symcoll_all_reduce, then symcoll's add + norm pass (the unfused
 *                            chain with a fused add + norm kernel of its own)
 *   nccl+norm                (GPU) ncclAllReduce, then the same add + norm pass (a one-rank
 *                            group of each rank runs it)
 *   all_reduce               symcoll_all_reduce of x alone: the communication's floor
 * --fp8 static|rows: the fused columns write the FP8 (e4m3) output (one static scale, or a
 * scale per row) in place of out; sequential and nccl+norm write out, then quantise it in a
 * separate pass (GPU: a kernel of this benchmark, quant_kernels.cu; CPU: a loop here).
 * GPU: -n calls (20) captured in a CUDA graph, replayed once per rep between device events, the
 * time over -n (-n 1: a graph a call, its launch in every call's time); CPU: wall clock of
 * enough calls to pass ~2 ms. Median of the reps. fused/seq: the fused column the tuning table
 * picks (auto) over sequential. The symcoll columns' outputs (out and residual_out) are compared
 * bit for bit with sequential's (#wrong, must be 0); NCCL's sum may differ in its last bits.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench.h"
#include "core/half.h" /* the library's own conversions: the CPU chain's quantisation */
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
/* The reduce-scatter form's columns: its fused algorithm where one-shot's column is; two-shot and
 * lamport are not among its algorithms (the columns are left out); its floor is reduce_scatter. */
static const char *const scatter_col_names[NORM_COLS] = {"pull",          "-", "-", "auto", "sequential", "nccl+norm",
                                                         "reduce_scatter"};
#define EPS 1e-6f
#define FP8_STATIC_SCALE (1.0f / 64) /* |out| up to ~3.5: most of e4m3's range, a few saturate */
#define FP8_MAX 448.0f

#ifdef SYMCOLL_BENCH_CUDA
int bench_quant_fp8(const void *out, void *q, const float *static_scale, float *row_scales, size_t rows, size_t hidden,
                    int dtype_size, int bf16, int pdl, void *stream); /* quant_kernels.cu */

/* SYMCOLL_PDL as the library reads it (a BOOL knob): the chain's quantisation kernel is then
 * launched as the library's kernels are, with programmatic dependent launch. */
static int pdl_asked(void) {
  const char *v = getenv("SYMCOLL_PDL");
  return v && (!strcmp(v, "1") || !strcasecmp(v, "on") || !strcasecmp(v, "yes") || !strcasecmp(v, "true"));
}
#endif

enum { FP8_NONE, FP8_STATIC, FP8_ROWS };
static const char *const fp8_names[] = {"", "static", "rows"};

typedef struct {
  size_t rows, hidden;
} norm_shape_t;

typedef struct {
  bctx_t *c;
  bool scatter;        /* reduce_scatter_rmsnorm: x holds nranks x rows rows */
  symcoll_comm_t self; /* this rank alone: the add + norm pass after NCCL's all-reduce */
  symcoll_dtype_t dt;
  void *stream;
  norm_shape_t sh;
  size_t es;
  char *x, *res, *w, *out[NORM_COLS], *ro[NORM_COLS];
  int fp8;              /* FP8_NONE, FP8_STATIC or FP8_ROWS */
  char *q[NORM_COLS];   /* the fp8 outputs (rows x hidden bytes) */
  float *qs[NORM_COLS]; /* the per-row scales (FP8_ROWS) */
  float *scale;         /* the static scale, where the device reads it */
  float *row32;         /* CPU: a row as floats, scratch of the chain's quantisation */
  column_t nccl;
  bool nccl_ok;
  bool asked[NORM_COLS]; /* --algo: the fused columns named (every other column: true) */
} nx_t;

static symcoll_coll_t coll_of(const nx_t *x) {
  return x->scatter ? SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM : SYMCOLL_COLL_ALL_REDUCE_RMSNORM;
}
static const char *col_name(const nx_t *x, int k) {
  return x->scatter ? scatter_col_names[k] : col_names[k];
}
static symcoll_algo_t algo_of(const nx_t *x, int k) {
  return x->scatter && k == COL_ONESHOT ? SYMCOLL_ALGO_PULL : col_algo[k];
}
/* Whether column k is one of the operation's (the reduce-scatter form has no two-shot or lamport). */
static bool of_form(const nx_t *x, int k) {
  return !x->scatter || (k != COL_TWOSHOT && k != COL_LAMPORT);
}
/* Whether column k belongs to the table: the form's, unless --algo leaves it out. */
static bool in_table(const nx_t *x, int k) {
  return of_form(x, k) && x->asked[k];
}

/* x->asked from --algo (NULL: every column): false, saying why on rank 0, for a name that is
 * not one of the table's fused columns. */
static bool ask_columns(nx_t *x, const char *algos) {
  for (int k = 0; k < NORM_COLS; k++) x->asked[k] = !algos || k > COL_AUTO;
  if (!algos) return true;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", algos);
  for (char *save = NULL, *a = strtok_r(buf, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
    int k = 0;
    while (k <= COL_AUTO && (!of_form(x, k) || strcmp(a, col_name(x, k)))) k++;
    if (k > COL_AUTO) {
      if (x->c->rank == 0)
        fprintf(stderr, "--algo %s: %s's fused columns are %s\n", a, symcoll_coll_name(coll_of(x)),
                x->scatter ? "pull, auto" : "oneshot, twoshot, lamport, auto");
      return false;
    }
    x->asked[k] = true;
  }
  return true;
}
/* Rows of x: every rank's (the reduce-scatter form), or the call's. */
static size_t x_rows(const nx_t *x) {
  return x->scatter ? x->sh.rows * (size_t)x->c->nranks : x->sh.rows;
}

/* The chain's separate quantisation: out[col] to q[col] (and qs[col]). */
static symcoll_status_t quantise(nx_t *x, int col) {
  const norm_shape_t s = x->sh;
  float *row_scales = x->fp8 == FP8_ROWS ? x->qs[col] : NULL;
#ifdef SYMCOLL_BENCH_CUDA
  if (x->c->gpu)
    return bench_quant_fp8(x->out[col], x->q[col], row_scales ? NULL : x->scale, row_scales, s.rows, s.hidden,
                           (int)x->es, x->dt == SYMCOLL_BFLOAT16, pdl_asked(), x->stream) == 0
               ? SYMCOLL_OK
               : SYMCOLL_ERR_CUDA;
#endif
  float *v = x->row32;
  for (size_t r = 0; r < s.rows; r++) {
    const char *row = x->out[col] + r * s.hidden * x->es;
    uint8_t *q = (uint8_t *)x->q[col] + r * s.hidden;
    for (size_t i = 0; i < s.hidden; i++)
      v[i] = x->dt == SYMCOLL_FLOAT32    ? ((const float *)(const void *)row)[i]
             : x->dt == SYMCOLL_BFLOAT16 ? symcoll__bf16_to_f32(((const uint16_t *)(const void *)row)[i])
                                         : symcoll__f16_to_f32(((const uint16_t *)(const void *)row)[i]);
    float scale = *x->scale;
    if (row_scales) {
      float amax = 0.0f;
      for (size_t i = 0; i < s.hidden; i++) amax = fmaxf(amax, fabsf(v[i]));
      scale = row_scales[r] = fmaxf(amax / FP8_MAX, 1.0f / (FP8_MAX * 512.0f));
    }
    const float rcp = 1.0f / scale; /* symcoll.h: out x (1 / scale) */
    for (size_t i = 0; i < s.hidden; i++) q[i] = symcoll__f32_to_fp8(v[i] * rcp, 0);
  }
  return SYMCOLL_OK;
}

static int norm_call(nx_t *x, int col, char *err, size_t errn) {
  bctx_t *c = x->c;
  const norm_shape_t s = x->sh;
  symcoll_status_t st;
  if (col == COL_ALL_REDUCE) {
    st = x->scatter
             ? symcoll_reduce_scatter(c->comm, x->x, x->out[col], s.rows * s.hidden, x->dt, SYMCOLL_SUM, x->stream)
             : symcoll_all_reduce(c->comm, x->x, x->out[col], s.rows * s.hidden, x->dt, SYMCOLL_SUM, x->stream);
  } else if (col == COL_NCCL) {
    if (x->nccl.run(c, &x->nccl, x->scatter ? &bench_reduce_scatter : &bench_all_reduce, x->x, x->out[col],
                    s.rows * s.hidden, x->dt, SYMCOLL_SUM))
      return snprintf(err, errn, "%.*s", (int)(errn > 0 ? errn - 1 : 0), x->nccl.err), 1;
    st = symcoll_all_reduce_rmsnorm(x->self, x->out[col], x->res, x->w, EPS, x->out[col], x->ro[col], s.rows, s.hidden,
                                    x->dt, NULL, x->stream);
    if (st == SYMCOLL_OK && x->fp8) st = quantise(x, col);
  } else {
    /* with fp8: the fused columns quantise in the call, sequential in a pass of its own */
    const bool fused_fp8 = x->fp8 && col != COL_SEQUENTIAL;
    symcoll_norm_opts_t o;
    symcoll_norm_opts_init(&o);
    o.algo = algo_of(x, col);
    if (fused_fp8) {
      o.fp8_out = x->q[col];
      if (x->fp8 == FP8_ROWS)
        o.fp8_row_scales = x->qs[col];
      else
        o.fp8_scale = x->scale;
    }
    st = (x->scatter ? symcoll_reduce_scatter_rmsnorm : symcoll_all_reduce_rmsnorm)(
        c->comm, x->x, x->res, x->w, EPS, fused_fp8 ? NULL : x->out[col], x->ro[col], s.rows, s.hidden, x->dt, &o,
        x->stream);
    if (st == SYMCOLL_OK && x->fp8 && !fused_fp8) st = quantise(x, col);
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
  const size_t count = x->sh.rows * x->sh.hidden, xcount = x_rows(x) * x->sh.hidden;
  char *h = malloc(xcount * x->es);
  for (size_t i = 0; i < xcount; i++)
    exact_store(h, x->dt, i, (double)((int)((i * 2654435761u + (uint32_t)c->rank * 97u) % 17) - 8) / 8);
  bench_dev_copy(x->c, x->x, h, xcount * x->es, 1);
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
      snprintf(what, sizeof what, "%s %s %zux%zu", col_name(x, k), symcoll_coll_name(coll_of(x)), x->sh.rows,
               x->sh.hidden);
      if (norm_call(x, k, err, sizeof err)) bench_fail(c, what, err);
#ifdef SYMCOLL_BENCH_CUDA
      if (c->gpu) {
        cudaStreamSynchronize((cudaStream_t)x->stream);
        if (symcoll_comm_check(c->comm) != SYMCOLL_OK) bench_fail(c, what, bench_status(symcoll_comm_check(c->comm)));
      }
#endif
    }
}

/* us[k * reps + r]: rep r of column k, per call: `iters` calls between two clock reads (CPU),
 * or a graph of `iters` calls per column replayed between device events (GPU), as the plain
 * collectives' table times them: what a call costs among a model's graph nodes (-n 1: one call
 * a graph, which adds the graph's launch to every call). */
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
      int bad = 0;
      for (int i = 0; i < iters && !bad; i++) bad = norm_call(x, k, err, sizeof err);
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
        else
          for (int i = 0; i < iters; i++)
            if (norm_call(x, k, err, sizeof err)) bench_fail(c, col_name(x, k), err);
        cudaEventRecord(e1, s);
        const cudaError_t e = cudaEventSynchronize(e1);
        if (e != cudaSuccess) bench_fail(c, col_name(x, k), cudaGetErrorString(e));
        if (symcoll_comm_check(c->comm) != SYMCOLL_OK)
          bench_fail(c, col_name(x, k), bench_status(symcoll_comm_check(c->comm)));
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        us[(size_t)k * (size_t)reps + (size_t)r] = 1e3 * ms / iters;
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
        if (norm_call(x, k, err, sizeof err)) bench_fail(c, col_name(x, k), err);
      us[(size_t)k * (size_t)reps + (size_t)r] = 1e6 * (bench_now() - t0) / iters;
    }
}

/* Column k's results, in host memory: residual_out, then out (or, with fp8, the fp8 output
 * and the row scales). */
static void results_of(nx_t *x, int k, char *h) {
  const size_t n = x->sh.rows * x->sh.hidden, bytes = n * x->es;
  bench_dev_copy(x->c, h, x->ro[k], bytes, 0);
  if (!x->fp8) {
    bench_dev_copy(x->c, h + bytes, x->out[k], bytes, 0);
    return;
  }
  bench_dev_copy(x->c, h + bytes, x->q[k], n, 0);
  if (x->fp8 == FP8_ROWS) bench_dev_copy(x->c, h + bytes + n, x->qs[k], x->sh.rows * sizeof(float), 0);
}

/* Each symcoll column's results against sequential's, bit for bit: residual_out and out
 * element by element, or with fp8 residual_out's elements, the fp8 bytes and the scales. */
static void compare(nx_t *x, norm_row_t *row) {
  const size_t n = x->sh.rows * x->sh.hidden, bytes = n * x->es;
  const size_t all = bytes + (x->fp8 ? n + x->sh.rows * sizeof(float) : bytes);
  char *ref = calloc(1, all), *got = calloc(1, all);
#ifdef SYMCOLL_BENCH_CUDA
  if (x->c->gpu) cudaStreamSynchronize((cudaStream_t)x->stream);
#endif
  results_of(x, COL_SEQUENTIAL, ref);
  for (int k = 0; k <= COL_AUTO; k++) {
    if (!row->usable[k]) continue;
    results_of(x, k, got);
    for (size_t i = 0; i < n; i++) row->wrong[k] += memcmp(got + i * x->es, ref + i * x->es, x->es) != 0;
    if (!x->fp8)
      for (size_t i = n; i < 2 * n; i++) row->wrong[k] += memcmp(got + i * x->es, ref + i * x->es, x->es) != 0;
    else
      for (size_t i = bytes; i < all; i++) row->wrong[k] += got[i] != ref[i];
  }
  free(ref), free(got);
}

static void run_shape(nx_t *x, norm_shape_t sh, int reps, int calls, norm_row_t *row) {
  bctx_t *c = x->c;
  x->sh = sh;
  x->es = symcoll_dtype_size(x->dt);
  const size_t bytes = sh.rows * sh.hidden * x->es;
  memset(row, 0, sizeof *row);
  x->x = bench_dev_alloc(c, x_rows(x) * sh.hidden * x->es), x->res = bench_dev_alloc(c, bytes),
  x->w = bench_dev_alloc(c, sh.hidden * x->es);
  for (int k = 0; k < NORM_COLS; k++) {
    x->out[k] = bench_dev_alloc(c, bytes), x->ro[k] = bench_dev_alloc(c, bytes);
    x->q[k] = x->fp8 ? bench_dev_alloc(c, sh.rows * sh.hidden) : NULL;
    x->qs[k] = x->fp8 ? bench_dev_alloc(c, sh.rows * sizeof(float)) : NULL;
  }
  x->row32 = x->fp8 && !c->gpu ? malloc(sh.hidden * sizeof(float)) : NULL;
  fill_inputs(x);
  for (int k = 0; k < NORM_COLS; k++)
    row->usable[k] = !in_table(x, k) ? false
                     : k == COL_NCCL ? x->nccl_ok
                     : k <= COL_AUTO ? algo_of(x, k) == SYMCOLL_ALGO_AUTO ||
                                           symcoll_coll_algo_supported(c->comm, coll_of(x), algo_of(x, k)) == SYMCOLL_OK
                                     : true;
  warm_up(x, row->usable);
  /* GPU: -n calls a graph; CPU: enough calls per rep to pass ~2 ms (a call of 1 row is a few
   * microseconds). */
  const size_t xbytes = x_rows(x) * sh.hidden * x->es;
  const int iters = c->gpu ? calls : (int)(xbytes >= (1u << 20) ? 1 : xbytes >= (64u << 10) ? 5 : 50);
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
  for (int k = 0; k < NORM_COLS; k++) {
    bench_dev_free(c, x->out[k]), bench_dev_free(c, x->ro[k]);
    if (x->fp8) bench_dev_free(c, x->q[k]), bench_dev_free(c, x->qs[k]);
  }
  free(x->row32);
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
  printf("# %s, %s, %d ranks (%s), %s%s\n# us per call (median of %d", symcoll_coll_name(coll_of(x)),
         symcoll_dtype_name(x->dt), c->nranks, o->mode, o->machine, x->scatter ? ", rows per rank" : "", o->reps);
  if (c->gpu) printf("; a CUDA graph of %d call%s a rep", o->calls, o->calls == 1 ? "" : "s");
  printf(")\n");
  if (x->fp8)
    printf(
        "# fp8 output (e4m3), %s: the fused columns quantise in the call (out not written); sequential and nccl+norm "
        "write out, then a separate pass quantises it\n",
        x->fp8 == FP8_STATIC ? "one static scale" : "a scale per row");
  if (x->scatter)
    printf(
        "# pull / auto: fused; sequential: symcoll reduce_scatter, then its add + norm pass; reduce_scatter: the "
        "reduce-scatter alone%s\n",
        x->nccl_ok ? "; nccl+norm: ncclReduceScatter, then the same pass" : "");
  else
    printf(
        "# oneshot / twoshot / lamport / auto: fused; sequential: symcoll all_reduce, then its add + norm pass; "
        "all_reduce: the all-reduce alone%s\n",
        x->nccl_ok ? "; nccl+norm: ncclAllReduce, then the same pass" : "");
  printf(
      "# fused/seq: auto over sequential (below 1: the fusion pays); #wrong: symcoll columns' bits vs sequential's\n");
  printf("%6s %6s", "rows", "hidden");
  for (int k = 0; k < NORM_COLS; k++)
    if (shown[k]) printf(" %11s", col_name(x, k));
  printf(" %9s %6s\n", "fused/seq", "#wrong");
  if (csv) {
    fprintf(csv, "coll,dtype,nranks,rows,hidden");
    for (int k = 0; k < NORM_COLS; k++)
      if (in_table(x, k)) fprintf(csv, ",%s_us", col_name(x, k));
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
  if (row->usable[COL_AUTO])
    printf(" %9.3f %6zu\n", row->us[COL_AUTO] / row->us[COL_SEQUENTIAL], wrong);
  else
    printf(" %9s %6zu\n", "n/a", wrong);
  fflush(stdout);
  if (csv) {
    fprintf(csv, "%s%s%s,%s,%d,%zu,%zu", symcoll_coll_name(coll_of(x)), x->fp8 ? "+fp8_" : "", fp8_names[x->fp8],
            symcoll_dtype_name(x->dt), x->c->nranks, sh.rows, sh.hidden);
    for (int k = 0; k < NORM_COLS; k++)
      if (in_table(x, k)) fprintf(csv, row->usable[k] ? ",%.2f" : ",", row->us[k]);
    fprintf(csv, ",%zu\n", wrong);
  }
  return wrong;
}

int bench_norm_rank(bctx_t *c, const bench_mm_opts_t *o) {
  nx_t x = {.c = c, .scatter = o->scatter, .dt = o->dtype, .stream = c->stream};
  norm_shape_t shapes[16];
  const int ns = parse_shapes(o->shapes, shapes, 16);
  if (ns == 0) {
    if (c->rank == 0) fprintf(stderr, "unknown --shapes %s (all, small, or ROWS,HIDDEN)\n", o->shapes);
    return 2;
  }
  if (!ask_columns(&x, o->algos)) return 2;
  if (x.dt != SYMCOLL_FLOAT32 && x.dt != SYMCOLL_FLOAT16 && x.dt != SYMCOLL_BFLOAT16) {
    if (c->rank == 0) fprintf(stderr, "%s takes fp32, fp16 or bf16 (-d)\n", symcoll_coll_name(coll_of(&x)));
    return 2;
  }
  x.fp8 = !o->fp8 ? FP8_NONE : !strcmp(o->fp8, "static") ? FP8_STATIC : !strcmp(o->fp8, "rows") ? FP8_ROWS : -1;
  if (x.fp8 < 0) {
    if (c->rank == 0) fprintf(stderr, "unknown --fp8 %s (static or rows)\n", o->fp8);
    return 2;
  }
  if (x.fp8) {
    const float scale = FP8_STATIC_SCALE;
    x.scale = bench_dev_alloc(c, sizeof scale);
    bench_dev_copy(c, x.scale, &scale, sizeof scale, 1);
  }
  if (symcoll_comm_split(c->comm, c->rank, 0, &x.self) != SYMCOLL_OK) bench_fail(c, "split", "one-rank groups");
  x.nccl_ok = c->gpu && peer_nccl_column(&x.nccl) &&
              x.nccl.init(c, &x.nccl, x.scatter ? &bench_reduce_scatter : &bench_all_reduce) == 0;
  FILE *csv = c->rank == 0 && o->csv ? fopen(o->csv, "w") : NULL;
  bool shown[NORM_COLS];
  for (int k = 0; k < NORM_COLS; k++) shown[k] = in_table(&x, k) && (k != COL_NCCL || x.nccl_ok);
  if (c->rank == 0) print_header(&x, o, shown, csv);
  size_t wrong_total = 0;
  for (int i = 0; i < ns; i++) {
    norm_row_t row;
    run_shape(&x, shapes[i], o->reps, o->calls, &row);
    if (c->rank == 0) wrong_total += print_row(&x, shapes[i], &row, shown, csv);
  }
  if (csv) fclose(csv);
  if (x.nccl_ok && x.nccl.fini) x.nccl.fini(c, &x.nccl);
  symcoll_comm_destroy(x.self);
  if (x.fp8) bench_dev_free(c, x.scale);
  return wrong_total ? 3 : 0;
}
