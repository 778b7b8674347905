/*
 * Broadcast kernels: the root's `count` elements into every rank's recv. Bytes are moved, not
 * combined: instantiated per element size (unsigned types of 1, 2, 4, 8 bytes) and per vector
 * path, as the all-gather kernels. a.root is the root; a.send is NULL on every other rank.
 *
 * Broadcast_Pull: the root stages its share of each round in one half of the double buffer
 *   (call k uses half k % 2, counted per block slot as AllGather_Pull: its previous kernel met
 *   every peer, so nobody reads the half of call k-2 any more), every rank meets its twins at
 *   a barrier, then each other rank copies the round from the root's half into its recv while
 *   the root copies send to recv (nothing in place). Rounds inside a call meet again before the
 *   root restages the half. The root always stages: the others cannot know whether its input
 *   is symmetric (their send is NULL), and every rank must launch the same protocol.
 * Broadcast_LL: no barrier: the root writes its block as LL packets into slot [root] of every
 *   peer's LL buffer; every rank (the root too) writes a header with the call's signature into
 *   every peer's slot and checks every peer's header before it writes anything, then the
 *   others poll the root's packets. The headers are not only for MISMATCH: they keep the LL
 *   buffers' reuse rule of every LL kernel (a rank in call k has seen every peer's header of
 *   call k-1, so every peer has finished call k-2, the last that read the buffer call k
 *   writes), which a root that heard from nobody would break by running ahead.
 */
#include "device_common.cuh"

namespace symcoll_cuda {
namespace {

template <typename T, bool VEC>
__global__ void __launch_bounds__(1024) Broadcast_Pull(const symcoll__cuda_args_t a) {
  const symcoll_cuda::GridDependency dependency;
  constexpr int U = unit_access<VEC>(), E = Pack<T, U>::E;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t epoch;
  if (!take_state(
          a, a.db_epoch, [](uint32_t e) { return e + 1u; }, &epoch))
    GIVE_UP(a);
  const size_t half = (size_t)(epoch & 1u) * a.db_half_bytes;
  const uint32_t meet = sig_with_state(a.sig, epoch & 1u); /* ranks on other halves: MISMATCH */
  const bool root = a.rank == a.root;
  for (size_t base = 0; base < a.count; base += a.chunk_elems) {
    if (base > 0) BARRIER_VALUE(a, meet); /* every rank is done with the previous round's staging */
    const size_t n = a.count - base < a.chunk_elems ? a.count - base : a.chunk_elems;
    const size_t nvec = n / E, tail = n - nvec * E;
    const int j = owns_tail(first, stride, nvec, tail); /* this thread's tail element, or -1 */
    char *out = a.recv + base * sizeof(T);
    if (root) stage<T, U>(a.db[a.rank] + half, a.send + base * sizeof(T), nvec, tail, first, stride);
    BARRIER_VALUE(a, meet);
    if (!root)
      copy_share<T, U>(out, a.db[a.root] + half, nvec, first, stride, j);
    else if (a.send != a.recv)
      copy_share<T, U>(out, a.send + base * sizeof(T), nvec, first, stride, j);
  }
}

/* Counts in bytes (the host passes byte counts). */
template <bool ALIGNED>
__global__ void __launch_bounds__(1024) Broadcast_LL(const symcoll__cuda_args_t a) {
  const symcoll_cuda::GridDependency dependency;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t bytes = a.count, words = (bytes + 7) / 8;
  const bool root = a.rank == a.root;
  uint32_t flag;
  if (!ll_epoch(a, &flag)) GIVE_UP(a);
  const uint32_t buf = flag & 1u;
  if (root)
    for (size_t w = first; w < words; w += stride) {
      uint32_t lo, hi;
      word_load<ALIGNED>(a.send, w, bytes, &lo, &hi);
      for (int k = 1; k < a.nranks; k++)
        ll_store(ll_slot(a, (a.rank + k) % a.nranks, buf, a.rank) + 16, w, lo, hi, flag);
    }
  if (blockIdx.x == 0 && (int)threadIdx.x < a.nranks && (int)threadIdx.x != a.rank)
    ll_put_header(ll_slot(a, threadIdx.x, buf, a.rank), a.sig, flag);
  if (!ll_headers_ok(a, buf, flag)) GIVE_UP(a);
  for (size_t w = first; w < words; w += stride) {
    uint32_t lo, hi;
    if (!root) {
      if (!ll_load(ll_slot(a, a.rank, buf, a.root) + 16, w, flag, a, a.root, &lo, &hi)) GIVE_UP(a);
    } else if (a.send != a.recv) {
      word_load<ALIGNED>(a.send, w, bytes, &lo, &hi);
    } else {
      continue;
    }
    word_store<ALIGNED>(a.recv, w, bytes, lo, hi);
  }
}

template <typename T>
const void *pick(const symcoll__cuda_launch_t *l) {
  switch (l->algo) {
    case SYMCOLL_ALGO_PULL:
      return l->vec ? (const void *)Broadcast_Pull<T, true> : (const void *)Broadcast_Pull<T, false>;
    case SYMCOLL_ALGO_LAMPORT:
      return l->vec ? (const void *)Broadcast_LL<true> : (const void *)Broadcast_LL<false>;
    default:
      return nullptr; /* copy_engine: no kernel of its own */
  }
}

}  // namespace
}  // namespace symcoll_cuda

extern "C" const void *symcoll__cuda_broadcast_kernel(const symcoll__cuda_launch_t *l) {
  switch (symcoll_dtype_size(l->dtype)) {
    case 1:
      return symcoll_cuda::pick<unsigned char>(l);
    case 2:
      return symcoll_cuda::pick<unsigned short>(l);
    case 4:
      return symcoll_cuda::pick<unsigned int>(l);
    default:
      return symcoll_cuda::pick<unsigned long long>(l);
  }
}
