/* Launching ranks on this machine (launch.h). */
#define _GNU_SOURCE
#include "launch.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif
#include <time.h>
#include <unistd.h>

#ifdef SYMCOLL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define MAX_RANKS 64 /* SYMCOLL_MAX_RANKS */

static struct {
  int asked, n;
  char model[128], why[160];
} probe;

static void ask_child(void) {
#ifdef SYMCOLL_HAVE_CUDA
  int fds[2];
  if (pipe(fds) != 0) {
    snprintf(probe.why, sizeof probe.why, "pipe failed");
    return;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    struct cudaDeviceProp p;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    probe.n = e == cudaSuccess ? n : 0;
    if (probe.n > 0 && cudaGetDeviceProperties(&p, 0) == cudaSuccess)
      snprintf(probe.model, sizeof probe.model, "%.127s", p.name);
    /* Without a GPU the runtime says "CUDA driver version is insufficient" (no driver) or
     * "no CUDA-capable device": both mean no GPU here. */
    if (probe.n == 0)
      snprintf(probe.why, sizeof probe.why, "no GPU on this machine%s%s%s",
               e == cudaSuccess ? "" : " (the CUDA runtime says: ", e == cudaSuccess ? "" : cudaGetErrorString(e),
               e == cudaSuccess ? "" : ")");
    _exit(write(fds[1], &probe, sizeof probe) == (ssize_t)sizeof probe ? 0 : 1);
  }
  close(fds[1]);
  if (pid < 0 || read(fds[0], &probe, sizeof probe) != (ssize_t)sizeof probe) {
    probe.n = 0;
    snprintf(probe.why, sizeof probe.why, "the GPU probe failed");
  }
  close(fds[0]);
  if (pid > 0) waitpid(pid, NULL, 0);
#else
  snprintf(probe.why, sizeof probe.why, "this build has no CUDA transport (nvcc not found at configure time)");
#endif
}

int sc_gpu_count(char *model, size_t model_n, char *why, size_t why_n) {
  if (!probe.asked) {
    ask_child();
    probe.asked = 1;
  }
  if (model && model_n) snprintf(model, model_n, "%s", probe.model);
  if (why && why_n) snprintf(why, why_n, "%s", probe.n > 0 ? "ok" : probe.why);
  return probe.n;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void count(sc_ranks_result_t *res, int code) {
  res->sum += code;
  if (code && !res->first) res->first = code;
}

sc_ranks_result_t sc_fork_ranks(int n, sc_rank_fn fn, void *arg, int wall_s) {
  sc_ranks_result_t res = {0, 0, 0, 0};
  if (n < 1 || n > MAX_RANKS) {
    fprintf(stderr, "launch: %d ranks (1 to %d)\n", n, MAX_RANKS);
    count(&res, 1);
    return res;
  }
  pid_t pids[MAX_RANKS];
  const pid_t launcher = getpid();
  fflush(NULL);
  int started = 0;
  for (int r = 0; r < n && r < MAX_RANKS; r++, started++) {
    pids[r] = fork();
    if (pids[r] == 0) {
#if defined(__linux__)
      /* A rank dies with its launcher: one killed (a timeout's SIGTERM, ^C) leaves no rank
       * running on, holding its GPU, ports and memory for the next run. */
      if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher) _exit(1);
#endif
      int code = fn(r, arg);
      fflush(NULL);
      _exit(code < 0 ? 1 : code > 250 ? 250 : code);
    }
    if (pids[r] < 0) {
      count(&res, 1);
      break;
    }
  }
  const double end = wall_s > 0 ? now_s() + wall_s : 0;
  for (int left = started; left > 0;) {
    int st;
    pid_t p = waitpid(-1, &st, wall_s > 0 ? WNOHANG : 0);
    if (p > 0) {
      left--;
      if (WIFSIGNALED(st)) res.signaled++;
      count(&res, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0));
      continue;
    }
    if (p < 0) {
      if (errno == EINTR) continue;
      res.sum += left; /* ranks nobody will report on: failed */
      if (!res.first) res.first = 1;
      break;
    }
    if (now_s() > end) {
      for (int r = 0; r < started; r++) kill(pids[r], SIGKILL);
      while (wait(NULL) > 0) {
      }
      res.timed_out = 1;
      break;
    }
    usleep(2000);
  }
  return res;
}

typedef struct {
  sc_rank_fn fn;
  void *arg;
  int rank, code;
} thread_arg_t;

static void *rank_thread(void *p) {
  thread_arg_t *t = p;
  t->code = t->fn(t->rank, t->arg);
  return NULL;
}

sc_ranks_result_t sc_thread_ranks(int n, sc_rank_fn fn, void *arg) {
  sc_ranks_result_t res = {0, 0, 0, 0};
  if (n < 1 || n > MAX_RANKS) {
    fprintf(stderr, "launch: %d ranks (1 to %d)\n", n, MAX_RANKS);
    count(&res, 1);
    return res;
  }
  thread_arg_t t[MAX_RANKS];
  pthread_t th[MAX_RANKS];
  int started = 0;
  for (int r = 0; r < n && r < MAX_RANKS; r++, started++) {
    t[r] = (thread_arg_t){fn, arg, r, 0};
    if (pthread_create(&th[r], NULL, rank_thread, &t[r]) != 0) {
      count(&res, 1);
      break;
    }
  }
  for (int r = 0; r < started; r++) {
    pthread_join(th[r], NULL);
    count(&res, t[r].code);
  }
  return res;
}
