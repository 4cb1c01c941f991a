"""Float64 on demand without flipping a process-wide switch.

JAX's ``jax_enable_x64`` decides whether 64-bit arrays exist at all. Library code never sets it globally
(that would change the dtype of every other user's arrays); it runs float64 work inside
:func:`float64`, a context manager that enables 64-bit types for the current thread only and restores the
previous setting on exit. Worker threads enter it themselves (the setting is thread-local).
"""

from __future__ import annotations

import contextlib

import jax

from mascot.errors import InputError
from mascot.limits import MAX_ROUNDS_LIMIT, check_budget, check_noise  # noqa: F401 (re-exported)

__all__ = ["float64", "x64_enabled", "resolve_dtype", "check_budget", "check_noise", "MAX_ROUNDS_LIMIT"]


def _context(enabled: bool):
    if hasattr(jax, "enable_x64"):  # jax >= 0.6
        return jax.enable_x64(enabled)
    from jax.experimental import disable_x64, enable_x64  # older jax

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
        raise InputError(f"dtype must be float32 or float64; got {dtype!r}") from None
    if dt not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)):
        raise InputError(f"dtype must be float32 or float64; got {dtype!r}")
    if dt == jnp.float64 and not x64_enabled():
        raise InputError(
            "dtype='float64' needs 64-bit JAX (jax_enable_x64): run inside "
            "`with mascot.kernels.precision.float64():` (or enable jax_enable_x64 at start-up)"
        )
    return dt
