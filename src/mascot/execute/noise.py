"""The host driver of the affine-noise Monte Carlo kernels (:mod:`mascot.kernels.noise`): validation,
parameter broadcasting, equal-size chunks of points and, on one device, two host threads (XLA:CPU runs a
chunk's ``lax.map`` on one core); with several local devices each call's points are split over a 1-D
``jax.sharding.Mesh`` of all of them (``jax.shard_map``: every device maps over its own points at once).
``affine_noise_error`` and ``rule_noise_error`` are the public entry points; the model, its randomness and
its batching invariants are described in :mod:`mascot.kernels.noise`.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as PS

from mascot.errors import InputError
from mascot.execute.devices import Shards
from mascot.kernels import noise as kn
from mascot.kernels.precision import float64, resolve_dtype, x64_enabled
from mascot.kernels.prng import as_key
from mascot.theory.noise import validate_noise_params

__all__ = ["affine_noise_error", "rule_noise_error"]

_CHUNK_ELEMS = 1 << 24  # output values (E_ceg and trace) of one chunk


def _positive_int(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _points(params: dict, point_ids):
    """Broadcast scalar / equal-length 1-D parameters to ``(P,)``; returns (arrays, P, scalar_input)."""
    lengths = set()
    for name, v in params.items():
        nd = np.ndim(v)
        if nd > 1:
            raise InputError(f"{name} must be a scalar or a 1-D array (one value per point); got shape {np.shape(v)}")
        if nd == 1:
            lengths.add(np.shape(v)[0])
    if len(lengths) > 1:
        desc = ", ".join(f"{n}: {np.shape(v)[0]}" for n, v in params.items() if np.ndim(v) == 1)
        raise InputError(f"1-D parameters must all have the same length P (one per point); got {desc}")
    scalar = not lengths
    P = 1 if scalar else lengths.pop()
    if P < 1:
        raise InputError("parameter arrays must not be empty")
    out = {n: np.broadcast_to(np.asarray(v), (P,)) for n, v in params.items()}
    if point_ids is None:
        ids = np.arange(P, dtype=np.int64)
    else:
        ids = np.asarray(point_ids)
        if ids.ndim == 0:
            ids = ids[None]
        if ids.shape != (P,) or not np.issubdtype(ids.dtype, np.integer) or np.any(ids < 0) or np.any(ids >= 2**32):
            raise InputError(f"point_ids must be {P} integers in [0, 2^32) (one per point); got {point_ids!r}")
    return out, P, scalar, ids.astype(np.uint32)


def _maximum(name, given, values):
    top = int(values.max())
    if given is None:
        return top
    given = _positive_int(name, given)
    if given < top:
        base = name.removeprefix("max_")
        raise InputError(f"{name} = {given} is smaller than the largest {base} = {top}")
    return given


def _run_points(run, arrays, ids, key, P, trials, max_T, trace, chunk_points, scalar):
    """Run ``P`` points in chunks; unwrap the result of a scalar call; ``(ceg, steps)`` with ``trace``."""
    per_point = trials * (1 + (max_T if trace else 0))
    ceg, steps = _run_chunks(run, arrays, ids, key, P, per_point, chunk_points)
    if scalar:
        ceg = ceg[0]
        steps = None if steps is None else steps[0]
    return (ceg, steps) if trace else ceg


def _apply(keys, arrays, *, func, kw):
    """``func(keys, **kw, **arrays)``: a chunk kernel in the form ``Shards.local`` runs on every device."""
    return func(keys, **dict(kw), **arrays)


def _run_chunks(run, arrays: dict, ids, key, P, per_point_elems, chunk_points):
    """Run ``run(keys, **arrays)`` over chunks of points; returns the outputs concatenated over points.

    Inside a chunk the points run one after another (``lax.map``; each point is already vectorised over
    ``trials x max_k``): compared with ``vmap`` over points this halves the compile time (~1.3 s instead
    of ~3 s on a 2-core CPU) and is as fast or faster at 1e4 trials. Chunks are equal-sized (the last is
    padded with copies of a point) so one shape is compiled per call, at most ``_CHUNK_ELEMS`` output
    values each, and at least two when ``P >= 2`` so that two host threads keep two cores busy (XLA:CPU
    runs these loops on one core). With ``n > 1`` local devices a call holds ``n`` times as many points
    (at most ``_CHUNK_ELEMS`` output values per device), split evenly over the devices (``Shards.local``).
    A point's result does not depend on the chunk or the device it runs on.
    """
    devs = jax.local_devices()
    nd = len(devs)
    if chunk_points is None:
        C = max(1, min(_CHUNK_ELEMS // max(per_point_elems, 1), math.ceil(P / (2 if nd == 1 else nd))))
        C *= 1 if nd == 1 else nd
    else:
        C = _positive_int("chunk_points", chunk_points)
    C = min(C, P)
    if nd > 1:
        return _run_sharded(run, arrays, ids, key, P, -(-C // nd) * nd, devs)
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
        x64 = x64_enabled()  # thread-local: the workers run under the caller's setting

        def in_thread(j):
            with float64(x64):
                one(j)

        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(in_thread, range(len(results))))
    else:
        one(0)
    return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs, axis=0), *results)


def _run_sharded(run, arrays, ids, key, P, C, devs):
    """Chunks of ``C`` points (a multiple of the device count), each one call split over all ``devs``."""
    sh = Shards(devs)
    f = sh.local(_apply, (PS("batch"), PS("batch")), PS("batch"), func=run.func, kw=tuple(sorted(run.keywords.items())))
    results = []
    for lo in range(0, P, C):
        hi = min(lo + C, P)
        rows = np.concatenate([np.arange(lo, hi), np.full(C - (hi - lo), lo)])  # pad: one compiled shape
        keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.asarray(ids[rows]))
        out = f(sh.put(keys), {n: sh.put(a[rows]) for n, a in arrays.items()})
        results.append(jax.tree_util.tree_map(lambda x, n=hi - lo: np.asarray(x)[:n], out))
    return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs, axis=0), *results)


# ----------------------------------------------------------------------------- linear model, public
def _refuse_traced(driver: str, core: str, *values) -> None:
    if any(isinstance(v, jax.core.Tracer) for v in values):  # (said "k must be an integer >= 1; got JitTracer")
        raise InputError(
            f"{driver} is a host driver (it checks values, chunks the points and returns numpy arrays) and cannot "
            f"run under jax.jit, vmap or grad; inside a transformed function use {core}, the pure core"
        )


def affine_noise_error(
    key,
    k,
    rho_c,
    sigma,
    T,
    L=1.0,
    *,
    trials: int,
    aggregate: str = "mean",
    max_k: int | None = None,
    max_T: int | None = None,
    dtype=None,
    trace: bool = False,
    point_ids=None,
    chunk_points: int | None = None,
):
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
    _refuse_traced("affine_noise_error", "mascot.affine_noise_point", key, k, rho_c, sigma, T, L)
    if aggregate not in kn.AGGREGATES:
        raise InputError(f"aggregate must be one of {kn.AGGREGATES}; got {aggregate!r}")
    trials = _positive_int("trials", trials)
    dt = resolve_dtype(dtype)
    key = as_key(key)
    raw = dict(k=k, rho_c=rho_c, sigma=sigma, T=T, L=L)
    p = validate_noise_params(**raw)
    arrays, P, scalar, ids = _points(p, point_ids)
    max_k = _maximum("max_k", max_k, arrays["k"])
    max_T = _maximum("max_T", max_T, arrays["T"])
    arrays = dict(
        k=arrays["k"].astype(np.int32),
        T=arrays["T"].astype(np.int32),
        rho_c=arrays["rho_c"].astype(dt),
        sigma=arrays["sigma"].astype(dt),
        L=arrays["L"].astype(dt),
    )
    run = partial(kn.affine_chunk, trials=trials, max_k=max_k, max_T=max_T, aggregate=aggregate, trace=trace, dtype=dt)
    return _run_points(run, arrays, ids, key, P, trials, max_T, trace, chunk_points, scalar)


def _rule_state0(value0, parity0, level0):
    from mascot.kernels.state_tracking import MAX_ABS_VALUE, PARITY_CODES

    v = np.asarray(value0, dtype=np.float64) if not isinstance(value0, str) else None
    if v is None or not np.all(np.isfinite(v)) or not np.all(np.abs(v) <= MAX_ABS_VALUE):
        raise InputError(f"value0 must be finite with |value0| <= {MAX_ABS_VALUE:g}; got {value0!r}")

    def code(x):
        if isinstance(x, str) and x in PARITY_CODES:
            return PARITY_CODES[x]
        if not isinstance(x, (bool, np.bool_, str)) and isinstance(x, (int, float, np.number)) and x in (0, 1):
            return int(x)
        raise InputError(f"parity0 must be 'A'/'B' or 0 ('A')/1 ('B'); got {parity0!r}")

    obj = np.asarray(parity0, dtype=object)
    par = np.array([code(x) for x in obj.ravel().tolist()], dtype=np.int64).reshape(obj.shape)
    lv = np.asarray(level0)
    if (
        lv.dtype == bool
        or lv.dtype.kind not in "iuf"
        or not np.all(lv == np.round(lv))
        or not np.all((lv >= 1) & (lv <= 9))
    ):
        raise InputError(f"level0 must be an integer in 1..9; got {level0!r}")
    return v, par, lv.astype(np.int64)


def rule_noise_error(
    key,
    *,
    k,
    rho_c,
    sigma,
    T,
    trials: int,
    value0=50.0,
    parity0=0,
    level0=3,
    aggregate: str = "mean",
    max_k: int | None = None,
    max_T: int | None = None,
    trace: bool = False,
    point_ids=None,
    chunk_points: int | None = None,
):
    """Monte Carlo ``E_ceg`` of the affine-noise model applied to the (nonlinear) state-tracking rule.

    The noise model of Sec. 3.5 of the predictive-maps paper (shared bias ``b_t ~ N(0, rho_c sigma^2)``,
    independent ``xi_t^(i) ~ N(0, (1 - rho_c) sigma^2)``) on the Value of the state-tracking task of
    Appendix C (:func:`mascot.kernels.state_tracking.rule_step`); see :func:`mascot.kernels.noise.rule_noise_point` for the
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

    Arguments: ``key`` a PRNG key or an int seed; ``k``, ``rho_c``, ``sigma``, ``T``, ``trials``, ``aggregate``,
    ``max_k``, ``max_T``, ``trace``, ``point_ids`` and ``chunk_points`` as in :func:`affine_noise_error`.
    """
    _refuse_traced(
        "rule_noise_error", "mascot.kernels.noise.rule_noise_point", key, k, rho_c, sigma, T, value0, parity0, level0
    )
    if aggregate not in kn.AGGREGATES:
        raise InputError(f"aggregate must be one of {kn.AGGREGATES}; got {aggregate!r}")
    trials = _positive_int("trials", trials)
    if not x64_enabled():
        raise InputError(
            "rule_noise_error needs 64-bit JAX (the state-tracking rule is exact int64/float64 "
            "arithmetic; jax_enable_x64): run inside `with mascot.kernels.precision.float64():`"
        )
    key = as_key(key)
    p = validate_noise_params(k=k, rho_c=rho_c, sigma=sigma, T=T)
    v0, p0, l0 = _rule_state0(value0, parity0, level0)
    arrays, P, scalar, ids = _points(dict(p, value0=v0, parity0=p0, level0=l0), point_ids)
    max_k = _maximum("max_k", max_k, arrays["k"])
    max_T = _maximum("max_T", max_T, arrays["T"])
    arrays = dict(
        k=arrays["k"].astype(np.int32),
        T=arrays["T"].astype(np.int32),
        rho_c=arrays["rho_c"].astype(np.float64),
        sigma=arrays["sigma"].astype(np.float64),
        value0=arrays["value0"].astype(np.float64),
        parity0=arrays["parity0"].astype(np.int32),
        level0=arrays["level0"].astype(np.int32),
    )
    run = partial(kn.rule_chunk, trials=trials, max_k=max_k, max_T=max_T, aggregate=aggregate, trace=trace)
    return _run_points(run, arrays, ids, key, P, trials, max_T, trace, chunk_points, scalar)
