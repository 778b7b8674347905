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

/* ---- logging (log.c) ------------------------------------------------------------ */
enum { SYMCOLL_LOG_NONE = 0, SYMCOLL_LOG_WARN = 1, SYMCOLL_LOG_INFO = 2, SYMCOLL_LOG_TRACE = 3 };
enum {
  SYMCOLL_SUBSYS_INIT = 1 << 0,
  SYMCOLL_SUBSYS_BOOT = 1 << 1,
  SYMCOLL_SUBSYS_MEM = 1 << 2,
  SYMCOLL_SUBSYS_COLL = 1 << 3,
  SYMCOLL_SUBSYS_TUNE = 1 << 4,
  SYMCOLL_SUBSYS_ALL = 0xff
};
extern SYMCOLL_HIDDEN int symcoll__log_level;
extern SYMCOLL_HIDDEN int symcoll__log_subsys;
SYMCOLL_HIDDEN void symcoll__log_init(void);
SYMCOLL_HIDDEN void symcoll__log_write(int level, int subsys, const char *file, int line,
                                       const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Formats only when the level and subsystem are enabled. */
#define SYMCOLL_LOG(level, subsys, ...)                                                    \
  do {                                                                                     \
    if (symcoll__log_level >= (level) && (symcoll__log_subsys & (subsys)))                \
      symcoll__log_write((level), (subsys), __FILE__, __LINE__, __VA_ARGS__);             \
  } while (0)
/* Warnings are formatted whatever the level: the message is kept for symcoll_last_error(). */
SYMCOLL_HIDDEN void symcoll__log_warn(int subsys, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define SYMCOLL_WARN(subsys, ...) symcoll__log_warn((subsys), __FILE__, __LINE__, __VA_ARGS__)
#define SYMCOLL_INFO(subsys, ...) SYMCOLL_LOG(SYMCOLL_LOG_INFO, subsys, __VA_ARGS__)
#define SYMCOLL_TRACE(subsys, ...) SYMCOLL_LOG(SYMCOLL_LOG_TRACE, subsys, __VA_ARGS__)

/* Propagates a failing status, leaving one trace line per level (" -> status"). */
#define SYMCOLL_CHECK(call)                                                                \
  do {                                                                                     \
    symcoll_status_t symcoll__s = (call);                                                  \
    if (symcoll__s != SYMCOLL_OK) {                                                        \
      SYMCOLL_INFO(SYMCOLL_SUBSYS_ALL, "-> %d (%s)", (int)symcoll__s, #call);              \
      return symcoll__s;                                                                   \
    }                                                                                      \
  } while (0)
/* Same, jumping to a cleanup label with `status` set. */
#define SYMCOLL_CHECK_GOTO(call, status, label)                                            \
  do {                                                                                     \
    (status) = (call);                                                                     \
    if ((status) != SYMCOLL_OK) {                                                          \
      SYMCOLL_INFO(SYMCOLL_SUBSYS_ALL, "-> %d (%s)", (int)(status), #call);                \
      goto label;                                                                          \
    }                                                                                      \
  } while (0)
/* Wraps a syscall returning -1 on error: logs call text and errno once. */
#define SYMCOLL_SYSCALL_GOTO(call, status, label)                                          \
  do {                                                                                     \
    if ((call) == -1) {                                                                    \
      SYMCOLL_WARN(SYMCOLL_SUBSYS_ALL, "%s failed: %m", #call);                            \
      (status) = SYMCOLL_ERR_SYSTEM;                                                       \
      goto label;                                                                          \
    }                                                                                      \
  } while (0)

/* Refuses a call's argument: the WARN names what was wrong, nothing is written. */
#define SYMCOLL_REFUSE(...)                                                                \
  do {                                                                                     \
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, __VA_ARGS__);                                        \
    return SYMCOLL_ERR_INVALID_ARGUMENT;                                                   \
  } while (0)

/* A collective kind an entry (a transport's, an engine's) has no code for: UNSUPPORTED, with a
 * WARN naming both, never another collective. Switches over symcoll_coll_t list every kind
 * and have no default, so a kind added to the enum fails to build until each place says. */
#define SYMCOLL_NO_ENTRY(where, coll)                                                          \
  (SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "%s has no entry for %s", (where), symcoll_coll_name(coll)), \
   SYMCOLL_ERR_UNSUPPORTED)

/* Whether [a, a + an) and [b, b + bn) share a byte. */
static inline bool symcoll__overlap(const void *a, size_t an, const void *b, size_t bn) {
  const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x < y + bn && y < x + an;
}

/* ---- environment (env.c) ---------------------------------------------------------- */
/* Types of knobs: how the value is parsed, and its unit. */
enum {
  SYMCOLL_ENV_STR,   /* free text */
  SYMCOLL_ENV_BOOL,  /* 0/1, off/on, no/yes, false/true */
  SYMCOLL_ENV_INT,   /* a whole number */
  SYMCOLL_ENV_MS,    /* milliseconds; suffixes ms, s, min */
  SYMCOLL_ENV_BYTES, /* bytes; suffixes K, M, G (powers of 1024) */
  SYMCOLL_ENV_ENUM,  /* one of `choices` */
  SYMCOLL_ENV_LIST,  /* comma list of `choices` (or ALL) */
};
/* X(name, type, default, min, max, choices, help): every knob the library reads, in one table;
 * symcoll-bench --env prints it and the README's table says the same. */
#define SYMCOLL_ENV_MAP(X)                                                                                  \
  X(SYMCOLL_DEBUG, ENUM, "WARN", 0, 0, "NONE|WARN|INFO|TRACE",                                               \
    "log level: NONE, WARN, INFO (set-up and each call's algorithm), TRACE (every call)")                   \
  X(SYMCOLL_DEBUG_SUBSYS, LIST, "ALL", 0, 0, "INIT|BOOT|MEM|COLL|TUNE", "comma list of INIT,BOOT,MEM,COLL,TUNE or ALL") \
  X(SYMCOLL_TIMEOUT_MS, MS, "30000", 1, 86400000,  "",                                                       \
    "bound on every wait for a peer: milliseconds (or with a unit: 500ms, 10s, 2min), 1 ms to 24 h")         \
  X(SYMCOLL_ALGO, STR, "auto", 0, 0, "",                                                                    \
    "force algorithms: a comma list of names (each applies to the collectives that have it) or coll:name, "  \
    "e.g. twoshot or all_gather:push,reduce_scatter:pull")                                                  \
  X(SYMCOLL_WORKSPACE_BYTES, BYTES, "0", 0, 1ll << 40, "",                                                   \
    "symmetric scratch per rank in bytes (K, M, G suffixes); 0 = 32 MiB on CPU, 64 MiB on GPU")             \
  X(SYMCOLL_HOST_SIMD, ENUM, "auto", 0, 0, "auto|avx512|avx2|sse2|neon|generic|scalar",                     \
    "CPU reduce loops: auto (the widest this CPU runs), avx512, avx2, sse2 or neon (the baseline), scalar") \
  X(SYMCOLL_CHECK, BOOL, "0", 0, 1, "",                                                                      \
    "1: ranks compare every call's arguments on the host (a bootstrap exchange per call)")                  \
  X(SYMCOLL_NCCL, ENUM, "auto", 0, 0, "auto|1|0", "GPU: hold an NCCL communicator: auto (if the tuning table uses it), 1, 0") \
  X(SYMCOLL_NCCL_LIB, STR, "", 0, 0, "", "GPU: path of libnccl.so.2 when the loader does not find it")      \
  X(SYMCOLL_BLAS_LIB, STR, "", 0, 0, "", "CPU GEMMs: a CBLAS library to open (default libopenblas.so.0, libcblas.so.3, libblas.so.3)") \
  X(SYMCOLL_CUBLASLT_LIB, STR, "", 0, 0, "", "GPU GEMMs: path of libcublasLt.so when the loader does not find it") \
  X(SYMCOLL_GEMM, BOOL, "1", 0, 1, "", "GPU: set up the GEMM operations at creation (cuBLASLt, a copy stream, 64 MiB " \
    "of workspace and scratch); 0: they are UNSUPPORTED on GPU communicators")                                \
  X(SYMCOLL_TUNE_FILE, STR, "", 0, 0, "", "tuning table to load; default ~/.cache/symcoll/tune.txt, else built-in") \
  X(SYMCOLL_NODE_RANKS, INT, "0", 0, SYMCOLL_MAX_RANKS, "",                                                 \
    "testing: emulate nodes of this many ranks on one host (0: off); each communicator of a multiple of it spans nodes") \
  X(SYMCOLL_ENGINE, ENUM, "auto", 0, 0, "auto|nccl|mpi|symcoll",                                             \
    "engine between nodes: auto (NCCL for GPU ranks, MPI for CPU ranks; symcoll for emulated CPU nodes), nccl, mpi, symcoll") \
  X(SYMCOLL_MPI_LIB, STR, "", 0, 0, "", "the MPI engine library to open (default libsymcoll_mpi.so beside libsymcoll)") \
  X(SYMCOLL_RANK, INT, "-1", 0, SYMCOLL_MAX_RANKS - 1, "", "this process's rank (with SYMCOLL_NRANKS, SYMCOLL_JOB_ID)") \
  X(SYMCOLL_NRANKS, INT, "-1", 1, SYMCOLL_MAX_RANKS, "", "number of ranks of the job")                      \
  X(SYMCOLL_JOB_ID, STR, "", 0, 0, "", "rendezvous name shared by the ranks of one job ([A-Za-z0-9._:-], <= 64); " \
    "unset: ppid.<the parent's pid>")                                                                        \
  X(SYMCOLL_GPU_SIGNATURE, BOOL, "1", 0, 1, "", "testing only: 0 makes GPU kernels carry 1 in place of each call's signature (to measure its cost)") \
  X(SYMCOLL_FAULT, STR, "", 0, 0, "", "testing only: POINT:RANK[:N] kills RANK at its Nth boot|alloc|coll point")

/* The knob's value parsed by its type (INT, MS, BYTES, BOOL); its default if unset or invalid. */
SYMCOLL_HIDDEN long long symcoll__env_int(const char *name);
/* ENUM: index of the value among the knob's choices (of the default if unset or invalid). */
SYMCOLL_HIDDEN int symcoll__env_choice(const char *name);
/* LIST: bit i set for choice i named in the value; `all` for ALL. */
SYMCOLL_HIDDEN unsigned symcoll__env_list(const char *name, unsigned all);
/* STR: the raw value, or dflt if unset or empty. */
SYMCOLL_HIDDEN const char *symcoll__env_str(const char *name, const char *dflt);
/* A WARN about the knob's value, printed once per process and knob. */
SYMCOLL_HIDDEN void symcoll__env_warn(const char *name, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Fault injection for tests (SYMCOLL_FAULT=point:rank[:n]): SIGKILLs this process at the
 * n-th time (default 1st) the given rank passes the named point. No cost when unset. */
SYMCOLL_HIDDEN void symcoll__fault_point(int rank, const char *point);

/* ---- time --------------------------------------------------------------------------- */
SYMCOLL_HIDDEN uint64_t symcoll__now_ns(void);

/* ---- communicator ------------------------------------------------------------------- */
typedef struct symcoll__coll_args {
  symcoll_coll_t coll;
  const void *send;
  void *recv;
  size_t count; /* the call's count: all_reduce count, all_gather sendcount, reduce_scatter recvcount */
  symcoll_dtype_t dtype;
  symcoll_op_t op; /* SUM for all_gather */
  symcoll_algo_t algo; /* never AUTO here: core resolved it */
  int blocks, threads;
  size_t round_bytes; /* 0: the transport's own */
  void *stream;
  /* Zero-copy: send lies in this symmetric allocation at this offset on every rank. */
  struct symcoll_mem *send_mem;
  size_t send_off;
  /* all_gather: recv lies in a symmetric allocation (push can store straight into peers'). */
  struct symcoll_mem *recv_mem;
  size_t recv_off;
  /* The call's identity (collective, count, dtype, op, algorithm), never 0: peers compare it
   * where they meet, so that ranks in different calls never pair up (symcoll.h). */
  uint32_t sig;
} symcoll__coll_args_t;

/* A local GEMM, row-major: c[m x n] = a[m x k] @ b[k x n], leading dimensions in elements;
 * fp32 accumulation; enqueued on stream (GPU) or done now (CPU). */
typedef struct symcoll__gemm {
  const void *a, *b;
  void *c;
  size_t m, n, k, lda, ldb, ldc;
  symcoll_dtype_t dtype;
  void *stream;
} symcoll__gemm_t;

/* A collective fused with a GEMM (symcoll.h), as core hands it to a transport's matmul entry
 * (the OVERLAP algorithm; core runs SEQUENTIAL itself from coll and gemm). */
typedef struct symcoll__matmul_args {
  symcoll_coll_t coll; /* ALL_GATHER_MATMUL or MATMUL_REDUCE_SCATTER */
  const void *a, *b;   /* all_gather_matmul: a is the shard */
  void *c;             /* all_gather_matmul: the whole C; matmul_reduce_scatter: the shard */
  void *a_out;         /* all_gather_matmul: the gathered A, or NULL */
  size_t m_shard, n, k; /* rows per rank (matmul_reduce_scatter: of the output), columns, depth */
  symcoll_dtype_t dtype;
  symcoll_algo_t algo;
  void *stream;
  struct symcoll_mem *a_mem; /* all_gather_matmul: the shard lies in this allocation... */
  size_t a_off;              /* ...at this offset, on every rank (zero-copy) */
  uint32_t sig;
} symcoll__matmul_args_t;

/* Out-of-band exchange among the ranks of a communicator (bootstrap.c, team.c). */
typedef struct symcoll__oob {
  symcoll_status_t (*allgather)(symcoll_comm_t comm, const void *in, void *out, size_t bytes);
  /* Rank 0's `bytes` at buf reach every rank's buf. */
  symcoll_status_t (*bcast)(symcoll_comm_t comm, void *buf, size_t bytes);
  /* fds_p[r] = rank r's fd as a descriptor valid in this process (own rank: a dup). */
  symcoll_status_t (*exchange_fd)(symcoll_comm_t comm, int my_fd, int *fds_p);
  void (*destroy)(symcoll_comm_t comm);
} symcoll__oob_t;

/* A transport: one table of function pointers, filled in by src/host or src/cuda. */
typedef struct symcoll__transport {
  const char *name;
  symcoll_status_t (*comm_init)(symcoll_comm_t comm);
  void (*comm_fini)(symcoll_comm_t comm);
  symcoll_status_t (*mem_alloc)(symcoll_comm_t comm, size_t bytes, struct symcoll_mem *mem);
  void (*mem_free)(struct symcoll_mem *mem);
  symcoll_status_t (*mem_device_view)(struct symcoll_mem *mem, symcoll_device_view_t *view);
  /* Runs (CPU) or enqueues (GPU) one collective; args->coll says which. */
  symcoll_status_t (*coll)(symcoll_comm_t comm, const symcoll__coll_args_t *args);
  /* dst = src, enqueued on stream (GPU) or done now (CPU): a one-rank collective. */
  symcoll_status_t (*copy)(symcoll_comm_t comm, void *dst, const void *src, size_t bytes, void *stream);
  symcoll_status_t (*check)(symcoll_comm_t comm);
  /* Optional. Collective, once every rank holds rank 0's tuning table: set up what the
   * table asks for (CUDA: an NCCL communicator). Without it, NCCL rows are dropped. */
  symcoll_status_t (*tune_ready)(symcoll_comm_t comm);
  /* Whether this transport runs `algo` for `coll` (core has already checked that the
   * algorithm belongs to the collective). */
  bool (*has_algo)(symcoll_comm_t comm, symcoll_coll_t coll, symcoll_algo_t algo);
  /* Optional (NULL: the GEMM operations are UNSUPPORTED). Whether the GEMM library could be
   * opened (it is opened, and set up for comm, on first use); core calls the other three only
   * once has_gemm said yes: a local GEMM; scratch memory of the call's lifetime, ordered on
   * stream (GPU: stream-ordered allocation, so capturable); the OVERLAP algorithm of the fused
   * operations. */
  symcoll_status_t (*gemm)(symcoll_comm_t comm, const symcoll__gemm_t *g);
  bool (*has_gemm)(symcoll_comm_t comm);
  symcoll_status_t (*scratch_alloc)(symcoll_comm_t comm, size_t bytes, void *stream, void **p);
  void (*scratch_free)(symcoll_comm_t comm, void *p, void *stream);
  symcoll_status_t (*matmul)(symcoll_comm_t comm, const symcoll__matmul_args_t *a);
  /* Optional: the machine class tuning rows may name after the backend ("host:avx2"). */
  const char *(*tune_class)(symcoll_comm_t comm);
  /* Makes work already enqueued give up (GPU: raise the device error word with `status`).
   * Called from any thread: by symcoll_comm_abort, and by the peer monitor when a peer dies. */
  void (*abort)(symcoll_comm_t comm, symcoll_status_t status);
} symcoll__transport_t;

extern SYMCOLL_HIDDEN const symcoll__transport_t symcoll__host_transport;
#ifdef SYMCOLL_HAVE_CUDA
extern SYMCOLL_HIDDEN const symcoll__transport_t symcoll__cuda_transport;
#endif

struct symcoll_mem {
  symcoll_comm_t comm;
  size_t bytes;
  int id; /* same on every rank: allocations are collective and numbered in order */
  void *ptrs[SYMCOLL_MAX_RANKS];
  void *tp; /* transport's private part */
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
  uint32_t spin_before_yield;    /* polls before a waiting rank gives its core away */

  const symcoll__oob_t *oob;
  void *oob_state;
  const symcoll__transport_t *tp;
  void *tp_state;

  atomic_int aborted;
  int abort_fd; /* eventfd, readable once aborted: wakes every poll() */
  atomic_int failed; /* a peer was lost or timed out: status of the failure */
  /* Process mode: a thread that watches peers' pidfds, so a peer's death is reported by
   * symcoll_comm_check and stops enqueued GPU work, even while no call of ours is waiting. */
  pthread_t monitor;
  bool monitor_running;
  int monitor_stop_fd;

  struct symcoll_mem *mems;
  int next_mem_id;
  size_t workspace_bytes;
  struct symcoll_mem *workspace; /* symmetric scratch of the collectives */
  bool check_args;               /* SYMCOLL_CHECK=1 */
  symcoll_algo_t forced_algo[SYMCOLL_NUM_COLL_KINDS]; /* SYMCOLL_ALGO */
  symcoll__tune_t tune[SYMCOLL_NUM_COLL_KINDS][SYMCOLL_NUM_DTYPES];
  uint64_t coll_seq;             /* collectives issued on this rank */
  uint64_t split_seq;            /* splits of this communicator (names their rendezvous) */
  symcoll_algo_t last_algo[SYMCOLL_NUM_COLL_KINDS]; /* for INFO lines when the choice changes */
  struct symcoll__hier *hier;    /* non-NULL: this communicator spans nodes (src/hier/hier.c) */
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
SYMCOLL_HIDDEN struct symcoll_mem *symcoll__mem_find(symcoll_comm_t comm, const void *p,
                                                     size_t bytes, size_t *off_p);
SYMCOLL_HIDDEN symcoll_status_t symcoll__mem_alloc_internal(symcoll_comm_t comm, size_t bytes,
                                                            struct symcoll_mem **mem_p);

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
  uint32_t len;  /* payload bytes that follow */
  int32_t rank;  /* sender */
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
SYMCOLL_HIDDEN symcoll_status_t symcoll__boot_hdr_parse(const void *buf, size_t n,
                                                        symcoll__boot_hdr_t *hdr_p);
SYMCOLL_HIDDEN symcoll_status_t symcoll__boot_hello_parse(const symcoll__boot_hdr_t *hdr,
                                                          const void *payload,
                                                          symcoll__boot_hello_t *hello_p);

/* ---- selection (tune.c) --------------------------------------------------------------------- */
SYMCOLL_HIDDEN void symcoll__tune_init(symcoll_comm_t comm);
/* Parses a table (see docs/tuning.md) into comm->tune; rows for other backends, CPU classes
 * or nranks are skipped. Returns the number of rows used, or -1 on a syntax error (line in
 * *line_p). */
SYMCOLL_HIDDEN int symcoll__tune_parse(symcoll_comm_t comm, const char *text, int *line_p);
/* Replaces every choice of `algo` by the choice for the next smaller size (the collective's
 * fallback if none). */
SYMCOLL_HIDDEN void symcoll__tune_drop_algo(symcoll_comm_t comm, symcoll_algo_t algo);
/* ---- what each collective is (src/core/colls.c: one row per collective) ---- */

/* Where send and recv lie when a call is in place (NCCL's rules). */
typedef enum {
  SYMCOLL__IN_PLACE_SAME,         /* send == recv (all_reduce) */
  SYMCOLL__IN_PLACE_SEND_IN_RECV, /* send is this rank's block of recv (all_gather) */
  SYMCOLL__IN_PLACE_RECV_IN_SEND, /* recv is this rank's block of send (reduce_scatter) */
} symcoll__in_place_t;

#define SYMCOLL__ALGO_BIT(a) (1u << (unsigned)(a))

typedef struct {
  bool fused;    /* fused with a GEMM: its entry point is matmul.c's; the rest are plain */
  bool takes_op; /* a reduction (else op is ignored and taken as SUM, so signatures agree) */
  /* Plain collectives: the buffer holds every rank's block (count x nranks elements), else
   * one block (count). */
  bool send_all, recv_all;
  bool moves_all; /* the call's size class: every rank's block (count x nranks) or one */
  symcoll__in_place_t in_place;
  uint32_t algos;          /* SYMCOLL__ALGO_BIT of each algorithm on one node */
  symcoll_algo_t fallback; /* where nothing else is chosen, or the choice is not available */
  int busbw_factor;        /* bus bandwidth = algbw x busbw_factor x (n - 1) / n (nccl-tests) */
} symcoll__coll_desc_t;

/* The row of `coll`, or NULL if it is out of range. */
SYMCOLL_HIDDEN const symcoll__coll_desc_t *symcoll__coll_desc(symcoll_coll_t coll);
/* Bytes a call's size bucket is taken from (see symcoll__tune_t). */
SYMCOLL_HIDDEN size_t symcoll__coll_bytes(symcoll_coll_t coll, size_t count, size_t esize, int nranks);
/* Whether `algo` is one of the collective's algorithms (not whether this comm can run it). */
SYMCOLL_HIDDEN bool symcoll__algo_of(symcoll_coll_t coll, symcoll_algo_t algo);
/* The algorithms of `coll`, by name, comma-separated into buf (for messages). */
SYMCOLL_HIDDEN const char *symcoll__algo_list(symcoll_coll_t coll, char *buf, size_t n);
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
/* The signature of a call's arguments (never 0). */
SYMCOLL_HIDDEN uint32_t symcoll__call_signature(symcoll_coll_t coll, size_t count, size_t n, size_t k,
                                                symcoll_dtype_t dtype, symcoll_op_t op, symcoll_algo_t algo);
/* Parses SYMCOLL_ALGO into comm->forced_algo. */
SYMCOLL_HIDDEN void symcoll__algo_from_env(symcoll_comm_t comm);

/* ---- half-precision helpers shared by the CPU transport and tests ----------------- */
static inline float symcoll__bf16_to_f32(uint16_t h) {
  union { uint32_t u; float f; } v = {.u = (uint32_t)h << 16};
  return v.f;
}
static inline uint16_t symcoll__f32_to_bf16(float f) {
  union { uint32_t u; float f; } v = {.f = f};
  if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40); /* quiet NaN */
  uint32_t rounding = 0x7fffu + ((v.u >> 16) & 1u);
  return (uint16_t)((v.u + rounding) >> 16);
}
SYMCOLL_HIDDEN float symcoll__f16_to_f32(uint16_t h);
SYMCOLL_HIDDEN uint16_t symcoll__f32_to_f16(float f);

#endif /* SYMCOLL_INTERNAL_H */
