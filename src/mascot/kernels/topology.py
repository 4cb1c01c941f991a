"""Doubly stochastic weight matrices for consensus topologies (consensus paper, Table III).

Builders return float64 numpy arrays; the kernels cast them to their working dtype.
"""

from __future__ import annotations

import numpy as np

__all__ = ["circulant", "complete_weights", "ring_weights", "paper_modes"]


def circulant(first_row) -> np.ndarray:
    """Circulant matrix whose row ``i`` is ``first_row`` rolled right by ``i`` (Remark 6's layout)."""
    w = np.asarray(first_row, dtype=np.float64)
    if w.ndim != 1 or w.size < 1:
        raise ValueError(f"first_row must be a non-empty 1-D vector; got shape {w.shape}")
    return np.stack([np.roll(w, i) for i in range(w.size)])


def _check(n, self_weight, min_n):
    if int(n) != n or n < min_n:
        raise ValueError(f"n must be an integer >= {min_n}; got {n!r}")
    if not 0.0 <= float(self_weight) <= 1.0:
        raise ValueError(f"self_weight must be in [0, 1]; got {self_weight!r}")


def complete_weights(n: int, self_weight: float) -> np.ndarray:
    """Complete graph K_n: ``w_ii = a``, ``w_ij = (1 - a)/(n - 1)`` (Table III mode 1: n=5, a=0.4).

    Contraction rate ``|a - (1 - a)/(n - 1)|`` (eigenvalue of multiplicity ``n - 1`` on 1-perp).
    """
    _check(n, self_weight, 2)
    a = float(self_weight)
    row = np.full(int(n), (1.0 - a) / (n - 1))
    row[0] = a
    return circulant(row)


def ring_weights(n: int, self_weight: float) -> np.ndarray:
    """Ring C_n: ``w_ii = a``, ``w_{i,i+-1} = (1 - a)/2`` (Table III mode 2: n=5, a=0.6).

    Eigenvalues ``a + (1 - a) cos(2 pi k / n)``; for ``n = 5, a = 0.6`` the rate is 0.7236.
    """
    _check(n, self_weight, 3)
    a = float(self_weight)
    row = np.zeros(int(n))
    row[0] = a
    row[1] += (1.0 - a) / 2
    row[-1] += (1.0 - a) / 2
    return circulant(row)


def paper_modes() -> tuple[np.ndarray, np.ndarray]:
    """Table III: mode 1 = complete K5 (0.4 / 0.15), mode 2 = ring C5 (0.6 / 0.2)."""
    return complete_weights(5, 0.4), ring_weights(5, 0.6)
