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
  lane; ``monitor_shadow.csv``: the logged monitor verdicts vs the outcome; ``claude_example.json``.

:func:`deliberate` runs (or resumes) a deliberation and then writes its report into the run directory.
:func:`monitor_study` scores the online monitor on the JAX surrogate (10^4 noisy runs per setting).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from mascot import papers
from mascot.io import atomic_write_text, write_csv
from mascot.analysis.figures import plt, save_figure
from mascot.protocols.deliberation.config import load_deliberation_config
from mascot.protocols.deliberation.harness import run_deliberation
from mascot.protocols.deliberation.records import (
    claude_example, group_lanes, lane_summaries, mode_statistics, posthoc_certificates, read_rounds,
)
from mascot.protocols.deliberation.surrogate import SurrogateDeliberationBackend

__all__ = ["load_runs", "table_viii", "write_report", "deliberate", "fig4", "monitor_study", "shadow_monitor"]

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
        out.append({"dir": d, "model": _label(meta, d), "config": meta["identity"]["config"], "rows": read_rounds(d)})
    labels = [r["model"] for r in out]
    for r in out:  # disambiguate equal labels
        if labels.count(r["model"]) > 1:
            r["model"] = f"{r['model']} ({r['dir'].name})"
    return out


def table_viii(runs: list[dict]) -> pd.DataFrame:
    recs = []
    for r in runs:
        for s in lane_summaries(r["rows"], r["config"]["b0"]):
            recs.append({"model": r["model"], **s})
    return pd.DataFrame.from_records(recs)


def _fmt_int(x):
    return f"{x:,.0f}" if np.isfinite(x) else "-"


def _table_md(df: pd.DataFrame) -> str:
    cols = []
    for (model, strat), g in df.groupby(["model", "strategy"], sort=False):
        st = g["status"].fillna("running").value_counts()
        status = ", ".join(f"{k} {v}" for k, v in st.items()) if len(g) > 1 else str(g["status"].iloc[0])
        cols.append((f"{model} {strat}", {
            "Rounds": f"{g['rounds'].mean():.1f}" if len(g) > 1 else f"{int(g['rounds'].iloc[0])}",
            "Tokens": _fmt_int(g["tokens"].mean()),
            "D(0)": f"{g['d0'].mean():.4f}",
            "D_final": f"{g['d_final'].mean():.4f}",
            "Status": status,
            "Parse failures": f"{int(g['failures'].sum())}",
            "Parse errors (retried)": f"{int(g['parse_errors'].sum())}",
            "Runs": f"{len(g)}",
        }))
    rows = ["Rounds", "Tokens", "D(0)", "D_final", "Status", "Parse failures", "Parse errors (retried)", "Runs"]
    head = "| | " + " | ".join(c for c, _ in cols) + " |"
    sep = "|---|" + "---|" * len(cols)
    body = ["| " + r + " | " + " | ".join(v[r] for _, v in cols) + " |" for r in rows]
    return "\n".join([head, sep] + body) + "\n"


def _traces(rows, strategy):
    out = []
    for (s, run), rs in group_lanes(rows).items():
        if s == strategy:
            out.append((run, [r["round"] for r in rs], [r["D"] for r in rs], [r["b"] for r in rs], rs[-1].get("status"),
                        [r.get("sigma") for r in rs]))
    return sorted(out)


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
            for run, ks, D, b, status, _ in tr:  # where each run ended
                y = D if what == "D" else b
                if status in _MARK:
                    ax.plot(ks[-1], y[-1], _MARK[status], color=color, ms=5, mec="k", mew=0.4, alpha=0.6)
        else:
            for i, (run, ks, D, b, status, _) in enumerate(tr):
                y = D if what == "D" else b
                one = len(tr) == 1
                ax.plot(ks, y, "-", color=color, lw=1.4 if one else 1.0, alpha=0.9 if one else 0.55,
                        marker="." if one else None, ms=5,
                        label=(r["model"] if one else f"{r['model']} ({len(tr)} runs)") if i == 0 else None)
                if status in _MARK:
                    ax.plot(ks[-1], y[-1], _MARK[status], color=color, ms=8 if one else 6, mec="k", mew=0.6)
    if what == "D":
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.axhline(eps, color="k", ls=":", lw=1)
        ax.text(0.01, eps, r"$\varepsilon$ (consensus)", transform=ax.get_yaxis_transform(), ha="left", va="bottom",
                fontsize=8)
        if strategy == "adaptive":
            ax.axhline(eta, color="grey", ls="--", lw=1)
            ax.text(0.99, eta, r"$\eta$ (switch)", transform=ax.get_yaxis_transform(), ha="right", va="bottom",
                    fontsize=8, color="grey")
        ax.set_ylabel("disagreement D(k)")
    else:
        ax.axhline(0, color="k", lw=1)
        ax.set_ylabel("remaining budget $b_k$ (tokens)")
        ax.set_ylim(min(-0.08 * b0, ax.get_ylim()[0]), 1.05 * b0)
        ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v / 1000:.0f}k"))
    ax.set_xlabel("round k")
    ax.grid(alpha=0.3, which="both")


def fig4(runs: list[dict], out_stem: Path, full: bool = False) -> list[Path]:
    """Fig. 4 (a)-(d) (``full=False``) or D and b for all strategies (``full=True``)."""
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
        panels = [("adaptive", "D", "(a) adaptive: disagreement D(k)"), ("adaptive", "b", "(b) adaptive: budget $b_k$"),
                  ("complete", "b", "(c) complete-only: budget $b_k$"), ("ring", "b", "(d) ring-only: budget $b_k$")]
        fig, axes = plt.subplots(2, 2, figsize=(10, 7.4), squeeze=False)
        for ax, (s, what, title) in zip(axes.ravel(), panels):
            if s in strategies:
                _plot_panel(ax, runs, s, what, eta, eps, b0)
            else:
                ax.text(0.5, 0.5, f"no {s} runs", ha="center", va="center", transform=ax.transAxes)
            ax.set_title(title, fontsize=10)
    handles, labels = [], []
    for ax in np.ravel(axes):
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    from matplotlib.lines import Line2D

    handles += [Line2D([], [], ls="none", marker=m, color="grey", mec="k", ms=7) for m in _MARK.values()]
    labels += [k.replace("_", " ") for k in _MARK]
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 5), fontsize=8, frameon=False)
    fig.suptitle(f"LLM deliberation: eta = {eta}, eps = {eps}, b0 = {b0:,.0f}", fontsize=11)
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    return save_figure(fig, out_stem)


def shadow_monitor(rows: list[dict], warmup: int | None = None) -> pd.DataFrame:
    """Per lane: first round the logged monitor flagged ``b_k < B*_hat(D(k))`` (after warmup) and the outcome."""
    recs = []
    for (s, run), rs in group_lanes(rows).items():
        flag = next((r["round"] for r in rs if (r.get("monitor") or {}).get("flag")), None)
        st = rs[-1].get("status")
        recs.append({"strategy": s, "run": run, "flag_round": flag, "status": st,
                     "failed": st in ("BudgetFail", "max_rounds"), "predicted_fail": flag is not None or
                     st == "predicted_BudgetFail"})
    return pd.DataFrame.from_records(recs)


def write_report(dirs, out) -> dict:
    """Write the deliberation report of run directories ``dirs`` into ``out`` (see the module docstring)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs = load_runs(dirs)
    df = table_viii(runs)
    write_csv(df, out / "table_viii.csv", index=False)
    atomic_write_text(out / "table_viii.md",
        "Table VIII-style summary (tokens = charged input tokens; D(0) after round 0)\n\n" + _table_md(df))
    est, certs, shadows = [], [], []
    for r in runs:
        cfg = r["config"]
        for m in mode_statistics(r["rows"]):
            est.append({"model": r["model"], **m})
        for c in posthoc_certificates(r["rows"], cfg["eta"], cfg["eps"], cfg["b0"]):
            certs.append({"model": r["model"],
                          **{k: (json.dumps(v) if isinstance(v, list) else v) for k, v in c.items()}})
        sh = shadow_monitor(r["rows"])
        sh.insert(0, "model", r["model"])
        shadows.append(sh)
    est_df = pd.DataFrame.from_records(est)
    write_csv(est_df, out / "estimates.csv", index=False)
    if len(est_df):
        lines = ["| model | strategy | mode | n | rate mean | geo-mean | std | min | max | share > 1 | cost mean "
                 "| cost std |",
                 "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for _, e in est_df.iterrows():
            lines.append(f"| {e['model']} | {e['strategy']} | {e['mode']} | {e['n']} | {e['rate_mean']:.4f} | "
                         f"{e['rate_geomean']:.4f} | {e['rate_std']:.4f} | {e['rate_min']:.4f} | {e['rate_max']:.4f} | "
                         f"{e['share_expanding']:.3f} | {e['cost_mean']:,.0f} | {e['cost_std']:,.0f} |")
        atomic_write_text(out / "estimates.md", "Per-mode empirical contraction rates D(k+1)/D(k) and round costs\n\n"
                                          + "\n".join(lines) + "\n")
    write_csv(pd.DataFrame.from_records(certs), out / "certificates.csv", index=False)
    write_csv(pd.concat(shadows), out / "monitor_shadow.csv", index=False)
    atomic_write_text(out / "claude_example.json", json.dumps(claude_example(), indent=2, default=str) + "\n")
    figs = fig4(runs, out / "fig4") + fig4(runs, out / "fig4_full", full=True)
    return {"table": df, "estimates": est_df, "figures": figs}


def deliberate(config, out, backend, *, report: bool = True, **kwargs):
    """:func:`mascot.protocols.deliberation.run_deliberation` (same arguments; ``kwargs``: backend_spec,
    progress, command), then, with ``report``, :func:`write_report` of the run directory into itself.
    Returns the :class:`~mascot.protocols.deliberation.DeliberationRun`."""
    res = run_deliberation(config, out, backend, **kwargs)
    if report:
        write_report([res.out], res.out)
    return res


# ----------------------------------------------------------------------------- monitor study (JAX surrogate)
def monitor_study(out=None, runs: int = 10_000, b0s=(80_000.0, 100_000.0, 120_000.0), seed: int = 0,
                  scenarios: dict | None = None, warmup: int = 2, max_rounds: int = 40) -> pd.DataFrame:
    """Score the online monitor on noisy surrogate runs (:func:`mascot.kernels.deliberation.simulate_deliberation`).

    Every run is simulated to its natural end (the monitor in shadow mode); the monitor's verdict is
    "predicted BudgetFail" if it flagged any round ``k >= warmup``. Against the actual outcome (fail =
    BudgetFail or max_rounds) this gives precision (how often a stop would have been right), recall, accuracy,
    the tokens a stop would have saved on true failures, and the successes a stop would have killed.
    ``runs`` runs per (scenario, strategy), split evenly over ``b0s``.
    """
    from mascot.graphs import complete_weights, ring_weights
    from mascot.kernels.deliberation import CLAUDE_CALIBRATION, STATUS_NAMES, initial_beliefs, simulate_deliberation
    from mascot.kernels.precision import x64_enabled

    cal = CLAUDE_CALIBRATION
    W1, W2 = complete_weights(5, cal["complete_self"]), ring_weights(5, cal["ring_self"])
    prior = np.array([r["prior"] for r in papers.DELIBERATION_ROLES])
    if scenarios is None:
        scenarios = {
            "claude-calibrated, noise 0.005, cost noise 10%": dict(noise=0.005, cost_noise=0.10),
            "noisier: noise 0.01, cost noise 25%": dict(noise=0.01, cost_noise=0.25),
            "GPT-like expansion near consensus (a1 = 0.4 below D = 0.15)": dict(noise=0.005, cost_noise=0.10,
                                                                                expand=(0.4, 0.0), d_expand=0.15),
        }
    X0 = np.asarray(initial_beliefs(seed, runs, prior, 0.05), dtype=np.float64)
    b0 = np.repeat(np.asarray(b0s, dtype=np.float64), -(-runs // len(b0s)))[:runs]
    recs = []
    for si, (sname, kw) in enumerate(scenarios.items()):
        for strategy in ("adaptive", "complete", "ring"):
            for ceil in (True, False):
                res = simulate_deliberation(seed + 100 + si, X0, W1, W2, strategy=strategy, b0=b0,
                                            max_rounds=max_rounds, cost_base=cal["cost_base"],
                                            cost_per_neighbor=cal["cost_per_neighbor"], warmup=warmup,
                                            monitor_ceil=ceil, dtype="float64" if x64_enabled() else "float32",
                                            **kw)
                failed = np.isin(res.status, (1, 2))
                flagged = res.monitor_round >= 0
                for bv in b0s:
                    m = b0 == bv
                    f, p = failed[m], flagged[m]
                    tp, fp = int(np.sum(f & p)), int(np.sum(~f & p))
                    fn, tn = int(np.sum(f & ~p)), int(np.sum(~f & ~p))
                    idx = np.nonzero(m & flagged & failed)[0]
                    b_at = res.b_trace[idx, res.monitor_round[idx]]
                    saved = float(np.mean(b_at - res.b_trace[idx, res.rounds[idx]])) if idx.size else math.nan
                    recs.append({"scenario": sname, "strategy": strategy, "b0": bv,
                                 "monitor": "B* (Thm 1, ceil)" if ceil else "point estimate (no ceil)",
                                 "runs": int(m.sum()), "fail_rate": float(f.mean()), "flag_rate": float(p.mean()),
                                 "precision": tp / (tp + fp) if tp + fp else math.nan,
                                 "recall": tp / (tp + fn) if tp + fn else math.nan,
                                 "accuracy": (tp + tn) / m.sum(), "tp": tp, "fp": fp, "fn": fn, "tn": tn,
                                 "tokens_saved_per_true_stop": saved,
                                 "mean_rounds": float(res.rounds[m].mean()), "mean_spent": float(res.spent[m].mean()),
                                 "status_counts": json.dumps({STATUS_NAMES[s]: int(np.sum(res.status[m] == s))
                                                              for s in range(4) if np.any(res.status[m] == s)})})
    df = pd.DataFrame.from_records(recs)
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        write_csv(df, out / "monitor_accuracy.csv", index=False)
        lines = ["| scenario | strategy | b0 | monitor | fail rate | flag rate | precision | recall | accuracy | "
                 "tokens saved / true stop |", "|---|---|---|---|---|---|---|---|---|---|"]
        for _, r in df.iterrows():
            fmt = lambda x: "-" if not np.isfinite(x) else f"{x:.3f}"  # noqa: E731
            saved = r["tokens_saved_per_true_stop"]
            lines.append(f"| {r['scenario']} | {r['strategy']} | {r['b0']:,.0f} | {r['monitor']} | "
                         f"{r['fail_rate']:.3f} | {r['flag_rate']:.3f} | {fmt(r['precision'])} | {fmt(r['recall'])} | "
                         f"{r['accuracy']:.3f} | {'-' if not np.isfinite(saved) else _fmt_int(saved)} |")
        atomic_write_text(out / "monitor_accuracy.md",
            f"Online monitor on the JAX surrogate ({runs:,} runs per scenario and strategy, split over b0; "
            f"warmup {warmup} rounds; Claude-calibrated modes and costs)\n\n" + "\n".join(lines) + "\n")
    return df


def _shadow_scores(df: pd.DataFrame) -> dict:
    f, p = df["failed"].to_numpy(bool), df["predicted_fail"].to_numpy(bool)
    tp, fp, fn, tn = int(np.sum(f & p)), int(np.sum(~f & p)), int(np.sum(f & ~p)), int(np.sum(~f & ~p))
    return {"lanes": len(df), "failed": int(f.sum()), "flagged": int(p.sum()), "tp": tp, "fp": fp, "fn": fn, "tn": tn,
            "precision": tp / (tp + fp) if tp + fp else math.nan, "recall": tp / (tp + fn) if tp + fn else math.nan,
            "accuracy": (tp + tn) / len(df) if len(df) else math.nan}


def reproduce(out="results/deliberation", runs_dir="runs/deliberation-reproduce", runs: int = 10,
              b0s=(100_000.0, 32_000.0), study_runs: int = 9_999, progress: bool = True) -> dict:
    """Surrogate reproduction of Sec. V-C: the text harness with :class:`SurrogateDeliberationBackend` on the
    paper's scenario (``runs`` runs per strategy, for each ``b0``; run directories under ``runs_dir``),
    Table VIII / Fig. 4 / estimates / certificates per ``b0`` into ``out/surrogate_b<b0>``, the logged (shadow)
    monitor verdicts scored against the outcomes, the JAX monitor study and the Claude example.

    Runs in float64 (:func:`mascot.kernels.precision.float64`, this thread only): the monitor study's kernel
    runs in float64 whatever the caller's JAX setting."""
    from mascot.kernels.precision import float64

    with float64():
        return _reproduce(Path(out), Path(runs_dir), runs, b0s, study_runs, progress)


def _reproduce(out: Path, runs_dir: Path, runs: int, b0s, study_runs: int, progress: bool) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"claude_example": claude_example(), "text_harness": {}}
    shadows = []
    for b0 in b0s:
        cfg, sur = load_deliberation_config(None, {"runs": runs, "b0": b0})
        be = SurrogateDeliberationBackend(**sur)
        tag = f"surrogate_b{int(b0) // 1000}k"
        run_deliberation(cfg, runs_dir / tag, be, progress=progress)
        rep = write_report([runs_dir / tag], out / tag)
        sh = shadow_monitor(load_runs([runs_dir / tag])[0]["rows"])
        sh.insert(0, "b0", b0)
        shadows.append(sh)
        t = rep["table"]
        summary["text_harness"][tag] = {
            s: {"rounds_mean": float(g["rounds"].mean()), "tokens_mean": float(g["tokens"].mean()),
                "d0_mean": float(g["d0"].mean()), "d_final_mean": float(g["d_final"].mean()),
                "status": g["status"].value_counts().to_dict(), "parse_failures": int(g["failures"].sum()),
                "parse_errors": int(g["parse_errors"].sum())}
            for s, g in t.groupby("strategy", sort=False)}
        # every request of the run, from its log (not the run's return value: a resumed run makes none)
        log = runs_dir / tag / "requests.jsonl"
        summary["text_harness"][tag]["requests"] = sum(1 for _ in open(log)) if log.exists() else 0
    sh = pd.concat(shadows)
    write_csv(sh, out / "monitor_shadow_text_harness.csv", index=False)
    summary["text_harness_monitor"] = {"all": _shadow_scores(sh)} | {
        f"{s}": _shadow_scores(g) for s, g in sh.groupby("strategy", sort=False)}
    study = monitor_study(out, runs=study_runs)
    summary["monitor_study_rows"] = len(study)
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=2, default=str) + "\n")
    return summary
