/*
 * The all-reduce matrix, run on every rank of one launch:
 *   test_allreduce --backend host|cuda --mode process|thread --ranks N [--quick]
 * Every dtype x op x algorithm x count x placement (in/out of place, misaligned, zero-copy
 * from a symmetric allocation); exact-result inputs drawn fresh for each run; outputs
 * poisoned first and checked bit for bit, guard elements around them included.
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

#define GUARD 16

static int rank_matrix(symcoll_comm_t comm, const th_buf_ops_t *ops, void *arg) {
  (void)arg;
  const int rank = symcoll_comm_rank(comm), n = symcoll_comm_nranks(comm);
  static const size_t all_counts[] = {1, 7, 255, 4096, 65537, (1u << 20) + 3};
  /* TH_SMALL=1 (sanitizer runs): the small counts only. */
  const int ncounts = getenv("TH_SMALL") ? 4 : quick ? 5 : 6;
  const size_t maxc = all_counts[ncounts - 1] + 2 * GUARD, maxb = maxc * 4;
  char *hsend = malloc(maxb), *hrecv = malloc(maxb), *hexp = malloc(maxb), *hpoison = malloc(maxb);
  char *dsend = ops->alloc(maxb), *drecv = ops->alloc(maxb);
  symcoll_mem_t mem = NULL;
  int failures = 0;
  if (!hsend || !hrecv || !hexp || !hpoison || !dsend || !drecv ||
      symcoll_mem_alloc(comm, maxb, &mem) != SYMCOLL_OK) {
    fprintf(stderr, "rank %d: allocation failed\n", rank);
    return 1;
  }
  char *dsym = symcoll_mem_ptr(mem, rank);
  memset(hpoison, 0xff, maxb); /* NaN in every dtype */
  static const symcoll_algo_t algos[] = {SYMCOLL_ALGO_ONE_SHOT, SYMCOLL_ALGO_TWO_SHOT,
                                         SYMCOLL_ALGO_ONE_SHOT_DB, SYMCOLL_ALGO_LAMPORT, SYMCOLL_ALGO_AUTO};
  static const char *const placement_names[] = {"out-of-place", "in-place", "misaligned out-of-place",
                                                "misaligned in-place", "zero-copy symmetric send"};
  int calls = 0;
  for (int dt = 0; dt < SYMCOLL_NUM_DTYPES; dt++) {
    const size_t es = symcoll_dtype_size((symcoll_dtype_t)dt);
    for (int ci = 0; ci < ncounts; ci++) {
      const size_t count = all_counts[ci];
      const uint32_t seed = base_seed + (uint32_t)(dt * 131 + ci * 7);
      th_fill(hsend, (symcoll_dtype_t)dt, count, rank, seed);
      for (int op = 0; op < SYMCOLL_NUM_OPS; op++) {
        th_expect(hexp, (symcoll_dtype_t)dt, (symcoll_op_t)op, count, n, seed);
        for (int ai = 0; ai < (int)(sizeof algos / sizeof algos[0]); ai++) {
          for (int pl = 0; pl < 5; pl++) {
            /* Offsets in elements; misaligned ones break 16-byte alignment. */
            size_t soff = pl == 2 ? 1 : pl == 3 ? 1 : pl == 4 ? 2 : GUARD;
            size_t roff = pl == 2 ? 3 : pl == 3 ? 1 : GUARD;
            char *recv = drecv + roff * es;
            char *send = pl == 1 || pl == 3 ? recv : pl == 4 ? dsym + soff * es : dsend + soff * es;
            size_t span = (count + 2 * GUARD) * es;
            ops->to_dev(drecv, hpoison, span);
            ops->to_dev(send, hsend, count * es);
            symcoll_coll_opts_t o;
            symcoll_coll_opts_init(&o);
            o.algo = algos[ai];
            symcoll_status_t s = symcoll_all_reduce_ex(comm, send, recv, count, (symcoll_dtype_t)dt,
                                                       (symcoll_op_t)op, ops->stream(), &o);
            calls++;
            if (s != SYMCOLL_OK) {
              fprintf(stderr, "rank %d: %s %s %s count %zu %s: %s\n", rank, symcoll_dtype_name(dt),
                      symcoll_op_name(op), symcoll_algo_name(algos[ai]), count, placement_names[pl],
                      symcoll_status_string(s));
              failures++;
              goto out;
            }
            ops->sync();
            ops->to_host(hrecv, drecv, span);
            size_t bad = 0, first = SIZE_MAX;
            for (size_t i = 0; i < count + 2 * GUARD && i * es < span; i++) {
              const char *got = hrecv + i * es;
              bool inside = i >= roff && i < roff + count;
              const char *want = inside ? hexp + (i - roff) * es : hpoison;
              if (memcmp(got, want, es) != 0) {
                if (first == SIZE_MAX) first = i;
                bad++;
              }
            }
            if (bad) {
              size_t i = first;
              bool inside = i >= roff && i < roff + count;
              fprintf(stderr,
                      "rank %d: %s %s %s count %zu %s: %zu wrong; first at element %zd (%s): got %g want %g\n",
                      rank, symcoll_dtype_name(dt), symcoll_op_name(op), symcoll_algo_name(algos[ai]),
                      count, placement_names[pl], bad, (ssize_t)i - (ssize_t)roff,
                      inside ? "result" : "guard, must stay untouched", th_load(hrecv, dt, i),
                      inside ? th_load(hexp, dt, i - roff) : NAN);
              failures++;
              if (failures > 8) goto out;
            }
          }
        }
      }
    }
  }
out:
  if (rank == 0)
    printf("rank 0: %d all-reduce calls checked on %s, %d failures\n", calls, ops->name, failures);
  symcoll_mem_free(mem);
  ops->free(dsend);
  ops->free(drecv);
  free(hsend);
  free(hrecv);
  free(hexp);
  free(hpoison);
  return failures;
}

static void test_matrix(void **state) {
  (void)state;
  int f = th_run(&launch, rank_matrix, NULL);
  assert_int_equal(f, 0);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc) launch.backend = argv[++i];
    else if (!strcmp(argv[i], "--mode") && i + 1 < argc) launch.mode = argv[++i];
    else if (!strcmp(argv[i], "--ranks") && i + 1 < argc) launch.nranks = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--quick")) quick = true;
  }
  if (!strcmp(launch.backend, "cuda")) {
    const char *why = NULL;
    if (!th_cuda_ops(&why)) {
      printf("SKIPPED: GPU test, %s\n", why);
      return TH_SKIP;
    }
  }
  base_seed = (uint32_t)time(NULL) ^ (uint32_t)getpid() * 2654435761u;
  printf("seed %u\n", base_seed);
  char name[96];
  snprintf(name, sizeof name, "allreduce_%s_%s_%dranks", launch.backend, launch.mode, launch.nranks);
  const struct CMUnitTest tests[] = {{name, test_matrix, NULL, NULL, NULL}};
  return cmocka_run_group_tests_name(name, tests, NULL, NULL);
}
