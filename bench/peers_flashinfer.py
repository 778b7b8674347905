#!/usr/bin/env python3
"""FlashInfer's peer of symcoll's fused all-reduce + residual add + RMSNorm: FlashInfer's
TensorRT-LLM fusion (flashinfer.comm.trtllm_allreduce_fusion, pattern kARResidualRMSNorm) timed
beside symcoll's torch op torch.ops.symcoll.all_reduce_rmsnorm_ in the same processes, timed as
bench/peers_torch.py times (CUDA-graph replays of -n calls between device events, median of -r
replays, the slowest rank's median), rows x hidden as symcoll-bench --coll all_reduce_rmsnorm.

    PEERS_ONE_GPU=1 PYTHONPATH=.fi/site:$PWD/python SYMCOLL_LIB=build/lib/libsymcoll.so \\
      python3 -m torch.distributed.run --standalone --nproc-per-node 2 bench/peers_flashinfer.py \\
      --shapes 1x4096,8x4096,2048x8192          # or --shapes all (rows 1..2048 x hidden 4096, 8192)

Columns, us per call, each in place on residual (vLLM's fused_add_rms_norm: residual <- r =
all_reduce(x) + residual, out = RMSNorm(r) * weight; x is left as it is):
  flashinfer_fused  trtllm_allreduce_fusion(x, residual_in=residual, residual_out=residual,
                    norm_out=out), its defaults otherwise (use_oneshot=None: its heuristic, which
                    --fi-oneshot overrides; no PDL; fp32_acc off unless --fi-fp32-acc (symcoll
                    always sums in fp32); trigger_completion_at_end), over
                    the IPC workspace trtllm_create_ipc_workspace_for_all_reduce_fusion makes once
                    for the largest shape; fi_shot says which kernel its heuristic took (1 or 2)
  symcoll_fused     torch.ops.symcoll.all_reduce_rmsnorm_(x, residual, weight, eps, comm, "auto")
  symcoll_chain     torch.ops.symcoll.all_reduce(x) + residual, then F.rms_norm (three kernels)
  symcoll_ALGO      with --sc-algos: symcoll's op with that algorithm asked for (lamport, oneshot,
                    twoshot, sequential), where "auto" above takes the tuning table's
wrong_*: output and residual elements off a float64 reference by more than bf16's tolerance
(torch.testing's: rtol 1.6e-2, atol 1e-5; fp16 1e-3 and 1e-5), summed over the ranks.
FlashInfer's kernels take 2, 4, 8 or 16 ranks: at other world sizes its column is n/a (said once).
Ranks sharing a GPU: FlashInfer sizes its grids for a GPU per rank (up to a block of up to 1024
threads per SM, spinning on its peers' blocks), so from some tens of rows (hidden 8192 at 2 ranks,
either hidden at 4) one rank's kernel can fill the GPU while its peers' cannot start, and it
never ends. CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100/N for every rank (each a share of the GPU, all
columns alike) keeps them co-resident; without it keep FlashInfer to a few rows (1 and 8).
--cols picks columns (e.g. symcoll's alone where FlashInfer's could not run).
Multicast stays off: TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NCCL_NVLS_ENABLE=0 are set here, and
the workspace is created without it (FlashInfer asks for none on this path).
PEERS_ONE_GPU=1: every rank on GPU 0 (processes under MPS, EMULATION) with a gloo group, as in
bench/peers_torch.py. --csv PATH, else $OUT/peers_flashinfer-<N>ranks.csv when OUT is set.

Where flashinfer is installed (with its JIT and nvcc), nothing more is needed. For a GPU machine
without a package registry, .fi (git-ignored, PYTHONPATH=.fi/site) was made on a machine with pip
and nvcc: the flashinfer-python 0.7.4 and apache-tvm-ffi 0.1.15 (cp312, manylinux) wheels
unpacked; of FlashInfer's Python files, the import closure of flashinfer.comm.trtllm_ar, with
minimal __init__.py files for flashinfer, flashinfer.jit and flashinfer.comm; its trtllm_comm
module built ahead of time by the ninja file FlashInfer's JIT generates (sm_90a for an H100) into
flashinfer/data/aot/trtllm_comm/trtllm_comm.so, where FlashInfer looks for ahead-of-time modules,
and run with FLASHINFER_DISABLE_JIT=1 (about 24 MB; bench/results/h100/run28).
"""
import argparse
import os
import sys
import warnings

os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
# FlashInfer's trtllm_comm module comes prebuilt (.fi: flashinfer/data/aot/trtllm_comm/trtllm_comm.so,
# where FlashInfer looks for ahead-of-time modules): never compile it here.
os.environ.setdefault("FLASHINFER_DISABLE_JIT", "1")

try:  # symcoll through its Python package, when it can be imported
    import symcoll  # noqa: E402
except Exception as e:  # noqa: BLE001
    print(f"# symcoll package: {e}", file=sys.stderr)
    symcoll = None
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from peers_torch import start_job, timed  # noqa: E402  (this directory: the same job and timing as the other peers)

FI_WORLDS = (2, 4, 8, 16)  # allreduce_fusion_op's ranks (trtllm_allreduce_fusion.cuh)
TOL = {torch.bfloat16: (1.6e-2, 1e-5), torch.float16: (1e-3, 1e-5)}  # torch.testing's defaults
COLS = ["flashinfer_fused", "symcoll_fused", "symcoll_chain"]


def all_ranks(v, op=dist.ReduceOp.SUM):
    t = torch.tensor([v], dtype=torch.float64, device="cuda" if dist.get_backend() == "nccl" else "cpu")
    if dist.get_world_size() > 1:
        dist.all_reduce(t, op=op)
    return t.item()


def shapes_of(what):
    if what == "all":
        return [(r, h) for h in (4096, 8192) for r in (1, 8, 32, 128, 512, 2048)]
    return [tuple(int(v) for v in s.lower().split("x")) for s in what.split(",") if s]


def inputs(rows, hidden, dtype, world):
    """Every rank's x (multiples of 1/8 in [-1, 1]: the sum is exact), made alike on each rank so
    the float64 reference needs no exchange; residual and weight as bench/peers_torch.py's."""
    gen = lambda seed: torch.Generator(device="cuda").manual_seed(seed)  # noqa: E731
    xs = [torch.randint(-8, 9, (rows, hidden), device="cuda", generator=gen(1000 + r)).to(dtype) / 8
          for r in range(world)]
    residual = torch.randn(rows, hidden, device="cuda", generator=gen(7)).to(dtype)
    w = (1 + 0.1 * torch.randn(hidden, device="cuda", generator=gen(8))).to(dtype)
    return xs, residual, w


def reference(xs, residual, w, eps):
    r = residual.double()
    for x in xs:
        r += x.double()
    return r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + eps) * w.double(), r


def n_wrong(got, ref, dtype):
    rtol, atol = TOL[dtype]
    return int(((got.double() - ref).abs() > atol + rtol * ref.abs()).sum().item())


class FlashInfer:
    """FlashInfer's fused all-reduce + residual + RMSNorm over one IPC workspace."""

    def __init__(self, a, rank, world, max_rows, max_hidden, dtype):
        import flashinfer.comm as fic  # noqa: PLC0415
        from flashinfer.comm import trtllm_ar  # noqa: PLC0415

        warnings.filterwarnings("ignore", message="use the unified API")  # the calls' @deprecated
        self.fic, self.ar, self.rank, self.world, self.a = fic, trtllm_ar, rank, world, a
        self.version = getattr(sys.modules["flashinfer"], "__version__", "?")
        kinds = {"auto": ["symm_dev", "torch"], "symm_dev": ["symm_dev"], "torch": ["torch"]}[a.fi_workspace]
        self.ws = None
        for kind in kinds:
            # symm_dev: what FlashInfer's unified API asks for (SymmDeviceMemory: cuMem VMM
            # allocations, POSIX fds over AF_UNIX sockets, no multicast); torch: torch's symmetric
            # memory (needs TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES=1 where ranks share a GPU).
            err = None
            try:
                made = fic.trtllm_create_ipc_workspace_for_all_reduce_fusion(
                    rank, world, max_rows, max_hidden, use_fp32_lamport=dtype == torch.float32,
                    group=dist.group.WORLD, create_metadata=True, use_symm_dev_mem=kind == "symm_dev")
            except Exception as e:  # noqa: BLE001
                err = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            if all_ranks(0 if err is None else 1) == 0:
                self.kind, self.ipc, self.ws, self.meta = kind, made[0], made[1], made[-1]
                self.keep = made  # the workspace's memory lives as long as these
                # every rank's Lamport buffers initialised (a kernel) before any peer writes into
                # them: the gloo barrier inside the torch form does not wait for the GPU
                torch.cuda.synchronize()
                dist.barrier()
                return
            print(f"# flashinfer workspace ({kind}) on rank {rank}: {err or 'failed on another rank'}",
                  file=sys.stderr)
            torch.cuda.synchronize()
            dist.barrier()

    def oneshot(self, rows, hidden, dtype):
        """What the call does at this shape: FlashInfer's heuristic (B200's table), or --fi-oneshot."""
        if self.a.fi_oneshot != "auto":
            return self.a.fi_oneshot == "on"
        return self.ar._should_use_oneshot(rows, hidden, dtype, self.world)

    def call(self, x, residual, out, w, eps):
        rows, hidden = x.shape
        self.fic.trtllm_allreduce_fusion(
            allreduce_in=x, world_size=self.world, world_rank=self.rank, token_num=rows, hidden_dim=hidden,
            workspace_ptrs=self.ws, launch_with_pdl=self.a.fi_pdl, trigger_completion_at_end=True,
            fp32_acc=self.a.fi_fp32_acc, pattern_code=self.fic.AllReduceFusionPattern.kARResidualRMSNorm,
            use_oneshot=None if self.a.fi_oneshot == "auto" else self.a.fi_oneshot == "on",
            allreduce_out=None, residual_in=residual, residual_out=residual, norm_out=out,
            quant_out=None, scale_out=None, rms_gamma=w, rms_eps=eps, scale_factor=None, layout_code=None,
            metadata=self.meta)


def run_col(name, shape, fn, check, a):
    """(us, #wrong) of one column: one call checked, then timed in a CUDA graph (eager launches
    where capture fails, said on stderr); (None, None) where it does not run."""
    try:
        fn()
        torch.cuda.synchronize()
        wrong = int(all_ranks(check()))
    except Exception as e:  # noqa: BLE001
        print(f"# {name} {shape}: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}",
              file=sys.stderr)
        return None, None
    try:
        return timed(fn, a.n, a.r), wrong
    except Exception as e:  # noqa: BLE001
        print(f"# {name} {shape}: graph capture failed ({type(e).__name__}: "
              f"{str(e).splitlines()[0][:160] if str(e) else ''}); timed eager", file=sys.stderr)
        torch.cuda.synchronize()
        try:
            return timed(fn, a.n, a.r, graph=False), wrong
        except Exception as e2:  # noqa: BLE001
            print(f"# {name} {shape}: {type(e2).__name__}: {str(e2).splitlines()[0][:160]}", file=sys.stderr)
            return None, wrong


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="all", help="all, or ROWSxHIDDEN,... (rows per rank: the whole x)")
    p.add_argument("-d", default="bf16", choices=["bf16", "fp16"])
    p.add_argument("-n", type=int, default=20, help="calls per graph")
    p.add_argument("-r", type=int, default=20, help="replays (the median's samples)")
    p.add_argument("--eps", type=float, default=1e-6)
    p.add_argument("--csv")
    p.add_argument("--fi-workspace", default="auto", choices=["auto", "symm_dev", "torch"],
                   help="FlashInfer's IPC workspace: SymmDeviceMemory (its unified API's), torch's "
                        "symmetric memory, or the first that works (auto)")
    p.add_argument("--fi-oneshot", default="auto", choices=["auto", "on", "off"],
                   help="FlashInfer's one-shot (Lamport) or two-shot kernel; auto: its heuristic")
    p.add_argument("--fi-pdl", action="store_true", help="FlashInfer's launch_with_pdl")
    p.add_argument("--fi-fp32-acc", action="store_true",
                   help="FlashInfer sums the ranks in fp32 (default: in the dtype, its default)")
    p.add_argument("--cols", default=",".join(COLS), help="the columns to run, of " + ",".join(COLS))
    p.add_argument("--sc-algos", default="", help="symcoll's op with these algorithms too (lamport,oneshot,...)")
    a = p.parse_args()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[a.d]
    cols = set(a.cols.split(","))
    if cols - set(COLS):
        p.error(f"--cols: unknown {','.join(sorted(cols - set(COLS)))}")
    algos = [s for s in a.sc_algos.split(",") if s]
    all_cols = COLS + [f"symcoll_{s}" for s in algos]
    one_gpu = os.environ.get("PEERS_ONE_GPU") == "1"
    if one_gpu:  # torch's symmetric memory (--fi-workspace torch) refuses ranks sharing a GPU otherwise
        os.environ.setdefault("TORCH_SYMM_MEM_ALLOW_OVERLAPPING_DEVICES", "1")
    rank, world, local, sc = start_job()  # as bench/peers_torch.py: PEERS_ONE_GPU=1, a gloo group on GPU 0
    shapes = shapes_of(a.shapes)
    fi, fi_note = None, ""
    if "flashinfer_fused" not in cols:
        fi_note = "flashinfer_fused not asked for (--cols)"
    elif world not in FI_WORLDS:
        fi_note = (f"FlashInfer's trtllm_allreduce_fusion takes {', '.join(map(str, FI_WORLDS))} ranks, "
                   f"not {world}: its column is n/a")
    else:
        try:
            fi = FlashInfer(a, rank, world, max(r for r, _ in shapes), max(h for _, h in shapes), dtype)
            if fi.ws is None:
                fi, fi_note = None, "no FlashInfer workspace could be made (stderr says why): its column is n/a"
        except Exception as e:  # noqa: BLE001
            fi_note = f"flashinfer: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    if rank == 0:
        kernels = sorted(getattr(getattr(symcoll, "ops", None), "COMPILED", ())) if symcoll else []
        mps = os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
        print(f"# torch {torch.__version__}, all_reduce_rmsnorm (in place on residual), world {world}"
              f"{' (ranks share GPU 0: EMULATION)' if one_gpu and world > 1 else ''}, {a.d}, "
              f"graph replays of {a.n} calls, median of {a.r}, us; {torch.cuda.get_device_name()}, "
              f"{torch.cuda.get_device_properties(local).multi_processor_count} SMs seen"
              f"{', MPS active thread percentage ' + mps if mps else ''}")
        if fi is not None:
            print(f"# flashinfer {fi.version}: trtllm_allreduce_fusion kARResidualRMSNorm, workspace {fi.kind}, "
                  f"oneshot {a.fi_oneshot}, pdl {'on' if a.fi_pdl else 'off'}, fp32_acc {'on' if a.fi_fp32_acc else 'off'}")
        else:
            print(f"# {fi_note}")
        sc_pdl = os.environ.get("SYMCOLL_PDL", "0").lower() in ("1", "on", "yes", "true")
        print(f"# symcoll: {'not importable' if sc is None else 'torch ops ' + ('compiled' if 'all_reduce_rmsnorm_' in kernels else 'python')}"
              f", pdl {'on' if sc_pdl else 'off'} (SYMCOLL_PDL)")
        if fi is not None and sc_pdl != a.fi_pdl:
            print("# note: one op launches with PDL and the other not; SYMCOLL_PDL=1 with --fi-pdl (or neither) "
                  "compares like with like")
        print(f"{'rows':>6} {'hidden':>6} " + " ".join(f"{c:>17}" for c in all_cols) +
              f" {'fi_shot':>7} {'symcoll/fi':>10} {'wrong_fi':>8} {'wrong_sc':>8} {'wrong_ch':>8}" +
              "".join(f" {'wrong_' + s[:2]:>8}" for s in algos), flush=True)
    rows_out = []
    for nrows, hidden in shapes:
        shape = f"{nrows}x{hidden}"
        xs, residual0, w = inputs(nrows, hidden, dtype, world)
        ref_out, ref_res = reference(xs, residual0, w, a.eps)
        x = xs[rank].contiguous()
        del xs
        res, wrong = {c: None for c in all_cols}, {c: None for c in all_cols}
        shot = ""
        if fi is not None:
            out, residual = torch.empty_like(x), residual0.clone()
            shot = "1" if fi.oneshot(nrows, hidden, dtype) else "2"
            res["flashinfer_fused"], wrong["flashinfer_fused"] = run_col(
                "flashinfer_fused", shape, lambda: fi.call(x, residual, out, w, a.eps),
                lambda: n_wrong(out, ref_out, dtype) + n_wrong(residual, ref_res, dtype), a)
        for col, algo in [("symcoll_fused", "auto")] * ("symcoll_fused" in cols) + [(f"symcoll_{s}", s) for s in algos]:
            if sc is None:
                break
            h, held, residual = sc.handle, {}, residual0.clone()
            res[col], wrong[col] = run_col(
                col, shape,
                lambda: held.__setitem__("out", torch.ops.symcoll.all_reduce_rmsnorm_(x, residual, w, a.eps, h, algo)),
                lambda: n_wrong(held["out"], ref_out, dtype) + n_wrong(residual, ref_res, dtype), a)
            held.clear()
        if sc is not None and "symcoll_chain" in cols:
            h, held = sc.handle, {}
            res["symcoll_chain"], wrong["symcoll_chain"] = run_col(
                "symcoll_chain", shape,
                lambda: held.__setitem__("chain", F.rms_norm(torch.ops.symcoll.all_reduce(x, "sum", h) + residual0,
                                                             (hidden,), w, a.eps)),
                lambda: n_wrong(held["chain"], ref_out, dtype), a)
            held.clear()
        rows_out.append((nrows, hidden, shot, res, wrong))
        if rank == 0:
            fmt = lambda v: f"{v:>17.2f}" if v is not None else f"{'n/a':>17}"  # noqa: E731
            wfmt = lambda v: f"{v:>8}" if v is not None else f"{'-':>8}"  # noqa: E731
            fi_us, sc_us = res["flashinfer_fused"], res["symcoll_fused"]
            ratio = f"{sc_us / fi_us:.3f}" if fi_us and sc_us else "-"
            print(f"{nrows:>6} {hidden:>6} " + " ".join(fmt(res[c]) for c in all_cols) +
                  f" {shot or '-':>7} {ratio:>10} {wfmt(wrong['flashinfer_fused'])} {wfmt(wrong['symcoll_fused'])}"
                  f" {wfmt(wrong['symcoll_chain'])}" + "".join(f" {wfmt(wrong[c])}" for c in all_cols[len(COLS):]),
                  flush=True)
    path = a.csv or (os.path.join(os.environ["OUT"], f"peers_flashinfer-{world}ranks.csv") if os.environ.get("OUT") else None)
    if rank == 0 and path:
        with open(path, "w") as f:
            f.write("coll,dtype,nranks,rows,hidden," + ",".join(c + "_us" for c in all_cols) +
                    ",fi_shot,wrong_flashinfer,wrong_symcoll_fused,wrong_symcoll_chain" +
                    "".join(f",wrong_symcoll_{s}" for s in algos) + ",fi_note\n")
            for nrows, hidden, shot, res, wrong in rows_out:
                f.write(f"all_reduce_rmsnorm_,{a.d},{world},{nrows},{hidden}," +
                        ",".join("" if res[c] is None else f"{res[c]:.2f}" for c in all_cols) + f",{shot}," +
                        ",".join("" if wrong[c] is None else str(wrong[c]) for c in all_cols) +
                        f",{fi_note.replace(',', ';')}\n")
    bad = sum(v for _, _, _, _, wr in rows_out for v in wr.values() if v)
    torch.cuda.synchronize()
    dist.barrier()
    dist.destroy_process_group()
    return 3 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
