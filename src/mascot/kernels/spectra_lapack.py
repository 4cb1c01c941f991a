"""Host LAPACK for :func:`mascot.kernels.spectra.sr_spectra` on the CPU: eigenvalue-only drivers.

XLA's CPU ``eigh`` is LAPACK ``syevd`` with eigenvectors (``jnp.linalg.eigvalsh`` discards them: 2-3x the
work), and XLA runs a batch of small LAPACK calls one matrix after the other on one core. Here the same
LAPACK routines run through numpy without vectors: ``eigvalsh`` (``syevd``, jobz = N) of D^-1/2 A D^-1/2
(or of P itself when it is symmetric) for undirected graphs, ``eigvals`` (``geev``, no vectors) of P for
directed ones, and ``svd(I - gamma P, compute_uv=False)`` (``gesdd``, jobz = N) for kappa, in tasks of a
few MB each.

The tasks are plain functions of numpy arrays, run by whatever ``map`` the caller passes: the builtin
(serially, in this thread) from the kernels, a thread pool from :mod:`mascot.execute.spectra` (numpy
releases the GIL inside LAPACK, so tasks on two threads use two cores). Under ``jax.jit`` the same host
functions run inside ``jax.pure_callback`` (:func:`callback_eigvalsh` and friends).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from mascot.kernels.spectra_closed import detect_families

__all__ = [
    "TASK_BYTES",
    "MIN_TASK_BYTES",
    "PREP_MIN_TASK_BYTES",
    "sym_form",
    "task_prepare",
    "finish",
    "task_eigvalsh",
    "task_eigvals",
    "task_eigvalsh_finish",
    "task_eigvals_finish",
    "task_svd_kappa",
    "plan",
    "run_tasks",
    "callback_eigvalsh",
    "callback_eigvals",
    "callback_svd_kappa",
]

TASK_BYTES = 2 << 20  # matrices per task: a few MB, so a task's work stays in cache
MIN_TASK_BYTES = 32 << 10  # LAPACK on 32 KB of matrices (16 of 16 x 16) is about 0.2 ms
PREP_MIN_TASK_BYTES = 1 << 20  # the O(n^2) checks run at about 1 GB/s


def sym_form(A):
    """S = D^-1/2 A D^-1/2 (zero rows/columns for isolated agents): P = D^-1 A is similar to S. LAPACK's
    symmetric drivers read one triangle (numpy: the lower), so S is not symmetrised: for an A symmetric to
    1e-12 (the eigh route's test) that changes the eigenvalues by as little as averaging the triangles."""
    d = A.sum(-1)
    r = np.divide(1.0, np.sqrt(d), out=np.zeros_like(d), where=d > 0)
    S = A * r[..., :, None]
    S *= r[..., None, :]
    return S


def _symmetric(X, rows, atol):
    """Per matrix of a (g, n, n) stack: max |X - X^T| <= atol (per matrix). ``rows``: its row sums. Cheap
    first: row sums must equal column sums (to n atol), then exact equality, then the tolerance."""
    g, n = X.shape[0], X.shape[-1]
    out = np.abs(rows - X.sum(-2)).max(axis=-1, initial=0.0) <= n * atol
    c = np.flatnonzero(out)
    if c.size:
        Xc = X[c] if c.size < g else X
        Xt = np.swapaxes(Xc, -1, -2)
        exact = (Xc == Xt).reshape(c.size, -1).all(axis=1)
        near = np.flatnonzero(~exact)
        if near.size:
            D = np.abs(Xc[near] - Xt[near]).reshape(near.size, -1).max(axis=1)
            exact[near] = D <= (atol[c[near]] if np.ndim(atol) else atol)
        out[c] = exact
    return out


def task_prepare(A, P_out, families):
    """One chunk of graphs A (g, n, n) float64, before any solver runs.

    Returns ``(ok, sym, normal, codes, params)``: ``ok`` False when A has a NaN, an infinite or a negative
    entry, or a row whose sum overflows (the caller then raises :func:`mascot.graphs.validate_adjacency`'s error); per graph whether A is
    symmetric (to 1e-12 of its largest entry) and whether P is (to 1e-12: P is then normal); the
    closed-form family per graph (:func:`mascot.kernels.spectra_closed.detect_families` with ``families``).
    With ``P_out`` (g, n, n) the row-normalised P = D^-1 A (zero-row rule, :func:`mascot.graphs.row_normalize`'s
    arithmetic) is written there; with ``P_out=None`` A already is P.
    """
    g = A.shape[0]
    flat = A.reshape(g, -1)
    lo, hi = flat.min(axis=1, initial=0.0), flat.max(axis=1, initial=0.0)  # NaN propagates
    if not (np.isfinite(hi).all() and np.isfinite(lo).all() and (lo >= 0).all()):
        return False, None, None, None, None
    with np.errstate(over="ignore"):
        rows = A.sum(-1)
    if not np.isfinite(rows).all():  # a row sum that overflows would become a silent zero row
        return False, None, None, None, None
    sym = _symmetric(A, rows, 1e-12 * np.maximum(1.0, hi))
    if P_out is None:
        P, normal = A, sym
    else:
        s = rows[..., None]
        np.divide(A, s, out=P_out, where=s > 0)
        zero = rows <= 0
        if zero.any():
            P_out[zero] = 0.0
        P = P_out
        # symmetric A with one degree throughout: P = A / d is exactly symmetric
        deg = np.where(rows > 0, rows, np.nan)
        regular = sym & (np.nanmax(deg, axis=1, initial=0) == np.nanmin(deg, axis=1, initial=np.inf))
        normal = regular.copy()
        rest = np.flatnonzero(~regular)
        if rest.size:
            normal[rest] = _symmetric(P[rest], (rows[rest] > 0).astype(P.dtype), 1e-12)
    codes, params = detect_families(P, families) if families else (None, None)
    return True, sym, normal, codes, params


def finish(mu, loc, gam, ascending_real=False):
    """rho, Delta and max|lambda| / min|lambda| of M per pair, from the eigenvalues mu (g, n) of P of graph
    ``loc`` (numpy). For real eigenvalues in ascending order (eigvalsh) |lambda| = 1/(1 - gamma mu) rises
    with mu (1 - gamma mu > 0), so the three come from mu_n, mu_(n-1) and mu_1; else a partial sort."""
    n = mu.shape[-1]
    g = gam.astype(mu.real.dtype)
    if ascending_real:
        top = 1.0 / np.abs(1.0 - g * mu[loc, -1])
        second = 1.0 / np.abs(1.0 - g * mu[loc, -2]) if n > 1 else top
        low = 1.0 / np.abs(1.0 - g * mu[loc, 0])
    else:
        mod = 1.0 / np.abs(1.0 - g[:, None] * mu[loc])
        if n > 1:
            two = np.partition(mod, n - 2, axis=-1)
            top, second = two[:, -1], two[:, -2]
        else:
            top = second = mod[:, 0]
        low = mod.min(axis=-1)
    return top, top - second, top / low


def task_eigvalsh_finish(A, P, loc, gam):
    """:func:`finish` for pairs (graph ``loc`` of the stack A, gamma) of symmetric graphs. With ``P`` (the
    stack's P, every one symmetric) the eigenvalues are taken from P itself: a symmetric P = D^-1 A has
    equal degrees along every edge, so it equals D^-1/2 A D^-1/2."""
    mu = np.linalg.eigvalsh(P) if P is not None else task_eigvalsh(A)
    return finish(mu, loc, gam, ascending_real=True)


def task_eigvals_finish(P, loc, gam):
    """:func:`finish` for pairs (graph ``loc`` of the stack P, gamma), general eigenvalues."""
    return finish(task_eigvals(P), loc, gam)


def task_eigvalsh(A):
    """Eigenvalues of P = D^-1 A for symmetric A (ascending, real)."""
    return np.linalg.eigvalsh(sym_form(A))


def task_eigvals(P):
    return np.linalg.eigvals(P)


def task_svd_kappa(P, idx, gam):
    """kappa(I - gamma P[idx]) = sigma_max / sigma_min, per (graph index, gamma) pair."""
    n = P.shape[-1]
    B = P[idx]
    B *= (-gam.astype(P.dtype))[:, None, None]
    r = np.arange(n)
    B[:, r, r] += 1.0
    s = np.linalg.svd(B, compute_uv=False)
    return s[:, 0] / s[:, -1]


def plan(count, n, itemsize, workers, cap=None, min_bytes=MIN_TASK_BYTES):
    """Slices of ``range(count)`` (items of n x n x itemsize bytes) for tasks of at most TASK_BYTES (or
    ``cap`` items) each; with ``workers > 1``, up to 2 * workers of them (so the threads finish together)
    as long as each keeps ``min_bytes`` (a thread hand-off costs tens of microseconds). Every task but a
    lone one holds at least 2 matrices: numpy's linalg gufuncs release the GIL only for a loop over more than
    one matrix (measured: 16 eigvals of 256 x 256 on 2 threads, one per call, ran at 1.0 cores; two or more
    per call, at 2.0)."""
    if count == 0:
        return []
    size = n * n * itemsize
    per = max(2, TASK_BYTES // size)  # numpy holds the GIL through a gufunc call on a single matrix
    if cap:
        per = max(2, min(per, cap))
    k = math.ceil(count / per)
    if workers > 1:
        k = max(k, min(count // 2, 2 * workers, count * size // min_bytes))
    bounds = np.linspace(0, count, k + 1).round().astype(int)
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def _run(task):
    fn, args = task
    return fn(*args)


def run_tasks(tasks, mapper=map):
    """Results of ``fn(*args)`` for ``(fn, args)`` tasks, in order, through ``mapper(f, iterable)`` (one task:
    here, in this thread)."""
    return [_run(t) for t in tasks] if len(tasks) <= 1 else list(mapper(_run, tasks))


# ----------------------------------------------------------------------------- under jax.jit
def callback_eigvalsh(A):
    """Traceable eigenvalues of P = D^-1 A for symmetric A (..., n, n): LAPACK syevd without vectors."""
    out = jax.ShapeDtypeStruct(A.shape[:-1], A.dtype)
    return jax.pure_callback(lambda a: task_eigvalsh(np.asarray(a)).astype(a.dtype), out, A, vmap_method="expand_dims")


def callback_eigvals(P):
    """Traceable eigenvalues of general P (..., n, n) (complex): LAPACK geev without vectors, on the host."""
    out = jax.ShapeDtypeStruct(P.shape[:-1], jnp.result_type(P.dtype, jnp.complex64))
    return jax.pure_callback(lambda p: task_eigvals(np.asarray(p)).astype(out.dtype), out, P, vmap_method="expand_dims")


def callback_svd_kappa(P, idx, gam):
    """Traceable kappa(I - gam P[idx]) for pairs (idx, gam), P (G, n, n): LAPACK gesdd without vectors."""
    out = jax.ShapeDtypeStruct(idx.shape, P.dtype)
    return jax.pure_callback(  # under jax.vmap: one host call per mapped element (P's pairs index its own stack)
        lambda p, i, g: task_svd_kappa(np.asarray(p), np.asarray(i), np.asarray(g)).astype(p.dtype),
        out,
        P,
        idx,
        gam,
        vmap_method="sequential",
    )
