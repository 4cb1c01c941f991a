"""``--topology``, ``--adjacency`` and ``--k-profile`` as ``mascot diagnose`` reads them: graphs in the command
line's order."""

from __future__ import annotations

import argparse
import math

from mascot.errors import InputError

__all__ = ["InOrder", "k_profiles"]


class InOrder(argparse._AppendAction):
    """``append``, also recording ``(option, value)`` in ``graph_order``: graphs keep the command line's order
    across ``--topology`` and ``--adjacency``."""

    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, values, option_string)
        order = list(getattr(namespace, "graph_order", None) or [])
        namespace.graph_order = order + [(self.dest, values)]


def k_profiles(text: str | None, graphs: dict) -> dict | None:
    """``--k-profile`` (comma-separated whole numbers >= 1: one for every agent, or one for all) as
    ``diagnose``'s ``k_profiles`` for each of ``graphs`` (name -> adjacency), or ``None`` when not given."""
    if text is None:
        return None
    try:
        k = [float(x) for x in text.split(",")]
    except ValueError:
        raise InputError(f"--k-profile must be comma-separated whole numbers; got {text!r}") from None
    bad = [x for x in k if not (math.isfinite(x) and x >= 1 and x == int(x))]
    if bad:
        raise InputError(f"--k-profile values must be whole numbers >= 1 (agents aggregated per step); got {bad[0]:g}")
    k = [int(x) for x in k]
    for name, A in graphs.items():
        if len(k) not in (1, A.shape[0]):
            raise InputError(f"--k-profile has {len(k)} values but {name} has {A.shape[0]} agents")
    return {name: (k[0] if len(k) == 1 else k) for name in graphs}
