/* What a run writes, on rank 0: the header lines and the table on stdout, --csv and --json
 * files, the progress on stderr, and --tune's table (the fastest symcoll column per size). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "launch.h"

/* This machine for titles: the CPU model, or GPU 0's name on GPU runs. */
static char cpu_model[128] = "unknown CPU", gpu_model[128] = "";

int bench_report_probe(void) {
  const int ngpu = sc_gpu_count(gpu_model, sizeof gpu_model, NULL, 0);
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if ((!strncmp(line, "model name", 10) || !strncmp(line, "Model name", 10)) && strchr(line, ':')) {
      snprintf(cpu_model, sizeof cpu_model, "%s", strchr(line, ':') + 2);
      cpu_model[strcspn(cpu_model, "\n")] = 0;
      break;
    }
  if (f) fclose(f);
  return ngpu;
}

const char *bench_report_machine(bool gpu) {
  return gpu && gpu_model[0] ? gpu_model : cpu_model;
}

void bench_report_plot_title(char *title, size_t n, bool gpu) {
  const bench_opts_t *o = &bench_opts;
  snprintf(title, n, "%s %s%s%s, %d ranks (%s mode), %s%s", bench_coll_label(), symcoll_dtype_name(o->dtype),
           o->coll->has_op ? " " : "", o->coll->has_op ? symcoll_op_name(o->op) : "", o->nranks, o->mode,
           bench_report_machine(gpu),
           gpu && !strcmp(o->mode, "thread") && o->nranks > 1 ? " (EMULATION: ranks share GPUs)" : "");
}

/* ---- --tune FILE: the fastest symcoll column per size, as a tuning table (docs/tuning.md) ---- */

typedef struct {
  size_t bytes;
  int best, second;
  double best_us, second_us;
} tune_row_t;
static tune_row_t tune_rows[64];
static int ntune;

/* A size's best symcoll column, and the runner-up among the forced algorithms. */
static void tune_record(const bench_table_t *t, size_t bytes, const double *slow, int best_sc) {
  int second = -1;
  for (int i = 0; i < t->ncols; i++)
    if (i != best_sc && t->cols[i].is_symcoll && t->cols[i].algo != SYMCOLL_ALGO_AUTO && slow[i] >= 0 &&
        (second < 0 || slow[i] < slow[second]))
      second = i;
  tune_rows[ntune++] = (tune_row_t){bytes, best_sc, second, slow[best_sc], second >= 0 ? slow[second] : 0};
}

static void write_tune(bctx_t *c, const bench_table_t *t) {
  const char *path = bench_opts.tune;
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "cannot write %s\n", path);
    return;
  }
  const char *backend = c->gpu ? "cuda" : "host", *dt = symcoll_dtype_name(bench_opts.dtype),
             *coll = bench_coll_label();
  fprintf(f, "# symcoll tuning table, written by symcoll-tune: %s, %s, %d ranks, %s\n", coll, backend, c->nranks, dt);
  fprintf(f, "# coll backend nranks dtype max_bytes algo blocks threads round_bytes\n");
  printf("\n# chosen per size (runner-up in brackets) -> %s\n", path);
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

/* ---- headers and progress ----------------------------------------------------------------- */

static void print_header(FILE *f, const bench_table_t *t, bool csv) {
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

/* Progress, by sizes done; time left assumes each size costs its bytes' share of the whole
 * range (large sizes dominate). On a terminal a bar redrawn in place; otherwise a line at
 * most every 10 s, so that logs of long runs show them alive. */
static void progress(size_t done_bytes, double t0) {
  const bench_opts_t *o = &bench_opts;
  static double last;
  if (last == 0) last = t0;
  size_t total = 0, done = 0, n = 0, k = 0;
  for (size_t b = o->min_bytes; b <= o->max_bytes; b = o->step > 1 ? b * o->step : b + 1, n++) {
    total += b;
    if (b <= done_bytes) done += b, k++;
  }
  const double now = bench_now(), spent = now - t0, left = done ? spent * (double)(total - done) / (double)done : 0;
  if (isatty(2)) {
    const int width = 30, fill = (int)(width * (double)done / (double)total);
    fprintf(stderr, "\r[%.*s%*s] %zu/%zu sizes, %.0f s, ~%.0f s left ", fill, "##############################",
            width - fill, "", k, n, spent, left);
  } else if (now - last >= 10 && k < n) {
    last = now;
    fprintf(stderr, "symcoll-bench: %zu/%zu sizes done in %.0f s, ~%.0f s left\n", k, n, spent, left);
  }
}

/* The run's description: what is timed, how, and what the table's columns mean. */
static void print_preamble(bctx_t *c, const bench_table_t *t) {
  const bench_opts_t *o = &bench_opts;
  const char *mode = c->gpu ? (o->enqueue ? "host time to issue eager calls (enqueue)"
                               : o->graph ? "CUDA-graph replays, device events"
                                          : "stream launches, device events")
                            : "back-to-back calls, monotonic clock";
  char root[32] = "";
  if (o->coll->has_root) snprintf(root, sizeof root, ", root %d", c->root);
  printf("# symcoll-bench: %s %s%s%s%s, backend %s, %d ranks (%s mode) on %s%s\n", bench_coll_label(),
         symcoll_dtype_name(o->dtype), o->coll->has_op ? " " : "", o->coll->has_op ? symcoll_op_name(o->op) : "", root,
         c->gpu ? "cuda" : "host", c->nranks, o->mode, bench_report_machine(c->gpu),
         c->gpu && !strcmp(o->mode, "thread") && c->nranks > 1
             ? ", EMULATION: ranks share GPUs, not a measure of NVLink"
             : "");
  printf("# time: median over %d reps of %d calls (%s; columns take turns), us per call; %s%s\n", o->reps, o->iters,
         mode, o->inplace ? "in place" : "out of place",
         o->send_symmetric ? "; inputs in symmetric memory (zero-copy)" : "; inputs in ordinary memory (copied in)");
  printf(
      "# bytes: nccl-tests' size (%s); busbw: bytes / time x %s, nccl-tests' bus bandwidth of the best "
      "symcoll column; speedup: the baseline peer's time / the best symcoll column's; best: the fastest column\n",
      o->coll->size_is,
      o->coll->busbw_whole             ? "1"
      : o->coll->busbw_factor_num == 2 ? "2(n-1)/n"
                                       : "(n-1)/n");
  for (int i = 0; i < t->ncols; i++)
    if (!t->cols[i].run) printf("# %s: %s\n", t->cols[i].name, t->cols[i].na);
}

void bench_report_open(bctx_t *c, const bench_table_t *t, bench_report_t *r) {
  const bench_opts_t *o = &bench_opts;
  *r = (bench_report_t){0};
  if (c->rank == 0) {
    print_preamble(c, t);
    print_header(stdout, t, false);
    if (o->csv && (r->csv = fopen(o->csv, "w"))) print_header(r->csv, t, true);
    if (o->json && (r->json = fopen(o->json, "w")))
      fprintf(r->json,
              "{\"collective\": \"%s\", \"backend\": \"%s\", \"nranks\": %d, \"mode\": \"%s\", "
              "\"dtype\": \"%s\", \"op\": \"%s\", \"graph\": %d, \"iters\": %d, \"reps\": %d, \"machine\": \"%s\", "
              "\"rows\": [",
              bench_coll_label(), c->gpu ? "cuda" : "host", c->nranks, o->mode, symcoll_dtype_name(o->dtype),
              symcoll_op_name(o->op), c->gpu && o->graph, o->iters, o->reps, bench_report_machine(c->gpu));
  }
  r->t0 = bench_now();
}

/* ---- rows ------------------------------------------------------------------------------------ */

typedef struct {
  int best, best_sc, base; /* the fastest column, the fastest symcoll column, the baseline; -1: none */
  double busbw;
} row_t;

static void print_row(const bench_table_t *t, const row_t *w, size_t bytes, size_t count, const double *slow,
                      double wrong) {
  if (isatty(2)) fprintf(stderr, "\r\033[K"); /* the progress bar gives way to the row */
  printf("%12zu %10zu %8s", bytes, count, symcoll_dtype_name(bench_opts.dtype));
  for (int i = 0; i < t->ncols; i++)
    if (slow[i] < 0)
      printf(" %10s", "n/a");
    else
      printf(" %10.2f", slow[i]);
  char speed[16] = "-";
  if (w->base >= 0 && w->best_sc >= 0) snprintf(speed, sizeof speed, "%.3f", slow[w->base] / slow[w->best_sc]);
  printf(" %11.2f %7.0f %8s %s\n", w->busbw, wrong, speed, w->best >= 0 ? t->cols[w->best].name : "-");
  fflush(stdout);
}

static void csv_row(FILE *csv, bctx_t *c, const bench_table_t *t, const row_t *w, size_t bytes, size_t count,
                    const double *slow, double wrong) {
  fprintf(csv, "%zu,%zu,%s,%d,%s", bytes, count, symcoll_dtype_name(bench_opts.dtype), c->nranks,
          c->gpu ? "cuda" : "host");
  for (int i = 0; i < t->ncols; i++)
    if (slow[i] < 0)
      fprintf(csv, ",");
    else
      fprintf(csv, ",%.3f", slow[i]);
  fprintf(csv, ",%.3f,%.0f,%s\n", w->busbw, wrong, bench_coll_label());
  fflush(csv);
}

static void json_row(bench_report_t *r, const bench_table_t *t, const row_t *w, size_t bytes, size_t count,
                     const double *slow, double wrong) {
  fprintf(r->json, "%s\n  {\"bytes\": %zu, \"count\": %zu, \"us\": {", r->json_rows++ ? "," : "", bytes, count);
  for (int i = 0, k = 0; i < t->ncols; i++)
    if (slow[i] >= 0) fprintf(r->json, "%s\"%s\": %.3f", k++ ? ", " : "", t->cols[i].name, slow[i]);
  fprintf(r->json, "}, \"busbw_GBps\": %.3f, \"wrong\": %.0f, \"best\": \"%s\"}", w->busbw, wrong,
          w->best >= 0 ? t->cols[w->best].name : "");
}

void bench_report_row(bctx_t *c, const bench_table_t *t, bench_report_t *r, size_t bytes, size_t count,
                      const double *slow, double wrong) {
  const bench_opts_t *o = &bench_opts;
  row_t w = {-1, -1, -1, 0};
  for (int i = 0; i < t->ncols; i++) {
    if (slow[i] < 0) continue;
    if (w.best < 0 || slow[i] < slow[w.best]) w.best = i;
    if (t->cols[i].is_symcoll && (w.best_sc < 0 || slow[i] < slow[w.best_sc])) w.best_sc = i;
    if (t->cols[i].is_baseline && w.base < 0) w.base = i;
  }
  if (o->tune && w.best_sc >= 0 && ntune < 64) tune_record(t, bytes, slow, w.best_sc);
  const double bus_factor = o->coll->busbw_factor_num * (o->coll->busbw_whole ? 1.0 : (c->nranks - 1.0) / c->nranks);
  w.busbw = w.best_sc >= 0 ? (double)bytes / (slow[w.best_sc] * 1e3) * bus_factor : 0;
  print_row(t, &w, bytes, count, slow, wrong);
  if (r->csv) csv_row(r->csv, c, t, &w, bytes, count, slow, wrong);
  if (r->json) json_row(r, t, &w, bytes, count, slow, wrong);
  progress(bytes, r->t0);
}

void bench_report_close(bctx_t *c, const bench_table_t *t, bench_report_t *r) {
  if (c->rank == 0 && isatty(2)) fprintf(stderr, "\r\033[K");
  if (r->csv) fclose(r->csv);
  if (r->json) {
    fprintf(r->json, "\n]}\n");
    fclose(r->json);
  }
  if (c->rank == 0 && bench_opts.tune) write_tune(c, t);
  fflush(stdout);
}
