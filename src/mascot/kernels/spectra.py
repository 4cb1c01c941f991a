"""Batched successor-representation diagnostics in JAX (SR paper: "Predictive Maps of Multi-Agent Reasoning").

For adjacency stacks A (..., n, n) and discounts gamma, :func:`sr_spectra` returns rho(M), Delta(M) and
kappa(M) of M = (I - gamma P)^-1, P = row_normalize(A) (Sec. 3.1-3.2), without forming M:

* eigenvalues of M are 1 / (1 - gamma mu) for the eigenvalues mu of P, so one eigendecomposition per
  graph serves every gamma;
* kappa(M) = kappa(I - gamma P) = sigma_max / sigma_min of I - gamma P (singular values, no inverse);
  when P is symmetric it is normal and kappa = max|lambda| / min|lambda| from the eigenvalues alone.

Paths (``method``): ``"eigh"`` for undirected graphs (symmetric A): P = D^-1 A is reversible and similar
to the symmetric D^-1/2 A D^-1/2, so ``eigvalsh`` applies (runs on GPU). ``"eig"`` for directed graphs:
general ``eigvals``, which JAX provides on CPU only, so it is placed on the CPU device whatever the default
backend is; the singular values still run on the default device. ``"auto"`` picks per call.

Time-varying operators (A.5): :func:`gat_transition` (attention-weighted P(t) with reliability scores),
:func:`time_varying_sr` (M(t) = I + gamma P(t) M(t+1)) and :func:`time_varying_kappa`.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from mascot.kernels.precision import x64_enabled
from threadpoolctl import threadpool_limits

from mascot.graphs import row_normalize, validate_adjacency
from mascot.theory.spectra import check_gamma, check_stochastic

__all__ = ["SRSpectra", "TimeVaryingKappa", "gat_transition", "sr_spectra", "time_varying_kappa", "time_varying_sr"]

_METHODS = ("auto", "eigh", "eig")
_CHUNK_BYTES = 64 << 20


class SRSpectra(NamedTuple):
    """Diagnostics of M = (I - gamma P)^-1, each of shape ``broadcast(A.shape[:-2], gamma.shape)``."""

    rho: jax.Array
    delta: jax.Array
    kappa: jax.Array
    method: str


def _default_dtype():
    return jnp.float64 if x64_enabled() else jnp.float32


@jax.jit
def _mu_sym(A):
    """Eigenvalues of P = D^-1 A for symmetric A via S = D^-1/2 A D^-1/2 (zero for isolated agents)."""
    d = A.sum(-1)
    r = jnp.where(d > 0, 1.0 / jnp.sqrt(jnp.where(d > 0, d, 1.0)), 0.0)
    S = r[..., :, None] * A * r[..., None, :]
    return jnp.linalg.eigvalsh(0.5 * (S + jnp.swapaxes(S, -1, -2)))


@jax.jit
def _mu_gen(P):
    return jnp.linalg.eigvals(P)


@partial(jax.jit, static_argnames=("normal",))
def _diagnostics(mu, P, gamma, normal):
    """rho, Delta from mu (eigenvalues of P, real or complex) and kappa from I - gamma P."""
    g = gamma.astype(P.dtype)
    mod = 1.0 / jnp.abs(1.0 - g[:, None] * mu)  # |lambda_i(M)|
    top = jax.lax.top_k(mod, 2)[0] if mu.shape[-1] > 1 else jnp.concatenate([mod, mod], -1)
    rho = top[:, 0]
    delta = top[:, 0] - top[:, 1] if mu.shape[-1] > 1 else jnp.zeros_like(rho)
    if normal:
        kappa = mod.max(-1) / mod.min(-1)
    else:
        n = P.shape[-1]
        s = jnp.linalg.svd(jnp.eye(n, dtype=P.dtype) - g[:, None, None] * P, compute_uv=False)
        kappa = s[:, 0] / s[:, -1]
    return rho, delta, kappa


def _is_symmetric(A):
    return bool(np.allclose(A, np.swapaxes(A, -1, -2), rtol=0.0, atol=1e-12 * max(1.0, float(np.abs(A).max(initial=0)))))


def sr_spectra(A, gamma, *, method: str = "auto", normalize: bool = True, dtype=None, chunk_size: int | None = None):
    """rho(M), Delta(M), kappa(M) for every (graph, gamma) pair (SR paper, Sec. 3.2, eq. 1).

    A: (..., n, n) weighted adjacency (``normalize=True``, row-normalised with the zero-row rule of
      :func:`mascot.graphs.row_normalize`) or already row-stochastic P (``normalize=False``).
    gamma: scalar or array in [0, 1); broadcast against ``A.shape[:-2]`` by numpy rules, so a stack of G
      graphs against G gammas is elementwise, and ``A[:, None]`` (a view) against (Gamma,) gammas gives
      the (G, Gamma) outer product while decomposing each graph once.
    method: "auto" (eigh when every A is symmetric, else eig), "eigh" (requires symmetric A), "eig".
    Returns :class:`SRSpectra` of JAX arrays with the broadcast shape.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}; got {method!r}")
    A = validate_adjacency(A, "A")
    g = check_gamma(gamma)
    batch = A.shape[:-2]
    try:
        out_shape = np.broadcast_shapes(batch, g.shape)
    except ValueError:
        raise ValueError(f"gamma of shape {g.shape} does not broadcast against the graph batch {batch}") from None
    n = A.shape[-1]
    P = row_normalize(A, "A") if normalize else check_stochastic(A, "A")
    sym_A = _is_symmetric(A)
    if method == "auto":
        method = "eigh" if sym_A else "eig"
    if method == "eigh" and not sym_A:
        raise ValueError("method='eigh' needs a symmetric adjacency (an undirected graph); use 'eig' or 'auto'")
    normal = _is_symmetric(P)  # symmetric P is normal: kappa from eigenvalues
    dt = jnp.dtype(dtype) if dtype is not None else _default_dtype()
    # XLA:CPU's LAPACK kernels call OpenBLAS, which defaults to one thread per core; with another busy
    # process that oversubscription made one n = 256 call 70x slower (benchmarks/README.md), and even on a
    # quiet machine one thread is faster for these per-matrix calls. Block inside the limit: dispatch is async.
    # (threadpool_limits looks the libraries up at each call: JAX loads its LAPACK lazily.)
    with threadpool_limits(limits=1, user_api="blas"):
        rho, delta, kappa = _compute(A, P, g, batch, out_shape, n, method, normal, normalize, dt, chunk_size)
        rho.block_until_ready()
        kappa.block_until_ready()
    return SRSpectra(rho, delta, kappa, method)


def _compute(A, P, g, batch, out_shape, n, method, normal, normalize, dt, chunk_size):
    """The device work of :func:`sr_spectra` (inputs already validated)."""
    flatP = P.reshape(-1, n, n)
    if method == "eigh":
        base = A if normalize else P  # a symmetric stochastic P is its own symmetrisation
        mu = _mu_sym(jnp.asarray(base.reshape(-1, n, n), dtype=dt))
    else:
        cpu = jax.devices("cpu")[0]
        mu = _mu_gen(jax.device_put(np.asarray(flatP, dtype=dt), cpu))
        mu = jax.device_put(mu, jax.devices()[0])
    idx = np.broadcast_to(np.arange(flatP.shape[0]).reshape(batch), out_shape).ravel()
    gflat = np.broadcast_to(g, out_shape).ravel()
    m = idx.size
    if chunk_size is None:
        per = (n * n * (1 if normal else 3) + 4 * n) * jnp.dtype(dt).itemsize
        chunk_size = int(max(1, min(m, _CHUNK_BYTES // per)))
    Pd = jnp.asarray(flatP, dtype=dt)
    outs = []
    for s in range(0, m, chunk_size):
        sl = idx[s : s + chunk_size]
        gs = gflat[s : s + chunk_size]
        pad = chunk_size - sl.size
        if pad:  # keep one compiled shape
            sl = np.concatenate([sl, np.zeros(pad, sl.dtype)])
            gs = np.concatenate([gs, np.zeros(pad)])
        j = jnp.asarray(sl)
        r = _diagnostics(mu[j], Pd[j], jnp.asarray(gs, dtype=dt), normal)
        outs.append([x[: chunk_size - pad] for x in r])
    return tuple(jnp.concatenate(c).reshape(out_shape) for c in zip(*outs))


# ----------------------------------------------------------------------------- time-varying operators (A.5)
def gat_transition(h, adjacency, W, a, reliability=None, beta: float = 0.0, negative_slope: float = 0.2, phi=None):
    """Attention-weighted transition P(t) of SR paper eq. 7 (GAT-style, Velickovic et al.).

    e_ij = LeakyReLU(a^T [W h_i || W h_j]) + beta phi(r_j);  P_ij = softmax_j over the neighbours of i.

    h: (..., n, f) agent features; adjacency: (n, n) support (A_ij > 0: i reads j); W: (f', f); a: (2 f',);
    reliability: (..., n) running scores r_j (default none); phi: monotone map (default identity; with
    r_j estimating 1/sigma_j^2, ``phi = jnp.log`` and beta = 1 give the variance-optimal weights of A.5).
    Agents without neighbours keep a zero row. Leading axes of h (e.g. time) are batched.
    """
    h = jnp.asarray(h)
    mask = jnp.asarray(adjacency) > 0
    z = h @ jnp.asarray(W).T  # (..., n, f')
    fp = z.shape[-1]
    a = jnp.asarray(a)
    if a.shape != (2 * fp,):
        raise ValueError(f"a must have shape ({2 * fp},) for W h of width {fp}; got {a.shape}")
    src = z @ a[:fp]
    dst = z @ a[fp:]
    e = jax.nn.leaky_relu(src[..., :, None] + dst[..., None, :], negative_slope)
    if reliability is not None:
        r = jnp.asarray(reliability)
        e = e + beta * (phi(r) if phi is not None else r)[..., None, :]
    e = jnp.where(mask, e, -jnp.inf)
    has = mask.any(-1, keepdims=True)
    e = jnp.where(has, e, 0.0)
    return jnp.where(mask, jax.nn.softmax(e, axis=-1), 0.0)


@jax.jit
def time_varying_sr(P_seq, gamma):
    """M(t) = I + gamma P(t) M(t+1), t = H-1 .. 0, with M(H) = I (SR paper A.5). P_seq (..., H, n, n)."""
    P_seq = jnp.asarray(P_seq)
    n = P_seq.shape[-1]
    eye = jnp.eye(n, dtype=P_seq.dtype)
    Ps = jnp.moveaxis(P_seq, -3, 0)

    def step(M, P):
        M = eye + gamma * P @ M
        return M, M

    _, Ms = jax.lax.scan(step, jnp.broadcast_to(eye, Ps.shape[1:]), Ps, reverse=True)
    return jnp.moveaxis(Ms, 0, -3)


class TimeVaryingKappa(NamedTuple):
    instantaneous: jax.Array  # (..., H) kappa(M(t))
    time_averaged: jax.Array  # (...,)  kappa((I - gamma Pbar)^-1), Pbar the time average of P(t)
    worst_case: jax.Array  # (...,)  sup_t kappa(M(t))


@jax.jit
def _tv_kappa(P_seq, gamma):
    Ms = time_varying_sr(P_seq, gamma)
    s = jnp.linalg.svd(Ms, compute_uv=False)
    inst = s[..., 0] / s[..., -1]
    Pbar = P_seq.mean(-3)
    n = P_seq.shape[-1]
    sb = jnp.linalg.svd(jnp.eye(n, dtype=P_seq.dtype) - gamma * Pbar, compute_uv=False)
    return TimeVaryingKappa(inst, sb[..., 0] / sb[..., -1], inst.max(-1))


def time_varying_kappa(P_seq, gamma) -> TimeVaryingKappa:
    """The three reductions of SR paper A.5 for a sequence of row-stochastic P(t) (..., H, n, n)."""
    P = np.asarray(P_seq)
    if P.ndim < 3:
        raise ValueError(f"P_seq must be (..., H, n, n); got shape {P.shape}")
    check_stochastic(P, "P_seq", tol=1e-5)
    g = float(check_gamma(gamma))
    return _tv_kappa(jnp.asarray(P_seq), g)
