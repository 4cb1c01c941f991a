"""What the working dtypes keep exactly: token budgets, belief noise and discount factors that float32 or
float64 would round away, checked before any kernel runs (numpy only: reading a config checks them without
loading JAX). :mod:`mascot.kernels.precision` re-exports them."""

from __future__ import annotations

import math

import numpy as np

from mascot.errors import InputError

__all__ = ["MAX_ROUNDS_LIMIT", "F32_GAMMA_MAX", "INT64_MAX", "check_budget", "check_noise", "check_int"]

#: the largest gamma a float32 spectra call takes: 1 - gamma >= 2^-12, so rounding gamma to float32 moves
#: 1/(1 - gamma) by at most 2^-13 (0.012%); float32's eigenvalues add about as much again (an outside tester
#: measured rho 4095 for 4096, 0.024%, at this gamma)
F32_GAMMA_MAX = 1.0 - 2.0**-12
#: the largest ``max_rounds`` the kernels accept (round counters are int32)
MAX_ROUNDS_LIMIT = 2**31 - 2
#: the largest integer a config takes (seeds, counts): numpy and the seed hash take 64-bit integers (a seed of
#: 10^23 failed inside numpy with an OverflowError after its run directory was made)
INT64_MAX = 2**63 - 1
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
    2^24 once the caller runs ``floor(b0)`` (the run depends on it only; b0 = 29.9999999 is 30 in float32), while
    a fractional cost is rounded at every deduction (b0 = 1e7, c = 0.7: 10 rounds "spent" 10). ``ValueError``
    naming the values and ``fix``."""
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


def check_int(name, v, lo) -> int:
    """``v`` as an int; ``InputError`` naming ``name`` unless it is an integer in ``[lo, INT64_MAX]``."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise InputError(f"{name} must be an integer >= {lo}; got {v!r}")
    if v > INT64_MAX:
        raise InputError(f"{name} must be an integer in [{lo}, 2^63 - 1]; got {v!r}")
    return int(v)
