"""PRNG keys as the host drivers take them: a typed key (``jax.random.key(seed)``), a raw ``uint32`` pair
(``jax.random.PRNGKey(seed)``) or an int seed in ``[0, 2^32)``, taken as ``jax.random.key(seed)``; with a batch
size, also one key per trajectory. Every key is a ``threefry2x32`` key, JAX's default: another implementation
draws other numbers for the same seed, and ``rbg`` keys are not independent under ``vmap`` (a trajectory's
draws then depend on its batch), so :func:`check_default_prng` refuses a process whose default was changed."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from mascot.errors import InputError
from mascot.kernels.prng import THREEFRY, check_default_prng, check_key_impl

__all__ = ["as_key"]

_WHAT = "a PRNG key (jax.random.key(seed)) or an int seed in [0, 2^32)"


def as_key(key, batch: int | None = None):
    """``key`` as one JAX key; with ``batch = B``, as ``B`` keys (one key is split into ``B``, a batch of ``B``
    keys is taken as it is). ``InputError`` for anything else (a bool, a float, a key batch of another size, a key
    of another PRNG implementation)."""
    check_default_prng()
    if isinstance(key, (bool, np.bool_)) or (isinstance(key, np.ndarray) and key.dtype == bool):
        raise InputError(f"key must be {_WHAT}; got {key!r}")
    if key is None:
        raise InputError(f"key must be {_WHAT}; got None")
    int_like = isinstance(key, (int, np.integer)) or (
        isinstance(key, (np.ndarray, jax.Array))
        and key.ndim == 0
        and jnp.issubdtype(key.dtype, jnp.integer)
        and not jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    )
    if int_like:
        seed = int(key)
        if not 0 <= seed < 2**32:  # (without 64-bit JAX types a larger seed kept its low 32 bits: 2^40 was seed 0)
            raise InputError(f"key must be {_WHAT}; got the seed {seed}")
        return _split(jax.random.key(seed, impl=THREEFRY), batch)
    if not isinstance(key, jax.Array):
        try:
            key = jnp.asarray(key)
        except TypeError:
            raise InputError(f"key must be {_WHAT}; got {key!r}") from None
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    if not typed and not jnp.issubdtype(key.dtype, jnp.unsignedinteger):
        raise InputError(
            f"key must be a PRNG key (jax.random.key(seed)), a uint32 key pair (jax.random.PRNGKey) or an int "
            f"seed; got an array of {key.dtype}"
        )
    check_key_impl(key)
    if key.shape == (() if typed else (2,)):
        return _split(key, batch)
    want = "one PRNG key or an int seed" + ("" if batch is None else f", or a batch of {batch} keys")
    if batch is None or key.ndim != (1 if typed else 2) or key.shape[0] != batch:
        raise InputError(f"key must be {want}; got shape {key.shape}")
    return key


def _split(key, batch):
    return key if batch is None else jax.random.split(key, batch)
