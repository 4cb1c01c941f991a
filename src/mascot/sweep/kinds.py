"""Experiment kinds a sweep can run: each names its parameters (type, default, range) and evaluates
a chunk of grid points in as few kernel calls as possible, returning one tidy table.

``consensus``: Algorithm 1 of the consensus paper on complete K_N (mode 1) versus ring C_N (mode 2),
Table III's weighting generalised to N (self-weight ``self_weight_complete`` / ``self_weight_ring``, the
rest shared equally among neighbours) and the paper's cost model generalised: a complete round costs
``N (N - 1) tokens_complete`` and a ring round ``2 N tokens_ring`` (600 and 100 at N = 5 with the
defaults 30 and 10) unless ``c1`` / ``c2`` are given. Initial beliefs are drawn per trajectory from a
normal with mean ``x0_mean`` and standard deviation ``x0_spread`` truncated to [0, 1] (the paper's
Sec. V-A sampler). One row per (point, trajectory).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

__all__ = ["Param", "Kind", "KINDS", "point_keys"]


@dataclass(frozen=True)
class Param:
    type: type
    default: Any
    check: Callable[[Any], bool] | None = None
    rule: str = ""
    doc: str = ""


@dataclass(frozen=True)
class Kind:
    name: str
    params: dict[str, Param]
    evaluate: Callable  # (points, indices, key_seed, dtype) -> DataFrame
    bytes_per_point: Callable  # (point) -> int, working memory estimate
    extra_check: Callable[[dict], None] | None = None
    derive: Callable[[dict], None] | None = None  # fills parameters computed from others, in place

    def complete(self, p: dict) -> dict:
        """Fill defaults and derived values."""
        out = {k: p.get(k, spec.default) for k, spec in self.params.items()}
        if self.derive:
            self.derive(out)
        return out

    def validate(self, p: dict) -> None:
        for k, spec in self.params.items():
            v = p[k]
            if v is None:
                continue
            if spec.type is float and isinstance(v, int) and not isinstance(v, bool):
                v = float(v)
                p[k] = v
            if not isinstance(v, spec.type) or isinstance(v, bool) != (spec.type is bool):
                raise ValueError(f"{k} must be of type {spec.type.__name__}; got {v!r}")
            if spec.check is not None and not spec.check(v):
                raise ValueError(f"{k} = {v!r} is out of range: {spec.rule}")
        if self.extra_check:
            self.extra_check(p)


def point_keys(key_seed: int, indices) -> jax.Array:
    """One PRNG key per grid point: ``fold_in(key(key_seed), point_index)`` (independent of sharding)."""
    base = jax.random.key(key_seed)
    return jax.vmap(lambda i: jax.random.fold_in(base, i))(jnp.asarray(indices, dtype=jnp.uint32))


# ----------------------------------------------------------------------------- consensus
_STRATEGY = {"adaptive": "adaptive", "complete": "mode1", "ring": "mode2"}

CONSENSUS_PARAMS = {
    "n": Param(int, 5, lambda v: 3 <= v <= 4096, "3 <= n <= 4096", "agents"),
    "d": Param(int, 6, lambda v: 1 <= v <= 1024, "1 <= d <= 1024", "belief dimensions"),
    "trajectories": Param(int, 64, lambda v: 1 <= v <= 10**7, "1 <= trajectories <= 1e7", "per grid point"),
    "strategy": Param(str, "adaptive", lambda v: v in _STRATEGY, "one of adaptive, complete, ring"),
    "eta": Param(float, 0.1, lambda v: v > 0 and math.isfinite(v), "eta > 0", "switching threshold"),
    "eps": Param(float, 0.03, lambda v: v > 0 and math.isfinite(v), "eps > 0", "consensus tolerance"),
    "b0": Param(float, 2000.0, lambda v: v >= 0 and math.isfinite(v), "b0 >= 0", "initial budget"),
    "c1": Param(float, None, lambda v: v > 0 and math.isfinite(v), "c1 > 0", "mode-1 cost (default: model)"),
    "c2": Param(float, None, lambda v: v > 0 and math.isfinite(v), "c2 > 0", "mode-2 cost (default: model)"),
    "tokens_complete": Param(float, 30.0, lambda v: v > 0, "tokens_complete > 0", "tokens per message, K_N"),
    "tokens_ring": Param(float, 10.0, lambda v: v > 0, "tokens_ring > 0", "tokens per message, C_N"),
    "self_weight_complete": Param(float, 0.4, lambda v: 0 <= v <= 1, "0 <= w <= 1"),
    "self_weight_ring": Param(float, 0.6, lambda v: 0 <= v <= 1, "0 <= w <= 1"),
    "x0_mean": Param(float, 0.5, lambda v: 0 < v < 1, "0 < x0_mean < 1"),
    "x0_spread": Param(float, 0.15, lambda v: v > 0 and math.isfinite(v), "x0_spread > 0"),
    "noise": Param(float, 0.0, lambda v: v >= 0 and math.isfinite(v), "noise >= 0", "belief noise per round"),
    "max_rounds": Param(int, 64, lambda v: 1 <= v <= 100_000, "1 <= max_rounds <= 1e5"),
}


def _consensus_costs(p):
    """The paper's cost model generalised: c1 = N (N - 1) tokens_complete, c2 = 2 N tokens_ring."""
    n = p["n"]
    if p["c1"] is None:
        p["c1"] = float(n * (n - 1) * p["tokens_complete"])
    if p["c2"] is None:
        p["c2"] = float(2 * n * p["tokens_ring"])


def _consensus_extra(p):
    if p["strategy"] == "adaptive" and not p["eta"] > p["eps"]:
        raise ValueError(f"eta must be > eps for strategy 'adaptive'; got eta = {p['eta']}, eps = {p['eps']}")


def _initial_beliefs(keys, trajectories, n, d, mean, spread, dtype):
    """X0 of each point: ``mean + spread * TN(lower, upper)`` truncated to [0, 1], one draw of shape
    ``(trajectories, n, d)`` per point key (per-point draws vectorise twice as well as per-trajectory
    ones); returns ``(points * trajectories, n, d)``, trajectory-major within each point."""
    lo, hi = (0.0 - mean) / spread, (1.0 - mean) / spread
    z = jax.vmap(lambda k: jax.random.truncated_normal(k, lo, hi, (trajectories, n, d), dtype))(keys)
    return (mean + spread * z).reshape(-1, n, d)


_initial_beliefs = jax.jit(_initial_beliefs, static_argnames=("trajectories", "n", "d", "dtype"))


def _consensus_evaluate(points: list[dict], indices: np.ndarray, key_seed: int, dtype: str) -> pd.DataFrame:
    from mascot.kernels import complete_weights, ring_weights, simulate_consensus
    from mascot.theory import contraction_rate, theorem1_batch

    pkeys = point_keys(key_seed, indices)
    groups: dict[tuple, list[int]] = {}
    for i, p in enumerate(points):
        g = (p["n"], p["d"], p["strategy"], p["max_rounds"], p["self_weight_complete"], p["self_weight_ring"],
             p["noise"], p["x0_mean"], p["x0_spread"], p["trajectories"])
        groups.setdefault(g, []).append(i)
    frames = []
    for (n, d, strategy, max_rounds, a1, a2, noise, mean, spread, T), members in groups.items():
        W1, W2 = complete_weights(n, a1), ring_weights(n, a2)
        lam1, lam2 = contraction_rate(W1), contraction_rate(W2)
        rows = np.repeat(np.asarray(members), T)
        traj = np.tile(np.arange(T), len(members))
        # X0 from the point key; noise from fold_in(point key, 2**31 + t) per trajectory t
        X0 = _initial_beliefs(pkeys[jnp.asarray(members)], T, n, d, float(mean), float(spread), jnp.dtype(dtype))
        col = lambda k: np.repeat(np.array([points[i][k] for i in members], dtype=np.float64), T)  # noqa: E731
        eta, eps, b0, c1, c2 = (col(k) for k in ("eta", "eps", "b0", "c1", "c2"))
        nkeys = None
        if noise > 0:
            nkeys = jax.vmap(jax.random.fold_in)(pkeys[jnp.asarray(rows)], jnp.asarray(traj + 2**31, jnp.uint32))
        res = simulate_consensus(X0, W1, W2, c1, c2, eta, eps, b0, strategy=_STRATEGY[strategy],
                                 max_rounds=max_rounds, noise=noise, key=nkeys, dtype=dtype)
        d0 = res.d0.astype(np.float64)
        k1, k2, bstar = theorem1_batch(d0, eta, eps, lam1, lam2, c1, c2)
        frame = pd.DataFrame({
            "point": np.asarray(indices)[rows].astype(np.int64), "trajectory": traj.astype(np.int32),
            "n": np.int32(n), "d": np.int32(d), "strategy": strategy, "eta": eta, "eps": eps, "b0": b0,
            "c1": c1, "c2": c2, "self_weight_complete": a1, "self_weight_ring": a2, "x0_mean": mean,
            "x0_spread": spread, "noise": noise, "max_rounds": np.int32(max_rounds),
            "lambda1": lam1, "lambda2": lam2, "d0": d0,
            "rounds": res.rounds.astype(np.int32), "tokens": res.spent.astype(np.float64),
            "d_final": res.d_final.astype(np.float64), "status": res.status.astype(np.int8),
            "K_star": k1 + k2, "B_star": bstar, "certified": b0 >= bstar,
        })
        frames.append(frame)
    df = pd.concat(frames, ignore_index=True)
    return df.sort_values(["point", "trajectory"], kind="stable").reset_index(drop=True)


def _consensus_bytes(p) -> int:
    item = 8
    return int(p["trajectories"] * p["n"] * p["d"] * item * 4 + p["trajectories"] * 200)


KINDS = {
    "consensus": Kind("consensus", CONSENSUS_PARAMS, _consensus_evaluate, _consensus_bytes, _consensus_extra,
                      _consensus_costs),
}
