"""Simulated method of moments with optax: fit named, boxed scalar parameters of a JAX simulator.

Public API (stable; the calibration modules of both protocols build on it)::

    @dataclass(frozen=True)
    class Param:                 # one named scalar parameter with its box
        name: str; lo: float; hi: float; init: float      # lo < init < hi; lo may be -inf, hi may be +inf

    class FitResult(NamedTuple):
        params: dict[str, float]  # constrained values of the best iterate
        loss: float               # objective at the best iterate
        history: np.ndarray       # objective per iteration (at the iterate before its update)
        iterations: int
        wall_s: float

    fit_smm(simulate, params, target, *, weights=None, steps=300, lr=0.05, grad="es", es_sigma=0.1,
            es_pairs=16, seed=0, tol=None, progress=None) -> FitResult
    bootstrap(refit, n, seed=0) -> (np.ndarray of shape (n, n_params), list of parameter names)
    gauss_newton(moments_at, params, start, target, weights, *, iters=6, h=None, coords=None, progress=None) -> FitResult
    linearized_bootstrap(moments_at, params, estimate, data_dev, sim_dev, weights, *, h=None, rcond=1e-9, seed=0,
                         coords=None) -> LinearizedBootstrap(draws, jacobian, names)
    class Coords(NamedTuple):    # local coordinates for the polish and the bootstrap (default: the box transforms)
        fwd: Callable[[dict], np.ndarray]; inv: Callable[[np.ndarray], dict]; step: per-coordinate h or None
    box_coords(params) -> Coords
    to_unconstrained(params, values) / to_constrained(params, u)   # the box transforms, exposed for tests

The objective (SMM with a diagonal weight matrix) is

    L(theta) = sum_j w_j (m_j(theta; xi) - target_j)^2,

where ``m = simulate(theta, key)`` are simulated moments and ``xi`` (the PRNG ``key``) is the same at every
iteration (common random numbers), so ``L`` is a deterministic function of ``theta``. ``theta`` lives in an
unconstrained space ``u``: ``theta = lo + (hi - lo) * sigmoid(u)`` on a box, ``lo + exp(u)`` on ``[lo, inf)``,
``hi - exp(u)`` on ``(-inf, hi]``, ``u`` itself on the real line. optax's Adam updates ``u``.

Gradients:

* ``grad="pathwise"``: ``jax.grad`` of ``L(u)`` through ``simulate`` (needs a differentiable simulator);
* ``grad="es"``: the gradient of the Gaussian-smoothed objective ``L_s(u) = E[L(u + s*eps)]``, eps ~ N(0, I),
  estimated with ``es_pairs`` antithetic pairs (the score-function estimator):
  ``grad L_s(u) ~ 1/(2 s n) sum_i (L(u + s eps_i) - L(u - s eps_i)) eps_i``. It works for simulators with
  discrete draws (mixtures, rounding, argmax), where the pathwise gradient is zero almost everywhere.
  The ``2 * es_pairs`` evaluations are ``vmap``-ped and the whole step is ``jit``-ted; the directions ``eps``
  change every iteration (from ``seed``), the simulation key does not.

The best iterate (lowest ``L`` seen) is returned, not the last. ``tol``: stop as soon as ``L <= tol``.
``progress(i, loss)`` is called after every iteration when given.

``bootstrap(refit, n, seed)`` calls ``refit(b)`` for ``n`` replicate seeds ``b`` (distinct integers derived
from ``(seed, i)`` with numpy's SeedSequence) and stacks the returned parameter dicts into an ``(n, p)``
array whose columns follow the first dict's key order.

``gauss_newton`` polishes an estimate (e.g. :func:`fit_smm`'s) by Levenberg-Marquardt steps on the same
objective, ``G`` by central differences of ``moments_at`` in ``u`` (a fixed key: common random numbers), a
step accepted only when it lowers the objective. ES steps average the gradient over a smoothing radius and
stall in long, curved valleys; a few of these steps, on a larger simulation, finish the descent (on the
recovery run: objective 60.5 -> 11.7 in six steps, the truth's 50.3).

``linearized_bootstrap`` is the cheap, honest alternative to refitting: each replicate is one Gauss-Newton
step of the weighted objective from the estimate, ``u_b = u^ + (G' W G)^-1 G' W (d_b - s_b)``, where ``G`` is
the Jacobian of the simulated moments in ``u`` (central differences of ``moments_at``, which should hold its
simulation key fixed: common random numbers), ``d_b`` a resampled data moment vector minus the observed one
and ``s_b`` a simulated moment vector under a fresh key minus their mean (the estimate's own simulation
noise). Its spread is the SMM sandwich covariance ``A^-1 G'W (S_d + S_s) W G A^-1`` (``A = G'WG``); directions
the moments hardly move get a large spread instead of the near-zero one a warm-started refit shows, and
directions no moment moves at all (curvature below ``rcond`` of the largest) spread over the whole box. Draws
are mapped back through the box transforms, so they stay inside every box.

Coordinates: both work in a vector ``u`` and take it from ``coords`` (:class:`Coords`; default
:func:`box_coords`, the transforms above). A linearization is only as good as its coordinates: where the
model has a near-symmetry (a scale that moves between two parameters, ``c * sigma`` fixed), the valley of the
objective is straight in log coordinates and curved in box (logit) coordinates, and one Gauss-Newton step
along a curved valley leaves it at once, so the sandwich sees a steep objective and under-covers. A caller
that knows its model's structure passes coordinates in which its valleys are straight (``inv`` must return
values inside every box).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from mascot.errors import InputError

__all__ = [
    "Param",
    "FitResult",
    "Coords",
    "LinearizedBootstrap",
    "box_coords",
    "fit_smm",
    "bootstrap",
    "gauss_newton",
    "linearized_bootstrap",
    "to_unconstrained",
    "to_constrained",
]


@dataclass(frozen=True)
class Param:
    """One named scalar parameter with its box ``[lo, hi]`` (either end may be infinite) and start ``init``."""

    name: str
    lo: float
    hi: float
    init: float

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise InputError(f"Param name must be a non-empty string; got {self.name!r}")
        lo, hi, init = float(self.lo), float(self.hi), float(self.init)
        if math.isnan(lo) or math.isnan(hi) or not math.isfinite(init):
            raise InputError(
                f"Param {self.name!r}: lo, hi must not be NaN and init must be finite; "
                f"got lo={self.lo}, hi={self.hi}, init={self.init}"
            )
        if not lo < init < hi:
            raise InputError(f"Param {self.name!r}: need lo < init < hi; got lo={lo}, init={init}, hi={hi}")

    @property
    def kind(self) -> str:
        """``'box'``, ``'lower'`` (``[lo, inf)``), ``'upper'`` (``(-inf, hi]``) or ``'free'``."""
        fl, fh = math.isfinite(self.lo), math.isfinite(self.hi)
        return "box" if fl and fh else "lower" if fl else "upper" if fh else "free"


class FitResult(NamedTuple):
    """Result of :func:`fit_smm`."""

    params: dict[str, float]
    loss: float
    history: np.ndarray
    iterations: int
    wall_s: float


def _fwd(p: Param, x):
    """Constrained value -> unconstrained coordinate (numpy float64)."""
    x = float(x)
    k = p.kind
    if k == "box":
        z = (x - p.lo) / (p.hi - p.lo)
        z = min(max(z, 1e-12), 1 - 1e-12)
        return math.log(z) - math.log1p(-z)
    if k == "lower":
        return math.log(max(x - p.lo, 1e-300))
    if k == "upper":
        return math.log(max(p.hi - x, 1e-300))
    return x


def _inv(p: Param, u):
    """Unconstrained coordinate -> constrained value (jax or numpy, elementwise)."""
    import jax
    import jax.numpy as jnp

    k = p.kind
    if k == "box":
        return p.lo + (p.hi - p.lo) * jax.nn.sigmoid(u)
    if k == "lower":
        return p.lo + jnp.exp(u)
    if k == "upper":
        return p.hi - jnp.exp(u)
    return u


class Coords(NamedTuple):
    """Local coordinates of a parameter dict for :func:`gauss_newton` and :func:`linearized_bootstrap`:
    ``fwd(values: dict) -> u`` (numpy float64, one entry per fitted parameter) and ``inv(u) -> dict``
    (constrained values, inside every box: ``inv`` clips); ``inv(fwd(v)) == v`` inside the boxes. ``step``:
    the central-difference step per coordinate suited to them (``None``: the functions' default 0.25);
    ``raw``: ``inv`` without the clipping (``None`` when ``inv`` never clips, as the box transforms)."""

    fwd: Callable
    inv: Callable
    step: object = None
    raw: Callable | None = None  # inv without the clipping to the boxes (None: inv never clips)


def box_coords(params: Sequence[Param]) -> Coords:
    """The box transforms (module docstring) as :class:`Coords`."""
    params = tuple(params)
    return Coords(
        lambda values: to_unconstrained(params, values),
        lambda u: {p.name: _inv_np(p, u[i]) for i, p in enumerate(params)},
    )


def to_unconstrained(params: Sequence[Param], values: dict[str, float] | None = None) -> np.ndarray:
    """The unconstrained vector ``u`` of ``values`` (default: each parameter's ``init``)."""
    values = values or {}
    return np.array([_fwd(p, values.get(p.name, p.init)) for p in params], dtype=np.float64)


def to_constrained(params: Sequence[Param], u) -> dict:
    """``{name: constrained value}`` for the unconstrained vector ``u`` (jax arrays in, jax arrays out)."""
    return {p.name: _inv(p, u[i]) for i, p in enumerate(params)}


def _check(params, target, weights, grad, steps, es_pairs, es_sigma, lr):
    params = list(params)
    if not params:
        raise InputError("fit_smm needs at least one Param")
    if not all(isinstance(p, Param) for p in params):
        raise TypeError("params must be a sequence of Param")
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise InputError(f"parameter names must be unique; got {names}")
    target = np.asarray(target, dtype=np.float64)
    if target.ndim != 1 or target.size == 0 or not np.all(np.isfinite(target)):
        raise InputError(f"target must be a non-empty finite 1-D array; got shape {target.shape}")
    if weights is None:
        weights = np.ones_like(target)
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != target.shape or np.any(weights < 0) or not np.all(np.isfinite(weights)):
        raise InputError(
            f"weights must be finite, >= 0 and of the target's shape {target.shape}; got shape {weights.shape}"
        )
    if grad not in ("es", "pathwise"):
        raise InputError(f"grad must be 'es' or 'pathwise'; got {grad!r}")
    if int(steps) < 1:
        raise InputError(f"steps must be >= 1; got {steps}")
    if int(es_pairs) < 1 or not es_sigma > 0 or not lr > 0:
        raise InputError(f"need es_pairs >= 1, es_sigma > 0, lr > 0; got {es_pairs}, {es_sigma}, {lr}")
    return params, target, weights


def fit_smm(
    simulate: Callable,
    params: Sequence[Param],
    target,
    *,
    weights=None,
    steps: int = 300,
    lr: float = 0.05,
    grad: str = "es",
    es_sigma: float = 0.1,
    es_pairs: int = 16,
    seed: int = 0,
    tol: float | None = None,
    progress: Callable | None = None,
    init: dict | None = None,
    key=None,
    decay: float | None = None,
    cap=None,
) -> FitResult:
    """Minimise ``sum(weights * (simulate(theta, key) - target)**2)`` over the boxed ``params``.

    ``simulate(theta, key)`` takes ``{name: scalar jax array}`` and a PRNG key and returns a 1-D array of
    moments of the target's length. ``init`` overrides the starting values (default: each ``Param.init``);
    ``key`` overrides the common-random-numbers key (default ``jax.random.PRNGKey(seed)``). ``decay``: cosine-
    decay the learning rate and ``es_sigma`` to ``decay`` times their start over ``steps`` (default: constant).
    ``cap``: per-moment scales (the target's shape) for a robust loss: each simulated moment ``m`` enters as
    ``target + cap * tanh((m - target) / cap)``, quadratic near the target and bounded where parameters make the
    simulation diverge (default: the plain squares). ``simulate`` sees no data: a fit of other data with the same
    ``simulate`` reuses its compiled step. See the module docstring for the gradient estimators.
    """
    import jax
    import jax.numpy as jnp

    params, target_np, weights_np = _check(params, target, weights, grad, steps, es_pairs, es_sigma, lr)
    t0 = time.perf_counter()
    dtype = jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32
    target_j = jnp.asarray(target_np, dtype=dtype)
    weights_j = jnp.asarray(weights_np, dtype=dtype)
    if cap is not None:
        cap_np = np.asarray(cap, dtype=np.float64)
        if cap_np.shape != target_np.shape or not np.all(cap_np > 0):
            raise InputError(f"cap must be > 0 and of the target's shape {target_np.shape}; got shape {cap_np.shape}")
        # (scale, 1 / scale): the reciprocal taken in the fit's dtype, as XLA folds a division by a constant
        cap = (jnp.asarray(cap_np, dtype=dtype), jnp.asarray(1, dtype=dtype) / jnp.asarray(cap_np, dtype=dtype))
    k_crn, k_es = jax.random.split(jax.random.PRNGKey(seed)) if key is None else (key, jax.random.PRNGKey(seed))

    if decay is not None and not 0 < decay <= 1:
        raise InputError(f"decay must be in (0, 1]; got {decay}")
    opt, step = _build_step(
        simulate,
        tuple(params),
        grad,
        float(es_sigma),
        int(es_pairs),
        float(lr),
        jnp.dtype(dtype).name,
        int(target_j.shape[0]),
        None if decay is None else (int(steps), float(decay)),
    )

    u = jnp.asarray(to_unconstrained(params, init), dtype=dtype)
    state = opt.init(u)
    best_u, best = np.asarray(u), np.inf
    hist = []
    for i in range(int(steps)):
        k_es, k = jax.random.split(k_es)
        u_new, state, loss = step(u, state, k, target_j, weights_j, k_crn, jnp.asarray(i, jnp.int32), cap)
        lv = float(loss)
        hist.append(lv)
        if np.isfinite(lv) and lv < best:
            best, best_u = lv, np.asarray(u)
        if progress is not None:
            progress(i, lv)
        u = u_new
        if tol is not None and lv <= tol:
            break
    if not np.isfinite(best):
        raise FloatingPointError("fit_smm: the objective was never finite; check simulate and the boxes")
    theta = to_constrained(params, jnp.asarray(best_u))
    out = {p.name: float(theta[p.name]) for p in params}
    return FitResult(out, float(best), np.asarray(hist, dtype=np.float64), len(hist), time.perf_counter() - t0)


@functools.lru_cache(maxsize=32)
def _build_step(simulate, params, grad, es_sigma, es_pairs, lr, dtype, n_m, decay=None):
    """The jitted optimiser step, cached per (simulate, params, settings) so that repeated fits (bootstrap
    refits, warm starts) with the same simulator compile once; target, weights and key are arguments."""
    import jax
    import jax.numpy as jnp
    import optax

    dtype = jnp.dtype(dtype)
    n_p = len(params)
    if decay is None:
        opt = optax.adam(lr)
        sig = lambda count: es_sigma
    else:
        sched = optax.cosine_decay_schedule(1.0, decay[0], alpha=decay[1])
        opt = optax.adam(lambda c: lr * sched(c))
        sig = lambda count: es_sigma * sched(count)

    def objective(u, target_j, weights_j, k_crn, cap):
        m = jnp.asarray(simulate(to_constrained(params, u), k_crn))
        if m.shape != (n_m,):
            raise InputError(f"simulate returned moments of shape {m.shape}; target has shape {(n_m,)}")
        if cap is not None:  # the robust loss (fit_smm's docstring)
            m = target_j + cap[0] * jnp.tanh((m - target_j) * cap[1])
        return jnp.sum(weights_j * (m.astype(dtype) - target_j) ** 2)

    if grad == "pathwise":
        vg = jax.value_and_grad(objective)

        def value_grad(u, k, t, w, kc, count, cap):
            return vg(u, t, w, kc, cap)
    else:

        def value_grad(u, k, t, w, kc, count, cap):
            s_ = sig(count)
            eps = jax.random.normal(k, (es_pairs, n_p), dtype=dtype)
            # the centre is the batch's last point: the simulator appears once in the compiled step, not twice
            # (an ES step of the trials simulator compiled in 13.5 s, now in about half)
            pts = jnp.concatenate([u + s_ * eps, u - s_ * eps, u[None]], axis=0)
            f = jax.vmap(lambda x: objective(x, t, w, kc, cap))(pts)
            diff = f[:es_pairs] - f[es_pairs:-1]
            diff = jnp.where(jnp.isfinite(diff), diff, 0.0)
            g = (diff[:, None] * eps).sum(0) / (2.0 * s_ * es_pairs)
            return f[-1], g

    @jax.jit
    def step(u, state, k, t, w, kc, count, cap=None):
        loss, g = value_grad(u, k, t, w, kc, count, cap)
        g = jnp.where(jnp.isfinite(g), g, 0.0)
        upd, state = opt.update(g, state, u)
        return optax.apply_updates(u, upd), state, loss

    return opt, step


def bootstrap(refit: Callable[[int], dict], n: int, seed: int = 0) -> tuple[np.ndarray, list[str]]:
    """Call ``refit(b)`` for ``n`` replicate seeds and stack the parameter dicts: ``(array (n, p), names)``.

    Replicate ``i`` gets ``b = SeedSequence([seed, i]).generate_state(1)[0]`` (a distinct 32-bit integer),
    which ``refit`` uses to resample its data (and, if it likes, its simulation key).
    """
    n = int(n)
    if n < 1:
        raise InputError(f"bootstrap needs n >= 1; got {n}")
    rows, names = [], None
    for i in range(n):
        b = int(np.random.SeedSequence([int(seed), i]).generate_state(1)[0])
        d = refit(b)
        if names is None:
            names = list(d)
        elif set(d) != set(names):
            raise InputError(f"refit returned keys {sorted(d)} in replicate {i}; expected {sorted(names)}")
        rows.append([float(d[k]) for k in names])
    return np.asarray(rows, dtype=np.float64), names


def _inv_np(p: Param, u: float) -> float:
    """:func:`_inv` in numpy float64 for one scalar."""
    k = p.kind
    if k == "box":
        return p.lo + (p.hi - p.lo) * (0.5 * (1.0 + math.tanh(0.5 * u)))
    if k == "lower":
        return p.lo + math.exp(min(u, 700.0))
    if k == "upper":
        return p.hi - math.exp(min(u, 700.0))
    return u


def _in_u(moments_at, coords: Coords):
    """``moments_at`` as a function of the coordinate vector ``u`` (numpy float64 in and out)."""
    return lambda u: np.asarray(moments_at(coords.inv(u)), np.float64)


def _step(h, coords: Coords):
    """The central-difference step: ``h`` if given, else the coordinates' own, else 0.25."""
    return h if h is not None else coords.step if coords.step is not None else 0.25


def _jacobian(at, u0, h, coords: Coords):
    """Central differences, step ``h`` (a scalar, or one per coordinate), each divided by the displacement the
    coordinates really made (``fwd(inv(u))``): a parameter at its box's edge moves only inward, and dividing by
    ``2 h`` would halve its slope."""
    hv = np.broadcast_to(np.asarray(h, np.float64), u0.shape)
    cols = []
    for j in range(len(u0)):
        e = np.zeros(len(u0))
        e[j] = hv[j]
        span = float(coords.fwd(coords.inv(u0 + e))[j] - coords.fwd(coords.inv(u0 - e))[j])
        cols.append((at(u0 + e) - at(u0 - e)) / span if span > 0 else np.zeros_like(at(u0)))
    G = np.stack(cols, 1)
    return np.where(np.isfinite(G), G, 0.0)


def gauss_newton(
    moments_at: Callable,
    params: Sequence[Param],
    start: dict,
    target,
    weights,
    *,
    iters: int = 6,
    h=None,
    max_step: float = 2.0,
    coords: Coords | None = None,
    progress: Callable | None = None,
) -> FitResult:
    """Levenberg-Marquardt polish of ``start`` on ``sum_j w_j (moments_at(theta)_j - target_j)^2`` (module
    docstring). ``moments_at(theta) -> moments`` (numpy; a fixed key); NaN targets or moments count 0. Each
    iteration: ``G`` by central differences (step ``h`` in ``u``: a scalar or one per coordinate; default the
    coordinates' ``step``, else 0.25), then damped steps (each coordinate clipped to
    ``max_step``) until one lowers the objective; it stops after ``iters`` iterations, when no damping helps,
    or when an iteration gains less than 0.1 %. ``coords``: the coordinates of ``u`` (default
    :func:`box_coords`). ``progress(i, loss)``: called after iteration ``i`` (1, 2, ...) with the objective then.
    Returns the best point (the start if nothing helped)."""
    t0 = time.perf_counter()
    params = tuple(params)
    target = np.asarray(target, np.float64)
    w = np.asarray(weights, np.float64)

    coords = coords or box_coords(params)
    h = _step(h, coords)
    at = _in_u(moments_at, coords)

    def loss(m):
        r = np.where(np.isfinite(m - target), m - target, 0.0)
        return float((w * r * r).sum())

    u = np.asarray(coords.fwd(start), np.float64)
    m = at(u)
    best = loss(m)
    hist, mu = [best], 1e-3
    for _ in range(int(iters)):
        G = _jacobian(at, u, h, coords)
        A = G.T @ (w[:, None] * G)
        g = G.T @ (w * np.where(np.isfinite(target - m), target - m, 0.0))
        moved = False
        while mu <= 1e6:
            step = np.clip(np.linalg.solve(A + mu * np.diag(np.diag(A) + 1e-12), g), -max_step, max_step)
            m2 = at(u + step)
            l2 = loss(m2)
            if l2 < best:
                gain = (best - l2) / max(best, 1e-300)
                u, m, best, mu, moved = u + step, m2, l2, mu / 3.0, True
                break
            mu *= 4.0
        hist.append(best)
        if progress is not None:
            progress(len(hist) - 1, best)
        if not moved or gain < 1e-3:
            break
    est = {p.name: float(coords.inv(u)[p.name]) for p in params}
    return FitResult(est, best, np.asarray(hist), len(hist) - 1, time.perf_counter() - t0)


class LinearizedBootstrap(NamedTuple):
    """Result of :func:`linearized_bootstrap`."""

    draws: np.ndarray  # (n, p) constrained parameter values, columns in ``names`` order
    jacobian: np.ndarray  # (m, p) d moments / d u at the estimate
    names: list
    identified: np.ndarray  # (n, p) the same draws without the unidentified directions' spread
    sd_unclipped: np.ndarray  # (p,) s.d. of the identified draws before any clipping to the boxes


def linearized_bootstrap(
    moments_at: Callable,
    params: Sequence[Param],
    estimate: dict,
    data_dev,
    sim_dev,
    weights,
    *,
    h=None,
    rcond: float = 1e-9,
    seed: int = 0,
    coords: Coords | None = None,
) -> LinearizedBootstrap:
    """Bootstrap draws of the estimate through the objective's local linearization (module docstring).

    ``moments_at(theta) -> moment vector`` (numpy, fixed simulation key); ``data_dev`` (n, m): resampled
    data moments minus the observed ones; ``sim_dev`` (n, m): simulated moments at the estimate under fresh
    keys minus their mean (zeros for none); ``weights`` (m,); ``h``: the central-difference step in ``u``
    (as in :func:`gauss_newton`).
    Directions of ``u`` whose curvature ``G'WG`` is below ``rcond`` times the largest are not identified: their
    draws spread over the whole box (``seed`` draws that spread); ``identified`` holds the draws without that
    spread (for predictions: a direction that no moment moves at the estimate is flat only locally, and a draw
    at its box's edge may fit the data badly), ``sd_unclipped`` their s.d.s before any clipping to the boxes
    (the sandwich's: an estimate at its box's edge has half its draws clipped onto the edge, and their s.d.
    understates how far the data would move it). ``coords``: the coordinates of ``u`` (default
    :func:`box_coords`); the draws are ``coords.inv`` of ``u^ + du``."""
    params = tuple(params)
    data_dev, sim_dev = np.asarray(data_dev, np.float64), np.asarray(sim_dev, np.float64)
    w = np.asarray(weights, np.float64)
    if data_dev.ndim != 2 or data_dev.shape != sim_dev.shape or data_dev.shape[1] != w.size:
        raise InputError(f"data_dev and sim_dev must both be (n, {w.size}); got {data_dev.shape}, {sim_dev.shape}")
    coords = coords or box_coords(params)
    h = _step(h, coords)
    if not np.all(np.asarray(h, np.float64) > 0):
        raise InputError(f"h must be > 0; got {h}")
    u0 = np.asarray(coords.fwd(estimate), np.float64)
    at = _in_u(moments_at, coords)

    G = _jacobian(at, u0, h, coords)
    A = G.T @ (w[:, None] * G)
    lam, V = np.linalg.eigh(A)
    flat = lam <= rcond * max(lam.max(), 0.0)
    # identified directions: the Gauss-Newton step; the others (curvature below rcond of the largest: no
    # moment moves them) are not identified and get a spread far wider than any box (draws at the box edges)
    M = (V[:, ~flat] / lam[~flat]) @ V[:, ~flat].T @ (G.T * w)  # (p, m)
    dev = np.where(np.isfinite(data_dev), data_dev, 0.0) - np.where(np.isfinite(sim_dev), sim_dev, 0.0)
    du = dev @ M.T
    names = [p.name for p in params]

    def values(dus, inv):
        return np.array([[v[k] for k in names] for v in (inv(u0 + d) for d in dus)], np.float64)

    ident = values(du, coords.inv)
    sd_raw = values(du, coords.raw or coords.inv).std(0, ddof=1) if len(du) > 1 else np.full(len(names), np.nan)
    if flat.any():
        du = du + (1e3 * np.random.default_rng(seed).standard_normal((len(du), int(flat.sum())))) @ V[:, flat].T
    return LinearizedBootstrap(values(du, coords.inv) if flat.any() else ident, G, names, ident, sd_raw)


def _f32_tol(lo, hi) -> float:
    """Four float32 units of rounding at the scale of ``[lo, hi]``: the moments are computed in JAX's float32."""
    return 4 * float(np.finfo(np.float32).eps) * (1.0 + abs(lo) + abs(hi))


def in_range(x, lo, hi) -> bool:
    """``lo <= x <= hi`` up to float32 rounding: moments are computed in JAX's float32, so a held-out mean of 5.2
    rounded to 5.1999998 against a range from 5.2000003 is a tie, inside (an outside tester found such ties among
    the misses; counts of whole rounds make them common); NaN is never inside."""
    tol = _f32_tol(lo, hi)
    return bool(lo - tol <= x <= hi + tol)


def coverage(rows: list[dict]) -> dict:
    """What an out-of-sample check's rows (:func:`held_out_rows`, with ``observed_half_a`` where the fitted half's
    value is known) say, counted honestly: ``inside`` of ``n`` for every row, and ``counted_inside`` of ``counted``
    for the informative ones only. Not counted: a moment whose predicted range is one value and whose held-out
    value is that value (``constant``: the model holds it fixed, so "inside" says only that the data did too, e.g.
    the mode-1 rates of a ring-only run or the D rises of a model that never rises; off that value it is a miss,
    counted) and a moment equal to an earlier one in every number (``repeats``:
    e.g. D(0) under each strategy when the strategies share round 0). ``in_sample_inside`` of ``in_sample``: the
    fitted half's values inside the same ranges (the halves have equal sizes), which says whether the fit fitted
    what it saw (``fit_failed`` when under two thirds, against the 90% a right model reaches). ``undefined``: rows
    whose held-out value is missing or NaN (the held-out half has no observations of that moment, e.g. no mode-2
    rounds): neither hits nor misses.

    Returns: a dict of the counts and lists above.
    """
    constant, repeats, seen, counted, undefined = [], {}, {}, [], []
    for r in rows:
        if r["held_out"] is None or not np.isfinite(r["held_out"]):  # no observations of it in the held-out half
            undefined.append(r["moment"])
            continue
        key = (r["held_out"], r["lo"], r["hi"], r.get("observed_half_a"))
        single = not r["hi"] - r["lo"] > _f32_tol(r["lo"], r["hi"])
        if single and r["inside"]:  # (a held-out value off a single-valued range is a miss, counted)
            constant.append(r["moment"])
        elif key in seen:
            repeats[r["moment"]] = seen[key]
        else:
            seen[key] = r["moment"]
            counted.append(r)
    half_a = [r for r in counted if r.get("observed_half_a") is not None and np.isfinite(r["observed_half_a"])]
    return {
        "inside": int(sum(r["inside"] for r in rows)),
        "n": len(rows),
        "counted_inside": int(sum(r["inside"] for r in counted)),
        "counted": len(counted),
        "counted_outside": [r["moment"] for r in counted if not r["inside"]],
        "constant": constant,
        "repeats": repeats,
        "undefined": undefined,
        "in_sample_inside": (inside_a := int(sum(in_range(r["observed_half_a"], r["lo"], r["hi"]) for r in half_a))),
        "in_sample": len(half_a),
        "fit_failed": inside_a < 2 * len(half_a) / 3,
    }


def coverage_markdown(cov: dict, *, quick: bool = False, loss: float | None = None) -> list[str]:
    """The lines of a split-half report that state :func:`coverage`'s counts (every sentence computed).

    Arguments: ``cov`` the dict of :func:`coverage`; ``quick`` the fit was a ``--quick`` smoke test; ``loss`` the
    fit's objective.

    Returns: a list of markdown lines.
    """
    lines = [
        f"**Informative held-out moments inside their predicted 5-95% range: {cov['counted_inside']} of "
        f"{cov['counted']}** (about {0.9 * cov['counted']:.0f} expected if the model and its uncertainty are right)"
        + (f"; outside: {', '.join(cov['counted_outside'])}." if cov["counted_outside"] else "."),
        "",
        f"All {cov['n']} rows of the table: {cov['inside']} inside. Not counted above: "
        + (
            f"{len(cov['constant'])} whose predicted range is the single value held out (the model holds them "
            f"fixed, so inside says only that the data did too: {', '.join(cov['constant'])})"
            if cov["constant"]
            else "no moment with a single-valued range"
        )
        + "; "
        + (
            f"{len(cov['repeats'])} equal in every number to an earlier row ("
            + ", ".join(f"{k} = {v}" for k, v in cov["repeats"].items())
            + ")."
            if cov["repeats"]
            else "no repeated moment."
        )
        + (
            f" Not defined in the held-out half (no observations of them there: neither hits nor misses): "
            f"{', '.join(cov['undefined'])}."
            if cov.get("undefined")
            else ""
        ),
    ]
    if cov["in_sample"]:
        lines += [
            "",
            f"In sample, the fitted half's own values lie inside the same ranges for {cov['in_sample_inside']} of "
            f"{cov['in_sample']} informative moments"
            + (f" (objective {loss:.4g})" if loss is not None else "")
            + (
                ": **the fit does not reproduce the data it was fitted to** (under two thirds inside, where a right "
                "model holds about 90%), so the held-out count measures a failed calibration, not prediction."
                if cov["fit_failed"]
                else "."
            ),
        ]
    if quick:
        lines += ["", "A `--quick` smoke test: fewer optimiser steps and simulated runs than a calibration uses."]
    return lines


def held_out_rows(names, observed, median, lo, hi) -> list[dict]:
    """One row per moment of an out-of-sample check: the held-out value, the prediction's median and range, and
    whether the value lies in it (:func:`in_range`)."""
    return [
        {
            "moment": nm,
            "held_out": float(observed[i]),
            "predicted": float(median[i]),
            "lo": float(lo[i]),
            "hi": float(hi[i]),
            "inside": in_range(observed[i], lo[i], hi[i]),
        }
        for i, nm in enumerate(names)
    ]
