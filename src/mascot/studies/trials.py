"""The SR paper's state-tracking study (Sec. 4-5, Table 2, Figs 2-6) on the surrogate agents, for ``mascot
reproduce all``: 100 trials per topology run through the real harness with paired and with independent
perturbation seeds, their baselines, the reports (:mod:`mascot.analysis.trials_report`) and a README saying
which of the paper's orderings the surrogate reproduces (:func:`reproduce`, into ``results/trials/``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mascot.analysis.trials_report import (
    METRICS,
    TOPOLOGY_ORDER,
    format_number,
    format_p,
    nanify,
    ordering,
    state_text,
    write_report,
)
from mascot.io import atomic_write_text


def _pairs(ours: dict, paper: dict, ci: dict) -> list[tuple[str, bool, bool]]:
    """Per topology pair: (``"a vs b"``, same sign of the difference as the paper's, our 95% CIs disjoint)."""
    out = []
    for i, a in enumerate(TOPOLOGY_ORDER):
        for b in TOPOLOGY_ORDER[i + 1 :]:
            same = np.sign(ours[a] - ours[b]) == np.sign(paper[a] - paper[b])
            (la, ha), (lb, hb) = ci[a], ci[b]
            out.append((f"{a} vs {b}", bool(same), bool(ha < lb or hb < la)))
    return out


def ordering_findings(stats: dict) -> list[dict]:
    """Per metric: the paper's and the run's orderings of the topology means, whether each pair is ordered
    as in the paper (and separated by non-overlapping 95% bootstrap CIs), r_s and Kruskal-Wallis beside the
    paper's, and how many topology means fall within one paper s.d. of the paper's mean."""
    from mascot.papers import SR_TABLE2 as TABLE2_PAPER

    paper_stats = {"E_ceg": (58.02, -1.00), "R_cdr": (188.68, 0.50), "F_ps": (29.03, 1.00)}
    out = []
    for m in METRICS:
        e = stats["metrics"][m]
        ours = {t: e["mean"][t] for t in TOPOLOGY_ORDER}
        paper = {t: TABLE2_PAPER[m][t][0] for t in TOPOLOGY_ORDER}
        pairs = _pairs(ours, paper, e["ci95"])
        within = [t for t in TOPOLOGY_ORDER if abs(ours[t] - paper[t]) <= TABLE2_PAPER[m][t][1]]
        out.append(
            {
                "metric": m,
                "paper_order": ordering(paper),
                "our_order": ordering(ours),
                "reproduced": all(p[1] for p in pairs),
                "pairs": pairs,
                "within_paper_sd": within,
                "H": e["H"],
                "p": e["p"],
                "r_s": e["r_s"],
                "paper_H": paper_stats[m][0],
                "paper_r_s": paper_stats[m][1],
                "r_s_paper_means": stats["r_s_of_paper_means"][m],
            }
        )
    return out


def _p_text(p) -> str:
    t = format_p(p)
    return f"p {t[0]} {t[1:]}" if t.startswith("<") else f"p = {t}"


def _findings_md(stats: dict, title: str) -> list[str]:
    lines = [
        f"### {title}",
        "",
        "| metric | paper's ordering | surrogate's ordering | reproduced? | pairs as in the paper | "
        "pairs separated (95% CIs disjoint) | means within 1 paper s.d. | H (paper) | p | r_s (paper) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in ordering_findings(stats):
        agree = ", ".join(n for n, same, _ in f["pairs"] if same) or "none"
        sep = ", ".join(n for n, _, d in f["pairs"] if d) or "none"
        lines.append(
            f"| {f['metric']} | {f['paper_order']} | {f['our_order']} | "
            f"{'**yes**' if f['reproduced'] else '**no**'} | {agree} | {sep} | "
            f"{', '.join(f['within_paper_sd']) or 'none'} | {format_number(f['H'])} ({f['paper_H']:.2f}) | "
            f"{format_p(f['p'])} | {format_number(f['r_s'])} ({f['paper_r_s']:+.2f}) |"
        )
    lines.append("")
    return lines


def _readme(stats: dict, stats_unpaired: dict | None, n_trials: int, surrogate: dict) -> str:
    from mascot.papers import SR_TABLE2 as TABLE2_PAPER

    fs = ordering_findings(stats)
    yes = [f["metric"] for f in fs if f["reproduced"]]
    no = [f["metric"] for f in fs if not f["reproduced"]]
    state = state_text(stats["initial_state"])
    lines = [
        "# SR paper, Table 2 and Figs 2-6, on the surrogate backend",
        "",
        "Written by `mascot reproduce all` (`mascot.analysis.trials_report.reproduce`); every number and verdict "
        "below is computed from the run it describes. The run: the state-tracking trial harness "
        "(`mascot.protocols.state_tracking`, the same code and prompts that drive vLLM/OpenAI/HF models) answered "
        f"by the affine-noise `SurrogateBackend` ({', '.join(f'{k} = {v}' for k, v in surrogate.items())}), "
        f"{n_trials} trials per topology (the paper's number) on chain/star/mesh, {stats['steps']} steps, "
        f"epsilon = {stats['epsilon']:g}, seed 0 (run directories under `runs/trials-reproduce/`, not "
        f"committed). The same run by hand: `mascot trials --backend surrogate --n-trials "
        f"{n_trials} --out DIR` (add `--unpaired` for the second table).",
        "",
        f"**Initial state.** Every trial starts from {state}. The SR paper does not give the task's initial "
        "state: this one is **mascot's choice**, not the paper's (`mascot trials --initial-state VALUE,PARITY,LEVEL` "
        'sets another; trials configs take `initial_state = "50,A,3"`).',
        "",
        "**This is not the paper's experiment**: the agents are the paper's own affine-noise model (Sec. 3.5), not "
        "Qwen2.5-7B-Instruct, calibrated roughly to the magnitude of the paper's E_ceg only. What it can show is "
        "which of the paper's orderings follow from that model.",
        "",
        "## Which orderings the surrogate reproduces",
        "",
        f"Reproduced (every pair of topology means ordered as in the paper's Table 2): "
        f"{', '.join(yes) or 'none'}. Not reproduced: {', '.join(no) or 'none'}.",
        "",
    ]
    for f in fs:
        pm = TABLE2_PAPER[f["metric"]]
        lines.append(
            f"* **{f['metric']}**: paper {f['paper_order']}, surrogate {f['our_order']}: "
            + (
                "the ordering is reproduced"
                if f["reproduced"]
                else "the ordering is **not** reproduced ("
                + ", ".join(n for n, same, _ in f["pairs"] if not same)
                + " reversed)"
            )
            + " (pairs whose 95% CIs are disjoint: "
            + (", ".join(n for n, _, d in f["pairs"] if d) or "none")
            + ")"
            + "; the sign of each mean is the paper's for: "
            + (
                ", ".join(
                    t for t in TOPOLOGY_ORDER if np.sign(stats["metrics"][f["metric"]]["mean"][t]) == np.sign(pm[t][0])
                )
                or "none"
            )
            + f"; Kruskal-Wallis H = {format_number(f['H'])}, {_p_text(f['p'])} (paper {f['paper_H']:.2f}, p < 0.001); "
            f"r_s = {format_number(f['r_s'])} (paper prints {f['paper_r_s']:+.2f}; the paper's own means give "
            f"{format_number(f['r_s_paper_means'])} under mascot's average-rank convention). Surrogate means within one "
            f"paper s.d. of the paper's: {', '.join(f['within_paper_sd']) or 'none'} (paper: "
            + ", ".join(f"{t} {pm[t][0]:.2f} ± {pm[t][1]:.2f}" for t in TOPOLOGY_ORDER)
            + ")."
        )
    if stats.get("baselines"):
        lines += [
            "",
            '**Against trivial agents** (`table2.md`, "Trivial baselines"; the same harness and config): '
            + " ".join(
                f"Mean E_ceg below the {name} agent's ("
                + ", ".join(
                    f"{t} {format_number(b['E_ceg_vs_run'][t]['baseline'])}"
                    for t in TOPOLOGY_ORDER
                    if t in b["E_ceg_vs_run"]
                )
                + "): "
                + (", ".join(t for t in TOPOLOGY_ORDER if b["E_ceg_vs_run"].get(t, {}).get("beats")) or "none")
                + "."
                for name, b in stats["baselines"].items()
            )
            + (
                " No topology beats the echo agent: the surrogate's noise is set to the magnitude of the paper's "
                "errors, and from this initial state copying it errs less."
                if "echo" in stats["baselines"]
                and not any(v["beats"] for v in stats["baselines"]["echo"]["E_ceg_vs_run"].values())
                else ""
            ),
        ]
    if stats_unpaired is not None:
        fu = {f["metric"]: f for f in ordering_findings(stats_unpaired)}["F_ps"]
        lines += [
            "",
            "F_ps depends on how the perturbed arm is sampled. The main table pairs the two arms' request "
            "seeds (`mascot trials`' default), so the surrogate's noise cancels except where the rule "
            "branches differ; with independent seeds (`--unpaired`, `unpaired/`) F_ps orders "
            f"{fu['our_order']} (paper {fu['paper_order']}): "
            + ("reproduced" if fu["reproduced"] else "**not** reproduced")
            + f", H = {format_number(fu['H'])}, {_p_text(fu['p'])}, r_s = {format_number(fu['r_s'])}.",
        ]
    lines += ["", "## Summary tables", ""]
    lines += _findings_md(stats, "Paired perturbation arms (`table2.md`, the figures)")
    if stats_unpaired is not None:
        lines += _findings_md(stats_unpaired, "Independent perturbation arms (`unpaired/table2.md`)")
    lines += [
        'Orderings are of the topology means, largest first. "Pairs separated": the 95% percentile-bootstrap '
        "intervals of the two means (`stats.json`) do not overlap. r_s: Spearman over the three means against "
        "the SR spectra (E_ceg vs rho, -R_cdr vs Delta, F_ps vs kappa; average ranks for the rho tie of star and "
        "mesh), as in `table2.md`.",
        "",
        "## Files",
        "",
        "* `table2.md` / `table2.csv`: Table 2 beside the paper's values, H, p, r_s, bootstrap CIs, bookkeeping; "
        "`stats.json`, `metrics.csv` (one row per topology and trial).",
        "* `fig2_cumulative_error`, `fig3_consensus_decay`, `fig4_perturbation_sensitivity` (per-trial "
        "distributions with the paper's mean beside each box and its mean ± s.d. under the tick), "
        "`fig5_stepwise_cumulative_error`, `fig6_stepwise_consensus` (per-step traces, median and IQR; the paper "
        "prints no numbers for these), PNG and PDF.",
        "* `unpaired/`: the same report with independent seeds for the perturbed arm (no figures).",
        "",
        "![Fig. 2](fig2_cumulative_error.png)",
        "",
        "![Fig. 3](fig3_consensus_decay.png)",
        "",
        "![Fig. 4](fig4_perturbation_sensitivity.png)",
        "",
        "![Fig. 5](fig5_stepwise_cumulative_error.png)",
        "",
        "![Fig. 6](fig6_stepwise_consensus.png)",
        "",
    ]
    return "\n".join(lines)


def reproduce(
    out="results/trials",
    runs_dir="runs/trials-reproduce",
    n_trials: int = 100,
    n_boot: int = 2000,
    progress: bool = False,
) -> dict:
    """The SR paper's Table 2 and Figs 2-6 on the surrogate backend, for ``mascot reproduce all``: ``n_trials``
    trials per topology (the paper's 100) with the harness's defaults (paired perturbation arms, seed 0, the
    initial state {Value 50, Parity A, Level 3}, mascot's choice) into ``runs_dir/paired``, and the same with
    independent perturbation seeds into ``runs_dir/unpaired``; the reports into ``out`` and ``out/unpaired``
    (no figures), and ``out/README.md`` saying which orderings the surrogate reproduces. Reruns resume."""
    import time

    from mascot.protocols.state_tracking.baselines import run_baselines
    from mascot.protocols.state_tracking.harness import TrialConfig, run_trials
    from mascot.protocols.state_tracking.surrogate import SurrogateBackend

    out, runs_dir = Path(out), Path(runs_dir)
    t0 = time.perf_counter()
    res = {}
    for tag, paired in (("paired", True), ("unpaired", False)):
        cfg = TrialConfig(n_trials=n_trials, seed=0, paired_seeds=paired, log_requests="none")
        backend = SurrogateBackend(seed=0)
        run_trials(cfg, runs_dir / tag, backend, progress=progress)
        run_baselines(runs_dir / tag)  # the echo and random agents beside it (resumed when finished)
        dest = out if paired else out / "unpaired"
        res[tag] = write_report(runs_dir / tag, n_boot=n_boot, figures=paired, dest=dest)
    wall = time.perf_counter() - t0
    sur = {
        k: v
        for k, v in SurrogateBackend(seed=0).identity().items()
        if k not in ("backend", "name", "model", "token_count")
    }
    atomic_write_text(out / "README.md", _readme(nanify(res["paired"][1]), nanify(res["unpaired"][1]), n_trials, sur))
    return {"paired": res["paired"], "unpaired": res["unpaired"], "wall_s": wall}
