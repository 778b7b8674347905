/*
 * CPU transport: symmetric memory from memfd_create (passed to peers as fds, so nothing
 * appears in /dev/shm and nothing outlives the ranks), signal pads of C11 atomics, and the
 * epoch protocol every collective uses (host_internal.h). The collectives themselves are in
 * host_allreduce.c, host_allgather.c, host_reducescatter.c, host_broadcast.c, host_reduce.c,
 * host_alltoall.c and host_rmsnorm.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "host_internal.h"

#define HOST_DEFAULT_WS (32u << 20)

typedef struct {
  size_t map_bytes;
  void *maps[SYMCOLL_MAX_RANKS];
} host_mem_t;

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

/* Whether every rank can read every peer's memory with process_vm_readv (CMA: one copy
 * from a peer's private buffer, as Open MPI's shared-memory transport does): each rank
 * publishes a word's address, reads every peer's, and the ranks agree. Where Yama restricts
 * ptrace to descendants, a rank lets any process of its user read it (PR_SET_PTRACER_ANY),
 * as Open MPI does; otherwise (or when a read fails) the all_gather stages through shared
 * memory. */
static symcoll_status_t probe_cma(symcoll_comm_t comm, bool *ok_p) {
  static const uint64_t magic = 0x73796d636f6c6c21ull; /* read by peers */
  *ok_p = false;
  FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
  int scope = 0;
  if (f) {
    if (fscanf(f, "%d", &scope) != 1) scope = 0;
    fclose(f);
  }
  if (scope == 1) prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  uint64_t mine = (uint64_t)(uintptr_t)&magic, addrs[SYMCOLL_MAX_RANKS];
  SYMCOLL_CHECK(comm->oob->allgather(comm, &mine, addrs, sizeof mine));
  uint8_t ok = scope <= 1, all[SYMCOLL_MAX_RANKS];
  for (int p = 0; p < comm->nranks && ok; p++) {
    if (p == comm->rank) continue;
    uint64_t v = 0;
    struct iovec l = {&v, sizeof v}, r = {(void *)(uintptr_t)addrs[p], sizeof v};
    ok = process_vm_readv(comm->pids[p], &l, 1, &r, 1, 0) == (ssize_t)sizeof v && v == magic;
  }
  SYMCOLL_CHECK(comm->oob->allgather(comm, &ok, all, 1));
  *ok_p = true;
  for (int p = 0; p < comm->nranks; p++) *ok_p = *ok_p && all[p];
  return SYMCOLL_OK;
}

/* SYMCOLL_HOST_STREAM_BYTES, or twice this CPU's L2 (4 MiB where the system does not say):
 * results the core's own cache could not keep beside the inputs skip it (host_rmsnorm.c). */
static size_t stream_bytes(void) {
  const long long set = symcoll__env_int("SYMCOLL_HOST_STREAM_BYTES");
  if (set > 0) return (size_t)set;
#if defined(_SC_LEVEL2_CACHE_SIZE)
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (l2 > 0) return (size_t)l2 * 2;
#endif
  return (size_t)4 << 20;
}

static symcoll_status_t host_comm_init(symcoll_comm_t comm) {
  host_state_t *hs = calloc(1, sizeof *hs);
  if (!hs) return SYMCOLL_ERR_NO_MEMORY;
  size_t ws = comm->workspace_bytes ? comm->workspace_bytes : HOST_DEFAULT_WS;
  hs->half = (ws / 2) & ~(size_t)63;
  hs->sub_bytes = HOST_SUB_BYTES; /* 16 and 32 KiB measured no better on 2 ranks (2-vCPU EPYC) */
  hs->stream_bytes = stream_bytes();
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
  if (!comm->thread_mode && comm->nranks > 1 && (s = probe_cma(comm, &hs->cma)) != SYMCOLL_OK) return s;
  SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT, "host transport: rank %d of %d, workspace 2 x %zu bytes, %s loops, all_gather %s",
               comm->rank, comm->nranks, hs->half, symcoll__host_simd_name(),
               comm->thread_mode ? "reads peers in place"
               : hs->cma         ? "reads peers with process_vm_readv"
                                 : "staged");
  return SYMCOLL_OK;
}

static void host_comm_fini(symcoll_comm_t comm) {
  host_state_t *hs = comm->tp_state;
  for (int i = 0; hs && i < 3; i++) free(hs->f32[i]);
  if (hs) free(hs->norm_f32);
  free(comm->tp_state);
  comm->tp_state = NULL;
}

/* ---- the epoch protocol ------------------------------------------------------------------ */

host_epoch_t symcoll__host_epoch_begin(symcoll_comm_t comm, host_state_t *hs, const symcoll__coll_args_t *a, bool first,
                                       struct symcoll_mem *zmem, size_t zoff) {
  host_epoch_t ep = {.e = ++hs->epoch, .first = first, .a = a};
  ep.half_off = (ep.e & 1) * hs->half;
  host_pad_t *pad = hs->pad[comm->rank];
  const unsigned slot = ep.e & 1;
  pad->src_mem[slot] = zmem ? zmem->id : -1;
  pad->src_off[slot] = zmem ? zoff : ep.half_off;
  pad->src_addr[slot] = 0; /* a collective reading in place sets it before it publishes */
  pad->call[slot] = (host_call_t){.sig = a->sig,
                                  .coll = (uint8_t)a->coll,
                                  .dtype = (uint8_t)a->dtype,
                                  .op = (uint8_t)a->op,
                                  .algo = (uint8_t)a->algo,
                                  .root = (uint8_t)a->root,
                                  .count = a->count};
  return ep;
}

symcoll_status_t symcoll__host_wait_peer(symcoll_comm_t comm, host_state_t *hs, int p, size_t field, uint64_t target) {
  _Atomic uint64_t *c = (_Atomic uint64_t *)((char *)hs->pad[p] + field);
  if (atomic_load_explicit(c, memory_order_acquire) >= target) return SYMCOLL_OK;
  symcoll__waiter_t w;
  symcoll__waiter_init(&w, comm, p);
  while (atomic_load_explicit(c, memory_order_acquire) < target) {
    cpu_relax();
    symcoll_status_t s = symcoll__waiter_poll(&w);
    /* A peer that published and then exited is not lost: look once more after its death. */
    if (s == SYMCOLL_ERR_PEER_LOST && atomic_load_explicit(c, memory_order_acquire) >= target) break;
    if (s != SYMCOLL_OK) {
      if (s == SYMCOLL_ERR_TIMEOUT || s == SYMCOLL_ERR_PEER_LOST)
        SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL,
                     "job %s: rank %d %s waiting for rank %d in call %llu; the communicator "
                     "refuses further calls (destroy it and make a new one)",
                     comm->job_id, comm->rank, s == SYMCOLL_ERR_TIMEOUT ? "timed out" : "lost its peer", p,
                     (unsigned long long)comm->coll_seq);
      return s;
    }
  }
  return SYMCOLL_OK;
}

symcoll_status_t symcoll__host_wait_all(symcoll_comm_t comm, host_state_t *hs, size_t field, uint64_t target) {
  for (int p = 0; p < comm->nranks; p++)
    if (p != comm->rank) SYMCOLL_CHECK(symcoll__host_wait_peer(comm, hs, p, field, target));
  return SYMCOLL_OK;
}

static void describe(char *buf, size_t n, const host_call_t *c) {
  const symcoll__coll_desc_t *d = symcoll__coll_desc((symcoll_coll_t)c->coll);
  char op[16] = "", root[16] = "";
  if (d && d->takes_op) snprintf(op, sizeof op, " %s", symcoll_op_name((symcoll_op_t)c->op));
  if (d && d->root != SYMCOLL__ROOT_NONE) snprintf(root, sizeof root, " root %d", (int)c->root);
  snprintf(buf, n, "%s %s %llu %s%s%s %s", symcoll_coll_name((symcoll_coll_t)c->coll),
           d && d->gemm    ? "m_shard"
           : d && d->fused ? "rows"
                           : "count",
           (unsigned long long)c->count, symcoll_dtype_name((symcoll_dtype_t)c->dtype), op, root,
           symcoll_algo_name((symcoll_algo_t)c->algo));
}

symcoll_status_t symcoll__host_wait_ready(symcoll_comm_t comm, host_state_t *hs, const host_epoch_t *ep, size_t k) {
  SYMCOLL_CHECK(symcoll__host_wait_all(comm, hs, offsetof(host_pad_t, ready), (ep->e << EPOCH_SHIFT) | (k + 1)));
  if (!ep->first || k != 0) return SYMCOLL_OK;
  const host_call_t *mine = &hs->pad[comm->rank]->call[ep->e & 1];
  for (int p = 0; p < comm->nranks; p++) {
    const host_call_t *theirs = &hs->pad[p]->call[ep->e & 1];
    if (p == comm->rank || theirs->sig == mine->sig) continue;
    char m[128], t[128];
    describe(m, sizeof m, mine);
    describe(t, sizeof t, theirs);
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "job %s: rank %d is in %s, rank %d in %s: nothing written", comm->job_id,
                 comm->rank, m, p, t);
    return SYMCOLL_ERR_MISMATCH;
  }
  return SYMCOLL_OK;
}

const char *symcoll__host_peer_input(symcoll_comm_t comm, host_state_t *hs, const host_epoch_t *ep, int p,
                                     size_t bytes) {
  const host_pad_t *pp = hs->pad[p];
  const int32_t src_mem = pp->src_mem[ep->e & 1];
  const uint64_t src_off = pp->src_off[ep->e & 1];
  if (src_mem < 0) return hs->data[p] + src_off;
  for (struct symcoll_mem *m = comm->mems; m; m = m->next) /* the peer reads its own allocation */
    if (m->id == src_mem && src_off <= m->bytes && bytes <= m->bytes - src_off)
      return (const char *)m->ptrs[p] + src_off;
  SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "rank %d's input is not in an allocation rank %d knows", p, comm->rank);
  return NULL;
}

symcoll_status_t symcoll__host_read_direct(symcoll_comm_t comm, int p, void *dst, uint64_t from, size_t bytes,
                                           const char *what) {
  if (comm->thread_mode) {
    memcpy(dst, (const void *)(uintptr_t)from, bytes);
    return SYMCOLL_OK;
  }
  struct iovec l = {dst, bytes}, r = {(void *)(uintptr_t)from, bytes};
  const ssize_t got = process_vm_readv(comm->pids[p], &l, 1, &r, 1, 0);
  if (got == (ssize_t)bytes) return SYMCOLL_OK;
  const int err = got < 0 ? errno : 0;
  SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "%s: reading %zu bytes of rank %d (pid %d) failed: %s", what, bytes, p,
               (int)comm->pids[p], err ? strerror(err) : "short read");
  return err == ESRCH ? SYMCOLL_ERR_PEER_LOST : SYMCOLL_ERR_SYSTEM;
}

symcoll_status_t symcoll__host_epoch_end(symcoll_comm_t comm, host_state_t *hs, const host_epoch_t *ep,
                                         bool zero_copy) {
  symcoll__host_publish(&hs->pad[comm->rank]->done, ep->e);
  if (zero_copy) SYMCOLL_CHECK(symcoll__host_wait_all(comm, hs, offsetof(host_pad_t, done), ep->e));
  return SYMCOLL_OK;
}

/* ---- dispatch ------------------------------------------------------------------------------- */

/* A lost or silent peer ends the communicator; a mismatch or an abort does not count here. */
static symcoll_status_t settle(symcoll_comm_t comm, symcoll_status_t s) {
  if (s == SYMCOLL_ERR_TIMEOUT || s == SYMCOLL_ERR_PEER_LOST) symcoll__comm_fail(comm, s);
  return s;
}

static symcoll_status_t host_coll(symcoll_comm_t comm, const symcoll__coll_args_t *a) {
  host_state_t *hs = comm->tp_state;
  symcoll_status_t s = SYMCOLL_ERR_INTERNAL;
  switch (a->coll) {
    case SYMCOLL_COLL_ALL_REDUCE:
      s = symcoll__host_all_reduce(comm, hs, a);
      break;
    case SYMCOLL_COLL_ALL_GATHER:
      s = symcoll__host_all_gather(comm, hs, a);
      break;
    case SYMCOLL_COLL_REDUCE_SCATTER:
      s = symcoll__host_reduce_scatter(comm, hs, a);
      break;
    case SYMCOLL_COLL_BROADCAST:
      s = symcoll__host_broadcast(comm, hs, a);
      break;
    case SYMCOLL_COLL_REDUCE:
      s = symcoll__host_reduce(comm, hs, a);
      break;
    case SYMCOLL_COLL_ALL_TO_ALL:
      s = symcoll__host_all_to_all(comm, hs, a);
      break;
    case SYMCOLL_COLL_ALL_GATHER_MATMUL:
    case SYMCOLL_COLL_MATMUL_REDUCE_SCATTER: /* through the transport's matmul entry */
    case SYMCOLL_COLL_ALL_REDUCE_RMSNORM:    /* through its norm entry */
    case SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM:
    case SYMCOLL_NUM_COLL_KINDS:
      s = SYMCOLL_NO_ENTRY("the CPU transport's collective entry", a->coll);
      break;
  }
  return settle(comm, s);
}

static symcoll_status_t host_matmul(symcoll_comm_t comm, const symcoll__matmul_args_t *x) {
  return settle(comm, symcoll__host_matmul(comm, x));
}

static symcoll_status_t host_norm(symcoll_comm_t comm, const symcoll__norm_args_t *a) {
  return settle(comm, symcoll__host_rmsnorm(comm, comm->tp_state, a));
}
static symcoll_status_t host_copy(symcoll_comm_t comm, void *dst, const void *src, size_t bytes, void *stream) {
  (void)comm;
  (void)stream;
  memcpy(dst, src, bytes);
  return SYMCOLL_OK;
}

/* dst = src x scale in chunks: the PROD loop of two sources, the second a run of the scalar. */
static symcoll_status_t host_scale(symcoll_comm_t comm, void *dst, const void *src, size_t count, symcoll_dtype_t dtype,
                                   const void *scale, bool on_device, void *stream) {
  (void)comm, (void)stream, (void)on_device; /* core refuses on_device on CPU communicators */
  enum { RUN = 512 };
  const size_t es = symcoll_dtype_size(dtype);
  _Alignas(16) unsigned char run[RUN * 8]; /* the loops read it as the dtype */
  for (size_t i = 0; i < RUN; i++) memcpy(run + i * es, scale, es);
  const symcoll__reduce_fn prod = symcoll__host_reduce_fn(dtype, SYMCOLL_PROD);
  for (size_t i = 0; i < count; i += RUN) {
    const size_t m = count - i < RUN ? count - i : RUN;
    const void *srcs[2] = {(const char *)src + i * es, run};
    prod((char *)dst + i * es, srcs, 2, m);
  }
  return SYMCOLL_OK;
}

/* What CPU ranks run, per collective: every algorithm of its row but the GPU's copy engine and
 * NCCL (LAMPORT and ONE_SHOT_DB are the one-shot there, LAMPORT for the others the pull: see
 * symcoll.h). Listed, not derived, so that an algorithm added to a row is not claimed here
 * before the CPU protocol runs it. */
static bool host_has_algo(symcoll_comm_t comm, symcoll_coll_t coll, symcoll_algo_t algo) {
  (void)comm;
  uint32_t runs = 0;
#define B SYMCOLL__ALGO_BIT
  switch (coll) {
    case SYMCOLL_COLL_ALL_REDUCE:
      runs =
          B(SYMCOLL_ALGO_ONE_SHOT) | B(SYMCOLL_ALGO_TWO_SHOT) | B(SYMCOLL_ALGO_ONE_SHOT_DB) | B(SYMCOLL_ALGO_LAMPORT);
      break;
    case SYMCOLL_COLL_ALL_GATHER:
    case SYMCOLL_COLL_ALL_TO_ALL:
      runs = B(SYMCOLL_ALGO_PULL) | B(SYMCOLL_ALGO_PUSH) | B(SYMCOLL_ALGO_LAMPORT);
      break;
    case SYMCOLL_COLL_REDUCE_SCATTER:
    case SYMCOLL_COLL_BROADCAST:
      runs = B(SYMCOLL_ALGO_PULL) | B(SYMCOLL_ALGO_LAMPORT);
      break;
    case SYMCOLL_COLL_REDUCE:
      runs = B(SYMCOLL_ALGO_ONE_SHOT);
      break;
    case SYMCOLL_COLL_ALL_GATHER_MATMUL: /* core asks has_gemm for these */
    case SYMCOLL_COLL_MATMUL_REDUCE_SCATTER:
      runs = B(SYMCOLL_ALGO_OVERLAP) | B(SYMCOLL_ALGO_SEQUENTIAL);
      break;
    case SYMCOLL_COLL_ALL_REDUCE_RMSNORM: /* LAMPORT: the one-shot */
      runs = B(SYMCOLL_ALGO_ONE_SHOT) | B(SYMCOLL_ALGO_TWO_SHOT) | B(SYMCOLL_ALGO_LAMPORT) | B(SYMCOLL_ALGO_SEQUENTIAL);
      break;
    case SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM:
      runs = B(SYMCOLL_ALGO_PULL) | B(SYMCOLL_ALGO_SEQUENTIAL);
      break;
    case SYMCOLL_NUM_COLL_KINDS:
      break;
  }
#undef B
  return (unsigned)algo < SYMCOLL_NUM_ALGOS && (runs & SYMCOLL__ALGO_BIT(algo)) != 0;
}

static const char *host_tune_class(symcoll_comm_t comm) {
  (void)comm;
  return symcoll__host_reduce_table()->tune_class;
}

const symcoll__transport_t symcoll__host_transport = {
    .name = "host",
    .comm_init = host_comm_init,
    .comm_fini = host_comm_fini,
    .mem_alloc = host_mem_alloc,
    .mem_free = host_mem_free,
    .mem_device_view = NULL,
    .coll = host_coll,
    .copy = host_copy,
    .scale = host_scale,
    .check = NULL,
    .has_algo = host_has_algo,
    .gemm = symcoll__host_gemm,
    .has_gemm = symcoll__host_has_gemm,
    .scratch_alloc = symcoll__host_scratch_alloc,
    .scratch_free = symcoll__host_scratch_free,
    .matmul = host_matmul,
    .norm = host_norm,
    .tune_class = host_tune_class,
    .abort = NULL,
};
