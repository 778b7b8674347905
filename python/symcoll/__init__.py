"""symcoll for Python: communicators, symmetric arrays and tensors, and the collectives.

A thin skin over libsymcoll (include/symcoll.h): every semantic lives in C; this package turns
arrays and tensors into pointers and the current CUDA stream, and statuses into exceptions
named after them (symcoll.TimeoutError, symcoll.MismatchError, ...). numpy arrays on CPU ranks
work without torch; with torch, CPU and CUDA tensors work and the collectives are also torch
custom ops (symcoll.ops, torch.ops.symcoll.*) for torch.compile and CUDA graphs.

    import symcoll
    with symcoll.Comm.from_env() as comm:          # torchrun, mpirun, Slurm, SYMCOLL_RANK...
        x = comm.empty(1024, "float32")            # symmetric memory: the zero-copy path
        x[:] = comm.rank
        comm.all_reduce(x)                         # in place
"""
import ctypes
import itertools
import numbers
import os
import uuid
import warnings

from ._lib import (ALGOS, COLLS, DEVICE_HOST, DTYPES, OPS, SPLIT_NOCOLOR, AbortedError,  # noqa: F401
                   CollOpts, Config, CudaError, JobConfig, MatmulOpts, DeviceView, InternalError, InvalidArgumentError,
                   NormOpts, OobAllgather,
                   MismatchError, NoMemoryError, PeerLostError, SymcollError, SystemCallError,
                   TimeoutError, UnsupportedError, check, lib)

__all__ = ["Comm", "SymcollError", "InvalidArgumentError", "UnsupportedError", "SystemCallError", "CudaError",
           "NoMemoryError", "TimeoutError", "PeerLostError", "AbortedError", "MismatchError", "InternalError",
           "version", "DEVICE_HOST", "SPLIT_NOCOLOR"]


def version():
    """The loaded library's version as (major, minor, patch)."""
    v = lib.symcoll_version()
    return (v // 10000, v // 100 % 100, v % 100)


# ---- arrays and tensors as (pointer, count, dtype, stream, device) -----------------------------

_NUMPY_DTYPES = {"float32": "fp32", "float16": "fp16", "float64": "fp64", "int8": "int8", "uint8": "uint8",
                 "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
                 "bfloat16": "bf16", "float8_e4m3fn": "fp8_e4m3",
                 "float8_e5m2": "fp8_e5m2"}  # bfloat16, float8_*: ml_dtypes' numpy types, where present
_TORCH_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64", "int8": "int8",
                 "uint8": "uint8", "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
                 "float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2"}


def _is_torch(x):
    return type(x).__module__.startswith("torch")


# Per-call work that depends only on the type of an argument is done once and cached: the symcoll
# dtype index of each numpy / torch dtype object, the describer of each array type, and the fixed
# options of each algorithm.
_dtype_index = {}


def _dtype_of(x, table, what):
    d = x.dtype
    try:
        return _dtype_index[d]
    except KeyError:
        pass
    name = str(d).replace("torch.", "")
    if name not in table:
        raise InvalidArgumentError(f"{what} dtype {d} has no symcoll dtype")
    _dtype_index[d] = i = DTYPES.index(table[name])
    return i


def _describe_tensor(x):
    try:
        dt = _dtype_index[x.dtype]
    except KeyError:
        dt = _dtype_of(x, _TORCH_DTYPES, "torch")
    if not x.is_contiguous():
        raise InvalidArgumentError("symcoll collectives take contiguous tensors")
    if x.is_cuda:
        return (x.data_ptr(), x.numel(), dt, True, x.get_device())
    return (x.data_ptr(), x.numel(), dt, False, -1)


def _describe_array(x):
    dt = _dtype_of(x, _NUMPY_DTYPES, "numpy")
    if not x.flags.c_contiguous:
        raise InvalidArgumentError("symcoll collectives take contiguous arrays")
    return (x.ctypes.data, x.size, dt, False, -1)


_describers = {}  # type -> its describer


def _describe(x):
    """(pointer, elements, symcoll dtype index, is_cuda, device index) of a contiguous array or tensor."""
    try:
        return _describers[type(x)](x)
    except KeyError:
        pass
    f = _describers[type(x)] = _describe_tensor if _is_torch(x) else _describe_array
    return f(x)


def _out_like(out, n, dt, what):
    """(out, its pointer) for an out of place call, after checking that out holds n elements of dt."""
    po, no, dto, _, _ = _describe(out)
    if no != n or dto != dt:
        raise InvalidArgumentError(f"{what}: out has {no} elements of {DTYPES[dto]}, x {n} of {DTYPES[dt]}")
    return out, po


def _empty_like(x):
    """A new contiguous array or tensor of x's shape, dtype and device."""
    if _is_torch(x):
        import torch

        return torch.empty_like(x, memory_format=torch.contiguous_format)
    import numpy as np

    return np.empty_like(x, order="C")


def _empty(shape, like):
    """A new contiguous array or tensor of `shape` with like's dtype and device."""
    if _is_torch(like):
        import torch

        return torch.empty(shape, dtype=like.dtype, device=like.device)
    import numpy as np

    return np.empty(shape, dtype=like.dtype)


def _where(is_cuda, device):
    return f"cuda:{device}" if is_cuda else "the CPU"


_raw_stream = None  # device index -> PyTorch's current CUDA stream there, as an integer


def _stream_of(comm, is_cuda):
    if not is_cuda:
        return None
    global _raw_stream
    if _raw_stream is None:
        import torch

        # The raw getter skips building a torch.cuda.Stream object a call (a few microseconds).
        get = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        _raw_stream = get or (lambda dev: torch.cuda.current_stream(dev).cuda_stream)
    dev = comm._cuda_device
    if dev is None:
        dev = comm._cuda_device = lib.symcoll_comm_device(comm._live)
    return _raw_stream(dev)


def _algo_index(algo):
    if algo not in ALGOS:
        raise InvalidArgumentError(f"unknown algorithm {algo!r} (one of {', '.join(ALGOS)})")
    return ALGOS.index(algo)


_opts_by_algo = {}


def _opts(algo):
    """The options of a call with this algorithm (None: the library's defaults, a NULL pointer);
    made once per algorithm and never changed (the library only reads them)."""
    if algo is None:
        return None
    try:
        return _opts_by_algo[algo]
    except KeyError:
        pass
    o = CollOpts()
    lib.symcoll_coll_opts_init(ctypes.byref(o))
    o.algo = _algo_index(algo)
    _opts_by_algo[algo] = ref = ctypes.pointer(o)
    return ref


def _scaled_opts(algo, scale, x, x_dtype, what):
    """Options with a scale (NCCL's PreMulSum: this rank's input is multiplied by it before the
    sum): a number, taken in x's dtype (host memory), or a one-element array / tensor of x's
    dtype (a CUDA tensor is read when the call runs, as a CUDA graph needs). Returns the options'
    pointer and what must live through the call."""
    o = CollOpts()
    lib.symcoll_coll_opts_init(ctypes.byref(o))
    if o.struct_size < ctypes.sizeof(CollOpts):  # a libsymcoll older than 0.6 would not read it
        raise UnsupportedError(f"{what}: this libsymcoll takes no scale (options of {o.struct_size} bytes)")
    if algo is not None:
        o.algo = _algo_index(algo)
    if isinstance(scale, numbers.Number):
        if _is_torch(x):
            import torch

            keep = torch.tensor([scale], dtype=x.dtype)
        else:
            import numpy as np

            keep = np.array([scale], dtype=x.dtype)
    else:
        keep = scale
    p, n, dt, cuda, _ = _describe(keep)
    if n != 1 or dt != x_dtype:
        raise InvalidArgumentError(f"{what}: scale holds {n} elements of {DTYPES[dt]}, not one of {DTYPES[x_dtype]}")
    o.scale, o.scale_on_device = p, int(cuda)
    return ctypes.pointer(o), keep


# ---- communicators ---------------------------------------------------------------------------------

_handles = {}
_next_handle = itertools.count(1)
_bind = None  # set by _torch where the compiled torch ops are loaded: (handle, comm or None)


class Comm:
    """A communicator of ranks of one host (CPU ranks, or GPUs of one node).

    Create it collectively: Comm(rank, nranks, job_id, device) on every rank, Comm.from_env(),
    or Comm.from_process_group(group). device is a CUDA ordinal, "cuda" (the current CUDA
    device), or None / DEVICE_HOST for CPU ranks. Use it from one thread at a time; abort()
    and check() may be called from any thread.
    """

    def __init__(self, rank=None, nranks=None, job_id=None, device=None, timeout_ms=0, workspace_bytes=0,
                 _handle=None):
        self._mems = []
        self._pool, self._graph_pools = None, []  # mem_pool()'s torch MemPools (eager; captured graphs')
        self._cuda_device = None  # the communicator's CUDA ordinal, read at its first GPU call
        if _handle is not None:
            self._c = _handle
        else:
            cfg = Config()
            lib.symcoll_config_init(ctypes.byref(cfg))
            cfg.rank, cfg.nranks = int(rank), int(nranks)
            cfg.job_id = (job_id or f"python.{os.getppid()}").encode()  # ranks forked by one parent meet
            cfg.device = _device_ordinal(device)
            cfg.timeout_ms = int(timeout_ms)
            cfg.workspace_bytes = int(workspace_bytes)
            h = ctypes.c_void_p()
            check(lib.symcoll_comm_create(ctypes.byref(cfg), ctypes.byref(h)), "symcoll_comm_create")
            self._c = h
        self.handle = next(_next_handle)  # what the torch ops take in place of the object
        _handles[self.handle] = self
        if _bind is not None:  # the compiled torch ops look the handle up in C
            _bind(self.handle, self._c)

    @classmethod
    def from_env(cls, device=None):
        """Ranks from the launcher: SYMCOLL_RANK/NRANKS/JOB_ID, torchrun's LOCAL_RANK and
        LOCAL_WORLD_SIZE, Open MPI, Slurm (node-local ranks). device="cuda": the local rank's GPU."""
        dev = -2 if device == "cuda" else _device_ordinal(device)
        h = ctypes.c_void_p()
        check(lib.symcoll_comm_create_from_env(dev, ctypes.byref(h)), "symcoll_comm_create_from_env")
        return cls(_handle=h)

    @classmethod
    def from_process_group(cls, group=None, device=None, timeout_ms=0):
        """The ranks of a torch.distributed process group (a TP group of a larger job works),
        the rendezvous name agreed through the group. Its ranks must share one host."""
        import torch
        import torch.distributed as dist

        rank, nranks = dist.get_rank(group), dist.get_world_size(group)
        if device is None and torch.cuda.is_available() and dist.get_backend(group) == "nccl":
            device = torch.cuda.current_device()
        name = [f"pg.{uuid.uuid4().hex[:24]}" if rank == 0 else None]
        dist.broadcast_object_list(name, src=dist.get_global_rank(group, 0) if group is not None else 0, group=group)
        hosts = [None] * nranks
        dist.all_gather_object(hosts, os.uname().nodename, group=group)
        if len(set(hosts)) == 1 and not os.environ.get("SYMCOLL_PG_AS_JOB"):
            return cls(rank, nranks, name[0], device, timeout_ms=timeout_ms)
        # Ranks on several hosts: a communicator spanning nodes, the group carrying the few
        # bytes symcoll exchanges while it sets up (NCCL's unique ids, the node layout).
        local = [h for h in hosts if h == hosts[rank]]
        local_rank = sum(1 for h in hosts[:rank] if h == hosts[rank])

        def oob(ctx, send, recv, nbytes):
            try:
                parts = [None] * nranks
                dist.all_gather_object(parts, ctypes.string_at(send, nbytes), group=group)
                for i, p in enumerate(parts):
                    ctypes.memmove(recv + i * nbytes, p, nbytes)
                return 0
            except Exception:  # noqa: BLE001 - a C callback must not raise
                return -1

        cb = OobAllgather(oob)
        cfg = JobConfig()
        lib.symcoll_job_config_init(ctypes.byref(cfg))
        cfg.job_id = name[0].encode()
        cfg.rank, cfg.nranks, cfg.local_rank, cfg.local_nranks = rank, nranks, local_rank, len(local)
        cfg.device = _device_ordinal(device)
        cfg.timeout_ms = int(timeout_ms)
        cfg.oob_allgather = cb
        h = ctypes.c_void_p()
        check(lib.symcoll_comm_create_job(ctypes.byref(cfg), ctypes.byref(h)), "symcoll_comm_create_job")
        comm = cls(_handle=h)
        comm._oob = cb  # symcoll calls it again (barrier, SYMCOLL_CHECK): it lives as long as the comm
        return comm

    # -- properties and lifetime --
    @property
    def _live(self):
        """The C handle; a destroyed communicator raises."""
        if self._c is None:
            raise InvalidArgumentError("this communicator was destroyed")
        return self._c

    @property
    def rank(self):
        return lib.symcoll_comm_rank(self._live)

    @property
    def nranks(self):
        return lib.symcoll_comm_nranks(self._live)

    @property
    def nnodes(self):
        """Nodes the communicator spans (1 on one host)."""
        return lib.symcoll_comm_nnodes(self._live)

    @property
    def device(self):
        """CUDA ordinal, or DEVICE_HOST (-1) for CPU ranks."""
        return lib.symcoll_comm_device(self._live)

    def barrier(self):
        check(lib.symcoll_comm_barrier(self._c), "symcoll_comm_barrier")

    def abort(self):
        check(lib.symcoll_comm_abort(self._c), "symcoll_comm_abort")

    def check(self):
        """Raises the communicator's asynchronous error (a GPU kernel that gave up), if any."""
        check(lib.symcoll_comm_check(self._c), "symcoll_comm_check")

    def split(self, color, key=0):
        """ncclCommSplit's contract: collective; ranks of one color >= 0 form a communicator,
        ordered by key; color SPLIT_NOCOLOR (-1) joins none and gets None."""
        h = ctypes.c_void_p()
        check(lib.symcoll_comm_split(self._c, int(color), int(key), ctypes.byref(h)), "symcoll_comm_split")
        return Comm(_handle=h) if h.value else None

    def destroy(self):
        """Releases the communicator (and its symmetric memory): after a barrier, as
        ncclCommFinalize + Destroy, so that no peer still reads this rank's memory."""
        if self._c is None:
            return
        _handles.pop(self.handle, None)
        if _bind is not None:
            _bind(self.handle, None)
        if self._pool is not None or self._graph_pools:
            from . import _torch

            _torch.drop_pool(self)  # its blocks go back while the communicator can still free them
        lib.symcoll_comm_destroy(self._c)
        self._c = None
        self._mems = []

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            try:
                self.barrier()
            finally:
                self.destroy()
        else:
            self.abort()
            self.destroy()
        return False

    # -- symmetric memory --
    def _alloc(self, nbytes):
        m = ctypes.c_void_p()
        check(lib.symcoll_mem_alloc(self._c, max(int(nbytes), 1), ctypes.byref(m)), "symcoll_mem_alloc")
        self._mems.append(m)
        return m

    def empty(self, shape, dtype="float32"):
        """A symmetric array (numpy, on CPU ranks) or tensor (torch, with a torch dtype; on GPU
        ranks a CUDA tensor): every rank gets one of the same size, every peer maps it, and
        collectives reading it take the zero-copy path. Collective. It lives until free() or
        the communicator's destroy()."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        count = 1
        for s in shape:
            count *= int(s)
        if _is_torch(dtype) or self.device != DEVICE_HOST:
            from . import _torch

            return _torch.empty(self, shape, count, dtype)
        import numpy as np

        dt = np.dtype(dtype)
        m = self._alloc(count * dt.itemsize)
        ptr = lib.symcoll_mem_ptr(m, self.rank)
        buf = (ctypes.c_byte * max(count * dt.itemsize, 1)).from_address(ptr)
        return np.frombuffer(buf, dtype=dt, count=count).reshape(shape)

    def mem_pool(self, graph=None, **graph_kwargs):
        """A context manager: inside `with comm.mem_pool():` every CUDA tensor PyTorch allocates
        on this rank's GPU is symmetric memory of this communicator (a torch.cuda.MemPool over
        symcoll's allocator), so collectives on tensors from layers that know nothing of symcoll
        (a Linear's output, say) run zero-copy. It yields the pool; the pool is kept with the
        communicator and reused by later `with` blocks. CUDA graphs over tensors kept in the pool
        and torch.compile inside it work.

        `with comm.mem_pool(graph=g):` captures g instead (torch.cuda.graph(g, pool=...,
        **graph_kwargs)) into a symmetric pool of the graph's own, private as torch's graph pools
        are (an eager tensor must never get the graph's scratch, which every replay rewrites):
        what the captured code allocates is symmetric too. (Not `torch.cuda.graph(g,
        pool=pool.id)` inside a plain `with comm.mem_pool() as pool:` block: torch refuses a pool
        that is already the allocation pool.)

        The rule that makes it safe: allocation is collective. Inside the pool every rank must
        allocate the same sizes in the same order, as the same model code on every rank does. A
        rank that asks for another size fails every rank's allocation (torch raises
        OutOfMemoryError; the log names the sizes); a tensor at another offset on another rank is
        refused by the collective (MismatchError), never read at the wrong place. Blocks go back
        (collectively) at torch.cuda.empty_cache() or with the communicator. One rank per process
        (process mode); CPU ranks: torch has no pluggable allocator for CPU tensors."""
        from . import _torch

        return _torch.mem_pool(self, graph, **graph_kwargs)

    def is_symmetric(self, x):
        """Whether the buffer of x (a tensor or numpy array) lies in this communicator's symmetric
        memory (comm.empty, comm.mem_pool), where collectives read it zero-copy."""
        ptr, nbytes = (x.data_ptr(), x.numel() * x.element_size()) if hasattr(x, "data_ptr") else \
            (x.__array_interface__["data"][0], x.nbytes)
        return bool(lib.symcoll_mem_lookup(self._c, ptr, max(nbytes, 1), None))

    def free(self):
        """Frees every symmetric array of this communicator (collective)."""
        for m in self._mems:
            lib.symcoll_mem_free(m)
        self._mems = []

    def device_view(self, x):
        """The DeviceView (symcoll_device_view_t) of a symmetric GPU tensor from empty(): peers'
        buffers and signal pads, to pass by value as one kernel argument (bytes(view)); its
        `buffer_ptrs` and `pad_ptrs` list the same pointers for Triton kernels."""
        for m in self._mems:
            if lib.symcoll_mem_ptr(m, self.rank) == _describe(x)[0]:
                v = DeviceView()
                check(lib.symcoll_mem_device_view(m, ctypes.byref(v)), "symcoll_mem_device_view")
                v.buffer_ptrs = [v.buf[r] for r in range(v.nranks)]
                v.pad_ptrs = [v.pad[r] for r in range(v.nranks)]
                return v
        raise InvalidArgumentError("not the start of a symmetric tensor of this communicator (see Comm.empty)")

    # -- collectives (numpy arrays, torch tensors) --
    def all_reduce(self, x, op="sum", out=None, algo=None, scale=None):
        """out = op over ranks of x (in place when out is None or is x); returns out. scale: each
        rank's x is multiplied by its own scale before the sum (NCCL's PreMulSum; op "sum"): a
        number, or a one-element array / tensor of x's dtype (on the GPU: read when the call runs)."""
        px, n, dt, cuda, _ = _describe(x)
        out, po = (x, px) if out is None or out is x else _out_like(out, n, dt, "all_reduce")
        o, keep = _opts(algo), None
        if scale is not None:
            o, keep = _scaled_opts(algo, scale, x, dt, "all_reduce")
        st = lib.symcoll_all_reduce_ex(self._c, px, po, n, dt, _op(op), _stream_of(self, cuda), o)
        del keep
        if st:
            check(st, "all_reduce")
        return out

    def all_gather(self, x, out, algo=None):
        """out holds nranks x x.size elements, rank r's x at r * x.size; in place when x is
        rank's block of out. Returns out."""
        px, n, dt, cuda, _ = _describe(x)
        po, no, dto, _, _ = _describe(out)
        if dto != dt:
            raise InvalidArgumentError(f"all_gather: out holds {DTYPES[dto]}, x {DTYPES[dt]}: the dtypes must agree")
        if no != n * self.nranks:
            raise InvalidArgumentError(f"all_gather: out has {no} elements, not nranks x x.size = "
                                       f"{self.nranks} x {n} = {n * self.nranks}")
        o = _opts(algo)
        check(lib.symcoll_all_gather_ex(self._c, px, po, n, dt, _stream_of(self, cuda), o),
              "all_gather")
        return out

    def reduce_scatter(self, x, out, op="sum", algo=None, scale=None):
        """out (x.size / nranks elements) = op over ranks of this rank's block of x. Returns out.
        scale: as all_reduce's."""
        px, n, dt, cuda, _ = _describe(x)
        po, no, dto, _, _ = _describe(out)
        if dto != dt:
            raise InvalidArgumentError(f"reduce_scatter: out holds {DTYPES[dto]}, x {DTYPES[dt]}: the dtypes must agree")
        if n != no * self.nranks:
            raise InvalidArgumentError(f"reduce_scatter: x has {n} elements, not nranks x out.size = "
                                       f"{self.nranks} x {no} = {no * self.nranks}")
        o, keep = _opts(algo), None
        if scale is not None:
            o, keep = _scaled_opts(algo, scale, x, dt, "reduce_scatter")
        check(lib.symcoll_reduce_scatter_ex(self._c, px, po, no, dt, _op(op), _stream_of(self, cuda),
                                            o), "reduce_scatter")
        del keep
        return out

    def broadcast(self, x, root=0, out=None, algo=None):
        """out = root's x on every rank (in place when out is None or is x); returns out. x is
        read on root only: other ranks may pass None for it when they pass out."""
        if x is None and out is None:
            raise InvalidArgumentError("broadcast: x and out are both None (pass out on ranks other than root)")
        out = x if out is None else out
        po, no, dto, cuda, _ = _describe(out)
        px = None
        if x is not None:
            px, n, dt, _, _ = _describe(x)
            if n != no or dt != dto:
                raise InvalidArgumentError(f"broadcast: out has {no} elements of {DTYPES[dto]}, x {n} of {DTYPES[dt]}")
        o = _opts(algo)
        check(lib.symcoll_broadcast_ex(self._c, px, po, no, dto, int(root), _stream_of(self, cuda), o),
              "broadcast")
        return out

    def reduce(self, x, root=0, op="sum", out=None, algo=None, scale=None):
        """root's out = op over ranks of x (in place when out is None or is x); returns out,
        which only root's call writes (other ranks may pass out=None: nothing is written).
        scale: as all_reduce's."""
        px, n, dt, cuda, _ = _describe(x)
        po = px if out is None else _out_like(out, n, dt, "reduce")[1]
        o, keep = _opts(algo), None
        if scale is not None:
            o, keep = _scaled_opts(algo, scale, x, dt, "reduce")
        check(lib.symcoll_reduce_ex(self._c, px, po, n, dt, _op(op), int(root), _stream_of(self, cuda),
                                    o), "reduce")
        del keep
        return x if out is None else out

    def all_to_all(self, x, out=None, algo=None):
        """x and out hold nranks blocks of x.size / nranks elements: block j of rank r's x lands
        in block r of rank j's out (in place when out is None or is x). Returns out."""
        px, n, dt, cuda, _ = _describe(x)
        out, po = (x, px) if out is None or out is x else _out_like(out, n, dt, "all_to_all")
        if n % self.nranks:
            raise InvalidArgumentError(f"all_to_all: x has {n} elements, not a multiple of nranks = {self.nranks}")
        o = _opts(algo)
        check(lib.symcoll_all_to_all_ex(self._c, px, po, n // self.nranks, dt, _stream_of(self, cuda),
                                        o), "all_to_all")
        return out

    # -- collectives fused with a GEMM (2-D, row-major, contiguous; fp32, fp16, bf16) --
    def _mm_opts(self, algo, a_out=None):
        o = MatmulOpts()
        lib.symcoll_matmul_opts_init(ctypes.byref(o))
        if algo is not None:
            if algo not in ("auto", "overlap", "sequential"):
                raise InvalidArgumentError(f"unknown algorithm {algo!r} (auto, overlap, sequential)")
            o.algo = ALGOS.index(algo)
        if a_out is not None:
            o.a_out = _describe(a_out)[0]
        return o

    def all_gather_matmul(self, a_shard, b, out, a_out=None, algo=None):
        """out ((nranks * m) x n) = all_gather(a_shard (m x k)) @ b (k x n); a_out, when given,
        receives the gathered A (nranks * m x k). Returns out."""
        (m, k), (kb, n) = a_shard.shape, b.shape
        pa, _, dt, cuda, _ = _describe(a_shard)
        pb, _, dtb, _, _ = _describe(b)
        po, no, dto, _, _ = _describe(out)
        if kb != k or no != m * self.nranks * n or dtb != dt or dto != dt:
            raise InvalidArgumentError(f"all_gather_matmul: shapes {tuple(a_shard.shape)} @ {tuple(b.shape)} -> "
                                       f"{tuple(out.shape)} do not fit {self.nranks} ranks, or dtypes differ")
        if a_out is not None and _describe(a_out)[1] != m * k * self.nranks:
            raise InvalidArgumentError("all_gather_matmul: a_out does not hold nranks x a_shard")
        o = self._mm_opts(algo, a_out)
        check(lib.symcoll_all_gather_matmul(self._c, pa, pb, po, m, n, k, dt, ctypes.byref(o),
                                            _stream_of(self, cuda)), "all_gather_matmul")
        return out

    def matmul_reduce_scatter(self, a, b, out, algo=None):
        """out ((m / nranks) x n) = this rank's rows of the sum over ranks of a (m x k) @ b (k x n).
        Returns out."""
        (m, k), (kb, n) = a.shape, b.shape
        pa, _, dt, cuda, _ = _describe(a)
        pb, _, dtb, _, _ = _describe(b)
        po, no, dto, _, _ = _describe(out)
        if kb != k or m % self.nranks or no * self.nranks != m * n or dtb != dt or dto != dt:
            raise InvalidArgumentError(f"matmul_reduce_scatter: shapes {tuple(a.shape)} @ {tuple(b.shape)} -> "
                                       f"{tuple(out.shape)} do not fit {self.nranks} ranks, or dtypes differ")
        o = self._mm_opts(algo)
        check(lib.symcoll_matmul_reduce_scatter(self._c, pa, pb, po, m, n, k, dt, ctypes.byref(o),
                                                _stream_of(self, cuda)), "matmul_reduce_scatter")
        return out

    # -- all-reduce fused with residual add and RMSNorm --
    def all_reduce_rmsnorm(self, x, residual, weight, eps, out=None, residual_out=None, fp8_out=None,
                           fp8_scale=None, fp8_row_scales=None, algo=None, fp8_scale_out=None):
        """What a tensor-parallel block runs after its attention and its MLP, in one call
        (symcoll_all_reduce_rmsnorm), per row of hidden = x.shape[-1] elements (any leading
        dimensions of x are its rows):

            r            = all_reduce_sum(x) + residual   fp32 in rank order, rounded to the dtype;
                                                          the add in fp32, rounded (residual None: r = sum)
            residual_out = r                              if given (it may be residual: in place)
            out          = r / sqrt(mean(r * r) + eps) * weight      fp32 from r as rounded
            fp8_out      = e4m3(out * (1 / scale))        if given; 1 / scale rounded to fp32;
                                                          saturating at +-448 (vLLM's bytes)

        x, residual, weight (hidden elements), out and residual_out share one dtype (float32,
        float16 or bfloat16) and are numpy arrays on CPU ranks, or torch tensors (CPU, or CUDA
        on the communicator's GPU; the current stream), contiguous; residual, out and
        residual_out have x's rows x hidden elements (the same last dimension). residual and
        weight are the same on every rank (as tensor parallelism has them).
        out: None gives a new array like x, unless fp8_out is given (then no out is written);
        out may be x (in place).
        fp8_out: rows x hidden torch.float8_e4m3fn (or uint8: the e4m3 bits; numpy: uint8), with
        exactly one of fp8_scale, the static scale (a float; or a 1-element float32 array or
        tensor, on the GPU for CUDA tensors: read when the call runs, as a CUDA graph needs),
        and fp8_row_scales, rows float32 that receive the per-row scales
        max(max|out row| / 448, 1 / (448 * 512)) (dynamic, as vLLM and TensorRT-LLM compute them).
        fp8_scale_out: with a static scale, None or 1 float32 (x's device) that receives the
        scale the call used, written by the call itself (no copy of one's own to hand it on).
        algo: None or "auto" (the tuning table), "oneshot", "twoshot", "lamport" or "sequential"
        (the library refuses an algorithm that is not all_reduce_rmsnorm's).
        Every rank passes the same shapes, dtype, eps, options and set of buffers.
        Returns out (None when only fp8_out was asked for)."""
        return self._rmsnorm("all_reduce_rmsnorm", x, residual, weight, eps, out, residual_out, fp8_out, fp8_scale,
                             fp8_row_scales, algo, fp8_scale_out)

    def reduce_scatter_rmsnorm(self, x, residual, weight, eps, out=None, residual_out=None, fp8_out=None,
                               fp8_scale=None, fp8_row_scales=None, algo=None, fp8_scale_out=None):
        """The same on a reduce-scatter, the sequence-parallel form (symcoll_reduce_scatter_rmsnorm):
        x (S, ..., hidden) holds this rank's partial sums of every rank's rows, S a multiple of
        nranks, split on its first dimension as reduce_scatter_tensor splits it: rank p's shard
        is x[p * S / nranks : (p + 1) * S / nranks]. This rank's results are its shard of

            r = reduce_scatter_sum(x) + residual,   then residual_out, out and fp8_out as
                                                    all_reduce_rmsnorm's (the same bits)

        so residual, out, residual_out and fp8_out have the shard's shape (S / nranks, ...,
        hidden) and fp8_row_scales its rows; residual is this rank's shard of the residual (as
        sequence parallelism holds it), weight the hidden elements every rank has.
        out: None gives a new array of the shard's shape, unless fp8_out is given; out may be
        x's own shard (in place). algo: None or "auto", "pull" (the fused pass) or "sequential"
        (reduce_scatter, then the add and the norm). An all_gather of out afterwards gives every
        rank all the rows. Returns out (None when only fp8_out was asked for)."""
        return self._rmsnorm("reduce_scatter_rmsnorm", x, residual, weight, eps, out, residual_out, fp8_out,
                             fp8_scale, fp8_row_scales, algo, fp8_scale_out)

    def _rmsnorm(self, what, x, residual, weight, eps, out, residual_out, fp8_out, fp8_scale, fp8_row_scales, algo,
                 fp8_scale_out):
        scatter = what == "reduce_scatter_rmsnorm"
        if len(x.shape) < (2 if scatter else 1):
            raise InvalidArgumentError(f"{what}: x has shape {tuple(x.shape)}, not rows x hidden "
                                       f"({'(S, ..., hidden) with S a multiple of nranks' if scatter else 'leading dimensions are rows'})")
        hidden = int(x.shape[-1])
        px, n, dt, cuda, dev = _describe(x)
        shape = tuple(int(d) for d in x.shape)  # of the results
        if scatter:
            if shape[0] % self.nranks:
                raise InvalidArgumentError(f"{what}: x has shape {shape}: its first dimension is not a multiple of "
                                           f"nranks = {self.nranks}")
            shape = (shape[0] // self.nranks,) + shape[1:]
        rows = 1
        for d in shape[:-1]:
            rows *= d
        count = rows * hidden  # elements of each result
        if DTYPES[dt] not in ("fp32", "fp16", "bf16"):
            raise InvalidArgumentError(f"{what}: x is {DTYPES[dt]}: float32, float16 or bfloat16")
        if out is None and fp8_out is None:
            out = _empty_like(x) if not scatter else _empty(shape, x)

        def buf(name, t, dtypes, count, last=None, want=None):
            """t's pointer, after checking its dtype (one of dtypes), device and size."""
            if t is None:
                return None
            p, m, d, c, di = _describe(t)
            if DTYPES[d] not in dtypes:
                raise InvalidArgumentError(f"{what}: {name} is {DTYPES[d]}, not {' or '.join(dtypes)}" +
                                           (" (x's dtype: the dtypes must agree)" if dtypes == (DTYPES[dt],) else ""))
            if (c, di) != (cuda, dev):
                raise InvalidArgumentError(f"{what}: {name} is on {_where(c, di)}, x on {_where(cuda, dev)}")
            tshape = tuple(t.shape)
            if m != count or (last is not None and (not tshape or tshape[-1] != last)):
                if want is None:
                    want = (f"rows x hidden = {rows} x {hidden} ({'the shard of ' if scatter else ''}x's shape "
                            f"{shape})" if last else f"{count} element{'s' if count != 1 else ''}")
                raise InvalidArgumentError(f"{what}: {name} has shape {tshape}, not {want}")
            return p

        same = (DTYPES[dt],)
        pr = buf("residual", residual, same, count, hidden)
        if weight is None:
            raise InvalidArgumentError(f"{what}: weight is None")
        pw = buf("weight", weight, same, hidden, want=f"({hidden},): hidden = x.shape[-1] = {hidden} elements")
        po = buf("out", out, same, count, hidden)
        pro = buf("residual_out", residual_out, same, count, hidden)
        o = NormOpts()
        lib.symcoll_norm_opts_init(ctypes.byref(o))
        if algo is not None:
            o.algo = _algo_index(algo)
        keep = None  # a static scale given as a number, alive through the call
        if fp8_out is not None:
            if (fp8_scale is None) == (fp8_row_scales is None):
                raise InvalidArgumentError(f"{what}: fp8_out takes exactly one of fp8_scale (static) and "
                                           "fp8_row_scales (dynamic, per row)")
            o.fp8_out = buf("fp8_out", fp8_out, ("fp8_e4m3", "uint8"), count, hidden)
            if fp8_row_scales is not None:
                o.fp8_row_scales = buf("fp8_row_scales", fp8_row_scales, ("fp32",), rows)
            elif isinstance(fp8_scale, numbers.Real):
                if cuda:
                    import torch

                    keep = torch.full((1,), float(fp8_scale), dtype=torch.float32, device=f"cuda:{dev}")
                    o.fp8_scale = keep.data_ptr()
                else:
                    keep = ctypes.c_float(fp8_scale)
                    o.fp8_scale = ctypes.addressof(keep)
            else:
                o.fp8_scale = buf("fp8_scale", fp8_scale, ("fp32",), 1)
            if fp8_scale_out is not None:
                if fp8_scale is None:
                    raise InvalidArgumentError(f"{what}: fp8_scale_out without fp8_scale (it copies the static "
                                               "scale)")
                o.fp8_scale_out = buf("fp8_scale_out", fp8_scale_out, ("fp32",), 1)
        elif fp8_scale is not None or fp8_row_scales is not None or fp8_scale_out is not None:
            raise InvalidArgumentError(f"{what}: fp8_scale, fp8_row_scales or fp8_scale_out without fp8_out")
        fn = lib.symcoll_reduce_scatter_rmsnorm if scatter else lib.symcoll_all_reduce_rmsnorm
        check(fn(self._c, px, pr, pw, float(eps), po, pro, rows, hidden, dt, ctypes.byref(o), _stream_of(self, cuda)),
              what)
        del keep
        return out

    def algo(self, coll, count, dtype):
        """The algorithm auto would pick for a call of `coll` with this count and dtype name."""
        a = ctypes.c_int()
        check(lib.symcoll_coll_algo(self._c, COLLS[coll], int(count), DTYPES.index(dtype), ctypes.byref(a)))
        return ALGOS[a.value]


def _op(op):
    try:
        return OPS[op]
    except (KeyError, TypeError):
        raise InvalidArgumentError(f"unknown op {op!r} (one of {', '.join(OPS)})") from None


def _device_ordinal(device):
    if device is None or device == DEVICE_HOST or device == "cpu":
        return DEVICE_HOST
    if device == "cuda":
        import torch

        return torch.cuda.current_device()
    if hasattr(device, "index"):  # torch.device
        return DEVICE_HOST if device.type == "cpu" else (device.index or 0)
    return int(device)


def comm_of(handle):
    """The Comm behind a handle (what the torch ops take)."""
    try:
        return _handles[handle]
    except KeyError:
        raise InvalidArgumentError(f"no communicator with handle {handle}") from None


try:  # the torch custom ops, where torch is installed
    import torch  # noqa: F401

    from . import _torch as ops  # noqa: F401
except ImportError:
    ops = None
except OSError as e:  # torch is there but cannot load (a half-installed wheel)
    warnings.warn(f"symcoll: torch is installed but cannot be imported ({e}); the torch ops are off",
                  RuntimeWarning, stacklevel=2)
    ops = None
