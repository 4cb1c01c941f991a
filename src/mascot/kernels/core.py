"""The public pure core of the consensus engine: parameters as pytrees, one jit-able rollout.

In the style of optax and diffrax: the consensus paper's switched system (Sec. III) is written once, as a
pure function of arrays and a PRNG key that users ``jax.jit``, ``jax.vmap`` and call inside their own code::

    import jax, jax.numpy as jnp, mascot
    from functools import partial

    modes = mascot.Modes(W1, W2, c1=600.0, c2=100.0)        # the two topologies and their round costs
    policy = mascot.Policy(eta=0.1, eps=0.03, b0=2000.0)    # Algorithm 1 (strategy="adaptive")
    out = mascot.rollout(x0, modes, policy, max_rounds=64)  # one trajectory, x0 of shape (N, d)

    run = jax.jit(jax.vmap(partial(mascot.rollout, max_rounds=64), in_axes=(0, None, None)))
    outs = run(x0s, modes, policy)                          # a batch, x0s of shape (B, N, d)

One round (Algorithm 1, eqs. 5, 7, 8): with ``D(k) = ||X(k) - 1 xbar^T||_F / sqrt(N)`` (eq. 4), stop at
``D(k) <= eps`` (consensus); else choose ``sigma = 1`` if ``D(k) > eta`` else 2 (``strategy="adaptive"``; a
fixed strategy keeps its mode); stop if ``b_k < c_sigma`` (BudgetFail, before the round); else
``X(k+1) = W_sigma X(k) (+ noise)`` and ``b_{k+1} = b_k - c_sigma``. After ``max_rounds`` rounds a trajectory
that is still above ``eps`` stops with MaxRounds. The rule itself is :mod:`mascot.kernels.switching`'s
``init``/``decide``/``commit``, shared with every batched path and the live deliberation harness.

:func:`mascot.simulate_consensus` runs the same rule on large batches (validation, chunking, devices and two
faster internal routes, modal and matrix) and agrees with this rollout exactly in rounds, tokens and status
(tests/test_core.py).
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mascot.errors import InputError
from mascot.kernels import switching
from mascot.kernels.prng import check_key

__all__ = ["Modes", "Policy", "Rollout", "disagreement", "rollout"]

_HIGHEST = jax.lax.Precision.HIGHEST


class Modes(NamedTuple):
    """The two communication modes of the switched system (a pytree).

    Attributes:
      W1, W2: ``(N, N)`` doubly stochastic weight matrices of mode 1 and mode 2 (``X <- W X``).
      c1, c2: tokens one round of each mode costs (> 0).
    """

    W1: Any
    W2: Any
    c1: Any
    c2: Any


@partial(jax.tree_util.register_dataclass, data_fields=["eta", "eps", "b0"], meta_fields=["strategy"])
@dataclasses.dataclass(frozen=True)
class Policy:
    """How rounds are chosen and when a trajectory stops (a pytree; ``strategy`` is static).

    Attributes:
      eta: switching threshold: mode 1 while ``D > eta`` (eq. 8); only ``"adaptive"`` reads it.
      eps: consensus tolerance: stop once ``D <= eps``.
      b0: the token budget before round 0.
      strategy: ``"adaptive"`` (Algorithm 1), or one mode throughout: ``"complete"`` (mode 1) or ``"ring"``
        (mode 2), the consensus paper's names for them (``"mode1"`` and ``"mode2"`` are accepted too).
    """

    eta: Any = 0.1
    eps: Any = 0.03
    b0: Any = 2000.0
    strategy: str = "adaptive"

    def __post_init__(self):
        switching.canonical_strategy(self.strategy)  # a ValueError naming the valid strategies


class Rollout(NamedTuple):
    """What :func:`rollout` returns for one trajectory (add a leading axis under ``vmap``).

    Attributes:
      rounds: rounds executed (int32).
      tokens: tokens spent, ``b0 - b_final``.
      d0: ``D(0)``; d_final: ``D`` after the last executed round.
      status: :class:`mascot.Status` code (int32): 0 consensus, 1 BudgetFail, 2 MaxRounds.
      x_final: ``(N, d)`` beliefs after the last executed round.
      d_trace, b_trace: ``(max_rounds + 1,)`` ``D(k)`` and ``b_k`` for ``k <= rounds``, NaN after (``trace=True``).
      sigma_trace: ``(max_rounds,)`` the mode of each executed round, 0 after (``trace=True``).
    """

    rounds: Any
    tokens: Any
    d0: Any
    d_final: Any
    status: Any
    x_final: Any
    d_trace: Any = None
    b_trace: Any = None
    sigma_trace: Any = None


def rollout(
    x0, modes: Modes, policy: Policy, *, max_rounds: int = 64, noise=0.0, key=None, trace: bool = False
) -> Rollout:
    """Algorithm 1 of the consensus paper for one trajectory, as a pure function (jit, vmap; see below for
    derivatives).

    Args:
      x0: initial beliefs, ``(N, d)``, float32 or float64 (an integer array is taken as float32, or float64
        under x64; half precision is refused: it cannot keep a budget).
      modes: the :class:`Modes` (``W1``, ``W2``, ``c1``, ``c2``).
      policy: the :class:`Policy` (``eta``, ``eps``, ``b0``, ``strategy``).
      max_rounds: the most rounds the trajectory runs (static).
      noise: standard deviation of i.i.d. Gaussian noise added to every belief after each round (the LLM
        stochasticity of the paper's Remark 3); needs ``key``.
      key: a PRNG key; round ``k`` adds ``noise * normal(fold_in(key, k), (N, d))``, the draws of
        :func:`mascot.simulate_consensus` with ``method="matrix"`` for a trajectory with this key (its modal
        route, the default for a commuting pair, draws the same noise in the modes' eigenbasis: equal in
        distribution, not draw for draw).
      trace: also return ``d_trace``, ``b_trace`` and ``sigma_trace`` (static).

    Returns:
      A :class:`Rollout`.

    Works under ``jax.jit`` and ``jax.vmap`` (over ``x0``, any field of ``modes`` or ``policy``, and ``noise`` and
    ``key``, which are keyword-only: map them through a lambda, ``jax.vmap(lambda x, k: rollout(x, modes, policy,
    max_rounds=64, noise=0.01, key=k))(x0s, jax.random.split(key, B))``) and inside a user's own jitted
    function. Arrays take ``x0``'s floating dtype.

    Shapes are checked (they are known when the function is traced). ``W1`` and ``W2`` are checked to be doubly
    stochastic where their values are known (an eager call); under ``jit``, or ``vmap`` over them, they are not,
    and a row-stochastic (DeGroot) ``W`` then gives a wrong ``D``: the rollout keeps the beliefs' mean fixed, which
    only a doubly stochastic ``W`` does, so ``D`` is measured from the initial mean and the stopping rule reads
    it. Other values are not checked: a finite ``x0``, ``eps > 0`` and ``c1, c2 > 0`` are the caller's to ensure
    (:func:`mascot.simulate_consensus` checks them). So are budgets the dtype keeps: the core
    deducts in the working dtype as given (float32 holds b0 = 29.9999999 as 30 and pays a round of cost 30;
    b0 = 3e7 with cost 1 loses every deduction). On concrete inputs, ``mascot.limits.check_budget(b0, (c1, c2),
    dtype, integer_costs=True)`` refuses what float32 cannot keep, and ``floor(b0)`` gives the same run with
    whole-token costs; :func:`mascot.simulate_consensus` does both. A non-finite ``x0`` has ``D(0) = NaN``
    and stops at once, with ``rounds = 0`` and the MaxRounds status.

    Derivatives: ``rounds``, ``tokens``, ``status`` and the switching decisions are piecewise constant in every
    input, so their derivatives are 0 wherever they exist (``jax.grad`` of tokens with respect to ``eta`` is 0.0:
    tune thresholds by search or a gradient-free method, not by gradients through the rollout). ``d_final``
    and the final beliefs are differentiable in ``x0`` and the weights between decisions by forward mode
    (``jax.jvp``, ``jax.jacfwd``); reverse mode (``jax.grad``) fails, as for any ``lax.while_loop``.
    """
    if not isinstance(modes, Modes):
        raise TypeError(f"modes must be a mascot.Modes(W1, W2, c1, c2); got {type(modes).__name__}")
    if not isinstance(policy, Policy):
        raise TypeError(f"policy must be a mascot.Policy(eta, eps, b0, strategy); got {type(policy).__name__}")
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, (int, np.integer)) or not 0 <= max_rounds < 2**31 - 1:
        raise InputError(f"max_rounds must be an integer in [0, 2**31 - 2] (rounds are int32); got {max_rounds!r}")
    level = _concrete(noise)
    if level is not None and (level.dtype.kind not in "iuf" or not np.all(np.isfinite(level) & (level >= 0))):
        raise InputError(f"noise must be a finite standard deviation >= 0 (a number); got {noise!r:.60}")
    if key is None and (level is None or np.any(level != 0)):
        # (a traced noise, e.g. vmapped over levels, without a key ran without noise: an outside tester)
        raise InputError(
            "noise > 0 needs key (e.g. key=jax.random.key(0))"
            if level is not None
            else "noise is traced (under jit or vmap), so it may be > 0: give key too (e.g. key=jax.random.key(0)), "
            "or leave noise out for a run without noise"
        )
    if key is not None:
        check_key(key)  # one threefry key (an rbg key's draws are not independent under vmap)
    from mascot.theory.consensus import validate_doubly_stochastic

    for name in ("W1", "W2"):  # checked where the weights are known (eager calls; not under jit or vmap over them)
        w = _concrete(getattr(modes, name))
        if w is not None and w.ndim == 2:
            # (a row-stochastic DeGroot W ran, and D, measured from the initial mean, never fell: an outside tester)
            validate_doubly_stochastic(w, f"modes.{name}")
    dt = getattr(x0, "dtype", None)
    dt = jnp.asarray(x0).dtype if dt is None else np.dtype(dt)
    if (
        jnp.issubdtype(dt, jnp.floating)
        and dt not in (np.float32, np.float64)
        or jnp.issubdtype(dt, jnp.complexfloating)
    ):
        # (bfloat16 kept the budget in 8 bits: 10 rounds of cost 3 from b0 = 2000 spent 0 tokens)
        raise InputError(
            f"x0 has dtype {dt}: rollout works in float32 or float64 (beliefs and the budget take x0's dtype); "
            "cast it, e.g. x0.astype(jnp.float32)"
        )
    return _rollout(
        x0,
        modes,
        policy,
        noise,
        key,
        max_rounds=int(max_rounds),
        trace=bool(trace),
        strategy=switching.canonical_strategy(policy.strategy),
    )


def disagreement(X):
    """``D(X) = ||X - 1 xbar^T||_F / sqrt(N)`` (the consensus paper's eq. 4) of beliefs ``X`` of shape
    ``(..., N, d)``, in JAX (a leading batch gives ``(...)``); :func:`mascot.disagreement` is the float64 numpy
    reference."""
    c = X - X.mean(axis=-2, keepdims=True)
    return jnp.sqrt(jnp.sum(c * c, axis=(-2, -1)) / X.shape[-2])


def _concrete(v):
    """``v`` as a numpy array where its value is known, else None (a traced value)."""
    if isinstance(v, jax.core.Tracer):
        return None
    try:
        return np.asarray(v)
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
        return None


@partial(jax.jit, static_argnames=("max_rounds", "trace", "strategy"))
def _rollout(x0, modes, policy, noise, key, *, max_rounds, trace, strategy):
    x0 = jnp.asarray(x0)
    dt = x0.dtype if jnp.issubdtype(x0.dtype, jnp.floating) else jnp.result_type(float)
    x0 = x0.astype(dt)
    if x0.ndim != 2:
        raise InputError(f"x0 must have shape (N, d) (vmap over a batch); got shape {x0.shape}")
    n = x0.shape[0]
    W1, W2 = jnp.asarray(modes.W1, dt), jnp.asarray(modes.W2, dt)
    c1, c2 = jnp.asarray(modes.c1, dt), jnp.asarray(modes.c2, dt)
    eta, eps, b0 = (jnp.asarray(v, dt) for v in (policy.eta, policy.eps, policy.b0))
    for name, w in (("W1", W1), ("W2", W2)):
        if w.shape != (n, n):
            raise InputError(
                f"modes.{name} must have shape (N, N) = {(n, n)} for x0 of shape {x0.shape}; got {w.shape}"
            )
    for name, v in (("modes.c1", c1), ("modes.c2", c2), ("policy.eta", eta), ("policy.eps", eps), ("policy.b0", b0)):
        if v.ndim:
            raise InputError(f"{name} must be a scalar per trajectory (vmap over a batch of them); got shape {v.shape}")
    if key is not None and jnp.ndim(noise):
        raise InputError(f"noise must be a scalar per trajectory; got shape {jnp.shape(noise)}")
    sigma = jnp.asarray(noise, dt)
    inv_n = jnp.asarray(1.0 / n, dt)

    def centred(x):  # (P X, mean) with P = I - 11^T / N; D = ||P X||_F / sqrt(N) (eq. 4)
        m = jnp.sum(x, axis=0) * inv_n
        return x - m, m

    xc, m = centred(x0)
    d0 = jnp.sqrt(jnp.sum(xc * xc) * inv_n)
    rule = switching.init(d0, b0, eps, max_rounds)
    traces = {}
    if trace:
        nan = jnp.full((max_rounds + 1,), jnp.nan, dt)
        traces = dict(d=nan.at[0].set(d0), b=nan.at[0].set(b0), s=jnp.zeros((max_rounds,), jnp.int32))

    def body(state):
        rule, xc, m, tr = state
        rule, dec = switching.decide(rule, eta, c1, c2, strategy)
        W = W1 if strategy == "mode1" else W2 if strategy == "mode2" else jnp.where(dec.mode1, W1, W2)
        x_new = jnp.matmul(W, xc, precision=_HIGHEST)  # P W X = W P X for doubly stochastic W
        m_new = m
        if key is not None:
            z = jax.random.normal(jax.random.fold_in(key, rule.rounds), xc.shape, dt)
            zc, zm = centred(z)
            x_new, m_new = x_new + sigma * zc, m + sigma * zm
        d_new = jnp.sqrt(jnp.sum(x_new * x_new) * inv_n)
        k = rule.rounds
        new = switching.commit(rule, dec, d_new, eps, max_rounds)
        if trace:
            tr = dict(
                d=jnp.where(dec.step, tr["d"].at[k + 1].set(new.d), tr["d"]),
                b=jnp.where(dec.step, tr["b"].at[k + 1].set(new.b), tr["b"]),
                s=jnp.where(dec.step, tr["s"].at[k].set(jnp.where(dec.mode1, 1, 2)), tr["s"]),
            )
        return new, jnp.where(dec.step, x_new, xc), jnp.where(dec.step, m_new, m), tr

    rule, xc, m, traces = jax.lax.while_loop(lambda s: s[0].active, body, (rule, xc, m, traces))
    out = Rollout(
        rounds=rule.rounds,
        tokens=b0 - rule.b,
        d0=d0,
        d_final=rule.d,
        status=rule.status.astype(jnp.int32),
        x_final=xc + m,
    )
    if trace:
        out = out._replace(d_trace=traces["d"], b_trace=traces["b"], sigma_trace=traces["s"])
    return out
