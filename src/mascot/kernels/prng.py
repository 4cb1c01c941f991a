"""The PRNG implementation mascot draws with: ``threefry2x32``, JAX's default. Another implementation draws other
numbers for the same seed, and ``rbg`` keys are not independent under ``vmap`` (a trajectory's draws then depend on
its batch)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mascot.errors import InputError

__all__ = ["THREEFRY", "check_default_prng", "check_key_impl"]

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
