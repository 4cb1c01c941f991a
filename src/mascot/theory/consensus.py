"""Closed forms of the consensus paper, in float64 numpy.

"A Control-Theoretic Approach for Resource-Aware Consensus in Multi-Agent AI" (the consensus paper):
disagreement (eq. 4), consensus-contraction rates (Def. 6, Remark 6), Theorem 1, Corollary 1, the
certificate region (Def. 11, Theorem 2), and Algorithm 1 as a plain Python loop. These are the
ground truth that the JAX kernels in :mod:`mascot.kernels` are tested against.

Conventions that go beyond the paper (each one documented where it is implemented):

* ``rounds_to_reach`` (and Theorem 1's round counts) round a computed log-ratio up with a margin of its own
  rounding error (:func:`ceil_rounds`, 16 ulps): where the ratio lies within that margin of an integer ``k``
  (an exact tie such as ``0.25**2 * D0``) they count ``k + 1``, the round a floating-point run may need, so a
  certificate never claims fewer rounds than the run takes.
* Theorem 1 assumes ``D(0) > eta > eps``. Outside that range we define: ``D(0) <= eps`` needs no round
  (K1 = K2 = 0); ``eps < D(0) <= eta`` needs no mode-1 round (K1 = 0) and
  ``K2 = ceil(log(eps/D0)/log lambda2)``, which is never larger than the paper's ``K2`` from eta and so
  still a valid bound; ``eta <= eps`` means mode 2 is never selected by Algorithm 1 (it stops at
  ``D <= eps`` first), so K2 = 0 and ``K1 = ceil(log(eps/D0)/log lambda1)``, as the paper does itself
  for the Claude example of Sec. V-C.
* Def. 11 written literally gives ``ceil(log(eta/D)/log lambda1) < 0`` for ``D < eta``, i.e. a
  *negative* number of mode-1 rounds, which can certify budgets that are too small; we clamp at 0
  (see ``results/consensus/errata.md``). Its mode-2 term ``ceil(log(eps/eta)/log lambda2) c2`` also stays
  flat while a ring round spends ``c2``, so the literal region is not forward invariant; with K2 counted
  from D (``ceil(log(eps/D)/log lambda2)``, the ``eps < D <= eta`` case above) every round lowers
  ``B*`` by at least its cost, and ``b >= B*(D)`` is kept along Algorithm 1 (tested).
* A mode with ``lambda >= 1`` is not contracting: when its phase is needed, K and B* are ``inf`` and
  nothing is certified, with the reason stated in ``Certificate.reason``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = [
    "disagreement",
    "validate_doubly_stochastic",
    "contraction_rate",
    "circulant_contraction_rate",
    "is_circulant",
    "rounds_to_reach",
    "ceil_rounds",
    "Certificate",
    "theorem1",
    "theorem1_batch",
    "certificate_budget",
    "in_certificate_region",
    "Corollary",
    "corollary1",
    "Algorithm1Result",
    "algorithm1",
    "STATUS_NAMES",
]

from mascot.errors import InputError, refuse_traced
from mascot.status import STATUS_NAMES, canonical_strategy  # noqa: E402  (STATUS_NAMES re-exported)

_ROUND_ULPS = 16  # log-ratio tolerance, in units of the dtype's eps (see ceil_rounds)


def ceil_rounds(r, log_lam, xp=np):
    """Rounds needed for a computed log-ratio ``r = log(target/start) / log(lam)``, conservatively: ``ceil``
    of ``r`` plus its own rounding error bound, ``16 eps (|r| + 1/|log lam|)`` (about 6x the float error of
    the two logs and the division). A certificate then never claims fewer rounds than exact arithmetic
    needs; where ``r`` lies within that bound of an integer ``k`` (an exact tie such as ``D0 * 0.25^2 = eta``,
    or a ``D0`` a few ulps above a boundary) it counts ``k + 1``, the round a floating-point run may need
    there. (A 1e-9 tolerance rounding the other way, before 2026-12, certified budgets the run then exceeded.)

    Arguments: ``r`` the computed log-ratio (scalar or array); ``log_lam`` the log of the contraction rate it
    was divided by; ``xp`` the array module (numpy or jax.numpy).

    Returns: the round count(s), an integer array of ``r``'s shape.
    """
    eps = xp.finfo(getattr(r, "dtype", np.float64)).eps
    tol = _ROUND_ULPS * eps * (xp.abs(r) + 1.0 / xp.abs(log_lam))
    return xp.ceil(r + tol)


# ----------------------------------------------------------------------------- disagreement
def disagreement(X) -> np.ndarray | float:
    """Aggregate disagreement ``D(X) = ||P X||_F / sqrt(N)`` with ``P = I - 11^T/N`` (eq. 4).

    ``X`` has shape ``(..., N, d)`` (a leading batch is allowed) and the result has shape ``(...)``.

    Returns: a float for ``X`` of shape ``(N, d)``, an array ``(B,)`` for a stack ``(B, N, d)``.
    """
    refuse_traced(X=X)
    X = np.asarray(X, dtype=np.float64)
    if X.ndim < 2:
        raise InputError(f"X must have shape (..., N, d); got shape {X.shape}")
    if X.shape[-2] < 1 or X.shape[-1] < 1:
        raise InputError(f"X needs at least one agent and one belief dimension; got shape {X.shape}")
    n = X.shape[-2]
    centred = X - X.mean(axis=-2, keepdims=True)
    d = np.sqrt(np.sum(centred * centred, axis=(-2, -1)) / n)
    return float(d) if d.ndim == 0 else d


# ----------------------------------------------------------------------------- contraction rates
def validate_doubly_stochastic(W, name: str = "W", atol: float = 1e-9) -> np.ndarray:
    """Return ``W`` as float64 after checking Def. 3 (nonnegative, rows and columns sum to 1).

    Raises ``ValueError`` naming the matrix (``name``) and the violated condition. A matrix given in a
    lower precision (e.g. float32) is held to that precision's rounding: ``atol`` grows to ``2 N eps``.
    """
    refuse_traced(**{name: W})
    src = np.asarray(W)
    if np.iscomplexobj(src):  # (the imaginary part was dropped with only a warning)
        raise InputError(f"{name} must hold real numbers; got dtype {src.dtype}")
    if src.dtype.name in ("float16", "bfloat16") or (np.issubdtype(src.dtype, np.floating) and src.dtype.itemsize < 4):
        # (float16 held to its own rounding took row sums off by 5e-3 and ran them as doubly stochastic)
        raise InputError(f"{name} has dtype {src.dtype}: give the weights in float32 or float64")
    W = np.asarray(src, dtype=np.float64)
    if np.issubdtype(src.dtype, np.floating) and src.dtype.itemsize < 8 and W.ndim == 2:
        atol = max(atol, 2 * W.shape[0] * float(np.finfo(src.dtype).eps))
    if W.ndim != 2 or W.shape[0] != W.shape[1] or W.shape[0] < 1:
        raise InputError(f"{name} must be a square (N, N) matrix; got shape {W.shape}")
    if not np.all(np.isfinite(W)):
        raise InputError(f"{name} contains NaN or inf")
    if W.min() < -atol:
        raise InputError(f"{name} must be nonnegative (doubly stochastic); min entry is {W.min():.3g}")
    rows, cols = W.sum(axis=1), W.sum(axis=0)
    if np.max(np.abs(rows - 1.0)) > atol:
        raise InputError(
            f"{name} is not doubly stochastic: row sums must be 1 within {atol:g}; "
            f"worst row sums to {rows[np.argmax(np.abs(rows - 1.0))]:.12g} (weights rounded to a few digits? give "
            "them at full precision)"
        )
    if np.max(np.abs(cols - 1.0)) > atol:
        raise InputError(
            f"{name} is not doubly stochastic: column sums must be 1 within {atol:g}; "
            f"worst column sums to {cols[np.argmax(np.abs(cols - 1.0))]:.12g} (weights rounded to a few digits? "
            "give them at full precision)"
        )
    return W


def is_circulant(W, atol: float = 1e-12) -> bool:
    """True if every row of ``W`` is the previous row shifted right by one.

    Arguments: ``W`` a square matrix; ``atol`` the absolute tolerance of the shift comparison.

    Returns: True or False.
    """
    refuse_traced(W=W)
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or W.shape[0] != W.shape[1]:
        return False
    return all(np.allclose(W[i], np.roll(W[0], i), rtol=0, atol=atol) for i in range(W.shape[0]))


def contraction_rate(W, name: str = "W", method: str = "auto") -> float:
    """Consensus-contraction rate ``lambda(W) = ||W|_{1-perp}||_2 = ||W - 11^T/N||_2`` (Def. 6).

    For doubly stochastic ``W`` both ``1`` and ``1-perp`` are invariant, so the restriction's norm is
    the largest singular value of ``W - 11^T/N``. ``method="auto"`` uses the circulant DFT path
    (Remark 6) when ``W`` is circulant, else the SVD; ``"svd"`` and ``"circulant"`` force one.

    A rate within 16 float64 ulps of 1 is returned as exactly 1 (does not contract): a reducible ``W`` (rate
    1) comes out of the SVD as ``1 - 1e-16``, which would otherwise certify ~1e16 rounds as "contracting".

    Arguments: ``W`` a doubly stochastic (N, N) matrix; ``name`` how error messages call it; ``method`` "auto",
    "svd" or "circulant".
    """
    W = validate_doubly_stochastic(W, name)
    if method not in ("auto", "svd", "circulant"):
        raise InputError(f"method must be 'auto', 'svd' or 'circulant'; got {method!r}")
    if method == "circulant" or (method == "auto" and is_circulant(W)):
        if method == "circulant" and not is_circulant(W):
            raise InputError(f"{name} is not circulant; use method='svd'")
        return _circulant_rate(W[0])  # (W checked above, with a float32 W's own tolerance)
    n = W.shape[0]
    return _snap_one(float(np.linalg.norm(W - np.full((n, n), 1.0 / n), ord=2)))


def _snap_one(rate: float) -> float:
    return 1.0 if rate > 1.0 - 16 * np.finfo(np.float64).eps else rate


def circulant_contraction_rate(first_row, name: str = "W") -> float:
    """Contraction rate of the circulant matrix with first row ``w`` (Remark 6).

    The eigenvalues of a circulant are the DFT of its first row, ``lambda_k = sum_j w_j omega^(jk)``;
    circulants are normal, so the singular values on ``1-perp`` are ``|lambda_k|, k = 1..N-1`` and the
    rate is their maximum (``k = 0`` is the consensus direction, eigenvalue ``sum_j w_j = 1``).

    Arguments: ``first_row`` the circulant's first row ``w`` (length N); ``name`` how error messages call the
    matrix.

    Returns: the rate as a float.
    """
    refuse_traced(first_row=first_row)
    w = np.asarray(first_row, dtype=np.float64)
    if w.ndim != 1 or w.size < 1:
        raise InputError(f"{name}: first row must be a 1-D vector; got shape {w.shape}")
    if np.any(w < -1e-9) or abs(w.sum() - 1.0) > 1e-9:
        raise InputError(
            f"{name}: a circulant is doubly stochastic iff its first row is >= 0 and sums to 1 "
            f"(within 1e-9); its first row sums to {w.sum():.12g}, smallest entry {w.min():.3g}"
        )
    return _circulant_rate(w)


def _circulant_rate(w: np.ndarray) -> float:
    if w.size == 1:
        return 0.0
    return _snap_one(float(np.max(np.abs(np.fft.fft(w)[1:]))))


# ----------------------------------------------------------------------------- Theorem 1
def _check_scalar(name: str, value, *, positive=False, nonnegative=False, finite=False) -> float:
    refuse_traced(**{name: value})
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a real number; got {value!r}") from None
    if math.isnan(v):
        raise InputError(f"{name} must not be NaN")
    if finite and math.isinf(v):
        raise InputError(f"{name} must be finite; got {v}")
    if positive and not v > 0:
        raise InputError(f"{name} must be > 0; got {v}")
    if nonnegative and not v >= 0:
        raise InputError(f"{name} must be >= 0; got {v}")
    return v


def rounds_to_reach(start: float, target: float, lam: float) -> float:
    """Smallest ``K >= 0`` with ``lam**K * start <= target``: ``ceil(log(target/start) / log lam)``.

    Returns ``0`` when ``start <= target``, ``1`` when ``lam == 0`` (one round reaches consensus) and
    ``math.inf`` when ``lam >= 1`` (the mode does not contract). A log-ratio within its own rounding error
    of an integer ``k`` counts ``k + 1`` rounds (:func:`ceil_rounds`: conservative).
    """
    refuse_traced(start=start, target=target, lam=lam)
    if start <= target:
        return 0
    if lam <= 0.0:
        return 1
    if lam >= 1.0:
        return math.inf
    log_lam = math.log(lam)
    q = target / start
    log_q = math.log(q) if 0 < q < math.inf else math.log(target) - math.log(start)  # (q under/overflows)
    k = ceil_rounds(log_q / log_lam, log_lam)
    return max(int(k), 1)  # start > target: at least one round, however close (the tolerance only rounds down)


class Certificate(NamedTuple):
    """Theorem 1 bounds and the Def. 11 membership verdict for one (D0, b0)."""

    d0: float
    eta: float
    eps: float
    lambda1: float
    lambda2: float
    c1: float
    c2: float
    K1: float
    K2: float
    K_star: float
    B_star: float
    reason: str

    @property
    def finite(self) -> bool:
        return math.isfinite(self.B_star)

    def certifies(self, b0: float) -> bool:
        """Def. 11: ``(X0, b0)`` is in the certificate region iff ``b0 >= B*(D(X0))``."""
        return self.finite and float(b0) >= self.B_star

    def margin(self, b0: float) -> float:
        """``b0 - B*``: positive means spare budget, negative a shortfall (``-inf`` if uncertifiable)."""
        return float(b0) - self.B_star


def theorem1(d0, eta, eps, lambda1, lambda2, c1, c2) -> Certificate:
    """Theorem 1 (Resource-Aware Consensus): ``K1, K2, K* = K1 + K2, B* = K1 c1 + K2 c2``.

    ``K1 = ceil(log(eta/D0)/log lambda1)``, ``K2 = ceil(log(eps/eta)/log lambda2)`` (eq. 11), with the
    edge cases of the module docstring. ``B*`` is ``inf`` when a needed mode does not contract.

    Arguments: ``d0`` the initial disagreement D(X0) >= 0; ``eta`` the switching threshold (``eps < eta``);
    ``eps`` the consensus tolerance > 0; ``lambda1``, ``lambda2`` the contraction rates of mode 1 (complete) and
    mode 2 (ring), in [0, 1]; ``c1``, ``c2`` the tokens one round of each mode costs. Returns a
    :class:`Certificate` (``K1``, ``K2``, ``K_star``, ``B_star``).

    Scalars only, checked; for arrays (many trajectories' ``D(X0)``): :func:`certificate_budget` (``B*`` per
    entry, checked) or :func:`theorem1_batch` (``K1``, ``K2``, ``B*``, vectorised, unchecked).
    """
    d0 = _check_scalar("d0", d0, nonnegative=True, finite=True)
    eta = _check_scalar("eta", eta, positive=True)
    eps = _check_scalar("eps", eps, positive=True)
    lambda1 = _check_scalar("lambda1", lambda1, nonnegative=True)
    lambda2 = _check_scalar("lambda2", lambda2, nonnegative=True)
    c1 = _check_scalar("c1", c1, positive=True)
    c2 = _check_scalar("c2", c2, positive=True)
    eta_eff = max(eta, eps)
    if d0 <= eps:
        k1, k2, reason = 0, 0, "D0 <= eps: already in consensus, no round needed"
    elif d0 <= eta_eff:
        k1 = 0
        k2 = rounds_to_reach(d0, eps, lambda2)
        reason = "eps < D0 <= eta: no mode-1 phase"
    else:
        k1 = rounds_to_reach(d0, eta_eff, lambda1)
        k2 = rounds_to_reach(eta_eff, eps, lambda2)
        reason = "eta <= eps: mode 2 is never selected" if eta <= eps else "D0 > eta > eps (Theorem 1)"
    bad = []
    if k1 == math.inf:
        bad.append(f"mode 1 does not contract (lambda1 = {lambda1:.6g} >= 1)")
    if k2 == math.inf:
        bad.append(f"mode 2 does not contract (lambda2 = {lambda2:.6g} >= 1)")
    if bad:
        reason = "no certificate: " + "; ".join(bad)
        b_star = math.inf
    else:  # (a mode not needed costs nothing, whatever its cost: 0 * inf was NaN for c1 = inf, "mode 1 unavailable")
        b_star = (k1 * c1 if k1 else 0.0) + (k2 * c2 if k2 else 0.0)
    return Certificate(d0, eta, eps, lambda1, lambda2, c1, c2, k1, k2, k1 + k2, b_star, reason)


def certificate_budget(d, eta, eps, lambda1, lambda2, c1, c2) -> np.ndarray | float:
    """The certificate boundary ``b = B*(D)`` of Def. 11 / Remark 5, for scalar or array ``D``.

    Arguments: ``d`` the disagreement D (scalar or array); ``eta`` the switching threshold (``eps < eta``);
    ``eps`` the consensus tolerance > 0; ``lambda1``, ``lambda2`` the contraction rates of mode 1 (complete) and
    mode 2 (ring), in [0, 1]; ``c1``, ``c2`` the tokens one round of each mode costs (all but ``d`` scalars).
    Returns ``B*(d)`` of the same shape. Every entry is checked and computed by :func:`theorem1`, one at a time;
    :func:`theorem1_batch` gives the same numbers vectorised (about 100x faster on 10^5 entries), unchecked, and
    takes arrays for every argument.
    """
    refuse_traced(d=d)
    d_arr = np.asarray(d, dtype=np.float64)
    if np.isnan(d_arr).any() or (d_arr < 0).any() or np.isinf(d_arr).any():  # (named as this function names it)
        raise InputError(
            f"d must hold finite disagreements >= 0; got {d_arr[~(np.isfinite(d_arr) & (d_arr >= 0))][:3]}"
        )
    out = np.array([theorem1(x, eta, eps, lambda1, lambda2, c1, c2).B_star for x in d_arr.ravel()])
    out = out.reshape(d_arr.shape)
    return float(out) if out.ndim == 0 else out


def in_certificate_region(d, b, eta, eps, lambda1, lambda2, c1, c2) -> bool:
    """Def. 11: ``(X, b)`` with ``D(X) = d`` is in ``Omega_cert`` iff ``b >= B*(d)`` (and ``b >= 0``).

    Arguments: ``d`` the disagreement D(X); ``b`` the remaining budget; ``eta`` the switching threshold (``eps <
    eta``); ``eps`` the consensus tolerance > 0; ``lambda1``, ``lambda2`` the contraction rates of mode 1
    (complete) and mode 2 (ring), in [0, 1]; ``c1``, ``c2`` the tokens one round of each mode costs.

    Returns: True or False.
    """
    b = _check_scalar("b", b)
    d = _check_scalar("d", d, nonnegative=True, finite=True)  # (named as this function names it, not d0)
    return b >= 0 and theorem1(d, eta, eps, lambda1, lambda2, c1, c2).certifies(b)


# ----------------------------------------------------------------------------- Corollary 1
class Corollary(NamedTuple):
    """Corollary 1 quantities and which of its claimed chains actually hold (computed, not assumed)."""

    K_cmpl: float
    K_ring: float
    B_cmpl: float
    B_ring: float
    K_star: float
    B_star: float
    applies: bool  # lambda1 < lambda2
    condition: bool  # c1/c2 >= log(lambda1)/log(lambda2)
    log_ratio: float  # log(lambda1)/log(lambda2)
    rounds_chain: bool  # K_cmpl <= K* <= K_ring
    cost_chain: bool  # K_ring c2 <= B* <= K_cmpl c1


def corollary1(d0, eta, eps, lambda1, lambda2, c1, c2) -> Corollary:
    """Corollary 1 (Topology Trade-Off): single-mode round counts and costs versus the adaptive bound.

    ``K_cmpl = ceil(log(eps/D0)/log lambda1)``, ``K_ring = ceil(log(eps/D0)/log lambda2)``. The paper
    claims ``K_cmpl <= K* <= K_ring`` when ``lambda1 < lambda2`` and ``K_ring c2 <= B* <= K_cmpl c1``
    when additionally ``c1/c2 >= log lambda1 / log lambda2``. The ceilings can break either chain
    by one round (see the errata), so both are evaluated here rather than assumed.

    Arguments: ``d0`` the initial disagreement D(X0) >= 0; ``eta`` the switching threshold (``eps < eta``);
    ``eps`` the consensus tolerance > 0; ``lambda1``, ``lambda2`` the contraction rates of mode 1 (complete) and
    mode 2 (ring), in [0, 1]; ``c1``, ``c2`` the tokens one round of each mode costs. Returns a
    :class:`Corollary` with both chains evaluated.
    """
    cert = theorem1(d0, eta, eps, lambda1, lambda2, c1, c2)
    k_c = rounds_to_reach(cert.d0, cert.eps, cert.lambda1)
    k_r = rounds_to_reach(cert.d0, cert.eps, cert.lambda2)
    b_c = k_c * cert.c1
    b_r = k_r * cert.c2
    applies = cert.lambda1 < cert.lambda2
    if 0 < cert.lambda1 < 1 and 0 < cert.lambda2 < 1:
        log_ratio = math.log(cert.lambda1) / math.log(cert.lambda2)
    else:
        log_ratio = math.nan
    condition = bool(applies and math.isfinite(log_ratio) and cert.c1 / cert.c2 >= log_ratio)
    return Corollary(
        K_cmpl=k_c,
        K_ring=k_r,
        B_cmpl=b_c,
        B_ring=b_r,
        K_star=cert.K_star,
        B_star=cert.B_star,
        applies=applies,
        condition=condition,
        log_ratio=log_ratio,
        rounds_chain=bool(k_c <= cert.K_star <= k_r),
        cost_chain=bool(b_r <= cert.B_star <= b_c),
    )


# ----------------------------------------------------------------------------- Algorithm 1
class Algorithm1Result(NamedTuple):
    rounds: int
    tokens: float  # tokens spent, b0 - b_final
    d_final: float
    status: int  # 0 consensus, 1 BudgetFail, 2 max_rounds
    d_trace: list  # D(0..rounds)
    b_trace: list  # b_0..b_rounds
    sigma_trace: list  # mode of each executed round (1 or 2)
    cost_trace: list  # cost of each executed round
    x_final: np.ndarray

    @property
    def spent(self):
        """The old name of :attr:`tokens` (kept for code written before 0.2; one name per quantity: ``tokens``,
        as in the sweep tables and :func:`mascot.rollout`)."""
        return self.tokens


def algorithm1(
    X0, W1, W2, c1, c2, eta, eps, b0, strategy: str = "adaptive", max_rounds: int = 64, noise=None
) -> Algorithm1Result:
    """Algorithm 1 (Norm-Threshold Adaptive Consensus) as a plain Python loop in float64.

    At each round ``k``: stop with consensus if ``D(k) <= eps``; stop with ``max_rounds`` if ``k`` rounds
    were already executed; pick ``sigma_k = 1`` if ``D(k) > eta`` else ``2`` (``strategy="mode1"``/
    ``"mode2"`` fix it); return BudgetFail if ``b_k < c_sigma`` (before the round, as the paper states);
    else ``X <- W_sigma X`` (+ ``noise[k]`` if given, an ``(max_rounds, N, d)`` array of perturbations)
    and ``b <- b - c_sigma``.

    Arguments: ``X0`` initial beliefs (N, d); ``W1``, ``W2`` the mode-1 and mode-2 weight matrices (N, N);
    ``c1``, ``c2`` tokens per round of each mode; ``eta`` switching threshold; ``eps`` consensus tolerance;
    ``b0`` initial budget; ``strategy`` "adaptive", "mode1" or "mode2"; ``max_rounds`` the round limit;
    ``noise`` optional per-round perturbations. Returns an :class:`Algorithm1Result` (rounds, tokens, status,
    traces).
    """
    strategy = canonical_strategy(strategy)  # "complete"/"ring" are modes 1/2
    X = np.array(X0, dtype=np.float64)
    Ws = {1: np.asarray(W1, dtype=np.float64), 2: np.asarray(W2, dtype=np.float64)}
    costs = {1: float(c1), 2: float(c2)}
    b = float(b0)
    d = disagreement(X)
    d_trace, b_trace, sigmas, cost_trace = [d], [b], [], []
    k = 0
    while True:
        if d <= eps:
            status = 0
            break
        if k >= max_rounds:
            status = 2
            break
        if strategy == "adaptive":
            sigma = 1 if d > eta else 2
        else:
            sigma = 1 if strategy == "mode1" else 2
        if b < costs[sigma]:
            status = 1
            break
        X = Ws[sigma] @ X
        if noise is not None:
            X = X + np.asarray(noise[k], dtype=np.float64)
        b -= costs[sigma]
        k += 1
        d = disagreement(X)
        d_trace.append(d)
        b_trace.append(b)
        sigmas.append(sigma)
        cost_trace.append(costs[sigma])
    return Algorithm1Result(k, float(b0) - b, d, status, d_trace, b_trace, sigmas, cost_trace, X)


def theorem1_batch(d0, eta, eps, lambda1, lambda2, c1, c2):
    """Vectorised :func:`theorem1`: ``(K1, K2, B_star)`` arrays for arrays of inputs (broadcast).

    Same conventions as :func:`theorem1` (``inf`` for a needed non-contracting mode); inputs are
    assumed valid (this is for sweeps, which validate their parameters first).

    Arguments: arrays (broadcast together): ``d0`` the initial disagreement D(X0) >= 0; ``eta`` the switching
    threshold (``eps < eta``); ``eps`` the consensus tolerance > 0; ``lambda1``, ``lambda2`` the contraction
    rates of mode 1 (complete) and mode 2 (ring), in [0, 1]; ``c1``, ``c2`` the tokens one round of each mode
    costs.

    Returns: ``(K1, K2, B_star)``, arrays of the broadcast shape.
    """
    refuse_traced(d0=d0, eta=eta, eps=eps, lambda1=lambda1, lambda2=lambda2, c1=c1, c2=c2)
    d0, eta, eps, l1, l2, c1, c2 = (np.asarray(a, dtype=np.float64) for a in (d0, eta, eps, lambda1, lambda2, c1, c2))
    shape = np.broadcast_shapes(d0.shape, eta.shape, eps.shape, l1.shape, l2.shape, c1.shape, c2.shape)
    eta_eff = np.maximum(eta, eps)

    def rounds(start, target, lam):  # scalars stay scalars (a sweep passes one lambda per call)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_lam = np.log(lam)
            q = target / start
            log_q = np.where((q > 0) & (q < np.inf), np.log(q), np.log(target) - np.log(start))
            k = ceil_rounds(log_q / log_lam, log_lam)
        k = np.where(lam <= 0, 1.0, np.where(lam >= 1, np.inf, np.maximum(k, 1.0)))  # start > target: >= 1
        return np.where(start <= target, 0.0, k)

    phase1 = d0 > eta_eff
    k1 = np.broadcast_to(np.where(phase1, rounds(d0, eta_eff, l1), 0.0), shape)
    k2 = np.broadcast_to(
        np.where(d0 <= eps, 0.0, np.where(phase1, rounds(eta_eff, eps, l2), rounds(d0, eps, l2))), shape
    )
    with np.errstate(invalid="ignore"):
        b = np.where(
            np.isinf(k1) | np.isinf(k2), np.inf, np.where(k1 > 0, k1 * c1, 0.0) + np.where(k2 > 0, k2 * c2, 0.0)
        )
    # a NaN round count (a NaN rate or D0) is no budget: NaN, not the other mode's cost alone (a NaN lambda1 gave
    # B* = 400: an outside tester)
    b = np.where(np.isnan(k1) | np.isnan(k2), np.nan, b)
    k1, k2 = np.array(k1), np.array(k2)  # writable copies, like the inputs' broadcast shape
    return k1, k2, b
