/* Reduce on CPU ranks (one-shot): every rank stages its chunk (or, with a symmetric input,
 * publishes where it lies) and the root alone reduces every rank's copy into its output, in
 * rank order, sub-chunk by sub-chunk as they come in, with all_reduce's loops: the root gets
 * the bits symcoll_all_reduce gives. Each epoch moves one chunk of at most a workspace half.
 * A rank other than the root writes nothing but its own staging: it stages and publishes its
 * whole chunk, then waits once, at the epoch's first wait, for every peer (which compares
 * calls, and proves every peer, the root included, finished the epoch before: the root no
 * longer reads the half this epoch reuses). With a symmetric input it also waits at the
 * epoch's end for the root's `done`, since the root reads its buffer in place. The root's own
 * input is read by nobody else, so it is neither staged nor published. */
#include <string.h>

#include "host_internal.h"

static symcoll_status_t root_epoch(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a, size_t lo,
                                   size_t cnt) {
  const int me = comm->rank, n = comm->nranks;
  const size_t es = symcoll_dtype_size(a->dtype), sub = hs->sub_bytes / es;
  const char *send = (const char *)a->send + lo * es;
  char *recv = (char *)a->recv + lo * es;
  const host_epoch_t ep = symcoll__host_epoch_begin(comm, hs, a, lo == 0, NULL, 0);
  const symcoll__reduce_fn reduce = symcoll__host_reduce_fn(a->dtype, a->op);
  const char *base[SYMCOLL_MAX_RANKS];
  const void *srcs[SYMCOLL_MAX_RANKS];
  symcoll__host_publish(&hs->pad[me]->ready, (ep.e << EPOCH_SHIFT) | 1);
  for (size_t k = 0, j = 0; j < cnt; k++, j += sub) {
    SYMCOLL_CHECK(symcoll__host_wait_ready(comm, hs, &ep, k));
    if (k == 0) {
      for (int p = 0; p < n; p++)
        if (p != me && !(base[p] = symcoll__host_peer_input(comm, hs, &ep, p, cnt * es))) {
          (void)symcoll__host_epoch_end(comm, hs, &ep, false); /* peers waiting for our done go on */
          return SYMCOLL_ERR_MISMATCH;
        }
      base[me] = send;
    }
    for (int p = 0; p < n; p++) srcs[p] = base[p] + j * es;
    reduce(recv + j * es, srcs, n, host_min(cnt - j, sub)); /* in place: element i only reads element i */
  }
  return symcoll__host_epoch_end(comm, hs, &ep, false);
}

static symcoll_status_t peer_epoch(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a, size_t lo,
                                   size_t cnt) {
  const int me = comm->rank;
  const size_t es = symcoll_dtype_size(a->dtype), sub = hs->sub_bytes / es;
  const char *send = (const char *)a->send + lo * es;
  struct symcoll_mem *zmem = a->send_mem;
  const host_epoch_t ep = symcoll__host_epoch_begin(comm, hs, a, lo == 0, zmem, a->send_off + lo * es);
  char *mine = hs->data[me] + ep.half_off;
  /* This epoch's half is ours to write before its first wait (host_internal.h). */
  for (size_t k = 0, j = 0; j < cnt; k++, j += sub) {
    if (!zmem) memcpy(mine + j * es, send + j * es, host_min(cnt - j, sub) * es);
    symcoll__host_publish(&hs->pad[me]->ready, (ep.e << EPOCH_SHIFT) | (k + 1));
  }
  SYMCOLL_CHECK(symcoll__host_wait_ready(comm, hs, &ep, 0));
  return symcoll__host_epoch_end(comm, hs, &ep, zmem != NULL);
}

symcoll_status_t symcoll__host_reduce(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a) {
  const size_t es = symcoll_dtype_size(a->dtype);
  const size_t per = hs->half / es; /* all_reduce's chunks: the same on every rank */
  symcoll_status_t s = SYMCOLL_OK;
  for (size_t lo = 0; lo < a->count && s == SYMCOLL_OK; lo += per) {
    const size_t cnt = host_min(a->count - lo, per);
    s = comm->rank == a->root ? root_epoch(comm, hs, a, lo, cnt) : peer_epoch(comm, hs, a, lo, cnt);
  }
  return s;
}
