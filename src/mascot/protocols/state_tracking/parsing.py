"""Read a task state out of a model reply: extract the JSON object, repair the usual slips, validate.

Model output is data: nothing here evaluates it (no ``eval``, no ``ast.literal_eval``); it is parsed with
``json.loads`` (``strict=False``: raw newlines inside strings are accepted) after textual repairs.

:func:`parse_state` returns ``ParseResult(state, reason, method)``: ``state`` is ``{"Value": float,
"Parity": "A" | "B", "Level": int}`` or ``None``; ``reason`` is ``"ok"`` or ``"<code>: <detail>"`` with
``code`` one of :data:`REASON_CODES`; ``method`` says how the object was found.

Extraction, in order (the first object that validates wins; otherwise the most specific failure is
reported):

1. ``json`` -- the whole reply is a JSON object;
2. ``fence`` / ``scan`` -- each Markdown code fence, then each balanced ``{...}`` span of the reply
   (a string-aware brace matcher, so braces and quotes inside the "Reasoning" string do not end the
   object), and the span from the first ``{`` to the last ``}``. Every candidate is tried as is and then
   repaired (``repaired``): trailing commas before ``}``/``]`` removed, single-quoted strings turned into
   double-quoted ones, bare ``True``/``False``/``None`` mapped to JSON. Candidates are tried **last
   first**: a model that echoes the schema or a proposal before its answer is judged by its final object;
3. ``keys`` -- key-wise fallback when no candidate is valid JSON (typically unescaped quotes inside
   "Reasoning"): the *last* ``"Value": <number>``, ``"Parity": "<A|B>"`` and ``"Level": <int>`` pairs of
   the reply, keys in quotes (the fields come after "Reasoning" in the schema).

If the object has none of the three fields but a nested object has all of them (``{"state": {...}}``),
the nested one is used. Keys match case-insensitively (``value`` is accepted; an exact-case key wins).

Validation (documented leniencies in brackets):

* ``Value``: a finite number [or a string holding one, ``"70.5"``], ``|Value| <= 1e9`` (the exact rule
  kernel's domain; the task's values are O(100)); booleans, NaN and infinities are rejected;
* ``Parity``: ``"A"`` or ``"B"`` [surrounding spaces and lower case accepted];
* ``Level``: an integer in 1..9 [``3.0`` and ``"3"`` accepted because they are integral; ``3.5``,
  ``"three"`` and booleans are not].
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NamedTuple

from mascot.protocols.jsontext import json_object_spans

__all__ = ["ParseResult", "REASON_CODES", "parse_state", "validate_state_object", "MAX_ABS_VALUE"]

#: Largest accepted |Value| (the domain of the exact JAX rule kernel).
MAX_ABS_VALUE = 1e9

#: Failure codes (the part of ``reason`` before the colon).
REASON_CODES = (
    "empty",  # no text (or only whitespace)
    "no_json",  # no JSON object anywhere in the reply
    "bad_json",  # something that looks like an object but is not valid JSON even after repairs
    "not_object",  # valid JSON that is not an object (a list, a number, ...)
    "missing_field",  # an object without Value, Parity or Level
    "bad_value",  # Value not a finite number within range
    "bad_parity",  # Parity not "A"/"B"
    "bad_level",  # Level not an integer in 1..9
    "backend_error",  # the backend reported an error for this request (set by the harness)
)

_FIELDS = ("Value", "Parity", "Level")


class ParseResult(NamedTuple):
    state: dict | None
    reason: str  # "ok" or "<code>: <detail>"
    method: str | None = None  # json | fence | scan | repaired | keys

    @property
    def ok(self) -> bool:
        return self.state is not None

    @property
    def code(self) -> str:
        return "ok" if self.state is not None else self.reason.split(":", 1)[0]


def _short(x: Any, n: int = 40) -> str:
    r = repr(x)
    return r if len(r) <= n else r[: n - 3] + "..."


_NUM_RE = re.compile(r"\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*")
_INT_RE = re.compile(r"\s*[-+]?\d+(\.0*)?\s*")


def validate_state_object(obj: Any) -> tuple[dict | None, str]:
    """Check a parsed object and return ``(state, "ok")`` or ``(None, "<code>: <detail>")``."""
    if type(obj) is dict:  # fast path: exact keys and types
        v, p, lv = obj.get("Value"), obj.get("Parity"), obj.get("Level")
        if (
            (type(v) is float or type(v) is int)
            and -MAX_ABS_VALUE <= v <= MAX_ABS_VALUE  # False for NaN
            and (p == "A" or p == "B")
            and type(lv) is int
            and 1 <= lv <= 9
        ):
            return {"Value": float(v), "Parity": p, "Level": lv}, "ok"
    if not isinstance(obj, dict):
        return None, f"not_object: got {type(obj).__name__}"
    lower: dict[str, Any] = {}
    for k, v in obj.items():
        if isinstance(k, str):
            lk = k.strip().lower()
            if lk not in lower or k.strip() in _FIELDS:  # an exact-case key wins
                lower[lk] = v
    missing = [f for f in _FIELDS if f.lower() not in lower]
    if missing:
        return None, f"missing_field: {', '.join(missing)}"
    value, parity, level = (lower[f.lower()] for f in _FIELDS)

    if isinstance(value, bool):
        return None, f"bad_value: Value must be a number; got {value!r}"
    if isinstance(value, str):
        if not _NUM_RE.fullmatch(value):
            return None, f"bad_value: Value must be a number; got {_short(value)}"
        value = float(value)
    if not isinstance(value, (int, float)):
        return None, f"bad_value: Value must be a number; got {type(value).__name__}"
    try:
        v = float(value)
    except OverflowError:
        return None, "bad_value: Value out of range (|Value| <= 1e9)"
    if not math.isfinite(v):
        return None, f"bad_value: Value must be finite; got {v!r}"
    if abs(v) > MAX_ABS_VALUE:
        return None, f"bad_value: Value out of range (|Value| <= 1e9); got {v:g}"

    if not isinstance(parity, str) or parity.strip().upper() not in ("A", "B"):
        return None, f"bad_parity: Parity must be 'A' or 'B'; got {_short(parity)}"
    p = parity.strip().upper()

    if isinstance(level, bool):
        return None, f"bad_level: Level must be an integer; got {level!r}"
    if isinstance(level, str):
        if not _INT_RE.fullmatch(level):
            return None, f"bad_level: Level must be an integer; got {_short(level)}"
        level = float(level)
    if isinstance(level, float):
        if not math.isfinite(level) or not level.is_integer():
            return None, f"bad_level: Level must be an integer; got {level!r}"
        level = int(level)
    if not isinstance(level, int):
        return None, f"bad_level: Level must be an integer; got {type(level).__name__}"
    if not 1 <= level <= 9:
        return None, f"bad_level: Level must be in 1..9; got {level}"
    return {"Value": v, "Parity": p, "Level": level}, "ok"


# ----------------------------------------------------------------------------- extraction
_FENCE_RE = re.compile(r"```[ \t]*[A-Za-z0-9_-]*[ \t]*\r?\n?(.*?)```", re.S)


def _repair(s: str) -> str:
    """Single-quoted strings -> double-quoted, trailing commas removed, True/False/None -> JSON."""
    out: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == '"':  # copy a double-quoted string verbatim
            j = i + 1
            while j < n and s[j] != '"':
                j += 2 if s[j] == "\\" else 1
            out.append(s[i : j + 1])
            i = j + 1
        elif c == "'":  # single-quoted string -> double-quoted
            j = i + 1
            buf = ['"']
            while j < n and s[j] != "'":
                if s[j] == "\\" and j + 1 < n:
                    buf.append(s[j + 1] if s[j + 1] == "'" else s[j : j + 2])
                    j += 2
                    continue
                buf.append('\\"' if s[j] == '"' else s[j])
                j += 1
            buf.append('"')
            out.append("".join(buf))
            i = j + 1
        elif c == ",":  # drop a trailing comma
            j = i + 1
            while j < n and s[j] in " \t\r\n":
                j += 1
            if j < n and s[j] in "}]":
                i = j
            else:
                out.append(c)
                i += 1
        elif c.isalpha():
            j = i
            while j < n and (s[j].isalnum() or s[j] == "_"):
                j += 1
            word = s[i:j]
            out.append({"True": "true", "False": "false", "None": "null"}.get(word, word))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


_DECODER = json.JSONDecoder(strict=False)  # one decoder (json.loads with options builds one per call)


def _loads(s: str):
    return _DECODER.decode(s)


def _find_state_object(obj):
    """``obj`` itself, or a nested dict holding all three fields when ``obj`` holds none of them."""
    if isinstance(obj, dict) and "Value" not in obj:
        keys = {k.strip().lower() for k in obj if isinstance(k, str)}
        if not keys & {"value", "parity", "level"}:
            for v in obj.values():
                if isinstance(v, dict) and {"value", "parity", "level"} <= {
                    k.strip().lower() for k in v if isinstance(k, str)
                }:
                    return v
    return obj


_KEY_PATTERNS = {
    "Value": re.compile(r"""["']value["']\s*:\s*["']?([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)""", re.I),
    "Parity": re.compile(r"""["']parity["']\s*:\s*["']\s*([AaBb])\s*["']""", re.I),
    "Level": re.compile(r"""["']level["']\s*:\s*["']?([-+]?\d+(?:\.\d+)?)""", re.I),
}


def _keywise(text: str) -> dict | None:
    found = {}
    for field, pat in _KEY_PATTERNS.items():
        matches = pat.findall(text)
        if not matches:
            return None
        found[field] = matches[-1]
    lvl = found["Level"]
    return {"Value": found["Value"], "Parity": found["Parity"], "Level": lvl}


_SEVERITY = {"not_object": 0, "missing_field": 1, "bad_value": 2, "bad_parity": 2, "bad_level": 2}


def parse_state(text: str | None) -> ParseResult:
    """Extract and validate ``{"Value", "Parity", "Level"}`` from a model reply (see module docstring)."""
    if not isinstance(text, str) or not text.strip():
        return ParseResult(None, "empty: no text in the reply")
    stripped = text.strip()
    # 1. the whole reply
    whole = None
    if stripped[0] in "{[":
        try:
            whole = _loads(stripped)
        except ValueError:
            pass
        else:
            if isinstance(whole, dict):
                state, reason = validate_state_object(_find_state_object(whole))
                return ParseResult(state, reason, "json")
    # 2. fences, balanced spans, first '{' .. last '}' (last candidate first)
    candidates: list[tuple[str, str]] = []
    for body in _FENCE_RE.findall(text):
        body = body.strip()
        if body:
            candidates.append(("fence", body))
            candidates += [("fence", s) for s in json_object_spans(body) if s != body]
    candidates += [("scan", s) for s in json_object_spans(text)]
    a, b = text.find("{"), text.rfind("}")
    if 0 <= a < b:
        candidates.append(("scan", text[a : b + 1]))
    unique: dict[str, str] = {}
    for method, cand in candidates:  # keep the first label of a repeated candidate (fence before scan)
        unique.setdefault(cand, method)
    best: tuple[int, str] | None = None  # most specific failure among parsed objects
    json_error = None
    for cand, method in reversed(unique.items()):
        for m, s in ((method, cand), ("repaired", None)):
            if s is None:
                s = _repair(cand)
                if s == cand:
                    continue
            try:
                obj = _loads(s)
            except ValueError as e:
                json_error = json_error or f"bad_json: {str(e)[:80]}"
                continue
            state, reason = validate_state_object(_find_state_object(obj))
            if state is not None:
                return ParseResult(state, "ok", m)
            sev = _SEVERITY.get(reason.split(":", 1)[0], 0)
            if best is None or sev > best[0]:
                best = (sev, reason)
            break
    # 3. key-wise fallback
    kw = _keywise(text)
    if kw is not None:
        state, reason = validate_state_object(kw)
        if state is not None:
            return ParseResult(state, "ok", "keys")
        if best is None or _SEVERITY.get(reason.split(":", 1)[0], 0) > best[0]:
            best = (_SEVERITY.get(reason.split(":", 1)[0], 0), reason)
    if best is not None:
        return ParseResult(None, best[1])
    if json_error is not None:
        return ParseResult(None, json_error)
    if whole is not None:
        return ParseResult(None, f"not_object: the reply is a JSON {type(whole).__name__}")
    if "{" in text:
        return ParseResult(None, "bad_json: unterminated JSON object (truncated reply?)")
    return ParseResult(None, "no_json: no JSON object in the reply")
