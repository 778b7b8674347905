/*
 * libsymcoll_nccl: NCCL's C API over symcoll (a drop-in for libnccl.so.2).
 *
 * Programs written for NCCL (nccl-tests, PyTorch's ProcessGroupNCCL) run on symcoll unchanged:
 * the collectives symcoll is best at (all_reduce, all_gather, reduce_scatter, broadcast,
 * reduce, all_to_all of NCCL's dtypes and built-in ops, at the sizes where symcoll's tuning
 * table does not pick NCCL) run on symcoll's symmetric-memory kernels; everything else goes to
 * the real NCCL, opened at run time, through a real communicator made at the first call that
 * needs one. One concept per file:
 *   decide.c    the serve-or-forward decision, dtype/op/status maps, config checks (pure)
 *   uniqueid.c  the ncclUniqueId encoding of a symcoll job id (pure)
 *   log.c       SYMCOLL_DEBUG output and ncclGetLastError's text
 *   real.c      loading the real NCCL (never the shim itself)
 *   comm.c      communicator life cycle, the lazily made real communicator
 *   group.c     ncclGroupStart/End: nesting, deferred creation, the real group
 *   api.c       the exported entry points
 * decide.c, uniqueid.c and log.c need neither CUDA nor libsymcoll: the unit tests
 * (tests/test_nccl_shim.c) compile them in, also in builds without CUDA.
 */
#ifndef SYMCOLL_NCCL_SHIM_H
#define SYMCOLL_NCCL_SHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nccl.h>

#include "symcoll.h"

#define SHIM_HIDDEN __attribute__((visibility("hidden")))
#define SHIM_EXPORT __attribute__((visibility("default")))

/* ---- decide.c: the pure parts ------------------------------------------------------------ */

/* The calls the shim sees; the first six are those symcoll may serve. */
typedef enum {
  SHIM_ALL_REDUCE,
  SHIM_ALL_GATHER,
  SHIM_REDUCE_SCATTER,
  SHIM_BROADCAST,
  SHIM_REDUCE,
  SHIM_ALL_TO_ALL,
  SHIM_SEND,
  SHIM_RECV,
  SHIM_GATHER,
  SHIM_SCATTER,
  SHIM_NUM_CALLS
} shim_call_t;

typedef enum { SHIM_MODE_AUTO = 0, SHIM_MODE_SERVE = 1, SHIM_MODE_FORWARD = 2 } shim_mode_t;

/* SYMCOLL_NCCL_SHIM=auto|serve|forward and SYMCOLL_NCCL_SHIM_MAX_BYTES (bytes, K/M/G suffixes
 * in powers of 1024; 0 or unset: no cap, the tuning table alone decides). */
typedef struct {
  shim_mode_t mode;
  size_t max_bytes; /* 0: no cap */
} shim_policy_t;

typedef struct {
  bool serve;
  const char *why; /* static text, for the SYMCOLL_DEBUG line */
} shim_decision_t;

/* What the decision knows about the communicator. */
typedef struct {
  bool capable;      /* a symcoll communicator exists and is healthy */
  int table_algo;    /* symcoll_coll_algo's answer for this call; -1: symcoll refuses the collective */
  bool coll_refused; /* an earlier call of this collective got UNSUPPORTED from symcoll */
  bool premul;       /* the call's op is a PreMulSum op of this communicator, of the call's dtype */
} shim_comm_view_t;

SHIM_HIDDEN const char *shim_call_name(shim_call_t call);
/* The symcoll collective of a served call; -1 for the others. */
SHIM_HIDDEN int shim_call_coll(shim_call_t call);
/* ncclDataType_t -> symcoll_dtype_t; -1 if unknown. */
SHIM_HIDDEN int shim_dtype(int nccl_dtype);
/* ncclRedOp_t -> symcoll_op_t; -1 for PreMulSum / user ops and unknown values. */
SHIM_HIDDEN int shim_op(int nccl_op);
/* Whether the call reduces (takes an op). */
SHIM_HIDDEN bool shim_call_reduces(shim_call_t call);
/* Parses the two variables (NULL: unset). Returns 0, or -1 (and *p keeps the defaults for the
 * bad one) where a value is malformed; *bad names it. */
SHIM_HIDDEN int shim_policy_parse(const char *mode, const char *max_bytes, shim_policy_t *p, const char **bad);
/* The serve-or-forward decision of one call: `bytes` is the call's count argument times the
 * dtype's size (all_gather: sendcount, reduce_scatter: recvcount, all_to_all: one block). */
SHIM_HIDDEN shim_decision_t shim_decide(const shim_policy_t *p, shim_call_t call, int nccl_dtype, int nccl_op,
                                        size_t bytes, const shim_comm_view_t *comm);
/* symcoll_status_t -> ncclResult_t. */
SHIM_HIDDEN ncclResult_t shim_result(symcoll_status_t s);
/* NCCL's own strings for ncclGetErrorString (the shim answers without the real library). */
SHIM_HIDDEN const char *shim_result_string(ncclResult_t r);
/* Checks an ncclConfig_t as NCCL does (size, magic, version); NULL is the default config.
 * Writes *blocking (1 unless the config says 0). Returns ncclSuccess or ncclInvalidArgument. */
SHIM_HIDDEN ncclResult_t shim_config_check(const ncclConfig_t *cfg, int *blocking, const char **why);

/* ---- uniqueid.c -------------------------------------------------------------------------- */

#define SHIM_ID_MAGIC "symcoll-nccl-id" /* 15 chars + NUL: the first 16 bytes */
#define SHIM_ID_VERSION 1u
#define SHIM_JOB_ID_MAX 64 /* symcoll_config_t.job_id: <= 64 chars */

/* Encodes job_id (<= 63 chars) into *id; -1 if it does not fit. */
SHIM_HIDDEN int shim_id_encode(const char *job_id, ncclUniqueId *id);
/* Decodes *id into job_id (SHIM_JOB_ID_MAX bytes); -1 for an id not made by the shim
 * (wrong magic, version or an unterminated / unprintable job id). */
SHIM_HIDDEN int shim_id_decode(const ncclUniqueId *id, char *job_id);
/* A fresh random job id "nccl-<32 hex digits>" (getrandom, else /dev/urandom, else time and
 * pid). */
SHIM_HIDDEN void shim_job_id_new(char *job_id);

/* ---- log.c ------------------------------------------------------------------------------- */

enum { SHIM_LOG_NONE = 0, SHIM_LOG_WARN = 1, SHIM_LOG_INFO = 2, SHIM_LOG_TRACE = 3 };
SHIM_HIDDEN int shim_log_level(void);
SHIM_HIDDEN void shim_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Records the text ncclGetLastError returns on this thread, and logs it as a warning. */
SHIM_HIDDEN void shim_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
SHIM_HIDDEN const char *shim_last_error(void);
#define SHIM_INFO(...)                                                           \
  do {                                                                           \
    if (shim_log_level() >= SHIM_LOG_INFO) shim_log(SHIM_LOG_INFO, __VA_ARGS__); \
  } while (0)

#endif /* SYMCOLL_NCCL_SHIM_H */
