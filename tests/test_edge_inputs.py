"""Inputs at the edges of what the numbers can carry (found by an outside numerical check, 2026-12-01):
certificates at a round boundary, budgets and tolerances beyond float32, int32 round counters, numpy
numbers in votes. References: plain-Python Algorithm 1 (float64), hand counts, numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import mascot
from mascot.kernels.precision import float64
from mascot.protocols.debate.voting import weighted_vote
from mascot.sweep import parse_config
from mascot.sweep.config import ConfigError
from mascot.theory.consensus import (
    algorithm1,
    contraction_rate,
    disagreement,
    rounds_to_reach,
    theorem1,
    theorem1_batch,
    validate_doubly_stochastic,
)

W1, W2 = mascot.paper_modes()
L1, L2 = contraction_rate(W1), contraction_rate(W2)  # 0.25 and 0.7236 (paper, Sec. V-A)


def _boundary_x0(rel):
    """Beliefs with D0 = 1.6 (1 + rel): 0.25^2 * 1.6 = 0.1 = eta exactly, so rel > 0 needs a third mode-1 round."""
    v = np.array([[1.0], [-1.0], [0.0], [0.0], [0.0]]) @ np.ones((1, 2))
    return v / disagreement(v) * 1.6 * (1 + rel)


@pytest.mark.parametrize("rel", [1e-9, 1e-10, 1e-12])
def test_certificate_just_above_a_round_boundary_counts_the_extra_round(rel):
    X0 = _boundary_x0(rel)
    c = theorem1(disagreement(X0), 0.1, 0.03, L1, L2, 600, 100)
    # by hand: 1.6 (1 + rel) * 0.25^2 > 0.1 -> K1 = 3; then 0.1 -> 0.03 at 0.7236: ceil(3.72) = 4
    assert (c.K1, c.K2, c.B_star) == (3, 4, 3 * 600 + 4 * 100)
    # the certificate is sound: the float64 reference run stays within B* and fails one mode-1 round short
    ok = algorithm1(X0, W1, W2, 600, 100, 0.1, 0.03, c.B_star)
    assert ok.status == 0 and ok.tokens <= c.B_star
    assert algorithm1(X0, W1, W2, 600, 100, 0.1, 0.03, 1600).status == 1
    k1, k2, b = theorem1_batch(disagreement(X0), 0.1, 0.03, L1, L2, 600, 100)
    assert (float(k1), float(k2), float(b)) == (3, 4, 2200)


def test_an_exact_tie_counts_the_round_a_float_run_may_need():
    # D0 * 0.25^2 == eta exactly: 2 rounds in exact arithmetic, but the float64 reference lands one ulp above
    # eta after two rounds and needs a third, so the certificate counts 3 (conservative at ties)
    c = theorem1(1.6, 0.1, 0.03, 0.25, L2, 600, 100)
    assert c.K1 == 3 and rounds_to_reach(1.6, 0.1, 0.25) == 3
    r = algorithm1(_boundary_x0(0.0), W1, W2, 600, 100, 0.1, 0.03, c.B_star)
    assert abs(r.d_trace[2] - 0.1) <= 2 * np.spacing(0.1) and r.status == 0 and r.tokens <= c.B_star


@pytest.mark.parametrize("K", [5, 20, 40])
@pytest.mark.parametrize("delta", [1e-6, 1e-9, 1e-12, 1e-13, 5e-14, 2e-14, 1e-14, 1e-15, 0.0, -1e-15, -1e-12])
def test_certificates_stay_sound_next_to_a_round_boundary(K, delta):
    """The ring's slowest mode contracts by exactly lambda2 per round, so D(k) = lambda2^k D0: start D0 a
    relative delta above (or below) the value that reaches eps in exactly K mode-2 rounds. Whatever delta,
    a run funded with B* reaches consensus within it (float64 reference)."""
    v = np.cos(2 * np.pi * np.arange(5) / 5)[:, None] * np.ones((1, 2))  # slow eigenvector of the ring
    d0 = 1e-6 / L2**K * (1 + delta)
    X0 = v / disagreement(v) * d0
    c = theorem1(disagreement(X0), 10.0, 1e-6, L1, L2, 600, 100)  # eta above D0: mode 2 throughout
    assert c.K2 in (K, K + 1)
    r = algorithm1(X0, W1, W2, 600, 100, 10.0, 1e-6, c.B_star, max_rounds=200)
    assert r.status == 0 and r.tokens <= c.B_star and r.rounds <= c.K_star


def test_theorem1_refuses_infinite_d0_and_a_reducible_mode_does_not_contract():
    with pytest.raises(ValueError, match="d0 must be finite"):
        theorem1(math.inf, 0.1, 0.03, L1, L2, 600, 100)
    P = np.eye(5)[[1, 0, 3, 4, 2]]  # two cycles: reducible, rate exactly 1 (the SVD gives 1 - 1e-16)
    W = 0.5 * np.eye(5) + 0.5 * P
    assert contraction_rate(W) == 1.0
    c = theorem1(0.3, 0.1, 0.03, L1, contraction_rate(W), 600, 100)
    assert math.isinf(c.B_star) and not c.certifies(1e300)


def test_float32_weights_are_held_to_float32_rounding():
    W = mascot.complete_weights(5, 0.4).astype(np.float32)
    assert np.abs(W.astype(np.float64).sum(axis=1) - 1).max() > 1e-9  # float64 sums: what made the check refuse it
    np.testing.assert_array_equal(validate_doubly_stochastic(W), W.astype(np.float64))
    with pytest.raises(ValueError, match="not doubly stochastic"):
        validate_doubly_stochastic((W * 1.001).astype(np.float32))


@pytest.mark.parametrize("method", ["modal", "matrix"])
def test_max_rounds_beyond_int32_is_refused(method):
    X = np.random.default_rng(0).uniform(size=(5, 6))
    with pytest.raises(ValueError, match="max_rounds must be an integer in"):
        mascot.simulate_consensus(X, W1, W2, 600, 100, 0.1, 0.03, 2000, max_rounds=2**31, method=method)
    r = mascot.simulate_consensus(X, W1, W2, 600, 100, 0.1, 0.03, 2000, max_rounds=2**31 - 2, method=method)
    ref = algorithm1(X, W1, W2, 600, 100, 0.1, 0.03, 2000, max_rounds=10_000)
    assert (int(r.rounds[0]), int(r.status[0])) == (ref.rounds, ref.status)


def test_float32_refuses_budgets_it_cannot_keep_and_float64_keeps_them():
    X = np.random.default_rng(0).uniform(size=(5, 6))
    with pytest.raises(ValueError, match="2\\^24"):
        mascot.simulate_consensus(X, W1, W2, 1, 1, 0.1, 1e-3, 3e7, strategy="mode2", dtype="float32")
    with pytest.raises(ValueError, match="below b0"):
        mascot.simulate_consensus(X, W1, W2, 1e-4, 1e-4, 0.1, 1e-3, 1e4, strategy="mode2", dtype="float32")
    for b0, c in ((1e7, 0.7), (2**24, 1.5), (2.1, 0.7)):  # fractional costs: rounded at every deduction
        with pytest.raises(ValueError, match="not a whole number"):
            mascot.simulate_consensus(X, W1, W2, c, c, 0.5, 1e-6, b0, dtype="float32")
    with float64(), pytest.raises(ValueError, match="2\\^53"):
        mascot.simulate_consensus(X, W1, W2, 1, 1, 0.1, 1e-3, 1e17, dtype="float64")
    with float64():  # float64 takes fractional costs: 2.1 - 3 x 0.7 = 0 (to 2e-16) >= 0: 3 rounds, as in algorithm1
        r = mascot.simulate_consensus(X, W1, W2, 0.7, 0.7, 0.5, 1e-6, 2.1, max_rounds=10, dtype="float64")
        assert int(r.rounds[0]) == algorithm1(X, W1, W2, 0.7, 0.7, 0.5, 1e-6, 2.1, max_rounds=10).rounds
    # float32 with whole-token costs is exact for any b0 up to 2^24, fractional b0 included
    r = mascot.simulate_consensus(X, W1, W2, 600, 600, 0.5, 1e-6, 1077.2173, max_rounds=10, dtype="float32")
    assert float(r.tokens[0]) == 600 * int(r.rounds[0])
    # ... also where float32 rounds b0 across a whole number: 29.9999999 became 30 and paid a round of cost 30 that
    # the Python Algorithm 1 (float64) refuses (an outside tester); the float32 path runs floor(b0)
    for b0, c in ((29.9999999, 30), (8388609.5, 8388610), (4707.999828489586, 4708), (29.5, 30), (60.0, 30)):
        for strategy in ("mode1", "mode2"):
            ref = algorithm1(X, W1, W2, c, c, 0.1, 1e-6, b0, strategy=strategy, max_rounds=5)
            r = mascot.simulate_consensus(
                X, W1, W2, c, c, 0.1, 1e-6, b0, strategy=strategy, max_rounds=5, dtype="float32"
            )
            assert (int(r.rounds[0]), float(r.tokens[0]), int(r.status[0])) == (ref.rounds, ref.tokens, ref.status)
    b0 = np.array([40.0, 29.9999999, 59.99999, 60.0])  # per trajectory, through the tiled path's chunks too
    r = mascot.simulate_consensus(
        np.repeat(X[None], 4, 0), W1, W2, 30, 30, 0.1, 1e-6, b0, strategy="mode1", max_rounds=5
    )
    assert r.rounds.tolist() == [1, 0, 1, 2] and r.tokens.tolist() == [30.0, 0.0, 30.0, 60.0]
    ref = algorithm1(X, W1, W2, 1, 1, 0.1, 1e-3, 3e7, strategy="mode2", max_rounds=64)
    with float64():
        r = mascot.simulate_consensus(X, W1, W2, 1, 1, 0.1, 1e-3, 3e7, strategy="mode2", dtype="float64")
    assert int(r.rounds[0]) == ref.rounds and float(r.tokens[0]) == ref.tokens == ref.rounds  # 18 rounds of 1 token
    # float32 is exact for integer budgets up to 2^24
    r32 = mascot.simulate_consensus(X, W1, W2, 3, 1, 0.1, 1e-3, 2**24, strategy="mode2", dtype="float32")
    assert float(r32.tokens[0]) == ref.rounds


def test_max_rounds_as_a_0d_array_is_taken():
    import jax.numpy as jnp

    X = np.random.default_rng(0).uniform(size=(5, 6))
    want = mascot.simulate_consensus(X, W1, W2, 600, 100, 0.1, 0.03, 2000, max_rounds=3).rounds
    for mr in (np.array(3), jnp.array(3), np.int64(3), 3.0):
        assert mascot.simulate_consensus(X, W1, W2, 600, 100, 0.1, 0.03, 2000, max_rounds=mr).rounds == want


@pytest.mark.parametrize("mr", ["abc", float("nan"), float("inf"), [3], 2.5, -1, True])
def test_bad_max_rounds_are_refused_by_name(mr):
    X = np.random.default_rng(0).uniform(size=(5, 6))
    with pytest.raises(ValueError, match="max_rounds must be an integer in \\[0, "):
        mascot.simulate_consensus(X, W1, W2, 600, 100, 0.1, 0.03, 2000, max_rounds=mr)


@pytest.mark.parametrize("seg", [0, -1, 1.5, True, "3", "abc", float("nan"), float("inf"), [3], np.array([3])])
def test_bad_segment_rounds_are_refused(seg):
    """0 and -1 were taken silently (as the default and as 1), "abc", nan, inf and lists raised Python's own errors
    without naming the parameter (found by two outside testers)."""
    X = np.random.default_rng(0).uniform(size=(5, 6))
    with pytest.raises(ValueError, match="segment_rounds must be None or an integer >= 1"):
        mascot.simulate_consensus(X, W1, W2, 600, 100, 0.1, 0.03, 2000, method="matrix", segment_rounds=seg)


def test_eps_below_the_dtype_resolution_is_refused():
    X = np.random.default_rng(0).uniform(size=(5, 6))
    with pytest.raises(ValueError, match="resolution"):
        mascot.simulate_consensus(X, W1, W2, 600, 100, 0.1, 1e-9, 2000, dtype="float32")
    with float64(), pytest.raises(ValueError, match="resolution"):
        mascot.simulate_consensus(X, W1, W2, 600, 100, 0.1, 1e-18, 2000, strategy="mode2", dtype="float64")


def test_huge_finite_beliefs_say_overflow_not_only_nan():
    X = np.random.default_rng(0).uniform(size=(5, 6)).astype(np.float32)
    X[0, 0] = 1e30
    with pytest.raises(ValueError, match="overflows"):
        mascot.simulate_consensus(X, W1, W2, 600, 100, 0.1, 0.03, 2000, dtype="float32")


_CONFIG = """
[experiment]
kind = "{kind}"
name = "edge"
seed = 1
{dtype}
[fixed]
{fixed}
"""


@pytest.mark.parametrize(
    "fixed, match",
    [("trajectories = 4\nb0 = 3e7", "2\\^24"), ("trajectories = 4\neps = 1e-9\neta = 0.1", "resolution")],
)
def test_sweep_configs_refuse_float32_budgets_and_tolerances_when_read(fixed, match):
    with pytest.raises(ConfigError, match=match):
        parse_config(_CONFIG.format(kind="consensus", dtype="", fixed=fixed))
    parse_config(_CONFIG.format(kind="consensus", dtype='dtype = "float64"', fixed=fixed))  # float64 holds them


def test_noise_whose_squares_overflow_is_refused_and_noise_below_the_bound_runs_finite():
    """Found by an outside tester: float32 noise = 1e30 passed validation and gave D = inf rows. The bound:
    (10 noise sqrt(max_rounds))^2 n d <= max / 4 (hand-computed here for n = 5, d = 6, 64 rounds)."""
    import jax

    bound32 = math.sqrt(float(np.finfo(np.float32).max) / 4 / (5 * 6)) / (10 * math.sqrt(64))
    with pytest.raises(ConfigError, match=r"noise = 1e\+30 overflows float32"):
        parse_config(_CONFIG.format(kind="consensus", dtype="", fixed="trajectories = 4\nnoise = 1e30"))
    parse_config(_CONFIG.format(kind="consensus", dtype='dtype = "float64"', fixed="trajectories = 4\nnoise = 1e30"))
    W1, W2 = mascot.graphs.complete_weights(5, 0.4), mascot.graphs.ring_weights(5, 0.6)
    X0 = np.full((3, 5, 6), 0.5, np.float32)
    kw = dict(c1=600, c2=100, eta=0.1, eps=0.03, b0=1e6, max_rounds=64, key=jax.random.key(0), dtype="float32")
    with pytest.raises(ValueError, match="overflows float32"):
        mascot.simulate_consensus(X0, W1, W2, noise=bound32 * 1.01, **kw)
    r = mascot.simulate_consensus(X0, W1, W2, noise=bound32 * 0.99, **kw)  # 2e15: huge, but every D finite
    assert np.all(np.isfinite(r.d_final)) and bound32 > 1e15


@pytest.mark.parametrize("gamma", [0.99999999, 0.99999997, 0.9999999, 0.9999])
def test_float32_refuses_gamma_too_close_to_one_and_float64_takes_it(gamma):
    with pytest.raises(ValueError, match="within 2\\^-12 of 1"):
        mascot.sr_spectra(np.ones((4, 4)), gamma, dtype="float32")
    with float64():
        s = mascot.sr_spectra(np.ones((4, 4)), gamma, dtype="float64")
    assert float(s.rho) == pytest.approx(1 / (1 - gamma), rel=1e-9)  # P = J/4: eigenvalues 1, 0
    ok = mascot.sr_spectra(np.ones((4, 4)), 0.999, dtype="float32")  # 1 - gamma well resolved
    assert float(ok.rho) == pytest.approx(1000.0, rel=1e-4)


def test_sweep_and_sr_spectra_refuse_a_gamma_that_rounds_to_one_in_float32():
    with pytest.raises(ValueError, match="within 2\\^-12 of 1"):
        mascot.sr_spectra(np.ones((4, 4)), 0.99999999, dtype="float32")
    with float64():
        s = mascot.sr_spectra(np.ones((4, 4)), 0.99999999, dtype="float64")
    # complete graph with self loops: P = J/4, eigenvalues 1 and 0, so rho(M) = 1 / (1 - gamma)
    assert float(s.rho) == pytest.approx(1 / (1 - 0.99999999), rel=1e-6)
    with pytest.raises(ConfigError, match="within 2\\^-12 of 1"):
        parse_config(_CONFIG.format(kind="spectra", dtype="", fixed="gamma = 0.99999999"))


def test_weighted_vote_takes_numpy_numbers_and_sums_exactly():
    assert weighted_vote([("PASS", np.float64(0.9)), ("FAIL", 0.2)])[:4] == ("PASS", 1, 1, 0)
    r = weighted_vote([("PASS", np.float32(0.9)), ("FAIL", np.int64(1))])
    assert (r.outcome, r.abstentions, r.score) == ("FAIL", 0, pytest.approx(-0.1))
    r = weighted_vote([("PASS", 0.9), ("PASS", 1e-30), ("FAIL", 0.9)])
    assert (r.outcome, r.score) == ("PASS", 1e-30)
    assert weighted_vote([("PASS", 0.1), ("PASS", 0.2), ("FAIL", 0.3)]).outcome == "TIE"
    assert weighted_vote([("PASS", np.True_), ("PASS", np.nan)]).outcome == "NONE"


def test_round_counts_across_300_orders_of_magnitude():
    # eps / D0 underflows to 0 in float64 ('math domain error' from certify); the logs are taken apart then
    c = theorem1(1e30, 0.1, 1e-300, 0.25, 0.7, 600, 100)
    assert c.K1 == math.ceil(math.log(0.1 / 1e30) / math.log(0.25))  # 51.8 -> 52 (no underflow here)
    assert c.K2 == math.ceil((math.log(1e-300) - math.log(0.1)) / math.log(0.7))
    k1, k2, _ = theorem1_batch(1e30, 0.1, 1e-300, 0.25, 0.7, 600, 100)
    assert (float(k1), float(k2)) == (c.K1, c.K2)
    # D0 -> eps straight (Corollary 1's K_cmpl): 1e-300 / 1e30 underflows to 0
    assert rounds_to_reach(1e30, 1e-300, 0.25) == math.ceil(330 * math.log(10) / math.log(4))  # 548.1 -> 549


@pytest.mark.parametrize("shape", [(0, 2), (3, 0), (4, 0, 2)])
def test_disagreement_of_no_agents_or_no_dimensions_is_an_error_not_nan(shape):
    """Found by the sweep probe: mascot.disagreement(np.zeros((0, 2))) gave nan with numpy warnings."""
    import warnings

    import mascot

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning on the way to the error
        with pytest.raises(ValueError, match="at least one agent and one belief dimension"):
            mascot.disagreement(np.zeros(shape))
    assert mascot.disagreement([[0.0, 0.0], [3.0, 4.0]]) == pytest.approx(2.5)  # sqrt(2 (1.5^2 + 2^2) / 2)
