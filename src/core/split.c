/*
 * symcoll_comm_split: new communicators from groups of an existing one (ncclCommSplit's
 * contract). The parent's out-of-band channel carries every rank's (color, key); each group
 * then builds a communicator of its own, with its own workspace and pads: in process mode
 * through a rendezvous of its own (the parent's job id, the split's number and the color name
 * it), in thread mode through a thread team that the group's first rank makes and hands to the
 * others over the parent's channel.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A job id for the group, at most SYMCOLL_JOB_ID_MAX characters: readable when it fits, else
 * a hash of the parent's id (splits of splits grow the name). */
static void group_job_id(const char *parent, uint64_t seq, int color, char *out, size_t n) {
  int len = snprintf(out, n, "%s.s%llu.c%d", parent, (unsigned long long)seq, color);
  if (len > 0 && len <= SYMCOLL_JOB_ID_MAX) return;
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (const char *p = parent; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  snprintf(out, n, "split.%016llx.s%llu.c%d", (unsigned long long)h, (unsigned long long)seq, color);
}

/* The end of a split: every rank of the parent has set up its group (the driver calls of a
 * group's set-up can wait for the GPU to go idle, which never happens while a rank of another
 * group already runs collectives that wait for this rank in the parent). A rank whose group
 * failed returns the failure; the others do not wait for it any longer than this. */
static symcoll_status_t parent_done(symcoll_comm_t parent, symcoll_status_t s, symcoll_comm_t *newcomm_p) {
  int mine = s, all[SYMCOLL_MAX_RANKS];
  symcoll_status_t b = parent->oob->allgather(parent, &mine, all, sizeof mine);
  if (s == SYMCOLL_OK && b != SYMCOLL_OK) {
    if (*newcomm_p) symcoll_comm_destroy(*newcomm_p);
    *newcomm_p = NULL;
    s = b;
  }
  return s;
}

/* The group of `color`: ranks of that color ordered by key, then by rank in the parent (a
 * stable insertion); returns its size, *newrank_p = me's place in it (-1: not in it). */
static int group_of(const int all[][2], int n, int color, int me, int *members, int *newrank_p) {
  int newn = 0;
  for (int r = 0; color >= 0 && r < n; r++) {
    if (all[r][0] != color) continue;
    int at = newn++;
    while (at > 0 && (all[members[at - 1]][1] > all[r][1])) {
      members[at] = members[at - 1];
      at--;
    }
    members[at] = r;
  }
  *newrank_p = -1;
  for (int i = 0; i < newn; i++)
    if (members[i] == me) *newrank_p = i;
  return newn;
}

symcoll_status_t symcoll_comm_split(symcoll_comm_t comm, int color, int key, symcoll_comm_t *newcomm_p) {
  symcoll__log_init();
  if (!comm || !newcomm_p) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "comm_split: %s is NULL", comm ? "newcomm_p" : "comm");
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  }
  if (color < SYMCOLL_SPLIT_NOCOLOR) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "comm_split: color %d (>= 0, or SYMCOLL_SPLIT_NOCOLOR)", color);
    return SYMCOLL_ERR_INVALID_ARGUMENT;
  }
  if (comm->hier) {
    SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT,
                 "comm_split: not supported on a communicator spanning nodes (split "
                 "symcoll_comm_local(comm), or make a job of the group)");
    return SYMCOLL_ERR_UNSUPPORTED;
  }
  SYMCOLL_CHECK(symcoll__comm_status(comm));
  const int n = comm->nranks, me = comm->rank;
  int mine[2] = {color, key}, all[SYMCOLL_MAX_RANKS][2];
  SYMCOLL_CHECK(comm->oob->allgather(comm, mine, all, sizeof mine));
  const uint64_t seq = ++comm->split_seq;

  int members[SYMCOLL_MAX_RANKS], newrank = -1;
  const int newn = group_of(all, n, color, me, members, &newrank);

  symcoll_config_t cfg;
  symcoll_config_init(&cfg);
  char job[SYMCOLL_JOB_ID_MAX + 1];
  group_job_id(comm->job_id, seq, color, job, sizeof job);
  cfg.job_id = job;
  cfg.rank = newrank;
  cfg.nranks = newn;
  cfg.device = comm->device;
  cfg.timeout_ms = comm->timeout_ms;
  cfg.workspace_bytes = comm->workspace_bytes;

  /* The groups run beside each other: each sizes its GPU grids for every rank of comm (and of
   * comm's own parent) on its GPU. */
  const int sharers = comm->ranks_on_my_device > comm->sharers_floor ? comm->ranks_on_my_device : comm->sharers_floor;
  if (!comm->thread_mode) {
    symcoll_status_t s = SYMCOLL_OK;
    *newcomm_p = NULL;
    if (color != SYMCOLL_SPLIT_NOCOLOR) {
      SYMCOLL_INFO(SYMCOLL_SUBSYS_INIT, "comm_split: rank %d of %s becomes rank %d of %d in %s", me, comm->job_id,
                   newrank, newn, job);
      s = symcoll__comm_create_flat(&cfg, sharers, newcomm_p);
    }
    return parent_done(comm, s, newcomm_p);
  }

  /* Thread mode: the group's first rank makes the team; every rank of comm takes part in
   * handing the pointers over (ranks of no group hand over nothing). */
  void *team = color >= 0 && newrank == 0 ? symcoll__team_new(newn) : NULL;
  void *teams[SYMCOLL_MAX_RANKS];
  symcoll_status_t s = comm->oob->allgather(comm, &team, teams, sizeof team);
  if (s != SYMCOLL_OK) {
    free(team); /* nobody else holds it: the exchange failed */
    return s;
  }
  *newcomm_p = NULL;
  if (color == SYMCOLL_SPLIT_NOCOLOR) return parent_done(comm, SYMCOLL_OK, newcomm_p);
  team = teams[members[0]];
  symcoll_comm_t c = NULL;
  s = team ? symcoll__comm_new(&cfg, &c) : SYMCOLL_ERR_NO_MEMORY;
  if (s == SYMCOLL_OK) {
    c->sharers_floor = sharers;
    symcoll__team_join(c, team);
    s = symcoll__comm_setup(c);
    if (s == SYMCOLL_OK)
      symcoll__comm_ready(c);
    else
      symcoll__comm_free(c), c = NULL;
  }
  *newcomm_p = c;
  return parent_done(comm, s, newcomm_p);
}
