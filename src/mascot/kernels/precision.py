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

from mascot.errors import InputError

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


#: the largest ``max_rounds`` the kernels accept (round counters are int32)
MAX_ROUNDS_LIMIT = 2**31 - 2
_EXACT = {"float32": 2**24, "float64": 2**53}  # every integer up to these is exact in the dtype
_MAX = {name: float(np.finfo(name).max) for name in _EXACT}


def _name(dtype) -> str:
    """The dtype's name (a sweep checks 10^6 points: a name it already is skips numpy's per-call overhead)."""
    return dtype if type(dtype) is str and dtype in _EXACT else np.dtype(dtype).name


def check_budget(b0, costs, dtype, fix: str = "pass dtype='float64'", integer_costs: bool = False) -> None:
    """Refuse token budgets the working dtype cannot keep. ``b0`` above 2^24 (float32) or 2^53 (float64),
    or a round cost below ``b0 * 2^-24`` (``2^-53``): deductions would be rounded or lost entirely (b0 = 3e7,
    c = 1 in float32 reported ``spent = 0`` after 18 rounds). ``integer_costs``: float32 also needs whole
    token costs -- with them every ``b_k = b0 - spent`` and every ``b_k >= c`` test is exact for any b0 up to
    2^24, while a fractional cost is rounded at every deduction (b0 = 1e7, c = 0.7: 10 rounds "spent" 10).
    ``ValueError`` naming the values and ``fix``."""
    name = _name(dtype)
    if name not in _EXACT:
        return
    exact = _EXACT[name]

    def largest(x):  # scalars (a sweep's points, one by one) without numpy's per-call overhead
        return float(x) if isinstance(x, (int, float)) else (float(np.max(x)) if np.size(x) else -math.inf)

    def smallest(x):
        return float(x) if isinstance(x, (int, float)) else (float(np.min(x)) if np.size(x) else math.inf)

    b = max(largest(b0), 0.0)
    if b > exact:
        raise InputError(
            f"b0 = {b:.10g} is above 2^{exact.bit_length() - 1} = {exact:,}, the largest budget {name} "
            f"keeps exactly (deductions would be rounded or lost); "
            + (fix if name == "float32" else "scale the budget and costs down")
        )
    c = min((smallest(x) for x in costs), default=math.inf)
    if b > 0 and c < b / exact:
        raise InputError(
            f"a round cost of {c:.6g} is below b0 / 2^{exact.bit_length() - 1} = {b / exact:.6g}: "
            f"{name} would lose part or all of each deduction from b0 = {b:.10g}; "
            + (fix if name == "float32" else "scale the budget down")
        )
    if integer_costs and name == "float32":
        for x in costs:
            if not (float(x).is_integer() if isinstance(x, (int, float)) else bool(np.all(np.mod(x, 1) == 0))):
                frac = x if isinstance(x, (int, float)) else np.asarray(x)[np.mod(x, 1) != 0].flat[0]
                raise InputError(
                    f"a round cost of {float(frac):.6g} tokens is not a whole number: float32 keeps "
                    f"budgets exactly only for whole-token costs (each deduction of a fraction is "
                    f"rounded); round the costs, or {fix}"
                )


def check_noise(noise: float, max_rounds: int, n: int, d: int, dtype, fix: str = "pass dtype='float64'") -> None:
    """Refuse belief noise whose squares would overflow the working dtype: after ``max_rounds`` rounds a belief
    has spread about ``noise * sqrt(max_rounds)``, and D^2 sums ``n * d`` squares of it; with 10-sigma headroom
    that must stay below the dtype's largest number (float32: noise = 1e30 gave D = inf rows, read as results)."""
    name = _name(dtype)
    if name not in _MAX or not noise > 0:
        return
    spread = 10.0 * noise * math.sqrt(max(int(max_rounds), 1))
    if spread * spread * n * d > _MAX[name] / 4:
        raise InputError(
            f"noise = {noise:g} overflows {name}: after {max_rounds} rounds the beliefs' squared spread "
            f"summed over {n} x {d} entries exceeds its largest number; use a smaller noise"
            + (f", or {fix}" if name == "float32" else "")
        )
