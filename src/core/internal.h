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
#define SYMCOLL_WARN(subsys, ...) SYMCOLL_LOG(SYMCOLL_LOG_WARN, subsys, __VA_ARGS__)
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

/* ---- environment (env.c) ---------------------------------------------------------- */
/* X(name, default, help): every knob the library reads, in one table. */
#define SYMCOLL_ENV_MAP(X)                                                                          \
  X(SYMCOLL_DEBUG, "WARN", "log level: NONE, WARN, INFO, TRACE")                                    \
  X(SYMCOLL_DEBUG_SUBSYS, "ALL", "comma list of INIT,BOOT,MEM,COLL,TUNE or ALL")                    \
  X(SYMCOLL_TIMEOUT_MS, "30000", "bound on every wait for a peer, in ms")                          \
  X(SYMCOLL_ALGO, "auto", "force an all-reduce algorithm: auto, oneshot, twoshot, oneshot_db, lamport, nccl")  \
  X(SYMCOLL_WORKSPACE_BYTES, "0", "symmetric scratch per rank; 0 = 32 MiB on CPU, 64 MiB on GPU")  \
  X(SYMCOLL_HOST_SIMD, "auto", "CPU reduce loops: auto, avx512, scalar")                            \
  X(SYMCOLL_CHECK, "0", "1: ranks verify they agree on every collective's arguments")               \
  X(SYMCOLL_NCCL, "auto", "GPU: hold an NCCL communicator: auto (if the tuning table uses it), 1, 0") \
  X(SYMCOLL_NCCL_LIB, "", "GPU: path of libnccl.so.2 when the loader does not find it")             \
  X(SYMCOLL_TUNE_FILE, "", "tuning table to load; default ~/.cache/symcoll/tune.txt, else built-in") \
  X(SYMCOLL_RANK, "", "this process's rank (with SYMCOLL_NRANKS, SYMCOLL_JOB_ID)")                  \
  X(SYMCOLL_NRANKS, "", "number of ranks of the job")                                               \
  X(SYMCOLL_JOB_ID, "", "rendezvous name shared by the ranks of one job")                          \
  X(SYMCOLL_FAULT, "", "testing only: POINT:RANK[:N] kills RANK at its Nth boot|alloc|coll point")

SYMCOLL_HIDDEN long symcoll__env_long(const char *name, long dflt);
SYMCOLL_HIDDEN const char *symcoll__env_str(const char *name, const char *dflt);

/* Fault injection for tests (SYMCOLL_FAULT=point:rank[:n]): SIGKILLs this process at the
 * n-th time (default 1st) the given rank passes the named point. No cost when unset. */
SYMCOLL_HIDDEN void symcoll__fault_point(int rank, const char *point);

/* ---- time --------------------------------------------------------------------------- */
SYMCOLL_HIDDEN uint64_t symcoll__now_ns(void);

/* ---- communicator ------------------------------------------------------------------- */
typedef struct symcoll__coll_args {
  const void *send;
  void *recv;
  size_t count;
  symcoll_dtype_t dtype;
  symcoll_op_t op;
  symcoll_algo_t algo; /* never AUTO here: core resolved it */
  int blocks, threads;
  size_t round_bytes; /* 0: the transport's own */
  void *stream;
  /* Zero-copy: send lies in this symmetric allocation at this offset on every rank. */
  struct symcoll_mem *send_mem;
  size_t send_off;
} symcoll__coll_args_t;

/* Out-of-band exchange among the ranks of a communicator (bootstrap.c, team.c). */
typedef struct symcoll__oob {
  symcoll_status_t (*allgather)(symcoll_comm_t comm, const void *in, void *out, size_t bytes);
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
  symcoll_status_t (*all_reduce)(symcoll_comm_t comm, const symcoll__coll_args_t *args);
  /* dst = src, enqueued on stream (GPU) or done now (CPU): a one-rank all-reduce. */
  symcoll_status_t (*copy)(symcoll_comm_t comm, void *dst, const void *src, size_t bytes, void *stream);
  symcoll_status_t (*check)(symcoll_comm_t comm);
  /* Optional. Collective, once every rank holds rank 0's tuning table: set up what the
   * table asks for (CUDA: an NCCL communicator). Without it, NCCL rows are dropped. */
  symcoll_status_t (*tune_ready)(symcoll_comm_t comm);
  /* Optional: whether an algorithm that needs more than symmetric memory (NCCL) can run. */
  bool (*has_algo)(symcoll_comm_t comm, symcoll_algo_t algo);
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

/* Tuning (tune.c): per dtype, one choice per power-of-two size bucket: bucket b holds
 * sizes in (2^(b-1), 2^b] bytes, so a pick is one count-leading-zeros and one load. */
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
  symcoll_algo_t forced_algo;    /* SYMCOLL_ALGO */
  symcoll__tune_t tune[SYMCOLL_NUM_DTYPES];
  uint64_t coll_seq;             /* collectives issued on this rank */
};

/* Bounded waiting for a peer. Spin, yield, check abort, deadline and peers' liveness. */
typedef struct symcoll__waiter {
  symcoll_comm_t comm;
  int peer; /* the rank waited for (its death ends the wait); -1: any */
  uint64_t deadline_ns;
  uint64_t next_peer_check_ns;
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

/* ---- bootstrap (bootstrap.c) and thread teams (team.c) ------------------------------- */
SYMCOLL_HIDDEN symcoll_status_t symcoll__bootstrap_init(symcoll_comm_t comm);
SYMCOLL_HIDDEN symcoll_status_t symcoll__team_init(int nranks, symcoll_comm_t *comms);
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
/* Parses a table (see docs/tuning.md) into comm->tune; rows for other backends or nranks
 * are skipped. Returns the number of rows used, or -1 on a syntax error (line in *line_p). */
SYMCOLL_HIDDEN int symcoll__tune_parse(symcoll_comm_t comm, const char *text, int *line_p);
/* Replaces every choice of `algo` by the choice for the next smaller size (two-shot if none). */
SYMCOLL_HIDDEN void symcoll__tune_drop_algo(symcoll_comm_t comm, symcoll_algo_t algo);

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
