"""A randomized differential stream through the package: hundreds of calls (every collective,
the GEMM operations, every algorithm and auto, every dtype the array library has, odd counts,
plain and symmetric buffers, in and out of place, split groups and groups of groups running at
once), back to back with no barrier between them, every result compared with a reference
computed independently with numpy. The ranks draw the same shapes from one seed (printed in a
failure: SYMCOLL_STREAM_SEED=S replays it); inputs are small integers, fresh for every call and
different on every rank and group, so results are exact. CPU ranks with numpy always; CUDA
tensors where a GPU and torch are (SYMCOLL_STREAM_CUDA=1 asks for them)."""
import os
import random

import numpy as np
import pytest

import symcoll
from conftest import run_ranks

CALLS = int(os.environ.get("SYMCOLL_STREAM_CALLS", "150"))
DTYPES = ["float32", "float16", "float64", "int8", "uint8", "int32", "uint32", "int64", "uint64"]
ALGOS = {"all_reduce": [None, "oneshot", "twoshot", "oneshot_db", "lamport"],
         "all_gather": [None, "pull", "push", "lamport", "copy_engine"],
         "reduce_scatter": [None, "pull", "lamport"],
         "gemm": [None, "overlap", "sequential"]}


def inputs(dtype, seed, rank, count):
    """Small integers for rank `rank` (non-negative for unsigned types)."""
    i = np.arange(count, dtype=np.int64)
    v = (i * 7 + rank * 13 + seed) % 9 - (0 if dtype.startswith("uint") else 4)
    return v.astype("float32" if dtype == "bfloat16" else dtype)  # numpy has no bfloat16


def gemm_inputs(seed, rank, rows, k, cols):
    i, j = np.meshgrid(np.arange(rows), np.arange(k), indexing="ij")
    a = ((i * 7 + j * 13 + rank * 5 + seed) % 3 - 1).astype(np.float32)
    j2, l2 = np.meshgrid(np.arange(k), np.arange(cols), indexing="ij")
    b = ((j2 * 5 + l2 * 11 + rank * 3 + seed // 3) % 3 - 1).astype(np.float32)
    return a, b


class Arrays:
    """Where a rank's buffers live: numpy arrays (CPU ranks) or CUDA tensors."""

    def __init__(self, cuda):
        self.cuda = cuda
        if cuda:
            import torch

            self.torch = torch

    def dtypes(self):
        return ["float32", "float16", "bfloat16", "int8", "uint8", "int32", "int64", "float64"] if self.cuda else DTYPES

    def put(self, x, dtype):
        if not self.cuda:
            return np.ascontiguousarray(x.astype(dtype))
        t = self.torch.from_numpy(np.ascontiguousarray(x.astype("float32" if dtype == "bfloat16" else dtype)))
        return t.to(device="cuda", dtype=getattr(self.torch, dtype))

    def empty(self, n, dtype):
        if not self.cuda:
            return np.full(n, 0x5A if not dtype.startswith("float") else np.nan, dtype=dtype)
        return self.torch.full((n,), 77, dtype=getattr(self.torch, dtype), device="cuda")

    def get(self, x):
        if not self.cuda:
            return np.asarray(x)
        return x.float().cpu().numpy() if x.dtype == self.torch.bfloat16 else x.cpu().numpy()

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()


def want_reduce(op, parts, dtype):
    f = {"sum": np.sum, "max": np.max, "min": np.min}[op]
    acc = f(np.stack([p.astype(np.float64 if dtype.startswith("float") or dtype == "bfloat16" else dtype)
                      for p in parts]), axis=0)
    return acc.astype("float32" if dtype == "bfloat16" else dtype)


def _stream_rank(rank, n, seed, cuda):
    arr = Arrays(cuda)
    shared, own = random.Random(seed), random.Random(seed * 7919 + rank)
    failures = []
    device = None
    if cuda:  # the local rank's GPU; ranks share GPU 0 where there are fewer GPUs (emulation)
        import torch

        device = rank if torch.cuda.device_count() >= n else 0
        torch.cuda.set_device(device)  # where Arrays puts the tensors
    with symcoll.Comm.from_env(device=device) as world:
        gemm = True  # where the GEMM library is missing, every rank's probe says so
        try:
            one = arr.put(np.ones((1, 1)), "float32")
            world.all_gather_matmul(one, one, arr.empty(n, "float32").reshape(n, 1))
        except symcoll.UnsupportedError:
            gemm = False
        levels = [(world, 0)]
        calls = 0
        while calls < CALLS and not failures:
            if shared.random() < 0.1 or len(levels) == 1:  # new groups: every rank at once
                for c, _ in levels[1:][::-1]:
                    c.barrier()
                    c.destroy()
                perm = list(range(n))
                shared.shuffle(perm)
                groups = shared.randint(1, min(n, 3))
                color = perm[rank] % groups
                g1 = world.split(color, key=-perm[rank])
                g2 = g1.split(g1.rank % 2, key=g1.rank)
                levels = [(world, 0), (g1, 100 + color), (g2, 1000 + 100 * color + g1.rank % 2)]
            pending = []
            for _ in range(shared.randint(1, 8)):
                comm, tag = levels[shared.randrange(len(levels))]
                kind = shared.choice(["all_reduce"] * 3 + ["all_gather"] * 2 + ["reduce_scatter"] * 2 +
                                     (["all_gather_matmul", "matmul_reduce_scatter"] if gemm else []))
                s = shared.randrange(1 << 20) ^ tag
                g, r = comm.nranks, comm.rank
                if kind in ("all_gather_matmul", "matmul_reduce_scatter"):
                    dt = shared.choice(["float32", "float16"] + (["bfloat16"] if cuda else []))
                    m, k, cols = shared.choice([1, 3, 17]), shared.randint(1, 40), shared.randint(1, 33)
                    algo = shared.choice(ALGOS["gemm"])
                    rows = m * g
                    if kind == "all_gather_matmul":
                        a, b = gemm_inputs(s, r, m, k, cols)
                        out = arr.empty(rows * cols, dt).reshape(rows, cols)
                        comm.all_gather_matmul(arr.put(a, dt), arr.put(b, dt), out, algo=algo)
                        full = np.concatenate([gemm_inputs(s, q, m, k, cols)[0] for q in range(g)])
                        pending.append((kind, dt, out, (full @ b).astype("float32" if dt == "bfloat16" else dt)))
                    else:
                        a, b = gemm_inputs(s, r, rows, k, cols)
                        out = arr.empty(m * cols, dt).reshape(m, cols)
                        comm.matmul_reduce_scatter(arr.put(a, dt), arr.put(b, dt), out, algo=algo)
                        tot = sum(x @ y for x, y in (gemm_inputs(s, q, rows, k, cols) for q in range(g)))
                        pending.append((kind, dt, out, tot[r * m:(r + 1) * m].astype("float32" if dt == "bfloat16" else dt)))
                    calls += 1
                    continue
                dt = shared.choice(arr.dtypes())
                count = shared.choice([1, 2, 7, 64, 1000, 4099, 65537])
                op = shared.choice(["sum", "max", "min"])
                algo = shared.choice(ALGOS[kind])
                symmetric = shared.random() < 0.3
                in_place = shared.random() < 0.3
                off = own.randrange(4)  # plain buffers: offsets that differ between ranks
                parts = [inputs(dt, s, q, count * (g if kind == "reduce_scatter" else 1)) for q in range(g)]
                if symmetric and not (cuda and dt == "bfloat16"):
                    x = comm.empty(len(parts[r]), dt if not cuda else getattr(arr.torch, dt))
                    x[:] = arr.put(parts[r], dt) if cuda else parts[r]
                else:
                    buf = arr.put(np.concatenate([np.zeros(off, parts[r].dtype), parts[r]]), dt)
                    x = buf[off:]
                try:
                    if kind == "all_reduce":
                        out = x if in_place else arr.empty(count, dt)
                        comm.all_reduce(x, op, out=out, algo=algo)
                        want = want_reduce(op, parts, dt)
                    elif kind == "all_gather":
                        out = arr.empty(count * g, dt)
                        comm.all_gather(x, out, algo=algo)
                        want = np.concatenate(parts).astype("float32" if dt == "bfloat16" else dt)
                    else:
                        out = arr.empty(count, dt)
                        comm.reduce_scatter(x, out, op, algo=algo)
                        want = want_reduce(op, [p[r * count:(r + 1) * count] for p in parts], dt)
                except symcoll.UnsupportedError:  # an algorithm this communicator does not run: everywhere alike
                    continue
                pending.append((f"{kind} {dt} {op} count {count} {algo or 'auto'} "
                                f"{'symmetric' if symmetric else 'plain'}{' in place' if in_place else ''} "
                                f"(group of {g})", dt, out, want))
                calls += 1
            arr.sync()
            for what, dt, out, want in pending:
                got = arr.get(out).reshape(want.shape)
                if not np.array_equal(got, want):
                    bad = np.flatnonzero(got.ravel() != want.ravel())
                    failures.append(f"seed {seed} rank {rank}: {what}: {bad.size} wrong, first at {bad[0]}: "
                                    f"got {got.ravel()[bad[0]]}, want {want.ravel()[bad[0]]}")
                    break
        for c, _ in levels[1:][::-1]:
            c.barrier()
            c.destroy()
    return failures


def _cpu_rank(rank, n):
    return _stream_rank(rank, n, int(os.environ["SYMCOLL_STREAM_SEED"]), cuda=False)


def _cuda_rank(rank, n):
    return _stream_rank(rank, n, int(os.environ["SYMCOLL_STREAM_SEED"]), cuda=True)


def _seed():
    return int(os.environ.get("SYMCOLL_STREAM_SEED") or random.randrange(1 << 30))


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_stream_cpu(n):
    seed = _seed()
    res = run_ranks(_cpu_rank, n, timeout=240,
                    env={"SYMCOLL_STREAM_SEED": str(seed), "OPENBLAS_NUM_THREADS": "1", "SYMCOLL_TIMEOUT_MS": "60000"})
    assert res == [[]] * n, f"seed {seed} (SYMCOLL_STREAM_SEED={seed} replays it): {res}"


def _have_cuda():
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.mark.parametrize("n", [1, 2, 4])
def test_stream_cuda(n):
    if not _have_cuda():
        pytest.skip("no GPU (or no torch) here")
    if n > 1 and not os.environ.get("CUDA_MPS_PIPE_DIRECTORY") and os.environ.get("SYMCOLL_STREAM_CUDA") != "1":
        pytest.skip("several ranks on one GPU need MPS (scripts/device-check python starts it)")
    seed = _seed()
    res = run_ranks(_cuda_rank, n, timeout=300, env={"SYMCOLL_STREAM_SEED": str(seed), "SYMCOLL_TIMEOUT_MS": "20000"})
    assert res == [[]] * n, f"seed {seed} (SYMCOLL_STREAM_SEED={seed} replays it): {res}"
