/*
 * Device helpers shared by the collective kernels: element types and their conversions,
 * 16-byte packs, the reduction in rank order, staging, the barrier with the call's signature,
 * per-call state per block, and LL packets.
 */
#ifndef SYMCOLL_CUDA_DEVICE_COMMON_CUH
#define SYMCOLL_CUDA_DEVICE_COMMON_CUH
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "cuda_internal.h"
#include "grid_dependency.cuh"
#include "symcoll_device.cuh"

namespace symcoll_cuda {

/* ---- element types ----------------------------------------------------------------------- */

struct fp8_e4m3 {
  uint8_t x;
};
struct fp8_e5m2 {
  uint8_t x;
};

/* Conv<T>: Acc is the type elements are combined in; load widens, store rounds back. Floating
 * types narrower than 32 bits combine in fp32, fp64 in fp64, integers in their own type; the
 * same rules as the CPU loops (src/host/reduce_loops.h), so both give the same bits. */
template <typename T>
struct Conv {
  using Acc = T;
  __device__ static Acc load(T v) { return v; }
  __device__ static T store(Acc v) { return v; }
};
template <>
struct Conv<__half> {
  using Acc = float;
  __device__ static float load(__half v) { return __half2float(v); }
  __device__ static __half store(float v) { return __float2half_rn(v); }
};
template <>
struct Conv<__nv_bfloat16> {
  using Acc = float;
  __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};
template <__nv_fp8_interpretation_t K, typename W>
struct ConvFp8 {
  using Acc = float;
  __device__ static float load(W v) { return __half2float(__half(__nv_cvt_fp8_to_halfraw(v.x, K))); }
  __device__ static W store(float v) { return W{__nv_cvt_float_to_fp8(v, __NV_SATFINITE, K)}; }
};
template <>
struct Conv<fp8_e4m3> : ConvFp8<__NV_E4M3, fp8_e4m3> {};
template <>
struct Conv<fp8_e5m2> : ConvFp8<__NV_E5M2, fp8_e5m2> {};

/* The same expressions as the CPU loops: max/min keep acc unless x wins (NaN in x wins);
 * integer sums and products wrap around in the unsigned type of the same width (a product of
 * types narrower than int is taken in 32 bits: their promotion to int could overflow). AVG
 * combines as SUM; finish() divides once at the end. Floating products are __fmul_rn /
 * __dmul_rn: round to nearest, never fused with a neighbouring add into an FMA. */
template <int OP, typename A>
__device__ __forceinline__ A combine(A acc, A x) {
  static_assert(OP == SYMCOLL_SUM || OP == SYMCOLL_AVG || OP == SYMCOLL_PROD || OP == SYMCOLL_MAX || OP == SYMCOLL_MIN,
                "an op of symcoll_op_t");
  if constexpr (OP == SYMCOLL_SUM || OP == SYMCOLL_AVG) {
    if constexpr (std::is_integral<A>::value) {
      using U = typename std::make_unsigned<A>::type;
      return (A)((U)acc + (U)x);
    } else {
      return acc + x;
    }
  } else if constexpr (OP == SYMCOLL_PROD) {
    if constexpr (std::is_integral<A>::value) {
      using U = typename std::make_unsigned<A>::type;
      using W = typename std::conditional<(sizeof(A) < sizeof(unsigned)), unsigned, U>::type;
      return (A)(U)((W)(U)acc * (W)(U)x);
    } else if constexpr (std::is_same<A, double>::value) {
      return __dmul_rn(acc, x);
    } else {
      return __fmul_rn(acc, x);
    }
  } else if constexpr (OP == SYMCOLL_MAX) {
    return acc > x ? acc : x;
  } else {
    return acc < x ? acc : x;
  }
}

/* acc / n correctly rounded for a float quotient well inside the normal range: q = acc x rcp
 * (rcp = 1 / n correctly rounded) is within an ulp, the residual acc - q x n is exact in an
 * fma, and one correction rounds it (Markstein); zeros stay as they are. Elsewhere
 * (subnormals, infinities, NaN, the edges of the range) the IEEE division, whose fast path
 * costs more than this and whose slow path far more. test_internal's `avg_quotient` checks the
 * same operations against the host's division, bit for bit. */
__device__ __forceinline__ float div_by_count(float acc, float n, float rcp) {
  const float q = __fmul_rn(acc, rcp), m = fabsf(q);
  if (m >= 0x1p-96f && m <= 0x1p+96f) return __fmaf_rn(__fmaf_rn(-q, n, acc), rcp, q);
  return acc == 0.0f ? q : __fdiv_rn(acc, n); /* a zero of acc's sign, as the division's */
}

/* After the last combine of `nsrc` sources: AVG divides the sum once, in Acc, as the CPU loops
 * do, correctly rounded: floats by div_by_count (the bits of IEEE division, not a plain
 * product by an inexact reciprocal; the build sets no fast-math flag: its -ftz would flush
 * subnormals, which the CPU loops keep), doubles by __ddiv_rn; integers: C's division of the wrapped
 * sum (signed: toward zero; nsrc <= 64 fits every type). A count that is a power of two (the
 * usual 2, 4, 8 ranks) has an exact reciprocal, so one rounded product is the correctly
 * rounded quotient everywhere, subnormals, infinities and NaN included. Every kernel combines
 * all nranks sources in one go before it calls this (none accumulates partial sums across
 * steps), so nsrc is nranks everywhere. Other ops: acc as it is. */
template <int OP, typename A>
__device__ __forceinline__ A finish(A acc, int nsrc) {
  if constexpr (OP == SYMCOLL_AVG) {
    const bool pow2 = (nsrc & (nsrc - 1)) == 0;
    if constexpr (std::is_integral<A>::value)
      return (A)(acc / (A)nsrc);
    else if constexpr (std::is_same<A, double>::value)
      return pow2 ? __dmul_rn(acc, __drcp_rn((double)nsrc)) : __ddiv_rn(acc, (double)nsrc);
    else
      return pow2 ? __fmul_rn(acc, __frcp_rn((float)nsrc)) : div_by_count(acc, (float)nsrc, __frcp_rn((float)nsrc));
  } else {
    return acc;
  }
}

/* Calls f with a T of the dtype (as a null pointer): one place maps dtypes to types. */
template <typename F>
__host__ __device__ auto with_dtype(symcoll_dtype_t dt, F f) {
  switch (dt) {
    case SYMCOLL_FLOAT16:
      return f((__half *)nullptr);
    case SYMCOLL_BFLOAT16:
      return f((__nv_bfloat16 *)nullptr);
    case SYMCOLL_INT8:
      return f((int8_t *)nullptr);
    case SYMCOLL_UINT8:
      return f((uint8_t *)nullptr);
    case SYMCOLL_INT32:
      return f((int32_t *)nullptr);
    case SYMCOLL_UINT32:
      return f((uint32_t *)nullptr);
    case SYMCOLL_INT64:
      return f((int64_t *)nullptr);
    case SYMCOLL_UINT64:
      return f((uint64_t *)nullptr);
    case SYMCOLL_FLOAT64:
      return f((double *)nullptr);
    case SYMCOLL_FLOAT8_E4M3:
      return f((fp8_e4m3 *)nullptr);
    case SYMCOLL_FLOAT8_E5M2:
      return f((fp8_e5m2 *)nullptr);
    default:
      return f((float *)nullptr);
  }
}

/* ---- packs ----------------------------------------------------------------------------------- */

template <int N>
struct UInt;
template <>
struct UInt<1> {
  using T = unsigned char;
};
template <>
struct UInt<2> {
  using T = unsigned short;
};
template <>
struct UInt<4> {
  using T = unsigned int;
};
template <>
struct UInt<8> {
  using T = unsigned long long;
};

/* How a kernel touches memory: ONE element (tails); a 16-byte unit in one access (VECTOR:
 * every address the kernel computes is 16-byte aligned); a 16-byte unit element by element
 * (UNIT: some buffer of this rank is not). Kernels that meet peers at barriers split their
 * work in 16-byte units either way (unit_access), so that block b of every rank owns the
 * same bytes whatever each rank's alignment: NCCL lets ranks pass buffers of different
 * alignment, and a split that followed it would have block b read a peer's bytes that
 * another of the peer's blocks staged. */
enum { ONE = 0, VECTOR = 1, UNIT = 2 };
template <bool VEC>
__host__ __device__ constexpr int unit_access() {
  return VEC ? VECTOR : UNIT;
}

/* E elements of T: a 16-byte unit, or one element. */
template <typename T, int A>
struct Pack {
  static constexpr int E = A == ONE ? 1 : 16 / (int)sizeof(T);
  using Raw = typename std::conditional<A == ONE, typename UInt<sizeof(T)>::T, uint4>::type;
  union {
    Raw raw;
    T e[E];
  };
};

/* Unit (or element) v of p, through L2 (peers' stores land there). */
template <typename T, int A>
__device__ __forceinline__ Pack<T, A> load_cg(const char *p, size_t v) {
  using P = Pack<T, A>;
  P x;
  if constexpr (A == UNIT) {
    using W = typename UInt<sizeof(T)>::T;
#pragma unroll
    for (int i = 0; i < P::E; i++) {
      const W w = __ldcg(reinterpret_cast<const W *>(p) + v * P::E + i);
      memcpy(&x.e[i], &w, sizeof(T));
    }
  } else {
    x.raw = __ldcg(reinterpret_cast<const typename P::Raw *>(p) + v);
  }
  return x;
}

template <typename T, int A>
__device__ __forceinline__ void store(char *p, size_t v, const Pack<T, A> &x) {
  using P = Pack<T, A>;
  if constexpr (A == UNIT) {
    using W = typename UInt<sizeof(T)>::T;
#pragma unroll
    for (int i = 0; i < P::E; i++) {
      W w;
      memcpy(&w, &x.e[i], sizeof(T));
      reinterpret_cast<W *>(p)[v * P::E + i] = w;
    }
  } else {
    reinterpret_cast<typename P::Raw *>(p)[v] = x.raw;
  }
}

/* Loads a thread keeps in flight in a pull reduction: the ranks' packs of a vector are fetched
 * in batches, every fetch of a batch issued before the first is combined, so a thread waits
 * one round trip per batch instead of one per rank. 4 packs of 16 bytes a batch (16
 * registers; kernels of 1024 threads have 64), 2 where the accumulators alone take more than
 * 8 registers (fp8: 16 floats a pack; int8: 16 registers of one byte each); more spills to
 * local memory (ptxas -v). */
template <typename T, int ACC>
__host__ __device__ constexpr int peers_in_flight() {
  return Pack<T, ACC>::E * ((sizeof(typename Conv<T>::Acc) + 3) / 4) > 8 ? 2 : 4;
}

/* The op over ranks of K packs side by side: fetch_batch(r0, y) puts into y[k][0 .. B) (B =
 * peers_in_flight) pack k of ranks r0, r0 + 1, ... (< nranks); each pack's are combined in rank
 * order, in Acc (AVG: divided by nranks once at the end), into out[k]. The order of combination
 * never depends on when a pack arrives, so every rank gets the same bits. */
template <typename T, int OP, int ACC, int K, typename FetchBatch>
__device__ __forceinline__ void reduce_batches_k(FetchBatch fetch_batch, int nranks, Pack<T, ACC> (&out)[K]) {
  constexpr int E = Pack<T, ACC>::E;
  using A = typename Conv<T>::Acc;
  constexpr int B = peers_in_flight<T, ACC>();
  A acc[K][E];
  for (int r0 = 0; r0 < nranks; r0 += B) {
    Pack<T, ACC> y[K][B];
    fetch_batch(r0, y);
#pragma unroll
    for (int k = 0; k < K; k++)
#pragma unroll
      for (int j = 0; j < B; j++) {
        if (r0 + j >= nranks) break;
#pragma unroll
        for (int i = 0; i < E; i++) {
          const A x = Conv<T>::load(y[k][j].e[i]);
          acc[k][i] = r0 + j == 0 ? x : combine<OP>(acc[k][i], x);
        }
      }
  }
#pragma unroll
  for (int k = 0; k < K; k++)
#pragma unroll
    for (int i = 0; i < E; i++) out[k].e[i] = Conv<T>::store(finish<OP>(acc[k][i], nranks));
}

/* reduce_batches_k of one pack: fetch_batch(r0, y) fills y[0 .. B). Its own loop, not a call of
 * reduce_batches_k<1>: the same arithmetic, but that form scheduled the fused one-shot norm's
 * FIT 2 kernel otherwise, 1.01-1.05x at 1-2048 x 8192 bf16 (one H100, bench/results/h100/run41). */
template <typename T, int OP, int ACC, typename FetchBatch>
__device__ __forceinline__ Pack<T, ACC> reduce_batches(FetchBatch fetch_batch, int nranks) {
  constexpr int E = Pack<T, ACC>::E;
  using A = typename Conv<T>::Acc;
  constexpr int B = peers_in_flight<T, ACC>();
  A acc[E];
  for (int r0 = 0; r0 < nranks; r0 += B) {
    Pack<T, ACC> y[B];
    fetch_batch(r0, y);
#pragma unroll
    for (int j = 0; j < B; j++) {
      if (r0 + j >= nranks) break;
#pragma unroll
      for (int i = 0; i < E; i++) {
        const A x = Conv<T>::load(y[j].e[i]);
        acc[i] = r0 + j == 0 ? x : combine<OP>(acc[i], x);
      }
    }
  }
  Pack<T, ACC> out;
#pragma unroll
  for (int i = 0; i < E; i++) out.e[i] = Conv<T>::store(finish<OP>(acc[i], nranks));
  return out;
}

/* reduce_batches over fetch(r): every fetch of a batch is issued before any is used. */
template <typename T, int OP, int ACC, typename Fetch>
__device__ __forceinline__ Pack<T, ACC> reduce_with(Fetch fetch, int nranks) {
  return reduce_batches<T, OP, ACC>(
      [&](int r0, Pack<T, ACC>(&y)[peers_in_flight<T, ACC>()]) {
#pragma unroll
        for (int j = 0; j < peers_in_flight<T, ACC>(); j++)
          if (r0 + j < nranks) y[j] = fetch(r0 + j);
      },
      nranks);
}

/* reduce_with over src(r)[v]. `src` reads the peer table from the kernel's parameters with a
 * block-uniform index (a constant-cache load), so no per-thread copy of the table is made. */
template <typename T, int OP, int ACC, typename Src>
__device__ __forceinline__ Pack<T, ACC> reduce_at(Src src, int nranks, size_t v) {
  return reduce_with<T, OP, ACC>([&](int r) { return load_cg<T, ACC>(src(r), v); }, nranks);
}

/*
 * Which thread touches which staged bytes, in every kernel with rounds: thread `first` of the
 * grid owns the vectors first, first + stride, ... of every round. The elements past the last
 * whole vector (only the last round has them: the tail, fewer than a vector's) count as units
 * nvec, nvec + 1, ... of one element each: element j belongs to the thread whose share holds
 * unit nvec + j, so that a tail's elements move side by side, one a thread (a grid's stride,
 * 32 threads at least, exceeds any tail), instead of one after another in one thread. The
 * split never depends on the round's size or on a rank's alignment, so a block that went on
 * to the next round only overwrites staging that the same block of every peer (met at the
 * barrier) was reading; other blocks of a peer may still be in the round before, on other
 * bytes.
 */

/* The tail element of a share whose first unit at or past nvec is v: j, or -1 (none). */
__device__ __forceinline__ int tail_at(size_t v, size_t nvec, size_t tail) {
  return v < nvec + tail ? (int)(v - nvec) : -1;
}

/* tail_at() for the share from `first`, where the kernel does not walk it. */
__device__ __forceinline__ int owns_tail(size_t first, size_t stride, size_t nvec, size_t tail) {
  if (first >= nvec) return tail_at(first, nvec, tail);
  const size_t r = (nvec - first) % stride;
  return tail_at(r ? nvec + (stride - r) : nvec, nvec, tail);
}

/* Tail element j (>= 0: this thread's) reduced over ranks. */
template <typename T, int OP, typename Src>
__device__ __forceinline__ void reduce_tail(Src src, int nranks, char *dst, size_t nvec, int j) {
  constexpr int E = Pack<T, VECTOR>::E; /* a unit's elements, VECTOR or UNIT */
  if (j < 0) return;
  const size_t i = nvec * E + (size_t)j;
  store<T, ONE>(dst, i, reduce_at<T, OP, ONE>(src, nranks, i));
}

/* Copies this thread's vectors (first, first + stride, ... < nvec) of np streams (np <= P),
 * from src(j) to dst(j): a vector's loads from every stream are issued before its first store
 * (the compiler may not move a load past a store that may alias it). */
template <typename T, int ACC, int P, typename Src, typename Dst>
__device__ __forceinline__ void copy_vectors(int np, Src src, Dst dst, size_t nvec, size_t first, size_t stride) {
  for (size_t v = first; v < nvec; v += stride) {
    Pack<T, ACC> y[P];
#pragma unroll
    for (int j = 0; j < P; j++)
      if (j < np) y[j] = load_cg<T, ACC>(src(j), v);
#pragma unroll
    for (int j = 0; j < P; j++)
      if (j < np) store<T, ACC>(dst(j), v, y[j]);
  }
}

/* copy_vectors of np streams (1 .. peers_in_flight); one stream (two ranks) in a loop of its
 * own, with nothing to test a vector. */
template <typename T, int ACC, typename Src, typename Dst>
__device__ __forceinline__ void copy_streams(int np, Src src, Dst dst, size_t nvec, size_t first, size_t stride) {
  if (np == 1) return copy_vectors<T, ACC, 1>(1, src, dst, nvec, first, stride);
  copy_vectors<T, ACC, peers_in_flight<T, ACC>()>(np, src, dst, nvec, first, stride);
}

/* Copies this thread's share of one round (nvec vectors and its tail element, if any) from
 * `in` to `dst`; returns the tail element's index j, or -1 (tail_at). */
template <typename T, int ACC>
__device__ __forceinline__ int stage(char *dst, const char *in, size_t nvec, size_t tail, size_t first, size_t stride) {
  constexpr int E = Pack<T, ACC>::E;
  size_t v = first;
  for (; v < nvec; v += stride) store<T, ACC>(dst, v, load_cg<T, ACC>(in, v));
  const int j = tail_at(v, nvec, tail);
  if (j >= 0) store<T, ONE>(dst, nvec * E + j, load_cg<T, ONE>(in, nvec * E + j));
  return j;
}

/* Copies this thread's share of one round of a block (nvec vectors, and tail element j if
 * j >= 0) from src to dst: the same share stage() takes. */
template <typename T, int ACC>
__device__ __forceinline__ void copy_share(char *dst, const char *src, size_t nvec, size_t first, size_t stride,
                                           int j) {
  constexpr int E = Pack<T, ACC>::E;
  for (size_t v = first; v < nvec; v += stride) store<T, ACC>(dst, v, load_cg<T, ACC>(src, v));
  if (j >= 0) store<T, ONE>(dst, nvec * E + j, load_cg<T, ONE>(src, nvec * E + j));
}

/* The communicator's error word, made visible to the host: a kernel that gives up (it timed
 * out, met a peer in another call, or found that an earlier kernel had given up) copies the
 * word into host memory, where the next call on this rank sees it and fails with it (the
 * launch path, cuda_coll.c), instead of enqueuing kernels that would do nothing and return
 * OK. */
__device__ __forceinline__ void publish_error(const symcoll__cuda_args_t &a) {
  if (!a.host_error) return;
  const uint32_t w = symcoll_impl::ld_relaxed_sys(a.error);
  if (w) *(volatile uint32_t *)a.host_error = w;
}
#define GIVE_UP(a)    \
  do {                \
    publish_error(a); \
    return;           \
  } while (0)

/*
 * The collectives' barrier: posted epochs. Row `slot` of a rank's pad (SYMCOLL_MAX_RANKS
 * words) holds, in 8-byte word p, what peer p last posted there, {epoch, value}, and in words
 * 32 + p this rank's count of the barriers it met on the slot with peer p. Thread p < nranks
 * of the block counts one more barrier (epoch e), posts {e, value} into peer p's row with one
 * release store (no round trip: the old barrier's returning CAS on the peer's pad waited for
 * one before it could even start waiting), then polls its own row's word p with acquire loads
 * until the peer's epoch reaches e. A peer can be one barrier ahead (it passed e, having seen
 * this rank's post of e, and posted e + 1 over it): its check of this rank's value then
 * stands for both. At e, a value other than ours is a peer in another call: MISMATCH. Pads
 * start zeroed (epoch 0); every block of every rank meets the same barriers on its slot, so
 * the counts agree; epochs compare modulo 2^32. The public device API
 * (symcoll_dev_barrier_block) keeps its self-resetting slots on user allocations' pads.
 */
static_assert(SYMCOLL_CUDA_MAX_RANKS * 8 + SYMCOLL_CUDA_MAX_RANKS * 4 <= SYMCOLL_MAX_RANKS * 4,
              "a pad row holds the posted words and the counts");

__device__ __forceinline__ bool epoch_barrier(uint32_t *const *pads, uint32_t slot, int rank, int nranks,
                                              uint32_t value, uint64_t timeout_ns, uint32_t *error) {
  __syncthreads();
  bool ok = true;
  const int p = (int)threadIdx.x;
  if (p < nranks && p != rank) {
    uint32_t *row = pads[rank] + (size_t)slot * SYMCOLL_MAX_RANKS;
    const uint32_t e = row[32 + p] + 1u; /* only this thread of this rank touches the count */
    row[32 + p] = e;
    symcoll_impl::st_release_sys(reinterpret_cast<uint64_t *>(pads[p] + (size_t)slot * SYMCOLL_MAX_RANKS) + rank,
                                 (uint64_t)value << 32 | e);
    const uint64_t *mine = reinterpret_cast<const uint64_t *>(row) + p;
    bool other = false;
    ok = symcoll_impl::spin(
        [&] {
          const uint64_t w = symcoll_impl::ld_acquire_sys(mine);
          const int32_t ahead = (int32_t)((uint32_t)w - e);
          if (ahead < 0) return false;
          other = ahead == 0 && (uint32_t)(w >> 32) != value;
          return true;
        },
        timeout_ns, error, p, rank);
    if (ok && other) {
      symcoll_impl::raise_error(error, SYMCOLL_ERR_MISMATCH, p, rank);
      ok = false;
    }
  }
  return __syncthreads_and(ok) != 0;
}

/* Every rank's block with this block index meets here with `value`: the call's signature,
 * or (BARRIER_VALUE with sig_with_state) the signature with per-rank state that must agree folded in, so that
 * ranks that disagree meet SYMCOLL_ERR_MISMATCH instead of each other's data. */
#define BARRIER_VALUE(a, value)                                                                                    \
  do {                                                                                                             \
    if (!epoch_barrier((a).pad, blockIdx.x, (a).rank, (a).nranks, (value), (a).timeout_ns, (a).error)) GIVE_UP(a); \
  } while (0)
#define BARRIER(a) BARRIER_VALUE(a, (a).sig)

/* The signature with `state` folded in (never 0, the value of a slot at rest). */
__device__ __forceinline__ uint32_t sig_with_state(uint32_t sig, uint32_t state) {
  const uint32_t v = sig ^ (state * 0x6b43a9b5u);
  return v ? v : 1u;
}

/* Per-call state of a rank (a call counter, a buffer index), one copy per block slot. Thread 0
 * reads its block's copy and writes the next value at once; block 0 also advances the copies
 * of the slots this launch has no block for. So every copy moves on every call, and no block
 * waits for another at the end. Also reads the error word: after an error the state may be
 * stale on some ranks, and the kernel must give up (false). */
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

/* ---- LL packets ------------------------------------------------------------------------------ */
/* 16 bytes: data word, flag, data word, flag, stored with one 16-byte store. Each 8-byte half
 * arrives whole, so a reader that sees both flags sees both words. The flag is the call's
 * number (the same on every rank, never 0, 2^32 - 2 calls before it repeats): a slot's stale
 * packets carry an older number. Each writer also puts a header packet before its slot's
 * data: {signature, number, signature, number}; readers check it before they write
 * anything, so a peer in another call is met with SYMCOLL_ERR_MISMATCH, not with its data. */

__device__ __forceinline__ void ll_store(char *base, size_t i, uint32_t lo, uint32_t hi, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(reinterpret_cast<uint4 *>(base) + i), "r"(lo),
               "r"(flag), "r"(hi), "r"(flag)
               : "memory");
}

/* Waits for packet i of call `flag`; false on timeout (recorded in the error word). */
__device__ __forceinline__ bool ll_load(const char *base, size_t i, uint32_t flag, const symcoll__cuda_args_t &a,
                                        int peer, uint32_t *lo_p, uint32_t *hi_p) {
  uint4 v;
  const bool ok = symcoll_impl::spin(
      [&] {
        asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(reinterpret_cast<const uint4 *>(base) + i)
                     : "memory");
        return v.y == flag && v.w == flag;
      },
      a.timeout_ns, a.error, peer, a.rank);
  *lo_p = v.x;
  *hi_p = v.z;
  return ok;
}

/* The header of a slot: the writer's signature for call `flag`. */
__device__ __forceinline__ void ll_put_header(char *slot, uint32_t sig, uint32_t flag) {
  ll_store(slot, 0, sig, sig, flag);
}
__device__ __forceinline__ bool ll_check_header(const char *slot, uint32_t flag, const symcoll__cuda_args_t &a,
                                                int peer) {
  uint32_t lo, hi;
  if (!ll_load(slot, 0, flag, a, peer, &lo, &hi)) return false;
  if (lo == a.sig && hi == a.sig) return true;
  symcoll_impl::raise_error(a.error, SYMCOLL_ERR_MISMATCH, peer, a.rank);
  return false;
}

/* The LL slot of `writer` in `owner`'s buffer `buf`: a header packet, then the data packets. */
__device__ __forceinline__ char *ll_slot(const symcoll__cuda_args_t &a, int owner, uint32_t buf, int writer) {
  return a.ws[owner] + a.ll_off + ((size_t)buf * a.nranks + writer) * a.ll_slot_bytes;
}

/* Every block checks its peers' headers before it writes anything (all threads call it). */
__device__ __forceinline__ bool ll_headers_ok(const symcoll__cuda_args_t &a, uint32_t buf, uint32_t flag) {
  const int t = (int)threadIdx.x;
  bool ok = true;
  if (t < a.nranks && t != a.rank) ok = ll_check_header(ll_slot(a, a.rank, buf, t), flag, a, t);
  return __syncthreads_and(ok) != 0;
}

/* 8 bytes of a block at word w (fewer at its end), as two 32-bit halves; byte loads where the
 * address is not 8-byte aligned. The LL kernels that move bytes (all_gather, all_to_all,
 * broadcast) count their blocks in bytes. */
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

/* The LL call number of this launch (1 .. 2^32 - 2, the same on every rank; consecutive
 * calls alternate between odd and even, which pick the buffer). */
__device__ __forceinline__ bool ll_epoch(const symcoll__cuda_args_t &a, uint32_t *epoch_p) {
  uint32_t w;
  if (!take_state(
          a, a.ll_epoch, [](uint32_t x) { return x % 0xfffffffeu + 1u; }, &w))
    return false;
  *epoch_p = w % 0xfffffffeu + 1u;
  return true;
}

}  // namespace symcoll_cuda
#endif
