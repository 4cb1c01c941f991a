"""Majority and weighted-confidence voting and iterative multi-agent debate (the voting/debate article).

Modules: ``voting`` (strict ballots, the article's check, majority and weighted votes), ``config``
(personas, :class:`DebateConfig`), ``prompts`` (the article's), ``surrogate`` (agents without an LLM) and
``harness`` (:func:`run_debate`).
"""

from mascot.protocols.debate.config import ARTICLE_AGENTS, ARTICLE_TASK, DebateAgent, DebateConfig, load_debate_config
from mascot.protocols.debate.harness import DebateRun, run_debate
from mascot.protocols.debate.prompts import debate_system_prompt, debate_user_prompt
from mascot.protocols.debate.surrogate import SurrogateDebateBackend
from mascot.protocols.debate.voting import (
    DECISIONS,
    OUTCOMES,
    Ballot,
    VoteResult,
    agreed_decision,
    article_consensus,
    article_decision,
    majority_vote,
    parse_decision,
    weighted_vote,
)

__all__ = [
    "DECISIONS",
    "OUTCOMES",
    "Ballot",
    "parse_decision",
    "article_decision",
    "article_consensus",
    "VoteResult",
    "majority_vote",
    "weighted_vote",
    "agreed_decision",
    "DebateAgent",
    "ARTICLE_TASK",
    "ARTICLE_AGENTS",
    "DebateConfig",
    "load_debate_config",
    "debate_system_prompt",
    "debate_user_prompt",
    "SurrogateDebateBackend",
    "run_debate",
    "DebateRun",
]

from mascot import submodule_loader  # noqa: E402

__getattr__ = submodule_loader(__name__, __path__)  # (mascot.protocols.debate.MODULE after import mascot)
