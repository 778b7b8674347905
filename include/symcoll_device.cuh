/*
 * symcoll device API: synchronisation across ranks from inside a user's kernel.
 *
 * Get a symcoll_device_view_t for a symmetric allocation on the host
 * (symcoll_mem_device_view) and pass it *by value* as a kernel argument: it carries every
 * peer's buffer and signal-pad pointer, so no pointer table and no extra launch are needed.
 *
 * Signal pads: each rank owns view.pad_slots x SYMCOLL_MAX_RANKS 32-bit slots; slot
 * [s][r] on rank q is where rank r signals rank q. The protocol is self-resetting: a signal
 * turns a slot 0 -> 1 (release, system scope), the matching wait turns it 1 -> 0 (acquire,
 * system scope), so every slot is back at 0 after each round and graphs replay cleanly.
 *
 *   symcoll_dev_signal(view, slot, peer)         signal `peer` on `slot` (one thread)
 *   symcoll_dev_wait(view, slot, peer)           wait for `peer`'s signal on `slot` (one thread)
 *   symcoll_dev_barrier_block(view, slot)        all threads of the block: every rank's block
 *                                                using the same slot meets here
 * Each returns true on success. The waits are bounded by view.timeout_ns (%globaltimer);
 * on timeout they record SYMCOLL_ERR_TIMEOUT and the missing peer in the communicator's
 * async error word (read by symcoll_comm_check) and return false instead of hanging:
 * the kernel should then return.
 *
 * Load your kernel before ranks start waiting on each other (cudaFuncGetAttributes on it once,
 * or CUDA_MODULE_LOADING=EAGER): with lazy loading, the first launch of a kernel can wait for
 * the device to go idle, which never happens while a peer's kernel spins waiting for yours.
 * Likewise make CUDA allocations (cudaMalloc, streams) before the ranks start waiting: such
 * calls can block while a peer's kernel spins.
 * Launch no more blocks than can be resident together with every other rank's kernel on the
 * same GPU (ranks sharing a GPU in thread mode or under MPS).
 */
#ifndef SYMCOLL_DEVICE_CUH
#define SYMCOLL_DEVICE_CUH

#include <stdint.h>

#include "symcoll.h"

#include "symcoll/impl/device_impl.cuh"

/* Signal `peer` on `slot`. Prior writes of the calling thread (and, after a __syncthreads,
 * of its block) become visible to the peer before it sees the signal. */
__device__ inline bool symcoll_dev_signal(const symcoll_device_view_t &v, uint32_t slot, int peer) {
  return symcoll_impl::put_signal(v.pad[peer] + (size_t)slot * SYMCOLL_MAX_RANKS + v.rank,
                                  v.timeout_ns, v.error, peer, v.rank);
}

/* Wait until `peer` signals this rank on `slot`; its prior writes are then visible. */
__device__ inline bool symcoll_dev_wait(const symcoll_device_view_t &v, uint32_t slot, int peer) {
  return symcoll_impl::wait_signal(v.pad[v.rank] + (size_t)slot * SYMCOLL_MAX_RANKS + peer,
                                   v.timeout_ns, v.error, peer, v.rank);
}

/* Block-wise barrier across ranks: call from every thread of the block. */
__device__ inline bool symcoll_dev_barrier_block(const symcoll_device_view_t &v, uint32_t slot) {
  return symcoll_impl::block_barrier(v.pad, slot, v.rank, v.nranks, v.timeout_ns, v.error);
}

#endif /* SYMCOLL_DEVICE_CUH */
