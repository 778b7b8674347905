/* symcoll_comm_create_from_env: ranks, job id and device from the launcher (SYMCOLL_*, torchrun,
 * Open MPI, Slurm). */
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

/* Both variables read (each one's errors reported), whether or not the first is set. */
static bool env_ints(const char *a, int *va, int alo, int ahi, const char *b, int *vb, int blo, int bhi, bool *bad) {
  const bool has_a = env_int(a, va, alo, ahi, bad), has_b = env_int(b, vb, blo, bhi, bad);
  return has_a && has_b;
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
#define ENV_PAIR(r, nr) env_ints(r, &rank, 0, MR - 1, nr, &n, 1, MR, &bad)
  if (ENV_PAIR("SYMCOLL_RANK", "SYMCOLL_NRANKS")) {
    src = "SYMCOLL_*";
    /* Unnamed: ranks started by one parent (a script, a shell's `&`, a forking launcher)
     * share its pid, and two such jobs started at once do not. */
    const char *named = symcoll__env_str("SYMCOLL_JOB_ID", NULL);
    if (named)
      snprintf(job, sizeof job, "%s", named);
    else
      snprintf(job, sizeof job, "ppid.%d", (int)getppid());
  } else if (!bad && ENV_PAIR("LOCAL_RANK", "LOCAL_WORLD_SIZE")) {
    src = "torchrun";
    const char *run = getenv("TORCHELASTIC_RUN_ID");
    if (run && *run && strcmp(run, "none") != 0)
      snprintf(job, sizeof job, "torch.%s", run);
    else
      snprintf(job, sizeof job, "torch.%s:%s", symcoll__env_str("MASTER_ADDR", "local"),
               symcoll__env_str("MASTER_PORT", "0"));
    if (!env_ints("RANK", &grank, 0, INT32_MAX - 1, "WORLD_SIZE", &gn, 1, INT32_MAX, &bad)) gn = -1;
  } else if (!bad && ENV_PAIR("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE")) {
    src = "Open MPI";
    const char *id = getenv("OMPI_MCA_ess_base_jobid");
    if (!id) id = getenv("OMPI_MCA_orte_ess_jobid");
    if (!id) id = getenv("OMPI_MCA_orte_hnp_uri");
    snprintf(job, sizeof job, "ompi.%s", id ? id : "0");
    if (!env_ints("OMPI_COMM_WORLD_RANK", &grank, 0, INT32_MAX - 1, "OMPI_COMM_WORLD_SIZE", &gn, 1, INT32_MAX, &bad))
      gn = -1;
  } else if (!bad && env_int("SLURM_LOCALID", &rank, 0, MR - 1, &bad)) {
    src = "Slurm";
    /* SLURM_NTASKS_PER_NODE may read "4(x2)": its leading number is the tasks on this node. */
    const char *per = getenv("SLURM_NTASKS_PER_NODE");
    n = per && *per ? atoi(per) : -1;
    if (n < 1 && !env_int("SLURM_NTASKS", &n, 1, MR, &bad)) n = -1;
    snprintf(job, sizeof job, "slurm.%s.%s", symcoll__env_str("SLURM_JOB_ID", "0"),
             symcoll__env_str("SLURM_STEP_ID", "0"));
    if (!env_ints("SLURM_PROCID", &grank, 0, INT32_MAX - 1, "SLURM_NTASKS", &gn, 1, INT32_MAX, &bad)) gn = -1;
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
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' ||
          *p == '-' || *p == ':'))
      *p = '_';
  cfg.job_id = job;
  cfg.rank = rank;
  cfg.nranks = n;
  cfg.device = device == SYMCOLL_DEVICE_LOCAL_RANK ? rank : device;
  if (gn > n) { /* more ranks in the job than on this node: a job spanning nodes */
    SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT, "from %s: rank %d of %d, local rank %d of %d, job %s", src, grank, gn, rank, n,
                 job);
    symcoll_job_config_t jc;
    symcoll_job_config_init(&jc);
    jc.job_id = job, jc.rank = grank, jc.nranks = gn, jc.local_rank = rank, jc.local_nranks = n;
    jc.device = cfg.device;
    return symcoll_comm_create_job(&jc, comm_p);
  }
  SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT, "from %s: rank %d of %d, job %s", src, rank, n, job);
  return symcoll_comm_create(&cfg, comm_p);
}
