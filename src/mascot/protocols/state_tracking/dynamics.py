"""The state-tracking surrogate's reply model, written once for both of its implementations: the text backend
(:class:`~mascot.protocols.state_tracking.surrogate.SurrogateBackend`, numpy, the requests of one call) and the
batched JAX simulator that calibrates it (:func:`mascot.calibrate.trials.simulate_trials`). The model itself is
described in the surrogate's module docstring; the task's rule is :func:`mascot.kernels.state_tracking.rule_step`
(checked against a Decimal reference in the tests), which the callers apply and pass in.

Every function takes the array namespace ``xp`` (``numpy`` or ``jax.numpy``) and works elementwise over any
batch shape; proposals shown to a judge lie on the last axis with a validity mask. States are triples
``(value, parity, level)`` with parity 0 for "A" and 1 for "B". The random inputs are :class:`Draws`: each
implementation draws them from its own streams (SplitMix64 hashes of the request in the backend, JAX's PRNG in
the simulator), so the two agree in distribution; given the same draws they agree but in last bits (XLA's
``log1p`` and ``cos``, and its division by 100 through a reciprocal).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mascot import stable

__all__ = ["Draws", "standard_normal", "aggregate", "plurality", "agent_reply", "judge_reply", "round2"]


class Draws(NamedTuple):
    """One request's random inputs: uniforms in [0, 1) and standard normals."""

    mix: object  # the reply mixture: exact / echo (agents), copy / recompute (judges)
    aux: object  # agents: Rule 2's boundary misread; judges: which valid proposal a copy takes
    z_own: object  # the request's own Value noise
    z_shared: object  # the normal shared by the step's replies (correlation rho_c)
    parity: object  # Parity slip, then (agents) the stale-Parity interval after it
    level: object  # Level slip
    direction: object  # its direction (-1 below 0.5)
    blunder: object  # P(noise s.d. x blunder_scale)


def standard_normal(u1, u2, xp=np):
    """Box-Muller (cosine branch) from two uniforms in [0, 1); with numpy through :mod:`mascot.stable`'s
    ``log1p`` and ``cos`` (the same bits on every processor)."""
    log1p, cos = (stable.log1p, stable.cos) if xp is np else (xp.log1p, xp.cos)
    return xp.sqrt(-2.0 * log1p(-u1)) * cos(2.0 * np.pi * u2)


def round2(x, xp=np):
    """Rounded to 2 decimals, as a reply's JSON holds it (numpy's ``round(x, 2)``: ``rint(100 x) / 100``)."""
    return xp.round(x * 100.0) / 100.0


def plurality(v, p, lv, ok, xp=np):
    """The plurality ``(value, parity, level)`` tuple among the valid entries (last axis), ties to the tuple
    proposed first (the protocol's ``mesh_tie="first"``,
    :func:`~mascot.protocols.state_tracking.aggregation.plurality_vote`); the first entry when none is valid."""
    same = (
        (v[..., :, None] == v[..., None, :])
        & (p[..., :, None] == p[..., None, :])
        & (lv[..., :, None] == lv[..., None, :])
        & ok[..., :, None]
        & ok[..., None, :]
    )
    w = xp.argmax(same.sum(-1), -1)[..., None]
    return tuple(xp.take_along_axis(x, w, -1)[..., 0] for x in (v, p, lv))


def aggregate(method: str, v, p, lv, ok, xp=np):
    """What a judge makes of the valid proposals (last axis): ``"mean"`` or ``"median"`` Value (the mean of the
    two middle ones for an even count) with the majority Parity (a tie: "A" below Rule 2's threshold 70, else
    "B") and the smallest most frequent Level, or the ``"vote"`` :func:`plurality`. Meaningless where no
    proposal is valid (the caller decides). With numpy the mean adds the proposals in order, as Python's ``sum``."""
    if method == "vote":
        return plurality(v, p, lv, ok, xp)
    k = ok.sum(-1)
    if method == "mean":
        vv = xp.where(ok, v, 0.0)
        if xp is np:  # in order, as Python's sum (numpy's pairwise sum differs from 8 proposals on)
            tot = vv[..., 0] + 0.0
            for j in range(1, v.shape[-1]):
                tot = tot + vv[..., j]
        else:  # XLA's reduction (a loop of adds there runs the whole simulator 1.4x slower): the last bit may differ
            tot = vv.sum(-1)
        val = tot / xp.maximum(k, 1)
    else:
        s = xp.sort(xp.where(ok, v, xp.inf), -1)
        h = k // 2
        hi = xp.take_along_axis(s, xp.minimum(h, s.shape[-1] - 1)[..., None], -1)[..., 0]
        lo = xp.take_along_axis(s, xp.maximum(h - 1, 0)[..., None], -1)[..., 0]
        val = xp.where(k % 2 == 1, hi, 0.5 * (lo + hi))
    nb = (ok & (p == 1)).sum(-1)
    na = k - nb
    par = xp.where(na == nb, (val >= 70).astype(np.int32), (nb > na).astype(np.int32))
    counts = (ok[..., None] & (lv[..., None] == xp.arange(1, 10))).sum(-2)
    return val, par, (xp.argmax(counts, -1) + 1).astype(np.int32)


def _finish(base, clean, scale, g, d, xp, stale_p=None, stale_from=None):
    """A reply from its base state: Value noise, Parity and Level slips unless ``clean`` (exact, echo, copy,
    recompute), Values to 2 decimals; ``stale_p`` (agents): P(the reply keeps ``stale_from``'s Parity)."""
    bv, bp, bl = base
    rho = g["rho_c"]
    z = xp.sqrt(rho) * d.z_shared + xp.sqrt(1.0 - rho) * d.z_own
    mult = xp.where(d.blunder < g["p_blunder"], g["blunder_scale"], 1.0)
    noise = scale * g["sigma"] * z * mult + scale * g["bias"]
    v = round2(bv + xp.where(clean, 0.0, noise), xp)
    slip = scale * g["parity_slip"]
    par = xp.where((d.parity < slip) & ~clean, 1 - bp, bp)
    if stale_p is not None:
        par = xp.where((d.parity >= slip) & (d.parity < slip + stale_p), stale_from, par)
    move = (d.level < scale * g["level_slip"]) & ~clean
    lev = xp.clip(bl + xp.where(move, xp.where(d.direction < 0.5, -1, 1), 0), 1, 9)
    return v, par.astype(np.int32), lev.astype(np.int32)


def agent_reply(g, r, state, rule, misread, d: Draws, xp=np):
    """An agent's reply to its input ``state``: with probability ``r["p_exact"]`` the exact ``rule`` state,
    with ``r["p_echo"]`` the input itself, else the rule's state plus noise (s.d. ``g["sigma"]`` scaled by
    ``r["sigma_scale"]``); a reply that computes (exact or noisy) reads Rule 2's boundary cases as ``misread``
    with probability ``r["p_boundary"]`` and keeps the input's Parity with ``r["p_keep_parity"]``. ``g``: the
    global parameters (sigma, bias, rho_c, parity_slip, level_slip, p_blunder, blunder_scale)."""
    exact = d.mix < r["p_exact"]
    echo = (d.mix >= r["p_exact"]) & (d.mix < r["p_exact"] + r["p_echo"])
    mis = ~echo & (d.aux < r["p_boundary"])
    computed = tuple(xp.where(mis, m, t) for m, t in zip(misread, rule))
    base = tuple(xp.where(echo, s, c) for s, c in zip(state, computed))
    stale_p = xp.where(echo, 0.0, r["p_keep_parity"])
    return _finish(base, exact | echo, r["sigma_scale"], g, d, xp, stale_p=stale_p, stale_from=state[1])


def judge_reply(g, r, rule, proposals, ok, method: str, d: Draws, xp=np):
    """A judge's (or mesh reviser's) reply, shown ``proposals`` ``(v, p, l)`` (last axis) of which ``ok`` are
    valid: with probability ``r["p_copy"]`` a copy of one valid proposal (chosen by ``d.aux``), with
    ``r["p_recompute"]`` the exact ``rule`` state, else the proposals' :func:`aggregate` (the rule's state when
    none is valid) plus noise scaled by ``r["noise"]``; a copy with nothing to copy recomputes."""
    k = ok.sum(-1)
    has = k > 0
    agg = tuple(xp.where(has, a, t) for a, t in zip(aggregate(method, *proposals, ok, xp), rule))
    j = xp.minimum((d.aux * k).astype(np.int32), xp.maximum(k - 1, 0))
    sel = ok & ((xp.cumsum(ok, -1) - 1) == j[..., None])
    picked = tuple((x * sel).sum(-1) for x in proposals)
    copy = (d.mix < r["p_copy"]) & has
    recompute = ((d.mix >= r["p_copy"]) & (d.mix < r["p_copy"] + r["p_recompute"])) | ((d.mix < r["p_copy"]) & ~has)
    base = tuple(xp.where(copy, c, xp.where(recompute, t, a)) for c, t, a in zip(picked, rule, agg))
    return _finish(base, copy | recompute, r["noise"], g, d, xp)
