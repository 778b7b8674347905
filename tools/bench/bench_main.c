/* symcoll-bench: symcoll's algorithms and its peers timed side by side, size by size (bench.h
 * lists the harness's files). */
#include "bench.h"

int main(int argc, char **argv) {
  bench_args_t x;
  int rc = bench_cli_parse(&argc, &argv, &x);
  if (rc < 0) rc = bench_cli_finish(argv[0], &x);
  return rc >= 0 ? rc : bench_run(&x);
}
