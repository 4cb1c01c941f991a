"""Reading an agent's reply: ``{"vector": [d numbers], "reasoning": "..."}`` (consensus paper, Sec. V-C).

:func:`parse_vector` extracts the JSON object from prose or code fences; ``vector`` must hold exactly ``d``
finite numbers, which are clipped to ``[0, 1]``; anything else is a parse failure with a reason code.
Model output is data: parsed with ``json.loads`` only.
"""

from __future__ import annotations

import json
import math
import re
from typing import NamedTuple

from mascot.protocols.jsontext import json_object_spans

__all__ = ["VectorParse", "parse_vector"]


class VectorParse(NamedTuple):
    """``vector`` (clipped to [0, 1]) or ``None``; ``reason`` is ``"ok"`` or ``"<code>: <detail>"`` with code
    one of empty, no_json, bad_json, no_vector, bad_length, bad_value, backend_error; ``clipped`` counts the
    entries that were outside [0, 1]."""

    vector: list[float] | None
    reasoning: str
    reason: str
    clipped: int = 0

    @property
    def ok(self) -> bool:
        return self.vector is not None


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_VEC_RE = re.compile(r"""["']?vector["']?\s*[:=]\s*\[([^\[\]]*)\]""", re.I)
_REASON_RE = re.compile(r""""reasoning"\s*:\s*"((?:[^"\\]|\\.)*)""", re.I | re.S)


def _repair(s: str) -> str:
    s = re.sub(r",\s*([}\]])", r"\1", s)
    return re.sub(r"\b(True|False|None)\b", lambda m: {"True": "true", "False": "false", "None": "null"}[m.group(1)], s)


def _num(x) -> float | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        f = float(x)
    elif isinstance(x, str):
        try:
            f = float(x.strip())
        except ValueError:
            return None
    else:
        return None
    return f if math.isfinite(f) else None


def _vector_from(values, d: int) -> tuple[list[float] | None, str, int]:
    if not isinstance(values, (list, tuple)):
        return None, f"bad_value: vector is not a list ({type(values).__name__})", 0
    if len(values) != d:
        return None, f"bad_length: vector has {len(values)} entries, expected {d}", 0
    out = []
    for v in values:
        f = _num(v)
        if f is None:
            return None, f"bad_value: vector entry {v!r:.30} is not a finite number", 0
        out.append(f)
    clipped = sum(1 for f in out if f < 0 or f > 1)
    return [min(1.0, max(0.0, f)) for f in out], "ok", clipped


def _find_vector_key(obj: dict):
    for k, v in obj.items():
        if isinstance(k, str) and k.lower() == "vector":
            return v, obj
    for v in obj.values():  # one level of nesting: {"proposal": {"vector": ...}}
        if isinstance(v, dict):
            for k2, v2 in v.items():
                if isinstance(k2, str) and k2.lower() == "vector":
                    return v2, v
    return None, None


_SPECIFICITY = {"bad_length": 5, "bad_value": 4, "no_vector": 3, "bad_json": 2, "no_json": 1, "empty": 0}


def parse_vector(text: str | None, d: int) -> VectorParse:
    """Extract ``{"vector": [d numbers], "reasoning": "..."}`` from a reply (see the module docstring).

    Candidates, last first (a model that echoes the schema before answering is judged by its final
    object): the whole reply, each code fence, each balanced ``{...}`` span; each tried as is and after
    small repairs (trailing commas, Python literals). Fallback: the last ``"vector": [...]`` list in the text.
    Model output is data: parsed with ``json.loads`` only.

    Returns: a :class:`VectorParse` (the vector or None, the reasoning, why it failed).
    """
    if text is None or not text.strip():
        return VectorParse(None, "", "empty: no text")
    cands = [text.strip()] + [m.group(1).strip() for m in _FENCE.finditer(text)] + json_object_spans(text)
    best = "no_json: no JSON object in the reply"
    seen = set()
    for cand in reversed(cands):
        for c in (cand, _repair(cand)):
            if c in seen or not c.startswith("{"):
                continue
            seen.add(c)
            try:
                obj = json.loads(c, strict=False)
            except json.JSONDecodeError:
                reason = "bad_json: an object that is not valid JSON"
            else:
                if not isinstance(obj, dict):
                    continue
                vals, holder = _find_vector_key(obj)
                if holder is None:
                    reason = "no_vector: JSON object without a 'vector' key"
                else:
                    vec, reason, clipped = _vector_from(vals, d)
                    if vec is not None:
                        r = next((v for k, v in holder.items() if isinstance(k, str) and k.lower() == "reasoning"), "")
                        return VectorParse(vec, r if isinstance(r, str) else json.dumps(r), "ok", clipped)
            if _SPECIFICITY[reason.split(":")[0]] > _SPECIFICITY[best.split(":")[0]]:
                best = reason
    m = list(_VEC_RE.finditer(text))
    if m:
        parts = [p for p in m[-1].group(1).split(",") if p.strip()]
        vec, reason, clipped = _vector_from([p.strip().strip("'\"") for p in parts], d)
        if vec is not None:
            rm = list(_REASON_RE.finditer(text))
            return VectorParse(vec, rm[-1].group(1) if rm else "", "ok", clipped)
        if _SPECIFICITY[reason.split(":")[0]] > _SPECIFICITY[best.split(":")[0]]:
            best = reason
    return VectorParse(None, "", best)
