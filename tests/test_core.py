"""The public pure core (mascot.Modes, mascot.Policy, mascot.rollout): jit, vmap, inside a user's own
function, and the same answers as the batched driver and the float64 reference of Algorithm 1."""

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mascot
from mascot.graphs import complete_weights, ring_weights
from mascot.theory import algorithm1

pytestmark = pytest.mark.x64

N, D, B = 6, 4, 96
W1, W2 = complete_weights(N, 0.4), ring_weights(N, 0.6)
C1, C2 = 600.0, 100.0


@pytest.fixture(scope="module")
def x0s():
    return np.random.default_rng(7).uniform(0.0, 1.0, (B, N, D))


def _batched(max_rounds, **kw):
    return jax.jit(jax.vmap(partial(mascot.rollout, max_rounds=max_rounds, **kw), in_axes=(0, None, None)))


@pytest.mark.parametrize("strategy", ["adaptive", "complete", "ring", "mode1"])
@pytest.mark.parametrize("b0", [900.0, 2500.0, 1e6])  # budget failures, consensus, and max_rounds at 12 rounds
def test_jit_vmap_rollout_equals_the_driver_and_the_reference(x0s, strategy, b0):
    modes = mascot.Modes(W1, W2, C1, C2)
    policy = mascot.Policy(eta=0.12, eps=0.02, b0=b0, strategy=strategy)
    out = _batched(12)(jnp.asarray(x0s), modes, policy)
    for method in ("modal", "matrix"):
        ref = mascot.simulate_consensus(
            x0s, W1, W2, C1, C2, 0.12, 0.02, b0, strategy=strategy, max_rounds=12, method=method
        )
        np.testing.assert_array_equal(out.rounds, ref.rounds)
        np.testing.assert_array_equal(out.tokens, ref.tokens)
        np.testing.assert_array_equal(out.status, ref.status)
        np.testing.assert_allclose(out.d_final, ref.d_final, rtol=1e-12)
    for i in range(0, B, 13):  # the plain float64 Python reference (theory.algorithm1)
        a = algorithm1(x0s[i], W1, W2, C1, C2, 0.12, 0.02, b0, strategy=strategy, max_rounds=12)
        assert (int(out.rounds[i]), float(out.tokens[i]), int(out.status[i])) == (a.rounds, a.tokens, a.status)
        np.testing.assert_allclose(out.x_final[i], a.x_final, rtol=1e-12)
    assert set(np.unique(out.status)) <= {0, 1, 2}


def test_every_outcome_is_reached(x0s):
    """The parametrisation above covers consensus, BudgetFail and MaxRounds."""
    seen = set()
    for b0 in (900.0, 2500.0, 1e6):
        for strategy in ("adaptive", "ring"):
            seen |= set(
                np.unique(
                    _batched(12)(
                        jnp.asarray(x0s), mascot.Modes(W1, W2, C1, C2), mascot.Policy(0.12, 0.02, b0, strategy)
                    ).status
                ).tolist()
            )
    assert seen == {0, 1, 2}


def test_traces_equal_the_drivers(x0s):
    policy = mascot.Policy(0.12, 0.02, 2500.0)
    out = _batched(20, trace=True)(jnp.asarray(x0s), mascot.Modes(W1, W2, C1, C2), policy)
    ref = mascot.simulate_consensus(x0s, W1, W2, C1, C2, 0.12, 0.02, 2500.0, max_rounds=20, trace=True, method="matrix")
    np.testing.assert_allclose(out.d_trace, ref.d_trace, rtol=1e-12)
    np.testing.assert_array_equal(out.b_trace, ref.b_trace)
    np.testing.assert_array_equal(out.sigma_trace, ref.sigma_trace)


def test_vmap_over_a_policy_field_equals_a_python_loop(x0s):
    etas = jnp.linspace(0.03, 0.4, 9)
    modes = mascot.Modes(W1, W2, C1, C2)
    over_eta = jax.jit(
        jax.vmap(lambda eta: mascot.rollout(x0s[3], modes, mascot.Policy(eta, 0.02, 4000.0), max_rounds=40))
    )
    got = over_eta(etas)
    for j, eta in enumerate(np.asarray(etas)):
        one = mascot.rollout(x0s[3], modes, mascot.Policy(float(eta), 0.02, 4000.0), max_rounds=40)
        assert (int(got.rounds[j]), float(got.tokens[j]), int(got.status[j])) == (
            int(one.rounds),
            float(one.tokens),
            int(one.status),
        )
    assert len(set(np.asarray(got.tokens).tolist())) > 1  # eta matters


def test_rollout_inside_a_users_jitted_function(x0s):
    """A user's own objective: the mean tokens of a batch as a function of the mode-2 cost, jitted whole."""

    @jax.jit
    def mean_tokens(c2, x):
        out = jax.vmap(
            lambda xi: mascot.rollout(
                xi, mascot.Modes(W1, W2, C1, c2), mascot.Policy(0.12, 0.02, 5000.0), max_rounds=30
            )
        )(x)
        return jnp.mean(out.tokens), jnp.sum(out.status == 0)

    for c2 in (50.0, 100.0):
        m, ok = mean_tokens(c2, jnp.asarray(x0s))
        ref = mascot.simulate_consensus(x0s, W1, W2, C1, c2, 0.12, 0.02, 5000.0, max_rounds=30)
        assert float(m) == pytest.approx(float(np.mean(ref.tokens)), rel=1e-12) and int(ok) == int(
            np.sum(ref.status == 0)
        )


def test_noise_follows_the_drivers_keys(x0s):
    """Round k of a trajectory adds noise * normal(fold_in(key, k), (N, d)), as the driver's matrix path does."""
    keys = jax.random.split(jax.random.key(11), 32)
    modes, policy = mascot.Modes(W1, W2, C1, C2), mascot.Policy(0.12, 0.02, 5000.0)
    noisy = jax.jit(jax.vmap(lambda x, k: mascot.rollout(x, modes, policy, max_rounds=25, noise=0.01, key=k)))
    out = noisy(jnp.asarray(x0s[:32]), keys)
    ref = mascot.simulate_consensus(
        x0s[:32], W1, W2, C1, C2, 0.12, 0.02, 5000.0, max_rounds=25, noise=0.01, key=keys, method="matrix"
    )
    np.testing.assert_array_equal(out.rounds, ref.rounds)
    np.testing.assert_array_equal(out.status, ref.status)
    np.testing.assert_allclose(out.d_final, ref.d_final, rtol=1e-10)
    quiet = jax.vmap(
        lambda x: mascot.rollout(x, mascot.Modes(W1, W2, C1, C2), mascot.Policy(0.12, 0.02, 5000.0), max_rounds=25)
    )(jnp.asarray(x0s[:32]))
    assert not np.array_equal(np.asarray(out.d_final), np.asarray(quiet.d_final))


def test_float32_and_bad_input():
    x = np.random.default_rng(0).uniform(size=(N, D)).astype(np.float32)
    out = mascot.rollout(x, mascot.Modes(W1, W2, C1, C2), mascot.Policy(0.12, 0.02, 3000.0), max_rounds=30)
    assert out.d_final.dtype == jnp.float32 and out.x_final.shape == (N, D)
    with pytest.raises(ValueError, match="strategy must be one of"):
        mascot.Policy(strategy="sometimes")
    with pytest.raises(ValueError, match="needs key"):
        mascot.rollout(x, mascot.Modes(W1, W2, C1, C2), mascot.Policy(), noise=0.1)
    # found by an outside tester: noise vmapped over levels without a key ran every level without noise
    with pytest.raises(ValueError, match="noise is traced .* give key too"):
        jax.vmap(lambda s: mascot.rollout(x, mascot.Modes(W1, W2, C1, C2), mascot.Policy(), noise=s).rounds)(
            jnp.array([0.0, 0.05])
        )
    for bad in (-0.01, float("nan"), "0.1"):  # (a later tester: NaN ran, "0.1" raised numpy's UFuncTypeError)
        with pytest.raises(ValueError, match="noise must be a finite standard deviation >= 0"):
            mascot.rollout(x, mascot.Modes(W1, W2, C1, C2), mascot.Policy(), noise=bad, key=jax.random.key(0))
    for key, said in (
        (jax.random.split(jax.random.key(0), 3), r"key must be one key \(vmap over a batch of keys\)"),
        (np.zeros(3, np.int32), r"raw uint32 key data of shape \(2,\)"),
    ):
        with pytest.raises(ValueError, match=said):
            mascot.rollout(x, mascot.Modes(W1, W2, C1, C2), mascot.Policy(), noise=0.1, key=key)
    assert int(mascot.rollout(x, mascot.Modes(W1, W2, C1, C2), mascot.Policy(), max_rounds=np.int64(3)).rounds) <= 3
    with pytest.raises(ValueError, match=r"shape \(N, d\)"):
        mascot.rollout(x[None], mascot.Modes(W1, W2, C1, C2), mascot.Policy())
    with pytest.raises(TypeError, match="mascot.Modes"):
        mascot.rollout(x, (W1, W2, C1, C2), mascot.Policy())
    with pytest.raises(ValueError, match="max_rounds"):
        mascot.rollout(x, mascot.Modes(W1, W2, C1, C2), mascot.Policy(), max_rounds=-1)
    # found by an outside tester: shapes are known when the rollout is traced, so a mismatch is an InputError
    # naming the field, not XLA's dot_general or broadcasting message (and 2**40 rounds do not fit int32)
    from mascot.errors import InputError

    bad = [
        ((x[:-1], mascot.Modes(W1, W2, C1, C2)), r"modes.W1 must have shape \(N, N\) = \(5, 5\)"),
        ((x, mascot.Modes(W1, np.eye(N + 1), C1, C2)), r"modes.W2 must have shape"),
        ((x, mascot.Modes(W1, W2, np.full(2, C1), C2)), r"modes.c1 must be a scalar per trajectory"),
    ]
    for (xx, modes), match in bad:
        with pytest.raises(InputError, match=match):
            mascot.rollout(xx, modes, mascot.Policy())
    with pytest.raises(InputError, match="int32"):
        mascot.rollout(x, mascot.Modes(W1, W2, C1, C2), mascot.Policy(), max_rounds=2**40)
    # found by an outside tester: a row-stochastic (DeGroot) W ran 200 rounds to MaxRounds with D = 0.077 while the
    # final beliefs agreed to 1e-16 (the rollout keeps the mean fixed); refused where W's values are known
    degroot = np.array([[0.6, 0.4, 0.0], [0.0, 0.6, 0.4], [0.3, 0.3, 0.4]])
    with pytest.raises(InputError, match="modes.W2 is not doubly stochastic: column sums must be 1"):
        mascot.rollout(np.ones((3, 1)), mascot.Modes(np.eye(3), degroot, 1.0, 1.0), mascot.Policy(strategy="ring"))
    # found by an outside tester: bfloat16 beliefs kept the budget in bfloat16 (10 rounds of cost 3 from b0 = 2000
    # counted 0 tokens; float16 counted 40 for 30); half precision and complex beliefs are refused when traced
    for dt in (jnp.bfloat16, jnp.float16, jnp.complex64):
        with pytest.raises(InputError, match=f"x0 has dtype {jnp.dtype(dt).name}: rollout works in float32 or float64"):
            jax.jit(lambda x: mascot.rollout(x, mascot.Modes(W1, W2, C1, C2), mascot.Policy()).tokens)(x.astype(dt))
    with pytest.raises(InputError, match="is a rbg key; mascot takes threefry2x32 keys"):  # (shared noise under vmap)
        mascot.rollout(x, mascot.Modes(W1, W2, C1, C2), mascot.Policy(), noise=0.1, key=jax.random.key(0, impl="rbg"))
    with pytest.raises(InputError, match="key must be a PRNG key .*, not an int"):  # (JAX's "invalid PRNG key data")
        mascot.rollout(x, mascot.Modes(W1, W2, C1, C2), mascot.Policy(), noise=0.1, key=3)
    jax.config.update("jax_default_prng_impl", "rbg")  # raw key data would be read as rbg data
    try:
        with pytest.raises(InputError, match="JAX's default PRNG is 'rbg'"):
            mascot.rollout(x, mascot.Modes(W1, W2, C1, C2), mascot.Policy(), noise=0.1, key=np.zeros(4, np.uint32))
    finally:
        jax.config.update("jax_default_prng_impl", "threefry2x32")
    # values are the caller's (unknown under jit): a non-finite x0 stops at once, as the docstring says
    nan = mascot.rollout(np.full((N, D), np.nan), mascot.Modes(W1, W2, C1, C2), mascot.Policy())
    assert int(nan.rounds) == 0 and int(nan.status) == int(mascot.Status.MAX_ROUNDS)


def test_the_library_s_subpackages_load_on_first_use():
    """Found by an outside tester: ``import mascot; mascot.graphs`` was an AttributeError."""
    import subprocess
    import sys

    code = "import sys, mascot; assert 'mascot.graphs' not in sys.modules; print(mascot.graphs.star(5).shape)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "(5, 5)", r.stderr
    # a later tester: the docs' dotted paths (mascot.limits.check_budget, mascot.analysis.plot.plot, ...) failed after
    # a plain `import mascot`, and mascot.kernels.core worked only once something had loaded it
    names = [
        "limits.check_budget",
        "analysis.plot.plot",
        "sweep.store.status_labels",
        "sweep.evaluate.DeviceCache",
        "kernels.core.rollout",
        "kernels.spectra.gat_transition",
        "theory.spectra.time_varying_sr",
        "backends.openai_options.redact",
        "protocols.state_tracking.baselines.EchoBackend",
        "protocols.deliberation.harness.run_deliberation",
        "stable.log",
    ]
    code = "import functools, mascot; print(all(callable(functools.reduce(getattr, n.split('.'), mascot)) for n in %r))"
    r = subprocess.run([sys.executable, "-c", code % names], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "True", r.stderr
    with pytest.raises(AttributeError, match="module 'mascot.analysis' has no attribute 'nope'"):
        mascot.analysis.nope  # noqa: B018
    assert set(mascot._SUBMODULES) <= set(dir(mascot)) and "studies" not in mascot._SUBMODULES
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        mascot.nope  # noqa: B018


def test_the_driver_takes_the_papers_strategy_names(x0s):
    a = mascot.simulate_consensus(x0s[:8], W1, W2, C1, C2, 0.12, 0.02, 3000.0, strategy="complete")
    b = mascot.simulate_consensus(x0s[:8], W1, W2, C1, C2, 0.12, 0.02, 3000.0, strategy="mode1")
    np.testing.assert_array_equal(a.rounds, b.rounds)


def test_noise_model_core_under_jit_and_vmap_equals_the_driver():
    """mascot.affine_noise_point is the pure core of mascot.affine_noise_error: point p of the driver is the
    core with fold_in(key, p), also vmapped over parameters inside a user's jit."""
    key = jax.random.key(4)
    sig = jnp.array([0.5, 1.0, 2.0])
    core = jax.jit(
        jax.vmap(
            lambda p, s: mascot.affine_noise_point(
                jax.random.fold_in(key, p), 3, 0.25, s, 6, 0.9, trials=200, max_k=3, max_T=6
            )[0]
        )
    )
    got = core(jnp.arange(3, dtype=jnp.uint32), sig)
    ref = mascot.affine_noise_error(key, 3, 0.25, np.asarray(sig), 6, 0.9, trials=200, dtype="float64")
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    # found by an outside tester: k > max_k aggregated max_k outputs (a plausible, wrong E_ceg); outside its
    # compiled ranges the core gives NaN, inside them the same numbers
    at = jax.jit(
        lambda k, T: mascot.affine_noise_point(key, k, 0.25, 1.0, T, 0.9, trials=50, max_k=3, max_T=6, trace=True)
    )
    for k, T in ((4, 6), (0, 6), (3, 7), (3, 0)):
        ceg, steps = at(k, T)
        assert np.isnan(ceg).all() and np.isnan(steps).all(), (k, T)
    ceg, steps = at(3, 5)
    assert np.isfinite(ceg).all() and np.isfinite(steps[:, :5]).all() and np.isnan(steps[:, 5]).all()
    # a later tester: k = 2.7 ran 2 agents, sigma < 0 ran |sigma|, a typo in aggregate ran the median, and an rbg
    # key's results depended on the batch
    point = partial(mascot.affine_noise_point, trials=20, max_k=3, max_T=6)
    assert (
        np.isnan(point(key, 2.7, 0.25, 1.0, 6, 0.9)[0]).all() and np.isnan(point(key, 2, 0.25, -1.0, 6, 0.9)[0]).all()
    )
    with pytest.raises(ValueError, match="aggregate must be one of mean, median; got 'MEAN'"):
        point(key, 2, 0.25, 1.0, 6, 0.9, aggregate="MEAN")
    with pytest.raises(ValueError, match="is a rbg key"):
        point(jax.random.key(0, impl="rbg"), 2, 0.25, 1.0, 6, 0.9)


def test_theory_and_drivers_under_jit_say_what_to_use_and_small_api_fixes():
    """Found by an outside tester: mascot.theory under jax.jit raised TracerArrayConversionError or "d0 must be a
    real number; got JitTracer", the noise drivers "k must be an integer >= 1; got JitTracer"; rule_noise_error
    without x64 raised a RuntimeError (not caught by ``except ValueError``); bias_aware_gain refused the scalar
    k_profile its docstring allowed; sr_spectra took the string "0.5" as a gamma."""
    from mascot.errors import InputError
    from mascot.theory.noise import bias_aware_gain, drift_corrected_gain

    for f, said in (
        (lambda x: mascot.disagreement(x), "X is traced"),
        (lambda w: mascot.contraction_rate(w), "W is traced"),
        (lambda d: mascot.theorem1(d[0, 0], 0.1, 0.03, 0.25, 0.7, 600, 100), "d0 is traced"),
        # (a later tester: these still raised JAX's TracerArrayConversionError)
        (lambda d: mascot.theory.theorem1_batch(d[0], 0.1, 0.03, 0.25, 0.7, 600, 100)[2], "d0 is traced"),
        (lambda d: mascot.theory.certificate_budget(d[0], 0.1, 0.03, 0.25, 0.7, 600, 100), "d is traced"),
        (lambda g: mascot.theory.spectra.closed_form_diagnostics("ring", 5, g[0, 0] / 2).rho, "gamma is traced"),
    ):
        with pytest.raises(InputError, match=f"{said} .*mascot.theory's functions are float64 numpy references"):
            jax.jit(f)(jnp.eye(3))
    with pytest.raises(InputError, match="affine_noise_error is a host driver .* use mascot.affine_noise_point"):
        jax.jit(lambda s: mascot.affine_noise_error(0, 4, 0.0, s, 10, trials=10))(0.1)
    from mascot.kernels.precision import _context

    with _context(False), pytest.raises(InputError, match="rule_noise_error needs 64-bit JAX"):  # (this module: x64)
        mascot.rule_noise_error(0, k=4, rho_c=0.1, sigma=1.0, T=3, trials=10)
    # one count for every step: the mean over steps does not depend on how many there are (eq. 6 by hand)
    assert bias_aware_gain(2.0, 4, 0.3) == bias_aware_gain(2.0, [4, 4, 4], 0.3) == 2.0 * np.sqrt(1.9 / 4)
    assert drift_corrected_gain(2.0, 4) == 1.0
    for bad in (True, "4", [True, False]):  # (taken as counts: a later tester)
        with pytest.raises(InputError, match="k_profile must be a non-empty 1-D sequence of integers"):
            drift_corrected_gain(2.0, bad)
    for g in ("0.5", True):
        with pytest.raises(InputError, match="gamma must be a number"):
            mascot.sr_spectra(np.ones((3, 3)) - np.eye(3), g)
