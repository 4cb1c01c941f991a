"""``mascot design schedule``: a switching schedule (one threshold per bin of D) designed for a rate model
fitted to deliberation records, checked against the best fixed threshold and, optionally, through the text
harness. The other ``mascot design`` commands are :mod:`mascot.cli.design`."""

from __future__ import annotations

import math
from pathlib import Path

from mascot.cli.design_args import check_constraints, check_out, check_positive, check_runs, dumps, out_dir
from mascot.errors import InputError


def cmd_design_schedule(args) -> int:
    check_out(args.out)

    from mascot.design.schedule import RateModel, design_schedule, draws, evaluate

    src = None
    if args.model:
        if args.lambda1 is not None or args.lambda2 is not None:
            raise InputError("give --model or --lambda1/--lambda2, not both")
        from mascot.calibrate.deliberation_sim import scalar_rate_model

        try:
            src = scalar_rate_model(args.model, seed=args.seed)
        except (OSError, ValueError) as e:
            raise InputError(f"--model: {e}") from None
        for k in ("eps", "d0", "b0"):
            if getattr(args, k) is None:
                setattr(args, k, src[k])
        if args.d0_sd is None:
            args.d0_sd = src["d0_sd"]
    elif args.lambda1 is None or args.lambda2 is None or args.eps is None or args.d0 is None:
        raise InputError(
            "give --lambda1, --lambda2, --eps and --d0 (or --model FILE, a calibrated deliberation parameter file)"
        )
    if args.d0_sd is None:
        args.d0_sd = 0.0
    if src is None:
        check_positive(args, "lambda1", "lambda2")
    check_positive(args, "c1", "c2", "eps", "d0", "d_ref")
    for name in ("slope1", "slope2", "rate_sd1", "rate_sd2", "cost_cv", "d0_sd"):
        v = getattr(args, name)
        if not math.isfinite(v) or (name != "slope1" and name != "slope2" and v < 0):
            raise InputError(
                f"--{name.replace('_', '-')} must be a finite number{'' if 'slope' in name else ' >= 0'}; got {v}"
            )
    check_runs(args.runs)
    if not args.d0 > args.eps:
        raise InputError(f"--d0 must be > --eps = {args.eps}; got {args.d0}")
    if args.paper_eta is None:  # the paper's threshold, where it is above this eps
        args.paper_eta = 0.1 if args.eps < 0.1 else None
    elif not (math.isfinite(args.paper_eta) and args.paper_eta > args.eps):
        raise InputError(f"--paper-eta must be a finite threshold > --eps = {args.eps}; got {args.paper_eta}")
    check_constraints(args, b0_min_open=True)
    if args.bins < 2 or args.steps < 1:
        raise InputError(f"--bins must be >= 2 and --steps >= 1; got {args.bins}, {args.steps}")
    if src is not None:
        model = RateModel(a=src["a"], b=src["b"], rate_sd=src["rate_sd"], cost=src["cost"], cost_cv=src["cost_cv"])
    else:
        lr = math.log(args.d_ref)
        model = RateModel(
            a=(math.log(args.lambda1) - args.slope1 * lr, math.log(args.lambda2) - args.slope2 * lr),
            b=(args.slope1, args.slope2),
            rate_sd=(args.rate_sd1, args.rate_sd2),
            cost=(args.c1, args.c2),
            cost_cv=args.cost_cv,
        )
    r = design_schedule(
        model,
        eps=args.eps,
        d0=args.d0,
        d0_sd=args.d0_sd,
        b0=args.b0,
        alpha=args.alpha,
        max_mean_rounds=args.max_mean_rounds,
        bins=args.bins,
        runs=args.runs,
        steps=args.steps,
        seed=args.seed,
    )
    paper = None
    if args.paper_eta is not None and args.eps < args.paper_eta:
        le = math.log(args.paper_eta)
        from mascot.design.schedule import summarize

        paper = {
            "eta": args.paper_eta,
            "design": summarize(
                evaluate(model, lambda x: x > le, args.eps, draws(args.runs, 200, args.d0, args.d0_sd, args.seed)),
                args.b0,
            ),
        }
    obj = {
        "model": {
            "a": list(model.a),
            "b": list(model.b),
            "rate_sd": list(model.rate_sd),
            "cost": list(model.cost),
            "cost_cv": model.cost_cv,
            "from": args.model,
        },
        "feasible": r.feasible,
        "mode1_intervals": r.schedule.intervals(),
        "schedule": {"log_d_lo": r.schedule.log_lo, "log_d_hi": r.schedule.log_hi, "theta": list(r.schedule.theta)},
        "design": r.design,
        "holdout": r.holdout,
        "best_eta": r.best_eta,
        "threshold_design": r.threshold_design,
        "threshold_holdout": r.threshold_holdout,
        "paper_eta": paper,
        "wall_s": r.wall_s,
        "constraints": {
            "b0": args.b0,
            "alpha": args.alpha if args.b0 is not None else None,
            "max_mean_rounds": args.max_mean_rounds,
        },
    }
    if src is not None:
        obj["text_level"] = _text_level_check(args, r)
    if args.out:
        _schedule_outputs(out_dir(args.out), obj, r, model, args)
    if args.json:
        print(dumps(obj))
        return 0 if r.feasible else 1
    if src is not None:
        rate = ", ".join(
            f"lambda{s + 1}(D) = exp({model.a[s]:.3f} {model.b[s]:+.3f} log D) (log-rate sd "
            f"{model.rate_sd[s]:.3f}, {model.cost[s]:,.0f} tokens/round)"
            for s in (0, 1)
        )
        print(
            f"scalar model measured from {args.model} ({src['source']}; the surrogate's agents simulated): {rate}; "
            f"eps = {args.eps:g}; D0 = {args.d0:.4g}; {args.runs:,} runs; optimised in {r.wall_s:.1f} s"
        )
    else:
        print(
            f"rates lambda_s(D) = lambda_s (D / {args.d_ref:g})^slope_s: lambda1 = {args.lambda1:g} (slope "
            f"{args.slope1:g}), lambda2 = {args.lambda2:g} (slope {args.slope2:g}); costs {args.c1:g} / "
            f"{args.c2:g}; eps = {args.eps:g}; D0 = {args.d0:g}; {args.runs:,} runs; optimised in {r.wall_s:.1f} s"
        )
    if not r.feasible:
        print("no schedule or threshold tried meets the constraints; the cheapest found is shown")
    iv = (
        ", ".join(f"[{a:.4g}, {b:.4g}]" if math.isfinite(b) else f"[{a:.4g}, inf)" for a, b in obj["mode1_intervals"])
        or "none"
    )
    print(f"designed schedule: mode 1 for D in {iv}; mode 2 elsewhere above eps")
    rows = [("designed schedule", r.design, r.holdout)]
    if r.best_eta is not None:
        rows.append((f"best threshold eta = {r.best_eta:.4g}", r.threshold_design, r.threshold_holdout))
    if paper is not None:
        rows.append((f"threshold eta = {paper['eta']:g}", paper["design"], None))
    for name, d, h in rows:
        extra = f", P(fail) {d['p_fail']:.3f}" if args.b0 is not None else ""
        held = f" (independent sample: {h['mean_tokens']:.1f})" if h else ""
        print(f"  {name}: {d['mean_tokens']:.1f} tokens{held}, {d['mean_rounds']:.2f} rounds{extra}")
    if src is not None:
        tl = obj["text_level"]
        print(
            f"checked on the text-level agents ({tl['runs']:,} simulated runs of the calibrated surrogate, the "
            f"scalar model's assumptions not made):"
        )
        for name, d in tl["rows"]:
            print(f"  {name}: {d['mean_tokens']:.1f} tokens, {d['mean_rounds']:.2f} rounds, P(fail) {d['p_fail']:.3f}")
        print(f"  cheapest meeting the constraints there: {tl['best']}")
    return 0 if r.feasible else 1


def _text_level_check(args, r) -> dict:
    """The scalar design, the thresholds and every bin schedule on the same knots, evaluated on the calibrated
    surrogate's text-level agents (:func:`mascot.calibrate.deliberation_sim.schedule_evaluator`)."""
    import itertools

    import numpy as np

    from mascot.calibrate.deliberation_sim import schedule_evaluator

    c = r.schedule.centres()
    runs = int(min(args.runs, 1000))
    ev = schedule_evaluator(args.model, c, runs=runs, seed=args.seed + 1)

    def ok(d):
        return (
            np.isfinite(d["mean_tokens"])
            and d["mean_rounds"] <= args.max_mean_rounds
            and (args.b0 is None or d["p_fail"] <= args.alpha)
        )

    rows = [("designed schedule (scalar model)", ev(np.asarray(r.schedule.theta)))]
    if args.paper_eta is not None and args.paper_eta > args.eps:
        rows.append((f"threshold eta = {args.paper_eta:g}", ev(c - math.log(args.paper_eta))))
    thr = [(float(e), ev(c - math.log(e))) for e in np.geomspace(args.eps * 1.0001, math.exp(c[-1]), 30)]
    feas = [t for t in thr if ok(t[1])]
    if feas:
        e, d = min(feas, key=lambda t: t[1]["mean_tokens"])
        rows.append((f"best threshold there, eta = {e:.4g}", d))
    best_bins = None
    if len(c) <= 8:
        for signs in itertools.product((-1.0, 1.0), repeat=len(c)):
            d = ev(np.asarray(signs))
            if ok(d) and (best_bins is None or d["mean_tokens"] < best_bins[1]["mean_tokens"]):
                best_bins = (signs, d)
        if best_bins is not None:
            on = [f"{math.exp(x):.3g}" for x, sg in zip(c, best_bins[0]) if sg > 0]
            rows.append(
                (f"best of the 2^{len(c)} bin schedules (mode 1 at knots D = {', '.join(on) or 'none'})", best_bins[1])
            )
    cands = [(n, d) for n, d in rows if ok(d)]
    best = min(cands, key=lambda t: t[1]["mean_tokens"])[0] if cands else "none"
    return {"runs": runs, "rows": rows, "thresholds": thr, "best": best}


def _schedule_outputs(out: Path, obj: dict, r, model, args) -> None:
    import numpy as np

    from mascot.analysis.figures import plt, save_figure
    from mascot.io import atomic_write_text

    atomic_write_text(out / "design_schedule.json", dumps(obj, indent=2) + "\n")
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4.8))
    d = np.geomspace(args.eps, math.exp(r.schedule.log_hi), 300)
    for s, lab in ((0, "mode 1"), (1, "mode 2")):
        a.plot(d, np.exp(model.a[s] + model.b[s] * np.log(d)), label=f"lambda_{s + 1}(D) ({lab})")
    for lo, hi in obj["mode1_intervals"]:
        a.axvspan(lo, min(hi, d[-1]), color="C0", alpha=0.12)
    a.axhline(1.0, color="gray", lw=0.8)
    if r.best_eta is not None:
        a.axvline(r.best_eta, color="C3", ls="-.", label=f"best threshold {r.best_eta:.3g}")
    a.set_xscale("log")
    a.set_xlabel("disagreement D")
    a.set_ylabel("per-round rate")
    a.set_title("rates; shaded: designed schedule uses mode 1")
    a.legend(fontsize=8)
    etas = np.array([e for e, _ in r.thresholds])
    tok = np.array([s["mean_tokens"] for _, s in r.thresholds])
    ok = np.isfinite(tok)
    b.plot(etas[ok], tok[ok], marker=".", label="single threshold eta (scalar model)")
    b.axhline(r.design["mean_tokens"], color="C2", ls="--", label="designed schedule (scalar model)")
    tl = obj.get("text_level")
    if tl:
        te = np.array([e for e, _ in tl["thresholds"]])
        tt = np.array([d["mean_tokens"] for _, d in tl["thresholds"]])
        b.plot(
            te[np.isfinite(tt)],
            tt[np.isfinite(tt)],
            marker="x",
            color="C1",
            label="single threshold (text-level agents)",
        )
        b.axhline(tl["rows"][0][1]["mean_tokens"], color="C4", ls=":", label="designed schedule (text-level agents)")
        for name, d in tl["rows"]:
            if name.startswith("best of the 2^") and np.isfinite(d["mean_tokens"]):  # the exhaustive bin search
                n_bins = name.split()[3]
                b.axhline(
                    d["mean_tokens"], color="C5", ls="-.", label=f"best of the {n_bins} bin schedules (text-level)"
                )
    if obj["paper_eta"] is not None:
        b.axvline(obj["paper_eta"]["eta"], color="gray", ls=":", label=f"eta = {obj['paper_eta']['eta']:g}")
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    for axis in (a, b):
        axis.set_xscale("log")
        lo, hi = axis.get_xlim()
        axis.xaxis.set_major_locator(FixedLocator([x for x in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0) if lo <= x <= hi]))
        axis.xaxis.set_minor_locator(NullLocator())
        axis.xaxis.set_major_formatter(ScalarFormatter())
    b.set_xlabel("threshold eta")
    b.set_ylabel("mean tokens to consensus")
    b.set_title("mean tokens: thresholds vs the designed schedule")
    b.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    fig.tight_layout()
    save_figure(fig, out / "design_schedule")
