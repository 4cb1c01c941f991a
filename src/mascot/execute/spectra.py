"""The host driver of the SR spectra (:mod:`mascot.kernels.spectra`): the same :func:`sr_spectra`, with its
host LAPACK tasks (eigenvalue-only ``syevd`` / ``geev`` and ``gesdd`` through numpy, a few MB each) spread
over a thread pool. XLA and numpy both run a batch of small LAPACK calls one matrix after the other on one
core; numpy releases the GIL inside LAPACK, so tasks on T threads use T cores (BLAS limited to one thread
per call, as in the kernel). On a GPU backend (``solver='device'``) only the directed rows' eigenvalues are
host tasks. Inside ``jax.jit`` the kernel's callbacks run serially (the pool is not used).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

from mascot.errors import InputError
from mascot.kernels import spectra as ks
from mascot.kernels.spectra import SRSpectra

__all__ = ["SRSpectra", "default_threads", "sr_spectra"]


def default_threads() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def sr_spectra(
    A,
    gamma,
    *,
    method: str = "auto",
    normalize: bool = True,
    dtype=None,
    family="auto",
    solver: str = "auto",
    chunk_size: int | None = None,
    threads: int | None = None,
) -> SRSpectra:
    """rho(M), Delta(M) and kappa(M) of ``M = (I - gamma P)^-1`` for every (graph, gamma) pair (SR paper,
    Sec. 3.1-3.2, eq. 1), without forming M.

    ``P`` is ``A`` row-normalised; the eigenvalues of M are ``1 / (1 - gamma mu)`` for the eigenvalues ``mu``
    of P (one eigendecomposition per graph serves every gamma), ``rho`` is M's spectral radius, ``Delta`` its
    spectral gap and ``kappa = sigma_max / sigma_min`` of ``I - gamma P`` (its condition number, from
    eigenvalues when P is symmetric). Chains, stars, meshes, rings and complete graphs use their closed forms
    (SR paper A.1); other undirected graphs a symmetric eigensolver; directed graphs LAPACK's general one.

    Args:
      A: ``(..., n, n)`` weighted adjacency (``normalize=True``: row-normalised, the zero row of an agent
        that reads nobody kept zero, :func:`mascot.graphs.row_normalize`) or an already row-stochastic P (``normalize=False``).
      gamma: scalar or array in [0, 1), broadcast against ``A.shape[:-2]`` by numpy rules: a stack of G graphs
        against G gammas is elementwise; ``A[:, None]`` against ``(Gamma,)`` gammas gives the ``(G, Gamma)``
        outer product while decomposing each graph once.
      method: ``"auto"`` (per graph: ``"eigh"`` when A is symmetric, else ``"eig"``), ``"eigh"`` (needs
        symmetric A) or ``"eig"``.
      normalize: row-normalise ``A`` first (see above).
      dtype: float32 or float64 (default: float64 when 64-bit JAX types are on in this thread); float32 takes
        gamma up to ``1 - 2^-12``.
      family: ``"auto"`` (detect chain, star, mesh, ring and complete per graph and use their closed forms), a
        family name or tuple of names (test only those), or ``None`` (every graph to the eigensolver).
      solver: ``"auto"`` (LAPACK's eigenvalue-only drivers on a CPU backend; batched ``jnp.linalg`` on a GPU up
        to n = 32), ``"host"`` or ``"device"``.
      chunk_size: (graph, gamma) pairs per device call (default: about 64 MB of matrices).
      threads: threads for the host LAPACK tasks (default: one per available core; 1: serially).

    Returns:
      :class:`SRSpectra` with ``rho``, ``delta`` and ``kappa`` of the broadcast shape, ``method`` (the
      structural label: ``"eigh"``, ``"eig"`` or ``"mixed"``), ``methods`` (per pair, the route taken:
      ``"closed:star"``, ..., ``"eigh"``, ``"eig"``) and ``solver``.

    Inside ``jax.jit`` (traced ``A`` or ``gamma``) pass ``method="eigh"`` or ``"eig"``: no errors for bad values
    (a graph with a NaN or inf entry, or a gamma outside [0, 1), NaN, or in float32 within 2^-12 of 1, gives NaN
    rho, Delta and kappa; other bad values, such as negative weights, are not checked; a dtype other than float32
    and float64 is refused, as are string gammas), no closed forms, kappa from singular values; the host
    LAPACK calls become callbacks. ``"eigh"`` there is for
    symmetric ``A`` only: it reads one triangle, so on a directed graph it returns wrong numbers without an
    error (outside ``jit`` a non-symmetric ``A`` is refused); use ``"eig"`` for directed graphs.

    Derivatives: none, on every route (``jax.grad``, ``jax.jvp`` and ``jacfwd`` raise ``InputError`` "sr_spectra
    has no derivatives"): the host LAPACK calls are callbacks without derivative rules, and rho, Delta and
    kappa are not differentiable where eigenvalues or singular values meet; differentiate ``jnp.linalg``
    expressions of your own instead.
    """
    T = default_threads() if threads is None else int(threads)
    if T < 1:
        raise InputError(f"threads must be >= 1; got {threads!r}")
    kw = dict(method=method, normalize=normalize, dtype=dtype, family=family, solver=solver, chunk_size=chunk_size)
    if T == 1:
        return ks.sr_spectra(A, gamma, **kw)
    return ks.sr_spectra(A, gamma, host_map=_pool(T).map, host_workers=T, **kw)


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(T: int) -> ThreadPoolExecutor:
    """One persistent pool per thread count (starting threads costs more than a small call's work); its
    idle threads block on a queue and are joined at interpreter exit. Tasks of concurrent calls share it."""
    with _POOLS_LOCK:
        if T not in _POOLS:
            _POOLS[T] = ThreadPoolExecutor(T, thread_name_prefix="mascot-spectra")
        return _POOLS[T]
