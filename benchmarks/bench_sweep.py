"""Benchmark: a 10^6-trajectory consensus sweep end to end (grid expansion, X0 sampling, kernel,
certificates, Parquet) versus the kernel alone on the same batches, in one process.

    python benchmarks/bench_sweep.py [--trajectories-total 1000000] [--json-out FILE]

Both are measured warm (a first pass compiles every shape). "kernel alone" times only the
`simulate_consensus` calls on the pipeline's own per-chunk batches (X0 precomputed); the pipeline
time includes everything `mascot run` does. The issue's bar: pipeline >= 70% of kernel throughput.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time

import jax
import numpy as np

from mascot.kernels import complete_weights, ring_weights, simulate_consensus
from mascot.sweep import parse_config, run_sweep
from mascot.sweep.kinds import _STRATEGY, _initial_beliefs, point_keys

CONFIG = """
[experiment]
kind = "consensus"
name = "bench_sweep"
seed = 1
chunk_size = {chunk}

[fixed]
trajectories = {traj}
d = 6
max_rounds = 64

[grid]
n = [5, 16]
strategy = ["adaptive", "complete", "ring"]
eta = [0.08, 0.1, 0.15]
eps = [0.02, 0.03]
b0 = {{ logspace = [500, 50000, {nb0}] }}
"""


def kernel_only(cfg):
    """Time (a) the X0 sampling and (b) the `simulate_consensus` calls on the pipeline's own per-chunk
    groups, each warm and on its own."""
    from mascot.sweep.kinds import KINDS

    kind = KINDS[cfg.kind]
    samples, batches = [], []
    for c in range(cfg.n_chunks):
        start, stop = c * cfg.chunk_size, min((c + 1) * cfg.chunk_size, cfg.n_points)
        pts = [kind.complete(p) for p in cfg.points(start, stop)]
        pkeys = point_keys(cfg.key_seed, np.arange(start, stop))
        groups = {}
        for i, p in enumerate(pts):
            groups.setdefault((p["n"], p["strategy"]), []).append(i)
        for (n, strategy), members in groups.items():
            T = pts[0]["trajectories"]
            rows = np.repeat(members, T)
            args = (pkeys[np.asarray(members)], T, n, 6, 0.5, 0.15, np.dtype("float32"))
            samples.append(args)
            X0 = _initial_beliefs(*args)
            col = lambda k: np.array([pts[i][k] for i in rows], dtype=np.float64)  # noqa: E731
            batches.append((X0, complete_weights(n, 0.4), ring_weights(n, 0.6), col("c1"), col("c2"), col("eta"),
                            col("eps"), col("b0"), _STRATEGY[strategy]))

    def sample():
        for a in samples:
            jax.block_until_ready(_initial_beliefs(*a))

    def rollout():
        for X0, W1, W2, c1, c2, eta, eps, b0, s in batches:
            simulate_consensus(X0, W1, W2, c1, c2, eta, eps, b0, strategy=s, max_rounds=64, dtype="float32")

    times = []
    for fn in (sample, rollout):
        fn()  # warm
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return tuple(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trajectories-total", type=int, default=1_000_000)
    ap.add_argument("--json-out")
    args = ap.parse_args()
    traj, chunk = 1000, 36
    nb0 = max(1, round(args.trajectories_total / (2 * 3 * 3 * 2 * traj)))
    cfg = parse_config(CONFIG.format(chunk=chunk, traj=traj, nb0=nb0))
    total = cfg.n_points * traj
    print(f"{cfg.n_points} points x {traj} trajectories = {total:,} trajectories, {cfg.n_chunks} chunks",
          file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        run_sweep(cfg, f"{tmp}/warm", progress=False)  # compile every shape
        t = time.perf_counter()
        run_sweep(cfg, f"{tmp}/run", progress=False)
        t_pipe = time.perf_counter() - t
    t_sample, t_kernel = kernel_only(cfg)
    t_compute = t_sample + t_kernel
    res = dict(machine=dict(platform=platform.platform(), jax=jax.__version__, devices=[str(d) for d in jax.devices()]),
               points=cfg.n_points, trajectories=total, pipeline_s=t_pipe, kernel_s=t_kernel, sampling_s=t_sample,
               pipeline_traj_per_s=total / t_pipe, kernel_traj_per_s=total / t_kernel,
               compute_traj_per_s=total / t_compute, pipeline_fraction_of_kernel=t_kernel / t_pipe,
               pipeline_fraction_of_compute=t_compute / t_pipe)
    print(json.dumps(res, indent=2))
    print()
    print("| what | seconds | points/s | trajectories/s | pipeline throughput as % of this |")
    print("|---|---|---|---|---|")
    rows = [("whole pipeline (`mascot run`: grid, X0 sampling, kernel, certificates, Parquet)", t_pipe),
            ("X0 sampling + kernel (the experiment's device compute)", t_compute),
            ("kernel alone (`simulate_consensus` on the same batches)", t_kernel),
            ("X0 sampling alone (truncated normal, threefry)", t_sample)]
    for name, t in rows:
        print(f"| {name} | {t:.2f} | {cfg.n_points / t:,.0f} | {total / t:,.0f} | {100 * t / t_pipe:.0f}% |")
    if args.json_out:
        json.dump(res, open(args.json_out, "w"), indent=2)


if __name__ == "__main__":
    main()
