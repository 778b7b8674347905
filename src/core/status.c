/* Status strings, names of enums, version. */
#include "internal.h"

static const char *const status_strings[] = {
#define SYMCOLL__STATUS_STR(name, value, text) [-(value)] = "SYMCOLL_" #name ": " text,
    SYMCOLL_STATUS_MAP(SYMCOLL__STATUS_STR)
#undef SYMCOLL__STATUS_STR
};

const char *symcoll_status_string(symcoll_status_t status) {
  int i = -(int)status;
  if (i < 0 || i >= (int)(sizeof(status_strings) / sizeof(status_strings[0])) || status_strings[i] == NULL)
    return "SYMCOLL_ERR_UNKNOWN: unknown status";
  return status_strings[i];
}

/* X(enum, name, bytes): the element types. */
/* clang-format off */
#define DTYPE_MAP(X)                    \
  X(SYMCOLL_FLOAT32, "fp32", 4)         \
  X(SYMCOLL_FLOAT16, "fp16", 2)         \
  X(SYMCOLL_BFLOAT16, "bf16", 2)        \
  X(SYMCOLL_INT8, "int8", 1)            \
  X(SYMCOLL_UINT8, "uint8", 1)          \
  X(SYMCOLL_INT32, "int32", 4)          \
  X(SYMCOLL_UINT32, "uint32", 4)        \
  X(SYMCOLL_INT64, "int64", 8)          \
  X(SYMCOLL_UINT64, "uint64", 8)        \
  X(SYMCOLL_FLOAT64, "fp64", 8)         \
  X(SYMCOLL_FLOAT8_E4M3, "fp8_e4m3", 1) \
  X(SYMCOLL_FLOAT8_E5M2, "fp8_e5m2", 1)
/* clang-format on */

const char *symcoll_dtype_name(symcoll_dtype_t dtype) {
  switch (dtype) {
#define DTYPE_NAME(e, name, bytes) \
  case e:                          \
    return name;
    DTYPE_MAP(DTYPE_NAME)
#undef DTYPE_NAME
    default:
      return "unknown";
  }
}

/* Element sizes, read inline on the call path (symcoll__esize, internal.h). */
const unsigned char symcoll__dtype_bytes[SYMCOLL_NUM_DTYPES] = {
#define DTYPE_BYTES(e, name, bytes) [e] = bytes,
    DTYPE_MAP(DTYPE_BYTES)
#undef DTYPE_BYTES
};

size_t symcoll_dtype_size(symcoll_dtype_t dtype) {
  return symcoll__esize(dtype);
}

const char *symcoll_coll_name(symcoll_coll_t coll) {
  static const char *const names[] = {
#define COLL_NAME(name, value, str) [value] = str,
      SYMCOLL_COLL_MAP(COLL_NAME)
#undef COLL_NAME
  };
  return (unsigned)coll < SYMCOLL_NUM_COLL_KINDS ? names[coll] : "unknown";
}

const char *symcoll_op_name(symcoll_op_t op) {
  switch (op) {
    case SYMCOLL_SUM:
      return "sum";
    case SYMCOLL_MAX:
      return "max";
    case SYMCOLL_MIN:
      return "min";
    case SYMCOLL_PROD:
      return "prod";
    case SYMCOLL_AVG:
      return "avg";
    default:
      return "unknown";
  }
}

#define ALGO_STR(name, value, str, help) [value] = str,
#define ALGO_HELP(name, value, str, help) [value] = help,
static const char *const algo_names[] = {SYMCOLL_ALGO_MAP(ALGO_STR)};
static const char *const algo_helps[] = {SYMCOLL_ALGO_MAP(ALGO_HELP)};
#undef ALGO_STR
#undef ALGO_HELP

const char *symcoll_algo_name(symcoll_algo_t algo) {
  return (unsigned)algo < SYMCOLL_NUM_ALGOS ? algo_names[algo] : "unknown";
}

const char *symcoll_algo_help(symcoll_algo_t algo) {
  return (unsigned)algo < SYMCOLL_NUM_ALGOS ? algo_helps[algo] : "unknown";
}

int symcoll_version(void) {
  return SYMCOLL_VERSION_CODE;
}
