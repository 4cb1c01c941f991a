"""The budget monitor of the LLM deliberation (consensus paper, Sec. V-C) in float64 Python: the reference
for the JAX kernel :mod:`mascot.kernels.deliberation` and the monitor the text harness
(:mod:`mascot.protocols.deliberation`) runs after every round.

Strategies. The deliberation names its strategies ``adaptive``, ``complete`` and ``ring`` (Sec. V-C); the
consensus kernels and :func:`mascot.theory.algorithm1` call the fixed ones ``mode1`` and ``mode2``.
:data:`STRATEGY_MODE` is :data:`mascot.papers.DELIBERATION_STRATEGIES`: complete = mode 1, ring = mode 2,
adaptive switches (Def. 8; the rule itself is :mod:`mascot.kernels.switching`).

Certificate. ``B*(D)`` of a strategy is Theorem 1's budget with the switching threshold that the strategy
amounts to (:func:`strategy_eta`): adaptive ``eta``; complete ``eps`` (mode 2 is never selected, as the
paper does for the Claude example); ring ``max(D, eps)`` (no mode-1 phase).

Monitor. :class:`BudgetMonitor` re-checks ``b_k >= B*(D(k))`` after every round with running, prior-shrunk
estimates of each mode's contraction rate and round cost (the estimator of
:func:`mascot.kernels.deliberation.monitor_estimates`).
"""

from __future__ import annotations

import math
import sys
from typing import NamedTuple

from mascot.errors import InputError
from mascot.papers import DELIBERATION_STRATEGIES
from mascot.theory.consensus import theorem1

__all__ = [
    "STRATEGIES",
    "STRATEGY_MODE",
    "strategy_eta",
    "strategy_modes",
    "strategy_budget",
    "MonitorCheck",
    "BudgetMonitor",
]

#: Strategy -> the mode it fixes (mode 1 = complete, mode 2 = ring); ``None``: switches (Def. 8).
STRATEGY_MODE: dict[str, int | None] = dict(DELIBERATION_STRATEGIES)

#: The deliberation's strategies, in the order of its records and tables (and of its request seeds).
STRATEGIES = tuple(STRATEGY_MODE)


def _check_strategy(strategy: str) -> None:
    if strategy not in STRATEGY_MODE:
        raise InputError(f"strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}")


def strategy_modes(strategy: str) -> tuple[int, ...]:
    """The modes a strategy can use: ``(1, 2)`` for adaptive, ``(1,)`` complete, ``(2,)`` ring."""
    _check_strategy(strategy)
    mode = STRATEGY_MODE[strategy]
    return (1, 2) if mode is None else (mode,)


def strategy_eta(strategy: str, D: float, eta: float, eps: float) -> float:
    """The switching threshold Theorem 1 sees for ``strategy`` from disagreement ``D``: adaptive ``eta``,
    complete ``eps`` (mode 2 never selected), ring ``max(D, eps)`` (no mode-1 phase)."""
    _check_strategy(strategy)
    mode = STRATEGY_MODE[strategy]
    if mode is None:
        return eta
    return eps if mode == 1 else max(D, eps)


def _rtr_frac(start, target, lam):
    if start <= target:
        return 0.0
    if lam <= 0:
        return 1.0
    if lam >= 1:
        return math.inf
    return max(math.log(target / start) / math.log(lam), 0.0)


def strategy_budget(
    strategy: str, D: float, eta: float, eps: float, lam1: float, lam2: float, c1: float, c2: float, ceil: bool = True
) -> float:
    """``B*(D)`` for a strategy from :func:`mascot.theory.theorem1` (``ceil=True``).

    adaptive: Theorem 1 as is; complete: ``eta := eps`` (mode 2 is never selected, as the paper does for
    the Claude example); ring: ``eta := max(D, eps)`` (no mode-1 phase). ``ceil=False``: the same round
    counts without ceilings (a point estimate, not a bound).

    Arguments: ``strategy`` adaptive, complete or ring; ``D`` the current disagreement; ``eta``, ``eps`` the
    thresholds; ``lam1``, ``lam2`` the modes' contraction rates; ``c1``, ``c2`` their tokens per round; ``ceil``
    as above.

    Returns: B* as a float (inf when a needed mode does not contract).
    """
    e = strategy_eta(strategy, D, eta, eps)
    if ceil:
        return theorem1(D, e, eps, lam1, lam2, c1, c2).B_star
    e = max(e, eps)
    if D <= eps:
        return 0.0
    if D <= e:
        k1, k2 = 0.0, _rtr_frac(D, eps, lam2)
    else:
        k1, k2 = _rtr_frac(D, e, lam1), _rtr_frac(e, eps, lam2)
    if math.isinf(k1) or math.isinf(k2):
        return math.inf
    return k1 * c1 + k2 * c2


class MonitorCheck(NamedTuple):
    k: int
    D: float
    b: float
    lambda_hat: tuple[float, float]
    c_hat: tuple[float, float]
    B_star: float
    certified: bool
    flag: bool  # not certified and k >= warmup

    def to_dict(self) -> dict:
        return {
            "k": self.k,
            "lambda_hat": list(self.lambda_hat),
            "c_hat": list(self.c_hat),
            "B_star": None if math.isinf(self.B_star) else self.B_star,
            "certified": self.certified,
            "flag": self.flag,
        }


class BudgetMonitor:
    """Online ``b_k >= B*(D(k))`` check with running, prior-shrunk estimates (per mode sigma = 1, 2):

    ``log lambda_hat = (n0 log lambda_prior + sum log(D(k+1)/D(k))) / (n0 + n)``, ``c_hat = (n0 c_prior +
    sum c) / (n0 + n)`` over this lane's rounds in that mode (the prior alone when ``n0 + n = 0``).
    Identical to the estimator of :func:`mascot.kernels.deliberation.simulate_deliberation`.

    Arguments: ``strategy`` adaptive, complete or ring; ``eta``, ``eps`` the thresholds; ``prior_lambda`` the
    prior contraction rates (mode 1, mode 2); ``n0``, ``warmup``, ``ceil`` as in :class:`MonitorConfig`.
    """

    def __init__(
        self,
        strategy: str,
        eta: float,
        eps: float,
        prior_lambda: tuple[float, float],
        n0: float = 1.0,
        warmup: int = 2,
        ceil: bool = True,
    ):
        self.strategy, self.eta, self.eps = strategy, float(eta), float(eps)
        self.prior_lambda = tuple(float(x) for x in prior_lambda)
        self.n0, self.warmup, self.ceil = float(n0), int(warmup), bool(ceil)
        self.sum_log = [0.0, 0.0]
        self.n = [0, 0]
        self.sum_cost = [0.0, 0.0]

    def observe(self, mode: int, d_before: float, d_after: float, cost: float) -> None:
        if d_before <= 0:
            return
        i = int(mode) - 1
        self.sum_log[i] += math.log(max(d_after, sys.float_info.min) / d_before)
        self.n[i] += 1
        self.sum_cost[i] += float(cost)

    def estimates(self, prior_cost: tuple[float, float]) -> tuple[tuple[float, float], tuple[float, float]]:
        lam, cost = [], []
        for i in range(2):
            w = self.n0 + self.n[i]
            if w > 0:
                lam.append(math.exp((self.n0 * math.log(self.prior_lambda[i]) + self.sum_log[i]) / w))
                cost.append((self.n0 * float(prior_cost[i]) + self.sum_cost[i]) / w)
            else:
                lam.append(self.prior_lambda[i])
                cost.append(float(prior_cost[i]))
        return (lam[0], lam[1]), (cost[0], cost[1])

    def check(self, k: int, D: float, b: float, prior_cost: tuple[float, float]) -> MonitorCheck:
        lam, cost = self.estimates(prior_cost)
        bstar = strategy_budget(self.strategy, D, self.eta, self.eps, lam[0], lam[1], cost[0], cost[1], self.ceil)
        certified = bool(b >= bstar)
        return MonitorCheck(
            int(k), float(D), float(b), lam, cost, bstar, certified, bool(not certified and k >= self.warmup)
        )
