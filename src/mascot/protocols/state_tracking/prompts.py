"""Prompts of the state-tracking trials ("Predictive Maps of Multi-Agent Reasoning", Appendix C).

Three prompts, as the paper ran them, with its placeholders filled:

* **agent** (chain agents, star leaves, mesh first round): the base prompt ``BASE_PROMPT`` (verbatim,
  :mod:`mascot.theory.state_tracking`) is the **system** message and the current state is the **user**
  message, ``"CURRENT STATE:\\n" + json.dumps(state)`` (compact one-line JSON, e.g.
  ``CURRENT STATE:\\n{"Value": 50.0, "Parity": "A", "Level": 3}``). The paper gives the base prompt but
  not the framing of the state; this is ours.
* **judge** (star): :data:`JUDGE_TEMPLATE` with ``n_leaf_agents`` (the number of proposals shown),
  ``rules_text`` (``RULES_TEXT``), ``json.dumps(proposals, indent=2)`` and ``json.dumps(judge_state,
  indent=2)`` filled in, sent as a single **user** message (no system message).
* **revision** (mesh second round): :data:`REVISION_TEMPLATE` with ``n_agents - 1``, ``rules_text``,
  ``json.dumps(j_state, indent=2)`` and ``json.dumps(first_pass, indent=2)`` filled in, a single **user**
  message.

The paper's text was extracted from a PDF that lost line breaks and the curly braces of the JSON
"Format:" lines; both templates restore them as in ``BASE_PROMPT`` (one line per sentence group; the
``Format:`` object in braces). Proposals are lists of ``{"Value", "Parity", "Level"}`` objects in agent
order (the agents' "Reasoning" is not forwarded); agents whose reply could not be parsed after all
retries abstain and are left out of the list. Every agent context is fresh: a request carries only the
ruleset and the state (plus proposals for the judge and the revision round).

:func:`read_prompt` is the inverse: from the messages of any of the three prompts it recovers the role, the
input state and the proposals, exactly (floats are written with ``repr``, which ``json.loads`` reads back
to the same float, and NaN/Infinity as ``json.dumps`` writes them). The surrogate agents read their task
this way, so they see what a model sees.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from mascot.errors import InputError
from mascot.theory.state_tracking import BASE_PROMPT, RULES_TEXT

__all__ = [
    "AGENT_SCHEMA",
    "FINAL_SCHEMA",
    "JUDGE_TEMPLATE",
    "REVISION_TEMPLATE",
    "STATE_PREFIX",
    "agent_messages",
    "dumps_indent2",
    "judge_messages",
    "judge_prompt",
    "Prompt",
    "read_prompt",
    "revision_messages",
    "revision_prompt",
    "state_json",
]

#: The user message of an agent is this prefix followed by ``json.dumps(state)``.
STATE_PREFIX = "CURRENT STATE:\n"

_FORMAT = 'Format: {"Value": <float>, "Parity": "<A or B>", "Level": <integer>}'

#: Star judge prompt (Appendix C), verbatim with line breaks and braces restored; fill with :func:`judge_prompt`.
JUDGE_TEMPLATE = (
    "You are a judge agent responsible for determining the single correct JSON state.\n"
    "You have received proposals from {n_leaf_agents} independent agents who each applied the same ruleset "
    "to the same input state.\n"
    "RULESET TO FOLLOW:\n"
    "{rules_text}\n"
    "PROPOSALS FROM LEAF AGENTS:\n"
    "{proposals}\n"
    "CURRENT INPUT STATE (what all leaf agents received):\n"
    "{judge_state}\n"
    "Review the proposals critically and calculate your own response if you feel there are errors in the "
    "responses.\n"
    "Respond with ONLY a valid JSON object. No explanation, no extra text.\n" + _FORMAT
)

#: Mesh revision prompt (Appendix C), verbatim with line breaks and braces restored; fill with
#: :func:`revision_prompt`. ``{n_others}`` is the paper's ``n_agents - 1``.
REVISION_TEMPLATE = (
    "You are a reasoning agent in a peer deliberation round. In the first round, you and {n_others} other "
    "agents independently applied the same ruleset to the same input state.\n"
    "RULESET TO FOLLOW:\n"
    "{rules_text}\n"
    "INPUT STATE (what all agents received in round one):\n"
    "{j_state}\n"
    "FIRST-ROUND PROPOSALS FROM ALL AGENTS:\n"
    "{first_pass}\n"
    "Review the proposals critically and calculate your own response if you feel there are errors in the "
    "responses.\n"
    "Respond with ONLY a valid JSON object. No explanation, no extra text.\n" + _FORMAT
)

_STATE_PROPS = {
    "Value": {"type": "number"},
    "Parity": {"type": "string", "enum": ["A", "B"]},
    "Level": {"type": "integer", "minimum": 1, "maximum": 9},
}
#: JSON schema of an agent reply (``--structured-output``): the base prompt's schema, Reasoning first.
AGENT_SCHEMA = {
    "type": "object",
    "properties": {"Reasoning": {"type": "string"}, **_STATE_PROPS},
    "required": ["Reasoning", "Value", "Parity", "Level"],
    "additionalProperties": False,
}
#: JSON schema of a judge / revision reply (their "Format:" line has no Reasoning).
FINAL_SCHEMA = {
    "type": "object",
    "properties": dict(_STATE_PROPS),
    "required": ["Value", "Parity", "Level"],
    "additionalProperties": False,
}


def _state(s: Mapping) -> dict:
    """The three task fields in schema order (drops anything else, e.g. "Reasoning")."""
    return {"Value": s["Value"], "Parity": s["Parity"], "Level": s["Level"]}


def _plain(s: Mapping) -> bool:
    """Fields whose JSON is their Python repr (finite float or int Value, A/B Parity, int Level)."""
    v, p, lv = s["Value"], s["Parity"], s["Level"]
    return ((type(v) is float and v - v == 0) or type(v) is int) and p in ("A", "B") and type(lv) is int


def state_json(state: Mapping) -> str:
    """``json.dumps`` of the state's three fields, one line (the agent's user message body)."""
    if _plain(state):  # fast path, byte-identical to json.dumps (tested)
        return '{"Value": %r, "Parity": "%s", "Level": %d}' % (state["Value"], state["Parity"], state["Level"])  # noqa: UP031  (%-formats match json.dumps's output byte for byte, and are faster)
    return json.dumps(_state(state))


def _indented_state(s: Mapping, pad: str) -> str:
    return '%s{\n%s  "Value": %r,\n%s  "Parity": "%s",\n%s  "Level": %d\n%s}' % (  # noqa: UP031  (%-formats match json.dumps's output byte for byte, and are faster)
        pad,
        pad,
        s["Value"],
        pad,
        s["Parity"],
        pad,
        s["Level"],
        pad,
    )


def dumps_indent2(obj) -> str:
    """``json.dumps(obj, indent=2)`` for a state or a list of states (byte-identical; fast path for the
    common case, since the standard library's indenting encoder is pure Python)."""
    if isinstance(obj, Mapping):
        return _indented_state(obj, "") if _plain(obj) else json.dumps(_state(obj), indent=2)
    items = list(obj)
    if not items:
        return "[]"
    if all(_plain(s) for s in items):
        return "[\n" + ",\n".join(_indented_state(s, "  ") for s in items) + "\n]"
    return json.dumps([_state(s) for s in items], indent=2)


def agent_messages(state: Mapping) -> list[dict[str, str]]:
    """System = ``BASE_PROMPT``; user = ``"CURRENT STATE:\\n" + json.dumps(state)``."""
    return [{"role": "system", "content": BASE_PROMPT}, {"role": "user", "content": STATE_PREFIX + state_json(state)}]


def judge_prompt(proposals: Sequence[Mapping], judge_state: Mapping, rules_text: str = RULES_TEXT) -> str:
    """The star judge prompt with ``n_leaf_agents = len(proposals)``."""
    return (
        JUDGE_TEMPLATE.replace("{n_leaf_agents}", str(len(proposals)))
        .replace("{rules_text}", rules_text)
        .replace("{proposals}", dumps_indent2(proposals))
        .replace("{judge_state}", dumps_indent2(judge_state))
    )


def revision_prompt(
    first_pass: Sequence[Mapping], j_state: Mapping, n_agents: int, rules_text: str = RULES_TEXT
) -> str:
    """The mesh revision prompt; ``n_agents`` is the number of first-round agents (the paper's n_agents)."""
    return (
        REVISION_TEMPLATE.replace("{n_others}", str(int(n_agents) - 1))
        .replace("{rules_text}", rules_text)
        .replace("{j_state}", dumps_indent2(j_state))
        .replace("{first_pass}", dumps_indent2(first_pass))
    )


def judge_messages(proposals: Sequence[Mapping], judge_state: Mapping) -> list[dict[str, str]]:
    return [{"role": "user", "content": judge_prompt(proposals, judge_state)}]


def revision_messages(first_pass: Sequence[Mapping], j_state: Mapping, n_agents: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": revision_prompt(first_pass, j_state, n_agents)}]


# ----------------------------------------------------------------------------- reading a prompt back
class Prompt(NamedTuple):
    """What a request built by this module asks: ``role`` ("agent", "judge" or "revision"), the input
    ``state`` and the ``proposals`` shown (empty for an agent)."""

    role: str
    state: dict
    proposals: list


def _pieces(template: str, names: Sequence[str]) -> list[str]:
    """The literal text of ``template`` around its placeholders ``names`` (which occur in that order)."""
    out, rest = [], template
    for n in names:
        head, sep, rest = rest.partition("{" + n + "}")
        assert sep, n
        out.append(head)
    return out + [rest]


_JUDGE = _pieces(JUDGE_TEMPLATE, ("n_leaf_agents", "rules_text", "proposals", "judge_state"))
_REVISION = _pieces(REVISION_TEMPLATE, ("n_others", "rules_text", "j_state", "first_pass"))


def _as_state(obj) -> dict:
    if not isinstance(obj, dict) or not {"Value", "Parity", "Level"} <= set(obj):
        raise InputError(f"not a state: {obj!r:.80}")
    return _state(obj)


def _tail_blocks(content: str, pieces: list[str]) -> tuple[str, str]:
    """The two JSON blocks that end a judge or revision prompt (between ``pieces[2]``, ``pieces[3]`` and
    the fixed ending ``pieces[4]``). Found from the end: the blocks hold only numbers, "A"/"B" and the
    field names, so the literal headers cannot occur inside them, while the rules text before them may
    say anything."""
    if not (content.startswith(pieces[0]) and content.endswith(pieces[4])):
        raise InputError("not this prompt")
    end = len(content) - len(pieces[4])
    i3 = content.rfind(pieces[3], 0, end)
    i2 = content.rfind(pieces[2], 0, i3) if i3 >= 0 else -1
    if i2 < 0:
        raise InputError("prompt headers not found")
    return content[i2 + len(pieces[2]) : i3], content[i3 + len(pieces[3]) : end]


def read_prompt(messages: Sequence[Mapping]) -> Prompt:
    """The role, input state and proposals of messages built by :func:`agent_messages`,
    :func:`judge_messages` or :func:`revision_messages` (exact round trip of every field). Raises
    ``ValueError`` for messages of any other form."""
    if not messages or not isinstance(messages[-1], Mapping) or messages[-1].get("role") != "user":
        raise InputError("the last message must be the user's")
    content = messages[-1].get("content")
    if not isinstance(content, str):
        raise InputError("the user message has no text content")
    if content.startswith(STATE_PREFIX):
        return Prompt("agent", _as_state(json.loads(content[len(STATE_PREFIX) :])), [])
    if content.startswith(_JUDGE[0]):
        shown, state = _tail_blocks(content, _JUDGE)
        role = "judge"
    elif content.startswith(_REVISION[0]):
        state, shown = _tail_blocks(content, _REVISION)
        role = "revision"
    else:
        raise InputError("not a state-tracking prompt (agent, judge or revision)")
    props = json.loads(shown)
    if not isinstance(props, list):
        raise InputError("the proposals are not a list")
    return Prompt(role, _as_state(json.loads(state)), [_as_state(p) for p in props])
