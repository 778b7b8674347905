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
#define SYMCOLL_VERSION_MINOR 5
#define SYMCOLL_VERSION_PATCH 0
#define SYMCOLL_VERSION_CODE (SYMCOLL_VERSION_MAJOR * 10000 + SYMCOLL_VERSION_MINOR * 100 + SYMCOLL_VERSION_PATCH)

/** Most ranks one communicator may have, all its nodes together (a CUDA communicator of one
 * node: at most 16, see symcoll_comm_create). */
#define SYMCOLL_MAX_RANKS 64
/** `device` value of a CPU rank. */
#define SYMCOLL_DEVICE_HOST (-1)

/*
 * Status codes, as one list: X(name, value, description).
 * The string table behind symcoll_status_string() is generated from it.
 */
#define SYMCOLL_STATUS_MAP(X)                                                                 \
  X(OK, 0, "success")                                                                         \
  X(ERR_INVALID_ARGUMENT, -1, "invalid argument")                                             \
  X(ERR_UNSUPPORTED, -2, "operation not supported on this communicator or machine")           \
  X(ERR_SYSTEM, -3, "system call failed")                                                     \
  X(ERR_CUDA, -4, "CUDA error")                                                               \
  X(ERR_NO_MEMORY, -5, "out of memory")                                                       \
  X(ERR_TIMEOUT, -6, "timed out waiting for a peer")                                          \
  X(ERR_PEER_LOST, -7, "a peer rank exited or closed its connection")                         \
  X(ERR_ABORTED, -8, "communicator was aborted")                                              \
  X(ERR_MISMATCH, -9, "ranks disagree: on a collective's arguments, or on who is in the job") \
  X(ERR_INTERNAL, -10, "internal error")

typedef enum {
#define SYMCOLL__STATUS_ENUM(name, value, text) SYMCOLL_##name = value,
  SYMCOLL_STATUS_MAP(SYMCOLL__STATUS_ENUM)
#undef SYMCOLL__STATUS_ENUM
} symcoll_status_t;

/* Element types, NCCL's set. Every collective takes every type: reductions combine floating
 * types narrower than 32 bits in fp32 (fp64 in fp64) and integers in their own type (a sum wraps
 * around, as in C unsigned arithmetic); the result is rounded back to nearest even, fp8 with
 * saturation to the largest finite value (CUDA's __NV_SATFINITE). Values 0-2 are those of 0.1. */
typedef enum {
  SYMCOLL_FLOAT32 = 0,
  SYMCOLL_FLOAT16 = 1,
  SYMCOLL_BFLOAT16 = 2,
  SYMCOLL_INT8 = 3,
  SYMCOLL_UINT8 = 4,
  SYMCOLL_INT32 = 5,
  SYMCOLL_UINT32 = 6,
  SYMCOLL_INT64 = 7,
  SYMCOLL_UINT64 = 8,
  SYMCOLL_FLOAT64 = 9,
  SYMCOLL_FLOAT8_E4M3 = 10, /* OCP fp8: 4 exponent bits, 3 mantissa bits, no infinity */
  SYMCOLL_FLOAT8_E5M2 = 11, /* OCP fp8: 5 exponent bits, 2 mantissa bits */
  SYMCOLL_NUM_DTYPES
} symcoll_dtype_t;

/*
 * Reduction ops (NCCL's ncclRedOp_t of the same names). Every op combines in the accumulation
 * type of the dtype (above), in rank order. PROD: integers wrap around like SUM. AVG: the SUM,
 * then one division by the number of ranks in the accumulation type (integers: C's division,
 * truncating toward zero, of the wrapped-around sum), then rounded back once, as NCCL's
 * ncclAvg defines it.
 */
typedef enum {
  SYMCOLL_SUM = 0,
  SYMCOLL_MAX = 1,
  SYMCOLL_MIN = 2,
  SYMCOLL_PROD = 3,
  SYMCOLL_AVG = 4,
  SYMCOLL_NUM_OPS
} symcoll_op_t;

/*
 * The collectives, as one list: X(name, value, string). Values are ABI: a new collective is
 * appended with the next value and none is ever renumbered, whether it is plain or fused with
 * a GEMM (a property: symcoll_coll_is_fused). symcoll_coll_name() is generated from it.
 */
#define SYMCOLL_COLL_MAP(X)                                                                \
  X(ALL_REDUCE, 0, "all_reduce")                                                           \
  X(ALL_GATHER, 1, "all_gather")                                                           \
  X(REDUCE_SCATTER, 2, "reduce_scatter")                                                   \
  X(ALL_GATHER_MATMUL, 3, "all_gather_matmul")         /* symcoll_all_gather_matmul */     \
  X(MATMUL_REDUCE_SCATTER, 4, "matmul_reduce_scatter") /* symcoll_matmul_reduce_scatter */ \
  X(BROADCAST, 5, "broadcast")                                                             \
  X(REDUCE, 6, "reduce")                                                                   \
  X(ALL_TO_ALL, 7, "all_to_all")                                                           \
  X(ALL_REDUCE_RMSNORM, 8, "all_reduce_rmsnorm")         /* symcoll_all_reduce_rmsnorm */  \
  X(REDUCE_SCATTER_RMSNORM, 9, "reduce_scatter_rmsnorm") /* symcoll_reduce_scatter_rmsnorm */

/* clang-format off */
#define SYMCOLL__COLL_ENUM(name, value, str) SYMCOLL_COLL_##name = value,
#define SYMCOLL__COLL_COUNT(name, value, str) +1
typedef enum {
  SYMCOLL_COLL_MAP(SYMCOLL__COLL_ENUM)
  SYMCOLL_NUM_COLL_KINDS = 0 SYMCOLL_COLL_MAP(SYMCOLL__COLL_COUNT), /* one past the last */
  SYMCOLL_NUM_COLLS = 3 /* deprecated (0.6): the plain collectives of 0.5 were 0..2; new
                           ones are appended after the fused ones: ask symcoll_coll_is_fused */
} symcoll_coll_t;
#undef SYMCOLL__COLL_ENUM
#undef SYMCOLL__COLL_COUNT
/* clang-format on */

/*
 * The algorithms, as one list: X(name, value, string, what it is). Values are ABI, appended
 * only; symcoll_algo_name() and symcoll_algo_help() are generated from it. Which collective
 * runs which: symcoll_coll_algo_supported(); the protocols: docs/protocols.md.
 */
#define SYMCOLL_ALGO_MAP(X)                                                                                       \
  X(AUTO, 0, "auto", "chosen per size from the tuning table")                                                     \
  X(ONE_SHOT, 1, "oneshot",                                                                                       \
    "all_reduce, reduce, all_reduce_rmsnorm: every rank (reduce: the root) reads every peer's input and reduces") \
  X(TWO_SHOT, 2, "twoshot", "all_reduce, all_reduce_rmsnorm: reduce-scatter, then all-gather (2 x S traffic)")    \
  X(ONE_SHOT_DB, 3, "oneshot_db",                                                                                 \
    "all_reduce: one-shot through two alternating staging halves, no "                                            \
    "trailing barrier (GPU; on CPU ranks oneshot)")                                                               \
  X(LAMPORT, 4, "lamport",                                                                                        \
    "barrier-free (GPU): the data carries its own arrival (sentinel-cleared buffers for all_reduce and "          \
    "all_reduce_rmsnorm, 16-byte LL packets otherwise; CPU ranks: oneshot/pull)")                                 \
  X(NCCL, 5, "nccl", "through the NCCL communicator this one holds (SYMCOLL_NCCL)")                               \
  X(PULL, 6, "pull",                                                                                              \
    "all_gather, reduce_scatter, reduce_scatter_rmsnorm, broadcast, all_to_all: each rank reads its peers' "      \
    "blocks")                                                                                                     \
  X(PUSH, 7, "push", "all_gather, all_to_all: each rank stores its blocks into its peers")                        \
  X(COPY_ENGINE, 8, "copy_engine",                                                                                \
    "all_gather, broadcast, all_to_all (GPU): cudaMemcpyAsync from peers' symmetric buffers, "                    \
    "no SM used")                                                                                                 \
  X(OVERLAP, 9, "overlap", "GEMM operations: one chunk's communication beside another's GEMM")                    \
  X(SEQUENTIAL, 10, "sequential",                                                                                 \
    "fused operations unfused: the collective, then one GEMM (or the reverse); all_reduce (reduce_scatter), "     \
    "then add + norm")                                                                                            \
  X(HIERARCHICAL, 11, "hierarchical", "across nodes: node-local steps and the engine between nodes")              \
  X(ENGINE, 12, "engine", "across nodes: the whole call through the engine")

/* clang-format off */
#define SYMCOLL__ALGO_ENUM(name, value, str, help) SYMCOLL_ALGO_##name = value,
#define SYMCOLL__ALGO_COUNT(name, value, str, help) +1
typedef enum {
  SYMCOLL_ALGO_MAP(SYMCOLL__ALGO_ENUM)
  SYMCOLL_NUM_ALGOS = 0 SYMCOLL_ALGO_MAP(SYMCOLL__ALGO_COUNT) /* one past the last */
} symcoll_algo_t;
#undef SYMCOLL__ALGO_ENUM
#undef SYMCOLL__ALGO_COUNT
/* clang-format on */
/* What LAMPORT's all_reduce changes: one 4-byte pattern marks an empty word, so an fp16/bf16
 * input of -0.0 arrives as +0.0, and an fp32 input of bits 0x80008000 (-4.6e-41) as -0.0. */

typedef struct symcoll_comm *symcoll_comm_t; /* opaque */
typedef struct symcoll_mem *symcoll_mem_t;   /* opaque */

/** Communicator configuration. Initialise with symcoll_config_init(). */
typedef struct {
  size_t struct_size;     /* sizeof(symcoll_config_t); lets the struct grow compatibly */
  const char *job_id;     /* names the rendezvous; identical on every rank (<= 64 chars) */
  int rank;               /* 0 <= rank < nranks */
  int nranks;             /* 1 <= nranks <= SYMCOLL_MAX_RANKS */
  int device;             /* CUDA ordinal, or SYMCOLL_DEVICE_HOST for a CPU rank */
  size_t workspace_bytes; /* symmetric scratch for non-symmetric inputs; 0 = default */
  int timeout_ms;         /* bound on every wait for a peer; 0 = SYMCOLL_TIMEOUT_MS (30000) */
} symcoll_config_t;

/** Per-call options of every collective's _ex variant. Initialise with symcoll_coll_opts_init(). */
typedef struct {
  size_t struct_size;  /* sizeof(symcoll_coll_opts_t) */
  symcoll_algo_t algo; /* SYMCOLL_ALGO_AUTO: the tuning table decides; else one of the
                          collective's algorithms (symcoll_coll_algo_supported) */
  int blocks;          /* GPU: grid size, 0 = tuned; ignored on CPU */
  int threads;         /* GPU: threads per block, 0 = tuned; ignored on CPU */
  size_t round_bytes;  /* GPU: bytes per rank a kernel stages per round (a multiple of 256,
                          capped by the algorithm's buffer), 0 = tuned; ignored on CPU.
                          Added in 0.2: callers built with the older, shorter struct
                          (struct_size without it) keep working. */
  const void *scale;   /* NULL, or one element of the call's dtype by which this rank's input
                          is multiplied before it is summed (NCCL's ncclRedOpCreatePreMulSum:
                          each rank its own scalar): op SYMCOLL_SUM of all_reduce,
                          reduce_scatter and reduce only. The product is SYMCOLL_PROD's (in the
                          dtype's combine type, rounded once), then the sum as usual. Host
                          memory read during the call, or with scale_on_device GPU memory read
                          when the call runs (a CUDA graph replays the current value). */
  int scale_on_device; /* GPU communicators: scale points to device memory */
                       /* scale and scale_on_device: added in 0.6 (older struct sizes work). */
} symcoll_coll_opts_t;

/* ---- status and version ------------------------------------------------ */

/** Name and description of a status ("SYMCOLL_ERR_TIMEOUT: timed out ..."). Never NULL. */
SYMCOLL_API const char *symcoll_status_string(symcoll_status_t status);
/** Why the last call that failed on this thread failed, in words: the message of the last
 * warning symcoll logged on this thread ("all_reduce: send 0x... is not aligned to ..."),
 * kept whatever SYMCOLL_DEBUG says; "" if there was none (the role of ncclGetLastError). The
 * string stays valid until the next warning on this thread. */
SYMCOLL_API const char *symcoll_last_error(void);
/** Human name of a dtype / op / algo ("bf16", "sum", "oneshot"); "unknown" if out of range. */
SYMCOLL_API const char *symcoll_dtype_name(symcoll_dtype_t dtype);
SYMCOLL_API const char *symcoll_op_name(symcoll_op_t op);
SYMCOLL_API const char *symcoll_algo_name(symcoll_algo_t algo);
/** One line on what the algorithm is (SYMCOLL_ALGO_MAP); "unknown" if out of range. */
SYMCOLL_API const char *symcoll_algo_help(symcoll_algo_t algo);
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
SYMCOLL_API symcoll_status_t symcoll_comm_create(const symcoll_config_t *cfg, symcoll_comm_t *comm_p);

/**
 * Like symcoll_comm_create, with rank/nranks/job id read from the environment:
 * SYMCOLL_RANK, SYMCOLL_NRANKS, SYMCOLL_JOB_ID; else torchrun (LOCAL_RANK,
 * LOCAL_WORLD_SIZE, TORCHELASTIC_RUN_ID or MASTER_ADDR:MASTER_PORT); else Open MPI
 * (OMPI_COMM_WORLD_LOCAL_RANK/SIZE, OMPI_MCA_orte_hnp_uri or OMPI_MCA_ess_base_jobid);
 * else Slurm (SLURM_LOCALID, SLURM_NTASKS_PER_NODE or SLURM_NTASKS, SLURM_JOB_ID.SLURM_STEP_ID).
 * The job id names the rendezvous, so two jobs at once must differ in it: each launcher's is
 * its own run's; with SYMCOLL_RANK and no SYMCOLL_JOB_ID it is "ppid.<the parent's pid>", so
 * ranks started by one script or shell meet, and two such jobs started at once do not.
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
SYMCOLL_API symcoll_status_t symcoll_comm_create_all(int nranks, const int *devices, symcoll_comm_t *comms);

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
 * peer, or met a peer in another call, records it (and the peer) instead of spinning forever
 * or writing anything; in process mode a watcher thread reports a peer's death (PEER_LOST)
 * even while no call is waiting. SYMCOLL_OK if none.
 *
 * A failed communicator stays failed: after a TIMEOUT, PEER_LOST, MISMATCH from a GPU kernel
 * or ABORTED, every later call on it returns that status at once (a GPU call also finds a
 * kernel's failure by itself, at the next call, without symcoll_comm_check). Its peers may be
 * anywhere in their calls, so the communicator cannot be resynchronised: destroy it (after
 * symcoll_comm_abort if a call may still be waiting), and make a new one to go on, as with
 * ncclCommAbort. A CPU call refused for a bad argument, or that met a peer in another call
 * (MISMATCH on CPU ranks), leaves the communicator usable.
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

/** `color` of a rank that joins no group in symcoll_comm_split (NCCL_SPLIT_NOCOLOR). */
#define SYMCOLL_SPLIT_NOCOLOR (-1)

/**
 * Splits comm into groups, as ncclCommSplit: collective over every rank of comm; ranks that
 * pass the same color >= 0 form a new communicator, ordered by key (ties by their rank in
 * comm); a rank passing SYMCOLL_SPLIT_NOCOLOR joins none and gets NULL in *newcomm_p. Each
 * new communicator has its own workspace, signal pads and rendezvous, so groups never
 * disturb each other and may run collectives at the same time. Its ranks keep comm's
 * device, timeout and workspace size. Works in process and thread mode (in thread mode each
 * rank's thread calls it, as for every collective); a new communicator may be split again.
 * Errors: INVALID_ARGUMENT (color < -1, NULL newcomm_p), and those of symcoll_comm_create.
 */
SYMCOLL_API symcoll_status_t symcoll_comm_split(symcoll_comm_t comm, int color, int key, symcoll_comm_t *newcomm_p);

SYMCOLL_API int symcoll_comm_rank(symcoll_comm_t comm);
SYMCOLL_API int symcoll_comm_nranks(symcoll_comm_t comm);
SYMCOLL_API int symcoll_comm_device(symcoll_comm_t comm);

/* ---- jobs across nodes ------------------------------------------------------------------------ *
 *
 * A communicator may span hosts. Inside each node it is an ordinary communicator over the
 * node's ranks (symcoll_comm_local); between nodes, among the ranks of equal local rank, an
 * engine the job already runs carries the traffic: NCCL for GPU ranks, MPI for CPU ranks
 * (libsymcoll_mpi, opened at run time). symcoll opens no sockets of its own between hosts.
 * Collectives keep their semantics and global rank order; by default (SYMCOLL_ALGO_AUTO) they
 * run hierarchically: all_reduce = node-local reduce_scatter, all_reduce of each rank's shard
 * through the engine, node-local all_gather (a count that the node's ranks do not divide
 * evenly sends its last count % local_nranks elements through a node-local all_reduce and the
 * engine); all_gather = the engine gathers equal local ranks' blocks, then one node-local
 * all_gather per node; reduce_scatter mirrors it; broadcast = the engine among the ranks of the
 * root's local rank, then node-local broadcasts; reduce = a node-local reduce to the rank of
 * the root's local rank, then the engine's reduce to the root; all_to_all = the engine moves
 * every node's blocks for each other node, then a node-local exchange. SYMCOLL_AVG runs whole
 * through the engine (one division over all ranks). SYMCOLL_ALGO_ENGINE hands the whole call to
 * the engine over all ranks; the tuning table picks per size (rows name "NxL": nodes x ranks
 * per node). Floating types narrower than 32 bits are rounded once per level (as in NCCL).
 * Symmetric memory of such a communicator is node-local: symcoll_mem_ptr answers for the
 * ranks of this node only (NULL for others), and symcoll_mem_device_view describes the
 * node-local communicator. The GEMM operations and symcoll_comm_split are UNSUPPORTED there
 * (use them on symcoll_comm_local). Process mode only; every node holds the same number of
 * ranks; at most SYMCOLL_MAX_RANKS ranks in all.
 */
typedef enum {
  SYMCOLL_ENGINE_AUTO = 0,   /* NCCL for GPU ranks, MPI for CPU ranks */
  SYMCOLL_ENGINE_NCCL = 1,   /* libnccl.so.2, as SYMCOLL_ALGO_NCCL (GPU ranks only) */
  SYMCOLL_ENGINE_MPI = 2,    /* libsymcoll_mpi (SYMCOLL_MPI_LIB), CPU ranks */
  SYMCOLL_ENGINE_SYMCOLL = 3 /* nodes emulated on one host: a symcoll communicator (tests) */
} symcoll_engine_t;
/** "auto", "nccl", "mpi", "symcoll" (the names SYMCOLL_ENGINE takes); "unknown" if out of range. */
SYMCOLL_API const char *symcoll_engine_name(symcoll_engine_t engine);

/** Configuration of a communicator spanning nodes. Initialise with symcoll_job_config_init(). */
typedef struct {
  size_t struct_size;           /* sizeof(symcoll_job_config_t) */
  const char *job_id;           /* names the node-local rendezvous; identical on every rank */
  int rank, nranks;             /* in the whole job (MPI engine: -1 takes them from the MPI communicator) */
  int local_rank, local_nranks; /* on this node */
  int device;                   /* CUDA ordinal, or SYMCOLL_DEVICE_HOST */
  size_t workspace_bytes;       /* as in symcoll_config_t */
  int timeout_ms;               /* as in symcoll_config_t; also bounds every wait for the engine */
  symcoll_engine_t engine;
  /* MPI engine: the address of the MPI_Comm holding the job's ranks, in rank order (NULL:
   * MPI_COMM_WORLD; MPI is initialised if nobody has, and finalised at the last destroy). */
  const void *mpi_comm;
  /* NCCL engine: how ranks exchange a few bytes while it is set up (NCCL's unique ids, the
   * node layout): every rank's `bytes` from send land in recv in rank order; returns 0 on
   * success. NULL: through MPI's MPI_COMM_WORLD (libsymcoll_mpi), as under mpirun or srun. */
  int (*oob_allgather)(void *ctx, const void *send, void *recv, size_t bytes);
  void *oob_ctx;
} symcoll_job_config_t;

SYMCOLL_API void symcoll_job_config_init(symcoll_job_config_t *cfg);

/**
 * Creates this rank's communicator of a job spanning nodes. Collective over all the job's
 * ranks. The node layout is found (ranks that share a host and network namespace are one
 * node) and checked against local_rank / local_nranks; a job of one node gives an ordinary
 * communicator. symcoll_comm_create_from_env calls it when the launcher's global size exceeds
 * its local size (torchrun's RANK / WORLD_SIZE, Open MPI's OMPI_COMM_WORLD_RANK / SIZE,
 * Slurm's SLURM_PROCID / SLURM_NTASKS).
 * Errors: INVALID_ARGUMENT (bad config), UNSUPPORTED (no engine library, nodes of unequal size,
 * thread mode), MISMATCH (ranks disagree on the layout), and those of symcoll_comm_create and
 * of the engine (TIMEOUT, PEER_LOST, SYSTEM).
 */
SYMCOLL_API symcoll_status_t symcoll_comm_create_job(const symcoll_job_config_t *cfg, symcoll_comm_t *comm_p);

/** The node-local communicator of a communicator spanning nodes (owned by it: do not destroy);
 * comm itself for any other. NULL for NULL. */
SYMCOLL_API symcoll_comm_t symcoll_comm_local(symcoll_comm_t comm);
/** Number of nodes of comm (1 for a communicator of one host); -1 for NULL. */
SYMCOLL_API int symcoll_comm_nnodes(symcoll_comm_t comm);

/* ---- symmetric memory ----------------------------------------------------- */

/**
 * Collective: every rank allocates `bytes` (the same on every rank) that every peer maps.
 * CPU ranks: memfd shared memory; GPU ranks: CUDA VMM memory. Memory is zeroed.
 */
SYMCOLL_API symcoll_status_t symcoll_mem_alloc(symcoll_comm_t comm, size_t bytes, symcoll_mem_t *mem_p);
/**
 * Collective: unmaps and releases the allocation on every rank. A registration
 * (symcoll_mem_register) ends on this rank alone: its mappings of the peers' memory go, the
 * memory stays the caller's, no peer waits (no call on it may be in flight).
 */
SYMCOLL_API symcoll_status_t symcoll_mem_free(symcoll_mem_t mem);
/**
 * Collective: makes [ptr, ptr + bytes), memory this rank already has, symmetric: every peer maps
 * it, and collectives on buffers inside it run zero-copy as on symcoll_mem_alloc's (NCCL's
 * window registration). GPU ranks: ptr starts a CUDA VMM allocation whose handles can be shared
 * with other processes (symcoll_mem_alloc_shareable's, or NCCL's ncclMemAlloc's); bytes the same
 * on every rank (else MISMATCH). Where any rank's memory is not of that kind, every rank answers
 * UNSUPPORTED and nothing is mapped; CPU ranks: UNSUPPORTED. symcoll_mem_free ends it.
 */
SYMCOLL_API symcoll_status_t symcoll_mem_register(symcoll_comm_t comm, void *ptr, size_t bytes, symcoll_mem_t *mem_p);
/**
 * Device memory of GPU `device` that symcoll_mem_register can map for peers (CUDA VMM with
 * shareable handles, readable by the GPUs with peer access to it), as NCCL's ncclMemAlloc.
 * UNSUPPORTED in builds without CUDA. symcoll_mem_free_shareable releases it (INVALID_ARGUMENT
 * for a pointer it did not return).
 */
SYMCOLL_API symcoll_status_t symcoll_mem_alloc_shareable(int device, size_t bytes, void **ptr_p);
SYMCOLL_API symcoll_status_t symcoll_mem_free_shareable(void *ptr);
/** This rank's (rank == own rank) or a peer's mapping of mem; NULL if rank is out of range. */
SYMCOLL_API void *symcoll_mem_ptr(symcoll_mem_t mem, int rank);
SYMCOLL_API size_t symcoll_mem_size(symcoll_mem_t mem);

/**
 * What a kernel needs to reach every peer's part of a symmetric allocation: pass it *by value*
 * as a kernel argument (no pointer tensor, no extra launch). See symcoll_device.cuh.
 */
typedef struct {
  int rank, nranks;
  void *buf[SYMCOLL_MAX_RANKS];     /* peer r's buffer, as mapped in this rank */
  uint32_t *pad[SYMCOLL_MAX_RANKS]; /* peer r's signal pad: pad_slots x SYMCOLL_MAX_RANKS words */
  uint32_t pad_slots;               /* barrier slots (blocks) available */
  uint32_t *error;                  /* communicator's async error word (host-mapped) */
  uint64_t timeout_ns;              /* bound for the *_timeout waits */
} symcoll_device_view_t;

/* The async error word of view.error: zero while no error; else bit 31 set, bits 0..7 =
 * -status, 8..15 = the rank waited for, 16..23 = the rank that gave up (0xff: not a wait). */
#define SYMCOLL_DEV_ERR_WORD(status, peer, rank)                                          \
  (0x80000000u | ((uint32_t)(-(int)(status)) & 0xffu) | (((uint32_t)(peer)&0xffu) << 8) | \
   (((uint32_t)(rank)&0xffu) << 16))

/** Fills *view_p for a GPU allocation. UNSUPPORTED for CPU communicators. */
SYMCOLL_API symcoll_status_t symcoll_mem_device_view(symcoll_mem_t mem, symcoll_device_view_t *view_p);

/**
 * The symmetric allocation of comm that holds [ptr, ptr + bytes) on this rank, and the offset of
 * ptr in it; NULL (and 0) if none does. Collectives on such a buffer run zero-copy.
 */
SYMCOLL_API symcoll_mem_t symcoll_mem_lookup(symcoll_comm_t comm, const void *ptr, size_t bytes, size_t *offset_p);

/* ---- an allocator for frameworks ------------------------------------------------ *
 *
 * The two functions a framework's pluggable allocator calls (PyTorch: torch.cuda.MemPool over
 * torch.cuda.memory.CUDAPluggableAllocator(libsymcoll.so, "symcoll_pool_alloc",
 * "symcoll_pool_free"); the Python package's comm.mem_pool() sets it up). While a GPU
 * communicator is attached for its device, every block asked for is a symmetric allocation of it
 * (symcoll_mem_alloc), so tensors carved from it are zero-copy for its collectives.
 *
 * The rule that makes it safe: allocation and free are collective, so inside the pool every
 * rank must allocate (and free) the same sizes in the same order, as a framework running the same
 * code on every rank does. A rank that asks for another size fails every rank's allocation
 * (MISMATCH: the framework reports out of memory); tensors at different offsets on different
 * ranks are caught by the call signature (MISMATCH), never read at the wrong place.
 * One rank per process and device (process mode); thread-mode communicators: UNSUPPORTED.
 */
SYMCOLL_API symcoll_status_t symcoll_pool_attach(symcoll_comm_t comm);
SYMCOLL_API symcoll_status_t symcoll_pool_detach(symcoll_comm_t comm);
/** PyTorch's alloc signature: a block of `bytes` on `device` (NULL: none attached, or refused). */
SYMCOLL_API void *symcoll_pool_alloc(size_t bytes, int device, void *stream);
/** PyTorch's free signature: releases a block symcoll_pool_alloc returned (collective). */
SYMCOLL_API void symcoll_pool_free(void *ptr, size_t bytes, int device, void *stream);

/* ---- collectives ---------------------------------------------------------------------- *
 *
 * Every rank makes the same calls in the same order with the same arguments (count, dtype,
 * op, options). Where ranks are in different calls (a rank's call was refused locally, or
 * ranks disagree), no call returns SYMCOLL_OK with wrong data: every call carries a signature
 * (collective, count, dtype, op, algorithm) to its peers. CPU ranks compare it at their first
 * wait and return SYMCOLL_ERR_MISMATCH on both sides, writing nothing, and stay usable. GPU
 * kernels compare it wherever they meet a peer (the barrier value, the packet flag); a kernel
 * that meets another call records SYMCOLL_ERR_MISMATCH in the communicator's async error
 * (symcoll_comm_check), writes nothing, and the communicator refuses later calls, like after
 * any GPU-side error. The one exception is the all_reduce lamport kernel, which meets no peer:
 * there SYMCOLL_CHECK=1 compares every call's arguments on the host (a bootstrap exchange).
 */

/**
 * recv[i] = op over ranks of send[i], for 0 <= i < count. send == recv is in place.
 * Every rank gets bit-identical results (sources combined in rank order everywhere).
 * GPU: enqueues on stream (cudaStream_t, NULL = legacy default stream), never synchronises
 * the host, launches one kernel (lamport: one per slot of 1 MiB per rank; nccl: NCCL's own),
 * may be captured in a CUDA graph.
 * CPU: stream must be NULL; returns when recv holds the result.
 * count == 0 returns SYMCOLL_OK and does nothing. On an error nothing is written.
 */
SYMCOLL_API symcoll_status_t symcoll_all_reduce(symcoll_comm_t comm, const void *send, void *recv, size_t count,
                                                symcoll_dtype_t dtype, symcoll_op_t op, void *stream);

SYMCOLL_API void symcoll_coll_opts_init(symcoll_coll_opts_t *opts);
/**
 * symcoll_all_reduce with per-call options (a forced algorithm, a GPU launch shape); opts may
 * be NULL. Every rank must pass the same options for the same call.
 * UNSUPPORTED (nothing written) for an algorithm symcoll_coll_algo_supported refuses.
 */
SYMCOLL_API symcoll_status_t symcoll_all_reduce_ex(symcoll_comm_t comm, const void *send, void *recv, size_t count,
                                                   symcoll_dtype_t dtype, symcoll_op_t op, void *stream,
                                                   const symcoll_coll_opts_t *opts);

/**
 * recv holds nranks * sendcount elements: rank r's send block lands at recv + r * sendcount
 * (NCCL's ncclAllGather). In place when send == recv + rank * sendcount; any other overlap
 * of send and recv is refused. Any dtype (bytes are moved, not combined). GPU: one kernel
 * (copy_engine: copies only, no kernel), capturable; CPU: stream must be NULL.
 * sendcount == 0 returns SYMCOLL_OK and does nothing. On an error nothing is written.
 */
SYMCOLL_API symcoll_status_t symcoll_all_gather(symcoll_comm_t comm, const void *send, void *recv, size_t sendcount,
                                                symcoll_dtype_t dtype, void *stream);
SYMCOLL_API symcoll_status_t symcoll_all_gather_ex(symcoll_comm_t comm, const void *send, void *recv, size_t sendcount,
                                                   symcoll_dtype_t dtype, void *stream,
                                                   const symcoll_coll_opts_t *opts);

/**
 * send holds nranks * recvcount elements; rank r receives, in recv, op over ranks of
 * send[r * recvcount ... (r + 1) * recvcount) (NCCL's ncclReduceScatter). In place when
 * recv == send + rank * recvcount. Combined in rank order with the accumulation of
 * symcoll_dtype_t, so every rank's block is what symcoll_all_reduce would give there.
 */
SYMCOLL_API symcoll_status_t symcoll_reduce_scatter(symcoll_comm_t comm, const void *send, void *recv, size_t recvcount,
                                                    symcoll_dtype_t dtype, symcoll_op_t op, void *stream);
SYMCOLL_API symcoll_status_t symcoll_reduce_scatter_ex(symcoll_comm_t comm, const void *send, void *recv,
                                                       size_t recvcount, symcoll_dtype_t dtype, symcoll_op_t op,
                                                       void *stream, const symcoll_coll_opts_t *opts);

/**
 * root's count elements reach every rank's recv (NCCL's ncclBroadcast, same argument order).
 * send is read on root only (other ranks may pass NULL); in place when send == recv on root.
 * Any dtype (bytes are moved). On a rank other than root, recv must not overlap send.
 * root out of range: INVALID_ARGUMENT on every rank, nothing written.
 */
SYMCOLL_API symcoll_status_t symcoll_broadcast(symcoll_comm_t comm, const void *send, void *recv, size_t count,
                                               symcoll_dtype_t dtype, int root, void *stream);
SYMCOLL_API symcoll_status_t symcoll_broadcast_ex(symcoll_comm_t comm, const void *send, void *recv, size_t count,
                                                  symcoll_dtype_t dtype, int root, void *stream,
                                                  const symcoll_coll_opts_t *opts);

/**
 * root's recv[i] = op over ranks of send[i] (NCCL's ncclReduce, same argument order). recv is
 * written on root only (other ranks may pass NULL); in place when send == recv. The same
 * bits root would get from symcoll_all_reduce.
 */
SYMCOLL_API symcoll_status_t symcoll_reduce(symcoll_comm_t comm, const void *send, void *recv, size_t count,
                                            symcoll_dtype_t dtype, symcoll_op_t op, int root, void *stream);
SYMCOLL_API symcoll_status_t symcoll_reduce_ex(symcoll_comm_t comm, const void *send, void *recv, size_t count,
                                               symcoll_dtype_t dtype, symcoll_op_t op, int root, void *stream,
                                               const symcoll_coll_opts_t *opts);

/**
 * send and recv hold nranks blocks of count elements; block j of rank r's send lands in block
 * r of rank j's recv (NCCL's ncclAlltoAll). In place when send == recv; any other overlap is
 * refused. Any dtype. Zero-copy where send (pull) or recv (push) lies in a symmetric
 * allocation on every rank.
 */
SYMCOLL_API symcoll_status_t symcoll_all_to_all(symcoll_comm_t comm, const void *send, void *recv, size_t count,
                                                symcoll_dtype_t dtype, void *stream);
SYMCOLL_API symcoll_status_t symcoll_all_to_all_ex(symcoll_comm_t comm, const void *send, void *recv, size_t count,
                                                   symcoll_dtype_t dtype, void *stream,
                                                   const symcoll_coll_opts_t *opts);

/** "all_reduce", "all_gather", "reduce_scatter", "all_gather_matmul", "matmul_reduce_scatter",
 * "broadcast", "reduce", "all_to_all", "all_reduce_rmsnorm", "reduce_scatter_rmsnorm"
 * (SYMCOLL_COLL_MAP); "unknown" if out of range. */
SYMCOLL_API const char *symcoll_coll_name(symcoll_coll_t coll);
/** 1 if `coll` is fused with computation and has its own entry point (symcoll_all_gather_matmul,
 * symcoll_matmul_reduce_scatter, symcoll_all_reduce_rmsnorm, symcoll_reduce_scatter_rmsnorm), 0 if
 * it is a plain collective
 * (the send / recv / count form), -1 if out of range. */
SYMCOLL_API int symcoll_coll_is_fused(symcoll_coll_t coll);

/**
 * The algorithm the collective `coll` would use for a call with `count` (its count argument:
 * all_reduce count, all_gather sendcount, reduce_scatter recvcount) elements of `dtype` on
 * this communicator, written to *algo_p. The same on every rank (all ranks use rank 0's
 * tuning table); SYMCOLL_ALGO, when set, is taken into account. all_reduce_rmsnorm: by
 * rows x hidden elements; a call with fewer rows than ranks runs one-shot where this says
 * two-shot (two-shot shares out whole rows). reduce_scatter_rmsnorm: by rows (per rank) x
 * hidden, as reduce_scatter's recvcount.
 */
SYMCOLL_API symcoll_status_t symcoll_coll_algo(symcoll_comm_t comm, symcoll_coll_t coll, size_t count,
                                               symcoll_dtype_t dtype, symcoll_algo_t *algo_p);

/**
 * Whether this communicator can run `algo` for `coll`: SYMCOLL_OK, or SYMCOLL_ERR_UNSUPPORTED
 * (an algorithm of another collective; NCCL where no NCCL communicator is held; copy_engine
 * on CPU ranks), or INVALID_ARGUMENT for an unknown value. The same on every rank.
 */
SYMCOLL_API symcoll_status_t symcoll_coll_algo_supported(symcoll_comm_t comm, symcoll_coll_t coll, symcoll_algo_t algo);

/** symcoll_coll_algo for all_reduce (kept from 0.2). */
SYMCOLL_API symcoll_status_t symcoll_all_reduce_algo(symcoll_comm_t comm, size_t count, symcoll_dtype_t dtype,
                                                     symcoll_algo_t *algo_p);

/** symcoll_coll_algo_supported for all_reduce (kept from 0.2). */
SYMCOLL_API symcoll_status_t symcoll_algo_supported(symcoll_comm_t comm, symcoll_algo_t algo);

/* ---- collectives fused with a GEMM --------------------------------------------------------- *
 *
 * The two layers of tensor parallelism, with the communication overlapped with the GEMM.
 * Matrices are row-major and dense (leading dimension = columns); dtype is SYMCOLL_FLOAT32,
 * SYMCOLL_FLOAT16 or SYMCOLL_BFLOAT16 for every matrix, products accumulate in fp32 (fp32 inputs:
 * plain fp32, no TF32). GEMMs run in cuBLASLt on GPU ranks (libcublasLt.so opened at run time,
 * SYMCOLL_CUBLASLT_LIB) and in CBLAS on CPU ranks (OpenBLAS, SYMCOLL_BLAS_LIB); where the library
 * cannot be opened both calls return UNSUPPORTED and write nothing. Every rank passes the same
 * shapes, dtype and options; the call carries its signature like every collective.
 *
 * Algorithms (symcoll_matmul_opts_t.algo; AUTO: the tuning table, by the bytes communicated):
 *  - SYMCOLL_ALGO_OVERLAP. all_gather_matmul: the GEMM of this rank's shard runs first, while
 *    the peers' shards arrive; then one GEMM per peer's shard, peers in rotated order (rank
 *    r + 1 first) so that ranks do not all read one peer at once. GPU: the shards move on the
 *    copy engine (cudaMemcpyAsync from peers' symmetric staging, on a stream of the
 *    communicator's, ordered by events), so the GEMMs keep every SM; CPU: each GEMM reads the
 *    peer's staged shard where it lies, with no copy. matmul_reduce_scatter: the partial
 *    product of each destination's rows is computed in rotated order (own rows last) and, on
 *    GPUs, pushed by the copy engine into the destination's staging while the next partial is
 *    computed; each rank then reduces the partials of its rows in rank order.
 *    Shards larger than the staging buffer (SYMCOLL_WORKSPACE_BYTES; half of it on CPU ranks)
 *    go in rounds of rows.
 *  - SYMCOLL_ALGO_SEQUENTIAL: all_gather, then one GEMM over the gathered A; or one GEMM, then
 *    reduce_scatter of the product (each as symcoll's collective would run it alone).
 * Both give the same bits: partial products are rounded to dtype before they are reduced (as
 * a GEMM into a dtype buffer followed by symcoll_reduce_scatter), sums in rank order.
 * One rank: a GEMM (and the copy into a_out). GPU: enqueued on stream, no host
 * synchronisation, capturable in a CUDA graph (the first call on a communicator allocates
 * cuBLASLt's workspace, so make one before capturing; inside a graph OVERLAP keeps its copies
 * on the captured stream, in order with the GEMMs); every wait is bounded by the timeout.
 */
typedef struct {
  size_t struct_size;  /* sizeof(symcoll_matmul_opts_t) */
  symcoll_algo_t algo; /* SYMCOLL_ALGO_AUTO, SYMCOLL_ALGO_OVERLAP or SYMCOLL_ALGO_SEQUENTIAL */
  void *a_out;         /* all_gather_matmul: if not NULL, also receives the gathered A
                          (nranks * m_shard x k; torch's return_A); in place when a_shard ==
                          a_out + rank * m_shard * k. Must be NULL for matmul_reduce_scatter. */
} symcoll_matmul_opts_t;

SYMCOLL_API void symcoll_matmul_opts_init(symcoll_matmul_opts_t *opts);

/**
 * C = all_gather(A_shard) @ B, the column-parallel layer: a_shard is this rank's m_shard x k
 * rows of A, b is k x n, c is (nranks * m_shard) x n; rank r's rows of A give rows
 * r * m_shard ... of C. c must not overlap a_shard, b or a_out. opts may be NULL.
 * m_shard == 0 or n == 0: nothing to do (SYMCOLL_OK); k == 0 is refused.
 * Errors: INVALID_ARGUMENT (and the log line naming what was wrong), UNSUPPORTED (no GEMM
 * library, or an algorithm this communicator does not run), and those of the collectives.
 */
SYMCOLL_API symcoll_status_t symcoll_all_gather_matmul(symcoll_comm_t comm, const void *a_shard, const void *b, void *c,
                                                       size_t m_shard, size_t n, size_t k, symcoll_dtype_t dtype,
                                                       const symcoll_matmul_opts_t *opts, void *stream);

/**
 * C_shard = reduce_scatter(A @ B), the row-parallel layer: a is this rank's m x k activation
 * (its slice of the contraction dimension), b is its k x n slice of the weight, c_shard
 * receives rows rank * m / nranks ... of the sum over ranks of A @ B, m / nranks x n.
 * m must be a multiple of nranks. c_shard must not overlap a or b. opts may be NULL.
 */
SYMCOLL_API symcoll_status_t symcoll_matmul_reduce_scatter(symcoll_comm_t comm, const void *a, const void *b,
                                                           void *c_shard, size_t m, size_t n, size_t k,
                                                           symcoll_dtype_t dtype, const symcoll_matmul_opts_t *opts,
                                                           void *stream);

/* ---- all-reduce fused with residual add and RMSNorm --------------------------------------- *
 *
 * What a tensor-parallel transformer block runs after its attention and its MLP, in one call:
 * per row i of `rows` rows of `hidden` elements,
 *   s   = all_reduce_sum(x)                  exactly as symcoll_all_reduce: fp32 in rank order,
 *                                            rounded to dtype
 *   r   = s + residual                       in fp32, rounded to dtype (residual NULL: r = s)
 *   residual_out = r                         if residual_out is not NULL (it may be residual)
 *   out = r * rsqrt(mean(r * r) + eps) * weight
 *                                            in fp32 from r as rounded, then rounded to dtype
 *   fp8_out = e4m3(out * rcp)                if opts->fp8_out: the rounded out quantised: each
 *                                            product by rcp = 1 / scale (rounded to fp32 once)
 *                                            rounded to fp32, then to nearest even e4m3 with
 *                                            saturation to +-448, as vLLM's and TensorRT-LLM's
 *                                            quantisation kernels (the same bytes as vLLM's)
 * So the fused call gives what the unfused chain (symcoll_all_reduce, a bf16 add, an fp32
 * RMSNorm, a separate quantisation) gives, up to the order of the fp32 sum of squares within
 * a row (which every rank does alike: every rank's rows are equal). dtype: SYMCOLL_FLOAT32,
 * SYMCOLL_FLOAT16 or SYMCOLL_BFLOAT16 for x, residual, weight (hidden elements), out and
 * residual_out. The quantised output is SYMCOLL_FLOAT8_E4M3 (OCP), rows x hidden bytes, with
 * either one static scale given by the caller (fp8_scale: one float, read at run time, in
 * device memory on GPU ranks) or dynamic per-row scales written to fp8_row_scales (rows
 * floats): scale = max(max|out| / 448, 1 / (448 * 512)) over the row, as vLLM and
 * TensorRT-LLM compute them. out may then be NULL. With the static scale, fp8_scale_out (one
 * float, device memory on GPU ranks, or NULL) receives the scale the call used, written by the
 * call itself (on GPU ranks by its last kernel, on the stream): a caller that hands the scale
 * on with the quantised rows needs no copy of its own. A rank-local output, outside the
 * signature; rows == 0 writes nothing, this neither.
 *
 * In place: out may be x; residual_out may be residual. Any other overlap between the buffers
 * is refused. x in a symmetric allocation is read by peers where it lies (zero-copy) unless out
 * is x. Every rank passes the same rows, hidden, dtype, eps and options, and the same set of
 * buffers (residual, residual_out, out, fp8 given or not): the call's signature covers them, so
 * ranks that disagree fail with SYMCOLL_ERR_MISMATCH having written nothing.
 *
 * Algorithms (opts->algo; AUTO: the tuning table by rows * hidden * element size):
 *  - SYMCOLL_ALGO_ONE_SHOT: every rank reads every peer's rows, reduces them all and normalises
 *    them (the latency path).
 *  - SYMCOLL_ALGO_TWO_SHOT: rows split on row boundaries (rank p has rows/nranks rows, the first
 *    rows % nranks ranks one more): each rank reduces and normalises its rows, then every rank
 *    gathers the others' results (r, out, fp8 and scales): the sequence-parallel shape, a
 *    bandwidth path.
 *  - SYMCOLL_ALGO_LAMPORT: the one-shot without barriers (GPU): every rank pushes its rows into
 *    its peers' sentinel-cleared buffers and normalises each row as the peers' copies arrive,
 *    as all_reduce's LAMPORT (an element of x that is -0.0 in fp16 / bf16, or the sentinel's
 *    pattern in fp32, enters the sum as +0.0 / -0.0); one launch per buffer's worth of rows, a
 *    row larger than that runs ONE_SHOT. The latency path of the smallest sizes. A call that
 *    fails with a timeout may have written part of its outputs (the others write nothing when
 *    they time out). CPU ranks: the one-shot.
 *  - SYMCOLL_ALGO_SEQUENTIAL: symcoll_all_reduce into out (or scratch), then one add + norm
 *    pass: the unfused chain, kept to measure the fusion against.
 * One rank: the add + norm pass alone. GPU ranks enqueue on stream (capturable); CPU ranks
 * return when done. Across nodes: SEQUENTIAL only.
 */
typedef struct {
  size_t struct_size;     /* sizeof(symcoll_norm_opts_t) */
  symcoll_algo_t algo;    /* AUTO, ONE_SHOT, TWO_SHOT, LAMPORT or SEQUENTIAL (reduce_scatter_rmsnorm:
                             AUTO, PULL or SEQUENTIAL) */
  void *fp8_out;          /* rows x hidden SYMCOLL_FLOAT8_E4M3, or NULL */
  const float *fp8_scale; /* static: out * (1 / *fp8_scale) is quantised... */
  float *fp8_row_scales;  /* ...or dynamic: one scale per row written here (exactly one of
                             the two with fp8_out, neither without) */
  float *fp8_scale_out;   /* static form only, or NULL: the call also writes *fp8_scale here (one
                             float; device memory on GPU ranks), so that the scale goes on beside
                             the quantised rows (as a tensor of its own) without a copy */
} symcoll_norm_opts_t;

SYMCOLL_API void symcoll_norm_opts_init(symcoll_norm_opts_t *opts);

/**
 * The fused all-reduce + residual add + RMSNorm above. x: this rank's rows x hidden partial
 * sums; residual (may be NULL) and weight (hidden elements) as the next layer has them, the
 * same on every rank (as tensor parallelism has them: TWO_SHOT normalises each row on one rank,
 * with that rank's residual and weight, and gives every rank its result). out
 * (may be NULL when opts->fp8_out is given) and residual_out (may be NULL) receive rows x
 * hidden. eps must be finite and >= 0. rows == 0: nothing to do; hidden == 0 is refused.
 * Errors: INVALID_ARGUMENT (and the log line naming what was wrong; nothing written on any
 * rank), UNSUPPORTED (an algorithm this communicator does not run), and those of the
 * collectives.
 */
SYMCOLL_API symcoll_status_t symcoll_all_reduce_rmsnorm(symcoll_comm_t comm, const void *x, const void *residual,
                                                        const void *weight, float eps, void *out, void *residual_out,
                                                        size_t rows, size_t hidden, symcoll_dtype_t dtype,
                                                        const symcoll_norm_opts_t *opts, void *stream);

/**
 * The same fused on a reduce-scatter: the sequence-parallel form (Megatron's sequence
 * parallelism, where the row-parallel layer's output is reduce-scattered over the tokens and
 * each rank normalises its own rows). x: nranks x rows rows of hidden, this rank's partial sums
 * of every rank's rows, as symcoll_reduce_scatter's send (rank p's rows are rows p * rows ..
 * p * rows + rows - 1); rows is per rank, as reduce_scatter's count. Rank p's results are its
 * rows of the sum: residual (may be NULL), out, residual_out, fp8_out and fp8_row_scales hold
 * `rows` rows, this rank's shard as the next layer has it; weight: hidden elements.
 *   r = reduce_scatter_sum(x) + residual, then residual_out, out and fp8_out as above,
 * with the bits of symcoll_all_reduce_rmsnorm's rows for the same x, residual rows and weight
 * (and of symcoll_reduce_scatter followed by the add and the norm). symcoll_all_gather of out
 * (or of fp8_out) afterwards gives every rank all the rows.
 *
 * In place: out may be this rank's block of x (x + rank * rows * hidden, NCCL's in-place
 * reduce-scatter; x itself only on rank 0), residual_out may be residual. x in a symmetric allocation is read by peers
 * where it lies (zero-copy; peers never read this rank's own block, so in place too).
 * Signature, refusals, dtypes, fp8 options and eps as symcoll_all_reduce_rmsnorm.
 *
 * Algorithms (opts->algo; AUTO: the tuning table by nranks * rows * hidden * element size):
 *  - SYMCOLL_ALGO_PULL: each rank reads its rows from every peer's x (staged, or where x lies),
 *    reduces them in rank order, adds and normalises them: one pass, no scratch.
 *  - SYMCOLL_ALGO_SEQUENTIAL: symcoll_reduce_scatter into out (or scratch), then one add + norm
 *    pass.
 * One rank: the add + norm pass alone. Across nodes: SEQUENTIAL only.
 */
SYMCOLL_API symcoll_status_t symcoll_reduce_scatter_rmsnorm(symcoll_comm_t comm, const void *x, const void *residual,
                                                            const void *weight, float eps, void *out,
                                                            void *residual_out, size_t rows, size_t hidden,
                                                            symcoll_dtype_t dtype, const symcoll_norm_opts_t *opts,
                                                            void *stream);

/* ---- environment knobs ------------------------------------------------------------------- */

/** Calls fn once per SYMCOLL_* knob with its name, default and help text. */
SYMCOLL_API void symcoll_env_foreach(void (*fn)(const char *name, const char *dflt, const char *help, void *arg),
                                     void *arg);

#ifdef __cplusplus
}
#endif
#endif /* SYMCOLL_H */
