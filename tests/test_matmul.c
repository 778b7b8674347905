/*
 * The collectives fused with a GEMM, on every rank of one launch:
 *   test_matmul --backend host|cuda --mode process|thread --ranks N
 * all_gather_matmul and matmul_reduce_scatter, fp32 / fp16 / bf16, overlap, sequential and
 * auto, shapes that are not multiples of any tile, the gathered A out of place, in place and
 * not asked for, the shard in symmetric memory (zero-copy). Inputs are small integers, fresh
 * per run and different on every rank, chosen so that every product, partial and sum is an
 * integer the dtype holds exactly: every algorithm must give the reference bit for bit.
 * Outputs are poisoned first; guard elements around them must stay untouched. On CPU ranks
 * also: bad arguments refused on every rank with nothing written, ranks in different calls
 * (MISMATCH on both, then in step again).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

static th_launch_t launch = {"host", "process", 2, 0, 600};
static uint32_t base_seed;

#define GUARD 8

typedef struct {
  size_t m, n, k;
} shape_t;
/* |A| <= 2, |B| <= 1: an all_gather_matmul entry is at most 2k (bf16 holds integers to 256:
 * k <= 100), a matmul_reduce_scatter sum at most nranks * 2k (k <= 16 for 8 ranks). */
static const shape_t ag_shapes[] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 29}, {65, 48, 100}};
static const shape_t rs_shapes[] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 13}, {40, 70, 16}};
static const symcoll_dtype_t dtypes[] = {SYMCOLL_FLOAT32, SYMCOLL_FLOAT16, SYMCOLL_BFLOAT16};
static const symcoll_algo_t algos[] = {SYMCOLL_ALGO_OVERLAP, SYMCOLL_ALGO_SEQUENTIAL, SYMCOLL_ALGO_AUTO};
enum { A_OUT_NONE, A_OUT, A_OUT_IN_PLACE, A_SYMMETRIC, NUM_PLACEMENTS };
static const char *const placement_names[] = {"no a_out", "a_out", "in place in a_out", "shard symmetric"};

static double a_val(int rank, size_t i, size_t j, uint32_t seed) {
  return (double)((int)((i * 7 + j * 3 + (size_t)rank * 5 + seed) % 5) - 2);
}
static double b_val(int rank, size_t j, size_t l, uint32_t seed) {
  return (double)((int)((j * 5 + l * 11 + (size_t)rank * 3 + seed / 7) % 3) - 1);
}

typedef struct {
  symcoll_comm_t comm;
  const th_buf_ops_t *ops;
  int rank, n, failures, calls;
  size_t maxb;
  char *h1, *h2, *h3; /* host staging */
  char *da, *db, *dc, *dg, *dsym;
} ctx_t;

/* Uploads rows x cols of f(rank, i, j) in dt to dev. */
static void upload(ctx_t *c, char *dev, symcoll_dtype_t dt, size_t rows, size_t cols, size_t row0, int rank,
                   double (*f)(int, size_t, size_t, uint32_t), uint32_t seed) {
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < cols; j++) exact_store(c->h1, dt, i * cols + j, f(rank, row0 + i, j, seed));
  c->ops->to_dev(dev, c->h1, rows * cols * symcoll_dtype_size(dt));
}

/* Compares `count` elements at dev (with GUARD poisoned elements each side) to want. */
static int check(ctx_t *c, const char *what, const char *dev, const char *want, symcoll_dtype_t dt, size_t count) {
  const size_t es = symcoll_dtype_size(dt), span = (count + 2 * GUARD) * es;
  c->ops->to_host(c->h3, dev - GUARD * es, span);
  size_t bad = 0, first = SIZE_MAX;
  for (size_t i = 0; i < count + 2 * GUARD; i++) {
    const bool inside = i >= GUARD && i < GUARD + count;
    const bool ok =
        inside ? !memcmp(c->h3 + i * es, want + (i - GUARD) * es, es)
               : ((unsigned char)c->h3[i * es] == TH_POISON && (unsigned char)c->h3[i * es + es - 1] == TH_POISON);
    if (!ok && bad++ == 0) first = i;
  }
  if (!bad) return 0;
  const bool inside = first >= GUARD && first < GUARD + count;
  fprintf(stderr, "rank %d: %s: %zu wrong; first at element %zd of the %s: got %g", c->rank, what, bad,
          (ssize_t)first - GUARD, inside ? "result" : "guard, must stay untouched", exact_load(c->h3, dt, first));
  if (inside) fprintf(stderr, " want %g", exact_load(want, dt, first - GUARD));
  fprintf(stderr, "\n");
  return 1;
}

static void poison(ctx_t *c, char *dev, size_t bytes) {
  memset(c->h3, TH_POISON, bytes);
  c->ops->to_dev(dev, c->h3, bytes);
}

static int finish(ctx_t *c, const char *what, symcoll_status_t s) {
  c->calls++;
  if (s != SYMCOLL_OK) {
    fprintf(stderr, "rank %d: %s: %s\n", c->rank, what, symcoll_status_string(s));
    return -1;
  }
  c->ops->sync();
  if (c->ops != &th_host_ops && (s = symcoll_comm_check(c->comm)) != SYMCOLL_OK) {
    fprintf(stderr, "rank %d: %s: the GPU work failed: %s\n", c->rank, what, symcoll_status_string(s));
    return -1;
  }
  return 0;
}

static int ag_case(ctx_t *c, symcoll_dtype_t dt, shape_t sh, symcoll_algo_t algo, int pl, uint32_t seed) {
  const size_t es = symcoll_dtype_size(dt), n = (size_t)c->n, me = (size_t)c->rank, rows = n * sh.m;
  char what[160];
  snprintf(what, sizeof what, "all_gather_matmul %s %zux%zux%zu %s, %s", symcoll_dtype_name(dt), sh.m, sh.n, sh.k,
           symcoll_algo_name(algo), placement_names[pl]);
  char *c_dev = c->dc + GUARD * es, *g_dev = c->dg + GUARD * es;
  poison(c, c->dc, (rows * sh.n + 2 * GUARD) * es);
  poison(c, c->dg, (rows * sh.k + 2 * GUARD) * es);
  char *a_dev = pl == A_SYMMETRIC ? c->dsym : pl == A_OUT_IN_PLACE ? g_dev + me * sh.m * sh.k * es : c->da;
  upload(c, a_dev, dt, sh.m, sh.k, me * sh.m, c->rank, a_val, seed); /* rows of the gathered A */
  upload(c, c->db, dt, sh.k, sh.n, 0, c->rank, b_val, seed);
  symcoll_matmul_opts_t o;
  symcoll_matmul_opts_init(&o);
  o.algo = algo;
  if (pl == A_OUT || pl == A_OUT_IN_PLACE) o.a_out = g_dev;
  if (symcoll_comm_barrier(c->comm) != SYMCOLL_OK) return -1; /* every rank's inputs are in place */
  if (finish(c, what,
             symcoll_all_gather_matmul(c->comm, a_dev, c->db, c_dev, sh.m, sh.n, sh.k, dt, &o, c->ops->stream())) < 0)
    return -1;
  /* C = A @ B_me, A's row i from rank i / m. */
  for (size_t i = 0; i < rows; i++)
    for (size_t l = 0; l < sh.n; l++) {
      double v = 0;
      for (size_t j = 0; j < sh.k; j++) v += a_val((int)(i / sh.m), i, j, seed) * b_val(c->rank, j, l, seed);
      exact_store(c->h2, dt, i * sh.n + l, v);
    }
  int f = check(c, what, c_dev, c->h2, dt, rows * sh.n);
  if (o.a_out) {
    for (size_t i = 0; i < rows; i++)
      for (size_t j = 0; j < sh.k; j++) exact_store(c->h2, dt, i * sh.k + j, a_val((int)(i / sh.m), i, j, seed));
    f += check(c, what, g_dev, c->h2, dt, rows * sh.k);
  }
  return f;
}

static int rs_case(ctx_t *c, symcoll_dtype_t dt, shape_t sh, symcoll_algo_t algo, uint32_t seed) {
  const size_t es = symcoll_dtype_size(dt), n = (size_t)c->n, me = (size_t)c->rank, m = n * sh.m;
  char what[160];
  snprintf(what, sizeof what, "matmul_reduce_scatter %s %zux%zux%zu %s", symcoll_dtype_name(dt), m, sh.n, sh.k,
           symcoll_algo_name(algo));
  char *c_dev = c->dc + GUARD * es;
  poison(c, c->dc, (sh.m * sh.n + 2 * GUARD) * es);
  upload(c, c->da, dt, m, sh.k, 0, c->rank, a_val, seed);
  upload(c, c->db, dt, sh.k, sh.n, 0, c->rank, b_val, seed);
  symcoll_matmul_opts_t o;
  symcoll_matmul_opts_init(&o);
  o.algo = algo;
  if (symcoll_comm_barrier(c->comm) != SYMCOLL_OK) return -1;
  if (finish(c, what,
             symcoll_matmul_reduce_scatter(c->comm, c->da, c->db, c_dev, m, sh.n, sh.k, dt, &o, c->ops->stream())) < 0)
    return -1;
  for (size_t i = 0; i < sh.m; i++)
    for (size_t l = 0; l < sh.n; l++) {
      double v = 0;
      for (int r = 0; r < c->n; r++)
        for (size_t j = 0; j < sh.k; j++) v += a_val(r, me * sh.m + i, j, seed) * b_val(r, j, l, seed);
      exact_store(c->h2, dt, i * sh.n + l, v);
    }
  return check(c, what, c_dev, c->h2, dt, sh.m * sh.n);
}

/* CPU ranks: refusals and calls out of step. Returns failures. */
static int contract_cases(ctx_t *c) {
  int f = 0;
  const size_t es = 4;
  char *c_dev = c->dc + GUARD * es;
  poison(c, c->dc, (64 + 2 * GUARD) * es);
  memset(c->h2, TH_POISON, 64 * es);
  /* The same bad argument on every rank: refused everywhere, nothing written. */
  struct {
    symcoll_status_t s;
    const char *what;
  } bad[] = {
      {symcoll_all_gather_matmul(c->comm, c->da, c->db, c_dev, 2, 2, 2, SYMCOLL_INT8, NULL, NULL), "int8"},
      {symcoll_all_gather_matmul(c->comm, c->da, NULL, c_dev, 2, 2, 2, SYMCOLL_FLOAT32, NULL, NULL), "NULL b"},
      {symcoll_all_gather_matmul(c->comm, c->da, c->db, c->da, 2, 2, 2, SYMCOLL_FLOAT32, NULL, NULL), "c == a"},
      {symcoll_all_gather_matmul(c->comm, c->da, c->db, c_dev, 2, 2, 0, SYMCOLL_FLOAT32, NULL, NULL), "k 0"},
      {c->n == 1 ? SYMCOLL_ERR_INVALID_ARGUMENT /* every m is a multiple of 1 */
                 : symcoll_matmul_reduce_scatter(c->comm, c->da, c->db, c_dev, (size_t)c->n + 1, 2, 2, SYMCOLL_FLOAT32,
                                                 NULL, NULL),
       "m not a multiple"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (bad[i].s != SYMCOLL_ERR_INVALID_ARGUMENT) {
      fprintf(stderr, "rank %d: bad argument (%s): %s\n", c->rank, bad[i].what, symcoll_status_string(bad[i].s));
      f++;
    }
  f += check(c, "output after refused calls", c_dev, c->h2, SYMCOLL_FLOAT32, 16);
  if (c->n < 2) return f;
  /* Ranks in different calls: rank 0 gathers 3 rows, the others 4; then a plain all_gather
   * against the fused one. Both sides MISMATCH, nothing written, then in step again. */
  symcoll_matmul_opts_t o;
  symcoll_matmul_opts_init(&o);
  o.algo = SYMCOLL_ALGO_OVERLAP;
  upload(c, c->da, SYMCOLL_FLOAT32, 4, 2, 0, c->rank, a_val, 1);
  upload(c, c->db, SYMCOLL_FLOAT32, 2, 2, 0, c->rank, b_val, 1);
  symcoll_status_t s =
      symcoll_all_gather_matmul(c->comm, c->da, c->db, c_dev, c->rank == 0 ? 3 : 4, 2, 2, SYMCOLL_FLOAT32, &o, NULL);
  if (s != SYMCOLL_ERR_MISMATCH)
    fprintf(stderr, "rank %d: shapes differ: %s\n", c->rank, symcoll_status_string(s)), f++;
  s = c->rank == 0 ? symcoll_all_gather(c->comm, c->da, c_dev, 8, SYMCOLL_FLOAT32, NULL)
                   : symcoll_all_gather_matmul(c->comm, c->da, c->db, c_dev, 4, 2, 2, SYMCOLL_FLOAT32, &o, NULL);
  if (s != SYMCOLL_ERR_MISMATCH)
    fprintf(stderr, "rank %d: all_gather vs all_gather_matmul: %s\n", c->rank, symcoll_status_string(s)), f++;
  f += check(c, "output after mismatched calls", c_dev, c->h2, SYMCOLL_FLOAT32, 16);
  return f;
}

static int rank_main(symcoll_comm_t comm, const th_buf_ops_t *ops, void *arg) {
  (void)arg;
  ctx_t c = {.comm = comm, .ops = ops, .rank = symcoll_comm_rank(comm), .n = symcoll_comm_nranks(comm)};
  c.maxb = ((size_t)c.n * 80 * 100 + 4 * GUARD) * 4;
  c.h1 = malloc(c.maxb), c.h2 = malloc(c.maxb), c.h3 = malloc(c.maxb);
  c.da = ops->alloc(c.maxb), c.db = ops->alloc(c.maxb), c.dc = ops->alloc(c.maxb), c.dg = ops->alloc(c.maxb);
  symcoll_mem_t mem = NULL;
  if (!c.h1 || !c.h2 || !c.h3 || !c.da || !c.db || !c.dc || !c.dg ||
      symcoll_mem_alloc(comm, c.maxb, &mem) != SYMCOLL_OK) {
    fprintf(stderr, "rank %d: allocation failed\n", c.rank);
    return 1;
  }
  c.dsym = symcoll_mem_ptr(mem, c.rank);
  if (symcoll_coll_algo_supported(comm, SYMCOLL_COLL_ALL_GATHER_MATMUL, SYMCOLL_ALGO_OVERLAP) != SYMCOLL_OK) {
    fprintf(stderr, "rank %d: no GEMM library: the fused operations are unsupported here\n", c.rank);
    c.failures = 1;
    goto out;
  }
  if (ops == &th_host_ops && (c.failures = contract_cases(&c)) != 0) goto out;
  for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++)
    for (size_t si = 0; si < 4; si++)
      for (size_t ai = 0; ai < sizeof algos / sizeof algos[0]; ai++) {
        const uint32_t seed = base_seed + (uint32_t)(d * 131 + si * 17 + ai);
        for (int pl = 0; pl < NUM_PLACEMENTS; pl++) {
          int f = ag_case(&c, dtypes[d], ag_shapes[si], algos[ai], pl, seed + (uint32_t)pl);
          if (f < 0) goto fatal;
          c.failures += f;
        }
        int f = rs_case(&c, dtypes[d], rs_shapes[si], algos[ai], seed);
        if (f < 0) goto fatal;
        c.failures += f;
        if (c.failures > 8) goto out;
      }
  goto out;
fatal:
  c.failures++;
out:
  if (c.rank == 0) printf("rank 0: %d calls checked on %s, %d failures\n", c.calls, ops->name, c.failures);
  symcoll_comm_barrier(comm);
  symcoll_mem_free(mem);
  ops->free(c.da), ops->free(c.db), ops->free(c.dc), ops->free(c.dg);
  free(c.h1), free(c.h2), free(c.h3);
  return c.failures;
}

static void test_matmul(void **state) {
  (void)state;
  assert_int_equal(th_run(&launch, rank_main, NULL), 0);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) th_launch_arg(&launch, argc, argv, &i);
  if (!strcmp(launch.mode, "thread")) th_cuda_env(); /* before anything starts CUDA */
  if (th_skip_without_gpu(launch.backend)) return TH_SKIP;
  setenv("OPENBLAS_NUM_THREADS", "1", 0); /* ranks share the cores; OpenBLAS would take them all */
  base_seed = (uint32_t)time(NULL) ^ (uint32_t)getpid() * 2654435761u;
  printf("seed %u\n", base_seed);
  char name[128];
  snprintf(name, sizeof name, "matmul_%s_%s_%dranks", launch.backend, launch.mode, launch.nranks);
  const struct CMUnitTest tests[] = {{name, test_matmul, NULL, NULL, NULL}};
  return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
