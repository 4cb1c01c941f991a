"""Algorithm 1's norm-threshold switching rule (consensus paper, Def. 8 and eqs. 7-8) as one typed
``init`` / ``decide`` / ``commit`` interface, shared by the consensus kernels (batched, inside ``jit``) and the
live deliberation harness (plain Python floats, one lane at a time).

One round of a lane, in order:

1. :func:`decide`: the mode, ``sigma = 1`` (``mode1 = True``) if ``D(k) > eta`` else 2 for ``"adaptive"``
   (a fixed strategy keeps its mode); its cost ``c_sigma``; Algorithm 1's budget check *before* the round,
   ``b_k < c_sigma`` -> :attr:`Status.BUDGET_FAIL`; ``step`` = the lane runs this round.
2. the caller applies ``X <- W_sigma X`` (its own way: modal energies, a matrix product, LLM agents) and
   measures ``D(k + 1)``.
3. :func:`commit`: ``b <- b - c_sigma``, ``rounds += 1``; ``D(k + 1) <= eps`` -> :attr:`Status.CONSENSUS`;
   ``rounds = max_rounds`` -> :attr:`Status.MAX_ROUNDS`.

Strategies are ``"adaptive"``, ``"mode1"`` and ``"mode2"``; the deliberation's labels ``"complete"`` and
``"ring"`` name the paper's modes (mode 1 = complete K5, mode 2 = ring C5) and map to ``"mode1"``/
``"mode2"`` through :func:`canonical_strategy`.

The functions are written once for both array worlds: with JAX arrays (or tracers) they build XLA ops;
with Python floats or numpy values they compute in float64 numpy, so a harness's comparisons are exact.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mascot.status import STRATEGIES, STRATEGY_ALIASES, Status, canonical_strategy

__all__ = [
    "STRATEGIES",
    "STRATEGY_ALIASES",
    "canonical_strategy",
    "SwitchState",
    "Decision",
    "init",
    "choose_mode",
    "decide",
    "commit",
]


def _xp(*values):
    return jnp if any(isinstance(v, jax.Array) for v in values) else np


class SwitchState(NamedTuple):
    """Per-lane state of the rule (arrays of one shape, or Python scalars for one lane).

    ``status`` is :attr:`Status.MAX_ROUNDS` while a lane runs (its outcome if it never stops) and its final
    status once ``active`` is false.
    """

    d: Any  # D(k), the disagreement after the last executed round
    b: Any  # remaining budget b_k
    rounds: Any  # rounds executed
    status: Any  # Status codes (int32)
    active: Any  # still running


class Decision(NamedTuple):
    """What :func:`decide` chose for the next round."""

    mode1: Any  # True: mode 1 (W1), False: mode 2 (W2)
    cost: Any  # c_sigma of the chosen mode
    step: Any  # the lane runs this round (active and within budget)


def init(d0, b0, eps, max_rounds: int) -> SwitchState:
    """The state before round 0: a lane whose ``D(0) <= eps`` has already reached consensus."""
    xp = _xp(d0, b0, eps)
    done = d0 <= eps
    status = xp.where(done, int(Status.CONSENSUS), int(Status.MAX_ROUNDS)).astype(xp.int32)
    rounds = xp.zeros(xp.shape(d0), xp.int32)
    active = xp.asarray((d0 > eps) & (max_rounds > 0))
    return SwitchState(d=d0, b=b0, rounds=rounds, status=status, active=active)


def choose_mode(d, eta, strategy: str):
    """``mode1`` (True for sigma = 1): ``D > eta`` for ``"adaptive"`` (eq. 8), fixed otherwise."""
    strategy = canonical_strategy(strategy)
    xp = _xp(d, eta)
    if strategy == "adaptive":
        return xp.asarray(d > eta)
    return xp.full(xp.shape(d), strategy == "mode1")


def decide(state: SwitchState, eta, c1, c2, strategy: str) -> tuple[SwitchState, Decision]:
    """Choose the next round's mode and cost; lanes that cannot pay ``c_sigma`` stop with BudgetFail."""
    xp = _xp(state.d, state.b, eta, c1, c2)
    mode1 = choose_mode(state.d, eta, strategy)
    cost = xp.where(mode1, c1, c2)
    fail = state.active & (state.b < cost)
    status = xp.where(fail, int(Status.BUDGET_FAIL), state.status)
    step = state.active & ~fail
    return state._replace(status=status), Decision(mode1=mode1, cost=cost, step=step)


def commit(state: SwitchState, decision: Decision, d_new, eps, max_rounds: int) -> SwitchState:
    """Book the round that lanes with ``decision.step`` ran, reaching ``D(k + 1) = d_new``."""
    xp = _xp(state.d, d_new, decision.cost)
    step = decision.step
    d = xp.where(step, d_new, state.d)
    b = xp.where(step, state.b - decision.cost, state.b)
    rounds = state.rounds + step.astype(state.rounds.dtype)
    reached = step & (d <= eps)
    status = xp.where(reached, int(Status.CONSENSUS), state.status)
    active = step & ~reached
    status = xp.where(active & (rounds >= max_rounds), int(Status.MAX_ROUNDS), status)
    active = active & (rounds < max_rounds)
    return SwitchState(d=d, b=b, rounds=rounds, status=status, active=active)
