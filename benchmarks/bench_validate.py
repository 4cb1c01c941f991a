"""Benchmark: validating a large sweep config (what `mascot validate`, `mascot run` and every Slurm array task
do before anything runs), the shipped path beside the per-point reference, in one process.

    python benchmarks/bench_validate.py [--points 990000] [--reps 3] [--json-out FILE]

"shipped" is ``mascot.sweep.parse_config``: each written value checked once, then only the cross-parameter
checks per point (derived costs, eta > eps, what the dtype can hold). "per point" is the reference it must
agree with: every grid point completed and checked in full (``mascot.sweep.config._check_point``), the
algorithm before 2026-12-01. Both see the same consensus grid (float32) and accept it. Repetitions are
interleaved; the best of each is reported (wall seconds, one core).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time

from mascot.sweep import config as config_mod
from mascot.sweep import parse_config
from mascot.sweep.kinds import KINDS

CONFIG = """
[experiment]
kind = "consensus"
name = "bench_validate"
seed = 1
max_points = {max_points}
[fixed]
trajectories = 4
d = 6
tokens_ring = 10.0
max_rounds = 400
[grid]
n = [5, 8, 16, 32, 64]
strategy = ["adaptive", "complete", "ring"]
b0 = {{ logspace = [1e2, 1e6, {b0s}] }}
eta = {{ linspace = [0.05, 0.2, 20] }}
eps = {{ linspace = [0.01, 0.04, 10] }}
tokens_complete = [1.0, 10.0, 30.0, 50.0, 70.0]
x0_spread = [0.1, 0.2]
"""


def per_point(text: str) -> int:
    """Parse without point checks, then every point through the full reference check."""
    saved = config_mod._validate_points
    config_mod._validate_points = lambda *a: None
    try:
        cfg = parse_config(text)
    finally:
        config_mod._validate_points = saved
    spec = KINDS[cfg.kind]
    for start in range(0, cfg.n_points, 4096):
        for p in cfg.points(start, start + 4096):
            config_mod._check_point(spec, p, cfg.dtype)
    return cfg.n_points


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=990_000, help="grid points (rounded to a multiple of 30,000)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json-out")
    args = ap.parse_args()
    b0s = max(1, round(args.points / 30_000))
    n = 30_000 * b0s
    text = CONFIG.format(max_points=n, b0s=b0s)
    times = {"shipped": [], "per point": []}
    for _ in range(args.reps):
        t = time.perf_counter()
        cfg = parse_config(text)
        times["shipped"].append(time.perf_counter() - t)
        t = time.perf_counter()
        per_point(text)
        times["per point"].append(time.perf_counter() - t)
    assert cfg.n_points == n
    best = {k: min(v) for k, v in times.items()}
    res = dict(
        points=n,
        reps=args.reps,
        best_s=best,
        us_per_point={k: 1e6 * v / n for k, v in best.items()},
        speedup=best["per point"] / best["shipped"],
        machine=platform.platform(),
        python=sys.version.split()[0],
    )
    print(json.dumps(res, indent=2))
    print()
    print("| method | points | best s | us per point | vs per point |")
    print("|---|---|---|---|---|")
    for k in ("shipped", "per point"):
        print(f"| {k} | {n:,} | {best[k]:.2f} | {1e6 * best[k] / n:.2f} | {best['per point'] / best[k]:.2f}x |")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(res, f, indent=2)
            f.write("\n")
    return 0 if math.isfinite(res["speedup"]) else 1


if __name__ == "__main__":
    sys.exit(main())
