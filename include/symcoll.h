/*
 * symcoll: low-latency collectives over symmetric memory.
 *
 * One public header. Every handle is opaque; every function returns a
 * symcoll_status_t (SYMCOLL_OK == 0, errors are negative) unless noted.
 * Output parameters come last, are suffixed _p, and are written only on success.
 */
#ifndef SYMCOLL_H
#define SYMCOLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SYMCOLL_BUILDING) && defined(__GNUC__)
#define SYMCOLL_API __attribute__((visibility("default")))
#else
#define SYMCOLL_API
#endif

#define SYMCOLL_VERSION_MAJOR 0
#define SYMCOLL_VERSION_MINOR 2
#define SYMCOLL_VERSION_PATCH 0
#define SYMCOLL_VERSION_CODE \
  (SYMCOLL_VERSION_MAJOR * 10000 + SYMCOLL_VERSION_MINOR * 100 + SYMCOLL_VERSION_PATCH)

/** Most ranks one communicator may have (ranks of one host). */
#define SYMCOLL_MAX_RANKS 64
/** `device` value of a CPU rank. */
#define SYMCOLL_DEVICE_HOST (-1)

/*
 * Status codes, as one list: X(name, value, description).
 * The string table behind symcoll_status_string() is generated from it.
 */
#define SYMCOLL_STATUS_MAP(X)                                                        \
  X(OK, 0, "success")                                                                \
  X(ERR_INVALID_ARGUMENT, -1, "invalid argument")                                    \
  X(ERR_UNSUPPORTED, -2, "operation not supported on this communicator or machine")  \
  X(ERR_SYSTEM, -3, "system call failed")                                            \
  X(ERR_CUDA, -4, "CUDA error")                                                      \
  X(ERR_NO_MEMORY, -5, "out of memory")                                              \
  X(ERR_TIMEOUT, -6, "timed out waiting for a peer")                                 \
  X(ERR_PEER_LOST, -7, "a peer rank exited or closed its connection")                \
  X(ERR_ABORTED, -8, "communicator was aborted")                                     \
  X(ERR_MISMATCH, -9, "ranks disagree on the arguments of a collective")             \
  X(ERR_INTERNAL, -10, "internal error")

typedef enum {
#define SYMCOLL__STATUS_ENUM(name, value, text) SYMCOLL_##name = value,
  SYMCOLL_STATUS_MAP(SYMCOLL__STATUS_ENUM)
#undef SYMCOLL__STATUS_ENUM
} symcoll_status_t;

typedef enum {
  SYMCOLL_FLOAT32 = 0,
  SYMCOLL_FLOAT16 = 1,
  SYMCOLL_BFLOAT16 = 2,
  SYMCOLL_NUM_DTYPES
} symcoll_dtype_t;

typedef enum { SYMCOLL_SUM = 0, SYMCOLL_MAX = 1, SYMCOLL_MIN = 2, SYMCOLL_NUM_OPS } symcoll_op_t;

typedef enum {
  SYMCOLL_ALGO_AUTO = 0,     /* chosen per size from the tuning table */
  SYMCOLL_ALGO_ONE_SHOT = 1, /* every rank reads every peer and reduces: O(n*S) reads */
  SYMCOLL_ALGO_TWO_SHOT = 2, /* reduce-scatter then all-gather: O(2*S) traffic */
  SYMCOLL_ALGO_ONE_SHOT_DB = 3, /* one-shot through double-buffered staging: no trailing
                                   barrier (GPU); on CPU ranks the same as ONE_SHOT */
  SYMCOLL_ALGO_LAMPORT = 4,  /* barrier-free one-shot (GPU): every rank writes its input into
                                every peer's buffer, pre-filled with a sentinel, and each rank
                                polls its own buffer; three rotating buffers. One 4-byte
                                pattern is the sentinel: an fp16/bf16 input of -0.0 arrives as
                                +0.0, and an fp32 input of bits 0x80008000 (-4.6e-41) as -0.0.
                                On CPU ranks the same as ONE_SHOT. */
  SYMCOLL_ALGO_NCCL = 5,     /* through the NCCL communicator this one holds (SYMCOLL_NCCL);
                                UNSUPPORTED where it holds none */
  SYMCOLL_NUM_ALGOS
} symcoll_algo_t;

typedef struct symcoll_comm *symcoll_comm_t; /* opaque */
typedef struct symcoll_mem *symcoll_mem_t;   /* opaque */

/** Communicator configuration. Initialise with symcoll_config_init(). */
typedef struct {
  size_t struct_size;       /* sizeof(symcoll_config_t); lets the struct grow compatibly */
  const char *job_id;       /* names the rendezvous; identical on every rank (<= 64 chars) */
  int rank;                 /* 0 <= rank < nranks */
  int nranks;               /* 1 <= nranks <= SYMCOLL_MAX_RANKS */
  int device;               /* CUDA ordinal, or SYMCOLL_DEVICE_HOST for a CPU rank */
  size_t workspace_bytes;   /* symmetric scratch for non-symmetric inputs; 0 = default */
  int timeout_ms;           /* bound on every wait for a peer; 0 = SYMCOLL_TIMEOUT_MS (30000) */
} symcoll_config_t;

/** Per-call options of symcoll_all_reduce_ex(). Initialise with symcoll_coll_opts_init(). */
typedef struct {
  size_t struct_size;       /* sizeof(symcoll_coll_opts_t) */
  symcoll_algo_t algo;      /* SYMCOLL_ALGO_AUTO: the tuning table decides */
  int blocks;               /* GPU: grid size, 0 = tuned; ignored on CPU */
  int threads;              /* GPU: threads per block, 0 = tuned; ignored on CPU */
  size_t round_bytes;       /* GPU: bytes per rank a kernel stages per round (a multiple of 256,
                               capped by the algorithm's buffer), 0 = tuned; ignored on CPU.
                               Added in 0.2: callers built with the older, shorter struct
                               (struct_size without it) keep working. */
} symcoll_coll_opts_t;

/* ---- status and version ------------------------------------------------ */

/** Name and description of a status ("SYMCOLL_ERR_TIMEOUT: timed out ..."). Never NULL. */
SYMCOLL_API const char *symcoll_status_string(symcoll_status_t status);
/** Human name of a dtype / op / algo ("bf16", "sum", "oneshot"); "unknown" if out of range. */
SYMCOLL_API const char *symcoll_dtype_name(symcoll_dtype_t dtype);
SYMCOLL_API const char *symcoll_op_name(symcoll_op_t op);
SYMCOLL_API const char *symcoll_algo_name(symcoll_algo_t algo);
/** Size in bytes of one element of dtype, 0 if unknown. */
SYMCOLL_API size_t symcoll_dtype_size(symcoll_dtype_t dtype);
/** SYMCOLL_VERSION_CODE of the library actually loaded. */
SYMCOLL_API int symcoll_version(void);

/* ---- communicators ------------------------------------------------------ */

/** Fills cfg with defaults: struct_size set, job_id NULL, rank 0, nranks 1, host device. */
SYMCOLL_API void symcoll_config_init(symcoll_config_t *cfg);

/**
 * Creates the communicator of one rank (process mode: one process per rank).
 * Collective over the nranks ranks that pass the same job_id; they rendezvous
 * over an abstract AF_UNIX socket named from the user id and job_id (nothing on disk).
 * Errors: INVALID_ARGUMENT (bad config, wrong struct_size), MISMATCH (ranks disagree on
 * nranks or device kind, or two ranks claim one rank), TIMEOUT, PEER_LOST, SYSTEM,
 * UNSUPPORTED (devices that cannot reach each other), CUDA.
 */
SYMCOLL_API symcoll_status_t symcoll_comm_create(const symcoll_config_t *cfg,
                                                 symcoll_comm_t *comm_p);

/**
 * Like symcoll_comm_create, with rank/nranks/job id read from the environment:
 * SYMCOLL_RANK, SYMCOLL_NRANKS, SYMCOLL_JOB_ID; else torchrun (LOCAL_RANK,
 * LOCAL_WORLD_SIZE, TORCHELASTIC_RUN_ID or MASTER_ADDR:MASTER_PORT); else Open MPI
 * (OMPI_COMM_WORLD_LOCAL_RANK/SIZE, OMPI_MCA_orte_hnp_uri or OMPI_MCA_ess_base_jobid);
 * else Slurm (SLURM_LOCALID, SLURM_NTASKS_PER_NODE or SLURM_NTASKS, SLURM_JOB_ID.SLURM_STEP_ID).
 * device: CUDA ordinal, SYMCOLL_DEVICE_HOST, or -2 to use the local rank as the ordinal.
 */
#define SYMCOLL_DEVICE_LOCAL_RANK (-2)
SYMCOLL_API symcoll_status_t symcoll_comm_create_from_env(int device, symcoll_comm_t *comm_p);

/**
 * Thread mode: creates nranks communicators driven by one process (like ncclCommInitAll).
 * devices[i] is rank i's device (all CUDA ordinals, or all SYMCOLL_DEVICE_HOST); NULL means
 * all host. Each comms[i] must then be used by its own thread for collectives.
 * When several ranks share a GPU, set CUDA_DEVICE_MAX_CONNECTIONS=32 before the process starts
 * CUDA: with the default 8 hardware queues, two ranks' streams can share one, and a rank's
 * work then waits behind a peer's waiting kernel until it times out (a WARN says so).
 */
SYMCOLL_API symcoll_status_t symcoll_comm_create_all(int nranks, const int *devices,
                                                     symcoll_comm_t *comms);

/** Releases the communicator. Not collective; frees any symcoll_mem still allocated on it.
 * Destroy a rank only once its peers no longer run collectives with it (or after an abort):
 * peers' kernels may still read its memory. In process mode a peer whose process has exited
 * is a lost peer to those still running, even after a clean destroy: to end a job without
 * peers' symcoll_comm_check saying PEER_LOST, call symcoll_comm_barrier first (the role
 * ncclCommFinalize plays for NCCL). */
SYMCOLL_API symcoll_status_t symcoll_comm_destroy(symcoll_comm_t comm);

/**
 * Makes every wait of this rank (bootstrap, CPU collectives) return SYMCOLL_ERR_ABORTED
 * promptly. Safe to call from any thread, also while another thread is inside a call.
 * The communicator can only be destroyed afterwards.
 */
SYMCOLL_API symcoll_status_t symcoll_comm_abort(symcoll_comm_t comm);

/**
 * Returns the communicator's asynchronous error: a GPU kernel that timed out waiting for a
 * peer records it (and the peer) instead of spinning forever; in process mode a watcher
 * thread reports a peer's death (PEER_LOST) even while no call is waiting. SYMCOLL_OK if none.
 */
SYMCOLL_API symcoll_status_t symcoll_comm_check(symcoll_comm_t comm);

/**
 * A host-side barrier of the communicator's ranks over its bootstrap channel (sockets in
 * process mode, shared memory in thread mode); it touches no GPU. Collective. Use it to
 * order set-up: in thread mode, a cudaMalloc or cudaFree on one rank's thread while a peer's
 * kernel already waits in a collective can stall until that kernel times out (the same holds
 * for NCCL), so allocate on every rank, then barrier, then start the collectives.
 */
SYMCOLL_API symcoll_status_t symcoll_comm_barrier(symcoll_comm_t comm);

SYMCOLL_API int symcoll_comm_rank(symcoll_comm_t comm);
SYMCOLL_API int symcoll_comm_nranks(symcoll_comm_t comm);
SYMCOLL_API int symcoll_comm_device(symcoll_comm_t comm);

/* ---- symmetric memory ----------------------------------------------------- */

/**
 * Collective: every rank allocates `bytes` (the same on every rank) that every peer maps.
 * CPU ranks: memfd shared memory; GPU ranks: CUDA VMM memory. Memory is zeroed.
 */
SYMCOLL_API symcoll_status_t symcoll_mem_alloc(symcoll_comm_t comm, size_t bytes,
                                               symcoll_mem_t *mem_p);
/** Collective: unmaps and releases the allocation on every rank. */
SYMCOLL_API symcoll_status_t symcoll_mem_free(symcoll_mem_t mem);
/** This rank's (rank == own rank) or a peer's mapping of mem; NULL if rank is out of range. */
SYMCOLL_API void *symcoll_mem_ptr(symcoll_mem_t mem, int rank);
SYMCOLL_API size_t symcoll_mem_size(symcoll_mem_t mem);

/**
 * What a kernel needs to reach every peer's part of a symmetric allocation: pass it *by value*
 * as a kernel argument (no pointer tensor, no extra launch). See symcoll_device.cuh.
 */
typedef struct {
  int rank, nranks;
  void *buf[SYMCOLL_MAX_RANKS];      /* peer r's buffer, as mapped in this rank */
  uint32_t *pad[SYMCOLL_MAX_RANKS];  /* peer r's signal pad: pad_slots x SYMCOLL_MAX_RANKS words */
  uint32_t pad_slots;                /* barrier slots (blocks) available */
  uint32_t *error;                   /* communicator's async error word (host-mapped) */
  uint64_t timeout_ns;               /* bound for the *_timeout waits */
} symcoll_device_view_t;

/* The async error word of view.error: zero while no error; else bit 31 set, bits 0..7 =
 * -status, 8..15 = the rank waited for, 16..23 = the rank that gave up (0xff: not a wait). */
#define SYMCOLL_DEV_ERR_WORD(status, peer, rank) \
  (0x80000000u | ((uint32_t)(-(int)(status)) & 0xffu) | (((uint32_t)(peer) & 0xffu) << 8) | \
   (((uint32_t)(rank) & 0xffu) << 16))

/** Fills *view_p for a GPU allocation. UNSUPPORTED for CPU communicators. */
SYMCOLL_API symcoll_status_t symcoll_mem_device_view(symcoll_mem_t mem,
                                                     symcoll_device_view_t *view_p);

/* ---- collectives ---------------------------------------------------------------------- */

/**
 * recv[i] = op over ranks of send[i], for 0 <= i < count. send == recv is in place.
 * fp16/bf16 accumulate in fp32; every rank gets bit-identical results.
 * GPU: enqueues on stream (cudaStream_t, NULL = legacy default stream), never synchronises
 * the host, launches one kernel (lamport: one per slot of 1 MiB per rank; nccl: NCCL's own),
 * may be captured in a CUDA graph.
 * CPU: stream must be NULL; returns when recv holds the result.
 * count == 0 returns SYMCOLL_OK and does nothing. On an error nothing is written.
 */
SYMCOLL_API symcoll_status_t symcoll_all_reduce(symcoll_comm_t comm, const void *send,
                                                void *recv, size_t count,
                                                symcoll_dtype_t dtype, symcoll_op_t op,
                                                void *stream);

SYMCOLL_API void symcoll_coll_opts_init(symcoll_coll_opts_t *opts);
/**
 * symcoll_all_reduce with per-call options (a forced algorithm, a GPU launch shape); opts may
 * be NULL. Every rank must pass the same options for the same call (SYMCOLL_CHECK=1 verifies).
 * UNSUPPORTED (nothing written) for an algorithm symcoll_algo_supported refuses.
 */
SYMCOLL_API symcoll_status_t symcoll_all_reduce_ex(symcoll_comm_t comm, const void *send,
                                                   void *recv, size_t count,
                                                   symcoll_dtype_t dtype, symcoll_op_t op,
                                                   void *stream,
                                                   const symcoll_coll_opts_t *opts);

/**
 * The algorithm symcoll_all_reduce would use for `count` elements of `dtype` on this
 * communicator (the same on every rank: all ranks use rank 0's tuning table), written to
 * *algo_p. SYMCOLL_ALGO, when set, is taken into account. With one rank and nothing forced,
 * the call itself is a copy (or nothing, in place); this still names the table's row.
 */
SYMCOLL_API symcoll_status_t symcoll_all_reduce_algo(symcoll_comm_t comm, size_t count,
                                                     symcoll_dtype_t dtype,
                                                     symcoll_algo_t *algo_p);

/**
 * Whether this communicator can run `algo`: SYMCOLL_OK, or SYMCOLL_ERR_UNSUPPORTED (NCCL
 * where no NCCL communicator is held, e.g. CPU ranks or ranks sharing a GPU), or
 * INVALID_ARGUMENT for an unknown value. The answer is the same on every rank.
 */
SYMCOLL_API symcoll_status_t symcoll_algo_supported(symcoll_comm_t comm, symcoll_algo_t algo);

/* ---- environment knobs ------------------------------------------------------------------- */

/** Calls fn once per SYMCOLL_* knob with its name, default and help text. */
SYMCOLL_API void symcoll_env_foreach(void (*fn)(const char *name, const char *dflt,
                                                const char *help, void *arg),
                                     void *arg);

#ifdef __cplusplus
}
#endif
#endif /* SYMCOLL_H */
