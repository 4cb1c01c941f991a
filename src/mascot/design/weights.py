"""Fastest-contraction consensus weights on a given communication graph, fitted with optax.

For an undirected graph G = (V, E) the symmetric doubly stochastic matrices supported on G (and on the
self-loops) are exactly

    W(w) = I - sum_{e = {i, j} in E} w_e (e_i - e_j)(e_i - e_j)^T,   w_e >= 0,   sum_{e incident to i} w_e <= 1,

so W's rows sum to one, W = W^T, W_ij = w_e >= 0 off the diagonal and W_ii = 1 - sum_e w_e >= 0. The
contraction rate of consensus with W (the consensus paper's Def. 6; for symmetric W the largest eigenvalue
modulus on 1-perp, Remark 6) is lambda(W) = max(|lambda_2|, |lambda_n|), and minimising it over w is the
fastest-mixing problem of Boyd, Diaconis and Xiao (SIAM Review 2004), a semidefinite program.

Here it is solved by first-order optimisation on a smooth, exactly feasible parameterisation (no projection,
no hand-written optimiser):

* ``x_e = softplus(theta_e) > 0`` and ``w_e = x_e / m_e`` with ``m_e = smoothmax_tau(S_i, S_j, 1)``, where
  ``S_i = sum_{e incident to i} x_e`` and ``smoothmax_tau(a) = tau log sum exp(a / tau) >= max(a)``. Dividing by
  at least ``max(S_i, S_j, 1)`` keeps every row sum ``<= sum_e x_e / S_i <= 1``: each iterate is feasible;
  every feasible point is (nearly) reachable as ``tau -> 0``.
* the objective ``f_beta(w) = (1/beta) log sum_k (exp(beta mu_k) + exp(-beta mu_k))`` over the eigenvalues
  ``mu_k`` of ``W - 11^T/n`` (``>= lambda(W)``, within ``log(2n)/beta`` of it), with ``beta`` raised stage by
  stage; optionally plus ``cost_weight * sum_e c_e w_e``, the l1 relaxation of per-edge token costs (an
  edge whose weight is driven to zero is an edge the agents need not read).
* optax's Adam on ``theta``; the best iterate by the *exact* rate (float64 ``eigvalsh``) is returned.

:func:`fastest_weights` returns a :class:`WeightsResult` with ``W``, its exact ``rate`` and the per-edge
weights. The tests check the rate against the SDP optimum (cvxpy) on paths, cycles, stars, grids and
random graphs, and against the closed forms for complete graphs and cycles.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from mascot.errors import InputError

__all__ = [
    "WeightsResult",
    "fastest_weights",
    "support_edges",
    "weights_matrix",
    "contraction_rate_sym",
    "metropolis_edge_weights",
]


class WeightsResult(NamedTuple):
    W: np.ndarray  # (n, n) symmetric doubly stochastic, supported on the graph and the self-loops
    rate: float  # lambda(W): largest eigenvalue modulus on 1-perp (exact, float64)
    edges: np.ndarray  # (m, 2) the graph's undirected edges i < j
    edge_weights: np.ndarray  # (m,) W[i, j] for each edge
    objective: float  # rate + cost_weight * sum_e c_e w_e (the rate when no costs are given)
    steps: int  # optimiser steps taken
    history: np.ndarray  # exact objective of the best iterate after each stage (the rate when cost_weight = 0)


def support_edges(adjacency) -> np.ndarray:
    """The undirected edges ``i < j`` of a graph given by any (weighted, possibly directed) adjacency:
    ``{i, j}`` is an edge when ``A[i, j] != 0`` or ``A[j, i] != 0`` (self-loops are implicit)."""
    A = np.asarray(adjacency, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 2:
        raise InputError(f"adjacency must be a square (n, n) matrix with n >= 2; got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise InputError("adjacency must be finite")
    S = (A != 0) | (A.T != 0)
    i, j = np.nonzero(np.triu(S, 1))
    return np.stack([i, j], axis=1)


def weights_matrix(n: int, edges: np.ndarray, w) -> np.ndarray:
    """``W(w) = I - sum_e w_e (e_i - e_j)(e_i - e_j)^T`` (numpy, float64)."""
    W = np.eye(n)
    w = np.asarray(w, dtype=np.float64)
    i, j = edges[:, 0], edges[:, 1]
    np.add.at(W, (i, j), w)
    np.add.at(W, (j, i), w)
    np.add.at(W, (i, i), -w)
    np.add.at(W, (j, j), -w)
    return W


def metropolis_edge_weights(n: int, edges: np.ndarray) -> np.ndarray:
    """Metropolis-Hastings weights ``w_e = 1 / (1 + max(deg_i, deg_j))``: the usual feasible default."""
    deg = np.bincount(edges.ravel(), minlength=n)
    return 1.0 / (1.0 + np.maximum(deg[edges[:, 0]], deg[edges[:, 1]]))


def contraction_rate_sym(W) -> float:
    """lambda(W) for symmetric W: the largest |eigenvalue| of ``W - 11^T/n`` (float64)."""
    W = np.asarray(W, dtype=np.float64)
    n = W.shape[0]
    return float(np.max(np.abs(np.linalg.eigvalsh(W - np.full((n, n), 1.0 / n)))))


def _components(n: int, edges: np.ndarray) -> int:
    parent = list(range(n))

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for a, b in edges:
        parent[find(int(a))] = find(int(b))
    return len({find(a) for a in range(n)})


def fastest_weights(
    adjacency,
    *,
    costs=None,
    cost_weight: float = 0.0,
    betas=(30.0, 100.0, 300.0, 1000.0, 3000.0),
    taus=(0.05, 0.02, 0.01, 0.003, 0.001),
    steps_per_stage: int = 400,
    learning_rate: float = 0.05,
    seed: int = 0,
) -> WeightsResult:
    """Symmetric doubly stochastic weights on ``adjacency``'s graph with the smallest contraction rate.

    Args:
      adjacency: (n, n) adjacency; its nonzero pattern, symmetrised, is the support (see :func:`support_edges`).
      costs: per-edge token costs, an (n, n) matrix (``costs[i, j]`` for edge {i, j}; symmetrised by the
        maximum) or None; with ``cost_weight > 0`` the objective is ``lambda(W) + cost_weight * sum_e c_e w_e``.
      betas, taus: the smoothing schedule (one optimisation stage per pair; larger beta and smaller tau
        approach the exact objective and the whole feasible set).
      steps_per_stage, learning_rate, seed: Adam steps per stage, its step size, the initial-point seed.
    Returns :class:`WeightsResult` (the best iterate by the exact objective; feasible at every iterate). With costs,
    W = I (no messages, lambda = 1, objective 1) is a candidate: a cost weight that high makes talking not pay.
    Raises ``ValueError`` for a disconnected graph (no W contracts it: lambda = 1 for every W).
    """
    import jax
    import jax.numpy as jnp
    import optax

    from mascot.kernels.precision import float64

    edges = support_edges(adjacency)
    n = np.asarray(adjacency).shape[0]
    if len(edges) == 0 or _components(n, edges) > 1:
        raise InputError(
            "the graph is disconnected: every doubly stochastic W on it has lambda(W) = 1 "
            "(no consensus across components); connect it first"
        )
    if len(betas) != len(taus) or not betas:
        raise InputError("betas and taus must be non-empty and of equal length (one stage per pair)")
    if not (cost_weight >= 0 and np.isfinite(cost_weight)):
        raise InputError(f"cost_weight must be a finite number >= 0; got {cost_weight!r}")
    if costs is None:
        c = np.zeros(len(edges))
        if cost_weight:
            raise InputError("cost_weight > 0 needs costs")
    else:
        C = np.asarray(costs, dtype=np.float64)
        if C.shape != (n, n) or not np.all(np.isfinite(C)) or np.any(C < 0):
            raise InputError(f"costs must be a finite, non-negative ({n}, {n}) matrix; got shape {C.shape}")
        C = np.maximum(C, C.T)
        c = C[edges[:, 0], edges[:, 1]]
    if int(steps_per_stage) < 1:
        raise InputError(f"steps_per_stage must be >= 1; got {steps_per_stage!r}")

    def exact(w):
        return contraction_rate_sym(weights_matrix(n, edges, w)) + cost_weight * float(c @ w)

    with float64():
        ei, ej = jnp.asarray(edges[:, 0]), jnp.asarray(edges[:, 1])
        inc = np.zeros((n, len(edges)))
        inc[edges[:, 0], np.arange(len(edges))] = 1.0
        inc[edges[:, 1], np.arange(len(edges))] = 1.0
        inc = jnp.asarray(inc)
        cj = jnp.asarray(c)
        centre = jnp.full((n, n), 1.0 / n)

        def weights(theta, tau):
            x = jax.nn.softplus(theta)
            S = inc @ x  # (n,) incident sums
            stack = jnp.stack([S[ei], S[ej], jnp.ones_like(x)])  # (3, m)
            m = tau * jax.nn.logsumexp(stack / tau, axis=0)  # >= max(S_i, S_j, 1)
            return x / m

        def loss(theta, beta, tau):
            w = weights(theta, tau)
            W = jnp.eye(n).at[ei, ej].add(w).at[ej, ei].add(w).at[ei, ei].add(-w).at[ej, ej].add(-w)
            mu = jnp.linalg.eigvalsh(W - centre)
            f = jax.nn.logsumexp(jnp.concatenate([beta * mu, -beta * mu])) / beta
            return f + cost_weight * (cj @ w)

        # start from the Metropolis-Hastings weights w_e = 1 / (1 + max(deg_i, deg_j)), a good feasible point
        w0 = metropolis_edge_weights(n, edges)
        rng = np.random.default_rng(seed)
        x0 = w0 * (1.0 + 0.01 * rng.standard_normal(len(edges)))
        theta = jnp.asarray(np.log(np.expm1(np.maximum(x0, 1e-6))))  # softplus^-1

        best_w, best = w0, exact(w0)
        if cost_weight > 0:  # no communication (W = I, objective exactly 1) is feasible too, and can be the best
            none = np.zeros(len(edges))
            if exact(none) < best:
                best_w, best = none, exact(none)
        history, steps = [], 0
        opt = optax.adam(learning_rate)

        @functools.partial(jax.jit, static_argnums=4)
        def run(theta, state, beta, tau, length):
            """``length`` Adam steps of one stage (``beta``, ``tau`` arguments: one program for every stage),
            and the weights at the last iterate."""

            def body(carry, _):
                theta, state = carry
                g = jax.grad(loss)(theta, beta, tau)
                upd, state = opt.update(g, state, theta)
                return (optax.apply_updates(theta, upd), state), None

            (theta, state), _ = jax.lax.scan(body, (theta, state), None, length=length)
            return theta, state, weights(theta, tau)

        for beta, tau in zip(betas, taus):
            state = opt.init(theta)
            beta_j, tau_j = jnp.float64(beta), jnp.float64(tau)
            for k in range(0, int(steps_per_stage), 20):  # the exact objective every 20 steps and at the end
                length = min(20, int(steps_per_stage) - k)
                theta, state, w = run(theta, state, beta_j, tau_j, length)
                steps += length
                w = np.asarray(w)
                val = exact(w)
                if val < best:
                    best, best_w = val, w
            history.append(best)
    W = weights_matrix(n, edges, best_w)
    return WeightsResult(
        W=W,
        rate=contraction_rate_sym(W),
        edges=edges,
        edge_weights=np.asarray(best_w),
        objective=best,
        steps=steps,
        history=np.asarray(history),
    )
