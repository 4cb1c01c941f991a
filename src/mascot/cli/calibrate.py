"""``mascot calibrate``: fit the surrogate agent models to real runs and to the papers' tables.

    mascot calibrate trials (RUN_DIR | --paper-table2) --out DIR [--seed S] [--n-boot B] [--quick]
                            [--steps K] [--n-sim M] [--sd-weight W] [--init PARAMS.toml]
                            [--fit NAME,NAME...] [--split-half] [--moments profile|table2]
    mascot calibrate deliberation (RUN_DIR | --paper-table8 gpt|gemini|claude) --out DIR [--seed S] [--n-boot B] [--quick]
                                 [--split-half] [--hold-out adaptive]

trials: the state-tracking surrogate (mascot.calibrate.trials_fit.calibrate_trials): simulated method of
moments with optax on a JAX simulator of the harness, bootstrap uncertainty; writes DIR/params.toml (for
`mascot trials --backend surrogate --surrogate-params DIR/params.toml`), DIR/report.md, DIR/fit.json and
DIR/observed_vs_predicted.{png,pdf}.

deliberation: the deliberation surrogate (mascot.calibrate.deliberation.calibrate_deliberation): rate-law agents
fitted by simulated method of moments; writes DIR/params.toml, report.md, fit.json and figures, or with
--split-half DIR/split_half.md, split_half.json and fit/ (half A's calibration).

Bad input (a missing directory, no ``trials.parquet``, both or neither source) is refused with a clear
message and exit status 2, before anything is written. One calibration at a time per output directory (a
second is refused, exit status 1); an interrupted calibration keeps nothing and restarts when rerun.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

__all__ = ["add_parsers", "cmd_calibrate_trials", "cmd_calibrate_deliberation"]


def _fail(msg: str) -> int:
    print(f"mascot: error: {msg}", file=sys.stderr)
    return 2


def _common(p, n_boot_default: int, what: str = "refits") -> None:
    p.add_argument("--out", required=True, help="output directory (params.toml, report.md, figures)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fit, the bootstrap and the predictions (default 0)")
    p.add_argument(
        "--n-boot",
        type=int,
        default=n_boot_default,
        help=f"bootstrap {what} for the uncertainty (default {n_boot_default}; at least 2, or 0 for none in trials; "
        "at least 20 for --hold-out and a deliberation --split-half; a few dozen give only rough 5-95%% ranges)",
    )
    p.add_argument("--quick", action="store_true", help="fewer iterations and simulated trials (a smoke test)")


def cmd_calibrate_trials(args) -> int:
    if (args.run_dir is None) == (not args.paper_table2):
        return _fail("give exactly one source: RUN_DIR or --paper-table2")
    if _out_ok(args.out):
        return _fail(_out_ok(args.out))
    if args.n_boot < 0 or args.n_boot == 1:
        return _fail(f"--n-boot must be 0 (no uncertainty) or >= 2 (an s.d. needs two draws); got {args.n_boot}")
    if not 0 <= args.seed < 2**31:
        return _fail(f"--seed must be an integer in 0..2^31-1; got {args.seed}")
    if args.steps is not None and args.steps < 1:
        return _fail(f"--steps must be >= 1; got {args.steps}")
    if args.n_sim is not None and args.n_sim < 2:
        return _fail(f"--n-sim must be >= 2; got {args.n_sim}")
    import math

    if not (math.isfinite(args.sd_weight) and args.sd_weight >= 0):
        return _fail(f"--sd-weight must be a finite number >= 0; got {args.sd_weight}")
    from mascot.calibrate.trials_fit import FIT_PARAMS

    fit_names = None
    if args.fit is not None:
        fit_names = tuple(x.strip() for x in args.fit.split(","))
        known = [p.name for p in FIT_PARAMS]
        bad = [repr(x) if not x else x for x in fit_names if x not in known]
        if bad or not fit_names or len(set(fit_names)) != len(fit_names):
            return _fail(f"--fit: {', '.join(bad) or 'an empty or repeated list'}; choose among {', '.join(known)}")
    if args.moments is not None and args.run_dir is None:
        return _fail("--moments chooses what to fit for a RUN_DIR; Table 2 has its 18 moments only")
    if args.leave_out is not None and not args.paper_table2:
        return _fail("--leave-out is a check of the --paper-table2 fit (a run directory has --split-half)")
    if args.leave_out is not None and (args.fit is not None or args.init is not None):
        return _fail("--leave-out fits every parameter from its box's centre; it takes no --fit or --init")
    if args.split_half and args.run_dir is None:
        return _fail("--split-half needs a RUN_DIR (it fits half of the run's trials and predicts the other half)")
    if args.init is not None:
        from mascot.protocols.state_tracking.surrogate import SurrogateBackend

        try:
            SurrogateBackend.from_params(args.init)
        except ValueError as e:
            return _fail(f"--init: {e}")
    from mascot.calibrate.trials_fit import calibrate_trials, observed_from_run

    source = None
    if args.run_dir is not None:
        try:
            per = observed_from_run(args.run_dir)[0]  # validate before writing anything
        except ValueError as e:
            return _fail(str(e))
        except Exception as e:  # a trials.parquet that is not a mascot trials table (a column missing, ...)
            return _fail(f"{args.run_dir!r}: cannot read its trials as a `mascot trials` run: {type(e).__name__}: {e}")
        need = 4 if args.split_half else 2
        few = {t: len(v["E_ceg"]) for t, v in per.items() if len(v["E_ceg"]) < need}
        if few:
            return _fail(
                f"{args.run_dir!r} has too few trials to calibrate ({', '.join(f'{t} {n}' for t, n in few.items())}): "
                f"s.d.s need at least 2 trials per topology{', in each half' if args.split_half else ''}"
            )
        source = args.run_dir
    out = Path(args.out)
    why = _out_writable(args.out, source)
    if why:
        return _fail(why)
    from mascot.io import lock_dir

    # one calibration per output directory at a time (a second one is refused, naming the first's pid)
    lock = lock_dir(out, ".calibrate.lock", what="calibration output directory")  # noqa: F841 (held until exit)
    kw = dict(
        seed=args.seed,
        n_boot=args.n_boot,
        quick=args.quick,
        steps=args.steps,
        n_sim=args.n_sim,
        sd_weight=args.sd_weight,
        init=args.init,
        fit_names=fit_names,
        profile=args.moments != "table2",
        progress=lambda msg: print(f"mascot calibrate trials: {msg}", file=sys.stderr, flush=True),
    )
    if args.split_half:
        from mascot.calibrate.trials_checks import split_half

        with _staged(out) as stage:
            r = split_half(args.run_dir, stage, **kw)
        print(
            f"split half of {r['source']}: fitted on {len(r['halves'][0])} trials per topology, predicted the other "
            f"{len(r['halves'][1])} (split_half.json lists them); " + _coverage_line(r["coverage"])
        )
        print(f"wrote {Path(args.out) / 'split_half.md'}, split_half.json, fit/")
        return 0
    if args.leave_out is not None:
        from mascot.calibrate.trials_checks import leave_one_out_table2

        with _staged(out) as stage:
            r = leave_one_out_table2(
                stage,
                args.leave_out,
                seed=args.seed,
                n_boot=args.n_boot,
                quick=args.quick,
                steps=args.steps,
                progress=kw["progress"],
            )
        print(
            f"Table 2 without {args.leave_out}: fitted to the other moments (objective {r['loss']:.4g}); held-out "
            f"moments inside their predicted 5-95% range: {r['inside']} of {r['n_moments']} (in sample: "
            f"{r['in_sample']['inside']} of {r['in_sample']['n_moments']})"
            + (
                f"; not counted (no Table 2 fit reaches them): {', '.join(x['moment'] for x in r['not_counted'])}"
                if r["not_counted"]
                else ""
            )
        )
        print(f"wrote {Path(args.out) / 'leave_out.md'}, leave_out.json, fit/ (the calibration and its figures)")
        return 0
    with _staged(out) as stage:
        s = calibrate_trials(source, stage, **kw)
    width = max(len(k) for k in s["estimates"])
    print(
        f"calibrated to {s['source']}: objective {s['loss']:.4g} ({s['iterations']} ES iterations, then "
        f"{s['polish']['iterations']} Levenberg-Marquardt step{'s' if s['polish']['iterations'] != 1 else ''}), "
        f"{s['wall_s']:.1f} s"
    )
    for k, v in s["estimates"].items():
        lo, hi = s["boot_ci"][k]
        print(
            f"  {k.ljust(width)}  {v:10.4f}  "
            + (
                f"(bootstrap s.d. {s['boot_sd'][k]:.4f}, 5-95% [{lo:.4g}, {hi:.4g}])"
                if s["n_boot"] >= 2
                else "(no bootstrap: --n-boot 0)"
            )
        )
    print(f"wrote {Path(args.out) / 'params.toml'}, report.md, fit.json, " + ", ".join(s["figures"]))
    return 0


# what a calibration writes into --out (trials and deliberation; `fit/` is split-half's fit)
_OUTPUTS = (
    "params.toml",
    "report.md",
    "fit.json",
    "observed_vs_predicted.png",
    "observed_vs_predicted.pdf",
    "step_profile.png",
    "step_profile.pdf",
    "split_half.md",
    "split_half.json",
    "leave_out.md",
    "leave_out.json",
    "fit",
    "fit.png",
    "fit.pdf",
    "dcurve.png",
    "dcurve.pdf",
    "rates.png",
    "rates.pdf",
)
_STAGE = ".calibration-partial"

_INTERRUPTED = (
    f"an interrupted calibration changes nothing in --out (what it wrote stays in --out/{_STAGE} until "
    "the next run): rerun the same command to start it again"
)


@contextlib.contextmanager
def _staged(out: Path):
    """The calibration writes into ``out/.calibration-partial``; only when it has finished do its files replace
    the previous calibration's (params.toml last), so a refused, failed or interrupted rerun leaves the earlier
    calibration in ``out`` whole. Called with the directory's lock held."""
    import shutil

    from mascot.io import remove_stale_temps

    remove_stale_temps(out)
    stage = out / _STAGE
    shutil.rmtree(stage, ignore_errors=True)  # (an interrupted run's leftovers)
    stage.mkdir()
    try:
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    new = sorted((p for p in stage.iterdir()), key=lambda p: p.name == "params.toml")  # params.toml last
    (out / "params.toml").unlink(missing_ok=True)  # a directory holding params.toml holds a whole calibration
    for name in _OUTPUTS:  # the previous calibration's files the new one does not replace
        old = out / name
        if not (stage / name).exists() and (old.is_file() or old.is_symlink()):
            old.unlink()
        elif not (stage / name).exists() and old.is_dir():
            shutil.rmtree(old)
    for p in new:
        dest = out / p.name
        if p.is_dir() and dest.is_dir() and not dest.is_symlink():
            shutil.rmtree(dest)
        os.replace(p, dest)
    stage.rmdir()


def _out_ok(out) -> str | None:
    """Why ``--out`` cannot be an output directory (None: it can)."""
    if not str(out).strip():
        return "--out is empty; give a directory"
    p = Path(out)
    if p.exists() and not p.is_dir():
        return f"--out {out!r} exists and is not a directory"
    from mascot.errors import RunDirError
    from mascot.rundir import not_a_run_dir

    try:
        not_a_run_dir(p, "mascot calibrate")
    except RunDirError as e:
        return str(e)
    return None


def _coverage_line(cov: dict) -> str:
    """A split half's counts for the terminal (:func:`mascot.calibrate.fit.coverage`)."""
    return (
        f"informative held-out moments inside their predicted 5-95% range: {cov['counted_inside']} of "
        f"{cov['counted']} (all rows: {cov['inside']} of {cov['n']}; in sample, the fitted half: "
        f"{cov['in_sample_inside']} of {cov['in_sample']}"
        + (": the fit did not fit what it saw" if cov["fit_failed"] else "")
        + ")"
    )


def _out_writable(out, run_dir) -> str | None:
    """Why ``out`` cannot take a calibration of ``run_dir`` (None: it can, and now exists): it is the run directory
    or inside it, or it cannot be made and written (found now, not after the fit)."""
    o = Path(out)
    if run_dir is not None:
        rd = Path(run_dir).resolve()
        if o.resolve() == rd or rd in o.resolve().parents:
            return f"--out {str(out)!r} is the run directory or inside it; give a directory of its own"
    try:
        o.mkdir(parents=True, exist_ok=True)
        probe = o / f".mascot-write-test-{__import__('os').getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        return f"--out {str(out)!r} cannot be written: {e.strerror or e}"
    return None


def cmd_calibrate_deliberation(args) -> int:
    if (args.run_dir is None) == (args.paper_table8 is None):
        return _fail("give exactly one source: RUN_DIR or --paper-table8 gpt|gemini|claude")
    if args.hold_out and args.paper_table8 is None:
        return _fail("--hold-out needs --paper-table8 (for a run directory, use --split-half)")
    if args.split_half and args.run_dir is None:
        return _fail("--split-half needs a RUN_DIR (it fits half of the runs and predicts the other half)")
    if args.paper_table8 == "all" and not args.hold_out:
        return _fail("--paper-table8 all needs --hold-out adaptive (a full fit takes one model at a time)")
    if _out_ok(args.out):
        return _fail(_out_ok(args.out))
    if not 0 <= args.seed < 2**31:
        return _fail(f"--seed must be an integer in 0..2^31-1; got {args.seed}")
    if args.hold_out:
        return _holdout(args)
    if args.run_dir is not None and not Path(args.run_dir).is_dir():
        return _fail(
            f"run directory {args.run_dir!r} "
            + ("is a file, not a directory" if Path(args.run_dir).exists() else "does not exist")
        )
    need = 20 if args.split_half else 2  # a split half's 5-95% ranges are drawn at its bootstrap replicates
    if args.n_boot < need:
        return _fail(
            f"--n-boot must be >= {need} (the uncertainty is the bootstrap"
            + ("; a split half needs 20 replicates for its 5-95% ranges" if args.split_half else "")
            + f"); got {args.n_boot}"
        )
    from mascot.calibrate.deliberation import calibrate_deliberation
    from mascot.io import lock_dir

    created = not Path(args.out).exists()
    out = Path(args.out)
    why = _out_writable(out, args.run_dir)
    if why:
        return _fail(why)
    # one calibration per output directory at a time (the same lock as `calibrate trials`); the new files
    # replace the previous calibration's only when the fit has finished (_staged)
    lock = lock_dir(out, ".calibrate.lock", what="calibration output directory")  # noqa: F841 (held until exit)
    try:
        with _staged(out) as stage:
            if args.split_half:
                from mascot.calibrate.deliberation_split import split_half_deliberation

                r = split_half_deliberation(args.run_dir, stage, seed=args.seed, n_boot=args.n_boot, quick=args.quick)
            else:
                s = calibrate_deliberation(
                    args.run_dir,
                    stage,
                    paper_model=args.paper_table8,
                    seed=args.seed,
                    n_boot=args.n_boot,
                    quick=args.quick,
                )
    except ValueError as e:
        if created and out.is_dir() and not any(p for p in out.iterdir() if p.name != ".calibrate.lock"):
            lock.release()
            (out / ".calibrate.lock").unlink(missing_ok=True)
            out.rmdir()  # refused before anything was written: leave no empty directory behind
        return _fail(str(e))
    if args.split_half:
        a, b = r["halves"]
        print(
            f"split half of {r['source']['runs']} runs: fitted on {len(a)}, predicted the other {len(b)} "
            "(split_half.json lists them); " + _coverage_line(r["coverage"])
        )
        print(f"wrote {Path(args.out) / 'split_half.md'}, split_half.json, fit/")
        return 0
    src = s["source"]
    print(
        f"calibrated the deliberation surrogate to {src.get('name') or ', '.join(src.get('run_dirs', []))}: "
        f"loss {s['loss']:.4g}, {s['wall_s']:.1f} s"
    )
    width = max(len(k) for k in s["estimate"])
    for k, v in s["estimate"].items():
        print(
            f"  {k.ljust(width)}  {v:10.4f}  "
            + (
                "(not identified: no fitted moment depends on it)"
                if k in s.get("not_identified", ())
                else f"(bootstrap s.d. {s['sd'][k]:.4f})"
            )
        )
    c = s.get("criteria")
    if c:
        print(
            f"text harness replay: rounds and tokens within {100 * c['tol']:.0f} % of Table VIII: "
            f"{'yes' if c['within_tol'] else 'no'}; ranking by tokens {' < '.join(c['rank_tokens'])} "
            f"(paper {' < '.join(c['paper_rank_tokens'])})"
        )
    print(f"wrote {Path(args.out) / 'params.toml'}, report.md, fit.json, fit.png/.pdf, dcurve.png/.pdf")
    return 0


def _holdout(args) -> int:
    """``--hold-out adaptive`` (its source, --out and --seed already checked by the caller)."""
    import logging

    from mascot.calibrate.deliberation_holdout import holdout_table8, write_holdout
    from mascot.io import lock_dir
    from mascot.log import progress

    n_boot = args.n_boot
    if n_boot < 20:
        return _fail(f"--n-boot must be >= 20 for a 95% predictive interval; got {args.n_boot}")
    models = ["gpt", "gemini", "claude"] if args.paper_table8 == "all" else [args.paper_table8]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lock = lock_dir(out, ".calibrate.lock", what="calibration output directory")  # noqa: F841 (held until exit)
    results = [
        holdout_table8(
            m,
            seed=args.seed,
            n_boot=n_boot,
            quick=args.quick,
            progress=lambda msg: progress(logging.getLogger("mascot.calibrate"), msg),
        )
        for m in models
    ]
    path = write_holdout(results, out)
    for r in results:
        for row in r["rows"]:
            print(
                f"{r['name']:<18} {row['moment']:<17} Table VIII {row['observed']:>10.4g}  predicted "
                f"{row['predicted']:>10.4g}  95% [{row['lo']:.4g}, {row['hi']:.4g}]  "
                f"{'inside' if row['inside'] else 'OUTSIDE'}"
            )
    inside, n = sum(r["inside"] for r in results), sum(r["n"] for r in results)
    print(f"coverage: {inside} of {n} held-out values inside their 95% intervals; wrote {path}, holdout.json")
    return 0


def add_parsers(sub) -> None:
    c = sub.add_parser(
        "calibrate",
        help="fit the surrogate agent models to runs or to the papers' tables",
        description=__doc__.split("\n\n")[0],
    )
    csub = c.add_subparsers(dest="calibrate_command", required=True)
    t = csub.add_parser(
        "trials",
        help="the state-tracking surrogate, to a run directory or the SR paper's Table 2",
        description=__doc__.split("\n\n")[2],
    )
    t.add_argument("run_dir", nargs="?", help="a `mascot trials` run directory (with trials.parquet)")
    t.add_argument("--paper-table2", action="store_true", help="fit to the SR paper's Table 2 instead")
    t.add_argument(
        "--steps",
        type=int,
        default=None,
        help="ES iterations (default 450; --quick 60); up to 6 Levenberg-Marquardt steps on 4,000 "
        "simulated trials follow (2 on a few hundred with --quick)",
    )
    t.add_argument(
        "--n-sim",
        type=int,
        default=None,
        help="simulated trials per topology per evaluation (default max(200, observed trials))",
    )
    t.add_argument(
        "--sd-weight",
        type=float,
        default=1.0,
        help="multiplies the weights of the s.d. moments (default 1: inverse variances)",
    )
    t.add_argument(
        "--fit",
        default=None,
        metavar="NAME,NAME...",
        help="fit only these parameters (default: the standard set; e.g. chain.p_echo,star_leaf.p_echo,"
        "mesh_agent.p_echo,parse_fail for a small model that echoes its input)",
    )
    t.add_argument(
        "--split-half",
        action="store_true",
        help="fit half of RUN_DIR's trials (at random, per --seed) and predict the other half",
    )
    t.add_argument(
        "--leave-out",
        choices=["chain", "mesh", "star", "E_ceg", "R_cdr", "F_ps"],
        default=None,
        help="with --paper-table2, out of sample: fit Table 2 without this topology (its six moments) or metric "
        "(its mean and s.d. on every topology), every parameter started at its box's centre, and predict what was "
        "left out with 5-95%% ranges (writes leave_out.md, leave_out.json, fit/)",
    )
    t.add_argument(
        "--moments",
        choices=["profile", "table2"],
        default=None,
        help="what to fit for a RUN_DIR: Table 2's 18 moments plus the run's step profile (how error, "
        "D_t and the arms' gap grow over the steps; default), or Table 2's 18 only",
    )
    t.add_argument(
        "--init",
        default=None,
        metavar="PARAMS.toml",
        help="start from this parameter file (e.g. an earlier calibration) instead of the defaults",
    )
    _common(t, 200, "draws (linearized: one Gauss-Newton step each)")
    t.set_defaults(func=cmd_calibrate_trials, hard_interrupt=True, on_interrupt=_INTERRUPTED)
    d = csub.add_parser(
        "deliberation",
        help="the deliberation surrogate, to a run directory or Table VIII",
        description=__doc__.split("\n\n")[3],
    )
    d.add_argument("run_dir", nargs="?", help="a `mascot deliberate` run directory")
    d.add_argument(
        "--paper-table8",
        choices=["gpt", "gemini", "claude", "all"],
        help="fit to one model's Table VIII column ('all': every model, with --hold-out only)",
    )
    d.add_argument(
        "--hold-out",
        choices=["adaptive"],
        help="out of sample: fit the complete-only and ring-only columns of --paper-table8 and predict the "
        "adaptive column with 95%% predictive intervals (writes holdout.md, holdout.json)",
    )
    d.add_argument(
        "--split-half",
        action="store_true",
        help="out of sample: fit half of RUN_DIR's runs (at random, per --seed) and predict the other half's "
        "moments with 5-95%% ranges (writes split_half.md, split_half.json, fit/)",
    )
    _common(d, 200)
    d.set_defaults(func=cmd_calibrate_deliberation, hard_interrupt=True, on_interrupt=_INTERRUPTED)
