/* All-reduce on CPU ranks: one-shot (every rank reduces the whole buffer from every rank's
 * copy) and two-shot (each rank reduces 1/n, then gathers the others' parts), pipelined in
 * sub-chunks of HOST_SUB_BYTES within an epoch. */
#include <string.h>

#include "host_internal.h"

typedef struct {
  const char *send;
  char *recv;
  size_t n; /* elements of this chunk */
} chunk_t;

static symcoll_status_t one_shot(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a, chunk_t c,
                                 bool first, struct symcoll_mem *zmem, size_t zoff) {
  const int me = comm->rank, n = comm->nranks;
  const size_t es = symcoll__esize(a->dtype), sub = hs->sub_bytes / es;
  const host_epoch_t ep = symcoll__host_epoch_begin(comm, hs, a, first, zmem, zoff);
  char *mine = hs->data[me] + ep.half_off;
  const symcoll__reduce_fn reduce = symcoll__host_reduce_fn(a->dtype, a->op);
  const char *base[SYMCOLL_MAX_RANKS];
  const void *srcs[SYMCOLL_MAX_RANKS];
  for (size_t k = 0, lo = 0; lo < c.n; k++, lo += sub) {
    const size_t cnt = host_min(c.n - lo, sub);
    if (!zmem) memcpy(mine + lo * es, c.send + lo * es, cnt * es);
    symcoll__host_publish(&hs->pad[me]->ready, (ep.e << EPOCH_SHIFT) | (k + 1));
    SYMCOLL_CHECK(symcoll__host_wait_ready(comm, hs, &ep, k));
    if (k == 0) {
      for (int p = 0; p < n; p++)
        if (p != me && !(base[p] = symcoll__host_peer_input(comm, hs, &ep, p, c.n * es))) return SYMCOLL_ERR_MISMATCH;
      base[me] = c.send; /* same bits as the copy; saves reading it back */
    }
    for (int p = 0; p < n; p++) srcs[p] = base[p] + lo * es;
    reduce(c.recv + lo * es, srcs, n, cnt);
  }
  return symcoll__host_epoch_end(comm, hs, &ep, zmem != NULL);
}

static symcoll_status_t two_shot(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a, chunk_t c,
                                 bool first) {
  const int me = comm->rank, n = comm->nranks;
  const size_t es = symcoll__esize(a->dtype), sub = hs->sub_bytes / es;
  const host_epoch_t ep = symcoll__host_epoch_begin(comm, hs, a, first, NULL, 0);
  char *mine = hs->data[me] + ep.half_off;
  host_pad_t *pad = hs->pad[me];
  const symcoll__reduce_fn reduce = symcoll__host_reduce_fn(a->dtype, a->op);
  const void *srcs[SYMCOLL_MAX_RANKS];
  for (size_t k = 0, lo = 0; lo < c.n; k++, lo += sub) {
    const size_t cnt = host_min(c.n - lo, sub);
    /* Segments of 64 elements keep every rank's part on whole blocks of the reduce loops. */
    const size_t seg = ((cnt + (size_t)n - 1) / (size_t)n + 63) & ~(size_t)63;
    memcpy(mine + lo * es, c.send + lo * es, cnt * es);
    symcoll__host_publish(&pad->ready, (ep.e << EPOCH_SHIFT) | (k + 1));
    SYMCOLL_CHECK(symcoll__host_wait_ready(comm, hs, &ep, k));
    const size_t s_lo = host_min(seg * (size_t)me, cnt), s_n = host_min(cnt - s_lo, seg);
    if (s_n > 0) {
      for (int p = 0; p < n; p++) srcs[p] = hs->data[p] + ep.half_off + (lo + s_lo) * es;
      srcs[me] = c.send + (lo + s_lo) * es;
      reduce(mine + (lo + s_lo) * es, srcs, n, s_n);
    }
    symcoll__host_publish(&pad->reduced, (ep.e << EPOCH_SHIFT) | (k + 1));
    SYMCOLL_CHECK(symcoll__host_wait_all(comm, hs, offsetof(host_pad_t, reduced), (ep.e << EPOCH_SHIFT) | (k + 1)));
    for (int q = 0; q < n; q++) {
      const size_t q_lo = host_min(seg * (size_t)q, cnt), q_n = host_min(cnt - q_lo, seg);
      if (q_n) memcpy(c.recv + (lo + q_lo) * es, hs->data[q] + ep.half_off + (lo + q_lo) * es, q_n * es);
    }
  }
  return symcoll__host_epoch_end(comm, hs, &ep, false);
}

symcoll_status_t symcoll__host_all_reduce(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a) {
  const size_t es = symcoll__esize(a->dtype);
  symcoll_status_t s = SYMCOLL_OK;
  /* Zero-copy inputs are cut into the same chunks as staged ones, so every rank counts the
   * same epochs whichever kind of input each one passes. The CPU one-shot is double-buffered
   * already and waits once, on peers' epoch flags: ONE_SHOT_DB and LAMPORT are the same
   * algorithm here. */
  struct symcoll_mem *zmem = a->algo != SYMCOLL_ALGO_TWO_SHOT ? a->send_mem : NULL;
  const size_t per = hs->half / es;
  for (size_t lo = 0; lo < a->count && s == SYMCOLL_OK; lo += per) {
    chunk_t c = {(const char *)a->send + lo * es, (char *)a->recv + lo * es, host_min(a->count - lo, per)};
    s = a->algo == SYMCOLL_ALGO_TWO_SHOT ? two_shot(comm, hs, a, c, lo == 0)
                                         : one_shot(comm, hs, a, c, lo == 0, zmem, a->send_off + lo * es);
  }
  return s;
}
