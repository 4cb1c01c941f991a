"""SR spectra (SR paper, Sec. 3, A.1, A.5, A.6): topologies, batched kernels vs numpy float64, closed forms,
derived diagnostics, bad input, and the `mascot diagnose` / `mascot reproduce spectra` commands."""

import json

import numpy as np
import pandas as pd
import pytest

from mascot.cli import main
from mascot import graphs as tp
from mascot.kernels.spectra import gat_transition, sr_spectra, time_varying_kappa, time_varying_sr
from mascot.theory import spectra as th

pytestmark = pytest.mark.x64  # float64 references throughout


def _ref(P, g):
    """Independent reference: form M with a dense inverse, eigvals(M) and svd(M) in float64."""
    M = np.linalg.inv(np.eye(P.shape[0]) - g * P)
    lam = np.sort(np.abs(np.linalg.eigvals(M)))[::-1]
    s = np.linalg.svd(M, compute_uv=False)
    return lam[0], lam[0] - lam[1], s[0] / s[-1]


# ----------------------------------------------------------------------------- topologies
def test_builders_shapes_and_zero_row_rule():
    P = tp.row_normalize(tp.chain(12))
    assert P.shape == (12, 12) and np.all(P[-1] == 0) and np.all(np.diag(P, 1) == 1)
    assert np.allclose(np.linalg.matrix_power(P, 12), 0) and not np.allclose(np.linalg.matrix_power(P, 11), 0)
    S = tp.row_normalize(tp.star(4))
    assert np.allclose(S[0], [0, 0.25, 0.25, 0.25, 0.25]) and np.allclose(S[1:, 0], 1)
    assert np.allclose(tp.row_normalize(tp.mesh(4)).sum(1), 1) and np.all(np.diag(tp.mesh(4)) == 0)
    R = tp.ring(6)
    assert np.all(R.sum(1) == 2) and np.allclose(R, R.T)
    assert np.all(tp.ring(6, directed=True).sum(1) == 1)
    Ma = tp.row_normalize(tp.malicious_star(4, 10.0))
    assert np.isclose(Ma[0, 1], 10 / 13) and np.isclose(Ma[0, 2], 1 / 13)
    assert np.allclose(tp.complete_self(5, 0.4), tp.complete_weights(5, 0.4))


def test_random_families(rng):
    er = tp.erdos_renyi(30, 0.2, count=5, seed=rng)
    assert er.shape == (5, 30, 30) and np.allclose(er, np.swapaxes(er, 1, 2)) and np.all(np.diagonal(er, 0, 1, 2) == 0)
    assert abs(er.sum() / (5 * 30 * 29) - 0.2) < 0.05
    ws0 = tp.watts_strogatz(20, 4, 0.0, seed=1)[0]
    assert np.all(ws0.sum(1) == 4)  # beta = 0: the ring lattice
    ws = tp.watts_strogatz(20, 4, 0.5, count=3, seed=2)
    assert np.allclose(ws, np.swapaxes(ws, 1, 2)) and ws.sum() == 3 * 20 * 4 and np.all(np.diagonal(ws, 0, 1, 2) == 0)
    rr = tp.random_regular(16, 8, count=3, seed=3)
    assert np.all(rr.sum(-1) == 8) and np.allclose(rr, np.swapaxes(rr, 1, 2)) and rr.max() == 1
    assert np.all(np.diagonal(rr, 0, 1, 2) == 0)
    # same seed, same graphs
    assert np.array_equal(tp.erdos_renyi(10, 0.5, 2, seed=7), tp.erdos_renyi(10, 0.5, 2, seed=7))


def test_from_spec():
    assert np.array_equal(tp.from_spec("star:4"), tp.star(4))
    assert np.array_equal(tp.from_spec("malicious_star:4:10"), tp.malicious_star(4, 10))
    with pytest.raises(ValueError, match="unknown topology 'tree'"):
        tp.from_spec("tree:3")
    with pytest.raises(ValueError, match="takes 1 argument"):
        tp.from_spec("star")


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.ones((3, 4)), "square"),
        (np.array([[0, -1.0], [1, 0]]), "negative"),
        (np.array([[0, np.nan], [1, 0]]), "NaN"),
        (np.array([["a", "b"], ["c", "d"]]), "numeric"),
    ],
)
def test_bad_adjacency(bad, match):
    with pytest.raises(ValueError, match=match):
        tp.row_normalize(bad)
    with pytest.raises(ValueError, match=match):
        sr_spectra(bad, 0.9)


@pytest.mark.parametrize("gamma", [-0.1, 1.0, 1.5, np.nan])
def test_bad_gamma(gamma):
    with pytest.raises(ValueError, match=r"gamma must be in \[0, 1\)"):
        sr_spectra(tp.star(4), gamma)
    with pytest.raises(ValueError, match="gamma"):
        th.sr_diagnostics(tp.row_normalize(tp.star(4)), gamma)


def test_not_stochastic_is_named():
    with pytest.raises(ValueError, match="row-stochastic"):
        sr_spectra(np.array([[0.5, 0.2], [0.3, 0.7]]), 0.9, normalize=False)


# ----------------------------------------------------------------------------- closed forms (A.1)
def test_table1_values():
    for topo, A, expect in [("chain", tp.chain(12), (1.00, 0.00, 9.95)), ("star", tp.star(4), (10.00, 9.00, 28.61)),
                            ("mesh", tp.mesh(4), (10.00, 9.23, 13.00))]:
        s = sr_spectra(A, 0.9)
        assert np.round([float(s.rho), float(s.delta), float(s.kappa)], 2).tolist() == list(expect), topo


@pytest.mark.parametrize("n", [3, 5, 12, 40])
@pytest.mark.parametrize("gamma", [0.0, 0.3, 0.9, 0.99])
def test_closed_forms_match_kernel_and_reference(n, gamma):
    for topo, A in [("chain", tp.chain(n)), ("star", tp.star(n)), ("mesh", tp.mesh(n)), ("ring", tp.ring(n))]:
        cf = th.closed_form_diagnostics(topo, n, gamma)
        k = sr_spectra(A, gamma)
        ref = _ref(tp.row_normalize(A), gamma)
        np.testing.assert_allclose([float(k.rho), float(k.delta), float(k.kappa)], ref, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(cf, ref, rtol=1e-9, atol=1e-9)


def test_p_eigenvalues_closed_form():
    star_mu = np.sort(np.linalg.eigvals(tp.row_normalize(tp.star(6))).real)
    np.testing.assert_allclose(star_mu, [-1, 0, 0, 0, 0, 0, 1], atol=1e-12)
    mesh_mu = np.sort(np.linalg.eigvalsh(tp.row_normalize(tp.mesh(5))))
    np.testing.assert_allclose(mesh_mu, [-0.25] * 4 + [1], atol=1e-12)
    assert float(sr_spectra(tp.chain(7), 0.5).rho) == 1.0 and float(sr_spectra(tp.chain(7), 0.5).delta) == 0.0


# ----------------------------------------------------------------------------- batched kernels vs numpy
def test_eigh_equals_general_path_on_random_undirected_graphs(rng):
    A = np.concatenate([tp.erdos_renyi(24, 0.25, 6, seed=rng), tp.watts_strogatz(24, 4, 0.3, 3, seed=rng),
                        tp.random_regular(24, 5, 3, seed=rng)])
    A = A * rng.uniform(0.5, 2.0, size=A.shape)
    A = 0.5 * (A + np.swapaxes(A, 1, 2))  # weighted, still undirected
    g = np.array([0.1, 0.6, 0.95])
    e = sr_spectra(A[:, None], g, method="eigh")
    v = sr_spectra(A[:, None], g, method="eig")
    assert e.method == "eigh" and v.method == "eig" and e.rho.shape == (12, 3)
    for a, b in zip(e[:3], v[:3]):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-9, atol=1e-9)
    ref = np.array([[_ref(tp.row_normalize(a), x) for x in g] for a in A])
    np.testing.assert_allclose(np.stack([np.asarray(x) for x in e[:3]], -1), ref, rtol=1e-8, atol=1e-8)


def test_directed_graphs_general_path(rng):
    A = (rng.random((8, 15, 15)) < 0.3) * rng.random((8, 15, 15))
    g = rng.uniform(0, 0.99, size=8)
    s = sr_spectra(A, g)  # elementwise gamma per graph
    assert s.method == "eig" and s.kappa.shape == (8,)
    ref = np.array([_ref(tp.row_normalize(a), x) for a, x in zip(A, g)])
    np.testing.assert_allclose(np.stack([np.asarray(x) for x in s[:3]], -1), ref, rtol=1e-8, atol=1e-8)
    with pytest.raises(ValueError, match="symmetric adjacency"):
        sr_spectra(A, 0.9, method="eigh")


def test_float32_and_chunking(rng):
    A = tp.erdos_renyi(20, 0.3, 10, seed=rng)
    g = np.linspace(0.1, 0.9, 5)
    full = sr_spectra(A[:, None], g)
    small = sr_spectra(A[:, None], g, chunk_size=7)  # padded last chunk
    for a, b in zip(full[:3], small[:3]):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12)
    f32 = sr_spectra(A[:, None], g, dtype="float32")
    assert f32.kappa.dtype == np.float32
    np.testing.assert_allclose(np.asarray(f32.kappa), np.asarray(full.kappa), rtol=2e-4)
    with pytest.raises(ValueError, match="does not broadcast"):
        sr_spectra(A, np.array([0.1, 0.2]))


# ----------------------------------------------------------------------------- A.6 and capping
def test_malicious_leaf_bound_and_spectrum():
    assert abs(float(th.malicious_leaf_bound(0.9, 4)) - 98.5) < 0.05  # the paper's number
    for l in (2, 4, 8):
        assert th.malicious_leaf_mu2(1.0, l) == pytest.approx(0.0, abs=1e-15)
        assert th.malicious_leaf_mu2(1e9, l) == pytest.approx(1 - 1 / l, rel=1e-6)
        for alpha in (1.0, 7.0, 1e3):
            P = tp.row_normalize(tp.malicious_star(l, alpha))
            mu = np.sort(np.linalg.eigvals(P).real)
            np.testing.assert_allclose(mu[[0, -1]], [-1, 1], atol=1e-10)  # rho and Delta unaffected
            np.testing.assert_allclose(mu[1:-1], 0, atol=1e-6)
            for g in (0.5, 0.9, 0.99):
                kappa = float(sr_spectra(tp.malicious_star(l, alpha), g).kappa)
                assert kappa <= float(th.malicious_leaf_bound(g, l, th.malicious_leaf_mu2(alpha, l)))


def test_cap_influence():
    P = tp.row_normalize(tp.malicious_star(4, 50.0))
    C = th.cap_influence(P, 0.25)
    np.testing.assert_allclose(C, tp.row_normalize(tp.star(4)), atol=1e-12)  # mu = 0 restored
    np.testing.assert_allclose(th.sr_diagnostics(C, 0.9).kappa, 28.609783764226698, rtol=1e-10)
    P = np.array([[0.7, 0.2, 0.1, 0.0], [0.25] * 4, [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]])
    c = th.cap_influence(P, 0.4)
    np.testing.assert_allclose(c[0], [0.4, 0.4, 0.2, 0.0], atol=1e-12)  # hand-computed water-filling
    np.testing.assert_allclose(c[1:], P[1:])  # rows already under the cap, a sink, a single input kept


# ----------------------------------------------------------------------------- A.5 time-varying
def test_time_varying_recursion_and_kappa(rng):
    H, n = 6, 5
    P_seq = np.stack([tp.row_normalize(rng.random((n, n))) for _ in range(H)])
    M = np.asarray(time_varying_sr(P_seq, 0.8))
    np.testing.assert_allclose(M, th.time_varying_sr(P_seq, 0.8), rtol=1e-12)
    # by hand: M(H-1) = I + g P(H-1); M(H-2) = I + g P(H-2) (I + g P(H-1))
    np.testing.assert_allclose(M[-2], np.eye(n) + 0.8 * P_seq[-2] @ (np.eye(n) + 0.8 * P_seq[-1]), rtol=1e-12)
    tv = time_varying_kappa(P_seq, 0.8)
    np.testing.assert_allclose(np.asarray(tv.instantaneous), [np.linalg.cond(m) for m in M], rtol=1e-10)
    assert float(tv.worst_case) == pytest.approx(max(np.linalg.cond(m) for m in M))
    assert float(tv.time_averaged) == pytest.approx(np.linalg.cond(np.eye(n) - 0.8 * P_seq.mean(0)))
    # a constant P over a long horizon tends to the stationary SR
    P = tp.row_normalize(tp.star(4))
    Ml = np.asarray(time_varying_sr(np.broadcast_to(P, (400, 5, 5)), 0.9))[0]
    np.testing.assert_allclose(Ml, th.successor_representation(P, 0.9), rtol=1e-10)


def test_gat_transition_rows_and_reliability(rng):
    A = tp.star(4)
    h = rng.normal(size=(3, 5, 4))
    W, a = rng.normal(size=(4, 4)), rng.normal(size=8)
    P = np.asarray(gat_transition(h, A, W, a))
    assert P.shape == (3, 5, 5)
    np.testing.assert_allclose(P.sum(-1), 1, atol=1e-12)
    assert np.all(P[:, A == 0] == 0)
    # numpy reference for the centre's row at t = 0
    z = h[0] @ W.T
    e = z[0] @ a[:4] + z[1:] @ a[4:]
    e = np.where(e > 0, e, 0.2 * e)
    np.testing.assert_allclose(P[0, 0, 1:], np.exp(e) / np.exp(e).sum(), rtol=1e-12)
    # a low-reliability leaf loses weight as beta grows (phi = log of precision)
    r = np.ones((3, 5))
    r[:, 1] = 1e-3
    w = [np.asarray(gat_transition(h, A, W, a, reliability=r, beta=b, phi=np.log))[0, 0, 1] for b in (0.0, 1.0, 3.0)]
    assert w[0] > w[1] > w[2]


# ----------------------------------------------------------------------------- CLI
def test_diagnose_cli_json(capsys):
    assert main(["diagnose", "--topology", "star:4", "--gamma", "0.9", "--rho-c", "0.05", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert {"rho", "delta", "kappa", "rho_tilde", "rho_tilde_c"} <= set(obj)
    assert obj["kappa"] == pytest.approx(28.6098, abs=1e-4)
    k = np.array([4, 1, 1, 1, 1.0])
    assert obj["rho_tilde"] == pytest.approx(10 * np.mean(1 / np.sqrt(k)), rel=1e-9)
    assert obj["rho_tilde_c"] == pytest.approx(10 * np.mean(np.sqrt((1 + (k - 1) * 0.05) / k)), rel=1e-9)


def test_diagnose_cli_compare_and_adjacency_file(tmp_path, capsys):
    np.save(tmp_path / "g.npy", tp.mesh(4))
    (tmp_path / "g.csv").write_text("a,b,c\n0,1,0\n0,0,1\n0,0,0\n")
    assert main(["diagnose", "--topology", "paper", "--adjacency", str(tmp_path / "g.npy"),
                 "--adjacency", str(tmp_path / "g.csv"), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == ["chain:12", "star:4", "mesh:4", "g.npy", "g.csv"]
    assert rows[3]["kappa"] == pytest.approx(rows[2]["kappa"])
    assert rows[4]["rho"] == pytest.approx(1.0) and rows[4]["delta"] == pytest.approx(0.0)
    assert main(["diagnose", "--topology", "paper"]) == 0
    text = capsys.readouterr().out
    assert "robustness (kappa, best first):   chain:12 < mesh:4 < star:4" in text
    assert main(["diagnose", "--topology", "star:4", "--gamma", "1.0"]) == 2
    assert "gamma must be in [0, 1)" in capsys.readouterr().err
    assert main(["diagnose", "--adjacency", str(tmp_path / "missing.csv")]) == 2


def test_reproduce_spectra(tmp_path):
    assert main(["reproduce", "spectra", "--out", str(tmp_path)]) == 0
    t1 = pd.read_csv(tmp_path / "table1.csv")
    assert list(t1.columns) == ["topology", "rho", "delta", "kappa"]
    assert t1.round(2).values.tolist() == [["chain", 1.0, 0.0, 9.95], ["star", 10.0, 9.0, 28.61],
                                          ["mesh", 10.0, 9.23, 13.0]]
    ml = pd.read_csv(tmp_path / "malicious_leaf.csv")
    assert (ml.kappa <= ml.bound * (1 + 1e-12)).all()
    for name in ("fig_malicious_leaf.png", "fig_time_varying.png", "drift_gains.json"):
        assert (tmp_path / name).stat().st_size > 0
