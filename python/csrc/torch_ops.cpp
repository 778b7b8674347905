// symcoll's collectives as compiled PyTorch operators, on PyTorch's stable ABI (torch >= 2.10:
// one binary across later versions). The schemas are defined in python/symcoll/_torch.py; this
// library registers CPU and CUDA kernels for the plain collectives, the ones called after every
// layer, where the Python kernels' per-call work costs more than the collective itself. The
// GEMM and norm operations keep their Python kernels. Calls go straight to libsymcoll on
// PyTorch's current stream; a failing status raises RuntimeError with symcoll's message.
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/util/Exception.h>

#include "symcoll.h"

// PyTorch's current CUDA stream (the AOTInductor C shim, declared by shim.h only under
// USE_CUDA): in libtorch_cuda only, so weak: the library also loads into a CPU-only torch,
// whose tensors never reach the CUDA branch.
extern "C" AOTI_TORCH_EXPORT AOTITorchError aoti_torch_get_current_cuda_stream(int32_t device_index, void **ret_stream)
    __attribute__((weak));

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

namespace {

// Comm.handle (what the ops take) -> the C communicator, bound by the package when a Comm is
// made and unbound when it is destroyed.
std::mutex g_lock;
std::unordered_map<int64_t, symcoll_comm_t> g_comms;

symcoll_comm_t comm_of(int64_t handle) {
  std::lock_guard<std::mutex> g(g_lock);
  auto it = g_comms.find(handle);
  STD_TORCH_CHECK(it != g_comms.end(), "symcoll: no communicator with handle ", handle);
  return it->second;
}

symcoll_dtype_t dtype_of(const Tensor &t) {
  switch (t.scalar_type()) {
    case ScalarType::Float:
      return SYMCOLL_FLOAT32;
    case ScalarType::Half:
      return SYMCOLL_FLOAT16;
    case ScalarType::BFloat16:
      return SYMCOLL_BFLOAT16;
    case ScalarType::Double:
      return SYMCOLL_FLOAT64;
    case ScalarType::Char:
      return SYMCOLL_INT8;
    case ScalarType::Byte:
      return SYMCOLL_UINT8;
    case ScalarType::Int:
      return SYMCOLL_INT32;
    case ScalarType::UInt32:
      return SYMCOLL_UINT32;
    case ScalarType::Long:
      return SYMCOLL_INT64;
    case ScalarType::UInt64:
      return SYMCOLL_UINT64;
    case ScalarType::Float8_e4m3fn:
      return SYMCOLL_FLOAT8_E4M3;
    case ScalarType::Float8_e5m2:
      return SYMCOLL_FLOAT8_E5M2;
    default:
      break;
  }
  STD_TORCH_CHECK(false, "symcoll: this tensor's dtype has no symcoll dtype");
  return SYMCOLL_NUM_DTYPES;
}

symcoll_op_t op_of(const std::string &op) {
  for (int o = 0; o < SYMCOLL_NUM_OPS; o++)
    if (op == symcoll_op_name((symcoll_op_t)o)) return (symcoll_op_t)o;
  STD_TORCH_CHECK(false, "symcoll: unknown op '", op, "' (sum, prod, max, min or avg)");
  return SYMCOLL_NUM_OPS;
}

// A tensor's buffer: contiguous, of a symcoll dtype; on a GPU, PyTorch's current stream there.
struct Buf {
  void *ptr;
  size_t n;
  symcoll_dtype_t dt;
  void *stream;
};

Buf buf_of(const Tensor &t, const char *what) {
  STD_TORCH_CHECK(t.is_contiguous(), "symcoll ", what, ": the tensors must be contiguous");
  Buf b{t.data_ptr(), (size_t)t.numel(), dtype_of(t), nullptr};
  if (t.is_cuda()) {
    STD_TORCH_CHECK(aoti_torch_get_current_cuda_stream != nullptr, "symcoll ", what,
                    ": a CUDA tensor, but this torch has no CUDA");
    void *s = nullptr;
    STD_TORCH_CHECK(aoti_torch_get_current_cuda_stream(t.get_device(), &s) == AOTI_TORCH_SUCCESS, "symcoll ", what,
                    ": no current CUDA stream");
    b.stream = s;
  }
  return b;
}

void check(symcoll_status_t s, const char *what) {
  if (s == SYMCOLL_OK) return;
  const char *why = symcoll_last_error();
  STD_TORCH_CHECK(false, "symcoll ", what, ": ", symcoll_status_string(s), why && *why ? " (" : "", why ? why : "",
                  why && *why ? ")" : "");
}

void same(const Buf &a, const Buf &b, size_t want_n, const char *what) {
  STD_TORCH_CHECK(a.dt == b.dt, "symcoll ", what, ": the tensors' dtypes differ");
  STD_TORCH_CHECK(b.n == want_n, "symcoll ", what, ": the output has ", b.n, " elements, not ", want_n);
}

void all_reduce_(Tensor x, std::string op, int64_t comm) {
  const Buf b = buf_of(x, "all_reduce_");
  check(symcoll_all_reduce_ex(comm_of(comm), b.ptr, b.ptr, b.n, b.dt, op_of(op), b.stream, nullptr), "all_reduce_");
}

Tensor all_reduce(Tensor x, std::string op, int64_t comm) {
  const Buf b = buf_of(x, "all_reduce");
  Tensor out = torch::stable::empty_like(x);
  const Buf o = buf_of(out, "all_reduce");
  check(symcoll_all_reduce_ex(comm_of(comm), b.ptr, o.ptr, b.n, b.dt, op_of(op), b.stream, nullptr), "all_reduce");
  return out;
}

void all_gather_into_tensor(Tensor out, Tensor x, int64_t comm) {
  symcoll_comm_t c = comm_of(comm);
  const Buf b = buf_of(x, "all_gather_into_tensor"), o = buf_of(out, "all_gather_into_tensor");
  same(b, o, b.n * (size_t)symcoll_comm_nranks(c), "all_gather_into_tensor");
  check(symcoll_all_gather_ex(c, b.ptr, o.ptr, b.n, b.dt, b.stream, nullptr), "all_gather_into_tensor");
}

void reduce_scatter_tensor(Tensor out, Tensor x, std::string op, int64_t comm) {
  symcoll_comm_t c = comm_of(comm);
  const Buf b = buf_of(x, "reduce_scatter_tensor"), o = buf_of(out, "reduce_scatter_tensor");
  const size_t n = (size_t)symcoll_comm_nranks(c);
  STD_TORCH_CHECK(b.n % n == 0, "symcoll reduce_scatter_tensor: x has ", b.n, " elements, not a multiple of ", n);
  same(b, o, b.n / n, "reduce_scatter_tensor");
  check(symcoll_reduce_scatter_ex(c, b.ptr, o.ptr, o.n, b.dt, op_of(op), b.stream, nullptr), "reduce_scatter_tensor");
}

void broadcast_(Tensor x, int64_t root, int64_t comm) {
  const Buf b = buf_of(x, "broadcast_");
  check(symcoll_broadcast_ex(comm_of(comm), b.ptr, b.ptr, b.n, b.dt, (int)root, b.stream, nullptr), "broadcast_");
}

Tensor broadcast(Tensor x, int64_t root, int64_t comm) {
  const Buf b = buf_of(x, "broadcast");
  Tensor out = torch::stable::empty_like(x);
  const Buf o = buf_of(out, "broadcast");
  check(symcoll_broadcast_ex(comm_of(comm), b.ptr, o.ptr, b.n, b.dt, (int)root, b.stream, nullptr), "broadcast");
  return out;
}

void reduce_(Tensor x, std::string op, int64_t root, int64_t comm) {
  const Buf b = buf_of(x, "reduce_");
  check(symcoll_reduce_ex(comm_of(comm), b.ptr, b.ptr, b.n, b.dt, op_of(op), (int)root, b.stream, nullptr), "reduce_");
}

void all_to_all_into(const Tensor &out, const Tensor &x, int64_t comm, const char *what) {
  symcoll_comm_t c = comm_of(comm);
  const Buf b = buf_of(x, what), o = buf_of(out, what);
  const size_t n = (size_t)symcoll_comm_nranks(c);
  same(b, o, b.n, what);
  STD_TORCH_CHECK(b.n % n == 0, "symcoll ", what, ": x has ", b.n, " elements, not a multiple of ", n);
  check(symcoll_all_to_all_ex(c, b.ptr, o.ptr, b.n / n, b.dt, b.stream, nullptr), what);
}

void all_to_all_single(Tensor out, Tensor x, int64_t comm) {
  all_to_all_into(out, x, comm, "all_to_all_single");
}

Tensor all_to_all(Tensor x, int64_t comm) {
  Tensor out = torch::stable::empty_like(x);
  all_to_all_into(out, x, comm, "all_to_all");
  return out;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void symcoll_torch_bind(int64_t handle, void *comm) {
  std::lock_guard<std::mutex> g(g_lock);
  if (comm)
    g_comms[handle] = (symcoll_comm_t)comm;
  else
    g_comms.erase(handle);
}

// The ops this library implements (the package leaves their Python kernels out).
extern "C" __attribute__((visibility("default"))) const char *symcoll_torch_ops(void) {
  return "all_reduce_ all_reduce all_gather_into_tensor reduce_scatter_tensor broadcast_ broadcast reduce_ "
         "all_to_all_single all_to_all";
}

#define SYMCOLL_IMPLS(m)                                                \
  m.impl("all_reduce_", TORCH_BOX(&all_reduce_));                       \
  m.impl("all_reduce", TORCH_BOX(&all_reduce));                         \
  m.impl("all_gather_into_tensor", TORCH_BOX(&all_gather_into_tensor)); \
  m.impl("reduce_scatter_tensor", TORCH_BOX(&reduce_scatter_tensor));   \
  m.impl("broadcast_", TORCH_BOX(&broadcast_));                         \
  m.impl("broadcast", TORCH_BOX(&broadcast));                           \
  m.impl("reduce_", TORCH_BOX(&reduce_));                               \
  m.impl("all_to_all_single", TORCH_BOX(&all_to_all_single));           \
  m.impl("all_to_all", TORCH_BOX(&all_to_all))

STABLE_TORCH_LIBRARY_IMPL(symcoll, CPU, m) {
  SYMCOLL_IMPLS(m);
}
STABLE_TORCH_LIBRARY_IMPL(symcoll, CUDA, m) {
  SYMCOLL_IMPLS(m);
}
