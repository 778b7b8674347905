/*
 * All-reduce kernels over symmetric memory.
 *
 * AllReduce_OneShot: each block stages its share of the caller's input into this rank's
 *   workspace, meets its twin blocks of every rank at a block-wise barrier, reads every
 *   rank's copy of its share (16-byte loads), reduces in fp32 in rank order and writes the
 *   result; a second barrier tells peers the workspace may be overwritten. Zero-copy
 *   (input already symmetric) skips the staging.
 * AllReduce_TwoShot: stage; barrier; each rank reduces its 1/n segment from all ranks and
 *   publishes it in its workspace; barrier; each rank gathers the other segments; barrier.
 * Block b of every rank owns the same elements, so per-block barriers (slot = block) are
 * enough. Inputs larger than the workspace are processed in rounds inside the one kernel.
 * Every wait is bounded: on timeout the kernel records the error and returns.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda_internal.h"
#include "symcoll_device.cuh"

namespace {

template <typename T> struct Conv;
template <> struct Conv<float> {
  __device__ static float load(float v) { return v; }
  __device__ static float store(float v) { return v; }
};
template <> struct Conv<__half> {
  __device__ static float load(__half v) { return __half2float(v); }
  __device__ static __half store(float v) { return __float2half_rn(v); }
};
template <> struct Conv<__nv_bfloat16> {
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

/* Same expressions as the CPU loops, so both backends agree bit for bit. */
template <int OP> __device__ __forceinline__ float combine(float acc, float x) {
  if (OP == SYMCOLL_SUM) return acc + x;
  if (OP == SYMCOLL_MAX) return acc > x ? acc : x;
  return acc < x ? acc : x;
}

/* A "vector" of E elements of T: 16 bytes on the fast path, one element otherwise. */
template <typename T, bool VEC> struct Pack {
  static constexpr int E = VEC ? 16 / (int)sizeof(T) : 1;
  using Raw = typename std::conditional<VEC, uint4, T>::type;
  union {
    Raw raw;
    T e[E];
  };
};

template <typename T, bool VEC>
__device__ __forceinline__ Pack<T, VEC> load_cg(const char *p, size_t v) {
  Pack<T, VEC> x;
  if constexpr (VEC) {
    x.raw = __ldcg(reinterpret_cast<const uint4 *>(p) + v);
  } else {
    x.raw = __ldcg(reinterpret_cast<const T *>(p) + v);
  }
  return x;
}

template <typename T, bool VEC>
__device__ __forceinline__ void store(char *p, size_t v, const Pack<T, VEC> &x) {
  reinterpret_cast<typename Pack<T, VEC>::Raw *>(p)[v] = x.raw;
}

/* acc = op over ranks of src(r)[v], in rank order; returns the packed result. `src` reads
 * the peer table from the kernel's parameters with a block-uniform index (a constant-cache
 * load), so no per-thread copy of the table is made. */
template <typename T, int OP, bool VEC, typename Src>
__device__ __forceinline__ Pack<T, VEC> reduce_at(Src src, int nranks, size_t v) {
  constexpr int E = Pack<T, VEC>::E;
  float acc[E];
  Pack<T, VEC> x = load_cg<T, VEC>(src(0), v);
#pragma unroll
  for (int i = 0; i < E; i++) acc[i] = Conv<T>::load(x.e[i]);
  for (int r = 1; r < nranks; r++) {
    Pack<T, VEC> y = load_cg<T, VEC>(src(r), v);
#pragma unroll
    for (int i = 0; i < E; i++) acc[i] = combine<OP>(acc[i], Conv<T>::load(y.e[i]));
  }
  Pack<T, VEC> out;
#pragma unroll
  for (int i = 0; i < E; i++) out.e[i] = Conv<T>::store(acc[i]);
  return out;
}

/* Elements past the last whole vector: reduced element by element by block 0. */
template <typename T, int OP, typename Src>
__device__ __forceinline__ void reduce_tail(Src src, int nranks, char *dst, size_t first, size_t n) {
  if (blockIdx.x != 0) return;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x)
    store<T, false>(dst, first + i, reduce_at<T, OP, false>(src, nranks, first + i));
}

/* Copies this block's share of one round of the caller's input into staging `dst`: its whole
 * vectors, and (block 0) the elements past the last whole vector. */
template <typename T, bool VEC>
__device__ __forceinline__ void stage(char *dst, const char *in, size_t nvec, size_t tail,
                                      size_t first, size_t stride) {
  constexpr int E = Pack<T, VEC>::E;
  for (size_t v = first; v < nvec; v += stride) store<T, VEC>(dst, v, load_cg<T, VEC>(in, v));
  if (blockIdx.x == 0)
    for (size_t i = threadIdx.x; i < tail; i += blockDim.x)
      reinterpret_cast<T *>(dst)[nvec * E + i] = reinterpret_cast<const T *>(in)[nvec * E + i];
}

#define BARRIER(a)                                                                           \
  do {                                                                                       \
    if (!symcoll_impl::block_barrier((a).pad, blockIdx.x, (a).rank, (a).nranks,              \
                                     (a).timeout_ns, (a).error))                             \
      return;                                                                                \
  } while (0)

template <typename T, int OP, bool VEC>
__global__ void __launch_bounds__(1024) AllReduce_OneShot(const symcoll__cuda_args_t a) {
  constexpr int E = Pack<T, VEC>::E;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t round = a.zero_copy ? a.count : a.chunk_elems;
  for (size_t base = 0; base < a.count; base += round) {
    const size_t n = a.count - base < round ? a.count - base : round;
    const size_t nvec = n / E, tail = n - nvec * E;
    const char *in = a.send + base * sizeof(T);
    char *out = a.recv + base * sizeof(T);
    /* Zero-copy reads the peers' inputs at this round's offset; staging starts at the base. */
    auto src = [&](int r) -> const char * { return a.zero_copy ? a.src[r] + base * sizeof(T) : a.ws[r]; };
    if (!a.zero_copy) stage<T, VEC>(a.ws[a.rank], in, nvec, tail, first, stride);
    BARRIER(a);
    for (size_t v = first; v < nvec; v += stride)
      store<T, VEC>(out, v, reduce_at<T, OP, VEC>(src, a.nranks, v));
    reduce_tail<T, OP>(src, a.nranks, out, nvec * E, tail);
    /* Peers are done reading this block's share of our workspace (or of our input). */
    BARRIER(a);
  }
}

/*
 * AllReduce_OneShotDB: one-shot staged through two alternating halves, with no trailing
 * barrier. Call d (counted per rank in *db_epoch, the same count on every rank) uses half
 * d & 1. When this rank's kernel starts, its previous kernel has finished, and that kernel
 * met every peer's previous kernel at a barrier; so every peer has finished the kernel before
 * that, the last one that may have read the half we are about to overwrite. Rounds inside one
 * kernel reuse the half, so they keep a barrier between them.
 */
template <typename T, int OP, bool VEC>
__global__ void __launch_bounds__(1024) AllReduce_OneShotDB(const symcoll__cuda_args_t a) {
  constexpr int E = Pack<T, VEC>::E;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  /* Thread 0 reads both words (one cache line) for the whole block, so every thread takes
   * the same branch. After an error the counter may be stale on some ranks: give up at once
   * rather than stage into a half a peer may still read. */
  __shared__ uint32_t s_epoch, s_error;
  if (threadIdx.x == 0) {
    s_error = *(volatile uint32_t *)a.error;
    s_epoch = *(volatile uint32_t *)a.db_epoch;
  }
  __syncthreads();
  const uint32_t epoch = s_epoch;
  if (s_error != 0) return;
  const size_t half = (size_t)(epoch & 1u) * a.db_half_bytes;
  const size_t round = a.chunk_elems; /* at most a half */
  auto src = [&](int r) -> const char * { return a.db[r] + half; };
  char *mine = a.db[a.rank] + half;
  for (size_t base = 0; base < a.count; base += round) {
    if (base > 0) BARRIER(a); /* peers are done with the previous round's staging */
    const size_t n = a.count - base < round ? a.count - base : round;
    const size_t nvec = n / E, tail = n - nvec * E;
    const char *in = a.send + base * sizeof(T);
    char *out = a.recv + base * sizeof(T);
    stage<T, VEC>(mine, in, nvec, tail, first, stride);
    BARRIER(a);
    for (size_t v = first; v < nvec; v += stride)
      store<T, VEC>(out, v, reduce_at<T, OP, VEC>(src, a.nranks, v));
    reduce_tail<T, OP>(src, a.nranks, out, nvec * E, tail);
  }
  /* The last block to finish advances the call counter for the next kernel on this stream. */
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(a.db_arrive, 1u) == gridDim.x - 1) {
      *a.db_arrive = 0;
      *(volatile uint32_t *)a.db_epoch = epoch + 1;
      __threadfence();
    }
  }
}

template <typename T, int OP, bool VEC>
__global__ void __launch_bounds__(1024) AllReduce_TwoShot(const symcoll__cuda_args_t a) {
  constexpr int E = Pack<T, VEC>::E;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (size_t base = 0; base < a.count; base += a.chunk_elems) {
    const size_t n = a.count - base < a.chunk_elems ? a.count - base : a.chunk_elems;
    const size_t nvec = n / E, tail = n - nvec * E;
    const size_t seg = (nvec + a.nranks - 1) / a.nranks;
    const char *in = a.send + base * sizeof(T);
    char *out = a.recv + base * sizeof(T);
    char *mine = a.ws[a.rank];
    auto src = [&](int r) -> const char * { return a.ws[r]; };
    /* Stage, in the order of the segments this block will touch. */
    for (int s = 0; s < a.nranks; s++) {
      const size_t lo = (size_t)s * seg, hi = lo + seg < nvec ? lo + seg : nvec;
      for (size_t v = lo + first; v < hi; v += stride) store<T, VEC>(mine, v, load_cg<T, VEC>(in, v));
    }
    if (blockIdx.x == 0)
      for (size_t i = threadIdx.x; i < tail; i += blockDim.x)
        reinterpret_cast<T *>(mine)[nvec * E + i] = reinterpret_cast<const T *>(in)[nvec * E + i];
    BARRIER(a);
    {
      const size_t lo = (size_t)a.rank * seg, hi = lo + seg < nvec ? lo + seg : nvec;
      for (size_t v = lo + first; v < hi; v += stride) {
        Pack<T, VEC> o = reduce_at<T, OP, VEC>(src, a.nranks, v);
        store<T, VEC>(mine, v, o);
        store<T, VEC>(out, v, o);
      }
      reduce_tail<T, OP>(src, a.nranks, out, nvec * E, tail);
    }
    BARRIER(a);
    for (int s = 0; s < a.nranks; s++) {
      if (s == a.rank) continue;
      const size_t lo = (size_t)s * seg, hi = lo + seg < nvec ? lo + seg : nvec;
      for (size_t v = lo + first; v < hi; v += stride) store<T, VEC>(out, v, load_cg<T, VEC>(a.ws[s], v));
    }
    BARRIER(a);
  }
}

template <typename T, int OP, bool VEC>
const void *pick(symcoll_algo_t algo) {
  switch (algo) {
  case SYMCOLL_ALGO_TWO_SHOT: return (const void *)AllReduce_TwoShot<T, OP, VEC>;
  case SYMCOLL_ALGO_ONE_SHOT_DB: return (const void *)AllReduce_OneShotDB<T, OP, VEC>;
  default: return (const void *)AllReduce_OneShot<T, OP, VEC>;
  }
}

template <typename T, int OP>
const void *pick_vec(const symcoll__cuda_launch_t *l) {
  return l->vec ? pick<T, OP, true>(l->algo) : pick<T, OP, false>(l->algo);
}

template <typename T>
const void *pick_op(const symcoll__cuda_launch_t *l) {
  switch (l->op) {
  case SYMCOLL_SUM: return pick_vec<T, SYMCOLL_SUM>(l);
  case SYMCOLL_MAX: return pick_vec<T, SYMCOLL_MAX>(l);
  default: return pick_vec<T, SYMCOLL_MIN>(l);
  }
}

__global__ void ProbePeers(const symcoll__cuda_args_t a, uint32_t value) {
  int p = threadIdx.x;
  if (p < a.nranks)
    __stcg(a.pad[p] + (size_t)(SYMCOLL_CUDA_SLOTS - 1) * SYMCOLL_MAX_RANKS + a.rank, value);
}

}  // namespace

extern "C" const void *symcoll__cuda_kernel(const symcoll__cuda_launch_t *l) {
  switch (l->dtype) {
  case SYMCOLL_FLOAT32: return pick_op<float>(l);
  case SYMCOLL_FLOAT16: return pick_op<__half>(l);
  default: return pick_op<__nv_bfloat16>(l);
  }
}

extern "C" int symcoll__cuda_launch(const symcoll__cuda_launch_t *l, const symcoll__cuda_args_t *a,
                                    void *stream) {
  void *args[] = {(void *)a};
  return (int)cudaLaunchKernel(symcoll__cuda_kernel(l), dim3((unsigned)l->blocks),
                               dim3((unsigned)l->threads), args, 0, (cudaStream_t)stream);
}

/* Loads every kernel now. With lazy loading (the default) the first launch of a kernel can
 * wait for the device to go idle, which never happens while a peer's kernel spins waiting
 * for ours: a deadlock until the timeout. */
extern "C" int symcoll__cuda_preload(void) {
  cudaFuncAttributes attr;
  for (int algo = SYMCOLL_ALGO_ONE_SHOT; algo < SYMCOLL_NUM_ALGOS; algo++)
    for (int dt = 0; dt < SYMCOLL_NUM_DTYPES; dt++)
      for (int op = 0; op < SYMCOLL_NUM_OPS; op++)
        for (int vec = 0; vec < 2; vec++) {
          symcoll__cuda_launch_t l = {(symcoll_algo_t)algo, (symcoll_dtype_t)dt, (symcoll_op_t)op, vec, 0, 0};
          cudaError_t e = cudaFuncGetAttributes(&attr, symcoll__cuda_kernel(&l));
          if (e != cudaSuccess) return (int)e;
        }
  return (int)cudaFuncGetAttributes(&attr, ProbePeers);
}

extern "C" int symcoll__cuda_probe(uint32_t *const *pads, int nranks, int rank, uint32_t value,
                                   void *stream) {
  symcoll__cuda_args_t a = {};
  for (int r = 0; r < nranks; r++) a.pad[r] = pads[r];
  a.nranks = nranks;
  a.rank = rank;
  ProbePeers<<<1, 64, 0, (cudaStream_t)stream>>>(a, value);
  return (int)cudaGetLastError();
}
