"""What a state-tracking calibration fits (:mod:`mascot.calibrate.trials_fit`): the moments of a run's per-trial
metrics (means and s.d. per topology, per-step error profiles, abstention shares), observed from a run directory
(:func:`observed_from_run`) or from the SR paper's Table 2 (:func:`observed_from_paper`), and the same moments of
simulated trials (:func:`moments`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from mascot.calibrate.trials import METRICS, TOPOS, SimConfig
from mascot.errors import InputError

STATS = ("mean", "sd")


def profile_keys(topology: str, steps: int) -> list[str]:
    """The step-profile rows used for ``topology`` (:func:`mascot.calibrate.trials.profile_names`; the
    chain's ``D_t`` is its error, so its ``log1p_D`` rows are left out)."""
    from mascot.calibrate.trials import profile_names

    return [k for k in profile_names(steps) if not (topology == "chain" and k.startswith("log1p_D"))]


def _profile_moments(topology: str, steps: int) -> list[tuple[str, str]]:
    """(row, statistic) pairs of the step-profile moments: every row's mean across trials, and for the error at
    step 1 (one reply's noise or slip, not yet amplified by the rule) also its s.d. across trials, which
    separates the noise's scale from its tail (``p_blunder`` x ``blunder_scale``), and of ``log1p`` of E_ceg and
    F_ps (which replace the raw metrics' means and s.d.s in a run's fit). Only there: the s.d. of a
    row that is nearly constant but for rare outliers (the arms' gap, D_t at step 1 with exact leaves) has a
    bootstrap se that is tiny when the sample holds no outlier, and such a moment would dominate the fit."""
    out = []
    for k in profile_keys(topology, steps):
        out.append((k, "mean"))
        if k in ("log1p_err.s1", "log1p_E_ceg", "log1p_F_ps"):
            out.append((k, "sd"))
    return out


def moment_names(profile_steps: int | None = None) -> list[str]:
    """The 18 Table 2 moments (mean and s.d. of E_ceg, R_cdr, F_ps per topology) and, with ``profile_steps``,
    the step-profile means of a run of that many steps (:func:`profile_keys`)."""
    out = [f"{t}.{m}.{s}" for t in TOPOS for m in METRICS for s in STATS]
    if profile_steps:
        out += [f"{t}.{k}.{st}" for t in TOPOS for k, st in _profile_moments(t, profile_steps)]
    return out


def moments(per_trial: dict, profile_steps: int | None = None) -> np.ndarray:
    """The moments (numpy) named by :func:`moment_names` of ``{topology: {name: per-trial array}}`` (NaNs
    left out)."""
    out = []
    for t in TOPOS:
        for m in METRICS:
            x = np.asarray(per_trial[t][m], float)
            x = x[np.isfinite(x)]
            out += [x.mean() if x.size else math.nan, x.std(ddof=1) if x.size > 1 else math.nan]
    if profile_steps:
        for t in TOPOS:
            for k, st in _profile_moments(t, profile_steps):
                x = np.asarray(per_trial[t][k], float)
                x = x[np.isfinite(x)]
                if st == "mean":
                    out.append(x.mean() if x.size else math.nan)
                else:
                    out.append(x.std(ddof=1) if x.size > 1 else math.nan)
    return np.asarray(out)


def moments_jax(sim: dict, profile_steps: int | None = None, block: int | None = None):
    """:func:`moments` of simulated trials (jax). ``block``: the observed run's trial count; the simulated
    trials are cut into runs of that size and every s.d. is the mean of the runs' sample s.d.s -- the
    expectation of what the data's s.d. estimates (with heavy tails a sample s.d. of 80 trials is biased far
    below the population's, and matching the population's biased the fitted noise scale)."""
    import jax.numpy as jnp

    from mascot.calibrate.trials import profile_names

    def mean_sd(x):
        n = x.shape[-1]
        b = n if not block or block > n else int(block)
        x = x[..., : (n // b) * b].reshape(-1, b)
        ok = jnp.isfinite(x)
        k = jnp.maximum(ok.sum(-1), 2)
        mu = jnp.where(ok, x, 0.0).sum(-1) / k
        var = jnp.where(ok, (x - mu[:, None]) ** 2, 0.0).sum(-1) / (k - 1)
        return mu.mean(), jnp.sqrt(var + 1e-12).mean()

    out = []
    for t in TOPOS:
        for i in range(3):
            out += list(mean_sd(sim[t][i]))
    if profile_steps:
        names = profile_names(profile_steps)
        for t in TOPOS:
            for k, st in _profile_moments(t, profile_steps):
                x = sim[t][3 + names.index(k)]
                if st == "mean":
                    ok = jnp.isfinite(x)
                    out.append(jnp.where(ok, x, 0.0).sum() / jnp.maximum(ok.sum(), 1))
                else:  # runs of the observed size, as above
                    out.append(mean_sd(x)[1])
    return jnp.stack(out)


def abstention_nodes(df):
    """Requests per ``trials.parquet`` row that can abstain (the first-round nodes, the star's judge, the
    mesh's revisers; a retried request counts once), or ``None`` for a run without the ``n_abstained`` count.
    ``ValueError`` when a row's ``n_abstained`` is negative or above that count (a damaged file)."""
    if "n_abstained" not in df or "agent_values" not in df:
        return None
    nodes = (
        df.agent_values.map(len)
        + (df.topology == "star")
        + (df.revised_values.map(len) if "revised_values" in df else 0)
    )
    ab = df.n_abstained.to_numpy(float)
    bad = ~((ab >= 0) & (ab <= nodes.to_numpy(float)))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"n_abstained = {ab[i]:g} in row {i} ({df.topology.iloc[i]}, trial {df.trial.iloc[i]}, "
            f"step {df.step.iloc[i]}) is not between 0 and the row's {int(nodes.iloc[i])} requests (a "
            "retried request counted once; n_requests counts attempts)"
        )
    return nodes


def step_profile(df, steps: int | None = None) -> dict:
    """Per-trial step-profile rows (:func:`mascot.calibrate.trials.profile_names`) of a ``trials.parquet``
    frame, computed as the simulator computes them: ``{topology: {name: array (n_trials,)}}``."""
    from mascot.analysis.trials_report import arm_arrays
    from mascot.calibrate.trials import block_mean, profile_names, step_blocks

    T = int(df.step.max()) if steps is None else int(steps)
    df = df.assign(parity_miss=(df.parity != df.parity_true).astype(float))
    nodes = abstention_nodes(df)
    if nodes is not None:
        df = df.assign(abst_share=df.n_abstained / nodes.where(nodes > 0))
    else:  # an older run without the counts: the moment is NaN (weight 0)
        df = df.assign(abst_share=math.nan)
    out = {}
    for t in TOPOS:
        n = int(df[df.topology == t].trial.max()) + 1
        vt, v, d, pm, ab = (
            arm_arrays(df, t, c, n, T) for c in ("value_true", "value", "d_t", "parity_miss", "abst_share")
        )
        err = np.abs(vt[:, 0, 1:] - v[:, 0, 1:]).T  # (T, n)
        gap = np.abs(v[:, 1, 1:] - v[:, 0, 1:]).T
        rows = []
        with np.errstate(invalid="ignore"):
            for x in (err, d[:, 0, 1:].T, gap):
                rows += [block_mean(np.log1p(x[b]), np) for b in step_blocks(T)]
        rows.append(pm[:, 0, 1:].mean(1))
        rows += [np.log1p(err.sum(0)), np.log1p(gap[-1]), ab[:, 0, 1:].mean(1)]
        out[t] = dict(zip(profile_names(T), rows))
    return out


# ----------------------------------------------------------------------------- observed data
def _check_values(df, pq) -> None:
    """Refuse, naming the first row, what the harness never writes (an edited file with valid checksums would be
    fitted as data): a non-finite ``value`` or ``value_true``, one past the parser's limit
    (:data:`~mascot.kernels.state_tracking.MAX_ABS_VALUE`), an infinite or negative ``d_t`` (NaN where undefined)."""
    from mascot.kernels.state_tracking import MAX_ABS_VALUE

    for col in ("value", "value_true", "d_t"):
        if col not in df:
            continue
        x = df[col].to_numpy(np.float64, na_value=np.nan)
        need, ok = (  # D_t is NaN where undefined (step 0; fewer than two parsed replies to compare)
            ("NaN or a finite number >= 0", np.isnan(x) | (np.isfinite(x) & (x >= 0)))
            if col == "d_t"
            else ("a finite number within +-1e9", np.isfinite(x) & (np.abs(x) <= MAX_ABS_VALUE))
        )
        bad = np.flatnonzero(~ok)
        if bad.size:
            r = df.iloc[int(bad[0])]
            raise InputError(
                f"{str(pq)!r}: {col} = {float(x[bad[0]])!r} in {bad.size} row(s), first at {r.topology} trial {int(r.trial)} "
                f"step {int(r.step)}; it must be {need} (the harness writes no other: the file was edited): restore it "
                "or rerun the trials into a fresh directory"
            )


def observed_from_run(run_dir) -> tuple[dict, SimConfig, dict]:
    """Per-trial metrics of ``RUN_DIR/trials.parquet`` (as the trials report computes them), the simulator
    settings from ``RUN_DIR/run.json`` and a description. ``ValueError`` with a clear message otherwise."""

    from mascot.analysis.trials_report import trial_metrics

    d = Path(run_dir)
    if not d.is_dir():
        raise InputError(
            f"run directory {str(d)!r} " + ("is a file, not a directory" if d.exists() else "does not exist")
        )
    pq = d / "trials.parquet"
    if not pq.is_file():
        raise InputError(f"{str(d)!r} has no trials.parquet (not a finished `mascot trials` run)")
    rj = d / "run.json"
    if not rj.is_file():
        raise InputError(
            f"{str(d)!r} has no run.json: the run's settings (epsilon, retries, initial state, judge) "
            "are unknown, and the simulator would silently assume the defaults"
        )
    try:
        run = json.loads(rj.read_text())
    except (OSError, ValueError) as e:
        raise InputError(f"{str(rj)!r} is not readable JSON ({e})") from None
    if not isinstance(run, dict) or not isinstance(run.get("config"), dict):
        raise InputError(f"{str(rj)!r} is not a `mascot trials` run record (expected a JSON object with a 'config')")
    if run.get("complete") is False:
        raise InputError(
            f"{str(d)!r} is not a finished run (run.json says complete: false: it stopped, or is "
            "being resumed); finish it with the same `mascot trials` command first"
        )
    cfg_d = run["config"]
    lacking = [k for k in ("epsilon", "initial_state", "retries", "leaves", "mesh_agents") if k not in cfg_d]
    if lacking:
        raise InputError(f"{str(rj)!r}: config lacks {', '.join(lacking)}; the simulator would have to assume them")
    d_of = lambda x: x if isinstance(x, dict) else {}
    backend = d_of(run.get("backend")).get("identity", d_of(run.get("identity")).get("backend", {})) or {}
    if isinstance(backend, dict) and isinstance(backend.get("options"), dict):
        backend = {**backend["options"], **{k: v for k, v in backend.items() if k != "options"}}
    unsupported = [
        f"{k} = {cfg_d[k]!r}"
        for k, ok in (("mesh_tie", "first"), ("paired_seeds", True))
        if k in cfg_d and cfg_d[k] != ok
    ]
    if unsupported:
        raise InputError(
            f"{str(d)!r} was run with {', '.join(unsupported)}; the calibration simulator models "
            "mesh_tie = 'first' and paired seeds (the defaults) only"
        )
    try:  # every page against its checksum (runs written before checksums: decoded only)
        import pyarrow.parquet as pa_pq

        df = pa_pq.ParquetFile(pq, page_checksum_verification=True).read().to_pandas()
    except (OSError, ValueError) as e:
        raise InputError(
            f"{str(pq)!r} is damaged ({str(e).splitlines()[0][:120]}); rerun the trials command to "
            "rebuild it from its step files"
        ) from None
    missing = [t for t in TOPOS if t not in set(df.topology)]
    if missing:
        raise InputError(f"{str(pq)!r} lacks topologies {', '.join(missing)}; calibration needs chain, star and mesh")
    _check_values(df, pq)
    floor = _num(rj, cfg_d, "d_floor", 1e-6)
    if floor <= 0:
        raise InputError(f"{str(rj)!r}: config.d_floor must be > 0; got {floor!r}")
    met = trial_metrics(df, floor)
    per = {t: {m: met.loc[met.topology == t, m].to_numpy(float) for m in METRICS} for t in TOPOS}
    prof = step_profile(df)
    for t in TOPOS:
        per[t].update(prof[t])
    sub = df[df.step > 0]
    nodes = abstention_nodes(sub)
    n_req = float(nodes.sum()) if nodes is not None else 0.0
    # the share of requests (a retried request counts once) whose every attempt was malformed: what the
    # simulator's parse_fail^(retries + 1) is (n_requests counts attempts)
    abst = float(sub.n_abstained.sum()) / n_req if n_req > 0 else None
    ist = cfg_d.get("initial_state", [50.0, "A", 3])
    cfg = SimConfig(
        n_trials=int(min(len(per[t]["E_ceg"]) for t in TOPOS)),
        steps=int(df.step.max()),
        epsilon=_num(rj, cfg_d, "epsilon", 15.0),
        leaves=int(_num(rj, cfg_d, "leaves", 4, 1, True)),
        mesh_agents=int(_num(rj, cfg_d, "mesh_agents", 4, 2, True)),
        retries=int(_num(rj, cfg_d, "retries", 2, 0, True)),
        initial_state=_initial_state(rj, ist),
        judge=str(backend.get("judge", "mean")) if isinstance(backend, dict) else "mean",
        d_floor=floor,
    )
    if cfg.judge not in ("mean", "median", "vote"):
        raise InputError(f"{str(rj)!r}: judge must be one of mean, median, vote; got {cfg.judge!r}")
    return per, cfg, {"source": str(d), "kind": "run", "backend": backend, "abstained": abst}


def _num(rj, cfg_d: dict, key: str, default, lo=None, integer=False) -> float:
    """``cfg_d[key]`` as a finite number (an integer >= ``lo`` when ``integer``); ``ValueError`` naming the file
    and the key otherwise."""
    v = cfg_d.get(key, default)
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if ok and integer:
        ok = float(v).is_integer() and (lo is None or v >= lo)
    if not ok:
        want = f"an integer >= {lo}" if integer else "a finite number"
        raise InputError(f"{str(rj)!r}: config.{key} must be {want}; got {v!r}")
    return float(v)


def _initial_state(rj, ist) -> tuple:
    if not (
        isinstance(ist, (list, tuple))
        and len(ist) == 3
        and ist[1] in ("A", "B")
        and isinstance(ist[0], (int, float))
        and not isinstance(ist[0], bool)
        and math.isfinite(ist[0])
        and isinstance(ist[2], int)
        and not isinstance(ist[2], bool)
        and 1 <= ist[2] <= 9
    ):
        raise InputError(f"{str(rj)!r}: config.initial_state must be [Value, 'A' or 'B', Level 1-9]; got {ist!r}")
    return float(ist[0]), str(ist[1]), int(ist[2])


def observed_from_paper():
    """Table 2's means and s.d.s (100 trials) as a moment vector, its standard errors and settings."""
    from mascot.papers import SR_TABLE2

    m, se = [], []
    for t in TOPOS:
        for k in METRICS:
            mu, sd = SR_TABLE2[k][t]
            m += [mu, sd]
            se += [sd / 10.0, sd / math.sqrt(2 * 99)]
    return np.asarray(m), np.asarray(se), SimConfig(n_trials=100)
