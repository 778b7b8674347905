#!/usr/bin/env python3
"""A tensor-parallel MLP block with symcoll, checked against a single-process reference.

    torchrun --nproc-per-node 2 examples/tp_mlp.py              # CPU ranks (torch CPU tensors)
    torchrun --nproc-per-node 8 examples/tp_mlp.py --cuda       # one GPU per rank
    SYMCOLL_TP_ONE_GPU=1 torchrun --nproc-per-node 2 examples/tp_mlp.py --cuda   # ranks sharing GPU 0 (MPS)

y = gelu(x @ W1) @ W2, with W1 split by columns and W2 by rows over the ranks (Megatron's
column-parallel then row-parallel layers), two ways:
  - tensor parallel: every rank holds all of x; y = all_reduce(gelu(x @ W1_r) @ W2_r);
  - sequence parallel: rank r holds rows r of x; h = gelu(all_gather_matmul(x_r, W1_r)),
    y_r = matmul_reduce_scatter(h, W2_r): the gather and the scatter overlap the GEMMs.
Then what a transformer block does next, fused into the all-reduce: the residual add and the
RMSNorm (torch.ops.symcoll.all_reduce_rmsnorm_: the residual updated in place, as vLLM's
fused_add_rms_norm does), and its sequence-parallel form fused into the reduce-scatter
(torch.ops.symcoll.reduce_scatter_rmsnorm: each rank normalises its own tokens, with its shard
of the residual), against torch's own rms_norm of the reference.
Every rank builds the same full weights from one seed, so it can compute the reference itself.
"""
import argparse
import contextlib
import os

import torch
import torch.nn.functional as F

import symcoll


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cuda", action="store_true")
    p.add_argument("--tokens", type=int, default=64, help="rows of x (a multiple of the ranks)")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--ffn", type=int, default=512, help="a multiple of the ranks")
    a = p.parse_args()
    gpu = 0 if os.environ.get("SYMCOLL_TP_ONE_GPU") == "1" else int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", gpu) if a.cuda else torch.device("cpu")
    if a.cuda:
        torch.cuda.set_device(dev)
    with symcoll.Comm.from_env(device=dev.index if a.cuda else None) as comm:
        r, n = comm.rank, comm.nranks
        ops, h = torch.ops.symcoll, comm.handle
        g = torch.Generator().manual_seed(1234)
        x = torch.randn(a.tokens, a.hidden, generator=g).to(dev)
        w1 = (torch.randn(a.hidden, a.ffn, generator=g) / a.hidden ** 0.5).to(dev)
        w2 = (torch.randn(a.ffn, a.hidden, generator=g) / a.ffn ** 0.5).to(dev)
        ref = F.gelu(x @ w1) @ w2
        f = a.ffn // n
        w1_r, w2_r = w1[:, r * f:(r + 1) * f].contiguous(), w2[r * f:(r + 1) * f].contiguous()

        # Tensor parallel: the row-parallel layer's partial sums meet in an all-reduce. On GPUs
        # the layer runs inside the communicator's memory pool: its output is symmetric memory,
        # which peers read where it lies, zero-copy (out of place; SYMCOLL_DEBUG=INFO says
        # "input in symmetric memory").
        with comm.mem_pool() if a.cuda else contextlib.nullcontext():
            partial = F.gelu(x @ w1_r) @ w2_r
        zero_copy = comm.is_symmetric(partial)
        y = ops.all_reduce(partial, "sum", h)

        # Sequence parallel: x and y sharded by tokens; the collectives fused with the GEMMs.
        t = a.tokens // n
        x_r = x[r * t:(r + 1) * t].contiguous()
        hidden, _ = ops.all_gather_matmul(x_r, w1_r, h, "auto")
        y_r = ops.matmul_reduce_scatter(F.gelu(hidden), w2_r, h, "auto")

        # The block's end: all-reduce + residual add + RMSNorm in one call.
        residual = torch.randn(a.tokens, a.hidden, generator=g).to(dev)
        norm_w = (1 + 0.1 * torch.randn(a.hidden, generator=g)).to(dev)
        ref_res = residual + ref
        ref_norm = F.rms_norm(ref_res, (a.hidden,), norm_w, eps=1e-6)
        residual_r = residual[r * t:(r + 1) * t].clone()  # sequence parallel's shard, before the update
        normed = ops.all_reduce_rmsnorm_(F.gelu(x @ w1_r) @ w2_r, residual, norm_w, 1e-6, h, "auto")
        # Sequence parallel: reduce-scatter + residual add + RMSNorm of this rank's tokens in one call.
        normed_r, res_r = ops.reduce_scatter_rmsnorm(F.gelu(x @ w1_r) @ w2_r, residual_r, norm_w, 1e-6, h, "auto")

        tol = dict(rtol=1e-4, atol=1e-4)
        ok_norm = torch.allclose(normed, ref_norm, **tol) and torch.allclose(residual, ref_res, **tol)
        mine = slice(r * t, (r + 1) * t)
        ok_norm_sp = torch.allclose(normed_r, ref_norm[mine], **tol) and torch.allclose(res_r, ref_res[mine], **tol)
        ok_tp = torch.allclose(y, ref, **tol)
        ok_sp = torch.allclose(y_r, ref[r * t:(r + 1) * t], **tol)
        comm.barrier()
        print(f"rank {r} of {n}: tensor parallel{' (zero-copy from the pool)' if zero_copy else ''} "
              f"{'matches' if ok_tp else 'DIFFERS FROM'} the reference "
              f"(max error {(y - ref).abs().max().item():.2e}); sequence parallel "
              f"{'matches' if ok_sp else 'DIFFERS FROM'} it (max error {(y_r - ref[r * t:(r + 1) * t]).abs().max().item():.2e}); "
              f"all-reduce + residual + RMSNorm {'matches' if ok_norm else 'DIFFERS FROM'} torch's "
              f"(max error {(normed - ref_norm).abs().max().item():.2e}), and its sequence-parallel form "
              f"{'matches' if ok_norm_sp else 'DIFFERS FROM'} them (max error "
              f"{(normed_r - ref_norm[mine]).abs().max().item():.2e})",
              flush=True)
        if not (ok_tp and ok_sp and ok_norm and ok_norm_sp):
            raise SystemExit(1)


if __name__ == "__main__":
    main()
