"""Helpers the ``mascot design`` commands share (:mod:`mascot.cli.design`, :mod:`mascot.cli.design_schedule`):
checks of their options and the writing of their outputs."""

from __future__ import annotations

import json
import math
from pathlib import Path

from mascot.errors import InputError
from mascot.io import json_clean


def dumps(obj: dict, indent: int | None = None) -> str:
    """Strict JSON of a design result (non-finite numbers as null: JSON has no NaN or Infinity)."""
    return json.dumps(json_clean(obj), indent=indent)


def check_out(path) -> None:
    """Refuse an ``--out`` that is a file or a run directory (before any work; nothing is created)."""
    from mascot.rundir import not_a_run_dir

    if path is None:
        return
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file, not a directory")
    not_a_run_dir(out, "mascot design")


def out_dir(path) -> Path:
    """``--out`` as a directory, created if needed; a clear error when it is a file or a run directory."""
    check_out(path)
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    return out


def check_runs(runs) -> None:
    if not (100 <= runs <= 10_000_000):
        raise InputError(f"--runs must be between 100 and 10^7; got {runs}")


def check_positive(args, *names) -> None:
    for name in names:
        v = getattr(args, name)
        if not (v > 0 and math.isfinite(v)):
            raise InputError(f"--{name.replace('_', '-')} must be a finite number > 0; got {v}")


def check_constraints(args, b0_min_open: bool) -> None:
    """--alpha in (0, 1), --max-mean-rounds > 0, --b0 finite (> 0, or >= 0 where a zero budget makes sense)."""
    if not (0 < args.alpha < 1):
        raise InputError(f"--alpha must be in (0, 1); got {args.alpha}")
    if not args.max_mean_rounds > 0:
        raise InputError(f"--max-mean-rounds must be > 0; got {args.max_mean_rounds}")
    if args.b0 is not None and not (math.isfinite(args.b0) and (args.b0 > 0 if b0_min_open else args.b0 >= 0)):
        raise InputError(f"--b0 must be a finite budget {'> 0' if b0_min_open else '>= 0'}; got {args.b0}")
