/*
 * The collective matrix, run on every rank of one launch:
 *   test_coll --coll NAME|all --backend host|cuda --mode process|thread|env --ranks N [--quick]
 *   (NAME: any plain collective of symcoll_coll_name; env: one rank of a launcher's job)
 * Every plain collective x dtype x op x algorithm x count x placement (in/out of place,
 * misaligned, zero-copy from a symmetric allocation, into a symmetric output for all_reduce,
 * all_gather and all_to_all, in place there, and both buffers symmetric); broadcast and reduce with a root that changes
 * from case to case, the other ranks passing NULL for the buffer only the root uses in every other case; exact-result
 * inputs drawn fresh for each run; outputs poisoned first and checked bit for bit, guard elements around them included
 * (nothing outside the result may be written, and a reduce writes nothing on ranks other than the root). The reducing
 * collectives' sum also with each rank's input scaled first (the options' scale: NCCL's PreMulSum), the scale in host
 * memory, or on GPUs in device memory in every other case.
 */
#include <math.h>
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
static bool quick;
static uint32_t base_seed;
static int only_coll = -1;  /* -1: every plain collective */
static int only_dtype = -1; /* --dtype NAME: one dtype only */

#define GUARD 16

enum {
  OUT_OF_PLACE,
  IN_PLACE,
  MISALIGNED,
  MISALIGNED_IN_PLACE,
  SYMMETRIC_SEND,
  SYMMETRIC_RECV,
  SYMMETRIC_IN_PLACE,
  SYMMETRIC_BOTH,
  NUM_PLACEMENTS
};
static const char *const placement_names[] = {"out-of-place",
                                              "in-place",
                                              "misaligned out-of-place",
                                              "misaligned in-place",
                                              "zero-copy symmetric send",
                                              "symmetric recv",
                                              "in place in a symmetric recv",
                                              "symmetric send and recv"};

/* Each collective's algorithms; those a communicator cannot run (e.g. hierarchical and engine
 * on one node, the one-node ones on a communicator spanning nodes) are skipped. */
#define MAX_ALGOS 8
static const symcoll_algo_t algos_of[SYMCOLL_NUM_COLL_KINDS][MAX_ALGOS] = {
    [SYMCOLL_COLL_ALL_REDUCE] = {SYMCOLL_ALGO_ONE_SHOT, SYMCOLL_ALGO_TWO_SHOT, SYMCOLL_ALGO_ONE_SHOT_DB,
                                 SYMCOLL_ALGO_LAMPORT, SYMCOLL_ALGO_HIERARCHICAL, SYMCOLL_ALGO_ENGINE,
                                 SYMCOLL_ALGO_AUTO},
    [SYMCOLL_COLL_ALL_GATHER] = {SYMCOLL_ALGO_PULL, SYMCOLL_ALGO_PUSH, SYMCOLL_ALGO_LAMPORT, SYMCOLL_ALGO_COPY_ENGINE,
                                 SYMCOLL_ALGO_HIERARCHICAL, SYMCOLL_ALGO_ENGINE, SYMCOLL_ALGO_AUTO},
    [SYMCOLL_COLL_REDUCE_SCATTER] = {SYMCOLL_ALGO_PULL, SYMCOLL_ALGO_LAMPORT, SYMCOLL_ALGO_HIERARCHICAL,
                                     SYMCOLL_ALGO_ENGINE, SYMCOLL_ALGO_AUTO},
    [SYMCOLL_COLL_BROADCAST] = {SYMCOLL_ALGO_PULL, SYMCOLL_ALGO_LAMPORT, SYMCOLL_ALGO_COPY_ENGINE,
                                SYMCOLL_ALGO_HIERARCHICAL, SYMCOLL_ALGO_ENGINE, SYMCOLL_ALGO_AUTO},
    [SYMCOLL_COLL_REDUCE] = {SYMCOLL_ALGO_ONE_SHOT, SYMCOLL_ALGO_HIERARCHICAL, SYMCOLL_ALGO_ENGINE, SYMCOLL_ALGO_AUTO},
    [SYMCOLL_COLL_ALL_TO_ALL] = {SYMCOLL_ALGO_PULL, SYMCOLL_ALGO_PUSH, SYMCOLL_ALGO_LAMPORT, SYMCOLL_ALGO_COPY_ENGINE,
                                 SYMCOLL_ALGO_HIERARCHICAL, SYMCOLL_ALGO_ENGINE, SYMCOLL_ALGO_AUTO},
};

/* What the matrix needs to know of each collective: its buffers' sizes in blocks of count. */
static bool takes_op(symcoll_coll_t coll) {
  return coll == SYMCOLL_COLL_ALL_REDUCE || coll == SYMCOLL_COLL_REDUCE_SCATTER || coll == SYMCOLL_COLL_REDUCE;
}
static bool send_all(symcoll_coll_t coll) {
  return coll == SYMCOLL_COLL_REDUCE_SCATTER || coll == SYMCOLL_COLL_ALL_TO_ALL;
}
static bool recv_all(symcoll_coll_t coll) {
  return coll == SYMCOLL_COLL_ALL_GATHER || coll == SYMCOLL_COLL_ALL_TO_ALL;
}

typedef struct {
  symcoll_comm_t comm;
  const th_buf_ops_t *ops;
  int rank, n, failures, calls;
  char *hsend, *hrecv, *hexp, *hpoison;
  char *dsend, *drecv, *dsym, *dsym2; /* two symmetric allocations */
  char hscale[8], *dscale;            /* this rank's scale (exact_scale) in the dtype of the case */
} ctx_t;

/* Counts per rank's part: the largest only for the three float types the benchmarks use,
 * and for collectives whose buffers hold every rank's block divided among the ranks. */
static size_t count_at(int ci, symcoll_coll_t coll, int n) {
  static const size_t counts[] = {1, 7, 255, 4096, 65537, (1u << 20) + 3};
  if (ci < 5 || !(send_all(coll) || recv_all(coll))) return counts[ci];
  return (1u << 20) / (size_t)n + 3;
}

static symcoll_status_t call(ctx_t *c, symcoll_coll_t coll, const void *send, void *recv, size_t count,
                             symcoll_dtype_t dt, symcoll_op_t op, int root, const symcoll_coll_opts_t *o) {
  void *stream = c->ops->stream();
  switch (coll) {
    case SYMCOLL_COLL_ALL_REDUCE:
      return symcoll_all_reduce_ex(c->comm, send, recv, count, dt, op, stream, o);
    case SYMCOLL_COLL_ALL_GATHER:
      return symcoll_all_gather_ex(c->comm, send, recv, count, dt, stream, o);
    case SYMCOLL_COLL_REDUCE_SCATTER:
      return symcoll_reduce_scatter_ex(c->comm, send, recv, count, dt, op, stream, o);
    case SYMCOLL_COLL_BROADCAST:
      return symcoll_broadcast_ex(c->comm, send, recv, count, dt, root, stream, o);
    case SYMCOLL_COLL_REDUCE:
      return symcoll_reduce_ex(c->comm, send, recv, count, dt, op, root, stream, o);
    case SYMCOLL_COLL_ALL_TO_ALL:
      return symcoll_all_to_all_ex(c->comm, send, recv, count, dt, stream, o);
    case SYMCOLL_COLL_ALL_GATHER_MATMUL:
    case SYMCOLL_COLL_MATMUL_REDUCE_SCATTER:
    case SYMCOLL_COLL_ALL_REDUCE_RMSNORM:
    case SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM:
    case SYMCOLL_NUM_COLL_KINDS:
      break;
  }
  return SYMCOLL_ERR_UNSUPPORTED;
}

/* The expected result at want (this rank's recv), as the independent host reference gives it. */
static void expect(ctx_t *c, symcoll_coll_t coll, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int root,
                   uint32_t seed, bool scaled, char *want) {
  const size_t es = symcoll_dtype_size(dt), me = (size_t)c->rank;
  if (scaled) { /* a sum of scaled inputs: all_reduce, reduce_scatter, reduce */
    if (coll != SYMCOLL_COLL_REDUCE || c->rank == root)
      exact_expect_scaled_range(want, dt, coll == SYMCOLL_COLL_REDUCE_SCATTER ? me * count : 0, count, c->n, seed);
    return;
  }
  switch (coll) {
    case SYMCOLL_COLL_ALL_REDUCE:
      exact_expect(want, dt, op, count, c->n, seed);
      return;
    case SYMCOLL_COLL_REDUCE_SCATTER:
      exact_expect_range(want, dt, op, me * count, count, c->n, seed);
      return;
    case SYMCOLL_COLL_ALL_GATHER:
      for (int r = 0; r < c->n; r++) exact_fill(want + (size_t)r * count * es, dt, count, r, seed);
      return;
    case SYMCOLL_COLL_BROADCAST:
      exact_fill(want, dt, count, root, seed);
      return;
    case SYMCOLL_COLL_REDUCE:
      if (c->rank == root) exact_expect(want, dt, op, count, c->n, seed);
      return;                     /* other ranks: recv stays as it was */
    case SYMCOLL_COLL_ALL_TO_ALL: /* block r: rank r's block [me] */
      for (int r = 0; r < c->n; r++) exact_fill_range(want + (size_t)r * count * es, dt, me * count, count, r, seed);
      return;
    case SYMCOLL_COLL_ALL_GATHER_MATMUL:
    case SYMCOLL_COLL_MATMUL_REDUCE_SCATTER:
    case SYMCOLL_COLL_ALL_REDUCE_RMSNORM:
    case SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM:
    case SYMCOLL_NUM_COLL_KINDS:
      return;
  }
}

static int one_case(ctx_t *c, symcoll_coll_t coll, symcoll_dtype_t dt, size_t count, symcoll_op_t op,
                    symcoll_algo_t algo, int pl, uint32_t seed, bool scaled) {
  const size_t es = symcoll_dtype_size(dt), n = (size_t)c->n, me = (size_t)c->rank;
  const size_t send_n = send_all(coll) ? n * count : count;
  const size_t recv_n = recv_all(coll) ? n * count : count;
  const bool in_place = pl == IN_PLACE || pl == MISALIGNED_IN_PLACE || pl == SYMMETRIC_IN_PLACE;
  const bool rooted = coll == SYMCOLL_COLL_BROADCAST || coll == SYMCOLL_COLL_REDUCE;
  const int root = rooted ? (int)((seed >> 3) % n) : 0;
  /* Offsets in elements from the buffers' starts; misaligned ones break 16-byte alignment. */
  const size_t off = pl == MISALIGNED ? 1 : pl == MISALIGNED_IN_PLACE ? 3 : GUARD;
  /* The checked region: recv's span, or for an in-place reduce_scatter the whole send. */
  char *region = pl == SYMMETRIC_RECV || pl == SYMMETRIC_IN_PLACE || pl == SYMMETRIC_BOTH ? c->dsym : c->drecv;
  char *send, *recv;
  size_t region_n; /* elements between the guards */
  if (coll == SYMCOLL_COLL_REDUCE_SCATTER && in_place) {
    send = region + off * es;
    recv = send + me * count * es;
    region_n = send_n;
  } else {
    recv = region + off * es;
    region_n = recv_n;
    send = !in_place ? (pl == SYMMETRIC_SEND   ? c->dsym
                        : pl == SYMMETRIC_BOTH ? c->dsym2
                                               : c->dsend) +
                           GUARD * es
           : coll == SYMCOLL_COLL_ALL_GATHER ? recv + me * count * es
                                             : recv;
  }
  if (pl == MISALIGNED) send = c->dsend + 2 * es;
  const size_t span = (off + region_n + GUARD) * es;
  /* Poison the region, then place the input (in place: inside it). */
  c->ops->to_dev(region, c->hpoison, span);
  if (coll == SYMCOLL_COLL_ALL_GATHER)
    exact_fill(c->hsend, dt, count, c->rank, seed);
  else
    exact_fill_op(c->hsend, dt, op, send_n, c->rank, seed);
  c->ops->to_dev(send, c->hsend, send_n * es);
  /* The expected region: poison, the input where in place, the result over it. */
  memcpy(c->hexp, c->hpoison, span);
  if (in_place) memcpy(c->hexp + (size_t)(send - region), c->hsend, send_n * es);
  expect(c, coll, dt, op, count, root, seed, scaled, c->hexp + (size_t)(recv - region));
  /* Rooted: in every other case the ranks that are not the root pass NULL for the buffer only
   * the root uses (NCCL allows it), and the others their buffer, which must stay untouched. */
  const bool null_unused = rooted && !in_place && (seed & 1) && c->rank != root;
  const void *send_arg = null_unused && coll == SYMCOLL_COLL_BROADCAST ? NULL : send;
  void *recv_arg = null_unused && coll == SYMCOLL_COLL_REDUCE ? NULL : recv;
  symcoll_coll_opts_t o;
  symcoll_coll_opts_init(&o);
  o.algo = algo;
  if (scaled) {
    exact_store(c->hscale, dt, 0, exact_scale(c->rank));
    o.scale = c->hscale;
    if (c->ops != &th_host_ops && (seed & 2)) {
      c->ops->to_dev(c->dscale, c->hscale, es);
      o.scale = c->dscale, o.scale_on_device = 1;
    }
  }
  symcoll_status_t s = call(c, coll, send_arg, recv_arg, count, dt, op, root, &o);
  c->calls++;
  const char *what_fmt = "rank %d: %s %s %s %s count %zu %s root %d";
#define WHAT                                                                              \
  c->rank, symcoll_coll_name(coll), symcoll_dtype_name(dt),                               \
      scaled           ? (o.scale_on_device ? "scaled sum (device scale)" : "scaled sum") \
      : takes_op(coll) ? symcoll_op_name(op)                                              \
                       : "-",                                                             \
      symcoll_algo_name(algo), count, placement_names[pl], root
  if (s != SYMCOLL_OK) {
    fprintf(stderr, what_fmt, WHAT);
    fprintf(stderr, ": %s\n", symcoll_status_string(s));
    return -1; /* ranks are out of step: stop */
  }
  c->ops->sync();
  if (c->ops != &th_host_ops) {
    symcoll_status_t chk = symcoll_comm_check(c->comm);
    if (chk != SYMCOLL_OK) {
      fprintf(stderr, what_fmt, WHAT);
      fprintf(stderr, ": the kernel failed: %s\n", symcoll_status_string(chk));
      return -1;
    }
  }
  c->ops->to_host(c->hrecv, region, span);
  size_t bad = 0, first = SIZE_MAX;
  for (size_t i = 0; i < span / es; i++)
    if (memcmp(c->hrecv + i * es, c->hexp + i * es, es) != 0) {
      if (first == SIZE_MAX) first = i;
      bad++;
    }
  if (!bad) return 0;
  const bool inside = first >= off && first < off + region_n;
  fprintf(stderr, what_fmt, WHAT);
  fprintf(stderr, ": %zu wrong; first at element %zd of the %s: got %g want %g (this rank's input there: %g)\n", bad,
          (ssize_t)first - (ssize_t)off, inside ? "result" : "guard, must stay untouched",
          exact_load(c->hrecv, dt, first), exact_load(c->hexp, dt, first),
          inside && first - off < send_n ? exact_load(c->hsend, dt, first - off) : NAN);
  return 1;
#undef WHAT
}

static int rank_matrix(symcoll_comm_t comm, const th_buf_ops_t *ops, void *arg) {
  (void)arg;
  ctx_t c = {.comm = comm, .ops = ops, .rank = symcoll_comm_rank(comm), .n = symcoll_comm_nranks(comm)};
  /* TH_SMALL=1 (sanitizer runs): the small counts only. */
  const int ncounts = getenv("TH_SMALL") ? 4 : quick ? 5 : 6;
  const size_t maxc = (1u << 20) + 3 + 4 * GUARD + (size_t)c.n * 8, maxb = maxc * 8;
  c.hsend = malloc(maxb), c.hrecv = malloc(maxb), c.hexp = malloc(maxb), c.hpoison = malloc(maxb);
  c.dsend = ops->alloc(maxb), c.drecv = ops->alloc(maxb), c.dscale = ops->alloc(8);
  symcoll_mem_t mem = NULL, mem2 = NULL;
  if (!c.hsend || !c.hrecv || !c.hexp || !c.hpoison || !c.dsend || !c.drecv || !c.dscale ||
      symcoll_mem_alloc(comm, maxb, &mem) != SYMCOLL_OK || symcoll_mem_alloc(comm, maxb, &mem2) != SYMCOLL_OK) {
    fprintf(stderr, "rank %d: allocation failed\n", c.rank);
    return 1;
  }
  c.dsym = symcoll_mem_ptr(mem, c.rank);
  c.dsym2 = symcoll_mem_ptr(mem2, c.rank);
  memset(c.hpoison, TH_POISON, maxb);
  /* Every rank's buffers exist before any rank's first kernel waits for it (thread mode). */
  if (symcoll_comm_barrier(comm) != SYMCOLL_OK) return 1;
  for (int coll = 0; coll < SYMCOLL_NUM_COLL_KINDS; coll++) {
    if ((only_coll >= 0 && coll != only_coll) || symcoll_coll_is_fused((symcoll_coll_t)coll)) continue;
    for (int dt = 0; dt < SYMCOLL_NUM_DTYPES; dt++) {
      if (only_dtype >= 0 && dt != only_dtype) continue;
      const bool main_type = dt == SYMCOLL_FLOAT32 || dt == SYMCOLL_FLOAT16 || dt == SYMCOLL_BFLOAT16;
      for (int ci = 0; ci < (main_type ? ncounts : ncounts < 5 ? ncounts : 5); ci++) {
        const size_t count = count_at(ci, (symcoll_coll_t)coll, c.n);
        for (int op = 0; op < (takes_op((symcoll_coll_t)coll) ? SYMCOLL_NUM_OPS : 1); op++) {
          /* The ops differ only in the arithmetic of an element, not in how a protocol moves
           * data: every op, dtype, algorithm and placement up to 4096 elements; max and min up
           * to 65537 too; the largest count (rounds, chunks) with sum. */
          if ((op == SYMCOLL_PROD || op == SYMCOLL_AVG) && ci > 3) continue;
          if (op != SYMCOLL_SUM && ci > 4) continue;
          const uint32_t seed = base_seed + (uint32_t)(coll * 977 + dt * 131 + ci * 7 + op);
          for (int ai = 0; ai < MAX_ALGOS; ai++) {
            const symcoll_algo_t algo = algos_of[coll][ai];
            if (ai > 0 && algo == SYMCOLL_ALGO_AUTO) break;
            if (symcoll_coll_algo_supported(comm, (symcoll_coll_t)coll, algo) != SYMCOLL_OK) continue;
            for (int pl = 0; pl < NUM_PLACEMENTS; pl++) {
              /* A symmetric output matters where peers store into it (recv_all) or a protocol
               * reads a reduction's input there in place (all_reduce's two-shot). */
              const bool sym_recv = recv_all((symcoll_coll_t)coll) || coll == SYMCOLL_COLL_ALL_REDUCE;
              if ((pl == SYMMETRIC_RECV || pl == SYMMETRIC_IN_PLACE || pl == SYMMETRIC_BOTH) && !sym_recv) continue;
              /* The scaled sum: a pass before the sum (scratch), then the sum itself: up to
               * 4096 elements, out of place, in place and from symmetric memory. */
              const bool scaled_too = takes_op((symcoll_coll_t)coll) && op == SYMCOLL_SUM && ci <= 3 &&
                                      (pl == OUT_OF_PLACE || pl == IN_PLACE || pl == SYMMETRIC_SEND);
              for (int scaled = 0; scaled <= (int)scaled_too; scaled++) {
                int f = one_case(&c, (symcoll_coll_t)coll, (symcoll_dtype_t)dt, count, (symcoll_op_t)op, algo, pl,
                                 seed + (uint32_t)scaled, scaled != 0);
                if (f < 0) {
                  c.failures++;
                  goto out;
                }
                c.failures += f;
                if (c.failures > 8) goto out;
              }
            }
          }
        }
      }
    }
  }
out:
  if (c.rank == 0) printf("rank 0: %d calls checked on %s, %d failures\n", c.calls, ops->name, c.failures);
  symcoll_mem_free(mem);
  symcoll_mem_free(mem2);
  ops->free(c.dsend);
  ops->free(c.drecv);
  ops->free(c.dscale);
  free(c.hsend);
  free(c.hrecv);
  free(c.hexp);
  free(c.hpoison);
  return c.failures;
}

static void test_matrix(void **state) {
  (void)state;
  int f = th_run(&launch, rank_matrix, NULL);
  assert_int_equal(f, 0);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (th_launch_arg(&launch, argc, argv, &i)) continue;
    if (!strcmp(argv[i], "--quick"))
      quick = true;
    else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) {
      const char *d = argv[++i];
      for (int k = 0; k < SYMCOLL_NUM_DTYPES; k++)
        if (!strcmp(d, symcoll_dtype_name((symcoll_dtype_t)k))) only_dtype = k;
    } else if (!strcmp(argv[i], "--coll") && i + 1 < argc) {
      const char *c = argv[++i];
      for (int k = 0; k < SYMCOLL_NUM_COLL_KINDS; k++)
        if (!strcmp(c, symcoll_coll_name((symcoll_coll_t)k)) && !symcoll_coll_is_fused((symcoll_coll_t)k))
          only_coll = k;
      if (only_coll < 0 && strcmp(c, "all") != 0) {
        fprintf(stderr, "unknown collective %s\n", c);
        return 2;
      }
    }
  }
  if (th_skip_without_gpu(launch.backend)) return TH_SKIP;
  th_set_mode(launch.mode);
  base_seed = th_seed();
  printf("seed %u\n", base_seed);
  char name[128];
  snprintf(name, sizeof name, "%s_%s_%s_%dranks",
           only_coll < 0 ? "collectives" : symcoll_coll_name((symcoll_coll_t)only_coll), launch.backend, launch.mode,
           launch.nranks);
  const struct CMUnitTest tests[] = {{name, test_matrix, NULL, NULL, NULL}};
  return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
