/*
 * The run-time parts of the shim (real.c, comm.c, group.c, api.c): CUDA and libsymcoll.
 */
#ifndef SYMCOLL_NCCL_SHIM_RT_H
#define SYMCOLL_NCCL_SHIM_RT_H

#include <pthread.h>

#include <cuda_runtime.h>

#include "shim.h"

/* ---- real.c: the real NCCL ----------------------------------------------------------------- */

/* NCCL's device-API host functions (the C++ headers under nccl_device/): the few types they take. */
typedef struct {
  int nRanks, rank, stride;
} shim_team_t;

/* Every function of the real NCCL the shim calls, as nccl.h declares it. */
/* clang-format off */
#define SHIM_REAL_LIST(X)                                                                                  \
  X(GetVersion) X(GetUniqueId) X(CommInitRankConfig) X(CommInitRank) X(CommInitAll) X(CommFinalize)       \
  X(CommDestroy) X(CommAbort) X(CommSplit) X(CommShrink) X(CommInitRankScalable)             \
  X(GetErrorString) X(GetLastError) X(CommGetAsyncError) X(CommCount) X(CommCuDevice) X(CommUserRank)      \
  X(CommRegister) X(CommDeregister) X(CommWindowRegister) X(CommWindowDeregister) X(RedOpCreatePreMulSum)  \
  X(RedOpDestroy) X(Reduce) X(Bcast) X(Broadcast) X(AllReduce) X(ReduceScatter) X(AllGather) X(AlltoAll)   \
  X(Gather) X(Scatter) X(Send) X(Recv) X(GroupStart) X(GroupEnd) X(GroupSimulateEnd) X(MemAlloc) X(MemFree)
/* clang-format on */

typedef struct {
#define SHIM_REAL_FIELD(name) __typeof__(nccl##name) *name;
  SHIM_REAL_LIST(SHIM_REAL_FIELD)
#undef SHIM_REAL_FIELD
  void (*ResetDebugInit)(void);
  /* Declared by nccl.h only from a 2.28 patch release on: typed here, so that older headers build. */
  ncclResult_t (*CommRevoke)(ncclComm_t comm, int revokeFlags);
  ncclResult_t (*DevCommCreate)(ncclComm_t, const void *reqs, void *out_dev_comm);
  ncclResult_t (*DevCommDestroy)(ncclComm_t, const void *dev_comm);
  shim_team_t (*TeamWorld)(ncclComm_t);
  shim_team_t (*TeamLsa)(ncclComm_t);
  shim_team_t (*TeamRail)(ncclComm_t);
  int (*TeamRankToWorld)(ncclComm_t, shim_team_t, int);
  int (*TeamRankToLsa)(ncclComm_t, shim_team_t, int);
  ncclResult_t (*GinBarrierCreateRequirement)(ncclComm_t, shim_team_t, int, void *, void *);
  ncclResult_t (*LsaBarrierCreateRequirement)(shim_team_t, int, void *, void *);
  int (*LLA2ACalcSlots)(int, int);
  ncclResult_t (*LLA2ACreateRequirement)(int, int, void *, void *);
} shim_real_t;

/* The real NCCL, loaded once ($SYMCOLL_NCCL_REAL_LIB, else libnccl.so.2 as the loader finds it,
 * else known paths; never the shim itself); NULL where none loads (shim_real_why says why). */
SHIM_HIDDEN const shim_real_t *shim_real(void);
SHIM_HIDDEN const char *shim_real_why(void);
SHIM_HIDDEN const char *shim_real_path(void);

/* ---- comm.c ------------------------------------------------------------------------------- */

enum { SHIM_COMM_MAGIC = 0x5359434e, SHIM_PENDING = 0, SHIM_READY = 1, SHIM_FAILED = 2 };

/* A communicator the shim did not make: the real NCCL's own, handed to a function of NCCL's API
 * that the shim exports. That happens where the program loaded the real library before the shim
 * opened it (PyTorch preloads its NCCL by path): RTLD_DEEPBIND applies only to a library's first
 * load, so the real NCCL's calls to its own exported functions (ncclCommGetAsyncError on every
 * enqueue, ncclCommRegister for windows) bind to the shim's. Those go back to the real function.
 * The first word of a real communicator is NCCL's start magic, never the shim's. */
#define SHIM_FOREIGN_COMM(comm, fn, ...)                                                                \
  do {                                                                                                  \
    if ((comm) && ((const struct ncclComm *)(comm))->magic != SHIM_COMM_MAGIC) {                        \
      const shim_real_t *foreign_real_ = shim_real();                                                   \
      return foreign_real_ && foreign_real_->fn ? foreign_real_->fn(__VA_ARGS__) : ncclInvalidArgument; \
    }                                                                                                   \
  } while (0)

/* Ranks one thread made together: by ncclCommInitAll (init_all: their real communicators come
 * from the real ncclCommInitAll), or by one ncclGroupStart/End (several ranks of a job, maybe
 * with more in other processes: the id exchange of every member at once). Their real
 * communicators are made together, by whichever thread needs one first. */
typedef struct shim_clique {
  pthread_mutex_t lock;
  bool init_all;
  int n, refs;
  int *devs;
  ncclComm_t *comms; /* the shim communicators (NULL once destroyed) */
  ncclComm_t *reals; /* their real communicators, once made */
  int real_state;    /* 0: not yet, 1: made, -1: failed (why) */
  char why[512];
} shim_clique_t;

/* A PreMulSum op: a sum of inputs each multiplied by its rank's scalar, served by symcoll as
 * a sum with a scale (symcoll_coll_opts_t.scale); the real NCCL's op, made when a call with it
 * is forwarded. */
typedef struct shim_premul {
  bool used;
  ncclDataType_t dtype;
  ncclScalarResidence_t residence;
  unsigned char value[8]; /* ncclScalarHostImmediate: the scalar, read at creation */
  void *device_scalar;    /* ncclScalarDevice: read when a call runs */
  bool has_real;
  ncclRedOp_t real_op;
} shim_premul_t;

struct ncclComm {
  uint32_t magic;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int state;            /* SHIM_PENDING / READY / FAILED */
  ncclResult_t init_rc; /* the creation's result once not pending */
  int rank, nranks, device;
  int blocking;
  char job_id[SHIM_JOB_ID_MAX];
  symcoll_comm_t sc; /* NULL: a forward-only communicator (ncclCommShrink's) */
  pthread_t creator;
  bool has_creator;
  bool finalized;
  bool same_thread_peers; /* made with others by one thread (one group): no barrier at finalize */
  /* ncclCommSplit's: made by splitting split_parent (deferred to the group's end inside a
   * group). A rank of no color (NCCL_SPLIT_NOCOLOR) still takes part in the split: its comm
   * is a ghost, never handed out, freed once the split is done. */
  ncclComm_t split_parent;
  int split_color, split_key;
  bool ghost;
  /* A parent's splits run one after another, in the order they were made (ranks pair them by
   * that order): a group's are chained (split_next) on one creator thread; a non-blocking one
   * made outside a group counts in its parent's splits_in_flight (under the parent's lock),
   * and the parent's next split waits for it. */
  ncclComm_t split_next;
  bool split_queued; /* made by the creator thread of an earlier split of its chain */
  bool in_flight;    /* counted in its parent's splits_in_flight */
  bool self_free;    /* a ghost made on a detached thread, which frees it */
  unsigned splits;   /* as a parent: splits made of it (every rank counts alike) */
  int splits_in_flight;
  /* ncclRedOpCreatePreMulSum's ops: op ncclNumOps + i is premul[i]. */
  struct shim_premul *premul;
  int npremul;
  /* The real NCCL communicator, made at the first call that needs it. */
  pthread_mutex_t real_lock;
  ncclComm_t real;
  int real_state; /* 0: not yet, 1: made, -1: failed (real_why) */
  char real_why[512];
  shim_clique_t *clique;
  int clique_index;
  bool refused[SHIM_NUM_CALLS]; /* symcoll answered UNSUPPORTED for this call */
};

SHIM_HIDDEN shim_policy_t shim_policy(void);
/* A new communicator, pending its creation (shim_comm_create). */
SHIM_HIDDEN ncclComm_t shim_comm_new(int rank, int nranks, int device, const char *job_id, int blocking);
/* Creates the symcoll communicator of a pending comm; sets state and init_rc, wakes waiters. */
SHIM_HIDDEN ncclResult_t shim_comm_create(ncclComm_t c);
/* Waits until no non-blocking split of parent is in flight (its next split pairs in order). */
SHIM_HIDDEN void shim_split_wait(ncclComm_t parent);
/* Frees c once its creation is done if it is a ghost (a split's rank of no color); true if so. */
SHIM_HIDDEN bool shim_comm_drop_ghost(ncclComm_t c);
/* Starts shim_comm_create on a thread of its own (non-blocking configs, groups). */
SHIM_HIDDEN ncclResult_t shim_comm_create_async(ncclComm_t c);
/* Validates comm and waits until its creation is done: ncclSuccess, or the error to return. */
SHIM_HIDDEN ncclResult_t shim_comm_ready(ncclComm_t c, const char *what);
/* The real communicator of c, made now if need be (a collective step: every rank of c reaches
 * its first forwarded call together). NULL on failure (the error recorded, *rc set). */
SHIM_HIDDEN ncclComm_t shim_comm_real(ncclComm_t c, cudaStream_t stream, const char *what, ncclResult_t *rc);
SHIM_HIDDEN void shim_comm_free(ncclComm_t c);
/* Ranks of one group, made by this thread (n > 1): one clique (shim_clique_t). */
SHIM_HIDDEN void shim_comm_cohort(ncclComm_t *comms, int n);
/* Before the first symcoll communicator: keep symcoll's own NCCL engine off the shim. */
SHIM_HIDDEN void shim_env_prepare(void);

/* ---- group.c ------------------------------------------------------------------------------ */

/* Whether this thread is inside ncclGroupStart/End. */
SHIM_HIDDEN int shim_group_depth(void);
/* Inside a group: queue c's creation for the outermost ncclGroupEnd, return true. */
SHIM_HIDDEN bool shim_group_defer(ncclComm_t c);
/* Whether c is queued in this thread's open group (its creation has not started). */
SHIM_HIDDEN bool shim_group_holds(ncclComm_t c);
/* Before a forwarded call: opens the real group if this thread's group is open. */
SHIM_HIDDEN ncclResult_t shim_group_forwarding(const shim_real_t *r);

/* ---- memory.c ------------------------------------------------------------------------------ */

/* The window registrations this thread's group deferred: each communicator's in order,
 * communicators side by side; at the outermost ncclGroupEnd. */
SHIM_HIDDEN ncclResult_t shim_windows_flush(void);

/* NCCL's profiling names (pncclXxx): the same functions. */
#define SHIM_PALIAS(name) \
  extern __typeof__(nccl##name) pnccl##name __attribute__((alias("nccl" #name), visibility("default")));

/* ---- device scope: the comm's device while a call runs, the caller's after --------------- */

static inline int shim_device_enter(int device) {
  int cur = -1;
  if (cudaGetDevice(&cur) != cudaSuccess) cur = -1;
  if (cur != device) cudaSetDevice(device);
  return cur;
}
static inline void shim_device_leave(int device, int prev) {
  if (prev >= 0 && prev != device) cudaSetDevice(prev);
}

#endif /* SYMCOLL_NCCL_SHIM_RT_H */
