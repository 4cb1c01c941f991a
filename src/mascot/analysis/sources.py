"""Where a sweep report's rows come from: the merged dataset ``mascot merge`` wrote, checked against the run it
was merged from (rows and grid points recorded in its metadata), and named in the report (experiment and hash).

A file cut, filtered or concatenated after the merge (metadata kept) is refused, as is a single chunk file of a
run (a report on it would describe a fraction of the grid as the whole); a file without mascot's metadata is
reported as it is, and the report says its rows were not checked.
"""

from __future__ import annotations

import json

import pandas as pd

from mascot.errors import InputError

__all__ = ["merged_meta", "check_merged", "check_unique_rows", "source_line"]


def merged_meta(path) -> dict | None:
    """The metadata ``mascot merge`` wrote into the dataset at ``path`` (plan, chunks, rows), or ``None`` for a
    file without it. Raises ``InputError`` for one chunk file of a run directory (merge the run first)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mascot.sweep.store import META_KEY, merged_metadata

    meta = merged_metadata(path)
    if meta is not None:
        return meta if isinstance(meta.get("rows"), int) else None
    try:
        own = json.loads((pq.read_metadata(path).metadata or {}).get(META_KEY, b"null"))
    except (OSError, ValueError, pa.ArrowException):
        return None
    if isinstance(own, dict) and "chunk" in own and "config_hash" in own:
        raise InputError(
            f"{path} is one chunk of a run (chunk {own.get('chunk')}), not a merged "
            "dataset: merge the run first (mascot merge RUN_DIR) and report on RUN_DIR/merged.parquet"
        )
    return None


def check_merged(data, meta: dict | None, rows: int, points: int) -> None:
    """Refuse a merged dataset that does not hold the ``rows`` and grid ``points`` its metadata ``meta`` records:
    a file concatenated with another, cut or filtered since ``mascot merge`` wrote it (a report would describe
    other rows as the run's). ``meta`` None (no metadata): nothing to check."""
    if meta is None:
        return
    want_points = meta["plan"].get("n_points")
    if rows != meta["rows"] or (isinstance(want_points, int) and points != want_points):
        raise InputError(
            f"{data}: holds {rows:,} rows of {points:,} grid points, but the run it was merged from has "
            f"{meta['rows']:,} rows of {want_points:,} points (experiment {meta['plan'].get('name')!r}, hash "
            f"{meta['plan'].get('hash')}): not the file `mascot merge` wrote (concatenated, cut or filtered "
            "since?); merge the run again, or strip the metadata to report on the rows as they are"
        )


def check_unique_rows(data, df: pd.DataFrame, key: list[str]) -> None:
    """Refuse rows that repeat a row key (``point`` and ``trajectory`` or ``graph``): a file whose rows were
    duplicated inside their points keeps its row and point counts, so :func:`check_merged` cannot see it."""
    cols = [c for c in key if c in df.columns]
    if len(cols) < 2:
        return
    dup = df.duplicated(cols)
    if dup.any():
        first = df[dup].iloc[0]
        raise InputError(
            f"{data}: {int(dup.sum()):,} rows repeat the {' and '.join(cols)} of another row (e.g. "
            + ", ".join(f"{c} {first[c]}" for c in cols)
            + "): not the file `mascot merge` wrote; merge the run again"
        )


def source_line(data, meta: dict | None, caller: str = "the report") -> str:
    """One sentence naming the rows' source: the experiment and hash of a checked merged dataset, or that the
    rows were not checked (a file without metadata, or a DataFrame passed to ``caller``)."""
    if isinstance(data, pd.DataFrame):
        return f"From a DataFrame passed to `{caller}`."
    if meta is None:
        return f"From `{data}` (not a dataset `mascot merge` wrote: its rows were not checked against a run)."
    pl = meta["plan"]
    return (
        f"From `{data}`: experiment `{pl.get('name')}` (hash {pl.get('hash')}); its {meta['rows']:,} rows and "
        f"{pl.get('n_points'):,} points checked against the run it was merged from."
    )
