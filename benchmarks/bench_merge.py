"""Benchmark: memory and time of `mascot merge` and `mascot report` against the run that made the chunks and
against reading everything into memory.

Makes a consensus sweep of about ``--rows`` rows (one row per trajectory; 3 strategies x 10 budgets x 10 eta =
300 grid points), runs it with ``mascot run``, then, each step in its own process so that its peak resident
memory is its own:

  * ``mascot merge``: streams the chunks (one verified chunk and one row group in memory at a time);
  * ``mascot report consensus-sweep``: streams the merged file (one batch of whole points, needed columns only);
  * baselines (skipped above 2e7 rows, where they need more memory than a 24 GiB machine has, unless
    ``--baseline``): ``in-memory merge`` (read every chunk, concatenate, sort by point, write one file: what
    mascot's merge did before, and the obvious pyarrow way) and ``in-memory report`` (read the whole merged file
    with pandas, then report on the DataFrame: what mascot's report did before);

and checks the merged files hold the same rows and the two reports the same tables. Prints JSON and a table.

    python benchmarks/bench_merge.py [--rows 10000000] [--chunk-rows 1000000] [--dir DIR] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_MEASURE = (
    "import resource, subprocess, sys, time; t = time.perf_counter(); r = subprocess.run(sys.argv[1:]); "
    "print(r.returncode, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)

_REPORT_IN_MEMORY = """
import sys, pandas as pd
from mascot.analysis.consensus_sweep import report
report(pd.read_parquet(sys.argv[1]), sys.argv[2], log=lambda *a: None)
"""

_IN_MEMORY = """
import sys, pyarrow as pa, pyarrow.parquet as pq
from pathlib import Path
files = sorted(Path(sys.argv[1]).glob("chunk-*.parquet"))
t = pa.concat_tables([pq.read_table(f) for f in files])
keys = [("point", "ascending")] + [(k, "ascending") for k in ("trajectory", "graph") if k in t.column_names]
pq.write_table(t.sort_by(keys), sys.argv[2], compression="lz4", use_dictionary=False)
"""


def _measured(cmd: list[str]) -> dict:
    """Run ``cmd`` in a child of a fresh interpreter: its exit code, wall time and peak RSS (MiB)."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, *cmd], capture_output=True, text=True, check=True)
    rc, wall, rss_kib = out.stdout.split()[-3:]
    if int(rc) != 0:
        raise SystemExit(f"{cmd[:4]} failed with exit code {rc}")
    return {"wall_s": float(wall), "peak_rss_mib": int(rss_kib) / 1024}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--chunk-rows", type=int, default=1_000_000)
    ap.add_argument("--baseline", action=argparse.BooleanOptionalAction, default=None)
    ap.add_argument("--dir", help="work directory (default: a temporary one)")
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)

    work = Path(args.dir or tempfile.mkdtemp(prefix="mascot-bench-merge-"))
    work.mkdir(parents=True, exist_ok=True)
    points = 300
    traj = max(1, args.rows // points)
    per_chunk = max(1, args.chunk_rows // traj)
    baseline = args.baseline if args.baseline is not None else points * traj <= 20_000_000
    cfg = work / "bench.toml"
    cfg.write_text(
        f'[experiment]\nkind = "consensus"\nname = "bench_merge"\nseed = 1\nchunk_size = {per_chunk}\n\n'
        f"[fixed]\ntrajectories = {traj}\nn = 5\nd = 2\nmax_rounds = 30\n\n"
        '[grid]\nstrategy = ["adaptive", "complete", "ring"]\n'
        f"b0 = [{', '.join(f'{200 + 100 * i}.0' for i in range(10))}]\n"
        f"eta = [{', '.join(f'{0.04 + 0.02 * i:.2f}' for i in range(10))}]\n"
    )
    run_dir = work / "run"
    mascot = [sys.executable, "-m", "mascot"]
    merged = work / "merged.parquet"
    res = {"rows": points * traj, "points": points, "chunks": -(-points // per_chunk)}
    res["run"] = _measured([*mascot, "run", str(cfg), "--out", str(run_dir), "--quiet"])
    res["mascot_merge"] = _measured([*mascot, "merge", str(run_dir), "--out", str(merged)])
    res["mascot_report"] = _measured([*mascot, "report", "consensus-sweep", str(merged), "--out", str(work / "rep")])
    steps = ["run", "mascot_merge", "mascot_report"]
    if baseline:
        res["in_memory_merge"] = _measured(
            [sys.executable, "-c", _IN_MEMORY, str(run_dir / "chunks"), str(work / "in_memory.parquet")]
        )
        res["in_memory_report"] = _measured([sys.executable, "-c", _REPORT_IN_MEMORY, str(merged), str(work / "rep0")])
        steps += ["in_memory_merge", "in_memory_report"]
        import pyarrow.parquet as pq

        a = pq.read_table(merged).replace_schema_metadata(None)
        b = pq.read_table(work / "in_memory.parquet").replace_schema_metadata(None)
        res["same_rows"] = bool(a.num_rows == b.num_rows and a.cast(b.schema).equals(b))
        res["same_report"] = all(
            (work / "rep" / f).read_bytes() == (work / "rep0" / f).read_bytes()
            for f in ("summary.csv", "dominance.csv", "README.md")
        )
    res["merged_mib"] = merged.stat().st_size / 2**20
    res["machine"] = {"processor": platform.processor(), "cpus": os.cpu_count(), "python": platform.python_version()}
    res["date"] = time.strftime("%Y-%m-%d")
    print(json.dumps(res, indent=1))
    print()
    print(f"{res['rows']:,} rows in {res['chunks']} chunks; merged file {res['merged_mib']:.0f} MiB")
    print(f"{'step':<18}{'wall s':>10}{'peak RSS MiB':>15}")
    for k in steps:
        print(f"{k:<18}{res[k]['wall_s']:>10.1f}{res[k]['peak_rss_mib']:>15.0f}")
    if baseline:
        print(f"merged files hold the same rows: {res['same_rows']}; reports identical: {res['same_report']}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
