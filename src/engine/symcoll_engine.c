/* The symcoll engine: a symcoll communicator as the engine between nodes emulated on one host
 * (SYMCOLL_NODE_RANKS), through the public API like any engine's user. */
#include "registry.h"

static symcoll_status_t sc_coll(void *ctx, symcoll_coll_t coll, const void *send, void *recv, size_t count,
                                symcoll_dtype_t dtype, symcoll_op_t op, int root, void *stream) {
  symcoll_comm_t c = ctx;
  switch (coll) {
    case SYMCOLL_COLL_ALL_REDUCE:
      return symcoll_all_reduce(c, send, recv, count, dtype, op, stream);
    case SYMCOLL_COLL_ALL_GATHER:
      return symcoll_all_gather(c, send, recv, count, dtype, stream);
    case SYMCOLL_COLL_REDUCE_SCATTER:
      return symcoll_reduce_scatter(c, send, recv, count, dtype, op, stream);
    case SYMCOLL_COLL_BROADCAST:
      return symcoll_broadcast(c, send, recv, count, dtype, root, stream);
    case SYMCOLL_COLL_REDUCE:
      return symcoll_reduce(c, send, recv, count, dtype, op, root, stream);
    case SYMCOLL_COLL_ALL_TO_ALL:
      return symcoll_all_to_all(c, send, recv, count, dtype, stream);
    case SYMCOLL_COLL_ALL_GATHER_MATMUL:
    case SYMCOLL_COLL_MATMUL_REDUCE_SCATTER:
    case SYMCOLL_COLL_ALL_REDUCE_RMSNORM:
    case SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM:
    case SYMCOLL_NUM_COLL_KINDS:
      break;
  }
  return SYMCOLL_NO_ENTRY("the symcoll engine between emulated nodes", coll);
}
static symcoll_status_t sc_allgather(void *ctx, const void *send, void *recv, size_t bytes) {
  symcoll_comm_t c = ctx;
  return c->oob->allgather(c, send, recv, bytes);
}
static symcoll_status_t sc_check(void *ctx) {
  return symcoll_comm_check(ctx);
}
static void sc_abort(void *ctx) {
  symcoll_comm_abort(ctx);
}
static void sc_destroy(void *ctx) {
  symcoll_comm_destroy(ctx);
}
static void sc_keep(void *ctx) {
  (void)ctx;
} /* an engine over a communicator someone else owns */

void symcoll__symcoll_engine(symcoll_comm_t c, bool owned, symcoll__engine_t *e) {
  *e = (symcoll__engine_t){.name = "symcoll",
                           .ctx = c,
                           .rank = c->rank,
                           .nranks = c->nranks,
                           .coll = sc_coll,
                           .allgather = sc_allgather,
                           .check = sc_check,
                           .abort = sc_abort,
                           .destroy = owned ? sc_destroy : sc_keep};
}
