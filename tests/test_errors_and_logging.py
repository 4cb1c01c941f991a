"""Typed errors (mascot.errors) and messages through logging (mascot.log): the command line prints what mascot
raises on purpose as one line and lets a bug show its traceback; library code never prints."""

import ast
import io
import logging
from pathlib import Path

import pytest

import mascot.errors as E
from mascot import log
from mascot.cli import main

SRC = Path(__file__).resolve().parents[1] / "src" / "mascot"


def test_the_hierarchy_keeps_the_builtins_callers_expect():
    assert issubclass(E.InputError, ValueError) and issubclass(E.ConfigError, E.InputError)
    assert issubclass(E.NotFoundError, FileNotFoundError) and issubclass(E.NotFoundError, E.InputError)
    assert issubclass(E.RunDirError, ValueError)
    for cls in (E.MissingChunksError, E.DirectoryLocked, E.BackendError, E.SlurmError):
        assert issubclass(cls, RuntimeError) and issubclass(cls, E.MascotError)
    assert issubclass(E.BackendUnreachable, ConnectionError) and issubclass(E.BackendUnreachable, E.BackendError)
    assert E.exit_code(E.ConfigError("x")) == 2 and E.exit_code(E.MissingChunksError("x")) == 1
    from mascot.backends.base import BackendFailure
    from mascot.io import DirectoryLocked
    from mascot.sweep import ConfigError, MissingChunksError

    assert ConfigError is E.ConfigError and MissingChunksError is E.MissingChunksError
    assert DirectoryLocked is E.DirectoryLocked and issubclass(BackendFailure, E.BackendError)


def test_library_errors_are_typed(tmp_path):
    from mascot.sweep import RunDir, parse_config

    with pytest.raises(E.ConfigError, match="unknown key"):
        parse_config('[experiment]\nkind = "consensus"\nbogus = 1\n')
    with pytest.raises(E.NotFoundError, match="does not exist"):
        RunDir(tmp_path / "nowhere").plan()
    import numpy as np

    import mascot

    with pytest.raises(E.InputError, match="strategy"):
        mascot.simulate_consensus(np.zeros((1, 3, 2)), np.eye(3), np.eye(3), 1, 1, 0.1, 0.03, 10, strategy="x")


def test_the_cli_prints_a_mascot_error_as_one_line_and_a_bug_as_a_traceback(tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.toml"
    bad.write_text('[experiment]\nkind = "nope"\n')
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mascot: error: ") and err.count("\n") == 1 and "Traceback" not in err

    import importlib

    cli_sweep = importlib.import_module("mascot.cli.sweep_cmds")

    def buggy(args):
        raise ValueError("an internal inconsistency")  # not a MascotError: a bug

    monkeypatch.setattr(cli_sweep, "_cmd_validate", buggy)  # the parser is built per call: it takes this one
    with pytest.raises(ValueError, match="internal inconsistency"):
        main(["validate", str(bad)])


def test_library_code_never_prints():
    """Every message of the library goes through logging; only the command line (mascot.cli) prints."""
    offenders = []
    for p in sorted(SRC.rglob("*.py")):
        if "cli" in p.relative_to(SRC).parts:
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                offenders.append(f"{p.relative_to(SRC)}:{node.lineno}")
    assert offenders == []


def test_warnings_and_progress_go_through_logging(tmp_path, capsys):
    from mascot.sweep import RunDir, parse_config, run_sweep

    cfg = parse_config(
        '[experiment]\nkind = "consensus"\nchunk_size = 2\n[fixed]\ntrajectories = 2\n[grid]\nn = [3, 4, 5]\n'
    )
    logger = logging.getLogger("mascot")
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append((record.name, record.levelno, record.getMessage()))

    h = Keep()
    logger.addHandler(h)
    try:
        run_sweep(cfg, tmp_path / "r", progress=True)
        (tmp_path / "r" / "chunks" / "stray.txt").write_text("x")
        RunDir(tmp_path / "r").merge()
        log.set_quiet(True)
        run_sweep(cfg, tmp_path / "q", progress=True)
    finally:
        log.set_quiet(False)
        logger.removeHandler(h)
    progress = [m for n, lv, m in seen if lv == log.PROGRESS]
    assert progress and all(n == "mascot.sweep.runner" for n, lv, m in seen if lv == log.PROGRESS)
    assert any(lv == logging.WARNING and "ignoring" in m and n == "mascot.sweep.store" for n, lv, m in seen)
    assert not any("[q" in m or "/q" in m for _, _, m in seen)  # quiet: no progress from the second run
    err = capsys.readouterr().err  # mascot's own handler wrote to the (captured) stderr
    assert "mascot: warning: ignoring" in err and "points/s" in err


def test_a_transient_progress_line_is_rewritten_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    import sys

    stream, old = Tty(), sys.stderr
    sys.stderr = stream
    try:
        lg = log.get_logger("mascot.test")
        log.progress(lg, "1/2", transient=True)
        log.progress(lg, "2/2", transient=True)
        log.progress(lg, "2/2", replaces=True)
        lg.warning("careful")
    finally:
        sys.stderr = old
    assert stream.getvalue() == "\r1/2\x1b[K\r2/2\x1b[K\r2/2\x1b[K\nmascot: warning: careful\n"
