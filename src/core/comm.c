/* Communicators, symmetric memory bookkeeping, bounded waiting. */
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
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '.' || c == '_' || c == '-' || c == ':'))
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
  if (cfg->nranks < 1 || cfg->nranks > SYMCOLL_MAX_RANKS || cfg->rank < 0 ||
      cfg->rank >= cfg->nranks) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "bad rank %d / nranks %d (1 <= nranks <= %d)", cfg->rank,
                 cfg->nranks, SYMCOLL_MAX_RANKS);
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  }
  if (cfg->device < SYMCOLL_DEVICE_HOST || cfg->timeout_ms < 0) return SYMCOLL_ERR_INVALID_ARGUMENT;
  /* One rank may leave it NULL; a job id given is checked at every rank count. */
  if (need_job && (cfg->nranks > 1 || cfg->job_id) && !job_id_valid(cfg->job_id)) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "job id %s%s%s: it must be 1 to %d characters of A-Z a-z 0-9 . _ : - (it names "
                 "the rendezvous: every rank of one communicator passes the same one, other jobs another)",
                 cfg->job_id ? "'" : "", cfg->job_id ? cfg->job_id : "NULL", cfg->job_id ? "'" : "", SYMCOLL_JOB_ID_MAX);
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
  c->workspace_bytes = cfg->workspace_bytes ? cfg->workspace_bytes : (size_t)symcoll__env_int("SYMCOLL_WORKSPACE_BYTES");
  c->check_args = symcoll__env_int("SYMCOLL_CHECK") != 0;
  symcoll__algo_from_env(c);
  *comm_p = c;
  return SYMCOLL_OK;
}

/* ---- peer monitor (process mode) ------------------------------------------------------ */

static void *monitor_main(void *arg) {
  symcoll_comm_t c = arg;
  struct pollfd p[SYMCOLL_MAX_RANKS + 1];
  int idx[SYMCOLL_MAX_RANKS + 1], n = 0;
  p[n] = (struct pollfd){.fd = c->monitor_stop_fd, .events = POLLIN};
  idx[n++] = -1;
  for (int r = 0; r < c->nranks; r++)
    if (r != c->rank && c->pidfds[r] >= 0) {
      p[n] = (struct pollfd){.fd = c->pidfds[r], .events = POLLIN};
      idx[n++] = r;
    }
  for (;;) {
    /* Peers without a pidfd are looked at every 100 ms. */
    int rc = poll(p, (nfds_t)n, 100);
    if (rc < 0 && errno != EINTR) return NULL;
    if (p[0].revents) return NULL; /* destroy */
    int lost = -1;
    for (int i = 1; i < n && lost < 0; i++)
      if (p[i].revents) lost = idx[i];
    for (int r = 0; r < c->nranks && lost < 0; r++)
      if (r != c->rank && c->pidfds[r] < 0 && kill(c->pids[r], 0) != 0 && errno == ESRCH) lost = r;
    if (lost >= 0) {
      SYMCOLL_INFO(SYMCOLL_SUBSYS_COLL, "rank %d (pid %d) exited", lost, (int)c->pids[lost]);
      symcoll__comm_fail(c, SYMCOLL_ERR_PEER_LOST);
      if (c->tp->abort) c->tp->abort(c, SYMCOLL_ERR_PEER_LOST);
      return NULL;
    }
  }
}

static void monitor_start(symcoll_comm_t c) {
  c->monitor_stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (c->monitor_stop_fd < 0) return;
  if (pthread_create(&c->monitor, NULL, monitor_main, c) == 0) {
    c->monitor_running = true;
  } else {
    close(c->monitor_stop_fd);
    c->monitor_stop_fd = -1;
  }
}

static void monitor_stop(symcoll_comm_t c) {
  if (!c->monitor_running) return;
  uint64_t one = 1;
  if (write(c->monitor_stop_fd, &one, sizeof one) < 0) { /* the join below still ends it */
  }
  pthread_join(c->monitor, NULL);
  close(c->monitor_stop_fd);
  c->monitor_running = false;
}

void symcoll__comm_free(symcoll_comm_t c) {
  monitor_stop(c);
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
  /* Every rank must agree on nranks and device kind; compare through the oob. */
  int mine[2] = {c->nranks, c->device == SYMCOLL_DEVICE_HOST ? 0 : 1};
  int all[SYMCOLL_MAX_RANKS][2];
  SYMCOLL_CHECK(c->oob->allgather(c, mine, all, sizeof mine));
  for (int r = 0; r < c->nranks; r++)
    if (all[r][0] != mine[0] || all[r][1] != mine[1]) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "job %s: rank %d has nranks %d and a %s device, rank %d nranks %d and a %s device",
                   c->job_id, r, all[r][0], all[r][1] ? "CUDA" : "host", c->rank, mine[0], mine[1] ? "CUDA" : "host");
      return SYMCOLL_ERR_MISMATCH;
    }
  SYMCOLL_CHECK(c->tp->comm_init(c));
  symcoll__tune_init(c);
  /* All ranks must pick the same algorithm for the same call: adopt rank 0's table. */
  SYMCOLL_CHECK(c->oob->bcast(c, c->tune, sizeof(c->tune)));
  if (c->tp->tune_ready) return c->tp->tune_ready(c);
  symcoll__tune_drop_algo(c, SYMCOLL_ALGO_NCCL);
  return SYMCOLL_OK;
}

void symcoll__comm_ready(symcoll_comm_t c) {
  if (c->nranks > 1 && !c->thread_mode) monitor_start(c);
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
static void solo_destroy(symcoll_comm_t c) { (void)c; }
static const symcoll__oob_t solo_oob = {.allgather = solo_allgather, .bcast = solo_bcast,
                                        .exchange_fd = solo_exchange_fd, .destroy = solo_destroy};

symcoll_status_t symcoll_comm_create(const symcoll_config_t *cfg, symcoll_comm_t *comm_p) {
  symcoll__log_init();
  if (!comm_p) return SYMCOLL_ERR_INVALID_ARGUMENT;
  symcoll_comm_t c;
  SYMCOLL_CHECK(symcoll__comm_create_flat(cfg, 0, &c));
  const int k = symcoll__hier_node_ranks(c->nranks);
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

/* ---- creation from the environment ------------------------------------------------- */

/* A launcher's integer variable: false if unset; *bad set if set but not a whole number in
 * [lo, hi] (and a WARN names it). */
static bool env_int(const char *name, int *v, int lo, int hi, bool *bad) {
  const char *s = getenv(name);
  if (!s || !*s) return false;
  char *end;
  errno = 0;
  long x = strtol(s, &end, 10);
  if (*end || end == s || errno || x < lo || x > hi) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "%s=%s is not a whole number from %d to %d", name, s, lo, hi);
    *bad = true;
    return false;
  }
  *v = (int)x;
  return true;
}

symcoll_status_t symcoll_comm_create_from_env(int device, symcoll_comm_t *comm_p) {
  symcoll__log_init();
  symcoll_config_t cfg;
  symcoll_config_init(&cfg);
  char job[SYMCOLL_JOB_ID_MAX + 1] = "";
  const char *src = NULL;
  int rank = -1, n = -1, grank = -1, gn = -1; /* on this node; in the whole job */
  bool bad = false;
  const int MR = SYMCOLL_MAX_RANKS;
#define ENV_PAIR(r, nr) (env_int(r, &rank, 0, MR - 1, &bad) & env_int(nr, &n, 1, MR, &bad))
  if (ENV_PAIR("SYMCOLL_RANK", "SYMCOLL_NRANKS")) {
    src = "SYMCOLL_*";
    /* Unnamed: ranks started by one parent (a script, a shell's `&`, a forking launcher)
     * share its pid, and two such jobs started at once do not. */
    const char *named = symcoll__env_str("SYMCOLL_JOB_ID", NULL);
    if (named) snprintf(job, sizeof job, "%s", named);
    else snprintf(job, sizeof job, "ppid.%d", (int)getppid());
  } else if (!bad && ENV_PAIR("LOCAL_RANK", "LOCAL_WORLD_SIZE")) {
    src = "torchrun";
    const char *run = getenv("TORCHELASTIC_RUN_ID");
    if (run && *run && strcmp(run, "none") != 0) snprintf(job, sizeof job, "torch.%s", run);
    else snprintf(job, sizeof job, "torch.%s:%s", symcoll__env_str("MASTER_ADDR", "local"),
                  symcoll__env_str("MASTER_PORT", "0"));
    if (!(env_int("RANK", &grank, 0, INT32_MAX - 1, &bad) & env_int("WORLD_SIZE", &gn, 1, INT32_MAX, &bad))) gn = -1;
  } else if (!bad && ENV_PAIR("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE")) {
    src = "Open MPI";
    const char *id = getenv("OMPI_MCA_ess_base_jobid");
    if (!id) id = getenv("OMPI_MCA_orte_ess_jobid");
    if (!id) id = getenv("OMPI_MCA_orte_hnp_uri");
    snprintf(job, sizeof job, "ompi.%s", id ? id : "0");
    if (!(env_int("OMPI_COMM_WORLD_RANK", &grank, 0, INT32_MAX - 1, &bad) &
          env_int("OMPI_COMM_WORLD_SIZE", &gn, 1, INT32_MAX, &bad)))
      gn = -1;
  } else if (!bad && env_int("SLURM_LOCALID", &rank, 0, MR - 1, &bad)) {
    src = "Slurm";
    /* SLURM_NTASKS_PER_NODE may read "4(x2)": its leading number is the tasks on this node. */
    const char *per = getenv("SLURM_NTASKS_PER_NODE");
    n = per && *per ? atoi(per) : -1;
    if (n < 1 && !env_int("SLURM_NTASKS", &n, 1, MR, &bad)) n = -1;
    snprintf(job, sizeof job, "slurm.%s.%s", symcoll__env_str("SLURM_JOB_ID", "0"),
             symcoll__env_str("SLURM_STEP_ID", "0"));
    if (!(env_int("SLURM_PROCID", &grank, 0, INT32_MAX - 1, &bad) & env_int("SLURM_NTASKS", &gn, 1, INT32_MAX, &bad)))
      gn = -1;
  }
#undef ENV_PAIR
  if (bad) return SYMCOLL_ERR_INVALID_ARGUMENT; /* named above */
  if (!src || n < 1) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT,
                 "no rank in the environment (SYMCOLL_RANK and SYMCOLL_NRANKS, torchrun's LOCAL_RANK and "
                 "LOCAL_WORLD_SIZE, Open MPI's OMPI_COMM_WORLD_LOCAL_RANK/SIZE, Slurm's SLURM_LOCALID)");
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  }
  if (rank >= n) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "from %s: rank %d is not below the rank count %d", src, rank, n);
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  }
  /* Characters a job id may not hold (e.g. from an Open MPI URI) become '_'. */
  for (char *p = job; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          *p == '.' || *p == '_' || *p == '-' || *p == ':'))
      *p = '_';
  cfg.job_id = job;
  cfg.rank = rank;
  cfg.nranks = n;
  cfg.device = device == SYMCOLL_DEVICE_LOCAL_RANK ? rank : device;
  if (gn > n) { /* more ranks in the job than on this node: a job spanning nodes */
    SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT, "from %s: rank %d of %d, local rank %d of %d, job %s", src, grank, gn, rank, n, job);
    symcoll_job_config_t jc;
    symcoll_job_config_init(&jc);
    jc.job_id = job, jc.rank = grank, jc.nranks = gn, jc.local_rank = rank, jc.local_nranks = n;
    jc.device = cfg.device;
    return symcoll_comm_create_job(&jc, comm_p);
  }
  SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT, "from %s: rank %d of %d, job %s", src, rank, n, job);
  return symcoll_comm_create(&cfg, comm_p);
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
    if (devices[r] < SYMCOLL_DEVICE_HOST || (devices[r] == SYMCOLL_DEVICE_HOST) !=
                                                (devices[0] == SYMCOLL_DEVICE_HOST))
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

int symcoll_comm_rank(symcoll_comm_t comm) { return comm ? comm->rank : -1; }
int symcoll_comm_nranks(symcoll_comm_t comm) { return comm ? comm->nranks : -1; }
int symcoll_comm_device(symcoll_comm_t comm) { return comm ? comm->device : -1; }

symcoll_status_t symcoll__comm_status(symcoll_comm_t comm) {
  if (atomic_load(&comm->aborted)) return SYMCOLL_ERR_ABORTED;
  return (symcoll_status_t)atomic_load(&comm->failed);
}

void symcoll__comm_fail(symcoll_comm_t comm, symcoll_status_t status) {
  int expected = 0;
  atomic_compare_exchange_strong(&comm->failed, &expected, (int)status);
}

/* ---- waiting --------------------------------------------------------------------------- */

void symcoll__waiter_init(symcoll__waiter_t *w, symcoll_comm_t comm, int peer) {
  w->comm = comm;
  w->peer = peer;
  w->spins = 0;
  uint64_t now = symcoll__now_ns();
  w->deadline_ns = now + (uint64_t)comm->timeout_ms * 1000000ull;
  w->next_peer_check_ns = now + 1000000ull;
  w->start_ns = now;
  w->next_report_ns = now + SYMCOLL_WAIT_REPORT_NS;
}

symcoll_status_t symcoll__comm_peers_alive(symcoll_comm_t comm, int peer) {
  if (comm->thread_mode || comm->nranks == 1) return SYMCOLL_OK;
  struct pollfd p[SYMCOLL_MAX_RANKS];
  int idx[SYMCOLL_MAX_RANKS], n = 0;
  for (int r = 0; r < comm->nranks; r++) {
    if (r == comm->rank || (peer >= 0 && r != peer)) continue;
    if (comm->pidfds[r] >= 0) {
      p[n] = (struct pollfd){.fd = comm->pidfds[r], .events = POLLIN};
      idx[n++] = r;
    } else if (kill(comm->pids[r], 0) != 0 && errno == ESRCH) {
      SYMCOLL_INFO(SYMCOLL_SUBSYS_COLL, "rank %d (pid %d) is gone", r, (int)comm->pids[r]);
      return SYMCOLL_ERR_PEER_LOST;
    }
  }
  if (n > 0 && poll(p, (nfds_t)n, 0) > 0)
    for (int i = 0; i < n; i++)
      if (p[i].revents) {
        SYMCOLL_INFO(SYMCOLL_SUBSYS_COLL, "rank %d (pid %d) is gone", idx[i],
                     (int)comm->pids[idx[i]]);
        return SYMCOLL_ERR_PEER_LOST;
      }
  return SYMCOLL_OK;
}

symcoll_status_t symcoll__waiter_slow(symcoll__waiter_t *w) {
  symcoll_comm_t c = w->comm;
  if (atomic_load_explicit(&c->aborted, memory_order_relaxed)) return SYMCOLL_ERR_ABORTED;
  /* Ranks may outnumber cores: after a short spin, give the core away. */
  if (w->spins > c->spin_before_yield) sched_yield();
  uint64_t now = symcoll__now_ns();
  if (now >= w->next_peer_check_ns) {
    w->next_peer_check_ns = now + 2000000ull;
    symcoll_status_t s = symcoll__comm_peers_alive(c, w->peer);
    if (s != SYMCOLL_OK) return s;
    s = symcoll__comm_status(c);
    if (s != SYMCOLL_OK) return s;
  }
  if (now >= w->deadline_ns) return SYMCOLL_ERR_TIMEOUT;
  if (now >= w->next_report_ns) { /* a long wait says whom it waits for */
    w->next_report_ns = now + 2 * SYMCOLL_WAIT_REPORT_NS;
    char who[24] = "any rank";
    if (w->peer >= 0) snprintf(who, sizeof who, "rank %d", w->peer);
    SYMCOLL_WARN(SYMCOLL_SUBSYS_COLL, "job %s: rank %d still waiting for %s in call %llu (%.0f s of the %.0f s timeout)",
                 c->job_id, c->rank, who, (unsigned long long)c->coll_seq, (double)(now - w->start_ns) * 1e-9,
                 c->timeout_ms * 1e-3);
  }
  return SYMCOLL_OK;
}

/* ---- symmetric memory ------------------------------------------------------------------ */

symcoll_status_t symcoll__mem_alloc_internal(symcoll_comm_t comm, size_t bytes,
                                             struct symcoll_mem **mem_p) {
  size_t all[SYMCOLL_MAX_RANKS];
  SYMCOLL_CHECK(symcoll__comm_status(comm));
  SYMCOLL_CHECK(comm->oob->allgather(comm, &bytes, all, sizeof bytes));
  for (int r = 0; r < comm->nranks; r++)
    if (all[r] != bytes) {
      SYMCOLL_WARN(SYMCOLL_SUBSYS_MEM, "rank %d allocates %zu bytes, this rank %zu", r, all[r],
                   bytes);
      return SYMCOLL_ERR_MISMATCH;
    }
  symcoll__fault_point(comm->rank, "alloc");
  struct symcoll_mem *m = calloc(1, sizeof *m);
  if (!m) return SYMCOLL_ERR_NO_MEMORY;
  m->comm = comm;
  m->bytes = bytes;
  m->id = comm->next_mem_id++;
  symcoll_status_t s = comm->tp->mem_alloc(comm, bytes, m);
  if (s != SYMCOLL_OK) {
    free(m);
    return s;
  }
  m->next = comm->mems;
  comm->mems = m;
  *mem_p = m;
  return SYMCOLL_OK;
}

/* Every rank of comm is past its allocation's (or free's) driver calls. Those can wait for the
 * GPU to go idle, and with ranks sharing a GPU it never does while a peer's kernel waits for
 * this rank: so no rank may start a collective while another is still in them. */
static symcoll_status_t all_done(symcoll_comm_t comm) {
  char mine = 1, all[SYMCOLL_MAX_RANKS];
  return comm->oob->allgather(comm, &mine, all, 1);
}

symcoll_status_t symcoll_mem_alloc(symcoll_comm_t comm, size_t bytes, symcoll_mem_t *mem_p) {
  if (!comm || !mem_p || bytes == 0) return SYMCOLL_ERR_INVALID_ARGUMENT;
  SYMCOLL_CHECK(symcoll__mem_alloc_internal(comm, bytes, mem_p));
  return all_done(comm);
}

symcoll_status_t symcoll_mem_free(symcoll_mem_t mem) {
  if (!mem) return SYMCOLL_ERR_INVALID_ARGUMENT;
  symcoll_comm_t comm = mem->comm;
  if (mem == comm->workspace) return SYMCOLL_ERR_INVALID_ARGUMENT;
  /* No peer may still use it: a barrier first. After a failure, free locally anyway. */
  int id = mem->id, ids[SYMCOLL_MAX_RANKS];
  symcoll_status_t s = symcoll__comm_status(comm);
  if (s == SYMCOLL_OK) s = comm->oob->allgather(comm, &id, ids, sizeof id);
  for (int r = 0; s == SYMCOLL_OK && r < comm->nranks; r++)
    if (ids[r] != id) s = SYMCOLL_ERR_MISMATCH;
  for (struct symcoll_mem **pp = &comm->mems; *pp; pp = &(*pp)->next)
    if (*pp == mem) {
      *pp = mem->next;
      break;
    }
  comm->tp->mem_free(mem);
  free(mem);
  return s == SYMCOLL_OK ? all_done(comm) : s;
}

void *symcoll_mem_ptr(symcoll_mem_t mem, int rank) {
  if (!mem || rank < 0 || rank >= mem->comm->nranks) return NULL;
  return mem->ptrs[rank];
}

size_t symcoll_mem_size(symcoll_mem_t mem) { return mem ? mem->bytes : 0; }

symcoll_status_t symcoll_mem_device_view(symcoll_mem_t mem, symcoll_device_view_t *view_p) {
  if (!mem || !view_p) return SYMCOLL_ERR_INVALID_ARGUMENT;
  if (!mem->comm->tp->mem_device_view) return SYMCOLL_ERR_UNSUPPORTED;
  return mem->comm->tp->mem_device_view(mem, view_p);
}

struct symcoll_mem *symcoll__mem_find(symcoll_comm_t comm, const void *p, size_t bytes,
                                      size_t *off_p) {
  uintptr_t a = (uintptr_t)p;
  for (struct symcoll_mem *m = comm->mems; m; m = m->next) {
    uintptr_t base = (uintptr_t)m->ptrs[comm->rank];
    if (m != comm->workspace && a >= base && a - base <= m->bytes && bytes <= m->bytes - (a - base)) {
      *off_p = a - base;
      return m;
    }
  }
  return NULL;
}
