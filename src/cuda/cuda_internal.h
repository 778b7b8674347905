/* Shared between the CUDA transport's host code (cuda.c, cuda_coll.c) and its kernels
 * (allreduce.cu, allgather.cu, reducescatter.cu, broadcast.cu, rmsnorm.cu, launch.cu). */
#ifndef SYMCOLL_CUDA_INTERNAL_H
#define SYMCOLL_CUDA_INTERNAL_H
#include <stddef.h>
#include <stdint.h>

#include "symcoll.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Barrier slots per rank: one per block, so at most this many blocks per launch. The last
 * two rows are not barrier slots: CE_SLOT is the copy engine's one-block barrier, and the
 * probe at creation writes into the aux area through a pad pointer of its own. */
#define SYMCOLL_CUDA_SLOTS 256
#define SYMCOLL_CUDA_CE_SLOT (SYMCOLL_CUDA_SLOTS - 2)
#define SYMCOLL_CUDA_MAX_BLOCKS (SYMCOLL_CUDA_SLOTS - 2)
#define SYMCOLL_CUDA_PAD_BYTES ((size_t)SYMCOLL_CUDA_SLOTS * SYMCOLL_MAX_RANKS * 4)

/* all_reduce_rmsnorm (rmsnorm.cu): the 16-byte packs of a row a thread keeps in registers
 * between its passes; a row's block has a thread per lane of the row (a pack each, up to
 * SYMCOLL_CUDA_NORM_MAX_THREADS, the kernels' launch bound), or one per two lanes in the local
 * pass of many rows (cuda_coll.c). */
#define SYMCOLL_CUDA_NORM_ROW_PACKS 2
#define SYMCOLL_CUDA_NORM_MAX_THREADS 512
/* The fp8 output of the norm's FIT kernels (symcoll__cuda_launch_t.fit_fp8). */
#define SYMCOLL_CUDA_FP8_NONE 0
#define SYMCOLL_CUDA_FP8_STATIC 1
#define SYMCOLL_CUDA_FP8_ROWS 2
/* all_reduce_rmsnorm's LAMPORT: the header (the call's signature) before a slot's rows; a slot
 * has 256 bytes beyond its data for it (cuda.c). */
#define SYMCOLL_CUDA_LAMPORT_HEADER 16

/* Ranks of one CUDA communicator: the GPUs of one NVLink node (8 on HGX), with room for
 * several ranks per GPU. The peer tables below are kernel parameters sized by it (a small
 * parameter block launches faster than one sized for SYMCOLL_MAX_RANKS). */
#define SYMCOLL_CUDA_MAX_RANKS 16

/* Where a kernel finds peers' buffers (symcoll__cuda_args_t.zero_copy): it reads their inputs
 * where they lie (src), or stores straight into their outputs (dst), instead of going
 * through the workspaces. */
#define SYMCOLL_CUDA_ZC_IN 1
#define SYMCOLL_CUDA_ZC_OUT 2

/* Everything a collective kernel needs, passed by value as its one argument. */
typedef struct symcoll__cuda_args {
  char *ws[SYMCOLL_CUDA_MAX_RANKS];        /* peers' workspaces (staging of inputs) */
  uint32_t *pad[SYMCOLL_CUDA_MAX_RANKS];   /* peers' barrier pads */
  const char *src[SYMCOLL_CUDA_MAX_RANKS]; /* zero-copy (SYMCOLL_CUDA_ZC_IN): peers' inputs */
  char *dst[SYMCOLL_CUDA_MAX_RANKS];       /* zero-copy (SYMCOLL_CUDA_ZC_OUT): peers' outputs */
  const char *send;
  char *recv;
  size_t count;         /* elements this launch handles (all_gather, reduce_scatter, all_to_all: per rank) */
  size_t stride;        /* all_gather, reduce_scatter, all_to_all: elements between ranks' blocks in send/recv */
  size_t chunk_elems;   /* elements staged per round (per rank for all_gather / reduce_scatter / all_to_all) */
  uint32_t *error;      /* async error word (device memory) */
  uint32_t *host_error; /* where a kernel that gives up copies it: host memory the host reads */
  uint64_t timeout_ns;
  int rank, nranks;
  int root;        /* broadcast, reduce: the root (the one sender / the one writer); -1 elsewhere */
  int zero_copy;   /* SYMCOLL_CUDA_ZC_IN | SYMCOLL_CUDA_ZC_OUT, or 0: staged */
  int push_gather; /* TWO_SHOT into outputs of ranks' own: results pushed into peers'
                      workspaces (else pulled from the owners', one more barrier) */
  uint32_t sig;    /* the call's signature: the value its barriers and packets carry */
  /* Double-buffered staging (ONE_SHOT_DB; all_gather and reduce_scatter PULL/PUSH): peers'
   * two halves and this rank's call counter, one copy per block slot (device memory). */
  char *db[SYMCOLL_CUDA_MAX_RANKS];
  size_t db_half_bytes;
  uint32_t *db_epoch;
  /* LAMPORT (all_reduce, all_reduce_rmsnorm): three buffers of nranks slots each at ws[r] +
   * lp_off; this rank's state words, one per block slot: buffer of the next call | bytes per slot
   * the last call wrote << 2. */
  size_t lp_off, lp_slot_bytes;
  uint32_t *lp_state;
  /* LAMPORT all_gather / reduce_scatter: packets of 8 data bytes and two flags (16 bytes) in two
   * buffers of nranks slots at ws[r] + ll_off; this rank's call counter per block slot. */
  size_t ll_off, ll_slot_bytes;
  uint32_t *ll_epoch;
} symcoll__cuda_args_t;

/* all_reduce_rmsnorm's buffers and sizes (rmsnorm.cu), the second argument of its one-shot,
 * two-shot and LAMPORT kernels and the only one of its local pass; rows x hidden elements of the
 * launch's dtype. */
typedef struct symcoll__cuda_norm {
  const char *x;            /* local pass: the sum; one-shot, two-shot: this rank's partial rows */
  const char *residual;     /* or NULL */
  const char *weight;       /* hidden elements */
  char *out, *residual_out; /* either may be NULL */
  unsigned char *fp8_out;   /* e4m3, or NULL; then with... */
  const float *fp8_scale;   /* ...a static scale (device memory), or */
  float *fp8_row_scales;    /* ...per-row scales written here */
  float *fp8_scale_out;     /* static: NULL, or where block 0 copies the scale at its end */
  float eps;
  size_t rows, hidden;
  size_t rows_per_round; /* one-shot, staged: whole rows the workspace holds per round (of
                            each block, scatter); two-shot: row positions of a round */
  int scatter;           /* one-shot: reduce_scatter_rmsnorm, x holds nranks blocks of rows
                            rows and this rank normalises block rank (its outputs: rows rows) */
  /* Two-shot: each rank's results of a row of its share, one record per row in its workspace
   * from rec_at (64-byte aligned, past rows_per_round staged rows), rec_bytes apart (a multiple
   * of 64); in a record, what the call asks for at these offsets: residual_out's row, out's
   * row, the fp8 row, the row's dynamic scale (4-byte aligned). */
  size_t rec_at, rec_bytes;
  size_t rec_res_out, rec_out, rec_fp8, rec_scale;
  const uint32_t *error; /* the communicator's error word: the local pass writes nothing once
                            an earlier kernel (the chain's all-reduce) gave up; NULL at one rank */
  unsigned lanes;        /* the row's sum of squares is taken over this many lanes, whatever the
                            block: blockDim.x or twice it (rmsnorm.cu) */
} symcoll__cuda_norm_t;

typedef struct symcoll__cuda_launch {
  symcoll_coll_t coll;
  symcoll_algo_t algo;
  symcoll_dtype_t dtype;
  symcoll_op_t op;
  int vec;       /* 16-byte vector path (every address the kernel computes is 16-byte aligned) */
  int early;     /* the norm's local pass: a block an SM at most, the weight loaded beside x */
  int each_peer; /* LAMPORT all_reduce polls each peer alone (1 or 2 ranks: at most one peer) */
  int two_lanes; /* the norm's local pass: a thread per two lanes of the row (rmsnorm.cu) */
  int fit;       /* the norm: 1 or 2 where a row is whole packs, at most that many a thread (rmsnorm.cu's
                    FIT kernels, where vec; the same on every rank, whatever its alignment); else 0 */
  int fit_fp8;   /* with fit: the fp8 output those kernels write: 0 none, 1 with the static scale,
                    2 with a scale per row (SYMCOLL_CUDA_FP8_*) */
  int pdl;       /* launched with programmatic stream serialization (SYMCOLL_PDL; GridDependency) */
  int cluster;   /* the norm's LAMPORT with fit: blocks a row, a thread-block cluster of them (rmsnorm.cu's
                    CL kernels); 0 or 1: a block a row */
  int blocks, threads;
} symcoll__cuda_launch_t;

/* Enqueues kernel fn with l's grid and args on stream, in clusters of l->cluster blocks where more
 * than one, with programmatic stream serialization where l->pdl; returns a cudaError_t. */
int symcoll__cuda_launch_fn(const void *fn, const symcoll__cuda_launch_t *l, void **args, void *stream);
/* Enqueues one kernel on stream; returns a cudaError_t. */
int symcoll__cuda_launch(const symcoll__cuda_launch_t *l, const symcoll__cuda_args_t *a, void *stream);
/* The kernel's function pointer (NULL if there is none), for launches and occupancy queries. */
const void *symcoll__cuda_kernel(const symcoll__cuda_launch_t *l);
const void *symcoll__cuda_allreduce_kernel(const symcoll__cuda_launch_t *l);
const void *symcoll__cuda_allgather_kernel(const symcoll__cuda_launch_t *l);
const void *symcoll__cuda_reducescatter_kernel(const symcoll__cuda_launch_t *l);
const void *symcoll__cuda_broadcast_kernel(const symcoll__cuda_launch_t *l);
/* all_reduce_rmsnorm (rmsnorm.cu): l->algo SEQUENTIAL (the local pass, `a` unused), ONE_SHOT, TWO_SHOT or LAMPORT,
 * l->dtype fp32, fp16 or bf16; enqueues one kernel on stream and returns a cudaError_t. */
const void *symcoll__cuda_rmsnorm_kernel(const symcoll__cuda_launch_t *l);
int symcoll__cuda_rmsnorm_launch(const symcoll__cuda_launch_t *l, const symcoll__cuda_args_t *a,
                                 const symcoll__cuda_norm_t *n, void *stream);
/* The virtual architecture the collectives' kernels were compiled for, as the loaded module
 * says (90: compute_90), or 0 if unknown: their guards wait only where it is 90 or more. */
int symcoll__cuda_kernels_ptx_version(void);
/* Loads every kernel of the library (see launch.cu); returns a cudaError_t. */
int symcoll__cuda_preload(void);
/* A tiny kernel that writes `value` into slot `slot` of every peer's pad, for the
 * reachability probe at communicator creation. */
int symcoll__cuda_probe(uint32_t *const *pads, int nranks, int rank, uint32_t value, void *stream);
/* dst[i] = sum over s < nslots of src[s * slot_elems + i] for i < count, in slot order, in fp32
 * (dtype fp32, fp16 or bf16): the last step of the overlapped matmul_reduce_scatter. */
int symcoll__cuda_reduce_slots(const void *src, size_t slot_elems, int nslots, void *dst, size_t count, int dtype,
                               void *stream);
int symcoll__cuda_preload_matmul(void);
/* The NCCL engine's fp8 AVG (convert.cu): n fp8 elements of dt widened to fp32, and the fp32
 * sum divided by nranks and rounded back to dt (saturating); both return a cudaError_t. */
int symcoll__cuda_fp8_widen(float *dst, const void *src, size_t n, symcoll_dtype_t dt, void *stream);
int symcoll__cuda_fp8_narrow_avg(void *dst, const float *sum, size_t n, int nranks, symcoll_dtype_t dt, void *stream);
/* dst[i] = src[i] x scale for n elements of dt, SYMCOLL_PROD's product (convert.cu); scale is
 * read on the host now, or with on_device by the kernel when it runs. Returns a cudaError_t. */
int symcoll__cuda_scale(void *dst, const void *src, size_t n, symcoll_dtype_t dt, const void *scale, int on_device,
                        void *stream);
int symcoll__cuda_preload_convert(void);
/* dst = src, `bytes` bytes, by a kernel on stream (a one-rank collective's copy); returns a cudaError_t. */
int symcoll__cuda_copy_kernel(void *dst, const void *src, size_t bytes, void *stream);
/* The copy engine's barrier: one block meets every peer at CE_SLOT with the call's signature. */
int symcoll__cuda_ce_barrier(const symcoll__cuda_args_t *a, void *stream);

#ifdef __cplusplus
}
#endif
#endif
