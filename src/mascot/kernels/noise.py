"""Monte Carlo of the affine-noise model of multi-agent error as batched JAX kernels.

The model is Sec. 3.5 of "Predictive Maps of Multi-Agent Reasoning" (the predictive-maps paper;
Appendices A.3-A.4): per step ``t`` each of ``k`` agents outputs ``e_t^(i) = L e_{t-1} + eta_t^(i)``,
``eta_t^(i) = b_t + xi_t^(i)`` with a shared bias ``b_t ~ N(0, rho_c sigma^2)`` and independent
``xi_t^(i) ~ N(0, (1 - rho_c) sigma^2)``; the topology aggregates the ``k`` outputs into one state
``e_t`` (mean, or median as an option), ``e_0 = 0``, and ``E_ceg = sum_{t=1..T} |e_t|``. The closed
forms (eq. 3, error scaling with aggregation; eq. 5, correlated-noise aggregation) are in
:mod:`mascot.theory.noise`.

The batched, chunked entry points ``affine_noise_error`` and ``rule_noise_error`` are the host
driver :mod:`mascot.execute.noise`. Two kernels:

* :func:`affine_noise_point` -- the linear model above at one parameter point (``affine_chunk``: a chunk).
* :func:`rule_noise_point` -- the same noise on the Value of the state-tracking rule
  (:func:`mascot.kernels.state_tracking.rule_step`), which is not 1-Lipschitz (Value is multiplied by
  1.25 under parity A): where the ``sqrt(k)`` law of eq. 3 breaks.

Batching and randomness. ``k`` and ``T`` may differ between points of one batch; the kernels run with
static maxima ``max_k``, ``max_T`` and mask agents ``i >= k`` and steps ``t > T``. Point ``p`` draws from
``fold_in(key, point_ids[p])`` (``point_ids`` defaults to ``0..P-1``), step ``t`` from
``fold_in(point_key, t)`` and within a step the bias from ``fold_in(step_key, 0)`` and agent ``i``'s noise
from ``fold_in(step_key, i + 1)``, each a ``(trials,)`` vector. So a point's result depends only on
``key``, its id, its own parameters, ``trials`` and the dtype: not on ``max_k``, ``max_T``, the other
points of the batch or the chunking. Steps are a ``lax.scan`` and the points of a chunk a ``lax.map``;
only the ``(max_k + 1, trials)`` draws of one step of one point are live at a time, so memory is
``O(trials * max_k)`` plus the outputs (``P * trials``, times ``max_T`` with the trace).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from mascot.errors import InputError
from mascot.kernels.precision import resolve_dtype
from mascot.kernels.prng import check_key

# (affine_chunk and rule_chunk, the drivers' jitted batches, are importable but not part of the documented API)
__all__ = ["AGGREGATES", "affine_noise_point", "rule_noise_point", "aggregate_outputs"]

AGGREGATES = ("mean", "median")
_UNROLLED_MAX = 16  # sorting networks up to this (padded) size are unrolled comparator by comparator


# ----------------------------------------------------------------------------- per-step pieces
def _step_noise(step_key, trials, max_k, dt):
    """Standard normal draws of one step: the shared ``(trials,)`` bias and ``(max_k, trials)`` agents."""
    z = jax.vmap(lambda i: jax.random.normal(jax.random.fold_in(step_key, i), (trials,), dt))(
        jnp.arange(max_k + 1, dtype=jnp.uint32)
    )
    return z[0], z[1:]


def _batcher_pairs(n):
    """Comparators ``(a, b)`` of Batcher's odd-even merge sort for ``n`` (a power of 2) inputs."""
    pairs = []
    p = 1
    while p < n:
        kk = p
        while kk >= 1:
            for j in range(kk % p, n - kk, 2 * kk):
                for i in range(min(kk, n - j - kk)):
                    if (i + j) // (2 * p) == (i + j + kk) // (2 * p):
                        pairs.append((i + j, i + j + kk))
            kk //= 2
        p *= 2
    return pairs


def _layers(pairs):
    """Split a comparator sequence into consecutive layers of disjoint comparators."""
    layers, cur, used = [], [], set()
    for a, b in pairs:
        if a in used or b in used:
            layers.append(cur)
            cur, used = [], set()
        cur.append((a, b))
        used |= {a, b}
    return layers + [cur]


def _sort_rows(x):
    """Sort ``x`` (``(n, trials)``) along axis 0 with a sorting network (padded with ``+inf`` to ``2^m``).

    Up to 16 rows: Batcher's odd-even merge sort unrolled (63 comparators in 10 layers at 16), fastest at
    run time but slow to compile for large ``n`` (25 s at 64). Beyond: a bitonic network, whose
    ``m (m + 1) / 2`` stages each compare rows ``i`` and ``i XOR j`` through a reshape to
    ``(m / 2j, 2, j, trials)``: elementwise min/max, no gathers. (XLA:CPU's ``sort`` of many short
    columns is 10-20x slower than either, several times the cost of the whole noise draw.)
    """
    n = x.shape[0]
    if n == 1:
        return x
    m = 1 << (n - 1).bit_length()
    if m <= _UNROLLED_MAX:  # small n: Batcher's network unrolled row by row, layer by layer
        rows = list(x) + [jnp.full(x.shape[1:], jnp.inf, x.dtype)] * (m - n)
        for layer in _layers(_batcher_pairs(m)):
            for a, b in layer:
                rows[a], rows[b] = jnp.minimum(rows[a], rows[b]), jnp.maximum(rows[a], rows[b])
            # without a barrier XLA may fuse the whole network into one loop that recomputes every
            # comparator along every path (measured 40x slower for one point of 8 agents)
            rows = list(jax.lax.optimization_barrier(tuple(rows)))
        return jnp.stack(rows[:n])
    if m > n:
        x = jnp.concatenate([x, jnp.full((m - n,) + x.shape[1:], jnp.inf, x.dtype)], axis=0)
    rest = x.shape[1:]
    size = 2
    while size <= m:  # merge bitonic blocks of length `size`
        j = size // 2
        while j >= 1:
            y = x.reshape((m // (2 * j), 2, j) + rest)
            a, b = y[:, 0], y[:, 1]
            asc = ((np.arange(m // (2 * j)) * 2 * j) & size) == 0  # static direction per block
            asc = jnp.asarray(asc).reshape((-1,) + (1,) * (1 + len(rest)))
            lo, hi = jnp.minimum(a, b), jnp.maximum(a, b)
            x = jnp.stack([jnp.where(asc, lo, hi), jnp.where(asc, hi, lo)], axis=1).reshape((m,) + rest)
            j //= 2
        size *= 2
    return x[:n]


def aggregate_outputs(outs, k, aggregate):
    """Aggregate the first ``k`` rows of ``outs`` (``(max_k, trials)``); rows ``>= k`` are ignored.

    ``"mean"``: masked sum over ``k``. ``"median"``: sort with ``+inf`` in the masked rows, then the middle
    element of the first ``k`` (mean of the two middle ones for even ``k``).

    Arguments: ``outs`` the agents' outputs, ``(max_k, trials)``; ``k`` how many rows count (an integer array,
    may be traced); ``aggregate`` "mean" or "median". Returns the ``(trials,)`` aggregates.
    """
    if aggregate not in AGGREGATES:  # (anything but "mean" ran the median: an outside tester's "MEAN")
        raise InputError(f"aggregate must be one of {', '.join(AGGREGATES)}; got {aggregate!r}")
    mask = (jnp.arange(outs.shape[0]) < k)[:, None]
    if aggregate == "mean":
        return jnp.sum(jnp.where(mask, outs, 0), axis=0) / k.astype(outs.dtype)
    srt = _sort_rows(jnp.where(mask, outs, jnp.inf))
    rows = jnp.arange(outs.shape[0])[:, None]
    # rows (k-1)//2 and k//2 selected by masks (elementwise; no gather when k is batched under vmap)
    lo = jnp.sum(jnp.where(rows == (k - 1) // 2, srt, 0), axis=0)
    hi = jnp.sum(jnp.where(rows == k // 2, srt, 0), axis=0)
    return 0.5 * (lo + hi)


def _aggregated_noise(step_key, k, s_bias, s_ind, *, trials, max_k, aggregate, dt):
    """``agg_i eta_t^(i) = b_t + agg_i xi_t^(i)`` over the first ``k`` agents, shape ``(trials,)``.

    Mean and median are translation-equivariant, ``agg_i (x + eta^(i)) = x + agg_i eta^(i)``, so the
    common part of the agents' outputs (``L e_{t-1}``, or the rule's Value) is added after aggregating:
    this is the model exactly, and keeps ``sigma = 0`` free of rounding (a float mean of ``k`` equal
    values need not return that value).
    """
    z0, z = _step_noise(step_key, trials, max_k, dt)
    return s_bias * z0 + aggregate_outputs(s_ind * z, k, aggregate)


# ----------------------------------------------------------------------------- linear model, one point
def affine_noise_point(
    key,
    k,
    rho_c,
    sigma,
    T,
    L,
    *,
    trials: int,
    max_k: int,
    max_T: int,
    aggregate: str = "mean",
    trace: bool = False,
    dtype=None,
):
    """``E_ceg`` of ``trials`` runs of the affine-noise model at one parameter point (pure JAX).

    ``e_t = L e_{t-1} + agg_i eta_t^(i)`` for ``t = 1..T``, ``e_0 = 0`` (Sec. 3.5 of the predictive-maps
    paper). jit/vmap-ready: ``key`` is this point's PRNG key, ``k``, ``T`` integer scalars with
    ``1 <= k <= max_k``, ``1 <= T <= max_T`` (may be traced; outside those ranges ``ceg`` is NaN), ``rho_c``,
    ``sigma``, ``L`` float scalars; no other validation is done here (see :func:`affine_noise_error`). ``dtype``: float32 or float64 (default:
    float64 if ``jax_enable_x64`` is on, else float32). Returns ``(ceg, steps)``: ``ceg`` of shape
    ``(trials,)`` and, with ``trace=True``, ``steps`` of shape ``(trials, max_T)`` with ``|e_t|`` for
    ``t <= T`` and NaN after (else ``None``).

    Arguments: ``aggregate`` "mean" or "median" over the k outputs; ``max_k``, ``max_T`` the static maxima the
    kernel is compiled for; ``trials`` runs at this point.
    """
    dt = resolve_dtype(dtype)
    check_key(key)  # one threefry key (an rbg key's draws depend on the batch: an outside tester)
    k_in, T_in = jnp.asarray(k), jnp.asarray(T)
    k = jnp.asarray(k, jnp.int32)
    T = jnp.asarray(T, jnp.int32)
    rho_c, sigma, L = (jnp.asarray(x, dt) for x in (rho_c, sigma, L))
    s_bias = sigma * jnp.sqrt(rho_c)
    s_ind = sigma * jnp.sqrt(1 - rho_c)

    def run(carry, t):
        e, ceg = carry
        eta = _aggregated_noise(
            jax.random.fold_in(key, t), k, s_bias, s_ind, trials=trials, max_k=max_k, aggregate=aggregate, dt=dt
        )
        e = L * e + eta
        err = jnp.abs(e)
        return (e, ceg + err), (err if trace else None)

    def skip(carry, t):  # t > T
        return carry, (jnp.full((trials,), jnp.nan, dt) if trace else None)

    def step(carry, t):
        # a scalar predicate (one point, or points under lax.map) skips the work of the steps t > T;
        # under vmap the cond becomes a select and both branches run (same results)
        return jax.lax.cond(t <= T, run, skip, carry, t)

    zeros = jnp.zeros((trials,), dt)
    (_, ceg), steps = jax.lax.scan(step, (zeros, zeros), jnp.arange(1, max_T + 1, dtype=jnp.uint32))
    return _outside_is_nan(ceg, steps if trace else None, k_in, T_in, max_k, max_T, sigma)


def _outside_is_nan(ceg, steps, k, T, max_k, max_T, sigma):
    """``(ceg, steps.T)`` with NaN where ``k`` or ``T`` is outside ``1..max_k``, ``1..max_T`` or not whole, or
    ``sigma`` is negative (the kernel is not validated under jit: k > max_k aggregated max_k outputs, T > max_T ran
    max_T steps, k = 2.7 ran 2 and sigma = -1 ran |sigma|: plausible numbers)."""
    bad = (k < 1) | (k > max_k) | (T < 1) | (T > max_T) | (k != jnp.floor(k)) | (T != jnp.floor(T)) | (sigma < 0)
    ceg = jnp.where(bad, jnp.nan, ceg)
    return ceg, (None if steps is None else jnp.where(bad, jnp.nan, steps.T))


@partial(jax.jit, static_argnames=("trials", "max_k", "max_T", "aggregate", "trace", "dtype"))
def affine_chunk(keys, k, rho_c, sigma, T, L, *, trials, max_k, max_T, aggregate, trace, dtype):
    fn = partial(
        affine_noise_point, trials=trials, max_k=max_k, max_T=max_T, aggregate=aggregate, trace=trace, dtype=dtype
    )
    return jax.lax.map(lambda a: fn(*a), (keys, k, rho_c, sigma, T, L))  # see _run_chunks


# ----------------------------------------------------------------------------- nonlinear rule, one point
def rule_noise_point(
    key,
    k,
    rho_c,
    sigma,
    T,
    value0,
    parity0,
    level0,
    *,
    trials: int,
    max_k: int,
    max_T: int,
    aggregate: str = "mean",
    trace: bool = False,
):
    """``E_ceg`` of ``trials`` noisy runs of the state-tracking rule at one parameter point (pure JAX).

    The true state ``x*_t = rule(x*_{t-1})`` starts at ``(value0, parity0, level0)``; the estimate starts
    there too (``x^_0 = x*_0``). At step ``t`` every agent applies the rule exactly to the estimate,
    ``(V, P, L) = rule_step(x^_{t-1})``, and outputs Value ``V + b_t + xi_t^(i)`` (the noise of the
    affine-noise model, Sec. 3.5 of the predictive-maps paper); the estimate ``x^_t`` is
    ``(V + agg_i eta_t^(i), P, L)``: Parity and Level are the same for every agent since the noise only
    touches the Value. ``e_t = |V^_t - V*_t|``. Float64 only (the rule needs 64-bit JAX); no validation
    (see :func:`rule_noise_error`). Returns ``(ceg, steps)`` as :func:`affine_noise_point`.

    Arguments: ``key`` this point's PRNG key; ``k`` agents aggregated per step; ``rho_c`` the shared-bias
    fraction; ``sigma`` the per-agent noise s.d.; ``T`` steps; ``value0``, ``parity0``, ``level0`` the initial
    state; ``trials`` runs; ``max_k``, ``max_T`` the static maxima the kernel is compiled for; ``aggregate``
    "mean" or "median"; ``trace`` also return the per-step errors.
    """
    from mascot.kernels.state_tracking import rule_step

    dt = jnp.dtype(jnp.float64)
    check_key(key)  # one threefry key (an rbg key's draws depend on the batch: an outside tester)
    k_in, T_in = jnp.asarray(k), jnp.asarray(T)
    k = jnp.asarray(k, jnp.int32)
    T = jnp.asarray(T, jnp.int32)
    rho_c, sigma = jnp.asarray(rho_c, dt), jnp.asarray(sigma, dt)
    s_bias = sigma * jnp.sqrt(rho_c)
    s_ind = sigma * jnp.sqrt(1 - rho_c)
    true0 = (jnp.asarray(value0, dt), jnp.asarray(parity0, jnp.int32), jnp.asarray(level0, jnp.int32))
    est0 = tuple(jnp.broadcast_to(x, (trials,)) for x in true0)

    def run(carry, t):
        true, est, ceg = carry
        true = tuple(rule_step(*true))
        v, p, lv = rule_step(*est)
        eta = _aggregated_noise(
            jax.random.fold_in(key, t), k, s_bias, s_ind, trials=trials, max_k=max_k, aggregate=aggregate, dt=dt
        )
        est = (v + eta, p, lv)
        err = jnp.abs(est[0] - true[0])
        return (true, est, ceg + err), (err if trace else None)

    def skip(carry, t):  # t > T
        return carry, (jnp.full((trials,), jnp.nan, dt) if trace else None)

    def step(carry, t):
        return jax.lax.cond(t <= T, run, skip, carry, t)  # see affine_noise_point

    init = (true0, est0, jnp.zeros((trials,), dt))
    (_, _, ceg), steps = jax.lax.scan(step, init, jnp.arange(1, max_T + 1, dtype=jnp.uint32))
    return _outside_is_nan(ceg, steps if trace else None, k_in, T_in, max_k, max_T, sigma)


@partial(jax.jit, static_argnames=("trials", "max_k", "max_T", "aggregate", "trace"))
def rule_chunk(keys, k, rho_c, sigma, T, value0, parity0, level0, *, trials, max_k, max_T, aggregate, trace):
    fn = partial(rule_noise_point, trials=trials, max_k=max_k, max_T=max_T, aggregate=aggregate, trace=trace)
    return jax.lax.map(lambda a: fn(*a), (keys, k, rho_c, sigma, T, value0, parity0, level0))
