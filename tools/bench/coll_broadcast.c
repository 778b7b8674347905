/* symcoll-bench: broadcast from --root (default 0). Size is the buffer; busbw = algbw
 * (nccl-tests: every byte crosses each link once, however many ranks). */
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
/* Every rank fills its input (only the root's is read). */
static void fill(void *send, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int rank, int n, uint32_t seed) {
  (void)op, (void)n;
  exact_fill(send, dt, count, rank, seed);
}
static void expect(void *want, symcoll_dtype_t dt, symcoll_op_t op, size_t count, int rank, int n, int root,
                   bool in_place, uint32_t seed) {
  (void)op, (void)rank, (void)n, (void)in_place; /* every rank's recv is written */
  exact_fill(want, dt, count, root, seed);
}
static symcoll_status_t run(symcoll_comm_t comm, const void *send, void *recv, size_t count, symcoll_dtype_t dt,
                            symcoll_op_t op, int root, void *stream, const symcoll_coll_opts_t *opts) {
  (void)op;
  return symcoll_broadcast_ex(comm, send, recv, count, dt, root, stream, opts);
}

const bench_coll_t bench_broadcast = {
    .kind = SYMCOLL_COLL_BROADCAST,
    .has_op = false,
    .has_root = true,
    .busbw_factor_num = 1,
    .busbw_whole = true,
    .size_is = "the buffer",
    .count_of = count_of,
    .send_elems = same,
    .recv_elems = same,
    .fill = fill,
    .expect = expect,
    .run = run,
};
