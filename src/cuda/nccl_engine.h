/* The NCCL engine of the CUDA transport (nccl.c). */
#ifndef SYMCOLL_NCCL_ENGINE_H
#define SYMCOLL_NCCL_ENGINE_H
#include <pthread.h>

#include "../core/internal.h"

typedef struct symcoll__nccl {
  void *comm; /* ncclComm_t, NULL when none is held (or after an abort) */
  int nranks; /* its ranks */
  int rank;   /* this rank's place in it */
  pthread_mutex_t lock;
} symcoll__nccl_t;

/* Collective, after every rank adopted the same tuning table: holds an NCCL communicator if
 * SYMCOLL_NCCL and the table ask for one and every rank can; otherwise rewrites the table's
 * NCCL rows. Fails only when the bootstrap does. */
SYMCOLL_HIDDEN symcoll_status_t symcoll__nccl_setup(symcoll_comm_t comm, symcoll__nccl_t *nc);
/* Enqueues the collective (args->coll) through NCCL on args->stream. */
SYMCOLL_HIDDEN symcoll_status_t symcoll__nccl_coll(symcoll__nccl_t *nc, const symcoll__coll_args_t *a);
/* From any thread: ncclCommAbort, so that NCCL kernels waiting for a peer end. */
SYMCOLL_HIDDEN void symcoll__nccl_abort(symcoll__nccl_t *nc);
SYMCOLL_HIDDEN void symcoll__nccl_fini(symcoll__nccl_t *nc);
#endif
