"""Benchmark: run time (and result) of `mascot design` policy, schedule and budget optimisers beside baselines.

* **certificate eta** (`certificate_best_eta`, exact breakpoint enumeration of Theorem 1's B*(D0; eta)) beside a
  dense grid of 20,000 thresholds evaluated with `theorem1` (the obvious baseline): time and B* found.
* **schedule** (`design_schedule`: optax on the smooth relaxation + exact re-evaluation) beside brute force over
  every bin schedule with the same knots (2^K exact evaluations, numpy float64), on the same draws: time and
  mean tokens found. Model: mode 1 contracts at 0.5 at D = 0.7 and expands near consensus (slope -0.3),
  mode 2 constant 0.85, costs 6000 / 3500 (GPT-like; the paper's Sec. V-C).
* **budget** (`budget_risk`: Algorithm 1 on the JAX kernels) beside a numpy float64 loop of Algorithm 1 on the
  same initial beliefs (the token needs must agree): runs per second.

Prints JSON and a Markdown table. Times are best of ``--repeat``; the machine is shared, read the ratios.

    python benchmarks/bench_design_policy.py [--quick] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np


def best_of(f, repeat):
    out, best = None, math.inf
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t)
    return out, best


def bench_certificate(repeat):
    from mascot.design.policy import certificate_best_eta
    from mascot.theory.consensus import theorem1

    d0, eps, l1, l2, c1, c2 = 0.3009, 0.03, 0.25, 0.7236, 600.0, 100.0
    exact, t_exact = best_of(lambda: certificate_best_eta(d0, eps, l1, l2, c1, c2), repeat)

    def grid():
        etas = np.geomspace(eps, d0, 20_000)
        return min(theorem1(d0, e, eps, l1, l2, c1, c2).B_star for e in etas)

    g, t_grid = best_of(grid, 1)
    return dict(
        name="certificate eta",
        method="breakpoint enumeration",
        result=exact.b_star,
        seconds=t_exact,
        baseline="grid of 20,000 etas",
        baseline_result=float(g),
        baseline_seconds=t_grid,
    )


def bench_schedule(repeat, quick):
    from mascot.design.schedule import RateModel, Schedule, design_schedule, draws, evaluate

    b1 = -0.3
    m = RateModel(
        a=(math.log(0.5) - b1 * math.log(0.7), math.log(0.85)),
        b=(b1, 0.0),
        rate_sd=(0.1, 0.05),
        cost=(6000.0, 3500.0),
        cost_cv=0.1,
    )
    K, runs = (6, 500) if quick else (10, 2000)
    kw = dict(eps=0.05, d0=0.75, d0_sd=0.05, b0=80_000.0, alpha=0.05, bins=K, runs=runs, steps=200)
    r, t = best_of(lambda: design_schedule(m, **kw), repeat)
    dr = draws(runs, 200, 0.75, 0.05, 0)

    def brute():
        best = math.inf
        for signs in itertools.product((-1.0, 1.0), repeat=K):
            o = evaluate(m, Schedule(r.schedule.log_lo, r.schedule.log_hi, signs).mode1, 0.05, dr)
            if np.mean(o.tokens > 80_000.0) <= 0.05:
                best = min(best, float(np.mean(o.tokens)))
        return best

    b, tb = best_of(brute, 1)
    return dict(
        name=f"schedule ({K} knots, {runs} runs)",
        method="optax relaxation + exact check",
        result=r.design["mean_tokens"],
        seconds=t,
        baseline=f"brute force, 2^{K} schedules",
        baseline_result=b,
        baseline_seconds=tb,
        best_threshold=r.threshold_design["mean_tokens"],
    )


def numpy_algorithm1(X0, W1, W2, c1, c2, eta, eps, max_rounds):
    """Algorithm 1 (never-binding budget) in numpy float64: each run's spend to reach D <= eps."""
    X = X0.copy()
    R, n, _ = X.shape
    tok = np.zeros(R)
    done = np.zeros(R, dtype=bool)

    def D(X):
        P = X - X.mean(axis=1, keepdims=True)
        return np.sqrt((P**2).sum(axis=(1, 2)) / n)

    for _ in range(max_rounds):
        d = D(X)
        done |= d <= eps
        if done.all():
            break
        m1 = (d > eta) & ~done
        m2 = ~m1 & ~done
        X = np.where(
            m1[:, None, None],
            np.einsum("ij,rjd->rid", W1, X),
            np.where(m2[:, None, None], np.einsum("ij,rjd->rid", W2, X), X),
        )
        tok += np.where(m1, c1, 0.0) + np.where(m2, c2, 0.0)
    done |= D(X) <= eps
    return np.where(done, tok, np.inf)


def bench_budget(repeat, quick):
    from mascot.design.budget import budget_risk, sample_x0
    from mascot.graphs import complete_weights, ring_weights

    W1, W2 = complete_weights(5, 0.4), ring_weights(5, 0.6)
    runs = 20_000 if quick else 100_000
    X0 = sample_x0(runs, 5, 6, seed=0)
    r, t = best_of(lambda: budget_risk(W1, W2, c1=600.0, c2=100.0, eta=0.1, eps=0.03, X0=X0, alpha=0.05), repeat)
    ref, tb = best_of(lambda: numpy_algorithm1(X0, W1, W2, 600.0, 100.0, 0.1, 0.03, 200), 1)
    agree = float(np.mean(r.tokens == ref))
    return dict(
        name=f"budget ({runs:,} runs)",
        method="JAX kernels",
        result=r.budget_for_alpha,
        seconds=t,
        baseline="numpy float64 loop",
        baseline_result=float(np.sort(ref)[math.ceil(0.95 * runs) - 1]),
        baseline_seconds=tb,
        agreement=agree,
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    rows = [bench_certificate(args.repeat), bench_schedule(1, args.quick), bench_budget(args.repeat, args.quick)]
    import jax
    import optax

    out = dict(
        meta=dict(
            machine=platform.platform(), cpus=__import__("os").cpu_count(), jax=jax.__version__, optax=optax.__version__
        ),
        rows=rows,
    )
    print(json.dumps(out, indent=2))
    lines = [
        "| optimiser | method | result | s | baseline | baseline result | baseline s | speed-up |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['name']} | {r['method']} | {r['result']:.6g} | {r['seconds']:.3g} | {r['baseline']} | "
            f"{r['baseline_result']:.6g} | {r['baseline_seconds']:.3g} | "
            f"{r['baseline_seconds'] / r['seconds']:.1f}x |"
        )
    print("\n".join(lines))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
