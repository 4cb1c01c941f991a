"""Closed forms of the consensus paper against hand-computed values and independent references."""

import math

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import random_doubly_stochastic
from mascot.graphs import circulant, complete_weights, paper_modes, ring_weights
from mascot.theory import (
    algorithm1,
    certificate_budget,
    circulant_contraction_rate,
    contraction_rate,
    corollary1,
    disagreement,
    in_certificate_region,
    rounds_to_reach,
    theorem1,
    validate_doubly_stochastic,
)

PAPER = dict(eta=0.1, eps=0.03, c1=600.0, c2=100.0)


def test_disagreement_hand_computed():
    # two agents at 0 and 2: mean 1, P X = [-1, 1], ||.||_F = sqrt(2), / sqrt(2) = 1
    assert disagreement(np.array([[0.0], [2.0]])) == pytest.approx(1.0)
    # consensus -> 0; batch axis
    X = np.stack(
        [np.ones((4, 3)) * 0.7, np.array([[1.0, 0], [0, 0], [0, 0], [0, 0]]).repeat(1, 0)[:, :2].repeat(2, 1)[:, :3]]
    )
    d = disagreement(X)
    assert d[0] == 0.0
    Xc = X[1] - X[1].mean(0)
    assert d[1] == pytest.approx(np.sqrt((Xc**2).sum() / 4))


def test_paper_contraction_rates_closed_form():
    W1, W2 = paper_modes()
    assert contraction_rate(W1) == pytest.approx(0.4 - 0.15, abs=1e-15)
    assert contraction_rate(W2) == pytest.approx(0.6 + 0.4 * math.cos(2 * math.pi / 5), abs=1e-15)
    assert contraction_rate(W2, method="svd") == pytest.approx(contraction_rate(W2, method="circulant"), abs=1e-14)


def _rate_reference(W):
    """Independent reference: spectral norm of W restricted to an orthonormal basis of 1-perp."""
    n = W.shape[0]
    Q = scipy.linalg.null_space(np.ones((1, n)))
    return np.linalg.svd(Q.T @ W @ Q, compute_uv=False).max()


def test_contraction_rate_general_matches_restriction(rng):
    for n in (2, 3, 5, 8, 17):
        for _ in range(5):
            W = random_doubly_stochastic(rng, n)
            assert contraction_rate(W) == pytest.approx(_rate_reference(W), abs=1e-12)


def test_circulant_fast_path_agrees_with_general(rng):
    for n in (3, 5, 6, 11, 32):
        for _ in range(5):
            row = rng.dirichlet(np.ones(n))  # non-symmetric circulant: still normal
            W = circulant(row)
            assert circulant_contraction_rate(row) == pytest.approx(contraction_rate(W, method="svd"), abs=1e-12)
            assert contraction_rate(W, method="circulant") == pytest.approx(_rate_reference(W), abs=1e-12)
    for n in (4, 9, 64):
        for a in (0.1, 0.5, 0.9):
            assert contraction_rate(complete_weights(n, a)) == pytest.approx(abs(a - (1 - a) / (n - 1)), abs=1e-12)
            lam = a + (1 - a) * np.cos(2 * np.pi * np.arange(1, n) / n)
            assert contraction_rate(ring_weights(n, a)) == pytest.approx(np.abs(lam).max(), abs=1e-12)


@pytest.mark.parametrize(
    "W, msg",
    [
        (np.array([[0.5, 0.5], [0.6, 0.4]]), "column sums"),
        (np.array([[0.5, 0.6], [0.5, 0.4]]), "row sums"),
        (np.array([[1.5, -0.5], [-0.5, 1.5]]), "nonnegative"),
        (np.ones((2, 3)) / 3, "square"),
        (np.array([[np.nan, 1.0], [1.0, 0.0]]), "NaN"),
    ],
)
def test_doubly_stochastic_validation_names_matrix(W, msg):
    with pytest.raises(ValueError, match=f"W7.*{msg}|{msg}") as e:
        validate_doubly_stochastic(W, "W7")
    assert "W7" in str(e.value)
    with pytest.raises(ValueError, match="W7"):
        contraction_rate(W, name="W7")


def test_theorem1_paper_numbers():
    W1, W2 = paper_modes()
    cert = theorem1(0.3009, 0.1, 0.03, contraction_rate(W1), contraction_rate(W2), 600, 100)
    # eq. (11) by hand: ceil(log(0.1/0.3009)/log 0.25) = ceil(0.795) = 1; ceil(log 0.3 / log 0.7236) = ceil(3.72) = 4
    assert (cert.K1, cert.K2, cert.K_star, cert.B_star) == (1, 4, 5, 1000.0)
    assert cert.certifies(2000) and not cert.certifies(650)
    cor = corollary1(0.3009, 0.1, 0.03, contraction_rate(W1), contraction_rate(W2), 600, 100)
    assert (cor.K_cmpl, cor.K_ring, cor.B_cmpl, cor.B_ring) == (2, 8, 1200.0, 800.0)
    assert cor.log_ratio == pytest.approx(math.log(0.25) / math.log(0.6 + 0.4 * math.cos(2 * math.pi / 5)))
    assert cor.condition and cor.rounds_chain and cor.cost_chain


def test_claude_example_sec_vc():
    # eta = eps: mode 2 never selected; K* = K1 = ceil(log(0.05/0.6864)/log 0.7574) = 10
    cert = theorem1(0.6864, 0.05, 0.05, 0.7574, 0.7574, 12025, 12025)
    assert (cert.K1, cert.K2, cert.B_star) == (10, 0, 120250.0)
    assert not cert.certifies(100000)


def test_rounds_to_reach_counts_ties_conservatively():
    # exact ties (a log-ratio within its rounding error of an integer k) count k + 1: a certificate never
    # claims fewer rounds than a floating-point run may need there
    assert rounds_to_reach(1.0, 0.25**2, 0.25) == 3
    assert rounds_to_reach(0.3, 0.3 * 0.5**7, 0.5) == 8
    assert rounds_to_reach(1.0, 0.26, 0.5) == 2  # log2(1/0.26) = 1.94: no tie
    assert rounds_to_reach(1.0, 0.25 * (1 + 1e-9), 0.5) == 2  # a real step below the tie: 2 suffice
    assert rounds_to_reach(1.0, 1.0, 0.5) == 0


def test_edge_cases():
    e = dict(eta=0.1, eps=0.03, lambda1=0.25, lambda2=0.7, c1=600, c2=100)
    # D0 <= eps: already in consensus
    c = theorem1(0.02, **e)
    assert (c.K1, c.K2, c.B_star) == (0, 0, 0.0) and c.certifies(0)
    c = theorem1(0.03, **e)  # exactly eps
    assert c.K_star == 0
    # eps < D0 <= eta: no mode-1 phase, K2 from D0
    c = theorem1(0.1, **e)
    assert c.K1 == 0 and c.K2 == math.ceil(math.log(0.03 / 0.1) / math.log(0.7))
    # lambda = 0: one round
    c = theorem1(0.5, 0.1, 0.03, 0.0, 0.0, 600, 100)
    assert (c.K1, c.K2, c.B_star) == (1, 1, 700.0)
    # lambda >= 1: no certificate, said clearly
    c = theorem1(0.5, 0.1, 0.03, 1.0, 0.7, 600, 100)
    assert c.B_star == math.inf and not c.certifies(1e12) and "does not contract" in c.reason
    c = theorem1(0.5, 0.1, 0.03, 0.25, 1.3, 600, 100)
    assert c.K2 == math.inf and "mode 2" in c.reason and not c.finite
    # a non-contracting mode 1 is harmless when no mode-1 phase is needed
    c = theorem1(0.05, 0.1, 0.03, 1.5, 0.7, 600, 100)
    assert c.finite and c.K1 == 0
    # eta <= eps: mode 2 never used
    c = theorem1(0.5, 0.03, 0.05, 0.25, 0.7, 600, 100)
    assert c.K2 == 0 and c.K1 == math.ceil(math.log(0.05 / 0.5) / math.log(0.25))
    # budget exactly at the boundary is certified; a hair below is not
    c = theorem1(0.3009, **e)
    assert c.certifies(c.B_star) and not c.certifies(c.B_star - 1e-9)
    assert in_certificate_region(0.3009, c.B_star, **e)
    assert not in_certificate_region(0.3009, -1.0, **e)


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(eps=0.0), "eps"),
        (dict(eps=-1.0), "eps"),
        (dict(eta=0.0), "eta"),
        (dict(c1=0.0), "c1"),
        (dict(c2=-5.0), "c2"),
        (dict(d0=-0.1), "d0"),
        (dict(lambda1=-0.1), "lambda1"),
        (dict(d0=float("nan")), "d0"),
    ],
)
def test_theorem1_bad_input(kw, name):
    args = dict(d0=0.3, eta=0.1, eps=0.03, lambda1=0.25, lambda2=0.7, c1=600, c2=100)
    args.update(kw)
    with pytest.raises(ValueError, match=name):
        theorem1(**args)


def test_definition11_clamps_negative_mode1_rounds():
    # D = eta * lambda1^2.5: the literal Def. 11 ceiling is -2 (negative rounds), certifying 300 tokens
    # while the ring phase from D to eps needs ceil(log(eps/D)/log lambda2) = 4 rounds = 400 tokens.
    lam1, lam2, eta, eps = 0.25, 0.6 + 0.4 * math.cos(2 * math.pi / 5), 0.1, 0.001
    D = eta * lam1**2.5
    literal = (
        math.ceil(math.log(eta / D) / math.log(lam1)) * 600 + math.ceil(math.log(eps / eta) / math.log(lam2)) * 100
    )
    assert literal == 300
    need = math.ceil(math.log(eps / D) / math.log(lam2)) * 100
    assert certificate_budget(D, eta, eps, lam1, lam2, 600, 100) == need == 400
    # and the reference algorithm indeed needs those rounds for a state with that disagreement
    X = np.cos(2 * np.pi * np.arange(5) / 5)[:, None]  # the ring's slowest eigenvector: D decays at lambda2
    X *= D / disagreement(X)
    W1, W2 = complete_weights(5, 0.4), ring_weights(5, 0.6)
    r = algorithm1(X, W1, W2, 600, 100, eta, eps, 300)
    assert r.status == 1  # 300 tokens are not enough


def test_corollary1_counterexample_from_ceilings():
    cor = corollary1(1.0, 0.9, 0.8, 0.5, 0.6, 100, 10)
    assert cor.applies and cor.K_star == 2 and cor.K_ring == 1
    assert not cor.rounds_chain


def test_certificate_budget_is_monotone_boundary():
    D = np.linspace(0.001, 1.0, 400)
    B = certificate_budget(D, 0.1, 0.03, 0.25, 0.7236, 600, 100)
    assert B.shape == D.shape and np.all(np.diff(B) >= 0)
    assert B[0] == 0.0


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(2, 7),
    eta=st.floats(0.05, 0.5),
    ratio=st.floats(0.05, 0.9),
    slack=st.floats(0.0, 3000.0),
)
def test_theorem2_holds_for_reference_algorithm(seed, n, eta, ratio, slack):
    """Whenever (X0, b0) is in Omega_cert: consensus within K* rounds spending at most B*."""
    rng = np.random.default_rng(seed)
    W1, W2 = random_doubly_stochastic(rng, n), random_doubly_stochastic(rng, n)
    lam1, lam2 = contraction_rate(W1), contraction_rate(W2)
    X0 = rng.normal(size=(n, 3))
    eps = eta * ratio
    cert = theorem1(disagreement(X0), eta, eps, lam1, lam2, 300.0, 50.0)
    if not cert.finite or cert.K_star > 2000:  # e.g. W = I up to rounding: lambda = 1 - 1e-16
        return
    r = algorithm1(X0, W1, W2, 300.0, 50.0, eta, eps, cert.B_star + slack, max_rounds=int(cert.K_star) + 1)
    assert r.status == 0
    assert r.rounds <= cert.K_star
    assert r.tokens <= cert.B_star
    # eq. (6): D(k+1) <= lambda_sigma D(k)
    for k, s in enumerate(r.sigma_trace):
        assert r.d_trace[k + 1] <= (lam1 if s == 1 else lam2) * r.d_trace[k] * (1 + 1e-12) + 1e-15


def test_forward_invariance_literal_def11_breaks_in_mode2_clamp_keeps_it():
    """Def. 11 as written is not forward invariant in mode 2; mascot's clamped B*(D) is (hand-computed case).

    eta = 0.1, eps = 0.03, lambda1 = 0.25, lambda2 = 0.6 + 0.4 cos(2 pi/5) = 0.7236, c1 = 600, c2 = 100.
    Start at D = 0.099 (just below eta, so mode 2 runs) in the ring's slow eigenvector with b = 400.
    Literal: B*(0.099) = ceil(log(0.1/0.099)/log 0.25 = -0.007)·600 + ceil(log 0.3 / log 0.7236 = 3.72)·100
    = 0 + 400 <= 400 (in the region). One mode-2 round: D' = 0.7236·0.099 = 0.0716, b' = 300; literal
    B*(0.0716) = ceil(log(0.1/0.0716)/log 0.25 = -0.24)·600 + 400 = 400 > 300 (out of the region): B* stayed
    flat while the budget dropped by c2.
    mascot (K1 = 0, K2 = ceil(log(eps/D)/log lambda2) for eps < D <= eta): B*(0.099) = ceil(3.69)·100 = 400,
    B*(0.0716) = ceil(log(0.03/0.0716)/log 0.7236 = 2.69)·100 = 300 <= 300 (still in the region).
    """
    from mascot.studies.consensus import literal_certificate_budget

    lam1, lam2 = 0.25, 0.6 + 0.4 * math.cos(2 * math.pi / 5)
    e = dict(eta=0.1, eps=0.03, lambda1=lam1, lambda2=lam2, c1=600.0, c2=100.0)
    X = np.cos(2 * np.pi * np.arange(5) / 5)[:, None] * np.ones((1, 3))  # slow eigenvector of the ring: D' = lam2 D
    X *= 0.099 / disagreement(X)
    W1, W2 = complete_weights(5, 0.4), ring_weights(5, 0.6)
    step = algorithm1(X, W1, W2, 600, 100, 0.1, 0.03, 400.0, max_rounds=1)
    assert step.sigma_trace == [2] and step.b_trace == [400.0, 300.0]
    d0, d1 = step.d_trace
    assert d0 == pytest.approx(0.099, rel=1e-12) and d1 == pytest.approx(lam2 * 0.099, rel=1e-12)
    # the literal Def. 11, by hand and as the reproduction writes it
    lit0 = math.ceil(math.log(0.1 / d0) / math.log(lam1)) * 600 + math.ceil(math.log(0.3) / math.log(lam2)) * 100
    lit1 = math.ceil(math.log(0.1 / d1) / math.log(lam1)) * 600 + math.ceil(math.log(0.3) / math.log(lam2)) * 100
    assert (lit0, lit1) == (400, 400)
    assert literal_certificate_budget(d0, **e) == 400 and literal_certificate_budget(d1, **e) == 400
    assert 400.0 >= lit0 and not 300.0 >= lit1  # literal region: in, then out after one round
    # mascot's clamp keeps the state in the region
    assert certificate_budget(d0, **e) == 400.0 and certificate_budget(d1, **e) == 300.0
    assert in_certificate_region(d0, 400.0, **e) and in_certificate_region(d1, 300.0, **e)
    # and the certificate is honest: from (X, 400) Algorithm 1 reaches consensus within the budget
    r = algorithm1(X, W1, W2, 600, 100, 0.1, 0.03, 400.0)
    assert r.status == 0 and r.tokens <= 400.0


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(2, 7),
    eta=st.floats(0.05, 0.5),
    ratio=st.floats(0.05, 0.9),
    scale=st.floats(0.2, 5.0),
    slack=st.floats(0.0, 500.0),
)
def test_clamped_certificate_region_is_forward_invariant(seed, n, eta, ratio, scale, slack):
    """(X, b) in mascot's Omega_cert with D(X) > eps: one Algorithm 1 round keeps it in Omega_cert."""
    rng = np.random.default_rng(seed)
    W1, W2 = random_doubly_stochastic(rng, n), random_doubly_stochastic(rng, n)
    lam1, lam2 = contraction_rate(W1), contraction_rate(W2)
    eps = eta * ratio
    X = rng.normal(size=(n, 3))
    X *= eta * scale / disagreement(X)  # D(X) on both sides of eta
    d = disagreement(X)
    cert = theorem1(d, eta, eps, lam1, lam2, 300.0, 50.0)
    if d <= eps or not cert.finite or cert.K_star > 2000 or _in_tolerance_band(d, eta, eps, lam1, lam2):
        return
    b = cert.B_star + slack
    r = algorithm1(X, W1, W2, 300.0, 50.0, eta, eps, b, max_rounds=1)
    assert r.rounds == 1  # a certified state can always pay for the next round
    if _in_tolerance_band(r.d_final, eta, eps, lam1, lam2):
        return
    assert in_certificate_region(r.d_final, b - r.tokens, eta, eps, lam1, lam2, 300.0, 50.0)


def _in_tolerance_band(d, eta, eps, lam1, lam2, band=1e-6):
    """True when a log-ratio of theorem1 at D = d lies within ``band`` of an integer (mascot's rounding zone is far narrower)."""
    rs = []
    for target, lam in ((eta, lam1), (eps, lam1), (eps, lam2), (max(eta, eps), lam1)):
        if 0 < lam < 1 and d > 0:
            rs.append(math.log(target / d) / math.log(lam))
    return any(abs(x - round(x)) < band * max(1.0, abs(x)) for x in rs)


def test_disagreement_a_hair_above_eps_needs_a_round():
    """The near-integer tolerance of the round counts rounds down, but never to 0 rounds above the target."""
    eps = 0.03
    d = eps * (1 + 1e-12)
    cert = theorem1(d, 0.1, eps, 0.25, 0.7236, 600, 100)
    assert cert.B_star >= 100


def test_a_float32_circulant_is_held_to_float32s_rounding_like_any_float32_w():
    """Found by an outside tester: contraction_rate accepted float32 non-circulant W (float32 tolerance) but
    refused a float32 circulant with a 1e-9 check whose message gave no value."""
    import numpy as np

    from mascot.graphs import complete_weights, ring_weights
    from mascot.theory import contraction_rate
    from mascot.theory.consensus import circulant_contraction_rate

    for W in (complete_weights(5, 0.4), ring_weights(7, 0.6)):
        assert contraction_rate(W.astype(np.float32)) == pytest.approx(contraction_rate(W), abs=1e-6)
    with pytest.raises(ValueError, match=r"first row sums to 1\.1"):
        circulant_contraction_rate([0.5, 0.3, 0.3])


def test_errors_name_the_argument_as_the_function_names_it():
    """Found by an outside tester: in_certificate_region named its ``d`` as ``d0``; a doubly stochastic matrix
    rounded to 6 digits was refused without a word on why; a trajectory with eta <= eps was not named."""
    import mascot
    from mascot.errors import InputError
    from mascot.graphs import complete_weights, ring_weights

    with pytest.raises(InputError, match="^d must be a real number"):
        mascot.in_certificate_region(np.array([0.5, 1.0]), 2000, 0.1, 0.03, 0.25, 0.72, 600, 100)
    assert mascot.in_certificate_region(0.5, 2000, 0.1, 0.03, 0.25, 0.72, 600, 100)
    # a later tester: a mode that is not needed costs nothing even at c = inf ("unavailable"): 0 * inf was NaN
    from mascot.theory import certificate_budget, theorem1_batch

    assert mascot.theorem1(0.05, 0.1, 0.03, 0.25, 0.7, float("inf"), 100).B_star == 200.0
    assert mascot.theorem1(0.01, 0.1, 0.03, 0.25, 0.7, float("inf"), float("inf")).B_star == 0.0
    np.testing.assert_array_equal(
        theorem1_batch(np.array([0.05, 0.5, 0.01]), 0.1, 0.03, 0.25, 0.7, np.inf, 100.0)[2], [200.0, np.inf, 0.0]
    )
    # a third tester: a NaN rate of a needed mode gave B* = 400 (the other mode's cost alone); unneeded, it costs 0
    np.testing.assert_array_equal(
        theorem1_batch(np.array([1.0, 0.05]), 0.1, 0.03, np.nan, 0.72, 600.0, 100.0)[2], [np.nan, 200.0]
    )
    with pytest.raises(InputError, match="^d must hold finite disagreements"):
        certificate_budget([np.nan], 0.1, 0.03, 0.25, 0.7, 600, 100)
    W = np.round(ring_weights(7, 0.3) + 1e-6 * np.eye(7), 6)
    with pytest.raises(InputError, match="rounded to a few digits"):
        mascot.contraction_rate(W)
    X0 = np.random.default_rng(0).uniform(size=(3, 5, 2))
    with pytest.raises(InputError, match="trajectory 1 has eta = 0.01, eps = 0.02"):
        mascot.simulate_consensus(
            X0, complete_weights(5, 0.4), ring_weights(5, 0.6), 600, 100, [0.1, 0.01, 0.1], 0.02, 1e4
        )
