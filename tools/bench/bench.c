/*
 * The run of symcoll-bench and symcoll-tune: latency of a collective (all_reduce, all_gather,
 * reduce_scatter, broadcast, reduce, all_to_all; one file each, coll_*.c) for symcoll's
 * algorithms and for peers, side by side, in the same processes and the same run, with one
 * timing method for every column (timing.c). Every column's result is checked against
 * exact-result inputs (#wrong). Any call that fails ends the run: the rank says which call and
 * why, its communicators give up, and it exits non-zero; its peers then lose it and end the
 * same way (no row is printed for that size).
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

_Noreturn void bench_fail(bctx_t *c, const char *what, const char *why) {
  fprintf(stderr, "symcoll-bench: rank %d: %s: %s; ending the run\n", c->rank, what, why);
  fflush(NULL);
  if (c->comm) symcoll_comm_abort(c->comm);
  if (c->ctl) symcoll_comm_abort(c->ctl);
  if (peer_mpi_active()) peer_mpi_abort(4);
  _exit(4); /* process mode: peers see this rank gone; thread mode: the whole run ends */
}

/* ---- the control communicator: a float all-reduce doubles as a barrier -------------------- */

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

/* ---- the run on one rank ------------------------------------------------------------------ */

static double total_wrong; /* rank 0: wrong elements over all columns and sizes */
static bool bad_usage;     /* a fused operation's table refused its options (exit 2) */

typedef struct {
  symcoll_mem_t send_mem; /* --send-symmetric: send lies in it */
  char *send, *recv;      /* on the device under test; in place: recv is send */
  char *h, *want;         /* host staging of send and recv; the exact output */
} buffers_t;

/* Buffers for the largest size; every rank has allocated before any collective runs (see
 * bench_time_columns). */
static void buffers_alloc(bctx_t *c, buffers_t *b) {
  const bench_opts_t *o = &bench_opts;
  const size_t es = symcoll_dtype_size(o->dtype);
  const size_t maxc = o->coll->count_of(o->max_bytes, es, c->nranks);
  const size_t send_b = o->coll->send_elems(maxc, c->nranks) * es + 64;
  const size_t recv_b = o->coll->recv_elems(maxc, c->nranks) * es + 64;
  *b = (buffers_t){0};
  /* In place: the input lies in the output (all_gather: rank's block; reduce_scatter: the
   * output is rank's block of the input). */
  const size_t buf_b = o->inplace ? (send_b > recv_b ? send_b : recv_b) : send_b;
  if (o->send_symmetric && symcoll_mem_alloc(c->comm, buf_b, &b->send_mem) == SYMCOLL_OK)
    b->send = symcoll_mem_ptr(b->send_mem, c->rank);
  else
    b->send = bench_dev_alloc(c, buf_b);
  b->recv = o->inplace ? b->send : bench_dev_alloc(c, recv_b);
  b->h = malloc(send_b + recv_b), b->want = malloc(recv_b);
  if (!b->send || !b->recv || !b->h || !b->want) bench_fail(c, "allocating buffers", "out of memory");
  bench_barrier(c);
}

/* Every rank is done with every peer's memory before any frees (a clean end). */
static void buffers_free(bctx_t *c, buffers_t *b) {
  bench_barrier(c);
  if (!bench_opts.inplace) bench_dev_free(c, b->recv);
  if (b->send_mem)
    symcoll_mem_free(b->send_mem);
  else
    bench_dev_free(c, b->send);
  free(b->h);
  free(b->want);
}

/* One size on every rank: each usable column checked, then all timed. slow: the slowest rank's
 * median per column (the collective's time; -1: n/a); returns the wrong elements of all ranks. */
static double run_size(bctx_t *c, bench_table_t *t, const buffers_t *b, size_t count, uint32_t seed, double *slow) {
  const bench_opts_t *o = &bench_opts;
  const size_t es = symcoll_dtype_size(o->dtype);
  o->coll->expect(b->want, o->dtype, o->op, count, c->rank, c->nranks, c->root, o->inplace, seed);
  char *in = b->send, *out = b->recv;
  if (o->inplace && o->coll->kind == SYMCOLL_COLL_ALL_GATHER) in = b->recv + (size_t)c->rank * count * es;
  if (o->inplace && o->coll->kind == SYMCOLL_COLL_REDUCE_SCATTER) out = b->send + (size_t)c->rank * count * es;
  double us[MAX_COLS], wrong = 0;
  for (int i = 0; i < t->ncols; i++) {
    if (!t->cols[i].run) continue;
    double w = bench_check_column(c, &t->cols[i], in, out, count, b->h, b->want, seed);
    ctl_reduce(c, &w, 1, SYMCOLL_SUM);
    wrong += w;
  }
  bench_time_columns(c, t->cols, t->ncols, in, out, count, us);
  for (int i = 0; i < t->ncols; i++) slow[i] = isnan(us[i]) ? -1 : us[i];
  ctl_reduce(c, slow, t->ncols, SYMCOLL_MAX);
  return wrong;
}

/* The fused operations: a table over shapes instead of sizes (coll_matmul.c, coll_rmsnorm.c);
 * the barrier's table over grids (coll_barrier.c). */
static void run_matmul(bctx_t *c) {
  const bench_opts_t *o = &bench_opts;
  const bench_mm_opts_t mo = {.all_gather = o->mm == 1,
                              .dtype = o->dtype,
                              .shapes = o->shapes,
                              .fp8 = o->fp8,
                              .scatter = o->mm == 5,
                              .reps = o->reps_set ? o->reps : 20,
                              .calls = o->iters,
                              .csv = o->csv,
                              .mode = o->mode,
                              .machine = bench_report_machine(c->gpu),
                              .algos = o->algos_set ? o->algos : NULL};
  const int rc = o->mm == 4   ? bench_barrier_rank(c, &mo)
                 : o->mm >= 3 ? bench_norm_rank(c, &mo)
                              : bench_matmul_rank(c, &mo);
  if (rc == 2)
    bad_usage = true;
  else if (rc != 0)
    total_wrong += 1;
}

static void run_rank(bctx_t *c) {
  const bench_opts_t *o = &bench_opts;
  if (o->mm) {
    run_matmul(c);
    return;
  }
  c->op = o->op;
  c->root = o->coll->has_root ? o->root : 0;
  if (c->root >= c->nranks) {
    char why[64];
    snprintf(why, sizeof why, "not a rank of %d", c->nranks);
    bench_fail(c, "--root", why);
  }
  bench_table_t t = {0};
  bench_build_columns(&t);
  for (int i = 0; i < t.ncols; i++)
    if (t.cols[i].init(c, &t.cols[i], o->coll) != 0) t.cols[i].run = NULL;
  buffers_t b;
  buffers_alloc(c, &b);
  bench_report_t r;
  bench_report_open(c, &t, &r);
  const size_t es = symcoll_dtype_size(o->dtype);
  uint32_t seed = 12345;
  for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes = o->step > 1 ? bytes * o->step : bytes + 1) {
    const size_t count = o->coll->count_of(bytes, es, c->nranks);
    if (count == 0) continue;
    seed += 7919;
    double slow[MAX_COLS];
    const double wrong = run_size(c, &t, &b, count, seed, slow);
    if (c->rank != 0) continue;
    total_wrong += wrong;
    bench_report_row(c, &t, &r, bytes, count, slow, wrong);
  }
  bench_report_close(c, &t, &r);
  for (int i = 0; i < t.ncols; i++)
    if (t.cols[i].run && t.cols[i].fini) t.cols[i].fini(c, &t.cols[i]);
  buffers_free(c, &b);
}

/* One rank's run; 2 where a fused operation's table refused its options, 3 where a column gave
 * a wrong result (rank 0 counts them). */
static int rank_body(bctx_t *c) {
  run_rank(c);
  return bad_usage ? 2 : total_wrong > 0 ? 3 : 0;
}

/* ---- the ranks (bench_launch.c) ------------------------------------------------------------ */

int bench_run(const bench_args_t *x) {
  const bench_opts_t *o = &bench_opts;
  /* The plot's title, known before any rank starts (ranks may be child processes). */
  char title[256];
  bench_report_plot_title(title, sizeof title, x->gpu);
  const bench_launch_t launch = {.backend = o->backend,
                                 .mode = o->mode,
                                 .nranks = o->nranks,
                                 .ngpus = x->ngpu,
                                 .bind = o->bind,
                                 .inplace = o->inplace,
                                 .body = rank_body};
  int rc = bench_launch(&launch);
  peer_mpi_finalize();
  const char *world_rank = getenv("OMPI_COMM_WORLD_RANK");
  if (rc == 0 && o->plot && o->csv && (!world_rank || atoi(world_rank) == 0)) rc = bench_plot(o->csv, o->plot, title);
  return rc;
}
