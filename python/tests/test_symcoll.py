"""The symcoll Python package: CPU ranks with numpy (always), torch CPU tensors and custom ops
(where torch is installed), CUDA tensors, graphs and torch.compile (where a GPU is). Ranks are
processes (conftest.run_ranks), each job bounded in time."""
import importlib.util
import os

import numpy as np
import pytest

import symcoll
from conftest import run_ranks

HAVE_TORCH = importlib.util.find_spec("torch") is not None
NUMPY_DTYPES = ["float32", "float16", "float64", "int8", "uint8", "int32", "uint32", "int64", "uint64"]


def values(dtype, rank, n):
    """Exact inputs: small integers (non-negative for unsigned types)."""
    i = np.arange(n)
    v = (i * 7 + rank * 3) % 9 - (0 if dtype.startswith("uint") else 4)
    return v.astype(dtype)


# ---- one rank ------------------------------------------------------------------------------------

def test_version_and_errors():
    assert symcoll.version() >= (0, 3, 0)
    assert issubclass(symcoll.TimeoutError, TimeoutError)
    assert issubclass(symcoll.InvalidArgumentError, ValueError)
    with symcoll.Comm(0, 1, "py.solo") as comm:
        assert (comm.rank, comm.nranks, comm.device) == (0, 1, symcoll.DEVICE_HOST)
        x = np.arange(8, dtype=np.float32)
        with pytest.raises(symcoll.InvalidArgumentError):
            comm.all_reduce(x, op="mean")  # not an op of the library's (avg is)
        with pytest.raises(symcoll.InvalidArgumentError):
            comm.all_gather(x, np.empty(7, np.float32))
        with pytest.raises(symcoll.InvalidArgumentError):
            comm.all_reduce(np.arange(8, dtype=np.complex64))
        with pytest.raises(symcoll.UnsupportedError):  # an algorithm of another collective
            comm.all_gather(x, np.empty(8, np.float32), algo="twoshot")
        with pytest.raises(symcoll.InvalidArgumentError):  # overlapping, not in place: from C
            comm.all_reduce(x[:4], out=x[2:6])
        assert comm.algo("all_reduce", 1024, "fp32") in symcoll.ALGOS


def test_structs_match_the_library():
    """Every ctypes struct is the size its C *_init says (struct_size), and the enum lists come
    from the library itself."""
    import ctypes

    from symcoll import _lib

    for cls, init in ((_lib.Config, _lib.lib.symcoll_config_init), (_lib.CollOpts, _lib.lib.symcoll_coll_opts_init),
                      (_lib.MatmulOpts, _lib.lib.symcoll_matmul_opts_init),
                      (_lib.NormOpts, _lib.lib.symcoll_norm_opts_init),
                      (_lib.JobConfig, _lib.lib.symcoll_job_config_init)):
        x = cls()
        init(ctypes.byref(x))
        assert x.struct_size == ctypes.sizeof(cls), cls.__name__
    assert _lib.DTYPES[:3] == ["fp32", "fp16", "bf16"] and len(_lib.DTYPES) == 12
    assert _lib.ALGOS[0] == "auto" and "copy_engine" in _lib.ALGOS
    assert _lib.COLLS["all_reduce"] == 0 and _lib.OPS == {"sum": 0, "max": 1, "min": 2, "prod": 3, "avg": 4}
    assert _lib.ENGINES == {"auto": 0, "nccl": 1, "mpi": 2, "symcoll": 3}


def test_errors_match_the_library():
    """Every failing status of the library has its exception class, named after it."""
    from symcoll import _lib

    status = -1
    while not (text := _lib.lib.symcoll_status_string(status).decode()).startswith("SYMCOLL_ERR_UNKNOWN"):
        cls = _lib._ERRORS[status]
        words = text.split(":")[0][len("SYMCOLL_ERR_"):].split("_")
        assert cls.__name__.lower().startswith("".join(words).lower()[:5]), (status, text, cls.__name__)
        status -= 1
    assert status == -11 and len(_lib._ERRORS) == 10


# ---- collectives on CPU ranks, numpy ----------------------------------------------------------------

def _collectives_rank(rank, n):
    failures = []
    with symcoll.Comm.from_env() as comm:
        assert comm.rank == rank and comm.nranks == n
        for dt in NUMPY_DTYPES:
            for count in (1, 7, 1000, 65537):
                srcs = [values(dt, r, count * n) for r in range(n)]
                mine = srcs[rank]
                for op, f in (("sum", np.sum), ("max", np.max), ("min", np.min)):
                    want = f(np.stack([s[:count] for s in srcs]), axis=0).astype(dt)
                    x = mine[:count].copy()
                    comm.all_reduce(x, op)  # in place
                    if not np.array_equal(x, want):
                        failures.append(f"all_reduce {dt} {op} {count} in place")
                    out = np.empty(count, dt)
                    comm.reduce_scatter(mine, out, op)
                    want_rs = f(np.stack([s[rank * count:(rank + 1) * count] for s in srcs]), axis=0).astype(dt)
                    if not np.array_equal(out, want_rs):
                        failures.append(f"reduce_scatter {dt} {op} {count}")
                g = np.empty(count * n, dt)
                comm.all_gather(mine[:count], g)
                if not np.array_equal(g, np.concatenate([s[:count] for s in srcs])):
                    failures.append(f"all_gather {dt} {count}")
                root = count % n
                b = mine[:count].copy()
                comm.broadcast(b if rank == root else None, root, out=None if rank == root else b)
                if not np.array_equal(b, srcs[root][:count]):
                    failures.append(f"broadcast {dt} {count} root {root}")
                r = mine[:count].copy()
                comm.reduce(r, root, "max")  # in place; only the root's is written
                want_r = np.max(np.stack([s[:count] for s in srcs]), axis=0) if rank == root else mine[:count]
                if not np.array_equal(r, want_r):
                    failures.append(f"reduce {dt} {count} root {root}")
                a2a = np.empty(count * n, dt)
                comm.all_to_all(mine, a2a)
                if not np.array_equal(a2a, np.concatenate([s[rank * count:(rank + 1) * count] for s in srcs])):
                    failures.append(f"all_to_all {dt} {count}")
        # symmetric arrays: the zero-copy path, and all_gather in place inside one
        sym = comm.empty((4, 256), "float32")
        sym[:] = rank + 1
        comm.all_reduce(sym)
        if not (sym == n * (n + 1) / 2).all():
            failures.append("all_reduce of a symmetric array")
        g = comm.empty(n * 100, "int32")
        g[rank * 100:(rank + 1) * 100] = rank
        comm.all_gather(g[rank * 100:(rank + 1) * 100], g)
        if not np.array_equal(g, np.repeat(np.arange(n, dtype=np.int32), 100)):
            failures.append("all_gather in place in a symmetric array")
    return failures


@pytest.mark.parametrize("n", [1, 2, 3])
def test_collectives_numpy(n):
    assert run_ranks(_collectives_rank, n, timeout=120) == [[]] * n


def _scaled_rank(rank, n):
    """scale= (NCCL's PreMulSum): rank r's input times r + 1, then the sum; every form of scale."""
    failures = []
    with symcoll.Comm.from_env() as comm:
        x = np.arange(10 * n, dtype=np.float32) - 7
        want = x * sum(r + 1 for r in range(n))
        for form in (rank + 1, np.array([rank + 1], np.float32)):
            out = np.full_like(x, np.nan)
            comm.all_reduce(x, out=out, scale=form)
            if not np.array_equal(out, want):
                failures.append(f"all_reduce with scale {form!r}")
        part = np.full(10, np.nan, np.float32)
        comm.reduce_scatter(x, part, scale=rank + 1)
        if not np.array_equal(part, want[rank * 10:(rank + 1) * 10]):
            failures.append("reduce_scatter with a scale")
        got = np.full_like(x, np.nan)
        comm.reduce(x, root=n - 1, out=got, scale=rank + 1)
        if rank == n - 1 and not np.array_equal(got, want):
            failures.append("reduce with a scale")
        with pytest.raises(symcoll.InvalidArgumentError, match="scale"):
            comm.all_reduce(x, op="max", scale=2)
        with pytest.raises(symcoll.InvalidArgumentError, match="scale holds"):
            comm.all_reduce(x, scale=np.ones(2, np.float32))
        if not np.array_equal(x, np.arange(10 * n, dtype=np.float32) - 7):
            failures.append("the input changed")
    return failures


@pytest.mark.parametrize("n", [1, 2, 3])
def test_scaled_sum_numpy(n):
    assert run_ranks(_scaled_rank, n, timeout=120) == [[]] * n


# ---- collectives fused with a GEMM ------------------------------------------------------------------

def _mm_inputs(lib, rank, m, n, k, dtype):
    """Small integers, different on every rank: exact in fp32 whatever the order of the sums."""
    i, j = lib.meshgrid(lib.arange(m), lib.arange(k), indexing="ij")
    a = ((i * 7 + j * 3 + rank * 5) % 5 - 2).astype(dtype) if lib is np else ((i * 7 + j * 3 + rank * 5) % 5 - 2).to(dtype)
    j2, l2 = lib.meshgrid(lib.arange(k), lib.arange(n), indexing="ij")
    b = ((j2 * 5 + l2 * 11 + rank * 3) % 3 - 1)
    b = b.astype(dtype) if lib is np else b.to(dtype)
    return a, b


def _matmul_numpy_rank(rank, n):
    failures = []
    m, cols, k = 5, 7, 9
    with symcoll.Comm.from_env() as comm:
        for algo in ("overlap", "sequential", None):
            a, b = _mm_inputs(np, rank, m, cols, k, np.float32)
            out, a_out = np.full((m * n, cols), np.nan, np.float32), np.empty((m * n, k), np.float32)
            comm.all_gather_matmul(a, b, out, a_out=a_out, algo=algo)
            full = np.concatenate([_mm_inputs(np, r, m, cols, k, np.float32)[0] for r in range(n)])
            if not np.array_equal(out, full @ b) or not np.array_equal(a_out, full):
                failures.append(f"all_gather_matmul {algo}")
            a, b = _mm_inputs(np, rank, m * n, cols, k, np.float32)
            c = np.full((m, cols), np.nan, np.float32)
            comm.matmul_reduce_scatter(a, b, c, algo=algo)
            total = sum(x @ y for x, y in (_mm_inputs(np, r, m * n, cols, k, np.float32) for r in range(n)))
            if not np.array_equal(c, total[rank * m:(rank + 1) * m]):
                failures.append(f"matmul_reduce_scatter {algo}")
        with pytest.raises(symcoll.InvalidArgumentError):
            comm.matmul_reduce_scatter(np.ones((m * n + 1, k), np.float32) if n > 1 else np.ones((2, 3), np.float32),
                                       np.ones((k, cols), np.float32), np.empty((1, cols), np.float32))
    return failures


@pytest.mark.parametrize("n", [1, 2, 3])
def test_matmul_numpy(n):
    assert run_ranks(_matmul_numpy_rank, n, timeout=120, env={"OPENBLAS_NUM_THREADS": "1"}) == [[]] * n


def _torch_matmul(comm, rank, n, device):
    """The fused torch ops against gather-then-matmul, exact on small integers; opcheck at 1 rank."""
    import torch

    ops, h = torch.ops.symcoll, comm.handle
    for dt in (torch.float32, torch.bfloat16):
        a, b = (t.to(device) for t in _mm_inputs(torch, rank, 6, 10, 12, dt))
        full = torch.cat([_mm_inputs(torch, r, 6, 10, 12, dt)[0] for r in range(n)]).to(device)
        for algo in ("overlap", "sequential", "auto"):
            c, g = ops.all_gather_matmul(a, b, h, algo)
            assert torch.equal(g, full) and torch.equal(c, (full.float() @ b.float()).to(dt)), (dt, algo)
            a2, b2 = (t.to(device) for t in _mm_inputs(torch, rank, 6 * n, 10, 12, dt))
            tot = sum(x.float() @ y.float() for x, y in (_mm_inputs(torch, r, 6 * n, 10, 12, dt) for r in range(n)))
            got = ops.matmul_reduce_scatter(a2, b2, h, algo)
            assert torch.equal(got.float(), tot[rank * 6:(rank + 1) * 6].to(device)), (dt, algo)
    if n == 1:
        a, b = (t.to(device) for t in _mm_inputs(torch, 0, 4, 8, 16, torch.float32))
        torch.library.opcheck(ops.all_gather_matmul, (a, b, h, "overlap"))
        torch.library.opcheck(ops.matmul_reduce_scatter, (a, b, h, "sequential"))


# ---- groups, faults ---------------------------------------------------------------------------------

def _split_rank(rank, n):
    with symcoll.Comm.from_env() as comm:
        sub = comm.split(color=rank % 2, key=-rank)  # two groups at once, reverse order
        x = np.array([rank], dtype=np.int64)
        sub.all_reduce(x)
        got = (sub.rank, sub.nranks, int(x[0]))
        sub.barrier()
        sub.destroy()
        none = comm.split(symcoll.SPLIT_NOCOLOR if rank else 0)
        if none is not None:
            none.destroy()
        return got, none is None


def test_split():
    res = run_ranks(_split_rank, 4)
    assert [r[0] for r in res] == [(1, 2, 2), (1, 2, 4), (0, 2, 2), (0, 2, 4)]
    assert [r[1] for r in res] == [False, True, True, True]


def _mismatch_rank(rank, n):
    with symcoll.Comm.from_env() as comm:
        x = np.ones(8, np.float32)
        if rank == 1:
            with pytest.raises(symcoll.InvalidArgumentError):  # refused locally
                comm.all_reduce(x, out=np.empty(7, np.float32)[1:])
            y = np.ones(4, np.float32)
        else:
            y = x
        with pytest.raises(symcoll.MismatchError):  # 8 floats met 4: never wrong data
            comm.all_reduce(y)
        z = np.ones(16, np.float32)
        comm.all_reduce(z)  # in step again
        return float(z[0])


def test_mismatch_raises():
    assert run_ranks(_mismatch_rank, 2) == [2.0, 2.0]


def _meet_before_creation(rank, n):
    """Waits (up to 60 s) until every rank of the job got here: the 1 s timeout of the test
    below also bounds creation, and a loaded machine may start a rank's process later."""
    import tempfile
    import time

    d = os.path.join(tempfile.gettempdir(), "symcoll-test-" + os.environ["SYMCOLL_JOB_ID"])
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, str(rank)), "w").close()
    end = time.monotonic() + 60
    while len(os.listdir(d)) < n and time.monotonic() < end:
        time.sleep(0.01)
    return d


def _timeout_rank(rank, n):
    import shutil

    met = _meet_before_creation(rank, n)
    comm = symcoll.Comm.from_env()
    if rank == 0:
        shutil.rmtree(met, ignore_errors=True)  # every rank has listed it: creation met them all
        with pytest.raises(symcoll.TimeoutError):
            comm.all_reduce(np.ones(4, np.float32))
    else:
        import time

        time.sleep(2.5)  # never calls
    comm.destroy()
    return True


def test_timeout_raises():
    assert run_ranks(_timeout_rank, 2, env={"SYMCOLL_TIMEOUT_MS": "1s"}) == [True, True]


# ---- torch ------------------------------------------------------------------------------------------

def _torch_cpu_rank(rank, n):
    import torch

    ops = torch.ops.symcoll
    with symcoll.Comm.from_env() as comm:
        h = comm.handle
        for dt in (torch.float32, torch.bfloat16, torch.float16, torch.int32):
            x = torch.arange(64).to(dt) + rank
            want = (torch.arange(64) * n + n * (n - 1) // 2).to(dt)
            y = ops.all_reduce(x, "sum", h)
            assert torch.equal(y, want), (dt, y, want)
            ops.all_reduce_(x, "sum", h)
            assert torch.equal(x, want)
            g = torch.empty(64 * n, dtype=dt)
            ops.all_gather_into_tensor(g, torch.full((64,), rank, dtype=dt), h)
            assert torch.equal(g, torch.arange(n).repeat_interleave(64).to(dt))
            rs = torch.empty(8, dtype=dt)
            ops.reduce_scatter_tensor(rs, torch.ones(8 * n, dtype=dt), "sum", h)
            assert torch.equal(rs, torch.full((8,), n, dtype=dt))
            root = n - 1
            assert torch.equal(ops.broadcast(torch.full((16,), rank, dtype=dt), root, h), torch.full((16,), root, dtype=dt))
            r = torch.full((16,), rank + 1, dtype=dt)
            ops.reduce_(r, "prod", root, h)
            fact = torch.full((16,), float(np.prod(np.arange(1, n + 1))), dtype=dt)
            assert torch.equal(r, fact if rank == root else torch.full((16,), rank + 1, dtype=dt))
            a = ops.all_to_all(torch.arange(4 * n).to(dt) + 100 * rank, h)  # block j: 4j.. + 100 rank
            want_a = torch.cat([torch.arange(4 * rank, 4 * rank + 4) + 100 * p for p in range(n)]).to(dt)
            assert torch.equal(a, want_a), (dt, a, want_a)
            # scale= (PreMulSum): a number in the tensor's dtype, or a one-element tensor
            xs, total = torch.arange(32).to(dt) - 5, sum(r + 1 for r in range(n))
            for scale in (rank + 1, torch.tensor([rank + 1], dtype=dt)):
                assert torch.equal(comm.all_reduce(xs, out=torch.empty_like(xs), scale=scale),
                                   ((torch.arange(32) - 5) * total).to(dt)), (dt, scale)
        sym = comm.empty((16,), torch.bfloat16)  # a symmetric CPU tensor
        sym.fill_(rank)
        ops.all_reduce_(sym, "max", h)
        assert torch.equal(sym, torch.full((16,), n - 1, dtype=torch.bfloat16))

        @torch.compile(fullgraph=True, backend="eager" if os.environ.get("SYMCOLL_TEST_EAGER_COMPILE") else "inductor")
        def layer(a):
            return ops.all_reduce(a * 2, "sum", h) + 1

        out = layer(torch.ones(32))
        assert torch.equal(out, torch.full((32,), 2.0 * n + 1))
        _torch_matmul(comm, rank, n, "cpu")
        if n == 1:
            torch.library.opcheck(ops.all_reduce, (torch.randn(8), "sum", h))
            torch.library.opcheck(ops.all_reduce_, (torch.randn(8), "sum", h))
            torch.library.opcheck(ops.all_gather_into_tensor, (torch.empty(8), torch.randn(8), h))
            torch.library.opcheck(ops.reduce_scatter_tensor, (torch.empty(8), torch.randn(8), "sum", h))
            torch.library.opcheck(ops.broadcast, (torch.randn(8), 0, h))
            torch.library.opcheck(ops.broadcast_, (torch.randn(8), 0, h))
            torch.library.opcheck(ops.reduce_, (torch.randn(8), "avg", 0, h))
            torch.library.opcheck(ops.all_to_all, (torch.randn(8), h))
            torch.library.opcheck(ops.all_to_all_single, (torch.empty(8), torch.randn(8), h))
    return True


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("n", [1, 2])
def test_torch_cpu(n):
    assert run_ranks(_torch_cpu_rank, n, timeout=300) == [True] * n


def _torch_ops_heap_rank(rank, n):
    """The heap bytes in use (glibc's mallinfo2) across 20000 calls of each op that takes a str:
    torch 2.10's stable-ABI headers lost one allocation a call there (48 bytes of heap), which
    the compiled kernels must not inherit."""
    import ctypes

    import torch

    class MallInfo2(ctypes.Structure):
        _fields_ = [(f, ctypes.c_size_t) for f in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                     "keepcost")]

    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallinfo2"):
        return "skip: no glibc mallinfo2"
    libc.mallinfo2.restype = MallInfo2
    ops, calls = torch.ops.symcoll, 20000
    with symcoll.Comm.from_env() as comm:
        h = comm.handle
        x, out = torch.ones(8), torch.empty(8)
        x8, w8 = torch.ones(2, 8), torch.ones(8)
        cases = {"all_reduce_": lambda: ops.all_reduce_(x, "max", h),
                 "all_reduce": lambda: ops.all_reduce(x, "max", h),
                 "reduce_scatter_tensor": lambda: ops.reduce_scatter_tensor(out, x, "max", h),
                 "reduce_": lambda: ops.reduce_(x, "max", 0, h),
                 "reduce_scatter_rmsnorm": lambda: ops.reduce_scatter_rmsnorm(x8, None, w8, 1e-6, h, "pull")}
        grown = {}
        for name, call in cases.items():
            for _ in range(100):
                call()
            before = libc.mallinfo2().uordblks
            for _ in range(calls):
                call()
            grown[name] = libc.mallinfo2().uordblks - before
        kernels = "compiled" if "all_reduce_" in getattr(symcoll.ops, "COMPILED", ()) else "python"
        leaked = {k: v for k, v in grown.items() if v > 4 * calls}  # 4 bytes a call: noise, not a lost object
        assert not leaked, f"heap grew by these bytes over {calls} calls ({kernels} kernels): {leaked}"
    return True


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")
def test_torch_ops_keep_the_heap():
    result = run_ranks(_torch_ops_heap_rank, 1, timeout=300)[0]
    if isinstance(result, str):
        pytest.skip(result)
    assert result is True


def _torch_cuda_norms(comm, rank, n):
    """The fused norms on CUDA tensors: reduce_scatter_rmsnorm's rows equal all_reduce_rmsnorm's
    (the same kernels' epilogue), eager with both algorithms and replayed from a CUDA graph."""
    import torch

    ops, h, hid = torch.ops.symcoll, comm.handle, 1024
    i = torch.arange(4 * n * hid, device="cuda")
    x = ((i % 7) - 3 + rank).to(torch.bfloat16).reshape(4 * n, hid)  # small integers: exact sums
    res = (i % 5).to(torch.bfloat16).reshape(4 * n, hid)
    w = torch.linspace(0.5, 1.5, hid, device="cuda").to(torch.bfloat16)
    full, full_ro = ops.all_reduce_rmsnorm(x, res, w, 1e-6, h, "oneshot")
    mine = slice(4 * rank, 4 * rank + 4)
    for algo in ("pull", "sequential"):
        out, ro = ops.reduce_scatter_rmsnorm(x, res[mine], w, 1e-6, h, algo)
        assert torch.equal(out, full[mine]) and torch.equal(ro, full_ro[mine]), algo
    torch.cuda.synchronize()
    comm.barrier()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out_g, ro_g = ops.reduce_scatter_rmsnorm(x, res[mine], w, 1e-6, h, "pull")
    for _ in range(2):
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out_g, full[mine]) and torch.equal(ro_g, full_ro[mine])
    del graph
    # the static FP8 output: the scale's copy comes from the kernel (a float32 scale on the GPU)
    # or from the op's own conversion (float64, or on the CPU); read when the call runs (graphs)
    bits = lambda t: t.view(torch.uint8)  # noqa: E731
    quant = lambda s: (full.float() / s).clamp(-448, 448).to(torch.float8_e4m3fn)  # noqa: E731
    scale = torch.tensor([full.float().abs().max().item() / 300], device="cuda")  # some saturate
    for algo in ("auto", "oneshot", "twoshot", "lamport", "sequential"):
        for s in (scale, scale.double(), scale.cpu()):
            q, sc, ro = ops.all_reduce_rmsnorm_fp8(x, res, w, 1e-6, s, h, algo)
            assert sc.dtype == torch.float32 and sc.shape == (1,) and sc.device == x.device, (algo, s.dtype)
            assert torch.equal(sc, scale) and torch.equal(bits(q), bits(quant(scale))), (algo, s.dtype)
            assert torch.equal(ro, full_ro), (algo, s.dtype)
    torch.cuda.synchronize()
    comm.barrier()
    live = scale.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        q_g, sc_g, _ = ops.all_reduce_rmsnorm_fp8(x, res, w, 1e-6, live, h, "auto")
    for k in (1, 2):
        live.copy_(scale * k)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(sc_g, scale * k) and torch.equal(bits(q_g), bits(quant(scale * k))), k
    del graph
    comm.check()


def _torch_cuda_rank(rank, n):
    import torch

    torch.cuda.set_device(0 if torch.cuda.device_count() == 1 else rank)
    ops = torch.ops.symcoll
    with symcoll.Comm.from_env(device="cuda" if torch.cuda.device_count() > 1 else 0) as comm:
        h = comm.handle
        x = (torch.arange(4096, device="cuda") % 16 + rank).to(torch.bfloat16)  # bf16 arange rounds past 256
        want = (torch.arange(4096, device="cuda") % 16 * n + n * (n - 1) // 2).to(torch.bfloat16)
        assert torch.equal(ops.all_reduce(x, "sum", h), want)
        g = torch.empty(1024 * n, device="cuda", dtype=torch.float16)
        ops.all_gather_into_tensor(g, torch.full((1024,), rank, device="cuda", dtype=torch.float16), h)
        assert torch.equal(g, torch.arange(n, device="cuda").repeat_interleave(1024).half())
        rs = torch.empty(512, device="cuda")
        ops.reduce_scatter_tensor(rs, torch.ones(512 * n, device="cuda"), "sum", h)
        assert torch.equal(rs, torch.full((512,), float(n), device="cuda"))
        # symmetric CUDA tensor: zero-copy input, and its device view for fused kernels
        sym = comm.empty(2048, torch.float32)
        sym.fill_(rank + 1)
        ops.all_reduce_(sym, "sum", h)
        assert torch.equal(sym, torch.full_like(sym, n * (n + 1) / 2))
        view = comm.device_view(sym)
        assert view.nranks == n and len(view.buffer_ptrs) == n and view.buffer_ptrs[rank] == sym.data_ptr()
        # CUDA graph: capture once, replay with new inputs
        inp = torch.zeros(8192, device="cuda")
        torch.cuda.synchronize()
        comm.barrier()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = ops.all_reduce(inp, "sum", h)
        for k in range(3):
            inp.fill_(k + rank)
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(out, torch.full_like(out, k * n + n * (n - 1) / 2))
        comm.check()

        @torch.compile(mode="reduce-overhead", fullgraph=True)
        def layer(a):
            return ops.all_reduce(a * 2, "sum", h) + 1

        for _ in range(3):
            o = layer(torch.ones(256, device="cuda"))
        torch.cuda.synchronize()
        assert torch.equal(o, torch.full_like(o, 2.0 * n + 1))
        comm.check()
        _torch_cuda_norms(comm, rank, n)
        torch.cuda.synchronize()
        comm.barrier()  # the fused ops' first use sets up cuBLASLt: no peer kernel waits meanwhile
        _torch_matmul(comm, rank, n, "cuda")
        torch.cuda.synchronize()
        comm.check()
    return True


def _cuda_available():
    if not HAVE_TORCH:
        return False
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(not _cuda_available(), reason="no GPU on this machine (or no torch)")
@pytest.mark.parametrize("n", [1, 2, 4])
def test_torch_cuda(n):
    import torch

    if n > 1 and torch.cuda.device_count() < n and not os.environ.get("CUDA_MPS_PIPE_DIRECTORY"):
        pytest.skip("several processes on one GPU need MPS (scripts/device-check starts it)")
    assert run_ranks(_torch_cuda_rank, n, timeout=300) == [True] * n


def _pool_rank_setup(rank):
    """A rank's GPU communicator (a GPU a rank, or every rank on GPU 0 under MPS) and a layer
    that sums its 256 inputs into each of its 512 outputs."""
    import torch

    torch.cuda.set_device(0 if torch.cuda.device_count() == 1 else rank)
    comm = symcoll.Comm.from_env(device="cuda" if torch.cuda.device_count() > 1 else 0)
    lin = torch.nn.Linear(256, 512, device="cuda")
    with torch.no_grad():
        lin.weight.fill_(1.0)
        lin.bias.zero_()
    return comm, lin


def _mem_pool_rank(rank, n):
    import torch

    ops = torch.ops.symcoll
    comm, lin = _pool_rank_setup(rank)
    with comm:
        h = comm.handle
        x = torch.full((64, 256), float(rank + 1), device="cuda")
        assert not comm.is_symmetric(lin(x))
        with comm.mem_pool():
            y = lin(x)  # an unmodified layer's output
        assert comm.is_symmetric(y), "a tensor allocated inside the pool is not symmetric"
        want = torch.full_like(y, 256.0 * n * (n + 1) / 2)
        assert torch.equal(ops.all_reduce(y, "sum", h), want)  # zero-copy input
        ops.all_reduce_(y, "sum", h)
        assert torch.equal(y, want)
        with comm.mem_pool():  # the same pool again; a block of its own (past torch's small pool)
            z = torch.empty(3 * 1024 * 1024 + 7, device="cuda")
            g = torch.empty(n * 1000, device="cuda", dtype=torch.bfloat16)
        assert comm.is_symmetric(z) and comm.is_symmetric(g)
        z.fill_(rank)
        assert torch.equal(ops.all_reduce(z, "sum", h), torch.full_like(z, n * (n - 1) / 2))
        ops.all_gather_into_tensor(g, torch.full((1000,), rank, device="cuda", dtype=torch.bfloat16), h)
        assert torch.equal(g, torch.arange(n, device="cuda").repeat_interleave(1000).bfloat16())
        del y, z, g

        # A CUDA graph over the pool's tensors: static buffers allocated in the pool (as engines
        # keep their graphs' inputs and outputs), the layer and the reduction captured (out of
        # place: the pooled input read zero-copy; in place too); replays see new inputs. (No
        # autograd: out= refuses inputs that require grad.)
        with comm.mem_pool():
            xs = torch.empty(64, 256, device="cuda")
            yg = torch.empty(64, 512, device="cuda")
        with torch.no_grad():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up off the capture, as torch asks
                torch.addmm(lin.bias, xs, lin.weight.t(), out=yg)
                ops.all_reduce_(yg, "sum", h)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                torch.addmm(lin.bias, xs, lin.weight.t(), out=yg)
                zg = ops.all_reduce(yg, "sum", h)
                ops.all_reduce_(yg, "sum", h)
        assert comm.is_symmetric(yg)
        for k in (1, 3):
            xs.fill_(float(k * (rank + 1)))
            graph.replay()
            want = torch.full_like(yg, 256.0 * k * n * (n + 1) / 2)
            assert torch.equal(zg, want) and torch.equal(yg, want), f"graph replay {k}"
        del graph, yg, zg

        # torch.compile (fullgraph) of a layer and the op: the compiled code's buffers come from
        # the pool too, through AOTAutograd alone and through Inductor's generated code (where
        # triton is there to generate it).
        def block(t):
            return ops.all_reduce(lin(t), "sum", h)

        backends = ["aot_eager"] + (["inductor"] if importlib.util.find_spec("triton") else [])
        for backend in backends:
            torch._dynamo.reset()
            compiled = torch.compile(block, fullgraph=True, backend=backend)
            with torch.no_grad(), comm.mem_pool():
                yc = compiled(x)
            assert comm.is_symmetric(yc), f"torch.compile ({backend})'s output inside the pool is not symmetric"
            want = torch.full_like(yc, 256.0 * n * (n + 1) / 2)
            assert torch.equal(yc, want), f"torch.compile ({backend}) with the pool"
    return True


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")
def test_torch_mem_pool_refusals():
    """comm.mem_pool()'s refusals that need no GPU: CPU ranks (torch has no pluggable allocator
    for CPU tensors) and torch.cuda.graph's arguments without a graph to capture."""
    with symcoll.Comm(0, 1, "py.pool-refusals") as comm:
        with pytest.raises(symcoll.SymcollError, match="CPU ranks"):
            with comm.mem_pool():
                pass
        with pytest.raises(TypeError, match="capture_error_mode without graph="):
            with comm.mem_pool(capture_error_mode="relaxed"):
                pass


@pytest.mark.skipif(not _cuda_available(), reason="no GPU on this machine (or no torch)")
@pytest.mark.parametrize("n", [1, 2])
def test_torch_mem_pool(n):
    """comm.mem_pool(): tensors PyTorch allocates inside it (a Linear's output, a CUDA graph's
    static buffers, torch.compile's buffers) are symmetric and take the zero-copy path; results
    exact."""
    import torch

    if not hasattr(torch.cuda, "use_mem_pool"):
        pytest.skip(f"torch {torch.__version__} has no torch.cuda.use_mem_pool (2.8+)")
    if n > 1 and torch.cuda.device_count() < n and not os.environ.get("CUDA_MPS_PIPE_DIRECTORY"):
        pytest.skip("several processes on one GPU need MPS (scripts/device-check starts it)")
    assert run_ranks(_mem_pool_rank, n, timeout=300) == [True] * n


def _pool_capture_rank(rank, n):
    import torch

    ops = torch.ops.symcoll
    comm, lin = _pool_rank_setup(rank)
    with comm:
        h = comm.handle
        x = torch.empty(64, 256, device="cuda")
        with torch.no_grad():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up off the capture, as torch asks
                ops.all_reduce(lin(x), "sum", h)
            torch.cuda.current_stream().wait_stream(side)
            # A graph captured into the pool: the layer's output is allocated during capture
            # (from the graph's pool, here symcoll's), so the captured reduction reads it in place.
            graph = torch.cuda.CUDAGraph()
            with comm.mem_pool(graph=graph):
                y = lin(x)
                z = ops.all_reduce(y, "sum", h)
        assert comm.is_symmetric(y), "a tensor allocated while capturing into the pool is not symmetric"
        for k in (1, 3):
            x.fill_(float(k * (rank + 1)))
            graph.replay()
            assert torch.equal(z, torch.full_like(z, 256.0 * k * n * (n + 1) / 2)), f"replay {k}"
        del graph, y, z
    return True


@pytest.mark.skipif(not _cuda_available(), reason="no GPU on this machine (or no torch)")
@pytest.mark.parametrize("n", [1, 2])
def test_torch_mem_pool_capture(n):
    """comm.mem_pool(graph=g) captures g into the pool: what the graph allocates while it is
    captured is symmetric, and replays reduce it in place."""
    import torch

    if not hasattr(torch.cuda, "use_mem_pool"):
        pytest.skip(f"torch {torch.__version__} has no torch.cuda.use_mem_pool (2.8+)")
    if n > 1 and torch.cuda.device_count() < n and not os.environ.get("CUDA_MPS_PIPE_DIRECTORY"):
        pytest.skip("several processes on one GPU need MPS (scripts/device-check starts it)")
    assert run_ranks(_pool_capture_rank, n, timeout=300) == [True] * n


def _lookup_rank(rank, n):
    import numpy as np

    with symcoll.Comm.from_env() as comm:
        a = comm.empty(100, "float32")
        assert comm.is_symmetric(a) and comm.is_symmetric(a[10:20])
        assert not comm.is_symmetric(np.zeros(100, dtype=np.float32))
        if HAVE_TORCH:  # CPU ranks have no pool: torch has no pluggable allocator for CPU tensors
            with pytest.raises(symcoll.SymcollError, match="CPU ranks"):
                with comm.mem_pool():
                    pass
    return True


@pytest.mark.parametrize("n", [1, 2])
def test_is_symmetric(n):
    assert run_ranks(_lookup_rank, n) == [True] * n
