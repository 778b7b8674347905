/*
 * symcoll for MPI programs (libsymcoll_mpi; link with -lsymcoll_mpi -lsymcoll and your MPI).
 * Needs <mpi.h>: this header is the only part of symcoll that does.
 */
#ifndef SYMCOLL_MPI_H
#define SYMCOLL_MPI_H
#include <mpi.h>

#include "symcoll.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Creates this rank's communicator over the ranks of `comm` (collective over them), with the
 * same rank order. Ranks sharing a node (MPI_COMM_TYPE_SHARED) form its node-local part; a
 * job of several nodes spans them, with MPI between the nodes for CPU ranks
 * (device == SYMCOLL_DEVICE_HOST) and NCCL for GPU ranks (its unique ids travel over comm).
 * device: a CUDA ordinal, SYMCOLL_DEVICE_HOST, or SYMCOLL_DEVICE_LOCAL_RANK (the node-local
 * rank as the ordinal). comm stays the caller's; symcoll works on a duplicate of it. MPI calls
 * made by symcoll come from the thread that calls symcoll (MPI_THREAD_SERIALIZED suffices).
 * Errors: those of symcoll_comm_create_job.
 */
symcoll_status_t symcoll_comm_create_mpi(MPI_Comm comm, int device, symcoll_comm_t *comm_p);

#ifdef __cplusplus
}
#endif
#endif
