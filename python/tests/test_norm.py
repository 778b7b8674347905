"""all_reduce_rmsnorm (and reduce_scatter_rmsnorm) through the package: Comm.all_reduce_rmsnorm and
Comm.reduce_scatter_rmsnorm with numpy arrays (always) and
torch CPU tensors, and the torch ops all_reduce_rmsnorm, all_reduce_rmsnorm_ and
all_reduce_rmsnorm_fp8 (eager, opcheck, torch.compile(fullgraph=True)), on CPU ranks, against a
reference computed here: the sum over ranks in fp32 in rank order rounded to the dtype, plus the
residual in fp32 rounded to the dtype, must equal residual_out bit for bit; out is compared with
an fp64 RMSNorm of that r (and, with torch, torch's own rms_norm), the fp8 output with the
quantisation of out (exactly with torch's float8_e4m3fn; the nearest e4m3 value with numpy), the
per-row scales exactly. Cases named *torch* are left out of the quick run, as in test_symcoll."""
import importlib.util
import os
import uuid

import numpy as np
import pytest

import symcoll
from conftest import run_ranks

HAVE_TORCH = importlib.util.find_spec("torch") is not None
ALGOS = [None, "oneshot", "twoshot", "lamport", "sequential"]
TOL = {"float32": 3e-5, "float16": 1.1 / 1024, "bfloat16": 1.1 / 128}  # relative, of out against fp64
ATOL = {"float32": 1e-30, "float16": 6e-8, "bfloat16": 1e-30}  # fp16's subnormals
EPS = 1e-5
FP8_MAX = 448.0


def _rng(seed, rank):
    return np.random.default_rng(seed * 1000 + rank)


def np_inputs(dtype, n, rows, hidden, seed=1):
    """Every rank's x (different on each), the residual and the weight (one for all)."""
    xs = [(_rng(seed, r).standard_normal((rows, hidden)) * (1 + r)).astype(dtype) for r in range(n)]
    residual = (_rng(seed, 100).standard_normal((rows, hidden)) * 2).astype(dtype)
    weight = (1 + 0.5 * _rng(seed, 101).standard_normal(hidden)).astype(dtype)
    return xs, residual, weight


def np_reference(xs, residual, weight, eps):
    """(r in the dtype, out in fp64): what symcoll.h says the call computes."""
    dt = xs[0].dtype
    s = xs[0].astype(np.float32)
    for x in xs[1:]:
        s = s + x.astype(np.float32)  # fp32, rank order
    r = s.astype(dt)
    if residual is not None:
        r = (r.astype(np.float32) + residual.astype(np.float32)).astype(dt)
    r64 = r.astype(np.float64)
    out64 = r64 / np.sqrt((r64 * r64).mean(-1, keepdims=True) + eps) * weight.astype(np.float64)
    return r, out64


def close(got, want64, dtype):
    err = np.abs(got.astype(np.float64) - want64)
    return bool((err <= TOL[dtype] * np.abs(want64) + ATOL[dtype]).all())


def e4m3_values():
    """The 256 e4m3fn codes as floats (0x7f and 0xff: NaN)."""
    b = np.arange(256)
    e, m = (b >> 3) & 15, (b & 7).astype(np.float64)
    v = np.where(e == 0, m / 8 * 2.0 ** -6, (1 + m / 8) * 2.0 ** (e - 7.0))
    v = np.where(b & 0x80, -v, v)
    v[(b & 0x7F) == 0x7F] = np.nan
    return v


E4M3 = e4m3_values()
FINITE = np.unique(E4M3[~np.isnan(E4M3)])  # sorted, -448 ... 448


def fp8_nearest(q, out, scale):
    """Whether every code of q is an e4m3 value nearest out x (1 / scale) (fp32), saturated to +-448."""
    rcp = np.float32(1) / np.asarray(scale, np.float32)
    v = np.clip(out.astype(np.float32) * rcp, -FP8_MAX, FP8_MAX).astype(np.float64).ravel()
    i = np.clip(np.searchsorted(FINITE, v), 1, len(FINITE) - 1)
    best = np.minimum(np.abs(FINITE[i] - v), np.abs(FINITE[i - 1] - v))
    return bool((np.abs(E4M3[q.ravel()] - v) == best).all())


def np_row_scales(out):
    amax = np.abs(out.astype(np.float32)).max(-1)
    return np.maximum(amax / np.float32(FP8_MAX), np.float32(1.0 / (FP8_MAX * 512.0)))


# ---- numpy arrays ----------------------------------------------------------------------------------

def _not_refused(call, base, cases, tag=""):
    """The cases (changes to the keyword arguments base) that call did not refuse."""
    failures = []
    for kw in cases:
        try:
            call(**dict(base, **kw))
            failures.append(f"{tag}not refused: {sorted(kw)}")
        except symcoll.InvalidArgumentError:
            pass
    return failures


def _comm(n):
    """One rank runs in the test's own process (no process to start); more, from run_ranks."""
    return symcoll.Comm(0, 1, f"py.norm.{uuid.uuid4().hex[:12]}") if n == 1 else symcoll.Comm.from_env()


def _norm_numpy_rank(rank, n):
    failures = []
    with _comm(n) as comm:
        for dt in ("float32", "float16"):
            for rows, hidden in ((5, 67), (40, 256)):  # rows not a multiple of n; 40 x 256: several chunks at 16K
                xs, res, w = np_inputs(dt, n, rows, hidden)
                r_ref, out_ref = np_reference(xs, res, w, EPS)
                s_ref, _ = np_reference(xs, None, w, EPS)
                x = xs[rank]
                for algo in ALGOS:
                    tag = f"{dt} {rows}x{hidden} {algo}"
                    ro = np.full_like(x, np.nan)
                    out = comm.all_reduce_rmsnorm(x, res, w, EPS, residual_out=ro, algo=algo)  # out: new
                    if not np.array_equal(ro, r_ref):
                        failures.append(f"{tag}: residual_out")
                    if not close(out, out_ref, dt):
                        failures.append(f"{tag}: out")
                    # in place: out over x, residual_out over residual
                    xi, ri = x.copy(), res.copy()
                    got = comm.all_reduce_rmsnorm(xi, ri, w, EPS, out=xi, residual_out=ri, algo=algo)
                    if got is not xi or not np.array_equal(ri, r_ref) or not np.array_equal(xi, out):
                        failures.append(f"{tag}: in place")
                    # no residual: residual_out is the sum
                    so = np.empty_like(x)
                    comm.all_reduce_rmsnorm(x, None, w, EPS, residual_out=so, algo=algo)
                    if not np.array_equal(so, s_ref):
                        failures.append(f"{tag}: no residual")
                    # fp8, dynamic per-row scales, no out
                    q, sc = np.empty(x.shape, np.uint8), np.empty(rows, np.float32)
                    if comm.all_reduce_rmsnorm(x, res, w, EPS, fp8_out=q, fp8_row_scales=sc, algo=algo) is not None:
                        failures.append(f"{tag}: fp8 alone returned an out")
                    if not np.array_equal(sc, np_row_scales(out)) or not fp8_nearest(q, out, sc[:, None]):
                        failures.append(f"{tag}: fp8 per row")
                    deq = E4M3[q] * sc[:, None]
                    if not (np.abs(deq - out.astype(np.float64)) <= np.abs(out.astype(np.float64)) / 16 + sc[:, None]
                            * 2.0 ** -9).all():
                        failures.append(f"{tag}: fp8 per row, dequantised")
                    # fp8, static scale (some values saturate), beside out
                    scale = float(np.abs(out.astype(np.float32)).max()) / 600
                    q2, out2 = np.empty(x.shape, np.uint8), np.empty_like(x)
                    comm.all_reduce_rmsnorm(x, res, w, EPS, out=out2, fp8_out=q2, fp8_scale=scale, algo=algo)
                    if not np.array_equal(out2, out) or not fp8_nearest(q2, out, np.float32(scale)):
                        failures.append(f"{tag}: fp8 static")
                    if 0x7E not in (q2 & 0x7F):
                        failures.append(f"{tag}: fp8 static never saturated")
        # the zero-copy path: x in a symmetric array
        xs, res, w = np_inputs("float32", n, 9, 128, seed=2)
        r_ref, out_ref = np_reference(xs, res, w, EPS)
        sym = comm.empty((9, 128), "float32")
        sym[:] = xs[rank]
        for algo in ALGOS:
            ro = np.empty_like(res)
            out = comm.all_reduce_rmsnorm(sym, res, w, EPS, residual_out=ro, algo=algo)
            if not np.array_equal(ro, r_ref) or not close(out, out_ref, "float32"):
                failures.append(f"symmetric x {algo}")
        # refusals, before C (every rank alike, so no rank is left waiting)
        x, res, w = xs[rank], res, w
        bad = [dict(weight=np.ones(127, np.float32)), dict(residual=res[:8]), dict(residual=res.astype(np.float16)),
               dict(out=np.empty((9, 127), np.float32)), dict(fp8_out=np.empty(x.shape, np.uint8)),
               dict(fp8_out=np.empty(x.shape, np.int8), fp8_scale=1.0),
               dict(fp8_out=np.empty(x.shape, np.uint8), fp8_row_scales=np.empty(8, np.float32)),
               dict(fp8_out=np.empty(x.shape, np.uint8), fp8_row_scales=np.empty(9, np.float32),
                    fp8_scale_out=np.empty(1, np.float32)),
               dict(fp8_out=np.empty(x.shape, np.uint8), fp8_scale=1.0, fp8_scale_out=np.empty(2, np.float32)),
               dict(fp8_scale=1.0), dict(fp8_scale_out=np.empty(1, np.float32)), dict(algo="nosuch"),
               dict(x=x.astype(np.float64))]
        base = dict(x=x, residual=res, weight=w, eps=EPS)
        failures += _not_refused(comm.all_reduce_rmsnorm, base, bad)
        # and from C: a negative eps, an algorithm of another collective
        failures += _not_refused(comm.all_reduce_rmsnorm, base, [dict(eps=-1.0), dict(algo="pull")])
        ro = np.empty_like(res)  # still in step
        comm.all_reduce_rmsnorm(x, res, w, EPS, residual_out=ro)
        if not np.array_equal(ro, r_ref):
            failures.append("after the refusals")
    return failures


def _scatter_numpy_rank(rank, n):
    """reduce_scatter_rmsnorm: this rank's shard of all_reduce_rmsnorm's rows, bit for bit."""
    failures = []
    with _comm(n) as comm:
        for dt in ("float32", "float16"):
            for rows, hidden in ((3, 67), (20, 256)):  # per rank; 20 x 256 x 3: several chunks at 16K
                xs, res, w = np_inputs(dt, n, n * rows, hidden)
                r_ref, out_ref = np_reference(xs, res, w, EPS)
                mine = slice(rank * rows, (rank + 1) * rows)
                x, res_mine = xs[rank], res[mine].copy()
                full = comm.all_reduce_rmsnorm(x, res, w, EPS, algo="oneshot")
                for algo in (None, "pull", "sequential"):
                    tag = f"scatter {dt} {rows}x{hidden} {algo}"
                    ro = np.full((rows, hidden), np.nan, dt)
                    out = comm.reduce_scatter_rmsnorm(x, res_mine, w, EPS, residual_out=ro, algo=algo)
                    if out.shape != (rows, hidden) or out.dtype != x.dtype:
                        failures.append(f"{tag}: out is {out.shape} {out.dtype}")
                        continue
                    if not np.array_equal(ro, r_ref[mine]):
                        failures.append(f"{tag}: residual_out")
                    if not np.array_equal(out, full[mine]) or not close(out, out_ref[mine], dt):
                        failures.append(f"{tag}: out (against all_reduce_rmsnorm's rows and fp64)")
                    # in place: out over x's own shard, residual_out over residual; the other shards untouched
                    xi, ri = x.copy(), res_mine.copy()
                    comm.reduce_scatter_rmsnorm(xi, ri, w, EPS, out=xi[mine], residual_out=ri, algo=algo)
                    rest = np.ones(n * rows, bool)
                    rest[mine] = False
                    if (not np.array_equal(xi[mine], out) or not np.array_equal(ri, r_ref[mine])
                            or not np.array_equal(xi[rest], x[rest])):
                        failures.append(f"{tag}: in place")
                    # fp8 with per-row scales alone
                    q, sc = np.empty((rows, hidden), np.uint8), np.empty(rows, np.float32)
                    if comm.reduce_scatter_rmsnorm(x, res_mine, w, EPS, fp8_out=q, fp8_row_scales=sc,
                                                   algo=algo) is not None:
                        failures.append(f"{tag}: fp8 alone returned an out")
                    if not np.array_equal(sc, np_row_scales(out)) or not fp8_nearest(q, out, sc[:, None]):
                        failures.append(f"{tag}: fp8 per row")
        # zero-copy: x in a symmetric array, out of place and in place over its own shard
        xs, res, w = np_inputs("float32", n, n * 9, 128, seed=2)
        r_ref, out_ref = np_reference(xs, res, w, EPS)
        mine = slice(rank * 9, (rank + 1) * 9)
        sym = comm.empty((n * 9, 128), "float32")
        for algo in (None, "pull", "sequential"):
            sym[:] = xs[rank]
            comm.barrier()
            ro = np.empty((9, 128), np.float32)
            out = comm.reduce_scatter_rmsnorm(sym, res[mine], w, EPS, residual_out=ro, algo=algo)
            if not np.array_equal(ro, r_ref[mine]) or not close(out, out_ref[mine], "float32"):
                failures.append(f"scatter symmetric x {algo}")
            comm.barrier()
            comm.reduce_scatter_rmsnorm(sym, res[mine], w, EPS, out=sym[mine], algo=algo)
            if not np.array_equal(sym[mine], out):
                failures.append(f"scatter symmetric x in place {algo}")
            comm.barrier()
        # refusals (every rank alike): shapes before C, algorithms of the other form from C
        x = xs[rank]
        bad = [dict(x=x[:, 0].copy()), dict(residual=res[:8]), dict(algo="twoshot"), dict(algo="oneshot"),
               dict(fp8_out=np.empty((9, 128), np.uint8), fp8_row_scales=np.empty(10, np.float32))]
        if n > 1:  # the whole rows where the shard's are wanted; rows that do not split
            bad += [dict(residual=res), dict(out=np.empty_like(x)), dict(x=x[:-1], residual=res[:8])]
        failures += _not_refused(comm.reduce_scatter_rmsnorm, dict(x=x, residual=res[mine], weight=w, eps=EPS), bad,
                                 "scatter ")
        ro = np.empty((9, 128), np.float32)  # still in step
        comm.reduce_scatter_rmsnorm(x, res[mine], w, EPS, residual_out=ro)
        if not np.array_equal(ro, r_ref[mine]):
            failures.append("scatter after the refusals")
    return failures


@pytest.mark.parametrize("form", ["all_reduce", "reduce_scatter"])
@pytest.mark.parametrize("n,workspace", [(1, None), (2, None), (3, "16K")])
def test_rmsnorm_numpy(form, n, workspace):
    rank_fn = _norm_numpy_rank if form == "all_reduce" else _scatter_numpy_rank
    if n == 1:
        assert rank_fn(0, 1) == []
        return
    env = {"SYMCOLL_WORKSPACE_BYTES": workspace} if workspace else {}
    assert run_ranks(rank_fn, n, timeout=120, env=env) == [[]] * n


# ---- torch: the method with tensors, the ops ---------------------------------------------------------

def _t_inputs(torch, dt, n, shape, seed=3):
    xs, res, w = np_inputs("float32", n, int(np.prod(shape[:-1])), shape[-1], seed)
    t = lambda a, s: torch.from_numpy(a).reshape(s).to(dt)  # noqa: E731
    return [t(x, shape) for x in xs], t(res, shape), t(w, shape[-1:])


def _t_reference(torch, xs, residual, weight, eps):
    """(r, out in fp64, torch's rms_norm of r in fp32 rounded to the dtype)."""
    s = xs[0].float()
    for x in xs[1:]:
        s = s + x.float()
    r = s.to(xs[0].dtype)
    if residual is not None:
        r = (r.float() + residual.float()).to(r.dtype)
    r64 = r.double()
    out64 = r64 * torch.rsqrt(r64.pow(2).mean(-1, keepdim=True) + eps) * weight.double()
    ref_torch = torch.nn.functional.rms_norm(r.float(), (r.shape[-1],), weight.float(), eps).to(r.dtype)
    return r, out64, ref_torch


def _t_close(torch, got, want64, name, k=1.0):
    err = (got.double() - want64).abs()
    return bool((err <= k * TOL[name] * want64.abs() + ATOL[name]).all())


def _t_fp8(torch, out, scales):
    """out quantised as symcoll.h says: out x (1 / scale) in fp32, saturated, rounded to nearest even."""
    return (out.float() * torch.reciprocal(scales.float())).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)


def _t_row_scales(torch, out):
    amax = out.float().abs().amax(-1, keepdim=True)
    return torch.clamp(amax / FP8_MAX, min=torch.tensor(1.0 / (FP8_MAX * 512.0), dtype=torch.float32).item())


def _norm_torch_rank(rank, n):
    import torch

    ops = torch.ops.symcoll
    bits = lambda q: q.view(torch.uint8)  # noqa: E731
    with _comm(n) as comm:
        h = comm.handle
        for dt in (torch.float32, torch.bfloat16, torch.float16):
            name = str(dt).replace("torch.", "")
            xs, res, w = _t_inputs(torch, dt, n, (3, 5, 72))  # leading dimensions: 15 rows
            r_ref, out64, out_torch = _t_reference(torch, xs, res, w, EPS)
            s_ref = _t_reference(torch, xs, None, w, EPS)[0]
            x = xs[rank]
            for algo in ("auto", "oneshot", "twoshot", "lamport", "sequential"):
                tag = (name, algo)
                out, ro = ops.all_reduce_rmsnorm(x, res, w, EPS, h, algo)
                assert out.shape == x.shape and out.dtype == dt, tag
                assert torch.equal(ro, r_ref), tag
                assert _t_close(torch, out, out64, name), tag
                assert _t_close(torch, out, out_torch.double(), name, k=2.0), tag  # within an ulp of torch's
                out_s, ro_s = ops.all_reduce_rmsnorm(x, None, w, EPS, h, algo)
                assert torch.equal(ro_s, s_ref), tag
                r2 = res.clone()
                out2 = ops.all_reduce_rmsnorm_(x, r2, w, EPS, h, algo)  # residual in place
                assert torch.equal(r2, r_ref) and torch.equal(out2, out), tag
                q, sc, ro3 = ops.all_reduce_rmsnorm_fp8(x, res, w, EPS, None, h, algo)  # dynamic
                assert q.dtype == torch.float8_e4m3fn and sc.shape == (3, 5, 1) and torch.equal(ro3, r_ref), tag
                assert torch.equal(sc, _t_row_scales(torch, out)), tag
                assert torch.equal(bits(q), bits(_t_fp8(torch, out, sc))), tag
                deq = q.float() * sc
                assert ((deq - out.float()).abs() <= out.float().abs() / 16 + sc * 2.0 ** -9).all(), tag
                scale = torch.tensor([out.float().abs().max().item() / 600])  # some saturate
                q2, sc2, _ = ops.all_reduce_rmsnorm_fp8(x, res, w, EPS, scale, h, algo)  # static
                assert torch.equal(sc2, scale) and torch.equal(bits(q2), bits(_t_fp8(torch, out, scale))), tag
                assert (bits(q2) & 0x7F == 0x7E).any(), tag
            # the method with tensors: out in place over x, fp8 as float8_e4m3fn with a float scale
            xi = x.clone()
            q3 = torch.empty(x.shape, dtype=torch.float8_e4m3fn)
            scale = out.float().abs().max().item() / 300
            got = comm.all_reduce_rmsnorm(xi, res, w, EPS, out=xi, fp8_out=q3, fp8_scale=scale, algo="twoshot")
            assert got is xi and torch.equal(xi, out), name
            assert torch.equal(bits(q3), bits(_t_fp8(torch, out, torch.tensor(scale, dtype=torch.float32)))), name
            # the scale as a tensor, and its copy written by the call; a float64 scale (the op copies it)
            st, so = torch.tensor([scale], dtype=torch.float32), torch.full((1,), -1.0)
            comm.all_reduce_rmsnorm(x, res, w, EPS, fp8_out=q3, fp8_scale=st, fp8_scale_out=so, algo="oneshot")
            assert torch.equal(so, st) and torch.equal(bits(q3), bits(_t_fp8(torch, out, st))), name
            q4, sc4, _ = ops.all_reduce_rmsnorm_fp8(x, res, w, EPS, st.double().reshape(()), h, "auto")
            assert sc4.dtype == torch.float32 and sc4.shape == (1,) and torch.equal(sc4, st), name
            assert torch.equal(bits(q4), bits(q3)), name
            # reduce_scatter_rmsnorm: this rank's shard of the first dimension, all_reduce_rmsnorm's bits
            xs2, res2, w2 = _t_inputs(torch, dt, n, (2 * n, 3, 40))
            full, full_ro = ops.all_reduce_rmsnorm(xs2[rank], res2, w2, EPS, h, "oneshot")
            scale2 = torch.tensor([full.float().abs().max().item() / 300])
            full_q = [ops.all_reduce_rmsnorm_fp8(xs2[rank], res2, w2, EPS, s, h, "oneshot") for s in (None, scale2)]
            mine = slice(2 * rank, 2 * rank + 2)
            for algo in ("auto", "pull", "sequential"):
                out_s, ro_s = ops.reduce_scatter_rmsnorm(xs2[rank], res2[mine], w2, EPS, h, algo)
                assert out_s.shape == (2, 3, 40) and out_s.dtype == dt, (name, algo)
                assert torch.equal(out_s, full[mine]) and torch.equal(ro_s, full_ro[mine]), (name, algo)
                r_in = res2[mine].clone()
                out_i = ops.reduce_scatter_rmsnorm_(xs2[rank], r_in, w2, EPS, h, algo)  # the shard in place
                assert torch.equal(out_i, full[mine]) and torch.equal(r_in, full_ro[mine]), (name, algo)
                r_flat = res2[mine].reshape(-1, 40).clone()  # a residual of the shard's elements, other shape
                out_f = ops.reduce_scatter_rmsnorm_(xs2[rank], r_flat, w2, EPS, h, algo)
                assert out_f.shape == (2, 3, 40) and torch.equal(out_f, full[mine]), (name, algo)
                for s, (fq, fsc, _) in zip((None, scale2), full_q):  # the fp8 outputs, per row and static
                    q, sc, ro_q = ops.reduce_scatter_rmsnorm_fp8(xs2[rank], res2[mine], w2, EPS, s, h, algo)
                    assert q.shape == (2, 3, 40) and torch.equal(bits(q), bits(fq[mine])), (name, algo, s)
                    assert torch.equal(sc, fsc[mine] if s is None else fsc) and torch.equal(ro_q, full_ro[mine])
        # refusals: the wrong weight, residual or scale (the compiled kernels raise RuntimeError
        # with symcoll's message, the Python ones the package's exceptions)
        refused = (RuntimeError if "all_reduce_rmsnorm" in symcoll.ops.COMPILED else symcoll.InvalidArgumentError,)
        x, res, w = (t.to(torch.bfloat16) for t in (xs[rank], res, w))
        for args in ((x, res, w[:-1]), (x, res[:2], w), (x, res.float(), w)):
            with pytest.raises(refused, match="all_reduce_rmsnorm"):
                ops.all_reduce_rmsnorm(*args, EPS, h)
        with pytest.raises(refused, match="all_reduce_rmsnorm_fp8"):
            ops.all_reduce_rmsnorm_fp8(x, res, w, EPS, torch.ones(2), h)
        refused_rs = (RuntimeError if "reduce_scatter_rmsnorm" in symcoll.ops.COMPILED
                      else symcoll.InvalidArgumentError,)
        xr = torch.ones((2 * n, 8), dtype=torch.bfloat16)
        bad = [(xr, xr[:1], xr[0]), (xr[:, 0].contiguous(), None, xr[0, :1])]  # residual not the shard's; 1-D x
        if n > 1:
            bad.append((xr[:-1], None, xr[0]))  # rows that do not split
        for args in bad:
            with pytest.raises(refused_rs, match="reduce_scatter_rmsnorm"):
                ops.reduce_scatter_rmsnorm(*args, EPS, h)

        # torch.compile(fullgraph=True): the three ops in one graph, against eager
        def block(x, res, w, scale):
            out, ro = ops.all_reduce_rmsnorm(x, res, w, EPS, h)
            out2 = ops.all_reduce_rmsnorm_(x, res, w, EPS, h)  # res <- r
            q, sc, _ = ops.all_reduce_rmsnorm_fp8(out2, ro, w, EPS, scale, h)
            out3, ro3 = ops.reduce_scatter_rmsnorm(out2, ro[:6 // n], w, EPS, h)
            r4 = ro3.clone()
            out4 = ops.reduce_scatter_rmsnorm_(out, r4, w, EPS, h)  # r4 <- r
            return out, out2, q.view(torch.uint8), sc, res, out3, ro3, out4, r4

        backend = "eager" if os.environ.get("SYMCOLL_TEST_EAGER_COMPILE") else "inductor"
        compiled = torch.compile(block, fullgraph=True, backend=backend)
        xs, res, w = _t_inputs(torch, torch.bfloat16, n, (6, 64))
        want = block(xs[rank], res.clone(), w, None)
        got = compiled(xs[rank], res.clone(), w, None)
        for a, b in zip(got, want):
            assert torch.equal(a, b)
        if n == 1:
            x, res, w = _t_inputs(torch, torch.float32, 1, (4, 16))
            torch.library.opcheck(ops.all_reduce_rmsnorm, (x[0], res, w, EPS, h, "oneshot"))
            torch.library.opcheck(ops.all_reduce_rmsnorm, (x[0], None, w, EPS, h))
            torch.library.opcheck(ops.all_reduce_rmsnorm_, (x[0], res.clone(), w, EPS, h))
            torch.library.opcheck(ops.all_reduce_rmsnorm_fp8, (x[0], res, w, EPS, None, h))
            torch.library.opcheck(ops.all_reduce_rmsnorm_fp8, (x[0], res, w, EPS, torch.tensor([0.01]), h))
            torch.library.opcheck(ops.reduce_scatter_rmsnorm, (x[0], res, w, EPS, h, "pull"))
            torch.library.opcheck(ops.reduce_scatter_rmsnorm, (x[0], None, w, EPS, h))
            torch.library.opcheck(ops.reduce_scatter_rmsnorm_, (x[0], res.clone(), w, EPS, h))
            torch.library.opcheck(ops.reduce_scatter_rmsnorm_fp8, (x[0], res, w, EPS, None, h))
            torch.library.opcheck(ops.reduce_scatter_rmsnorm_fp8, (x[0], res, w, EPS, torch.tensor([0.01]), h))
    return True


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("n", [1, 2])
def test_rmsnorm_torch_cpu(n):
    if n == 1:
        assert _norm_torch_rank(0, 1)
    else:
        assert run_ranks(_norm_torch_rank, n, timeout=300) == [True] * n
