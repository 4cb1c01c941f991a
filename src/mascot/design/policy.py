"""Choosing the switching threshold eta of Algorithm 1 (consensus paper, Def. 8) before deployment.

Two views of the same choice:

* **Certificate (worst case, constant rates).** Theorem 1's budget ``B*(D0; eta) = K1 c1 + K2 c2`` with
  ``K1 = ceil(log(eta/D0) / log lambda1)`` and ``K2 = ceil(log(eps/eta) / log lambda2)`` is piecewise constant in
  eta: it changes only where ``eta = D0 lambda1^k`` (K1 steps) or ``eta = eps / lambda2^m`` (K2 steps).
  :func:`certificate_best_eta` evaluates it at every breakpoint in ``(eps, D0]`` (and at the pure strategies), so
  its minimum is exact, not a grid search.
* **Simulation (the actual trajectories).** :func:`threshold_frontier` runs Algorithm 1 on the JAX kernels for
  every (initial beliefs, eta) pair in one batch (eta is a per-trajectory parameter) and reports, per eta, the
  mean and 95th-percentile tokens, the mean rounds and P(BudgetFail) at a given budget (Wilson interval): the
  frontier tokens vs rounds vs risk on which the paper's eta = 0.1 can be placed.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from mascot.errors import InputError

__all__ = ["CertificateChoice", "certificate_best_eta", "threshold_frontier"]


class CertificateChoice(NamedTuple):
    eta: float  # a threshold attaining the minimum (the largest such breakpoint interval's upper end)
    b_star: float  # the minimal B*(D0; eta)
    k1: int
    k2: int
    candidates: np.ndarray  # (m, 2): every breakpoint eta and its B*


def certificate_best_eta(
    d0: float, eps: float, lambda1: float, lambda2: float, c1: float, c2: float, max_rounds: int = 10_000
) -> CertificateChoice:
    """The eta in ``[eps, D0]`` minimising Theorem 1's B*(D0; eta), exactly (breakpoint enumeration).

    eta = eps is complete-only (K2 = 0), eta >= D0 ring-only (K1 = 0). Ties go to the largest eta (the
    fewest expensive mode-1 rounds).

    Arguments: ``d0`` the initial disagreement; ``eps`` the tolerance; ``lambda1``, ``lambda2`` the modes'
    contraction rates; ``c1``, ``c2`` their tokens per round; ``max_rounds`` refuse certificates longer than
    this. Returns a :class:`CertificateChoice`.
    """
    from mascot.theory.consensus import theorem1

    if not (d0 > eps > 0):
        raise InputError(f"need D0 > eps > 0; got D0 = {d0!r}, eps = {eps!r}")
    if not (0 <= lambda1 < 1 and 0 <= lambda2 < 1):
        raise InputError(f"both modes must contract (0 <= lambda < 1); got {lambda1!r}, {lambda2!r}")
    cands = {eps, d0}
    for k in range(1, max_rounds):
        e = d0 * lambda1**k
        if e <= eps or lambda1 == 0:
            break
        cands.add(e)
    for m in range(1, max_rounds):
        e = eps / lambda2**m if lambda2 > 0 else math.inf
        if e >= d0:
            break
        cands.add(e)
    # B* is right-continuous between breakpoints up to the ceilings' conventions: evaluate each breakpoint and
    # a point just inside each open interval
    pts = sorted(cands)
    probe = pts + [0.5 * (a + b) for a, b in zip(pts[:-1], pts[1:])]
    rows = []
    for e in sorted(probe):
        c = theorem1(d0, e, eps, lambda1, lambda2, c1, c2)
        rows.append((e, c.B_star, c.K1, c.K2))
    best = min(r[1] for r in rows)
    e, b, k1, k2 = max((r for r in rows if r[1] == best), key=lambda r: r[0])
    return CertificateChoice(eta=e, b_star=b, k1=int(k1), k2=int(k2), candidates=np.array([(r[0], r[1]) for r in rows]))


def threshold_frontier(
    W1,
    W2,
    *,
    c1: float,
    c2: float,
    eps: float,
    etas,
    X0=None,
    runs: int = 2000,
    d: int = 6,
    x0_mean: float = 0.5,
    x0_spread: float = 0.15,
    noise: float = 0.0,
    b0: float | None = None,
    max_rounds: int = 200,
    seed: int = 0,
):
    """Per eta: mean / p95 tokens, mean / max rounds and P(BudgetFail | b0) of Algorithm 1 (a pandas DataFrame).

    Every eta runs on the same initial beliefs (common random numbers), all in one kernel call.

    Arguments: ``W1``, ``W2`` the mode-1 and mode-2 weight matrices; ``c1``, ``c2`` tokens per round of each
    mode; ``eps`` the consensus tolerance; ``runs`` Monte Carlo trajectories; ``d`` belief dimensions;
    ``x0_mean``, ``x0_spread`` the initial-belief distribution (ignored with ``X0``); ``noise`` per-round belief
    noise s.d.; ``max_rounds`` the round limit; ``b0`` a budget to price the failure probability at (None:
    none); ``seed`` the random seed. ``etas`` the thresholds to compare; ``X0`` initial beliefs (runs, N, d) to
    use instead of sampling.

    Returns: a pandas DataFrame, one row per eta.
    """
    import pandas as pd

    from mascot.design.budget import sample_x0, token_need, wilson

    etas = np.unique(np.asarray(etas, dtype=np.float64))
    if etas.size == 0 or np.any(etas <= eps) or not np.all(np.isfinite(etas)):
        raise InputError(f"etas must be finite and > eps = {eps}; got {etas!r}")
    W1 = np.asarray(W1, dtype=np.float64)
    n = W1.shape[0]
    if X0 is None:
        X0 = sample_x0(int(runs), n, int(d), x0_mean, x0_spread, seed)
    X0 = np.asarray(X0, dtype=np.float64)
    R = X0.shape[0]
    Xb = np.broadcast_to(X0[None], (etas.size,) + X0.shape).reshape(-1, *X0.shape[1:])
    need, res = token_need(Xb, W1, W2, c1, c2, np.repeat(etas, R), eps, max_rounds, noise, seed)
    need = need.reshape(etas.size, R)
    rounds = np.asarray(res.rounds).reshape(etas.size, R)
    rows = []
    for i, e in enumerate(etas):
        t = need[i]
        with np.errstate(invalid="ignore"):  # (both order statistics infinite: inf - inf; the quantile is inf)
            p95 = float(np.quantile(t, 0.95))
        row = dict(
            eta=e,
            mean_tokens=float(np.mean(t)),
            p95_tokens=math.inf if math.isnan(p95) else p95,
            mean_rounds=float(np.mean(rounds[i])),
            max_rounds=int(rounds[i].max()),
            no_consensus=float(np.mean(~np.isfinite(t))),
        )
        if b0 is not None:
            k = int(np.sum(t > b0))
            lo, hi = wilson(k, R)
            row.update(p_fail=k / R, p_fail_lo=lo, p_fail_hi=hi)
        rows.append(row)
    return pd.DataFrame(rows)
