/*
 * Faults: ranks killed during bootstrap, during symcoll_mem_alloc and between collectives;
 * a rank that never calls; an abort from another thread. Each asserts the exact status, a
 * bound on time, that a fresh communicator works afterwards, and that nothing is left behind.
 *   test_fault [--backend host|cuda]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#define TIMEOUT_MS 2000
static const char *backend = "host";

typedef struct {
  symcoll_status_t create, alloc, coll; /* the first failure of each stage, or OK */
  int colls_done;
  double fail_after_s; /* time from the start of the failing call to its return */
} outcome_t;

/* The configuration of one rank of a process-mode job on CPU ranks. */
static symcoll_config_t rank_config(const char *job, int rank, int nranks) {
  symcoll_config_t cfg;
  symcoll_config_init(&cfg);
  cfg.job_id = job;
  cfg.rank = rank;
  cfg.nranks = nranks;
  return cfg;
}

/* One call of `coll`, in place over buf (nranks x 1024 floats). */
static symcoll_status_t one_call(symcoll_comm_t comm, symcoll_coll_t coll, float *buf, void *stream) {
  const int r = symcoll_comm_rank(comm);
  const int n = symcoll_comm_nranks(comm);
  symcoll_matmul_opts_t mo;
  symcoll_matmul_opts_init(&mo);
  mo.algo = SYMCOLL_ALGO_OVERLAP;
  switch (coll) {
    case SYMCOLL_COLL_ALL_GATHER_MATMUL: /* 8 x 32 shard, 32 x 16 B, 8n x 16 C */
      return symcoll_all_gather_matmul(comm, buf, buf + 1024, buf + 2048, 8, 16, 32, SYMCOLL_FLOAT32, &mo, stream);
    case SYMCOLL_COLL_MATMUL_REDUCE_SCATTER: /* 8n x 16 A, 16 x 16 B, 8 x 16 C */
      return symcoll_matmul_reduce_scatter(comm, buf, buf + 1024, buf + 2048, 8 * (size_t)n, 16, 16, SYMCOLL_FLOAT32,
                                           &mo, stream);
    case SYMCOLL_COLL_ALL_GATHER:
      return symcoll_all_gather(comm, buf + r * 1024, buf, 1024, SYMCOLL_FLOAT32, stream);
    case SYMCOLL_COLL_REDUCE_SCATTER:
      return symcoll_reduce_scatter(comm, buf, buf + r * 1024, 1024, SYMCOLL_FLOAT32, SYMCOLL_SUM, stream);
    case SYMCOLL_COLL_BROADCAST:
      return symcoll_broadcast(comm, buf, buf, 4096, SYMCOLL_FLOAT32, 0, stream);
    case SYMCOLL_COLL_REDUCE:
      return symcoll_reduce(comm, buf, buf, 4096, SYMCOLL_FLOAT32, SYMCOLL_AVG, 0, stream);
    case SYMCOLL_COLL_ALL_TO_ALL:
      return symcoll_all_to_all(comm, buf, buf, 1024, SYMCOLL_FLOAT32, stream);
    default:
      return symcoll_all_reduce(comm, buf, buf, 4096, SYMCOLL_FLOAT32, SYMCOLL_SUM, stream);
  }
}

/* Each rank: create, allocate, then `ncoll` calls of `coll`; reports through a pipe. */
static void run_job_of(symcoll_coll_t coll, int nranks, const char *fault, int sleep_rank, int ncoll, outcome_t *out) {
  char job[64];
  th_job_id(job, sizeof job, "fault");
  int pipes[SYMCOLL_MAX_RANKS][2];
  pid_t pids[SYMCOLL_MAX_RANKS];
  fflush(NULL);
  for (int r = 0; r < nranks; r++) {
    if (pipe(pipes[r]) != 0) abort();
    if ((pids[r] = fork()) == 0) {
      if (fault) setenv("SYMCOLL_FAULT", fault, 1);
      outcome_t o = {SYMCOLL_OK, SYMCOLL_OK, SYMCOLL_OK, 0, 0};
      const th_buf_ops_t *ops = &th_host_ops;
      const char *why;
      int dev = SYMCOLL_DEVICE_HOST;
      if (!strcmp(backend, "cuda")) {
        ops = th_cuda_ops(&why);
        dev = 0;
        ops->bind(0);
      }
      symcoll_config_t cfg = rank_config(job, r, nranks);
      cfg.device = dev;
      cfg.timeout_ms = TIMEOUT_MS;
      symcoll_comm_t comm = NULL;
      double t = th_now();
      o.create = symcoll_comm_create(&cfg, &comm);
      o.fail_after_s = th_now() - t;
      symcoll_mem_t mem = NULL;
      if (o.create == SYMCOLL_OK) {
        t = th_now();
        o.alloc = symcoll_mem_alloc(comm, 1 << 16, &mem);
        o.fail_after_s = th_now() - t;
      }
      if (o.create == SYMCOLL_OK && o.alloc == SYMCOLL_OK) {
        if (r == sleep_rank) {
          usleep((TIMEOUT_MS + 1500) * 1000); /* never calls the collective */
        } else {
          float *buf = ops->alloc((size_t)(nranks < 4 ? 4 : nranks) * 1024 * sizeof(float));
          for (int i = 0; i < ncoll && o.coll == SYMCOLL_OK; i++) {
            t = th_now();
            o.coll = one_call(comm, coll, buf, ops->stream());
            ops->sync();
            if (o.coll == SYMCOLL_OK) o.coll = symcoll_comm_check(comm);
            o.fail_after_s = th_now() - t;
            if (o.coll == SYMCOLL_OK) o.colls_done++;
          }
          ops->free(buf);
        }
        /* Nobody leaves before everyone has checked: a peer's exit, even after a clean
         * destroy, is a lost peer to a rank that checks later. */
        symcoll_comm_barrier(comm);
      }
      if (comm) symcoll_comm_destroy(comm);
      if (write(pipes[r][1], &o, sizeof o) != sizeof o) _exit(3);
      _exit(0);
    }
    close(pipes[r][1]);
  }
  for (int r = 0; r < nranks; r++) {
    memset(&out[r], 0, sizeof out[r]);
    out[r].create = (symcoll_status_t)1; /* "no report": the rank was killed */
    if (read(pipes[r][0], &out[r], sizeof out[r]) != sizeof out[r]) out[r].create = (symcoll_status_t)1;
    close(pipes[r][0]);
    waitpid(pids[r], NULL, 0);
  }
  assert_int_equal(th_leftovers(job), 0);
  assert_int_equal(th_leftovers(NULL), 0);
}

static void run_job(int nranks, const char *fault, int sleep_rank, int ncoll, outcome_t *out) {
  run_job_of(SYMCOLL_COLL_ALL_REDUCE, nranks, fault, sleep_rank, ncoll, out);
}

#define LOST_OR_TIMEOUT(s) ((s) == SYMCOLL_ERR_PEER_LOST || (s) == SYMCOLL_ERR_TIMEOUT)
#define BOUND_S (TIMEOUT_MS / 1000.0 + 1.0)

static void test_killed_in_bootstrap(void **state) {
  (void)state;
  outcome_t o[3];
  run_job(3, "boot:2", -1, 1, o);
  assert_int_equal(o[2].create, 1); /* killed */
  for (int r = 0; r < 2; r++) {
    print_message("rank %d: %s after %.3f s\n", r, symcoll_status_string(o[r].create), o[r].fail_after_s);
    assert_true(LOST_OR_TIMEOUT(o[r].create));
    assert_true(o[r].fail_after_s < BOUND_S);
  }
}

static void test_never_joins(void **state) {
  (void)state;
  outcome_t o[3];
  run_job(3, "boot:2:0", -1, 1, o); /* :0 never fires: everyone joins */
  for (int r = 0; r < 3; r++) assert_int_equal(o[r].coll, SYMCOLL_OK);
  /* Rank 2 killed right after it connects, before it is welcomed. */
  run_job(2, "boot:1", -1, 1, o);
  print_message("rank 0: %s after %.3f s\n", symcoll_status_string(o[0].create), o[0].fail_after_s);
  assert_true(LOST_OR_TIMEOUT(o[0].create));
  assert_true(o[0].fail_after_s < BOUND_S);
}

static void test_killed_in_alloc(void **state) {
  (void)state;
  outcome_t o[3];
  run_job(3, "alloc:1:2", -1, 1, o); /* 1st alloc is the workspace, 2nd the test's */
  assert_int_equal(o[1].create, 1);
  for (int r = 0; r < 3; r += 2) {
    print_message("rank %d: %s after %.3f s\n", r, symcoll_status_string(o[r].alloc), o[r].fail_after_s);
    assert_int_equal(o[r].create, SYMCOLL_OK);
    assert_true(LOST_OR_TIMEOUT(o[r].alloc));
    assert_true(o[r].fail_after_s < BOUND_S);
  }
}

static void test_killed_between_collectives(void **state) {
  (void)state;
  outcome_t o[4];
  run_job(4, "coll:3:20", -1, 50, o);
  assert_int_equal(o[3].create, 1);
  for (int r = 0; r < 3; r++) {
    print_message("rank %d: %d collectives, then %s after %.3f s\n", r, o[r].colls_done,
                  symcoll_status_string(o[r].coll), o[r].fail_after_s);
    assert_true(o[r].colls_done >= 18 && o[r].colls_done <= 20);
    assert_true(LOST_OR_TIMEOUT(o[r].coll));
    assert_true(o[r].fail_after_s < BOUND_S);
  }
}

static void test_rank_never_calls(void **state) {
  (void)state;
  outcome_t o[2];
  run_job(2, NULL, 1, 1, o);
  print_message("rank 0: %s after %.3f s\n", symcoll_status_string(o[0].coll), o[0].fail_after_s);
  assert_int_equal(o[0].coll, SYMCOLL_ERR_TIMEOUT);
  assert_true(o[0].fail_after_s >= TIMEOUT_MS / 1000.0 - 0.05);
  assert_true(o[0].fail_after_s < BOUND_S);
}

/* The same faults inside the other collectives and the GEMM operations: rank 2 of 4 killed at
 * its 10th call; rank 1 of 3 never calling. */
static void killed_at_10th(symcoll_coll_t coll) {
  outcome_t o[4];
  run_job_of(coll, 4, "coll:2:10", -1, 30, o);
  assert_int_equal(o[2].create, 1);
  for (int r = 0; r < 4; r++) {
    if (r == 2) continue;
    print_message("rank %d: %d calls of %s, then %s after %.3f s\n", r, o[r].colls_done, symcoll_coll_name(coll),
                  symcoll_status_string(o[r].coll), o[r].fail_after_s);
    assert_true(o[r].colls_done >= 8 && o[r].colls_done <= 10);
    assert_true(LOST_OR_TIMEOUT(o[r].coll));
    assert_true(o[r].fail_after_s < BOUND_S);
  }
}

static void never_calls(symcoll_coll_t coll) {
  outcome_t o[3];
  run_job_of(coll, 3, NULL, 1, 1, o);
  for (int r = 0; r < 3; r += 2) {
    print_message("rank %d: %s after %.3f s\n", r, symcoll_status_string(o[r].coll), o[r].fail_after_s);
    /* Both time out; one that times out a moment later may first see the other one leave. */
    assert_true(LOST_OR_TIMEOUT(o[r].coll));
    assert_true(o[r].fail_after_s >= TIMEOUT_MS / 1000.0 - 0.05);
    assert_true(o[r].fail_after_s < BOUND_S);
  }
}

static void test_killed_in_all_gather(void **state) {
  (void)state;
  killed_at_10th(SYMCOLL_COLL_ALL_GATHER);
}
static void test_never_calls_reduce_scatter(void **state) {
  (void)state;
  never_calls(SYMCOLL_COLL_REDUCE_SCATTER);
}
/* Rooted collectives: a rank other than the root dies, or never comes; the root and the other
 * ranks still fail within the bound (the root reuses staging only once every peer is done). */
static void test_killed_in_broadcast(void **state) {
  (void)state;
  killed_at_10th(SYMCOLL_COLL_BROADCAST);
}
static void test_never_calls_reduce(void **state) {
  (void)state;
  never_calls(SYMCOLL_COLL_REDUCE);
}
static void test_killed_in_all_to_all(void **state) {
  (void)state;
  killed_at_10th(SYMCOLL_COLL_ALL_TO_ALL);
}
static void test_never_calls_broadcast(void **state) {
  (void)state;
  never_calls(SYMCOLL_COLL_BROADCAST);
}
static void test_killed_in_all_gather_matmul(void **state) {
  (void)state;
  killed_at_10th(SYMCOLL_COLL_ALL_GATHER_MATMUL);
}
static void test_never_calls_matmul_reduce_scatter(void **state) {
  (void)state;
  never_calls(SYMCOLL_COLL_MATMUL_REDUCE_SCATTER);
}

/* A peer's death is reported by symcoll_comm_check even while no call waits for it. */
static void test_check_reports_dead_peer(void **state) {
  (void)state;
  if (strcmp(backend, "host") != 0) skip();
  char job[64];
  th_job_id(job, sizeof job, "check");
  fflush(NULL);
  pid_t peer = fork();
  if (peer == 0) {
    symcoll_config_t cfg = rank_config(job, 1, 2);
    symcoll_comm_t comm;
    if (symcoll_comm_create(&cfg, &comm) == SYMCOLL_OK) raise(SIGKILL);
    _exit(1);
  }
  symcoll_config_t cfg = rank_config(job, 0, 2);
  symcoll_comm_t comm;
  assert_int_equal(symcoll_comm_create(&cfg, &comm), SYMCOLL_OK);
  waitpid(peer, NULL, 0);
  double t0 = th_now();
  symcoll_status_t s = SYMCOLL_OK;
  while ((s = symcoll_comm_check(comm)) == SYMCOLL_OK && th_now() - t0 < 2.0) usleep(1000);
  print_message("check: %s %.1f ms after the peer died\n", symcoll_status_string(s), (th_now() - t0) * 1e3);
  assert_int_equal(s, SYMCOLL_ERR_PEER_LOST);
  assert_true(th_now() - t0 < 0.2);
  float x = 1; /* and the next collective is refused at once */
  assert_int_equal(symcoll_all_reduce(comm, &x, &x, 1, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL), SYMCOLL_ERR_PEER_LOST);
  assert_int_equal(symcoll_comm_destroy(comm), SYMCOLL_OK);
}

typedef struct {
  symcoll_comm_t comm;
  symcoll_status_t status;
  double returned;
} abort_arg_t;
static void *waiting_rank(void *p) {
  abort_arg_t *a = p;
  float x[256] = {0};
  a->status = symcoll_all_reduce(a->comm, x, x, 256, SYMCOLL_FLOAT32, SYMCOLL_SUM, NULL);
  a->returned = th_now();
  return NULL;
}

static void test_abort_from_thread(void **state) {
  (void)state;
  if (strcmp(backend, "host") != 0) skip();
  symcoll_comm_t comms[2];
  assert_int_equal(symcoll_comm_create_all(2, NULL, comms), SYMCOLL_OK);
  abort_arg_t a = {comms[0], SYMCOLL_OK, 0};
  pthread_t t;
  pthread_create(&t, NULL, waiting_rank, &a); /* rank 1 never joins the call */
  usleep(300 * 1000);
  double t0 = th_now();
  assert_int_equal(symcoll_comm_abort(comms[0]), SYMCOLL_OK);
  pthread_join(t, NULL);
  print_message("abort: %s %.1f ms after symcoll_comm_abort\n", symcoll_status_string(a.status),
                (a.returned - t0) * 1e3);
  assert_int_equal(a.status, SYMCOLL_ERR_ABORTED);
  assert_true(a.returned - t0 < 0.1);
  assert_int_equal(symcoll_comm_check(comms[0]), SYMCOLL_ERR_ABORTED);
  for (int r = 0; r < 2; r++) assert_int_equal(symcoll_comm_destroy(comms[r]), SYMCOLL_OK);
  /* A new communicator in the same process works. */
  assert_int_equal(symcoll_comm_create_all(2, NULL, comms), SYMCOLL_OK);
  for (int r = 0; r < 2; r++) symcoll_comm_destroy(comms[r]);
  outcome_t o[2];
  run_job(2, NULL, -1, 3, o);
  for (int r = 0; r < 2; r++) assert_int_equal(o[r].colls_done, 3);
}

int main(int argc, char **argv) {
  setenv("OPENBLAS_NUM_THREADS", "1", 0); /* ranks share the cores */
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--backend")) backend = argv[i + 1];
  if (th_skip_without_gpu(backend)) return TH_SKIP;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_killed_in_bootstrap),
      cmocka_unit_test(test_never_joins),
      cmocka_unit_test(test_killed_in_alloc),
      cmocka_unit_test(test_killed_between_collectives),
      cmocka_unit_test(test_rank_never_calls),
      cmocka_unit_test(test_abort_from_thread),
      cmocka_unit_test(test_check_reports_dead_peer),
      cmocka_unit_test(test_killed_in_all_gather),
      cmocka_unit_test(test_never_calls_reduce_scatter),
      cmocka_unit_test(test_killed_in_broadcast),
      cmocka_unit_test(test_never_calls_reduce),
      cmocka_unit_test(test_killed_in_all_to_all),
      cmocka_unit_test(test_never_calls_broadcast),
      cmocka_unit_test(test_killed_in_all_gather_matmul),
      cmocka_unit_test(test_never_calls_matmul_reduce_scatter),
  };
  return cmocka_run_group_tests_name("fault", tests, NULL, NULL);
}
