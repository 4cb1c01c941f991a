"""Command-line overrides of a sweep config, as Hydra users write them.

    mascot run CONFIG grid.n=5,8,16 seed=3 fixed.trajectories=256 ~grid.eta --out DIR

Each override is ``KEY=VALUE`` or ``~KEY`` (remove the key):

* ``KEY`` is dotted: ``experiment.seed``, ``fixed.trajectories``, ``grid.n``, ``grid.zip.costs.c1``,
  ``grid.random.eps``, ``output.dir``. A bare key is looked up: an ``[experiment]`` key (``seed``, ``name``,
  ``dtype``, ...) goes to ``[experiment]``, ``dir`` to ``[output]``, and a parameter of the kind goes to
  ``[grid]`` when the value is a list and to ``[fixed]`` otherwise.
* ``VALUE`` is a TOML value (``3``, ``0.5``, ``true``, ``"text"``, ``[1, 2]``, ``{linspace = [0.1, 1, 5]}``)
  or a bare word (taken as a string); commas outside brackets make a list, Hydra's sweep syntax
  (``grid.n=5,8,16`` is ``n = [5, 8, 16]``); a bracketed list may hold bare words too, as Hydra writes it
  (``grid.strategy=[complete,ring]``).
* A parameter lives in one place: setting ``fixed.eta`` removes a ``grid.eta`` axis and the other way round.

:func:`apply_overrides` returns the new TOML text; the run directory's ``config.toml`` records it (with the
overrides in a comment), so resume, hashes and merge see what was run.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Sequence

from mascot.errors import ConfigError
from mascot.sweep.schema import EXPERIMENT_KEYS as _EXPERIMENT_KEYS
from mascot.sweep.schema import SECTIONS as _SECTIONS

__all__ = ["apply_overrides", "parse_override", "dumps_toml"]

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*(\.[A-Za-z_][A-Za-z0-9_\-]*)*")


def _split_top(text: str) -> list[str]:
    """``text`` split at commas outside brackets, braces and quotes."""
    parts, depth, quote, cur = [], 0, None, []
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return parts


def _value(text: str, where: str):
    text = text.strip()
    if not text:
        raise ConfigError(f"override {where}: empty value (write {where}=VALUE, or ~{where} to remove it)")
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        if re.fullmatch(r"[A-Za-z0-9_.:/+\-]+", text):
            return text  # a bare word: a string (adaptive, runs/x)
        if text.startswith("[") and text.endswith("]") and text[1:-1].strip():
            return [_value(p, where) for p in _split_top(text[1:-1])]  # Hydra's [complete,ring]: bare words
        raise ConfigError(f"override {where}: cannot read {text!r} as a TOML value") from None


def parse_override(item: str) -> tuple[str, object, bool]:
    """``KEY=VALUE`` -> ``(key, value, False)``; ``~KEY`` -> ``(key, None, True)``. A newline or other control
    character is refused (it would end the recorded comment line and smuggle TOML into the config)."""
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in item):
        raise ConfigError(f"override {item!r}: control characters (newlines, tabs) are not allowed; write one line")
    if item.startswith("~"):
        key = item[1:]
        if not _KEY.fullmatch(key):
            raise ConfigError(f"override {item!r}: ~KEY removes a key; {key!r} is not a key")
        return key, None, True
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not _KEY.fullmatch(key):
        raise ConfigError(
            f"override {item!r}: write KEY=VALUE (e.g. grid.n=5,8,16 or seed=3) or ~KEY; "
            "KEY is letters, digits, '_' and '-', dotted"
        )
    parts = _split_top(text)
    if len(parts) > 1:
        if any(not p.strip() for p in parts):  # (said "empty value" of n=5,,6: an outside tester)
            raise ConfigError(f"override {key}={text}: an empty element in the list; write {key}=A,B,C")
        return key, [_value(p, key) for p in parts], False
    return key, _value(text, key), False


def _locate(key: str, raw: dict, value, remove: bool) -> list[str]:
    """The dotted path of ``key`` in the config."""
    from mascot.sweep.kinds import KINDS

    path = key.split(".")
    if path[0] in _SECTIONS:
        return path
    if len(path) > 1:
        raise ConfigError(f"override {key!r}: the first part must be one of {', '.join(_SECTIONS)}")
    if key in _EXPERIMENT_KEYS:
        return ["experiment", key]
    if key == "dir":
        return ["output", "dir"]
    kind = raw.get("experiment", {}).get("kind")
    params = KINDS[kind].params if kind in KINDS else {}
    if key not in params:
        known = sorted(set(_EXPERIMENT_KEYS) | {"dir"} | set(params))
        raise ConfigError(
            f"override {key!r}: not an [experiment] key or a parameter of kind {kind!r}; known: {', '.join(known)}"
            " (or write the section: fixed.KEY, grid.KEY, ...)"
        )
    if remove:
        return ["grid" if key in raw.get("grid", {}) else "fixed", key]
    return ["grid" if isinstance(value, (list, dict)) else "fixed", key]


def apply_overrides(text: str, overrides: Sequence[str], source: str = "the config") -> str:
    """The config ``text`` with ``overrides`` applied, as TOML text (``text`` itself when there are none)."""
    if not overrides:
        return text
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"not valid TOML: {e}") from None
    moved = {}  # (section, key) -> (the earlier override that took it out of that section, what it did)
    for item in overrides:
        key, value, remove = parse_override(item)
        path = _locate(key, raw, value, remove)
        if len(path) < 2:
            raise ConfigError(f"override {item!r}: name a key inside [{path[0]}], e.g. {path[0]}.KEY")
        node = raw
        for part in path[:-1]:
            nxt = node.setdefault(part, {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"override {item!r}: {'.'.join(path[:-1])} is a value, not a table")
            node = nxt
        last = path[-1]
        if remove:
            if last not in node:
                why = moved.get(tuple(path))  # (fixed.n=48 took n out of [grid]: "grid.n is not in" read as a typo)
                if why is None and "." not in key:  # a bare ~KEY after an override removed or moved it
                    why = moved.get(("grid", last)) or moved.get(("fixed", last))
                raise ConfigError(
                    f"override {item!r}: {key if why and '.' not in key else '.'.join(path)} is not in {source}"
                    + (f" any more: the earlier override {why[0]!r} {why[1]}" if why else "")
                )
            del node[last]
            moved[tuple(path)] = (item, "removed it")
            continue
        node[last] = value
        # a parameter lives in [fixed] or in one [grid] axis, not both
        other = "grid" if path[0] == "fixed" else "fixed"
        if len(path) == 2 and path[0] in ("fixed", "grid") and last not in ("zip", "random"):
            if raw.get(other, {}).pop(last, None) is not None:
                moved[(other, last)] = (item, f"moved it to [{path[0]}]")
    header = f"# {source} with the command-line overrides: {' '.join(overrides)}\n"
    return header + dumps_toml(raw)


# ----------------------------------------------------------------------------- a TOML writer for configs
def _scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_scalar(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_bare(k)} = {_scalar(x)}" for k, x in v.items()) + " }"
    raise ConfigError(f"cannot write {v!r} ({type(v).__name__}) into a config")


def _bare(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_\-]+", k) else _scalar(k)


def dumps_toml(doc: dict, prefix: str = "") -> str:
    """TOML text of a config dict: tables as ``[section]`` headers; the grid's axis specifications
    (``{linspace = [...]}``) as inline tables; ``grid.zip.NAME`` and ``grid.random`` as sub-tables."""
    lines, tables = [], []
    for k, v in doc.items():
        sub = isinstance(v, dict) and (
            not prefix or (prefix == "grid" and k in ("zip", "random")) or prefix == "grid.zip"
        )
        if sub:
            tables.append((k, v))
        else:
            lines.append(f"{_bare(k)} = {_scalar(v)}")
    out = ""
    if lines:
        out += ("" if not prefix else f"[{prefix}]\n") + "\n".join(lines) + "\n\n"
    elif prefix and not tables:
        out += f"[{prefix}]\n\n"
    for k, v in tables:
        out += dumps_toml(v, f"{prefix}.{_bare(k)}" if prefix else _bare(k))
    return out
