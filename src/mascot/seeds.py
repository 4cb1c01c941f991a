"""Every way mascot turns a seed into random numbers, in one place (numpy only; imports nothing of mascot).

* :func:`hash64` / :func:`uniforms`: counter-based SplitMix64 hashes of integer columns (the state-tracking
  harness's request seeds and its surrogate's draws: a draw depends only on its own coordinates);
* :func:`seed64`: a 63-bit seed from a tuple of integers (SHA-256; the deliberation and debate harnesses'
  request seeds);
* :func:`request_rng`: a ``numpy`` Generator for one request of a surrogate (its seed, or a CRC-32 of its
  messages when it has none);
* :func:`stream_words` / :func:`float_key`: named PCG64 streams (``SeedSequence(seed, spawn_key=key)``),
  the sweeps' common random numbers for X0;
* JAX PRNG keys (belief noise) are derived in :mod:`mascot.sweep.kinds` from (config hash, point index).

Each function's output is part of the reproducibility contract of the results that use it: changing one
changes committed results.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from mascot.errors import InputError

__all__ = ["hash64", "uniforms", "seed64", "request_rng", "crc32", "stream_words", "float_key"]

_GOLD = np.uint64(0x9E3779B97F4A7C15)
_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)


def _splitmix(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x + _GOLD
        z = (z ^ (z >> _S30)) * _C1
        z = (z ^ (z >> _S27)) * _C2
        return z ^ (z >> _S31)


def _u64(c) -> np.ndarray:
    a = np.asarray(c)
    if a.dtype == np.uint64:
        return a
    if a.dtype.kind == "O":
        return np.array([int(x) & 0xFFFFFFFFFFFFFFFF for x in a.ravel()], dtype=np.uint64).reshape(a.shape)
    return a.astype(np.int64).astype(np.uint64)


def hash64(*cols) -> np.ndarray:
    """SplitMix64 chain over integer columns (broadcast): ``h = mix(h ^ c)`` for each column ``c``."""
    arrs = [_u64(c) for c in cols]
    h = np.zeros(np.broadcast_shapes(*(a.shape for a in arrs)), dtype=np.uint64)
    for a in arrs:
        h = _splitmix(h ^ a)
    return h


def uniforms(keys: np.ndarray, k: int) -> np.ndarray:
    """``(len(keys), k)`` uniforms in [0, 1) from 64-bit keys (counter-based: stream ``j`` of each key)."""
    keys = _u64(keys).reshape(-1, 1)
    j = _splitmix(np.arange(1, k + 1, dtype=np.uint64))[None, :]
    return (_splitmix(keys ^ j) >> _S11).astype(np.float64) * (1.0 / 9007199254740992.0)


def seed64(*parts) -> int:
    """A 63-bit seed from integers: the first 8 bytes of SHA-256 of their tuple's repr."""
    h = hashlib.sha256(repr(tuple(int(p) for p in parts)).encode()).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


def crc32(s: str) -> int:
    """CRC-32 of a string's UTF-8 bytes."""
    return zlib.crc32(s.encode())


def request_rng(seed: int, request_seed: int | None, messages) -> np.random.Generator:
    """The Generator a surrogate uses for one request: keyed by its own ``seed`` and the request's seed
    (or, without one, the CRC-32 of the request's messages as JSON)."""
    s = request_seed if request_seed is not None else crc32(json.dumps(messages))
    return np.random.default_rng([int(seed) & 0x7FFFFFFF, int(s) & 0xFFFFFFFFFFFFFFFF])


_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1)), thread_name_prefix="mascot-rng")
    return _POOL


def float_key(value: float) -> int:
    """A float as a stream-key integer (its IEEE-754 bits): equal floats, equal keys."""
    return int(np.float64(value).view(np.uint64))


def stream_words(seed: int, keys, count: int, bits: int = 32) -> np.ndarray:
    """The first ``count`` raw words (``bits`` = 32 or 64) of each stream ``keys[i]`` (a tuple of
    non-negative ints, or one int): ``(len(keys), count)`` uint32 / uint64."""
    if bits not in (32, 64):
        raise InputError(f"bits must be 32 or 64; got {bits}")
    if count < 0:
        raise InputError(f"count must be >= 0; got {count}")
    keys = [tuple(int(v) for v in k) if isinstance(k, tuple) else (int(k),) for k in keys]
    if seed < 0 or any(v < 0 for k in keys for v in k):
        raise InputError("seed and stream keys must be >= 0")
    out = np.empty((len(keys), count), np.uint32 if bits == 32 else np.uint64)
    n64 = (count + 1) // 2 if bits == 32 else count

    def fill(i):
        raw = np.random.PCG64(np.random.SeedSequence(seed, spawn_key=keys[i])).random_raw(n64)
        out[i] = raw.view(np.uint32)[:count] if bits == 32 else raw

    if len(keys) * count >= 1 << 16 and len(keys) > 1:  # numpy releases the GIL while it fills
        list(_pool().map(fill, range(len(keys))))
    else:
        for i in range(len(keys)):
            fill(i)
    return out
