"""Slurm submission: rendered scripts, and a real 4-shard array + merge job on a live cluster."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from mascot.cli import main
from mascot.cli.slurm import render
from mascot.sweep import RunDir, parse_config, run_sweep
from slurm_cluster import unsafe_for_sbatch

CONFIG = """
[experiment]
kind = "consensus"
name = "slurmtest"
seed = 11
chunk_size = 3

[fixed]
trajectories = 4
d = 3
max_rounds = 40

[grid]
n = [5, 6]
strategy = ["adaptive", "complete", "ring"]
b0 = [400.0, 4000.0]
"""


TRIALS = """
[trials]
backend = "surrogate"
n_trials = 12
steps = 4
seed = 5
no_figures = true
n_boot = 50
"""


@pytest.fixture
def tmp_path(tmp_path):
    """A directory an #SBATCH --output line can carry: pytest's own, or, where TMPDIR holds whitespace, a quote,
    '%' or a backslash (which `mascot slurm submit` refuses, as it must: found by an outside tester with
    TMPDIR="/tmp/t m p"), a fresh one under /tmp."""
    if not unsafe_for_sbatch(tmp_path):
        yield tmp_path
        return
    base = next((b for b in ("/tmp", "/var/tmp") if os.path.isdir(b) and os.access(b, os.W_OK)), None)
    if base is None:
        pytest.skip(f"pytest's temporary directory {tmp_path} cannot be an #SBATCH path and there is no /tmp")
    d = Path(tempfile.mkdtemp(prefix="mascot-slurm-test-", dir=base))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def trials_config(tmp_path):
    f = tmp_path / "trials.toml"
    f.write_text(TRIALS)
    return f


@pytest.fixture
def config(tmp_path):
    f = tmp_path / "sweep.toml"
    f.write_text(CONFIG)
    return f


def test_dry_run_renders_array_and_merge(config, tmp_path, capsys):
    assert (
        main(
            [
                "slurm",
                "submit",
                str(config),
                "--shards",
                "4",
                "--out",
                str(tmp_path / "r"),
                "--partition",
                "cpu",
                "--time",
                "00:30:00",
                "--dry-run",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "#SBATCH --array=0-3" in out and "#SBATCH --requeue" in out and "#SBATCH --partition=cpu" in out
    assert "#SBATCH --time=00:30:00" in out
    assert '--shard "${SLURM_ARRAY_TASK_ID}/4"' in out
    assert "#SBATCH --dependency=afterok:<ARRAY_JOB_ID>" in out and "mascot.cli merge" in out
    assert "--gres" not in out
    gpu = render(str(config), 2, out=str(tmp_path / "r"), gpus=1)
    assert "#SBATCH --gres=gpu:1" in gpu.array_script and "#SBATCH --array=0-1" in gpu.array_script


def test_dry_run_renders_one_requeue_safe_trials_job(trials_config, tmp_path, capsys):
    assert (
        main(["slurm", "submit", str(trials_config), "--out", str(tmp_path / "t"), "--time", "01:00:00", "--dry-run"])
        == 0
    )
    out = capsys.readouterr().out
    assert "#SBATCH --requeue" in out and "#SBATCH --open-mode=append" in out and "#SBATCH --time=01:00:00" in out
    assert f"mascot.cli trials --config {trials_config} --out {tmp_path / 't'}" in out
    assert "--array" not in out and "merge" not in out and "--gres" not in out  # surrogate: CPU only
    vllm = tmp_path / "vllm.toml"
    vllm.write_text('[trials]\nbackend = "vllm"\nn_trials = 100\n\n[output]\ndir = "runs/q"\n')
    sub = render(str(vllm), partition="gpu")
    assert sub.kind == "trials" and "#SBATCH --gres=gpu:1" in sub.array_script
    assert "#SBATCH --mem=64G" in sub.array_script
    assert "#SBATCH --partition=gpu" in sub.array_script and sub.out.endswith("runs/q")
    assert main(["slurm", "submit", str(vllm), "--gpus", "0", "--dry-run"]) == 2
    assert "needs a GPU" in capsys.readouterr().err
    assert main(["slurm", "submit", str(trials_config), "--shards", "4", "--dry-run"]) == 2
    assert "one job" in capsys.readouterr().err


@pytest.mark.parametrize("gpus", [0, 1])
def test_every_template_renders_valid_bash_with_quoted_values(config, trials_config, tmp_path, gpus):
    """cpu-array, gpu-array, merge and trials scripts: `bash -n` clean, and a hostile run directory stays one
    quoted argument (no config value or option can add a line to a script; see tests/test_faults.py)."""
    import shlex

    out = tmp_path / "r$(id);`id`&|x"  # (quotes are refused: #SBATCH lines cannot carry them)
    sub = render(str(config), 2, out=str(out), gpus=gpus)
    trials = render(str(trials_config), out=str(out))
    for script in (sub.array_script, sub.merge_script, trials.array_script):
        assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
        exec_line = next(ln for ln in script.splitlines() if ln.startswith("exec "))
        assert str(out.resolve()) in shlex.split(exec_line)
    with pytest.raises(ValueError, match="--partition"):
        render(str(config), 2, partition="cpu\nid")
    config.write_text(CONFIG.replace('name = "slurmtest"', 'name = "x\\nid"'))
    with pytest.raises(ValueError, match="experiment.name"):
        render(str(config), 2)


def test_bad_submissions(config, capsys):
    assert main(["slurm", "submit", str(config), "--dry-run"]) == 2
    assert "--shards is required" in capsys.readouterr().err
    assert main(["slurm", "submit", str(config), "--shards", "0", "--dry-run"]) == 2
    assert "--shards" in capsys.readouterr().err
    assert main(["slurm", "submit", str(config), "--shards", "9", "--dry-run"]) == 2  # 12 points / 3 = 4 chunks
    assert "exceeds the 4 chunks" in capsys.readouterr().err


def test_a_submission_into_another_runs_directory_is_refused_before_sbatch(config, tmp_path, capsys, monkeypatch):
    """Found by an outside tester: submitting with another chunk size into an existing run's --out submitted
    the jobs; every array task then failed and the merge job waited forever on its dependency."""
    import mascot.cli.slurm as slurm

    out = tmp_path / "run"
    run_sweep(parse_config(CONFIG), out, progress=False)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    calls = []
    monkeypatch.setattr(slurm, "_sbatch", lambda *a, **k: calls.append(a) or "1")
    argv = ["slurm", "submit", str(config), "--shards", "2", "--out", str(out)]
    assert main([*argv, "experiment.chunk_size=2"]) == 2
    assert (
        "a run keeps the chunking it started with. Resume it with experiment.chunk_size = 3" in capsys.readouterr().err
    )
    assert main([*argv, "seed=5"]) == 2
    assert "holds a different run" in capsys.readouterr().err
    assert not calls and before == {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert main(argv) == 0 and len(calls) == 2  # the same run: its array and merge jobs (a resume)
    fresh = tmp_path / "new" / "run"  # a new --out (and its parent) is made, with the run's plan in it
    assert main(["slurm", "submit", str(config), "--shards", "2", "--out", str(fresh)]) == 0 and len(calls) == 4
    assert json.loads((fresh / "run.json").read_text())["identity"]["hash"] == parse_config(CONFIG).hash


def test_real_slurm_array_and_merge_equal_local_run(config, tmp_path, slurm_cluster):
    out = tmp_path / "slurm-run"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "mascot.cli",
            "slurm",
            "submit",
            str(config),
            "seed=12",  # a command-line override, passed to every array task (it must match the local run below)
            "--shards",
            "4",
            "--out",
            str(out),
            "--time",
            "00:10:00",
            "--wait",
            "--wait-timeout",
            "1200",
        ],
        capture_output=True,
        text=True,
        env=slurm_cluster.env,
    )
    logs = "\n".join(p.read_text() for p in (out / "slurm").glob("*.out")) if (out / "slurm").exists() else ""
    assert res.returncode == 0, res.stdout + res.stderr + logs
    assert sorted(p.name for p in (out / "slurm").glob("*_*.out")) and "merge" in logs
    via_slurm = pd.read_parquet(out / "merged.parquet")
    run_sweep(parse_config(CONFIG.replace("seed = 11", "seed = 12")), tmp_path / "local", progress=False)
    local = pd.read_parquet(RunDir(tmp_path / "local").merge())
    pd.testing.assert_frame_equal(via_slurm, local, check_exact=True)
    assert "seed=12" in (out / "config.toml").read_text().splitlines()[0]


def test_real_slurm_trials_job_equals_local_run(trials_config, tmp_path, slurm_cluster):
    out = tmp_path / "slurm-trials"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "mascot.cli",
            "slurm",
            "submit",
            str(trials_config),
            "--out",
            str(out),
            "--time",
            "00:10:00",
            "--wait",
            "--wait-timeout",
            "1200",
        ],
        capture_output=True,
        text=True,
        env=slurm_cluster.env,
    )
    logs = "\n".join(p.read_text() for p in (out / "slurm").glob("*.out")) if (out / "slurm").exists() else ""
    assert res.returncode == 0, res.stdout + res.stderr + logs
    assert "restart 0" in logs and (out / "table2.csv").exists()
    assert main(["trials", "--config", str(trials_config), "--out", str(tmp_path / "local"), "--quiet"]) == 0
    pd.testing.assert_frame_equal(
        pd.read_parquet(out / "trials.parquet"),
        pd.read_parquet(tmp_path / "local" / "trials.parquet"),
        check_exact=True,
    )
