/* Communicators: configuration checks, creation (one rank, all ranks of a process), set-up,
 * lifetime, status. The peer monitor, launcher discovery, bounded waiting and symmetric memory
 * are in monitor.c, launcher.c, wait.c and mem.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "internal.h"

void symcoll_config_init(symcoll_config_t *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->nranks = 1;
  cfg->device = SYMCOLL_DEVICE_HOST;
}

static bool job_id_valid(const char *id) {
  if (!id) return false;
  size_t n = strlen(id);
  if (n == 0 || n > SYMCOLL_JOB_ID_MAX) return false;
  for (size_t i = 0; i < n; i++) {
    char c = id[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-' || c == ':'))
      return false;
  }
  return true;
}

static symcoll_status_t config_check(const symcoll_config_t *cfg, bool need_job) {
  if (!cfg) return SYMCOLL_ERR_INVALID_ARGUMENT;
  if (cfg->struct_size != sizeof(symcoll_config_t)) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "config struct_size %zu, expected %zu", cfg->struct_size,
                 sizeof(symcoll_config_t));
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  }
  if (cfg->nranks < 1 || cfg->nranks > SYMCOLL_MAX_RANKS || cfg->rank < 0 || cfg->rank >= cfg->nranks) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "bad rank %d / nranks %d (1 <= nranks <= %d)", cfg->rank, cfg->nranks,
                 SYMCOLL_MAX_RANKS);
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  }
  if (cfg->device < SYMCOLL_DEVICE_HOST || cfg->timeout_ms < 0) return SYMCOLL_ERR_INVALID_ARGUMENT;
  /* One rank may leave it NULL; a job id given is checked at every rank count. */
  if (need_job && (cfg->nranks > 1 || cfg->job_id) && !job_id_valid(cfg->job_id)) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT,
                 "job id %s%s%s: it must be 1 to %d characters of A-Z a-z 0-9 . _ : - (it names "
                 "the rendezvous: every rank of one communicator passes the same one, other jobs another)",
                 cfg->job_id ? "'" : "", cfg->job_id ? cfg->job_id : "NULL", cfg->job_id ? "'" : "",
                 SYMCOLL_JOB_ID_MAX);
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  }
  return SYMCOLL_OK;
}

symcoll_status_t symcoll__comm_new(const symcoll_config_t *cfg, symcoll_comm_t *comm_p) {
  symcoll__log_init();
  const symcoll__transport_t *tp = &symcoll__host_transport;
  if (cfg->device != SYMCOLL_DEVICE_HOST) {
#ifdef SYMCOLL_HAVE_CUDA
    tp = &symcoll__cuda_transport;
#else
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "this build of symcoll has no CUDA support (device %d asked for)", cfg->device);
    return SYMCOLL_ERR_UNSUPPORTED;
#endif
  }
  symcoll_comm_t c = calloc(1, sizeof *c);
  if (!c) return SYMCOLL_ERR_NO_MEMORY;
  c->rank = cfg->rank;
  c->nranks = cfg->nranks;
  c->device = cfg->device;
  c->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : (int)symcoll__env_int("SYMCOLL_TIMEOUT_MS");
  snprintf(c->job_id, sizeof c->job_id, "%s", cfg->job_id ? cfg->job_id : "local");
  c->tp = tp;
  c->abort_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (c->abort_fd < 0) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "eventfd failed: %m");
    free(c);
    return SYMCOLL_ERR_SYSTEM;
  }
  for (int r = 0; r < SYMCOLL_MAX_RANKS; r++) c->pidfds[r] = -1;
  c->ranks_on_my_device = 1;
  /* More CPU ranks than cores: a spinning rank holds the core its peer needs, so yield early. */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  c->spin_before_yield = cfg->device == SYMCOLL_DEVICE_HOST && cores > 0 && cfg->nranks > cores ? 64 : 4096;
  c->workspace_bytes =
      cfg->workspace_bytes ? cfg->workspace_bytes : (size_t)symcoll__env_int("SYMCOLL_WORKSPACE_BYTES");
  c->check_args = symcoll__env_int("SYMCOLL_CHECK") != 0;
  symcoll__algo_from_env(c);
  *comm_p = c;
  return SYMCOLL_OK;
}

void symcoll__comm_free(symcoll_comm_t c) {
  symcoll__monitor_stop(c);
  symcoll__pool_forget(c);
  while (c->mems) {
    struct symcoll_mem *m = c->mems;
    c->mems = m->next;
    c->tp->mem_free(m);
    free(m);
  }
  if (c->tp_state) c->tp->comm_fini(c);
  if (c->oob) c->oob->destroy(c);
  for (int r = 0; r < SYMCOLL_MAX_RANKS; r++)
    if (c->pidfds[r] >= 0) close(c->pidfds[r]);
  close(c->abort_fd);
  free(c);
}

symcoll_status_t symcoll__comm_setup(symcoll_comm_t c) {
  /* Every rank must agree on nranks and device kind; compare through the oob. SYMCOLL_CHECK
   * adds an exchange to every call, so every rank checks where any rank asked (a rank alone
   * would wait in an exchange its peers never join). */
  int mine[3] = {c->nranks, c->device == SYMCOLL_DEVICE_HOST ? 0 : 1, c->check_args};
  int all[SYMCOLL_MAX_RANKS][3];
  SYMCOLL_CHECK(c->oob->allgather(c, mine, all, sizeof mine));
  for (int r = 0; r < c->nranks; r++) {
    c->check_args = c->check_args || all[r][2];
    if (all[r][0] != mine[0] || all[r][1] != mine[1]) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT,
                   "job %s: rank %d has nranks %d and a %s device, rank %d nranks %d and a %s device", c->job_id, r,
                   all[r][0], all[r][1] ? "CUDA" : "host", c->rank, mine[0], mine[1] ? "CUDA" : "host");
      return SYMCOLL_ERR_MISMATCH;
    }
  }
  /* SYMCOLL_ALGO as rank 0 read it, like its tuning table below: ranks forcing different
   * algorithms would wait in protocols that never meet (the GPU's LAMPORT all_reduce carries no
   * signature that would tell them). */
  symcoll_algo_t forced[SYMCOLL_NUM_COLL_KINDS];
  memcpy(forced, c->forced_algo, sizeof forced);
  SYMCOLL_CHECK(c->oob->bcast(c, c->forced_algo, sizeof c->forced_algo));
  if (memcmp(forced, c->forced_algo, sizeof forced) != 0)
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "job %s: rank %d's SYMCOLL_ALGO differs from rank 0's: rank 0's is used",
                 c->job_id, c->rank);
  SYMCOLL_CHECK(c->tp->comm_init(c));
  symcoll__tune_init(c);
  /* All ranks must pick the same algorithm for the same call: adopt rank 0's table. */
  SYMCOLL_CHECK(c->oob->bcast(c, c->tune, sizeof(c->tune)));
  if (c->tp->tune_ready) return c->tp->tune_ready(c);
  symcoll__tune_drop_algo(c, SYMCOLL_ALGO_NCCL);
  return SYMCOLL_OK;
}

void symcoll__comm_ready(symcoll_comm_t c) {
  if (c->nranks > 1 && !c->thread_mode) symcoll__monitor_start(c);
}

/* A dummy oob for a communicator of one rank: nothing to exchange. */
static symcoll_status_t solo_allgather(symcoll_comm_t c, const void *in, void *out, size_t n) {
  (void)c;
  memcpy(out, in, n);
  return SYMCOLL_OK;
}
static symcoll_status_t solo_exchange_fd(symcoll_comm_t c, int my_fd, int *fds_p) {
  (void)c;
  fds_p[0] = fcntl(my_fd, F_DUPFD_CLOEXEC, 0);
  return fds_p[0] < 0 ? SYMCOLL_ERR_SYSTEM : SYMCOLL_OK;
}
static symcoll_status_t solo_bcast(symcoll_comm_t c, void *buf, size_t n) {
  (void)c, (void)buf, (void)n;
  return SYMCOLL_OK;
}
static void solo_destroy(symcoll_comm_t c) {
  (void)c;
}
static const symcoll__oob_t solo_oob = {
    .allgather = solo_allgather, .bcast = solo_bcast, .exchange_fd = solo_exchange_fd, .destroy = solo_destroy};

/* SYMCOLL_NODE_RANKS as every rank read it: the same everywhere, or MISMATCH on every rank (a
 * rank that emulated nodes alone would wait in exchanges its peers never join). */
static symcoll_status_t agree_node_ranks(symcoll_comm_t c, int k) {
  int all[SYMCOLL_MAX_RANKS];
  SYMCOLL_CHECK(c->oob->allgather(c, &k, all, sizeof k));
  for (int r = 0; r < c->nranks; r++)
    if (all[r] != k) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT,
                   "job %s: SYMCOLL_NODE_RANKS differs: rank %d emulates nodes of %d ranks, rank %d of %d (0: none)",
                   c->job_id, r, all[r], c->rank, k);
      return SYMCOLL_ERR_MISMATCH;
    }
  return SYMCOLL_OK;
}

symcoll_status_t symcoll_comm_create(const symcoll_config_t *cfg, symcoll_comm_t *comm_p) {
  symcoll__log_init();
  if (!comm_p) return SYMCOLL_ERR_INVALID_ARGUMENT;
  symcoll_comm_t c;
  SYMCOLL_CHECK(symcoll__comm_create_flat(cfg, 0, &c));
  const int k = symcoll__hier_node_ranks(c->nranks);
  const symcoll_status_t s = agree_node_ranks(c, k);
  if (s != SYMCOLL_OK) {
    symcoll_comm_destroy(c);
    return s;
  }
  if (!k) {
    *comm_p = c;
    return SYMCOLL_OK;
  }
  return symcoll__hier_from_flat(c, k, comm_p);
}

symcoll_status_t symcoll__comm_create_flat(const symcoll_config_t *cfg, int sharers_floor, symcoll_comm_t *comm_p) {
  symcoll__log_init();
  if (!comm_p) return SYMCOLL_ERR_INVALID_ARGUMENT;
  SYMCOLL_CHECK(config_check(cfg, true));
  symcoll_comm_t c;
  SYMCOLL_CHECK(symcoll__comm_new(cfg, &c));
  c->sharers_floor = sharers_floor;
  symcoll_status_t s;
  if (c->nranks == 1) {
    c->oob = &solo_oob;
    c->pids[0] = getpid();
  } else {
    SYMCOLL_CHECK_GOTO(symcoll__bootstrap_init(c), s, err_free);
  }
  SYMCOLL_CHECK_GOTO(symcoll__comm_setup(c), s, err_free);
  symcoll__comm_ready(c);
  *comm_p = c;
  return SYMCOLL_OK;
err_free:
  symcoll__comm_free(c);
  return s;
}

/* ---- thread mode --------------------------------------------------------------------- */

typedef struct {
  symcoll_comm_t comm;
  symcoll_status_t status;
} setup_arg_t;

static void *setup_thread(void *p) {
  setup_arg_t *a = p;
  a->status = symcoll__comm_setup(a->comm);
  return NULL;
}

/* SYMCOLL_NODE_RANKS in thread mode: each rank's thread wraps its communicator (the splits
 * inside are collective). */
typedef struct {
  symcoll_comm_t flat, out;
  int k;
  symcoll_status_t status;
} hier_arg_t;

static void *hier_thread(void *p) {
  hier_arg_t *a = p;
  a->status = symcoll__hier_from_flat(a->flat, a->k, &a->out);
  return NULL;
}

static symcoll_status_t hier_all(int nranks, int k, symcoll_comm_t *flat, symcoll_comm_t *comms) {
  hier_arg_t args[SYMCOLL_MAX_RANKS];
  pthread_t th[SYMCOLL_MAX_RANKS];
  int started = 0;
  symcoll_status_t s = SYMCOLL_OK;
  for (; started < nranks; started++) {
    args[started] = (hier_arg_t){.flat = flat[started], .k = k, .status = SYMCOLL_ERR_INTERNAL};
    if (pthread_create(&th[started], NULL, hier_thread, &args[started]) != 0) break;
  }
  if (started < nranks) { /* ranks already started time out in their splits and report it */
    for (int r = 0; r < started; r++) symcoll_comm_abort(flat[r]);
    for (int r = started; r < nranks; r++) symcoll__comm_free(flat[r]);
    s = SYMCOLL_ERR_SYSTEM;
  }
  for (int r = 0; r < started; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < started; r++)
    if (args[r].status != SYMCOLL_OK && s == SYMCOLL_OK) s = args[r].status;
  if (s != SYMCOLL_OK) {
    for (int r = 0; r < started; r++)
      if (args[r].status == SYMCOLL_OK) symcoll_comm_destroy(args[r].out);
    return s;
  }
  for (int r = 0; r < nranks; r++) comms[r] = args[r].out;
  return SYMCOLL_OK;
}

symcoll_status_t symcoll_comm_create_all(int nranks, const int *devices, symcoll_comm_t *comms) {
  symcoll__log_init();
  if (!comms || nranks < 1 || nranks > SYMCOLL_MAX_RANKS) return SYMCOLL_ERR_INVALID_ARGUMENT;
  for (int r = 0; devices && r < nranks; r++)
    if (devices[r] < SYMCOLL_DEVICE_HOST || (devices[r] == SYMCOLL_DEVICE_HOST) != (devices[0] == SYMCOLL_DEVICE_HOST))
      return SYMCOLL_ERR_INVALID_ARGUMENT;
  /* Ranks sharing a GPU in one process each wait in a kernel for the others. CUDA maps the
   * process's streams onto CUDA_DEVICE_MAX_CONNECTIONS hardware queues (8 by default); when
   * two ranks' streams share one, a rank's copy or kernel can sit behind a peer's waiting
   * kernel until that kernel times out. */
  int share = 1;
  for (int r = 0; devices && r < nranks; r++) {
    int same = 0;
    for (int q = 0; q < nranks; q++) same += devices[q] == devices[r] && devices[r] >= 0;
    if (same > share) share = same;
  }
  const char *conns = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  if (share > 2 && (!conns || atoi(conns) < 4 * share))
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT,
                 "%d ranks share a GPU in this process and CUDA_DEVICE_MAX_CONNECTIONS is %s: streams of "
                 "different ranks may share a hardware queue, and a rank's work wait behind a peer's "
                 "waiting kernel until it times out; set CUDA_DEVICE_MAX_CONNECTIONS=32 before CUDA starts",
                 share, conns ? conns : "unset (8)");
  symcoll_comm_t tmp[SYMCOLL_MAX_RANKS] = {0};
  setup_arg_t args[SYMCOLL_MAX_RANKS];
  pthread_t th[SYMCOLL_MAX_RANKS];
  symcoll_status_t s = SYMCOLL_OK;
  char job[32];
  static atomic_int team_counter;
  snprintf(job, sizeof job, "threads.%d.%d", (int)getpid(), atomic_fetch_add(&team_counter, 1));
  int made = 0;
  for (; made < nranks; made++) {
    symcoll_config_t cfg;
    symcoll_config_init(&cfg);
    cfg.job_id = job;
    cfg.rank = made;
    cfg.nranks = nranks;
    cfg.device = devices ? devices[made] : SYMCOLL_DEVICE_HOST;
    SYMCOLL_CHECK_GOTO(symcoll__comm_new(&cfg, &tmp[made]), s, err_free);
  }
  SYMCOLL_CHECK_GOTO(symcoll__team_init(nranks, tmp), s, err_free);
  for (int r = 0; r < nranks; r++) {
    args[r].comm = tmp[r];
    args[r].status = SYMCOLL_ERR_INTERNAL;
    if (pthread_create(&th[r], NULL, setup_thread, &args[r]) != 0) {
      /* Ranks already started time out in the team barrier and report it. */
      for (int k = r; k < nranks; k++) atomic_store(&tmp[k]->aborted, 1);
      for (int k = 0; k < r; k++) symcoll_comm_abort(tmp[k]);
      for (int k = 0; k < r; k++) pthread_join(th[k], NULL);
      s = SYMCOLL_ERR_SYSTEM;
      goto err_free;
    }
  }
  for (int r = 0; r < nranks; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < nranks; r++)
    if (args[r].status != SYMCOLL_OK && s == SYMCOLL_OK) s = args[r].status;
  if (s != SYMCOLL_OK) goto err_free;
  const int k = symcoll__hier_node_ranks(nranks);
  if (k) return hier_all(nranks, k, tmp, comms);
  memcpy(comms, tmp, sizeof(symcoll_comm_t) * (size_t)nranks);
  return SYMCOLL_OK;
err_free:
  for (int r = 0; r < made; r++) symcoll__comm_free(tmp[r]);
  return s;
}

/* ---- lifetime ------------------------------------------------------------------------ */

symcoll_status_t symcoll_comm_destroy(symcoll_comm_t comm) {
  if (!comm) return SYMCOLL_ERR_INVALID_ARGUMENT;
  symcoll__comm_free(comm);
  return SYMCOLL_OK;
}

symcoll_status_t symcoll_comm_abort(symcoll_comm_t comm) {
  if (!comm) return SYMCOLL_ERR_INVALID_ARGUMENT;
  atomic_store(&comm->aborted, 1);
  uint64_t one = 1;
  if (write(comm->abort_fd, &one, sizeof one) < 0) { /* already signalled: fine */
  }
  if (comm->tp->abort) comm->tp->abort(comm, SYMCOLL_ERR_ABORTED);
  if (comm->thread_mode) symcoll__team_wake(comm);
  return SYMCOLL_OK;
}

symcoll_status_t symcoll_comm_check(symcoll_comm_t comm) {
  if (!comm) return SYMCOLL_ERR_INVALID_ARGUMENT;
  symcoll_status_t s = symcoll__comm_status(comm);
  if (s != SYMCOLL_OK) return s;
  return comm->tp->check ? comm->tp->check(comm) : SYMCOLL_OK;
}

symcoll_status_t symcoll_comm_barrier(symcoll_comm_t comm) {
  if (!comm) return SYMCOLL_ERR_INVALID_ARGUMENT;
  SYMCOLL_CHECK(symcoll__comm_status(comm));
  char mine = 1, all[SYMCOLL_MAX_RANKS];
  return comm->oob->allgather(comm, &mine, all, 1);
}

int symcoll_comm_rank(symcoll_comm_t comm) {
  return comm ? comm->rank : -1;
}
int symcoll_comm_nranks(symcoll_comm_t comm) {
  return comm ? comm->nranks : -1;
}
int symcoll_comm_device(symcoll_comm_t comm) {
  return comm ? comm->device : -1;
}

symcoll_status_t symcoll__comm_status(symcoll_comm_t comm) {
  if (atomic_load(&comm->aborted)) return SYMCOLL_ERR_ABORTED;
  return (symcoll_status_t)atomic_load(&comm->failed);
}

void symcoll__comm_fail(symcoll_comm_t comm, symcoll_status_t status) {
  int expected = 0;
  atomic_compare_exchange_strong(&comm->failed, &expected, (int)status);
}
