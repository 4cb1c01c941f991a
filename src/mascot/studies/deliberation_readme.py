"""The README of ``mascot reproduce deliberation``'s output folder, every number in it taken from the run's
``summary.json`` (it was a hand-written file whose numbers nobody recomputed)."""

from __future__ import annotations

from pathlib import Path

from mascot.io import atomic_write_text

__all__ = ["write_readme"]

_STRATEGIES = ("adaptive", "complete", "ring")


def _status(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def _harness_table(tag: str, per: dict) -> list[str]:
    have = [s for s in _STRATEGIES if s in per]
    rows = [
        ("Rounds (mean)", lambda r: f"{r['rounds_mean']:.1f}"),
        ("Tokens (mean)", lambda r: f"{r['tokens_mean']:,.0f}"),
        ("D(0) (mean)", lambda r: f"{r['d0_mean']:.4f}"),
        ("D_final (mean)", lambda r: f"{r['d_final_mean']:.4f}"),
        ("Status", lambda r: _status(r["status"])),
        ("Parse errors (retried)", lambda r: str(r["parse_errors"])),
        ("Unusable after retries", lambda r: str(r["parse_failures"])),
    ]
    out = [
        f"`{tag}/` ({per['requests']:,} requests in its log):",
        "",
        "| | " + " | ".join(have) + " |",
        "|---" * (len(have) + 1) + "|",
    ]
    out += [f"| {name} | " + " | ".join(f(per[s]) for s in have) + " |" for name, f in rows]
    return out + ["", *_cheapest_sentence(per, have)]


def _cheapest_sentence(per: dict, have: list) -> list[str]:
    """Which strategy spends least here, and why, beside the paper's GPT column (computed from both)."""
    from mascot import papers

    if not {"complete", "ring"} <= set(have):
        return []
    order = sorted(have, key=lambda s: per[s]["tokens_mean"])
    per_round = {s: per[s]["tokens_mean"] / per[s]["rounds_mean"] for s in ("complete", "ring")}
    cost_ratio = per_round["complete"] / per_round["ring"]
    rounds_ratio = per["ring"]["rounds_mean"] / per["complete"]["rounds_mean"]
    gpt = {s: papers.TABLE_VIII[("GPT-5.4-Mini", s)] for s in _STRATEGIES}
    p_cost = (gpt["complete"]["tokens"] / gpt["complete"]["rounds"]) / (gpt["ring"]["tokens"] / gpt["ring"]["rounds"])
    p_rounds = gpt["ring"]["rounds"] / gpt["complete"]["rounds"]
    p_order = sorted(_STRATEGIES, key=lambda s: gpt[s]["tokens"])
    text = (
        f"Cheapest by mean tokens: {' < '.join(order)}. A complete round costs {cost_ratio:.2f}x a ring round here "
        f"({per_round['complete']:,.0f} vs {per_round['ring']:,.0f} tokens) and the ring needs {rounds_ratio:.2f}x "
        f"the rounds, so always-complete {'spends less than' if cost_ratio < rounds_ratio else 'spends more than'} "
        f"always-ring. In the paper's GPT column of Table VIII a complete round costs {p_cost:.2f}x a ring round and "
        f"the ring needs {p_rounds:.2f}x the rounds ({' < '.join(p_order)} by tokens)."
    )
    if order[0] == "complete":
        text += (
            " So this surrogate setting shows the reverse of the paper's premise that always-complete is the "
            f"expensive strategy: its complete rounds cost too little ({cost_ratio:.2f}x, below the {rounds_ratio:.2f}x "
            "the ring's extra rounds cost). Its token comparisons are a property of these surrogate settings, not "
            "evidence about the strategies."
        )
    return [text, ""]


def write_readme(out, summary: dict, token_scales: dict, runs_dir) -> Path:
    """``out/README.md`` from ``summary`` (what :func:`mascot.studies.deliberation.reproduce` returns)
    and the paper's per-model ``token_scales``."""
    out = Path(out)
    c = summary["claude_example"]
    t8 = c["table_viii"]
    mon = summary["text_harness_monitor"]["all"]
    L = [
        "# LLM deliberation under a token budget (consensus paper, Sec. V-C): surrogate results",
        "",
        "Written by `mascot reproduce deliberation` (`mascot.studies.deliberation.reproduce()`; run "
        f"directories under `{runs_dir}/`, relative to where it ran, not committed); every number below is read "
        "from `summary.json`, written by the same run. Everything here comes from "
        "**surrogates**, not from LLMs: the text harness `mascot.protocols.deliberation.run_deliberation` (the "
        "same code that drives vLLM / OpenAI / HF models) answered by `SurrogateDeliberationBackend`, and the JAX "
        "kernel `mascot.kernels.deliberation.simulate_deliberation`. Live-model numbers come from "
        "`mascot deliberate --backend vllm|openai|hf --model ...` and land in a run directory in the same format.",
        "",
        "## The paper's post-hoc certificate of the Claude complete-only run, recomputed (`claude_example.json`)",
        "",
        f"Inputs as printed: D(0) = {c['d0']:g} (Table VIII), lambda1 ~ {c['lambda1']:g}, c1 ~ {c['c1']:,.0f}, "
        f"eta = {c['eta']:g}, eps = {c['eps']:g}, b0 = {c['b0']:,.0f}. `mascot.theory.theorem1` gives "
        f"K1 = ceil({c['K1_exact']:.4f}) = **{c['K1']}**, K2 = {c['K2']} ({c['reason']}), **K\\* = {c['K_star']}, "
        f"B\\* = {c['B_star']:,.0f}** against b0 = {c['b0']:,.0f}: `in_certificate_region` is "
        f"**{c['in_certificate_region']}** (margin {c['margin']:,.0f}). Cross-checks from Table VIII itself: "
        f"{t8['tokens']:,} tokens / {t8['rounds']} rounds = {t8['implied_c1']:,.1f} per round; the rate implied by "
        f"D_final = {t8['d_final']:g} after {t8['rounds']} rounds is {t8['implied_rate']:.4f}, which needs "
        f"{c['rounds_at_implied_rate']} rounds; the Theorem 1 bound after {t8['rounds']} rounds is "
        f"{c['bound_D9']:.4f}.",
        "",
        "## Table VIII-like summary (text harness, surrogate backend, the paper's scenario)",
        "",
        "Round 0 is shared by the three strategies of a run and not charged. Per-tag tables, estimates and "
        "certificates: `surrogate_b*/table_viii.md`, `estimates.md`, `certificates.csv`; figures: "
        "`surrogate_b*/fig4.png` (the paper's panels (a)-(d)) and `fig4_full.png` (D and b for every strategy).",
        "",
    ]
    for tag, per in summary["text_harness"].items():
        L += _harness_table(tag, per)
    L += [
        '## Online monitor: how often "predicted BudgetFail" was right',
        "",
        "The monitor re-checks b_k >= B\\*(D(k)) after every round with per-mode estimates shrunk to priors; runs "
        "continue in shadow mode and the verdict is scored against the real outcome (fail = BudgetFail or "
        "max_rounds).",
        "",
        f"* Text harness ({mon['lanes']} lanes, `monitor_shadow_text_harness.csv`): {mon['flagged']} flagged, "
        f"{mon['tp']} of them failed (precision {mon['precision']:.2f}), {mon['tp']} of {mon['failed']} failures "
        f"flagged (recall {mon['recall']:.2f}), accuracy {mon['accuracy']:.2f}.",
        f"* JAX surrogate: `monitor_accuracy.md` ({summary['monitor_study_rows']:,} rows: scenario, strategy, b0 "
        "and monitor, with precision, recall and accuracy).",
        "",
        "## Per-model token scaling and Table VII",
        "",
        "* `token_scaling/` (`README.md`, `table_viii.md`, `fig4.png`, `scaling.csv`): the paper's constant "
        "per-model token scalings (" + ", ".join(f"{m} x{s:g}" for m, s in token_scales.items()) + ", Sec. V-C) "
        'applied through the harness\'s `token_scale` to three surrogate "models" whose replies differ in length.',
        "* `table_vii_mapping.md`: Table VII (theory-to-LangGraph correspondence) mapped onto mascot's harness, "
        "each reference checked to resolve when the file is written.",
        "",
    ]
    path = out / "README.md"
    atomic_write_text(path, "\n".join(L))
    return path
