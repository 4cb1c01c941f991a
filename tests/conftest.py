import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

# float64 tests need 64-bit JAX; float32 tests cast explicitly (dtype="float32").
jax.config.update("jax_enable_x64", True)


def random_doubly_stochastic(rng, n, n_perm=4):
    """Birkhoff: a random convex combination of permutation matrices (generally non-symmetric)."""
    w = rng.dirichlet(np.ones(n_perm))
    W = np.zeros((n, n))
    for weight in w:
        W[np.arange(n), rng.permutation(n)] += weight
    return W


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
