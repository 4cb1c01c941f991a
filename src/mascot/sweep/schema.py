"""The sections of a sweep config and the keys of its ``[experiment]`` table (with their types): one home for
:mod:`mascot.sweep.config`'s validation and :mod:`mascot.sweep.overrides`' key lookup. The parameters of each
experiment kind are in :data:`mascot.sweep.kinds.KINDS`."""

from __future__ import annotations

__all__ = ["SECTIONS", "EXPERIMENT_KEYS"]

#: The top-level tables of a sweep config.
SECTIONS = ("experiment", "fixed", "grid", "output")
#: ``[experiment]`` keys and their types.
EXPERIMENT_KEYS = {"kind": str, "name": str, "seed": int, "dtype": str, "chunk_size": int, "max_points": int}
