"""Batched successor-representation diagnostics in JAX (SR paper: "Predictive Maps of Multi-Agent Reasoning").

For adjacency stacks A (..., n, n) and discounts gamma, :func:`sr_spectra` returns rho(M), Delta(M) and
kappa(M) of M = (I - gamma P)^-1, P = row_normalize(A) (Sec. 3.1-3.2), without forming M:

* eigenvalues of M are 1 / (1 - gamma mu) for the eigenvalues mu of P, so one eigendecomposition per
  graph serves every gamma;
* kappa(M) = kappa(I - gamma P) = sigma_max / sigma_min of I - gamma P (singular values, no inverse);
  when P is symmetric it is normal and kappa = max|lambda| / min|lambda| from the eigenvalues alone.

Each graph (row of the stack) takes one of three routes, reported per (graph, gamma) pair in
``SRSpectra.methods``:

* ``"closed:<family>"``: P is exactly a chain, star, mesh, ring or complete graph (SR paper A.1; exact
  structure test, O(n^2) per graph, :mod:`mascot.kernels.spectra_closed`): closed forms in JAX, O(1) per pair;
* ``"eigh"``: undirected graph (symmetric A): P = D^-1 A is reversible and similar to the symmetric
  D^-1/2 A D^-1/2, so a symmetric eigenvalue solver applies;
* ``"eig"``: directed graph: general eigenvalues, which run on the CPU (LAPACK ``geev``) whatever the
  default backend is; only these rows leave the device.

Solvers for the eigh/eig rows (``solver``, reported in ``SRSpectra.solver``): ``"host"`` runs LAPACK's
eigenvalue-only drivers through numpy (:mod:`mascot.kernels.spectra_lapack`: ``syevd``/``geev``/``gesdd``
without vectors; XLA's CPU ``eigh`` computes eigenvectors, and XLA runs a batch one matrix at a time on one
core); ``"device"`` runs batched ``jnp.linalg.eigh`` / ``svd`` on the default device with no host round trip
(the eig rows' eigenvalues still come from the host). ``"auto"``: host on a CPU backend; on a GPU, device up
to n = 32 (cuSOLVER's batched Jacobi solvers) and host above (see :func:`_use_host`). A mixed
directed/undirected batch splits by row. :func:`mascot.execute.spectra.sr_spectra` is the same function with
the host tasks (validation, normalisation, family tests and LAPACK) on a thread pool, one thread per core.

Under ``jax.jit`` (traced A or gamma) :func:`sr_spectra` is traceable with an explicit ``method``: no
validation, no closed-form detection, kappa always from singular values; on a CPU backend the LAPACK calls
are ``jax.pure_callback``\\ s; with the device solver (a GPU and n <= 32, or ``solver='device'``) the eigh
path is pure device code.

Time-varying operators (A.5): :func:`gat_transition` (attention-weighted P(t) with reliability scores),
:func:`time_varying_sr` (M(t) = I + gamma P(t) M(t+1)) and :func:`time_varying_kappa`.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from threadpoolctl import ThreadpoolController

from mascot.errors import InputError
from mascot.graphs import validate_adjacency
from mascot.kernels import spectra_batched as sb
from mascot.kernels import spectra_lapack as lp
from mascot.kernels.precision import float64, x64_enabled
from mascot.kernels.spectra_closed import FAMILIES, FAMILY_CODES, chain_kappa, closed_form_spectra
from mascot.limits import F32_GAMMA_MAX
from mascot.theory.spectra import check_gamma, check_stochastic

# (sr_spectra here is the kernel behind mascot.sr_spectra, documented there)
__all__ = ["SRSpectra", "TimeVaryingKappa", "gat_transition", "time_varying_kappa", "time_varying_sr"]

_METHODS = ("auto", "eigh", "eig")
_SOLVERS = ("auto", "host", "device")
_CHUNK_BYTES = 64 << 20
_CHUNK_BYTES_ACCEL = 1 << 30
_EIGH, _EIG = -1, -2  # route codes beside the family codes (> 0)


class SRSpectra(NamedTuple):
    """Diagnostics of M = (I - gamma P)^-1, each of shape ``broadcast(A.shape[:-2], gamma.shape)``.

    ``method``: the eigenvalue path the graphs' structure calls for: "eigh" when every A is symmetric,
    "eig" when none is (or ``method='eig'`` was asked), "mixed" otherwise; closed-form rows keep this
    structural label. ``methods``: per (graph, gamma) pair, the route actually taken ("closed:chain", ...,
    "eigh", "eig"; a read-only numpy array of that shape). ``solver``: "host" (LAPACK eigenvalue-only
    drivers on the CPU) or "device" (batched jnp.linalg on the default device) for the eigh/eig rows.
    """

    rho: jax.Array
    delta: jax.Array
    kappa: jax.Array
    method: str
    methods: np.ndarray = None
    solver: str = "host"


def _flatten_spectra(s: SRSpectra):
    """The arrays are the pytree's leaves; the route labels ride along as static data, so an SRSpectra can be
    returned from ``jax.jit`` or mapped over (strings cannot be traced)."""
    m = None if s.methods is None else np.asarray(s.methods)
    if m is None:
        key = None
    elif m.size and (m == m.flat[0]).all():  # one route for every pair (always so under jit): shape and label
        key = (m.shape, str(m.flat[0]))
    else:
        key = (m.shape, tuple(m.ravel().tolist()))
    return (s.rho, s.delta, s.kappa), (s.method, key, s.solver)


def _unflatten_spectra(aux, leaves):
    method, key, solver = aux
    if key is None:
        methods = None
    elif isinstance(key[1], str):
        methods = np.full(key[0], key[1])
    else:
        methods = np.array(key[1], dtype=object if not key[1] else None).reshape(key[0])
    return SRSpectra(*leaves, method, methods, solver)


jax.tree_util.register_pytree_node(SRSpectra, _flatten_spectra, _unflatten_spectra)


def _default_dtype():
    return jnp.float64 if x64_enabled() else jnp.float32


@jax.jit
def _mu_sym(A):
    """Eigenvalues of P = D^-1 A for symmetric A via S = D^-1/2 A D^-1/2 (zero for isolated agents): all n of
    them (``jnp.linalg.eigvalsh``) up to n = 32, above that the smallest, second largest and largest
    (:func:`mascot.kernels.spectra_batched.sym_extreme_eigenvalues`), which are all that rho, Delta and kappa
    read (1 / (1 - gamma mu) grows with mu)."""
    d = A.sum(-1)
    r = jnp.where(d > 0, 1.0 / jnp.sqrt(jnp.where(d > 0, d, 1.0)), 0.0)
    S = r[..., :, None] * A * r[..., None, :]
    S = 0.5 * (S + jnp.swapaxes(S, -1, -2))
    return jnp.linalg.eigvalsh(S) if S.shape[-1] <= _DEVICE_MAX_N else sb.sym_extreme_eigenvalues(S)


@jax.jit
def _svd_kappa(P, idx, g):
    """kappa(I - g P[idx]) per pair on the device: batched SVD up to n = 32, above that the two extreme
    singular values alone (:func:`mascot.kernels.spectra_batched.extreme_singular_values`)."""
    n = P.shape[-1]
    C = jnp.eye(n, dtype=P.dtype) - g.astype(P.dtype)[:, None, None] * P[idx]
    if n <= _DEVICE_MAX_N:
        s = jnp.linalg.svd(C, compute_uv=False)
        return s[:, 0] / s[:, -1]
    s = sb.extreme_singular_values(C)
    return s[:, 1] / s[:, 0]


@jax.jit
def _finish(mu, idx, g, kappa_svd, from_mu):
    """rho, Delta per pair from the eigenvalues mu (G, n) of P (real or complex) of graph ``idx``; kappa
    from the eigenvalues where ``from_mu`` (P symmetric, so normal), else ``kappa_svd``."""
    g = g.astype(kappa_svd.dtype)
    mod = 1.0 / jnp.abs(1.0 - g[:, None] * mu[idx])  # |lambda_i(M)|
    if mu.shape[-1] > 1:
        top = jax.lax.top_k(mod, 2)[0]
        rho, delta = top[:, 0], top[:, 0] - top[:, 1]
    else:
        rho, delta = mod[:, 0], jnp.zeros_like(mod[:, 0])
    kappa = jnp.where(from_mu, mod.max(-1) / mod.min(-1), kappa_svd)
    return rho.astype(kappa_svd.dtype), delta.astype(kappa_svd.dtype), kappa


def _bucket(k):
    """Padded length for k pairs (powers of two, so a few compiled shapes serve every batch size)."""
    return 8 if k <= 8 else 1 << (k - 1).bit_length()


def _pad(a, size):
    a = np.asarray(a)
    return a if a.shape[0] == size else np.concatenate([a, np.zeros((size - a.shape[0],) + a.shape[1:], a.dtype)])


def _chunks(m, per_pair_bytes, chunk_size):
    """(size, starts) of equal padded chunks covering m pairs."""
    if chunk_size is None:
        chunk_size = max(1, min(_bucket(m), _chunk_bytes() // per_pair_bytes))
    return chunk_size, range(0, m, chunk_size)


@cache
def _blas_controller(_key):
    return ThreadpoolController()


def _one_blas_thread(host):
    """BLAS/LAPACK limited to one thread per call for the ``with`` block. OpenBLAS's own threads gain nothing
    on these small matrices and collapse when another process holds a core (benchmarks/README.md); the
    parallelism is across tasks. The library scan (about 1 ms) is cached for the host path, whose numpy
    LAPACK is loaded with numpy; XLA loads its LAPACK lazily, so the device path scans afresh."""
    return (_blas_controller(0) if host else ThreadpoolController()).limit(limits=1, user_api="blas")


def _families(family):
    if family is None or family is False:
        return ()
    if isinstance(family, str):
        family = FAMILIES if family == "auto" else (family,)
    family = tuple(family)
    bad = [f for f in family if f not in FAMILIES]
    if bad:
        raise InputError(f"family must be 'auto', None or among {FAMILIES}; got {bad}")
    return family


_DEVICE_MAX_N = 32  # up to here jaxlib runs a GPU batch through cuSOLVER's batched Jacobi eigh/SVD


def _use_host(solver, n):
    """Host LAPACK or device solvers for the eigh/eig rows. "auto": the host on a CPU backend (eigenvalue-only
    drivers; XLA's CPU eigh computes vectors, and the batched reductions of :mod:`spectra_batched` are 2-5x
    slower than LAPACK on a CPU core), the device elsewhere: up to n = 32 cuSOLVER's batched Jacobi solvers
    run a whole batch in one launch; above that XLA's GPU eigh/SVD loop over the matrices (H200 at n = 64 and
    256, float64: 0.03x and 0.10x numpy on 16 cores, benchmarks/results_device_h200.md), so the device path
    there reduces the whole batch at once and finds only the eigenvalues the diagnostics read."""
    if solver == "auto":
        return jax.default_backend() == "cpu"
    return solver == "host"


def _chunk_bytes():
    """Bytes of matrices per device batch: 64 MiB on a CPU backend (in cache), 1 GiB on an accelerator (each
    reduction step is one launch over the whole batch, so larger batches amortise the launches)."""
    return _CHUNK_BYTES if jax.default_backend() == "cpu" else _CHUNK_BYTES_ACCEL


def sr_spectra(
    A,
    gamma,
    *,
    method: str = "auto",
    normalize: bool = True,
    dtype=None,
    chunk_size: int | None = None,
    family="auto",
    solver: str = "auto",
    host_map=None,
    host_workers: int = 1,
):
    """The kernel of :func:`mascot.sr_spectra` (see there for the arguments, the result and the routes), with
    the host LAPACK tasks run through ``host_map`` (default: the builtin ``map``, serially) by
    ``host_workers`` at once; :func:`mascot.execute.spectra.sr_spectra` passes a thread pool.
    """
    if method not in _METHODS:
        raise InputError(f"method must be one of {_METHODS}; got {method!r}")
    if solver not in _SOLVERS:
        raise InputError(f"solver must be one of {_SOLVERS}; got {solver!r}")
    if chunk_size is not None and (
        isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1
    ):
        # (0 was taken without a word on the closed-form route: an outside tester)
        raise InputError(f"chunk_size must be an integer >= 1 (or None: about 64 MB a call); got {chunk_size!r}")
    fams = _families(family)
    if isinstance(A, jax.core.Tracer) or isinstance(gamma, jax.core.Tracer):
        return _traced(A, gamma, method, normalize, dtype, solver, chunk_size)
    dt = jnp.dtype(dtype) if dtype is not None else _default_dtype()
    if dt not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)):
        raise InputError(f"dtype must be float32 or float64; got {dtype!r}")
    with float64(dt == jnp.float64):
        return _eager(A, gamma, method, normalize, dt, chunk_size, fams, solver, host_map or map, max(1, host_workers))


def _eager(A, gamma, method, normalize, dt, chunk_size, fams, solver, host_map, workers):
    A = np.asarray(A)
    if A.dtype.kind not in "biuf" or A.ndim < 2 or A.shape[-1] != A.shape[-2] or A.shape[-1] < 1:
        validate_adjacency(A, "A")  # raises the canonical message
    A = A.astype(np.float64, copy=False)
    if not normalize:
        check_stochastic(validate_adjacency(A, "A"), "A")
    batch, n = A.shape[:-2], A.shape[-1]
    flatA = np.ascontiguousarray(A.reshape(-1, n, n))
    G = flatA.shape[0]
    flatP = np.empty_like(flatA) if normalize else flatA
    # validation, P, symmetry and the closed-form families, per chunk of graphs (in cache; on the host pool)
    sl = lp.plan(G, n, 8, workers, min_bytes=lp.PREP_MIN_TASK_BYTES)
    prep = lp.run_tasks([(lp.task_prepare, (flatA[s], flatP[s] if normalize else None, fams)) for s in sl], host_map)
    if not all(r[0] for r in prep):
        validate_adjacency(A, "A")  # raises the canonical message
    g = check_gamma(gamma)
    if dt == jnp.float32 and np.any(g > F32_GAMMA_MAX):
        bad = g[g > F32_GAMMA_MAX].ravel()[:3]
        raise InputError(
            f"gamma = {bad.tolist()} is within 2^-12 of 1: float32 holds 1 - gamma only to about 3e-8 "
            f"(rho = 1/(1 - gamma) off by up to {2.0**-25 / (1 - float(bad.max())):.2g} relative; at 0.99999997 it "
            "came out 50% low), use dtype='float64'"
        )
    try:
        out_shape = np.broadcast_shapes(batch, g.shape)
    except ValueError:
        raise InputError(f"gamma of shape {g.shape} does not broadcast against the graph batch {batch}") from None
    cat = lambda k: np.concatenate([r[k] for r in prep]) if prep else np.zeros(0, bool)  # noqa: E731
    sym, normal = cat(1), cat(2)  # symmetric P is normal: kappa from its eigenvalues
    if method == "eigh" and not sym.all():
        raise InputError("method='eigh' needs a symmetric adjacency (an undirected graph); use 'eig' or 'auto'")
    if method == "auto":
        summary = "eigh" if sym.all() else ("eig" if not sym.any() else "mixed")
        route = np.where(sym, _EIGH, _EIG)
    else:
        summary = method
        route = np.full(G, _EIGH if method == "eigh" else _EIG)
    codes = cat(3).astype(np.int8) if fams else np.zeros(G, np.int8)
    params = np.concatenate([r[4] for r in prep]) if fams and prep else None
    route = np.where(codes > 0, codes, route)
    idx = np.broadcast_to(np.arange(G).reshape(batch), out_shape).ravel()
    gflat = np.broadcast_to(g, out_shape).ravel()
    m = idx.size
    proute = route[idx]
    out = [np.empty(m, dt) for _ in range(3)]
    host = _use_host(solver, n)

    sel = np.flatnonzero(proute > 0)
    if sel.size:
        gi = idx[sel]
        gs = gflat[sel].astype(dt)
        size = _bucket(sel.size)
        k_chain = np.ones(sel.size, dt)
        chain = codes[gi] == FAMILY_CODES["chain"]
        if chain.any():  # depends on (n, gamma) only: once per distinct gamma
            u, inv = np.unique(gs[chain], return_inverse=True)
            k_chain[chain] = np.asarray(chain_kappa(n, _pad(u, _bucket(u.size))))[inv]
        r = closed_form_spectra(
            _pad(codes[gi], size),
            n,
            _pad(params[gi, 0], size),
            _pad(params[gi, 1], size),
            _pad(gs, size),
            _pad(k_chain, size),
        )
        for o, x in zip(out, r):
            o[sel] = np.asarray(x)[: sel.size]

    if (proute < 0).any():
        Xeig = (_f32_range(flatA) if normalize and dt == jnp.float32 else flatA if normalize else flatP).astype(
            dt, copy=False
        )
        Pd = flatP.astype(dt, copy=False)
        with _one_blas_thread(host):
            _solve(out, route, proute, normal, Xeig, Pd, idx, gflat, host, host_map, workers, dt, chunk_size)

    labels = np.array(["eigh", "eig"] + [f"closed:{f}" for f in FAMILIES])
    lab_of = np.where(route == _EIGH, 0, np.where(route == _EIG, 1, route + 1))
    methods = np.broadcast_to(labels[lab_of].reshape(batch), out_shape)
    rho, delta, kappa = (jnp.asarray(o.reshape(out_shape)) for o in out)
    return SRSpectra(rho, delta, kappa, summary, methods, "host" if host else "device")


def _f32_range(A):
    """Graphs whose weights float32 cannot hold (over 2^100, or all under 2^-100: 1e39 became inf, rho 1.0 and
    Delta NaN) scaled by a power of 4: D^-1/2 A D^-1/2, all the eigh route reads, is unchanged by it (exactly:
    sqrt of 4^m is 2^m). Every other graph is passed as it is."""
    big = np.abs(A).max(axis=(-2, -1), initial=0.0)
    far = (big > 2.0**100) | ((big > 0) & (big < 2.0**-100))
    if not far.any():
        return A
    A = A.copy()
    A[far] *= (4.0 ** -np.round(np.log2(big[far]) / 2))[:, None, None]
    return A


def _solve(out, route, proute, normal, X, P, idx, gflat, host, host_map, workers, dt, chunk_size):
    """Fill ``out`` (rho, Delta, kappa per pair) for the eigh/eig rows.

    Host LAPACK tasks (the eig rows always; every row when ``host``) each take a slice of graphs and the
    pairs of those graphs: eigenvalues, then rho, Delta and (P normal) kappa in numpy; kappa of the other
    pairs from SVD tasks over pairs. Device work (``host`` False: batched eigh, SVD and the finishing on the
    default device) is dispatched first, asynchronously, so the host tasks overlap it.
    """
    G, n = P.shape[0], P.shape[-1]
    item = jnp.dtype(dt).itemsize
    svd_pairs = np.flatnonzero((proute < 0) & ~normal[idx])
    order = np.flatnonzero(proute < 0)
    if order.size > 1 and np.any(idx[order[1:]] < idx[order[:-1]]):
        order = order[np.argsort(idx[order], kind="stable")]  # pairs grouped by graph
    dev = []
    if not host:
        ps = order[proute[order] == _EIGH]
        if ps.size:
            gi = np.flatnonzero(route == _EIGH)
            loc = np.empty(G, np.int64)
            loc[gi] = np.arange(gi.size)
            Xs = X if gi.size == G else X[gi]
            gsz, gstarts = _chunks(gi.size, 3 * n * n * item, chunk_size)
            mu = [_mu_sym(jnp.asarray(_pad(Xs[s : s + gsz], gsz) if gi.size > gsz else Xs, dtype=dt)) for s in gstarts]
            mu = mu[0] if len(mu) == 1 else jnp.concatenate(mu)[: gi.size]
            size, starts = _chunks(ps.size, 2 * n * item, chunk_size)
            for s in starts:
                part = ps[s : s + size]
                pad = size if ps.size > size else _bucket(part.size)
                dev.append(
                    (
                        part,
                        "finish",
                        _finish(
                            mu,
                            jnp.asarray(_pad(loc[idx[part]], pad)),
                            jnp.asarray(_pad(gflat[part].astype(dt), pad)),
                            jnp.ones(pad, dt),
                            jnp.asarray(_pad(normal[idx[part]], pad)),
                        ),
                    )
                )
        if svd_pairs.size:
            Pj = jnp.asarray(P, dtype=dt)
            size, starts = _chunks(svd_pairs.size, 3 * n * n * item, chunk_size)
            for s in starts:
                part = svd_pairs[s : s + size]
                pad = size if svd_pairs.size > size else _bucket(part.size)
                dev.append(
                    (
                        part,
                        "svd",
                        _svd_kappa(
                            Pj, jnp.asarray(_pad(idx[part], pad)), jnp.asarray(_pad(gflat[part].astype(dt), pad))
                        ),
                    )
                )
    tasks, parts = [], []
    for c in (_EIGH, _EIG):
        if c == _EIGH and not host:
            continue
        gi = np.flatnonzero(route == c)
        if not gi.size:
            continue
        ps = order[proute[order] == c]
        fn = lp.task_eigvalsh_finish if c == _EIGH else lp.task_eigvals_finish
        bounds = np.searchsorted(idx[ps], gi)  # first pair of each graph
        for sl in lp.plan(gi.size, n, item * (1 if c == _EIGH else 4), workers):
            g0, g1 = sl.start, sl.stop
            lo, hi = bounds[g0], bounds[g1] if g1 < gi.size else ps.size
            part = ps[lo:hi]
            gs = slice(gi[g0], gi[g1 - 1] + 1) if gi[g1 - 1] - gi[g0] == g1 - g0 - 1 else gi[g0:g1]
            loc, gam = np.searchsorted(gi[g0:g1], idx[part]), gflat[part].astype(dt)
            if c == _EIGH:
                tasks.append((fn, (X[gs], P[gs] if normal[gs].all() else None, loc, gam)))
            else:
                tasks.append((fn, (P[gs], loc, gam)))
            parts.append((part, "finish"))
    if host and svd_pairs.size:
        for sl in lp.plan(svd_pairs.size, n, item, workers, cap=chunk_size):
            part = svd_pairs[sl]
            tasks.append((lp.task_svd_kappa, (P, idx[part], gflat[part])))
            parts.append((part, "svd"))
    done = [(part, kind, r) for (part, kind), r in zip(parts, lp.run_tasks(tasks, host_map))] + dev
    rho, delta, kappa = out
    from_mu = normal[idx]
    for part, kind, r in done:
        k = part.size
        if kind == "svd":
            kappa[part] = np.asarray(r)[:k]
        else:
            r0, r1, r2 = (np.asarray(x)[:k] for x in r)
            rho[part], delta[part] = r0, r1
            fm = from_mu[part]
            kappa[part[fm]] = r2[fm]


@jax.custom_jvp
def _no_derivatives(x):
    """``x``; differentiating through it raises a clear ``InputError`` (JAX's own error names pure callbacks)."""
    return x


@_no_derivatives.defjvp
def _no_derivatives_jvp(primals, tangents):
    raise InputError(
        "sr_spectra has no derivatives: its eigenvalues come from LAPACK on the host and from closed forms, "
        "and rho, Delta and kappa are not differentiable where eigenvalues or singular values meet; use "
        "finite differences in gamma or A"
    )


def _traced(A, gamma, method, normalize, dtype, solver, chunk_size):
    """sr_spectra inside a trace: explicit method, no validation or closed-form detection, kappa from SVDs."""
    if method == "auto":
        raise InputError("inside jax.jit, sr_spectra needs method='eigh' (symmetric A) or method='eig'")
    if not isinstance(gamma, jax.core.Tracer) and np.asarray(gamma).dtype.kind in "USO":
        raise InputError(f"gamma must be a number (or an array of numbers) in [0, 1); got {gamma!r:.60}")
    A, gamma = _no_derivatives(jnp.asarray(A)), _no_derivatives(jnp.asarray(gamma))
    dt = (
        jnp.dtype(dtype)
        if dtype is not None
        else (A.dtype if jnp.issubdtype(A.dtype, jnp.floating) else _default_dtype())
    )
    if dt not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)):  # dtypes are known when traced: checked
        # (bfloat16 gave rho 19.75 for 20, int32 rho = kappa = 1, float16 an error inside LAPACK: an outside tester)
        raise InputError(
            f"sr_spectra works in float32 or float64; got {'dtype=' + repr(dtype) if dtype is not None else 'A of dtype ' + str(A.dtype)}"
            " (cast A, or pass dtype='float32' or 'float64')"
        )
    A = A.astype(dt)
    g = jnp.asarray(gamma).astype(dt)
    batch, n = A.shape[:-2], A.shape[-1]
    try:
        out_shape = np.broadcast_shapes(batch, g.shape)
    except ValueError:
        raise InputError(f"gamma of shape {g.shape} does not broadcast against the graph batch {batch}") from None
    flatA = A.reshape(-1, n, n)
    # a graph with a NaN or inf entry gives NaN (unvalidated here, it ran as isolated agents, rho = kappa = 1, and
    # LAPACK refuses non-finite input): the solvers get the identity in its place, its results are set NaN below
    bad = ~jnp.all(jnp.isfinite(flatA), axis=(-2, -1))
    flatA = jnp.where(bad[:, None, None], jnp.eye(n, dtype=dt), flatA)
    if normalize:
        s = flatA.sum(-1, keepdims=True)
        P = jnp.where(s > 0, flatA / jnp.where(s > 0, s, 1.0), 0.0)
    else:
        P = flatA
    host = _use_host(solver, n)
    if method == "eigh":
        mu = lp.callback_eigvalsh(flatA) if host else _mu_sym(flatA)
    else:
        mu = lp.callback_eigvals(P)
    idx = np.broadcast_to(np.arange(flatA.shape[0]).reshape(batch), out_shape).ravel()
    gf = jnp.broadcast_to(g, out_shape).ravel()
    bad_g = ~((gf >= 0) & (gf < 1))  # NaN and gamma outside [0, 1) give NaN too (0 in their place meanwhile),
    if dt == jnp.float32:  # ... and, in float32, a gamma closer to 1 than it resolves (the eager call refuses it)
        bad_g |= gf > F32_GAMMA_MAX
    gf = jnp.where(bad_g, 0, gf)
    if host:
        kappa = lp.callback_svd_kappa(P, jnp.asarray(idx), gf)
    else:
        size, _ = _chunks(idx.size, 3 * n * n * jnp.dtype(dt).itemsize, chunk_size)
        kappa = jax.lax.map(
            lambda ig: _svd_kappa(P, ig[0][None], ig[1][None])[0],
            (jnp.asarray(idx), gf),
            batch_size=min(size, idx.size),
        )
    rho, delta, kappa = _finish(mu, jnp.asarray(idx), gf, kappa, jnp.zeros(idx.size, bool))
    nan = bad[jnp.asarray(idx)] | bad_g
    rho, delta, kappa = (jnp.where(nan, jnp.nan, x).reshape(out_shape) for x in (rho, delta, kappa))
    return SRSpectra(
        rho, delta, kappa, method, np.broadcast_to(np.array(method), out_shape), "host" if host else "device"
    )


# ----------------------------------------------------------------------------- time-varying operators (A.5)
def gat_transition(h, adjacency, W, a, reliability=None, beta: float = 0.0, negative_slope: float = 0.2, phi=None):
    """Attention-weighted transition P(t) of SR paper eq. 7 (GAT-style, Velickovic et al.).

    e_ij = LeakyReLU(a^T [W h_i || W h_j]) + beta phi(r_j);  P_ij = softmax_j over the neighbours of i.

    h: (..., n, f) agent features; adjacency: (n, n) support (A_ij > 0: i reads j); W: (f', f); a: (2 f',);
    reliability: (..., n) running scores r_j (default none); phi: monotone map (default identity; with
    r_j estimating 1/sigma_j^2, ``phi = jnp.log`` and beta = 1 give the variance-optimal weights of A.5).
    Agents without neighbours keep a zero row. Leading axes of h (e.g. time) are batched.

    Arguments: ``h``, ``adjacency``, ``W``, ``a``, ``reliability``, ``phi`` as above; ``beta`` the weight of the
    reliability term; ``negative_slope`` the LeakyReLU's slope for negative scores. Returns ``P``, ``(..., n, n)``,
    each row with neighbours summing to 1.
    """
    h = jnp.asarray(h)
    mask = jnp.asarray(adjacency) > 0
    z = h @ jnp.asarray(W).T  # (..., n, f')
    fp = z.shape[-1]
    a = jnp.asarray(a)
    if a.shape != (2 * fp,):
        raise InputError(f"a must have shape ({2 * fp},) for W h of width {fp}; got {a.shape}")
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
    """M(t) = I + gamma P(t) M(t+1), t = H-1 .. 0, with M(H) = I (SR paper A.5).

    Arguments: ``P_seq`` the transitions, ``(..., H, n, n)``; ``gamma`` the discount. Returns the ``M(t)``,
    ``(..., H, n, n)`` (JAX; unchecked: see :func:`time_varying_kappa` for the checked reductions)."""
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
    """The three reductions of SR paper A.5 for a sequence of row-stochastic P(t).

    Arguments: ``P_seq`` the transitions, ``(..., H, n, n)``, each row-stochastic (checked); ``gamma`` the
    discount in [0, 1). Returns a :class:`TimeVaryingKappa` (instantaneous, time-averaged and worst-case kappa)."""
    P = np.asarray(P_seq)
    if P.ndim < 3:
        raise InputError(f"P_seq must be (..., H, n, n); got shape {P.shape}")
    check_stochastic(P, "P_seq", tol=1e-5)
    g = float(check_gamma(gamma))
    return _tv_kappa(jnp.asarray(P_seq), g)
