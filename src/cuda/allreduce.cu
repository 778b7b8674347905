/*
 * All-reduce kernels over symmetric memory.
 *
 * AllReduce_OneShot: each block stages its share of the caller's input into this rank's
 *   workspace, meets its twin blocks of every rank at a block-wise barrier, reads every
 *   rank's copy of its share (16-byte loads), reduces in fp32 in rank order and writes the
 *   result; a second barrier tells peers the workspace may be overwritten. Zero-copy
 *   (input already symmetric) skips the staging.
 * AllReduce_TwoShot: each rank reduces its 1/n of the vectors from all ranks (staged, or where
 *   symmetric inputs lie) and pushes the results to every rank (straight into symmetric
 *   outputs, or into peers' workspaces for rounds up to SYMCOLL_GPU_TWO_SHOT_PUSH_BYTES) with two
 *   barriers a round, or
 *   leaves them in its workspace for the others to pull, with a third.
 * AllReduce_Lamport: no barrier at all; data carries its own arrival (lamport.cuh).
 * Block b of every rank owns the same elements, so per-block barriers (slot = block) are
 * enough. Inputs larger than the workspace are processed in rounds inside the one kernel.
 * Every wait is bounded: on timeout the kernel records the error and returns. Barriers carry
 * the call's signature: a block that meets a peer in another call records MISMATCH.
 * Every dtype: floating types narrower than 32 bits combine in fp32 (device_common.cuh).
 * Every op: each kernel combines all nranks sources of an element in one go, in rank order
 * (two-shot too: the owner of a vector reduces every rank's copy of it), so AVG divides once.
 * reduce (rooted) runs AllReduce_OneShot with a.root >= 0: only the root reduces and writes.
 */
#include "lamport.cuh"

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
  const symcoll_cuda::GridDependency dependency;
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
      reduce_tail<T, OP>(src, a.nranks, out, nvec, tail_at(v, nvec, tail));
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
  const symcoll_cuda::GridDependency dependency;
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
    const int j = stage<T, U>(mine, in, nvec, tail, first, stride);
    BARRIER_VALUE(a, meet);
    for (size_t v = first; v < nvec; v += stride) store<T, U>(out, v, reduce_at<T, OP, U>(src, a.nranks, v));
    reduce_tail<T, OP>(src, a.nranks, out, nvec, j);
  }
}

/* AllReduce_Lamport: the LAMPORT protocol (lamport.cuh) over the input as it lies. EACH_PEER
 * (one or two ranks: at most one peer) polls each peer's slot alone: a batch of one cost 3-5%
 * at most sizes from 64 B to 2 MiB (one H100, bench/results/h100/run16). It is a kernel of its
 * own: chosen at run time inside one kernel, it slowed the batched gather of 8 ranks by 4-10%
 * (bench/results/h100/run20). */
template <typename T, int OP, bool VEC, bool EACH_PEER>
__global__ void __launch_bounds__(1024) AllReduce_Lamport(const symcoll__cuda_args_t a) {
  const symcoll_cuda::GridDependency dependency;
  constexpr int E = Pack<T, VEC>::E;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t nvec = a.count / E, tail = a.count - nvec * E;
  /* This thread's first vector is on its way while the state is read: loaded raw, fixed after
   * (a fix right after the load waits for it, and the state's load with it: 0.94-0.98x at
   * 1 KiB-1 MiB, 2 ranks sharing an H100, bench/results/h100/run41). */
  Pack<T, VEC> x0 = {}; /* zero, not a phi: no copy that waits for the load */
  if (first < nvec) x0 = load_cg<T, VEC>(a.send, first);
  uint32_t buf, prev_bytes;
  if (!lamport_take(a, (uint32_t)(a.count * sizeof(T)), &buf, &prev_bytes)) GIVE_UP(a);
  if (first < nvec) x0 = fixed<T, VEC>(x0);
  const LamportPart<T, OP, VEC> part{a, buf, 0};
  const LamportPart<T, OP, false> tail_part{a, buf, 0};
  const bool tail_here = blockIdx.x == 0 && threadIdx.x < tail;
  for (size_t v = first; v < nvec; v += stride) part.push(v, v == first ? x0 : load_fixed<T, VEC>(a.send, v));
  if (tail_here) tail_part.push(nvec * E + threadIdx.x, load_fixed<T, false>(a.send, nvec * E + threadIdx.x));
  lamport_clear(a, buf, prev_bytes);
  bool ok = true;
  for (size_t v = first; v < nvec; v += stride) {
    const Pack<T, VEC> y = EACH_PEER ? part.gather_each(a.send, v, ok) : part.gather(a.send, v, ok);
    if (!ok) GIVE_UP(a);
    store<T, VEC>(a.recv, v, y);
  }
  if (tail_here) {
    const size_t i = nvec * E + threadIdx.x;
    const Pack<T, false> y = EACH_PEER ? tail_part.gather_each(a.send, i, ok) : tail_part.gather(a.send, i, ok);
    if (!ok) GIVE_UP(a);
    store<T, false>(a.recv, i, y);
  }
}

/* A pack type's access (ONE, VECTOR, UNIT). */
template <typename P>
struct access_of;
template <typename T, int A>
struct access_of<Pack<T, A>> {
  static constexpr int value = A;
};

/* Two-shot's owner of a result writes it where `to(r)` says for every rank r, peers in rotated
 * order from the next one (every rank starts its stores at another peer) and this rank last. */
template <typename T, int A, typename To>
__device__ __forceinline__ void put_all(To to, int rank, int nranks, size_t v, const Pack<T, A> &o) {
  for (int j = 1; j <= nranks; j++) {
    const int r = rank + j < nranks ? rank + j : rank + j - nranks;
    store<T, A>(to(r), v, o);
  }
}

/*
 * AllReduce_TwoShot: a reduce-scatter, then an all-gather. Vector first + k * stride of a round
 * belongs to rank k % nranks (the grid is sized so that k rarely exceeds nranks - 1: each rank
 * reduces about one stride of every round), and so does each element past the last whole
 * vector (units nvec + j: tail_at). Its owner alone reads every rank's copy of it, then
 * writes the result; no other rank touches the owner's copy in the round. So:
 *  - where it reads: peers' inputs where they lie (zero_copy: symmetric inputs, in place too,
 *    since the owner reads an element everywhere before it writes it anywhere), or every
 *    rank's workspace, where each stages its input first;
 *  - where the results go: pushed straight into peers' symmetric outputs (a.dst); or, with
 *    outputs of their own, pushed into peers' workspaces over the copy the owner has just read
 *    (a.push_gather: small rounds, where a barrier costs more than the bytes),
 *    from where each rank copies the others' results into its output after the second
 *    barrier; or left in the owner's workspace for the others to pull (large rounds: pushing
 *    then copying moves more bytes), which takes a third barrier before the workspace is
 *    staged over again;
 *  - the barriers: inputs ready; results landed (peers are done with our input, and where
 *    they pushed, with our workspace); and after pulls, pulls done (peers are done with our
 *    workspace). Nothing of ours is read or written by a peer after the last, so the next
 *    round (or call) may stage over the workspace at once. Inputs that stay where they lie and
 *    outputs written straight in take the whole count as one round.
 */
template <typename T, int OP, bool VEC>
__global__ void __launch_bounds__(1024) AllReduce_TwoShot(const symcoll__cuda_args_t a) {
  const symcoll_cuda::GridDependency dependency;
  constexpr int U = unit_access<VEC>(), E = Pack<T, U>::E;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t ours = first + (size_t)a.rank * stride, ours_stride = (size_t)a.nranks * stride;
  const bool zc_in = a.zero_copy & SYMCOLL_CUDA_ZC_IN, zc_out = a.zero_copy & SYMCOLL_CUDA_ZC_OUT;
  const bool push = zc_out || a.push_gather;
  const size_t round = zc_in && zc_out ? a.count : a.chunk_elems;
  char *mine = a.ws[a.rank];
  for (size_t base = 0; base < a.count; base += round) {
    const size_t n = a.count - base < round ? a.count - base : round;
    const size_t nvec = n / E, tail = n - nvec * E;
    const size_t at = base * sizeof(T);
    char *out = a.recv + at;
    auto src = [&](int r) -> const char * { return zc_in ? a.src[r] + at : a.ws[r]; };
    auto to = [&](int r) -> char * { return r == a.rank ? out : zc_out ? a.dst[r] + at : a.ws[r]; };
    /* The owner's result: everywhere, or into its output and its workspace (for pulls). */
    auto put = [&](size_t v, const auto &o) {
      constexpr int A = access_of<std::decay_t<decltype(o)>>::value;
      if (push) {
        put_all<T, A>(to, a.rank, a.nranks, v, o);
      } else {
        store<T, A>(mine, v, o);
        store<T, A>(out, v, o);
      }
    };
    /* This thread's tail element (tail_at), or -1; tail_ours below: this rank owns it. */
    const int j =
        !zc_in ? stage<T, U>(mine, a.send + at, nvec, tail, first, stride) : owns_tail(first, stride, nvec, tail);
    BARRIER(a);
    size_t v = ours;
    for (; v < nvec; v += ours_stride) put(v, reduce_at<T, OP, U>(src, a.nranks, v));
    const bool tail_ours = tail_at(v, nvec, tail) >= 0; /* then it is element j */
    if (tail_ours) put(nvec * E + j, reduce_at<T, OP, ONE>(src, a.nranks, nvec * E + j));
    BARRIER(a);
    if (zc_out) continue;
    /* The others' results: from our workspace (pushed there) or from their owners'. */
    int from = 0; /* the owner of vector v */
    for (v = first; v < nvec; v += stride, from = from + 1 == a.nranks ? 0 : from + 1)
      if (from != a.rank) store<T, U>(out, v, load_cg<T, U>(push ? mine : a.ws[from], v));
    if (j >= 0 && !tail_ours) /* v == nvec + j: `from` owns it */
      store<T, ONE>(out, nvec * E + j, load_cg<T, ONE>(push ? mine : a.ws[from], nvec * E + j));
    if (!push) BARRIER(a); /* peers are done pulling from our workspace */
  }
}

template <typename T, int OP, bool VEC>
const void *pick(const symcoll__cuda_launch_t *l) {
  switch (l->algo) {
    case SYMCOLL_ALGO_TWO_SHOT:
      return (const void *)AllReduce_TwoShot<T, OP, VEC>;
    case SYMCOLL_ALGO_ONE_SHOT_DB:
      return (const void *)AllReduce_OneShotDB<T, OP, VEC>;
    case SYMCOLL_ALGO_LAMPORT:
      /* The sentinel is a 4-byte pattern of fp32 / fp16 / bf16: other dtypes never get here
       * (the host runs them one-shot double-buffered). */
      if constexpr (std::is_same<T, float>::value || std::is_same<T, __half>::value ||
                    std::is_same<T, __nv_bfloat16>::value)
        return l->each_peer ? (const void *)AllReduce_Lamport<T, OP, VEC, true>
                            : (const void *)AllReduce_Lamport<T, OP, VEC, false>;
      return nullptr;
    case SYMCOLL_ALGO_ONE_SHOT:
      return (const void *)AllReduce_OneShot<T, OP, VEC>;
    default:
      return nullptr;
  }
}

template <typename T, int OP>
const void *pick_vec(const symcoll__cuda_launch_t *l) {
  return l->vec ? pick<T, OP, true>(l) : pick<T, OP, false>(l);
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
