"""Shared figure helpers: PNG + PDF output. The backend is not forced here (library code flips no process-wide
switch): the ``mascot`` command selects the non-interactive Agg backend; elsewhere matplotlib chooses (Agg on
a machine without a display)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt

from mascot.io import atomic_path

__all__ = ["plt", "save_figure", "legend"]


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
