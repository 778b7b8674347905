/*
 * All-gather kernels. Bytes are moved, not combined: the kernels are instantiated per
 * element size (1, 2, 4, 8 bytes: unsigned types of that width) and per vector path (16-byte
 * pieces when every address is 16-byte aligned). `count` is this launch's elements per rank,
 * `stride` the elements between ranks' blocks in recv.
 *
 * AllGather_Pull: each block stages its share of this rank's block in one half of the double
 *   buffer (call k uses half k % 2: its previous kernel met every peer, so the half of call
 *   k-2 is no longer read), meets its twins at a barrier, then copies every peer's block from
 *   the peer's half, starting with the next rank so that ranks do not all read one peer at
 *   once. A symmetric input is read in place instead, and then a trailing barrier tells peers
 *   when it may change.
 * AllGather_Push: each block stores its share of this rank's block into slot [rank] of every
 *   peer's half, meets its twins, and copies its own half's slots out. With a symmetric
 *   output it stores straight into every peer's output, between a barrier that says every
 *   peer is in the call (its output may be written) and one that says every store landed.
 * AllGather_LL: no barrier: each rank writes its block as LL packets (data with the call's
 *   number beside it) into slot [rank] of every peer's LL buffer and a header with the call's
 *   signature; each rank checks the headers, then polls the packets of every peer.
 */
#include "device_common.cuh"

namespace symcoll_cuda {
namespace {

/* Copies this thread's share of one round of a block (nvec vectors, and the tail if it owns
 * it) from src to dst. */
template <typename T, int ACC>
__device__ __forceinline__ void copy_share(char *dst, const char *src, size_t nvec, size_t tail, size_t first,
                                           size_t stride, bool owner) {
  constexpr int E = Pack<T, ACC>::E;
  for (size_t v = first; v < nvec; v += stride) store<T, ACC>(dst, v, load_cg<T, ACC>(src, v));
  if (owner)
    for (size_t i = nvec * E; i < nvec * E + tail; i++) store<T, false>(dst, i, load_cg<T, false>(src, i));
}

template <typename T, bool VEC>
__global__ void __launch_bounds__(1024) AllGather_Pull(const symcoll__cuda_args_t a) {
  constexpr int U = unit_access<VEC>(), E = Pack<T, U>::E;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t epoch;
  if (!take_state(
          a, a.db_epoch, [](uint32_t e) { return e + 1u; }, &epoch))
    GIVE_UP(a);
  const size_t half = (size_t)(epoch & 1u) * a.db_half_bytes;
  const uint32_t meet = sig_with_state(a.sig, epoch & 1u); /* ranks on other halves: MISMATCH */
  const size_t round = a.zero_copy ? a.count : a.chunk_elems;
  const bool in_place = a.send == a.recv + (size_t)a.rank * a.stride * sizeof(T);
  for (size_t base = 0; base < a.count; base += round) {
    if (base > 0) BARRIER_VALUE(a, meet); /* peers are done with the previous round's staging */
    const size_t n = a.count - base < round ? a.count - base : round;
    const size_t nvec = n / E, tail = n - nvec * E;
    const char *in = a.send + base * sizeof(T);
    const bool owner =
        a.zero_copy ? owns_tail(first, stride, nvec) : stage<T, U>(a.db[a.rank] + half, in, nvec, tail, first, stride);
    BARRIER_VALUE(a, meet);
    for (int k = 1; k < a.nranks; k++) {
      const int p = (a.rank + k) % a.nranks;
      const char *src = a.zero_copy ? a.src[p] + base * sizeof(T) : a.db[p] + half;
      copy_share<T, U>(a.recv + ((size_t)p * a.stride + base) * sizeof(T), src, nvec, tail, first, stride, owner);
    }
    if (!in_place)
      copy_share<T, U>(a.recv + ((size_t)a.rank * a.stride + base) * sizeof(T), in, nvec, tail, first, stride, owner);
  }
  if (a.zero_copy) BARRIER_VALUE(a, meet); /* peers are done reading our input */
}

template <typename T, bool VEC>
__global__ void __launch_bounds__(1024) AllGather_Push(const symcoll__cuda_args_t a) {
  constexpr int U = unit_access<VEC>(), E = Pack<T, U>::E;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const bool in_place = a.send == a.recv + (size_t)a.rank * a.stride * sizeof(T);
  if (a.zero_copy) { /* straight into peers' symmetric outputs */
    const size_t nvec = a.count / E, tail = a.count - nvec * E;
    const size_t mine = (size_t)a.rank * a.stride * sizeof(T);
    BARRIER(a);
    size_t v = first;
    for (; v < nvec; v += stride) {
      const Pack<T, U> x = load_cg<T, U>(a.send, v);
      for (int k = 1; k < a.nranks; k++) store<T, U>(const_cast<char *>(a.src[(a.rank + k) % a.nranks]) + mine, v, x);
      if (!in_place) store<T, U>(a.recv + mine, v, x);
    }
    if (v == nvec)
      for (size_t i = nvec * E; i < nvec * E + tail; i++) {
        const Pack<T, false> x = load_cg<T, false>(a.send, i);
        for (int k = 1; k < a.nranks; k++)
          store<T, false>(const_cast<char *>(a.src[(a.rank + k) % a.nranks]) + mine, i, x);
        if (!in_place) store<T, false>(a.recv + mine, i, x);
      }
    BARRIER(a);
    return;
  }
  uint32_t epoch;
  if (!take_state(
          a, a.db_epoch, [](uint32_t e) { return e + 1u; }, &epoch))
    GIVE_UP(a);
  const size_t half = (size_t)(epoch & 1u) * a.db_half_bytes;
  const uint32_t meet = sig_with_state(a.sig, epoch & 1u); /* ranks on other halves: MISMATCH */
  const size_t slot = a.chunk_elems * sizeof(T);           /* one rank's part of a round */
  for (size_t base = 0; base < a.count; base += a.chunk_elems) {
    if (base > 0) BARRIER_VALUE(a, meet);
    const size_t n = a.count - base < a.chunk_elems ? a.count - base : a.chunk_elems;
    const size_t nvec = n / E, tail = n - nvec * E;
    const char *in = a.send + base * sizeof(T);
    const size_t mine = (size_t)a.rank * slot;
    size_t v = first;
    for (; v < nvec; v += stride) {
      const Pack<T, U> x = load_cg<T, U>(in, v);
      for (int k = 1; k < a.nranks; k++) store<T, U>(a.db[(a.rank + k) % a.nranks] + half + mine, v, x);
    }
    const bool owner = v == nvec;
    if (owner)
      for (size_t i = nvec * E; i < nvec * E + tail; i++) {
        const Pack<T, false> x = load_cg<T, false>(in, i);
        for (int k = 1; k < a.nranks; k++) store<T, false>(a.db[(a.rank + k) % a.nranks] + half + mine, i, x);
      }
    BARRIER_VALUE(a, meet);
    for (int p = 0; p < a.nranks; p++) {
      char *out = a.recv + ((size_t)p * a.stride + base) * sizeof(T);
      if (p != a.rank)
        copy_share<T, U>(out, a.db[a.rank] + half + (size_t)p * slot, nvec, tail, first, stride, owner);
      else if (!in_place)
        copy_share<T, U>(out, in, nvec, tail, first, stride, owner);
    }
  }
}

/* 8 bytes of a block at word w (fewer at its end), as two 32-bit halves; byte loads where the
 * address is not 8-byte aligned. */
template <bool ALIGNED>
__device__ __forceinline__ void word_load(const char *p, size_t w, size_t bytes, uint32_t *lo, uint32_t *hi) {
  const size_t at = w * 8, n = bytes - at < 8 ? bytes - at : 8;
  if (ALIGNED && n == 8) {
    const uint2 v = __ldcg(reinterpret_cast<const uint2 *>(p) + w);
    *lo = v.x, *hi = v.y;
    return;
  }
  unsigned long long x = 0;
  for (size_t i = 0; i < n; i++) x |= (unsigned long long)(unsigned char)p[at + i] << (8 * i);
  *lo = (uint32_t)x, *hi = (uint32_t)(x >> 32);
}
template <bool ALIGNED>
__device__ __forceinline__ void word_store(char *p, size_t w, size_t bytes, uint32_t lo, uint32_t hi) {
  const size_t at = w * 8, n = bytes - at < 8 ? bytes - at : 8;
  if (ALIGNED && n == 8) {
    reinterpret_cast<uint2 *>(p)[w] = make_uint2(lo, hi);
    return;
  }
  const unsigned long long x = (unsigned long long)lo | (unsigned long long)hi << 32;
  for (size_t i = 0; i < n; i++) p[at + i] = (char)(x >> (8 * i));
}

template <bool ALIGNED>
__global__ void __launch_bounds__(1024) AllGather_LL(const symcoll__cuda_args_t a) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t bytes = a.count; /* elements are bytes here: the host passes a byte count */
  const size_t words = (bytes + 7) / 8;
  uint32_t flag;
  if (!ll_epoch(a, &flag)) GIVE_UP(a);
  const uint32_t buf = flag & 1u;
  for (size_t w = first; w < words; w += stride) {
    uint32_t lo, hi;
    word_load<ALIGNED>(a.send, w, bytes, &lo, &hi);
    for (int k = 1; k < a.nranks; k++) ll_store(ll_slot(a, (a.rank + k) % a.nranks, buf, a.rank) + 16, w, lo, hi, flag);
  }
  if (blockIdx.x == 0 && (int)threadIdx.x < a.nranks && (int)threadIdx.x != a.rank)
    ll_put_header(ll_slot(a, threadIdx.x, buf, a.rank), a.sig, flag);
  if (!ll_headers_ok(a, buf, flag)) GIVE_UP(a);
  const bool in_place = a.send == a.recv + (size_t)a.rank * a.stride;
  for (size_t w = first; w < words; w += stride) {
    for (int k = 1; k < a.nranks; k++) {
      const int p = (a.rank + k) % a.nranks;
      uint32_t lo, hi;
      if (!ll_load(ll_slot(a, a.rank, buf, p) + 16, w, flag, a, p, &lo, &hi)) GIVE_UP(a);
      word_store<ALIGNED>(a.recv + (size_t)p * a.stride, w, bytes, lo, hi);
    }
    if (!in_place) {
      uint32_t lo, hi;
      word_load<ALIGNED>(a.send, w, bytes, &lo, &hi);
      word_store<ALIGNED>(a.recv + (size_t)a.rank * a.stride, w, bytes, lo, hi);
    }
  }
}

template <typename T>
const void *pick(const symcoll__cuda_launch_t *l) {
  switch (l->algo) {
    case SYMCOLL_ALGO_PULL:
      return l->vec ? (const void *)AllGather_Pull<T, true> : (const void *)AllGather_Pull<T, false>;
    case SYMCOLL_ALGO_PUSH:
      return l->vec ? (const void *)AllGather_Push<T, true> : (const void *)AllGather_Push<T, false>;
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace symcoll_cuda

extern "C" const void *symcoll__cuda_allgather_kernel(const symcoll__cuda_launch_t *l) {
  using namespace symcoll_cuda;
  if (l->algo == SYMCOLL_ALGO_LAMPORT)
    return l->vec ? (const void *)AllGather_LL<true> : (const void *)AllGather_LL<false>;
  switch (symcoll_dtype_size(l->dtype)) {
    case 1:
      return pick<unsigned char>(l);
    case 2:
      return pick<unsigned short>(l);
    case 4:
      return pick<unsigned int>(l);
    default:
      return pick<unsigned long long>(l);
  }
}
