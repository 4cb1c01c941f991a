"""Shared figure helpers: PNG + PDF output. The backend is not forced here (library code flips no process-wide
switch): the ``mascot`` command selects the non-interactive Agg backend; elsewhere matplotlib chooses (Agg on
a machine without a display)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib.pyplot as plt

from mascot.io import atomic_path

__all__ = ["plt", "save_figure", "legend", "readable_log_axis"]


def save_figure(fig, path_stem: Path) -> list[Path]:
    """Write ``fig`` as ``<stem>.png`` (150 dpi) and ``<stem>.pdf``; return both paths."""
    path_stem = Path(path_stem)
    path_stem.parent.mkdir(parents=True, exist_ok=True)
    out = []
    for ext in ("png", "pdf"):
        p = path_stem.with_suffix("." + ext)
        # no creation date in the PDF, so rerunning a reproduction leaves committed files unchanged
        meta = {"CreationDate": None} if ext == "pdf" else {}
        with atomic_path(p) as tmp:
            fig.savefig(tmp, dpi=150, bbox_inches="tight", format=ext, metadata=meta)
        out.append(p)
    plt.close(fig)
    return out


def legend(ax, **kw):
    """``ax.legend(**kw)`` when the axes hold a labelled artist; nothing otherwise (matplotlib would warn
    "No artists with labels found" on the user's terminal and draw an empty box)."""
    if ax.get_legend_handles_labels()[0]:
        return ax.legend(**kw)
    return None


def readable_log_axis(ax, which: str = "y", values=None) -> None:
    """Tick labels a reader can read on ``ax``'s log ``which`` axis ("x" or "y"), as plain numbers (``20``, not
    ``2x10^1``), minor ticks unlabelled: at ``values`` where given (an axis of sizes: 5, 8, 16, 32), else, where
    the axis spans under two powers of ten (one labelled tick, or none, by default), at 1, 2 and 5 times the
    powers of ten (1, 2, 3 and 5 under one power of ten); a wider axis keeps matplotlib's powers of ten. Of
    ``values`` within 25% of each other only the smallest is labelled. Call it after plotting (it reads the axis
    limits)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    axis = ax.yaxis if which == "y" else ax.xaxis
    if values is not None:  # each labelled, but none within 25% of a labelled one (8 and 9, 16 and 17 overlapped)
        kept: list[float] = []
        for v in sorted({float(v) for v in values if v > 0}):
            if not kept or v >= 1.25 * kept[-1]:
                kept.append(v)
        axis.set_major_locator(FixedLocator(kept))
    else:
        lo, hi = ax.get_ylim() if which == "y" else ax.get_xlim()
        lo, hi = min(lo, hi), max(lo, hi)
        if not (lo > 0 and math.isfinite(hi)) or math.log10(hi / lo) >= 2:
            return
        # the sparsest of these that labels at least 3 ticks (a range 5.2 .. 25 had only 10 and 20 labelled, its
        # smallest values below any label: an outside tester)
        for subs in ((1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0), (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0), tuple(range(1, 10))):
            ticks = [
                b * 10.0**e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1) for b in subs
            ]
            if sum(lo <= t <= hi for t in ticks) >= 3:
                break
        axis.set_major_locator(LogLocator(subs=subs))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())
