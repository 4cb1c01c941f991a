"""Benchmark: calibrating the deliberation surrogate (mascot.calibrate.deliberation).

Measures, in this one process:

  (i)   simulator throughput: simulated runs/s of the JAX simulator of the text harness
        (:func:`mascot.calibrate.deliberation_sim.simulate_rate_law`; one run = the three strategies of the paper's
        deliberation, 5 agents, up to 30 rounds), one jitted call over a batch of 65 parameter sets (an ES step:
        32 antithetic pairs + the centre), compile time apart; beside it the real text harness
        (``run_deliberation`` + ``SurrogateDeliberationBackend(params=...)``) on 8 runs;
  (ii)  one full calibration to a Table VIII column (``mascot calibrate deliberation --paper-table8 MODEL``,
        ``--n-boot B``): wall time of the fit, of the bootstrap and of the harness replay.

    python benchmarks/bench_calibrate_deliberation.py [--model gpt] [--n-boot B] [--quick] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="gpt", choices=["gpt", "gemini", "claude"])
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="a quick fit (smoke test of the benchmark)")
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)

    import jax
    import jax.numpy as jnp

    from mascot.calibrate.deliberation import PAPER_FITTED, PAPER_FIXED, calibrate_deliberation, paper_config
    from mascot.calibrate.deliberation_sim import prompt_layout, simulate_rate_law
    from mascot.protocols.deliberation import SurrogateDeliberationBackend, run_deliberation
    from mascot.protocols.deliberation.surrogate import RateLawParams

    res = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "jax": jax.__version__,
            "load_1min": os.getloadavg()[0],
        }
    }
    cfg = paper_config(args.model)
    setup = prompt_layout(cfg)
    truth = RateLawParams(
        rate1=0.75,
        slope1=-0.13,
        rate2=0.85,
        slope2=0.05,
        reply_chars1=450.0,
        reply_chars2=290.0,
        round_noise=0.1,
        compliance_noise=0.05,
        verbosity=0.1,
    )
    runs, batch = 32, 65
    f = jax.jit(
        jax.vmap(
            lambda th, k: simulate_rate_law(th, k, setup, runs=runs, base=PAPER_FIXED)["rounds"], in_axes=(0, None)
        )
    )
    ths = {k: jnp.full((batch,), getattr(truth, k), jnp.float32) for k in PAPER_FITTED}
    t = time.perf_counter()
    jax.block_until_ready(f(ths, jax.random.PRNGKey(0)))
    compile_s = time.perf_counter() - t
    best = float("inf")
    for r in range(5):
        t = time.perf_counter()
        jax.block_until_ready(f(ths, jax.random.PRNGKey(r + 1)))
        best = min(best, time.perf_counter() - t)
    sim_rps = batch * runs / best  # runs (each: 3 strategies) per second
    with tempfile.TemporaryDirectory() as d:
        from dataclasses import replace

        t = time.perf_counter()
        run_deliberation(
            replace(cfg, runs=8), Path(d) / "run", SurrogateDeliberationBackend(params=truth), progress=False
        )
        harness_s = time.perf_counter() - t
    res["simulator"] = {
        "runs_per_call": batch * runs,
        "compile_s": compile_s,
        "call_s": best,
        "runs_per_s": sim_rps,
        "harness_runs_per_s": 8 / harness_s,
        "speedup": sim_rps / (8 / harness_s),
    }
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        s = calibrate_deliberation(
            None, Path(d) / "cal", paper_model=args.model, n_boot=args.n_boot, quick=args.quick, seed=0
        )
        wall = time.perf_counter() - t
    res["calibration"] = {
        "source": f"Table VIII, {s['source']['name']}",
        "n_boot": args.n_boot,
        "quick": args.quick,
        "wall_s": wall,
        "fit_s": s["fit_wall_s"],
        "bootstrap_s": s["boot_wall_s"],
        "harness_replay_s": s["harness"]["wall_s"],
        "steps": s["steps"] + s["steps"] // 2,
        "loss": s["loss"],
        "simulated_runs_per_s_during_fit": s["sim_runs_per_s"],
        "criteria_within_25pct": s["criteria"]["within_tol"],
    }
    print(json.dumps(res, indent=1))
    sm, c = res["simulator"], res["calibration"]
    print("\n| measure | value |\n| --- | --- |")
    print(f"| JAX simulator, runs/s (3 strategies x up to 30 rounds each) | {sm['runs_per_s']:,.0f} |")
    print(f"| simulator compile, s | {sm['compile_s']:.1f} |")
    print(f"| real text harness + rate-law surrogate, runs/s | {sm['harness_runs_per_s']:,.2f} |")
    print(f"| speed-up | {sm['speedup']:,.0f}x |")
    print(f"| calibration to {c['source']} (n_boot {c['n_boot']}), wall s | {c['wall_s']:.1f} |")
    print(
        f"| of which fit / bootstrap / harness replay, s | {c['fit_s']:.1f} / {c['bootstrap_s']:.1f} / "
        f"{c['harness_replay_s']:.1f} |"
    )
    print(f"| machine load (1 min) at start | {res['machine']['load_1min']:.2f} on {res['machine']['cpus']} CPUs |")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
