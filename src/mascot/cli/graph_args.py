"""``--topology`` and ``--adjacency`` as ``mascot diagnose`` reads them: in the command line's order."""

from __future__ import annotations

import argparse

__all__ = ["InOrder"]


class InOrder(argparse._AppendAction):
    """``append``, also recording ``(option, value)`` in ``graph_order``: graphs keep the command line's order
    across ``--topology`` and ``--adjacency``."""

    def __call__(self, parser, namespace, values, option_string=None):
        super().__call__(parser, namespace, values, option_string)
        order = list(getattr(namespace, "graph_order", None) or [])
        namespace.graph_order = order + [(self.dest, values)]
