"""Report on a consensus sweep (kind ``consensus``): success, cost, certificate tightness, where the adaptive
policy lands between the fixed topologies as Corollary 1 predicts (as successful as both, faster than ring-only,
cheaper than complete-only) beside Corollary 1's condition, and where it Pareto-dominates both (against each, every
metric at least as good and one better).

Input: a merged sweep dataset (one row per point and trajectory). Output in ``out_dir``:
``summary.csv`` (one row per grid point with success rate, mean rounds and tokens, tightness),
``dominance.csv``, ``fig_success``, ``fig_tightness``, ``fig_dominance`` (PNG + PDF) and ``README.md``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from mascot.analysis.figures import plt, readable_log_axis, save_figure
from mascot.analysis.sources import check_merged, check_unique_rows, merged_meta, source_line
from mascot.errors import InputError
from mascot.io import (
    atomic_write_text,
    iter_parquet_verified,
    parquet_columns,
    read_parquet_verified,
    remove_stale_temps,
    write_csv,
)

__all__ = ["report"]

# the parameters that define a setting (every one a consensus sweep writes, strategy apart): the report tells
# points apart by all of them (a sweep over noise or max_rounds alone used to collapse into one setting)
_REQUIRED = ["n", "eta", "eps", "b0", "c1", "c2", "x0_spread", "self_weight_complete", "self_weight_ring"]
_OPTIONAL = ["d", "x0_mean", "noise", "max_rounds"]  # (older datasets may lack them: constant there)
_STRATEGIES = ("adaptive", "complete", "ring")


def _setting(df: pd.DataFrame) -> list[str]:
    return _REQUIRED + [k for k in _OPTIONAL if k in df] + ["trajectories"]


def _with_trajectories(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with each point's trajectory count as a column (a sweep axis the dataset has no column for: points
    that differ only in it share their first trajectories' initial beliefs and must not be pooled)."""
    if "trajectories" in df:
        return df
    return df.assign(trajectories=df.groupby("point")["point"].transform("size").astype("int64"))


def _outcomes(df: pd.DataFrame) -> pd.DataFrame:
    # means in float64: pandas averages a float32 column in float32 when the group holds a NaN and in float64
    # when not, so a float32 column's means would depend on which rows share a batch
    ok = df["status"] == 0
    return df.assign(success=ok, rounds_ok=df["rounds"].where(ok), tokens_ok=df["tokens"].astype("float64").where(ok))


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    df = _outcomes(_with_trajectories(df))
    ok = df["success"]
    df = df.assign(
        r_tight=(df["rounds"] / df["K_star"]).where(ok & df["certified"] & (df["K_star"] > 0)),
        b_tight=(df["tokens"] / df["B_star"]).where(ok & df["certified"] & (df["B_star"] > 0)),
    )
    g = df.groupby(["point", "strategy"] + _setting(df), observed=True)
    return g.agg(
        success=("success", "mean"),
        rounds=("rounds_ok", "mean"),
        tokens=("tokens_ok", "mean"),
        certified=("certified", "mean"),
        rounds_over_K=("r_tight", "median"),
        tokens_over_B=("b_tight", "median"),
        lambda1=("lambda1", "first"),
        lambda2=("lambda2", "first"),
    ).reset_index()


def dominance(summary: pd.DataFrame) -> pd.DataFrame:
    """Per setting (every parameter but strategy, the trajectory count included), from :func:`summarise`'s table:
    does adaptive match the success of both fixed policies, finish in no more mean rounds than ring-only and
    spend no more mean tokens than complete-only (means over successful trajectories)? A fixed policy with no
    successful trajectory never finishes: its rounds and tokens count as infinite (not NaN, which no comparison
    satisfies). Two points with one setting and strategy (a grid value listed twice) are refused: they would
    count the same initial beliefs twice, so a setting's row is its one point's."""
    keys = _setting(summary)
    twice = summary.groupby(keys + ["strategy"], observed=True)["point"].unique()
    twice = twice[twice.map(len) > 1]
    if len(twice):
        raise InputError(
            f"grid points {', '.join(map(str, twice.iloc[0]))} have the same parameters ({len(twice)} "
            "such groups; a value listed twice in the grid?): their trajectories start from the same "
            "beliefs, so pooling them would count them twice; sweep each setting once"
        )
    per = summary[keys + ["strategy", "success", "rounds", "tokens", "lambda1", "lambda2"]]
    wide = per.pivot(index=keys, columns="strategy", values=["success", "rounds", "tokens"])
    wide.columns = [f"{a}_{b}" for a, b in wide.columns]
    w = wide.reset_index()
    if not {f"success_{s}" for s in _STRATEGIES} <= set(w.columns):
        raise InputError(
            "the sweep must contain all three strategies (adaptive, complete, ring); it has "
            + ", ".join(sorted(summary["strategy"].unique()))
        )
    w = w.dropna(subset=[f"success_{s}" for s in _STRATEGIES])  # settings that ran all three strategies
    for s in _STRATEGIES:  # (a column is absent when a strategy never succeeds anywhere in the sweep)
        for col in (f"rounds_{s}", f"tokens_{s}"):
            if col not in w:
                w[col] = np.nan
    never = np.inf  # a fixed policy that never succeeds never finishes
    # Corollary 1's ordering: adaptive as successful as both, faster than ring-only, cheaper than complete-only
    w["adaptive_between"] = (
        (w.success_adaptive >= w[["success_complete", "success_ring"]].max(axis=1))
        & (w.success_adaptive > 0)
        & (w.rounds_adaptive <= w.rounds_ring.fillna(never))
        & (w.tokens_adaptive <= w.tokens_complete.fillna(never))
    )
    # Pareto dominance: against each fixed policy, every metric (success, rounds, tokens) at least as good, one better
    pareto = w.success_adaptive > 0
    for f in ("complete", "ring"):
        ge = (
            (w.success_adaptive >= w[f"success_{f}"])
            & (w.rounds_adaptive <= w[f"rounds_{f}"].fillna(never))
            & (w.tokens_adaptive <= w[f"tokens_{f}"].fillna(never))
        )
        gt = (
            (w.success_adaptive > w[f"success_{f}"])
            | (w.rounds_adaptive < w[f"rounds_{f}"].fillna(never))
            | (w.tokens_adaptive < w[f"tokens_{f}"].fillna(never))
        )
        pareto &= ge & gt
    w["adaptive_pareto"] = pareto
    lam = per.groupby(keys, observed=True)[["lambda1", "lambda2"]].first().reset_index()
    w = w.merge(lam, on=keys)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log(w.lambda1) / np.log(w.lambda2)
    w["cost_ratio"] = w.c1 / w.c2
    w["log_ratio"] = ratio
    w["corollary_condition"] = (w.lambda1 < w.lambda2) & (w.cost_ratio >= ratio)
    return w


_DAMAGED = "; merge the run again"
_NEED = ["point", "strategy", "status", "rounds", "tokens", "certified", "K_star", "B_star", "lambda1", "lambda2"]


class _Unsorted(Exception):
    """A dataset whose grid points are not in ascending runs (not one ``mascot merge`` wrote)."""


def _whole_points(data, columns, batch_rows):
    """The dataset's ``columns`` as DataFrames that each hold whole grid points, one Parquet batch at a time (a
    merged dataset lists its points in ascending order, so memory stays bounded by one batch whatever the number
    of rows). Raises :class:`_Unsorted` when a point could span two frames."""
    held, last = None, -math.inf
    for rb in iter_parquet_verified(data, columns, _DAMAGED, batch_rows):
        df = rb.to_pandas()
        if held is not None:
            df = pd.concat([held, df], ignore_index=True)
        if len(df) == 0:
            continue
        tail = (df["point"] == df["point"].iloc[-1]).to_numpy()
        held, df = df[tail], df[~tail]
        if len(df):
            if not df["point"].min() > last:
                raise _Unsorted
            last = df["point"].max()
            yield df
    if held is not None and len(held):
        if not held["point"].min() > last:
            raise _Unsorted
        yield held


def _impossible(df: pd.DataFrame) -> list[str]:
    checks = [
        ("status", ~df["status"].isin([0, 1, 2])),
        ("rounds", ~(df["rounds"] >= 0)),
        ("tokens", ~(df["tokens"] >= 0)),
        ("strategy", ~df["strategy"].isin(_STRATEGIES)),
    ]
    if "max_rounds" in df:
        checks.append(("rounds", df["rounds"] > df["max_rounds"]))
    checks += [(k, ~np.isfinite(df[k].astype(float))) for k in _REQUIRED + _OPTIONAL + ["d0", "d_final"] if k in df]
    return list(dict.fromkeys(name for name, wrong in checks if wrong.any()))


def _summary_of(data, batch_rows: int) -> tuple[pd.DataFrame, int, int]:
    """(:func:`summarise`'s table, rows, grid points) of a DataFrame or a merged dataset's path, reading only the
    columns the report needs, one batch of whole points at a time."""
    have = list(data.columns) if isinstance(data, pd.DataFrame) else parquet_columns(data, _DAMAGED)
    lost = [c for c in dict.fromkeys(_NEED + _REQUIRED) if c not in have]
    if lost:
        raise InputError(f"{data}: not a consensus sweep dataset (missing column(s) {', '.join(lost)})")
    wanted = _NEED + _REQUIRED + _OPTIONAL + ["d0", "d_final", "trajectories", "trajectory"]
    columns = [c for c in dict.fromkeys(wanted) if c in have]
    if isinstance(data, pd.DataFrame):
        frames = [data[columns]]
    else:
        try:  # a first pass that streams; a dataset not in point order is read whole instead (columns only)
            return _summarise_frames(data, _whole_points(data, columns, batch_rows))
        except _Unsorted:
            frames = [read_parquet_verified(data, _DAMAGED, columns=columns).to_pandas()]
    return _summarise_frames(data, frames)


def _summarise_frames(data, frames) -> tuple[pd.DataFrame, int, int]:
    parts, rows, points = [], 0, 0
    for df in frames:
        bad = _impossible(df)
        if bad:
            raise InputError(
                f"{data}: impossible values in column(s) {', '.join(bad)} (status 0, 1 or 2; 0 <= rounds <= "
                "max_rounds; tokens >= 0; strategy adaptive, complete or ring; finite parameters and D): not an "
                "unmodified consensus sweep dataset"
            )
        check_unique_rows(data, df, ["point", "trajectory"])  # (a batch holds whole points)
        parts.append(summarise(df))
        rows += len(df)
        points += df["point"].nunique()
    if rows == 0:
        raise InputError(f"{data}: the dataset has no rows")
    return pd.concat(parts, ignore_index=True), rows, points


def report(data, out_dir="results/sweeps", log=print, batch_rows: int = 1 << 18) -> dict:
    """Write the report of a consensus sweep (a merged dataset's path, or its rows as a DataFrame) to
    ``out_dir``. A path is read a batch of ``batch_rows`` rows at a time and only in the columns the report
    uses, so memory does not grow with the number of trajectories (it grows with the number of grid points)."""
    meta = None if isinstance(data, pd.DataFrame) else merged_meta(data)
    s, n_rows, n_points = _summary_of(data, batch_rows)
    check_merged(data, meta, n_rows, n_points)
    dom = dominance(s)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # README.md is written last: a directory without it holds an unfinished report (the previous report's files
    # go first, so a killed report never leaves old and new files side by side under an old README)
    remove_stale_temps(out)
    for name in _OUTPUTS:
        (out / name).unlink(missing_ok=True)
    write_csv(s, out / "summary.csv", index=False, float_format="%.6g")
    write_csv(dom, out / "dominance.csv", index=False, float_format="%.6g")
    # dominance is only meaningful where the adaptive policy itself is funded: >= 99% success
    funded = dom[dom.success_adaptive >= 0.99]
    figs = _fig_success(s, out) + _fig_tightness(s, out) + _fig_dominance(funded, out)
    agree = (funded.adaptive_between == funded.corollary_condition).mean()
    text = _readme(
        n_rows, n_points, s, funded, agree, source=source_line(data, meta, "mascot.analysis.consensus_sweep.report")
    )
    atomic_write_text(out / "README.md", text)
    log(f"wrote {out}/: summary.csv dominance.csv README.md " + " ".join(p.name for p in figs))
    return dict(summary=s, dominance=dom)


def _as_written(df):
    """``df`` with the costs as the grid writes them (c1 and c2 also vary with N), and their labels."""
    df = df.assign(c1=(df.c1 / (df.n * (df.n - 1))).round(6), c2=(df.c2 / (2 * df.n)).round(6))
    return df, {**_SETTING_LABELS, "c1": "tokens per complete message", "c2": "tokens per ring message"}


def _varying(df, drawn) -> list[str]:
    """The setting parameters with more than one value that a figure does not draw, in grid order."""
    df, _ = _as_written(df)
    keys = [k for k in _REQUIRED + _OPTIONAL + ["trajectories"] if k in df and k not in drawn]
    return [k for k in keys if df[k].nunique() > 1]


def _averaged(df, drawn) -> str:
    """The setting parameters with more than one value that a figure averages over (named in its title)."""
    _, names = _as_written(df)
    return ", ".join(names.get(k, k) for k in _varying(df, drawn))


#: the most values a study variable may have to get a row of panels of its own in the success figure
MAX_FACETS = 6


def _fig_success(s, out):
    """Success rate over N and b0 (a map per strategy; a line per strategy where one of them has one value),
    with a row of panels per value of the first other study variable (eta, a self-weight, ...) that has at most
    :data:`MAX_FACETS` values: a rate is aggregated over replicate trajectories, not over a variable of the study.
    Variables past the first are averaged over and named in the title."""
    ns = sorted(s.n.unique())
    b0s = sorted(s.b0.unique())
    written, names = _as_written(s)
    extra = _varying(s, ("n", "b0"))
    facet = next((k for k in extra if k != "trajectories" and written[k].nunique() <= MAX_FACETS), None)
    rows = [(None, s)] if facet is None else [(v, s[written[facet] == v]) for v in sorted(written[facet].unique())]
    over = ", ".join(names.get(k, k) for k in extra if k != facet)
    title = "Consensus within budget" + (f", averaged over {over}" if over else "")

    def row_label(v):
        return "" if facet is None else f"{names.get(facet, facet)} = {v:g}"

    if len(ns) > 1 and len(b0s) > 1:  # a map over team size and budget, one per strategy
        fig, axes = plt.subplots(len(rows), 3, figsize=(13, 0.5 + 3.5 * len(rows)), sharey=True, squeeze=False)
        for (v, part), axrow in zip(rows, axes):
            for ax, strat in zip(axrow, ["adaptive", "complete", "ring"]):
                grid = (
                    part[part.strategy == strat]
                    .groupby(["n", "b0"])
                    .success.mean()
                    .unstack("b0")
                    .reindex(index=ns, columns=b0s)
                )
                im = ax.imshow(grid.values, origin="lower", aspect="auto", vmin=0, vmax=1, cmap="viridis")
                last = part is rows[-1][1]  # tick labels under the bottom row only (they ran into the titles)
                b0_labels = [f"{float(f'{b:.4g}'):,.10g}" for b in b0s] if last else []
                ax.set_xticks(range(len(b0s)), b0_labels, rotation=60, fontsize=7)
                ax.set_yticks(range(len(ns)), ns)
                ax.set_title(f"{strat}: success rate" + (f" ({row_label(v)})" if facet else ""), fontsize=9)
            axrow[0].set_ylabel("agents N")
        for ax in axes[-1]:
            ax.set_xlabel("budget b0 (tokens)")
        fig.colorbar(im, ax=axes, shrink=0.8, label="P(consensus within budget)")
    else:  # an axis with one value is not a dimension: success against the other one, a line per strategy
        key, label = ("b0", "budget b0 (tokens)") if len(b0s) > 1 else ("n", "agents N")
        fixed = f"N = {ns[0]}" if key == "b0" else f"b0 = {b0s[0]:,.10g}"
        if len(ns) == 1 and len(b0s) == 1:
            fixed = f"N = {ns[0]}, b0 = {b0s[0]:,.10g}"
        fig, axes = plt.subplots(1, len(rows), figsize=(1 + 5.5 * len(rows), 4), sharey=True, squeeze=False)
        for (v, part), ax in zip(rows, axes[0]):
            for strat, marker in zip(["adaptive", "complete", "ring"], "o^s"):
                d = part[part.strategy == strat].groupby(key).success.mean()
                if len(d):
                    ax.plot(d.index, d.values, marker=marker, label=strat)
            if len(ns) > 1 or len(b0s) > 1:
                ax.set_xscale("log")
                ax.set_xlabel(label)
                if key == "n":  # each N labelled as itself (6x10^0, 10^1, 2x10^1 named none of 5, 8, 16, 32)
                    readable_log_axis(ax, "x", values=ns)
            else:
                ax.set_xticks([])
            ax.set(ylim=(-0.03, 1.03))
            if facet:
                ax.set_title(row_label(v), fontsize=9)
        axes[0][0].set_ylabel("P(consensus within budget)")
        axes[0][-1].legend(fontsize=8)
        title += f" ({fixed})"
    fig.suptitle(title, fontsize=10)
    return save_figure(fig, out / "fig_success")


def tightness_coverage(s) -> pd.DataFrame:
    """Per team size N: adaptive grid points, and how many have a tightness value (a certified and successful
    trajectory); the N without any are left out of the tightness figure, which says so."""
    a = s[s.strategy == "adaptive"]
    have = a.dropna(subset=["rounds_over_K", "tokens_over_B"])
    return pd.DataFrame({"n": sorted(a.n.unique())}).assign(
        points=lambda d: [int((a.n == n).sum()) for n in d.n],
        points_with_tightness=lambda d: [int((have.n == n).sum()) for n in d.n],
    )


def _fig_tightness(s, out):
    a = s[(s.strategy == "adaptive")].dropna(subset=["rounds_over_K", "tokens_over_B"])
    cov = tightness_coverage(s)
    ns = [int(n) for n in cov.n]
    empty = [int(n) for n, k in zip(cov.n, cov.points_with_tightness) if k == 0]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.3))
    for ax, col, label in (
        (axes[0], "rounds_over_K", "actual rounds / K*"),
        (axes[1], "tokens_over_B", "actual tokens / B*"),
    ):
        data = [a[a.n == n][col].values for n in ns]
        pos = [i for i, d in enumerate(data) if len(d)]
        if pos:
            ax.boxplot([data[i] for i in pos], positions=pos, showfliers=False)
        for i, d in enumerate(data):  # say it where a box is missing
            if not len(d):
                ax.text(
                    i,
                    0.5,
                    "no certified\n& successful\ntrajectory",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="0.35",
                    rotation=90,
                )
        ax.set_xticks(range(len(ns)), [str(n) for n in ns])
        ax.set_xlim(-0.6, len(ns) - 0.4)
        ax.axhline(1.0, color="k", lw=1, ls="--")
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("agents N")
        ax.set_ylabel(label)
        ax.set_title(f"certificate tightness: {label}")
    title = "Adaptive policy, certified and successful trajectories (1 = the bound is attained)"
    if empty:
        title += (
            f"\nN = {', '.join(map(str, empty))}: no grid point has a certified trajectory (K*, B* > 0) "
            "that reached "
            "consensus, so no box"
        )
    fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, out / "fig_tightness")


_SETTING_LABELS = {
    "eta": "eta",
    "eps": "eps",
    "b0": "b0",
    "x0_spread": "X0 spread",
    "x0_mean": "X0 mean",
    "noise": "noise",
    "max_rounds": "max_rounds",
    "d": "d",
    "self_weight_complete": "self weight (complete)",
    "self_weight_ring": "self weight (ring)",
    "trajectories": "trajectories",
}


def _fig_dominance(dom, out):
    if dom.empty:  # say so instead of drawing empty axes
        fig, ax = plt.subplots(figsize=(8, 3))
        ax.axis("off")
        ax.text(
            0.5,
            0.5,
            "No setting where the adaptive policy reaches consensus on >= 99% of trajectories:\n"
            "nothing to compare with Corollary 1 (raise the budgets or max_rounds)",
            ha="center",
            va="center",
        )
        fig.suptitle("Where adaptive switching lands between the fixed topologies, vs Corollary 1")
        return save_figure(fig, out / "fig_dominance")
    ns = sorted(dom.n.unique())
    tc = sorted((dom.c1 / (dom.n * (dom.n - 1))).round(6).unique())
    dom = dom.assign(tokens_complete=(dom.c1 / (dom.n * (dom.n - 1))).round(6))
    ring = ", ".join(f"{t:g}" for t in sorted((dom.c2 / (2 * dom.n)).round(6).unique()))
    # what each cell averages over: the setting parameters that vary besides N and the complete-graph cost
    others = [k for k in _SETTING_LABELS if k in dom and dom[k].nunique() > 1]
    others = [_SETTING_LABELS[k] for k in others]
    if len(ns) == 1 or len(tc) == 1:  # an axis with one value is not a dimension: fractions along the other
        key, label = ("tokens_complete", f"tokens per complete-graph message (ring: {ring})")
        if len(tc) == 1:
            key, label = "n", "agents N"
        fig, ax = plt.subplots(figsize=(7, 4))
        xs = sorted(dom[key].unique())
        for k, (col, name) in enumerate(
            (
                ("adaptive_between", "measured: rounds <= ring's, tokens <= complete's"),
                ("corollary_condition", "Corollary 1 condition c1/c2 >= log l1 / log l2"),
            )
        ):
            v = dom.groupby(key)[col].mean().reindex(xs)
            pos = np.arange(len(xs)) + (k - 0.5) * 0.38
            ax.bar(pos, v.values, width=0.38, label=name)
            for x, y in zip(pos, v.values):  # the value on each bar (a 0 is a bar too)
                ax.text(
                    x, (0 if np.isnan(y) else y) + 0.015, "-" if np.isnan(y) else f"{y:.2f}", ha="center", fontsize=7
                )
        ax.set_xticks(range(len(xs)), [f"{x:g}" for x in xs])
        fixed = f"N = {ns[0]}" if key != "n" else f"tokens per complete-graph message {tc[0]:g}, ring {ring}"
        ax.set(ylim=(0, 1.12), xlabel=label, ylabel="fraction of funded settings")
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
        fig.suptitle(
            f"Where adaptive lands between the fixed topologies, vs Corollary 1 ({fixed})"
            + (f"\nfractions over {', '.join(others)}" if others else ""),
            fontsize=10,
        )
        fig.tight_layout()
        return save_figure(fig, out / "fig_dominance")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, col, title in (
        (axes[0], "adaptive_between", "measured: rounds <= ring's, tokens <= complete's"),
        (axes[1], "corollary_condition", "Corollary 1 condition c1/c2 >= log l1 / log l2"),
    ):
        grid = dom.groupby(["n", "tokens_complete"])[col].mean().unstack().reindex(index=ns, columns=tc)
        im = ax.imshow(grid.values, origin="lower", aspect="auto", vmin=0, vmax=1, cmap="magma")
        for (i, j), v in np.ndenumerate(grid.values):
            ax.text(
                j,
                i,
                "no funded\nsetting" if math.isnan(v) else f"{v:.2f}",
                ha="center",
                va="center",
                fontsize=7,
                color="k" if math.isnan(v) or v >= 0.6 else "w",
            )
        ax.set_xticks(range(len(tc)), [f"{t:g}" for t in tc])
        ax.set_yticks(range(len(ns)), ns)
        ax.set_xlabel(f"tokens per complete-graph message (ring: {ring})")
        ax.set_title(title, fontsize=10)
    axes[0].set_ylabel("agents N")
    fig.colorbar(
        im, ax=axes, shrink=0.8, label="fraction of funded settings" + (f" ({', '.join(others)})" if others else "")
    )
    fig.suptitle(
        "Where adaptive lands between the fixed topologies, vs Corollary 1 (settings with adaptive success >= 99%)"
    )
    return save_figure(fig, out / "fig_dominance")


def _md(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in r) + " |")
    return "\n".join(lines)


_OUTPUTS = ["README.md"] + [
    f"{f}.{e}" for f in ("fig_success", "fig_tightness", "fig_dominance") for e in ("png", "pdf")
]
_OUTPUTS += ["summary.csv", "dominance.csv"]


def _readme(n_rows: int, n_points: int, s, dom, agree, source: str = "") -> str:
    by = (
        s.groupby(["n", "strategy"])
        .agg(success=("success", "mean"), rounds=("rounds", "mean"), tokens=("tokens", "mean"))
        .reset_index()
    )
    tight = s[s.strategy == "adaptive"].groupby("n")[["rounds_over_K", "tokens_over_B"]].median().reset_index()
    cross = pd.crosstab(dom.corollary_condition, dom.adaptive_between).reindex(
        index=[False, True], columns=[False, True], fill_value=0
    )
    cross_md = "\n".join(
        [
            "| Corollary 1 condition (rows) \\ adaptive between, measured (columns) | not between | between | total |",
            "|---|---|---|---|",
        ]
        + [
            f"| condition {'holds' if c else 'fails'} | {int(cross.loc[c, False])} | {int(cross.loc[c, True])} | "
            f"{int(cross.loc[c].sum())} |"
            for c in (False, True)
        ]
        + [f"| total | {int(cross[False].sum())} | {int(cross[True].sum())} | {int(cross.values.sum())} |"]
    )
    cov = tightness_coverage(s)
    empty = [int(n) for n, k in zip(cov.n, cov.points_with_tightness) if k == 0]
    return "\n".join(
        [
            "# Consensus sweep report",
            "",
            f"{n_rows:,} trajectories, {n_points:,} grid points. Written by `mascot report consensus-sweep`.",
            *([source, ""] if source else [""]),
            "![success](fig_success.png)",
            "",
            "![tightness](fig_tightness.png)",
            "",
            "![dominance](fig_dominance.png)",
            "",
            "## Success, rounds and tokens by team size and strategy (means over the grid; rounds and tokens over successful trajectories)",
            "",
            _md(by),
            "",
            "## Certificate tightness (adaptive, certified and successful trajectories; the median over grid points of "
            "each point's median)",
            "",
            _md(tight),
            "",
            *(
                [
                    f"N = {', '.join(map(str, empty))}: no adaptive grid point has a certified trajectory (K*, B* > 0) "
                    "that reached "
                    "consensus, so there is no tightness to report (nan above; no box in `fig_tightness`).",
                    "",
                ]
                if empty
                else []
            ),
            "## Does Corollary 1's cost-ratio condition predict when adaptive lands between the fixed policies?",
            "",
            "Corollary 1 predicts an ordering, not dominance: K_cmpl <= K* <= K_ring and B_ring <= B* <= B_cmpl.",
            "Adaptive is *between* in a setting when it succeeds at all, its success rate is at least that of both",
            "fixed policies, its mean rounds are at most ring-only's and its mean tokens at most complete-only's (means over successful",
            "trajectories; a fixed policy with no successful trajectory never finishes, so its rounds and tokens",
            "count as infinite). A setting is every parameter but the strategy. Only settings where adaptive reaches",
            "consensus on >= 99% of trajectories are counted.",
            "The three strategies of a setting run from the same initial beliefs (common random numbers: X0",
            "depends on n, d, x0_mean and x0_spread only), so these comparisons are paired.",
            "",
            cross_md,
            "",
            (
                f"Agreement between the condition and the measured ordering: {100 * agree:.1f}% of {len(dom):,} settings."
                if len(dom)
                else "No setting has adaptive success >= 99%: there is nothing to compare."
            ),
            "",
            *(
                [
                    "Between is not better: adaptive **Pareto-dominates** both fixed policies (against each, success, "
                    "mean rounds and mean tokens at least as good, one of them better) in "
                    f"{int(dom.adaptive_pareto.sum()):,} of {len(dom):,} settings (`adaptive_pareto` in "
                    "`dominance.csv`).",
                    "",
                ]
                if len(dom) and "adaptive_pareto" in dom
                else []
            ),
        ]
    )
