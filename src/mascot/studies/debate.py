"""The voting/debate article's examples ("Multi-Agent Consensus: Architecting Voting & Debate Topologies in LLM
Swarms"), for ``mascot reproduce all``: its code-review debate on the surrogate backend and with its own mock
agents, and the weighted-vote example, written to ``results/debate/`` by :func:`reproduce`."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from mascot.io import atomic_write_text, write_csv

__all__ = ["ArticleMockDebateBackend", "WEIGHTED_VOTE_EXAMPLE", "drafts_placement", "reproduce"]


# ----------------------------------------------------------------------------- the voting/debate article
class ArticleMockDebateBackend:
    """The article's ``query_llm`` mock, as a backend: the reply depends only on the role in the system prompt
    ("Security" -> FAIL, "Performance" -> PASS, anyone else -> FAIL), word for word as the article's code."""

    name = "article-mock"
    model = "article-query_llm-mock"

    def generate(self, requests):
        from mascot.backends.base import Response
        from mascot.protocols.deliberation.surrogate import count_tokens

        out = []
        for req in requests:
            system = req.messages[0]["content"]
            if "Security" in system:
                text = "[DECISION: FAIL] Reason: The code uses an unsafe eval() execution block."
            elif "Performance" in system:
                text = "[DECISION: PASS] Reason: Code execution time is optimal."
            else:
                text = "[DECISION: FAIL] Reason: Unhandled exception risks in input parsing."
            ptok = sum(count_tokens(m.get("content", "")) + 4 for m in req.messages)
            out.append(Response(text, ptok, count_tokens(text), finish_reason="stop", latency_s=0.0))
        return out


#: The weighted-vote example of issue 12 (the article gives the rule, sum D_i C_i, but no worked numbers).
WEIGHTED_VOTE_EXAMPLE = (("FAIL", 0.9), ("PASS", 0.6), ("FAIL", 0.2))


def _debate_rounds(path: Path) -> dict[int, list[dict]]:
    from mascot.io import read_jsonl

    rounds: dict[int, list[dict]] = {}
    for r in read_jsonl(path):
        if r.get("type") == "round":
            rounds.setdefault(r["run"], []).append(r)
    return rounds


def drafts_placement(transcript: Path) -> dict:
    """Where a debate's requests carry the other agents' drafts: for each request after round 1, whether every
    other agent's previous-round reply is in its system message and whether it is in its user message, counted
    from the transcript's logged messages (``{"requests", "in_system", "in_user"}``)."""
    from mascot.io import read_jsonl

    replies = [r for r in read_jsonl(transcript) if r.get("type") == "reply"]
    prev = {(r["run"], r["round"], r["agent"]): r["reply"] for r in replies}
    out = {"requests": 0, "in_system": 0, "in_user": 0}
    for r in replies:
        if r["round"] < 2:
            continue
        drafts = [
            t for (run, rnd, a), t in prev.items() if run == r["run"] and rnd == r["round"] - 1 and a != r["agent"]
        ]
        out["requests"] += 1
        out["in_system"] += bool(drafts) and all(d in r["system"] for d in drafts)
        out["in_user"] += bool(drafts) and all(d in r["user"] for d in drafts)
    return out


def reproduce(out="results/debate", runs_dir="runs/debate-reproduce", runs: int = 100, progress: bool = False) -> dict:
    """The voting/debate article's examples, for ``mascot reproduce all``:

    * its debate (the code-review snippet, its three reviewers, ``max_rounds = 3``) with mascot's harness
      :func:`mascot.protocols.debate.run_debate` on :class:`SurrogateDebateBackend` (the article's scenario,
      ``configs/debate/code_review.toml``'s values), ``runs`` repeated debates batched together; debate #0 is
      shown in full;
    * the same debate answered by the article's own ``query_llm`` mock (:class:`ArticleMockDebateBackend`,
      the article's prompts exactly, no confidence tag): what the article's script prints;
    * the weighted-vote example FAIL 0.9, PASS 0.6, FAIL 0.2 by :func:`mascot.protocols.debate.weighted_vote`.

    Writes ``README.md``, ``summary.json``, ``debates.csv`` (one row per surrogate debate) and
    ``example_transcript.md`` into ``out``; run directories under ``runs_dir``. Reruns resume."""
    from mascot.protocols.debate import (
        SurrogateDebateBackend,
        load_debate_config,
        majority_vote,
        run_debate,
        weighted_vote,
    )

    out, runs_dir = Path(out), Path(runs_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg, sur = load_debate_config(None, {"runs": runs})
    be = SurrogateDebateBackend(priors={a.name: a.prior_pass for a in cfg.agents}, **sur)
    res = run_debate(cfg, runs_dir / "surrogate", be, progress=progress)
    mock_cfg, _ = load_debate_config(None, {"runs": 1, "ask_confidence": False})
    mock = run_debate(mock_cfg, runs_dir / "article_mock", ArticleMockDebateBackend(), progress=progress)
    wv = weighted_vote(WEIGHTED_VOTE_EXAMPLE)
    mv = majority_vote([d for d, _ in WEIGHTED_VOTE_EXAMPLE])
    terms = " ".join(f"{'+' if d == 'PASS' else '-'} {c:g}" for d, c in WEIGHTED_VOTE_EXAMPLE).lstrip("+ ")

    deb = pd.DataFrame.from_records(res.outcomes)
    rounds = _debate_rounds(runs_dir / "surrogate" / "transcript.jsonl")
    last = {run: rs[-1] for run, rs in rounds.items()}
    deb["weighted_final"] = [last[r]["weighted"]["outcome"] for r in deb.run]
    deb["majority_final"] = [last[r]["majority"]["outcome"] for r in deb.run]
    deb["article_consensus_round1"] = [bool(rounds[r][0]["article_consensus"]) for r in deb.run]
    write_csv(deb.drop(columns=["article_consensus_rounds"]), out / "debates.csv", index=False)
    n = len(deb)
    cons = deb[deb.consensus]
    mock_rounds = _debate_rounds(runs_dir / "article_mock" / "transcript.jsonl")[0]
    first = next((r["round"] for r in mock_rounds if r["article_consensus"]), None)
    article_result = (first, True) if first is not None else (mock_cfg.max_rounds, False)
    summary = {
        "scenario": {
            "task": cfg.task,
            "agents": [a.name for a in cfg.agents],
            "max_rounds": cfg.max_rounds,
            "final_rule": cfg.final_rule,
            "ask_confidence": cfg.ask_confidence,
            "priors_pass": {a.name: a.prior_pass for a in cfg.agents},
            "surrogate": be.options(),
        },
        "surrogate": {
            "debates": n,
            "consensus": int(deb.consensus.sum()),
            "rounds": {int(k): int(v) for k, v in deb.rounds.value_counts().sort_index().items()},
            "decisions": {str(k): int(v) for k, v in deb.decision.value_counts().items()},
            "consensus_decisions": {str(k): int(v) for k, v in cons.decision.value_counts().items()},
            "untagged_replies": int(deb.untagged.sum()),
            "tokens_mean": float(deb.tokens.mean()),
            "weighted_equals_majority_final": int((deb.weighted_final == deb.majority_final).sum()),
            "article_check_differs_round1": int(
                sum(bool(rounds[r][0]["article_consensus"]) != bool(rounds[r][0]["consensus"]) for r in deb.run)
            ),
            "example": res.outcomes[0],
        },
        "article_mock": mock.outcomes[0]
        | {
            "decisions_by_round": [r["decisions"] for r in mock_rounds],
            "article_result": list(article_result),
            "drafts_placement": drafts_placement(runs_dir / "article_mock" / "transcript.jsonl"),
        },
        "weighted_vote_example": {"ballots": [list(b) for b in WEIGHTED_VOTE_EXAMPLE], **wv.to_dict()},
        "majority_vote_example": mv.to_dict(),
    }
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=2, default=str) + "\n")

    from mascot.io import read_jsonl

    replies = [
        r for r in read_jsonl(runs_dir / "surrogate" / "transcript.jsonl") if r.get("type") == "reply" and r["run"] == 0
    ]
    tl = ["# Debate #0 of the surrogate run (the article's code review, max 3 rounds)", "", f"Task: `{cfg.task}`", ""]
    for rl in rounds[0]:
        tl += [f"## Round {rl['round']}", "", "| agent | decision | confidence | reply |", "|---|---|---|---|"]
        for r in sorted((x for x in replies if x["round"] == rl["round"]), key=lambda x: x["agent_index"]):
            tl.append(f"| {r['agent']} | {r['decision']} | {r['confidence'] or '-'} | {r['reply'].replace('|', '/')} |")
        tl += [
            "",
            f"Consensus: {rl['consensus']}; majority {rl['majority']['outcome']} "
            f"({rl['majority']['pass_votes']} PASS / {rl['majority']['fail_votes']} FAIL); weighted score "
            f"{rl['weighted']['score']:+.2f} -> {rl['weighted']['outcome']}; status {rl['status'] or 'continue'}"
            + (f"; decision **{rl['decision']}**" if rl["decision"] else ""),
            "",
        ]
    atomic_write_text(out / "example_transcript.md", "\n".join(tl))

    ex, am = res.outcomes[0], summary["article_mock"]
    dp = am["drafts_placement"]
    s = summary["surrogate"]
    lines = [
        "# The voting/debate article's examples",
        "",
        "Written by `mascot reproduce all` (`mascot.studies.debate.reproduce`); every number "
        'below is computed. Source: "Multi-Agent Consensus: Architecting Voting & Debate Topologies in LLM '
        f'Swarms". Run directories: `{runs_dir}/` (not committed).',
        "",
        "## Weighted confidence vote",
        "",
        "The article's rule: score = sum_i D_i C_i with D_i = -1 (Fail) or +1 (Pass) and confidence C_i in [0, 1]. "
        "The example FAIL 0.9, PASS 0.6, FAIL 0.2 (issue 12's; the article prints the rule without numbers), by "
        "`mascot.protocols.debate.weighted_vote`:",
        "",
        f"    score = {terms} = {wv.score:+g}  ->  {wv.outcome}   ({wv.pass_votes} PASS, {wv.fail_votes} FAIL, "
        f"{wv.abstentions} abstentions)",
        "",
        f"The simple majority of the same ballots is {mv.outcome} ({mv.fail_votes} to {mv.pass_votes}).",
        "",
        "## The article's debate, with its own mock agents",
        "",
        "The article's `query_llm` mock answers by role only (Security FAIL, Performance PASS, Quality FAIL), so "
        "no agent ever changes its mind. mascot's harness with that mock (`ArticleMockDebateBackend`, the "
        f"article's prompts exactly): decisions by round {am['decisions_by_round']}; consensus "
        f"**{am['consensus']}** after **{am['rounds']}** rounds (max_rounds = {cfg.max_rounds}); final majority "
        f"**{am['decision']}**. The article's own loop (its `check_consensus` after every round, "
        f"`mascot.protocols.debate.article_consensus`) on the same replies prints `Consensus achieved? "
        f"{am['article_result'][1]} in {am['article_result'][0]} rounds` and reports no decision; mascot adds the "
        "final vote.",
        "",
        "## Erratum: the drafts go in the user prompt, not the system context",
        "",
        "The article's prose (Iterative Debate, step 2): each agent \"receives the draft solutions of all other "
        'agents as part of its system context". Its code (`AgentNode.review`) builds the system prompt from the '
        "role alone and appends the other opinions to the user prompt. In the debate above, as mascot's harness "
        f"sent it (the article's prompts exactly), {dp['requests']} requests came after round 1; the other agents' "
        f"previous-round replies are all in the user message of {dp['in_user']} of them and in the system message "
        f"of {dp['in_system']}. mascot follows the code.",
        "",
        f"## The article's debate on the surrogate backend ({n} debates)",
        "",
        "Three reviewers (the article's personas, word for word), the code-review snippet "
        f"`{cfg.task}`, max_rounds = {cfg.max_rounds}, strict `[DECISION: ...]` tags at the start of a reply, a "
        f"`[CONFIDENCE: x]` tag asked for, final rule `{cfg.final_rule}` when no consensus. Surrogate agents "
        "(`SurrogateDebateBackend`, mascot's, not an LLM): first-round PASS probability "
        + ", ".join(f"{a.name} {a.prior_pass:g}" for a in cfg.agents)
        + f" (mascot's choice; the article gives none), then each round adopt the other agents' majority with "
        f"probability {be.persuasion:g}; {be.malformed:g} of replies untagged.",
        "",
        f"* Debate #0 (`example_transcript.md`): {ex['rounds']} round(s), consensus {ex['consensus']}, decision "
        f"**{ex['decision']}**, {ex['tokens']:,} tokens.",
        f"* All {n}: consensus in {s['consensus']} ({100 * s['consensus'] / n:.0f}%); rounds "
        + ", ".join(f"{k}: {v}" for k, v in s["rounds"].items())
        + "; decisions "
        + ", ".join(f"{k} {v}" for k, v in s["decisions"].items())
        + " (consensus decisions "
        + (", ".join(f"{k} {v}" for k, v in s["consensus_decisions"].items()) or "none")
        + f"); {s['untagged_replies']} untagged replies; {s['tokens_mean']:,.0f} tokens per debate on average.",
        f"* The final round's weighted vote equals its majority vote in {s['weighted_equals_majority_final']} of "
        f"{n} debates. The article's substring check (`check_consensus`) and mascot's strict one disagree after "
        f"round 1 in {s['article_check_differs_round1']} of {n} debates (the article drops untagged agents and "
        "accepts a tag anywhere in the text; see `mascot.protocols.debate.voting`).",
        "",
        "Files: `summary.json`, `debates.csv` (one row per debate), `example_transcript.md`. The same debates by "
        f"hand: `mascot debate configs/debate/code_review.toml --runs {n}`.",
        "",
    ]
    atomic_write_text(out / "README.md", "\n".join(lines))
    return summary
