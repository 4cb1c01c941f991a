"""Ground-truth rule of the 12-step state-tracking task as an exact, vectorised JAX kernel.

"Predictive Maps of Multi-Agent Reasoning", Appendix C: Rules 1-3 map a state (Value, Parity, Level)
to the next one. This kernel applies them elementwise to arrays of states and agrees *exactly* with
the decimal reference :func:`mascot.theory.state_tracking.apply_rules` on its domain (see below);
the conventions (decimal portion of ``|V_raw|``, round-half-even, no ``-0.0``) are the same and are
documented there.

Encoding: ``value`` float64, ``parity`` int32 with ``PARITY_A = 0`` ("A") and ``PARITY_B = 1``
("B"), ``level`` int32 in 1..9.

Exact integer arithmetic (no fractional part is ever tested on a float):

* the Value is read to **6 decimal places**: ``u = rint(value * 1e6)`` (int64 micro-units). Values
  with more decimals are rounded to 6 first (the decimal reference would use all of them);
* Rule 1 in units of 1e-8: ``r = 125 u + 2e8 Level`` (Parity "A"), ``r = 75 u - 2e8 Level`` ("B"),
  which is exactly ``V_raw * 1e8``;
* Rule 2: ``frac = |r| mod 1e8``; ``r + 1.5e8`` if ``frac >= 5e7``, ``r - 5e7`` if ``frac > 0``,
  ``11 r / 10`` (exact, since ``r`` is a multiple of 1e8) if ``frac == 0``; then round half-even to
  hundredths (units of 1e6) with floor division; ``P_new`` from ``hundredths < 7000``;
* ``V_new = hundredths / 100`` as the *correctly rounded* float64 (the same float as
  ``float(Decimal V_new)``), assembled bit by bit from integers (:func:`_hundredths_to_float64`):
  XLA's float division is not guaranteed to be correctly rounded (on CPU, jax 0.10.2, vectorised
  ``q / 100.0`` was 1 ulp off for ~14% of integers ``q``), so no float division is used;
* Rule 3 on the integer hundredths (60, 70, 90 are 6000, 7000, 9000).

Domain: ``|value| <= 1e9`` (so that ``rint(value * 1e6)`` recovers the 6-decimal Value and ``11 r``
fits in int64), ``parity`` in {0, 1}, ``level`` in 1..9. An element outside it (including a NaN or
infinite value) cannot raise under ``jit``; it is *poisoned* instead: value NaN, parity -1,
level -1, and stays so in a trajectory.

Needs 64-bit JAX: :func:`rule_step` and :func:`rule_trajectory` raise ``RuntimeError`` when
``jax_enable_x64`` is off.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from mascot.errors import InputError

__all__ = [
    "MAX_ABS_VALUE",
    "PARITY_A",
    "PARITY_B",
    "PARITY_CODES",
    "VALUE_DECIMALS",
    "RuleState",
    "arrays_to_states",
    "int_to_parity",
    "parity_to_int",
    "rule_step",
    "rule_step_misread",
    "rule_trajectory",
    "states_to_arrays",
]

PARITY_A = 0
PARITY_B = 1
#: Parity letter -> integer code.
PARITY_CODES = {"A": PARITY_A, "B": PARITY_B}
_PARITY_LETTERS = ("A", "B")
#: Decimal places to which the kernel reads a Value.
VALUE_DECIMALS = 6
#: Largest |Value| handled exactly; larger ones are poisoned (value NaN, parity/level -1).
MAX_ABS_VALUE = 1e9

_MICRO = 10**VALUE_DECIMALS  # value -> u
_ONE = 10**8  # 1.0 in the units of V_raw (u * 1.25 = u * 125 / 100 -> units of 1e-8)
_HUNDREDTH = 10**6  # 0.01 in units of 1e-8


class RuleState(NamedTuple):
    """A batch of states (a pytree, so it passes through ``jit``/``vmap``/``lax.scan``)."""

    value: jax.Array  #: float64
    parity: jax.Array  #: int32, 0 = "A", 1 = "B" (-1: poisoned)
    level: jax.Array  #: int32, 1..9 (-1: poisoned)


def _require_x64() -> None:
    if not jax.config.read("jax_enable_x64"):
        raise RuntimeError(
            "mascot.kernels.state_tracking needs 64-bit JAX (int64 exact arithmetic and float64 "
            'values): enable it with jax.config.update("jax_enable_x64", True) or the environment '
            "variable JAX_ENABLE_X64=1 before calling rule_step / rule_trajectory."
        )


def parity_to_int(parity: str | Iterable[str]) -> int | np.ndarray:
    """``"A" -> 0``, ``"B" -> 1``; a sequence (or array) of letters gives an int32 array.

    Raises ``ValueError`` naming Parity for anything else.
    """
    if isinstance(parity, str):
        if parity not in PARITY_CODES:
            raise InputError(f"Parity must be 'A' or 'B'; got {parity!r}")
        return PARITY_CODES[parity]
    arr = np.asarray(parity, dtype=object)
    out = np.empty(arr.shape, dtype=np.int32)
    for idx, p in np.ndenumerate(arr):
        if not isinstance(p, str):
            raise InputError(f"Parity must be 'A' or 'B'; got {p!r}")
        out[idx] = parity_to_int(p)
    return out


def int_to_parity(code) -> str | np.ndarray:
    """``0 -> "A"``, ``1 -> "B"``; an array of codes gives an array of letters (dtype ``<U1``).

    Raises ``ValueError`` naming Parity for any other code (e.g. -1 of a poisoned element).
    """
    if type(code) is int and code in (PARITY_A, PARITY_B):
        return _PARITY_LETTERS[code]
    arr = np.asarray(code)
    if arr.dtype.kind not in "iu" or not np.all((arr == PARITY_A) | (arr == PARITY_B)):
        raise InputError(f"Parity code must be 0 ('A') or 1 ('B'); got {code!r}")
    if arr.ndim == 0:
        return _PARITY_LETTERS[int(arr)]
    return np.where(arr == PARITY_A, "A", "B")


def states_to_arrays(states: Sequence[dict]) -> RuleState:
    """List of state dicts -> ``RuleState`` of numpy arrays (float64, int32, int32), shape ``(n,)``."""
    value = np.array([s["Value"] for s in states], dtype=np.float64)
    parity = np.array([parity_to_int(s["Parity"]) for s in states], dtype=np.int32)
    level = np.array([s["Level"] for s in states], dtype=np.int32)
    return RuleState(value, parity, level)


def arrays_to_states(value, parity, level) -> list[dict]:
    """Arrays (any equal shape, flattened in C order) -> list of state dicts with Python scalars."""
    value = np.asarray(value, dtype=np.float64).ravel()
    parity = np.asarray(parity).ravel()
    level = np.asarray(level).ravel()
    int_to_parity(parity)  # raises ValueError on a code other than 0/1 (e.g. -1 of a poisoned element)
    return [
        {"Value": v, "Parity": _PARITY_LETTERS[p], "Level": lv}
        for v, p, lv in zip(value.tolist(), parity.tolist(), level.tolist())
    ]


def _hundredths_to_float64(q: jax.Array) -> jax.Array:
    """The float64 nearest to ``q / 100`` (ties to even) for int64 ``|q| < 2**60``, in integer ops.

    With ``b`` the bit length of ``m = |q|``, ``n = m << (60 - b)`` lies in ``[2**59, 2**60)``, so
    ``n / 100`` lies in ``[2**52.4, 2**53.4)``: dividing by 100 (or by 200 when ``n / 100 >= 2**53``)
    and rounding half-even gives the 53-bit significand ``M`` in ``[2**52, 2**53]`` of
    ``m / 100 = M * 2**(e - 52)``; a carry to ``2**53`` moves to the next binade. The IEEE-754 bits
    (sign, biased exponent ``e + 1023``, ``M - 2**52``) are then bitcast to float64. ``q = 0`` gives
    ``+0.0``. Results are normal numbers (``|q / 100| >= 0.01``), so no subnormal case arises.
    """
    q = q.astype(jnp.int64)
    m = jnp.where(q == 0, 1, jnp.abs(q))
    bit_length = 64 - lax.clz(m)
    shift = 60 - bit_length
    n = jnp.left_shift(m, shift)  # in [2**59, 2**60)
    big = n >= 100 * 2**53
    d = jnp.where(big, 200, 100)
    sig = n // d
    rem = n - sig * d
    sig = sig + ((2 * rem > d) | ((2 * rem == d) & (sig % 2 == 1))).astype(jnp.int64)
    exp = 52 + big.astype(jnp.int64) - shift
    carry = sig == 2**53
    sig = jnp.where(carry, 2**52, sig)
    exp = exp + carry.astype(jnp.int64)
    bits = jnp.left_shift(exp + 1023, 52) | (sig - 2**52)
    bits = jnp.where(q < 0, bits | jnp.int64(-(2**63)), bits)
    bits = jnp.where(q == 0, 0, bits)
    return lax.bitcast_convert_type(bits, jnp.float64)


def _step(value: jax.Array, parity: jax.Array, level: jax.Array, misread: bool = False) -> RuleState:
    """Rules 1-3 (Predictive Maps of Multi-Agent Reasoning, Appendix C) in exact int64 arithmetic.
    ``misread``: Rule 2's boundary cases go to the middle branch (a decimal portion of exactly 0.5 read as
    "< 0.5", exactly 0.0 as "> 0.0"), so ``V_new = round(V_raw - 0.5, 2)`` there; Parity and Level follow."""
    valid = (
        jnp.isfinite(value)
        & (jnp.abs(value) <= MAX_ABS_VALUE)
        & ((parity == PARITY_A) | (parity == PARITY_B))
        & (level >= 1)
        & (level <= 9)
    )
    safe_value = jnp.where(valid, value, 0.0)
    u = jnp.rint(safe_value * float(_MICRO)).astype(jnp.int64)  # Value in units of 1e-6
    lv = level.astype(jnp.int64)
    # Rule 1: V_raw * 1e8
    raw = jnp.where(parity == PARITY_A, u * 125 + lv * (2 * _ONE), u * 75 - lv * (2 * _ONE))
    # Rule 2: decimal portion of |V_raw|, the three branches, round half-even to hundredths
    frac = jnp.abs(raw) % _ONE
    if misread:
        target = jnp.where(frac > _ONE // 2, raw + (3 * _ONE) // 2, raw - _ONE // 2)
    else:
        target = jnp.where(
            frac >= _ONE // 2, raw + (3 * _ONE) // 2, jnp.where(frac > 0, raw - _ONE // 2, (raw * 11) // 10)
        )
    q = target // _HUNDREDTH  # floor
    rem = target - q * _HUNDREDTH  # in [0, 1e6)
    half = _HUNDREDTH // 2
    q = q + ((rem > half) | ((rem == half) & (q % 2 == 1))).astype(jnp.int64)  # hundredths of V_new
    p_new = jnp.where(q < 7000, PARITY_A, PARITY_B).astype(jnp.int32)
    # Rule 3: EXCEPT case (P_new "B" and 60 <= V_new <= 90) first, then V_new < 60, else Level + 2
    down1 = jnp.maximum(lv - 1, 1)
    down2 = jnp.maximum(lv - 2, 1)
    up2 = jnp.minimum(lv + 2, 9)
    in_band = (p_new == PARITY_B) & (q >= 6000) & (q <= 9000)
    l_new = jnp.where(in_band, down1, jnp.where(q < 6000, jnp.where(lv >= 4, down1, down2), up2))
    v_new = _hundredths_to_float64(q)
    return RuleState(
        jnp.where(valid, v_new, jnp.nan),
        jnp.where(valid, p_new, -1).astype(jnp.int32),
        jnp.where(valid, l_new, -1).astype(jnp.int32),
    )


def _as_arrays(value, parity, level) -> tuple[jax.Array, jax.Array, jax.Array]:
    value = jnp.asarray(value, dtype=jnp.float64)
    parity = jnp.asarray(parity, dtype=jnp.int32)
    level = jnp.asarray(level, dtype=jnp.int32)
    return tuple(jnp.broadcast_arrays(value, parity, level))


@partial(jax.jit, static_argnames=("misread",))
def _step_jit(value, parity, level, misread=False) -> RuleState:
    return _step(*_as_arrays(value, parity, level), misread=misread)


def rule_step(value, parity, level) -> RuleState:
    """One step of the task, Rules 1-3 of Predictive Maps of Multi-Agent Reasoning, Appendix C.

    Elementwise over broadcastable arrays ``value`` (float64), ``parity`` (int32, 0 = "A",
    1 = "B"), ``level`` (int32, 1..9); returns ``RuleState(value float64, parity int32, level
    int32)`` of the broadcast shape. Exact: equals ``apply_rules`` of the decimal reference for
    Values with at most 6 decimals and ``|value| <= 1e9``; elements outside the domain are poisoned
    (NaN, -1, -1). Traceable: usable inside ``jit``, ``vmap`` and ``lax.scan``.

    Raises ``RuntimeError`` if ``jax_enable_x64`` is off.
    """
    _require_x64()
    return _step_jit(value, parity, level)


def rule_step_misread(value, parity, level) -> RuleState:
    """:func:`rule_step` with Rule 2's boundary cases misread: a decimal portion of ``V_raw`` of exactly 0.5
    taken as "< 0.5" and exactly 0.0 as "> 0.0" (both: ``V_new = round(V_raw - 0.5, 2)``), Parity and Level
    then computed from that ``V_new`` as Rules 2-3 say. Equal to :func:`rule_step` wherever the decimal
    portion is neither. The state-tracking surrogate's boundary error (an LLM slip at the rule's edges)."""
    _require_x64()
    return _step_jit(value, parity, level, misread=True)


@partial(jax.jit, static_argnames=("steps",))
def _trajectory(value, parity, level, steps):
    value, parity, level = _as_arrays(value, parity, level)

    def body(carry, _):
        nxt = _step(*carry)
        return nxt, nxt

    init = RuleState(value, parity, level)
    _, path = lax.scan(body, init, None, length=steps)  # leading step axis, length `steps`
    return RuleState(*(jnp.moveaxis(jnp.concatenate([x0[None], xs], axis=0), 0, -1) for x0, xs in zip(init, path)))


def rule_trajectory(value0, parity0, level0, steps: int = 12) -> RuleState:
    """States ``s_0 .. s_steps`` of the task (Predictive Maps of Multi-Agent Reasoning, Appendix C),
    ``s_{k+1} = rule_step(s_k)``, by ``lax.scan``.

    ``value0``/``parity0``/``level0`` broadcast to a batch shape ``S``; each returned array has shape
    ``S + (steps + 1,)``: the step axis is the **trailing** one and index 0 is the initial state
    (its value as float64, as given). ``steps`` is static (a Python int >= 0). Jitted; also works
    under an outer ``jit`` or ``vmap``. Raises ``RuntimeError`` if ``jax_enable_x64`` is off.
    """
    _require_x64()
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise InputError(f"steps must be a non-negative integer; got {steps!r}")
    return _trajectory(value0, parity0, level0, steps=int(steps))
