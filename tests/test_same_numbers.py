"""Same config, same numbers on every machine: grid values correctly rounded from the decimals as written,
experiment hashes (hence every seed) from the config as written, and the same hashes, values and results
with numpy's SIMD dispatch, OpenBLAS's kernels and XLA's vector extensions narrowed to another processor's."""

import json
import math
import os
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from mascot.sweep import parse_config
from mascot.sweep import values as V

ROOT = Path(__file__).resolve().parent.parent


def _exact(x) -> Fraction:
    """The decimal a TOML number stands for, as an exact rational (independent of mascot's ``written``)."""
    return Fraction(str(x)) if not isinstance(x, int) else Fraction(x)


def _is_nearest(x: float, lo_ok, hi_ok) -> bool:
    """Whether ``x`` is the double nearest to the exact value ``v``, given ``lo_ok(m)``: ``m <= v`` and
    ``hi_ok(m)``: ``v <= m`` for the exact midpoints ``m`` between ``x`` and its neighbours."""
    below = (Fraction(x) + Fraction(math.nextafter(x, -math.inf))) / 2
    above = (Fraction(x) + Fraction(math.nextafter(x, math.inf))) / 2
    return lo_ok(below) and hi_ok(above)


@pytest.mark.parametrize(
    "a,b,n", [(0.05, 0.2, 4), (0.1, 0.7, 13), (-3.3, 17.9, 101), (1e-9, 3e-9, 7), (100, 1000, 10), (0.3, 0.1, 5)]
)
def test_linspace_is_correctly_rounded_from_the_written_decimals(a, b, n):
    got = V.linspace(a, b, n)
    fa, fb = _exact(a), _exact(b)
    for i, x in enumerate(got):
        v = fa + (fb - fa) * Fraction(i, n - 1)
        assert _is_nearest(x, lambda m, v=v: m <= v, lambda m, v=v: v <= m), (i, x, float(v))
    assert V.linspace(0.05, 0.2, 4) == [0.05, 0.1, 0.15, 0.2]  # numpy: 0.15000000000000002


@pytest.mark.parametrize(
    "a,b,n",
    [(1e2, 1e6, 9), (300, 30000, 3), (0.001, 7.5, 11), (2.0, 3.0, 8), (1e-30, 1e30, 7), (5.0, 5.000001, 4), (10, 1, 6)],
)
def test_logspace_is_correctly_rounded_against_an_exact_rational_bound(a, b, n):
    """v_i = a (b/a)^(i/(n-1)) is irrational, but v^(n-1) = a^(n-1-i) b^i is rational: a candidate double is the
    nearest one exactly when the midpoints around it, raised to n - 1, bracket that rational."""
    got = V.logspace(a, b, n)
    fa, fb = _exact(a), _exact(b)
    assert got[0] == float(fa) and got[-1] == float(fb)
    for i, x in enumerate(got):
        target = fa ** (n - 1 - i) * fb**i
        assert _is_nearest(x, lambda m, t=target: m ** (n - 1) <= t, lambda m, t=target: t <= m ** (n - 1)), (i, x)
    assert V.logspace(1e2, 1e6, 9)[1] == 316.22776601683796  # AVX-512 numpy: 316.2277660168379


def test_loguniform_draws_are_correctly_rounded():
    """lo (hi/lo)^u for u = k / 2^53: v^(2^53) = lo^(2^53 - k) hi^k is too large to form, so check against
    Decimal at 60 digits instead (an independent evaluation: a different precision and formula)."""
    from decimal import localcontext

    u = np.random.default_rng(3).random(200)
    got = V.loguniform(0.01, 20, u)
    with localcontext() as ctx:
        ctx.prec = 60
        for x, ui in zip(got, u):
            v = Fraction(Decimal("0.01") * (Decimal(float(ui)) * (Decimal("20") / Decimal("0.01")).ln()).exp())
            assert _is_nearest(x, lambda m, v=v: m <= v, lambda m, v=v: v <= m)


def test_range_values_are_exact_decimals():
    assert V.range_values(0.1, 0.4, 0.1) == [0.1, 0.2, 0.3]
    assert V.range_values(16, 65, 16) == [16, 32, 48, 64]
    assert V.range_values(1.0, 0.0, -0.25) == [1.0, 0.75, 0.5, 0.25]


SWEEP = """
[experiment]
kind = "consensus"
seed = 4
chunk_size = 8

[fixed]
trajectories = 4
b0 = 1000

[grid]
n = [5, 8]
eta = {{ logspace = [0.05, 0.4, 4] }}
eps = {{ linspace = [0.01, 0.03, 3] }}
{extra}
"""


def _hash(extra="", **repl):
    text = SWEEP.format(extra=extra)
    for k, v in repl.items():
        text = text.replace(k, v)
    return parse_config(text).hash


def test_the_hash_comes_from_the_config_as_written_not_from_computed_values(monkeypatch):
    """Perturb every computed grid value by one ulp, as another processor's numpy did: the hash, hence every
    seed, stays; what changes results as written (a value, the axes' order, the seed) changes it."""
    h = _hash()
    ulp = lambda f: lambda *a: [math.nextafter(x, math.inf) for x in f(*a)]  # noqa: E731
    monkeypatch.setattr(V, "logspace", ulp(V.logspace))
    monkeypatch.setattr(V, "linspace", ulp(V.linspace))
    assert _hash() == h
    monkeypatch.undo()
    assert _hash(**{"b0 = 1000": "b0 = 1000.0"}) == h  # one number, two spellings
    assert _hash(**{"b0 = 1000": "b0 = 1e3"}) == h
    assert _hash(**{"chunk_size = 8": "chunk_size = 3"}) == h  # how the work is split is not the experiment
    assert _hash(extra="# a comment") == h
    assert _hash(**{"b0 = 1000": "b0 = 1001"}) != h
    assert _hash(**{"seed = 4": "seed = 5"}) != h
    swapped = SWEEP.format(extra="").replace("n = [5, 8]\n", "").replace("[grid]\n", "[grid]\nn = [5, 8]\n", 1)
    assert parse_config(swapped).hash == h
    moved = SWEEP.format(extra="").replace("n = [5, 8]\n", "") + "n = [5, 8]\n"  # n last: other point indices
    assert parse_config(moved).hash != h


def test_a_run_directory_of_mascot_0_1_is_refused_with_a_clear_message(tmp_path):
    from mascot.sweep import RunDir, run_sweep

    cfg = parse_config(SWEEP.format(extra=""))
    d = tmp_path / "r"
    run_sweep(cfg, d, progress=False)
    plan = json.loads((d / "run.json").read_text())["identity"]
    assert plan["identity"] == 2
    del plan["identity"]  # as mascot 0.1 wrote it, in plan.json
    (d / "run.json").unlink()
    (d / "plan.json").write_text(json.dumps(plan))
    for action in (lambda: run_sweep(cfg, d, progress=False), lambda: RunDir(d).status(), lambda: RunDir(d).merge()):
        with pytest.raises(ValueError, match="written by mascot 0.1.*new --out"):
            action()


def test_a_run_directory_that_kept_its_plan_in_plan_json_still_resumes_checks_and_merges(tmp_path):
    """Directories written before the plan moved into run.json hold it as plan.json: the same numbers, read as
    they are (a lost chunk recomputed, status and merge as before) and never given a run.json."""
    import pandas as pd

    from mascot.sweep import RunDir, run_sweep

    cfg = parse_config(SWEEP.format(extra=""))
    d, ref = tmp_path / "old", tmp_path / "new"
    run_sweep(cfg, ref, progress=False)
    run_sweep(cfg, d, progress=False)
    (d / "plan.json").write_text(json.dumps(json.loads((d / "run.json").read_text())["identity"], indent=2) + "\n")
    (d / "run.json").unlink()
    RunDir(d).chunk_path(1).unlink()
    assert RunDir(d).status()["missing"] == 1
    assert run_sweep(cfg, d, progress=False).chunks_run == 1
    assert RunDir(d).status()["complete"] and not (d / "run.json").exists()
    a, b = pd.read_parquet(RunDir(d).merge()), pd.read_parquet(RunDir(ref).merge())
    pd.testing.assert_frame_equal(a, b)


def test_range_is_exact_and_a_tie_goes_to_even():
    """Found by an outside tester: range values were rounded twice (decimal at 28 digits, then to a double),
    range counts too, and a logspace with integer endpoints can land exactly on a midpoint between doubles."""
    assert V.range_values(1.6653345369377347e-17, 0.5, 0.3)[1] == 0.3  # was 0.30000000000000004
    assert V.range_count(-1e-30, 1.0, 0.5) == 3  # -1e-30, 0.5 - 1e-30, 1 - 1e-30
    # sqrt(127658498651957025 * 635520856592521) = 9007199254741005 exactly, midway between two doubles
    assert V.logspace(127658498651957025, 635520856592521, 3)[1] == 9007199254741004.0
    assert V.logspace(1, (2**53 + 1) ** 2, 3)[1] == 2.0**53  # 2^53 + 1: a tie, to the even significand


@pytest.mark.parametrize(
    "a, b",
    [
        ("b0 = { logspace = [100, 10000, 3] }", "b0 = { logspace = [1e2, 1e4, 3.0] }"),
        ("b0 = { range = [100, 400, 100] }", "b0 = { range = [100.0, 400.0, 100.0] }"),
        ("b0 = 500", "b0 = [500.0]"),
        (
            "n = [5, 8]\n[grid.zip.c]\nc1 = [1.0, 2]\nc2 = [3, 4]",
            "n = [5, 8]\n[grid.zip.c]\nc2 = [3.0, 4]\nc1 = [1, 2.0]",
        ),
        (
            "[grid.random]\ncount = 3\nb0 = { uniform = [100, 300] }",
            "[grid.random]\nb0 = { uniform = [1e2, 3e2] }\ncount = 3",
        ),
        (
            "zip = { c = { c1 = [1.0, 2.0], c2 = [3.0, 4.0] } }\nn = [5, 8]",
            "n = [5, 8]\nzip = { c = { c1 = [1.0, 2.0], c2 = [3.0, 4.0] } }",
        ),
    ],
)
def test_one_experiment_written_two_ways_has_one_hash(a, b):
    """Found by an outside tester: the numbers inside an axis form, a scalar axis, the key order of a zip group
    or random table, and where the zip table stands all changed the hash (so every seed) of one experiment."""
    base = '[experiment]\nkind = "consensus"\n[fixed]\ntrajectories = 2\n[grid]\n'
    ca, cb = parse_config(base + a), parse_config(base + b)
    assert ca.hash == cb.hash and ca.points(0, ca.n_points) == cb.points(0, cb.n_points)


def test_values_float32_cannot_hold_and_directories_of_another_version(tmp_path):
    from mascot.sweep import ConfigError, RunDir, run_sweep

    text = SWEEP.format(extra="").replace("trajectories = 4", "trajectories = 4\nx0_spread = 1e-46")
    with pytest.raises(ConfigError, match="x0_spread = 1e-46 is 0 in float32"):
        parse_config(text)
    cfg = parse_config(SWEEP.format(extra=""))
    d = tmp_path / "r"
    run_sweep(cfg, d, progress=False)
    meta = json.loads((d / "run.json").read_text())
    plan = meta["identity"]
    (d / "run.json").write_text(json.dumps(dict(meta, identity=dict(plan, identity=3))))
    with pytest.raises(ValueError, match="newer mascot"):
        RunDir(d).status()
    old = tmp_path / "old"
    old.mkdir()
    (old / "plan.json").write_text(json.dumps({k: v for k, v in plan.items() if k != "identity"}))
    with pytest.raises(ValueError, match="mascot 0.1"):
        run_sweep(cfg, old, progress=False)
    assert sorted(p.name for p in old.iterdir()) == ["plan.json"]  # refused before any lock file was made


def test_status_and_merge_do_not_draw_the_grid_again(tmp_path, monkeypatch):
    from mascot.sweep import RunDir, run_sweep

    text = SWEEP.format(extra="[grid.random]\ncount = 5\nb0 = { loguniform = [300, 3000] }").replace(
        "[fixed]\ntrajectories = 4\nb0 = 1000\n", "[fixed]\ntrajectories = 4\n"
    )
    cfg = parse_config(text)
    run_sweep(cfg, tmp_path / "r", progress=False)

    def never(*a):
        raise AssertionError("grid values computed again")

    for f in ("linspace", "logspace", "loguniform", "uniform", "range_values"):
        monkeypatch.setattr(V, f, never)
    assert RunDir(tmp_path / "r").status()["complete"]
    RunDir(tmp_path / "r").merge()


# ----------------------------------------------------------------------------- another processor
def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return set(line.split(":", 1)[-1].split())


def _numpy_features(keep) -> str:
    """numpy's dispatched SIMD targets this machine has beyond numpy's baseline, except those ``keep`` accepts
    (the names differ between numpy versions: X86_V3/X86_V4 in 2.4, AVX2/AVX512F/AVX512_SKX before)."""
    from numpy._core._multiarray_umath import __cpu_baseline__, __cpu_dispatch__, __cpu_features__

    return " ".join(
        f for f in __cpu_dispatch__ if __cpu_features__.get(f) and f not in __cpu_baseline__ and not keep(f)
    )


def _env(level: str) -> dict:
    """This process's environment, narrowed to another processor: ``avx2`` plays an x86-64-v3 machine (AVX2 and
    FMA, no AVX-512: numpy's AVX-512 code off, OpenBLAS's Haswell kernels, XLA at most AVX2); ``sse`` plays one
    without AVX or FMA (numpy at its baseline, OpenBLAS's Nehalem kernels, XLA at most SSE4.2)."""
    env = dict(os.environ)
    if level == "avx2":
        env["NPY_DISABLE_CPU_FEATURES"] = _numpy_features(lambda f: "512" not in f and f != "X86_V4")
        env["OPENBLAS_CORETYPE"] = "Haswell"
        isa = "AVX2"
    else:
        env["NPY_DISABLE_CPU_FEATURES"] = _numpy_features(lambda f: False)
        env["OPENBLAS_CORETYPE"] = "Nehalem"
        isa = "SSE4_2"
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + f" --xla_cpu_max_isa={isa}").strip()
    return env


def _differences(a, b, path=""):
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), path
        return [d for k in a for d in _differences(a[k], b[k], f"{path}/{k}")]
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, f"{path}[{i}]")]
    same = a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
    return [] if same else [(path, a, b)]


def _close(diffs, rtol, atol=0.0) -> list:
    """The differences that are not floats within ``rtol`` (relative) or ``atol`` of each other."""
    return [
        (p, a, b)
        for p, a, b in diffs
        if not (isinstance(a, float) and isinstance(b, float) and abs(a - b) <= max(rtol * max(abs(a), abs(b)), atol))
    ]


@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64", reason="x86-64 feature narrowing")
def test_another_processor_gives_the_same_hashes_values_and_results(tmp_path):
    """``tests/processor_probe.py`` (hashes and grid values of the committed configs, and a small run of every
    kind of result mascot commits) as this machine runs it, and again narrowed to two other processors.

    * AVX2 + FMA (x86-64-v3, the processor of the report that found this): every hash, grid value, count,
      status and label identical, and every float but two kinds: the spectra sweep's rho, Delta and kappa of
      random graphs, from LAPACK (within 1e-12 relative or 1e-11: OpenBLAS's kernels for each processor round
      differently), and float32 noisy modal rollouts (within 1e-6: XLA contracts a multiply-add into an FMA in
      some vector lanes and not others, and where depends on the vector width; found by an outside tester at
      N = 17).
    * SSE4.2 without FMA (processors before 2013): discrete results (rounds, tokens, status, parsed answers)
      identical; floats within 1e-5 relative (XLA's erf_inv, behind every Gaussian draw of the JAX kernels,
      rounds differently without FMA: X0 and noise differ in the last bits).
    """
    flags = _cpu_flags()
    levels = ["sse"] + (["avx2"] if {"avx2", "fma"} <= flags else [])
    script = str(ROOT / "tests" / "processor_probe.py")
    procs = {
        "here": subprocess.Popen(
            [sys.executable, script, str(tmp_path / "here")],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    }
    for level in levels:
        procs[level] = subprocess.Popen(
            [sys.executable, script, str(tmp_path / level)],
            cwd=ROOT,
            env=_env(level),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    for name, p in procs.items():
        _, err = p.communicate()
        assert p.returncode == 0, f"{name}: {err[-3000:]}"
    out = {name: json.loads((tmp_path / name / "probe.json").read_text()) for name in procs}
    assert len(out["here"]["configs"]) >= 5
    lapack = "/spectra/"
    if "avx2" in out:
        diffs = _differences(out["here"], out["avx2"])
        assert [d for d in diffs if not isinstance(d[1], float)] == []  # every count, flag, label and seed
        # floats: LAPACK's last bits (a Delta that is 0 exactly comes out as rounding noise near 1e-15), and
        # float32 noisy modal rollouts (XLA fuses a multiply-add into one FMA in some vector lanes only)
        assert _close([d for d in diffs if d[0].startswith(lapack)], 1e-12, 1e-11) == []
        assert _close([d for d in diffs if d[0].startswith("/consensus32/")], 1e-6) == []
        assert [d for d in diffs if not d[0].startswith((lapack, "/consensus32/"))] == []
    diffs = _differences(out["here"], out["sse"])
    assert [d for d in diffs if not isinstance(d[1], float)] == []  # every count, flag, label and seed
    assert _close(diffs, 1e-5, 1e-11) == []
    assert all(d[0].startswith(lapack) or "/consensus" in d[0] or "/noise_linear/" in d[0] for d in diffs), diffs[:5]


# ----------------------------------------------------------------------------- the modal basis
def test_the_circulant_eigenbasis_is_the_real_fourier_basis_written_down():
    from mascot.graphs import complete_weights, ring_weights
    from mascot.kernels.consensus import common_eigenbasis

    for n in (3, 4, 7, 10):
        W1, W2 = complete_weights(n, 0.4), ring_weights(n, 0.6)
        U, lam1, lam2 = common_eigenbasis(W1, W2)
        j = np.arange(n)
        want = []
        for k in range(1, (n - 1) // 2 + 1):
            want += [np.sqrt(2 / n) * np.cos(2 * np.pi * k * j / n), np.sqrt(2 / n) * np.sin(2 * np.pi * k * j / n)]
        if n % 2 == 0:
            want.append((-1.0) ** j / np.sqrt(n))
        np.testing.assert_allclose(U, np.stack(want, 1), atol=1e-15)
        np.testing.assert_allclose(U.T @ W1 @ U, np.diag(lam1), atol=1e-14)
        np.testing.assert_allclose(U.T @ W2 @ U, np.diag(lam2), atol=1e-14)
        ks = [k for k in range(1, (n - 1) // 2 + 1) for _ in (0, 1)] + ([n // 2] if n % 2 == 0 else [])
        np.testing.assert_allclose(lam2, [0.6 + 0.4 * np.cos(2 * np.pi * k / n) for k in ks], atol=1e-15)


def test_a_shared_eigenspace_gets_the_same_basis_whatever_lapack_returns(monkeypatch):
    """The hypercube Q3 (not a circulant) has 3-dimensional eigenspaces: any rotation inside them diagonalises
    the pair, and noise drawn in those coordinates depended on LAPACK's choice. Rotating what eigh returns
    inside each eigenspace leaves the basis unchanged."""
    from mascot.kernels.consensus import common_eigenbasis

    A = np.array([[bin(i ^ j).count("1") == 1 for j in range(8)] for i in range(8)], float)
    W1 = np.eye(8) - (np.diag(A.sum(1)) - A) / 4
    W2 = W1 @ W1
    U, lam1, lam2 = common_eigenbasis(W1, W2)
    rng = np.random.default_rng(5)
    real_eigh = np.linalg.eigh

    def rotated_eigh(M):
        w, V = real_eigh(M)
        V = V.copy()
        i = 0
        while i < w.size:
            k = i + 1
            while k < w.size and abs(w[k] - w[i]) < 1e-9:
                k += 1
            Q, _ = np.linalg.qr(rng.standard_normal((k - i, k - i)))
            V[:, i:k] = V[:, i:k] @ Q
            i = k
        return w, V

    monkeypatch.setattr(np.linalg, "eigh", rotated_eigh)
    for _ in range(3):
        U2, l1, l2 = common_eigenbasis(W1, W2)
        np.testing.assert_allclose(U2, U, atol=1e-12)
        np.testing.assert_allclose(l1, lam1, atol=1e-12)
    np.testing.assert_allclose(U.T @ W1 @ U, np.diag(lam1), atol=1e-12)


# ----------------------------------------------------------------------------- host arithmetic
def test_stable_math_is_the_c_library_with_numpys_conventions():
    from mascot import stable

    x = np.array([[0.5, 1.0, 2.0], [1e-300, 700.0, 3.0]])
    for f, ref in (
        (stable.log, math.log),
        (stable.exp, math.exp),
        (stable.log1p, math.log1p),
        (stable.cos, math.cos),
        (stable.sin, math.sin),
    ):
        got = f(x)
        assert got.shape == x.shape and got.tolist() == [[ref(v) for v in row] for row in x.tolist()]
    with np.errstate(all="ignore"):
        edge = np.array([0.0, -1.0, np.nan, np.inf])
        np.testing.assert_array_equal(stable.log(edge), np.log(edge))
        np.testing.assert_array_equal(stable.log1p(edge - 1.0), np.log1p(edge - 1.0))
        np.testing.assert_array_equal(stable.exp(np.array([1000.0, -1000.0, np.nan])), [np.inf, 0.0, np.nan])
        np.testing.assert_array_equal(stable.cos(np.array([np.inf, np.nan])), [np.nan, np.nan])


def test_exact_sums_are_correctly_rounded():
    from mascot import stable

    x = np.random.default_rng(1).standard_normal((7, 1000)) * 10.0 ** np.random.default_rng(2).integers(-8, 8, 1000)
    exact = [sum(map(Fraction, row.tolist())) for row in x]
    assert stable.fsum_rows(x).tolist() == [float(s) for s in exact]
    assert stable.fmean(x[0]) == float(exact[0]) / 1000  # one rounding for the sum, one for the division
    m = Fraction(stable.fmean(x[0]))
    dev = [Fraction(v) - m for v in x[0].tolist()]
    assert abs(stable.fsd(x[0]) - math.sqrt(float(sum(d * d for d in dev)) / 999)) <= 4e-16 * stable.fsd(x[0])
    assert math.isnan(stable.fmean([])) and math.isnan(stable.fsd([1.0]))
    assert stable.fsum_rows(np.zeros((3, 0))).tolist() == [0.0, 0.0, 0.0]


def test_uniform_draws_over_the_whole_double_range_are_exact():
    """uniform = [-1.7e308, 1.7e308] was refused ("high - low is beyond the largest float"): drawn in exact
    rationals, every draw is finite and inside the bounds."""
    u = np.random.default_rng(0).random(100)
    got = V.uniform(-1.7e308, 1.7e308, u)
    assert all(math.isfinite(x) and -1.7e308 <= x <= 1.7e308 for x in got)
    assert got == [float(Fraction(-17, 10) * 10**308 + Fraction(34, 10) * 10**308 * Fraction(float(x))) for x in u]
