"""torch side of symcoll: symmetric tensors and the collectives as torch custom ops.

The ops (torch.ops.symcoll.*) take the communicator as its integer handle (Comm.handle), run on
the current CUDA stream, can be captured in CUDA graphs, and have fake implementations, so
torch.compile(fullgraph=True) traces them without graph breaks:

    all_reduce(Tensor x, str op, int comm) -> Tensor                   a new tensor
    all_reduce_(Tensor(a!) x, str op, int comm) -> ()                   in place
    all_gather_into_tensor(Tensor(a!) out, Tensor x, int comm) -> ()    out: nranks x x.numel()
    reduce_scatter_tensor(Tensor(a!) out, Tensor x, str op, int comm) -> ()
    broadcast(Tensor x, int root, int comm) -> Tensor                   root's x, a new tensor
    broadcast_(Tensor(a!) x, int root, int comm) -> ()                  in place
    reduce_(Tensor(a!) x, str op, int root, int comm) -> ()             in place on root (others:
                                                                        x is left as it is)
    all_to_all_single(Tensor(a!) out, Tensor x, int comm) -> ()         nranks equal blocks
    all_to_all(Tensor x, int comm) -> Tensor                            a new tensor
    all_gather_matmul(Tensor a_shard, Tensor b, int comm, str algo="auto") -> (Tensor, Tensor)
                                                                        (C, the gathered A)
    matmul_reduce_scatter(Tensor a, Tensor b, int comm, str algo="auto") -> Tensor
    all_reduce_rmsnorm(Tensor x, Tensor? residual, Tensor weight, float eps, int comm, str algo="auto")
        -> (Tensor out, Tensor residual_out)                            r = all_reduce(x) + residual,
                                                                        out = RMSNorm(r) * weight
    all_reduce_rmsnorm_(Tensor x, Tensor(a!) residual, Tensor weight, float eps, int comm,
        str algo="auto") -> Tensor out                                  residual <- r in place (vLLM's
                                                                        fused_add_rms_norm)
    all_reduce_rmsnorm_fp8(Tensor x, Tensor? residual, Tensor weight, float eps, Tensor? scale, int comm,
        str algo="auto") -> (Tensor q, Tensor scales, Tensor residual_out)
                                                                        q: float8_e4m3fn = out x (1 / scale);
                                                                        scale given (1 float32): static,
                                                                        scales its copy, shape (1,);
                                                                        None: dynamic, scales per row,
                                                                        shape x.shape[:-1] + (1,);
                                                                        q.float() * scales dequantises
    reduce_scatter_rmsnorm(Tensor x, Tensor? residual, Tensor weight, float eps, int comm, str algo="auto")
        -> (Tensor out, Tensor residual_out)                            this rank's shard of x's first
                                                                        dimension: r = reduce_scatter(x)
                                                                        + residual (the shard's), out =
                                                                        RMSNorm(r) * weight
    reduce_scatter_rmsnorm_(Tensor x, Tensor(a!) residual, Tensor weight, float eps, int comm,
        str algo="auto") -> Tensor out                                  residual (the shard) <- r in place
    reduce_scatter_rmsnorm_fp8(Tensor x, Tensor? residual, Tensor weight, float eps, Tensor? scale, int comm,
        str algo="auto") -> (Tensor q, Tensor scales, Tensor residual_out)
                                                                        all_reduce_rmsnorm_fp8's outputs
                                                                        for this rank's shard
The all_reduce_rmsnorm ops take x of any shape (..., hidden), residual of x's shape, weight of
hidden elements, all of one dtype (float32, float16, bfloat16); Comm.all_reduce_rmsnorm says
what they compute. reduce_scatter_rmsnorm takes x (S, ..., hidden), S a multiple of nranks, and
residual of the shard's shape (S / nranks, ..., hidden); Comm.reduce_scatter_rmsnorm says more.
"""
import contextlib
import ctypes
import os
import pathlib
import sys
from typing import Optional

import torch

from . import _lib

_U = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_TYPESTR = {1: "|u1", 2: "<i2", 4: "<i4", 8: "<i8"}


class _CudaArray:
    """__cuda_array_interface__ over symmetric memory (of an unsigned type of the element's
    width: the interface has no bf16 or fp8); the tensor keeps this object, and so the mapping's
    owner, alive."""

    def __init__(self, ptr, count, itemsize, owner):
        self.owner = owner
        self.__cuda_array_interface__ = {"shape": (count,), "typestr": _TYPESTR[itemsize], "data": (ptr, False),
                                         "version": 3, "strides": None}


def empty(comm, shape, count, dtype):
    if not isinstance(dtype, torch.dtype):
        dtype = getattr(torch, str(dtype))
    itemsize = torch.empty((), dtype=dtype).element_size()
    m = comm._alloc(count * itemsize)
    ptr = _lib.lib.symcoll_mem_ptr(m, comm.rank)
    if comm.device == _lib.DEVICE_HOST:
        buf = (ctypes.c_byte * max(count * itemsize, 1)).from_address(ptr)
        t = torch.frombuffer(buf, dtype=torch.uint8, count=count * itemsize) if count else torch.empty(0, dtype=torch.uint8)
        return t.view(dtype).reshape(shape)
    with torch.cuda.device(comm.device):
        raw = torch.as_tensor(_CudaArray(ptr, count, itemsize, comm), device=f"cuda:{comm.device}")
    return raw.view(dtype).reshape(shape)


_POOL_ALLOCATOR = None


@contextlib.contextmanager
def mem_pool(comm, graph=None, **graph_kwargs):
    """comm.mem_pool(): torch.cuda.MemPool over symcoll_pool_alloc / symcoll_pool_free, one kept
    with the communicator for eager allocations; with a graph, torch.cuda.graph(graph, pool=the
    id of a pool of the graph's own) instead of torch.cuda.use_mem_pool (torch lets a pool be the
    thread's allocation pool or a capture's, not both at once). The graph's pool is private, as
    torch's graph pools are: blocks its capture freed are the graph's scratch on every replay,
    and an eager tensor given one of them would be overwritten by the next replay."""
    global _POOL_ALLOCATOR
    if graph is None and graph_kwargs:
        raise TypeError(f"mem_pool: {', '.join(graph_kwargs)} without graph= (they are torch.cuda.graph's)")
    if comm.device == _lib.DEVICE_HOST:
        raise _lib.SymcollError("mem_pool: CPU ranks (torch has no pluggable allocator for CPU tensors; "
                                "use comm.empty)")
    if not hasattr(torch.cuda, "MemPool") or not hasattr(torch.cuda, "use_mem_pool"):
        raise _lib.SymcollError(f"mem_pool: needs torch.cuda.MemPool and use_mem_pool (torch >= 2.8), "
                                f"this is torch {torch.__version__}")
    if _POOL_ALLOCATOR is None:
        _POOL_ALLOCATOR = torch.cuda.memory.CUDAPluggableAllocator(_lib.lib._name, "symcoll_pool_alloc",
                                                                  "symcoll_pool_free")
    if graph is None and comm._pool is None:
        comm._pool = torch.cuda.MemPool(_POOL_ALLOCATOR.allocator())
    _lib.check(_lib.lib.symcoll_pool_attach(comm._c), "symcoll_pool_attach")
    try:
        if graph is None:
            with torch.cuda.use_mem_pool(comm._pool, device=torch.device("cuda", comm.device)):
                yield comm._pool
        else:
            pool = torch.cuda.MemPool(_POOL_ALLOCATOR.allocator())
            comm._graph_pools.append(pool)  # alive while the communicator is: drop_pool lets them go
            with torch.cuda.device(comm.device), torch.cuda.graph(graph, pool=pool.id, **graph_kwargs):
                yield pool
    finally:
        _lib.lib.symcoll_pool_detach(comm._c)


def drop_pool(comm):
    """Before comm's destroy: the pool's cached blocks go back (collectively, on every rank alike)."""
    torch.cuda.synchronize(comm.device)
    comm._pool = None
    comm._graph_pools = []
    import gc

    gc.collect()
    torch.cuda.empty_cache()


def _comm(handle):
    from . import comm_of

    return comm_of(handle)


def _load_compiled():
    """The compiled kernels (python/csrc/torch_ops.cpp, PyTorch's stable ABI, built for torch
    >= 2.10): the library beside this file (the wheel's), beside the loaded libsymcoll, or in
    build/lib. One build, made against torch 2.10, passes the whole suite on CPU ranks with
    torch 2.10, 2.11, 2.12, 2.13, 2.14 and 2.15 from PyPI (scripts/torch-versions; refusals are
    RuntimeErrors carrying symcoll's message). They are taken by default from torch 2.11, the
    oldest torch their GPU cases ran on (the GPU machine has 2.11); torch 2.10 keeps the Python
    kernels unless SYMCOLL_TORCH_OPS=compiled; SYMCOLL_TORCH_OPS=python keeps them everywhere.
    In one environment with torch 2.11 (the GPU machine's) some C++ exceptions reach Python
    mangled, torch's own as well (addmm's autograd refusal, CUDA graph capture: SystemError or
    "translate_exception_to_python called with invalid exception pointer"), and so do the
    compiled kernels' refusals there.
    Returns (the ops it implements, its bind function) or (set(), None)."""
    choice = os.environ.get("SYMCOLL_TORCH_OPS", "")
    if choice == "python":
        return set(), None
    try:
        major, minor = (int(v) for v in torch.__version__.split(".")[:2])
    except ValueError:
        return set(), None
    if (major, minor) < ((2, 10) if choice == "compiled" else (2, 11)):
        return set(), None
    here = pathlib.Path(__file__).resolve().parent
    candidates = sorted(here.glob("_symcoll_torch_ops*.so"))
    # beside the libsymcoll the package loaded (SYMCOLL_LIB: a build tree's lib/), then build/lib
    candidates.append(pathlib.Path(_lib.lib._name).resolve().parent / "_symcoll_torch_ops.so")
    candidates.append(here.parent.parent / "build" / "lib" / "_symcoll_torch_ops.so")
    for path in candidates:
        if not path.exists():
            continue
        try:
            native = ctypes.CDLL(str(path))  # its static initialisers register the kernels
        except OSError:
            continue
        native.symcoll_torch_ops.restype = ctypes.c_char_p
        native.symcoll_torch_bind.argtypes = [ctypes.c_int64, ctypes.c_void_p]
        native.symcoll_torch_bind.restype = None
        return set(native.symcoll_torch_ops().decode().split()), native.symcoll_torch_bind
    return set(), None


COMPILED, _bind = _load_compiled()  # the ops whose kernels are compiled, and the handle binder
if _bind is not None:
    _pkg = sys.modules[__package__]  # the package, still importing this module
    for _h, _c in list(_pkg._handles.items()):  # communicators made before this import
        _bind(_h, _c._c)
    _pkg._bind = _bind

# The ops are defined with their schemas and registered for CPU and CUDA through a
# torch.library.Library, not torch.library.custom_op: the same op, dispatched with less Python
# work a call (custom_op wraps every call in its own layers); where the compiled kernels are
# loaded, the ops they implement take those instead. Fake implementations make torch.compile
# trace them; mutated arguments are marked (a!) in the schemas, so that functionalization
# handles them.
_LIB = torch.library.Library("symcoll", "DEF")


class _Op:
    """What the decorator leaves in the module: calls go to torch.ops.symcoll.<name>."""

    def __init__(self, name):
        self.name = name
        self.qualname = "symcoll::" + name

    def __call__(self, *args, **kwargs):
        return getattr(torch.ops.symcoll, self.name)(*args, **kwargs)

    def register_fake(self, fn):
        torch.library.register_fake(self.qualname, fn, lib=_LIB)
        return fn


def _op(schema):
    def define(fn):
        name = schema.split("(", 1)[0]
        _LIB.define(schema)
        if name not in COMPILED:
            _LIB.impl(name, fn, "CPU")
            _LIB.impl(name, fn, "CUDA")
        return _Op(name)

    return define


@_op('all_reduce_(Tensor(a!) x, str op, int comm) -> ()')
def all_reduce_(x: torch.Tensor, op: str, comm: int) -> None:
    _comm(comm).all_reduce(x, op)


@all_reduce_.register_fake
def _(x, op, comm):
    return None


@_op('all_reduce(Tensor x, str op, int comm) -> Tensor')
def all_reduce(x: torch.Tensor, op: str, comm: int) -> torch.Tensor:
    out = torch.empty_like(x)
    _comm(comm).all_reduce(x, op, out=out)
    return out


@all_reduce.register_fake
def _(x, op, comm):
    return torch.empty_like(x)


@_op('all_gather_into_tensor(Tensor(a!) out, Tensor x, int comm) -> ()')
def all_gather_into_tensor(out: torch.Tensor, x: torch.Tensor, comm: int) -> None:
    _comm(comm).all_gather(x, out)


@all_gather_into_tensor.register_fake
def _(out, x, comm):
    return None


@_op('reduce_scatter_tensor(Tensor(a!) out, Tensor x, str op, int comm) -> ()')
def reduce_scatter_tensor(out: torch.Tensor, x: torch.Tensor, op: str, comm: int) -> None:
    _comm(comm).reduce_scatter(x, out, op)


@reduce_scatter_tensor.register_fake
def _(out, x, op, comm):
    return None


@_op('broadcast_(Tensor(a!) x, int root, int comm) -> ()')
def broadcast_(x: torch.Tensor, root: int, comm: int) -> None:
    _comm(comm).broadcast(x, root)


@broadcast_.register_fake
def _(x, root, comm):
    return None


@_op('broadcast(Tensor x, int root, int comm) -> Tensor')
def broadcast(x: torch.Tensor, root: int, comm: int) -> torch.Tensor:
    out = torch.empty_like(x)
    _comm(comm).broadcast(x, root, out=out)
    return out


@broadcast.register_fake
def _(x, root, comm):
    return torch.empty_like(x)


@_op('reduce_(Tensor(a!) x, str op, int root, int comm) -> ()')
def reduce_(x: torch.Tensor, op: str, root: int, comm: int) -> None:
    _comm(comm).reduce(x, root, op)


@reduce_.register_fake
def _(x, op, root, comm):
    return None


@_op('all_to_all_single(Tensor(a!) out, Tensor x, int comm) -> ()')
def all_to_all_single(out: torch.Tensor, x: torch.Tensor, comm: int) -> None:
    _comm(comm).all_to_all(x, out)


@all_to_all_single.register_fake
def _(out, x, comm):
    return None


@_op('all_to_all(Tensor x, int comm) -> Tensor')
def all_to_all(x: torch.Tensor, comm: int) -> torch.Tensor:
    out = torch.empty_like(x)
    _comm(comm).all_to_all(x, out)
    return out


@all_to_all.register_fake
def _(x, comm):
    return torch.empty_like(x)


@_op('all_gather_matmul(Tensor a_shard, Tensor b, int comm, str algo="auto") -> (Tensor, Tensor)')
def all_gather_matmul(a_shard: torch.Tensor, b: torch.Tensor, comm: int, algo: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    c = _comm(comm)
    n = c.nranks
    out = a_shard.new_empty((a_shard.shape[0] * n, b.shape[1]))
    a_out = a_shard.new_empty((a_shard.shape[0] * n, a_shard.shape[1]))
    c.all_gather_matmul(a_shard.contiguous(), b.contiguous(), out, a_out=a_out, algo=algo)
    return out, a_out


@all_gather_matmul.register_fake
def _(a_shard, b, comm, algo="auto"):
    n = _comm(comm).nranks
    return (a_shard.new_empty((a_shard.shape[0] * n, b.shape[1])),
            a_shard.new_empty((a_shard.shape[0] * n, a_shard.shape[1])))


@_op('matmul_reduce_scatter(Tensor a, Tensor b, int comm, str algo="auto") -> Tensor')
def matmul_reduce_scatter(a: torch.Tensor, b: torch.Tensor, comm: int, algo: str = "auto") -> torch.Tensor:
    c = _comm(comm)
    out = a.new_empty((a.shape[0] // c.nranks, b.shape[1]))
    c.matmul_reduce_scatter(a.contiguous(), b.contiguous(), out, algo=algo)
    return out


@matmul_reduce_scatter.register_fake
def _(a, b, comm, algo="auto"):
    return a.new_empty((a.shape[0] // _comm(comm).nranks, b.shape[1]))


def _norm_args(x, residual, weight):
    return (x.contiguous(), None if residual is None else residual.contiguous(), weight.contiguous())


@_op('all_reduce_rmsnorm(Tensor x, Tensor? residual, Tensor weight, float eps, int comm, str algo="auto") -> (Tensor, Tensor)')
def all_reduce_rmsnorm(x: torch.Tensor, residual: Optional[torch.Tensor], weight: torch.Tensor, eps: float, comm: int,
                       algo: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    x, residual, weight = _norm_args(x, residual, weight)
    out, residual_out = torch.empty_like(x), torch.empty_like(x)
    _comm(comm).all_reduce_rmsnorm(x, residual, weight, eps, out=out, residual_out=residual_out, algo=algo)
    return out, residual_out


@all_reduce_rmsnorm.register_fake
def _(x, residual, weight, eps, comm, algo="auto"):
    return (torch.empty_like(x, memory_format=torch.contiguous_format),
            torch.empty_like(x, memory_format=torch.contiguous_format))


@_op('all_reduce_rmsnorm_(Tensor x, Tensor(a!) residual, Tensor weight, float eps, int comm, str algo="auto") -> Tensor')
def all_reduce_rmsnorm_(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float, comm: int,
                        algo: str = "auto") -> torch.Tensor:
    x, _, weight = _norm_args(x, None, weight)
    out = torch.empty_like(x)
    _comm(comm).all_reduce_rmsnorm(x, residual, weight, eps, out=out, residual_out=residual, algo=algo)
    return out


@all_reduce_rmsnorm_.register_fake
def _(x, residual, weight, eps, comm, algo="auto"):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _norm_fp8(what, run, x, shape, residual, weight, eps, scale, algo):
    """The fp8 forms' kernel: (q, scales, residual_out) of the results' shape, q float8_e4m3fn;
    scales the row scales (shape[:-1] + (1,)) when scale is None, else the static scale's copy.
    run: the Comm method."""
    q = torch.empty(shape, dtype=torch.float8_e4m3fn, device=x.device)
    residual_out = x.new_empty(shape)
    if scale is None:
        scales = torch.empty(tuple(shape[:-1]) + (1,), dtype=torch.float32, device=x.device)
        run(x, residual, weight, eps, residual_out=residual_out, fp8_out=q, fp8_row_scales=scales, algo=algo)
    else:
        if scale.numel() != 1:
            raise _lib.InvalidArgumentError(f"{what}: scale has shape {tuple(scale.shape)}, not one element "
                                            "(None: dynamic per-row scales)")
        if scale.dtype == torch.float32 and scale.device == x.device and q.numel():
            # the kernel writes the scale's copy beside the rows (no copy of the op's own)
            scales = torch.empty((1,), dtype=torch.float32, device=x.device)
            given = dict(fp8_scale=scale, fp8_scale_out=scales)
        else:
            scales = scale.reshape(1).to(device=x.device, dtype=torch.float32, copy=True)
            given = dict(fp8_scale=scales)
        run(x, residual, weight, eps, residual_out=residual_out, fp8_out=q, algo=algo, **given)
    return q, scales, residual_out


def _norm_fp8_fake(x, shape, scale):
    q = torch.empty(shape, dtype=torch.float8_e4m3fn, device=x.device)
    scales = tuple(shape[:-1]) + (1,) if scale is None else (1,)
    return q, torch.empty(scales, dtype=torch.float32, device=x.device), x.new_empty(shape)


@_op('all_reduce_rmsnorm_fp8(Tensor x, Tensor? residual, Tensor weight, float eps, Tensor? scale, int comm, str algo="auto") -> (Tensor, Tensor, Tensor)')
def all_reduce_rmsnorm_fp8(x: torch.Tensor, residual: Optional[torch.Tensor], weight: torch.Tensor, eps: float,
                           scale: Optional[torch.Tensor], comm: int,
                           algo: str = "auto") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x, residual, weight = _norm_args(x, residual, weight)
    return _norm_fp8("all_reduce_rmsnorm_fp8", _comm(comm).all_reduce_rmsnorm, x, x.shape, residual, weight, eps,
                     scale, algo)


@all_reduce_rmsnorm_fp8.register_fake
def _(x, residual, weight, eps, scale, comm, algo="auto"):
    return _norm_fp8_fake(x, x.shape, scale)


def _shard_shape(x, nranks, what):
    """The reduce-scatter form's results: this rank's shard of x's first dimension."""
    if x.dim() < 2 or x.shape[0] % nranks:
        raise _lib.InvalidArgumentError(f"{what}: x has shape {tuple(x.shape)}, not (S, ..., hidden) with S a "
                                        f"multiple of {nranks} ranks")
    return (x.shape[0] // nranks,) + tuple(x.shape[1:])


@_op('reduce_scatter_rmsnorm(Tensor x, Tensor? residual, Tensor weight, float eps, int comm, str algo="auto") -> (Tensor, Tensor)')
def reduce_scatter_rmsnorm(x: torch.Tensor, residual: Optional[torch.Tensor], weight: torch.Tensor, eps: float,
                           comm: int, algo: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    x, residual, weight = _norm_args(x, residual, weight)
    c = _comm(comm)
    shape = _shard_shape(x, c.nranks, "reduce_scatter_rmsnorm")
    out, residual_out = x.new_empty(shape), x.new_empty(shape)
    c.reduce_scatter_rmsnorm(x, residual, weight, eps, out=out, residual_out=residual_out, algo=algo)
    return out, residual_out


@reduce_scatter_rmsnorm.register_fake
def _(x, residual, weight, eps, comm, algo="auto"):
    shape = _shard_shape(x, _comm(comm).nranks, "reduce_scatter_rmsnorm")
    return x.new_empty(shape), x.new_empty(shape)


@_op('reduce_scatter_rmsnorm_(Tensor x, Tensor(a!) residual, Tensor weight, float eps, int comm, str algo="auto") -> Tensor')
def reduce_scatter_rmsnorm_(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float, comm: int,
                            algo: str = "auto") -> torch.Tensor:
    x, _, weight = _norm_args(x, None, weight)
    c = _comm(comm)
    out = x.new_empty(_shard_shape(x, c.nranks, "reduce_scatter_rmsnorm_"))  # as the compiled kernel's
    c.reduce_scatter_rmsnorm(x, residual, weight, eps, out=out, residual_out=residual, algo=algo)
    return out


@reduce_scatter_rmsnorm_.register_fake
def _(x, residual, weight, eps, comm, algo="auto"):
    return x.new_empty(_shard_shape(x, _comm(comm).nranks, "reduce_scatter_rmsnorm_"))


@_op('reduce_scatter_rmsnorm_fp8(Tensor x, Tensor? residual, Tensor weight, float eps, Tensor? scale, int comm, str algo="auto") -> (Tensor, Tensor, Tensor)')
def reduce_scatter_rmsnorm_fp8(x: torch.Tensor, residual: Optional[torch.Tensor], weight: torch.Tensor, eps: float,
                               scale: Optional[torch.Tensor], comm: int,
                               algo: str = "auto") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x, residual, weight = _norm_args(x, residual, weight)
    c = _comm(comm)
    return _norm_fp8("reduce_scatter_rmsnorm_fp8", c.reduce_scatter_rmsnorm, x,
                     _shard_shape(x, c.nranks, "reduce_scatter_rmsnorm_fp8"), residual, weight, eps, scale, algo)


@reduce_scatter_rmsnorm_fp8.register_fake
def _(x, residual, weight, eps, scale, comm, algo="auto"):
    return _norm_fp8_fake(x, _shard_shape(x, _comm(comm).nranks, "reduce_scatter_rmsnorm_fp8"), scale)
