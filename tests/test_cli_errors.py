"""Refusals found by an outside tester: each is checked to leave nothing behind and to name what is wrong."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import mascot  # noqa: E402
from limits import HANG_S  # noqa: E402  (a hang guard, not a speed claim)
from mascot.protocols.deliberation import DeliberationConfig

ROOT = Path(__file__).resolve().parents[1]


def _surrogate_trials(run, n_trials: int = 4, steps: int = 3) -> None:
    """A small finished surrogate trials run in ``run`` (the calibration tests' input)."""
    argv = ["trials", "--backend", "surrogate", "--n-trials", str(n_trials), "--steps", str(steps), "--no-figures"]
    assert mascot(*argv, "--out", run).returncode == 0


def _with_column(table, col: str, row: int, value):
    """``table`` (pyarrow) with ``col``'s entry at ``row`` replaced by ``value`` (its type kept)."""
    import pyarrow as pa

    vals = table.column(col).to_pylist()
    vals[row] = value
    return table.set_column(table.schema.get_field_index(col), col, pa.array(vals, table.schema.field(col).type))


def _model_dir(tmp_path, config_text='{"model_type": "llama"}'):
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(config_text)
    (d / "tokenizer.json").write_text("{}")
    (d / "model.safetensors").write_bytes(b"")
    return d


def test_hf_bad_device_is_refused_before_a_run_directory_exists(tmp_path):
    out = tmp_path / "run"
    r = mascot(
        "trials",
        "--backend",
        "hf",
        "--model",
        _model_dir(tmp_path),
        "--device",
        "tpu9",
        "--topology",
        "chain",
        "--n-trials",
        "1",
        "--steps",
        "1",
        "--out",
        out,
    )
    assert r.returncode == 2 and "--device" in r.stderr and "tpu9" in r.stderr
    assert not out.exists()


def test_hf_config_that_is_not_json_is_refused_before_a_run_directory_exists(tmp_path):
    out = tmp_path / "run"
    r = mascot(
        "trials",
        "--backend",
        "hf",
        "--model",
        _model_dir(tmp_path, "{not json"),
        "--device",
        "cpu",
        "--topology",
        "chain",
        "--n-trials",
        "1",
        "--steps",
        "1",
        "--out",
        out,
    )
    assert r.returncode == 2 and "config.json" in r.stderr and "not valid JSON" in r.stderr
    assert not out.exists()


def test_deliberate_json_says_which_values_were_not_measured(tmp_path, monkeypatch, capsys):
    from mascot.backends.base import Response
    from mascot.cli.main import main
    from mascot.protocols.deliberation import SurrogateDeliberationBackend

    def garbage(self, requests):  # every reply unusable: D(0) from the priors, no later round answered
        return [Response("no JSON here", 10, 3, finish_reason="stop") for _ in requests]

    monkeypatch.setattr(SurrogateDeliberationBackend, "generate", garbage)
    assert (
        main(
            [
                "deliberate",
                "--strategy",
                "ring",
                "--runs",
                "1",
                "--max-rounds",
                "2",
                "--retries",
                "0",
                "--no-report",
                "--quiet",
                "--json",
                "--out",
                str(tmp_path / "d"),
            ]
        )
        == 0
    )
    lane = json.loads(capsys.readouterr().out)["ring"][0]
    assert lane["d0_from_priors"] is True and lane["unanswered_rounds"] == lane["rounds"] >= 1
    monkeypatch.undo()
    assert (
        main(
            [
                "deliberate",
                "--strategy",
                "ring",
                "--runs",
                "1",
                "--max-rounds",
                "2",
                "--no-report",
                "--quiet",
                "--json",
                "--out",
                str(tmp_path / "e"),
            ]
        )
        == 0
    )
    lane = json.loads(capsys.readouterr().out)["ring"][0]
    assert lane["d0_from_priors"] is False and lane["unanswered_rounds"] == 0


def test_eta_below_eps_is_refused():
    with pytest.raises(ValueError, match="eta = 0.2 < eps = 0.5"):
        DeliberationConfig(eta=0.2, eps=0.5)
    DeliberationConfig(eta=0.05, eps=0.05)  # the paper's complete-only estimate uses eta = eps
    r = mascot("deliberate", "--eta", "0.2", "--eps", "0.5", "--runs", "1", "--out", "/nonexistent/never")
    assert r.returncode == 2 and "eps" in r.stderr


def test_calibrate_refuses_an_out_that_is_a_file_and_leaves_no_empty_directory(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = mascot("calibrate", "deliberation", "--paper-table8", "gpt", "--out", f)
    assert r.returncode == 2 and "not a directory" in r.stderr
    empty_run = tmp_path / "empty_run"
    empty_run.mkdir()
    out = tmp_path / "cal"
    r = mascot("calibrate", "deliberation", empty_run, "--out", out)
    assert r.returncode == 2 and not out.exists()
    r = mascot("calibrate", "deliberation", "--paper-table8", "gpt", "--out", out, "--seed", "-1")
    assert r.returncode == 2 and "--seed must be" in r.stderr and not out.exists()
    r = mascot("calibrate", "deliberation", f, "--out", out)
    assert r.returncode == 2 and "is a file, not a directory" in r.stderr and not out.exists()


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--sd-weight", "-1"], "--sd-weight"),
        (["--steps", "0"], "--steps"),
        (["--n-sim", "1"], "--n-sim"),
        (["--init", "/nonexistent.toml"], "--init"),
        (["--moments", "profile"], "--moments"),
        (["--fit", "sigma,"], "''"),
    ],
)
def test_calibrate_trials_refuses_bad_options_before_writing(tmp_path, extra, needle):
    out = tmp_path / "cal"
    r = mascot("calibrate", "trials", "--paper-table2", "--out", out, *extra)
    assert r.returncode == 2 and needle in r.stderr and "Traceback" not in r.stderr and not out.exists()


def test_calibrate_trials_refuses_unusable_input_at_once(tmp_path):
    """Found by an outside tester: a seed out of range, an --out below a file, a 1-trial run, a run directory
    that is a file -- each one line, exit 2, before any fit."""
    f = tmp_path / "afile"
    f.write_text("x")
    r = mascot("calibrate", "trials", "--paper-table2", "--out", tmp_path / "c", "--seed", 2**40)
    assert r.returncode == 2 and "--seed" in r.stderr and not (tmp_path / "c").exists()
    r = mascot("calibrate", "trials", "--paper-table2", "--out", f / "sub", "--quick")
    assert r.returncode == 2 and "cannot be written" in r.stderr and "Traceback" not in r.stderr
    r = mascot("calibrate", "trials", f, "--out", tmp_path / "c")
    assert r.returncode == 2 and "is a file" in r.stderr
    run = tmp_path / "one"
    _surrogate_trials(run, n_trials=1, steps=2)
    r = mascot("calibrate", "trials", run, "--out", tmp_path / "c")
    assert r.returncode == 2 and "too few trials" in r.stderr and not (tmp_path / "c").exists()
    unp = tmp_path / "unpaired"
    assert (
        mascot(
            "trials",
            "--backend",
            "surrogate",
            "--n-trials",
            "3",
            "--steps",
            "2",
            "--unpaired",
            "--no-figures",
            "--out",
            unp,
        ).returncode
        == 0
    )
    r = mascot("calibrate", "trials", unp, "--out", tmp_path / "c")
    assert r.returncode == 2 and "paired_seeds = False" in r.stderr and not (tmp_path / "c").exists()


def test_calibrate_trials_refuses_missing_or_bad_run_records_and_clears_old_outputs(tmp_path):
    """Found by an outside tester: an empty --out wrote into the working directory; a run directory without
    run.json was calibrated with default settings; a corrupt run.json gave a message without its name; an
    earlier calibration's files (step profile, split-half report) stayed beside a new one's."""
    import shutil

    r = mascot("calibrate", "trials", "--paper-table2", "--out", "")
    assert r.returncode == 2 and "--out is empty" in r.stderr
    run = tmp_path / "run"
    _surrogate_trials(run, n_trials=4, steps=3)
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(run / "trials.parquet", bare / "trials.parquet")
    r = mascot("calibrate", "trials", bare, "--out", tmp_path / "c")
    assert r.returncode == 2 and "no run.json" in r.stderr and not (tmp_path / "c").exists()
    import json

    good = json.loads((run / "run.json").read_text())
    bad_cfg = [
        {"epsilon": float("nan")},
        {"epsilon": "abc"},
        {"leaves": 0},
        {"retries": -1},
        {"d_floor": "x"},
        {"initial_state": [1]},
        {"initial_state": [50, "Z", 3]},
        {"initial_state": None},
    ]
    texts = ['{"config": ', "[1, 2]", "{}", '{"config": {}}'] + [
        json.dumps({**good, "config": {**good["config"], **c}}) for c in bad_cfg
    ]
    judge = json.loads(json.dumps(good))
    judge["identity"]["backend"].setdefault("options", {})["judge"] = "bogus"
    texts.append(json.dumps(judge))
    keep = tmp_path / "keep"  # an earlier calibration's files survive a refused one
    keep.mkdir()
    (keep / "report.md").write_text("old")
    for text in texts:
        (bare / "run.json").write_text(text)
        r = mascot("calibrate", "trials", bare, "--out", keep)
        assert r.returncode == 2 and "run.json" in r.stderr and "Traceback" not in r.stderr, (text, r.stderr)
        assert (keep / "report.md").read_text() == "old" and not (keep / ".calibrate.lock").exists()
    for inside, why in ((run, "is a run directory"), (run / "cal", "inside it")):
        r = mascot("calibrate", "trials", run, "--out", inside)
        assert r.returncode == 2 and why in r.stderr and not (run / "cal").exists(), r.stderr
    out = tmp_path / "cal"
    out.mkdir()
    for stale in ("step_profile.png", "split_half.md", "params.toml", ".report.md.abcd1234.tmp"):
        (out / stale).write_text("old")
    r = mascot(
        "calibrate", "trials", run, "--out", out, "--quick", "--moments", "table2", "--n-boot", "0", "--steps", "2"
    )
    assert r.returncode == 0, r.stderr
    assert not (out / "step_profile.png").exists() and not (out / "split_half.md").exists()
    assert not list(out.glob(".*.tmp")) and (out / "params.toml").read_text() != "old"


def test_wrong_kind_of_parameter_file_says_so(tmp_path):
    src = ROOT / "results/calibration/trials/paper-table2/params.toml"
    if not src.exists():
        pytest.skip("no committed state-tracking parameter file")
    r = mascot("deliberate", "--surrogate-params", src, "--runs", "1", "--out", tmp_path / "d")
    assert r.returncode == 2 and 'kind must be "deliberation"' in r.stderr and "unknown key" not in r.stderr


@pytest.mark.parametrize("sig, code, word", [("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "terminated (SIGTERM)")])
def test_interrupt_prints_one_line_and_exits_130(tmp_path, sig, code, word):
    """SIGINT while requests are in flight (a server that accepts connections and never answers): one line, 130;
    SIGTERM, what schedulers send (issue 33), the same with 143."""
    import signal
    import socket
    import time

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)  # connections complete in the kernel's backlog; nothing ever answers
    port = srv.getsockname()[1]
    try:
        p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mascot",
                "trials",
                "--backend",
                "openai",
                "--base-url",
                f"http://127.0.0.1:{port}/v1",
                "--model",
                "m",
                "--no-probe",
                "--timeout",
                "120",
                "--topology",
                "chain",
                "--n-trials",
                "1",
                "--steps",
                "1",
                "--out",
                str(tmp_path / "t"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            # a shell that runs the suite in the background leaves SIGINT ignored in its children;
            # a user's terminal does not
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        deadline = time.time() + HANG_S
        while time.time() < deadline and not (tmp_path / "t" / "run.json").exists():
            time.sleep(0.2)
        time.sleep(2.0)
        p.send_signal(getattr(signal, sig))
        _, err = p.communicate(timeout=HANG_S)
    finally:
        srv.close()
    assert p.returncode == code, err[-2000:]
    assert f"mascot: {word}; " in err and "Traceback" not in err and "resume" in err
    assert not json.loads((tmp_path / "t" / "run.json").read_text()).get("complete")


def test_calibrate_trials_without_abstention_counts_damaged_counts_and_a_hard_interrupt(tmp_path):
    """Found by an outside tester: a run written without the n_abstained column could not be calibrated (the
    abstention moment is simply unused); a damaged count (negative, or above the row's requests) was turned into a
    share of -0.64 or 10; --n-boot 0 printed s.d. nan; SIGINT inside a JAX callback was ignored once and the
    fit ran on to write its files."""
    import signal
    import time

    import pyarrow.parquet as pq

    run = tmp_path / "run"
    _surrogate_trials(run, n_trials=4, steps=3)
    old = tmp_path / "old"
    shutil.copytree(run, old)
    t = pq.read_table(run / "trials.parquet")
    pq.write_table(t.drop_columns(["n_abstained"]), old / "trials.parquet")
    r = mascot("calibrate", "trials", old, "--out", tmp_path / "c", "--quick", "--n-boot", "0", "--steps", "2")
    assert r.returncode == 0, r.stderr
    assert "no bootstrap" in r.stdout and "nan" not in r.stdout
    fit = json.loads((tmp_path / "c" / "fit.json").read_text())
    i = fit["moment_names"].index("chain.abstained.mean")
    assert fit["target"][i] is None and fit["weights"][i] == 0.0 and fit["abstained"] is None
    assert "nan" not in (tmp_path / "c" / "params.toml").read_text().lower()
    rep = (tmp_path / "c" / "report.md").read_text()
    assert "| chain.abstained.mean | not recorded | - |" in rep and "| nan |" not in rep
    assert "RuntimeWarning" not in r.stderr
    for bad in (-1, 99):
        pq.write_table(_with_column(t, "n_abstained", 7, bad), old / "trials.parquet")
        r = mascot("calibrate", "trials", old, "--out", tmp_path / "c2", "--quick", "--n-boot", "0")
        assert r.returncode == 2 and f"n_abstained = {bad}" in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert "retried request counted once" in r.stderr
    # SIGINT mid-fit: one line, 130, nothing written but the lock file (released by the OS)
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mascot",
            "calibrate",
            "trials",
            str(run),
            "--out",
            str(tmp_path / "i"),
            "--quick",
            "--steps",
            "400",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # the fit has started (its progress names an ES step: the simulator is compiled and running), then SIGINT
    seen, deadline = [], time.time() + HANG_S
    while time.time() < deadline:
        line = p.stderr.readline()
        seen.append(line)
        if not line or "ES step" in line:
            break
    assert "ES step" in seen[-1], "".join(seen)[-2000:]
    p.send_signal(signal.SIGTERM)  # as a scheduler would: the same stop as Ctrl-C's, 143
    _, err = p.communicate(timeout=HANG_S)
    err = "".join(seen) + err
    assert p.returncode == 143 and "terminated (SIGTERM)" in err and "Traceback" not in err, err[-2000:]
    assert not (tmp_path / "i" / "params.toml").exists()


def test_a_rerun_replaces_an_earlier_calibration_only_when_it_has_finished(tmp_path):
    """Found by an outside tester: a rerun into an --out holding a finished calibration deleted its files when the
    fit started, so an interrupted or failing rerun left nothing. The run writes into a staging folder; its files
    replace the earlier ones (params.toml last, the earlier run's other outputs removed) only on success."""
    from mascot.cli.calibrate import _STAGE, _staged

    out = tmp_path / "cal"
    out.mkdir()
    old = {"params.toml": "old params", "report.md": "old report", "rates.png": "old figure", "notes.txt": "mine"}
    for name, text in old.items():
        (out / name).write_text(text)
    (out / "fit").mkdir()
    (out / "fit" / "report.md").write_text("old split-half fit")
    for failure in (ValueError("refused"), KeyboardInterrupt()):
        with pytest.raises(type(failure)):
            with _staged(out) as stage:
                (stage / "fit.json").write_text("new, half written")
                raise failure
        assert {p.name: p.read_text() for p in out.iterdir() if p.is_file()} == old
        assert (out / "fit" / "report.md").read_text() == "old split-half fit" and not (out / _STAGE).exists()
    with _staged(out) as stage:
        for name in ("params.toml", "report.md", "fit.json"):
            (stage / name).write_text(f"new {name}")
    assert {p.name: p.read_text() for p in out.iterdir() if p.is_file()} == {
        "params.toml": "new params.toml",
        "report.md": "new report.md",
        "fit.json": "new fit.json",
        "notes.txt": "mine",
    }
    assert not (out / "fit").exists() and not (out / _STAGE).exists()


def test_the_command_line_keeps_compiled_programs_per_processor_and_can_be_told_not_to(tmp_path):
    """The CLI's persistent JAX cache: under $MASCOT_CACHE_DIR/jax/<processor kind>/, read back by the next
    command with the same output; --no-compile-cache and MASCOT_COMPILE_CACHE=0 write none."""
    from mascot.cli.compile_cache import machine_tag

    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    env.update(MASCOT_CACHE_DIR=str(tmp_path / "c"), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    cmd = [sys.executable, "-m", "mascot", "design", "budget", "--c1", "600", "--c2", "100", "--eta", "0.1"]
    cmd += ["--eps", "0.01", "--runs", "100", "--json"]  # (a short command that compiles JAX programs)

    def run(*extra, **more):
        r = subprocess.run([*cmd, *extra], env={**env, **more}, capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        return r.stdout

    first = run()
    where = tmp_path / "c" / "jax" / machine_tag()
    entries = sorted(p.name for p in where.iterdir())
    assert entries, "nothing was cached"
    assert run() == first and sorted(p.name for p in where.iterdir()) == entries  # read back, nothing new
    for other, extra, more in (("d", ("--no-compile-cache",), {}), ("e", (), {"MASCOT_COMPILE_CACHE": "0"})):
        r = subprocess.run(
            [*cmd[:3], *extra, *cmd[3:]],  # a global option: before the command
            env={**env, "MASCOT_CACHE_DIR": str(tmp_path / other), **more},
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert r.returncode == 0 and r.stdout == first and not (tmp_path / other).exists(), r.stderr
    # found by an outside tester: HOME=/nonexistent made a cache there; an unwritable one warned on every compile
    base = {k: v for k, v in env.items() if k not in ("MASCOT_CACHE_DIR", "XDG_CACHE_HOME")}
    for home in (tmp_path / "no-such-home", "/proc/no-home"):
        r = subprocess.run(cmd, env={**base, "HOME": str(home)}, capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 0 and r.stdout == first and "Warning" not in r.stderr, r.stderr
        assert not os.path.exists(home)


def test_a_deeply_nested_config_is_refused_naming_the_file(tmp_path):
    """Found by the sweep probe: a = [[[...]]] 10^5 levels deep printed 'maximum recursion depth exceeded'."""
    deep = tmp_path / "deep.toml"
    d = 100_000
    deep.write_text('[experiment]\nkind = "consensus"\n[grid]\nn = ' + "[" * d + "5" + "]" * d + "\n")
    r = mascot("validate", deep)
    assert r.returncode == 2 and f"{deep}: arrays or tables nested too deeply to read" in r.stderr, r.stderr
    assert "recursion" not in r.stderr and "Traceback" not in r.stderr


def test_reports_reproductions_designs_and_calibrations_refuse_a_run_directory_as_out(tmp_path):
    """Found by an outside tester: `mascot reproduce consensus --out RUN` wrote its tables and figures among a
    run's records. Commands that write files of their own refuse a run directory (run.json, or an earlier
    sweep's plan.json) as --out, naming it, and write nothing."""
    run = tmp_path / "run"
    r = mascot(
        "trials", "--backend", "surrogate", "--topology", "chain", "--n-trials", "1", "--steps", "1", "--no-figures",
        "--out", run,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    before = sorted(p.relative_to(run) for p in run.rglob("*"))
    legacy = tmp_path / "sweep01"  # a sweep directory of an earlier 0.2 build
    legacy.mkdir()
    (legacy / "plan.json").write_text("{}")
    for out, name in ((run, "run.json"), (legacy, "plan.json")):
        for cmd in (
            ("reproduce", "consensus", "--out", out),
            ("design", "weights", "--topology", "ring:5", "--out", out),
            ("calibrate", "trials", "--paper-table2", "--quick", "--out", out),
        ):
            r = mascot(*cmd)
            assert r.returncode == 2 and f"{out} is a run directory (it holds {name})" in r.stderr, (cmd, r.stderr)
            assert "Traceback" not in r.stderr
    assert sorted(p.relative_to(run) for p in run.rglob("*")) == before
    assert sorted(p.name for p in legacy.iterdir()) == ["plan.json"]
    # reproduce all checks every folder it writes: a run directory at RESULTS/trials is refused before anything
    root = tmp_path / "results"
    (root / "trials").mkdir(parents=True)
    (root / "trials" / "run.json").write_text("{}")
    r = mascot("reproduce", "all", "--out", root)
    assert r.returncode == 2 and f"{root / 'trials'} is a run directory" in r.stderr
    assert sorted(p.name for p in root.iterdir()) == ["trials"]


def test_calibrate_trials_refuses_values_the_harness_never_writes(tmp_path):
    """Found by an outside tester (issue 31): NaN and 1e300 written into trials.parquet's `value` (the file
    rewritten, so its checksums hold) were calibrated with exit 0; each is refused naming the column and row."""
    import pyarrow.parquet as pq

    from mascot.calibrate.trials_targets import observed_from_run

    run = tmp_path / "run"
    _surrogate_trials(run, n_trials=4, steps=3)
    observed_from_run(run)  # the run as written is accepted
    t = pq.read_table(run / "trials.parquet")
    i = 9
    where = t.slice(i, 1).to_pylist()[0]
    for col, bad in (
        ("value", float("nan")),
        ("value", 1e300),
        ("d_t", -1.0),
        ("d_t", float("inf")),
        ("value_true", float("inf")),
    ):
        pq.write_table(_with_column(t, col, i, bad), run / "trials.parquet")
        with pytest.raises(ValueError) as e:
            observed_from_run(run)
        msg = str(e.value)
        assert f"{col} = {bad!r} in 1 row(s)" in msg, msg
        assert f"first at {where['topology']} trial {where['trial']} step {where['step']}" in msg, msg
    pq.write_table(t, run / "trials.parquet")
    r = mascot("calibrate", "trials", run, "--out", tmp_path / "c", "--quick", "--n-boot", "0", "--steps", "2")
    assert r.returncode == 0, r.stderr  # restored: calibrated again
