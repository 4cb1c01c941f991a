"""Small file helpers shared by the harnesses and reports: atomic text writes and TOML config reading."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

__all__ = ["atomic_write_text", "read_toml"]


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
