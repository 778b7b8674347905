/* All-gather on CPU ranks. Each epoch moves one chunk of every rank's block:
 *  - pull: each rank stages its chunk (unless its input is symmetric) and copies every peer's
 *    chunk from where the peer published it;
 *  - push: each rank copies its chunk into slot [rank] of every peer's staging, then copies
 *    its own staging's slots out (remote writes instead of remote reads).
 *  - pull in place from peers' private inputs (one copy, as Open MPI's single-copy path): where
 *    peers can read each other's memory (thread mode, or process_vm_readv allowed between every
 *    pair, agreed at creation) and a rank's block is at least HOST_DIRECT_MIN_BYTES, each rank
 *    publishes its input's address instead of staging it, and every peer copies straight from
 *    there into its output; the epoch ends when every peer has read it.
 * LAMPORT runs the pull on CPU ranks (the flag wait already is the only synchronisation). */
#include <string.h>

#include "host_internal.h"

static symcoll_status_t pull(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a, size_t lo,
                             size_t cnt, struct symcoll_mem *zmem, size_t zoff) {
  const int me = comm->rank, n = comm->nranks;
  const size_t es = symcoll_dtype_size(a->dtype), sub = hs->sub_bytes / es, count = a->count;
  const char *send = (const char *)a->send + lo * es;
  char *recv = (char *)a->recv;
  const host_epoch_t ep = symcoll__host_epoch_begin(comm, hs, a, lo == 0, zmem, zoff);
  char *mine = hs->data[me] + ep.half_off;
  const char *base[SYMCOLL_MAX_RANKS];
  const bool in_place = send == recv + ((size_t)me * count + lo) * es;
  for (size_t k = 0, j = 0; j < cnt; k++, j += sub) {
    const size_t m = host_min(cnt - j, sub);
    if (!zmem) memcpy(mine + j * es, send + j * es, m * es);
    symcoll__host_publish(&hs->pad[me]->ready, (ep.e << EPOCH_SHIFT) | (k + 1));
    SYMCOLL_CHECK(symcoll__host_wait_ready(comm, hs, &ep, k));
    if (k == 0)
      for (int p = 0; p < n; p++)
        if (p != me && !(base[p] = symcoll__host_peer_input(comm, hs, &ep, p, cnt * es))) return SYMCOLL_ERR_MISMATCH;
    for (int p = 0; p < n; p++) {
      char *dst = recv + ((size_t)p * count + lo + j) * es;
      if (p != me)
        memcpy(dst, base[p] + j * es, m * es);
      else if (!in_place)
        memcpy(dst, send + j * es, m * es);
    }
  }
  return symcoll__host_epoch_end(comm, hs, &ep, zmem != NULL);
}

static symcoll_status_t pull_direct(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a, size_t lo,
                                    size_t cnt) {
  const int me = comm->rank, n = comm->nranks;
  const size_t es = symcoll_dtype_size(a->dtype), count = a->count, bytes = cnt * es;
  const char *send = (const char *)a->send + lo * es;
  char *recv = (char *)a->recv;
  const host_epoch_t ep = symcoll__host_epoch_begin(comm, hs, a, lo == 0, NULL, 0);
  hs->pad[me]->src_addr[ep.e & 1] = (uint64_t)(uintptr_t)send;
  symcoll__host_publish(&hs->pad[me]->ready, (ep.e << EPOCH_SHIFT) | 1);
  SYMCOLL_CHECK(symcoll__host_wait_ready(comm, hs, &ep, 0));
  symcoll_status_t s = SYMCOLL_OK;
  for (int j = 1; j < n && s == SYMCOLL_OK; j++) { /* peers from rank + 1 on */
    const int p = (me + j) % n;
    s = symcoll__host_read_direct(comm, p, recv + ((size_t)p * count + lo) * es, hs->pad[p]->src_addr[ep.e & 1], bytes,
                                  "all_gather");
  }
  char *own = recv + ((size_t)me * count + lo) * es;
  if (s == SYMCOLL_OK && own != send) memcpy(own, send, bytes);
  /* Peers read our input where it lies: nobody leaves before all have read. */
  symcoll_status_t e = symcoll__host_epoch_end(comm, hs, &ep, true);
  return s != SYMCOLL_OK ? s : e;
}

static symcoll_status_t push(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a, size_t lo,
                             size_t cnt, size_t per) {
  const int me = comm->rank, n = comm->nranks;
  const size_t es = symcoll_dtype_size(a->dtype), sub = hs->sub_bytes / es, count = a->count;
  const char *send = (const char *)a->send + lo * es;
  char *recv = (char *)a->recv;
  const host_epoch_t ep = symcoll__host_epoch_begin(comm, hs, a, lo == 0, NULL, 0);
  const bool in_place = send == recv + ((size_t)me * count + lo) * es;
  /* Peers' staging of this epoch is free: they finished epoch e-2 before publishing e-1,
   * which we waited for. */
  for (size_t k = 0, j = 0; j < cnt; k++, j += sub) {
    const size_t m = host_min(cnt - j, sub);
    for (int p = 0; p < n; p++)
      if (p != me) memcpy(hs->data[p] + ep.half_off + ((size_t)me * per + j) * es, send + j * es, m * es);
    symcoll__host_publish(&hs->pad[me]->ready, (ep.e << EPOCH_SHIFT) | (k + 1));
    SYMCOLL_CHECK(symcoll__host_wait_ready(comm, hs, &ep, k));
    for (int p = 0; p < n; p++) {
      char *dst = recv + ((size_t)p * count + lo + j) * es;
      if (p != me)
        memcpy(dst, hs->data[me] + ep.half_off + ((size_t)p * per + j) * es, m * es);
      else if (!in_place)
        memcpy(dst, send + j * es, m * es);
    }
  }
  return symcoll__host_epoch_end(comm, hs, &ep, false);
}

symcoll_status_t symcoll__host_all_gather(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a) {
  const size_t es = symcoll_dtype_size(a->dtype);
  symcoll_status_t s = SYMCOLL_OK;
  /* pull stages one block per rank in a half, push every rank's: the chunk is sized for push
   * on every rank whatever it runs, so both count the same epochs. */
  const size_t per = hs->half / es / (size_t)comm->nranks;
  for (size_t lo = 0; lo < a->count && s == SYMCOLL_OK; lo += per) {
    const size_t cnt = host_min(a->count - lo, per);
    /* The same choice on every rank: direct is agreed at creation, the rest is the call's. */
    const bool direct = symcoll__host_direct_ok(comm, hs) && !a->send_mem && a->count * es >= HOST_DIRECT_MIN_BYTES;
    s = a->algo == SYMCOLL_ALGO_PUSH ? push(comm, hs, a, lo, cnt, per)
        : direct                     ? pull_direct(comm, hs, a, lo, cnt)
                                     : pull(comm, hs, a, lo, cnt, a->send_mem, a->send_off + lo * es);
  }
  return s;
}
