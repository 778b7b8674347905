/* The CUDA transport's host-side state, shared by cuda.c (memory, set-up, errors) and
 * cuda_coll.c (the launch path). Not seen by the kernels. */
#ifndef SYMCOLL_CUDA_HOST_H
#define SYMCOLL_CUDA_HOST_H
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "../core/internal.h"
#include "cuda_check.h"
#include "cuda_internal.h"
#include "nccl_engine.h"

/* Workspace of a rank: [staging | double buffer (2 halves) | LAMPORT all_reduce (3 buffers of
 * nranks slots) | LL all_gather / reduce_scatter (2 buffers of nranks slots)]. */
#define SYMCOLL_CUDA_LAMPORT_SLOT ((size_t)1 << 20)          /* bytes a rank sends per LAMPORT launch */
#define SYMCOLL_CUDA_LL_DATA ((size_t)64 << 10)              /* data bytes a rank sends a peer per LL launch */
#define SYMCOLL_CUDA_LL_SLOT (16 + 2 * SYMCOLL_CUDA_LL_DATA) /* header + packets */

/* Events of one overlapped GEMM operation: one per peer's arrival, and two pairs for the
 * double-buffered partials of matmul_reduce_scatter. */
#define SYMCOLL_CUDA_MM_EVENTS (SYMCOLL_CUDA_MAX_RANKS + 4)
typedef struct symcoll__lt_state symcoll__lt_state_t; /* cuda_gemm.c */

typedef struct {
  size_t map_bytes, pad_off, aux_off;
  CUmemGenericAllocationHandle handle[SYMCOLL_MAX_RANKS];
  CUdeviceptr va[SYMCOLL_MAX_RANKS]; /* mappings this process made (0: not ours to unmap) */
  int device;
  bool registered; /* the caller's memory (handle[rank]: a retained reference), no pad */
} cuda_mem_t;

typedef struct {
  /* Launch geometry, the same on every rank (block b of every rank meets its twins at
   * barrier slot b, and rounds must line up): the fewest SMs and the smallest L2 of the
   * team's GPUs, and the most ranks sharing any one of them. */
  int dev, sms, l2, share;
  int grid_cap;                /* the most blocks of one collective's kernel (place_ranks) */
  size_t push_max;             /* all_reduce TWO_SHOT: rounds up to this many bytes push results */
  int devs[SYMCOLL_MAX_RANKS]; /* thread mode: every rank's ordinal */
  struct symcoll_mem *ws;
  size_t ws_bytes, db_half, lp_slot;
  size_t round_cap[SYMCOLL_NUM_ALGOS];   /* the most a round can be: its staging buffer */
  size_t round_bytes[SYMCOLL_NUM_ALGOS]; /* all_reduce bytes per round by default, at most round_cap */
  uint32_t *err;                         /* this rank's async error word (device memory) */
  uint32_t *host_err;                    /* its copy in mapped host memory, written by kernels that give up */
  bool signature;                        /* SYMCOLL_GPU_SIGNATURE (testing only) */
  bool pdl;                              /* SYMCOLL_PDL on a GPU that has it: launches with it */
  bool clusters;                         /* thread-block clusters: compute capability 9.0 and kernels built for it */
  int norm_row_blocks;                   /* SYMCOLL_GPU_NORM_ROW_BLOCKS: 0 auto, 1 none, else the most */
  cudaStream_t side;                     /* the process's private stream of this GPU (side_stream) */
  bool side_owned;                       /* side is this communicator's own (a GPU past SIDE_DEVICES) */
  symcoll__nccl_t nccl;                  /* an NCCL communicator over the same ranks, if held */
  symcoll__cuda_args_t args;             /* the constant part of every launch */
  struct {
    const void *fn;
    int threads, blocks_per_sm;
  } occ[512]; /* resident_blocks cache */
  int nocc;
  /* GEMM operations (cuda_gemm.c, cuda_matmul.c), set up on first use. */
  symcoll__lt_state_t *lt;
  cudaStream_t ce;    /* the copy engine's stream of the overlapped operations */
  cudaMemPool_t pool; /* scratch of the GEMM operations: grows, never shrinks */
  cudaEvent_t ev[SYMCOLL_CUDA_MM_EVENTS];
} cuda_state_t;

/* Makes comm's device current for the duration of a call. */
typedef struct {
  int prev;
} dev_guard_t;
static inline symcoll_status_t dev_enter(symcoll_comm_t comm, dev_guard_t *g) {
  if (cudaGetDevice(&g->prev) != cudaSuccess) g->prev = -1;
  if (g->prev != comm->device && cudaSetDevice(comm->device) != cudaSuccess) return SYMCOLL_ERR_CUDA;
  return SYMCOLL_OK;
}
static inline void dev_leave(symcoll_comm_t comm, dev_guard_t *g) {
  if (g->prev >= 0 && g->prev != comm->device) cudaSetDevice(g->prev);
}

/* The failure a kernel of comm published in host memory (publish_error in the kernels): its
 * status, logged once and recorded as the communicator's failure; SYMCOLL_OK while there is
 * none. One load: every call on the launch path asks it first. */
SYMCOLL_HIDDEN symcoll_status_t symcoll__cuda_failed(symcoll_comm_t comm);
/* The transport's collective entry (cuda_coll.c), one-rank copy and input scaling. */
SYMCOLL_HIDDEN symcoll_status_t symcoll__cuda_coll(symcoll_comm_t comm, const symcoll__coll_args_t *a);
SYMCOLL_HIDDEN symcoll_status_t symcoll__cuda_copy(symcoll_comm_t comm, void *dst, const void *src, size_t bytes,
                                                   void *stream);
SYMCOLL_HIDDEN symcoll_status_t symcoll__cuda_scale_op(symcoll_comm_t comm, void *dst, const void *src, size_t count,
                                                       symcoll_dtype_t dtype, const void *scale, bool on_device,
                                                       void *stream);
/* all_reduce_rmsnorm (cuda_coll.c, kernels in rmsnorm.cu): SEQUENTIAL (the local pass),
 * ONE_SHOT and TWO_SHOT. */
SYMCOLL_HIDDEN symcoll_status_t symcoll__cuda_norm(symcoll_comm_t comm, const symcoll__norm_args_t *a);
/* GEMMs (cuda_gemm.c) and the overlapped GEMM operations (cuda_matmul.c). */
SYMCOLL_HIDDEN bool symcoll__cuda_has_gemm(symcoll_comm_t comm);
/* Sets up the GEMM operations at creation (collective): see cuda_gemm.c. */
SYMCOLL_HIDDEN symcoll_status_t symcoll__cuda_gemm_init(symcoll_comm_t comm);
SYMCOLL_HIDDEN symcoll_status_t symcoll__cuda_gemm(symcoll_comm_t comm, const symcoll__gemm_t *g);
/* The same with the device already current and cuBLASLt set up. */
SYMCOLL_HIDDEN symcoll_status_t symcoll__cuda_gemm_enqueue(symcoll_comm_t comm, const symcoll__gemm_t *g);
SYMCOLL_HIDDEN void symcoll__cuda_gemm_fini(symcoll_comm_t comm);
SYMCOLL_HIDDEN symcoll_status_t symcoll__cuda_scratch_alloc(symcoll_comm_t comm, size_t bytes, void *stream, void **p);
SYMCOLL_HIDDEN void symcoll__cuda_scratch_free(symcoll_comm_t comm, void *p, void *stream);
SYMCOLL_HIDDEN symcoll_status_t symcoll__cuda_matmul(symcoll_comm_t comm, const symcoll__matmul_args_t *x);
#endif
