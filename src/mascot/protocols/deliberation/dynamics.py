"""The ``rate_law`` deliberation agents' dynamics, written once for both of their implementations: the text
surrogate (:class:`~mascot.protocols.deliberation.surrogate.SurrogateDeliberationBackend`, numpy, one agent and
request at a time) and the batched JAX simulator that fits them
(:func:`mascot.calibrate.deliberation_sim.simulate_rate_law`).

Every function takes the array namespace ``xp`` (``numpy`` or ``jax.numpy``); with numpy, ``exp`` and ``log``
are :mod:`mascot.stable`'s (the same bits on every processor), with JAX they are XLA's. The operations and
their order are the same in both, so the two implementations differ in their random draws and, beyond them,
only in last bits (XLA's exp and log, and its division by 1000 through a reciprocal).
"""

from __future__ import annotations

import numpy as np

from mascot import stable

__all__ = ["rate_law", "compliance", "initial_proposal", "update", "reply_length"]


def _exp_log(xp):
    return (stable.exp, stable.log) if xp is np else (xp.exp, xp.log)


def rate_law(D, rate, slope, d_ref, rate_min, rate_max, xp=np):
    """A mode's contraction rate at disagreement ``D``: ``clip(rate (D / d_ref)^slope, rate_min, rate_max)``
    (``D`` below 1e-12 is taken as 1e-12)."""
    exp, log = _exp_log(xp)
    D = xp.maximum(xp.asarray(D, dtype=xp.float64) if xp is np else D, 1e-12)
    return xp.clip(rate * exp(slope * log(D / d_ref)), rate_min, rate_max)


def compliance(lam, mode_rate):
    """The compliance ``c`` whose operator ``(1 - c) I + c W`` contracts the slowest direction of a ``W`` with
    contraction rate ``mode_rate`` at rate ``lam``: ``(1 - lam) / (1 - mode_rate)``."""
    return (1.0 - lam) / (1.0 - mode_rate)


def _to_grid(x, xp):
    """Clipped to [0, 1] and rounded to 3 decimals (what an agent's JSON reply holds)."""
    return xp.round(xp.clip(x, 0.0, 1.0) * 1000.0) / 1000.0


def initial_proposal(prior, prior_scale, spread, z, xp=np):
    """Round 0: ``0.5 + prior_scale (prior - 0.5) + spread z`` on the reply grid."""
    return _to_grid(0.5 + prior_scale * (prior - 0.5) + spread * z, xp)


def update(own, target, c, noise, z, xp=np):
    """A round's proposal: ``own + c (target - own) + noise z`` on the reply grid (``target``: the weighted mean
    of the proposals the agent's mode lets it read; ``c``: its compliance, noise included)."""
    return _to_grid(own + c * (target - own) + noise * z, xp)


def reply_length(mean, verbosity, z, xp=np):
    """A reply's reasoning length in characters: ``max(0, round(mean exp(v z - v^2 / 2)))`` (mean ``mean``)."""
    exp, _ = _exp_log(xp)
    return xp.maximum(xp.round(mean * exp(verbosity * z - 0.5 * verbosity * verbosity)), 0.0)
