"""The deliberation's prompts (consensus paper, Sec. V-C): a role's system prompt, round 0's opening, the
prompt of round ``k`` (the previous proposals of the agents it reads, with their influence weights ``w_ij``),
the note appended when a reply is retried, and the JSON schema for structured output."""

from __future__ import annotations

import json

from mascot.protocols.deliberation.config import DeliberationConfig, Role

__all__ = ["system_prompt", "initial_messages", "round_messages", "retry_messages", "json_schema", "prompt_chars"]


def _fmt_vec(v) -> str:
    return "[" + ", ".join(f"{float(x):.3f}" for x in v) + "]"


def system_prompt(cfg: DeliberationConfig, role: Role) -> str:
    """The system prompt of one agent: ``role``'s sentence, the task and axes of ``cfg`` and the JSON reply asked
    for (the consensus paper's deliberation, Sec. V-C).

    Returns: the prompt text.
    """
    axes = "\n".join(f"{i + 1}. {a.name}: 0 = {a.low}, 1 = {a.high}" for i, a in enumerate(cfg.axes))
    return (
        f"{role.prompt}\n\n"
        f"You are one of {cfg.n} specialists who must agree on one plan for this project:\n{cfg.task}\n\n"
        f"You state your position as a design-preference vector of {cfg.d} numbers between 0 and 1, one per axis:\n"
        f"{axes}\n\n"
        "In every round you see proposals from the previous round -- your own and some colleagues' -- each "
        "with an influence weight. The weights sum to 1; use them as a guideline for how strongly each "
        "proposal should pull your new vector. Move toward consensus in every round without compromising "
        "your core values.\n\n"
        "Reply with one JSON object and nothing else:\n"
        f'{{"vector": [{cfg.d} numbers between 0 and 1], "reasoning": "<at most two sentences>"}}'
    )


def initial_messages(cfg: DeliberationConfig, role: Role) -> list[dict[str, str]]:
    """The round-0 chat messages of one agent (``cfg``'s task, ``role``'s prompt): the system prompt and the
    request for an initial position.

    Returns: a list of chat messages (``role``, ``content``).
    """
    return [
        {"role": "system", "content": system_prompt(cfg, role)},
        {
            "role": "user",
            "content": f"Round 0. As the {role.title}, state your initial position on the "
            "project. Reply with the JSON object only.",
        },
    ]


def round_messages(cfg: DeliberationConfig, role: Role, k: int, inputs: list[dict]) -> list[dict[str, str]]:
    """Prompt of round ``k`` for one agent; ``inputs``: ``[{"agent": j, "title": ..., "self": bool,
    "vector": [...], "reasoning": "...", "weight": w_ij}, ...]`` (own proposal first).

    Arguments: ``cfg`` the :class:`DeliberationConfig`; ``role`` the agent's :class:`Role`; ``k`` the round;
    ``inputs`` as above.

    Returns: a list of chat messages (``role``, ``content``).
    """
    lines = [f"Round {k}. Proposals from round {k - 1}:"]
    for x in inputs:
        who = "Your own previous proposal" if x["self"] else x["title"]
        reasoning = json.dumps(x.get("reasoning") or "", ensure_ascii=False)
        lines.append(
            f"- {who} (influence weight {x['weight']:.2f}): vector {_fmt_vec(x['vector'])}; reasoning: {reasoning}"
        )
    lines.append("\nUpdate your design-preference vector. Reply with the JSON object only.")
    return [{"role": "system", "content": system_prompt(cfg, role)}, {"role": "user", "content": "\n".join(lines)}]


def retry_messages(messages: list[dict], reason: str, d: int) -> list[dict]:
    """``messages`` with a note naming why the previous reply could not be used (one retry attempt)."""
    note = (
        f"\n\n(Your previous reply could not be used: {reason}. Reply with only the JSON object "
        f'{{"vector": [{d} numbers between 0 and 1], "reasoning": "..."}}.)'
    )
    out = [dict(m) for m in messages]
    out[-1]["content"] += note
    return out


def json_schema(d: int) -> dict:
    """The JSON schema of a reply with a ``d``-vector (for backends with structured output)."""
    return {
        "type": "object",
        "properties": {
            "vector": {
                "type": "array",
                "items": {"type": "number", "minimum": 0, "maximum": 1},
                "minItems": d,
                "maxItems": d,
            },
            "reasoning": {"type": "string"},
        },
        "required": ["vector", "reasoning"],
    }


def prompt_chars(messages) -> int:
    """Characters of all message contents (the harness predicts a round's tokens from them)."""
    return sum(len(m["content"]) for m in messages)
