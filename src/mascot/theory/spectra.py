"""Successor-representation (SR) spectra in float64 numpy: the reference the JAX kernels are tested against.

Source: "Predictive Maps of Multi-Agent Reasoning" (the SR paper). For a row-stochastic communication
operator P and discount gamma in [0, 1), the successor representation is (eq. 1)

    M = (I - gamma P)^-1 = sum_k gamma^k P^k,

summarised by the spectral radius rho(M) = max |lambda_i|, the spectral gap Delta(M) = |lambda_1| - |lambda_2|
(eigenvalues sorted by modulus) and the 2-norm condition number kappa(M) = sigma_max / sigma_min (Sec. 3.2).

:func:`sr_diagnostics` is deliberately the slow, direct route (form M, take ``eigvals(M)`` and ``svd(M)``)
so that it shares no shortcut with the kernels (eigenvalues of M from those of P, kappa from the singular
values of I - gamma P). The closed forms of Appendix A.1 (and their generalisation to any n) are here too,
with the malicious-leaf bound of A.6 and influence capping.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mascot.errors import InputError, refuse_traced

__all__ = [
    "SRDiagnostics",
    "check_gamma",
    "check_stochastic",
    "successor_representation",
    "sr_diagnostics",
    "diagnostics_from_eigenvalues",
    "closed_form_eigenvalues",
    "closed_form_diagnostics",
    "malicious_leaf_mu2",
    "malicious_leaf_bound",
    "cap_influence",
    "time_varying_sr",
]


class SRDiagnostics(NamedTuple):
    rho: float
    delta: float
    kappa: float


def check_gamma(gamma) -> np.ndarray:
    """gamma must be finite and in [0, 1) (eq. 1 converges only there); returns it as a float64 array."""
    refuse_traced(gamma=gamma)
    if np.asarray(gamma).dtype.kind not in "iuf":  # ("0.5" was taken as 0.5, True as 1: an outside tester)
        raise InputError(f"gamma must be a number (or an array of numbers) in [0, 1); got {gamma!r:.60}")
    g = np.asarray(gamma, dtype=np.float64)
    if not np.all(np.isfinite(g)) or np.any(g < 0.0) or np.any(g >= 1.0):
        bad = g[~(np.isfinite(g) & (g >= 0.0) & (g < 1.0))].ravel()[:3]
        raise InputError(f"gamma must be in [0, 1); got {bad.tolist()}")
    return g


def check_stochastic(P, name: str = "P", tol: float = 1e-9) -> np.ndarray:
    """P must be square, finite, nonnegative, with every row summing to 1 or 0 (a sink agent).

    Arguments: ``P`` the matrix to check; ``name`` how error messages call it; ``tol`` the absolute tolerance on
    the row sums. Returns ``P`` as a float64 array; raises ``InputError`` otherwise.
    """
    refuse_traced(P=P)
    P = np.asarray(P, dtype=np.float64)
    if P.ndim < 2 or P.shape[-1] != P.shape[-2]:
        raise InputError(f"{name} must be square (..., n, n); got shape {P.shape}")
    if not np.all(np.isfinite(P)):
        raise InputError(f"{name} has NaN or infinite entries")
    if np.any(P < -tol):
        raise InputError(f"{name} has negative entries (min {P.min():.3g})")
    s = P.sum(axis=-1)
    ok = (np.abs(s - 1.0) <= tol * P.shape[-1]) | (np.abs(s) <= tol)
    if not np.all(ok):
        raise InputError(
            f"{name} must be row-stochastic (rows sum to 1, or 0 for a sink agent); "
            f"worst row sum {s[~ok].ravel()[0]:.6g}. Use mascot.graphs.row_normalize on an adjacency."
        )
    return P


def successor_representation(P, gamma: float) -> np.ndarray:
    """M = (I - gamma P)^-1 (eq. 1), by a dense solve.

    Returns: M as an ``(n, n)`` float64 array.
    """
    P = check_stochastic(P)
    g = float(check_gamma(gamma))
    n = P.shape[-1]
    return np.linalg.solve(np.eye(n) - g * P, np.broadcast_to(np.eye(n), P.shape))


def diagnostics_from_eigenvalues(lam) -> tuple[float, float]:
    """(rho, Delta) from the eigenvalues of M: largest modulus and the gap to the second (0 if n = 1).

    Arguments: ``lam`` the eigenvalues of M (real or complex, any order).

    Returns: ``(rho, Delta)`` as floats.
    """
    mod = np.sort(np.abs(np.asarray(lam)))[::-1]
    return float(mod[0]), float(mod[0] - mod[1]) if mod.size > 1 else 0.0


def sr_diagnostics(P, gamma: float) -> SRDiagnostics:
    """rho(M), Delta(M), kappa(M) for one P, computed directly from M (the independent reference).

    Arguments: ``P`` a row-stochastic (n, n) matrix; ``gamma`` the discount in [0, 1). Returns
    :class:`SRDiagnostics` (rho, delta, kappa).
    """
    M = successor_representation(P, gamma)
    rho, delta = diagnostics_from_eigenvalues(np.linalg.eigvals(M))
    s = np.linalg.svd(M, compute_uv=False)
    return SRDiagnostics(rho, delta, float(s[0] / s[-1]))


_MIN_N = {"chain": 1, "star": 2, "mesh": 2, "ring": 3, "complete": 2}  # as mascot.graphs builds them


def closed_form_eigenvalues(topology: str, n: int, gamma: float, a: float | None = None) -> np.ndarray:
    """Eigenvalues of M for the families of the SR paper's Appendix A.1, generalised to any size.

    ``chain`` (n agents): P nilpotent, every eigenvalue of M is 1.
    ``star`` (n agents, n - 1 leaves): P has {1, 0 x (n-2), -1}, so M has {1/(1-g), 1 x (n-2), 1/(1+g)}.
    ``mesh`` (n agents): P has {1, -1/(n-1) x (n-1)}.
    ``ring`` (n agents, undirected): P has cos(2 pi j / n).
    ``complete`` (n agents, self-weight a): P has {1, a - (1-a)/(n-1) x (n-1)}.

    Arguments: ``topology`` one of chain, star, mesh, ring, complete; ``n`` the number of agents; ``gamma`` the
    discount in [0, 1); ``a`` the complete graph's self-weight (complete only). Returns the n eigenvalues of M.
    """
    g = float(check_gamma(gamma))
    if topology not in _MIN_N:
        raise InputError(f"no closed form for topology {topology!r}; one of {', '.join(_MIN_N)}")
    # the sizes and self-weights the graph builders take (mesh at n = 1 divided by zero; complete with a = 2 gave
    # rho = 6 > 1/(1 - gamma): an outside tester)
    from mascot.graphs import check_n

    n = check_n(n, _MIN_N[topology])
    if a is not None:
        if topology != "complete":  # (silently ignored: a later tester)
            raise InputError(f"a (a self-weight) applies to topology 'complete' only, not {topology!r}")
        if isinstance(a, bool) or np.ndim(a) or np.asarray(a).dtype.kind not in "iuf" or not 0 <= float(a) <= 1:
            raise InputError(f"a (the complete graph's self-weight) must be a number in [0, 1]; got {a!r}")
        a = float(a)
    if topology == "chain":
        mu = np.zeros(n)
    elif topology == "star":
        mu = np.concatenate([[1.0], np.zeros(n - 2), [-1.0]])
    elif topology == "mesh":
        mu = np.concatenate([[1.0], np.full(n - 1, -1.0 / (n - 1))])
    elif topology == "ring":
        mu = np.cos(2 * np.pi * np.arange(n) / n)
    else:  # complete
        if a is None:
            raise InputError("complete needs the self-weight a")
        mu = np.concatenate([[1.0], np.full(n - 1, a - (1 - a) / (n - 1))])
    return 1.0 / (1.0 - g * mu)


def closed_form_diagnostics(topology: str, n: int, gamma: float, a: float | None = None) -> SRDiagnostics:
    """rho and Delta from :func:`closed_form_eigenvalues`; kappa in closed form where P is symmetric
    (mesh, ring, complete: kappa = max|lambda| / min|lambda|) and for the chain and star from the
    singular values of I - gamma P (their P is not normal, so no eigenvalue formula holds).

    Arguments: ``topology`` one of chain, star, mesh, ring, complete; ``n`` the number of agents; ``gamma`` the
    discount in [0, 1); ``a`` the complete graph's self-weight (complete only).

    Returns: a :class:`SRDiagnostics` (rho, delta, kappa).
    """
    lam = closed_form_eigenvalues(topology, n, gamma, a)
    rho, delta = diagnostics_from_eigenvalues(lam)
    if topology in ("mesh", "ring", "complete"):
        kappa = float(np.abs(lam).max() / np.abs(lam).min())
    else:
        from mascot.graphs import chain, row_normalize, star

        P = row_normalize(chain(n) if topology == "chain" else star(n))
        s = np.linalg.svd(np.eye(P.shape[0]) - float(gamma) * P, compute_uv=False)
        kappa = float(s[0] / s[-1])
    return SRDiagnostics(rho, delta, kappa)


def malicious_leaf_mu2(alpha, leaves):
    """SR paper A.6: mu^2 = (alpha^2 + l - 1)/(alpha + l - 1)^2 - 1/l, the leaf weights' deviation from
    uniform (0 at alpha = 1, -> 1 - 1/l as alpha -> infinity).

    Arguments: ``alpha`` the malicious leaf's weight relative to the others; ``leaves`` the leaf count l.
    """
    refuse_traced(alpha=alpha, leaves=leaves)
    alpha = np.asarray(alpha, dtype=np.float64)
    l = np.asarray(leaves, dtype=np.float64)
    return (alpha**2 + l - 1) / (alpha + l - 1) ** 2 - 1.0 / l


def malicious_leaf_bound(gamma, leaves, mu2=None):
    """SR paper eq. 8: kappa(M) <= [3 + g^2 (l + 1/l + mu^2)]^{3/2} / (1 - g^2).

    ``mu2=None`` takes the worst case mu^2 = 1 - 1/l (98.5 at gamma = 0.9, l = 4).

    Arguments: ``gamma`` the discount; ``leaves`` the star's leaf count l; ``mu2`` the leaf weights' deviation
    mu^2 (:func:`malicious_leaf_mu2`).

    Returns: the bound (float, or an array for array input).
    """
    refuse_traced(gamma=gamma, leaves=leaves, mu2=mu2)
    g = check_gamma(gamma)
    l = np.asarray(leaves, dtype=np.float64)
    if mu2 is None:
        mu2 = 1.0 - 1.0 / l
    return (3.0 + g**2 * (l + 1.0 / l + np.asarray(mu2))) ** 1.5 / (1.0 - g**2)


def cap_influence(P, max_share: float) -> np.ndarray:
    """Cap every agent's share of each row at ``max_share`` (SR paper A.6's influence capping).

    Water-filling per row: entries above the cap are set to it and the excess is handed to the entries
    below it in proportion to their weight, repeated until no entry exceeds the cap; zero entries stay
    zero (capping never adds edges). With ``max_share = 1/l`` the star's judge row becomes uniform over its
    l leaves, which is A.6's ``w <= W/l`` making mu = 0. A row with fewer than ``1/max_share`` inputs
    cannot meet the cap and still sum to 1; it is made uniform over its inputs (its cap is 1/deg).

    Arguments: ``P`` a row-stochastic (n, n) matrix; ``max_share`` the cap on any entry of a row, in (0, 1].
    Returns the capped matrix (a copy).
    """
    refuse_traced(P=P, max_share=max_share)
    P = check_stochastic(P).copy()
    if not 0.0 < max_share <= 1.0:
        raise InputError(f"max_share must be in (0, 1]; got {max_share!r}")
    rows = P.reshape(-1, P.shape[-1])
    for r in rows:
        total = r.sum()
        if total == 0.0:
            continue
        support = r > 0
        cap = max(max_share, 1.0 / support.sum())
        for _ in range(r.size + 1):
            over = r > cap + 1e-15
            if not over.any():
                break
            excess = (r[over] - cap).sum()
            r[over] = cap
            free = support & (r < cap - 1e-15)
            r[free] += excess * r[free] / r[free].sum()
    return rows.reshape(P.shape)


def time_varying_sr(P_seq, gamma: float) -> np.ndarray:
    """SR paper A.5: the backward recursion M(t) = I + gamma P(t) M(t+1), with M(H) = I after the horizon.

    ``P_seq`` is (H, n, n); returns M(0..H-1) as (H, n, n). For a constant P, M(t) is the truncated series
    sum_{k=0}^{H-t} gamma^k P^k, which tends to (I - gamma P)^-1 as the horizon grows.
    """
    refuse_traced(P_seq=P_seq, gamma=gamma)
    P_seq = check_stochastic(P_seq, "P_seq")
    g = float(check_gamma(gamma))
    H, n = P_seq.shape[0], P_seq.shape[-1]
    out = np.empty_like(P_seq)
    M = np.eye(n)
    for t in range(H - 1, -1, -1):
        M = np.eye(n) + g * P_seq[t] @ M
        out[t] = M
    return out
