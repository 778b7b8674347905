/* The engines between nodes, by kind (registry.c): what the hierarchical transport
 * (src/hier/hier.c) opens. Each engine lives in its own file: NCCL in the CUDA transport
 * (src/cuda/nccl.c), MPI in libsymcoll_mpi (src/engine/mpi.c, opened by mpi_loader.c), and
 * symcoll communicators for nodes emulated on one host (symcoll_engine.c). */
#ifndef SYMCOLL_ENGINE_REGISTRY_H
#define SYMCOLL_ENGINE_REGISTRY_H
#include "../core/internal.h"
#include "engine.h"

/* What opening an engine takes; each kind reads its own fields. */
typedef struct {
  int rank, nranks, device, timeout_ms;
  /* nccl: the job's ranks passing the same color, ordered by key; NCCL's unique ids travel
   * through xchg (an allgather over the job). */
  int color, key;
  int (*xchg)(void *ctx, const void *send, void *recv, size_t bytes);
  void *xchg_ctx;
  const void *mpi_comm; /* mpi: the address of an MPI_Comm; NULL: MPI_COMM_WORLD */
  symcoll_comm_t comm;  /* symcoll: the communicator it runs on */
  bool owned;           /* symcoll: the engine destroys comm */
} symcoll__engine_args_t;

/* Opens an engine of `kind` (not AUTO); UNSUPPORTED with a WARN where this build or machine
 * has none of that kind. */
SYMCOLL_HIDDEN symcoll_status_t symcoll__engine_open(symcoll_engine_t kind, const symcoll__engine_args_t *a,
                                                     symcoll__engine_t *out);
/* The kind SYMCOLL_ENGINE asks for (`cfg` where it says auto; then NCCL for GPU ranks, the
 * symcoll engine for emulated nodes, MPI for CPU ranks). */
SYMCOLL_HIDDEN symcoll_engine_t symcoll__engine_choice(symcoll_engine_t cfg, int device, bool emulated);

/* The engines, one function each (registry.c picks). */
SYMCOLL_HIDDEN symcoll_status_t symcoll__mpi_engine_load(const symcoll__engine_env_t *env, const void *mpi_comm,
                                                         symcoll__engine_t *out);
SYMCOLL_HIDDEN void symcoll__symcoll_engine(symcoll_comm_t comm, bool owned, symcoll__engine_t *out);
#ifdef SYMCOLL_HAVE_CUDA
SYMCOLL_HIDDEN symcoll_status_t symcoll__nccl_engine(int (*xchg)(void *, const void *, void *, size_t), void *xchg_ctx,
                                                     int rank, int nranks, int device, int color, int key,
                                                     symcoll__engine_t *out);
#endif
#endif
