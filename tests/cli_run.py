"""``mascot ARGS`` in the test process, for tests that check what a command prints and returns."""

import subprocess
from pathlib import Path

from limits import HANG_S

ROOT = Path(__file__).resolve().parents[1]


def mascot(*args, timeout=HANG_S):
    """``mascot ARGS`` in this process (what a refusal prints and returns is the same; a subprocess would add an
    interpreter and a JAX import per call): a CompletedProcess-like result with returncode, stdout, stderr.
    Tests of signals start a real process themselves."""
    import contextlib
    import io
    import os

    from mascot.cli import main

    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main([str(a) for a in args])
            except SystemExit as e:  # argparse's usage errors
                rc = e.code if isinstance(e.code, int) else 2
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(list(args), rc, out.getvalue(), err.getvalue())
