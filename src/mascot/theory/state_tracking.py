"""Ground-truth rule of the 12-step state-tracking task, computed exactly with :mod:`decimal`.

"Predictive Maps of Multi-Agent Reasoning", Appendix C: an agent repeatedly applies a three-rule
update to a state ``{"Value": float, "Parity": "A" | "B", "Level": int in 1..9}``. This module is
the exact reference that the JAX kernel :mod:`mascot.kernels.state_tracking` is tested against.

The rules (Appendix C, ``RULES_TEXT`` below is the verbatim ruleset of the agent prompt):

* **Rule 1** ``V_raw = 1.25 Value + 2 Level`` if Parity is "A", ``V_raw = 0.75 Value - 2 Level`` if
  Parity is "B"; no rounding.
* **Rule 2** with ``frac`` the decimal portion of ``V_raw``: ``V_new = round(V_raw + 1.5, 2)`` if
  ``frac >= 0.5``; ``V_new = round(V_raw - 0.5, 2)`` if ``0 < frac < 0.5``; ``V_new =
  round(1.1 V_raw, 2)`` if ``frac == 0``. ``P_new = "A"`` if ``V_new < 70`` else ``"B"``.
* **Rule 3** ``L_new = max(Level - 1, 1)`` if ``P_new == "B"`` and ``60 <= V_new <= 90``; otherwise
  if ``V_new < 60``: ``max(Level - 1, 1)`` when ``Level >= 4`` and ``max(Level - 2, 1)`` when
  ``Level < 4``; otherwise ``min(Level + 2, 9)``.

Conventions that go beyond the paper's text (each implemented below):

* **Exact decimals.** A float ``Value`` is read as the decimal of its shortest ``repr`` (``12.34`` is
  ``Decimal('12.34')``, not the binary double ``12.339999999999999857891452847979962825775146484375``);
  all arithmetic is then exact. This is how a person (or an LLM) reading ``12.34`` in a prompt applies
  the rules, and it avoids the float artefacts of e.g. ``round(2.675, 2) == 2.67``.
* **Rounding** ``round(x, 2)`` is round-half-even on the exact decimal (Python's ``round`` on a
  ``Decimal``), e.g. ``21.625 -> 21.62`` and ``21.875 -> 21.88``.
* **Decimal portion of a negative V_raw.** The prompt says "V_raw minus its integer part", which for
  a negative V_raw (Parity "B" with a small Value) is negative and would match none of the three
  cases. We take the decimal portion of ``|V_raw|``, i.e. ``frac = |V_raw| - floor(|V_raw|)``, which
  is in ``[0, 1)``; e.g. ``V_raw = -3.25`` has ``frac = 0.25`` (not ``0.75`` as
  ``V_raw - floor(V_raw)`` would give). The branch's arithmetic (``+1.5``, ``-0.5``, ``x1.1``) is
  applied to the signed ``V_raw``.
* **Signed zero.** A ``V_new`` that rounds to zero is returned as ``0.0`` (never ``-0.0``).
* **Perturbation.** ``perturb`` adds ``epsilon`` to the initial Value exactly (in decimal) and
  returns the nearest float.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from decimal import ROUND_FLOOR, ROUND_HALF_EVEN, Context, Decimal, localcontext
from typing import Any, NamedTuple

from mascot.errors import InputError

__all__ = [
    "BASE_PROMPT",
    "DEFAULT_STATE",
    "DEFAULT_STEPS",
    "EPSILON",
    "LEVEL_MAX",
    "LEVEL_MIN",
    "PARITIES",
    "RULES_TEXT",
    "RuleTrace",
    "apply_rules",
    "explain",
    "perturb",
    "trajectory",
    "validate_state",
]

#: The ruleset of the agent prompt, verbatim (Predictive Maps of Multi-Agent Reasoning, Appendix C).
RULES_TEXT = (
    "RULESET - apply in this exact order. Rules are dependent on each other. Do not skip ahead. "
    "Each rule requires the result of the previous.\n"
    "RULE 1 - Compute V_raw (do NOT round yet):\n"
    'If Parity is "A": V_raw = (Value * 1.25) + (Level * 2)\n'
    'If Parity is "B": V_raw = (Value * 0.75) - (Level * 2)\n'
    "Do not round V_raw. Carry the full decimal forward into Rule 2.\n"
    "RULE 2 - Compute V_new and P_new using V_raw from Rule 1:\n"
    "Take the decimal portion of V_raw only (i.e. V_raw minus its integer part).\n"
    "If that decimal portion is >= 0.5: V_new = round(V_raw + 1.5, 2)\n"
    "If that decimal portion is < 0.5 but > 0.0: V_new = round(V_raw - 0.5, 2)\n"
    "If the decimal portion is exactly 0.0: V_new = round(V_raw * 1.1, 2)\n"
    "Then compute P_new:\n"
    'If V_new < 70: P_new = "A"\n'
    'If V_new >= 70: P_new = "B"\n'
    "RULE 3 - Compute L_new using BOTH V_new from Rule 2 AND P_new from Rule 2:\n"
    "Apply EXCEPT logic carefully:\n"
    'Apply L_new = Level + 2 (max 9) in ALL of the following cases EXCEPT when P_new is "B" and '
    "V_new is between 60 and 90 inclusive, in which case apply L_new = Level - 1 (min 1) instead.\n"
    "The remaining cases are:\n"
    "If Level >= 4 and V_new < 60: L_new = Level - 1 (minimum value is 1)\n"
    "If Level < 4 and V_new < 60: L_new = Level - 2 (minimum value is 1)"
)

# The complete base prompt of the agent (Appendix C): header, state schema, ruleset, output format.
# The extracted paper text lost the curly braces of the two JSON objects (the STATE SCHEMA and the
# FINAL OUTPUT FORMAT line); they are restored here so that the schema is valid JSON syntax.
BASE_PROMPT = (
    "[STRICT INSTRUCTION] You are a JSON-only processor. Use the 'Reasoning' field to calculate the "
    "new state before providing the final values.\n"
    'STATE SCHEMA: {"Reasoning": "Step-by-step math", "Value": <float>, "Parity": "<A or B>", '
    '"Level": <integer>}\n' + RULES_TEXT + "\nFINAL OUTPUT FORMAT:\n"
    '- {"Reasoning": "step-by-step math", "Value": <float>, "Parity": "<A or B>", '
    '"Level": <integer>}'
)

#: Initial state of the task. Treat as read-only (copy with ``dict(DEFAULT_STATE)``).
DEFAULT_STATE = {"Value": 50.0, "Parity": "A", "Level": 3}
#: Perturbation added to the initial Value in the perturbed run.
EPSILON = 15.0
#: Number of rule applications in one task run.
DEFAULT_STEPS = 12
PARITIES = ("A", "B")
LEVEL_MIN, LEVEL_MAX = 1, 9

# Enough precision for every finite double (|x| < 2e308 with 2 decimals), so that no Decimal
# operation below is ever rounded by the context: all results are exact.
_CTX = Context(prec=400, Emax=10_000, Emin=-10_000, rounding=ROUND_HALF_EVEN)
_HUNDREDTH = Decimal("0.01")
_HALF = Decimal("0.5")


class RuleTrace(NamedTuple):
    """Intermediate quantities of one rule application (all exact decimals)."""

    value: Decimal  #: input Value as an exact decimal
    v_raw: Decimal  #: Rule 1
    frac: Decimal  #: decimal portion of |V_raw|, in [0, 1)
    branch: str  #: Rule 2 case: "+1.5" (frac >= 0.5), "-0.5" (0 < frac < 0.5) or "x1.1" (frac == 0)
    v_new: Decimal  #: Rule 2, rounded half-even to 2 decimals
    parity: str  #: P_new (Rule 2)
    level: int  #: L_new (Rule 3)


def _to_decimal(value: Any) -> Decimal:
    """Exact decimal of a Value: ints exactly, floats by their shortest repr (12.34 -> '12.34')."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, numbers.Integral):
        return Decimal(int(value))
    return Decimal(repr(float(value)))


def validate_state(state: Mapping[str, Any]) -> tuple[Decimal, str, int]:
    """Check a state and return ``(Value as exact Decimal, Parity, Level)``.

    Raises ``ValueError`` naming the field and its accepted values when ``state`` is not a mapping,
    a field is missing, ``Value`` is not a finite real number (``bool`` is rejected), ``Parity`` is
    not ``"A"``/``"B"`` or ``Level`` is not an integer in 1..9. Extra keys (e.g. ``"Reasoning"``) are
    ignored.
    """
    if not isinstance(state, Mapping):
        raise InputError(f"state must be a mapping with keys 'Value', 'Parity', 'Level'; got {type(state).__name__}")
    for key in ("Value", "Parity", "Level"):
        if key not in state:
            raise InputError(f"state is missing the field {key!r} (required: 'Value', 'Parity', 'Level')")
    value, parity, level = state["Value"], state["Parity"], state["Level"]
    value_ok = isinstance(value, Decimal) or (isinstance(value, numbers.Real) and not isinstance(value, bool))
    if not value_ok or not (value.is_finite() if isinstance(value, Decimal) else math.isfinite(value)):
        raise InputError(f"Value must be a finite real number (int, float or Decimal); got {value!r}")
    if not isinstance(parity, str) or parity not in PARITIES:
        raise InputError(f"Parity must be 'A' or 'B'; got {parity!r}")
    if not isinstance(level, numbers.Integral) or isinstance(level, bool) or not LEVEL_MIN <= level <= LEVEL_MAX:
        raise InputError(f"Level must be an integer in {LEVEL_MIN}..{LEVEL_MAX}; got {level!r}")
    return _to_decimal(value), parity, int(level)


def explain(state: Mapping[str, Any]) -> RuleTrace:
    """Apply Rules 1-3 (Predictive Maps of Multi-Agent Reasoning, Appendix C) and return every
    intermediate quantity exactly; see the module docstring for the conventions."""
    value, parity, level = validate_state(state)
    with localcontext(_CTX):
        # Rule 1
        if parity == "A":
            v_raw = value * Decimal("1.25") + level * 2
        else:
            v_raw = value * Decimal("0.75") - level * 2
        # Rule 2: decimal portion of |V_raw| (see module docstring for negative V_raw)
        mag = abs(v_raw)
        frac = mag - mag.to_integral_value(rounding=ROUND_FLOOR)
        if frac >= _HALF:
            branch, target = "+1.5", v_raw + Decimal("1.5")
        elif frac > 0:
            branch, target = "-0.5", v_raw - _HALF
        else:
            branch, target = "x1.1", v_raw * Decimal("1.1")
        v_new = target.quantize(_HUNDREDTH, rounding=ROUND_HALF_EVEN)
        if v_new.is_zero():
            v_new = abs(v_new)  # no "-0.00"
        p_new = "A" if v_new < 70 else "B"
        # Rule 3, in the prompt's order: the EXCEPT case first, then V_new < 60, else Level + 2
        if p_new == "B" and 60 <= v_new <= 90:
            l_new = max(level - 1, LEVEL_MIN)
        elif v_new < 60:
            l_new = max(level - 1, LEVEL_MIN) if level >= 4 else max(level - 2, LEVEL_MIN)
        else:
            l_new = min(level + 2, LEVEL_MAX)
    return RuleTrace(value, v_raw, frac, branch, v_new, p_new, l_new)


def apply_rules(state: Mapping[str, Any]) -> dict:
    """One step of the task: Rules 1-3 of Predictive Maps of Multi-Agent Reasoning, Appendix C.

    Returns a new state ``{"Value": float, "Parity": "A"|"B", "Level": int}``; ``Value`` is the float
    nearest to the exact 2-decimal ``V_new``. ``state`` is not modified.
    """
    t = explain(state)
    return {"Value": float(t.v_new), "Parity": t.parity, "Level": t.level}


def trajectory(state: Mapping[str, Any] | None = None, steps: int = DEFAULT_STEPS) -> list[dict]:
    """States ``s_0 .. s_steps`` with ``s_{k+1} = apply_rules(s_k)`` (length ``steps + 1``).

    ``state`` defaults to ``DEFAULT_STATE``; ``s_0`` is the validated initial state with a float
    Value (a Decimal or int Value is converted to the nearest float).
    """
    if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 0:
        raise InputError(f"steps must be a non-negative integer; got {steps!r}")
    if state is None:
        state = DEFAULT_STATE
    value, parity, level = validate_state(state)
    states = [{"Value": float(value), "Parity": parity, "Level": level}]
    for _ in range(int(steps)):
        states.append(apply_rules(states[-1]))
    return states


def perturb(state: Mapping[str, Any] | None = None, epsilon: float = EPSILON) -> dict:
    """The perturbed initial state: ``state`` (default ``DEFAULT_STATE``) with ``epsilon`` added to
    its Value, exactly in decimal and then rounded to the nearest float (50.0 + 15.0 -> 65.0)."""
    if state is None:
        state = DEFAULT_STATE
    value, parity, level = validate_state(state)
    eps = validate_state({"Value": epsilon, "Parity": "A", "Level": 1})[0]
    with localcontext(_CTX):
        new_value = value + eps
    return {"Value": float(new_value), "Parity": parity, "Level": level}
