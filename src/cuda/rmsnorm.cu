/*
 * all_reduce_rmsnorm on GPU ranks (symcoll.h): the residual add, the RMSNorm and the fp8
 * quantisation of each row, by one block per row (rows in a grid-stride loop), in fp32, with the
 * arithmetic of the CPU path (src/host/host_rmsnorm.c) but the sum of squares of a row taken
 * over n.lanes lanes (per-lane partial sums, then a fixed butterfly: lanes_reduce): the same bits
 * on every rank, in every kernel below and in every batch of rows, since the lanes are a
 * function of hidden alone (cuda_coll.c) and a block of half as many threads takes two lanes a
 * thread in the same order, but not the CPU path's order of that one sum.
 *
 * RmsNorm_Local: the local pass (algorithm SEQUENTIAL, and one rank): x already holds the sum
 *   over ranks. Core runs the all-reduce before it (src/core/norm.c). Launches of no more blocks
 *   than SMs load the weight beside x and the residual (EARLY).
 * RmsNorm_OneShot: the fused call (ONE_SHOT), on the protocol of AllReduce_OneShot
 *   (allreduce.cu): each block stages the rows it owns into this rank's workspace (or peers
 *   read x where it lies: zero-copy), meets its twin blocks at a barrier with the call's
 *   signature, reduces each of its rows from every rank's copy in rank order in fp32 and
 *   rounds it to the dtype (the bits of symcoll_all_reduce), runs the epilogue, and meets its
 *   twins again before the workspace is staged over. Rows that do not fit the workspace go in
 *   rounds of whole rows inside the one kernel; a row larger than the workspace is refused by
 *   the host (UNSUPPORTED). reduce_scatter_rmsnorm (PULL) runs it too, with x in nranks
 *   blocks of n.rows rows: a block stages its rows of every block, and reduces those of this
 *   rank's block (symcoll_reduce_scatter's bits for them).
 * RmsNorm_TwoShot: the fused call (TWO_SHOT): each round's rows split on row boundaries among
 *   the ranks; every rank stages its rows (unless zero-copy), meets its twins, reduces and
 *   normalises its share into records in its workspace, meets them again and copies every
 *   rank's records (residual_out, out, fp8 and scales: what the call asks for) into its outputs.
 *   Its rows get the bits of the one-shot: the same sum, the same epilogue (norm_row) with the
 *   same block size. A round is what the workspace holds of staged rows and records; a row and
 *   its record larger than that is refused by the host (UNSUPPORTED).
 * Per row: pass 1 computes r (and writes residual_out) and the sum of squares; pass 2 computes
 * out (and, with a static scale, the fp8 output; with dynamic scales the row's amax); pass 3
 * (dynamic scales only) writes the scale and the fp8 output. Every element is read and
 * written by one thread, so out == x and residual_out == residual are safe: a later pass takes
 * r (and out) from the thread's registers, or, for packs past those, reads r back from
 * residual_out where there is one and out back from out; otherwise it recomputes them from x
 * (and residual), which only that same thread may have overwritten, after it read them.
 * A row is handled in packs of 16 bytes (norm_row): one 16-byte access a pack where every row
 * address is aligned and hidden % E == 0 (VECTOR kernels), element accesses otherwise (UNIT),
 * with the same thread for each element either way; a thread keeps its packs' values in
 * registers between the passes (up to kRowPacks packs), so the second and third passes read
 * no memory for rows of up to kRowPacks x threads packs.
 * RmsNorm_Lamport: the fused call (LAMPORT), on the barrier-free protocol of AllReduce_Lamport
 *   (lamport.cuh): the block of each row pushes the row into its slot on every peer (a header
 *   with the call's signature first, then the rows as they lie in x), clears the previous
 *   call's buffer, and normalises each of its rows as the peers' copies arrive in its own
 *   buffer (their headers checked once its first row has come, before it writes anything;
 *   run 30 priced the wait for them before the data at 6-15% of the kernel at 1-32 rows),
 *   reducing them in rank order in fp32 as the other kernels
 *   (an input element equal to the sentinel pattern is changed first, as all_reduce's LAMPORT
 *   does: a -0.0 half becomes +0.0). One launch holds the rows a slot holds (the host launches
 *   one per slot's worth of whole rows).
 */
#include "fp8.cuh"
#include "lamport.cuh"

namespace symcoll_cuda {
namespace {

constexpr float kFp8Max = 448.0f;

/* The block reductions' shared memory: two buffers of 32 floats that successive reductions
 * take in turn (`turn`: each thread's count of reductions, the same on every thread), so that
 * a reduction's writes never meet the previous one's reads: between two reductions on one
 * buffer lies the other's barrier, which every warp reaches after its reads. */
struct BlockRed {
  float *buf; /* 64 floats */
  unsigned turn;
  /* The thread's lane (its first; a row's thread count): the block holds the row's lanes. */
  __device__ unsigned thread() const { return threadIdx.x; }
  __device__ unsigned threads() const { return blockDim.x; }
};

/* Thread-block clusters (compute capability 9.0 and later, where the host launches the kernels
 * that use them: CL below; compiled for an older target, a cluster is its one block and the
 * exchange below is never run). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define SYMCOLL_CUDA_CLUSTERS 1
#endif
__device__ __forceinline__ unsigned cluster_special(int which) {
  unsigned v = 0;
#ifdef SYMCOLL_CUDA_CLUSTERS
  switch (which) {
    case 0:
      asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(v));
      break;
    case 1:
      asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(v));
      break;
    case 2:
      asm("mov.u32 %0, %%clusterid.x;" : "=r"(v));
      break;
    default:
      asm("mov.u32 %0, %%nclusterid.x;" : "=r"(v));
      break;
  }
#else
  v = which == 0 ? 0u : which == 1 ? 1u : which == 2 ? blockIdx.x : gridDim.x;
#endif
  return v;
}
#ifdef SYMCOLL_CUDA_CLUSTERS
__device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}
#endif

/* A row's lanes held by the blocks of a thread-block cluster (RmsNorm_Lamport's CL): block c of
 * the cluster holds lanes c x blockDim.x onwards. A reduction (exchange) sends each lane warp's
 * result, and with it this block's flag where asked, into every block's buffer with st.async,
 * whose bytes each block's transaction barrier (mbarrier) of that buffer counts: a block waits
 * on its own barrier for all of them, then reads them from its own memory. No fence and no
 * cluster-wide barrier: a release there (MEMBAR.GPU) cost 0.4 us an exchange on an H100
 * (bench/results/h100/run65). The two buffers and their barriers take turns (each thread's count
 * of exchanges, the same on every thread of the cluster; the barrier's phase flips every other
 * exchange): a block sends exchange k + 2 into a buffer only once exchange k + 1 is complete,
 * which every block joins after its reads of exchange k. A block leaves once its last exchange
 * is complete (nothing more comes into its memory). Before the first exchange every block
 * waits at the cluster's barrier, where every thread arrived when its kernel started, after
 * thread 0 initialised its block's transaction barriers: no block's memory is written before
 * its block has started and made them. */
struct ClusterRed : BlockRed {
  unsigned rank, size;
  bool started;                  /* the start barrier waited for */
  uint64_t *mbar;                /* two transaction barriers */
  const symcoll__cuda_args_t *a; /* the bound on waits, the error word */
  __device__ unsigned thread() const { return rank * blockDim.x + threadIdx.x; }
  __device__ unsigned threads() const { return size * blockDim.x; }
  /* At the kernel's start, by every thread. */
  __device__ void begin() {
#ifdef SYMCOLL_CUDA_CLUSTERS
    if (threadIdx.x == 0) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(mbar)) : "memory");
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(mbar + 1)) : "memory");
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
#endif
  }
  /* One exchange: value `v` of this thread's lane warp (the same on its every lane), and `flag`
   * (block-uniform) where `with_flag`; lane warps' values land at buffer[warp] of every block,
   * flags at buffer[16 + rank] (at most 16 lane warps, 8 blocks). Returns the buffer, complete. */
  __device__ float *exchange(float v, bool with_flag, bool flag) {
    const unsigned k = turn++ & 1u;
    float *const b = buf + 32 * k;
#ifdef SYMCOLL_CUDA_CLUSTERS
    const unsigned parity = (turn - 1u) >> 1 & 1u; /* the barrier's phases so far, mod 2 */
    if (!started) {
      asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
      started = true;
    }
    const uint32_t m = smem_addr(mbar + k);
    const unsigned warps = (blockDim.x >> 5) * size, lane = threadIdx.x & 31u;
    if (threadIdx.x == 0) {
      const unsigned bytes = 4u * (warps + (with_flag ? size : 0u));
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(m), "r"(bytes) : "memory");
    }
    auto send = [&](float *at, unsigned to, float x) {
      uint32_t ra, rm;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(ra) : "r"(smem_addr(at)), "r"(to));
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rm) : "r"(m), "r"(to));
      asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(ra),
                   "r"(__float_as_uint(x)), "r"(rm)
                   : "memory");
    };
    if (lane < size) send(b + rank * (blockDim.x >> 5) + (threadIdx.x >> 5), lane, v);
    if (with_flag && threadIdx.x < size) send(b + 16 + rank, threadIdx.x, flag ? 1.0f : 0.0f);
    symcoll_impl::spin(
        [&] {
          uint32_t done;
          asm volatile(
              "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
              "selp.u32 %0, 1, 0, p;\n\t}"
              : "=r"(done)
              : "r"(m), "r"(parity)
              : "memory");
          return done != 0;
        },
        a->timeout_ns, a->error, a->rank, a->rank);
#else /* a cluster of one block (the host launches none larger here) */
    if ((threadIdx.x & 31u) == 0) b[threadIdx.x >> 5] = v;
    if (with_flag && threadIdx.x == 0) b[16] = flag ? 1.0f : 0.0f;
    __syncthreads();
#endif
    return b;
  }
};

struct Add {
  __device__ float operator()(float x, float y) const { return __fadd_rn(x, y); }
};
struct Max {}; /* fmaxf, over values that are never negative nor NaN (amaxes: fmaxf from 0 skips NaNs) */

/* The op over a warp's 32 values, on every lane: a butterfly of shuffles, whose order fixes a
 * sum's bits; Max (compute capability 8.0 and later) one integer max of the values' bits
 * (REDUX), which orders floats that are neither negative nor NaN as their values do: the same
 * result in one instruction for five shuffles and maxes. */
template <typename Op>
__device__ __forceinline__ float warp_all(float v, Op op) {
  if constexpr (std::is_same<Op, Max>::value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(v)));
#else
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
#endif
  } else {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
  }
}

/* The op over a row's lanes, one value a lane: lane l is thread l's `v0` (l < blockDim.x) or,
 * with `two` (lanes = 2 x blockDim.x), thread l - blockDim.x's `v1`. A butterfly in each warp of
 * lanes, then every warp runs the same butterfly over the lane warps' results in order (0 past
 * the last: the identity of both uses, sums of squares and amax), so every thread gets the
 * result after one barrier. Every lane of a butterfly ends with the same bits (op is
 * commutative), whichever thread holds the lanes: a block of half the threads with `two` gives
 * the bits of a block of a thread a lane. At most 16 lane warps. */
template <typename Op>
__device__ __forceinline__ float lanes_reduce(float v0, float v1, bool two, BlockRed &r, Op op) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  float *const red = r.buf + 32 * (r.turn++ & 1u);
  v0 = warp_all(v0, op);
  if (two) v1 = warp_all(v1, op);
  if (lane == 0) {
    red[warp] = v0;
    if (two) red[warp + warps] = v1;
  }
  __syncthreads();
  return warp_all(lane < (two ? 2 * warps : warps) ? red[lane] : 0.0f, op);
}

/* lanes_reduce over a cluster's blocks (ClusterRed): the lane warps' results of every block in
 * lane order, then one block's butterfly over them: the same bits. No `two`. With `all_ok`,
 * *all_ok: whether `ok` (block-uniform) holds on every block of the cluster. */
template <typename Op>
__device__ __forceinline__ float lanes_reduce(float v0, float, bool, ClusterRed &r, Op op, bool ok = true,
                                              bool *all_ok = nullptr) {
  const unsigned lane = threadIdx.x & 31u, warps = (blockDim.x >> 5) * r.size;
  const float *const red = r.exchange(warp_all(v0, op), all_ok != nullptr, ok);
  const float v = warp_all(lane < warps ? red[lane] : 0.0f, op);
  if (all_ok) {
    bool all = true;
    for (unsigned c = 0; c < r.size; c++) all = all && red[16 + c] != 0.0f;
    *all_ok = all;
  }
  return v;
}

/* A pack's fp8 bytes: whole, one store of E bytes, converted two at a time, where aligned
 * (ALIGNED: the VECTOR kernels, whose fp8_out the host found aligned to E bytes, as every row
 * of it then is; else checked here); else a byte store an element. */
template <int E, bool ALIGNED>
__device__ __forceinline__ void store_fp8(unsigned char *dst, const float (&f)[E], int valid, float rcp) {
  static_assert(E == 4 || E == 8, "a pack is 16 bytes of fp32, fp16 or bf16");
  using W = typename std::conditional<E == 8, unsigned long long, unsigned>::type;
  if (valid == E && (ALIGNED || (reinterpret_cast<uintptr_t>(dst) & (E - 1)) == 0)) {
    W w = 0;
#pragma unroll
    for (int e = 0; e < E; e += 2) w |= (W)to_e4m3x2(f[e], f[e + 1], rcp) << (8 * e);
    *reinterpret_cast<W *>(dst) = w;
    return;
  }
#pragma unroll
  for (int e = 0; e < E; e++)
    if (e < valid) dst[e] = to_e4m3(f[e], rcp);
}

/* Where one row's results go: the caller's rows (local pass, one-shot) or a record in the
 * owner's workspace (two-shot); NULL where the call does not ask for that output. */
template <typename T>
struct RowDst {
  T *res_out, *out;
  unsigned char *fp8;
  float *scale; /* the row's dynamic fp8 scale, or NULL (static scale, or no fp8) */
};

/* The caller's buffers at row `row`. */
template <typename T>
__device__ __forceinline__ RowDst<T> caller_row(const symcoll__cuda_norm_t &n, size_t row) {
  const size_t off = row * n.hidden;
  return RowDst<T>{n.residual_out ? reinterpret_cast<T *>(n.residual_out) + off : nullptr,
                   n.out ? reinterpret_cast<T *>(n.out) + off : nullptr, n.fp8_out ? n.fp8_out + off : nullptr,
                   n.fp8_out && n.fp8_row_scales ? n.fp8_row_scales + row : nullptr};
}

/* fp8_scale_out: the static scale's copy, written by block 0 as the last thing it does, once
 * its rows are done and its barriers met (a block that gives up returns before; a call that
 * fails in another block or on a peer may have written it, as its other outputs). */
__device__ __forceinline__ void copy_scale(const symcoll__cuda_norm_t &n) {
  if (n.fp8_scale_out && blockIdx.x == 0 && threadIdx.x == 0) *n.fp8_scale_out = __ldg(n.fp8_scale);
}

/* The residual's row `row`, or NULL. */
template <typename T>
__device__ __forceinline__ const T *residual_row(const symcoll__cuda_norm_t &n, size_t row) {
  return n.residual ? reinterpret_cast<const T *>(n.residual) + row * n.hidden : nullptr;
}

/* A row in packs: pack p holds elements p*E .. p*E + E - 1 (16 bytes of T; the last pack is
 * short when hidden % E != 0). Lane l of the row's L = n.lanes lanes (a function of hidden and
 * the dtype: cuda_coll.c) holds packs l, l + L, l + 2L, ...; thread t of a row's block owns
 * packs t, t + T, t + 2T, ... (T = blockDim.x, L or L / 2: its packs belong to lane t, then, with
 * T = L / 2, alternately to lanes t and t + T), in both access modes: VECTOR (every row address
 * 16-byte aligned, hidden % E == 0: one 16-byte access a pack) and UNIT (element accesses), so
 * that ranks whose buffers differ in alignment, and blocks of either size, sum a row's squares
 * in one order: a lane's packs ascending, elements ascending in a pack, then lanes_reduce. A
 * thread keeps the values of its first kRowPacks packs in registers between the passes, so a
 * row of up to kRowPacks x T packs crosses memory once; further packs are read back from
 * residual_out / out, or recomputed from the sources. */
constexpr int kRowPacks = SYMCOLL_CUDA_NORM_ROW_PACKS;
constexpr int kNormThreads = SYMCOLL_CUDA_NORM_MAX_THREADS; /* 128 registers a thread */

/* The elements of a whole pack, widened. */
template <typename T, int U>
__device__ __forceinline__ void unpack(const Pack<T, U> &x, float (&f)[Pack<T, U>::E]) {
#pragma unroll
  for (int e = 0; e < Pack<T, U>::E; e++) f[e] = Conv<T>::load(x.e[e]);
}

/* Pack p of a row (element accesses: UNIT; `valid` elements of a short last pack: ONE each). */
template <typename T, int U>
__device__ __forceinline__ void row_load(const T *row, size_t p, int valid, float (&f)[Pack<T, U>::E]) {
  using C = Conv<T>;
  constexpr int E = Pack<T, U>::E;
  if (valid == E) {
    const Pack<T, U> x = load_cg<T, U>(reinterpret_cast<const char *>(row), p);
#pragma unroll
    for (int e = 0; e < E; e++) f[e] = C::load(x.e[e]);
  } else {
#pragma unroll
    for (int e = 0; e < E; e++)
      if (e < valid) f[e] = C::load(row[p * E + e]);
  }
}
template <typename T, int U>
__device__ __forceinline__ void row_store(T *row, size_t p, int valid, const T (&v)[Pack<T, U>::E]) {
  constexpr int E = Pack<T, U>::E;
  if (valid == E) {
    Pack<T, U> x;
#pragma unroll
    for (int e = 0; e < E; e++) x.e[e] = v[e];
    store<T, U>(reinterpret_cast<char *>(row), p, x);
  } else {
#pragma unroll
    for (int e = 0; e < E; e++)
      if (e < valid) row[p * E + e] = v[e];
  }
}

/* One row's epilogue, the one code of every kernel here (so they give the same bits).
 * Pass 1 computes r, writes residual_out and sums the squares; pass 2 computes out (and the
 * fp8 output, or the row's amax); pass 3 (dynamic scales only) writes the scale and the fp8
 * output.
 * PRE: for the packs a thread keeps in registers (up to kRowPacks), the residual's and the
 * weight's packs, then the sum's, are all loaded before any is used or residual_out written,
 * so that they are in flight at once and their latency hides behind the sum's (the fused
 * kernels, which wait for peers, and the local pass of a block an SM). It costs registers,
 * which the local pass of more rows keeps for a second block an SM (bf16 at 512 threads: 64
 * registers a thread, with PRE 81 and one block an SM; an earlier PRE of 79 registers was 25%
 * slower at 2048 x 8192 on the H200).
 * sum_pack(p): pack p of the row's sum over ranks, rounded to T (whole packs); sum_at(i):
 * element i of it (a short last pack); res: the residual row or NULL; d: where the results go;
 * red: the row's reductions, over the block's lanes (BlockRed) or its cluster's (ClusterRed),
 * whose thread() and threads() place the thread among the row's lanes.
 * sum_pre(s, has) (PRE; EachPack: sum_pack of each): the sums of the thread's kept packs at
 * once, s[k] for bit k of `has` (a whole pack), so that their waits overlap.
 * go(): called by every thread once the loads are issued (and, PRE, the sum's packs in),
 * before anything is written; false (the same on every thread: it meets the block at a barrier
 * where it checks anything) and the row writes nothing and this returns false.
 * FIT (1 or 2; the host's launch.fit): VECTOR rows of at most FIT packs a thread, which it
 * keeps, and Q's fp8 output alone (launch.fit_fp8: none, the static scale or a scale per row):
 * the code of that case alone (no later packs, no branch on the fp8 form), the same
 * arithmetic, so the same bits. A kernel's code is fetched anew on each SM its blocks land
 * on: with a quarter of the code, the fused LAMPORT kernel was 0.89-0.93x and the local pass
 * 0.81-0.82x at 1-32 x 4096 bf16 (one H100, bench/results/h100/run38). */
struct Go {
  __device__ bool operator()() const { return true; }
};
struct EachPack {}; /* PRE's sums pack by pack, sum_pack(p) */
template <typename T, int U, bool PRE, bool TWO = false, int FIT = 0, int Q = SYMCOLL_CUDA_FP8_NONE, typename SumPack,
          typename SumAt, typename Red, typename GoOn = Go, typename SumPre = EachPack>
__device__ __forceinline__ bool norm_row(const symcoll__cuda_norm_t &n, const T *res, const RowDst<T> d,
                                         SumPack sum_pack, SumAt sum_at, Red &red, GoOn go = {}, SumPre sum_pre = {}) {
  static_assert(FIT == 0 || (U == VECTOR && !TWO && FIT <= kRowPacks), "FIT: whole packs kept, a thread a lane");
  static_assert(FIT || Q == SYMCOLL_CUDA_FP8_NONE, "Q: the fp8 output of a FIT instance");
  /* JOINT (a cluster's row): go()'s answer, this block's, joins the sum of squares' exchange, and
   * residual_out is written in pass 2, once every block's answer is in: one exchange a row. */
  constexpr bool JOINT = std::is_same<Red, ClusterRed>::value;
  static_assert(!JOINT || (PRE && FIT), "JOINT: every pack kept and loaded before go()");
  using C = Conv<T>;
  constexpr int E = Pack<T, U>::E;
  constexpr int K = FIT ? FIT : kRowPacks; /* the packs a thread keeps */
  const size_t h = n.hidden, npacks = (h + E - 1) / E, nt = red.threads(), t0 = red.thread();
  const T *w = reinterpret_cast<const T *>(n.weight);
  T *const res_out = d.res_out, *const out = d.out;
  unsigned char *const fp8 = FIT && Q == SYMCOLL_CUDA_FP8_NONE ? nullptr : d.fp8;
  /* the fp8 output, and with a scale per row (a constant where FIT) */
  const bool quant = FIT ? Q != SYMCOLL_CUDA_FP8_NONE : fp8 != nullptr;
  const bool dynamic = FIT ? Q == SYMCOLL_CUDA_FP8_ROWS : fp8 && d.scale;
  /* Elements of pack p: E but in a short last pack (UNIT only: VECTOR rows are whole packs). */
  auto valid_of = [&](size_t p) -> int {
    if constexpr (U == VECTOR) return E;
    return p * E + E <= h ? E : (int)(h - p * E);
  };
  /* r = s + residual rounded to T (no residual: s) of pack p, into f; written to residual_out
   * when `write`. s and the residual's pack come from s_in / res_in where `have` (whole packs,
   * loaded in advance; passed by value, so that they stay in registers). */
  auto r_pack = [&](size_t p, int valid, bool write, float(&f)[E], bool have = false, Pack<T, U> s_in = {},
                    Pack<T, U> res_in = {}) {
    T r[E];
    if (valid == E) {
      const Pack<T, U> s = have ? s_in : sum_pack(p);
#pragma unroll
      for (int e = 0; e < E; e++) r[e] = s.e[e];
    } else {
#pragma unroll
      for (int e = 0; e < E; e++)
        if (e < valid) r[e] = sum_at(p * E + e);
    }
    if (res) {
      float q[E];
      if (have)
        unpack<T, U>(res_in, q);
      else
        row_load<T, U>(res, p, valid, q);
#pragma unroll
      for (int e = 0; e < E; e++)
        if (e < valid) r[e] = C::store(C::load(r[e]) + q[e]);
    }
    if (write && res_out) row_store<T, U>(res_out, p, valid, r);
#pragma unroll
    for (int e = 0; e < E; e++)
      if (e < valid) f[e] = C::load(r[e]);
  };
  /* r of pack p for a later pass: residual_out as written, or recomputed. */
  auto r_again = [&](size_t p, int valid, float(&f)[E]) {
    if (res_out)
      row_load<T, U>(res_out, p, valid, f);
    else
      r_pack(p, valid, false, f);
  };
  /* PRE: the thread's whole packs among its first kRowPacks, the residual's and the weight's,
   * then the sum's, loaded before anything is written (residual_out may be residual). Without
   * PRE each pack is loaded where it is used: fewer registers, more blocks an SM. */
  Pack<T, U> res_pre[K] = {}, w_pre[K], s_pre[K]; /* res_pre passed on without a residual */
  /* The static scale: PRE, first of the row's loads (its latency hides behind theirs); else
   * after pass 1, while the block reduces. */
  float fixed = 1.0f;
  if (PRE && quant && !dynamic) fixed = __ldg(n.fp8_scale);
  if constexpr (PRE) {
    size_t p = t0;
#pragma unroll
    for (int k = 0; k < K; k++, p += nt)
      if (p < npacks && valid_of(p) == E) {
        if (res) res_pre[k] = load_cg<T, U>(reinterpret_cast<const char *>(res), p);
        w_pre[k] = load_cg<T, U>(reinterpret_cast<const char *>(w), p);
      }
    if constexpr (std::is_same_v<SumPre, EachPack>) {
      p = t0;
#pragma unroll
      for (int k = 0; k < K; k++, p += nt)
        if (p < npacks && valid_of(p) == E) s_pre[k] = sum_pack(p);
    } else {
      unsigned has = 0;
      p = t0;
#pragma unroll
      for (int k = 0; k < K; k++, p += nt)
        if (p < npacks && valid_of(p) == E) has |= 1u << k;
      sum_pre(s_pre, has);
    }
  }
  bool ok_here = true;
  if constexpr (JOINT)
    ok_here = go();
  else if (!go())
    return false;
  float keep[K][E];
  /* The squares of the thread's lanes: t, and with TWO (n.lanes = 2T) t + T, whose packs
   * alternate (the thread's j-th pack is lane t's where j is even). */
  float ss0 = 0.0f, ss1 = 0.0f;
  auto add_squares = [&](const float(&f)[E], int valid, int j) {
    float ss = TWO && (j & 1) ? ss1 : ss0;
#pragma unroll
    for (int e = 0; e < E; e++)
      if (e < valid) ss = __fadd_rn(ss, __fmul_rn(f[e], f[e])); /* not fused: as the CPU's */
    if (TWO && (j & 1))
      ss1 = ss;
    else
      ss0 = ss;
  };
  {
    size_t p = t0;
    int j = 0;
#pragma unroll
    for (int k = 0; k < K; k++, p += nt, j++)
      if (p < npacks) {
        const int valid = valid_of(p);
        if (PRE && valid == E)
          r_pack(p, valid, !JOINT, keep[k], true, s_pre[k], res_pre[k]);
        else
          r_pack(p, valid, true, keep[k]);
        add_squares(keep[k], valid, k);
      }
    if constexpr (!FIT)
      for (; p < npacks; p += nt, j++) {
        const int valid = valid_of(p);
        float f[E];
        r_pack(p, valid, true, f);
        add_squares(f, valid, j);
      }
  }
  if (!PRE && quant && !dynamic) fixed = __ldg(n.fp8_scale);
  const float fixed_rcp = __frcp_rn(fixed);
  bool all_ok = true;
  float sumsq;
  if constexpr (JOINT)
    sumsq = lanes_reduce(ss0, ss1, TWO, red, Add{}, ok_here, &all_ok);
  else
    sumsq = lanes_reduce(ss0, ss1, TWO, red, Add{});
  if (!all_ok) return false; /* JOINT: a block of the cluster said no; none has written */
  const float inv = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(sumsq, (float)h), n.eps)));
  float amax = 0.0f;
  /* out of pack p from its r in f (f then holds out, as floats), the weight's pack loaded, or
   * given in w_in where `have`. */
  auto out_pack = [&](size_t p, int valid, float(&f)[E], bool have = false, Pack<T, U> w_in = {}) {
    float wf[E];
    if (have)
      unpack<T, U>(w_in, wf);
    else
      row_load<T, U>(w, p, valid, wf);
    T o[E];
#pragma unroll
    for (int e = 0; e < E; e++)
      if (e < valid) {
        o[e] = C::store(__fmul_rn(__fmul_rn(f[e], inv), wf[e]));
        f[e] = C::load(o[e]);
      }
    if (out) row_store<T, U>(out, p, valid, o);
    if (dynamic) {
#pragma unroll
      for (int e = 0; e < E; e++)
        if (e < valid) amax = fmaxf(amax, fabsf(f[e]));
    } else if (quant) {
      store_fp8<E, U == VECTOR>(fp8 + p * E, f, valid, fixed_rcp);
    }
  };
  {
    size_t p = t0;
#pragma unroll
    for (int k = 0; k < K; k++, p += nt)
      if (p < npacks) {
        const int valid = valid_of(p);
        if constexpr (JOINT) { /* residual_out: pass 1's r again, the same bits */
          float again[E];
          r_pack(p, valid, true, again, true, s_pre[k], res_pre[k]);
        }
        if (PRE && valid == E)
          out_pack(p, valid, keep[k], true, w_pre[k]);
        else
          out_pack(p, valid, keep[k]);
      }
    if constexpr (!FIT)
      for (; p < npacks; p += nt) {
        const int valid = valid_of(p);
        float f[E];
        r_again(p, valid, f);
        out_pack(p, valid, f);
      }
  }
  if (!dynamic) return true;
  amax = lanes_reduce(amax, 0.0f, false, red, Max{});
  const float scale = fmaxf(__fdiv_rn(amax, kFp8Max), 1.0f / (kFp8Max * 512.0f));
  const float rcp = __frcp_rn(scale);
  if (t0 == 0) *d.scale = scale;
  size_t p = t0;
#pragma unroll
  for (int k = 0; k < K; k++, p += nt)
    if (p < npacks) {
      store_fp8<E, U == VECTOR>(fp8 + p * E, keep[k], valid_of(p), rcp);
    }
  if constexpr (!FIT)
    for (; p < npacks; p += nt) {
      const int valid = valid_of(p);
      float f[E];
      if (out) {
        row_load<T, U>(out, p, valid, f);
      } else { /* out recomputed from r */
        r_again(p, valid, f);
        float wf[E];
        row_load<T, U>(w, p, valid, wf);
#pragma unroll
        for (int e = 0; e < E; e++)
          if (e < valid) f[e] = C::load(C::store(__fmul_rn(__fmul_rn(f[e], inv), wf[e])));
      }
      store_fp8<E, U == VECTOR>(fp8 + p * E, f, valid, rcp);
    }
  return true;
}

/* EARLY: norm_row's PRE, for launches of a block an SM at most (few rows), where its registers
 * cost no residency: the weight's packs load beside x's and the residual's, not after the sum.
 * TWO: a thread per two lanes (blockDim.x = n.lanes / 2: more rows than SMs).
 * The chain's all-reduce, before this on the stream, may have given up (its output is not a
 * sum): thread 0 reads the error word first, and the block writes nothing when it is set. One
 * rank's call is this pass alone (no word: n.error NULL), and it meets no barrier for it: one
 * H100, bf16, 0.95-0.99x at 1-2048 x 4096, 1.00-1.01x at 1-128 x 8192 and 0.97-1.00x beyond,
 * FP8 output 0.97-0.99x (bench/results/h100/run74). Storing the word for the block after the
 * row's loads instead, so that thread 0's warp would not wait for it before issuing them, was
 * 1.02-1.07x with the barrier (run 73). */
template <typename T, int U, bool EARLY, bool TWO, int FIT = 0, int Q = SYMCOLL_CUDA_FP8_NONE>
__global__ void __launch_bounds__(kNormThreads) RmsNorm_Local(const symcoll__cuda_norm_t n) {
  const symcoll_cuda::GridDependency dependency;
  __shared__ float red_buf[64];
  BlockRed red{red_buf, 0};
  __shared__ uint32_t gave_up; /* read by thread 0, seen by all after the first row's barrier */
  if (threadIdx.x == 0) gave_up = n.error ? *(volatile const uint32_t *)n.error : 0u;
  const T *x = reinterpret_cast<const T *>(n.x);
  for (size_t row = blockIdx.x; row < n.rows; row += gridDim.x) {
    const T *s = x + row * n.hidden;
    if (!norm_row<T, U, EARLY, TWO, FIT, Q>(
            n, residual_row<T>(n, row), caller_row<T>(n, row),
            [&](size_t p) { return load_cg<T, U>(reinterpret_cast<const char *>(s), p); },
            [&](size_t i) { return s[i]; }, red,
            [&] {
              if (row != blockIdx.x || !n.error) return true;
              __syncthreads();
              return gave_up == 0;
            }))
      return;
  }
  copy_scale(n);
}

/* Block b of every rank owns rows b, b + grid, ... of each round, stages them, and reads them
 * from every rank after the barrier that block b of every rank meets: the rule of every kernel
 * here (a block reads only what its twins staged). The reduce-scatter form (n.scatter): row
 * position j of a round stands for row j of each of the nranks blocks of x, staged at
 * q x round + j; the rank reads block `rank` of every rank's copy. */
template <typename T, int U, int FIT = 0, int Q = SYMCOLL_CUDA_FP8_NONE>
__global__ void __launch_bounds__(kNormThreads)
    RmsNorm_OneShot(const symcoll__cuda_args_t a, const symcoll__cuda_norm_t n) {
  const symcoll_cuda::GridDependency dependency;
  __shared__ float red_buf[64];
  BlockRed red{red_buf, 0};
  const size_t rb = n.hidden * sizeof(T);
  const size_t round = a.zero_copy ? n.rows : n.rows_per_round;
  const int blocks = n.scatter ? a.nranks : 1;        /* of x */
  const size_t mine = n.scatter ? (size_t)a.rank : 0; /* the block this rank reduces */
  for (size_t base = 0; base < n.rows; base += round) {
    const size_t cnt = n.rows - base < round ? n.rows - base : round;
    if (!a.zero_copy)
      for (int q = 0; q < blocks; q++)
        for (size_t j = blockIdx.x; j < cnt; j += gridDim.x)
          symcoll_impl::block_copy(a.ws[a.rank] + ((size_t)q * round + j) * rb,
                                   n.x + ((size_t)q * n.rows + base + j) * rb, rb);
    BARRIER(a);
    for (size_t j = blockIdx.x; j < cnt; j += gridDim.x) {
      /* Rank r's copy of row base + j of block `mine`: its staging, or its input (zero-copy). */
      auto src = [&](int r) -> const char * {
        return a.zero_copy ? a.src[r] + (mine * n.rows + base + j) * rb : a.ws[r] + (mine * round + j) * rb;
      };
      norm_row<T, U, true, false, FIT, Q>(
          n, residual_row<T>(n, base + j), caller_row<T>(n, base + j),
          [&](size_t p) { return reduce_at<T, SYMCOLL_SUM, U>(src, a.nranks, p); },
          [&](size_t i) { return reduce_at<T, SYMCOLL_SUM, ONE>(src, a.nranks, i).e[0]; }, red);
    }
    /* Peers are done reading this block's rows of our workspace (or of our input). */
    BARRIER(a);
  }
  copy_scale(n);
}

/* Two-shot: a round of R = n.rows_per_round row positions (the last round may hold fewer rows)
 * is split on row boundaries as symcoll.h says: rank q owns positions lo_q .. lo_q + cnt_q - 1
 * (R / nranks each, the first R % nranks ranks one more; the same split in every round, so
 * ranks past the rows of a short last round own fewer, maybe none). Offset i of an owner's share
 * belongs to block i % grid on every rank, in every round: that block stages the row (position
 * lo_q + i of the staging), the owner's block reduces it from every rank's staging (or input,
 * zero-copy) and normalises it into record i of the owner's workspace (at n.rec_at, past R
 * staged rows), and every rank's block copies that record into its outputs. So every staged
 * row and every record is written, read and written again by blocks with one index, which
 * meet at every barrier (slot = block): a block reads only what its twins wrote. */
struct TwoShotSplit {
  size_t per, extra;
  __device__ TwoShotSplit(size_t rows, int nranks) : per(rows / (size_t)nranks), extra(rows % (size_t)nranks) {}
  __device__ size_t lo(int q) const { return (size_t)q * per + ((size_t)q < extra ? (size_t)q : extra); }
  /* Rank q's rows of a round of `rows` rows (rows <= R): its share, cut at rows. */
  __device__ size_t cnt(int q, size_t rows) const {
    const size_t l = lo(q), c = per + ((size_t)q < extra ? 1 : 0);
    return l >= rows ? 0 : rows - l < c ? rows - l : c;
  }
};

/* The record at rec (record i of an owner's workspace): where the owner puts one row's results,
 * what the call asks for. */
template <typename T>
__device__ __forceinline__ RowDst<T> record(const symcoll__cuda_norm_t &n, char *rec) {
  return RowDst<T>{n.residual_out ? reinterpret_cast<T *>(rec + n.rec_res_out) : nullptr,
                   n.out ? reinterpret_cast<T *>(rec + n.rec_out) : nullptr,
                   n.fp8_out ? reinterpret_cast<unsigned char *>(rec + n.rec_fp8) : nullptr,
                   n.fp8_out && n.fp8_row_scales ? reinterpret_cast<float *>(rec + n.rec_scale) : nullptr};
}

/* Block-wide copy of `bytes` from a peer's workspace (through L2, where peers' stores land, as
 * load_cg): 16-, 4- or 2-byte words as both ends allow, then bytes. */
__device__ __forceinline__ void copy_cg(char *dst, const char *src, size_t bytes) {
  const uintptr_t al = (uintptr_t)dst | (uintptr_t)src;
  size_t done = 0;
  if ((al & 15) == 0) {
    done = bytes / 16;
    for (size_t i = threadIdx.x; i < done; i += blockDim.x)
      reinterpret_cast<uint4 *>(dst)[i] = __ldcg(reinterpret_cast<const uint4 *>(src) + i);
    done *= 16;
  } else if ((al & 3) == 0) {
    done = bytes / 4;
    for (size_t i = threadIdx.x; i < done; i += blockDim.x)
      reinterpret_cast<unsigned *>(dst)[i] = __ldcg(reinterpret_cast<const unsigned *>(src) + i);
    done *= 4;
  } else if ((al & 1) == 0) {
    done = bytes / 2;
    for (size_t i = threadIdx.x; i < done; i += blockDim.x)
      reinterpret_cast<unsigned short *>(dst)[i] = __ldcg(reinterpret_cast<const unsigned short *>(src) + i);
    done *= 2;
  }
  for (size_t i = done + threadIdx.x; i < bytes; i += blockDim.x)
    reinterpret_cast<unsigned char *>(dst)[i] = __ldcg(reinterpret_cast<const unsigned char *>(src) + i);
}

/* Per round: stage; barrier; reduce and normalise this rank's share into its records; barrier;
 * copy every owner's records into the outputs. Staging of round k + 1 overwrites a row only
 * after the barrier at which its readers (the owner's twin block) finished round k's reduce;
 * records of round k + 1 are written after round k + 1's first barrier, which every reader of
 * round k's records (the twin blocks, in their copy loops) reaches after it. So a round needs two
 * barriers, and the call a last one, after which peers read nothing of ours: the next call
 * (any kernel) may stage over it. Every block of every rank meets 2 x rounds + 1 barriers. An
 * earlier kernel that gave up leaves the error word set: the kernel then writes nothing. */
template <typename T, int U>
__global__ void __launch_bounds__(kNormThreads)
    RmsNorm_TwoShot(const symcoll__cuda_args_t a, const symcoll__cuda_norm_t n) {
  const symcoll_cuda::GridDependency dependency;
  __shared__ float red_buf[64];
  BlockRed red{red_buf, 0};
  __shared__ uint32_t gave_up; /* one read for the block: every thread takes the same branch */
  if (threadIdx.x == 0) gave_up = *(volatile const uint32_t *)a.error;
  __syncthreads();
  if (gave_up) GIVE_UP(a);
  const size_t rb = n.hidden * sizeof(T), R = n.rows_per_round;
  const TwoShotSplit split(R, a.nranks);
  const size_t my_lo = split.lo(a.rank);
  char *const mine = a.ws[a.rank];
  for (size_t base = 0; base < n.rows; base += R) {
    const size_t rows = n.rows - base < R ? n.rows - base : R;
    if (!a.zero_copy)
      for (int q = 0; q < a.nranks; q++) {
        const size_t lo = split.lo(q), m = split.cnt(q, rows);
        for (size_t i = blockIdx.x; i < m; i += gridDim.x)
          symcoll_impl::block_copy(mine + (lo + i) * rb, n.x + (base + lo + i) * rb, rb);
      }
    BARRIER(a);
    const size_t my_n = split.cnt(a.rank, rows);
    for (size_t i = blockIdx.x; i < my_n; i += gridDim.x) {
      const size_t j = my_lo + i; /* position in the round */
      /* Rank r's copy of row base + j: its staging, or its input (zero-copy). */
      auto src = [&](int r) -> const char * { return (a.zero_copy ? a.src[r] + base * rb : a.ws[r]) + j * rb; };
      norm_row<T, U, true>(
          n, residual_row<T>(n, base + j), record<T>(n, mine + n.rec_at + i * n.rec_bytes),
          [&](size_t p) { return reduce_at<T, SYMCOLL_SUM, U>(src, a.nranks, p); },
          [&](size_t e) { return reduce_at<T, SYMCOLL_SUM, ONE>(src, a.nranks, e).e[0]; }, red);
    }
    BARRIER(a);
    for (int q = 0; q < a.nranks; q++) {
      const size_t lo = split.lo(q), m = split.cnt(q, rows);
      for (size_t i = blockIdx.x; i < m; i += gridDim.x) {
        const size_t row = base + lo + i;
        char *const rec = a.ws[q] + n.rec_at + i * n.rec_bytes;
        if (n.residual_out) copy_cg(n.residual_out + row * rb, rec + n.rec_res_out, rb);
        if (n.out) copy_cg(n.out + row * rb, rec + n.rec_out, rb);
        if (n.fp8_out) copy_cg(reinterpret_cast<char *>(n.fp8_out) + row * n.hidden, rec + n.rec_fp8, n.hidden);
        if (n.fp8_out && n.fp8_row_scales && threadIdx.x == 0)
          n.fp8_row_scales[row] = __ldcg(reinterpret_cast<const float *>(rec + n.rec_scale));
      }
    }
  }
  /* Peers are done reading our staging and records (and our input, zero-copy). */
  BARRIER(a);
  copy_scale(n);
}

/* norm_row's sum_pre for the fused LAMPORT kernel's FIT instances: the thread's K kept packs of
 * the row (its first, then `stride` apart), gathered at once (gather_k); EachPack elsewhere. */
template <typename Part, int K>
struct GatherRow {
  const Part &part;
  const char *x;
  size_t first, stride;
  bool &ok;
  template <typename P>
  __device__ void operator()(P (&s)[K], unsigned has) const {
    size_t vs[K];
#pragma unroll
    for (int k = 0; k < K; k++) vs[k] = first + (size_t)k * stride;
    part.template gather_k<K>(x, vs, has, s, ok);
  }
};
template <int FIT, typename Part>
__device__ __forceinline__ auto gather_row_of(const Part &part, const char *x, size_t first, size_t stride, bool &ok) {
  if constexpr (FIT == 0)
    return EachPack{};
  else
    return GatherRow<Part, FIT>{part, x, first, stride, ok};
}

/* Block b pushes and normalises rows b, b + grid, ...: a block waits only for what its twins
 * push, and every block pushes all its rows before it waits. Slot layout: the header, then the
 * launch's rows x hidden elements as in x. VECTOR rows move as 16-byte packs; UNIT rows
 * element by element, which the sentinel check of 2- and 4-byte elements allows.
 * CL (FIT only; compute capability 9.0 and later): a thread-block cluster of blocks shares each
 * row, block c of it the lanes c x blockDim.x onwards (ClusterRed), so that a row's pushes,
 * clears and polls spread over the cluster's SMs; cluster k takes rows k, k + clusters, ...
 * Every wait for peers comes before the row's decision to write (FIT: the thread's packs are
 * gathered at once), each block's answer joins the exchange of the sum of squares, and the
 * cluster's blocks write the row, or give up, on one answer (norm_row's JOINT): no block waits
 * for one that left. A block whose state says an earlier kernel gave up pushes nothing and
 * answers no. */
template <typename T, int U, int FIT = 0, int Q = SYMCOLL_CUDA_FP8_NONE, bool CL = false>
__global__ void __launch_bounds__(CL ? kNormThreads / 2 : kNormThreads) /* CL: 2 blocks a row at least */
    RmsNorm_Lamport(const symcoll__cuda_args_t a, const symcoll__cuda_norm_t n) {
  const symcoll_cuda::GridDependency dependency;
  static_assert(!CL || (FIT && U == VECTOR), "a cluster a row: FIT rows");
  __shared__ float red_buf[64];
  using Red = typename std::conditional<CL, ClusterRed, BlockRed>::type;
  Red red;
  red.buf = red_buf, red.turn = 0;
  if constexpr (CL) {
    __shared__ uint64_t mbar[2];
    red.rank = cluster_special(0), red.size = cluster_special(1), red.started = false, red.mbar = mbar, red.a = &a;
    red.begin();
  }
  constexpr bool VEC = U == VECTOR;
  constexpr int E = Pack<T, U>::E;
  const size_t h = n.hidden, nvec = VEC ? h / E : h; /* a row's pushes: packs, or elements */
  /* rows group, group + groups, ... are the block's (its cluster's) */
  const size_t group = CL ? cluster_special(2) : blockIdx.x, groups = CL ? cluster_special(3) : gridDim.x;
  /* The thread's first K0 pushes of its first row (FIT: all of them), on their way while the
   * state is read: loaded raw, fixed after (a fix would wait for its load there), and all
   * loaded before the first push (a push's store keeps later loads behind it). */
  constexpr int K0 = FIT ? FIT : 1;
  const size_t rt = red.thread(), nt = red.threads(), v0 = group * nvec + rt;
  Pack<T, VEC> x0[K0] = {}; /* zero, not a phi: no copy that waits for the load */
#pragma unroll
  for (int k = 0; k < K0; k++)
    if (group < n.rows && rt + k * nt < nvec) x0[k] = load_cg<T, VEC>(n.x, v0 + k * nt);
  uint32_t buf = 0, prev_bytes = 0;
  const bool took =
      lamport_take(a, (uint32_t)(SYMCOLL_CUDA_LAMPORT_HEADER + n.rows * h * sizeof(T)), &buf, &prev_bytes);
  if (!CL && !took) GIVE_UP(a);
  const LamportPart<T, SYMCOLL_SUM, VEC, true> part{a, buf, SYMCOLL_CUDA_LAMPORT_HEADER};
  const LamportPart<T, SYMCOLL_SUM, false, true> one{a, buf, SYMCOLL_CUDA_LAMPORT_HEADER};
  bool ok = took; /* no wait once false */
  if (took) {
    lamport_put_header(a, buf);
#pragma unroll
    for (int k = 0; k < K0; k++)
      if (group < n.rows && rt + k * nt < nvec) part.push(v0 + k * nt, fixed<T, VEC>(x0[k]));
    for (size_t row = group; row < n.rows; row += groups)
      for (size_t v = row * nvec + rt + (row == group ? K0 * nt : 0); v < (row + 1) * nvec; v += nt)
        part.push(v, load_fixed<T, VEC>(n.x, v));
    lamport_clear(a, buf, prev_bytes);
  }
  for (size_t row = group; row < n.rows; row += groups) {
    const size_t e0 = row * h; /* the row's first element */
    /* The peers' headers, checked once the block's first row has come (they came with it, or
     * soon after: one wait, not two), before anything is written; a peer in another call that
     * never sends this row's data is met inside the waits (LamportPart's HEADERS). A first row
     * whose register-resident packs' wait gave up writes nothing either (a later pack's wait,
     * after the check, may leave the row partly written, as a later row's does; not with CL,
     * whose rows wait for nothing after it). */
    auto go = [&] {
      if constexpr (CL) { /* this block's answer, block-uniform: the cluster's comes with the sum */
        return took && (row == group ? lamport_headers_ok(a, buf, ok) : __syncthreads_and(ok) != 0);
      } else {
        return row != group || lamport_headers_ok(a, buf, ok);
      }
    };
    if (!norm_row<T, U, true, false, FIT, Q>(
            n, residual_row<T>(n, row), caller_row<T>(n, row),
            [&](size_t p) {
              if constexpr (VEC) {
                return part.gather(n.x, e0 / E + p, ok);
              } else {
                Pack<T, U> s;
#pragma unroll
                for (int e = 0; e < E; e++) s.e[e] = one.gather(n.x, e0 + p * E + e, ok).e[0];
                return s;
              }
            },
            [&](size_t i) { return one.gather(n.x, e0 + i, ok).e[0]; }, red, go,
            gather_row_of<FIT>(part, n.x, e0 / E + rt, nt, ok)))
      GIVE_UP(a);
    if (!__syncthreads_and(ok)) GIVE_UP(a);
  }
  copy_scale(n);
}

/* FIT (VECTOR only): l->fit's instances of the kernels that run few rows, Q: their fp8 output. */
template <typename T, int U, int FIT, int Q>
const void *pick_access(const symcoll__cuda_launch_t *l) {
  /* a block an SM (few rows) or a thread per two lanes (more rows than SMs), never both */
  const void *local = l->two_lanes ? (const void *)RmsNorm_Local<T, U, false, true>
                      : l->early   ? (const void *)RmsNorm_Local<T, U, true, false, FIT, Q>
                                   : (const void *)RmsNorm_Local<T, U, false, false>;
  if (l->coll == SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM) /* the one-shot over this rank's block, or the local pass */
    return l->algo == SYMCOLL_ALGO_PULL         ? (const void *)RmsNorm_OneShot<T, U, FIT, Q>
           : l->algo == SYMCOLL_ALGO_SEQUENTIAL ? local
                                                : nullptr;
  if (l->coll != SYMCOLL_COLL_ALL_REDUCE_RMSNORM) return nullptr;
  switch (l->algo) {
    case SYMCOLL_ALGO_SEQUENTIAL:
      return local;
    case SYMCOLL_ALGO_ONE_SHOT:
      return (const void *)RmsNorm_OneShot<T, U, FIT, Q>;
    case SYMCOLL_ALGO_TWO_SHOT:
      return (const void *)RmsNorm_TwoShot<T, U>;
    case SYMCOLL_ALGO_LAMPORT:
      if constexpr (FIT > 0)
        if (l->cluster > 1) return (const void *)RmsNorm_Lamport<T, U, FIT, Q, true>;
      return (const void *)RmsNorm_Lamport<T, U, FIT, Q>;
    default:
      return nullptr;
  }
}
template <typename T, int FIT>
const void *pick_fit(const symcoll__cuda_launch_t *l) {
  switch (l->fit_fp8) {
    case SYMCOLL_CUDA_FP8_NONE:
      return pick_access<T, VECTOR, FIT, SYMCOLL_CUDA_FP8_NONE>(l);
    case SYMCOLL_CUDA_FP8_STATIC:
      return pick_access<T, VECTOR, FIT, SYMCOLL_CUDA_FP8_STATIC>(l);
    case SYMCOLL_CUDA_FP8_ROWS:
      return pick_access<T, VECTOR, FIT, SYMCOLL_CUDA_FP8_ROWS>(l);
    default:
      return nullptr;
  }
}
template <typename T>
const void *pick(const symcoll__cuda_launch_t *l) {
  if (!l->vec) return pick_access<T, UNIT, 0, SYMCOLL_CUDA_FP8_NONE>(l);
  return l->fit == 1   ? pick_fit<T, 1>(l)
         : l->fit == 2 ? pick_fit<T, 2>(l)
                       : pick_access<T, VECTOR, 0, SYMCOLL_CUDA_FP8_NONE>(l);
}

}  // namespace
}  // namespace symcoll_cuda

extern "C" const void *symcoll__cuda_rmsnorm_kernel(const symcoll__cuda_launch_t *l) {
  switch (l->dtype) {
    case SYMCOLL_FLOAT32:
      return symcoll_cuda::pick<float>(l);
    case SYMCOLL_FLOAT16:
      return symcoll_cuda::pick<__half>(l);
    case SYMCOLL_BFLOAT16:
      return symcoll_cuda::pick<__nv_bfloat16>(l);
    default:
      return nullptr; /* the norm takes fp32, fp16 and bf16 only */
  }
}

extern "C" int symcoll__cuda_rmsnorm_launch(const symcoll__cuda_launch_t *l, const symcoll__cuda_args_t *a,
                                            const symcoll__cuda_norm_t *n, void *stream) {
  const void *fn = symcoll__cuda_rmsnorm_kernel(l);
  if (!fn) return (int)cudaErrorInvalidDeviceFunction;
  void *one[] = {(void *)n}, *two[] = {(void *)a, (void *)n};
  return symcoll__cuda_launch_fn(fn, l, l->algo == SYMCOLL_ALGO_SEQUENTIAL ? one : two, stream);
}
