/* Symmetric memory: collective allocation through the transport, the registry zero-copy
 * calls look buffers up in, device views. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "internal.h"

/* ---- symmetric memory ------------------------------------------------------------------ */

/* A symmetric allocation of bytes on every rank (every rank asks for the same size): the
 * transport's own memory (ptr NULL), or the caller's at ptr mapped for every peer (registered:
 * freed on this rank alone). */
static symcoll_status_t new_mem(symcoll_comm_t comm, size_t bytes, void *ptr, struct symcoll_mem **mem_p) {
  size_t all[SYMCOLL_MAX_RANKS];
  SYMCOLL_CHECK(symcoll__comm_status(comm));
  SYMCOLL_CHECK(comm->oob->allgather(comm, &bytes, all, sizeof bytes));
  for (int r = 0; r < comm->nranks; r++)
    if (all[r] != bytes) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_MEM, "rank %d %s %zu bytes, this rank %zu", r, ptr ? "registers" : "allocates",
                   all[r], bytes);
      return SYMCOLL_ERR_MISMATCH;
    }
  if (ptr && !comm->tp->mem_register) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_MEM, "symcoll_mem_register: the %s transport maps only its own allocations",
                 comm->tp->name);
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  if (!ptr) symcoll__fault_point(comm->rank, "alloc");
  struct symcoll_mem *m = calloc(1, sizeof *m);
  if (!m) return SYMCOLL_ERR_NO_MEMORY;
  m->comm = comm;
  m->bytes = bytes;
  m->id = comm->next_mem_id++;
  symcoll_status_t s = ptr ? comm->tp->mem_register(comm, ptr, bytes, m) : comm->tp->mem_alloc(comm, bytes, m);
  if (s != SYMCOLL_OK) {
    free(m);
    return s;
  }
  m->registered = ptr != NULL;
  m->next = comm->mems;
  comm->mems = m;
  *mem_p = m;
  return SYMCOLL_OK;
}

/* Unlinks mem from its communicator's registry and releases it on this rank. */
static void release(symcoll_comm_t comm, struct symcoll_mem *mem) {
  for (struct symcoll_mem **pp = &comm->mems; *pp; pp = &(*pp)->next)
    if (*pp == mem) {
      *pp = mem->next;
      break;
    }
  comm->tp->mem_free(mem);
  free(mem);
}

symcoll_status_t symcoll__mem_alloc_internal(symcoll_comm_t comm, size_t bytes, struct symcoll_mem **mem_p) {
  return new_mem(comm, bytes, NULL, mem_p);
}

/* Every rank of comm is past its allocation's (or free's) driver calls. Those can wait for the
 * GPU to go idle, and with ranks sharing a GPU it never does while a peer's kernel waits for
 * this rank: so no rank may start a collective while another is still in them. */
static symcoll_status_t all_done(symcoll_comm_t comm) {
  char mine = 1, all[SYMCOLL_MAX_RANKS];
  return comm->oob->allgather(comm, &mine, all, 1);
}

symcoll_status_t symcoll_mem_alloc(symcoll_comm_t comm, size_t bytes, symcoll_mem_t *mem_p) {
  if (!comm || !mem_p || bytes == 0) return SYMCOLL_ERR_INVALID_ARGUMENT;
  SYMCOLL_CHECK(symcoll__mem_alloc_internal(comm, bytes, mem_p));
  return all_done(comm);
}

symcoll_status_t symcoll_mem_register(symcoll_comm_t comm, void *ptr, size_t bytes, symcoll_mem_t *mem_p) {
  if (!comm || !ptr || !mem_p || bytes == 0) return SYMCOLL_ERR_INVALID_ARGUMENT;
  SYMCOLL_CHECK(new_mem(comm, bytes, ptr, mem_p));
  return all_done(comm);
}

symcoll_status_t symcoll_mem_alloc_shareable(int device, size_t bytes, void **ptr_p) {
  if (!ptr_p || bytes == 0 || device < 0) return SYMCOLL_ERR_INVALID_ARGUMENT;
#ifdef SYMCOLL_HAVE_CUDA
  return symcoll__cuda_transport.local_alloc(device, bytes, ptr_p);
#else
  return SYMCOLL_ERR_UNSUPPORTED;
#endif
}

symcoll_status_t symcoll_mem_free_shareable(void *ptr) {
  if (!ptr) return SYMCOLL_ERR_INVALID_ARGUMENT;
#ifdef SYMCOLL_HAVE_CUDA
  return symcoll__cuda_transport.local_free(ptr);
#else
  return SYMCOLL_ERR_INVALID_ARGUMENT;
#endif
}

symcoll_status_t symcoll_mem_free(symcoll_mem_t mem) {
  if (!mem) return SYMCOLL_ERR_INVALID_ARGUMENT;
  symcoll_comm_t comm = mem->comm;
  if (mem == comm->workspace) return SYMCOLL_ERR_INVALID_ARGUMENT;
  if (mem->registered) { /* this rank's mappings of its peers go; the memory stays the caller's */
    release(comm, mem);
    return SYMCOLL_OK;
  }
  /* No peer may still use it: a barrier first. After a failure, free locally anyway. */
  int id = mem->id, ids[SYMCOLL_MAX_RANKS];
  symcoll_status_t s = symcoll__comm_status(comm);
  if (s == SYMCOLL_OK) s = comm->oob->allgather(comm, &id, ids, sizeof id);
  for (int r = 0; s == SYMCOLL_OK && r < comm->nranks; r++)
    if (ids[r] != id) s = SYMCOLL_ERR_MISMATCH;
  release(comm, mem);
  return s == SYMCOLL_OK ? all_done(comm) : s;
}

void *symcoll_mem_ptr(symcoll_mem_t mem, int rank) {
  if (!mem || rank < 0 || rank >= mem->comm->nranks) return NULL;
  return mem->ptrs[rank];
}

size_t symcoll_mem_size(symcoll_mem_t mem) {
  return mem ? mem->bytes : 0;
}

symcoll_status_t symcoll_mem_device_view(symcoll_mem_t mem, symcoll_device_view_t *view_p) {
  if (!mem || !view_p) return SYMCOLL_ERR_INVALID_ARGUMENT;
  if (!mem->comm->tp->mem_device_view) return SYMCOLL_ERR_UNSUPPORTED;
  return mem->comm->tp->mem_device_view(mem, view_p);
}

struct symcoll_mem *symcoll__mem_find(symcoll_comm_t comm, const void *p, size_t bytes, size_t *off_p) {
  uintptr_t a = (uintptr_t)p;
  for (struct symcoll_mem *m = comm->mems; m; m = m->next) {
    uintptr_t base = (uintptr_t)m->ptrs[comm->rank];
    if (m != comm->workspace && a >= base && a - base <= m->bytes && bytes <= m->bytes - (a - base)) {
      *off_p = a - base;
      return m;
    }
  }
  return NULL;
}
