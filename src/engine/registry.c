/* The engines between nodes, by kind (registry.h). */
#include "registry.h"

#include "../host/reduce.h"

static void engine_log(int level, const char *msg) {
  SYMCOLL_LOG(level, SYMCOLL_SUBSYS_INIT, "%s", msg);
}

/* symcoll's accumulation for the types an engine does not reduce itself (fp16, bf16, fp8). */
static void engine_reduce(symcoll_dtype_t dtype, symcoll_op_t op, void *dst, const void *const *srcs, int nsrc,
                          size_t n) {
  symcoll__host_reduce_fn(dtype, op)(dst, srcs, nsrc, n);
}

/* fp32, the accumulation type of fp16, bf16 and fp8, and back (an engine's AVG of those). */
static void engine_to_f32(symcoll_dtype_t dtype, float *dst, const void *src, size_t n) {
  const uint16_t *h = src;
  const uint8_t *b = src;
  for (size_t i = 0; i < n; i++)
    dst[i] = dtype == SYMCOLL_FLOAT16    ? symcoll__f16_to_f32(h[i])
             : dtype == SYMCOLL_BFLOAT16 ? symcoll__bf16_to_f32(h[i])
                                         : symcoll__fp8_to_f32(b[i], dtype == SYMCOLL_FLOAT8_E5M2);
}
static void engine_from_f32(symcoll_dtype_t dtype, void *dst, const float *src, size_t n) {
  uint16_t *h = dst;
  uint8_t *b = dst;
  for (size_t i = 0; i < n; i++) {
    if (dtype == SYMCOLL_FLOAT16)
      h[i] = symcoll__f32_to_f16(src[i]);
    else if (dtype == SYMCOLL_BFLOAT16)
      h[i] = symcoll__f32_to_bf16(src[i]);
    else
      b[i] = symcoll__f32_to_fp8(src[i], dtype == SYMCOLL_FLOAT8_E5M2);
  }
}

const char *symcoll_engine_name(symcoll_engine_t kind) {
  switch (kind) {
    case SYMCOLL_ENGINE_AUTO:
      return "auto";
    case SYMCOLL_ENGINE_NCCL:
      return "nccl";
    case SYMCOLL_ENGINE_MPI:
      return "mpi";
    case SYMCOLL_ENGINE_SYMCOLL:
      return "symcoll";
  }
  return "unknown";
}

symcoll_engine_t symcoll__engine_choice(symcoll_engine_t cfg, int device, bool emulated) {
  static const symcoll_engine_t by_choice[] = {SYMCOLL_ENGINE_AUTO, SYMCOLL_ENGINE_NCCL, SYMCOLL_ENGINE_MPI,
                                               SYMCOLL_ENGINE_SYMCOLL};
  symcoll_engine_t e = by_choice[symcoll__env_choice("SYMCOLL_ENGINE")];
  if (e == SYMCOLL_ENGINE_NCCL && device == SYMCOLL_DEVICE_HOST)
    e = SYMCOLL_ENGINE_AUTO; /* it names GPU ranks' engine */
  if (e == SYMCOLL_ENGINE_AUTO) e = cfg;
  if (e == SYMCOLL_ENGINE_AUTO)
    e = device != SYMCOLL_DEVICE_HOST ? SYMCOLL_ENGINE_NCCL : emulated ? SYMCOLL_ENGINE_SYMCOLL : SYMCOLL_ENGINE_MPI;
  return e;
}

symcoll_status_t symcoll__engine_open(symcoll_engine_t kind, const symcoll__engine_args_t *a, symcoll__engine_t *out) {
  switch (kind) {
    case SYMCOLL_ENGINE_NCCL:
#ifdef SYMCOLL_HAVE_CUDA
      if (a->device == SYMCOLL_DEVICE_HOST) {
        SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "the NCCL engine takes GPU ranks");
        return SYMCOLL_ERR_UNSUPPORTED;
      }
      return symcoll__nccl_engine(a->xchg, a->xchg_ctx, a->rank, a->nranks, a->device, a->color, a->key, out);
#else
      SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "this build of symcoll has no CUDA, so no NCCL engine");
      return SYMCOLL_ERR_UNSUPPORTED;
#endif
    case SYMCOLL_ENGINE_MPI: {
      const symcoll__engine_env_t env = {.abi = SYMCOLL_ENGINE_ABI,
                                         .timeout_ms = a->timeout_ms,
                                         .reduce = engine_reduce,
                                         .to_f32 = engine_to_f32,
                                         .from_f32 = engine_from_f32,
                                         .log = engine_log};
      return symcoll__mpi_engine_load(&env, a->mpi_comm, out);
    }
    case SYMCOLL_ENGINE_SYMCOLL:
      symcoll__symcoll_engine(a->comm, a->owned, out);
      return SYMCOLL_OK;
    case SYMCOLL_ENGINE_AUTO:
      break;
  }
  SYMCOLL_WARN(SYMCOLL_SUBSYS_INIT, "no engine of kind %d (%s)", (int)kind, symcoll_engine_name(kind));
  return SYMCOLL_ERR_INVALID_ARGUMENT;
}
