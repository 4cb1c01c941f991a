"""The host driver of the consensus kernels: validation, set-up caches, chunking, devices and pipelining.

:func:`simulate_consensus` runs Algorithm 1 of the consensus paper on a batch of trajectories by calling the
pure JAX kernels of :mod:`mascot.kernels.consensus` chunk by chunk: chunks of equal size (one compiled
shape), the modal path without noise or traces dispatched one chunk ahead so the next chunk's
host-to-device copy overlaps this chunk's compute, and the results gathered into numpy arrays.

Devices. With one local device every chunk runs there. With several (GPUs, or XLA's forced host devices)
the batch axis of each call is sharded over a 1-D :class:`jax.sharding.Mesh` of all local devices
(``NamedSharding(mesh, P("batch"))``, the constants replicated): one jitted call (``jax.shard_map`` of the
one-device kernel) runs ``n_devices`` chunks at once, one per device, each exactly the rows, padding and
shape that chunk has on one device, so results are bit-identical to one device's. A jax.Array ``X0``
stays on its device(s): on one CPU device the modal rollout reads each chunk's rows where they are (no
sliced copy), other paths and accelerators slice (or gather and reshard) chunks there by compiled calls,
and only the results come back to the host. Results do not depend on the device count; on a CPU they are
also the same for every chunk size of the tiled modal path (other paths can differ in the last bits between
chunk sizes: XLA:CPU's fused products and sums round differently for a different number of rows).
"""

from __future__ import annotations

import functools
import math
import mmap
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P
from threadpoolctl import ThreadpoolController

from mascot.errors import InputError
from mascot.execute.devices import shards as _shards
from mascot.execute.devices import spec as _spec
from mascot.kernels import consensus as kc
from mascot.kernels import switching
from mascot.kernels.consensus import ConsensusResult
from mascot.kernels.precision import MAX_ROUNDS_LIMIT, check_budget, check_noise, resolve_dtype
from mascot.kernels.prng import as_key
from mascot.theory.consensus import validate_doubly_stochastic

__all__ = ["simulate_consensus", "ConsensusResult"]

_BLAS = None
#: the noise-free modal path without a round loop (:func:`mascot.kernels.consensus.modal_closed`) where round costs
#: are whole numbers; ``False`` runs the round loop (benchmarks and tests compare the two)
CLOSED_FORM = True
_NONFINITE = (
    "X0 contains NaN or inf, or values so large that D(0)^2 overflows in the working dtype "
    "(rescale the beliefs, or use float64)"
)


def _single_thread_blas():
    """Limit BLAS to one thread for the small host-side set-up (eigh, W1 @ W2).

    Multi-threaded OpenBLAS on N x N matrices is slower than one thread, and its worker threads keep
    spinning afterwards: on a 2-core machine that halves the speed of the JAX kernel that follows
    (measured: the O(N^2 d) projection at N = 64, B = 2e4 took 60 ms instead of 25 ms).
    """
    global _BLAS
    if _BLAS is None:
        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


_SETUP_LOCK = threading.Lock()  # one thread at a time changes OpenBLAS's (process-global) thread count


def _whole(v, lo: int, hi: float) -> bool:
    """Whether ``v`` is a whole number in ``[lo, hi]`` (an int, or a float with no fraction, also 0-d arrays of
    them; not a bool, string, longer array, NaN or inf)."""
    if isinstance(v, (np.ndarray, jax.Array)) and v.ndim == 0:  # (a 0-d jax.Array: an outside tester)
        v = v.item()
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        return False
    return math.isfinite(v) and v == int(v) and lo <= v <= hi


def _per_trajectory(name, value, B, *, positive=False, nonnegative=False):
    """Validate a scalar or ``(B,)`` parameter; scalars stay 0-d (broadcast inside the kernel)."""
    raw = np.asarray(value)
    # "600" or True is a mistake, not a cost; bfloat16 and other ml_dtypes floats are numbers (numpy kind "V")
    if not (raw.dtype.kind in "iuf" or jax.numpy.issubdtype(raw.dtype, jax.numpy.floating)):
        raise InputError(f"{name} must be a number or an array of numbers; got {value!r:.60}")
    arr = raw.astype(np.float64)
    if arr.ndim != 0 and arr.shape != (B,):
        raise InputError(f"{name} must be a scalar or have shape ({B},) (one per trajectory); got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{name} must be finite")
    if positive and not np.all(arr > 0):
        raise InputError(f"{name} must be > 0; got min {arr.min():g}")
    if nonnegative and not np.all(arr >= 0):
        raise InputError(f"{name} must be >= 0; got min {arr.min():g}")
    return arr


# ----------------------------------------------------------------------------- public entry point
def simulate_consensus(
    X0,
    W1,
    W2,
    c1,
    c2,
    eta,
    eps,
    b0,
    strategy: str = "adaptive",
    max_rounds: int = 64,
    noise: float = 0.0,
    key=None,
    trace: bool = False,
    *,
    dtype=None,
    method: str = "auto",
    return_x: bool = False,
    segment_rounds: int | None = None,
    chunk_size: int | None = None,
) -> ConsensusResult:
    """Run Algorithm 1 of the consensus paper on a batch of B trajectories.

    Implements ``X(k+1) = W_sigma_k X(k)`` (eq. 5), ``b(k+1) = b(k) - c_sigma_k`` (eq. 7) with
    norm-threshold switching ``sigma_k = 1 if D(k) > eta else 2`` (eq. 8), stopping at ``D <= eps``
    (consensus), ``b_k < c_sigma_k`` before a round (BudgetFail) or after ``max_rounds`` rounds.

    Args:
      X0: initial beliefs, ``(B, N, d)`` (a single ``(N, d)`` is treated as B = 1).
      W1, W2: doubly stochastic ``(N, N)`` weight matrices of mode 1 (dense) and mode 2 (sparse).
      c1, c2: per-round token costs (> 0), scalars or ``(B,)``.
      eta: switching threshold, eps: consensus tolerance (``eta > eps > 0`` for ``"adaptive"``), b0: initial
        budget (>= 0); scalars or ``(B,)``.
      strategy: ``"adaptive"`` (Algorithm 1), or one mode throughout: ``"complete"`` (mode 1) or ``"ring"``
        (mode 2), the consensus paper's names (``"mode1"``/``"mode2"`` are the same).
      max_rounds: the most rounds any trajectory runs (status 2 when exceeded).
      noise: standard deviation of i.i.d. Gaussian perturbations added to every belief entry after each
        round (the LLM stochasticity of Remark 3). Needs ``key``.
      key: one PRNG key (``jax.random.key(seed)`` or ``jax.random.PRNGKey(seed)``; split into one key per
        trajectory), an int seed (taken as ``jax.random.key(seed)``) or a batch of B keys.
      trace: also return per-round ``D``, ``b`` and ``sigma`` (in float32 ``b_trace`` holds ``floor(b0)`` minus
        the tokens spent: with whole-token costs the run depends on ``floor(b0)`` only, which float32 keeps
        exactly where it may round ``b0`` itself up).
      dtype: float32 or float64 (default: float64 if ``jax_enable_x64`` is on, else float32).
      method: ``"auto"`` (modal when W1, W2 are symmetric and commute, else matrix), ``"modal"``,
        ``"matrix"``.
      return_x: also return the final beliefs (``x_final``).
      segment_rounds: rounds between compactions (default: 4 for the matrix path; the modal path does
        not compact since a round costs O(N)).
      chunk_size: trajectories per kernel call and device (default: sized so a chunk's X0 fits in the
        CPU's caches, or large on a GPU; the last chunk is padded, or overlaps its predecessor where X0 is
        read in place, so every chunk reuses one compiled shape). Results do not depend on it beyond the last
        bits of floating-point sums, nor on the device count. On a CPU, the modal path reads a device-resident
        (``jax.Array``) X0 in place and compiles one kernel per (B, chunk_size); elsewhere one per chunk_size
        (a numpy X0 with N > 12 and no noise is read in place too, from the 64-byte boundary before each chunk,
        whatever its alignment).

    Returns:
      :class:`ConsensusResult` of numpy arrays.
    """
    if any(isinstance(v, jax.core.Tracer) for v in (X0, W1, W2, c1, c2, eta, eps, b0, noise, key)):
        raise InputError(
            "simulate_consensus is a host driver (it checks values, chunks the batch and returns numpy arrays) "
            "and cannot run under jax.jit, vmap or grad; inside a transformed function use mascot.rollout, "
            "the pure core (vmap it over trajectories)"
        )
    strategy = switching.canonical_strategy(strategy)  # "complete"/"ring" name modes 1/2 as everywhere else
    if method not in ("auto", "modal", "matrix"):
        raise InputError(f"method must be 'auto', 'modal' or 'matrix'; got {method!r}")
    if not _whole(max_rounds, 0, MAX_ROUNDS_LIMIT):
        raise InputError(
            f"max_rounds must be an integer in [0, {MAX_ROUNDS_LIMIT}] (int32 round counters); got {max_rounds!r}"
        )
    max_rounds = int(max_rounds)
    if segment_rounds is not None and not _whole(segment_rounds, 1, math.inf):
        # (0 and -1 were taken silently, as the default and as 1; "abc", nan and inf raised Python's own errors)
        raise InputError(f"segment_rounds must be None or an integer >= 1; got {segment_rounds!r}")
    dt = resolve_dtype(dtype)
    if not isinstance(X0, jax.Array):  # JAX arrays stay on their device (no host round trip)
        X0 = np.asarray(X0)
    if jnp.issubdtype(X0.dtype, jnp.complexfloating) or not (jnp.issubdtype(X0.dtype, jnp.number) or X0.dtype == bool):
        raise InputError(
            f"X0 must hold real numbers; got dtype {X0.dtype}"
        )  # (complex: the imaginary part was dropped)
    if not jnp.issubdtype(X0.dtype, jnp.floating):
        X0 = X0.astype(np.float64)
    if X0.ndim == 2:
        X0 = X0[None]
    if X0.ndim != 3 or X0.shape[0] < 1 or X0.shape[1] < 1 or X0.shape[2] < 1:
        raise InputError(f"X0 must have shape (B, N, d) with B, N, d >= 1; got shape {X0.shape}")
    B, N, d = X0.shape
    W1 = validate_doubly_stochastic(W1, "W1")
    W2 = validate_doubly_stochastic(W2, "W2")
    for name, W in (("W1", W1), ("W2", W2)):
        if W.shape != (N, N):
            raise InputError(f"{name} must have shape ({N}, {N}) to match X0's N = {N}; got {W.shape}")
    c1a = _per_trajectory("c1", c1, B, positive=True)
    c2a = _per_trajectory("c2", c2, B, positive=True)
    eps_a = _per_trajectory("eps", eps, B, positive=True)
    eta_a = _per_trajectory("eta", eta, B, positive=True)
    b0a = _per_trajectory("b0", b0, B, nonnegative=True)
    check_budget(b0a, (c1a, c2a), dt, integer_costs=True)
    res = float(jnp.finfo(dt).eps)
    if np.min(eps_a) < res:
        raise InputError(
            f"eps = {np.min(eps_a):g} is below {jnp.dtype(dt).name}'s resolution {res:.3g}: disagreements "
            "that small are rounding noise for beliefs of order 1 (the modal and matrix paths would "
            "disagree); use a larger eps"
            + (", float64," if jnp.dtype(dt) != jnp.float64 else "")
            + " or rescale the beliefs"
        )
    if strategy == "adaptive" and not np.all(eta_a > eps_a):
        e1, e2 = np.broadcast_arrays(np.atleast_1d(eta_a), np.atleast_1d(eps_a))
        i = int(np.argmin(e1 > e2))  # (the first trajectory that fails: an outside tester)
        raise InputError(
            "eta must be > eps for strategy='adaptive' (with eta <= eps mode 2 is never "
            f"selected; use strategy='complete'); trajectory {i} has eta = {e1[i]:g}, eps = {e2[i]:g}"
        )
    if isinstance(noise, bool) or np.ndim(noise) != 0:
        raise InputError(f"noise must be one number >= 0 (the s.d. of every belief's noise); got {noise!r}")
    try:
        noise = float(noise)
    except (TypeError, ValueError):
        raise InputError(f"noise must be one number >= 0; got {noise!r}") from None
    if not (math.isfinite(noise) and noise >= 0):
        raise InputError(f"noise must be a finite standard deviation >= 0; got {noise}")
    check_noise(noise, max_rounds, N, d, dt)
    noisy = noise > 0
    if noisy and key is None:
        raise InputError("key is required when noise > 0 (e.g. key=jax.random.key(0))")

    setup = _setup(W1.tobytes(), W2.tobytes(), N, method, jnp.dtype(dt).name, noisy)
    if method == "modal" and setup is None:
        raise InputError("method='modal' needs W1 and W2 symmetric and commuting; use method='matrix'")
    use_modal = setup is not None
    if use_modal:
        U, lam1, lam2, consts = setup
    else:
        U = lam1 = lam2 = None
        consts = dict(W1=jnp.asarray(W1, dt), W2=jnp.asarray(W2, dt))
    keys = as_key(key, B) if noisy else None
    platform = next(iter(X0.devices())).platform if isinstance(X0, jax.Array) else jax.default_backend()
    shards = _shards()
    # CPU, one device, no noise: the modal projection runs in cache-sized tiles (see kc.modal_init)
    tiled = use_modal and not noisy and N > kc.SMALL_N and shards is None and platform == "cpu"
    tile = _tile(N, d, dt) if tiled else None
    C = _chunk_size(B, N, d, dt, use_modal, chunk_size, platform, tiled=tiled)
    if shards is not None:  # each call runs one C-row chunk on every device
        consts = jax.device_put(consts, shards.replicated)
    seg = max_rounds if trace else max(1, int(segment_rounds or (max_rounds if use_modal else 4)))
    # whole-number round costs (always in float32): the round-free modal path gives the round loop's outcome
    # (check_budget refused fractional costs in float32 above: only float64 needs the scan)
    whole = jnp.dtype(dt) == jnp.float32 or all(np.all(np.mod(np.asarray(c, np.float64), 1) == 0) for c in (c1a, c2a))
    cfg = dict(
        closed=CLOSED_FORM and whole,
        strategy=strategy,
        max_rounds=max_rounds,
        trace=trace,
        noisy=noisy,
        return_x=return_x,
        sigma=np.asarray(noise, dtype=dt),
        seg=seg,
        dt=dt,
        use_modal=use_modal,
        consts=consts,
        U=U,
        lam1=lam1,
        lam2=lam2,
        shards=shards,
        tile=tile,
        platform=platform,
    )

    out = dict(
        rounds=np.zeros(B, np.int32),
        b=np.zeros(B, dt),
        d=np.zeros(B, dt),
        status=np.zeros(B, np.int32),
        d0=np.zeros(B, dt),
    )
    if return_x:
        out["x"] = np.zeros((B, N, d), dt)
    if trace:
        out["d_trace"] = np.zeros((B, max_rounds + 1), dt)
        out["b_trace"] = np.zeros((B, max_rounds + 1), dt)
        out["sigma_trace"] = np.zeros((B, max_rounds), np.int32)
    # float32 (whole-token costs, checked above): a run depends on floor(b0) only (every b_k >= c compares whole
    # numbers), and floor(b0) <= 2^24 is exact in float32 where b0 itself may round up across a whole number
    # (29.9999999 became 30 and paid a round of cost 30: an outside tester)
    b0k = np.floor(b0a) if jnp.dtype(dt) == jnp.float32 else b0a
    params = dict(c1=c1a, c2=c2a, eta=eta_a, eps=eps_a, b0=np.broadcast_to(b0k, (B,)))

    # Chunks are independent and every trajectory's numbers are the same whichever chunk (and device)
    # it runs in, so results are identical with 1 or many devices.
    step = C if shards is None else C * shards.n
    starts = list(range(0, B, step))
    if use_modal and not noisy and not trace:
        _modal_pipelined(X0, params, starts, C, B, cfg, out)
    else:

        def chunk(lo):
            rows, hi, src = _layout(lo, B, C, shards)
            take = lambda a, rows=rows: a if np.ndim(a) == 0 else a[rows]  # noqa: E731
            if shards is None:
                chunk_keys = None if keys is None else keys[rows if isinstance(rows, slice) else jnp.asarray(rows)]
                X = X0[rows]
            else:  # a jax.Array's rows are gathered (and split over the devices) on the devices
                chunk_keys = None if keys is None else shards.take(keys, rows)
                X = shards.take(X0, rows, dt) if isinstance(X0, jax.Array) else X0[rows]
            res = yield from _chunk_steps(X, {k: take(v) for k, v in params.items()}, chunk_keys, cfg)
            for k, v in res.items():
                out[k][lo:hi] = v[src]

        _interleave([chunk(lo) for lo in starts], 2)

    spent = np.asarray(b0k, dtype=dt) - out["b"]
    result = ConsensusResult(
        rounds=out["rounds"],
        tokens=spent,
        d_final=out["d"],
        status=out["status"],
        d0=out["d0"],
        method="modal" if use_modal else "matrix",
    )
    if trace:
        result = result._replace(d_trace=out["d_trace"], b_trace=out["b_trace"], sigma_trace=out["sigma_trace"])
    if return_x:
        result = result._replace(x_final=out["x"])
    return result


def _layout(lo, B, C, shards):
    """``(rows, hi, src)`` of the kernel call starting at batch row ``lo``: the rows to run, the end of the
    batch rows it covers and where their results are. One device: rows ``lo:hi`` padded with copies of
    row ``lo`` to ``C`` rows (one compiled shape for every chunk); several: :meth:`mascot.execute.devices.Shards.rows`."""
    if shards is not None:
        return shards.rows(lo, B, C)
    hi = min(lo + C, B)
    if hi - lo == C:
        return slice(lo, hi), hi, slice(0, C)
    return np.concatenate([np.arange(lo, hi), np.full(C - (hi - lo), lo)]), hi, slice(0, hi - lo)


def _aligned(a: np.ndarray) -> np.ndarray:
    """``a`` itself if XLA can alias it (64-byte aligned, C-contiguous), else a copy that can be, made
    by two threads: XLA's own copy of an unaligned host array runs on one (3.4 vs 2.2 ms per 15 MB)."""
    if a.flags.c_contiguous and a.ctypes.data % 64 == 0:
        return a
    buf = np.empty(a.nbytes + 64, np.uint8)
    off = -buf.ctypes.data % 64
    out = buf[off : off + a.nbytes].view(a.dtype).reshape(a.shape)
    if a.nbytes < 1 << 20 or a.shape[0] < 2:
        np.copyto(out, a)
    else:
        k = a.shape[0] // 2
        list(_copy_pool().map(lambda sl: np.copyto(out[sl], a[sl]), (slice(0, k), slice(k, None))))
    return out


class _Span:
    """``n`` entries of ``a``'s dtype from address ``ptr`` (numpy's array interface, read-only), keeping ``a``
    alive."""

    def __init__(self, a: np.ndarray, ptr: int, n: int):
        self.a = a
        self.__array_interface__ = dict(shape=(n,), typestr=a.dtype.str, data=(ptr, True), version=3)


_PAGE = mmap.PAGESIZE


def _from_boundary(a: np.ndarray, room: int = 0):
    """``(flat, skip)``: ``a`` (C-contiguous) inside a flat array of ``a.size + 64 / itemsize`` entries that starts
    at the 64-byte boundary at or before ``a``'s first entry (XLA aliases host memory only from such a boundary),
    ``a`` from entry ``skip`` on. The bytes before and after ``a`` (64 in all) are padding that the kernel never
    reads. ``None`` (copy instead) when they could be unmapped memory: the bytes before ``a`` are on its first
    page (a page boundary is a 64-byte boundary); those after it must fit in the ``room`` bytes known to follow
    ``a`` (the rest of the array it is a slice of) or on its last page. Also ``None`` when ``a``'s address is no
    multiple of its item size or the flat array is too long for int32 indices. One length per ``a.shape``
    whatever the alignment, so one compiled kernel. Replaces the aligned copy of :func:`_aligned` on the tiled CPU
    modal path (about 2 ms of a 13 ms call at N = 64, B = 2e4)."""
    if not a.flags.c_contiguous or a.size == 0:
        return None
    ptr = a.ctypes.data
    pad = ptr % 64
    n = a.size + 64 // a.itemsize
    end = ptr + a.nbytes  # one past a's last byte; the flat array ends 64 - pad bytes later
    after = 64 - pad  # bytes of padding after a
    if pad % a.itemsize or n >= 2**31 or (after > room and (end - 1) // _PAGE != (end + after - 1) // _PAGE):
        return None
    return np.asarray(_Span(a, ptr - pad, n)), pad // a.itemsize


_COPY_POOL = None


def _copy_pool() -> ThreadPoolExecutor:
    global _COPY_POOL
    if _COPY_POOL is None:
        _COPY_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="mascot-copy")
    return _COPY_POOL


def _modal_pipelined(X0, params, starts, C, B, cfg, out):
    """Modal path without noise or traces: one fused call per chunk, dispatched ahead (JAX runs it
    asynchronously) so the next chunk's host-to-device copy overlaps this chunk's compute; with several
    devices each chunk is sharded over all of them."""
    dt, c, shards = cfg["dt"], cfg["consts"], cfg["shards"]
    window = 2

    static = dict(strategy=cfg["strategy"], max_rounds=cfg["max_rounds"], tile=cfg["tile"])
    modal = kc.modal_closed if cfg["closed"] else kc.modal_rollout
    # on a CPU a device-resident X0 larger than a chunk is read in place (its sliced copies landed in fresh
    # pages and cost as much as the rollout); the kernel is then compiled for X0's whole shape, once per
    # (B, C). Accelerators slice (a copy at memory speed) and keep one compiled shape per C.
    in_place = shards is None and isinstance(X0, jax.Array) and X0.dtype == dt and B > C and cfg["platform"] == "cpu"

    # a numpy X0 on the tiled CPU path: each chunk (the last one overlapping its predecessor, not padded) read in
    # place from the 64-byte boundary before it, instead of copied to aligned memory
    flat_ok = (
        shards is None
        and isinstance(X0, np.ndarray)
        and X0.dtype == dt
        and X0.flags.c_contiguous
        and cfg["tile"] is not None
    )

    def in_place_rows(lo):
        """Rows ``start:start + C`` read in place for the chunk at ``lo``: the last window ends at row B, overlapping
        its predecessor, instead of padding. Returns ``(start, hi, src, params of the window)``."""
        start, hi = min(lo, B - C), min(lo + C, B)
        p = {key: np.asarray(v if np.ndim(v) == 0 else v[start : start + C], dtype=dt) for key, v in params.items()}
        return start, hi, slice(lo - start, hi - start), p

    def dispatch(lo):
        if flat_ok:
            start, hi, src, p = in_place_rows(lo)
            view = _from_boundary(X0[start : start + C], room=(B - start - C) * X0[0].nbytes)
            if view is not None:
                X = jax.device_put(view[0], may_alias=True)
                res = modal(X, c["U"], c["S"], c["lam1"], c["lam2"], p, 0, view[1], shape=(C,) + X0.shape[1:], **static)
                return lo, hi, src, _fetch(res)
        if in_place:  # the kernel reads rows start:start + C of the device-resident X0 where they are (a sliced
            # copy per chunk cost more than the rollout on a CPU)
            start, hi, src, p = in_place_rows(lo)
            res = modal(X0, c["U"], c["S"], c["lam1"], c["lam2"], p, start, rows=C, **static)
            return lo, hi, src, _fetch(res)
        rows, hi, src = _layout(lo, B, C, shards)
        whole = isinstance(rows, slice) and rows == slice(0, X0.shape[0])
        if shards is not None and isinstance(X0, jax.Array):  # gathered and split on the devices
            X = shards.take(X0, rows, dt)
        else:
            X = X0 if whole else X0[rows]  # (a jax.Array's full slice would be a copy on the device)
        if isinstance(X, jax.Array):  # sliced on the device: no host round trip
            X = X.astype(dt)
        elif shards is not None:
            X = np.asarray(X, dt)
        elif X.dtype == dt:
            X = jax.device_put(_aligned(X), may_alias=True)
        else:
            X = jnp.asarray(X, dt)
        p = {key: np.asarray(v if np.ndim(v) == 0 else v[rows], dtype=dt) for key, v in params.items()}
        if shards is None:
            res = modal(X, c["U"], c["S"], c["lam1"], c["lam2"], p, **static)
        else:  # every device runs the one-device rollout on its C rows
            X, p = shards.put(X), {key: shards.put(v) for key, v in p.items()}
            rollout = shards.local(
                _rollout_local,
                (P("batch"),) + (P(),) * 4 + ({k: _spec(v) for k, v in p.items()},),
                P("batch"),
                closed=cfg["closed"],
                **static,
            )
            res = rollout(X, c["U"], c["S"], c["lam1"], c["lam2"], p)
        return lo, hi, src, _fetch(res)

    fetch = ("rounds", "b", "d", "status", "d0", "finite") + (("m1", "m2") if cfg["return_x"] else ())

    def _fetch(res):
        """Only what the caller gets comes back (the round counts per mode only for x_final: 8 of 28 bytes
        per trajectory otherwise), its device-to-host copies queued behind the kernel now, so on an
        accelerator they overlap the next chunk's compute."""
        res = {key: res[key] for key in fetch}
        for v in res.values():
            v.copy_to_host_async()
        return res

    def collect(lo, hi, src, res):
        host = jax.device_get(res)
        if not np.all(host["finite"]):  # a NaN/inf in X0 always reaches D(0)
            raise InputError(_NONFINITE)
        for key in ("rounds", "b", "d", "status", "d0"):
            out[key][lo:hi] = host[key][src]
        if cfg["return_x"]:  # x_final is rebuilt on the host in float64 from X0 and the round counts
            out["x"][lo:hi] = kc.modal_reconstruct(
                np.asarray(X0[lo:hi]), cfg["U"], cfg["lam1"], cfg["lam2"], host["m1"][src], host["m2"][src]
            )

    inflight = []
    for lo in starts:
        inflight.append(dispatch(lo))
        if len(inflight) >= window:
            collect(*inflight.pop(0))
    for item in inflight:
        collect(*item)


@functools.lru_cache(maxsize=64)
def _setup(w1_bytes, w2_bytes, n, method, dtype_name, noisy):
    """Modal set-up for one (W1, W2) pair, cached: basis, grouped eigenvalues and device constants.

    Returns ``None`` when the matrix path is to be used.
    """
    if method == "matrix":
        return None
    W1 = np.frombuffer(w1_bytes, dtype=np.float64).reshape(n, n)
    W2 = np.frombuffer(w2_bytes, dtype=np.float64).reshape(n, n)
    with _SETUP_LOCK, _single_thread_blas():
        basis = kc.common_eigenbasis(W1, W2)
    if basis is None:
        return None
    U, lam1, lam2 = basis
    dt = jnp.dtype(dtype_name)
    if noisy:
        S, glam1, glam2 = None, lam1, lam2
    else:  # group modes with equal (lambda1, lambda2): fewer energies to update per round
        pairs = np.round(np.stack([lam1, lam2], 1), 12)
        uniq, group = np.unique(pairs, axis=0, return_inverse=True)
        S = np.zeros((lam1.size, uniq.shape[0]))
        S[np.arange(lam1.size), group.ravel()] = 1.0
        glam1, glam2 = uniq[:, 0], uniq[:, 1]
    Ud = U
    if S is not None and n > kc.SMALL_N and n % kc.MODAL_PAD == 0:
        # one zero column so the N - 1 modes fill a multiple of kc.MODAL_PAD: a zero mode adds zero energy (its
        # row of S is zero), and the aligned width made the projection 25-30% faster at N = 32, 64, 128,
        # 256; padding other sizes further (e.g. 99 -> 112, 19 -> 32) measured slower, so it stops here
        Ud = np.concatenate([U, np.zeros((n, 1))], axis=1)
        S = np.concatenate([S, np.zeros((1, S.shape[1]))], axis=0)
    consts = dict(
        U=jnp.asarray(Ud, dt),
        S=None if S is None else jnp.asarray(S, dt),
        lam1=jnp.asarray(glam1, dt),
        lam2=jnp.asarray(glam2, dt),
    )
    return U, lam1, lam2, consts


def _tile(N, d, dt):
    """Rows per tile of the CPU modal projection: about 3 MiB of X0 (measured best at N = 32, 64, 128 and
    256 on a 2-core CPU with a 32 MiB L3: 2x faster than one product over a 16k-row chunk at N = 64)."""
    per = N * d * jnp.dtype(dt).itemsize
    return max(64, 1 << int(np.floor(np.log2(max(3 * 2**20 // per, 1)))))


def _chunk_size(B, N, d, dt, use_modal, chunk_size, platform="cpu", *, tiled=False):
    """Trajectories per kernel call: keep a chunk's working set near the CPU's caches, or large on a GPU.

    Measured on a 2-core CPU: the matrix path at N = 64 ran 2x slower per trajectory at B = 1e5 than
    at B = 4096 (the (N, d, B) state falls out of cache), and the modal projection likewise at
    B > 16384. Measured on an H200 (benchmarks/results_device_h200*.md): those CPU-sized chunks left the
    GPU idle between kernel calls -- N = 64 modal 6.7M trajectories/s with 16k-row chunks, 34M with 2^17
    rows, 62-66M with 2^20 rows; the matrix path 0.29M with 1k-row chunks, 6.4M with 2^17 rows, 6.9M with
    2^20 -- so accelerators get up to 1.5 GiB of X0 per modal chunk (2^20 rows at N = 64, d = 6) and
    256 MiB per matrix chunk (whose round state is several times X0). The tiled CPU modal projection
    (``tiled``) keeps its working set in cache whatever the chunk, so it gets 128 MiB chunks (fewer calls:
    measured 10-20% faster than 16k-row chunks at N = 64, B = 1e5 on a 2-core CPU).
    """
    if chunk_size is not None:
        if int(chunk_size) != chunk_size or chunk_size < 1:
            raise InputError(f"chunk_size must be a positive integer; got {chunk_size!r}")
        return int(min(chunk_size, B))
    # bytes of X0 per chunk, tuned on a 2-core Xeon: the matrix path keeps (N, d, C) state plus two
    # temporaries alive each round; the modal path only streams X0 once through the projection
    if platform == "cpu":
        budget = (128 if tiled else 32 if use_modal else 2) * 2**20
    else:
        budget = (1536 if use_modal else 256) * 2**20
    per = N * d * jnp.dtype(dt).itemsize
    c_max = max(4096, 1 << int(np.floor(np.log2(max(budget // per, 1)))))
    n_chunks = -(-B // c_max)
    return -(-B // n_chunks)  # equal chunks: at most n_chunks - 1 padded rows in all


def _lanes_local(d0, params, keys, *, max_rounds):
    """:func:`kc.make_lanes` with its "all D(0) finite" flag as a (1,) array (one per device when sharded)."""
    lanes, finite = kc.make_lanes(d0, params, keys, max_rounds=max_rounds)
    return lanes, finite[None]


def _rollout_local(X0, U, S, lam1, lam2, params, *, strategy, max_rounds, tile, closed):
    """:func:`kc.modal_closed` (``closed``) or :func:`kc.modal_rollout` with its "all D(0) finite" flag as a
    (1,) array (one per device)."""
    modal = kc.modal_closed if closed else kc.modal_rollout
    res = modal(X0, U, S, lam1, lam2, params, strategy=strategy, max_rounds=max_rounds, tile=tile)
    return dict(res, finite=res["finite"][None])


def _gather_local(carry, idx, *, axes):
    return kc.gather(carry, axes, idx)


def _interleave(steps, width):
    """Run the generators ``steps`` to their ends, ``width`` at a time in turn: each yields after dispatching work
    to the device and before waiting for it, so one chunk's host work (harvesting, compaction) overlaps another's
    kernels."""
    queue, live = list(steps), []
    while queue or live:
        while queue and len(live) < width:
            live.append(queue.pop(0))
        for g in list(live):
            try:
                next(g)
            except StopIteration:
                live.remove(g)


def _chunk_steps(X0, params, keys, cfg):
    """Run Algorithm 1 on one chunk of trajectories (with several devices: ``cfg["shards"]``, each device
    running the one-device kernels on its rows, compacting its own lanes); a generator that yields before each
    wait for the device (see :func:`_interleave`) and returns host arrays."""
    dt, noisy, trace, max_rounds = cfg["dt"], cfg["noisy"], cfg["trace"], cfg["max_rounds"]
    use_modal, return_x, consts, shards = cfg["use_modal"], cfg["return_x"], cfg["consts"], cfg["shards"]
    B, N, d = X0.shape
    nd = 1 if shards is None else shards.n
    j = lambda a: jnp.asarray(a, dtype=dt)  # noqa: E731
    if isinstance(X0, jax.Array):
        X0j = X0.astype(dt)
    elif shards is not None:
        X0j = np.asarray(X0, dt)
    else:
        X0j = jax.device_put(X0, may_alias=True) if X0.dtype == dt else j(X0)
    p = {k: np.asarray(v, dtype=dt) for k, v in params.items()}
    lane_keys = keys if noisy else np.zeros(B, np.int32)
    carry_axes = ((0, 0) if noisy else (0, 0, 0)) if use_modal else (2, 1)
    carry_specs = tuple(P(*([None] * ax + ["batch"])) for ax in carry_axes)

    def kernel(fn, in_specs, out_specs, **static):
        """``fn`` on this chunk: directly on one device, else on every device's shard at once."""
        return partial(fn, **static) if shards is None else shards.local(fn, in_specs, out_specs, **static)

    if shards is not None:  # split this chunk's batch axis over the devices
        X0j, lane_keys = shards.put(X0j), shards.put(lane_keys)
        p = {k: shards.put(v) for k, v in p.items()}
    if use_modal:
        carry, d0 = kernel(
            kc.modal_init, (P("batch"), P(), P()), (carry_specs, P("batch")), noisy=noisy, tile=cfg["tile"]
        )(X0j, consts["U"], consts["S"])
    else:
        carry, d0 = kernel(kc.matrix_init, (P("batch"),), (carry_specs, P("batch")))(X0j)
    p_specs = {k: _spec(v) for k, v in p.items()}
    lane_specs = dict(
        c1=p_specs["c1"],
        c2=p_specs["c2"],
        eta=p_specs["eta"],
        eps=p_specs["eps"],
        **{k: P("batch") for k in ("b", "rounds", "keys", "d", "status", "active")},
    )
    lanes, finite = kernel(
        kc.make_lanes if shards is None else _lanes_local,
        (P("batch"), p_specs, P("batch")),
        (lane_specs, P("batch")),
        max_rounds=max_rounds,
    )(d0, p, lane_keys)
    yield
    if not bool(np.all(np.asarray(finite))):  # a NaN/inf in X0 always reaches D(0)
        raise InputError(_NONFINITE)
    if trace:  # traces are indexed by round: run in one segment, no compaction
        traces = dict(
            d=jnp.full((B, max_rounds + 1), jnp.nan, dt).at[:, 0].set(d0),
            b=jnp.full((B, max_rounds + 1), jnp.nan, dt).at[:, 0].set(lanes["b"]),
            s=jnp.zeros((B, max_rounds), jnp.int32),
        )
        if shards is not None:
            traces = shards.put_tree(traces, dict(d=0, b=0, s=0))
    else:
        traces = {}
    trace_specs = {k: P("batch") for k in traces}
    static = dict(strategy=cfg["strategy"], max_rounds=max_rounds, trace=trace, noisy=noisy)
    seg_specs = ((carry_specs, lane_specs, trace_specs) + (P(),) * 5, (carry_specs, lane_specs, trace_specs))
    if use_modal:
        segment, mats = kernel(kc.modal_segment, *seg_specs, n_agents=N, **static), (consts["lam1"], consts["lam2"])
    else:
        segment, mats = kernel(kc.matrix_segment, *seg_specs, **static), (consts["W1"], consts["W2"])
    gather = kernel(_gather_local, (carry_specs, P("batch")), carry_specs, axes=carry_axes)
    gather_lanes = kernel(kc.gather_lanes, (lane_specs, P("batch")), lane_specs)

    out = dict(
        rounds=np.zeros(B, np.int32),
        b=np.zeros(B, dt),
        d=np.zeros(B, dt),
        status=np.zeros(B, np.int32),
        d0=np.asarray(d0),
    )
    if return_x:
        out["x"] = np.zeros((B, N, d), dt)
    lane_ids = np.arange(B)

    def harvest(carry, lanes, finished):
        ids = lane_ids[finished]
        out["rounds"][ids] = np.asarray(lanes["rounds"])[finished]
        out["b"][ids] = np.asarray(lanes["b"])[finished]
        out["d"][ids] = np.asarray(lanes["d"])[finished]
        out["status"][ids] = np.asarray(lanes["status"])[finished]
        if return_x:
            out["x"][ids] = reconstruct(carry, finished)

    def reconstruct(carry, finished):
        if not use_modal:
            Xc, m = np.asarray(carry[0])[:, :, finished], np.asarray(carry[1])[:, finished]
            return np.transpose(Xc + m[None], (2, 0, 1))
        Um, lam1, lam2 = cfg["U"], cfg["lam1"], cfg["lam2"]
        if noisy:
            Y, mean = (np.asarray(c, dtype=np.float64)[finished] for c in carry)
        else:  # signed eigenvalue powers applied to the initial modal coordinates
            return kc.modal_reconstruct(
                np.asarray(X0)[lane_ids[finished]],
                Um,
                lam1,
                lam2,
                np.asarray(carry[1])[finished],
                np.asarray(carry[2])[finished],
            )
        return mean[:, None, :] + np.einsum("nm,bmd->bnd", Um, Y)

    valid = np.ones(B, bool)
    offset = 0
    harvest(carry, lanes, valid & ~np.asarray(lanes["active"]))
    seg = cfg["seg"]
    while offset < max_rounds:
        n_steps = min(seg, max_rounds - offset)
        carry, lanes, traces = segment(carry, lanes, traces, *mats, cfg["sigma"], jnp.int32(n_steps), jnp.int32(offset))
        yield
        offset += n_steps
        active = np.asarray(lanes["active"])
        finished = valid & ~active
        harvest(carry, lanes, finished)
        valid = valid & active
        n_active = int(valid.sum())
        if n_active == 0:
            break
        size = active.shape[0] // nd  # lanes per device; each device compacts its own
        blocks = valid.reshape(nd, size)
        new_size = max(kc.bucket_size(int(v.sum()), size) for v in blocks)
        if new_size < size and not trace:  # retire finished trajectories
            idx, pad = [], []
            for v in blocks:
                keep = np.nonzero(v)[0]
                idx.append(np.concatenate([keep, np.full(new_size - keep.size, keep[0] if keep.size else 0)]))
                pad.append(np.arange(new_size) >= keep.size)
            idx, pad = np.concatenate(idx), np.concatenate(pad)
            idx_j = jnp.asarray(idx) if shards is None else shards.put(idx)
            carry = gather(carry, idx_j)
            lanes = gather_lanes(lanes, idx_j)
            lanes["active"] = lanes["active"] & (jnp.asarray(~pad) if shards is None else shards.put(~pad))
            lane_ids = lane_ids[idx + np.repeat(np.arange(nd) * size, new_size)]
            valid = ~pad
        # no trajectory outlives max_rounds: the kernel sets status 2 and deactivates it there
    if trace:
        out["d_trace"] = np.asarray(traces["d"])
        out["b_trace"] = np.asarray(traces["b"])
        out["sigma_trace"] = np.asarray(traces["s"])
    return out
