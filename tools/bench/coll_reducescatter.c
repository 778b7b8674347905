/* symcoll-bench: reduce_scatter. Size is the input; busbw = algbw * (n - 1) / n. */
#include "bench.h"
#include "exact.h"

static size_t count_of(size_t bytes, size_t es, int n) {
  return bytes / es / (size_t)n;
}
static size_t send_elems(size_t count, int n) {
  return count * (size_t)n;
}
static size_t recv_elems(size_t count, int n) {
  (void)n;
  return count;
}
static void fill(void *send, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int rank, int n, uint32_t seed) {
  exact_fill_op(send, dt, op, count * (size_t)n, rank, seed);
}
static void expect(void *want, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int rank, int n, int root,
                   bool in_place, uint32_t seed) {
  (void)root, (void)in_place; /* the whole output is written */
  exact_expect_range(want, dt, op, (size_t)rank * count, count, n, seed);
}
static symcoll_status_t run(symcoll_comm_t comm, const void *send, void *recv, size_t count, symcoll_dtype_t dt,
                            symcoll_op_t op, int root, void *stream, const symcoll_coll_opts_t *opts) {
  (void)root;
  return symcoll_reduce_scatter_ex(comm, send, recv, count, dt, op, stream, opts);
}

const bench_coll_t bench_reduce_scatter = {
    .kind = SYMCOLL_COLL_REDUCE_SCATTER,
    .has_op = true,
    .busbw_factor_num = 1,
    .size_is = "the input, nranks x the output",
    .count_of = count_of,
    .send_elems = send_elems,
    .recv_elems = recv_elems,
    .fill = fill,
    .expect = expect,
    .run = run,
};
