"""Eigenvalue-only batched solvers in pure JAX, shaped for accelerators (issue 34, item 4).

XLA's GPU ``eigh``/``svd`` run a batch of matrices larger than 32 x 32 one matrix at a time (cuSOLVER's
batched Jacobi solvers stop at 32), and compute vectors the SR diagnostics never read. The diagnostics need
three eigenvalues of the symmetric S = D^-1/2 A D^-1/2 (the largest two and the smallest: rho, Delta and
kappa of a normal P) or two singular values of I - gamma P (kappa of a non-normal P). These solvers get exactly
those, for a whole batch at once, from dense batched operations:

1. **reduce** each matrix to a tridiagonal one with the same eigenvalues: Householder reflections, one column
   per step (:func:`tridiagonalize`; backward stable, as LAPACK's ``sytrd``), or for singular values to an upper
   bidiagonal one (Golub-Kahan, :func:`bidiagonalize`, as ``gebrd``), whose singular values are the positive
   eigenvalues of the 2n x 2n tridiagonal with zero diagonal and off-diagonal (d0, e0, d1, e1, ..., d_{n-1});
2. **select** the wanted eigenvalues of the tridiagonal by multisection on Sturm counts
   (:func:`tridiagonal_eigenvalues`; the method of LAPACK's ``stebz``): the number of negative pivots of
   T - x I is the number of eigenvalues below x, so every wanted eigenvalue is found by splitting its bracket
   into ``points + 1`` parts per pass, to the dtype's last bit.

Each reduction step is a batched matrix-vector product and a rank-two update of the whole stack (no per-matrix
launches), and the Sturm passes are elementwise over (matrix, wanted eigenvalue, point). The accuracy is
LAPACK's: each eigenvalue within a few eps * ||S|| of the exact one (tests/test_spectra_batched.py checks
against numpy float64). Everything is traceable (``jax.jit``, ``jax.vmap`` over the leading axis is implicit:
every function takes a stack ``(..., n, n)``).
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp

__all__ = [
    "bidiagonalize",
    "extreme_singular_values",
    "sym_extreme_eigenvalues",
    "tridiagonal_eigenvalues",
    "tridiagonalize",
]

POINTS = 63  # Sturm points per multisection pass: 6 bits of every wanted eigenvalue per pass
# full-precision products: XLA's default on GPUs multiplies float32 in TF32 (a 10-bit mantissa)
_HIGHEST = jax.lax.Precision.HIGHEST


def _reflector(x, mask, pivot):
    """Householder vector v and scale beta with (I - beta v v^T) x = alpha e_pivot on the masked entries of x
    (..., n); beta = 0 (identity) where those entries are already zero."""
    x = jnp.where(mask, x, 0.0)
    x0 = jnp.take(x, pivot, axis=-1)
    sigma = jnp.sqrt(jnp.sum(x * x, -1))
    alpha = -jnp.where(x0 >= 0, 1.0, -1.0).astype(x.dtype) * sigma
    e = jnp.arange(x.shape[-1]) == pivot
    v = x - jnp.where(e, alpha[..., None], 0.0)
    vtv = jnp.sum(v * v, -1)
    beta = jnp.where(vtv > 0, 2.0 / jnp.where(vtv > 0, vtv, 1.0), 0.0)
    return v, beta


@jax.jit
def tridiagonalize(S):
    """Diagonal ``(..., n)`` and off-diagonal ``(..., n - 1)`` of a tridiagonal matrix orthogonally similar to
    the symmetric ``S`` ``(..., n, n)`` (only the values are used: S is read as 0.5 (S + S^T)).

    Returns: ``(diag, off)``.
    """
    S = 0.5 * (S + jnp.swapaxes(S, -1, -2))
    n = S.shape[-1]
    idx = jnp.arange(n)

    def step(k, S):
        x = jax.lax.dynamic_index_in_dim(S, k, axis=-1, keepdims=False)  # column k (= row k)
        v, beta = _reflector(x, idx > k, k + 1)
        p = beta[..., None] * jnp.einsum("...ij,...j->...i", S, v, precision=_HIGHEST)
        w = p - (0.5 * beta * jnp.sum(v * p, -1))[..., None] * v
        return S - v[..., :, None] * w[..., None, :] - w[..., :, None] * v[..., None, :]

    S = jax.lax.fori_loop(0, max(n - 2, 0), step, S)
    diag = jnp.diagonal(S, axis1=-2, axis2=-1)
    off = jnp.diagonal(S, offset=1, axis1=-2, axis2=-1)
    return diag, off


@jax.jit
def bidiagonalize(C):
    """Diagonal ``d`` ``(..., n)`` and super-diagonal ``e`` ``(..., n - 1)`` of an upper bidiagonal matrix with
    the singular values of the square ``C`` ``(..., n, n)`` (Golub-Kahan: a left reflection per column, a right
    one per row).

    Returns: ``(d, e)``.
    """
    n = C.shape[-1]
    idx = jnp.arange(n)

    def step(k, C):
        col = jax.lax.dynamic_index_in_dim(C, k, axis=-1, keepdims=False)
        v, beta = _reflector(col, idx >= k, k)
        C = (
            C
            - v[..., :, None]
            * (beta[..., None] * jnp.einsum("...ij,...i->...j", C, v, precision=_HIGHEST))[..., None, :]
        )
        row = jax.lax.dynamic_index_in_dim(C, k, axis=-2, keepdims=False)
        u, gam = _reflector(row, idx >= k + 1, jnp.minimum(k + 1, n - 1))
        gam = jnp.where(k < n - 2, gam, 0.0)
        return (
            C
            - (gam[..., None] * jnp.einsum("...ij,...j->...i", C, u, precision=_HIGHEST))[..., :, None]
            * u[..., None, :]
        )

    C = jax.lax.fori_loop(0, n, step, C)
    return jnp.diagonal(C, axis1=-2, axis2=-1), jnp.diagonal(C, offset=1, axis1=-2, axis2=-1)


def _passes(dtype, points):
    """Multisection passes that shrink a bracket to below one unit in the last place of its width."""
    bits = jnp.finfo(dtype).nmant + 2
    return math.ceil(bits / math.log2(points + 1))


@partial(jax.jit, static_argnames=("ks", "points"))
def tridiagonal_eigenvalues(diag, off, ks, points: int = POINTS):
    """Eigenvalues number ``ks`` (0 = smallest; a static tuple) of the symmetric tridiagonal matrices with
    diagonal ``diag`` ``(..., n)`` and off-diagonal ``off`` ``(..., n - 1)``: ``(..., len(ks))``, each within a
    few eps * max|T| of the exact one. Multisection on Sturm counts, ``points`` per pass, from Gershgorin's
    bracket.

    Returns: an array ``(..., len(ks))`` in the order of ``ks``.
    """
    dt = diag.dtype
    n = diag.shape[-1]
    ks = jnp.asarray(ks, jnp.int32)
    ab = jnp.abs(off)
    pad = jnp.zeros(diag.shape[:-1] + (1,), dt)
    rad = jnp.concatenate([pad, ab], -1) + jnp.concatenate([ab, pad], -1)
    lo = jnp.min(diag - rad, -1)
    hi = jnp.max(diag + rad, -1)
    scale = jnp.maximum(jnp.maximum(jnp.abs(lo), jnp.abs(hi)), jnp.finfo(dt).tiny)
    lo, hi = lo - 2 * jnp.finfo(dt).eps * scale, hi + 2 * jnp.finfo(dt).eps * scale
    b2 = jnp.concatenate([pad, off * off], -1)  # b2[i] = off[i - 1]^2, b2[0] = 0
    pivmin = jnp.finfo(dt).tiny * jnp.maximum(jnp.max(b2, -1), 1.0)
    a_t = jnp.moveaxis(diag, -1, 0)[..., None, None]  # (n, ..., 1, 1)
    b_t = jnp.moveaxis(b2, -1, 0)[..., None, None]
    pm = pivmin[..., None, None]
    frac = (jnp.arange(1, points + 1, dtype=dt) / (points + 1))[None, :]
    shape = diag.shape[:-1] + (ks.size, 1)
    lo = jnp.broadcast_to(lo[..., None, None], shape)
    hi = jnp.broadcast_to(hi[..., None, None], shape)

    def sturm(x):  # number of eigenvalues below each x (..., K, points)
        def row(carry, ab):
            d, cnt = carry
            a, b = ab
            d = a - x - b / d
            d = jnp.where(jnp.abs(d) < pm, -pm, d)
            return (d, cnt + (d < 0)), None

        init = (jnp.ones_like(x), jnp.zeros(x.shape, jnp.int32))
        return jax.lax.scan(row, init, (a_t, b_t), unroll=min(n, 8))[0][1]

    def one(_, br):
        lo, hi = br
        x = lo + (hi - lo) * frac
        below = sturm(x) <= ks[:, None]  # eigenvalue k lies above x
        new_lo = jnp.max(jnp.where(below, x, lo), -1, keepdims=True)
        new_hi = jnp.min(jnp.where(below, hi, x), -1, keepdims=True)
        return new_lo, new_hi

    lo, hi = jax.lax.fori_loop(0, _passes(dt, points), one, (lo, hi))
    return (0.5 * (lo + hi))[..., 0]


@jax.jit
def sym_extreme_eigenvalues(S):
    """Smallest, second largest and largest eigenvalue of each symmetric ``S`` ``(..., n, n)``, n >= 2:
    ``(..., 3)``.

    Returns: ``(..., 3)``: smallest, second largest, largest.
    """
    n = S.shape[-1]
    diag, off = tridiagonalize(S)
    return tridiagonal_eigenvalues(diag, off, (0, n - 2, n - 1))


@jax.jit
def extreme_singular_values(C):
    """Smallest and largest singular value of each square ``C`` ``(..., n, n)``: ``(..., 2)``.

    Returns: ``(..., 2)``: sigma_min, sigma_max.
    """
    n = C.shape[-1]
    d, e = bidiagonalize(C)
    # the Golub-Kahan tridiagonal: zero diagonal, off-diagonal d0, e0, d1, e1, ..., d_{n-1}; eigenvalues +-sigma
    off = jnp.stack([d, jnp.concatenate([e, jnp.zeros_like(d[..., :1])], -1)], -1).reshape(d.shape[:-1] + (2 * n,))
    off = off[..., : 2 * n - 1]
    return tridiagonal_eigenvalues(jnp.zeros(d.shape[:-1] + (2 * n,), d.dtype), off, (n, 2 * n - 1))
