"""Damage on disk, for the fault tests: a bit flip inside one Parquet data page; a sweep plan edited by hand."""

from __future__ import annotations

import json

import pyarrow.parquet as pq


def flip_page_byte(path, column: str) -> None:
    """Flip bits of the last byte of ``column``'s last data page (its payload, not the footer): the data are
    wrong but the file still parses, as after a bit flip on disk."""
    md = pq.read_metadata(path)
    names = [md.schema.column(j).name for j in range(md.num_columns)]
    col = md.row_group(0).column(names.index(column))
    start = min(o for o in (col.dictionary_page_offset, col.data_page_offset) if o is not None)
    b = bytearray(path.read_bytes())
    b[start + col.total_compressed_size - 1] ^= 0x5A
    path.write_bytes(bytes(b))


def read_plan(run_dir) -> dict:
    """A sweep run directory's plan: the identity of its ``run.json``."""
    return json.loads((run_dir / "run.json").read_text())["identity"]


def write_plan(run_dir, plan: dict) -> None:
    """Replace the plan in ``run_dir``'s ``run.json`` (the rest of the file kept), as a hand edit would."""
    meta = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps(dict(meta, identity=plan)))
