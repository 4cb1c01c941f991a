"""A Slurm controller for the integration tests, or the reason there is none.

:func:`slurm_or_skip` decides, once per test session:

* ``sbatch`` is not installed: skip, naming ``slurm/local-cluster.sh start`` (which installs and starts a
  single-node cluster on Debian/Ubuntu as root);
* mascot's local cluster answers (``SLURM_CONF`` is the one ``slurm/local-cluster.sh`` writes, as ``.ci/run``
  exports it): use it;
* another controller answers (a real cluster's login node): skip, so that running the suite never queues jobs
  on a shared cluster, unless ``MASCOT_TEST_SLURM=1`` asks for it (``MASCOT_REQUIRE_SLURM=1`` alone does not);
* no controller answers but Slurm's daemons are installed (a stopped local cluster, a workstation with the
  packages): start the single-node cluster in a private directory for this session, on free ports and with its
  own munged (root only, never installing packages), and stop it at the end;
* otherwise skip with the reason.

Where the environment demands Slurm (``MASCOT_REQUIRE_SLURM=1``, set by ``.ci/run``), every "skip" is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "slurm" / "local-cluster.sh"
LOCAL_BASE = Path(os.environ.get("MASCOT_SLURM_BASE", "/tmp/mascot-slurm"))


@dataclass
class Cluster:
    env: dict  # the environment sbatch and the jobs need (SLURM_CONF)
    started_here: Path | None  # the private base directory of a cluster this session started


def _ping(env: dict) -> bool:
    try:
        return subprocess.run(["scontrol", "ping"], env=env, capture_output=True, text=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _decide() -> tuple[Cluster | None, str]:
    env = dict(os.environ)
    if shutil.which("sbatch") is None or shutil.which("scontrol") is None:
        return None, "sbatch is not installed (slurm/local-cluster.sh start installs a single-node cluster)"
    ours = str(LOCAL_BASE / "etc" / "slurm.conf")
    if env.get("SLURM_CONF") != ours and (LOCAL_BASE / "run" / "pids").exists():
        env["SLURM_CONF"] = ours  # a running local cluster whose env file was not sourced
    if _ping(env):
        if env.get("SLURM_CONF") == ours or os.environ.get("MASCOT_TEST_SLURM") == "1":
            return Cluster(env, None), ""
        return None, (
            f"a Slurm controller answers (SLURM_CONF={env.get('SLURM_CONF', 'default')}) but it is not "
            "mascot's local test cluster; set MASCOT_TEST_SLURM=1 to submit the test jobs to it"
        )
    if not all(shutil.which(d, path="/usr/sbin:/usr/bin:/sbin") for d in ("slurmctld", "slurmd", "munged")):
        return None, (
            "sbatch is installed but no Slurm controller answers and slurmctld/slurmd/munged are not "
            "installed to start one (slurm/local-cluster.sh start installs them)"
        )
    if os.geteuid() != 0:
        return None, "no Slurm controller answers, and starting the local single-node cluster needs root"
    # slurm.conf cannot carry a path with whitespace or quotes: where TMPDIR has them, the cluster lives in /tmp
    tmp = tempfile.gettempdir()
    safe = not unsafe_for_sbatch(tmp) or not os.access("/tmp", os.W_OK)
    base = Path(tempfile.mkdtemp(prefix="mascot-slurm-test-", dir=None if safe else "/tmp"))
    env = dict(
        os.environ,
        MASCOT_SLURM_BASE=str(base),
        MASCOT_SLURM_INSTALL="0",
        MASCOT_SLURM_PORT=str(_free_ports()),
        SLURM_CONF=str(base / "etc" / "slurm.conf"),
    )
    res = subprocess.run(["bash", str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=300)
    if res.returncode != 0 or not _ping(env):
        _stop(base)
        tail = (res.stdout + res.stderr).strip().splitlines()[-8:]
        return None, "no Slurm controller answered and the local cluster did not start: " + " | ".join(tail)
    return Cluster(env, base), ""


def _free_ports() -> int:
    """A port P with P and P + 1 free on this machine now (slurmctld's and slurmd's): a session's cluster never
    shares a port with another cluster (another session's, or one started by hand)."""
    import socket

    for _ in range(200):
        with socket.socket() as a:
            a.bind(("", 0))
            port = a.getsockname()[1]
            if port >= 65535:
                continue
            with socket.socket() as b:
                try:
                    b.bind(("", port + 1))
                except OSError:
                    continue
        return port
    raise RuntimeError("no two consecutive free ports")


def _stop(base: Path) -> None:
    env = dict(os.environ, MASCOT_SLURM_BASE=str(base), SLURM_CONF=str(base / "etc" / "slurm.conf"))
    subprocess.run(["bash", str(SCRIPT), "stop"], env=env, capture_output=True, timeout=120)
    shutil.rmtree(base, ignore_errors=True)


def _required() -> bool:
    return os.environ.get("MASCOT_REQUIRE_SLURM") == "1"


def unsafe_for_sbatch(path) -> bool:
    """Whether ``path`` holds what an #SBATCH line or slurm.conf cannot carry (whitespace, quotes, '%', '\\')."""
    return bool(re.search(r"[\s\"'%\\]", str(path)))


@pytest.fixture(scope="session")
def slurm_cluster():
    """The session's :class:`Cluster` (see the module docstring); skips, or fails where Slurm is required."""
    cluster, why = _decide()
    if cluster is None:
        pytest.fail(why) if _required() else pytest.skip(why)
    try:
        yield cluster
    finally:
        if cluster.started_here is not None:
            _stop(cluster.started_here)
