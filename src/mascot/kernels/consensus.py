"""Algorithm 1 of the consensus paper (norm-threshold adaptive consensus) as batched JAX kernels.

Two exact execution paths share one round policy:

* **modal** (``W1``, ``W2`` symmetric and commuting, e.g. any pair of symmetric circulants such as
  complete K_N + ring C_N): both matrices are diagonalised once on ``1-perp`` by an orthonormal basis
  ``U`` (``N x (N-1)``). With ``Y = U^T X0`` the disagreement after ``m1`` mode-1 and ``m2`` mode-2
  rounds is ``D^2 = (1/N) sum_j lambda1_j^(2 m1) lambda2_j^(2 m2) ||Y_j||^2``, so a round costs O(N)
  per trajectory (per-mode energies ``e_j = ||Y_j||^2`` times squared eigenvalues). With noise the
  modal coordinates ``Y`` themselves evolve (O(N d) per round): isotropic Gaussian noise has the same
  law in any orthonormal basis. The final beliefs are reconstructed only when asked for.
* **matrix** (any doubly stochastic pair): the centred beliefs ``P X`` (``P W = W P`` for doubly
  stochastic ``W``) are laid out as one ``(N, d*B)`` matrix so a round is one large matrix product
  (``W1``, ``W2`` or the stacked ``[W1; W2]`` when lanes are split between modes); finished
  trajectories are retired between segments of a few rounds (compaction to power-of-two buckets, so
  at most ``log2 B`` shapes are compiled).

Both paths run the batch in cache-sized chunks (equal sizes, one compiled shape per call). Without
noise or traces the modal path compiles a chunk's projection, energies and round loop into one call
and dispatches the next chunk before collecting the previous one (``_modal_pipelined``); on a CPU the
projection runs in cache-sized tiles inside that call (``tile`` of :func:`modal_init`). With several devices
the driver runs these kernels under ``jax.shard_map``, each device on its own rows.

Each round (Algorithm 1): stop if ``D <= eps``; otherwise pick ``sigma = 1`` if ``D > eta`` else 2
(``strategy`` can fix it), return BudgetFail if ``b < c_sigma`` (before the round), else
``X <- W_sigma X (+ noise)``, ``b <- b - c_sigma``. A trajectory still above ``eps`` after
``max_rounds`` rounds gets status 2.
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mascot import stable
from mascot.kernels import switching
from mascot.status import Status

__all__ = [
    "ConsensusResult",
    "common_eigenbasis",
    "noise_draws",
    "STRATEGIES",
    "modal_init",
    "matrix_init",
    "make_lanes",
    "modal_segment",
    "matrix_segment",
    "modal_rollout",
    "modal_closed",
    "modal_closed_form",
    "modal_reconstruct",
    "gather",
    "gather_lanes",
    "bucket_size",
    "SMALL_N",
    "MODAL_PAD",
    "MIN_BUCKET",
]

STRATEGIES = switching.STRATEGIES
# Full float32 (or float64) matrix products everywhere: XLA's default on GPUs multiplies float32 in TF32
# (10-bit mantissa), which moved D(0) by 6e-5 relative and made results depend on the chunk shape (measured
# on an H200); CPUs ignore the setting, so CPU results are unchanged.
_HIGHEST = jax.lax.Precision.HIGHEST


def _mm(a, b):
    return jnp.matmul(a, b, precision=_HIGHEST)


MIN_BUCKET = 512
SMALL_N = 12
KRON_MAX_D = 16  # widest beliefs the small-N kron projection takes
MODAL_PAD = 16  # N - 1 modal columns become N when N is a multiple of this (no-noise modal path)


class ConsensusResult(NamedTuple):
    """Per-trajectory outcome of Algorithm 1 (all arrays have leading dimension B).

    ``status``: 0 consensus (``D <= eps``), 1 BudgetFail (``b < c_sigma`` before a round),
    2 max_rounds. With ``trace=True``: ``d_trace`` and ``b_trace`` are ``(B, max_rounds + 1)`` with
    ``D(k)``, ``b_k`` for ``k <= rounds`` and NaN after; ``sigma_trace`` is ``(B, max_rounds)`` with the
    mode of each executed round and 0 after. ``x_final`` is ``(B, N, d)`` when ``return_x=True``.
    ``d0`` is the initial disagreement ``D(X0)`` in the working dtype.
    """

    rounds: np.ndarray
    tokens: np.ndarray  # tokens spent, b0 - b_final
    d_final: np.ndarray
    status: np.ndarray
    d_trace: np.ndarray | None = None
    b_trace: np.ndarray | None = None
    sigma_trace: np.ndarray | None = None
    x_final: np.ndarray | None = None
    d0: np.ndarray | None = None
    method: str = ""

    @property
    def spent(self):
        """The old name of :attr:`tokens` (kept for code written before 0.2; one name per quantity: ``tokens``,
        as in the sweep tables and :func:`mascot.rollout`)."""
        return self.tokens


# ----------------------------------------------------------------------------- set-up helpers
def common_eigenbasis(W1, W2, tol: float = 1e-9):
    """Orthonormal basis of ``1-perp`` diagonalising both symmetric ``W1`` and ``W2``, or ``None``.

    Returns ``(U, lam1, lam2)`` with ``U`` of shape ``(N, N-1)``, ``U^T 1 = 0`` and
    ``U^T W_i U = diag(lam_i)``. ``None`` if either matrix is not symmetric or they do not commute
    (then no common orthonormal eigenbasis exists).

    The basis is a function of the pair alone, never of the linear-algebra library: inside an eigenspace
    shared by both matrices any rotation would diagonalise them, and LAPACK's choice differed between
    OpenBLAS's kernels for one processor and another's. Noise is drawn in these coordinates, so a noisy run
    depended on it. Two symmetric circulants (complete K_N and ring C_N among them) get the real Fourier
    basis, written down (cosines and sines of ``2 pi k j / N``, :func:`circulant_eigenbasis`); any other
    pair gets LAPACK's eigenvectors, each shared eigenspace then re-expressed in a canonical basis (the
    orthonormalised projection of fixed vectors onto it, which does not depend on the basis it came in).
    """
    W1 = np.asarray(W1, dtype=np.float64)
    W2 = np.asarray(W2, dtype=np.float64)
    n = W1.shape[0]
    if n < 2:
        return None
    if not (np.allclose(W1, W1.T, rtol=0, atol=1e-12) and np.allclose(W2, W2.T, rtol=0, atol=1e-12)):
        return None
    if np.max(np.abs(W1 @ W2 - W2 @ W1)) > 1e-10:
        return None
    if _symmetric_circulant(W1) and _symmetric_circulant(W2):
        U, (lam1, lam2) = circulant_eigenbasis(n, W1[0], W2[0])
        return U, lam1, lam2
    # Householder reflection mapping e_0 to 1/sqrt(n): its other columns span 1-perp.
    v = np.full(n, 1.0 / math.sqrt(n))
    v[0] -= 1.0
    H = np.eye(n) - 2.0 * np.outer(v, v) / (v @ v)
    Q = H[:, 1:]
    A1, A2 = Q.T @ W1 @ Q, Q.T @ W2 @ Q
    lam1, V = np.linalg.eigh((A1 + A1.T) / 2)
    for start, stop in _clusters(lam1, tol):  # resolve clusters of equal W1-eigenvalues with W2
        if stop - start > 1:
            Vc = V[:, start:stop]
            _, R = np.linalg.eigh(Vc.T @ A2 @ Vc)
            V[:, start:stop] = Vc @ R
    D1, D2 = V.T @ A1 @ V, V.T @ A2 @ V
    if max(np.max(np.abs(D1 - np.diag(np.diag(D1)))), np.max(np.abs(D2 - np.diag(np.diag(D2))))) > 1e-8:
        return None
    lam1, lam2 = np.diag(D1).copy(), np.diag(D2).copy()
    order = np.lexsort((lam2, lam1))  # joint eigenspaces as contiguous column blocks
    V, lam1, lam2 = V[:, order], lam1[order], lam2[order]
    G = _fixed_directions(n - 1)
    for start, stop in _clusters(lam1, tol, lam2):
        Vc = V[:, start:stop]
        q, r = np.linalg.qr(Vc @ (Vc.T @ G[:, : stop - start]))  # depends on span(Vc) only
        V[:, start:stop] = q * np.where(np.diag(r) < 0, -1.0, 1.0)
    return Q @ V, lam1, lam2


def _clusters(lam1, tol, lam2=None):
    """``(start, stop)`` of the runs of consecutive equal eigenvalues (``lam1``, and ``lam2`` when given)."""
    out, start = [], 0
    while start < lam1.size:
        stop = start + 1
        while (
            stop < lam1.size
            and abs(lam1[stop] - lam1[start]) <= tol
            and (lam2 is None or abs(lam2[stop] - lam2[start]) <= tol)
        ):
            stop += 1
        out.append((start, stop))
        start = stop
    return out


def _fixed_directions(m: int) -> np.ndarray:
    """``(m, m)`` fixed generic vectors (entries in [-1/2, 1/2) from counter-based integer hashes: the same
    bits everywhere), projected onto an eigenspace to give it a canonical basis."""
    from mascot.seeds import uniforms

    return uniforms(np.arange(m, dtype=np.uint64) + np.uint64(0xE16E), m) - 0.5


def _symmetric_circulant(W) -> bool:
    n = W.shape[0]
    r = W[0]
    return bool(np.array_equal(r[1:], r[:0:-1]) and all(np.array_equal(W[i], np.roll(r, i)) for i in range(1, n)))


def circulant_eigenbasis(n: int, *rows):
    """The real Fourier basis of ``1-perp`` (``(n, n - 1)``: for ``k = 1 .. (n - 1) // 2`` the columns
    ``sqrt(2/n) cos(2 pi k j / n)`` and ``sqrt(2/n) sin(2 pi k j / n)``, then ``(-1)^j / sqrt(n)`` when ``n`` is
    even) and, for each first row ``r`` of a symmetric circulant, its eigenvalues on those columns,
    ``sum_j r_j cos(2 pi k j / n)``. Computed with the C library's ``cos``/``sin`` and exactly rounded sums
    (:mod:`mascot.stable`), so the same on every processor."""
    j = np.arange(n)
    cols, freqs = [], []
    for k in range(1, (n - 1) // 2 + 1):
        ang = 2.0 * math.pi * ((k * j) % n) / n  # the angle reduced in integers first
        cols += [math.sqrt(2.0 / n) * stable.cos(ang), math.sqrt(2.0 / n) * stable.sin(ang)]
        freqs += [k, k]
    if n % 2 == 0:
        cols.append(np.where(j % 2 == 0, 1.0, -1.0) / math.sqrt(n))
        freqs.append(n // 2)
    U = np.stack(cols, axis=1)
    lams = []
    for r in rows:
        r = np.asarray(r, dtype=np.float64)
        per_k = {k: math.fsum((r * stable.cos(2.0 * math.pi * ((k * j) % n) / n)).tolist()) for k in set(freqs)}
        lams.append(np.array([per_k[k] for k in freqs]))
    return U, lams


def noise_draws(keys, rounds, n: int, d: int, dtype):
    """Standard normal ``(B, n, d)`` perturbations for round ``rounds[b]`` of trajectory ``b``.

    Trajectory ``b`` uses ``normal(fold_in(keys[b], rounds[b]))``, so a trajectory's noise depends only
    on its own key and round, never on batch size, chunking or compaction.
    """
    return jax.vmap(lambda k, r: jax.random.normal(jax.random.fold_in(k, r), (n, d), dtype))(keys, rounds)


def bucket_size(n: int, full: int) -> int:
    if n >= full:
        return full
    return min(full, max(MIN_BUCKET, 1 << (max(n, 1) - 1).bit_length()))


# ----------------------------------------------------------------------------- the round loop
def _segment(advance, carry, lanes, traces, n_steps, offset, *, strategy, max_rounds, trace):
    """Run up to ``n_steps`` rounds of Algorithm 1 on all lanes (a ``lax.while_loop``).

    ``advance(carry, mode1, step, rounds) -> (carry, d_new)`` applies one round to the lanes where
    ``step`` is true; what it leaves in the other lanes' carry must not matter for their outputs.
    ``lanes`` holds per-trajectory ``(B,)`` arrays and shared 0-d parameters.
    """
    c1, c2, eta, eps = lanes["c1"], lanes["c2"], lanes["eta"], lanes["eps"]

    def cond(state):
        it, _, ln, _ = state
        return (it < n_steps) & jnp.any(ln["active"])

    def body(state):
        it, carry, ln, tr = state
        rule = switching.SwitchState(
            d=ln["d"], b=ln["b"], rounds=ln["rounds"], status=ln["status"], active=ln["active"]
        )
        rule, dec = switching.decide(rule, eta, c1, c2, strategy)
        carry, d_new = advance(carry, dec.mode1, dec.step, rule.rounds)
        rule = switching.commit(rule, dec, d_new, eps, max_rounds)
        if trace:
            step, d, b, mode1 = dec.step, rule.d, rule.b, dec.mode1
            col = it + offset
            nan = jnp.full_like(d, jnp.nan)
            tr = dict(
                d=jax.lax.dynamic_update_index_in_dim(tr["d"], jnp.where(step, d, nan), col + 1, 1),
                b=jax.lax.dynamic_update_index_in_dim(tr["b"], jnp.where(step, b, nan), col + 1, 1),
                s=jax.lax.dynamic_update_index_in_dim(
                    tr["s"], jnp.where(step, jnp.where(mode1, 1, 2), 0).astype(tr["s"].dtype), col, 1
                ),
            )
        ln = dict(ln, d=rule.d, b=rule.b, rounds=rule.rounds, status=rule.status, active=rule.active)
        return it + 1, carry, ln, tr

    _, carry, lanes, traces = jax.lax.while_loop(cond, body, (jnp.int32(0), carry, lanes, traces))
    return carry, lanes, traces


@partial(jax.jit, static_argnames=("strategy", "max_rounds", "trace", "n_agents", "noisy"))
def modal_segment(
    carry, lanes, traces, lam1, lam2, sigma, n_steps, offset, *, strategy, max_rounds, trace, n_agents, noisy
):
    inv_n = jnp.asarray(1.0 / n_agents, lam1.dtype)
    if noisy:

        def advance(carry, mode1, step, rounds):
            Y, mean = carry  # (B, N-1, d) modal coordinates on 1-perp, (B, d) mean belief
            lam = jnp.where(mode1[:, None], lam1, lam2)
            z = noise_draws(lanes["keys"], rounds, n_agents, Y.shape[-1], Y.dtype)
            Y_new = lam[:, :, None] * Y + sigma * z[:, 1:, :]
            mean_new = mean + sigma * z[:, 0, :] * jnp.sqrt(inv_n)
            d_new = jnp.sqrt(jnp.sum(Y_new * Y_new, axis=(1, 2)) * inv_n)
            return (jnp.where(step[:, None, None], Y_new, Y), jnp.where(step[:, None], mean_new, mean)), d_new
    else:
        sq1, sq2 = lam1 * lam1, lam2 * lam2

        def advance(carry, mode1, step, rounds):
            energy, m1, m2 = carry  # (B, N-1) weighted mode energies, mode-1/-2 round counts
            # Energies of lanes that do not step are never read again (D is frozen by the caller and
            # x_final is rebuilt from the round counts), so they are updated unmasked: one fused
            # multiply-reduce per round (a lax.switch on "all lanes in one mode" measured slower).
            if strategy == "adaptive":
                energy_new = energy * jnp.where(mode1[:, None], sq1, sq2)
            else:
                energy_new = energy * (sq1 if strategy == "mode1" else sq2)
            d_new = jnp.sqrt(jnp.sum(energy_new, axis=1) * inv_n)
            m1 = m1 + (step & mode1).astype(m1.dtype)
            m2 = m2 + (step & ~mode1).astype(m2.dtype)
            return (energy_new, m1, m2), d_new

    return _segment(
        advance, carry, lanes, traces, n_steps, offset, strategy=strategy, max_rounds=max_rounds, trace=trace
    )


@partial(jax.jit, static_argnames=("strategy", "max_rounds", "trace", "noisy"))
def matrix_segment(carry, lanes, traces, W1, W2, sigma, n_steps, offset, *, strategy, max_rounds, trace, noisy):
    n = W1.shape[0]
    inv_n = jnp.asarray(1.0 / n, W1.dtype)
    W12 = jnp.concatenate([W1, W2], axis=0)
    centre = jnp.eye(n, dtype=W1.dtype) - inv_n  # P = I - 11^T/N (as a product: XLA's CPU mean over
    # the leading axis is ~30x slower than this small matrix product)

    def advance(carry, mode1, step, rounds):
        # Xc = P X laid out (N, d, B); m = the mean belief (d, B). Since W is doubly stochastic,
        # P W X = W P X, so the centred beliefs evolve by the same product and D = ||Xc||_F / sqrt(N).
        Xc, m = carry
        _, d, B = Xc.shape
        flat = Xc.reshape(n, d * B)
        if strategy == "adaptive":
            # W1 or W2 alone when every stepping lane uses the same mode; the stacked (2N, N)
            # product only in rounds where lanes are split between modes
            only1, only2 = jnp.all(mode1 | ~step), jnp.all(~mode1 | ~step)
            X_new = jax.lax.switch(
                jnp.where(only1, 0, jnp.where(only2, 1, 2)),
                [
                    lambda: _mm(W1, flat).reshape(n, d, B),
                    lambda: _mm(W2, flat).reshape(n, d, B),
                    lambda: jnp.where(mode1[None, None, :], *_mm(W12, flat).reshape(2, n, d, B)),
                ],
            )
        else:
            X_new = _mm(W1 if strategy == "mode1" else W2, flat).reshape(n, d, B)
        if noisy:
            z = jnp.transpose(noise_draws(lanes["keys"], rounds, n, d, Xc.dtype), (1, 2, 0)).reshape(n, d * B)
            X_new = X_new + sigma * _mm(centre, z).reshape(n, d, B)
            m_new = m + sigma * _mm(jnp.full((1, n), inv_n, Xc.dtype), z).reshape(d, B)
            m = jnp.where(step[None, :], m_new, m)
        d_new = jnp.sqrt(jnp.sum((X_new * X_new).reshape(n * d, B), axis=0) * inv_n)
        return (jnp.where(step[None, None, :], X_new, Xc), m), d_new

    return _segment(
        advance, carry, lanes, traces, n_steps, offset, strategy=strategy, max_rounds=max_rounds, trace=trace
    )


def _grouped_energies(X0, U, S):
    """``(B, G)`` mode energies summed over the groups of ``S``: ``(sum_d (U^T X0)^2) @ S``."""
    Y = jnp.einsum("bnd,nm->bdm", X0, U, precision=_HIGHEST)  # (B, d, N-1)
    return _mm(jnp.sum(Y * Y, axis=1), S)


def _rows(X0, first, count, shape, skip):
    """Rows ``first:first + count`` of the batch, as ``(count, N, d)``: of ``X0`` itself, or (``shape`` given:
    ``(B, N, d)``) of a flat ``X0`` holding the batch from entry ``skip`` on (the entries before and after it
    are alignment padding, never read)."""
    if shape is None:
        return jax.lax.dynamic_slice_in_dim(X0, first, count, 0)
    _, n, d = shape
    return jax.lax.dynamic_slice_in_dim(X0, skip + first * n * d, count * n * d, 0).reshape(count, n, d)


@partial(jax.jit, static_argnames=("noisy", "tile", "rows", "shape"))
def modal_init(X0, U, S, start=0, skip=0, *, noisy, tile=None, rows=None, shape=None):
    """Modal coordinates ``U^T X0`` (the O(N^2 d) part, done once) and ``D(0)``.

    ``rows`` (static) with ``start``: work on rows ``start:start + rows`` of ``X0`` only, read in place (a
    sliced copy of a device-resident X0 cost more than the projection on a CPU: fresh pages for every chunk).
    ``shape`` (static, ``(B, N, d)``) with ``skip``: ``X0`` is flat and holds the ``(B, N, d)`` batch from
    entry ``skip`` on (a host array aliased from the 64-byte boundary before its first entry: XLA reads host
    memory in place only from such a boundary, so a typical 16-byte aligned numpy X0 is read where it is
    instead of copied; ``skip`` is traced, so every alignment shares one compiled kernel).

    One ``(B*d, N) @ (N, N-1)`` product. A NaN or inf anywhere in a trajectory's X0 makes its ``D(0)``
    non-finite (every row of ``U`` is nonzero), which the caller checks instead of a separate pass.

    ``tile`` (no-noise path, N > SMALL_N): project ``tile`` rows at a time in a loop, so the transposed
    copy of X0 and the modal coordinates of a tile stay in the CPU's caches instead of making three
    round trips through memory (measured 2x faster at N = 64 on a 2-core CPU; a GPU wants one large
    product: ``None``). Every row's energies are the same numbers either way (a row's products and sums
    do not depend on how many rows share the call).
    """
    B, n, d = X0.shape if shape is None else shape
    if rows is not None:
        B = rows
    if not noisy and n > SMALL_N and tile is not None and B >= 2 * tile:

        def body(i, acc):  # the last tile ends at row B (overlapping its predecessor): every product has
            lo = jnp.minimum(i * tile, B - tile)  # `tile` rows (XLA:CPU's products of a few rows sum in
            x = _rows(X0, start + lo, tile, shape, skip)  # another order: other last bits)
            return jax.lax.dynamic_update_slice_in_dim(acc, _grouped_energies(x, U, S), lo, 0)

        sq = jax.lax.fori_loop(0, -(-B // tile), body, jnp.zeros((B, S.shape[1]), X0.dtype))
        sq = jax.lax.optimization_barrier(sq)
        zeros = jnp.zeros(B, jnp.int32)
        return (sq, zeros, zeros), jnp.sqrt(jnp.sum(sq, axis=1) / n)
    if rows is not None or shape is not None:
        X0 = _rows(X0, start, B, shape, skip)
    if n <= SMALL_N and d <= KRON_MAX_D:
        # small N: X0 as (B, N*d) @ kron(U, I_d) reads X0 in place (no transpose); d-fold more flops
        # than needed but on tiny matrices (measured 3x faster at N = 5, B = 1e5). Its (N d)^2 entries and
        # d-fold flops rule it out for wide beliefs (d = 10^4 took 22 GB: an outside tester's embeddings case)
        K = jnp.kron(U, jnp.eye(d, dtype=U.dtype))
        Y, axis_d = _mm(X0.reshape(B, n * d), K).reshape(B, n - 1, d), 2
    else:
        Y, axis_d = jnp.einsum("bnd,nm->bdm", X0, U, precision=_HIGHEST), 1  # (B, d, N-1)
    if noisy:
        Y = jax.lax.optimization_barrier(Y if axis_d == 2 else jnp.transpose(Y, (0, 2, 1)))
        d0 = jnp.sqrt(jnp.sum(Y * Y, axis=(1, 2)) / n)
        return (Y, jnp.mean(X0, axis=1)), d0
    # energies summed over modes that share an eigenvalue pair (group matrix S, e.g. the ring's
    # cos(2 pi k/N) = cos(2 pi (N-k)/N) pairs); the barrier stops XLA from recomputing the product
    # inside the D(0) reduction
    sq = jax.lax.optimization_barrier(_mm(jnp.sum(Y * Y, axis=axis_d), S))
    zeros = jnp.zeros(X0.shape[0], jnp.int32)
    return (sq, zeros, zeros), jnp.sqrt(jnp.sum(sq, axis=1) / n)


@jax.jit
def matrix_init(X0):
    """Centred beliefs ``P X0`` as ``(N, d, B)``, the mean belief ``(d, B)`` and ``D(0)``."""
    B, n, d = X0.shape
    Xt = jnp.transpose(X0, (1, 2, 0)).reshape(n, d * B)
    m = _mm(jnp.full((1, n), 1.0 / n, X0.dtype), Xt)
    Xc = (Xt - m).reshape(n, d, B)
    d0 = jnp.sqrt(jnp.sum((Xc * Xc).reshape(n * d, B), axis=0) / n)
    return (Xc, m.reshape(d, B)), d0


@partial(jax.jit, static_argnames=("max_rounds",))
def make_lanes(d0, params, keys, *, max_rounds):
    """Per-trajectory loop state; shared (0-d) parameters stay 0-d. Also: is every D(0) finite?"""
    rule = switching.init(d0, params["b0"], params["eps"], max_rounds)
    lanes = dict(
        c1=params["c1"],
        c2=params["c2"],
        eta=params["eta"],
        eps=params["eps"],
        b=rule.b,
        rounds=rule.rounds,
        keys=keys,
        d=rule.d,
        status=rule.status,
        active=rule.active,
    )
    return lanes, jnp.all(jnp.isfinite(d0))


@partial(jax.jit, static_argnames=("strategy", "max_rounds", "tile", "rows", "shape"))
def modal_rollout(
    X0, U, S, lam1, lam2, params, start=0, skip=0, *, strategy, max_rounds, tile=None, rows=None, shape=None
):
    """The whole modal rollout of one chunk without noise or traces in one compiled call: projection,
    energies, the round loop to the last active lane; no host round trips in between. ``tile``, ``start``,
    ``rows`` (the chunk is rows ``start:start + rows`` of ``X0``), ``shape`` and ``skip`` (a flat ``X0``): see
    :func:`modal_init`."""
    B, n, _ = X0.shape if shape is None else shape
    B = B if rows is None else rows
    carry, d0 = modal_init(X0, U, S, start, skip, noisy=False, tile=tile, rows=rows, shape=shape)
    lanes, finite = make_lanes(d0, params, jnp.zeros(B, jnp.int32), max_rounds=max_rounds)
    carry, lanes, _ = modal_segment(
        carry,
        lanes,
        {},
        lam1,
        lam2,
        jnp.zeros((), X0.dtype),
        jnp.int32(max_rounds),
        jnp.int32(0),
        strategy=strategy,
        max_rounds=max_rounds,
        trace=False,
        n_agents=n,
        noisy=False,
    )
    # status as int8 (0, 1, 2): fewer bytes for the host to fetch
    return dict(
        rounds=lanes["rounds"],
        b=lanes["b"],
        d=lanes["d"],
        status=lanes["status"].astype(jnp.int8),
        d0=d0,
        m1=carry[1],
        m2=carry[2],
        finite=finite,
    )


# ----------------------------------------------------------------------------- the round-free modal path
def _affordable(b, c, max_rounds: int):
    """How many rounds of cost ``c`` the budget ``b`` pays, as Algorithm 1 deducts them (``b_k >= c`` before
    each): the largest ``q <= max_rounds`` with ``b - q c >= 0`` (``int32``). Exact for whole-number costs:
    every ``b - q c`` is then a number the dtype holds exactly, equal to ``q`` deductions one by one."""
    q = jnp.floor(b / jnp.where(c > 0, c, 1))
    q = jnp.where(b - q * c < 0, q - 1, q)  # the division rounded up past an exact multiple
    q = jnp.where(b - (q + 1) * c >= 0, q + 1, q)  # ... or down below one
    q = jnp.where(c > 0, q, max_rounds)
    return jnp.clip(q, 0, max_rounds).astype(jnp.int32)


def _first_crossing(e, ell, d_start, thr, limit, inv_n, *, max_rounds: int, first: int = 8, block: int = 64):
    """The first ``k`` in ``[0, limit]`` with ``D(k) = sqrt(inv_n sum_g e_g exp(k ell_g)) <= thr`` per lane,
    without a round loop: ``D`` at consecutive ``k`` is one ``(B, G) @ (G, width)`` product with a table of
    eigenvalue powers (``exp(k ell)``, ``ell = log lambda^2``): one block of ``first`` rounds (most lanes stop
    within a few), then blocks of ``block`` rounds only while some lane has neither crossed nor reached its
    limit. ``D(k)`` is non-increasing (``|lambda| <= 1``), so the first crossing is where the round loop would
    stop or switch. ``D(0)`` is ``d_start`` (the value the round loop compares). Returns ``(k, found, D(k))``;
    ``k = limit`` where no crossing is found."""
    B = e.shape[0]

    def scan(width):
        steps = jnp.arange(width, dtype=jnp.int32)

        def body(state):
            k0, k, found, d, done = state
            ks = k0 + steps
            T = _sq_powers(ks[:, None], ell[None, :], e.dtype)  # (width, G)
            D = jnp.sqrt(jnp.maximum(_mm(e, T.T), 0) * inv_n)  # (B, width)
            D = jnp.where(ks[None, :] == 0, d_start[:, None], D)
            hit = (D <= thr[..., None]) & (ks[None, :] <= limit[..., None])
            any_hit = jnp.any(hit, axis=1)
            at_limit = (limit >= k0) & (limit < k0 + width)
            idx = jnp.where(any_hit, jnp.argmax(hit, axis=1), jnp.clip(limit - k0, 0, width - 1)).astype(jnp.int32)
            new = ~done & (any_hit | at_limit)
            dv = jnp.take_along_axis(D, idx[:, None], axis=1)[:, 0]
            return (
                k0 + width,
                jnp.where(new, k0 + idx, k),
                jnp.where(new, any_hit, found),
                jnp.where(new, dv, d),
                done | new,
            )

        return body

    state = (jnp.int32(0), jnp.zeros(B, jnp.int32), jnp.zeros(B, bool), jnp.zeros(B, e.dtype), jnp.zeros(B, bool))
    state = scan(min(first, max_rounds + 1))(state)
    _, k, found, d, _ = jax.lax.while_loop(lambda st: ~jnp.all(st[-1]), scan(block), state)
    return k, found, d


def _sq_powers(k, ell, dtype):
    """``lambda^(2 k)`` from ``ell = log lambda^2`` (broadcast): ``exp(k ell)``, 1 at ``k = 0`` (also for a zero
    eigenvalue, whose ``ell`` is -inf and whose other powers are ``exp(-inf) = 0``)."""
    kf = k.astype(dtype)
    return jnp.where(kf == 0, 1, jnp.exp(kf * ell)).astype(dtype)


def _log_sq(lam):
    sq = lam * lam
    return jnp.where(sq > 0, jnp.log(jnp.where(sq > 0, sq, 1)), -jnp.inf)


def modal_closed_form(e, d0, lam1, lam2, params, *, strategy: str, max_rounds: int, n_agents: int):
    """Algorithm 1 on a commuting symmetric pair without a round loop (noise-free): from the initial
    per-mode energies ``e`` (``(B, G)``), ``D(m1, m2)^2 = (1/N) sum_g e_g lambda1_g^(2 m1) lambda2_g^(2 m2)``.

    An adaptive lane runs mode 1 until ``D <= max(eta, eps)`` (``D`` only falls), then mode 2 until
    ``D <= eps``; each phase's end is the first crossing of a threshold (:func:`_first_crossing`), cut short
    by the rounds its budget pays (:func:`_affordable`: BudgetFail) or by ``max_rounds`` (MaxRounds). The
    outcome equals the round loop's (:func:`modal_segment`) for whole-number round costs; ``D`` is computed
    from powers of the eigenvalues instead of repeated products (the last bits of float32 values differ).
    Returns the dict of :func:`modal_rollout` (without ``finite``)."""
    B = e.shape[0]
    dt = e.dtype
    inv_n = jnp.asarray(1.0 / n_agents, dt)
    # shared (0-d) parameters stay 0-d: broadcast to (B,) they were materialised (fresh pages) and carried
    # through both crossing searches
    c1, c2, eta, eps, b0 = (jnp.asarray(params[k], dt) for k in ("c1", "c2", "eta", "eps", "b0"))
    l1, l2 = _log_sq(lam1), _log_sq(lam2)
    crossing = partial(_first_crossing, inv_n=inv_n, max_rounds=max_rounds)
    zero = jnp.zeros(B, jnp.int32)
    if strategy == "mode2":
        m1, d1, go2 = zero, d0, jnp.ones(B, bool)
        st1 = jnp.full(B, int(Status.MAX_ROUNDS), jnp.int32)
    else:
        thr = eps if strategy == "mode1" else jnp.maximum(eta, eps)
        a1 = _affordable(b0, c1, max_rounds)
        m1, found, d1 = crossing(e, l1, d0, thr, a1)
        consensus = found & (d1 <= eps)
        go2 = found & ~consensus
        st1 = jnp.where(
            consensus,
            int(Status.CONSENSUS),
            jnp.where(a1 < max_rounds, int(Status.BUDGET_FAIL), int(Status.MAX_ROUNDS)),
        ).astype(jnp.int32)
    if strategy == "mode1":
        m2, d, status = zero, d1, st1
    else:
        e2 = e * _sq_powers(m1[:, None], l1[None, :], dt)  # the energies at the switch
        b1 = b0 - m1.astype(dt) * c1
        left = max_rounds - m1
        a2 = jnp.minimum(_affordable(b1, c2, max_rounds), left)
        j, found2, d2 = crossing(e2, l2, d1, eps, a2)
        st2 = jnp.where(
            found2, int(Status.CONSENSUS), jnp.where(a2 < left, int(Status.BUDGET_FAIL), int(Status.MAX_ROUNDS))
        ).astype(jnp.int32)
        m2 = jnp.where(go2, j, 0)
        d = jnp.where(go2, d2, d1)
        status = jnp.where(go2, st2, st1)
    rounds = m1 + m2
    b = b0 - m1.astype(dt) * c1 - m2.astype(dt) * c2
    return dict(rounds=rounds, b=b, d=d, status=status.astype(jnp.int8), d0=d0, m1=m1, m2=m2)


@partial(jax.jit, static_argnames=("strategy", "max_rounds", "tile", "rows", "shape"))
def modal_closed(
    X0, U, S, lam1, lam2, params, start=0, skip=0, *, strategy, max_rounds, tile=None, rows=None, shape=None
):
    """:func:`modal_rollout` without its round loop (:func:`modal_closed_form`), for whole-number round
    costs: the projection, then a few dense products with tables of eigenvalue powers."""
    n = X0.shape[1] if shape is None else shape[1]
    (e, _, _), d0 = modal_init(X0, U, S, start, skip, noisy=False, tile=tile, rows=rows, shape=shape)
    out = modal_closed_form(e, d0, lam1, lam2, params, strategy=strategy, max_rounds=max_rounds, n_agents=n)
    return dict(out, finite=jnp.all(jnp.isfinite(d0)))  # a NaN or inf in X0 reaches D(0), as in modal_rollout


def modal_reconstruct(X0, U, lam1, lam2, m1, m2):
    """Final beliefs from X0 and the mode-1/-2 round counts (float64): the mean plus the modal
    coordinates scaled by the signed eigenvalue powers."""
    Xf = np.asarray(X0, dtype=np.float64)
    f = lam1[None, :] ** m1[:, None] * lam2[None, :] ** m2[:, None]
    Y = f[:, :, None] * np.einsum("nm,bnd->bmd", U, Xf)
    return Xf.mean(axis=1)[:, None, :] + np.einsum("nm,bmd->bnd", U, Y)


@partial(jax.jit, static_argnums=1)
def gather(tree, axes, idx):
    """Keep lanes ``idx`` of every array in ``tree`` (``axes`` gives each array's batch axis)."""
    return jax.tree_util.tree_map(lambda a, ax: jnp.take(a, idx, axis=ax), tree, axes)


@jax.jit
def gather_lanes(lanes, idx):
    """Keep lanes ``idx`` of every per-trajectory array; 0-d (shared) parameters stay as they are."""
    return jax.tree_util.tree_map(lambda a: jnp.take(a, idx, axis=0) if a.ndim else a, lanes)
