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
               : "=r"(old)
               : "l"(addr), "r"(cmp), "r"(val)
               : "memory");
  return old;
}

__device__ __forceinline__ uint32_t cas_acquire_sys(uint32_t *addr, uint32_t cmp, uint32_t val) {
  uint32_t old;
  asm volatile("atom.acquire.sys.global.cas.b32 %0, [%1], %2, %3;"
               : "=r"(old)
               : "l"(addr), "r"(cmp), "r"(val)
               : "memory");
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

/* A spinning wait's check, every 64 tries: whether it gives up, because another wait already
 * failed (the error word is set) or its deadline passed (then recorded as TIMEOUT). */
__device__ __forceinline__ bool spin_gives_up(uint64_t deadline, uint32_t *error, int peer, int rank) {
  if (error && ld_relaxed_sys(error) != 0) return true;
  if (globaltimer() <= deadline) return false;
  raise_error(error, SYMCOLL_ERR_TIMEOUT, peer, rank);
  return true;
}

/* Spins on `try_once` until it succeeds, the deadline passes, or an error was raised. */
template <typename F>
__device__ __forceinline__ bool spin(F try_once, uint64_t timeout_ns, uint32_t *error, int peer, int rank) {
  if (try_once()) return true;
  const uint64_t deadline = globaltimer() + timeout_ns;
  for (uint32_t i = 0;; i++) {
    if (try_once()) return true;
    if ((i & 63) == 63 && spin_gives_up(deadline, error, peer, rank)) return false;
  }
}

__device__ __forceinline__ bool put_signal(uint32_t *slot, uint64_t timeout_ns, uint32_t *error, int peer, int rank) {
  /* 0 -> 1; if the peer has not consumed the previous round's signal yet, wait for it. */
  return spin([&] { return cas_release_sys(slot, 0u, 1u) == 0u; }, timeout_ns, error, peer, rank);
}

__device__ __forceinline__ bool wait_signal(uint32_t *slot, uint64_t timeout_ns, uint32_t *error, int peer, int rank) {
  return spin([&] { return cas_acquire_sys(slot, 1u, 0u) == 1u; }, timeout_ns, error, peer, rank);
}

/* put_signal / wait_signal with `value` (never 0) in place of 1. A waiter that finds another
 * non-zero value there meets a peer in another call: it records SYMCOLL_ERR_MISMATCH and
 * gives up. */
__device__ __forceinline__ bool put_value(uint32_t *slot, uint32_t value, uint64_t timeout_ns, uint32_t *error,
                                          int peer, int rank) {
  return spin([&] { return cas_release_sys(slot, 0u, value) == 0u; }, timeout_ns, error, peer, rank);
}
__device__ __forceinline__ bool wait_value(uint32_t *slot, uint32_t value, uint64_t timeout_ns, uint32_t *error,
                                           int peer, int rank) {
  bool other = false;
  const bool ok = spin(
      [&] {
        const uint32_t old = cas_acquire_sys(slot, value, 0u);
        other = old != 0u && old != value;
        return old == value || other;
      },
      timeout_ns, error, peer, rank);
  if (other) raise_error(error, SYMCOLL_ERR_MISMATCH, peer, rank);
  return ok && !other;
}

/* Thread t < nranks of the block signals rank t's slot [slot][rank] with `value` and waits for
 * rank t's signal in its own slot [slot][t]. __syncthreads before makes the block's writes
 * part of the release; after, it spreads the acquire to the block. */
__device__ __forceinline__ bool block_barrier_value(uint32_t *const *pads, uint32_t slot, int rank, int nranks,
                                                    uint32_t value, uint64_t timeout_ns, uint32_t *error) {
  __syncthreads();
  bool ok = true;
  const int t = (int)threadIdx.x;
  if (t < nranks && nranks > 1) {
    ok = put_value(pads[t] + (size_t)slot * SYMCOLL_MAX_RANKS + rank, value, timeout_ns, error, t, rank) &&
         wait_value(pads[rank] + (size_t)slot * SYMCOLL_MAX_RANKS + t, value, timeout_ns, error, t, rank);
  }
  return __syncthreads_and(ok) != 0;
}

__device__ __forceinline__ bool block_barrier(uint32_t *const *pads, uint32_t slot, int rank, int nranks,
                                              uint64_t timeout_ns, uint32_t *error) {
  return block_barrier_value(pads, slot, rank, nranks, 1u, timeout_ns, error);
}

/* Release stores and acquire loads at system scope, of 4 and 8 bytes. */
__device__ __forceinline__ void st_release_sys(uint32_t *addr, uint32_t v) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void st_release_sys(uint64_t *addr, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(addr), "l"(v) : "memory");
}
__device__ __forceinline__ uint32_t ld_acquire_sys(const uint32_t *addr) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(addr) : "memory");
  return v;
}
__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t *addr) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(addr) : "memory");
  return v;
}

/* Block-wide copy of `bytes` (16-byte pieces when both ends allow, bytes otherwise). */
__device__ __forceinline__ void block_copy(char *dst, const char *src, size_t bytes) {
  if ((((uintptr_t)dst | (uintptr_t)src) & 15) == 0) {
    const size_t nv = bytes / 16;
    for (size_t i = threadIdx.x; i < nv; i += blockDim.x)
      reinterpret_cast<uint4 *>(dst)[i] = __ldcg(reinterpret_cast<const uint4 *>(src) + i);
    for (size_t i = nv * 16 + threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
  } else {
    for (size_t i = threadIdx.x; i < bytes; i += blockDim.x) dst[i] = src[i];
  }
}

}  // namespace symcoll_impl
#endif
