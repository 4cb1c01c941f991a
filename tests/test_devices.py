"""Several local devices (XLA's forced host devices on CPU) give the same results as one device."""

import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

from mascot import simulate_consensus
from mascot.graphs import complete_weights, ring_weights

SCRIPT = textwrap.dedent("""
    import sys, jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    sys.path.insert(0, {tests!r})
    from test_devices import problems
    import mascot.execute.consensus as kc
    used, orig = set(), kc._run_chunk
    def spy(*a):
        used.add(str(a[-1]))
        return orig(*a)
    kc._run_chunk = spy
    out = {{}}
    assert len(jax.local_devices()) == 4, jax.local_devices()
    for name, (args, kw) in problems().items():
        r = __import__("mascot").simulate_consensus(*args, **kw)
        for f in ("rounds", "status", "spent", "d_final", "d0"):
            out[name + "." + f] = getattr(r, f)
    assert len(used) == 4, used  # the chunks really ran on all four devices
    np.savez({path!r}, **out)
""")


def problems():
    rng = np.random.default_rng(0)
    B, N, d = 3000, 6, 3
    X0 = rng.uniform(size=(B, N, d))
    W1, W2 = complete_weights(N, 0.4), ring_weights(N, 0.6)
    P = np.zeros((N, N))
    for w in rng.dirichlet(np.ones(3)):
        P[np.arange(N), rng.permutation(N)] += w
    G = 0.5 * np.eye(N) + 0.5 * P
    common = dict(c1=600.0, c2=100.0, eta=0.1, eps=0.03, b0=rng.uniform(0, 5000, B), max_rounds=40, dtype="float64",
                  chunk_size=700)
    keys = jax.random.split(jax.random.key(1), B)
    return {
        "modal": ((X0, W1, W2), dict(common)),
        "matrix": ((X0, G, W2), dict(common)),
        "noisy": ((X0, W1, G), dict(common, noise=0.003, key=keys)),
    }


@pytest.mark.x64
def test_four_devices_equal_one(tmp_path):
    path = tmp_path / "four.npz"
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    code = SCRIPT.format(tests=os.path.dirname(__file__), path=str(path))
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    four = np.load(path)
    cpu = jax.devices("cpu")[0]  # the subprocess ran on CPU devices: compare with one CPU device (on a GPU
    for name, (args, kw) in problems().items():  # node the default device differs in the last bits)
        with jax.default_device(cpu):
            r = simulate_consensus(*args, **kw)
        for f in ("rounds", "status", "spent", "d_final", "d0"):
            np.testing.assert_array_equal(four[name + "." + f], getattr(r, f), err_msg=f"{name}.{f}")
