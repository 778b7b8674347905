/*
 * CUDA transport: symmetric GPU memory from the VMM API (cuMemCreate, exported as POSIX fds
 * through the bootstrap in process mode, shared by address in thread mode), a reachability
 * probe at creation, the async error word. The launch path of the collectives is in
 * cuda_coll.c, their kernels in allreduce.cu (and reduce), allgather.cu (and all_to_all),
 * reducescatter.cu, broadcast.cu and rmsnorm.cu (all_reduce_rmsnorm).
 *
 * Driver entry points come through cudart (cudaGetDriverEntryPointByVersion) and cudart is
 * linked statically, so libsymcoll loads on machines without a GPU driver; there creating a
 * GPU communicator fails with SYMCOLL_ERR_CUDA and the CPU transport is unaffected.
 *
 * Every allocation is laid out as [user bytes | barrier pads | aux (error word, probe)] so a
 * user kernel gets pads of its own with each symmetric buffer.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/internal.h"
#include "cuda_host.h"

#define AUX_BYTES 4096
#define AUX_ERR 0         /* offset of the async error word */
#define AUX_PROBE 256     /* offset of the probe words, one per rank */
#define AUX_DB_STATE 1024 /* double buffer: call counter, one copy per block slot */
#define AUX_LP_STATE 2048 /* LAMPORT all_reduce: buffer and last size, one copy per block slot */
#define AUX_LL_STATE 3072 /* LL all_gather / reduce_scatter: call counter, one copy per block slot */
#define PROBE_MAGIC 0x5c000000u
#define CUDA_DEFAULT_WS (64u << 20)
_Static_assert(SYMCOLL_CUDA_LAMPORT_SLOT < ((size_t)1 << 30), "LAMPORT's state word holds a slot's bytes in 30 bits");
_Static_assert(AUX_LL_STATE + 4 * SYMCOLL_CUDA_SLOTS <= AUX_BYTES, "per-block state words fit the aux area");

/* ---- driver entry points ------------------------------------------------------------ */
static struct {
  CUresult (*GetErrorString)(CUresult, const char **);
  CUresult (*MemGetAllocationGranularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
  CUresult (*MemCreate)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
  CUresult (*MemRelease)(CUmemGenericAllocationHandle);
  CUresult (*MemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*MemAddressFree)(CUdeviceptr, size_t);
  CUresult (*MemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
  CUresult (*MemUnmap)(CUdeviceptr, size_t);
  CUresult (*MemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
  CUresult (*MemExportToShareableHandle)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                                         unsigned long long);
  CUresult (*MemImportFromShareableHandle)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
  CUresult (*MemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
  CUresult (*MemRetainAllocationHandle)(CUmemGenericAllocationHandle *, void *);
  CUresult (*MemGetAllocationPropertiesFromHandle)(CUmemAllocationProp *, CUmemGenericAllocationHandle);
  CUresult (*MemGetAddressRange)(CUdeviceptr *, size_t *, CUdeviceptr);
} drv;
static symcoll_status_t drv_status = SYMCOLL_ERR_INTERNAL;

static void drv_load_once(void) {
  struct {
    const char *name;
    void **fn;
  } t[] = {
      {"cuGetErrorString", (void **)&drv.GetErrorString},
      {"cuMemGetAllocationGranularity", (void **)&drv.MemGetAllocationGranularity},
      {"cuMemCreate", (void **)&drv.MemCreate},
      {"cuMemRelease", (void **)&drv.MemRelease},
      {"cuMemAddressReserve", (void **)&drv.MemAddressReserve},
      {"cuMemAddressFree", (void **)&drv.MemAddressFree},
      {"cuMemMap", (void **)&drv.MemMap},
      {"cuMemUnmap", (void **)&drv.MemUnmap},
      {"cuMemSetAccess", (void **)&drv.MemSetAccess},
      {"cuMemExportToShareableHandle", (void **)&drv.MemExportToShareableHandle},
      {"cuMemImportFromShareableHandle", (void **)&drv.MemImportFromShareableHandle},
      {"cuMemsetD32Async", (void **)&drv.MemsetD32Async},
      {"cuMemRetainAllocationHandle", (void **)&drv.MemRetainAllocationHandle},
      {"cuMemGetAllocationPropertiesFromHandle", (void **)&drv.MemGetAllocationPropertiesFromHandle},
      {"cuMemGetAddressRange", (void **)&drv.MemGetAddressRange},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    enum cudaDriverEntryPointQueryResult q;
    cudaError_t e = cudaGetDriverEntryPointByVersion(t[i].name, t[i].fn, 12000, cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !*t[i].fn) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "CUDA driver entry point %s unavailable (%s)", t[i].name,
                   cudaGetErrorString(e));
      drv_status = SYMCOLL_ERR_CUDA;
      return;
    }
  }
  drv_status = SYMCOLL_OK;
}

static symcoll_status_t drv_load(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, drv_load_once);
  return drv_status;
}

/* The driver API's errors, as cuda_check.h does the runtime's. */
#define CU_GOTO(call, status, label)                                                        \
  do {                                                                                      \
    CUresult r_ = (call);                                                                   \
    if (r_ != CUDA_SUCCESS) {                                                               \
      const char *m_ = "unknown";                                                           \
      drv.GetErrorString(r_, &m_);                                                          \
      SYMCOLL_WARN(SYMCOLL_SUBSYS_MEM, "%s failed: %s", #call, m_);                         \
      (status) = r_ == CUDA_ERROR_OUT_OF_MEMORY ? SYMCOLL_ERR_NO_MEMORY : SYMCOLL_ERR_CUDA; \
      goto label;                                                                           \
    }                                                                                       \
  } while (0)

/* ---- memory --------------------------------------------------------------------------- */

static void cuda_mem_release(struct symcoll_mem *mem) {
  cuda_mem_t *cm = mem->tp;
  if (!cm) return;
  for (int r = 0; r < SYMCOLL_MAX_RANKS; r++) {
    if (cm->va[r]) {
      drv.MemUnmap(cm->va[r], cm->map_bytes);
      drv.MemAddressFree(cm->va[r], cm->map_bytes);
    }
    if (cm->handle[r]) drv.MemRelease(cm->handle[r]);
  }
  free(cm);
  mem->tp = NULL;
}

/* Read and write access to [va, va + bytes) for GPUs devs[0 .. ndevs). */
static CUresult grant_access(CUdeviceptr va, size_t bytes, const int *devs, int ndevs) {
  CUmemAccessDesc desc[SYMCOLL_MAX_RANKS];
  for (int i = 0; i < ndevs; i++) {
    desc[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc[i].location.id = devs[i];
    desc[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  return drv.MemSetAccess(va, bytes, desc, (size_t)ndevs);
}

/* The GPUs that reach this rank's memory directly: its own, and in thread mode every team
 * rank's (peers use its mapping), each once. Returns how many. */
static int team_devices(symcoll_comm_t comm, const cuda_state_t *cs, int devs[SYMCOLL_MAX_RANKS]) {
  int ndevs = 0;
  for (int r = 0; r < (comm->thread_mode ? comm->nranks : 1); r++) {
    int d = comm->thread_mode ? cs->devs[r] : comm->device, seen = 0;
    for (int i = 0; i < ndevs; i++) seen |= devs[i] == d;
    if (!seen) devs[ndevs++] = d;
  }
  return ndevs;
}

static symcoll_status_t map_handle(cuda_mem_t *cm, int r, size_t gran, const int *devs, int ndevs) {
  symcoll_status_t s = SYMCOLL_OK;
  CU_GOTO(drv.MemAddressReserve(&cm->va[r], cm->map_bytes, gran, 0, 0), s, out);
  CU_GOTO(drv.MemMap(cm->va[r], cm->map_bytes, 0, cm->handle[r], 0), s, err_free);
  CU_GOTO(grant_access(cm->va[r], cm->map_bytes, devs, ndevs), s, err_unmap);
  return SYMCOLL_OK;
err_unmap:
  drv.MemUnmap(cm->va[r], cm->map_bytes);
err_free:
  drv.MemAddressFree(cm->va[r], cm->map_bytes);
  cm->va[r] = 0;
out:
  return s;
}

/* Process mode: imports every peer's exported handle (fds: one per rank, all closed here) and
 * maps it, filling mem->ptrs for the peers; the first failure stops the imports. */
static symcoll_status_t import_peers(symcoll_comm_t comm, cuda_mem_t *cm, int *fds, size_t gran,
                                     struct symcoll_mem *mem) {
  symcoll_status_t s = SYMCOLL_OK;
  const int me = comm->rank;
  for (int r = 0; r < comm->nranks; r++) {
    if (r != me && s == SYMCOLL_OK) {
      CUresult cr = drv.MemImportFromShareableHandle(&cm->handle[r], (void *)(uintptr_t)fds[r],
                                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      if (cr != CUDA_SUCCESS) {
        SYMCOLL_WARN(SYMCOLL_SUBSYS_MEM, "rank %d: importing rank %d's memory failed (%d)", me, r, (int)cr);
        cm->handle[r] = 0;
        s = SYMCOLL_ERR_CUDA;
      } else {
        s = map_handle(cm, r, gran, &comm->device, 1);
      }
      if (s == SYMCOLL_OK) mem->ptrs[r] = (void *)cm->va[r];
    }
    close(fds[r]);
  }
  return s;
}

static symcoll_status_t cuda_mem_alloc(symcoll_comm_t comm, size_t bytes, struct symcoll_mem *mem) {
  cuda_state_t *cs = comm->tp_state;
  symcoll_status_t s = SYMCOLL_OK;
  dev_guard_t g;
  SYMCOLL_CHECK(dev_enter(comm, &g));
  /* A framework's allocator may call in while a stream of this thread is being captured into a
   * CUDA graph (PyTorch calls a MemPool's pluggable allocator without the capture-mode guard it
   * puts around its own cudaMalloc): these driver calls are not part of the graph, so they run
   * in relaxed mode instead of invalidating the capture. */
  enum cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeRelaxed;
  const bool mode_swapped = cudaThreadExchangeStreamCaptureMode(&capture_mode) == cudaSuccess;
  cuda_mem_t *cm = calloc(1, sizeof *cm);
  if (!cm) {
    s = SYMCOLL_ERR_NO_MEMORY;
    goto out;
  }
  mem->tp = cm;
  cm->device = comm->device;
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = comm->device;
  prop.requestedHandleTypes = comm->thread_mode ? CU_MEM_HANDLE_TYPE_NONE : CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  CU_GOTO(drv.MemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), s, err);
  cm->pad_off = (bytes + 255) & ~(size_t)255;
  cm->aux_off = cm->pad_off + SYMCOLL_CUDA_PAD_BYTES;
  cm->map_bytes = (cm->aux_off + AUX_BYTES + gran - 1) / gran * gran;
  const int me = comm->rank;
  CU_GOTO(drv.MemCreate(&cm->handle[me], cm->map_bytes, &prop, 0), s, err);
  /* In thread mode peers use our mapping directly: grant every team device access. */
  int devs[SYMCOLL_MAX_RANKS];
  const int ndevs = team_devices(comm, cs, devs);
  SYMCOLL_CHECK_GOTO(map_handle(cm, me, gran, devs, ndevs), s, err);
  /* Zeroed before any peer can see it: pads must start at rest. */
  CUDA_GOTO(cudaMemsetAsync((void *)cm->va[me], 0, cm->map_bytes, cs->side), s, err);
  CUDA_GOTO(cudaStreamSynchronize(cs->side), s, err);
  if (comm->thread_mode) {
    CUdeviceptr all[SYMCOLL_MAX_RANKS];
    SYMCOLL_CHECK_GOTO(comm->oob->allgather(comm, &cm->va[me], all, sizeof(CUdeviceptr)), s, err);
    for (int r = 0; r < comm->nranks; r++) mem->ptrs[r] = (void *)all[r];
  } else {
    int fd = -1, fds[SYMCOLL_MAX_RANKS];
    CU_GOTO(drv.MemExportToShareableHandle(&fd, cm->handle[me], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), s, err);
    s = comm->oob->exchange_fd(comm, fd, fds);
    close(fd);
    if (s != SYMCOLL_OK) goto err;
    mem->ptrs[me] = (void *)cm->va[me];
    if ((s = import_peers(comm, cm, fds, gran, mem)) != SYMCOLL_OK) goto err;
  }
  goto out;
err:
  cuda_mem_release(mem);
out:
  if (mode_swapped) cudaThreadExchangeStreamCaptureMode(&capture_mode);
  dev_leave(comm, &g);
  return s;
}

static void cuda_mem_free(struct symcoll_mem *mem) {
  dev_guard_t g;
  if (dev_enter(mem->comm, &g) == SYMCOLL_OK) {
    cudaDeviceSynchronize(); /* no kernel of ours may still use it */
    cuda_mem_release(mem);
    dev_leave(mem->comm, &g);
  }
}

/* ---- the caller's memory made symmetric (NCCL's windows) -------------------------------------- */

/* Whether this rank's [ptr, ptr + bytes) can be mapped by its peers: the start of a VMM mapping
 * (its handle retained into *h) that other processes can import; "" if so, else why not. */
static const char *registrable(symcoll_comm_t comm, void *ptr, size_t bytes, CUmemGenericAllocationHandle *h,
                               size_t *map_bytes, size_t *gran) {
  CUdeviceptr base = 0;
  size_t size = 0;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  if (drv.MemRetainAllocationHandle(h, ptr) != CUDA_SUCCESS) {
    *h = 0;
    return "it is not CUDA VMM memory (cudaMalloc's cannot be mapped by peers: allocate with ncclMemAlloc or "
           "symcoll_mem_alloc_shareable)";
  }
  if (drv.MemGetAllocationPropertiesFromHandle(&prop, *h) != CUDA_SUCCESS ||
      drv.MemGetAddressRange(&base, &size, (CUdeviceptr)ptr) != CUDA_SUCCESS)
    return "its allocation's properties could not be read";
  if (!comm->thread_mode && !(prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
    return "its allocation has no POSIX file descriptor handle type: other processes cannot import it";
  if (base != (CUdeviceptr)ptr) return "it does not start its allocation's mapping";
  if (size < bytes) return "it runs past its allocation's mapping";
  if (drv.MemGetAllocationGranularity(gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS)
    return "its allocation's granularity could not be read";
  *map_bytes = size;
  return "";
}

static symcoll_status_t cuda_mem_register(symcoll_comm_t comm, void *ptr, size_t bytes, struct symcoll_mem *mem) {
  cuda_state_t *cs = comm->tp_state;
  const int me = comm->rank, n = comm->nranks;
  symcoll_status_t s = drv_load();
  if (s != SYMCOLL_OK) return s;
  dev_guard_t g;
  SYMCOLL_CHECK(dev_enter(comm, &g));
  cuda_mem_t *cm = calloc(1, sizeof *cm);
  CUmemGenericAllocationHandle h = 0;
  size_t gran = 0;
  struct {
    int ok;
    size_t map_bytes;
    CUdeviceptr va;
  } mine = {0, 0, (CUdeviceptr)ptr}, all[SYMCOLL_MAX_RANKS];
  const char *why = cm ? registrable(comm, ptr, bytes, &h, &mine.map_bytes, &gran) : "out of memory";
  int fd = -1; /* process mode: exported before the ranks agree, so that a failure is agreed too */
  if (!*why && !comm->thread_mode &&
      drv.MemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) != CUDA_SUCCESS) {
    fd = -1;
    why = "its handle could not be exported";
  }
  mine.ok = !*why;
  /* Every rank learns whether every rank can: none maps anything otherwise. */
  s = comm->oob->allgather(comm, &mine, all, sizeof mine);
  for (int r = 0; s == SYMCOLL_OK && r < n; r++)
    if (!all[r].ok || all[r].map_bytes != mine.map_bytes) {
      if (r == me)
        SYMCOLL_WARN(SYMCOLL_SUBSYS_MEM, "rank %d: registering %p (%zu bytes): %s", me, ptr, bytes, why);
      else if (all[r].ok)
        SYMCOLL_WARN(SYMCOLL_SUBSYS_MEM, "rank %d maps %zu bytes behind its buffer, this rank %zu", r, all[r].map_bytes,
                     mine.map_bytes);
      s = SYMCOLL_ERR_UNSUPPORTED;
    }
  if (s != SYMCOLL_OK) {
    if (fd >= 0) close(fd);
    if (h) drv.MemRelease(h);
    free(cm);
    dev_leave(comm, &g);
    return s;
  }
  mem->tp = cm;
  cm->device = comm->device;
  cm->registered = true;
  cm->map_bytes = mine.map_bytes;
  cm->handle[me] = h; /* the retained reference; the mapping stays the caller's (va[me] 0) */
  if (comm->thread_mode) {
    /* Peers use this mapping directly: every team device may read and write it. */
    int devs[SYMCOLL_MAX_RANKS];
    const int ndevs = team_devices(comm, cs, devs);
    CU_GOTO(grant_access((CUdeviceptr)ptr, cm->map_bytes, devs, ndevs), s, err);
    for (int r = 0; r < n; r++) mem->ptrs[r] = (void *)all[r].va;
  } else {
    int fds[SYMCOLL_MAX_RANKS];
    s = comm->oob->exchange_fd(comm, fd, fds);
    close(fd);
    if (s != SYMCOLL_OK) goto err;
    mem->ptrs[me] = ptr;
    if ((s = import_peers(comm, cm, fds, gran, mem)) != SYMCOLL_OK) goto err;
  }
  dev_leave(comm, &g);
  return SYMCOLL_OK;
err:
  cuda_mem_release(mem);
  dev_leave(comm, &g);
  return s;
}

/* ---- memory other processes can map (ncclMemAlloc's kind) ------------------------------------ */

typedef struct shareable {
  CUdeviceptr va;
  size_t bytes;
  CUmemGenericAllocationHandle h;
  struct shareable *next;
} shareable_t;
static pthread_mutex_t shareable_lock = PTHREAD_MUTEX_INITIALIZER;
static shareable_t *shareables;

static symcoll_status_t cuda_local_alloc(int device, size_t bytes, void **p) {
  symcoll_status_t s = drv_load();
  if (s != SYMCOLL_OK) return s;
  shareable_t *a = calloc(1, sizeof *a);
  if (!a) return SYMCOLL_ERR_NO_MEMORY;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  CU_GOTO(drv.MemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), s, err);
  a->bytes = (bytes + gran - 1) / gran * gran;
  CU_GOTO(drv.MemCreate(&a->h, a->bytes, &prop, 0), s, err);
  CU_GOTO(drv.MemAddressReserve(&a->va, a->bytes, gran, 0, 0), s, err_release);
  CU_GOTO(drv.MemMap(a->va, a->bytes, 0, a->h, 0), s, err_free);
  /* Readable and writable by this GPU and every GPU with peer access to it (as ncclMemAlloc). */
  int devs[SYMCOLL_MAX_RANKS], ndevs = 0, count = 0;
  cudaGetDeviceCount(&count);
  for (int d = 0; d < count && ndevs < SYMCOLL_MAX_RANKS; d++) {
    int peer = d == device;
    if (!peer) cudaDeviceCanAccessPeer(&peer, d, device);
    if (peer) devs[ndevs++] = d;
  }
  CU_GOTO(grant_access(a->va, a->bytes, devs, ndevs), s, err_unmap);
  pthread_mutex_lock(&shareable_lock);
  a->next = shareables;
  shareables = a;
  pthread_mutex_unlock(&shareable_lock);
  *p = (void *)a->va;
  return SYMCOLL_OK;
err_unmap:
  drv.MemUnmap(a->va, a->bytes);
err_free:
  drv.MemAddressFree(a->va, a->bytes);
err_release:
  drv.MemRelease(a->h);
err:
  free(a);
  return s;
}

static symcoll_status_t cuda_local_free(void *p) {
  shareable_t *a = NULL;
  pthread_mutex_lock(&shareable_lock);
  for (shareable_t **pp = &shareables; *pp; pp = &(*pp)->next)
    if ((*pp)->va == (CUdeviceptr)p) {
      a = *pp;
      *pp = a->next;
      break;
    }
  pthread_mutex_unlock(&shareable_lock);
  if (!a) return SYMCOLL_ERR_INVALID_ARGUMENT;
  /* Peers' imports keep the physical memory until they release it (cuMemRelease counts). */
  drv.MemUnmap(a->va, a->bytes);
  drv.MemAddressFree(a->va, a->bytes);
  drv.MemRelease(a->h);
  free(a);
  return SYMCOLL_OK;
}

static symcoll_status_t cuda_mem_device_view(struct symcoll_mem *mem, symcoll_device_view_t *v) {
  symcoll_comm_t comm = mem->comm;
  cuda_state_t *cs = comm->tp_state;
  cuda_mem_t *cm = mem->tp;
  if (cm->registered) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_MEM, "a registered buffer has no signal pads: device views need symcoll_mem_alloc");
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  memset(v, 0, sizeof *v);
  v->rank = comm->rank;
  v->nranks = comm->nranks;
  for (int r = 0; r < comm->nranks; r++) {
    v->buf[r] = mem->ptrs[r];
    v->pad[r] = (uint32_t *)((char *)mem->ptrs[r] + cm->pad_off);
  }
  v->pad_slots = SYMCOLL_CUDA_SLOTS;
  v->error = cs->err;
  v->timeout_ns = (uint64_t)comm->timeout_ms * 1000000ull;
  return SYMCOLL_OK;
}

/* ---- communicator ------------------------------------------------------------------------ */

static symcoll_status_t probe_peers(symcoll_comm_t comm, cuda_state_t *cs) {
  symcoll_status_t s = SYMCOLL_OK;
  const int n = comm->nranks, me = comm->rank;
  cuda_mem_t *cm = cs->ws->tp;
  uint32_t *pads[SYMCOLL_MAX_RANKS];
  /* The probe writes into each peer's aux area: pad pointer such that slot SLOTS-1 lands
   * on the probe words is awkward; point the "pad" at aux - (SLOTS-1) rows instead. */
  for (int r = 0; r < n; r++)
    pads[r] = (uint32_t *)((char *)cs->ws->ptrs[r] + cm->aux_off + AUX_PROBE) -
              (size_t)(SYMCOLL_CUDA_SLOTS - 1) * SYMCOLL_MAX_RANKS;
  int e = symcoll__cuda_probe(pads, n, me, PROBE_MAGIC | (uint32_t)me, cs->side);
  if (e == cudaSuccess) e = cudaStreamSynchronize(cs->side);
  if (e != cudaSuccess) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "rank %d (GPU %d): writing to peers' memory failed: %s", me, comm->device,
                 cudaGetErrorString((cudaError_t)e));
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  int dummy = 0, all[SYMCOLL_MAX_RANKS];
  SYMCOLL_CHECK(comm->oob->allgather(comm, &dummy, all, sizeof dummy)); /* everyone wrote */
  uint32_t got[SYMCOLL_MAX_RANKS];
  CUDA_GOTO(cudaMemcpyAsync(got, (char *)cs->ws->ptrs[me] + cm->aux_off + AUX_PROBE, sizeof(uint32_t) * (size_t)n,
                            cudaMemcpyDeviceToHost, cs->side),
            s, out);
  CUDA_GOTO(cudaStreamSynchronize(cs->side), s, out);
  uint64_t missing = 0, allmissing[SYMCOLL_MAX_RANKS];
  for (int r = 0; r < n; r++)
    if (got[r] != (PROBE_MAGIC | (uint32_t)r)) missing |= 1ull << r;
  SYMCOLL_CHECK(comm->oob->allgather(comm, &missing, allmissing, sizeof missing));
  for (int q = 0; q < n; q++)
    for (int r = 0; r < n; r++)
      if (allmissing[q] & (1ull << r)) {
        SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "rank %d cannot write to rank %d's GPU memory: no peer path", r, q);
        s = SYMCOLL_ERR_UNSUPPORTED;
      }
out:
  return s;
}

/* Which ranks share our GPU (bus ids), a WARN for pairs of GPUs the driver says cannot reach
 * each other (the probe of every pair decides, after the workspace exists: a GPU this process
 * cannot see may still be reachable), a refusal on every rank where a GPU reaches a peer
 * without native atomics (the barriers' atomics on peers' pads), then the geometry every rank
 * sizes its kernels from:
 * the fewest SMs and the smallest L2 of all, and the most ranks on one GPU (a split's
 * parent's too, since its groups run at once). Collective: the same exchanges on every rank. */
static symcoll_status_t place_ranks(symcoll_comm_t comm, cuda_state_t *cs, char bus[32]) {
  char buses[SYMCOLL_MAX_RANKS][32];
  CUDA_TRY(cudaDeviceGetPCIBusId(bus, 32, comm->device));
  SYMCOLL_CHECK(comm->oob->allgather(comm, bus, buses, 32));
  SYMCOLL_CHECK(comm->oob->allgather(comm, &comm->device, cs->devs, sizeof(int)));
  comm->ranks_on_my_device = 0;
  int atomics = 1; /* every peer GPU this process sees takes our atomics natively */
  for (int r = 0; r < comm->nranks; r++) {
    if (!strcmp(buses[r], bus)) {
      comm->ranks_on_my_device++;
      continue;
    }
    int peer = -1, can = 0, native = 1;
    if (cudaDeviceGetByPCIBusId(&peer, buses[r]) == cudaSuccess) {
      cudaDeviceCanAccessPeer(&can, comm->device, peer);
      if (can &&
          cudaDeviceGetP2PAttribute(&native, cudaDevP2PAttrNativeAtomicSupported, comm->device, peer) != cudaSuccess)
        native = 1; /* unknown: the probe decides */
    } else {
      can = 1; /* not visible to this process: the probe decides */
    }
    if (!can) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "GPU %s (rank %d) cannot access GPU %s (rank %d): no peer access", bus,
                   comm->rank, buses[r], r);
    } else if (!native) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT,
                   "GPU %s (rank %d) reaches GPU %s (rank %d) without native atomics (a PCIe path?): the "
                   "kernels' barriers need them",
                   bus, comm->rank, buses[r], r);
      atomics = 0;
    }
  }
  /* [SMs, L2 bytes, ranks of a parent communicator on this GPU, native atomics to every peer,
   * SYMCOLL_GPU_MAX_BLOCKS, SYMCOLL_GPU_TWO_SHOT_PUSH_BYTES, SYMCOLL_GPU_ZERO_COPY_ONE_SHOT_BYTES
   * (bytes up to INT_MAX)] */
  const long long push = symcoll__env_int("SYMCOLL_GPU_TWO_SHOT_PUSH_BYTES");
  const long long zc = symcoll__env_int("SYMCOLL_GPU_ZERO_COPY_ONE_SHOT_BYTES");
  int geo[7] = {cs->sms,
                0,
                comm->sharers_floor,
                atomics,
                (int)symcoll__env_int("SYMCOLL_GPU_MAX_BLOCKS"),
                push > INT_MAX ? INT_MAX : (int)push,
                zc > INT_MAX ? INT_MAX : (int)zc},
      geos[SYMCOLL_MAX_RANKS][7];
  if (cudaDeviceGetAttribute(&geo[1], cudaDevAttrL2CacheSize, comm->device) != cudaSuccess) geo[1] = 0;
  SYMCOLL_CHECK(comm->oob->allgather(comm, geo, geos, sizeof geo));
  /* Every rank refuses alike: the barriers' atomics on a peer's pad would not be atomic. */
  for (int r = 0; r < comm->nranks; r++)
    if (!geos[r][3]) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT,
                   "rank %d's GPU reaches a peer GPU without native atomics, which the kernels' barriers "
                   "need (NVLink peers have them; PCIe peers often not)",
                   r);
      return SYMCOLL_ERR_UNSUPPORTED;
    }
  cs->l2 = geo[1];
  cs->share = 0;
  int knob = 0; /* the smallest cap a rank asked for (every rank must launch the same grid) */
  cs->push_max = (size_t)geo[5];
  comm->zc_one_shot_bytes = (size_t)geo[6];
  for (int r = 0; r < comm->nranks; r++) {
    if ((size_t)geos[r][5] < cs->push_max) cs->push_max = (size_t)geos[r][5]; /* a protocol: every rank alike */
    if (geos[r][6] == 0 || comm->zc_one_shot_bytes == 0)
      comm->zc_one_shot_bytes = 0;
    else if ((size_t)geos[r][6] > comm->zc_one_shot_bytes)
      comm->zc_one_shot_bytes = (size_t)geos[r][6];
    int same = 0;
    for (int q = 0; q < comm->nranks; q++) same += !strcmp(buses[q], buses[r]);
    if (same > cs->share) cs->share = same;
    if (geos[r][2] > cs->share) cs->share = geos[r][2];
    if (geos[r][0] < cs->sms) cs->sms = geos[r][0];
    if (geos[r][1] < cs->l2) cs->l2 = geos[r][1];
    if (geos[r][4] > 0 && (knob == 0 || geos[r][4] < knob)) knob = geos[r][4];
  }
  /* The most blocks one collective's kernel takes (docs/gpu-tuning-model.md). A GPU per rank:
   * half the SMs, at most 64 (NCCL's symmetric kernels stop there too; a link saturates well
   * before), so that a GEMM on another stream keeps SMs and a second communicator's kernel,
   * also waiting at barriers for its twins on other GPUs, can always be resident beside this
   * one: neither fills the GPU with blocks whose twins cannot be scheduled. Ranks sharing a GPU
   * have resident_blocks' tighter cap (cuda_coll.c); one rank waits for no one: no cap. */
  if (knob > 0)
    cs->grid_cap = knob;
  else if (comm->nranks > 1 && cs->share <= 1)
    cs->grid_cap = cs->sms / 2 < 1 ? 1 : cs->sms / 2 > 64 ? 64 : cs->sms / 2;
  else
    cs->grid_cap = SYMCOLL_CUDA_MAX_BLOCKS;
  return SYMCOLL_OK;
}

/* Offsets of the workspace's parts past the staging buffer (see cuda_host.h). */
typedef struct {
  size_t lp_off, lp_bytes, ll_off, ll_slot, ll_bytes;
} ws_layout_t;

/* The workspace: [staging of ONE_SHOT / TWO_SHOT | two halves of a quarter each for
 * ONE_SHOT_DB | three LAMPORT buffers of nranks slots | two LL buffers of nranks slots],
 * allocated symmetric, LAMPORT's buffers cleared; and the rounds each algorithm stages. */
static symcoll_status_t workspace_setup(symcoll_comm_t comm, cuda_state_t *cs, ws_layout_t *w) {
  symcoll_status_t s = SYMCOLL_OK;
  cs->ws_bytes = (comm->workspace_bytes ? comm->workspace_bytes : CUDA_DEFAULT_WS) & ~(size_t)255;
  if (cs->ws_bytes < 4096) cs->ws_bytes = 4096;
  cs->db_half = (cs->ws_bytes / 4) & ~(size_t)255;
  /* A LAMPORT slot: the data of a launch (round_cap), and 256 bytes for all_reduce_rmsnorm's header. */
  _Static_assert(SYMCOLL_CUDA_LAMPORT_HEADER <= 256, "the header fits the room a slot keeps for it");
  const size_t lp_data = cs->db_half < SYMCOLL_CUDA_LAMPORT_SLOT ? cs->db_half : SYMCOLL_CUDA_LAMPORT_SLOT;
  cs->lp_slot = lp_data + 256;
  w->lp_off = cs->ws_bytes + 2 * cs->db_half;
  w->lp_bytes = 3 * (size_t)comm->nranks * cs->lp_slot;
  w->ll_off = w->lp_off + w->lp_bytes, w->ll_slot = (SYMCOLL_CUDA_LL_SLOT + 255) & ~(size_t)255;
  w->ll_bytes = 2 * (size_t)comm->nranks * w->ll_slot;
  SYMCOLL_CHECK(symcoll__mem_alloc_internal(comm, w->ll_off + w->ll_bytes, &cs->ws));
  /* LAMPORT buffers start cleared; the probe's exchange after this orders it before any
   * peer's first write. */
  CU_GOTO(drv.MemsetD32Async((CUdeviceptr)cs->ws->ptrs[comm->rank] + w->lp_off, 0x80008000u, w->lp_bytes / 4,
                             (CUstream)cs->side),
          s, out);
  CUDA_TRY(cudaStreamSynchronize(cs->side));
  /* A one-shot round streams its input in, stages it, reads every rank's staging back and
   * streams the result out: when a quarter of L2 per rank on this GPU holds the staged round,
   * the read-back hits L2 instead of HBM (H200, world 1, 32 MB: 31 us in 16 MB rounds against
   * 39 us in 25 MB ones). */
  size_t l2_round = ((size_t)cs->l2 / 4 / (size_t)cs->share) & ~(size_t)255;
  if (l2_round < ((size_t)1 << 20)) l2_round = (size_t)1 << 20;
  /* A round is at most the algorithm's staging buffer (LAMPORT: a slot, per launch); two-shot
   * and LAMPORT use all of it, the one-shots at most l2_round. */
  cs->round_cap[SYMCOLL_ALGO_ONE_SHOT] = cs->round_cap[SYMCOLL_ALGO_TWO_SHOT] = cs->ws_bytes;
  cs->round_cap[SYMCOLL_ALGO_ONE_SHOT_DB] = cs->db_half;
  cs->round_cap[SYMCOLL_ALGO_LAMPORT] = lp_data;
  cs->round_cap[SYMCOLL_ALGO_PULL] = cs->round_cap[SYMCOLL_ALGO_PUSH] = cs->db_half;
  cs->round_cap[SYMCOLL_ALGO_COPY_ENGINE] = cs->ws_bytes;
  for (int x = 0; x < SYMCOLL_NUM_ALGOS; x++) {
    const bool one_shot = x == SYMCOLL_ALGO_ONE_SHOT || x == SYMCOLL_ALGO_ONE_SHOT_DB;
    cs->round_bytes[x] = one_shot && l2_round < cs->round_cap[x] ? l2_round : cs->round_cap[x];
  }
out:
  return s;
}

/* The kernels' arguments every launch starts from: peers' workspace parts and pads, this
 * rank's state words, the error word and its host copy, the timeout. */
static symcoll_status_t fill_args(symcoll_comm_t comm, cuda_state_t *cs, const ws_layout_t *w) {
  cuda_mem_t *cm = cs->ws->tp;
  char *aux = (char *)cs->ws->ptrs[comm->rank] + cm->aux_off;
  symcoll__cuda_args_t *a = &cs->args;
  for (int r = 0; r < comm->nranks; r++) {
    a->ws[r] = cs->ws->ptrs[r];
    a->db[r] = (char *)cs->ws->ptrs[r] + cs->ws_bytes;
    a->pad[r] = (uint32_t *)((char *)cs->ws->ptrs[r] + cm->pad_off);
  }
  a->db_half_bytes = cs->db_half;
  a->lp_off = w->lp_off;
  a->lp_slot_bytes = cs->lp_slot;
  a->lp_state = (uint32_t *)(aux + AUX_LP_STATE);
  a->db_epoch = (uint32_t *)(aux + AUX_DB_STATE);
  a->ll_off = w->ll_off; /* zeroed at allocation: no packet there carries a call number */
  a->ll_slot_bytes = w->ll_slot;
  a->ll_epoch = (uint32_t *)(aux + AUX_LL_STATE);
  a->error = cs->err;
  CUDA_TRY(cudaHostGetDevicePointer((void **)&a->host_error, cs->host_err, 0));
  a->timeout_ns = (uint64_t)comm->timeout_ms * 1000000ull;
  a->rank = comm->rank;
  a->nranks = comm->nranks;
  a->root = -1; /* broadcast and reduce set theirs */
  return SYMCOLL_OK;
}

/* The private stream of set-up, the probe, abort and the error word's reads: short work the
 * host waits for, never a kernel that waits for a peer. One per GPU for the whole process, not
 * one per communicator: thread ranks with groups of groups would otherwise hold more streams
 * than the GPU has hardware queues (CUDA_DEVICE_MAX_CONNECTIONS, at most 32), and a stream
 * that shares a queue with a peer's waiting kernel waits behind it, so a rank's set-up or
 * symcoll_comm_check could wait for the very kernel that waits for this rank. Made on the first
 * communicator of the GPU (the device is current), made again if it went stale (a device reset). */
#define SIDE_DEVICES 64
static cudaStream_t side_streams[SIDE_DEVICES];
static pthread_mutex_t side_lock = PTHREAD_MUTEX_INITIALIZER;
static cudaError_t side_stream(cuda_state_t *cs, int device) {
  if (device < 0 || device >= SIDE_DEVICES) {
    cs->side_owned = true;
    return cudaStreamCreateWithFlags(&cs->side, cudaStreamNonBlocking);
  }
  cudaError_t e = cudaSuccess;
  pthread_mutex_lock(&side_lock);
  cudaStream_t *s = &side_streams[device];
  if (*s) {
    const cudaError_t q = cudaStreamQuery(*s);
    if (q != cudaSuccess && q != cudaErrorNotReady) cudaGetLastError(), *s = NULL;
  }
  if (!*s) e = cudaStreamCreateWithFlags(s, cudaStreamNonBlocking);
  cs->side = e == cudaSuccess ? *s : NULL;
  pthread_mutex_unlock(&side_lock);
  return e;
}

static symcoll_status_t cuda_comm_init(symcoll_comm_t comm) {
  if (comm->nranks > SYMCOLL_CUDA_MAX_RANKS) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "a CUDA communicator has at most %d ranks (one NVLink node); asked for %d",
                 SYMCOLL_CUDA_MAX_RANKS, comm->nranks);
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  SYMCOLL_CHECK(drv_load());
  symcoll_status_t s = SYMCOLL_OK;
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || comm->device >= ndev) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "rank %d: no CUDA device %d (%s)", comm->rank, comm->device,
                 e != cudaSuccess ? cudaGetErrorString(e) : "ordinal out of range");
    return SYMCOLL_ERR_CUDA;
  }
  cuda_state_t *cs = calloc(1, sizeof *cs);
  if (!cs) return SYMCOLL_ERR_NO_MEMORY;
  cs->dev = comm->device;
  cs->signature = symcoll__env_int("SYMCOLL_GPU_SIGNATURE") != 0;
  comm->tp_state = cs;
  dev_guard_t g;
  SYMCOLL_CHECK(dev_enter(comm, &g));
  CUDA_GOTO(cudaFree(0), s, out); /* the primary context */
  CUDA_GOTO((cudaError_t)symcoll__cuda_preload(), s, out);
  CUDA_GOTO(side_stream(cs, comm->device), s, out);
  CUDA_GOTO(cudaHostAlloc((void **)&cs->host_err, sizeof *cs->host_err, cudaHostAllocMapped | cudaHostAllocPortable), s,
            out);
  *cs->host_err = 0;
  CUDA_GOTO(cudaDeviceGetAttribute(&cs->sms, cudaDevAttrMultiProcessorCount, comm->device), s, out);
  int major = 0;
  CUDA_GOTO(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, comm->device), s, out);
  /* Hopper and later, with kernels compiled for it (code built for an older target, PTX run by
   * a newer GPU, has neither clusters nor a wait in its guard): thread-block clusters (the
   * norm's LAMPORT spreads a row over a cluster's blocks) and, where asked, programmatic
   * dependent launch, this rank's choice alone (it changes when a kernel may be scheduled, not
   * what it does). */
  const bool pdl_asked = symcoll__env_int("SYMCOLL_PDL") != 0;
  const int ptx = major >= 9 ? symcoll__cuda_kernels_ptx_version() : 0;
  cs->clusters = major >= 9 && ptx >= 90;
  cs->pdl = pdl_asked && cs->clusters;
  cs->norm_row_blocks = (int)symcoll__env_int("SYMCOLL_GPU_NORM_ROW_BLOCKS");
  if (pdl_asked && !cs->pdl)
    symcoll__env_warn("SYMCOLL_PDL",
                      "programmatic dependent launch needs compute capability 9.0 or later and kernels "
                      "built for it (GPU %d: %d.x, kernels: compute_%d): ordinary launches",
                      comm->device, major, ptx);
  char bus[32] = {0};
  SYMCOLL_CHECK_GOTO(place_ranks(comm, cs, bus), s, out);
  ws_layout_t w;
  SYMCOLL_CHECK_GOTO(workspace_setup(comm, cs, &w), s, out);
  comm->workspace = cs->ws;
  cs->err = (uint32_t *)((char *)cs->ws->ptrs[comm->rank] + ((cuda_mem_t *)cs->ws->tp)->aux_off + AUX_ERR);
  SYMCOLL_CHECK_GOTO(probe_peers(comm, cs), s, out);
  SYMCOLL_CHECK_GOTO(fill_args(comm, cs, &w), s, out);
  SYMCOLL_CHECK_GOTO(symcoll__cuda_gemm_init(comm), s, out);
  const char *loading = getenv("CUDA_MODULE_LOADING");
  static atomic_int warned_loading; /* once per process, not per communicator */
  if (cs->share > 1 && cs->lt && (!loading || strcmp(loading, "EAGER") != 0) && !atomic_exchange(&warned_loading, 1))
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT,
                 "%d ranks share a GPU and CUDA_MODULE_LOADING is not EAGER: cuBLASLt loads a "
                 "kernel at its first launch, which can wait for the GPU to go idle while a peer's kernel waits for "
                 "this rank (a TIMEOUT); set CUDA_MODULE_LOADING=EAGER before CUDA starts",
                 cs->share);
  SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT,
               "cuda transport: rank %d of %d on GPU %d (%s), %d ranks share it, workspace %zu bytes%s", comm->rank,
               comm->nranks, comm->device, bus, comm->ranks_on_my_device, cs->ws_bytes,
               cs->pdl ? ", programmatic dependent launch" : "");
out:
  dev_leave(comm, &g);
  return s;
}

static void cuda_comm_fini(symcoll_comm_t comm) {
  cuda_state_t *cs = comm->tp_state;
  if (!cs) return;
  dev_guard_t g;
  if (dev_enter(comm, &g) == SYMCOLL_OK) {
    if (cs->side && cs->side_owned) cudaStreamDestroy(cs->side);
    if (cs->host_err) cudaFreeHost(cs->host_err);
    symcoll__cuda_gemm_fini(comm);
    symcoll__nccl_fini(&cs->nccl);
    dev_leave(comm, &g);
  }
  free(cs);
  comm->tp_state = NULL;
}

/* Raises the device error word so that every spinning wait of our kernels gives up (they look
 * at it every 64 polls). A plain copy on the private non-blocking stream runs beside them. */
static void cuda_abort(symcoll_comm_t comm, symcoll_status_t status) {
  cuda_state_t *cs = comm->tp_state;
  if (!cs || !cs->err) return;
  static const uint32_t words[] = {SYMCOLL_DEV_ERR_WORD(SYMCOLL_ERR_ABORTED, 0xff, 0xff),
                                   SYMCOLL_DEV_ERR_WORD(SYMCOLL_ERR_PEER_LOST, 0xff, 0xff)};
  const uint32_t *w = status == SYMCOLL_ERR_PEER_LOST ? &words[1] : &words[0];
  dev_guard_t g;
  if (dev_enter(comm, &g) != SYMCOLL_OK) return;
  cudaMemcpyAsync(cs->err, w, sizeof *w, cudaMemcpyHostToDevice, cs->side);
  cudaStreamSynchronize(cs->side);
  symcoll__nccl_abort(&cs->nccl);
  dev_leave(comm, &g);
}

/* The status in an error word; the first time, a WARN that names the rank and the peer it
 * waited for, and the communicator's failure is recorded (later calls are refused). */
static symcoll_status_t failure_of(symcoll_comm_t comm, uint32_t word) {
  symcoll_status_t s = (symcoll_status_t)(-(int)(word & 0xff));
  if (atomic_load(&comm->failed) == 0 && ((word >> 8) & 0xff) != 0xff)
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL,
                 "rank %d (GPU %d): a kernel gave up waiting for rank %d: %s; the communicator "
                 "refuses further calls (destroy it and make a new one)",
                 (int)((word >> 16) & 0xff), comm->device, (int)((word >> 8) & 0xff), symcoll_status_string(s));
  symcoll__comm_fail(comm, s);
  return s;
}

symcoll_status_t symcoll__cuda_failed(symcoll_comm_t comm) {
  const cuda_state_t *cs = comm->tp_state;
  const uint32_t word = cs->host_err ? *(volatile const uint32_t *)cs->host_err : 0;
  return word ? failure_of(comm, word) : SYMCOLL_OK;
}

static symcoll_status_t cuda_check(symcoll_comm_t comm) {
  cuda_state_t *cs = comm->tp_state;
  SYMCOLL_CHECK(symcoll__cuda_failed(comm));
  uint32_t word = 0;
  dev_guard_t g;
  SYMCOLL_CHECK(dev_enter(comm, &g));
  cudaError_t e = cudaMemcpyAsync(&word, cs->err, sizeof word, cudaMemcpyDeviceToHost, cs->side);
  if (e == cudaSuccess) e = cudaStreamSynchronize(cs->side);
  dev_leave(comm, &g);
  if (e != cudaSuccess) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "reading the async error word failed: %s", cudaGetErrorString(e));
    return SYMCOLL_ERR_CUDA;
  }
  return word ? failure_of(comm, word) : SYMCOLL_OK;
}

/* ---- algorithms this communicator runs ------------------------------------------------------ */

static symcoll_status_t cuda_tune_ready(symcoll_comm_t comm) {
  cuda_state_t *cs = comm->tp_state;
  dev_guard_t g;
  SYMCOLL_CHECK(dev_enter(comm, &g));
  symcoll_status_t s = symcoll__nccl_setup(comm, &cs->nccl);
  dev_leave(comm, &g);
  return s;
}

/* Core asks only about algorithms of the collective's row (colls.c). */
static bool cuda_has_algo(symcoll_comm_t comm, symcoll_coll_t coll, symcoll_algo_t algo) {
  cuda_state_t *cs = comm->tp_state;
  if (algo == SYMCOLL_ALGO_NCCL) return cs->nccl.comm != NULL;
  switch (coll) {
    case SYMCOLL_COLL_ALL_REDUCE:
    case SYMCOLL_COLL_ALL_GATHER:
    case SYMCOLL_COLL_REDUCE_SCATTER:
    case SYMCOLL_COLL_ALL_GATHER_MATMUL:
    case SYMCOLL_COLL_MATMUL_REDUCE_SCATTER:
      return true; /* every algorithm of their rows */
    case SYMCOLL_COLL_BROADCAST:
      return algo == SYMCOLL_ALGO_PULL || algo == SYMCOLL_ALGO_LAMPORT || algo == SYMCOLL_ALGO_COPY_ENGINE;
    case SYMCOLL_COLL_REDUCE:
      return algo == SYMCOLL_ALGO_ONE_SHOT;
    case SYMCOLL_COLL_ALL_TO_ALL:
      return algo == SYMCOLL_ALGO_PULL || algo == SYMCOLL_ALGO_PUSH || algo == SYMCOLL_ALGO_LAMPORT ||
             algo == SYMCOLL_ALGO_COPY_ENGINE;
    case SYMCOLL_COLL_ALL_REDUCE_RMSNORM: /* symcoll__cuda_norm: SEQUENTIAL is its local pass */
      return algo == SYMCOLL_ALGO_ONE_SHOT || algo == SYMCOLL_ALGO_TWO_SHOT || algo == SYMCOLL_ALGO_LAMPORT ||
             algo == SYMCOLL_ALGO_SEQUENTIAL;
    case SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM: /* PULL: the one-shot norm kernel over this rank's block */
      return algo == SYMCOLL_ALGO_PULL || algo == SYMCOLL_ALGO_SEQUENTIAL;
    case SYMCOLL_NUM_COLL_KINDS:
      break;
  }
  return false;
}

/* The tuning table's class of a CUDA communicator: "shared" where ranks share a GPU (threads,
 * or processes under MPS: an emulated node, whose "peers" are the one GPU's L2 and HBM), else
 * "nvlink" (a GPU a rank, peers across the node's links), so that rows measured on one kind do
 * not steer the other (docs/gpu-tuning-model.md). */
static const char *cuda_tune_class(symcoll_comm_t comm) {
  const cuda_state_t *cs = comm->tp_state;
  return cs && cs->share > 1 ? "shared" : "nvlink";
}

const symcoll__transport_t symcoll__cuda_transport = {
    .name = "cuda",
    .comm_init = cuda_comm_init,
    .comm_fini = cuda_comm_fini,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .mem_device_view = cuda_mem_device_view,
    .mem_register = cuda_mem_register,
    .local_alloc = cuda_local_alloc,
    .local_free = cuda_local_free,
    .coll = symcoll__cuda_coll,
    .copy = symcoll__cuda_copy,
    .scale = symcoll__cuda_scale_op,
    .check = cuda_check,
    .tune_ready = cuda_tune_ready,
    .has_algo = cuda_has_algo,
    .gemm = symcoll__cuda_gemm,
    .has_gemm = symcoll__cuda_has_gemm,
    .scratch_alloc = symcoll__cuda_scratch_alloc,
    .scratch_free = symcoll__cuda_scratch_free,
    .matmul = symcoll__cuda_matmul,
    .norm = symcoll__cuda_norm,
    .tune_class = cuda_tune_class,
    .abort = cuda_abort,
};
