"""Reports of LLM deliberation runs (consensus paper, Sec. V-C): Table VIII, Fig. 4, per-mode estimates,
post-hoc certificates (with the paper's Claude example recomputed) and the online monitor's accuracy.

:func:`write_report` takes one or more run directories of :func:`mascot.protocols.deliberation.run_deliberation`
(e.g. one per model, like the paper's three columns) and writes into ``out``:

* ``table_viii.csv`` (one row per model, strategy and run) and ``table_viii.md`` (the paper's layout:
  rows Rounds / Tokens / D(0) / D_final / Status, one column per model and strategy; with several runs
  the mean over runs and the status counts);
* ``fig4.png`` / ``fig4.pdf``: (a) D(k) and (b) b_k under the adaptive strategy, (c) b_k complete-only,
  (d) b_k ring-only; ``fig4_full.png`` / ``.pdf``: D(k) and b_k for every strategy;
* ``estimates.csv`` / ``.md``: per-mode empirical contraction rates D(k+1)/D(k) (mean, geometric mean,
  spread, share of expanding rounds > 1) and round costs; ``certificates.csv``: the post-hoc check per
  lane; ``monitor_shadow.csv``: the logged monitor verdicts vs the outcome; ``claude_example.json`` (the
  paper's own Claude example recomputed, with ``paper_example=True``: the paper's studies only).

:func:`deliberate` runs (or resumes) a deliberation and then writes its report into the run directory.
:func:`monitor_study` scores the online monitor on the JAX surrogate (10^4 noisy runs per setting).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from mascot.analysis.figures import plt, save_figure
from mascot.io import atomic_write_text, write_csv
from mascot.protocols.deliberation.records import (
    claude_example,
    group_lanes,
    lane_summaries,
    mode_statistics,
    posthoc_certificates,
    read_rounds,
)

__all__ = ["load_runs", "table_viii", "write_report", "fig4", "shadow_monitor", "format_int"]

_COLORS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:gray"]
_MARK = {"BudgetFail": "X", "predicted_BudgetFail": "v", "max_rounds": "s", "consensus": "o"}


def _label(meta: dict, path: Path) -> str:
    b = meta.get("identity", {}).get("backend", {})
    model = b.get("model") or b.get("name") or path.name
    return str(model).rstrip("/").split("/")[-1]


def load_runs(dirs) -> list[dict]:
    """``[{"dir", "model", "config", "rows"}]`` for each run directory."""
    out = []
    for d in dirs:
        d = Path(d)
        meta = json.loads((d / "run.json").read_text())
        backend = meta.get("identity", {}).get("backend", {}).get("name")
        out.append(
            {
                "dir": d,
                "model": _label(meta, d),
                "backend": backend,
                "config": meta["identity"]["config"],
                "rows": read_rounds(d),
            }
        )
    labels = [r["model"] for r in out]
    for r in out:  # disambiguate equal labels
        if labels.count(r["model"]) > 1:
            r["model"] = f"{r['model']} ({r['dir'].name})"
    return out


def _unanswered(row: dict) -> bool:
    """No agent's reply parsed in this round (every vector carried forward: round 0 from the priors)."""
    reps = row.get("replies") or []
    return bool(reps) and all(r.get("carried", not r.get("ok", True)) for r in reps)


def lane_flags(rows: list[dict]) -> dict[tuple[str, int], dict]:
    """Per lane: ``d0_from_priors`` (no agent's round-0 reply parsed: D(0) is the disagreement of the
    config's priors), ``d0_carried`` (round-0 agents whose vector is their prior), ``unanswered_rounds``
    (rounds k >= 1 in which no agent's reply parsed: X_k = X_{k-1} copied), ``carried_replies`` (every
    carried vector, round 0 included)."""
    out = {}
    for key, rs in group_lanes(rows).items():
        first = rs[0]
        reps0 = first.get("replies") or []
        out[key] = {
            "d0_from_priors": first["round"] == 0 and _unanswered(first),
            "d0_carried": sum(bool(r.get("carried", False)) for r in reps0) if first["round"] == 0 else 0,
            "unanswered_rounds": sum(_unanswered(r) for r in rs if r["round"] >= 1),
            "carried_replies": sum(sum(bool(x.get("carried", False)) for x in (r.get("replies") or [])) for r in rs),
        }
    return out


def rows_for_rates(rows: list[dict], include_unanswered: bool = False) -> tuple[list[dict], dict]:
    """``rows`` for the empirical rate estimates: unless ``include_unanswered``, each rate D(k)/D(k-1) that
    involves a round without any parsed reply (round k, round k-1 >= 1, or a round 0 whose D(0) came from the
    priors) is dropped (its round-k row is copied with ``sigma = None``, which
    :func:`~mascot.protocols.deliberation.records.mode_statistics` and
    :func:`~mascot.protocols.deliberation.records.posthoc_certificates` skip). Returns the rows and
    ``{"rates", "flagged", "excluded", "lanes_d0_from_priors", "unanswered_rounds"}`` (``flagged``: rates that
    involve such a round; ``excluded``: those left out)."""
    out, info = [], {"rates": 0, "flagged": 0, "excluded": 0, "lanes_d0_from_priors": 0, "unanswered_rounds": 0}
    for _, rs in group_lanes(rows).items():
        info["lanes_d0_from_priors"] += int(rs[0]["round"] == 0 and _unanswered(rs[0]))
        info["unanswered_rounds"] += sum(_unanswered(r) for r in rs if r["round"] >= 1)
        out.append(rs[0])
        for prev, cur in zip(rs, rs[1:]):
            if cur.get("sigma") is None or prev["D"] <= 0:
                out.append(cur)
                continue
            info["rates"] += 1
            if _unanswered(cur) or _unanswered(prev):
                info["flagged"] += 1
                if not include_unanswered:
                    info["excluded"] += 1
                    cur = {**cur, "sigma": None}
            out.append(cur)
    return out, info


def table_viii(runs: list[dict]) -> pd.DataFrame:
    recs = []
    for r in runs:
        flags = lane_flags(r["rows"])
        for s in lane_summaries(r["rows"], r["config"]["b0"]):
            recs.append({"model": r["model"], **s, **flags.get((s["strategy"], s["run"]), {})})
    return pd.DataFrame.from_records(recs)


def format_int(x):
    return f"{x:,.0f}" if np.isfinite(x) else "-"


def _table_md(df: pd.DataFrame) -> str:
    cols = []
    for (model, strat), g in df.groupby(["model", "strategy"], sort=False):
        st = g["status"].fillna("running").value_counts()
        status = ", ".join(f"{k} {v}" for k, v in st.items()) if len(g) > 1 else str(g["status"].iloc[0])
        prior = int(g["d0_from_priors"].sum()) if "d0_from_priors" in g else 0
        unans = int(g["unanswered_rounds"].sum()) if "unanswered_rounds" in g else 0
        cols.append(
            (
                f"{model} {strat}",
                {
                    "Rounds": f"{g['rounds'].mean():.1f}" if len(g) > 1 else f"{int(g['rounds'].iloc[0])}",
                    "Tokens": format_int(g["tokens"].mean()),
                    "D(0)": f"{g['d0'].mean():.4f}" + (" †" if prior else ""),
                    "D_final": f"{g['d_final'].mean():.4f}" + (" ‡" if unans else ""),
                    "Status": status,
                    "Parse failures": f"{int(g['failures'].sum())}",
                    "Parse errors (retried)": f"{int(g['parse_errors'].sum())}",
                    "D(0) from priors (runs)": f"{prior}",
                    "Rounds with no parsed reply": f"{unans}",
                    "Runs": f"{len(g)}",
                },
            )
        )
    rows = [
        "Rounds",
        "Tokens",
        "D(0)",
        "D_final",
        "Status",
        "Parse failures",
        "Parse errors (retried)",
        "D(0) from priors (runs)",
        "Rounds with no parsed reply",
        "Runs",
    ]
    head = "| | " + " | ".join(c for c, _ in cols) + " |"
    sep = "|---|" + "---|" * len(cols)
    body = ["| " + r + " | " + " | ".join(v[r] for _, v in cols) + " |" for r in rows]
    notes = []
    n_prior = int(df["d0_from_priors"].sum()) if "d0_from_priors" in df else 0
    n_unans = int(df["unanswered_rounds"].sum()) if "unanswered_rounds" in df else 0
    if n_prior:
        notes.append(
            f"† Not measured: in {n_prior} of {len(df)} runs no agent's round-0 reply parsed, so D(0) is the "
            "disagreement of the config's priors (the role priors, else 0.5 on every axis), not of model "
            "replies."
        )
    if n_unans:
        notes.append(
            f"‡ {n_unans} round(s) had no parsed reply at all: every vector of such a round is the previous "
            "one carried forward, so D did not move because of the model."
        )
    return "\n".join([head, sep] + body) + "\n" + ("\n" + "\n\n".join(notes) + "\n" if notes else "")


def _traces(rows, strategy):
    out = []
    for (s, run), rs in group_lanes(rows).items():
        if s == strategy:
            out.append(
                (
                    run,
                    [r["round"] for r in rs],
                    [r["D"] for r in rs],
                    [r["b"] for r in rs],
                    rs[-1].get("status"),
                    [r.get("sigma") for r in rs],
                )
            )
    return sorted(out)


_SWITCH = "*"  # marker of a mode switch (mode 1 -> mode 2)


def _k_tokens(v, _=None) -> str:
    """Token counts in words: 0, 20k, 100k, -10k (no "0k"), to the nearest thousand."""
    if abs(v) < 0.5:
        return "0"
    return f"{v / 1000:.0f}k" if abs(v) >= 1000 else f"{v:.0f}"


def _k_ticks(v, _=None) -> str:
    """Budget tick labels: as :func:`_k_tokens`, but exact (a tick at 12,500 read "12k": an outside tester)."""
    if abs(v) < 0.5:
        return "0"
    return f"{v / 1000:g}k" if abs(v) >= 1000 else f"{v:g}"


def _mode_runs(sigma) -> list[tuple[int, int, int]]:
    """Stretches of equal mode in a lane's ``sigma`` list (``sigma[k]``: the mode of round k, ``None`` at round
    0): ``(start, end, mode)`` index pairs of the points to join, each stretch starting at the point before its
    first round so that consecutive stretches meet."""
    out = []
    k = 1
    while k < len(sigma):
        mode = sigma[k]
        z = k
        while z + 1 < len(sigma) and sigma[z + 1] == mode:
            z += 1
        out.append((k - 1, z, mode))
        k = z + 1
    return out


def _switches(sigma) -> list[int]:
    """Indices of the points after which the lane switched from mode 1 to mode 2."""
    return [k - 1 for k in range(2, len(sigma)) if sigma[k] == 2 and sigma[k - 1] == 1]


def _plot_panel(ax, runs, strategy, what, eta, eps, b0):
    many = max((len(_traces(r["rows"], strategy)) for r in runs), default=0) > 12
    for ci, r in enumerate(runs):
        color = _COLORS[ci % len(_COLORS)]
        tr = _traces(r["rows"], strategy)
        if not tr:
            continue
        if many:  # median and inter-quartile band over runs
            K = max(len(t[1]) for t in tr)
            M = np.full((len(tr), K), np.nan)
            for i, t in enumerate(tr):
                y = t[2] if what == "D" else t[3]
                M[i, : len(y)] = y
            with np.errstate(all="ignore"):
                import warnings

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    med, lo, hi = np.nanmedian(M, 0), np.nanpercentile(M, 25, 0), np.nanpercentile(M, 75, 0)
            ax.plot(range(K), med, color=color, lw=1.8, label=f"{r['model']} (median, IQR of {len(tr)} runs)")
            ax.fill_between(range(K), lo, hi, color=color, alpha=0.2, lw=0)
            for _run, ks, D, b, status, sig in tr:  # where each run ended, and where it switched modes
                y = D if what == "D" else b
                if status in _MARK:
                    ax.plot(ks[-1], y[-1], _MARK[status], color=color, ms=5, mec="k", mew=0.4, alpha=0.6)
                for j in _switches(sig):
                    ax.plot(ks[j], y[j], _SWITCH, color=color, ms=9, mec="k", mew=0.5, zorder=5)
        else:
            for i, (_run, ks, D, b, status, sig) in enumerate(tr):
                y = D if what == "D" else b
                one = len(tr) == 1
                lw, alpha = (1.6 if one else 1.2), (0.9 if one else 0.6)
                # one line per stretch of rounds in the same mode: solid mode 1 (complete), dashed mode 2 (ring)
                for a, z, mode in _mode_runs(sig):
                    ax.plot(
                        ks[a : z + 1],
                        y[a : z + 1],
                        "--" if mode == 2 else "-",
                        color=color,
                        lw=lw,
                        alpha=alpha,
                        marker="." if one else None,
                        ms=5,
                    )
                ax.plot(
                    [],
                    [],
                    "-",
                    color=color,
                    lw=lw,
                    label=(r["model"] if one else f"{r['model']} ({len(tr)} runs)") if i == 0 else None,
                )
                if status in _MARK:
                    ax.plot(ks[-1], y[-1], _MARK[status], color=color, ms=8 if one else 6, mec="k", mew=0.6)
                for j in _switches(sig):  # the round after which the policy switched to mode 2 (ring)
                    ax.plot(ks[j], y[j], _SWITCH, color=color, ms=10 if one else 9, mec="k", mew=0.5, zorder=5)
    if what == "D":
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.axhline(eps, color="k", ls=":", lw=1)
        ax.text(
            0.01,
            eps,
            r"$\varepsilon$ (consensus)",
            transform=ax.get_yaxis_transform(),
            ha="left",
            va="bottom",
            fontsize=8,
        )
        if strategy == "adaptive":
            ax.axhline(eta, color="grey", ls="--", lw=1)
            ax.text(
                0.99,
                eta,
                r"$\eta$ (switch)",
                transform=ax.get_yaxis_transform(),
                ha="right",
                va="bottom",
                fontsize=8,
                color="grey",
            )
        ax.set_ylabel("disagreement D(k)")
    else:
        ax.axhline(0, color="k", lw=1)
        ax.set_ylabel("remaining budget $b_k$ (tokens)")
        ax.set_ylim(min(-0.08 * b0, ax.get_ylim()[0]), 1.05 * b0)
        ax.yaxis.set_major_formatter(plt.FuncFormatter(_k_ticks))
    ax.set_xlabel("round k")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # rounds are whole numbers
    ax.grid(alpha=0.3, which="both")


def _mode_names(cfg: dict) -> tuple[str, str]:
    """How the legend names the two modes: the default graphs with their size (complete K_N, ring C_N), or
    W1/W2 when the config gives its own matrices."""
    from mascot.graphs import complete_weights, ring_weights

    n = cfg.get("n_agents") or len(cfg.get("roles") or ()) or 5
    names = []
    for key, build, self_key, name in (
        ("W1", complete_weights, "complete_self", f"complete K{n}"),
        ("W2", ring_weights, "ring_self", f"ring C{n}"),
    ):
        W = cfg.get(key)
        default = W is None or (
            np.shape(W) == (n, n) and np.allclose(W, build(n, cfg.get(self_key, 0.4 if key == "W1" else 0.6)))
        )
        names.append(name if default else key)
    return names[0], names[1]


def fig4(runs: list[dict], out_stem: Path, full: bool = False, note: str = "") -> list[Path]:
    """Fig. 4 (a)-(d) (``full=False``) or D and b for all strategies (``full=True``); ``note``: a second title line."""
    cfg = runs[0]["config"]
    eta, eps, b0 = cfg["eta"], cfg["eps"], cfg["b0"]
    strategies = [s for s in ("adaptive", "complete", "ring") if any(_traces(r["rows"], s) for r in runs)]
    if full:
        fig, axes = plt.subplots(2, len(strategies), figsize=(4.6 * len(strategies), 7.2), squeeze=False)
        for j, s in enumerate(strategies):
            _plot_panel(axes[0, j], runs, s, "D", eta, eps, b0)
            _plot_panel(axes[1, j], runs, s, "b", eta, eps, b0)
            axes[0, j].set_title(f"{s}: disagreement", fontsize=10)
            axes[1, j].set_title(f"{s}: budget", fontsize=10)
    else:
        panels = [
            ("adaptive", "D", "(a) adaptive: disagreement D(k)"),
            ("adaptive", "b", "(b) adaptive: budget $b_k$"),
            ("complete", "b", "(c) complete-only: budget $b_k$"),
            ("ring", "b", "(d) ring-only: budget $b_k$"),
        ]
        fig, axes = plt.subplots(2, 2, figsize=(10, 7.4), squeeze=False)
        for ax, (s, what, title) in zip(axes.ravel(), panels):
            if s in strategies:
                _plot_panel(ax, runs, s, what, eta, eps, b0)
            else:
                ax.text(0.5, 0.5, f"no {s} runs", ha="center", va="center", transform=ax.transAxes)
                ax.set_axis_off()  # no empty 0-1 axes for a strategy that was not run
            ax.set_title(title, fontsize=10)
    handles, labels = [], []
    for ax in np.ravel(axes):
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    from matplotlib.lines import Line2D

    handles += [
        Line2D([], [], ls="-", color="grey", lw=1.4),
        Line2D([], [], ls="--", color="grey", lw=1.4),
        Line2D([], [], ls="none", marker=_SWITCH, color="grey", mec="k", ms=10),
    ]
    m1, m2 = _mode_names(cfg)
    labels += [f"mode 1 rounds ({m1})", f"mode 2 rounds ({m2})", "switch to mode 2 (D <= eta)"]
    handles += [Line2D([], [], ls="none", marker=m, color="grey", mec="k", ms=7) for m in _MARK.values()]
    labels += [k.replace("_", " ") for k in _MARK]
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=8, frameon=False)
    what = (
        "Surrogate deliberation (no LLM)" if all(r.get("backend") == "surrogate" for r in runs) else "LLM deliberation"
    )
    spent = {  # mean tokens spent per run (b0 - the last b_k), every model's runs together
        st: np.mean([b0 - t[3][-1] for r in runs for t in _traces(r["rows"], st)]) for st in strategies
    }
    reached = {  # share of a strategy's runs that ended in consensus
        st: np.mean([t[4] == "consensus" for r in runs for t in _traces(r["rows"], st)]) for st in strategies
    }
    cost = ", ".join(
        f"{st} {_k_tokens(v)}" + ("" if reached[st] == 1 else f" ({100 * reached[st]:.0f}% reached consensus)")
        for st, v in spent.items()
    )
    # "cheapest" only among strategies whose every run reached consensus: a run that stopped early spent less
    done = {st: v for st, v in spent.items() if reached[st] == 1}
    cheapest = f"; cheapest to consensus: {min(done, key=done.get)}" if len(spent) > 1 and done else ""
    fig.suptitle(
        f"{what}: eta = {eta}, eps = {eps}, b0 = {b0:,.0f}\nmean tokens spent per run: {cost}{cheapest}"
        + (f"\n{note}" if note else ""),
        fontsize=11,
    )
    fig.tight_layout(rect=(0, 0.09, 1, 0.95 if note else 0.96))
    return save_figure(fig, out_stem)


def _exclusion_note(excl: list[tuple[str, dict]], included: bool) -> str:
    """The sentence under the estimates: how many rates rest on rounds without any parsed reply, and whether
    they were left out."""
    parts = []
    for model, i in excl:
        parts.append(
            f"{model}: {i['flagged']} of {i['rates']} rates {'flagged' if included else 'excluded'} "
            f"({i['lanes_d0_from_priors']} runs with D(0) from the priors, {i['unanswered_rounds']} later "
            "rounds with no parsed reply)"
        )
    return (
        "Rates that involve a round in which no agent's reply parsed (every vector carried forward; round 0: "
        "the config's priors) are not measurements of the model"
        + (" and are **included** here (include_unanswered). " if included else " and are left out. ")
        + "; ".join(parts)
        + "."
    )


def shadow_monitor(rows: list[dict], warmup: int | None = None) -> pd.DataFrame:
    """Per lane: first round the logged monitor flagged ``b_k < B*_hat(D(k))`` (after warmup) and the outcome."""
    recs = []
    for (s, run), rs in group_lanes(rows).items():
        flag = next((r["round"] for r in rs if (r.get("monitor") or {}).get("flag")), None)
        st = rs[-1].get("status")
        recs.append(
            {
                "strategy": s,
                "run": run,
                "flag_round": flag,
                "status": st,
                "failed": st in ("BudgetFail", "max_rounds"),
                "predicted_fail": flag is not None or st == "predicted_BudgetFail",
            }
        )
    return pd.DataFrame.from_records(recs)


def write_report(dirs, out, note: str = "", include_unanswered: bool = False, paper_example: bool = False) -> dict:
    """Write the deliberation report of run directories ``dirs`` into ``out`` (see the module docstring);
    ``note``: a second title line for the figures; ``paper_example``: also ``claude_example.json``, the paper's
    Claude example recomputed (the paper's studies; a run of one's own has nothing to do with it). Rates
    D(k)/D(k-1) that involve a round without any parsed reply (a D(0) from the priors included) are left out of
    ``estimates`` and ``certificates`` unless ``include_unanswered`` (:func:`rows_for_rates`); ``estimates.md``
    says how many."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs = load_runs(dirs)
    df = table_viii(runs)
    write_csv(df, out / "table_viii.csv", index=False)
    atomic_write_text(
        out / "table_viii.md",
        "Table VIII-style summary (tokens = charged input tokens; D(0) after round 0)\n\n" + _table_md(df),
    )
    est, certs, shadows, excl = [], [], [], []
    for r in runs:
        cfg = r["config"]
        rate_rows, info = rows_for_rates(r["rows"], include_unanswered)
        excl.append((r["model"], info))
        flags = lane_flags(r["rows"])
        for m in mode_statistics(rate_rows):
            est.append({"model": r["model"], **m})
        for c in posthoc_certificates(rate_rows, cfg["eta"], cfg["eps"], cfg["b0"]):
            certs.append(
                {
                    "model": r["model"],
                    **{k: (json.dumps(v) if isinstance(v, list) else v) for k, v in c.items()},
                    "d0_from_priors": flags[(c["strategy"], c["run"])]["d0_from_priors"],
                }
            )
        sh = shadow_monitor(r["rows"])
        sh.insert(0, "model", r["model"])
        shadows.append(sh)
    est_df = pd.DataFrame.from_records(est)
    write_csv(est_df, out / "estimates.csv", index=False)
    lines = []
    if len(est_df):
        lines = [
            "| model | strategy | mode | n | rate mean | geo-mean | std | min | max | share > 1 | cost mean "
            "| cost std |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for _, e in est_df.iterrows():
            lines.append(
                f"| {e['model']} | {e['strategy']} | {e['mode']} | {e['n']} | {e['rate_mean']:.4f} | "
                f"{e['rate_geomean']:.4f} | {e['rate_std']:.4f} | {e['rate_min']:.4f} | {e['rate_max']:.4f} | "
                f"{e['share_expanding']:.3f} | {e['cost_mean']:,.0f} | {e['cost_std']:,.0f} |"
            )
    else:
        lines = ["No empirical contraction rate: no round-to-round rate D(k+1)/D(k) rests on parsed replies."]
    atomic_write_text(
        out / "estimates.md",
        "Per-mode empirical contraction rates D(k+1)/D(k) and round costs\n\n"
        + "\n".join(lines)
        + "\n\n"
        + _exclusion_note(excl, include_unanswered)
        + "\n",
    )
    write_csv(pd.DataFrame.from_records(certs), out / "certificates.csv", index=False)
    write_csv(pd.concat(shadows), out / "monitor_shadow.csv", index=False)
    if paper_example:
        atomic_write_text(out / "claude_example.json", json.dumps(claude_example(), indent=2, default=str) + "\n")
    figs = fig4(runs, out / "fig4", note=note) + fig4(runs, out / "fig4_full", full=True, note=note)
    return {"table": df, "estimates": est_df, "figures": figs}
