"""simulate_consensus with X0 already on the device (no host round trip of X0), and the CPU's tiled modal
projection (the same numbers as one product, D(0) as numpy's float64 closed form)."""

import mmap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mascot.execute.consensus as ec
from host_reads import watch
from mascot import simulate_consensus
from mascot.graphs import complete_weights, ring_weights
from mascot.kernels import consensus as kc

pytestmark = pytest.mark.x64


@pytest.fixture
def host_reads(monkeypatch):
    """Shapes of the jax.Arrays read into host memory by the consensus driver and kernels: through numpy
    (module-level ``np`` of both) or through ``ArrayImpl._value`` (``jax.device_get``, ``float``, ...)."""
    return watch(monkeypatch, (ec, kc))


def _problem(N, B, d, seed):
    rng = np.random.default_rng(seed)
    X0 = rng.uniform(size=(B, N, d))
    P = np.zeros((N, N))
    for w in rng.dirichlet(np.ones(3)):
        P[np.arange(N), rng.permutation(N)] += w
    return X0, complete_weights(N, 0.4), ring_weights(N, 0.6), 0.5 * np.eye(N) + 0.5 * P, rng.uniform(0, 5000, B)


def test_spy_sees_host_reads(host_reads):
    x = jax.device_put(np.ones((5, 4, 3)))
    ec.np.asarray(x[1:])
    kc.np.concatenate([x[:1], x[:2]])
    jax.device_get(x[:2])
    float(x[0, 0, 0])
    assert host_reads == [(4, 4, 3), (1, 4, 3), (2, 4, 3), (2, 4, 3), ()]
    assert ec.np.float64 is np.float64 and ec.np.linalg is np.linalg  # types and modules pass through


@pytest.mark.parametrize("case", ["modal", "modal5", "matrix", "noisy"])
def test_device_x0_has_no_host_round_trip(case, host_reads, monkeypatch):
    # N = 64: the tiled CPU projection; N = 5: one product; the others go through _run_chunk
    N = {"modal": 64, "modal5": 5}.get(case, 6)
    B, d = 5000, 3
    X0, K, R, G, b0 = _problem(N, B, d, 1)
    W1, W2 = {"modal": (K, R), "modal5": (K, R), "matrix": (G, R), "noisy": (K, G)}[case]
    kw = dict(c1=600.0, c2=100.0, eta=0.1, eps=0.03, b0=b0, max_rounds=40, dtype="float64", chunk_size=1700)
    if case == "noisy":
        kw.update(noise=0.003, key=jax.random.split(jax.random.key(2), B))
    ref = simulate_consensus(X0, W1, W2, **kw)  # numpy X0: 3 chunks, the last one padded
    Xd = jax.device_put(X0)
    calls, rollout = [], kc.modal_closed  # the noise-free modal path (whole-number costs: no round loop)
    monkeypatch.setattr(
        kc, "modal_closed", lambda X, *a, **k: calls.append((X.shape, a[5:], k.get("rows"))) or rollout(X, *a, **k)
    )
    host_reads.clear()
    res = simulate_consensus(Xd, W1, W2, **kw)
    if case.startswith("modal"):  # the kernel reads each chunk's rows from the whole X0 (no sliced copy):
        # windows 0, 1700 and 3300 (the last ends at row B, overlapping its predecessor)
        assert [(shape, int(start[0]), rows) for shape, start, rows in calls] == [
            ((B, N, d), 0, 1700),
            ((B, N, d), 1700, 1700),
            ((B, N, d), 3300, 1700),
        ], calls
    big = [s for s in host_reads if len(s) >= 2]  # results are (B,) vectors; any X0 slice has 3 axes
    assert not big, f"arrays of X0's shape went to the host: {big}"
    assert host_reads, "no results read back at all: the spy did not see the device reads"
    for f in ("rounds", "status", "tokens", "d_final", "d0"):
        np.testing.assert_array_equal(getattr(res, f), getattr(ref, f), err_msg=f)
    # the reference itself: D(0) is the float64 closed form sqrt(||X0 - mean||^2 / N)
    c = X0 - X0.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(ref.d0, np.sqrt(np.einsum("bnd,bnd->b", c, c) / N), rtol=1e-12)


@pytest.mark.parametrize("N,B,dtype", [(13, 1000, "float64"), (64, 2500, "float32"), (64, 1999, "float64")])
def test_tiled_projection_equals_one_product(N, B, dtype):
    rng = np.random.default_rng(N)
    X0 = rng.uniform(size=(B, N, 6)).astype(dtype)
    U, lam1, lam2, consts = ec._setup(
        complete_weights(N, 0.4).tobytes(), ring_weights(N, 0.6).tobytes(), N, "auto", dtype, False
    )
    Xd = jnp.asarray(X0)
    (sq, _, _), d0 = kc.modal_init(Xd, consts["U"], consts["S"], noisy=False)
    for tile in (128, 300, 500):  # B is no multiple of these: the last tile overlaps its predecessor
        assert B >= 2 * tile
        (sq_t, m1, m2), d0_t = kc.modal_init(Xd, consts["U"], consts["S"], noisy=False, tile=tile)
        np.testing.assert_array_equal(np.asarray(sq_t), np.asarray(sq), err_msg=f"tile {tile}")
        np.testing.assert_array_equal(np.asarray(d0_t), np.asarray(d0))
        assert not np.asarray(m1).any() and not np.asarray(m2).any()
    # grouped energies against numpy float64: ||U^T X||^2 per mode, summed per eigenvalue pair
    e = np.einsum("bnd,nm->bmd", X0.astype(np.float64), U)
    want = (e * e).sum(axis=2) @ np.asarray(consts["S"], np.float64)[: N - 1]
    rtol = 1e-12 if dtype == "float64" else 2e-5
    np.testing.assert_allclose(np.asarray(sq, np.float64), want, rtol=rtol, atol=rtol * want.max())


def test_tile_and_chunk_sizes():
    # about 3 MiB of X0 per tile: 3 * 2^20 / (64 * 6 * 4 bytes) = 2048 rows; float64 half that
    assert ec._tile(64, 6, jnp.float32) == 2048 and ec._tile(64, 6, jnp.float64) == 1024
    assert ec._tile(256, 6, jnp.float32) == 512
    # the tiled CPU path takes 128 MiB chunks: 2^16 rows at N = 64, d = 6, float32, so 1e5 rows in 2 chunks
    assert ec._chunk_size(100_000, 64, 6, jnp.float32, True, None, "cpu", tiled=True) == 50_000
    assert ec._chunk_size(100_000, 64, 6, jnp.float32, True, None, "cpu") == 14_286  # untiled: 7 chunks


def _placed(nbytes, pad, page_end=False):
    """An ``nbytes`` buffer starting ``pad`` bytes past a 64-byte boundary (or ending exactly at a page end),
    inside an anonymous mapping of whole pages that keeps it alive."""
    pages = -(-(nbytes + 2 * mmap.PAGESIZE) // mmap.PAGESIZE)
    m = np.frombuffer(mmap.mmap(-1, pages * mmap.PAGESIZE), np.uint8)  # page-aligned
    if page_end:
        start = m.size - mmap.PAGESIZE - nbytes
    else:  # the 64 bytes after the buffer on its own last page (else the kernel copies: tested below)
        start = next(s for s in range(64 + pad, 4096, 64) if 0 < (s + nbytes) % mmap.PAGESIZE <= mmap.PAGESIZE - 64)
    return m[start : start + nbytes]


def test_from_boundary_stays_on_the_arrays_pages():
    # the flat view of an unaligned X0 spans 64 bytes more than X0, before and after it, never off X0's pages
    x = _placed(600 * 64 * 4 * 4, 16).view(np.float32).reshape(600, 64, 4)
    flat, skip = ec._from_boundary(x)
    assert flat.ctypes.data % 64 == 0 and flat.ctypes.data == x.ctypes.data - 16 and skip == 4
    assert flat.size == x.size + 16 and not flat.flags.writeable
    np.testing.assert_array_equal(flat[skip : skip + x.size], x.ravel())
    end = _placed(600 * 64 * 4 * 4, 0, page_end=True).view(np.float32).reshape(600, 64, 4)
    assert (end.ctypes.data + end.nbytes) % mmap.PAGESIZE == 0
    assert ec._from_boundary(end) is None  # its padding after the last entry would be on the next page
    assert ec._from_boundary(end, room=64) is not None  # ... unless the caller knows those bytes are there
    assert ec._from_boundary(_placed(4 * 100, 2).view(np.float32)) is None  # address no multiple of 4
    assert ec._from_boundary(np.zeros((50, 64, 4), np.float32)[:, ::2]) is None  # not contiguous


@pytest.mark.parametrize(
    "dtype,pad,N,d", [("float32", 16, 64, 6), ("float32", 4, 13, 1), ("float64", 8, 64, 6), ("float64", 48, 13, 3)]
)
def test_unaligned_host_x0_read_in_place(dtype, pad, N, d, monkeypatch):
    # a numpy X0 that does not start on a 64-byte boundary (numpy's usual 16 bytes past one): the tiled CPU
    # path reads it from the boundary before it (no aligned copy), with the same numbers as an aligned X0,
    # and one compiled kernel serves every alignment
    tile = ec._tile(N, d, jnp.dtype(dtype))
    B = 2 * tile + 601  # the tiled loop runs, its last tile overlapping its predecessor
    itemsize = np.dtype(dtype).itemsize
    rng = np.random.default_rng(pad)
    X0 = _placed(B * N * d * itemsize, pad).view(dtype).reshape(B, N, d)
    X0[...] = rng.uniform(size=(B, N, d))
    assert X0.ctypes.data % 64 == pad
    aligned = ec._aligned(X0.copy())
    assert aligned.ctypes.data % 64 == 0
    kw = dict(c1=600.0, c2=100.0, eta=0.1, eps=0.03, b0=rng.uniform(0, 5000, B), max_rounds=40, dtype=dtype)
    W1, W2 = complete_weights(N, 0.4), ring_weights(N, 0.6)
    copies, seen = [], []
    real_aligned, real_put = ec._aligned, ec.jax.device_put

    def spy_aligned(a):
        copies.append(a.shape)
        return real_aligned(a)

    def spy_put(x, *a, **k):
        seen.append(getattr(x, "ctypes", None))
        return real_put(x, *a, **k)

    # one chunk; then chunks of 1,700 rows (each at another alignment when a row is no multiple of 64 bytes,
    # the last overlapping its predecessor instead of padded)
    for chunk in (None, 1700):
        ref = simulate_consensus(aligned, W1, W2, chunk_size=chunk, **kw)
        copies.clear(), seen.clear()
        monkeypatch.setattr(ec, "_aligned", spy_aligned)
        monkeypatch.setattr(ec.jax, "device_put", spy_put)
        res = simulate_consensus(X0, W1, W2, chunk_size=chunk, **kw)
        monkeypatch.undo()
        assert not copies, f"X0 was copied to aligned memory: {copies}"
        flat = [c for c in seen if c is not None]
        assert flat and all(c.data % 64 == 0 for c in flat)
        assert flat[0].data == X0.ctypes.data - pad  # the first chunk: X0's own memory
        for f in ("rounds", "status", "tokens", "d_final", "d0"):
            np.testing.assert_array_equal(getattr(res, f), getattr(ref, f), err_msg=f"{f}, chunk {chunk}")
    c = X0.astype(np.float64) - X0.astype(np.float64).mean(axis=1, keepdims=True)
    rtol = 1e-12 if dtype == "float64" else 2e-6
    np.testing.assert_allclose(res.d0, np.sqrt(np.einsum("bnd,bnd->b", c, c) / N), rtol=rtol)
    # another alignment of the same shape compiles nothing new
    compiled = kc.modal_closed._cache_size()
    other = _placed(X0.nbytes, (pad + 32) % 64).view(dtype).reshape(X0.shape)
    other[...] = X0
    again = simulate_consensus(other, W1, W2, chunk_size=1700, **kw)
    assert kc.modal_closed._cache_size() == compiled
    np.testing.assert_array_equal(again.d_final, res.d_final)
