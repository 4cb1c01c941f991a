"""Hydra-style command-line overrides of sweep configs (issue 29): the overridden config equals the same config
written by hand (hash, axes, points), a run records it and resumes only with it, Slurm tasks get it quoted."""

import shlex

import pytest

from mascot.cli import main
from mascot.errors import ConfigError
from mascot.sweep import parse_config
from mascot.sweep.overrides import apply_overrides, parse_override

BASE = """
[experiment]
kind = "consensus"
seed = 1
chunk_size = 4
[fixed]
trajectories = 8
eta = 0.1
[grid]
n = [5, 6]
strategy = ["adaptive", "ring"]
b0 = { logspace = [100, 10000, 3] }
"""

BY_HAND = """
[experiment]
kind = "consensus"
seed = 3
chunk_size = 4
[fixed]
trajectories = 8
strategy = "ring"
[grid]
n = [5, 8, 16]
b0 = { logspace = [100, 10000, 3] }
eta = [0.2, 0.3]
[grid.zip.costs]
c1 = [600.0, 300.0]
c2 = [100.0, 50.0]
"""


def test_parse_override_values():
    assert parse_override("grid.n=5,8,16") == ("grid.n", [5, 8, 16], False)
    assert parse_override("seed=3") == ("seed", 3, False)
    assert parse_override("eta=0.5") == ("eta", 0.5, False)
    assert parse_override("strategy=adaptive") == ("strategy", "adaptive", False)  # a bare word: a string
    assert parse_override('name="a b"') == ("name", "a b", False)
    assert parse_override("grid.b0={logspace = [1, 100, 3]}") == ("grid.b0", {"logspace": [1, 100, 3]}, False)
    assert parse_override("grid.n=[5, 8]") == ("grid.n", [5, 8], False)  # commas inside brackets: one list
    assert parse_override("~grid.eta") == ("grid.eta", None, True)
    # Hydra's bracketed lists of bare words (the outside test's grid.strategy=[complete] was refused)
    assert parse_override("grid.strategy=[complete]") == ("grid.strategy", ["complete"], False)
    assert parse_override("grid.strategy=[complete, ring]") == ("grid.strategy", ["complete", "ring"], False)
    assert parse_override('grid.strategy=[complete,"ring"]') == ("grid.strategy", ["complete", "ring"], False)
    for bad in ("n", "=3", "a b=1", "~", "grid.n=", "x=a;b", "grid.s=[a;b]", 'grid.s=[a,"b]'):
        with pytest.raises(ConfigError):
            parse_override(bad)
    with pytest.raises(ConfigError, match="n=5,,6: an empty element in the list"):  # (it said "empty value")
        parse_override("n=5,,6")


def test_overridden_config_equals_the_same_config_written_by_hand():
    text = apply_overrides(
        BASE,
        [
            "grid.n=5,8,16",  # replaces an axis
            "seed=3",  # a bare [experiment] key
            "strategy=ring",  # a bare parameter with one value: [fixed], the grid axis removed
            "eta=0.2,0.3",  # a bare parameter with a list: [grid], the fixed value removed
            "grid.zip.costs.c1=600.0,300.0",
            "grid.zip.costs.c2=100.0,50.0",
        ],
        "base.toml",
    )
    got, want = parse_config(text), parse_config(BY_HAND)
    assert got.hash == want.hash and got.axes == want.axes and got.n_points == want.n_points == 3 * 3 * 2 * 2
    assert text.splitlines()[0] == (
        "# base.toml with the command-line overrides: grid.n=5,8,16 seed=3 strategy=ring eta=0.2,0.3 "
        "grid.zip.costs.c1=600.0,300.0 grid.zip.costs.c2=100.0,50.0"
    )
    assert apply_overrides(BASE, []) == BASE  # no overrides: the file's own text, byte for byte
    removed = parse_config(apply_overrides(BASE, ["~grid.b0"]))
    assert [a[0] for a in removed.axes] == [("n",), ("strategy",)]
    with pytest.raises(ConfigError, match="not an \\[experiment\\] key or a parameter of kind 'consensus'"):
        apply_overrides(BASE, ["nosuch=1"])
    with pytest.raises(ConfigError, match="grid.eta is not in the config$"):
        apply_overrides(BASE, ["~grid.eta"])
    # an earlier override that moved the key is named (an outside tester read "grid.n is not in" as a typo)
    with pytest.raises(
        ConfigError, match="grid.n is not in the config any more: the earlier override 'fixed.n=48' moved"
    ):
        apply_overrides(BASE, ["fixed.n=48", "~grid.n"])
    assert "n = 48" in apply_overrides(BASE, ["~grid.n", "fixed.n=48"])  # the other order removes, then sets
    with pytest.raises(ConfigError, match="grid.b0 is not in the config any more: the earlier override '~b0' removed"):
        apply_overrides(BASE, ["~b0", "~grid.b0"])
    with pytest.raises(ConfigError, match="out of range"):  # the kind's own checks still apply
        parse_config(apply_overrides(BASE, ["grid.n=1,2"]))


def test_a_bad_value_from_an_override_is_not_blamed_on_the_file(tmp_path):
    """`fixed.eps=-1` was reported as the file's error (an outside tester): the message names the override
    after which the error appears, and a file's own error stays the file's."""
    from mascot.sweep.config import load_config

    cfg = tmp_path / "c.toml"
    cfg.write_text(BASE)
    with pytest.raises(ConfigError, match=f"^{cfg} with the override 'fixed.eps=-1': .*eps = -1.0 is out of range"):
        load_config(cfg, ["seed=2", "fixed.eps=-1", "fixed.trajectories=5"])
    cfg.write_text(BASE.replace("eta = 0.1", "eta = -0.1"))
    for ov in ([], ["seed=3"]):
        with pytest.raises(ConfigError, match=f"^{cfg}: .*eta = -0.1 is out of range"):
            load_config(cfg, ov)
    with pytest.raises(ConfigError, match="'~strategy': strategy is not in the config any more: the earlier override"):
        apply_overrides(BASE, ["~grid.strategy", "~strategy"])  # a bare ~KEY after its removal (a third tester)


def test_run_records_the_overrides_and_resumes_only_with_them(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(BASE)
    out = tmp_path / "r"
    args = ["run", str(cfg), "grid.n=5,7", "seed=4", "fixed.trajectories=2", "--out", str(out), "--quiet"]
    assert main(args) == 0
    recorded = (out / "config.toml").read_text()
    assert recorded.startswith("# ") and "grid.n=5,7 seed=4 fixed.trajectories=2" in recorded.splitlines()[0]
    assert parse_config(recorded).hash == parse_config(apply_overrides(BASE, args[2:5])).hash
    capsys.readouterr()
    assert main(args) == 0  # the same overrides: resumes, nothing to run
    assert "ran 0 chunks" in capsys.readouterr().out
    # the same overrides written among and after the options (as Hydra users do): the same run, resumed
    assert main(["run", str(cfg), "grid.n=5,7", "--out", str(out), "seed=4", "--quiet", "fixed.trajectories=2"]) == 0
    assert "ran 0 chunks" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:  # an unknown option is still refused, not taken as an override
        main(["run", str(cfg), "--out", str(out), "seed=4", "--bogus"])
    assert e.value.code == 2 and "unrecognized arguments: --bogus" in capsys.readouterr().err
    assert main(["run", str(cfg), "--out", str(out), "--quiet"]) == 2  # without them: another run
    err = capsys.readouterr().err
    assert "holds a different run" in err and "started with the overrides 'grid.n=5,7 seed=4" in err
    assert main(["merge", str(out), "--out", str(tmp_path / "m.parquet")]) == 0
    import pandas as pd

    df = pd.read_parquet(tmp_path / "m.parquet")
    assert sorted(df.n.unique()) == [5, 7] and len(df) == 2 * 2 * 3 * 2  # n x strategy x b0 x trajectories
    assert main(["validate", str(cfg), "grid.n=5,7", "seed=4"]) == 0
    assert "overrides: grid.n=5,7 seed=4" in capsys.readouterr().out


def test_slurm_tasks_get_the_overrides_quoted(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(BASE)
    ov = ["grid.n=5,9", 'experiment.name="my run"']
    # a name with a space is refused by the config itself, before any script is written
    assert main(["slurm", "submit", str(cfg), *ov, "--shards", "1", "--dry-run"]) == 2
    assert "experiment.name must be" in capsys.readouterr().err
    ov = ["grid.n=5,9", "fixed.x0_spread=0.2", 'output.dir="o d"']
    assert main(["slurm", "submit", str(cfg), *ov, "--shards", "1", "--dry-run", "--out", str(tmp_path / "o")]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("exec ") and " run " in ln)
    argv = shlex.split(line)
    i = argv.index("run")
    assert argv[i + 1] == str(cfg.resolve()) and argv[i + 2 : i + 5] == ov  # each override one word, unchanged


def test_outside_tester_findings(tmp_path, capsys):
    """A newline in an override would end the recorded comment line and add TOML of its own (it moved a run's
    output directory); a resume with fewer overrides names the ones the run was started with."""
    with pytest.raises(ConfigError, match="control characters"):
        apply_overrides(BASE, ['seed=3\n[output]\ndir="/tmp/elsewhere"'])
    cfg = tmp_path / "c.toml"
    cfg.write_text(BASE)
    out = tmp_path / "r"
    assert main(["run", str(cfg), "grid.n=5,6,7", "fixed.trajectories=2", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["run", str(cfg), "fixed.trajectories=2", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "started with the overrides 'grid.n=5,6,7 fixed.trajectories=2'" in err and "give the same" in err
