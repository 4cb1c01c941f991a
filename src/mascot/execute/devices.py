"""Several local devices as one 1-D ``jax.sharding.Mesh`` ("batch"): putting a chunk's arrays with their
batch axis split over the devices, gathering rows of a device array on the devices, and running a one-device
kernel on every device's rows at once (``jax.shard_map``), for the consensus and noise drivers."""

from __future__ import annotations

import functools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

__all__ = ["Shards", "shards", "spec"]


def spec(a, axis=0):
    """PartitionSpec splitting ``a``'s ``axis`` over the mesh ("batch"); 0-d and None: not split."""
    if a is None:
        return None
    if np.ndim(a) == 0:
        return P()
    spec = [None] * np.ndim(a)
    spec[axis] = "batch"
    return P(*spec)


_LOCAL = {}  # (kernel, static args, mesh, specs) -> jitted shard_map of the kernel


@functools.cache
def _resharder(sharding):
    return jax.jit(lambda a: a, out_shardings=sharding)


@functools.cache
def _taker(sharding, dtype):
    def take(X, idx):
        X = jnp.take(X, idx, axis=0)
        return X if dtype is None else X.astype(dtype)

    return jax.jit(take, out_shardings=sharding)


class Shards:
    """A 1-D mesh over the local devices: puts a chunk's arrays with their batch axis split over the
    devices and runs a kernel on every device's rows at once (``jax.shard_map``: each device runs the
    one-device kernel on its own rows, so its numbers are the one-device numbers)."""

    def __init__(self, devices):
        self.mesh = Mesh(np.asarray(devices), ("batch",))
        self.n = len(devices)
        self.replicated = NamedSharding(self.mesh, P())

    def put(self, a, axis=0):
        """``a`` with its ``axis`` split over the devices (0-d: replicated). A jax.Array moves device to
        device (one on several devices through a compiled reshard: ``jax.device_put`` would read it to
        the host)."""
        if a is None:
            return None
        sharding = NamedSharding(self.mesh, spec(a, axis))
        if isinstance(a, jax.Array) and len(a.sharding.device_set) > 1 and a.sharding != sharding:
            return _resharder(sharding)(a)
        return jax.device_put(a, sharding)

    def take(self, X, rows, dtype=None):
        """Rows ``rows`` of the jax.Array ``X`` (cast to ``dtype``), split over the devices: one compiled
        gather on the device(s) holding ``X``, no host round trip."""
        return _taker(NamedSharding(self.mesh, P("batch")), None if dtype is None else jnp.dtype(dtype))(
            X, np.asarray(rows)
        )

    def put_tree(self, tree, axes):
        return jax.tree_util.tree_map(lambda a, ax: self.put(a, ax), tree, axes)

    def local(self, fn, in_specs, out_specs, **static):
        """``fn(*args, **static)`` as one jitted call on all devices, each on its shard of the arguments."""
        key = (fn, tuple(sorted(static.items())), self.mesh, repr(in_specs), repr(out_specs))
        f = _LOCAL.get(key)
        if f is None:
            # check_vma=False: the kernels' loops start from constants (zeros) that vary per device later
            f = _LOCAL[key] = jax.jit(
                jax.shard_map(
                    partial(fn, **static), mesh=self.mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False
                )
            )
        return f

    def rows(self, lo, B, C):
        """``(rows, hi, src)`` of the call starting at batch row ``lo``: the next ``n`` one-device chunks of
        ``C`` rows side by side (device ``k`` gets chunk ``k``, padded as one device pads it; chunks past
        ``B`` repeat row 0), so every device runs exactly the shapes and row positions of the one-device
        path (XLA:CPU's fused products and sums can round differently for another number of rows). The
        call's results for batch rows ``lo:hi`` are at positions ``src``."""
        parts, src = [], []
        for k in range(self.n):
            a = lo + k * C
            real = np.arange(a, min(a + C, B)) if a < B else np.zeros(0, np.int64)
            parts += [real, np.full(C - real.size, a if a < B else 0)]
            src.append(k * C + np.arange(real.size))
        return np.concatenate(parts), min(lo + self.n * C, B), np.concatenate(src)


def shards():
    devs = jax.local_devices()
    return Shards(devs) if len(devs) > 1 else None
