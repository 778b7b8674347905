/*
 * Shared by the CPU transport's files: host.c (memory, communicator, waiting, dispatch) and
 * one file per collective (host_allreduce.c, host_allgather.c, host_reducescatter.c,
 * host_broadcast.c, host_reduce.c, host_alltoall.c; host_matmul.c for the GEMM operations,
 * host_rmsnorm.c for the fused all-reduce + RMSNorm).
 *
 * Protocol. Each rank's workspace starts with its pad; the rest is two halves used by
 * alternate epochs (one epoch per chunk of a call; a chunk fills at most half the workspace).
 * A rank publishes progress as ready = (epoch << 24) | sub-chunks copied in, with release;
 * readers wait with acquire. Reaching epoch e's first wait proves that every peer finished
 * epoch e-1, hence that the half of epoch e-2, which epoch e reuses, is no longer read: no
 * trailing barrier. Zero-copy inputs (in a symmetric allocation) are read by peers where they
 * lie, so such a call waits at its end until peers are done with them.
 * Before publishing an epoch a rank writes, into the pad slot of that epoch, where its input
 * lies and which call it is in (the call's signature and arguments): the first wait of a call
 * compares them, so ranks in different calls return SYMCOLL_ERR_MISMATCH on both sides before
 * writing anything, and stay in step (the epoch is used up on both).
 * Where a rank reads its peers is up to each call, but every rank of a call counts the same
 * epochs, and every rank's first wait of an epoch waits for every peer (the two facts the
 * reuse of halves rests on). A reader learns at that wait how each peer published its input:
 * staged in its half, in a symmetric allocation (src_mem), or at an address in its own
 * process (src_addr, read in place where peers can read each other's memory), so the peers
 * of one call need not agree on it.
 */
#ifndef SYMCOLL_HOST_INTERNAL_H
#define SYMCOLL_HOST_INTERNAL_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "reduce.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() ((void)0)
#endif

#define HOST_PAD_BYTES 4096
#define HOST_SUB_BYTES (64 * 1024)
#define EPOCH_SHIFT 24
/* Reading a peer's private input in place (one copy instead of staging's two) pays from this
 * many bytes per rank's block: below, staging's extra copy costs less than the syscall and
 * the end-of-epoch wait (2-vCPU Xeon, 2 ranks, all_gather). */
#define HOST_DIRECT_MIN_BYTES (16 * 1024)

/* The call a rank is in, as its peers see it (sig decides; the rest names it in messages). */
typedef struct {
  uint32_t sig;
  uint8_t coll, dtype, op, algo;
  uint8_t root; /* broadcast, reduce */
  uint64_t count;
} host_call_t;

typedef struct {
  _Alignas(64) _Atomic uint64_t ready;   /* (epoch << 24) | sub-chunks copied in */
  _Alignas(64) _Atomic uint64_t reduced; /* two-shot: (epoch << 24) | sub-chunks reduced */
  _Alignas(64) _Atomic uint64_t done;    /* last epoch whose reads of peers finished */
  /* Epoch e's input and call, in slot e & 1: a slot is rewritten only two epochs later, when
   * every peer is provably done with it. src_mem -1 = own workspace. */
  _Alignas(64) int32_t src_mem[2];
  uint64_t src_off[2];
  /* Read in place through an address (all_gather, broadcast, all_to_all): the input's address
   * in the owner's process; 0 when not (epoch begin clears it). */
  uint64_t src_addr[2];
  host_call_t call[2];
} host_pad_t;
_Static_assert(sizeof(host_pad_t) <= HOST_PAD_BYTES, "pad too large");

typedef struct {
  struct symcoll_mem *ws;
  size_t half;      /* bytes per workspace half */
  size_t sub_bytes; /* sub-chunk: the pipeline's step within an epoch */
  uint64_t epoch;
  host_pad_t *pad[SYMCOLL_MAX_RANKS];
  char *data[SYMCOLL_MAX_RANKS]; /* start of each rank's halves */
  /* Process mode: every pair of ranks can process_vm_readv the other (agreed at creation), so
   * peers may read this rank's private buffers, as they always can in thread mode. */
  bool cma;
  float *f32[3]; /* GEMMs of 16-bit floats: B, A and C widened (host_gemm.c) */
  size_t f32_elems[3];
  float *norm_f32; /* all_reduce_rmsnorm: the weight, rows as floats, rows streamed (host_rmsnorm.c) */
  size_t norm_elems;
  size_t stream_bytes; /* the fused norms stream results of calls that write at least this many */
} host_state_t;

/* One epoch of a call, as the collectives' files drive it. */
typedef struct {
  uint64_t e;
  size_t half_off; /* this epoch's half, from data[r] */
  bool first;      /* the call's first epoch: compare calls at the first wait */
  const symcoll__coll_args_t *a;
} host_epoch_t;

/* Starts the next epoch: records where this rank's input lies (zero-copy: mem and offset of
 * the chunk; else its staging at the epoch's half) and the call. */
SYMCOLL_HIDDEN host_epoch_t symcoll__host_epoch_begin(symcoll_comm_t comm, host_state_t *hs,
                                                      const symcoll__coll_args_t *a, bool first,
                                                      struct symcoll_mem *zmem, size_t zoff);
/* Whether peers may read this rank's private memory in place (thread mode, or CMA). */
static inline bool symcoll__host_direct_ok(symcoll_comm_t comm, const host_state_t *hs) {
  return comm->thread_mode || hs->cma;
}
/* Publishes counter value v (release). */
static inline void symcoll__host_publish(_Atomic uint64_t *c, uint64_t v) {
  atomic_store_explicit(c, v, memory_order_release);
}
/* Waits until every peer's counter at byte offset `field` of its pad reaches target; the
 * call's first wait on `ready` also compares calls (MISMATCH). */
SYMCOLL_HIDDEN symcoll_status_t symcoll__host_wait_all(symcoll_comm_t comm, host_state_t *hs, size_t field,
                                                       uint64_t target);
/* The same for one peer: a later wait of an epoch on the one rank whose data it reads (never
 * an epoch's first wait, which waits for every peer). */
SYMCOLL_HIDDEN symcoll_status_t symcoll__host_wait_peer(symcoll_comm_t comm, host_state_t *hs, int p, size_t field,
                                                        uint64_t target);
SYMCOLL_HIDDEN symcoll_status_t symcoll__host_wait_ready(symcoll_comm_t comm, host_state_t *hs, const host_epoch_t *ep,
                                                         size_t k);
/* Where peer p's input of epoch ep starts (its staging, or its symmetric input), or NULL if
 * it names an allocation this rank does not know for `bytes` (a MISMATCH). */
SYMCOLL_HIDDEN const char *symcoll__host_peer_input(symcoll_comm_t comm, host_state_t *hs, const host_epoch_t *ep,
                                                    int p, size_t bytes);
/* Copies `bytes` at address `from` of peer p's process (its src_addr) into dst: memcpy in
 * thread mode, process_vm_readv otherwise (only where hs->cma). `what` names the collective. */
SYMCOLL_HIDDEN symcoll_status_t symcoll__host_read_direct(symcoll_comm_t comm, int p, void *dst, uint64_t from,
                                                          size_t bytes, const char *what);
/* Ends the epoch: tells peers this rank's reads are done; a zero-copy epoch also waits for
 * theirs (they read our input in place). */
SYMCOLL_HIDDEN symcoll_status_t symcoll__host_epoch_end(symcoll_comm_t comm, host_state_t *hs, const host_epoch_t *ep,
                                                        bool zero_copy);

/* The collectives: args->count is the call's count; return after the result is in recv. */
SYMCOLL_HIDDEN symcoll_status_t symcoll__host_all_reduce(symcoll_comm_t comm, host_state_t *hs,
                                                         const symcoll__coll_args_t *a);
SYMCOLL_HIDDEN symcoll_status_t symcoll__host_all_gather(symcoll_comm_t comm, host_state_t *hs,
                                                         const symcoll__coll_args_t *a);
SYMCOLL_HIDDEN symcoll_status_t symcoll__host_reduce_scatter(symcoll_comm_t comm, host_state_t *hs,
                                                             const symcoll__coll_args_t *a);
SYMCOLL_HIDDEN symcoll_status_t symcoll__host_broadcast(symcoll_comm_t comm, host_state_t *hs,
                                                        const symcoll__coll_args_t *a);
SYMCOLL_HIDDEN symcoll_status_t symcoll__host_reduce(symcoll_comm_t comm, host_state_t *hs,
                                                     const symcoll__coll_args_t *a);
SYMCOLL_HIDDEN symcoll_status_t symcoll__host_all_to_all(symcoll_comm_t comm, host_state_t *hs,
                                                         const symcoll__coll_args_t *a);

/* All-reduce + add + RMSNorm (host_rmsnorm.c): ONE_SHOT, TWO_SHOT, or SEQUENTIAL's local pass. */
SYMCOLL_HIDDEN symcoll_status_t symcoll__host_rmsnorm(symcoll_comm_t comm, host_state_t *hs,
                                                      const symcoll__norm_args_t *a);

/* GEMMs (host_gemm.c, CBLAS opened on first use) and the fused operations (host_matmul.c). */
SYMCOLL_HIDDEN bool symcoll__host_has_gemm(symcoll_comm_t comm);
SYMCOLL_HIDDEN symcoll_status_t symcoll__host_gemm(symcoll_comm_t comm, const symcoll__gemm_t *g);
/* B (k x n) as cblas_sgemm reads it: b itself for fp32, else widened into the comm's buffer. */
SYMCOLL_HIDDEN const float *symcoll__host_gemm_b(host_state_t *hs, const void *b, size_t k, size_t n, size_t ldb,
                                                 symcoll_dtype_t dt);
/* c[m x n] (leading dimension ldc, dtype dt) = a[m x k] (lda) @ b32 (k x n fp32). */
SYMCOLL_HIDDEN symcoll_status_t symcoll__host_gemm_rows(host_state_t *hs, const void *a, size_t lda, const float *b32,
                                                        void *c, size_t ldc, size_t m, size_t n, size_t k,
                                                        symcoll_dtype_t dt);
SYMCOLL_HIDDEN symcoll_status_t symcoll__host_scratch_alloc(symcoll_comm_t comm, size_t bytes, void *stream, void **p);
SYMCOLL_HIDDEN void symcoll__host_scratch_free(symcoll_comm_t comm, void *p, void *stream);
SYMCOLL_HIDDEN symcoll_status_t symcoll__host_matmul(symcoll_comm_t comm, const symcoll__matmul_args_t *x);

static inline size_t host_min(size_t a, size_t b) {
  return a < b ? a : b;
}
#endif
