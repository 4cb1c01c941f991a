"""The command line's persistent JAX compilation cache: one directory per kind of processor under
``$MASCOT_CACHE_DIR/jax`` (default ``~/.cache/mascot/jax``), on unless ``--no-compile-cache`` or
``MASCOT_COMPILE_CACHE=0``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["compile_cache_dir", "machine_tag", "enable_compile_cache"]


def compile_cache_dir() -> Path:
    """Where the command line keeps JAX's compiled programs: ``$MASCOT_CACHE_DIR/jax``, by default under
    ``$XDG_CACHE_HOME/mascot`` (``~/.cache/mascot``)."""
    root = (
        os.environ.get("MASCOT_CACHE_DIR")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mascot"
    )
    return Path(root) / "jax" / machine_tag()


def machine_tag() -> str:
    """One cache per kind of processor: XLA compiles for the host's vector extensions, so a program compiled on
    an AVX-512 node must not be read back on another node of a cluster that shares the home directory (it could
    crash there, or give that node another machine's last bits)."""
    import hashlib
    import platform

    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        pass
    words = " ".join(sorted(flags.split(":", 1)[-1].split()))
    key = "|".join([platform.machine(), platform.processor(), words])
    return f"{platform.machine() or 'cpu'}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def enable_compile_cache(on: bool) -> None:
    """JAX's persistent compilation cache, on by default for the command line: a kernel compiled once (16 s for a
    non-commuting consensus pair) is read back by later commands. Off with ``--no-compile-cache`` or
    ``MASCOT_COMPILE_CACHE=0``; a ``JAX_COMPILATION_CACHE_DIR`` already set is kept. Results do not depend on it."""
    if not on or os.environ.get("MASCOT_COMPILE_CACHE", "1") == "0" or os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return
    explicit = os.environ.get("MASCOT_CACHE_DIR") or os.environ.get("XDG_CACHE_HOME")
    if not explicit and not Path.home().is_dir():
        return  # no home directory (a service account, HOME=/nonexistent): no cache, and none created there
    try:  # a cache directory that cannot be written is no cache (JAX would warn on every compile)
        path = compile_cache_dir()
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            return
    except OSError:
        return
    path = str(path)
    if "jax" in sys.modules:  # main() called from a program that already imported JAX: its config, not the env
        import jax

        if not jax.config.jax_compilation_cache_dir:
            jax.config.update("jax_compilation_cache_dir", path)
    else:
        os.environ["JAX_COMPILATION_CACHE_DIR"] = path
