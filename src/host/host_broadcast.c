/* Broadcast on CPU ranks (pull): the root publishes where its chunk lies and every other rank
 * copies it from there into its output. Each epoch moves one chunk of at most a workspace
 * half. Only the root's placement matters, and its peers learn it at the epoch's first wait,
 * from the root's pad:
 *  - staged: the root copies its chunk into its half one sub-chunk at a time and publishes
 *    each, without waiting in between; a peer copies sub-chunk k once the root's `ready`
 *    says it is in (it waits for the root alone: it reads nobody else);
 *  - symmetric (the root's send lies in a symmetric allocation): peers read it where it lies;
 *  - in place through its address (thread mode, or process_vm_readv between every pair, and
 *    a block of at least HOST_DIRECT_MIN_BYTES): peers copy straight from the root's private
 *    input, one copy instead of two.
 * The last two are one step: the root waits at the epoch's end for every peer's `done`, since
 * they read its own buffer. Every rank's first wait of an epoch waits for every peer: it
 * compares calls (MISMATCH, before anything is written), and proves every peer finished the
 * epoch before, so the root's half of two epochs ago is free. The root writes only its own
 * output, and nothing in place (send == recv). LAMPORT runs the pull on CPU ranks. */
#include <string.h>

#include "host_internal.h"

static symcoll_status_t root_epoch(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a, size_t lo,
                                   size_t cnt) {
  const int me = comm->rank;
  const size_t es = symcoll_dtype_size(a->dtype), sub = hs->sub_bytes / es;
  const char *send = (const char *)a->send + lo * es;
  char *recv = (char *)a->recv + lo * es;
  struct symcoll_mem *zmem = a->send_mem;
  /* The same choice for every chunk of a call (peers do not depend on it: they read the pad). */
  const bool direct = !zmem && symcoll__host_direct_ok(comm, hs) && a->count * es >= HOST_DIRECT_MIN_BYTES;
  const host_epoch_t ep = symcoll__host_epoch_begin(comm, hs, a, lo == 0, zmem, a->send_off + lo * es);
  host_pad_t *pad = hs->pad[me];
  if (zmem || direct) {
    if (direct) pad->src_addr[ep.e & 1] = (uint64_t)(uintptr_t)send;
    symcoll__host_publish(&pad->ready, (ep.e << EPOCH_SHIFT) | 1);
  } else {
    char *mine = hs->data[me] + ep.half_off;
    for (size_t k = 0, j = 0; j < cnt; k++, j += sub) {
      const size_t m = host_min(cnt - j, sub);
      memcpy(mine + j * es, send + j * es, m * es);
      symcoll__host_publish(&pad->ready, (ep.e << EPOCH_SHIFT) | (k + 1));
    }
  }
  SYMCOLL_CHECK(symcoll__host_wait_ready(comm, hs, &ep, 0));
  if (recv != send) memcpy(recv, send, cnt * es);
  return symcoll__host_epoch_end(comm, hs, &ep, zmem || direct);
}

static symcoll_status_t peer_epoch(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a, size_t lo,
                                   size_t cnt) {
  const int root = a->root;
  const size_t es = symcoll_dtype_size(a->dtype), sub = hs->sub_bytes / es;
  char *recv = (char *)a->recv + lo * es;
  const host_epoch_t ep = symcoll__host_epoch_begin(comm, hs, a, lo == 0, NULL, 0);
  symcoll__host_publish(&hs->pad[comm->rank]->ready, (ep.e << EPOCH_SHIFT) | 1);
  SYMCOLL_CHECK(symcoll__host_wait_ready(comm, hs, &ep, 0));
  const host_pad_t *rp = hs->pad[root];
  const uint64_t addr = rp->src_addr[ep.e & 1];
  symcoll_status_t s = SYMCOLL_OK;
  if (addr) {
    s = symcoll__host_read_direct(comm, root, recv, addr, cnt * es, "broadcast");
  } else {
    const char *from = symcoll__host_peer_input(comm, hs, &ep, root, cnt * es);
    if (!from)
      s = SYMCOLL_ERR_MISMATCH;
    else if (rp->src_mem[ep.e & 1] >= 0)
      memcpy(recv, from, cnt * es);
    else /* staged: sub-chunk k is in once the root's ready passes k */
      for (size_t k = 0, j = 0; j < cnt && s == SYMCOLL_OK; k++, j += sub) {
        if (k > 0)
          s = symcoll__host_wait_peer(comm, hs, root, offsetof(host_pad_t, ready), (ep.e << EPOCH_SHIFT) | (k + 1));
        if (s == SYMCOLL_OK) memcpy(recv + j * es, from + j * es, host_min(cnt - j, sub) * es);
      }
  }
  /* done also on a failure: the root, if it waits for our reads, is not left to time out. */
  symcoll_status_t e = symcoll__host_epoch_end(comm, hs, &ep, false);
  return s != SYMCOLL_OK ? s : e;
}

symcoll_status_t symcoll__host_broadcast(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a) {
  const size_t es = symcoll_dtype_size(a->dtype);
  const size_t per = hs->half / es; /* the root's staged chunk fills a half; the same on every rank */
  symcoll_status_t s = SYMCOLL_OK;
  for (size_t lo = 0; lo < a->count && s == SYMCOLL_OK; lo += per) {
    const size_t cnt = host_min(a->count - lo, per);
    s = comm->rank == a->root ? root_epoch(comm, hs, a, lo, cnt) : peer_epoch(comm, hs, a, lo, cnt);
  }
  return s;
}
