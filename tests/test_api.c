/* API contract: status strings, config validation, bad arguments (specific status, nothing
 * written), environment discovery, rank conflicts at rendezvous, SYMCOLL_CHECK agreement. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "harness.h"

static void test_status_strings(void **state) {
  (void)state;
  symcoll_status_t all[] = {
      SYMCOLL_OK,          SYMCOLL_ERR_INVALID_ARGUMENT, SYMCOLL_ERR_UNSUPPORTED, SYMCOLL_ERR_SYSTEM,
      SYMCOLL_ERR_CUDA,    SYMCOLL_ERR_NO_MEMORY,        SYMCOLL_ERR_TIMEOUT,     SYMCOLL_ERR_PEER_LOST,
      SYMCOLL_ERR_ABORTED, SYMCOLL_ERR_MISMATCH,         SYMCOLL_ERR_INTERNAL};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    const char *s = symcoll_status_string(all[i]);
    assert_non_null(s);
    assert_int_equal(strncmp(s, "SYMCOLL_", 8), 0);
    for (size_t j = 0; j < i; j++) assert_string_not_equal(s, symcoll_status_string(all[j]));
  }
  assert_string_equal(symcoll_status_string(SYMCOLL_ERR_TIMEOUT), "SYMCOLL_ERR_TIMEOUT: timed out waiting for a peer");
  assert_non_null(strstr(symcoll_status_string((symcoll_status_t)-99), "UNKNOWN"));
  assert_non_null(strstr(symcoll_status_string((symcoll_status_t)5), "UNKNOWN"));
  assert_string_equal(symcoll_dtype_name(SYMCOLL_BFLOAT16), "bf16");
  assert_string_equal(symcoll_dtype_name(SYMCOLL_FLOAT8_E4M3), "fp8_e4m3");
  assert_string_equal(symcoll_dtype_name(SYMCOLL_NUM_DTYPES), "unknown");
  assert_int_equal(symcoll_dtype_size(SYMCOLL_FLOAT16), 2);
  assert_int_equal(symcoll_dtype_size(SYMCOLL_INT64), 8);
  assert_int_equal(symcoll_dtype_size(SYMCOLL_UINT8), 1);
  assert_int_equal(symcoll_dtype_size(SYMCOLL_NUM_DTYPES), 0);
  for (int d = 0; d < SYMCOLL_NUM_DTYPES; d++) /* names are distinct */
    for (int e = 0; e < d; e++)
      assert_string_not_equal(symcoll_dtype_name((symcoll_dtype_t)d), symcoll_dtype_name((symcoll_dtype_t)e));
  assert_string_equal(symcoll_coll_name(SYMCOLL_COLL_REDUCE_SCATTER), "reduce_scatter");
  assert_string_equal(symcoll_coll_name(SYMCOLL_COLL_MATMUL_REDUCE_SCATTER), "matmul_reduce_scatter");
  assert_string_equal(symcoll_coll_name(SYMCOLL_NUM_COLL_KINDS), "unknown");
  assert_string_equal(symcoll_algo_name(SYMCOLL_ALGO_OVERLAP), "overlap");
  assert_string_equal(symcoll_algo_name(SYMCOLL_ALGO_COPY_ENGINE), "copy_engine");
  assert_string_equal(symcoll_algo_name(SYMCOLL_ALGO_TWO_SHOT), "twoshot");
  assert_int_equal(symcoll_version(), SYMCOLL_VERSION_CODE);
}

static void expect_create(symcoll_status_t want, void (*edit)(symcoll_config_t *)) {
  symcoll_config_t cfg;
  symcoll_config_init(&cfg);
  cfg.job_id = "api";
  cfg.nranks = 2;
  cfg.rank = 1;
  edit(&cfg);
  symcoll_comm_t comm = (symcoll_comm_t)0x1234;
  assert_int_equal(symcoll_comm_create(&cfg, &comm), want);
  assert_ptr_equal(comm, (symcoll_comm_t)0x1234); /* output untouched on error */
}
static void e_size(symcoll_config_t *c) {
  c->struct_size = sizeof *c - 8;
}
static void e_size_big(symcoll_config_t *c) {
  c->struct_size = sizeof *c + 8;
}
static void e_n0(symcoll_config_t *c) {
  c->nranks = 0;
  c->rank = 0;
}
static void e_nbig(symcoll_config_t *c) {
  c->nranks = SYMCOLL_MAX_RANKS + 1;
}
static void e_rank_neg(symcoll_config_t *c) {
  c->rank = -1;
}
static void e_rank_big(symcoll_config_t *c) {
  c->rank = 2;
}
static void e_job_null(symcoll_config_t *c) {
  c->job_id = NULL;
}
static void e_job_bad(symcoll_config_t *c) {
  c->job_id = "a/b";
}
static void e_job_long(symcoll_config_t *c) {
  c->job_id = "0123456789012345678901234567890123456789012345678901234567890123456789";
}
static void e_dev(symcoll_config_t *c) {
  c->device = -5;
}
static void e_timeout(symcoll_config_t *c) {
  c->timeout_ms = -1;
}

static void test_config_errors(void **state) {
  (void)state;
  symcoll_comm_t comm;
  assert_int_equal(symcoll_comm_create(NULL, &comm), SYMCOLL_ERR_INVALID_ARGUMENT);
  symcoll_config_t cfg;
  symcoll_config_init(&cfg);
  assert_int_equal(symcoll_comm_create(&cfg, NULL), SYMCOLL_ERR_INVALID_ARGUMENT);
  void (*edits[])(symcoll_config_t *) = {e_size,     e_size_big, e_n0,       e_nbig, e_rank_neg, e_rank_big,
                                         e_job_null, e_job_bad,  e_job_long, e_dev,  e_timeout};
  for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) expect_create(SYMCOLL_ERR_INVALID_ARGUMENT, edits[i]);
  assert_int_equal(symcoll_comm_create_all(0, NULL, &comm), SYMCOLL_ERR_INVALID_ARGUMENT);
  assert_int_equal(symcoll_comm_create_all(SYMCOLL_MAX_RANKS + 1, NULL, &comm), SYMCOLL_ERR_INVALID_ARGUMENT);
  assert_int_equal(symcoll_comm_create_all(2, NULL, NULL), SYMCOLL_ERR_INVALID_ARGUMENT);
  int mixed[2] = {SYMCOLL_DEVICE_HOST, 0};
  symcoll_comm_t two[2];
  assert_int_equal(symcoll_comm_create_all(2, mixed, two), SYMCOLL_ERR_INVALID_ARGUMENT);
  assert_int_equal(symcoll_comm_destroy(NULL), SYMCOLL_ERR_INVALID_ARGUMENT);
  assert_int_equal(symcoll_comm_abort(NULL), SYMCOLL_ERR_INVALID_ARGUMENT);
  assert_int_equal(symcoll_comm_check(NULL), SYMCOLL_ERR_INVALID_ARGUMENT);
  assert_int_equal(symcoll_comm_barrier(NULL), SYMCOLL_ERR_INVALID_ARGUMENT);
  /* Jobs across nodes: bad configurations are refused before anything is exchanged. */
  symcoll_job_config_t jc;
  symcoll_job_config_init(&jc);
  assert_int_equal(symcoll_comm_create_job(NULL, &comm), SYMCOLL_ERR_INVALID_ARGUMENT);
  assert_int_equal(symcoll_comm_create_job(&jc, NULL), SYMCOLL_ERR_INVALID_ARGUMENT);
  assert_int_equal(symcoll_comm_create_job(&jc, &comm), SYMCOLL_ERR_INVALID_ARGUMENT); /* no local rank */
  jc.local_rank = 0, jc.local_nranks = 1;
  jc.struct_size--;
  assert_int_equal(symcoll_comm_create_job(&jc, &comm), SYMCOLL_ERR_INVALID_ARGUMENT);
  jc.struct_size++;
  jc.engine = SYMCOLL_ENGINE_SYMCOLL; /* only for emulated nodes */
  assert_int_equal(symcoll_comm_create_job(&jc, &comm), SYMCOLL_ERR_INVALID_ARGUMENT);
  jc.engine = (symcoll_engine_t)7;
  assert_int_equal(symcoll_comm_create_job(&jc, &comm), SYMCOLL_ERR_INVALID_ARGUMENT);
  assert_null(symcoll_comm_local(NULL));
  assert_int_equal(symcoll_comm_nnodes(NULL), -1);
}

static symcoll_comm_t solo(void) {
  symcoll_config_t cfg;
  symcoll_config_init(&cfg);
  symcoll_comm_t comm = NULL;
  assert_int_equal(symcoll_comm_create(&cfg, &comm), SYMCOLL_OK);
  return comm;
}

static void test_bad_collective_args(void **state) {
  (void)state;
  symcoll_comm_t comm = solo();
  assert_ptr_equal(symcoll_comm_local(comm), comm); /* one host: its own node-local communicator */
  assert_int_equal(symcoll_comm_nnodes(comm), 1);
  /* algorithms of communicators spanning nodes only */
  assert_int_equal(symcoll_coll_algo_supported(comm, SYMCOLL_COLL_ALL_REDUCE, SYMCOLL_ALGO_ENGINE),
                   SYMCOLL_ERR_UNSUPPORTED);
  assert_int_equal(symcoll_coll_algo_supported(comm, SYMCOLL_COLL_ALL_GATHER, SYMCOLL_ALGO_HIERARCHICAL),
                   SYMCOLL_ERR_UNSUPPORTED);
  enum { N = 64 };
  float send[N + 4], recv[N + 4], poison[N + 4];
  for (int i = 0; i < N + 4; i++) send[i] = (float)i;
  memset(poison, 0xa5, sizeof poison);
  memcpy(recv, poison, sizeof recv);
  symcoll_coll_opts_t o;
  symcoll_coll_opts_init(&o);
#define EXPECT_BAD(call)                                    \
  do {                                                      \
    assert_int_equal((call), SYMCOLL_ERR_INVALID_ARGUMENT); \
    assert_memory_equal(recv, poison, sizeof recv);         \
  } while (0)
  EXPECT_BAD(symcoll_all_reduce(NULL, send, recv, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL));
  EXPECT_BAD(symcoll_all_reduce(comm, NULL, recv, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL));
  EXPECT_BAD(symcoll_all_reduce(comm, send, NULL, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL));
  EXPECT_BAD(symcoll_all_reduce(comm, send, recv, N, SYMCOLL_NUM_DTYPES, SYMCOLL_SUM, NULL));
  EXPECT_BAD(symcoll_all_reduce(comm, send, recv, N, (symcoll_dtype_t)-1, SYMCOLL_SUM, NULL));
  EXPECT_BAD(symcoll_all_reduce(comm, send, recv, N, SYMCOLL_FLOAT32, SYMCOLL_NUM_OPS, NULL));
  EXPECT_BAD(symcoll_all_reduce(comm, send, recv, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, (void *)send));
  EXPECT_BAD(symcoll_all_reduce(comm, (char *)send + 1, recv, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL));
  EXPECT_BAD(symcoll_all_reduce(comm, send, (char *)recv + 2, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL));
  EXPECT_BAD(symcoll_all_reduce(comm, recv, recv + 1, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL));
  EXPECT_BAD(symcoll_all_reduce(comm, send, recv, SIZE_MAX / 2, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL));
  o.algo = SYMCOLL_NUM_ALGOS;
  EXPECT_BAD(symcoll_all_reduce_ex(comm, send, recv, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL, &o));
  /* all_gather / reduce_scatter: the same checks, and their own overlap rules. */
  EXPECT_BAD(symcoll_all_gather(NULL, send, recv, N, SYMCOLL_FLOAT32, NULL));
  EXPECT_BAD(symcoll_all_gather(comm, NULL, recv, N, SYMCOLL_FLOAT32, NULL));
  EXPECT_BAD(symcoll_all_gather(comm, send, recv, N, SYMCOLL_NUM_DTYPES, NULL));
  EXPECT_BAD(symcoll_all_gather(comm, recv + 1, recv, N, SYMCOLL_FLOAT32, NULL)); /* overlaps, not rank 0's block */
  EXPECT_BAD(symcoll_all_gather(comm, send, recv, SIZE_MAX / 4, SYMCOLL_FLOAT32, NULL));
  EXPECT_BAD(symcoll_reduce_scatter(comm, send, NULL, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL));
  EXPECT_BAD(symcoll_reduce_scatter(comm, send, recv, N, SYMCOLL_FLOAT32, (symcoll_op_t)-1, NULL));
  EXPECT_BAD(symcoll_reduce_scatter(comm, recv, recv + 2, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL));
  /* broadcast / reduce: a root that is no rank (even with count 0), the root's NULL buffer. */
  EXPECT_BAD(symcoll_broadcast(comm, send, recv, N, SYMCOLL_FLOAT32, 1, NULL));
  EXPECT_BAD(symcoll_broadcast(comm, send, recv, N, SYMCOLL_FLOAT32, -1, NULL));
  EXPECT_BAD(symcoll_broadcast(comm, NULL, NULL, 0, SYMCOLL_FLOAT32, 7, NULL));
  EXPECT_BAD(symcoll_broadcast(comm, NULL, recv, N, SYMCOLL_FLOAT32, 0, NULL));
  EXPECT_BAD(symcoll_broadcast(comm, send, NULL, N, SYMCOLL_FLOAT32, 0, NULL));
  EXPECT_BAD(symcoll_broadcast(comm, recv, recv + 1, N, SYMCOLL_FLOAT32, 0, NULL));
  EXPECT_BAD(symcoll_broadcast(comm, send, recv, N, SYMCOLL_NUM_DTYPES, 0, NULL));
  EXPECT_BAD(symcoll_reduce(comm, send, NULL, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, 0, NULL));
  EXPECT_BAD(symcoll_reduce(comm, NULL, recv, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, 0, NULL));
  EXPECT_BAD(symcoll_reduce(comm, send, recv, N, SYMCOLL_FLOAT32, SYMCOLL_NUM_OPS, 0, NULL));
  EXPECT_BAD(symcoll_reduce(comm, send, recv, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, 1, NULL));
  EXPECT_BAD(symcoll_reduce(comm, recv + 1, recv, N, SYMCOLL_FLOAT32, SYMCOLL_AVG, 0, NULL));
  /* all_to_all: both buffers hold every rank's block; any overlap but equality is refused. */
  EXPECT_BAD(symcoll_all_to_all(comm, NULL, recv, N, SYMCOLL_FLOAT32, NULL));
  EXPECT_BAD(symcoll_all_to_all(comm, send, NULL, N, SYMCOLL_FLOAT32, NULL));
  EXPECT_BAD(symcoll_all_to_all(comm, recv + 1, recv, N, SYMCOLL_FLOAT32, NULL));
  EXPECT_BAD(symcoll_all_to_all(comm, send, recv, SIZE_MAX / 4, SYMCOLL_FLOAT32, NULL));
  o.algo = SYMCOLL_ALGO_PUSH; /* an algorithm of all_to_all, not of reduce */
  assert_int_equal(symcoll_reduce_ex(comm, send, recv, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, 0, NULL, &o),
                   SYMCOLL_ERR_UNSUPPORTED);
  assert_memory_equal(recv, poison, sizeof recv);
  /* One rank: broadcast, reduce (every op, avg included) and all_to_all give the input. */
  for (int op = 0; op < SYMCOLL_NUM_OPS; op++) {
    assert_int_equal(symcoll_reduce(comm, send, recv, N, SYMCOLL_FLOAT32, (symcoll_op_t)op, 0, NULL), SYMCOLL_OK);
    assert_memory_equal(recv, send, N * sizeof(float));
    memcpy(recv, poison, sizeof recv);
  }
  assert_int_equal(symcoll_broadcast(comm, send, recv, N, SYMCOLL_FLOAT32, 0, NULL), SYMCOLL_OK);
  assert_memory_equal(recv, send, N * sizeof(float));
  memcpy(recv, poison, sizeof recv);
  assert_int_equal(symcoll_all_to_all(comm, send, recv, N, SYMCOLL_FLOAT32, NULL), SYMCOLL_OK);
  assert_memory_equal(recv, send, N * sizeof(float));
  memcpy(recv, poison, sizeof recv);
  assert_string_equal(symcoll_op_name(SYMCOLL_PROD), "prod");
  assert_string_equal(symcoll_op_name(SYMCOLL_AVG), "avg");
  assert_string_equal(symcoll_op_name(SYMCOLL_NUM_OPS), "unknown");
  o.algo = SYMCOLL_ALGO_TWO_SHOT; /* an all_reduce algorithm: UNSUPPORTED for the others */
  assert_int_equal(symcoll_all_gather_ex(comm, send, recv, N, SYMCOLL_FLOAT32, NULL, &o), SYMCOLL_ERR_UNSUPPORTED);
  assert_memory_equal(recv, poison, sizeof recv);
  o.algo = SYMCOLL_ALGO_COPY_ENGINE; /* a GPU algorithm: UNSUPPORTED on CPU ranks */
  assert_int_equal(symcoll_all_gather_ex(comm, send, recv, N, SYMCOLL_FLOAT32, NULL, &o), SYMCOLL_ERR_UNSUPPORTED);
  assert_int_equal(symcoll_coll_algo_supported(comm, SYMCOLL_COLL_ALL_GATHER, SYMCOLL_ALGO_PUSH), SYMCOLL_OK);
  assert_int_equal(symcoll_coll_algo_supported(comm, SYMCOLL_COLL_REDUCE_SCATTER, SYMCOLL_ALGO_PUSH),
                   SYMCOLL_ERR_UNSUPPORTED);
  assert_int_equal(symcoll_coll_algo_supported(comm, SYMCOLL_NUM_COLL_KINDS, SYMCOLL_ALGO_PUSH),
                   SYMCOLL_ERR_INVALID_ARGUMENT);
  assert_int_equal(symcoll_coll_algo_supported(comm, SYMCOLL_COLL_ALL_GATHER_MATMUL, SYMCOLL_ALGO_PUSH),
                   SYMCOLL_ERR_UNSUPPORTED);
  assert_memory_equal(recv, poison, sizeof recv);
  /* In place with one rank: the result is the input, in every collective. */
  assert_int_equal(symcoll_all_gather(comm, recv, recv, 4, SYMCOLL_FLOAT32, NULL), SYMCOLL_OK);
  assert_int_equal(symcoll_reduce_scatter(comm, send, recv, 4, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL), SYMCOLL_OK);
  assert_memory_equal(recv, send, 4 * sizeof(float));
  memcpy(recv, poison, sizeof recv);
  symcoll_coll_opts_init(&o);
  symcoll_coll_opts_init(&o);
  o.struct_size = 3;
  EXPECT_BAD(symcoll_all_reduce_ex(comm, send, recv, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL, &o));
  symcoll_coll_opts_init(&o);
  o.threads = 33;
  EXPECT_BAD(symcoll_all_reduce_ex(comm, send, recv, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL, &o));
  symcoll_coll_opts_init(&o);
  o.round_bytes = 1000; /* not a multiple of 256 */
  EXPECT_BAD(symcoll_all_reduce_ex(comm, send, recv, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL, &o));
  /* A caller built against 0.1's options (no round_bytes) is still served. */
  symcoll_coll_opts_init(&o);
  o.struct_size = offsetof(symcoll_coll_opts_t, round_bytes);
  o.round_bytes = 1000; /* beyond its struct: never read */
  assert_int_equal(symcoll_all_reduce_ex(comm, send, recv, N, SYMCOLL_FLOAT32, SYMCOLL_MAX, NULL, &o), SYMCOLL_OK);
  assert_memory_equal(recv, send, N * sizeof(float));
  memcpy(recv, poison, sizeof recv);
  /* A scale multiplies inputs before a sum: refused with another op, a collective that does
   * not reduce, or device memory on a CPU communicator; 0.5's options (no scale) still work. */
  const float two = 2.0f;
  symcoll_coll_opts_init(&o);
  o.scale = &two;
  EXPECT_BAD(symcoll_all_reduce_ex(comm, send, recv, N, SYMCOLL_FLOAT32, SYMCOLL_MAX, NULL, &o));
  EXPECT_BAD(symcoll_broadcast_ex(comm, send, recv, N, SYMCOLL_FLOAT32, 0, NULL, &o));
  o.scale_on_device = 1;
  EXPECT_BAD(symcoll_all_reduce_ex(comm, send, recv, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL, &o));
  o.scale = NULL;
  EXPECT_BAD(symcoll_all_reduce_ex(comm, send, recv, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL, &o));
  symcoll_coll_opts_init(&o);
  o.scale = &two;
  assert_int_equal(symcoll_all_reduce_ex(comm, send, recv, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL, &o), SYMCOLL_OK);
  for (int i = 0; i < N; i++) assert_true(recv[i] == 2.0f * send[i]);
  memcpy(recv, poison, sizeof recv);
  o.struct_size = offsetof(symcoll_coll_opts_t, scale); /* 0.5's options: the scale is not read */
  assert_int_equal(symcoll_all_reduce_ex(comm, send, recv, N, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL, &o), SYMCOLL_OK);
  assert_memory_equal(recv, send, N * sizeof(float));
  memcpy(recv, poison, sizeof recv);
  /* count 0 is a no-op that succeeds, even with NULL buffers. */
  assert_int_equal(symcoll_all_reduce(comm, NULL, NULL, 0, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL), SYMCOLL_OK);
  assert_int_equal(symcoll_all_reduce(comm, send, recv, 0, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL), SYMCOLL_OK);
  assert_memory_equal(recv, poison, sizeof recv);
  /* And the communicator still works. */
  assert_int_equal(symcoll_all_reduce(comm, send, recv, N, SYMCOLL_FLOAT32, SYMCOLL_MAX, NULL), SYMCOLL_OK);
  assert_memory_equal(recv, send, N * sizeof(float));
  /* Memory. */
  symcoll_mem_t mem = (symcoll_mem_t)0x1;
  assert_int_equal(symcoll_mem_alloc(comm, 0, &mem), SYMCOLL_ERR_INVALID_ARGUMENT);
  assert_int_equal(symcoll_mem_alloc(NULL, 64, &mem), SYMCOLL_ERR_INVALID_ARGUMENT);
  assert_int_equal(symcoll_mem_alloc(comm, 64, NULL), SYMCOLL_ERR_INVALID_ARGUMENT);
  assert_ptr_equal(mem, (symcoll_mem_t)0x1);
  assert_int_equal(symcoll_mem_alloc(comm, 100, &mem), SYMCOLL_OK);
  assert_non_null(symcoll_mem_ptr(mem, 0));
  assert_null(symcoll_mem_ptr(mem, 1));
  assert_null(symcoll_mem_ptr(mem, -1));
  assert_int_equal(symcoll_mem_size(mem), 100);
  symcoll_device_view_t view;
  assert_int_equal(symcoll_mem_device_view(mem, &view), SYMCOLL_ERR_UNSUPPORTED);
  assert_int_equal(symcoll_mem_free(mem), SYMCOLL_OK);
  assert_int_equal(symcoll_mem_free(NULL), SYMCOLL_ERR_INVALID_ARGUMENT);
  assert_int_equal(symcoll_comm_rank(comm), 0);
  assert_int_equal(symcoll_comm_nranks(comm), 1);
  assert_int_equal(symcoll_comm_device(comm), SYMCOLL_DEVICE_HOST);
  assert_int_equal(symcoll_comm_check(comm), SYMCOLL_OK);
  assert_int_equal(symcoll_comm_barrier(comm), SYMCOLL_OK);
  assert_int_equal(symcoll_comm_destroy(comm), SYMCOLL_OK);
}

static void clear_env(void) {
  const char *vars[] = {"SYMCOLL_RANK",
                        "SYMCOLL_NRANKS",
                        "SYMCOLL_JOB_ID",
                        "LOCAL_RANK",
                        "LOCAL_WORLD_SIZE",
                        "TORCHELASTIC_RUN_ID",
                        "OMPI_COMM_WORLD_LOCAL_RANK",
                        "OMPI_COMM_WORLD_LOCAL_SIZE",
                        "SLURM_LOCALID",
                        "SLURM_NTASKS"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

static void test_from_env(void **state) {
  (void)state;
  symcoll_comm_t comm = NULL;
  clear_env();
  assert_int_equal(symcoll_comm_create_from_env(SYMCOLL_DEVICE_HOST, &comm), SYMCOLL_ERR_INVALID_ARGUMENT);
  const char *sets[][3][2] = {
      {{"SYMCOLL_RANK", "0"}, {"SYMCOLL_NRANKS", "1"}, {"SYMCOLL_JOB_ID", "envtest"}},
      {{"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "1"}, {"TORCHELASTIC_RUN_ID", "abc"}},
      {{"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}, {"X_UNUSED", "1"}},
      {{"SLURM_LOCALID", "0"}, {"SLURM_NTASKS", "1"}, {"X_UNUSED", "1"}},
  };
  for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
    clear_env();
    for (int k = 0; k < 3; k++) setenv(sets[i][k][0], sets[i][k][1], 1);
    comm = NULL;
    assert_int_equal(symcoll_comm_create_from_env(SYMCOLL_DEVICE_HOST, &comm), SYMCOLL_OK);
    assert_int_equal(symcoll_comm_nranks(comm), 1);
    symcoll_comm_destroy(comm);
  }
  clear_env();
}

/* Forks one process per entry of ranks[]; returns each one's comm_create status. */
static void rendezvous(const int *ranks, const int *nranks, int nproc, int timeout_ms, int *status) {
  char job[64];
  th_job_id(job, sizeof job, "conflict");
  pid_t pids[8];
  int pipes[8][2];
  for (int i = 0; i < nproc; i++) {
    assert_int_equal(pipe(pipes[i]), 0);
    if ((pids[i] = fork()) == 0) {
      symcoll_config_t cfg;
      symcoll_config_init(&cfg);
      cfg.job_id = job;
      cfg.rank = ranks[i];
      cfg.nranks = nranks[i];
      cfg.timeout_ms = timeout_ms;
      symcoll_comm_t comm;
      int s = symcoll_comm_create(&cfg, &comm);
      if (s == SYMCOLL_OK) {
        float x = 1;
        symcoll_all_reduce(comm, &x, &x, 1, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL);
        symcoll_comm_destroy(comm);
      }
      if (write(pipes[i][1], &s, sizeof s) != sizeof s) _exit(3);
      _exit(0);
    }
    close(pipes[i][1]);
  }
  for (int i = 0; i < nproc; i++) {
    status[i] = 1;
    if (read(pipes[i][0], &status[i], sizeof(int)) != sizeof(int)) status[i] = 1;
    close(pipes[i][0]);
    waitpid(pids[i], NULL, 0);
  }
}

static void test_rank_conflicts(void **state) {
  (void)state;
  int st[3];
  double t0 = th_now();
  /* Two processes claim rank 1 of 2: the job completes; the other claimant is refused with
   * MISMATCH, or, if it comes after the job has formed and closed its rendezvous, it finds
   * nobody and times out. Nobody hangs. */
  int r1[] = {0, 1, 1}, n1[] = {2, 2, 2};
#define REFUSED(s) ((s) == SYMCOLL_ERR_MISMATCH || (s) == SYMCOLL_ERR_TIMEOUT)
  rendezvous(r1, n1, 3, 1500, st);
  assert_int_equal(st[0], SYMCOLL_OK);
  assert_true((st[1] == SYMCOLL_OK && REFUSED(st[2])) || (st[2] == SYMCOLL_OK && REFUSED(st[1])));
  /* Two processes claim rank 0: the second cannot take the name: MISMATCH at once. */
  int r2[] = {0, 0, 1};
  rendezvous(r2, n1, 3, 1500, st);
  assert_int_equal(st[2], SYMCOLL_OK);
  assert_true((st[0] == SYMCOLL_OK && REFUSED(st[1])) || (st[1] == SYMCOLL_OK && REFUSED(st[0])));
  /* Disagreement on nranks: the odd one is refused, the other times out, nobody hangs. */
  int r3[] = {0, 1}, n3[] = {2, 3};
  t0 = th_now();
  rendezvous(r3, n3, 2, 1000, st);
  assert_int_equal(st[0], SYMCOLL_ERR_TIMEOUT);
  assert_int_equal(st[1], SYMCOLL_ERR_MISMATCH);
  assert_true(th_now() - t0 < 2.5);
  assert_int_equal(th_leftovers(NULL), 0);
}

/* Two thread-mode ranks created while `name` is set to `value` in the environment. */
static void create_two_with_env(const char *name, const char *value, symcoll_comm_t *comms) {
  setenv(name, value, 1);
  assert_int_equal(symcoll_comm_create_all(2, NULL, comms), SYMCOLL_OK);
  unsetenv(name);
}

typedef struct {
  symcoll_comm_t comm;
  size_t count;
  symcoll_status_t status;
  int blocks;
} check_arg_t;
static void *check_thread(void *p) {
  check_arg_t *a = p;
  float buf[16] = {0};
  symcoll_coll_opts_t o;
  symcoll_coll_opts_init(&o);
  o.blocks = a->blocks;
  a->status = symcoll_all_reduce_ex(a->comm, buf, buf, a->count, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL, &o);
  return NULL;
}

static void test_check_mismatch(void **state) {
  (void)state;
  symcoll_comm_t comms[2];
  create_two_with_env("SYMCOLL_CHECK", "1", comms);
  check_arg_t a[2] = {{comms[0], 10, SYMCOLL_OK, 0}, {comms[1], 11, SYMCOLL_OK, 0}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, check_thread, &a[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  assert_int_equal(a[0].status, SYMCOLL_ERR_MISMATCH);
  assert_int_equal(a[1].status, SYMCOLL_ERR_MISMATCH);
  a[1].count = 10;
  a[1].blocks = 4; /* a launch shape that differs is caught too */
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, check_thread, &a[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  assert_int_equal(a[0].status, SYMCOLL_ERR_MISMATCH);
  assert_int_equal(a[1].status, SYMCOLL_ERR_MISMATCH);
  a[1].blocks = 0; /* agreeing calls work afterwards */
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, check_thread, &a[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  assert_int_equal(a[0].status, SYMCOLL_OK);
  assert_int_equal(a[1].status, SYMCOLL_OK);
  for (int i = 0; i < 2; i++) symcoll_comm_destroy(comms[i]);
}

/* ---- each refusal names what was wrong ------------------------------------------------------- */

/* Runs fn with stderr captured; returns what it printed (static buffer). */
static const char *stderr_of(void (*fn)(void *), void *arg) {
  static char text[8192];
  fflush(stderr);
  int saved = dup(2);
  FILE *tmp = tmpfile();
  dup2(fileno(tmp), 2);
  fn(arg);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  rewind(tmp);
  size_t n = fread(text, 1, sizeof text - 1, tmp);
  text[n] = 0;
  fclose(tmp);
  return text;
}

typedef struct {
  symcoll_comm_t comm;
  int which;
} refusal_arg_t;
static void refuse(void *p) {
  refusal_arg_t *a = p;
  float x[8] = {0};
  switch (a->which) {
    case 0:
      symcoll_all_reduce(NULL, x, x, 8, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL);
      break;
    case 1:
      symcoll_all_reduce(a->comm, NULL, x, 8, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL);
      break;
    case 2:
      symcoll_all_reduce(a->comm, x, x, 8, (symcoll_dtype_t)99, SYMCOLL_SUM, NULL);
      break;
    case 3:
      symcoll_all_reduce(a->comm, x, x, 8, SYMCOLL_FLOAT32, (symcoll_op_t)7, NULL);
      break;
    case 4:
      symcoll_all_reduce(a->comm, x, x, SIZE_MAX / 2, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL);
      break;
    case 5:
      symcoll_reduce_scatter(a->comm, x, x + 1, 4, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL);
      break;
    case 6:
      symcoll_broadcast(a->comm, x, x, 8, SYMCOLL_FLOAT32, 3, NULL);
      break;
    case 7:
      symcoll_reduce(a->comm, x, NULL, 8, SYMCOLL_FLOAT32, SYMCOLL_PROD, 0, NULL);
      break;
    default:
      symcoll_all_gather(a->comm, x, x, 8, SYMCOLL_FLOAT32, (void *)x);
      break;
  }
}

static void test_refusals_say_why(void **state) {
  (void)state;
  symcoll_comm_t comm = solo();
  static const char *const want[] = {
      "comm is NULL",       "send is NULL",         "unknown dtype 99",         "unknown op 7",   "too large",
      "recv overlaps send", "root 3 is not a rank", "recv is NULL on the root", "takes no stream"};
  for (int i = 0; i < (int)(sizeof want / sizeof want[0]); i++) {
    refusal_arg_t a = {comm, i};
    const char *text = stderr_of(refuse, &a);
    if (!strstr(text, want[i])) fail_msg("refusal %d logged \"%s\", expected it to say \"%s\"", i, text, want[i]);
  }
  symcoll_comm_destroy(comm);
}

/* ---- ranks in different calls --------------------------------------------------------------------- */

/* Rank `refused` has its first call refused (a NULL buffer); its next call, which differs in
 * count or collective, meets its peer's first: both return MISMATCH and write nothing, and the
 * next matching calls work. */
typedef struct {
  symcoll_comm_t comm;
  int refused, variant;
  int bad;
} skew_arg_t;
static void *skew_rank(void *p) {
  skew_arg_t *a = p;
  const int rank = symcoll_comm_rank(a->comm);
  float in[16], out[32], poison[32];
  for (int i = 0; i < 16; i++) in[i] = (float)(rank + 1);
  memset(poison, 0xa5, sizeof poison);
  memcpy(out, poison, sizeof out);
  symcoll_status_t s;
  if (rank == a->refused) {
    a->bad +=
        symcoll_all_reduce(a->comm, NULL, out, 8, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL) != SYMCOLL_ERR_INVALID_ARGUMENT;
    s = a->variant == 0   ? symcoll_all_reduce(a->comm, in, out, 4, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL)
        : a->variant == 1 ? symcoll_all_gather(a->comm, in, out, 8, SYMCOLL_FLOAT32, NULL)
                          : symcoll_all_reduce(a->comm, in, out, 8, SYMCOLL_FLOAT32, SYMCOLL_MAX, NULL);
  } else {
    s = symcoll_all_reduce(a->comm, in, out, 8, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL);
  }
  if (s != SYMCOLL_ERR_MISMATCH) {
    fprintf(stderr, "rank %d (variant %d, rank %d refused): %s\n", rank, a->variant, a->refused,
            symcoll_status_string(s));
    a->bad++;
  }
  a->bad += memcmp(out, poison, sizeof out) != 0; /* nothing written */
  /* In step again: a matching call works. */
  s = symcoll_all_reduce(a->comm, in, out, 16, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL);
  a->bad += s != SYMCOLL_OK || out[15] != 3.0f;
  return NULL;
}

static void test_calls_out_of_step(void **state) {
  (void)state;
  for (int variant = 0; variant < 3; variant++)
    for (int refused = 0; refused < 2; refused++) {
      symcoll_comm_t comms[2];
      assert_int_equal(symcoll_comm_create_all(2, NULL, comms), SYMCOLL_OK);
      skew_arg_t a[2] = {{comms[0], refused, variant, 0}, {comms[1], refused, variant, 0}};
      pthread_t t[2];
      for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, skew_rank, &a[i]);
      for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
      assert_int_equal(a[0].bad, 0);
      assert_int_equal(a[1].bad, 0);
      for (int i = 0; i < 2; i++) symcoll_comm_destroy(comms[i]);
    }
}

/* ---- split --------------------------------------------------------------------------------------- */

/* 6 ranks: colors rank % 3 except rank 5 (no color); keys order each group by descending rank.
 * Each group all-reduces its members' ranks (both groups at once), then splits again into
 * singletons and all-gathers. */
static int split_rank(symcoll_comm_t comm, const th_buf_ops_t *ops, void *arg) {
  (void)ops, (void)arg;
  const int rank = symcoll_comm_rank(comm);
  const int color = rank == 5 ? SYMCOLL_SPLIT_NOCOLOR : rank % 3;
  symcoll_comm_t sub = (symcoll_comm_t)0x1;
  int bad = 0;
  if (symcoll_comm_split(comm, color, -rank, &sub) != SYMCOLL_OK) return 1;
  if (color == SYMCOLL_SPLIT_NOCOLOR) return (sub != NULL) + (symcoll_comm_barrier(comm) != SYMCOLL_OK);
  /* members of color c: c, c + 3 (rank 5 left out of color 2): ordered by descending rank */
  const int members = color == 2 ? 1 : 2;
  const int want_rank = members == 2 && rank < 3 ? 1 : 0;
  bad += symcoll_comm_nranks(sub) != members || symcoll_comm_rank(sub) != want_rank;
  double x = rank, sum = -1;
  bad += symcoll_all_reduce(sub, &x, &sum, 1, SYMCOLL_FLOAT64, SYMCOLL_SUM, NULL) != SYMCOLL_OK;
  bad += sum != (members == 2 ? 2 * color + 3 : color);
  symcoll_comm_t solo2 = NULL;
  bad += symcoll_comm_split(sub, symcoll_comm_rank(sub), 0, &solo2) != SYMCOLL_OK;
  if (solo2) {
    int32_t v = rank * 10, g = -1;
    bad += symcoll_all_gather(solo2, &v, &g, 1, SYMCOLL_INT32, NULL) != SYMCOLL_OK || g != rank * 10;
    bad += symcoll_comm_nranks(solo2) != 1;
    symcoll_comm_barrier(solo2);
    symcoll_comm_destroy(solo2);
  } else {
    bad++;
  }
  bad += symcoll_comm_barrier(sub) != SYMCOLL_OK;
  symcoll_comm_destroy(sub);
  bad += symcoll_comm_barrier(comm) != SYMCOLL_OK; /* the parent still works */
  if (bad) fprintf(stderr, "rank %d: %d split checks failed\n", rank, bad);
  return bad;
}

static void test_split(void **state) {
  (void)state;
  for (int m = 0; m < 2; m++) {
    th_launch_t l = {"host", m ? "thread" : "process", 6, 10000, 60};
    assert_int_equal(th_run(&l, split_rank, NULL), 0);
  }
  symcoll_comm_t comm = solo(), sub = (symcoll_comm_t)0x1;
  assert_int_equal(symcoll_comm_split(comm, -2, 0, &sub), SYMCOLL_ERR_INVALID_ARGUMENT);
  assert_int_equal(symcoll_comm_split(NULL, 0, 0, &sub), SYMCOLL_ERR_INVALID_ARGUMENT);
  assert_int_equal(symcoll_comm_split(comm, 0, 0, NULL), SYMCOLL_ERR_INVALID_ARGUMENT);
  assert_ptr_equal(sub, (symcoll_comm_t)0x1);
  symcoll_comm_destroy(comm);
}

/* symcoll_comm_barrier: nobody leaves before the last rank arrives; after an abort it says so. */
typedef struct {
  symcoll_comm_t comm;
  double delay_s, left_at;
  symcoll_status_t status;
} barrier_arg_t;
static void *barrier_thread(void *p) {
  barrier_arg_t *a = p;
  usleep((useconds_t)(a->delay_s * 1e6));
  a->status = symcoll_comm_barrier(a->comm);
  a->left_at = th_now();
  return NULL;
}
static void test_barrier(void **state) {
  (void)state;
  symcoll_comm_t comms[2];
  assert_int_equal(symcoll_comm_create_all(2, NULL, comms), SYMCOLL_OK);
  double t0 = th_now();
  barrier_arg_t a[2] = {{comms[0], 0.0, 0, SYMCOLL_ERR_INTERNAL}, {comms[1], 0.2, 0, SYMCOLL_ERR_INTERNAL}};
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, barrier_thread, &a[i]);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(a[i].status, SYMCOLL_OK);
    assert_true(a[i].left_at - t0 >= 0.19);
  }
  assert_int_equal(symcoll_comm_abort(comms[0]), SYMCOLL_OK);
  assert_int_equal(symcoll_comm_barrier(comms[0]), SYMCOLL_ERR_ABORTED);
  for (int i = 0; i < 2; i++) symcoll_comm_destroy(comms[i]);
}

/* Two jobs at once on one host, each checking its own sums: no interference. */
static void test_two_jobs_at_once(void **state) {
  (void)state;
  pid_t a = fork();
  if (a == 0) {
    int st[2], r[] = {0, 1}, n[] = {2, 2};
    rendezvous(r, n, 2, 5000, st);
    _exit(st[0] != SYMCOLL_OK || st[1] != SYMCOLL_OK);
  }
  int st[3], r[] = {0, 1, 2}, n[] = {3, 3, 3};
  rendezvous(r, n, 3, 5000, st);
  int ws;
  waitpid(a, &ws, 0);
  for (int i = 0; i < 3; i++) assert_int_equal(st[i], SYMCOLL_OK);
  assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}

/* A stranger at the rendezvous: one that sends garbage, and (when we can become another user)
 * one of another uid. Both are refused and logged; the job goes on. */
#include <sys/socket.h>
#include <sys/un.h>
static void stranger(const char *job, int other_uid) {
  /* The name carries the job's uid: the stranger knocks on that door, as itself. */
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "symcoll.%u.%s", (unsigned)geteuid(), job);
  if (other_uid && setuid(65534) != 0) _exit(0);
  for (int i = 0; i < 200; i++) {
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    if (connect(fd, (struct sockaddr *)&addr,
                (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(addr.sun_path + 1))) == 0) {
      const char junk[] = "GET / HTTP/1.0\r\n\r\n";
      if (write(fd, junk, sizeof junk) < 0) _exit(1);
      usleep(100000);
      close(fd);
      _exit(0);
    }
    close(fd);
    usleep(5000);
  }
  _exit(0);
}

static void test_strangers_refused(void **state) {
  (void)state;
  for (int other_uid = 0; other_uid < 2; other_uid++) {
    if (other_uid && geteuid() != 0) {
      print_message("not root: the other-uid case is skipped\n");
      continue;
    }
    char job[64];
    th_job_id(job, sizeof job, "stranger");
    pid_t ranks[2];
    int pipes[2][2];
    for (int r = 0; r < 2; r++) {
      assert_int_equal(pipe(pipes[r]), 0);
      if ((ranks[r] = fork()) == 0) {
        if (r == 1) usleep(300000); /* let the stranger in first */
        symcoll_config_t cfg;
        symcoll_config_init(&cfg);
        cfg.job_id = job;
        cfg.rank = r;
        cfg.nranks = 2;
        cfg.timeout_ms = 5000;
        symcoll_comm_t comm;
        int s = symcoll_comm_create(&cfg, &comm);
        if (s == SYMCOLL_OK) {
          float x = 1;
          s = symcoll_all_reduce(comm, &x, &x, 1, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL);
          if (s == SYMCOLL_OK && x != 2) s = SYMCOLL_ERR_INTERNAL;
          symcoll_comm_destroy(comm);
        }
        if (write(pipes[r][1], &s, sizeof s) != sizeof s) _exit(3);
        _exit(0);
      }
      close(pipes[r][1]);
    }
    pid_t st = fork();
    if (st == 0) stranger(job, other_uid);
    for (int r = 0; r < 2; r++) {
      int s = 1;
      if (read(pipes[r][0], &s, sizeof s) != sizeof s) s = 1;
      close(pipes[r][0]);
      waitpid(ranks[r], NULL, 0);
      assert_int_equal(s, SYMCOLL_OK);
    }
    waitpid(st, NULL, 0);
  }
}

/* The tuning table decides AUTO; a bad table is ignored; every rank adopts rank 0's table. */
static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* NCCL needs an NCCL communicator, which CPU ranks never hold: a table's NCCL rows fall back
 * to the next smaller size's choice, and forcing NCCL is refused without touching buffers. */
static void test_nccl_without_engine(void **state) {
  (void)state;
  char path[64];
  snprintf(path, sizeof path, "/tmp/symcoll-tune-nccl.%d", (int)getpid());
  write_file(path, "host * fp32 4096 twoshot\nhost * fp32 65536 oneshot\nhost * fp32 inf nccl\n");
  setenv("SYMCOLL_TUNE_FILE", path, 1);
  symcoll_comm_t comm = solo();
  unsetenv("SYMCOLL_TUNE_FILE");
  unlink(path);
  symcoll_algo_t a;
  assert_int_equal(symcoll_all_reduce_algo(comm, 1 << 20, SYMCOLL_FLOAT32, &a), SYMCOLL_OK);
  assert_int_equal(a, SYMCOLL_ALGO_ONE_SHOT);
  assert_int_equal(symcoll_algo_supported(comm, SYMCOLL_ALGO_NCCL), SYMCOLL_ERR_UNSUPPORTED);
  assert_int_equal(symcoll_algo_supported(comm, SYMCOLL_ALGO_LAMPORT), SYMCOLL_OK);
  assert_int_equal(symcoll_algo_supported(comm, (symcoll_algo_t)99), SYMCOLL_ERR_INVALID_ARGUMENT);
  assert_int_equal(symcoll_algo_supported(NULL, SYMCOLL_ALGO_ONE_SHOT), SYMCOLL_ERR_INVALID_ARGUMENT);
  float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
  memset(out, 0x7f, sizeof out);
  symcoll_coll_opts_t o;
  symcoll_coll_opts_init(&o);
  o.algo = SYMCOLL_ALGO_NCCL;
  assert_int_equal(symcoll_all_reduce_ex(comm, in, out, 8, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL, &o),
                   SYMCOLL_ERR_UNSUPPORTED);
  for (int i = 0; i < 8; i++) assert_int_equal(((uint32_t *)out)[i], 0x7f7f7f7fu);
  symcoll_comm_destroy(comm);
}

static void test_tuning_table(void **state) {
  (void)state;
  char good[64], bad[64];
  snprintf(good, sizeof good, "/tmp/symcoll-tune-good.%d", (int)getpid());
  snprintf(bad, sizeof bad, "/tmp/symcoll-tune-bad.%d", (int)getpid());
  write_file(good,
             "# test table\nhost * fp32 4096 twoshot\nhost * fp32 65536 oneshot\n"
             "host * fp32 inf twoshot\nhost 1 bf16 inf twoshot\ncuda * * inf oneshot\n");
  write_file(bad, "host * fp32 4096 twoshot\nhost * fp32 banana oneshot\n");
  symcoll_algo_t a;
  symcoll_comm_t comm;
  /* The round column: a multiple of 256 is taken; anything else makes the file ignored. */
  char rounds[64], badround[64];
  snprintf(rounds, sizeof rounds, "/tmp/symcoll-tune-round.%d", (int)getpid());
  snprintf(badround, sizeof badround, "/tmp/symcoll-tune-badround.%d", (int)getpid());
  write_file(rounds, "host * fp32 inf twoshot 0 256 1048576\n");
  write_file(badround, "host * fp32 inf twoshot 0 256 1000\n");
  setenv("SYMCOLL_TUNE_FILE", rounds, 1);
  comm = solo();
  assert_int_equal(symcoll_all_reduce_algo(comm, 1024, SYMCOLL_FLOAT32, &a), SYMCOLL_OK);
  assert_int_equal(a, SYMCOLL_ALGO_TWO_SHOT);
  symcoll_comm_destroy(comm);
  setenv("SYMCOLL_TUNE_FILE", badround, 1);
  comm = solo();
  assert_int_equal(symcoll_all_reduce_algo(comm, 1024, SYMCOLL_FLOAT32, &a), SYMCOLL_OK);
  assert_int_equal(a, SYMCOLL_ALGO_ONE_SHOT); /* built-in rows */
  symcoll_comm_destroy(comm);
  unlink(rounds);
  unlink(badround);
  /* Two rows with the same max_bytes for a dtype (its own and a * row): the one listed first. */
  char ties[64];
  snprintf(ties, sizeof ties, "/tmp/symcoll-tune-ties.%d", (int)getpid());
  for (int order = 0; order < 2; order++) {
    write_file(ties, order == 0 ? "host * fp32 inf oneshot\nhost * * 1024 oneshot\nhost * * inf twoshot\n"
                                : "host * * 1024 oneshot\nhost * * inf twoshot\nhost * fp32 inf oneshot\n");
    setenv("SYMCOLL_TUNE_FILE", ties, 1);
    comm = solo();
    assert_int_equal(symcoll_all_reduce_algo(comm, 1 << 20, SYMCOLL_FLOAT32, &a), SYMCOLL_OK);
    assert_int_equal(a, order == 0 ? SYMCOLL_ALGO_ONE_SHOT : SYMCOLL_ALGO_TWO_SHOT);
    assert_int_equal(symcoll_all_reduce_algo(comm, 1 << 20, SYMCOLL_BFLOAT16, &a), SYMCOLL_OK);
    assert_int_equal(a, SYMCOLL_ALGO_TWO_SHOT);
    symcoll_comm_destroy(comm);
  }
  unlink(ties);
  setenv("SYMCOLL_TUNE_FILE", good, 1);
  comm = solo();
  assert_int_equal(symcoll_all_reduce_algo(comm, 1024, SYMCOLL_FLOAT32, &a), SYMCOLL_OK);
  assert_int_equal(a, SYMCOLL_ALGO_TWO_SHOT); /* 4 KB */
  assert_int_equal(symcoll_all_reduce_algo(comm, 1025, SYMCOLL_FLOAT32, &a), SYMCOLL_OK);
  assert_int_equal(a, SYMCOLL_ALGO_ONE_SHOT); /* just above: next bucket */
  assert_int_equal(symcoll_all_reduce_algo(comm, 16384, SYMCOLL_FLOAT32, &a), SYMCOLL_OK);
  assert_int_equal(a, SYMCOLL_ALGO_ONE_SHOT);
  assert_int_equal(symcoll_all_reduce_algo(comm, 1 << 20, SYMCOLL_FLOAT32, &a), SYMCOLL_OK);
  assert_int_equal(a, SYMCOLL_ALGO_TWO_SHOT);
  assert_int_equal(symcoll_all_reduce_algo(comm, 7, SYMCOLL_BFLOAT16, &a), SYMCOLL_OK);
  assert_int_equal(a, SYMCOLL_ALGO_TWO_SHOT); /* the exact-nranks row */
  assert_int_equal(symcoll_all_reduce_algo(comm, 7, SYMCOLL_NUM_DTYPES, &a), SYMCOLL_ERR_INVALID_ARGUMENT);
  symcoll_comm_destroy(comm);
  setenv("SYMCOLL_ALGO", "oneshot", 1); /* the environment overrides the table */
  comm = solo();
  assert_int_equal(symcoll_all_reduce_algo(comm, 1024, SYMCOLL_FLOAT32, &a), SYMCOLL_OK);
  assert_int_equal(a, SYMCOLL_ALGO_ONE_SHOT);
  symcoll_comm_destroy(comm);
  unsetenv("SYMCOLL_ALGO");
  setenv("SYMCOLL_TUNE_FILE", bad, 1); /* ignored whole: built-in rows (1 rank: oneshot) */
  comm = solo();
  assert_int_equal(symcoll_all_reduce_algo(comm, 1024, SYMCOLL_FLOAT32, &a), SYMCOLL_OK);
  assert_int_equal(a, SYMCOLL_ALGO_ONE_SHOT);
  symcoll_comm_destroy(comm);
  /* Rank consistency: rank 0 reads the good table, rank 1 the bad one; both pick rank 0's. */
  char job[64];
  th_job_id(job, sizeof job, "tune");
  int pipes[2][2];
  pid_t pids[2];
  for (int r = 0; r < 2; r++) {
    assert_int_equal(pipe(pipes[r]), 0);
    if ((pids[r] = fork()) == 0) {
      setenv("SYMCOLL_TUNE_FILE", r == 0 ? good : bad, 1);
      symcoll_config_t cfg;
      symcoll_config_init(&cfg);
      cfg.job_id = job;
      cfg.rank = r;
      cfg.nranks = 2;
      cfg.timeout_ms = 5000;
      int picks[2] = {-1, -1};
      symcoll_comm_t c;
      if (symcoll_comm_create(&cfg, &c) == SYMCOLL_OK) {
        symcoll_algo_t x;
        symcoll_all_reduce_algo(c, 1024, SYMCOLL_FLOAT32, &x);
        picks[0] = x;
        symcoll_all_reduce_algo(c, 16384, SYMCOLL_FLOAT32, &x);
        picks[1] = x;
        symcoll_comm_destroy(c);
      }
      if (write(pipes[r][1], picks, sizeof picks) != sizeof picks) _exit(3);
      _exit(0);
    }
    close(pipes[r][1]);
  }
  for (int r = 0; r < 2; r++) {
    int picks[2] = {-1, -1};
    if (read(pipes[r][0], picks, sizeof picks) != sizeof picks) picks[0] = -1;
    close(pipes[r][0]);
    waitpid(pids[r], NULL, 0);
    assert_int_equal(picks[0], SYMCOLL_ALGO_TWO_SHOT);
    assert_int_equal(picks[1], SYMCOLL_ALGO_ONE_SHOT);
  }
  unsetenv("SYMCOLL_TUNE_FILE");
  unlink(good);
  unlink(bad);
}

/* Rows for a class of machine: the CPU's reduce loops pick them (SYMCOLL_HOST_SIMD is read
 * once per process: each case runs in a child). A table of 0.2 (no collective column) still
 * loads, and collective rows apply to their collective only. */
static char self_path[4096];

/* The pick of a fresh process (exec'd: the loops' choice is made once per process). */
static int class_pick(const char *simd, const char *table, symcoll_coll_t coll) {
  char cmd[8192];
  snprintf(cmd, sizeof cmd, "SYMCOLL_HOST_SIMD=%s SYMCOLL_TUNE_FILE=%s %s --class-pick %d", simd,
           table ? table : "/nonexistent", self_path, (int)coll);
  FILE *p = popen(cmd, "r");
  int pick = -1;
  if (!p || fscanf(p, "%d", &pick) != 1) pick = -1;
  if (p) pclose(p);
  return pick;
}
static int class_pick_main(int coll) {
  symcoll_config_t cfg;
  symcoll_config_init(&cfg);
  symcoll_comm_t c;
  int pick = -1;
  if (symcoll_comm_create(&cfg, &c) == SYMCOLL_OK) {
    symcoll_algo_t a;
    if (symcoll_coll_algo(c, (symcoll_coll_t)coll, 1024, SYMCOLL_FLOAT32, &a) == SYMCOLL_OK) pick = a;
    symcoll_comm_destroy(c);
  }
  printf("%d\n", pick);
  return 0;
}

/* Whether this CPU runs the AVX-512 BF16 loops (as src/host/reduce.c asks). */
static bool cpu_runs_avx512bf16(void) {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
#else
  return false;
#endif
}

static void test_tuning_classes(void **state) {
  (void)state;
  assert_int_equal(class_pick("scalar", NULL, SYMCOLL_COLL_ALL_REDUCE), SYMCOLL_ALGO_TWO_SHOT);
  assert_int_equal(class_pick("auto", NULL, SYMCOLL_COLL_ALL_REDUCE), SYMCOLL_ALGO_ONE_SHOT);
  char path[64];
  snprintf(path, sizeof path, "/tmp/symcoll-tune-class.%d", (int)getpid());
  write_file(path,
             "host * * inf twoshot\nhost:scalar * * inf oneshot\n"
             "all_gather host * * inf push\nreduce_scatter host:scalar * * inf lamport\n");
  assert_int_equal(class_pick("scalar", path, SYMCOLL_COLL_ALL_REDUCE), SYMCOLL_ALGO_ONE_SHOT);
  assert_int_equal(class_pick("auto", path, SYMCOLL_COLL_ALL_REDUCE), SYMCOLL_ALGO_TWO_SHOT);
  assert_int_equal(class_pick("auto", path, SYMCOLL_COLL_ALL_GATHER), SYMCOLL_ALGO_PUSH);
  assert_int_equal(class_pick("scalar", path, SYMCOLL_COLL_REDUCE_SCATTER), SYMCOLL_ALGO_LAMPORT);
  assert_int_equal(class_pick("auto", path, SYMCOLL_COLL_REDUCE_SCATTER), SYMCOLL_ALGO_PULL);
  /* AVX-512 with BF16 is of AVX-512's class */
  write_file(path, "host * * inf twoshot\nhost:avx512 * * inf oneshot\n");
  if (cpu_runs_avx512bf16()) {
    assert_int_equal(class_pick("avx512bf16", path, SYMCOLL_COLL_ALL_REDUCE), SYMCOLL_ALGO_ONE_SHOT);
    assert_int_equal(class_pick("avx512", path, SYMCOLL_COLL_ALL_REDUCE), SYMCOLL_ALGO_ONE_SHOT);
  } else {
    printf("this CPU has no AVX-512 BF16: its class is not checked\n");
  }
  assert_int_equal(class_pick("scalar", path, SYMCOLL_COLL_ALL_REDUCE), SYMCOLL_ALGO_TWO_SHOT);
  /* an algorithm of another collective is a syntax error: the file is ignored */
  write_file(path, "all_gather host * * inf twoshot\n");
  assert_int_equal(class_pick("auto", path, SYMCOLL_COLL_ALL_GATHER), SYMCOLL_ALGO_PULL);
  /* a group of rows without an inf row: its last row takes every larger size, and a WARN at
   * load says so (the built-in reduce_scatter rows of 2 and 4 GPU ranks once were such a group) */
  write_file(path, "host * * 4096 twoshot\n");
  setenv("SYMCOLL_TUNE_FILE", path, 1);
  symcoll_comm_t comm = solo();
  const char *why = symcoll_last_error();
  unsetenv("SYMCOLL_TUNE_FILE");
  assert_non_null(strstr(why, "no inf row"));
  symcoll_algo_t a;
  assert_int_equal(symcoll_all_reduce_algo(comm, 1 << 20, SYMCOLL_FLOAT32, &a), SYMCOLL_OK);
  assert_int_equal(a, SYMCOLL_ALGO_TWO_SHOT);
  assert_int_equal(symcoll_comm_destroy(comm), SYMCOLL_OK);
  unlink(path);
}

/* One rank's input lies in symmetric memory (zero-copy), the other's does not; inputs span many
 * workspace rounds. Every rank must count the same rounds, and results must be exact. */
typedef struct {
  symcoll_comm_t comm;
  int bad;
} mixed_arg_t;
static void *mixed_rank(void *p) {
  mixed_arg_t *a = p;
  const int rank = symcoll_comm_rank(a->comm);
  const size_t n = 100000; /* 400 KB of fp32 through an 8 KB workspace */
  symcoll_mem_t mem;
  a->bad = symcoll_mem_alloc(a->comm, n * sizeof(float), &mem) != SYMCOLL_OK;
  if (a->bad) return NULL;
  float *sym = symcoll_mem_ptr(mem, rank), *plain = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
  for (int call = 0; call < 6 && !a->bad; call++) {
    float *in = (rank + call) % 2 == 0 ? sym : plain; /* who is zero-copy alternates */
    for (size_t i = 0; i < n; i++) in[i] = (float)((i + (size_t)call) % 13) * (float)(rank + 1);
    memset(out, 0xff, n * sizeof(float));
    symcoll_coll_opts_t o;
    symcoll_coll_opts_init(&o);
    o.algo = SYMCOLL_ALGO_ONE_SHOT;
    if (symcoll_all_reduce_ex(a->comm, in, out, n, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL, &o) != SYMCOLL_OK) a->bad = 1;
    for (size_t i = 0; i < n && !a->bad; i++)
      if (out[i] != (float)((i + (size_t)call) % 13) * 3.0f) a->bad = 1;
  }
  free(plain);
  free(out);
  symcoll_mem_free(mem);
  return NULL;
}

static void test_mixed_zero_copy(void **state) {
  (void)state;
  symcoll_comm_t comms[2];
  create_two_with_env("SYMCOLL_WORKSPACE_BYTES", "8192", comms);
  mixed_arg_t a[2] = {{comms[0], 1}, {comms[1], 1}};
  pthread_t t[2];
  for (int r = 0; r < 2; r++) pthread_create(&t[r], NULL, mixed_rank, &a[r]);
  for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
  for (int r = 0; r < 2; r++) {
    assert_int_equal(a[r].bad, 0);
    symcoll_comm_destroy(comms[r]);
  }
}

/* symcoll_mem_register and the framework allocator where they cannot run: every rank refuses,
 * the same way, nothing registered; bad arguments refused; shareable memory on CPU builds. */
static int register_rank(symcoll_comm_t comm, const th_buf_ops_t *ops, void *arg) {
  (void)ops, (void)arg;
  int bad = 0;
  char buf[256];
  symcoll_mem_t mem = NULL;
  size_t off = 7;
  bad += symcoll_mem_register(comm, NULL, 256, &mem) != SYMCOLL_ERR_INVALID_ARGUMENT;
  bad += symcoll_mem_register(comm, buf, 0, &mem) != SYMCOLL_ERR_INVALID_ARGUMENT;
  bad += symcoll_mem_register(comm, buf, sizeof buf, &mem) != SYMCOLL_ERR_UNSUPPORTED || mem != NULL;
  /* a size that differs between ranks: MISMATCH, before any transport work */
  bad += symcoll_mem_register(comm, buf, 128 + (size_t)symcoll_comm_rank(comm), &mem) != SYMCOLL_ERR_MISMATCH;
  bad += symcoll_mem_lookup(comm, buf, sizeof buf, &off) != NULL || off != 0;
  symcoll_mem_t sym;
  if (symcoll_mem_alloc(comm, 4096, &sym) != SYMCOLL_OK) return bad + 1;
  char *p = symcoll_mem_ptr(sym, symcoll_comm_rank(comm));
  bad += symcoll_mem_lookup(comm, p + 100, 50, &off) != sym || off != 100;
  bad += symcoll_mem_lookup(comm, p + 4000, 200, &off) != NULL;     /* runs past its end */
  bad += symcoll_pool_attach(comm) != SYMCOLL_ERR_INVALID_ARGUMENT; /* a CPU communicator */
  bad += symcoll_pool_alloc(1024, 0, NULL) != NULL;                 /* nothing attached */
  symcoll_pool_free(NULL, 0, 0, NULL);
  bad += symcoll_mem_free(sym) != SYMCOLL_OK;
  return bad;
}

static void test_register_refusals(void **state) {
  (void)state;
  void *p = NULL;
  assert_int_equal(symcoll_mem_free_shareable(&p), SYMCOLL_ERR_INVALID_ARGUMENT); /* not one of its own */
  assert_int_equal(symcoll_mem_alloc_shareable(-1, 64, &p), SYMCOLL_ERR_INVALID_ARGUMENT);
  th_launch_t l = {"host", "thread", 2, 0, 60};
  assert_int_equal(th_run(&l, register_rank, NULL), 0);
}

static void count_knob(const char *name, const char *dflt, const char *help, void *arg) {
  assert_int_equal(strncmp(name, "SYMCOLL_", 8), 0);
  assert_non_null(dflt);
  assert_true(strlen(help) > 5);
  ++*(int *)arg;
}
static void test_env_table(void **state) {
  (void)state;
  int n = 0;
  symcoll_env_foreach(count_knob, &n);
  assert_true(n >= 10);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--class-pick")) return class_pick_main(atoi(argv[2]));
  if (!realpath("/proc/self/exe", self_path)) snprintf(self_path, sizeof self_path, "%s", argv[0]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_strings),
      cmocka_unit_test(test_config_errors),
      cmocka_unit_test(test_bad_collective_args),
      cmocka_unit_test(test_from_env),
      cmocka_unit_test(test_rank_conflicts),
      cmocka_unit_test(test_check_mismatch),
      cmocka_unit_test(test_env_table),
      cmocka_unit_test(test_two_jobs_at_once),
      cmocka_unit_test(test_strangers_refused),
      cmocka_unit_test(test_tuning_table),
      cmocka_unit_test(test_nccl_without_engine),
      cmocka_unit_test(test_mixed_zero_copy),
      cmocka_unit_test(test_register_refusals),
      cmocka_unit_test(test_barrier),
      cmocka_unit_test(test_refusals_say_why),
      cmocka_unit_test(test_calls_out_of_step),
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_tuning_classes),
  };
  return cmocka_run_group_tests_name("api", tests, NULL, NULL);
}
