/*
 * symcoll-bench --coll all_gather_matmul | matmul_reduce_scatter: the seed's second
 * benchmark. Rows are shapes (per-rank M, N, K), not sizes: Helion's test shape and kraken's
 * table (--shapes helion|kraken|all), or --shape M,N,K. Columns, in the same processes,
 * taking turns rep by rep:
 *   overlap, sequential, auto   symcoll_all_gather_matmul / symcoll_matmul_reduce_scatter
 *   nccl+cublas                 (GPU) ncclAllGather then cuBLASLt (all_gather_matmul), or
 *                               cuBLASLt then ncclReduceScatter, through the NCCL peer column
 *   gemm                        the GEMM alone, of the whole call's shape, nothing moved: at one
 *                               rank the floor every column is measured against
 * GPU: each call captured in a CUDA graph, replayed once per rep between device events, with
 * L2 flushed before each rep (a 256 MiB memset, outside the events), as kraken's benchmark
 * flushes; CPU: wall clock of one call. Median of the reps. Inputs are small integers, so
 * every column's result is exact and is compared bit for bit with the others'.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "exact.h"

#ifdef SYMCOLL_BENCH_CUDA
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#endif

#define MM_COLS 5
enum { COL_OVERLAP, COL_SEQUENTIAL, COL_AUTO, COL_NCCL, COL_GEMM };
static const char *const col_names[MM_COLS] = {"overlap", "sequential", "auto", "nccl+cublas", "gemm"};

typedef struct {
  size_t m, n, k;
} mm_shape_t;

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* ---- the GEMM-alone column and the NCCL column's GEMM ----------------------------------- */

#ifdef SYMCOLL_BENCH_CUDA
typedef struct {
  cublasLtHandle_t h;
  void *ws;
} lt_t;

static int lt_gemm(lt_t *lt, const void *a, const void *b, void *c, size_t m, size_t n, size_t k, symcoll_dtype_t dt,
                   cudaStream_t s) {
  const cudaDataType_t t = dt == SYMCOLL_BFLOAT16 ? CUDA_R_16BF : dt == SYMCOLL_FLOAT16 ? CUDA_R_16F : CUDA_R_32F;
  cublasLtMatmulDesc_t d;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulPreference_t p;
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  size_t wsb = 32u << 20;
  cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatrixLayoutCreate(&la, t, n, k, (int64_t)n);
  cublasLtMatrixLayoutCreate(&lb, t, k, m, (int64_t)k);
  cublasLtMatrixLayoutCreate(&lc, t, n, m, (int64_t)n);
  cublasLtMatmulPreferenceCreate(&p);
  cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
  int rc =
      cublasLtMatmulAlgoGetHeuristic(lt->h, d, la, lb, lc, lc, p, 1, &res, &found) != CUBLAS_STATUS_SUCCESS || !found;
  const float one = 1, zero = 0;
  if (!rc)
    rc = cublasLtMatmul(lt->h, d, &one, b, la, a, lb, &zero, c, lc, c, lc, &res.algo, lt->ws, wsb, s) !=
         CUBLAS_STATUS_SUCCESS;
  cublasLtMatmulPreferenceDestroy(p);
  cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(d);
  return rc;
}
#endif

/* ---- buffers ----------------------------------------------------------------------------- */

typedef struct {
  bctx_t *c;
  bool ag;
  symcoll_dtype_t dt;
  mm_shape_t sh;
  size_t es, a_elems, b_elems, c_elems, full_c_elems;
  char *a, *b, *cbuf[MM_COLS], *tmp, *flush;
  void *stream;
  column_t nccl;
  bool nccl_ok;
#ifdef SYMCOLL_BENCH_CUDA
  lt_t lt;
#endif
} mm_t;

static void *mm_alloc(mm_t *x, size_t bytes) {
#ifdef SYMCOLL_BENCH_CUDA
  if (x->c->gpu) {
    void *p = NULL;
    return cudaMalloc(&p, bytes ? bytes : 1) == cudaSuccess ? p : NULL;
  }
#endif
  (void)x;
  return calloc(1, bytes ? bytes : 1);
}

static void mm_free(mm_t *x, void *p) {
#ifdef SYMCOLL_BENCH_CUDA
  if (x->c->gpu) {
    cudaFree(p);
    return;
  }
#endif
  (void)x;
  free(p);
}

/* Host to device (to_dev) or back; a plain copy on CPU ranks. */
static void mm_copy(mm_t *x, void *dst, const void *src, size_t bytes, int to_dev) {
#ifdef SYMCOLL_BENCH_CUDA
  if (x->c->gpu) {
    cudaMemcpy(dst, src, bytes, to_dev ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
    return;
  }
#endif
  (void)x, (void)to_dev;
  memcpy(dst, src, bytes);
}

/* ---- one call of a column ------------------------------------------------------------------- */

static int mm_call(mm_t *x, int col, char *err, size_t errn) {
  bctx_t *c = x->c;
  const mm_shape_t s = x->sh;
  const size_t rows = s.m * (size_t)c->nranks;
  if (col <= COL_AUTO) {
    symcoll_matmul_opts_t o;
    symcoll_matmul_opts_init(&o);
    o.algo = col == COL_OVERLAP      ? SYMCOLL_ALGO_OVERLAP
             : col == COL_SEQUENTIAL ? SYMCOLL_ALGO_SEQUENTIAL
                                     : SYMCOLL_ALGO_AUTO;
    symcoll_status_t st =
        x->ag ? symcoll_all_gather_matmul(c->comm, x->a, x->b, x->cbuf[col], s.m, s.n, s.k, x->dt, &o, x->stream)
              : symcoll_matmul_reduce_scatter(c->comm, x->a, x->b, x->cbuf[col], rows, s.n, s.k, x->dt, &o, x->stream);
    if (st != SYMCOLL_OK) snprintf(err, errn, "%.*s", (int)(errn > 0 ? errn - 1 : 0), bench_status(st));
    return st != SYMCOLL_OK;
  }
#ifdef SYMCOLL_BENCH_CUDA
  cudaStream_t cs = (cudaStream_t)x->stream;
  if (col == COL_GEMM)
    return lt_gemm(&x->lt, x->ag ? x->tmp : x->a, x->b, x->cbuf[col], rows, s.n, s.k, x->dt, cs)
               ? (snprintf(err, errn, "cublasLtMatmul failed"), 1)
               : 0;
  /* NCCL + cuBLASLt: the unfused pair users run today. */
  if (x->ag) {
    if (x->nccl.run(c, &x->nccl, &bench_all_gather, x->a, x->tmp, s.m * s.k, x->dt, SYMCOLL_SUM))
      return snprintf(err, errn, "%.*s", (int)(errn > 0 ? errn - 1 : 0), x->nccl.err), 1;
    return lt_gemm(&x->lt, x->tmp, x->b, x->cbuf[col], rows, s.n, s.k, x->dt, cs)
               ? (snprintf(err, errn, "cublasLtMatmul failed"), 1)
               : 0;
  }
  if (lt_gemm(&x->lt, x->a, x->b, x->tmp, rows, s.n, s.k, x->dt, cs))
    return snprintf(err, errn, "cublasLtMatmul failed"), 1;
  if (x->nccl.run(c, &x->nccl, &bench_reduce_scatter, x->tmp, x->cbuf[col], s.m * s.n, x->dt, SYMCOLL_SUM))
    return snprintf(err, errn, "%s", x->nccl.err), 1;
  return 0;
#else
  snprintf(err, errn, "not built");
  return 1;
#endif
}

/* ---- a shape ------------------------------------------------------------------------------------ */

typedef struct {
  bool usable[MM_COLS];
  double us[MM_COLS];
  size_t wrong[MM_COLS];
} mm_row_t;

static void fill_inputs(mm_t *x, uint32_t seed) {
  bctx_t *c = x->c;
  const size_t es = x->es;
  char *h = malloc((x->a_elems > x->b_elems ? x->a_elems : x->b_elems) * es);
  /* Small integers (|a| <= 1, |b| <= 1, mostly zero): fp32 sums of them are exact in any order. */
  for (size_t i = 0; i < x->a_elems; i++) {
    const uint32_t v = (uint32_t)(i * 2654435761u) ^ seed ^ (uint32_t)c->rank * 97u;
    exact_store(h, x->dt, i, v % 7 == 0 ? 1.0 : v % 7 == 1 ? -1.0 : 0.0);
  }
  mm_copy(x, x->a, h, x->a_elems * es, 1);
  for (size_t i = 0; i < x->b_elems; i++) {
    const uint32_t v = (uint32_t)(i * 40503u) ^ (seed >> 3) ^ (uint32_t)c->rank * 31u;
    exact_store(h, x->dt, i, v % 5 == 0 ? 1.0 : v % 5 == 1 ? -1.0 : 0.0);
  }
  mm_copy(x, x->b, h, x->b_elems * es, 1);
  free(h);
}

static void run_shape(mm_t *x, const mm_shape_t sh, int reps, mm_row_t *row) {
  bctx_t *c = x->c;
  const int n = c->nranks;
  x->sh = sh;
  x->es = symcoll_dtype_size(x->dt);
  const size_t rows = sh.m * (size_t)n;
  x->a_elems = x->ag ? sh.m * sh.k : rows * sh.k;
  x->b_elems = sh.k * sh.n;
  x->full_c_elems = rows * sh.n;
  x->c_elems = x->ag ? rows * sh.n : sh.m * sh.n;
  memset(row, 0, sizeof *row);
  x->a = mm_alloc(x, x->a_elems * x->es), x->b = mm_alloc(x, x->b_elems * x->es);
  x->tmp = mm_alloc(x, (x->ag ? rows * sh.k : rows * sh.n) * x->es);
  for (int k = 0; k < MM_COLS; k++) x->cbuf[k] = mm_alloc(x, x->full_c_elems * x->es);
  fill_inputs(x, 12345u);
  bool usable[MM_COLS] = {true, true, true, x->nccl_ok, c->gpu};
  /* The GEMM alone multiplies the whole gathered A (all_gather_matmul): gather it once. */
  if (x->ag && c->gpu) symcoll_all_gather(c->comm, x->a, x->tmp, sh.m * sh.k, x->dt, x->stream);
  char err[512];
  double *t = malloc(sizeof(double) * (size_t)reps * MM_COLS);
#ifdef SYMCOLL_BENCH_CUDA
  cudaGraphExec_t exec[MM_COLS] = {0};
  cudaEvent_t e0 = NULL, e1 = NULL;
  cudaStream_t s = (cudaStream_t)x->stream;
  if (c->gpu) {
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    cudaStreamSynchronize(s);
  }
#endif
  for (int k = 0; k < MM_COLS; k++) /* warm-up: set-up, first-use allocations, kernels loaded */
    for (int i = 0; usable[k] && i < 2; i++) {
      bench_barrier(c);
      if (mm_call(x, k, err, sizeof err)) {
        char what[160];
        snprintf(what, sizeof what, "%s %s %zux%zux%zu", col_names[k],
                 x->ag ? "all_gather_matmul" : "matmul_reduce_scatter", sh.m, sh.n, sh.k);
        bench_fail(c, what, err);
      }
#ifdef SYMCOLL_BENCH_CUDA
      if (c->gpu) {
        cudaStreamSynchronize(s);
        if (symcoll_comm_check(c->comm) != SYMCOLL_OK)
          bench_fail(c, col_names[k], bench_status(symcoll_comm_check(c->comm)));
      }
#endif
    }
#ifdef SYMCOLL_BENCH_CUDA
  if (c->gpu) {
    bench_barrier(c);
    for (int k = 0; k < MM_COLS; k++) {
      if (!usable[k]) continue;
      cudaGraph_t g;
      cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
      int bad = mm_call(x, k, err, sizeof err);
      if (cudaStreamEndCapture(s, &g) == cudaSuccess && !bad) {
        if (cudaGraphInstantiate(&exec[k], g, 0) != cudaSuccess) exec[k] = NULL;
        cudaGraphDestroy(g);
      }
    }
    bench_barrier(c);
  }
#endif
  for (int r = 0; r < reps; r++)
    for (int k = 0; k < MM_COLS; k++) {
      if (!usable[k]) continue;
#ifdef SYMCOLL_BENCH_CUDA
      if (c->gpu) {
        cudaMemsetAsync(x->flush, r & 0xff, 256u << 20, s); /* L2 out of the measurement */
        cudaStreamSynchronize(s);
        bench_barrier(c);
        cudaEventRecord(e0, s);
        if (exec[k])
          cudaGraphLaunch(exec[k], s);
        else if (mm_call(x, k, err, sizeof err))
          bench_fail(c, col_names[k], err);
        cudaEventRecord(e1, s);
        cudaError_t e = cudaEventSynchronize(e1);
        if (e != cudaSuccess) bench_fail(c, col_names[k], cudaGetErrorString(e));
        if (symcoll_comm_check(c->comm) != SYMCOLL_OK)
          bench_fail(c, col_names[k], bench_status(symcoll_comm_check(c->comm)));
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        t[(size_t)k * (size_t)reps + (size_t)r] = 1e3 * ms;
        continue;
      }
#endif
      bench_barrier(c);
      const double t0 = wall_s();
      if (mm_call(x, k, err, sizeof err)) bench_fail(c, col_names[k], err);
      t[(size_t)k * (size_t)reps + (size_t)r] = 1e6 * (wall_s() - t0);
    }
  /* Results: every column against the first usable one, bit for bit (each of the call's own
   * output; the GEMM alone of all_gather_matmul computes the same C). */
  char *ref = malloc(x->full_c_elems * x->es), *got = malloc(x->full_c_elems * x->es);
#ifdef SYMCOLL_BENCH_CUDA
  if (c->gpu) cudaStreamSynchronize(s);
#endif
  mm_copy(x, ref, x->cbuf[COL_OVERLAP], x->c_elems * x->es, 0);
  for (int k = 0; k < MM_COLS; k++) {
    row->usable[k] = usable[k];
    row->us[k] = NAN;
    if (!usable[k]) continue;
    qsort(t + (size_t)k * (size_t)reps, (size_t)reps, sizeof(double), cmp_d);
    row->us[k] = t[(size_t)k * (size_t)reps + (size_t)reps / 2];
    if (k == COL_GEMM && !x->ag) continue; /* the unreduced product: nothing to compare */
    mm_copy(x, got, x->cbuf[k], x->c_elems * x->es, 0);
    for (size_t i = 0; i < x->c_elems; i++) row->wrong[k] += memcmp(got + i * x->es, ref + i * x->es, x->es) != 0;
  }
  free(ref), free(got), free(t);
#ifdef SYMCOLL_BENCH_CUDA
  for (int k = 0; k < MM_COLS; k++)
    if (exec[k]) cudaGraphExecDestroy(exec[k]);
  if (e0) cudaEventDestroy(e0), cudaEventDestroy(e1);
#endif
  bench_barrier(c);
  mm_free(x, x->a), mm_free(x, x->b), mm_free(x, x->tmp);
  for (int k = 0; k < MM_COLS; k++) mm_free(x, x->cbuf[k]);
}

/* ---- the table ---------------------------------------------------------------------------------- */

static int parse_shapes(const char *what, int nranks, mm_shape_t *out, int max) {
  int n = 0;
  if (!strcmp(what, "helion") || !strcmp(what, "all")) /* M = 4096 in total */
    out[n++] = (mm_shape_t){(size_t)(4096 / nranks), 6656, 16384};
  if (!strcmp(what, "kraken") || !strcmp(what, "all")) {
    const size_t ms[] = {128, 256, 512, 1024}, ks[] = {4096, 8192, 16384, 32768};
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4 && n < max; j++) out[n++] = (mm_shape_t){ms[i], 6656, ks[j]};
  }
  if (!strcmp(what, "small")) { /* quick: CPU ranks and smoke tests */
    const size_t ms[] = {16, 64, 256};
    for (int i = 0; i < 3; i++) out[n++] = (mm_shape_t){ms[i], 512, 512};
  }
  size_t m, nn, k;
  if (n == 0 && sscanf(what, "%zu,%zu,%zu", &m, &nn, &k) == 3) out[n++] = (mm_shape_t){m, nn, k};
  return n;
}

int bench_matmul_rank(bctx_t *c, const bench_mm_opts_t *o) {
  mm_t x = {.c = c, .ag = o->all_gather, .dt = o->dtype, .stream = c->stream};
  mm_shape_t shapes[32];
  const int ns = parse_shapes(o->shapes, c->nranks, shapes, 32);
  if (ns == 0) {
    if (c->rank == 0) fprintf(stderr, "unknown --shapes %s (helion, kraken, all, small, or M,N,K)\n", o->shapes);
    return 2;
  }
  if (symcoll_coll_algo_supported(c->comm, x.ag ? SYMCOLL_COLL_ALL_GATHER_MATMUL : SYMCOLL_COLL_MATMUL_REDUCE_SCATTER,
                                  SYMCOLL_ALGO_OVERLAP) != SYMCOLL_OK) {
    if (c->rank == 0) fprintf(stderr, "the GEMM operations are unsupported here (no GEMM library)\n");
    return 2;
  }
#ifdef SYMCOLL_BENCH_CUDA
  if (c->gpu) {
    cublasLtCreate(&x.lt.h);
    cudaMalloc(&x.lt.ws, 32u << 20);
    cudaMalloc((void **)&x.flush, 256u << 20);
  }
#endif
  x.nccl_ok = c->gpu && peer_nccl_column(&x.nccl) &&
              x.nccl.init(c, &x.nccl, x.ag ? &bench_all_gather : &bench_reduce_scatter) == 0;
  FILE *csv = c->rank == 0 && o->csv ? fopen(o->csv, "w") : NULL;
  const char *coll = x.ag ? "all_gather_matmul" : "matmul_reduce_scatter";
  /* The columns this run has (the same for every row): NCCL + cuBLASLt and the GEMM alone
   * are GPU columns. */
  const bool shown[MM_COLS] = {true, true, true, x.nccl_ok, c->gpu};
  if (c->rank == 0) {
    printf(
        "# %s, %s, %d ranks (%s), %s\n# us per call (median of %d); in brackets the whole call's rate, "
        "2 m n k nranks flop / time (G = GFLOP/s, T = TFLOP/s)\n",
        coll, symcoll_dtype_name(x.dt), c->nranks, o->mode, o->machine, o->reps);
    printf(
        "# overlap: the collective moves chunks while the GEMMs of those already there run; sequential: the "
        "collective, then one GEMM; auto: what the tuning table picks\n");
    if (x.nccl_ok)
      printf("# nccl+cublas: ncclAllGather / ncclReduceScatter with cuBLASLt; gemm: the GEMM alone (the floor)\n");
    else if (c->gpu)
      printf(
          "# gemm: the GEMM alone (the floor); no nccl+cublas column: ranks share a GPU (NCCL takes one rank per "
          "GPU)\n");
    printf(
        "# ovl/seq: overlap's time over sequential's (below 1: overlapping pays); #wrong: elements that differ between "
        "the columns (must be 0)\n");
    printf("%6s %6s %6s", "m", "n", "k");
    for (int k = 0; k < MM_COLS; k++)
      if (shown[k]) printf(" %20s", col_names[k]);
    printf(" %8s %6s\n", "ovl/seq", "#wrong");
    if (csv) {
      fprintf(csv, "coll,dtype,nranks,m_shard,n,k");
      for (int k = 0; k < MM_COLS; k++) fprintf(csv, ",%s_us", col_names[k]);
      fprintf(csv, ",wrong\n");
    }
  }
  size_t wrong_total = 0;
  for (int i = 0; i < ns; i++) {
    mm_row_t row;
    run_shape(&x, shapes[i], o->reps, &row);
    if (c->rank != 0) continue;
    const double flop = 2.0 * (double)shapes[i].m * (double)c->nranks * (double)shapes[i].n * (double)shapes[i].k;
    size_t wrong = 0;
    printf("%6zu %6zu %6zu", shapes[i].m, shapes[i].n, shapes[i].k);
    for (int k = 0; k < MM_COLS; k++) {
      wrong += row.wrong[k];
      if (!shown[k]) continue;
      if (!row.usable[k]) {
        printf(" %20s", "failed");
        continue;
      }
      const double rate = flop / (row.us[k] * 1e-6);
      printf(" %11.1f (%5.1f %c)", row.us[k], rate >= 1e12 ? rate / 1e12 : rate / 1e9, rate >= 1e12 ? 'T' : 'G');
    }
    printf(" %8.3f %6zu\n", row.us[COL_OVERLAP] / row.us[COL_SEQUENTIAL], wrong);
    fflush(stdout);
    wrong_total += wrong;
    if (csv) {
      fprintf(csv, "%s,%s,%d,%zu,%zu,%zu", coll, symcoll_dtype_name(x.dt), c->nranks, shapes[i].m, shapes[i].n,
              shapes[i].k);
      for (int k = 0; k < MM_COLS; k++) fprintf(csv, row.usable[k] ? ",%.2f" : ",", row.us[k]);
      fprintf(csv, ",%zu\n", wrong);
    }
  }
  if (csv) fclose(csv);
  if (x.nccl_ok && x.nccl.fini) x.nccl.fini(c, &x.nccl);
#ifdef SYMCOLL_BENCH_CUDA
  if (c->gpu) {
    cublasLtDestroy(x.lt.h);
    cudaFree(x.lt.ws);
    cudaFree(x.flush);
  }
#endif
  return wrong_total ? 3 : 0;
}
