"""Table 2, Figs 2-6 and statistics of a state-tracking trial run ("Predictive Maps of Multi-Agent
Reasoning", Sec. 5.2-5.5, Appendix B) from ``DIR/trials.parquet`` (written by
:mod:`mascot.protocols.state_tracking.harness`; ``mascot trials`` calls :func:`write_report` when the
harness returns).

Per trial (``metrics.csv``), on the unperturbed arm: ``E_ceg`` and ``R_cdr`` (Appendix A.2, see
:mod:`mascot.analysis.stats`; ``D_t`` is the pairwise disagreement of the star's leaf Values, of the
mesh's *revised* Values, and ``|x*_t - x^_t|`` for the chain), and ``F_ps = |x'_T - x_T|`` from the
paired perturbed arm.

``table2.csv`` has the columns ``metric,chain_mean,chain_sd,mesh_mean,mesh_sd,star_mean,star_sd,H,p,r_s``
(s.d. with ddof = 1; trials with an undefined metric are left out). ``H, p``: Kruskal-Wallis over the
per-trial values of the topologies run. ``r_s``: Spearman over the topology means against the SR
spectra of Table 1 (:func:`mascot.kernels.spectra.sr_spectra` on chain(steps), star(leaves + 1),
mesh(mesh_agents), gamma = 0.9), with the paper's sign conventions: ``E_ceg`` against rho (a positive
r_s would mean "higher rho, more error"; the paper finds the inversion, -1), ``R_cdr`` against Delta
with R_cdr negated (a larger gap predicts faster consensus, i.e. a more negative R_cdr; the paper's
+0.5), ``F_ps`` against kappa (the paper's +1). Ties in a prediction get average ranks
(``scipy.stats.spearmanr``): star and mesh both have rho = 10 exactly, so the paper's own means give
r_s = -0.87 for E_ceg under this convention, not the printed -1.00 (reported in ``table2.md``).
``r_s`` needs all three topologies (NaN otherwise); where H, p or r_s are not defined (all values equal, fewer
than two topologies with data, ...) ``table2.md`` says why instead of printing a number.

Honest numbers (:mod:`mascot.analysis.trials_baselines`): means resting on carried-forward states are marked
with † in ``table2.md`` (with the means over the other trials beside them), and the echo and random agents run
through the same harness with the run's config (``DIR/baselines/``) stand beside the run's rows.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from mascot.analysis import stats as st
from mascot.analysis import trials_baselines as tb
from mascot.analysis.figures import legend, save_figure
from mascot.errors import InputError
from mascot.io import atomic_write_text, json_clean
from mascot.protocols.state_tracking.baselines import baseline_dirs

__all__ = [
    "METRICS",
    "TABLE2_COLUMNS",
    "TOPOLOGY_ORDER",
    "arm_arrays",
    "json_clean",
    "ordering",
    "spectral_predictions",
    "table2",
    "trial_metrics",
    "write_report",
]

TOPOLOGY_ORDER = ("chain", "mesh", "star")  # Table 2's column order
METRICS = ("E_ceg", "R_cdr", "F_ps")
TABLE2_COLUMNS = ["metric", "chain_mean", "chain_sd", "mesh_mean", "mesh_sd", "star_mean", "star_sd", "H", "p", "r_s"]
#: metric -> (spectral predictor, sign applied to the metric before ranking)
PREDICTORS = {"E_ceg": ("rho", 1.0), "R_cdr": ("delta", -1.0), "F_ps": ("kappa", 1.0)}
METRIC_NAMES = {
    "E_ceg": "Error amplification (E_ceg)",
    "R_cdr": "Consensus decay (R_cdr)",
    "F_ps": "Perturbation sensitivity (F_ps)",
}
COLORS = {"chain": "#1f77b4", "mesh": "#2ca02c", "star": "#d62728"}
GAMMA = 0.9


def arm_arrays(df: pd.DataFrame, topo: str, col: str, n: int, T: int) -> np.ndarray:
    """``(n_trials, 2 arms, T + 1 steps)`` array of ``col`` for one topology (rows sorted by the harness)."""
    sub = df[df.topology == topo].sort_values(["trial", "perturbed", "step"])
    if len(sub) != n * 2 * (T + 1):
        raise InputError(f"trials.parquet has {len(sub)} rows for {topo}; expected {n * 2 * (T + 1)}")
    return sub[col].to_numpy(dtype=float).reshape(n, 2, T + 1)


def trial_metrics(df: pd.DataFrame, d_floor: float = st.D_FLOOR) -> pd.DataFrame:
    """One row per (topology, trial): E_ceg, R_cdr, F_ps and the run's bookkeeping counts."""
    T = int(df.step.max())
    rows = []
    for topo in [t for t in TOPOLOGY_ORDER if t in set(df.topology)]:
        n = int(df[df.topology == topo].trial.max()) + 1
        vt = arm_arrays(df, topo, "value_true", n, T)
        v = arm_arrays(df, topo, "value", n, T)
        d = arm_arrays(df, topo, "d_t", n, T)
        e = st.cumulative_error(vt[:, 0, 1:], v[:, 0, 1:])
        e_pert = st.cumulative_error(vt[:, 1, 1:], v[:, 1, 1:])
        r, floored, terms = st.consensus_decay(d[:, 0, 1:], d_floor)
        f = st.perturbation_sensitivity(v[:, 0, T], v[:, 1, T])
        sub = df[(df.topology == topo) & (df.step > 0)]
        g = sub.groupby("trial")

        def total(c, g=g, sub=sub, n=n):  # a bookkeeping count; NaN for a run written before the column existed
            return g[c].sum() if c in sub else pd.Series(np.nan, index=range(n))

        carried_arm = (
            sub.groupby(["trial", "perturbed"]).carried.sum().unstack(fill_value=0)
            if "carried" in sub
            else pd.DataFrame(index=range(n))
        )
        agg = pd.DataFrame(
            {
                "n_requests": total("n_requests"),
                "n_failed_attempts": total("n_failed_attempts"),
                "n_abstained": total("n_abstained"),
                "carried_steps": total("carried"),
                "carried_unperturbed": carried_arm.get(False, np.nan),
                "carried_perturbed": carried_arm.get(True, np.nan),
                "prompt_tokens": total("prompt_tokens"),
                "completion_tokens": total("completion_tokens"),
            }
        ).reindex(range(n))
        rows.append(
            pd.DataFrame(
                {
                    "topology": topo,
                    "trial": np.arange(n),
                    "E_ceg": e,
                    "R_cdr": r,
                    "F_ps": f,
                    "E_ceg_perturbed": e_pert,
                    "D_floored": floored,
                    "R_cdr_terms": terms,
                    "final_value": v[:, 0, T],
                    "final_value_perturbed": v[:, 1, T],
                    **{k: agg[k].to_numpy() for k in agg.columns},
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


def spectral_predictions(steps: int = 12, leaves: int = 4, mesh_agents: int = 4, gamma: float = GAMMA) -> dict:
    """rho, Delta, kappa of M = (I - gamma P)^-1 for chain(steps), star(leaves + 1), mesh(mesh_agents), in
    float64 (64-bit JAX enabled for this call and thread only)."""
    from mascot import graphs as topology
    from mascot.execute.spectra import sr_spectra
    from mascot.kernels.precision import float64

    out = {}
    with float64():
        for name, A in (
            ("chain", topology.chain(max(int(steps), 2))),
            ("star", topology.star(int(leaves) + 1)),
            ("mesh", topology.mesh(max(int(mesh_agents), 2))),
        ):
            s = sr_spectra(A, gamma, dtype="float64")
            out[name] = {"rho": float(s.rho), "delta": float(s.delta), "kappa": float(s.kappa)}
    return out


def _rank_r(pred: dict, means: dict, metric: str) -> float:
    key, sign = PREDICTORS[metric]
    topos = [t for t in TOPOLOGY_ORDER if t in means and t in pred and math.isfinite(means[t])]
    if len(topos) < 3:
        return math.nan
    return st.spearman([pred[t][key] for t in topos], [sign * means[t] for t in topos])


def table2_notes(metrics: pd.DataFrame, predictions: dict) -> dict:
    """Per metric: why H/p (``H_note``) and r_s (``r_s_note``) of :func:`table2` are not defined ("not
    defined: all values equal", ...; :func:`mascot.analysis.stats.kruskal_note`,
    :func:`~mascot.analysis.stats.spearman_note`), ``None`` where they are."""
    out = {}
    for m in METRICS:
        groups = [metrics.loc[metrics.topology == t, m].to_numpy(dtype=float) for t in TOPOLOGY_ORDER]
        means = {t: st.fmean(g[np.isfinite(g)]) for t, g in zip(TOPOLOGY_ORDER, groups) if np.isfinite(g).any()}
        key, sign = PREDICTORS[m]
        topos = [t for t in TOPOLOGY_ORDER if t in means and t in predictions]
        out[m] = {
            "H_note": st.kruskal_note(groups),
            "r_s_note": st.spearman_note(
                [predictions[t][key] for t in topos], [sign * means[t] for t in topos], what="topologies with data"
            ),
        }
    return out


def table2(metrics: pd.DataFrame, predictions: dict) -> pd.DataFrame:
    """Table 2 with the exact columns of ``TABLE2_COLUMNS``."""
    rows = []
    for m in METRICS:
        row = {"metric": m}
        means, groups = {}, []
        for t in TOPOLOGY_ORDER:
            x = metrics.loc[metrics.topology == t, m].to_numpy(dtype=float)
            x = x[np.isfinite(x)]
            row[f"{t}_mean"] = st.fmean(x)
            row[f"{t}_sd"] = st.fsd(x, ddof=1)
            if x.size:
                means[t] = row[f"{t}_mean"]
                groups.append(x)
        row["H"], row["p"] = st.kruskal(groups)
        row["r_s"] = _rank_r(predictions, means, m)
        rows.append(row)
    return pd.DataFrame(rows, columns=TABLE2_COLUMNS)


def format_number(x, nd=2):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.{nd}f}"


def format_p(p):
    if p is None or not math.isfinite(p):
        return "n/a"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def state_text(state) -> str:
    if not state:
        return "unknown"
    v, p, lv = state
    return f"{{Value {v:g}, Parity {p}, Level {lv}}}"


def _is_default_state(state) -> bool:
    from mascot.theory.state_tracking import DEFAULT_STATE

    return bool(state) and list(state) == [DEFAULT_STATE["Value"], DEFAULT_STATE["Parity"], DEFAULT_STATE["Level"]]


def _markdown(tab: pd.DataFrame, stats: dict) -> str:
    from mascot.papers import SR_TABLE2 as TABLE2_PAPER

    paper_h = {"E_ceg": (58.02, "<0.001", -1.00), "R_cdr": (188.68, "<0.001", 0.50), "F_ps": (29.03, "<0.001", 1.00)}
    n = stats["n_trials"]
    lines = [
        "# Table 2: empirical measurements and rank consistency",
        "",
        f"Backend: `{stats['backend']}`; trials per topology: "
        + ", ".join(f"{t} {n.get(t, 0)}" for t in TOPOLOGY_ORDER)
        + f"; {stats['steps']} steps; epsilon = {stats['epsilon']:g}. Mean ± s.d. over trials; "
        'paper: Qwen2.5-7B-Instruct, 100 trials ("Predictive Maps of Multi-Agent Reasoning", Table 2).',
        "",
        f"Initial state: {state_text(stats.get('initial_state'))}"
        + (
            " (mascot's choice: the SR paper does not give the task's initial state)."
            if _is_default_state(stats.get("initial_state"))
            else " (not recorded in run.json; mascot's default is Value 50, Parity A, Level 3, its own choice: "
            "the SR paper does not give one)."
            if not stats.get("initial_state")
            else " (set with --initial-state; mascot's default is Value 50, Parity A, Level 3, its own choice: "
            "the SR paper does not give one)."
        )
        + (
            " Perturbed arm with the same request seeds as the unperturbed one (paired)."
            if stats.get("paired_seeds", True)
            else " Perturbed arm with independent request seeds (unpaired)."
        ),
        "",
        "| Metric | | Chain | Mesh | Star | H | p | r_s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    carried = stats.get("carried", {})
    for _, r in tab.iterrows():
        m = r.metric
        e = stats["metrics"][m]
        aff = {t: carried.get(t, {}).get("affected", {}).get(m, 0) for t in TOPOLOGY_ORDER}
        cells = [
            f"{format_number(r[f'{t}_mean'])}{' †' if aff[t] else ''} ± {format_number(r[f'{t}_sd'])}"
            for t in TOPOLOGY_ORDER
        ]
        lines.append(
            f"| {METRIC_NAMES[m]} | ours | "
            + " | ".join(cells)
            + " | "
            + tb.stat_cells(r.H, r.p, r.r_s, e.get("H_note"), e.get("r_s_note"), format_number, format_p)
            + " |"
        )
        if any(aff.values()):
            cm = stats["clean_means"][m]
            lines.append(
                "| | ours, trials without carried states | "
                + " | ".join(
                    f"{format_number(cm[t][0])} (n = {cm[t][1]})" if t in cm else "n/a" for t in TOPOLOGY_ORDER
                )
                + " | | | |"
            )
        lines += tb.baseline_rows(stats.get("baselines", {}), m, TOPOLOGY_ORDER, format_number, format_p)
        pp = TABLE2_PAPER[m]
        ph = paper_h[m]
        lines.append(
            "| | paper | "
            + " | ".join(f"{pp[t][0]:.2f} ± {pp[t][1]:.2f}" for t in TOPOLOGY_ORDER)
            + f" | {ph[0]:.2f} | {ph[1]} | {ph[2]:+.2f} |"
        )
    lines += [""] + tb.carried_note(carried, TOPOLOGY_ORDER)
    if stats.get("baselines"):
        lines += [""] + tb.baselines_section(stats, TOPOLOGY_ORDER, format_number)
    lines += [
        "",
        "## Bootstrap 95% confidence intervals of the means",
        "",
        f"Percentile bootstrap, {stats['bootstrap']['n_boot']} resamples, seed {stats['bootstrap']['seed']}.",
        "",
        "| Metric | Chain | Mesh | Star |",
        "| --- | --- | --- | --- |",
    ]
    for m in METRICS:
        cis = stats["metrics"][m]["ci95"]
        lines.append(
            f"| {m} | "
            + " | ".join(
                f"[{format_number(cis[t][0])}, {format_number(cis[t][1])}]" if t in cis else "n/a"
                for t in TOPOLOGY_ORDER
            )
            + " |"
        )
    pred = stats["predictions"]
    lines += [
        "",
        "## Spectral predictions and rank conventions",
        "",
        "| Topology | rho(M) | Delta(M) | kappa(M) |",
        "| --- | --- | --- | --- |",
    ]
    for t in TOPOLOGY_ORDER:
        lines.append(f"| {t} | {pred[t]['rho']:.2f} | {pred[t]['delta']:.2f} | {pred[t]['kappa']:.2f} |")
    rp = stats["r_s_of_paper_means"]
    lines += [
        "",
        "r_s = Spearman (average ranks for ties) over the three topology means: E_ceg against rho, "
        "-R_cdr against Delta (a larger gap predicts faster consensus, i.e. a more negative R_cdr), "
        "F_ps against kappa. Star and mesh tie at rho = 10, so the paper's own means give "
        f"r_s = {format_number(rp['E_ceg'])} (E_ceg), {format_number(rp['R_cdr'])} (R_cdr), {format_number(rp['F_ps'])} (F_ps) under "
        "this convention; the printed -1.00 for E_ceg needs the rho tie broken (star above mesh).",
        "",
        "## Run bookkeeping",
        "",
    ]
    bk = stats["bookkeeping"]
    lines += ["| | " + " | ".join(TOPOLOGY_ORDER) + " |", "| --- | " + " | ".join("---" for _ in TOPOLOGY_ORDER) + " |"]
    for key, label in (
        ("n_requests", "requests"),
        ("n_failed_attempts", "failed parses (attempts)"),
        ("n_abstained", "agents abstaining after retries"),
        ("carried_steps", "steps carried forward"),
        ("carried_percent", "steps carried forward (% of steps 1..T, both arms)"),
        ("affected_unperturbed", "trials resting on a carried state (E_ceg, R_cdr)"),
        ("affected_either", "trials resting on a carried state (F_ps)"),
        ("D_floored", f"D_t floored at {stats['d_floor']:g} (unperturbed arm)"),
        ("R_cdr_undefined", "trials with undefined R_cdr"),
        ("prompt_tokens", "prompt tokens"),
        ("completion_tokens", "completion tokens"),
    ):
        lines.append(
            f"| {label} | "
            + " | ".join(
                (f"{bk[t][key]:.1f}" if isinstance(bk[t][key], float) else f"{bk[t][key]:,}")
                if t in bk and key in bk[t]
                else "n/a"
                for t in TOPOLOGY_ORDER
            )
            + " |"
        )
    lines.append("")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- figures
def _topos(metrics):
    return [t for t in TOPOLOGY_ORDER if t in set(metrics.topology)]


def _symlog(axis, set_scale):
    from matplotlib.ticker import FuncFormatter

    set_scale("symlog", linthresh=1.0)
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def _wide(metrics, col) -> bool:
    """Symlog axis when the values span more than two decades beyond 1 in magnitude."""
    x = metrics[col].to_numpy(dtype=float)
    x = x[np.isfinite(x)]
    return bool(x.size) and float(np.abs(x).max()) > 20.0


def _box_strip(ax, metrics, col, rng, max_points=1500, log=False, paper=None):
    topos = _topos(metrics)
    data = [metrics.loc[metrics.topology == t, col].dropna().to_numpy() for t in topos]
    bp = ax.boxplot(
        data,
        positions=range(len(topos)),
        widths=0.5,
        showfliers=False,
        patch_artist=True,
        medianprops=dict(color="k", lw=1.5),
    )
    for patch, t in zip(bp["boxes"], topos):
        patch.set_facecolor(COLORS[t])
        patch.set_alpha(0.25)
    for i, (t, x) in enumerate(zip(topos, data)):
        if x.size > max_points:
            x = rng.choice(x, max_points, replace=False)
        ax.scatter(i + rng.uniform(-0.18, 0.18, x.size), x, s=6, alpha=0.35, color=COLORS[t], lw=0)
        if x.size:
            ax.scatter([i], [np.mean(data[i])], marker="D", s=40, color="k", zorder=5, label="mean" if i == 0 else None)
    labels = [f"{t}\n(n = {len(x)})" for t, x in zip(topos, data)]
    if paper:  # the paper's mean as an open marker beside each box; its mean ± s.d. under the tick
        xs = [i + 0.34 for i, t in enumerate(topos) if t in paper]
        ys = [paper[t][0] for t in topos if t in paper]
        ax.scatter(
            xs,
            ys,
            marker="D",
            s=46,
            facecolors="none",
            edgecolors="#ff7f0e",
            linewidths=1.8,
            zorder=6,
            label="paper mean (Qwen2.5-7B, 100 trials)",
        )
        labels = [
            lab + (f"\npaper: {paper[t][0]:,.2f}\n± {paper[t][1]:,.2f}" if t in paper else "")
            for lab, t in zip(labels, topos)
        ]
    ax.set_xticks(range(len(topos)), labels, fontsize=9 if paper else None)
    if log:
        _symlog(ax.yaxis, ax.set_yscale)
    elif paper:  # head room for the legend above the data and the paper's markers
        lo, hi = ax.get_ylim()
        ax.set_ylim(lo, hi + 0.2 * (hi - lo))
    ax.grid(axis="y", alpha=0.3)
    legend(ax, loc="upper center", fontsize=8, ncol=2)


def _ecdf(ax, metrics, col, log=False):
    for t in _topos(metrics):
        x = np.sort(metrics.loc[metrics.topology == t, col].dropna().to_numpy())
        if x.size:  # from 0 below the smallest value (the first jump was not drawn: an outside tester)
            frac = np.arange(0, x.size + 1) / x.size
            ax.step(np.r_[x[0], x], frac, where="post", color=COLORS[t], label=t, lw=1.6)
    if log:
        _symlog(ax.xaxis, ax.set_xscale)
    ax.set_ylim(-0.02, 1.02)
    ax.set_ylabel("fraction of trials")
    ax.grid(alpha=0.3)
    legend(ax, fontsize=9)


def _dist_figure(metrics, col, title, xlabel, path, seed, log=False, note="", paper=None):
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(seed)
    fig, ax = plt.subplots(1, 2, figsize=(12, 5.0 if paper else 4.3))
    _box_strip(ax[0], metrics, col, rng, log=log, paper=paper)
    ax[0].set_ylabel(xlabel)
    ax[0].set_title(f"{title} by topology" + (f"\n{note}" if note else ""), fontsize=11)
    _ecdf(ax[1], metrics, col, log=log)
    ax[1].set_xlabel(xlabel)
    ax[1].set_title("empirical CDF", fontsize=11)
    fig.tight_layout()
    return save_figure(fig, path)


def _stepwise_figure(series: dict, ylabel, title, path, seed, log=False, floor=None, max_lines=100):
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection

    rng = np.random.default_rng(seed)
    topos = list(series)
    fig, axes = plt.subplots(
        len(topos), 1, figsize=(7.5, 2.7 * len(topos) + 0.6), sharex=True, sharey=True, squeeze=False
    )
    for ax, t in zip(axes[:, 0], topos):
        y = series[t]  # (n, T + 1) with NaN where undefined
        if floor is not None:
            y = np.where(np.isfinite(y), np.maximum(y, floor), np.nan)
        steps = np.arange(y.shape[1])
        pick = np.sort(rng.choice(y.shape[0], min(max_lines, y.shape[0]), replace=False))
        segs = [np.column_stack([steps, y[i]]) for i in pick]
        segs = [sg[np.isfinite(sg[:, 1])] for sg in segs]
        # trials in grey underneath; the band and the median on top, in colour (a band drawn under 100 coloured
        # lines of its own colour could not be seen)
        ax.add_collection(
            LineCollection([sg for sg in segs if len(sg) > 1], colors="0.55", alpha=0.18, linewidths=0.7, zorder=1)
        )
        with np.errstate(all="ignore"):
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                med = np.nanmedian(y, axis=0)
                q1, q3 = np.nanquantile(y, [0.25, 0.75], axis=0)
        ax.fill_between(steps, q1, q3, color=COLORS[t], alpha=0.45, lw=0, label="interquartile range", zorder=3)
        ax.plot(steps, q1, color=COLORS[t], lw=1.2, zorder=3)
        ax.plot(steps, q3, color=COLORS[t], lw=1.2, zorder=3)
        ax.plot(steps, med, color="k", lw=2.2, label="median", zorder=4)
        ax.set_title(f"{t} ({y.shape[0]} trials; {len(pick)} shown)", fontsize=10, loc="left")
        ax.set_ylabel(ylabel)
        if log:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    if not log:  # a heavy tail squeezes the medians and IQR bands: clip the shared y axis at the 99th percentile
        allv = np.concatenate([np.asarray(v, float).ravel() for v in series.values()])
        allv = allv[np.isfinite(allv)]
        if allv.size:
            p99 = float(np.quantile(allv, 0.99))
            if p99 > 0 and allv.max() > 1.5 * p99:
                axes[0, 0].set_ylim(top=1.1 * p99)
                title += f"\n(y axis clipped at the 99th percentile, {p99:,.0f}; a few trial lines leave the plot)"
    axes[-1, 0].set_xlabel("step t")
    axes[-1, 0].set_xticks(np.arange(0, series[topos[0]].shape[1], 1 if series[topos[0]].shape[1] <= 13 else 2))
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return save_figure(fig, path)


def _figures(
    df: pd.DataFrame,
    metrics: pd.DataFrame,
    out: Path,
    d_floor: float,
    seed: int,
    paper: dict | None = None,
    state_note: str = "",
) -> list[Path]:
    """Figs 2-6; ``paper``: Table 2's (mean, s.d.) per metric and topology, drawn beside the boxes of Figs 2-4
    (only when the run has the paper's 12 steps and epsilon = 15)."""
    T = int(df.step.max())
    paper = paper or {}
    sn = f"\n{state_note}" if state_note else ""
    paths = []
    paths += _dist_figure(
        metrics,
        "E_ceg",
        "Cumulative error E_ceg",
        "E_ceg = sum_t |x*_t - x^_t| (Value)",
        out / "fig2_cumulative_error",
        seed,
        paper=paper.get("E_ceg"),
        note=state_note,
    )
    flo = int(metrics.D_floored.sum())
    paths += _dist_figure(
        metrics,
        "R_cdr",
        "Consensus decay R_cdr",
        "R_cdr = mean_t log(D_t+1 / D_t)",
        out / "fig3_consensus_decay",
        seed,
        log=_wide(metrics, "R_cdr"),
        note=f"(D_t floored at {d_floor:g}: {flo:,} of {int((metrics.R_cdr_terms + 1).sum()):,} D_t)" + sn,
        paper=paper.get("R_cdr"),
    )
    paths += _dist_figure(
        metrics,
        "F_ps",
        "Perturbation sensitivity F_ps",
        "F_ps = |x'_T - x_T| (Value)",
        out / "fig4_perturbation_sensitivity",
        seed,
        paper=paper.get("F_ps"),
        note=state_note,
    )
    cum, dis = {}, {}
    for t in _topos(metrics):
        n = int(metrics[metrics.topology == t].trial.max()) + 1
        vt = arm_arrays(df, t, "value_true", n, T)[:, 0]
        v = arm_arrays(df, t, "value", n, T)[:, 0]
        cum[t] = np.cumsum(np.abs(vt - v), axis=1)
        dis[t] = arm_arrays(df, t, "d_t", n, T)[:, 0]
    paths += _stepwise_figure(
        cum,
        "cumulative error",
        "Stepwise cumulative error sum_{s<=t} |x*_s - x^_s| (grey: trials; band: IQR; black: median)" + sn,
        out / "fig5_stepwise_cumulative_error",
        seed,
    )
    paths += _stepwise_figure(
        dis,
        "D_t (log)",
        f"Stepwise consensus D_t (star: leaves, mesh: revisions, chain: |x*_t - x^_t|; floored at {d_floor:g})" + sn,
        out / "fig6_stepwise_consensus",
        seed,
        log=True,
        floor=d_floor,
    )
    return paths


# ----------------------------------------------------------------------------- the report
def write_report(
    out,
    d_floor: float | None = None,
    seed: int | None = None,
    n_boot: int = 2000,
    figures: bool = True,
    dest=None,
    baselines: bool = True,
) -> tuple[pd.DataFrame, dict]:
    """Read ``out/trials.parquet`` and ``out/run.json``; write ``metrics.csv``, ``table2.csv``,
    ``table2.md``, ``stats.json`` and ``fig2..fig6`` (PNG + PDF) into ``dest`` (default ``out``).
    Returns ``(table2, stats)``.

    Honest numbers (:mod:`mascot.analysis.trials_baselines`): means that rest on carried-forward states are
    marked in ``table2.md`` (with the means over the trials without them), H/p/r_s on degenerate data say why
    they are not defined, and with ``baselines`` (and a ``run.json``) the echo and random agents run through
    the harness with the run's config into ``out/baselines/{echo,random}/`` (resumed when finished) and
    their rows stand beside the run's (``baselines.csv``; ``stats.json``'s ``baselines``).

    ``d_floor`` (the floor on D_t in R_cdr) and ``seed`` (of the bootstrap) default to the run's own
    (``run.json``'s config), else to ``D_FLOOR`` and 0. The run's initial state (``--initial-state``; default
    {Value 50, Parity A, Level 3}, mascot's choice since the SR paper gives none) is stated in ``table2.md``,
    ``stats.json`` and the figures."""
    run_dir = Path(out)
    out = Path(dest) if dest is not None else run_dir
    out.mkdir(parents=True, exist_ok=True)
    df = pd.read_parquet(run_dir / "trials.parquet")
    meta = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").exists() else {}
    cfg = meta.get("config", {})
    if d_floor is None:
        d_floor = cfg.get("d_floor", st.D_FLOOR)
    if seed is None:
        seed = cfg.get("seed", 0)
    steps = int(df.step.max())
    preds = spectral_predictions(steps, cfg.get("leaves", 4), cfg.get("mesh_agents", 4))
    metrics = trial_metrics(df, d_floor)
    atomic_write_text(out / "metrics.csv", metrics.to_csv(index=False, float_format="%.10g"))
    tab = table2(metrics, preds)
    atomic_write_text(out / "table2.csv", tab.to_csv(index=False, float_format="%.6g"))

    from mascot.papers import SR_TABLE1 as TABLE1_PAPER
    from mascot.papers import SR_TABLE2 as TABLE2_PAPER

    paper_means = {m: {t: TABLE2_PAPER[m][t][0] for t in TOPOLOGY_ORDER} for m in METRICS}
    table1 = {t: {"rho": v[0], "delta": v[1], "kappa": v[2]} for t, v in TABLE1_PAPER.items()}
    spec = (meta.get("identity") or {}).get("backend") or {}
    stats: dict = {
        "backend": spec.get("name", "?") + (f" ({spec.get('model')})" if spec.get("model") else ""),
        "steps": steps,
        "epsilon": cfg.get("epsilon", math.nan),
        "d_floor": d_floor,
        "initial_state": cfg.get("initial_state"),
        "paired_seeds": cfg.get("paired_seeds", True),
        "n_trials": {t: int((metrics.topology == t).sum()) for t in _topos(metrics)},
        "predictions": preds,
        "gamma": GAMMA,
        "conventions": {m: {"predictor": PREDICTORS[m][0], "metric_sign": PREDICTORS[m][1]} for m in METRICS},
        "r_s_of_paper_means": {m: _rank_r(table1, paper_means[m], m) for m in METRICS},
        "bootstrap": {"n_boot": n_boot, "seed": seed, "level": 0.95, "method": "percentile"},
        "metrics": {},
        "bookkeeping": {},
    }
    notes = table2_notes(metrics, preds)
    stats["carried"] = tb.carried_summary(df, metrics)
    stats["clean_means"] = tb.clean_means(metrics)
    if baselines and baseline_dirs(run_dir):
        stats["baselines"], bdf = _baselines(run_dir, cfg, d_floor, preds, metrics)
        atomic_write_text(out / "baselines.csv", bdf.to_csv(index=False, float_format="%.6g"))
    for i, m in enumerate(METRICS):
        r = tab.iloc[i]
        entry = {"H": r.H, "p": r.p, "r_s": r.r_s, **notes[m], "mean": {}, "sd": {}, "n": {}, "ci95": {}}
        for j, t in enumerate(_topos(metrics)):
            x = metrics.loc[metrics.topology == t, m].to_numpy(dtype=float)
            x = x[np.isfinite(x)]
            entry["mean"][t] = r[f"{t}_mean"]
            entry["sd"][t] = r[f"{t}_sd"]
            entry["n"][t] = int(x.size)
            entry["ci95"][t] = list(st.bootstrap_mean_ci(x, n_boot=n_boot, seed=seed + 1000 * i + j))
        stats["metrics"][m] = entry
    for t in _topos(metrics):
        mt = metrics[metrics.topology == t]
        stats["bookkeeping"][t] = {
            k: int(mt[k].sum())
            for k in (
                "n_requests",
                "n_failed_attempts",
                "n_abstained",
                "carried_steps",
                "D_floored",
                "prompt_tokens",
                "completion_tokens",
            )
        }
        stats["bookkeeping"][t]["R_cdr_undefined"] = int(mt.R_cdr.isna().sum())
        c = stats["carried"][t]
        stats["bookkeeping"][t].update(
            carried_percent=100.0 * c["carried_fraction"],
            affected_unperturbed=c["affected"]["E_ceg"],
            affected_either=c["affected"]["F_ps"],
        )

    stats = json_clean(stats)
    atomic_write_text(out / "stats.json", json.dumps(stats, indent=2) + "\n")
    atomic_write_text(out / "table2.md", _markdown(tab, nanify(stats)))
    if figures:
        eps = stats["epsilon"]
        like_paper = steps == 12 and eps is not None and float(eps) == 15.0
        st_note = f"initial state {state_text(stats['initial_state'])}" + (
            " (mascot's choice)" if _is_default_state(stats["initial_state"]) else ""
        )
        _figures(
            df,
            metrics,
            out,
            d_floor,
            seed,
            paper=TABLE2_PAPER if like_paper else None,
            state_note=st_note if stats["initial_state"] else "",
        )
    return tab, stats


def _baselines(run_dir: Path, cfg: dict, d_floor: float, preds: dict, metrics: pd.DataFrame):
    """The baselines run beside a run (read, never run here); their Table 2 entries, the E_ceg comparison and one
    table."""
    dirs = baseline_dirs(run_dir)
    out: dict = {}
    bms, frames = {}, []
    for name, d in dirs.items():
        bm = trial_metrics(pd.read_parquet(d / "trials.parquet"), d_floor)
        bms[name] = bm
        bt = table2(bm, preds)
        notes = table2_notes(bm, preds)
        ident = json.loads((d / "run.json").read_text())["identity"]["backend"]
        out[name] = {"dir": str(d), "backend": ident, "metrics": {}}
        for i, m in enumerate(METRICS):
            r = bt.iloc[i]
            out[name]["metrics"][m] = {
                "H": r.H,
                "p": r.p,
                "r_s": r.r_s,
                **notes[m],
                "mean": {t: r[f"{t}_mean"] for t in _topos(bm)},
                "sd": {t: r[f"{t}_sd"] for t in _topos(bm)},
            }
        frames.append(bt.assign(baseline=name))
    cmp = tb.compare(metrics, bms)
    for name in out:
        out[name]["E_ceg_vs_run"] = cmp[name]
    bdf = pd.concat(frames, ignore_index=True)
    return out, bdf[["baseline"] + TABLE2_COLUMNS]


def nanify(x):
    if isinstance(x, dict):
        return {k: nanify(v) for k, v in x.items()}
    if isinstance(x, list):
        return [nanify(v) for v in x]
    return math.nan if x is None else x


# ----------------------------------------------------------------------------- the seed reproduction
def ordering(means: dict) -> str:
    """``"chain > mesh > star"``: the topologies with finite means, descending (``=`` for exactly equal
    means, so a tie never passes for a strict ordering)."""
    ts = sorted((t for t in TOPOLOGY_ORDER if t in means and math.isfinite(means[t])), key=lambda t: -means[t])
    out = ts[:1]
    for a, b in zip(ts, ts[1:]):
        out += ["=" if means[a] == means[b] else ">", b]
    return " ".join(out)
