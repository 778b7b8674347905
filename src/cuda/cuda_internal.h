/* Shared between the CUDA transport's host code (cuda.c) and its kernels (kernels.cu). */
#ifndef SYMCOLL_CUDA_INTERNAL_H
#define SYMCOLL_CUDA_INTERNAL_H
#include <stddef.h>
#include <stdint.h>

#include "symcoll.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Barrier slots per rank: one per block, so at most this many blocks per launch. */
#define SYMCOLL_CUDA_SLOTS 256
#define SYMCOLL_CUDA_PAD_BYTES ((size_t)SYMCOLL_CUDA_SLOTS * SYMCOLL_MAX_RANKS * 4)

/* Ranks of one CUDA communicator: the GPUs of one NVLink node (8 on HGX), with room for
 * several ranks per GPU. The peer tables below are kernel parameters sized by it (a small
 * parameter block launches faster than one sized for SYMCOLL_MAX_RANKS). */
#define SYMCOLL_CUDA_MAX_RANKS 16

/* Everything a collective kernel needs, passed by value as its one argument. */
typedef struct symcoll__cuda_args {
  char *ws[SYMCOLL_CUDA_MAX_RANKS];          /* peers' workspaces (staging of inputs) */
  uint32_t *pad[SYMCOLL_CUDA_MAX_RANKS];     /* peers' barrier pads */
  const char *src[SYMCOLL_CUDA_MAX_RANKS];   /* zero-copy: peers' inputs; unused otherwise */
  const char *send;
  char *recv;
  size_t count;       /* elements */
  size_t chunk_elems; /* elements staged per round (workspace size) */
  uint32_t *error;    /* async error word (device memory) */
  uint64_t timeout_ns;
  int rank, nranks;
  int zero_copy;
  /* ONE_SHOT_DB: peers' double-buffered staging areas and this rank's call counter, one
   * copy per block slot (device memory). */
  char *db[SYMCOLL_CUDA_MAX_RANKS];
  size_t db_half_bytes;
  uint32_t *db_epoch;
  /* LAMPORT: three buffers of nranks slots each at ws[r] + lp_off; this rank's state words,
   * one per block slot: buffer of the next call | bytes per slot the last call wrote << 2. */
  size_t lp_off, lp_slot_bytes;
  uint32_t *lp_state;
} symcoll__cuda_args_t;

typedef struct symcoll__cuda_launch {
  symcoll_algo_t algo;
  symcoll_dtype_t dtype;
  symcoll_op_t op;
  int vec;     /* 16-byte vector path (send and recv 16-byte aligned) */
  int blocks, threads;
} symcoll__cuda_launch_t;

/* Enqueues one kernel on stream; returns a cudaError_t. */
int symcoll__cuda_launch(const symcoll__cuda_launch_t *l, const symcoll__cuda_args_t *a,
                         void *stream);
/* The kernel's function pointer, for occupancy queries. */
const void *symcoll__cuda_kernel(const symcoll__cuda_launch_t *l);
/* Loads every kernel of the library (see kernels.cu); returns a cudaError_t. */
int symcoll__cuda_preload(void);
/* A tiny kernel that writes `value` into slot `slot` of every peer's pad, for the
 * reachability probe at communicator creation. */
int symcoll__cuda_probe(uint32_t *const *pads, int nranks, int rank, uint32_t value, void *stream);

#ifdef __cplusplus
}
#endif
#endif
