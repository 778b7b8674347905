/* The collective entry points: argument checks, algorithm choice, dispatch to the transport. */
#include <stddef.h>
#include <string.h>

#include "internal.h"

void symcoll_coll_opts_init(symcoll_coll_opts_t *opts) {
  if (!opts) return;
  memset(opts, 0, sizeof *opts);
  opts->struct_size = sizeof *opts;
}

/* SYMCOLL_CHECK=1: every rank compares the call's arguments with every peer's. */
static symcoll_status_t check_agreement(symcoll_comm_t comm, const symcoll__coll_args_t *a) {
  /* The launch shape too: ranks whose grids or rounds differ would wait at different slots. */
  uint64_t mine[7] = {a->count, (uint64_t)a->dtype, (uint64_t)a->op, (uint64_t)a->algo,
                      (uint64_t)a->blocks, (uint64_t)a->threads, a->round_bytes};
  uint64_t all[SYMCOLL_MAX_RANKS][7];
  SYMCOLL_CHECK(comm->oob->allgather(comm, mine, all, sizeof mine));
  for (int r = 0; r < comm->nranks; r++)
    if (memcmp(all[r], mine, sizeof mine) != 0) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL,
                   "collective %llu: rank %d passed count %llu %s %s %s, rank %d count %llu %s %s %s",
                   (unsigned long long)comm->coll_seq, comm->rank, (unsigned long long)mine[0],
                   symcoll_dtype_name(a->dtype), symcoll_op_name(a->op), symcoll_algo_name(a->algo),
                   r, (unsigned long long)all[r][0], symcoll_dtype_name((symcoll_dtype_t)all[r][1]),
                   symcoll_op_name((symcoll_op_t)all[r][2]), symcoll_algo_name((symcoll_algo_t)all[r][3]));
      if (!memcmp(all[r], mine, 4 * sizeof mine[0]))
        SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "... and launch shapes differ: rank %d blocks %llu threads %llu round %llu, rank %d %llu %llu %llu",
                     comm->rank, (unsigned long long)mine[4], (unsigned long long)mine[5], (unsigned long long)mine[6],
                     r, (unsigned long long)all[r][4], (unsigned long long)all[r][5], (unsigned long long)all[r][6]);
      return SYMCOLL_ERR_MISMATCH;
    }
  return SYMCOLL_OK;
}

symcoll_status_t symcoll_all_reduce_ex(symcoll_comm_t comm, const void *send, void *recv,
                                       size_t count, symcoll_dtype_t dtype, symcoll_op_t op,
                                       void *stream, const symcoll_coll_opts_t *opts) {
  if (!comm) return SYMCOLL_ERR_INVALID_ARGUMENT;
  if ((unsigned)dtype >= SYMCOLL_NUM_DTYPES || (unsigned)op >= SYMCOLL_NUM_OPS) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "all_reduce: unknown dtype %d or op %d", (int)dtype, (int)op);
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  }
  /* Options of 0.1 end before round_bytes: still accepted. */
  const bool has_round = opts && opts->struct_size == sizeof *opts;
  const size_t opt_round = has_round ? opts->round_bytes : 0;
  if (opts && ((!has_round && opts->struct_size != offsetof(symcoll_coll_opts_t, round_bytes)) ||
               (unsigned)opts->algo >= SYMCOLL_NUM_ALGOS || opts->blocks < 0 || opts->threads < 0 ||
               opts->threads > 1024 || (opts->threads & 31) != 0 || opt_round % 256 != 0)) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "all_reduce: bad options (struct_size, algo, blocks, threads or round_bytes)");
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  }
  if (count == 0) return SYMCOLL_OK;
  size_t esize = symcoll_dtype_size(dtype);
  if (!send || !recv || count > SIZE_MAX / esize) return SYMCOLL_ERR_INVALID_ARGUMENT;
  size_t bytes = count * esize;
  uintptr_t s = (uintptr_t)send, r = (uintptr_t)recv;
  if ((s | r) % esize != 0) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "all_reduce: buffers not aligned to the %zu-byte element", esize);
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  }
  if (s != r && s < r + bytes && r < s + bytes) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "all_reduce: send and recv overlap without being equal");
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  }
  if (comm->device == SYMCOLL_DEVICE_HOST && stream != NULL) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "all_reduce: a CPU communicator takes no stream");
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  }
  SYMCOLL_CHECK(symcoll__comm_status(comm));

  symcoll__coll_args_t a = {.send = send, .recv = recv, .count = count, .dtype = dtype,
                            .op = op, .stream = stream};
  const symcoll__tune_entry_t *t = &comm->tune[dtype].bucket[symcoll__tune_bucket(bytes)];
  a.algo = opts && opts->algo != SYMCOLL_ALGO_AUTO ? opts->algo
           : comm->forced_algo != SYMCOLL_ALGO_AUTO ? comm->forced_algo
                                                     : t->algo;
  /* One rank: the reduction of one input is that input. Auto copies it (in place there is
   * nothing to do), as NCCL does; a forced algorithm still runs its protocol, so that the
   * benchmark can time the protocol itself. */
  if (comm->nranks == 1 && (!opts || opts->algo == SYMCOLL_ALGO_AUTO) &&
      comm->forced_algo == SYMCOLL_ALGO_AUTO) {
    comm->coll_seq++;
    return s == r ? SYMCOLL_OK : comm->tp->copy(comm, recv, send, bytes, stream);
  }
  if (symcoll_algo_supported(comm, a.algo) != SYMCOLL_OK) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "all_reduce: %s is not available on this communicator%s",
                 symcoll_algo_name(a.algo),
                 a.algo == SYMCOLL_ALGO_NCCL ? " (it holds no NCCL communicator: see SYMCOLL_NCCL)" : "");
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  a.blocks = opts && opts->blocks ? opts->blocks : t->blocks;
  a.threads = opts && opts->threads ? opts->threads : t->threads;
  a.round_bytes = opt_round ? opt_round : t->round_bytes;
  /* Zero-copy only out of place: in place, writing the result would race with peers' reads. */
  if (s != r) a.send_mem = symcoll__mem_find(comm, send, bytes, &a.send_off);
  if (comm->check_args) SYMCOLL_CHECK(check_agreement(comm, &a));
  comm->coll_seq++;
  symcoll__fault_point(comm->rank, "coll");
  return comm->tp->all_reduce(comm, &a);
}

symcoll_status_t symcoll_algo_supported(symcoll_comm_t comm, symcoll_algo_t algo) {
  if (!comm || (unsigned)algo >= SYMCOLL_NUM_ALGOS) return SYMCOLL_ERR_INVALID_ARGUMENT;
  if (algo != SYMCOLL_ALGO_NCCL) return SYMCOLL_OK;
  return comm->tp->has_algo && comm->tp->has_algo(comm, algo) ? SYMCOLL_OK : SYMCOLL_ERR_UNSUPPORTED;
}

symcoll_status_t symcoll_all_reduce_algo(symcoll_comm_t comm, size_t count, symcoll_dtype_t dtype,
                                         symcoll_algo_t *algo_p) {
  if (!comm || !algo_p || (unsigned)dtype >= SYMCOLL_NUM_DTYPES) return SYMCOLL_ERR_INVALID_ARGUMENT;
  size_t esize = symcoll_dtype_size(dtype);
  if (count > SIZE_MAX / esize) return SYMCOLL_ERR_INVALID_ARGUMENT;
  *algo_p = comm->forced_algo != SYMCOLL_ALGO_AUTO
                ? comm->forced_algo
                : comm->tune[dtype].bucket[symcoll__tune_bucket(count * esize)].algo;
  return SYMCOLL_OK;
}

symcoll_status_t symcoll_all_reduce(symcoll_comm_t comm, const void *send, void *recv,
                                    size_t count, symcoll_dtype_t dtype, symcoll_op_t op,
                                    void *stream) {
  return symcoll_all_reduce_ex(comm, send, recv, count, dtype, op, stream, NULL);
}
