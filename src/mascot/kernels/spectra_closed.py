"""Closed-form SR diagnostics for the families of the SR paper's Appendix A.1, detected exactly per graph.

:func:`detect_families` (host, numpy, O(n^2) per graph) recognises a row-stochastic P that *is* one of

=========  ==================================================  =======================================
code/name  structure of P (exact zeros, other values to 4 ulp)   eigenvalues mu of P
=========  ==================================================  =======================================
1 chain    upper shift: P[i, i+1] = 1, last row zero            0 (n times; nilpotent)
2 star     centre 0 reads its l = n - 1 leaves 1/l each,        {1, 0 x (l - 1), -1}
           every leaf reads the centre (weight 1)
3 mesh     0 on the diagonal, 1/(n-1) elsewhere                 {1, -1/(n-1) x (n-1)}
4 ring     1/2 on both cycle neighbours (n >= 4)                cos(2 pi j / n)
5 complete d on the diagonal, b > 0 elsewhere (P = (d-b) I + bJ) {d + (n-1) b, d - b x (n-1)}
=========  ==================================================  =======================================

i.e. what :mod:`mascot.graphs`' ``chain``, ``star``, ``mesh``, ``ring`` and ``complete_self`` build, after
any positive per-row scaling of A (row normalisation removes it). The zero pattern must match exactly (the
chain's Jordan structure makes its eigenvalues infinitely sensitive to a new edge); the nonzero values may
differ from the family's by 4 ulp (what a row normalisation rounds to), so the closed form is the exact
answer for P up to that rounding. Relabelled copies (a ring in another vertex order) are not recognised and
go through the eigensolvers, which are correct for every graph.

:func:`closed_form_spectra` (pure JAX, jit-compiled) then gives rho, Delta and kappa per (graph, gamma)
pair in O(1) (the chain: O(1) per bisection step):

* mesh, ring, complete: P is symmetric, so kappa = max|lambda| / min|lambda| (as in
  :func:`mascot.theory.spectra.closed_form_diagnostics`);
* star: P acts on span{e_0, 1_leaves} as [[0, 1/sqrt l], [sqrt l, 0]] and as 0 on its complement, so the
  singular values of I - gamma P are 1 (n - 2 times) and the two of
  [[1, -gamma/sqrt l], [-gamma sqrt l, 1]]: sigma_1^2 sigma_2^2 = (1 - gamma^2)^2,
  sigma_1^2 + sigma_2^2 = 2 + gamma^2 (l + 1/l), and kappa = sigma_1^2 / (1 - gamma^2);
* chain: (I - gamma N)(I - gamma N)^T is tridiagonal Toeplitz except its last diagonal entry; its
  eigenvalues are (1 - gamma)^2 + 4 gamma sin^2(theta/2) at the n roots theta of
  sin((n+1) theta) = gamma sin(n theta) in (0, pi), exactly one in each ((j-1) pi/(n+1), j pi/(n+1)).
  kappa needs the first and the last: two bisections on sign-known brackets, in JAX.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from mascot.errors import InputError

__all__ = ["FAMILIES", "FAMILY_CODES", "detect_families", "closed_form_spectra", "chain_kappa"]

FAMILIES = ("chain", "star", "mesh", "ring", "complete")
FAMILY_CODES = {name: i + 1 for i, name in enumerate(FAMILIES)}  # 0: no closed form
_TOL = 4 * np.finfo(np.float64).eps  # absolute, on entries of P (all <= 1)


def _matches(P, T):
    """Per graph of the (g, n, n) stack P: equal to the template T (broadcasting) within tol where T is
    nonzero and exactly zero where T is zero (the zero pattern decides the Jordan structure)."""
    T = np.broadcast_to(T, P.shape)
    ok = np.where(T != 0, np.abs(P - T) <= _TOL, P == 0)
    return ok.reshape(P.shape[0], -1).all(axis=1)


def _near(x, v):
    """All of x (g, k) within tol of v (scalar or (g, 1)), per graph."""
    return (np.abs(x - v) <= _TOL).all(axis=-1)


def _star_template(n):
    S = np.zeros((n, n))
    S[0, 1:] = 1.0 / (n - 1)
    S[1:, 0] = 1.0
    return S


def detect_families(P, families=FAMILIES):
    """Family code per graph of a row-stochastic stack P (G, n, n) float64, and the two eigenvalue
    parameters (mu_1, mu_2) the complete/mesh closed form needs (0 elsewhere).

    ``families``: the names to test (a hint: testing fewer is cheaper). A graph that fails every test gets
    code 0. Cost: O(n) screens per graph (the first row, first column and superdiagonal must carry the
    family's values), then one O(n^2) comparison with the family's template for the graphs that pass.
    """
    P = np.asarray(P, dtype=np.float64)
    G, n = P.shape[0], P.shape[-1]
    codes = np.zeros(G, np.int8)
    params = np.zeros((G, 2))
    unknown = set(families) - set(FAMILIES)
    if unknown:
        raise InputError(f"family must be among {FAMILIES}; got {sorted(unknown)}")
    if n < 2 or G == 0:
        return codes, params
    row0, col0 = P[:, 0, 1:], P[:, 1:, 0]
    sup = np.diagonal(P, 1, axis1=1, axis2=2)

    def test(name, cand, template):
        sel = np.flatnonzero(cand & (codes == 0))
        if sel.size:
            ok = _matches(P[sel], template())
            codes[sel[ok]] = FAMILY_CODES[name]

    if "mesh" in families or "complete" in families:
        b = P[:, 0, 1:2]
        cand = (b[:, 0] > 0) & _near(row0, b) & _near(col0, b)
        sel = np.flatnonzero(cand)
        if sel.size:
            d, bs = P[sel, 0, 0], b[sel, 0]
            T = bs[:, None, None] + (d - bs)[:, None, None] * np.eye(n)
            ok = _matches(P[sel], T)
            mesh = ok & (d == 0)
            for name, mask in (("mesh", mesh), ("complete", ok & ~mesh)):
                if name in families:
                    g = sel[mask]
                    codes[g] = FAMILY_CODES[name]
                    params[g, 0] = d[mask] + (n - 1) * bs[mask]
                    params[g, 1] = d[mask] - bs[mask]
    if "chain" in families:
        test("chain", _near(sup, 1.0), lambda: np.eye(n, k=1))
    if "star" in families:
        test("star", _near(row0, 1.0 / (n - 1)) & _near(col0, 1.0), lambda: _star_template(n))
    if "ring" in families and n >= 4:
        test(
            "ring",
            _near(sup, 0.5) & (np.abs(P[:, -1, 0] - 0.5) <= _TOL),
            lambda: 0.5 * (np.eye(n, k=1) + np.eye(n, k=-1) + np.eye(n, k=n - 1) + np.eye(n, k=1 - n)),
        )
    return codes, params


def _chain_sigma2(n, g, j, sign_left, iters):
    """(1 - g)^2 + 4 g sin^2(theta/2) at the root theta of sin((n+1) t) - g sin(n t) in
    ((j-1) pi/(n+1), j pi/(n+1)), where the function has sign ``sign_left`` just right of the left end."""
    lo = (j - 1) * jnp.pi / (n + 1)
    hi = j * jnp.pi / (n + 1)

    def body(_, lh):
        lo, hi = lh
        mid = 0.5 * (lo + hi)
        f = jnp.sin((n + 1) * mid) - g * jnp.sin(n * mid)
        right = f * sign_left > 0  # the root lies right of mid
        return jnp.where(right, mid, lo), jnp.where(right, hi, mid)

    lo, hi = jax.lax.fori_loop(0, iters, body, (lo, hi))
    t = 0.5 * (lo + hi)
    return (1 - g) ** 2 + 4 * g * jnp.sin(0.5 * t) ** 2


@partial(jax.jit, static_argnames=("iters",))
def _chain_kappa(n, g, iters):
    s2_min = _chain_sigma2(n, g, jnp.ones_like(g), jnp.ones_like(g), iters)
    s2_max = _chain_sigma2(
        n, g, n * jnp.ones_like(g), jnp.where(jnp.mod(n, 2) == 1, 1.0, -1.0) * jnp.ones_like(g), iters
    )
    return jnp.sqrt(s2_max / s2_min)


@jax.jit
def _closed(code, n, mu1, mu2, g, k_chain):
    one = jnp.ones_like(g)
    inv1m = 1.0 / (1.0 - g)  # rho of every family but the chain (whose eigenvalues of M are all 1)
    # star, l = n - 1 leaves
    l = n - 1.0
    r = jnp.sqrt(l)
    F = 2.0 + g * g * (l + 1.0 / l)
    s1 = 0.5 * (F + g * (r + 1.0 / r) * jnp.sqrt(4.0 + (g * (r - 1.0 / r)) ** 2))
    k_star = s1 / (1.0 - g * g)
    d_star = jnp.where(l >= 2, g * inv1m, 2.0 * g / (1.0 - g * g))  # second modulus 1 (l >= 2) or 1/(1+g)
    # ring: mu = cos(2 pi j / n); second modulus at j = 1, smallest at j = floor(n/2)
    c1 = jnp.cos(2 * jnp.pi / n)
    cmin = jnp.cos(2 * jnp.pi * jnp.floor(n / 2) / n)
    d_ring = g * (1.0 - c1) * inv1m / (1.0 - g * c1)
    k_ring = (1.0 - g * cmin) * inv1m
    # complete / mesh: mu1 (once) >= mu2 (n - 1 times)
    m1 = 1.0 / (1.0 - g * mu1)
    d_comp = g * (mu1 - mu2) * m1 / (1.0 - g * mu2)
    k_comp = (1.0 - g * mu2) * m1
    c = code
    is_chain = c == FAMILY_CODES["chain"]
    is_star = c == FAMILY_CODES["star"]
    is_ring = c == FAMILY_CODES["ring"]
    rho = jnp.where(is_chain, one, jnp.where(is_star | is_ring, inv1m, m1))
    delta = jnp.where(is_chain, 0.0 * g, jnp.where(is_star, d_star, jnp.where(is_ring, d_ring, d_comp)))
    kappa = jnp.where(is_chain, k_chain, jnp.where(is_star, k_star, jnp.where(is_ring, k_ring, k_comp)))
    return rho, delta, kappa


def _dtype(gamma):
    g = jnp.asarray(gamma)
    return g.dtype if jnp.issubdtype(g.dtype, jnp.floating) else jnp.result_type(float)


def chain_kappa(n, gamma):
    """kappa(I - gamma N) for the n x n upper shift N (the chain's P), elementwise in ``gamma``: pure JAX,
    two bisections of 64 (float64) or 32 (float32) steps."""
    dt = _dtype(gamma)
    return _chain_kappa(jnp.asarray(n, dt), jnp.asarray(gamma, dt), 64 if dt == jnp.float64 else 32)


def closed_form_spectra(code, n, mu1, mu2, gamma, k_chain=None):
    """rho(M), Delta(M), kappa(M) per pair from the family ``code`` (see :data:`FAMILY_CODES`), the graph
    size n and, for mesh/complete, the eigenvalues (mu1, mu2) of P; arrays of one shape (or scalars),
    computed in ``gamma``'s dtype. Pure JAX (jit-compiled). ``k_chain``: the chain rows' kappa when already
    known (:func:`chain_kappa` depends on n and gamma only; the driver computes it once per distinct gamma)."""
    dt = _dtype(gamma)
    g = jnp.asarray(gamma, dt)
    if k_chain is None:
        k_chain = chain_kappa(n, g)
    return _closed(
        jnp.asarray(code, jnp.int32),
        jnp.asarray(n, dt),
        jnp.asarray(mu1, dt),
        jnp.asarray(mu2, dt),
        g,
        jnp.asarray(k_chain, dt),
    )
