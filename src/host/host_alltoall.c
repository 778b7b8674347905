/* All-to-all on CPU ranks: block j of rank r's send lands in block r of rank j's recv. Each
 * epoch moves one chunk of every block (a half holds n such pieces, one per block):
 *  - pull: each rank stages the chunks peers need (block q's in slot [q] of its half), or
 *    publishes where its input lies: a symmetric allocation, or its address where peers can
 *    read each other's memory and the call is not in place on it; then copies its own block's
 *    chunk out of every peer's input into block [peer] of its output, peers from rank + 1 on.
 *    A peer's placement is learnt at the epoch's first wait, so ranks of one call may differ
 *    in it; a staged peer is copied one sub-chunk per step as it publishes them, one read in
 *    place all at once. A rank read in place waits at the epoch's end for every peer's `done`.
 *  - push: each rank copies its chunk of block j into slot [rank] of peer j's half, then its
 *    own half's slots out (remote writes instead of remote reads). Peers' halves of this epoch
 *    are free: they finished epoch e-2 before publishing e-1, which we waited for.
 * In place (send == recv), a rank overwrites sub-chunk k of its blocks only after it staged
 * or pushed sub-chunk k of them, and copies peers one sub-chunk per step for that reason. Core
 * never makes an in-place send zero-copy, and no rank ever stores into a peer's output (push
 * goes through staging even where recv is symmetric). LAMPORT runs the pull on CPU ranks. */
#include <string.h>

#include "host_internal.h"

/* Where peer p's chunk of block [me] lies this epoch: an address in p's process (addr), or
 * mapped here (base): p's staging or its symmetric input. */
typedef struct {
  const char *base;
  uint64_t addr;
  bool staged; /* p publishes it one sub-chunk at a time */
} src_t;

static symcoll_status_t copy_from(symcoll_comm_t comm, const src_t *src, int p, char *dst, size_t off, size_t bytes) {
  if (src->addr) return symcoll__host_read_direct(comm, p, dst, src->addr + off, bytes, "all_to_all");
  memcpy(dst, src->base + off, bytes);
  return SYMCOLL_OK;
}

static symcoll_status_t pull(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a, size_t lo,
                             size_t cnt, size_t per) {
  const int me = comm->rank, n = comm->nranks;
  const size_t es = symcoll_dtype_size(a->dtype), sub = hs->sub_bytes / es, count = a->count;
  const char *send = a->send;
  char *recv = a->recv;
  const bool in_place = (const void *)send == (const void *)recv;
  struct symcoll_mem *zmem = a->send_mem; /* never in place (core) */
  const bool direct = !zmem && !in_place && symcoll__host_direct_ok(comm, hs) && count * es >= HOST_DIRECT_MIN_BYTES;
  /* Read in place, peers find block q's chunk q * count elements after block 0's. */
  const host_epoch_t ep = symcoll__host_epoch_begin(comm, hs, a, lo == 0, zmem, a->send_off + lo * es);
  if (direct) hs->pad[me]->src_addr[ep.e & 1] = (uint64_t)(uintptr_t)(send + lo * es);
  char *mine = hs->data[me] + ep.half_off;
  src_t src[SYMCOLL_MAX_RANKS];
  symcoll_status_t s = SYMCOLL_OK; /* a failed copy stops the copies, not the steps peers wait for */
  for (size_t k = 0, j = 0; j < cnt; k++, j += sub) {
    const size_t m = host_min(cnt - j, sub);
    if (!zmem && !direct)
      for (int q = 0; q < n; q++)
        if (q != me) memcpy(mine + ((size_t)q * per + j) * es, send + ((size_t)q * count + lo + j) * es, m * es);
    symcoll__host_publish(&hs->pad[me]->ready, (ep.e << EPOCH_SHIFT) | (k + 1));
    SYMCOLL_CHECK(symcoll__host_wait_ready(comm, hs, &ep, k));
    if (k == 0) {
      for (int p = 0; p < n && s == SYMCOLL_OK; p++) {
        if (p == me) continue;
        const host_pad_t *pp = hs->pad[p];
        const uint64_t addr = pp->src_addr[ep.e & 1];
        src[p].addr = addr ? addr + (uint64_t)me * count * es : 0;
        src[p].staged = !addr && pp->src_mem[ep.e & 1] < 0;
        src[p].base = NULL;
        if (addr) continue;
        const size_t stride = src[p].staged ? per : count; /* between blocks' chunks, in elements */
        const char *base = symcoll__host_peer_input(comm, hs, &ep, p, ((size_t)(n - 1) * stride + cnt) * es);
        if (!base)
          s = SYMCOLL_ERR_MISMATCH;
        else
          src[p].base = base + (size_t)me * stride * es;
      }
      if (s == SYMCOLL_OK && !in_place)
        memcpy(recv + ((size_t)me * count + lo) * es, send + ((size_t)me * count + lo) * es, cnt * es);
    }
    for (int i = 1; i < n && s == SYMCOLL_OK; i++) {
      const int p = (me + i) % n;
      char *dst = recv + ((size_t)p * count + lo) * es;
      if (src[p].staged || in_place)
        s = copy_from(comm, &src[p], p, dst + j * es, j * es, m * es);
      else if (k == 0)
        s = copy_from(comm, &src[p], p, dst, 0, cnt * es);
    }
  }
  symcoll_status_t e = symcoll__host_epoch_end(comm, hs, &ep, zmem || direct);
  return s != SYMCOLL_OK ? s : e;
}

static symcoll_status_t push(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a, size_t lo,
                             size_t cnt, size_t per) {
  const int me = comm->rank, n = comm->nranks;
  const size_t es = symcoll_dtype_size(a->dtype), sub = hs->sub_bytes / es, count = a->count;
  const char *send = a->send;
  char *recv = a->recv;
  const bool in_place = (const void *)send == (const void *)recv;
  const host_epoch_t ep = symcoll__host_epoch_begin(comm, hs, a, lo == 0, NULL, 0);
  const char *mine = hs->data[me] + ep.half_off;
  for (size_t k = 0, j = 0; j < cnt; k++, j += sub) {
    const size_t m = host_min(cnt - j, sub);
    for (int i = 1; i < n; i++) {
      const int p = (me + i) % n;
      memcpy(hs->data[p] + ep.half_off + ((size_t)me * per + j) * es, send + ((size_t)p * count + lo + j) * es, m * es);
    }
    symcoll__host_publish(&hs->pad[me]->ready, (ep.e << EPOCH_SHIFT) | (k + 1));
    SYMCOLL_CHECK(symcoll__host_wait_ready(comm, hs, &ep, k));
    for (int p = 0; p < n; p++) {
      char *dst = recv + ((size_t)p * count + lo + j) * es;
      if (p != me)
        memcpy(dst, mine + ((size_t)p * per + j) * es, m * es);
      else if (!in_place)
        memcpy(dst, send + ((size_t)me * count + lo + j) * es, m * es);
    }
  }
  return symcoll__host_epoch_end(comm, hs, &ep, false);
}

symcoll_status_t symcoll__host_all_to_all(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a) {
  const size_t es = symcoll_dtype_size(a->dtype);
  const size_t per = hs->half / es / (size_t)comm->nranks; /* a chunk of every block fills a half */
  symcoll_status_t s = SYMCOLL_OK;
  for (size_t lo = 0; lo < a->count && s == SYMCOLL_OK; lo += per) {
    const size_t cnt = host_min(a->count - lo, per);
    s = a->algo == SYMCOLL_ALGO_PUSH ? push(comm, hs, a, lo, cnt, per) : pull(comm, hs, a, lo, cnt, per);
  }
  return s;
}
