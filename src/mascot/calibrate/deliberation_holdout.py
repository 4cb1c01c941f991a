"""Out-of-sample test of the deliberation surrogate on the consensus paper's own LLM data (Table VIII).

The paper's central claim is that the adaptive policy's rounds and tokens follow from its two modes. This
module tests that claim the way a reader can check it: the ``rate_law`` agents are fitted to the
**complete-only and ring-only columns only** (rounds, tokens, D(0), D_final and the expansion count) and
then **predict the adaptive column** (rounds, tokens, D_final, the switching round), which the fit never
saw (nor its D(0) and expansion count). The interval of each prediction is a 95% predictive interval for one printed run: parameter
uncertainty (a parametric bootstrap of the two held-in columns, each replicate refitted by one linearised
Gauss-Newton step, as :func:`mascot.calibrate.deliberation.calibrate_deliberation` does) and the run-to-run
noise of one simulated run per replicate. Parameters the held-in columns do not move (the rate laws'
slopes: each single-mode column gives one mean contraction rate) stay at their starting values and their
uncertainty is *not* in the interval; the report names them.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from mascot.calibrate.deliberation_fit import (
    Moments,
    clip_box,
    fit_params,
    gauss_newton_polish,
    initial_guess,
    ridge_solve,
)
from mascot.calibrate.deliberation_targets import PAPER_FITTED, PAPER_FIXED, PAPER_MODELS, paper_config, paper_target
from mascot.errors import InputError
from mascot.io import atomic_write_text, json_default

__all__ = ["HELD_OUT", "holdout_table8", "holdout_markdown"]

#: the adaptive column's moments (every ``*:adaptive`` one and the switching round) that the fit never sees and the
#: model predicts, in this order where present
HELD_OUT = ("rounds:adaptive", "tokens:adaptive", "d_final:adaptive", "switch", "d0:adaptive", "expand:adaptive")


def holdout_table8(
    model: str,
    *,
    seed: int = 0,
    n_boot: int = 200,
    quick: bool = False,
    steps: int | None = None,
    sim_runs: int | None = None,
    gn_iters: int = 3,
    progress=None,
) -> dict:
    """Fit ``model``'s Table VIII complete-only and ring-only columns, predict its adaptive column.

    ``model``: gpt | gemini | claude. ``n_boot``: predictive draws (each a bootstrap parameter replicate and
    one simulated run). ``quick``/``steps``/``sim_runs`` as in ``calibrate_deliberation``. Returns a dict with
    ``rows`` (one per held-out moment: observed, predicted, 2.5/97.5% predictive limits, inside),
    ``inside``/``n`` (the measured coverage), the fit and what it does not identify.
    """
    if model not in PAPER_MODELS:
        raise InputError(f"model must be one of {', '.join(PAPER_MODELS)}; got {model!r}")
    n_boot = int(n_boot)
    if n_boot < 20:
        raise InputError(f"a 95% predictive interval needs n_boot >= 20 draws; got {n_boot}")
    from mascot.calibrate.deliberation_sim import prompt_layout

    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    steps = int(steps or (60 if quick else 150))
    runs = int(sim_runs or (16 if quick else 32))
    cfg = paper_config(model)
    setup = prompt_layout(cfg)
    base, fitted = PAPER_FIXED, PAPER_FITTED
    target_all, names_all, w_all = paper_target(model, setup.strategies)
    held = [n for n in HELD_OUT if n in names_all]
    held += [n for n in names_all if (n.endswith(":adaptive") or n == "switch") and n not in held]
    keep = [i for i, n in enumerate(names_all) if n not in held]
    target, names, weights = target_all[keep], [names_all[i] for i in keep], w_all[keep]
    observed = {n: float(target_all[names_all.index(n)]) for n in held}

    guess = initial_guess(setup, target, names, base)  # from the held-in columns only
    say(f"{model}: fitting {len(fitted)} parameters to the {len(names)} complete-only and ring-only moments")
    est, res, _ = fit_params(
        setup, base, fitted, target, names, weights, detail=False, runs=runs, steps=steps, seed=seed, init=guess
    )
    big = Moments(setup, base, fitted, names, detail=False, runs=256)
    x_fit = np.array([est[k] for k in fitted])
    x_hat, loss, G = gauss_newton_polish(big, fitted, x_fit, target, weights, seed + 101, iters=int(gn_iters))
    H = G.T @ (weights[:, None] * G)
    A = ridge_solve(H, G.T * weights[None, :])
    d = np.diag(H)
    lost = [k for k, h in zip(fitted, d) if not h > 1e-12 * max(float(d.max(initial=0.0)), 1e-300)]

    # the predictive distribution of one printed adaptive run
    say(f"{model}: {n_boot} predictive draws of the adaptive column")
    one = Moments(setup, base, fitted, names, detail=False, runs=1)
    small = Moments(setup, base, fitted, names, detail=False, runs=runs)
    adaptive_one = Moments(setup, base, fitted, held, detail=False, runs=1)
    s_ref = big(x_hat[None], seed + 202)[0]
    draws = np.empty((n_boot, len(held)))
    for b in range(n_boot):
        bs = int(np.random.SeedSequence([seed, b, 31]).generate_state(1)[0] % 2**31)
        dm = one(x_hat[None], bs)[0] - s_ref  # a synthetic held-in column from the fitted model
        ds = small(x_hat[None], bs + 1)[0] - s_ref  # the fit's own simulation noise
        xb = clip_box(fitted, x_hat + A @ (dm - ds))
        draws[b] = adaptive_one(xb[None], bs + 2)[0]
    point = Moments(setup, base, fitted, held, detail=False, runs=256)(x_hat[None], seed + 303)[0]
    rows = []
    for j, n in enumerate(held):
        col = draws[:, j]
        col = col[np.isfinite(col)]
        lo, hi = np.percentile(col, [2.5, 97.5]).tolist() if col.size else [math.nan, math.nan]
        obs = observed[n]
        rows.append(
            dict(
                moment=n,
                observed=obs,
                predicted=float(point[j]),
                lo=float(lo),
                hi=float(hi),
                inside=bool(lo <= obs <= hi),
                draws=int(col.size),
            )
        )
    return {
        "model": model,
        "name": PAPER_MODELS[model]["name"],
        "held_in": names,
        "held_out": held,
        "fitted": list(fitted),
        "estimate": {k: float(v) for k, v in zip(fitted, x_hat)},
        "not_identified": lost,
        "loss": float(loss),
        "loss_es": float(res.loss),
        "rows": rows,
        "inside": int(sum(r["inside"] for r in rows)),
        "n": len(rows),
        "n_boot": n_boot,
        "seed": seed,
        "steps": steps,
        "sim_runs": runs,
        "quick": bool(quick),
        "wall_s": time.perf_counter() - t0,
    }


def _fmt(name: str, v: float) -> str:
    if not math.isfinite(v):
        return "nan"
    if name.startswith("tokens"):
        return f"{v * 1000:,.0f}"  # the targets hold tokens in thousands
    if name.startswith(("rounds", "switch", "expand")):
        return f"{v:.1f}" if v != round(v) else f"{v:.0f}"
    return f"{v:.4f}"


def _rel(row: dict) -> str:
    p = abs(row["predicted"])
    return f"{(row['hi'] - row['lo']) / p:.2f}" if p > 0 and math.isfinite(row["hi"] - row["lo"]) else "-"


def _widths(results: list[dict], moment: str) -> list[float]:
    return [
        (row["hi"] - row["lo"]) / abs(row["predicted"])
        for r in results
        for row in r["rows"]
        if row["moment"] == moment and row["predicted"] != 0
    ]


#: an interval at least this many times wider than its prediction (or around a prediction of 0) says little
VACUOUS_WIDTH = 3.0


def _informative(row: dict) -> bool:
    p = abs(row["predicted"])
    return p > 0 and math.isfinite(row["hi"] - row["lo"]) and (row["hi"] - row["lo"]) / p < VACUOUS_WIDTH


def holdout_markdown(results: list[dict]) -> str:
    """The held-out report for one or more models; every number from ``results``."""
    inside = sum(r["inside"] for r in results)
    n = sum(r["n"] for r in results)
    rows = [row for r in results for row in r["rows"]]
    told = [row for row in rows if _informative(row)]
    told_in = sum(bool(row["inside"]) for row in told)
    lines = [
        "# Out of sample: Table VIII's adaptive column predicted from the complete-only and ring-only columns",
        "",
        "Fitted to: each model's complete-only and ring-only columns of Table VIII (rounds, tokens, D(0), D_final, "
        "expansions). Predicted, never fitted: the whole adaptive column (rounds, tokens, D_final, switching round, "
        "D(0), expansions). "
        "Interval: 95% predictive interval for one printed run (parameter uncertainty from a parametric "
        "bootstrap of the held-in columns, each replicate refitted by one linearised Gauss-Newton step, plus "
        "one simulated run's noise).",
        "",
        f"**Coverage: {inside} of {n} held-out values lie inside their 95% intervals.**"
        + (
            " With this few values, coverage says little about calibration; a value outside its interval is a "
            "failed prediction."
            if n < 20
            else ""
        )
        + (
            f" The intervals are wide (adaptive rounds: width {min(_widths(results, 'rounds:adaptive')):.1f} to "
            f"{max(_widths(results, 'rounds:adaptive')):.1f} times the prediction; tokens "
            f"{min(_widths(results, 'tokens:adaptive')):.1f} to {max(_widths(results, 'tokens:adaptive')):.1f}): "
            "one printed run varies that much under the fitted model, so a value inside says the model is not "
            "contradicted, not that it predicts precisely."
            if _widths(results, "rounds:adaptive") and _widths(results, "tokens:adaptive")
            else ""
        )
        + (
            f" **Counting only the informative intervals** (narrower than {VACUOUS_WIDTH:g} times their prediction; "
            f"the others, marked *vacuous* below, would contain almost any value): {told_in} of {len(told)} inside."
            if len(told) < len(rows)
            else ""
        ),
        "",
        "| model | moment | Table VIII | predicted | 95% interval | interval width / predicted | inside |",
        "|---|---|---:|---:|---|---:|---|",
    ]
    for r in results:
        for row in r["rows"]:
            m = row["moment"]
            lines.append(
                f"| {r['name']} | {m} | {_fmt(m, row['observed'])} | {_fmt(m, row['predicted'])} | "
                f"{_fmt(m, row['lo'])} - {_fmt(m, row['hi'])} | {_rel(row)}{'' if _informative(row) else ' (vacuous)'} | "
                f"{'yes' if row['inside'] else '**no**'} |"
            )
    lines += ["", "What the held-in columns do not identify (kept at the starting values, not in the intervals):", ""]
    for r in results:
        lost = ", ".join(r["not_identified"]) or "nothing"
        lines.append(f"- {r['name']}: {lost}.")
    for r in results:
        bad = [row["moment"] for row in r["rows"] if not row["inside"]]
        if bad:
            lines.append("")
            lines.append(
                f"{r['name']}: the model fitted to the single-mode columns does **not** predict "
                f"{', '.join(bad)} of the adaptive run."
            )
    lines += [
        "",
        f"Settings: {results[0]['steps']} + {results[0]['steps'] // 2} optimiser steps, "
        f"{results[0]['sim_runs']} simulated runs per strategy per evaluation, {results[0]['n_boot']} predictive "
        f"draws, seed {results[0]['seed']}.",
        "",
    ]
    return "\n".join(lines)


def write_holdout(results: list[dict], out) -> Path:
    """``holdout.json`` and ``holdout.md`` into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "holdout.json", json.dumps(results, indent=1, default=json_default) + "\n")
    atomic_write_text(out / "holdout.md", holdout_markdown(results))
    return out / "holdout.md"
