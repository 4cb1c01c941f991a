"""How the state-tracking protocol combines and measures a step's proposals ("Predictive Maps of
Multi-Agent Reasoning", Sec. 4 and Appendix A.2): the mesh's plurality vote and the disagreement ``D_t``
recorded per step. Plain Python, no I/O; used by the harness and by the surrogate's ``vote`` judge."""

from __future__ import annotations

import math
from collections.abc import Sequence

from mascot.errors import InputError

__all__ = ["MESH_TIES", "pairwise_disagreement", "plurality_vote"]

MESH_TIES = ("first", "median")


def plurality_vote(states: Sequence[dict], tie: str = "first") -> tuple[dict | None, dict]:
    """Plurality over exact (Value, Parity, Level) tuples.

    Ties between tuples with the top count: ``tie="first"`` picks the tied tuple whose first proposal
    has the lowest index (agent order); ``tie="median"`` sorts the tied tuples by Value (then by first
    index) and picks the middle one (the lower middle for an even count). Returns ``(state, info)`` with
    ``info = {"count": top count, "tied": number of tuples sharing it}``; ``(None, {count 0})`` when
    ``states`` is empty.
    """
    if tie not in MESH_TIES:
        raise InputError(f"tie must be one of {', '.join(MESH_TIES)}; got {tie!r}")
    counts: dict[tuple, int] = {}
    first: dict[tuple, int] = {}
    for i, s in enumerate(states):
        key = (float(s["Value"]), s["Parity"], int(s["Level"]))
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, i)
    if not counts:
        return None, {"count": 0, "tied": 0}
    top = max(counts.values())
    tied = [k for k in counts if counts[k] == top]  # insertion order = order of first proposal
    if len(tied) == 1 or tie == "first":
        win = tied[0]
    else:
        srt = sorted(tied, key=lambda k: (k[0], first[k]))
        win = srt[(len(srt) - 1) // 2]
    return {"Value": win[0], "Parity": win[1], "Level": win[2]}, {"count": top, "tied": len(tied)}


def pairwise_disagreement(values: Sequence[float]) -> float:
    """``D = 1/(N(N-1)) sum_{i != j} |s_i - s_j|`` over the finite values (NaN if fewer than two): the
    mean pairwise disagreement of the agents' Values at one step (SR paper, Appendix A.2).

    Returns: D as a float.
    """
    v = [float(x) for x in values if x is not None and math.isfinite(float(x))]
    n = len(v)
    if n < 2:
        return math.nan
    total = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            total += abs(v[i] - v[j])
    return 2.0 * total / (n * (n - 1))
