"""Monte Carlo of the affine-noise model of multi-agent error as batched JAX kernels.

The model is Sec. 3.5 of "Predictive Maps of Multi-Agent Reasoning" (the predictive-maps paper;
Appendices A.3-A.4): per step ``t`` each of ``k`` agents outputs ``e_t^(i) = L e_{t-1} + eta_t^(i)``,
``eta_t^(i) = b_t + xi_t^(i)`` with a shared bias ``b_t ~ N(0, rho_c sigma^2)`` and independent
``xi_t^(i) ~ N(0, (1 - rho_c) sigma^2)``; the topology aggregates the ``k`` outputs into one state
``e_t`` (mean, or median as an option), ``e_0 = 0``, and ``E_ceg = sum_{t=1..T} |e_t|``. The closed
forms (eq. 3, error scaling with aggregation; eq. 5, correlated-noise aggregation) are in
:mod:`mascot.theory.noise`.

Two entry points:

* :func:`affine_noise_error` -- the linear model above, over a batch of ``P`` parameter points.
* :func:`rule_noise_error` -- the same noise on the Value of the state-tracking rule
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

import math
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from mascot.theory.noise import validate_noise_params

__all__ = ["AGGREGATES", "affine_noise_point", "affine_noise_error", "rule_noise_point", "rule_noise_error"]

AGGREGATES = ("mean", "median")
_UNROLLED_MAX = 16  # sorting networks up to this (padded) size are unrolled comparator by comparator
_CHUNK_ELEMS = 1 << 24  # output values (E_ceg and trace) of one chunk


# ----------------------------------------------------------------------------- per-step pieces
def _step_noise(step_key, trials, max_k, dt):
    """Standard normal draws of one step: the shared ``(trials,)`` bias and ``(max_k, trials)`` agents."""
    z = jax.vmap(lambda i: jax.random.normal(jax.random.fold_in(step_key, i), (trials,), dt))(
        jnp.arange(max_k + 1, dtype=jnp.uint32))
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


def _aggregate(outs, k, aggregate):
    """Aggregate the first ``k`` rows of ``outs`` (``(max_k, trials)``); rows ``>= k`` are ignored.

    ``"mean"``: masked sum over ``k``. ``"median"``: sort with ``+inf`` in the masked rows, then the middle
    element of the first ``k`` (mean of the two middle ones for even ``k``).
    """
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
    return s_bias * z0 + _aggregate(s_ind * z, k, aggregate)


# ----------------------------------------------------------------------------- linear model, one point
def affine_noise_point(key, k, rho_c, sigma, T, L, *, trials: int, max_k: int, max_T: int,
                       aggregate: str = "mean", trace: bool = False, dtype=None):
    """``E_ceg`` of ``trials`` runs of the affine-noise model at one parameter point (pure JAX).

    ``e_t = L e_{t-1} + agg_i eta_t^(i)`` for ``t = 1..T``, ``e_0 = 0`` (Sec. 3.5 of the predictive-maps
    paper). jit/vmap-ready: ``key`` is this point's PRNG key, ``k``, ``T`` integer scalars with
    ``1 <= k <= max_k``, ``1 <= T <= max_T`` (may be traced), ``rho_c``, ``sigma``, ``L`` float scalars; no
    validation is done here (see :func:`affine_noise_error`). ``dtype``: float32 or float64 (default:
    float64 if ``jax_enable_x64`` is on, else float32). Returns ``(ceg, steps)``: ``ceg`` of shape
    ``(trials,)`` and, with ``trace=True``, ``steps`` of shape ``(trials, max_T)`` with ``|e_t|`` for
    ``t <= T`` and NaN after (else ``None``).
    """
    dt = _resolve_dtype(dtype)
    k = jnp.asarray(k, jnp.int32)
    T = jnp.asarray(T, jnp.int32)
    rho_c, sigma, L = (jnp.asarray(x, dt) for x in (rho_c, sigma, L))
    s_bias = sigma * jnp.sqrt(rho_c)
    s_ind = sigma * jnp.sqrt(1 - rho_c)

    def run(carry, t):
        e, ceg = carry
        eta = _aggregated_noise(jax.random.fold_in(key, t), k, s_bias, s_ind, trials=trials, max_k=max_k,
                                aggregate=aggregate, dt=dt)
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
    return ceg, (steps.T if trace else None)


@partial(jax.jit, static_argnames=("trials", "max_k", "max_T", "aggregate", "trace", "dtype"))
def _affine_chunk(keys, k, rho_c, sigma, T, L, *, trials, max_k, max_T, aggregate, trace, dtype):
    fn = partial(affine_noise_point, trials=trials, max_k=max_k, max_T=max_T, aggregate=aggregate,
                 trace=trace, dtype=dtype)
    return jax.lax.map(lambda a: fn(*a), (keys, k, rho_c, sigma, T, L))  # see _run_chunks


# ----------------------------------------------------------------------------- host-side helpers
def _resolve_dtype(dtype):
    if dtype is None:
        return jnp.dtype(jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)
    try:
        dt = jnp.dtype(dtype)
    except TypeError:
        raise ValueError(f"dtype must be float32 or float64; got {dtype!r}") from None
    if dt not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)):
        raise ValueError(f"dtype must be float32 or float64; got {dtype!r}")
    if dt == jnp.float64 and not jax.config.jax_enable_x64:
        raise ValueError("dtype='float64' needs 64-bit JAX: call jax.config.update('jax_enable_x64', True) "
                         "once at start-up")
    return dt


def _as_key(key):
    if isinstance(key, (int, np.integer)):
        return jax.random.key(int(key))
    key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    if (typed and key.shape != ()) or (not typed and key.shape != (2,)):
        raise ValueError(f"key must be one PRNG key (jax.random.key(seed)) or an int seed; got shape {key.shape}")
    return key


def _positive_int(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _points(params: dict, point_ids):
    """Broadcast scalar / equal-length 1-D parameters to ``(P,)``; returns (arrays, P, scalar_input)."""
    lengths = set()
    for name, v in params.items():
        nd = np.ndim(v)
        if nd > 1:
            raise ValueError(f"{name} must be a scalar or a 1-D array (one value per point); got shape "
                             f"{np.shape(v)}")
        if nd == 1:
            lengths.add(np.shape(v)[0])
    if len(lengths) > 1:
        desc = ", ".join(f"{n}: {np.shape(v)[0]}" for n, v in params.items() if np.ndim(v) == 1)
        raise ValueError(f"1-D parameters must all have the same length P (one per point); got {desc}")
    scalar = not lengths
    P = 1 if scalar else lengths.pop()
    if P < 1:
        raise ValueError("parameter arrays must not be empty")
    out = {n: np.broadcast_to(np.asarray(v), (P,)) for n, v in params.items()}
    if point_ids is None:
        ids = np.arange(P, dtype=np.int64)
    else:
        ids = np.asarray(point_ids)
        if ids.ndim == 0:
            ids = ids[None]
        if ids.shape != (P,) or not np.issubdtype(ids.dtype, np.integer) or np.any(ids < 0) or \
                np.any(ids >= 2**32):
            raise ValueError(f"point_ids must be {P} integers in [0, 2^32) (one per point); got {point_ids!r}")
    return out, P, scalar, ids.astype(np.uint32)


def _maximum(name, given, values):
    top = int(values.max())
    if given is None:
        return top
    given = _positive_int(name, given)
    if given < top:
        base = name.removeprefix("max_")
        raise ValueError(f"{name} = {given} is smaller than the largest {base} = {top}")
    return given


def _run_points(run, arrays, ids, key, P, trials, max_T, trace, chunk_points, scalar):
    """Run ``P`` points in chunks; unwrap the result of a scalar call; ``(ceg, steps)`` with ``trace``."""
    per_point = trials * (1 + (max_T if trace else 0))
    ceg, steps = _run_chunks(run, arrays, ids, key, P, per_point, chunk_points)
    if scalar:
        ceg = ceg[0]
        steps = None if steps is None else steps[0]
    return (ceg, steps) if trace else ceg


def _run_chunks(run, arrays: dict, ids, key, P, per_point_elems, chunk_points):
    """Run ``run(keys, **arrays)`` over chunks of points; returns the outputs concatenated over points.

    Inside a chunk the points run one after another (``lax.map``; each point is already vectorised over
    ``trials x max_k``): compared with ``vmap`` over points this halves the compile time (~1.3 s instead
    of ~3 s on a 2-core CPU) and is as fast or faster at 1e4 trials. Chunks are equal-sized (the last is
    padded with copies of a point) so one shape is compiled per call, at most ``_CHUNK_ELEMS`` output
    values each, and at least two when ``P >= 2`` so that two host threads keep two cores busy (XLA:CPU
    runs these loops on one core).
    """
    if chunk_points is None:
        C = max(1, min(_CHUNK_ELEMS // max(per_point_elems, 1), math.ceil(P / 2)))
    else:
        C = _positive_int("chunk_points", chunk_points)
    C = min(C, P)
    results = [None] * math.ceil(P / C)

    def one(j):
        lo, hi = j * C, min((j + 1) * C, P)
        rows = np.arange(lo, hi)
        if hi - lo < C:  # pad so every chunk has one compiled shape
            rows = np.concatenate([rows, np.full(C - (hi - lo), lo)])
        keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.asarray(ids[rows]))
        out = run(keys, **{n: a[rows] for n, a in arrays.items()})
        results[j] = jax.tree_util.tree_map(lambda x: np.asarray(x)[: hi - lo], out)

    if len(results) > 1:
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(one, range(len(results))))
    else:
        one(0)
    return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs, axis=0), *results)


# ----------------------------------------------------------------------------- linear model, public
def affine_noise_error(key, k, rho_c, sigma, T, L=1.0, *, trials: int, aggregate: str = "mean",
                       max_k: int | None = None, max_T: int | None = None, dtype=None, trace: bool = False,
                       point_ids=None, chunk_points: int | None = None):
    """Monte Carlo ``E_ceg = sum_{t=1..T} |e_t|`` of the affine-noise model over ``P`` parameter points.

    The model of Sec. 3.5 of the predictive-maps paper: ``e_t = agg_i (L e_{t-1} + b_t + xi_t^(i))``, with
    the shared bias ``b_t ~ N(0, rho_c sigma^2)``, ``xi_t^(i) ~ N(0, (1 - rho_c) sigma^2)`` i.i.d. and
    ``e_0 = 0``. With ``aggregate="mean"`` its expectation is :func:`mascot.theory.noise.expected_ceg`
    (eq. 3, error scaling with aggregation; eq. 5, correlated-noise aggregation).

    Args:
      key: one PRNG key (``jax.random.key(seed)``) or an int seed; point ``p`` uses
        ``fold_in(key, point_ids[p])`` (see the module docstring).
      k: agents aggregated per step (integer ``>= 1``); rho_c: shared-bias fraction in ``[0, 1]``;
        sigma: per-agent noise standard deviation ``>= 0``; T: steps (integer ``>= 1``); L: per-step gain
        (finite). Each a scalar or a 1-D array of the common length ``P``.
      trials: independent runs per point.
      aggregate: ``"mean"`` or ``"median"`` (median of even ``k`` = mean of the two middle outputs).
      max_k, max_T: static maxima the kernel is compiled for (default: the largest ``k``, ``T``).
        Results do not depend on them; a fixed value avoids recompiling across calls.
      dtype: float32 or float64 (default: float64 if ``jax_enable_x64`` is on, else float32).
      trace: also return the per-step ``|e_t|``.
      point_ids: integer id of each point for the key derivation (default ``0..P-1``); running point ``p``
        of a batch alone with ``point_ids=[p]`` reproduces its result.
      chunk_points: points per kernel call (default: half of them, so that two chunks run on two host
        threads, and at most 2^24 output values per chunk). Results do not depend on it.

    Returns:
      ``ceg`` of shape ``(P, trials)`` (``(trials,)`` when every parameter is a scalar), as numpy in
      ``dtype``; with ``trace=True`` the pair ``(ceg, steps)``, ``steps`` of shape ``(..., max_T)`` holding
      ``|e_t|`` for ``t <= T`` and NaN after.
    """
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {AGGREGATES}; got {aggregate!r}")
    trials = _positive_int("trials", trials)
    dt = _resolve_dtype(dtype)
    key = _as_key(key)
    raw = dict(k=k, rho_c=rho_c, sigma=sigma, T=T, L=L)
    p = validate_noise_params(**raw)
    arrays, P, scalar, ids = _points(p, point_ids)
    max_k = _maximum("max_k", max_k, arrays["k"])
    max_T = _maximum("max_T", max_T, arrays["T"])
    arrays = dict(k=arrays["k"].astype(np.int32), T=arrays["T"].astype(np.int32),
                  rho_c=arrays["rho_c"].astype(dt), sigma=arrays["sigma"].astype(dt), L=arrays["L"].astype(dt))
    run = partial(_affine_chunk, trials=trials, max_k=max_k, max_T=max_T, aggregate=aggregate, trace=trace,
                  dtype=dt)
    return _run_points(run, arrays, ids, key, P, trials, max_T, trace, chunk_points, scalar)


# ----------------------------------------------------------------------------- nonlinear rule, one point
def rule_noise_point(key, k, rho_c, sigma, T, value0, parity0, level0, *, trials: int, max_k: int,
                     max_T: int, aggregate: str = "mean", trace: bool = False):
    """``E_ceg`` of ``trials`` noisy runs of the state-tracking rule at one parameter point (pure JAX).

    The true state ``x*_t = rule(x*_{t-1})`` starts at ``(value0, parity0, level0)``; the estimate starts
    there too (``x^_0 = x*_0``). At step ``t`` every agent applies the rule exactly to the estimate,
    ``(V, P, L) = rule_step(x^_{t-1})``, and outputs Value ``V + b_t + xi_t^(i)`` (the noise of the
    affine-noise model, Sec. 3.5 of the predictive-maps paper); the estimate ``x^_t`` is
    ``(V + agg_i eta_t^(i), P, L)``: Parity and Level are the same for every agent since the noise only
    touches the Value. ``e_t = |V^_t - V*_t|``. Float64 only (the rule needs 64-bit JAX); no validation
    (see :func:`rule_noise_error`). Returns ``(ceg, steps)`` as :func:`affine_noise_point`.
    """
    from mascot.kernels.state_tracking import rule_step

    dt = jnp.dtype(jnp.float64)
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
        eta = _aggregated_noise(jax.random.fold_in(key, t), k, s_bias, s_ind, trials=trials, max_k=max_k,
                                aggregate=aggregate, dt=dt)
        est = (v + eta, p, lv)
        err = jnp.abs(est[0] - true[0])
        return (true, est, ceg + err), (err if trace else None)

    def skip(carry, t):  # t > T
        return carry, (jnp.full((trials,), jnp.nan, dt) if trace else None)

    def step(carry, t):
        return jax.lax.cond(t <= T, run, skip, carry, t)  # see affine_noise_point

    init = (true0, est0, jnp.zeros((trials,), dt))
    (_, _, ceg), steps = jax.lax.scan(step, init, jnp.arange(1, max_T + 1, dtype=jnp.uint32))
    return ceg, (steps.T if trace else None)


@partial(jax.jit, static_argnames=("trials", "max_k", "max_T", "aggregate", "trace"))
def _rule_chunk(keys, k, rho_c, sigma, T, value0, parity0, level0, *, trials, max_k, max_T, aggregate, trace):
    fn = partial(rule_noise_point, trials=trials, max_k=max_k, max_T=max_T, aggregate=aggregate, trace=trace)
    return jax.lax.map(lambda a: fn(*a), (keys, k, rho_c, sigma, T, value0, parity0, level0))


def _rule_state0(value0, parity0, level0):
    from mascot.kernels.state_tracking import MAX_ABS_VALUE, PARITY_CODES

    v = np.asarray(value0, dtype=np.float64) if not isinstance(value0, str) else None
    if v is None or not np.all(np.isfinite(v)) or not np.all(np.abs(v) <= MAX_ABS_VALUE):
        raise ValueError(f"value0 must be finite with |value0| <= {MAX_ABS_VALUE:g}; got {value0!r}")

    def code(x):
        if isinstance(x, str) and x in PARITY_CODES:
            return PARITY_CODES[x]
        if not isinstance(x, (bool, np.bool_, str)) and isinstance(x, (int, float, np.number)) and x in (0, 1):
            return int(x)
        raise ValueError(f"parity0 must be 'A'/'B' or 0 ('A')/1 ('B'); got {parity0!r}")

    obj = np.asarray(parity0, dtype=object)
    par = np.array([code(x) for x in obj.ravel().tolist()], dtype=np.int64).reshape(obj.shape)
    lv = np.asarray(level0)
    if lv.dtype == bool or lv.dtype.kind not in "iuf" or not np.all(lv == np.round(lv)) or \
            not np.all((lv >= 1) & (lv <= 9)):
        raise ValueError(f"level0 must be an integer in 1..9; got {level0!r}")
    return v, par, lv.astype(np.int64)


def rule_noise_error(key, *, k, rho_c, sigma, T, trials: int, value0=50.0, parity0=0, level0=3,
                     aggregate: str = "mean", max_k: int | None = None, max_T: int | None = None,
                     trace: bool = False, point_ids=None, chunk_points: int | None = None):
    """Monte Carlo ``E_ceg`` of the affine-noise model applied to the (nonlinear) state-tracking rule.

    The noise model of Sec. 3.5 of the predictive-maps paper (shared bias ``b_t ~ N(0, rho_c sigma^2)``,
    independent ``xi_t^(i) ~ N(0, (1 - rho_c) sigma^2)``) on the Value of the state-tracking task of
    Appendix C (:func:`mascot.kernels.state_tracking.rule_step`); see :func:`rule_noise_point` for the
    dynamics. The rule multiplies Value by 1.25 under Parity "A" and switches Parity and Level on
    thresholds, so it is neither linear nor 1-Lipschitz: the ``T^(3/2)/sqrt(k)`` law of eq. 3 and the
    chain/aggregate ratio ``sqrt(k/(1+(k-1) rho_c))`` of eq. 5 need not hold, which is what this entry
    point measures. ``sigma = 0`` reproduces the true trajectory exactly (``E_ceg = 0``).

    Args are those of :func:`affine_noise_error` (without ``L`` and ``dtype``: always float64, which needs
    ``jax_enable_x64``), plus the initial state ``value0`` (``|value0| <= 1e9``), ``parity0`` (0/"A" or
    1/"B") and ``level0`` (integer in 1..9), each a scalar or a 1-D array of the common length ``P``.
    The default is the task's initial state (Value 50, Parity "A", Level 3).

    Returns:
      ``ceg`` of shape ``(P, trials)`` (``(trials,)`` for all-scalar input), float64; with ``trace=True``
      the pair ``(ceg, steps)``, ``steps[..., t-1] = |V^_t - V*_t|`` for ``t <= T`` and NaN after.
      A run whose estimate leaves the rule's domain (``|Value| > 1e9``) is NaN from then on.
    """
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate must be one of {AGGREGATES}; got {aggregate!r}")
    trials = _positive_int("trials", trials)
    if not jax.config.jax_enable_x64:
        raise RuntimeError("rule_noise_error needs 64-bit JAX (the state-tracking rule is exact int64/float64 "
                           "arithmetic): call jax.config.update('jax_enable_x64', True) once at start-up")
    key = _as_key(key)
    p = validate_noise_params(k=k, rho_c=rho_c, sigma=sigma, T=T)
    v0, p0, l0 = _rule_state0(value0, parity0, level0)
    arrays, P, scalar, ids = _points(dict(p, value0=v0, parity0=p0, level0=l0), point_ids)
    max_k = _maximum("max_k", max_k, arrays["k"])
    max_T = _maximum("max_T", max_T, arrays["T"])
    arrays = dict(k=arrays["k"].astype(np.int32), T=arrays["T"].astype(np.int32),
                  rho_c=arrays["rho_c"].astype(np.float64), sigma=arrays["sigma"].astype(np.float64),
                  value0=arrays["value0"].astype(np.float64), parity0=arrays["parity0"].astype(np.int32),
                  level0=arrays["level0"].astype(np.int32))
    run = partial(_rule_chunk, trials=trials, max_k=max_k, max_T=max_T, aggregate=aggregate, trace=trace)
    return _run_points(run, arrays, ids, key, P, trials, max_T, trace, chunk_points, scalar)
