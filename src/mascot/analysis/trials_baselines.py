"""Honest numbers beside Table 2 of a state-tracking run ("Predictive Maps of Multi-Agent Reasoning", Sec. 5.2):
which values rest on carried-forward states, and two trivial baselines run through the same harness.

* **Carried states.** A step whose deciding node (chain agent, star judge, every mesh revision) failed to parse
  after all retries carries the input state forward (``trials.parquet``'s ``carried``): the state was not
  produced by the model, and every later state of that trial grows from it. :func:`carried_summary` counts,
  per topology, the carried steps and the trials whose metrics rest on them (E_ceg and R_cdr use the
  unperturbed arm, F_ps both arms); the report marks the affected means and gives the means over the trials
  without a carried step beside them.
* **Baselines.** :func:`~mascot.protocols.state_tracking.baselines.run_baselines` runs
  :class:`~mascot.protocols.state_tracking.baselines.EchoBackend`
  (every agent replies with its input state) and
  :class:`~mascot.protocols.state_tracking.baselines.RandomBackend` (uniform valid states, Value uniform on
  the range of the reference trajectories of both arms, seeded with the run's seed) through
  :func:`~mascot.protocols.state_tracking.harness.run_trials` with the run's own config (topologies, trials,
  steps, epsilon, initial state, seed, retries, sampling, ...) into ``RUN/baselines/<name>/`` (requests not
  logged; reruns resume, so a finished baseline is read, not rerun). :func:`compare` says per topology
  whether the run's mean E_ceg is below each baseline's, and in how many trials.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from mascot.analysis import stats as st

__all__ = ["carried_summary", "clean_means", "compare"]

#: metric -> the arms of a trial it reads (E_ceg and R_cdr: the unperturbed arm; F_ps: both final states)
METRIC_ARMS = {"E_ceg": "unperturbed", "R_cdr": "unperturbed", "F_ps": "either"}


def carried_summary(df: pd.DataFrame, metrics: pd.DataFrame) -> dict:
    """Per topology: ``steps`` (steps t >= 1 of both arms), ``carried_steps`` and ``carried_fraction``,
    ``trials``, and per metric the number of trials whose value rests on a carried state
    (``affected[metric]``; E_ceg and R_cdr: a carried step in the unperturbed arm; F_ps: in either arm)."""
    out = {}
    for t in [t for t in ("chain", "mesh", "star") if t in set(metrics.topology)]:
        sub = df[(df.topology == t) & (df.step > 0)]
        mt = metrics[metrics.topology == t]
        n_steps = int(len(sub))
        carried = int(sub.carried.sum())
        aff = {m: int(_affected(mt, m).sum()) for m in METRIC_ARMS}
        out[t] = {
            "steps": n_steps,
            "carried_steps": carried,
            "carried_fraction": carried / n_steps if n_steps else math.nan,
            "trials": int(len(mt)),
            "affected": aff,
        }
    return out


def _affected(mt: pd.DataFrame, metric: str) -> np.ndarray:
    """Trials (rows of ``mt``) whose ``metric`` rests on a carried state."""
    if METRIC_ARMS[metric] == "unperturbed":
        return mt.carried_unperturbed.to_numpy() > 0
    return (mt.carried_unperturbed.to_numpy() + mt.carried_perturbed.to_numpy()) > 0


def clean_means(metrics: pd.DataFrame) -> dict:
    """Per metric and topology: ``(mean, n)`` over the trials whose value rests on no carried state."""
    out: dict = {}
    for m in METRIC_ARMS:
        out[m] = {}
        for t in [t for t in ("chain", "mesh", "star") if t in set(metrics.topology)]:
            mt = metrics[metrics.topology == t]
            x = mt.loc[~_affected(mt, m), m].to_numpy(dtype=float)
            x = x[np.isfinite(x)]
            out[m][t] = (st.fmean(x), int(x.size))
    return out


def compare(metrics: pd.DataFrame, baseline_metrics: dict[str, pd.DataFrame], metric: str = "E_ceg") -> dict:
    """Per baseline and topology: the run's mean ``metric``, the baseline's, whether the run's is lower
    (``beats``; NaN means compare as not lower), and the number of the run's trials below the baseline's
    mean (``trials_below`` of ``trials``)."""
    out: dict = {}
    for name, bm in baseline_metrics.items():
        out[name] = {}
        for t in [t for t in ("chain", "mesh", "star") if t in set(metrics.topology)]:
            x = metrics.loc[metrics.topology == t, metric].to_numpy(dtype=float)
            b = bm.loc[bm.topology == t, metric].to_numpy(dtype=float)
            x, b = x[np.isfinite(x)], b[np.isfinite(b)]
            mx, mb = st.fmean(x), st.fmean(b)
            out[name][t] = {
                "run": mx,
                "baseline": mb,
                "beats": bool(mx < mb),
                "trials_below": int((x < mb).sum()),
                "trials": int(x.size),
            }
    return out


# ----------------------------------------------------------------------------- Markdown for table2.md
def _finite(x) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def stat_cells(H, p, r_s, H_note, r_s_note, fmt, fmt_p) -> str:
    """The H | p | r_s cells of a Table 2 row: the numbers, or the sentence saying why they are not defined."""
    hp = f"{H_note} | —" if isinstance(H_note, str) else f"{fmt(H)} | {fmt_p(p)}"
    return f"{hp} | {r_s_note if isinstance(r_s_note, str) else fmt(r_s)}"


def baseline_rows(baselines: dict, metric: str, order, fmt, fmt_p) -> list[str]:
    """Table 2 rows of the baselines for ``metric`` (mean ± s.d. per topology, H, p, r_s)."""
    rows = []
    for name, b in baselines.items():
        e = b["metrics"][metric]
        cells = [f"{fmt(e['mean'][t])} ± {fmt(e['sd'][t])}" if t in e["mean"] else "n/a ± n/a" for t in order]
        rows.append(
            f"| | {name} baseline | "
            + " | ".join(cells)
            + " | "
            + stat_cells(e["H"], e["p"], e["r_s"], e.get("H_note"), e.get("r_s_note"), fmt, fmt_p)
            + " |"
        )
    return rows


def carried_note(carried: dict, order) -> list[str]:
    """The sentence under Table 2 on carried-forward states (which means are marked †, and why)."""
    topos = [t for t in order if t in carried]
    if not topos:
        return []
    if not any(carried[t]["carried_steps"] for t in topos):
        return ["Carried-forward states: none (every state of every trial was produced by the backend)."]
    parts = []
    for t in topos:
        c = carried[t]
        a = c["affected"]
        parts.append(
            f"{t}: {c['carried_steps']:,} of {c['steps']:,} steps carried ({100 * c['carried_fraction']:.1f}%), "
            f"E_ceg and R_cdr of {a['E_ceg']} of {c['trials']} trials and F_ps of {a['F_ps']} of "
            f"{c['trials']} rest on them"
        )
    return [
        "† The mean rests on carried-forward states: a step whose deciding node (chain agent, star judge, every "
        "mesh revision) failed to parse after all retries keeps its input state, which the model did not "
        "produce (E_ceg, R_cdr: unperturbed arm; F_ps: either arm). " + "; ".join(parts) + ". The row "
        '"ours, trials without carried states" gives the mean over the other trials.'
    ]


def baselines_section(stats: dict, order, fmt) -> list[str]:
    """The "Trivial baselines" section: what they are, where they ran, and whether the run beats them."""
    b = stats["baselines"]
    lines = [
        "## Trivial baselines",
        "",
        "Run through the same harness, parser and metrics with this run's config (topologies, trials, steps, "
        "epsilon, initial state, seed) into `baselines/<name>/` of the run directory: **echo** (every agent, "
        "judge and reviser replies with exactly the input state it was given) and **random** (uniform valid "
        "states, seeded, independent of the input",
    ]
    rnd = b.get("random", {}).get("backend", {}).get("options", {})
    if rnd:
        lines[-1] += (
            f"; Value uniform on [{rnd.get('value_low'):g}, {rnd.get('value_high'):g}], the range of the "
            "reference Values of both arms"
        )
    lines[-1] += ")."
    for name, v in b.items():
        cmp = v["E_ceg_vs_run"]
        parts = []
        for t in order:
            if t not in cmp:
                continue
            c = cmp[t]
            carried = (stats.get("carried") or {}).get(t, {})
            n_aff = int((carried.get("affected") or {}).get("E_ceg", 0) or 0) if isinstance(carried, dict) else 0
            caveat = (
                f"; but {n_aff} of {c['trials']} of our trials rest on carried-forward states (†), which mascot "
                "supplied, not the model"
                if n_aff
                else ""
            )
            parts.append(
                f"{t} **{'yes' if c['beats'] else 'no'}** (ours {fmt(c['run'])}, {name} {fmt(c['baseline'])}; "
                f"{c['trials_below']} of {c['trials']} trials below{caveat})"
            )
        lines += ["", f"Mean E_ceg below the {name} baseline's: " + "; ".join(parts) + "."]
    return lines
