"""Split-half test of the deliberation surrogate on a run directory: fit the ``rate_law`` agents to half of
the runs, predict the other half.

The runs (each with every strategy of the run: one initial proposal, then complete-only, ring-only and
adaptive) are split at random into halves A and B. :func:`mascot.calibrate.deliberation.calibrate_deliberation`
fits half A only (``fit/``). Half B's moments (the calibration's moments: rounds, tokens, D(0), D_final, the
contraction and expansion shares, the switching round, per strategy) are then predicted by ``n_pred``
simulated runs of B's size, replicate ``i`` at the ``i``-th bootstrap draw of the fitted parameters
(parameter and run-to-run uncertainty together); each prediction's 5-95% range is compared with B's observed
value. A prediction is a statement about data the fit never saw; the report counts how many held-out moments
fall inside their ranges (about 90% if the model and its uncertainty are right).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from mascot.errors import InputError
from mascot.io import atomic_write_text, json_default

__all__ = ["split_half_deliberation", "split_half_markdown"]


def split_half_deliberation(
    run_dirs,
    out,
    *,
    seed: int = 0,
    n_boot: int = 200,
    n_pred: int = 200,
    quick: bool = False,
    steps: int | None = None,
    sim_runs: int | None = None,
    gn_iters: int = 3,
    progress=None,
) -> dict:
    """Fit half of the runs of ``run_dirs`` (a deliberation run directory or a list of them, one setting),
    predict the other half; writes ``out/fit/`` (the calibration of half A), ``out/split_half.md`` and
    ``out/split_half.json``. ``quick``, ``steps``, ``sim_runs``, ``gn_iters``: as for
    :func:`~mascot.calibrate.deliberation.calibrate_deliberation`. Returns the ``split_half.json`` dict."""
    from mascot.calibrate.deliberation import calibrate_deliberation, observed_traces, select_runs
    from mascot.calibrate.deliberation_fit import Moments
    from mascot.calibrate.deliberation_sim import moment_support, prompt_layout, weighted_moments
    from mascot.calibrate.fit import coverage, held_out_rows
    from mascot.protocols.deliberation.surrogate import RateLawParams

    n_pred = int(n_pred)
    if n_pred < 20:
        raise InputError(f"n_pred must be >= 20 for a 5-95% range; got {n_pred}")
    t0 = time.perf_counter()
    cfg, tr, dirs = observed_traces(run_dirs)
    R = int(tr["D"].shape[1])
    if R < 4:
        raise InputError(
            f"a split-half test needs at least 4 runs (2 per half); the run directories hold {R}: run the deliberation "
            "again with --runs 4 or more"
        )
    perm = np.random.default_rng([seed, 23]).permutation(R)
    a, b = np.sort(perm[: R // 2]), np.sort(perm[R // 2 : 2 * (R // 2)])
    out = Path(out)
    fit = calibrate_deliberation(
        dirs,
        out / "fit",
        seed=seed,
        n_boot=n_boot,
        quick=quick,
        steps=steps,
        sim_runs=sim_runs,
        gn_iters=gn_iters,
        lanes=a,
        progress=progress,
    )
    fitted = fit["fitted"]
    base = RateLawParams(**{**fit["fixed"], **fit["estimate"]})
    names = fit["moments"]["names"]
    setup = prompt_layout(cfg)
    m_b, all_names = weighted_moments(
        select_runs(tr, b),
        setup.strategies,
        eta=setup.eta,
        d_ref=base.d_ref,
        detail=True,
        lane_weights=np.ones((1, len(setup.strategies), len(b))),
    )
    held = np.array([m_b[0, all_names.index(n)] for n in names])
    draws = np.asarray(fit["boot"], dtype=np.float64)
    mom = Moments(setup, base, fitted, names, detail=True, runs=len(b))
    pred = np.vstack([mom(draws[i % len(draws)][None], seed + 5000 + i)[0] for i in range(n_pred)])
    lo, med, hi = (np.nanquantile(pred, q, axis=0) for q in (0.05, 0.5, 0.95))
    # a moment with no observations in a half (no mode-2 rounds, no rounds at all) is not defined there: NaN, not
    # the 0 the moments function gives it, so it is neither a hit nor a miss
    sup_a, sup_b = (moment_support(select_runs(tr, h), setup.strategies, names) for h in (a, b))
    held = np.array([v if sup_b[n] else np.nan for n, v in zip(names, held)])
    rows = held_out_rows(names, held, med, lo, hi)
    for row, a_value in zip(rows, fit["moments"]["observed"]):
        row["observed_half_a"] = float(a_value) if sup_a[row["moment"]] else None
    res = {
        "source": {"run_dirs": [str(d) for d in dirs], "runs": R},
        "halves": [a.tolist(), b.tolist()],
        "seed": int(seed),
        "n_pred": n_pred,
        "n_boot": int(fit["n_boot"]),
        "not_identified": fit["not_identified"],
        "rows": rows,
        "inside": int(sum(r["inside"] for r in rows)),
        "n_moments": len(rows),
        "coverage": coverage(rows),
        "fit": {"loss": float(fit["loss"]), "quick": bool(fit["quick"])},
        "wall_s": time.perf_counter() - t0,
    }
    atomic_write_text(out / "split_half.json", json.dumps(res, indent=1, default=json_default) + "\n")
    atomic_write_text(out / "split_half.md", split_half_markdown(res))
    return res


def _num(v: float) -> str:
    return "nan" if not np.isfinite(v) else f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


#: what the report's moment names mean (the calibration's moments, :mod:`mascot.calibrate.deliberation_sim`)
MOMENT_KEY = (
    "Moments, per strategy s: `rounds:s` mean rounds; `tokens:s` mean charged tokens in thousands; `d0:s` and "
    "`d_final:s` mean D(0) and final D; `expand:s` rounds per run in which D rose; `switch` the adaptive runs' mean "
    "number of mode-1 rounds; per mode m (1 or 2, pooled over strategies): `alpha:m`, `beta:m` and `resid:m` the "
    "intercept, slope and residual s.d. of the least-squares line of log(D(k)/D(k-1)) on log(D(k-1)/d_ref), "
    "`cost:m` the mean cost of a round in mode m in thousands of tokens and `cost_rsd:m` its relative s.d. "
    "(`cost:2` counts only mode-2 rounds that follow a mode-2 round: the first round after a switch is left out); "
    "`d0_sd` the s.d. of D(0) over runs."
)


def split_half_markdown(res: dict) -> str:
    """The report of :func:`split_half_deliberation` (every sentence computed from ``res``).

    Arguments: ``res`` the ``split_half.json`` dict.

    Returns: the markdown text.
    """
    from mascot.calibrate.fit import coverage, coverage_markdown

    a, b = res["halves"]
    cov = res.get("coverage") or coverage(res["rows"])
    fit = res.get("fit", {})
    lines = [
        "# Split-half prediction: deliberation surrogate",
        "",
        f"Runs of {', '.join(res['source']['run_dirs'])} ({res['source']['runs']} runs, every strategy of a run "
        f"together) split at random (seed {res['seed']}) into halves of {len(a)}. The `rate_law` agents were "
        "fitted to half A only (`fit/`: in sample there), then predict half B's moments, which the fit never "
        f"saw: median and 5-95% range of {res['n_pred']} simulated runs of {len(b)} runs, replicate i at the "
        f"i-th of {res['n_boot']} bootstrap draws of the fitted parameters (parameter and run-to-run uncertainty).",
        "",
        *coverage_markdown(cov, quick=bool(fit.get("quick")), loss=fit.get("loss")),
        "",
        MOMENT_KEY,
    ]
    if res["not_identified"]:
        lines += [
            "",
            f"Not identified by half A (kept at the fit, no uncertainty): {', '.join(res['not_identified'])}.",
        ]
    lines += [
        "",
        "| moment | half A (fitted) | half B (held out) | predicted | 5-95% | inside |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [
        f"| {r['moment']} | {_num(r['observed_half_a'])} | {_num(r['held_out'])} | {_num(r['predicted'])} | "
        f"[{_num(r['lo'])}, {_num(r['hi'])}] | {'yes' if r['inside'] else 'no'} |"
        for r in res["rows"]
    ]
    return "\n".join(lines) + "\n"
