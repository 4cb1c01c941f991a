"""Float64 on demand without flipping a process-wide switch.

JAX's ``jax_enable_x64`` decides whether 64-bit arrays exist at all. Library code never sets it globally
(that would change the dtype of every other user's arrays); it runs float64 work inside
:func:`float64`, a context manager that enables 64-bit types for the current thread only and restores the
previous setting on exit. Worker threads enter it themselves (the setting is thread-local).
"""

from __future__ import annotations

import contextlib
import math

import jax
import numpy as np

__all__ = ["float64", "x64_enabled", "resolve_dtype", "check_budget", "MAX_ROUNDS_LIMIT"]


def _context(enabled: bool):
    if hasattr(jax, "enable_x64"):  # jax >= 0.6
        return jax.enable_x64(enabled)
    from jax.experimental import enable_x64, disable_x64  # older jax

    return enable_x64() if enabled else disable_x64()


@contextlib.contextmanager
def float64(enabled: bool = True):
    """Run the ``with`` block with 64-bit JAX types enabled (``enabled=False``: leave the setting as it is)."""
    if not enabled or x64_enabled():
        yield
        return
    with _context(True):
        yield


def x64_enabled() -> bool:
    """Whether 64-bit JAX types are enabled in this thread (globally or by :func:`float64`)."""
    return bool(jax.config.read("jax_enable_x64"))


def resolve_dtype(dtype=None):
    """``dtype`` as a JAX float dtype: float32 or float64 (default: float64 when 64-bit types are enabled in
    this thread, else float32). ``ValueError`` for other dtypes, and for float64 without 64-bit types."""
    import jax.numpy as jnp

    if dtype is None:
        return jnp.dtype(jnp.float64 if x64_enabled() else jnp.float32)
    try:
        dt = jnp.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype must be float32 or float64; got {dtype!r}") from None
    if dt not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)):
        raise ValueError(f"dtype must be float32 or float64; got {dtype!r}")
    if dt == jnp.float64 and not x64_enabled():
        raise ValueError("dtype='float64' needs 64-bit JAX (jax_enable_x64): run inside "
                         "`with mascot.kernels.precision.float64():` (or enable jax_enable_x64 at start-up)")
    return dt


#: the largest ``max_rounds`` the kernels accept (round counters are int32)
MAX_ROUNDS_LIMIT = 2**31 - 2
_F32_EXACT = 2**24  # float32 holds every integer up to 2^24 = 16,777,216 exactly


def check_budget(b0, costs, dtype, fix: str = "pass dtype='float64'") -> None:
    """Refuse token budgets a float32 run cannot keep: ``b0`` above 2^24 (16,777,216), or a round cost
    below ``b0 * 2^-24`` (float32 would lose part or all of each deduction). Integer budgets and costs up
    to 2^24 are exact in float32; float64 is exact to 2^53. ``ValueError`` naming the values and ``fix``."""
    if np.dtype(dtype) != np.float32:
        return

    def largest(x):  # scalars (a sweep's points, one by one) without numpy's per-call overhead
        return float(x) if isinstance(x, (int, float)) else (float(np.max(x)) if np.size(x) else -math.inf)

    def smallest(x):
        return float(x) if isinstance(x, (int, float)) else (float(np.min(x)) if np.size(x) else math.inf)

    b = max(largest(b0), 0.0)
    if b > _F32_EXACT:
        raise ValueError(f"b0 = {b:.10g} is above 2^24 = 16,777,216, the largest budget float32 keeps exactly "
                         f"(deductions would be rounded or lost); {fix}")
    c = min((smallest(x) for x in costs), default=math.inf)
    if b > 0 and c < b * 2.0**-24:
        raise ValueError(f"a round cost of {c:.6g} is below b0 * 2^-24 = {b * 2.0**-24:.6g}: float32 would lose part "
                         f"or all of each deduction from b0 = {b:.10g}; {fix}")
