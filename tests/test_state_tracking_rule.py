"""The state-tracking rule (Predictive Maps of Multi-Agent Reasoning, Appendix C): the exact decimal
reference (mascot.theory.state_tracking) against hand-computed cases and an independent Fraction
implementation, and the JAX kernel (mascot.kernels.state_tracking) against both, exactly."""

import math
from decimal import Decimal
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mascot.kernels.state_tracking import (
    PARITY_A,
    PARITY_B,
    RuleState,
    _hundredths_to_float64,
    arrays_to_states,
    int_to_parity,
    parity_to_int,
    rule_step,
    rule_trajectory,
    states_to_arrays,
)
from mascot.theory.state_tracking import (
    BASE_PROMPT,
    DEFAULT_STATE,
    EPSILON,
    RULES_TEXT,
    apply_rules,
    explain,
    perturb,
    trajectory,
)

pytestmark = pytest.mark.x64  # the exact rule kernel needs int64/float64


# ---------------------------------------------------------------------------------------------------
# Independent reference: rational arithmetic, written from the prompt text, without Decimal.
# Fraction.__round__(x, 2) rounds half to even; float(Fraction) is correctly rounded.
# ---------------------------------------------------------------------------------------------------
def fraction_rule(state, misread=False):
    """Rules 1-3 in Fractions; ``misread``: Rule 2's boundary cases (decimal portion exactly 0.5 or 0.0) take
    the middle branch (the surrogate's boundary slip)."""
    v = Fraction(repr(float(state["Value"])))
    lv = state["Level"]
    raw = v * Fraction(5, 4) + 2 * lv if state["Parity"] == "A" else v * Fraction(3, 4) - 2 * lv
    mag = abs(raw)
    frac = mag - math.floor(mag)
    if misread and frac in (0, Fraction(1, 2)):
        vn = round(raw - Fraction(1, 2), 2)
    elif frac >= Fraction(1, 2):
        vn = round(raw + Fraction(3, 2), 2)
    elif frac > 0:
        vn = round(raw - Fraction(1, 2), 2)
    else:
        vn = round(raw * Fraction(11, 10), 2)
    p = "A" if vn < 70 else "B"
    # Rule 3 as the prompt words it: Level + 2 (max 9) unless an exception applies
    if p == "B" and 60 <= vn <= 90:
        level = max(lv - 1, 1)
    elif vn < 60:
        level = max(lv - 1, 1) if lv >= 4 else max(lv - 2, 1)
    else:
        level = min(lv + 2, 9)
    return {"Value": float(vn) + 0.0, "Parity": p, "Level": level}


def jax_apply(states):
    """rule_step on a list of state dicts -> list of state dicts."""
    return arrays_to_states(*rule_step(*states_to_arrays(states)))


def assert_states_equal(got, want):
    """Exact equality, state by state (Value as float64 ==, and no -0.0)."""
    assert len(got) == len(want)
    bad = [
        (i, g, w)
        for i, (g, w) in enumerate(zip(got, want))
        if not (
            g["Value"] == w["Value"]
            and math.copysign(1, g["Value"]) == math.copysign(1, w["Value"])
            and g["Parity"] == w["Parity"]
            and g["Level"] == w["Level"]
        )
    ]
    assert not bad, f"{len(bad)} mismatches, first: {bad[:3]}"


def S(value, parity, level):
    return {"Value": value, "Parity": parity, "Level": level}


# ---------------------------------------------------------------------------------------------------
# Hand-computed cases. Columns: input state, V_raw, frac(|V_raw|), branch, V_new, P_new, L_new.
# ---------------------------------------------------------------------------------------------------
HAND_CASES = [
    # Default state. R1: 50*1.25 + 3*2 = 62.5 + 6 = 68.5. R2: frac .5 >= .5 -> 68.5 + 1.5 = 70.00;
    # 70 >= 70 -> B. R3: B and 60 <= 70 <= 90 -> L = 3 - 1 = 2.
    (S(50.0, "A", 3), "68.5", "0.5", "+1.5", "70.00", "B", 2),
    # frac exactly 0 (x1.1). R1: 40*1.25 + 6 = 56. R2: 56*1.1 = 61.6 -> A. R3: not B, not < 60
    # -> 3 + 2 = 5.
    (S(40.0, "A", 3), "56", "0", "x1.1", "61.60", "A", 5),
    # frac in (0, .5). R1: 11.4*1.25 + 8 = 14.25 + 8 = 22.25. R2: 22.25 - 0.5 = 21.75 -> A.
    # R3: < 60, Level 4 >= 4 -> 3.
    (S(11.4, "A", 4), "22.25", "0.25", "-0.5", "21.75", "A", 3),
    # Half-even tie rounding DOWN. R1: 11.3*1.25 + 8 = 14.125 + 8 = 22.125. R2: frac .125 ->
    # 21.625 -> tie, 2 is even -> 21.62 (half-up would give 21.63). R3: < 60, Level 4 -> 3.
    (S(11.3, "A", 4), "22.125", "0.125", "-0.5", "21.62", "A", 3),
    # Half-even tie rounding UP. R1: 11.5*1.25 + 8 = 14.375 + 8 = 22.375. R2: 21.875 -> tie, 7 odd
    # -> 21.88. R3: -> 3.
    (S(11.5, "A", 4), "22.375", "0.375", "-0.5", "21.88", "A", 3),
    # Tie in the +1.5 branch. R1: 10.1*1.25 + 10 = 12.625 + 10 = 22.625. R2: frac .625 -> 24.125 ->
    # tie, 2 even -> 24.12. R3: < 60, Level 5 -> 4.
    (S(10.1, "A", 5), "22.625", "0.625", "+1.5", "24.12", "A", 4),
    # Exact decimal vs float: R1: 0.94*1.25 + 2 = 1.175 + 2 = 3.175. R2: frac .175 -> 2.675 -> tie,
    # 7 odd -> 2.68 (float round(2.675, 2) gives 2.67). R3: < 60, Level 1 < 4 -> max(1-2, 1) = 1.
    (S(0.94, "A", 1), "3.175", "0.175", "-0.5", "2.68", "A", 1),
    # Negative V_raw, frac of |V_raw| = .5. R1: 2*0.75 - 3*2 = 1.5 - 6 = -4.5. R2: |-4.5| -> .5 ->
    # -4.5 + 1.5 = -3.00 -> A. R3: < 60, Level 3 < 4 -> max(1, 1) = 1.
    (S(2.0, "B", 3), "-4.5", "0.5", "+1.5", "-3.00", "A", 1),
    # Negative V_raw, frac .25 (V_raw - floor(V_raw) would say .75). R1: 0.75 - 4 = -3.25.
    # R2: -3.25 - 0.5 = -3.75 -> A. R3: Level 2 < 4 -> max(0, 1) = 1 (clamp at 1).
    (S(1.0, "B", 2), "-3.25", "0.25", "-0.5", "-3.75", "A", 1),
    # Negative integer V_raw. R1: 4*0.75 - 10 = 3 - 10 = -7. R2: frac 0 -> -7*1.1 = -7.70 -> A.
    # R3: Level 5 >= 4 -> 4.
    (S(4.0, "B", 5), "-7", "0", "x1.1", "-7.70", "A", 4),
    # Clamp at 9. R1: 60*1.25 + 16 = 91. R2: 91*1.1 = 100.10 -> B. R3: B but 100.1 > 90, not < 60
    # -> min(8 + 2, 9) = 9.
    (S(60.0, "A", 8), "91", "0", "x1.1", "100.10", "B", 9),
    # Clamp at 1 in the EXCEPT band. R1: 56*1.25 + 2 = 72. R2: 72*1.1 = 79.20 -> B. R3: B and in
    # [60, 90] -> max(1 - 1, 1) = 1.
    (S(56.0, "A", 1), "72", "0", "x1.1", "79.20", "B", 1),
    # V_new exactly 60. R1: 42*1.25 + 6 = 52.5 + 6 = 58.5. R2: 58.5 + 1.5 = 60.00 -> A (< 70).
    # R3: P is A so no EXCEPT; 60 is not < 60 -> 3 + 2 = 5.
    (S(42.0, "A", 3), "58.5", "0.5", "+1.5", "60.00", "A", 5),
    # V_new = 59.99 (just below 60). R1: 43.592*1.25 + 6 = 54.49 + 6 = 60.49. R2: frac .49 ->
    # 60.49 - 0.5 = 59.99 -> A. R3: < 60, Level 3 < 4 -> max(3 - 2, 1) = 1.
    (S(43.592, "A", 3), "60.49", "0.49", "-0.5", "59.99", "A", 1),
    # V_new exactly 90 (upper edge of the band). R1: 67.6*1.25 + 4 = 84.5 + 4 = 88.5. R2: 90.00
    # -> B. R3: B and 60 <= 90 <= 90 -> 2 - 1 = 1.
    (S(67.6, "A", 2), "88.5", "0.5", "+1.5", "90.00", "B", 1),
    # V_new = 90.01 (just above the band). R1: 67.608*1.25 + 4 = 84.51 + 4 = 88.51. R2: frac .51
    # -> 90.01 -> B. R3: B but > 90, not < 60 -> 2 + 2 = 4.
    (S(67.608, "A", 2), "88.51", "0.51", "+1.5", "90.01", "B", 4),
    # V_new = 69.99 (just below 70). R1: 54.792*1.25 + 2 = 68.49 + 2 = 70.49. R2: frac .49 ->
    # 70.49 - 0.5 = 69.99 -> A. R3: A so no EXCEPT, not < 60 -> 1 + 2 = 3.
    (S(54.792, "A", 1), "70.49", "0.49", "-0.5", "69.99", "A", 3),
    # Parity B, integer V_raw above the band. R1: 120*0.75 - 6 = 84. R2: 92.40 -> B. R3: > 90 ->
    # 3 + 2 = 5.
    (S(120.0, "B", 3), "84", "0", "x1.1", "92.40", "B", 5),
    # Parity B landing below 60 with Level >= 4. R1: 70*0.75 - 8 = 52.5 - 8 = 44.5. R2: 46.00 -> A.
    # R3: < 60, Level 4 -> 3.
    (S(70.0, "B", 4), "44.5", "0.5", "+1.5", "46.00", "A", 3),
    # V_new rounds to zero from below: must be 0.0, not -0.0. R1: 0.66*0.75 - 2 = 0.495 - 2 =
    # -1.505. R2: frac of 1.505 is .505 -> -1.505 + 1.5 = -0.005 -> tie, 0 even -> -0.00 -> 0.00
    # -> A. R3: < 60, Level 1 -> 1.
    (S(0.66, "B", 1), "-1.505", "0.505", "+1.5", "0.00", "A", 1),
]


@pytest.mark.parametrize("state, v_raw, frac, branch, v_new, parity, level", HAND_CASES)
def test_hand_computed_cases(state, v_raw, frac, branch, v_new, parity, level):
    t = explain(state)
    assert t.v_raw == Decimal(v_raw)
    assert t.frac == Decimal(frac)
    assert t.branch == branch
    assert t.v_new == Decimal(v_new) and str(t.v_new) == v_new  # 2 decimals, no "-0.00"
    assert (t.parity, t.level) == (parity, level)
    want = {"Value": float(v_new), "Parity": parity, "Level": level}
    assert_states_equal([apply_rules(state)], [want])
    assert_states_equal([fraction_rule(state)], [want])
    assert_states_equal(jax_apply([state]), [want])


def test_exact_decimal_differs_from_naive_float():
    # The 0.94 case above: plain float arithmetic gives 2.67, the exact rule gives 2.68.
    raw = 0.94 * 1.25 + 1 * 2
    assert round(raw - 0.5, 2) == 2.67
    assert apply_rules(S(0.94, "A", 1))["Value"] == 2.68


# ---------------------------------------------------------------------------------------------------
# The two 12-step trajectories of the task.
# ---------------------------------------------------------------------------------------------------
# Default run from {50.0, A, 3} (Value, Parity, Level):
#  0  50.00 A 3     4  90.00 B 2     8  89.08 B 4    12  75.84 B 3
#  1  70.00 B 2     5  65.00 A 4     9  60.31 A 6
#  2  50.00 A 1     6  88.75 B 3    10  86.89 B 5
#  3  66.00 A 3     7  62.06 A 5    11  54.67 A 4
DEFAULT_TRAJ = [
    (50.0, "A", 3),
    (70.0, "B", 2),
    (50.0, "A", 1),
    (66.0, "A", 3),
    (90.0, "B", 2),
    (65.0, "A", 4),
    (88.75, "B", 3),
    (62.06, "A", 5),
    (89.08, "B", 4),
    (60.31, "A", 6),
    (86.89, "B", 5),
    (54.67, "A", 4),
    (75.84, "B", 3),
]
# Perturbed run from {50.0 + 15.0 = 65.0, A, 3}:
#  0  65.00 A 3     4  59.40 A 1     8  53.42 A 1    12  88.95 B 2
#  1  86.75 B 2     5  75.75 B 1     9  70.28 B 1
#  2  60.56 A 4     6  56.31 A 1    10  52.21 A 1
#  3  85.20 B 3     7  71.89 B 1    11  66.76 A 3
PERTURBED_TRAJ = [
    (65.0, "A", 3),
    (86.75, "B", 2),
    (60.56, "A", 4),
    (85.2, "B", 3),
    (59.4, "A", 1),
    (75.75, "B", 1),
    (56.31, "A", 1),
    (71.89, "B", 1),
    (53.42, "A", 1),
    (70.28, "B", 1),
    (52.21, "A", 1),
    (66.76, "A", 3),
    (88.95, "B", 2),
]


def test_default_trajectory_first_steps_by_hand():
    # 1: 50*1.25+6 = 68.5 -> 70.0 B, band -> 2.  2: 70*.75-4 = 48.5 -> 50.0 A, <60, L<4 -> 1.
    # 3: 50*1.25+2 = 64.5 -> 66.0 A -> 3.  4: 66*1.25+6 = 88.5 -> 90.0 B, band -> 2.
    # 5: 90*.75-4 = 63.5 -> 65.0 A -> 4.  6: 65*1.25+8 = 89.25 -> 88.75 B, band -> 3.
    assert [tuple(s.values()) for s in trajectory()[:7]] == DEFAULT_TRAJ[:7]


@pytest.mark.parametrize("initial, expected", [(None, DEFAULT_TRAJ), ("perturbed", PERTURBED_TRAJ)])
def test_task_trajectories_decimal_and_jax(initial, expected):
    if initial == "perturbed":
        initial = perturb()
        assert initial == {"Value": 50.0 + EPSILON, "Parity": "A", "Level": 3}
    want = [S(*t) for t in expected]
    theory = trajectory(initial)
    assert_states_equal(theory, want)
    s0 = initial or DEFAULT_STATE
    traj = rule_trajectory(s0["Value"], parity_to_int(s0["Parity"]), s0["Level"])
    assert traj.value.shape == traj.parity.shape == traj.level.shape == (13,)
    assert traj.value.dtype == jnp.float64 and traj.parity.dtype == jnp.int32 and traj.level.dtype == jnp.int32
    assert_states_equal(arrays_to_states(*traj), want)


def test_trajectory_api():
    before = dict(DEFAULT_STATE)
    assert len(trajectory(steps=0)) == 1 and len(trajectory(steps=5)) == 6
    assert trajectory(steps=3) == trajectory()[:4]
    assert trajectory({"Value": 50, "Parity": "A", "Level": 3})[0] == {"Value": 50.0, "Parity": "A", "Level": 3}
    assert DEFAULT_STATE == before  # not mutated
    state = {"Value": 12.34, "Parity": "B", "Level": 7, "Reasoning": "ignored"}
    copy = dict(state)
    apply_rules(state)
    assert state == copy
    # numpy scalars read like Python ones (repr(np.float64(12.34)) is 'np.float64(12.34)' in numpy 2)
    assert apply_rules({"Value": np.float64(12.34), "Parity": "B", "Level": np.int32(7)}) == apply_rules(state)
    assert perturb(epsilon=0.1)["Value"] == 50.1
    assert perturb({"Value": 0.1, "Parity": "B", "Level": 2}, epsilon=0.2)["Value"] == 0.3  # exact sum
    with pytest.raises(ValueError, match="steps"):
        trajectory(steps=-1)


def test_prompt_constants():
    lines = RULES_TEXT.split("\n")
    assert len(lines) == 19
    assert lines[0].startswith("RULESET - apply in this exact order.")
    assert 'If Parity is "A": V_raw = (Value * 1.25) + (Level * 2)' in lines
    assert "If the decimal portion is exactly 0.0: V_new = round(V_raw * 1.1, 2)" in lines
    assert lines[-1] == "If Level < 4 and V_new < 60: L_new = Level - 2 (minimum value is 1)"
    assert BASE_PROMPT.startswith("[STRICT INSTRUCTION] You are a JSON-only processor.")
    assert "\n" + RULES_TEXT + "\nFINAL OUTPUT FORMAT:\n" in BASE_PROMPT
    assert (
        'STATE SCHEMA: {"Reasoning": "Step-by-step math", "Value": <float>, "Parity": "<A or B>", '
        '"Level": <integer>}\n' in BASE_PROMPT
    )
    assert BASE_PROMPT.endswith(
        '- {"Reasoning": "step-by-step math", "Value": <float>, "Parity": "<A or B>", "Level": <integer>}'
    )
    assert BASE_PROMPT.count("{") == BASE_PROMPT.count("}") == 2


# ---------------------------------------------------------------------------------------------------
# Exact agreement: JAX kernel == decimal reference == Fraction reference.
# ---------------------------------------------------------------------------------------------------
def test_jax_matches_decimal_on_reachable_states():
    # Grid of initial states: Values -60..160 in steps of 0.5 (and 0.37-offset copies for more
    # decimals), both parities, all levels; every state reachable in 12 steps.
    values = np.concatenate([np.arange(-120, 321) / 2, np.round(np.arange(-60, 160, 3.7) + 0.37, 2)])
    starts = [S(float(v), p, lv) for v in values for p in "AB" for lv in range(1, 10)]
    trajs = [trajectory(s) for s in starts]
    # (a) each step: rule_step on all states of step k gives step k + 1
    flat_in = [t[k] for t in trajs for k in range(12)]
    flat_out = [t[k + 1] for t in trajs for k in range(12)]
    assert_states_equal(jax_apply(flat_in), flat_out)
    # (b) the whole batch with rule_trajectory: arrays (n, 13)
    a = states_to_arrays(starts)
    traj = rule_trajectory(a.value, a.parity, a.level)
    assert traj.value.shape == (len(starts), 13)
    assert_states_equal(arrays_to_states(*traj), [s for t in trajs for s in t])
    # the grid is rich enough to exercise every Rule 2 branch
    seen = {explain(s).branch for s in flat_in[::7]}
    assert seen == {"+1.5", "-0.5", "x1.1"}


def _random_states(rng, n):
    """n states with Values k / 10**d, d in 0..6, in [-200, 300] (correctly rounded floats)."""
    d = rng.integers(0, 7, n)
    scale = 10.0**d
    k = np.floor(rng.uniform(-200, 300, n) * scale)
    values = [float(Decimal(int(ki)).scaleb(-int(di))) for ki, di in zip(k, d)]
    parity = rng.integers(0, 2, n)
    level = rng.integers(1, 10, n)
    return [S(v, "AB"[p], int(lv)) for v, p, lv in zip(values, parity, level)]


def test_jax_matches_decimal_on_random_states():
    rng = np.random.default_rng(20240601)
    states = _random_states(rng, 20000)
    want = [apply_rules(s) for s in states]
    assert_states_equal(jax_apply(states), want)
    # the independent Fraction reference on a part of them
    assert_states_equal([fraction_rule(s) for s in states[:5000]], want[:5000])
    # coverage: all branches, negative V_raw, and half-even ties (a 5 in the 3rd decimal, then zeros)
    traces = [explain(s) for s in states[:5000]]
    assert {t.branch for t in traces} == {"+1.5", "-0.5", "x1.1"}
    assert any(t.v_raw < 0 for t in traces)
    ties = [
        t
        for t in traces
        if (t.v_new - (t.v_raw + {"+1.5": Decimal("1.5"), "-0.5": Decimal("-0.5")}.get(t.branch, 0))).copy_abs()
        == Decimal("0.005")
    ]
    assert len(ties) > 10


def test_jax_matches_decimal_on_six_decimal_values_near_domain_edges():
    # Large magnitudes (up to 1e9 with 6 decimals) where rint(value * 1e6) must still be exact.
    rng = np.random.default_rng(7)
    states = []
    for mag in (1e3, 1e6, 1e8, 1e9):
        k = rng.integers(-int(mag * 1e6), int(mag * 1e6), 500)
        d = rng.integers(0, 7, 500)
        for ki, di in zip(k, d):
            v = float(Decimal(int(ki // 10 ** (6 - di))).scaleb(-int(di)))
            states.append(S(v, "AB"[int(ki) % 2], int(1 + abs(int(ki)) % 9)))
    assert_states_equal(jax_apply(states), [apply_rules(s) for s in states])


@settings(max_examples=300, deadline=None)
@given(
    k=st.integers(-300_000_000, 400_000_000), d=st.integers(0, 6), parity=st.sampled_from("AB"), level=st.integers(1, 9)
)
def test_jax_matches_decimal_hypothesis(k, d, parity, level):
    state = S(float(Decimal(k).scaleb(-d)), parity, level)
    want = apply_rules(state)
    assert_states_equal([fraction_rule(state)], [want])
    assert_states_equal(jax_apply([state]), [want])


# ---------------------------------------------------------------------------------------------------
# Kernel API: shapes, jit, vmap, poisoning, x64.
# ---------------------------------------------------------------------------------------------------
def test_hundredths_to_float64_is_correctly_rounded():
    # V_new = hundredths / 100 is built from integer bits; compare bit patterns with numpy's
    # correctly rounded division (XLA's own vectorised f64 division is not always exact on CPU).
    rng = np.random.default_rng(3)
    q = np.concatenate(
        [
            np.arange(-1_000_000, 1_000_001),
            rng.integers(-(2**50), 2**50, 200_000),
            [s * (2**k + o) for k in range(52) for o in (-1, 0, 1) for s in (1, -1)],
        ]
    )
    got = np.asarray(jax.jit(_hundredths_to_float64)(jnp.asarray(q, dtype=jnp.int64)))
    np.testing.assert_array_equal(got.view(np.int64), (q / 100.0).view(np.int64))


def test_kernel_shapes_jit_vmap():
    values = jnp.array([[50.0, 65.0, 12.34], [-3.5, 100.0, 0.94]])
    parity = jnp.array([[0, 0, 1], [1, 0, 0]], dtype=jnp.int32)
    level = jnp.int32(3)  # broadcast
    out = rule_step(values, parity, level)
    assert isinstance(out, RuleState) and out.value.shape == out.parity.shape == out.level.shape == (2, 3)
    jitted = jax.jit(rule_step)(values, parity, level)
    for a, b in zip(out, jitted):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    traj = rule_trajectory(values, parity, level, steps=5)
    assert traj.value.shape == (2, 3, 6)  # trailing step axis
    np.testing.assert_array_equal(np.asarray(traj.value[..., 0]), np.asarray(values))
    np.testing.assert_array_equal(np.asarray(traj.value[..., 1]), np.asarray(out.value))
    vm = jax.vmap(lambda v, p: rule_trajectory(v, p, 3, steps=5))(values.ravel(), parity.ravel())
    for a, b in zip(vm, traj):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b).reshape(6, 6))
    outer = jax.jit(lambda v: rule_trajectory(v, 0, 3, steps=12).value)(jnp.float64(50.0))
    np.testing.assert_array_equal(np.asarray(outer), [t[0] for t in DEFAULT_TRAJ])
    assert rule_trajectory(50.0, 0, 3, steps=0).value.shape == (1,)
    with pytest.raises(ValueError, match="steps"):
        rule_trajectory(50.0, 0, 3, steps=-2)


def test_kernel_poisons_out_of_domain_elements():
    value = jnp.array([50.0, jnp.nan, jnp.inf, 2e9, 50.0, 50.0, 50.0, 50.0])
    parity = jnp.array([0, 0, 0, 0, 2, -1, 0, 0], dtype=jnp.int32)
    level = jnp.array([3, 3, 3, 3, 3, 3, 0, 10], dtype=jnp.int32)
    out = rule_step(value, parity, level)
    assert (float(out.value[0]), int(out.parity[0]), int(out.level[0])) == (70.0, PARITY_B, 2)
    assert np.all(np.isnan(np.asarray(out.value[1:])))
    assert np.all(np.asarray(out.parity[1:]) == -1) and np.all(np.asarray(out.level[1:]) == -1)
    traj = rule_trajectory(value, parity, level, steps=3)
    assert np.all(np.isnan(np.asarray(traj.value[1:, 1:])))


def test_parity_helpers():
    assert (parity_to_int("A"), parity_to_int("B")) == (PARITY_A, PARITY_B) == (0, 1)
    np.testing.assert_array_equal(parity_to_int(["A", "B", "B"]), np.array([0, 1, 1], dtype=np.int32))
    assert int_to_parity(0) == "A" and int_to_parity(np.int32(1)) == "B"
    assert list(int_to_parity(np.array([1, 0]))) == ["B", "A"]
    for bad in ("C", "a", ["A", "x"], ["A", 1]):
        with pytest.raises(ValueError, match="Parity"):
            parity_to_int(bad)
    for bad in (-1, 2, np.array([0, 3]), 0.0):
        with pytest.raises(ValueError, match="Parity"):
            int_to_parity(bad)


def test_rule_step_requires_x64():
    assert jax.config.read("jax_enable_x64")
    with jax.enable_x64(False):
        with pytest.raises(RuntimeError, match="jax_enable_x64"):
            rule_step(50.0, 0, 3)
        with pytest.raises(RuntimeError, match="jax_enable_x64"):
            rule_trajectory(50.0, 0, 3)
    assert float(rule_step(50.0, 0, 3).value) == 70.0


# ---------------------------------------------------------------------------------------------------
# Input validation of the decimal reference.
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "state, field",
    [
        ({"Value": float("nan"), "Parity": "A", "Level": 3}, "Value"),
        ({"Value": float("inf"), "Parity": "A", "Level": 3}, "Value"),
        ({"Value": "50.0", "Parity": "A", "Level": 3}, "Value"),
        ({"Value": True, "Parity": "A", "Level": 3}, "Value"),
        ({"Value": None, "Parity": "A", "Level": 3}, "Value"),
        ({"Value": 50.0, "Parity": "C", "Level": 3}, "Parity"),
        ({"Value": 50.0, "Parity": "a", "Level": 3}, "Parity"),
        ({"Value": 50.0, "Parity": 0, "Level": 3}, "Parity"),
        ({"Value": 50.0, "Parity": "A", "Level": 0}, "Level"),
        ({"Value": 50.0, "Parity": "A", "Level": 10}, "Level"),
        ({"Value": 50.0, "Parity": "A", "Level": 3.0}, "Level"),
        ({"Value": 50.0, "Parity": "A", "Level": True}, "Level"),
        ({"Value": 50.0, "Parity": "A", "Level": "3"}, "Level"),
        ({"Parity": "A", "Level": 3}, "Value"),
        ({"Value": 50.0, "Level": 3}, "Parity"),
        ({"Value": 50.0, "Parity": "A"}, "Level"),
        ([50.0, "A", 3], "Value"),
    ],
)
def test_bad_inputs_raise(state, field):
    with pytest.raises(ValueError, match=field):
        apply_rules(state)
    with pytest.raises(ValueError, match=field):
        trajectory(state)


def test_misread_rule_hand_cases_and_reference():
    """rule_step_misread: hand cases (50 A 3: V_raw 68.5 -> 68.0, Parity A, Level 5; 40 A 5: V_raw 60.0 ->
    59.5, Level 4), equal to rule_step off the boundary cases, and to a Fraction reference everywhere."""
    from mascot.kernels.state_tracking import rule_step_misread

    got = rule_step_misread(np.array([50.0, 40.0, 65.0]), np.array([0, 0, 0]), np.array([3, 5, 3]))
    assert np.asarray(got.value).tolist() == [68.0, 59.5, 86.75]
    assert np.asarray(got.parity).tolist() == [0, 0, 1] and np.asarray(got.level).tolist() == [5, 4, 2]
    rng = np.random.default_rng(5)
    vals = np.concatenate([np.round(rng.uniform(-200, 300, 400), 2), rng.integers(-100, 200, 200) / 2.0])
    pars = rng.integers(0, 2, vals.size)
    levs = rng.integers(1, 10, vals.size)
    m = rule_step_misread(vals, pars, levs)
    e = rule_step(vals, pars, levs)
    n_boundary = 0
    for i in range(vals.size):
        w = fraction_rule({"Value": float(vals[i]), "Parity": "AB"[pars[i]], "Level": int(levs[i])}, misread=True)
        want = (w["Value"], w["Parity"], w["Level"])
        assert (float(m.value[i]), "AB"[int(m.parity[i])], int(m.level[i])) == want, (vals[i], pars[i], levs[i])
        v = Fraction(Decimal(repr(float(vals[i]))))
        raw = v * Fraction(5, 4) + 2 * int(levs[i]) if pars[i] == 0 else v * Fraction(3, 4) - 2 * int(levs[i])
        frac = abs(raw) - math.floor(abs(raw))
        if frac in (0, Fraction(1, 2)):
            n_boundary += 1
        else:
            assert float(m.value[i]) == float(e.value[i]) and int(m.level[i]) == int(e.level[i])
    assert n_boundary > 50  # the half-integer inputs reach both boundary cases
