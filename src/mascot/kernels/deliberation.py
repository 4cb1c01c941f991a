"""Surrogate LLM deliberation under a token budget (consensus paper, Sec. V-C) as a batched JAX kernel.

The live deployment of the consensus paper replaces the algebraic step ``X <- W_sigma X`` (eq. 5) by LLM
agents that read their neighbours' proposals; the measured per-round contraction is noisy, sometimes
above 1 near consensus (the GPT runs), and the per-round token cost is measured, not fixed. This kernel
is the surrogate of that process, batched over many runs (``vmap`` over runs, ``lax.scan`` over rounds).

Model of one run (all quantities per run; ``P X = X - mean_rows(X)``):

* ``D_k = ||P X_k||_F / sqrt(N)`` (eq. 4);
* ``sigma_k = 1`` if ``D_k > eta`` else ``2`` (Def. 8; ``strategy="complete"`` fixes 1, ``"ring"`` fixes 2);
* ``X_{k+1} = clip(W_sigma X_k + a_sigma s(D_k) P X_k + noise Z_k, 0, 1)`` with ``Z_k ~ N(0, I)`` and the
  **state-dependent expansion** ``s(D) = clip(1 - D / d_expand, 0, 1)``: far from consensus ``s = 0`` (the
  mode contracts at its rate ``lambda_sigma``); as ``D`` falls below ``d_expand`` the extra term grows to
  ``a_sigma P X``, so a mode's per-round rate approaches ``lambda_sigma + a_sigma`` and exceeds 1 when
  ``a_sigma > 1 - lambda_sigma`` (what the paper observed for GPT under complete-only near consensus).
  ``clip`` keeps beliefs in the paper's ``[0, 1]^d`` (off with ``clip=False``);
* round cost (input tokens summed over agents) ``c_k = sum_i max(0, (base + per_neighbor deg_sigma(i))
  (1 + cost_noise zc_ik))`` with ``deg_sigma(i) = #{j != i : W_sigma[i, j] > 0}`` (each agent's prompt holds
  a fixed part plus one previous reply per neighbour) and ``zc ~ N(0, I)``;
* ``b_{k+1} = b_k - c_k``.

Each round ``k`` of a running run, in order (Algorithm 1 with the live rule of Sec. V-C):

1. ``D_k <= eps``: status 0 (consensus);
2. the **monitor** (see below) flags the run when ``k >= warmup`` and ``b_k < B*_hat(D_k)``; the first
   flagged round is reported as ``monitor_round`` (-1 if never); with ``monitor_stop=True`` the run stops
   there with status 3 (predicted BudgetFail), otherwise it continues (shadow mode, to score the monitor);
3. ``budget_rule="predicted"``: status 1 (BudgetFail) if the predicted cost ``c_hat_sigma > b_k``
   (Algorithm 1's ``b_k < c_sigma`` with the running cost estimate);
4. the round runs; if then ``b_{k+1} < 0`` the run ends with status 1 (BudgetFail, the paper's live rule:
   the budget is checked after the round, whose cost is only known afterwards).

A run still running after ``max_rounds`` rounds ends with status 0 if ``D <= eps`` else 2 (max_rounds).

**Monitor estimator** (the same as :class:`mascot.theory.monitor.BudgetMonitor`): per mode, the rates
``r = D_{k+1} / D_k`` observed so far in this run and the observed round costs are shrunk towards priors
with ``n0`` pseudo-observations: ``log lambda_hat = (n0 log lambda_prior + sum log r) / (n0 + n)``,
``c_hat = (n0 c_prior + sum c) / (n0 + n)`` (the prior alone when ``n0 + n = 0``). ``B*_hat(D)`` is Theorem 1's
``B*`` for the run's strategy (adaptive: Def. 11; complete: mode 1 only down to eps; ring: mode 2 only)
and is ``inf`` (never certified) when a needed ``lambda_hat >= 1``.

Randomness: a counter-based generator (:func:`round_draws`): the standard normals of run ``b`` in round ``k``
are Box-Muller transforms of 32-bit hashes of ``(seed, b, k, element)`` (Wellons' lowbias32 mixer), so a
run does not depend on the batch size or on ``max_rounds``, and the float64 reference loop in the tests
uses the same draws. (Not ``jax.random``: threefry inside the round loop took 6-12 s to compile on the
2-core CPU machines, the whole kernel under 1 s without it.)
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mascot.errors import InputError
from mascot.kernels.core import disagreement
from mascot.kernels.precision import check_budget, x64_enabled
from mascot.papers import DELIBERATION_STRATEGIES
from mascot.theory.consensus import ceil_rounds, contraction_rate, validate_doubly_stochastic

__all__ = [
    "STRATEGIES",
    "STATUS_NAMES",
    "DeliberationResult",
    "simulate_deliberation",
    "round_draws",
    "initial_beliefs",
    "certificate_budget_jax",
    "neighbor_degrees",
    "expected_round_cost",
    "monitor_estimates",
    "CLAUDE_CALIBRATION",
]

STRATEGIES = tuple(DELIBERATION_STRATEGIES)  # ("adaptive", "complete", "ring"): the index is the traced code
from mascot.status import STATUS_NAMES  # noqa: E402  (re-exported)

#: Surrogate parameters calibrated to the Claude column of Table VIII (Sec. V-C): effective per-round
#: rates 0.755 (complete: (0.0549/0.6864)^(1/9)) and 0.801 (ring: (0.0401/0.7193)^(1/13)), i.e.
#: complete_weights(5, 0.804) and ring_weights(5, 0.712); costs c1 = 12025 (108,227 / 9) and
#: c2 = 6259 (81,364 / 13) per round, i.e. base 98.6 and 576.6 tokens per neighbour for 5 agents.
CLAUDE_CALIBRATION = dict(complete_self=0.804, ring_self=0.712, cost_base=98.6, cost_per_neighbor=576.6)


class DeliberationResult(NamedTuple):
    """Per-run outcome (leading dimension B = runs).

    ``status``: 0 consensus, 1 BudgetFail, 2 max_rounds, 3 predicted BudgetFail (monitor stop).
    ``d_trace``/``b_trace``: ``(B, max_rounds + 1)``, ``D_k`` and ``b_k`` for ``k <= rounds``, NaN after;
    ``sigma_trace``: ``(B, max_rounds)`` mode of each executed round, 0 after; ``cost_trace``: cost of each
    executed round, NaN after. ``monitor_round``: first round the monitor flagged (-1: never);
    ``monitor_bstar``: ``B*_hat(D_k)`` at that round (NaN if never).
    """

    rounds: np.ndarray
    tokens: np.ndarray  # tokens spent, b0 - b_final
    d0: np.ndarray
    d_final: np.ndarray
    status: np.ndarray
    monitor_round: np.ndarray
    monitor_bstar: np.ndarray
    d_trace: np.ndarray
    b_trace: np.ndarray
    sigma_trace: np.ndarray
    cost_trace: np.ndarray
    x_final: np.ndarray | None = None

    @property
    def spent(self):
        """The old name of :attr:`tokens` (kept for code written before 0.2; one name per quantity: ``tokens``)."""
        return self.tokens


# ----------------------------------------------------------------------------- helpers
def neighbor_degrees(W) -> np.ndarray:
    """``deg(i) = #{j != i : W[i, j] > 0}``: how many other agents' replies are in agent i's prompt."""
    W = np.asarray(W, dtype=np.float64)
    off = (W > 0) & ~np.eye(W.shape[0], dtype=bool)
    return off.sum(axis=1).astype(np.float64)


def expected_round_cost(W, cost_base: float, cost_per_neighbor: float) -> float:
    """Mean round cost of the surrogate cost model (without the ``max(0, .)`` clip): ``sum_i base + per deg_i``."""
    return float(np.sum(cost_base + cost_per_neighbor * neighbor_degrees(W)))


def _mix32(x):
    """lowbias32 integer hash (uint32 -> uint32)."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def _uniforms(seed, run, k, count: int, dtype):
    """``(B, count)`` uniforms in (0, 1) from hashes of (seed, run, k, element index)."""
    h = _mix32(jnp.asarray(seed, jnp.uint32) + jnp.uint32(0x9E3779B9))
    h = _mix32(h ^ jnp.asarray(run, jnp.uint32))[:, None]
    h = _mix32(h ^ (jnp.asarray(k, jnp.uint32) * jnp.uint32(0x85EBCA6B)))
    h = _mix32(h ^ jnp.arange(count, dtype=jnp.uint32)[None, :])
    return (h.astype(dtype) + 0.5) * (1.0 / 4294967296.0)


def round_draws(seed, run, k, n: int, d: int, dtype=jnp.float64):
    """Round ``k``'s standard normals for runs ``run`` (an int array of run indices): belief noise
    ``(B, n, d)`` and cost noise ``(B, n)`` (Box-Muller on :func:`_uniforms`)."""
    m = n * d + n
    u = _uniforms(seed, run, k, 2 * m, dtype)
    z = jnp.sqrt(-2.0 * jnp.log(u[:, :m])) * jnp.cos(2.0 * jnp.pi * u[:, m:])
    return z[:, : n * d].reshape(-1, n, d), z[:, n * d :]


def initial_beliefs(seed: int, runs: int, prior, spread: float = 0.05, dtype=jnp.float64):
    """``X0 = clip(prior + spread Z, 0, 1)`` for ``runs`` runs (role-biased initial proposals), ``(runs, N, d)``;
    ``Z`` from :func:`round_draws` at round ``k = 2^32 - 1`` (never a simulated round)."""
    prior = jnp.asarray(prior, dtype)
    n, d = prior.shape
    z, _ = round_draws(seed, jnp.arange(int(runs)), 0xFFFFFFFF, n, d, dtype)
    return jnp.clip(prior[None] + spread * z, 0.0, 1.0)


def _rounds_to_reach(start, target, lam, ceil: bool = True):
    """JAX version of :func:`mascot.theory.consensus.rounds_to_reach` (float, ``inf`` if ``lam >= 1``)."""
    lam_ok = (lam > 0) & (lam < 1)
    log_lam = jnp.log(jnp.where(lam_ok, lam, 0.5))
    q = target / start
    r = jnp.where((q > 0) & (q < jnp.inf), jnp.log(q), jnp.log(target) - jnp.log(start)) / log_lam
    if ceil:
        k = jnp.maximum(ceil_rounds(r, log_lam, jnp), 1.0)  # start > target: >= 1
    else:
        k = jnp.maximum(r, 0.0)
    k = jnp.where(lam <= 0, 1.0, jnp.where(lam >= 1, jnp.inf, k))
    return jnp.where(start <= target, 0.0, k)


def certificate_budget_jax(D, eta, eps, lam1, lam2, c1, c2, strategy="adaptive", ceil: bool = True):
    """``B*(D)`` of Theorem 1 / Def. 11 for a strategy (same conventions as :func:`mascot.theory.theorem1`).

    adaptive: ``K1 = rounds(D -> max(eta, eps), lam1)``, ``K2 = rounds(max(eta,eps) -> eps, lam2)`` (no mode-1
    phase when ``D <= eta``); complete: ``K1 = rounds(D -> eps, lam1)``, ``K2 = 0``; ring: ``K1 = 0``,
    ``K2 = rounds(D -> eps, lam2)``. ``B* = K1 c1 + K2 c2``; ``inf`` when a needed mode does not contract.
    ``strategy`` is a name or a code (0 adaptive, 1 complete, 2 ring; may be a traced array).
    ``ceil=False`` drops the ceilings (fractional round counts): a point estimate of the spend rather than
    Theorem 1's sufficient bound.
    """
    if isinstance(strategy, str):
        if strategy not in STRATEGIES:
            raise InputError(f"strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}")
        strategy = STRATEGIES.index(strategy)
    rtr = partial(_rounds_to_reach, ceil=ceil)
    cost = lambda k, c: jnp.where(k == 0, 0.0, k * c)  # noqa: E731  (0 * inf-safe)
    # complete only / ring only
    b_cmpl = cost(rtr(D, eps, lam1), c1)
    b_ring = cost(rtr(D, eps, lam2), c2)
    # adaptive
    eta_eff = jnp.maximum(eta, eps)
    phase1 = D > eta_eff
    k1 = jnp.where(phase1, rtr(D, eta_eff, lam1), 0.0)
    k2 = jnp.where(D <= eps, 0.0, jnp.where(phase1, rtr(eta_eff, eps, lam2), rtr(D, eps, lam2)))
    b_adapt = jnp.where(jnp.isinf(k1) | jnp.isinf(k2), jnp.inf, cost(k1, c1) + cost(k2, c2))
    return jnp.where(strategy == 1, b_cmpl, jnp.where(strategy == 2, b_ring, b_adapt))


def monitor_estimates(sum_log, n_obs, sum_cost, prior_lam, prior_cost, n0):
    """Shrunk running estimates ``(lambda_hat, c_hat)`` per mode (arrays ``(..., 2)``); see module docstring."""
    w = n0 + n_obs
    has = w > 0
    safe_w = jnp.where(has, w, 1.0)
    lam = jnp.where(has, jnp.exp((n0 * jnp.log(prior_lam) + sum_log) / safe_w), prior_lam)
    cost = jnp.where(has, (n0 * prior_cost + sum_cost) / safe_w, prior_cost)
    return lam, cost


# ----------------------------------------------------------------------------- the kernel
class _Carry(NamedTuple):
    X: jax.Array  # (B, N, d)
    b: jax.Array  # (B,)
    rounds: jax.Array  # (B,) int32
    status: jax.Array  # (B,) int32, -1 running
    sum_log: jax.Array  # (B, 2)
    n_obs: jax.Array  # (B, 2)
    sum_cost: jax.Array  # (B, 2)
    mon_round: jax.Array  # (B,) int32
    mon_bstar: jax.Array  # (B,)


@partial(jax.jit, static_argnames=("max_rounds", "clip", "ceil"))
def _rollout(
    X0,
    b0,
    seed,
    run_ids,
    W1,
    W2,
    deg1,
    deg2,
    eta,
    eps,
    noise,
    expand,
    d_expand,
    cost_base,
    cost_per_nb,
    cost_noise,
    prior_lam,
    prior_cost,
    n0,
    strategy,
    predicted,
    monitor_stop,
    warmup,
    *,
    max_rounds,
    clip,
    ceil,
):
    # strategy (0 adaptive, 1 complete, 2 ring), predicted, monitor_stop and warmup are traced, so one
    # compilation serves every strategy and rule for a given shape
    B, N, d = X0.shape
    dt = X0.dtype
    tiny = jnp.asarray(jnp.finfo(dt).tiny, dt)
    zeros2 = jnp.zeros((B, 2), dt)
    carry = _Carry(
        X0,
        b0,
        jnp.zeros(B, jnp.int32),
        jnp.full(B, -1, jnp.int32),
        zeros2,
        zeros2,
        zeros2,
        jnp.full(B, -1, jnp.int32),
        jnp.full(B, jnp.nan, dt),
    )
    base_nb = jnp.stack([cost_base + cost_per_nb * deg1, cost_base + cost_per_nb * deg2])  # (2, N)

    def step(c: _Carry, k):
        D = disagreement(c.X)
        running = c.status < 0
        rec_d = jnp.where(running, D, jnp.nan)
        rec_b = jnp.where(running, c.b, jnp.nan)
        status = jnp.where(running & (D <= eps), 0, c.status)
        running = status < 0
        sig2 = jnp.where(strategy == 0, D <= eta, strategy == 2)  # True -> mode 2
        # monitor: running estimates, B*_hat(D_k) for the strategy, flag if b_k < B*_hat
        lam_hat, c_hat = monitor_estimates(c.sum_log, c.n_obs, c.sum_cost, prior_lam, prior_cost, n0)
        bstar = certificate_budget_jax(
            D, eta, eps, lam_hat[:, 0], lam_hat[:, 1], c_hat[:, 0], c_hat[:, 1], strategy, ceil=ceil
        )
        flag = running & (k >= warmup) & (c.b < bstar)
        first = flag & (c.mon_round < 0)
        mon_round = jnp.where(first, k, c.mon_round)
        mon_bstar = jnp.where(first, bstar, c.mon_bstar)
        status = jnp.where(flag & monitor_stop, 3, status)
        running = status < 0
        c_next = jnp.where(sig2, c_hat[:, 1], c_hat[:, 0])
        status = jnp.where(running & predicted & (c_next > c.b), 1, status)
        running = status < 0
        # the round
        z, zc = round_draws(seed, run_ids, k, N, d, dt)
        W = jnp.where(sig2[:, None, None], W2, W1)
        a = jnp.where(sig2, expand[1], expand[0])
        s = jnp.clip(1.0 - D / d_expand, 0.0, 1.0)
        PX = c.X - c.X.mean(axis=1, keepdims=True)
        Xn = (
            jnp.einsum("bij,bjd->bid", W, c.X, precision=jax.lax.Precision.HIGHEST)
            + (a * s)[:, None, None] * PX
            + noise * z
        )
        if clip:
            Xn = jnp.clip(Xn, 0.0, 1.0)
        per_agent = jnp.where(sig2[:, None], base_nb[1][None], base_nb[0][None]) * (1.0 + cost_noise * zc)
        cost = jnp.sum(jnp.maximum(per_agent, 0.0), axis=1)
        Dn = disagreement(Xn)
        bn = c.b - cost
        X = jnp.where(running[:, None, None], Xn, c.X)
        b = jnp.where(running, bn, c.b)
        rounds = jnp.where(running, c.rounds + 1, c.rounds)
        status = jnp.where(running & (bn < 0), 1, status)
        obs = running & (D > 0)
        logr = jnp.log(jnp.maximum(Dn, tiny) / jnp.where(D > 0, D, 1.0))
        m = jnp.stack([~sig2, sig2], axis=1) & obs[:, None]
        sum_log = c.sum_log + jnp.where(m, logr[:, None], 0.0)
        n_obs = c.n_obs + m.astype(dt)
        sum_cost = c.sum_cost + jnp.where(m, cost[:, None], 0.0)
        rec_sig = jnp.where(running, jnp.where(sig2, 2, 1), 0).astype(jnp.int32)
        rec_cost = jnp.where(running, cost, jnp.nan)
        return _Carry(X, b, rounds, status, sum_log, n_obs, sum_cost, mon_round, mon_bstar), (
            rec_d,
            rec_b,
            rec_sig,
            rec_cost,
        )

    c, (d_tr, b_tr, sig_tr, cost_tr) = jax.lax.scan(step, carry, jnp.arange(max_rounds, dtype=jnp.int32))
    D = disagreement(c.X)
    running = c.status < 0
    status = jnp.where(running, jnp.where(D <= eps, 0, 2), c.status)
    return c, status, D, d_tr.T, b_tr.T, sig_tr.T, cost_tr.T


def _as_rate(name, v):
    v = float(v)
    if not (v > 0):
        raise InputError(f"{name} must be > 0; got {v!r}")
    return v


def simulate_deliberation(
    seed,
    X0,
    W1,
    W2,
    *,
    runs: int | None = None,
    strategy: str = "adaptive",
    eta: float = 0.2,
    eps: float = 0.05,
    b0=100_000.0,
    max_rounds: int = 40,
    noise: float = 0.0,
    expand=(0.0, 0.0),
    d_expand: float = 0.1,
    cost_base: float = 98.6,
    cost_per_neighbor: float = 576.6,
    cost_noise: float = 0.0,
    budget_rule: str = "spent",
    monitor_stop: bool = False,
    warmup: int = 2,
    n0: float = 1.0,
    prior_lambda=None,
    prior_cost=None,
    monitor_ceil: bool = True,
    clip: bool = True,
    run_offset: int = 0,
    dtype="float64",
    return_x: bool = False,
) -> DeliberationResult:
    """Run ``runs`` surrogate deliberations (see the module docstring for the model and the rules).

    Args:
        seed: an integer (0 <= seed < 2^32); run ``b`` draws from ``(seed, run_offset + b)``.
        X0: initial beliefs ``(N, d)`` (shared) or ``(runs, N, d)``.
        W1, W2: doubly stochastic mode matrices (mode 1 = dense/complete, mode 2 = sparse/ring).
        b0: initial budget, scalar or ``(runs,)``.
        expand: ``(a_1, a_2)``, the per-mode expansion near consensus; ``d_expand`` its onset level.
        prior_lambda: monitor priors ``(lambda1, lambda2)``; default the modes' contraction rates (Def. 6).
        prior_cost: monitor priors ``(c1, c2)``; default the cost model's mean per-round costs.
        monitor_ceil: ``True`` (default) checks Theorem 1's ``B*`` (with ceilings, a sufficient bound);
            ``False`` checks the fractional point estimate of the spend (see :func:`certificate_budget_jax`).
        dtype: ``"float64"`` (needs ``jax_enable_x64``) or ``"float32"``.
    """
    if strategy not in STRATEGIES:
        raise InputError(f"strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}")
    if budget_rule not in ("spent", "predicted"):
        raise InputError(f"budget_rule must be 'spent' or 'predicted'; got {budget_rule!r}")
    if int(max_rounds) != max_rounds or max_rounds < 1:
        raise InputError(f"max_rounds must be an integer >= 1; got {max_rounds!r}")
    if int(warmup) != warmup or warmup < 0:
        raise InputError(f"warmup must be an integer >= 0; got {warmup!r}")
    for name, v in (
        ("noise", noise),
        ("cost_noise", cost_noise),
        ("n0", n0),
        ("cost_base", cost_base),
        ("cost_per_neighbor", cost_per_neighbor),
    ):
        if not (float(v) >= 0):
            raise InputError(f"{name} must be >= 0; got {v!r}")
    if not (0 < eps) or not (0 < eta):
        raise InputError(f"eta and eps must be > 0; got eta={eta!r}, eps={eps!r}")
    if dtype not in ("float64", "float32"):
        raise InputError(f"dtype must be 'float64' or 'float32'; got {dtype!r}")
    if dtype == "float64" and not x64_enabled():
        raise InputError(
            "dtype='float64' needs jax_enable_x64: run inside "
            "`with mascot.kernels.precision.float64():`, or use dtype='float32'"
        )
    W1 = validate_doubly_stochastic(W1, "W1")
    W2 = validate_doubly_stochastic(W2, "W2")
    X0 = np.asarray(X0, dtype=np.float64)
    if X0.ndim == 2:
        if runs is None:
            raise InputError("give runs when X0 is a single (N, d) matrix")
        X0 = np.broadcast_to(X0, (int(runs),) + X0.shape)
    if X0.ndim != 3 or X0.shape[1] != W1.shape[0] or W1.shape != W2.shape:
        raise InputError(f"X0 must be (N, d) or (runs, N, d) with N = {W1.shape[0]}; got shape {X0.shape}")
    if runs is not None and X0.shape[0] != int(runs):
        raise InputError(f"X0 has {X0.shape[0]} runs but runs={runs}")
    B, N, d = X0.shape
    if prior_lambda is None:
        prior_lambda = (contraction_rate(W1, "W1"), contraction_rate(W2, "W2"))
    prior_lambda = tuple(_as_rate("prior_lambda", v) for v in prior_lambda)
    if prior_cost is None:
        prior_cost = (
            expected_round_cost(W1, cost_base, cost_per_neighbor),
            expected_round_cost(W2, cost_base, cost_per_neighbor),
        )
    prior_cost = tuple(_as_rate("prior_cost", v) for v in prior_cost)
    dt = jnp.float64 if dtype == "float64" else jnp.float32
    f = lambda v: jnp.asarray(v, dt)  # noqa: E731
    b0 = np.broadcast_to(np.asarray(b0, dtype=np.float64), (B,))
    check_budget(b0, prior_cost, dt)  # budgets up to 2^24 (float32) / 2^53 with round costs >= b0 * 2^-24 / 2^-53
    if isinstance(seed, bool) or int(seed) != seed or not 0 <= int(seed) < 2**32:
        raise InputError(f"seed must be an integer in [0, 2^32); got {seed!r}")
    run_ids = jnp.arange(B, dtype=jnp.uint32) + jnp.uint32(int(run_offset))
    c, status, D, d_tr, b_tr, sig_tr, cost_tr = _rollout(
        f(X0),
        f(b0),
        jnp.uint32(int(seed)),
        run_ids,
        f(W1),
        f(W2),
        f(neighbor_degrees(W1)),
        f(neighbor_degrees(W2)),
        f(eta),
        f(eps),
        f(noise),
        f(np.asarray(expand, dtype=np.float64)),
        f(d_expand),
        f(cost_base),
        f(cost_per_neighbor),
        f(cost_noise),
        f(np.asarray(prior_lambda)),
        f(np.asarray(prior_cost)),
        f(n0),
        jnp.int32(STRATEGIES.index(strategy)),
        jnp.bool_(budget_rule == "predicted"),
        jnp.bool_(monitor_stop),
        jnp.int32(warmup),
        max_rounds=int(max_rounds),
        clip=bool(clip),
        ceil=bool(monitor_ceil),
    )
    rounds = np.asarray(c.rounds)
    d_tr = np.asarray(d_tr, dtype=np.float64)
    b_tr = np.asarray(b_tr, dtype=np.float64)
    # final column: D and b after the last round (k = max_rounds) for runs that used every round
    d_final = np.asarray(D, dtype=np.float64)
    b_fin = np.asarray(c.b, dtype=np.float64)
    d_tr = np.concatenate([d_tr, np.full((B, 1), np.nan)], axis=1)
    b_tr = np.concatenate([b_tr, np.full((B, 1), np.nan)], axis=1)
    idx = np.arange(B)
    d_tr[idx, rounds] = d_final
    b_tr[idx, rounds] = b_fin
    d0 = np.asarray(disagreement(f(X0)), dtype=np.float64)
    return DeliberationResult(
        rounds=rounds,
        tokens=b0 - b_fin,
        d0=d0,
        d_final=d_final,
        status=np.asarray(status),
        monitor_round=np.asarray(c.mon_round),
        monitor_bstar=np.asarray(c.mon_bstar, dtype=np.float64),
        d_trace=d_tr,
        b_trace=b_tr,
        sigma_trace=np.asarray(sig_tr),
        cost_trace=np.asarray(cost_tr, dtype=np.float64),
        x_final=np.asarray(c.X) if return_x else None,
    )
