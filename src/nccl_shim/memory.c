/*
 * Memory and registration: ncclMemAlloc / ncclMemFree, ncclCommRegister, and NCCL's symmetric
 * windows (ncclCommWindowRegister), which map to symcoll's symmetric memory.
 *  - ncclMemAlloc gives memory peers can map (symcoll_mem_alloc_shareable: CUDA VMM with
 *    shareable handles, as NCCL's own), else the real NCCL's, else cudaMalloc's.
 *  - A window over such memory is registered with symcoll (symcoll_mem_register, collective):
 *    every call symcoll serves on buffers inside it then runs zero-copy. Over other memory the
 *    window is accepted and its calls staged, as before. Inside ncclGroupStart/End the
 *    registrations wait for the outermost ncclGroupEnd, where each communicator's run in order,
 *    communicators side by side (one thread may hold several ranks: nccl-tests' -g).
 *  - Deregistration is local (this rank's mappings of its peers go), as NCCL's.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shim_rt.h"

SHIM_EXPORT ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
  if (!ptr) return ncclInvalidArgument;
  int dev = 0;
  if (size > 0 && cudaGetDevice(&dev) == cudaSuccess && symcoll_mem_alloc_shareable(dev, size, ptr) == SYMCOLL_OK)
    return ncclSuccess;
  const shim_real_t *r = shim_real();
  if (r && r->MemAlloc) return r->MemAlloc(ptr, size);
  if (cudaMalloc(ptr, size) != cudaSuccess) {
    shim_error("ncclMemAlloc: cudaMalloc of %zu bytes: %s", size, cudaGetErrorString(cudaGetLastError()));
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

SHIM_EXPORT ncclResult_t ncclMemFree(void *ptr) {
  if (!ptr) return ncclSuccess;
  if (symcoll_mem_free_shareable(ptr) == SYMCOLL_OK) return ncclSuccess;
  const shim_real_t *r = shim_real(); /* loaded or not, the same answer as at ncclMemAlloc */
  if (r && r->MemFree) return r->MemFree(ptr);
  return cudaFree(ptr) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

/* The handles the shim gives where NCCL is not asked: a token with a magic; a window's also
 * holds its symcoll registration (NULL: staged). */
#define SHIM_HANDLE_MAGIC 0x73796d636f6c6c68ull /* "symcollh" */
typedef struct {
  uint64_t magic;
  void *buff;
  size_t size;
  ncclComm_t comm;
  symcoll_mem_t mem;
} shim_handle_t;

static shim_handle_t *handle_new(ncclComm_t comm, void *buff, size_t size) {
  shim_handle_t *h = malloc(sizeof *h);
  if (h) *h = (shim_handle_t){SHIM_HANDLE_MAGIC, buff, size, comm, NULL};
  return h;
}

static bool handle_free(void *p) {
  shim_handle_t *h = p;
  if (!h || h->magic != SHIM_HANDLE_MAGIC) return false;
  if (h->mem) {
    const int prev = shim_device_enter(h->comm->device);
    symcoll_mem_free(h->mem); /* a registration: this rank's mappings alone */
    shim_device_leave(h->comm->device, prev);
  }
  h->magic = 0;
  free(h);
  return true;
}

SHIM_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle) {
  SHIM_FOREIGN_COMM(comm, CommRegister, comm, buff, size, handle);
  ncclResult_t rc = shim_comm_ready(comm, "ncclCommRegister");
  if (rc != ncclSuccess) return rc;
  if (!handle) return ncclInvalidArgument;
  const shim_real_t *r = shim_real();
  if (comm->real_state == 1 && r && r->CommRegister) return r->CommRegister(comm->real, buff, size, handle);
  /* No real communicator yet: accepted, nothing registered (forwarded calls later run
   * unregistered; symcoll stages non-symmetric buffers itself). */
  return (*handle = handle_new(comm, buff, size)) ? ncclSuccess : ncclSystemError;
}

SHIM_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle) {
  SHIM_FOREIGN_COMM(comm, CommDeregister, comm, handle);
  ncclResult_t rc = shim_comm_ready(comm, "ncclCommDeregister");
  if (rc != ncclSuccess) return rc;
  if (handle_free(handle)) return ncclSuccess;
  const shim_real_t *r = shim_real();
  if (comm->real_state == 1 && r && r->CommDeregister) return r->CommDeregister(comm->real, handle);
  return ncclInvalidArgument;
}

/* ---- windows ------------------------------------------------------------------------------- */

/* One window's registration with symcoll (collective over its communicator). */
static ncclResult_t window_register(shim_handle_t *h) {
  ncclComm_t c = h->comm;
  ncclResult_t rc = shim_comm_ready(c, "ncclCommWindowRegister");
  if (rc != ncclSuccess || !c->sc) return rc; /* a forward-only communicator: nothing to map */
  const int prev = shim_device_enter(c->device);
  symcoll_status_t s = symcoll_mem_register(c->sc, h->buff, h->size, &h->mem);
  shim_device_leave(c->device, prev);
  if (s == SYMCOLL_OK) {
    SHIM_INFO("rank %d: window %p (%zu bytes): symmetric, calls on it are served zero-copy", c->rank, h->buff, h->size);
    return ncclSuccess;
  }
  h->mem = NULL;
  if (s == SYMCOLL_ERR_UNSUPPORTED) { /* every rank answers so: the window stands, staged */
    SHIM_INFO("rank %d: window %p (%zu bytes): staged (%s)", c->rank, h->buff, h->size, symcoll_last_error());
    return ncclSuccess;
  }
  shim_error("ncclCommWindowRegister: %s (%s)", symcoll_status_string(s), symcoll_last_error());
  return shim_result(s);
}

/* Registrations waiting for this thread's outermost ncclGroupEnd. */
static __thread shim_handle_t **pending;
static __thread int npending, cap_pending;

typedef struct {
  shim_handle_t **wins; /* one communicator's, in the order they were asked for */
  int n;
  ncclResult_t rc;
} comm_windows_t;

static void *register_in_order(void *arg) {
  comm_windows_t *w = arg;
  for (int i = 0; i < w->n && w->rc == ncclSuccess; i++) w->rc = window_register(w->wins[i]);
  return NULL;
}

ncclResult_t shim_windows_flush(void) {
  shim_handle_t **p = pending;
  const int n = npending;
  pending = NULL;
  npending = cap_pending = 0;
  if (n == 0) return ncclSuccess;
  /* Group by communicator: each communicator's in order; communicators side by side (several
   * ranks' registrations from one thread must all be under way for any to complete). */
  comm_windows_t *groups = calloc((size_t)n, sizeof *groups);
  shim_handle_t **order = calloc((size_t)n, sizeof *order);
  pthread_t *threads = calloc((size_t)n, sizeof *threads);
  ncclResult_t rc = ncclSuccess;
  if (!groups || !order || !threads) {
    rc = ncclSystemError;
    goto out;
  }
  int ngroups = 0, used = 0;
  for (int i = 0; i < n; i++) {
    if (!p[i]) continue;
    comm_windows_t *g = &groups[ngroups++];
    g->wins = order + used;
    const ncclComm_t c = p[i]->comm;
    for (int j = i; j < n; j++)
      if (p[j] && p[j]->comm == c) {
        g->wins[g->n++] = p[j];
        p[j] = NULL;
      }
    used += g->n;
  }
  if (ngroups == 1) {
    register_in_order(&groups[0]);
  } else {
    int started = 0;
    for (; started < ngroups; started++)
      if (pthread_create(&threads[started], NULL, register_in_order, &groups[started]) != 0) break;
    for (int i = started; i < ngroups; i++) groups[i].rc = ncclSystemError; /* could not start */
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
  }
  for (int i = 0; i < ngroups && rc == ncclSuccess; i++) rc = groups[i].rc;
out:
  free(groups);
  free(order);
  free(threads);
  free(p);
  return rc;
}

SHIM_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                                int winFlags) {
  (void)winFlags; /* symmetric or not, symcoll maps it for every peer */
  if (!win) return ncclInvalidArgument;
  if (!comm || comm->magic != SHIM_COMM_MAGIC) return shim_comm_ready(comm, "ncclCommWindowRegister");
  shim_handle_t *h = handle_new(comm, buff, size);
  if (!h) return ncclSystemError;
  if (shim_group_depth() > 0) { /* at the outermost ncclGroupEnd, with the others */
    if (npending == cap_pending) {
      int cap = cap_pending ? 2 * cap_pending : 8;
      shim_handle_t **q = realloc(pending, (size_t)cap * sizeof *q);
      if (!q) {
        free(h);
        return ncclSystemError;
      }
      pending = q;
      cap_pending = cap;
    }
    pending[npending++] = h;
    *win = (ncclWindow_t)h;
    return ncclSuccess;
  }
  ncclResult_t rc = window_register(h);
  if (rc != ncclSuccess) {
    free(h);
    return rc;
  }
  *win = (ncclWindow_t)h;
  return ncclSuccess;
}

SHIM_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  ncclResult_t rc = shim_comm_ready(comm, "ncclCommWindowDeregister");
  if (rc != ncclSuccess) return rc;
  return handle_free(win) ? ncclSuccess : ncclInvalidArgument;
}

SHIM_PALIAS(MemAlloc)
SHIM_PALIAS(MemFree)
SHIM_PALIAS(CommRegister)
SHIM_PALIAS(CommDeregister)
SHIM_PALIAS(CommWindowRegister)
SHIM_PALIAS(CommWindowDeregister)
