/*
 * All-gather and all-to-all kernels. Bytes are moved, not combined: the kernels are
 * instantiated per element size (1, 2, 4, 8 bytes: unsigned types of that width) and per
 * vector path (16-byte pieces when every address is 16-byte aligned). `count` is this
 * launch's elements per rank, `stride` the elements between ranks' blocks in recv (all_to_all:
 * in send too). The two collectives differ only in what rank r sends rank q: all_gather its
 * one block (send), all_to_all block q of send (template A2A); rank q puts what it gets from
 * r at block r of recv either way. In place is all_gather's send == recv + rank * stride,
 * all_to_all's send == recv: both say that this rank's piece for itself already lies at
 * block [rank] of recv (piece(rank) == out(rank)).
 *
 * AllGather_Pull: each block stages its share of this rank's piece(s) in one half of the
 *   double buffer (call k uses half k % 2: its previous kernel met every peer, so the half of
 *   call k-2 is no longer read; all_to_all stages piece q in slot [q] of the half), meets its
 *   twins at a barrier, then copies every peer's piece for this rank from the peer's half,
 *   starting with the next rank so that ranks do not all read one peer at once. A symmetric
 *   input is read in place instead (all_to_all: at peer's send + rank * stride), and then a
 *   trailing barrier tells peers when it may change.
 * AllGather_Push: each block stores its share of this rank's piece for peer q into slot [rank]
 *   of q's half, meets its twins, and copies its own half's slots out. With a symmetric output
 *   it stores straight into every peer's output block [rank], between a barrier that says
 *   every peer is in the call (its output may be written) and one that says every store
 *   landed (all_to_all only when not in place: see all_to_all in cuda_coll.c).
 * AllGather_LL: no barrier: each rank writes its piece for each peer as LL packets (data with
 *   the call's number beside it) into slot [rank] of that peer's LL buffer and a header with
 *   the call's signature; each rank checks the headers, then polls the packets of every peer.
 *
 * In place is safe for all_to_all, where this rank's output blocks are its pieces for peers:
 * each thread writes block p of recv only at the units it has itself read (staged, stored or
 * sent as packets) from piece p earlier in the same round; peers never write into this rank's
 * recv then.
 */
#include "device_common.cuh"

namespace symcoll_cuda {
namespace {

/* Elements from send to the piece for rank q: all_to_all block q, all_gather the one block. */
template <bool A2A>
__device__ __forceinline__ size_t piece_of(int q, size_t stride) {
  return A2A ? (size_t)q * stride : 0;
}

/* Unit (or element) v of this rank's piece for each peer q (piece(q): its start in send) into
 * dst(q), and of its piece for itself into `own` unless that is null; all_gather loads its
 * one piece once for all. */
template <typename T, int ACC, bool A2A, typename Piece, typename Dst>
__device__ __forceinline__ void send_unit(const symcoll__cuda_args_t &a, Piece piece, Dst dst, char *own, size_t v) {
  Pack<T, ACC> x;
  if constexpr (!A2A) x = load_cg<T, ACC>(piece(a.rank), v);
  for (int k = 1; k < a.nranks; k++) {
    const int q = (a.rank + k) % a.nranks;
    if constexpr (A2A) x = load_cg<T, ACC>(piece(q), v);
    store<T, ACC>(dst(q), v, x);
  }
  if (own) {
    if constexpr (A2A) x = load_cg<T, ACC>(piece(a.rank), v);
    store<T, ACC>(own, v, x);
  }
}

template <typename T, bool VEC, bool A2A>
__global__ void __launch_bounds__(1024) AllGather_Pull(const symcoll__cuda_args_t a) {
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
  const size_t slot = A2A ? a.chunk_elems * sizeof(T) : 0; /* all_to_all: piece q at slot [q] of a half */
  const bool in_place =
      a.send + piece_of<A2A>(a.rank, a.stride) * sizeof(T) == a.recv + (size_t)a.rank * a.stride * sizeof(T);
  for (size_t base = 0; base < a.count; base += round) {
    if (base > 0) BARRIER_VALUE(a, meet); /* peers are done with the previous round's staging */
    const size_t n = a.count - base < round ? a.count - base : round;
    const size_t nvec = n / E, tail = n - nvec * E;
    auto piece = [&](int q) { return a.send + (piece_of<A2A>(q, a.stride) + base) * sizeof(T); };
    const int tj = owns_tail(first, stride, nvec, tail); /* this thread's tail element, or -1 */
    if (!a.zero_copy) {
      if constexpr (A2A) {
        for (int k = 1; k < a.nranks; k++) {
          const int q = (a.rank + k) % a.nranks;
          stage<T, U>(a.db[a.rank] + half + (size_t)q * slot, piece(q), nvec, tail, first, stride);
        }
      } else {
        stage<T, U>(a.db[a.rank] + half, piece(a.rank), nvec, tail, first, stride);
      }
    }
    BARRIER_VALUE(a, meet);
    /* Peers in rotated order (rank + 1 first: no peer is every rank's first read), a batch of
     * peers_in_flight at a time (copy_streams). */
    auto peer_src = [&](int p) -> const char * {
      return a.zero_copy ? a.src[p] + (piece_of<A2A>(a.rank, a.stride) + base) * sizeof(T)
                         : a.db[p] + half + (size_t)a.rank * slot;
    };
    auto peer_out = [&](int p) { return a.recv + ((size_t)p * a.stride + base) * sizeof(T); };
    constexpr int B = peers_in_flight<T, U>();
    for (int k0 = 1; k0 < a.nranks; k0 += B) {
      auto peer = [&](int j) {
        const int p = a.rank + k0 + j;
        return p < a.nranks ? p : p - a.nranks;
      };
      copy_streams<T, U>(
          a.nranks - k0 < B ? a.nranks - k0 : B, [&](int j) { return peer_src(peer(j)); },
          [&](int j) { return peer_out(peer(j)); }, nvec, first, stride);
    }
    if (tj >= 0)
      for (int k = 1; k < a.nranks; k++) {
        const int p = (a.rank + k) % a.nranks;
        store<T, ONE>(peer_out(p), nvec * E + tj, load_cg<T, ONE>(peer_src(p), nvec * E + tj));
      }
    if (!in_place)
      copy_share<T, U>(a.recv + ((size_t)a.rank * a.stride + base) * sizeof(T), piece(a.rank), nvec, first, stride, tj);
  }
  if (a.zero_copy) BARRIER_VALUE(a, meet); /* peers are done reading our input */
}

template <typename T, bool VEC, bool A2A>
__global__ void __launch_bounds__(1024) AllGather_Push(const symcoll__cuda_args_t a) {
  const symcoll_cuda::GridDependency dependency;
  constexpr int U = unit_access<VEC>(), E = Pack<T, U>::E;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t mine = (size_t)a.rank * a.stride * sizeof(T); /* our block's offset in an output */
  const bool in_place = a.send + piece_of<A2A>(a.rank, a.stride) * sizeof(T) == a.recv + mine;
  if (a.zero_copy) { /* straight into peers' symmetric outputs */
    const size_t nvec = a.count / E, tail = a.count - nvec * E;
    auto piece = [&](int q) { return a.send + piece_of<A2A>(q, a.stride) * sizeof(T); };
    auto dst = [&](int q) { return a.dst[q] + mine; };
    char *own = in_place ? nullptr : a.recv + mine;
    BARRIER(a);
    size_t v = first;
    for (; v < nvec; v += stride) send_unit<T, U, A2A>(a, piece, dst, own, v);
    const int j = tail_at(v, nvec, tail);
    if (j >= 0) send_unit<T, false, A2A>(a, piece, dst, own, nvec * E + j);
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
    auto piece = [&](int q) { return a.send + (piece_of<A2A>(q, a.stride) + base) * sizeof(T); };
    auto dst = [&](int q) { return a.db[q] + half + (size_t)a.rank * slot; };
    size_t v = first;
    for (; v < nvec; v += stride) send_unit<T, U, A2A>(a, piece, dst, nullptr, v);
    const int j = tail_at(v, nvec, tail);
    if (j >= 0) send_unit<T, false, A2A>(a, piece, dst, nullptr, nvec * E + j);
    BARRIER_VALUE(a, meet);
    for (int p = 0; p < a.nranks; p++) {
      char *out = a.recv + ((size_t)p * a.stride + base) * sizeof(T);
      if (p != a.rank)
        copy_share<T, U>(out, a.db[a.rank] + half + (size_t)p * slot, nvec, first, stride, j);
      else if (!in_place)
        copy_share<T, U>(out, piece(a.rank), nvec, first, stride, j);
    }
  }
}

/* Counts in bytes here (the host passes byte counts): `count` bytes per rank, `stride` bytes
 * between blocks. */
template <bool ALIGNED, bool A2A>
__global__ void __launch_bounds__(1024) AllGather_LL(const symcoll__cuda_args_t a) {
  const symcoll_cuda::GridDependency dependency;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t bytes = a.count;
  const size_t words = (bytes + 7) / 8;
  uint32_t flag;
  if (!ll_epoch(a, &flag)) GIVE_UP(a);
  const uint32_t buf = flag & 1u;
  auto piece = [&](int q) { return a.send + piece_of<A2A>(q, a.stride); };
  for (size_t w = first; w < words; w += stride) {
    uint32_t lo, hi;
    if constexpr (!A2A) word_load<ALIGNED>(piece(a.rank), w, bytes, &lo, &hi);
    for (int k = 1; k < a.nranks; k++) {
      const int q = (a.rank + k) % a.nranks;
      if constexpr (A2A) word_load<ALIGNED>(piece(q), w, bytes, &lo, &hi);
      ll_store(ll_slot(a, q, buf, a.rank) + 16, w, lo, hi, flag);
    }
  }
  if (blockIdx.x == 0 && (int)threadIdx.x < a.nranks && (int)threadIdx.x != a.rank)
    ll_put_header(ll_slot(a, threadIdx.x, buf, a.rank), a.sig, flag);
  if (!ll_headers_ok(a, buf, flag)) GIVE_UP(a);
  const bool in_place = piece(a.rank) == a.recv + (size_t)a.rank * a.stride;
  for (size_t w = first; w < words; w += stride) {
    for (int k = 1; k < a.nranks; k++) {
      const int p = (a.rank + k) % a.nranks;
      uint32_t lo, hi;
      if (!ll_load(ll_slot(a, a.rank, buf, p) + 16, w, flag, a, p, &lo, &hi)) GIVE_UP(a);
      word_store<ALIGNED>(a.recv + (size_t)p * a.stride, w, bytes, lo, hi);
    }
    if (!in_place) {
      uint32_t lo, hi;
      word_load<ALIGNED>(piece(a.rank), w, bytes, &lo, &hi);
      word_store<ALIGNED>(a.recv + (size_t)a.rank * a.stride, w, bytes, lo, hi);
    }
  }
}

template <typename T, bool A2A>
const void *pick(const symcoll__cuda_launch_t *l) {
  switch (l->algo) {
    case SYMCOLL_ALGO_PULL:
      return l->vec ? (const void *)AllGather_Pull<T, true, A2A> : (const void *)AllGather_Pull<T, false, A2A>;
    case SYMCOLL_ALGO_PUSH:
      return l->vec ? (const void *)AllGather_Push<T, true, A2A> : (const void *)AllGather_Push<T, false, A2A>;
    case SYMCOLL_ALGO_LAMPORT:
      return l->vec ? (const void *)AllGather_LL<true, A2A> : (const void *)AllGather_LL<false, A2A>;
    default:
      return nullptr; /* copy_engine: no kernel of its own */
  }
}

template <bool A2A>
const void *pick_size(const symcoll__cuda_launch_t *l) {
  switch (symcoll_dtype_size(l->dtype)) {
    case 1:
      return pick<unsigned char, A2A>(l);
    case 2:
      return pick<unsigned short, A2A>(l);
    case 4:
      return pick<unsigned int, A2A>(l);
    default:
      return pick<unsigned long long, A2A>(l);
  }
}

}  // namespace
}  // namespace symcoll_cuda

/* all_gather and all_to_all (l->coll says which). */
extern "C" const void *symcoll__cuda_allgather_kernel(const symcoll__cuda_launch_t *l) {
  return l->coll == SYMCOLL_COLL_ALL_TO_ALL ? symcoll_cuda::pick_size<true>(l) : symcoll_cuda::pick_size<false>(l);
}
