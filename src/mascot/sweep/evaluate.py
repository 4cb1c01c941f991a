"""How a sweep's kinds evaluate a chunk of grid points (:mod:`mascot.sweep.kinds` names their parameters): in
as few kernel calls as possible, returning one tidy table. Imported on a sweep's first chunk, so that reading,
checking and describing configs never loads JAX, pandas or pyarrow."""

from __future__ import annotations

import functools
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pyarrow as pa

from mascot.graphs import FAMILIES as _FAMILIES
from mascot.graphs import RANDOM_FAMILIES as _RANDOM_FAMILIES
from mascot.log import get_logger

__all__ = [
    "DeviceCache",
    "point_keys",
    "consensus_evaluate",
    "consensus_call",
    "spectra_evaluate",
    "noise_evaluate",
    "X0_CACHE_BYTES",
]

_log = get_logger(__name__)
X0_CACHE_BYTES = 1 << 30  # default bound of a sweep's DeviceCache (0: nothing is kept; read at call time)
# a consensus strategy -> the kernels' mode (mascot.Policy names complete and ring mode1 and mode2)
_STRATEGY = {"adaptive": "adaptive", "complete": "mode1", "ring": "mode2"}


class DeviceCache:
    """Device arrays one sweep reuses across its chunks, least recently used first out past ``max_bytes``.

    A consensus sweep's initial beliefs are common random numbers: every chunk's group with the same
    (n, d, x0_mean, x0_spread, trajectories) starts from the same X0, so it is drawn once per sweep (host
    PCG64 words, one host-to-device copy, the inverse-CDF transform on the device) and kept on the device,
    as is its tiling over a group's points; later chunks pass the cached jax.Array straight to the kernel,
    and only results come back to the host. The arrays are the ones a fresh draw would give (the draw is a
    pure function of its key), so results do not depend on the cache. Thread-safe: chunks run on several
    threads, and a key missing in several at once is built by one of them while the others wait.
    ``max_bytes = 0`` keeps nothing (every chunk draws its own X0, as before the cache existed); an array
    larger than the bound is built every time and not kept.
    """

    def __init__(self, max_bytes: int | None = None):
        self.max_bytes = X0_CACHE_BYTES if max_bytes is None else int(max_bytes)
        self._items: OrderedDict = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._building: dict = {}  # key -> lock held by the thread building it
        self.hits = self.misses = 0

    def get(self, key, build: Callable[[], jax.Array]) -> jax.Array:
        if self.max_bytes <= 0:
            self.misses += 1
            return build()
        while True:
            with self._lock:
                if key in self._items:
                    self._items.move_to_end(key)
                    self.hits += 1
                    return self._items[key]
                pending = self._building.get(key)
                if pending is None:
                    pending = self._building[key] = threading.Lock()
                    pending.acquire()
                    break
            with pending:  # another thread builds this key: wait for it, then look again
                pass
        try:
            value = build()
            size = int(value.nbytes)
            with self._lock:
                self.misses += 1
                if size <= self.max_bytes:
                    self._items[key] = value
                    self._bytes += size
                    while self._bytes > self.max_bytes:
                        _, old = self._items.popitem(last=False)
                        self._bytes -= int(old.nbytes)
            return value
        finally:
            with self._lock:
                del self._building[key]
            pending.release()

    @property
    def nbytes(self) -> int:
        return self._bytes


def point_keys(key_seed: int, indices) -> jax.Array:
    """One PRNG key per grid point: ``fold_in(key(key_seed), point_index)`` (independent of sharding)."""
    base = jax.random.key(key_seed, impl="threefry2x32")  # (explicit: whatever JAX's default PRNG)
    return jax.vmap(lambda i: jax.random.fold_in(base, i))(jnp.asarray(indices, dtype=jnp.uint32))


# ----------------------------------------------------------------------------- consensus
_X0_STREAM = 0x5830  # "X0": first element of the X0 stream key, apart from per-point keys (p,)


def _initial_beliefs(key_seed, trajectories, n, d, mean, spread, dtype):
    """X0 shared by every point with these (n, d, mean, spread): ``(trajectories, n, d)`` draws of
    ``mean + spread * Z``, Z a normal truncated so X0 lies in [0, 1], from the stream
    ``(seed, (X0, n, d, mean, spread))`` (``mascot.kernels.sampling``). Common random numbers: points
    that differ only in strategy, thresholds, budget or costs start trajectory t from the same beliefs,
    as the paper's Table VI runs its three strategies from one X0; a point with more trajectories
    extends the same sequence."""
    from mascot.kernels.sampling import truncated_normal_streams
    from mascot.seeds import float_key

    key = (_X0_STREAM, int(n), int(d), float_key(mean), float_key(spread))
    return truncated_normal_streams(key_seed, [key], (trajectories, n, d), mean, spread, dtype=dtype)


@functools.lru_cache(maxsize=256)
def _consensus_pair(n: int, a1: float, a2: float):
    """(W1, W2, lambda1, lambda2) of complete K_N and ring C_N with these self-weights (cached: the
    doubly-stochastic and circulant checks cost more than a chunk's certificates)."""
    from mascot.graphs import complete_weights, ring_weights
    from mascot.theory import contraction_rate

    W1, W2 = complete_weights(n, a1), ring_weights(n, a2)
    return W1, W2, contraction_rate(W1), contraction_rate(W2)


_STRATEGY_NAMES = tuple(_STRATEGY)


def _group_x0(cache, key_seed, T, n, d, mean, spread, dtype, members: int) -> jax.Array:
    """The group's X0 on the device: the common draw tiled over its ``members`` points (see :class:`DeviceCache`)."""
    cache = cache if cache is not None else DeviceCache(0)
    base = ("x0", key_seed, T, n, d, mean, spread, dtype)
    X0 = cache.get(base, lambda: _initial_beliefs(key_seed, T, n, d, mean, spread, dtype))
    if members == 1:
        return X0
    return cache.get(base + (members,), lambda: jnp.tile(X0, (members, 1, 1)))


@functools.partial(jax.jit, static_argnames=("key_seed", "T"))  # the seed is static: it may exceed int32
def _noise_keys(key_seed, ids, T):
    """Belief-noise keys of ``len(ids)`` points x ``T`` trajectories, built on the device: trajectory t of
    point p uses ``fold_in(fold_in(key(key_seed), p), 2**31 + t)``."""
    pkeys = point_keys(key_seed, ids)
    t = jnp.arange(T, dtype=jnp.uint32) + jnp.uint32(2**31)
    nk = jax.vmap(lambda k: jax.vmap(lambda v: jax.random.fold_in(k, v))(t))(pkeys)
    return nk.reshape(-1)


def _simulated(p: dict, reads: dict, keys) -> tuple:
    """``p``'s values of ``keys`` with those its strategy does not simulate with (``reads``: parameter -> the
    strategies that read it) as ``None``: points with equal tuples run the same simulation."""
    s = p["strategy"]
    return tuple(None if k in reads and s not in reads[k] else p[k] for k in keys)


def consensus_evaluate(
    points: list[dict],
    indices: np.ndarray,
    key_seed: int,
    dtype: str,
    cache: DeviceCache | None = None,
    reads: dict | None = None,
    unread: dict | None = None,
) -> pa.Table:
    """One row per (point, trajectory). ``reads``: parameter -> the strategies whose simulation reads it (the
    kind's :attr:`Param.reads`). Points of the chunk that simulate the same thing (equal in everything their
    strategy reads, and without belief noise, whose draws are the point's own) run once and share the
    simulation's columns; each row's parameters and Theorem 1 certificate remain its point's own. ``unread``:
    the self-weight a simulation builds an unread mode's weights with (the kind's default), so that a row never
    depends on which other points share its chunk (the unread mode enters only the modal basis, in rounding)."""
    from mascot.execute import simulate_consensus
    from mascot.theory import theorem1_batch

    reads = reads or {}
    indices = np.asarray(indices)
    groups: dict[tuple, list[int]] = {}
    for i, p in enumerate(points):
        g = (p["n"], p["d"], p["strategy"], p["max_rounds"]) + _simulated(
            p, reads, ("self_weight_complete", "self_weight_ring")
        )
        g += (p["noise"], p["x0_mean"], p["x0_spread"], p["trajectories"])
        groups.setdefault(g, []).append(i)
    parts: dict[str, list[np.ndarray]] = {}
    for (n, d, strategy, max_rounds, a1_read, a2_read, noise, mean, spread, T), members in groups.items():
        # the simulations of the group: one per distinct simulated tuple (every point its own with noise)
        sims: dict[tuple, int] = {}
        of = np.array(
            [
                sims.setdefault(
                    (i,) if noise > 0 else _simulated(points[i], reads, ("eta", "eps", "b0", "c1", "c2")), len(sims)
                )
                for i in members
            ]
        )
        reps = [members[j] for j in np.unique(of, return_index=True)[1]]  # each simulation's first point
        # kernel batches of few shapes (a new shape compiles): the simulations padded to a power of two (at most
        # the group's size) with copies of the last, whose rows nobody reads
        reps += reps[-1:] * (min(len(members), 1 << (len(reps) - 1).bit_length()) - len(reps))
        a1_sim, a2_sim = (
            (unread or {})[k] if v is None else v
            for k, v in zip(("self_weight_complete", "self_weight_ring"), (a1_read, a2_read))
        )
        W1, W2, _, _ = _consensus_pair(n, a1_sim, a2_sim)
        # X0 common to the group's points (one draw per sweep, tiled, kept on the device); noise from
        # fold_in(point key, 2**31 + t), the keys built on the device
        X0 = _group_x0(cache, key_seed, T, n, d, float(mean), float(spread), dtype, len(reps))
        sim = lambda k, reps=reps, T=T: np.repeat(  # noqa: E731
            np.array([points[i][k] for i in reps], dtype=np.float64), T
        )
        nkeys = None
        if noise > 0:
            nkeys = _noise_keys(key_seed, indices[np.asarray(reps)].astype(np.uint32), T=T)
        res = simulate_consensus(
            X0,
            W1,
            W2,
            sim("c1"),
            sim("c2"),
            sim("eta"),
            sim("eps"),
            sim("b0"),
            strategy=_STRATEGY[strategy],
            max_rounds=max_rounds,
            noise=noise,
            key=nkeys,
            dtype=dtype,
        )
        share = (  # a simulation's (trajectories,) column -> its points' rows
            (lambda v: v)
            if len(reps) == len(members) and len(sims) == len(members)
            else (lambda v, of=of, T=T: v.reshape(-1, T)[of].reshape(-1))
        )
        rows = np.repeat(np.asarray(members), T)
        traj = np.tile(np.arange(T, dtype=np.int32), len(members))
        col = lambda k, members=members, T=T: np.repeat(  # noqa: E731
            np.array([points[i][k] for i in members], dtype=np.float64), T
        )
        eta, eps, b0, c1, c2 = (col(k) for k in ("eta", "eps", "b0", "c1", "c2"))
        a1, a2 = (col(k) for k in ("self_weight_complete", "self_weight_ring"))
        pair = [_consensus_pair(n, points[i]["self_weight_complete"], points[i]["self_weight_ring"]) for i in members]
        lam1, lam2 = (np.array([q[j] for q in pair], dtype=np.float64)[:, None] for j in (2, 3))
        d0 = share(
            res.d0
        )  # kernel outputs keep the sweep's dtype (float32 stored as float64 adds bytes, not precision)
        # certificates with per-point parameters as (points, 1) columns: one log per point, not per row
        pp = {
            k: np.array([points[i][k] for i in members], dtype=np.float64)[:, None] for k in ("eta", "eps", "c1", "c2")
        }
        k1, k2, bstar = (
            a.ravel()
            for a in theorem1_batch(
                d0.astype(np.float64).reshape(len(members), T), pp["eta"], pp["eps"], lam1, lam2, pp["c1"], pp["c2"]
            )
        )
        m = rows.size
        full = lambda v, t, m=m: np.full(m, v, dtype=t)  # noqa: E731
        cols = {
            "point": indices[rows].astype(np.int64),
            "trajectory": traj,
            "n": full(n, np.int32),
            "d": full(d, np.int32),
            "strategy": full(_STRATEGY_NAMES.index(strategy), np.int8),
            "eta": eta,
            "eps": eps,
            "b0": b0,
            "c1": c1,
            "c2": c2,
            "self_weight_complete": a1,
            "self_weight_ring": a2,
            "x0_mean": full(mean, np.float64),
            "x0_spread": full(spread, np.float64),
            "noise": full(noise, np.float64),
            "max_rounds": full(max_rounds, np.int32),
            "lambda1": np.repeat(lam1.ravel(), T),
            "lambda2": np.repeat(lam2.ravel(), T),
            "d0": d0,
            "rounds": share(res.rounds).astype(np.int32),
            "tokens": share(res.tokens),
            "d_final": share(res.d_final),
            "status": share(res.status).astype(np.int8),
            "K_star": k1 + k2,
            "B_star": bstar,
            "certified": b0 >= bstar,
        }
        for k, v in cols.items():
            parts.setdefault(k, []).append(v)
    cols = {k: np.concatenate(v) if len(v) > 1 else v[0] for k, v in parts.items()}
    if len(parts["point"]) > 1 and np.any(np.diff(cols["point"]) < 0):  # groups interleave: sort rows
        order = np.lexsort((cols["trajectory"], cols["point"]))
        cols = {k: v[order] for k, v in cols.items()}
    arrays = {k: pa.array(v) for k, v in cols.items()}
    names = pa.array(_STRATEGY_NAMES, pa.string())
    arrays["strategy"] = pa.DictionaryArray.from_arrays(arrays["strategy"], names).cast(pa.string())
    return pa.table(arrays)


def consensus_call(p: dict, index: int, key_seed: int, dtype: str, reads: dict, unread: dict) -> dict:
    """The :func:`mascot.simulate_consensus` arguments that simulate the completed consensus point ``p`` (grid
    point ``index`` of a sweep seeded by ``key_seed``) as :func:`consensus_evaluate` does: see
    :func:`mascot.sweep.consensus_inputs`, which fills ``p``, ``reads`` and ``unread`` from a config."""
    from mascot.kernels.precision import float64

    weights = ("self_weight_complete", "self_weight_ring")
    a1, a2 = (unread[k] if v is None else v for k, v in zip(weights, _simulated(p, reads, weights)))
    W1, W2, _, _ = _consensus_pair(p["n"], a1, a2)
    T = p["trajectories"]
    with float64(dtype == "float64"):
        X0 = np.asarray(_initial_beliefs(key_seed, T, p["n"], p["d"], p["x0_mean"], p["x0_spread"], dtype))
        key = _noise_keys(key_seed, np.array([index], np.uint32), T=T) if p["noise"] > 0 else None
    return dict(
        X0=X0,
        W1=W1,
        W2=W2,
        c1=p["c1"],
        c2=p["c2"],
        eta=p["eta"],
        eps=p["eps"],
        b0=p["b0"],
        strategy=_STRATEGY[p["strategy"]],
        max_rounds=p["max_rounds"],
        noise=p["noise"],
        key=key,
        dtype=dtype,
    )


# ----------------------------------------------------------------------------- spectra
def _graph_key(p) -> tuple:
    """Everything that defines a point's graphs (not gamma): equal keys share the same graph samples."""
    fam = p["family"]
    extra = {
        "erdos_renyi": ("p",),
        "watts_strogatz": ("degree", "beta"),
        "random_regular": ("degree",),
        "malicious_star": ("alpha",),
        "complete": ("a",),
    }.get(fam, ())
    count = p["graphs"] if fam in _RANDOM_FAMILIES else 1
    return (fam, p["n"], count) + tuple((k, p[k]) for k in extra)


def _build_graphs(gkey: tuple, key_seed: int) -> np.ndarray:
    from mascot import graphs as tp

    fam, n, count, *extra = gkey
    kw = dict(extra)
    if fam in _RANDOM_FAMILIES:
        # seeded by the config and the graph parameters only, so every gamma sees the same graphs
        # (whatever the sharding or chunking)
        words = [key_seed % 2**32, _FAMILIES.index(fam), n, count] + [int(round(float(v) * 1e9)) for v in kw.values()]
        rng = np.random.default_rng(words)
        if fam == "erdos_renyi":
            return tp.erdos_renyi(n, kw["p"], count, rng)
        if fam == "watts_strogatz":
            return tp.watts_strogatz(n, kw["degree"], kw["beta"], count, rng)
        return tp.random_regular(n, kw["degree"], count, rng)
    return tp.build(fam, n, *kw.values())[None]


def spectra_evaluate(
    points: list[dict], indices: np.ndarray, key_seed: int, dtype: str, reads: dict | None = None
) -> pd.DataFrame:
    """One row per (point, graph). ``reads``: graph parameter -> the families that read it; a row of another
    family stores that parameter as missing (its value there would be one the graphs were not built with)."""
    reads = reads or {}

    def param(k, fam, members, G):  # the column of graph parameter k for the group's G x len(members) rows
        vals = [points[i][k] for i in members]
        if k in reads and fam not in reads[k]:  # missing: null in Parquet (degree stays an integer column)
            return pd.array([None] * (G * len(vals)), dtype="Int64" if isinstance(vals[0], int) else "float64")
        return np.tile(vals, G)

    from mascot.execute.spectra import sr_spectra

    groups: dict[tuple, list[int]] = {}
    for i, p in enumerate(points):
        groups.setdefault(_graph_key(p), []).append(i)
    frames = []
    for gkey, members in groups.items():
        A = _build_graphs(gkey, key_seed)  # (G, n, n)
        gam = np.array([points[i]["gamma"] for i in members])
        # points of one graph key and gamma (differing only in parameters their family does not read) run once
        ug, of = np.unique(gam, return_inverse=True)
        s = sr_spectra(A[:, None], ug, dtype=dtype)  # (G, distinct gammas)
        G, M = A.shape[0], len(members)
        share = lambda v, of=of: np.asarray(v, dtype=np.float64)[:, of].ravel()  # noqa: E731  (G, members)
        deg = (A > 0).sum(-1)
        frames.append(
            pd.DataFrame(
                {
                    "point": np.tile(np.asarray(indices)[members], G).astype(np.int64),
                    "graph": np.repeat(np.arange(G), M).astype(np.int32),
                    "family": gkey[0],
                    "n": np.int32(gkey[1]),
                    "gamma": np.tile(gam, G),
                    **{k: param(k, gkey[0], members, G) for k in ("p", "degree", "beta", "alpha", "a")},
                    "method": s.method,
                    "isolated": np.repeat((deg == 0).sum(-1), M).astype(np.int32),
                    "rho": share(s.rho),
                    "delta": share(s.delta),
                    "kappa": share(s.kappa),
                }
            )
        )
    df = pd.concat(frames, ignore_index=True)
    return df.sort_values(["point", "graph"], kind="stable").reset_index(drop=True)


# ----------------------------------------------------------------------------- affine noise
def noise_evaluate(points: list[dict], indices: np.ndarray, key_seed: int, dtype: str) -> pd.DataFrame:
    from mascot.execute.noise import affine_noise_error, rule_noise_error
    from mascot.theory.noise import ceg_ratio, expected_ceg

    groups: dict[tuple, list[int]] = {}
    for i, p in enumerate(points):
        groups.setdefault((p["model"], p["aggregate"], p["trials"]), []).append(i)
    frames = []
    for (model, agg, trials), members in groups.items():
        col = lambda k, members=members: np.array([points[i][k] for i in members])  # noqa: E731
        ids = np.asarray(indices)[members]
        k, rc, sg, T, L = col("k"), col("rho_c"), col("sigma"), col("T"), col("L")
        if model == "linear":
            ceg = affine_noise_error(
                key_seed, k, rc, sg, T, L, trials=trials, aggregate=agg, point_ids=ids, dtype=dtype, chunk_points=4
            )
            theory = expected_ceg(sg, k, rc, T, L) if agg == "mean" else np.full(len(members), np.nan)
        else:
            ceg = rule_noise_error(
                key_seed,
                k=k,
                rho_c=rc,
                sigma=sg,
                T=T,
                trials=trials,
                aggregate=agg,
                value0=col("value0"),
                parity0=np.where(col("parity0") == "A", 0, 1),
                level0=col("level0"),
                point_ids=ids,
                chunk_points=4,
            )
            theory = np.full(len(members), np.nan)
        ceg = np.asarray(ceg, dtype=np.float64).reshape(len(members), trials)
        finite = np.isfinite(ceg)
        kept = np.where(finite, ceg, np.nan)
        with warnings.catch_warnings():  # (all-NaN points: numpy's "Mean of empty slice" etc.; said once below)
            warnings.simplefilter("ignore", RuntimeWarning)
            mean, sd = np.nanmean(kept, axis=1), np.nanstd(kept, axis=1, ddof=1)
            median, q05, q95 = np.nanmedian(kept, axis=1), *np.nanquantile(kept, [0.05, 0.95], axis=1)
        m = finite.sum(1)
        if (m < trials).any():  # (an unstable L overflowed float32 with only numpy's warnings: an outside tester)
            # each point once (a short last chunk repeats its last point to fill the batch: counted 6 times)
            bad, first = np.unique(ids[m < trials], return_index=True)
            lost = int((trials - m[m < trials][first]).sum())
            _log.warning(
                f"point(s) {', '.join(map(str, bad[:8]))}{' ...' if bad.size > 8 else ''}: the cumulative error "
                f"overflowed ({dtype or 'the working dtype'}) in {lost:,} trial(s), counted in `diverged` and left "
                "out of ceg_* (NaN where every trial overflowed); float64 holds more"
            )
        frames.append(
            pd.DataFrame(
                {
                    "point": ids.astype(np.int64),
                    "model": model,
                    "aggregate": agg,
                    "k": k.astype(np.int32),
                    "rho_c": rc,
                    "sigma": sg,
                    "T": T.astype(np.int32),
                    "L": L,
                    "trials": np.int32(trials),
                    "value0": col("value0"),
                    "parity0": col("parity0"),
                    "level0": col("level0").astype(np.int32),
                    "ceg_mean": mean,
                    "ceg_sd": sd,
                    "ceg_se": sd / np.sqrt(np.maximum(m, 1)),
                    "ceg_median": median,
                    "ceg_q05": q05,
                    "ceg_q95": q95,
                    "diverged": (trials - m).astype(np.int32),
                    "ceg_theory": theory,
                    "ratio_theory_k": ceg_ratio(k, rc),
                }
            )
        )
    df = pd.concat(frames, ignore_index=True)
    return df.sort_values("point", kind="stable").reset_index(drop=True)
