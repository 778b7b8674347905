/* Ranks configured differently: a launcher that sets a knob on some ranks only (or a rank
 * that reads another tuning file). Two processes, each with its own value of one knob, make a
 * communicator and run all_reduce, all_gather and reduce_scatter of exact-result data over
 * sizes that cross the algorithms' bounds, in place and out of place. Each case must end
 * alike on both ranks: every call right, or the communicator (or a call) refused with
 * MISMATCH on both. Never a wrong element, never a timeout.
 *   test_env_skew --backend host|cuda */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "launch.h"

enum { RIGHT = 1, REFUSED, WRONG, FAILED };
static const char *const outcome_names[] = {"-", "right", "refused (MISMATCH)", "WRONG", "failed"};

typedef struct {
  const char *name;     /* the knob */
  const char *value[2]; /* rank 0's and rank 1's; NULL: unset */
  const char *both[2];  /* a knob and its value set on both ranks first, or NULL */
  bool may_refuse;      /* MISMATCH on both ranks is an answer too */
} skew_case_t;

typedef struct {
  const skew_case_t *c;
  const th_buf_ops_t *ops;
  bool gpu;
  char job[64];
  int *outcome; /* shared with the parent: one per rank */
  char *why;    /* shared: each rank's first problem, 256 bytes each */
} skew_run_t;

/* Element i of rank r's input: small whole numbers, so every sum is exact in fp32. */
static float input_of(int r, size_t i) {
  return (float)((r + 1) * (int)(i % 13 + 1));
}

/* One call of `coll` over count elements a rank (all_gather: count each; reduce_scatter: count
 * each of the output); returns RIGHT, REFUSED, WRONG or FAILED with why. */
static int one_call(skew_run_t *x, symcoll_comm_t comm, int coll, size_t count, bool inplace, char *why) {
  const th_buf_ops_t *ops = x->ops;
  const int rank = symcoll_comm_rank(comm), n = symcoll_comm_nranks(comm);
  const size_t in_n = coll == 2 ? count * (size_t)n : count, out_n = coll == 1 ? count * (size_t)n : count;
  const size_t bytes = (in_n > out_n ? in_n : out_n) * sizeof(float);
  float *h = malloc(bytes), *want = malloc(out_n * sizeof(float));
  char *in = ops->alloc(bytes), *out = inplace ? in : ops->alloc(bytes);
  int res = FAILED;
  if (!h || !want || !in || !out) {
    snprintf(why, 256, "out of memory");
    goto done;
  }
  const size_t blk = (size_t)rank * count * sizeof(float); /* this rank's block of an n-block buffer */
  const char *src = inplace && coll == 1 ? in + blk : in;
  char *dst = !inplace ? out : coll == 2 ? in + blk : in;
  for (size_t i = 0; i < bytes / sizeof(float); i++) h[i] = -1.0f; /* poison: what no rank wrote */
  if (inplace && coll == 1) /* all_gather in place: the input is this rank's block of the output */
    for (size_t i = 0; i < count; i++) h[rank * count + i] = input_of(rank, i);
  else
    for (size_t i = 0; i < in_n; i++) h[i] = input_of(rank, i);
  ops->to_dev(in, h, bytes);
  if (!inplace) {
    for (size_t i = 0; i < bytes / sizeof(float); i++) h[i] = -1.0f;
    ops->to_dev(out, h, bytes);
  }
  symcoll_status_t s =
      coll == 0   ? symcoll_all_reduce(comm, src, dst, count, SYMCOLL_FLOAT32, SYMCOLL_SUM, ops->stream())
      : coll == 1 ? symcoll_all_gather(comm, src, dst, count, SYMCOLL_FLOAT32, ops->stream())
                  : symcoll_reduce_scatter(comm, src, dst, count, SYMCOLL_FLOAT32, SYMCOLL_SUM, ops->stream());
  ops->sync();
  if (s == SYMCOLL_OK) s = symcoll_comm_check(comm);
  if (s != SYMCOLL_OK) {
    res = s == SYMCOLL_ERR_MISMATCH ? REFUSED : FAILED;
    snprintf(why, 256, "%s of %zu%s: %s",
             coll == 0   ? "all_reduce"
             : coll == 1 ? "all_gather"
                         : "reduce_scatter",
             count, inplace ? " in place" : "", symcoll_status_string(s));
    goto done;
  }
  for (size_t i = 0; i < out_n; i++) {
    float w = 0;
    if (coll == 1) /* block q of the output: rank q's input */
      w = input_of((int)(i / count), i % count);
    else
      for (int q = 0; q < n; q++) w += input_of(q, coll == 2 ? (size_t)rank * count + i : i);
    want[i] = w;
  }
  ops->to_host(h, dst, out_n * sizeof(float));
  res = RIGHT;
  for (size_t i = 0; i < out_n; i++)
    if (h[i] != want[i]) {
      res = WRONG;
      snprintf(why, 256, "%s of %zu%s: element %zu is %g, not %g",
               coll == 0   ? "all_reduce"
               : coll == 1 ? "all_gather"
                           : "reduce_scatter",
               count, inplace ? " in place" : "", i, (double)h[i], (double)want[i]);
      break;
    }
done:
  if (in) ops->free(in);
  if (out && out != in) ops->free(out);
  free(h), free(want);
  return res;
}

static int skew_rank(int r, void *p) {
  skew_run_t *x = p;
  const skew_case_t *c = x->c;
  char *why = x->why + 256 * r;
  int *outcome = &x->outcome[r];
  *outcome = FAILED;
  if (c->both[0]) setenv(c->both[0], c->both[1], 1);
  if (c->value[r])
    setenv(c->name, c->value[r], 1);
  else
    unsetenv(c->name);
  const int dev = x->gpu ? 0 : SYMCOLL_DEVICE_HOST;
  if (x->ops->bind(dev) != 0) {
    snprintf(why, 256, "no device");
    return 0;
  }
  symcoll_config_t cfg;
  symcoll_config_init(&cfg);
  cfg.job_id = x->job, cfg.rank = r, cfg.nranks = 2, cfg.device = dev, cfg.timeout_ms = 5000;
  symcoll_comm_t comm;
  symcoll_status_t s = symcoll_comm_create(&cfg, &comm);
  if (s != SYMCOLL_OK) {
    *outcome = s == SYMCOLL_ERR_MISMATCH ? REFUSED : FAILED;
    snprintf(why, 256, "comm_create: %s", symcoll_status_string(s));
    return 0;
  }
  /* 1 element to 4 MiB a rank: across LL / one-shot / two-shot bounds and the workspace's rounds. */
  const size_t counts[] = {1, 7, 1000, 16387, 131072, 1048576};
  int res = RIGHT;
  for (int coll = 0; coll < 3 && res == RIGHT; coll++)
    for (size_t k = 0; k < sizeof counts / sizeof counts[0] && res == RIGHT; k++)
      for (int inplace = 0; inplace < 2 && res == RIGHT; inplace++)
        res = one_call(x, comm, coll, counts[k], inplace, why);
  symcoll_comm_destroy(comm);
  *outcome = res;
  return 0;
}

/* Runs one case; returns 1 when it failed (printed). */
static int run_case(const skew_case_t *c, const th_buf_ops_t *ops, bool gpu, int *shared, char *why) {
  skew_run_t x = {.c = c, .ops = ops, .gpu = gpu, .outcome = shared, .why = why};
  th_job_id(x.job, sizeof x.job, "skew");
  shared[0] = shared[1] = 0;
  memset(why, 0, 512);
  const sc_ranks_result_t res = sc_fork_ranks(2, skew_rank, &x, 120);
  const int a = shared[0], b = shared[1];
  const bool ok =
      !res.timed_out && !res.signaled && res.sum == 0 && a == b && (a == RIGHT || (a == REFUSED && c->may_refuse));
  printf("%s %s=%s | %s%s%s%s%s: rank 0 %s, rank 1 %s%s\n", ok ? "ok  " : "FAIL", c->name,
         c->value[0] ? c->value[0] : "(unset)", c->value[1] ? c->value[1] : "(unset)", c->both[0] ? ", both " : "",
         c->both[0] ? c->both[0] : "", c->both[0] ? "=" : "", c->both[0] ? c->both[1] : "",
         outcome_names[a < 0 || a > FAILED ? 0 : a], outcome_names[b < 0 || b > FAILED ? 0 : b],
         res.timed_out ? " (killed after 120 s)" : "");
  for (int r = 0; r < 2; r++)
    if (why[256 * r]) printf("       rank %d: %s\n", r, why + 256 * r);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  th_launch_t l = {.backend = "host", .mode = "process", .nranks = 2};
  for (int i = 1; i < argc; i++)
    if (!th_launch_arg(&l, argc, argv, &i)) {
      fprintf(stderr, "usage: test_env_skew --backend host|cuda\n");
      return 2;
    }
  if (th_skip_without_gpu(l.backend)) return TH_SKIP;
  const bool gpu = !strcmp(l.backend, "cuda");
  const char *why_none = NULL;
  const th_buf_ops_t *ops = gpu ? th_cuda_ops(&why_none) : &th_host_ops;
  if (gpu) setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  /* A tuning table that one rank reads and the other does not. */
  char table[] = "/tmp/symcoll-skew-XXXXXX";
  const int fd = mkstemp(table);
  if (fd < 0) return 1;
  const char *rows = "host * * inf twoshot\ncuda * * inf twoshot\n";
  if (write(fd, rows, strlen(rows)) != (ssize_t)strlen(rows)) return 1;
  close(fd);
  const skew_case_t host_cases[] = {
      {"SYMCOLL_ALGO", {"oneshot", "twoshot"}, {NULL, NULL}, false}, /* rank 0's is everyone's */
      {"SYMCOLL_ALGO", {"all_gather:push", "all_gather:pull"}, {NULL, NULL}, false},
      {"SYMCOLL_ALGO", {"lamport", NULL}, {NULL, NULL}, false},
      {"SYMCOLL_ALGO", {NULL, "lamport"}, {NULL, NULL}, false},
      {"SYMCOLL_TUNE_FILE", {table, NULL}, {NULL, NULL}, false},
      {"SYMCOLL_TUNE_FILE", {NULL, table}, {NULL, NULL}, false},
      {"SYMCOLL_WORKSPACE_BYTES", {"64K", "1M"}, {NULL, NULL}, true},
      {"SYMCOLL_CHECK", {"1", "0"}, {NULL, NULL}, true},
      {"SYMCOLL_HOST_SIMD", {"scalar", NULL}, {NULL, NULL}, false},
      {"SYMCOLL_TIMEOUT_MS", {"2000", "20000"}, {NULL, NULL}, false},
      {"SYMCOLL_NODE_RANKS", {"1", NULL}, {NULL, NULL}, true},
      {"SYMCOLL_ENGINE", {"symcoll", "mpi"}, {"SYMCOLL_NODE_RANKS", "1"}, true},
  };
  const skew_case_t cuda_cases[] = {
      {"SYMCOLL_GPU_TWO_SHOT_PUSH_BYTES", {"0", "1G"}, {"SYMCOLL_ALGO", "twoshot"}, false},
      {"SYMCOLL_GPU_TWO_SHOT_PUSH_BYTES", {"64K", NULL}, {"SYMCOLL_ALGO", "twoshot"}, false},
      {"SYMCOLL_GPU_MAX_BLOCKS", {"3", NULL}, {NULL, NULL}, false},
      {"SYMCOLL_ALGO", {"oneshot", "twoshot"}, {NULL, NULL}, false},
      {"SYMCOLL_ALGO", {"lamport", NULL}, {NULL, NULL}, false},
      {"SYMCOLL_ALGO", {NULL, "lamport"}, {NULL, NULL}, false},
      {"SYMCOLL_TUNE_FILE", {table, NULL}, {NULL, NULL}, false},
      {"SYMCOLL_TUNE_FILE", {NULL, table}, {NULL, NULL}, false},
      {"SYMCOLL_WORKSPACE_BYTES", {"1M", "4M"}, {NULL, NULL}, true},
      {"SYMCOLL_CHECK", {"1", "0"}, {NULL, NULL}, true},
      {"SYMCOLL_NCCL", {"1", "0"}, {NULL, NULL}, false},
      {"SYMCOLL_GEMM", {"0", NULL}, {NULL, NULL}, false},
  };
  const skew_case_t *cases = gpu ? cuda_cases : host_cases;
  const size_t ncases = gpu ? sizeof cuda_cases / sizeof cuda_cases[0] : sizeof host_cases / sizeof host_cases[0];
  int *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return 1;
  char *why = (char *)(shared + 16);
  int failed = 0;
  for (size_t i = 0; i < ncases; i++) failed += run_case(&cases[i], ops, gpu, shared, why);
  unlink(table);
  printf("%d of %zu cases failed\n", failed, ncases);
  return failed ? 1 : 0;
}
