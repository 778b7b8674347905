/*
 * symcoll-bench: all-reduce latency of symcoll's algorithms and of peers, side by side, in
 * the same processes and the same run, with one timing method for every column:
 * GPU: CUDA-graph replays of -n calls timed with device events (median of -r replays);
 * CPU: -n back-to-back calls after a barrier, timed with the monotonic clock (median of -r).
 * Every column's result is checked against exact-result inputs (#wrong).
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
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

typedef struct {
  size_t min_bytes, max_bytes, step;
  symcoll_dtype_t dtype;
  symcoll_op_t op;
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
} opts_t;
static opts_t O;

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
  case 'k': case 'K': v *= 1024; break;
  case 'm': case 'M': v *= 1024 * 1024; break;
  case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
  }
  return (size_t)v;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Control communicator helpers: a float all-reduce doubles as a barrier. */
void bench_barrier(bctx_t *c) {
  float x = 0;
  symcoll_all_reduce(c->ctl, &x, &x, 1, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL);
}
static void ctl_reduce(bctx_t *c, double *v, int n, symcoll_op_t op) {
  float f[MAX_COLS * 2];
  for (int i = 0; i < n; i++) f[i] = (float)v[i];
  symcoll_all_reduce(c->ctl, f, f, (size_t)n, SYMCOLL_FLOAT32, op, NULL);
  for (int i = 0; i < n; i++) v[i] = f[i];
}
void bench_bcast(bctx_t *c, void *buf, size_t bytes) {
  if (c->rank == 0) memcpy(symcoll_mem_ptr(c->ctl_mem, c->rank), buf, bytes);
  bench_barrier(c);
  if (c->rank != 0) memcpy(buf, symcoll_mem_ptr(c->ctl_mem, 0), bytes);
  bench_barrier(c);
}

/* ---- exact-result data ------------------------------------------------------------------ */

static float value(int rank, size_t i) { return (float)((int)((i * 7 + (size_t)rank * 13) % 17) - 8); }
static void store(void *h, symcoll_dtype_t dt, size_t i, float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  if (dt == SYMCOLL_FLOAT32) ((float *)h)[i] = v;
  else if (dt == SYMCOLL_BFLOAT16) ((uint16_t *)h)[i] = (uint16_t)(u >> 16); /* exact for small ints */
  else { /* fp16 of a small integer */
    uint16_t sign = v < 0 ? 0x8000 : 0;
    float a = fabsf(v);
    uint16_t bits = 0;
    if (a != 0) {
      int e = 0;
      while (a >= 2) { a /= 2; e++; }
      bits = (uint16_t)(((e + 15) << 10) | (uint16_t)((a - 1) * 1024));
    }
    ((uint16_t *)h)[i] = sign | bits;
  }
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
  if (c->gpu) { cudaFree(p); return; }
#endif
  (void)c;
  free(p);
}
static void copy(bctx_t *c, void *d, const void *s, size_t b, int to_dev) {
#ifdef SYMCOLL_BENCH_CUDA
  if (c->gpu) {
    cudaMemcpyAsync(d, s, b, to_dev ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, (cudaStream_t)c->stream);
    cudaStreamSynchronize((cudaStream_t)c->stream);
    return;
  }
#endif
  (void)c;
  (void)to_dev;
  memcpy(d, s, b);
}

/* ---- symcoll columns ------------------------------------------------------------------- */

static int sc_init(bctx_t *c, column_t *col) {
  if (symcoll_algo_supported(c->comm, col->algo) == SYMCOLL_OK) return 0;
  snprintf(col->na, sizeof col->na, "n/a: %s",
           col->algo == SYMCOLL_ALGO_NCCL ? "no NCCL communicator held (SYMCOLL_NCCL=1 and one rank per GPU)"
                                          : "not available on this communicator");
  return 1;
}
static int sc_run(bctx_t *c, column_t *col, const void *send, void *recv, size_t count,
                  symcoll_dtype_t dt, symcoll_op_t op) {
  symcoll_coll_opts_t o;
  symcoll_coll_opts_init(&o);
  o.algo = col->algo;
  o.blocks = col->blocks;
  o.threads = col->threads;
  o.round_bytes = col->round_bytes;
  return symcoll_all_reduce_ex(c->comm, send, recv, count, dt, op, c->stream, &o) != SYMCOLL_OK;
}

/* ---- timing -------------------------------------------------------------------------------- */

/* Median microseconds per call of every usable column at `count`, on this rank. The columns
 * take turns rep by rep, so a change in the machine's state (a noisy neighbour, a migration)
 * hits all of them alike instead of whichever column happened to be running. */
static void time_columns(bctx_t *c, column_t *cols, int ncols, void *send, void *recv, size_t count,
                         double *us) {
  static double t[MAX_COLS][256];
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
    for (int i = 0; cols[k].run && i < O.warmup; i++) cols[k].run(c, &cols[k], send, recv, count, O.dtype, O.op);
#ifdef SYMCOLL_BENCH_CUDA
  if (c->gpu) {
    cudaStreamSynchronize(s);
    bench_barrier(c);
    for (int k = 0; O.graph && k < ncols; k++) {
      if (!cols[k].run) continue;
      cudaGraph_t g;
      cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
      for (int i = 0; i < O.iters; i++) cols[k].run(c, &cols[k], send, recv, count, O.dtype, O.op);
      if (cudaStreamEndCapture(s, &g) == cudaSuccess) {
        if (cudaGraphInstantiate(&exec[k], g, 0) != cudaSuccess) exec[k] = NULL;
        cudaGraphDestroy(g);
      }
    }
    bench_barrier(c);
    for (int k = 0; k < ncols; k++)
      if (exec[k]) cudaGraphLaunch(exec[k], s); /* warm replays */
    cudaStreamSynchronize(s);
  }
#endif
  for (int r = 0; r < reps; r++)
    for (int k = 0; k < ncols; k++) {
      if (!cols[k].run) continue;
      bench_barrier(c);
#ifdef SYMCOLL_BENCH_CUDA
      if (c->gpu) {
        cudaEventRecord(e0, s);
        if (exec[k]) cudaGraphLaunch(exec[k], s);
        else
          for (int i = 0; i < O.iters; i++) cols[k].run(c, &cols[k], send, recv, count, O.dtype, O.op);
        cudaEventRecord(e1, s);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        t[k][r] = 1e3 * ms / O.iters;
        continue;
      }
#endif
      double t0 = now_s();
      for (int i = 0; i < O.iters; i++) cols[k].run(c, &cols[k], send, recv, count, O.dtype, O.op);
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

/* Elements of recv that differ from the exact result (recv poisoned first). */
static double check_column(bctx_t *c, column_t *col, void *send, void *recv, size_t count, char *h,
                           char *want) {
  const size_t es = symcoll_dtype_size(O.dtype);
  for (size_t i = 0; i < count; i++) store(h, O.dtype, i, value(c->rank, i));
  copy(c, send, h, count * es, 1);
  memset(h, 0xff, count * es);
  if (!O.inplace) copy(c, recv, h, count * es, 1);
  if (col->run(c, col, send, recv, count, O.dtype, O.op) != 0) return (double)count;
  copy(c, h, recv, count * es, 0);
  double wrong = 0;
  for (size_t i = 0; i < count; i++) wrong += memcmp(h + i * es, want + i * es, es) != 0;
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
  const char *backend = c->gpu ? "cuda" : "host", *dt = symcoll_dtype_name(O.dtype);
  fprintf(f, "# symcoll tuning table, written by symcoll-tune: %s, %d ranks, %s\n", backend, c->nranks, dt);
  fprintf(f, "# backend nranks dtype max_bytes algo blocks threads round_bytes\n");
  printf("\n# chosen per size (runner-up in brackets) -> %s\n", O.tune);
  for (int i = 0; i < ntune; i++) {
    const column_t *b = &t->cols[tune_rows[i].best];
    /* A row covers its power-of-two bucket; the last one covers everything above. */
    if (i + 1 < ntune) fprintf(f, "%s %d %s %zu %s %d %d %zu\n", backend, c->nranks, dt, tune_rows[i].bytes,
                               symcoll_algo_name(b->algo), b->blocks, b->threads, b->round_bytes);
    else fprintf(f, "%s %d %s inf %s %d %d %zu\n", backend, c->nranks, dt, symcoll_algo_name(b->algo), b->blocks,
                 b->threads, b->round_bytes);
    printf("%12zu  %-18s %8.2f us", tune_rows[i].bytes, b->label, tune_rows[i].best_us);
    if (tune_rows[i].second >= 0)
      printf("   [%s %.2f us]", t->cols[tune_rows[i].second].label, tune_rows[i].second_us);
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
    fprintf(f, ",busbw_GBps,wrong\n");
    return;
  }
  fprintf(f, "%12s %10s %5s", "bytes", "elements", "dtype");
  for (int i = 0; i < t->ncols; i++) fprintf(f, " %9s", t->cols[i].name);
  fprintf(f, " %11s %7s %8s %s\n", "busbw(GB/s)", "#wrong", "speedup", "best");
}

static double total_wrong; /* rank 0: wrong elements over all columns and sizes */

/* A progress bar on the terminal (stderr, rank 0), by sizes done; time left assumes each size
 * costs its bytes' share of the whole range (large sizes dominate). */
static void progress(size_t done_bytes, double t0) {
  size_t total = 0, done = 0, n = 0, k = 0;
  for (size_t b = O.min_bytes; b <= O.max_bytes; b = O.step > 1 ? b * O.step : b + 1, n++) {
    total += b;
    if (b <= done_bytes) done += b, k++;
  }
  const int width = 30, fill = (int)(width * (double)done / (double)total);
  const double spent = now_s() - t0, left = done ? spent * (double)(total - done) / (double)done : 0;
  fprintf(stderr, "\r[%.*s%*s] %zu/%zu sizes, %.0f s, ~%.0f s left ", fill, "##############################",
          width - fill, "", k, n, spent, left);
}

static void run_rank(bctx_t *c) {
  table_t t = {0};
  build_columns(&t);
  for (int i = 0; i < t.ncols; i++)
    if (t.cols[i].init(c, &t.cols[i]) != 0) t.cols[i].run = NULL;
  const size_t es = symcoll_dtype_size(O.dtype);
  size_t maxc = O.max_bytes / es;
  symcoll_mem_t send_mem = NULL;
  char *send = NULL;
  if (O.send_symmetric && symcoll_mem_alloc(c->comm, maxc * es + 64, &send_mem) == SYMCOLL_OK)
    send = symcoll_mem_ptr(send_mem, c->rank);
  else
    send = dev_alloc(c, maxc * es + 64);
  char *recv = O.inplace ? send : dev_alloc(c, maxc * es + 64);
  char *h = malloc(maxc * es + 64), *want = malloc(maxc * es + 64);
  bench_barrier(c); /* every rank has allocated before any collective runs (see time_columns) */
  FILE *csv = NULL, *json = NULL;
  int json_rows = 0;
  if (c->rank == 0) {
    const char *mode = c->gpu ? (O.graph ? "CUDA-graph replays, device events" : "stream launches, device events")
                              : "back-to-back calls, monotonic clock";
    printf("# symcoll-bench: all-reduce %s %s, backend %s, %d ranks (%s mode)%s\n", symcoll_dtype_name(O.dtype),
           symcoll_op_name(O.op), c->gpu ? "cuda" : "host", c->nranks, O.mode,
           c->gpu && !strcmp(O.mode, "thread") && c->nranks > 1 ? ", EMULATION: ranks share GPUs, not a measure of NVLink" : "");
    printf("# time: median over %d reps of %d calls (%s; columns take turns), µs per call; %s%s\n", O.reps, O.iters, mode,
           O.inplace ? "in place" : "out of place",
           O.send_symmetric ? "; inputs in symmetric memory (zero-copy)" : "; inputs in ordinary memory (copied in)");
    for (int i = 0; i < t.ncols; i++)
      if (!t.cols[i].run) printf("# %s: %s\n", t.cols[i].name, t.cols[i].na);
    print_header(stdout, &t, false);
    if (O.csv && (csv = fopen(O.csv, "w"))) print_header(csv, &t, true);
    if (O.json && (json = fopen(O.json, "w")))
      fprintf(json, "{\"collective\": \"all_reduce\", \"backend\": \"%s\", \"nranks\": %d, \"mode\": \"%s\", "
                    "\"dtype\": \"%s\", \"op\": \"%s\", \"graph\": %d, \"iters\": %d, \"reps\": %d, \"rows\": [",
              c->gpu ? "cuda" : "host", c->nranks, O.mode, symcoll_dtype_name(O.dtype), symcoll_op_name(O.op),
              c->gpu && O.graph, O.iters, O.reps);
  }
  const double t0 = now_s();
  for (size_t bytes = O.min_bytes; bytes <= O.max_bytes; bytes = O.step > 1 ? bytes * O.step : bytes + 1) {
    size_t count = bytes / es;
    if (count == 0) continue;
    for (size_t i = 0; i < count; i++) {
      float acc = value(0, i);
      for (int r = 1; r < c->nranks; r++) {
        float v = value(r, i);
        acc = O.op == SYMCOLL_SUM ? acc + v : O.op == SYMCOLL_MAX ? fmaxf(acc, v) : fminf(acc, v);
      }
      store(want, O.dtype, i, acc);
    }
    double us[MAX_COLS], wrong = 0;
    for (int i = 0; i < t.ncols; i++) {
      if (!t.cols[i].run) continue;
      double w = check_column(c, &t.cols[i], send, recv, count, h, want);
      ctl_reduce(c, &w, 1, SYMCOLL_SUM);
      wrong += w;
    }
    time_columns(c, t.cols, t.ncols, send, recv, count, us);
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
    double busbw = best_sc >= 0 ? (double)bytes / (slow[best_sc] * 1e3) * 2.0 * (c->nranks - 1) / c->nranks : 0;
    if (isatty(2)) fprintf(stderr, "\r\033[K"); /* the progress bar gives way to the row */
    printf("%12zu %10zu %5s", bytes, count, symcoll_dtype_name(O.dtype));
    for (int i = 0; i < t.ncols; i++)
      if (slow[i] < 0) printf(" %9s", "n/a");
      else printf(" %9.2f", slow[i]);
    char speed[16] = "-";
    if (base >= 0 && best_sc >= 0) snprintf(speed, sizeof speed, "%.3f", slow[base] / slow[best_sc]);
    printf(" %11.2f %7.0f %8s %s\n", busbw, wrong, speed, best >= 0 ? t.cols[best].name : "-");
    fflush(stdout);
    if (csv) {
      fprintf(csv, "%zu,%zu,%s,%d,%s", bytes, count, symcoll_dtype_name(O.dtype), c->nranks, c->gpu ? "cuda" : "host");
      for (int i = 0; i < t.ncols; i++)
        if (slow[i] < 0) fprintf(csv, ",");
        else fprintf(csv, ",%.3f", slow[i]);
      fprintf(csv, ",%.3f,%.0f\n", busbw, wrong);
    }
    if (json) {
      fprintf(json, "%s\n  {\"bytes\": %zu, \"elements\": %zu, \"us\": {", json_rows++ ? "," : "", bytes, count);
      for (int i = 0, k = 0; i < t.ncols; i++)
        if (slow[i] >= 0) fprintf(json, "%s\"%s\": %.3f", k++ ? ", " : "", t.cols[i].name, slow[i]);
      fprintf(json, "}, \"busbw_GBps\": %.3f, \"wrong\": %.0f, \"best\": \"%s\"}", busbw, wrong,
              best >= 0 ? t.cols[best].name : "");
    }
    if (isatty(2)) progress(bytes, t0);
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
  if (!O.inplace) dev_free(c, recv);
  if (send_mem) symcoll_mem_free(send_mem);
  else dev_free(c, send);
  free(h);
  free(want);
}

/* ---- launching ranks --------------------------------------------------------------------------- */

static int ngpus;
static int rank_device(int rank) {
  if (strcmp(O.backend, "cuda") != 0) return SYMCOLL_DEVICE_HOST;
  return ngpus > 0 ? rank % ngpus : 0;
}

/* One core per rank, as mpirun binds by default: a rank that shares a core with its peer
 * waits for the scheduler instead of the peer. */
static void bind_rank(int rank) {
  if (!O.bind) return;
  cpu_set_t all, one;
  if (sched_getaffinity(0, sizeof all, &all) != 0) return;
  int n = CPU_COUNT(&all), k = rank % (n > 0 ? n : 1);
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
    if (CPU_ISSET(cpu, &all) && k-- == 0) {
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      sched_setaffinity(0, sizeof one, &one);
      return;
    }
}

static void rank_setup(bctx_t *c) {
  c->gpu = c->device != SYMCOLL_DEVICE_HOST;
  bind_rank(c->rank);
#ifdef SYMCOLL_BENCH_CUDA
  if (c->gpu) {
    cudaSetDevice(c->device);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    c->stream = s;
  }
#endif
  if (symcoll_mem_alloc(c->ctl, 4096, &c->ctl_mem) != SYMCOLL_OK) {
    fprintf(stderr, "rank %d: control memory failed\n", c->rank);
    exit(1);
  }
}

static void *rank_thread(void *p) {
  bctx_t *c = p;
  rank_setup(c);
  run_rank(c);
  return NULL;
}

static int run_threads(void) {
  int n = O.nranks, devs[SYMCOLL_MAX_RANKS];
  symcoll_comm_t comms[SYMCOLL_MAX_RANKS], ctls[SYMCOLL_MAX_RANKS];
  for (int r = 0; r < n; r++) devs[r] = rank_device(r);
  symcoll_status_t s = symcoll_comm_create_all(n, devs, comms);
  if (s == SYMCOLL_OK) s = symcoll_comm_create_all(n, NULL, ctls);
  if (s != SYMCOLL_OK) {
    fprintf(stderr, "symcoll_comm_create_all: %s\n", symcoll_status_string(s));
    return 1;
  }
  bctx_t c[SYMCOLL_MAX_RANKS];
  pthread_t th[SYMCOLL_MAX_RANKS];
  for (int r = 0; r < n; r++) {
    c[r] = (bctx_t){.comm = comms[r], .ctl = ctls[r], .rank = r, .nranks = n, .device = devs[r]};
    pthread_create(&th[r], NULL, rank_thread, &c[r]);
  }
  for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < n; r++) {
    symcoll_comm_destroy(comms[r]);
    symcoll_comm_destroy(ctls[r]);
  }
  return total_wrong > 0 ? 3 : 0;
}

static int run_one_process(const char *job, int rank, int n) {
  symcoll_config_t cfg;
  symcoll_config_init(&cfg);
  char ctl_job[96];
  snprintf(ctl_job, sizeof ctl_job, "%s.ctl", job);
  cfg.job_id = ctl_job;
  cfg.rank = rank;
  cfg.nranks = n;
  bctx_t c = {.rank = rank, .nranks = n, .device = rank_device(rank)};
  symcoll_status_t s = symcoll_comm_create(&cfg, &c.ctl);
  cfg.job_id = job;
  cfg.device = c.device;
#ifdef SYMCOLL_BENCH_CUDA
  if (c.device >= 0) cudaSetDevice(c.device);
#endif
  if (s == SYMCOLL_OK) s = symcoll_comm_create(&cfg, &c.comm);
  if (s != SYMCOLL_OK) {
    fprintf(stderr, "rank %d: symcoll_comm_create: %s\n", rank, symcoll_status_string(s));
    return 1;
  }
  rank_setup(&c);
  run_rank(&c);
  symcoll_comm_destroy(c.comm);
  symcoll_comm_destroy(c.ctl);
  return total_wrong > 0 ? 3 : 0;
}

static int run_processes(void) {
  /* Joined from a launcher (mpirun, torchrun, SYMCOLL_RANK): this process is one rank. */
  const char *envs[][3] = {{"SYMCOLL_RANK", "SYMCOLL_NRANKS", "SYMCOLL_JOB_ID"},
                           {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_ess_base_jobid"},
                           {"LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"}};
  for (size_t i = 0; i < sizeof envs / sizeof envs[0]; i++)
    if (getenv(envs[i][0]) && getenv(envs[i][1])) {
      char job[80];
      snprintf(job, sizeof job, "bench.%s", getenv(envs[i][2]) ? getenv(envs[i][2]) : "env");
      for (char *p = job; *p; p++)
        if (*p == '/' || *p == ' ') *p = '_';
      return run_one_process(job, atoi(getenv(envs[i][0])), atoi(getenv(envs[i][1])));
    }
  char job[64];
  snprintf(job, sizeof job, "bench.%d", (int)getpid());
  fflush(NULL);
  for (int r = 0; r < O.nranks; r++)
    if (fork() == 0) _exit(run_one_process(job, r, O.nranks));
  int st, bad = 0;
  while (wait(&st) > 0) bad |= !WIFEXITED(st) || WEXITSTATUS(st);
  return bad;
}

/* ---- merge and plot ------------------------------------------------------------------------------- */

int bench_merge(int nfiles, char **files, const char *out_csv, const char *plot);
int bench_plot(const char *csv, const char *png);

static void print_env(const char *name, const char *dflt, const char *help, void *arg) {
  (void)arg;
  printf("%-26s %-8s %s\n", name, *dflt ? dflt : "(unset)", help);
}

static void usage(const char *argv0) {
  printf("usage: %s [options]\n"
         "  -b SIZE / -e SIZE / -f FACTOR   size range in bytes (K, M, G suffixes) and step factor\n"
         "  -d fp32|fp16|bf16  -o sum|max|min  -n ITERS  -w WARMUP  -r REPS\n"
         "  -G 0|1             CUDA-graph mode (default 1)\n"
         "  --algo LIST        symcoll columns: auto,oneshot,twoshot (default all)\n"
         "  --peers LIST       peer columns: nccl (GPU), mpi (CPU, under mpirun)\n"
         "  --backend cuda|host  --ranks N  --mode process|thread  --inplace\n"
         "  --no-bind          do not pin rank r to the r-th allowed CPU\n"
         "  --send-symmetric   inputs in symmetric memory (symcoll's zero-copy one-shot)\n"
         "  --csv FILE  --json FILE  --plot FILE.png  --merge A.csv B.csv ... (joins tables of one run)\n"
         "  --tune FILE        write the fastest symcoll column per size as a tuning table\n"
         "  --env              print every SYMCOLL_* knob with its default and help\n", argv0);
}

/* GPUs here, asked of a throw-away child: a process that initialises CUDA and then forks
 * ranks leaves them unable to use CUDA. */
static int gpu_count(void) {
#ifdef SYMCOLL_BENCH_CUDA
  int fds[2], n = 0;
  if (pipe(fds) != 0) return 0;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int k = 0;
    if (cudaGetDeviceCount(&k) != cudaSuccess) k = 0;
    _exit(write(fds[1], &k, sizeof k) == sizeof k ? 0 : 1);
  }
  close(fds[1]);
  if (read(fds[0], &n, sizeof n) != sizeof n) n = 0;
  close(fds[0]);
  waitpid(pid, NULL, 0);
  return n;
#else
  return 0;
#endif
}

int main(int argc, char **argv) {
  peer_mpi_init(&argc, &argv);
  int ngpu = gpu_count();
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  O = (opts_t){.min_bytes = 8192, .max_bytes = 2 << 20, .step = 2, .dtype = SYMCOLL_BFLOAT16,
               .op = SYMCOLL_SUM, .iters = 20, .warmup = 5, .reps = 20, .graph = 1,
               .backend = ngpu > 0 ? "cuda" : "host", .mode = "process", .bind = true};
  snprintf(O.algos, sizeof O.algos, "%s", ngpu > 0 ? "oneshot,oneshot_db,lamport,twoshot,auto" : "oneshot,twoshot,auto");
  snprintf(O.peers, sizeof O.peers, "%s", peer_mpi_active() ? "mpi" : "nccl");
  O.nranks = ngpu > 0 ? ngpu : (int)(cores < 2 ? 2 : cores > 8 ? 8 : cores);
  char **merge = NULL;
  int nmerge = 0, warmup_set = 0, reps_set = 0, algos_set = 0, peers_set = 0, range_set = 0;
  (void)algos_set;
  (void)peers_set;
  (void)range_set;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define TAKE (i++, v)
    if (!strcmp(a, "-b") && v) O.min_bytes = parse_size(TAKE), range_set = 1;
    else if (!strcmp(a, "-e") && v) O.max_bytes = parse_size(TAKE), range_set = 1;
    else if (!strcmp(a, "-f") && v) O.step = (size_t)atoi(TAKE);
    else if (!strcmp(a, "-n") && v) O.iters = atoi(TAKE);
    else if (!strcmp(a, "-w") && v) O.warmup = atoi(TAKE), warmup_set = 1;
    else if (!strcmp(a, "-r") && v) O.reps = atoi(TAKE), reps_set = 1;
    else if (!strcmp(a, "-G") && v) O.graph = atoi(TAKE);
    else if (!strcmp(a, "-d") && v) {
      const char *d = TAKE;
      O.dtype = !strcmp(d, "fp32") || !strcmp(d, "float") ? SYMCOLL_FLOAT32 : !strcmp(d, "fp16") ? SYMCOLL_FLOAT16 : SYMCOLL_BFLOAT16;
    } else if (!strcmp(a, "-o") && v) {
      const char *o = TAKE;
      O.op = !strcmp(o, "max") ? SYMCOLL_MAX : !strcmp(o, "min") ? SYMCOLL_MIN : SYMCOLL_SUM;
    } else if (!strcmp(a, "--algo") && v) snprintf(O.algos, sizeof O.algos, "%s", TAKE), algos_set = 1;
    else if (!strcmp(a, "--peers") && v) snprintf(O.peers, sizeof O.peers, "%s", TAKE);
    else if (!strcmp(a, "--backend") && v) O.backend = TAKE;
    else if (!strcmp(a, "--ranks") && v) O.nranks = atoi(TAKE);
    else if (!strcmp(a, "--mode") && v) O.mode = TAKE;
    else if (!strcmp(a, "--csv") && v) O.csv = TAKE;
    else if (!strcmp(a, "--json") && v) O.json = TAKE;
    else if (!strcmp(a, "--plot") && v) O.plot = TAKE;
    else if (!strcmp(a, "--inplace")) O.inplace = true;
    else if (!strcmp(a, "--send-symmetric")) O.send_symmetric = true;
    else if (!strcmp(a, "--no-bind")) O.bind = false;
    else if (!strcmp(a, "--tune") && v) O.tune = TAKE;
    else if (!strcmp(a, "--env")) {
      symcoll_env_foreach(print_env, NULL);
      return 0;
    } else if (!strcmp(a, "--merge")) {
      merge = &argv[i + 1];
      while (i + 1 < argc && argv[i + 1][0] != '-') { i++; nmerge++; }
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(argv[0]);
      return 0;
    } else {
      fprintf(stderr, "unknown option %s\n", a);
      usage(argv[0]);
      return 2;
    }
  }
  if (merge) return bench_merge(nmerge, merge, O.csv, O.plot);
#ifdef SYMCOLL_TUNE_TOOL
  /* symcoll-tune: candidates only, a wide size range, the table where the library looks. */
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
  if (!algos_set)
    snprintf(O.algos, sizeof O.algos, "%s",
             !strcmp(O.backend, "cuda") ? "oneshot,oneshot_db,lamport,twoshot,oneshot_db@0:256,lamport@0:256,twoshot@0:256,oneshot_db@0:1024,lamport@0:1024,twoshot@0:1024"
                                         : "oneshot,twoshot");
  /* NCCL through symcoll's engine is a candidate where NCCL runs: one process per GPU. */
  if (!algos_set && !strcmp(O.backend, "cuda") && !strcmp(O.mode, "process") && O.nranks > 1 && O.nranks <= ngpu) {
    strncat(O.algos, ",nccl", sizeof O.algos - strlen(O.algos) - 1);
    setenv("SYMCOLL_NCCL", "1", 0);
  }
  if (!peers_set) O.peers[0] = 0;
  if (!range_set) {
    O.min_bytes = 1024;
    O.max_bytes = 64u << 20;
  }
#endif
  if (O.iters < 1 || O.reps < 1 || O.nranks < 1 || O.nranks > SYMCOLL_MAX_RANKS || O.min_bytes < 1 ||
      O.max_bytes < O.min_bytes) {
    usage(argv[0]);
    return 2;
  }
  ngpus = ngpu;
  if (!strcmp(O.backend, "cuda") && ngpu == 0) {
    printf("SKIPPED: no GPU here (use --backend host)\n");
    return 77;
  }
  if (strcmp(O.backend, "cuda") != 0) {
    O.graph = 0;
    if (!warmup_set) O.warmup = 20; /* first touches of new pages dominate otherwise */
    if (!reps_set) O.reps = 100;
  }
  /* Thread-mode ranks sharing a GPU need a hardware queue per stream (symcoll_comm_create_all);
   * not for processes, where MPS clients asking for 32 queues each can stall its server. */
  if (!strcmp(O.mode, "thread")) setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  int rc = !strcmp(O.mode, "thread") ? run_threads() : run_processes();
  peer_mpi_finalize();
  if (rc == 0 && O.plot && O.csv && !getenv("OMPI_COMM_WORLD_RANK")) rc = bench_plot(O.csv, O.plot);
  else if (rc == 0 && O.plot && O.csv && atoi(getenv("OMPI_COMM_WORLD_RANK")) == 0) rc = bench_plot(O.csv, O.plot);
  return rc;
}
