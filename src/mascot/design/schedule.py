"""A D-dependent mode schedule for rates that depend on D (beyond the consensus paper's constant-rate model).

The paper's Algorithm 1 switches once, at ``D = eta``. The live runs (Sec. V-C) show rates that depend on D
(GPT's complete mode *expands* near consensus), so the cheapest policy may use mode 1 in some ranges of D and
mode 2 in others. This module chooses such a **schedule** before deployment.

Model (:class:`RateModel`, a scalar model of the disagreement ``D_k``, the form of mascot's calibrated
deliberation surrogate): in mode ``s`` the per-round rate is ``lambda_s(D) = exp(a_s + b_s log D)`` (``b_s = 0``:
the paper's constant rate ``exp(a_s)``; ``b_s < 0``: slower near consensus, above 1 once ``log D < -a_s / b_s``)
with log-normal noise, ``log D_{k+1} = log D_k + a_s + b_s log D_k + rate_sd_s xi_k``, and round cost
``c_s max(0, 1 + cost_cv zeta_k)``; ``xi, zeta ~ N(0, 1)``. A run stops at ``D <= eps`` (consensus); its
token need ``T`` is what it spent until then (``inf`` if not within ``max_rounds``); with budget ``b0`` it
fails exactly when ``T > b0`` (the paper's live rule, checked after each round).

Schedule (:class:`Schedule`): ``K`` values ``theta_j`` at ``K`` centres equally spaced in ``log D`` on
``[log eps, log d_hi]``; ``theta(log D)`` interpolates them linearly (constant beyond the ends) and the
schedule uses mode 1 where ``theta > 0``. A threshold policy ``eta`` is the schedule ``theta_j = log c_j -
log eta`` (mode 1 exactly where D > eta).

Design (:func:`design_schedule`): minimise the mean token need subject to ``P(T > b0) <= alpha`` and a mean
rounds limit. The hard problem is discrete (a mode per round, a stopping time); it is relaxed smoothly and
solved with ``optax.adam`` on ``theta``:

* mode weight ``p_k = sigmoid(theta(log D_k) / tau)``; the next ``log D`` and the cost are the ``p_k``-mixtures
  of the two modes' (common random numbers ``xi``, ``zeta``, fixed over iterations);
* "still running" ``alive_k = prod_{j <= k} sigmoid((log D_j - log eps) / tau_stop)``; tokens ``sum_k alive_k
  cost_k``, rounds ``sum_k alive_k``; ``P(T > b0) ~ mean sigmoid((T - b0) / (tau_b b0))``;
* penalties ``mu (P - alpha)_+`` and ``mu (rounds - limit)_+ / limit``; ``tau`` is annealed from 1 to 0.05.

The optimiser starts from the best threshold policy (found by exact search over thresholds on the same
draws); every few iterations the current ``theta`` is evaluated **exactly** (hard modes, hard stopping, numpy
float64, :func:`evaluate`) and the best feasible one is kept, so the result is never worse than the best
threshold on the design sample; :func:`design_schedule` reports it on a fresh, independent sample as well.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from mascot.errors import InputError

__all__ = [
    "RateModel",
    "Schedule",
    "ScheduleDesign",
    "design_schedule",
    "draws",
    "evaluate",
    "summarize",
    "threshold_schedule",
]


@dataclass(frozen=True)
class RateModel:
    """Per-mode log-linear rates and costs; index 0 is mode 1 (complete), 1 is mode 2 (ring).

    Fields: ``a`` (a1, a2) the log-rate intercepts; ``b`` (b1, b2) the log-rate slopes in log D; ``rate_sd`` the
    s.d. of the log-rate noise per mode; ``cost`` the mean tokens per round per mode; ``cost_cv`` the
    coefficient of variation of a round's cost.
    """

    a: tuple  # (a1, a2): log-rate intercepts
    b: tuple = (0.0, 0.0)  # (b1, b2): log-rate slopes in log D
    rate_sd: tuple = (0.0, 0.0)  # s.d. of the log-rate noise per mode
    cost: tuple = (600.0, 100.0)  # mean tokens per round per mode
    cost_cv: float = 0.0  # coefficient of variation of a round's cost

    def __post_init__(self):
        for name in ("a", "b", "rate_sd", "cost"):
            v = getattr(self, name)
            if len(v) != 2 or not all(math.isfinite(float(x)) for x in v):
                raise InputError(f"RateModel.{name} must be two finite numbers (mode 1, mode 2); got {v!r}")
        if min(self.rate_sd) < 0 or min(self.cost) <= 0 or not (math.isfinite(self.cost_cv) and self.cost_cv >= 0):
            raise InputError("RateModel: rate_sd and cost_cv must be >= 0 and costs > 0")

    @classmethod
    def constant(cls, lambda1: float, lambda2: float, c1: float, c2: float, **kw) -> RateModel:
        """The paper's constant-rate model (``b = 0``)."""
        if not (0 < lambda1 and 0 < lambda2):
            raise InputError(f"rates must be > 0; got {lambda1!r}, {lambda2!r}")
        return cls(a=(math.log(lambda1), math.log(lambda2)), cost=(float(c1), float(c2)), **kw)


@dataclass(frozen=True)
class Schedule:
    """Mode 1 where ``theta(log D) > 0`` (linear interpolation of ``theta`` at equally spaced log-D centres).

    Fields: ``log_lo``, ``log_hi`` the log-D range of the centres; ``theta`` the values at the centres.
    """

    log_lo: float
    log_hi: float
    theta: tuple

    def centres(self) -> np.ndarray:
        return np.linspace(self.log_lo, self.log_hi, len(self.theta))

    def mode1(self, log_d) -> np.ndarray:
        return np.interp(log_d, self.centres(), np.asarray(self.theta, dtype=np.float64)) > 0

    def intervals(self, grid: int = 2001) -> list[tuple[float, float]]:
        """The D intervals that use mode 1, read off a fine grid of [exp(log_lo), exp(log_hi)]. ``theta`` is held
        at its last value above the last centre, so an interval reaching it has no upper end: ``inf``."""
        x = np.linspace(self.log_lo, self.log_hi, grid)
        m = self.mode1(x)
        out, start = [], None
        for i, on in enumerate(m):
            if on and start is None:
                start = x[i]
            if (not on or i == grid - 1) and start is not None:
                end = math.inf if on and i == grid - 1 else float(np.exp(x[i]))
                out.append((float(np.exp(start)), end))
                start = None
        return out


def threshold_schedule(eta: float, eps: float, d_hi: float, k: int) -> Schedule:
    """The threshold policy ``eta`` as a schedule (mode 1 exactly where ``D > eta`` on the centres' range).

    Arguments: ``eta`` the threshold; ``eps`` the tolerance; ``d_hi`` the top of the range; ``k`` the number of
    centres.

    Returns: a :class:`Schedule`.
    """
    lo, hi = math.log(eps), math.log(d_hi)
    c = np.linspace(lo, hi, k)
    return Schedule(lo, hi, tuple(float(x) for x in (c - math.log(eta))))


class Draws(NamedTuple):
    log_d0: np.ndarray  # (runs,)
    xi: np.ndarray  # (runs, max_rounds)
    zeta: np.ndarray  # (runs, max_rounds)


def draws(runs: int, max_rounds: int, d0: float, d0_sd: float = 0.0, seed: int = 0) -> Draws:
    """Common random numbers: ``log D0 ~ N(log d0, d0_sd)`` and the per-round normals ``xi``, ``zeta``.

    Arguments: ``runs`` trajectories; ``max_rounds`` rounds each; ``d0``, ``d0_sd`` the initial disagreement's
    median and log-s.d.; ``seed`` the random seed.

    Returns: a ``Draws`` (``log_d0``, ``xi``, ``zeta`` arrays).
    """
    if runs < 1 or max_rounds < 1 or not (d0 > 0):
        raise InputError(f"need runs >= 1, max_rounds >= 1, d0 > 0; got {runs}, {max_rounds}, {d0}")
    rng = np.random.default_rng(seed)
    log_d0 = math.log(d0) + d0_sd * rng.standard_normal(runs)
    return Draws(log_d0, rng.standard_normal((runs, max_rounds)), rng.standard_normal((runs, max_rounds)))


class Outcome(NamedTuple):
    tokens: np.ndarray  # (runs,) token need T (inf: no consensus within max_rounds)
    rounds: np.ndarray  # (runs,) rounds to consensus (max_rounds if never)
    mode1_rounds: np.ndarray  # (runs,)


def evaluate(model: RateModel, policy, eps: float, dr: Draws) -> Outcome:
    """Exact (hard) simulation in numpy float64. ``policy(log_d) -> bool array`` (mode 1), e.g.
    ``Schedule.mode1`` or ``lambda x: x > log(eta)``.

    Arguments: ``model`` the :class:`RateModel`; ``policy`` as above; ``eps`` the tolerance; ``dr`` the
    :func:`draws` to run on. Returns an ``Outcome`` (tokens, rounds, mode-1 rounds, reached).
    """
    a, b, sd, c = (np.asarray(v, dtype=np.float64) for v in (model.a, model.b, model.rate_sd, model.cost))
    runs, K = dr.xi.shape
    log_eps = math.log(eps)
    x = dr.log_d0.astype(np.float64).copy()
    tokens = np.zeros(runs)
    rounds = np.zeros(runs, dtype=np.int64)
    m1 = np.zeros(runs, dtype=np.int64)
    alive = x > log_eps
    for k in range(K):
        if not alive.any():
            break
        use1 = np.asarray(policy(x), dtype=bool)
        s = np.where(use1, 0, 1)
        cost = c[s] * np.maximum(0.0, 1.0 + model.cost_cv * dr.zeta[:, k])
        nxt = x + a[s] + b[s] * x + sd[s] * dr.xi[:, k]
        tokens = np.where(alive, tokens + cost, tokens)
        rounds = rounds + alive
        m1 = m1 + (alive & use1)
        x = np.where(alive, nxt, x)
        alive = alive & (x > log_eps)
    tokens = np.where(alive, np.inf, tokens)
    return Outcome(tokens, rounds, m1)


def summarize(o: Outcome, b0) -> dict:
    """Mean / p95 tokens, mean rounds and mode-1 rounds, the no-consensus fraction and (with b0) P(T > b0).

    Arguments: ``o`` an ``Outcome`` of :func:`evaluate`; ``b0`` a budget or None.

    Returns: a dict of those numbers.
    """
    t = o.tokens
    finite = np.isfinite(t)
    with np.errstate(invalid="ignore"):
        p95 = float(np.quantile(t, 0.95, method="higher"))
    out = {
        "mean_tokens": float(np.mean(t)) if finite.all() else math.inf,
        "p95_tokens": p95,
        "mean_rounds": float(np.mean(o.rounds)),
        "mean_mode1_rounds": float(np.mean(o.mode1_rounds)),
        "no_consensus": float(np.mean(~finite)),
    }
    if b0 is not None:
        out["p_fail"] = float(np.mean(t > b0))
    return out


def _feasible(s: dict, b0, alpha, max_mean_rounds) -> bool:
    return (
        math.isfinite(s["mean_tokens"]) and s["mean_rounds"] <= max_mean_rounds and (b0 is None or s["p_fail"] <= alpha)
    )


class ScheduleDesign(NamedTuple):
    schedule: Schedule  # the designed schedule
    design: dict  # its exact summary on the design sample
    holdout: dict  # ... on an independent sample
    best_eta: float | None  # the best threshold policy (exact search on the design sample)
    threshold_design: dict | None  # its summary on the design sample
    threshold_holdout: dict | None  # ... on the independent sample
    thresholds: list  # every threshold tried: (eta, summary on the design sample)
    history: np.ndarray  # relaxed objective per optimiser step
    wall_s: float
    feasible: bool  # False: no schedule tried met the constraints (design is then the cheapest one found)


def _relaxed(model: RateModel, eps, b0, alpha, max_mean_rounds, k, log_lo, log_hi, mu):
    import jax
    import jax.numpy as jnp

    dt = jnp.result_type(float)  # float32, or float64 where the caller enabled 64-bit JAX: one dtype throughout
    a, b, sd, c = (jnp.asarray(v, dtype=dt) for v in (model.a, model.b, model.rate_sd, model.cost))
    centres = jnp.linspace(log_lo, log_hi, k, dtype=dt)
    log_eps = math.log(eps)
    scale = float(max(model.cost))

    def objective(theta, log_d0, xi, zeta, tau):
        def step(carry, inp):
            x, alive, tok, rnd = carry
            xk, zk = inp
            p = jax.nn.sigmoid(jnp.interp(x, centres, theta) / tau)
            cost = (p * c[0] + (1 - p) * c[1]) * jnp.maximum(0.0, 1.0 + model.cost_cv * zk)
            drift = p * (a[0] + b[0] * x + sd[0] * xk) + (1 - p) * (a[1] + b[1] * x + sd[1] * xk)
            tok = tok + alive * cost
            rnd = rnd + alive
            x = x + drift
            alive = alive * jax.nn.sigmoid((x - log_eps) / 0.05)
            return (x, alive, tok, rnd), None

        init = (log_d0, jax.nn.sigmoid((log_d0 - log_eps) / 0.05), jnp.zeros_like(log_d0), jnp.zeros_like(log_d0))
        (x, alive, tok, rnd), _ = jax.lax.scan(step, init, (xi.T, zeta.T))
        tok = tok + alive * 10.0 * scale  # a run not finished by max_rounds: a large smooth penalty
        loss = jnp.mean(tok) / scale
        if b0 is not None:
            pf = jnp.mean(jax.nn.sigmoid((tok - b0) / (0.02 * b0)))
            loss = loss + mu * jax.nn.relu(pf - alpha) * 100.0
        if math.isfinite(max_mean_rounds):
            loss = loss + mu * jax.nn.relu(jnp.mean(rnd) - max_mean_rounds) / max_mean_rounds * 100.0
        return loss

    return jax.jit(jax.value_and_grad(objective))


def design_schedule(
    model: RateModel,
    *,
    eps: float,
    d0: float,
    d0_sd: float = 0.0,
    b0: float | None = None,
    alpha: float = 0.05,
    max_mean_rounds: float = math.inf,
    bins: int = 8,
    d_hi: float | None = None,
    runs: int = 2000,
    max_rounds: int = 200,
    steps: int = 300,
    lr: float = 0.1,
    seed: int = 0,
    etas=None,
) -> ScheduleDesign:
    """The cheapest schedule meeting ``P(T > b0) <= alpha`` and ``mean rounds <= max_mean_rounds`` (see the
    module docstring), beside the best threshold policy; both also evaluated on an independent sample.

    Arguments: ``model`` the :class:`RateModel`; ``eps`` the tolerance; ``d0``, ``d0_sd`` the initial
    disagreement's median and log-s.d.; ``b0`` the budget (None: no risk constraint); ``alpha`` the allowed P(T
    > b0); ``max_mean_rounds`` a cap on the mean rounds; ``bins`` the schedule's centres; ``d_hi`` the top of
    its D range (default from d0); ``runs`` Monte Carlo draws; ``max_rounds`` the round limit; ``steps``, ``lr``
    the optax optimiser's steps and learning rate; ``seed`` the random seed; ``etas`` the threshold policies to
    compare (default: a grid). Returns a :class:`ScheduleDesign`.
    """
    import jax.numpy as jnp
    import optax

    t0 = time.perf_counter()
    if not (d0 > eps > 0):
        raise InputError(f"need d0 > eps > 0; got d0 = {d0!r}, eps = {eps!r}")
    if bins < 2:
        raise InputError(f"bins must be >= 2; got {bins!r}")
    if b0 is not None and not (b0 > 0 and math.isfinite(b0)):
        raise InputError(f"b0 must be a finite budget > 0; got {b0!r}")
    if not (0 < alpha < 1):
        raise InputError(f"alpha must be in (0, 1); got {alpha!r}")
    d_hi = float(d_hi if d_hi is not None else d0 * math.exp(3 * d0_sd) * 1.05)
    log_lo, log_hi = math.log(eps), math.log(d_hi)
    dr = draws(runs, max_rounds, d0, d0_sd, seed)
    hold = draws(runs, max_rounds, d0, d0_sd, seed + 1_000_003)

    # exact search over thresholds (including mode 1 only and mode 2 only)
    if etas is None:
        etas = np.geomspace(eps * 1.0001, d_hi, 40)
    tried, best_eta, best_s = [], None, None
    for eta in [float(e) for e in etas]:
        le = math.log(eta)
        s = summarize(evaluate(model, lambda x, le=le: x > le, eps, dr), b0)
        tried.append((eta, s))
        if _feasible(s, b0, alpha, max_mean_rounds) and (best_s is None or s["mean_tokens"] < best_s["mean_tokens"]):
            best_eta, best_s = eta, s
    start_eta = best_eta if best_eta is not None else min(tried, key=lambda r: r[1]["mean_tokens"])[0]
    dt = jnp.result_type(float)
    theta = jnp.asarray(threshold_schedule(start_eta, eps, d_hi, bins).theta, dtype=dt)

    f = _relaxed(model, eps, b0, alpha, max_mean_rounds, bins, log_lo, log_hi, mu=1.0)
    args = tuple(jnp.asarray(v, dtype=dt) for v in dr)
    opt = optax.adam(lr)
    state = opt.init(theta)
    hist = []
    best_theta = np.asarray(theta, dtype=np.float64)
    best_hard = best_s
    for i in range(steps):
        tau = float(max(0.05, 1.0 * (0.05 / 1.0) ** (i / max(1, steps - 1))))
        loss, g = f(theta, *args, tau)
        hist.append(float(loss))
        upd, state = opt.update(g, state, theta)
        theta = optax.apply_updates(theta, upd)
        if i % 10 == 9 or i == steps - 1:
            cand = Schedule(log_lo, log_hi, tuple(float(v) for v in np.asarray(theta)))
            s = summarize(evaluate(model, cand.mode1, eps, dr), b0)
            if _feasible(s, b0, alpha, max_mean_rounds) and (
                best_hard is None or s["mean_tokens"] < best_hard["mean_tokens"]
            ):
                best_hard, best_theta = s, np.asarray(theta, dtype=np.float64)
    sched = Schedule(log_lo, log_hi, tuple(float(v) for v in best_theta))
    design = best_hard if best_hard is not None else summarize(evaluate(model, sched.mode1, eps, dr), b0)
    holdout = summarize(evaluate(model, sched.mode1, eps, hold), b0)
    th_hold = None
    if best_eta is not None:
        le = math.log(best_eta)
        th_hold = summarize(evaluate(model, lambda x, le=le: x > le, eps, hold), b0)
    return ScheduleDesign(
        sched,
        design,
        holdout,
        best_eta,
        best_s,
        th_hold,
        tried,
        np.asarray(hist),
        time.perf_counter() - t0,
        best_hard is not None,
    )
