"""PRNG keys as the host drivers take them: a typed key (``jax.random.key(seed)``), a raw ``uint32`` pair
(``jax.random.PRNGKey(seed)``) or an int seed, taken as ``jax.random.key(seed)``; with a batch size, also one
key per trajectory."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from mascot.errors import InputError

__all__ = ["as_key"]


def as_key(key, batch: int | None = None):
    """``key`` as one JAX key; with ``batch = B``, as ``B`` keys (one key is split into ``B``, a batch of ``B``
    keys is taken as it is). ``InputError`` for anything else (a bool, a float, a key batch of another size)."""
    if isinstance(key, (bool, np.bool_)) or (isinstance(key, np.ndarray) and key.dtype == bool):
        raise InputError(f"key must be a PRNG key (jax.random.key(seed)) or an int seed; got {key!r}")
    if isinstance(key, (int, np.integer)) or (isinstance(key, np.ndarray) and key.ndim == 0):
        try:
            return _split(jax.random.key(int(key)), batch)
        except (TypeError, ValueError, OverflowError) as e:
            raise InputError(
                f"key must be a PRNG key (jax.random.key(seed)) or an int seed; got {key!r} ({e})"
            ) from None
    if not isinstance(key, jax.Array):
        try:
            key = jnp.asarray(key)
        except TypeError:
            raise InputError(f"key must be a PRNG key (jax.random.key(seed)) or an int seed; got {key!r}") from None
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    if not typed and not jnp.issubdtype(key.dtype, jnp.unsignedinteger):
        raise InputError(
            f"key must be a PRNG key (jax.random.key(seed)), a uint32 key pair (jax.random.PRNGKey) or an int "
            f"seed; got an array of {key.dtype}"
        )
    if key.shape == (() if typed else (2,)):
        return _split(key, batch)
    want = "one PRNG key or an int seed" + ("" if batch is None else f", or a batch of {batch} keys")
    if batch is None or key.ndim != (1 if typed else 2) or key.shape[0] != batch:
        raise InputError(f"key must be {want}; got shape {key.shape}")
    return key


def _split(key, batch):
    return key if batch is None else jax.random.split(key, batch)
