"""File helpers shared by every layer (imports nothing of mascot): atomic writes, JSON Lines, canonical JSON,
TOML reading and UTC timestamps."""

from __future__ import annotations

import datetime as _dt
import json
import os
import tomllib
from pathlib import Path

__all__ = ["atomic_write_text", "read_toml", "utc_now", "json_default", "canonical", "append_jsonl", "read_jsonl"]


def atomic_write_text(path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file, fsync and rename (never a partial file)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_toml(path) -> dict:
    """A TOML file as a dict; ``ValueError`` naming the file when it is missing or not valid TOML."""
    p = Path(path)
    if not p.exists():
        raise ValueError(f"config file not found: {path}")
    try:
        return tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: invalid TOML: {e}") from None


def utc_now() -> str:
    """The current UTC time, ISO 8601 to the second (run records' timestamps)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def json_default(x):
    """``json.dumps(default=...)``: numpy integers, floats and arrays as JSON numbers and lists, else ``str``."""
    import numpy as np

    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def canonical(x):
    """``x`` as plain JSON data (keys sorted, numpy values converted): what a record's identity compares."""
    return json.loads(json.dumps(x, sort_keys=True, default=json_default))


def append_jsonl(path, rows: list[dict]) -> None:
    """Append ``rows`` as JSON lines and fsync (a crash leaves at most one damaged trailing line)."""
    if not rows:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(json.dumps(r, ensure_ascii=False, default=json_default) + "\n" for r in rows))
        f.flush()
        os.fsync(f.fileno())


def read_jsonl(path, repair: bool = False) -> list[dict]:
    """Lines of a JSONL file; a damaged trailing line (interrupted write) is dropped (and cut off the file
    when ``repair``)."""
    path = Path(path)
    if not path.exists():
        return []
    raw = path.read_bytes().split(b"\n")
    rows = []
    for i, line in enumerate(raw):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            if repair:
                keep = b"\n".join(raw[:i])
                path.write_bytes(keep + (b"\n" if keep else b""))
            break
    return rows
