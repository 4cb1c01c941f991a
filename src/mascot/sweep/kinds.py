"""Experiment kinds a sweep can run: each names its parameters (type, default, range) and evaluates
a chunk of grid points in as few kernel calls as possible, returning one tidy table.

``consensus``: Algorithm 1 of the consensus paper on complete K_N (mode 1) versus ring C_N (mode 2),
Table III's weighting generalised to N (self-weight ``self_weight_complete`` / ``self_weight_ring``, the
rest shared equally among neighbours) and the paper's cost model generalised: a complete round costs
``N (N - 1) tokens_complete`` and a ring round ``2 N tokens_ring`` (600 and 100 at N = 5 with the
defaults 30 and 10) unless ``c1`` / ``c2`` are given. Initial beliefs are drawn per trajectory from a
normal with mean ``x0_mean`` and standard deviation ``x0_spread`` truncated to [0, 1] (the paper's
Sec. V-A sampler), as common random numbers: trajectory t of every point with the same (n, d,
x0_mean, x0_spread) starts from the same X0, so comparisons across strategies, thresholds, budgets
and costs are paired (rows of different points are not independent samples). Each such X0 is drawn once
per sweep and kept on the device (:class:`DeviceCache`), so chunks copy no inputs but their per-trajectory
parameters to the device and read back only results. One row per (point, trajectory).

``spectra``: SR diagnostics (rho, Delta, kappa of M = (I - gamma P)^-1) of one graph family per point;
random families draw ``graphs`` samples seeded by the config and the graph parameters (not gamma), so a
gamma axis sees the same graphs. One row per (point, graph).

``affine_noise``: Monte Carlo of the SR paper's affine-noise model (Sec. 3.5, A.3-A.4), linear or on
the state-tracking rule, ``trials`` runs per point summarised into one row per point (mean, s.d., s.e.,
quantiles of E_ceg, and the closed form where one exists).
"""

from __future__ import annotations

import math

import numpy as np

from mascot import graphs as _graphs
from mascot.errors import InputError
from mascot.limits import F32_GAMMA_MAX, check_budget, check_noise
from mascot.status import STATUS_NAMES
from mascot.sweep.schema import Kind, Param  # the kinds' schema types (re-exported)

__all__ = ["Param", "Kind", "KINDS", "estimate_chunk_bytes", "consensus_inputs"]


def _evaluator(name: str, **bound):
    """``mascot.sweep.evaluate.<name>`` with the keywords ``bound``, imported on the first chunk (reading and
    checking a config, as ``mascot validate`` and ``mascot params`` do, never loads JAX, pandas or pyarrow)."""

    def evaluate(*args, **kwargs):
        from mascot.sweep import evaluate as ev

        return getattr(ev, name)(*args, **bound, **kwargs)

    evaluate.__name__ = evaluate.__qualname__ = name
    return evaluate


def estimate_chunk_bytes(cfg) -> int:
    """Working memory of a chunk of the grid's most demanding points (a guide, not a bound): the largest
    per-point estimate over every point (over 50,000 points: over 50,000 spread through the grid, which meets
    every value of every axis), times the chunk size. (It once looked at the first chunks only, so the order of
    the grid's axes changed it: 64 MiB or 125 GiB for one grid; an outside tester.)

    Arguments: ``cfg`` a validated :class:`SweepConfig`. Returns bytes.
    """
    kind = KINDS[cfg.kind]
    n, cap = cfg.n_points, 50_000
    if n <= cap:
        pts = cfg.points(0, n)
    else:  # every step-th point, and the first points, which hold every value of the fastest axis
        step = -(-n // cap)
        pts = [cfg.points(i, i + 1)[0] for i in range(0, n, step)] + cfg.points(0, min(n, len(cfg.axes[-1][1])))
    per = max(kind.bytes_per_point(kind.complete(p)) for p in pts)
    return per * min(cfg.chunk_size, cfg.n_points)


# ----------------------------------------------------------------------------- consensus
STRATEGIES = ("adaptive", "complete", "ring")  # a consensus point's strategy (mascot.Policy's vocabulary)

_USES_MODE1, _USES_MODE2 = ("strategy", ("adaptive", "complete")), ("strategy", ("adaptive", "ring"))
_POS = lambda v: v > 0 and math.isfinite(v)  # noqa: E731

CONSENSUS_PARAMS = {
    "n": Param(int, 5, lambda v: 3 <= v <= 4096, "3 <= n <= 4096", "number of agents", "agents"),
    "d": Param(int, 6, lambda v: 1 <= v <= 1024, "1 <= d <= 1024", "dimensions of each agent's belief", "dims"),
    "trajectories": Param(
        int, 64, lambda v: 1 <= v <= 10**7, "1 <= trajectories <= 1e7", "independent X0 draws per grid point"
    ),
    "strategy": Param(
        str,
        "adaptive",
        lambda v: v in STRATEGIES,
        "one of adaptive, complete, ring",
        "adaptive: Algorithm 1 switches complete -> ring at D <= eta; complete / ring: one mode throughout",
    ),
    "eta": Param(
        float, 0.1, _POS, "eta > 0 (> eps for adaptive)", "switching threshold on D", "D", ("strategy", ("adaptive",))
    ),
    "eps": Param(float, 0.03, _POS, "eps > 0", "consensus tolerance: stop when D <= eps", "D"),
    "b0": Param(float, 2000.0, lambda v: v >= 0 and math.isfinite(v), "b0 >= 0", "initial token budget", "tokens"),
    "c1": Param(
        float,
        None,
        _POS,
        "c1 > 0",
        "tokens per complete (mode-1) round; default n (n - 1) tokens_complete",
        "tokens",
        _USES_MODE1,
    ),
    "c2": Param(
        float, None, _POS, "c2 > 0", "tokens per ring (mode-2) round; default 2 n tokens_ring", "tokens", _USES_MODE2
    ),
    "tokens_complete": Param(
        float,
        30.0,
        _POS,
        "tokens_complete > 0",
        "tokens per message on the complete graph K_n (gives c1)",
        "tokens",
        _USES_MODE1,
    ),
    "tokens_ring": Param(
        float, 10.0, _POS, "tokens_ring > 0", "tokens per message on the ring C_n (gives c2)", "tokens", _USES_MODE2
    ),
    "self_weight_complete": Param(
        float,
        0.4,
        lambda v: 0 <= v <= 1,
        "0 <= w <= 1",
        "K_n's self-weight w_ii (others (1 - w)/(n - 1); Table III: 0.4)",
        "",
        _USES_MODE1,
    ),
    "self_weight_ring": Param(
        float,
        0.6,
        lambda v: 0 <= v <= 1,
        "0 <= w <= 1",
        "C_n's self-weight w_ii (each neighbour (1 - w)/2; Table III: 0.6)",
        "",
        _USES_MODE2,
    ),
    "x0_mean": Param(
        float,
        0.5,
        lambda v: 0 < v < 1,
        "0 < x0_mean < 1",
        "initial beliefs: every entry of X0 is x0_mean + x0_spread Z, Z standard normal truncated so the entry lies "
        "in [0, 1] (x0_mean is the mean before truncation)",
        "belief",
    ),
    "x0_spread": Param(
        float,
        0.15,
        _POS,
        "x0_spread > 0",
        "standard deviation of the initial beliefs' normal before its truncation to [0, 1] (see x0_mean)",
        "belief",
    ),
    "noise": Param(
        float,
        0.0,
        lambda v: v >= 0 and math.isfinite(v),
        "noise >= 0",
        "s.d. of Gaussian belief noise added each round",
        "belief",
    ),
    "max_rounds": Param(
        int,
        64,
        lambda v: 1 <= v <= 100_000,
        "1 <= max_rounds <= 1e5",
        "rounds before a trajectory stops unfinished",
        "rounds",
    ),
}


#: the self-weight a consensus simulation builds a mode its strategy does not read with (the parameter's default)
_UNREAD = {k: CONSENSUS_PARAMS[k].default for k in ("self_weight_complete", "self_weight_ring")}
#: parameter -> the strategies whose simulation reads it
_READS = {k: p.reads[1] for k, p in CONSENSUS_PARAMS.items() if p.reads}


def _consensus_costs(p):
    """The paper's cost model generalised: c1 = N (N - 1) tokens_complete, c2 = 2 N tokens_ring."""
    n = p["n"]
    for c, key, f in (("c1", "tokens_complete", n * (n - 1)), ("c2", "tokens_ring", 2 * n)):
        if p[c] is None:
            v = p[key]
            if isinstance(v, (int, float)) and not isinstance(v, bool) and not (f * v > 0 and math.isfinite(f * v)):
                # name the key the user wrote, not the derived cost
                raise InputError(f"{key} = {v!r} is out of range: {key} > 0 with {c} = {f} x {key} finite")
            p[c] = float(f * v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v


def _consensus_extra(p):
    if p["strategy"] == "adaptive" and not p["eta"] > p["eps"]:
        raise InputError(f"eta must be > eps for strategy 'adaptive'; got eta = {p['eta']}, eps = {p['eps']}")


_EPS = {"float32": float(np.finfo(np.float32).eps), "float64": float(np.finfo(np.float64).eps)}


def _consensus_dtype_check(p, dtype):
    """What :func:`simulate_consensus` would refuse in this dtype, found when the config is read."""
    check_budget(p["b0"], (p["c1"], p["c2"]), dtype, fix='set experiment.dtype = "float64"', integer_costs=True)
    check_noise(p["noise"], p["max_rounds"], p["n"], p["d"], dtype, fix='set experiment.dtype = "float64"')
    if p["eps"] < _EPS[dtype]:
        raise InputError(
            f"eps = {p['eps']:g} is below {dtype}'s resolution {_EPS[dtype]:.3g}; use a larger eps"
            + (' or experiment.dtype = "float64"' if dtype == "float32" else "")
        )


def consensus_inputs(cfg, index: int) -> dict:
    """The arguments of the :func:`mascot.simulate_consensus` call that simulates grid point ``index`` of the
    consensus sweep ``cfg``, as ``mascot run`` makes it: the point's X0 (the common draw its (n, d, x0_mean,
    x0_spread) shares, a numpy ``(trajectories, n, d)`` array), the weights it simulates with (a self-weight
    its strategy does not read is the parameter's default, as in the sweep), its costs, thresholds, budget,
    strategy (the kernel's name: ``mode1`` for complete, ``mode2`` for ring), ``max_rounds``, ``noise`` with its
    per-trajectory keys (``None`` without noise) and ``dtype``.

    ``mascot.simulate_consensus(**consensus_inputs(cfg, i))`` gives the point's rows: ``rounds``, ``tokens`` and
    ``status`` equal the merged dataset's; ``d0`` and ``d_final`` may differ by a few units in the last place
    (the sweep runs points in batches of other sizes; measured up to 5 float32 ulps, 3.2e-7 relative, and 7e-16
    in float64), and ``trace=True`` takes the round loop, whose ``D`` differs from the closed form's there too. For a float64 config, call it under
    ``mascot.kernels.precision.float64()``.

    Arguments: ``cfg`` a consensus :class:`~mascot.sweep.SweepConfig` (:func:`~mascot.sweep.load_config`, with
    the run's overrides); ``index`` a grid point, ``0 <= index < cfg.n_points`` (a row's ``point``). Returns a
    dict.
    """
    from mascot.sweep.evaluate import consensus_call

    if not hasattr(cfg, "kind") or not hasattr(cfg, "points"):
        raise InputError(
            f"consensus_inputs takes a SweepConfig (mascot.sweep.load_config(path, overrides)); got {cfg!r}"
        )
    if cfg.kind != "consensus":
        raise InputError(f"consensus_inputs takes a consensus sweep; this config's kind is {cfg.kind!r}")
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < cfg.n_points:
        raise InputError(f"index must be a grid point, an integer in [0, {cfg.n_points}); got {index!r}")
    index = int(index)
    p = KINDS["consensus"].complete(cfg.points(index, index + 1)[0])
    return consensus_call(p, index, cfg.key_seed, cfg.dtype, _READS, _UNREAD)


def _consensus_bytes(p) -> int:
    item = 8
    return int(p["trajectories"] * p["n"] * p["d"] * item * 4 + p["trajectories"] * 200)


# ----------------------------------------------------------------------------- spectra
# the one topology vocabulary (mascot.graphs); its order enters the random families' seeds, so it only grows at the end
_FAMILIES = _graphs.FAMILIES
_RANDOM_FAMILIES = _graphs.RANDOM_FAMILIES

SPECTRA_PARAMS = {
    "family": Param(str, "star", lambda v: v in _FAMILIES, "one of " + ", ".join(_FAMILIES), "graph family"),
    "n": Param(
        int,
        5,
        lambda v: 2 <= v <= 2048,
        "2 <= n <= 2048 (ring and watts_strogatz: n >= 3)",
        "number of agents (a star has n - 1 leaves)",
        "agents",
    ),
    "gamma": Param(float, 0.9, lambda v: 0 <= v < 1, "0 <= gamma < 1", "SR discount in M = (I - gamma P)^-1"),
    "p": Param(
        float,
        0.2,
        lambda v: 0 <= v <= 1,
        "0 <= p <= 1",
        "Erdos-Renyi edge probability",
        "",
        ("family", ("erdos_renyi",)),
    ),
    "degree": Param(
        int,
        4,
        lambda v: v >= 1,
        "degree >= 1",
        "Watts-Strogatz k (even) / random-regular degree",
        "edges",
        ("family", ("watts_strogatz", "random_regular")),
    ),
    "beta": Param(
        float,
        0.1,
        lambda v: 0 <= v <= 1,
        "0 <= beta <= 1",
        "Watts-Strogatz rewiring probability",
        "",
        ("family", ("watts_strogatz",)),
    ),
    "alpha": Param(
        float,
        1.0,
        _POS,
        "alpha > 0",
        "the malicious leaf's weight in the centre's average (A.6)",
        "",
        ("family", ("malicious_star",)),
    ),
    "a": Param(
        float,
        0.5,
        lambda v: 0 <= v <= 1,
        "0 <= a <= 1",
        "self-weight of the 'complete' family",
        "",
        ("family", ("complete",)),
    ),
    "graphs": Param(
        int,
        16,
        lambda v: 1 <= v <= 100_000,
        "1 <= graphs <= 1e5",
        "graphs sampled per point (random families)",
        "graphs",
        ("family", _RANDOM_FAMILIES),
    ),
}


def _spectra_extra(p):
    fam, n = p["family"], p["n"]
    if fam in ("ring", "watts_strogatz") and n < 3:
        raise InputError(f"{fam} needs n >= 3; got n = {n}")
    if fam == "watts_strogatz" and (p["degree"] % 2 or p["degree"] >= n):
        raise InputError(f"watts_strogatz needs an even degree < n; got degree = {p['degree']}, n = {n}")
    if fam == "random_regular" and (p["degree"] >= n or (n * p["degree"]) % 2):
        raise InputError(f"random_regular needs degree < n and n * degree even; got degree = {p['degree']}, n = {n}")


def _spectra_dtype_check(p, dtype):
    if dtype == "float32" and p["gamma"] > F32_GAMMA_MAX:
        raise InputError(
            f"gamma = {p['gamma']!r} is within 2^-12 of 1, closer than float32 resolves 1 - gamma "
            'well; use experiment.dtype = "float64"'
        )


def _spectra_bytes(p) -> int:
    count = p["graphs"] if p["family"] in _RANDOM_FAMILIES else 1
    return int(count * p["n"] ** 2 * 8 * 2)  # the point's graphs and their normalised copy; kernel chunks are capped


# ----------------------------------------------------------------------------- affine noise
_RULE = ("model", ("rule",))
NOISE_PARAMS = {
    "model": Param(
        str,
        "linear",
        lambda v: v in ("linear", "rule"),
        "one of linear, rule",
        "linear: e_t = L e_(t-1) + noise; rule: noise on the state-tracking rule's Value",
    ),
    "k": Param(int, 1, lambda v: 1 <= v <= 256, "1 <= k <= 256", "agents aggregated per step", "agents"),
    "rho_c": Param(float, 0.0, lambda v: 0 <= v <= 1, "0 <= rho_c <= 1", "shared-bias fraction of the noise variance"),
    "sigma": Param(float, 1.0, lambda v: v >= 0 and math.isfinite(v), "sigma >= 0", "per-agent noise s.d.", "Value"),
    "T": Param(int, 12, lambda v: 1 <= v <= 10_000, "1 <= T <= 10000", "steps", "steps"),
    "L": Param(
        float, 1.0, lambda v: math.isfinite(v), "finite", "per-step gain of the error", "", ("model", ("linear",))
    ),
    "trials": Param(
        int,
        10_000,
        lambda v: 2 <= v <= 10**7,
        "2 <= trials <= 1e7 (a standard error needs 2)",
        "Monte Carlo runs per point",
        "runs",
    ),
    "aggregate": Param(
        str, "mean", lambda v: v in ("mean", "median"), "mean or median", "how the k answers are combined"
    ),
    "value0": Param(float, 50.0, lambda v: abs(v) <= 1e9, "|value0| <= 1e9", "initial Value", "Value", _RULE),
    "parity0": Param(str, "A", lambda v: v in ("A", "B"), "A or B", "initial Parity", "", _RULE),
    "level0": Param(int, 3, lambda v: 1 <= v <= 9, "1 <= level0 <= 9", "initial Level", "", _RULE),
}


def _noise_dtype_check(p, dtype):
    if p["model"] == "rule" and dtype != "float64":
        raise InputError(
            'model = "rule" needs experiment.dtype = "float64" (the state-tracking rule runs in exact '
            "int64/float64 arithmetic)"
        )


def _noise_bytes(p) -> int:
    return int(p["trials"] * (p["k"] + 8) * 8 * 4)


KINDS = {
    # version 2: X0 from named PCG64 streams shared across points (common random numbers). Points that simulate
    # the same thing run once per chunk (issue 29): kernel batches shrink, so d0 and d_final may differ in the last
    # float32 digit, as they do between chunk sizes; not a version (a version reseeds every draw via the hash)
    "consensus": Kind(
        "consensus",
        CONSENSUS_PARAMS,
        # points that simulate the same thing run once (issue 29); the strategies that read each parameter
        _evaluator("consensus_evaluate", reads=_READS, unread=_UNREAD),
        _consensus_bytes,
        _consensus_extra,
        _consensus_costs,
        version=2,
        derived_from={"c1": "n and tokens_complete", "c2": "n and tokens_ring"},
        unused_when={"tokens_complete": "c1", "tokens_ring": "c2"},
        device_cache=True,
        required=True,
        dtype_check=_consensus_dtype_check,
        codes={"status": STATUS_NAMES},
        point_draws="noise",  # belief noise is keyed by the point: noisy points share no samples
        count_param="trajectories",
    ),
    # version 2: closed forms for chain/star/mesh/ring/complete rows and LAPACK's eigenvalue-only drivers
    # (float32 values differ from version 1's XLA eigh in the last digits)
    "spectra": Kind(
        "spectra",
        SPECTRA_PARAMS,
        # a family's rows hold the graph parameters it reads; the others are stored as missing (issue 29)
        _evaluator(
            "spectra_evaluate",
            reads={
                k: SPECTRA_PARAMS[k].reads[1] for k in ("p", "degree", "beta", "alpha", "a") if SPECTRA_PARAMS[k].reads
            },
        ),
        _spectra_bytes,
        _spectra_extra,
        row_key=("point", "graph"),
        count_reseeds=True,  # the graph count enters the random families' seeds
        count_param="graphs",  # (missing where the family is deterministic: one graph, graphs not read)
        max_workers=1,
        version=2,
        dtype_check=_spectra_dtype_check,
    ),
    "affine_noise": Kind(
        "affine_noise",
        NOISE_PARAMS,
        _evaluator("noise_evaluate"),
        _noise_bytes,
        row_key=("point",),
        max_workers=1,
        dtype_check=_noise_dtype_check,
    ),
}
