/*
 * The serve-or-forward decision and the maps between NCCL's and symcoll's enums. Pure: no
 * CUDA, no libsymcoll, no environment (the caller reads the variables), so the unit tests
 * compile this file in.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "shim.h"

static const char *const call_names[SHIM_NUM_CALLS] = {[SHIM_ALL_REDUCE] = "AllReduce",
                                                       [SHIM_ALL_GATHER] = "AllGather",
                                                       [SHIM_REDUCE_SCATTER] = "ReduceScatter",
                                                       [SHIM_BROADCAST] = "Broadcast",
                                                       [SHIM_REDUCE] = "Reduce",
                                                       [SHIM_ALL_TO_ALL] = "AlltoAll",
                                                       [SHIM_SEND] = "Send",
                                                       [SHIM_RECV] = "Recv",
                                                       [SHIM_GATHER] = "Gather",
                                                       [SHIM_SCATTER] = "Scatter"};

const char *shim_call_name(shim_call_t call) {
  return (unsigned)call < SHIM_NUM_CALLS ? call_names[call] : "unknown";
}

int shim_call_coll(shim_call_t call) {
  switch (call) {
    case SHIM_ALL_REDUCE:
      return SYMCOLL_COLL_ALL_REDUCE;
    case SHIM_ALL_GATHER:
      return SYMCOLL_COLL_ALL_GATHER;
    case SHIM_REDUCE_SCATTER:
      return SYMCOLL_COLL_REDUCE_SCATTER;
    case SHIM_BROADCAST:
      return SYMCOLL_COLL_BROADCAST;
    case SHIM_REDUCE:
      return SYMCOLL_COLL_REDUCE;
    case SHIM_ALL_TO_ALL:
      return SYMCOLL_COLL_ALL_TO_ALL;
    case SHIM_SEND:
    case SHIM_RECV:
    case SHIM_GATHER:
    case SHIM_SCATTER:
    case SHIM_NUM_CALLS:
      break;
  }
  return -1;
}

bool shim_call_reduces(shim_call_t call) {
  return call == SHIM_ALL_REDUCE || call == SHIM_REDUCE_SCATTER || call == SHIM_REDUCE;
}

int shim_dtype(int nccl_dtype) {
  switch (nccl_dtype) {
    case ncclInt8:
      return SYMCOLL_INT8;
    case ncclUint8:
      return SYMCOLL_UINT8;
    case ncclInt32:
      return SYMCOLL_INT32;
    case ncclUint32:
      return SYMCOLL_UINT32;
    case ncclInt64:
      return SYMCOLL_INT64;
    case ncclUint64:
      return SYMCOLL_UINT64;
    case ncclFloat16:
      return SYMCOLL_FLOAT16;
    case ncclFloat32:
      return SYMCOLL_FLOAT32;
    case ncclFloat64:
      return SYMCOLL_FLOAT64;
    case ncclBfloat16:
      return SYMCOLL_BFLOAT16;
    case ncclFloat8e4m3:
      return SYMCOLL_FLOAT8_E4M3;
    case ncclFloat8e5m2:
      return SYMCOLL_FLOAT8_E5M2;
    default:
      return -1;
  }
}

int shim_op(int nccl_op) {
  switch (nccl_op) {
    case ncclSum:
      return SYMCOLL_SUM;
    case ncclProd:
      return SYMCOLL_PROD;
    case ncclMax:
      return SYMCOLL_MAX;
    case ncclMin:
      return SYMCOLL_MIN;
    case ncclAvg:
      return SYMCOLL_AVG;
    default: /* ncclRedOpCreatePreMulSum's ops (>= ncclNumOps) and garbage */
      return -1;
  }
}

int shim_policy_parse(const char *mode, const char *max_bytes, shim_policy_t *p, const char **bad) {
  p->mode = SHIM_MODE_AUTO;
  p->max_bytes = 0;
  int rc = 0;
  if (bad) *bad = NULL;
  if (mode && *mode) {
    if (!strcasecmp(mode, "auto"))
      p->mode = SHIM_MODE_AUTO;
    else if (!strcasecmp(mode, "serve") || !strcasecmp(mode, "symcoll"))
      p->mode = SHIM_MODE_SERVE;
    else if (!strcasecmp(mode, "forward") || !strcasecmp(mode, "nccl"))
      p->mode = SHIM_MODE_FORWARD;
    else {
      rc = -1;
      if (bad) *bad = "SYMCOLL_NCCL_SHIM";
    }
  }
  if (max_bytes && *max_bytes) {
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(max_bytes, &end, 10);
    unsigned long long mult = 1;
    if (end && *end) {
      switch (*end) {
        case 'k':
        case 'K':
          mult = 1ull << 10;
          break;
        case 'm':
        case 'M':
          mult = 1ull << 20;
          break;
        case 'g':
        case 'G':
          mult = 1ull << 30;
          break;
        default:
          mult = 0;
      }
      if (mult && end[1] && strcasecmp(end + 1, "B") && strcasecmp(end + 1, "iB")) mult = 0;
    }
    if (errno || end == max_bytes || *max_bytes == '-' || !mult || v > (unsigned long long)SIZE_MAX / mult) {
      rc = -1;
      if (bad && !*bad) *bad = "SYMCOLL_NCCL_SHIM_MAX_BYTES";
    } else {
      p->max_bytes = (size_t)(v * mult);
    }
  }
  return rc;
}

shim_decision_t shim_decide(const shim_policy_t *p, shim_call_t call, int nccl_dtype, int nccl_op, size_t bytes,
                            const shim_comm_view_t *comm) {
  if (shim_call_coll(call) < 0)
    return (shim_decision_t){false, "symcoll has no such collective (send/recv, gather, scatter)"};
  if (p->mode == SHIM_MODE_FORWARD) return (shim_decision_t){false, "SYMCOLL_NCCL_SHIM=forward"};
  if (shim_dtype(nccl_dtype) < 0) return (shim_decision_t){false, "dtype unknown to symcoll"};
  if (shim_call_reduces(call) && shim_op(nccl_op) < 0 && !(comm && comm->premul))
    return (shim_decision_t){false, "op is not sum/prod/max/min/avg nor a PreMulSum of this dtype"};
  if (!comm || !comm->capable) return (shim_decision_t){false, "no symcoll communicator"};
  if (comm->coll_refused) return (shim_decision_t){false, "symcoll refused this collective earlier (UNSUPPORTED)"};
  if (comm->table_algo < 0) return (shim_decision_t){false, "symcoll does not run this collective here"};
  if (p->mode == SHIM_MODE_SERVE) return (shim_decision_t){true, "SYMCOLL_NCCL_SHIM=serve"};
  if (p->max_bytes && bytes > p->max_bytes) return (shim_decision_t){false, "above SYMCOLL_NCCL_SHIM_MAX_BYTES"};
  if (comm->table_algo == SYMCOLL_ALGO_NCCL) return (shim_decision_t){false, "the tuning table picks NCCL"};
  return (shim_decision_t){true, "the tuning table picks symcoll"};
}

ncclResult_t shim_result(symcoll_status_t s) {
  switch (s) {
    case SYMCOLL_OK:
      return ncclSuccess;
    case SYMCOLL_ERR_INVALID_ARGUMENT:
      return ncclInvalidArgument;
    case SYMCOLL_ERR_UNSUPPORTED:
      return ncclInvalidUsage;
    case SYMCOLL_ERR_SYSTEM:
    case SYMCOLL_ERR_NO_MEMORY: /* NCCL reports a failed host or device allocation as a system error */
      return ncclSystemError;
    case SYMCOLL_ERR_CUDA:
      return ncclUnhandledCudaError;
    case SYMCOLL_ERR_TIMEOUT:
    case SYMCOLL_ERR_PEER_LOST: /* NCCL: "a call failed on a remote peer" */
      return ncclRemoteError;
    case SYMCOLL_ERR_ABORTED:  /* a call on an aborted / revoked communicator */
    case SYMCOLL_ERR_MISMATCH: /* ranks in different calls: a usage error, as NCCL's */
      return ncclInvalidUsage;
    case SYMCOLL_ERR_INTERNAL:
      return ncclInternalError;
  }
  return ncclInternalError;
}

const char *shim_result_string(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    default:
      return "unknown result code";
  }
}

ncclResult_t shim_config_check(const ncclConfig_t *cfg, int *blocking, const char **why) {
  *blocking = 1;
  if (why) *why = NULL;
  if (!cfg) return ncclSuccess;
  /* NCCL: the size of the oldest ncclConfig_t (2.14: size, magic, version, blocking, ...) up to
   * any newer one; the magic of NCCL_CONFIG_INITIALIZER; a version NCCL knows. */
  if (cfg->size < offsetof(ncclConfig_t, cgaClusterSize)) {
    if (why) *why = "ncclConfig_t.size is too small (initialise it with NCCL_CONFIG_INITIALIZER)";
    return ncclInvalidArgument;
  }
  if (cfg->magic != 0xcafebeef) {
    if (why) *why = "ncclConfig_t.magic is wrong (initialise it with NCCL_CONFIG_INITIALIZER)";
    return ncclInvalidArgument;
  }
  if (cfg->version < NCCL_VERSION(2, 14, 0)) {
    if (why) *why = "ncclConfig_t.version is older than NCCL 2.14";
    return ncclInvalidArgument;
  }
  if (cfg->blocking != NCCL_CONFIG_UNDEF_INT && cfg->blocking != 0 && cfg->blocking != 1) {
    if (why) *why = "ncclConfig_t.blocking is neither 0 nor 1";
    return ncclInvalidArgument;
  }
  if (cfg->blocking == 0) *blocking = 0;
  return ncclSuccess;
}
