"""Calibrate the state-tracking surrogate to a run directory or to the SR paper's Table 2 (simulated method
of moments, :func:`mascot.calibrate.fit.fit_smm` on the JAX simulator :mod:`mascot.calibrate.trials`).

Moments, per topology (chain, mesh, star): mean and s.d. of ``E_ceg``, ``R_cdr`` and ``F_ps`` (18 in all).
Weights: ``1 / se^2`` of each observed moment -- from a bootstrap over trials for a run directory, and for
Table 2 (100 trials) ``se = sd / sqrt(100)`` for a mean and ``sd / sqrt(2 * 99)`` for an s.d. (normal
approximation). ``R_cdr`` telescopes to ``log(D_T / D_1) / (T - 1)`` when every ``D_t`` is defined, so with
the default floor ``d_floor = 1e-6`` on ``D_t`` its magnitude is bounded by about
``log(max D / 1e-6) / 11``; the paper's star (-3.44 +- 2.40) and mesh (-1.66 +- 42.25) lie beyond that bound
(:func:`r_cdr_bound`), so for Table 2 the four star/mesh ``R_cdr`` moments get weight 0 and their ordering
is a prediction, not a target.

Uncertainty: ``n_boot`` linearized bootstrap draws (:func:`mascot.calibrate.fit.linearized_bootstrap`):
resampled target moments (trials resampled with replacement; for Table 2 a parametric bootstrap
``N(moment, se^2)``) and the estimate's own simulation noise, each mapped to the parameters by one
Gauss-Newton step from the estimate (the SMM sandwich covariance), in the coordinates of
:func:`mascot.calibrate.trials.natural_coords` (log noise scales, ``bias / sigma``, probabilities as
themselves), where the near-symmetry of the noise scales is a straight valley and a probability at its box's
edge keeps the data's slope; the Levenberg-Marquardt polish works in the same coordinates.
Warm-started refits, the first release's method, stayed in the valley around the estimate and under-covered:
on the recovery run their s.d.s were 2-10 times smaller in the directions the moments hardly move.
Predictions (the Kruskal-Wallis H and p, Spearman r_s, every moment): ``n_pred`` simulated runs of the
observed trial count, run ``r`` at the ``r``-th bootstrap draw (parameter and sampling uncertainty); median
and 5-95% range.
"""

from __future__ import annotations

import functools
import json
import math
import time
import warnings
from pathlib import Path

import numpy as np

from mascot.calibrate.fit import Param, fit_smm, gauss_newton
from mascot.calibrate.trials import (
    METRICS,
    TOPOS,
    SimConfig,
    flat_params,
    natural_coords,
    nest_params,
    simulate_metrics,
)
from mascot.calibrate.trials_fit_report import json_clean, r_cdr_bound, report_markdown
from mascot.calibrate.trials_targets import (  # noqa: F401  (re-exported: part of this module's API)
    STATS,
    abstention_nodes,
    moment_names,
    moments,
    moments_jax,
    observed_from_paper,
    observed_from_run,
    profile_keys,
    step_profile,
)
from mascot.errors import InputError

__all__ = [
    "TOPOS",
    "METRICS",
    "FIT_PARAMS",
    "calibrate_trials",
    "observed_from_run",
    "observed_from_paper",
    "moment_names",
    "moments",
    "profile_keys",
    "r_cdr_bound",
    "step_profile",
]

#: the fitted parameters (the rest stay at hand-tuned-v1), with boxes and starting values
#: starting values: the estimates of the Table 2 fit's earlier stages (a numpy exploration of the stale-Parity model,
#: then warm-started fits of 450-900 iterations), so that `mascot calibrate trials --paper-table2` starts where
#: the committed fit did; the fit is local (ES gradients on a heavy-tailed simulator)
FIT_PARAMS = (
    Param("sigma", 1.0, 600.0, 5.495),
    Param("bias", -400.0, 400.0, -245.7),
    Param("p_blunder", 0.0, 0.5, 0.2313),
    Param("blunder_scale", 1.0, 40.0, 3.146),
    Param("persist", 0.0, 1.0, 0.5),
    Param("rho_c", 0.0, 1.0, 0.01726),
    Param("chain.sigma_scale", 0.02, 5.0, 0.1004),
    Param("chain.p_keep_parity", 0.0, 1.0, 0.3102),
    Param("chain.p_boundary", 0.0, 1.0, 0.4489),
    Param("chain.persist", 0.0, 1.0, 0.731),
    Param("star_leaf.p_exact", 0.0, 1.0, 0.9919),
    Param("star_leaf.p_keep_parity", 0.0, 1.0, 0.96),
    Param("star_leaf.p_boundary", 0.0, 1.0, 0.5453),
    Param("star_leaf.persist", 0.0, 1.0, 0.2674),
    Param("star_judge.p_copy", 0.0, 1.0, 0.08733),
    Param("star_judge.noise", 0.01, 5.0, 0.06566),
    Param("mesh_agent.p_exact", 0.0, 1.0, 0.9925),
    Param("mesh_agent.p_keep_parity", 0.0, 1.0, 0.924),
    Param("mesh_agent.p_boundary", 0.0, 1.0, 0.1603),
    Param("mesh_agent.persist", 0.0, 1.0, 0.9899),
    Param("mesh_reviser.p_copy", 0.0, 1.0, 0.1489),
    Param("mesh_reviser.noise", 0.01, 5.0, 0.07101),
)
#: available to ``fit_names`` / ``--fit`` (not in the default fit): what a small model that echoes needs
FIT_PARAMS = FIT_PARAMS + (
    Param("chain.p_echo", 0.0, 1.0, 0.5),
    Param("star_leaf.p_echo", 0.0, 1.0, 0.5),
    Param("mesh_agent.p_echo", 0.0, 1.0, 0.5),
    Param("parse_fail", 0.0, 0.99, 0.2),
)
#: the floor on a run's bootstrap standard errors: SE_FLOOR_REL * |moment| + SE_FLOOR_ABS
SE_FLOOR_REL, SE_FLOOR_ABS = 0.01, 0.01
_NOT_DEFAULT = ("persist", "chain.p_echo", "star_leaf.p_echo", "mesh_agent.p_echo", "parse_fail")
#: the default fit: every parameter above but the global ``persist`` (the per-role ones replace it); a fitted
#: global ``persist`` ties every role's persistence that is not fitted itself (the recovery runs use this)
DEFAULT_FIT = tuple(p.name for p in FIT_PARAMS if p.name not in _NOT_DEFAULT)


def _tie(theta: dict, names) -> dict:
    """A fitted global ``persist`` sets every role's ``persist`` that is not fitted itself."""
    from mascot.calibrate.trials import ROLE_NAMES

    if "persist" not in names:
        return theta
    return {**theta, **{f"{r}.persist": theta["persist"] for r in ROLE_NAMES if f"{r}.persist" not in names}}


def _fit(
    target,
    se,
    cfg: SimConfig,
    *,
    seed,
    steps,
    n_sim,
    init=None,
    weights_mask=None,
    lr=0.05,
    params=FIT_PARAMS,
    base=None,
    profile_steps=None,
    progress=None,
):
    import jax

    from mascot.kernels.precision import float64

    w = np.where(np.isfinite(se) & (se > 0), 1.0 / np.maximum(se, 1e-12) ** 2, 0.0)
    if weights_mask is not None:
        w = w * weights_mask
    target = np.where(np.isfinite(target), target, 0.0)
    w = np.where(np.isfinite(target), w, 0.0)
    base = base or flat_params(nest_params({}, judge=cfg.judge))
    simulate = _simulator(
        cfg._replace(n_trials=_whole_runs(n_sim, cfg.n_trials)),
        tuple(p.name for p in params),
        tuple(sorted(base.items())),
        profile_steps,
        cfg.n_trials,
    )
    with float64():
        res = fit_smm(
            simulate,
            params,
            target,
            weights=w,
            steps=steps,
            lr=lr,
            grad="es",
            es_sigma=0.15,
            es_pairs=12,
            seed=seed,
            init=init,
            key=jax.random.PRNGKey(10_000 + seed),
            decay=0.05,
            progress=progress,
        )
    return res, w


@functools.lru_cache(maxsize=8)
def _whole_runs(n_sim: int, n_obs: int) -> int:
    """``n_sim`` rounded up to a whole number of runs of the observed ``n_obs`` trials."""
    return int(math.ceil(int(n_sim) / int(n_obs)) * int(n_obs))


@functools.lru_cache(maxsize=16)
def _simulator(scfg: SimConfig, names: tuple, base: tuple, profile_steps=None, block=None):
    """``simulate(theta, key) -> moments`` for :func:`fit_smm` (fitted ``names``, the rest from ``base``), one
    function object per setting (so its compiled optimiser step is reused across fits)."""
    fixed = dict(base)

    def simulate(theta, key):
        th = _tie({**{k: v for k, v in fixed.items() if k not in names}, **theta}, names)
        return moments_jax(simulate_metrics(th, key, scfg, profile=bool(profile_steps)), profile_steps, block)

    return simulate


def _simulate_runs(params, cfg: SimConfig, n_rep: int, seed: int, profile: bool = False) -> list[dict]:
    """``n_rep`` simulated runs (``cfg.n_trials`` trials each) at nested ``params`` (one dict, or a list of
    ``n_rep``: run ``r`` at ``params[r]``): per-trial metrics (and, with ``profile``, the step-profile rows).
    Run ``r`` is simulated under the ``r``-th of ``n_rep`` keys split from ``seed``, by the one compiled program of
    ``cfg`` (:func:`mascot.calibrate.trials.simulate_program`)."""
    import jax

    from mascot.calibrate.trials import profile_names, simulate_program
    from mascot.kernels.precision import float64

    names = list(METRICS) + (profile_names(cfg.steps) if profile else [])
    if not isinstance(params, dict) and len(params) != n_rep:
        raise InputError(f"_simulate_runs: {len(params)} parameter sets for {n_rep} runs")
    flats = [flat_params(params)] * n_rep if isinstance(params, dict) else [flat_params(p) for p in params]
    prog = simulate_program(cfg, bool(profile))
    with float64():
        keys = jax.random.split(jax.random.PRNGKey(seed), n_rep)
        outs = [{t: np.asarray(a) for t, a in prog(f, k).items()} for f, k in zip(flats, keys)]
    return [{t: {m: o[t][i] for i, m in enumerate(names)} for t in TOPOS} for o in outs]


def _tests(per: dict) -> dict:
    """Kruskal-Wallis (H, p) and Spearman r_s (trials report conventions) of per-trial metrics."""
    from mascot.analysis import stats as st
    from mascot.analysis.trials_report import PREDICTORS, spectral_predictions

    pred = _SPEC.get("p") or _SPEC.setdefault("p", spectral_predictions())
    out = {}
    for m in METRICS:
        groups = [np.asarray(per[t][m], float) for t in TOPOS]
        h, p = st.kruskal(groups)
        key, sign = PREDICTORS[m]
        means = [np.nanmean(g) for g in groups]
        rs = st.spearman([pred[t][key] for t in TOPOS], [sign * x for x in means])
        out[m] = {"H": h, "p": p, "r_s": rs}
    return out


_SPEC: dict = {}


def _boot_moments(per: dict, rng, profile_steps=None) -> np.ndarray:
    idx = {t: rng.integers(0, len(per[t]["E_ceg"]), len(per[t]["E_ceg"])) for t in TOPOS}
    return moments({t: {m: np.asarray(x)[idx[t]] for m, x in per[t].items()} for t in TOPOS}, profile_steps)


def _observed(source, per=None, profile=True):
    """(target, se, cfg, info, per_trial or None, boot(rng) -> resampled target, profile_steps or None)."""
    if source is None or source == "paper-table2":
        target, se, cfg = observed_from_paper()
        info = {"source": "SR paper, Table 2 (Qwen2.5-7B-Instruct, 100 trials)", "kind": "paper"}
        return target, se, cfg, info, None, (lambda rng: target + se * rng.standard_normal(se.size)), None
    if per is None:
        per, cfg, info = observed_from_run(source)
    else:
        _, cfg, info = observed_from_run(source)
        cfg = cfg._replace(n_trials=min(len(per[t]["E_ceg"]) for t in TOPOS))
    ps = cfg.steps if profile else None
    target = moments(per, ps)
    rng = np.random.default_rng(12345)
    reps = np.array([_boot_moments(per, rng, ps) for _ in range(400)])
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a moment the run did not record is NaN in every draw
        se = np.nanstd(reps, axis=0, ddof=1)
    # a sample whose trials are all equal (a model that echoes its input) has bootstrap se 0: floor it, so
    # that every moment keeps a finite weight
    se = np.maximum(se, SE_FLOOR_REL * np.abs(np.nan_to_num(target)) + SE_FLOOR_ABS)
    return target, se, cfg, info, per, (lambda rng: _boot_moments(per, rng, ps)), ps


def calibrate_trials(
    source,
    out,
    *,
    seed: int = 0,
    n_boot: int = 200,
    quick: bool = False,
    n_pred: int = 40,
    steps: int | None = None,
    per_trial: dict | None = None,
    name: str | None = None,
    fit_names: tuple | None = None,
    base: dict | None = None,
    sd_weight: float = 1.0,
    n_starts: int = 1,
    init=None,
    n_sim: int | None = None,
    profile: bool = True,
    polish: int = 6,
    progress=None,
    hold_out=(),
    prior=(),
) -> dict:
    """Fit the surrogate to ``source`` (a run directory, or ``None`` / ``"paper-table2"`` for the SR paper's
    Table 2) and write ``out/params.toml``, ``out/report.md``, ``out/fit.json`` and the observed-vs-predicted
    figure. ``quick``: fewer iterations and simulated trials (tests). ``fit_names``: fit only these of
    :data:`FIT_PARAMS`; the others (and every unfitted parameter) from ``base`` (a nested parameter dict,
    default hand-tuned-v1). ``sd_weight`` multiplies the weights of the s.d. moments (1: plain inverse
    variances). ``n_starts``: the default start and ``n_starts - 1`` random ones. ``init``: start from this
    parameter file (or nested dict) instead of the default start (a warm start, e.g. from an earlier
    calibration). ``n_sim``: simulated trials per topology per evaluation (default max(200, observed)).
    ``profile`` (run directories only): fit the step profile too (:func:`profile_keys`: how error, ``D_t`` and
    the arms' gap grow over the steps, and Parity misses), not only Table 2's 18 moments. ``polish``: at most
    this many Levenberg-Marquardt iterations after the ES fit (:func:`mascot.calibrate.fit.gauss_newton`, on
    ``max(4000, 2 x observed)`` simulated trials per topology under one key). ``progress(msg)``: one line per
    stage and about ten during the ES fit (objective, elapsed and remaining time). ``hold_out``: moment names
    (``fit.json``'s ``moment_names``) the fit must not see (weight 0; an out-of-sample test predicts them); the
    predictions are then made at the bootstrap draws, as for a run. ``prior``: parameters of :data:`FIT_PARAMS`
    not fitted because no moment of this fit can move them (a held-out topology's own roles): each prediction
    run draws them uniformly in their boxes, so that what the fit cannot know widens the predicted range.
    Returns the summary dict."""
    if not (isinstance(sd_weight, (int, float)) and math.isfinite(sd_weight) and sd_weight >= 0):
        raise InputError(f"sd_weight must be a finite number >= 0; got {sd_weight!r}")
    from mascot.io import atomic_write_text
    from mascot.protocols.state_tracking.surrogate import params_toml

    t0 = time.perf_counter()
    target, se, cfg, info, per, boot, psteps = _observed(source, per_trial, profile)
    fparams = tuple(p for p in FIT_PARAMS if p.name in (DEFAULT_FIT if fit_names is None else fit_names))
    if fit_names is not None and len(fparams) != len(set(fit_names)):
        raise InputError(f"fit_names must be among {', '.join(p.name for p in FIT_PARAMS)}; got {fit_names}")
    from mascot.protocols.state_tracking.surrogate import SurrogateBackend

    init_nested = None
    if init is not None:
        init_nested = SurrogateBackend.from_params(init).params() if not isinstance(init, dict) else init
    # the parameters not fitted: from base, else from the init file, else hand-tuned-v1
    base_nested = (
        base if base is not None else init_nested if init_nested is not None else nest_params({}, judge=cfg.judge)
    )
    try:  # an impossible parameter set is refused now, not when the fitted file is written minutes later
        SurrogateBackend(**base_nested)
    except (TypeError, ValueError) as e:
        raise InputError(f"the parameters not fitted do not make a valid surrogate: {e}") from None
    bflat = flat_params(base_nested)
    kw = {"params": fparams, "base": bflat, "profile_steps": psteps}
    mask = np.ones(target.size)
    names_m = moment_names(psteps)
    excluded = []
    hold_out, prior = tuple(hold_out), tuple(prior)
    bad_p = [k for k in prior if k not in {p.name for p in FIT_PARAMS} or k in {p.name for p in fparams}]
    if bad_p:
        raise InputError(f"prior: {', '.join(bad_p)} must be parameters of FIT_PARAMS that are not fitted")
    bad = [h for h in hold_out if h not in names_m]
    if bad:
        raise InputError(f"hold_out: unknown moment(s) {', '.join(bad)}; the moments are {', '.join(names_m)}")
    for h in hold_out:
        mask[names_m.index(h)] = 0.0
    if info["kind"] == "paper":
        for t in ("mesh", "star"):
            for s in STATS:
                i = names_m.index(f"{t}.R_cdr.{s}")
                mask[i] = 0.0
                excluded.append(names_m[i])
    elif psteps:
        # a run's fit uses log1p(E_ceg) and log1p(F_ps) (in the profile) instead of the raw metrics: a mean or
        # s.d. of heavy-tailed trials is, in most samples, far below its expectation (the rare extreme trials
        # that make up the expectation are missing), which biased the fitted noise scale; the raw moments are
        # still predicted and reported
        for t in TOPOS:
            for m in ("E_ceg", "F_ps"):
                for s_ in STATS:
                    i = names_m.index(f"{t}.{m}.{s_}")
                    mask[i] = 0.0
                    excluded.append(names_m[i])
    for i, nm in enumerate(names_m):
        if nm.endswith(".sd"):
            mask[i] *= float(sd_weight)
    steps = steps or (60 if quick else 450)
    if n_sim is None:
        n_sim = cfg.n_trials if quick else max(200, cfg.n_trials)
    elif isinstance(n_sim, bool) or not isinstance(n_sim, int) or n_sim < 2:
        raise InputError(f"n_sim must be an integer >= 2; got {n_sim!r}")
    start = None
    if init is not None:
        f0 = flat_params(init_nested)
        # inside the box (1% from its edges), so that the optimiser can move a parameter the file has at an edge
        start = {
            p.name: min(max(f0[p.name], p.lo + 0.01 * (p.hi - p.lo)), p.hi - 0.01 * (p.hi - p.lo)) for p in fparams
        }
    # multi-start: the default start and n_starts - 1 random ones (uniform in each box, sigma/bias at their
    # defaults' scale), a short fit from each, then the rest of the iterations from the best
    n_starts = 1 if quick else int(n_starts)
    rs = np.random.default_rng([seed, 99])
    starts = [start] + [
        {
            p.name: (p.lo + (p.hi - p.lo) * rs.uniform(0.1, 0.9))
            if p.name not in ("sigma", "bias", "blunder_scale")
            else p.init
            for p in fparams
        }
        for _ in range(n_starts - 1)
    ]
    first = steps if n_starts == 1 else steps // 3
    say = progress or (lambda msg: None)
    say(
        f"fitting {len(fparams)} parameters to {int(np.count_nonzero((mask > 0) & np.isfinite(target)))} moments: {steps} ES steps on "
        f"{_whole_runs(n_sim, cfg.n_trials)} simulated trials per topology"
        + (f" from {n_starts} starts" if n_starts > 1 else "")
        + " (the first step compiles the simulator)"
    )
    total = first * len(starts) + (steps - first if n_starts > 1 else 0)
    t_es, done, t_one = time.perf_counter(), [0], []

    def es_progress(i, loss):
        done[0] += 1
        if done[0] == 1:
            t_one.append(time.perf_counter())  # the rate is timed from here: the first step compiles
        if progress is not None and (done[0] % max(1, total // 10) == 0 or done[0] == total):
            now = time.perf_counter()
            if done[0] == 1:  # no rate yet: this step compiled
                say(f"ES step 1/{total}: objective {loss:.4g}, {now - t_es:.0f} s (compiling included)")
                return
            rate = (now - t_one[0]) / (done[0] - 1)
            say(
                f"ES step {done[0]}/{total}: objective {loss:.4g}, {now - t_es:.0f} s, "
                f"about {rate * (total - done[0]):.0f} s left in the ES stage (then the polish and predictions)"
            )

    tries = [
        _fit(
            target, se, cfg, seed=seed, steps=first, n_sim=n_sim, weights_mask=mask, init=st, progress=es_progress, **kw
        )
        for st in starts
    ]
    res, w = min(tries, key=lambda r: r[0].loss)
    if n_starts > 1:
        hist0 = res.history
        res, w = _fit(
            target,
            se,
            cfg,
            seed=seed,
            steps=steps - first,
            n_sim=n_sim,
            weights_mask=mask,
            init=res.params,
            progress=es_progress,
            **kw,
        )
        res = res._replace(
            history=np.concatenate([hist0, res.history]), iterations=steps, loss=min(res.loss, float(hist0.min()))
        )
    es_loss = res.loss
    # polish: Levenberg-Marquardt steps on a larger simulation (n_grad trials, one key), then the linearized
    # bootstrap on that same simulation
    n_grad = max(400, cfg.n_trials) if quick else max(4000, 2 * cfg.n_trials)
    say(
        f"ES objective {res.loss:.4g}; Levenberg-Marquardt polish (at most {2 if quick else int(polish)} steps) on "
        f"{_whole_runs(n_grad, cfg.n_trials)} simulated trials per topology"
    )
    moments_at, noise_at = _large_sim(cfg, n_grad, seed, **kw)
    tclean = np.where(np.isfinite(target), target, 0.0)
    se_fit, inflate = se, np.ones(se.size)
    if info["kind"] == "run":
        # heavy tails: a sample that happens to hold no extreme trial has a bootstrap se far below the truth's
        # (the recovery test's 80 trials: star F_ps s.d. 97 where the model's is ~400, se 11 vs ~45), and such a
        # moment would dominate the fit. Each moment's se is therefore the larger of the bootstrap's and the
        # model's (the s.d. over simulated runs of the observed size at the ES estimate)
        r_nest = nest_params(_tie(res.params, res.params), judge=cfg.judge, base=base_nested)
        se_model = np.nanstd(
            np.array(
                [
                    moments(r, psteps)
                    for r in _simulate_runs(r_nest, cfg, 2 if quick else 200, seed + 555, profile=bool(psteps))
                ]
            ),
            axis=0,
            ddof=1,
        )
        se_fit = np.where(np.isfinite(se_model), np.maximum(se, se_model), se)
        inflate = se_fit / se
        w = np.where(np.isfinite(se_fit) & (se_fit > 0), 1.0 / np.maximum(se_fit, 1e-12) ** 2, 0.0) * mask
        w = np.where(np.isfinite(target), w, 0.0)
    coords = natural_coords(fparams, bflat)
    n_pol, t_pol = 2 if quick else int(polish), time.perf_counter()

    def pol_progress(i, loss):
        say(f"polish step {i}/{n_pol} (at most): objective {loss:.4g}, {time.perf_counter() - t_pol:.0f} s")

    pol = gauss_newton(moments_at, fparams, res.params, tclean, w, iters=n_pol, coords=coords, progress=pol_progress)
    est = pol.params
    say(f"objective {pol.loss:.4g} after {pol.iterations} polish steps; uncertainty from {n_boot} bootstrap draws")
    boot_arr, bnames, ident, sd_raw = _uncertainty(
        est,
        target,
        w,
        lambda rng: target + inflate * (boot(rng) - target),
        moments_at,
        noise_at,
        fparams,
        n_boot=n_boot,
        seed=seed,
        coords=coords,
    )
    # the s.d.: the draws', or, where a box's edge truncates them (an estimate at the edge has about half its
    # draws clipped onto it), the s.d. they have before the clipping (on the second recovery sample p_blunder,
    # estimated at its edge 0.5: 0.087 clipped, 0.17 before, its truth 1.6 of the latter from the estimate)
    sd = {
        k: float(max(np.std(boot_arr[:, i], ddof=1), np.nan_to_num(sd_raw[i]))) if len(boot_arr) > 1 else math.nan
        for i, k in enumerate(bnames)
    }
    ci = {
        k: [float(np.quantile(boot_arr[:, i], 0.05)), float(np.quantile(boot_arr[:, i], 0.95))]
        if len(boot_arr) > 1
        else [math.nan, math.nan]
        for i, k in enumerate(bnames)
    }
    nested = nest_params(_tie(est, est), judge=cfg.judge, base=base_nested)
    # predictions: n_pred simulated runs of the observed size, run r at the r-th bootstrap draw of the
    # parameters (parameter and sampling uncertainty together) without the unidentified directions' spread
    # (flat only at the estimate: a draw at a box edge there may fit the data badly); at the estimate when
    # there are no draws, and for a table: Table 2's 14 weighted moments leave 21 parameters loose even in
    # the identified directions, and draws that far from the estimate no longer fit the table (its chain
    # E_ceg mean 2,094 fell outside the draws' 5-95% range, [740, 2,030])
    say(f"predictions: {n_pred} simulated runs of the observed size; writing the report and figures")
    use_draws = len(ident) > 0 and (info["kind"] == "run" or bool(hold_out))
    if use_draws:
        # parameters no moment of this fit can move (prior): for each run a uniform draw in its box
        rp = np.random.default_rng([seed, 31])
        boxes = {p.name: (p.lo, p.hi) for p in FIT_PARAMS if p.name in prior}
        at_draws = [
            nest_params(_tie(d, d), judge=cfg.judge, base=base_nested)
            for d in (
                {**dict(zip(bnames, ident[r % len(ident)])), **{k: rp.uniform(*b) for k, b in boxes.items()}}
                for r in range(n_pred)
            )
        ]
        runs = _simulate_runs(at_draws, cfg, n_pred, seed + 777, profile=bool(psteps))
    else:
        runs = _simulate_runs(nested, cfg, n_pred, seed + 777, profile=bool(psteps))
    pm = np.array([moments(r, psteps) for r in runs])
    tests = [_tests(r) for r in runs]
    pred = {"median": np.nanmedian(pm, 0), "lo": np.nanquantile(pm, 0.05, 0), "hi": np.nanquantile(pm, 0.95, 0)}
    pt = {m: {k: [tt[m][k] for tt in tests] for k in ("H", "p", "r_s")} for m in METRICS}
    obs_tests = _tests(per) if per is not None else None
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "params.toml").unlink(missing_ok=True)  # written last: a directory with params.toml is complete
    comment = (
        f"state-tracking surrogate calibrated by `mascot calibrate trials` to {info['source']}\n"
        f"fitted: {', '.join(p.name for p in fparams)}; "
        f"others {'given' if base is not None else 'from ' + str(init) if init is not None else 'at hand-tuned-v1'}\n"
        f"seed {seed}, {res.iterations} ES iterations + {pol.iterations} Levenberg-Marquardt steps, "
        f"objective {pol.loss:.4g}"
    )
    pname = name or ("paper-table2" if info["kind"] == "paper" else Path(str(source)).name)
    summary = {
        "source": info["source"],
        "kind": info["kind"],
        "estimates": est,
        "boot_sd": sd,
        "boot_ci": ci,
        "n_boot": int(len(boot_arr)),
        "boot": boot_arr.tolist(),
        "predicted_at_draws": bool(use_draws),
        "loss": pol.loss,
        "se_fit": se_fit.tolist(),
        "iterations": res.iterations,
        "history": res.history.tolist(),
        "es_loss": es_loss,
        "polish": {"n_sim": n_grad, "iterations": pol.iterations, "history": pol.history.tolist()},
        "moment_names": names_m,
        "target": target.tolist(),
        "se": se.tolist(),
        "weights": w.tolist(),
        "excluded": excluded,
        "held_out": list(hold_out),
        "prior": list(prior),
        "predicted": {k: v.tolist() for k, v in pred.items()},
        "predicted_tests": pt,
        "observed_tests": obs_tests,
        "n_trials": cfg.n_trials,
        "n_sim": n_sim,
        "n_pred": n_pred,
        "d_floor": cfg.d_floor,
        "steps": cfg.steps,
        "profile_steps": psteps,
        "seed": seed,
        "quick": quick,
        "sd_weight": float(sd_weight),
        "init": None if init is None or isinstance(init, dict) else str(init),
        "abstained": info.get("abstained"),
        "parse_fail_fitted": "parse_fail" in est,
        "abstained_model": float(nested["parse_fail"]) ** (cfg.retries + 1),
    }
    from mascot.calibrate.trials_figures import figures

    figs = figures(summary, out / "observed_vs_predicted")
    summary["wall_s"] = time.perf_counter() - t0
    summary["figures"] = [str(p.name) for p in figs]
    atomic_write_text(out / "fit.json", json.dumps(json_clean(summary), indent=1))
    atomic_write_text(out / "report.md", report_markdown(summary))
    atomic_write_text(out / "params.toml", params_toml(nested, name=pname, comment=comment))
    return summary


def _large_sim(cfg: SimConfig, n_grad: int, seed: int, *, params, base, profile_steps):
    """``(moments_at(theta), noise_at(theta, i))``: numpy moments of ``n_grad`` simulated trials per topology
    (rounded up to whole runs of ``cfg.n_trials``, whose sample s.d.s the moments' s.d.s average: ``block``),
    in one call of the compiled simulator for that many trials (every parameter an argument, one program for
    the polish, the Jacobian and the bootstrap), under one fixed key (the polish and the Jacobian), or under
    the ``i``-th fresh key (simulation noise)."""
    import jax

    from mascot.calibrate.trials import simulate_program
    from mascot.kernels.precision import float64

    names = tuple(p.name for p in params)
    fixed = {k: v for k, v in base.items() if k not in names}
    prog = simulate_program(cfg._replace(n_trials=_whole_runs(n_grad, cfg.n_trials)), bool(profile_steps))
    mom = _moments_program(profile_steps, cfg.n_trials)
    gkey = jax.random.PRNGKey(30_000 + seed)

    def at(theta, key):
        th = _tie({**fixed, **{k: float(theta[k]) for k in names}}, names)
        with float64():
            return np.asarray(mom(prog(th, key)))

    def moments_at(theta):
        return at(theta, gkey)

    def noise_at(theta, i):
        return at(theta, jax.random.fold_in(jax.random.PRNGKey(20_000 + seed), i))

    return moments_at, noise_at


@functools.lru_cache(maxsize=8)
def _moments_program(profile_steps, block):
    import jax

    return jax.jit(lambda sim: moments_jax(sim, profile_steps, block))


def _uncertainty(est: dict, target, w, boot, moments_at, noise_at, params, *, n_boot: int, seed: int, coords=None):
    """``n_boot`` linearized bootstrap draws of the estimate (:func:`mascot.calibrate.fit.linearized_bootstrap`):
    the data moments resampled by ``boot`` (trials with replacement; for a table, parametric), the estimate's
    simulation noise from ``n_boot`` simulations under fresh keys (``noise_at``), the Jacobian from
    ``moments_at`` (the polish's simulation). Returns ``(draws (n_boot, p), names, identified, sd_unclipped)``:
    the draws without the unidentified directions' spread (the predictions use those) and their s.d.s before
    the clipping to the boxes."""
    from mascot.calibrate.fit import linearized_bootstrap

    names = [p.name for p in params]
    if n_boot < 1:
        return np.zeros((0, len(names))), names, np.zeros((0, len(names))), np.full(len(names), np.nan)
    rng = np.random.default_rng([seed, 7])
    data_dev = np.array([boot(rng) for _ in range(n_boot)]) - target
    sims = np.array([noise_at(est, i) for i in range(n_boot)])
    lb = linearized_bootstrap(moments_at, params, est, data_dev, sims - sims.mean(0), w, seed=seed, coords=coords)
    return lb.draws, lb.names, lb.identified, lb.sd_unclipped
