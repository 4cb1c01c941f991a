"""The article's debate prompts, word for word, plus one added sentence asking for the confidence tag when
``ask_confidence`` (needed by the weighted vote; off: the article's prompts exactly)."""

from __future__ import annotations

from collections.abc import Sequence

from mascot.protocols.debate.config import DebateAgent

__all__ = ["debate_system_prompt", "debate_user_prompt"]


def debate_system_prompt(agent: DebateAgent, ask_confidence: bool = True) -> str:
    """The article's system prompt for ``agent`` (its name and description, and the decision tag it must open
    with); ``ask_confidence`` adds the one sentence asking for ``[CONFIDENCE: x]``.

    Returns: the prompt text.
    """
    s = (
        f"Role: {agent.name}. Description: {agent.description}. "
        "Always prefix your output with [DECISION: PASS] or [DECISION: FAIL]."
    )
    if ask_confidence:
        s += " Right after the decision tag, give your confidence as [CONFIDENCE: x] with x between 0.0 and 1.0."
    return s


def debate_user_prompt(task: str, other_opinions: Sequence[tuple[str, str]] | None = None) -> str:
    """The article's user prompt; ``other_opinions``: ``(agent name, opinion)`` of the OTHER agents.

    Arguments: ``task`` the task text; ``other_opinions`` as above (None in round 1).

    Returns: the prompt text.
    """
    user = f"Task to evaluate:\n{task}\n\n"
    if other_opinions:
        user += "Here are the opinions from the other agents in the previous round:\n"
        for name, op in other_opinions:
            user += f"- {name} wrote: {op}\n"
        user += "\nCritique the other opinions, re-evaluate the task, and output your updated decision and reasoning."
    return user
