"""The fitting machinery of the deliberation calibration (:mod:`mascot.calibrate.deliberation`): starting
values from closed forms, the SMM fit (optax Adam on ES gradients, :func:`mascot.calibrate.fit.fit_smm`), the
simulated moments at a batch of parameter points (:class:`Moments`), and the Gauss-Newton polish and its
Jacobian.

The polish is hand-written on purpose: on the committed Table VIII fits, from the Adam estimate and with the same
budget of simulator evaluations, it lowers the objective further than optax Adam on finite-difference or ES
gradients (``benchmarks/bench_polish.py``, results in ``benchmarks/results_polish_cpu.json``).
"""

from __future__ import annotations

import math

import numpy as np

from mascot.protocols.deliberation.surrogate import RateLawParams

__all__ = [
    "BOX",
    "Moments",
    "initial_guess",
    "fit_params",
    "clip_box",
    "jacobian",
    "ridge_solve",
    "gauss_newton_polish",
    "predict",
]

#: the box each fitted parameter is kept in
BOX = {
    "rate1": (0.2, 1.3),
    "slope1": (-1.5, 1.5),
    "rate2": (0.2, 1.3),
    "slope2": (-1.5, 1.5),
    "reply_chars1": (0.0, 12000.0),
    "reply_chars2": (0.0, 12000.0),
    "prior_scale": (0.3, 2.0),
    "compliance_noise": (0.0, 0.8),
    "round_noise": (0.0, 1.0),
    "initial_spread": (0.0, 0.4),
    "verbosity": (0.0, 1.5),
}


# ----------------------------------------------------------------------------- compiled programs
_PROGRAMS: dict = {}


def _program(kind: str, setup, base: RateLawParams, *rest, build):
    """``build()``'s function, once per ``(kind, deliberation setting, fixed parameters, rest)`` in this process:
    fits of the same setting (the paper's three models, the halves of a split, a rerun) share one simulator and so
    one compiled program each; the data they fit are arguments, never part of it. Keeps the 32 latest."""
    import hashlib
    import pickle

    key = (kind, hashlib.sha256(pickle.dumps(tuple(setup))).hexdigest(), base, *rest)
    f = _PROGRAMS.pop(key, None)
    if f is None:
        f = build()
    _PROGRAMS[key] = f  # most recent last
    while len(_PROGRAMS) > 32:
        _PROGRAMS.pop(next(iter(_PROGRAMS)))
    return f


# ----------------------------------------------------------------------------- fitting
def initial_guess(setup, target: np.ndarray, names: list[str], base: RateLawParams) -> dict:
    """Starting values from closed forms: rates from the per-strategy mean contraction
    ``(D_final / D(0))^(1 / rounds)`` (or the regression intercepts), reply lengths by inverting the round-cost
    formula, ``prior_scale`` from D(0)."""
    t = dict(zip(names, target))
    g = {}
    for m, s in ((1, "complete"), (2, "ring")):
        if f"alpha:{m}" in t:
            g[f"rate{m}"] = math.exp(t[f"alpha:{m}"])
            g[f"slope{m}"] = t[f"beta:{m}"]
        elif f"rounds:{s}" in t and t[f"rounds:{s}"] > 0:
            g[f"rate{m}"] = (t[f"d_final:{s}"] / t[f"d0:{s}"]) ** (1.0 / t[f"rounds:{s}"])
            g[f"slope{m}"] = 0.0
        cost = t.get(f"cost:{m}")
        if cost is None and f"rounds:{s}" in t:
            cost = t[f"tokens:{s}"] / t[f"rounds:{s}"]
        if cost is not None:
            raw = cost * 1000.0 / setup.token_scale
            fixed = np.sum(np.ceil(setup.sys_chars / 4) + 8.5 + (setup.user_chars[m - 1] + 2) / 4)
            g[f"reply_chars{m}"] = max(10.0, (raw - fixed) / (setup.reads[m - 1].sum() / 4.0))
    # paper-like data: two points of each rate law -- the adaptive run's mode-1 phase (D(0) -> eta in `switch`
    # rounds) and mode-2 phase (eta -> D_final) against the single-mode runs' mean rates, each placed at the
    # geometric middle of the D range it covers
    finals = [t.get(f"d_final:{s}", 0.0) for s in ("adaptive", "complete", "ring")]
    if (
        "alpha:1" not in t
        and "switch" in t
        and {"rounds:adaptive", "rounds:complete", "rounds:ring"} <= set(t)
        and min(finals) > 0  # (a final D of exactly 0 gives no rate: the defaults below stand)
    ):
        eta, sw, ra = setup.eta, t["switch"], t["rounds:adaptive"]
        pts = {
            1: ((eta / t["d0:adaptive"]) ** (1 / max(sw, 1)), math.sqrt(t["d0:adaptive"] * eta), "complete"),
            2: ((t["d_final:adaptive"] / eta) ** (1 / max(ra - sw, 1)), math.sqrt(eta * t["d_final:adaptive"]), "ring"),
        }
        for m, (lam_a, d_a, s) in pts.items():
            lam_s = (t[f"d_final:{s}"] / t[f"d0:{s}"]) ** (1.0 / t[f"rounds:{s}"])
            d_s = math.sqrt(t[f"d_final:{s}"] * t[f"d0:{s}"])
            if abs(math.log(d_a / d_s)) > 0.05:
                slope = min(max(math.log(lam_a / lam_s) / math.log(d_a / d_s), -1.0), 1.0)
                g[f"slope{m}"] = slope
                g[f"rate{m}"] = lam_s * (base.d_ref / d_s) ** slope
    d0 = np.mean([v for k, v in t.items() if k.startswith("d0:")])
    prior = setup.prior - setup.prior.mean(axis=0)
    dp = math.sqrt(np.sum(prior**2) / prior.shape[0])
    n, d = setup.prior.shape
    g["prior_scale"] = math.sqrt(max(d0**2 - base.initial_spread**2 * d * (n - 1) / n, 1e-4)) / dp
    for k in ("rate1", "rate2"):
        g[k] = min(max(g.get(k, 0.8), 0.3), 1.2)
    for m in (1, 2):  # keep lambda(0.85) <= 0.95 at the start: a rate law that expands at D(0) never converges
        g[f"slope{m}"] = min(
            max(g.get(f"slope{m}", 0.0), -1.2), 1.2, math.log(0.95 / g[f"rate{m}"]) / math.log(0.85 / base.d_ref)
        )
    g["prior_scale"] = min(max(g["prior_scale"], 0.4), 1.9)
    g["compliance_noise"] = 0.1
    g["round_noise"] = 0.1
    g["initial_spread"] = max(base.initial_spread, 0.01)
    g["verbosity"] = max(base.verbosity, 0.05)
    return g


def fit_params(
    setup,
    base: RateLawParams,
    fitted,
    target,
    names,
    weights,
    *,
    detail: bool,
    runs: int,
    steps: int,
    seed: int,
    init: dict | None = None,
    crn_seed: int | None = None,
):
    """One SMM fit (two Adam stages with ES gradients, 32 antithetic pairs: ``lr`` 0.01, ``es_sigma`` 0.05 for
    ``steps`` steps, then 0.004 and 0.03 for ``steps // 2`` from the best point) -> ``(params dict, FitResult
    of the better stage, loss history)``. The loss is :func:`fit_smm`'s on moments whose error is capped at
    +-3 scales (``tanh``)."""
    import jax

    from mascot.calibrate.deliberation_sim import moments_from_traces, simulate_rate_law
    from mascot.calibrate.fit import Param, fit_smm

    def build():
        all_names = moment_names(setup, base, detail)
        idx = np.array([all_names.index(n) for n in names])

        def simulate(theta, key):
            tr = simulate_rate_law(theta, key, setup, runs=runs, base=base)
            return moments_from_traces(tr, setup.strategies, eta=setup.eta, d_ref=base.d_ref, detail=detail)[0][idx]

        return simulate

    simulate = _program("es", setup, base, tuple(names), detail, int(runs), build=build)
    # robust loss: each moment's error is capped at +-3 scales (quadratic near the target, bounded where
    # parameters make lanes stop converging, which would otherwise dominate the ES gradient)
    cap = 3.0 / np.sqrt(np.maximum(np.asarray(weights, dtype=np.float64), 1e-12))

    start = dict(init or {})
    # each Param starts at its box's middle and the fit's start goes in as `init`: fit_smm's compiled step is
    # cached by its Params, so fits of other data with the same simulator (a split's half, another run
    # directory) reuse it instead of tracing and lowering it again; the start itself is the same number
    ps, x0 = [], {}
    for k in fitted:
        lo, hi = BOX[k]
        x0[k] = min(max(float(start.get(k, getattr(base, k))), lo + 1e-3 * (hi - lo)), hi - 1e-3 * (hi - lo))
        ps.append(Param(k, lo, hi, 0.5 * (lo + hi)))
    key = jax.random.PRNGKey(seed if crn_seed is None else crn_seed)
    r1 = fit_smm(
        simulate,
        ps,
        target,
        weights=weights,
        steps=steps,
        lr=0.01,
        grad="es",
        es_sigma=0.05,
        es_pairs=32,
        seed=seed,
        key=key,
        init=x0,
        cap=cap,
    )
    r2 = fit_smm(
        simulate,
        ps,
        target,
        weights=weights,
        steps=max(steps // 2, 1),
        lr=0.004,
        grad="es",
        es_sigma=0.03,
        es_pairs=32,
        seed=seed + 1,
        key=key,
        init=r1.params,
        cap=cap,
    )
    best = r2 if r2.loss <= r1.loss else r1
    return best.params, best, np.concatenate([r1.history, r2.history])


def moment_names(setup, base, detail: bool) -> list[str]:
    """The names of the moments :func:`~mascot.calibrate.deliberation_sim.moments_from_traces` computes for
    ``setup`` (from an abstract evaluation: nothing is compiled or run)."""
    import jax

    from mascot.calibrate.deliberation_sim import moments_from_traces, simulate_rate_law

    names: list[str] = []

    def f():
        tr = simulate_rate_law({}, jax.random.PRNGKey(0), setup, runs=1, base=base)
        m, n = moments_from_traces(tr, setup.strategies, eta=setup.eta, d_ref=base.d_ref, detail=detail)
        names.extend(n)
        return m

    jax.eval_shape(f)
    return names


class Moments:
    """Simulated moments ``names`` at a batch of parameter points, one jitted call (vmap over points)."""

    def __init__(self, setup, base, fitted, names, *, detail: bool, runs: int):
        import jax

        from mascot.calibrate.deliberation_sim import moments_from_traces, simulate_rate_law

        self.fitted = list(fitted)

        def build():
            all_names = moment_names(setup, base, detail)
            idx = np.array([all_names.index(n) for n in names])

            def one(theta, key):
                tr = simulate_rate_law(theta, key, setup, runs=runs, base=base)
                m = moments_from_traces(tr, setup.strategies, eta=setup.eta, d_ref=base.d_ref, detail=detail)
                return m[0][idx]

            return jax.jit(jax.vmap(one, in_axes=(0, None)))

        self._f = _program("moments", setup, base, tuple(fitted), tuple(names), detail, int(runs), build=build)

    def __call__(self, points: np.ndarray, seed: int) -> np.ndarray:
        """``points`` ``(B, p)`` in the order of ``fitted`` -> moments ``(B, m)`` (numpy float64)."""
        import jax
        import jax.numpy as jnp

        th = {k: jnp.asarray(points[:, i]) for i, k in enumerate(self.fitted)}
        return np.asarray(self._f(th, jax.random.PRNGKey(seed)), dtype=np.float64)


def clip_box(fitted, x: np.ndarray) -> np.ndarray:
    lo = np.array([BOX[k][0] for k in fitted])
    hi = np.array([BOX[k][1] for k in fitted])
    return np.clip(x, lo, hi)


def jacobian(mom: Moments, fitted, x: np.ndarray, seed: int) -> np.ndarray:
    """Central differences of the simulated moments (common random numbers), steps 3 % of ``max(|x|, 5 % of the
    box)``, clipped to the box."""
    width = np.array([BOX[k][1] - BOX[k][0] for k in fitted])
    h = 0.03 * np.maximum(np.abs(x), 0.05 * width)
    pts = []
    for i in range(len(x)):
        for sgn in (1.0, -1.0):
            y = x.copy()
            y[i] += sgn * h[i]
            pts.append(clip_box(fitted, y))
    pts = np.asarray(pts)
    m = mom(pts, seed)
    i = np.arange(len(x))
    step = pts[2 * i, i] - pts[2 * i + 1, i]
    return ((m[0::2] - m[1::2]) / step[:, None]).T  # (moments, params)


def ridge_solve(H: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``(H + 1e-6 diag H)^-1 rhs`` (a scale-free ridge) on the parameters that move some moment (``diag H >
    0``); a parameter that moves none (not identified by these data: a zero column of the Jacobian, which
    made the matrix singular) gets 0."""
    d = np.diag(H)
    ok = d > 1e-12 * max(float(d.max(initial=0.0)), 1e-300)
    out = np.zeros((H.shape[0],) + rhs.shape[1:])
    if ok.any():
        out[ok] = np.linalg.solve(H[np.ix_(ok, ok)] + 1e-6 * np.diag(d[ok]), rhs[ok])
    return out


def gauss_newton_polish(mom: Moments, fitted, x0: np.ndarray, target, weights, seed: int, iters: int = 3):
    """Polish ``x0`` with damped Gauss-Newton steps on ``sum w (m(x) - t)^2`` (the simulated moments at a fixed
    key); a step is kept only if it lowers the loss. Returns ``(x, loss, G)`` with ``G`` the Jacobian at x."""

    def loss(x):
        return float(np.sum(weights * (mom(x[None], seed)[0] - target) ** 2))

    x, cur = x0.copy(), loss(x0)
    G = jacobian(mom, fitted, x, seed)
    for _ in range(iters):
        r = target - mom(x[None], seed)[0]
        H = G.T @ (weights[:, None] * G)
        step = ridge_solve(H, G.T @ (weights * r))
        for damp in (1.0, 0.5, 0.25):
            y = clip_box(fitted, x + damp * step)
            ly = loss(y)
            if ly < cur:
                x, cur = y, ly
                break
        else:
            break
        G = jacobian(mom, fitted, x, seed)
    return x, cur, G


def predict(setup, base, params: dict, *, detail: bool, runs: int, seed: int):
    """Moments (all names) and traces of the fitted model from a fresh simulation (a key not used in the fit)."""
    import jax

    from mascot.calibrate.deliberation_sim import moments_from_traces, simulate_rate_law

    tr = simulate_rate_law(params, jax.random.PRNGKey(seed + 7919), setup, runs=runs, base=base)
    m, names = moments_from_traces(tr, setup.strategies, eta=setup.eta, d_ref=base.d_ref, detail=detail)
    return dict(zip(names, np.asarray(m, dtype=np.float64).tolist())), {k: np.asarray(v) for k, v in tr.items()}
