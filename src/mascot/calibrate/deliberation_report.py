"""The report of a deliberation calibration (:func:`mascot.calibrate.deliberation.calibrate_deliberation`):
``report.md`` (every number formatted from ``fit.json``), ``fit.png`` (observed vs predicted rounds and tokens
per strategy), ``dcurve.png`` (the adaptive strategy's two-stage D(k) and spend, as Fig. 4(a)-(b)) and, for run
directories, ``rates.png`` (per-round log contraction ratios against log D with the fitted rate laws)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from mascot.errors import InputError
from mascot.io import atomic_path, atomic_write_text
from mascot.protocols.deliberation.config import STRATEGIES
from mascot.protocols.deliberation.surrogate import RateLawParams

__all__ = ["write_report", "write_paper_summary"]

_COLORS = {"adaptive": "tab:blue", "complete": "tab:red", "ring": "tab:green"}


def _save(fig, stem: Path) -> list[str]:
    import matplotlib.pyplot as plt

    out = []
    for ext in ("png", "pdf"):
        p = stem.with_suffix("." + ext)
        with atomic_path(p) as tmp:
            fig.savefig(
                tmp, dpi=150, bbox_inches="tight", format=ext, metadata={"CreationDate": None} if ext == "pdf" else {}
            )
        out.append(p.name)
    plt.close(fig)
    return out


def _obs(result: dict) -> dict:
    return dict(zip(result["moments"]["names"], result["moments"]["observed"]))


def _fig_fit(result: dict, out: Path) -> list[str]:
    import matplotlib.pyplot as plt

    obs, pred = _obs(result), result["predicted_all"]
    strategies = result["settings"]["strategies"]
    harness = result.get("harness")
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    x = np.arange(len(strategies))
    src = "Table VIII" if result["source"]["kind"] == "paper" else "run directory (mean)"
    for ax, key, scale, label in ((axes[0], "rounds", 1.0, "rounds"), (axes[1], "tokens", 1000.0, "tokens")):
        o = [obs.get(f"{key}:{s}", math.nan) * scale for s in strategies]
        p = [pred[f"{key}:{s}"] * scale for s in strategies]
        w = 0.27 if harness else 0.38
        ax.bar(x - w, o, w, color="0.35", label=f"{src}: the fit's targets")
        ax.bar(x, p, w, color="tab:orange", label="fitted JAX simulator (256 runs)")
        if harness:
            hm = [np.mean([ln[key] for ln in harness["lanes"] if ln["strategy"] == s]) for s in strategies]
            hs = [np.std([ln[key] for ln in harness["lanes"] if ln["strategy"] == s], ddof=1) for s in strategies]
            n = len(harness["lanes"]) // len(strategies)
            ax.bar(x + w, hm, w, yerr=hs, capsize=3, color="tab:purple", label=f"text harness ({n} runs, +-sd)")
            for xi, oi in zip(x, o):
                ax.plot([xi - 1.5 * w, xi + 1.5 * w], [0.75 * oi] * 2, color="k", lw=0.6, ls=":")
                ax.plot([xi - 1.5 * w, xi + 1.5 * w], [1.25 * oi] * 2, color="k", lw=0.6, ls=":")
        ax.set_xticks(x, strategies)
        ax.set_ylabel(label)
        if key == "tokens":
            ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v / 1000:.0f}k"))
    axes[0].legend(fontsize=7, loc="upper left")
    if harness:
        axes[1].text(
            0.99,
            0.99,
            "dotted: +-25 % of the observed value",
            transform=axes[1].transAxes,
            ha="right",
            va="top",
            fontsize=7,
        )
    fig.suptitle(f"In sample (fitted to these numbers, not a test of prediction): {_title(result)}", fontsize=10)
    fig.tight_layout()
    return _save(fig, out / "fit")


def _title(result: dict) -> str:
    s = result["source"]
    return f"Table VIII, {s['name']}" if s["kind"] == "paper" else f"{s['runs']} runs from {len(s['run_dirs'])} dir(s)"


def _fig_dcurve(result: dict, out: Path, traces: dict) -> list[str]:
    import matplotlib.pyplot as plt

    st = result["settings"]
    if "adaptive" not in st["strategies"]:
        return []
    i = st["strategies"].index("adaptive")
    D = np.asarray(traces["D"])[i]  # (R, K + 1)
    C = np.asarray(traces["cost"])[i]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.4))
    K = D.shape[1]
    ks = np.arange(K)
    alive = np.isfinite(D).sum(axis=0) >= max(3, D.shape[0] // 4)
    logD = np.log(D[:, alive])
    med = np.nanmedian(logD, axis=0)
    lo, hi = np.nanpercentile(logD, 10, axis=0), np.nanpercentile(logD, 90, axis=0)
    a.fill_between(ks[alive], np.exp(lo), np.exp(hi), color="tab:orange", alpha=0.25, label="JAX simulator 10-90 %")
    a.plot(ks[alive], np.exp(med), color="tab:orange", lw=2, label="JAX simulator median")
    spent = np.concatenate([np.zeros((C.shape[0], 1)), np.nancumsum(C, axis=1)], axis=1)
    spent = np.where(np.isfinite(D), spent, np.nan)
    b.plot(ks[alive], np.nanmedian(spent[:, alive], axis=0), color="tab:orange", lw=2, label="JAX simulator median")
    harness = result.get("harness")
    if harness:
        first = True
        for ln in harness["lanes"]:
            if ln["strategy"] != "adaptive":
                continue
            d = np.asarray(ln["D"])
            sg = np.asarray(ln["sigma"])
            cum = np.concatenate([[0.0], np.cumsum(ln["cost"])])
            for m, col in ((1, "tab:red"), (2, "tab:green")):
                for j in np.flatnonzero(sg == m):
                    a.plot([j, j + 1], d[j : j + 2], color=col, lw=0.8, alpha=0.7)
                    b.plot([j, j + 1], cum[j : j + 2], color=col, lw=0.8, alpha=0.7)
            if first:
                a.plot([], [], color="tab:red", lw=0.8, label="text harness, mode 1 (complete) rounds")
                a.plot([], [], color="tab:green", lw=0.8, label="text harness, mode 2 (ring) rounds")
                first = False
    obs = _obs(result)
    if result["source"]["kind"] == "paper":
        r = obs["rounds:adaptive"]
        a.plot([0, r], [obs["d0:adaptive"], obs["d_final:adaptive"]], "ks", ms=6, label="Table VIII D(0), D_final")
        a.axvline(obs["switch"], color="k", lw=0.8, ls="-.", label=f"paper's switch (round {obs['switch']:.0f})")
        b.plot([r], [obs["tokens:adaptive"] * 1000], "ks", ms=6, label="Table VIII tokens")
    a.axhline(st["eta"], color="grey", ls="--", lw=1)
    a.axhline(st["eps"], color="k", ls=":", lw=1)
    a.text(
        0.99, st["eta"], r"$\eta$", va="bottom", ha="right", fontsize=8, color="grey", transform=a.get_yaxis_transform()
    )
    a.text(0.99, st["eps"], r"$\varepsilon$", va="bottom", ha="right", fontsize=8, transform=a.get_yaxis_transform())
    a.set_yscale("log")
    a.set_xlabel("round k")
    a.set_ylabel("D(k)")
    a.set_title("(a) adaptive: disagreement", fontsize=9)
    b.axhline(st["b0"], color="k", ls=":", lw=1)
    b.set_xlabel("round k")
    b.set_ylabel("tokens spent (scaled)")
    b.set_title("(b) adaptive: spend", fontsize=9)
    last = int(np.max(np.flatnonzero(alive))) + 2 if alive.any() else K
    if harness:
        last = max(last, max(ln["rounds"] for ln in harness["lanes"] if ln["strategy"] == "adaptive") + 1)
    for ax in (a, b):
        ax.set_xlim(-0.3, last)
    a.legend(fontsize=6.5, loc="upper right")
    b.legend(fontsize=6.5, loc="upper left")
    fig.suptitle(f"Two-stage adaptive deliberation (cf. Fig. 4(a)-(b)): {_title(result)}", fontsize=10)
    fig.tight_layout()
    return _save(fig, out / "dcurve")


def _fig_rates(result: dict, out: Path, obs_traces: dict) -> list[str]:
    import matplotlib.pyplot as plt

    est = result["estimate"]
    p = RateLawParams(**{**result["fixed"], **est})
    D = np.asarray(obs_traces["D"])
    sig = np.asarray(obs_traces["sigma"])
    prev, cur = D[..., :-1], D[..., 1:]
    ok = np.isfinite(prev) & np.isfinite(cur) & (prev > 0)
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    xs = np.geomspace(max(np.nanmin(prev[ok]), 1e-3), np.nanmax(prev[ok]), 100)
    for m, col in ((1, "tab:red"), (2, "tab:green")):
        sel = ok & (sig == m) & (cur > 0)
        ax.scatter(prev[sel], cur[sel] / prev[sel], s=6, alpha=0.35, color=col, label=f"observed, mode {m}")
        zero = ok & (sig == m) & (cur == 0)  # rounds into exact agreement: no log-rate, left out of the fit
        if zero.any():
            ax.scatter(
                prev[zero],
                np.zeros(int(zero.sum())),
                s=14,
                marker="x",
                color=col,
                label=f"mode {m} into D = 0 ({int(zero.sum())}; not fitted)",
            )
        rate, slope = (p.rate1, p.slope1) if m == 1 else (p.rate2, p.slope2)
        lam = np.clip(rate * (xs / p.d_ref) ** slope, p.rate_min, p.rate_max)
        ax.plot(xs, lam, color=col, lw=2, label=f"fitted lambda_{m}(D) (slowest direction)")
    ax.axhline(1.0, color="k", lw=0.6, ls=":")
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("D(k-1)")
    ax.set_ylabel("D(k) / D(k-1)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2)
    ax.set_title("Per-round contraction vs the fitted rate laws", fontsize=9)
    fig.tight_layout()
    return _save(fig, out / "rates")


def format_number(v: float) -> str:
    a = abs(v)
    return f"{v:,.0f}" if a >= 100 else f"{v:.3f}" if a >= 0.1 or a == 0 else f"{v:.4f}"


def write_report(result: dict, out, *, traces: dict, obs_traces: dict | None = None) -> list[str]:
    """Write ``report.md`` and the figures for a :func:`calibrate_deliberation` result; returns the file names."""
    out = Path(out)
    files = _fig_fit(result, out) + _fig_dcurve(result, out, traces)
    if obs_traces is not None:
        files += _fig_rates(result, out, obs_traces)
    src = result["source"]
    meaning = RateLawParams.describe_keys()
    L = [f"# Deliberation surrogate fitted to {_title(result)}", ""]
    if src["kind"] == "paper":
        L.append(
            f"Fitted to the {src['name']} column of the consensus paper's Table VIII and the Fig. 4 text "
            f"(token scale x{result['settings']['token_scale']:g}, eta = {result['settings']['eta']:g}, "
            f"eps = {result['settings']['eps']:g}, b0 = {result['settings']['b0']:,.0f}). **In sample:** the "
            "comparisons below are with the numbers the fit was made to match; the out-of-sample test (fit the "
            "complete-only and ring-only columns, predict the adaptive one) is `mascot calibrate deliberation "
            "--paper-table8 all --hold-out adaptive` (`results/calibration/deliberation/holdout/`)."
        )
    else:
        L.append(f"Fitted to {src['runs']} runs per strategy from {', '.join(src['run_dirs'])}.")
    n_mom = len(result["moments"]["names"])
    L += [
        "",
        f"Family `rate_law` ({len(result['fitted'])} fitted parameters, {n_mom} moments): "
        f"simulated method of moments with optax Adam and evolution-strategies gradients, common random numbers, "
        f"{result['sim_runs']} simulated runs per strategy per evaluation, {result['steps']} + "
        f"{result['steps'] // 2} steps (loss {result['loss_es']:.4g}), then Gauss-Newton on 256 runs per strategy "
        f"(final loss {result['loss']:.4g}); fit {result['fit_wall_s']:.0f} s, "
        f"bootstrap ({result['n_boot']} replicates) {result['boot_wall_s']:.0f} s.",
        f"Uncertainty: {result['uncertainty_method']}.",
        *(
            ["", "**A quick fit (`--quick`, a smoke test): fewer steps and simulated runs; not for results.**"]
            if result.get("quick")
            else []
        ),
        *(
            [
                f"**{result['n_boot']} bootstrap replicates only: the s.d.s and intervals below are rough (use --n-boot "
                "200).**"
            ]
            if 0 < result["n_boot"] < 30
            else []
        ),  # (2 replicates gave "95 % intervals": a tester)
        "",
        "| parameter | estimate | bootstrap sd | 95 % interval (+-1.96 sd, within the parameter's range) | meaning |",
        "|---|---|---|---|---|",
    ]
    for k in result["fitted"]:
        e, s = result["estimate"][k], result["sd"][k]
        lo, hi = result["ci95"][k]
        L.append(
            f"| {k} | {format_number(e)} | {format_number(s)} | [{format_number(lo)}, {format_number(hi)}] | {meaning[k]} |"
        )
    fx = ", ".join(f"{k} = {v:g}" for k, v in result["fixed"].items())
    L += [
        "",
        f"Fixed: {fx}.",
        "",
        "## Observed vs fitted moments (in sample; JAX simulator, 256 fresh runs per strategy)",
        "",
        "| moment | observed | predicted | weight |",
        "|---|---|---|---|",
    ]
    for n, o, p, w in zip(
        result["moments"]["names"],
        result["moments"]["observed"],
        result["moments"]["predicted"],
        result["moments"]["weights"],
    ):
        L.append(f"| {n} | {format_number(o)} | {format_number(p)} | {w:.3g} |")
    crit = result.get("criteria")
    if crit:
        h = result["harness"]
        n = len(h["lanes"]) // len(STRATEGIES)
        L += [
            "",
            "## The fit replayed through the real text harness (in sample)",
            "",
            f"`run_deliberation` with `SurrogateDeliberationBackend.from_params(params.toml)`, seeds "
            f"{', '.join(map(str, h['seeds']))} x {h['runs_per_seed']} runs = {n} runs per strategy, the paper's "
            f"settings ({h['wall_s']:.1f} s).",
            "",
            "| strategy | paper rounds | harness rounds (mean +- sd) | rel. error | paper tokens | harness tokens "
            "(mean +- sd) | rel. error | status |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for s, v in crit["per_strategy"].items():
            stat = ", ".join(f"{k} {c}" for k, c in v["status"].items())
            L.append(
                f"| {s} | {v['paper_rounds']} | {v['rounds']:.1f} +- {v['rounds_sd']:.1f} | "
                f"{100 * v['rounds_rel']:+.0f} % | {v['paper_tokens']:,} | {v['tokens']:,.0f} +- "
                f"{v['tokens_sd']:,.0f} | {100 * v['tokens_rel']:+.0f} % | {stat} |"
            )
        worst = max(max(abs(v["rounds_rel"]), abs(v["tokens_rel"])) for v in crit["per_strategy"].values())
        L += [
            "",
            f"- Mean rounds and tokens within {100 * crit['tol']:.0f} % of Table VIII for every strategy: "
            f"**{'yes' if crit['within_tol'] else 'no'}** (largest relative error {100 * worst:.0f} %).",
            f"- Ranking by tokens (cheapest first): harness {' < '.join(crit['rank_tokens'])}, paper "
            f"{' < '.join(crit['paper_rank_tokens'])}: **{'same' if crit['ranking_tokens_ok'] else 'different'}**.",
            f"- Ranking by rounds (fewest first): harness {' < '.join(crit['rank_rounds'])}, paper "
            f"{' < '.join(crit['paper_rank_rounds'])}: **{'same' if crit['ranking_rounds_ok'] else 'different'}**.",
            f"- Adaptive switching round (first k with D(k) <= eta): harness mean {crit['switch_mean']:.2f}, paper "
            f"{crit['switch_paper']} (within one round: **{'yes' if crit['switch_ok'] else 'no'}**).",
            "- Runs in which D rose in some round (the paper reports rises only for GPT's complete-only run, "
            "after rounds 7 and 9): "
            + ", ".join(f"{s} {v:.2f}" for s, v in d_rise_shares(h["lanes"]).items())
            + " of the replayed runs.",
        ]
        if crit["log_rate_mode1"] is not None and crit["log_rate_mode2"] is not None:
            L.append(
                f"- Two-stage D curve: mean per-round rate of the adaptive runs "
                f"{math.exp(crit['log_rate_mode1']):.3f} in mode 1 (complete) vs "
                f"{math.exp(crit['log_rate_mode2']):.3f} in mode 2 (ring): "
                f"**{'steep then gentle' if crit['two_stage_ok'] else 'not two-stage'}**."
            )
    L += ["", "Figures: " + ", ".join(f"`{f}`" for f in files if f.endswith(".png")) + ".", ""]
    atomic_write_text(out / "report.md", "\n".join(L))
    return files + ["report.md"]


def d_rise_shares(lanes: list[dict]) -> dict:
    """Per strategy, the share of runs whose disagreement D rose in at least one round (``D[k+1] > D[k]``)."""
    out = {}
    for s in STRATEGIES:
        runs = [x["D"] for x in lanes if x["strategy"] == s]
        if runs:
            out[s] = float(np.mean([any(b > a for a, b in zip(d, d[1:])) for d in runs]))
    return out


def write_paper_summary(root, models=("gpt", "gemini", "claude")) -> Path:
    """``root/README.md``: one table over the Table VIII fits in ``root/<model>/fit.json`` (numbers from the files)."""
    import json

    root = Path(root)
    rows = {m: json.loads((root / m / "fit.json").read_text()) for m in models if (root / m / "fit.json").exists()}
    if not rows:
        raise InputError(f"{root}: no <model>/fit.json to summarise")
    L = [
        "# Deliberation surrogates fitted to Table VIII (consensus paper, Sec. V-C)",
        "",
        "**In sample:** each model's rate laws were fitted to its Table VIII column, and the tables below compare "
        "a replay with the same numbers; agreement here shows the fit survives the real text harness, not that "
        "it predicts. Out of sample (`holdout/`, `mascot calibrate deliberation --paper-table8 all --hold-out "
        "adaptive`): fitted to the complete-only and ring-only columns, predicting the adaptive column.",
        "",
        "Written by `mascot.calibrate.deliberation.reproduce_paper_fits`; each directory holds `params.toml` "
        "(`SurrogateDeliberationBackend.from_params`), `fit.json`, `report.md`, `fit.png` and `dcurve.png`. "
        "Estimates +- parametric-bootstrap sd.",
        "",
        "| model | token scale | rate1 | slope1 | rate2 | slope2 | reply_chars1 | reply_chars2 | round_noise |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows.values():
        e, sd = r["estimate"], r["sd"]
        cells = [
            f"{format_number(e[k])} +- {format_number(sd[k])}"
            for k in ("rate1", "slope1", "rate2", "slope2", "reply_chars1", "reply_chars2", "round_noise")
        ]
        L.append(f"| {r['source']['name']} | x{r['settings']['token_scale']:g} | " + " | ".join(cells) + " |")
    L += [
        "",
        "Replayed through the real text harness (`run_deliberation`, "
        "`SurrogateDeliberationBackend.from_params`), mean over the runs vs Table VIII:",
        "",
        "| model | strategy | rounds (paper) | rounds (harness) | tokens (paper) | tokens (harness) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows.values():
        for s, v in r["criteria"]["per_strategy"].items():
            L.append(
                f"| {r['source']['name']} | {s} | {v['paper_rounds']} | {v['rounds']:.1f} ({100 * v['rounds_rel']:+.0f} %) | "
                f"{v['paper_tokens']:,} | {v['tokens']:,.0f} ({100 * v['tokens_rel']:+.0f} %) |"
            )
    L += [
        "",
        "| model | all within 25 % | token ranking as paper | round ranking as paper | switch round (paper) | "
        "mode-1 / mode-2 rate (adaptive) |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows.values():
        c = r["criteria"]
        L.append(
            f"| {r['source']['name']} | {'yes' if c['within_tol'] else 'no'} | "
            f"{'yes' if c['ranking_tokens_ok'] else 'no'} ({' < '.join(c['rank_tokens'])}) | "
            f"{'yes' if c['ranking_rounds_ok'] else 'no'} ({' < '.join(c['rank_rounds'])}) | "
            f"{c['switch_mean']:.2f} ({c['switch_paper']}) | "
            f"{math.exp(c['log_rate_mode1']):.3f} / {math.exp(c['log_rate_mode2']):.3f} |"
        )
    L += [
        "",
        "Runs in which D rose in some round, replayed (the paper reports rises only for GPT's complete-only run):",
        "",
        "| model | " + " | ".join(STRATEGIES) + " |",
        "|---|" + "---|" * len(STRATEGIES),
    ]
    for r in rows.values():
        sh = d_rise_shares(r["harness"]["lanes"])
        L.append(f"| {r['source']['name']} | " + " | ".join(f"{sh.get(s, math.nan):.2f}" for s in STRATEGIES) + " |")
    hold = root / "holdout" / "holdout.json"
    if hold.exists():
        hs = json.loads(hold.read_text())
        L += [
            "",
            f"Out of sample (`holdout/holdout.md`): {sum(h['inside'] for h in hs)} of {sum(h['n'] for h in hs)} "
            "held-out adaptive-column values inside their 95% predictive intervals.",
        ]
    L.append("")
    atomic_write_text(root / "README.md", "\n".join(L))
    return root / "README.md"
