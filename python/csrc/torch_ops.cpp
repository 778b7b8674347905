// symcoll's collectives as compiled PyTorch operators, on PyTorch's stable ABI (torch >= 2.10:
// one binary across later versions). The schemas are defined in python/symcoll/_torch.py; this
// library registers CPU and CUDA kernels for every op there (the plain collectives, the GEMM
// operations, all_reduce_rmsnorm and its forms, reduce_scatter_rmsnorm), checking their arguments as the package's
// methods do (python/symcoll/__init__.py). Calls go straight to libsymcoll on
// PyTorch's current stream; a failing status raises RuntimeError with symcoll's message.
#include <dlfcn.h>

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include "symcoll.h"

// PyTorch's current CUDA stream: the AOTInductor C shim's aoti_torch_get_current_cuda_stream,
// declared by shim.h only under USE_CUDA and defined in libtorch_cuda alone. torch loads that
// library as a dependency of its extension module, outside the global symbol scope, so neither
// the link nor a weak reference finds it: it is looked up in the loaded libtorch_cuda once.
// A CPU-only torch has none; its tensors never reach the CUDA branch.
using CurrentCudaStream = AOTITorchError (*)(int32_t device_index, void **ret_stream);
static CurrentCudaStream current_cuda_stream_fn() {
  static const CurrentCudaStream fn = [] {
    const char *sym = "aoti_torch_get_current_cuda_stream";
    void *f = dlsym(RTLD_DEFAULT, sym);
    if (!f)
      if (void *lib = dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD)) f = dlsym(lib, sym);
    return reinterpret_cast<CurrentCudaStream>(f);
  }();
  return fn;
}

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

// A str argument of an op (the reduction op, an algorithm). The stable ABI's own conversion to
// std::string in torch 2.10's headers (stableivalue_conversions.h; fixed upstream by
// pytorch/pytorch#190493) copies the string out of one it allocates and never frees: a leak on
// every call, and on CPU ranks a heap so fragmented that an out-of-place op's output landed on
// fresh pages each call (64 page faults a call at 256 KiB: all_reduce 5x the method's time).
// The ops take this type instead, read through the same handle calls, the handle freed.
struct StrArg : std::string {};

namespace torch::stable::detail {
template <>
struct ToImpl<StrArg> {
  static StrArg call(StableIValue val, uint64_t, bool) {
    StringHandle handle = to<StringHandle>(val);
    size_t length = 0;
    const char *data = nullptr;
    const bool read = torch_string_length(handle, &length) == AOTI_TORCH_SUCCESS &&
                      torch_string_c_str(handle, &data) == AOTI_TORCH_SUCCESS;
    StrArg s;
    if (read) s.assign(data, length);
    (void)torch_delete_string(handle);
    if (!read) throw std::runtime_error("symcoll ops: a str argument could not be read");
    return s;
  }
};
}  // namespace torch::stable::detail

namespace {

// A refusal or a failing status: std::runtime_error, which PyTorch raises as RuntimeError with
// this message (STD_TORCH_CHECK would prefix it with this file's name and line). The message is
// built without iostreams: under torch 2.11 a refusal that formatted a number through
// std::ostream crashed (why was not established).
inline void append(std::string &m, const char *s) {
  m += s;
}
inline void append(std::string &m, const std::string &s) {
  m += s;
}
template <typename N, typename = std::enable_if_t<std::is_arithmetic_v<N>>>
void append(std::string &m, N n) {
  m += std::to_string(n);
}
template <typename... Args>
[[noreturn]] void fail(const Args &...args) {
  std::string m = "symcoll ";
  (append(m, args), ...);
  throw std::runtime_error(m);
}
#define SC_CHECK(cond, ...)         \
  do {                              \
    if (!(cond)) fail(__VA_ARGS__); \
  } while (0)

// Comm.handle (what the ops take) -> the C communicator, bound by the package when a Comm is
// made and unbound when it is destroyed.
std::mutex g_lock;
std::unordered_map<int64_t, symcoll_comm_t> g_comms;

symcoll_comm_t comm_of(int64_t handle) {
  std::lock_guard<std::mutex> g(g_lock);
  auto it = g_comms.find(handle);
  SC_CHECK(it != g_comms.end(), "ops: no communicator with handle ", handle);
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
  fail("ops: a tensor's dtype has no symcoll dtype");
}

symcoll_op_t op_of(const std::string &op) {
  for (int o = 0; o < SYMCOLL_NUM_OPS; o++)
    if (op == symcoll_op_name((symcoll_op_t)o)) return (symcoll_op_t)o;
  fail("ops: unknown op '", op, "' (sum, prod, max, min or avg)");
}

// A tensor's buffer: contiguous, of a symcoll dtype; on a GPU, PyTorch's current stream there.
struct Buf {
  void *ptr;
  size_t n;
  symcoll_dtype_t dt;
  void *stream;
};

Buf buf_of(const Tensor &t, const char *what) {
  SC_CHECK(t.is_contiguous(), what, ": the tensors must be contiguous");
  Buf b{t.data_ptr(), (size_t)t.numel(), dtype_of(t), nullptr};
  if (t.is_cuda()) {
    const CurrentCudaStream current = current_cuda_stream_fn();
    SC_CHECK(current != nullptr, what, ": a CUDA tensor, but no libtorch_cuda is loaded");
    void *s = nullptr;
    SC_CHECK(current(t.get_device(), &s) == AOTI_TORCH_SUCCESS, what, ": no current CUDA stream");
    b.stream = s;
  }
  return b;
}

// An uninitialised contiguous tensor of `shape` and `dtype` (x's where none) on x's device, from
// the C shim's empty_strided: one direct call. torch::stable::empty_like and new_empty go
// through the boxed dispatcher instead, looking the op up by name and boxing its arguments on
// every eager call. The caching allocator serves it either way (a MemPool in use included).
Tensor empty_on(const Tensor &x, torch::headeronly::IntHeaderOnlyArrayRef shape,
                std::optional<ScalarType> dtype = std::nullopt) {
  int32_t device_type = 0, device_index = 0, dt = 0;
  SC_CHECK(aoti_torch_get_device_type(x.get(), &device_type) == AOTI_TORCH_SUCCESS &&
               aoti_torch_get_device_index(x.get(), &device_index) == AOTI_TORCH_SUCCESS,
           "ops: a tensor's device could not be read");
  if (dtype)
    dt = torch::stable::detail::to<int32_t>(torch::stable::detail::from(*dtype));
  else
    SC_CHECK(aoti_torch_get_dtype(x.get(), &dt) == AOTI_TORCH_SUCCESS, "ops: a tensor's dtype could not be read");
  std::vector<int64_t> strides(shape.size());
  int64_t step = 1;
  for (size_t i = shape.size(); i-- > 0;) strides[i] = step, step *= shape[i] > 1 ? shape[i] : 1;
  AtenTensorHandle h = nullptr;
  SC_CHECK(aoti_torch_empty_strided((int64_t)shape.size(), shape.data(), strides.data(), dt, device_type, device_index,
                                    &h) == AOTI_TORCH_SUCCESS,
           "ops: an output tensor could not be allocated");
  return Tensor(h);
}

// An uninitialised contiguous tensor shaped and typed as x, on its device.
Tensor empty_as(const Tensor &x) {
  return empty_on(x, x.sizes());
}

void check(symcoll_status_t s, const char *what) {
  if (s == SYMCOLL_OK) return;
  const char *why = symcoll_last_error();
  fail(what, ": ", symcoll_status_string(s), why && *why ? " (" : "", why ? why : "", why && *why ? ")" : "");
}

void same(const Buf &a, const Buf &b, size_t want_n, const char *what) {
  SC_CHECK(a.dt == b.dt, what, ": the tensors' dtypes differ");
  SC_CHECK(b.n == want_n, what, ": the output has ", b.n, " elements, not ", want_n);
}

void all_reduce_(Tensor x, StrArg op, int64_t comm) {
  const Buf b = buf_of(x, "all_reduce_");
  check(symcoll_all_reduce_ex(comm_of(comm), b.ptr, b.ptr, b.n, b.dt, op_of(op), b.stream, nullptr), "all_reduce_");
}

Tensor all_reduce(Tensor x, StrArg op, int64_t comm) {
  const Buf b = buf_of(x, "all_reduce");
  Tensor out = empty_as(x);
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

void reduce_scatter_tensor(Tensor out, Tensor x, StrArg op, int64_t comm) {
  symcoll_comm_t c = comm_of(comm);
  const Buf b = buf_of(x, "reduce_scatter_tensor"), o = buf_of(out, "reduce_scatter_tensor");
  const size_t n = (size_t)symcoll_comm_nranks(c);
  SC_CHECK(b.n % n == 0, "reduce_scatter_tensor: x has ", b.n, " elements, not a multiple of ", n);
  same(b, o, b.n / n, "reduce_scatter_tensor");
  check(symcoll_reduce_scatter_ex(c, b.ptr, o.ptr, o.n, b.dt, op_of(op), b.stream, nullptr), "reduce_scatter_tensor");
}

void broadcast_(Tensor x, int64_t root, int64_t comm) {
  const Buf b = buf_of(x, "broadcast_");
  check(symcoll_broadcast_ex(comm_of(comm), b.ptr, b.ptr, b.n, b.dt, (int)root, b.stream, nullptr), "broadcast_");
}

Tensor broadcast(Tensor x, int64_t root, int64_t comm) {
  const Buf b = buf_of(x, "broadcast");
  Tensor out = empty_as(x);
  const Buf o = buf_of(out, "broadcast");
  check(symcoll_broadcast_ex(comm_of(comm), b.ptr, o.ptr, b.n, b.dt, (int)root, b.stream, nullptr), "broadcast");
  return out;
}

void reduce_(Tensor x, StrArg op, int64_t root, int64_t comm) {
  const Buf b = buf_of(x, "reduce_");
  check(symcoll_reduce_ex(comm_of(comm), b.ptr, b.ptr, b.n, b.dt, op_of(op), (int)root, b.stream, nullptr), "reduce_");
}

void all_to_all_into(const Tensor &out, const Tensor &x, int64_t comm, const char *what) {
  symcoll_comm_t c = comm_of(comm);
  const Buf b = buf_of(x, what), o = buf_of(out, what);
  const size_t n = (size_t)symcoll_comm_nranks(c);
  same(b, o, b.n, what);
  SC_CHECK(b.n % n == 0, what, ": x has ", b.n, " elements, not a multiple of ", n);
  check(symcoll_all_to_all_ex(c, b.ptr, o.ptr, b.n / n, b.dt, b.stream, nullptr), what);
}

void all_to_all_single(Tensor out, Tensor x, int64_t comm) {
  all_to_all_into(out, x, comm, "all_to_all_single");
}

Tensor all_to_all(Tensor x, int64_t comm) {
  Tensor out = empty_as(x);
  all_to_all_into(out, x, comm, "all_to_all");
  return out;
}

symcoll_algo_t algo_of(const std::string &name, const char *what) {
  for (int a = 0; a < SYMCOLL_NUM_ALGOS; a++)
    if (name == symcoll_algo_name((symcoll_algo_t)a)) return (symcoll_algo_t)a;
  fail(what, ": unknown algorithm '", name, "'");
}

bool same_device(const Tensor &a, const Tensor &b) {
  return a.is_cuda() == b.is_cuda() && (!a.is_cuda() || a.get_device() == b.get_device());
}

// ---- the GEMM operations ------------------------------------------------------------------

symcoll_matmul_opts_t mm_opts(const std::string &algo, const char *what) {
  symcoll_matmul_opts_t o;
  symcoll_matmul_opts_init(&o);
  o.algo = algo_of(algo, what);
  SC_CHECK(o.algo == SYMCOLL_ALGO_AUTO || o.algo == SYMCOLL_ALGO_OVERLAP || o.algo == SYMCOLL_ALGO_SEQUENTIAL, what,
           ": algorithm '", algo, "' is not auto, overlap or sequential");
  return o;
}

void check_matrices(const Tensor &a, const Tensor &b, const char *what) {
  SC_CHECK(a.dim() == 2 && b.dim() == 2, what, ": A and B must be matrices");
  SC_CHECK(a.size(1) == b.size(0), what, ": A is ", a.size(0), " x ", a.size(1), ", B ", b.size(0), " x ", b.size(1));
  SC_CHECK(a.scalar_type() == b.scalar_type(), what, ": A's and B's dtypes differ");
  SC_CHECK(same_device(a, b), what, ": A and B are on different devices");
}

std::tuple<Tensor, Tensor> all_gather_matmul(Tensor a_shard, Tensor b, int64_t comm, StrArg algo) {
  const char *what = "all_gather_matmul";
  symcoll_comm_t c = comm_of(comm);
  check_matrices(a_shard, b, what);
  const int64_t n = symcoll_comm_nranks(c), m = a_shard.size(0), k = a_shard.size(1), cols = b.size(1);
  Tensor a = torch::stable::contiguous(a_shard), bb = torch::stable::contiguous(b);
  Tensor out = empty_on(a, {m * n, cols});
  Tensor a_out = empty_on(a, {m * n, k});
  symcoll_matmul_opts_t o = mm_opts(algo, what);
  const Buf ab = buf_of(a, what);
  o.a_out = a_out.data_ptr();
  check(symcoll_all_gather_matmul(c, ab.ptr, bb.data_ptr(), out.data_ptr(), (size_t)m, (size_t)cols, (size_t)k, ab.dt,
                                  &o, ab.stream),
        what);
  return std::make_tuple(out, a_out);
}

Tensor matmul_reduce_scatter(Tensor a, Tensor b, int64_t comm, StrArg algo) {
  const char *what = "matmul_reduce_scatter";
  symcoll_comm_t c = comm_of(comm);
  check_matrices(a, b, what);
  const int64_t n = symcoll_comm_nranks(c), m = a.size(0), k = a.size(1), cols = b.size(1);
  SC_CHECK(m % n == 0, what, ": A has ", m, " rows, not a multiple of ", n, " ranks");
  Tensor ac = torch::stable::contiguous(a), bb = torch::stable::contiguous(b);
  Tensor out = empty_on(ac, {m / n, cols});
  symcoll_matmul_opts_t o = mm_opts(algo, what);
  const Buf ab = buf_of(ac, what);
  check(symcoll_matmul_reduce_scatter(c, ab.ptr, bb.data_ptr(), out.data_ptr(), (size_t)m, (size_t)cols, (size_t)k,
                                      ab.dt, &o, ab.stream),
        what);
  return out;
}

// ---- all_reduce_rmsnorm, reduce_scatter_rmsnorm -----------------------------------------------

// The results' rows x hidden (x's; the reduce-scatter form: this rank's shard of x's first
// dimension), and the checks every other buffer of the call must pass against them.
struct Rows {
  const char *what;
  Tensor x;
  Buf xb;
  int64_t rows, hidden;
  bool scatter;
  std::vector<int64_t> shape;  // the results'

  // nranks > 0: the reduce-scatter form over that many ranks.
  Rows(const Tensor &x_in, const char *w, int64_t nranks = 0)
      : what(w), x(torch::stable::contiguous(x_in)), xb{}, rows(1), hidden(0), scatter(nranks > 0) {
    SC_CHECK(x.dim() > (scatter ? 1 : 0), what, ": x has ", x.dim(), " dimensions, not rows x hidden",
             scatter ? " (S, ..., hidden)" : "");
    xb = buf_of(x, what);
    SC_CHECK(xb.dt == SYMCOLL_FLOAT32 || xb.dt == SYMCOLL_FLOAT16 || xb.dt == SYMCOLL_BFLOAT16, what,
             ": x must be float32, float16 or bfloat16");
    shape.assign(x.sizes().begin(), x.sizes().end());
    if (scatter) {
      SC_CHECK(shape[0] % nranks == 0, what, ": x's first dimension ", shape[0], " is not a multiple of ", nranks,
               " ranks");
      shape[0] /= nranks;
    }
    hidden = shape.back();
    for (size_t d = 0; d + 1 < shape.size(); d++) rows *= shape[d];
  }
  // t's pointer after checking its dtype, device and size (count elements; last: its last
  // dimension, where > 0).
  void *like(const Tensor &t, const char *name, symcoll_dtype_t dt, int64_t count, int64_t last) const {
    SC_CHECK(t.is_contiguous(), what, ": ", name, " must be contiguous");
    SC_CHECK(dtype_of(t) == dt, what, ": ", name, "'s dtype is not the one it must have");
    SC_CHECK(same_device(t, x), what, ": ", name, " is not on x's device");
    SC_CHECK(t.numel() == count && (last <= 0 || (t.dim() > 0 && t.size(t.dim() - 1) == last)), what, ": ", name,
             " has ", t.numel(), " elements, not the ", count, " it must have");
    return t.data_ptr();
  }
  // An optional residual's pointer (nullptr: none) after the checks; keep holds it contiguous.
  const void *residual(const std::optional<Tensor> &t, Tensor &keep) const {
    if (!t.has_value()) return nullptr;
    keep = torch::stable::contiguous(*t);
    return like(keep, "residual", xb.dt, rows * hidden, hidden);
  }
  void run(symcoll_comm_t c, const void *residual, const Tensor &weight, double eps, void *out, void *residual_out,
           symcoll_norm_opts_t &o) const {
    const void *w = like(weight, "weight", xb.dt, hidden, 0);
    check(
        (scatter ? symcoll_reduce_scatter_rmsnorm : symcoll_all_reduce_rmsnorm)(
            c, xb.ptr, residual, w, (float)eps, out, residual_out, (size_t)rows, (size_t)hidden, xb.dt, &o, xb.stream),
        what);
  }
};

symcoll_norm_opts_t norm_opts(const std::string &algo, const char *what) {
  symcoll_norm_opts_t o;
  symcoll_norm_opts_init(&o);
  o.algo = algo_of(algo, what);
  return o;
}

std::tuple<Tensor, Tensor> all_reduce_rmsnorm(Tensor x, std::optional<Tensor> residual, Tensor weight, double eps,
                                              int64_t comm, StrArg algo) {
  const Rows r(x, "all_reduce_rmsnorm");
  symcoll_comm_t c = comm_of(comm);
  Tensor rc = r.x;
  const void *res = r.residual(residual, rc);
  Tensor out = empty_as(r.x), residual_out = empty_as(r.x);
  symcoll_norm_opts_t o = norm_opts(algo, r.what);
  r.run(c, res, torch::stable::contiguous(weight), eps, out.data_ptr(), residual_out.data_ptr(), o);
  return std::make_tuple(out, residual_out);
}

Tensor all_reduce_rmsnorm_(Tensor x, Tensor residual, Tensor weight, double eps, int64_t comm, StrArg algo) {
  const Rows r(x, "all_reduce_rmsnorm_");
  symcoll_comm_t c = comm_of(comm);
  void *res = r.like(residual, "residual", r.xb.dt, r.rows * r.hidden, r.hidden);
  Tensor out = empty_as(r.x);
  symcoll_norm_opts_t o = norm_opts(algo, r.what);
  r.run(c, res, torch::stable::contiguous(weight), eps, out.data_ptr(), res, o);
  return out;
}

// The fp8 forms (nranks > 0: the reduce-scatter form): (q, scales, residual_out) of the results'
// shape; scales the row scales (shape[:-1] + (1,)) without scale, else the static scale's copy.
std::tuple<Tensor, Tensor, Tensor> norm_fp8(const char *what, symcoll_comm_t c, int64_t nranks, Tensor x,
                                            std::optional<Tensor> residual, Tensor weight, double eps,
                                            std::optional<Tensor> scale, const std::string &algo) {
  const Rows r(x, what, nranks);
  Tensor rc = r.x;
  const void *res = r.residual(residual, rc);
  Tensor q = empty_on(r.x, r.shape, ScalarType::Float8_e4m3fn);
  Tensor residual_out = empty_on(r.x, r.shape);
  symcoll_norm_opts_t o = norm_opts(algo, r.what);
  o.fp8_out = q.data_ptr();
  Tensor scales = r.x;
  if (scale.has_value()) {
    SC_CHECK(scale->numel() == 1, r.what, ": scale has ", scale->numel(),
             " elements, not one (None: dynamic per-row scales)");
    scales = empty_on(r.x, {1}, ScalarType::Float);
    if (scale->scalar_type() == ScalarType::Float && same_device(*scale, r.x) && r.rows) {
      o.fp8_scale = (const float *)scale->data_ptr(); /* the kernel writes the copy beside the rows */
      o.fp8_scale_out = (float *)scales.data_ptr();
    } else {
      torch::stable::copy_(scales, torch::stable::reshape(*scale, {1}));
      o.fp8_scale = (const float *)scales.data_ptr();
    }
  } else {
    std::vector<int64_t> shape = r.shape;
    shape.back() = 1;
    scales = empty_on(r.x, shape, ScalarType::Float);
    o.fp8_row_scales = (float *)scales.data_ptr();
  }
  r.run(c, res, torch::stable::contiguous(weight), eps, nullptr, residual_out.data_ptr(), o);
  return std::make_tuple(q, scales, residual_out);
}

std::tuple<Tensor, Tensor, Tensor> all_reduce_rmsnorm_fp8(Tensor x, std::optional<Tensor> residual, Tensor weight,
                                                          double eps, std::optional<Tensor> scale, int64_t comm,
                                                          StrArg algo) {
  return norm_fp8("all_reduce_rmsnorm_fp8", comm_of(comm), 0, x, residual, weight, eps, scale, algo);
}

std::tuple<Tensor, Tensor, Tensor> reduce_scatter_rmsnorm_fp8(Tensor x, std::optional<Tensor> residual, Tensor weight,
                                                              double eps, std::optional<Tensor> scale, int64_t comm,
                                                              StrArg algo) {
  symcoll_comm_t c = comm_of(comm);
  return norm_fp8("reduce_scatter_rmsnorm_fp8", c, symcoll_comm_nranks(c), x, residual, weight, eps, scale, algo);
}

std::tuple<Tensor, Tensor> reduce_scatter_rmsnorm(Tensor x, std::optional<Tensor> residual, Tensor weight, double eps,
                                                  int64_t comm, StrArg algo) {
  symcoll_comm_t c = comm_of(comm);
  const Rows r(x, "reduce_scatter_rmsnorm", symcoll_comm_nranks(c));
  Tensor rc = r.x;
  const void *res = r.residual(residual, rc);
  Tensor out = empty_on(r.x, r.shape), residual_out = empty_on(r.x, r.shape);
  symcoll_norm_opts_t o = norm_opts(algo, r.what);
  r.run(c, res, torch::stable::contiguous(weight), eps, out.data_ptr(), residual_out.data_ptr(), o);
  return std::make_tuple(out, residual_out);
}

Tensor reduce_scatter_rmsnorm_(Tensor x, Tensor residual, Tensor weight, double eps, int64_t comm, StrArg algo) {
  symcoll_comm_t c = comm_of(comm);
  const Rows r(x, "reduce_scatter_rmsnorm_", symcoll_comm_nranks(c));
  void *res = r.like(residual, "residual", r.xb.dt, r.rows * r.hidden, r.hidden);
  Tensor out = empty_on(r.x, r.shape);
  symcoll_norm_opts_t o = norm_opts(algo, r.what);
  r.run(c, res, torch::stable::contiguous(weight), eps, out.data_ptr(), res, o);
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
         "all_to_all_single all_to_all all_gather_matmul matmul_reduce_scatter all_reduce_rmsnorm "
         "all_reduce_rmsnorm_ all_reduce_rmsnorm_fp8 reduce_scatter_rmsnorm reduce_scatter_rmsnorm_ "
         "reduce_scatter_rmsnorm_fp8";
}

#define SYMCOLL_IMPLS(m)                                                  \
  m.impl("all_reduce_", TORCH_BOX(&all_reduce_));                         \
  m.impl("all_reduce", TORCH_BOX(&all_reduce));                           \
  m.impl("all_gather_into_tensor", TORCH_BOX(&all_gather_into_tensor));   \
  m.impl("reduce_scatter_tensor", TORCH_BOX(&reduce_scatter_tensor));     \
  m.impl("broadcast_", TORCH_BOX(&broadcast_));                           \
  m.impl("broadcast", TORCH_BOX(&broadcast));                             \
  m.impl("reduce_", TORCH_BOX(&reduce_));                                 \
  m.impl("all_to_all_single", TORCH_BOX(&all_to_all_single));             \
  m.impl("all_to_all", TORCH_BOX(&all_to_all));                           \
  m.impl("all_gather_matmul", TORCH_BOX(&all_gather_matmul));             \
  m.impl("matmul_reduce_scatter", TORCH_BOX(&matmul_reduce_scatter));     \
  m.impl("all_reduce_rmsnorm", TORCH_BOX(&all_reduce_rmsnorm));           \
  m.impl("all_reduce_rmsnorm_", TORCH_BOX(&all_reduce_rmsnorm_));         \
  m.impl("all_reduce_rmsnorm_fp8", TORCH_BOX(&all_reduce_rmsnorm_fp8));   \
  m.impl("reduce_scatter_rmsnorm", TORCH_BOX(&reduce_scatter_rmsnorm));   \
  m.impl("reduce_scatter_rmsnorm_", TORCH_BOX(&reduce_scatter_rmsnorm_)); \
  m.impl("reduce_scatter_rmsnorm_fp8", TORCH_BOX(&reduce_scatter_rmsnorm_fp8))

STABLE_TORCH_LIBRARY_IMPL(symcoll, CPU, m) {
  SYMCOLL_IMPLS(m);
}
STABLE_TORCH_LIBRARY_IMPL(symcoll, CUDA, m) {
  SYMCOLL_IMPLS(m);
}
