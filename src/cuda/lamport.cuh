/*
 * The LAMPORT protocol of all_reduce and all_reduce_rmsnorm: one-shot without any barrier.
 * Every rank has three buffers, each of nranks slots; a cleared buffer holds kCleared in every
 * 4-byte word. Call k (counted per rank, the same on every rank; every LAMPORT call of the
 * communicator, of either collective, counts) uses buffer k % 3: each rank writes its input
 * into slot [rank] of that buffer on every peer, then polls its own buffer until no element of
 * a vector is the sentinel, and reduces (its own part straight from its input). Nothing else
 * tells a rank that data arrived, so an input element equal to the sentinel is changed first
 * (fix_word). While it waits, the kernel clears the buffer of call k-1 (lamport_clear), which
 * peers write again at call k+2: by then they have our data of call k+1, written by a kernel
 * that started after this one ended. Each call must fit a slot: the host launches one kernel
 * per slot of a larger input.
 */
#ifndef SYMCOLL_CUDA_LAMPORT_CUH
#define SYMCOLL_CUDA_LAMPORT_CUH
#include "device_common.cuh"

namespace symcoll_cuda {

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

/* x with every sentinel word changed (fix_word). */
template <typename T, bool VEC>
__device__ __forceinline__ Pack<T, VEC> fixed(Pack<T, VEC> x) {
  for_words<T, VEC>(x, [](uint32_t &w) { w = fix_word<T>(w); });
  return x;
}
/* A load of vector v of `in`, fixed. The fix uses the value at once, so the warp waits for the
 * load there: a load meant to overlap a later round trip (the state's) is load_cg'd raw, and
 * fixed after that round trip is issued. */
template <typename T, bool VEC>
__device__ __forceinline__ Pack<T, VEC> load_fixed(const char *in, size_t v) {
  return fixed<T, VEC>(load_cg<T, VEC>(in, v));
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

/* Slot [writer] of buffer `buf` on rank `owner`. */
__device__ __forceinline__ char *lamport_slot(const symcoll__cuda_args_t &a, uint32_t buf, int owner, int writer) {
  return a.ws[owner] + a.lp_off + ((size_t)buf * (size_t)a.nranks + (size_t)writer) * a.lp_slot_bytes;
}

/* This launch's buffer: takes the state (bits 0-1: the buffer of this call; above: the bytes a
 * slot of the previous call held), writing this call's `bytes` for the next one. False if an
 * earlier kernel gave up. */
__device__ __forceinline__ bool lamport_take(const symcoll__cuda_args_t &a, uint32_t bytes, uint32_t *buf,
                                             uint32_t *prev_bytes) {
  uint32_t state;
  if (!take_state(
          a, a.lp_state, [&](uint32_t w) { return ((w & 3u) + 1u) % 3u | bytes << 2; }, &state))
    return false;
  *buf = state & 3u, *prev_bytes = state >> 2;
  return true;
}

/* A header for calls that check their signature (all_reduce_rmsnorm): the first
 * SYMCOLL_CUDA_LAMPORT_HEADER bytes of every slot, the data after it, the header in the bytes
 * the state counts (so the next call clears it). Block 0 posts this rank's into every peer's
 * slot; every block waits for its peers' before it writes any output, and a peer in another
 * all_reduce_rmsnorm LAMPORT call (another signature) is met with SYMCOLL_ERR_MISMATCH. Only
 * those: all_reduce's LAMPORT writes no header (a rank there against one here reads the header
 * as data), and a peer in a kernel of another protocol never posts one (TIMEOUT). The signature
 * word is never kCleared. */
__device__ __forceinline__ uint32_t lamport_sig(uint32_t sig) {
  return sig == kCleared ? sig ^ 1u : sig;
}
__device__ __forceinline__ void lamport_put_header(const symcoll__cuda_args_t &a, uint32_t buf) {
  const int p = (int)threadIdx.x;
  if (blockIdx.x != 0 || p >= a.nranks || p == a.rank) return;
  Pack<uint32_t, true> h;
  const uint32_t s = lamport_sig(a.sig);
  h.raw = make_uint4(s, s, s, s);
  store_relaxed_sys<uint32_t, true>(lamport_slot(a, buf, p, a.rank), 0, h);
}
/* All threads of the block call it; false (the error word set) if a peer's header did not come or differs, or
 * if `ok` is false on any thread (a wait of its own that gave up). */
__device__ __forceinline__ bool lamport_headers_ok(const symcoll__cuda_args_t &a, uint32_t buf, bool ok_in = true) {
  const int p = (int)threadIdx.x;
  bool ok = true;
  if (p < a.nranks && p != a.rank) {
    const uint32_t *h = reinterpret_cast<const uint32_t *>(lamport_slot(a, buf, a.rank, p));
    uint32_t w = kCleared;
    ok = symcoll_impl::spin(
        [&] {
          w = __ldcv(h);
          return w != kCleared;
        },
        a.timeout_ns, a.error, p, a.rank);
    if (ok && w != lamport_sig(a.sig)) {
      symcoll_impl::raise_error(a.error, SYMCOLL_ERR_MISMATCH, p, a.rank);
      ok = false;
    }
  }
  return __syncthreads_and(ok && ok_in) != 0;
}

/* Clears what the previous call wrote into its buffer (peers' slots only), the whole grid. */
__device__ __forceinline__ void lamport_clear(const symcoll__cuda_args_t &a, uint32_t buf, uint32_t prev_bytes) {
  const size_t nclear = ((size_t)prev_bytes + 15) / 16, stride = (size_t)gridDim.x * blockDim.x;
  const uint4 c = make_uint4(kCleared, kCleared, kCleared, kCleared);
  for (int r = 0; r < a.nranks; r++)
    if (r != a.rank)
      for (size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x; v < nclear; v += stride)
        reinterpret_cast<uint4 *>(lamport_slot(a, (buf + 2u) % 3u, a.rank, r))[v] = c;
}

/* symcoll_impl::spin with one copy of try_once's code, for the data polls below (a batch of
 * peers' vectors each try): spin's first try before its loop is a second copy, which doubled
 * these kernels' code (all_reduce's LAMPORT was 0.94-1.00x at 1 KiB-1 MiB with one copy, 2 ranks
 * sharing an H100, bench/results/h100/run38). The barriers keep spin: one word a try, where
 * this form was 1.01-1.07x. */
template <typename F>
__device__ __forceinline__ bool spin_one_copy(F try_once, uint64_t timeout_ns, uint32_t *error, int peer, int rank) {
  uint64_t deadline = 0;
  for (uint32_t i = 0;; i++) {
    if (try_once()) return true;
    if (i == 0)
      deadline = symcoll_impl::globaltimer() + timeout_ns;
    else if ((i & 63) == 0 && symcoll_impl::spin_gives_up(deadline, error, peer, rank))
      return false;
  }
}

/* Vectors (VEC) or elements of a call's data in buffer `buf`, from byte `at` of every slot:
 * push() writes vector v of this rank's input into its slot on every peer; gather() waits
 * until every peer's vector v has arrived in ours and returns the op over ranks (this rank's
 * own part from its input), in rank order, as every kernel reduces. The peers' slots are polled
 * a batch at a time (peers_in_flight): each pass reloads every slot of the batch still empty,
 * so the waits for peers overlap instead of following one another. gather_each() polls one
 * peer at a time. Both clear ok on timeout (recorded in the error word), and do not wait once
 * ok is false. HEADERS (slots with a header: lamport_put_header): while gather() waits for a
 * peer it also reads that peer's header now and then, and a header there that is not the
 * call's is a peer in another call: MISMATCH, and no wait for data that may never come. */
template <typename T, int OP, bool VEC, bool HEADERS = false>
struct LamportPart {
  const symcoll__cuda_args_t &a;
  uint32_t buf;
  size_t at;
  __device__ char *slot(int owner, int writer) const { return lamport_slot(a, buf, owner, writer) + at; }
  __device__ void push(size_t v, const Pack<T, VEC> &x) const {
    for (int p = 0; p < a.nranks; p++)
      if (p != a.rank) store_relaxed_sys<T, VEC>(slot(p, a.rank), v, x);
  }
  __device__ Pack<T, VEC> gather(const char *own, size_t v, bool &ok) const {
    const size_t vs[1] = {v};
    Pack<T, VEC> out[1];
    gather_k<1>(own, vs, 1u, out, ok);
    return out[0];
  }
  /* gather() of the K vectors vs[k] with bit k of `has` set (out[k] of the others is
   * meaningless): every pending slot of them all is reloaded in each pass, so a thread's vectors
   * are waited for together, not one after another. */
  template <int K>
  __device__ void gather_k(const char *own, const size_t (&vs)[K], unsigned has, Pack<T, VEC> (&out)[K],
                           bool &ok) const {
    constexpr int B = peers_in_flight<T, VEC>();
    static_assert(K * B <= 32, "one pending bit a slot");
    reduce_batches_k<T, OP, VEC, K>(
        [&](int r0, Pack<T, VEC>(&y)[K][B]) {
          uint32_t pending = 0; /* bit k * B + j: pack k of rank r0 + j */
#pragma unroll
          for (int j = 0; j < B; j++) {
            const int r = r0 + j;
            if (r == a.rank) {
#pragma unroll
              for (int k = 0; k < K; k++)
                if (has >> k & 1u) y[k][j] = load_fixed<T, VEC>(own, vs[k]);
            } else if (r < a.nranks) {
#pragma unroll
              for (int k = 0; k < K; k++) pending |= (has >> k & 1u) << (k * B + j);
            }
          }
          if (!pending || !ok) return;
          unsigned polls = 0;
          ok = spin_one_copy(
              [&] {
#pragma unroll
                for (int k = 0; k < K; k++)
#pragma unroll
                  for (int j = 0; j < B; j++)
                    if (pending >> (k * B + j) & 1u) y[k][j] = load_cv<T, VEC>(slot(a.rank, r0 + j), vs[k]);
#pragma unroll
                for (int k = 0; k < K; k++)
#pragma unroll
                  for (int j = 0; j < B; j++)
                    if ((pending >> (k * B + j) & 1u) && arrived<T, VEC>(y[k][j])) pending &= ~(1u << (k * B + j));
                if constexpr (HEADERS)
                  if (pending && (++polls & 15u) == 0) other_call(peers_of<K>(pending), r0);
                return pending == 0;
              },
              a.timeout_ns, a.error, r0 + (__ffs((int)peers_of<K>(pending)) - 1), a.rank);
        },
        a.nranks, out);
  }
  /* The peers (bit j: rank r0 + j) with a pending slot, of gather_k<K>'s pending bits. */
  template <int K>
  __device__ static uint32_t peers_of(uint32_t pending) {
    constexpr int B = peers_in_flight<T, VEC>();
    uint32_t m = 0;
#pragma unroll
    for (int k = 0; k < K; k++) m |= pending >> (k * B);
    return K == 1 ? m : m & ((1u << B) - 1u);
  }
  /* HEADERS: MISMATCH where a pending peer's header has come and is not the call's (the spin
   * that waits sees the error word and gives up). */
  __device__ void other_call(uint32_t pending, int r0) const {
    for (int j = 0; pending; j++, pending >>= 1) {
      if (!(pending & 1u)) continue;
      const uint32_t w = __ldcv(reinterpret_cast<const uint32_t *>(lamport_slot(a, buf, a.rank, r0 + j)));
      if (w != kCleared && w != lamport_sig(a.sig))
        symcoll_impl::raise_error(a.error, SYMCOLL_ERR_MISMATCH, r0 + j, a.rank);
    }
  }
  /* gather() one rank at a time, each peer's slot polled alone until it arrives: for one or
   * two ranks, where a batch would hold one peer at most. */
  __device__ Pack<T, VEC> gather_each(const char *own, size_t v, bool &ok) const {
    return reduce_with<T, OP, VEC>(
        [&](int r) {
          if (r == a.rank) return load_fixed<T, VEC>(own, v);
          Pack<T, VEC> y;
          const char *s = slot(a.rank, r);
          ok = ok && spin_one_copy(
                         [&] {
                           y = load_cv<T, VEC>(s, v);
                           return arrived<T, VEC>(y);
                         },
                         a.timeout_ns, a.error, r, a.rank);
          return y;
        },
        a.nranks);
  }
};

}  // namespace symcoll_cuda
#endif
