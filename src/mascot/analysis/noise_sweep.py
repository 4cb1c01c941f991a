"""`mascot report noise-sweep DATA [DATA ...]`: the SR paper's affine-noise claims checked with confidence
intervals (eq. 3's sigma T^(3/2) / sqrt(k) law, eq. 5's chain/aggregate ratio, the rho_c inversion) on
merged `affine_noise` sweeps, linear and on the state-tracking rule."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from mascot.analysis.figures import legend, readable_log_axis, save_figure
from mascot.analysis.sources import check_merged, merged_meta, source_line
from mascot.errors import InputError
from mascot.io import atomic_write_text, json_clean, read_parquet_verified, significant, write_csv

__all__ = ["report", "chain_ratios"]


def chain_ratios(df: pd.DataFrame) -> pd.DataFrame:
    """E_ceg(k = 1) / E_ceg(k) for every k > 1 at equal other parameters, with a delta-method 95% CI."""
    keys = [
        c
        for c in ("model", "aggregate", "rho_c", "sigma", "T", "L", "trials", "value0", "parity0", "level0")
        if c in df.columns
    ]  # (trials too: two sweeps that differ only in it are never paired across)
    base = df[df.k == 1][keys + ["ceg_mean", "ceg_se"]].rename(columns={"ceg_mean": "m1", "ceg_se": "se1"})
    r = df[df.k > 1].merge(base, on=keys, how="inner")
    r["ratio"] = r.m1 / r.ceg_mean
    r["ratio_se"] = r.ratio * np.sqrt((r.se1 / r.m1) ** 2 + (r.ceg_se / r.ceg_mean) ** 2)
    r["ratio_lo"] = r.ratio - 1.96 * r.ratio_se
    r["ratio_hi"] = r.ratio + 1.96 * r.ratio_se
    r["formula_in_ci"] = (r.ratio_theory_k >= r.ratio_lo) & (r.ratio_theory_k <= r.ratio_hi)
    r["rel_dev_from_formula"] = r.ratio / r.ratio_theory_k - 1.0
    return r[keys + ["k", "ratio", "ratio_lo", "ratio_hi", "ratio_theory_k", "formula_in_ci", "rel_dev_from_formula"]]


def _slope(x, y):
    """Least-squares slope of log y on log x over the points with y > 0; NaN with fewer than two distinct x
    there (no slope to fit: e.g. one T, or sigma = 0 and every E_ceg 0)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = (y > 0) & np.isfinite(y) & (x > 0)
    if len(np.unique(x[keep])) < 2:
        return math.nan
    return float(np.polyfit(np.log(x[keep]), np.log(y[keep]), 1)[0])


def _some(ks, most: int = 4) -> list:
    """The distinct ``ks`` a panel draws: all of them, or every other one where there are more than ``most``
    (the SR paper's k = 1, 2, 3, 4, 6, 8, 12, 16 gives 1, 3, 6, 12; its ratios' k > 1 give 2, 4, 8, 16)."""
    ks = sorted(pd.unique(ks))
    return ks if len(ks) <= most else ks[::2]


def _say(ax, text: str) -> None:
    """A note in the middle of an empty panel."""
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=8, color="0.35")


def report(data, out="results/spectra") -> dict:
    import matplotlib.pyplot as plt

    paths = [data] if isinstance(data, (str, Path)) else list(data)
    paths = sorted(paths, key=lambda p: str(Path(p).resolve()))  # the report does not depend on the argument order
    frames, sources = [], []
    for p in paths:  # each file checked against the run it was merged from (a chunk or a cut file is refused)
        meta = merged_meta(p)
        part = read_parquet_verified(p, "; merge the run again").to_pandas()
        if "ceg_mean" not in part.columns:  # (a consensus file beside a noise one read as "model = nan" rows)
            raise InputError(f"{p} is not a merged 'affine_noise' sweep (no ceg_mean column)")
        check_merged(p, meta, len(part), part["point"].nunique() if "point" in part else len(part))
        frames.append(part)
        sources.append(source_line(p, meta))
    df = pd.concat(frames, ignore_index=True)
    if "ceg_mean" not in df.columns:
        raise InputError(f"{paths} is not a merged 'affine_noise' sweep (no ceg_mean column)")
    if df.empty:
        names = ", ".join(map(str, paths))
        raise InputError(f"{names} hold{'s' if len(paths) == 1 else ''} no rows: nothing to report")
    # one row per parameter set: the same file given twice (or two sweeps of one grid) would be paired with
    # itself in the k-ratios and counted twice in every claim
    params = [
        c
        for c in ("model", "aggregate", "k", "rho_c", "sigma", "T", "L", "trials", "value0", "parity0", "level0")
        if c in df.columns
    ]
    dup = df.duplicated(params, keep=False)
    if dup.any():
        first = df[dup].iloc[0]
        sets = len(df[dup].drop_duplicates(params))
        raise InputError(
            f"{sets} parameter set(s) appear in more than one row ({int(dup.sum())} rows; e.g. "
            + ", ".join(f"{c} = {first[c]}" for c in params)
            + "): give each sweep once, and sweeps whose grids do not overlap"
        )
    out = Path(out)
    ratios = chain_ratios(df)
    claims: dict = {}
    lin = df[df.model == "linear"]
    rule = df[df.model == "rule"]

    fig, ax = plt.subplots(1, 3, figsize=(15, 4.3))
    if len(lin):
        m = lin[(lin["aggregate"] == "mean")]
        # z over the points with a spread (sigma = 0: E_ceg and its theory are both exactly 0, z is 0/0)
        z = ((m.ceg_mean - m.ceg_theory) / m.ceg_se)[m.ceg_se > 0]
        # points whose runs overflowed (|L| > 1 over many steps: E_ceg is inf or NaN) test nothing: counted apart
        lost = int((m.sigma > 0).sum() - len(z))
        claims["linear_mean_vs_exact_theory"] = dict(
            points=int(len(z)),
            points_nonfinite=lost,
            max_abs_z=float(z.abs().max()),
            share_abs_z_below_3=float((z.abs() < 3).mean()),
        )
        a = m[(m.L == 1.0) & (m.rho_c == 0.0)]
        pos = a[(a.sigma > 0) & (a.ceg_mean > 0)]  # (a log-log panel: sigma = 0 gives E_ceg = 0)
        for k, c in zip(_some(pos.k), plt.cm.viridis(np.linspace(0, 0.9, 8))):
            d = pos[pos.k == k].sort_values("T")
            ax[0].errorbar(
                d["T"], d.ceg_mean / d.sigma, yerr=1.96 * d.ceg_se / d.sigma, fmt="o", color=c, ms=4, label=f"k = {k}"
            )
            # the exact value: a line over the Ts, a dash at a single T (a one-point line is not drawn)
            ax[0].plot(d["T"], d.ceg_theory / d.sigma, "-" if len(d) > 1 else "_", color=c, lw=1, ms=14)
        big = a[a["T"] >= 12]
        claims["trials"] = dict(min=int(lin.trials.min()), max=int(lin.trials.max())) if "trials" in lin else {}
        # eq. 3's T^(3/2) is a large-T law: slopes are fitted over T >= 12 (the SR paper's horizon), null where
        # a k has fewer than two such T
        claims["slope_in_T_fitted_over"] = "T >= 12, L = 1, rho_c = 0, mean aggregation; null: fewer than two such T"
        claims["slope_in_T_at_L1"] = {int(k): _slope(d["T"], d.ceg_mean) for k, d in big.groupby("k")}
        claims["slope_in_T_theory_at_L1"] = {int(k): _slope(d["T"], d.ceg_theory) for k, d in big.groupby("k")}
        claims["slope_in_k_at_L1_rho0"] = {int(T): _slope(d.k, d.ceg_mean) for T, d in a.groupby("T")}
        ax[0].set(xlabel="steps T", ylabel="E[E_ceg] / sigma", title="L = 1, rho_c = 0: dots MC (95% CI), lines exact")
        if len(pos):
            ax[0].set(xscale="log", yscale="log")
            ts = sorted(pos["T"].unique())
            if len(ts) == 1:  # one T: centred, not at the edge of an empty axis
                ax[0].set_xlim(ts[0] / 1.5, ts[0] * 1.5)
            ax[0].set_xticks(ts, labels=[str(int(t)) for t in ts])
            ax[0].minorticks_off()
            readable_log_axis(ax[0], "y")
        else:
            ax[0].text(
                0.5,
                0.5,
                "no linear-model row with aggregate = mean,\nL = 1, rho_c = 0 and E_ceg > 0 (sigma > 0)",
                ha="center",
                va="center",
                transform=ax[0].transAxes,
                fontsize=8,
                color="0.35",
            )
        legend(ax[0], fontsize=7, title="every other k" if len(_some(pos.k)) < pos.k.nunique() else None)
        # eq. 5 at the SR paper's T = 12 and L = 1 (or the sweep's largest T and L where it has no such rows)
        rl = ratios[ratios.model == "linear"]
        T5 = 12 if (rl["T"] == 12).any() else (rl["T"].max() if len(rl) else 12)
        L5 = 1.0 if (rl.L == 1.0).any() else (rl.L.max() if len(rl) else 1.0)
        rr = rl[(rl.L == L5) & (rl["T"] == T5)]
        colors = {k: f"C{i}" for i, k in enumerate(_some(rr.k))}
        for (agg, k), d in rr.groupby(["aggregate", "k"]):
            if k not in colors:
                continue
            c = colors[k]
            d = d.sort_values("rho_c")
            ax[1].errorbar(
                d.rho_c,
                d.ratio,
                yerr=[d.ratio - d.ratio_lo, d.ratio_hi - d.ratio],
                fmt="o" if agg == "mean" else "s",
                mfc="none" if agg == "median" else c,
                color=c,
                ms=4,
                label=f"k = {k} ({agg})",
            )
        rc = np.linspace(0, 1, 200)
        for k, c in colors.items():
            ax[1].plot(rc, np.sqrt(k / (1 + (k - 1) * rc)), "-", color=c, lw=1)
        if len(rr):
            ax[1].axhline(1.77, color="k", ls=":", lw=1)
            ax[1].text(0.55, 1.83, "paper's chain/star 1.77", fontsize=7)
        others = sorted(set(rl.L) - {L5})
        ax[1].set(
            xlabel="rho_c",
            ylabel="E_ceg(k = 1) / E_ceg(k)",
            title=f"eq. 5 (lines) vs MC, T = {T5:g}, L = {L5:g}" if len(rr) else "eq. 5: E_ceg(k = 1) / E_ceg(k)",
        )
        if not len(rr):
            _say(ax[1], "no ratio to draw: it needs linear rows\nwith k = 1 and k > 1 at equal parameters")
        elif others:  # (the ratios at the other L are in noise_ratios.csv)
            ax[1].text(
                0.02,
                0.02,
                "other L in noise_ratios.csv: " + ", ".join(f"{v:g}" for v in others),
                transform=ax[1].transAxes,
                fontsize=7,
                color="0.35",
            )
        title = "every other k" if len(_some(rr.k)) < rr.k.nunique() else None
        legend(ax[1], fontsize=6, ncol=2, title=title)
        sel = ratios[
            (ratios.model == "linear") & (ratios["aggregate"] == "mean") & (ratios.L == 1.0) & np.isfinite(ratios.ratio)
        ]  # (a ratio 0/0 at sigma = 0 tests nothing)
        claims["eq5_ratio_linear_mean_L1"] = dict(
            points=int(len(sel)),
            share_formula_in_95ci=float(sel.formula_in_ci.mean()),
            max_abs_rel_dev=float(sel.rel_dev_from_formula.abs().max()),
        )
        sel = ratios[
            (ratios.model == "linear") & (ratios["aggregate"] == "median") & (ratios.L == 1.0) & (ratios.rho_c == 0)
        ]
        claims["median_ratio_over_mean_formula_rho0"] = {
            int(k): float(d.rel_dev_from_formula.mean() + 1) for k, d in sel.groupby("k")
        }
    else:  # a sweep of the state-tracking rule only
        for a in ax[:2]:
            _say(a, "no linear-model rows in this sweep")
    if len(rule):
        rr = ratios[(ratios.model == "rule")]
        ts = sorted(rr["T"].unique())
        for k, c in zip(_some(rr.k), (f"C{i}" for i in range(10))):
            for T, ls in zip(dict.fromkeys(ts[:1] + ts[-1:]), (":", "-")):  # the shortest and the longest T
                d = rr[
                    (rr.k == k)
                    & (rr["T"] == T)
                    & (rr.rho_c == 0)
                    & (rr["aggregate"] == "mean")
                    & (rr.sigma > 0)
                    & np.isfinite(rr.ratio)
                ].sort_values("sigma")
                if len(d):
                    ax[2].errorbar(
                        d.sigma,
                        d.ratio,
                        yerr=[d.ratio - d.ratio_lo, d.ratio_hi - d.ratio],
                        fmt="o",
                        ls=ls,
                        color=c,
                        ms=3,
                        label=f"k = {k}, T = {T}",
                    )
                    ax[2].axhline(np.sqrt(k), color=c, lw=0.6)
        ax[2].set(
            xlabel="per-agent Value noise sigma",
            ylabel="E_ceg(k = 1) / E_ceg(k)",
            title="State-tracking rule, rho_c = 0 (thin lines: sqrt(k))",
        )
        if ax[2].has_data():
            ax[2].set(xscale="log")
        else:
            ax[2].text(
                0.5,
                0.5,
                # (a sweep without k = 1 was told it had no sigma > 0: an outside tester)
                "no rule-model ratio E_ceg(k = 1) / E_ceg(k): it needs rows\nwith k = 1 and k > 1 at equal "
                "parameters, sigma > 0, rho_c = 0",
                ha="center",
                va="center",
                transform=ax[2].transAxes,
                fontsize=8,
                color="0.35",
            )
        legend(ax[2], fontsize=7)
        m = rr[(rr["aggregate"] == "mean") & (rr.rho_c == 0)]
        if m.empty:  # (an empty {} said nothing of why)
            claims["rule_ratio_note"] = "no ratio: it needs rule rows with k = 1 and k > 1 at sigma > 0, rho_c = 0"
        claims["rule_ratio_rel_dev_from_sqrt_k"] = {
            f"k={int(k)},T={int(T)}": {f"{s:g}": float(v) for s, v in zip(d.sigma, d.rel_dev_from_formula)}
            for (k, T), d in m.groupby(["k", "T"])
        }
        claims["rule_diverged_runs"] = int(rule.diverged.sum())
        s0 = (
            rule[["value0", "parity0", "level0"]].drop_duplicates()
            if {"value0", "parity0", "level0"} <= set(rule)
            else None
        )
        if s0 is not None and len(s0) == 1:  # the state the rule runs started from (mascot's choice, not the paper's)
            r0 = s0.iloc[0]
            parity = r0.parity0 if isinstance(r0.parity0, str) else "AB"[int(r0.parity0)]
            claims["rule_initial_state"] = dict(value0=float(r0.value0), parity0=parity, level0=int(r0.level0))
    else:
        ax[2].set_visible(False)
    out.mkdir(parents=True, exist_ok=True)  # (everything computed and drawn: nothing is written before a failure)
    write_csv(ratios, out / "noise_ratios.csv", index=False, float_format="%.6g")
    save_figure(fig, out / "fig_noise")
    plt.close(fig)
    # 12 significant digits: the last bits of these fits depend on the CPU's BLAS kernels
    # (a slope that cannot be fitted is null: JSON has no NaN)
    claims["sources"] = sources  # the experiments and hashes the claims describe
    atomic_write_text(out / "noise_claims.json", json.dumps(json_clean(significant(claims, 12)), indent=2) + "\n")
    return claims
