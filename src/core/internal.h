/* Internal declarations shared by src/core and the transports. Not installed. */
#ifndef SYMCOLL_INTERNAL_H
#define SYMCOLL_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "symcoll.h"

#define SYMCOLL_HIDDEN __attribute__((visibility("hidden")))
#define SYMCOLL_JOB_ID_MAX 64

#include "log.h"

#include "env.h"

/* ---- fault injection (fault.c) ---- */
/* Fault injection for tests (SYMCOLL_FAULT=point:rank[:n]): SIGKILLs this process at the
 * n-th time (default 1st) the given rank passes the named point. No cost when unset. */
SYMCOLL_HIDDEN void symcoll__fault_point(int rank, const char *point);

/* ---- time (clock.c) ---- */
SYMCOLL_HIDDEN uint64_t symcoll__now_ns(void);

/* ---- communicator ------------------------------------------------------------------- */
#include "transport.h"

struct symcoll_mem {
  symcoll_comm_t comm;
  size_t bytes;
  int id; /* same on every rank: allocations are collective and numbered in order */
  void *ptrs[SYMCOLL_MAX_RANKS];
  void *tp;        /* transport's private part */
  bool registered; /* the caller's memory (symcoll_mem_register): freed on this rank alone */
  struct symcoll_mem *next;
};

/* Tuning (tune.c): per collective and dtype, one choice per power-of-two size bucket: bucket b
 * holds sizes in (2^(b-1), 2^b] bytes (all_reduce: the buffer; all_gather: the gathered
 * output; reduce_scatter: the input, as nccl-tests count them), so a pick is one
 * count-leading-zeros and one load. */
typedef struct symcoll__tune_entry {
  symcoll_algo_t algo;
  int blocks, threads; /* 0: the transport's own choice */
  size_t round_bytes;  /* GPU bytes per round; 0: the transport's own choice */
} symcoll__tune_entry_t;
#define SYMCOLL_TUNE_BUCKETS 48
typedef struct symcoll__tune {
  symcoll__tune_entry_t bucket[SYMCOLL_TUNE_BUCKETS];
} symcoll__tune_t;
static inline int symcoll__tune_bucket(size_t bytes) {
  int b = bytes <= 1 ? 0 : 64 - __builtin_clzll((unsigned long long)(bytes - 1));
  return b < SYMCOLL_TUNE_BUCKETS ? b : SYMCOLL_TUNE_BUCKETS - 1;
}

struct symcoll_comm {
  int rank, nranks, device;
  int timeout_ms;
  char job_id[SYMCOLL_JOB_ID_MAX + 1];
  bool thread_mode;
  pid_t pids[SYMCOLL_MAX_RANKS];
  int pidfds[SYMCOLL_MAX_RANKS]; /* process mode: peers' pidfds (-1 if unavailable) */
  int ranks_on_my_device;        /* ranks sharing this rank's GPU (co-residency bound) */
  /* At least this many ranks may run kernels on this rank's GPU at once (0: only this
   * communicator's): a group made by split runs beside the other groups of its parent, so
   * its grids must leave room for all of the parent's ranks on the GPU. */
  int sharers_floor;
  uint32_t spin_before_yield; /* polls before a waiting rank gives its core away */

  const symcoll__oob_t *oob;
  void *oob_state;
  const symcoll__transport_t *tp;
  void *tp_state;

  atomic_int aborted;
  int abort_fd;      /* eventfd, readable once aborted: wakes every poll() */
  atomic_int failed; /* a peer was lost or timed out: status of the failure */
  /* Process mode: a thread that watches peers' pidfds, so a peer's death is reported by
   * symcoll_comm_check and stops enqueued GPU work, even while no call of ours is waiting. */
  pthread_t monitor;
  bool monitor_running;
  int monitor_stop_fd;

  struct symcoll_mem *mems;
  int next_mem_id;
  size_t workspace_bytes;
  struct symcoll_mem *workspace;                      /* symmetric scratch of the collectives */
  bool check_args;                                    /* SYMCOLL_CHECK=1 */
  symcoll_algo_t forced_algo[SYMCOLL_NUM_COLL_KINDS]; /* SYMCOLL_ALGO */
  symcoll__tune_t tune[SYMCOLL_NUM_COLL_KINDS][SYMCOLL_NUM_DTYPES];
  /* A table's ONE_SHOT_DB (which stages its input) over a symmetric input of at least this many
   * bytes runs ONE_SHOT instead, reading the input in place; 0: never. Set by the transport at
   * creation, alike on every rank. */
  size_t zc_one_shot_bytes;
  uint64_t coll_seq;                                /* collectives issued on this rank */
  uint64_t split_seq;                               /* splits of this communicator (names their rendezvous) */
  symcoll_algo_t last_algo[SYMCOLL_NUM_COLL_KINDS]; /* for INFO lines when the choice changes */
  uint8_t last_place[SYMCOLL_NUM_COLL_KINDS];       /* ... or where its buffers lie (symmetric: bit 0 in, 1 out) */
  struct symcoll__hier *hier;                       /* non-NULL: this communicator spans nodes (src/hier/hier.c) */
};

/* Bounded waiting for a peer. Spin, yield, check abort, deadline and peers' liveness; a WARN
 * names the missing rank after SYMCOLL_WAIT_REPORT_NS and then every twice that. */
#define SYMCOLL_WAIT_REPORT_NS 5000000000ull
typedef struct symcoll__waiter {
  symcoll_comm_t comm;
  int peer; /* the rank waited for (its death ends the wait); -1: any */
  uint64_t deadline_ns;
  uint64_t next_peer_check_ns;
  uint64_t start_ns, next_report_ns; /* "still waiting for rank r" reports */
  uint32_t spins;
} symcoll__waiter_t;
SYMCOLL_HIDDEN void symcoll__waiter_init(symcoll__waiter_t *w, symcoll_comm_t comm, int peer);
/* Called in a spin loop: SYMCOLL_OK to go on spinning, else the error to return. */
SYMCOLL_HIDDEN symcoll_status_t symcoll__waiter_slow(symcoll__waiter_t *w);
static inline symcoll_status_t symcoll__waiter_poll(symcoll__waiter_t *w) {
  if ((++w->spins & 63) != 0) return SYMCOLL_OK;
  return symcoll__waiter_slow(w);
}
/* Liveness of process-mode peers: PEER_LOST if `peer` (or, with -1, any peer) exited. */
SYMCOLL_HIDDEN symcoll_status_t symcoll__comm_peers_alive(symcoll_comm_t comm, int peer);
SYMCOLL_HIDDEN symcoll_status_t symcoll__comm_status(symcoll_comm_t comm);
SYMCOLL_HIDDEN void symcoll__comm_fail(symcoll_comm_t comm, symcoll_status_t status);

/* Finds the symmetric allocation of comm holding [p, p+bytes): NULL if none. */
SYMCOLL_HIDDEN struct symcoll_mem *symcoll__mem_find(symcoll_comm_t comm, const void *p, size_t bytes, size_t *off_p);
/* Drops comm from the framework allocator's registry (pool.c): its blocks go with it. */
SYMCOLL_HIDDEN void symcoll__pool_forget(symcoll_comm_t comm);
SYMCOLL_HIDDEN symcoll_status_t symcoll__mem_alloc_internal(symcoll_comm_t comm, size_t bytes,
                                                            struct symcoll_mem **mem_p);

/* ---- the peer monitor (monitor.c) ---- */
SYMCOLL_HIDDEN void symcoll__monitor_start(symcoll_comm_t c);
SYMCOLL_HIDDEN void symcoll__monitor_stop(symcoll_comm_t c);

/* ---- communicator creation shared with split.c (comm.c) -------------------------------- */
SYMCOLL_HIDDEN symcoll_status_t symcoll__comm_new(const symcoll_config_t *cfg, symcoll_comm_t *comm_p);
/* The per-rank half of creation once the oob exists: transport, workspace, tuning. */
SYMCOLL_HIDDEN symcoll_status_t symcoll__comm_setup(symcoll_comm_t comm);
/* Starts the peer monitor (process mode) once the communicator is complete. */
SYMCOLL_HIDDEN void symcoll__comm_ready(symcoll_comm_t comm);
SYMCOLL_HIDDEN void symcoll__comm_free(symcoll_comm_t comm);

/* The public creation calls without the emulated node boundary (SYMCOLL_NODE_RANKS): what
 * split and the node-local parts of a job use. sharers_floor: see symcoll_comm's field. */
SYMCOLL_HIDDEN symcoll_status_t symcoll__comm_create_flat(const symcoll_config_t *cfg, int sharers_floor,
                                                          symcoll_comm_t *comm_p);

/* ---- communicators spanning nodes (src/hier/hier.c) ------------------------------------------- */
extern SYMCOLL_HIDDEN const symcoll__transport_t symcoll__hier_transport;
/* SYMCOLL_NODE_RANKS=k: a communicator of one host over nranks ranks (a multiple of k)
 * becomes one spanning nranks / k emulated nodes of k ranks (ranks r*k .. r*k+k-1). Takes
 * over `flat` (destroyed on failure too). Collective over flat's ranks. */
SYMCOLL_HIDDEN symcoll_status_t symcoll__hier_from_flat(symcoll_comm_t flat, int node_ranks, symcoll_comm_t *comm_p);
/* 0 where SYMCOLL_NODE_RANKS leaves a communicator of nranks ranks alone, else its k. */
SYMCOLL_HIDDEN int symcoll__hier_node_ranks(int nranks);

/* ---- bootstrap (bootstrap.c) and thread teams (team.c) ------------------------------- */
SYMCOLL_HIDDEN symcoll_status_t symcoll__bootstrap_init(symcoll_comm_t comm);
SYMCOLL_HIDDEN symcoll_status_t symcoll__team_init(int nranks, symcoll_comm_t *comms);
/* A team object for nranks threads, to hand to symcoll__team_join (split in thread mode). */
SYMCOLL_HIDDEN void *symcoll__team_new(int nranks);
SYMCOLL_HIDDEN void symcoll__team_join(symcoll_comm_t comm, void *team);
/* Wakes a thread team's waiters after symcoll_comm_abort. */
SYMCOLL_HIDDEN void symcoll__team_wake(symcoll_comm_t comm);

/* Bootstrap wire format: exposed for the parser fuzz target and tests. */
#define SYMCOLL_BOOT_MAGIC 0x4c435953u /* "SYCL" little endian */
#define SYMCOLL_BOOT_VERSION 1
#define SYMCOLL_BOOT_MAX_PAYLOAD (1u << 20)
typedef struct symcoll__boot_hdr {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  uint32_t len;   /* payload bytes that follow */
  int32_t rank;   /* sender */
  int32_t status; /* for replies: a symcoll_status_t */
  uint32_t reserved;
} symcoll__boot_hdr_t;
enum {
  SYMCOLL_BOOT_HELLO = 1,
  SYMCOLL_BOOT_WELCOME = 2,
  SYMCOLL_BOOT_REJECT = 3,
  SYMCOLL_BOOT_DATA = 4,
  SYMCOLL_BOOT_FD = 5,
  SYMCOLL_BOOT_TYPE_MAX = 5
};
typedef struct symcoll__boot_hello {
  int32_t rank, nranks;
  int32_t pid;
  int32_t device_kind; /* 0 host, 1 cuda */
} symcoll__boot_hello_t;
/* Validates a received header; SYMCOLL_OK or ERR_MISMATCH (bad magic/version/type/length). */
SYMCOLL_HIDDEN symcoll_status_t symcoll__boot_hdr_parse(const void *buf, size_t n, symcoll__boot_hdr_t *hdr_p);
SYMCOLL_HIDDEN symcoll_status_t symcoll__boot_hello_parse(const symcoll__boot_hdr_t *hdr, const void *payload,
                                                          symcoll__boot_hello_t *hello_p);

/* ---- selection (tune.c) --------------------------------------------------------------------- */
SYMCOLL_HIDDEN void symcoll__tune_init(symcoll_comm_t comm);
/* The built-in table's text (tests). */
SYMCOLL_HIDDEN const char *symcoll__tune_builtin(void);
/* Parses a table (see docs/tuning.md) into comm->tune; rows for other backends, CPU classes
 * or nranks are skipped. Returns the number of rows used, or -1 on a syntax error (line in
 * *line_p). */
SYMCOLL_HIDDEN int symcoll__tune_parse(symcoll_comm_t comm, const char *text, int *line_p);
/* Replaces every choice of `algo` by the choice for the next smaller size (the collective's
 * fallback if none). */
SYMCOLL_HIDDEN void symcoll__tune_drop_algo(symcoll_comm_t comm, symcoll_algo_t algo);
#include "colls.h"

/* ---- the collective path (coll.c) ---- */
/* The tuning table's entry for a call of `coll` with this count (its count argument) and dtype. */
SYMCOLL_HIDDEN const symcoll__tune_entry_t *symcoll__coll_entry(symcoll_comm_t comm, symcoll_coll_t coll, size_t count,
                                                                symcoll_dtype_t dtype);
/* What auto runs for such a call: SYMCOLL_ALGO where it forces one, else the table's. */
SYMCOLL_HIDDEN symcoll_algo_t symcoll__coll_auto(symcoll_comm_t comm, symcoll_coll_t coll, size_t count,
                                                 symcoll_dtype_t dtype);
/* Runs a plain collective inside another operation (the fused GEMM ones): args holds coll,
 * send, recv, count, dtype, op, stream and the outer call's signature; the algorithm, launch
 * shape and zero-copy placement are chosen as for a call of its own. */
SYMCOLL_HIDDEN symcoll_status_t symcoll__coll_inner(symcoll_comm_t comm, symcoll__coll_args_t *a);
/* SYMCOLL_CHECK=1's exchange (coll.c): every rank's `bytes` at mine into all (nranks x bytes, in
 * rank order); *differs: the first rank whose bytes differ from this rank's, or -1. */
SYMCOLL_HIDDEN symcoll_status_t symcoll__agree(symcoll_comm_t comm, const void *mine, void *all, size_t bytes,
                                               int *differs);
/* A 64-bit finaliser (MurmurHash3's fmix64): every input bit moves about half the output's. */
static inline uint64_t symcoll__mix64(uint64_t z) {
  z ^= z >> 33;
  z *= 0xff51afd7ed558ccdull;
  z ^= z >> 33;
  z *= 0xc4ceb9fe1a85ec53ull;
  z ^= z >> 33;
  return z;
}
/* The signature of a call's arguments (never 0): peers compare it where they meet. n and k are
 * the GEMM operations' (a rooted collective's root rides in n; the fused norm's shape in n and
 * k); plain collectives pass 0. Inline, and cheap: it is on every call's path. */
static inline uint32_t symcoll__call_signature(symcoll_coll_t coll, size_t count, size_t n, size_t k,
                                               symcoll_dtype_t dtype, symcoll_op_t op, symcoll_algo_t algo) {
  const uint64_t kind = (uint64_t)coll | (uint64_t)dtype << 8 | (uint64_t)op << 16 | (uint64_t)algo << 24;
  uint64_t h = symcoll__mix64((uint64_t)count ^ symcoll__mix64(kind + 0x9e3779b97f4a7c15ull));
  if (n || k) h = symcoll__mix64(h ^ symcoll__mix64((uint64_t)n + 0x632be59bd9b4e019ull) ^ (uint64_t)k);
  const uint32_t s = (uint32_t)(h ^ (h >> 32));
  return s ? s : 1;
}
/* symcoll_dtype_size, inline for the call path (0 for an unknown dtype); sizes from status.c's
 * list of dtypes. */
extern SYMCOLL_HIDDEN const unsigned char symcoll__dtype_bytes[SYMCOLL_NUM_DTYPES];
static inline size_t symcoll__esize(symcoll_dtype_t dtype) {
  return (unsigned)dtype < SYMCOLL_NUM_DTYPES ? symcoll__dtype_bytes[dtype] : 0;
}
/* Parses SYMCOLL_ALGO into comm->forced_algo. */
SYMCOLL_HIDDEN void symcoll__algo_from_env(symcoll_comm_t comm);

#include "half.h"

#endif /* SYMCOLL_INTERNAL_H */
