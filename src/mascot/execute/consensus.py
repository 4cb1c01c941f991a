"""The host driver of the consensus kernels: validation, set-up caches, chunking, devices and pipelining.

:func:`simulate_consensus` runs Algorithm 1 of the consensus paper on a batch of trajectories by calling the
pure JAX kernels of :mod:`mascot.kernels.consensus` chunk by chunk: chunks of equal size (one compiled
shape), round-robin over the local devices (one host thread per device), the modal path without noise or
traces dispatched one chunk ahead so the next chunk's host-to-device copy overlaps this chunk's compute,
and the results gathered into numpy arrays. Results do not depend on the chunk size or the device count.
"""

from __future__ import annotations

import functools
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from threadpoolctl import ThreadpoolController

from mascot.kernels import consensus as kc
from mascot.kernels.consensus import ConsensusResult
from mascot.kernels.precision import float64, resolve_dtype, x64_enabled
from mascot.theory.consensus import validate_doubly_stochastic

__all__ = ["simulate_consensus", "ConsensusResult"]

_BLAS = None


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


def _per_trajectory(name, value, B, *, positive=False, nonnegative=False):
    """Validate a scalar or ``(B,)`` parameter; scalars stay 0-d (broadcast inside the kernel)."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim != 0 and arr.shape != (B,):
        raise ValueError(f"{name} must be a scalar or have shape ({B},) (one per trajectory); got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    if positive and not np.all(arr > 0):
        raise ValueError(f"{name} must be > 0; got min {arr.min():g}")
    if nonnegative and not np.all(arr >= 0):
        raise ValueError(f"{name} must be >= 0; got min {arr.min():g}")
    return arr


def _batch_keys(key, B):
    key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    single = key.shape == () if typed else key.shape == (2,)
    if single:
        return jax.random.split(key, B)
    if key.shape[0] != B:
        raise ValueError(f"key must be one PRNG key or a batch of {B} keys; got shape {key.shape}")
    return key


# ----------------------------------------------------------------------------- public entry point
def simulate_consensus(X0, W1, W2, c1, c2, eta, eps, b0, strategy: str = "adaptive", max_rounds: int = 64,
                       noise: float = 0.0, key=None, trace: bool = False, *, dtype=None,
                       method: str = "auto", return_x: bool = False,
                       segment_rounds: int | None = None, chunk_size: int | None = None) -> ConsensusResult:
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
      strategy: ``"adaptive"`` (Algorithm 1), ``"mode1"`` or ``"mode2"`` (one topology throughout).
      max_rounds: the most rounds any trajectory runs (status 2 when exceeded).
      noise: standard deviation of i.i.d. Gaussian perturbations added to every belief entry after each
        round (the LLM stochasticity of Remark 3). Needs ``key``.
      key: one PRNG key (split into one key per trajectory) or a batch of B keys.
      trace: also return per-round ``D``, ``b`` and ``sigma``.
      dtype: float32 or float64 (default: float64 if ``jax_enable_x64`` is on, else float32).
      method: ``"auto"`` (modal when W1, W2 are symmetric and commute, else matrix), ``"modal"``,
        ``"matrix"``.
      return_x: also return the final beliefs (``x_final``).
      segment_rounds: rounds between compactions (default: 4 for the matrix path; the modal path does
        not compact since a round costs O(N)).
      chunk_size: trajectories per kernel call (default: sized so a chunk's X0 fits in a few MiB; the
        last chunk is padded so every chunk reuses one compiled shape). Results do not depend on it.

    Returns:
      :class:`ConsensusResult` of numpy arrays.
    """
    if strategy not in kc.STRATEGIES:
        raise ValueError(f"strategy must be one of {kc.STRATEGIES}; got {strategy!r}")
    if method not in ("auto", "modal", "matrix"):
        raise ValueError(f"method must be 'auto', 'modal' or 'matrix'; got {method!r}")
    if isinstance(max_rounds, bool) or int(max_rounds) != max_rounds or max_rounds < 0:
        raise ValueError(f"max_rounds must be an integer >= 0; got {max_rounds!r}")
    max_rounds = int(max_rounds)
    dt = resolve_dtype(dtype)
    if not isinstance(X0, jax.Array):  # JAX arrays stay on their device (no host round trip)
        X0 = np.asarray(X0)
    if not jnp.issubdtype(X0.dtype, jnp.floating):
        X0 = X0.astype(np.float64)
    if X0.ndim == 2:
        X0 = X0[None]
    if X0.ndim != 3 or X0.shape[0] < 1 or X0.shape[1] < 1 or X0.shape[2] < 1:
        raise ValueError(f"X0 must have shape (B, N, d) with B, N, d >= 1; got shape {X0.shape}")
    B, N, d = X0.shape
    W1 = validate_doubly_stochastic(W1, "W1")
    W2 = validate_doubly_stochastic(W2, "W2")
    for name, W in (("W1", W1), ("W2", W2)):
        if W.shape != (N, N):
            raise ValueError(f"{name} must have shape ({N}, {N}) to match X0's N = {N}; got {W.shape}")
    c1a = _per_trajectory("c1", c1, B, positive=True)
    c2a = _per_trajectory("c2", c2, B, positive=True)
    eps_a = _per_trajectory("eps", eps, B, positive=True)
    eta_a = _per_trajectory("eta", eta, B, positive=True)
    b0a = _per_trajectory("b0", b0, B, nonnegative=True)
    if strategy == "adaptive" and not np.all(eta_a > eps_a):
        raise ValueError("eta must be > eps for strategy='adaptive' (with eta <= eps mode 2 is never "
                         "selected; use strategy='mode1')")
    noise = float(noise)
    if not (math.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be a finite standard deviation >= 0; got {noise}")
    noisy = noise > 0
    if noisy and key is None:
        raise ValueError("key is required when noise > 0 (e.g. key=jax.random.key(0))")

    setup = _setup(W1.tobytes(), W2.tobytes(), N, method, jnp.dtype(dt).name, noisy)
    if method == "modal" and setup is None:
        raise ValueError("method='modal' needs W1 and W2 symmetric and commuting; use method='matrix'")
    use_modal = setup is not None
    if use_modal:
        U, lam1, lam2, consts = setup
    else:
        U = lam1 = lam2 = None
        consts = dict(W1=jnp.asarray(W1, dt), W2=jnp.asarray(W2, dt))
    keys = _batch_keys(key, B) if noisy else None
    platform = next(iter(X0.devices())).platform if isinstance(X0, jax.Array) else jax.default_backend()
    C = _chunk_size(B, N, d, dt, use_modal, chunk_size, platform)
    seg = max_rounds if trace else max(1, int(segment_rounds or (max_rounds if use_modal else 4)))
    cfg = dict(strategy=strategy, max_rounds=max_rounds, trace=trace, noisy=noisy, return_x=return_x,
               sigma=jnp.asarray(noise, dt), seg=seg, dt=dt, use_modal=use_modal, consts=consts,
               U=U, lam1=lam1, lam2=lam2)

    out = dict(rounds=np.zeros(B, np.int32), b=np.zeros(B, dt), d=np.zeros(B, dt), status=np.zeros(B, np.int32),
               d0=np.zeros(B, dt))
    if return_x:
        out["x"] = np.zeros((B, N, d), dt)
    if trace:
        out["d_trace"] = np.zeros((B, max_rounds + 1), dt)
        out["b_trace"] = np.zeros((B, max_rounds + 1), dt)
        out["sigma_trace"] = np.zeros((B, max_rounds), np.int32)
    params = dict(c1=c1a, c2=c2a, eta=eta_a, eps=eps_a, b0=np.broadcast_to(b0a, (B,)))

    def one_chunk(lo, device):
        hi = min(lo + C, B)
        rows = slice(lo, hi)
        if B > C and hi - lo < C:  # pad the last chunk so every chunk has one compiled shape
            rows = np.concatenate([np.arange(lo, hi), np.full(C - (hi - lo), lo)])
        take = lambda a: a if np.ndim(a) == 0 else a[rows]  # noqa: E731
        chunk_keys = None if keys is None else keys[rows if isinstance(rows, slice) else jnp.asarray(rows)]
        res = _run_chunk(X0[rows], {k: take(v) for k, v in params.items()}, chunk_keys, cfg, device)
        for k, v in res.items():
            out[k][lo:hi] = v[: hi - lo]

    # Chunks are independent: with several local devices each takes every len(devices)-th chunk, one
    # host thread per device (JAX releases the GIL while a device computes). The chunking itself does
    # not depend on the device count, so results are identical with 1 or many devices.
    starts = list(range(0, B, C))
    devs = jax.local_devices()
    if use_modal and not noisy and not trace:
        _modal_pipelined(X0, params, starts, C, B, cfg, devs, out)
    elif len(devs) > 1 and len(starts) > 1:
        x64 = x64_enabled()  # thread-local: the device threads run under the caller's setting

        def chunk_in_thread(lo, device):
            with float64(x64):
                one_chunk(lo, device)

        with ThreadPoolExecutor(max_workers=min(len(devs), len(starts))) as pool:
            for f in [pool.submit(chunk_in_thread, lo, devs[k % len(devs)]) for k, lo in enumerate(starts)]:
                f.result()
    else:
        for lo in starts:
            one_chunk(lo, None)

    spent = np.asarray(b0a, dtype=dt) - out["b"]
    result = ConsensusResult(rounds=out["rounds"], spent=spent, d_final=out["d"], status=out["status"],
                             d0=out["d0"], method="modal" if use_modal else "matrix")
    if trace:
        result = result._replace(d_trace=out["d_trace"], b_trace=out["b_trace"], sigma_trace=out["sigma_trace"])
    if return_x:
        result = result._replace(x_final=out["x"])
    return result


def _aligned(a: np.ndarray) -> np.ndarray:
    """``a`` itself if XLA can alias it (64-byte aligned, C-contiguous), else a copy that can be, made
    by two threads: XLA's own copy of an unaligned host array runs on one (3.4 vs 2.2 ms per 15 MB)."""
    if a.flags.c_contiguous and a.ctypes.data % 64 == 0:
        return a
    buf = np.empty(a.nbytes + 64, np.uint8)
    off = -buf.ctypes.data % 64
    out = buf[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    if a.nbytes < 1 << 20 or a.shape[0] < 2:
        np.copyto(out, a)
    else:
        k = a.shape[0] // 2
        list(_copy_pool().map(lambda sl: np.copyto(out[sl], a[sl]), (slice(0, k), slice(k, None))))
    return out


_COPY_POOL = None


def _copy_pool() -> ThreadPoolExecutor:
    global _COPY_POOL
    if _COPY_POOL is None:
        _COPY_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="mascot-copy")
    return _COPY_POOL


def _modal_pipelined(X0, params, starts, C, B, cfg, devs, out):
    """Modal path without noise or traces: one fused call per chunk, dispatched ahead (JAX runs it
    asynchronously) so the next chunk's host-to-device copy overlaps this chunk's compute; chunks go
    round-robin to the local devices."""
    dt, consts = cfg["dt"], cfg["consts"]
    window = max(2, len(devs))
    per_dev = {}

    def dispatch(k, lo):
        hi = min(lo + C, B)
        rows = slice(lo, hi)
        if B > C and hi - lo < C:  # pad the last chunk so every chunk has one compiled shape
            rows = np.concatenate([np.arange(lo, hi), np.full(C - (hi - lo), lo)])
        X = X0[rows]
        if isinstance(X, jax.Array):
            X = X.astype(dt)
        elif X.dtype == dt:
            X = jax.device_put(_aligned(X) if len(devs) == 1 else X, may_alias=True)
        else:
            X = jnp.asarray(X, dt)
        p = {key: np.asarray(v if np.ndim(v) == 0 else v[rows], dtype=dt) for key, v in params.items()}
        c = consts
        if len(devs) > 1:
            dev = devs[k % len(devs)]
            if dev not in per_dev:
                per_dev[dev] = jax.device_put(consts, dev)
            c, X = per_dev[dev], jax.device_put(X, dev)
        res = kc.modal_rollout(X, c["U"], c["S"], c["lam1"], c["lam2"], p, strategy=cfg["strategy"],
                           max_rounds=cfg["max_rounds"])
        return lo, hi, res

    def collect(lo, hi, res):
        host = jax.device_get(res)
        if not bool(host["finite"]):  # a NaN/inf in X0 always reaches D(0)
            raise ValueError("X0 contains NaN or inf")
        n = hi - lo
        for key in ("rounds", "b", "d", "status", "d0"):
            out[key][lo:hi] = host[key][:n]
        if cfg["return_x"]:
            out["x"][lo:hi] = kc.modal_reconstruct(np.asarray(X0[lo:hi]), cfg["U"], cfg["lam1"], cfg["lam2"],
                                                 host["m1"][:n], host["m2"][:n])

    inflight = []
    for k, lo in enumerate(starts):
        inflight.append(dispatch(k, lo))
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
    consts = dict(U=jnp.asarray(Ud, dt), S=None if S is None else jnp.asarray(S, dt),
                  lam1=jnp.asarray(glam1, dt), lam2=jnp.asarray(glam2, dt))
    return U, lam1, lam2, consts


def _chunk_size(B, N, d, dt, use_modal, chunk_size, platform="cpu"):
    """Trajectories per kernel call: keep a chunk's working set near the CPU's caches, or large on a GPU.

    Measured on a 2-core CPU: the matrix path at N = 64 ran 2x slower per trajectory at B = 1e5 than
    at B = 4096 (the (N, d, B) state falls out of cache), and the modal projection likewise at
    B > 16384. Measured on an H200 (benchmarks/results_device_h200*.md): those CPU-sized chunks left the
    GPU idle between kernel calls -- N = 64 modal 6.7M trajectories/s with 16k-row chunks, 34M with 2^17
    rows, 62-66M with 2^20 rows; the matrix path 0.29M with 1k-row chunks, 6.4M with 2^17 rows, 6.9M with
    2^20 -- so accelerators get up to 1.5 GiB of X0 per modal chunk (2^20 rows at N = 64, d = 6) and
    256 MiB per matrix chunk (whose round state is several times X0).
    """
    if chunk_size is not None:
        if int(chunk_size) != chunk_size or chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive integer; got {chunk_size!r}")
        return int(min(chunk_size, B))
    # bytes of X0 per chunk, tuned on a 2-core Xeon: the matrix path keeps (N, d, C) state plus two
    # temporaries alive each round; the modal path only streams X0 once through the projection
    if platform == "cpu":
        budget = (32 if use_modal else 2) * 2**20
    else:
        budget = (1536 if use_modal else 256) * 2**20
    per = N * d * jnp.dtype(dt).itemsize
    c_max = max(4096, 1 << int(np.floor(np.log2(max(budget // per, 1)))))
    n_chunks = -(-B // c_max)
    return -(-B // n_chunks)  # equal chunks: at most n_chunks - 1 padded rows in all


def _run_chunk(X0, params, keys, cfg, device=None):
    """Run Algorithm 1 on one chunk of trajectories (on ``device``, default: JAX's default device);
    returns host arrays for that chunk."""
    dt, noisy, trace, max_rounds = cfg["dt"], cfg["noisy"], cfg["trace"], cfg["max_rounds"]
    use_modal, return_x, consts = cfg["use_modal"], cfg["return_x"], cfg["consts"]
    B, N, d = X0.shape
    j = lambda a: jnp.asarray(a, dtype=dt)  # noqa: E731
    if isinstance(X0, jax.Array):
        X0j = X0.astype(dt)
    else:
        X0j = jax.device_put(X0, may_alias=True) if X0.dtype == dt else j(X0)
    if device is not None:  # commit this chunk's inputs to its device; the kernels follow them
        X0j = jax.device_put(X0j, device)
        consts = jax.device_put(consts, device)
        keys = None if keys is None else jax.device_put(keys, device)
    if use_modal:
        carry, d0 = kc.modal_init(X0j, consts["U"], consts["S"], noisy=noisy)
        carry_axes = (0, 0) if noisy else (0, 0, 0)
    else:
        carry, d0 = kc.matrix_init(X0j)
        carry_axes = (2, 1)
    p = {k: np.asarray(v, dtype=dt) for k, v in params.items()}
    lanes, finite = kc.make_lanes(d0, p, keys if noisy else jnp.zeros(B, jnp.int32, device=device),
                                max_rounds=max_rounds)
    if not bool(finite):  # a NaN/inf in X0 always reaches D(0)
        raise ValueError("X0 contains NaN or inf")
    if trace:  # traces are indexed by round: run in one segment, no compaction
        traces = dict(d=jnp.full((B, max_rounds + 1), jnp.nan, dt).at[:, 0].set(d0),
                      b=jnp.full((B, max_rounds + 1), jnp.nan, dt).at[:, 0].set(lanes["b"]),
                      s=jnp.zeros((B, max_rounds), jnp.int32))
    else:
        traces = {}
    static = dict(strategy=cfg["strategy"], max_rounds=max_rounds, trace=trace, noisy=noisy)
    if use_modal:
        run = partial(kc.modal_segment, lam1=consts["lam1"], lam2=consts["lam2"], n_agents=N, **static)
    else:
        run = partial(kc.matrix_segment, W1=consts["W1"], W2=consts["W2"], **static)

    out = dict(rounds=np.zeros(B, np.int32), b=np.zeros(B, dt), d=np.zeros(B, dt), status=np.zeros(B, np.int32),
               d0=np.asarray(d0))
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
            return kc.modal_reconstruct(np.asarray(X0)[lane_ids[finished]], Um, lam1, lam2,
                                      np.asarray(carry[1])[finished], np.asarray(carry[2])[finished])
        return mean[:, None, :] + np.einsum("nm,bmd->bnd", Um, Y)

    valid = np.ones(B, bool)
    offset = 0
    harvest(carry, lanes, valid & ~np.asarray(lanes["active"]))
    seg = cfg["seg"]
    while offset < max_rounds:
        n_steps = min(seg, max_rounds - offset)
        carry, lanes, traces = run(carry, lanes, traces, sigma=cfg["sigma"], n_steps=jnp.int32(n_steps),
                                   offset=jnp.int32(offset))
        offset += n_steps
        active = np.asarray(lanes["active"])
        finished = valid & ~active
        harvest(carry, lanes, finished)
        valid = valid & active
        n_active = int(valid.sum())
        if n_active == 0:
            break
        size = active.shape[0]
        new_size = kc.bucket_size(n_active, size)
        if new_size < size and not trace:  # retire finished trajectories
            keep = np.nonzero(valid)[0]
            idx = np.concatenate([keep, np.full(new_size - keep.size, keep[0])])
            carry = kc.gather(carry, carry_axes, jnp.asarray(idx))
            lanes = kc.gather_lanes(lanes, jnp.asarray(idx))
            pad = np.arange(new_size) >= keep.size
            lanes["active"] = lanes["active"] & jnp.asarray(~pad)
            lane_ids = lane_ids[idx]
            valid = ~pad
        # no trajectory outlives max_rounds: the kernel sets status 2 and deactivates it there
    if trace:
        out["d_trace"] = np.asarray(traces["d"])
        out["b_trace"] = np.asarray(traces["b"])
        out["sigma_trace"] = np.asarray(traces["s"])
    return out
