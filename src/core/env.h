/* The environment: every SYMCOLL_* knob in one table, parsed and checked (env.c). Included through internal.h. */
#ifndef SYMCOLL_ENV_H
#define SYMCOLL_ENV_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "symcoll.h"

#ifndef SYMCOLL_HIDDEN
#define SYMCOLL_HIDDEN __attribute__((visibility("hidden")))
#endif

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
#define SYMCOLL_ENV_MAP(X)                                                                                            \
  X(SYMCOLL_DEBUG, ENUM, "WARN", 0, 0, "NONE|WARN|INFO|TRACE",                                                        \
    "log level: NONE, WARN, INFO (set-up and each call's algorithm), TRACE (every call)")                             \
  X(SYMCOLL_DEBUG_SUBSYS, LIST, "ALL", 0, 0, "INIT|BOOT|MEM|COLL|TUNE",                                               \
    "comma list of INIT,BOOT,MEM,COLL,TUNE or ALL")                                                                   \
  X(SYMCOLL_TIMEOUT_MS, MS, "30000", 1, 86400000, "",                                                                 \
    "bound on every wait for a peer: milliseconds (or with a unit: 500ms, 10s, 2min), 1 ms to 24 h")                  \
  X(SYMCOLL_ALGO, STR, "auto", 0, 0, "",                                                                              \
    "force algorithms: a comma list of names (each applies to the collectives that have it) or coll:name, "           \
    "e.g. twoshot or all_gather:push,reduce_scatter:pull")                                                            \
  X(SYMCOLL_WORKSPACE_BYTES, BYTES, "0", 0, 1ll << 40, "",                                                            \
    "symmetric scratch per rank in bytes (K, M, G suffixes); 0 = 32 MiB on CPU, 64 MiB on GPU")                       \
  X(SYMCOLL_HOST_SIMD, ENUM, "auto", 0, 0, "auto|avx512bf16|avx512|avx2|sse2|neon|generic|scalar",                    \
    "CPU reduce loops: auto (the widest this CPU runs), avx512bf16, avx512, avx2, sse2 or neon (the baseline), "      \
    "scalar")                                                                                                         \
  X(SYMCOLL_HOST_STREAM_BYTES, BYTES, "0", 0, 1ll << 40, "",                                                          \
    "CPU: the fused norms write their results with non-temporal stores (past the caches) where a call writes at "     \
    "least this many bytes of them; 0 = twice the L2 cache; a size above every call's: never")                        \
  X(SYMCOLL_CHECK, BOOL, "0", 0, 1, "",                                                                               \
    "1: ranks compare every call's arguments on the host (a bootstrap exchange per call)")                            \
  X(SYMCOLL_NCCL, ENUM, "auto", 0, 0, "auto|1|0",                                                                     \
    "GPU: hold an NCCL communicator: auto (if the tuning table uses it), 1, 0")                                       \
  X(SYMCOLL_NCCL_LIB, STR, "", 0, 0, "", "GPU: path of libnccl.so.2 when the loader does not find it")                \
  X(SYMCOLL_BLAS_LIB, STR, "", 0, 0, "",                                                                              \
    "CPU GEMMs: a CBLAS library to open (default libopenblas.so.0, libcblas.so.3, libblas.so.3)")                     \
  X(SYMCOLL_CUBLASLT_LIB, STR, "", 0, 0, "", "GPU GEMMs: path of libcublasLt.so when the loader does not find it")    \
  X(SYMCOLL_GEMM, BOOL, "1", 0, 1, "",                                                                                \
    "GPU: set up the GEMM operations at creation (cuBLASLt, a copy stream, 64 MiB "                                   \
    "of workspace and scratch); 0: they are UNSUPPORTED on GPU communicators")                                        \
  X(SYMCOLL_TUNE_FILE, STR, "", 0, 0, "", "tuning table to load; default ~/.cache/symcoll/tune.txt, else built-in")   \
  X(SYMCOLL_NODE_RANKS, INT, "0", 0, SYMCOLL_MAX_RANKS, "",                                                           \
    "testing: emulate nodes of this many ranks on one host (0: off); each communicator of a multiple of it spans "    \
    "nodes")                                                                                                          \
  X(SYMCOLL_ENGINE, ENUM, "auto", 0, 0, "auto|nccl|mpi|symcoll",                                                      \
    "engine between nodes: auto (NCCL for GPU ranks, MPI for CPU ranks; symcoll for emulated CPU nodes), nccl, mpi, " \
    "symcoll")                                                                                                        \
  X(SYMCOLL_MPI_LIB, STR, "", 0, 0, "",                                                                               \
    "the MPI engine library to open (default libsymcoll_mpi.so beside libsymcoll)")                                   \
  X(SYMCOLL_RANK, INT, "-1", 0, SYMCOLL_MAX_RANKS - 1, "",                                                            \
    "this process's rank (with SYMCOLL_NRANKS, SYMCOLL_JOB_ID)")                                                      \
  X(SYMCOLL_NRANKS, INT, "-1", 1, SYMCOLL_MAX_RANKS, "", "number of ranks of the job")                                \
  X(SYMCOLL_JOB_ID, STR, "", 0, 0, "",                                                                                \
    "rendezvous name shared by the ranks of one job ([A-Za-z0-9._:-], <= 64); "                                       \
    "unset: ppid.<the parent's pid>")                                                                                 \
  X(SYMCOLL_GPU_MAX_BLOCKS, INT, "0", 0, 4096, "",                                                                    \
    "GPU: most blocks of one collective's kernel where each rank has a GPU of its own; 0: auto (half the SMs, at "    \
    "most 64, so that a GEMM beside it and a second communicator's kernel still find SMs)")                           \
  X(SYMCOLL_GPU_TWO_SHOT_PUSH_BYTES, BYTES, "512K", 0, 1ll << 40, "",                                                 \
    "GPU: all_reduce two-shot rounds up to this many bytes push each result into every rank's workspace (two "        \
    "barriers a round), larger ones are pulled from the owners (three); 0: always pull (one rank stores into its "    \
    "output alone at every size). The smallest any rank sets")                                                        \
  X(SYMCOLL_GPU_ZERO_COPY_ONE_SHOT_BYTES, BYTES, "4M", 0, 1ll << 40, "",                                              \
    "GPU: an all_reduce the table runs one-shot double-buffered (which copies its input into the workspace) runs "    \
    "one-shot, reading it in place, where the input lies in symmetric memory and has at least this many bytes; "      \
    "0: never. The largest any rank sets (0 on any rank: never)")                                                     \
  X(SYMCOLL_GPU_NORM_ROW_BLOCKS, INT, "0", 0, 8, "",                                                                  \
    "GPU: blocks that share a row of all_reduce_rmsnorm's LAMPORT kernel, a thread-block cluster (compute "           \
    "capability 9.0 and later; rows of up to two 16-byte packs a lane): 0 = auto (up to 8 blocks of at least 128 "    \
    "packs while the launch fits the SMs beside the ranks sharing them), 1 = a block a row, 2-8 = at most that many " \
    "(a power of two). The same on every rank")                                                                       \
  X(SYMCOLL_PDL, BOOL, "0", 0, 1, "",                                                                                 \
    "GPU: launch the collectives' and norms' kernels with programmatic dependent launch (Hopper and later): a "       \
    "kernel is scheduled while the one before it on the stream finishes and waits for it on the GPU, and lets the "   \
    "next kernel of the stream be scheduled once it waits for no peer. Each rank its own")                            \
  X(SYMCOLL_GPU_SIGNATURE, BOOL, "1", 0, 1, "",                                                                       \
    "testing only: 0 makes GPU kernels carry 1 in place of each call's signature (to measure its cost; the "          \
    "double-buffered kernels still fold their staging half in)")                                                      \
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
SYMCOLL_HIDDEN void symcoll__env_warn(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* SYMCOLL_ENV_H */
