"""Benchmark: memory and time of `mascot merge` against the run that made the chunks and an in-memory merge.

Makes a consensus sweep of about ``--rows`` rows (one row per trajectory), runs it with ``mascot run``, then
merges it three ways, each in its own process so that its peak resident memory is its own:

  * ``mascot merge``: streams the chunks (one verified chunk and one row group in memory at a time);
  * ``in memory``: what mascot's merge did before, and the obvious pyarrow baseline: read every chunk, concatenate,
    sort by point, write one file;

and checks the two merged files hold the same rows. Prints JSON and a table (peak RSS, wall time).

    python benchmarks/bench_merge.py [--rows 10000000] [--chunk-rows 500000] [--dir DIR] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
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
    ap.add_argument("--chunk-rows", type=int, default=500_000)
    ap.add_argument("--dir", help="work directory (default: a temporary one)")
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)

    work = Path(args.dir or tempfile.mkdtemp(prefix="mascot-bench-merge-"))
    work.mkdir(parents=True, exist_ok=True)
    traj = 1000
    points = max(1, args.rows // traj)
    per_chunk = max(1, args.chunk_rows // traj)
    b0 = ", ".join(f"{100 + i}.0" for i in range(points))
    cfg = work / "bench.toml"
    cfg.write_text(
        f'[experiment]\nkind = "consensus"\nname = "bench_merge"\nseed = 1\nchunk_size = {per_chunk}\n'
        f"max_points = {points}\n\n[fixed]\ntrajectories = {traj}\nn = 5\nd = 2\nmax_rounds = 30\n\n"
        f"[grid]\nb0 = [{b0}]\n"
    )
    run_dir = work / "run"
    mascot = [sys.executable, "-m", "mascot"]
    res = {"rows": points * traj, "points": points, "chunks": -(-points // per_chunk)}
    res["run"] = _measured([*mascot, "run", str(cfg), "--out", str(run_dir), "--quiet"])
    res["mascot_merge"] = _measured([*mascot, "merge", str(run_dir), "--out", str(work / "merged.parquet")])
    res["in_memory"] = _measured(
        [sys.executable, "-c", _IN_MEMORY, str(run_dir / "chunks"), str(work / "in_memory.parquet")]
    )
    import pyarrow.parquet as pq

    a = pq.read_table(work / "merged.parquet").replace_schema_metadata(None)
    b = pq.read_table(work / "in_memory.parquet").replace_schema_metadata(None)
    res["same_rows"] = bool(a.num_rows == b.num_rows and a.cast(b.schema).equals(b))
    res["machine"] = {"processor": platform.processor(), "python": platform.python_version()}
    res["date"] = time.strftime("%Y-%m-%d")
    print(json.dumps(res, indent=1))
    print()
    print(f"{res['rows']:,} rows in {res['chunks']} chunks")
    print(f"{'step':<16}{'wall s':>10}{'peak RSS MiB':>15}")
    for k in ("run", "mascot_merge", "in_memory"):
        print(f"{k:<16}{res[k]['wall_s']:>10.1f}{res[k]['peak_rss_mib']:>15.0f}")
    print(f"merged files hold the same rows: {res['same_rows']}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
