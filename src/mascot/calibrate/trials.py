"""A JAX simulator of the state-tracking harness answered by the surrogate, and its calibration.

:func:`simulate_metrics` reproduces, in distribution, what :func:`mascot.protocols.state_tracking.harness.run_trials`
with :class:`mascot.protocols.state_tracking.surrogate.SurrogateBackend` records, without prompts, JSON or
Python loops: every trial, both arms (unperturbed / perturbed by ``epsilon``) and the three topologies are
batched (``vmap``), the 12 steps are a ``lax.scan``, the exact rule is the int64 kernel
:func:`mascot.kernels.state_tracking.rule_step` (run inside :func:`mascot.kernels.precision.float64`).

Per step, as the harness (Sec. 4 and Appendix C of "Predictive Maps of Multi-Agent Reasoning"):

* chain: one agent (role ``chain``) writes the next state; ``D_t = |x*_t - x^_t|``;
* star: ``leaves`` agents (``star_leaf``) answer; the judge (``star_judge``) sees the valid proposals and
  writes the next state; ``D_t`` = mean pairwise |difference| of the valid leaf Values;
* mesh: ``mesh_agents`` agents (``mesh_agent``) answer; every reviser (``mesh_reviser``) sees all valid
  round-one proposals; the next state is the plurality (Value, Parity, Level) tuple of the valid revisions
  (ties: the lowest agent index, the harness's ``mesh_tie="first"``); ``D_t`` over the revised Values.

Replies follow the surrogate's model (its module docstring): agent mixture exact / echo / noisy (Value
noise with shared and private parts, Parity and Level slips, Values rounded to 2 decimals); judges and
revisers copy / recompute / aggregate (``mean``, ``median`` or ``vote``) plus scaled noise; an agent
reply (exact or noisy) keeps its input's Parity with probability ``p_keep_parity`` and misreads Rule 2's boundary
cases with probability ``p_boundary`` (its role's); the perturbed arm reuses each
request's draws with its role's probability ``persist``. A request abstains (all ``retries + 1``
attempts malformed) with probability ``parse_fail ** (retries + 1)``; a deciding node that abstains carries
its input state forward. The random streams differ from the surrogate's (JAX PRNG instead of SplitMix64),
so the simulator matches the harness in distribution, not trial by trial (``tests/test_calibrate_trials.py``).

Metrics per trial, as :func:`mascot.analysis.trials_report.trial_metrics`: ``E_ceg = sum_t |x*_t - x^_t|``
(unperturbed arm, steps 1..T), ``R_cdr`` = mean over defined terms of ``log(max(D_{t+1}, f) / max(D_t, f))``
(``f = d_floor``), ``F_ps = |x'_T - x_T|``.

The calibration itself (moments, bootstrap, report) is in :mod:`mascot.calibrate.trials_fit`.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from mascot.errors import InputError

__all__ = [
    "SimConfig",
    "ROLE_NAMES",
    "flat_params",
    "nest_params",
    "profile_names",
    "simulate_metrics",
    "simulate_numpy",
    "simulate_program",
    "simulate_trials",
    "step_blocks",
    "true_trajectories",
    "block_mean",
    "block_tags",
    "METRICS",
    "TOPOS",
    "natural_coords",
]

TOPOS = ("chain", "mesh", "star")  # Table 2's order
METRICS = ("E_ceg", "R_cdr", "F_ps")
ROLE_NAMES = ("chain", "star_leaf", "mesh_agent", "star_judge", "mesh_reviser")
_AGENT_KEYS = ("p_exact", "p_echo", "sigma_scale", "p_keep_parity", "p_boundary", "persist")
_JUDGE_KEYS = ("p_copy", "p_recompute", "noise", "persist")
_GLOBALS = (
    "sigma",
    "bias",
    "p_blunder",
    "blunder_scale",
    "rho_c",
    "parity_slip",
    "level_slip",
    "parse_fail",
    "persist",
)


class SimConfig(NamedTuple):
    """The harness settings the simulator needs (defaults: the harness's and the paper's)."""

    n_trials: int = 100
    steps: int = 12
    epsilon: float = 15.0
    leaves: int = 4
    mesh_agents: int = 4
    retries: int = 2
    initial_state: tuple = (50.0, "A", 3)
    judge: str = "mean"
    d_floor: float = 1e-6


def flat_params(p: dict) -> dict[str, float]:
    """``SurrogateBackend.params()`` -> ``{"sigma": .., "chain.p_exact": .., ...}`` (numbers only)."""
    out = {k: float(p[k]) for k in _GLOBALS}
    for r in ROLE_NAMES:
        for k, v in p["roles"][r].items():
            out[f"{r}.{k}"] = float(v)
    return out


def nest_params(flat: dict, judge: str = "mean", base: dict | None = None) -> dict:
    """Inverse of :func:`flat_params` (missing keys from ``base``, default hand-tuned-v1), ready for
    ``SurrogateBackend(**nest_params(...))`` and :func:`mascot.protocols.state_tracking.surrogate.params_toml`."""
    from mascot.protocols.state_tracking.surrogate import SurrogateBackend

    base = base if base is not None else SurrogateBackend(judge=judge).params()
    d = {k: float(flat.get(k, base[k])) for k in _GLOBALS}
    d["judge"] = judge
    d["judge_noise"] = float(base.get("judge_noise", 0.25))
    d["roles"] = {
        r: {k: float(flat.get(f"{r}.{k}", base["roles"][r][k])) for k in base["roles"][r]} for r in ROLE_NAMES
    }
    return d


def true_trajectories(cfg: SimConfig):
    from mascot.kernels.precision import float64
    from mascot.kernels.state_tracking import rule_trajectory

    v0, p0, l0 = cfg.initial_state
    p0 = 0 if p0 == "A" else 1
    import jax

    with float64(), jax.ensure_compile_time_eval():  # a constant, also when called under jit
        tr = rule_trajectory(
            np.array([float(v0), float(v0) + float(cfg.epsilon)]),
            np.array([p0, p0]),
            np.array([l0, l0]),
            steps=cfg.steps,
        )
        return tuple(np.asarray(x) for x in tr)  # each (2 arms, T + 1)


def _pairwise(v, ok):
    """Mean pairwise |difference| of the valid entries of ``v`` (last axis), NaN with fewer than two."""
    import jax.numpy as jnp

    k = ok.sum(-1)
    d = jnp.abs(v[..., :, None] - v[..., None, :])
    m = ok[..., :, None] & ok[..., None, :]
    tot = jnp.where(m, d, 0.0).sum((-1, -2))
    return jnp.where(k >= 2, tot / jnp.maximum(k * (k - 1), 1), jnp.nan)


def simulate_trials(theta: dict, key, cfg: SimConfig, profile: bool = False):
    """Per-trial (E_ceg, R_cdr, F_ps) arrays for chain, star, mesh: a dict topology -> (3, n_trials); with
    ``profile``, followed by the rows named by :func:`profile_names` (the step profile a run directory holds).
    Traceable, no checks (:func:`simulate_metrics` is the checked entry point)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from mascot.kernels.state_tracking import rule_step, rule_step_misread
    from mascot.protocols.state_tracking import dynamics

    f64 = jnp.float64
    tv_all, tp_all, tl_all = true_trajectories(cfg)
    n, T, L, M = cfg.n_trials, cfg.steps, cfg.leaves, cfg.mesh_agents
    th = {k: jnp.asarray(v, f64) for k, v in theta.items()}
    abstain = th["parse_fail"] ** (cfg.retries + 1)
    v0, p0, l0 = cfg.initial_state
    init_v = jnp.array([float(v0), float(v0) + float(cfg.epsilon)], f64)
    p0i = 0 if p0 == "A" else 1

    # every uniform a step needs comes from one draw of shape (n, width): per trial, for each request of
    # the chain agent, the star's leaves and judge, the mesh's agents and revisers, 19 uniforms (9 for the
    # unperturbed arm, 9 fresh ones for the perturbed arm, 1 for whether it keeps the first 9), then 12 for
    # the step's six shared normals (one threefry draw compiles far faster than one per request kind)
    roles_n = (("chain", 1), ("star_leaf", L), ("star_judge", 1), ("mesh_agent", M), ("mesh_reviser", M))
    width = 19 * sum(m for _, m in roles_n) + 12

    def draws(block, role):
        """Per request, arms first: (2, *shape, 9) uniforms u_mix, u_copy, z1, u_par, u_lev, u_dir, z2, u_fail,
        u_blunder (arm 1 reuses arm 0's with the role's probability persist) and the keep mask (*shape, 2)."""
        base, fresh = block[..., :9], block[..., 9:18]
        keep = block[..., 18] < th[f"{role}.persist"]
        arm1 = jnp.where(keep[..., None], base, fresh)
        return jnp.stack([base, arm1], axis=0), jnp.stack([jnp.ones_like(keep), keep], axis=-1)

    def split_step(k):
        """The step's uniforms by request kind (``{role: (n, 19)`` or ``(n, m, 19)}``) and shared normals
        (3 topologies, [paired, fresh], n, 1)."""
        u = jax.random.uniform(k, (n, width), f64)
        out, off = {}, 0
        for role, m in roles_n:
            blk = u[:, off : off + 19 * m]
            out[role] = blk if role in ("chain", "star_judge") else blk.reshape(n, m, 19)
            off += 19 * m
        z = dynamics.standard_normal(u[:, off : off + 6], u[:, off + 6 : off + 12], jnp)  # (n, 6)
        return out, jnp.transpose(z.reshape(n, 3, 2), (1, 2, 0))[..., None]

    g = {k: th[k] for k in ("sigma", "bias", "parity_slip", "level_slip", "p_blunder", "blunder_scale")}
    g["rho_c"] = jnp.clip(th["rho_c"], 0.0, 1.0)

    def as_draws(u, zsh):
        """This simulator's uniforms (columns: mix, aux, z_own (2), parity, level, direction, fail, blunder)."""
        z_own = dynamics.standard_normal(u[..., 2], u[..., 6], jnp)
        return dynamics.Draws(u[..., 0], u[..., 1], z_own, zsh, u[..., 3], u[..., 4], u[..., 5], u[..., 8])

    def agent(role, sv, sp, sl, u, zsh):
        """Agent replies for input states (broadcast against u[..., 0])."""
        r = {k: th[f"{role}.{k}"] for k in _AGENT_KEYS[:5]}
        return dynamics.agent_reply(
            g, r, (sv, sp, sl), rule_step(sv, sp, sl), rule_step_misread(sv, sp, sl), as_draws(u, zsh), jnp
        )

    def judge(role, sv, sp, sl, pv, pp, pl, pok, u, zsh):
        """Judge / reviser replies; proposals on the last axis of pv/pp/pl/pok; u, zsh per judge."""
        r = {k: th[f"{role}.{k}"] for k in _JUDGE_KEYS[:3]}
        rule = rule_step(sv, sp, sl)
        return dynamics.judge_reply(g, r, rule, (pv, pp, pl), pok, cfg.judge, as_draws(u, zsh), jnp)

    def valid(u):
        return u[..., 7] >= abstain

    def step(carry, xs):
        (cv, cp, cl), (sv, sp, sl), (mv, mp, ml) = carry
        k, t = xs
        blocks, zs = split_step(k)
        # chain: draws (2 arms, n, 9)
        uc, keepc = draws(blocks["chain"], "chain")
        zc = jnp.where(keepc.T, zs[0, 0, :, 0][None], zs[0, 1, :, 0][None])  # (2, n)
        av, ap, al = agent("chain", cv, cp, cl, uc, zc)
        okc = valid(uc)
        ncv, ncp, ncl = (jnp.where(okc, x, y) for x, y in ((av, cv), (ap, cp), (al, cl)))
        dchain = jnp.abs(tv_t[t] - ncv)
        # star
        ul, keepl = draws(blocks["star_leaf"], "star_leaf")  # (2, n, L, 9), keep (n, L, 2)
        zl = jnp.where(jnp.moveaxis(keepl, -1, 0), zs[1, 0, :, 0][None, :, None], zs[1, 1, :, 0][None, :, None])
        lv_, lp_, ll_ = agent("star_leaf", sv[..., None], sp[..., None], sl[..., None], ul, zl)
        okl = valid(ul)
        uj, keepj = draws(blocks["star_judge"], "star_judge")
        zj = jnp.where(keepj.T, zs[1, 0, :, 0][None], zs[1, 1, :, 0][None])
        jv, jp, jl = judge("star_judge", sv, sp, sl, lv_, lp_, ll_, okl, uj, zj)
        okj = valid(uj)
        nsv, nsp, nsl = (jnp.where(okj, x, y) for x, y in ((jv, sv), (jp, sp), (jl, sl)))
        dstar = _pairwise(lv_, okl)
        # mesh
        ua, keepa = draws(blocks["mesh_agent"], "mesh_agent")
        za = jnp.where(jnp.moveaxis(keepa, -1, 0), zs[2, 0, :, 0][None, :, None], zs[2, 1, :, 0][None, :, None])
        rv1, rp1, rl1 = agent("mesh_agent", mv[..., None], mp[..., None], ml[..., None], ua, za)
        oka = valid(ua)
        ur, keepr = draws(blocks["mesh_reviser"], "mesh_reviser")
        zr = jnp.where(jnp.moveaxis(keepr, -1, 0), zs[2, 0, :, 0][None, :, None], zs[2, 1, :, 0][None, :, None])
        bc = lambda x: jnp.broadcast_to(x[..., None, :], x.shape[:-1] + (M, M))
        rv, rp, rl = judge(
            "mesh_reviser", mv[..., None], mp[..., None], ml[..., None], bc(rv1), bc(rp1), bc(rl1), bc(oka), ur, zr
        )
        okr = valid(ur)
        wv, wp, wl = dynamics.plurality(rv, rp, rl, okr, jnp)
        anyr = okr.any(-1)
        nmv, nmp, nml = (jnp.where(anyr, x, y) for x, y in ((wv, mv), (wp, mp), (wl, ml)))
        dmesh = _pairwise(rv, okr)
        # abstentions, unperturbed arm: the share of each topology's requests this step
        ab = (
            (~okc[0]).astype(f64),
            ((~okl[0]).sum(-1) + (~okj[0])).astype(f64) / (L + 1),
            ((~oka[0]).sum(-1) + (~okr[0]).sum(-1)).astype(f64) / (2 * M),
        )
        out = (ncv, nsv, nmv, dchain, dstar, dmesh, ncp, nsp, nmp, ab)
        return ((ncv, ncp, ncl), (nsv, nsp, nsl), (nmv, nmp, nml)), out

    tv_t = jnp.asarray(tv_all.T[1:], f64)  # (T, 2)
    tv_t = jnp.broadcast_to(tv_t[:, :, None], (T, 2, n))
    s0 = (
        jnp.broadcast_to(init_v[:, None], (2, n)),
        jnp.full((2, n), p0i, jnp.int32),
        jnp.full((2, n), int(l0), jnp.int32),
    )
    keys = jax.random.split(key, T)
    _, (vc, vs, vm, dc, ds, dm, pc, ps, pm, ab) = lax.scan(step, (s0, s0, s0), (keys, jnp.arange(T)))
    res = {}
    tp_t = jnp.asarray(tp_all[0, 1:])[:, None]  # (T, 1) true Parity, unperturbed arm
    for name, vals, d, par, abst in (
        ("chain", vc, dc, pc, ab[0]),
        ("star", vs, ds, ps, ab[1]),
        ("mesh", vm, dm, pm, ab[2]),
    ):
        e = jnp.abs(tv_t[:, 0] - vals[:, 0]).sum(0)  # (n,)
        f = jnp.abs(vals[-1, 1] - vals[-1, 0])
        dd = d[:, 0]  # (T, n) unperturbed arm
        fin = jnp.isfinite(dd)
        df = jnp.where(fin, jnp.maximum(dd, cfg.d_floor), 1.0)
        r = jnp.log(df[1:] / df[:-1])
        ok = fin[1:] & fin[:-1]
        terms = ok.sum(0)
        rcdr = jnp.where(terms > 0, jnp.where(ok, r, 0.0).sum(0) / jnp.maximum(terms, 1), jnp.nan)
        rows = [e, rcdr, f]
        if profile:
            err = jnp.abs(tv_t[:, 0] - vals[:, 0])
            gap = jnp.abs(vals[:, 1] - vals[:, 0])
            for x in (err, dd, gap):
                rows += [block_mean(jnp.log1p(x[b]), jnp) for b in step_blocks(T)]
            rows.append((par[:, 0] != tp_t).astype(f64).mean(0))  # float64 shares (float32 1/3 != 1/3)
            rows += [jnp.log1p(e), jnp.log1p(f), abst.mean(0)]
        res[name] = jnp.stack(rows)
    return res


def step_blocks(steps: int) -> list:
    """Steps 1..T as 0-based row indices, in blocks: steps 1 and 2 alone (where an error is one reply's
    noise or slip, before the rule amplifies it), then the rest in two near-equal halves; with fewer than 4
    steps, every step alone."""
    T = int(steps)
    if T < 4:
        return [np.array([t]) for t in range(T)]
    return [np.array([0]), np.array([1])] + list(np.array_split(np.arange(2, T), 2))


def profile_names(steps: int) -> list:
    """Names of :func:`simulate_trials`'s ``profile`` rows: the per-trial mean of ``log1p`` of the error
    ``|x*_t - x^_t|``, of ``D_t`` and of the arms' gap ``|x'_t - x_t|`` over each block of steps, and the share
    of steps whose Parity differs from the rule's (unperturbed arm), ``log1p`` of E_ceg and of F_ps (their
    robust forms: the raw metrics' means and s.d.s are dominated by rare extreme trials), and the share of the
    unperturbed arm's requests that abstained (every attempt malformed)."""
    tags = [f"s{b[0] + 1}-{b[-1] + 1}" if len(b) > 1 else f"s{b[0] + 1}" for b in step_blocks(steps)]
    return [f"{q}.{g}" for q in ("log1p_err", "log1p_D", "log1p_gap") for g in tags] + [
        "parity_miss",
        "log1p_E_ceg",
        "log1p_F_ps",
        "abstained",
    ]


def block_tags(steps: int) -> list:
    """The step blocks' tags as :func:`profile_names` writes them (``s1``, ``s2``, ``s3-7``, ...)."""
    return [n.split(".", 1)[1] for n in profile_names(steps) if n.startswith("log1p_err.")]


def block_mean(x, xp):
    """Mean over axis 0 of the finite entries; NaN where none is finite."""
    ok = xp.isfinite(x)
    k = ok.sum(0)
    return xp.where(k > 0, xp.where(ok, x, 0.0).sum(0) / xp.maximum(k, 1), xp.nan)


_DEFAULT_SIM = SimConfig()  # (a frozen default, shared)


def simulate_metrics(theta: dict, key, cfg: SimConfig = _DEFAULT_SIM, profile: bool = False):
    """Per-trial metrics: ``{topology: array (3, n_trials)}`` with rows E_ceg, R_cdr, F_ps (jax arrays).
    ``theta``: :func:`flat_params` keys (all of them). Call inside ``mascot.kernels.precision.float64()``."""
    from mascot.kernels.precision import x64_enabled

    if not x64_enabled():
        raise RuntimeError(
            "simulate_metrics needs 64-bit JAX: call it inside `with mascot.kernels.precision.float64():`"
        )
    missing = sorted(set(_required()) - set(theta))
    if missing:
        raise InputError(f"theta lacks {', '.join(missing)}")
    return simulate_trials(theta, key, cfg, profile)


def _required():
    return (
        list(_GLOBALS)
        + [f"{r}.{k}" for r in ROLE_NAMES[:3] for k in _AGENT_KEYS]
        + [f"{r}.{k}" for r in ROLE_NAMES[3:] for k in _JUDGE_KEYS]
    )


@functools.lru_cache(maxsize=16)
def simulate_program(cfg: SimConfig = _DEFAULT_SIM, profile: bool = False):
    """:func:`simulate_trials` for ``cfg`` jitted: ``f(theta, key)``, with every parameter of ``theta`` (flat,
    :func:`flat_params`) an argument, so that one compiled program serves every parameter set (compiled once
    per setting in a process, and read back from JAX's persistent cache where one is set). Call it inside
    :func:`mascot.kernels.precision.float64`."""
    import jax

    return jax.jit(lambda th, k: simulate_trials(th, k, cfg, profile))


def simulate_numpy(params: dict, seed: int = 0, cfg: SimConfig = _DEFAULT_SIM, profile: bool = False) -> dict:
    """:func:`simulate_metrics` of a nested parameter dict (``SurrogateBackend.params()``), jitted, as numpy:
    ``{topology: {"E_ceg": array, "R_cdr": array, "F_ps": array}}`` (with ``profile``, also the
    :func:`profile_names` rows)."""
    import jax

    from mascot.kernels.precision import float64

    flat = flat_params(params)
    cfg = cfg._replace(judge=params.get("judge", cfg.judge))
    names = ["E_ceg", "R_cdr", "F_ps"] + (profile_names(cfg.steps) if profile else [])
    with float64():
        out = simulate_program(cfg, bool(profile))(flat, jax.random.PRNGKey(seed))
        return {t: {m: np.asarray(a[i]) for i, m in enumerate(names)} for t, a in out.items()}


def _is_scale(name: str) -> bool:
    """A positive scale of the Value noise (``noise = c * (bias + sigma * blunder * z)``)."""
    return name in ("sigma", "blunder_scale") or name.endswith(".sigma_scale") or name.endswith(".noise")


def natural_coords(params, base: dict):
    """Coordinates for the polish and the linearized bootstrap (:class:`mascot.calibrate.fit.Coords`) in which
    the surrogate's near-symmetries are straight lines and no parameter at its box's edge looks unidentified:
    ``log`` of every noise scale (``sigma``, ``blunder_scale``, the roles' ``sigma_scale`` / judge ``noise``),
    ``bias / sigma`` for ``bias`` (``sigma`` fitted or from ``base``), and every other parameter (probabilities,
    ``rho_c``) as itself, clipped to its box; central-difference steps 0.25 and, for those, 0.02.

    A role's Value noise is ``c * (bias + sigma * z)`` (and its slips ``c * parity_slip``, ``c * level_slip``):
    when the slips are small and the roles with a fixed ``c`` rarely reply with noise, only the products
    ``c * sigma`` and ``c * bias`` are tight, so the objective has a valley along ``sigma -> e^t sigma``,
    ``bias -> e^t bias``, ``c -> e^-t c`` -- straight in these coordinates, curved in the box (logit) ones,
    where one Gauss-Newton step leaves it at once: on the recovery run the box coordinates' sandwich gave
    ``chain.sigma_scale`` and ``mesh_reviser.noise`` s.d.s 4x too small (their truths 3.4 and 3.2 s.d. off).
    And a probability estimated at its box's edge (``persist`` 0.9995) has a logit slope near zero, so the
    sandwich spread it over the whole box although the data rule out most of it; as itself its slope is
    the data's and its draws stop at the edge."""
    from mascot.calibrate.fit import Coords

    params = tuple(params)
    names = [p.name for p in params]
    fitted_sigma = "sigma" in names

    def clip(p, x):
        return min(max(float(x), p.lo), p.hi)

    def scale(values):  # bias's unit: sigma (1 when a fixed sigma is 0: no noise to measure it by)
        sig = float(values["sigma"]) if fitted_sigma else float(base["sigma"])
        return sig if sig > 0 else 1.0

    def fwd(values):
        sig = scale(values)
        return np.array(
            [
                math.log(float(values[p.name]))
                if _is_scale(p.name)
                else float(values[p.name]) / sig
                if p.name == "bias"
                else float(values[p.name])
                for p in params
            ],
            np.float64,
        )

    def inv(u, clip=clip):
        out = {
            p.name: clip(p, math.exp(min(float(u[i]), 700.0)) if _is_scale(p.name) else u[i])
            for i, p in enumerate(params)
            if p.name != "bias"
        }
        if "bias" in names:
            p = params[names.index("bias")]
            out["bias"] = clip(p, float(u[names.index("bias")]) * scale(out))
        return {k: out[k] for k in names}

    def raw(u):
        return inv(u, clip=lambda p, x: float(x))

    step = np.array([0.25 if _is_scale(p.name) or p.name == "bias" else 0.02 for p in params])
    return Coords(fwd, inv, step, raw)
