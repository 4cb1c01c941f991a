"""The ``mascot`` command.

    mascot reproduce consensus [--out DIR]     recompute the consensus paper's simulation section
    mascot reproduce all [--out DIR]           every reproduction mascot has (consensus, for now)
    mascot certify --d0 ... --b0 ... [--json]  Theorem 1 / Def. 11 certificate calculator
    mascot validate CONFIG                     check a sweep config; print points and memory per chunk
    mascot run CONFIG [--shard I/N] [--out DIR]  run (or resume) a sweep
    mascot status DIR                          progress of a run directory
    mascot merge DIR [--out FILE.parquet]      check completeness and write one dataset
    mascot slurm submit CONFIG --shards N      sbatch array + dependent merge job (--dry-run prints them)
    mascot report consensus-sweep DATA [--out DIR]   figures and tables from a merged consensus sweep
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

__all__ = ["main"]


def _sweep_and_report(cfg_path: Path, report, out: Path) -> None:
    """Run (or resume) a committed sweep config, merge it, and write its report to ``out``."""
    from mascot.sweep import RunDir, load_config, run_sweep

    if not cfg_path.exists():
        print(f"skipping {cfg_path}: not found (run from the repository root)")
        return
    cfg = load_config(cfg_path)
    summary = run_sweep(cfg, cfg.output_dir, progress=True)
    merged = RunDir(summary.out).merge(Path(summary.out).with_suffix(".parquet"))
    report(merged, out)


def _cmd_reproduce(args) -> int:
    from mascot.analysis import consensus_paper, spectra_paper

    if args.what == "consensus":
        consensus_paper.reproduce(Path(args.out or "results/consensus"))
    elif args.what == "spectra":
        spectra_paper.reproduce(Path(args.out or "results/spectra"))
    else:  # all: both papers' closed-form sections, then the committed sweeps and their reports
        from mascot.analysis.consensus_sweep import report as consensus_report
        from mascot.analysis.noise_sweep import report as noise_report
        from mascot.analysis.spectra_sweep import report as spectra_report

        root = Path(args.out or "results")
        consensus_paper.reproduce(root / "consensus")
        spectra_paper.reproduce(root / "spectra")
        _sweep_and_report(Path("configs/sweeps/consensus_scaling.toml"), consensus_report, root / "sweeps")
        _sweep_and_report(Path("configs/sweeps/spectra_families.toml"), spectra_report, root / "spectra")
        _sweep_and_report_many([Path("configs/sweeps/noise_linear.toml"), Path("configs/sweeps/noise_rule.toml")],
                               noise_report, root / "spectra")
        spectra_paper.write_readme(root / "spectra")  # again, now with the sweeps' findings
    return 0


def _sweep_and_report_many(cfg_paths: list[Path], report, out: Path) -> None:
    """Like :func:`_sweep_and_report` for a report over several sweeps."""
    from mascot.sweep import RunDir, load_config, run_sweep

    merged = []
    for cfg_path in cfg_paths:
        if not cfg_path.exists():
            print(f"skipping {cfg_path}: not found (run from the repository root)")
            return
        cfg = load_config(cfg_path)
        summary = run_sweep(cfg, cfg.output_dir, progress=True)
        merged.append(RunDir(summary.out).merge(Path(summary.out).with_suffix(".parquet")))
    report(merged, out)


def _load_matrix(path: str, name: str):
    import numpy as np

    p = Path(path)
    if not p.exists():
        raise ValueError(f"{name}: file not found: {path}")
    if p.suffix == ".npy":
        return np.load(p, allow_pickle=False)
    if p.suffix == ".json":
        return np.asarray(json.loads(p.read_text()), dtype=float)
    return np.loadtxt(p, delimiter="," if p.suffix == ".csv" else None, ndmin=2)


def _json_safe(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def _cmd_certify(args) -> int:
    from mascot.theory import contraction_rate, corollary1, theorem1

    lam1, lam2 = args.lambda1, args.lambda2
    if args.w1:
        lam1 = contraction_rate(_load_matrix(args.w1, "--w1"), name="W1 (--w1)")
    if args.w2:
        lam2 = contraction_rate(_load_matrix(args.w2, "--w2"), name="W2 (--w2)")
    if lam1 is None or lam2 is None:
        raise ValueError("give --lambda1 and --lambda2, or --w1 and --w2 (weight-matrix files)")
    if not args.b0 >= 0:
        raise ValueError(f"--b0 must be >= 0; got {args.b0}")
    cert = theorem1(args.d0, args.eta, args.eps, lam1, lam2, args.c1, args.c2)
    cor = corollary1(args.d0, args.eta, args.eps, lam1, lam2, args.c1, args.c2)
    certified = cert.certifies(args.b0)
    verdict = ("applies" if cor.condition else
               ("does not apply: c1/c2 < log(lambda1)/log(lambda2)" if cor.applies else
                "does not apply: needs lambda1 < lambda2"))
    out = dict(d0=cert.d0, b0=args.b0, eta=cert.eta, eps=cert.eps, lambda1=lam1, lambda2=lam2, c1=cert.c1,
               c2=cert.c2, K1=cert.K1, K2=cert.K2, K_star=cert.K_star, B_star=cert.B_star, certified=certified,
               margin=cert.margin(args.b0), reason=cert.reason, K_cmpl=cor.K_cmpl, K_ring=cor.K_ring,
               B_cmpl=cor.B_cmpl, B_ring=cor.B_ring, corollary_condition=cor.condition,
               corollary=verdict, rounds_chain=cor.rounds_chain, cost_chain=cor.cost_chain)
    if args.json:
        print(json.dumps({k: _json_safe(v) for k, v in out.items()}, indent=2))
        return 0
    yes = "YES" if certified else "NO"
    print(f"lambda1 = {lam1:.6g}   lambda2 = {lam2:.6g}   ({cert.reason})")
    print(f"K1 = {cert.K1}   K2 = {cert.K2}   K* = {cert.K_star}   B* = {cert.B_star:g}")
    print(f"(D0 = {cert.d0:g}, b0 = {args.b0:g}) in the certificate region: {yes}   "
          f"margin b0 - B* = {cert.margin(args.b0):g}")
    if certified:
        print(f"  => eps-consensus within {cert.K_star} rounds and {cert.B_star:g} tokens (Theorem 2)")
    print(f"Corollary 1: {verdict}; K_cmpl = {cor.K_cmpl}, K_ring = {cor.K_ring}, "
          f"B_cmpl = {cor.B_cmpl:g}, B_ring = {cor.B_ring:g}")
    print(f"  K_cmpl <= K* <= K_ring: {cor.rounds_chain}   K_ring c2 <= B* <= K_cmpl c1: {cor.cost_chain}")
    return 0


def _cmd_validate(args) -> int:
    from mascot.sweep import estimate_chunk_bytes, load_config

    cfg = load_config(args.config)
    mem = estimate_chunk_bytes(cfg)
    print(f"{args.config}: OK  kind={cfg.kind} name={cfg.name} hash={cfg.hash}")
    print(f"  grid axes: {', '.join('+'.join(n) + f'[{len(v)}]' for n, v in cfg.axes) or '(none)'}")
    print(f"  points: {cfg.n_points:,}  chunks: {cfg.n_chunks:,} of {cfg.chunk_size} points")
    print(f"  estimated memory per chunk: {mem / 2**20:,.1f} MiB")
    return 0


def _cmd_run(args) -> int:
    from mascot.sweep import load_config, parse_shard, run_sweep

    cfg = load_config(args.config)
    s = run_sweep(cfg, args.out, parse_shard(args.shard), progress=not args.quiet)
    print(f"{s.out}: shard {s.shard[0]}/{s.shard[1]} ran {s.chunks_run} chunks ({s.points_run:,} points) in "
          f"{s.seconds:.1f} s; {s.chunks_skipped} already complete")
    return 0


def _cmd_status(args) -> int:
    from mascot.sweep import RunDir

    st = RunDir(args.dir).status()
    if args.json:
        print(json.dumps(st, indent=2))
        return 0
    print(f"{args.dir}: {st['name']} ({st['kind']}, hash {st['hash']})")
    print(f"  chunks {st['chunks_done']}/{st['n_chunks']}  rows {st['rows']:,}  "
          + ("complete" if st["complete"] else f"missing: {st['missing_chunks']}"))
    return 0


def _cmd_merge(args) -> int:
    from mascot.sweep import RunDir

    out = RunDir(args.dir).merge(args.out)
    print(f"wrote {out}")
    return 0


def _cmd_slurm_submit(args) -> int:
    from mascot.sweep import slurm

    sub = slurm.submit(args.config, args.shards, dry_run=args.dry_run, out=args.out, partition=args.partition,
                       time=args.time, gpus=args.gpus, cpus=args.cpus, mem=args.mem)
    if args.dry_run:
        print("# ---- array job (sbatch --parsable) ----")
        print(sub.array_script)
        print("# ---- merge job (sbatch --parsable), after the array job succeeds ----")
        print(sub.merge_script)
        return 0
    print(f"submitted array job {sub.array_job} ({args.shards} shards) and merge job {sub.merge_job}")
    print(f"  run directory: {sub.out}\n  merged dataset: {sub.merged}\n  progress: mascot status {sub.out}")
    if args.wait:
        slurm.wait([sub.array_job, sub.merge_job], timeout=args.wait_timeout)
        if not Path(sub.merged).exists():
            raise RuntimeError(f"jobs finished but {sub.merged} was not written; see {sub.out}/slurm/*.out")
        print(f"done: {sub.merged}")
    return 0


def _cmd_report(args) -> int:
    if args.what == "consensus-sweep":
        from mascot.analysis.consensus_sweep import report
    elif args.what == "spectra-sweep":
        from mascot.analysis.spectra_sweep import report
    else:
        from mascot.analysis.noise_sweep import report
    if args.what != "noise-sweep" and len(args.data) != 1:
        raise ValueError(f"report {args.what} takes one merged dataset; got {len(args.data)}")
    report(args.data if args.what == "noise-sweep" else args.data[0], args.out or _REPORT_OUT[args.what])
    return 0


_REPORT_OUT = {"consensus-sweep": "results/sweeps", "spectra-sweep": "results/spectra", "noise-sweep": "results/spectra"}


def _cmd_diagnose(args) -> int:
    import json

    from mascot.analysis.diagnose import diagnose, graphs_from_args, triage_text

    specs = []
    for t in args.topology or []:
        specs += ["chain:12", "star:4", "mesh:4"] if t == "paper" else [t]
    graphs = graphs_from_args(specs, args.adjacency)
    kp = None
    if args.k_profile:
        try:
            k = [float(x) for x in args.k_profile.split(",")]
        except ValueError:
            raise ValueError(f"--k-profile must be comma-separated numbers; got {args.k_profile!r}") from None
        if any(x < 1 for x in k):
            raise ValueError("--k-profile values must be >= 1 (agents aggregated per step)")
        for name, A in graphs.items():
            if len(k) not in (1, A.shape[0]):
                raise ValueError(f"--k-profile has {len(k)} values but {name} has {A.shape[0]} agents")
        kp = {name: (k[0] if len(k) == 1 else k) for name in graphs}
    rows = diagnose(graphs, gamma=args.gamma, rho_c=args.rho_c, k_profiles=kp)
    if args.json:
        print(json.dumps(rows[0] if len(rows) == 1 else rows, indent=2))
    else:
        print(triage_text(rows))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mascot", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("reproduce", help="recompute a paper's tables and figures")
    r.add_argument("what", choices=["consensus", "spectra", "all"])
    r.add_argument("--out", help="output directory (default results/consensus, or results/ for 'all')")
    r.set_defaults(func=_cmd_reproduce)

    c = sub.add_parser("certify", help="consensus-budget certificate (Theorem 1, Def. 11, Corollary 1)")
    c.add_argument("--d0", type=float, required=True, help="initial disagreement D(X0)")
    c.add_argument("--b0", type=float, required=True, help="initial token budget")
    c.add_argument("--eta", type=float, required=True, help="switching threshold")
    c.add_argument("--eps", type=float, required=True, help="consensus tolerance")
    c.add_argument("--c1", type=float, required=True, help="token cost per mode-1 round")
    c.add_argument("--c2", type=float, required=True, help="token cost per mode-2 round")
    c.add_argument("--lambda1", type=float, help="contraction rate of mode 1")
    c.add_argument("--lambda2", type=float, help="contraction rate of mode 2")
    c.add_argument("--w1", help="mode-1 weight matrix (.npy, .csv, .json, whitespace text)")
    c.add_argument("--w2", help="mode-2 weight matrix")
    c.add_argument("--json", action="store_true", help="print a JSON object")
    c.set_defaults(func=_cmd_certify)

    v = sub.add_parser("validate", help="check a sweep config without running it")
    v.add_argument("config")
    v.set_defaults(func=_cmd_validate)

    r = sub.add_parser("run", help="run or resume a sweep (one shard of it with --shard I/N)")
    r.add_argument("config")
    r.add_argument("--shard", help="I/N: run the chunks c with c %% N == I (default: all)")
    r.add_argument("--out", help="run directory (default: [output] dir of the config, else runs/NAME)")
    r.add_argument("--quiet", action="store_true", help="no progress output")
    r.set_defaults(func=_cmd_run)

    st = sub.add_parser("status", help="progress of a run directory")
    st.add_argument("dir")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=_cmd_status)

    m = sub.add_parser("merge", help="check a run directory is complete and write one Parquet dataset")
    m.add_argument("dir")
    m.add_argument("--out", help="output file (default DIR/merged.parquet)")
    m.set_defaults(func=_cmd_merge)

    sl = sub.add_parser("slurm", help="run a sweep on a Slurm cluster")
    slsub = sl.add_subparsers(dest="slurm_command", required=True)
    ss = slsub.add_parser("submit", help="submit an sbatch array (one task per shard) and a merge job")
    ss.add_argument("config")
    ss.add_argument("--shards", type=int, required=True, help="array size N (task i runs --shard i/N)")
    ss.add_argument("--out", help="run directory (default: the config's [output] dir, else runs/NAME)")
    ss.add_argument("--partition")
    ss.add_argument("--time", default="04:00:00", help="per-task time limit (default 04:00:00)")
    ss.add_argument("--gpus", type=int, default=0, help="GPUs per task (uses the GPU template)")
    ss.add_argument("--cpus", type=int, default=2, help="CPUs per task (default 2)")
    ss.add_argument("--mem", help="memory per task (default: estimated from the config)")
    ss.add_argument("--dry-run", action="store_true", help="print the scripts, submit nothing")
    ss.add_argument("--wait", action="store_true", help="block until the merge job has finished")
    ss.add_argument("--wait-timeout", type=float, default=3600.0)
    ss.set_defaults(func=_cmd_slurm_submit)

    dg = sub.add_parser("diagnose", help="SR spectral triage of communication graphs (rho, Delta, kappa, rho~)")
    dg.add_argument("--topology", action="append", metavar="SPEC",
                    help="chain:N, star:LEAVES, mesh:N, ring:N, complete:N:A, malicious_star:LEAVES:ALPHA, "
                         "or 'paper' (chain:12, star:4, mesh:4); repeat to compare")
    dg.add_argument("--adjacency", action="append", metavar="FILE",
                    help="weighted adjacency (.npy, .csv, .json; A[i, j] > 0: agent i reads agent j); repeatable")
    dg.add_argument("--gamma", type=float, default=0.9, help="SR discount in [0, 1) (default 0.9)")
    dg.add_argument("--rho-c", type=float, default=0.0, help="shared-noise correlation for rho~_c (default 0)")
    dg.add_argument("--k-profile", help="aggregation counts k_i: one number for all agents or one per agent")
    dg.add_argument("--json", action="store_true", help="print JSON (an object, or a list for several graphs)")
    dg.set_defaults(func=_cmd_diagnose)

    rp = sub.add_parser("report", help="figures and tables from a merged sweep dataset")
    rp.add_argument("what", choices=["consensus-sweep", "spectra-sweep", "noise-sweep"])
    rp.add_argument("data", nargs="+", help="merged Parquet file(s) (mascot merge DIR --out FILE)")
    rp.add_argument("--out", help="output directory (default results/sweeps or results/spectra)")
    rp.set_defaults(func=_cmd_report)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as e:
        print(f"mascot: error: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # e.g. MissingChunksError
        print(f"mascot: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
