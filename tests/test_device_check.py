"""benchmarks/device_check.py --smoke runs every section of the GPU device check at tiny sizes on the CPU, so
the script that will be run once on a GPU node cannot rot unnoticed."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from limits import HANG_S  # noqa: E402  (a hang guard, not a speed claim)

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("info", "tests", "consensus", "spectra", "sweep", "hf")


def _positive_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


@pytest.mark.slow
def test_device_check_smoke(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("OUT", None)
    res = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "device_check.py"), "--smoke", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    rep = json.loads((out / "device_check.json").read_text())
    md = (out / "device_check.md").read_text()
    assert rep["mode"] == "smoke"
    for name in SECTIONS:
        sec = rep["sections"].get(name)
        assert sec is not None, f"section {name} missing"
        assert sec["status"] == "ok", (
            f"{name}: {sec['status']}: {sec.get('error')}\n{sec.get('output_tail', '')[-3000:]}"
        )
        assert sec["summary"], f"{name}: empty summary"
        for k, v in sec["summary"].items():
            assert _positive_number(v), f"{name}.summary.{k} = {v!r}"
        assert _positive_number(sec["wall_s"])
        assert f"| {name} | ok |" in md

    info = rep["sections"]["info"]["results"]
    assert info["devices"] and _positive_number(info["copy_bandwidth"]["copy_GBps"])

    passes = rep["sections"]["tests"]["results"]["passes"]
    assert set(passes) == {"float32", "float64"}
    for p in passes.values():
        assert p["returncode"] == 0 and p["failed"] == 0 and p["errors"] == 0 and p["passed"] > 0, p

    cons = rep["sections"]["consensus"]["results"]
    assert {(r["N"], r["pair"]) for r in cons["rows"]} == {
        (5, "commuting"),
        (5, "non-commuting"),
        (64, "commuting"),
        (64, "non-commuting"),
    }
    for r in cons["rows"]:
        for k in ("device_traj_s", "numpy_traj_s", "floor_fraction", "ratio_vs_numpy", "mean_rounds"):
            assert _positive_number(r[k]), (k, r)
    for b in cons["baselines"]:
        assert b["rounds_agree"] > 0.99, b
    assert {r["N"] for r in cons["split"]} == {5, 64}
    for r in cons["split"]:
        for k in ("total_s", "kernel_s", "projection_s", "fetch_s", "x0_floor_s", "kernel_floor_fraction"):
            assert _positive_number(r[k]), (k, r)
    assert "Where the modal path's time goes" in md
    assert {(t["N"], t["method"]) for t in cons["traces"]} == {(64, "modal"), (64, "matrix")}
    for t in cons["traces"]:  # the Chrome traces come back beside the report, and say something
        assert (out / "traces" / Path(t["file"]).name).stat().st_size == t["bytes"] > 0
        assert t["span_ms"] > 0 and t["processes"] and all(p["busy_ms"] > 0 and p["top"] for p in t["processes"])
    assert "Profiler trace, N = 64" in md

    spec = rep["sections"]["spectra"]["results"]["rows"]
    assert {r["n"] for r in spec} == {16, 64, 256}
    for r in spec:
        for k in ("device_pairs_s", "numpy_pairs_s", "floor_fraction", "ratio_vs_numpy"):
            assert _positive_number(r[k]), (k, r)
        assert r["max_rel_diff"]["kappa"] < (1e-8 if r["dtype"] == "float64" else 1e-3), r

    sweep = rep["sections"]["sweep"]["results"]
    for k in ("pipeline_traj_per_s", "kernel_traj_per_s", "kernel_floor_fraction", "pipeline_s", "kernel_s"):
        assert _positive_number(sweep[k]), k

    hf = rep["sections"]["hf"]["results"]
    assert hf["step_complete"] and hf["requests_total"] == hf["requests_measured"] > 0
    assert 0 < hf["completion_tokens"] <= hf["requests_measured"] * hf["trial_config"]["sampling"]["max_tokens"]
    assert hf["full_run_s_extrapolated"] == pytest.approx(12 * hf["step_s"])
    assert hf["backend_describe"]["dtype"] == "bfloat16"
    assert "EXTRAPOLATED" in md


def test_trace_summary_counts_overlapping_events_once():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from device_check import summarize_trace

    meta = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:GPU:0"}},
        {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "/host:CPU"}},
    ]
    x = lambda pid, name, ts, dur: {"ph": "X", "pid": pid, "tid": 0, "name": name, "ts": ts, "dur": dur}  # noqa: E731
    # GPU: [100, 110] and [105, 115] overlap (15 us busy), [120, 125] apart: 20 us of a 40 us span
    ev = meta + [x(1, "gemm", 100, 10), x(1, "gemm", 105, 10), x(1, "reduce", 120, 5), x(2, "launch", 90, 50)]
    s = summarize_trace({"traceEvents": ev})
    assert s["span_ms"] == pytest.approx(0.050)
    gpu, host = (next(p for p in s["processes"] if p["process"] == n) for n in ("/device:GPU:0", "/host:CPU"))
    assert gpu["busy_ms"] == pytest.approx(0.020) and gpu["events"] == 3
    assert gpu["top"] == [
        {"name": "gemm", "count": 2, "total_ms": pytest.approx(0.020)},
        {"name": "reduce", "count": 1, "total_ms": pytest.approx(0.005)},
    ]
    assert host["busy_ms"] == pytest.approx(0.050)
    assert summarize_trace({"traceEvents": meta}) == {"span_ms": 0.0, "processes": []}


def test_device_check_refuses_bad_options_before_any_work(tmp_path):
    f = tmp_path / "a_file"
    f.write_text("")
    o = str(tmp_path / "o")
    for args, msg in (
        (["--out", str(f)], "is a file"),
        (["--sections", "", "--out", o], "names no section"),
        (["--sections", "gpu", "--out", o], "unknown sections"),
    ):
        res = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "device_check.py"), "--smoke", *args],
            capture_output=True,
            text=True,
            timeout=HANG_S,
        )
        assert res.returncode == 2 and msg in res.stderr and "Traceback" not in res.stderr, (args, res.stderr)
    assert not (tmp_path / "o").exists()
