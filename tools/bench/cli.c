/* The command line of symcoll-bench and symcoll-tune: the options and their defaults, --help,
 * --env, the default columns of each collective, and the checks before any rank starts. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

bench_opts_t bench_opts;

static size_t parse_size(const char *s) {
  char *end;
  double v = strtod(s, &end);
  switch (*end) {
    case 'k':
    case 'K':
      v *= 1024;
      break;
    case 'm':
    case 'M':
      v *= 1024 * 1024;
      break;
    case 'g':
    case 'G':
      v *= 1024.0 * 1024 * 1024;
      break;
  }
  return (size_t)v;
}

static void print_env(const char *name, const char *dflt, const char *help, void *arg) {
  (void)arg;
  printf("%-26s %-8s %s\n", name, *dflt ? dflt : "(unset)", help);
}

static void usage(const char *argv0) {
  printf(
      "usage: %s [options]\n"
      "  --coll all_reduce|all_gather|reduce_scatter|broadcast|reduce|all_to_all   the collective\n"
      "                     (default all_reduce)\n"
      "  --coll all_gather_matmul|matmul_reduce_scatter --shapes helion|kraken|all|small|M,N,K\n"
      "                     the fused GEMM operations over shapes (per-rank M; default all on GPUs)\n"
      "  --coll all_reduce_rmsnorm --shapes all|small|ROWS,HIDDEN\n"
      "                     the fused all-reduce + add + RMSNorm against the unfused chain (default all)\n"
      "  --coll reduce_scatter_rmsnorm --shapes ...   its reduce-scatter form (ROWS per rank)\n"
      "  --fp8 static|rows  all_reduce_rmsnorm's FP8 (e4m3) output, with one static scale or a scale per\n"
      "                     row, against the chain with a separate quantisation pass\n"
      "  --coll barrier     GPU: the kernels' barrier round latency (posted epochs against the CAS barrier)\n"
      "  -b SIZE / -e SIZE / -f FACTOR   size range in bytes (K, M, G suffixes) and step factor; the size is\n"
      "                     nccl-tests': all_gather's output, reduce_scatter's and all_to_all's input\n"
      "  -d DTYPE           fp32 fp16 bf16 fp64 int8 uint8 int32 uint32 int64 uint64 fp8_e4m3 fp8_e5m2\n"
      "  -o sum|prod|max|min|avg  -n ITERS  -w WARMUP  -r REPS\n"
      "  --root R           broadcast's and reduce's root (default 0)\n"
      "  -G 0|1             CUDA-graph mode (default 1)\n"
      "  --enqueue          GPU: time on the host clock what issuing -n eager calls costs the caller\n"
      "                     (the launch path: checks, tuning, kernel launch), not the GPU's work\n"
      "  --algo LIST        symcoll columns: auto and the collective's algorithms (default: all of them);\n"
      "                     the norms' fused columns (oneshot|pull, twoshot, lamport, auto; the chain\n"
      "                     and the all-reduce always run); the matmul tables run all theirs\n"
      "  --peers LIST       peer columns: nccl (GPU), mpi (CPU, under mpirun)\n"
      "  --backend cuda|host  --ranks N  --mode process|thread  --inplace\n"
      "  --no-bind          do not pin rank r to the r-th allowed CPU\n"
      "  --send-symmetric   inputs in symmetric memory (symcoll's zero-copy paths)\n"
      "  --csv FILE  --json FILE  --plot FILE.png  --merge A.csv B.csv ... [--title T] (joins tables of one run)\n"
      "  --tune FILE        write the fastest symcoll column per size as a tuning table\n"
      "  --env              print every SYMCOLL_* knob with its default and help\n"
      "Exit codes: 0 done, 2 bad usage, 3 a column gave a wrong result, 4 a call failed (the run ends\n"
      "at the first failed call, on every rank), 77 no GPU for --backend cuda.\n",
      argv0);
}

static const char *default_algos(symcoll_coll_t coll, bool gpu) {
  if (bench_across_nodes()) return "hierarchical,engine,auto";
  switch (coll) {
    case SYMCOLL_COLL_ALL_GATHER:
    case SYMCOLL_COLL_ALL_TO_ALL:
      return gpu ? "pull,push,lamport,copy_engine,auto" : "pull,push,auto";
    case SYMCOLL_COLL_REDUCE_SCATTER:
      return gpu ? "pull,lamport,auto" : "pull,auto";
    case SYMCOLL_COLL_BROADCAST:
      return gpu ? "pull,lamport,copy_engine,auto" : "pull,auto";
    case SYMCOLL_COLL_REDUCE:
      return "oneshot,auto";
    case SYMCOLL_COLL_ALL_REDUCE:
    case SYMCOLL_COLL_ALL_GATHER_MATMUL:
    case SYMCOLL_COLL_MATMUL_REDUCE_SCATTER:
    case SYMCOLL_COLL_ALL_REDUCE_RMSNORM:
    case SYMCOLL_COLL_REDUCE_SCATTER_RMSNORM:
    case SYMCOLL_NUM_COLL_KINDS:
      break;
  }
  return gpu ? "oneshot,oneshot_db,lamport,twoshot,auto" : "oneshot,twoshot,auto";
}

/* The plain collectives, by the name --coll takes (symcoll_coll_name). */
static const bench_coll_t *const bench_colls[] = {&bench_all_reduce, &bench_all_gather, &bench_reduce_scatter,
                                                  &bench_broadcast,  &bench_reduce,     &bench_all_to_all};
#define NUM_BENCH_COLLS (sizeof bench_colls / sizeof bench_colls[0])

/* -d, -o, --coll and --root: whether the value is one (else says why on stderr). */
static bool parse_dtype(const char *d) {
  int found = -1;
  for (int k = 0; k < SYMCOLL_NUM_DTYPES; k++)
    if (!strcmp(d, symcoll_dtype_name((symcoll_dtype_t)k))) found = k;
  if (!strcmp(d, "float")) found = SYMCOLL_FLOAT32;
  if (found < 0) {
    fprintf(stderr, "unknown dtype %s\n", d);
    return false;
  }
  bench_opts.dtype = (symcoll_dtype_t)found;
  return true;
}
static bool parse_op(const char *o) {
  int found = -1;
  for (int k = 0; k < SYMCOLL_NUM_OPS; k++)
    if (!strcmp(o, symcoll_op_name((symcoll_op_t)k))) found = k;
  if (found < 0) {
    fprintf(stderr, "unknown op %s\n", o);
    return false;
  }
  bench_opts.op = (symcoll_op_t)found;
  return true;
}
static bool parse_coll(const char *c) {
  bench_opts_t *o = &bench_opts;
  o->mm = !strcmp(c, "all_gather_matmul")        ? 1
          : !strcmp(c, "matmul_reduce_scatter")  ? 2
          : !strcmp(c, "all_reduce_rmsnorm")     ? 3
          : !strcmp(c, "barrier")                ? 4
          : !strcmp(c, "reduce_scatter_rmsnorm") ? 5
                                                 : 0;
  o->coll = o->mm ? &bench_all_gather : NULL;
  for (size_t k = 0; k < NUM_BENCH_COLLS; k++)
    if (!strcmp(c, symcoll_coll_name(bench_colls[k]->kind))) o->coll = bench_colls[k];
  if (o->coll) return true;
  fprintf(stderr, "unknown collective %s (", c);
  for (size_t k = 0; k < NUM_BENCH_COLLS; k++) fprintf(stderr, "%s, ", symcoll_coll_name(bench_colls[k]->kind));
  fprintf(stderr, "all_gather_matmul, matmul_reduce_scatter, all_reduce_rmsnorm, reduce_scatter_rmsnorm, barrier)\n");
  return false;
}
static bool parse_root(const char *r) {
  bench_opts.root = atoi(r);
  if (bench_opts.root >= 0) return true;
  fprintf(stderr, "--root %d: a rank, >= 0\n", bench_opts.root);
  return false;
}

/* An option that takes a value (a, then v): 1 when it is one and took v, 0 when a is none,
 * -2 when v was bad (said on stderr). */
static int value_option(const char *a, const char *v, bench_args_t *x) {
  bench_opts_t *o = &bench_opts;
  if (!strcmp(a, "-b"))
    o->min_bytes = parse_size(v), x->range_set = 1;
  else if (!strcmp(a, "-e"))
    o->max_bytes = parse_size(v), x->range_set = 1;
  else if (!strcmp(a, "-f"))
    o->step = (size_t)atoi(v);
  else if (!strcmp(a, "-n"))
    o->iters = atoi(v);
  else if (!strcmp(a, "-w"))
    o->warmup = atoi(v), x->warmup_set = 1;
  else if (!strcmp(a, "-r"))
    o->reps = atoi(v), x->reps_set = 1;
  else if (!strcmp(a, "-G"))
    o->graph = atoi(v);
  else if (!strcmp(a, "-d")) {
    if (!parse_dtype(v)) return -2;
  } else if (!strcmp(a, "-o")) {
    if (!parse_op(v)) return -2;
  } else if (!strcmp(a, "--coll")) {
    if (!parse_coll(v)) return -2;
  } else if (!strcmp(a, "--root")) {
    if (!parse_root(v)) return -2;
  } else if (!strcmp(a, "--algo"))
    snprintf(o->algos, sizeof o->algos, "%s", v), x->algos_set = 1, o->algos_set = true;
  else if (!strcmp(a, "--peers"))
    snprintf(o->peers, sizeof o->peers, "%s", v), x->peers_set = 1;
  else if (!strcmp(a, "--backend"))
    o->backend = v;
  else if (!strcmp(a, "--ranks"))
    o->nranks = atoi(v);
  else if (!strcmp(a, "--mode"))
    o->mode = v;
  else if (!strcmp(a, "--csv"))
    o->csv = v;
  else if (!strcmp(a, "--json"))
    o->json = v;
  else if (!strcmp(a, "--plot"))
    o->plot = v;
  else if (!strcmp(a, "--title"))
    x->title = v;
  else if (!strcmp(a, "--tune"))
    o->tune = v;
  else if (!strcmp(a, "--shapes"))
    o->shapes = v;
  else if (!strcmp(a, "--fp8"))
    o->fp8 = v;
  else
    return 0;
  return 1;
}

/* The command line into bench_opts and *x: -1 to go on, else the exit code (help, --env, bad
 * usage). An option that takes a value but comes last is an unknown option. */
static int parse_args(int argc, char **argv, bench_args_t *x) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    const int took = v ? value_option(a, v, x) : 0;
    if (took < 0) return -took;
    if (took) {
      i++;
      continue;
    }
    if (!strcmp(a, "--inplace"))
      bench_opts.inplace = true;
    else if (!strcmp(a, "--send-symmetric"))
      bench_opts.send_symmetric = true;
    else if (!strcmp(a, "--no-bind"))
      bench_opts.bind = false;
    else if (!strcmp(a, "--enqueue"))
      bench_opts.enqueue = true;
    else if (!strcmp(a, "--env")) {
      symcoll_env_foreach(print_env, NULL);
      return 0;
    } else if (!strcmp(a, "--merge")) {
      x->merge = &argv[i + 1];
      while (i + 1 < argc && argv[i + 1][0] != '-') {
        i++;
        x->nmerge++;
      }
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(argv[0]);
      return 0;
    } else {
      fprintf(stderr, "unknown option %s\n", a);
      usage(argv[0]);
      return 2;
    }
  }
  return -1;
}

int bench_cli_parse(int *argc, char ***argv, bench_args_t *x) {
  peer_mpi_init(argc, argv);
  *x = (bench_args_t){.ngpu = bench_report_probe()};
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  bench_opts_t *o = &bench_opts;
  *o = (bench_opts_t){.min_bytes = 8192,
                      .max_bytes = 2 << 20,
                      .step = 2,
                      .coll = &bench_all_reduce,
                      .dtype = SYMCOLL_BFLOAT16,
                      .op = SYMCOLL_SUM,
                      .iters = 20,
                      .warmup = 5,
                      .reps = 20,
                      .graph = 1,
                      .backend = x->ngpu > 0 ? "cuda" : "host",
                      .mode = "process",
                      .bind = true};
  snprintf(o->peers, sizeof o->peers, "%s", peer_mpi_active() ? "mpi" : "nccl");
  o->nranks = x->ngpu > 0 ? x->ngpu : (int)(cores < 2 ? 2 : cores > 8 ? 8 : cores);
  const int parsed = parse_args(*argc, *argv, x);
  if (parsed >= 0) return parsed;
  if (x->merge) return bench_merge(x->nmerge, x->merge, o->csv, o->plot, x->title);
  x->gpu = !strcmp(o->backend, "cuda");
  if (!x->algos_set) snprintf(o->algos, sizeof o->algos, "%s", default_algos(o->coll->kind, x->gpu));
  if (!o->coll->has_op) o->op = SYMCOLL_SUM;
  return -1;
}

int bench_cli_finish(const char *argv0, const bench_args_t *x) {
  bench_opts_t *o = &bench_opts;
  if (o->iters < 1 || o->reps < 1 || o->nranks < 1 || o->nranks > SYMCOLL_MAX_RANKS || o->min_bytes < 1 ||
      o->max_bytes < o->min_bytes) {
    usage(argv0);
    return 2;
  }
  if (x->gpu && x->ngpu == 0) {
    printf("SKIPPED: no GPU here (use --backend host)\n");
    return 77;
  }
  if (o->enqueue) o->graph = 0; /* eager calls: their issue is what is timed */
  if (!x->gpu) {
    o->graph = 0;
    if (!x->warmup_set) o->warmup = 20; /* first touches of new pages dominate otherwise */
    if (!x->reps_set) o->reps = 100;
  }
  /* Thread-mode ranks sharing a GPU need a hardware queue per stream (symcoll_comm_create_all);
   * not for processes, where MPS clients asking for 32 queues each can stall its server. */
  if (!strcmp(o->mode, "thread")) setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  /* cuBLASLt loads a kernel on its first launch, which waits for the GPU to go idle: never,
   * while a peer rank's kernel on the same GPU waits for ours. Load them all up front. */
  if (o->mm && !strcmp(o->mode, "thread")) setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  if (o->mm) {
    o->reps_set = x->reps_set;
    o->plot = NULL; /* a table of shapes, not of sizes */
    if (!o->shapes) o->shapes = x->gpu || o->mm == 3 ? "all" : "small";
    if (!x->gpu) setenv("OPENBLAS_NUM_THREADS", "1", 0); /* ranks share the cores */
  }
  return -1;
}
