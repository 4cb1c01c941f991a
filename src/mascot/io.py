"""File helpers shared by every layer (imports nothing of mascot): atomic writes, JSON Lines, canonical JSON,
TOML reading and UTC timestamps."""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import tempfile
import tomllib
from pathlib import Path

__all__ = ["atomic_path", "atomic_write_text", "atomic_write_bytes", "write_csv", "read_toml", "utc_now", "json_default",
           "canonical", "append_jsonl", "read_jsonl"]

_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once at import (single-threaded): new files get the usual 0o666 & ~umask


@contextlib.contextmanager
def atomic_path(path):
    """The one way mascot writes a file: yield a fresh temporary path beside ``path``, then fsync it and
    rename it over ``path``; on any error the temporary file is removed and ``path`` is untouched.

    The temporary file is created by :func:`tempfile.mkstemp` (``O_CREAT | O_EXCL``: a unique name that did not
    exist, so a planted file or symlink is never followed), in ``path``'s own directory (so the rename is
    atomic), named ``.NAME.XXXX.tmp``. The rename replaces a symlink at ``path`` itself, never its target.
    """
    path = Path(path)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(name)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        os.close(fd)
        yield tmp
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (:func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_path`): never a partial file."""
    atomic_write_bytes(path, text.encode("utf-8"))


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


def write_csv(df, path, **to_csv) -> None:
    """``df.to_csv(path, **to_csv)`` atomically (:func:`atomic_path`)."""
    with atomic_path(path) as tmp:
        df.to_csv(tmp, **to_csv)
