"""Benchmark: the last stage of a deliberation calibration, a hand-written Gauss-Newton against optax.

mascot fits simulated-method-of-moments objectives with optax (Adam on evolution-strategies gradients) and then
polishes the estimate. This measures, in one process and on the same objective, whether the polish needs its
own solver: starting from the committed Table VIII fits' Adam estimates (``fit.json``'s ``estimate_es``), on
the moments of 256 simulated runs per strategy at one fixed key (common random numbers), with the same budget
of simulator evaluations:

  * ``gauss_newton``: mascot.calibrate.fit.gauss_newton (Levenberg-Marquardt, central-difference Jacobian);
  * ``optax_adam_fd``: optax.adam on central-difference gradients, learning rate tuned over a small grid
    (the best of the grid is reported, which favours optax);
  * ``optax_adam_es``: optax.adam on antithetic ES gradients (the fit's own estimator) with as many pairs per
    step as the central differences use evaluations.

Prints JSON and a table: the loss reached (the same 256-run objective for all) and the wall time.

    python benchmarks/bench_polish.py [--models gpt,gemini,claude] [--evals N] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="gpt,gemini,claude")
    ap.add_argument("--evals", type=int, default=120, help="simulator evaluations per method (default 120)")
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)

    import numpy as np
    import optax

    from mascot.calibrate.deliberation import PAPER_FITTED, PAPER_FIXED, paper_config, paper_target
    from mascot.calibrate.deliberation_fit import BOX, Moments
    from mascot.calibrate.deliberation_sim import prompt_layout
    from mascot.calibrate.fit import Coords, gauss_newton

    rows = []
    for model in args.models.split(","):
        fit = json.loads((ROOT / "results/calibration/deliberation" / model / "fit.json").read_text())
        setup = prompt_layout(paper_config(model))
        target, names, weights = paper_target(model, setup.strategies)
        fitted = list(PAPER_FITTED)
        big = Moments(setup, PAPER_FIXED, fitted, names, detail=False, runs=256)
        seed = int(fit["seed"]) + 101
        lo = np.array([BOX[k][0] for k in fitted])
        hi = np.array([BOX[k][1] for k in fitted])
        width = hi - lo
        x0 = np.array([fit["estimate_es"][k] for k in fitted])
        count = {"n": 0}

        def moments(x):
            count["n"] += 1
            return big(np.clip(x, lo, hi)[None], seed)[0]

        def loss_of(x):
            r = moments(x) - target
            return float(np.sum(weights * np.where(np.isfinite(r), r, 0.0) ** 2))

        h = 0.03 * np.maximum(np.abs(x0), 0.05 * width)  # the deliberation fit's difference steps
        start_loss = loss_of(x0)
        out = {"model": model, "start_loss": start_loss, "evals": args.evals}

        # Gauss-Newton (Levenberg-Marquardt) in the parameters themselves, clipped to the boxes
        coords = Coords(
            lambda v: np.array([v[k] for k in fitted]),
            lambda u: {k: float(np.clip(u[i], lo[i], hi[i])) for i, k in enumerate(fitted)},
            step=h,
        )
        count["n"] = 0
        t = time.perf_counter()
        iters = max(1, args.evals // (2 * len(fitted) + 2))
        r = gauss_newton(
            lambda th: moments(np.array([th[k] for k in fitted])),
            [_P(k, lo[i], hi[i]) for i, k in enumerate(fitted)],
            dict(zip(fitted, x0)),
            target,
            weights,
            iters=iters,
            coords=coords,
        )
        out["gauss_newton"] = {"loss": r.loss, "evals": count["n"], "wall_s": time.perf_counter() - t}

        # the deliberation fit's own polish (mascot.calibrate.deliberation.gauss_newton_polish: damped steps 1, 1/2, 1/4)
        from mascot.calibrate.deliberation_fit import gauss_newton_polish

        class _Counted:
            def __call__(self, pts, s):
                count["n"] += len(pts)
                return big(pts, s)

        count["n"] = 0
        t = time.perf_counter()
        _, l_d, _ = gauss_newton_polish(_Counted(), fitted, x0.copy(), target, weights, seed, iters=iters)
        out["gauss_newton_damped"] = {"loss": l_d, "evals": count["n"], "wall_s": time.perf_counter() - t}

        def fd_grad(x):
            g = np.zeros_like(x)
            for i in range(len(x)):
                e = np.zeros_like(x)
                e[i] = h[i]
                g[i] = (loss_of(x + e) - loss_of(x - e)) / (2 * h[i])
            return g

        def adam(grad_fn, per_step, lr):
            opt = optax.adam(lr)
            u = x0.copy()  # in units of the difference step: one scale for every parameter
            state = opt.init(u / h)
            best = start_loss
            count["n"] = 0
            while count["n"] + per_step + 1 <= args.evals:
                g = grad_fn(u) * h
                upd, state = opt.update(g, state, u / h)
                u = np.clip(u + np.asarray(upd) * h, lo, hi)
                cur = loss_of(u)
                if cur < best:
                    best = cur
            return best

        for name, grad_fn, per in (
            ("optax_adam_fd", fd_grad, 2 * len(fitted)),
            ("optax_adam_es", _es_grad(loss_of, h, 2 * len(fitted)), 2 * len(fitted)),
        ):
            t = time.perf_counter()
            tried = {lr: adam(grad_fn, per, lr) for lr in (0.03, 0.1, 0.3, 1.0)}
            lr = min(tried, key=tried.get)
            out[name] = {"loss": tried[lr], "lr": lr, "grid": tried, "wall_s": time.perf_counter() - t}
        rows.append(out)

    res = {"benchmark": "bench_polish", "machine": platform.machine(), "processor": platform.processor(), "rows": rows}
    print(json.dumps(res, indent=1))
    print()
    print(
        f"{'model':<8}{'start loss':>12}{'LM (fit.py)':>14}{'damped GN':>12}{'optax Adam FD':>16}{'optax Adam ES':>16}"
    )
    for r in rows:
        print(
            f"{r['model']:<8}{r['start_loss']:>12.4g}{r['gauss_newton']['loss']:>14.4g}"
            f"{r['gauss_newton_damped']['loss']:>12.4g}{r['optax_adam_fd']['loss']:>16.4g}"
            f"{r['optax_adam_es']['loss']:>16.4g}"
        )
    print(
        "evaluations used: "
        + "; ".join(
            f"{r['model']} LM {r['gauss_newton']['evals']}, damped {r['gauss_newton_damped']['evals']}" for r in rows
        )
    )
    print(f"(same objective: 256 simulated runs per strategy, one key; {args.evals} simulator evaluations each)")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res, indent=1) + "\n")
    return 0


def _P(name, lo, hi):
    from mascot.calibrate.fit import Param

    return Param(name, float(lo), float(hi), float((lo + hi) / 2))


def _es_grad(loss_of, h, evals):
    import numpy as np

    rng = np.random.default_rng(0)

    def grad(x):
        pairs = max(1, evals // 2)
        eps = rng.standard_normal((pairs, len(x)))
        d = np.array([loss_of(x + h * e) - loss_of(x - h * e) for e in eps])
        return (d[:, None] * eps).sum(0) / (2 * pairs * h)

    return grad


if __name__ == "__main__":
    raise SystemExit(main())
