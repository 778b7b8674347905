/* Open MPI's MPI_Allreduce as a peer column of the CPU backend (symcoll-bench-mpi only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#ifdef SYMCOLL_BENCH_MPI
#include <mpi.h>

static int active;
int peer_mpi_active(void) { return active; }
void peer_mpi_init(int *argc, char ***argv) {
  if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_RANK")) {
    MPI_Init(argc, argv);
    active = 1;
  }
}
void peer_mpi_finalize(void) {
  if (active) MPI_Finalize();
}

static int mpi_init(bctx_t *c, column_t *col) {
  if (!active || c->gpu) {
    snprintf(col->na, sizeof col->na, "n/a: not launched under mpirun");
    return 1;
  }
  return 0;
}

static int mpi_run(bctx_t *c, column_t *col, const void *send, void *recv, size_t count,
                   symcoll_dtype_t dt, symcoll_op_t op) {
  (void)c;
  (void)col;
  if (dt != SYMCOLL_FLOAT32) return 1; /* MPI has no 16-bit float types */
  MPI_Op o = op == SYMCOLL_SUM ? MPI_SUM : op == SYMCOLL_MAX ? MPI_MAX : MPI_MIN;
  return MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, (int)count, MPI_FLOAT, o,
                       MPI_COMM_WORLD) != MPI_SUCCESS;
}

int peer_mpi_column(column_t *col) {
  memset(col, 0, sizeof *col);
  col->name = "mpi";
  col->is_baseline = true;
  col->init = mpi_init;
  col->run = mpi_run;
  return 1;
}
#else
int peer_mpi_active(void) { return 0; }
void peer_mpi_init(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
}
void peer_mpi_finalize(void) {}
int peer_mpi_column(column_t *col) {
  (void)col;
  return 0;
}
#endif
