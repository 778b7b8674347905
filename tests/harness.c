#define _GNU_SOURCE
#include "harness.h"
#include "launch.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef SYMCOLL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

double th_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void th_job_id(char *buf, size_t n, const char *tag) {
  static int counter;
  snprintf(buf, n, "test.%s.%d.%d", tag, (int)getpid(), __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
}

/* ---- buffers ------------------------------------------------------------------------- */

static void *h_alloc(size_t b) {
  return malloc(b);
}
static void h_free(void *p) {
  free(p);
}
static void h_copy(void *d, const void *s, size_t b) {
  memcpy(d, s, b);
}
static void *h_stream(void) {
  return NULL;
}
static void h_sync(void) {}
static int h_bind(int d) {
  (void)d;
  return 0;
}
const th_buf_ops_t th_host_ops = {"host", h_alloc, h_free, h_copy, h_copy, h_stream, h_sync, h_bind};

#ifdef SYMCOLL_HAVE_CUDA
static __thread cudaStream_t tls_stream;
/* A pinned bounce buffer per rank thread, made when the thread binds (before its first
 * collective): a pageable copy may need the driver to set up staging memory, which can wait
 * for the whole device, and so for a peer's kernel that waits for this rank (thread mode). */
#define BOUNCE_BYTES ((size_t)4 << 20)
static __thread char *tls_bounce;
static bool use_bounce; /* thread mode only: rank processes copy from pageable memory */
static void *c_alloc(size_t b) {
  void *p = NULL;
  return cudaMalloc(&p, b) == cudaSuccess ? p : NULL;
}
static void c_free(void *p) {
  cudaFree(p);
}
static void c_check(cudaError_t e, const char *what) {
  if (e != cudaSuccess) fprintf(stderr, "harness: %s: %s\n", what, cudaGetErrorString(e));
}
/* Copies go on the rank's own stream and are waited for; through the bounce buffer when the
 * thread has one. `to_dev` says the direction. */
static void c_copy(char *d, const char *s, size_t b, bool to_dev) {
  const enum cudaMemcpyKind kind = to_dev ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
  const char *what = to_dev ? "copy to device" : "copy to host";
  const size_t step = tls_bounce ? BOUNCE_BYTES : (b ? b : 1);
  for (size_t o = 0; o < b; o += step) {
    size_t n = b - o < step ? b - o : step;
    char *dst = tls_bounce && !to_dev ? tls_bounce : d + o;
    const char *src = tls_bounce && to_dev ? tls_bounce : s + o;
    if (tls_bounce && to_dev) memcpy(tls_bounce, s + o, n);
    c_check(cudaMemcpyAsync(dst, src, n, kind, tls_stream), what);
    c_check(cudaStreamSynchronize(tls_stream), what);
    if (tls_bounce && !to_dev) memcpy(d + o, tls_bounce, n);
  }
}
static void c_to_dev(void *d, const void *s, size_t b) {
  c_copy(d, s, b, true);
}
static void c_to_host(void *d, const void *s, size_t b) {
  c_copy(d, s, b, false);
}
static void *c_stream(void) {
  return tls_stream;
}
static void c_sync(void) {
  c_check(cudaStreamSynchronize(tls_stream), "stream synchronize");
}
static int c_bind(int d) {
  if (cudaSetDevice(d) != cudaSuccess) return -1;
  if (use_bounce && !tls_bounce && cudaMallocHost((void **)&tls_bounce, BOUNCE_BYTES) != cudaSuccess) return -1;
  return cudaStreamCreateWithFlags(&tls_stream, cudaStreamNonBlocking) == cudaSuccess ? 0 : -1;
}
static const th_buf_ops_t cuda_ops = {"cuda", c_alloc, c_free, c_to_dev, c_to_host, c_stream, c_sync, c_bind};
#endif

/* The GPUs here, asked of a throw-away child (tools/common/launch.c). */
static char probe_why[160];
int th_cuda_device_count(void) {
  return sc_gpu_count(NULL, 0, probe_why, sizeof probe_why);
}

const th_buf_ops_t *th_cuda_ops(const char **why) {
  if (th_cuda_device_count() <= 0) {
    *why = probe_why;
    return NULL;
  }
#ifdef SYMCOLL_HAVE_CUDA
  return &cuda_ops;
#else
  return NULL;
#endif
}

/* ---- launching ranks ------------------------------------------------------------------ */

/* What every rank of one th_run needs. */
typedef struct {
  const th_launch_t *l;
  const th_buf_ops_t *ops;
  th_rank_fn fn;
  void *arg;
  bool gpu;
  const char *job;                         /* process mode */
  symcoll_comm_t comms[SYMCOLL_MAX_RANKS]; /* thread mode */
  int devices[SYMCOLL_MAX_RANKS];
} run_t;

static int thread_rank(int r, void *p) {
  run_t *x = p;
  if (x->ops->bind(x->devices[r]) != 0) return 1;
  return x->fn(x->comms[r], x->ops, x->arg);
}

static int device_of(int rank) {
  int n = th_cuda_device_count();
  return n > 0 ? rank % n : 0;
}

/* Thread-mode ranks sharing a GPU need a hardware queue per stream (see symcoll_comm_create_all). */
/* Thread mode on GPUs: a hardware queue per stream, and every kernel loaded up front
 * (cuBLASLt loads a kernel on its first launch, which waits for the GPU to go idle: never,
 * while a peer rank's kernel on the same GPU waits for ours). */
void th_cuda_env(void) {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  setenv("CUDA_MODULE_LOADING", "EAGER", 0);
}

uint32_t th_seed(void) {
  const char *s = getenv("TH_SEED");
  if (s && *s) return (uint32_t)strtoul(s, NULL, 0);
  if (!th_launched_by_env()) return (uint32_t)time(NULL) ^ (uint32_t)getpid() * 2654435761u;
  /* Ranks started by a launcher: a value all of them see, from the job's id. */
  const char *names[] = {"OMPI_MCA_orte_hnp_uri", "OMPI_MCA_ess_base_jobid", "TORCHELASTIC_RUN_ID", "MASTER_PORT",
                         "SLURM_JOB_ID"};
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    for (const char *p = getenv(names[i]); p && *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
  return h;
}

uint32_t th_rng_start(uint32_t seed) {
  const uint32_t v = seed * 2654435761u + 0x7f4a7c15u;
  return v ? v : 0x6a09e667u;
}
uint32_t th_rng_next(uint32_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

static const char *g_mode = "process";
bool th_launched_by_env(void) {
  return strcmp(g_mode, "env") == 0;
}
void th_set_mode(const char *mode) {
  g_mode = mode;
}

/* One rank as a process: its communicator, the body, the exit code. */
static int process_rank(int r, void *p) {
  run_t *x = p;
  int dev = x->gpu ? device_of(r) : SYMCOLL_DEVICE_HOST;
  if (x->ops->bind(dev) != 0) return 3;
  symcoll_config_t cfg;
  symcoll_config_init(&cfg);
  cfg.job_id = x->job;
  cfg.rank = r;
  cfg.nranks = x->l->nranks;
  cfg.device = dev;
  cfg.timeout_ms = x->l->timeout_ms;
  symcoll_comm_t comm;
  symcoll_status_t s = symcoll_comm_create(&cfg, &comm);
  if (s != SYMCOLL_OK) {
    fprintf(stderr, "rank %d: comm_create: %s\n", r, symcoll_status_string(s));
    return 2;
  }
  int f = x->fn(comm, x->ops, x->arg);
  symcoll_comm_destroy(comm);
  return f;
}

int th_run(const th_launch_t *l, th_rank_fn fn, void *arg) {
  const char *why = NULL;
  const th_buf_ops_t *ops = strcmp(l->backend, "cuda") == 0 ? th_cuda_ops(&why) : &th_host_ops;
  if (!ops) return -1;
  bool gpu = ops != &th_host_ops;
  if (strcmp(l->mode, "env") == 0) { /* this process is one rank of a job someone else launched */
    symcoll_comm_t comm;
    symcoll_status_t s = symcoll_comm_create_from_env(gpu ? SYMCOLL_DEVICE_LOCAL_RANK : SYMCOLL_DEVICE_HOST, &comm);
    if (s != SYMCOLL_OK) {
      fprintf(stderr, "comm_create_from_env: %s\n", symcoll_status_string(s));
      return -1;
    }
    if (gpu && ops->bind(symcoll_comm_device(comm)) != 0) return -1;
    int f = fn(comm, ops, arg);
    s = symcoll_comm_barrier(comm); /* no peer sees this one leave early */
    if (s != SYMCOLL_OK)
      fprintf(stderr, "rank %d: final barrier: %s\n", symcoll_comm_rank(comm), symcoll_status_string(s));
    symcoll_comm_destroy(comm);
    return s == SYMCOLL_OK ? f : f + 1;
  }
  if (strcmp(l->mode, "thread") == 0) {
    th_cuda_env(); /* not for processes: MPS clients asking for 32 queues each stalled */
#ifdef SYMCOLL_HAVE_CUDA
    use_bounce = true;
#endif
    run_t x = {.l = l, .ops = ops, .fn = fn, .arg = arg, .gpu = gpu};
    for (int r = 0; r < l->nranks; r++) x.devices[r] = gpu ? device_of(r) : SYMCOLL_DEVICE_HOST;
    symcoll_status_t s = symcoll_comm_create_all(l->nranks, x.devices, x.comms);
    if (s != SYMCOLL_OK) {
      fprintf(stderr, "comm_create_all: %s\n", symcoll_status_string(s));
      return -1;
    }
    const sc_ranks_result_t res = sc_thread_ranks(l->nranks, thread_rank, &x);
    for (int r = 0; r < l->nranks; r++) symcoll_comm_destroy(x.comms[r]);
    return res.sum;
  }
  /* GPU ranks sharing a GPU as processes (MPS) load every kernel up front too: a kernel that a
   * library (cuBLASLt) loads on its first launch can wait for the whole GPU to go idle. */
  if (gpu) setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  char job[64];
  th_job_id(job, sizeof job, "run");
  run_t x = {.l = l, .ops = ops, .fn = fn, .arg = arg, .gpu = gpu, .job = job};
  const int wall = l->wall_s > 0 ? l->wall_s : 600;
  const sc_ranks_result_t res = sc_fork_ranks(l->nranks, process_rank, &x, wall);
  if (res.timed_out) {
    fprintf(stderr, "ranks still running after %d s: killed them\n", wall);
    return -1;
  }
  return res.signaled ? -1 : res.sum;
}

bool th_launch_arg(th_launch_t *l, int argc, char **argv, int *i) {
  const char *a = argv[*i];
  if (*i + 1 >= argc || (strcmp(a, "--backend") && strcmp(a, "--mode") && strcmp(a, "--ranks"))) return false;
  const char *v = argv[++*i];
  if (!strcmp(a, "--backend"))
    l->backend = v;
  else if (!strcmp(a, "--mode"))
    l->mode = v;
  else
    l->nranks = atoi(v);
  return true;
}

bool th_skip_without_gpu(const char *backend) {
  const char *why = NULL;
  if (strcmp(backend, "cuda") != 0 || th_cuda_ops(&why)) return false;
  printf("SKIPPED: GPU test, %s\n", why);
  return true;
}

/* job_id NULL: any job this test process started (names "test.<tag>.<pid>.<n>"), so that
 * another test run on the same machine does not count. */
int th_leftovers(const char *job_id) {
  int found = 0;
  DIR *d = opendir("/dev/shm");
  for (struct dirent *e; d && (e = readdir(d));)
    if (strstr(e->d_name, "symcoll")) found++;
  if (d) closedir(d);
  FILE *f = fopen("/proc/net/unix", "r");
  char line[512], want[128], mine[32];
  snprintf(want, sizeof want, "@symcoll.%u.%s", (unsigned)geteuid(), job_id ? job_id : "test.");
  snprintf(mine, sizeof mine, ".%d.", (int)getpid());
  while (f && fgets(line, sizeof line, f)) {
    const char *at = strstr(line, want);
    if (at && (job_id || strstr(at, mine))) found++;
  }
  if (f) fclose(f);
  return found;
}
