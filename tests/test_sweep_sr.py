"""The `spectra` and `affine_noise` sweep kinds: results equal direct kernel calls, do not depend on
chunking or sharding, and their reports run (SR paper claims on a small grid)."""

import json

import numpy as np
import pandas as pd
import pytest

from mascot import graphs as tp
from mascot.cli import main
from mascot.execute.noise import affine_noise_error
from mascot.sweep import RunDir, load_config, run_sweep
from mascot.theory.spectra import sr_diagnostics

SPECTRA = """
[experiment]
kind = "spectra"
name = "spectra_test"
seed = 3
dtype = "float64"
chunk_size = {chunk}

[fixed]
graphs = 3

[grid.zip.graph]
family = ["chain", "star", "mesh", "erdos_renyi", "watts_strogatz", "random_regular", "malicious_star"]
n = [12, 5, 4, 10, 10, 10, 5]
p = [0.2, 0.2, 0.2, 0.4, 0.2, 0.2, 0.2]
degree = [4, 4, 4, 4, 4, 3, 4]
alpha = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 10.0]

[grid.zip.discount]
gamma = [0.5, 0.9]
"""

NOISE = """
[experiment]
kind = "affine_noise"
name = "noise_test"
seed = 1
dtype = "float64"
chunk_size = {chunk}

[fixed]
trials = 4000

[grid]
model = ["linear", "rule"]
aggregate = ["mean", "median"]
rho_c = [0.0, 0.5]
T = [4, 8]
k = [1, 4]
"""


def _run(tmp_path, text, name, shards=1):
    cfg_path = tmp_path / f"{name}.toml"
    cfg_path.write_text(text)
    cfg = load_config(cfg_path)
    out = tmp_path / name
    for i in range(shards):
        run_sweep(cfg, out, shard=(i, shards), progress=False)
    return pd.read_parquet(RunDir(out).merge(tmp_path / f"{name}.parquet"))


def test_spectra_kind_matches_reference_and_is_chunk_invariant(tmp_path):
    a = _run(tmp_path, SPECTRA.format(chunk=14), "a")
    b = _run(tmp_path, SPECTRA.format(chunk=3), "b", shards=3)
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == 2 * (4 + 3 * 3)  # deterministic families 1 graph, random 3, x 2 gammas
    star = a[(a.family == "star") & (a.gamma == 0.9)].iloc[0]
    assert round(star.kappa, 2) == 28.61 and round(star.delta, 2) == 9.0
    ms = a[(a.family == "malicious_star") & (a.gamma == 0.5)].iloc[0]
    ref = sr_diagnostics(tp.row_normalize(tp.malicious_star(5, 10.0)), 0.5)
    assert ms.kappa == pytest.approx(ref.kappa, rel=1e-10)
    # random families: the same graphs at both gammas (seeded by the graph parameters, not gamma)
    er = a[a.family == "erdos_renyi"]
    assert er.groupby("graph").isolated.nunique().max() == 1
    rr = a[a.family == "random_regular"]
    assert (rr.method == "eigh").all() and (a[a.family == "chain"].method == "eig").all()


@pytest.mark.x64
def test_noise_kind_matches_kernel_and_is_chunk_invariant(tmp_path):
    a = _run(tmp_path, NOISE.format(chunk=32), "n1")
    b = _run(tmp_path, NOISE.format(chunk=5), "n2", shards=2)
    pd.testing.assert_frame_equal(a, b)
    # chunks with and without nulls in ceg_theory (rule rows have none) read as one dataset and write back
    import pyarrow.parquet as pq

    pq.write_table(pq.read_table(tmp_path / "n2" / "chunks"), tmp_path / "n2_again.parquet")
    cfg = load_config(tmp_path / "n1.toml")
    row = a[(a.model == "linear") & (a["aggregate"] == "mean") & (a.k == 4) & (a.rho_c == 0.5) & (a["T"] == 8)].iloc[0]
    ceg = affine_noise_error(
        cfg.key_seed, 4, 0.5, 1.0, 8, 1.0, trials=4000, point_ids=[int(row.point)], dtype="float64"
    )
    assert row.ceg_mean == pytest.approx(float(np.mean(ceg)), rel=1e-12)
    lin = a[(a.model == "linear") & (a["aggregate"] == "mean")]
    z = (lin.ceg_mean - lin.ceg_theory) / lin.ceg_se
    assert (z.abs() < 4.5).all()
    assert a[a.model == "rule"].ceg_theory.isna().all() and (a.diverged == 0).all()


@pytest.mark.x64
def test_reports(tmp_path, capsys):
    spec = _run(tmp_path, SPECTRA.format(chunk=14), "s")
    noise = _run(tmp_path, NOISE.format(chunk=32), "n")
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(["report", "spectra-sweep", str(tmp_path / "s.parquet"), "--out", str(out)]) == 0
    assert main(["report", "noise-sweep", str(tmp_path / "n.parquet"), "--out", str(out)]) == 0
    said = capsys.readouterr()
    assert f"wrote {out}/: sweep_summary.csv" in said.out and f"wrote {out}/: noise_ratios.csv" in said.out
    assert "RankWarning" not in said.err
    # without --out a report goes beside its data, never into the repository's results/ (an outside tester's
    # first report replaced the committed spectra files)
    assert main(["report", "noise-sweep", str(tmp_path / "n.parquet")]) == 0
    assert f"wrote {tmp_path / 'n_report'}/: noise_ratios.csv" in capsys.readouterr().out
    assert (tmp_path / "n_report" / "noise_claims.json").is_file()
    summ = pd.read_csv(out / "sweep_summary.csv")
    assert set(summ.family) == set(spec.family)
    claims = json.loads((out / "noise_claims.json").read_text())
    assert not any(k.startswith("rho_c_from_ratio") for k in claims)  # (the paper's constants: its study's)
    ratios = pd.read_csv(out / "noise_ratios.csv")
    lin = ratios[(ratios.model == "linear") & (ratios["aggregate"] == "mean")]
    assert len(lin) == 4 and (lin.ratio_lo < lin.ratio_theory_k).all() and (lin.ratio_theory_k < lin.ratio_hi).all()
    for f in ("fig_sweep_gamma.png", "fig_sweep_size.png", "fig_noise.png"):
        assert (out / f).stat().st_size > 10_000
    assert len(noise) == 32
    assert main(["report", "spectra-sweep", str(tmp_path / "n.parquet"), "--out", str(out)]) == 2


@pytest.mark.x64
def test_noise_report_draws_a_users_own_grid(tmp_path, monkeypatch):
    """Found by an outside tester: on k = 1, 3, 4, 8 at one T the report drew k = 1 and 4 only, no exact values
    and no y labels, and eq. 5's panel drew theory curves for the paper's k = 2 and 16 (not in the data) and
    left out k = 3. Every k is drawn, with its exact value, and eq. 5's curves are the data's k."""
    text = """
[experiment]
kind = "affine_noise"
name = "own_noise"
seed = 4
dtype = "float64"
chunk_size = 16

[fixed]
model = "linear"
trials = 500
T = 12

[grid]
k = [1, 3, 4, 8]
L = [0.9, 1.0]
rho_c = [0.0, 0.3]
"""
    _run(tmp_path, text, "own")
    import mascot.analysis.noise_sweep as ns

    figs = []
    monkeypatch.setattr(ns, "save_figure", lambda fig, path: figs.append(fig))
    ns.report(tmp_path / "own.parquet", tmp_path / "rep")
    ax = figs[0].axes
    assert ax[0].get_legend_handles_labels()[1] == ["k = 1", "k = 3", "k = 4", "k = 8"]
    exact = [ln for ln in ax[0].lines if ln.get_marker() == "_"]  # one T: each exact value a dash
    assert len(exact) == 4
    assert len([t for t in ax[0].get_yticklabels() if t.get_text()]) >= 2  # labelled ticks on a short log axis
    curves = [ln for ln in ax[1].lines if len(ln.get_xdata()) == 200]  # eq. 5 over rho_c in [0, 1]
    np.testing.assert_allclose(sorted(ln.get_ydata()[0] for ln in curves), np.sqrt([3, 4, 8]))  # rho_c = 0: sqrt(k)
    assert ax[1].get_title() == "eq. 5 (lines) vs MC, T = 12, L = 1"


@pytest.mark.x64
@pytest.mark.parametrize(
    "grid, says",
    [  # found by a later tester: a median-only sweep raised "cannot convert float NaN to integer"
        ('model = "linear"\naggregate = "median"\ntrials = 200\n[grid]\nT = [2, 7]\nk = [1, 2]', "aggregate = mean"),
        ('model = "rule"\ntrials = 100\n[grid]\nk = [1, 4]', "no linear-model rows in this sweep"),
        ('model = "linear"\nk = 4\ntrials = 200\n[grid]\nT = [5, 20]', "no ratio to draw"),
    ],
)
def test_noise_report_on_grids_it_cannot_fill_says_why(tmp_path, monkeypatch, grid, says):
    text = f'[experiment]\nkind = "affine_noise"\nname = "odd"\nseed = 2\ndtype = "float64"\n[fixed]\n{grid}\n'
    _run(tmp_path, text, "odd")
    import mascot.analysis.noise_sweep as ns

    figs = []
    monkeypatch.setattr(ns, "save_figure", lambda fig, path: figs.append(fig))
    ns.report(tmp_path / "odd.parquet", tmp_path / "rep")
    notes = [t.get_text() for a in figs[0].axes for t in a.texts]
    assert any(says in n for n in notes), notes


@pytest.mark.x64
def test_spectra_report_keeps_apart_what_a_family_reads(tmp_path, capsys):
    """Found by an outside tester: the report pooled malicious stars of alpha 1, 5 and 50 (and complete graphs of
    self-weights 0 and 0.5) into one row of "random graph" quantiles, and an alpha axis that Watts-Strogatz does
    not read doubled its graph count. Each (family, parameters it reads, n, gamma) is one row, against
    sr_diagnostics on the family's own graph."""
    text = """
[experiment]
kind = "spectra"
name = "reads"
seed = 2
dtype = "float64"
chunk_size = 7

[fixed]
n = 8
gamma = 0.9

[grid]
family = ["malicious_star", "complete", "watts_strogatz"]
alpha = [1.0, 5.0, 50.0]
a = [0.0, 0.5]
graphs = [2, 3]
"""
    _run(tmp_path, text, "r")
    out = tmp_path / "rep"
    assert main(["report", "spectra-sweep", str(tmp_path / "r.parquet"), "--out", str(out)]) == 0
    summ = pd.read_csv(out / "sweep_summary.csv").set_index("graph_family")
    want = {f"malicious_star alpha={a:g}": tp.build("malicious_star", 8, a) for a in (1.0, 5.0, 50.0)}
    want |= {f"complete a={a:g}": tp.build("complete", 8, a) for a in (0.0, 0.5)}
    assert set(summ.index) == set(want) | {"WS k=4 beta=0.1 graphs=2", "WS k=4 beta=0.1 graphs=3"}
    for label, A in want.items():
        ref = sr_diagnostics(A / A.sum(axis=1, keepdims=True), 0.9)  # the sweep row-normalises
        assert summ.loc[label, "graphs"] == 1
        assert summ.loc[label, "kappa_median"] == pytest.approx(ref.kappa, rel=1e-5)  # the CSV keeps 6 digits
    # six points (alpha x a) hold the same graphs; points of 2 and 3 graphs are not pooled (a later tester)
    assert summ.loc["WS k=4 beta=0.1 graphs=2", "graphs"] == 2 and summ.loc["WS k=4 beta=0.1 graphs=3", "graphs"] == 3
    # mascot plot counts each simulation once too: 2 + 3 Watts-Strogatz graphs, not 6 copies of each (its
    # interval was 3.3x too narrow)
    from mascot.analysis.plot import summarize, warnings_for

    s = summarize(str(tmp_path / "r.parquet"), "gamma", "kappa", where={"family": "watts_strogatz"})
    assert s["rows"].tolist() == [5]
    assert "counted once" in " ".join(warnings_for(s, "gamma", "kappa"))
    kappas = [summ.loc[f"malicious_star alpha={a:g}", "kappa_median"] for a in (1.0, 5.0, 50.0)]
    assert len(set(kappas)) == 3


@pytest.mark.x64
def test_noise_report_refuses_a_dataset_given_twice_and_writes_strict_json(tmp_path, capsys):
    """Found by an outside tester: the same merged file given twice was paired with itself (16 ratio rows
    instead of 4, every claim counted twice), and a slope with one T >= 12 was written as bare NaN."""
    text = (
        NOISE.format(chunk=16)
        .replace('model = ["linear", "rule"]', 'model = ["linear"]')
        .replace('aggregate = ["mean", "median"]', 'aggregate = ["mean"]')
        .replace("T = [4, 8]", "T = [4, 12]")
        .replace("trials = 4000", "trials = 500")
    )
    _run(tmp_path, text, "n")
    data, out = str(tmp_path / "n.parquet"), tmp_path / "out"
    assert main(["report", "noise-sweep", data, data, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "8 parameter set(s) appear in more than one row (16 rows; e.g. model = linear" in err and not out.exists()
    assert main(["report", "noise-sweep", data, "--out", str(out)]) == 0

    def refuse(const):
        raise AssertionError(f"{const} in noise_claims.json: not JSON")

    claims = json.loads((out / "noise_claims.json").read_text(), parse_constant=refuse)
    assert claims["slope_in_T_at_L1"] == {"1": None, "4": None}  # one T >= 12: no slope to fit
    assert len(pd.read_csv(out / "noise_ratios.csv")) == 4


@pytest.mark.x64
def test_noise_report_pairs_k_ratios_within_one_trials_count_and_takes_sigma_zero(tmp_path, capsys):
    """Found by an outside tester: two sweeps that differ only in trials were paired across (a 400-trial baseline
    divided by a 200-trial k = 2 mean); a sweep with sigma = 0 (every E_ceg 0) failed on a log-scaled figure after
    writing part of the report."""
    base = (
        '[experiment]\nkind = "affine_noise"\nname = "{name}"\ndtype = "float64"\n[fixed]\nmodel = "linear"\n'
        "trials = {trials}\nsigma = {sigma}\n[grid]\nL = [1.0]\nrho_c = [0.0, 0.5]\nT = [3, 6]\nk = [1, 2]\n"
    )
    a = _run(tmp_path, base.format(name="a", trials=200, sigma=1.0), "a")
    b = _run(tmp_path, base.format(name="b", trials=400, sigma=1.0), "b")
    out = tmp_path / "out"
    assert (
        main(["report", "noise-sweep", str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"), "--out", str(out)])
        == 0
    )
    ratios = pd.read_csv(out / "noise_ratios.csv")
    assert len(ratios) == 8 and sorted(ratios.trials.unique()) == [200, 400]
    assert (
        main(
            [
                "report",
                "noise-sweep",
                str(tmp_path / "b.parquet"),
                str(tmp_path / "a.parquet"),
                "--out",
                str(tmp_path / "ba"),
            ]
        )
        == 0
    )  # the other order: the same report, byte for byte (an outside tester)
    for f in ("noise_ratios.csv", "noise_claims.json"):
        assert (tmp_path / "ba" / f).read_bytes() == (out / f).read_bytes(), f
    for _, r in ratios.iterrows():  # by hand, within the sweep with that many trials
        d = a if r.trials == 200 else b
        sel = d[(d.rho_c == r.rho_c) & (d["T"] == r["T"])].set_index("k")
        assert r.ratio == pytest.approx(sel.ceg_mean[1] / sel.ceg_mean[2], rel=1e-5)
    _run(tmp_path, base.format(name="z", trials=50, sigma=0.0), "z")
    capsys.readouterr()
    assert main(["report", "noise-sweep", str(tmp_path / "z.parquet"), "--out", str(tmp_path / "oz")]) == 0
    claims = json.loads((tmp_path / "oz" / "noise_claims.json").read_text())
    assert set(claims["slope_in_k_at_L1_rho0"].values()) == {None}  # every E_ceg is 0: no slope
    # and no z or CI test either (0/0): those points are not counted as disagreeing with the theory
    assert claims["linear_mean_vs_exact_theory"]["points"] == 0 and claims["eq5_ratio_linear_mean_L1"]["points"] == 0
    assert (tmp_path / "oz" / "fig_noise.png").stat().st_size > 10_000


def test_blas_limiting_kinds_run_one_chunk_at_a_time(tmp_path, monkeypatch):
    """The spectra kernels change OpenBLAS's process-wide thread count around LAPACK calls, so their
    chunks must not overlap (overlapping ones hung a run); the runner caps in-flight chunks by kind."""
    import threading

    from mascot.sweep import kinds

    active, peak, lock = [0], [0], threading.Lock()
    real = kinds.KINDS["spectra"].evaluate

    def counting(*args):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            return real(*args)
        finally:
            with lock:
                active[0] -= 1

    import dataclasses

    monkeypatch.setitem(kinds.KINDS, "spectra", dataclasses.replace(kinds.KINDS["spectra"], evaluate=counting))
    cfg_path = tmp_path / "s.toml"
    cfg_path.write_text(SPECTRA.format(chunk=2))
    run_sweep(load_config(cfg_path), tmp_path / "s", progress=False, workers=4)
    assert peak[0] == 1


@pytest.mark.x64
def test_spectra_report_does_not_depend_on_the_last_bits(tmp_path):
    """LAPACK's last bits depend on the CPU's BLAS kernels (OpenBLAS Haswell vs SkylakeX kernels gave other
    last digits in results/spectra): a sweep whose values differ by a few ulps, and whose zero gaps come out
    as 0 or 1e-16, gives byte-identical tables and figures."""
    _run(tmp_path, SPECTRA.format(chunk=14), "s")
    df = pd.read_parquet(tmp_path / "s.parquet")
    assert (df.delta == 0).any()  # graphs with a repeated leading eigenvalue (isolated agents)
    nudged = df.copy()
    for c in ("rho", "kappa", "delta"):
        nudged[c] = np.nextafter(np.nextafter(df[c].to_numpy(), np.inf), np.inf)  # two ulps up
    nudged.loc[nudged.delta == 0, "delta"] = 2.220446049250313e-16 * nudged.rho  # round-off instead of 0
    nudged.to_parquet(tmp_path / "nudged.parquet")
    for name in ("s", "nudged"):
        assert main(["report", "spectra-sweep", str(tmp_path / f"{name}.parquet"), "--out", str(tmp_path / name)]) == 0
    for f in ("sweep_summary.csv", "fig_sweep_gamma.pdf", "fig_sweep_size.pdf"):
        assert (tmp_path / "s" / f).read_bytes() == (tmp_path / "nudged" / f).read_bytes(), f


@pytest.mark.x64
def test_reports_refuse_missing_and_empty_inputs_and_draw_partial_sweeps(tmp_path, capsys):
    _run(tmp_path, SPECTRA.format(chunk=14), "s")
    _run(tmp_path, NOISE.format(chunk=32), "n")
    spec, noise = pd.read_parquet(tmp_path / "s.parquet"), pd.read_parquet(tmp_path / "n.parquet")
    spec.iloc[:0].to_parquet(tmp_path / "s0.parquet")
    noise.iloc[:0].to_parquet(tmp_path / "n0.parquet")
    cases = [
        ("spectra-sweep", tmp_path / "missing.parquet", "no such file"),
        ("spectra-sweep", tmp_path / "s", "is a directory"),
        ("spectra-sweep", tmp_path / "s0.parquet", "holds no rows"),
        ("noise-sweep", tmp_path / "n0.parquet", "holds no rows"),
    ]
    for what, data, msg in cases:
        out = tmp_path / f"out_{data.stem}"
        assert main(["report", what, str(data), "--out", str(out)]) == 2, data
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and msg in err[0], err
        assert not out.exists()  # refused before anything is written
    # a sweep without the deterministic families, or without gamma = 0.9, still gets its table and figures
    spec[~spec.family.isin(["chain", "ring", "mesh", "star"])].to_parquet(tmp_path / "random.parquet")
    spec[spec.gamma != 0.9].to_parquet(tmp_path / "no09.parquet")
    for name in ("random", "no09"):
        assert main(["report", "spectra-sweep", str(tmp_path / f"{name}.parquet"), "--out", str(tmp_path / name)]) == 0
        assert (tmp_path / name / "fig_sweep_size.png").stat().st_size > 5_000


@pytest.mark.x64
def test_sweep_reports_check_and_name_their_source(tmp_path, capsys):
    """Found by an outside tester: `report spectra-sweep` on one chunk file wrote a full report from 20 of 216
    points, a merged noise table filtered after the merge (metadata kept) was reported with exit 0, and neither
    report named the experiment and hash it describes (docs/reference/reliability.md says every report does)."""
    import pyarrow.parquet as pq

    _run(tmp_path, SPECTRA.format(chunk=3), "s")
    merged = tmp_path / "s.parquet"
    chunk = tmp_path / "s" / "chunks" / "chunk-000000.parquet"
    assert main(["report", "spectra-sweep", str(chunk), "--out", str(tmp_path / "c")]) == 2
    assert "is one chunk of a run (chunk 0), not a merged dataset" in capsys.readouterr().err
    cut = tmp_path / "cut.parquet"
    pq.write_table(pq.read_table(merged).slice(0, 5), cut)  # (pyarrow keeps the schema's metadata)
    for what, data in (("spectra-sweep", cut), ("consensus-sweep", chunk)):
        assert main(["report", what, str(data), "--out", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert "not the file `mascot merge` wrote" in err or "is one chunk of a run" in err
    assert not (tmp_path / "c").exists() and not (tmp_path / "x").exists()
    # a later tester: rows duplicated inside their points (counts kept, metadata kept) were reported as checked
    table = pq.read_table(merged).to_pandas()
    i = int(table.index[table.duplicated("point")][0])  # a point's second graph becomes a copy of its first
    table.loc[i, ["kappa", "graph"]] = table.loc[i - 1, ["kappa", "graph"]].to_numpy()
    import pyarrow as pa

    twin = tmp_path / "twin.parquet"
    pq.write_table(
        pa.Table.from_pandas(table, preserve_index=False).replace_schema_metadata(pq.read_schema(merged).metadata), twin
    )
    assert main(["report", "spectra-sweep", str(twin), "--out", str(tmp_path / "t")]) == 2
    assert "rows repeat the point and graph of another row" in capsys.readouterr().err
    assert main(["report", "spectra-sweep", str(merged), "--out", str(tmp_path / "ok")]) == 0
    plan = json.loads((tmp_path / "s" / "run.json").read_text())["identity"]
    text = (tmp_path / "ok" / "spectra_sweep.md").read_text()
    rows = len(pd.read_parquet(merged))
    assert (
        f"experiment `{plan['name']}` (hash {plan['hash']}); its {rows:,} rows and {plan['n_points']:,} points" in text
    )
    _run(tmp_path, NOISE.format(chunk=16), "n")
    noise = tmp_path / "n.parquet"
    import pyarrow.compute as pc

    table = pq.read_table(noise)
    pq.write_table(table.filter(pc.greater(table["k"], 1)), tmp_path / "nk.parquet")
    assert main(["report", "noise-sweep", str(tmp_path / "nk.parquet"), "--out", str(tmp_path / "y")]) == 2
    assert "not the file `mascot merge` wrote" in capsys.readouterr().err
    assert main(["report", "noise-sweep", str(noise), str(merged), "--out", str(tmp_path / "y")]) == 2
    assert f"{merged} is not a merged 'affine_noise' sweep" in capsys.readouterr().err  # (it read "model = nan")
    assert main(["report", "noise-sweep", str(noise), "--out", str(tmp_path / "nr")]) == 0
    claims = json.loads((tmp_path / "nr" / "noise_claims.json").read_text())
    nplan = json.loads((tmp_path / "n" / "run.json").read_text())["identity"]
    assert len(claims["sources"]) == 1 and f"(hash {nplan['hash']})" in claims["sources"][0]
    assert claims["linear_mean_vs_exact_theory"]["points_nonfinite"] == 0


def test_an_error_that_outgrows_float32_is_counted_and_said_once(tmp_path, capsys):
    """Found by an outside tester: L = 1.5, T = 250 (1.5^250 > float32's largest value) printed numpy's "Mean of empty
    slice" and "All-NaN slice" warnings with paths into evaluate.py and site-packages."""
    import warnings

    from mascot.cli import main

    cfg = tmp_path / "u.toml"
    cfg.write_text(
        '[experiment]\nkind = "affine_noise"\nname = "u"\nseed = 1\nchunk_size = 3\n\n[fixed]\ntrials = 50\nsigma = 1.0\n'
        "rho_c = 0.0\nk = 3\n\n[grid]\nL = [0.5, 1.5]\nT = [10, 250]\n"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # numpy's own warnings would fail the run here
        assert main(["run", str(cfg), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    err = capsys.readouterr().err
    # (point 3 ends a short last chunk, filled with copies of it: a later tester saw it named, and counted, 3 times)
    assert err.count("mascot: warning: point(s) 3: the cumulative error overflowed (float32) in 50 trial(s)") == 1
    assert main(["merge", str(tmp_path / "r"), "--out", str(tmp_path / "m.parquet")]) == 0
    df = pd.read_parquet(tmp_path / "m.parquet").set_index("point")
    assert df.loc[3, "diverged"] == 50 and np.isnan(df.loc[3, "ceg_mean"]) and (df.drop(index=3).diverged == 0).all()
    # the stable points: the closed form (eq. 3 family) within Monte Carlo error
    ok = df.drop(index=3)
    assert ((ok.ceg_mean - ok.ceg_theory).abs() < 5 * ok.ceg_se).all()
