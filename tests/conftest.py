import os
import sys
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Bytecode. Where PYTHONDONTWRITEBYTECODE is set (the CI machines set it, and pip installs there with
# --no-compile), every Python process the suite starts -- the workers and the ~100 command-line subprocesses --
# compiled jax, numpy, scipy, pandas and matplotlib from source again: 5.8 s of a 10.8 s `import jax, ...,
# mascot.cli.main` on a 2-core machine. The suite writes bytecode into a directory of its own for this session
# (PYTHONPYCACHEPREFIX: nothing lands beside any source file, as the setting intends) and removes it at the end.
if os.environ.get("PYTHONDONTWRITEBYTECODE") and "PYTHONPYCACHEPREFIX" not in os.environ:
    os.environ.pop("PYTHONDONTWRITEBYTECODE")
    os.environ["PYTHONPYCACHEPREFIX"] = _SESSION_PYCACHE = tempfile.mkdtemp(prefix="mascot-test-pycache-")
    sys.dont_write_bytecode, sys.pycache_prefix = False, _SESSION_PYCACHE
else:
    _SESSION_PYCACHE = None
# JAX's persistent compilation cache, fresh for this session (nothing depends on a cache left by another run):
# the suite's subprocesses and the kernels it compiles again in new closures read back what was compiled once
# Every program, not only those that compile in over a second (JAX's default): the suite's ~100 command-line
# subprocesses and its 3 workers compile the same small kernels again and again, and reading one back takes
# milliseconds.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _SESSION_CACHE = tempfile.mkdtemp(prefix="mascot-test-jax-cache-")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
else:
    _SESSION_CACHE = None
os.environ.setdefault("MPLBACKEND", "Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from slurm_cluster import slurm_cluster  # noqa: E402,F401  (a session fixture)

# The suite runs in JAX's default precision (float32): a test that needs 64-bit types asks for them with
# the ``x64`` marker (``pytestmark = pytest.mark.x64`` for a whole module), which runs it inside
# ``mascot.kernels.precision.float64()`` -- the thread-local context library code uses, never the global switch.


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker more than the cores this process may use, at most 4 (each holds JAX, and some a
    model), none on one core. With one worker per core the suite kept the 2 cores 72% busy (tests wait on model
    servers, Slurm jobs, killed and restarted runs): 3 workers on 2 cores took pytest from 1,373 s to 1,052 s
    (2026-12-03, same machine; the later run with the ES step compiled once)."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(n + 1, 4) if n >= 2 else 0


def pytest_sessionfinish(session, exitstatus):
    # the controller made the cache (its workers inherit the directory through the environment) and removes it
    if not hasattr(session.config, "workerinput"):
        import shutil

        for d in (_SESSION_CACHE, _SESSION_PYCACHE):
            if d is not None:
                shutil.rmtree(d, ignore_errors=True)


def pytest_configure(config):
    config.addinivalue_line("markers", "x64: run the test with 64-bit JAX types enabled (thread-local)")


# The longest test files first. xdist's ``--dist loadfile`` hands whole files to the workers in collection
# order (``--no-loadscope-reorder``; by default it orders them by their number of tests, which put a few long
# files last), so a long file collected late ends the run alone on one core while the others idle; longest
# first keeps the cores busy to the end. Measured 2026-12-05 (sum of a file's test durations, 3 workers on 2
# cores, 1,894 s in all): the files below took 34-188 s each, the rest under 30 s; simulated on those sums, this
# order ends 19 s sooner than the 2026-12-03 one (634 against 653 s; a perfect split is 631).
HEAVY_FIRST = (
    "test_kernel_consensus.py",
    "test_calibrate_trials.py",
    "test_real_server.py",
    "test_calibrate_deliberation.py",
    "test_real_model.py",
    "test_trials.py",
    "test_cli_errors.py",
    "test_sweep.py",
    "test_same_numbers.py",
    "test_device_check.py",
    "test_spectra_report.py",
    "test_faults.py",
    "test_slurm.py",
    "test_sweep_sr.py",
    "test_sharding.py",
    "test_spectra_batched.py",
    "test_devices.py",
)


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


@pytest.fixture(autouse=True)
def _x64_marker(request):
    if request.node.get_closest_marker("x64") is None:
        yield
        return
    from mascot.kernels.precision import float64

    with float64():
        yield


def random_doubly_stochastic(rng, n, n_perm=4):
    """Birkhoff: a random convex combination of permutation matrices (generally non-symmetric)."""
    w = rng.dirichlet(np.ones(n_perm))
    W = np.zeros((n, n))
    for weight in w:
        W[np.arange(n), rng.permutation(n)] += weight
    return W


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture
def dead_port():
    """A loopback port nobody listens on, held for the test: bound but not listening, so a connection is
    refused at once (a fixed port such as 9 may be served on some machines, and a port closed again may be
    taken by another process meanwhile)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]
