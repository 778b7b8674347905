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
 * Every wait is bounded: on timeout the kernel records the error and returns. Barriers carry
 * the call's signature: a block that meets a peer in another call records MISMATCH.
 * Every dtype: floating types narrower than 32 bits combine in fp32 (device_common.cuh).
 * Every op: each kernel combines all nranks sources of an element in one go, in rank order
 * (two-shot too: the owner of a vector reduces every rank's copy of it), so AVG divides once.
 * reduce (rooted) runs AllReduce_OneShot with a.root >= 0: only the root reduces and writes.
 */
#include "device_common.cuh"

namespace symcoll_cuda {
namespace {

/* a.root < 0: all_reduce, every rank writes recv. a.root >= 0: reduce, only the root reduces
 * and writes (the others' recv is NULL): the others stage (or expose their input) and meet
 * both barriers, the second now saying that the root is done reading. The root reads the
 * same sources in the same order as all_reduce, so it gets the same bits. With a symmetric
 * input the root may be in place: it is the only reader of every input, and each thread
 * reads an element before it writes it. */
template <typename T, int OP, bool VEC>
__global__ void __launch_bounds__(1024) AllReduce_OneShot(const symcoll__cuda_args_t a) {
  constexpr int U = unit_access<VEC>(), E = Pack<T, U>::E;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t round = a.zero_copy ? a.count : a.chunk_elems;
  const bool writes = a.root < 0 || a.root == a.rank;
  for (size_t base = 0; base < a.count; base += round) {
    const size_t n = a.count - base < round ? a.count - base : round;
    const size_t nvec = n / E, tail = n - nvec * E;
    /* Zero-copy reads the peers' inputs at this round's offset; staging starts at the base. */
    auto src = [&](int r) -> const char * { return a.zero_copy ? a.src[r] + base * sizeof(T) : a.ws[r]; };
    if (!a.zero_copy) stage<T, U>(a.ws[a.rank], a.send + base * sizeof(T), nvec, tail, first, stride);
    BARRIER(a);
    if (writes) {
      char *out = a.recv + base * sizeof(T);
      size_t v = first;
      for (; v < nvec; v += stride) store<T, U>(out, v, reduce_at<T, OP, U>(src, a.nranks, v));
      reduce_tail<T, OP>(src, a.nranks, out, nvec, tail, v == nvec);
    }
    /* Peers are done reading this block's share of our workspace (or of our input). */
    BARRIER(a);
  }
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
  constexpr int U = unit_access<VEC>(), E = Pack<T, U>::E;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t round = a.chunk_elems; /* at most a half */
  uint32_t epoch;
  if (!take_state(
          a, a.db_epoch, [](uint32_t e) { return e + 1u; }, &epoch))
    GIVE_UP(a);
  const size_t half = (size_t)(epoch & 1u) * a.db_half_bytes;
  const uint32_t meet = sig_with_state(a.sig, epoch & 1u); /* ranks on other halves: MISMATCH */
  auto src = [&](int r) -> const char * { return a.db[r] + half; };
  char *mine = a.db[a.rank] + half;
  for (size_t base = 0; base < a.count; base += round) {
    if (base > 0) BARRIER_VALUE(a, meet); /* peers are done with the previous round's staging */
    const size_t n = a.count - base < round ? a.count - base : round;
    const size_t nvec = n / E, tail = n - nvec * E;
    const char *in = a.send + base * sizeof(T);
    char *out = a.recv + base * sizeof(T);
    const bool owner = stage<T, U>(mine, in, nvec, tail, first, stride);
    BARRIER_VALUE(a, meet);
    for (size_t v = first; v < nvec; v += stride) store<T, U>(out, v, reduce_at<T, OP, U>(src, a.nranks, v));
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
template <typename T>
__device__ __forceinline__ uint32_t fix_word(uint32_t w) {
  if constexpr (sizeof(T) == 4) return w == kCleared ? 0x80000000u : w;
  uint32_t lo = w & 0xffffu, hi = w >> 16;
  return (lo == 0x8000u ? 0u : lo) | (hi == 0x8000u ? 0u : hi) << 16;
}
template <typename T>
__device__ __forceinline__ bool empty_word(uint32_t w) {
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

/* A store that peers poll for: relaxed at system scope (a weak st.global would promise them
 * nothing about when, or whether whole, it becomes visible). */
template <typename T, bool VEC>
__device__ __forceinline__ void store_relaxed_sys(char *p, size_t v, const Pack<T, VEC> &x) {
  if constexpr (VEC) {
    asm volatile("st.relaxed.sys.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(reinterpret_cast<uint4 *>(p) + v),
                 "r"(x.raw.x), "r"(x.raw.y), "r"(x.raw.z), "r"(x.raw.w)
                 : "memory");
  } else if constexpr (sizeof(T) == 4) {
    uint32_t w;
    memcpy(&w, &x.raw, 4);
    asm volatile("st.relaxed.sys.global.b32 [%0], %1;" ::"l"(reinterpret_cast<uint32_t *>(p) + v), "r"(w) : "memory");
  } else {
    uint16_t h;
    memcpy(&h, &x.raw, 2);
    asm volatile("st.relaxed.sys.global.b16 [%0], %1;" ::"l"(reinterpret_cast<uint16_t *>(p) + v), "h"(h) : "memory");
  }
}

template <typename T, bool VEC>
__device__ __forceinline__ bool arrived(const Pack<T, VEC> &y) {
  bool empty = false;
  Pack<T, VEC> c = y;
  for_words<T, VEC>(c, [&](uint32_t &w) { empty |= empty_word<T>(w); });
  return !empty;
}

/* Writes element/vector v of this rank's input into its slot of buffer `cur` on every peer,
 * and (second call) reduces vector v once every peer's part has arrived in ours. The peers'
 * slots are polled a batch at a time (peers_in_flight): each pass reloads every slot of the
 * batch still empty, so the waits for peers overlap instead of following one another. */
template <typename T, int OP, bool VEC>
struct LamportPart {
  const symcoll__cuda_args_t &a;
  size_t cur, my_slot;
  __device__ void push(size_t v, const Pack<T, VEC> &x) const {
    for (int p = 0; p < a.nranks; p++)
      if (p != a.rank) store_relaxed_sys<T, VEC>(a.ws[p] + a.lp_off + cur + my_slot, v, x);
  }
  __device__ bool reduce(size_t v) const {
    constexpr int B = peers_in_flight<T, VEC>();
    const char *mine = a.ws[a.rank] + a.lp_off + cur;
    bool ok = true;
    Pack<T, VEC> out = reduce_batches<T, OP, VEC>(
        [&](int r0, Pack<T, VEC>(&y)[B]) {
          uint32_t pending = 0;
#pragma unroll
          for (int j = 0; j < B; j++) {
            const int r = r0 + j;
            if (r == a.rank)
              y[j] = load_fixed<T, VEC>(a.send, v);
            else if (r < a.nranks)
              pending |= 1u << j;
          }
          if (!pending || !ok) return;
          ok = symcoll_impl::spin(
              [&] {
#pragma unroll
                for (int j = 0; j < B; j++)
                  if (pending >> j & 1u) y[j] = load_cv<T, VEC>(mine + (size_t)(r0 + j) * a.lp_slot_bytes, v);
#pragma unroll
                for (int j = 0; j < B; j++)
                  if ((pending >> j & 1u) && arrived<T, VEC>(y[j])) pending &= ~(1u << j);
                return pending == 0;
              },
              a.timeout_ns, a.error, r0 + __ffs((int)pending) - 1, a.rank);
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
  if (!take_state(
          a, a.lp_state, [&](uint32_t w) { return ((w & 3u) + 1u) % 3u | bytes << 2; }, &state))
    GIVE_UP(a);
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
    if (!part.reduce(v)) GIVE_UP(a);
  if (tail_here && !tail_part.reduce(nvec * E + threadIdx.x)) GIVE_UP(a);
}

template <typename T, int OP, bool VEC>
__global__ void __launch_bounds__(1024) AllReduce_TwoShot(const symcoll__cuda_args_t a) {
  constexpr int U = unit_access<VEC>(), E = Pack<T, U>::E;
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
    const bool owner = stage<T, U>(mine, in, nvec, tail, first, stride);
    BARRIER(a);
    for (size_t v = first + (size_t)a.rank * stride; v < nvec; v += n_r * stride) {
      Pack<T, U> o = reduce_at<T, OP, U>(src, a.nranks, v);
      store<T, U>(mine, v, o);
      store<T, U>(out, v, o);
    }
    reduce_tail<T, OP>(src, a.nranks, out, nvec, tail, owner); /* every rank, itself */
    BARRIER(a);
    int from = 0; /* the rank that reduced vector v */
    for (size_t v = first; v < nvec; v += stride, from = from + 1 == a.nranks ? 0 : from + 1)
      if (from != a.rank) store<T, U>(out, v, load_cg<T, U>(a.ws[from], v));
    BARRIER(a);
  }
}

template <typename T, int OP, bool VEC>
const void *pick(symcoll_algo_t algo) {
  switch (algo) {
    case SYMCOLL_ALGO_TWO_SHOT:
      return (const void *)AllReduce_TwoShot<T, OP, VEC>;
    case SYMCOLL_ALGO_ONE_SHOT_DB:
      return (const void *)AllReduce_OneShotDB<T, OP, VEC>;
    case SYMCOLL_ALGO_LAMPORT:
      /* The sentinel is a 4-byte pattern of fp32 / fp16 / bf16: other dtypes never get here
       * (the host runs them one-shot double-buffered). */
      if constexpr (std::is_same<T, float>::value || std::is_same<T, __half>::value ||
                    std::is_same<T, __nv_bfloat16>::value)
        return (const void *)AllReduce_Lamport<T, OP, VEC>;
      return nullptr;
    case SYMCOLL_ALGO_ONE_SHOT:
      return (const void *)AllReduce_OneShot<T, OP, VEC>;
    default:
      return nullptr;
  }
}

template <typename T, int OP>
const void *pick_vec(const symcoll__cuda_launch_t *l) {
  return l->vec ? pick<T, OP, true>(l->algo) : pick<T, OP, false>(l->algo);
}

template <typename T>
const void *pick_op(const symcoll__cuda_launch_t *l) {
  switch (l->op) {
    case SYMCOLL_SUM:
      return pick_vec<T, SYMCOLL_SUM>(l);
    case SYMCOLL_MAX:
      return pick_vec<T, SYMCOLL_MAX>(l);
    case SYMCOLL_MIN:
      return pick_vec<T, SYMCOLL_MIN>(l);
    case SYMCOLL_PROD:
      return pick_vec<T, SYMCOLL_PROD>(l);
    case SYMCOLL_AVG:
      return pick_vec<T, SYMCOLL_AVG>(l);
    case SYMCOLL_NUM_OPS:
      break;
  }
  return nullptr;
}

}  // namespace
}  // namespace symcoll_cuda

extern "C" const void *symcoll__cuda_allreduce_kernel(const symcoll__cuda_launch_t *l) {
  return symcoll_cuda::with_dtype(l->dtype, [&](auto *t) {
    using T = typename std::remove_pointer<decltype(t)>::type;
    return symcoll_cuda::pick_op<T>(l);
  });
}
