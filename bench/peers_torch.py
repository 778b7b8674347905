#!/usr/bin/env python3
"""PyTorch peers of symcoll-bench: torch symmetric memory (all_reduce: one-shot / two-shot;
all_gather and reduce_scatter: its low-contention copy-engine ops and reduce_scatter_out) and
torch.distributed (NCCL), timed like symcoll-bench's GPU columns (CUDA-graph replays of -n
calls, device events, median of -r replays) and written in its CSV columns, so that
`symcoll-bench --merge` joins both into one table.

    python3 bench/peers_torch.py -b 8K -e 128M -f 2 -d bf16 --csv torch.csv          # world = 1
    python3 bench/peers_torch.py --coll all_gather ...                                  # also reduce_scatter
    python3 bench/peers_torch.py --coll all_gather_matmul --shapes all                 # also matmul_reduce_scatter
    python3 bench/peers_torch.py --coll all_reduce_rmsnorm                             # rows x hidden table
    python3 bench/peers_torch.py --coll eager_ops -d bf16                              # a call's cost, eager
The symcoll_py columns run symcoll through its Python package (PYTHONPATH=python, SYMCOLL_LIB=
build/lib/libsymcoll.so), so the package's cost is measured against symcoll-bench's C columns:
symcoll_py in a CUDA graph, symcoll_py_eager as eager launches (their difference is the
package's host cost per call).
Sizes are nccl-tests': all_gather's output, reduce_scatter's input.
    torchrun --nproc-per-node 8 bench/peers_torch.py -b 8K -e 128M --csv torch.csv   # 8 GPUs
Multicast stays off: TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NCCL_NVLS_ENABLE=0 are set here.
"""
import argparse
import os
import statistics
import sys

os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NCCL_NVLS_ENABLE"] = "0"

try:  # symcoll through its Python package, when it can be imported
    import symcoll  # noqa: E402
except Exception:  # noqa: BLE001
    symcoll = None
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed._symmetric_memory as symm_mem  # noqa: E402


def size(s):
    m = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    return int(float(s[:-1]) * m[s[-1].lower()]) if s[-1].lower() in m else int(s)


def timed(fn, iters, reps, warmup=3, graph=True):
    """Median us per call: CUDA-graph replays of iters calls (eager launches of iters calls
    for ops that cannot be captured), device events, the slowest rank's median."""
    s = torch.cuda.current_stream()
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    g = None
    if graph:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(iters):
                fn()
        g.replay()
        torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        if dist.get_world_size() > 1:
            dist.barrier()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(s)
        if g is not None:
            g.replay()
        else:
            for _ in range(iters):
                fn()
        e1.record(s)
        e1.synchronize()
        out.append(e0.elapsed_time(e1) * 1e3 / iters)
    t = torch.tensor([statistics.median(out)], device="cuda" if dist.get_backend() == "nccl" else "cpu")
    if dist.get_world_size() > 1:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def eager_ops(a, dtype, rank, world, group, sc):
    """What a call costs from PyTorch, eager: the host clock around --calls back-to-back calls and
    the synchronisation after them (so the GPU's work bounds it too), best of -r runs, for
    PyTorch's one_shot_all_reduce, symcoll's torch ops (compiled or Python kernels: the
    package's COMPILED set says) and the Python method."""
    import time

    if sc is None:
        print("# eager_ops: the symcoll package is not importable here", file=sys.stderr)
        return 1
    compiled = sorted(getattr(symcoll.ops, "COMPILED", ()))
    kernels = "compiled" if "all_reduce_" in compiled else "python"
    # torch_kernel (one elementwise kernel into an existing tensor) and torch_copy (y.copy_(x)) are
    # the floors of any eager op: a launch, and the copy a one-rank out-of-place call makes;
    # torch_clone (x.clone(): a new tensor and that copy) the floor of an op returning a new one.
    # symcoll_method_pool: the method on tensors torch allocated inside comm.mem_pool() (symmetric:
    # no copy into the workspace), against symcoll_method on plain tensors. torch_nccl:
    # dist.all_reduce in place through ProcessGroupNCCL (where the job's group is NCCL's).
    cols = ["torch_one_shot", "torch_nccl", "torch_kernel", "torch_copy", "torch_clone", "symcoll_op_", "symcoll_op",
            "symcoll_method_", "symcoll_method", "symcoll_method_pool"]
    if rank == 0:
        print(f"# torch {torch.__version__}, world {world}, {a.d}, eager, host clock over {a.calls} calls + sync, "
              f"best of {a.r}; symcoll torch kernels: {kernels}; op_ and method_ in place, op and method out of place; "
              f"a ratio ending in k is against torch_kernel (where torch's symmetric memory cannot run)")
        print(f"{'elements':>10} " + " ".join(f"{c:>15}" for c in cols) +
              f" {'op_/one_shot':>13} {'method_/one_shot':>17} {'method/one_shot':>16}")
    rows = []
    for n in (int(c) for c in a.counts.split(",")):
        try:  # torch's symmetric memory refuses ranks sharing a GPU (PEERS_ONE_GPU): no column then
            inp = symm_mem.empty(n, dtype=dtype, device="cuda")
            symm_mem.rendezvous(inp, group)
            inp.zero_()
        except RuntimeError as e:
            print(f"# torch symmetric memory at {n} elements: {str(e).splitlines()[0][:120]}", file=sys.stderr)
            inp = None
        x, y = torch.zeros(n, dtype=dtype, device="cuda"), torch.empty(n, dtype=dtype, device="cuda")
        h = sc.handle
        try:
            with sc.mem_pool():
                xp, yp = torch.zeros(n, dtype=dtype, device="cuda"), torch.empty(n, dtype=dtype, device="cuda")
        except Exception as e:  # noqa: BLE001
            print(f"# mem_pool: {e}", file=sys.stderr)
            xp = yp = None
        xn = torch.zeros(n, dtype=dtype, device="cuda")
        fns = {"torch_one_shot": lambda: torch.ops.symm_mem.one_shot_all_reduce(inp, "sum", group),
               "torch_nccl": (lambda: dist.all_reduce(xn)) if dist.get_backend() == "nccl" else None,
               "torch_kernel": lambda: torch.neg(x, out=y),
               "torch_copy": lambda: y.copy_(x),
               "torch_clone": lambda: x.clone(),
               "symcoll_op_": lambda: torch.ops.symcoll.all_reduce_(x, "sum", h),
               "symcoll_op": lambda: torch.ops.symcoll.all_reduce(x, "sum", h),
               "symcoll_method_": lambda: sc.all_reduce(x),
               "symcoll_method": lambda: sc.all_reduce(x, out=y),
               "symcoll_method_pool": lambda: sc.all_reduce(xp, out=yp)}
        res = {}
        for c, fn in fns.items():
            if fn is None:
                res[c] = None
                continue
            try:
                for _ in range(50):
                    fn()
                torch.cuda.synchronize()
                best = float("inf")
                for _ in range(a.r):
                    if world > 1:
                        dist.barrier()
                    t0 = time.perf_counter()
                    for _ in range(a.calls):
                        fn()
                    torch.cuda.synchronize()
                    best = min(best, (time.perf_counter() - t0) / a.calls * 1e6)
                t = torch.tensor([best], device="cuda" if dist.get_backend() == "nccl" else "cpu")
                if world > 1:
                    dist.all_reduce(t, op=dist.ReduceOp.MAX)
                res[c] = t.item()
            except Exception as e:  # noqa: BLE001
                print(f"# {c} at {n} elements: {e}", file=sys.stderr)
                res[c] = None
        rows.append((n, res))
        if rank == 0:
            one = res["torch_one_shot"]
            ratio = lambda v: f"{v / one:.2f}" if v is not None and one else "-"  # noqa: E731
            if one is None:  # no PyTorch peer here: the launch floor instead
                one = res["torch_kernel"]
                ratio = lambda v: f"{v / one:.2f}k" if v is not None and one else "-"  # noqa: E731
            print(f"{n:>10} " + " ".join(f"{res[c]:>15.2f}" if res[c] is not None else f"{'-':>15}" for c in cols) +
                  f" {ratio(res['symcoll_op_']):>13} {ratio(res['symcoll_method_']):>17} {ratio(res['symcoll_method']):>16}")
    if a.csv and rank == 0:
        with open(a.csv, "w") as f:
            f.write("elements,nranks,kernels," + ",".join(f"{c}_us" for c in cols) + "\n")
            for n, res in rows:
                f.write(f"{n},{world},{kernels}," + ",".join("" if res[c] is None else f"{res[c]:.3f}" for c in cols)
                        + "\n")
    return 0


def start_job():
    """(rank, world, local GPU, symcoll Comm or None) of a job under torch.distributed.run, its
    process group made. PEERS_ONE_GPU=1: every rank on GPU 0 (processes under MPS, EMULATION);
    NCCL refuses ranks sharing a GPU, so the job's own group is gloo then (NCCL columns are left
    out)."""
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    one_gpu = os.environ.get("PEERS_ONE_GPU") == "1"
    if one_gpu:
        local = 0
    torch.cuda.set_device(local)
    if world == 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    if one_gpu:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    else:
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", local))
    sc = None
    if symcoll is not None:
        try:
            sc = symcoll.Comm.from_process_group(dist.group.WORLD, device=local)
        except Exception as e:  # noqa: BLE001
            print(f"# symcoll package: {e}", file=sys.stderr)
    return rank, world, local, sc


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-b", default="8K")
    p.add_argument("-e", default="2M")
    p.add_argument("-f", type=int, default=2)
    p.add_argument("-d", default="bf16", choices=["bf16", "fp16", "fp32"])
    p.add_argument("-n", type=int, default=20)
    p.add_argument("-r", type=int, default=20)
    p.add_argument("--csv")
    p.add_argument("--coll", default="all_reduce",
                   choices=["all_reduce", "all_gather", "reduce_scatter", "all_gather_matmul", "matmul_reduce_scatter",
                            "all_reduce_rmsnorm", "eager_ops"])
    p.add_argument("--counts", default="1024,65536", help="eager_ops: elements per call")
    p.add_argument("--calls", type=int, default=2000, help="eager_ops: calls per timed run")
    p.add_argument("--shapes", default="all", help="helion, kraken, all, or M,N,K (per-rank M)")
    p.add_argument("--fp8", choices=["static", "rows"],
                   help="all_reduce_rmsnorm: the e4m3 output with a static scale or a scale per row")
    a = p.parse_args()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[a.d]
    es = torch.tensor([], dtype=dtype).element_size()
    rank, world, _, sc = start_job()
    group = dist.group.WORLD.group_name
    if hasattr(symm_mem, "enable_symm_mem_for_group"):
        try:
            symm_mem.enable_symm_mem_for_group(group)
        except Exception:
            pass
    if a.coll == "all_reduce_rmsnorm":
        return norm_colls(a, dtype, rank, world, group, sc)
    if a.coll == "eager_ops":
        return eager_ops(a, dtype, rank, world, group, sc)
    if a.coll.endswith("matmul") or a.coll.startswith("matmul"):
        return matmul_colls(a, dtype, rank, world, group, sc)
    if a.coll != "all_reduce":
        return other_colls(a, dtype, es, rank, world, group)
    # symcoll_c: the method captured in the graph, i.e. the C library's call alone (the method's
    # Python runs at capture only): the op's in-graph cost against the library's, one harness.
    # mul_ / mul_symcoll_c: a kernel writing the input (x.mul_(1)) alone, and followed by the
    # method's call, in one graph: what the call adds between two kernels (a copy engine's
    # node there costs another engine's hand-over, which a graph of the calls alone hides).
    cols = ["torch_one_shot", "torch_two_shot", "torch_nccl", "symcoll_c", "symcoll_py", "symcoll_py_eager", "mul_",
            "mul_symcoll_c"]
    rows = []
    if rank == 0:
        print(f"# torch {torch.__version__}, world {world}, {a.d}, graph replays of {a.n} calls, median of {a.r}")
        print(f"{'bytes':>12} {'elements':>10} " + " ".join(f"{c:>15}" for c in cols))
    b = size(a.b)
    while b <= size(a.e):
        n = b // es
        try:  # torch's symmetric memory refuses ranks sharing a GPU (PEERS_ONE_GPU): its columns n/a then
            inp = symm_mem.empty(n, dtype=dtype, device="cuda")
            hdl = symm_mem.rendezvous(inp, group)
        except RuntimeError as e:
            print(f"# torch symmetric memory at {b} bytes: {str(e).splitlines()[0][:120]}", file=sys.stderr)
            inp, hdl = torch.empty(n, dtype=dtype, device="cuda"), None
        inp.copy_(torch.randint(-8, 9, (n,), device="cuda").to(dtype))
        out = torch.empty_like(inp)
        ref = inp.clone()
        dist.all_reduce(ref)
        res = {}
        try:
            torch.ops.symm_mem.one_shot_all_reduce_out(inp, "sum", group, out)
            ok = torch.equal(out, ref)
            res["torch_one_shot"] = timed(lambda: torch.ops.symm_mem.one_shot_all_reduce_out(inp, "sum", group, out), a.n, a.r) if ok else None
        except Exception as e:  # noqa: BLE001
            print(f"# one_shot at {b} bytes: {e}", file=sys.stderr)
            res["torch_one_shot"] = None
        try:
            res["torch_two_shot"] = timed(lambda: torch.ops.symm_mem.two_shot_all_reduce_(inp, "sum", group), a.n, a.r)
        except Exception as e:  # noqa: BLE001
            print(f"# two_shot at {b} bytes: {e}", file=sys.stderr)
            res["torch_two_shot"] = None
        if world > 1:
            x = torch.empty(n, dtype=dtype, device="cuda")
            res["torch_nccl"] = timed(lambda: dist.all_reduce(x), a.n, a.r)
        else:  # in place with one rank NCCL does nothing: not a comparable column
            res["torch_nccl"] = None
        res["symcoll_c"] = res["symcoll_py"] = res["symcoll_py_eager"] = res["mul_"] = res["mul_symcoll_c"] = None
        if sc is not None:  # the same call as symcoll-bench's auto column: copy-in, out of place
            x, y = inp.clone(), torch.empty_like(inp)
            held = {}
            res["symcoll_c"] = try_time("symcoll_c", lambda: sc.all_reduce(x, out=y),
                                        lambda: torch.equal(y, ref), a)
            res["symcoll_py"] = try_time("symcoll_py",
                                         lambda: held.__setitem__("y", torch.ops.symcoll.all_reduce(x, "sum", sc.handle)),
                                         lambda: torch.equal(held["y"], ref), a)
            res["symcoll_py_eager"] = try_time("symcoll_py_eager", lambda: sc.all_reduce(x, out=y),
                                               lambda: torch.equal(y, ref), a, graph=False)
            res["mul_"] = try_time("mul_", lambda: x.mul_(1), lambda: True, a)
            res["mul_symcoll_c"] = try_time("mul_symcoll_c", lambda: (x.mul_(1), sc.all_reduce(x, out=y)),
                                            lambda: torch.equal(y, ref), a)
        del hdl
        rows.append((b, n, res))
        if rank == 0:
            print(f"{b:>12} {n:>10} " + " ".join(f"{res[c]:>15.2f}" if res[c] is not None else f"{'n/a':>15}" for c in cols), flush=True)
        b *= a.f
    if rank == 0 and a.csv:
        with open(a.csv, "w") as f:
            f.write("bytes,elements,dtype,nranks,backend," + ",".join(c + "_us" for c in cols) + ",busbw_GBps,wrong\n")
            for b, n, res in rows:
                f.write(f"{b},{n},{a.d},{world},cuda," + ",".join("" if res[c] is None else f"{res[c]:.3f}" for c in cols) + ",,0\n")
    dist.destroy_process_group()


def try_time(name, fn, check, a, graph=True):
    """Times fn if it runs and check() holds after one call; None (n/a) otherwise."""
    try:
        fn()
        torch.cuda.synchronize()
        if not check():
            print(f"# {name}: wrong result", file=sys.stderr)
            return None
        return timed(fn, a.n, a.r, graph=graph)
    except Exception as e:  # noqa: BLE001
        print(f"# {name}: {str(e).splitlines()[0][:160]}", file=sys.stderr)
        return None


def other_colls(a, dtype, es, rank, world, group):
    """all_gather / reduce_scatter: torch symmetric memory's ops and NCCL through torch."""
    # torch_symm_ce_eager: the low-contention (copy-engine) ops use a side stream that graph
    # capture refuses, so they are timed as eager launches.
    cols = ["torch_symm", "torch_symm_ce_eager", "torch_nccl"]
    rows = []
    if rank == 0:
        print(f"# torch {torch.__version__}, {a.coll}, world {world}, {a.d}, graph replays of {a.n} calls, median of {a.r}")
        print(f"{'bytes':>12} {'elements':>10} " + " ".join(f"{c:>15}" for c in cols))
    b = size(a.b)
    ops = torch.ops.symm_mem
    while b <= size(a.e):
        count = b // es // world  # per-rank part
        res = {}
        if a.coll == "all_gather":
            inp = symm_mem.empty(count, dtype=dtype, device="cuda")
            hdl = symm_mem.rendezvous(inp, group)
            inp.copy_(torch.randint(-8, 9, (count,), device="cuda").to(dtype))
            ref = torch.empty(count * world, dtype=dtype, device="cuda")
            dist.all_gather_into_tensor(ref, inp)
            out = {}
            res["torch_symm"] = None  # torch's all-gather op on symmetric memory is multicast only: off here
            res["torch_symm_ce_eager"] = try_time("_low_contention_all_gather",
                                                  lambda: out.__setitem__("y", ops._low_contention_all_gather(inp, group)),
                                                  lambda: torch.equal(out["y"].flatten(), ref), a, graph=False)
            y = torch.empty(count * world, dtype=dtype, device="cuda")
            res["torch_nccl"] = try_time("nccl", lambda: dist.all_gather_into_tensor(y, inp),
                                         lambda: torch.equal(y, ref), a) if world > 1 else None
        else:
            inp = symm_mem.empty(count * world, dtype=dtype, device="cuda")
            hdl = symm_mem.rendezvous(inp, group)
            inp.copy_(torch.randint(-8, 9, (count * world,), device="cuda").to(dtype))
            ref = torch.empty(count, dtype=dtype, device="cuda")
            dist.reduce_scatter_tensor(ref, inp.clone())
            out = torch.empty(count, dtype=dtype, device="cuda")
            res["torch_symm"] = try_time("reduce_scatter_out",
                                         lambda: ops.reduce_scatter_out(inp.view(world, count), group, False, out.view(1, count)),
                                         lambda: torch.equal(out, ref), a)
            got = {}
            res["torch_symm_ce_eager"] = try_time("_low_contention_reduce_scatter",
                                                  lambda: got.__setitem__("y", ops._low_contention_reduce_scatter(inp, "sum", group)),
                                                  lambda: torch.equal(got["y"].flatten(), ref), a, graph=False)
            y = torch.empty(count, dtype=dtype, device="cuda")
            res["torch_nccl"] = try_time("nccl", lambda: dist.reduce_scatter_tensor(y, inp),
                                         lambda: torch.equal(y, ref), a) if world > 1 else None
        del hdl
        rows.append((b, count, res))
        if rank == 0:
            print(f"{b:>12} {count:>10} " + " ".join(f"{res[c]:>15.2f}" if res[c] is not None else f"{'n/a':>15}" for c in cols), flush=True)
        b *= a.f
    if rank == 0 and a.csv:
        with open(a.csv, "w") as f:
            f.write("bytes,elements,dtype,nranks,backend," + ",".join(c + "_us" for c in cols) + ",busbw_GBps,wrong,coll\n")
            for b, n, res in rows:
                f.write(f"{b},{n},{a.d},{world},cuda," + ",".join("" if res[c] is None else f"{res[c]:.3f}" for c in cols) + f",,0,{a.coll}\n")
    dist.destroy_process_group()


def shapes_of(what, world):
    if "," in what:
        return [tuple(int(v) for v in what.split(","))]
    out = []
    if what in ("helion", "all"):
        out.append((4096 // world, 6656, 16384))
    if what in ("kraken", "all"):
        out += [(m, 6656, k) for m in (128, 256, 512, 1024) for k in (4096, 8192, 16384, 32768)]
    return out


def timed_flushed(fn, reps, graph=True):
    """Median us of one call, L2 flushed before each (a 256 MiB memset outside the events), as
    symcoll-bench times the GEMM operations: a CUDA graph of one call replayed per rep."""
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    s = torch.cuda.current_stream()
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    g = None
    if graph:
        try:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                fn()
        except Exception:  # noqa: BLE001 - ops that use a side stream capture refuses
            g = None
            torch.cuda.synchronize()
    out = []
    for r in range(reps):
        flush.fill_(r & 0xff)
        torch.cuda.synchronize()
        if dist.get_world_size() > 1:
            dist.barrier()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(s)
        g.replay() if g is not None else fn()
        e1.record(s)
        e1.synchronize()
        out.append(e0.elapsed_time(e1) * 1e3)
    t = torch.tensor([statistics.median(out)], device="cuda" if dist.get_backend() == "nccl" else "cpu")
    if dist.get_world_size() > 1:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item(), g is not None


def matmul_colls(a, dtype, rank, world, group, sc):
    """torch's fused_all_gather_matmul / fused_matmul_reduce_scatter, torch.distributed NCCL +
    torch.matmul, and symcoll through its package; the same shapes as symcoll-bench's table."""
    ag = a.coll == "all_gather_matmul"
    cols = ["torch_fused", "torch_nccl_matmul", "symcoll_py_overlap", "symcoll_py_sequential"]
    ops = torch.ops.symm_mem
    if rank == 0:
        print(f"# torch {torch.__version__}, {a.coll}, world {world}, {a.d}, us per call (median of {a.r}), L2 flushed")
        print(f"{'m':>6} {'n':>6} {'k':>6} " + " ".join(f"{c:>22}" for c in cols))
    rows = []
    for (m, n, k) in shapes_of(a.shapes, world):
        gen = torch.Generator(device="cuda").manual_seed(rank)
        mk = lambda *shape: torch.randint(-1, 2, shape, device="cuda", generator=gen).to(dtype)  # noqa: E731
        res, graphed = {}, {}
        if ag:
            x = symm_mem.empty((m, k), dtype=dtype, device="cuda")
            hdl = symm_mem.rendezvous(x, group)
            x.copy_(mk(m, k))
            b = mk(k, n)
            full = torch.empty((m * world, k), dtype=dtype, device="cuda")
            dist.all_gather_into_tensor(full, x)
            ref = full @ b
            fns = {"torch_fused": lambda: ops.fused_all_gather_matmul(x, [b], 0, group, return_A=False),
                   "torch_nccl_matmul": lambda: (dist.all_gather_into_tensor(full, x), torch.matmul(full, b)),
                   "symcoll_py_overlap": (lambda: torch.ops.symcoll.all_gather_matmul(x, b, sc.handle, "overlap")) if sc else None,
                   "symcoll_py_sequential": (lambda: torch.ops.symcoll.all_gather_matmul(x, b, sc.handle, "sequential")) if sc else None}
        else:
            x = symm_mem.empty((m * world, k), dtype=dtype, device="cuda")
            hdl = symm_mem.rendezvous(x, group)
            x.copy_(mk(m * world, k))
            b = mk(k, n)
            out = torch.empty((m, n), dtype=dtype, device="cuda")
            ref = None
            fns = {"torch_fused": lambda: ops.fused_matmul_reduce_scatter(x, b, "sum", 0, group),
                   "torch_nccl_matmul": lambda: dist.reduce_scatter_tensor(out, torch.matmul(x, b)),
                   "symcoll_py_overlap": (lambda: torch.ops.symcoll.matmul_reduce_scatter(x, b, sc.handle, "overlap")) if sc else None,
                   "symcoll_py_sequential": (lambda: torch.ops.symcoll.matmul_reduce_scatter(x, b, sc.handle, "sequential")) if sc else None}
        for c in cols:
            res[c] = None
            if fns[c] is None or (c == "torch_nccl_matmul" and world == 1 and not ag):
                continue
            try:
                res[c], graphed[c] = timed_flushed(fns[c], a.r)
            except Exception as e:  # noqa: BLE001
                print(f"# {c} {m}x{n}x{k}: {str(e).splitlines()[0][:160]}", file=sys.stderr)
        del hdl
        rows.append((m, n, k, res))
        if rank == 0:
            print(f"{m:>6} {n:>6} {k:>6} " + " ".join(
                f"{res[c]:>16.1f}{'' if graphed.get(c) else ' eager':>6}" if res[c] is not None else f"{'n/a':>22}"
                for c in cols), flush=True)
        del ref
    if rank == 0 and a.csv:
        with open(a.csv, "w") as f:
            f.write("coll,dtype,nranks,m_shard,n,k," + ",".join(c + "_us" for c in cols) + "\n")
            for m, n, k, res in rows:
                f.write(f"{a.coll},{a.d},{world},{m},{n},{k}," + ",".join("" if res[c] is None else f"{res[c]:.2f}" for c in cols) + "\n")
    dist.destroy_process_group()


def norm_colls(a, dtype, rank, world, group, sc):
    """The block's end as PyTorch runs it (an all-reduce, then x + residual and F.rms_norm as
    separate kernels: through NCCL and through torch's symmetric-memory one-shot), symcoll's
    all-reduce with torch's add and norm, and symcoll's fused op through its package; rows x
    hidden as symcoll-bench --coll all_reduce_rmsnorm --shapes all. CUDA-graph replays, median.
    --fp8 static|rows: every chain then quantises its output to e4m3 as PyTorch does (a static
    scale: out / scale, clamped to +-448, converted; per row: the row's amax / 448 as its scale),
    and the fused column is symcoll's all_reduce_rmsnorm_fp8 op (no bf16 out written); with a
    static scale also symcoll_py_fused_f64, the op given the scale as float64, which it converts
    into its scale output with a copy kernel of its own (a float32 scale's copy is written by
    the fused kernel itself)."""
    import torch.nn.functional as F
    cols = ["torch_nccl_chain", "torch_symm_chain", "symcoll_py_chain", "symcoll_py_fused"]
    if a.fp8 == "static":
        cols.append("symcoll_py_fused_f64")
    eps = 1e-6
    fp8_max = 448.0
    static_scale = torch.tensor([0.05], dtype=torch.float32, device="cuda")
    static_f64 = static_scale.double()

    def quant(y):
        if a.fp8 is None:
            return y
        if a.fp8 == "static":
            return (y.float() / static_scale).clamp(-fp8_max, fp8_max).to(torch.float8_e4m3fn)
        scales = (y.float().abs().amax(dim=-1, keepdim=True) / fp8_max).clamp(min=1e-12)
        return (y.float() / scales).clamp(-fp8_max, fp8_max).to(torch.float8_e4m3fn), scales

    if rank == 0:
        print(f"# torch {torch.__version__}, all_reduce_rmsnorm{'' if a.fp8 is None else ' --fp8 ' + a.fp8}, "
              f"world {world}, {a.d}, graph replays of {a.n} calls, median of {a.r}")
        print(f"{'rows':>6} {'hidden':>6} " + " ".join(f"{c:>17}" for c in cols))
    rows = []
    for hidden in (4096, 8192):
        for nrows in (1, 8, 32, 128, 512, 2048):
            gen = torch.Generator(device="cuda").manual_seed(rank)
            x = symm_mem.empty((nrows, hidden), dtype=dtype, device="cuda")
            hdl = symm_mem.rendezvous(x, group)
            x.copy_(torch.randint(-8, 9, (nrows, hidden), device="cuda", generator=gen).to(dtype) / 8)
            residual = torch.randn(nrows, hidden, device="cuda", generator=torch.Generator(device="cuda").manual_seed(7)).to(dtype)
            w = (1 + 0.1 * torch.randn(hidden, device="cuda", generator=torch.Generator(device="cuda").manual_seed(8))).to(dtype)
            summed = torch.empty_like(x)
            y = x.clone()

            def nccl_chain():
                y.copy_(x)
                dist.all_reduce(y)
                return quant(F.rms_norm(y + residual, (hidden,), w, eps))

            def symm_chain():
                torch.ops.symm_mem.one_shot_all_reduce_out(x, "sum", group, summed)
                return quant(F.rms_norm(summed + residual, (hidden,), w, eps))

            def symcoll_chain():
                return quant(F.rms_norm(torch.ops.symcoll.all_reduce(x, "sum", sc.handle) + residual, (hidden,), w, eps))

            def symcoll_fused():
                if a.fp8 is None:
                    return torch.ops.symcoll.all_reduce_rmsnorm(x, residual, w, eps, sc.handle, "auto")
                return torch.ops.symcoll.all_reduce_rmsnorm_fp8(x, residual, w, eps,
                                                                static_scale if a.fp8 == "static" else None,
                                                                sc.handle, "auto")

            def symcoll_fused_f64():
                return torch.ops.symcoll.all_reduce_rmsnorm_fp8(x, residual, w, eps, static_f64, sc.handle, "auto")

            fns = {"torch_nccl_chain": nccl_chain if world > 1 else None, "torch_symm_chain": symm_chain,
                   "symcoll_py_chain": symcoll_chain if sc else None, "symcoll_py_fused": symcoll_fused if sc else None,
                   "symcoll_py_fused_f64": symcoll_fused_f64 if sc else None}
            res = {}
            for c in cols:
                res[c] = None
                if fns[c] is None:
                    continue
                try:
                    res[c] = timed(fns[c], a.n, a.r)
                except Exception as e:  # noqa: BLE001
                    print(f"# {c} {nrows}x{hidden}: {str(e).splitlines()[0][:160]}", file=sys.stderr)
            del hdl
            rows.append((nrows, hidden, res))
            if rank == 0:
                print(f"{nrows:>6} {hidden:>6} " + " ".join(f"{res[c]:>17.2f}" if res[c] is not None else f"{'n/a':>17}"
                                                          for c in cols), flush=True)
    if rank == 0 and a.csv:
        with open(a.csv, "w") as f:
            f.write("coll,dtype,nranks,rows,hidden," + ",".join(c + "_us" for c in cols) + "\n")
            for nrows, hidden, res in rows:
                f.write(f"all_reduce_rmsnorm{'' if a.fp8 is None else '+fp8_' + a.fp8},{a.d},{world},{nrows},{hidden}," +
                        ",".join("" if res[c] is None else f"{res[c]:.2f}" for c in cols) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
