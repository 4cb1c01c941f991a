"""`mascot params` (issue 29): every key of every sweep kind documented from the tables that validate configs,
and each parameter's "simulated when" claim checked by simulating: changing a parameter at a point whose
strategy or family does not simulate with it leaves every simulated column as it was."""

import json

import numpy as np
import pandas as pd
import pytest

from mascot.cli import main
from mascot.graphs import FAMILIES
from mascot.kernels.precision import float64
from mascot.sweep.kinds import KINDS

# a second valid value of each parameter that some points do not simulate with
OTHER = {
    "eta": 0.05,
    "c1": 123.0,
    "c2": 45.0,
    "tokens_complete": 7.0,
    "tokens_ring": 3.0,
    "self_weight_complete": 0.1,
    "self_weight_ring": 0.3,
    "p": 0.7,
    "degree": 2,
    "beta": 0.5,
    "alpha": 5.0,
    "a": 0.2,
    "graphs": 3,
    "L": 0.7,
    "value0": 80.0,
    "parity0": "B",
    "level0": 7,
}
# columns that echo parameters or (consensus) hold Theorem 1's adaptive certificate at every point (NOTES)
NOT_SIMULATED = {
    "consensus": {"point", "trajectory", "K_star", "B_star", "lambda1", "lambda2", *KINDS["consensus"].params},
    "spectra": {"point", "graph", *KINDS["spectra"].params},
    "affine_noise": {"point", "ceg_theory", "ratio_theory_k", *KINDS["affine_noise"].params},
}
BASE = {
    "consensus": {"trajectories": 4, "max_rounds": 40, "b0": 1e6},
    "spectra": {"n": 6},
    "affine_noise": {"trials": 50},
}


def test_every_key_has_a_meaning_and_the_json_lists_exactly_the_kinds_parameters(capsys):
    for name, kind in KINDS.items():
        for k, p in kind.params.items():
            assert p.doc and p.rule, f"{name}.{k} has no meaning or range"
            assert p.reads is None or (p.reads[0] in kind.params and p.reads[1]), (name, k)
        assert main(["params", name, "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)
        assert [r["key"] for r in rows] == list(kind.params)
        filled = kind.complete({})  # what a point that names nothing runs with
        for r in rows:
            if kind.params[r["key"]].default is not None:
                assert r["default"] == filled[r["key"]], (name, r["key"])
    assert main(["params", "experiment", "--json"]) == 0
    assert {r["key"] for r in json.loads(capsys.readouterr().out)} == {
        "kind",
        "name",
        "seed",
        "dtype",
        "chunk_size",
        "max_points",
    }
    assert main(["params", "trials", "--json"]) == 0
    keys = {r["key"] for r in json.loads(capsys.readouterr().out)}
    assert {"n_trials", "backend", "temperature", "max_tokens", "topology"} <= keys and "config" not in keys
    assert main(["params"]) == 0
    text = capsys.readouterr().out
    assert "self_weight_ring (float, default 0.6; 0 <= w <= 1)" in text and "note:" in text


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_parameter_a_point_does_not_simulate_with_changes_nothing_it_simulates(kind):
    spec = KINDS[kind]
    dtype = "float64"
    checked = 0
    for name, p in spec.params.items():
        if p.reads is None:
            continue
        selector, values = p.reads
        choices = {"strategy": ["adaptive", "complete", "ring"], "family": list(FAMILIES), "model": ["linear", "rule"]}[
            selector
        ]
        outside = [v for v in choices if v not in values]
        assert outside, (kind, name)
        for sel in outside:
            pts = []
            for v in (spec.params[name].default, OTHER[name]):
                given = {**BASE[kind], selector: sel, name: v}
                pt = spec.complete(given)
                spec.validate(pt)
                pts.append(pt)
            kw = {"cache": None} if spec.device_cache else {}
            with float64():
                tables = [spec.evaluate([pt], np.array([0]), 7, dtype, **kw) for pt in pts]
            frames = [t.to_pandas() if hasattr(t, "to_pandas") else t for t in tables]
            cols = [c for c in frames[0].columns if c not in NOT_SIMULATED[kind]]
            assert cols, kind
            for c in cols:
                a, b = frames[0][c].to_numpy(), frames[1][c].to_numpy()
                same = np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
                assert same, f"{kind}: {name} = {OTHER[name]!r} changed {c} at {selector} = {sel!r}"
        checked += 1
    assert checked >= 2


def test_validate_counts_distinct_simulations_and_the_duplicates_simulate_alike(tmp_path, capsys):
    from mascot.sweep import RunDir, parse_config, run_sweep
    from mascot.sweep.reference import distinct_simulations

    text = """
[experiment]
kind = "consensus"
chunk_size = 8
[fixed]
trajectories = 4
b0 = 1e6
[grid]
n = [5, 8]
strategy = ["adaptive", "complete", "ring"]
eta = [0.05, 0.1]
"""
    cfg = parse_config(text)
    # hand count: adaptive 2 n x 2 eta, complete 2, ring 2 (eta is simulated by adaptive only)
    assert distinct_simulations(cfg) == 8 and cfg.n_points == 12
    # belief noise is drawn per point: every point is its own simulation
    assert distinct_simulations(parse_config(text.replace("b0 = 1e6", "b0 = 1e6\nnoise = 0.01"))) == 12
    run_sweep(cfg, tmp_path / "r", progress=False)
    df = pd.read_parquet(RunDir(tmp_path / "r").merge())
    sim = ["d0", "rounds", "tokens", "d_final", "status"]
    for (n, strategy), g in df[df.strategy != "adaptive"].groupby(["n", "strategy"]):
        a, b = (g[g.eta == e].sort_values("trajectory")[sim].to_numpy() for e in (0.05, 0.1))
        assert np.array_equal(a, b), (n, strategy)
    cfg_file = tmp_path / "c.toml"
    cfg_file.write_text(text)
    assert main(["validate", str(cfg_file)]) == 0
    out = capsys.readouterr().out
    # grid order n, strategy, eta (last fastest): chunk 0 holds points 0-7 (n = 5: adaptive x 2 etas, complete
    # and ring once each; n = 8: adaptive x 2), chunk 1 points 8-11 (n = 8: complete, ring): 6 + 2 by hand
    assert "distinct simulations: 8 of 12 points" in out and "simulations run: 8 " in out
    cfg_file.write_text(text.replace("chunk_size = 8", "chunk_size = 5"))  # 0-4 | 5-9 | 10-11: 3 + 4 + 1 = 8 ...
    assert main(["validate", str(cfg_file)]) == 0
    # ... by hand: chunk 0 = n5 adaptive x2, complete x2 (one), ring 0.05: 4; chunk 1 = n5 ring 0.1, n8 adaptive
    # x2, complete x2 (one): 4; chunk 2 = n8 ring x2 (one): 1
    assert "simulations run: 9 " in capsys.readouterr().out
    cfg_file.write_text(text.replace("b0 = 1e6", "b0 = 1e6\nnoise = 0.01"))  # every point its own: said too
    assert main(["validate", str(cfg_file)]) == 0
    assert "distinct simulations: all 12 points" in capsys.readouterr().out


def test_points_that_simulate_the_same_thing_run_once_and_match_running_alone(tmp_path, monkeypatch):
    """Issue 29: duplicates after unread parameters are simulated once per chunk (counted at the kernel's door),
    and every row equals the one its point gives run alone (chunk_size 1: nothing to share)."""
    import mascot.execute
    from mascot.sweep import RunDir, parse_config, run_sweep
    from mascot.sweep.reference import distinct_simulations

    text = """
[experiment]
kind = "consensus"
chunk_size = 24
dtype = "float64"
[fixed]
trajectories = 5
max_rounds = 60
[grid]
n = [5, 7]
strategy = ["adaptive", "complete", "ring"]
eta = [0.05, 0.1]
self_weight_complete = [0.3, 0.4]
tokens_ring = [5.0, 10.0]
"""
    seen = []
    real = mascot.execute.simulate_consensus

    def counting(X0, *a, **k):
        seen.append(X0.shape[0])
        return real(X0, *a, **k)

    monkeypatch.setattr(mascot.execute, "simulate_consensus", counting)
    cfg = parse_config(text)
    # by hand: per n, adaptive 2 eta x 2 w x 2 tokens = 8, complete 2 w, ring 2 tokens: 12 per n, 24 of 48 points
    assert distinct_simulations(cfg) == 24 == distinct_simulations(cfg, per_chunk=True)
    run_sweep(cfg, tmp_path / "shared", progress=False)
    assert sum(seen) == 24 * 5
    shared = pd.read_parquet(RunDir(tmp_path / "shared").merge())
    monkeypatch.setattr(mascot.execute, "simulate_consensus", real)
    run_sweep(parse_config(text.replace("chunk_size = 24", "chunk_size = 1")), tmp_path / "alone", progress=False)
    alone = pd.read_parquet(RunDir(tmp_path / "alone").merge())
    assert len(shared) == len(alone) == 48 * 5
    exact = [c for c in alone.columns if c not in ("d0", "d_final")]
    pd.testing.assert_frame_equal(shared[exact], alone[exact])
    for c in ("d0", "d_final"):  # other batch shapes: BLAS may round the projection differently
        np.testing.assert_allclose(shared[c], alone[c], rtol=1e-12, atol=1e-15)


def test_reading_and_describing_configs_loads_no_jax_pandas_or_pyarrow(tmp_path):
    """Issue 29: `mascot validate` and `mascot params` answer without loading the numerical stack (3-4 s of
    imports before): a fresh interpreter runs both and lists what they imported."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    code = (
        "import sys\n"
        "from mascot.cli import main\n"
        f"assert main(['validate', {str(root / 'configs/sweeps/consensus_scaling.toml')!r}, 'grid.n=5,8']) == 0\n"
        f"assert main(['validate', {str(root / 'configs/sweeps/spectra_families.toml')!r}]) == 0\n"
        "assert main(['params', 'consensus']) == 0\n"
        "print(sorted(m for m in ('jax', 'pandas', 'pyarrow', 'matplotlib', 'scipy') if m in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout[-300:]


def test_the_merged_file_names_its_status_codes(tmp_path):
    """Issue 29: the consensus status is an int8 code in the data; the merged file says what each code means
    (the status field's metadata, read by mascot.sweep.store.status_labels), the same labels as
    mascot.theory.STATUS_NAMES and `mascot params consensus`."""
    from mascot.sweep.store import status_labels
    from mascot.theory import STATUS_NAMES

    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[experiment]\nkind = "consensus"\nname = "labels"\nseed = 1\nchunk_size = 4\n[fixed]\ntrajectories = 3\n'
        'n = 5\n[grid]\nstrategy = ["adaptive", "ring"]\nb0 = [300.0, 3000.0]\n'
    )
    assert main(["run", str(cfg), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    assert main(["merge", str(tmp_path / "r"), "--out", str(tmp_path / "m.parquet")]) == 0
    labels = status_labels(tmp_path / "m.parquet")
    assert labels == STATUS_NAMES and labels[1] == "BudgetFail"
    df = pd.read_parquet(tmp_path / "m.parquet")
    assert set(df.status.map(labels)) == {"consensus", "BudgetFail"}  # b0 = 300 runs out on the ring


def test_a_spectra_row_stores_the_graph_parameters_its_family_does_not_read_as_missing(tmp_path):
    """Issue 29: a chain row said p = 0.3. Each row holds only the graph parameters its family reads (the
    `reads` of `mascot params spectra`); the others are null in the Parquet file."""
    cfg = tmp_path / "s.toml"
    cfg.write_text(
        '[experiment]\nkind = "spectra"\nname = "missing"\nseed = 1\nchunk_size = 3\n[fixed]\nn = 8\ngraphs = 2\n'
        '[grid]\nfamily = ["chain", "erdos_renyi", "watts_strogatz", "random_regular", "complete", '
        '"malicious_star"]\ngamma = [0.5, 0.9]\n'
    )
    assert main(["run", str(cfg), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    assert main(["merge", str(tmp_path / "r"), "--out", str(tmp_path / "m.parquet")]) == 0
    df = pd.read_parquet(tmp_path / "m.parquet")
    spec = KINDS["spectra"].params
    for k in ("p", "degree", "beta", "alpha", "a"):
        fams = spec[k].reads[1]
        assert df.loc[df.family.isin(fams), k].notna().all(), k
        assert df.loc[~df.family.isin(fams), k].isna().all(), k
    assert df.degree.dropna().eq(df.degree.dropna().round()).all()  # still whole numbers where present


def _protocol_value(row):
    """A valid value for a documented protocol key (its default where it is one)."""
    key, default = row["key"], row["default"]
    special = {
        "task": "Choose a venue.",
        "strategies": ["adaptive", "ring"],
        "n_agents": 2,
        "x0": [[0.2, 0.8], [0.6, 0.4]],
        "weights.W1": [[0.5, 0.5], [0.5, 0.5]],
        "weights.W2": [[0.75, 0.25], [0.25, 0.75]],
        "roles[].prior": [0.3, 0.7],
        "monitor.prior_lambda1": 0.5,
        "monitor.prior_lambda2": 0.9,
        "sampling.seed": 7,
    }
    if key in special:
        return special[key]
    if row["type"] == "bool":
        return bool(default)
    if row["type"] in ("int", "float") and isinstance(default, (int, float)):
        return default
    if row["type"] == "str" and isinstance(default, str) and default and not default.startswith(("(", "-")):
        return default
    return {"name": "mine", "roles[].name": "a", "agents[].name": "a"}.get(key, "text")


@pytest.mark.parametrize("topic", ["deliberate", "debate"])
def test_protocol_config_keys_are_exactly_what_the_loaders_accept(topic, tmp_path, capsys):
    """`mascot params deliberate|debate` lists every key a config file may hold: a file that sets every listed
    key loads (with those values), and a key the list does not name is refused in every table."""
    import tomllib

    import mascot.protocols.debate.config as dc
    import mascot.protocols.deliberation.config as lc
    from mascot.protocols.debate.config import load_debate_config
    from mascot.protocols.deliberation.config import load_deliberation_config

    assert main(["params", topic, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert all(r["meaning"] for r in rows)
    # every key the loader knows is listed (its own key sets), at the top and in [surrogate]
    known_top, known_sur = (lc._TOP_KEYS, lc._SURROGATE_KEYS) if topic == "deliberate" else (dc._TOP, dc._SURROGATE)
    assert {r["key"].split(".")[0].split("[")[0] for r in rows} == set(known_top)
    assert {r["key"].split(".", 1)[1] for r in rows if r["key"].startswith("surrogate.")} == set(known_sur)
    top, items, tables = {}, {}, {}
    for r in rows:
        k = r["key"]
        if "[]." in k:
            items.setdefault(k.split("[]")[0], {})[k.split("[].")[1]] = _protocol_value(r)
        elif "." in k:
            t, sub = k.split(".", 1)
            tables.setdefault(t, {})[sub] = _protocol_value(r)
        elif r["type"] not in ("array of tables", "array of tables or strings"):
            top[k] = _protocol_value(r)
    doc = dict(top)
    for t, entry in items.items():
        second = dict(entry, name="b") if "name" in entry else entry
        doc[t] = [entry, second]
    doc.update(tables)
    load = load_deliberation_config if topic == "deliberate" else load_debate_config

    def dump(d):
        from mascot.sweep.overrides import dumps_toml

        return dumps_toml(d)

    path = tmp_path / "c.toml"
    path.write_text(dump(doc))
    assert tomllib.loads(path.read_text()) == doc
    cfg, surrogate = load(path)
    assert cfg.task == doc["task"] and surrogate == doc["surrogate"]
    if topic == "deliberate":
        assert cfg.monitor.prior_lambda2 == 0.9 and cfg.sampling.seed == 7 and [r.name for r in cfg.roles] == ["a", "b"]
    else:
        assert [a.name for a in cfg.agents] == ["a", "b"] and cfg.sampling.seed == 7
    for where in [None, *tables, *items]:
        bad = json.loads(json.dumps(doc))
        target = bad if where is None else (bad[where][0] if where in items else bad[where])
        target["not_a_key"] = 1
        path.write_text(dump(bad))
        with pytest.raises(Exception, match="not_a_key"):
            load(path)


@pytest.mark.parametrize("bad", ['temperature = "hot"', 'top_p = "x"', 'max_tokens = "many"', "max_tokens = true"])
def test_sampling_values_of_the_wrong_type_are_refused_by_name(bad, tmp_path):
    """Found by an outside tester: text in [sampling] gave tracebacks and ``max_tokens = true`` ran as 1."""
    from mascot.errors import InputError
    from mascot.protocols.debate.config import load_debate_config

    path = tmp_path / "d.toml"
    path.write_text(f'task = "t"\n[[agents]]\nname = "a"\ndescription = "d"\n[sampling]\n{bad}\n')
    with pytest.raises(InputError, match=f"{bad.split(' =')[0]} must be a number"):
        load_debate_config(path)


def test_a_bad_value_of_a_parameter_a_point_does_not_read_says_so():
    """Found by an outside tester: ``grid.alpha=0,1`` over ring and malicious_star blamed "grid point 0
    (family='ring')" with no word that a ring never reads alpha. The value is still refused (it is written), and
    the message says why a ring's point names it; a point that reads it gets the plain message."""
    from mascot.sweep import parse_config
    from mascot.sweep.config import ConfigError

    text = '[experiment]\nkind = "spectra"\nname = "x"\n[grid]\nfamily = [{}]\nalpha = [0.0, 1.0]\n'
    with pytest.raises(ConfigError) as e:
        parse_config(text.format('"ring", "malicious_star"'))
    assert str(e.value) == (
        "grid point 0 (family='ring', alpha=0.0): alpha = 0.0 is out of range: alpha > 0 (every value written is "
        "checked, also at points whose family = 'ring' does not read alpha)"
    )
    with pytest.raises(ConfigError) as e:
        parse_config(text.format('"malicious_star", "ring"'))
    assert str(e.value) == "grid point 0 (family='malicious_star', alpha=0.0): alpha = 0.0 is out of range: alpha > 0"
