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

from mascot.kernels import spectra as ks
from mascot.kernels.spectra import SRSpectra

__all__ = ["SRSpectra", "default_threads", "sr_spectra"]


def default_threads() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def sr_spectra(A, gamma, *, threads: int | None = None, **kwargs) -> SRSpectra:
    """:func:`mascot.kernels.spectra.sr_spectra` (same arguments and result) with the host LAPACK tasks on
    ``threads`` threads (default: one per available core; 1: serial, in this thread)."""
    T = default_threads() if threads is None else int(threads)
    if T < 1:
        raise ValueError(f"threads must be >= 1; got {threads!r}")
    if T == 1:
        return ks.sr_spectra(A, gamma, **kwargs)
    return ks.sr_spectra(A, gamma, host_map=_pool(T).map, host_workers=T, **kwargs)


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(T: int) -> ThreadPoolExecutor:
    """One persistent pool per thread count (starting threads costs more than a small call's work); its
    idle threads block on a queue and are joined at interpreter exit. Tasks of concurrent calls share it."""
    with _POOLS_LOCK:
        if T not in _POOLS:
            _POOLS[T] = ThreadPoolExecutor(T, thread_name_prefix="mascot-spectra")
        return _POOLS[T]
