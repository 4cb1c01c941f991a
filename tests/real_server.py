"""A real OpenAI-compatible server for the tests: ``transformers serve`` on a local model directory.

:class:`RealServer` starts ``transformers serve MODEL_DIR --host 127.0.0.1 --port P --device cpu`` (the
``transformers[serving]`` extra: FastAPI + uvicorn) in its own process group on a free port, with its
output in a log file, waits until ``GET /v1/models`` answers, and stops it by process group (``stop``:
SIGTERM then SIGKILL; ``kill``: SIGKILL at once, a server dying mid-run). ``transformers serve`` names the
model by the path it was given; :attr:`RealServer.model` is the id ``/v1/models`` reports.

Measured here (transformers 5.24, SmolLM2-135M-Instruct, 2 CPUs): ready in about 6 s; one request at a
time (requests sent together are answered one after another); about 0.5 requests/s at 48 new tokens.
Sampling (temperature, top_p, seed) is honoured only when the model's ``generation_config.json`` sets
``do_sample``; ``response_format`` is ignored.

:func:`server_or_skip` turns "cannot start" into a skip, or a failure under ``MASCOT_REQUIRE_REAL_MODEL=1``
(``.ci/run``), like the real model itself (``tests/real_model.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

_LAUNCH = "import sys; from transformers.cli.transformers import main; sys.argv[0] = 'transformers'; sys.exit(main())"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url: str, timeout: float = 2.0):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # a local server, never via a proxy
    with opener.open(url, timeout=timeout) as r:
        return json.loads(r.read())


class RealServer:
    """``transformers serve`` on ``model_dir``; ``log`` collects its stdout and stderr."""

    def __init__(self, model_dir, log: Path):
        self.model_dir = Path(model_dir)
        self.log = Path(log)
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.model: str | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return "<no log>"

    def start(self, timeout_s: float = 180.0) -> RealServer:
        """Start on a free port and wait for ``GET /v1/models``; ``RuntimeError`` with the log's tail if the
        server exits or does not answer within ``timeout_s``."""
        self.port = free_port()
        cmd = [
            sys.executable,
            "-c",
            _LAUNCH,
            "serve",
            str(self.model_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--device",
            "cpu",
            "--log-level",
            "info",
        ]
        # one torch thread: it generates one request at a time anyway, and on a shared 2-CPU machine (other
        # jobs running) the probe's requests took 12.9 s with two threads and 2.3 s with one
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "OMP_NUM_THREADS": os.environ.get("MASCOT_TEST_SERVER_THREADS", "1"),
        }
        with open(self.log, "ab") as f:
            f.write(f"\n$ {' '.join(cmd[:1] + ['-c', '<transformers>'] + cmd[3:])}\n".encode())
            self.proc = subprocess.Popen(
                cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True
            )  # its own process group: stopped as a whole
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"transformers serve exited with code {self.proc.returncode} before answering; "
                    f"log {self.log}:\n{self.log_tail()}"
                )
            try:
                models = _get_json(self.base_url + "/models")
            except (OSError, ValueError):
                time.sleep(0.25)
                continue
            ids = [m.get("id") for m in models.get("data", [])]
            if not ids:
                raise RuntimeError(f"transformers serve lists no model at {self.base_url}/models: {models}")
            self.model = ids[0]
            return self
        self.stop()
        raise RuntimeError(
            f"transformers serve did not answer {self.base_url}/models within {timeout_s:.0f} s; "
            f"log {self.log}:\n{self.log_tail()}"
        )

    def _signal_group(self, sig) -> None:
        try:
            os.killpg(self.proc.pid, sig)  # the group leader's pid is the group id (start_new_session)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """SIGKILL the server's process group at once (a server dying mid-run) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self._signal_group(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM the process group, SIGKILL after 10 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self._signal_group(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()


def server_or_skip(model_dir, log: Path) -> RealServer:
    """A started :class:`RealServer`, or a skip (a failure under ``MASCOT_REQUIRE_REAL_MODEL=1``) when
    ``transformers serve`` is not installed or does not start."""
    required = os.environ.get("MASCOT_REQUIRE_REAL_MODEL") == "1"
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:
        msg = f"transformers serve needs the transformers[serving] extra (pip install -e '.[test]'): {e}"
        pytest.fail(msg) if required else pytest.skip(msg)
    try:
        return RealServer(model_dir, log).start()
    except RuntimeError as e:
        pytest.fail(str(e)) if required else pytest.skip(str(e))


def model_copy_without_sampling(model_dir, dest: Path) -> Path:
    """``dest``: the model directory's files linked (weights are not copied) with a generation config that
    does not set ``do_sample`` (nor temperature/top_p) -- what a model downloaded from the hub often has."""
    dest.mkdir(parents=True, exist_ok=True)
    for f in Path(model_dir).iterdir():
        if f.name in ("generation_config.json", ".complete"):
            continue
        target = dest / f.name
        try:
            target.symlink_to(f.resolve())
        except OSError:
            shutil.copy2(f, target)
    gc = json.loads((Path(model_dir) / "generation_config.json").read_text())
    for k in ("do_sample", "temperature", "top_p", "top_k"):
        gc.pop(k, None)
    (dest / "generation_config.json").write_text(json.dumps(gc, indent=2) + "\n")
    return dest
