"""Sweep engine: config validation, grid expansion, determinism across shards and chunk sizes,
resume, crash safety (SIGKILL), merge and status."""

import json
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from limits import HANG_S  # noqa: E402  (a hang guard, not a speed claim)
from mascot.cli import main
from mascot.graphs import complete_weights, ring_weights
from mascot.sweep import ConfigError, MissingChunksError, RunDir, load_config, parse_config, run_sweep
from mascot.theory import algorithm1

BASE = """
[experiment]
kind = "consensus"
name = "t"
seed = 3
chunk_size = {chunk}

[fixed]
trajectories = 5
d = 3
max_rounds = 40

[grid]
n = [5, 7]
strategy = ["adaptive", "ring"]
b0 = {{ logspace = [300, 30000, 3] }}

[grid.zip.costs]
tokens_complete = [30, 60]
tokens_ring = [10, 5]
"""


def cfg_text(chunk=4):
    return BASE.format(chunk=chunk)


# ----------------------------------------------------------------------------- config and grid
def test_grid_expansion_order_and_forms():
    cfg = parse_config(cfg_text())
    assert cfg.n_points == 2 * 2 * 3 * 2 and cfg.n_chunks == 6
    pts = cfg.points()
    assert [p["n"] for p in pts[:12]] == [5] * 12 and pts[12]["n"] == 7
    assert [p["b0"] for p in pts[:6:2]] == pytest.approx([300, 3000, 30000])  # last axis (zip) fastest
    assert [(p["tokens_complete"], p["tokens_ring"]) for p in pts[:2]] == [(30, 10), (60, 5)]
    assert all(p["trajectories"] == 5 for p in pts)
    cfg2 = parse_config(cfg_text().replace("n = [5, 7]", "n = { range = [5, 9, 2] }"))
    assert [p["n"] for p in cfg2.points()][::12] == [5, 7]
    cfg3 = parse_config(cfg_text().replace("b0 = { logspace = [300, 30000, 3] }", "b0 = { linspace = [100, 300, 3] }"))
    assert sorted({p["b0"] for p in cfg3.points()}) == [100.0, 200.0, 300.0]


def test_random_axis_is_seeded():
    text = cfg_text() + "\n[grid.random]\ncount = 4\neps = { uniform = [0.01, 0.05] }\neta = { choice = [0.1, 0.2] }\n"
    a, b = parse_config(text), parse_config(text)
    assert a.n_points == 24 * 4
    assert [p["eps"] for p in a.points()] == [p["eps"] for p in b.points()]
    assert all(0.01 <= p["eps"] <= 0.05 and p["eta"] in (0.1, 0.2) for p in a.points())
    c = parse_config(text.replace("seed = 3", "seed = 4"))
    assert [p["eps"] for p in c.points()] != [p["eps"] for p in a.points()]


def test_hash_ignores_chunk_size_and_comments():
    a, b = parse_config(cfg_text(4)), parse_config("# comment\n" + cfg_text(7))
    assert a.hash == b.hash
    assert parse_config(cfg_text().replace("seed = 3", "seed = 9")).hash != a.hash


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            ("chunk_size = 4", "chunk_size = 4\nchunks = 2"),
            "unknown key 'chunks' in \\[experiment\\] \\(did you mean 'chunk_size'\\?\\); valid keys: chunk_size, dtype",
        ),
        (
            ("trajectories = 5", "trajectories = 5\nagents = 4"),
            "unknown key 'agents' in \\[fixed\\]; valid keys: b0, c1",
        ),
        (("n = [5, 7]", "n = [5, 7]\nsize = [1]"), "unknown key 'size' in \\[grid\\]"),
        (
            ('kind = "consensus"', 'kind = "voting"'),
            "experiment.kind must be one of affine_noise, consensus, spectra; got .voting.",
        ),
        (('kind = "consensus"', ""), "\\[experiment\\] has no kind: add kind = one of affine_noise"),
        (("seed = 3", 'seed = "x"'), "experiment.seed must be an integer"),
        (("n = [5, 7]", "n = [5, 2]"), "n = 2 is out of range: 3 <= n <= 4096"),
        (("n = [5, 7]", "n = [5, 7.5]"), "n must be of type int"),
        (("n = [5, 7]", "n = []"), "grid.n is an empty list"),
        (("tokens_ring = [10, 5]", "tokens_ring = [10]"), "equal length"),
        (("trajectories = 5", "trajectories = 5\neta = 0.01\neps = 0.02"), "eta must be > eps for strategy 'adaptive'"),
        (("trajectories = 5", "trajectories = 5\nn = 5"), "given more than once"),
        (("b0 = { logspace = [300, 30000, 3] }", "b0 = { logspace = [0, 30000, 3] }"), "logspace needs positive"),
        (("[grid]", "[grd]"), "unknown key 'grd' in the config"),
        (("chunk_size = 4", "chunk_size = 0"), "chunk_size must be >= 1"),
        (('name = "t"', 'name = "../../escape"'), "experiment.name must be 1-128 letters"),
        (("chunk_size = 4", "chunk_size = 4\nmax_points = 10"), r"the grid has 24 points .*max_points = 10"),
        (("n = [5, 7]", "n = { range = [5, 1e300, 1] }"), r"over experiment.max_points"),
        (("tokens_ring = [10, 5]", "tokens_ring = [10, -5]"), "tokens_ring = -5.0 is out of range"),
        (("trajectories = 5", "trajectories = 5\nnoise = 1e300"), "fixed.noise = 1e[+]300 does not fit in float32"),
        # found by an outside tester, 2026-12-01 (2): tracebacks, and grids whose points repeat each other
        (("[experiment]", "output = 5\n[experiment]"), r"\[output\] must be a table"),
        (("n = [5, 7]", "n = { range = [0, 1e300, 1e-300] }"), r"over experiment.max_points"),
        (("trajectories = 5", "trajectories = 5\nc1 = 600.0"), "tokens_complete has no effect when c1 is given"),
        (
            ("[grid.zip.costs]", "[grid.random]\ncount = 3\nd = { choice = [2, 3] }\n[grid.zip.costs]"),
            "grid.random draws the same parameters more than once",
        ),
        # found by the next outside tester: values one in float32 (the sweep's dtype) repeat points too
        (
            ("max_rounds = 40", "max_rounds = 40\n[grid.zip.e]\neps = [0.04, 0.040000000001]"),
            "lists 0.04 and 0.040000000001, one value in float32",
        ),
    ],
)
def test_validation_errors_name_the_key(edit, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(cfg_text().replace(*edit))


def test_float_ranges_are_counted_as_written():
    """range = [0.1, 0.4, 0.1] gave 0.1, 0.2, 0.30000000000000004 and the stop 0.4 (binary floating point)."""
    cfg = parse_config(
        cfg_text()
        .replace("n = [5, 7]", "n = { range = [5, 9, 2] }")
        .replace("max_rounds = 40", "max_rounds = 40\neps = 0.01")
        .replace(
            'strategy = ["adaptive", "ring"]', 'strategy = ["adaptive", "ring"]\neta = { range = [0.1, 0.4, 0.1] }'
        )
    )
    values = dict((ns[0], [v[0] for v in vs]) for ns, vs in cfg.axes)
    assert values["eta"] == [0.1, 0.2, 0.3] and values["n"] == [5, 7]
    assert all(type(v) is int for v in values["n"])


def test_a_config_with_a_byte_order_mark_reads(tmp_path):
    f = tmp_path / "bom.toml"
    f.write_bytes(b"\xef\xbb\xbf" + cfg_text().encode())
    assert load_config(f).hash == parse_config(cfg_text()).hash


def test_validate_cli(tmp_path, capsys):
    f = tmp_path / "c.toml"
    f.write_text(cfg_text())
    assert main(["validate", str(f)]) == 0
    out = capsys.readouterr().out
    assert "points: 24" in out and "chunks: 6 of 4 points" in out
    assert re.search(r"estimated memory per chunk: [\d.,]+ (B|KiB|MiB)\n", out), out  # in a unit that fits
    from mascot.cli.sweep_cmds import _bytes

    assert [_bytes(x) for x in (512, 17 * 1024, 3 * 2**30, 10 * 2**50)] == ["512 B", "17.0 KiB", "3.0 GiB", "10.0 PiB"]
    f.write_text(cfg_text().replace("\nd = 3", "\nd = 0"))
    assert main(["validate", str(f)]) == 2
    assert "d = 0 is out of range" in capsys.readouterr().err


# ----------------------------------------------------------------------------- execution
@pytest.fixture(scope="module")
def reference_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ref")
    run_sweep(parse_config(cfg_text(4)), out, progress=False)
    return pd.read_parquet(RunDir(out).merge())


def test_rows_match_the_reference_algorithm(reference_run):
    df = reference_run
    assert len(df) == 24 * 5 and list(df["point"].unique()) == list(range(24))
    # costs follow the paper's model: N (N-1) tokens_complete and 2 N tokens_ring
    p = df[(df.n == 7) & (df.point % 2 == 1)].iloc[0]
    assert (p.c1, p.c2) == (7 * 6 * 60, 2 * 7 * 5)
    # every row agrees with Algorithm 1 in plain Python on the same X0 (regenerated from the seed)
    from mascot.sweep.evaluate import _initial_beliefs

    cfg = parse_config(cfg_text(4))
    sample = df.sample(12, random_state=0)
    for _, r in sample.iterrows():
        X0 = np.asarray(_initial_beliefs(cfg.key_seed, 5, int(r.n), 3, 0.5, 0.15, "float32"), dtype=np.float64)[
            int(r.trajectory)
        ]
        strategy = {"adaptive": "adaptive", "ring": "mode2", "complete": "mode1"}[r.strategy]
        ref = algorithm1(
            X0,
            complete_weights(int(r.n), 0.4),
            ring_weights(int(r.n), 0.6),
            r.c1,
            r.c2,
            r.eta,
            r.eps,
            r.b0,
            strategy,
            40,
        )
        assert (ref.rounds, ref.status, ref.tokens) == (r.rounds, r.status, r.tokens)
        assert r.d_final == pytest.approx(ref.d_final, rel=1e-4)
        assert r.d0 == pytest.approx(ref.d_trace[0], rel=1e-6)
    assert set(df.status) <= {0, 1, 2} and (df.tokens <= df.b0).all()
    cert = df[df.certified & (df.strategy == "adaptive")]
    assert len(cert) and (cert.status == 0).all() and (cert.rounds <= cert.K_star).all()


def test_identical_for_any_shards_and_chunk_size(tmp_path, reference_run):
    cfg = parse_config(cfg_text(4))
    for i in range(3):
        run_sweep(cfg, tmp_path / "sharded", shard=(i, 3), progress=False)
    sharded = pd.read_parquet(RunDir(tmp_path / "sharded").merge())
    pd.testing.assert_frame_equal(sharded, reference_run, check_exact=True)
    run_sweep(parse_config(cfg_text(5)), tmp_path / "chunk5", progress=False)
    rechunked = pd.read_parquet(RunDir(tmp_path / "chunk5").merge())
    pd.testing.assert_frame_equal(rechunked, reference_run, check_exact=True)


def test_resume_skips_complete_chunks_and_rejects_other_runs(tmp_path):
    cfg = parse_config(cfg_text(4))
    first = run_sweep(cfg, tmp_path, shard=(0, 2), progress=False)
    assert (first.chunks_run, first.chunks_skipped) == (3, 0)
    with pytest.raises(MissingChunksError, match="3 of 6 chunks missing: 1, 3, 5"):
        RunDir(tmp_path).merge()
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "chunks").iterdir()}
    again = run_sweep(cfg, tmp_path, progress=False)
    assert (again.chunks_run, again.chunks_skipped) == (3, 3)
    assert all(p.stat().st_mtime_ns == t for p, t in mtimes.items())  # complete chunks untouched
    assert RunDir(tmp_path).status()["complete"]
    with pytest.raises(ValueError, match="holds a different run .* \\(a different config, or a mascot version"):
        run_sweep(parse_config(cfg_text(4).replace("seed = 3", "seed = 5")), tmp_path, progress=False)
    # found by an outside tester: another chunk size or grid read "run.json does not match ... the run directory
    # cannot be trusted", as if the directory were damaged; that message is left for an edited run.json
    with pytest.raises(
        ValueError,
        match=r"in chunks of 4 points .* asks for chunks of 5 \(24 points in 5 chunks of 5\): a run keeps the chunking it started with. Resume it with experiment.chunk_size = 4",
    ):
        run_sweep(parse_config(cfg_text(5)), tmp_path, progress=False)
    with pytest.raises(ValueError, match=r"holds a different run .* 36 points in 9 chunks of 4 \(a different config"):
        run_sweep(parse_config(cfg_text(4).replace("n = [5, 7]", "n = [5, 7, 9]")), tmp_path, progress=False)
    plan = json.loads((tmp_path / "run.json").read_text())
    plan["identity"].update(n_points=28, n_chunks=7)  # edited consistently (an inconsistent plan is "corrupt")
    (tmp_path / "run.json").write_text(json.dumps(plan))
    with pytest.raises(ValueError, match="run.json was edited or damaged and the run directory cannot be trusted"):
        run_sweep(cfg, tmp_path, progress=False)


def test_provenance_in_parquet_metadata(tmp_path):
    import json

    import pyarrow.parquet as pq

    run_sweep(parse_config(cfg_text(4)), tmp_path, progress=False)
    meta = json.loads(pq.read_schema(tmp_path / "chunks" / "chunk-000002.parquet").metadata[b"mascot"])
    assert meta["chunk"] == 2 and meta["points"] == [8, 12] and meta["config_hash"] == parse_config(cfg_text()).hash
    assert "seed = 3" in meta["config"] and meta["jax_version"] and meta["devices"] and meta["start"] <= meta["end"]
    merged = RunDir(tmp_path).merge(tmp_path / "all.parquet")
    mm = json.loads(pq.read_schema(merged).metadata[b"mascot"])
    assert mm["plan"]["n_chunks"] == 6 and len(mm["chunks"]) == 6


def test_cli_run_status_merge(tmp_path, capsys):
    f = tmp_path / "c.toml"
    f.write_text(cfg_text())
    out = tmp_path / "run"
    assert main(["run", str(f), "--out", str(out), "--shard", "1/2", "--quiet"]) == 0
    assert main(["status", str(out)]) == 1  # incomplete
    assert "chunks 3/6" in capsys.readouterr().out
    assert main(["merge", str(out)]) == 1
    assert "3 of 6 chunks missing: 0, 2, 4" in capsys.readouterr().err
    assert main(["run", str(f), "--out", str(out), "--shard", "0/2", "--quiet"]) == 0
    assert main(["merge", str(out), "--out", str(tmp_path / "m.parquet")]) == 0
    assert len(pd.read_parquet(tmp_path / "m.parquet")) == 120
    assert main(["run", str(f), "--shard", "2/2"]) == 2
    assert "0 <= I < N" in capsys.readouterr().err


def test_consensus_chunks_store_required_columns_and_old_chunks_still_merge(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mascot.sweep.store import write_table_atomic

    run_sweep(parse_config(cfg_text()), tmp_path / "run", progress=False)
    rd = RunDir(tmp_path / "run")
    chunk0 = rd.chunk_path(0)
    # the consensus kind's columns are Parquet "required" (no definition levels) in every chunk and merged
    for f in [rd.chunk_path(c) for c in range(6)] + [rd.merge(tmp_path / "all.parquet")]:
        schema = pq.ParquetFile(f).schema
        assert {schema.column(i).max_definition_level for i in range(len(schema))} == {0}, f
    whole = pq.read_table(rd.chunks)  # the chunks directory reads as one dataset, and writes back
    pq.write_table(whole, tmp_path / "again.parquet")
    expected = pd.concat([pd.read_parquet(rd.chunk_path(c)) for c in range(6)], ignore_index=True)
    # a chunk as the previous release wrote it (every field nullable), with one null in a float column
    t = pq.read_table(chunk0)
    old = pa.Table.from_arrays(
        [pa.array(t["d0"].to_pylist()[:-1] + [None], t["d0"].type) if n == "d0" else t[n] for n in t.column_names],
        schema=pa.schema([f.with_nullable(True) for f in t.schema], metadata=t.schema.metadata),
    )
    pq.write_table(old, chunk0)
    assert pq.ParquetFile(chunk0).schema.column(0).max_definition_level == 1
    merged_path = rd.merge()
    expected.loc[len(t) - 1, "d0"] = np.nan
    pd.testing.assert_frame_equal(pd.read_parquet(merged_path), expected, check_exact=True)
    assert all(f.nullable for f in pq.read_schema(merged_path))  # required only where every chunk says so
    with pytest.raises(ValueError, match="column 'd0' must not hold nulls"):
        write_table_atomic(old, tmp_path / "x.parquet", required=old.column_names)
    assert not (tmp_path / "x.parquet").exists()


def test_sigkill_mid_sweep_then_resume_loses_nothing(tmp_path, reference_run):
    f = tmp_path / "c.toml"
    f.write_text(cfg_text(1))  # 24 chunks of one point: many chances to be killed between writes
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "mascot.cli", "run", str(f), "--out", str(out), "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    chunks = out / "chunks"
    deadline = time.time() + HANG_S
    while time.time() < deadline and (not chunks.exists() or len(list(chunks.glob("chunk-*.parquet"))) < 3):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    n_done = len(list(chunks.glob("chunk-*.parquet")))
    assert 3 <= n_done < 24, "the kill should land mid-sweep"
    subprocess.run(cmd, check=True, timeout=HANG_S)
    leftovers = [p.name for p in chunks.iterdir() if not p.name.startswith("chunk-")]
    merged = pd.read_parquet(RunDir(out).merge())
    assert not merged.duplicated(["point", "trajectory"]).any()
    pd.testing.assert_frame_equal(merged, reference_run, check_exact=True)
    assert all(name.endswith(".tmp") for name in leftovers)  # at most an abandoned temp file


def test_consensus_sweep_report(tmp_path):
    from mascot.analysis.consensus_sweep import report

    text = cfg_text(6).replace('strategy = ["adaptive", "ring"]', 'strategy = ["adaptive", "complete", "ring"]')
    run_sweep(parse_config(text), tmp_path / "run", progress=False)
    data = RunDir(tmp_path / "run").merge()
    res = report(data, tmp_path / "rep", log=lambda *_: None)
    for name in (
        "summary.csv",
        "dominance.csv",
        "README.md",
        "fig_success.png",
        "fig_tightness.pdf",
        "fig_dominance.png",
    ):
        assert (tmp_path / "rep" / name).stat().st_size > 0
    df = pd.read_parquet(data)
    s = res["summary"]
    assert len(s) == df.point.nunique()
    row = s.iloc[0]
    raw = df[df.point == row.point]
    assert row.success == pytest.approx((raw.status == 0).mean())
    assert row.trajectories == 5
    dom = res["dominance"]
    assert len(dom) == len(s) // 3  # one setting per (n, b0, costs): the three strategies' points
    for _, r in dom.iterrows():  # recompute the dominance verdict by hand from the summary
        sub = s[(s.n == r.n) & (s.b0 == r.b0) & (s.c1 == r.c1)].set_index("strategy")
        never = float("inf")  # a fixed policy with no success never finishes
        ok = (
            sub.success["adaptive"] >= max(sub.success["complete"], sub.success["ring"])
            and sub.success["adaptive"] > 0
            and sub.rounds["adaptive"] <= (never if np.isnan(sub.rounds["ring"]) else sub.rounds["ring"])
            and sub.tokens["adaptive"] <= (never if np.isnan(sub.tokens["complete"]) else sub.tokens["complete"])
        )
        assert bool(r.adaptive_between) == bool(ok)
        pareto = sub.success["adaptive"] > 0  # and, by hand, Pareto dominance of each fixed policy
        for f in ("complete", "ring"):
            rf = never if np.isnan(sub.rounds[f]) else sub.rounds[f]
            tf = never if np.isnan(sub.tokens[f]) else sub.tokens[f]
            sa, ra, ta = sub.success["adaptive"], sub.rounds["adaptive"], sub.tokens["adaptive"]
            pareto &= sa >= sub.success[f] and ra <= rf and ta <= tf and (sa > sub.success[f] or ra < rf or ta < tf)
        assert bool(r.adaptive_pareto) == bool(pareto)
        assert r.corollary_condition == bool(
            r.lambda1 < r.lambda2 and r.c1 / r.c2 >= np.log(r.lambda1) / np.log(r.lambda2)
        )
    # the merged file streamed in batches of 7 rows (points cut across batches), a copy whose rows are not in
    # point order (read whole instead) and the DataFrame itself give the same tables and README
    shuffled = tmp_path / "shuffled.parquet"
    df.sample(frac=1, random_state=0).to_parquet(shuffled)
    for i, (src, batch) in enumerate([(data, 7), (shuffled, 7), (df, 1 << 19)]):
        other = report(src, tmp_path / f"rep{i}", log=lambda *_: None, batch_rows=batch)
        pd.testing.assert_frame_equal(other["summary"], s, check_exact=True)
        pd.testing.assert_frame_equal(other["dominance"], dom, check_exact=True)
        # the same README but for the line that says where the rows came from
        text = (tmp_path / f"rep{i}" / "README.md").read_text().splitlines()
        first = (tmp_path / "rep" / "README.md").read_text().splitlines()
        assert [x for x in text if not x.startswith("From ")] == [x for x in first if not x.startswith("From ")]
        said = next(x for x in text if x.startswith("From "))
        assert ("checked against the run" if i == 0 else "DataFrame" if i == 2 else "not a dataset") in said


def _three_strategy_sweep(tmp_path, name, fixed, grid):
    text = (
        f'[experiment]\nkind = "consensus"\nname = "{name}"\nseed = 7\ndtype = "float64"\n[fixed]\n'
        f"{'' if 'trajectories' in grid else 'trajectories = 20'}\nd = 4\nn = 5\neta = 0.1\neps = 0.03\n{fixed}\n"
        f'[grid]\nstrategy = ["adaptive", "complete", "ring"]\n{grid}\n'
    )
    run_sweep(parse_config(text), tmp_path / name, progress=False)
    return pd.read_parquet(RunDir(tmp_path / name).merge())


def test_consensus_sweep_report_tells_settings_apart_by_every_parameter(tmp_path):
    """Found by an outside tester: points differing only in max_rounds (or noise, d, x0_mean) collapsed into
    one setting, and the dominance verdict of the first was reported for all."""
    from mascot.analysis.consensus_sweep import report

    df = _three_strategy_sweep(tmp_path, "mr", "b0 = 5000", "max_rounds = [200, 2]")
    res = report(df, tmp_path / "rep", log=lambda *_: None)
    dom = res["dominance"].set_index("max_rounds")
    assert sorted(dom.index) == [2, 200] and "max_rounds" in res["summary"]
    for mr in (2, 200):  # by hand from the trajectories of each setting
        sub = df[df.max_rounds == mr]
        succ = sub.groupby("strategy").status.apply(lambda x: (x == 0).mean())
        assert dom.loc[mr, "success_adaptive"] == pytest.approx(succ["adaptive"])
        assert dom.loc[mr, "success_ring"] == pytest.approx(succ["ring"])
    assert dom.loc[2, "success_ring"] == 0 and dom.loc[200, "success_ring"] == 1


def test_consensus_sweep_report_when_a_fixed_policy_never_succeeds(tmp_path):
    """Found by an outside tester: complete-only never succeeding anywhere crashed the report (its tokens column
    was missing), and elsewhere its NaN mean tokens made every comparison false, so adaptive with 100% success
    'did not dominate'. A policy that never succeeds never finishes: adaptive dominates it."""
    from mascot.analysis.consensus_sweep import report

    df = _three_strategy_sweep(tmp_path, "nc", "max_rounds = 200", "b0 = [1100]")
    succ = df.groupby("strategy").status.apply(lambda x: (x == 0).mean())
    assert succ["complete"] == 0 and succ["adaptive"] == 1 and succ["ring"] == 1  # the case itself
    res = report(df, tmp_path / "rep", log=lambda *_: None)
    r = res["dominance"].iloc[0]
    ok = df[df.status == 0].groupby("strategy").rounds.mean()
    assert bool(r.adaptive_between) == bool(ok["adaptive"] <= ok["ring"]) and ok["adaptive"] < ok["ring"]
    assert "no rows" in _report_error(report, df.iloc[:0], tmp_path)
    assert "impossible values in column(s) rounds" in _report_error(report, df.assign(rounds=-df.rounds), tmp_path)
    none = _three_strategy_sweep(tmp_path, "none", "max_rounds = 200", "b0 = [10, 50]")  # nothing succeeds
    assert not report(none, tmp_path / "rep2", log=lambda *_: None)["dominance"].adaptive_between.any()


def test_consensus_sweep_report_keeps_trajectory_counts_apart_and_refuses_repeated_points(tmp_path):
    """Found by an outside tester: points differing only in `trajectories` were pooled (their first trajectories
    share initial beliefs, so those counted twice), as were points of a value listed twice in the grid."""
    from mascot.analysis.consensus_sweep import report

    df = _three_strategy_sweep(tmp_path, "tr", "max_rounds = 200", "trajectories = [4, 8]\nb0 = [5000]")
    dom = report(df, tmp_path / "rep", log=lambda *_: None)["dominance"].set_index("trajectories")
    assert sorted(dom.index) == [4, 8]
    for t in (4, 8):  # by hand, from that point's own trajectories
        sub = df[df.groupby("point").point.transform("size") == t]
        ok = sub[(sub.status == 0) & (sub.strategy == "ring")]
        assert dom.loc[t, "rounds_ring"] == pytest.approx(ok.rounds.mean())
    with pytest.raises(ConfigError, match=r"grid.b0 lists 5000 twice"):  # refused before it runs, too
        _three_strategy_sweep(tmp_path, "tw", "max_rounds = 200", "b0 = [5000, 5000]")
    twice = pd.concat([df, df.assign(point=df.point + df.point.max() + 1)], ignore_index=True)  # (relabelled copy)
    assert "have the same parameters" in _report_error(report, twice, tmp_path)
    bad = df.assign(strategy=df.strategy.replace("ring", "star"))
    assert "impossible values in column(s) strategy" in _report_error(report, bad, tmp_path)
    assert "column(s) rounds" in _report_error(report, df.assign(rounds=df.max_rounds + 1), tmp_path)
    assert "column(s) eta" in _report_error(report, df.assign(eta=np.nan), tmp_path)
    assert "column(s) d_final" in _report_error(report, df.assign(d_final=np.nan), tmp_path)


def _report_error(report, df, tmp_path):
    with pytest.raises(ValueError) as e:
        report(df, tmp_path / "bad", log=lambda *_: None)
    assert not (tmp_path / "bad").exists()  # refused before anything is written
    return str(e.value)


def test_points_share_initial_beliefs_as_common_random_numbers(reference_run):
    """X0 depends on (seed, n, d, x0_mean, x0_spread) only: points that differ in strategy, thresholds,
    budget or costs start trajectory t from the same beliefs (D(0) equal), other team sizes do not."""
    df = reference_run
    d0 = df.pivot_table(index=["n", "trajectory"], columns="point", values="d0")
    for _, block in d0.groupby(level="n"):
        block = block.dropna(axis=1)
        assert block.shape[1] > 1 and np.all(block.to_numpy() == block.to_numpy()[:, :1])
    by_n = d0.groupby(level="n").first()
    assert len(by_n) > 1 and len({tuple(np.round(r.dropna().to_numpy(), 9)) for _, r in by_n.iterrows()}) == len(by_n)


def test_kind_results_version_enters_the_experiment_hash(monkeypatch):
    """A kind whose rows change for the same config (version bump) gets a new hash, so an old run
    directory is refused instead of resumed with rows computed differently."""
    import dataclasses

    from mascot.sweep import kinds

    h = parse_config(cfg_text()).hash
    bumped = dataclasses.replace(kinds.KINDS["consensus"], version=kinds.KINDS["consensus"].version + 1)
    monkeypatch.setitem(kinds.KINDS, "consensus", bumped)
    assert parse_config(cfg_text()).hash != h


def test_chunk_validity_and_shard_locks(tmp_path):
    """A chunk counts only when its footer and metadata match the plan; the same shard twice is refused while
    other shards share the directory (tests/test_faults.py has the end-to-end versions)."""
    from mascot.io import DirectoryLocked

    cfg = parse_config(cfg_text(12))
    run_sweep(cfg, tmp_path, progress=False)
    rd = RunDir(tmp_path)
    assert rd.done() == {0, 1} and rd.check_chunk(1, rd.plan()) is None
    rd.chunk_path(0).write_bytes(b"PAR1")
    assert rd.done() == {1} and "unreadable" in rd.check_chunk(0, rd.plan())
    held = rd.acquire((0, 2))
    try:
        with pytest.raises(DirectoryLocked, match="pid"):
            rd.acquire((0, 2))
        for lock in rd.acquire((1, 2)):
            lock.release()
    finally:
        for lock in held:
            lock.release()
    assert run_sweep(cfg, tmp_path, progress=False).chunks_run == 1


# ----------------------------------------------------------------------------- grid validation
_POOLS = {
    "consensus": {
        "n": [5, 3, 64, 2, 4097, 6.5],
        "strategy": ["adaptive", "ring", "complete", "fastest"],
        "eta": [0.1, 0.02, -1.0, 1],
        "eps": [0.03, 1e-9, 0.2],
        "b0": [100.0, 3e7, 1e40, 2000],
        "tokens_complete": [30.0, 0.3, 1e37, 2],
        "tokens_ring": [10.0, 0.25],
        "max_rounds": [64, 0],
        "x0_spread": [0.1, -0.2],
        "c2": [100.0, 0.5],
        "d": [6, 2000],
    },
    "spectra": {
        "family": ["star", "ring", "watts_strogatz", "random_regular", "hexagon"],
        "n": [2, 5, 8, 3000],
        "gamma": [0.9, 0.99999, 1.0, 0.0],
        "degree": [2, 3, 7],
        "p": [0.2, 1.5],
        "graphs": [4, 0],
    },
    "affine_noise": {
        "model": ["linear", "rule", "cubic"],
        "k": [1, 4, 0],
        "rho_c": [0.0, 0.5, 2.0],
        "T": [12, 0],
        "trials": [100, 10**8],
        "level0": [3, 10],
        "sigma": [1.0, -1.0],
    },
}


def _toml_value(v):
    return f'"{v}"' if isinstance(v, str) else repr(v)


def _random_config(rng, kind):
    """Parameters from the pool in [fixed], as grid lists, zipped in pairs or drawn by [grid.random] choice;
    the first value of each pool is valid, the others often are not."""
    pool = _POOLS[kind]
    names = list(rng.choice(list(pool), size=rng.integers(2, 7), replace=False))
    dtype = rng.choice(["float32", "float64"])
    sections = {"fixed": [], "grid": [], "grid.zip.z": [], "grid.random": []}
    zip_len = int(rng.integers(1, 4))
    for name in names:
        k = int(rng.integers(0, 3))
        vals = list(dict.fromkeys([pool[name][0]] + [pool[name][int(i)] for i in rng.integers(0, len(pool[name]), k)]))
        where = rng.choice(list(sections), p=[0.2, 0.5, 0.15, 0.15])
        if where == "fixed":
            sections[where].append(f"{name} = {_toml_value(vals[-1])}")
        elif where == "grid.zip.z":
            picks = [vals[int(i)] for i in rng.integers(0, len(vals), zip_len)]
            sections[where].append(f"{name} = [{', '.join(_toml_value(v) for v in picks)}]")
        elif where == "grid.random":
            sections[where].append(f"{name} = {{ choice = [{', '.join(_toml_value(v) for v in vals)}] }}")
        else:
            sections[where].append(f"{name} = [{', '.join(_toml_value(v) for v in vals)}]")
    if sections["grid.random"]:
        sections["grid.random"].insert(0, f"count = {int(rng.integers(1, 6))}")
    lines = ["[experiment]", f'kind = "{kind}"', f'dtype = "{dtype}"']
    for sec, body in sections.items():
        if body:
            lines += [f"[{sec}]", *body]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("kind", sorted(_POOLS))
def test_grid_validation_matches_checking_every_point_in_full(kind, monkeypatch):
    """parse_config checks each written value once and only the cross-parameter checks per point; the
    reference checks every point in full (defaults, derived values, the kind's checks) and reports the
    first failure. Same accept/refuse decision and the same message on 80 random configs per kind
    (fixed values, grid lists, zipped axes, random choices)."""
    from mascot.sweep import config as config_mod
    from mascot.sweep.config import _check_point, _short
    from mascot.sweep.kinds import KINDS

    rng = np.random.default_rng(2026)
    outcomes = set()
    for _ in range(80):
        text = _random_config(rng, kind)
        try:
            got = None
            parse_config(text)
        except ConfigError as e:
            got = str(e)
        # the reference: the same config's points (parsed without point checks), each checked in full
        with monkeypatch.context() as m:
            m.setattr(config_mod, "_validate_points", lambda *a: None)
            try:
                cfg = parse_config(text)
            except ConfigError as e:  # refused before any point is checked: both paths agree by construction
                assert got == str(e), text
                continue
        want = None
        for i, p in enumerate(cfg.points()):
            try:
                _check_point(KINDS[kind], dict(p), cfg.dtype)
            except ValueError as e:
                want = f"grid point {i} ({_short(p, cfg.grid_names)}): {e}"
                break
        assert got == want, text
        outcomes.add(want is None)
    assert outcomes == {True, False}  # both accepted and refused grids were drawn


def test_consensus_report_draws_no_axis_with_one_value(tmp_path, monkeypatch):
    """Issue 29: with one N (or one message cost) the report drew heat maps one cell wide; an axis with one value
    is not a dimension: the figures draw along the other axis, and the titles name what they average over."""
    from mascot.analysis import consensus_sweep

    text = """
[experiment]
kind = "consensus"
chunk_size = 16
[fixed]
trajectories = 8
n = 6
max_rounds = 100
[grid]
strategy = ["adaptive", "complete", "ring"]
b0 = [300.0, 3000.0, 30000.0]
eta = [0.06, 0.1]
"""
    run_sweep(parse_config(text), tmp_path / "r", progress=False)
    figs = {}
    monkeypatch.setattr(consensus_sweep, "save_figure", lambda fig, path: figs.setdefault(path.name, fig) and [path])
    consensus_sweep.report(RunDir(tmp_path / "r").merge(), tmp_path / "rep")
    success, dominance = figs["fig_success"], figs["fig_dominance"]
    # success against b0, a line per strategy (not three maps one row high), and a panel per eta: a rate is
    # aggregated over trajectories, not over a variable of the study
    assert [ax.get_title() for ax in success.axes] == ["eta = 0.06", "eta = 0.1"]
    assert "averaged" not in success._suptitle.get_text() and "(N = 6)" in success._suptitle.get_text()
    merged = pd.read_parquet(RunDir(tmp_path / "r").merge())
    for ax, eta in zip(success.axes, (0.06, 0.1)):
        assert ax.get_xlabel() == "budget b0 (tokens)" and len(ax.get_lines()) == 3
        for line, strat in zip(ax.get_lines(), ("adaptive", "complete", "ring")):
            rows = merged[(merged.eta == eta) & (merged.strategy == strat)]
            want = rows.groupby("b0").status.apply(lambda st: float((st == 0).mean()))
            np.testing.assert_allclose(line.get_ydata(), want.to_numpy(), rtol=1e-12)
            np.testing.assert_allclose(line.get_xdata(), want.index.to_numpy())
    (ax,) = dominance.axes  # N and the message cost have one value each: one group of two bars, not a 1 x 1 map
    assert ax.get_xlabel() == "agents N" and [t.get_text() for t in ax.get_xticklabels()] == ["6"]
    assert len(ax.patches) == 2 and "fractions over eta, b0" in dominance._suptitle.get_text()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_consensus_inputs_give_the_library_call_behind_a_points_rows(tmp_path, dtype):
    """Found by an outside tester: a sweep's X0 could not be had without the source, so "the CLI sweep equals the
    library call" could not be checked row by row. ``consensus_inputs`` gives that call; its rounds, tokens and
    status equal the merged rows', d0 and d_final to the last float32 bit (other batch sizes), with and without
    belief noise (a ring point's unread self-weight is the default, as in the sweep)."""
    from mascot import simulate_consensus
    from mascot.errors import InputError
    from mascot.kernels.precision import float64
    from mascot.sweep import consensus_inputs

    text = f"""
[experiment]
kind = "consensus"
name = "inputs"
seed = 11
dtype = "{dtype}"
chunk_size = 4

[fixed]
n = 9
trajectories = 24
max_rounds = 40
self_weight_complete = 0.3
eta = 0.1

[grid]
strategy = ["adaptive", "ring"]
noise = [0.0, 0.01]
"""
    cfg = parse_config(text)
    run_sweep(cfg, tmp_path, progress=False)
    rows = pd.read_parquet(RunDir(tmp_path).merge())
    for i in range(cfg.n_points):
        with float64(dtype == "float64"):
            got = simulate_consensus(**consensus_inputs(cfg, i))
        mine = rows[rows.point == i].sort_values("trajectory")
        np.testing.assert_array_equal(got.rounds, mine.rounds)
        np.testing.assert_array_equal(got.status, mine.status)
        np.testing.assert_array_equal(got.tokens, mine.tokens)
        tol = 1e-6 if dtype == "float32" else 2e-15  # (a tester measured up to 5 float32 ulps, 7e-16 in float64)
        np.testing.assert_allclose(got.d0, mine.d0, rtol=tol)
        np.testing.assert_allclose(got.d_final, mine.d_final, rtol=tol, atol=1e-12)
    assert consensus_inputs(cfg, 0)["W1"][0, 0] == pytest.approx(0.3)  # the config's self-weight
    assert consensus_inputs(cfg, 2)["W1"][0, 0] == pytest.approx(0.4)  # a ring's: unread, the default
    assert consensus_inputs(cfg, 0)["key"] is None and consensus_inputs(cfg, 1)["key"].shape == (24,)
    other = parse_config(text.replace('"adaptive", "ring"', '"complete"'))
    assert consensus_inputs(other, 0)["strategy"] == "mode1"
    with pytest.raises(InputError, match="takes a SweepConfig"):
        consensus_inputs("inputs.toml", 0)
    for bad in (-1, cfg.n_points, 1.5, True):
        with pytest.raises(InputError, match="index must be a grid point"):
            consensus_inputs(cfg, bad)
