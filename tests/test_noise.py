"""The affine-noise model of multi-agent error (Predictive Maps of Multi-Agent Reasoning, Sec. 3.5):
closed forms (mascot.theory.noise) against hand-computed values, and the Monte Carlo kernels
(mascot.kernels.noise) against the closed forms, within Monte Carlo standard errors."""

import math
from functools import partial

import jax
import numpy as np
import pytest
import scipy.integrate
import scipy.stats

from mascot.execute.noise import affine_noise_error, rule_noise_error
from mascot.kernels.noise import affine_noise_point
from mascot.kernels.noise import aggregate_outputs as _aggregate
from mascot.theory.noise import (
    aggregated_variance,
    bias_aware_gain,
    ceg_asymptote,
    ceg_ratio,
    drift_corrected_gain,
    expected_ceg,
    infer_rho_c,
    validate_noise_params,
)

pytestmark = pytest.mark.x64  # the exact rule kernel needs int64/float64

KEY = jax.random.key(2024)
SQRT_2_PI = math.sqrt(2 / math.pi)


# ----------------------------------------------------------------------------- closed forms
def test_aggregated_variance_eq5():
    assert aggregated_variance(2.0, 1, 0.3) == pytest.approx(4.0)  # k = 1: sigma^2 for any rho_c
    assert aggregated_variance(1.0, 4, 0.0) == pytest.approx(0.25)
    assert aggregated_variance(1.0, 4, 1.0) == pytest.approx(1.0)
    assert aggregated_variance(1.0, 4, 0.2) == pytest.approx(0.2 + 0.8 / 4)  # rho sigma^2 + (1-rho) sigma^2/k
    np.testing.assert_allclose(aggregated_variance(1.0, np.array([1, 2, 8]), 0.5), [1.0, 0.75, 0.5625])


def test_expected_ceg_hand_computed():
    s = math.sqrt(aggregated_variance(1.5, 3, 0.2))
    assert expected_ceg(1.5, 3, 0.2, 1) == pytest.approx(SQRT_2_PI * s)  # E|N(0, s^2)|
    # L = 1: v_t = s^2 t
    assert expected_ceg(1.5, 3, 0.2, 5) == pytest.approx(SQRT_2_PI * s * sum(math.sqrt(t) for t in range(1, 6)))
    # L = 0: every step is a fresh N(0, s^2)
    assert expected_ceg(1.5, 3, 0.2, 7, L=0.0) == pytest.approx(7 * SQRT_2_PI * s)
    # v_t = s^2 (1 + L^2 + ... + L^(2(t-1))); the sign of L does not matter
    L = 0.6
    manual = SQRT_2_PI * s * sum(math.sqrt(sum(L ** (2 * j) for j in range(t))) for t in range(1, 9))
    assert expected_ceg(1.5, 3, 0.2, 8, L=L) == pytest.approx(manual)
    assert expected_ceg(1.5, 3, 0.2, 8, L=-L) == pytest.approx(manual)
    assert expected_ceg(0.0, 3, 0.2, 8) == 0.0
    # |L| < 1, large T: linear growth with slope sqrt(2/pi) s / sqrt(1 - L^2)
    slope = expected_ceg(1.0, 1, 0.0, 20001, L=0.5) - expected_ceg(1.0, 1, 0.0, 20000, L=0.5)
    assert slope == pytest.approx(SQRT_2_PI / math.sqrt(1 - 0.25), rel=1e-9)
    np.testing.assert_allclose(
        expected_ceg(1.0, np.array([1, 4]), 0.0, np.array([3, 3])),
        [expected_ceg(1.0, 1, 0.0, 3), expected_ceg(1.0, 4, 0.0, 3)],
    )


def test_eq3_sqrt_k_and_asymptote():
    # rho_c = 0: E[E_ceg] * sqrt(k) does not depend on k (eq. 3)
    for k in (2, 4, 9):
        assert expected_ceg(1.0, k, 0.0, 12) * math.sqrt(k) == pytest.approx(expected_ceg(1.0, 1, 0.0, 12))
    # c sigma T^(3/2) / sqrt(k) with c = (2/3) sqrt(2/pi); relative error ~ 3/(4T)
    for T in (100, 10_000):
        exact, asym = expected_ceg(2.0, 4, 0.0, T), ceg_asymptote(2.0, 4, 0.0, T)
        assert asym == pytest.approx((2 / 3) * SQRT_2_PI * 2.0 * T**1.5 / 2.0)
        assert 1 - asym / exact == pytest.approx(3 / (4 * T), rel=0.05)


def test_ceg_ratio_and_inverse():
    assert ceg_ratio(4, 0.0) == pytest.approx(2.0)
    assert ceg_ratio(8, 1.0) == pytest.approx(1.0)
    assert ceg_ratio(1, 0.4) == pytest.approx(1.0)
    for k in (2, 4, 8, 16):
        for rho in (0.0, 0.06, 0.3, 0.77, 1.0):
            r = ceg_ratio(k, rho)
            assert r == pytest.approx(expected_ceg(1.0, 1, rho, 9, 0.8) / expected_ceg(1.0, k, rho, 9, 0.8))
            assert infer_rho_c(r, k) == pytest.approx(rho, abs=1e-12)
    np.testing.assert_allclose(infer_rho_c(np.array([2.0, 1.0]), 4), [0.0, 1.0])


def test_infer_rho_c_paper_value():
    # Sec. 3.5: k = 4 agents, observed chain/star ratio 1.77. The exact inversion of
    # ratio = sqrt(k / (1 + (k-1) rho_c)) gives (4 / 1.77^2 - 1) / 3 = 0.0923, not the paper's "<~ 0.06":
    # rho_c = 0.06 corresponds to a ratio of sqrt(4 / 1.18) = 1.841.
    rho = infer_rho_c(1.77, 4)
    assert rho == pytest.approx((4 / 1.77**2 - 1) / 3, rel=1e-14)
    assert rho == pytest.approx(0.0923, abs=5e-5)
    assert ceg_ratio(4, 0.06) == pytest.approx(1.8411, abs=5e-5)
    assert ceg_ratio(4, rho) == pytest.approx(1.77)


def test_infer_rho_c_range():
    with pytest.raises(ValueError, match=r"ratio must lie in \(0, sqrt\(k\)\].*rho_c < 0"):
        infer_rho_c(2.01, 4)
    with pytest.raises(ValueError, match=r"ratio must lie in \(0, sqrt\(k\)\]"):
        infer_rho_c(0.0, 4)
    with pytest.raises(ValueError, match="k must be >= 2"):
        infer_rho_c(1.0, 1)
    assert infer_rho_c(0.5, 4) == 1.0  # aggregate worse than chain: clipped to the model's edge
    assert infer_rho_c(ceg_ratio(2, 0.0), 2) == 0.0


def test_gains_eq4_eq6():
    assert drift_corrected_gain(0.9, [1, 4]) == pytest.approx(0.9 * (1 + 0.5) / 2)
    assert drift_corrected_gain(1.2, [4, 4, 4]) == pytest.approx(0.6)
    prof = [1, 2, 4, 8]
    assert bias_aware_gain(0.8, prof, 0.0) == pytest.approx(drift_corrected_gain(0.8, prof))
    assert bias_aware_gain(0.8, prof, 1.0) == pytest.approx(0.8)
    manual = 0.8 * np.mean([math.sqrt((1 + (k - 1) * 0.3) / k) for k in prof])
    assert bias_aware_gain(0.8, prof, 0.3) == pytest.approx(manual)
    assert bias_aware_gain(0.8, prof, 0.3) == pytest.approx(0.8 * np.mean(1 / ceg_ratio(np.array(prof), 0.3)))
    for bad in ([], [0, 2], [1.5], [[1, 2]], ["x"]):
        with pytest.raises(ValueError, match="k_profile"):
            drift_corrected_gain(0.9, bad)
    with pytest.raises(ValueError, match="rho"):
        drift_corrected_gain(-0.1, [1, 2])
    with pytest.raises(ValueError, match=r"rho_c must lie in \[0, 1\]"):
        bias_aware_gain(0.9, [1, 2], 1.5)


BAD = [
    (dict(k=0), r"k must be an integer >= 1"),
    (dict(k=2.5), r"k must be an integer >= 1"),
    (dict(k=[2, -1]), r"k must be an integer >= 1"),
    (dict(rho_c=-0.1), r"rho_c must lie in \[0, 1\]"),
    (dict(rho_c=1.1), r"rho_c must lie in \[0, 1\]"),
    (dict(rho_c=float("nan")), r"rho_c must be finite"),
    (dict(sigma=-1.0), r"sigma must be >= 0"),
    (dict(T=0), r"T must be an integer >= 1"),
    (dict(T=3.5), r"T must be an integer >= 1"),
    (dict(L=float("inf")), r"L must be finite"),
]
GOOD = dict(k=4, rho_c=0.1, sigma=1.0, T=5, L=1.0)


@pytest.mark.parametrize("bad, msg", BAD)
def test_bad_parameters_raise(bad, msg):
    args = dict(GOOD, **bad)
    with pytest.raises(ValueError, match=msg):
        validate_noise_params(**args)
    with pytest.raises(ValueError, match=msg):
        expected_ceg(args["sigma"], args["k"], args["rho_c"], args["T"], args["L"])
    with pytest.raises(ValueError, match=msg):
        affine_noise_error(KEY, args["k"], args["rho_c"], args["sigma"], args["T"], args["L"], trials=4)
    if "L" not in bad:
        with pytest.raises(ValueError, match=msg):
            rule_noise_error(KEY, k=args["k"], rho_c=args["rho_c"], sigma=args["sigma"], T=args["T"], trials=4)


def test_bad_kernel_options_raise():
    with pytest.raises(ValueError, match="same length"):
        affine_noise_error(KEY, [1, 2], 0.1, [1.0, 2.0, 3.0], 5, trials=4)
    with pytest.raises(ValueError, match="1-D"):
        affine_noise_error(KEY, [[1, 2]], 0.1, 1.0, 5, trials=4)
    with pytest.raises(ValueError, match="max_k = 2 is smaller than the largest k = 4"):
        affine_noise_error(KEY, 4, 0.1, 1.0, 5, trials=4, max_k=2)
    with pytest.raises(ValueError, match="max_T = 3 is smaller than the largest T = 5"):
        affine_noise_error(KEY, 4, 0.1, 1.0, 5, trials=4, max_T=3)
    with pytest.raises(ValueError, match="trials must be an integer >= 1"):
        affine_noise_error(KEY, 4, 0.1, 1.0, 5, trials=0)
    with pytest.raises(ValueError, match="aggregate must be one of"):
        affine_noise_error(KEY, 4, 0.1, 1.0, 5, trials=4, aggregate="mode")
    with pytest.raises(ValueError, match="dtype must be float32 or float64"):
        affine_noise_error(KEY, 4, 0.1, 1.0, 5, trials=4, dtype="int32")
    with pytest.raises(ValueError, match="point_ids"):
        affine_noise_error(KEY, [1, 2], 0.1, 1.0, 5, trials=4, point_ids=[0])
    with pytest.raises(ValueError, match="parity0"):
        rule_noise_error(KEY, k=2, rho_c=0.1, sigma=1.0, T=5, trials=4, parity0=2)
    with pytest.raises(ValueError, match="level0 must be an integer in 1..9"):
        rule_noise_error(KEY, k=2, rho_c=0.1, sigma=1.0, T=5, trials=4, level0=0)
    with pytest.raises(ValueError, match="value0"):
        rule_noise_error(KEY, k=2, rho_c=0.1, sigma=1.0, T=5, trials=4, value0=float("nan"))


# ----------------------------------------------------------------------------- Monte Carlo vs theory
def _mean_se(x):
    x = np.asarray(x, dtype=np.float64)
    return x.mean(axis=-1), x.std(axis=-1, ddof=1) / math.sqrt(x.shape[-1])


# (k, rho_c, sigma, T, L): L = 1 (random walk, eq. 3), |L| < 1, L < 0 and L > 1
CASES = [
    (1, 0.0, 1.0, 10, 1.0),
    (4, 0.1, 0.5, 12, 1.0),
    (8, 0.3, 2.0, 6, 0.5),
    (3, 0.0, 1.0, 20, 0.9),
    (2, 1.0, 1.0, 8, 1.0),
    (5, 0.06, 1.0, 15, -0.8),
    (6, 0.5, 0.3, 1, 1.0),
    (7, 0.2, 1.0, 9, 1.05),
]


def test_monte_carlo_matches_expected_ceg():
    k, rho, sigma, T, L = (np.array(c) for c in zip(*CASES))
    ceg = affine_noise_error(KEY, k, rho, sigma, T, L, trials=20_000, dtype="float64")
    assert ceg.shape == (len(CASES), 20_000) and ceg.dtype == np.float64
    mean, se = _mean_se(ceg)
    theory = expected_ceg(sigma, k, rho, T, L)
    z = (mean - theory) / se
    assert np.all(np.abs(z) < 4), z


def test_monte_carlo_float32():
    ceg = affine_noise_error(KEY, [1, 4], [0.0, 0.2], 1.0, [12, 12], 1.0, trials=20_000, dtype="float32")
    assert ceg.dtype == np.float32
    mean, se = _mean_se(ceg)
    z = (mean - expected_ceg(1.0, np.array([1, 4]), np.array([0.0, 0.2]), 12)) / se
    assert np.all(np.abs(z) < 4), z


def test_chain_aggregate_ratio_eq5():
    ks, rhos = (2, 4, 8), (0.0, 0.06, 0.3, 1.0)
    grid = [(k, r) for k in ks for r in rhos]
    k = np.array([g[0] for g in grid])
    rho = np.array([g[1] for g in grid])
    n, T = 20_000, 6
    agg = affine_noise_error(KEY, k, rho, 1.0, T, 1.0, trials=n)
    # chains (k = 1) with their own noise (ids 1000+), plus, for rho_c = 1, chains with the aggregates' ids
    one = np.flatnonzero(rho == 1.0)
    chain_all = affine_noise_error(
        KEY,
        1,
        np.concatenate([rho, np.ones(one.size)]),
        1.0,
        T,
        1.0,
        trials=n,
        point_ids=np.concatenate([np.arange(len(grid)) + 1000, one]),
    )
    chain = chain_all[: len(grid)]
    (ma, sa), (mc, sc) = _mean_se(agg), _mean_se(chain)
    ratio = mc / ma
    sd = ratio * np.sqrt((sc / mc) ** 2 + (sa / ma) ** 2)  # delta method, independent samples
    theory = ceg_ratio(k, rho)
    assert np.all(np.abs(ratio - theory) < 4 * sd), (ratio, theory, sd)
    assert np.all(sd < 0.02 * theory)  # the CI is tight enough to tell the rho_c apart
    # rho_c = 1: all agents share the noise, so with the same point id the aggregate *is* the chain
    np.testing.assert_array_equal(chain_all[len(grid) :], agg[one])


# ----------------------------------------------------------------------------- batching and masking
def test_masking_batch_equals_points_alone():
    k = np.array([1, 8, 1, 8, 3])
    T = np.array([5, 5, 12, 12, 7])
    rho = np.array([0.0, 0.2, 0.5, 1.0, 0.06])
    sigma = np.array([1.0, 0.5, 2.0, 1.0, 0.3])
    L = np.array([1.0, 0.9, 1.0, -0.5, 1.1])
    n = 64
    # alone: (k, T) = (1, 5) has both agents and steps masked in the batch, (8, 5) steps, (1, 12) agents
    for agg, alone_points in (("mean", (0,)), ("median", (1, 2))):
        ceg, steps = affine_noise_error(KEY, k, rho, sigma, T, L, trials=n, aggregate=agg, trace=True)
        assert ceg.shape == (5, n) and steps.shape == (5, n, 12)
        for i in range(5):
            assert np.all(np.isnan(steps[i, :, T[i] :])) and not np.any(np.isnan(steps[i, :, : T[i]]))
        np.testing.assert_allclose(np.nansum(steps, axis=-1), ceg, rtol=1e-12)
        # each point alone (max_k = k, max_T = T: nothing masked) gives the same result
        for i in alone_points:
            alone, alone_steps = affine_noise_error(
                KEY, k[i], rho[i], sigma[i], T[i], L[i], trials=n, aggregate=agg, trace=True, point_ids=i
            )
            assert alone.shape == (n,) and alone_steps.shape == (n, T[i])
            np.testing.assert_allclose(ceg[i], alone, rtol=1e-12, atol=0)
            np.testing.assert_allclose(steps[i, :, : T[i]], alone_steps, rtol=1e-12, atol=0)
    # the per-point kernel is vmap-ready (the skipped steps t > T become selects): same results
    fn = partial(affine_noise_point, trials=n, max_k=8, max_T=12, aggregate="median", trace=True, dtype="float64")
    keys = jax.vmap(lambda i: jax.random.fold_in(KEY, i))(np.arange(5, dtype=np.uint32))
    v_ceg, v_steps = jax.jit(jax.vmap(fn))(keys, k, rho, sigma, T, L)
    np.testing.assert_allclose(v_ceg, ceg, rtol=1e-12, atol=0)
    np.testing.assert_allclose(v_steps, steps, rtol=1e-12, atol=0)
    # neither do the order of the points, the chunking and larger static maxima
    perm = np.array([3, 0, 4, 2, 1])
    shuffled = affine_noise_error(
        KEY,
        k[perm],
        rho[perm],
        sigma[perm],
        T[perm],
        L[perm],
        trials=n,
        aggregate="median",
        point_ids=perm,
        chunk_points=2,
        max_k=11,
        max_T=15,
    )
    np.testing.assert_allclose(shuffled, ceg[perm], rtol=1e-12, atol=0)
    # a different key gives different noise; the same key the same
    np.testing.assert_array_equal(
        affine_noise_error(KEY, k, rho, sigma, T, L, trials=n, aggregate="median", trace=True)[0], ceg
    )
    assert not np.any(
        affine_noise_error(jax.random.key(1), k, rho, sigma, T, L, trials=n, aggregate="median", trace=True)[0] == ceg
    )


def test_aggregate_masked_median_matches_numpy():
    rng = np.random.default_rng(3)
    xs = [rng.normal(size=(max_k, 40)) for max_k in (7, 20)]  # Batcher's network (8) and bitonic (32)
    for x in xs:
        x[:, 0] = 1.0  # ties

    @jax.jit
    def both(xs):
        return [
            jax.vmap(lambda kk: (_aggregate(x, kk, "median"), _aggregate(x, kk, "mean")))(  # noqa: B023
                np.arange(1, x.shape[0] + 1, dtype=np.int32)
            )
            for x in xs
        ]

    for x, (med, mean) in zip(xs, both(xs)):
        ks = range(1, x.shape[0] + 1)
        np.testing.assert_allclose(
            np.asarray(med), np.stack([np.median(x[:kk], axis=0) for kk in ks]), rtol=1e-14, atol=1e-15
        )
        np.testing.assert_allclose(
            np.asarray(mean), np.stack([np.mean(x[:kk], axis=0) for kk in ks]), rtol=1e-14, atol=1e-15
        )


def _median_variance(n):
    """Exact variance of the median of n (odd) standard normals, from the order-statistic density."""
    r = (n + 1) // 2
    c = math.exp(math.lgamma(n + 1) - 2 * math.lgamma(r))
    norm = scipy.stats.norm

    def x2_density(x):
        return x * x * c * (norm.cdf(x) * norm.sf(x)) ** (r - 1) * norm.pdf(x)

    return scipy.integrate.quad(x2_density, -np.inf, np.inf)[0]


def test_median_aggregation():
    n = 20_000
    # points: k = 1 and 2 (median = mean), k = 9 for one step (e_1 = median of 9 normals), k = 9 over 10 steps
    k = np.array([1, 2, 9, 9])
    rho = np.array([0.3, 0.3, 0.0, 0.1])
    T = np.array([9, 9, 1, 10])
    L = np.array([0.9, 0.9, 1.0, 1.0])
    med = affine_noise_error(KEY, k, rho, 1.0, T, L, trials=n, aggregate="median")
    mean = affine_noise_error(KEY, k, rho, 1.0, T, L, trials=n, aggregate="mean")
    np.testing.assert_array_equal(med[0], mean[0])  # k = 1: the one output
    np.testing.assert_allclose(med[1], mean[1], rtol=1e-13)  # k = 2: mean of the two middle = the mean
    # k = 33 for one step (bitonic network), in a batch with k = 20 (rows masked)
    med33 = affine_noise_error(KEY, [33, 20], 0.0, 1.0, 1, trials=n, aggregate="median")[0]
    for sample, var in ((med[2], _median_variance(9)), (mean[2], 1 / 9), (med33, _median_variance(33))):
        m2, se = _mean_se(sample**2)
        assert abs(m2 - var) < 4 * se, (m2, var, se)
    # the median is noisier, its variance over the mean's -> pi/2 as k grows
    assert _median_variance(1) == pytest.approx(1.0)  # the density integration itself
    assert 1.4 < _median_variance(9) * 9 < _median_variance(33) * 33 < math.pi / 2
    assert np.mean(med[2] ** 2) > 1.3 * np.mean(mean[2] ** 2)
    # and over a whole run the median's E_ceg is larger (paired: same noise)
    d_mean, d_se = _mean_se(med[3] - mean[3])
    assert d_mean > 4 * d_se and d_mean > 0


# ----------------------------------------------------------------------------- the nonlinear rule
RULE_TRIALS = 2000


def test_rule_noise_sigma_zero_is_exact():
    for agg in ("mean", "median"):
        ceg, steps = rule_noise_error(
            KEY,
            k=[1, 4, 7],
            rho_c=[0.0, 0.5, 1.0],
            sigma=0.0,
            T=[12, 5, 12],
            trials=RULE_TRIALS,
            aggregate=agg,
            trace=True,
            value0=[50.0, 12.34, 80.0],
            parity0=[0, 1, "B"],
            level0=[3, 9, 1],
        )
        assert ceg.dtype == np.float64 and ceg.shape == (3, RULE_TRIALS) and steps.shape == (3, RULE_TRIALS, 12)
        assert np.all(ceg == 0.0)
        assert np.all(steps[:, :, :5] == 0.0) and np.all(np.isnan(steps[1, :, 5:]))


def test_rule_noise_grows_with_T_and_breaks_sqrt_k():
    ceg, steps = rule_noise_error(
        KEY,
        k=np.array([1, 4, 4]),
        rho_c=0.0,
        sigma=0.01,
        T=np.array([12, 12, 5]),
        trials=RULE_TRIALS,
        trace=True,
        point_ids=[0, 1, 1],
        max_k=7,
    )
    assert np.all(np.isfinite(ceg)) and np.all(ceg > 0)
    np.testing.assert_allclose(np.nansum(steps, axis=-1), ceg, rtol=1e-12)
    # the same point id gives the same noise, so T = 5 is a prefix of T = 12: error only accumulates
    np.testing.assert_array_equal(steps[2, :, :5], steps[1, :, :5])
    assert np.all(ceg[1] >= ceg[2])
    assert ceg[1].mean() > 2 * ceg[2].mean()
    # Chain/aggregate ratio at small sigma. Rules 2-3 are discontinuous (the 0.5 decimal threshold shifts
    # V_new by 2; thresholds switch Parity and Level), and the task's true trajectory sits on such a
    # threshold (V_raw = 48.5 at step 2), so any noise flips branches and errors of O(1), not O(sigma),
    # accumulate: 4 agents do not buy the sqrt(4) = 2 of eq. 3 / eq. 5 (measured: ~1.0).
    ratio = ceg[0].mean() / ceg[1].mean()
    print(f"rule, sigma=0.01, k=4, T=12: chain/aggregate E_ceg ratio {ratio:.3f} (affine model: 2)")
    assert ratio < 0.75 * 2.0
    assert ceg[1].mean() > 100 * expected_ceg(0.01, 4, 0.0, 12)  # far above the linear-model prediction
