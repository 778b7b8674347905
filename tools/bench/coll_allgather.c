/* symcoll-bench: all_gather. Size is the gathered output; busbw = algbw * (n - 1) / n. */
#include "bench.h"
#include "exact.h"

static size_t count_of(size_t bytes, size_t es, int n) {
  return bytes / es / (size_t)n;
}
static size_t send_elems(size_t count, int n) {
  (void)n;
  return count;
}
static size_t recv_elems(size_t count, int n) {
  return count * (size_t)n;
}
static void fill(void *send, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int rank, int n, uint32_t seed) {
  (void)n, (void)op;
  exact_fill(send, dt, count, rank, seed);
}
static void expect(void *want, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int rank, int n, int root,
                   bool in_place, uint32_t seed) {
  (void)root, (void)in_place; /* the whole output is written */
  (void)op, (void)rank;
  for (int r = 0; r < n; r++) exact_fill((char *)want + (size_t)r * count * symcoll_dtype_size(dt), dt, count, r, seed);
}
static symcoll_status_t run(symcoll_comm_t comm, const void *send, void *recv, size_t count, symcoll_dtype_t dt,
                            symcoll_op_t op, int root, void *stream, const symcoll_coll_opts_t *opts) {
  (void)root;
  (void)op;
  return symcoll_all_gather_ex(comm, send, recv, count, dt, stream, opts);
}

const bench_coll_t bench_all_gather = {
    .kind = SYMCOLL_COLL_ALL_GATHER,
    .has_op = false,
    .busbw_factor_num = 1,
    .size_is = "the gathered output",
    .count_of = count_of,
    .send_elems = send_elems,
    .recv_elems = recv_elems,
    .fill = fill,
    .expect = expect,
    .run = run,
};
