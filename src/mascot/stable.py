"""Host arithmetic whose results do not depend on the processor's vector extensions.

numpy picks its ``log``, ``exp``, ``log1p`` and ``cos`` at run time by the processor: on a machine with
AVX-512 it runs its own SIMD versions, elsewhere the C library's (measured: ``np.log`` differed from the
C library's ``log`` in 0.1% of values and ``np.exp`` in 4.6% on AVX-512, and in none on AVX2). Its sums
and means reassociate by the SIMD width as well. Both changed the last bits of committed results between
machines. What mascot computes on the host and writes as a result goes through this module instead:

* :func:`log`, :func:`log1p`, :func:`exp`, :func:`cos`, :func:`sin`: the C library's scalar functions (Python's
  ``math``), elementwise; the same bits on every processor with the same C library (glibc picks one code
  path for every x86-64 processor with FMA, i.e. AVX2 and AVX-512 alike);
* :func:`fsum_rows`, :func:`fmean`, :func:`fsd`: exactly rounded sums (``math.fsum``), which depend on
  nothing but the values summed.

JAX kernels are not affected (XLA compiles its own math, the same on AVX2 and AVX-512 machines; tested
with ``--xla_cpu_max_isa``). Imports nothing of mascot.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["log", "log1p", "exp", "cos", "sin", "fsum_rows", "fmean", "fsd"]


def _elementwise(f, x) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    return np.fromiter(map(f, a.ravel().tolist()), dtype=np.float64, count=a.size).reshape(a.shape)


def _guarded(f, lo):
    """``f`` with numpy's conventions outside its domain: ``-inf`` at ``lo``, NaN below it and for NaN."""

    def g(v):
        if v > lo:
            return f(v)
        return -math.inf if v == lo else math.nan

    return g


_log = _guarded(math.log, 0.0)
_log1p = _guarded(math.log1p, -1.0)


def _exp(v):
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


def _cos(v):
    return math.cos(v) if math.isfinite(v) else math.nan


def _sin(v):
    return math.sin(v) if math.isfinite(v) else math.nan


def log(x) -> np.ndarray:
    """Natural logarithm, elementwise (``-inf`` at 0, NaN below 0), as the C library computes it."""
    return _elementwise(_log, x)


def log1p(x) -> np.ndarray:
    """``log(1 + x)``, elementwise (``-inf`` at -1, NaN below), as the C library computes it."""
    return _elementwise(_log1p, x)


def exp(x) -> np.ndarray:
    """``e^x``, elementwise (``inf`` past the largest double), as the C library computes it."""
    return _elementwise(_exp, x)


def cos(x) -> np.ndarray:
    """Cosine, elementwise, as the C library computes it."""
    return _elementwise(_cos, x)


def sin(x) -> np.ndarray:
    """Sine, elementwise, as the C library computes it."""
    return _elementwise(_sin, x)


def fsum_rows(a) -> np.ndarray:
    """Exactly rounded sums along the last axis (shape ``a.shape[:-1]``)."""
    a = np.asarray(a, dtype=np.float64)
    if a.ndim == 0:
        return a.copy()
    rows = math.prod(a.shape[:-1])
    if a.shape[-1] == 0:
        return np.zeros(a.shape[:-1])
    flat = a.reshape(rows, a.shape[-1])
    return np.array([math.fsum(r) for r in flat.tolist()], dtype=np.float64).reshape(a.shape[:-1])


def fmean(x) -> float:
    """The mean of ``x`` (flattened) from an exactly rounded sum; NaN for an empty ``x``."""
    a = np.asarray(x, dtype=np.float64).ravel()
    return math.fsum(a.tolist()) / a.size if a.size else math.nan


def fsd(x, ddof: int = 1) -> float:
    """The standard deviation of ``x`` (flattened) about :func:`fmean`, from exactly rounded sums; NaN
    when ``x`` has ``ddof`` values or fewer."""
    a = np.asarray(x, dtype=np.float64).ravel()
    if a.size <= ddof:
        return math.nan
    dev = a - fmean(a)
    return math.sqrt(math.fsum((dev * dev).tolist()) / (a.size - ddof))
