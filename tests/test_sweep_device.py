"""A consensus sweep keeps its chunks' X0 on the device: drawn once per sweep (host PCG64 words copied to
the device once, not per chunk), tiled and reused there by every chunk, never read back to the host;
only results come back. The rows are those of a sweep without the cache (every chunk drawing its own X0),
D(0) is numpy's float64 closed form on the same X0, and the belief-noise keys built on the device are the
documented fold_in(fold_in(key(seed), point), 2^31 + t)."""

import threading

import jax
import jax.numpy as jnp
import numpy as np
import pyarrow.parquet as pq
import pytest

import mascot.execute.consensus as ec
import mascot.kernels.sampling as ks
import mascot.sweep.evaluate as ev
import mascot.sweep.runner as runner
from host_reads import watch
from mascot.kernels import consensus as kc
from mascot.sweep import parse_config, run_sweep
from mascot.sweep.evaluate import DeviceCache, _initial_beliefs, _noise_keys

CONFIG = """
[experiment]
kind = "consensus"
name = "device_x0"
seed = 11
chunk_size = 5

[fixed]
trajectories = 40
d = 3
max_rounds = 40

[grid]
n = [5, 16]
noise = [0.0, 0.002]
strategy = ["adaptive", "ring"]
b0 = [800.0, 3000.0, 20000.0]
"""
# 24 points in 5 chunks of 5 (the last one padded); n = 16 > kc.SMALL_N takes the CPU's tiled modal
# projection, noise > 0 the chunked _run_chunk path; 4 distinct X0 draws: (n, trajectories) x 1 spread


@pytest.fixture
def host_reads(monkeypatch):
    """Shapes of the jax.Arrays read into host memory by the sweep kind, the runner, the consensus driver
    and kernels: through their module-level ``np`` or through ``ArrayImpl._value`` (``jax.device_get``,
    ``float``, ``np.asarray`` elsewhere)."""
    return watch(monkeypatch, (ec, kc, ev, runner))


@pytest.fixture
def word_draws(monkeypatch):
    """Every call of the host PCG64 word generator behind X0 (its words are what is copied to the device)."""
    calls = []
    real = ks.stream_words

    def spy(seed, keys, count, bits=32):
        calls.append((seed, tuple(map(tuple, keys)), count))
        return real(seed, keys, count, bits)

    monkeypatch.setattr(ks, "stream_words", spy)
    return calls


def _rows(path):
    return pq.read_table(path).to_pandas().sort_values(["point", "trajectory"]).reset_index(drop=True)


def test_spy_sees_host_reads(host_reads):
    x = jax.device_put(np.ones((4, 3, 2)))
    ev.np.asarray(x)
    runner.np.array(x[:1])
    jax.device_get(x[0])
    assert host_reads == [(4, 3, 2), (1, 3, 2), (3, 2)]


def test_sweep_x0_is_drawn_once_and_never_read_back(tmp_path, monkeypatch, host_reads, word_draws):
    cfg = parse_config(CONFIG)
    assert cfg.n_chunks == 5
    run_sweep(cfg, tmp_path / "cached", progress=False, workers=2)
    big = [s for s in host_reads if len(s) >= 2]  # results are (B,) vectors; X0 and its slices have 3 axes
    assert not big, f"arrays of X0's shape went to the host: {big}"
    assert host_reads, "no results read back at all: the spy did not see the device reads"
    # one host draw (and one host-to-device copy of its words) per distinct X0 in the whole sweep
    assert sorted(c[2] for c in word_draws) == [40 * 5 * 3, 40 * 16 * 3], word_draws  # n = 5 and n = 16:
    assert len({c[1] for c in word_draws}) == 2  # noise and no noise, every strategy and b0 share X0

    # the same sweep without the cache: every chunk draws its X0 again, and the rows are identical
    monkeypatch.setattr(ev, "X0_CACHE_BYTES", 0)
    word_draws.clear()
    run_sweep(cfg, tmp_path / "uncached", progress=False, workers=1)
    assert len(word_draws) > 2 * cfg.n_chunks - 2, "without the cache each chunk group draws its X0"
    a, b = (_rows(tmp_path / name / "chunks") for name in ("cached", "uncached"))
    assert len(a) == 24 * 40
    for col in a.columns:
        np.testing.assert_array_equal(a[col].to_numpy(), b[col].to_numpy(), err_msg=col)

    # D(0) against numpy float64 on the same X0 (drawn here independently of the sweep)
    for n in (5, 16):
        X0 = np.asarray(_initial_beliefs(cfg.key_seed, 40, n, 3, 0.5, 0.15, "float32"), np.float64)
        c = X0 - X0.mean(axis=1, keepdims=True)
        want = np.sqrt(np.einsum("bnd,bnd->b", c, c) / n)
        for _, g in a[a.n == n].groupby("point"):
            np.testing.assert_allclose(g.d0.to_numpy(np.float64), want, rtol=2e-6)
    # the noise acted: noisy rows differ from their noise-free twins (same n, strategy, b0, trajectory)
    noisy, clean = a[a.noise > 0], a[a.noise == 0]
    np.testing.assert_allclose(noisy.d0.to_numpy(), clean.d0.to_numpy(), rtol=1e-6)  # the same X0 (another path)
    assert (noisy.d_final.to_numpy() != clean.d_final.to_numpy()).mean() > 0.5


def test_noise_keys_built_on_the_device_follow_the_definition():
    seed, ids, T = 2**32 - 5, np.array([7, 0, 2**31 + 3], np.uint32), 4  # a seed past int32
    got = jax.random.key_data(_noise_keys(seed, ids, T=T))
    base = jax.random.key(seed)
    want = [
        jax.random.key_data(jax.random.fold_in(jax.random.fold_in(base, int(p)), 2**31 + t))
        for p in ids
        for t in range(T)
    ]
    np.testing.assert_array_equal(np.asarray(got), np.stack([np.asarray(w) for w in want]))


def test_device_cache_bounds_and_builds_once():
    arr = lambda k: jnp.full((k,), k, jnp.float32)  # noqa: E731  (4 k bytes)
    c = DeviceCache(100)
    built = []

    def build(k):
        built.append(k)
        return arr(k)

    for k in (10, 10, 5, 10):  # 40 + 20 bytes fit
        assert int(c.get(k, lambda k=k: build(k))[0]) == k
    assert built == [10, 5] and c.hits == 2 and c.nbytes == 60
    c.get(20, lambda: build(20))  # 80 more: the least recently used (5) goes, then 10
    assert c.nbytes == 80 and built == [10, 5, 20]
    c.get(5, lambda: build(5))
    assert built == [10, 5, 20, 5]
    c.get(30, lambda: build(30))  # 120 bytes > the bound: returned, not kept
    assert c.nbytes <= 100 and 30 not in c._items
    off = DeviceCache(0)
    off.get(1, lambda: build(1)), off.get(1, lambda: build(1))
    assert built[-2:] == [1, 1] and off.nbytes == 0

    # a key missed by several threads at once is built by one of them
    slow, gate, calls = DeviceCache(1 << 20), threading.Event(), []

    def build_slow():
        calls.append(1)
        gate.wait(5)
        return arr(3)

    out = []
    threads = [threading.Thread(target=lambda: out.append(slow.get("x", build_slow))) for _ in range(4)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert len(calls) == 1 and len(out) == 4 and all(o is out[0] for o in out)
