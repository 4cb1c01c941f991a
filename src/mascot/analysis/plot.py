"""One figure from any table mascot writes: ``y`` against ``x``, one line per ``hue`` value, one panel per
``facet`` value, each point the mean (or median) over the replicate rows with its confidence band.

    from mascot.analysis.plot import plot
    fig = plot("runs/my_sweep/merged.parquet", x="n", y="tokens", hue="strategy", logy=True)
    fig.savefig("tokens.png")

or ``mascot plot DATA --x n --y tokens --hue strategy --logy --out tokens.png``.

What is averaged: in a sweep's table (it has a ``point`` column) the rows of one grid point are replicates
(trajectories, graphs); a parameter of the sweep kind (an output fixed per point, such as ``certified``, is
none) that varies across the plotted rows but is none of ``x``, ``hue`` and
``facet`` at one plotted point is refused (averaging over a study variable hides it): fix it with ``where`` or
give it a role. A column that only follows the plotted ones (a cost computed from n) is not averaged over.
A sample count (consensus ``trajectories``, spectra ``graphs``) is no column and is not refused: the rows of
points that differ only in it are pooled (it may be named as ``x``, ``hue``, ``facet`` or in ``where``: it is
then each point's row count, missing for a spectra point of a deterministic family, which reads no ``graphs``), and a row that repeats a row of another point (the same sample:
trajectory t starts from the same X0 at every count and, without belief noise, is the same run, see
:func:`copied_rows`) is counted once.
Other tables (trials, metrics) are aggregated over every row of a group. The interval: for the mean, Student's
t interval (mean +- t_(1+ci)/2,n-1 s / sqrt(n)); for the median, the distribution-free interval between the
order statistics a binomial(n, 1/2) puts ``ci`` % of the probability between.

``y`` may also be ``"COL=VALUE"``: the share of rows whose ``COL`` is ``VALUE`` (matched as ``where`` matches, so
``"status=consensus"`` is the share of trajectories that reached consensus), with Wilson's score interval. A
consensus ``status`` itself is a code and is refused as ``y``.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from mascot.errors import InputError
from mascot.status import STATUS_NAMES

__all__ = [
    "load_table",
    "summarize",
    "plot",
    "draw",
    "warnings_for",
    "natural_order",
    "copied_rows",
    "drop_copied_rows",
    "STYLE",
]

#: The figures' one style (matplotlib rcParams), applied inside :func:`plot` only.
STYLE = {
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "lines.linewidth": 1.4,
    "lines.markersize": 4,
    "savefig.bbox": "tight",
    "pdf.fonttype": 42,  # TrueType in PDFs (publishers refuse Type 3 fonts)
    "ps.fonttype": 42,
}


def load_table(data) -> pd.DataFrame:
    """A DataFrame from ``data``: a DataFrame, a ``.parquet`` or ``.csv`` file, or a directory holding
    ``merged.parquet`` (a merged sweep run) or ``trials.parquet`` (a trials run).

    Returns: the table as a DataFrame; raises ``InputError`` for anything else.
    """
    if isinstance(data, pd.DataFrame):
        return data
    p = Path(data)
    if p.is_dir():
        for name in ("merged.parquet", "trials.parquet"):
            if (p / name).is_file():
                return pd.read_parquet(p / name)
        raise InputError(
            f"{p} holds neither merged.parquet nor trials.parquet (merge a sweep run first: mascot merge {p})"
        )
    if not p.is_file():
        raise InputError(f"{p}: no such file or directory")
    try:
        if p.suffix.lower() == ".parquet":  # (merge wrote noise.PARQUET, which plot then refused)
            return pd.read_parquet(p)
        if p.suffix.lower() == ".csv":
            return pd.read_csv(p)
    except Exception as e:  # a damaged file: say which and why
        raise InputError(f"{p}: cannot read it as {p.suffix[1:]}: {e}") from None
    raise InputError(f"{p}: give a .parquet or .csv file, or a run directory")


def _kind_of(df: pd.DataFrame):
    """The sweep kind (:class:`mascot.sweep.schema.Kind`) whose table ``df`` is, or ``None`` for another table:
    the kind whose row key is here and most of whose parameters are columns (a merged consensus table has no
    ``trajectories`` or ``tokens_*`` column: derived or stored per row)."""
    from mascot.sweep.kinds import KINDS

    cols = set(df.columns)
    best, best_have = None, set()
    for kind in KINDS.values():
        have = set(kind.params) & cols
        if (
            set(kind.row_key) <= cols
            and 2 * len(have) >= len(kind.params)
            and (best is None or len(have) > len(best_have))
        ):
            best, best_have = kind, have
    return best


def _kind_params(df: pd.DataFrame) -> set[str] | None:
    """The parameters of the sweep kind whose table ``df`` is that are its columns, or ``None`` for another
    table: then every column constant within a grid point counts as one, outputs such as a certificate's
    verdict included."""
    kind = _kind_of(df)
    return None if kind is None else set(kind.params) & set(df.columns)


_STATUS_CODES = {label: code for code, label in STATUS_NAMES.items()}  # consensus, BudgetFail, ... -> 0, 1, ...


def _matches(vals: pd.Series, col: str, want, what: str = "where") -> np.ndarray:
    """Which of ``vals`` (column ``col``) equal ``want``, a value as typed on the command line or a Python value:
    numbers by value (floats to 1e-9), booleans as true/false, a consensus status also by its label."""
    if isinstance(want, (list, tuple, set)):
        raise InputError(f"{what} {col}: give one value (filter once per column)")
    if isinstance(want, str) and vals.dtype.kind == "b" and want.lower() in ("true", "false"):
        want = want.lower() == "true"
    elif isinstance(want, str) and col == "status" and vals.dtype.kind in "OSU" and want in map(str, STATUS_NAMES):
        want = STATUS_NAMES[int(want)]  # a status code against a column of labels
    elif isinstance(want, str) and vals.dtype.kind in "biuf":
        if col == "status" and want in _STATUS_CODES:
            want = float(_STATUS_CODES[want])  # a consensus status by its label
        else:
            typed = want.replace(",", "") if re.fullmatch(r"\s*[+-]?\d{1,3}(,\d{3})+(\.\d*)?\s*", want) else want
            try:  # (13,920 as a figure shows it: a later tester)
                want = float(typed)
            except ValueError:
                labels = f" (or a status label: {', '.join(STATUS_NAMES.values())})" if col == "status" else ""
                raise InputError(f"{what} {col}={want!r}: {col} is numeric{labels}") from None
            if vals.dtype.kind == "f":
                return _typed_match(vals, col, typed, want, what)
    if vals.dtype.kind == "f" and isinstance(want, float):
        return np.isclose(vals.to_numpy(), want, rtol=1e-9, atol=0.0)
    return (vals.astype(str) == str(want)).to_numpy() if isinstance(want, str) else (vals == want).to_numpy()


def _tick(v: float) -> str:
    """A tick label of 4 significant digits, thousands separated (13924.77 -> 13,925; 646.331 -> 646.3): what
    ``--where`` takes back (:func:`_typed_match`)."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def _typed_match(vals: pd.Series, col: str, typed: str, want: float, what: str) -> np.ndarray:
    """A number typed with fewer digits than the column holds matches the one value it rounds: ``b0=1392.48``
    is 1392.4766500838336, as figures and tables show it (a logspace's values needed every digit typed: an
    outside tester). Equal values to 1e-9 first; then, for 3 to 14 significant digits typed, the value that
    rounds to them; a rounding that fits several values is refused."""
    x = vals.to_numpy()
    hit = np.isclose(x, want, rtol=1e-9, atol=0.0)
    mantissa = typed.strip().lower().lstrip("+-").split("e")[0]
    # significant digits typed; an integer's trailing zeros are placeholders (13,920 is 13924.77 to 4 digits)
    digits = len((mantissa if "." in mantissa else mantissa.rstrip("0")).replace(".", "").lstrip("0")) or 1
    if hit.any() or not np.isfinite(want) or not 3 <= digits < 15:  # (1e3 is no rounding of 1077.2)
        return hit
    cands = np.unique(x[np.isfinite(x)])
    near = cands[[float(f"{v:.{digits}g}") == float(f"{want:.{digits}g}") for v in cands]]
    if near.size > 1:
        shown = ", ".join(repr(float(v)) for v in near[:6])
        raise InputError(f"{what} {col}={typed!r} fits {near.size} values ({shown}); give more digits")
    return x == near[0] if near.size else hit


def _filter(df: pd.DataFrame, where: Mapping[str, object] | None) -> tuple[pd.DataFrame, list[str]]:
    """``df`` filtered by ``where`` and what the filters kept beside the asked values, in words. In a sweep
    kind's table a parameter stored as missing is one the row's family does not read, so fixing it keeps those
    rows too: ``--where p=0.25 --where beta=0.1`` is Erdos-Renyi graphs at p 0.25, Watts-Strogatz at beta 0.1
    and the rings (an outside tester: the filter dropped every family without p, without a word). Each filter is
    matched against the whole table, so their order does not matter, and a value no row holds is an error."""
    params = _kind_params(df) if "point" in df.columns else None
    passed, keep = [], np.ones(len(df), bool)
    for col, want in (where or {}).items():
        if col not in df.columns:
            raise InputError(f"where: no column {col!r}; columns: {', '.join(df.columns)}")
        vals = df[col]
        hit = _matches(vals, col, want)
        if not hit.any():
            shown = ", ".join(map(str, natural_order(vals.dropna())[:12]))
            raise InputError(f"where {col}={want!r} keeps no row; {col} takes {shown or 'no value (all missing)'}")
        unread = vals.isna().to_numpy() & ~hit if params is not None and col in params else None
        if unread is not None:
            passed.append((col, want, unread))
        keep &= hit | unread if unread is not None else hit
    if not keep.any():
        said = ", ".join(f"{c}={v}" for c, v in (where or {}).items())
        raise InputError(f"where {said}: no row meets every filter together")
    notes = [
        f"where {col}={want} also keeps the {int((unread & keep).sum()):,} rows that do not read {col} (stored as "
        "missing)"
        for col, want, unread in passed
        if (unread & keep).any()
    ]
    return df[keep], notes


def _interval(v: np.ndarray, agg: str, ci: float) -> tuple[float, float, float]:
    from scipy import stats

    n = v.size
    if agg == "share":  # 0/1 values: Wilson's score interval (Student's t gives a zero-width band at 0 and 1)
        p = float(np.mean(v))
        z = float(stats.norm.ppf(0.5 + ci / 200.0))
        mid = (p + z * z / (2 * n)) / (1 + z * z / n)
        h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return p, 0.0 if p == 0 else max(mid - h, 0.0), 1.0 if p == 1 else min(mid + h, 1.0)  # exact ends
    if agg == "mean":
        c = float(np.mean(v))
        if n < 2:
            return c, math.nan, math.nan
        h = float(stats.t.ppf(0.5 + ci / 200.0, n - 1) * np.std(v, ddof=1) / math.sqrt(n))
        return c, c - h, c + h
    c = float(np.median(v))
    if n < 2:
        return c, math.nan, math.nan
    s = np.sort(v)
    # ranks j < k with P(j <= B < k) >= ci for B ~ binomial(n, 1/2): the interval [s_(j), s_(k-1)] (0-based)
    lo = int(stats.binom.ppf((1 - ci / 100.0) / 2, n, 0.5))
    if lo < 1:  # even [min, max] covers only 1 - 2^(1-n) < ci: no interval at this confidence
        return c, math.nan, math.nan
    hi = int(n - lo)
    lo, hi = max(lo - 1, 0), min(hi, n - 1)
    return c, float(s[lo]), float(s[hi])


def _rows_for_interval(agg: str, ci: float) -> int:
    """The fewest finite rows :func:`_interval` draws a ``ci`` % interval of ``agg`` from."""
    if agg != "median":
        return 2 if agg == "mean" else 1
    n = 2
    while math.isnan(_interval(np.arange(float(n)), "median", ci)[1]):
        n += 1
    return n


def summarize(
    data,
    x: str,
    y: str,
    *,
    hue: str | None = None,
    facet: str | None = None,
    agg: str = "mean",
    ci: float | None = 95.0,
    where: Mapping[str, object] | None = None,
) -> pd.DataFrame:
    """The numbers :func:`plot` draws: one row per (facet, hue, x) with ``y`` aggregated (``agg``: mean or
    median) over the group's rows, its ``ci`` % interval (``lo``, ``hi``; NaN with one row or ``ci=None``) and
    the number of finite ``y`` values aggregated, ``rows`` (``nonfinite_rows``: NaN or inf, left out).

    Arguments: ``data`` a DataFrame or a path as :func:`plot`; ``x``, ``y`` the columns (``y`` also
    ``"COL=VALUE"``: the share of rows with that value, see the module docstring); ``hue``, ``facet``
    optional grouping columns; ``agg`` "mean" or "median"; ``ci`` the interval's level in percent (None: none);
    ``where`` column -> value filters applied first. Returns the summary DataFrame; raises ``InputError`` when a
    sweep parameter varies within a plotted point.
    """
    df = load_table(data)
    named = {x, y.partition("=")[0], hue, facet, *(where or {})} - {None}
    kind = _kind_of(df) if "point" in df.columns else None
    count = kind.count_param if kind is not None else None
    if count is not None and count in named and count not in df.columns:
        # a sample count the rows do not hold (consensus trajectories, spectra graphs): each point's row count,
        # before any filter; missing where the point does not read it (a deterministic family's one graph)
        rows = df.groupby("point", sort=False)["point"].transform("size").astype("float64")
        reads = kind.params[count].reads
        if reads is not None and reads[0] in df.columns:
            rows = rows.where(df[reads[0]].isin(reads[1]))
        df = df.assign(**{count: rows})
    if agg not in ("mean", "median"):
        raise InputError(f"agg must be mean or median; got {agg!r}")
    if ci is not None and not 0 < ci < 100:
        raise InputError(f"ci must be a level in percent, 0 < ci < 100 (None or --ci 0: no intervals); got {ci!r}")
    df, kept_unread = _filter(df, where)  # (before the share column is made: an error lists the table's columns)
    share_of = None  # y = "COL=VALUE": the share of rows whose COL is VALUE (e.g. status=consensus)
    if y not in df.columns and "=" in y:
        share_of, _, want = y.partition("=")
        if share_of not in df.columns:
            raise InputError(f"y = {y!r}: no column {share_of!r}; columns: {', '.join(df.columns)}")
        if share_of in (x, hue, facet):
            raise InputError(f"y = {y!r}: {share_of} is also the x, hue or facet column")
        if agg != "mean":
            raise InputError(
                f"y = {y!r} is a share of rows: aggregate it with the mean (the median of 0s and 1s is 0 or 1)"
            )
    roles = {"x": x, "y": y, "hue": hue, "facet": facet}
    given = [(r, c) for r, c in roles.items() if c is not None and r != "y"]
    for i, (r1, c1) in enumerate(given):  # (--x b0 --hue b0 drew one point per colour, without a word)
        for r2, c2 in given[i + 1 :]:
            if c1 == c2:
                raise InputError(f"{r1} and {r2} are both {c1!r}: give each role its own column")
    for role, col in roles.items():
        if col is not None and col not in df.columns and not (role == "y" and share_of is not None):
            raise InputError(f"{role} = {col!r}: no such column; columns: {', '.join(df.columns)}")
    if share_of is not None:
        hit = _matches(df[share_of], share_of, want, what="y")
        known_status = share_of == "status" and (want in _STATUS_CODES or want in map(str, STATUS_NAMES))
        if not hit.any() and not known_status:  # a typo would plot as a share of 0 everywhere
            shown = ", ".join(map(str, natural_order(df[share_of].dropna())[:12]))
            raise InputError(f"y = {y!r}: no row has {share_of} = {want!r}; {share_of} takes {shown}")
        # a row whose COL is missing is neither VALUE nor not: NaN, left out and counted as nonfinite
        df = df.assign(**{y: np.where(df[share_of].isna().to_numpy(), np.nan, hit.astype(np.float64))})
    if y in (x, hue, facet):
        raise InputError(f"y = {y!r} is also the x, hue or facet column")
    if df[y].dtype.kind not in "biuf":
        raise InputError(f"y = {y!r} is not numeric ({df[y].dtype}); plot a numeric column")
    if y == "status":  # a code, not a quantity: a mean of 1s and 2s read as "1.17" (an outside tester)
        labels = ", ".join(f"{k} {v}" for k, v in STATUS_NAMES.items())
        raise InputError(
            f"y = 'status' is a code ({labels}); its mean means nothing. Plot the share of rows with one status, "
            "e.g. --y status=consensus, or split the rows by it (--hue status)"
        )
    keys = [c for c in (facet, hue, x) if c is not None]
    for c in keys:  # one setting per value to 12 digits: 0.3 and 0.30000000000000004 (a linspace) were two lines
        if df[c].dtype.kind == "f":  # both labelled 0.3, which --where a=0.3 pooled (an outside tester)
            u = df[c].dropna().unique()
            df = df.assign(**{c: df[c].map(dict(zip(u, (float(f"{v:.12g}") for v in u))))})
    missing = df[keys].isna().any(axis=1).to_numpy() if keys else np.zeros(len(df), bool)
    if missing.any():  # a row without an x, hue or facet value has no place in the figure: left out, and said
        if missing.all():
            empty = [f"the {role} column {col}" for role, col in roles.items() if col in keys and df[col].isna().all()]
            what = " and ".join(empty) or "the x, hue or facet column"
            raise InputError(
                f"nothing to plot: none of the {len(df):,} rows kept has a value in {what} (a sweep stores a "
                "parameter as missing where the point's family or strategy does not read it)"
            )
        df = df[~missing]
    copies = 0
    if "point" in df.columns:  # a sweep: rows that repeat another point's rows are one simulation, counted once
        df, copies = drop_copied_rows(df)
    if "point" in df.columns:  # a sweep: refuse to average over a parameter the figure does not show
        per_point = df.groupby("point", sort=False).nunique(dropna=False)
        known = _kind_params(df)  # a sweep kind's table: its parameters, not the outputs fixed per point
        params = [
            c
            for c in per_point.columns
            if (per_point[c] <= 1).all() and c not in keys and c not in (y, share_of) and (known is None or c in known)
        ]
        # several values inside one plotted point; a missing value is a parameter the row's family or strategy
        # does not read (a star's degree), not another setting
        within = df.groupby(keys, observed=True, dropna=False)[params].nunique(dropna=True) if params else None
        varying = [c for c in params if (within[c] > 1).any()]
        if varying:
            raise InputError(
                "these parameters vary across the rows but are not x, hue or facet: "
                + ", ".join(f"{c} ({int(within[c].max())} values at one plotted point)" for c in varying)
                + "; averaging over them would hide them. Give each a role (--hue, --facet) or fix it (--where "
                "COL=VALUE)"
            )
    vals = df[y].to_numpy(dtype=np.float64)
    finite = np.isfinite(vals)
    # a consensus table's status: rows that stopped short of consensus hold where they stopped, not a result
    stopped = None
    if "status" in df.columns and df["status"].dtype.kind in "biu" and share_of is None:
        stopped = (df["status"].to_numpy() != 0) & finite
    rows = []
    for key, idx in df.groupby(keys, sort=True, observed=True, dropna=False).indices.items():
        key = key if isinstance(key, tuple) else (key,)
        v = vals[idx][finite[idx]]
        how = "share" if share_of is not None else agg
        c, lo, hi = _interval(v, how, 95.0 if ci is None else ci) if v.size else (math.nan, math.nan, math.nan)
        if ci is None:
            lo = hi = math.nan
        rows.append(
            {
                **dict(zip(keys, key)),
                y: c,
                "lo": lo,
                "hi": hi,
                "rows": int(v.size),
                "nonfinite_rows": int(idx.size - v.size),
                **({} if stopped is None else {"unfinished_rows": int(stopped[idx].sum())}),
            }
        )
    out = pd.DataFrame(rows)
    out.attrs["missing_key_rows"] = int(missing.sum())  # (read by warnings_for)
    out.attrs["copied_rows"] = copies
    out.attrs["where_notes"] = kept_unread
    out.attrs["interval"] = None if ci is None else ("share" if share_of is not None else agg, ci)
    if len(out):  # rows in natural order (n2 before n10), as the figure draws them
        ranks = []
        for c in keys:
            order = {v: i for i, v in enumerate(natural_order(out[c]))}
            ranks.append(out[c].map(lambda v, order=order: order.get(v, len(order))).to_numpy())
        out = out.iloc[np.lexsort(ranks[::-1])].reset_index(drop=True)
    return out


def _label(col: str) -> str:
    """A column's name as the figure shows it: as written (an outside tester: d_t shown as "d t" read as something
    else); ``COL=VALUE`` as the share of rows with that value."""
    if "=" in col:  # y = "COL=VALUE" (summarize): a share of rows
        name, _, value = col.partition("=")
        return f"share with {name} = {value}"
    return col


def copied_rows(df: pd.DataFrame) -> np.ndarray:
    """Which rows of a sweep's table (it has a ``point`` column) are a sample that an earlier grid point's rows
    already hold. A sweep writes such rows for points that differ only in parameters their family or strategy
    does not read (stored as missing) and, through its common random numbers, for points that differ only in a
    sample count the rows do not hold: without belief noise, trajectory t of a consensus point with
    ``trajectories = 50`` is trajectory t of the same point with 200. Averaging over such copies counts one sample several times (an
    outside tester: intervals 3.3x too narrow).

    In a sweep kind's table a sample is its parameter columns and its row key but ``point`` (``trajectory``,
    ``graph``), and for a kind whose samples are seeded with their count (spectra's random families) also the
    point's row count; a row drawn with its point's own key (consensus belief noise > 0) is a sample of that
    point alone; the outputs are not compared (a sample computed in batches of another size can differ
    in its last float32 bit). In another table only whole points are copies: every row of the point, in
    order, equal to a row of an earlier point in every column but ``point``.

    Arguments: ``df`` a sweep's rows. Returns a boolean array, one entry per row of ``df``."""
    if df.empty or "point" not in df.columns:
        return np.zeros(len(df), bool)
    flat = df.reset_index(drop=True)
    kind = _kind_of(flat)
    if kind is not None:
        cols = [c for c in flat.columns if c in kind.params or (c in kind.row_key and c != "point")]
        key = flat[cols]
        if kind.count_reseeds:
            key = key.assign(_rows=flat.groupby("point", sort=False)["point"].transform("size"))
        if kind.point_draws in flat.columns:  # rows drawn with their point's own key belong to it alone
            own = flat[kind.point_draws].fillna(0).to_numpy() > 0
            key = key.assign(_own=np.where(own, flat["point"].to_numpy(), -1))
    else:  # whole points only: in a table of unknown rows, equal values need not be one sample
        h = pd.util.hash_pandas_object(flat.drop(columns="point"), index=False).to_numpy(dtype=np.uint64)
        pos = flat.groupby("point", sort=False).cumcount().to_numpy(dtype=np.uint64) + np.uint64(1)
        with np.errstate(over="ignore"):  # (sums of 64-bit hashes wrap around: a signature, not a number)
            sig = (
                pd.DataFrame({"point": flat["point"], "a": h, "b": h * pos})
                .groupby("point", sort=True)
                .agg(a=("a", "sum"), b=("b", "sum"), n=("a", "size"))
            )
        copied = sig.index[sig.duplicated(keep="first").to_numpy()]
        return flat["point"].isin(copied).to_numpy()
    order = np.argsort(flat["point"].to_numpy(), kind="stable")  # (earlier points keep their rows)
    out = np.empty(len(df), bool)
    out[order] = key.iloc[order].duplicated(keep="first").to_numpy()
    return out


def drop_copied_rows(df: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """``df`` without the rows :func:`copied_rows` finds, and how many rows those were.

    Arguments: ``df`` a sweep's rows. Returns ``(rows, rows dropped)``."""
    copies = copied_rows(df)
    k = int(copies.sum())
    return (df[~copies], k) if k else (df, 0)


def natural_order(values) -> list:
    """Distinct values in natural order: numbers by value, strings with their digit runs compared as numbers
    (``n2 < n10``, ``chain:8 < chain:12``), missing values last.

    Arguments: ``values`` any iterable of numbers, strings or missing values. Returns a list."""
    import re

    def key(v):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return (2, ())
        if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
            return (0, (float(v),))
        return (1, tuple((0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", str(v)) if t))

    return sorted(pd.unique(pd.Series(list(values), dtype=object)), key=key)


def warnings_for(s: pd.DataFrame, x: str, y: str, *, logx: bool = False, logy: bool = False) -> list[str]:
    """What a figure of the :func:`summarize` table ``s`` leaves out, in words: rows whose ``y`` is NaN or inf
    (not aggregated) and plotted points a log axis cannot show (values <= 0).

    Arguments: ``s`` the table; ``x``, ``y`` its plotted columns; ``logx``, ``logy`` whether the axes are
    logarithmic.

    Returns: a list of sentences (empty when nothing is left out).
    """
    out = list(s.attrs.get("where_notes", []))
    gone = int(s.attrs.get("missing_key_rows", 0))
    if gone:
        out.append(f"{gone:,} rows with no value in the x, hue or facet column were left out")
    copies = int(s.attrs.get("copied_rows", 0))
    if copies:
        out.append(
            f"{copies:,} rows repeat rows of other grid points (the same samples: the points differ only in "
            "parameters their family or strategy does not read, or in a sample count such as trajectories) and were "
            "counted once"
        )
    bad = int(s["nonfinite_rows"].sum()) if "nonfinite_rows" in s else 0
    if bad:
        out.append(f"{bad:,} rows with a NaN or infinite {y} were left out of the aggregates")
    how = s.attrs.get("interval")
    if how is not None and {"rows", "lo"} <= set(s.columns):
        thin = int(((s["rows"] > 0) & s["lo"].isna()).sum())
        if thin:
            need = _rows_for_interval(*how)
            out.append(
                f"{thin} plotted point(s) have no interval: a {how[1]:g}% interval of the {how[0]} needs at least "
                f"{need} rows"
            )
    empty = int((s["rows"] == 0).sum()) if "rows" in s else 0
    if empty:
        out.append(f"{empty} plotted point(s) have no finite {y} at all and are not drawn")
    if "unfinished_rows" in s and s["unfinished_rows"].sum():
        k, n = int(s["unfinished_rows"].sum()), int(s["rows"].sum())
        worst = s.loc[s["unfinished_rows"].idxmax()]
        share = worst["unfinished_rows"] / max(worst["rows"], 1)
        out.append(
            f"{k:,} of {n:,} aggregated rows did not reach consensus (status != 0: {y} is where they stopped, not "
            f"what consensus cost); up to {100 * share:.0f}% at one plotted point. Plot them apart (--hue status) or "
            "keep those that did (--where status=consensus), and raise max_rounds or b0 if they ran out"
        )
    if "rows" in s and len(s) > 1:
        drawn = s["rows"][s["rows"] > 0]
        if len(drawn) and drawn.min() * 4 <= drawn.max():
            out.append(
                f"plotted points rest on very different row counts ({int(drawn.min()):,} to {int(drawn.max()):,}); "
                "the thin ones have wide or no intervals"
            )
    if logy:
        k = int((s[y] <= 0).sum())
        if k:
            out.append(f"{k} plotted point(s) with {y} <= 0 cannot be drawn on the log y axis")
    if logx and s[x].dtype.kind in "biuf":
        k = int((s[x] <= 0).sum())
        if k:
            out.append(f"{k} plotted point(s) with {x} <= 0 cannot be drawn on the log x axis")
    elif logx:
        out.append(f"--logx ignored: {x} is categorical")
    return out


def plot(data, x: str, y: str, *, logx: bool = False, logy: bool = False, title: str | None = None, **summary):
    """``y`` against ``x`` (see the module docstring): returns the matplotlib Figure (one panel per ``facet``
    value, one line per ``hue`` value, bands for the intervals, the legend outside the panels). ``summary``:
    :func:`summarize`'s keywords (hue, facet, agg, ci, where).

    Arguments: ``data`` a DataFrame, or a path (a merged sweep or trials run directory, a Parquet or CSV file);
    ``x``, ``y`` the columns; ``logx``, ``logy`` log axes; ``title`` a figure title.
    """
    s = summarize(data, x, y, **summary)
    return draw(
        s,
        x,
        y,
        hue=summary.get("hue"),
        facet=summary.get("facet"),
        agg=summary.get("agg", "mean"),
        ci=summary.get("ci", 95.0),
        logx=logx,
        logy=logy,
        title=title,
    )


def _errorbars(ax, xs, line: pd.DataFrame, y: str, color, label) -> None:
    """Points at ``line[y]`` with their interval (``lo``, ``hi``) as error bars (none where it is NaN)."""
    yv = line[y].to_numpy(dtype=float)
    err = np.vstack([yv - line["lo"].to_numpy(float), line["hi"].to_numpy(float) - yv])
    ax.errorbar(xs, yv, yerr=np.where(np.isfinite(err), err, 0.0), fmt="o", color=color, capsize=2.5, label=label)


def draw(
    s: pd.DataFrame,
    x: str,
    y: str,
    *,
    hue: str | None = None,
    facet: str | None = None,
    agg: str = "mean",
    ci: float | None = 95.0,
    logx: bool = False,
    logy: bool = False,
    title: str | None = None,
):
    """The figure of a :func:`summarize` table ``s`` (drawn from it alone: the data is not read again).

    Arguments: ``s`` the table; ``x``, ``y`` its columns on the axes; ``hue`` the column of the lines; ``facet``
    the column of the panels; ``agg`` the aggregation named on the y label; ``ci`` the interval's level (%)
    named on the label; ``logx``, ``logy`` log axes; ``title`` a figure title. Returns the matplotlib Figure.
    """
    import matplotlib as mpl
    import matplotlib.pyplot as plt

    from mascot.analysis.figures import readable_log_axis

    if s.empty:
        raise InputError("nothing to plot: no rows")
    if "rows" in s and not (s["rows"] > 0).any():
        raise InputError(f"nothing to plot: no finite {y} value in any row (all NaN or infinite)")
    keep = np.ones(len(s), dtype=bool)  # points a log axis cannot show are left out (warnings_for says how many);
    if logy:  # NaN ones stay (not drawn, they break a line and keep their hue in the legend, as on linear axes;
        keep &= ~(s[y] <= 0).to_numpy()  # they were counted as <= 0: an outside tester)
    if logx and s[x].dtype.kind in "biuf":
        keep &= ~(s[x] <= 0).to_numpy()
    if not keep.any():
        raise InputError("nothing to plot on log axes: every plotted point is <= 0 there")
    dropped = int((~keep).sum())
    s = s[keep]
    # an axis with one value is not drawn as a dimension: a hue of one value is named in the title instead
    if hue is not None and s[hue].nunique(dropna=False) <= 1:
        one = f"{hue} = {s[hue].iloc[0]}"
        title, hue = (one if not title else title if one in title else f"{title}, {one}"), None
    facets = natural_order(s[facet]) if facet is not None else [None]
    numeric_x = s[x].dtype.kind in "biuf"
    xcats = None if numeric_x else natural_order(s[x])
    hues = natural_order(s[hue]) if hue else [None]
    numeric_hue = hue is not None and s[hue].dtype.kind in "biuf" and len(hues) > 6
    with mpl.rc_context(STYLE):
        ncol = 2 if len(facets) == 4 else min(len(facets), 3)  # 2 x 2, not 3 + 1
        nrow = math.ceil(len(facets) / ncol)
        tall = 0.2 * min(len(hues), 16) + 1.0 if hue else 0.0  # room for the legend's longest column
        # the legend sits beside the panels: widen the figure by its width instead of narrowing the panels
        wide = (
            (0.55 + 0.07 * max(len(str(v)) for v in [*hues, _label(hue)])) * math.ceil(len(hues) / 16) if hue else 0.0
        )
        fig, axes = plt.subplots(
            nrow, ncol, figsize=(3.4 * ncol + wide, max(2.7 * nrow, tall)), squeeze=False, sharey=True
        )
        if numeric_hue or len(hues) > 20:  # an ordered scale, or too many categories for distinct colours
            cmap = mpl.colormaps["viridis"]
            colors = [cmap(i / max(len(hues) - 1, 1)) for i in range(len(hues))]
        elif len(hues) > 10:
            colors = [mpl.colormaps["tab20"](i) for i in range(len(hues))]
        else:
            colors = [f"C{i}" for i in range(len(hues))]
        # a marker shape per hue too: lines that coincide (adaptive under complete) still show both
        shapes = ["o", "s", "^", "D", "v", "P", "X", "<", ">", "h"]
        markers = {hv: shapes[i % len(shapes)] if len(hues) <= 10 else "o" for i, hv in enumerate(hues)}
        censored = False
        for k, fv in enumerate(facets):
            ax = axes[k // ncol][k % ncol]
            sub = s if facet is None else s[s[facet] == fv]
            for hv, color in zip(hues, colors):
                line = sub if hue is None else sub[sub[hue] == hv]
                if line.empty:
                    continue
                line = line.sort_values(x)
                xs = line[x].to_numpy() if numeric_x else np.array([xcats.index(v) for v in line[x]])
                label = None if hue is None else f"{hv:g}" if isinstance(hv, float) else str(hv)
                if label is not None and "rows" in s and not (s.loc[s[hue] == hv, "rows"] > 0).any():
                    label += " (no finite value)"  # (listed, never drawn, and unexplained: an outside tester)
                if numeric_x and len(line) == 1:  # one x value: a point with its error bar (a band has no width)
                    _errorbars(ax, xs, line, y, color, label)
                elif numeric_x:  # a line with its band
                    ax.plot(xs, line[y], marker=markers[hv], color=color, label=label, markerfacecolor="none")
                    if np.isfinite(line["lo"]).any():
                        ax.fill_between(xs, line["lo"], line["hi"], color=color, alpha=0.18, linewidth=0)
                else:  # categories: points with error bars, the hues side by side
                    j = hues.index(hv)
                    dx = (j - (len(hues) - 1) / 2) * min(0.6 / len(hues), 0.15)
                    xs = xs + dx
                    _errorbars(ax, xs, line, y, color, label)
                if "unfinished_rows" in line:  # points resting on runs that stopped short of consensus: marked
                    cut = (line["unfinished_rows"] > 0).to_numpy()
                    if cut.any():
                        censored = True
                        ax.plot(np.asarray(xs)[cut], line[y].to_numpy()[cut], "x", color="k", ms=5, zorder=5)
            if facet is not None:
                ax.set_title(f"{_label(facet)} = {fv:g}" if isinstance(fv, float) else f"{_label(facet)} = {fv}")
            if not numeric_x:
                ax.set_xticks(range(len(xcats)), [str(c) for c in xcats])
            if logx and numeric_x:
                ax.set_xscale("log")
                ticks = np.unique(s[x].to_numpy(dtype=float))
                ticks = ticks[np.isfinite(ticks) & (ticks > 0)]
                if 0 < ticks.size <= 12:  # the data's own x values, written plainly, none within 25% of another
                    readable_log_axis(ax, "x", values=ticks)  # and in 4 digits (646.331392.48 ran together:
                    ax.xaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: _tick(v)))  # a tester)
            if logy:
                ax.set_yscale("log")
            if numeric_x and not logx and pd.api.types.is_integer_dtype(s[x]):  # (n ticked 7.5, 12.5)
                ax.xaxis.set_major_locator(mpl.ticker.MaxNLocator(integer=True))
            ax.set_xlabel(_label(x))
            if k % ncol == 0:
                if "=" in y:  # a share of rows (summarize): Wilson's interval
                    # on two lines: on one it ran taller than the axes (an outside tester)
                    ax.set_ylabel(_label(y) + ("" if ci is None else f"\n({ci:g}% Wilson CI)"))
                else:  # (no band is said where none is drawn: one row a point has no interval, an outside tester)
                    drawn = "lo" not in s or np.isfinite(s["lo"]).any()
                    band = "" if ci is None or not drawn else f" ({ci:g}% CI)"
                    ax.set_ylabel(f"{_label(y)}, {agg}{band}" if "rows" not in s or s["rows"].max() > 1 else _label(y))
        for k in range(len(facets), nrow * ncol):
            axes[k // ncol][k % ncol].set_visible(False)
        if hue is not None:
            handles, labels = axes[0][0].get_legend_handles_labels()
            for a in axes.ravel()[1:]:
                for h, lab in zip(*a.get_legend_handles_labels()):
                    if lab not in labels:
                        handles.append(h)
                        labels.append(lab)
            axes[0][ncol - 1].legend(  # beside the top-right panel, off the data; long legends in columns
                handles,
                labels,
                title=_label(hue),
                loc="upper left",
                bbox_to_anchor=(1.02, 1.0),
                frameon=False,
                ncol=math.ceil(len(labels) / 16),
            )
        if logy:  # plain numbers where the axis spans under two powers of ten (6x10^0 read badly)
            for a in axes.ravel():
                if a.get_visible() and a.has_data():
                    readable_log_axis(a, "y")
        if title:  # wrapped to the panels' width (eight filters widened the figure to 1,740 px around one panel)
            fig.suptitle("\n".join(textwrap.wrap(title, max(40, int(14 * fig.get_size_inches()[0])))))
        fig.tight_layout()
        notes = []  # (a figure copied into a paper without the command's warnings still says these)
        if censored:
            notes.append(
                f"x: a point with rows that did not reach consensus; for them, {_label(y)} is where they stopped, not "
                "what consensus cost"
            )
        if dropped:
            notes.append(f"{dropped} point{'s' if dropped > 1 else ''} <= 0 not shown (log axis)")
        if "rows" in s:  # NaN or inf values: whole points, or rows of drawn points, left out
            empty = int((s["rows"] == 0).sum())
            partial = int(s.loc[s["rows"] > 0, "nonfinite_rows"].sum()) if "nonfinite_rows" in s else 0
            if empty:
                notes.append(f"{empty} point{'s' if empty > 1 else ''} not drawn: no finite {_label(y)} (NaN or inf)")
            if partial:
                notes.append(
                    f"{partial:,} row{'s' if partial > 1 else ''} with NaN or inf {_label(y)} left out of the points"
                )
        if notes:
            fig.text(0.01, 0.0, "\n".join(notes), fontsize=7, ha="left", va="top")
    return fig
