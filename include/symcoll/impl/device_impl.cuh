/* Implementation part of symcoll_device.cuh: read the contracts there. */
#ifndef SYMCOLL_DEVICE_IMPL_CUH
#define SYMCOLL_DEVICE_IMPL_CUH

namespace symcoll_impl {

__device__ __forceinline__ uint64_t globaltimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint32_t cas_release_sys(uint32_t *addr, uint32_t cmp, uint32_t val) {
  uint32_t old;
  asm volatile("atom.release.sys.global.cas.b32 %0, [%1], %2, %3;"
               : "=r"(old) : "l"(addr), "r"(cmp), "r"(val) : "memory");
  return old;
}

__device__ __forceinline__ uint32_t cas_acquire_sys(uint32_t *addr, uint32_t cmp, uint32_t val) {
  uint32_t old;
  asm volatile("atom.acquire.sys.global.cas.b32 %0, [%1], %2, %3;"
               : "=r"(old) : "l"(addr), "r"(cmp), "r"(val) : "memory");
  return old;
}

__device__ __forceinline__ uint32_t ld_relaxed_sys(const uint32_t *addr) {
  uint32_t v;
  asm volatile("ld.relaxed.sys.global.b32 %0, [%1];" : "=r"(v) : "l"(addr) : "memory");
  return v;
}

/* Records the first error of the communicator; later ones keep the first. */
__device__ __forceinline__ void raise_error(uint32_t *error, int status, int peer, int rank) {
  if (error) atomicCAS_system(error, 0u, SYMCOLL_DEV_ERR_WORD(status, peer, rank));
}

/* Spins on `try_once` until it succeeds, the deadline passes, or an error was raised. */
template <typename F>
__device__ __forceinline__ bool spin(F try_once, uint64_t timeout_ns, uint32_t *error, int peer,
                                     int rank) {
  if (try_once()) return true;
  const uint64_t deadline = globaltimer() + timeout_ns;
  for (uint32_t i = 0;; i++) {
    if (try_once()) return true;
    if ((i & 63) == 63) {
      if (error && ld_relaxed_sys(error) != 0) return false; /* another wait already failed */
      if (globaltimer() > deadline) {
        raise_error(error, SYMCOLL_ERR_TIMEOUT, peer, rank);
        return false;
      }
    }
  }
}

__device__ __forceinline__ bool put_signal(uint32_t *slot, uint64_t timeout_ns, uint32_t *error,
                                           int peer, int rank) {
  /* 0 -> 1; if the peer has not consumed the previous round's signal yet, wait for it. */
  return spin([&] { return cas_release_sys(slot, 0u, 1u) == 0u; }, timeout_ns, error, peer, rank);
}

__device__ __forceinline__ bool wait_signal(uint32_t *slot, uint64_t timeout_ns, uint32_t *error,
                                            int peer, int rank) {
  return spin([&] { return cas_acquire_sys(slot, 1u, 0u) == 1u; }, timeout_ns, error, peer, rank);
}

/* Thread t < nranks of the block signals rank t's slot [slot][rank] and waits for rank t's
 * signal in its own slot [slot][t]. __syncthreads before makes the block's writes part of
 * the release; after, it spreads the acquire to the block. */
__device__ __forceinline__ bool block_barrier(uint32_t *const *pads, uint32_t slot, int rank,
                                              int nranks, uint64_t timeout_ns, uint32_t *error) {
  __syncthreads();
  bool ok = true;
  const int t = (int)threadIdx.x;
  if (t < nranks && nranks > 1) {
    ok = put_signal(pads[t] + (size_t)slot * SYMCOLL_MAX_RANKS + rank, timeout_ns, error, t, rank) &&
         wait_signal(pads[rank] + (size_t)slot * SYMCOLL_MAX_RANKS + t, timeout_ns, error, t, rank);
  }
  return __syncthreads_and(ok) != 0;
}

}  // namespace symcoll_impl
#endif
