"""The D-dependent mode schedule (mascot.design.schedule) against hand computations, Theorem 1's bound and
brute-force search over every bin schedule."""

import itertools
import math

import numpy as np
import pytest

from limits import HANG_S  # noqa: E402  (a hang guard, not a speed claim)
from mascot.design.schedule import RateModel, Schedule, design_schedule, draws, evaluate, threshold_schedule
from mascot.theory.consensus import theorem1


def test_evaluate_hand_computed_threshold_run():
    # D0 = 0.8, lambda1 = 0.5 while D > 0.3: 0.8 -> 0.4 -> 0.2 (2 mode-1 rounds); then lambda2 = 0.9 until
    # D <= 0.05: 0.2 * 0.9^13 = 0.0508 > 0.05 >= 0.2 * 0.9^14 = 0.0458 (14 mode-2 rounds)
    m = RateModel.constant(0.5, 0.9, 600.0, 100.0)
    dr = draws(3, 100, 0.8)
    o = evaluate(m, lambda x: x > math.log(0.3), 0.05, dr)
    np.testing.assert_array_equal(o.rounds, [16, 16, 16])
    np.testing.assert_array_equal(o.mode1_rounds, [2, 2, 2])
    np.testing.assert_allclose(o.tokens, 2 * 600 + 14 * 100)


def test_evaluate_never_exceeds_theorem1_bound_without_noise():
    rng = np.random.default_rng(3)
    for _ in range(40):
        l1, l2 = rng.uniform(0.2, 0.8), rng.uniform(0.5, 0.95)
        eps = 0.03
        d0, eta = rng.uniform(0.2, 1.0), rng.uniform(0.035, 0.19)
        c1, c2 = rng.uniform(100, 1000), rng.uniform(10, 100)
        le = math.log(eta)
        o = evaluate(RateModel.constant(l1, l2, c1, c2), lambda x, e=le: x > e, eps, draws(1, 500, d0))
        cert = theorem1(d0, eta, eps, l1, l2, c1, c2)
        assert o.tokens[0] <= cert.B_star + 1e-6
        assert o.mode1_rounds[0] == cert.K1  # mode-1 rounds are exactly Theorem 1's K1


def test_threshold_schedule_is_the_threshold_policy():
    s = threshold_schedule(0.2, 0.05, 0.9, 7)
    x = np.log(np.geomspace(0.051, 0.89, 500))
    np.testing.assert_array_equal(s.mode1(x), x > math.log(0.2))


def _gpt_like():
    # mode 1 contracts fast far from consensus and expands near it (rate 0.5 at D = 0.7, 1.10 at D = 0.05)
    b1 = -0.3
    return RateModel(
        a=(math.log(0.5) - b1 * math.log(0.7), math.log(0.85)),
        b=(b1, 0.0),
        rate_sd=(0.1, 0.05),
        cost=(6000.0, 3500.0),
        cost_cv=0.1,
    )


def test_design_beats_every_bin_schedule_and_the_best_threshold():
    m, eps, b0 = _gpt_like(), 0.05, 80_000.0
    r = design_schedule(m, eps=eps, d0=0.75, d0_sd=0.05, b0=b0, alpha=0.05, bins=6, runs=800, steps=150)
    dr = draws(800, 200, 0.75, 0.05, 0)  # the design sample (seed 0)
    best = math.inf
    for signs in itertools.product((-1.0, 1.0), repeat=6):
        o = evaluate(m, Schedule(r.schedule.log_lo, r.schedule.log_hi, signs).mode1, eps, dr)
        if np.mean(o.tokens > b0) <= 0.05:
            best = min(best, float(np.mean(o.tokens)))
    assert r.design["mean_tokens"] <= best * (1 + 1e-9)
    assert r.design["mean_tokens"] <= r.threshold_design["mean_tokens"] * (1 + 1e-9)
    assert r.design["p_fail"] <= 0.05
    # mode 1 far from consensus, mode 2 near it (mode 1 expands there)
    iv = r.schedule.intervals()
    assert iv and iv[-1][1] > 0.7 and iv[0][0] > 0.1
    # the held-out sample agrees with the design sample to within Monte-Carlo error
    assert abs(r.holdout["mean_tokens"] / r.design["mean_tokens"] - 1) < 0.03


def test_rounds_limit_is_respected():
    # ring-only is cheapest (about 27 rounds x 10 tokens vs 4 x 600) but slow: a rounds limit forces mode 1
    m = RateModel.constant(0.5, 0.9, 600.0, 10.0, rate_sd=(0.05, 0.05))
    free = design_schedule(m, eps=0.05, d0=0.8, runs=300, steps=60, bins=5)
    assert free.feasible and free.design["mean_mode1_rounds"] < 0.5
    r = design_schedule(m, eps=0.05, d0=0.8, runs=300, steps=60, bins=5, max_mean_rounds=15)
    assert r.feasible and r.design["mean_rounds"] <= 15 and r.design["mean_mode1_rounds"] >= 1
    assert r.design["mean_tokens"] > free.design["mean_tokens"]  # the limit costs tokens
    none = design_schedule(m, eps=0.05, d0=0.8, runs=300, steps=20, bins=5, max_mean_rounds=2)
    assert not none.feasible  # 4 mode-1 rounds at least: a limit of 2 cannot be met


@pytest.mark.parametrize(
    "kw, msg",
    [
        (dict(eps=0.5, d0=0.4), "d0 > eps"),
        (dict(eps=0.05, d0=0.8, bins=1), "bins"),
        (dict(eps=0.05, d0=0.8, b0=-1.0), "b0"),
        (dict(eps=0.05, d0=0.8, alpha=1.5), "alpha"),
    ],
)
def test_bad_input(kw, msg):
    with pytest.raises(ValueError, match=msg):
        design_schedule(RateModel.constant(0.5, 0.9, 600.0, 100.0), **kw)


def test_rate_model_validation():
    with pytest.raises(ValueError, match="costs > 0"):
        RateModel(a=(0.0, 0.0), cost=(0.0, 1.0))
    with pytest.raises(ValueError, match="two finite"):
        RateModel(a=(math.nan, 0.0))


def test_cli_schedule_json_and_errors(tmp_path):
    import json
    import subprocess
    import sys

    cmd = [
        sys.executable,
        "-m",
        "mascot",
        "design",
        "schedule",
        "--lambda1",
        "0.5",
        "--lambda2",
        "0.9",
        "--c1",
        "600",
        "--c2",
        "100",
        "--eps",
        "0.05",
        "--d0",
        "0.8",
        "--runs",
        "100",
        "--steps",
        "20",
        "--bins",
        "4",
    ]
    r = subprocess.run(cmd + ["--json", "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=HANG_S)
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    # no noise, constant rates: every run is the hand-computed one (mode 1 only: 0.8 * 0.5^4 = 0.05 -> 4 rounds,
    # 2400 tokens; ring only: 27 rounds, 2700 tokens), so the cheapest is complete-only
    assert obj["feasible"] and obj["design"]["mean_tokens"] == pytest.approx(2400.0)
    assert (tmp_path / "o" / "design_schedule.json").exists() and (tmp_path / "o" / "design_schedule.png").exists()
    bad = subprocess.run(cmd[:-2] + ["--bins", "1"], capture_output=True, text=True, timeout=HANG_S)
    assert bad.returncode != 0 and "--bins" in bad.stderr
    bad = subprocess.run(cmd + ["--lambda1", "-1"], capture_output=True, text=True, timeout=HANG_S)
    assert bad.returncode != 0 and "--lambda1" in bad.stderr


def test_design_runs_under_64_bit_jax_too():
    # the relaxation keeps one dtype throughout (it failed in the scan's carry when 64-bit JAX was on)
    from mascot.kernels.precision import float64

    m = RateModel.constant(0.5, 0.9, 600.0, 10.0, rate_sd=(0.05, 0.05))
    with float64():
        r = design_schedule(m, eps=0.05, d0=0.8, runs=200, steps=20, bins=4)
    assert r.feasible and math.isfinite(r.design["mean_tokens"])


def test_intervals_say_when_mode_1_has_no_upper_end():
    """theta is held at its last value above the last knot (np.interp): a schedule whose last theta is positive
    uses mode 1 for every larger D, which the intervals used to cut at the last knot (found by an outside tester)."""
    import math

    from mascot.design.schedule import Schedule

    up = Schedule(math.log(0.05), math.log(1.0), (-1.0, -0.5, 0.5, 2.0))
    assert up.intervals()[-1][1] == math.inf and up.mode1(math.log(50.0))
    x0 = math.exp(math.log(0.05) + (math.log(1.0) - math.log(0.05)) * 0.5)  # theta -0.5 -> 0.5 between knots 2 and 3
    assert up.intervals()[0][0] == pytest.approx(x0, rel=2e-3)
    down = Schedule(math.log(0.05), math.log(1.0), (-1.0, 0.5, 0.5, -2.0))
    assert math.isfinite(down.intervals()[-1][1]) and not down.mode1(math.log(50.0))
