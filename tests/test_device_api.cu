/*
 * GPU-only tests: the device API's pads return to rest after many barriers; collectives
 * captured in a CUDA graph replay correctly (plain, GEMM and norm operations); a rank that never launches makes its
 * peer's kernel give up with TIMEOUT (reported by symcoll_comm_check) instead of hanging; LAMPORT's sentinel rule
 * holds.
 */
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <setjmp.h>
#include <unistd.h>
#include <chrono>
#include <thread>
#include <vector>

extern "C" {
#include <cmocka.h>
}
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <symcoll.h>
#include <symcoll_device.cuh>

extern "C" {
#include "harness.h"
}

#define CK(x) assert_int_equal((int)(x), 0)

static int ngpu;
static std::vector<int> devices(int n) {
  std::vector<int> d(n);
  for (int r = 0; r < n; r++) d[r] = r % ngpu;
  return d;
}

__global__ void many_barriers(symcoll_device_view_t v, int rounds, int *failed) {
  for (int i = 0; i < rounds; i++)
    if (!symcoll_dev_barrier_block(v, blockIdx.x)) {
      if (threadIdx.x == 0) atomicAdd(failed, 1);
      return;
    }
  /* point-to-point too: rank r signals r+1 on the last slot, which waits for r-1 */
  if (blockIdx.x == 0 && threadIdx.x == 0 && v.nranks > 1) {
    int next = (v.rank + 1) % v.nranks, prev = (v.rank + v.nranks - 1) % v.nranks;
    if (!symcoll_dev_signal(v, v.pad_slots - 1, next) || !symcoll_dev_wait(v, v.pad_slots - 1, prev))
      atomicAdd(failed, 1);
  }
}

static void pads_rank(symcoll_comm_t comm, int *bad) {
  cudaSetDevice(symcoll_comm_device(comm));
  /* CUDA allocations and streams first: such calls can block while a peer's kernel spins,
   * and peers start spinning as soon as the collective allocation below returns. */
  int *failed;
  cudaMalloc(&failed, sizeof(int));
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  symcoll_mem_t mem;
  *bad = 1;
  if (symcoll_mem_alloc(comm, 4096, &mem) != SYMCOLL_OK) return;
  symcoll_device_view_t v;
  symcoll_mem_device_view(mem, &v);
  cudaMemsetAsync(failed, 0, sizeof(int), s);
  many_barriers<<<8, 64, 0, s>>>(v, 1000, failed);
  int f = -1;
  std::vector<uint32_t> pad((size_t)v.pad_slots * SYMCOLL_MAX_RANKS);
  cudaMemcpyAsync(&f, failed, sizeof f, cudaMemcpyDeviceToHost, s);
  cudaMemcpyAsync(pad.data(), v.pad[v.rank], pad.size() * 4, cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  size_t nonzero = 0;
  for (uint32_t w : pad) nonzero += w != 0;
  *bad = f != 0 || nonzero != 0 || cudaGetLastError() != cudaSuccess;
  if (*bad) fprintf(stderr, "rank %d: %d failed waits, %zu pad slots not at rest\n", v.rank, f, nonzero);
  cudaFree(failed);
  cudaStreamDestroy(s);
  symcoll_mem_free(mem);
}

static void test_pads_at_rest(void **state) {
  (void)state;
  for (int n : {1, 2, 4, 8}) {
    std::vector<symcoll_comm_t> comms(n);
    CK(symcoll_comm_create_all(n, devices(n).data(), comms.data()));
    std::vector<int> bad(n, 1);
    std::vector<std::thread> t;
    for (int r = 0; r < n; r++) t.emplace_back(pads_rank, comms[r], &bad[r]);
    for (int r = 0; r < n; r++) {
      t[r].join();
      assert_int_equal(bad[r], 0);
      symcoll_comm_destroy(comms[r]);
    }
  }
}

/* 100 calls of the three collectives, of different sizes and algorithms, captured in one
 * graph per rank, replayed twice with fresh inputs each time; every output checked. */
static const symcoll_algo_t graph_algos[SYMCOLL_NUM_COLLS][5] = {
    {SYMCOLL_ALGO_AUTO, SYMCOLL_ALGO_ONE_SHOT, SYMCOLL_ALGO_TWO_SHOT, SYMCOLL_ALGO_ONE_SHOT_DB, SYMCOLL_ALGO_LAMPORT},
    {SYMCOLL_ALGO_AUTO, SYMCOLL_ALGO_PULL, SYMCOLL_ALGO_PUSH, SYMCOLL_ALGO_LAMPORT, SYMCOLL_ALGO_COPY_ENGINE},
    {SYMCOLL_ALGO_AUTO, SYMCOLL_ALGO_PULL, SYMCOLL_ALGO_LAMPORT, SYMCOLL_ALGO_PULL, SYMCOLL_ALGO_LAMPORT}};

static void graph_rank(symcoll_comm_t comm, uint32_t seed0, int *bad) {
  cudaSetDevice(symcoll_comm_device(comm));
  const int rank = symcoll_comm_rank(comm), n = symcoll_comm_nranks(comm);
  const int calls = 100;
  const size_t maxc = 20000, slot = maxc * (size_t)n * 2; /* bytes per call, bf16 */
  *bad = 1;
  char *in, *out;
  if (cudaMalloc(&in, calls * slot) != cudaSuccess || cudaMalloc(&out, calls * slot) != cudaSuccess) return;
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  auto coll_of = [](int i) { return (symcoll_coll_t)(i % SYMCOLL_NUM_COLLS); };
  auto count_of = [](int i) { return 1 + (size_t)i * 199; };
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls; i++) {
    symcoll_coll_opts_t o;
    symcoll_coll_opts_init(&o);
    const symcoll_coll_t coll = coll_of(i);
    o.algo = graph_algos[coll][(i / SYMCOLL_NUM_COLLS) % 5]; /* auto and every algorithm in turn */
    if (symcoll_coll_algo_supported(comm, coll, o.algo) != SYMCOLL_OK) o.algo = SYMCOLL_ALGO_AUTO;
    const size_t count = count_of(i);
    char *x = in + i * slot, *y = out + i * slot;
    symcoll_status_t st = coll == SYMCOLL_COLL_ALL_REDUCE
                              ? symcoll_all_reduce_ex(comm, x, y, count, SYMCOLL_BFLOAT16, SYMCOLL_SUM, s, &o)
                          : coll == SYMCOLL_COLL_ALL_GATHER
                              ? symcoll_all_gather_ex(comm, x, y, count, SYMCOLL_BFLOAT16, s, &o)
                              : symcoll_reduce_scatter_ex(comm, x, y, count, SYMCOLL_BFLOAT16, SYMCOLL_SUM, s, &o);
    if (st != SYMCOLL_OK) fprintf(stderr, "capture %d: %s\n", i, symcoll_status_string(st));
  }
  CK(cudaStreamEndCapture(s, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<char> h(calls * slot), want(slot);
  int wrong = 0;
  for (int rep = 0; rep < 2; rep++) {
    uint32_t seed = seed0 + rep * 7919;
    for (int i = 0; i < calls; i++)
      exact_fill(h.data() + i * slot, SYMCOLL_BFLOAT16,
                 count_of(i) * (coll_of(i) == SYMCOLL_COLL_REDUCE_SCATTER ? n : 1), rank, seed + i);
    cudaMemcpyAsync(in, h.data(), h.size(), cudaMemcpyHostToDevice, s);
    cudaMemsetAsync(out, 0xff, h.size(), s);
    CK(cudaGraphLaunch(exec, s));
    cudaMemcpyAsync(h.data(), out, h.size(), cudaMemcpyDeviceToHost, s);
    CK(cudaStreamSynchronize(s));
    for (int i = 0; i < calls; i++) {
      const size_t count = count_of(i);
      size_t got_n = count;
      switch (coll_of(i)) {
        case SYMCOLL_COLL_ALL_REDUCE:
          exact_expect(want.data(), SYMCOLL_BFLOAT16, SYMCOLL_SUM, count, n, seed + i);
          break;
        case SYMCOLL_COLL_ALL_GATHER:
          for (int r = 0; r < n; r++)
            exact_fill(want.data() + (size_t)r * count * 2, SYMCOLL_BFLOAT16, count, r, seed + i);
          got_n = count * (size_t)n;
          break;
        default:
          exact_expect_range(want.data(), SYMCOLL_BFLOAT16, SYMCOLL_SUM, (size_t)rank * count, count, n, seed + i);
      }
      if (memcmp(want.data(), h.data() + i * slot, got_n * 2) != 0) {
        if (wrong++ < 3)
          fprintf(stderr, "rank %d replay %d call %d (%s count %zu): wrong\n", rank, rep, i,
                  symcoll_coll_name(coll_of(i)), count);
      }
    }
  }
  *bad = wrong != 0 || symcoll_comm_check(comm) != SYMCOLL_OK;
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(in);
  cudaFree(out);
  cudaStreamDestroy(s);
}

/* Runs fn on every rank in a thread of its own (one seed for all), checks each rank's verdict
 * and destroys the communicators. */
static void run_team(std::vector<symcoll_comm_t> &comms, void (*fn)(symcoll_comm_t, uint32_t, int *)) {
  const int n = (int)comms.size();
  std::vector<int> bad(n, 1);
  std::vector<std::thread> t;
  uint32_t seed = (uint32_t)time(nullptr);
  for (int r = 0; r < n; r++) t.emplace_back(fn, comms[r], seed, &bad[r]);
  for (int r = 0; r < n; r++) {
    t[r].join();
    assert_int_equal(bad[r], 0);
    symcoll_comm_destroy(comms[r]);
  }
}

static void test_graph_replay(void **state) {
  (void)state;
  for (int n : {1, 2, 4}) {
    std::vector<symcoll_comm_t> comms(n);
    CK(symcoll_comm_create_all(n, devices(n).data(), comms.data()));
    run_team(comms, graph_rank);
  }
}

/* The GEMM operations captured in one graph with plain collectives (overlap, sequential,
 * auto), replayed twice with fresh small-integer inputs: bf16 results exact, checked bit for
 * bit against a host reference. */
static float mm_a(int r, size_t i, size_t j, uint32_t s) {
  return (float)((int)((i * 7 + j * 3 + r * 5 + s) % 5) - 2);
}
static float mm_b(int r, size_t j, size_t l, uint32_t s) {
  return (float)((int)((j * 5 + l * 11 + r * 3 + s) % 3) - 1);
}

static void graph_matmul_rank(symcoll_comm_t comm, uint32_t seed0, int *bad) {
  cudaSetDevice(symcoll_comm_device(comm));
  const int rank = symcoll_comm_rank(comm), n = symcoll_comm_nranks(comm);
  const size_t ms = 33, nn = 40, kk = 24, rows = ms * (size_t)n; /* kk * n * 2 <= 256: exact in bf16 */
  *bad = 1;
  __nv_bfloat16 *ag_a, *ag_b, *ag_c[3], *rs_a, *rs_b, *rs_c[3], *ar;
  CK(cudaMalloc(&ag_a, ms * kk * 2));
  CK(cudaMalloc(&ag_b, kk * nn * 2));
  CK(cudaMalloc(&rs_a, rows * kk * 2));
  CK(cudaMalloc(&rs_b, kk * nn * 2));
  CK(cudaMalloc(&ar, 1024 * 2));
  for (int i = 0; i < 3; i++) CK(cudaMalloc(&ag_c[i], rows * nn * 2)), CK(cudaMalloc(&rs_c[i], ms * nn * 2));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  /* First use of the GEMM operations sets up cuBLASLt (a cudaMalloc): before capture, and
   * before any rank's kernel waits for ours. */
  CK(symcoll_coll_algo_supported(comm, SYMCOLL_COLL_ALL_GATHER_MATMUL, SYMCOLL_ALGO_OVERLAP));
  CK(symcoll_comm_barrier(comm));
  const symcoll_algo_t algos[3] = {SYMCOLL_ALGO_OVERLAP, SYMCOLL_ALGO_SEQUENTIAL, SYMCOLL_ALGO_AUTO};
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  auto enqueue = [&]() {
    for (int i = 0; i < 3; i++) {
      symcoll_matmul_opts_t o;
      symcoll_matmul_opts_init(&o);
      o.algo = algos[i];
      CK(symcoll_all_gather_matmul(comm, ag_a, ag_b, ag_c[i], ms, nn, kk, SYMCOLL_BFLOAT16, &o, s));
      CK(symcoll_all_reduce(comm, ar, ar, 1024, SYMCOLL_BFLOAT16, SYMCOLL_MAX, s));
      CK(symcoll_matmul_reduce_scatter(comm, rs_a, rs_b, rs_c[i], rows, nn, kk, SYMCOLL_BFLOAT16, &o, s));
    }
  };
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  enqueue();
  CK(cudaStreamEndCapture(s, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<__nv_bfloat16> h(rows * kk > kk * nn ? rows * kk : kk * nn), got(rows * nn);
  std::vector<float> want(rows * nn);
  int wrong = 0;
  /* Each algorithm's output against want, bit for bit (the first few differences printed). */
  auto compare = [&](__nv_bfloat16 *const *c, size_t count, const char *what, int rep) {
    for (int a = 0; a < 3; a++) {
      cudaMemcpy(got.data(), c[a], count * 2, cudaMemcpyDeviceToHost);
      for (size_t i = 0; i < count; i++)
        if (__bfloat162float(got[i]) != want[i] && wrong++ < 6)
          fprintf(stderr, "rank %d of %d, %s %d: %s %s: element %zu %g != %g\n", rank, n,
                  rep ? "graph replay" : "eager run", rep, what, symcoll_algo_name(algos[a]), i,
                  __bfloat162float(got[i]), want[i]);
    }
  };
  /* Rep 0 runs the same calls eagerly (back to back, no host barrier between them), reps 1
   * and 2 replay the graph. */
  for (int rep = 0; rep < 3; rep++) {
    const uint32_t seed = seed0 + rep * 13;
    auto up = [&](__nv_bfloat16 *d, size_t r0, size_t nr, size_t nc, float (*f)(int, size_t, size_t, uint32_t)) {
      for (size_t i = 0; i < nr; i++)
        for (size_t j = 0; j < nc; j++) h[i * nc + j] = __float2bfloat16(f(rank, r0 + i, j, seed));
      cudaMemcpyAsync(d, h.data(), nr * nc * 2, cudaMemcpyHostToDevice, s);
    };
    up(ag_a, (size_t)rank * ms, ms, kk, mm_a);
    up(ag_b, 0, kk, nn, mm_b);
    up(rs_a, 0, rows, kk, mm_a);
    up(rs_b, 0, kk, nn, mm_b);
    CK(cudaStreamSynchronize(s));
    CK(symcoll_comm_barrier(comm));
    if (rep == 0)
      enqueue();
    else
      CK(cudaGraphLaunch(exec, s));
    CK(cudaStreamSynchronize(s));
    for (size_t i = 0; i < rows; i++) /* all_gather_matmul: A's row i from rank i / ms */
      for (size_t l = 0; l < nn; l++) {
        float v = 0;
        for (size_t j = 0; j < kk; j++) v += mm_a((int)(i / ms), i, j, seed) * mm_b(rank, j, l, seed);
        want[i * nn + l] = v;
      }
    compare(ag_c, rows * nn, "all_gather_matmul", rep);
    for (size_t i = 0; i < ms; i++)
      for (size_t l = 0; l < nn; l++) {
        float v = 0;
        for (int r = 0; r < n; r++)
          for (size_t j = 0; j < kk; j++) v += mm_a(r, (size_t)rank * ms + i, j, seed) * mm_b(r, j, l, seed);
        want[i * nn + l] = v;
      }
    compare(rs_c, ms * nn, "matmul_reduce_scatter", rep);
    CK(symcoll_comm_barrier(comm));
  }
  *bad = wrong != 0 || symcoll_comm_check(comm) != SYMCOLL_OK;
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(ag_a), cudaFree(ag_b), cudaFree(rs_a), cudaFree(rs_b), cudaFree(ar);
  for (int i = 0; i < 3; i++) cudaFree(ag_c[i]), cudaFree(rs_c[i]);
  cudaStreamDestroy(s);
}

static void test_graph_matmul(void **state) {
  (void)state;
  for (int n : {1, 2, 4}) {
    std::vector<symcoll_comm_t> comms(n);
    CK(symcoll_comm_create_all(n, devices(n).data(), comms.data()));
    run_team(comms, graph_matmul_rank);
  }
}

/* all_reduce_rmsnorm captured in one graph with every algorithm the communicator runs (oneshot,
 * twoshot, sequential, auto; sequential with the FP8 output alone takes scratch from the stream's pool),
 * run eagerly once, then replayed twice with fresh small-integer inputs: residual_out exact
 * against a host reference, out and FP8 bit for bit equal between the algorithms (one row's
 * sum of squares runs in the same order in both kernels). */
static void graph_norm_rank(symcoll_comm_t comm, uint32_t seed0, int *bad) {
  cudaSetDevice(symcoll_comm_device(comm));
  const int rank = symcoll_comm_rank(comm), n = symcoll_comm_nranks(comm);
  const size_t rows = 37, hidden = 1000, count = rows * hidden;
  constexpr int NA = 4;
  const symcoll_algo_t algos[NA] = {SYMCOLL_ALGO_ONE_SHOT, SYMCOLL_ALGO_TWO_SHOT, SYMCOLL_ALGO_SEQUENTIAL,
                                    SYMCOLL_ALGO_AUTO};
  *bad = 1;
  __nv_bfloat16 *x, *res, *w, *out[NA], *ro[NA];
  unsigned char *q[NA];
  float *scales[NA];
  CK(cudaMalloc(&x, count * 2));
  CK(cudaMalloc(&res, count * 2));
  CK(cudaMalloc(&w, hidden * 2));
  for (int i = 0; i < NA; i++) {
    CK(cudaMalloc(&out[i], count * 2)), CK(cudaMalloc(&ro[i], count * 2));
    CK(cudaMalloc(&q[i], count)), CK(cudaMalloc(&scales[i], rows * sizeof(float)));
  }
  unsigned char *q_only;
  float *scales_only;
  CK(cudaMalloc(&q_only, count));
  CK(cudaMalloc(&scales_only, rows * sizeof(float)));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(symcoll_comm_barrier(comm));
  auto enqueue = [&]() {
    for (int i = 0; i < NA; i++) {
      symcoll_norm_opts_t o;
      symcoll_norm_opts_init(&o);
      o.algo = algos[i];
      o.fp8_out = q[i], o.fp8_row_scales = scales[i];
      CK(symcoll_all_reduce_rmsnorm(comm, x, res, w, 1e-6f, out[i], ro[i], rows, hidden, SYMCOLL_BFLOAT16, &o, s));
    }
    symcoll_norm_opts_t o; /* the chain with no out: its sum goes to stream-ordered scratch */
    symcoll_norm_opts_init(&o);
    o.algo = SYMCOLL_ALGO_SEQUENTIAL, o.fp8_out = q_only, o.fp8_row_scales = scales_only;
    CK(symcoll_all_reduce_rmsnorm(comm, x, res, w, 1e-6f, nullptr, nullptr, rows, hidden, SYMCOLL_BFLOAT16, &o, s));
  };
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  enqueue();
  CK(cudaStreamEndCapture(s, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<__nv_bfloat16> h(count), got(count), ref(count);
  std::vector<unsigned char> qg(count), qr(count);
  std::vector<float> sg(rows), sr(rows);
  int wrong = 0;
  auto differ = [&](const void *a, const void *b, size_t bytes, const char *what, int alg, int rep) {
    if (memcmp(a, b, bytes) != 0 && wrong++ < 6)
      fprintf(stderr, "rank %d of %d, %s %d: %s of %s differs from oneshot's\n", rank, n,
              rep ? "graph replay" : "eager run", rep, what, symcoll_algo_name(algos[alg]));
  };
  for (int rep = 0; rep < 3; rep++) {
    const uint32_t seed = seed0 + rep * 13;
    for (size_t i = 0; i < count; i++) h[i] = __float2bfloat16((float)((int)((i * 7 + rank * 5 + seed) % 9) - 4));
    CK(cudaMemcpyAsync(x, h.data(), count * 2, cudaMemcpyHostToDevice, s));
    for (size_t i = 0; i < count; i++) h[i] = __float2bfloat16((float)((int)((i * 3 + seed) % 7) - 3));
    CK(cudaMemcpyAsync(res, h.data(), count * 2, cudaMemcpyHostToDevice, s));
    for (size_t i = 0; i < hidden; i++) h[i] = __float2bfloat16(0.5f + (float)(i % 4) / 4);
    CK(cudaMemcpyAsync(w, h.data(), hidden * 2, cudaMemcpyHostToDevice, s));
    CK(cudaStreamSynchronize(s));
    CK(symcoll_comm_barrier(comm));
    if (rep == 0)
      enqueue();
    else
      CK(cudaGraphLaunch(exec, s));
    CK(cudaStreamSynchronize(s));
    /* residual_out: integers, exact (sums of at most 8 x 4 plus 3). */
    cudaMemcpy(got.data(), ro[0], count * 2, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < count; i++) {
      float want = (float)((int)((i * 3 + seed) % 7) - 3);
      for (int r = 0; r < n; r++) want += (float)((int)((i * 7 + r * 5 + seed) % 9) - 4);
      if (__bfloat162float(got[i]) != want && wrong++ < 6)
        fprintf(stderr, "rank %d of %d, rep %d: residual_out[%zu] = %g, want %g\n", rank, n, rep, i,
                __bfloat162float(got[i]), want);
    }
    cudaMemcpy(ref.data(), out[0], count * 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(qr.data(), q[0], count, cudaMemcpyDeviceToHost);
    cudaMemcpy(sr.data(), scales[0], rows * sizeof(float), cudaMemcpyDeviceToHost);
    for (int a = 1; a < NA; a++) {
      cudaMemcpy(got.data(), out[a], count * 2, cudaMemcpyDeviceToHost);
      differ(got.data(), ref.data(), count * 2, "out", a, rep);
      cudaMemcpy(got.data(), ro[a], count * 2, cudaMemcpyDeviceToHost);
      std::vector<__nv_bfloat16> ro0(count);
      cudaMemcpy(ro0.data(), ro[0], count * 2, cudaMemcpyDeviceToHost);
      differ(got.data(), ro0.data(), count * 2, "residual_out", a, rep);
      cudaMemcpy(qg.data(), q[a], count, cudaMemcpyDeviceToHost);
      differ(qg.data(), qr.data(), count, "fp8_out", a, rep);
      cudaMemcpy(sg.data(), scales[a], rows * sizeof(float), cudaMemcpyDeviceToHost);
      differ(sg.data(), sr.data(), rows * sizeof(float), "fp8_row_scales", a, rep);
    }
    cudaMemcpy(qg.data(), q_only, count, cudaMemcpyDeviceToHost);
    differ(qg.data(), qr.data(), count, "fp8_out alone", 2, rep);
    CK(symcoll_comm_barrier(comm));
  }
  *bad = wrong != 0 || symcoll_comm_check(comm) != SYMCOLL_OK;
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(x), cudaFree(res), cudaFree(w), cudaFree(q_only), cudaFree(scales_only);
  for (int i = 0; i < NA; i++) cudaFree(out[i]), cudaFree(ro[i]), cudaFree(q[i]), cudaFree(scales[i]);
  cudaStreamDestroy(s);
}

static void test_graph_norm(void **state) {
  (void)state;
  for (int n : {1, 2, 3, 4}) {
    std::vector<symcoll_comm_t> comms(n);
    CK(symcoll_comm_create_all(n, devices(n).data(), comms.data()));
    run_team(comms, graph_norm_rank);
  }
}

/* Two ranks of a fresh communicator, a thread each, running fn; each must leave *bad at 0. */
template <typename Fn>
static void run_pair(Fn fn) {
  symcoll_comm_t comms[2];
  CK(symcoll_comm_create_all(2, devices(2).data(), comms));
  int bad[2] = {1, 1};
  std::thread t0(fn, comms[0], &bad[0]), t1(fn, comms[1], &bad[1]);
  t0.join();
  t1.join();
  for (int r = 0; r < 2; r++) {
    assert_int_equal(bad[r], 0);
    symcoll_comm_destroy(comms[r]);
  }
}

/* Ranks in different calls: rank `refused`'s first call is refused locally (a NULL send), so
 * its next call, of another count, meets its peer's first. The kernels meet at a barrier or a
 * packet header carrying the call's signature: both ranks' symcoll_comm_check must say
 * MISMATCH, and no output may be written (the copy engine's copies cannot be held back: there
 * the error is all that is checked). Every algorithm with such a meeting point, both orders. */
struct mismatch_case {
  symcoll_coll_t coll;
  symcoll_algo_t algo;
};
/* skew (the shape mismatch below): 0, or rank `refused` makes the same call as its peer with
 * another block size (1), grid (2) or round (3) in its options. */
static void mismatch_rank(symcoll_comm_t comm, mismatch_case c, int refused, int *bad, int skew = 0) {
  cudaSetDevice(symcoll_comm_device(comm));
  const int rank = symcoll_comm_rank(comm);
  const size_t bytes = 1 << 16;
  char *in, *out;
  cudaStream_t s;
  *bad = 1;
  if (cudaMalloc(&in, bytes) != cudaSuccess || cudaMalloc(&out, bytes) != cudaSuccess) return;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaMemsetAsync(in, 0x3c, bytes, s);
  cudaMemsetAsync(out, TH_POISON, bytes, s);
  cudaStreamSynchronize(s);
  if (symcoll_comm_barrier(comm) != SYMCOLL_OK) return;
  symcoll_coll_opts_t o;
  symcoll_coll_opts_init(&o);
  o.algo = c.algo;
  auto call = [&](const void *x, size_t count) {
    switch (c.coll) {
      case SYMCOLL_COLL_ALL_REDUCE:
        return symcoll_all_reduce_ex(comm, x, out, count, SYMCOLL_FLOAT32, SYMCOLL_SUM, s, &o);
      case SYMCOLL_COLL_ALL_GATHER:
        return symcoll_all_gather_ex(comm, x, out, count, SYMCOLL_FLOAT32, s, &o);
      default:
        return symcoll_reduce_scatter_ex(comm, x, out, count, SYMCOLL_FLOAT32, SYMCOLL_SUM, s, &o);
    }
  };
  int wrong = 0;
  if (skew) {
    if (rank == refused) {
      if (skew == 1) o.threads = 128;
      if (skew == 2) o.blocks = 3;
      if (skew == 3) o.round_bytes = 4096;
    }
    wrong += call(in, 4096) != SYMCOLL_OK; /* 16 KiB a rank: every output fits the buffer */
  } else if (rank == refused) {
    wrong += call(nullptr, 8) != SYMCOLL_ERR_INVALID_ARGUMENT;
    wrong += call(in, 4) != SYMCOLL_OK;
  } else {
    wrong += call(in, 8) != SYMCOLL_OK;
  }
  cudaStreamSynchronize(s);
  const symcoll_status_t st = symcoll_comm_check(comm);
  std::vector<unsigned char> h(bytes);
  cudaMemcpy(h.data(), out, bytes, cudaMemcpyDeviceToHost);
  /* Another grid or round may launch alike for a call this small (a cap, one round either
   * way): then the call must be right. Another block size always differs: MISMATCH. */
  const bool ran = skew > 1 && st == SYMCOLL_OK;
  if (ran) {
    float v;
    memset(&v, 0x3c, sizeof v);
    const size_t n = c.coll == SYMCOLL_COLL_ALL_GATHER ? 2 * 4096 : 4096;
    const float want = c.coll == SYMCOLL_COLL_ALL_GATHER ? v : v + v;
    size_t bad_elems = 0;
    for (size_t i = 0; i < n; i++) {
      float got;
      memcpy(&got, h.data() + 4 * i, 4);
      bad_elems += got != want;
    }
    if (bad_elems)
      fprintf(stderr, "rank %d, %s %s, options skew %d: %zu of %zu elements wrong\n", rank, symcoll_coll_name(c.coll),
              symcoll_algo_name(c.algo), skew, bad_elems, n);
    wrong += bad_elems != 0;
  } else if (st != SYMCOLL_ERR_MISMATCH) {
    fprintf(stderr, "rank %d, %s %s, rank %d %s: comm_check says %s\n", rank, symcoll_coll_name(c.coll),
            symcoll_algo_name(c.algo), refused, skew ? "has other options" : "refused", symcoll_status_string(st));
    wrong++;
  }
  size_t written = 0;
  for (unsigned char b : h) written += b != TH_POISON;
  if (written && !ran && c.algo != SYMCOLL_ALGO_COPY_ENGINE) {
    fprintf(stderr, "rank %d, %s %s: %zu output bytes written by a mismatched call\n", rank, symcoll_coll_name(c.coll),
            symcoll_algo_name(c.algo), written);
    wrong++;
  }
  *bad = wrong;
  cudaFree(in);
  cudaFree(out);
  cudaStreamDestroy(s);
}

/* Every algorithm with a meeting point: a barrier, or a packet header, carrying the signature. */
static const mismatch_case meeting_cases[] = {
    {SYMCOLL_COLL_ALL_REDUCE, SYMCOLL_ALGO_ONE_SHOT},    {SYMCOLL_COLL_ALL_REDUCE, SYMCOLL_ALGO_TWO_SHOT},
    {SYMCOLL_COLL_ALL_REDUCE, SYMCOLL_ALGO_ONE_SHOT_DB}, {SYMCOLL_COLL_ALL_GATHER, SYMCOLL_ALGO_PULL},
    {SYMCOLL_COLL_ALL_GATHER, SYMCOLL_ALGO_PUSH},        {SYMCOLL_COLL_ALL_GATHER, SYMCOLL_ALGO_LAMPORT},
    {SYMCOLL_COLL_ALL_GATHER, SYMCOLL_ALGO_COPY_ENGINE}, {SYMCOLL_COLL_REDUCE_SCATTER, SYMCOLL_ALGO_PULL},
    {SYMCOLL_COLL_REDUCE_SCATTER, SYMCOLL_ALGO_LAMPORT},
};

static void test_mismatch_gpu(void **state) {
  (void)state;
  setenv("SYMCOLL_TIMEOUT_MS", "3000", 1);
  for (const mismatch_case &c : meeting_cases)
    for (int refused = 0; refused < 2; refused++)
      run_pair([&](symcoll_comm_t comm, int *bad) { mismatch_rank(comm, c, refused, bad); });
  unsetenv("SYMCOLL_TIMEOUT_MS");
}

/* Ranks in the same call whose options ask for another launch shape (block size, grid, round):
 * the grid stride decides which rank owns which vectors, and the round how many barriers come,
 * so the shape is part of the signature the kernels meet with: both ranks MISMATCH, nothing
 * written (or, where the options leave the launch as it was, both right). Every algorithm with
 * barriers. */
static void test_shape_mismatch_gpu(void **state) {
  (void)state;
  setenv("SYMCOLL_TIMEOUT_MS", "3000", 1);
  for (const mismatch_case &c : meeting_cases) {
    if (c.algo == SYMCOLL_ALGO_LAMPORT || c.algo == SYMCOLL_ALGO_COPY_ENGINE) continue; /* no barriers */
    for (int skew = 1; skew <= 3; skew++)
      run_pair([&](symcoll_comm_t comm, int *bad) { mismatch_rank(comm, c, 1, bad, skew); });
  }
  unsetenv("SYMCOLL_TIMEOUT_MS");
}

/* Ranks that disagree on where a buffer lies: rank 0's at the start of a symmetric allocation,
 * rank 1's at another offset of its allocation, or in plain memory. A kernel that stored into
 * peers' outputs or read their inputs where they lie would touch the wrong bytes; the placement
 * is part of the call's signature, so both ranks must say MISMATCH before any store: nothing of
 * the allocation (but the input placed there) and nothing of the outputs is written, and the
 * input is left as it was. */
struct placement_case {
  symcoll_coll_t coll;
  symcoll_algo_t algo;
  bool input; /* the input is the buffer the ranks place differently (else the output) */
  bool plain; /* rank 1's lies in plain memory (else at another offset of the allocation) */
};
static void placement_rank(symcoll_comm_t comm, placement_case c, int *bad) {
  cudaSetDevice(symcoll_comm_device(comm));
  const int rank = symcoll_comm_rank(comm);
  const size_t n = (size_t)symcoll_comm_nranks(comm), region = 1 << 16, count = 2048; /* fp32; outputs fit a region */
  const size_t in_bytes = (c.coll == SYMCOLL_COLL_ALL_TO_ALL ? n : 1) * count * 4;
  symcoll_mem_t mem;
  char *plain_a = nullptr, *plain_b = nullptr;
  cudaStream_t s;
  *bad = 1;
  if (symcoll_mem_alloc(comm, 2 * region, &mem) != SYMCOLL_OK) return;
  if (cudaMalloc(&plain_a, region) != cudaSuccess || cudaMalloc(&plain_b, region) != cudaSuccess) return;
  char *const sym = (char *)symcoll_mem_ptr(mem, rank);
  char *const placed = rank == 0 ? sym : c.plain ? plain_b : sym + region;
  char *const in = c.input ? placed : plain_a, *const out = c.input ? plain_a : placed;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaMemsetAsync(sym, TH_POISON, 2 * region, s);
  cudaMemsetAsync(plain_a, TH_POISON, region, s);
  cudaMemsetAsync(plain_b, TH_POISON, region, s);
  cudaMemsetAsync(in, 0x3c, in_bytes, s);
  cudaStreamSynchronize(s);
  if (symcoll_comm_barrier(comm) != SYMCOLL_OK) return;
  symcoll_coll_opts_t o;
  symcoll_coll_opts_init(&o);
  o.algo = c.algo;
  symcoll_status_t st;
  if (c.coll == SYMCOLL_COLL_ALL_REDUCE)
    st = symcoll_all_reduce_ex(comm, in, out, count, SYMCOLL_FLOAT32, SYMCOLL_SUM, s, &o);
  else if (c.coll == SYMCOLL_COLL_ALL_GATHER)
    st = symcoll_all_gather_ex(comm, in, out, count, SYMCOLL_FLOAT32, s, &o);
  else
    st = symcoll_all_to_all_ex(comm, in, out, count, SYMCOLL_FLOAT32, s, &o);
  int wrong = st != SYMCOLL_OK;
  cudaStreamSynchronize(s);
  const symcoll_status_t checked = symcoll_comm_check(comm);
  const char *what = c.input ? "input" : "output";
  if (checked != SYMCOLL_ERR_MISMATCH) {
    fprintf(stderr, "rank %d, %s %s, %s placed apart%s: comm_check says %s\n", rank, symcoll_coll_name(c.coll),
            symcoll_algo_name(c.algo), what, c.plain ? " (plain on rank 1)" : "", symcoll_status_string(checked));
    wrong++;
  }
  /* every byte as it was: the poison, and the input's 0x3c where the input lies */
  struct {
    const char *base;
    size_t bytes;
  } spans[] = {{sym, 2 * region}, {plain_a, region}, {plain_b, region}};
  for (const auto &sp : spans) {
    std::vector<unsigned char> h(sp.bytes);
    cudaMemcpy(h.data(), sp.base, sp.bytes, cudaMemcpyDeviceToHost);
    size_t changed = 0;
    for (size_t i = 0; i < sp.bytes; i++) {
      const bool in_input = sp.base + i >= in && sp.base + i < in + in_bytes;
      changed += h[i] != (in_input ? 0x3c : TH_POISON);
    }
    if (changed) {
      fprintf(stderr, "rank %d, %s %s, %s placed apart%s: %zu bytes written by the refused call\n", rank,
              symcoll_coll_name(c.coll), symcoll_algo_name(c.algo), what, c.plain ? " (plain on rank 1)" : "", changed);
      wrong++;
    }
  }
  *bad = wrong;
  cudaFree(plain_a);
  cudaFree(plain_b);
  cudaStreamDestroy(s);
}

static void test_placement_mismatch_gpu(void **state) {
  (void)state;
  const placement_case cases[] = {
      {SYMCOLL_COLL_ALL_REDUCE, SYMCOLL_ALGO_TWO_SHOT, false, false},
      {SYMCOLL_COLL_ALL_REDUCE, SYMCOLL_ALGO_TWO_SHOT, false, true},
      {SYMCOLL_COLL_ALL_REDUCE, SYMCOLL_ALGO_TWO_SHOT, true, false},
      {SYMCOLL_COLL_ALL_REDUCE, SYMCOLL_ALGO_ONE_SHOT, true, false},
      {SYMCOLL_COLL_ALL_GATHER, SYMCOLL_ALGO_PUSH, false, false},
      {SYMCOLL_COLL_ALL_GATHER, SYMCOLL_ALGO_PUSH, false, true},
      {SYMCOLL_COLL_ALL_GATHER, SYMCOLL_ALGO_PULL, true, false},
      {SYMCOLL_COLL_ALL_TO_ALL, SYMCOLL_ALGO_PUSH, false, false},
      {SYMCOLL_COLL_ALL_TO_ALL, SYMCOLL_ALGO_PULL, true, true},
  };
  setenv("SYMCOLL_TIMEOUT_MS", "3000", 1);
  for (const placement_case &c : cases) run_pair([&](symcoll_comm_t comm, int *bad) { placement_rank(comm, c, bad); });
  unsetenv("SYMCOLL_TIMEOUT_MS");
}

/* all_reduce_rmsnorm's LAMPORT with ranks in calls of other shapes, so the signatures differ:
 * `wide` 0: one row of 1024 bf16 on rank 0, two on rank 1 (rank 1's second block waits for a row
 * that never comes); 1: one row of 1024 on rank 0, of 2048 on rank 1 (half of rank 1's one
 * block waits for packs that never come). The headers are checked after a block's first row,
 * by the threads whose packs came (or inside a wait, LamportPart's HEADERS); the MISMATCH they
 * raise must release the waiting threads at once, not after the timeout. Both ranks MISMATCH
 * well within the 3 s timeout, and nothing is written. */
static void norm_lamport_shape_rank(symcoll_comm_t comm, int wide, int *bad) {
  cudaSetDevice(symcoll_comm_device(comm));
  const int rank = symcoll_comm_rank(comm);
  const size_t hidden = rank == 1 && wide ? 2048 : 1024, rows = rank == 1 && !wide ? 2 : 1;
  const size_t bytes = 2048 * sizeof(__nv_bfloat16);
  char *x, *w, *out;
  cudaStream_t s;
  *bad = 1;
  if (cudaMalloc(&x, bytes) != cudaSuccess || cudaMalloc(&w, bytes) != cudaSuccess ||
      cudaMalloc(&out, bytes) != cudaSuccess)
    return;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaMemsetAsync(x, 0x3c, bytes, s);
  cudaMemsetAsync(w, 0x3c, bytes, s);
  cudaMemsetAsync(out, TH_POISON, bytes, s);
  cudaStreamSynchronize(s);
  if (symcoll_comm_barrier(comm) != SYMCOLL_OK) return;
  symcoll_norm_opts_t o;
  symcoll_norm_opts_init(&o);
  o.algo = SYMCOLL_ALGO_LAMPORT;
  const auto t0 = std::chrono::steady_clock::now();
  int wrong = symcoll_all_reduce_rmsnorm(comm, x, nullptr, w, 1e-6f, out, nullptr, rows, hidden, SYMCOLL_BFLOAT16, &o,
                                         s) != SYMCOLL_OK;
  cudaStreamSynchronize(s);
  const symcoll_status_t st = symcoll_comm_check(comm);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (st != SYMCOLL_ERR_MISMATCH || secs > 1.5) {
    fprintf(stderr,
            "rank %d, all_reduce_rmsnorm lamport, %zu x %zu against another shape: comm_check says %s after %.2f s\n",
            rank, rows, hidden, symcoll_status_string(st), secs);
    wrong++;
  }
  std::vector<unsigned char> h(bytes);
  cudaMemcpy(h.data(), out, bytes, cudaMemcpyDeviceToHost);
  size_t changed = 0;
  for (unsigned char b : h) changed += b != TH_POISON;
  if (changed) {
    fprintf(stderr, "rank %d, all_reduce_rmsnorm lamport: %zu bytes of out written by the refused call\n", rank,
            changed);
    wrong++;
  }
  *bad = wrong;
  cudaFree(x);
  cudaFree(w);
  cudaFree(out);
  cudaStreamDestroy(s);
}

static void test_norm_lamport_mismatch_gpu(void **state) {
  (void)state;
  setenv("SYMCOLL_TIMEOUT_MS", "3000", 1);
  for (int wide = 0; wide < 2; wide++)
    run_pair([&](symcoll_comm_t comm, int *bad) { norm_lamport_shape_rank(comm, wide, bad); });
  unsetenv("SYMCOLL_TIMEOUT_MS");
}

/* LAMPORT's sentinel rule, on the vector path (first 24 elements) and the tail: an fp16/bf16
 * -0.0 arrives as +0.0, an fp32 word 0x80008000 as -0.0; everything else as it is. */
static void sentinel_rank(symcoll_comm_t comm, int *bad) {
  cudaSetDevice(symcoll_comm_device(comm));
  const int rank = symcoll_comm_rank(comm);
  const size_t count = 27;
  /* element i % 3: {both -0.0 | rank 0 -0.0, rank 1 1.0 | both -1.0} */
  const uint16_t in16[3][2] = {{0x8000, 0x8000}, {0x8000, 0x3f80}, {0xbf80, 0xbf80}};
  const uint16_t want16[3] = {0x0000, 0x3f80, 0xc000};
  /* {both 0x80008000 | both -0.0 | rank 0 -4.6e-41, rank 1 1.0} */
  const uint32_t in32[3][2] = {{0x80008000u, 0x80008000u}, {0x80000000u, 0x80000000u}, {0x80008000u, 0x3f800000u}};
  const uint32_t want32[3] = {0x80000000u, 0x80000000u, 0x3f800000u};
  uint16_t h16[27];
  uint32_t h32[27];
  for (size_t i = 0; i < count; i++) h16[i] = in16[i % 3][rank], h32[i] = in32[i % 3][rank];
  char *d;
  cudaStream_t s;
  *bad = 1;
  if (cudaMalloc(&d, 4096) != cudaSuccess) return;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  symcoll_coll_opts_t o;
  symcoll_coll_opts_init(&o);
  o.algo = SYMCOLL_ALGO_LAMPORT;
  /* On the collective's stream: a non-blocking stream does not wait for the legacy one. */
  cudaMemcpyAsync(d, h16, sizeof h16, cudaMemcpyHostToDevice, s);
  cudaMemcpyAsync(d + 1024, h32, sizeof h32, cudaMemcpyHostToDevice, s);
  int wrong = symcoll_all_reduce_ex(comm, d, d + 2048, count, SYMCOLL_BFLOAT16, SYMCOLL_SUM, s, &o) != SYMCOLL_OK;
  wrong += symcoll_all_reduce_ex(comm, d + 1024, d + 3072, count, SYMCOLL_FLOAT32, SYMCOLL_SUM, s, &o) != SYMCOLL_OK;
  cudaStreamSynchronize(s);
  cudaMemcpy(h16, d + 2048, sizeof h16, cudaMemcpyDeviceToHost);
  cudaMemcpy(h32, d + 3072, sizeof h32, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < count; i++) {
    if (h16[i] != want16[i % 3] || h32[i] != want32[i % 3]) {
      if (wrong++ < 3)
        fprintf(stderr, "rank %d element %zu: bf16 %#06x (want %#06x), fp32 %#010x (want %#010x)\n", rank, i, h16[i],
                want16[i % 3], h32[i], want32[i % 3]);
    }
  }
  *bad = wrong != 0 || symcoll_comm_check(comm) != SYMCOLL_OK;
  cudaFree(d);
  cudaStreamDestroy(s);
}

static void test_lamport_sentinel(void **state) {
  (void)state;
  run_pair(sentinel_rank);
}

/* One rank, auto: a copy (a kernel where 16-byte aligned and up to 4 MiB, else the copy
 * engine), of any size and alignment, also into pinned host memory; it must give the input
 * back, and nothing past it may change. */
static void test_one_rank_copy(void **state) {
  (void)state;
  symcoll_comm_t one;
  CK(symcoll_comm_create_all(1, devices(1).data(), &one));
  const size_t maxc = (4u << 20) / 4 + 64;
  std::vector<float> h(maxc), back(maxc);
  for (size_t i = 0; i < maxc; i++) h[i] = (float)(i % 1000) - 500.0f;
  char *in, *out, *pinned;
  cudaStream_t s;
  CK(cudaMalloc(&in, maxc * 4));
  CK(cudaMalloc(&out, maxc * 4 + 64));
  CK(cudaMallocHost(&pinned, maxc * 4 + 64));
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaMemcpyAsync(in, h.data(), maxc * 4, cudaMemcpyHostToDevice, s));
  struct {
    size_t count, src_off, dst_off;
    bool to_pinned;
  } cases[] = {
      {1u << 18, 0, 0, false},        /* 1 MiB */
      {(1u << 20) + 4, 0, 16, false}, /* 4 MiB + 16 B */
      {(1u << 20) + 3, 0, 0, false},  /* not whole 16-byte vectors */
      {(1u << 18) + 8, 4, 8, false},  /* misaligned */
      {1u << 19, 0, 0, true},         /* into pinned host memory */
  };
  for (auto &c : cases) {
    char *dst = (c.to_pinned ? pinned : out) + c.dst_off;
    const size_t span = c.count * 4 + 32;
    if (c.to_pinned)
      memset(dst, 0xff, span);
    else
      CK(cudaMemsetAsync(dst, 0xff, span, s));
    assert_int_equal(symcoll_all_reduce(one, in + c.src_off, dst, c.count, SYMCOLL_FLOAT32, SYMCOLL_SUM, s),
                     SYMCOLL_OK);
    CK(cudaStreamSynchronize(s));
    std::vector<char> got(span);
    CK(cudaMemcpy(got.data(), dst, span, cudaMemcpyDefault));
    assert_memory_equal(got.data(), (char *)h.data() + c.src_off, c.count * 4);
    for (size_t i = c.count * 4; i < span; i++) assert_int_equal((unsigned char)got[i], 0xff);
  }
  assert_int_equal(symcoll_comm_check(one), SYMCOLL_OK);
  cudaFree(in);
  cudaFree(out);
  cudaFreeHost(pinned);
  cudaStreamDestroy(s);
  symcoll_comm_destroy(one);
}

/* One rank per GPU (several GPUs): NCCL through the engine, exact inputs, every dtype and op. */
static void nccl_rank(symcoll_comm_t comm, uint32_t seed, int *bad) {
  cudaSetDevice(symcoll_comm_device(comm));
  const int rank = symcoll_comm_rank(comm), n = symcoll_comm_nranks(comm);
  const size_t count = 100003;
  std::vector<char> h(count * 4), want(count * 4);
  char *in, *out;
  cudaStream_t s;
  *bad = 1;
  if (cudaMalloc(&in, count * 4) != cudaSuccess || cudaMalloc(&out, count * 4) != cudaSuccess) return;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  symcoll_coll_opts_t o;
  symcoll_coll_opts_init(&o);
  o.algo = SYMCOLL_ALGO_NCCL;
  int wrong = 0;
  for (int dt = 0; dt < SYMCOLL_NUM_DTYPES; dt++)
    for (int op = 0; op < SYMCOLL_NUM_OPS; op++) {
      const size_t es = symcoll_dtype_size((symcoll_dtype_t)dt);
      exact_fill_op(h.data(), (symcoll_dtype_t)dt, (symcoll_op_t)op, count, rank, seed + dt * 3 + op);
      exact_expect(want.data(), (symcoll_dtype_t)dt, (symcoll_op_t)op, count, n, seed + dt * 3 + op);
      cudaMemcpyAsync(in, h.data(), count * es, cudaMemcpyHostToDevice, s);
      cudaMemsetAsync(out, 0xff, count * es, s);
      wrong += symcoll_all_reduce_ex(comm, in, out, count, (symcoll_dtype_t)dt, (symcoll_op_t)op, s, &o) != SYMCOLL_OK;
      cudaStreamSynchronize(s);
      cudaMemcpy(h.data(), out, count * es, cudaMemcpyDeviceToHost);
      if (memcmp(h.data(), want.data(), count * es) != 0 && wrong++ < 3)
        fprintf(stderr, "rank %d: NCCL engine %s %s: wrong result\n", rank, symcoll_dtype_name((symcoll_dtype_t)dt),
                symcoll_op_name((symcoll_op_t)op));
    }
  *bad = wrong != 0 || symcoll_comm_check(comm) != SYMCOLL_OK;
  cudaFree(in);
  cudaFree(out);
  cudaStreamDestroy(s);
}

/* The NCCL engine: refused to ranks that share a GPU (NCCL takes one rank per GPU); with one
 * rank per GPU, SYMCOLL_ALGO_NCCL runs through it, from a stream and from a graph replay, and
 * on a machine of several GPUs across them. */
static void test_nccl_engine(void **state) {
  (void)state;
  setenv("SYMCOLL_NCCL", "1", 1);
  if (ngpu == 1) {
    symcoll_comm_t two[2];
    CK(symcoll_comm_create_all(2, devices(2).data(), two));
    assert_int_equal(symcoll_algo_supported(two[0], SYMCOLL_ALGO_NCCL), SYMCOLL_ERR_UNSUPPORTED);
    for (int r = 0; r < 2; r++) symcoll_comm_destroy(two[r]);
  }
  symcoll_comm_t one;
  CK(symcoll_comm_create_all(1, devices(1).data(), &one));
  unsetenv("SYMCOLL_NCCL");
  if (symcoll_algo_supported(one, SYMCOLL_ALGO_NCCL) != SYMCOLL_OK) {
    symcoll_comm_destroy(one);
    skip(); /* libnccl.so.2 cannot be loaded here (SYMCOLL_NCCL_LIB names it) */
  }
  const size_t count = 4099;
  std::vector<float> h(count), back(count);
  for (size_t i = 0; i < count; i++) h[i] = (float)i - 2000.0f;
  float *in, *out;
  cudaStream_t s;
  CK(cudaMalloc(&in, count * 4));
  CK(cudaMalloc(&out, count * 4));
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaMemcpyAsync(in, h.data(), count * 4, cudaMemcpyHostToDevice, s));
  symcoll_coll_opts_t o;
  symcoll_coll_opts_init(&o);
  o.algo = SYMCOLL_ALGO_NCCL;
  for (int graph = 0; graph < 2; graph++) {
    CK(cudaMemsetAsync(out, 0xff, count * 4, s));
    if (graph) {
      cudaGraph_t g;
      cudaGraphExec_t e;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      assert_int_equal(symcoll_all_reduce_ex(one, in, out, count, SYMCOLL_FLOAT32, SYMCOLL_MAX, s, &o), SYMCOLL_OK);
      CK(cudaStreamEndCapture(s, &g));
      CK(cudaGraphInstantiate(&e, g, 0));
      CK(cudaGraphLaunch(e, s));
      CK(cudaStreamSynchronize(s));
      cudaGraphExecDestroy(e);
      cudaGraphDestroy(g);
    } else {
      assert_int_equal(symcoll_all_reduce_ex(one, in, out, count, SYMCOLL_FLOAT32, SYMCOLL_SUM, s, &o), SYMCOLL_OK);
      CK(cudaStreamSynchronize(s));
    }
    CK(cudaMemcpy(back.data(), out, count * 4, cudaMemcpyDeviceToHost));
    assert_memory_equal(back.data(), h.data(), count * 4);
  }
  assert_int_equal(symcoll_comm_check(one), SYMCOLL_OK);
  cudaFree(in);
  cudaFree(out);
  cudaStreamDestroy(s);
  symcoll_comm_destroy(one);
  if (ngpu >= 2) {
    const int n = ngpu;
    std::vector<symcoll_comm_t> comms(n);
    setenv("SYMCOLL_NCCL", "1", 1);
    CK(symcoll_comm_create_all(n, devices(n).data(), comms.data()));
    unsetenv("SYMCOLL_NCCL");
    assert_int_equal(symcoll_algo_supported(comms[0], SYMCOLL_ALGO_NCCL), SYMCOLL_OK);
    run_team(comms, nccl_rank);
  }
}

/* Two ranks of which only rank 0 will call: its device, a buffer of 4096 floats, a stream. */
struct lone_rank_t {
  symcoll_comm_t comms[2];
  float *buf;
  cudaStream_t s;
};
static void lone_rank_open(lone_rank_t *L) {
  CK(symcoll_comm_create_all(2, devices(2).data(), L->comms));
  cudaSetDevice(symcoll_comm_device(L->comms[0]));
  CK(cudaMalloc(&L->buf, 4096 * sizeof(float)));
  CK(cudaStreamCreateWithFlags(&L->s, cudaStreamNonBlocking));
}
static void lone_rank_close(lone_rank_t *L) {
  cudaFree(L->buf);
  cudaStreamDestroy(L->s);
  for (int r = 0; r < 2; r++) symcoll_comm_destroy(L->comms[r]);
}

static void test_peer_never_launches(void **state) {
  (void)state;
  /* The barrier protocols wait at a barrier; LAMPORT polls its buffer for the peer's data. */
  for (symcoll_algo_t algo : {SYMCOLL_ALGO_AUTO, SYMCOLL_ALGO_LAMPORT}) {
    setenv("SYMCOLL_TIMEOUT_MS", "500", 1);
    lone_rank_t L;
    lone_rank_open(&L);
    unsetenv("SYMCOLL_TIMEOUT_MS");
    symcoll_comm_t *comms = L.comms;
    float *buf = L.buf;
    cudaStream_t s = L.s;
    symcoll_coll_opts_t o;
    symcoll_coll_opts_init(&o);
    o.algo = algo;
    double t0 = th_now();
    assert_int_equal(symcoll_all_reduce_ex(comms[0], buf, buf, 4096, SYMCOLL_FLOAT32, SYMCOLL_SUM, s, &o), SYMCOLL_OK);
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess); /* returns: the kernel gave up */
    double took = th_now() - t0;
    print_message("%s: kernel gave up after %.3f s\n", symcoll_algo_name(algo), took);
    assert_true(took >= 0.45 && took < 1.5);
    assert_int_equal(symcoll_comm_check(comms[0]), SYMCOLL_ERR_TIMEOUT);
    assert_int_equal(symcoll_comm_check(comms[1]), SYMCOLL_OK);
    /* Later calls on the failed communicator are refused at once. */
    assert_int_equal(symcoll_all_reduce(comms[0], buf, buf, 4096, SYMCOLL_FLOAT32, SYMCOLL_SUM, s),
                     SYMCOLL_ERR_TIMEOUT);
    lone_rank_close(&L);
  }
}

/* symcoll_comm_abort from another thread makes a kernel waiting for a peer give up at once. */
static void test_abort_gpu(void **state) {
  (void)state;
  lone_rank_t L;
  lone_rank_open(&L);
  symcoll_comm_t *comms = L.comms;
  float *buf = L.buf;
  cudaStream_t s = L.s;
  assert_int_equal(symcoll_all_reduce(comms[0], buf, buf, 4096, SYMCOLL_FLOAT32, SYMCOLL_SUM, s), SYMCOLL_OK);
  std::thread aborter([&] {
    usleep(200000);
    symcoll_comm_abort(comms[0]);
  });
  double t0 = th_now();
  assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
  double took = th_now() - t0;
  aborter.join();
  print_message("kernel gave up %.1f ms after the start, 200 ms after which the abort came\n", took * 1e3);
  assert_true(took >= 0.15 && took < 0.3 + 0.1); /* it waited, and gave up once aborted */
  assert_int_equal(symcoll_comm_check(comms[0]), SYMCOLL_ERR_ABORTED);
  lone_rank_close(&L);
}

/* More ranks than one CUDA communicator supports: a specific error, no half-made communicator. */
static void test_too_many_ranks(void **state) {
  (void)state;
  symcoll_comm_t comms[17];
  assert_int_equal(symcoll_comm_create_all(17, devices(17).data(), comms), SYMCOLL_ERR_UNSUPPORTED);
}

int main() {
  th_cuda_env();
  const char *why = nullptr;
  if (!th_cuda_ops(&why)) {
    printf("SKIPPED: GPU test, %s\n", why);
    return TH_SKIP;
  }
  ngpu = th_cuda_device_count();
  for (int d = 0; d < ngpu; d++) { /* load the test's kernel before ranks spin (see the header) */
    cudaSetDevice(d);
    cudaFuncAttributes attr;
    cudaFuncGetAttributes(&attr, many_barriers);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pads_at_rest),
      cmocka_unit_test(test_graph_replay),
      cmocka_unit_test(test_graph_matmul),
      cmocka_unit_test(test_graph_norm),
      cmocka_unit_test(test_mismatch_gpu),
      cmocka_unit_test(test_shape_mismatch_gpu),
      cmocka_unit_test(test_placement_mismatch_gpu),
      cmocka_unit_test(test_norm_lamport_mismatch_gpu),
      cmocka_unit_test(test_lamport_sentinel),
      cmocka_unit_test(test_nccl_engine),
      cmocka_unit_test(test_one_rank_copy),
      cmocka_unit_test(test_peer_never_launches),
      cmocka_unit_test(test_abort_gpu),
      cmocka_unit_test(test_too_many_ranks),
  };
  return cmocka_run_group_tests_name("device_api", tests, NULL, NULL);
}
