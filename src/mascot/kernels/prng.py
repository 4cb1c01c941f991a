"""The PRNG keys mascot takes, and the implementation it draws with: ``threefry2x32``, JAX's default. Another
implementation draws other numbers for the same seed, and ``rbg`` keys are not independent under ``vmap`` (a
trajectory's draws then depend on its batch). The host drivers take a typed key (``jax.random.key(seed)``), a raw
``uint32`` pair (``jax.random.PRNGKey(seed)``) or an int seed in ``[0, 2^32)``, taken as ``jax.random.key(seed)``
(:func:`as_key`); :func:`mascot.rollout` takes keys, not seeds."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from mascot.errors import InputError

__all__ = ["THREEFRY", "check_default_prng", "check_key_impl", "check_key", "is_int_seed", "as_key"]

THREEFRY = "threefry2x32"


def check_default_prng() -> None:
    """``InputError`` unless JAX's default PRNG is threefry2x32 (``JAX_DEFAULT_PRNG_IMPL`` unset): mascot's seeds,
    sweeps and keys assume it (under ``rbg`` a sweep kept its experiment hash but drew other rows, and
    trajectories of one batch shared noise)."""
    impl = jax.config.jax_default_prng_impl
    if impl != THREEFRY:
        raise InputError(
            f"JAX's default PRNG is {impl!r} (JAX_DEFAULT_PRNG_IMPL or jax_default_prng_impl); mascot draws with "
            f"{THREEFRY} keys: another implementation gives other numbers for the same seed, and rbg keys are not "
            "independent under vmap (results would depend on the batch). Unset it."
        )


def check_key_impl(key) -> None:
    """``InputError`` for a typed key of another implementation than threefry2x32 (known at trace time)."""
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) and str(jax.random.key_impl(key)) != THREEFRY:
        raise InputError(
            f"key is a {jax.random.key_impl(key)} key; mascot takes {THREEFRY} keys (jax.random.key(seed)): rbg "
            "keys are not independent under vmap, so a trajectory's noise would depend on its batch"
        )


def is_int_seed(key) -> bool:
    """Whether ``key`` is an integer (Python, numpy or a 0-d integer array), not a key."""
    return (
        isinstance(key, (int, np.integer))
        and not isinstance(key, bool)
        or (
            isinstance(key, (np.ndarray, jax.Array))
            and key.ndim == 0
            and jnp.issubdtype(key.dtype, jnp.integer)
            and not jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
        )
    )


def check_key(key, name: str = "key") -> None:
    """``InputError`` unless ``key`` is one threefry2x32 PRNG key, known at trace time: a typed key of shape ``()``
    or raw ``uint32`` key data of shape ``(2,)`` (one trajectory's or point's; vmap over a batch of keys). For the
    pure cores (:func:`mascot.rollout`, :func:`mascot.affine_noise_point`), which take keys, not seeds."""
    check_default_prng()  # (raw key data of another default implementation is read as that implementation's)
    if is_int_seed(key):
        raise InputError(f"{name} must be a PRNG key (jax.random.key(seed)), not an int: got {key!r}")
    if not hasattr(key, "dtype") or not hasattr(key, "shape"):
        raise InputError(f"{name} must be a PRNG key (jax.random.key(seed)); got {type(key).__name__} {key!r:.40}")
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        check_key_impl(key)
        if key.shape != ():
            raise InputError(f"{name} must be one key (vmap over a batch of keys); got keys of shape {key.shape}")
    elif key.dtype != jnp.uint32 or key.shape != (2,):
        raise InputError(
            f"{name} must be a PRNG key (jax.random.key(seed)) or raw uint32 key data of shape (2,) "
            f"(jax.random.PRNGKey(seed)); got dtype {key.dtype}, shape {tuple(key.shape)}"
        )


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
    if is_int_seed(key):
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
