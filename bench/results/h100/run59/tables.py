#!/usr/bin/env python3
"""Run 59's tables: p59 with SYMCOLL_PDL=0 over main (m56); PDL 1 over 0 at 4 and 8 thread ranks and 2 and 4 MPS
processes; the FP8 chain with PDL on both sides; FlashInfer beside symcoll (2 MPS processes, runs 58 and 59).
Usage: python3 tables.py DIR (the run's CSVs; run 58's beside it in ../run58)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "run58"))
from tables import load, num, ratio, span  # noqa: E402  (run 58's helpers)

AR = ["oneshot_us", "twoshot_us", "lamport_us", "auto_us"]


def over_main(d):
    print("p59 (SYMCOLL_PDL=0) over main, one rank, all_reduce bf16 (two turns)")
    print("| bytes | " + " | ".join(c[:-3] for c in AR) + " |")
    print("|---" * (len(AR) + 1) + "|")
    runs = {(lib, t): load(d, f"ar-{lib}-pdl0-thread1-{t}.csv") for lib in ("m56", "p59") for t in "ab"}
    for i, row in enumerate(runs[("m56", "a")]):
        cells = [span([ratio(num(runs[("p59", t)][i][c]), num(runs[("m56", t)][i][c])) for t in "ab"]) for c in AR]
        print(f"| {row['bytes']} | " + " | ".join(cells) + " |")
    print()
    print("p59 (SYMCOLL_PDL=0) over main, one rank, all_reduce_rmsnorm bf16 (two turns)")
    print("| rows x hidden | auto | chain |")
    print("|---|---|---|")
    runs = {(lib, t): load(d, f"norm-{lib}-pdl0-thread1-{t}.csv") for lib in ("m56", "p59") for t in "ab"}
    for i, row in enumerate(runs[("m56", "a")]):
        cells = [span([ratio(num(runs[("p59", t)][i][c]), num(runs[("m56", t)][i][c])) for t in "ab"])
                 for c in ("auto_us", "sequential_us")]
        print(f"| {row['rows']} x {row['hidden']} | " + " | ".join(cells) + " |")
    print()


def fp8(d):
    print("FP8 static, one rank: PDL 1 over 0 (the chain's quantisation kernel with PDL too); fused/chain")
    print("| rows x hidden | fused µs (0 -> 1) | fused | chain | fused/chain PDL 0 | PDL 1 |")
    print("|---|---|---|---|---|---|")
    runs = {(p, t): load(d, f"norm-p59-pdl{p}-thread1-fp8{t}.csv") for p in (0, 1) for t in "ab"}
    for i, row in enumerate(runs[(0, "a")]):
        def g(p, t, c):
            return num(runs[(p, t)][i][c])
        print(f"| {row['rows']} x {row['hidden']} | {g(0, 'a', 'auto_us'):.2f} -> {g(1, 'a', 'auto_us'):.2f} | "
              f"{span([ratio(g(1, t, 'auto_us'), g(0, t, 'auto_us')) for t in 'ab'])} | "
              f"{span([ratio(g(1, t, 'sequential_us'), g(0, t, 'sequential_us')) for t in 'ab'])} | "
              f"{span([ratio(g(0, t, 'auto_us'), g(0, t, 'sequential_us')) for t in 'ab'])} | "
              f"{span([ratio(g(1, t, 'auto_us'), g(1, t, 'sequential_us')) for t in 'ab'])} |")
    print()


def ranks(d):
    for mode, n in (("thread", 4), ("thread", 8), ("process", 2), ("process", 4)):
        print(f"all_reduce bf16, {n} {'thread ranks' if mode == 'thread' else 'MPS processes'} (EMULATION): "
              "PDL 1 over 0 (µs without PDL)")
        print("| bytes | " + " | ".join(c[:-3] for c in AR) + " |")
        print("|---" * (len(AR) + 1) + "|")
        a, b = load(d, f"ar-p59-pdl0-{mode}{n}-a.csv"), load(d, f"ar-p59-pdl1-{mode}{n}-a.csv")
        for x, y in zip(a, b):
            print(f"| {x['bytes']} | " + " | ".join(f"{num(x[c]):.2f}: {ratio(num(y[c]), num(x[c])):.3f}" for c in AR) + " |")
        print()


def flashinfer(d):
    print("symcoll's fused op over FlashInfer's (2 MPS processes, bf16): turns a (run 58), b, c")
    print("| rows x hidden | both with PDL | neither |")
    print("|---|---|---|")
    files = {(p, t): os.path.join(d if t != "a" else os.path.join(d, "..", "run58"), f"fi-2-pdl{p}-{t}.csv")
             for p in (0, 1) for t in "abc"}
    runs = {k: load(os.path.dirname(f), os.path.basename(f)) for k, f in files.items()}
    for i, row in enumerate(runs[(1, "a")]):
        def r(p):
            return span([ratio(num(runs[(p, t)][i]["symcoll_fused_us"]), num(runs[(p, t)][i]["flashinfer_fused_us"]))
                         for t in "abc"])
        print(f"| {row['rows']} x {row['hidden']} | {r(1)} | {r(0)} |")
    print()


if __name__ == "__main__":
    d = sys.argv[1] if len(sys.argv) > 1 else "."
    over_main(d)
    fp8(d)
    ranks(d)
    flashinfer(d)
