"""Grid values computed the same on every machine: correctly rounded, from the numbers as written.

A sweep's grid values decide its results, so they must not depend on the processor. numpy's ``geomspace``
and ``exp`` go through SIMD code whose last bits differ between vector extensions (AVX-512 and AVX2 gave
``316.2277660168379`` and ``316.22776601683796`` for the same ``logspace = [1e2, 1e6, 9]``). Here every
value is the double nearest to the exact value of the formula applied to the *decimal* numbers the user
wrote (``0.1`` means one tenth, as in ``range``):

* ``range = [a, b, c]``: ``a + i c`` for ``a + i c < b`` (``> b`` for a negative step), exact rationals;
* ``linspace = [a, b, n]``: ``a + (b - a) i / (n - 1)``, exact rationals;
* ``logspace = [a, b, n]``: ``a (b / a)^(i / (n - 1))``, decimal ``ln``/``exp`` (correctly rounded by the
  decimal module, integer arithmetic only) at a working precision raised until the double is certain;
* a ``uniform = [lo, hi]`` draw from the uniform ``u`` in [0, 1): ``lo + (hi - lo) u``, exact rationals;
* a ``loguniform = [lo, hi]`` draw from ``u``: ``lo (hi / lo)^u``, decimal ``ln``/``exp`` as for ``logspace``.

Only integer and decimal arithmetic is used, so the values are the same bits everywhere (the test suite
checks them against an exact rational bound, and again with numpy's SIMD dispatch narrowed).
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

__all__ = ["written", "range_values", "range_count", "linspace", "logspace", "uniform", "loguniform"]

_START_DIGITS = 24  # decimal working precision of the first try (doubles need 17 significant digits)


def written(x) -> Decimal:
    """The decimal number a TOML number stands for: an int exactly, a float by its shortest repr (``0.1``
    is one tenth, not the binary double nearest to it)."""
    return Decimal(x) if isinstance(x, int) else Decimal(repr(float(x)))


def range_count(a, b, c) -> int:
    """The number of values of ``range = [a, b, c]``, counted exactly from the decimals as written (in binary
    floating point ``[0.1, 0.4, 0.1]`` gave four values, the stop among them)."""
    fa, fb, fc = (Fraction(written(x)) for x in (a, b, c))
    return max(0, math.ceil((fb - fa) / fc))


def range_values(a, b, c) -> list:
    """``a, a + c, ...`` before ``b``: ints when all three are ints, else the doubles nearest to the exact values."""
    fa, fc = Fraction(written(a)), Fraction(written(c))
    vals = [fa + i * fc for i in range(range_count(a, b, c))]
    if all(isinstance(x, int) for x in (a, b, c)):
        return [int(v) for v in vals]
    return [float(v) for v in vals]  # float(Fraction): one correct rounding


def linspace(a, b, n: int) -> list[float]:
    """``n`` values from ``a`` to ``b`` inclusive, each the double nearest to ``a + (b - a) i / (n - 1)``."""
    if n == 1:
        return [float(written(a))]
    fa, fb = Fraction(written(a)), Fraction(written(b))
    return [float(fa + (fb - fa) * Fraction(i, n - 1)) for i in range(n)]  # int / int division: correctly rounded


def _geometric(base: Decimal, top: Decimal, t) -> float:
    """The double nearest to ``base * (top / base)**t`` (``base, top > 0`` decimals, ``t`` a Fraction or a double in
    [0, 1], taken exactly), by decimal ``ln`` and ``exp`` (each correctly rounded). The working precision is
    raised until both ends of the error bound round to the same double (Ziv's test)."""
    t = Fraction(t)
    prec = _START_DIGITS
    while True:
        with localcontext() as ctx:
            ctx.prec = prec
            x = (top / base).ln() * t.numerator / t.denominator  # four roundings of 10^(1-prec) relative each
            v = base * x.exp()  # exp turns x's absolute error into a relative one; two more roundings
            err = v * (abs(x) + 5) * Decimal(10) ** (2 - prec)
            lo, hi = float(v - err), float(v + err)
        if lo == hi:
            return lo
        if prec >= 192 and t.denominator <= _EXACT_MAX_Q:  # within 10^-190 of a boundary: maybe exactly on one
            return _decide_exactly(base, top, t, lo, hi)
        prec *= 2  # within the bound of a rounding boundary: look closer
        if prec > 4000:  # (a value this close to a boundary with a huge denominator of t: not met in practice)
            return float(v)


_EXACT_MAX_Q = 4096  # the largest denominator of t whose q-th powers are formed to settle a near-tie exactly


def _decide_exactly(base: Decimal, top: Decimal, t: Fraction, lo: float, hi: float) -> float:
    """The nearest of the adjacent doubles ``lo < hi`` to ``v = base (top/base)^t``, ties to even, by exact rational
    arithmetic: with ``t = p/q``, ``v^q = base^(q-p) top^p`` is rational, and the midpoint ``m`` of ``lo`` and ``hi``
    compares with ``v`` as ``m^q`` with ``v^q`` (integer endpoints can put ``v`` exactly on a midpoint)."""
    if lo > hi:
        lo, hi = hi, lo
    p, q = t.numerator, t.denominator
    fb, ft = Fraction(base), Fraction(top)
    target = fb ** (q - p) * ft**p
    m = (Fraction(lo) + Fraction(hi)) / 2
    mq = m**q
    if mq < target:
        return hi
    if mq > target:
        return lo
    mant, _ = math.frexp(lo)
    return lo if int(mant * 2**53) % 2 == 0 else hi  # an exact tie: the one with an even significand


def logspace(a, b, n: int) -> list[float]:
    """``n`` values from ``a`` to ``b`` (both > 0) in geometric progression, each the double nearest to
    ``a (b / a)^(i / (n - 1))``; the endpoints are ``a`` and ``b`` as written."""
    da, db = written(a), written(b)
    if n == 1:
        return [float(da)]
    inner = [_geometric(da, db, Fraction(i, n - 1)) for i in range(1, n - 1)]
    return [float(da)] + inner + [float(db)]


def loguniform(lo, hi, u) -> list[float]:
    """``lo (hi / lo)^u`` for each uniform ``u`` in [0, 1) (doubles, taken exactly), correctly rounded."""
    dl, dh = written(lo), written(hi)
    return [_geometric(dl, dh, float(x)) for x in u]


def uniform(lo, hi, u) -> list[float]:
    """``lo + (hi - lo) u`` for each uniform ``u`` in [0, 1) (doubles, taken exactly), correctly rounded (numpy's
    ``Generator.uniform`` computes it in compiled C, which some compilers fuse into one FMA and others do not)."""
    fl, fh = Fraction(written(lo)), Fraction(written(hi))
    return [float(fl + (fh - fl) * Fraction(float(x))) for x in u]
