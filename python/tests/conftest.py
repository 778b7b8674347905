"""Helpers of the symcoll Python tests: ranks as processes, each bounded in time."""
import multiprocessing as mp
import os
import traceback
import uuid

import pytest


def _rank_main(fn, rank, n, job, env, q):
    os.environ.update(env)
    os.environ.update({"SYMCOLL_RANK": str(rank), "SYMCOLL_NRANKS": str(n), "SYMCOLL_JOB_ID": job})
    try:
        q.put((rank, fn(rank, n), None))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, with where it happened
        where = traceback.extract_tb(e.__traceback__)[-1]
        q.put((rank, None, f"{type(e).__name__}: {e} (at {os.path.basename(where.filename)}:{where.lineno}: {where.line})"))


def run_ranks(fn, n, timeout=60, env=None):
    """Runs fn(rank, n) in n processes (spawned) with SYMCOLL_RANK/NRANKS/JOB_ID set; returns
    the results by rank, raising if a rank failed or the job outlived `timeout` seconds."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    job = f"py.{uuid.uuid4().hex[:12]}"
    procs = [ctx.Process(target=_rank_main, args=(fn, r, n, job, dict(env or {}), q)) for r in range(n)]
    for p in procs:
        p.start()
    results, errors = {}, []
    try:
        for _ in range(n):
            rank, value, err = q.get(timeout=timeout)
            results[rank] = value
            if err:
                errors.append(f"rank {rank}: {err}")
    except Exception:  # noqa: BLE001 - a rank hung or died
        errors.append(f"ranks {sorted(set(range(n)) - set(results))} did not report within {timeout} s")
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
    if errors:
        pytest.fail("; ".join(errors))
    return [results[r] for r in range(n)]
