/* The allocator frameworks plug in (PyTorch's CUDAPluggableAllocator under a torch.cuda.MemPool):
 * while a communicator is attached for its device, every block the framework asks for is
 * symmetric memory of it, so collectives on tensors carved from those blocks run zero-copy.
 * A process-wide registry: one attached communicator per device, and every block handed out
 * (freed blocks find their allocation through it, after a detach too). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

#define POOL_MAX_DEVICES 64

typedef struct pool_block {
  void *ptr;
  struct symcoll_mem *mem;
  struct pool_block *next;
} pool_block_t;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static symcoll_comm_t attached[POOL_MAX_DEVICES];
static pool_block_t *blocks;

symcoll_status_t symcoll_pool_attach(symcoll_comm_t comm) {
  if (!comm) SYMCOLL_REFUSE("symcoll_pool_attach: comm is NULL");
  const int dev = comm->device;
  if (dev < 0 || dev >= POOL_MAX_DEVICES)
    SYMCOLL_REFUSE("symcoll_pool_attach: a pool takes GPU communicators (this one's device is %d)", dev);
  if (comm->thread_mode && comm->nranks > 1) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_MEM,
                 "symcoll_pool_attach: a thread-mode communicator (its ranks are threads of one process): a "
                 "framework's allocator knows a device, not a rank, so a pool takes one rank per process");
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  pthread_mutex_lock(&pool_lock);
  const symcoll_comm_t other = attached[dev];
  if (!other) attached[dev] = comm;
  pthread_mutex_unlock(&pool_lock);
  if (other && other != comm)
    SYMCOLL_REFUSE("symcoll_pool_attach: another communicator is attached for GPU %d (detach it first)", dev);
  return SYMCOLL_OK;
}

symcoll_status_t symcoll_pool_detach(symcoll_comm_t comm) {
  if (!comm) SYMCOLL_REFUSE("symcoll_pool_detach: comm is NULL");
  pthread_mutex_lock(&pool_lock);
  for (int d = 0; d < POOL_MAX_DEVICES; d++)
    if (attached[d] == comm) attached[d] = NULL;
  pthread_mutex_unlock(&pool_lock);
  return SYMCOLL_OK;
}

void *symcoll_pool_alloc(size_t bytes, int device, void *stream) {
  (void)stream; /* symmetric memory is ready once every rank has mapped it */
  if (device < 0 || device >= POOL_MAX_DEVICES || bytes == 0) return NULL;
  pthread_mutex_lock(&pool_lock);
  const symcoll_comm_t comm = attached[device];
  pthread_mutex_unlock(&pool_lock);
  pool_block_t *b = calloc(1, sizeof *b);
  if (!comm || !b) {
    if (!comm) SYMCOLL_WARN(SYMCOLL_SUBSYS_MEM, "symcoll_pool_alloc: no communicator is attached for GPU %d", device);
    free(b);
    return NULL;
  }
  /* Collective: every rank asks for the same size here; a rank that asks for another makes every
   * rank's allocation fail (MISMATCH), and the framework reports an out-of-memory error. */
  symcoll_status_t s = symcoll_mem_alloc(comm, bytes, &b->mem);
  if (s != SYMCOLL_OK) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_MEM,
                 "symcoll_pool_alloc: %zu bytes on GPU %d: %s (every rank must allocate the same sizes in the "
                 "same order inside the pool)",
                 bytes, device, symcoll_status_string(s));
    free(b);
    return NULL;
  }
  b->ptr = symcoll_mem_ptr(b->mem, comm->rank);
  pthread_mutex_lock(&pool_lock);
  b->next = blocks;
  blocks = b;
  pthread_mutex_unlock(&pool_lock);
  SYMCOLL_INFO(SYMCOLL_SUBSYS_MEM, "rank %d: pool block of %zu bytes at %p (symmetric)", comm->rank, bytes, b->ptr);
  return b->ptr;
}

void symcoll_pool_free(void *ptr, size_t bytes, int device, void *stream) {
  (void)bytes, (void)device, (void)stream; /* the framework frees a block once its work is done */
  if (!ptr) return;
  pthread_mutex_lock(&pool_lock);
  pool_block_t *b = NULL;
  for (pool_block_t **pp = &blocks; *pp; pp = &(*pp)->next)
    if ((*pp)->ptr == ptr) {
      b = *pp;
      *pp = b->next;
      break;
    }
  pthread_mutex_unlock(&pool_lock);
  if (!b) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_MEM, "symcoll_pool_free: %p is not a pool block (its communicator was destroyed?)",
                 ptr);
    return;
  }
  symcoll_status_t s = symcoll_mem_free(b->mem); /* collective: every rank frees its twin */
  if (s != SYMCOLL_OK) SYMCOLL_WARN(SYMCOLL_SUBSYS_MEM, "symcoll_pool_free: %s", symcoll_status_string(s));
  free(b);
}

void symcoll__pool_forget(symcoll_comm_t comm) {
  pthread_mutex_lock(&pool_lock);
  for (int d = 0; d < POOL_MAX_DEVICES; d++)
    if (attached[d] == comm) attached[d] = NULL;
  for (pool_block_t **pp = &blocks; *pp;) {
    pool_block_t *b = *pp;
    if (b->mem->comm == comm) {
      *pp = b->next;
      free(b);
    } else {
      pp = &b->next;
    }
  }
  pthread_mutex_unlock(&pool_lock);
}

symcoll_mem_t symcoll_mem_lookup(symcoll_comm_t comm, const void *ptr, size_t bytes, size_t *offset_p) {
  size_t off = 0;
  struct symcoll_mem *m = comm && ptr ? symcoll__mem_find(comm, ptr, bytes, &off) : NULL;
  if (offset_p) *offset_p = m ? off : 0;
  return m;
}
