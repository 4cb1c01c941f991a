"""mascot.calibrate.fit against closed forms.

Reference: a linear-Gaussian simulator m(theta) = A theta + b + e (e a fixed common-random-numbers draw).
Its weighted SMM optimum is the weighted least-squares solution theta* = (A'WA)^-1 A'W (target - b - e),
computed here in numpy float64; both gradient modes must reach it (inside the box)."""

import math

import numpy as np
import pytest

from mascot.calibrate.fit import FitResult, Param, bootstrap, fit_smm, to_constrained, to_unconstrained


def _problem():
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(3)
    A = rng.normal(size=(5, 3))
    b = rng.normal(size=5)
    w = np.array([1.0, 2.0, 0.5, 1.0, 3.0])
    key = jax.random.PRNGKey(7)
    e = np.asarray(0.1 * jax.random.normal(jax.random.fold_in(key, 1), (5,)), dtype=np.float64)
    target = rng.normal(size=5) * 2.0

    def simulate(theta, k):
        t = jnp.stack([theta["a"], theta["b"], theta["c"]])
        # the noise depends on the key: only with common random numbers is the objective deterministic
        return (
            jnp.asarray(A, jnp.float32) @ t
            + jnp.asarray(b, jnp.float32)
            + 0.1 * jax.random.normal(jax.random.fold_in(k, 1), (5,))
        )

    W = np.diag(w)
    theta_star = np.linalg.solve(A.T @ W @ A, A.T @ W @ (target - b - e))
    return simulate, target, w, key, theta_star


@pytest.mark.parametrize("grad,steps,lr", [("pathwise", 1500, 0.05), ("es", 1500, 0.05)])
def test_fit_smm_reaches_the_weighted_least_squares_optimum(grad, steps, lr):
    simulate, target, w, key, theta_star = _problem()
    params = [
        Param("a", -10.0, 10.0, 0.0),
        Param("b", -math.inf, math.inf, 0.5),
        Param("c", theta_star[2] - 6.0, math.inf, theta_star[2] - 1.0),
    ]
    res = fit_smm(
        simulate, params, target, weights=w, steps=steps, lr=lr, grad=grad, key=key, es_sigma=0.02, es_pairs=16
    )
    assert isinstance(res, FitResult)
    got = np.array([res.params[k] for k in "abc"])
    np.testing.assert_allclose(got, theta_star, atol=2e-2)
    A_loss = res.loss
    assert A_loss <= res.history[0] and A_loss == pytest.approx(res.history.min())
    assert res.iterations == steps and res.history.shape == (steps,)


def test_transforms_round_trip_and_respect_boxes():
    import jax.numpy as jnp

    params = [
        Param("p", 0.0, 1.0, 0.3),
        Param("s", 2.0, math.inf, 5.0),
        Param("n", -math.inf, -1.0, -4.0),
        Param("f", -math.inf, math.inf, 1.5),
    ]
    u = to_unconstrained(params)
    back = to_constrained(params, jnp.asarray(u, jnp.float32))
    for p in params:
        assert float(back[p.name]) == pytest.approx(p.init, rel=1e-5)
    big = to_constrained(params, jnp.asarray([50.0, -50.0, -50.0, 0.0]))
    assert 0.0 <= float(big["p"]) <= 1.0 and float(big["s"]) >= 2.0 and float(big["n"]) <= -1.0


def test_param_and_input_validation():
    with pytest.raises(ValueError, match="lo < init < hi"):
        Param("x", 0.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="grad"):
        fit_smm(lambda t, k: t["x"][None], [Param("x", 0, 1, 0.5)], [0.2], grad="adam")
    with pytest.raises(ValueError, match="weights"):
        fit_smm(lambda t, k: t["x"][None], [Param("x", 0, 1, 0.5)], [0.2], weights=[-1.0])


def test_tol_stops_early_and_best_iterate_is_kept():
    import jax.numpy as jnp

    res = fit_smm(
        lambda t, k: jnp.stack([t["x"]]),
        [Param("x", 0.0, 1.0, 0.5)],
        [0.8],
        steps=500,
        lr=0.1,
        grad="pathwise",
        tol=1e-8,
    )
    assert res.iterations < 500 and res.params["x"] == pytest.approx(0.8, abs=1e-3)


def test_bootstrap_stacks_replicates_with_distinct_seeds():
    seen = []

    def refit(b):
        seen.append(b)
        return {"m": float(np.random.default_rng(b).normal()), "k": 1.0}

    arr, names = bootstrap(refit, 50, seed=4)
    assert names == ["m", "k"] and arr.shape == (50, 2) and len(set(seen)) == 50
    assert np.all(arr[:, 1] == 1.0) and abs(arr[:, 0].mean()) < 0.5
    arr2, _ = bootstrap(refit, 50, seed=4)
    np.testing.assert_array_equal(arr, arr2)


def test_linearized_bootstrap_is_the_sandwich_of_a_linear_model():
    """Linear moments m(theta) = B theta (free parameters): the draws are exactly
    theta^ + (B'WB)^-1 B'W (d_b - s_b) (numpy float64), their covariance the sandwich formula."""
    from mascot.calibrate.fit import linearized_bootstrap

    rng = np.random.default_rng(0)
    B = rng.normal(size=(7, 3))
    w = rng.uniform(0.5, 2.0, 7)
    params = [Param(f"t{i}", -math.inf, math.inf, 0.0) for i in range(3)]
    est = {"t0": 0.3, "t1": -1.2, "t2": 2.0}
    d, s = rng.normal(size=(500, 7)), 0.3 * rng.normal(size=(500, 7))
    lb = linearized_bootstrap(lambda th: B @ np.array([th["t0"], th["t1"], th["t2"]]), params, est, d, s, w, h=0.7)
    np.testing.assert_allclose(lb.jacobian, B, rtol=1e-10, atol=1e-12)
    M = np.linalg.solve(B.T @ (w[:, None] * B), B.T * w)
    want = np.array([0.3, -1.2, 2.0]) + (d - s) @ M.T
    np.testing.assert_allclose(lb.draws, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(lb.identified, lb.draws)  # every direction identified
    np.testing.assert_allclose(lb.sd_unclipped, lb.draws.std(0, ddof=1), rtol=1e-12)  # nothing clipped
    assert lb.names == ["t0", "t1", "t2"]
    # a parameter no moment moves gets a huge spread, not a zero one; boxed draws stay inside the box
    params_box = [Param("a", 0.0, 1.0, 0.5), Param("dead", 0.0, 1.0, 0.5)]
    lb = linearized_bootstrap(
        lambda th: np.array([4 * th["a"], 1.0, -2 * th["a"]]),
        params_box,
        {"a": 0.4, "dead": 0.5},
        0.05 * rng.normal(size=(400, 3)),
        np.zeros((400, 3)),
        np.ones(3),
    )
    assert 0.0 <= lb.draws.min() and lb.draws.max() <= 1.0
    assert lb.draws[:, 0].std() < 0.05 and lb.draws[:, 1].std() > 0.3
    # without the unidentified direction's spread: "dead" stays at its estimate, "a" draws are the same
    np.testing.assert_array_equal(lb.identified[:, 1], 0.5)
    np.testing.assert_allclose(lb.identified[:, 0], lb.draws[:, 0], rtol=1e-12)
    with pytest.raises(ValueError, match="must both be"):
        linearized_bootstrap(
            lambda th: np.zeros(3), params_box, {"a": 0.4, "dead": 0.5}, np.zeros((4, 3)), np.zeros((4, 2)), np.ones(3)
        )


def test_gauss_newton_finds_a_nonlinear_least_squares_optimum():
    """m(theta) = (a^2, a b, exp(b), a + b) with target m(1.5, -0.4): from (0.5, 0.5) the polish lands on the
    truth (an exact zero-residual optimum); a start at the optimum is returned unchanged."""
    from mascot.calibrate.fit import gauss_newton

    params = [Param("a", 0.0, 4.0, 1.0), Param("b", -3.0, math.inf, 0.0)]
    f = lambda t: np.array([t["a"] ** 2, t["a"] * t["b"], math.exp(t["b"]), t["a"] + t["b"]])
    target = f({"a": 1.5, "b": -0.4})
    r = gauss_newton(f, params, {"a": 0.5, "b": 0.5}, target, np.ones(4), iters=40, h=1e-4)
    assert r.params["a"] == pytest.approx(1.5, abs=1e-6) and r.params["b"] == pytest.approx(-0.4, abs=1e-6)
    assert r.loss < 1e-12 and np.all(np.diff(r.history) <= 0)
    r0 = gauss_newton(f, params, {"a": 1.5, "b": -0.4}, target, np.ones(4), iters=3, h=1e-4)
    assert r0.params == pytest.approx({"a": 1.5, "b": -0.4}, abs=1e-9)


def test_coordinates_set_the_linearization_and_the_polish():
    """Moments linear in log(theta), m = B log(theta): in log coordinates (a ``Coords``) the Jacobian is B, the
    draws are exactly exp(log theta^ + M (d_b - s_b)) with M = (B'WB)^-1 B'W (numpy float64), and one
    Levenberg-Marquardt run lands on the zero-residual optimum; a step per coordinate is accepted."""
    from mascot.calibrate.fit import Coords, box_coords, gauss_newton, linearized_bootstrap

    rng = np.random.default_rng(1)
    B, w = rng.normal(size=(6, 2)), rng.uniform(0.5, 2.0, 6)
    params = [Param("a", 1e-3, 10.0, 1.0), Param("b", 1e-3, 10.0, 1.0)]
    logc = Coords(lambda v: np.log([v["a"], v["b"]]), lambda u: {"a": float(np.exp(u[0])), "b": float(np.exp(u[1]))})

    def f(th):
        return B @ np.log([th["a"], th["b"]])

    d, s = 0.1 * rng.normal(size=(300, 6)), 0.05 * rng.normal(size=(300, 6))
    lb = linearized_bootstrap(f, params, {"a": 2.0, "b": 0.5}, d, s, w, h=np.array([0.3, 0.1]), coords=logc)
    np.testing.assert_allclose(lb.jacobian, B, rtol=1e-9)
    M = np.linalg.solve(B.T @ (w[:, None] * B), B.T * w)
    np.testing.assert_allclose(lb.draws, np.exp(np.log([2.0, 0.5]) + (d - s) @ M.T), rtol=1e-9)
    # the default is the box transform: its Jacobian is B times d log(theta) / d u, not B
    box = linearized_bootstrap(f, params, {"a": 2.0, "b": 0.5}, d, s, w, h=1e-5)
    u0 = box_coords(params).fwd({"a": 2.0, "b": 0.5})
    dlog = [(10.0 - 1e-3) * math.exp(-u) / (1 + math.exp(-u)) ** 2 / x for u, x in zip(u0, (2.0, 0.5))]
    np.testing.assert_allclose(box.jacobian, B * np.array(dlog), rtol=1e-6)
    target = f({"a": 3.0, "b": 0.2})
    r = gauss_newton(f, params, {"a": 2.0, "b": 0.5}, target, np.ones(6), iters=10, h=0.3, coords=logc)
    assert r.params == pytest.approx({"a": 3.0, "b": 0.2}, rel=1e-9) and r.loss < 1e-20


def test_sd_before_clipping_for_an_estimate_at_its_boxs_edge():
    """m = 3 a (a in [0, 1], as itself, clipped): an estimate at the edge a = 1 has about half its draws
    clipped onto 1; sd_unclipped is the sandwich's s.d. (the draws' before clipping: sd(d) / 3 for w = 1)."""
    from mascot.calibrate.fit import Coords, linearized_bootstrap

    params = [Param("a", 0.0, 1.0, 0.5)]
    c = Coords(
        lambda v: np.array([v["a"]]),
        lambda u: {"a": min(max(float(u[0]), 0.0), 1.0)},
        0.01,
        lambda u: {"a": float(u[0])},
    )
    d = 0.3 * np.random.default_rng(2).normal(size=(2000, 1))
    lb = linearized_bootstrap(
        lambda th: np.array([3 * th["a"]]), params, {"a": 1.0}, d, np.zeros_like(d), np.ones(1), coords=c
    )
    assert lb.draws.max() == 1.0 and 0.4 < (lb.draws[:, 0] == 1.0).mean() < 0.6
    assert lb.sd_unclipped[0] == pytest.approx(d.std(ddof=1) / 3, rel=1e-6)
    assert lb.draws[:, 0].std(ddof=1) < 0.7 * lb.sd_unclipped[0]


def test_robust_cap_is_the_tanh_loss_and_keeps_simulate_free_of_data():
    """``cap``: each moment enters as ``t + c tanh((m - t) / c)``; the loss at the start equals that formula in
    float64, a far-off moment's pull is bounded by ``c``, and the fit with ``cap`` follows the same path as one
    whose simulate applies the transform itself (the data are arguments, so the compiled step is shared)."""
    import jax.numpy as jnp

    target = np.array([1.0, -2.0, 40.0])
    w = np.array([1.0, 4.0, 0.25])
    cap = 3.0 / np.sqrt(w)

    def sim(th, key):
        return jnp.stack([th["a"], th["a"] * th["b"], 10.0 * th["b"] ** 3])

    ps = [Param("a", -5.0, 5.0, 0.5), Param("b", -3.0, 3.0, 0.3)]
    r = fit_smm(sim, ps, target, weights=w, steps=1, lr=0.05, es_sigma=0.1, cap=cap)
    m = np.array([0.5, 0.15, 10.0 * 0.3**3])
    want = np.sum(w * (cap * np.tanh((m - target) / cap)) ** 2)
    assert r.history[0] == pytest.approx(want, rel=1e-5)
    assert r.history[0] < np.sum(w * (m - target) ** 2) / 2  # the 40 - 0.27 error is capped at 6 scales' worth

    def sim_capped(th, key):
        m = sim(th, key)
        return target + cap * jnp.tanh((m - target) / cap)

    a = fit_smm(sim, ps, target, weights=w, steps=25, lr=0.05, es_sigma=0.1, seed=4, cap=cap)
    b = fit_smm(sim_capped, ps, target, weights=w, steps=25, lr=0.05, es_sigma=0.1, seed=4)
    np.testing.assert_allclose(a.history, b.history, rtol=1e-5)
    with pytest.raises(ValueError, match="cap must be > 0"):
        fit_smm(sim, ps, target, weights=w, steps=1, cap=np.array([1.0, 0.0, 1.0]))
