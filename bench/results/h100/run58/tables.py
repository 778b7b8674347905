#!/usr/bin/env python3
"""Run 58's tables: SYMCOLL_PDL=1 over 0 (the same library), all_reduce and all_reduce_rmsnorm.
Usage: python3 tables.py DIR (the run's CSVs)."""
import csv
import os
import sys


def load(d, name):
    with open(os.path.join(d, name)) as f:
        return list(csv.DictReader(f))


def num(x):
    try:
        return float(x)
    except ValueError:
        return None


def span(rs):
    rs = [r for r in rs if r is not None]
    return f"{min(rs):.3f}-{max(rs):.3f}" if rs else "-"


def ratio(b, a):
    return b / a if a and b else None


def all_reduce(d, ranks, turns):
    cols = ["oneshot_us", "twoshot_us", "lamport_us", "auto_us"]
    runs = {(p, t): load(d, f"ar-{ranks}-pdl{p}-{t}.csv") for p in (0, 1) for t in turns}
    print(f"all_reduce, {ranks} thread rank(s), bf16: PDL 1 over 0 (µs without PDL, first turn)")
    print("| bytes | " + " | ".join(c[:-3] for c in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for i, row in enumerate(runs[(0, turns[0])]):
        cells = []
        for c in cols:
            rs = [ratio(num(runs[(1, t)][i][c]), num(runs[(0, t)][i][c])) for t in turns]
            cells.append(f"{num(row[c]):.2f}: {span(rs)}")
        print(f"| {row['bytes']} | " + " | ".join(cells) + " |")
    print()


def norm(d, ranks, turns):
    runs = {(p, t): load(d, f"norm-{ranks}-pdl{p}-{t}.csv") for p in (0, 1) for t in turns}
    print(f"all_reduce_rmsnorm, {ranks} thread rank(s), bf16, turns {','.join(turns)}: PDL 1 over 0; fused/chain")
    print("| rows x hidden | auto µs (PDL 0 -> 1) | auto | chain | fused/chain PDL 0 | PDL 1 |")
    print("|---|---|---|---|---|---|")
    for i, row in enumerate(runs[(0, turns[0])]):
        a = [ratio(num(runs[(1, t)][i]["auto_us"]), num(runs[(0, t)][i]["auto_us"])) for t in turns]
        s = [ratio(num(runs[(1, t)][i]["sequential_us"]), num(runs[(0, t)][i]["sequential_us"])) for t in turns]
        f0 = [ratio(num(runs[(0, t)][i]["auto_us"]), num(runs[(0, t)][i]["sequential_us"])) for t in turns]
        f1 = [ratio(num(runs[(1, t)][i]["auto_us"]), num(runs[(1, t)][i]["sequential_us"])) for t in turns]
        print(f"| {row['rows']} x {row['hidden']} | {num(row['auto_us']):.2f} -> "
              f"{num(runs[(1, turns[0])][i]['auto_us']):.2f} | {span(a)} | {span(s)} | {span(f0)} | {span(f1)} |")
    print()


if __name__ == "__main__":
    d = sys.argv[1] if len(sys.argv) > 1 else "."
    all_reduce(d, 1, ["a", "b"])
    all_reduce(d, 2, ["a", "b"])
    norm(d, 1, ["a", "b"])
    norm(d, 1, ["fp8"])
    norm(d, 2, ["a"])
