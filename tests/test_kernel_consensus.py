"""The JAX consensus kernel against the plain-Python Algorithm 1 reference (mascot.theory.algorithm1)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import random_doubly_stochastic
from mascot import simulate_consensus
from mascot.errors import InputError
from mascot.graphs import complete_weights, paper_modes, ring_weights
from mascot.kernels import common_eigenbasis, noise_draws
from mascot.theory import algorithm1, contraction_rate, disagreement, theorem1

pytestmark = pytest.mark.x64  # float64 references throughout


def _random_problem(rng, B, N, d, W1, W2, max_rounds):
    X0 = rng.uniform(0, 1, size=(B, N, d)) * rng.uniform(0.1, 3, size=(B, 1, 1))
    eps = rng.uniform(0.005, 0.05, B)
    eta = eps * rng.uniform(1.5, 10, B)
    c1 = rng.integers(200, 800, B).astype(float)
    c2 = rng.integers(20, 150, B).astype(float)
    b0 = rng.uniform(0, 4000, B)
    return X0, W1, W2, c1, c2, eta, eps, b0


def _reference(args, strategy, max_rounds, noise=None):
    X0, W1, W2, c1, c2, eta, eps, b0 = args
    return [
        algorithm1(
            X0[i],
            W1,
            W2,
            c1[i],
            c2[i],
            eta[i],
            eps[i],
            b0[i],
            strategy,
            max_rounds,
            None if noise is None else noise[i],
        )
        for i in range(X0.shape[0])
    ]


def _assert_exact(res, refs, d_tol=1e-9):
    np.testing.assert_array_equal(res.rounds, [r.rounds for r in refs])
    np.testing.assert_array_equal(res.status, [r.status for r in refs])
    np.testing.assert_array_equal(res.tokens, [r.tokens for r in refs])
    np.testing.assert_allclose(res.d_final, [r.d_final for r in refs], rtol=0, atol=d_tol)


PAIRS = {
    "paper_K5_C5": paper_modes(),
    "complete_ring_N12": (complete_weights(12, 0.3), ring_weights(12, 0.5)),  # small-N (kron) projection
    "complete_ring_N16": (complete_weights(16, 0.4), ring_weights(16, 0.6)),  # einsum, one zero column padded
    "complete_ring_N19": (complete_weights(19, 0.4), ring_weights(19, 0.6)),  # einsum, unpadded
}


@pytest.mark.parametrize("pair", list(PAIRS) + ["random_noncommuting"])
@pytest.mark.parametrize("strategy", ["adaptive", "mode1", "mode2"])
def test_float64_equals_reference(pair, strategy):
    rng = np.random.default_rng(7)
    if pair == "random_noncommuting":
        W1, W2 = random_doubly_stochastic(rng, 6, 5), random_doubly_stochastic(rng, 6, 3)
    else:
        W1, W2 = PAIRS[pair]
    args = _random_problem(rng, 300, W1.shape[0], 4, W1, W2, 12)
    refs = _reference(args, strategy, 12)
    methods = ["matrix"] if pair == "random_noncommuting" else ["modal", "matrix"]
    for method in methods:
        res = simulate_consensus(*args, strategy=strategy, max_rounds=12, dtype="float64", method=method, return_x=True)
        assert res.method == method
        _assert_exact(res, refs)
        np.testing.assert_allclose(res.x_final, np.stack([r.x_final for r in refs]), rtol=0, atol=1e-9)
    statuses = {r.status for r in refs}
    if strategy == "mode2":
        assert statuses == {0, 1, 2}  # the random problems exercise every outcome


@pytest.mark.parametrize("d", [16, 17, 40])
def test_wide_beliefs_at_small_n_equal_reference(d):
    """Small N used a kron(U, I_d) projection at every d: its (N d)^2 entries took 22 GB at d = 10^4 (an
    outside tester's embedding-sized beliefs). Past KRON_MAX_D = 16 the einsum projection takes over."""
    rng = np.random.default_rng(d)
    W1, W2 = PAIRS["paper_K5_C5"]
    args = _random_problem(rng, 60, 5, d, W1, W2, 12)
    refs = _reference(args, "adaptive", 12)
    res = simulate_consensus(*args, strategy="adaptive", max_rounds=12, dtype="float64", method="modal", return_x=True)
    _assert_exact(res, refs)
    np.testing.assert_allclose(res.x_final, np.stack([r.x_final for r in refs]), rtol=0, atol=1e-9)


def test_auto_method_selection():
    W1, W2 = paper_modes()
    X0 = np.random.default_rng(0).uniform(size=(4, 5, 6))
    assert simulate_consensus(X0, W1, W2, 600, 100, 0.1, 0.03, 2000).method == "modal"
    rng = np.random.default_rng(1)
    Wa = random_doubly_stochastic(rng, 5)
    assert simulate_consensus(X0, Wa, W2, 600, 100, 0.1, 0.03, 2000).method == "matrix"
    assert common_eigenbasis(Wa, W2) is None
    with pytest.raises(ValueError, match="method='modal'"):
        simulate_consensus(X0, Wa, W2, 600, 100, 0.1, 0.03, 2000, method="modal")


def test_common_eigenbasis_diagonalises_both():
    for W1, W2 in PAIRS.values():
        U, l1, l2 = common_eigenbasis(W1, W2)
        n = W1.shape[0]
        assert U.shape == (n, n - 1)
        np.testing.assert_allclose(U.T @ U, np.eye(n - 1), atol=1e-12)
        np.testing.assert_allclose(U.T @ np.ones(n), 0, atol=1e-12)
        np.testing.assert_allclose(U.T @ W1 @ U, np.diag(l1), atol=1e-12)
        np.testing.assert_allclose(U.T @ W2 @ U, np.diag(l2), atol=1e-12)
        assert np.abs(l1).max() == pytest.approx(contraction_rate(W1))


@pytest.mark.parametrize("method", ["modal", "matrix"])
def test_trace_and_final_beliefs_equal_reference(method):
    rng = np.random.default_rng(3)
    W1, W2 = PAIRS["complete_ring_N12"]
    args = _random_problem(rng, 50, 12, 3, W1, W2, 30)
    refs = _reference(args, "adaptive", 30)
    res = simulate_consensus(*args, max_rounds=30, trace=True, return_x=True, dtype="float64", method=method)
    _assert_exact(res, refs)
    for i, r in enumerate(refs):
        n = r.rounds
        np.testing.assert_allclose(res.d_trace[i, : n + 1], r.d_trace, atol=1e-12)
        np.testing.assert_array_equal(res.b_trace[i, : n + 1], r.b_trace)
        assert np.all(np.isnan(res.d_trace[i, n + 1 :])) and np.all(np.isnan(res.b_trace[i, n + 1 :]))
        np.testing.assert_array_equal(res.sigma_trace[i, :n], r.sigma_trace)
        assert np.all(res.sigma_trace[i, n:] == 0)
        np.testing.assert_allclose(res.x_final[i], r.x_final, atol=1e-12)


def test_paper_table_vi_rescaled_x0():
    from mascot.studies.consensus import initial_states

    X = initial_states()["rescaled"]
    W1, W2 = paper_modes()
    assert disagreement(X) == pytest.approx(0.3009)
    expect = {
        ("adaptive", 2000): (3, 800, 0),
        ("mode1", 2000): (2, 1200, 0),
        ("mode2", 2000): (7, 700, 0),
        ("adaptive", 650): (1, 600, 1),
    }
    for (strategy, b0), (rounds, spent, status) in expect.items():
        res = simulate_consensus(X[None], W1, W2, 600, 100, 0.1, 0.03, b0, strategy=strategy, dtype="float64")
        assert (int(res.rounds[0]), float(res.tokens[0]), int(res.status[0])) == (rounds, spent, status)
    res = simulate_consensus(X[None], W1, W2, 600, 100, 0.1, 0.03, 2000, strategy="mode1", dtype="float64")
    assert res.d_final[0] == pytest.approx(0.3009 * 0.25**2, abs=1e-12)  # complete rounds scale D by 0.25


@pytest.mark.parametrize("method", ["modal", "matrix"])
def test_float32_agrees_except_near_thresholds(method):
    rng = np.random.default_rng(11)
    W1, W2 = PAIRS["complete_ring_N12"]
    B = 4000
    args = _random_problem(rng, B, 12, 6, W1, W2, 60)
    args = (
        (args[0],)
        + args[1:3]
        + tuple(np.round(a) if i >= 0 else a for i, a in enumerate(args[3:5]))
        + args[5:7]
        + (np.round(args[7]),)
    )
    res64 = simulate_consensus(*args, max_rounds=60, dtype="float64", method=method, trace=True)
    res32 = simulate_consensus(*args, max_rounds=60, dtype="float32", method=method)
    assert res32.d_final.dtype == np.float32
    same = (res32.rounds == res64.rounds) & (res32.status == res64.status) & (res32.tokens == res64.tokens)
    assert same.mean() >= 0.999
    # every disagreement is explained by a D within float32 rounding of eta or eps at some round
    eta, eps = args[5], args[6]
    for i in np.nonzero(~same)[0]:
        tr = res64.d_trace[i][~np.isnan(res64.d_trace[i])]
        near = np.minimum(np.abs(tr / eta[i] - 1), np.abs(tr / eps[i] - 1)).min()
        assert near < 1e-5
    ok = same & (res64.status == 0)
    np.testing.assert_allclose(res32.d_final[ok], res64.d_final[ok], rtol=1e-4)


def test_noise_matrix_path_equals_reference_with_same_draws():
    rng = np.random.default_rng(5)
    W1, W2 = random_doubly_stochastic(rng, 5), random_doubly_stochastic(rng, 5)
    B, N, d, R, sigma = 40, 5, 3, 25, 0.01
    args = _random_problem(rng, B, N, d, W1, W2, R)
    keys = jax.random.split(jax.random.key(42), B)
    res = simulate_consensus(*args, max_rounds=R, noise=sigma, key=keys, dtype="float64")
    draws = np.stack([np.asarray(noise_draws(keys, np.full(B, k, np.int32), N, d, np.float64)) for k in range(R)], 1)
    refs = _reference(args, "adaptive", R, noise=sigma * draws)
    _assert_exact(res, refs)
    # a single key is split into one key per trajectory
    res2 = simulate_consensus(*args, max_rounds=R, noise=sigma, key=jax.random.key(42), dtype="float64")
    _assert_exact(res2, refs)
    # an int seed is jax.random.key(seed), as affine_noise_error takes it (found by an outside tester: key=42
    # raised IndexError), also as a numpy integer or 0-d array
    for seed in (42, np.int64(42), np.array(42)):
        _assert_exact(simulate_consensus(*args, max_rounds=R, noise=sigma, key=seed, dtype="float64"), refs)
    for bad, match in [
        (True, r"int seed in \[0, 2\^32\); got True"),
        (1.5, "got an array of float"),
        ("k", r"2\^32\); got 'k'"),
        (keys[:3], f"or a batch of {B} keys; got shape"),
    ]:
        with pytest.raises(InputError, match=match):
            simulate_consensus(*args, max_rounds=R, noise=sigma, key=bad, dtype="float64")
    # found by a later tester: rbg keys are not independent under vmap (195 of 2000 trajectories shared their noise
    # and stuck at max_rounds), a seed of 2**40 was seed 0 without 64-bit types, float16 weights passed a 5e-3
    # tolerance; a 0-d JAX integer is a seed like a numpy one
    for bad, match in [
        (jax.random.key(42, impl="rbg"), "is a rbg key; mascot takes threefry2x32 keys"),
        (2**40, "got the seed 1099511627776"),
        (-1, "got the seed -1"),
    ]:
        with pytest.raises(InputError, match=match):
            simulate_consensus(*args, max_rounds=R, noise=sigma, key=bad, dtype="float64")
    _assert_exact(simulate_consensus(*args, max_rounds=R, noise=sigma, key=jnp.array(42), dtype="float64"), refs)
    jax.config.update("jax_default_prng_impl", "rbg")
    try:
        with pytest.raises(InputError, match="JAX's default PRNG is 'rbg'"):
            simulate_consensus(*args, max_rounds=R, noise=sigma, key=42, dtype="float64")
    finally:
        jax.config.update("jax_default_prng_impl", "threefry2x32")
    for half in (np.float16, jnp.bfloat16):
        with pytest.raises(InputError, match="W1 has dtype (b)?float16: give the weights in float32 or float64"):
            simulate_consensus(args[0], np.asarray(jnp.asarray(W1, half)), *args[2:], max_rounds=R, dtype="float64")
    with pytest.raises(InputError, match="noise must be one number"):  # (numpy's "only 0-dimensional arrays")
        simulate_consensus(*args, max_rounds=R, noise=np.array([0.0, sigma]), key=42, dtype="float64")
    # a host driver under a JAX transformation says what to use instead (it raised ConcretizationTypeError)
    with pytest.raises(InputError, match="use mascot.rollout"):
        jax.jit(lambda x: simulate_consensus(x, *args[1:], max_rounds=R, dtype="float64").rounds)(args[0])


def test_costs_in_any_float_type_are_numbers_and_strings_are_not():
    """Found by an outside tester: a bfloat16 cost (numpy dtype kind "V") was refused as "must be a number"."""
    rng = np.random.default_rng(2)
    W1, W2 = random_doubly_stochastic(rng, 4), random_doubly_stochastic(rng, 4)
    X0 = rng.random((6, 4, 2))
    run = lambda c1: simulate_consensus(X0, W1, W2, c1, 1.0, 0.1, 0.01, 100.0, dtype="float64")  # noqa: E731
    want = run(3.0)
    for c1 in (jnp.bfloat16(3), np.float16(3), jnp.asarray(3.0, jnp.bfloat16), np.int8(3)):
        np.testing.assert_array_equal(run(c1).tokens, want.tokens)
    for bad in ("3", True, 3 + 0j):
        with pytest.raises(InputError, match="c1 must be a number or an array of numbers"):
            run(bad)


def test_noise_modal_and_matrix_agree_in_distribution():
    W1, W2 = PAIRS["complete_ring_N12"]
    rng = np.random.default_rng(8)
    B = 6000
    X0 = rng.uniform(0, 1, size=(B, 12, 4))
    kw = dict(c1=600, c2=100, eta=0.1, eps=0.03, b0=3000, max_rounds=40, noise=0.01, dtype="float64")
    a = simulate_consensus(X0, W1, W2, key=jax.random.key(1), method="modal", **kw)
    b = simulate_consensus(X0, W1, W2, key=jax.random.key(2), method="matrix", **kw)
    for field in ("rounds", "tokens", "d_final"):
        x, y = getattr(a, field).astype(float), getattr(b, field).astype(float)
        se = np.sqrt(x.var() / B + y.var() / B)
        assert abs(x.mean() - y.mean()) < 5 * se + 1e-12, field
    # noise really changes the outcome compared with the noiseless run
    c = simulate_consensus(X0, W1, W2, key=jax.random.key(1), method="modal", **dict(kw, noise=0.0))
    assert a.rounds.mean() > c.rounds.mean()


def test_results_independent_of_segments_and_order():
    rng = np.random.default_rng(9)
    W1, W2 = random_doubly_stochastic(rng, 7), random_doubly_stochastic(rng, 7)
    B = 1500
    args = _random_problem(rng, B, 7, 2, W1, W2, 50)
    keys = jax.random.split(jax.random.key(0), B)
    base = simulate_consensus(*args, max_rounds=50, noise=0.002, key=keys, dtype="float64", segment_rounds=50)
    for seg, chunk in ((1, None), (3, None), (4, 256)):  # 256 does not divide 1500: a padded last chunk
        other = simulate_consensus(
            *args,
            max_rounds=50,
            noise=0.002,
            key=keys,
            dtype="float64",
            segment_rounds=seg,
            return_x=True,
            chunk_size=chunk,
        )
        for f in ("rounds", "status", "tokens"):
            np.testing.assert_array_equal(getattr(base, f), getattr(other, f))
        # the matrix product's blocking depends on the batch width, so D may differ in the last ulp
        np.testing.assert_allclose(base.d_final, other.d_final, rtol=1e-13, atol=0)
    perm = rng.permutation(B)
    pargs = tuple(a[perm] if getattr(a, "shape", ()) and a.shape[0] == B else a for a in args)
    shuf = simulate_consensus(*pargs, max_rounds=50, noise=0.002, key=keys[perm], dtype="float64", segment_rounds=2)
    for f in ("rounds", "status", "tokens"):
        np.testing.assert_array_equal(getattr(base, f)[perm], getattr(shuf, f))
    np.testing.assert_allclose(base.d_final[perm], shuf.d_final, rtol=1e-13, atol=0)


@pytest.mark.parametrize("noise", [0.0, 0.002])
def test_chunks_in_turn_equal_chunks_one_by_one(noise, monkeypatch):
    # the matrix and noisy paths run two chunks in turn (one's host work beside the other's kernels): every
    # number is the one a chunk gives alone, with final beliefs, and a NaN in the last chunk still stops the call
    import mascot.execute.consensus as ec

    rng = np.random.default_rng(12)
    W1, W2 = random_doubly_stochastic(rng, 9), random_doubly_stochastic(rng, 9)
    B = 2300
    args = _random_problem(rng, B, 9, 3, W1, W2, 60)
    kw = dict(max_rounds=60, dtype="float64", return_x=True, chunk_size=500)  # 5 chunks, the last padded
    if noise:
        kw.update(noise=noise, key=jax.random.split(jax.random.key(3), B))
    real, widths = ec._interleave, []

    def one_by_one(steps, width):
        widths.append(width)
        return real(steps, 1)

    turns = simulate_consensus(*args, **kw)
    monkeypatch.setattr(ec, "_interleave", one_by_one)
    alone = simulate_consensus(*args, **kw)
    assert widths == [2]
    for f in ("rounds", "status", "tokens", "d_final", "d0", "x_final"):
        np.testing.assert_array_equal(getattr(turns, f), getattr(alone, f), err_msg=f)
    if not noise:  # the first trajectories against the plain-Python Algorithm 1
        sub = tuple(a[:40] if getattr(a, "shape", ()) and a.shape[0] == B else a for a in args)
        refs = _reference(sub, "adaptive", 60)
        _assert_exact(simulate_consensus(*sub, max_rounds=60, dtype="float64", chunk_size=10), refs)
    monkeypatch.undo()
    X0 = args[0].copy()
    X0[B - 3, 4, 1] = np.nan
    with pytest.raises(InputError, match="NaN"):
        simulate_consensus(X0, *args[1:], **kw)


def test_compaction_keeps_final_beliefs():
    rng = np.random.default_rng(10)
    W1, W2 = random_doubly_stochastic(rng, 5), random_doubly_stochastic(rng, 5)
    args = _random_problem(rng, 2000, 5, 3, W1, W2, 40)
    refs = _reference(args, "adaptive", 40)
    res = simulate_consensus(*args, max_rounds=40, dtype="float64", segment_rounds=1, return_x=True)
    _assert_exact(res, refs)
    np.testing.assert_allclose(res.x_final, np.stack([r.x_final for r in refs]), atol=1e-12)


# ----------------------------------------------------------------------------- properties
_W1, _W2 = paper_modes()
_RNG_W = np.random.default_rng(2024)
_GW1, _GW2 = random_doubly_stochastic(_RNG_W, 5), random_doubly_stochastic(_RNG_W, 5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31 - 1),
    general=st.booleans(),
    eta=st.floats(0.05, 0.4),
    ratio=st.floats(0.05, 0.9),
    b0=st.floats(0, 5000),
    c1=st.integers(1, 900),
    c2=st.integers(1, 300),
)
def test_properties(seed, general, eta, ratio, b0, c1, c2):
    rng = np.random.default_rng(seed)
    W1, W2 = (_GW1, _GW2) if general else (_W1, _W2)
    X0 = rng.normal(0.5, 0.3, size=(8, 5, 6))
    eps = eta * ratio
    res = simulate_consensus(X0, W1, W2, c1, c2, eta, eps, b0, max_rounds=64, trace=True, dtype="float64")
    b_final = b0 - res.tokens
    assert np.all(b_final >= 0)  # budget never negative
    lam = {1: contraction_rate(W1), 2: contraction_rate(W2)}
    for i in range(8):
        n = res.rounds[i]
        tr = res.d_trace[i, : n + 1]
        if max(lam.values()) < 1:  # D non-increasing under contracting modes, and eq. (6) per round
            assert np.all(np.diff(tr) <= 1e-15)
            for k in range(n):
                assert tr[k + 1] <= lam[int(res.sigma_trace[i, k])] * tr[k] * (1 + 1e-12) + 1e-15
        # BudgetFail exactly when the next round is unaffordable
        d_last = tr[-1]
        next_cost = c1 if d_last > eta else c2
        if res.status[i] == 1:
            assert d_last > eps and b_final[i] < next_cost
        elif res.status[i] == 0:
            assert d_last <= eps
        cert = theorem1(disagreement(X0[i]), eta, eps, lam[1], lam[2], c1, c2)
        if cert.certifies(b0) and cert.K_star <= 64:  # Theorem 2
            assert res.status[i] == 0 and n <= cert.K_star and res.tokens[i] <= cert.B_star


# ----------------------------------------------------------------------------- bad input
_X = np.random.default_rng(0).uniform(size=(3, 5, 2))


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(W1=np.full((5, 5), 0.3)), "W1"),
        (dict(W2=np.eye(4)), "W2"),
        (dict(X0=np.ones((3, 5))[..., None, None]), "X0"),
        (dict(X0=np.where(_X > 0.9, np.nan, _X)), "X0"),
        (dict(X0=np.where(_X > 0.9, np.inf, _X)), "X0"),
        (dict(eps=0.0), "eps"),
        (dict(eps=-0.1), "eps"),
        (dict(eta=0.02), "eta"),
        (dict(b0=-1.0), "b0"),
        (dict(c1=-600.0), "c1"),
        (dict(c2=0.0), "c2"),
        (dict(c1=np.ones(7)), "c1"),
        (dict(noise=0.1), "key"),
        (dict(noise=-0.1), "noise"),
        (dict(strategy="fastest"), "strategy"),
        (dict(max_rounds=-1), "max_rounds"),
        (dict(dtype="int32"), "dtype"),
        (dict(chunk_size=0), "chunk_size"),
    ],
)
def test_bad_input_names_parameter(kw, name):
    W1, W2 = paper_modes()
    args = dict(X0=_X, W1=W1, W2=W2, c1=600.0, c2=100.0, eta=0.1, eps=0.03, b0=2000.0)
    args.update(kw)
    with pytest.raises(ValueError, match=name):
        simulate_consensus(**args)


def test_edge_cases_already_converged_and_zero_rounds():
    W1, W2 = paper_modes()
    X = np.full((2, 5, 3), 0.4)
    X[1, 0, 0] = 2.0
    res = simulate_consensus(X, W1, W2, 600, 100, 0.1, 0.03, 0.0)
    assert list(res.status) == [0, 1] and list(res.rounds) == [0, 0]  # consensus at once; no budget for a round
    res = simulate_consensus(X, W1, W2, 600, 100, 0.1, 0.03, 1e6, max_rounds=0)
    assert list(res.status) == [0, 2]


def test_chunk_sizes_follow_the_platform():
    """CPU chunks stay cache-sized (32 MiB of X0 modal, 2 MiB matrix, at least 4096 rows); accelerators get
    up to 1.5 GiB (modal) / 256 MiB (matrix) of X0 per chunk; chunks are equal (the last padded) and a given
    chunk_size wins."""
    from mascot.execute.consensus import _chunk_size

    f32 = np.dtype(np.float32)
    # N = 64, d = 6, float32: 1536 bytes a row. CPU modal: 32 MiB / 1536 = 21845 -> 2^14 rows a chunk
    assert _chunk_size(100_000, 64, 6, f32, True, None, "cpu") == 14_286  # ceil(1e5 / 7)
    # matrix: 2 MiB / 1536 = 1365 rows, raised to the 4096-row minimum: 3 chunks of 3334
    assert _chunk_size(10_000, 64, 6, f32, False, None, "cpu") == 3_334
    # GPU: modal 1.5 GiB / 1536 = 2^20 rows a chunk; matrix 256 MiB / 1536 = 174762 -> 2^17 rows
    assert _chunk_size(1_000_000, 64, 6, f32, True, None, "gpu") == 1_000_000
    assert _chunk_size(3_000_000, 64, 6, f32, True, None, "gpu") == 1_000_000  # 3 chunks of 2^20 max
    assert _chunk_size(1_000_000, 64, 6, f32, False, None, "gpu") == 125_000  # ceil(1e6 / 8)
    assert _chunk_size(1_000_000, 64, 6, f32, True, 300_000, "gpu") == 300_000
    with pytest.raises(ValueError, match="chunk_size"):
        _chunk_size(10, 5, 6, f32, True, 0, "cpu")


def test_complex_beliefs_are_refused():
    W1, W2 = PAIRS["paper_K5_C5"]
    X0 = np.ones((2, 5, 3), complex)
    with pytest.raises(ValueError, match="X0 must hold real numbers; got dtype complex128"):
        simulate_consensus(X0, W1, W2, 600.0, 100.0, 0.1, 0.03, 1e4)
    for bad in (X0.real.astype(str), X0.real.astype(object), np.zeros((2, 5, 3), "datetime64[s]")):
        with pytest.raises(ValueError, match="X0 must hold real numbers"):  # (an outside tester)
            simulate_consensus(bad, W1, W2, 600.0, 100.0, 0.1, 0.03, 1e4)
    ok = simulate_consensus(np.ones((2, 5, 3), np.int32), W1, W2, 600.0, 100.0, 0.1, 0.03, 1e4)
    assert list(ok.rounds) == [0, 0]  # integer beliefs run (already in consensus)
    with pytest.raises(ValueError, match="W1 must hold real numbers; got dtype complex128"):
        simulate_consensus(X0.real, W1 * (1 + 1j), W2, 600.0, 100.0, 0.1, 0.03, 1e4)


@pytest.mark.parametrize("strategy", ["adaptive", "mode1", "mode2"])
@pytest.mark.parametrize("max_rounds", [0, 1, 12, 300])
def test_round_free_modal_path_equals_the_round_loop(strategy, max_rounds):
    """Issue 34: the modal path without a round loop (first threshold crossings from tables of eigenvalue powers)
    against the round loop it replaces, and against the plain-Python reference, in float64: the same rounds,
    statuses and tokens. Budgets that bind and do not, a complete graph whose eigenvalues are 0
    (consensus in one round), and max_rounds past the first blocks of the power table (8, then 64 rounds)."""
    from mascot.execute import consensus as ex

    rng = np.random.default_rng(max_rounds + 3)
    cases = [PAIRS["paper_K5_C5"], PAIRS["complete_ring_N16"], (complete_weights(8, 1 / 8), ring_weights(8, 0.9))]
    seen, longest = set(), 0
    for W1, W2 in cases:
        args = list(_random_problem(rng, 200, W1.shape[0], 3, W1, W2, max_rounds))
        args[7][20:60] = 1e6  # budgets that never bind
        args[6][40:60] = 1e-12  # ... and a tolerance hardly reached: max_rounds
        closed = simulate_consensus(*args, strategy=strategy, max_rounds=max_rounds, dtype="float64", return_x=True)
        ex.CLOSED_FORM = False
        try:
            loop = simulate_consensus(*args, strategy=strategy, max_rounds=max_rounds, dtype="float64", return_x=True)
        finally:
            ex.CLOSED_FORM = True
        assert closed.method == loop.method == "modal"
        for k in ("rounds", "status", "tokens"):
            np.testing.assert_array_equal(getattr(closed, k), getattr(loop, k), err_msg=k)
        np.testing.assert_allclose(closed.d_final, loop.d_final, rtol=1e-10, atol=0)
        np.testing.assert_allclose(closed.x_final, loop.x_final, rtol=0, atol=1e-10)
        if max_rounds <= 12:
            _assert_exact(closed, _reference(args, strategy, max_rounds))
        seen |= {int(x) for x in closed.status}
        longest = max(longest, int(closed.rounds.max()))
    if max_rounds >= 12 and (strategy, max_rounds) != ("mode1", 300):  # (complete graphs reach even 1e-12)
        assert seen == {0, 1, 2}  # every outcome
    if max_rounds == 300 and strategy != "mode1":
        assert longest > 128  # past one block of the power table


def test_round_free_modal_path_in_float32_agrees_except_near_thresholds():
    """float32: the closed form computes D from eigenvalue powers, the loop by repeated products, so the last
    bits differ; outcomes differ only where D is within float32 rounding of eta or eps."""
    from mascot.execute import consensus as ex

    rng = np.random.default_rng(5)
    W1, W2 = PAIRS["complete_ring_N12"]
    args = list(_random_problem(rng, 4000, 12, 6, W1, W2, 200))
    args[3], args[4], args[7] = np.round(args[3]), np.round(args[4]), np.round(args[7])
    closed = simulate_consensus(*args, max_rounds=200, dtype="float32")
    ex.CLOSED_FORM = False
    try:
        loop = simulate_consensus(*args, max_rounds=200, dtype="float32")
    finally:
        ex.CLOSED_FORM = True
    res64 = simulate_consensus(*args, max_rounds=200, dtype="float64", trace=True)
    same = (closed.rounds == loop.rounds) & (closed.status == loop.status) & (closed.tokens == loop.tokens)
    assert same.mean() >= 0.999
    eta, eps = args[5], args[6]
    for i in np.nonzero(~same)[0]:
        tr = res64.d_trace[i][~np.isnan(res64.d_trace[i])]
        assert np.minimum(np.abs(tr / eta[i] - 1), np.abs(tr / eps[i] - 1)).min() < 1e-5
    ok = same & (closed.status == 0)
    np.testing.assert_allclose(closed.d_final[ok], loop.d_final[ok], rtol=1e-4)
    np.testing.assert_allclose(closed.d_final[ok], res64.d_final[ok], rtol=1e-4)


def test_costs_given_as_text_or_bools_are_refused():
    """Found by an outside tester: ``c1="600"`` was read as 600."""
    W1, W2 = complete_weights(5, 0.4), ring_weights(5, 0.6)
    X0 = np.random.default_rng(0).uniform(size=(4, 5, 3))
    for bad in ({"c1": "600"}, {"b0": True}, {"eta": [0.1, "0.2", 0.1, 0.1]}):
        kw = dict(c1=600.0, c2=100.0, eta=0.1, eps=0.03, b0=2000.0) | bad
        with pytest.raises(InputError, match=f"{next(iter(bad))} must be a number"):
            simulate_consensus(X0, W1, W2, **kw)
