"""The accelerator-shaped eigenvalue solvers (mascot.kernels.spectra_batched) against numpy/scipy float64, and
sr_spectra's device path above n = 32, which uses them, against the host LAPACK path."""

import re

import jax
import numpy as np
import pytest
import scipy.linalg

from mascot import graphs as tp
from mascot.kernels import spectra_batched as sb
from mascot.kernels.spectra import sr_spectra

pytestmark = pytest.mark.x64
GAMMAS = np.array([0.1, 0.5, 0.9, 0.99])


def _sym_cases(rng):
    n = 12
    R = rng.standard_normal((4, n, n))
    cases = [
        (R + np.swapaxes(R, -1, -2)) / 2,  # generic
        np.stack([np.diag(rng.standard_normal(n)) for _ in range(2)]),  # already tridiagonal: every reflector is I
        np.zeros((1, n, n)),
        np.stack([np.full((n, n), 1.0 / n), np.eye(n)]),  # eigenvalue 0 (or 1) repeated n - 1 times
        np.stack([np.kron(np.eye(3), np.ones((4, 4)) / 4)]),  # three components: the top eigenvalue 1 three times
        1e-30 * ((R[:1] + np.swapaxes(R[:1], -1, -2)) / 2),  # tiny entries
    ]
    return np.concatenate(cases)


def test_sym_extreme_eigenvalues_against_numpy(rng):
    S = _sym_cases(rng)
    ev = np.linalg.eigvalsh(S)
    got = np.asarray(sb.sym_extreme_eigenvalues(S))
    scale = np.abs(ev).max(-1, keepdims=True)
    err = np.abs(got - ev[:, [0, -2, -1]])
    # LAPACK's class: eps * ||S|| (the zero matrix came out 1e-323 on an H200: the floor is for it)
    assert np.all(err <= 16 * np.finfo(float).eps * scale + 1e-300), (err / np.maximum(scale, 1e-300)).max()
    for n in (2, 3, 40):
        X = rng.standard_normal((3, n, n))
        X = X + np.swapaxes(X, -1, -2)
        np.testing.assert_allclose(
            np.asarray(sb.sym_extreme_eigenvalues(X)), np.linalg.eigvalsh(X)[:, [0, -2, -1]], rtol=0, atol=1e-13
        )


def test_every_eigenvalue_of_a_tridiagonal_by_multisection(rng):
    n = 9
    d, e = rng.standard_normal((5, n)), rng.standard_normal((5, n - 1))
    e[0, 3] = 0.0  # a split: two blocks
    e[1] = 0.0  # diagonal
    got = np.asarray(sb.tridiagonal_eigenvalues(d, e, tuple(range(n))))
    ref = np.stack([scipy.linalg.eigh_tridiagonal(a, b, eigvals_only=True) for a, b in zip(d, e)])
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-14)
    f32 = np.asarray(sb.tridiagonal_eigenvalues(d.astype(np.float32), e.astype(np.float32), (0, n - 1)))
    assert f32.dtype == np.float32
    np.testing.assert_allclose(f32, ref[:, [0, -1]], rtol=0, atol=2e-6)


def test_extreme_singular_values_against_numpy(rng):
    for n in (2, 5, 33):
        C = rng.standard_normal((4, n, n))
        C[1, :, 0] = C[1, :, 1]  # singular: sigma_min = 0
        C[2] = np.diag(rng.uniform(0.5, 2.0, n))
        s = np.linalg.svd(C, compute_uv=False)
        got = np.asarray(sb.extreme_singular_values(C))
        np.testing.assert_allclose(got, s[:, [-1, 0]], rtol=0, atol=2e-14 * s[:, 0].max())
    # I - gamma P of an irregular graph near gamma = 1: kappa to a few eps * kappa
    A = tp.erdos_renyi(48, 0.2, 6, seed=rng)
    P = A / A.sum(-1, keepdims=True)
    for g in (0.5, 0.99, 0.9999):
        C = np.eye(48) - g * P
        s = np.linalg.svd(C, compute_uv=False)
        got = np.asarray(sb.extreme_singular_values(C))
        np.testing.assert_allclose(got[:, 1] / got[:, 0], s[:, 0] / s[:, -1], rtol=1e-14 * (s[:, 0] / s[:, -1]).max())


def test_reductions_are_similarity_transforms(rng):
    """The tridiagonal has S's whole spectrum, the bidiagonal C's singular values (not only the extremes)."""
    n = 17
    X = rng.standard_normal((2, n, n))
    S = X + np.swapaxes(X, -1, -2)
    d, e = (np.asarray(v) for v in sb.tridiagonalize(S))
    T = np.stack([np.diag(a) + np.diag(b, 1) + np.diag(b, -1) for a, b in zip(d, e)])
    np.testing.assert_allclose(np.linalg.eigvalsh(T), np.linalg.eigvalsh(S), atol=1e-13)
    d, e = (np.asarray(v) for v in sb.bidiagonalize(X))
    Bd = np.stack([np.diag(a) + np.diag(b, 1) for a, b in zip(d, e)])
    np.testing.assert_allclose(np.linalg.svd(Bd, compute_uv=False), np.linalg.svd(X, compute_uv=False), atol=1e-13)


def _mixed(rng, n):
    return np.concatenate(
        [
            tp.erdos_renyi(n, 0.2, 4, seed=rng),  # irregular undirected: kappa from singular values
            tp.random_regular(n, 6, 2, seed=rng),  # regular: P symmetric, kappa from eigenvalues
            (rng.random((2, n, n)) < 0.2) * rng.random((2, n, n)),  # directed: eig on the host
            np.pad(tp.ring(n - 3), ((0, 3), (0, 3)))[None],  # isolated agents
            tp.chain(n)[None],  # a closed form
        ]
    )


@pytest.mark.parametrize("dtype, rtol", [("float64", 1e-10), ("float32", 2e-3)])
def test_device_path_above_32_equals_host(rng, dtype, rtol):
    A = _mixed(rng, 40)
    h = sr_spectra(A[:, None], GAMMAS, solver="host", dtype=dtype)
    d = sr_spectra(A[:, None], GAMMAS, solver="device", dtype=dtype)
    assert d.solver == "device" and (h.methods == d.methods).all()
    assert d.kappa.dtype == np.dtype(dtype)
    for a, b in zip(h[:3], d[:3]):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=rtol, atol=rtol * 1e-2)
    # chunks of 3 pairs (graphs split across chunks) give the same numbers: bitwise on a CPU; on a GPU other
    # batch shapes take other kernels, and the last bits of sigma_min reach kappa amplified by kappa (H200: 2e-14
    # relative at kappa = 172 in float64, 4e-6 in float32)
    c = sr_spectra(A[:, None], GAMMAS, solver="device", dtype=dtype, chunk_size=3)
    tol = 16 * np.finfo(dtype).eps * float(np.max(np.asarray(d.kappa)))
    for a, b in zip(c[:3], d[:3]):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0 if jax.default_backend() == "cpu" else tol)


def test_device_path_above_32_under_jit_is_pure(rng):
    A = tp.erdos_renyi(36, 0.25, 3, seed=rng)
    f = jax.jit(lambda a, g: sr_spectra(a, g, method="eigh", solver="device")[:3])
    got = np.stack([np.asarray(x) for x in f(A[:, None], GAMMAS)], -1)
    ref = sr_spectra(A[:, None], GAMMAS, solver="host", family=None)
    np.testing.assert_allclose(got, np.stack([np.asarray(x) for x in ref[:3]], -1), rtol=1e-10)
    jx = str(jax.make_jaxpr(lambda a, g: sr_spectra(a, g, method="eigh", solver="device").kappa)(A, 0.9))
    assert "callback" not in jx and not re.search(r"\b(eigh|svd)\[", jx)  # no LAPACK/cuSOLVER primitive
