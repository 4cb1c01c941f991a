"""Voting and iterative multi-agent debate ("Multi-Agent Consensus: Architecting Voting & Debate Topologies
in LLM Swarms", the voting/debate article), on every backend (surrogate, vllm, openai, hf).

Ballots
-------
A reply's decision is read from a **strict tag at the start of the reply** (after leading whitespace):
exactly ``[DECISION: PASS]`` or ``[DECISION: FAIL]`` (upper case, one space). Anything else -- no tag, a
tag later in the text, ``[decision: pass]``, ``[DECISION:PASS]`` -- is the decision ``"NONE"`` (untagged).
An optional confidence follows the decision tag: ``[DECISION: FAIL] [CONFIDENCE: 0.85]``; it must be a plain
decimal number in [0, 1] (``0.85``, ``1``, ``.5``).

Voting rules (:func:`majority_vote`, :func:`weighted_vote`)
----------------------------------------------------------
* **Abstentions** are excluded from the tally but counted (``abstentions``): an untagged reply (``"NONE"``,
  ``None``, anything other than PASS/FAIL), and -- for the weighted vote only -- a ballot whose confidence
  is missing, not a number, NaN, or outside [0, 1]. A valid ballot with confidence 0 is a vote (it
  counts in ``pass_votes``/``fail_votes``) that adds nothing to the score.
* **Majority**: ``PASS`` if more valid PASS than FAIL votes, ``FAIL`` if fewer, ``TIE`` if equal and at
  least one valid vote, ``NONE`` if there is no valid vote at all.
* **Weighted confidence**: ``score = sum_i D_i C_i`` with ``D_i = +1`` (PASS) / ``-1`` (FAIL) and
  ``C_i in [0, 1]``; ``PASS`` if ``score > 0``, ``FAIL`` if ``< 0``, ``TIE`` if exactly 0 with at least one valid
  vote, ``NONE`` without valid votes. The sum is exact: each confidence is taken as the decimal number it
  was written as (``Decimal(str(c))`` for floats), so ``0.1 + 0.2 - 0.3`` is a tie, not ``5.6e-17``.

Debate (:func:`run_debate`)
---------------------------
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

Erratum (the article's ``check_consensus``)
-------------------------------------------
The article decides with substring tests on the upper-cased reply (``"[DECISION: PASS]" in op``, then
``"[DECISION: FAIL]" in op``) and declares consensus when ``len(set(decisions)) == 1`` over the agents
whose reply matched. Consequences: (1) agents whose replies hold no tag are silently dropped, so ONE
tagged agent plus any number of untagged ones counts as unanimous consensus; (2) a tag anywhere in the
text counts, including quoted from another agent ("Security wrote [DECISION: FAIL] but I disagree ..."), and
a reply containing both tags counts as PASS; (3) lower-case tags are accepted although the prompt demands
the exact prefix. Its own conclusion asks for "a clear tag ... at the start of the response", which is
what :func:`parse_decision` enforces; :func:`article_consensus` keeps the article's check for comparison
(logged as ``article_consensus`` in every ``round`` line).
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, NamedTuple, Sequence


from mascot.llm.base import Request, Response, Sampling
from mascot.files import atomic_write_text, read_toml
from mascot.llm.rundir import open_run_dir, orphan_message, resolve_backend

__all__ = [
    "DECISIONS", "OUTCOMES", "Ballot", "parse_decision", "article_decision", "article_consensus", "VoteResult",
    "majority_vote", "weighted_vote", "agreed_decision", "DebateAgent", "ARTICLE_TASK", "ARTICLE_AGENTS",
    "DebateConfig", "load_debate_config", "debate_system_prompt", "debate_user_prompt", "SurrogateDebateBackend",
    "run_debate", "DebateRun",
]

DECISIONS = ("PASS", "FAIL")
OUTCOMES = ("PASS", "FAIL", "TIE", "NONE")
_TAG = re.compile(r"\A\s*\[DECISION: (PASS|FAIL)\]")
_CONF = re.compile(r"\A\s*\[DECISION: (?:PASS|FAIL)\][ \t]*\[CONFIDENCE: ([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\]")


# ============================================================================ ballots and votes
class Ballot(NamedTuple):
    decision: str  # "PASS", "FAIL" or "NONE"
    confidence: Decimal | None
    reason: str  # "ok", "untagged", or why the confidence is missing/invalid

    @property
    def tagged(self) -> bool:
        return self.decision in DECISIONS


def parse_decision(text: str | None) -> Ballot:
    """Strict ballot of a reply: the tag must open the reply (see the module docstring)."""
    if not text:
        return Ballot("NONE", None, "untagged: empty reply")
    m = _TAG.match(text)
    if not m:
        return Ballot("NONE", None, "untagged: the reply does not start with [DECISION: PASS] or [DECISION: FAIL]")
    c = _CONF.match(text)
    if not c:
        return Ballot(m.group(1), None, "ok (no confidence tag)")
    conf = Decimal(c.group(1))
    if not (0 <= conf <= 1):
        return Ballot(m.group(1), None, f"ok (confidence {c.group(1)} outside [0, 1] ignored)")
    return Ballot(m.group(1), conf, "ok")


def article_decision(text: str | None) -> str | None:
    """The article's parsing, kept for comparison: substring test on the upper-cased reply, PASS first."""
    op = (text or "").upper()
    if "[DECISION: PASS]" in op:
        return "PASS"
    if "[DECISION: FAIL]" in op:
        return "FAIL"
    return None


def article_consensus(texts: Sequence[str | None]) -> bool:
    """The article's ``check_consensus`` (untagged agents dropped; see the erratum in the module docstring)."""
    decisions = [d for d in (article_decision(t) for t in texts) if d is not None]
    return len(set(decisions)) == 1


class VoteResult(NamedTuple):
    outcome: str  # PASS, FAIL, TIE or NONE
    pass_votes: int
    fail_votes: int
    abstentions: int
    score: float | None  # weighted vote only (exact sum, converted to float)

    def to_dict(self) -> dict:
        return self._asdict()


def _decision(x) -> str | None:
    if isinstance(x, Ballot):
        x = x.decision
    return x if x in DECISIONS else None


def _outcome(p, f, n_valid) -> str:
    if n_valid == 0:
        return "NONE"
    return "PASS" if p > f else "FAIL" if f > p else "TIE"


def majority_vote(decisions: Sequence) -> VoteResult:
    """Simple majority over ``decisions`` ("PASS"/"FAIL"; anything else, or a NONE ballot, abstains)."""
    valid = [d for d in (_decision(x) for x in decisions) if d is not None]
    p, f = valid.count("PASS"), valid.count("FAIL")
    return VoteResult(_outcome(p, f, len(valid)), p, f, len(decisions) - len(valid), None)


def _confidence(c) -> Decimal | None:
    if c is None or isinstance(c, bool):
        return None
    try:
        if isinstance(c, Decimal):
            v = c
        elif isinstance(c, float):
            if not math.isfinite(c):
                return None
            v = Decimal(repr(c))
        elif isinstance(c, (int, str)):
            v = Decimal(str(c).strip())
        else:
            return None
    except InvalidOperation:
        return None
    if not v.is_finite() or not (0 <= v <= 1):
        return None
    return v


def weighted_vote(ballots: Sequence) -> VoteResult:
    """Weighted confidence vote ``score = sum D_i C_i`` over ``ballots``: :class:`Ballot` objects or
    ``(decision, confidence)`` pairs. Invalid decisions or confidences abstain (see the module docstring)."""
    p = f = n = 0
    score = Decimal(0)
    for b in ballots:
        d, c = (b.decision, b.confidence) if isinstance(b, Ballot) else (b[0], b[1])
        d = _decision(d)
        c = _confidence(c)
        if d is None or c is None:
            continue
        n += 1
        if d == "PASS":
            p += 1
            score += c
        else:
            f += 1
            score -= c
    outcome = "NONE" if n == 0 else ("PASS" if score > 0 else "FAIL" if score < 0 else "TIE")
    return VoteResult(outcome, p, f, len(ballots) - n, float(score))


def agreed_decision(decisions: Sequence) -> str | None:
    """The consensus decision: every ballot tagged and all equal; ``None`` otherwise (an untagged reply blocks)."""
    ds = [_decision(x) for x in decisions]
    if not ds or any(d is None for d in ds) or len(set(ds)) != 1:
        return None
    return ds[0]


# ============================================================================ configuration
@dataclass(frozen=True)
class DebateAgent:
    """A persona: ``name`` and ``description`` go into the article's system prompt; ``prior_pass`` is only
    used by the surrogate backend (probability that the persona initially votes PASS)."""

    name: str
    description: str
    prior_pass: float = 0.5


ARTICLE_TASK = "def execute_calculation(exp): return eval(exp) # Fast execution path"
ARTICLE_AGENTS = (
    DebateAgent("Security Agent", "Focuses on vulnerabilities, injections, and safe library usage.", 0.05),
    DebateAgent("Performance Agent", "Focuses on time-complexity, memory layouts, and execution bottlenecks.", 0.85),
    DebateAgent("Quality Agent", "Focuses on exception handling, code styling, and readability.", 0.3),
)


@dataclass(frozen=True)
class DebateConfig:
    name: str = "code_review"
    task: str = ARTICLE_TASK
    agents: tuple[DebateAgent, ...] = ARTICLE_AGENTS
    max_rounds: int = 3
    runs: int = 1
    final_rule: str = "majority"
    ask_confidence: bool = True
    seed: int = 0
    sampling: Sampling = field(default_factory=lambda: Sampling(temperature=0.7, top_p=1.0, max_tokens=250))

    def __post_init__(self):
        if len(self.agents) < 1:
            raise ValueError("agents must list at least one agent")
        names = [a.name for a in self.agents]
        if len(set(names)) != len(names):
            raise ValueError(f"agent names must be unique; got {names}")
        for a in self.agents:
            if not (0 <= float(a.prior_pass) <= 1):
                raise ValueError(f"agent {a.name!r}: prior_pass must be in [0, 1]; got {a.prior_pass!r}")
        for nm, lo in (("max_rounds", 1), ("runs", 1), ("seed", 0)):
            v = getattr(self, nm)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{nm} must be an integer >= {lo}; got {v!r}")
        if self.final_rule not in ("majority", "weighted"):
            raise ValueError(f"final_rule must be 'majority' or 'weighted'; got {self.final_rule!r}")
        if self.final_rule == "weighted" and not self.ask_confidence:
            raise ValueError("final_rule = 'weighted' needs ask_confidence = true (no confidences otherwise)")

    def identity(self) -> dict:
        return json.loads(json.dumps(asdict(self)))


_TOP = {"name", "task", "agents", "max_rounds", "runs", "final_rule", "ask_confidence", "seed", "sampling", "surrogate"}
_SURROGATE = {"persuasion", "malformed", "seed", "confidence_low", "confidence_high"}


def load_debate_config(path=None, overrides: dict | None = None) -> tuple[DebateConfig, dict]:
    """Read a debate TOML file (``None``: the article's code-review scenario) -> ``(config, surrogate options)``.

    Keys: name, task, max_rounds, runs, final_rule ("majority"|"weighted"), ask_confidence, seed;
    ``[[agents]]`` (name, description, prior_pass); ``[sampling]``; ``[surrogate]`` (persuasion, malformed,
    seed, confidence_low, confidence_high).
    """
    raw: dict = read_toml(path) if path is not None else {}
    where = str(path) if path is not None else "config"
    bad = sorted(set(raw) - _TOP)
    if bad:
        raise ValueError(f"{where}: unknown key(s) {', '.join(bad)}; known: {', '.join(sorted(_TOP))}")
    for k, v in (overrides or {}).items():
        if v is None:
            continue
        if k in ("temperature", "top_p", "max_tokens"):
            raw.setdefault("sampling", {})[k] = v
        else:
            raw[k] = v
    kw: dict[str, Any] = {k: raw[k] for k in ("name", "task", "max_rounds", "runs", "final_rule", "ask_confidence",
                                              "seed") if k in raw}
    if "agents" in raw:
        agents = []
        for i, a in enumerate(raw["agents"]):
            extra = sorted(set(a) - {"name", "description", "prior_pass"})
            if extra or "name" not in a or "description" not in a:
                raise ValueError(f"{where}: agents[{i}] needs name and description (and optional prior_pass); "
                                 f"unknown: {extra}")
            agents.append(DebateAgent(str(a["name"]), str(a["description"]), float(a.get("prior_pass", 0.5))))
        kw["agents"] = tuple(agents)
    if "sampling" in raw:
        s = raw["sampling"]
        extra = sorted(set(s) - {"temperature", "top_p", "max_tokens", "seed"})
        if extra:
            raise ValueError(f"{where}: [sampling]: unknown key(s) {extra}")
        kw["sampling"] = Sampling(**{**asdict(DebateConfig().sampling), **s})
    sur = dict(raw.get("surrogate", {}))
    extra = sorted(set(sur) - _SURROGATE)
    if extra:
        raise ValueError(f"{where}: [surrogate]: unknown key(s) {extra}; known: {', '.join(sorted(_SURROGATE))}")
    try:
        cfg = DebateConfig(**kw)
    except TypeError as e:
        raise ValueError(f"{where}: {e}") from None
    return cfg, sur


# ============================================================================ prompts (the article's)
def debate_system_prompt(agent: DebateAgent, ask_confidence: bool = True) -> str:
    s = (f"Role: {agent.name}. Description: {agent.description}. "
         "Always prefix your output with [DECISION: PASS] or [DECISION: FAIL].")
    if ask_confidence:
        s += (" Right after the decision tag, give your confidence as [CONFIDENCE: x] with x between 0.0 and 1.0.")
    return s


def debate_user_prompt(task: str, other_opinions: Sequence[tuple[str, str]] | None = None) -> str:
    """The article's user prompt; ``other_opinions``: ``(agent name, opinion)`` of the OTHER agents."""
    user = f"Task to evaluate:\n{task}\n\n"
    if other_opinions:
        user += "Here are the opinions from the other agents in the previous round:\n"
        for name, op in other_opinions:
            user += f"- {name} wrote: {op}\n"
        user += "\nCritique the other opinions, re-evaluate the task, and output your updated decision and reasoning."
    return user


# ============================================================================ surrogate backend
_REASONS = {
    "PASS": ["Reason: the function is short and the evaluation path is fast.",
             "Reason: execution time is optimal for simple arithmetic expressions.",
             "Reason: the code is readable and does what its name says."],
    "FAIL": ["Reason: the code uses an unsafe eval() execution block on caller input.",
             "Reason: unhandled exception risks in input parsing.",
             "Reason: eval() allows arbitrary code execution; use a safe expression parser."],
}


class SurrogateDebateBackend:
    """Debate agents without an LLM, driven by ``request.meta`` (agent, round, own previous and others' decisions).

    Round 1 (or after an own untagged reply): PASS with the persona's prior probability (``priors[name]``,
    else ``meta["prior_pass"]``, else 0.5). Later rounds: keep the previous decision, except that with
    probability ``persuasion`` the agent adopts the strict majority of the other agents' tagged decisions
    (if there is one). Confidence ~ U(confidence_low, confidence_high), 2 decimals (only when the prompt
    asks for it, ``meta["ask_confidence"]``). With probability ``malformed`` the reply is untagged for the
    strict parser, equally often: the tag in mid-text (which the article's substring check would accept),
    no tag at all, or a lower-case tag. Token counts: ``ceil(chars / 4)`` per message (+4) and reply, as in
    :class:`mascot.llm.deliberation.SurrogateDeliberationBackend`. Deterministic per request seed.
    """

    name = "surrogate"

    def __init__(self, priors: dict[str, float] | None = None, persuasion: float = 0.5, malformed: float = 0.05,
                 seed: int = 0, confidence_low: float = 0.5, confidence_high: float = 1.0,
                 model: str = "surrogate-debate"):
        for nm, v in (("persuasion", persuasion), ("malformed", malformed), ("confidence_low", confidence_low),
                      ("confidence_high", confidence_high)):
            if not (0 <= float(v) <= 1):
                raise ValueError(f"surrogate.{nm} must be in [0, 1]; got {v!r}")
        if confidence_low > confidence_high:
            raise ValueError("surrogate.confidence_low must be <= confidence_high")
        self.priors = dict(priors or {})
        self.persuasion, self.malformed = float(persuasion), float(malformed)
        self.confidence_low, self.confidence_high = float(confidence_low), float(confidence_high)
        self.seed = int(seed)
        self.model = model

    def options(self) -> dict:
        return {"priors": self.priors, "persuasion": self.persuasion, "malformed": self.malformed, "seed": self.seed,
                "confidence_low": self.confidence_low, "confidence_high": self.confidence_high}

    def describe(self) -> dict:
        return {"backend": self.name, "model": self.model, **self.options()}

    def generate(self, requests: list[Request]) -> list[Response]:
        from mascot.llm.deliberation import _rng, count_tokens

        out = []
        for req in requests:
            meta = req.meta or {}
            ptok = sum(count_tokens(m.get("content", "")) + 4 for m in req.messages)
            if meta.get("kind") != "debate":
                out.append(Response("", ptok, 0,
                                    error="surrogate debate backend: request has no meta['kind'] == 'debate'"))
                continue
            rng = _rng(self.seed, req)
            u_prior, u_pers, u_bad, u_conf = rng.random(4)
            kind, pick = int(rng.integers(3)), int(rng.integers(3))
            prior = self.priors.get(meta.get("agent"), meta.get("prior_pass", 0.5))
            prev = meta.get("previous")
            if meta.get("round", 1) <= 1 or prev not in DECISIONS:
                dec = "PASS" if u_prior < prior else "FAIL"
            else:
                dec = prev
                others = [d for d in meta.get("others", []) if d in DECISIONS]
                p, f = others.count("PASS"), others.count("FAIL")
                maj = "PASS" if p > f else "FAIL" if f > p else None
                if maj is not None and u_pers < self.persuasion:
                    dec = maj
            conf = self.confidence_low + (self.confidence_high - self.confidence_low) * u_conf
            reason = _REASONS[dec][pick]
            ctag = f" [CONFIDENCE: {conf:.2f}]" if meta.get("ask_confidence", True) else ""
            if u_bad < self.malformed:
                if kind == 0:
                    text = f"After weighing the other reviews, my verdict is [DECISION: {dec}]{ctag}. {reason}"
                elif kind == 1:
                    text = f"{reason} I would {'approve' if dec == 'PASS' else 'reject'} this change."
                else:
                    text = f"[decision: {dec.lower()}]{ctag.lower()} {reason}"
            else:
                text = f"[DECISION: {dec}]{ctag} {reason}"
            out.append(Response(text, ptok, count_tokens(text), finish_reason="stop", latency_s=0.0))
        return out


# ============================================================================ the debate harness
class DebateRun(NamedTuple):
    out: Path
    outcomes: list[dict]  # per debate: run, rounds, consensus, decision, tokens, ...
    requests: int
    wall_s: float


def _spec_of(backend) -> dict:
    spec = {"name": getattr(backend, "name", type(backend).__name__), "model": getattr(backend, "model", None)}
    if isinstance(backend, SurrogateDebateBackend):
        spec["options"] = backend.options()
    return spec


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


def run_debate(config: DebateConfig, out, backend, *, backend_spec: dict | None = None, progress: bool = True,
               command: Sequence[str] | None = None) -> DebateRun:
    """Run (or resume) ``config.runs`` debates in ``out`` (see the module docstring).

    ``backend``: a backend or a zero-argument factory (then pass ``backend_spec``), called only if rounds remain.
    """
    from mascot.llm.deliberation import _append_lines, _canon, _now, _seed64, read_jsonl

    if not isinstance(config, DebateConfig):
        raise ValueError("config must be a DebateConfig")
    out = Path(out)
    factory, backend_spec = resolve_backend(backend, backend_spec, _spec_of)
    identity = _canon({"config": config.identity(), "backend": backend_spec})
    meta = open_run_dir(out, kind="mascot-debate", identity=identity, label="a debate",
                        orphan=orphan_message(out, "transcript.jsonl"),
                        fresh={"kind": "mascot-debate", "identity": identity, "created": _now(), "sessions": []})
    run_json = out / "run.json"
    session_id = len(meta["sessions"])
    session = {"started": _now(), "command": list(command) if command else None}
    meta["sessions"].append(session)
    atomic_write_text(run_json, json.dumps(meta, indent=2) + "\n")

    agents = config.agents
    n = len(agents)
    path = out / "transcript.jsonl"
    state = _restore(read_jsonl(path, repair=True), n)
    runs = {r: state.get(r, {"rounds": [], "replies": []}) for r in range(config.runs)}

    def done(st):
        return bool(st["rounds"]) and st["rounds"][-1].get("status") is not None

    say = (lambda m: print(f"[debate] {m}", file=sys.stderr, flush=True)) if progress else (lambda m: None)
    t_start = time.perf_counter()
    n_requests = 0
    b = None
    while not all(done(st) for st in runs.values()):
        if b is None:
            b = factory() if factory is not None else backend
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
                m = {"kind": "debate", "run": run, "round": rnd, "agent": a.name, "agent_index": i,
                     "prior_pass": a.prior_pass, "ask_confidence": config.ask_confidence,
                     "previous": None if prev is None else prev[i]["decision"],
                     "others": [] if prev is None else [prev[j]["decision"] for j in range(n) if j != i]}
                reqs.append(Request(messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                                    sampling=config.sampling, seed=_seed64(config.seed, run, rnd, i), meta=m))
                owners.append((run, rnd, i))
        resps = b.generate(reqs)
        if len(resps) != len(reqs):
            raise RuntimeError(f"backend returned {len(resps)} responses for {len(reqs)} requests")
        n_requests += len(reqs)
        by_run: dict[int, list[dict]] = {}
        for req, resp, (run, rnd, i) in zip(reqs, resps, owners):
            text = "" if resp.error else (resp.text or "")
            bal = parse_decision(text)
            by_run.setdefault(run, []).append({
                "type": "reply", "session": session_id, "time": _now(), "run": run, "round": rnd,
                "agent": agents[i].name, "agent_index": i, "seed": req.seed, "system": req.messages[0]["content"],
                "user": req.messages[1]["content"], "reply": text, "decision": bal.decision,
                "confidence": None if bal.confidence is None else str(bal.confidence),
                "ballot_reason": bal.reason, "article_decision": article_decision(text),
                "prompt_tokens": int(resp.prompt_tokens or 0), "completion_tokens": int(resp.completion_tokens or 0),
                "finish_reason": resp.finish_reason, "error": resp.error})
        lines = []
        for run, reps in by_run.items():
            st = runs[run]
            rnd = reps[0]["round"]
            ballots = [Ballot(r["decision"], None if r["confidence"] is None else Decimal(r["confidence"]), "")
                       for r in reps]
            agreed = agreed_decision(ballots)
            maj, wv = majority_vote(ballots), weighted_vote(ballots)
            status = "consensus" if agreed else ("max_rounds" if rnd >= config.max_rounds else None)
            final = maj if config.final_rule == "majority" else wv
            decision = agreed if agreed else (None if status is None else final.outcome)
            ptok = sum(r["prompt_tokens"] for r in reps)
            ctok = sum(r["completion_tokens"] for r in reps)
            rl = {"type": "round", "session": session_id, "run": run, "round": rnd,
                  "decisions": [r["decision"] for r in reps], "untagged": sum(r["decision"] == "NONE" for r in reps),
                  "consensus": agreed is not None, "article_consensus": article_consensus([r["reply"] for r in reps]),
                  "majority": maj.to_dict(), "weighted": wv.to_dict(), "prompt_tokens": ptok, "completion_tokens": ctok,
                  "status": status, "decision": decision}
            lines += reps + [rl]
            st["rounds"].append(rl)
            st["replies"].append(reps)
        _append_lines(path, lines)
        rnds = sorted({ln["round"] for ln in lines if ln["type"] == "round"})
        say(f"round {','.join(map(str, rnds))}: " + "; ".join(
            f"#{ln['run']} {'/'.join(ln['decisions'])}"
            + (f" -> {ln['status']}: {ln['decision']}" if ln["status"] else "")
            for ln in lines if ln["type"] == "round")[:400])
    outcomes = []
    for run, st in sorted(runs.items()):
        last = st["rounds"][-1]
        outcomes.append({"run": run, "rounds": last["round"], "consensus": bool(last["consensus"]),
                         "decision": last["decision"], "tokens": int(sum(r["prompt_tokens"] + r["completion_tokens"]
                                                                          for r in st["rounds"])),
                         "prompt_tokens": int(sum(r["prompt_tokens"] for r in st["rounds"])),
                         "completion_tokens": int(sum(r["completion_tokens"] for r in st["rounds"])),
                         "untagged": int(sum(r["untagged"] for r in st["rounds"])),
                         "article_consensus_rounds": [r["round"] for r in st["rounds"] if r["article_consensus"]]})
    wall = time.perf_counter() - t_start
    session.update(finished=_now(), wall_s=round(wall, 3), requests=n_requests)
    meta["complete"] = True
    meta["outcomes"] = outcomes
    atomic_write_text(run_json, json.dumps(meta, indent=2) + "\n")
    (out / "summary.json").write_text(json.dumps(outcomes, indent=2) + "\n")
    return DebateRun(out, outcomes, n_requests, wall)
