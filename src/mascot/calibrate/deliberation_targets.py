"""What a deliberation calibration fits (:mod:`mascot.calibrate.deliberation`): the run settings and the target
moments, from a column of the consensus paper's Table VIII (:func:`paper_config`, :func:`paper_target`) or from
a run directory's records (:func:`config_of_run`, :func:`run_target`), with their scales and the parameters
each source identifies."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mascot import papers
from mascot.errors import InputError
from mascot.protocols.deliberation.config import STRATEGIES, Axis, DeliberationConfig, MonitorConfig, Role
from mascot.protocols.deliberation.surrogate import RateLawParams

#: Table VIII's models: printed name, the deployment's token scale (Sec. V-C: Gemini x0.75, Claude x0.45, GPT
#: unscaled), the adaptive run's switching round (Fig. 4(b) text: "round 4 for GPT, round 5 for Claude and
#: Gemini") and the number of complete-only rounds whose D rose (GPT: "rose after rounds 7 and 9"; None: not stated).
PAPER_MODELS = {
    "gpt": {"name": "GPT-5.4-Mini", "token_scale": 1.0, "switch": 4, "expand_complete": 2},
    "gemini": {"name": "Gemini 2.5-Flash", "token_scale": 0.75, "switch": 5, "expand_complete": None},
    "claude": {"name": "Claude Opus-4.8", "token_scale": 0.45, "switch": 5, "expand_complete": None},
}


#: Scale (a moment's tolerated error; weight = 1 / scale^2) of each paper moment: rounds 1 round, tokens 5 %,
#: D(0) 0.02, D_final 0.01, rising rounds 1, switching round 0.5 rounds.
PAPER_SCALES = {"rounds": 1.0, "tokens": 0.05, "d0": 0.02, "d_final": 0.01, "expand": 1.0, "switch": 0.5}


#: Parameters fitted to a Table VIII column / to a run directory (the others stay at their defaults, see
#: :data:`PAPER_FIXED`).
PAPER_FITTED = ("rate1", "slope1", "rate2", "slope2", "reply_chars1", "reply_chars2", "prior_scale", "round_noise")


RUN_FITTED = PAPER_FITTED + ("compliance_noise", "initial_spread", "verbosity")


#: The fixed parameters of a paper fit (not identified by one run per strategy): per-agent compliance noise
#: 0.05, no additive belief noise, round-0 spread 0.05, verbosity (sd of log reply length) 0.1, 4 characters
#: per token, no unusable replies.
PAPER_FIXED = RateLawParams(
    compliance_noise=0.05, noise=0.0, initial_spread=0.05, verbosity=0.1, chars_per_token=4.0, malformed=0.0
)


# ----------------------------------------------------------------------------- configurations and targets
def paper_config(model: str, max_rounds: int = 30) -> DeliberationConfig:
    """The paper's deployment for a Table VIII model: eta 0.2, eps 0.05, b0 100,000, its token scale."""
    if model not in PAPER_MODELS:
        raise InputError(f"paper_model must be one of {', '.join(PAPER_MODELS)}; got {model!r}")
    return DeliberationConfig(token_scale=PAPER_MODELS[model]["token_scale"], max_rounds=max_rounds)


def config_of_run(run_dir) -> DeliberationConfig:
    """The :class:`DeliberationConfig` a deliberation run directory was run with (from its ``run.json``)."""
    from mascot.backends.base import Sampling

    p = Path(run_dir) / "run.json"
    if not p.exists():
        raise InputError(f"{run_dir}: not a deliberation run directory (no run.json)")
    try:
        meta = json.loads(p.read_text())
        c = dict(meta["identity"]["config"])
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise InputError(f"{p}: unreadable run.json ({e})") from None
    if meta.get("kind") != "mascot-deliberation":
        raise InputError(f"{run_dir}: run.json is of kind {meta.get('kind')!r}, not a deliberation run")
    c["roles"] = tuple(
        Role(r["name"], r["title"], r["bias"], r["prompt"], None if r.get("prior") is None else tuple(r["prior"]))
        for r in c["roles"]
    )
    c["axes"] = tuple(Axis(**a) for a in c["axes"])
    c["W1"] = tuple(tuple(row) for row in c["W1"])
    c["W2"] = tuple(tuple(row) for row in c["W2"])
    c["strategies"] = tuple(c["strategies"])
    c["x0"] = None if c.get("x0") is None else tuple(tuple(r) for r in c["x0"])
    c["sampling"] = Sampling(**c["sampling"])
    c["monitor"] = MonitorConfig(**c["monitor"])
    return DeliberationConfig(**c)


def paper_target(model: str, strategies=STRATEGIES) -> tuple[np.ndarray, list[str], np.ndarray]:
    """``(target, names, weights)`` of one Table VIII column in the order of
    :func:`~mascot.calibrate.deliberation_sim.moments_from_traces` (``detail=False``), unknown moments dropped."""
    info = PAPER_MODELS[model]
    vals, names, w = [], [], []
    for s in strategies:
        t = papers.TABLE_VIII[(info["name"], s)]
        exp = {"adaptive": 0, "ring": 0, "complete": info["expand_complete"]}[s]
        for key, v in (
            ("rounds", t["rounds"]),
            ("tokens", t["tokens"] / 1000.0),
            ("d0", t["d0"]),
            ("d_final", t["d_final"]),
            ("expand", exp),
        ):
            if v is None:
                continue
            sc = PAPER_SCALES[key] * (v if key == "tokens" else 1.0)
            vals.append(float(v)), names.append(f"{key}:{s}"), w.append(1.0 / sc**2)
        if s == "adaptive":
            vals.append(float(info["switch"])), names.append("switch"), w.append(1.0 / PAPER_SCALES["switch"] ** 2)
    return np.asarray(vals), names, np.asarray(w)


def run_target(
    traces: dict, strategies, eta: float, *, n_boot: int = 200, seed: int = 0, d_ref: float = 0.2
) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
    """``(target, names, weights, boot)``: a run directory's moments (``detail=True``), weights ``1 / var``
    over ``n_boot`` resamplings of its runs (floored), and the resampling weights ``boot`` ``(n_boot, R)``."""
    from mascot.calibrate.deliberation_sim import weighted_moments

    R = np.asarray(traces["D"]).shape[1]
    rng = np.random.default_rng([seed, 17])
    boot = rng.multinomial(R, np.full(R, 1.0 / R), size=n_boot).astype(np.float64)
    S = len(strategies)
    lw = np.concatenate([np.ones((1, S, R)), np.broadcast_to(boot[:, None, :], (n_boot, S, R))])
    allm, names = weighted_moments(traces, strategies, eta=eta, d_ref=d_ref, detail=True, lane_weights=lw)
    m, reps = allm[0], allm[1:]
    var = np.nanvar(reps, axis=0)
    floor = np.array([_floor(n, v) for n, v in zip(names, m)])
    keep = np.isfinite(m)
    return m[keep], [n for n, k in zip(names, keep) if k], (1.0 / (var + floor**2))[keep], boot


def _floor(name: str, v: float) -> float:
    """The smallest sd a moment's weight assumes (keeps moments with no spread in the data from dominating)."""
    kind = name.split(":")[0]
    return {
        "rounds": 0.25,
        "switch": 0.25,
        "expand": 0.1,
        "d0": 0.005,
        "d_final": 0.002,
        "d0_sd": 0.002,
        "alpha": 0.01,
        "beta": 0.02,
        "resid": 0.005,
        "cost_rsd": 0.003,
    }.get(kind, 0.01 * abs(v) + 1e-3)
