/*
 * CPU transport: symmetric memory from memfd_create (passed to peers as fds, so nothing
 * appears in /dev/shm and nothing outlives the ranks), signal pads of C11 atomics, and
 * one-shot / two-shot all-reduce pipelined in sub-chunks.
 *
 * Protocol. Each rank's workspace starts with its pad; the rest is two halves used by
 * alternate epochs (one epoch per chunk of at most half the workspace). A rank publishes
 * progress as ready = (epoch << 24) | sub-chunks copied in, with release; readers wait with
 * acquire. Reaching epoch e's first wait proves that every peer finished epoch e-1, hence
 * that the half of epoch e-2, which epoch e reuses, is no longer read: no trailing barrier.
 * Zero-copy one-shot reads peers' own symmetric buffers (where each rank publishes its source
 * in its pad) and so must wait, at the end, until peers are done with its buffer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#include "reduce.h"

#define HOST_PAD_BYTES 4096
#define HOST_SUB_BYTES (64 * 1024)
#define HOST_DEFAULT_WS (32u << 20)
#define EPOCH_SHIFT 24

typedef struct {
  _Alignas(64) _Atomic uint64_t ready;   /* (epoch << 24) | sub-chunks copied in */
  _Alignas(64) _Atomic uint64_t reduced; /* two-shot: (epoch << 24) | sub-chunks reduced */
  _Alignas(64) _Atomic uint64_t done;    /* last epoch whose reads of peers finished */
  /* Where epoch e's input lies, in slot e & 1: a slot is rewritten only two epochs later,
   * when every peer is provably done with it. src_mem -1 = own workspace. */
  _Alignas(64) int32_t src_mem[2];
  uint64_t src_off[2];
} host_pad_t;
_Static_assert(sizeof(host_pad_t) <= HOST_PAD_BYTES, "pad too large");

typedef struct {
  size_t map_bytes;
  void *maps[SYMCOLL_MAX_RANKS];
} host_mem_t;

typedef struct {
  struct symcoll_mem *ws;
  size_t half; /* bytes per workspace half */
  uint64_t epoch;
  host_pad_t *pad[SYMCOLL_MAX_RANKS];
  char *data[SYMCOLL_MAX_RANKS]; /* start of each rank's halves */
} host_state_t;

/* ---- memory ------------------------------------------------------------------------ */

static symcoll_status_t host_mem_alloc(symcoll_comm_t comm, size_t bytes, struct symcoll_mem *mem) {
  symcoll_status_t s = SYMCOLL_OK;
  long page = sysconf(_SC_PAGESIZE);
  size_t map_bytes = (bytes + (size_t)page - 1) / (size_t)page * (size_t)page;
  int fds[SYMCOLL_MAX_RANKS];
  host_mem_t *hm = calloc(1, sizeof *hm);
  if (!hm) return SYMCOLL_ERR_NO_MEMORY;
  hm->map_bytes = map_bytes;
  int fd = memfd_create("symcoll", MFD_CLOEXEC);
  SYMCOLL_SYSCALL_GOTO(fd, s, err_free);
  SYMCOLL_SYSCALL_GOTO(ftruncate(fd, (off_t)map_bytes), s, err_close);
  SYMCOLL_CHECK_GOTO(comm->oob->exchange_fd(comm, fd, fds), s, err_close);
  for (int r = 0; r < comm->nranks; r++) {
    void *p = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[r], 0);
    close(fds[r]);
    if (p == MAP_FAILED) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_MEM, "mmap of rank %d's %zu bytes failed: %m", r, map_bytes);
      s = errno == ENOMEM ? SYMCOLL_ERR_NO_MEMORY : SYMCOLL_ERR_SYSTEM;
      for (int k = r + 1; k < comm->nranks; k++) close(fds[k]);
      goto err_unmap;
    }
    hm->maps[r] = p;
    mem->ptrs[r] = p;
  }
  close(fd);
  mem->tp = hm;
  return SYMCOLL_OK;
err_unmap:
  for (int r = 0; r < comm->nranks; r++)
    if (hm->maps[r]) munmap(hm->maps[r], map_bytes);
err_close:
  close(fd);
err_free:
  free(hm);
  return s;
}

static void host_mem_free(struct symcoll_mem *mem) {
  host_mem_t *hm = mem->tp;
  if (!hm) return;
  for (int r = 0; r < SYMCOLL_MAX_RANKS; r++)
    if (hm->maps[r]) munmap(hm->maps[r], hm->map_bytes);
  free(hm);
  mem->tp = NULL;
}

/* ---- communicator -------------------------------------------------------------------- */

static symcoll_status_t host_comm_init(symcoll_comm_t comm) {
  host_state_t *hs = calloc(1, sizeof *hs);
  if (!hs) return SYMCOLL_ERR_NO_MEMORY;
  size_t ws = comm->workspace_bytes ? comm->workspace_bytes : HOST_DEFAULT_WS;
  hs->half = (ws / 2) & ~(size_t)63;
  if (hs->half < 4096) hs->half = 4096;
  symcoll_status_t s = symcoll__mem_alloc_internal(comm, HOST_PAD_BYTES + 2 * hs->half, &hs->ws);
  if (s != SYMCOLL_OK) {
    free(hs);
    return s;
  }
  comm->workspace = hs->ws;
  for (int r = 0; r < comm->nranks; r++) {
    hs->pad[r] = (host_pad_t *)hs->ws->ptrs[r];
    hs->data[r] = (char *)hs->ws->ptrs[r] + HOST_PAD_BYTES;
  }
  comm->tp_state = hs;
  SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT, "host transport: rank %d of %d, workspace 2 x %zu bytes, %s loops",
               comm->rank, comm->nranks, hs->half, symcoll__host_simd_name());
  return SYMCOLL_OK;
}

static void host_comm_fini(symcoll_comm_t comm) {
  free(comm->tp_state);
  comm->tp_state = NULL;
}

/* ---- waiting on peers ------------------------------------------------------------------- */

/* Waits until every peer's counter (at byte offset `field` of its pad) reaches target. */
static symcoll_status_t wait_all(symcoll_comm_t comm, host_state_t *hs, size_t field,
                                 uint64_t target) {
  for (int p = 0; p < comm->nranks; p++) {
    if (p == comm->rank) continue;
    _Atomic uint64_t *c = (_Atomic uint64_t *)((char *)hs->pad[p] + field);
    if (atomic_load_explicit(c, memory_order_acquire) >= target) continue;
    symcoll__waiter_t w;
    symcoll__waiter_init(&w, comm, p);
    while (atomic_load_explicit(c, memory_order_acquire) < target) {
      cpu_relax();
      symcoll_status_t s = symcoll__waiter_poll(&w);
      /* A peer that published and then exited is not lost: look once more after its death. */
      if (s == SYMCOLL_ERR_PEER_LOST && atomic_load_explicit(c, memory_order_acquire) >= target)
        break;
      if (s != SYMCOLL_OK) {
        if (s == SYMCOLL_ERR_TIMEOUT || s == SYMCOLL_ERR_PEER_LOST)
          SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "rank %d: %s waiting for rank %d", comm->rank,
                       s == SYMCOLL_ERR_TIMEOUT ? "timed out" : "peer exited", p);
        return s;
      }
    }
  }
  return SYMCOLL_OK;
}

static void publish(_Atomic uint64_t *c, uint64_t v) {
  atomic_store_explicit(c, v, memory_order_release);
}

/* ---- algorithms ------------------------------------------------------------------------ */

typedef struct {
  const char *send;
  char *recv;
  size_t n; /* elements of this chunk */
} chunk_t;

static symcoll_status_t one_shot(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a,
                                 chunk_t c, struct symcoll_mem *zmem, size_t zoff) {
  const int me = comm->rank, n = comm->nranks;
  const size_t es = symcoll_dtype_size(a->dtype), sub = HOST_SUB_BYTES / es;
  const uint64_t e = ++hs->epoch;
  char *mine = hs->data[me] + (e & 1) * hs->half;
  host_pad_t *pad = hs->pad[me];
  symcoll__reduce_fn reduce = symcoll__host_reduce_fn(a->dtype, a->op);
  pad->src_mem[e & 1] = zmem ? zmem->id : -1;
  pad->src_off[e & 1] = zmem ? zoff : (e & 1) * hs->half;
  const char *base[SYMCOLL_MAX_RANKS];
  const void *srcs[SYMCOLL_MAX_RANKS];
  for (size_t k = 0, lo = 0; lo < c.n; k++, lo += sub) {
    size_t cnt = c.n - lo < sub ? c.n - lo : sub;
    if (!zmem) memcpy(mine + lo * es, c.send + lo * es, cnt * es);
    publish(&pad->ready, (e << EPOCH_SHIFT) | (k + 1));
    SYMCOLL_CHECK(wait_all(comm, hs, offsetof(host_pad_t, ready), (e << EPOCH_SHIFT) | (k + 1)));
    if (k == 0) {
      for (int p = 0; p < n; p++) {
        host_pad_t *pp = hs->pad[p];
        const int32_t src_mem = pp->src_mem[e & 1];
        const uint64_t src_off = pp->src_off[e & 1];
        if (src_mem < 0) {
          base[p] = hs->data[p] + src_off;
        } else { /* the peer reads from its own symmetric allocation */
          base[p] = NULL;
          for (struct symcoll_mem *m = comm->mems; m; m = m->next)
            if (m->id == src_mem && src_off + c.n * es <= m->bytes)
              base[p] = (const char *)m->ptrs[p] + src_off;
          if (!base[p]) {
            SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "rank %d's input is not in a known allocation", p);
            return SYMCOLL_ERR_MISMATCH;
          }
        }
      }
      base[me] = c.send; /* same bits as the copy; saves reading it back */
    }
    for (int p = 0; p < n; p++) srcs[p] = base[p] + lo * es;
    reduce(c.recv + lo * es, srcs, n, cnt);
  }
  publish(&pad->done, e);
  if (zmem) SYMCOLL_CHECK(wait_all(comm, hs, offsetof(host_pad_t, done), e));
  return SYMCOLL_OK;
}

static symcoll_status_t two_shot(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a,
                                 chunk_t c) {
  const int me = comm->rank, n = comm->nranks;
  const size_t es = symcoll_dtype_size(a->dtype), sub = HOST_SUB_BYTES / es;
  const uint64_t e = ++hs->epoch;
  const size_t half_off = (e & 1) * hs->half;
  char *mine = hs->data[me] + half_off;
  host_pad_t *pad = hs->pad[me];
  symcoll__reduce_fn reduce = symcoll__host_reduce_fn(a->dtype, a->op);
  pad->src_mem[e & 1] = -1;
  pad->src_off[e & 1] = half_off;
  const void *srcs[SYMCOLL_MAX_RANKS];
  for (size_t k = 0, lo = 0; lo < c.n; k++, lo += sub) {
    size_t cnt = c.n - lo < sub ? c.n - lo : sub;
    /* Segments of 16 elements keep every rank's part vector-aligned. */
    size_t seg = ((cnt + (size_t)n - 1) / (size_t)n + 15) & ~(size_t)15;
    memcpy(mine + lo * es, c.send + lo * es, cnt * es);
    publish(&pad->ready, (e << EPOCH_SHIFT) | (k + 1));
    SYMCOLL_CHECK(wait_all(comm, hs, offsetof(host_pad_t, ready), (e << EPOCH_SHIFT) | (k + 1)));
    size_t s_lo = seg * (size_t)me < cnt ? seg * (size_t)me : cnt;
    size_t s_n = cnt - s_lo < seg ? cnt - s_lo : seg;
    if (s_n > 0) {
      for (int p = 0; p < n; p++) srcs[p] = hs->data[p] + half_off + (lo + s_lo) * es;
      reduce(mine + (lo + s_lo) * es, srcs, n, s_n);
    }
    publish(&pad->reduced, (e << EPOCH_SHIFT) | (k + 1));
    SYMCOLL_CHECK(wait_all(comm, hs, offsetof(host_pad_t, reduced), (e << EPOCH_SHIFT) | (k + 1)));
    for (int q = 0; q < n; q++) {
      size_t q_lo = seg * (size_t)q < cnt ? seg * (size_t)q : cnt;
      size_t q_n = cnt - q_lo < seg ? cnt - q_lo : seg;
      if (q_n) memcpy(c.recv + (lo + q_lo) * es, hs->data[q] + half_off + (lo + q_lo) * es, q_n * es);
    }
  }
  publish(&pad->done, e);
  return SYMCOLL_OK;
}

static symcoll_status_t host_all_reduce(symcoll_comm_t comm, const symcoll__coll_args_t *a) {
  host_state_t *hs = comm->tp_state;
  const size_t es = symcoll_dtype_size(a->dtype);
  symcoll_status_t s = SYMCOLL_OK;
  /* Zero-copy inputs are cut into the same chunks as staged ones, so every rank counts the
   * same epochs whichever kind of input each one passes. */
  /* The CPU one-shot is double-buffered already and waits once, on peers' epoch flags:
   * ONE_SHOT_DB and LAMPORT are the same algorithm here. */
  struct symcoll_mem *zmem = a->algo != SYMCOLL_ALGO_TWO_SHOT ? a->send_mem : NULL;
  const size_t per = hs->half / es;
  for (size_t lo = 0; lo < a->count && s == SYMCOLL_OK; lo += per) {
    chunk_t c = {(const char *)a->send + lo * es, (char *)a->recv + lo * es,
                 a->count - lo < per ? a->count - lo : per};
    s = a->algo == SYMCOLL_ALGO_TWO_SHOT ? two_shot(comm, hs, a, c)
                                         : one_shot(comm, hs, a, c, zmem, a->send_off + lo * es);
  }
  if (s != SYMCOLL_OK) symcoll__comm_fail(comm, s == SYMCOLL_ERR_ABORTED ? SYMCOLL_OK : s);
  return s;
}

static symcoll_status_t host_copy(symcoll_comm_t comm, void *dst, const void *src, size_t bytes,
                                  void *stream) {
  (void)comm;
  (void)stream;
  memcpy(dst, src, bytes);
  return SYMCOLL_OK;
}

const symcoll__transport_t symcoll__host_transport = {
    .name = "host",
    .comm_init = host_comm_init,
    .comm_fini = host_comm_fini,
    .mem_alloc = host_mem_alloc,
    .mem_free = host_mem_free,
    .mem_device_view = NULL,
    .all_reduce = host_all_reduce,
    .copy = host_copy,
    .check = NULL,
    .abort = NULL,
};
