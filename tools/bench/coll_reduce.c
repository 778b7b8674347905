/* symcoll-bench: reduce to --root (default 0). Size is the buffer; busbw = algbw (nccl-tests).
 * Only the root's recv is written: the others' must come back as it was (poison, or in place
 * their input). */
#include <string.h>

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
  if (rank == root)
    exact_expect(want, dt, op, count, n, seed);
  else if (in_place)
    exact_fill_op(want, dt, op, count, rank, seed);
  else
    memset(want, EXACT_POISON, count * symcoll_dtype_size(dt));
}
static symcoll_status_t run(symcoll_comm_t comm, const void *send, void *recv, size_t count, symcoll_dtype_t dt,
                            symcoll_op_t op, int root, void *stream, const symcoll_coll_opts_t *opts) {
  return symcoll_reduce_ex(comm, send, recv, count, dt, op, root, stream, opts);
}

const bench_coll_t bench_reduce = {
    .kind = SYMCOLL_COLL_REDUCE,
    .has_op = true,
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
