#!/usr/bin/env python3
"""What a call costs from PyTorch on CPU ranks, eager: symcoll's torch ops (all_reduce_ in
place, all_reduce out of place) and the Python method (in place, and out of place) against
torch.distributed over gloo, the host clock around --calls back-to-back calls, best of -r runs,
the slowest rank's figure.

    torchrun --nproc-per-node 2 bench/eager_cpu.py -d fp32 --counts 1024,65536

PYTHONPATH=python and SYMCOLL_LIB=build/lib/libsymcoll.so name the package and library under
test. The kernels in use (compiled or Python) are printed with the table.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

import symcoll


def best_of(fn, calls, runs, world):
    t0 = time.perf_counter()
    for _ in range(50):
        fn()
    # --calls, or fewer where a run would pass a second (gloo's calls take a millisecond on a
    # machine of two vCPUs); the ranks take the fewest of theirs, so that they make the same calls
    calls = max(50, min(calls, int(50 / (time.perf_counter() - t0))))
    if world > 1:
        k = torch.tensor([calls])
        dist.all_reduce(k, op=dist.ReduceOp.MIN)
        calls = int(k.item())
    best = float("inf")
    for _ in range(runs):
        if world > 1:
            dist.barrier()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    t = torch.tensor([best], dtype=torch.float64)
    if world > 1:
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-d", default="fp32", choices=["bf16", "fp16", "fp32"])
    p.add_argument("--counts", default="1024,65536")
    p.add_argument("--calls", type=int, default=2000, help="calls per timed run (fewer where a run passes 1 s)")
    p.add_argument("-r", type=int, default=5)
    p.add_argument("--csv")
    a = p.parse_args()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[a.d]
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    sc = symcoll.Comm.from_process_group(dist.group.WORLD)
    kernels = "compiled" if "all_reduce_" in getattr(symcoll.ops, "COMPILED", ()) else "python"
    cols = ["torch_gloo", "symcoll_op_", "symcoll_method_", "symcoll_op", "symcoll_method"]
    if rank == 0:
        cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                   "?")
        print(f"# torch {torch.__version__}, {world} CPU ranks, {a.d}, eager, host clock over {a.calls} calls (fewer where 1 s passes), "
              f"best of {a.r}, slowest rank; symcoll torch kernels: {kernels}; {cpu}, {os.cpu_count()} CPUs")
        # The same work side by side: in place (op_, method_), out of place (op, method).
        print(f"{'elements':>10} " + " ".join(f"{c:>15}" for c in cols) + f" {'op_/method_':>12} {'op/method':>10}")
    rows = []
    for n in (int(c) for c in a.counts.split(",")):
        x, y = torch.zeros(n, dtype=dtype), torch.empty(n, dtype=dtype)
        h = sc.handle
        fns = {"torch_gloo": lambda: dist.all_reduce(x),
               "symcoll_op_": lambda: torch.ops.symcoll.all_reduce_(x, "sum", h),
               "symcoll_method_": lambda: sc.all_reduce(x),
               "symcoll_op": lambda: torch.ops.symcoll.all_reduce(x, "sum", h),
               "symcoll_method": lambda: sc.all_reduce(x, out=y)}
        res = {c: best_of(fn, a.calls, a.r, world) for c, fn in fns.items()}
        rows.append((n, res))
        if rank == 0:
            print(f"{n:>10} " + " ".join(f"{res[c]:>15.2f}" for c in cols) +
                  f" {res['symcoll_op_'] / res['symcoll_method_']:>12.2f} {res['symcoll_op'] / res['symcoll_method']:>10.2f}")
    if a.csv and rank == 0:
        with open(a.csv, "w") as f:
            f.write("elements,dtype,nranks,kernels," + ",".join(f"{c}_us" for c in cols) + "\n")
            for n, res in rows:
                f.write(f"{n},{a.d},{world},{kernels}," + ",".join(f"{res[c]:.3f}" for c in cols) + "\n")
    sc.destroy()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
