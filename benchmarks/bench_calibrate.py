"""Benchmark: calibrating the state-tracking surrogate (mascot.calibrate.trials).

Measures, in this one process:

  (i)   simulator throughput: simulated trials/s of the JAX harness simulator (chain + star + mesh, both
        arms, 12 steps), one jitted call over a batch of parameter sets (as the ES gradient uses it),
        compile time apart; beside it the real harness + SurrogateBackend (run_trials) on the same trial count;
  (ii)  one full calibration to the SR paper's Table 2 (`mascot calibrate trials --paper-table2` with
        --n-boot B linearized bootstrap draws): wall time, ES iterations, Levenberg-Marquardt steps, objective
        after each stage.

    python benchmarks/bench_calibrate.py [--n-boot B] [--quick] [--json-out FILE]
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
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="a quick fit (smoke test of the benchmark)")
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)

    import jax
    import jax.numpy as jnp

    from mascot.calibrate.trials import SimConfig, flat_params, simulate_trials
    from mascot.calibrate.trials_fit import calibrate_trials
    from mascot.kernels.precision import float64
    from mascot.protocols.state_tracking.harness import TrialConfig, run_trials
    from mascot.protocols.state_tracking.surrogate import SurrogateBackend

    res = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "jax": jax.__version__,
            "load_1min": os.getloadavg()[0],
        }
    }
    n_trials, batch = 200, 17  # an ES step: 2 * 8 pairs + the centre
    cfg = SimConfig(n_trials=n_trials)
    flat = flat_params(SurrogateBackend().params())
    with float64():
        f = jax.jit(jax.vmap(lambda th, k: simulate_trials(th, k, cfg), in_axes=(0, None)))
        ths = {k: jnp.full((batch,), v, jnp.float64) for k, v in flat.items()}
        t = time.perf_counter()
        jax.block_until_ready(f(ths, jax.random.PRNGKey(0)))
        compile_s = time.perf_counter() - t
        reps = 5
        t = time.perf_counter()
        for r in range(reps):
            jax.block_until_ready(f(ths, jax.random.PRNGKey(r + 1)))
        run_s = (time.perf_counter() - t) / reps
    sim_tps = batch * n_trials / run_s  # trials (each: 3 topologies x 2 arms x 12 steps) per second
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        run_trials(TrialConfig(n_trials=100, log_requests="none"), Path(d) / "run", SurrogateBackend())
        harness_s = time.perf_counter() - t
    res["simulator"] = {
        "trials_per_call": batch * n_trials,
        "compile_s": compile_s,
        "call_s": run_s,
        "trials_per_s": sim_tps,
        "harness_trials_per_s": 100 / harness_s,
        "speedup": sim_tps / (100 / harness_s),
    }
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        s = calibrate_trials(None, Path(d) / "cal", n_boot=args.n_boot, quick=args.quick, seed=0)
        wall = time.perf_counter() - t
    res["calibration"] = {
        "source": "SR paper Table 2",
        "n_boot": args.n_boot,
        "quick": args.quick,
        "wall_s": wall,
        "iterations": s["iterations"],
        "objective_es": s["es_loss"],
        "lm_steps": s["polish"]["iterations"],
        "objective": s["loss"],
        "simulated_trials_per_evaluation": s["n_sim"],
        "lm_simulated_trials": s["polish"]["n_sim"],
    }
    print(json.dumps(res, indent=1))
    sm, c = res["simulator"], res["calibration"]
    print("\n| measure | value |\n| --- | --- |")
    print(f"| simulator, trials/s (3 topologies x 2 arms x 12 steps each) | {sm['trials_per_s']:,.0f} |")
    print(f"| simulator compile, s | {sm['compile_s']:.1f} |")
    print(f"| real harness + SurrogateBackend, trials/s | {sm['harness_trials_per_s']:,.1f} |")
    print(f"| speed-up | {sm['speedup']:,.0f}x |")
    print(
        f"| calibration to Table 2 ({c['iterations']} ES iterations, {c['lm_steps']} Levenberg-Marquardt steps, "
        f"{c['n_boot']} bootstrap draws), wall s | {c['wall_s']:.1f} |"
    )
    print(f"| its objective after ES / after Levenberg-Marquardt | {c['objective_es']:.3g} / {c['objective']:.3g} |")
    print(f"| machine load (1 min) at start | {res['machine']['load_1min']:.2f} on {res['machine']['cpus']} CPUs |")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
