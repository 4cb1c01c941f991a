"""Benchmark: a 10^6-trajectory consensus sweep end to end (grid expansion, X0 sampling, kernel,
certificates, Parquet) versus the kernel alone on the same batches, in one process.

    python benchmarks/bench_sweep.py [--trajectories-total 1000000] [--json-out FILE]

All are measured warm (a first pass compiles every shape), in interleaved repetitions (medians).
"kernel alone" replays the `simulate_consensus` calls the pipeline made in its warm-up run, recorded as they
were made (the same batches, X0 already drawn: points that simulate the same thing run once in both); the
pipeline time includes everything `mascot run` does. "roofline" is the kernel calls' floor on this machine:
max(X0 bytes read once / copy bandwidth, modal projection FLOPs 2 B d N (N - 1) / float32 GEMM rate), both
measured in this process. The issue's bar: pipeline >= 70%
of kernel throughput. ``--before`` also times the pipeline with the sweep's device cache switched off
(``evaluate.X0_CACHE_BYTES = 0``: every chunk draws its X0 on the host and copies it to the device, as before
the cache), interleaved with the rest, so before/after are ratios from one process.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time

import jax
import numpy as np

from mascot.execute import simulate_consensus
from mascot.sweep import evaluate as sweep_kinds
from mascot.sweep import parse_config, run_sweep
from mascot.sweep.evaluate import _initial_beliefs

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


def x0_samples(cfg):
    """The X0 draws of the pipeline's per-chunk groups (one per (N, strategy) group of a chunk, as the consensus
    kind draws them): the arguments of each ``_initial_beliefs`` call."""
    from mascot.sweep.kinds import KINDS

    kind = KINDS[cfg.kind]
    samples = []
    for c in range(cfg.n_chunks):
        start, stop = c * cfg.chunk_size, min((c + 1) * cfg.chunk_size, cfg.n_points)
        pts = [kind.complete(p) for p in cfg.points(start, stop)]
        for n, _ in dict.fromkeys((p["n"], p["strategy"]) for p in pts):
            samples.append((cfg.key_seed, pts[0]["trajectories"], n, 6, 0.5, 0.15, "float32"))
    return samples


def recorded_calls(cfg, out, workers):
    """Run the sweep once, recording each ``simulate_consensus`` call it makes (arguments as passed)."""
    import threading

    import mascot.execute as mx

    calls, lock, real = [], threading.Lock(), mx.simulate_consensus

    def spy(*a, **k):
        with lock:
            calls.append((a, k))
        return real(*a, **k)

    mx.simulate_consensus = spy
    try:
        run_sweep(cfg, out, progress=False, workers=workers)
    finally:
        mx.simulate_consensus = real
    return calls


def roofline(calls):
    """``(seconds, bound, copy B/s, GEMM FLOP/s)``: the kernel calls' floor, max(X0 bytes / copy bandwidth,
    projection FLOPs / float32 GEMM rate), both rates measured here as ``bench_consensus`` measures them."""
    import bench_consensus as bc

    bw, gemm = bc.copy_bandwidth(), bc.gemm_rate(64, 16_000)
    nbytes = sum(c[0][0].nbytes for c in calls)
    flops = sum(2.0 * B * d * N * (N - 1) for B, N, d in (c[0][0].shape for c in calls))
    return (
        max(nbytes / (bw / 2), flops / gemm),
        ("memory" if nbytes / (bw / 2) >= flops / gemm else "compute"),
        bw,
        gemm,
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trajectories-total", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions (medians reported)")
    ap.add_argument("--workers", type=int, default=3, help="chunks in flight in `mascot run`")
    ap.add_argument("--chunk-size", type=int, default=36, help="grid points per chunk (1,000 trajectories each)")
    ap.add_argument(
        "--before", action="store_true", help="also time the pipeline without the device X0 cache (interleaved)"
    )
    ap.add_argument("--json-out")
    args = ap.parse_args()
    traj, chunk = 1000, args.chunk_size
    nb0 = max(1, round(args.trajectories_total / (2 * 3 * 3 * 2 * traj)))
    cfg = parse_config(CONFIG.format(chunk=chunk, traj=traj, nb0=nb0))
    total = cfg.n_points * traj
    print(
        f"{cfg.n_points} points x {traj} trajectories = {total:,} trajectories, {cfg.n_chunks} chunks", file=sys.stderr
    )
    samples = x0_samples(cfg)

    def sample():
        for a in samples:
            jax.block_until_ready(_initial_beliefs(*a))

    calls = []

    def rollout():
        for a, k in calls:
            simulate_consensus(*a, **k)

    times = {"pipeline": [], "sampling": [], "kernel": []}
    cpu = {}  # CPU seconds (all threads) per repetition: on a CPU the kernel and the host work share the cores
    cache_bytes = sweep_kinds.X0_CACHE_BYTES

    def pipeline_before(r):  # every chunk draws its X0 on the host and copies it to the device
        sweep_kinds.X0_CACHE_BYTES = 0
        try:
            run_sweep(cfg, f"{tmp}/before{r}", progress=False, workers=args.workers)
        finally:
            sweep_kinds.X0_CACHE_BYTES = cache_bytes

    if args.before:
        times["pipeline_before"] = []
    with tempfile.TemporaryDirectory() as tmp:
        calls += recorded_calls(cfg, f"{tmp}/warm", args.workers)  # compiles every shape
        if args.before:
            pipeline_before("warm")
        sample(), rollout()
        for r in range(args.reps):  # interleaved, so drift in the machine's load hits all alike
            pipes = [("pipeline", lambda r=r: run_sweep(cfg, f"{tmp}/run{r}", progress=False, workers=args.workers))]
            if args.before:  # before and after alternate which goes first
                pipes.insert(r % 2, ("pipeline_before", lambda r=r: pipeline_before(r)))
            for name, fn in pipes + [("sampling", sample), ("kernel", rollout)]:
                t, c = time.perf_counter(), time.process_time()
                fn()
                times[name].append(time.perf_counter() - t)
                cpu.setdefault(name, []).append(time.process_time() - c)  # every thread of this process
        floor_s, bound, bw, gemm = roofline(calls)
    med = {k: float(np.median(v)) for k, v in times.items()}
    t_pipe, t_sample, t_kernel = med["pipeline"], med["sampling"], med["kernel"]
    t_compute = t_sample + t_kernel
    per_rep = [k / p for p, k in zip(times["pipeline"], times["kernel"])]
    cpu_med = {k: float(np.median(v)) for k, v in cpu.items()}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    # the pipeline cannot finish before its CPU work, spread over every core, is done: with the kernel's own CPU
    # seconds and the host work's (pipeline CPU - kernel CPU - sampling CPU), the best fraction of the kernel alone
    # it can reach on this machine
    host_cpu = cpu_med["pipeline"] - cpu_med["kernel"] - cpu_med["sampling"]
    ceiling = t_kernel / max(t_kernel + t_sample, cpu_med["pipeline"] / cores)
    res = dict(
        machine=dict(platform=platform.platform(), jax=jax.__version__, devices=[str(d) for d in jax.devices()]),
        points=cfg.n_points,
        trajectories=total,
        chunk_size=chunk,
        workers=args.workers,
        reps=args.reps,
        times=times,
        pipeline_s=t_pipe,
        kernel_s=t_kernel,
        sampling_s=t_sample,
        pipeline_traj_per_s=total / t_pipe,
        kernel_traj_per_s=total / t_kernel,
        compute_traj_per_s=total / t_compute,
        pipeline_fraction_of_kernel=t_kernel / t_pipe,
        pipeline_fraction_of_kernel_per_rep=per_rep,
        pipeline_fraction_of_compute=t_compute / t_pipe,
        cpu_s=cpu_med,
        cores=cores,
        host_cpu_s=host_cpu,
        pipeline_fraction_ceiling=ceiling,
        kernel_calls=len(calls),
        roofline_s=floor_s,
        roofline_bound=bound,
        copy_bandwidth_GBps=bw / 1e9,
        gemm_gflops=gemm / 1e9,
        kernel_fraction_of_roofline=floor_s / t_kernel,
        pipeline_fraction_of_roofline=floor_s / t_pipe,
    )
    print(json.dumps(res, indent=2))
    print()
    if args.before:
        per_rep_before = [k / p for p, k in zip(times["pipeline_before"], times["kernel"])]
        res.update(
            pipeline_before_s=float(np.median(times["pipeline_before"])),
            pipeline_before_fraction_of_kernel=t_kernel / float(np.median(times["pipeline_before"])),
            pipeline_before_fraction_of_kernel_per_rep=per_rep_before,
        )
    print(
        f"medians of {args.reps} interleaved repetitions; pipeline / kernel per repetition: "
        + ", ".join(f"{100 * f:.0f}%" for f in per_rep)
    )
    if args.before:
        print(
            "without the device X0 cache (before), per repetition: "
            + ", ".join(f"{100 * f:.0f}%" for f in per_rep_before)
            + f"; medians: before {100 * res['pipeline_before_fraction_of_kernel']:.0f}%, "
            f"after {100 * res['pipeline_fraction_of_kernel']:.0f}% of the kernel alone"
        )
    print(
        f"CPU seconds (all threads, medians): pipeline {cpu_med['pipeline']:.2f}, kernel alone {cpu_med['kernel']:.2f}, "
        f"sampling {cpu_med['sampling']:.2f}; host work beyond them {host_cpu:.2f}. On {cores} cores the pipeline "
        f"needs at least {cpu_med['pipeline'] / cores:.2f} s: at most {100 * ceiling:.0f}% of the kernel alone"
    )
    print()
    print("| what | seconds | CPU seconds | points/s | trajectories/s | pipeline throughput as % of this |")
    print("|---|---|---|---|---|---|")
    rows = [
        (
            "whole pipeline (`mascot run`: grid, X0 sampling, kernel, certificates, Parquet)",
            t_pipe,
            cpu_med["pipeline"],
        ),
        ("X0 sampling + kernel (the experiment's device compute)", t_compute, cpu_med["sampling"] + cpu_med["kernel"]),
        ("kernel alone (`simulate_consensus` on the same batches)", t_kernel, cpu_med["kernel"]),
        ("X0 sampling alone (PCG64 words + inverse-CDF truncated normal)", t_sample, cpu_med["sampling"]),
        (
            f"roofline of the kernel calls ({bound} bound: X0 read at {bw / 1e9:.0f} GB/s, projection at "
            f"{gemm / 1e9:.0f} GFLOP/s)",
            floor_s,
            None,
        ),
    ]
    if args.before:
        rows.insert(
            1,
            (
                "whole pipeline without the device X0 cache (before)",
                res["pipeline_before_s"],
                cpu_med["pipeline_before"],
            ),
        )
    for name, t, c in rows:
        c = "" if c is None else f"{c:.2f}"
        print(f"| {name} | {t:.2f} | {c} | {cfg.n_points / t:,.0f} | {total / t:,.0f} | {100 * t / t_pipe:.0f}% |")
    if args.json_out:
        json.dump(res, open(args.json_out, "w"), indent=2)


if __name__ == "__main__":
    main()
