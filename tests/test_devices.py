"""Several local devices (XLA's forced host devices on CPU) give the same results as one device, and the
kernels really ran sharded over all of them (a 1-D mesh, the batch axis split four ways)."""

import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

from limits import HANG_S  # noqa: E402  (a hang guard, not a speed claim)
from mascot import simulate_consensus
from mascot.execute.noise import affine_noise_error
from mascot.graphs import complete_weights, ring_weights

SCRIPT = textwrap.dedent("""
    import sys, jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    sys.path.insert(0, {tests!r})
    from test_devices import problems, noise_problem, FIELDS
    assert len(jax.local_devices()) == 4, jax.local_devices()
    seen = []  # for every sharded kernel call: (devices, batch rows, rows per device) of each batch array

    def record(args):
        for a in jax.tree_util.tree_leaves(args):
            if isinstance(a, jax.Array) and a.ndim >= 1 and a.shape[0] > 1 and not a.sharding.is_fully_replicated:
                seen.append((len(a.sharding.device_set), a.shape, a.sharding.shard_shape(a.shape)))

    def split4(ndev, shape, local):  # one axis (the batch) cut into 4 equal parts, one per device
        cut = [i for i in range(len(shape)) if local[i] != shape[i]]
        return ndev == 4 and len(cut) == 1 and 4 * local[cut[0]] == shape[cut[0]]

    def spy(make):
        def wrapped(*a, **kw):
            f = make(*a, **kw)
            def call(*args):
                record(args)
                return f(*args)
            return call
        return wrapped
    import mascot.execute.devices as ed
    ed.Shards.local = spy(ed.Shards.local)  # both drivers run their sharded kernels through it
    out = {{}}
    for name, (args, kw) in problems().items():
        seen.clear()
        r = __import__("mascot").simulate_consensus(*args, **kw)
        for f in FIELDS:
            if getattr(r, f) is not None:
                out[name + "." + f] = getattr(r, f)
        assert seen, name + ": no sharded kernel call"
        assert all(split4(*s) for s in seen), (name, seen)  # every batch array split over the 4 devices
        assert any(len(s) == 3 and s[1:] == args[0].shape[1:] for _, s, _ in seen), name + ": X0 not sharded"
    # X0 already sharded over the devices: sliced and resharded there, never read to the host (a
    # multi-device array's np.asarray / device_get goes through ArrayImpl._value)
    from jax._src import array as jarr
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    reads, prop = [], jarr.ArrayImpl._value
    jarr.ArrayImpl._value = property(lambda self: reads.append(self.shape) or prop.fget(self))
    Xs = jax.device_put(problems()["modal"][0][0], NamedSharding(Mesh(jax.local_devices(), ("b",)), P("b")))
    np.asarray(Xs[:8])
    assert reads == [(8, 6, 3)], reads  # the spy sees a host read of a sharded array
    for name in ("modal", "matrix", "noisy"):
        args, kw = problems()[name]
        reads.clear()
        r = __import__("mascot").simulate_consensus(Xs, *args[1:], **kw)
        assert reads and not [s for s in reads if len(s) == 3], (name, reads)
        for f in ("rounds", "status", "tokens", "d_final", "d0"):
            assert np.array_equal(getattr(r, f), out[name + "." + f]), (name, f)
    jarr.ArrayImpl._value = prop
    seen.clear()
    out["noise"] = noise_problem()
    assert seen and all(split4(*s) for s in seen), seen
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
    common = dict(
        c1=600.0,
        c2=100.0,
        eta=0.1,
        eps=0.03,
        b0=rng.uniform(0, 5000, B),
        max_rounds=40,
        dtype="float64",
        chunk_size=700,
    )
    keys = jax.random.split(jax.random.key(1), B)
    # N = 64: on one CPU device the projection runs in tiles (kc.modal_init), sharded it does not
    X64 = rng.uniform(size=(B, 64, 6))
    return {
        "modal": ((X0, W1, W2), dict(common)),
        "matrix": ((X0, G, W2), dict(common)),
        "noisy": ((X0, W1, G), dict(common, noise=0.003, key=keys)),
        "modal64": ((X64, complete_weights(64, 0.4), ring_weights(64, 0.6)), dict(common, chunk_size=2100)),
        "trace": ((X0, W1, W2), dict(common, noise=0.003, key=keys, trace=True, return_x=True)),
    }


FIELDS = ("rounds", "status", "tokens", "d_final", "d0", "d_trace", "b_trace", "sigma_trace", "x_final")


def noise_problem():
    k, rho = np.arange(1, 12), np.linspace(0, 0.9, 11)
    return affine_noise_error(
        3, k, rho, 0.5, np.arange(11) % 5 + 2, trials=300, aggregate="median", dtype="float64", chunk_points=3
    )


@pytest.mark.x64
def test_four_devices_equal_one(tmp_path):
    path = tmp_path / "four.npz"
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    code = SCRIPT.format(tests=os.path.dirname(__file__), path=str(path))
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=HANG_S)
    assert res.returncode == 0, res.stderr
    four = np.load(path)
    cpu = jax.devices("cpu")[0]  # the subprocess ran on CPU devices: compare with one CPU device (on a GPU
    for name, (args, kw) in problems().items():  # node the default device differs in the last bits)
        with jax.default_device(cpu):
            r = simulate_consensus(*args, **kw)
        for f in FIELDS:
            if getattr(r, f) is not None:
                np.testing.assert_array_equal(four[name + "." + f], getattr(r, f), err_msg=f"{name}.{f}")
    with jax.default_device(cpu):
        np.testing.assert_array_equal(four["noise"], noise_problem(), err_msg="affine_noise_error")
