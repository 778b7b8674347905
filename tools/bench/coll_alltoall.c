/* symcoll-bench: all_to_all. Size is the send buffer, nranks blocks of count (nccl-tests);
 * busbw = algbw * (n - 1) / n. Rank r's send is exact_fill over its nranks x count elements,
 * so block p of rank me's recv is rank p's elements me * count ... (exact.h). */
#include "bench.h"
#include "exact.h"

static size_t count_of(size_t bytes, size_t es, int n) {
  return bytes / es / (size_t)n;
}
static size_t all_blocks(size_t count, int n) {
  return count * (size_t)n;
}
static void fill(void *send, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int rank, int n, uint32_t seed) {
  (void)op;
  exact_fill(send, dt, count * (size_t)n, rank, seed);
}
static void expect(void *want, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int rank, int n, int root,
                   bool in_place, uint32_t seed) {
  (void)op, (void)root, (void)in_place; /* the whole output is written */
  const size_t block = count * symcoll_dtype_size(dt);
  for (int p = 0; p < n; p++)
    exact_fill_range((char *)want + (size_t)p * block, dt, (size_t)rank * count, count, p, seed);
}
static symcoll_status_t run(symcoll_comm_t comm, const void *send, void *recv, size_t count, symcoll_dtype_t dt,
                            symcoll_op_t op, int root, void *stream, const symcoll_coll_opts_t *opts) {
  (void)op, (void)root;
  return symcoll_all_to_all_ex(comm, send, recv, count, dt, stream, opts);
}

const bench_coll_t bench_all_to_all = {
    .kind = SYMCOLL_COLL_ALL_TO_ALL,
    .has_op = false,
    .busbw_factor_num = 1,
    .size_is = "the send buffer, nranks blocks of count",
    .count_of = count_of,
    .send_elems = all_blocks,
    .recv_elems = all_blocks,
    .fill = fill,
    .expect = expect,
    .run = run,
};
