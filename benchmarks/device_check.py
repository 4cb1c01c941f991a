"""One prepared device check (issue 17): tests, benchmarks and the hf backend on a GPU, in one command.

    python benchmarks/device_check.py [--out DIR] [--budget 420]     # on a GPU node (about 7 minutes)
    python benchmarks/device_check.py --smoke --out DIR               # the same code paths, tiny, on the CPU

Sections, each in its own subprocess (so a crash, a hang or JAX's memory cannot affect the next one; a
section that runs past its time is killed and keeps what it had written):

  info       machine: versions, devices (JAX ``device_kind``), ``nvidia-smi``, and the device's copy
             bandwidth (a 4 GiB ``a + 1`` under jit, timed with ``block_until_ready``);
  tests      the kernel and sweep test files with pytest on the device (``JAX_PLATFORMS=cuda,cpu``: the GPU
             is the default device; the CPU backend stays available because ``sr_spectra`` places the
             directed-graph ``eig`` on it, and fails under ``JAX_PLATFORMS=cuda`` alone), one pass
             in float32 (the suite's default) and one with ``JAX_ENABLE_X64=1`` (the suite has no dtype
             switch of its own: tests that need float64 use the ``x64`` marker), the two passes at once;
  consensus  ``mascot.simulate_consensus`` on the workload of ``bench_consensus.py`` (N = 5 and 64,
             commuting and non-commuting, B = 1e5 .. 1e7 generated on the device, default chunking and
             one large chunk size) beside its vectorised numpy baseline (ii) on the CPU at B = 1e5, and
             where the modal path's time goes at B = 1e6 (kernel, projection, result copies, driver), and
             a ``jax.profiler`` trace of the N = 64 modal and matrix paths (``traces/*.trace.json.gz``);
  spectra    ``mascot.sr_spectra`` on random undirected graphs (n = 16, 64, 256; up to 1e5, 1e4, 1e3
             graphs x 4 gammas, float64 as ``bench_spectra.py``, plus a float32 row) beside batched numpy
             (eigvalsh + svd) split over the CPU's cores;
  sweep      ``bench_sweep.py``'s grid (N in {5, 16} x 3 strategies x 3 eta x 2 eps x 28 budgets) at 2,000
             trajectories per point (2e6 in all): the whole ``run_sweep`` pipeline vs the kernel alone on its batches;
  hf         the hf backend with a random-weight model of Qwen2.5-7B-Instruct's shape (bf16, built on the
             GPU, nothing downloaded) and a small byte-level BPE tokenizer (``tests/tiny_model.py``'s,
             trained on Appendix C's prompts too, so prompts have about the token counts a real
             tokenizer gives) on ONE step of the 100-trial chain/star/mesh run at max_tokens 250; the
             full 12-step run is extrapolated (12 x the step).

"floor" is the memory-bandwidth floor of a kernel: the bytes it must read (X0, or the adjacency stack)
over the device's read rate in a copy (half the measured copy traffic, as ``bench_consensus.py``), as a
fraction of the measured time; 100% would be a kernel that only streams its input once.

Every section writes its progress with flush, records errors (traceback text) and carries on; sizes adapt
to the time left (a larger size is skipped, with a note, when the one before predicts it would not fit).
Writes ``device_check.json`` and ``device_check.md`` to ``--out`` (default: ``$OUT``, else
``./device_check_out``) after every section. Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import inspect
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

from mascot.papers import QWEN25_7B_INSTRUCT

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SECTIONS = ("info", "tests", "consensus", "spectra", "sweep", "hf")
GRACE_S = 8.0  # a section plans its work to end this long before it would be killed

TEST_FILES = [
    "tests/test_kernel_consensus.py",
    "tests/test_spectra.py",
    "tests/test_spectra_batched.py",
    "tests/test_noise.py",
    "tests/test_sampling.py",
    "tests/test_sweep.py",
    "tests/test_sweep_sr.py",
    "tests/test_state_tracking_rule.py",
    "tests/test_devices.py",
]

# Qwen2.5-7B-Instruct's shape (its config.json, kept in mascot.papers); the smoke run uses a 2-layer model of width 32.
QWEN25_7B = {k: v for k, v in QWEN25_7B_INSTRUCT.items() if k != "tie_word_embeddings"}
TINY_QWEN2 = dict(
    vocab_size=1024,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=4096,
)

# Seconds per section: the normal share of the budget (a section may get up to 1.5x when earlier ones
# finished early, and less when the budget runs out). Sum: 420 s (GPU). In --smoke the limits are hang
# guards, not a budget: a loaded 2-core CI machine took 153 s for what takes 60 s alone, and a pytest pass
# killed by its section's limit failed CI (2026-12-02), so the smoke limits are several times what it needs.
CAPS = {
    "gpu": dict(info=30, tests=150, consensus=75, spectra=50, sweep=45, hf=70),
    "smoke": dict(info=120, tests=240, consensus=200, spectra=160, sweep=200, hf=240),
}
DEFAULT_BUDGET = dict(gpu=420.0, smoke=float(sum(CAPS["smoke"].values())))
MIN_S = dict(info=10, tests=15, consensus=15, spectra=15, sweep=15, hf=30)

SIZES = {
    "gpu": dict(
        copy_bytes=4 << 30,
        cons_N=(5, 64),
        cons_B=(100_000, 1_000_000, 10_000_000),
        cons_chunks=(None, 1 << 20),
        cons_B_cpu=100_000,
        cons_reps_small=3,
        cons_reps_large=2,
        cons_split_B=1_000_000,
        cons_split_s=12,
        spec_G={16: (10_000, 100_000), 64: (1_000, 10_000), 256: (64, 1_000)},
        spec_G_cpu={16: 100_000, 64: 10_000, 256: 256},
        spec_reps=3,
        sweep_traj=2000,
        sweep_nb0=28,
        sweep_chunk=36,
        sweep_reps=3,
        hf_shape=QWEN25_7B,
        hf_trials=100,
        hf_max_tokens=250,
        hf_batch=600,
        hf_steps_full=12,
        pytest_files=TEST_FILES,
        pytest_k=None,
    ),
    "smoke": dict(
        copy_bytes=64 << 20,
        cons_N=(5, 64),
        cons_B=(1000,),
        cons_chunks=(None, 512),
        cons_B_cpu=1000,
        cons_reps_small=2,
        cons_reps_large=2,
        cons_split_B=1000,
        cons_split_s=6,
        spec_G={16: (8,), 64: (4,), 256: (2,)},
        spec_G_cpu={16: 8, 64: 4, 256: 2},
        spec_reps=2,
        sweep_traj=50,
        sweep_nb0=2,
        sweep_chunk=36,
        sweep_reps=2,
        hf_shape=TINY_QWEN2,
        hf_trials=2,
        hf_max_tokens=8,
        hf_batch=16,
        hf_steps_full=12,
        pytest_files=["tests/test_state_tracking_rule.py"],
        pytest_k="bad_inputs",
    ),
}


def say(msg: str) -> None:
    print(msg, flush=True)


def cpu_threads() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        n = os.cpu_count() or 1
    return max(1, min(16, n))


def _clean(x):
    """JSON-safe copy: numpy scalars to Python, non-finite floats to None, tuples to lists."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "item") and callable(x.item) and getattr(x, "ndim", 1) == 0:
        x = x.item()
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, (str, int, bool)) or x is None:
        return x
    return str(x)


def write_json(path: Path, data) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_clean(data), indent=2) + "\n")
    os.replace(tmp, path)


# =========================================================================== child side: the sections
class Rec:
    """A section's results, saved (atomically) whenever something new is known."""

    def __init__(self, path: str, name: str):
        self.path = Path(path)
        self.data = {"section": name, "done": False, "error": None, "results": {}, "summary": {}, "notes": []}
        self.save()

    @property
    def results(self) -> dict:
        return self.data["results"]

    @property
    def summary(self) -> dict:
        return self.data["summary"]

    def note(self, msg: str) -> None:
        say(f"  note: {msg}")
        self.data["notes"].append(msg)
        self.save()

    def save(self) -> None:
        write_json(self.path, self.data)


class Ctx:
    def __init__(self, d: dict):
        self.d = d
        self.mode = d["mode"]
        self.smoke = self.mode == "smoke"
        self.sizes = SIZES[self.mode]
        self.deadline = float(d["deadline"])
        self.work = Path(d["work"])
        self.out = Path(d.get("out") or d["work"])  # what comes back to the caller (traces)
        self.copy_Bps = d.get("copy_Bps")  # bytes read + written per second in a device copy
        self.gemm = d.get("gemm")  # device matrix-product FLOP/s (measure_gemm)

    def left(self) -> float:
        return self.deadline - time.time()


def _bench_path():
    for p in (str(HERE), str(ROOT / "tests")):
        if p not in sys.path:
            sys.path.insert(0, p)


def measure_copy(nbytes: int, reps: int = 5) -> dict:
    """Device copy bandwidth: ``a + 1`` on a float32 array of ``nbytes`` under jit (reads and writes it)."""
    import jax
    import jax.numpy as jnp

    n = int(nbytes) // 4
    x = jnp.ones((n,), jnp.float32)
    f = jax.jit(lambda a: a + 1.0)
    f(x).block_until_ready()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        y = f(x)
        y.block_until_ready()
        ts.append(time.perf_counter() - t0)
        del y
    t = min(ts)
    del x
    return dict(
        bytes=4 * n,
        best_s=t,
        times_s=ts,
        copy_Bps=2 * 4 * n / t,
        read_Bps=4 * n / t,
        copy_GBps=2 * 4 * n / t / 1e9,
        device=str(jax.devices()[0]),
    )


def measure_gemm(n32: int = 8192, n64: int = 4096, reps: int = 5) -> dict:
    """Device matrix-product rates (FLOP/s, best of ``reps``): float32 at HIGHEST precision (what the consensus
    kernels ask for), float32 at DEFAULT precision, float64; the compute half of every roofline."""
    import jax
    import jax.numpy as jnp

    out = {}
    for name, n, dt, prec in (
        ("f32_highest", n32, jnp.float32, jax.lax.Precision.HIGHEST),
        ("f32_default", n32, jnp.float32, jax.lax.Precision.DEFAULT),
        ("f64", n64, jnp.float64, jax.lax.Precision.HIGHEST),
    ):
        with jax.enable_x64(dt == jnp.float64):
            k = jax.random.split(jax.random.key(0))
            a, b = (jax.random.uniform(x, (n, n), dt) for x in k)
            f = jax.jit(lambda a, b, prec=prec: jnp.matmul(a, b, precision=prec))
            f(a, b).block_until_ready()
            ts = []
            for _ in range(reps):
                t0 = time.perf_counter()
                f(a, b).block_until_ready()
                ts.append(time.perf_counter() - t0)
        out[name] = 2.0 * n**3 / min(ts)
        del a, b
    return out


def _gemm(ctx: Ctx, rec: Rec) -> dict:
    if ctx.gemm:
        return ctx.gemm
    rec.note("no GEMM rates from the info section: measuring them here")
    g = measure_gemm(*((512, 256) if ctx.smoke else ()))
    rec.results["gemm_flops"] = g
    return g


def _read_Bps(ctx: Ctx, rec: Rec) -> float:
    if ctx.copy_Bps:
        return float(ctx.copy_Bps) / 2
    rec.note("no copy bandwidth from the info section: measuring it here")
    bw = measure_copy(ctx.sizes["copy_bytes"])
    rec.results["copy_bandwidth"] = bw
    return bw["read_Bps"]


# --------------------------------------------------------------------------- info
def sec_info(ctx: Ctx, rec: Rec) -> None:
    import importlib.metadata as md

    r = rec.results
    r["python"] = sys.version.split()[0]
    r["platform"] = platform.platform()
    r["cpus"] = os.cpu_count()
    r["cpus_usable"] = cpu_threads()
    versions = {}
    for pkg in (
        "mascot",
        "jax",
        "jaxlib",
        "jax-cuda13-plugin",
        "jax-cuda12-plugin",
        "numpy",
        "scipy",
        "pandas",
        "pyarrow",
        "torch",
        "transformers",
        "tokenizers",
        "pytest",
        "pytest-xdist",
        "hypothesis",
    ):
        try:
            versions[pkg] = md.version(pkg)
        except Exception:
            pass
    r["versions"] = versions
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        r["host_memory_GiB"] = mem / 2**30
    except (ValueError, OSError, AttributeError):
        pass
    for key, cmd in (
        ("nvidia_smi", ["nvidia-smi"]),
        (
            "nvidia_smi_query",
            [
                "nvidia-smi",
                "--query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem,power.limit",
                "--format=csv",
            ],
        ),
    ):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
            r[key] = (p.stdout + p.stderr)[-4000:]
        except FileNotFoundError:
            r[key] = None
        except Exception as e:
            r[key] = f"{type(e).__name__}: {e}"
    rec.save()
    say("  importing jax")
    import jax

    devs = jax.devices()
    backend = jax.default_backend()
    r["jax_backend"] = backend
    r["devices"] = []
    for d in devs:
        info = dict(id=d.id, platform=d.platform, device_kind=getattr(d, "device_kind", None), repr=str(d))
        try:
            st = d.memory_stats() or {}
            info["bytes_limit_GiB"] = st.get("bytes_limit", 0) / 2**30 or None
        except Exception:
            pass
        r["devices"].append(info)
    try:
        r["platform_version"] = devs[0].client.platform_version
    except Exception:
        r["platform_version"] = None
    pv = str(r["platform_version"] or "").lower()
    accel = ("rocm" if "rocm" in pv else "cuda") if backend == "gpu" else backend
    # the accelerator first (JAX's default device), the CPU beside it: sr_spectra places the directed-graph
    # eig on jax.devices("cpu"), which does not exist under JAX_PLATFORMS=cuda alone
    r["jax_platforms_value"] = accel if accel == "cpu" else f"{accel},cpu"
    r["gpu_name"] = devs[0].device_kind if backend != "cpu" else None
    say(
        f"  jax {jax.__version__}, backend {backend}, devices {[d['repr'] for d in r['devices']]}, "
        f"kind {devs[0].device_kind}"
    )
    rec.save()
    bw = measure_copy(ctx.sizes["copy_bytes"])
    r["copy_bandwidth"] = bw
    say(
        f"  copy bandwidth ({bw['bytes'] / 2**30:.2f} GiB a + 1): {bw['copy_GBps']:,.0f} GB/s read + written "
        f"({bw['best_s'] * 1e3:.2f} ms)"
    )
    g = measure_gemm(*((512, 256) if ctx.smoke else ()))
    r["gemm_flops"] = g
    say("  matrix products: " + ", ".join(f"{k} {v / 1e12:,.1f} TFLOP/s" for k, v in g.items()))
    rec.summary.update(
        copy_bandwidth_GBps=bw["copy_GBps"],
        devices=len(devs),
        gemm_f32_highest_TFLOPs=g["f32_highest"] / 1e12,
        gemm_f64_TFLOPs=g["f64"] / 1e12,
    )


# --------------------------------------------------------------------------- tests
_VERBOSE = re.compile(r"^(?:\[gw\d+\] )?(?:\[\s*\d+%\] )?(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+::\S+)")
_VERBOSE_ALT = re.compile(r"^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")


def parse_pytest(text: str) -> dict:
    """Counts from pytest's final summary line; from the verbose result lines (``-v``: each test's outcome as it
    comes, so a pass stopped at its time limit still names its failures) or the progress characters when there
    is none. ``failed_tests``: the tests reported FAILED or ERROR as they ran."""
    counts = dict(passed=0, failed=0, errors=0, skipped=0, xfailed=0, xpassed=0, deselected=0)
    verbose = collections.Counter()
    failed_tests = []
    for raw in text.splitlines():
        m = _VERBOSE.match(raw.strip())
        word, name = (m.group(1), m.group(2)) if m else (None, None)
        if not m:
            m2 = _VERBOSE_ALT.match(raw.strip())
            if m2:
                word, name = m2.group(2), m2.group(1)
        if word:
            verbose[word] += 1
            if word in ("FAILED", "ERROR") and name not in failed_tests:
                failed_tests.append(name)
    line = None
    for raw in reversed(text.splitlines()):
        s = raw.strip().strip("=").strip()
        if re.search(r"\bin [\d.]+s\b", s) and re.search(
            r"\d+ (passed|failed|errors?|skipped|deselected)|no tests ran", s
        ):
            line = s
            break
    if line is not None:
        for n, word in re.findall(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)", line):
            counts["errors" if word.startswith("error") else word] += int(n)
        return dict(counts, summary_line=line, from_progress=False, failed_tests=failed_tests)
    if verbose:
        names = dict(
            PASSED="passed", FAILED="failed", ERROR="errors", SKIPPED="skipped", XFAIL="xfailed", XPASS="xpassed"
        )
        for word, n in verbose.items():
            counts[names[word]] += n
        return dict(counts, summary_line=None, from_progress=True, failed_tests=failed_tests)
    prog = dict(passed=".", failed="F", errors="E", skipped="s", xfailed="x", xpassed="X")
    for raw in text.splitlines():
        m = re.match(r"^([.FEsxX]+)\s*(\[\s*\d+%\])?\s*$", raw.strip())
        if m:
            for k, ch in prog.items():
                counts[k] += m.group(1).count(ch)
    return dict(counts, summary_line=None, from_progress=True, failed_tests=failed_tests)


def _kill_group(p: subprocess.Popen) -> None:
    """End process ``p`` and its children (its own session, started by us)."""
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            p.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def sec_tests(ctx: Ctx, rec: Rec) -> None:
    import importlib.util

    sz = ctx.sizes
    files = [f for f in sz["pytest_files"] if (ROOT / f).exists()]
    missing = [f for f in sz["pytest_files"] if f not in files]
    if missing:
        rec.note(f"test files not found (skipped): {', '.join(missing)}")
    plat = ctx.d.get("platform") or "cpu"
    maxfail = int(ctx.d.get("maxfail", 30))
    workers = ctx.d.get("pytest_workers")
    have_xdist = importlib.util.find_spec("xdist") is not None
    if workers is None:
        workers = 0 if (ctx.smoke or not have_xdist) else max(1, cpu_threads() // 2 - 1)
    if workers and not have_xdist:
        rec.note("pytest-xdist is not installed: each pass runs in one process")
        workers = 0
    base = [
        sys.executable,
        "-m",
        "pytest",
        "-x" if maxfail == 1 else f"--maxfail={maxfail}",
        "-v",  # each outcome as it comes: a pass stopped at its time limit still names its failures
        "-rfE",
        "-p",
        "no:cacheprovider",
        *files,
    ]
    if sz["pytest_k"]:
        base += ["-k", sz["pytest_k"]]
    if workers:
        base += ["-n", str(workers)]
    passes = [("float32", {}), ("float64", {"JAX_ENABLE_X64": "1"})]
    # On a GPU, a SIGKILL-resumed sweep differed from an uninterrupted one in the last bit of some float32 values
    # (H200, 2026-11-30): XLA's autotuner may pick another algorithm per process. This pass reruns that test
    # with XLA's deterministic-ops flag to tell whether the flag is the fix.
    det = ("float32_deterministic_ops", {"XLA_FLAGS": "--xla_gpu_deterministic_ops=true"})
    if plat.startswith("cuda") and "tests/test_sweep.py" in files:
        passes.append(det)
    rec.results.update(
        platform=plat,
        files=files,
        workers_per_pass=workers,
        maxfail=maxfail,
        dtype_switch="none in tests/conftest.py: float64 pass = JAX_ENABLE_X64=1 for the whole process",
        passes={},
    )
    procs = []
    for name, extra in passes:
        env = dict(os.environ, JAX_PLATFORMS=plat, XLA_PYTHON_CLIENT_PREALLOCATE="false", PYTHONUNBUFFERED="1", **extra)
        if name == "float32":
            env.pop("JAX_ENABLE_X64", None)
        cmd = base
        if (name, extra) == det:
            cmd = [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "tests/test_sweep.py",
                "-k",
                "sigkill",
            ]
        log = ctx.work / f"pytest_{name}.log"
        fh = open(log, "w")
        say(f"  pass {name}: JAX_PLATFORMS={plat} {' '.join(f'{k}={v}' for k, v in extra.items())} {' '.join(cmd[1:])}")
        p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append((name, extra, p, fh, log, time.time(), cmd))
    try:
        _collect_pytest(ctx, rec, base, procs)
    finally:  # stopped early (signal): end the pytest processes we started, each by its own group
        for proc in procs:
            if proc[2].poll() is None:
                _kill_group(proc[2])
    for name, res in rec.results["passes"].items():
        if res["passed"]:
            rec.summary[f"{name}_passed"] = res["passed"]


def _collect_pytest(ctx: Ctx, rec: Rec, base: list, procs: list) -> None:
    for name, extra, p, fh, log, t0, cmd in procs:
        timed_out = False
        try:
            p.wait(timeout=max(1.0, ctx.left() - 2))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(p)
        fh.close()
        text = log.read_text(errors="replace")
        res = parse_pytest(text)
        res.update(
            env=extra, returncode=p.returncode, timed_out=timed_out, wall_s=time.time() - t0, command=" ".join(cmd[1:])
        )
        if p.returncode != 0 or timed_out:
            res["output_tail"] = text[-6000:]
        rec.results["passes"][name] = res
        say(
            f"  pass {name}: {res['passed']} passed, {res['failed']} failed, {res['errors']} errors, "
            f"{res['skipped']} skipped, rc {p.returncode}{' (TIMED OUT)' if timed_out else ''}, {res['wall_s']:.0f} s"
        )
        for t in res["failed_tests"][:30]:
            say(f"    failed: {t}")
        rec.save()


# --------------------------------------------------------------------------- consensus
def sec_consensus(ctx: Ctx, rec: Rec) -> None:
    _bench_path()
    import jax
    import jax.numpy as jnp
    import numpy as np

    import bench_consensus as bc
    import mascot

    sz = ctx.sizes
    read_Bps = _read_Bps(ctx, rec)
    gemm = _gemm(ctx, rec)
    T = cpu_threads()
    rows, base = [], []
    rec.results.update(
        rows=rows,
        baselines=base,
        workload=dict(
            d=bc.D,
            eta=bc.ETA,
            eps=bc.EPS,
            c1=bc.C1,
            c2=bc.C2,
            b0=bc.B0,
            max_rounds=bc.MAX_ROUNDS,
            dtype="float32",
            X0="clip(N(0.5, 0.15), 0, 1) drawn on the device (jax.random.normal)",
            cpu_threads=T,
            floor="X0 bytes / device read rate in a copy, over the measured time",
            roofline="max(X0 bytes / read rate, FLOPs / float32 HIGHEST GEMM rate); FLOPs = the modal projection "
            "2 B d N (N - 1), or one N x N product per round on the matrix path (2 N^2 d B mean rounds)",
        ),
    )

    def gen(key, B, N):
        """X0 on the default device, in pieces of <= 2^30 elements (large random draws in one piece risk
        32-bit index limits), float32."""
        rows_per = max(1, (1 << 30) // (N * bc.D))
        parts = []
        for i, lo in enumerate(range(0, B, rows_per)):
            m = min(rows_per, B - lo)
            z = jax.random.normal(jax.random.fold_in(key, i), (m, N, bc.D), jnp.float32)
            parts.append(jnp.clip(0.5 + 0.15 * z, 0.0, 1.0))
        X = parts[0] if len(parts) == 1 else jnp.concatenate(parts)
        del parts
        return X.block_until_ready()

    key = jax.random.key(0)
    rng = np.random.default_rng(0)
    gen_rate = [1e12]  # X0 elements drawn per second (measured at every draw)
    groups = []
    for N in sz["cons_N"]:
        prs = bc.pairs(N, rng)
        groups += [(N, kind, prs[kind]) for kind in ("commuting", "non-commuting")]

    reserve = min(sz["cons_split_s"], 0.25 * ctx.left())  # kept for the time split at the end

    for gi, (N, kind, (W1, W2)) in enumerate(groups):
        share_end = time.time() + max(ctx.left() - reserve, 0.0) / (len(groups) - gi)
        say(f"  N={N} {kind}: {max(0, share_end - time.time()):.0f} s for this group")

        def call(X0, chunk=None):
            return mascot.simulate_consensus(
                X0,
                W1,
                W2,
                bc.C1,
                bc.C2,
                bc.ETA,
                bc.EPS,
                bc.B0,
                max_rounds=bc.MAX_ROUNDS,
                dtype="float32",
                chunk_size=chunk,
            )

        b = None  # this group's CPU baseline, measured after its first device cell
        group_rows = []

        def baseline():
            """bench_consensus.py's numpy baseline (ii) on B_cpu trajectories, and the kernel's agreement with
            it on the same X0; a second repetition only when the first leaves time for it."""
            Bc = sz["cons_B_cpu"]
            Xc = np.asarray(gen(jax.random.fold_in(key, 1000 + gi), Bc, N))
            res_c = call(Xc)
            tn = []
            for _ in range(2):
                if tn and time.time() + 2 * tn[0] > share_end:
                    break
                t0 = time.perf_counter()
                r_np, _ = bc.numpy_threads(Xc, W1, W2, threads=T)
                tn.append(time.perf_counter() - t0)
            out = dict(
                N=N,
                pair=kind,
                B=Bc,
                threads=T,
                numpy_s=min(tn),
                numpy_traj_s=Bc / min(tn),
                reps=len(tn),
                rounds_agree=float(np.mean(r_np == res_c.rounds)),
                method=res_c.method,
            )
            base.append(out)
            say(
                f"    numpy (ii) B={Bc:,} {T} threads: {out['numpy_traj_s']:,.0f} traj/s; rounds agree with the "
                f"kernel on {100 * out['rounds_agree']:.2f}%"
            )
            for row in group_rows:
                row.update(
                    numpy_traj_s=out["numpy_traj_s"],
                    numpy_B=Bc,
                    ratio_vs_numpy=row["device_traj_s"] / out["numpy_traj_s"],
                )
            return out

        prev = {}  # chunk variant -> (B, best s, first-call s)
        for B in sz["cons_B"]:
            for chunk in sz["cons_chunks"]:
                label = "default" if chunk is None else str(chunk)
                reps = sz["cons_reps_small"] if B <= 1_000_000 else sz["cons_reps_large"]
                if chunk in prev:
                    left = share_end - time.time()
                    pB, pt, pfirst = prev[chunk]
                    per = pt / pB * B
                    fixed = max(pfirst - pt, 0.0) + B * N * bc.D / gen_rate[0] + 0.5  # compile + drawing X0
                    need = per * (1 + reps) + fixed
                    if need > left and per * 2 + fixed <= left:
                        reps, need = 1, per * 2 + fixed
                    if need > left:
                        rec.note(
                            f"N={N} {kind} B={B:,} chunk={label}: skipped (predicted {need:.1f} s from "
                            f"B={pB:,}, {left:.1f} s left in this group)"
                        )
                        continue
                elif ctx.left() < 3:  # the first size of a variant runs whenever the section has time
                    rec.note(f"N={N} {kind} B={B:,} chunk={label}: skipped (no time left in the section)")
                    continue
                try:
                    t0 = time.perf_counter()
                    X0 = gen(jax.random.fold_in(key, gi), B, N)
                    gen_rate[0] = B * N * bc.D / max(time.perf_counter() - t0, 1e-9)
                    t0 = time.perf_counter()
                    res = call(X0, chunk)
                    t_first = time.perf_counter() - t0
                    ts = []
                    for _ in range(reps):
                        if ts and time.time() + min(ts) > share_end:
                            break
                        t0 = time.perf_counter()
                        call(X0, chunk)
                        ts.append(time.perf_counter() - t0)
                    t = min(ts) if ts else t_first
                    nbytes = int(X0.nbytes)
                    flops = (
                        2.0 * B * bc.D * N * (N - 1)
                        if res.method == "modal"
                        else 2.0 * N * N * bc.D * B * float(np.mean(res.rounds))
                    )
                    roof = max(nbytes / read_Bps, flops / gemm["f32_highest"])
                    row = dict(
                        N=N,
                        pair=kind,
                        B=B,
                        chunk_size=label,
                        method=res.method,
                        mean_rounds=float(np.mean(res.rounds)),
                        device_s=t,
                        device_traj_s=B / t,
                        first_call_s=t_first,
                        compile_s=max(t_first - t, 0.0),
                        reps=len(ts),
                        x0_bytes=nbytes,
                        floor_fraction=nbytes / read_Bps / t,
                        flops=flops,
                        roofline_s=roof,
                        roofline_bound="memory" if nbytes / read_Bps >= flops / gemm["f32_highest"] else "compute",
                        roofline_fraction=roof / t,
                        status_counts=np.bincount(np.asarray(res.status), minlength=3).tolist(),
                    )
                    if b:
                        row.update(
                            numpy_traj_s=b["numpy_traj_s"], numpy_B=b["B"], ratio_vs_numpy=(B / t) / b["numpy_traj_s"]
                        )
                    rows.append(row)
                    group_rows.append(row)
                    prev[chunk] = (B, t, t_first)
                    say(
                        f"    B={B:>10,} chunk={label:>7s} [{res.method}]: {B / t:14,.0f} traj/s  "
                        f"({t * 1e3:9.1f} ms, first call {t_first:.2f} s, roofline {100 * row['roofline_fraction']:.1f}% "
                        f"{row['roofline_bound']} bound)"
                    )
                    del X0, res
                except Exception:
                    rec.note(f"N={N} {kind} B={B:,} chunk={label} failed: {traceback.format_exc(limit=4)[-1500:]}")
                rec.save()
                if b is None and ctx.left() <= 3:
                    b = False
                    rec.note(f"N={N} {kind}: numpy baseline skipped (no time left in the section)")
                if b is None:
                    try:
                        b = baseline()
                    except Exception:
                        b = False  # tried; do not try again
                        rec.note(f"N={N} {kind} numpy baseline failed: {traceback.format_exc(limit=3)[-800:]}")
                    rec.save()
    # where the modal path's time goes (kernel, projection, result copies, the driver): what the next
    # optimisation needs to know, measured while the device is at hand
    split = rec.results.setdefault("split", [])
    for gi, (N, kind, (W1, W2)) in enumerate(groups):
        if kind != "commuting":
            continue
        if ctx.left() < (3 if ctx.smoke else 8):
            rec.note(f"N={N} modal time split: skipped (no time left in the section)")
            continue
        try:
            B = sz["cons_split_B"]
            X0 = gen(jax.random.fold_in(key, gi), B, N)
            row = modal_split(X0, W1, W2, bc, reps=sz["cons_reps_small"])
            row.update(N=N, pair=kind, x0_floor_s=int(X0.nbytes) / read_Bps)
            row.update(
                kernel_floor_fraction=row["x0_floor_s"] / row["kernel_s"],
                floor_fraction=row["x0_floor_s"] / row["total_s"],
            )
            split.append(row)
            say(
                f"    N={N} B={B:,} chunk={row['chunk']:,}: total {1e3 * row['total_s']:.2f} ms = kernel "
                f"{1e3 * row['kernel_s']:.2f} (projection {1e3 * row['projection_s']:.2f}) + result copies "
                f"{1e3 * row['fetch_s']:.2f} + driver {1e3 * row['driver_s']:.2f}; X0 floor "
                f"{1e3 * row['x0_floor_s']:.3f} ms ({100 * row['kernel_floor_fraction']:.1f}% of the kernel alone)"
            )
            del X0
        except Exception:
            rec.note(f"N={N} modal time split failed: {traceback.format_exc(limit=4)[-1500:]}")
        rec.save()
    # one profiler trace per path at N = 64 (device kernels and host events, Chrome trace format): read
    # later, offline, to see the idle gaps and the ops that take the time
    traces = rec.results.setdefault("traces", [])
    for gi, (N, kind, (W1, W2)) in enumerate(groups):
        if N != max(sz["cons_N"]):
            continue
        if ctx.left() < (3 if ctx.smoke else 8):
            rec.note(f"N={N} {kind} profiler trace: skipped (no time left in the section)")
            continue
        try:
            B = sz["cons_split_B"] if kind == "commuting" else sz["cons_B"][0]
            X0 = gen(jax.random.fold_in(key, gi), B, N)

            def once(X0=X0, W1=W1, W2=W2):
                return mascot.simulate_consensus(
                    X0, W1, W2, bc.C1, bc.C2, bc.ETA, bc.EPS, bc.B0, max_rounds=bc.MAX_ROUNDS, dtype="float32"
                )

            method = once().method  # compiled before the trace
            tr = trace_call(once, ctx.out / "traces", f"consensus_N{N}_{method}_B{B}")
            tr.update(N=N, pair=kind, B=B, method=method)
            traces.append(tr)
            say(
                f"    trace N={N} {kind} B={B:,}: {tr['file']} ({tr['bytes'] / 1e6:.1f} MB); span "
                f"{tr['span_ms']:.2f} ms; "
                + "; ".join(f"{p['process']} busy {p['busy_ms']:.2f} ms" for p in tr["processes"])
            )
            del X0
        except Exception:
            rec.note(f"N={N} {kind} profiler trace failed: {traceback.format_exc(limit=4)[-1500:]}")
        rec.save()
    if rows:
        rec.summary.update(
            cells=len(rows),
            best_device_traj_s=max(r["device_traj_s"] for r in rows),
            best_floor_fraction=max(r["floor_fraction"] for r in rows),
        )
    if base:
        rec.summary["min_numpy_traj_s"] = min(b["numpy_traj_s"] for b in base)


def trace_call(fn, dest: Path, name: str) -> dict:
    """Run ``fn`` once under ``jax.profiler.trace`` (Python tracer off) and keep its Chrome trace as
    ``dest/NAME.trace.json.gz`` (open it in Perfetto or chrome://tracing); returns where it is and
    :func:`summarize_trace` of it."""
    import gzip

    import jax

    tmp = Path(tempfile.mkdtemp(prefix="mascot-trace-"))
    try:
        try:
            opts = jax.profiler.ProfileOptions()
            opts.python_tracer_level = 0  # Python frames would dwarf the kernels (and slow the call)
        except Exception:  # noqa: BLE001  (a jax without profiler options: its defaults)
            opts = None
        with jax.profiler.trace(str(tmp), profiler_options=opts):
            fn()
        found = sorted(tmp.rglob("*.trace.json.gz"))
        if not found:
            raise RuntimeError(f"jax.profiler.trace wrote no *.trace.json.gz under {tmp}")
        dest.mkdir(parents=True, exist_ok=True)
        out = dest / f"{name}.trace.json.gz"
        shutil.copyfile(found[-1], out)
        with gzip.open(out, "rt") as f:
            summary = summarize_trace(json.load(f))
        return dict(file=str(out), bytes=out.stat().st_size, **summary)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _union_us(intervals) -> float:
    total, end = 0.0, -math.inf
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def summarize_trace(trace: dict, top: int = 8) -> dict:
    """Per traced process (``/device:GPU:0``, ``/host:CPU``, ...): its events, busy time (the union of its
    events' intervals: nested and overlapping events count once) and the event names with the most total
    time; and the span from the first event to the last."""
    ev = trace.get("traceEvents", [])
    names = {
        e["pid"]: e.get("args", {}).get("name", str(e["pid"]))
        for e in ev
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    xs = [e for e in ev if e.get("ph") == "X" and "dur" in e and "ts" in e]
    if not xs:
        return dict(span_ms=0.0, processes=[])
    t0, t1 = min(e["ts"] for e in xs), max(e["ts"] + e["dur"] for e in xs)
    procs = []
    for pid in sorted({e["pid"] for e in xs}, key=str):
        pe = [e for e in xs if e["pid"] == pid]
        tot = collections.defaultdict(lambda: [0, 0.0])
        for e in pe:
            t = tot[e.get("name", "?")]
            t[0] += 1
            t[1] += e["dur"]
        best = sorted(tot.items(), key=lambda kv: -kv[1][1])[:top]
        procs.append(
            dict(
                process=names.get(pid, str(pid)),
                events=len(pe),
                busy_ms=_union_us((e["ts"], e["ts"] + e["dur"]) for e in pe) / 1e3,
                top=[dict(name=n[:120], count=c, total_ms=d / 1e3) for n, (c, d) in best],
            )
        )
    return dict(span_ms=(t1 - t0) / 1e3, processes=procs)


def modal_split(X0, W1, W2, bc, reps: int) -> dict:
    """Time ``simulate_consensus`` on a device-resident ``X0`` and its parts, at its default chunk size: the
    compiled rollout alone on every full chunk (``kernel_s``), its projection and energies alone
    (``projection_s``), the copies of the results the driver fetches (``fetch_s``) and the rest
    (``driver_s``: slicing, dispatch, host arrays). Best of ``reps`` after a first call; per-chunk parts
    scaled from the full chunks to B. The parts run on sliced chunks; on a CPU with B above one chunk the
    driver reads them in place instead (the same products and rounds)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import mascot
    import mascot.execute.consensus as ec
    from mascot.kernels import consensus as kc

    B, N, d = X0.shape
    dt = X0.dtype
    _, _, _, c = ec._setup(
        np.asarray(W1, np.float64).tobytes(), np.asarray(W2, np.float64).tobytes(), N, "auto", dt.name, False
    )
    platform = next(iter(X0.devices())).platform
    tile = ec._tile(N, d, dt) if platform == "cpu" and N > kc.SMALL_N else None
    C = ec._chunk_size(B, N, d, dt, True, None, platform, tiled=tile is not None)
    chunks = [X0[lo : lo + C] for lo in range(0, B - C + 1, C)]
    params = dict(
        c1=np.asarray(bc.C1, dt),
        c2=np.asarray(bc.C2, dt),
        eta=np.asarray(bc.ETA, dt),
        eps=np.asarray(bc.EPS, dt),
        b0=np.full(C, bc.B0, dt),
    )
    static = dict(strategy="adaptive", max_rounds=bc.MAX_ROUNDS, tile=tile)
    keys = ("rounds", "b", "d", "status", "d0", "finite")

    def rollouts():
        return [kc.modal_rollout(x, c["U"], c["S"], c["lam1"], c["lam2"], params, **static) for x in chunks]

    def kernel():
        jax.block_until_ready(rollouts())

    def projection():
        jax.block_until_ready([kc.modal_init(x, c["U"], c["S"], noisy=False, tile=tile) for x in chunks])

    done = rollouts()
    jax.block_until_ready(done)

    def fetch():  # fresh device copies of the results each time (a fetched array caches its host copy)
        outs = [{k: jnp.array(r[k], copy=True) for k in keys} for r in done]
        jax.block_until_ready(outs)
        t0 = time.perf_counter()
        jax.device_get(outs)
        return time.perf_counter() - t0

    def total():
        mascot.simulate_consensus(
            X0, W1, W2, bc.C1, bc.C2, bc.ETA, bc.EPS, bc.B0, max_rounds=bc.MAX_ROUNDS, dtype=dt.name
        )

    for f in (kernel, projection, fetch, total):  # compile and warm every part
        f()
    t = {k: [] for k in ("kernel", "projection", "fetch", "total")}
    for _ in range(max(1, reps)):  # interleaved
        for name, f in (("kernel", kernel), ("projection", projection), ("total", total)):
            t0 = time.perf_counter()
            f()
            t[name].append(time.perf_counter() - t0)
        t["fetch"].append(fetch())
    scale = B / (len(chunks) * C)
    best = {k: min(v) for k, v in t.items()}
    kern, proj, fetch_s = best["kernel"] * scale, best["projection"] * scale, best["fetch"] * scale
    return dict(
        B=B,
        chunk=C,
        tile=tile,
        reps=max(1, reps),
        total_s=best["total"],
        kernel_s=kern,
        projection_s=proj,
        rounds_s=max(kern - proj, 0.0),
        fetch_s=fetch_s,
        driver_s=max(best["total"] - kern - fetch_s, 0.0),
        times_s=t,
    )


# --------------------------------------------------------------------------- spectra
def sec_spectra(ctx: Ctx, rec: Rec) -> None:
    _bench_path()
    import numpy as np

    import bench_spectra as bs  # turns JAX x64 on (as that benchmark does): float64 rows
    import mascot

    sz = ctx.sizes
    read_Bps = _read_Bps(ctx, rec)
    gemm = _gemm(ctx, rec)
    T = cpu_threads()
    gam = bs.GAMMAS
    rows = []
    rec.results.update(
        rows=rows,
        workload=dict(
            family="undirected Erdos-Renyi G(n, p), p = min(1, 3 ln n / n) (bench_spectra.make_graphs)",
            gammas=gam.tolist(),
            call="mascot.sr_spectra(A[:, None], gammas)",
            baseline=f"numpy batched eigvalsh + svd (bench_spectra.numpy_batched_threads), {T} threads",
            floor="adjacency bytes (float64) / device read rate in a copy, over the measured time",
            roofline="max(adjacency bytes / read rate, LAPACK's leading-order FLOPs (bench_spectra.roofline_flops) "
            "/ the device's GEMM rate in the row's dtype)",
        ),
    )
    rng = np.random.default_rng(0)
    ns = sorted(sz["spec_G"])
    for i, n in enumerate(ns):
        share_end = time.time() + ctx.left() / (len(ns) - i)
        prev = None
        last_A = None
        for G in sz["spec_G"][n]:
            left = share_end - time.time()
            if prev is not None:
                pG, pt, pnp = prev
                need = (pt / pG * G) * (1 + sz["spec_reps"]) + pnp * min(G, sz["spec_G_cpu"][n]) / pG * 2 + 1
                if need > left:
                    rec.note(f"n={n} G={G:,}: skipped (predicted {need:.1f} s from G={pG:,}, {left:.1f} s left)")
                    continue
            try:
                A = bs.make_graphs("undirected", n, G, rng)
                P = bs.row_normalize(A)
                normal = bool(np.allclose(P, np.swapaxes(P, -1, -2), rtol=0, atol=1e-12))
                del P
                t0 = time.perf_counter()
                ref = bs.mascot_call(A, gam)
                t_first = time.perf_counter() - t0
                solver = mascot.sr_spectra(A[:1, None], gam).solver
                ts = []
                for _ in range(sz["spec_reps"]):
                    if ts and time.time() + min(ts) > share_end:
                        break
                    t0 = time.perf_counter()
                    bs.mascot_call(A, gam)
                    ts.append(time.perf_counter() - t0)
                t = min(ts) if ts else t_first
                Gc = min(G, sz["spec_G_cpu"][n])
                Ac = A[:Gc]
                tn = []
                for _ in range(2):
                    t0 = time.perf_counter()
                    npres = bs.numpy_batched_threads(Ac, gam, True, normal, threads=T)
                    tn.append(time.perf_counter() - t0)
                    if time.time() > share_end:
                        break
                t_np = min(tn)
                pairs = G * len(gam)
                roof = max(A.nbytes / read_Bps, bs.roofline_flops("undirected", n, G, True, normal) / gemm["f64"])
                row = dict(
                    n=n,
                    G=G,
                    gammas=len(gam),
                    pairs=pairs,
                    dtype="float64",
                    method=ref[3],
                    solver=solver,
                    roofline_s=roof,
                    roofline_fraction=roof / t,
                    normal_P=normal,
                    device_s=t,
                    device_pairs_s=pairs / t,
                    first_call_s=t_first,
                    compile_s=max(t_first - t, 0.0),
                    reps=len(ts),
                    numpy_G=Gc,
                    numpy_threads=T,
                    numpy_s=t_np,
                    numpy_pairs_s=Gc * len(gam) / t_np,
                    adjacency_bytes=int(A.nbytes),
                    floor_fraction=A.nbytes / read_Bps / t,
                    max_rel_diff=dict(rho=bs.rel(ref[0][:Gc], npres[0]), kappa=bs.rel(ref[2][:Gc], npres[2])),
                )
                row["ratio_vs_numpy"] = row["device_pairs_s"] / row["numpy_pairs_s"]
                rows.append(row)
                prev = (G, t, t_np / Gc * G if Gc else 0.0)
                last_A = (A, Gc, npres, normal)
                say(
                    f"  n={n:3d} G={G:>7,} float64 [{ref[3]}]: {row['device_pairs_s']:12,.0f} pairs/s "
                    f"(first call {t_first:.2f} s)  numpy {T}T {row['numpy_pairs_s']:12,.0f} pairs/s  "
                    f"x{row['ratio_vs_numpy']:.2f}  [{solver}] roofline {100 * row['roofline_fraction']:.2f}%  "
                    f"kappa rel diff {row['max_rel_diff']['kappa']:.1e}"
                )
            except Exception:
                rec.note(f"n={n} G={G:,} failed: {traceback.format_exc(limit=4)[-1500:]}")
            rec.save()
        # float32 on the largest stack measured (GPUs are much faster in float32), time permitting
        if last_A is not None and prev is not None and time.time() + 3 * prev[1] + 1 < share_end:
            A, Gc, npres, normal = last_A
            G = A.shape[0]
            try:

                def f32():
                    r = mascot.sr_spectra(A[:, None], gam, dtype="float32")
                    return np.asarray(r.rho), np.asarray(r.delta), np.asarray(r.kappa), r.method

                t0 = time.perf_counter()
                ref = f32()
                t_first = time.perf_counter() - t0
                ts = []
                for _ in range(sz["spec_reps"]):
                    if ts and time.time() + min(ts) > share_end:
                        break
                    t0 = time.perf_counter()
                    f32()
                    ts.append(time.perf_counter() - t0)
                t = min(ts) if ts else t_first
                numpy_row = next(r for r in rows if r["n"] == n and r["G"] == G)
                pairs = G * len(gam)
                roof = max(
                    A.nbytes / 2 / read_Bps, bs.roofline_flops("undirected", n, G, True, normal) / gemm["f32_default"]
                )
                row = dict(
                    n=n,
                    G=G,
                    gammas=len(gam),
                    pairs=pairs,
                    dtype="float32",
                    method=ref[3],
                    solver=numpy_row.get("solver"),
                    roofline_s=roof,
                    roofline_fraction=roof / t,
                    normal_P=normal,
                    device_s=t,
                    device_pairs_s=pairs / t,
                    first_call_s=t_first,
                    compile_s=max(t_first - t, 0.0),
                    reps=len(ts),
                    numpy_G=Gc,
                    numpy_threads=T,
                    numpy_s=numpy_row["numpy_s"],
                    numpy_pairs_s=numpy_row["numpy_pairs_s"],
                    adjacency_bytes=int(A.nbytes),
                    floor_fraction=A.nbytes / read_Bps / t,
                    max_rel_diff=dict(rho=bs.rel(ref[0][:Gc], npres[0]), kappa=bs.rel(ref[2][:Gc], npres[2])),
                )
                row["ratio_vs_numpy"] = row["device_pairs_s"] / row["numpy_pairs_s"]
                rows.append(row)
                say(
                    f"  n={n:3d} G={G:>7,} float32 [{ref[3]}]: {row['device_pairs_s']:12,.0f} pairs/s "
                    f"x{row['ratio_vs_numpy']:.2f} vs numpy float64; kappa rel diff {row['max_rel_diff']['kappa']:.1e}"
                )
            except Exception:
                rec.note(f"n={n} G={G:,} float32 failed: {traceback.format_exc(limit=4)[-1500:]}")
            rec.save()
        elif last_A is not None:
            rec.note(f"n={n}: float32 row skipped (time)")
    if rows:
        rec.summary.update(
            cells=len(rows),
            best_device_pairs_s=max(r["device_pairs_s"] for r in rows),
            min_numpy_pairs_s=min(r["numpy_pairs_s"] for r in rows),
        )


# --------------------------------------------------------------------------- sweep
def sec_sweep(ctx: Ctx, rec: Rec) -> None:
    _bench_path()
    import jax
    import numpy as np

    import bench_sweep as bsw
    import mascot
    from mascot.sweep import load_config, run_sweep

    sz = ctx.sizes
    read_Bps = _read_Bps(ctx, rec)
    text = bsw.CONFIG.format(chunk=sz["sweep_chunk"], traj=sz["sweep_traj"], nb0=sz["sweep_nb0"])
    cfg_path = ctx.work / "bench_sweep.toml"
    cfg_path.write_text(text)
    cfg = load_config(cfg_path)
    total = cfg.n_points * sz["sweep_traj"]
    r = rec.results
    r.update(
        points=cfg.n_points,
        trajectories=total,
        trajectories_per_point=sz["sweep_traj"],
        chunk_size=sz["sweep_chunk"],
        chunks=cfg.n_chunks,
        workers=3,
        config=text,
    )
    say(f"  {cfg.n_points} points x {sz['sweep_traj']} trajectories = {total:,} trajectories, {cfg.n_chunks} chunks")
    samples = bsw.x0_samples(cfg)
    out = ctx.work / "sweep_runs"
    t0 = time.perf_counter()
    # the kernel alone replays the simulate_consensus calls the pipeline makes (recorded in this warm-up run,
    # which also compiles every shape): the same deduplicated batches on both sides
    calls = bsw.recorded_calls(cfg, str(out / "warm"), 3)
    kernel_bytes = int(sum(int(a[0].nbytes) for a, _ in calls))
    kernel_flops = float(sum(2.0 * B * d * N * (N - 1) for B, N, d in (a[0].shape for a, _ in calls)))
    gemm = _gemm(ctx, rec)

    def sample():
        for a in samples:
            jax.block_until_ready(bsw._initial_beliefs(*a))

    def rollout():
        for a, k in calls:
            mascot.simulate_consensus(*a, **k)

    times = {"pipeline": [], "sampling": [], "kernel": []}
    r["times"] = times
    sample()
    rollout()
    r["warm_s"] = time.perf_counter() - t0
    say(f"  warm pass (compiles every shape): {r['warm_s']:.1f} s")
    rec.save()
    for rep in range(sz["sweep_reps"]):
        if rep:
            need = sum(v[-1] for v in times.values()) + 1
            if time.time() + need > ctx.deadline:
                rec.note(f"stopped after {rep} repetitions (time)")
                break
        t = time.perf_counter()
        run_sweep(cfg, str(out / f"run{rep}"), progress=False, workers=3)
        times["pipeline"].append(time.perf_counter() - t)
        for name, fn in (("sampling", sample), ("kernel", rollout)):
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
        say(
            f"  repetition {rep}: pipeline {times['pipeline'][-1]:.2f} s, sampling {times['sampling'][-1]:.2f} s, "
            f"kernel {times['kernel'][-1]:.2f} s"
        )
        rec.save()
    if not times["pipeline"]:
        raise RuntimeError("no timed repetition fitted in the time left")
    med = {k: float(np.median(v)) for k, v in times.items()}
    r.update(
        pipeline_s=med["pipeline"],
        kernel_s=med["kernel"],
        sampling_s=med["sampling"],
        pipeline_traj_per_s=total / med["pipeline"],
        kernel_traj_per_s=total / med["kernel"],
        compute_traj_per_s=total / (med["sampling"] + med["kernel"]),
        pipeline_fraction_of_kernel=med["kernel"] / med["pipeline"],
        pipeline_fraction_of_kernel_per_rep=[k / p for p, k in zip(times["pipeline"], times["kernel"])],
        kernel_x0_bytes=kernel_bytes,
        kernel_floor_fraction=kernel_bytes / read_Bps / med["kernel"],
        kernel_flops=kernel_flops,
        kernel_roofline_s=max(kernel_bytes / read_Bps, kernel_flops / gemm["f32_highest"]),
    )
    r.update(
        kernel_roofline_fraction=r["kernel_roofline_s"] / med["kernel"],
        pipeline_roofline_fraction=r["kernel_roofline_s"] / med["pipeline"],
    )
    say(
        f"  pipeline {r['pipeline_traj_per_s']:,.0f} traj/s, kernel alone {r['kernel_traj_per_s']:,.0f} traj/s: "
        f"pipeline = {100 * r['pipeline_fraction_of_kernel']:.0f}% of kernel; roofline (X0 read, projection "
        f"FLOPs) {100 * r['kernel_roofline_fraction']:.2f}% of the kernel, {100 * r['pipeline_roofline_fraction']:.2f}% "
        "of the pipeline"
    )
    rec.summary.update(
        pipeline_traj_per_s=r["pipeline_traj_per_s"],
        kernel_traj_per_s=r["kernel_traj_per_s"],
        pipeline_fraction_of_kernel=r["pipeline_fraction_of_kernel"],
    )


# --------------------------------------------------------------------------- hf
def import_llm():
    """The state-tracking harness and the hf backend: the restructured paths first, then the old ones.
    (Delete the fallback once ``mascot.llm`` is gone for good.)"""
    try:
        from mascot.backends.base import Response
        from mascot.backends.hf import HFBackend
        from mascot.protocols.state_tracking import TrialConfig, prompts, run_trials

        where = "mascot.protocols.state_tracking + mascot.backends.hf"
    except ImportError:
        from mascot.llm import prompts
        from mascot.llm.base import Response
        from mascot.llm.hf_backend import HFBackend
        from mascot.llm.trials import TrialConfig, run_trials

        where = "mascot.llm.trials + mascot.llm.hf_backend (old layout)"
    return dict(
        Response=Response,
        HFBackend=HFBackend,
        TrialConfig=TrialConfig,
        run_trials=run_trials,
        prompts=prompts,
        where=where,
    )


class TimedBackend:
    """Wraps an HFBackend: hands it one batch (``batch_size`` requests) at a time, times each, halves the
    batch after an out-of-memory reply, and past ``deadline`` answers the rest with error responses
    (counted as skipped; their time is extrapolated from the measured batches). A batch is not started when
    the longest batch so far would not end before ``deadline``."""

    def __init__(self, inner, deadline: float, Response, torch):
        self.inner = inner
        self.name = inner.name
        self.deadline = deadline
        self.Response = Response
        self.torch = torch
        self.calls: list[dict] = []

    @property
    def model(self):
        return self.inner.model

    def identity(self):
        return self.inner.identity()

    def describe(self):
        return self.inner.describe()

    def generate(self, requests):
        requests = list(requests)
        rec = dict(call=len(self.calls), requests=len(requests), batches=[], skipped=0, oom_retries=0)
        self.calls.append(rec)
        out, i = [], 0
        while i < len(requests):
            bs = self.inner.batch_size
            chunk = requests[i : i + bs]
            done = [b["s"] for c in self.calls for b in c["batches"]]
            predicted = max(done) if done else 0.0  # a batch takes about as long as the longest so far
            if time.time() + predicted > self.deadline:
                rec["skipped"] = len(requests) - i
                say(f"    time budget reached: {rec['skipped']} requests of this call skipped (extrapolated)")
                out += [self.Response("", 0, 0, error="skipped: device_check time budget") for _ in requests[i:]]
                break
            t0 = time.perf_counter()
            rs = self.inner.generate(chunk)
            dt = time.perf_counter() - t0
            errs = [r.error for r in rs if r.error]
            if errs and any("out of memory" in e.lower() for e in errs) and bs > 1:
                self.inner.batch_size = max(1, bs // 2)
                rec["oom_retries"] += 1
                if self.torch.cuda.is_available():
                    self.torch.cuda.empty_cache()
                say(f"    out of memory at batch {bs}: retrying with batch {self.inner.batch_size}")
                continue
            ptok = sum(int(r.prompt_tokens or 0) for r in rs)
            ctok = sum(int(r.completion_tokens or 0) for r in rs)
            rec["batches"].append(
                dict(
                    n=len(chunk),
                    s=dt,
                    prompt_tokens=ptok,
                    completion_tokens=ctok,
                    errors=len(errs),
                    first_error=errs[0][:300] if errs else None,
                )
            )
            say(
                f"    call {rec['call']} batch {len(rec['batches'])}: {len(chunk)} requests in {dt:.2f} s, "
                f"{ctok:,} tokens generated ({ctok / max(dt, 1e-9):,.0f} tok/s), mean prompt "
                f"{ptok / max(len(chunk), 1):.0f} tokens{f', {len(errs)} errors' if errs else ''}"
            )
            out += rs
            i += len(chunk)
        return out


def _tokenizer_corpus(llm, cfg) -> list[str]:
    """Appendix C's prompt texts (agent, judge and revision prompts for both arms), so the small BPE
    tokenizer learns their words: prompts then tokenize to about one token per word, digit or punctuation
    run, which is close to what Qwen's 151k-token vocabulary gives for this text."""
    p = llm["prompts"]
    init = cfg.initial
    pert = dict(init, Value=init["Value"] + cfg.epsilon)
    texts = []
    for s in (init, pert):
        for msgs in (
            p.agent_messages(s),
            p.judge_messages([], s),
            p.judge_messages([s] * 4, s),
            p.revision_messages([], s, 4),
            p.revision_messages([s] * 4, s, 4),
        ):
            texts += [m["content"] for m in msgs]
    return texts


def sec_hf(ctx: Ctx, rec: Rec) -> None:
    import dataclasses
    from unittest import mock

    _bench_path()
    import torch
    import transformers
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    import tiny_model

    llm = import_llm()
    sz = ctx.sizes
    r = rec.results
    r["imports"] = llm["where"]
    r["torch"] = torch.__version__
    r["transformers"] = transformers.__version__
    device = "cuda" if (not ctx.smoke and torch.cuda.is_available()) else "cpu"
    if not ctx.smoke and device == "cpu":
        rec.note("torch sees no CUDA device: the hf section runs on the CPU at the smoke size instead")
        sz = SIZES["smoke"]
    r["device"] = device
    if device == "cuda":
        r["gpu"] = torch.cuda.get_device_name(0)
        r["gpu_memory_GiB"] = torch.cuda.get_device_properties(0).total_memory / 2**30
    shape = dict(sz["hf_shape"])
    n_trials, max_tokens = sz["hf_trials"], sz["hf_max_tokens"]
    batch = int(ctx.d.get("hf_batch_size") or sz["hf_batch"])
    load = ctx.d.get("hf_load", "inject")

    base_cfg = llm["TrialConfig"]()
    cfg = llm["TrialConfig"](
        n_trials=n_trials,
        steps=1,
        retries=0,
        seed=0,
        log_requests="none",
        sampling=dataclasses.replace(base_cfg.sampling, max_tokens=max_tokens),
    )
    r["trial_config"] = cfg.to_dict()

    # tokenizer: tests/tiny_model.py's byte-level BPE, trained on its corpus plus Appendix C's prompts
    mdir = ctx.work / "hf_model"
    mdir.mkdir(parents=True, exist_ok=True)
    corpus0 = tiny_model._CORPUS
    try:
        tiny_model._CORPUS = list(corpus0) + _tokenizer_corpus(llm, cfg)
        tok = tiny_model.build_tiny_tokenizer(mdir, vocab_size=4096)
    finally:
        tiny_model._CORPUS = corpus0
    tok.model_max_length = shape["max_position_embeddings"]  # prompts are ~550-700 tokens: above its 512
    tok.save_pretrained(mdir)
    eos_id = tok.convert_tokens_to_ids("<|im_end|>")
    pad_id = tok.convert_tokens_to_ids("<|endoftext|>")
    shape["vocab_size"] = max(shape["vocab_size"], len(tok))
    r["tokenizer_vocab"] = len(tok)
    r["model_shape"] = shape
    config = Qwen2Config(
        **shape,
        initializer_range=0.02,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    say(
        f"  building a random Qwen2 {shape['num_hidden_layers']} x {shape['hidden_size']} (vocab "
        f"{shape['vocab_size']:,}) in bfloat16 on {device}"
    )
    t0 = time.perf_counter()
    old_dtype = torch.get_default_dtype()
    torch.manual_seed(0)
    try:
        torch.set_default_dtype(torch.bfloat16)
        with torch.device(device):
            model = Qwen2ForCausalLM(config)
    finally:
        torch.set_default_dtype(old_dtype)
    if next(model.parameters()).dtype != torch.bfloat16:
        model = model.to(torch.bfloat16)
    model.eval()
    model.generation_config = GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id)
    if device == "cuda":
        torch.cuda.synchronize()
    r["build_s"] = time.perf_counter() - t0
    r["parameters"] = sum(p.numel() for p in model.parameters())
    r["weight_GiB"] = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**30
    say(f"  built {r['parameters'] / 1e9:.2f} B parameters ({r['weight_GiB']:.1f} GiB) in {r['build_s']:.1f} s")
    config.save_pretrained(mdir)
    model.generation_config.save_pretrained(mdir)
    rec.save()

    # the backend: HFBackend's own constructor on the model directory (tokenizer, chat template, eos ids,
    # neutral generation config); with load="inject" the weights are the model just built (no 15 GB
    # save and reload), with load="disk" they are saved and loaded for real.
    t0 = time.perf_counter()
    HFBackend = llm["HFBackend"]
    if load == "disk":
        model.save_pretrained(mdir)
        del model
        if device == "cuda":
            torch.cuda.empty_cache()
        hf = HFBackend(str(mdir), device=device, dtype="bfloat16", batch_size=batch)
        r["load"] = "disk: save_pretrained, then HFBackend loads the directory"
    else:
        seen = {}

        def from_pretrained(path, *a, **kw):
            seen.update(path=str(path), **{k: str(v) for k, v in kw.items()})
            want = kw.get("dtype", kw.get("torch_dtype"))
            return model if want in (None, "auto", torch.bfloat16) else model.to(want)

        import importlib

        hf_mod = importlib.import_module(HFBackend.__module__)
        patches = [mock.patch.object(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)]
        if hasattr(hf_mod, "check_model_dir"):  # the directory holds no weights: they are injected
            patches.append(mock.patch.object(hf_mod, "check_model_dir", os.fspath))
        with patches[0], patches[1] if len(patches) > 1 else contextlib.nullcontext():
            hf = HFBackend(str(mdir), device=device, dtype="bfloat16", batch_size=batch)
        r["load"] = (
            "inject: HFBackend's constructor on the directory (config, tokenizer), with "
            "AutoModelForCausalLM.from_pretrained answered by the model built on the device"
        )
        r["from_pretrained_call"] = seen
    r["backend_init_s"] = time.perf_counter() - t0
    r["backend_describe"] = hf.describe()
    rec.save()

    # one step of the run; the time left (less a margin for the harness's own work) bounds the backend
    reserve = 10.0 if not ctx.smoke else 3.0
    timed = TimedBackend(hf, deadline=ctx.deadline - reserve, Response=llm["Response"], torch=torch)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    say(f"  one step: {n_trials} trials x chain/star/mesh x 2 arms, max_tokens {max_tokens}, batch {batch}")
    t0 = time.perf_counter()
    accepted = inspect.signature(llm["run_trials"]).parameters
    extra = {k: False for k in ("report", "figures") if k in accepted}  # older harnesses wrote a report
    llm["run_trials"](cfg, ctx.work / "hf_trials", timed, progress=True, **extra)
    step_wall = time.perf_counter() - t0
    r["step_wall_s"] = step_wall
    if device == "cuda":
        r["peak_gpu_memory_GiB"] = torch.cuda.max_memory_allocated() / 2**30

    calls = []
    backend_s = measured_req = ptok = ctok = 0
    extrap_s = 0.0
    all_batches = [b for c in timed.calls for b in c["batches"]]
    for c in timed.calls:
        bt = [b["s"] for b in c["batches"]]
        meas = float(sum(bt))
        backend_s += meas
        nreq = sum(b["n"] for b in c["batches"])
        measured_req += nreq
        ptok += sum(b["prompt_tokens"] for b in c["batches"])
        ctok += sum(b["completion_tokens"] for b in c["batches"])
        est = meas
        basis = None
        if c["skipped"]:
            src = c["batches"] or all_batches
            basis = "this call's batches" if c["batches"] else "the other calls' batches"
            if not src:
                raise RuntimeError("no batch finished inside the time budget: nothing to extrapolate from")
            bsz = max(b["n"] for b in src)
            per_batch = sum(b["s"] for b in src if b["n"] == bsz) / sum(1 for b in src if b["n"] == bsz)
            est = meas + math.ceil(c["skipped"] / bsz) * per_batch
        extrap_s += est
        calls.append(
            dict(
                call=c["call"],
                requests=c["requests"],
                measured_requests=nreq,
                skipped=c["skipped"],
                batches=len(c["batches"]),
                measured_s=meas,
                estimated_s=est,
                extrapolation_basis=basis,
                oom_retries=c["oom_retries"],
                batch_detail=c["batches"],
            )
        )
    overhead = max(step_wall - backend_s, 0.0)
    step_est = extrap_s + overhead
    complete = all(c["skipped"] == 0 for c in timed.calls)
    r.update(
        calls=calls,
        backend_measured_s=backend_s,
        harness_overhead_s=overhead,
        requests_measured=measured_req,
        requests_total=sum(c["requests"] for c in timed.calls),
        prompt_tokens=ptok,
        completion_tokens=ctok,
        mean_prompt_tokens=ptok / max(measured_req, 1),
        mean_completion_tokens=ctok / max(measured_req, 1),
        generated_tokens_per_s=ctok / max(backend_s, 1e-9),
        step_complete=complete,
        step_s=step_est,
        full_run_steps=sz["hf_steps_full"],
        full_run_s_extrapolated=sz["hf_steps_full"] * step_est,
        notes=(
            "EXTRAPOLATION: full_run_s_extrapolated = 12 x the one measured step"
            + ("" if complete else " (itself partly extrapolated: some batches skipped for time)")
            + ". Random weights never emit end-of-sequence, so every reply runs to max_tokens (an upper "
            "bound on a real model's decode work); retries = 0 (a random model fails every parse, "
            "which would retry every request twice); no model load time included."
        ),
    )
    say(
        f"  step: {r['requests_total']:,} requests, {ctok:,} tokens generated by {measured_req:,} measured requests, "
        f"backend {backend_s:.1f} s measured, step {step_est:.1f} s{'' if complete else ' (partly extrapolated)'}; "
        f"12-step run extrapolated: {r['full_run_s_extrapolated'] / 60:.1f} min"
    )
    rec.summary.update(
        step_s=step_est,
        full_run_s_extrapolated=r["full_run_s_extrapolated"],
        requests_total=r["requests_total"],
        completion_tokens=ctok,
        build_s=r["build_s"],
    )


SECTION_FUNCS = dict(
    info=sec_info, tests=sec_tests, consensus=sec_consensus, spectra=sec_spectra, sweep=sec_sweep, hf=sec_hf
)


def child_main(name: str, ctx_file: str) -> int:
    ctx = Ctx(json.loads(Path(ctx_file).read_text()))
    rec = Rec(ctx.d["result_file"], name)

    def on_term(signum, frame):
        raise SystemExit(f"terminated by signal {signum} (section time limit)")

    signal.signal(signal.SIGTERM, on_term)
    t0 = time.time()
    try:
        SECTION_FUNCS[name](ctx, rec)
        rec.data["done"] = True
    except BaseException as e:  # noqa: BLE001 - record everything, the parent carries on
        rec.data["error"] = traceback.format_exc()[-6000:]
        say(f"  ERROR in {name}: {type(e).__name__}: {str(e)[:500]}")
    finally:
        rec.data["section_wall_s"] = time.time() - t0
        rec.save()
    return 0 if rec.data["done"] else 1


# =========================================================================== parent side
def child_env(name: str, ctx: dict) -> dict:
    env = dict(os.environ)
    env.update(
        XLA_PYTHON_CLIENT_PREALLOCATE="false",
        PYTHONUNBUFFERED="1",
        MPLBACKEND="Agg",
        TF_CPP_MIN_LOG_LEVEL=env.get("TF_CPP_MIN_LOG_LEVEL", "1"),
    )
    env.pop("JAX_ENABLE_X64", None)
    if name == "hf":
        env["JAX_PLATFORMS"] = "cpu"  # the harness may touch JAX: keep it off the GPU torch uses
    elif name == "info":
        if ctx["mode"] == "smoke" or ctx.get("platform_forced"):
            env["JAX_PLATFORMS"] = ctx["platform"]
        else:
            env.pop("JAX_PLATFORMS", None)  # let JAX find the accelerator
    else:
        env["JAX_PLATFORMS"] = ctx["platform"]
    return env


def run_section(name: str, ctx: dict, timeout: float, work: Path) -> dict:
    result_file = work / f"section_{name}.json"
    ctx = dict(ctx, result_file=str(result_file), deadline=time.time() + timeout - GRACE_S)
    ctx_file = work / f"ctx_{name}.json"
    write_json(ctx_file, ctx)
    cmd = [sys.executable, "-u", str(Path(__file__).resolve()), "--section", name, "--ctx-file", str(ctx_file)]
    t0 = time.time()
    tail: collections.deque = collections.deque(maxlen=80)
    p = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=child_env(name, ctx),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        bufsize=1,
        start_new_session=True,
    )

    def pump():
        for line in p.stdout:
            tail.append(line)
            print(f"[{name}] {line}", end="", flush=True)

    th = threading.Thread(target=pump, daemon=True)
    th.start()
    timed_out = False
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        say(f"[{name}] time limit ({timeout:.0f} s) reached: stopping the section")
        _kill_group(p)
    th.join(10)
    try:
        data = json.loads(result_file.read_text())
    except Exception as e:
        data = {"results": {}, "summary": {}, "notes": [], "error": f"no result file: {e}"}
    ok = bool(data.get("done")) and not data.get("error")  # all results written (it may have been slow to exit)
    if ok and (timed_out or p.returncode != 0):
        data.setdefault("notes", []).append(
            f"finished its work but was stopped while exiting (exit code {p.returncode})"
        )
    status = "ok" if ok else ("timeout" if timed_out else "error")
    err = data.get("error")
    if not ok and not err:
        err = f"exit code {p.returncode}" + (" (killed at the time limit)" if timed_out else "")
    if not ok:
        data["output_tail"] = "".join(tail)[-6000:]
    data.update(status=status, error=err, wall_s=time.time() - t0, timeout_s=timeout, returncode=p.returncode)
    return data


def _fmt(x, spec=",.0f", default="-"):
    try:
        if x is None or (isinstance(x, float) and not math.isfinite(x)):
            return default
        return format(x, spec)
    except (TypeError, ValueError):
        return str(x)


def _pct(x, digits=1):
    return "-" if x is None else f"{100 * x:.{digits}f}%"


def markdown(rep: dict) -> str:
    L = []
    secs = rep["sections"]
    info = secs.get("info", {}).get("results", {})
    L.append(f"# mascot device check ({rep['mode']})\n")
    L.append(
        f"Started {rep['started']}, {rep.get('total_wall_s', 0):.0f} s of a {rep['budget_s']:.0f} s budget. "
        f"Command: `{rep['command']}`.\n"
    )
    if rep["mode"] == "smoke":
        L.append("**Smoke run: tiny sizes on the CPU. These numbers check the code paths, they measure nothing.**\n")
    L.append("## Machine\n")
    L.append("| | |\n|---|---|")
    devs = info.get("devices") or []
    bw = info.get("copy_bandwidth") or {}
    items = [
        ("GPU (JAX device_kind)", (info.get("gpu_name") or "none") if devs else "-"),
        ("JAX devices", ", ".join(d.get("repr", "?") for d in devs) or "-"),
        (
            "device memory (JAX bytes_limit)",
            ", ".join(_fmt(d.get("bytes_limit_GiB"), ".1f") + " GiB" for d in devs if d.get("bytes_limit_GiB")) or "-",
        ),
        ("JAX backend / platform", f"{info.get('jax_backend', '-')} ({info.get('platform_version', '-')})"),
        (
            "copy bandwidth (read + written)",
            f"{_fmt(bw.get('copy_GBps'))} GB/s ({_fmt(bw.get('bytes', 0) / 2**30, '.2f')} "
            f"GiB a + 1, best of {len(bw.get('times_s', []))})"
            if bw
            else "-",
        ),
        ("host", f"{info.get('platform', '-')}, {info.get('cpus', '-')} CPUs, Python {info.get('python', '-')}"),
        ("versions", ", ".join(f"{k} {v}" for k, v in (info.get("versions") or {}).items()) or "-"),
    ]
    q = info.get("nvidia_smi_query")
    if q:
        items.append(("nvidia-smi", " / ".join(x.strip() for x in q.strip().splitlines()[1:]) or q.strip()))
    for k, v in items:
        L.append(f"| {k} | {str(v).replace('|', '/')} |")
    L.append("\n## Sections\n")
    L.append("| section | status | wall s | time limit s | summary | notes / error |\n|---|---|---|---|---|---|")
    for name in SECTIONS:
        s = secs.get(name)
        if s is None:
            continue
        summ = ", ".join(f"{k} {_fmt(v, ',.4g')}" for k, v in (s.get("summary") or {}).items())
        notes = list(s.get("notes") or [])
        if s.get("error"):
            notes.append("ERROR: " + str(s["error"]).strip().splitlines()[-1][:300])
        notes = "; ".join(n.replace("\n", " ")[:300] for n in notes).replace("|", "/")
        L.append(
            f"| {name} | {s.get('status')} | {_fmt(s.get('wall_s'), '.1f')} | {_fmt(s.get('timeout_s'), '.0f')} | "
            f"{summ or '-'} | {notes or '-'} |"
        )
    for title, fn in (
        ("Tests on the device", _md_tests),
        ("Consensus (`simulate_consensus`)", _md_consensus),
        ("SR spectra (`sr_spectra`)", _md_spectra),
        ("Sweep pipeline vs kernel alone", _md_sweep),
        ("hf backend, Qwen2.5-7B shape, random weights", _md_hf),
    ):
        L.append(f"\n## {title}\n")
        try:
            L += fn(secs)
        except Exception as e:  # a table must never stop the report
            L.append(f"(table failed: {type(e).__name__}: {e})")
    return "\n".join(L) + "\n"


def _res(secs, name):
    s = secs.get(name) or {}
    if not s.get("results"):
        return None
    return s["results"]


def _md_tests(secs):
    r = _res(secs, "tests")
    if r is None:
        return ["not run"]
    mf = r.get("maxfail")
    stop = "-x" if mf == 1 else f"--maxfail={mf}"
    xd = f", pytest-xdist -n {r['workers_per_pass']}" if r.get("workers_per_pass") else ""
    files = ", ".join(r.get("files", []))
    L = [
        f"Files: {files}; JAX_PLATFORMS={r.get('platform')}; {stop}{xd}. Dtype: {r.get('dtype_switch')}.\n",
        "| pass | passed | failed | errors | skipped | rc | wall s | summary |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, p in (r.get("passes") or {}).items():
        line = p.get("summary_line") or ("(timed out; counted from progress)" if p.get("timed_out") else "-")
        L.append(
            f"| {name} | {p['passed']} | {p['failed']} | {p['errors']} | {p['skipped']} | {p.get('returncode')} | "
            f"{_fmt(p.get('wall_s'), '.0f')} | {line.replace('|', '/')} |"
        )
    for name, p in (r.get("passes") or {}).items():
        if p.get("failed_tests"):
            L.append(f"\n{name}: " + "; ".join(f"`{f[:200]}`" for f in p["failed_tests"][:30]))
        elif p.get("output_tail"):
            fails = [ln for ln in p["output_tail"].splitlines() if ln.startswith(("FAILED", "ERROR"))]
            if fails:
                L.append(f"\n{name}: " + "; ".join(f"`{f[:200]}`" for f in fails[:10]))
    return L


def _md_consensus(secs):
    r = _res(secs, "consensus")
    if r is None:
        return ["not run"]
    w = r.get("workload", {})
    L = [
        f"float32, d = {w.get('d')}, adaptive, eta = {w.get('eta')}, eps = {w.get('eps')}, max_rounds = "
        f"{w.get('max_rounds')}; X0 {w.get('X0')}. Baseline: bench_consensus.py's vectorised numpy (ii) on the "
        f"CPU, {w.get('cpu_threads')} threads. Times: best of the repetitions after a first (compiling) call.\n",
        f"Roofline: {w.get('roofline')}.\n",
        "| N | pair | B | chunk | path | mean rounds | device traj/s | first call s | of roofline (bound) | "
        "numpy (ii) traj/s (B) | device / numpy |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for x in r.get("rows", []):
        roof = f"{_pct(x['roofline_fraction'])} ({x['roofline_bound']})" if "roofline_fraction" in x else "-"
        L.append(
            f"| {x['N']} | {x['pair']} | {x['B']:,} | {x['chunk_size']} | {x['method']} | {x['mean_rounds']:.1f} | "
            f"{_fmt(x['device_traj_s'])} | {_fmt(x['first_call_s'], '.2f')} | {roof} | "
            f"{_fmt(x.get('numpy_traj_s'))} ({_fmt(x.get('numpy_B'), ',')}) | {_fmt(x.get('ratio_vs_numpy'), ',.1f')}x |"
        )
    if r.get("split"):
        L += [
            "\nWhere the modal path's time goes (X0 on the device, default chunks; best of the repetitions): "
            "the compiled rollout alone on every chunk, its projection and energies alone, the copies of the "
            "results to the host, and the rest of `simulate_consensus` (the driver).\n",
            "| N | B | chunk | total ms | kernel ms | projection ms | rounds ms | result copies ms | driver ms | "
            "X0 floor ms | floor of kernel | floor of total |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for x in r["split"]:
            L.append(
                f"| {x['N']} | {x['B']:,} | {x['chunk']:,} | {1e3 * x['total_s']:.2f} | {1e3 * x['kernel_s']:.2f} | "
                f"{1e3 * x['projection_s']:.2f} | {1e3 * x['rounds_s']:.2f} | {1e3 * x['fetch_s']:.2f} | "
                f"{1e3 * x['driver_s']:.2f} | {1e3 * x['x0_floor_s']:.3f} | {_pct(x['kernel_floor_fraction'])} | "
                f"{_pct(x['floor_fraction'])} |"
            )
    for x in r.get("traces", []):
        L.append(
            f"\nProfiler trace, N = {x['N']} {x['pair']} ({x['method']}), B = {x['B']:,}: `{Path(x['file']).name}` "
            f"({x['bytes'] / 1e6:.1f} MB; Perfetto or chrome://tracing), {x['span_ms']:.2f} ms from the first "
            "event to the last. Busy time per process (union of its events) and its longest events in total:\n"
        )
        L += ["| process | events | busy ms | top events (count, total ms) |", "|---|---|---|---|"]
        for p in x["processes"]:
            tops = "; ".join(f"{t['name'][:60]} ({t['count']}, {t['total_ms']:.2f})" for t in p["top"][:5])
            L.append(f"| {p['process']} | {p['events']:,} | {p['busy_ms']:.2f} | {tops.replace('|', '/')} |")
    if r.get("baselines"):
        L.append(
            "\nBaseline agreement (rounds, same X0): "
            + ", ".join(f"N={b['N']} {b['pair']}: {100 * b['rounds_agree']:.2f}%" for b in r["baselines"])
        )
    return L


def _md_spectra(secs):
    r = _res(secs, "spectra")
    if r is None:
        return ["not run"]
    w = r.get("workload", {})
    L = [
        f"{w.get('family')}; gammas {w.get('gammas')}; `{w.get('call')}`; baseline {w.get('baseline')}. "
        "Throughput in (graph, gamma) pairs per second.\n",
        f"Roofline: {w.get('roofline')}.\n",
        "| n | G x gammas | dtype | path (solver) | device pairs/s | first call s | of roofline | numpy pairs/s (G) | "
        "device / numpy | max rel diff kappa |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for x in r.get("rows", []):
        L.append(
            f"| {x['n']} | {x['G']:,} x {x['gammas']} | {x['dtype']} | {x['method']} ({x.get('solver', '-')}) | "
            f"{_fmt(x['device_pairs_s'])} | {_fmt(x['first_call_s'], '.2f')} | {_pct(x.get('roofline_fraction'), 2)} | "
            f"{_fmt(x['numpy_pairs_s'])} "
            f"({x['numpy_G']:,}) | {_fmt(x['ratio_vs_numpy'], '.2f')}x | {_fmt(x['max_rel_diff']['kappa'], '.1e')} |"
        )
    return L


def _md_sweep(secs):
    r = _res(secs, "sweep")
    if r is None or "pipeline_s" not in r:
        return ["not run" if r is None else "incomplete (see the section's notes)"]
    n = len(r["times"]["pipeline"])
    L = [
        f"bench_sweep.py's grid: {r['points']:,} points x {r['trajectories_per_point']:,} trajectories = "
        f"{r['trajectories']:,}, {r['chunk_size']} points per chunk, {r['workers']} chunks in flight; medians of {n} "
        f"repetitions after a warm pass ({_fmt(r.get('warm_s'), '.1f')} s).\n",
        "| what | seconds | trajectories/s | pipeline throughput as % of this |",
        "|---|---|---|---|",
    ]
    for label, t in (
        ("whole pipeline (`run_sweep`)", r["pipeline_s"]),
        ("X0 sampling + kernel", r["sampling_s"] + r["kernel_s"]),
        ("kernel alone (`simulate_consensus` on the same batches)", r["kernel_s"]),
        ("X0 sampling alone", r["sampling_s"]),
    ):
        L.append(f"| {label} | {t:.2f} | {_fmt(r['trajectories'] / t)} | {100 * t / r['pipeline_s']:.0f}% |")
    L.append(
        "\nPipeline / kernel per repetition: "
        + ", ".join(f"{100 * f:.0f}%" for f in r["pipeline_fraction_of_kernel_per_rep"])
        + f". Kernel floor (X0 bytes at the copy read rate): {_pct(r['kernel_floor_fraction'], 2)}."
    )
    if "kernel_roofline_fraction" in r:
        L.append(
            f"Roofline (max of X0 bytes at the read rate and the projections' {r['kernel_flops'] / 1e9:,.1f} GFLOP at "
            f"the float32 GEMM rate): {_pct(r['kernel_roofline_fraction'], 2)} of the kernel alone, "
            f"{_pct(r['pipeline_roofline_fraction'], 2)} of the pipeline."
        )
    return L


def _md_hf(secs):
    r = _res(secs, "hf")
    if r is None or "step_s" not in r:
        return ["not run" if r is None else "incomplete (see the section's notes)"]
    sh = r["model_shape"]
    L = [
        f"Qwen2ForCausalLM {sh['num_hidden_layers']} layers x {sh['hidden_size']} (intermediate "
        f"{sh['intermediate_size']}, {sh['num_attention_heads']} heads, {sh['num_key_value_heads']} kv heads, vocab "
        f"{sh['vocab_size']:,}), {r['parameters'] / 1e9:.2f} B parameters, bf16, random weights, built on "
        f"{r['device']}{' (' + r['gpu'] + ')' if r.get('gpu') else ''} in {r['build_s']:.1f} s; tokenizer: "
        f"tests/tiny_model.py's BPE ({r['tokenizer_vocab']} tokens) trained on Appendix C's prompts too. "
        f"Load: {r['load']}. Imports: {r['imports']}.\n",
        "| call (stage) | requests | measured | skipped | batches | measured s | estimated s |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in r["calls"]:
        L.append(
            f"| {c['call']} | {c['requests']:,} | {c['measured_requests']:,} | {c['skipped']:,} | {c['batches']} | "
            f"{c['measured_s']:.1f} | {c['estimated_s']:.1f} |"
        )
    L.append("")
    L.append("| | |\n|---|---|")
    for k, v in (
        ("batch size", r["backend_describe"].get("batch_size")),
        ("mean prompt tokens", _fmt(r["mean_prompt_tokens"], ".0f")),
        ("tokens generated (measured)", _fmt(r["completion_tokens"], ",")),
        ("generated tokens/s", _fmt(r["generated_tokens_per_s"])),
        ("harness overhead s", _fmt(r["harness_overhead_s"], ".1f")),
        ("peak GPU memory GiB", _fmt(r.get("peak_gpu_memory_GiB"), ".1f")),
        ("one step s" + ("" if r["step_complete"] else " (partly extrapolated)"), _fmt(r["step_s"], ".1f")),
        (
            f"full {r['full_run_steps']}-step run s (EXTRAPOLATED: {r['full_run_steps']} x the step)",
            f"{_fmt(r['full_run_s_extrapolated'], '.0f')} ({r['full_run_s_extrapolated'] / 60:.1f} min)",
        ),
    ):
        L.append(f"| {k} | {v} |")
    L.append(f"\n{r['notes']}")
    return L


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", help="output folder (default: $OUT if set, else ./device_check_out)")
    ap.add_argument(
        "--budget", type=float, help="seconds for all sections (default 420; in --smoke the sum of its hang guards)"
    )
    ap.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU (checks the code paths)")
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma list of {', '.join(SECTIONS)}")
    ap.add_argument(
        "--platform",
        help="JAX_PLATFORMS for the JAX sections (default: the accelerator JAX finds "
        "plus cpu, e.g. cuda,cpu; cpu in --smoke)",
    )
    ap.add_argument("--maxfail", type=int, default=30, help="pytest --maxfail per pass (default 30)")
    ap.add_argument(
        "--pytest-workers",
        type=int,
        help="pytest-xdist workers per pass (default: cores/2 - 1 if xdist is installed, 0 in --smoke)",
    )
    ap.add_argument("--hf-batch-size", type=int, help="HFBackend batch_size (default 600; 16 in --smoke)")
    ap.add_argument(
        "--hf-load",
        choices=("inject", "disk"),
        default="inject",
        help="inject: HFBackend on the directory with the built model handed to it (default); disk: "
        "save_pretrained and load it (15 GB written and read)",
    )
    ap.add_argument("--section", help=argparse.SUPPRESS)
    ap.add_argument("--ctx-file", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.section:
        return child_main(args.section, args.ctx_file)

    mode = "smoke" if args.smoke else "gpu"
    if args.budget is None:
        args.budget = DEFAULT_BUDGET[mode]
    wanted = [s.strip() for s in args.sections.split(",") if s.strip()]
    bad = [s for s in wanted if s not in SECTIONS]
    if bad:
        ap.error(f"unknown sections {bad}; choose from {', '.join(SECTIONS)}")
    order = [s for s in SECTIONS if s in wanted]
    if not order:
        ap.error(f"--sections names no section; choose from {', '.join(SECTIONS)}")
    out = Path(args.out or os.environ.get("OUT") or "device_check_out").resolve()
    if out.exists() and not out.is_dir():
        ap.error(f"--out {out} is a file; give a directory for the report")
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="device_check_"))
    t_start = time.time()
    rep = dict(
        schema=1,
        mode=mode,
        started=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        budget_s=args.budget,
        command=" ".join([Path(sys.argv[0]).name] + sys.argv[1:]) if argv is None else " ".join(argv),
        out=str(out),
        sections={},
        notes=[],
    )
    ctx = dict(
        mode=mode,
        work=str(work),
        out=str(out),
        platform=args.platform or "cpu",
        platform_forced=bool(args.platform),
        maxfail=args.maxfail,
        pytest_workers=args.pytest_workers,
        hf_batch_size=args.hf_batch_size,
        hf_load=args.hf_load,
    )
    caps = CAPS[mode]

    def save():
        rep["total_wall_s"] = time.time() - t_start
        write_json(out / "device_check.json", rep)
        try:
            (out / "device_check.md").write_text(markdown(json.loads(json.dumps(_clean(rep)))))
        except Exception:
            (out / "device_check.md").write_text(
                "# device check\n\nMarkdown failed:\n\n```\n" + traceback.format_exc() + "```\n"
            )

    say(f"device check ({mode}): sections {', '.join(order)}, budget {args.budget:.0f} s, output {out}")
    for i, name in enumerate(order):
        remaining = args.budget - (time.time() - t_start)
        later = sum(caps[s] for s in order[i + 1 :])
        timeout = min(1.5 * caps[name], remaining - later)
        if timeout < caps[name]:
            timeout = min(caps[name], remaining)
        if timeout < MIN_S[name]:
            msg = f"{name}: skipped, out of time ({remaining:.0f} s of the budget left)"
            say(msg)
            rep["notes"].append(msg)
            rep["sections"][name] = dict(
                status="skipped", error=None, wall_s=0.0, timeout_s=0.0, results={}, summary={}, notes=[msg]
            )
            save()
            continue
        say(f"=== {name} (time limit {timeout:.0f} s, {remaining:.0f} s of the budget left)")
        try:
            data = run_section(name, ctx, timeout, work)
        except Exception:
            data = dict(
                status="error", error=traceback.format_exc()[-4000:], wall_s=0.0, results={}, summary={}, notes=[]
            )
        rep["sections"][name] = data
        if name == "info":
            r = data.get("results") or {}
            if not args.platform:
                if mode == "smoke":
                    ctx["platform"] = "cpu"
                elif r.get("jax_platforms_value"):
                    ctx["platform"] = r["jax_platforms_value"]
                else:
                    rep["notes"].append("info found no JAX platform: the JAX sections run with JAX_PLATFORMS=cpu")
            bw = r.get("copy_bandwidth") or {}
            if bw.get("copy_Bps"):
                ctx["copy_Bps"] = bw["copy_Bps"]
            if r.get("gemm_flops"):
                ctx["gemm"] = r["gemm_flops"]
            rep["jax_platforms"] = ctx["platform"]
        say(
            f"=== {name}: {data['status']} in {data['wall_s']:.1f} s"
            + (f" -- {str(data['error']).strip().splitlines()[-1][:300]}" if data.get("error") else "")
        )
        save()
    save()
    shutil.rmtree(work, ignore_errors=True)  # model directory, run directories, logs
    say(
        f"device check done in {time.time() - t_start:.0f} s: "
        + ", ".join(f"{k} {v['status']}" for k, v in rep["sections"].items())
        + f"\nwrote {out / 'device_check.json'} and {out / 'device_check.md'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
