"""The sweep commands of ``mascot``: validate, run, status, merge and slurm submit."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mascot.errors import InputError, SlurmError

__all__ = ["add_parsers"]


def _cmd_validate(args) -> int:
    from mascot.sweep import estimate_chunk_bytes, load_config

    cfg = load_config(args.config, args.overrides)
    mem = estimate_chunk_bytes(cfg)
    print(f"{args.config}: OK  kind={cfg.kind} name={cfg.name} hash={cfg.hash}")
    if args.overrides:
        print(f"  overrides: {' '.join(args.overrides)}")
    print(f"  grid axes: {', '.join('+'.join(n) + f'[{len(v)}]' for n, v in cfg.axes) or '(none)'}")
    from mascot.sweep.reference import distinct_simulations

    distinct = distinct_simulations(cfg)
    print(f"  points: {cfg.n_points:,}  chunks: {cfg.n_chunks:,} of {cfg.chunk_size} points")
    if distinct is None:
        print("  distinct simulations: not counted (more than 100,000 points)")
    elif distinct == cfg.n_points:  # (said too: the docs promise the line, and its absence read as a fault)
        print(f"  distinct simulations: all {cfg.n_points:,} points")
    elif distinct < cfg.n_points:
        runs = distinct_simulations(cfg, per_chunk=True)
        print(
            f"  distinct simulations: {distinct:,} of {cfg.n_points:,} points (the others differ only in parameters "
            "their strategy or family does not simulate with; `mascot params KIND` says which)"
        )
        print(
            f"  simulations run: {runs:,} (points that simulate the same thing run once within a chunk"
            + (
                "; a larger experiment.chunk_size, or the unread axes listed last in [grid], shares more)"
                if runs > distinct
                else ")"
            )
        )
    print(f"  estimated memory per chunk: {_bytes(mem)}")
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if mem > ram:
        print(
            f"mascot: warning: a chunk needs more than this machine's {ram / 2**30:,.1f} GiB of memory; lower "
            "experiment.chunk_size or the per-point sizes, or run it where there is more",
            file=sys.stderr,
        )
    return 0


def _bytes(n: float) -> str:
    """``n`` bytes in the largest binary unit that keeps it at least 1 (KiB .. EiB)."""
    for unit, k in (("EiB", 60), ("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 2**k:
            return f"{n / 2**k:,.1f} {unit}"
    return f"{n:,.0f} B"


def _cmd_run(args) -> int:
    from mascot.sweep import load_config, parse_shard, run_sweep

    if args.out is not None and not args.out.strip():
        raise InputError("--out must name a directory (it is empty)")
    cfg = load_config(args.config, args.overrides)
    s = run_sweep(cfg, args.out, parse_shard(args.shard), progress=not args.quiet, workers=args.workers)
    print(
        f"{s.out}: shard {s.shard[0]}/{s.shard[1]} ran {s.chunks_run} chunks ({s.points_run:,} points) in "
        f"{s.seconds:.1f} s; {s.chunks_skipped} already complete"
    )
    return 0


def _cmd_status(args) -> int:
    from mascot.sweep import RunDir

    st = RunDir(args.dir).status(quick=args.quick)
    code = 0 if st["complete"] and not st["bad_chunks"] else 1  # scripts: `mascot status DIR && ...`
    if args.json:
        print(json.dumps(st, indent=2))
        return code
    print(f"{args.dir}: {st['name']} ({st['kind']}, hash {st['hash']})")
    print(
        f"  chunks {st['chunks_done']}/{st['n_chunks']}  rows {st['rows']:,}  "
        + ("complete" if st["complete"] else f"missing: {st['missing_chunks']}")
        + ("  (--quick: footers checked, data pages not verified)" if args.quick else "")
    )
    for path, why in st["bad_chunks"].items():
        print(f"  invalid (recomputed by the next `mascot run`): {path}: {why}")
    for path in st["foreign_files"]:
        print(f"  ignored (not a chunk of this run): {path}")
    return code


def _cmd_merge(args) -> int:
    from mascot.sweep import RunDir

    out = RunDir(args.dir).merge(args.out)
    print(f"wrote {out}")
    return 0


def _cmd_slurm_submit(args) -> int:
    from mascot.cli import slurm

    sub = slurm.submit(
        args.config,
        args.shards,
        dry_run=args.dry_run,
        out=args.out,
        partition=args.partition,
        time=args.time,
        gpus=args.gpus,
        cpus=args.cpus,
        mem=args.mem,
        overrides=tuple(args.overrides),
    )
    trials = sub.kind == "trials"
    if args.dry_run:
        if trials:
            print("# ---- trials job (sbatch --parsable) ----")
            print(sub.array_script)
            return 0
        print("# ---- array job (sbatch --parsable) ----")
        print(sub.array_script)
        print("# ---- merge job (sbatch --parsable), after the array job succeeds ----")
        print(sub.merge_script)
        return 0
    if trials:
        print(f"submitted trials job {sub.array_job}\n  run directory: {sub.out}\n  log: {sub.out}/slurm/")
    else:
        print(f"submitted array job {sub.array_job} ({args.shards} shards) and merge job {sub.merge_job}")
        print(f"  run directory: {sub.out}\n  merged dataset: {sub.merged}\n  progress: mascot status {sub.out}")
    if args.wait:
        slurm.wait([sub.array_job, sub.merge_job], timeout=args.wait_timeout)
        if not Path(sub.merged).exists():
            raise SlurmError(f"jobs finished but {sub.merged} was not written; see {sub.out}/slurm/*.out")
        print(f"done: {sub.merged}")
    return 0


def add_overrides(parser, help: str | None = None) -> None:
    """The ``KEY=VALUE`` overrides positional of ``parser`` (:mod:`mascot.sweep.overrides`)."""
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="KEY=VALUE",
        help=help
        or "Hydra-style overrides: grid.n=5,8,16 (an axis), seed=3, fixed.trajectories=256, ~grid.eta (remove); "
        "a bare parameter goes to [grid] when given a list, else to [fixed]",
    )


def add_parsers(sub) -> None:
    """Add the sweep commands to ``sub`` (the ``mascot`` sub-parsers)."""
    v = sub.add_parser("validate", help="check a sweep config without running it")
    v.add_argument("config")
    add_overrides(v)
    v.set_defaults(func=_cmd_validate)

    r = sub.add_parser("run", help="run or resume a sweep (one shard of it with --shard I/N)")
    r.add_argument("config")
    add_overrides(r)
    r.add_argument("--shard", help="I/N: run the chunks c with c %% N == I (default: all)")
    r.add_argument("--out", help="run directory (default: [output] dir of the config, else runs/NAME)")
    r.add_argument(
        "--workers",
        type=int,
        default=3,
        help="chunks in flight at once (one computes while others build tables and write; default 3)",
    )
    r.add_argument("--quiet", action="store_true", help="no progress output")
    r.set_defaults(func=_cmd_run)

    st = sub.add_parser(
        "status",
        help="progress of a run directory",
        description="Progress of a run directory. Exit status 0 when every planned chunk is "
        "present and valid, 1 when chunks are missing or invalid (the next "
        "`mascot run` computes them), 2 when DIR is not a run directory or is refused (a part of it is a "
        "symbolic link, its run.json is damaged or does not match config.toml).",
    )
    st.add_argument("dir")
    st.add_argument("--json", action="store_true")
    st.add_argument(
        "--quick",
        action="store_true",
        help="check chunk footers and metadata only, not every data page (faster on large runs; "
        "`mascot run` and `mascot merge` still verify everything)",
    )
    st.set_defaults(func=_cmd_status)

    m = sub.add_parser("merge", help="check a run directory is complete and write one Parquet dataset")
    m.add_argument("dir")
    m.add_argument("--out", help="output file (default DIR/merged.parquet)")
    m.set_defaults(func=_cmd_merge)

    sl = sub.add_parser("slurm", help="run a sweep or the LLM trials on a Slurm cluster")
    slsub = sl.add_subparsers(dest="slurm_command", required=True)
    ss = slsub.add_parser(
        "submit",
        help="a sweep: an sbatch array (one task per shard) and a merge job; a trials "
        "config: one requeue-safe trials job",
    )
    ss.add_argument("config", help="a sweep config ([experiment], [grid], ...) or a trials config ([trials])")
    add_overrides(ss, "a sweep config's overrides (as for `mascot run`), passed to every array task")
    ss.add_argument("--shards", type=int, help="sweeps: array size N (task i runs --shard i/N); required")
    ss.add_argument("--out", help="run directory (default: the config's [output] dir, else runs/NAME)")
    ss.add_argument("--partition")
    ss.add_argument("--time", default="04:00:00", help="per-task time limit (default 04:00:00)")
    ss.add_argument(
        "--gpus",
        type=int,
        help="GPUs per task (sweeps: default 0, > 0 uses the GPU template; trials: default 1 for vllm, else 0)",
    )
    ss.add_argument("--cpus", type=int, help="CPUs per task (default 2; vllm trials 8)")
    ss.add_argument("--mem", help="memory per task (default: sweeps estimated from the config; vllm trials 64G)")
    ss.add_argument("--dry-run", action="store_true", help="print the scripts, submit nothing")
    ss.add_argument("--wait", action="store_true", help="block until the merge job has finished")
    ss.add_argument("--wait-timeout", type=float, default=3600.0)
    ss.set_defaults(func=_cmd_slurm_submit)
