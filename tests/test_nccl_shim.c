/* libsymcoll_nccl (src/nccl_shim): the pure parts (the serve-or-forward decision, the dtype / op /
 * status maps, ncclConfig_t checks, the ncclUniqueId encoding), compiled in, in every build;
 * where the shim was built (SHIM_LIB: its path; SYMCOLL_NCCL_SHIM_LIB overrides it), the library as programs see it
 * (dlopen, its exported names, version, ids, errors); and where a GPU is here, two processes running NCCL's collectives
 * through it, checked element by element (skipped without one). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../src/nccl_shim/shim.h"

/* ---- the dtype and op maps ---------------------------------------------------------------- */

static void test_dtype_map(void **state) {
  (void)state;
  static const struct {
    int nccl, sym;
  } t[] = {{ncclInt8, SYMCOLL_INT8},
           {ncclUint8, SYMCOLL_UINT8},
           {ncclInt32, SYMCOLL_INT32},
           {ncclUint32, SYMCOLL_UINT32},
           {ncclInt64, SYMCOLL_INT64},
           {ncclUint64, SYMCOLL_UINT64},
           {ncclFloat16, SYMCOLL_FLOAT16},
           {ncclFloat32, SYMCOLL_FLOAT32},
           {ncclFloat64, SYMCOLL_FLOAT64},
           {ncclBfloat16, SYMCOLL_BFLOAT16},
           {ncclFloat8e4m3, SYMCOLL_FLOAT8_E4M3},
           {ncclFloat8e5m2, SYMCOLL_FLOAT8_E5M2}};
  assert_int_equal(sizeof t / sizeof t[0], ncclNumTypes); /* every NCCL dtype has a symcoll one */
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) assert_int_equal(shim_dtype(t[i].nccl), t[i].sym);
  assert_int_equal(shim_dtype(ncclNumTypes), -1);
  assert_int_equal(shim_dtype(-1), -1);
}

static void test_op_map(void **state) {
  (void)state;
  assert_int_equal(shim_op(ncclSum), SYMCOLL_SUM);
  assert_int_equal(shim_op(ncclProd), SYMCOLL_PROD);
  assert_int_equal(shim_op(ncclMax), SYMCOLL_MAX);
  assert_int_equal(shim_op(ncclMin), SYMCOLL_MIN);
  assert_int_equal(shim_op(ncclAvg), SYMCOLL_AVG);
  assert_int_equal(shim_op(ncclNumOps), -1);     /* the first PreMulSum op */
  assert_int_equal(shim_op(ncclNumOps + 7), -1); /* another */
  assert_int_equal(shim_op(-1), -1);
}

static void test_call_maps(void **state) {
  (void)state;
  assert_int_equal(shim_call_coll(SHIM_ALL_REDUCE), SYMCOLL_COLL_ALL_REDUCE);
  assert_int_equal(shim_call_coll(SHIM_ALL_GATHER), SYMCOLL_COLL_ALL_GATHER);
  assert_int_equal(shim_call_coll(SHIM_REDUCE_SCATTER), SYMCOLL_COLL_REDUCE_SCATTER);
  assert_int_equal(shim_call_coll(SHIM_BROADCAST), SYMCOLL_COLL_BROADCAST);
  assert_int_equal(shim_call_coll(SHIM_REDUCE), SYMCOLL_COLL_REDUCE);
  assert_int_equal(shim_call_coll(SHIM_ALL_TO_ALL), SYMCOLL_COLL_ALL_TO_ALL);
  for (int c = SHIM_SEND; c < SHIM_NUM_CALLS; c++) assert_int_equal(shim_call_coll((shim_call_t)c), -1);
  for (int c = 0; c < SHIM_NUM_CALLS; c++) assert_string_not_equal(shim_call_name((shim_call_t)c), "unknown");
  assert_string_equal(shim_call_name(SHIM_NUM_CALLS), "unknown");
  assert_true(shim_call_reduces(SHIM_ALL_REDUCE) && shim_call_reduces(SHIM_REDUCE_SCATTER) &&
              shim_call_reduces(SHIM_REDUCE));
  assert_false(shim_call_reduces(SHIM_ALL_GATHER) || shim_call_reduces(SHIM_BROADCAST) ||
               shim_call_reduces(SHIM_ALL_TO_ALL) || shim_call_reduces(SHIM_SEND));
}

/* ---- SYMCOLL_NCCL_SHIM / SYMCOLL_NCCL_SHIM_MAX_BYTES ------------------------------------- */

static void test_policy_parse(void **state) {
  (void)state;
  shim_policy_t p;
  const char *bad;
  assert_int_equal(shim_policy_parse(NULL, NULL, &p, &bad), 0);
  assert_int_equal(p.mode, SHIM_MODE_AUTO);
  assert_int_equal(p.max_bytes, 0);
  assert_null(bad);
  assert_int_equal(shim_policy_parse("serve", "", &p, &bad), 0);
  assert_int_equal(p.mode, SHIM_MODE_SERVE);
  assert_int_equal(shim_policy_parse("FORWARD", "4096", &p, &bad), 0);
  assert_int_equal(p.mode, SHIM_MODE_FORWARD);
  assert_int_equal(p.max_bytes, 4096);
  assert_int_equal(shim_policy_parse("auto", "64K", &p, NULL), 0);
  assert_int_equal(p.max_bytes, 64 << 10);
  assert_int_equal(shim_policy_parse(NULL, "8M", &p, NULL), 0);
  assert_int_equal(p.max_bytes, 8 << 20);
  assert_int_equal(shim_policy_parse(NULL, "2GiB", &p, NULL), 0);
  assert_int_equal(p.max_bytes, 2ull << 30);
  assert_int_equal(shim_policy_parse(NULL, "1mb", &p, NULL), 0);
  assert_int_equal(p.max_bytes, 1 << 20);
  /* Malformed values: refused, named, and the default kept. */
  assert_int_equal(shim_policy_parse("sometimes", NULL, &p, &bad), -1);
  assert_string_equal(bad, "SYMCOLL_NCCL_SHIM");
  assert_int_equal(p.mode, SHIM_MODE_AUTO);
  const char *bad_sizes[] = {"12X", "-1", "K", "1Kx", "99999999999999999999", "1.5M"};
  for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
    assert_int_equal(shim_policy_parse("serve", bad_sizes[i], &p, &bad), -1);
    assert_string_equal(bad, "SYMCOLL_NCCL_SHIM_MAX_BYTES");
    assert_int_equal(p.max_bytes, 0);
    assert_int_equal(p.mode, SHIM_MODE_SERVE); /* the good one still counts */
  }
}

/* ---- the decision -------------------------------------------------------------------------- */

static void test_decide(void **state) {
  (void)state;
  shim_policy_t autop = {SHIM_MODE_AUTO, 0}, serve = {SHIM_MODE_SERVE, 0}, fwd = {SHIM_MODE_FORWARD, 0},
                capped = {SHIM_MODE_AUTO, 1 << 20};
  shim_comm_view_t ok = {true, SYMCOLL_ALGO_LAMPORT, false, false};
  /* The six collectives, every dtype, the five ops: served. */
  for (int c = 0; c <= SHIM_ALL_TO_ALL; c++)
    for (int d = 0; d < ncclNumTypes; d++)
      for (int o = 0; o < ncclNumOps; o++) {
        shim_decision_t r = shim_decide(&autop, (shim_call_t)c, d, o, 4096, &ok);
        assert_true(r.serve);
        assert_non_null(r.why);
      }
  /* Send/Recv, Gather/Scatter: always NCCL, whatever the mode. */
  for (int c = SHIM_SEND; c < SHIM_NUM_CALLS; c++) {
    assert_false(shim_decide(&autop, (shim_call_t)c, ncclFloat32, ncclSum, 16, &ok).serve);
    assert_false(shim_decide(&serve, (shim_call_t)c, ncclFloat32, ncclSum, 16, &ok).serve);
  }
  /* Ops beyond the five: NCCL for reductions, unless the op is a PreMulSum the shim made for
   * this communicator and dtype (served as a sum of scaled inputs); ignored by collectives
   * that do not reduce. */
  assert_false(shim_decide(&serve, SHIM_ALL_REDUCE, ncclFloat32, ncclNumOps, 16, &ok).serve);
  assert_false(shim_decide(&autop, SHIM_REDUCE_SCATTER, ncclBfloat16, ncclNumOps + 3, 16, &ok).serve);
  assert_false(shim_decide(&autop, SHIM_REDUCE, ncclBfloat16, ncclNumOps + 3, 16, &ok).serve);
  assert_true(shim_decide(&autop, SHIM_ALL_GATHER, ncclBfloat16, ncclNumOps + 3, 16, &ok).serve);
  shim_comm_view_t premul = {true, SYMCOLL_ALGO_LAMPORT, false, true};
  assert_true(shim_decide(&autop, SHIM_ALL_REDUCE, ncclFloat32, ncclNumOps, 16, &premul).serve);
  assert_true(shim_decide(&autop, SHIM_REDUCE_SCATTER, ncclBfloat16, ncclNumOps + 3, 16, &premul).serve);
  /* Unknown dtype. */
  assert_false(shim_decide(&serve, SHIM_ALL_GATHER, ncclNumTypes, ncclSum, 16, &ok).serve);
  /* Where the table picks NCCL: forwarded under auto, served under serve. */
  shim_comm_view_t nccl_row = {true, SYMCOLL_ALGO_NCCL, false, false};
  shim_decision_t r = shim_decide(&autop, SHIM_ALL_REDUCE, ncclFloat32, ncclSum, 1 << 28, &nccl_row);
  assert_false(r.serve);
  assert_non_null(strstr(r.why, "NCCL"));
  assert_true(shim_decide(&serve, SHIM_ALL_REDUCE, ncclFloat32, ncclSum, 1 << 28, &nccl_row).serve);
  /* The byte cap: at the cap served, above it forwarded (and serve ignores it). */
  assert_true(shim_decide(&capped, SHIM_ALL_REDUCE, ncclFloat32, ncclSum, 1 << 20, &ok).serve);
  r = shim_decide(&capped, SHIM_ALL_REDUCE, ncclFloat32, ncclSum, (1 << 20) + 1, &ok);
  assert_false(r.serve);
  assert_non_null(strstr(r.why, "SYMCOLL_NCCL_SHIM_MAX_BYTES"));
  /* forward: everything to NCCL. */
  r = shim_decide(&fwd, SHIM_ALL_REDUCE, ncclFloat32, ncclSum, 16, &ok);
  assert_false(r.serve);
  assert_non_null(strstr(r.why, "forward"));
  /* No symcoll communicator, symcoll refusing the collective (coll_algo failed, or an earlier
   * UNSUPPORTED): NCCL, also under serve. */
  shim_comm_view_t none = {false, SYMCOLL_ALGO_LAMPORT, false, false}, no_algo = {true, -1, false, false},
                   refused = {true, SYMCOLL_ALGO_PULL, true, false};
  assert_false(shim_decide(&serve, SHIM_ALL_REDUCE, ncclFloat32, ncclSum, 16, &none).serve);
  assert_false(shim_decide(&serve, SHIM_BROADCAST, ncclFloat32, ncclSum, 16, &no_algo).serve);
  assert_false(shim_decide(&serve, SHIM_ALL_TO_ALL, ncclFloat32, ncclSum, 16, &refused).serve);
  assert_false(shim_decide(&serve, SHIM_ALL_REDUCE, ncclFloat32, ncclSum, 16, NULL).serve);
}

/* ---- statuses, error strings, configs ------------------------------------------------------ */

static void test_status_map(void **state) {
  (void)state;
  assert_int_equal(shim_result(SYMCOLL_OK), ncclSuccess);
  assert_int_equal(shim_result(SYMCOLL_ERR_INVALID_ARGUMENT), ncclInvalidArgument);
  assert_int_equal(shim_result(SYMCOLL_ERR_UNSUPPORTED), ncclInvalidUsage);
  assert_int_equal(shim_result(SYMCOLL_ERR_SYSTEM), ncclSystemError);
  assert_int_equal(shim_result(SYMCOLL_ERR_CUDA), ncclUnhandledCudaError);
  assert_int_equal(shim_result(SYMCOLL_ERR_NO_MEMORY), ncclSystemError);
  assert_int_equal(shim_result(SYMCOLL_ERR_TIMEOUT), ncclRemoteError);
  assert_int_equal(shim_result(SYMCOLL_ERR_PEER_LOST), ncclRemoteError);
  assert_int_equal(shim_result(SYMCOLL_ERR_ABORTED), ncclInvalidUsage);
  assert_int_equal(shim_result(SYMCOLL_ERR_MISMATCH), ncclInvalidUsage);
  assert_int_equal(shim_result(SYMCOLL_ERR_INTERNAL), ncclInternalError);
  assert_int_equal(shim_result((symcoll_status_t)-99), ncclInternalError);
  assert_string_equal(shim_result_string(ncclSuccess), "no error");
  for (int r = ncclUnhandledCudaError; r <= ncclInProgress; r++) {
    assert_string_not_equal(shim_result_string((ncclResult_t)r), "unknown result code");
    for (int q = ncclSuccess; q < r; q++)
      assert_string_not_equal(shim_result_string((ncclResult_t)r), shim_result_string((ncclResult_t)q));
  }
  assert_string_equal(shim_result_string((ncclResult_t)99), "unknown result code");
}

static void test_config_check(void **state) {
  (void)state;
  int blocking = -1;
  const char *why = NULL;
  assert_int_equal(shim_config_check(NULL, &blocking, &why), ncclSuccess);
  assert_int_equal(blocking, 1);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  assert_int_equal(shim_config_check(&cfg, &blocking, &why), ncclSuccess);
  assert_int_equal(blocking, 1); /* undefined: blocking, as NCCL */
  cfg.blocking = 0;
  cfg.commName = "torch";
  cfg.cgaClusterSize = 4; /* accepted, ignored */
  assert_int_equal(shim_config_check(&cfg, &blocking, &why), ncclSuccess);
  assert_int_equal(blocking, 0);
  cfg.blocking = 1;
  assert_int_equal(shim_config_check(&cfg, &blocking, &why), ncclSuccess);
  assert_int_equal(blocking, 1);
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  assert_int_equal(shim_config_check(&bad, &blocking, &why), ncclInvalidArgument);
  assert_non_null(strstr(why, "magic"));
  bad = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  bad.size = 8;
  assert_int_equal(shim_config_check(&bad, &blocking, &why), ncclInvalidArgument);
  assert_non_null(strstr(why, "size"));
  bad = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  bad.version = NCCL_VERSION(2, 10, 0);
  assert_int_equal(shim_config_check(&bad, &blocking, &why), ncclInvalidArgument);
  bad = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  bad.blocking = 7;
  assert_int_equal(shim_config_check(&bad, &blocking, &why), ncclInvalidArgument);
  /* An older, shorter struct (a program built against NCCL 2.18) is still accepted. */
  ncclConfig_t old = NCCL_CONFIG_INITIALIZER;
  old.size = offsetof(ncclConfig_t, splitShare);
  old.version = NCCL_VERSION(2, 18, 0);
  assert_int_equal(shim_config_check(&old, &blocking, &why), ncclSuccess);
}

/* ---- the unique id ------------------------------------------------------------------------- */

static void test_unique_id(void **state) {
  (void)state;
  char a[SHIM_JOB_ID_MAX], b[SHIM_JOB_ID_MAX], back[SHIM_JOB_ID_MAX];
  shim_job_id_new(a);
  shim_job_id_new(b);
  assert_int_equal(strncmp(a, "nccl-", 5), 0);
  assert_int_equal(strlen(a), 5 + 32);
  assert_string_not_equal(a, b); /* fresh randomness each time */
  ncclUniqueId id;
  assert_int_equal(shim_id_encode(a, &id), 0);
  assert_int_equal(shim_id_decode(&id, back), 0);
  assert_string_equal(back, a);
  /* Passed by value and copied around as bytes, as programs do (torch's store, MPI_Bcast). */
  ncclUniqueId copy;
  memcpy(&copy, &id, sizeof id);
  assert_int_equal(shim_id_decode(&copy, back), 0);
  assert_string_equal(back, a);
  /* Longest job id that fits, and one too long; empty, unprintable. */
  char longest[SHIM_JOB_ID_MAX + 1];
  memset(longest, 'x', sizeof longest - 1);
  longest[sizeof longest - 1] = '\0'; /* 64 chars: one too many */
  assert_int_equal(shim_id_encode(longest, &id), -1);
  longest[sizeof longest - 2] = '\0'; /* 63 */
  assert_int_equal(shim_id_encode(longest, &id), 0);
  assert_int_equal(shim_id_decode(&id, back), 0);
  assert_string_equal(back, longest);
  assert_int_equal(shim_id_encode("", &id), -1);
  assert_int_equal(shim_id_encode(NULL, &id), -1);
  assert_int_equal(shim_id_encode("has space", &id), -1);
  /* Ids the shim did not make: zeros, a real NCCL's (random-looking bytes), a newer version,
   * an unterminated or unprintable job id. */
  ncclUniqueId zero;
  memset(&zero, 0, sizeof zero);
  assert_int_equal(shim_id_decode(&zero, back), -1);
  ncclUniqueId noise;
  for (size_t i = 0; i < sizeof noise.internal; i++) noise.internal[i] = (char)(i * 37 + 11);
  assert_int_equal(shim_id_decode(&noise, back), -1);
  assert_int_equal(shim_id_encode(a, &id), 0);
  ncclUniqueId v2 = id;
  v2.internal[16] = 2;
  assert_int_equal(shim_id_decode(&v2, back), -1);
  ncclUniqueId unterminated = id;
  memset(unterminated.internal + 24, 'y', 64);
  assert_int_equal(shim_id_decode(&unterminated, back), -1);
  ncclUniqueId unprintable = id;
  unprintable.internal[26] = '\n';
  assert_int_equal(shim_id_decode(&unprintable, back), -1);
  ncclUniqueId empty = id;
  empty.internal[24] = '\0';
  assert_int_equal(shim_id_decode(&empty, back), -1);
}

static void test_last_error(void **state) {
  (void)state;
  shim_error("test %d", 42); /* also a WARN line on stderr */
  assert_string_equal(shim_last_error(), "test 42");
}

/* ---- the built library, as programs see it -------------------------------------------------- */

static void *shim_lib(void) {
#ifdef SHIM_LIB
  static void *h;
  const char *path = getenv("SYMCOLL_NCCL_SHIM_LIB") ? getenv("SYMCOLL_NCCL_SHIM_LIB") : SHIM_LIB;
  if (!h) h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
  return h;
#else
  return NULL;
#endif
}

#define SYM(h, name) ((__typeof__(name) *)dlsym(h, #name))

static void test_library(void **state) {
  (void)state;
  void *h = shim_lib();
  if (!h) skip(); /* a build without the shim (no CUDA, or no nccl.h) */
  /* Every function the real NCCL exports (the list the symbol script checks, here too). */
  static const char *const names[] = {"ncclGetVersion",
                                      "ncclGetUniqueId",
                                      "ncclCommInitRank",
                                      "ncclCommInitRankConfig",
                                      "ncclCommInitAll",
                                      "ncclCommSplit",
                                      "ncclCommFinalize",
                                      "ncclCommDestroy",
                                      "ncclCommAbort",
                                      "ncclCommGetAsyncError",
                                      "ncclGetErrorString",
                                      "ncclGetLastError",
                                      "ncclCommCount",
                                      "ncclCommCuDevice",
                                      "ncclCommUserRank",
                                      "ncclAllReduce",
                                      "ncclAllGather",
                                      "ncclReduceScatter",
                                      "ncclBroadcast",
                                      "ncclReduce",
                                      "ncclAlltoAll",
                                      "ncclSend",
                                      "ncclRecv",
                                      "ncclGroupStart",
                                      "ncclGroupEnd",
                                      "ncclMemAlloc",
                                      "ncclMemFree",
                                      "ncclCommRegister",
                                      "ncclCommDeregister",
                                      "ncclCommWindowRegister",
                                      "ncclCommWindowDeregister",
                                      "ncclRedOpCreatePreMulSum",
                                      "ncclRedOpDestroy",
                                      "ncclGather",
                                      "ncclScatter",
                                      "ncclBcast",
                                      "ncclGroupSimulateEnd",
                                      "ncclCommInitRankScalable",
                                      "ncclCommShrink",
                                      "ncclCommRevoke",
                                      "pncclAllReduce",
                                      "pncclGroupEnd"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    void *f = dlsym(h, names[i]);
    if (!f) fprintf(stderr, "missing: %s\n", names[i]);
    assert_non_null(f);
  }
  assert_non_null(dlsym(h, "symcoll_nccl_shim_version"));
  assert_null(dlsym(h, "cudaMalloc")); /* cudart stays inside */
  assert_ptr_equal(dlsym(h, "pncclAllReduce"), dlsym(h, "ncclAllReduce"));
  int v = 0;
  assert_int_equal(SYM(h, ncclGetVersion)(&v), ncclSuccess);
  assert_true(v >= NCCL_VERSION(2, 27, 0));
  ncclUniqueId id, id2;
  char job[SHIM_JOB_ID_MAX];
  assert_int_equal(SYM(h, ncclGetUniqueId)(&id), ncclSuccess);
  assert_int_equal(SYM(h, ncclGetUniqueId)(&id2), ncclSuccess);
  assert_int_equal(shim_id_decode(&id, job), 0);
  assert_int_not_equal(memcmp(&id, &id2, sizeof id), 0);
  assert_string_equal(SYM(h, ncclGetErrorString)(ncclRemoteError), shim_result_string(ncclRemoteError));
  /* Bad arguments: NCCL's statuses, nothing created. */
  ncclComm_t comm = NULL;
  ncclUniqueId zero;
  memset(&zero, 0, sizeof zero);
  assert_int_equal(SYM(h, ncclCommInitRank)(&comm, 2, zero, 0), ncclInvalidArgument);
  assert_non_null(strstr(SYM(h, ncclGetLastError)(NULL), "ncclGetUniqueId"));
  assert_int_equal(SYM(h, ncclCommInitRank)(&comm, 2, id, 2), ncclInvalidArgument);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 1;
  assert_int_equal(SYM(h, ncclCommInitRankConfig)(&comm, 1, id, 0, &cfg), ncclInvalidArgument);
  assert_null(comm);
  assert_int_equal(SYM(h, ncclGroupEnd)(), ncclInvalidUsage); /* no group open */
  assert_int_equal(SYM(h, ncclGroupStart)(), ncclSuccess);
  assert_int_equal(SYM(h, ncclGroupStart)(), ncclSuccess);
  assert_int_equal(SYM(h, ncclGroupEnd)(), ncclSuccess);
  assert_int_equal(SYM(h, ncclGroupEnd)(), ncclSuccess);
  assert_int_equal(SYM(h, ncclCommDestroy)(NULL), ncclSuccess);
}

/* ---- on a GPU: two ranks, every served collective, checked --------------------------------- */

#ifdef SYMCOLL_HAVE_CUDA
#include <cuda_runtime.h>

static int gpu_rank(void *h, ncclUniqueId id, int rank, int nranks, int ndev) {
#define CK(x)                                                                                     \
  do {                                                                                            \
    ncclResult_t r_ = (x);                                                                        \
    if (r_ != ncclSuccess) {                                                                      \
      fprintf(stderr, "rank %d: %s: %d %s\n", rank, #x, (int)r_, SYM(h, ncclGetLastError)(NULL)); \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)
  if (cudaSetDevice(rank % ndev) != cudaSuccess) return 1;
  ncclComm_t comm;
  CK(SYM(h, ncclCommInitRank)(&comm, nranks, id, rank));
  int n = 0, me = -1;
  CK(SYM(h, ncclCommCount)(comm, &n));
  CK(SYM(h, ncclCommUserRank)(comm, &me));
  if (n != nranks || me != rank) return 1;
  const size_t count = 4096;
  float *send, *recv, host[4096 * 4];
  cudaStream_t st;
  if (cudaMalloc((void **)&send, count * nranks * sizeof(float)) != cudaSuccess ||
      cudaMalloc((void **)&recv, count * nranks * sizeof(float)) != cudaSuccess || cudaStreamCreate(&st) != cudaSuccess)
    return 1;
  for (size_t i = 0; i < count * nranks; i++) host[i] = (float)(rank + 1) + (float)(i % 7);
  cudaMemcpy(send, host, count * nranks * sizeof(float), cudaMemcpyHostToDevice);
  int bad = 0, bad_at[4] = {0, 0, 0, 0};
  /* all_reduce sum: sum over r of (r + 1 + i % 7) */
  CK(SYM(h, ncclAllReduce)(send, recv, count, ncclFloat32, ncclSum, comm, st));
  cudaStreamSynchronize(st);
  cudaMemcpy(host, recv, count * sizeof(float), cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < count; i++)
    bad += host[i] != (float)(nranks * (nranks + 1) / 2) + (float)(nranks * (int)(i % 7));
  bad_at[0] = bad;
  /* all_gather: block r = r + 1 + i % 7 */
  CK(SYM(h, ncclAllGather)(send, recv, count, ncclFloat32, comm, st));
  cudaStreamSynchronize(st);
  cudaMemcpy(host, recv, count * nranks * sizeof(float), cudaMemcpyDeviceToHost);
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < count; i++) bad += host[r * count + i] != (float)(r + 1) + (float)(i % 7);
  bad_at[1] = bad - bad_at[0];
  /* reduce_scatter max */
  CK(SYM(h, ncclReduceScatter)(send, recv, count, ncclFloat32, ncclMax, comm, st));
  cudaStreamSynchronize(st);
  cudaMemcpy(host, recv, count * sizeof(float), cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < count; i++) bad += host[i] != (float)nranks + (float)((rank * count + i) % 7);
  bad_at[2] = bad - bad_at[0] - bad_at[1];
  /* in a group, twice, then the async error */
  CK(SYM(h, ncclGroupStart)());
  CK(SYM(h, ncclAllReduce)(send, recv, count, ncclFloat32, ncclAvg, comm, st));
  CK(SYM(h, ncclAllReduce)(recv, recv, count, ncclFloat32, ncclSum, comm, st));
  CK(SYM(h, ncclGroupEnd)());
  cudaStreamSynchronize(st);
  cudaMemcpy(host, recv, count * sizeof(float), cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < count; i++) bad += host[i] != (float)nranks * ((float)(nranks + 1) / 2.0f + (float)(i % 7));
  bad_at[3] = bad - bad_at[0] - bad_at[1] - bad_at[2];
  if (bad_at[3])
    fprintf(stderr, "rank %d: group avg+sum: got %g, want %g\n", rank, host[1],
            (double)nranks * ((nranks + 1) / 2.0 + 1));
  ncclResult_t async = ncclInternalError;
  CK(SYM(h, ncclCommGetAsyncError)(comm, &async));
  if (async != ncclSuccess) bad++;
  /* broadcast / reduce / all_to_all: symcoll's, or forwarded where symcoll does not run them
   * yet: they must then work (own GPUs) or fail naming the shared GPU. */
  ncclResult_t rb = SYM(h, ncclBroadcast)(send, recv, count, ncclFloat32, 1 % nranks, comm, st);
  if (rb == ncclSuccess) {
    cudaStreamSynchronize(st);
    cudaMemcpy(host, recv, count * sizeof(float), cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < count; i++) bad += host[i] != (float)(1 % nranks + 1) + (float)(i % 7);
  } else if (!strstr(SYM(h, ncclGetLastError)(NULL), "share GPU")) {
    fprintf(stderr, "rank %d: broadcast: %s\n", rank, SYM(h, ncclGetLastError)(NULL));
    bad++;
  }
  /* Windows over ncclMemAlloc's memory, registered inside a group (as nccl-tests' -R 2 does):
   * symcoll maps them for every peer and serves calls on them zero-copy; the same results. */
  float *wsend, *wrecv;
  ncclWindow_t wins[2];
  const size_t wbytes = count * nranks * sizeof(float);
  CK(SYM(h, ncclMemAlloc)((void **)&wsend, wbytes));
  CK(SYM(h, ncclMemAlloc)((void **)&wrecv, wbytes));
  for (size_t i = 0; i < count * nranks; i++) host[i] = (float)(rank + 1) + (float)(i % 7);
  cudaMemcpy(wsend, host, wbytes, cudaMemcpyHostToDevice);
  CK(SYM(h, ncclGroupStart)());
  CK(SYM(h, ncclCommWindowRegister)(comm, wsend, wbytes, &wins[0], NCCL_WIN_COLL_SYMMETRIC));
  CK(SYM(h, ncclCommWindowRegister)(comm, wrecv, wbytes, &wins[1], NCCL_WIN_COLL_SYMMETRIC));
  CK(SYM(h, ncclGroupEnd)());
  CK(SYM(h, ncclAllReduce)(wsend, wrecv, count, ncclFloat32, ncclSum, comm, st));
  CK(SYM(h, ncclAllGather)(wsend, wrecv, count, ncclFloat32, comm, st));
  cudaStreamSynchronize(st);
  cudaMemcpy(host, wrecv, wbytes, cudaMemcpyDeviceToHost);
  int wbad = 0;
  for (int r = 0; r < nranks; r++)
    for (size_t i = 0; i < count; i++) wbad += host[r * count + i] != (float)(r + 1) + (float)(i % 7);
  CK(SYM(h, ncclAllReduce)(wsend, wrecv, count, ncclFloat32, ncclSum, comm, st));
  cudaStreamSynchronize(st);
  cudaMemcpy(host, wrecv, count * sizeof(float), cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < count; i++)
    wbad += host[i] != (float)(nranks * (nranks + 1) / 2) + (float)(nranks * (int)(i % 7));
  if (wbad) fprintf(stderr, "rank %d: %d wrong elements through windows\n", rank, wbad);
  bad += wbad;
  CK(SYM(h, ncclCommWindowDeregister)(comm, wins[0]));
  CK(SYM(h, ncclCommWindowDeregister)(comm, wins[1]));
  CK(SYM(h, ncclMemFree)(wsend));
  CK(SYM(h, ncclMemFree)(wrecv));
  if (bad)
    fprintf(stderr, "rank %d: %d wrong elements (all_reduce %d, all_gather %d, reduce_scatter %d, group %d)\n", rank,
            bad, bad_at[0], bad_at[1], bad_at[2], bad_at[3]);
  CK(SYM(h, ncclCommFinalize)(comm));
  CK(SYM(h, ncclCommDestroy)(comm));
  return bad != 0;
#undef CK
}

static void test_gpu_two_ranks(void **state) {
  (void)state;
  void *h = shim_lib();
  if (!h) skip();
  /* Ask in a child: the parent must not start CUDA before it forks the ranks. */
  pid_t probe = fork();
  if (probe == 0) {
    int n = 0;
    _exit(cudaGetDeviceCount(&n) == cudaSuccess && n > 0 ? n : 0);
  }
  int st = 0;
  waitpid(probe, &st, 0);
  const int ndev = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
  if (ndev == 0) skip();
  ncclUniqueId id;
  assert_int_equal(SYM(h, ncclGetUniqueId)(&id), ncclSuccess);
  const int nranks = 2;
  pid_t kids[2];
  for (int r = 0; r < nranks; r++)
    if ((kids[r] = fork()) == 0) _exit(gpu_rank(h, id, r, nranks, ndev));
  for (int r = 0; r < nranks; r++) {
    waitpid(kids[r], &st, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
  }
}

/* ncclCommInitAll's thread mode, one thread driving both ranks inside groups (as nccl-tests
 * -g 2 does); both on GPU 0 where it is the only one (NCCL refuses that; symcoll serves it, and
 * a forwarded Send/Recv says why it cannot run). */
/* A GPU case run in a child: passes (0), skips (77: no GPU, no real NCCL) or fails. */
static void expect_child(pid_t kid) {
  int st = 0;
  waitpid(kid, &st, 0);
  assert_true(WIFEXITED(st));
  if (WEXITSTATUS(st) == 77) skip();
  assert_int_equal(WEXITSTATUS(st), 0);
}

/* Both ranks' all_reduce (op ops[r]) of buf[r] into buf[r] + count, issued by this one thread in
 * one group; the elements of either rank's result that are not want x (i % 5), or -1 where a
 * call failed. */
static int two_rank_all_reduce(void *h, ncclComm_t *comms, const ncclRedOp_t *ops, float **buf, size_t count,
                               cudaStream_t *st, const int *devs, float *host, float want) {
  if (SYM(h, ncclGroupStart)() != ncclSuccess) return -1;
  for (int r = 0; r < 2; r++)
    if (SYM(h, ncclAllReduce)(buf[r], buf[r] + count, count, ncclFloat32, ops[r], comms[r], st[r]) != ncclSuccess) {
      fprintf(stderr, "all_reduce: %s\n", SYM(h, ncclGetLastError)(NULL));
      return -1;
    }
  if (SYM(h, ncclGroupEnd)() != ncclSuccess) return -1;
  int wrong = 0;
  for (int r = 0; r < 2; r++) {
    cudaSetDevice(devs[r]);
    cudaStreamSynchronize(st[r]);
    cudaMemcpy(host, buf[r] + count, count * sizeof(float), cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < count; i++) wrong += host[i] != want * (float)(i % 5);
  }
  return wrong;
}

static int gpu_init_all(void *h, int ndev) {
  ncclComm_t comms[2];
  const int devs[2] = {0, ndev > 1 ? 1 : 0};
  const size_t count = 1 << 16;
  float *buf[2], *host = malloc(count * 2 * sizeof(float));
  cudaStream_t st[2];
  if (SYM(h, ncclCommInitAll)(comms, 2, devs) != ncclSuccess) {
    fprintf(stderr, "ncclCommInitAll: %s\n", SYM(h, ncclGetLastError)(NULL));
    return 1;
  }
  for (int r = 0; r < 2; r++) {
    cudaSetDevice(devs[r]);
    if (cudaMalloc((void **)&buf[r], count * 2 * sizeof(float)) != cudaSuccess ||
        cudaStreamCreate(&st[r]) != cudaSuccess)
      return 1;
    for (size_t i = 0; i < count; i++) host[i] = (float)(r + 1) * (float)(i % 5);
    cudaMemcpy(buf[r], host, count * sizeof(float), cudaMemcpyHostToDevice);
  }
  int bad = 0;
  const ncclRedOp_t sums[2] = {ncclSum, ncclSum};
  for (int iter = 0; iter < 3; iter++) {
    const int wrong = two_rank_all_reduce(h, comms, sums, buf, count, st, devs, host, 3.0f);
    if (wrong < 0) return 1;
    bad += wrong;
  }
  /* PreMulSum, served: each rank's own scalar (host: 2 and 3), then one in device memory (0.5),
   * the op made and destroyed around each call, as PyTorch does. */
  for (int device_scalar = 0; device_scalar < 2; device_scalar++) {
    ncclRedOp_t ops[2];
    float *dscalar[2] = {NULL, NULL};
    const float hscalar[2] = {2.0f, 3.0f}, half = 0.5f;
    for (int r = 0; r < 2; r++) {
      cudaSetDevice(devs[r]);
      if (device_scalar && (cudaMalloc((void **)&dscalar[r], sizeof(float)) != cudaSuccess ||
                            cudaMemcpy(dscalar[r], &half, sizeof half, cudaMemcpyHostToDevice) != cudaSuccess))
        return 1;
      if (SYM(h, ncclRedOpCreatePreMulSum)(&ops[r], device_scalar ? (void *)dscalar[r] : (void *)&hscalar[r],
                                           ncclFloat32, device_scalar ? ncclScalarDevice : ncclScalarHostImmediate,
                                           comms[r]) != ncclSuccess)
        return 1;
    }
    const float want = device_scalar ? 1.5f : 8.0f; /* 0.5 x 1 + 0.5 x 2, or 2 x 1 + 3 x 2 */
    const int wrong = two_rank_all_reduce(h, comms, ops, buf, count, st, devs, host, want);
    if (wrong < 0) return 1;
    if (wrong) fprintf(stderr, "PreMulSum (%s scalar): %d wrong\n", device_scalar ? "device" : "host", wrong);
    bad += wrong;
    for (int r = 0; r < 2; r++) {
      if (SYM(h, ncclRedOpDestroy)(ops[r], comms[r]) != ncclSuccess) bad++;
      if (dscalar[r]) cudaFree(dscalar[r]);
    }
  }
  /* ncclCommSplit of both ranks from this one thread, inside a group: made at its end. Two
   * splits of each parent in the group, paired in the order they were made: keys reverse the
   * ranks in the first; each rank is alone in its color in the second. Then one rank of no
   * color and one alone in its color. */
  ncclComm_t sub[2] = {NULL, NULL}, alone[2] = {NULL, NULL}, solo[2] = {NULL, NULL};
  if (SYM(h, ncclGroupStart)() != ncclSuccess) return 1;
  for (int r = 0; r < 2; r++)
    if (SYM(h, ncclCommSplit)(comms[r], 7, 1 - r, &sub[r], NULL) != ncclSuccess ||
        SYM(h, ncclCommSplit)(comms[r], r, 0, &alone[r], NULL) != ncclSuccess)
      return 1;
  if (SYM(h, ncclGroupEnd)() != ncclSuccess) {
    fprintf(stderr, "split in a group: %s\n", SYM(h, ncclGetLastError)(NULL));
    return 1;
  }
  for (int r = 0; r < 2; r++) {
    int rank = -1, count = -1, alone_count = -1;
    SYM(h, ncclCommUserRank)(sub[r], &rank);
    SYM(h, ncclCommCount)(sub[r], &count);
    SYM(h, ncclCommCount)(alone[r], &alone_count);
    if (rank != 1 - r || count != 2 || alone_count != 1) {
      fprintf(stderr, "split rank %d: rank %d of %d, not %d of 2; then %d rank(s), not 1\n", r, rank, count, 1 - r,
              alone_count);
      bad++;
    }
  }
  const int wrong = two_rank_all_reduce(h, sub, sums, buf, count, st, devs, host, 3.0f);
  if (wrong < 0) return 1;
  bad += wrong;
  SYM(h, ncclGroupStart)();
  SYM(h, ncclCommSplit)(comms[0], NCCL_SPLIT_NOCOLOR, 0, &solo[0], NULL);
  SYM(h, ncclCommSplit)(comms[1], 3, 0, &solo[1], NULL);
  if (SYM(h, ncclGroupEnd)() != ncclSuccess) return 1;
  int solo_count = -1;
  if (solo[1]) SYM(h, ncclCommCount)(solo[1], &solo_count);
  if (solo[0] != NULL || solo_count != 1) {
    fprintf(stderr, "split with no color: %p, the other rank's count %d (want NULL and 1)\n", (void *)solo[0],
            solo_count);
    bad++;
  }
  /* A non-blocking split (one thread, both ranks): ncclInProgress, then ready. */
  ncclConfig_t nbcfg = NCCL_CONFIG_INITIALIZER;
  nbcfg.blocking = 0;
  ncclComm_t nb[2] = {NULL, NULL};
  for (int r = 0; r < 2; r++) {
    const ncclResult_t s = SYM(h, ncclCommSplit)(comms[r], 9, r, &nb[r], &nbcfg);
    if ((s != ncclInProgress && s != ncclSuccess) || !nb[r]) return 1;
  }
  for (int r = 0; r < 2; r++) {
    ncclResult_t state = ncclInProgress;
    for (int tries = 0; tries < 20000 && state == ncclInProgress; tries++) { /* 20 s at most */
      if (SYM(h, ncclCommGetAsyncError)(nb[r], &state) != ncclSuccess) return 1;
      if (state == ncclInProgress) usleep(1000);
    }
    if (state != ncclSuccess) {
      fprintf(stderr, "non-blocking split rank %d: %d\n", r, (int)state);
      return 1;
    }
  }
  const int nb_wrong = two_rank_all_reduce(h, nb, sums, buf, count, st, devs, host, 3.0f);
  if (nb_wrong < 0) return 1;
  bad += nb_wrong;
  for (int r = 0; r < 2; r++) {
    if (sub[r] && SYM(h, ncclCommDestroy)(sub[r]) != ncclSuccess) bad++;
    if (alone[r] && SYM(h, ncclCommDestroy)(alone[r]) != ncclSuccess) bad++;
    /* not made in a group: their ranks' finalize would wait for each other on this one thread */
    if (nb[r] && SYM(h, ncclCommAbort)(nb[r]) != ncclSuccess) bad++;
  }
  if (solo[1] && SYM(h, ncclCommDestroy)(solo[1]) != ncclSuccess) bad++;
  /* Send/Recv: forwarded; on one shared GPU it must fail naming why, on two it must work. */
  SYM(h, ncclGroupStart)();
  ncclResult_t rs = SYM(h, ncclSend)(buf[0], 16, ncclFloat32, 1, comms[0], st[0]);
  ncclResult_t rr = rs == ncclSuccess ? SYM(h, ncclRecv)(buf[1], 16, ncclFloat32, 0, comms[1], st[1]) : rs;
  ncclResult_t re = SYM(h, ncclGroupEnd)();
  if (devs[0] == devs[1]) {
    if (rs == ncclSuccess || !strstr(SYM(h, ncclGetLastError)(NULL), "share GPU")) {
      fprintf(stderr, "send on a shared GPU: %d, %s\n", (int)rs, SYM(h, ncclGetLastError)(NULL));
      bad++;
    }
  } else if (rs != ncclSuccess || rr != ncclSuccess || re != ncclSuccess) {
    fprintf(stderr, "send/recv: %d %d %d %s\n", (int)rs, (int)rr, (int)re, SYM(h, ncclGetLastError)(NULL));
    bad++;
  }
  for (int r = 0; r < 2; r++) {
    cudaSetDevice(devs[r]);
    cudaStreamSynchronize(st[r]);
    if (SYM(h, ncclCommDestroy)(comms[r]) != ncclSuccess) bad++;
  }
  free(host);
  if (bad) fprintf(stderr, "init_all: %d wrong\n", bad);
  return bad != 0;
}

static void test_gpu_init_all(void **state) {
  (void)state;
  void *h = shim_lib();
  if (!h) skip();
  pid_t kid = fork();
  if (kid == 0) {
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 1); /* two ranks' streams on one GPU */
    setenv("SYMCOLL_NCCL_SHIM", "serve", 1);        /* the collectives are symcoll's, also on two GPUs */
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) _exit(77);
    _exit(gpu_init_all(h, n));
  }
  expect_child(kid);
}
#endif

/* The real NCCL loaded by the program before the shim opens it, after the shim, into the global
 * scope (PyTorch's package does this): the real library's calls to its own exported functions
 * then reach the shim with real communicators. A forwarded send/recv to self at world 1 must
 * still work (it failed with "invalid argument" before the shim handed those back). Runs in a
 * fresh process (--preloaded-real): the shim must not have opened the real library yet. */
static int forward_with_preloaded_real(void) {
#if defined(SYMCOLL_HAVE_CUDA) && defined(SHIM_LIB)
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) return 77;
  const char *real_path = getenv("SYMCOLL_NCCL_REAL_LIB");
#ifdef REAL_NCCL_LIB
  if (!real_path) real_path = REAL_NCCL_LIB;
#endif
  if (!real_path) return 77;
  void *h =
      dlopen(getenv("SYMCOLL_NCCL_SHIM_LIB") ? getenv("SYMCOLL_NCCL_SHIM_LIB") : SHIM_LIB, RTLD_NOW | RTLD_GLOBAL);
  void *real = h ? dlopen(real_path, RTLD_LAZY | RTLD_GLOBAL) : NULL;
  if (!h || !real) {
    fprintf(stderr, "preloaded real: %s\n", dlerror());
    return 77;
  }
  setenv("SYMCOLL_NCCL_REAL_LIB", real_path, 1);
  const size_t n = 4099;
  ncclUniqueId id;
  ncclComm_t c;
  float *a, *b, *host = malloc(n * sizeof(float));
  cudaStream_t st;
  int bad = 0;
  if (SYM(h, ncclGetUniqueId)(&id) != ncclSuccess || SYM(h, ncclCommInitRank)(&c, 1, id, 0) != ncclSuccess ||
      cudaMalloc((void **)&a, n * sizeof(float)) != cudaSuccess ||
      cudaMalloc((void **)&b, n * sizeof(float)) != cudaSuccess || cudaStreamCreate(&st) != cudaSuccess)
    return 1;
  for (size_t i = 0; i < n; i++) host[i] = (float)(i % 7);
  cudaMemcpy(a, host, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemset(b, 0xff, n * sizeof(float));
  SYM(h, ncclGroupStart)();
  ncclResult_t rs = SYM(h, ncclSend)(a, n, ncclFloat32, 0, c, st);
  ncclResult_t rr = SYM(h, ncclRecv)(b, n, ncclFloat32, 0, c, st);
  ncclResult_t re = SYM(h, ncclGroupEnd)();
  void *reg = NULL;
  ncclResult_t rg = SYM(h, ncclCommRegister)(c, a, n * sizeof(float), &reg); /* the real one's now */
  if (rg == ncclSuccess) rg = SYM(h, ncclCommDeregister)(c, reg);
  ncclResult_t async = ncclInternalError;
  ncclResult_t ra = SYM(h, ncclCommGetAsyncError)(c, &async);
  if (rs != ncclSuccess || rr != ncclSuccess || re != ncclSuccess || rg != ncclSuccess || ra != ncclSuccess ||
      async != ncclSuccess) {
    fprintf(stderr, "preloaded real: send %d recv %d group %d register %d async %d/%d: %s\n", (int)rs, (int)rr, (int)re,
            (int)rg, (int)ra, (int)async, SYM(h, ncclGetLastError)(c));
    bad++;
  }
  cudaStreamSynchronize(st);
  cudaMemcpy(host, b, n * sizeof(float), cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < n && !bad; i++)
    if (host[i] != (float)(i % 7)) {
      fprintf(stderr, "preloaded real: element %zu is %g\n", i, (double)host[i]);
      bad++;
    }
  if (SYM(h, ncclCommDestroy)(c) != ncclSuccess) bad++;
  free(host);
  return bad != 0;
#else
  return 77;
#endif
}

#ifdef SYMCOLL_HAVE_CUDA
static void test_gpu_forward_preloaded_real(void **state) {
  (void)state;
  pid_t kid = fork();
  if (kid == 0) {
    execl("/proc/self/exe", "test_nccl_shim", "--preloaded-real", (char *)NULL);
    _exit(77);
  }
  expect_child(kid);
}
#endif

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--preloaded-real")) return forward_with_preloaded_real();

  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dtype_map),
      cmocka_unit_test(test_op_map),
      cmocka_unit_test(test_call_maps),
      cmocka_unit_test(test_policy_parse),
      cmocka_unit_test(test_decide),
      cmocka_unit_test(test_status_map),
      cmocka_unit_test(test_config_check),
      cmocka_unit_test(test_unique_id),
      cmocka_unit_test(test_last_error),
      cmocka_unit_test(test_library),
#ifdef SYMCOLL_HAVE_CUDA
      cmocka_unit_test(test_gpu_two_ranks),
      cmocka_unit_test(test_gpu_init_all),
      cmocka_unit_test(test_gpu_forward_preloaded_real),
#endif
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
