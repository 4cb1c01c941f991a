"""Truncated-normal draws from named host streams, independent of how a sweep batches its work.

A stream is ``PCG64(SeedSequence(seed, spawn_key=key))`` for a tuple of non-negative integers ``key``
(numpy's own recipe for independent parallel streams; a sweep uses ``(point,)`` or a tuple naming the
parameters that define a draw). Its first ``count`` raw words (32-bit for float32, 64-bit for float64)
become uniforms, and the inverse normal CDF restricted to ``[lo, hi]`` turns them into exact
truncated-normal draws on the device:
``z = sqrt(2) erfinv(erf(lo / sqrt 2) + u (erf(hi / sqrt 2) - erf(lo / sqrt 2)))``. Draws therefore
depend only on (seed, key), never on the shard, chunk or group they are made in, and a longer draw
extends a shorter one (same key, more words).

Why not ``jax.random``: on a CPU, XLA's threefry produces about 30 M words/s on this 2-core machine
and drawing X0 cost 3-5x the modal rollout it feeds (``benchmarks/bench_sweep.py``); PCG64 words come
at about 500 M/s per core, on worker threads (numpy releases the GIL), and the CDF transform is one
fused XLA pass. The interval must contain 0 (it does for a mean inside [0, 1]): far in one tail the
erf difference loses precision.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from mascot.errors import InputError
from mascot.kernels.precision import x64_enabled
from mascot.seeds import stream_words

__all__ = ["truncated_normal_from_words", "truncated_normal_streams"]


@partial(jax.jit, static_argnames=("dtype",))
def _transform(words, a, b, lo, hi, dtype, loc=0.0, scale=1.0):
    if dtype == jnp.float32:
        # top 23 bits -> [1, 2) by the exponent trick, minus 1: uniform on the 2^-23 grid of [0, 1)
        u = jax.lax.bitcast_convert_type((words >> 9) | jnp.uint32(0x3F800000), jnp.float32) - 1.0
    else:
        u = (words >> 11).astype(jnp.float64) * (2.0**-53)
    z = math.sqrt(2.0) * jax.lax.erf_inv(a + u * (b - a))
    z = jnp.clip(z, lo, hi)  # erfinv(a) may round past lo, and u -> 1 past hi
    return jnp.clip(loc + scale * z, loc + scale * lo, loc + scale * hi)


def truncated_normal_from_words(
    words, lo: float, hi: float, dtype="float32", loc: float = 0.0, scale: float = 1.0
) -> jax.Array:
    """``loc + scale * Z``, Z a standard normal truncated to ``[lo, hi]`` (``lo < 0 < hi`` for full
    precision), from raw words: uint32 for float32 (23-bit uniforms), uint64 for float64 (53-bit
    uniforms; needs ``jax_enable_x64``)."""
    dtype = jnp.dtype(dtype)
    if dtype not in (jnp.float32, jnp.float64):
        raise InputError(f"dtype must be float32 or float64; got {dtype}")
    if not (lo < hi):
        raise InputError(f"need lo < hi; got lo = {lo}, hi = {hi}")
    if dtype == jnp.float64 and not x64_enabled():
        raise InputError("float64 draws need jax_enable_x64 (run inside `with mascot.kernels.precision.float64():`)")
    want = np.dtype(np.uint32 if dtype == jnp.float32 else np.uint64)
    if np.dtype(words.dtype) != want:
        raise InputError(f"{dtype} draws need {want.name} words; got {words.dtype}")
    a, b = math.erf(lo / math.sqrt(2.0)), math.erf(hi / math.sqrt(2.0))
    cast = lambda v: np.asarray(v, dtype)  # noqa: E731  (numpy scalars: no eager device ops)
    return _transform(jnp.asarray(words), cast(a), cast(b), cast(lo), cast(hi), dtype, cast(loc), cast(scale))


def truncated_normal_streams(
    seed: int, keys, shape: tuple, mean: float, spread: float, lower: float = 0.0, upper: float = 1.0, dtype="float32"
) -> jax.Array:
    """``mean + spread * Z`` with Z a standard normal truncated so the result lies in ``[lower, upper]``,
    one block of ``shape`` per stream key (C order): ``(len(keys) * shape[0], *shape[1:])``."""
    if not (spread > 0 and math.isfinite(spread)):
        raise InputError(f"spread must be finite and > 0; got {spread}")
    if not (lower < mean < upper):
        raise InputError(f"mean must lie strictly inside ({lower}, {upper}); got {mean}")
    dtype = jnp.dtype(dtype)
    count = int(np.prod(shape))
    words = stream_words(seed, keys, count, 32 if dtype == jnp.float32 else 64)
    lo, hi = (lower - mean) / spread, (upper - mean) / spread
    x = truncated_normal_from_words(words, lo, hi, dtype, loc=mean, scale=spread)
    return x.reshape((-1, *shape[1:]))
