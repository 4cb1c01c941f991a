"""``mascot plot DATA --x COL --y COL [--hue COL] [--facet COL] ... --out FIG.png``: one figure from any table
mascot writes (:func:`mascot.analysis.plot.plot`), and beside it the numbers it draws (``FIG.csv``)."""

from __future__ import annotations

import os
from pathlib import Path

from mascot.errors import InputError

__all__ = ["add_parser"]


def _cmd_plot(args) -> int:
    import sys

    from mascot.analysis.plot import draw, summarize, warnings_for
    from mascot.io import atomic_path, write_csv

    out = Path(args.out)
    fmt = out.suffix.lower()[1:]
    if fmt not in ("png", "pdf"):
        raise InputError(f"--out {out}: give a .png or .pdf file")
    if out.is_dir():
        raise InputError(f"--out {out} is a directory; give a .png or .pdf file")
    parent = out.resolve().parent
    if parent.name == "chunks" and (
        (parent.parent / "run.json").is_file() or (parent.parent / ".mascot.lock").exists()
    ):
        # (a figure and its CSV in a sweep's chunks/ were then named as stray files by every run: an outside tester)
        raise InputError(
            f"--out {out} is inside a sweep's chunks/ folder, which holds only its chunks; give another path"
        )
    numbers = out.with_suffix(".csv")  # the plotted numbers are written here: never over the data read
    where = {}
    for item in args.where or ():
        col, sep, val = item.partition("=")
        if not sep or not col:
            raise InputError(f"--where {item!r}: write COL=VALUE")
        if col in where:
            raise InputError(f"--where {col} given twice: filter each column once")
        where[col] = val
    kw = dict(hue=args.hue, facet=args.facet, agg=args.agg, ci=None if args.ci == 0 else args.ci, where=where)
    table = summarize(args.data, args.x, args.y, **kw)  # read and aggregated once: drawn and written as CSV
    opts = {k: kw[k] for k in ("hue", "facet", "agg", "ci")}
    # the rows a figure shows are part of what it says: filters go into the title unless --title is given
    title = args.title if args.title is not None else (", ".join(f"{c} = {v}" for c, v in where.items()) or None)
    fig = draw(table, args.x, args.y, logx=args.logx, logy=args.logy, title=title, **opts)
    out.parent.mkdir(parents=True, exist_ok=True)
    # compared once the folders exist (nosub/../t.csv named t.csv only after nosub was made), by inode
    # (symlinks, relative paths, hard links)
    if numbers.exists() and Path(args.data).is_file() and os.path.samefile(numbers, args.data):
        raise InputError(
            f"--out {out} would write the plotted numbers to {numbers}, the data being plotted; give another name"
        )
    import matplotlib as mpl

    from mascot.analysis.plot import STYLE

    with atomic_path(out) as tmp, mpl.rc_context(STYLE):
        fig.savefig(tmp, dpi=200, format=fmt, metadata={"CreationDate": None} if fmt == "pdf" else {})
    import matplotlib.pyplot as plt

    plt.close(fig)
    write_csv(table, numbers, index=False)
    for w in warnings_for(table, args.x, args.y, logx=args.logx, logy=args.logy):
        print(f"mascot: warning: {w}", file=sys.stderr)
    print(f"wrote {out} and {numbers} ({len(table)} plotted points, {int(table.rows.sum()):,} rows)")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser(
        "plot",
        help="one figure from any sweep or trials table: y against x, by hue and facet, with intervals",
        description="y against x from a merged sweep (.parquet or its run directory), a trials run "
        "(trials.parquet) or any .csv; each point the mean (or median) over the replicate rows with a "
        "confidence band. A sweep parameter that varies but is not x, hue or facet is refused: give it a "
        "role or fix it with --where (a sample count, trajectories or graphs, is pooled instead, or split by "
        "naming trajectories as a role; rows that repeat another point's rows are counted once). Writes FIG and "
        "FIG.csv (the plotted numbers).",
    )
    p.add_argument("data", help="a .parquet or .csv file, or a run directory (merged.parquet / trials.parquet)")
    p.add_argument("--x", required=True, help="column on the x axis")
    p.add_argument(
        "--y",
        required=True,
        help="numeric column on the y axis, or COL=VALUE: the share of rows whose COL is VALUE (e.g. status=consensus)",
    )
    p.add_argument("--hue", help="one line per value of this column")
    p.add_argument("--facet", help="one panel per value of this column")
    p.add_argument("--agg", choices=("mean", "median"), default="mean", help="aggregate of the rows (default mean)")
    p.add_argument("--ci", type=float, default=95.0, help="interval in percent (default 95; 0: no band)")
    p.add_argument("--where", action="append", metavar="COL=VALUE", help="keep rows with COL = VALUE (repeatable)")
    p.add_argument("--logx", action="store_true")
    p.add_argument("--logy", action="store_true")
    p.add_argument("--title", help="figure title (default: the --where filters, if any)")
    p.add_argument("--out", required=True, help="FIG.png or FIG.pdf (FIG.csv is written beside it)")
    p.set_defaults(func=_cmd_plot)
