/*
 * All-reduce kernels over symmetric memory.
 *
 * AllReduce_OneShot: each block stages its share of the caller's input into this rank's
 *   workspace, meets its twin blocks of every rank at a block-wise barrier, reads every
 *   rank's copy of its share (16-byte loads), reduces in fp32 in rank order and writes the
 *   result; a second barrier tells peers the workspace may be overwritten. Zero-copy
 *   (input already symmetric) skips the staging.
 * AllReduce_TwoShot: stage; barrier; each rank reduces its 1/n of the vectors from all ranks
 *   and publishes them in its workspace; barrier; each rank gathers the others'; barrier.
 * AllReduce_Lamport (below): no barrier at all; data carries its own arrival.
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

/* The op over ranks of fetch(r), in rank order, in fp32; returns the packed result. */
template <typename T, int OP, bool VEC, typename Fetch>
__device__ __forceinline__ Pack<T, VEC> reduce_with(Fetch fetch, int nranks) {
  constexpr int E = Pack<T, VEC>::E;
  float acc[E];
  Pack<T, VEC> x = fetch(0);
#pragma unroll
  for (int i = 0; i < E; i++) acc[i] = Conv<T>::load(x.e[i]);
  for (int r = 1; r < nranks; r++) {
    Pack<T, VEC> y = fetch(r);
#pragma unroll
    for (int i = 0; i < E; i++) acc[i] = combine<OP>(acc[i], Conv<T>::load(y.e[i]));
  }
  Pack<T, VEC> out;
#pragma unroll
  for (int i = 0; i < E; i++) out.e[i] = Conv<T>::store(acc[i]);
  return out;
}

/* reduce_with over src(r)[v]. `src` reads the peer table from the kernel's parameters with a
 * block-uniform index (a constant-cache load), so no per-thread copy of the table is made. */
template <typename T, int OP, bool VEC, typename Src>
__device__ __forceinline__ Pack<T, VEC> reduce_at(Src src, int nranks, size_t v) {
  return reduce_with<T, OP, VEC>([&](int r) { return load_cg<T, VEC>(src(r), v); }, nranks);
}

/*
 * Which thread touches which staged bytes, in every kernel with rounds: thread `first` of the
 * grid owns the vectors first, first + stride, ... of every round, and the elements past the
 * last whole vector (only the last round has them) belong to the owner of the vector they
 * sit in. The split never depends on the round's size, so a block that went on to the next
 * round only overwrites staging that the same block of every peer (met at the barrier) was
 * reading; other blocks of a peer may still be in the round before, on other bytes.
 * A thread learns it owns the tail when its grid-stride loop stops exactly at nvec.
 */

/* Elements past the last whole vector, reduced one by one by their owner. */
template <typename T, int OP, typename Src>
__device__ __forceinline__ void reduce_tail(Src src, int nranks, char *dst, size_t nvec, size_t tail,
                                            bool owner) {
  constexpr int E = Pack<T, true>::E; /* only vector rounds have a tail */
  if (!owner) return;
  for (size_t i = nvec * E; i < nvec * E + tail; i++)
    store<T, false>(dst, i, reduce_at<T, OP, false>(src, nranks, i));
}

/* Copies this thread's share of one round of the caller's input into staging `dst`; returns
 * whether the thread owns the tail. */
template <typename T, bool VEC>
__device__ __forceinline__ bool stage(char *dst, const char *in, size_t nvec, size_t tail,
                                      size_t first, size_t stride) {
  constexpr int E = Pack<T, VEC>::E;
  size_t v = first;
  for (; v < nvec; v += stride) store<T, VEC>(dst, v, load_cg<T, VEC>(in, v));
  const bool owner = v == nvec;
  if (owner)
    for (size_t i = nvec * E; i < nvec * E + tail; i++)
      reinterpret_cast<T *>(dst)[i] = reinterpret_cast<const T *>(in)[i];
  return owner;
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
    size_t v = first;
    for (; v < nvec; v += stride) store<T, VEC>(out, v, reduce_at<T, OP, VEC>(src, a.nranks, v));
    reduce_tail<T, OP>(src, a.nranks, out, nvec, tail, v == nvec);
    /* Peers are done reading this block's share of our workspace (or of our input). */
    BARRIER(a);
  }
}

/* Per-call state of a rank (ONE_SHOT_DB's call counter, LAMPORT's buffer), one copy per
 * block slot. Thread 0 reads its block's copy and writes the next value at once; block 0
 * also advances the copies of the slots this launch has no block for. So every copy moves on
 * every call, and no block waits for another at the end. Also reads the error word: after
 * an error the state may be stale on some ranks, and the kernel must give up (false). */
template <typename Next>
__device__ __forceinline__ bool take_state(const symcoll__cuda_args_t &a, uint32_t *words, Next next,
                                           uint32_t *state_p) {
  __shared__ uint32_t s_error, s_state;
  volatile uint32_t *w = words;
  if (threadIdx.x == 0) {
    s_error = *(volatile uint32_t *)a.error;
    s_state = w[blockIdx.x];
    w[blockIdx.x] = next(s_state);
  }
  __syncthreads();
  if (blockIdx.x == 0)
    for (unsigned b = gridDim.x + threadIdx.x; b < SYMCOLL_CUDA_SLOTS; b += blockDim.x) w[b] = next(s_state);
  *state_p = s_state;
  return s_error == 0;
}

/*
 * AllReduce_OneShotDB: one-shot staged through two alternating halves, with no trailing
 * barrier. Call d (counted per rank, the same count on every rank) uses half d & 1. When
 * this rank's kernel starts, its previous kernel has finished, and that kernel met every
 * peer's previous kernel at a barrier; so every peer has finished the kernel before that,
 * the last one that may have read the half we are about to overwrite. Rounds inside one
 * kernel reuse the half, so they keep a barrier between them.
 */
template <typename T, int OP, bool VEC>
__global__ void __launch_bounds__(1024) AllReduce_OneShotDB(const symcoll__cuda_args_t a) {
  constexpr int E = Pack<T, VEC>::E;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t round = a.chunk_elems; /* at most a half */
  uint32_t epoch;
  if (!take_state(a, a.db_epoch, [](uint32_t e) { return e + 1u; }, &epoch)) return;
  const size_t half = (size_t)(epoch & 1u) * a.db_half_bytes;
  auto src = [&](int r) -> const char * { return a.db[r] + half; };
  char *mine = a.db[a.rank] + half;
  for (size_t base = 0; base < a.count; base += round) {
    if (base > 0) BARRIER(a); /* peers are done with the previous round's staging */
    const size_t n = a.count - base < round ? a.count - base : round;
    const size_t nvec = n / E, tail = n - nvec * E;
    const char *in = a.send + base * sizeof(T);
    char *out = a.recv + base * sizeof(T);
    const bool owner = stage<T, VEC>(mine, in, nvec, tail, first, stride);
    BARRIER(a);
    for (size_t v = first; v < nvec; v += stride)
      store<T, VEC>(out, v, reduce_at<T, OP, VEC>(src, a.nranks, v));
    reduce_tail<T, OP>(src, a.nranks, out, nvec, tail, owner);
  }
}

/*
 * AllReduce_Lamport: one-shot without any barrier. Every rank has three buffers, each of
 * nranks slots; a cleared buffer holds kCleared in every 4-byte word. Call k (counted per
 * rank, the same on every rank) uses buffer k % 3: each rank writes its input into slot
 * [rank] of that buffer on every peer, then polls its own buffer until no element of a
 * vector is the sentinel, and reduces (its own part straight from its input). Nothing else
 * tells a rank that data arrived, so an input element equal to the sentinel is changed
 * first (fix_word). While it waits, the kernel clears the buffer of call k-1, which peers
 * write again at call k+2: by then they have our data of call k+1, written by a kernel
 * that started after this one ended. Each call must fit a slot: the host launches one
 * kernel per slot of a larger input.
 */
constexpr uint32_t kCleared = 0x80008000u; /* fp32: -4.6e-41; fp16/bf16: two -0.0 */

/* fp32: the one sentinel word becomes -0.0; fp16/bf16: a -0.0 half becomes +0.0. */
template <typename T> __device__ __forceinline__ uint32_t fix_word(uint32_t w) {
  if constexpr (sizeof(T) == 4) return w == kCleared ? 0x80000000u : w;
  uint32_t lo = w & 0xffffu, hi = w >> 16;
  return (lo == 0x8000u ? 0u : lo) | (hi == 0x8000u ? 0u : hi) << 16;
}
template <typename T> __device__ __forceinline__ bool empty_word(uint32_t w) {
  if constexpr (sizeof(T) == 4) return w == kCleared;
  return (w & 0xffffu) == 0x8000u || (w >> 16) == 0x8000u;
}

/* Applies f to every 4-byte word of x (a 2-byte scalar is one word with a zero top half). */
template <typename T, bool VEC, typename F>
__device__ __forceinline__ void for_words(Pack<T, VEC> &x, F f) {
  if constexpr (VEC) {
    f(x.raw.x), f(x.raw.y), f(x.raw.z), f(x.raw.w);
  } else {
    uint32_t w = 0;
    memcpy(&w, &x.raw, sizeof(T));
    f(w);
    memcpy(&x.raw, &w, sizeof(T));
  }
}

/* A load that goes to L2 (where peers' writes land) every time. */
template <typename T, bool VEC>
__device__ __forceinline__ Pack<T, VEC> load_cv(const char *p, size_t v) {
  Pack<T, VEC> x;
  if constexpr (VEC) {
    x.raw = __ldcv(reinterpret_cast<const uint4 *>(p) + v);
  } else if constexpr (sizeof(T) == 4) {
    unsigned u = __ldcv(reinterpret_cast<const unsigned *>(p) + v);
    memcpy(&x.raw, &u, 4);
  } else {
    unsigned short u = __ldcv(reinterpret_cast<const unsigned short *>(p) + v);
    memcpy(&x.raw, &u, 2);
  }
  return x;
}

template <typename T, bool VEC>
__device__ __forceinline__ Pack<T, VEC> load_fixed(const char *in, size_t v) {
  Pack<T, VEC> x = load_cg<T, VEC>(in, v);
  for_words<T, VEC>(x, [](uint32_t &w) { w = fix_word<T>(w); });
  return x;
}

/* Writes element/vector v of this rank's input into its slot of buffer `cur` on every peer,
 * and (second call) reduces vector v once every peer's part has arrived in ours. */
template <typename T, int OP, bool VEC>
struct LamportPart {
  const symcoll__cuda_args_t &a;
  size_t cur, my_slot;
  __device__ void push(size_t v, const Pack<T, VEC> &x) const {
    for (int p = 0; p < a.nranks; p++)
      if (p != a.rank) store<T, VEC>(a.ws[p] + a.lp_off + cur + my_slot, v, x);
  }
  __device__ bool reduce(size_t v) const {
    const char *mine = a.ws[a.rank] + a.lp_off + cur;
    bool ok = true;
    Pack<T, VEC> out = reduce_with<T, OP, VEC>(
        [&](int r) {
          if (r == a.rank) return load_fixed<T, VEC>(a.send, v);
          Pack<T, VEC> y;
          const char *slot = mine + (size_t)r * a.lp_slot_bytes;
          ok = ok && symcoll_impl::spin(
                         [&] {
                           y = load_cv<T, VEC>(slot, v);
                           bool empty = false;
                           for_words<T, VEC>(y, [&](uint32_t &w) { empty |= empty_word<T>(w); });
                           return !empty;
                         },
                         a.timeout_ns, a.error, r, a.rank);
          return y;
        },
        a.nranks);
    if (ok) store<T, VEC>(a.recv, v, out);
    return ok;
  }
};

template <typename T, int OP, bool VEC>
__global__ void __launch_bounds__(1024) AllReduce_Lamport(const symcoll__cuda_args_t a) {
  constexpr int E = Pack<T, VEC>::E;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t nvec = a.count / E, tail = a.count - nvec * E;
  /* This thread's first vector is on its way while the state is read: buffer of this call
   * (bits 0-1) and bytes per slot the previous call wrote (above). */
  Pack<T, VEC> x0;
  if (first < nvec) x0 = load_fixed<T, VEC>(a.send, first);
  const uint32_t bytes = (uint32_t)(a.count * sizeof(T));
  uint32_t state;
  if (!take_state(a, a.lp_state, [&](uint32_t w) { return ((w & 3u) + 1u) % 3u | bytes << 2; }, &state))
    return;
  const uint32_t buf = state & 3u, prev_bytes = state >> 2;
  const size_t area = (size_t)a.nranks * a.lp_slot_bytes;
  const LamportPart<T, OP, VEC> part{a, buf * area, (size_t)a.rank * a.lp_slot_bytes};
  const LamportPart<T, OP, false> tail_part{a, part.cur, part.my_slot};
  const bool tail_here = blockIdx.x == 0 && threadIdx.x < tail;
  for (size_t v = first; v < nvec; v += stride) part.push(v, v == first ? x0 : load_fixed<T, VEC>(a.send, v));
  if (tail_here) tail_part.push(nvec * E + threadIdx.x, load_fixed<T, false>(a.send, nvec * E + threadIdx.x));
  /* Clear what the previous call wrote into its buffer (peers' slots only). */
  {
    char *prev = a.ws[a.rank] + a.lp_off + (size_t)((buf + 2u) % 3u) * area;
    const size_t nclear = ((size_t)prev_bytes + 15) / 16;
    const uint4 c = make_uint4(kCleared, kCleared, kCleared, kCleared);
    for (int r = 0; r < a.nranks; r++)
      if (r != a.rank)
        for (size_t v = first; v < nclear; v += stride)
          reinterpret_cast<uint4 *>(prev + (size_t)r * a.lp_slot_bytes)[v] = c;
  }
  for (size_t v = first; v < nvec; v += stride)
    if (!part.reduce(v)) return;
  if (tail_here && !tail_part.reduce(nvec * E + threadIdx.x)) return;
}

template <typename T, int OP, bool VEC>
__global__ void __launch_bounds__(1024) AllReduce_TwoShot(const symcoll__cuda_args_t a) {
  constexpr int E = Pack<T, VEC>::E;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t n_r = (size_t)a.nranks;
  auto src = [&](int r) -> const char * { return a.ws[r]; };
  char *mine = a.ws[a.rank];
  /* Vector first + k * stride belongs to rank k % nranks: it reduces it and publishes the
   * result in its workspace, where the others gather it. The grid is sized so that k rarely
   * exceeds nranks - 1, i.e. each rank reduces about one stride of every round. */
  for (size_t base = 0; base < a.count; base += a.chunk_elems) {
    const size_t n = a.count - base < a.chunk_elems ? a.count - base : a.chunk_elems;
    const size_t nvec = n / E, tail = n - nvec * E;
    const char *in = a.send + base * sizeof(T);
    char *out = a.recv + base * sizeof(T);
    const bool owner = stage<T, VEC>(mine, in, nvec, tail, first, stride);
    BARRIER(a);
    for (size_t v = first + (size_t)a.rank * stride; v < nvec; v += n_r * stride) {
      Pack<T, VEC> o = reduce_at<T, OP, VEC>(src, a.nranks, v);
      store<T, VEC>(mine, v, o);
      store<T, VEC>(out, v, o);
    }
    reduce_tail<T, OP>(src, a.nranks, out, nvec, tail, owner); /* every rank, itself */
    BARRIER(a);
    int from = 0; /* the rank that reduced vector v */
    for (size_t v = first; v < nvec; v += stride, from = from + 1 == a.nranks ? 0 : from + 1)
      if (from != a.rank) store<T, VEC>(out, v, load_cg<T, VEC>(a.ws[from], v));
    BARRIER(a);
  }
}

template <typename T, int OP, bool VEC>
const void *pick(symcoll_algo_t algo) {
  switch (algo) {
  case SYMCOLL_ALGO_TWO_SHOT: return (const void *)AllReduce_TwoShot<T, OP, VEC>;
  case SYMCOLL_ALGO_ONE_SHOT_DB: return (const void *)AllReduce_OneShotDB<T, OP, VEC>;
  case SYMCOLL_ALGO_LAMPORT: return (const void *)AllReduce_Lamport<T, OP, VEC>;
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
