"""Configuration of a debate (the voting/debate article): personas, task, rounds, the final voting rule,
sampling; read from TOML by :func:`load_debate_config`. The default is the article's code-review scenario
(:mod:`mascot.papers`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from mascot import papers
from mascot.backends.base import Sampling
from mascot.errors import InputError
from mascot.io import read_toml
from mascot.limits import check_int

__all__ = ["DebateAgent", "ARTICLE_TASK", "ARTICLE_AGENTS", "DebateConfig", "load_debate_config"]


@dataclass(frozen=True)
class DebateAgent:
    """A persona: ``name`` and ``description`` go into the article's system prompt; ``prior_pass`` is only
    used by the surrogate backend (probability that the persona initially votes PASS)."""

    name: str
    description: str
    prior_pass: float = 0.5


ARTICLE_TASK = papers.ARTICLE_TASK
ARTICLE_AGENTS = tuple(DebateAgent(**a) for a in papers.ARTICLE_AGENTS)


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
            raise InputError("agents must list at least one agent")
        names = [a.name for a in self.agents]
        if len(set(names)) != len(names):
            raise InputError(f"agent names must be unique; got {names}")
        for a in self.agents:
            if not (0 <= float(a.prior_pass) <= 1):
                raise InputError(f"agent {a.name!r}: prior_pass must be in [0, 1]; got {a.prior_pass!r}")
        for nm, lo in (("max_rounds", 1), ("runs", 1), ("seed", 0)):
            check_int(nm, getattr(self, nm), lo)
        if not isinstance(self.task, str) or not self.task.strip():
            raise InputError(f"task must be a non-empty text; got {self.task!r}")
        if not isinstance(self.ask_confidence, bool):
            raise InputError(f"ask_confidence must be true or false; got {self.ask_confidence!r}")
        if self.final_rule not in ("majority", "weighted"):
            raise InputError(f"final_rule must be 'majority' or 'weighted'; got {self.final_rule!r}")
        if self.final_rule == "weighted" and not self.ask_confidence:
            raise InputError("final_rule = 'weighted' needs ask_confidence = true (no confidences otherwise)")

    def identity(self) -> dict:
        return json.loads(json.dumps(asdict(self)))


_TOP = {"name", "task", "agents", "max_rounds", "runs", "final_rule", "ask_confidence", "seed", "sampling", "surrogate"}
_SURROGATE = {"persuasion", "malformed", "seed", "confidence_low", "confidence_high"}


def load_debate_config(path=None, overrides: dict | None = None) -> tuple[DebateConfig, dict]:
    """Read a debate TOML file (``None``: the article's code-review scenario) -> ``(config, surrogate options)``.

    Keys: name, task, max_rounds, runs, final_rule ("majority"|"weighted"), ask_confidence, seed;
    ``[[agents]]`` (name, description, prior_pass); ``[sampling]``; ``[surrogate]`` (persuasion, malformed,
    seed, confidence_low, confidence_high).

    Arguments: ``path`` the TOML file or None; ``overrides`` top-level keys to set over the file's (e.g.
    ``{"runs": 3}``).
    """
    raw: dict = read_toml(path) if path is not None else {}
    where = str(path) if path is not None else "config"
    bad = sorted(set(raw) - _TOP)
    if bad:
        raise InputError(f"{where}: unknown key(s) {', '.join(bad)}; known: {', '.join(sorted(_TOP))}")
    for k, v in (overrides or {}).items():
        if v is None:
            continue
        if k in ("temperature", "top_p", "max_tokens"):
            raw.setdefault("sampling", {})[k] = v
        else:
            raw[k] = v
    kw: dict[str, Any] = {
        k: raw[k] for k in ("name", "task", "max_rounds", "runs", "final_rule", "ask_confidence", "seed") if k in raw
    }
    if path is not None and "agents" not in raw:  # a file of one's own: its agents are its own, never the article's
        raise InputError(
            f"{where}: no [[agents]]; give at least one (name, description, optional prior_pass), as "
            "configs/debate/code_review.toml does"
        )
    if "agents" in raw:
        agents = []
        for i, a in enumerate(raw["agents"]):
            extra = sorted(set(a) - {"name", "description", "prior_pass"})
            if extra or "name" not in a or "description" not in a:
                raise InputError(
                    f"{where}: agents[{i}] needs name and description (and optional prior_pass); unknown: {extra}"
                )
            try:
                prior = float(a.get("prior_pass", 0.5))
            except (TypeError, ValueError):
                raise InputError(f"{where}: agents[{i}].prior_pass must be a number; got {a['prior_pass']!r}") from None
            agents.append(DebateAgent(str(a["name"]), str(a["description"]), prior))
        kw["agents"] = tuple(agents)
    if "sampling" in raw:
        s = raw["sampling"]
        extra = sorted(set(s) - {"temperature", "top_p", "max_tokens", "seed"})
        if extra:
            raise InputError(f"{where}: [sampling]: unknown key(s) {extra}")
        kw["sampling"] = Sampling(**{**asdict(DebateConfig().sampling), **s})
    sur = dict(raw.get("surrogate", {}))
    extra = sorted(set(sur) - _SURROGATE)
    if extra:
        raise InputError(f"{where}: [surrogate]: unknown key(s) {extra}; known: {', '.join(sorted(_SURROGATE))}")
    try:
        cfg = DebateConfig(**kw)
    except TypeError as e:
        raise InputError(f"{where}: {e}") from None
    return cfg, sur
