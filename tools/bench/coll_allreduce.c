/* symcoll-bench: all_reduce. busbw = algbw * 2 (n - 1) / n (nccl-tests). */
#include "bench.h"
#include "exact.h"

static size_t count_of(size_t bytes, size_t es, int n) {
  (void)n;
  return bytes / es;
}
static size_t same(size_t count, int n) {
  (void)n;
  return count;
}
static void fill(void *send, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int rank, int n, uint32_t seed) {
  (void)n;
  exact_fill_op(send, dt, op, count, rank, seed);
}
static void expect(void *want, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int rank, int n, int root,
                   bool in_place, uint32_t seed) {
  (void)root, (void)in_place; /* the whole output is written */
  (void)rank;
  exact_expect(want, dt, op, count, n, seed);
}
static symcoll_status_t run(symcoll_comm_t comm, const void *send, void *recv, size_t count, symcoll_dtype_t dt,
                            symcoll_op_t op, int root, void *stream, const symcoll_coll_opts_t *opts) {
  (void)root;
  return symcoll_all_reduce_ex(comm, send, recv, count, dt, op, stream, opts);
}

const bench_coll_t bench_all_reduce = {
    .kind = SYMCOLL_COLL_ALL_REDUCE,
    .has_op = true,
    .busbw_factor_num = 2,
    .size_is = "the buffer",
    .count_of = count_of,
    .send_elems = same,
    .recv_elems = same,
    .fill = fill,
    .expect = expect,
    .run = run,
};
