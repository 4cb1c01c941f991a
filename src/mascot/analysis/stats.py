"""Statistics of the SR paper's trials: the empirical metrics of Appendix A.2 and the tests of Sec. 4
(Kruskal-Wallis H, Spearman r_s over topology means, seeded bootstrap confidence intervals).

Metrics ("Predictive Maps of Multi-Agent Reasoning", Sec. 3.3 and Appendix A.2), on the Value field:

* cumulative error growth ``E_ceg = sum_{t=1..T} |x*_t - x^_t|`` (:func:`cumulative_error`);
* consensus decay ``R_cdr = 1/(T-1) sum_{t=1..T-1} log(D_{t+1} / D_t)`` with ``D_t`` the mean pairwise
  disagreement ``1/(N(N-1)) sum_{i != j} |s_{i,t} - s_{j,t}|`` of the agents' Values at step t
  (:func:`pairwise_disagreement`, defined with the protocol in
  :mod:`mascot.protocols.state_tracking.aggregation`; for the chain ``D_t = |x*_t - x^_t|``)
  (:func:`consensus_decay`).
  ``D_t = 0`` (agents agree exactly; a chain agent exactly right) makes the log undefined, so every
  ``D_t`` is floored at ``floor`` (default 1e-6) before the logs and the number of floored ``D_t`` is
  reported; a ``D_t`` that is undefined (fewer than two agents answered) drops the terms that use it;
* perturbation sensitivity ``F_ps = |x'_T - x_T|`` (:func:`perturbation_sensitivity`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

from mascot import stable
from mascot.errors import InputError

# D_t is computed by the harness as it runs (a column of trials.parquet); one definition, re-exported here
from mascot.protocols.state_tracking.aggregation import pairwise_disagreement
from mascot.stable import fmean, fsd, fsum_rows  # exactly rounded: the same bits on every processor

__all__ = [
    "D_FLOOR",
    "bootstrap_mean_ci",
    "consensus_decay",
    "cumulative_error",
    "fmean",
    "fsd",
    "fsum_rows",
    "kruskal",
    "kruskal_note",
    "pairwise_disagreement",
    "perturbation_sensitivity",
    "spearman",
    "spearman_note",
]

#: Default floor applied to D_t before log(D_{t+1} / D_t).
D_FLOOR = 1e-6


def cumulative_error(true_values, est_values) -> np.ndarray:
    """``E_ceg``: sum over the last axis (steps 1..T) of ``|x* - x^|``."""
    return fsum_rows(np.abs(np.asarray(true_values, float) - np.asarray(est_values, float)))


def consensus_decay(D, floor: float = D_FLOOR) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``R_cdr`` of each row of ``D`` (shape ``(..., T)``, steps 1..T).

    Returns ``(R, n_floored, n_terms)``: ``R`` the mean of ``log(max(D_{t+1}, floor) / max(D_t, floor))``
    over the terms where both are defined (NaN if none), ``n_floored`` the number of defined ``D_t`` below
    ``floor``, ``n_terms`` the number of terms averaged.
    """
    if not (floor > 0 and math.isfinite(floor)):
        raise InputError(f"floor must be a finite number > 0; got {floor!r}")
    D = np.asarray(D, dtype=float)
    finite = np.isfinite(D)
    Df = np.where(finite, np.maximum(D, floor), np.nan)
    floored = (finite & (D < floor)).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = stable.log(Df[..., 1:] / Df[..., :-1])
    ok = np.isfinite(r)
    terms = ok.sum(axis=-1)
    with np.errstate(invalid="ignore"):
        R = np.where(terms > 0, fsum_rows(np.where(ok, r, 0.0)) / np.maximum(terms, 1), np.nan)
    return R, floored, terms


def perturbation_sensitivity(final, final_perturbed) -> np.ndarray:
    """``F_ps = |x'_T - x_T|``."""
    return np.abs(np.asarray(final_perturbed, float) - np.asarray(final, float))


def _clean(x) -> np.ndarray:
    a = np.asarray(x, dtype=float).ravel()
    return a[np.isfinite(a)]


#: Why a statistic is not defined (the sentences the reports print instead of a number).
NOT_DEFINED_NO_DATA = "not defined: no finite values"
NOT_DEFINED_ONE_GROUP = "not defined: fewer than 2 groups with data"
NOT_DEFINED_EQUAL = "not defined: all values equal"


def kruskal_note(groups: Sequence) -> str | None:
    """Why Kruskal-Wallis is not defined on ``groups`` (finite values only): :data:`NOT_DEFINED_NO_DATA` (every
    value NaN or no groups), :data:`NOT_DEFINED_ONE_GROUP`, :data:`NOT_DEFINED_EQUAL` (every value of every
    group equal, so every rank ties and H is 0/0); ``None`` when it is defined."""
    gs = [g for g in (_clean(x) for x in groups) if g.size]
    if not gs:
        return NOT_DEFINED_NO_DATA
    if len(gs) < 2:
        return NOT_DEFINED_ONE_GROUP
    if np.ptp(np.concatenate(gs)) == 0:
        return NOT_DEFINED_EQUAL
    return None


def kruskal(groups: Sequence) -> tuple[float, float]:
    """Kruskal-Wallis ``(H, p)`` (``scipy.stats.kruskal``) over the finite values of each group; NaN when
    fewer than two groups have data or all values are equal (:func:`kruskal_note` says which)."""
    from scipy.stats import kruskal as _kw

    if kruskal_note(groups) is not None:
        return math.nan, math.nan
    gs = [g for g in (_clean(x) for x in groups) if g.size]
    res = _kw(*gs)
    return float(res.statistic), float(res.pvalue)


def spearman_note(x, y, what: str = "pairs") -> str | None:
    """Why Spearman's r_s of ``x`` against ``y`` is not defined (pairs with both finite): "not defined:
    fewer than 3 <what>", "not defined: all values equal" (``y`` constant) or "not defined: all predictions
    equal" (``x`` constant); ``None`` when it is defined."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3:
        return f"not defined: fewer than 3 {what}"
    if np.ptp(y[ok]) == 0:
        return NOT_DEFINED_EQUAL
    if np.ptp(x[ok]) == 0:
        return "not defined: all predictions equal"
    return None


def spearman(x, y) -> float:
    """Spearman ``r_s`` (average ranks for ties, ``scipy.stats.spearmanr``); NaN for fewer than 3 pairs
    or a constant input."""
    from scipy.stats import spearmanr

    x = np.asarray(x, float)
    y = np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 3 or np.ptp(x[ok]) == 0 or np.ptp(y[ok]) == 0:
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(spearmanr(x[ok], y[ok]).statistic)


def bootstrap_mean_ci(x, n_boot: int = 10_000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of the finite values of ``x`` (``n_boot`` resamples,
    ``numpy.random.default_rng(seed)``); NaN for an empty sample."""
    a = _clean(x)
    if a.size == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    chunk = max(1, (1 << 22) // a.size)
    for s in range(0, n_boot, chunk):
        m = min(chunk, n_boot - s)
        means[s : s + m] = fsum_rows(a[rng.integers(0, a.size, size=(m, a.size))]) / a.size
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)
