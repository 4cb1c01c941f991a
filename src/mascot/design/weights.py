"""Fastest-contraction consensus weights on a given communication graph, with a certificate of optimality.

For an undirected graph G = (V, E) the symmetric doubly stochastic matrices supported on G (and on the
self-loops) are exactly

    W(w) = I - sum_{e = {i, j} in E} w_e (e_i - e_j)(e_i - e_j)^T,   w_e >= 0,   sum_{e incident to i} w_e <= 1,

so W's rows sum to one, W = W^T, W_ij = w_e >= 0 off the diagonal and W_ii = 1 - sum_e w_e >= 0. The
contraction rate of consensus with W (the consensus paper's Def. 6; for symmetric W the largest eigenvalue
modulus on 1-perp, Remark 6) is lambda(W) = max(|lambda_2|, |lambda_n|), and minimising it over w is the
fastest-mixing problem of Boyd, Diaconis and Xiao (SIAM Review 2004), a semidefinite program (SDP).

lambda(W) is not differentiable where its extreme eigenvalue is repeated, and optima usually sit exactly there
(a symmetric lattice's second eigenvalue is repeated at the optimum). A smoothed first-order method stalls
short of such optima (the optax design this replaces was reported 0.7% above one, after about 36 s), so :func:`fastest_weights` solves the SDP with a method made for it: a primal barrier interior-point method
(Newton steps on ``t (s + kappa.w) - logdet(sI - M) - logdet(sI + M) - sum log w_e - sum_i log(1 - sum_e w_e)``
with ``M = W - 11^T/n`` on 1-perp, ``t`` raised tenfold per stage; Boyd and Vandenberghe, Convex Optimization,
ch. 11). Every stage's centred point yields a dual point and, through :func:`dual_bound`, a lower bound that no
weights on the graph beat, so every answer comes with its certified gap (objective minus bound; 1e-6 by
default). With per-edge costs the objective is ``lambda(W) + cost_weight * sum_e c_e w_e`` (still an SDP); an
edge whose weight goes to zero is an edge the agents need not read.

It is a hand-written solver beside optax on purpose, kept because it is measured better: gaps and times against
cvxpy + Clarabel are in ``results/design/README.md`` (``benchmarks/bench_design.py``). The tests check the rate
and the bound against cvxpy on paths, cycles, stars, grids and random graphs, and against closed forms.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from threadpoolctl import ThreadpoolController

from mascot.errors import InputError

__all__ = [
    "WeightsResult",
    "fastest_weights",
    "support_edges",
    "weights_matrix",
    "contraction_rate_sym",
    "metropolis_edge_weights",
    "dual_bound",
]


class WeightsResult(NamedTuple):
    W: np.ndarray  # (n, n) symmetric doubly stochastic, supported on the graph and the self-loops
    rate: float  # lambda(W): largest eigenvalue modulus on 1-perp (exact, float64)
    edges: np.ndarray  # (m, 2) the graph's undirected edges i < j
    edge_weights: np.ndarray  # (m,) W[i, j] for each edge
    objective: float  # rate + cost_weight * sum_e c_e w_e (the rate when no costs are given)
    lower_bound: float  # no weights on the graph reach below this (a dual bound of the SDP)
    gap: float  # objective - lower_bound >= 0: the certified distance from the optimum
    steps: int  # Newton steps taken
    history: np.ndarray  # exact objective of the best iterate after each barrier stage (the rate without costs)


def support_edges(adjacency) -> np.ndarray:
    """The undirected edges ``i < j`` of a graph given by any (weighted, possibly directed) adjacency:
    ``{i, j}`` is an edge when ``A[i, j] != 0`` or ``A[j, i] != 0`` (self-loops are implicit).

    Returns: an ``(m, 2)`` int array of edges ``(i, j)``, ``i < j``.
    """
    A = np.asarray(adjacency, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 2:
        raise InputError(f"adjacency must be a square (n, n) matrix with n >= 2; got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise InputError("adjacency must be finite")
    S = (A != 0) | (A.T != 0)
    i, j = np.nonzero(np.triu(S, 1))
    return np.stack([i, j], axis=1)


def weights_matrix(n: int, edges: np.ndarray, w) -> np.ndarray:
    """``W(w) = I - sum_e w_e (e_i - e_j)(e_i - e_j)^T`` (numpy, float64).

    Arguments: ``n`` agents; ``edges`` an (m, 2) array of undirected edges; ``w`` the m edge weights.

    Returns: the ``(n, n)`` matrix.
    """
    W = np.eye(n)
    w = np.asarray(w, dtype=np.float64)
    i, j = edges[:, 0], edges[:, 1]
    np.add.at(W, (i, j), w)
    np.add.at(W, (j, i), w)
    np.add.at(W, (i, i), -w)
    np.add.at(W, (j, j), -w)
    return W


def metropolis_edge_weights(n: int, edges: np.ndarray) -> np.ndarray:
    """Metropolis-Hastings weights ``w_e = 1 / (1 + max(deg_i, deg_j))``: the usual feasible default.

    Arguments: ``n`` agents; ``edges`` an (m, 2) array of undirected edges. Returns the m edge weights.
    """
    deg = np.bincount(edges.ravel(), minlength=n)
    return 1.0 / (1.0 + np.maximum(deg[edges[:, 0]], deg[edges[:, 1]]))


def contraction_rate_sym(W) -> float:
    """lambda(W) for symmetric W: the largest |eigenvalue| of ``W - 11^T/n`` (float64).

    Returns: the rate as a float.
    """
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


class _Problem(NamedTuple):
    """The SDP's data in the coordinates of 1-perp: ``Q^T W(w) Q = I - K(w)`` with ``K(w) = sum_e w_e b_e b_e^T``."""

    n: int
    edges: np.ndarray  # (m, 2)
    Bm: np.ndarray  # (n - 1, m) b_e = Q^T (e_i - e_j)
    Q: np.ndarray  # (n, n - 1) orthonormal basis of 1-perp
    inc: np.ndarray  # (n, m) incidence (1 where edge e touches node i)
    kappa: np.ndarray  # (m,) linear cost per unit weight (cost_weight * c_e)


def _problem(n: int, edges: np.ndarray, kappa: np.ndarray) -> _Problem:
    # Householder reflection taking e_n to 1/sqrt(n): its other n - 1 columns span 1-perp, orthonormally
    u = np.full(n, 1.0 / np.sqrt(n))
    u[-1] -= 1.0
    H = np.eye(n) - 2.0 * np.outer(u, u) / (u @ u)
    Q = H[:, :-1]
    m = len(edges)
    inc = np.zeros((n, m))
    inc[edges[:, 0], np.arange(m)] = 1.0
    inc[edges[:, 1], np.arange(m)] = 1.0
    D = np.zeros((n, m))
    D[edges[:, 0], np.arange(m)] = 1.0
    D[edges[:, 1], np.arange(m)] = -1.0
    return _Problem(n, edges, Q.T @ D, Q, inc, kappa)


def _barrier(P: _Problem, w: np.ndarray, s: float, t: float, *, derivatives: bool):
    """``t (s + kappa.w) - logdet(sI - M) - logdet(sI + M) - sum log w - sum_i log(1 - sum_{e at i} w_e)`` with
    ``M = I - K(w)`` on 1-perp (``inf`` outside the interior), and its gradient, Hessian in ``(w, s)`` and the
    eigendecomposition ``(kv, U)`` of ``K(w)`` they came from."""
    r = 1.0 - P.inc @ w
    if np.any(w <= 0) or np.any(r <= 0):
        return np.inf, None, None, None
    kv, U = np.linalg.eigh((P.Bm * w) @ P.Bm.T)
    a, b = s - 1.0 + kv, s + 1.0 - kv  # eigenvalues of sI - M and sI + M
    if np.any(a <= 0) or np.any(b <= 0):
        return np.inf, None, None, None
    value = t * (s + P.kappa @ w) - np.log(a).sum() - np.log(b).sum() - np.log(w).sum() - np.log(r).sum()
    if not derivatives:
        return value, None, None, None
    C = U.T @ P.Bm  # (n - 1, m)
    Ca, Cb = C / a[:, None], C / b[:, None]
    GA, GB = C.T @ Ca, C.T @ Cb  # b_e^T (sI - M)^-1 b_f and b_e^T (sI + M)^-1 b_f
    g = np.empty(len(w) + 1)
    g[:-1] = t * P.kappa - np.diag(GA) + np.diag(GB) - 1.0 / w + P.inc.T @ (1.0 / r)
    g[-1] = t - (1.0 / a).sum() - (1.0 / b).sum()
    H = np.empty((len(w) + 1, len(w) + 1))
    H[:-1, :-1] = GA * GA + GB * GB + (P.inc.T * (1.0 / r**2)) @ P.inc
    H[np.arange(len(w)), np.arange(len(w))] += 1.0 / w**2
    H[:-1, -1] = H[-1, :-1] = (Ca * Ca).sum(0) - (Cb * Cb).sum(0)
    H[-1, -1] = (1.0 / a**2).sum() + (1.0 / b**2).sum()
    return value, g, H, (kv, U)


def _max_step(P: _Problem, w, s, step, eig) -> float:
    """The largest ``alpha`` with ``(w, s) + alpha * step`` on the interior's boundary (inf when the ray stays in);
    ``eig``: the eigendecomposition ``(kv, U)`` of ``K(w)``."""
    dw, ds = step[:-1], step[-1]
    bounds = [np.inf]
    neg = dw < 0
    if neg.any():
        bounds.append(np.min(-w[neg] / dw[neg]))
    dr = -(P.inc @ dw)
    r = 1.0 - P.inc @ w
    neg = dr < 0
    if neg.any():
        bounds.append(np.min(-r[neg] / dr[neg]))
    kv, U = eig
    dK = U.T @ ((P.Bm * dw) @ P.Bm.T) @ U
    eye = np.eye(len(kv))
    for diag, dM in ((s - 1.0 + kv, dK + ds * eye), (s + 1.0 - kv, -dK + ds * eye)):
        h = 1.0 / np.sqrt(diag)
        low = np.linalg.eigvalsh(dM * h[:, None] * h[None, :])[0]
        if low < 0:
            bounds.append(-1.0 / low)
    return float(min(bounds))


_FRACTION = 0.5  # of the way to the interior's boundary at most per step (0.99 let iterates stick to it)


def _center(P: _Problem, w, s, t, *, max_steps: int = 100):
    """Damped Newton steps on the barrier at ``t`` (backtracking from at most ``_FRACTION`` of the way to the
    interior's boundary); the centred point and the steps taken."""
    import scipy.linalg

    for k in range(1, max_steps + 1):
        value, g, H, eig = _barrier(P, w, s, t, derivatives=True)
        d = np.sqrt(np.diag(H))  # (Jacobi scaling: near the boundary 1/w_e^2 spans many orders of magnitude)
        Hs, gs = H / np.outer(d, d), g / d
        try:
            step = -scipy.linalg.cho_solve(scipy.linalg.cho_factor(Hs), gs) / d
        except np.linalg.LinAlgError:
            step = -np.linalg.lstsq(Hs, gs, rcond=None)[0] / d
        decrement = float(-g @ step)
        if decrement / 2 <= 1e-9:
            return w, s, k
        alpha = min(1.0, _FRACTION * _max_step(P, w, s, step, eig))
        while True:
            w1, s1 = w + alpha * step[:-1], s + alpha * step[-1]
            v1 = _barrier(P, w1, s1, t, derivatives=False)[0]
            if v1 <= value - 0.25 * alpha * decrement:
                break
            alpha *= 0.5
            if alpha < 1e-12:  # no progress at machine precision: as centred as it gets
                return w, s, k
        w, s = w1, s1
    return w, s, max_steps


def dual_bound(P: _Problem, Y: np.ndarray) -> float:
    """A lower bound on ``min_w lambda(W(w)) + kappa.w`` from any nonzero symmetric ``Y`` (n x n) with ``Y 1 = 0``.

    For ``Y`` scaled to nuclear norm <= 1, ``lambda(W) = ||W - 11^T/n||_2 >= tr(Y W)`` for every symmetric W, and
    for doubly stochastic W supported on the graph and ``z`` with ``z_i + z_j <= 2 Y_ij + kappa_e`` on every edge
    and ``z_i <= Y_ii``, ``tr(Y W) + kappa.w >= sum_i z_i`` (Boyd, Diaconis and Xiao's dual). The best such ``z``
    is a small linear program (HiGHS), solved for ``Y`` scaled to nuclear norm 1 and, when its norm is below 1,
    as given; each answer is lowered until it is exactly feasible, so the bound holds whatever the solver's
    tolerance.

    Arguments: ``P`` the design problem (graph, edge costs kappa); ``Y`` the dual candidate (e.g. the outer
    product of the slowest eigenvectors). Returns the bound (float).
    """
    from scipy.optimize import linprog

    n, E = P.n, P.edges
    Y = (Y + Y.T) / 2
    nuclear = float(np.abs(np.linalg.eigvalsh(Y)).sum())
    m = len(E)
    A = np.zeros((m + n, n))
    A[np.arange(m), E[:, 0]] = 1.0
    A[np.arange(m), E[:, 1]] = 1.0
    A[m + np.arange(n), np.arange(n)] = 1.0
    opts = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}
    best = -np.inf
    for scale in {1.0 / nuclear, min(1.0, 1.0 / nuclear)} if nuclear > 0 else ():
        Ys = Y * scale
        rhs = np.concatenate([2 * Ys[E[:, 0], E[:, 1]] + P.kappa, np.diag(Ys)])
        sol = linprog(-np.ones(n), A_ub=A, b_ub=rhs, bounds=[(None, None)] * n, method="highs", options=opts)
        # (always solvable: z = min(diag Y, min_e Y_e + kappa_e / 2) 1 is feasible and the sum is bounded)
        z = sol.x if sol.status == 0 else np.full(n, min(np.diag(Ys).min(), (rhs[:m] / 2).min()))
        # exactly feasible z (lowering z never breaks a constraint): the bound holds whatever the tolerance
        z = np.minimum(z, np.diag(Ys))
        for e in range(m):
            excess = z[E[e, 0]] + z[E[e, 1]] - rhs[e]
            if excess > 0:
                z[E[e, 0]] -= excess / 2
                z[E[e, 1]] -= excess / 2
        best = max(best, float(z.sum()) - 1e-12 * max(1.0, float(np.abs(z).sum())))  # (minus the sum's rounding)
    return best


def fastest_weights(
    adjacency, *, costs=None, cost_weight: float = 0.0, gap_tol: float = 1e-6, on_stage=None
) -> WeightsResult:
    """Symmetric doubly stochastic weights on ``adjacency``'s graph with the smallest contraction rate, with a
    certificate of optimality.

    The problem is the semidefinite program of Boyd, Diaconis and Xiao: minimise ``s`` over ``(w, s)`` with
    ``-sI <= W(w) - 11^T/n <= sI``, ``w >= 0`` and every node's incident weights summing to at most 1 (plus
    ``cost_weight * sum_e c_e w_e`` with costs). ``lambda(W)`` is not smooth where the extreme eigenvalue is
    repeated, which is where optima usually are, so it is solved by a method made for that: a primal barrier
    interior-point method (Newton steps on the log-determinant barrier, ``t`` raised tenfold per stage, Boyd and
    Vandenberghe's Convex Optimization, 11.3). Every iterate is strictly feasible. Each stage's centred point
    gives a dual point, and from it (:func:`dual_bound`) a lower bound that no weights on the graph can beat;
    ``gap = objective - lower_bound`` is the certified distance from the optimum.

    Args:
      adjacency: (n, n) adjacency; its nonzero pattern, symmetrised, is the support (see :func:`support_edges`).
      costs: per-edge token costs, an (n, n) matrix (``costs[i, j]`` for edge {i, j}; symmetrised by the
        maximum) or None; with ``cost_weight > 0`` the objective is ``lambda(W) + cost_weight * sum_e c_e w_e``.
      gap_tol: stop once the certified gap is below this (absolute; default 1e-6).
      on_stage: optional ``callback(stage, objective, lower_bound)`` after each barrier stage (for progress).
    Returns :class:`WeightsResult`: the weights, their exact rate and objective, the certified ``lower_bound``
    and ``gap``, the Newton steps taken and the objective after each stage. Weights below 1e-9 of the largest
    are set to zero when that does not raise the objective (an edge the agents need not read); with costs,
    ``W = I`` (no messages, objective exactly 1) is returned when nothing beats it.
    Raises :class:`~mascot.errors.InputError` (a ``ValueError``) for a disconnected graph (``lambda = 1`` for
    every W) and for bad arguments.
    """
    edges = support_edges(adjacency)
    n = np.asarray(adjacency).shape[0]
    if len(edges) == 0 or _components(n, edges) > 1:
        raise InputError(
            "the graph is disconnected: every doubly stochastic W on it has lambda(W) = 1 "
            "(no consensus across components); connect it first"
        )
    if not (cost_weight >= 0 and np.isfinite(cost_weight)):
        raise InputError(f"cost_weight must be a finite number >= 0; got {cost_weight!r}")
    if not (gap_tol > 0 and np.isfinite(gap_tol)):
        raise InputError(f"gap_tol must be a finite number > 0; got {gap_tol!r}")
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
    kappa = cost_weight * c
    P = _problem(n, edges, kappa)

    def exact(w):
        return contraction_rate_sym(weights_matrix(n, edges, w)) + float(kappa @ w)

    # a strictly feasible start: Metropolis-Hastings weights scaled into the interior, s above ||W - 11^T/n||
    w = 0.9 * metropolis_edge_weights(n, edges)
    s = contraction_rate_sym(weights_matrix(n, edges, w)) + 0.5
    nu = 2 * (n - 1) + len(edges) + n  # the barrier's degree: the gap on the central path is nu / t
    t, steps, history = float(nu), 0, []
    best_w, best, bound = w, exact(w), -np.inf
    if cost_weight > 0 and exact(np.zeros(len(edges))) <= best:  # W = I: no messages, objective exactly 1
        best_w, best = np.zeros(len(edges)), exact(np.zeros(len(edges)))
    # one BLAS thread: OpenBLAS's threads gain little on these matrices and collapse when another process holds a
    # core (a 64-node graph took 26 s instead of 1.4 s beside one busy process; a 300-node grid 26 s against 16 s).
    # scipy's own OpenBLAS is loaded first, so that the limit reaches it
    import scipy.linalg  # noqa: F401
    import scipy.optimize  # noqa: F401

    with ThreadpoolController().limit(limits=1, user_api="blas"):
        for stage in range(1, 61):
            w, s, k = _center(P, w, s, t)
            steps += k
            for cand in (w, np.where(w < 1e-9 * w.max(), 0.0, w)):
                val = exact(cand)
                if val <= best:
                    best, best_w = val, cand
            # the centred point's dual: (1/t)(sI - M)^-1 - (1/t)(sI + M)^-1 on 1-perp, lifted to n x n
            kv, U = np.linalg.eigh((P.Bm * w) @ P.Bm.T)
            V = P.Q @ U
            Y = (V * ((1.0 / (s - 1.0 + kv) - 1.0 / (s + 1.0 - kv)) / t)) @ V.T
            bound = max(bound, dual_bound(P, Y))
            history.append(best)
            if on_stage is not None:
                on_stage(stage, best, bound)
            if best - bound <= gap_tol or nu / t < 1e-3 * gap_tol:  # (past that the bound only loses precision)
                break
            t *= 10.0
    W = weights_matrix(n, edges, best_w)
    return WeightsResult(
        W=W,
        rate=contraction_rate_sym(W),
        edges=edges,
        edge_weights=np.asarray(best_w),
        objective=best,
        lower_bound=max(bound, 0.0),  # (the objective is never negative)
        gap=best - max(bound, 0.0),
        steps=steps,
        history=np.asarray(history),
    )
