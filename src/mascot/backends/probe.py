"""Know the server: a probe of what an OpenAI-compatible server does with mascot's requests.

An OpenAI-compatible server may accept ``temperature``, ``top_p``, ``seed`` and ``response_format`` and
quietly not act on them. The probe sends a few tiny requests (16 and 32 completion tokens) before a run's
first stage and reports what it saw:

* **sampling**: the same prompt at temperature 1.0, top_p 1.0 with seeds 1 and 2 (and 3 when the first two
  agree). Identical replies for every seed mean the server ignores sampling (it decodes greedily or drops
  the seed): verdict ``"ignored"`` and a warning on stderr; different replies: ``"honoured"``.
* **structured output** (only when the run asks for it): a prompt that invites prose, with a JSON schema in
  ``response_format`` that only ``{"answer": <integer>}`` satisfies. A server that enforces the schema
  returns exactly that; one that ignores it returns prose: verdict ``"ignored"`` and a warning.

A probe request that fails (HTTP status, timeout) gives the verdict ``"unknown"`` with the error and no
warning; the run's own requests then meet (and report) the same failure. A server nobody runs (connection
refused, unknown host, no route) stops :class:`~mascot.backends.openai.OpenAIBackend` at once instead. The
probe is one attempt per request, no retries.

What servers do (measured with ``transformers serve`` of transformers 5.24 on SmolLM2-135M-Instruct; see
the README for vLLM and llama.cpp): ``transformers serve`` samples only when the model's
``generation_config.json`` sets ``do_sample`` (else every seed and temperature gives the greedy reply), and
ignores ``response_format``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from mascot.backends.base import Request, Response, Sampling
from mascot.log import get_logger

_log = get_logger(__name__)

__all__ = ["PROBE_SCHEMA", "follows_probe_schema", "probe_server"]

SAMPLING_MESSAGES = [{"role": "user", "content": "Write one sentence about any animal you like."}]
SAMPLING_PROBE = {"temperature": 1.0, "top_p": 1.0, "max_tokens": 16}
SEEDS = (1, 2, 3)
STRUCTURED_MESSAGES = [{"role": "user", "content": "Say hello to me in one short sentence."}]
PROBE_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
    "additionalProperties": False,
}


def follows_probe_schema(text: str) -> bool:
    """Whether ``text`` is a JSON object that :data:`PROBE_SCHEMA` accepts: exactly ``{"answer": <int>}``."""
    try:
        obj = json.loads(text.strip())
    except ValueError:
        return False
    return (
        isinstance(obj, dict)
        and set(obj) == {"answer"}
        and isinstance(obj["answer"], int)
        and not isinstance(obj["answer"], bool)
    )


def _warn(line: str) -> None:
    _log.warning(line.removeprefix("mascot: warning: "))


def _short(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def probe_server(
    ask: Callable[[Request], Response], where: str, *, structured: bool = False, warn: Callable[[str], None] = _warn
) -> dict:
    """Probe a server through ``ask`` (one request in, one :class:`Response` out, no retries) and return
    the findings ``{"sampling": {...}, "structured_output": {...} or None, "probe_s": seconds}``; each
    finding has a ``verdict`` (``"honoured"``, ``"ignored"`` or ``"unknown"``) and what it was decided
    from. ``where`` names the server in the warnings (:func:`mascot.backends.base.endpoint`)."""
    t0 = time.perf_counter()
    findings: dict = {"sampling": None, "structured_output": None}
    replies: list[str] = []
    error = None
    for k, seed in enumerate(SEEDS):
        if k == 2 and replies[0] != replies[1]:
            break  # two different replies already show that sampling is honoured
        r = ask(Request(messages=SAMPLING_MESSAGES, sampling=Sampling(seed=seed, **SAMPLING_PROBE)))
        if r.error:
            error = r.error
            break
        replies.append(r.text)
    seeds = list(SEEDS[: len(replies)])
    if error is not None:
        findings["sampling"] = {"verdict": "unknown", "error": _short(error, 300), "seeds": seeds}
    else:
        same = len(set(replies)) == 1
        findings["sampling"] = {
            "verdict": "ignored" if same else "honoured",
            "seeds": seeds,
            "temperature": SAMPLING_PROBE["temperature"],
            "replies": [_short(t) for t in replies],
        }
        if same:
            warn(
                f"mascot: warning: sampling appears to be ignored by {where}: {len(replies)} probe requests at "
                f"temperature {SAMPLING_PROBE['temperature']:g} with seeds {', '.join(map(str, seeds))} got the "
                f"same reply ({_short(replies[0], 60)!r}); replies will not vary with the seed or temperature "
                "(transformers serve samples only when the model's generation_config.json sets do_sample)"
            )
    if structured:
        if error is not None:
            findings["structured_output"] = {"verdict": "unknown", "error": "not probed: the sampling probe failed"}
        else:
            r = ask(
                Request(
                    messages=STRUCTURED_MESSAGES,
                    json_schema=PROBE_SCHEMA,
                    sampling=Sampling(temperature=0.0, top_p=1.0, max_tokens=32, seed=1),
                )
            )
            if r.error:
                findings["structured_output"] = {"verdict": "unknown", "error": _short(r.error, 300)}
            else:
                ok = follows_probe_schema(r.text)
                cut = not ok and r.finish_reason == "length" and r.text.lstrip().startswith("{")  # JSON cut short
                verdict = "honoured" if ok else ("unknown" if cut else "ignored")
                findings["structured_output"] = {
                    "verdict": verdict,
                    "reply": _short(r.text),
                    "finish_reason": r.finish_reason,
                }
                if verdict == "ignored":
                    warn(
                        f"mascot: warning: structured output (response_format json_schema) appears to be ignored by "
                        f'{where}: the probe asked for {{"answer": <integer>}} and got {_short(r.text, 60)!r}; '
                        "replies will be parsed from free text"
                    )
    findings["probe_s"] = round(time.perf_counter() - t0, 3)
    return findings
