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
        return jnp.asarray(A, jnp.float32) @ t + jnp.asarray(b, jnp.float32) + 0.1 * jax.random.normal(
            jax.random.fold_in(k, 1), (5,))

    W = np.diag(w)
    theta_star = np.linalg.solve(A.T @ W @ A, A.T @ W @ (target - b - e))
    return simulate, target, w, key, theta_star


@pytest.mark.parametrize("grad,steps,lr", [("pathwise", 1500, 0.05), ("es", 1500, 0.05)])
def test_fit_smm_reaches_the_weighted_least_squares_optimum(grad, steps, lr):
    simulate, target, w, key, theta_star = _problem()
    params = [Param("a", -10.0, 10.0, 0.0), Param("b", -math.inf, math.inf, 0.5),
              Param("c", theta_star[2] - 6.0, math.inf, theta_star[2] - 1.0)]
    res = fit_smm(simulate, params, target, weights=w, steps=steps, lr=lr, grad=grad, key=key,
                  es_sigma=0.02, es_pairs=16)
    assert isinstance(res, FitResult)
    got = np.array([res.params[k] for k in "abc"])
    np.testing.assert_allclose(got, theta_star, atol=2e-2)
    A_loss = res.loss
    assert A_loss <= res.history[0] and A_loss == pytest.approx(res.history.min())
    assert res.iterations == steps and res.history.shape == (steps,)


def test_transforms_round_trip_and_respect_boxes():
    import jax.numpy as jnp

    params = [Param("p", 0.0, 1.0, 0.3), Param("s", 2.0, math.inf, 5.0), Param("n", -math.inf, -1.0, -4.0),
              Param("f", -math.inf, math.inf, 1.5)]
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

    res = fit_smm(lambda t, k: jnp.stack([t["x"]]), [Param("x", 0.0, 1.0, 0.5)], [0.8], steps=500, lr=0.1,
                  grad="pathwise", tol=1e-8)
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
