"""The ``rate_law`` deliberation agents (:class:`~mascot.protocols.deliberation.surrogate.RateLawParams`) as a
batched JAX simulator of the whole text harness (consensus paper, Sec. V-C), for fitting.

:func:`simulate_rate_law` reproduces, in distribution, what :func:`mascot.protocols.deliberation.run_deliberation`
does with ``SurrogateDeliberationBackend(params=...)``: the same update of every agent (its compliance toward the
weighted mean of the proposals its mode lets it read, the rate law in ``D``, round, compliance and belief noise,
rounding to 3 decimals, clipping to [0, 1]), the same mode choice (Def. 8), the same stopping order (``b < 0``
-> BudgetFail, then ``D <= eps`` -> consensus, then ``max_rounds``), the shared, uncharged round 0, and the
same **token count**: the prompts' character counts are measured from the harness's own prompt builder
(:func:`prompt_layout`) and a round's cost is ``token_scale * sum_i [ceil(sys_i / cpt) + 4 +
ceil((user_i + sum_{j read by i} L_j) / cpt) + 4]`` where ``L_j`` is the reasoning length of ``j``'s previous
reply -- exact, not an approximation (tested against the harness's records). Only the random draws differ
(here the counter-based normals of :func:`mascot.kernels.deliberation.round_draws`, keyed by the PRNG key's
bits, lane and round -- ``jax.random`` inside the fit's step took 12 s to compile on 2 cores; there
per-request numpy generators). Not modelled: unusable replies (``malformed``
must be 0), the monitor and ``budget_rule = "predicted"``.

:func:`moments_from_traces` computes the summary statistics the calibration matches, the same function for
simulated traces and for a run directory's records (:func:`traces_from_rows`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mascot.errors import InputError
from mascot.kernels.core import disagreement
from mascot.kernels.deliberation import round_draws
from mascot.protocols.deliberation import dynamics
from mascot.protocols.deliberation.config import STRATEGIES, DeliberationConfig
from mascot.protocols.deliberation.prompts import initial_messages, round_messages
from mascot.protocols.deliberation.surrogate import RateLawParams
from mascot.theory.consensus import contraction_rate
from mascot.theory.consensus import disagreement as disagreement_f64  # the harness's D (numpy float64)

__all__ = [
    "SimSetup",
    "prompt_layout",
    "simulate_rate_law",
    "traces_from_rows",
    "moments_from_traces",
    "weighted_moments",
    "FIELDS",
    "round_cost_numpy",
    "scalar_rate_model",
    "schedule_evaluator",
]

#: the fields of :class:`RateLawParams` the simulator reads from ``theta`` (missing ones from the setup's base)
FIELDS = tuple(RateLawParams.__dataclass_fields__)


class SimSetup(NamedTuple):
    """Everything fixed about a deliberation (from its :class:`DeliberationConfig`), as numpy arrays."""

    W: np.ndarray  # (2, N, N) W1, W2
    mode_rate: np.ndarray  # (2,) contraction rates of W1, W2 (Def. 6)
    reads: np.ndarray  # (2, N, N) 1.0 where agent i's prompt holds j's previous reply (W[i, j] > 0)
    prior: np.ndarray  # (N, d) role priors (0.5 where none)
    sys_chars: np.ndarray  # (N,) characters of agent i's system prompt
    user_chars: np.ndarray  # (2, N) characters of agent i's round-k user message with empty reasoning, minus
    #                         the digits of k and k - 1
    init_chars: np.ndarray  # (2, N) characters of round 0's system and user messages
    eta: float
    eps: float
    b0: float
    token_scale: float
    max_rounds: int
    charge_initial: bool
    strategies: tuple  # strategy names, in STRATEGIES order
    x0: np.ndarray | None = None  # the config's fixed X0 (round 0 not asked), else None


def prompt_layout(cfg: DeliberationConfig) -> SimSetup:
    """Measure the harness's prompts for ``cfg`` (:func:`round_messages` with empty reasoning strings; the
    vectors print as fixed-width ``%.3f`` in [0, 1]) and collect the config's fixed quantities."""
    if cfg.budget_rule != "spent" or cfg.monitor.enabled:
        raise InputError(
            "the rate-law simulator models budget_rule = 'spent' without the monitor; got "
            f"budget_rule = {cfg.budget_rule!r}, monitor.enabled = {cfg.monitor.enabled}"
        )
    if not cfg.shared_initial:
        raise InputError("the rate-law simulator models shared_initial = true (one round 0 per run)")
    roles = cfg.agent_roles()
    W = np.stack(cfg.weights())
    n, d = cfg.n, cfg.d
    sys_c = np.zeros(n)
    user = np.zeros((2, n))
    init = np.zeros((2, n))
    for i, role in enumerate(roles):
        for s in range(2):
            inputs = [
                {
                    "agent": j,
                    "title": roles[j].title,
                    "self": j == i,
                    "vector": [0.5] * d,
                    "reasoning": "",
                    "weight": float(W[s, i, j]),
                }
                for j in [i] + [j for j in range(n) if j != i]
                if W[s, i, j] > 0
            ]
            msgs = round_messages(cfg, role, 3, inputs)
            sys_c[i] = len(msgs[0]["content"])
            user[s, i] = len(msgs[1]["content"]) - 2  # "Round 3." and "round 2:" hold one digit each
        im = initial_messages(cfg, role)
        init[:, i] = [len(im[0]["content"]), len(im[1]["content"])]
    prior = np.array([r.prior if r.prior is not None else [0.5] * d for r in roles], dtype=np.float64)
    lams = np.array([contraction_rate(W[0], "W1"), contraction_rate(W[1], "W2")])
    return SimSetup(
        W,
        lams,
        (W > 0).astype(np.float64),
        prior,
        sys_c,
        user,
        init,
        float(cfg.eta),
        float(cfg.eps),
        float(cfg.b0),
        float(cfg.token_scale),
        int(cfg.max_rounds),
        bool(cfg.charge_initial),
        tuple(cfg.strategies),
        None if cfg.x0 is None else np.asarray(cfg.x0, dtype=np.float64),
    )


def _digits(k):
    return 1 + (k >= 10).astype(k.dtype) + (k >= 100).astype(k.dtype)


def round_cost_numpy(setup: SimSetup, sigma: int, k: int, prev_lengths, cpt: float = 4.0) -> float:
    """A round's charged tokens from the previous replies' reasoning lengths (numpy float64; the formula of
    the module docstring), for checking against the harness's records."""
    s = sigma - 1
    dig = len(str(k)) + len(str(k - 1))
    L = np.asarray(prev_lengths, dtype=np.float64)
    chars = setup.user_chars[s] + dig + setup.reads[s] @ L
    tok = np.ceil(setup.sys_chars / cpt) + 4 + np.ceil(chars / cpt) + 4
    return float(setup.token_scale * tok.sum())


def simulate_rate_law(
    theta: dict, key, setup: SimSetup, *, runs: int, base: RateLawParams | None = None, schedule=None
):
    """Simulate ``runs`` runs of every strategy of ``setup`` (round 0 shared by the strategies of a run).

    ``theta``: ``{field of RateLawParams: scalar}`` (jax arrays allowed; fields not given come from ``base``).
    Returns a dict of arrays with leading dims ``(S, R)`` (S strategies, R runs): ``D`` ``(S, R, K + 1)``
    (D(0..K), NaN after the lane stopped), ``sigma`` ``(S, R, K)`` (0 after), ``cost`` ``(S, R, K)`` (NaN
    after), ``rounds``, ``tokens`` (charged), ``status`` (0 consensus, 1 BudgetFail, 2 max_rounds).
    ``schedule``: ``(centres, theta)`` (arrays, log-D knots and values; may be traced): the adaptive lanes use
    mode 1 where ``interp(log D, centres, theta) > 0`` instead of ``D > eta``
    (:class:`mascot.design.schedule.Schedule`'s rule).
    """
    base = base or RateLawParams()
    p = {k: jnp.asarray(theta[k]) if k in theta else jnp.asarray(getattr(base, k)) for k in FIELDS}
    dt = jnp.result_type(float)
    S, R, K = len(setup.strategies), int(runs), setup.max_rounds
    N, d = setup.prior.shape
    code = jnp.asarray([STRATEGIES.index(s) for s in setup.strategies], jnp.int32)[:, None]  # (S, 1)
    kd = jax.random.key_data(key).reshape(-1).astype(jnp.uint32)
    seed = kd[0] ^ (kd[-1] * jnp.uint32(0x9E3779B1))
    lanes = jnp.arange(S * R, dtype=jnp.uint32)
    z0, z0l = round_draws(seed, jnp.arange(R, dtype=jnp.uint32), 0xFFFFFFFE, N, d, dt)  # (R, N, d), (R, N)
    z0 = jnp.concatenate([z0, z0l[..., None]], axis=-1)
    cpt = p["chars_per_token"]
    v = p["verbosity"]

    def length(mean, z):
        return dynamics.reply_length(mean, v, z, jnp)

    prior = jnp.asarray(setup.prior, dt)
    if setup.x0 is None:
        X0 = dynamics.initial_proposal(prior, p["prior_scale"], p["initial_spread"], z0[..., :d], jnp)
        L0 = length(p["reply_chars1"], z0[..., d])
    else:  # the harness's round 0 with a given X0: reasoning "(given initial proposal)"
        X0 = jnp.broadcast_to(jnp.asarray(setup.x0, dt), (R, N, d))
        L0 = jnp.full((R, N), float(len("(given initial proposal)")), dt)
    X = jnp.broadcast_to(X0, (S, R, N, d))
    L = jnp.broadcast_to(L0, (S, R, N))
    D = disagreement(X)
    W = jnp.asarray(setup.W, dt)
    reads = jnp.asarray(setup.reads, dt)
    mu = jnp.asarray(setup.mode_rate, dt)
    sysc = jnp.sum(jnp.ceil(jnp.asarray(setup.sys_chars, dt) / cpt) + 4.0)
    user = jnp.asarray(setup.user_chars, dt)
    cost0 = setup.token_scale * jnp.sum(jnp.ceil(jnp.asarray(setup.init_chars, dt) / cpt) + 4.0)
    b = jnp.full((S, R), setup.b0, dt) - (cost0 if setup.charge_initial else 0.0)
    status = jnp.where(b < 0, 1, jnp.where(D <= setup.eps, 0, -1)).astype(jnp.int32)
    carry = (X, L, D, b, status, jnp.zeros((S, R), jnp.int32))

    def step(c, k):
        X, L, D, b, status, rounds = c
        z, zc_k = round_draws(seed, lanes, k.astype(jnp.uint32), N, d + 2, dt)  # counter-based (see below)
        z = z.reshape(S, R, N, d + 2)
        zx_k, zl_k, zc_k, xi = z[..., :d], z[..., d], zc_k.reshape(S, R, N), z[..., 0, d + 1]
        running = status < 0
        if schedule is None:
            adaptive2 = D <= setup.eta
        else:
            adaptive2 = jnp.interp(jnp.log(D), schedule[0], schedule[1]) <= 0
        mode2 = jnp.where(code == 0, adaptive2, code == 2)  # (S, R)
        Wk = jnp.where(mode2[..., None, None], W[1], W[0])
        rk = jnp.where(mode2[..., None, None], reads[1], reads[0])
        lam = jnp.where(
            mode2,
            dynamics.rate_law(D, p["rate2"], p["slope2"], p["d_ref"], p["rate_min"], p["rate_max"], jnp),
            dynamics.rate_law(D, p["rate1"], p["slope1"], p["d_ref"], p["rate_min"], p["rate_max"], jnp),
        )
        lam = lam * jnp.exp(p["round_noise"] * xi)  # one draw per lane and round
        comp = dynamics.compliance(lam, jnp.where(mode2, mu[1], mu[0]))
        ci = comp[..., None] + p["compliance_noise"] * zc_k  # (S, R, N)
        M = jnp.einsum("srij,srjd->srid", Wk, X, precision=jax.lax.Precision.HIGHEST)
        Xn = dynamics.update(X, M, ci[..., None], p["noise"], zx_k, jnp)
        kf = k.astype(dt)
        dig = _digits(kf) + _digits(kf - 1.0)
        chars = jnp.where(mode2[..., None], user[1], user[0]) + dig + jnp.einsum("srij,srj->sri", rk, L)
        cost = setup.token_scale * (sysc + jnp.sum(jnp.ceil(chars / cpt) + 4.0, axis=-1))
        Ln = length(jnp.where(mode2, p["reply_chars2"], p["reply_chars1"])[..., None], zl_k)
        Dn = disagreement(Xn)
        bn = b - cost
        new_status = jnp.where(bn < 0, 1, jnp.where(Dn <= setup.eps, 0, jnp.where(k >= K, 2, -1)))
        X = jnp.where(running[..., None, None], Xn, X)
        L = jnp.where(running[..., None], Ln, L)
        D = jnp.where(running, Dn, D)
        b = jnp.where(running, bn, b)
        status = jnp.where(running, new_status, status).astype(jnp.int32)
        rounds = rounds + running.astype(jnp.int32)
        rec = (
            jnp.where(running, Dn, jnp.nan),
            jnp.where(running, jnp.where(mode2, 2, 1), 0),
            jnp.where(running, cost, jnp.nan),
        )
        return (X, L, D, b, status, rounds), rec

    ks = jnp.arange(1, K + 1, dtype=jnp.int32)
    (X, L, D, b, status, rounds), (d_tr, s_tr, c_tr) = jax.lax.scan(step, carry, ks)
    D0 = disagreement(jnp.broadcast_to(X0, (S, R, N, d)))
    d_all = jnp.concatenate([D0[None], d_tr], axis=0)  # (K + 1, S, R)
    return {
        "D": jnp.moveaxis(d_all, 0, -1),
        "sigma": jnp.moveaxis(s_tr, 0, -1),
        "cost": jnp.moveaxis(c_tr, 0, -1),
        "rounds": rounds,
        "tokens": setup.b0 - b,
        "status": jnp.where(status < 0, 2, status),
        "d_final": D,
    }


def traces_from_rows(rows: list[dict], strategies, max_rounds: int, b0: float) -> dict:
    """A run directory's ``rounds.jsonl`` rows as the arrays :func:`simulate_rate_law` returns (numpy;
    runs missing for a strategy are padded with a NaN lane and masked by ``lane_ok``)."""
    from mascot.protocols.deliberation.records import group_lanes

    lanes = group_lanes(rows)
    runs = sorted({r for (_, r) in lanes})
    S, R, K = len(strategies), len(runs), int(max_rounds)
    D = np.full((S, R, K + 1), np.nan)
    sig = np.zeros((S, R, K), np.int32)
    cost = np.full((S, R, K), np.nan)
    rounds = np.zeros((S, R), np.int32)
    tokens = np.full((S, R), np.nan)
    ok = np.zeros((S, R), bool)
    status = np.full((S, R), -1)
    codes = {"consensus": 0, "BudgetFail": 1, "max_rounds": 2}
    for (s, run), rs in lanes.items():
        if s not in strategies:
            continue
        i, j = strategies.index(s), runs.index(run)
        got = [r.get("round") for r in rs]
        if got != list(range(len(rs))):  # a duplicated, missing or edited round would be fitted as data
            raise InputError(
                f"lane {s}#{run} has rounds {_rounds_text(got)}, not 0..{len(rs) - 1} once each; the records were "
                "edited or damaged: rerun the deliberation into a fresh directory"
            )
        if rs[-1].get("status") is None:
            raise InputError(f"lane {s}#{run} has not finished (no status on its last round); finish the run first")
        for r in rs:
            k = r["round"]
            if k > K:
                raise InputError(f"lane {s}#{run} has round {k} > max_rounds = {K}")
            D[i, j, k] = _record_number(r, "D", s, run)
            if "X" in r:  # D is the disagreement of the logged vectors: an edited D would be fitted as data
                _check_d_of_x(r, s, run)
            _record_number(r, "b", s, run, nonnegative=False)  # the tokens are b0 minus the last b (< 0: BudgetFail)
            if k >= 1:
                if r.get("sigma") not in (1, 2) or isinstance(r.get("sigma"), bool):
                    raise InputError(f"lane {s}#{run} round {k}: sigma = {r.get('sigma')!r} is not the mode 1 or 2")
                sig[i, j, k - 1] = r["sigma"]
                cost[i, j, k - 1] = _record_number(r, "cost", s, run)
        rounds[i, j] = rs[-1]["round"]
        tokens[i, j] = b0 - rs[-1]["b"]
        ok[i, j] = True
        status[i, j] = codes.get(rs[-1]["status"], 3)
    d_final = np.array([[D[i, j, rounds[i, j]] for j in range(R)] for i in range(S)])
    return {
        "D": D,
        "sigma": sig,
        "cost": cost,
        "rounds": rounds,
        "tokens": tokens,
        "status": status,
        "d_final": d_final,
        "lane_ok": ok,
        "runs": runs,
    }


def _rounds_text(got: list) -> str:
    return ", ".join(map(repr, got[:12])) + (", ..." if len(got) > 12 else "")


def _record_number(r: dict, key: str, s, run, *, nonnegative: bool = True) -> float:
    """``r[key]`` of a ``rounds.jsonl`` record as a float, refused unless it is a finite number (and ``>= 0`` where
    ``nonnegative``: distances and costs): a NaN, text or negative value would be fitted as data."""
    v = r.get(key)
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v) and (v >= 0 or not nonnegative)
    if not ok:
        need = "a finite number >= 0" if nonnegative else "a finite number"
        raise InputError(f"lane {s}#{run} round {r.get('round')}: {key} = {v!r} is not {need}")
    return float(v)


def _check_d_of_x(r: dict, s, run) -> None:
    try:
        X = np.asarray(r["X"], dtype=np.float64)
        ok = X.ndim == 2 and X.shape[0] >= 1 and bool(np.all(np.isfinite(X)))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise InputError(f"lane {s}#{run} round {r.get('round')}: X is not a finite (agents x axes) array")
    d = float(disagreement_f64(X))
    if abs(d - r["D"]) > 1e-9 * max(abs(d), 1.0):
        raise InputError(
            f"lane {s}#{run} round {r.get('round')}: D = {r['D']!r} is not the disagreement of the logged vectors X "
            f"({d!r}); the records were edited or damaged"
        )


def moment_support(tr: dict, strategies, names) -> dict:
    """How many observations each moment of :func:`moments_from_traces` rests on in the traces ``tr`` (numpy): lanes
    for a strategy's rounds, tokens, D(0), D_final and rises; adaptive lanes for ``switch``; rounds of mode ``m``
    (into ``D > 0``) for its rate regression, of which a line needs two; costed rounds for the cost moments; runs for
    ``d0_sd``, which needs two. A moment resting on fewer is not defined by these traces (the moments function
    would give it as 0).

    Returns: ``{name: count}`` for ``names``, with counts of a definition's minimum or more meaning defined."""
    D = np.asarray(tr["D"], np.float64)
    ok = np.asarray(tr.get("lane_ok", np.ones(D.shape[:2], bool)), bool)
    prev, cur = D[..., :-1], D[..., 1:]
    ran = np.isfinite(cur) & np.isfinite(prev) & (prev > 0) & (cur > 0) & ok[..., None]
    sig = np.asarray(tr["sigma"])
    cost = np.asarray(tr["cost"], np.float64)
    prev_sig = np.concatenate([np.zeros_like(sig[..., :1]), sig[..., :-1]], axis=-1)
    sel = {1: sig == 1, 2: (sig == 2) & (prev_sig == 2)}
    out = {}
    for nm in names:
        kind, _, which = nm.partition(":")
        if which in strategies and kind in ("rounds", "tokens", "d0", "d_final", "expand"):
            out[nm] = int(ok[list(strategies).index(which)].sum())
        elif nm == "switch":
            out[nm] = int(ok[list(strategies).index("adaptive")].sum()) if "adaptive" in strategies else 0
        elif kind in ("alpha", "beta", "resid"):
            n = int((ran & (sig == int(which))).sum())
            out[nm] = n if n >= 2 else 0
        elif kind in ("cost", "cost_rsd"):
            out[nm] = int((sel[int(which)] & np.isfinite(cost) & ok[..., None]).sum())
        elif nm == "d0_sd":
            n = int(ok[0].sum())
            out[nm] = n if n >= 2 else 0
        else:
            out[nm] = 1
    return out


def _wmean(x, w):
    return jnp.sum(jnp.where(w > 0, x, 0.0) * w) / jnp.maximum(jnp.sum(w), 1e-12)


def moments_from_traces(
    tr: dict, strategies, *, eta: float, d_ref: float = 0.2, detail: bool = True, lane_weight=None
) -> tuple[jax.Array, list[str]]:
    """Summary statistics of traces (simulated or observed; jnp, differentiable where the traces are).

    Per strategy ``s``: ``rounds:s``, ``tokens:s`` (thousands), ``d0:s``, ``d_final:s``, ``expand:s`` (rounds with
    ``D(k) > D(k-1)`` per lane); ``switch`` (adaptive only: the first ``k`` with ``D(k) <= eta``, i.e. the
    number of mode-1 rounds). With ``detail`` (run directories): per mode ``m`` the least-squares fit of
    ``log(D(k)/D(k-1)) = alpha_m + beta_m log(D(k-1)/d_ref)`` over the rounds with ``D(k-1) > 0`` and ``D(k) > 0``
    (``alpha:m``, ``beta:m``, residual sd
    ``resid:m``), the mean and relative sd of the round cost in mode 1 (``cost:1``, ``cost_rsd:1``) and in mode-2
    rounds after a mode-2 round (``cost:2``, ``cost_rsd:2``, thousands), and the sd of ``D(0)`` over runs
    (``d0_sd``). ``lane_weight`` ``(S, R)``: weights of lanes (bootstrap resampling; default 1, 0 for missing lanes).
    """
    D = jnp.asarray(tr["D"])
    S, R, K1 = D.shape
    w = jnp.ones((S, R)) if lane_weight is None else jnp.asarray(lane_weight, D.dtype)
    if "lane_ok" in tr:
        w = w * jnp.asarray(tr["lane_ok"], D.dtype)
    names, vals = [], []
    rounds = jnp.asarray(tr["rounds"], D.dtype)
    prev, cur = D[..., :-1], D[..., 1:]
    # a round into D = 0 exactly (every agent replied the same vector: seen with a small real model) has no
    # log-rate; it is left out of the rate regressions (the rounds and tokens still count it)
    ran = jnp.isfinite(cur) & jnp.isfinite(prev) & (prev > 0) & (cur > 0)
    for i, s in enumerate(strategies):
        wi = w[i]
        names += [f"rounds:{s}", f"tokens:{s}", f"d0:{s}", f"d_final:{s}", f"expand:{s}"]
        exp_count = jnp.sum(jnp.where(ran[i], (cur[i] > prev[i]).astype(D.dtype), 0.0), axis=-1)
        vals += [
            _wmean(rounds[i], wi),
            _wmean(jnp.asarray(tr["tokens"])[i] / 1000.0, wi),
            _wmean(D[i, :, 0], wi),
            _wmean(jnp.asarray(tr["d_final"])[i], wi),
            _wmean(exp_count, wi),
        ]
        if s == "adaptive":
            below = jnp.where(jnp.isfinite(D[i]), D[i] <= eta, False)
            first = jnp.argmax(below, axis=-1).astype(D.dtype)
            first = jnp.where(jnp.any(below, axis=-1), first, rounds[i])
            names.append("switch")
            vals.append(_wmean(first, wi))
    if detail:
        sig = jnp.asarray(tr["sigma"])
        y = jnp.log(jnp.where(ran, cur, 1.0) / jnp.where(ran, prev, 1.0))
        x = jnp.log(jnp.where(ran, prev, d_ref) / d_ref)
        c = jnp.asarray(tr["cost"], D.dtype) / 1000.0
        wl = w[..., None]
        for m in (1, 2):
            mw = jnp.where(ran & (sig == m), 1.0, 0.0) * wl
            n = jnp.maximum(jnp.sum(mw), 1e-12)
            xm, ym = jnp.sum(mw * x) / n, jnp.sum(mw * y) / n
            sxx = jnp.sum(mw * (x - xm) ** 2) / n
            beta = jnp.sum(mw * (x - xm) * (y - ym)) / n / jnp.maximum(sxx, 1e-9)
            alpha = ym - beta * xm
            res = jnp.sqrt(jnp.sum(mw * (y - alpha - beta * x) ** 2) / n)
            names += [f"alpha:{m}", f"beta:{m}", f"resid:{m}"]
            vals += [alpha, beta, res]
        prev_sig = jnp.concatenate([jnp.zeros_like(sig[..., :1]), sig[..., :-1]], axis=-1)
        for m, sel in ((1, sig == 1), (2, (sig == 2) & (prev_sig == 2))):
            mw = jnp.where(sel & jnp.isfinite(c), 1.0, 0.0) * wl
            n = jnp.maximum(jnp.sum(mw), 1e-12)
            cm = jnp.sum(mw * jnp.where(jnp.isfinite(c), c, 0.0)) / n
            csd = jnp.sqrt(jnp.sum(mw * (jnp.where(jnp.isfinite(c), c, 0.0) - cm) ** 2) / n)
            names += [f"cost:{m}", f"cost_rsd:{m}"]
            vals += [cm, csd / jnp.maximum(cm, 1e-9)]
        d0 = D[0, :, 0]
        w0 = w[0]
        mean0 = _wmean(d0, w0)
        names.append("d0_sd")
        vals.append(jnp.sqrt(_wmean((d0 - mean0) ** 2, w0)))
    return jnp.stack([jnp.asarray(v, D.dtype) for v in vals]), names


#: the trace arrays :func:`moments_from_traces` reads
_MOMENT_INPUTS = ("D", "sigma", "cost", "rounds", "tokens", "d_final", "lane_ok")


def weighted_moments(
    tr: dict, strategies, *, eta: float, d_ref: float = 0.2, detail: bool = True, lane_weights
) -> tuple[np.ndarray, list[str]]:
    """:func:`moments_from_traces` of ``tr`` under each row of ``lane_weights`` ``(B, S, R)`` (bootstrap
    resamplings of the runs), in one compiled call: ``(moments (B, m) numpy float64, names)``. Eager calls
    compile every operation once per shape and dispatch each; a bootstrap of 200 replicates ran 10 s that way."""
    arrays = {k: np.asarray(tr[k]) for k in _MOMENT_INPUTS if k in tr}
    lw = np.asarray(lane_weights, dtype=np.float64)
    prog, names = _weighted_program(tuple(strategies), float(eta), float(d_ref), bool(detail), tuple(sorted(arrays)))
    return np.asarray(prog(arrays, lw), dtype=np.float64), list(names)


@functools.lru_cache(maxsize=16)
def _weighted_program(strategies: tuple, eta: float, d_ref: float, detail: bool, keys: tuple):
    names: list[str] = []

    def one(arrays, w):
        m, n = moments_from_traces(arrays, strategies, eta=eta, d_ref=d_ref, detail=detail, lane_weight=w)
        names[:] = n
        return m

    prog = jax.jit(jax.vmap(one, in_axes=(None, 0)))
    # the names, from an abstract evaluation (nothing compiled or run)
    S = len(strategies)
    jax.eval_shape(
        one,
        {k: jax.ShapeDtypeStruct((S, 1, 2) if k in ("D", "sigma", "cost") else (S, 1), jnp.float32) for k in keys},
        jax.ShapeDtypeStruct((S, 1), jnp.float32),
    )
    return prog, tuple(names)


def _fitted_deployment(path, strategies) -> tuple[dict, DeliberationConfig, float]:
    """``(parameters, config, b0)`` for simulating a calibrated ``rate_law`` file under the deployment it was
    fitted under (``[settings]``), with room for every lane to finish (max_rounds >= 60) and a budget that never
    binds (60 rounds cost < 1e6 tokens; 2^23 keeps float32 exact to a token); ``b0`` is the file's budget."""
    from mascot.protocols.deliberation.surrogate import read_params

    info = read_params(path)
    if info["family"] != "rate_law":
        raise InputError(
            f"{path}: a D-dependent schedule needs a 'rate_law' parameter file (mascot calibrate "
            f"deliberation writes one); got family {info['family']!r}"
        )
    st = {k: v for k, v in info["settings"].items() if k in ("token_scale", "eta", "eps", "max_rounds")}
    st["max_rounds"] = max(int(st.get("max_rounds", 30)), 60)
    b0 = float(info["settings"].get("b0", DeliberationConfig.b0))
    return info, DeliberationConfig(strategies=tuple(strategies), b0=float(2**23), **st), b0


def scalar_rate_model(path, *, runs: int = 2000, seed: int = 0) -> dict:
    """The scalar model of :mod:`mascot.design.schedule` for a calibrated parameter file (``rate_law``).

    Rates: the file's rate law, ``log lambda_s(D) = log rate_s + slope_s log(D / d_ref)`` with log-rate noise
    ``round_noise`` (the agents' target: exact for the complete graph, the slowest direction's rate for the
    ring, whose faster directions die out in the first rounds, so the scalar ring is slightly pessimistic; the
    clip to [rate_min, rate_max] is not modelled). Costs and D(0): measured by simulating the text-level agents
    (:func:`simulate_rate_law`, complete-only and ring-only, under the file's ``[settings]`` with a budget
    that never binds): the mean round cost per mode, their pooled coefficient of variation, and the median and
    s.d. of ``log D(0)``. Returns ``{"a", "b", "rate_sd", "cost", "cost_cv", "d0", "d0_sd", "eps", "b0",
    "eta", "source"}``."""
    import math

    info, cfg, b0 = _fitted_deployment(path, ("complete", "ring"))
    p = info["params"]
    tr = simulate_rate_law({}, jax.random.key(seed), prompt_layout(cfg), runs=int(runs), base=p)
    D = np.asarray(tr["D"], dtype=np.float64)
    cost = np.asarray(tr["cost"], dtype=np.float64)
    c, cv = [], []
    for s in range(2):
        cs = cost[s][np.isfinite(cost[s])]
        c.append(float(cs.mean()))
        cv.append(float(cs.std() / cs.mean()))
    ld0 = np.log(D[0, :, 0])
    lr = math.log(p.d_ref)
    return {
        "a": (math.log(p.rate1) - p.slope1 * lr, math.log(p.rate2) - p.slope2 * lr),
        "b": (p.slope1, p.slope2),
        "rate_sd": (p.round_noise, p.round_noise),
        "cost": tuple(c),
        "cost_cv": float(np.mean(cv)),
        "d0": float(np.exp(np.median(ld0))),
        "d0_sd": float(ld0.std()),
        "eps": float(cfg.eps),
        "b0": b0,
        "eta": float(cfg.eta),
        "source": info["name"],
    }


def schedule_evaluator(path, centres, *, runs: int = 1000, seed: int = 0):
    """``evaluate(theta) -> summary`` of the adaptive strategy under the schedule ``(centres, theta)`` on the
    **text-level** agents of a calibrated parameter file (this simulator, in distribution the text harness):
    one compiled function for every schedule and threshold (``theta = centres - log eta`` is the threshold eta),
    with common random numbers. The summary is :func:`mascot.design.schedule.summarize`'s (token need ``T``
    with a budget that never binds, ``inf`` without consensus; ``p_fail = P(T > b0)`` at the file's b0)."""
    from mascot.design.schedule import Outcome, summarize

    info, cfg, b0 = _fitted_deployment(path, ("adaptive",))
    setup = prompt_layout(cfg)
    c = jnp.asarray(centres, jnp.float32)
    key = jax.random.key(seed)

    @jax.jit
    def run(theta):
        tr = simulate_rate_law({}, key, setup, runs=int(runs), base=info["params"], schedule=(c, theta))
        return tr["tokens"][0], tr["rounds"][0], tr["status"][0], jnp.sum(tr["sigma"][0] == 1, axis=-1)

    def evaluate(theta) -> dict:
        tok, rnd, status, m1 = (np.asarray(x) for x in run(jnp.asarray(theta, jnp.float32)))
        T = np.where(status == 0, tok.astype(np.float64), np.inf)
        return summarize(Outcome(T, rnd.astype(np.int64), m1.astype(np.int64)), b0)

    return evaluate
