/* Status strings, names of enums, version. */
#include "internal.h"

static const char *const status_strings[] = {
#define SYMCOLL__STATUS_STR(name, value, text) [-(value)] = "SYMCOLL_" #name ": " text,
    SYMCOLL_STATUS_MAP(SYMCOLL__STATUS_STR)
#undef SYMCOLL__STATUS_STR
};

const char *symcoll_status_string(symcoll_status_t status) {
  int i = -(int)status;
  if (i < 0 || i >= (int)(sizeof(status_strings) / sizeof(status_strings[0])) ||
      status_strings[i] == NULL)
    return "SYMCOLL_ERR_UNKNOWN: unknown status";
  return status_strings[i];
}

const char *symcoll_dtype_name(symcoll_dtype_t dtype) {
  switch (dtype) {
  case SYMCOLL_FLOAT32: return "fp32";
  case SYMCOLL_FLOAT16: return "fp16";
  case SYMCOLL_BFLOAT16: return "bf16";
  default: return "unknown";
  }
}

size_t symcoll_dtype_size(symcoll_dtype_t dtype) {
  switch (dtype) {
  case SYMCOLL_FLOAT32: return 4;
  case SYMCOLL_FLOAT16:
  case SYMCOLL_BFLOAT16: return 2;
  default: return 0;
  }
}

const char *symcoll_op_name(symcoll_op_t op) {
  switch (op) {
  case SYMCOLL_SUM: return "sum";
  case SYMCOLL_MAX: return "max";
  case SYMCOLL_MIN: return "min";
  default: return "unknown";
  }
}

const char *symcoll_algo_name(symcoll_algo_t algo) {
  switch (algo) {
  case SYMCOLL_ALGO_AUTO: return "auto";
  case SYMCOLL_ALGO_ONE_SHOT: return "oneshot";
  case SYMCOLL_ALGO_TWO_SHOT: return "twoshot";
  case SYMCOLL_ALGO_ONE_SHOT_DB: return "oneshot_db";
  case SYMCOLL_ALGO_LAMPORT: return "lamport";
  case SYMCOLL_ALGO_NCCL: return "nccl";
  default: return "unknown";
  }
}

int symcoll_version(void) { return SYMCOLL_VERSION_CODE; }
