"""Figures of a state-tracking calibration (:func:`mascot.calibrate.trials_fit.calibrate_trials`): observed vs
predicted Table 2 means, and a run's step profile."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mascot.calibrate.trials import METRICS, TOPOS, block_tags

__all__ = ["figures"]


def figures(s: dict, stem: Path) -> list:
    """Observed vs predicted means (``stem``.png/.pdf) and, for a run's fit, the step profile beside it."""
    import matplotlib.pyplot as plt

    from mascot.analysis.figures import save_figure

    names = s["moment_names"]
    held = set(s.get("held_out") or ())
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, m in zip(axes, METRICS):
        for j, t in enumerate(TOPOS):
            i = names.index(f"{t}.{m}.mean")
            o, e = s["target"][i], s["se"][i]
            p, lo, hi = s["predicted"]["median"][i], s["predicted"]["lo"][i], s["predicted"]["hi"][i]
            kind = "held" if names[i] in held else "off" if names[i] in s["excluded"] else "fit"
            ax.errorbar(
                [j - 0.1],
                [o],
                yerr=[[2 * e], [2 * e]],
                fmt="o",
                mfc="k" if kind == "fit" else "white",
                color={"held": "#1f77b4", "off": "0.5", "fit": "k"}[kind],
                label={
                    "held": "observed ± 2 se, held out (predicted)",
                    "off": "observed ± 2 se, not fitted *",
                    "fit": "observed ± 2 se, fitted to",
                }[kind],
            )
            ax.errorbar([j + 0.1], [p], yerr=[[p - lo], [hi - p]], fmt="s", color="#d62728", label="model (5-95%)")
        # a moment not fitted: its topology marked with * (a footnote says why), not a label over the data
        ax.set_xticks(
            range(3),
            [t + (" *" if f"{t}.{m}.mean" in s["excluded"] and f"{t}.{m}.mean" not in held else "") for t in TOPOS],
        )
        ax.set_title(f"mean {m}")
    what = (
        "fitted to the black points, predicting the blue ones (out of sample)"
        if held
        else "in sample: the model fitted to these points (not a test of prediction)"
    )
    fig.suptitle(f"{s['source']}: {what}", fontsize=10)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    seen: dict = {}
    for a in axes:  # one legend entry per kind of marker, whichever panel has it
        for h, lab in zip(*a.get_legend_handles_labels()):
            seen.setdefault(lab.strip(), h)
    fig.legend(
        list(seen.values()),
        list(seen),
        loc="lower center",
        bbox_to_anchor=(0.5, 0.03),
        ncol=len(seen),
        fontsize=8,
        frameon=False,
    )
    if s["excluded"]:
        fig.text(
            0.5,
            0.005,
            "* not fitted"
            + (": a run's fit uses the log form of the raw E_ceg and F_ps" if s["kind"] == "run" else ""),
            ha="center",
            va="bottom",
            fontsize=8,
        )
    figs = list(save_figure(fig, stem))
    if s.get("profile_steps"):
        figs += _profile_figure(s, stem.with_name("step_profile"))
    return figs


def _profile_figure(s: dict, stem: Path) -> list:
    """Observed (± 2 se) vs predicted (median, 5-95%) step profile: one panel per quantity, blocks of steps on
    the x axis, one colour per topology."""
    import matplotlib.pyplot as plt

    from mascot.analysis.figures import save_figure

    names, tags = s["moment_names"], block_tags(s["profile_steps"])
    colours = {"chain": "#1f77b4", "mesh": "#2ca02c", "star": "#d62728"}
    titles = {"log1p_err": "log(1 + |x*_t - x^_t|)", "log1p_D": "log(1 + D_t)", "log1p_gap": "log(1 + |x'_t - x_t|)"}
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, (q, title) in zip(axes, titles.items()):
        for j, t in enumerate(TOPOS):
            idx = [names.index(f"{t}.{q}.{g}.mean") for g in tags if f"{t}.{q}.{g}.mean" in names]
            if not idx:
                continue
            x = np.arange(len(idx)) + (j - 1) * 0.08
            o, e = np.array([s["target"][i] for i in idx], float), np.array([s["se"][i] for i in idx], float)
            p = np.array([s["predicted"]["median"][i] for i in idx], float)
            lo = np.array([s["predicted"]["lo"][i] for i in idx], float)
            hi = np.array([s["predicted"]["hi"][i] for i in idx], float)
            ax.errorbar(x - 0.02, o, yerr=2 * e, fmt="o", color=colours[t], label=f"{t} observed ± 2 se")
            ax.errorbar(
                x + 0.02,
                p,
                yerr=[p - lo, hi - p],
                fmt="s--",
                mfc="none",
                color=colours[t],
                alpha=0.8,
                label=f"{t} predicted (5-95%)",
            )
        ax.set_xticks(range(len(tags)), [("steps " if "-" in g else "step ") + g[1:] for g in tags])
        ax.set_title(title, fontsize=10)
    axes[0].set_ylabel("mean over trials")
    fig.suptitle(f"Step profile, in sample (the model fitted to these points): {s['source']}", fontsize=10)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    h, lab = axes[0].get_legend_handles_labels()
    fig.legend(h, lab, loc="lower center", ncol=3, fontsize=8, frameon=False)
    return save_figure(fig, stem)
