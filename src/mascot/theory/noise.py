"""Closed forms of the affine-noise model of multi-agent error, in float64 numpy.

"Predictive Maps of Multi-Agent Reasoning" (the predictive-maps paper), Sec. 3.5 ("error
accumulation under aggregation") and Appendices A.3-A.4. Per step ``t`` each of ``k`` agents
outputs ``e_t^(i) = L e_{t-1} + eta_t^(i)`` with ``eta_t^(i) = b_t + xi_t^(i)``: a bias
``b_t ~ N(0, rho_c sigma^2)`` shared by the ``k`` agents at step ``t`` and independent parts
``xi_t^(i) ~ N(0, (1 - rho_c) sigma^2)``. The topology aggregates the outputs into one state
``e_t = mean_i e_t^(i)``, ``e_0 = 0``, and the cumulative error is ``E_ceg = sum_{t=1..T} |e_t|``.

* :func:`aggregated_variance` -- the variance of the aggregated noise, ``sigma^2/k (1 + (k-1) rho_c)``
  (eq. 5, correlated-noise aggregation).
* :func:`expected_ceg` -- ``E[E_ceg]`` *exactly* for the Gaussian mean-aggregation model (any ``L``);
  :func:`ceg_asymptote` -- its large-``T`` form at ``L = 1``, ``sqrt(2/pi) s (2/3) T^(3/2)``, i.e. the
  ``c sigma T^(3/2) / sqrt(k)`` law of eq. 3 (error scaling with aggregation) with
  ``c = (2/3) sqrt(2/pi)`` when ``rho_c = 0``.
* :func:`ceg_ratio` / :func:`infer_rho_c` -- the chain (``k = 1``) over aggregate ratio of
  ``E[E_ceg]``, ``sqrt(k / (1 + (k-1) rho_c))``, and its inversion (the bias bound of Sec. 3.5).
* :func:`drift_corrected_gain` (eq. 4) and :func:`bias_aware_gain` (eq. 6) -- the effective gains
  ``rho(M) (1/n) sum_i 1/sqrt(k_i)`` and ``rho(M) (1/n) sum_i sqrt((1 + (k_i-1) rho_c)/k_i)``.

Median aggregation has no simple closed form at finite ``k``; :mod:`mascot.kernels.noise` simulates it
(for Gaussian noise the median is the noisier aggregate: its variance over the mean's tends to
``pi/2`` for large ``k``).

These are the ground truth that :mod:`mascot.kernels.noise` is tested against.
"""

from __future__ import annotations

import math

import numpy as np

from mascot.errors import InputError, refuse_traced

__all__ = [
    "validate_noise_params",
    "aggregated_variance",
    "expected_ceg",
    "ceg_asymptote",
    "ceg_ratio",
    "infer_rho_c",
    "drift_corrected_gain",
    "bias_aware_gain",
]

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


# ----------------------------------------------------------------------------- validation
def _finite(name, value):
    refuse_traced(**{name: value})
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a finite real number; got {value!r}") from None
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{name} must be finite; got {value!r}")
    return arr


def _counts(name, value, minimum=1):
    """Integer-valued counts ``>= minimum`` (floats such as 4.0 are accepted), returned as int64."""
    refuse_traced(**{name: value})
    try:
        kind = np.asarray(value).dtype.kind
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be an integer >= {minimum}; got {value!r}") from None
    if kind not in "iuf":  # no bools, strings or objects
        raise InputError(f"{name} must be an integer >= {minimum}; got {value!r}")
    if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
        bad = arr[~np.isfinite(arr) | (arr != np.round(arr))]
        shown = ", ".join(f"{v:g}" for v in np.unique(bad)[:5])
        raise InputError(f"{name} must be an integer >= {minimum}; got non-integer value(s) {shown}")
    if not np.all(arr >= minimum):
        raise InputError(f"{name} must be an integer >= {minimum}; got min {arr.min():g}")
    return arr.astype(np.int64)


_MISSING = object()


def validate_noise_params(*, k=_MISSING, rho_c=_MISSING, sigma=_MISSING, T=_MISSING, L=_MISSING):
    """Check the affine-noise parameters that are given (omitted ones are skipped) and return them.

    ``k`` (agents aggregated per step) and ``T`` (steps) must be integers ``>= 1`` (integer-valued floats
    are accepted); ``rho_c`` (the shared-bias fraction of the noise variance) must lie in ``[0, 1]``;
    ``sigma`` (per-agent noise standard deviation) must be ``>= 0``; ``L`` (the per-step gain) must be
    finite. Scalars and arrays are both accepted. Raises ``ValueError`` naming the parameter and its
    allowed range. Returns a dict of the validated values as numpy arrays (int64 for ``k``, ``T``,
    float64 otherwise), keyed by name.
    """
    out = {}
    if k is not _MISSING:
        out["k"] = _counts("k", k)
    if T is not _MISSING:
        out["T"] = _counts("T", T)
    if rho_c is not _MISSING:
        arr = _finite("rho_c", rho_c)
        if not np.all((arr >= 0.0) & (arr <= 1.0)):
            raise InputError(f"rho_c must lie in [0, 1] (a variance fraction); got {rho_c!r}")
        out["rho_c"] = arr
    if sigma is not _MISSING:
        arr = _finite("sigma", sigma)
        if not np.all(arr >= 0.0):
            raise InputError(f"sigma must be >= 0 (a standard deviation); got {sigma!r}")
        out["sigma"] = arr
    if L is not _MISSING:
        out["L"] = _finite("L", L)
    return out


def _scalar_or_array(x):
    x = np.asarray(x)
    return float(x) if x.ndim == 0 else x


# ----------------------------------------------------------------------------- eq. 5
def aggregated_variance(sigma, k, rho_c):
    """Variance of the mean of ``k`` agents' noise, ``sigma^2/k (1 + (k-1) rho_c)`` (eq. 5).

    ``mean_i eta^(i) = b + mean_i xi^(i)`` has variance ``rho_c sigma^2 + (1 - rho_c) sigma^2 / k``,
    which is eq. 5 of the predictive-maps paper (Sec. 3.5, correlated-noise aggregation): a shared
    bias (``rho_c > 0``) is not averaged away. Arguments broadcast; returns a float for scalar input.
    """
    p = validate_noise_params(sigma=sigma, k=k, rho_c=rho_c)
    sigma, k, rho_c = p["sigma"], p["k"].astype(np.float64), p["rho_c"]
    return _scalar_or_array(sigma**2 / k * (1.0 + (k - 1.0) * rho_c))


# ----------------------------------------------------------------------------- eq. 3
def _ceg_one(s, T, L):
    """``sum_{t=1..T} sqrt(2 v_t / pi)`` with ``v_t = s^2 sum_{j<t} L^(2j)``."""
    if s == 0.0:
        return 0.0
    L2 = L * L
    if L2 == 1.0:
        growth = np.arange(1, T + 1, dtype=np.float64)
    else:
        growth = np.cumsum(L2 ** np.arange(T, dtype=np.float64))
    return float(_SQRT_2_OVER_PI * s * np.sum(np.sqrt(growth)))


def expected_ceg(sigma, k, rho_c, T, L=1.0):
    """Exact ``E[E_ceg] = E[sum_{t=1..T} |e_t|]`` for the Gaussian mean-aggregation model.

    With ``e_0 = 0`` and ``e_t = L e_{t-1} + mean_i eta_t^(i)``, ``e_t`` is Gaussian with mean 0 and
    variance ``v_t = s^2 sum_{j=0}^{t-1} L^(2j)`` where ``s^2`` is the aggregated variance of eq. 5
    (:func:`aggregated_variance`), and ``E|e_t| = sqrt(2 v_t / pi)``. At ``L = 1`` this grows as
    ``sqrt(2/pi) s (2/3) T^(3/2)`` (:func:`ceg_asymptote`), the ``T^(3/2)/sqrt(k)`` law of eq. 3 of the
    predictive-maps paper (Sec. 3.5); for ``|L| < 1`` it grows linearly in ``T``. ``L`` may be any finite
    real (the sign does not matter). Arguments broadcast; returns a float for scalar input.

    Arguments: ``sigma`` the per-agent noise s.d.; ``k`` the agents aggregated per step; ``rho_c`` the shared-
    bias fraction in [0, 1]; ``T`` the number of steps; ``L`` the per-step gain.
    """
    p = validate_noise_params(sigma=sigma, k=k, rho_c=rho_c, T=T, L=L)
    s = np.sqrt(aggregated_variance(p["sigma"], p["k"], p["rho_c"]))
    s, T_, L_ = np.broadcast_arrays(np.asarray(s, dtype=np.float64), p["T"], p["L"])
    out = np.array(
        [_ceg_one(float(a), int(b), float(c)) for a, b, c in zip(s.ravel(), T_.ravel(), L_.ravel())], dtype=np.float64
    ).reshape(s.shape)
    return _scalar_or_array(out)


def ceg_asymptote(sigma, k, rho_c, T):
    """Large-``T`` form of :func:`expected_ceg` at ``L = 1``: ``sqrt(2/pi) s (2/3) T^(3/2)``.

    ``s = sqrt(aggregated_variance(sigma, k, rho_c))`` (eq. 5). This is eq. 3 of the predictive-maps
    paper (Sec. 3.5), ``E[E_ceg] ~ c sigma T^(3/2) / sqrt(k)``, with ``c = (2/3) sqrt(2/pi) ~ 0.532`` at
    ``rho_c = 0``. It follows from ``sum_{t<=T} sqrt(t) = (2/3) T^(3/2) + (1/2) T^(1/2) + O(1)``, so the
    relative error of the asymptote is ``~ 3/(4T)``.

    Returns: the asymptote (float, or an array for array input).
    """
    p = validate_noise_params(sigma=sigma, k=k, rho_c=rho_c, T=T)
    s = np.sqrt(aggregated_variance(p["sigma"], p["k"], p["rho_c"]))
    return _scalar_or_array(_SQRT_2_OVER_PI * s * (2.0 / 3.0) * p["T"].astype(np.float64) ** 1.5)


# ----------------------------------------------------------------------------- chain / aggregate ratio
def ceg_ratio(k, rho_c):
    """Chain (``k = 1``) over ``k``-agent aggregate ratio of ``E[E_ceg]``: ``sqrt(k / (1 + (k-1) rho_c))``.

    ``E[E_ceg]`` is proportional to the aggregated noise standard deviation at any ``T`` and ``L``
    (:func:`expected_ceg`), so the ratio is ``sqrt(sigma^2 / aggregated_variance)`` (eq. 5 of the
    predictive-maps paper, Sec. 3.5): ``sqrt(k)`` for independent noise, 1 for a fully shared bias.

    Returns: the ratio (float, or an array for array input).
    """
    p = validate_noise_params(k=k, rho_c=rho_c)
    k, rho_c = p["k"].astype(np.float64), p["rho_c"]
    return _scalar_or_array(np.sqrt(k / (1.0 + (k - 1.0) * rho_c)))


def infer_rho_c(ratio, k):
    """Invert :func:`ceg_ratio`: the ``rho_c`` at which a ``k``-agent aggregate beats the chain by ``ratio``.

    ``ratio^2 = k / (1 + (k-1) rho_c)`` gives ``rho_c = (k / ratio^2 - 1) / (k - 1)`` (the bias bound of
    Sec. 3.5 of the predictive-maps paper), clipped to ``[0, 1]``:

    * ``ratio`` must lie in ``(0, sqrt(k)]``. ``sqrt(k)`` is the largest gain the model allows (independent
      noise, ``rho_c = 0``); a larger observed ratio would need ``rho_c < 0`` (anti-correlated agents),
      which a shared-bias variance cannot produce, so it raises ``ValueError`` (a relative slack of 1e-12
      absorbs rounding, e.g. ``infer_rho_c(ceg_ratio(k, 0), k) == 0``). Non-positive ratios are
      meaningless and raise too.
    * ``0 < ratio < 1`` (the aggregate is *worse* than the chain) is outside what the model can produce
      (its ratio is ``>= 1``) and is clipped to ``rho_c = 1``, the closest the model gets.
    * ``k = 1`` raises: with one agent the ratio is 1 for every ``rho_c``, which is not identifiable.

    Vectorised over ``ratio``; returns a float for scalar input.
    """
    kk = int(_counts("k", k)) if np.ndim(k) == 0 else None
    if kk is None:
        raise InputError(f"k must be a single integer >= 2; got {k!r}")
    if kk < 2:
        raise InputError(
            "k must be >= 2: with k = 1 the chain/aggregate ratio is 1 for every rho_c, so rho_c cannot be inferred"
        )
    r = _finite("ratio", ratio)
    if not np.all(r > 0.0):
        raise InputError(f"ratio must lie in (0, sqrt(k)] = (0, {math.sqrt(kk):.6g}]; got {ratio!r}")
    if not np.all(r <= math.sqrt(kk) * (1.0 + 1e-12)):
        raise InputError(
            f"ratio must lie in (0, sqrt(k)] = (0, {math.sqrt(kk):.6g}]; got {ratio!r}: a chain/aggregate "
            "ratio above sqrt(k) would need rho_c < 0 (anti-correlated agents), which the shared-bias "
            "model (rho_c = Var(b)/sigma^2 >= 0) cannot produce"
        )
    rho = np.clip((kk / (r * r) - 1.0) / (kk - 1.0), 0.0, 1.0)
    return _scalar_or_array(rho)


# ----------------------------------------------------------------------------- eq. 4 and eq. 6
def _profile(k_profile):
    refuse_traced(k_profile=k_profile)
    try:
        if np.asarray(k_profile).dtype.kind not in "iuf":  # (True and "4" were taken as counts: an outside tester)
            raise ValueError
        arr = np.asarray(k_profile, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"k_profile must be a non-empty 1-D sequence of integers >= 1; got {k_profile!r}") from None
    if arr.ndim == 0:  # one count for every step (the gains average over steps: n does not matter)
        arr = arr.reshape(1)
    if arr.ndim != 1 or arr.size == 0:
        raise InputError(f"k_profile must be a non-empty 1-D sequence of integers >= 1; got shape {arr.shape}")
    return _counts("k_profile", arr).astype(np.float64)


def _rho(rho):
    r = _finite("rho", rho)
    if r.ndim != 0 or r < 0.0:
        raise InputError(f"rho (a spectral radius) must be a scalar >= 0; got {rho!r}")
    return float(r)


def drift_corrected_gain(rho, k_profile):
    """Drift-corrected gain ``rho~ = rho(M) (1/n) sum_i 1/sqrt(k_i)`` (eq. 4 of the predictive-maps paper).

    ``rho`` is the spectral radius ``rho(M)`` (``>= 0``) and ``k_profile`` the aggregation counts
    ``k_1..k_n`` (integers ``>= 1``) of the ``n`` steps: each step's independent noise is reduced by
    ``1/sqrt(k_i)`` (Sec. 3.5); a single integer is every step's count. Equals :func:`bias_aware_gain` at
    ``rho_c = 0``.

    Returns: rho~ (a float; ``rho`` is a scalar).
    """
    k = _profile(k_profile)
    return _rho(rho) * float(np.mean(1.0 / np.sqrt(k)))


def bias_aware_gain(rho, k_profile, rho_c):
    """Bias-aware gain ``rho~_c = rho(M) (1/n) sum_i sqrt((1 + (k_i-1) rho_c) / k_i)`` (eq. 6).

    Eq. 6 of the predictive-maps paper (Sec. 3.5): the drift-corrected gain of eq. 4
    (:func:`drift_corrected_gain`, ``rho_c = 0``) with each step's noise reduction ``1/sqrt(k_i)`` replaced
    by the correlated-noise factor of eq. 5 (:func:`ceg_ratio` inverted); at ``rho_c = 1`` aggregation
    buys nothing and ``rho~_c = rho(M)``.

    Arguments: ``rho`` rho(M) of the topology; ``k_profile`` the number of outputs each agent aggregates (length
    n, or one integer for all); ``rho_c`` the shared-bias fraction in [0, 1] (a scalar).

    Returns: rho~_c (a float; ``rho`` and ``rho_c`` are scalars).
    """
    k = _profile(k_profile)
    rc = float(validate_noise_params(rho_c=rho_c)["rho_c"]) if np.ndim(rho_c) == 0 else None
    if rc is None:
        raise InputError(f"rho_c must be a scalar in [0, 1]; got {rho_c!r}")
    return _rho(rho) * float(np.mean(np.sqrt((1.0 + (k - 1.0) * rc) / k)))
