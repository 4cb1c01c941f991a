"""Pre-deployment budget risk: P(BudgetFail) for a budget, and the budget for a target risk, by Monte Carlo on
the consensus kernels, beside Theorem 1's worst-case B*.

Model: Algorithm 1 of the consensus paper with the modes ``W1``, ``W2``, costs ``c1``, ``c2``, threshold ``eta``
and tolerance ``eps``, from initial beliefs ``X0`` drawn like the paper's Sec. V-A (each entry ``N(mean,
spread)`` truncated to [0, 1]), optionally with Gaussian belief noise after every round (Remark 3's LLM
stochasticity). Every trajectory runs once with a budget that never binds; its token need ``T`` is what it
spent to reach ``D <= eps`` (``inf`` if it did not within ``max_rounds``). Because Algorithm 1 fails with
budget ``b0`` exactly when the cumulative cost it needs exceeds ``b0`` (it checks ``b_k >= c_sigma`` before
every round), one simulation gives the whole curve ``P(BudgetFail | b0) = P(T > b0)``:

* ``p_fail(b0)`` with a Wilson 95% interval;
* the budget for risk ``alpha``: the smallest ``b`` with ``P(T > b) <= alpha`` (an order statistic), with a
  distribution-free 95% interval from the binomial law of order statistics;
* Theorem 1's ``B*(D0)`` for the sampled ``D0`` (median and maximum): the worst case the certificate
  guarantees without noise.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from mascot.errors import InputError

__all__ = ["BudgetRisk", "budget_risk", "sample_x0", "wilson"]


class BudgetRisk(NamedTuple):
    tokens: np.ndarray  # (runs,) token need T of each simulated run (inf: no consensus within max_rounds)
    d0: np.ndarray  # (runs,) initial disagreement
    b0: float | None  # the budget asked about (None: not asked)
    p_fail: float | None  # P(T > b0)
    p_fail_ci: tuple | None  # Wilson 95% interval
    alpha: float  # the target risk
    budget_for_alpha: float  # smallest b with P(T > b) <= alpha (empirical)
    budget_ci: tuple  # distribution-free 95% interval of that quantile
    b_star_median: float  # Theorem 1's B*(D0) at the median sampled D0
    b_star_max: float  # ... at the largest sampled D0 (the certificate's worst case over the sample)
    never: float  # fraction of runs that did not reach consensus within max_rounds


def sample_x0(runs: int, n: int, d: int, mean: float = 0.5, spread: float = 0.15, seed: int = 0) -> np.ndarray:
    """Initial beliefs like the consensus paper's Sec. V-A: every entry ``N(mean, spread)`` truncated to [0, 1],
    ``(runs, n, d)``, from ``numpy.random.default_rng(seed)``.

    Returns: an array ``(runs, n, d)`` (float64).
    """
    from scipy.stats import truncnorm

    a, b = (0 - mean) / spread, (1 - mean) / spread
    return truncnorm.rvs(a, b, loc=mean, scale=spread, size=(runs, n, d), random_state=np.random.default_rng(seed))


def token_need(X0, W1, W2, c1, c2, eta, eps, max_rounds: int, noise: float, seed: int):
    """``(T, result)``: Algorithm 1 run in float64 with a budget that never binds (``max_rounds`` rounds cannot
    exhaust it); ``T`` is each trajectory's spend to reach ``D <= eps``, ``inf`` when it did not."""
    import jax

    from mascot.execute.consensus import simulate_consensus
    from mascot.kernels.precision import float64

    never_binds = float(max_rounds) * max(float(c1), float(c2))
    with float64():
        key = jax.random.key(seed) if noise > 0 else None
        res = simulate_consensus(
            X0, W1, W2, c1, c2, eta, eps, never_binds, max_rounds=max_rounds, noise=noise, key=key, dtype="float64"
        )
    return np.where(res.status == 0, np.asarray(res.tokens, dtype=np.float64), np.inf), res


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion k / n.

    Arguments: ``k`` successes; ``n`` trials; ``z`` the normal quantile (1.96: 95%).

    Returns: ``(low, high)`` of the interval.
    """
    if n <= 0:
        raise InputError("n must be > 0")
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    # the ends are exact at k = 0 and k = n (rounding left 0.9999999999999999 where the interval reaches 1)
    return (0.0 if k == 0 else max(0.0, mid - half)), (1.0 if k == n else min(1.0, mid + half))


def _quantile_ci(sorted_t: np.ndarray, q: float, level: float = 0.95) -> tuple[float, float]:
    """Distribution-free interval for the q-quantile of token needs: the order statistics the binomial law of
    the number of runs below the quantile gives (``scipy.stats.quantile_test``'s interval). Where the runs
    cannot bound the quantile the bound is ``inf`` above (the 0.999 quantile needs 3,688 runs) or 0 below
    (tokens are >= 0). A normal approximation of the ranks, used before 2026-12-05, clipped them to the sample
    and called its maximum a 95% interval (100 runs at alpha = 0.001: "1700 .. 1700" where the quantile is
    2100)."""
    from scipy.stats import quantile_test

    ci = quantile_test(sorted_t, q=0.0, p=q).confidence_interval(level)
    return (0.0 if math.isnan(ci.low) else float(ci.low)), (math.inf if math.isnan(ci.high) else float(ci.high))


def budget_risk(
    W1,
    W2,
    *,
    c1: float,
    c2: float,
    eta: float,
    eps: float,
    runs: int = 100_000,
    d: int = 6,
    x0_mean: float = 0.5,
    x0_spread: float = 0.15,
    noise: float = 0.0,
    max_rounds: int = 200,
    alpha: float = 0.05,
    b0: float | None = None,
    seed: int = 0,
    X0=None,
) -> BudgetRisk:
    """Monte Carlo of the token need of Algorithm 1 (see the module docstring). ``X0`` (``(runs, N, d)``):
    use these initial beliefs instead of sampling them (e.g. priors elicited from real agents).

    Arguments: ``W1``, ``W2`` the mode-1 and mode-2 weight matrices; ``c1``, ``c2`` tokens per round of each
    mode; ``eta`` the switching threshold; ``eps`` the consensus tolerance; ``runs`` Monte Carlo trajectories;
    ``d`` belief dimensions; ``x0_mean``, ``x0_spread`` the initial-belief distribution (ignored with ``X0``);
    ``noise`` per-round belief noise s.d.; ``max_rounds`` the round limit; ``alpha`` one minus the quantile
    reported (0.05: the 95th percentile); ``b0`` a budget to price the failure probability at (None: none);
    ``seed`` the random seed. Returns a :class:`BudgetRisk`.
    """
    from mascot.theory.consensus import contraction_rate, theorem1

    if X0 is not None:
        X0 = np.asarray(X0, dtype=np.float64)
        if X0.ndim != 3 or X0.shape[1] != np.asarray(W1).shape[0]:
            raise InputError(f"X0 must have shape (runs, N, d) with N = {np.asarray(W1).shape[0]}; got {X0.shape}")
        runs = X0.shape[0]
    if isinstance(runs, bool) or int(runs) != runs or runs < 100:
        raise InputError(f"runs must be an integer >= 100; got {runs!r}")
    if isinstance(max_rounds, bool) or int(max_rounds) != max_rounds or max_rounds < 1:
        raise InputError(f"max_rounds must be an integer >= 1; got {max_rounds!r}")
    if not (0 < alpha < 1):
        raise InputError(f"alpha must be in (0, 1); got {alpha!r}")
    if b0 is not None and not (b0 >= 0 and math.isfinite(b0)):
        raise InputError(f"b0 must be a finite budget >= 0; got {b0!r}")
    if not (x0_spread > 0 and 0 <= x0_mean <= 1):
        raise InputError(f"x0_mean must be in [0, 1] and x0_spread > 0; got {x0_mean!r}, {x0_spread!r}")
    if isinstance(d, bool) or int(d) != d or d < 1:
        raise InputError(f"d must be an integer >= 1; got {d!r}")
    W1 = np.asarray(W1, dtype=np.float64)
    n = W1.shape[0]
    if X0 is None:
        X0 = sample_x0(int(runs), n, int(d), x0_mean, x0_spread, seed)
    tokens, res = token_need(X0, W1, W2, c1, c2, eta, eps, max_rounds, noise, seed)
    srt = np.sort(tokens)
    k = int(math.ceil((1 - alpha) * srt.size)) - 1  # smallest b with #(T > b) <= alpha n
    budget = float(srt[k])
    lam1, lam2 = contraction_rate(W1), contraction_rate(np.asarray(W2, dtype=np.float64))
    d0 = np.asarray(res.d0, dtype=np.float64)
    bstar = lambda x: theorem1(float(x), eta, eps, lam1, lam2, c1, c2).B_star  # noqa: E731
    p = ci = None
    if b0 is not None:
        fails = int(np.sum(tokens > b0))
        p, ci = fails / srt.size, wilson(fails, srt.size)
    return BudgetRisk(
        tokens=tokens,
        d0=d0,
        b0=b0,
        p_fail=p,
        p_fail_ci=ci,
        alpha=alpha,
        budget_for_alpha=budget,
        budget_ci=_quantile_ci(srt, 1 - alpha),
        b_star_median=bstar(np.median(d0)),
        b_star_max=bstar(d0.max()),
        never=float(np.mean(~np.isfinite(tokens))),
    )
