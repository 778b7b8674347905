/*
 * Reduce-scatter kernels. `count` is this launch's elements per rank (the block each rank
 * receives), `stride` the elements between ranks' blocks in send.
 *
 * ReduceScatter_Pull: each block stages its share of every other rank's block of this rank's
 *   input into one half of the double buffer (as AllGather_Pull: call k uses half k % 2),
 *   meets its twins at a barrier, then reduces its share of this rank's block from every
 *   rank's copy, in rank order (its own part straight from its input). A symmetric input is
 *   read in place by peers instead, with a trailing barrier.
 * ReduceScatter_LL: no barrier: each rank writes block q of its input as LL packets into its
 *   slot of rank q's LL buffer (and a header with the call's signature); each rank checks the
 *   headers, then polls its peers' packets in rank order and reduces.
 * Combined as all_reduce combines (device_common.cuh): every rank's copy of an element in one
 * go, in rank order, AVG divided once at the end; so the result is bit for bit the
 * all_reduce's part.
 */
#include "device_common.cuh"

namespace symcoll_cuda {
namespace {

template <typename T, int OP, bool VEC>
__global__ void __launch_bounds__(1024) ReduceScatter_Pull(const symcoll__cuda_args_t a) {
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
  const size_t round = a.zero_copy ? a.count : a.chunk_elems;
  const size_t slot = a.chunk_elems * sizeof(T);
  const size_t mine = (size_t)a.rank * a.stride * sizeof(T); /* our block's offset in an input */
  for (size_t base = 0; base < a.count; base += round) {
    if (base > 0) BARRIER_VALUE(a, meet); /* peers are done with the previous round's staging */
    const size_t n = a.count - base < round ? a.count - base : round;
    const size_t nvec = n / E, tail = n - nvec * E;
    const int j = owns_tail(first, stride, nvec, tail); /* this thread's tail element, or -1 */
    if (!a.zero_copy)
      for (int q = 0; q < a.nranks; q++)
        if (q != a.rank)
          stage<T, U>(a.db[a.rank] + half + (size_t)q * slot, a.send + ((size_t)q * a.stride + base) * sizeof(T), nvec,
                      tail, first, stride);
    BARRIER_VALUE(a, meet);
    auto src = [&](int r) -> const char * {
      if (r == a.rank) return a.send + mine + base * sizeof(T);
      return a.zero_copy ? a.src[r] + mine + base * sizeof(T) : a.db[r] + half + (size_t)a.rank * slot;
    };
    char *out = a.recv + base * sizeof(T);
    for (size_t v = first; v < nvec; v += stride) store<T, U>(out, v, reduce_at<T, OP, U>(src, a.nranks, v));
    reduce_tail<T, OP>(src, a.nranks, out, nvec, j);
  }
  if (a.zero_copy) BARRIER_VALUE(a, meet); /* peers are done reading our input */
}

/* 8 bytes of a block at word w (fewer at its end) as two 32-bit halves. */
template <bool ALIGNED>
__device__ __forceinline__ unsigned long long word_at(const char *p, size_t w, size_t bytes) {
  const size_t at = w * 8, n = bytes - at < 8 ? bytes - at : 8;
  if (ALIGNED && n == 8) return __ldcg(reinterpret_cast<const unsigned long long *>(p) + w);
  unsigned long long x = 0;
  for (size_t i = 0; i < n; i++) x |= (unsigned long long)(unsigned char)p[at + i] << (8 * i);
  return x;
}

template <typename T, int OP, bool ALIGNED>
__global__ void __launch_bounds__(1024) ReduceScatter_LL(const symcoll__cuda_args_t a) {
  const symcoll_cuda::GridDependency dependency;
  constexpr int W = 8 / (int)sizeof(T); /* elements per word */
  using A = typename Conv<T>::Acc;
  union Word {
    unsigned long long u;
    T e[W];
  };
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t bytes = a.count * sizeof(T), words = (bytes + 7) / 8;
  const size_t block_bytes = a.stride * sizeof(T);
  uint32_t flag;
  if (!ll_epoch(a, &flag)) GIVE_UP(a);
  const uint32_t buf = flag & 1u;
  for (size_t w = first; w < words; w += stride)
    for (int k = 1; k < a.nranks; k++) {
      const int q = (a.rank + k) % a.nranks;
      const unsigned long long x = word_at<ALIGNED>(a.send + (size_t)q * block_bytes, w, bytes);
      ll_store(ll_slot(a, q, buf, a.rank) + 16, w, (uint32_t)x, (uint32_t)(x >> 32), flag);
    }
  if (blockIdx.x == 0 && (int)threadIdx.x < a.nranks && (int)threadIdx.x != a.rank)
    ll_put_header(ll_slot(a, threadIdx.x, buf, a.rank), a.sig, flag);
  if (!ll_headers_ok(a, buf, flag)) GIVE_UP(a);
  for (size_t w = first; w < words; w += stride) {
    A acc[W];
    for (int r = 0; r < a.nranks; r++) {
      Word x;
      if (r == a.rank) {
        x.u = word_at<ALIGNED>(a.send + (size_t)a.rank * block_bytes, w, bytes);
      } else {
        uint32_t lo, hi;
        if (!ll_load(ll_slot(a, a.rank, buf, r) + 16, w, flag, a, r, &lo, &hi)) GIVE_UP(a);
        x.u = (unsigned long long)lo | (unsigned long long)hi << 32;
      }
#pragma unroll
      for (int j = 0; j < W; j++) acc[j] = r == 0 ? Conv<T>::load(x.e[j]) : combine<OP>(acc[j], Conv<T>::load(x.e[j]));
    }
    Word out;
#pragma unroll
    for (int j = 0; j < W; j++) out.e[j] = Conv<T>::store(finish<OP>(acc[j], a.nranks));
    const size_t at = w * 8, n = bytes - at < 8 ? bytes - at : 8;
    if (ALIGNED && n == 8)
      reinterpret_cast<unsigned long long *>(a.recv)[w] = out.u;
    else
      for (size_t i = 0; i < n; i++) a.recv[at + i] = (char)(out.u >> (8 * i));
  }
}

template <typename T, int OP>
const void *pick(const symcoll__cuda_launch_t *l) {
  switch (l->algo) {
    case SYMCOLL_ALGO_PULL:
      return l->vec ? (const void *)ReduceScatter_Pull<T, OP, true> : (const void *)ReduceScatter_Pull<T, OP, false>;
    case SYMCOLL_ALGO_LAMPORT:
      return l->vec ? (const void *)ReduceScatter_LL<T, OP, true> : (const void *)ReduceScatter_LL<T, OP, false>;
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace symcoll_cuda

extern "C" const void *symcoll__cuda_reducescatter_kernel(const symcoll__cuda_launch_t *l) {
  return symcoll_cuda::with_dtype(l->dtype, [&](auto *t) -> const void * {
    using T = typename std::remove_pointer<decltype(t)>::type;
    switch (l->op) {
      case SYMCOLL_SUM:
        return symcoll_cuda::pick<T, SYMCOLL_SUM>(l);
      case SYMCOLL_MAX:
        return symcoll_cuda::pick<T, SYMCOLL_MAX>(l);
      case SYMCOLL_MIN:
        return symcoll_cuda::pick<T, SYMCOLL_MIN>(l);
      case SYMCOLL_PROD:
        return symcoll_cuda::pick<T, SYMCOLL_PROD>(l);
      case SYMCOLL_AVG:
        return symcoll_cuda::pick<T, SYMCOLL_AVG>(l);
      case SYMCOLL_NUM_OPS:
        break;
    }
    return nullptr;
  });
}
