"""`mascot report spectra-sweep DATA`: summary table and figures from a merged `spectra` sweep."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from mascot.analysis.figures import readable_log_axis, save_figure
from mascot.analysis.plot import drop_copied_rows, natural_order
from mascot.analysis.sources import check_merged, check_unique_rows, merged_meta, source_line
from mascot.errors import InputError
from mascot.graphs import RANDOM_FAMILIES
from mascot.io import atomic_write_text, read_parquet_verified, significant, write_csv

__all__ = ["report"]

_DET = ("chain", "ring", "mesh", "star")  # the canonical families, drawn first, each in its own colour and marker


def _label(r) -> str:
    """The graph family with the parameters it reads: points that differ in them are summarised apart."""
    f = r["family"]
    if f == "erdos_renyi":
        return f"ER p={r['p']:g}"
    if f == "watts_strogatz":
        return f"WS k={int(r['degree'])} beta={r['beta']:g}"
    if f == "random_regular":
        return f"regular d={int(r['degree'])}"
    if f == "malicious_star":
        return f"malicious_star alpha={r['alpha']:g}"
    if f == "complete":
        return f"complete a={r['a']:g}"
    return f


def _deterministic(summ) -> list[tuple[str, str, int]]:
    """``(label, family, style index)`` of the summary's one-graph families: the canonical four at their fixed
    indices (the same colours in every report), then the others (a malicious star per alpha, a complete graph
    per self-weight) in natural order."""
    det = summ[~summ.family.isin(RANDOM_FAMILIES)]
    labels = dict(zip(det.graph_family, det.family))
    out = [(f, f, j) for j, f in enumerate(_DET) if f in labels]
    rest = natural_order(lab for lab in labels if lab not in _DET)
    return out + [(lab, labels[lab], len(_DET) + i) for i, lab in enumerate(rest)]


def report(data, out="results/spectra") -> pd.DataFrame:
    import matplotlib.pyplot as plt

    meta = merged_meta(data)  # (a chunk file is refused: one chunk is a fraction of the grid)
    df = read_parquet_verified(data, "; merge the run again").to_pandas()
    if "kappa" not in df.columns or "family" not in df.columns:
        raise InputError(f"{data} is not a merged 'spectra' sweep (no family/kappa columns)")
    if df.empty:
        raise InputError(f"{data} holds no rows: nothing to report")
    check_merged(data, meta, len(df), df["point"].nunique())
    check_unique_rows(data, df, ["point", "graph"])
    n_rows, n_points = len(df), df["point"].nunique()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    # points that differ only in parameters their family does not read (stored as missing) hold the same graphs:
    # count each graph once (an unread alpha axis doubled a Watts-Strogatz family's graph count)
    df, _ = drop_copied_rows(df)
    df["graph_family"] = df.apply(_label, axis=1)
    # a point's graph count (the config's `graphs` for a random family, 1 otherwise) keeps apart samples of other
    # sizes: points with graphs = 2 and 5 were pooled into one median of 7 graphs
    df["graphs"] = df.groupby("point")["point"].transform("size")
    q = lambda x, p: x.quantile(p)  # noqa: E731
    summ = (
        df.groupby(["graph_family", "family", "n", "gamma", "graphs"], sort=True)
        .agg(
            isolated_mean=("isolated", "mean"),
            rho_median=("rho", "median"),
            delta_median=("delta", "median"),
            kappa_median=("kappa", "median"),
            kappa_q10=("kappa", lambda x: q(x, 0.1)),
            kappa_q90=("kappa", lambda x: q(x, 0.9)),
            delta_q10=("delta", lambda x: q(x, 0.1)),
            delta_q90=("delta", lambda x: q(x, 0.9)),
        )
        .reset_index()
    )
    mixed = summ.duplicated(["graph_family", "n", "gamma"], keep=False)  # one family's points of other graph counts
    if mixed.any():
        named = summ.graph_family.isin(summ.graph_family[mixed])
        summ.loc[named, "graph_family"] = summ.graph_family[named] + " graphs=" + summ.graphs[named].astype(str)
    # the last bits of LAPACK's results depend on the CPU's BLAS kernels: the statistics keep 10 significant
    # digits (so the table and the figures drawn from it are the same on every machine), and a gap that is
    # exactly 0 (a repeated leading eigenvalue: isolated agents), which comes out as 0 or a few 1e-16, is 0
    # below 1e-12 of rho
    for c in ("delta_median", "delta_q10", "delta_q90"):
        summ[c] = summ[c].mask(summ[c].abs() <= 1e-12 * summ["rho_median"].abs(), 0.0)
    for c in summ.columns[summ.dtypes == np.float64]:
        summ[c] = significant([float(v) for v in summ[c]], 10)
    write_csv(summ, out / "sweep_summary.csv", index=False, float_format="%.6g")

    # kappa and Delta against gamma for the deterministic families at a small and the largest size. Several
    # curves coincide (ring and the chain's limit (1+g)/(1-g), star and mesh Delta, chain and large-ring Delta),
    # so each family has its own marker, each curve its markers at its own gammas (no two curves share one),
    # and later-drawn lines are thinner.
    rand = summ[summ.family.isin(RANDOM_FAMILIES)]
    fig, ax = plt.subplots(1, 3 if len(rand) else 2, figsize=(17.5 if len(rand) else 12, 4.6))
    color = lambda j: f"C{j % 10}"  # noqa: E731
    marker = lambda j: "os^DvPX*<>"[j % 10]  # noqa: E731
    deterministic = _deterministic(summ)
    drawn = []  # (label, the sizes drawn, of how many) for the report's words
    for lab, _, j in deterministic:
        d = summ[(summ.graph_family == lab)]
        sizes = sorted(d.n.unique())
        if not sizes:
            continue
        shown = sorted({sizes[len(sizes) // 3], sizes[-1]})
        drawn.append((lab, shown, len(sizes)))
        for i, (n, ls, mfc) in enumerate(zip(shown, ("-", "--"), (None, "white"))):
            e = d[d.n == n].sort_values("gamma")
            # staggered markers need a long gamma axis; on a short one every gamma has a marker (a stagger of 2
            # gammas left most curves with none, though the legend shows one)
            stagger = ((2 * j + i) % 8, 8) if len(e) >= 16 else None
            kw = dict(
                color=color(j),
                marker=marker(j),
                # the smaller n wider, with larger filled markers, under the larger n's: a size that gives the
                # same values stays visible around it (an outside tester: star n = 16 hid under n = 32)
                ms=7 if i == 0 and len(shown) > 1 else 4.5,
                mfc=mfc or color(j),
                lw=max(2.2 - 0.4 * j, 0.6) + (1.6 if i == 0 and len(shown) > 1 else 0.0),
                markevery=stagger,
                label=f"{lab} n={n}",
            )
            ax[0].plot(e.gamma, e.kappa_median, ls, **kw)
            ax[1].plot(e.gamma, e.delta_median, ls, **kw)
    det = summ[~summ.family.isin(RANDOM_FAMILIES)]
    if len(det):  # the ring's kappa and the long chain's limit, over the gammas the curves span (no further)
        g = np.linspace(det.gamma.min(), det.gamma.max(), 100)
        ax[0].plot(g, (1 + g) / (1 - g), ":", color="k", lw=1, label="(1+g)/(1-g)")
    ax[0].set(yscale="log", xlabel="gamma", ylabel="kappa(M)", title="Condition number vs discount")
    ax[1].set(
        yscale="symlog", xlabel="gamma", ylabel="Delta(M) (log above 1, linear below)", title="Spectral gap vs discount"
    )
    for a in ax[:2]:
        if a.has_data():
            a.legend(fontsize=7, ncol=2)
        else:  # a sweep of random families only
            _empty(a, "no one-graph family\n(chain, ring, mesh, star, ...) in this sweep")
    if len(rand):  # random families: median and 10-90% band over their graphs, at each family's largest n
        for i, (lab, d) in enumerate(rand.groupby("graph_family", sort=True)):
            e = d[d.n == d.n.max()].sort_values("gamma")
            drawn.append((lab, [int(e.n.iloc[0])], d.n.nunique()))
            c = plt.cm.tab10(i % 10)
            ax[2].plot(e.gamma, e.kappa_median, "o-", ms=3, color=c, label=f"{lab} n={int(e.n.iloc[0])}")
            ax[2].fill_between(e.gamma, e.kappa_q10, e.kappa_q90, color=c, alpha=0.15)
        ax[2].set(yscale="log", xlabel="gamma", ylabel="kappa(M)", title="Random graphs (median, 10-90% band)")
        ax[2].legend(fontsize=7)
        readable_log_axis(ax[2], "y")
    if ax[0].has_data():
        readable_log_axis(ax[0], "y")
    long_axis = summ.groupby(["family", "n"]).gamma.nunique().max() >= 16
    caption = (
        "Coinciding curves are drawn in decreasing width; "
        + ("each curve has its markers at its own gammas" if long_axis else "every gamma has a marker")
        + " (filled and wider: smaller n, open: largest n), so a marker sitting on another curve means equal "
        + "values. Lines join the computed gammas. Sizes drawn: a third up each family's sizes and its largest "
        + "(random families: the largest); every size is in sweep_summary.csv."
    )
    # wrapped to the figure's width (one long line widened the saved canvas, leaving a blank strip at the right)
    fig.text(0.01, -0.01, "\n".join(textwrap.wrap(caption, 200 if len(rand) else 140)), fontsize=7.5, va="top")
    save_figure(fig, out / "fig_sweep_gamma")
    plt.close(fig)

    # size scaling at gamma = 0.9, or the sweep's gamma nearest it (a grid without 0.9 left both panels empty):
    # deterministic families, and random families with 10-90% bands
    g_at = float(summ.gamma.iloc[np.argmin(np.abs(summ.gamma.to_numpy() - 0.9))]) if len(summ) else 0.9
    g9 = summ[np.isclose(summ.gamma, g_at)]
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    for lab, _, j in deterministic:
        d = g9[g9.graph_family == lab]
        if len(d):
            ax[0].plot(d.n, d.kappa_median, "o-", color=color(j), label=lab)
    for i, (lab, d) in enumerate(g9[g9.family.isin(RANDOM_FAMILIES)].groupby("graph_family")):
        c = plt.cm.tab10(i % 10)
        ax[1].plot(d.n, d.kappa_median, "o-", color=c, label=lab)
        ax[1].fill_between(d.n, d.kappa_q10, d.kappa_q90, color=c, alpha=0.15)
    for a, t, what in zip(
        ax, ("Canonical graphs", "Random graphs (median, 10-90% band)"), ("one-graph family", "random-family")
    ):
        a.set(xlabel="agents n", ylabel=f"kappa(M) at gamma = {g_at:g}", title=t)
        if not a.has_data():  # nothing of this kind in this sweep (log scales need data)
            _empty(a, f"no {what} rows\nin this sweep")
            continue
        if a is ax[0]:
            a.set_yscale("log")
            readable_log_axis(a, "y")
        a.set_xscale("log", base=2)
        rnd = g9.family.isin(RANDOM_FAMILIES)
        readable_log_axis(a, "x", values=g9[rnd if a is ax[1] else ~rnd].n.unique())
        a.legend(fontsize=7)
    save_figure(fig, out / "fig_sweep_size")
    plt.close(fig)
    sizes = "; ".join(
        f"{lab} n = {', '.join(map(str, shown))}" + (f" (of {k} sizes)" if k > len(shown) else "")
        for lab, shown, k in drawn
    )
    text = [
        "# Spectra sweep report",
        "",
        source_line(data, meta, "mascot.analysis.spectra_sweep.report"),
        "",
        f"{n_rows:,} rows (one per grid point and graph) of {n_points:,} grid points; {len(summ):,} (graph setting, "
        "gamma) rows in `sweep_summary.csv` (medians and 10/90% quantiles of rho, Delta and kappa over each "
        "setting's graphs, each graph counted once). Written by `mascot report spectra-sweep`.",
        "",
        f"- `fig_sweep_gamma`: kappa and Delta against gamma, at {sizes or 'no size (no rows)'}.",
        f"- `fig_sweep_size`: kappa against n at gamma = {g_at:g}"
        + ("." if np.isclose(g_at, 0.9) else " (the sweep's gamma nearest 0.9)."),
    ]
    atomic_write_text(out / "spectra_sweep.md", "\n".join(text) + "\n")
    return summ


def _empty(ax, msg: str) -> None:
    ax.text(0.5, 0.5, msg, ha="center", va="center", transform=ax.transAxes, fontsize=9, color="0.4")
