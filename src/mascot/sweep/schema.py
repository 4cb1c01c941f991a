"""The sections of a sweep config and the keys of its ``[experiment]`` table (with their types): one home for
:mod:`mascot.sweep.config`'s validation and :mod:`mascot.sweep.overrides`' key lookup. The parameters of each
experiment kind are :class:`Param` entries of a :class:`Kind` in :data:`mascot.sweep.kinds.KINDS`;
:mod:`mascot.sweep.reference` prints them (``mascot params``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mascot.errors import InputError

__all__ = ["SECTIONS", "EXPERIMENT_KEYS", "EXPERIMENT_DOCS", "Param", "Kind"]

#: The top-level tables of a sweep config.
SECTIONS = ("experiment", "fixed", "grid", "output")
#: ``[experiment]`` keys and their types.
EXPERIMENT_KEYS = {"kind": str, "name": str, "seed": int, "dtype": str, "chunk_size": int, "max_points": int}
#: ``[experiment]`` keys: ``(default, range, meaning)``.
EXPERIMENT_DOCS = {
    "kind": (None, "consensus, spectra or affine_noise", "the experiment kind (required; `mascot params KIND`)"),
    "name": ("the kind", "letters, digits, '.', '_', '-'", "names runs/NAME and Slurm jobs"),
    "seed": (0, "seed >= 0", "the sweep's random seed (X0, noise, random graphs, random axes)"),
    "dtype": ("float32", "float32 or float64", "floating-point precision of the kernels"),
    "chunk_size": (64, "chunk_size >= 1", "grid points per chunk (one Parquet file, the unit of resume)"),
    "max_points": (10_000_000, "max_points >= 1", "refuse a larger grid (counted before anything is expanded)"),
}


@dataclass(frozen=True)
class Param:
    """One parameter of an experiment kind: its type, default, range check (``rule`` says it in words), a
    one-line meaning (``doc``), its ``unit`` and ``reads``: ``(selector, values)`` when only points whose
    ``selector`` parameter is one of ``values`` simulate with it (``None``: every point; see
    columns that read it at other points too: :data:`mascot.sweep.schema.NOTES`)."""

    type: type
    default: Any
    check: Callable[[Any], bool] | None = None
    rule: str = ""
    doc: str = ""
    unit: str = ""
    reads: tuple | None = None


@dataclass(frozen=True)
class Kind:
    name: str
    params: dict[str, Param]
    evaluate: Callable  # (points, indices, key_seed, dtype[, cache=]) -> DataFrame or pyarrow Table
    bytes_per_point: Callable  # (point) -> int, working memory estimate
    extra_check: Callable[[dict], None] | None = None
    derive: Callable[[dict], None] | None = None  # fills parameters computed from others, in place
    derived_from: dict = field(default_factory=dict)  # derived parameter -> the key(s) users write for it
    unused_when: dict = field(default_factory=dict)  # key -> the parameter that, when given, makes it unused
    dtype_check: Callable[[dict, str], None] | None = None  # (complete point, "float32"/"float64"): ValueError
    row_key: tuple = ("point", "trajectory")  # columns that identify a row (unique, sorted in merges)
    version: int = 1  # results version: bump when the rows for a given config change (enters the hash)
    # chunks this kind may evaluate at once: the spectra kernels change OpenBLAS's thread count around
    # their LAPACK calls (process-global; changing it while another thread is inside OpenBLAS hung a run),
    # and the noise kernels already split their work over threads
    max_workers: int | None = None
    # evaluate takes ``cache=``, the sweep's DeviceCache of device arrays its chunks share (e.g. X0)
    device_cache: bool = False
    # every column of its tables is never null (NaN floats are values, not nulls): chunk files store them
    # as Parquet required columns (faster to write; see sweep.store.write_table_atomic)
    required: bool = False
    # integer-coded columns: column -> {code: label}, written into the merged file's field metadata
    codes: dict = field(default_factory=dict)
    # whether a point's samples depend on how many it draws (its row count): a spectra point's graphs are
    # seeded with the count, while trajectory t of a consensus point is the same at every trajectory count.
    # Rows with equal parameters and row key are one sample (mascot.analysis.plot.copied_rows)
    count_reseeds: bool = False
    # a parameter that, where > 0, draws with the point's own key (consensus belief noise, keyed by the point
    # index): such rows are samples of their point alone
    point_draws: str | None = None
    # the parameter that is a point's row count and no column of its rows (consensus trajectories, spectra
    # graphs): mascot plot makes it a column from the row counts when a figure names it (missing in the rows of
    # points that do not read it, as other unread parameters are)
    count_param: str | None = None

    def complete(self, p: dict) -> dict:
        """Fill defaults and derived values (integers given for float parameters become floats)."""
        out = {}
        for k, spec in self.params.items():
            v = p.get(k, spec.default)
            out[k] = float(v) if spec.type is float and type(v) is int else v
        if self.derive:
            try:
                self.derive(out)
            except (TypeError, ValueError, OverflowError) as e:
                # a bad value the user wrote (n = "5", n = 1) fails here first: name it, not what it derives
                self._check({k: v for k, v in out.items() if k not in self.derived_from or p.get(k) is not None})
                raise InputError(str(e)) from None
        return out

    def fill(self, given: dict, defaults: bool = True) -> dict:
        """``given`` with integers written for float parameters as floats, and (``defaults``) every other
        parameter's default; no derived values (see :meth:`complete`)."""
        out = {}
        for k, spec in self.params.items():
            if k in given or defaults:
                v = given.get(k, spec.default)
                out[k] = float(v) if spec.type is float and type(v) is int else v
        return out

    def check_values(self, p: dict) -> None:
        """Each value's own type and range, in ``p``'s order (``ValueError`` names the first bad one)."""
        for k, v in p.items():
            self._check_value(k, v)

    def validate(self, p: dict) -> None:
        self._check(p)
        if self.extra_check:
            self.extra_check(p)

    def _check(self, p: dict) -> None:
        """Types and ranges of the parameters in ``p`` (``None``: not given, nothing to check); integers
        given for float parameters become floats in ``p``."""
        for k in self.params:
            if k in p:
                p[k] = self._check_value(k, p[k])

    def _check_value(self, k: str, v):
        spec = self.params[k]
        if v is None:
            return v
        if spec.type is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if not isinstance(v, spec.type) or isinstance(v, bool) != (spec.type is bool):
            raise InputError(f"{k} must be of type {spec.type.__name__}; got {v!r}")
        if spec.check is not None and not spec.check(v):
            raise InputError(f"{k} = {v!r} is out of range: {spec.rule}")
        return v
