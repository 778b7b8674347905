"""PyTorch's ProcessGroupNCCL, unchanged, over libsymcoll_nccl.so.

Run under torchrun with the shim preloaded (scripts/nccl-shim-torch does it):

    LD_PRELOAD=build/lib/libsymcoll_nccl.so \
    SYMCOLL_NCCL_REAL_LIB=.../site-packages/nvidia/nccl/lib/libnccl.so.2 \
    torchrun --standalone --nproc-per-node N tests/nccl_shim_torch.py

Every call is checked against an exact reference computed on the host: integer-valued inputs
small enough that sums, products, maxima and minima are exact in every dtype (bf16 holds the
integers to 256), AVG compared within one unit in the last place (NCCL divides once, in the
accumulation type, then rounds). Sizes from 1 element to past the shim's served range.

SHIM_TEST_DEVICE=0 puts every rank on GPU 0 (several processes on one GPU: run them under MPS).
SHIM_TEST_FORWARD=1 also runs the calls the shim forwards to the real NCCL (gather, scatter,
uneven all_to_all, send/recv): they need one GPU per rank, or world 1.
Exits non-zero at the first wrong value, naming the call, dtype, op and size.
"""

import ctypes
import os
import sys

import torch
import torch.distributed as dist

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
LOCAL = int(os.environ.get("LOCAL_RANK", "0"))
FORWARD = os.environ.get("SHIM_TEST_FORWARD", "1" if WORLD == 1 else "0") == "1"
DEV = torch.device("cuda", int(os.environ.get("SHIM_TEST_DEVICE", LOCAL % max(torch.cuda.device_count(), 1))))
SIZES = [1, 7, 1000, 4097, 65539, 1 << 20]
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.float64]
OPS = {
    "sum": dist.ReduceOp.SUM,
    "avg": dist.ReduceOp.AVG,
    "max": dist.ReduceOp.MAX,
    "min": dist.ReduceOp.MIN,
    "product": dist.ReduceOp.PRODUCT,
}
checked = 0


def fail(what):
    print(f"rank {RANK}: WRONG {what}", flush=True)
    sys.exit(1)


def shim_loaded():
    """The shim's own exported version symbol, seen from this process."""
    try:
        return ctypes.c_int.in_dll(ctypes.CDLL(None), "symcoll_nccl_shim_version").value
    except ValueError:
        return 0


def values(r, n, dtype, salt=0):
    """Rank r's input: 1..3. Sums stay exact in every dtype; products are exact up to 4 ranks
    (81) and beyond are rounded once from the exact value, as the reference is."""
    i = torch.arange(n, dtype=torch.int64, device=DEV)
    return ((i * 7 + r * 3 + salt) % 3 + 1).to(dtype)


def reduce_ref(op, n, dtype, ranks, salt=0):
    xs = torch.stack([values(r, n, torch.float64, salt) for r in ranks])
    if op == "sum":
        out = xs.sum(0)
    elif op == "avg":
        out = xs.sum(0) / len(ranks)
    elif op == "max":
        out = xs.max(0).values
    elif op == "min":
        out = xs.min(0).values
    else:
        out = xs.prod(0)
    return out.to(dtype)


def check(what, got, want, op=None):
    global checked
    checked += 1
    if op == "avg" and got.is_floating_point():
        ok = torch.allclose(got.double(), want.double(), rtol=torch.finfo(got.dtype).eps, atol=0)
    else:
        ok = torch.equal(got, want)
    if not ok:
        bad = (got.double() != want.double()).nonzero()
        first = bad[0].item() if bad.numel() else -1
        fail(f"{what}: {bad.numel()} of {got.numel()} wrong, first at {first}: "
             f"{got.flatten()[first].item() if first >= 0 else ''} != {want.flatten()[first].item() if first >= 0 else ''}")


def ops_for(dtype):
    return [o for o in OPS if not (o == "avg" and not dtype.is_floating_point)]


def test_all_reduce():
    for dtype in DTYPES:
        for n in SIZES:
            for op in ops_for(dtype):
                x = values(RANK, n, dtype)
                dist.all_reduce(x, op=OPS[op])
                check(f"all_reduce {dtype} {op} n={n}", x, reduce_ref(op, n, dtype, range(WORLD)), op)


def test_all_gather_reduce_scatter():
    for dtype in DTYPES:
        for n in SIZES:
            out = torch.full((WORLD * n,), -7, dtype=dtype, device=DEV)
            dist.all_gather_into_tensor(out, values(RANK, n, dtype))
            want = torch.cat([values(r, n, dtype) for r in range(WORLD)])
            check(f"all_gather_into_tensor {dtype} n={n}", out, want)
            for op in ops_for(dtype):
                inp = torch.cat([values(RANK, n, dtype, salt=b) for b in range(WORLD)])
                out = torch.full((n,), -7, dtype=dtype, device=DEV)
                dist.reduce_scatter_tensor(out, inp, op=OPS[op])
                check(f"reduce_scatter_tensor {dtype} {op} n={n}", out,
                      reduce_ref(op, n, dtype, range(WORLD), salt=RANK), op)


def test_broadcast_reduce():
    for dtype in DTYPES:
        for n in SIZES:
            root = WORLD - 1
            x = values(RANK, n, dtype) if RANK == root else torch.full((n,), -7, dtype=dtype, device=DEV)
            dist.broadcast(x, src=root)
            check(f"broadcast {dtype} n={n} root={root}", x, values(root, n, dtype))
            for op in ops_for(dtype):
                x = values(RANK, n, dtype)
                dist.reduce(x, dst=0, op=OPS[op])
                want = reduce_ref(op, n, dtype, range(WORLD)) if RANK == 0 else values(RANK, n, dtype)
                check(f"reduce {dtype} {op} n={n}", x, want, op)


def test_all_to_all():
    for dtype in DTYPES:
        for n in SIZES:
            inp = torch.cat([values(RANK, n, dtype, salt=b) for b in range(WORLD)])
            out = torch.full_like(inp, -7)
            dist.all_to_all_single(out, inp)
            want = torch.cat([values(r, n, dtype, salt=RANK) for r in range(WORLD)])
            check(f"all_to_all_single {dtype} n={n}", out, want)


def test_barrier_subgroup():
    dist.barrier()
    members = list(range(0, WORLD, 2))
    group = dist.new_group(members)
    if RANK in members:
        for dtype in (torch.float32, torch.bfloat16):
            for n in (5, 4097):
                x = values(RANK, n, dtype)
                dist.all_reduce(x, group=group)
                check(f"subgroup {members} all_reduce {dtype} n={n}", x, reduce_ref("sum", n, dtype, members))
    dist.barrier()


def test_graphs():
    """The same calls captured in one CUDA graph, replayed on fresh inputs."""
    n = 4097
    dtype = torch.bfloat16
    ar = torch.zeros(n, dtype=dtype, device=DEV)
    ag_in = torch.zeros(n, dtype=dtype, device=DEV)
    ag_out = torch.zeros(WORLD * n, dtype=dtype, device=DEV)
    rs_in = torch.zeros(WORLD * n, dtype=dtype, device=DEV)
    rs_out = torch.zeros(n, dtype=dtype, device=DEV)
    bc = torch.zeros(n, dtype=dtype, device=DEV)
    a2a_in = torch.zeros(WORLD * n, dtype=dtype, device=DEV)
    a2a_out = torch.zeros(WORLD * n, dtype=dtype, device=DEV)

    def calls():
        dist.all_reduce(ar)
        dist.all_gather_into_tensor(ag_out, ag_in)
        dist.reduce_scatter_tensor(rs_out, rs_in, op=dist.ReduceOp.MAX)
        dist.broadcast(bc, src=0)
        dist.all_to_all_single(a2a_out, a2a_in)

    stream = torch.cuda.Stream(device=DEV)
    stream.wait_stream(torch.cuda.current_stream(DEV))
    with torch.cuda.stream(stream):
        calls()  # warm-up outside the graph, as PyTorch's own graph tests do
    torch.cuda.current_stream(DEV).wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        calls()
    for salt in range(3):
        ar.copy_(values(RANK, n, dtype, salt))
        ag_in.copy_(values(RANK, n, dtype, salt))
        rs_in.copy_(torch.cat([values(RANK, n, dtype, salt=salt + b) for b in range(WORLD)]))
        bc.copy_(values(RANK, n, dtype, salt) if RANK == 0 else torch.full((n,), -7, dtype=dtype, device=DEV))
        a2a_in.copy_(torch.cat([values(RANK, n, dtype, salt=salt + b) for b in range(WORLD)]))
        graph.replay()
        torch.cuda.synchronize(DEV)
        check(f"graph all_reduce salt={salt}", ar, reduce_ref("sum", n, dtype, range(WORLD), salt))
        check(f"graph all_gather salt={salt}", ag_out, torch.cat([values(r, n, dtype, salt) for r in range(WORLD)]))
        check(f"graph reduce_scatter max salt={salt}", rs_out, reduce_ref("max", n, dtype, range(WORLD), salt + RANK))
        check(f"graph broadcast salt={salt}", bc, values(0, n, dtype, salt))
        check(f"graph all_to_all salt={salt}", a2a_out,
              torch.cat([values(r, n, dtype, salt=salt + RANK) for r in range(WORLD)]))
    del graph


def test_forwarded():
    """Calls the shim hands to the real NCCL: gather, scatter, uneven all_to_all, send/recv."""
    dtype = torch.float32
    n = 1000
    x = values(RANK, n, dtype)
    gathered = [torch.full((n,), -7, dtype=dtype, device=DEV) for _ in range(WORLD)] if RANK == 0 else None
    dist.gather(x, gathered, dst=0)
    if RANK == 0:
        for r in range(WORLD):
            check(f"gather from {r}", gathered[r], values(r, n, dtype))
    out = torch.full((n,), -7, dtype=dtype, device=DEV)
    dist.scatter(out, [values(r, n, dtype, salt=5) for r in range(WORLD)] if RANK == 0 else None, src=0)
    check("scatter", out, values(RANK, n, dtype, salt=5))
    in_splits = [r + 1 for r in range(WORLD)]  # rank RANK sends r+1 elements to rank r
    out_splits = [RANK + 1] * WORLD
    inp = torch.cat([values(RANK, r + 1, dtype, salt=r) for r in range(WORLD)])
    out = torch.full((sum(out_splits),), -7, dtype=dtype, device=DEV)
    dist.all_to_all_single(out, inp, out_splits, in_splits)
    check("all_to_all_single uneven", out, torch.cat([values(r, RANK + 1, dtype, salt=RANK) for r in range(WORLD)]))
    peer = (RANK + 1) % WORLD
    src = (RANK - 1) % WORLD
    recv = torch.full((n,), -7, dtype=dtype, device=DEV)
    ops = [dist.P2POp(dist.isend, values(RANK, n, dtype, salt=9), peer),
           dist.P2POp(dist.irecv, recv, src)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    check("batch_isend_irecv", recv, values(src, n, dtype, salt=9))


def main():
    version = shim_loaded()
    if os.environ.get("SHIM_TEST_EXPECT_SHIM", "1") == "1" and not version:
        fail("libsymcoll_nccl.so is not loaded (LD_PRELOAD it)")
    torch.cuda.set_device(DEV)
    dist.init_process_group("nccl", device_id=DEV)
    if RANK == 0:
        print(f"world {WORLD}, device {DEV}, torch {torch.__version__}, "
              f"NCCL as torch sees it {torch.cuda.nccl.version()}, shim version {version}", flush=True)
    tests = [test_all_reduce, test_all_gather_reduce_scatter, test_broadcast_reduce, test_all_to_all,
             test_barrier_subgroup, test_graphs]
    if FORWARD:
        tests.append(test_forwarded)
    for t in tests:
        t()
        torch.cuda.synchronize(DEV)
        if RANK == 0:
            print(f"{t.__name__}: right ({checked} checks so far)", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {RANK}: {checked} checks, 0 wrong", flush=True)


if __name__ == "__main__":
    main()
