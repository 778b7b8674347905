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
 *
 * Value signals, for progress that counts up (chunks of a pipeline, epochs of a loop): a slot
 * holds the last value stored, nothing resets it. Use them on slots the self-resetting calls
 * above never touch, and start from the zeroed pad (values > 0).
 *   symcoll_dev_signal_value(view, slot, peer, v)  store v into `peer`'s slot [slot][rank],
 *                                                  release (one thread)
 *   symcoll_dev_wait_value(view, slot, peer, v)    wait until this rank's slot [slot][peer]
 *                                                  holds at least v, acquire (one thread)
 *
 * Block copies between this rank and a peer's part of the allocation (all threads of the
 * block; 16-byte pieces when both addresses are 16-byte aligned):
 *   symcoll_dev_put_block(view, peer, dst_off, src, bytes)   this rank's src -> peer's buf + dst_off
 *   symcoll_dev_get_block(view, peer, src_off, dst, bytes)   peer's buf + src_off -> this rank's dst
 * A put followed by __syncthreads and symcoll_dev_signal(_value) from one thread makes the
 * data visible to the peer once it has seen the signal.
 *
 * Each wait returns true on success. The waits are bounded by view.timeout_ns (%globaltimer);
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
  return symcoll_impl::put_signal(v.pad[peer] + (size_t)slot * SYMCOLL_MAX_RANKS + v.rank, v.timeout_ns, v.error, peer,
                                  v.rank);
}

/* Wait until `peer` signals this rank on `slot`; its prior writes are then visible. */
__device__ inline bool symcoll_dev_wait(const symcoll_device_view_t &v, uint32_t slot, int peer) {
  return symcoll_impl::wait_signal(v.pad[v.rank] + (size_t)slot * SYMCOLL_MAX_RANKS + peer, v.timeout_ns, v.error, peer,
                                   v.rank);
}

/* Block-wise barrier across ranks: call from every thread of the block. */
__device__ inline bool symcoll_dev_barrier_block(const symcoll_device_view_t &v, uint32_t slot) {
  return symcoll_impl::block_barrier(v.pad, slot, v.rank, v.nranks, v.timeout_ns, v.error);
}

/* Store `value` into `peer`'s slot [slot][rank], ordered after this thread's prior writes. */
__device__ inline void symcoll_dev_signal_value(const symcoll_device_view_t &v, uint32_t slot, int peer,
                                                uint32_t value) {
  symcoll_impl::st_release_sys(v.pad[peer] + (size_t)slot * SYMCOLL_MAX_RANKS + v.rank, value);
}

/* Wait until this rank's slot [slot][peer] holds at least `value`; the peer's writes before
 * its signal are then visible to this thread. */
__device__ inline bool symcoll_dev_wait_value(const symcoll_device_view_t &v, uint32_t slot, int peer, uint32_t value) {
  const uint32_t *p = v.pad[v.rank] + (size_t)slot * SYMCOLL_MAX_RANKS + peer;
  return symcoll_impl::spin([&] { return symcoll_impl::ld_acquire_sys(p) >= value; }, v.timeout_ns, v.error, peer,
                            v.rank);
}

/* Copy `bytes` from this rank's `src` into `peer`'s buffer at `dst_off` (whole block). */
__device__ inline void symcoll_dev_put_block(const symcoll_device_view_t &v, int peer, size_t dst_off, const void *src,
                                             size_t bytes) {
  symcoll_impl::block_copy((char *)v.buf[peer] + dst_off, (const char *)src, bytes);
}

/* Copy `bytes` from `peer`'s buffer at `src_off` into this rank's `dst` (whole block). */
__device__ inline void symcoll_dev_get_block(const symcoll_device_view_t &v, int peer, size_t src_off, void *dst,
                                             size_t bytes) {
  symcoll_impl::block_copy((char *)dst, (const char *)v.buf[peer] + src_off, bytes);
}

#endif /* SYMCOLL_DEVICE_CUH */
