/* symcoll-tune: symcoll-bench with the defaults of tuning: the candidate algorithms only (no
 * auto, no peers), a wide size range, and the fastest per size written as a tuning table
 * where the library looks for one (~/.cache/symcoll/tune.txt; docs/tuning.md). Every option
 * of symcoll-bench still applies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"

/* ~/.cache/symcoll/tune.txt, its directories made. */
static const char *default_table(void) {
  static char path[512];
  const char *home = getenv("HOME") ? getenv("HOME") : ".";
  snprintf(path, sizeof path, "%s/.cache/symcoll", home);
  for (char *p = path + 1; *p; p++) /* mkdir -p */
    if (*p == '/') {
      *p = 0;
      mkdir(path, 0755);
      *p = '/';
    }
  mkdir(path, 0755);
  strncat(path, "/tune.txt", sizeof path - strlen(path) - 1);
  return path;
}

static void tune_defaults(const bench_args_t *x) {
  bench_opts_t *o = &bench_opts;
  if (!o->tune) o->tune = default_table();
  if (!x->algos_set && o->coll->kind == SYMCOLL_COLL_ALL_REDUCE)
    snprintf(o->algos, sizeof o->algos, "%s",
             x->gpu ? "oneshot,oneshot_db,lamport,twoshot,oneshot_db@0:256,lamport@0:256,twoshot@0:256,"
                      "oneshot_db@0:1024,lamport@0:1024,twoshot@0:1024"
                    : "oneshot,twoshot");
  else if (!x->algos_set) { /* the collective's algorithms without auto */
    char *autop = strstr(o->algos, ",auto");
    if (autop) *autop = 0;
  }
  /* NCCL through symcoll's engine is a candidate where NCCL runs: one process per GPU. */
  if (!x->algos_set && x->gpu && !strcmp(o->mode, "process") && o->nranks > 1 && o->nranks <= x->ngpu) {
    strncat(o->algos, ",nccl", sizeof o->algos - strlen(o->algos) - 1);
    setenv("SYMCOLL_NCCL", "1", 0);
  }
  if (!x->peers_set) o->peers[0] = 0;
  if (!x->range_set) {
    o->min_bytes = 1024;
    o->max_bytes = 64u << 20;
  }
}

int main(int argc, char **argv) {
  bench_args_t x;
  int rc = bench_cli_parse(&argc, &argv, &x);
  if (rc >= 0) return rc;
  tune_defaults(&x);
  rc = bench_cli_finish(argv[0], &x);
  return rc >= 0 ? rc : bench_run(&x);
}
