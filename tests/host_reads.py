"""Watch for host reads of jax.Arrays (tests/test_sharding.py, tests/test_sweep_device.py): on CPU
``np.asarray(jax_array)`` reads the device buffer through the buffer protocol, which no Python hook on the
array sees, so the modules under test get a numpy that records every jax.Array handed to it, and
``ArrayImpl._value`` (``jax.device_get``, ``float``, ...) is wrapped."""

import jax
import numpy as np
from jax._src import array as jax_array


class NumpySpy:
    """numpy for one module, recording the shape of every jax.Array passed to a numpy function."""

    def __init__(self, shapes):
        self._shapes = shapes

    def __getattr__(self, name):
        v = getattr(np, name)
        if not callable(v) or isinstance(v, type):
            return v

        def call(*args, **kwargs):
            for a in jax.tree_util.tree_leaves((args, kwargs), is_leaf=lambda x: isinstance(x, jax.Array)):
                if isinstance(a, jax.Array):
                    self._shapes.append(tuple(a.shape))
            return v(*args, **kwargs)

        return call


def watch(monkeypatch, modules) -> list:
    """Start recording: returns the list the shapes of host-read jax.Arrays are appended to (reads through
    ``modules``' module-level ``np`` or through ``ArrayImpl._value``)."""
    shapes = []
    prop = jax_array.ArrayImpl._value

    def spy(self):
        shapes.append(tuple(self.shape))
        return prop.fget(self)

    monkeypatch.setattr(jax_array.ArrayImpl, "_value", property(spy))
    for mod in modules:
        monkeypatch.setattr(mod, "np", NumpySpy(shapes))
    return shapes
