"""The ``mascot`` command.

mascot reproduce consensus [--out DIR]     recompute the consensus paper's simulation section
mascot reproduce all [--out DIR]           every reproduction mascot has (consensus, for now)
mascot certify --d0 ... --b0 ... [--json]  Theorem 1 / Def. 11 certificate calculator
mascot validate CONFIG                     check a sweep config; print points and memory per chunk
mascot run CONFIG [--shard I/N] [--out DIR]  run (or resume) a sweep
mascot status DIR                          progress of a run directory
mascot merge DIR [--out FILE.parquet]      check completeness and write one dataset
mascot slurm submit CONFIG --shards N      sbatch array + dependent merge job (--dry-run prints them);
                                           a trials config: one requeue-safe trials job
mascot report consensus-sweep DATA [--out DIR]   figures and tables from a merged consensus sweep
mascot trials [--backend surrogate|vllm|openai|hf] [--topology all] --out DIR   SR paper's state-tracking
                                           trials: Table 2, Figs 2-6, request logs; resumable
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import sys
from pathlib import Path

from mascot.cli.backend_args import Parser, redact_secrets, refuse_secrets  # (no secret shown or written)
from mascot.cli.graph_args import InOrder, k_profiles
from mascot.errors import InputError, MascotError, exit_code
from mascot.io import file_in_the_way
from mascot.log import printable

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
    from mascot.rundir import not_a_run_dir
    from mascot.studies import consensus_report as consensus_paper
    from mascot.studies import spectra as spectra_paper

    if args.out is not None:
        root = Path(args.out)
        subs = (
            ("", "consensus", "spectra", "sweeps", "deliberation", "trials", "debate") if args.what == "all" else ("",)
        )
        for sub in subs:
            not_a_run_dir(root / sub, f"mascot reproduce {args.what}")
    if args.what == "consensus":
        consensus_paper.reproduce(Path(args.out or "results/consensus"))
    elif args.what == "spectra":
        spectra_paper.reproduce(Path(args.out or "results/spectra"))
        print(f"wrote {Path(args.out or 'results/spectra')}/: {spectra_paper.FILES}")
    elif args.what == "deliberation":
        from mascot.studies.deliberation import reproduce as reproduce_deliberation

        reproduce_deliberation(Path(args.out or "results/deliberation"))
    else:  # all: both papers' closed-form sections, then the committed sweeps and their reports
        from mascot.analysis.consensus_sweep import report as consensus_report
        from mascot.analysis.noise_sweep import report as noise_report
        from mascot.analysis.spectra_sweep import report as spectra_report

        root = Path(args.out or "results")
        consensus_paper.reproduce(root / "consensus")
        spectra_paper.reproduce(root / "spectra")
        print(f"wrote {root / 'spectra'}/: {spectra_paper.FILES}")
        _sweep_and_report(Path("configs/sweeps/consensus_scaling.toml"), consensus_report, root / "sweeps")
        _sweep_and_report(Path("configs/sweeps/spectra_families.toml"), spectra_report, root / "spectra")
        _sweep_and_report_many(
            [Path("configs/sweeps/noise_linear.toml"), Path("configs/sweeps/noise_rule.toml")],
            noise_report,
            root / "spectra",
        )
        spectra_paper.write_readme(root / "spectra")  # again, now with the sweeps' findings
        from mascot.studies.debate import reproduce as reproduce_debate
        from mascot.studies.deliberation import reproduce as reproduce_deliberation
        from mascot.studies.trials import reproduce as reproduce_trials

        reproduce_deliberation(root / "deliberation")  # with the per-model token scaling and the Table VII mapping
        reproduce_trials(root / "trials")  # the SR paper's Table 2 and Figs 2-6, 100 surrogate trials
        reproduce_debate(root / "debate")  # the voting/debate article's debate and weighted-vote examples
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
    """--w1/--w2 read as every other matrix option is (:func:`mascot.analysis.diagnose.load_adjacency`: the same
    formats and messages as diagnose's --adjacency and design's --w1)."""
    from mascot.analysis.diagnose import load_adjacency

    try:
        return load_adjacency(path, what="weight")
    except FileNotFoundError as e:
        raise InputError(f"{name}: {e}") from None


def _json_safe(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def _cmd_certify(args) -> int:
    from mascot.theory import contraction_rate, corollary1, theorem1

    lam1, lam2 = args.lambda1, args.lambda2
    for a, b in (("lambda1", "w1"), ("lambda2", "w2")):
        if getattr(args, a) is not None and getattr(args, b):
            raise InputError(f"give --{a} or --{b}, not both (--{b}'s matrix determines {a})")
    for flag in ("d0", "b0", "eta", "eps", "c1", "c2", "lambda1", "lambda2"):
        v = getattr(args, flag)
        if v is not None and not math.isfinite(v):
            raise InputError(f"--{flag} must be a finite number; got {v}")
        if flag.startswith("lambda") and v is not None and not 0 <= v <= 1:  # (1.2 was certified: an outside tester)
            raise InputError(f"--{flag} must be in [0, 1] (a doubly stochastic W's contraction rate); got {v}")
    W1 = _load_matrix(args.w1, "--w1") if args.w1 else None
    W2 = _load_matrix(args.w2, "--w2") if args.w2 else None
    if W1 is not None and W2 is not None and W1.shape != W2.shape:
        raise InputError(
            f"--w1 is {W1.shape[0]} x {W1.shape[1]} but --w2 is {W2.shape[0]} x {W2.shape[1]}: both modes "
            "act on the same N agents (consensus paper, Def. 1)"
        )
    if W1 is not None:
        lam1 = contraction_rate(W1, name="W1 (--w1)")
    if W2 is not None:
        lam2 = contraction_rate(W2, name="W2 (--w2)")
    if lam1 is None or lam2 is None:
        raise InputError("give --lambda1 and --lambda2, or --w1 and --w2 (weight-matrix files)")
    if not args.b0 >= 0:
        raise InputError(f"--b0 must be >= 0; got {args.b0}")
    cert = theorem1(args.d0, args.eta, args.eps, lam1, lam2, args.c1, args.c2)
    cor = corollary1(args.d0, args.eta, args.eps, lam1, lam2, args.c1, args.c2)
    certified = cert.certifies(args.b0)
    verdict = (
        "applies"
        if cor.condition
        else (
            "does not apply: c1/c2 < log(lambda1)/log(lambda2)"
            if cor.applies
            else "does not apply: needs lambda1 < lambda2"
        )
    )
    out = dict(
        d0=cert.d0,
        b0=args.b0,
        eta=cert.eta,
        eps=cert.eps,
        lambda1=lam1,
        lambda2=lam2,
        c1=cert.c1,
        c2=cert.c2,
        K1=cert.K1,
        K2=cert.K2,
        K_star=cert.K_star,
        B_star=cert.B_star,
        certified=certified,
        margin=cert.margin(args.b0),
        reason=cert.reason,
        K_cmpl=cor.K_cmpl,
        K_ring=cor.K_ring,
        B_cmpl=cor.B_cmpl,
        B_ring=cor.B_ring,
        corollary_condition=cor.condition,
        corollary=verdict,
        rounds_chain=cor.rounds_chain,
        cost_chain=cor.cost_chain,
    )
    if args.json:
        print(json.dumps({k: _json_safe(v) for k, v in out.items()}, indent=2))
        return 0
    yes = "YES" if certified else "NO"
    print(f"lambda1 = {lam1:.6g}   lambda2 = {lam2:.6g}   ({cert.reason})")
    print(f"K1 = {cert.K1}   K2 = {cert.K2}   K* = {cert.K_star}   B* = {cert.B_star:g}")
    print(
        f"(D0 = {cert.d0:g}, b0 = {args.b0:g}) in the certificate region: {yes}   "
        f"margin b0 - B* = {cert.margin(args.b0):g}"
    )
    if certified:
        print(f"  => eps-consensus within {cert.K_star} rounds and {cert.B_star:g} tokens (Theorem 2)")
    print(
        f"Corollary 1: {verdict}; K_cmpl = {cor.K_cmpl}, K_ring = {cor.K_ring}, "
        f"B_cmpl = {cor.B_cmpl:g}, B_ring = {cor.B_ring:g}"
    )
    print(f"  K_cmpl <= K* <= K_ring: {cor.rounds_chain}   K_ring c2 <= B* <= K_cmpl c1: {cor.cost_chain}")
    return 0


def _cmd_report(args) -> int:
    if args.what == "consensus-sweep":
        from mascot.analysis.consensus_sweep import report
    elif args.what == "spectra-sweep":
        from mascot.analysis.spectra_sweep import report
    else:
        from mascot.analysis.noise_sweep import report
    if args.what != "noise-sweep" and len(args.data) != 1:
        raise InputError(f"report {args.what} takes one merged dataset; got {len(args.data)}")
    for p in args.data:
        if not Path(p).is_file():
            raise InputError(
                f"{p}: {'is a directory, not' if Path(p).is_dir() else 'no such file; give'} a merged "
                "Parquet file (`mascot merge RUN` writes RUN/merged.parquet)"
            )
    # beside the (first) data file, never the committed results/ (a tester's first report replaced the papers' files)
    out = args.out or str(Path(args.data[0]).parent / f"{Path(args.data[0]).stem}_report")
    bad = next((q for q in (Path(out), *Path(out).parents) if q.exists() and not q.is_dir()), None)
    if bad is not None:
        raise InputError(f"--out {out}: {bad} is a file; give a directory for the report's files")
    from mascot.sweep.store import refuse_chunks_folder

    refuse_chunks_folder(out)  # (a report written into a sweep's chunks/ was named stray files there: a tester)
    report(args.data if args.what == "noise-sweep" else args.data[0], out)
    if args.what != "consensus-sweep":  # (the consensus report names its files itself)
        files = {
            "spectra-sweep": "sweep_summary.csv fig_sweep_gamma.png/.pdf fig_sweep_size.png/.pdf spectra_sweep.md",
            "noise-sweep": "noise_ratios.csv noise_claims.json fig_noise.png/.pdf",
        }[args.what]
        print(f"wrote {out}/: {files}")
    return 0


def _cmd_diagnose(args) -> int:
    import json

    from mascot.analysis.diagnose import diagnose, gamma_warning, graphs_from_args, triage_text

    specs, order = [], []
    for kind, value in getattr(args, "graph_order", None) or []:  # the graphs in the order given
        if kind == "topology" and value == "paper":
            specs += ["chain:12", "star:5", "mesh:4"]
            order += [("topology", t) for t in ("chain:12", "star:5", "mesh:4")]
        else:
            specs += [value] if kind == "topology" else []
            order.append((kind, value))
    graphs = graphs_from_args(specs, args.adjacency, order)
    kp = k_profiles(args.k_profile, graphs)
    rows = diagnose(graphs, gamma=args.gamma, rho_c=args.rho_c, k_profiles=kp)
    if args.json and gamma_warning(args.gamma):
        print(f"mascot: warning: {gamma_warning(args.gamma)}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows[0] if len(rows) == 1 else rows, indent=2))
    else:
        print(triage_text(rows))
    return 0


# the trials surrogate's constructor parameters -> their flags
_SURROGATE_FLAGS = {
    "sigma": "--sigma",
    "rho_c": "--rho-c",
    "parity_slip": "--parity-slip",
    "level_slip": "--level-slip",
    "parse_fail": "--parse-fail",
    "judge": "--judge",
    "judge_noise": "--judge-noise",
}


def _trials_backend(args):
    """(backend or factory, identity spec, default log mode) from the command line; clear errors."""
    from mascot.cli.backend_args import build_backend

    def surrogate():
        from mascot.protocols.state_tracking.surrogate import SurrogateBackend

        given = {k: getattr(args, k) for k in _SURROGATE_FLAGS if getattr(args, k) is not None}
        return SurrogateBackend(seed=args.seed, **given)  # cheap; validates the knobs

    backend, spec = build_backend(args, surrogate, _SURROGATE_FLAGS)
    return backend, spec, "none" if args.backend == "surrogate" else "all"


def _cmd_trials(args) -> int:
    # the report's imports (pandas, matplotlib: seconds) wait for the requests (issue 29: the first came after 20 s)
    from mascot.backends.base import Sampling
    from mascot.cli.backend_args import check_sampling_args
    from mascot.protocols.state_tracking.harness import TOPOLOGIES, TrialConfig, run_trials

    topo = args.topology or ["all"]
    topologies = TOPOLOGIES if "all" in topo else tuple(topo)
    check_sampling_args(args)
    for flag, v, lo in (
        ("--n-trials", args.n_trials, 1),
        ("--steps", args.steps, 1),
        ("--retries", args.retries, 0),
        ("--n-boot", args.n_boot, 1),
    ):
        if v is not None and v < lo:
            raise InputError(f"{flag} must be an integer >= {lo}; got {v}")
    if not math.isfinite(args.epsilon):
        raise InputError(f"--epsilon must be a finite number; got {args.epsilon}")
    if not (args.d_floor > 0 and math.isfinite(args.d_floor)):
        raise InputError(f"--d-floor must be a finite number > 0; got {args.d_floor}")
    n_trials = args.n_trials or (10_000 if args.backend == "surrogate" else 100)
    cfg = TrialConfig(
        topologies=topologies,
        n_trials=n_trials,
        steps=args.steps,
        epsilon=args.epsilon,
        seed=args.seed,
        retries=args.retries,
        mesh_tie=args.mesh_tie,
        paired_seeds=not args.unpaired,
        structured_output=args.structured_output,
        sampling=Sampling(temperature=args.temperature, top_p=args.top_p, max_tokens=args.max_tokens, seed=args.seed),
        log_requests=args.log_requests or ("none" if args.backend == "surrogate" else "all"),
        d_floor=args.d_floor,
        **({"initial_state": args.initial_state} if args.initial_state else {}),
    )
    plan = cfg.plan()
    if args.dry_run:  # the size is what a dry run is for: said, with whether the run would need --allow-large
        try:
            _check_size(plan, args)
        except InputError as e:
            print(f"note: the run itself would be refused: {e}")
    else:
        _check_size(plan, args)  # before a model is loaded or a server probed
    backend, spec, _ = _trials_backend(args)
    if args.dry_run and args.backend == "openai":  # the backend comes as a factory: build it, i.e. probe the server
        backend = backend() if callable(backend) and not hasattr(backend, "generate") else backend
    if args.dry_run or (args.backend != "surrogate" and not args.quiet):  # (a notice, like progress)
        _say_plan(plan, cfg, backend, dry=args.dry_run)
    if args.dry_run:
        return 0
    out = Path(args.out or f"runs/trials-{args.backend}")
    res = run_trials(cfg, out, backend, backend_spec=spec, progress=not args.quiet, command=sys.argv)
    print(
        f"{out}: {res.steps_run} steps run, {res.steps_skipped} already committed, {res.requests:,} requests "
        f"in {res.wall_s:.1f} s"
    )
    from mascot.analysis.trials_report import write_report
    from mascot.protocols.state_tracking.baselines import run_baselines

    run_baselines(out)  # the echo and random agents through the same harness, beside the run (resumed)
    table2, stats = write_report(
        out, d_floor=cfg.d_floor, seed=cfg.seed, n_boot=args.n_boot, figures=not args.no_figures
    )
    print(_marked_table2(table2, stats))
    print(
        f"wrote {out}/table2.csv, table2.md, metrics.csv, stats.json, trials.parquet"
        + ("" if args.no_figures else ", fig2..fig6 (.png/.pdf)")
    )
    _warn_carried(out)
    return 0


MAX_UNITS = 1_000_000  # trial units held in memory at once (mascot.cli.backend_args.check_run_size)
#: unit-steps a run computes (units x steps): what the surrogate's time and the step files grow with (--steps
#: 100000 on the defaults would have taken about 20 hours and written a file per step)
MAX_UNIT_STEPS = 100_000_000
#: steps (each writes a file: --steps 100000 --n-trials 1 wrote 3,900 files a minute)
MAX_STEPS = 10_000


def _check_size(plan: dict, args) -> None:
    from mascot.cli.backend_args import check_run_size

    what = "trial units (topologies x trials x 2 arms)"
    check_run_size(args, plan["units"], MAX_UNITS, what, plan["requests"], "--n-trials or --steps")
    if not args.allow_large and args.steps > MAX_STEPS:
        raise InputError(
            f"--steps {args.steps:,} is more than {MAX_STEPS:,}: every step writes its own file; lower --steps or "
            "pass --allow-large"
        )
    work = plan["units"] * args.steps
    if not args.allow_large and work > MAX_UNIT_STEPS:
        raise InputError(
            f"{plan['units']:,} trial units x {args.steps:,} steps = {work:,} unit-steps is more than "
            f"{MAX_UNIT_STEPS:,} (each step writes a file and, on the surrogate, takes about a second per 20,000 "
            "units); lower --n-trials or --steps, or pass --allow-large"
        )


def _say_plan(plan: dict, cfg, backend, dry: bool) -> None:
    """The run's size (and, from the server probe's pace, a time) before the first request: on stdout for
    --dry-run, on stderr as a notice before a model run."""
    lines = [
        f"{plan['units']:,} units ({', '.join(cfg.topologies)} x {cfg.n_trials:,} trials x 2 arms), {cfg.steps} "
        f"steps: {plan['requests']:,} requests at their first tries, up to {plan['requests_max']:,} if every reply "
        f"is re-asked --retries {cfg.retries} times",
        f"prompts: {plan['prompt_chars']:,} characters at the first tries (about {plan['prompt_chars'] / 4:,.0f} "
        f"tokens at 4 characters a token); replies: at most {plan['completion_tokens_max']:,} tokens "
        f"(--max-tokens {cfg.sampling.max_tokens})",
    ]
    probe = getattr(backend, "probe_findings", None)
    asked = len((probe or {}).get("sampling", {}).get("seeds", []) or []) if probe else 0
    if probe and asked and probe.get("probe_s"):
        per = probe["probe_s"] / asked
        lines.append(
            f"time: the server probe took {per:.2f} s a request ({asked} requests of at most 16 tokens, one at a time): "
            f"at that pace the first tries take {_duration(per * plan['requests'])} one at a time; longer replies take "
            "longer, a batching server answers several at once"
        )
    elif dry and probe and (probe.get("sampling") or {}).get("error"):  # (a rejected key went unsaid: a tester)
        lines.append(f"time: not estimated: the server probe's request failed: {probe['sampling']['error']}")
    elif dry and getattr(backend, "name", None) != "surrogate":
        lines.append("time: not estimated (only an openai server's probe times a request before the run)")
    text = "\n".join(("plan: " if i == 0 else "      ") + line for i, line in enumerate(lines))
    print(text, file=sys.stdout if dry else sys.stderr)


def _duration(seconds: float) -> str:
    for limit, unit, fmt in ((120, 1, "{:.0f} s"), (7200, 60, "{:.0f} min"), (172800, 3600, "{:.1f} h")):
        if seconds < limit:
            return fmt.format(seconds / unit)
    return f"{seconds / 86400:.1f} days"


def _marked_table2(table2, stats: dict) -> str:
    """Table 2 for the console, its means marked † where they rest on carried-forward states, as table2.md
    marks them, with the same note under it."""
    from mascot.analysis.trials_baselines import carried_note

    carried = stats.get("carried", {}) or {}
    shown = table2.astype(object).copy()
    for col in shown.columns:
        if col.endswith("_mean") or col.endswith("_sd"):
            shown[col] = [f"{v:.4g}" if isinstance(v, float) else v for v in table2[col]]
    marked = False
    for i, metric in enumerate(table2["metric"]):
        for t, c in carried.items():
            col = f"{t}_mean"
            if col in shown and (c.get("affected") or {}).get(metric, 0):
                shown.at[shown.index[i], col] = f"{shown.at[shown.index[i], col]}†"
                marked = True
    text = shown.to_string(index=False, float_format=lambda x: f"{x:.4g}")
    if marked:
        note = "\n".join(carried_note(carried, [t for t in ("chain", "star", "mesh") if t in carried]))
        text += "\n" + note.replace('The row "ours', "table2.md's row \"ours")
    return text


def _warn_carried(out: Path, limit: float = 0.5) -> None:
    """Say on stderr (also with --quiet) when most steps carried their input state forward: the model's
    replies mostly did not parse, so the table measures the parser's fallback, not the model."""
    import pandas as pd

    carried = pd.read_parquet(out / "trials.parquet", columns=["step", "carried"])
    c = carried[carried.step > 0].carried
    if len(c) and c.mean() > limit:
        print(
            f"mascot: warning: {c.mean():.0%} of the steps in {out} carried their input state forward (replies "
            "that did not parse after the retries): the table measures that fallback, not the model; see "
            "requests.jsonl (--log-requests failures) for the replies",
            file=sys.stderr,
        )


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="mascot", description="mascot: Multi-Agent Spectral Consensus Toolkit.")
    from mascot import __version__

    p.add_argument("--version", action="version", version=f"mascot {__version__}")
    p.add_argument(
        "--no-compile-cache",
        dest="compile_cache",
        action="store_false",
        help="do not keep compiled JAX programs between runs (default: kept under ~/.cache/mascot/jax; "
        "MASCOT_COMPILE_CACHE=0 does the same)",
    )
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("reproduce", help="recompute a paper's tables and figures")
    r.add_argument("what", choices=["consensus", "spectra", "deliberation", "all"])
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

    from mascot.cli.params_cmd import add_parser as _add_params_parser
    from mascot.cli.sweep_cmds import add_parsers as _add_sweep_parsers

    _add_sweep_parsers(sub)
    _add_params_parser(sub)
    from mascot.cli.plot_cmd import add_parser as _add_plot_parser

    _add_plot_parser(sub)

    from mascot.graphs import SPEC_SYNTAX

    dg = sub.add_parser("diagnose", help="SR spectral triage of communication graphs (rho, Delta, kappa, rho~)")
    dg.add_argument(
        "--topology",
        action=InOrder,
        metavar="SPEC",
        help=f"{SPEC_SYNTAX}, or 'paper' (chain:12, star:5, mesh:4); repeat to compare",
    )
    dg.add_argument(
        "--adjacency",
        action=InOrder,
        metavar="FILE",
        help="weighted adjacency (.npy, .csv, .json; A[i, j] > 0: agent i reads agent j); repeatable",
    )
    dg.add_argument("--gamma", type=float, default=0.9, help="SR discount in [0, 1) (default 0.9)")
    dg.add_argument("--rho-c", type=float, default=0.0, help="shared-noise correlation for rho~_c (default 0)")
    dg.add_argument("--k-profile", help="aggregation counts k_i: one number for all agents or one per agent")
    dg.add_argument("--json", action="store_true", help="print JSON (an object, or a list for several graphs)")
    dg.set_defaults(func=_cmd_diagnose)

    from mascot.cli.deliberation import add_parsers as _add_deliberation_parsers

    _add_deliberation_parsers(sub)  # mascot deliberate, mascot debate
    from mascot.cli.design import add_parsers as _add_design_parsers

    _add_design_parsers(sub)  # mascot design
    from mascot.cli.calibrate import add_parsers as _add_calibrate_parsers

    _add_calibrate_parsers(sub)  # mascot calibrate
    from mascot.cli.models import add_parsers as _add_models_parsers
    from mascot.cli.models import add_show_parser

    _add_models_parsers(sub)  # mascot models gguf
    add_show_parser(sub)  # mascot show

    rp = sub.add_parser("report", help="figures and tables from a merged sweep dataset")
    rp.add_argument("what", choices=["consensus-sweep", "spectra-sweep", "noise-sweep"])
    rp.add_argument(
        "data",
        nargs="+",
        help="merged Parquet file (mascot merge DIR --out FILE); noise-sweep takes several (non-overlapping grids), "
        "the others one",
    )
    rp.add_argument("--out", help="output directory (default: DATA_report beside the (first) data file)")
    rp.set_defaults(func=_cmd_report)

    tr = sub.add_parser(
        "trials",
        help="the SR paper's 12-step state-tracking trials (chain/star/mesh) on an LLM "
        "backend: batched, logged, resumable; Table 2, Figs 2-6 and statistics",
        description="Run (or resume) the state-tracking trials of 'Predictive Maps of Multi-Agent "
        "Reasoning' (Sec. 4, Appendix C) and write Table 2, Figs 2-6, stats.json, trials.parquet, "
        "requests.jsonl and run.json to --out. Rerunning the same command resumes.",
    )
    tr.add_argument(
        "--topology", action="append", choices=["chain", "star", "mesh", "all"], help="repeatable; default all"
    )
    tr.add_argument("--out", help="run directory (default runs/trials-BACKEND)")
    tr.add_argument("--n-trials", type=int, help="trials per topology (default 100; surrogate 10000)")
    tr.add_argument("--steps", type=int, default=12, help="rule applications per trial (default 12)")
    tr.add_argument("--epsilon", type=float, default=15.0, help="perturbation added to the initial Value (default 15)")
    from mascot.cli.trials_config import parse_initial_state

    tr.add_argument(
        "--initial-state",
        type=parse_initial_state,
        metavar="VALUE,PARITY,LEVEL",
        help="the task's initial state (default 50,A,3: mascot's choice, the SR paper gives none)",
    )
    tr.add_argument(
        "--retries", type=int, default=2, help="re-asks after an unparsable or unanswered reply (default 2)"
    )
    tr.add_argument(
        "--mesh-tie",
        choices=["first", "median"],
        default="first",
        help="mesh vote tie rule: tied tuple of the lowest agent index (default) or median Value",
    )
    flag = dict(action=argparse.BooleanOptionalAction, default=False)  # --X and --no-X (undoes a config's X)
    tr.add_argument(
        "--unpaired",
        **flag,
        help="independent seeds for the perturbed arm (default: the same seeds as the unperturbed arm)",
    )
    tr.add_argument(
        "--log-requests",
        choices=["all", "failures", "none"],
        help="requests.jsonl content (default all; surrogate none)",
    )
    tr.add_argument("--structured-output", **flag, help="vllm/openai: constrain replies to the JSON schema")
    tr.add_argument("--d-floor", type=float, default=1e-6, help="floor on D_t in R_cdr (default 1e-6)")
    tr.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples for the CIs (default 2000)")
    tr.add_argument("--no-figures", action="store_true", help="skip Figs 2-6")
    tr.add_argument("--figures", dest="no_figures", action="store_false", help="write Figs 2-6 (the default)")
    tr.add_argument(
        "--dry-run",
        **flag,
        help="print the run's size (units, requests, prompt and reply tokens) and, from the server probe, a time; "
        "send no trial request and write nothing",
    )
    tr.add_argument(
        "--allow-large",
        **flag,
        help=f"run past the size limits ({MAX_UNITS:,} units; {MAX_UNIT_STEPS:,} unit-steps; {MAX_STEPS:,} steps; 100,000 first-try "
        "requests to a model; 20 --retries or --max-retries)",
    )
    tr.add_argument("--quiet", **flag, help="no progress on stderr")
    from mascot.backends.base import Sampling
    from mascot.cli.backend_args import add_backend_args

    # --backend, --model, sampling (the SR paper's decoding, Sampling's defaults; run seed 0), vllm/openai/hf
    add_backend_args(
        tr, {"temperature": Sampling.temperature, "top_p": Sampling.top_p, "max_tokens": Sampling.max_tokens, "seed": 0}
    )
    g = tr.add_argument_group("surrogate (affine-noise agents; defaults in mascot.protocols.state_tracking.surrogate)")
    g.add_argument("--sigma", type=float, help="Value noise s.d. per agent (default 75)")
    g.add_argument("--rho-c", type=float, help="shared-noise correlation between agents of a step (default 0)")
    g.add_argument("--parity-slip", type=float, help="probability of a flipped Parity (default 0.05)")
    g.add_argument("--level-slip", type=float, help="probability of Level +-1 (default 0.1)")
    g.add_argument("--parse-fail", type=float, help="probability of a malformed reply (default 0.01)")
    g.add_argument("--judge", choices=["mean", "median", "vote"], help="judge/revision aggregation (default mean)")
    g.add_argument(
        "--judge-noise", type=float, help="judge/revision noise and slips relative to an agent (default 0.25)"
    )
    tr.add_argument(
        "--config",
        help="a trials config (TOML [trials] table of these options; command-line options come after it, so they win)",
    )
    tr.set_defaults(func=_cmd_trials)
    p.trials_parser = tr
    return p


def _with_trials_config(argv: list[str], parser) -> list[str]:
    """``mascot trials --config FILE ...`` -> ``mascot trials <the file's options> ...``."""
    if not argv or argv[0] != "trials":
        return argv
    rest, path, i = [], None, 1
    while i < len(argv):
        a = argv[i]
        if a == "--config" and i + 1 < len(argv):
            path, i = argv[i + 1], i + 2
            continue
        if a.startswith("--config="):
            path = a.split("=", 1)[1]
        else:
            rest.append(a)
        i += 1
    if path is None:
        return argv
    from mascot.cli.trials_config import trials_argv

    keys: dict[str, str] = {}
    argv = ["trials", *trials_argv(path, parser.trials_parser, rest, keys), *rest]
    parser.config_keys = (path, keys)  # (an error about an option the file set names the file's key: _run)
    return argv


def _process_switches(args) -> None:
    """The process-wide settings only the command line makes: the non-interactive matplotlib backend, and
    64-bit JAX for the reproductions (they run in float64; the float32 sweeps that ``reproduce all`` runs
    after them have always run in that process state, so their committed results depend on it)."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    from mascot.cli.compile_cache import enable_compile_cache

    enable_compile_cache(getattr(args, "compile_cache", True))
    if getattr(args, "func", None) is _cmd_reproduce:
        import jax

        jax.config.update("jax_enable_x64", True)


def main(argv=None) -> int:
    argv_given_by_console = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(_with_trials_config(argv, parser))
        if extra:  # KEY=VALUE overrides after options (Hydra users write them anywhere): kept in order
            takes = isinstance(getattr(args, "overrides", None), list)
            bad = [e for e in extra if e.startswith("-")] if takes else extra
            if bad:
                parser.error(f"unrecognized arguments: {' '.join(bad)}")
            args.overrides = [*args.overrides, *extra]
        refuse_secrets(argv)  # (a key in --out or a config's name named the run directory: outside testers)
    except (ValueError, FileNotFoundError) as e:
        print(f"mascot: error: {printable(redact_secrets(str(e)))}", file=sys.stderr)
        return 2
    impl = os.environ.get("JAX_DEFAULT_PRNG_IMPL", "")
    if impl not in ("", "threefry2x32"):  # (checked without loading JAX: every command's seeds are threefry draws)
        print(
            f"mascot: error: JAX_DEFAULT_PRNG_IMPL={printable(impl)}: mascot draws with threefry2x32 keys (another "
            "implementation gives other numbers for the same seed; rbg keys are not independent under vmap); unset it",
            file=sys.stderr,
        )
        return 2
    args.config_keys = getattr(parser, "config_keys", None)
    _process_switches(args)
    if argv_given_by_console:  # the mascot command itself (not main([...]) from Python): say when JAX compiles
        from mascot.log import want_compile_notice

        want_compile_notice()
    import signal

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    if getattr(args, "hard_interrupt", False):
        # a command that keeps nothing of interrupted work (the calibrations) stops at the signal itself: a
        # KeyboardInterrupt raised inside a JAX garbage-collection callback is printed and ignored, and the fit
        # would run on; its files are written atomically and its lock is released by the OS
        def _stop(signum, frame):
            print(f"mascot: {_SIGNAL_WORDS.get(signum, 'interrupted')}; " + args.on_interrupt, file=sys.stderr)
            sys.stderr.flush()
            os._exit(128 + signum)

        signal.signal(signal.SIGINT, _stop)
        signal.signal(signal.SIGTERM, _stop)
    elif argv_given_by_console:  # SIGTERM (what schedulers and `kill` send) unwinds like Ctrl-C: work kept, exit 143
        signal.signal(signal.SIGTERM, _terminate)
    try:
        return _run(args)
    finally:  # main() called from Python (a test, a notebook) leaves the process's signal handling as it was
        if getattr(args, "hard_interrupt", False) or argv_given_by_console:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


_SIGNAL_WORDS = {2: "interrupted", 15: "terminated (SIGTERM)"}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that it unwinds like Ctrl-C (locks released, records kept)."""


def _terminate(signum, frame):
    raise Terminated()


def _run(args) -> int:
    """``args.func(args)`` (``args`` from :func:`main`), with what mascot raises on purpose (and interrupts, broken pipes, full disks, out of
    memory) turned into one line and an exit status."""
    try:
        return args.func(args)
    except MascotError as e:  # what mascot raises on purpose: one line (a bug in mascot shows its traceback)
        from mascot.cli.trials_config import name_config_key  # (an option a config file set: its key named too)

        print(f"mascot: error: {printable(redact_secrets(name_config_key(str(e), args.config_keys)))}", file=sys.stderr)
        return exit_code(e)
    except KeyboardInterrupt as e:
        signum = 15 if isinstance(e, Terminated) else 2
        try:
            print(
                f"mascot: {_SIGNAL_WORDS[signum]}; "
                + getattr(args, "on_interrupt", "work committed so far is kept: rerun the same command to resume"),
                file=sys.stderr,
            )
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed pipe (`| head` gone, a scheduler's log pipe): say nothing more
            pass
        finally:
            # exit now, whatever the output: worker threads may still be blocked on the network or asleep in a
            # Retry-After wait (the interpreter would join them at exit); every record is written atomically
            # and the run's lock was released while the interrupt unwound
            os._exit(128 + signum)
    except MemoryError as e:  # (numpy's "Unable to allocate 153. TiB ..." included)
        print(
            f"mascot: error: out of memory: {e or 'an allocation failed'}; ask for less (smaller graphs, batches, "
            "d, trajectories or experiment.chunk_size)",
            file=sys.stderr,
        )
        return 1
    except BrokenPipeError:  # stdout closed early (`mascot diagnose ... | head`): stop quietly, as shell tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (no second error when Python flushes)
        return 141
    except OSError as e:  # disk full, permissions, ...: one line naming the file
        where = f"{e.filename}: " if e.filename else ""
        file = file_in_the_way(e.filename) if e.errno in (errno.ENOTDIR, errno.EEXIST) else None
        why = f"{file} is a file, not a directory: give an --out path that does not go through it" if file else None
        print(f"mascot: error: {redact_secrets(f'{where}{why or e.strerror or e}')}", file=sys.stderr)
        return 2 if file else 1  # a file in the way of the path given is bad input, as `--out afile` is


if __name__ == "__main__":
    sys.exit(main())
