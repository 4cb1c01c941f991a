"""Iterative multi-agent debate (:func:`run_debate`) of the voting/debate article ("Multi-Agent Consensus:
Architecting Voting & Debate Topologies in LLM Swarms"), on every backend (surrogate, vllm, openai, hf).

As in the article: round 1, every agent reviews the task alone; in round ``r >= 2`` every agent also gets
the other agents' replies from round ``r - 1`` (not its own) and is asked to critique them and update its
decision; the loop ends at the first round with consensus or after ``max_rounds`` rounds. The system and
user prompts are the article's, word for word, plus one added sentence asking for the confidence tag when
``ask_confidence`` (needed by the weighted vote; off: the article's prompts exactly).

* **Consensus** = every agent's reply carries a strict tag and all tags agree. An untagged reply blocks
  consensus: an agent whose decision cannot be read has not agreed to anything.
* **Decision** = the agreed decision when consensus was reached; otherwise, at ``max_rounds``, the result of
  ``final_rule`` (``"majority"`` or ``"weighted"``) over the last round's ballots, which can be ``TIE`` or
  ``NONE`` -- never silently PASS or FAIL.
* Requests are batched: one backend call per round for every agent of every (repeated) debate still running.
* Everything goes to ``DIR/transcript.jsonl``: one ``reply`` line per agent and round (prompts, reply, parsed
  ballot, token counts) and one ``round`` line per debate and round (decisions, consensus, both votes,
  tokens, status). Reruns resume after the last complete round; different parameters raise ``ValueError``.
  ``tokens`` = prompt + completion tokens over all rounds of a debate.

Ballots and votes: :mod:`mascot.protocols.debate.voting`; prompts: :mod:`mascot.protocols.debate.prompts`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import NamedTuple

from mascot import log
from mascot.backends.base import BackendFailure, CutWatch, Request, attach_progress, endpoint, stop_if_down
from mascot.backends.cache import AnswerCache, keep_answers
from mascot.errors import BackendError, InputError
from mascot.io import append_jsonl, atomic_write_text, read_jsonl, utc_now
from mascot.protocols.debate.config import DebateConfig
from mascot.protocols.debate.prompts import debate_system_prompt, debate_user_prompt
from mascot.protocols.debate.surrogate import SurrogateDebateBackend
from mascot.protocols.debate.voting import (
    Ballot,
    agreed_decision,
    article_consensus,
    article_decision,
    majority_vote,
    parse_decision,
    weighted_vote,
)
from mascot.rundir import begin_run, surrogate_aware_spec
from mascot.seeds import seed64

_log = log.get_logger(__name__)

__all__ = ["run_debate", "DebateRun"]


class DebateRun(NamedTuple):
    out: Path
    outcomes: list[dict]  # per debate: run, rounds, consensus, decision, tokens, ...
    requests: int
    wall_s: float


def _spec_of(backend) -> dict:
    return surrogate_aware_spec(backend, SurrogateDebateBackend)


def _restore(rows: list[dict], n_agents: int) -> dict[int, dict]:
    """Per run: completed rounds (round lines) with their reply lines, in order."""
    replies: dict[tuple, dict] = {}
    for r in rows:
        if r.get("type") == "reply":
            replies[(r["run"], r["round"], r["agent_index"])] = r
    rounds: dict[tuple, dict] = {}
    for r in rows:
        if r.get("type") == "round":
            rounds[(r["run"], r["round"])] = r
    state: dict[int, dict] = {}
    for run in sorted({k[0] for k in rounds}):
        st = state.setdefault(run, {"rounds": [], "replies": []})
        rnd = 1
        while (run, rnd) in rounds:
            reps = [replies.get((run, rnd, i)) for i in range(n_agents)]
            if any(x is None for x in reps):
                break
            st["rounds"].append(rounds[(run, rnd)])
            st["replies"].append(reps)
            if rounds[(run, rnd)].get("status") is not None:
                break
            rnd += 1
    return state


REASK = 2  # how often a request the backend did not answer is asked again (as the other harnesses' --retries)


def _generate(b, reqs):
    resps = list(b.generate(reqs))
    stop_if_down(
        b, f"round {reqs[0].meta.get('round', '?')}" if reqs and isinstance(reqs[0].meta, dict) else "the round"
    )
    if len(resps) != len(reqs):
        raise BackendError(f"backend returned {len(resps)} responses for {len(reqs)} requests")
    return resps


def run_debate(
    config: DebateConfig,
    out,
    backend,
    *,
    backend_spec: dict | None = None,
    progress: bool = True,
    command: Sequence[str] | None = None,
) -> DebateRun:
    """Run (or resume) ``config.runs`` debates in ``out`` (see the module docstring).

    ``backend``: a backend or a zero-argument factory (then pass ``backend_spec``), called only if rounds remain.

    Arguments: ``config`` a :class:`DebateConfig`; ``out`` the run directory (resumed when it holds a run of the
    same config); ``backend_spec`` the backend's description recorded with the run; ``progress`` print progress;
    ``command`` the command line recorded in the run's provenance. Returns a :class:`DebateRun`.
    """
    if not isinstance(config, DebateConfig):
        raise InputError("config must be a DebateConfig")
    out = Path(out)
    start = begin_run(
        out,
        kind="mascot-debate",
        label="a debate",
        config_identity=config.identity(),
        backend=backend,
        backend_spec=backend_spec,
        spec_of=_spec_of,
        results="transcript.jsonl",
    )
    factory, meta = start.factory, start.meta
    run_json = out / "run.json"
    session_id = len(meta["sessions"])
    session = {"started": utc_now(), "command": list(command) if command else None}
    meta["sessions"].append(session)
    meta["complete"] = False
    atomic_write_text(run_json, json.dumps(meta, indent=2) + "\n")

    agents = config.agents
    n = len(agents)
    path = out / "transcript.jsonl"
    state = _restore(read_jsonl(path, repair=True), n)
    runs = {r: state.get(r, {"rounds": [], "replies": []}) for r in range(config.runs)}

    def done(st):
        return bool(st["rounds"]) and st["rounds"][-1].get("status") is not None

    say = (lambda m: log.progress(_log, f"[debate] {m}")) if progress else (lambda m: None)
    t_start = time.perf_counter()
    n_requests = 0
    cuts = CutWatch.tagged(config.sampling.max_tokens)
    b = None
    while not all(done(st) for st in runs.values()):
        if b is None:
            b = keep_answers(factory() if factory is not None else backend, out)  # resume at the request
            attach_progress(b, say)  # requests done/total inside a round (hf, openai)
            # provenance, as trials and deliberate record it: describe() holds the openai probe's findings
            # (sampling / structured output honoured or ignored by the server)
            session["backend"] = {
                "name": getattr(b, "name", type(b).__name__),
                "model": getattr(b, "model", None),
                "describe": b.describe() if hasattr(b, "describe") else None,
            }
        reqs, owners = [], []
        for run, st in runs.items():
            if done(st):
                continue
            rnd = len(st["rounds"]) + 1
            prev = st["replies"][-1] if st["replies"] else None
            for i, a in enumerate(agents):
                others = None if prev is None else [(agents[j].name, prev[j]["reply"]) for j in range(n) if j != i]
                system = debate_system_prompt(a, config.ask_confidence)
                user = debate_user_prompt(config.task, others)
                m = {
                    "kind": "debate",
                    "run": run,
                    "round": rnd,
                    "agent": a.name,
                    "agent_index": i,
                    "prior_pass": a.prior_pass,
                    "ask_confidence": config.ask_confidence,
                    "previous": None if prev is None else prev[i]["decision"],
                    "others": [] if prev is None else [prev[j]["decision"] for j in range(n) if j != i],
                }
                reqs.append(
                    Request(
                        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                        sampling=replace(config.sampling, seed=seed64(config.seed, run, rnd, i)),
                        meta=m,
                    )
                )
                owners.append((run, rnd, i))
        resps = _generate(b, reqs)
        n_requests += len(reqs)
        for _ in range(REASK):  # requests the backend did not answer are asked again, the same way (same seed)
            missing = [j for j, r in enumerate(resps) if r.error]
            if not missing:
                break
            for j, r in zip(missing, _generate(b, [reqs[j] for j in missing])):
                resps[j] = r
            n_requests += len(missing)
        errors = [resp.error for resp in resps if resp.error]
        if errors:  # an unanswered reply is not an untagged ballot: nothing of this round is committed
            raise BackendFailure(
                f"{endpoint(b)}: {len(errors)} of {len(reqs)} requests of round {owners[0][1]} got no answer after "
                f"{REASK + 1} tries; first error: {str(errors[0])[:600]}. The round was not committed; rerun the same "
                "command to resume from it"
            )
        by_run: dict[int, list[dict]] = {}
        tagged = []
        for req, resp, (run, rnd, i) in zip(reqs, resps, owners):
            text = "" if resp.error else (resp.text or "")
            bal = parse_decision(text)
            tagged.append(bal.decision != "NONE")
            by_run.setdefault(run, []).append(
                {
                    "type": "reply",
                    "session": session_id,
                    "time": utc_now(),
                    "run": run,
                    "round": rnd,
                    "agent": agents[i].name,
                    "agent_index": i,
                    "seed": req.sampling.seed,
                    "system": req.messages[0]["content"],
                    "user": req.messages[1]["content"],
                    "reply": text,
                    "decision": bal.decision,
                    "confidence": None if bal.confidence is None else str(bal.confidence),
                    "ballot_reason": bal.reason,
                    "article_decision": article_decision(text),
                    "prompt_tokens": int(resp.prompt_tokens or 0),
                    "completion_tokens": int(resp.completion_tokens or 0),
                    "finish_reason": resp.finish_reason,
                    "latency_s": resp.latency_s,
                    "error": resp.error,
                }
            )
        cuts.add(resps, tagged)  # warns when most replies stop at max_tokens
        lines = []
        for run, reps in by_run.items():
            st = runs[run]
            rnd = reps[0]["round"]
            ballots = [
                Ballot(r["decision"], None if r["confidence"] is None else Decimal(r["confidence"]), "") for r in reps
            ]
            agreed = agreed_decision(ballots)
            maj, wv = majority_vote(ballots), weighted_vote(ballots)
            status = "consensus" if agreed else ("max_rounds" if rnd >= config.max_rounds else None)
            final = maj if config.final_rule == "majority" else wv
            decision = agreed if agreed else (None if status is None else final.outcome)
            ptok = sum(r["prompt_tokens"] for r in reps)
            ctok = sum(r["completion_tokens"] for r in reps)
            rl = {
                "type": "round",
                "session": session_id,
                "run": run,
                "round": rnd,
                "decisions": [r["decision"] for r in reps],
                "untagged": sum(r["decision"] == "NONE" for r in reps),
                "consensus": agreed is not None,
                "article_consensus": article_consensus([r["reply"] for r in reps]),
                "majority": maj.to_dict(),
                "weighted": wv.to_dict(),
                "prompt_tokens": ptok,
                "completion_tokens": ctok,
                "status": status,
                "decision": decision,
            }
            lines += reps + [rl]
            st["rounds"].append(rl)
            st["replies"].append(reps)
        append_jsonl(path, lines)
        rnds = sorted({ln["round"] for ln in lines if ln["type"] == "round"})
        say(
            f"round {','.join(map(str, rnds))}: "
            + "; ".join(
                f"#{ln['run']} {'/'.join(ln['decisions'])}"
                + (f" -> {ln['status']}: {ln['decision']}" if ln["status"] else "")
                for ln in lines
                if ln["type"] == "round"
            )[:400]
        )
    outcomes = []
    for run, st in sorted(runs.items()):
        last = st["rounds"][-1]
        outcomes.append(
            {
                "run": run,
                "rounds": last["round"],
                "consensus": bool(last["consensus"]),
                "decision": last["decision"],
                "tokens": int(sum(r["prompt_tokens"] + r["completion_tokens"] for r in st["rounds"])),
                "prompt_tokens": int(sum(r["prompt_tokens"] for r in st["rounds"])),
                "completion_tokens": int(sum(r["completion_tokens"] for r in st["rounds"])),
                "untagged": int(sum(r["untagged"] for r in st["rounds"])),
                "article_consensus_rounds": [r["round"] for r in st["rounds"] if r["article_consensus"]],
            }
        )
    cuts.finish()  # a run too short for the warning on the way says it now
    wall = time.perf_counter() - t_start
    session.update(finished=utc_now(), wall_s=round(wall, 3), requests=n_requests)
    if isinstance(b, AnswerCache):  # every round is committed: its answers are in transcript.jsonl
        session["replayed"] = b.replayed
        b.clear()
    meta["complete"] = True
    meta["outcomes"] = outcomes
    atomic_write_text(run_json, json.dumps(meta, indent=2) + "\n")
    atomic_write_text(out / "summary.json", json.dumps(outcomes, indent=2) + "\n")
    return DebateRun(out, outcomes, n_requests, wall)
