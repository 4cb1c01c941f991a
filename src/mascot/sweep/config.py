"""Sweep configuration: TOML schema, validation with clear errors, and deterministic grid expansion.

A config file names an experiment kind and its parameter grid::

    [experiment]
    kind = "consensus"          # one of mascot.sweep.kinds.KINDS
    name = "consensus_small"
    seed = 0
    dtype = "float32"           # or "float64"
    chunk_size = 64             # grid points per chunk (one Parquet file per chunk)
    max_points = 10000000       # refuse a larger grid (counted from the axes, never expanded)

    [fixed]                     # parameters shared by every point
    trajectories = 32

    [grid]                      # each entry is one axis of a cartesian product (last axis fastest)
    n = [5, 8, 16]                            # a list
    eta = { linspace = [0.05, 0.2, 4] }       # start, stop, count (inclusive)
    b0 = { logspace = [100, 10000, 5] }       # start, stop, count, geometric
    max_rounds = { range = [16, 65, 16] }     # start, stop (exclusive), step

    [grid.zip.costs]            # zipped lists: one axis whose entries take the i-th value of each
    c1 = [600, 300]
    c2 = [100, 50]

    [grid.random]               # `count` random points (seeded), crossed with the other axes
    count = 100
    eps = { uniform = [0.01, 0.05] }          # also loguniform = [a, b], choice = [...]

    [output]
    dir = "runs/consensus_small"

Everything is validated before any work starts: an unknown key is named together with the valid
ones, and every parameter is checked for type and range by its experiment kind. ``name`` is letters,
digits, ``.``, ``_`` and ``-`` (it names ``runs/NAME`` and Slurm jobs); the grid's size is counted from
the axes before anything is expanded, and a grid over ``max_points`` is refused; in a float32 sweep a
value float32 cannot hold is refused.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mascot.errors import ConfigError, InputError
from mascot.sweep import values
from mascot.sweep.schema import EXPERIMENT_KEYS, SECTIONS

__all__ = ["ConfigError", "SweepConfig", "load_config", "parse_config", "expand_grid"]

_SECTIONS, _EXPERIMENT_KEYS = SECTIONS, EXPERIMENT_KEYS
MAX_POINTS = 10_000_000  # default experiment.max_points
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_F32_MAX = float(np.finfo(np.float32).max)
_OUTPUT_KEYS = {"dir": str}
_AXIS_FORMS = ("range", "linspace", "logspace")
_RANDOM_FORMS = ("uniform", "loguniform", "choice")


@dataclass
class SweepConfig:
    kind: str
    name: str
    seed: int
    dtype: str
    chunk_size: int
    fixed: dict[str, Any]
    axes: list[tuple[tuple[str, ...], list[tuple]]]  # (parameter names, list of value tuples)
    output_dir: str | None
    text: str
    hash: str = field(default="")
    path: str | None = None
    count: int | None = None  # the number of points, when the axes were not built (parse_config(values=False))

    @property
    def key_seed(self) -> int:
        """Seed of the whole experiment: point ``p`` draws from ``PCG64(SeedSequence(key_seed, spawn_key=(p,)))``
        (host streams, e.g. X0) and ``fold_in(key(key_seed), p)`` (JAX keys, e.g. belief noise)."""
        return int(self.hash[:8], 16)

    @property
    def n_points(self) -> int:
        if self.count is not None:
            return self.count
        return math.prod(len(v) for _, v in self.axes) if self.axes else 1

    @property
    def n_chunks(self) -> int:
        return -(-self.n_points // self.chunk_size)

    @property
    def grid_names(self) -> list[str]:
        return [n for names, _ in self.axes for n in names]

    def points(self, start: int = 0, stop: int | None = None) -> list[dict[str, Any]]:
        """Parameter dicts of grid points ``start..stop-1`` (fixed parameters included)."""
        if self.count is not None and not self.axes:
            raise InputError("this config was read without its grid values (parse_config(values=False))")
        return [dict(self.fixed, **p) for p in expand_grid(self.axes, start, stop)]


def _type_name(t) -> str:
    return {int: "an integer", float: "a number", str: "a string", bool: "true/false"}.get(t, str(t))


def _check_keys(table: dict, valid, where: str, topic: str | None = None):
    """An unknown key is named with the closest valid one and all of them (``topic``: the ``mascot params``
    topic that describes them)."""
    import difflib

    for k in table:
        if k not in valid:
            close = difflib.get_close_matches(str(k), [str(v) for v in valid], n=1)
            raise ConfigError(
                f"unknown key {k!r} in {where}"
                + (f" (did you mean {close[0]!r}?)" if close else "")
                + f"; valid keys: {', '.join(sorted(valid))}"
                + (f". `mascot params {topic}` gives each one's type, default, range and meaning" if topic else "")
            )


def _axis_count(name: str, spec, where: str) -> int:
    """The number of values of a ``range``/``linspace``/``logspace`` axis (or list), without building it."""
    if not isinstance(spec, dict):
        return len(spec) if isinstance(spec, list) else 1
    _check_keys(spec, _AXIS_FORMS, f"{where}.{name}")
    if len(spec) != 1:
        raise ConfigError(f"{where}.{name} needs exactly one of {', '.join(_AXIS_FORMS)}")
    form, args = next(iter(spec.items()))
    if not (
        isinstance(args, list)
        and len(args) == 3
        and all(isinstance(a, (int, float)) for a in args)
        and not any(isinstance(a, bool) for a in args)
    ):
        raise ConfigError(f"{where}.{name}.{form} must be a list of three numbers")
    if not all(math.isfinite(a) for a in args):
        raise ConfigError(f"{where}.{name}.{form} needs finite numbers; got {args}")
    a, b, c = args
    if form == "range":
        if c == 0:
            raise ConfigError(f"{where}.{name}.range step must not be 0")
        return values.range_count(a, b, c)
    if int(c) != c or c < 1:
        raise ConfigError(f"{where}.{name}.{form} count must be a positive integer")
    return int(c)


def _axis_values(name: str, spec, where: str) -> list:
    if isinstance(spec, list):
        if not spec:
            raise ConfigError(f"{where}.{name} is an empty list")
        return spec
    if isinstance(spec, dict):
        _check_keys(spec, _AXIS_FORMS, f"{where}.{name}")
        if len(spec) != 1:
            raise ConfigError(f"{where}.{name} needs exactly one of {', '.join(_AXIS_FORMS)}")
        form, args = next(iter(spec.items()))
        if not (isinstance(args, list) and len(args) == 3 and all(isinstance(a, (int, float)) for a in args)):
            raise ConfigError(f"{where}.{name}.{form} must be a list of three numbers")
        a, b, c = args
        if form == "range":
            if c == 0:
                raise ConfigError(f"{where}.{name}.range step must not be 0")
            vals = values.range_values(a, b, c)
        else:
            if int(c) != c or c < 1:
                raise ConfigError(f"{where}.{name}.{form} count must be a positive integer")
            if form == "logspace" and (a <= 0 or b <= 0):
                raise ConfigError(f"{where}.{name}.logspace needs positive start and stop")
            # correctly rounded from the decimals as written: the same values on every processor
            vals = (values.linspace if form == "linspace" else values.logspace)(a, b, int(c))
        if not vals:
            raise ConfigError(f"{where}.{name}.{form} gives no values")
        return vals
    return [spec]  # a scalar inside [grid] is a one-value axis


def _random_axis(table: dict, seed: int, dtype: str = "float64") -> tuple[tuple[str, ...], list[tuple]]:
    table = dict(table)
    count = table.pop("count", None)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ConfigError("grid.random.count must be a positive integer")
    if not table:
        raise ConfigError("grid.random needs at least one parameter besides count")
    rng = np.random.default_rng([seed, 0x5EED])
    names, columns = [], []
    for name, spec in sorted(table.items()):
        where = f"grid.random.{name}"
        if not isinstance(spec, dict) or len(spec) != 1:
            raise ConfigError(
                f"{where} must be one of {{ uniform = [a, b] }}, {{ loguniform = [a, b] }}, {{ choice = [...] }}"
            )
        _check_keys(spec, _RANDOM_FORMS, where)
        form, args = next(iter(spec.items()))
        if form == "choice":
            if not isinstance(args, list) or not args:
                raise ConfigError(f"{where}.choice must be a non-empty list")
            col = [args[i] for i in rng.integers(0, len(args), count)]
        else:
            if not (isinstance(args, list) and len(args) == 2 and all(isinstance(a, (int, float)) for a in args)):
                raise ConfigError(f"{where}.{form} must be [low, high]")
            lo, hi = float(args[0]), float(args[1])
            if not (math.isfinite(lo) and math.isfinite(hi)):
                raise ConfigError(f"{where}.{form} needs finite low and high; got [{lo}, {hi}]")
            if not lo < hi:
                raise ConfigError(f"{where}.{form} needs low < high")
            if form == "uniform":  # u from the 53-bit words, then exact arithmetic: the same draws everywhere
                col = values.uniform(args[0], args[1], rng.random(count))
            else:
                if lo <= 0:
                    raise ConfigError(f"{where}.loguniform needs low > 0")
                col = values.loguniform(args[0], args[1], rng.random(count))  # exact, not numpy's SIMD exp
        names.append(name)
        columns.append(col)
    points = list(zip(*columns))
    if len({_key(t, dtype) for t in points}) < len(points):  # e.g. count = 5 with one choice: five identical points
        raise ConfigError(
            f"grid.random draws the same parameters more than once (count = {count} over "
            f"{', '.join(names)}); lower count, or add choices or a continuous parameter"
        )
    return tuple(names), points


def expand_grid(axes, start: int = 0, stop: int | None = None):
    """Grid points ``start..stop-1`` in deterministic order (cartesian product, last axis fastest).

    Arguments: ``axes`` the grid's axes (name -> values, in order); ``start``, ``stop`` the range of point
    indices. Yields one dict of parameters per point.
    """
    sizes = [len(v) for _, v in axes]
    total = math.prod(sizes) if axes else 1
    stop = total if stop is None else min(stop, total)
    out = []
    for idx in range(start, stop):
        point, rem = {}, idx
        for (names, axis), size, stride in zip(axes, sizes, _strides(sizes)):
            entry = axis[(rem // stride) % size]
            point.update(zip(names, entry))
        out.append(point)
    return out


def _strides(sizes):
    strides, acc = [], 1
    for s in reversed(sizes):
        strides.append(acc)
        acc *= s
    return list(reversed(strides))


def parse_config(text: str, path: str | None = None, check_points: bool = True, values: bool = True) -> SweepConfig:
    """Parse and validate a config from TOML text (see the module docstring for the schema).
    ``check_points=False``: skip the per-point checks (for a run directory's own config.toml, which was checked
    when the run started). ``values=False`` (with ``check_points=False``): identity and size only, no grid values
    computed (``mascot status`` and ``merge``: a 10^6-value random axis took 20 s to draw again).

    Arguments: ``text`` the TOML text; ``path`` where it came from (for messages); ``check_points``, ``values``
    as above. Returns a :class:`SweepConfig`.
    """
    from mascot.sweep.kinds import KINDS

    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"not valid TOML: {e}") from None
    except RecursionError:
        raise ConfigError("arrays or tables nested too deeply to read") from None
    _check_keys(raw, _SECTIONS, "the config (top level)")
    exp = raw.get("experiment")
    if not isinstance(exp, dict):
        raise ConfigError("missing [experiment] section (with at least kind = ...)")
    _check_keys(exp, _EXPERIMENT_KEYS, "[experiment]", "experiment")
    for k, t in _EXPERIMENT_KEYS.items():
        if k in exp and (not isinstance(exp[k], t) or isinstance(exp[k], bool)):
            raise ConfigError(f"experiment.{k} must be {_type_name(t)}; got {exp[k]!r}")
    kind = exp.get("kind")
    if kind is None:  # ("got None" read as if the file had said None)
        raise ConfigError(f"[experiment] has no kind: add kind = one of {', '.join(sorted(KINDS))}")
    if kind not in KINDS:
        raise ConfigError(f"experiment.kind must be one of {', '.join(sorted(KINDS))}; got {kind!r}")
    spec = KINDS[kind]
    dtype = exp.get("dtype", "float32")
    if dtype not in ("float32", "float64"):
        raise ConfigError(f"experiment.dtype must be 'float32' or 'float64'; got {dtype!r}")
    chunk = exp.get("chunk_size", 64)
    if chunk < 1:
        raise ConfigError(f"experiment.chunk_size must be >= 1; got {chunk}")
    seed = exp.get("seed", 0)
    if seed < 0:
        raise ConfigError(f"experiment.seed must be >= 0; got {seed}")
    if "max_points" in exp and exp["max_points"] < 1:
        raise ConfigError(f"experiment.max_points must be >= 1; got {exp['max_points']}")
    run_name = exp.get("name", kind)
    if not _NAME.fullmatch(run_name):
        raise ConfigError(
            f"experiment.name must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or "
            f"digit (it names runs/NAME and Slurm jobs); got {run_name!r}"
        )

    fixed = raw.get("fixed", {})
    if not isinstance(fixed, dict):
        raise ConfigError("[fixed] must be a table of parameter = value")
    _check_keys(fixed, spec.params, "[fixed]", kind)
    grid = raw.get("grid", {})
    if not isinstance(grid, dict):
        raise ConfigError("[grid] must be a table of parameter = values")
    grid = dict(grid)
    axes = []
    zips = grid.pop("zip", {})
    rand = grid.pop("random", None)
    if not isinstance(zips, dict):
        raise ConfigError("grid.zip must hold named tables of equal-length lists, e.g. [grid.zip.costs]")
    # the grid's size from the axes alone, before anything is expanded (a 10^12-point grid is refused at once)
    limit = exp.get("max_points", MAX_POINTS)
    counts = {f"grid.{name}": _axis_count(name, s, "grid") for name, s in grid.items()}
    counts.update(
        {
            f"grid.zip.{g}": max((len(v) for v in t.values() if isinstance(v, list)), default=1)
            for g, t in zips.items()
            if isinstance(t, dict)
        }
    )
    if isinstance(rand, dict) and isinstance(rand.get("count"), int):
        counts["grid.random"] = rand["count"]
    total = math.prod(counts.values())
    if total > limit:
        big = lambda v: f"{v:,}" if v < 10**18 else f"~10^{len(str(v)) - 1}"  # noqa: E731
        sizes = ", ".join(f"{k}[{big(v)}]" for k, v in counts.items() if v > 1)
        raise ConfigError(
            f"the grid has {big(total)} points ({sizes}), over experiment.max_points = {limit:,}; "
            "shrink the grid, or raise experiment.max_points if you mean it"
        )
    if not values and not check_points:
        cfg = SweepConfig(
            kind=kind,
            name=run_name,
            seed=seed,
            dtype=dtype,
            chunk_size=chunk,
            fixed=dict(fixed),
            axes=[],
            output_dir=None,
            text=text,
            path=path,
            count=total,
        )
        cfg.hash = experiment_hash(kind, seed, dtype, fixed, raw.get("grid", {}), spec)
        return cfg
    for name, s in grid.items():
        _check_keys({name: 0}, spec.params, "[grid]", kind)
        axes.append(((name,), [(v,) for v in _axis_values(name, s, "grid")]))
        _no_repeats(f"grid.{name}", axes[-1][1], dtype)
    for group, table in zips.items():
        if not isinstance(table, dict) or not table:
            raise ConfigError(f"grid.zip.{group} must be a table of equal-length lists")
        _check_keys(table, spec.params, f"[grid.zip.{group}]", kind)
        lengths = {k: len(v) if isinstance(v, list) else -1 for k, v in table.items()}
        if -1 in lengths.values() or len(set(lengths.values())) != 1 or 0 in lengths.values():
            raise ConfigError(f"grid.zip.{group} needs non-empty lists of equal length; got lengths {lengths}")
        axes.append((tuple(table), list(zip(*table.values()))))
        _no_repeats(f"grid.zip.{group}", axes[-1][1], dtype)
    if rand is not None:
        if not isinstance(rand, dict):
            raise ConfigError("grid.random must be a table with count = ... and parameter distributions")
        _check_keys({k: 0 for k in rand if k != "count"}, spec.params, "[grid.random]", kind)
        axes.append(_random_axis(rand, seed, dtype))
    names = [n for ns, _ in axes for n in ns]
    dup = {n for n in names if names.count(n) > 1} | (set(names) & set(fixed))
    if dup:
        raise ConfigError(f"parameter(s) given more than once (grid and/or fixed): {', '.join(sorted(dup))}")
    for key, by in spec.unused_when.items():  # a grid over it would repeat points; a fixed value would mislead
        if key in names + list(fixed) and by in names + list(fixed):
            raise ConfigError(f"{key} has no effect when {by} is given ({by} is used as written); give one of them")

    out = raw.get("output", {})
    if not isinstance(out, dict):
        raise ConfigError(f'[output] must be a table, e.g. [output] then dir = "runs/NAME"; got {out!r}')
    _check_keys(out, _OUTPUT_KEYS, "[output]")
    if "dir" in out and not (isinstance(out["dir"], str) and out["dir"].strip()):
        raise ConfigError(f"output.dir must be a non-empty string (a directory path); got {out['dir']!r}")
    if dtype == "float32":
        _check_float32(fixed, axes)
    cfg = SweepConfig(
        kind=kind,
        name=run_name,
        seed=seed,
        dtype=dtype,
        chunk_size=chunk,
        fixed=dict(fixed),
        axes=axes,
        output_dir=out.get("dir"),
        text=text,
        path=path,
    )
    if cfg.n_points == 0:
        raise ConfigError("the grid is empty (an axis has no values)")
    cfg.hash = experiment_hash(kind, seed, dtype, fixed, raw.get("grid", {}), spec)
    if check_points:
        _validate_points(cfg, spec, names)
    return cfg


IDENTITY = 2  # how experiment hashes are made; 1 (mascot 0.1) hashed grid values computed on the processor


def _canon(v):
    """A written value in canonical form: a number as its exact decimal value (``100``, ``100.0``, ``1e2`` and
    ``1_000e-1`` are one number), tagged apart from strings; lists element by element, tables by sorted key."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, (int, float)):
        return ["num", str(values.written(v).normalize())]
    if isinstance(v, list):
        return [_canon(x) for x in v]
    if isinstance(v, dict):
        return [[k, _canon(x)] for k, x in sorted(v.items())]
    return repr(v)


def experiment_hash(kind: str, seed: int, dtype: str, fixed: dict, grid: dict, spec) -> str:
    """The experiment's identity (16 hex digits; its first 8 seed every random draw, see ``key_seed``).

    It covers what determines results, taken from the config *as written*, never from values computed on this
    processor (``logspace = [1e2, 1e6, 9]`` itself, not the nine values): the kind and its results version
    (bumped when a kind's rows change for the same config, so an old run directory is never resumed with rows
    computed differently), seed, dtype, the fixed parameters, and the grid's axes in the order they are built
    (which decides which point has which index, hence which seed): the plain axes as written, then the zip
    groups, then the random table. Numbers count by their exact value (``100`` and ``100.0`` are one
    experiment), a scalar axis is a one-value list, and the order of keys inside ``[fixed]``, a zip group or
    the random table does not matter. Not covered: chunk_size, the output dir, comments, names of zip groups.
    """

    def axis(s):
        return _canon(s if isinstance(s, (list, dict)) else [s])

    axes = [[name, axis(s)] for name, s in grid.items() if name not in ("zip", "random")]
    zips = grid.get("zip", {})
    if isinstance(zips, dict):
        axes += [["zip", _canon(t)] for t in zips.values()]
    if "random" in grid:
        axes.append(["random", _canon(grid["random"])])
    ident = dict(
        identity=IDENTITY, kind=kind, kind_version=spec.version, seed=seed, dtype=dtype, fixed=_canon(fixed), grid=axes
    )
    return hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:16]


_F32_TINY = float(np.finfo(np.float32).smallest_subnormal)


def _key(t: tuple, dtype: str = "float64") -> tuple:
    """A point's values compared as the kernels see them (5 and 5.0 are one value; in float32, 0.04 and
    0.040000000001 are one value too)."""
    num = (lambda v: float(np.float32(v)) if abs(v) <= _F32_MAX else float(v)) if dtype == "float32" else float
    return tuple(num(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else repr(v) for v in t)


def _no_repeats(where: str, values: list[tuple], dtype: str = "float64") -> None:
    """Refuse an axis that lists a value twice: its points would repeat each other (the same initial beliefs,
    counted twice by every report); more trajectories per point is the way to more samples."""
    seen = {}
    for i, t in enumerate(values):
        k = _key(t, dtype)
        if k in seen:
            shown = t[0] if len(t) == 1 else t
            first = values[seen[k]][0] if len(t) == 1 else values[seen[k]]
            what = (
                f"{shown!r} twice"
                if values[seen[k]] == t  # (5 and 5.0 are one value as written)
                else f"{first!r} and {shown!r}, one value in {dtype},"  # distinct as written, not as the kernels see them
            )
            raise ConfigError(
                f"{where} lists {what} (entries {seen[k]} and {i}): those grid points would "
                "repeat each other; list each value once (for more samples raise trajectories/trials)"
            )
        seen[k] = i


def _check_point(spec, p: dict, dtype: str) -> None:
    """Every check of one grid point (``p``: fixed and grid values as written), as the kind defines them. Each
    value's own type and range come first; where the point does not read that parameter (alpha on a ring), the
    message says so (every value written is checked, also where no simulation reads it)."""
    for k, v in p.items():
        if k not in spec.params:
            continue
        try:
            spec.check_values({k: v})
        except ValueError as e:
            reads = spec.params[k].reads
            by = reads and p.get(reads[0], spec.params[reads[0]].default)
            if reads and by not in reads[1]:
                raise InputError(
                    f"{e} (every value written is checked, also at points whose {reads[0]} = {by!r} does not read {k})"
                ) from None
            raise
    full = spec.complete(p)
    spec.validate(full)
    if dtype == "float32":
        _check_derived_float32(full, p, spec)
    if spec.dtype_check:
        spec.dtype_check(full, dtype)


def _validate_points(cfg: SweepConfig, spec, names) -> None:
    """Validate every grid point through its kind (all of them: an error names the first bad point).

    The same checks as :func:`_check_point` on each point, in fewer steps: a parameter's own type and range
    depend on its value alone, so each value written in the config (and each default) is checked once, and
    per point only what involves several parameters runs -- derived values, the kind's cross-parameter and
    dtype checks. Any failure is reported by running :func:`_check_point` on the first failing point, so
    messages do not depend on the path (measured at 990,000 consensus points: 19.1 s -> 6.8 s).
    """

    def report(i: int) -> None:
        p = cfg.points(i, i + 1)[0]
        try:
            _check_point(spec, p, cfg.dtype)
        except ValueError as e:
            raise ConfigError(f"grid point {i} ({_short(p, names)}): {e}") from None

    given = set(cfg.fixed) | set(names)
    try:
        spec.check_values(cfg.fixed)
        defaults = {k: v for k, v in spec.fill({}).items() if k not in given and k not in spec.derived_from}
        spec.check_values(defaults)
        if cfg.dtype == "float32":
            _check_derived_float32(defaults, {}, spec)
        axes = []
        for axis_names, values in cfg.axes:
            for t in values:
                spec.check_values(dict(zip(axis_names, t)))
            axes.append([spec.fill(dict(zip(axis_names, t)), defaults=False) for t in values])
    except ValueError:  # some value fails its own check: find the first point holding it
        for i in range(cfg.n_points):
            report(i)
        raise AssertionError("a value failed its check but no grid point did") from None
    base = spec.fill(cfg.fixed)
    derived = [k for k in spec.derived_from if k not in given]
    cross = [f for f in (spec.extra_check,) if f is not None]
    dtype_check = spec.dtype_check
    f32 = cfg.dtype == "float32"
    for i, values in enumerate(itertools.product(*axes)):
        full = dict(base)
        for v in values:
            full.update(v)
        try:
            if spec.derive:
                spec.derive(full)
            if derived:
                spec.check_values({k: full[k] for k in derived})
            for f in cross:
                f(full)
            if f32 and derived:
                _check_derived_float32({k: full[k] for k in derived}, {}, spec)
            if dtype_check:
                dtype_check(full, cfg.dtype)
        except (TypeError, ValueError, OverflowError):
            report(i)
            raise


def _check_float32(fixed: dict, axes) -> None:
    """Refuse numbers a float32 sweep cannot hold: beyond its largest value (rows of inf) or so small they
    become 0 (``x0_spread = 1e-46`` passed validate and failed the run)."""
    where = [(f"fixed.{k}", v) for k, v in fixed.items()]
    where += [(f"grid.{n}", t[j]) for names, values in axes for t in values for j, n in enumerate(names)]
    for key, v in where:
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)):
            continue
        if abs(v) > _F32_MAX:
            raise ConfigError(
                f"{key} = {v!r} does not fit in float32 (max {_F32_MAX:.4g}): the sweep would compute "
                'with inf; use a smaller value, or experiment.dtype = "float64"'
            )
        if v != 0 and np.float32(v) == 0:
            raise ConfigError(
                f"{key} = {v!r} is 0 in float32 (smallest {_F32_TINY:.3g}): the sweep would compute with 0; "
                'use a larger value, or experiment.dtype = "float64"'
            )


def _check_derived_float32(full: dict, given: dict, spec) -> None:
    for k, v in full.items():
        if k not in given and isinstance(v, float) and math.isfinite(v) and abs(v) > _F32_MAX:
            raise InputError(
                f"{k} = {v:.4g}, computed from {spec.derived_from.get(k, 'other parameters')}, does not "
                'fit in float32; use smaller values, or experiment.dtype = "float64"'
            )


def _short(p, names):
    return ", ".join(f"{k}={p[k]!r}" for k in names) or "fixed parameters"


def load_config(path, overrides=()) -> SweepConfig:
    """Read and validate a sweep config file; ``overrides``: command-line ``KEY=VALUE`` / ``~KEY`` items
    (:mod:`mascot.sweep.overrides`) applied first (the config's text is then the overridden one, which a run
    directory records as its ``config.toml``).

    Arguments: ``path`` the TOML file; ``overrides`` as above. Returns a validated :class:`SweepConfig`; raises
    ``ConfigError`` naming the key.
    """
    from mascot.io import read_text_file
    from mascot.sweep.overrides import apply_overrides

    try:
        text = read_text_file(path)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    overrides = list(overrides)
    try:
        changed = apply_overrides(text, overrides, source=str(path))
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    try:
        return parse_config(changed, str(path))
    except ConfigError as e:
        raise ConfigError(f"{_blame(text, overrides, path, str(e))}: {e}") from None


def _blame(text: str, overrides: list, path, error: str) -> str:
    """Who a config error belongs to: the file (it has the error without the overrides), the first override
    after which it appears, or (not found) the file with all of them. Runs only on the error path."""
    if not overrides:
        return str(path)
    from mascot.sweep.overrides import apply_overrides

    for k in range(len(overrides) + 1):  # k = 0: the file alone
        try:
            parse_config(apply_overrides(text, overrides[:k], source=str(path)), str(path))
        except ConfigError as e:
            if str(e) == error:
                return str(path) if k == 0 else f"{path} with the override {overrides[k - 1]!r}"
    return f"{path} with the overrides {' '.join(overrides)}"
