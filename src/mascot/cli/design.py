"""``mascot design``: choose before you spend.

    mascot design weights (--topology SPEC | --adjacency FILE) [--costs FILE --cost-weight MU] [--json] [--out DIR]
    mascot design budget [--w1 FILE --w2 FILE] --c1 C --c2 C --eta E --eps E [--noise S] [--runs N]
                         [--alpha A] [--b0 B] [--json] [--out DIR]
    mascot design policy [--w1 FILE --w2 FILE] [--c1 C --c2 C --eps E] [--d0 D] [--etas E,E,...] [--b0 B]
                         [--alpha A] [--max-mean-rounds R] [--noise S] [--runs N] [--json] [--out DIR]
    mascot design schedule (--model PARAMS.toml | --lambda1 L --lambda2 L [--slope1 B --slope2 B --d-ref D]
                           [--c1 C --c2 C] --eps E --d0 D) [--b0 B --alpha A] [--max-mean-rounds R] [--bins K]
                           [--json] [--out DIR]

``weights``: the symmetric doubly stochastic W supported on the graph (undirected: an edge wherever
``A[i, j]`` or ``A[j, i]`` is nonzero; self-loops implicit) with the smallest contraction rate lambda(W)
(the consensus paper's Def. 6), by an interior-point method with a certified optimality gap
(:func:`mascot.design.fastest_weights`). Prints a table (or, with ``--json``, ``{"lambda", "lower_bound", "gap",
"weights", "edges", "edge_weights", "metropolis_lambda", ...}``); with ``--out``
also writes ``weights.csv``, ``design_weights.json`` and a figure (W and the rate per stage).

``budget``: P(BudgetFail) for a budget ``--b0`` and the budget for a target risk ``--alpha``, by Monte Carlo of
Algorithm 1 on the JAX kernels (:func:`mascot.design.budget_risk`), with 95% intervals, beside Theorem 1's
worst-case B*. Modes default to the consensus paper's Table III (complete K5 w_ii 0.4, ring C5 w_ii 0.6).

``policy``: the switching threshold eta. The exact minimiser of Theorem 1's B*(D0; eta) (breakpoint
enumeration, :func:`mascot.design.certificate_best_eta`), and the simulated frontier over eta (mean and p95
tokens, rounds, P(BudgetFail | b0)) with the cheapest eta meeting ``--alpha`` and ``--max-mean-rounds``, and the
paper's eta = 0.1 placed on it.

``schedule``: for rates that depend on D (``lambda_s(D) = lambda_s (D / d_ref)^slope_s``, log-normal rate noise,
noisy round costs: the scalar form of a calibrated deliberation surrogate), a D-dependent mode schedule that
minimises mean tokens subject to ``P(T > b0) <= alpha`` and a mean rounds limit, by optax on a smooth relaxation
(:func:`mascot.design.schedule.design_schedule`), beside the best single threshold (exact search) and the
threshold ``--paper-eta``; both evaluated exactly on the design sample and on an independent one.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from mascot.cli.design_args import check_constraints, check_out, check_runs, dumps, out_dir
from mascot.cli.design_schedule import cmd_design_schedule
from mascot.errors import InputError

__all__ = ["add_parsers", "cmd_design_weights", "cmd_design_budget", "cmd_design_policy", "cmd_design_schedule"]


def cmd_design_weights(args) -> int:
    check_out(args.out)
    import numpy as np

    from mascot.analysis.diagnose import graphs_from_args, load_adjacency
    from mascot.design.weights import contraction_rate_sym, fastest_weights, metropolis_edge_weights, weights_matrix

    graphs = graphs_from_args(args.topology, args.adjacency)
    if len(graphs) != 1:
        raise InputError("give exactly one --topology SPEC or --adjacency FILE")
    ((name, A),) = graphs.items()
    try:
        costs = load_adjacency(args.costs, what="cost") if args.costs else None
    except FileNotFoundError:
        raise InputError(f"--costs: file not found: {args.costs}") from None
    except ValueError as e:
        raise InputError(f"--costs: {e}") from None
    if args.cost_weight and costs is None:
        raise InputError("--cost-weight needs --costs FILE (per-edge token costs, an n x n matrix)")
    if costs is not None and not args.cost_weight:
        raise InputError("--costs needs --cost-weight MU > 0 (the objective lambda + MU * sum_e c_e w_e)")
    if A.shape[0] > 2048:
        raise InputError(
            f"{name}: n = {A.shape[0]} agents; design weights handles up to 2048 (one dense "
            "eigendecomposition per step)"
        )
    if not (0 < args.gap_tol < 1):
        raise InputError(f"--gap-tol must be a number in (0, 1); got {args.gap_tol}")
    import time

    started = time.monotonic()

    def progress(stage, objective, bound):  # (stderr, and only once the design takes more than 2 s)
        if time.monotonic() - started > 2:
            print(
                f"mascot design weights: stage {stage}: objective {objective:.8f}, lower bound {bound:.8f}, "
                f"gap {objective - bound:.1e} (target {args.gap_tol:g}), {time.monotonic() - started:.0f} s",
                file=sys.stderr,
                flush=True,
            )

    res = fastest_weights(A, costs=costs, cost_weight=args.cost_weight, gap_tol=args.gap_tol, on_stage=progress)
    n = A.shape[0]
    metro = contraction_rate_sym(weights_matrix(n, res.edges, metropolis_edge_weights(n, res.edges)))
    obj = {
        "graph": name,
        "n": n,
        "edges_count": int(len(res.edges)),
        "lambda": res.rate,
        "metropolis_lambda": metro,
        "objective": res.objective,
        "lower_bound": res.lower_bound,
        "gap": res.gap,
        "cost_weight": args.cost_weight,
        "weights": res.W.tolist(),
        "edges": res.edges.tolist(),
        "edge_weights": res.edge_weights.tolist(),
        "newton_steps": res.steps,
        "objective_per_stage": res.history.tolist(),
    }

    def rounds(lam):  # whole rounds to shrink D by 100x (lambda^K <= 1e-2)
        if lam >= 1 - 1e-12:
            return "never"
        return "1" if lam <= 1e-12 else str(int(np.ceil(np.log(1e-2) / np.log(lam) - 1e-9)))

    warnings = []
    if costs is not None and not np.array_equal(costs, costs.T):
        i, j = np.unravel_index(np.argmax(np.abs(costs - costs.T)), costs.shape)
        warnings.append(
            f"--costs is not symmetric (c[{i},{j}] = {costs[i, j]:g}, c[{j},{i}] = {costs[j, i]:g}): each "
            "undirected edge {i, j} is charged max(c_ij, c_ji)"
        )
    if res.gap > args.gap_tol:
        warnings.append(
            f"the certified gap {res.gap:.1e} is above --gap-tol {args.gap_tol:g}: the dual bound's float64 "
            "precision (about 1e-8) was reached first; the weights are as good as the gap says"
        )
    if res.rate >= 1 - 1e-9:
        warnings.append(
            "the designed W does not contract (lambda = 1): no consensus. With --cost-weight this is the "
            "optimum of the stated objective; lower the cost weight."
        )
    elif args.cost_weight and res.rate > 0.99:
        warnings.append(
            f"the designed W barely contracts (lambda = {res.rate:.6f}, {rounds(res.rate)} rounds to shrink "
            "D by 100x): the cost term outweighs the rate at this --cost-weight; lower it for a usable "
            "design."
        )
    obj["warnings"] = warnings
    if args.out:
        _write_outputs(out_dir(args.out), obj, res)
    if args.json:
        print(dumps(obj))
        for w in warnings:  # (stdout holds the JSON object)
            print(f"mascot: warning: {w}", file=sys.stderr)
        return 0
    print(f"{name}: n = {n}, {len(res.edges)} edges")
    print(f"  lambda(W) designed     {res.rate:.6f}")
    print(
        f"  lambda(W) Metropolis   {metro:.6f}  (w_e = 1 / (1 + max(d_i, d_j)) on edge ij: Metropolis-Hastings, the usual default)"
    )
    if args.cost_weight:
        print(f"  objective              {res.objective:.6f}  (lambda + {args.cost_weight:g} * sum_e c_e w_e)")
    what = "an objective" if args.cost_weight else "a lambda"
    print(
        f"  optimality: no weights on this graph give {what} below {res.lower_bound:.6f} "
        f"(certified gap {res.gap:.1e}, a dual bound of the SDP)"
    )
    print(f"  rounds to shrink D by 100x: {rounds(res.rate)} designed vs {rounds(metro)} Metropolis")
    for w in warnings:
        print(f"  WARNING: {w}")
    k = min(len(res.edges), 12)
    print(
        f"  edge weights (the largest {k} of {len(res.edges)}; --json or --out for all):"
        if len(res.edges) > k
        else "  edge weights:"
    )
    # largest first, ties (to the printed digits) in edge order
    order = sorted(range(len(res.edges)), key=lambda e: (-round(float(res.edge_weights[e]), 4), tuple(res.edges[e])))[
        :k
    ]
    for e in order:
        i, j = res.edges[e]
        print(f"    {i:>3d} - {j:<3d} {res.edge_weights[e]:.4f}")
    if args.out:
        print(f"  wrote {args.out}/weights.csv, design_weights.json, design_weights.png/.pdf")
    return 0


def _seed(text: str) -> int:
    """argparse type of --seed: a whole number in [0, 2^63) (argparse names the option in its error)."""
    import argparse

    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0; got {text!r}") from None
    if not 0 <= v < 2**63:
        raise argparse.ArgumentTypeError(f"must be a whole number in [0, 2^63); got {v}")
    return v


def cmd_design_budget(args) -> int:
    check_out(args.out)
    import numpy as np

    from mascot.design.budget import budget_risk

    W1, W2 = _modes(args)
    for name in ("c1", "c2", "eta", "eps"):
        v = getattr(args, name)
        if not (v > 0 and np.isfinite(v)):
            raise InputError(f"--{name} must be a finite number > 0; got {v}")
    if not (args.noise >= 0 and np.isfinite(args.noise)):
        raise InputError(f"--noise must be a finite standard deviation >= 0; got {args.noise}")
    if not args.eta > args.eps:
        raise InputError(
            f"--eta must be > --eps for the adaptive policy (with eta <= eps mode 2 is never used); "
            f"got --eta {args.eta:g}, --eps {args.eps:g}"
        )
    check_runs(args.runs)
    r = budget_risk(
        W1,
        W2,
        c1=args.c1,
        c2=args.c2,
        eta=args.eta,
        eps=args.eps,
        runs=args.runs,
        d=args.d,
        noise=args.noise,
        max_rounds=args.max_rounds,
        alpha=args.alpha,
        b0=args.b0,
        seed=args.seed,
    )
    runs = int(r.tokens.size)
    unbounded = None  # why the interval's upper limit is infinite (JSON null), in words
    if math.isinf(r.budget_ci[1]):
        need = math.ceil(math.log(0.025) / math.log1p(-r.alpha))
        q = f"{1 - r.alpha:.15g}"
        if runs < need:  # fewer runs than the quantile needs: the sample cannot bound it from above
            unbounded = (
                f"{runs:,} runs cannot bound the {q} quantile from above (its upper 95% limit needs at least "
                f"{need:,} runs): raise --runs before trusting this budget"
            )
        else:  # the limit's order statistic is a run that never reached consensus: no budget covers it
            unbounded = (
                f"the {q} quantile's upper 95% limit is a run that never reached D <= eps within {args.max_rounds} "
                "rounds: no budget bounds it; raise --max-rounds (or lower the noise) to price this risk"
            )
    obj = {
        "runs": runs,
        "noise": args.noise,
        "alpha": r.alpha,
        "budget_for_alpha": r.budget_for_alpha,
        "budget_ci95": list(r.budget_ci),
        "budget_ci95_unbounded": unbounded,
        "b0": r.b0,
        "p_fail": r.p_fail,
        "p_fail_ci95": list(r.p_fail_ci) if r.p_fail_ci else None,
        "theorem1_b_star_median_d0": r.b_star_median,
        "theorem1_b_star_max_d0": r.b_star_max,
        "no_consensus_fraction": r.never,
        "d0_median": float(np.median(r.d0)),
        "d0_max": float(r.d0.max()),
    }
    if args.out:
        _budget_outputs(out_dir(args.out), obj, r)
    if args.json:
        print(dumps(obj))
        return 0
    print(
        f"Algorithm 1, {obj['runs']:,} simulated runs (X0 like Sec. V-A, noise {args.noise:g}; "
        f"D0 median {obj['d0_median']:.4f}, max {obj['d0_max']:.4f})"
    )
    if r.b0 is not None:
        print(
            f"  P(BudgetFail | b0 = {r.b0:g}) = {r.p_fail:.4f}  (95% CI {r.p_fail_ci[0]:.4f} .. {r.p_fail_ci[1]:.4f})"
        )
    print(
        f"  budget for risk <= {r.alpha:g}: {r.budget_for_alpha:g} tokens  (95% CI {r.budget_ci[0]:g} .. "
        f"{r.budget_ci[1]:g})"
    )
    if unbounded:
        print(f"  {unbounded}")
    print(f"  Theorem 1 worst case B*(D0): {r.b_star_median:g} at the median D0, {r.b_star_max:g} at the largest")
    if r.never:
        print(f"  {r.never:.2%} of runs did not reach D <= eps within {args.max_rounds} rounds (they fail any budget)")
    return 0


def _budget_outputs(out: Path, obj: dict, r) -> None:
    import numpy as np

    from mascot.analysis.figures import plt, save_figure
    from mascot.io import atomic_write_text

    atomic_write_text(out / "design_budget.json", dumps(obj, indent=2) + "\n")
    t = np.sort(r.tokens[np.isfinite(r.tokens)])
    fig, ax = plt.subplots(figsize=(6, 3.8))
    if t.size:
        grid = np.unique(np.concatenate([[0.0], t]))
        surv = 1.0 - np.searchsorted(np.sort(r.tokens), grid, side="right") / r.tokens.size
        ax.step(grid, surv, where="post", label="P(BudgetFail | b0) (Monte Carlo)")
    ax.axhline(r.alpha, color="gray", ls=":", label=f"risk {r.alpha:g}")
    ax.axvline(r.budget_for_alpha, color="C1", ls="--", label=f"budget for risk {r.alpha:g}: {r.budget_for_alpha:g}")
    if np.isfinite(r.b_star_max):
        ax.axvline(r.b_star_max, color="C3", ls="-.", label=f"Theorem 1 B* at max D0: {r.b_star_max:g}")
    if r.b0 is not None and t.size and r.b0 > 1.5 * t[-1]:  # far right of every run's need: named, not drawn
        ax.plot([], [], " ", label=f"b0 = {r.b0:g} (off the axis): P(BudgetFail) = {r.p_fail:.3g}")  # (the axis
    elif r.b0 is not None:  # stretched to reach b0 = 1e9 squeezed the curve to a line: a tester) the budget asked
        lo, hi = r.p_fail_ci  # about, at its failure probability (CI as an error bar)
        ax.errorbar(
            [r.b0],
            [r.p_fail],
            yerr=[[r.p_fail - lo], [hi - r.p_fail]],
            fmt="o",
            color="C2",
            capsize=3,
            zorder=5,
            label=f"b0 = {r.b0:g}: P(BudgetFail) = {r.p_fail:.3g}",
        )
    ax.set_xlabel("budget b0 (tokens)")
    ax.set_ylabel("P(BudgetFail)")
    ax.set_title(f"token need of Algorithm 1, {r.tokens.size:,} runs")
    ax.legend(fontsize=8, loc="upper right")  # (the curve falls from the upper left)
    fig.tight_layout()
    save_figure(fig, out / "design_budget")


def _modes(args):
    from mascot.analysis.diagnose import load_adjacency
    from mascot.graphs import paper_modes

    if (args.w1 is None) != (args.w2 is None):
        raise InputError("give both --w1 and --w2 (the two modes' weight matrices), or neither (Table III)")
    return (load_adjacency(args.w1), load_adjacency(args.w2)) if args.w1 else paper_modes()


_POLICY_MAX_ROUNDS = 200  # rounds a simulated run may take before it counts as never reaching consensus


def cmd_design_policy(args) -> int:
    check_out(args.out)
    import numpy as np

    from mascot.design.policy import certificate_best_eta, threshold_frontier
    from mascot.theory.consensus import contraction_rate

    W1, W2 = _modes(args)
    for name in ("c1", "c2", "eps"):
        v = getattr(args, name)
        if not (v > 0 and np.isfinite(v)):
            raise InputError(f"--{name} must be a finite number > 0; got {v}")
    check_runs(args.runs)
    check_constraints(args, b0_min_open=False)
    if args.d0 is not None and not (np.isfinite(args.d0) and args.d0 > args.eps):
        raise InputError(f"--d0 must be a finite disagreement > --eps = {args.eps}; got {args.d0}")
    with np.errstate(invalid="ignore", divide="ignore"):
        lam1, lam2 = contraction_rate(W1), contraction_rate(W2)
    if not (0 <= lam1 < 1 and 0 <= lam2 < 1):  # (refused now, not after the simulation)
        raise InputError(f"both modes must contract (0 <= lambda < 1); got {lam1}, {lam2}")
    if args.etas is not None:
        try:
            etas = np.array([float(x) for x in args.etas.split(",")])
        except ValueError:
            raise InputError(f"--etas must be comma-separated numbers; got {args.etas!r}") from None
        if not (np.all(np.isfinite(etas)) and np.all(etas > args.eps)):
            raise InputError(f"--etas must be finite thresholds > --eps = {args.eps}; got {args.etas}")
    else:
        etas = np.round(np.geomspace(1.2 * args.eps, 0.6, 14), 4)
    etas = np.unique(np.append(etas, 0.1)) if args.eps < 0.1 else etas
    fr = threshold_frontier(
        W1,
        W2,
        c1=args.c1,
        c2=args.c2,
        eps=args.eps,
        etas=etas,
        runs=args.runs,
        noise=args.noise,
        b0=args.b0,
        seed=args.seed,
        max_rounds=_POLICY_MAX_ROUNDS,
    )
    ok = (fr.mean_rounds <= args.max_mean_rounds) & (fr.no_consensus == 0)  # every run reaches consensus
    if args.b0 is not None:
        ok &= fr.p_fail <= args.alpha
    best = fr[ok].sort_values(["mean_tokens", "eta"]).iloc[0] if ok.any() else None
    d0 = args.d0
    cert = certificate_best_eta(d0, args.eps, lam1, lam2, args.c1, args.c2) if d0 and d0 > args.eps else None
    obj = {
        "lambda1": lam1,
        "lambda2": lam2,
        "frontier": fr.to_dict(orient="records"),
        "best_eta": None if best is None else float(best.eta),
        "constraints": {
            "alpha": args.alpha if args.b0 is not None else None,
            "b0": args.b0,
            "max_mean_rounds": args.max_mean_rounds,
        },
        "certificate": None
        if cert is None
        else {"d0": d0, "eta": cert.eta, "b_star": cert.b_star, "K1": cert.k1, "K2": cert.k2},
    }
    if args.out:
        _policy_outputs(out_dir(args.out), obj, fr, args)
    if args.json:
        print(dumps(obj))
        return 0 if best is not None else 1
    print(
        f"lambda1 = {lam1:.4f}, lambda2 = {lam2:.4f}, c1 = {args.c1:g}, c2 = {args.c2:g}, eps = {args.eps:g}; "
        f"{args.runs:,} simulated runs per eta (X0 like Sec. V-A, noise {args.noise:g})"
    )
    cols = ["eta", "mean_tokens", "p95_tokens", "mean_rounds"] + (["p_fail"] if args.b0 is not None else [])
    # one format a column (%.4g gave "2.613e+04" beside "8256"): eta and p_fail to 4 significant digits,
    # tokens and rounds with a fixed number of decimals
    fmt = {
        "eta": "{:.4g}",
        "mean_tokens": "{:,.1f}",
        "p95_tokens": "{:,.0f}",
        "mean_rounds": "{:.3f}",
        "p_fail": "{:.4f}",
    }
    print(fr[cols].to_string(index=False, formatters={c: fmt[c].format for c in cols}))
    if best is None:
        never = fr[fr.no_consensus > 0]
        shares = ", ".join(f"{r.eta:g}: {100 * r.no_consensus:.0f}%" for r in never.itertuples())
        why = f" (runs that never reach consensus within {_POLICY_MAX_ROUNDS} rounds: {shares})" if len(never) else ""
        print(f"no eta meets the constraints{why}")  # (exit status 1, as design schedule's)
    else:
        print(
            f"cheapest eta meeting the constraints: {best.eta:g} ({best.mean_tokens:.1f} tokens on average, "
            f"{best.mean_rounds:.2f} rounds)"
        )
    paper = fr[np.isclose(fr.eta, 0.1)]
    if len(paper):
        print(f"the paper's eta = 0.1: {paper.mean_tokens.iloc[0]:.1f} tokens, {paper.mean_rounds.iloc[0]:.2f} rounds")
    if cert is not None:
        print(
            f"certificate (Theorem 1, D0 = {d0:g}): min B* = {cert.b_star:g} at eta = {cert.eta:.4g} "
            f"(K1 = {cert.k1}, K2 = {cert.k2})"
        )
    return 0 if best is not None else 1


def _policy_outputs(out: Path, obj: dict, fr, args) -> None:
    import numpy as np

    from mascot.analysis.figures import plt, save_figure
    from mascot.io import atomic_write_text, write_csv

    atomic_write_text(out / "design_policy.json", dumps(obj, indent=2) + "\n")
    write_csv(fr, out / "frontier.csv", index=False, float_format="%.6g")
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    fig, ax = plt.subplots(figsize=(7.2, 4.6))
    ax.plot(fr.eta, fr.mean_tokens, marker="o", label="mean tokens")
    ax.plot(fr.eta, fr.p95_tokens, marker="s", ls="--", label="95th percentile tokens")
    ax.set_xscale("log")
    ticks = [x for x in (0.03, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0) if fr.eta.min() <= x <= fr.eta.max()]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel("switching threshold eta")
    ax.set_ylabel("tokens to consensus")
    if np.any(np.isclose(fr.eta, 0.1)):
        ax.axvline(0.1, color="gray", ls=":", label="paper's eta = 0.1")
    if obj["best_eta"] is not None:
        ax.axvline(obj["best_eta"], color="C3", ls="-.", label=f"cheapest meeting constraints: {obj['best_eta']:g}")
    handles, labels = ax.get_legend_handles_labels()
    if args.b0 is not None:
        ax2 = ax.twinx()
        ax2.plot(fr.eta, fr.p_fail, color="C2", marker="^", label=f"P(BudgetFail | b0 = {args.b0:g})")
        ax2.set_ylabel("P(BudgetFail)", color="C2")
        ax2.set_ylim(-0.02, 1.02)
        h2, l2 = ax2.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    ax.set_title("Algorithm 1: tokens vs switching threshold")
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    save_figure(fig, out / "design_policy")


def _write_outputs(out: Path, obj: dict, res) -> None:
    import numpy as np
    import pandas as pd

    from mascot.analysis.figures import plt, save_figure
    from mascot.io import atomic_write_text, write_csv

    write_csv(pd.DataFrame(res.W), out / "weights.csv", index=False, header=False, float_format="%.10g")
    atomic_write_text(out / "design_weights.json", dumps(obj, indent=2) + "\n")
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    im = a.imshow(res.W, cmap="viridis", vmin=0)
    a.set_title(f"designed W, lambda = {res.rate:.4f}")
    a.set_xlabel("j")
    a.set_ylabel("i")
    fig.colorbar(im, ax=a, fraction=0.046)
    costly = bool(obj["cost_weight"])
    b.plot(np.arange(1, len(res.history) + 1), res.history, marker="o", label="designed (best so far)")
    b.axhline(res.lower_bound, color="C1", ls=":", label=f"dual bound (gap {res.gap:.0e})")
    if not costly:  # (with costs the objective adds the token term: the Metropolis rate is not comparable)
        b.axhline(obj["metropolis_lambda"], color="gray", ls="--", label="Metropolis weights")
    b.set_xlabel("barrier stage")
    from matplotlib.ticker import MaxNLocator

    b.set_xlim(0.5, len(res.history) + 0.5)  # (one stage was ticked 0.96 ... 1.04)
    if len(res.history) <= 12:
        b.set_xticks(range(1, len(res.history) + 1))
    else:
        b.xaxis.set_major_locator(MaxNLocator(integer=True))
    b.set_ylabel("lambda(W) + cost_weight *\nsum c_e w_e" if costly else "lambda(W)")
    b.set_title("objective per stage" if costly else "contraction rate per stage")
    b.legend(fontsize=8)
    fig.tight_layout(w_pad=4.0)  # (room between the panels: b's label met a's colour bar)
    save_figure(fig, out / "design_weights")


def _constraint_args(p, b0_help: str) -> None:
    p.add_argument("--b0", type=float, help=b0_help)
    p.add_argument("--alpha", type=float, default=0.05, help="largest acceptable P(BudgetFail | b0) (default 0.05)")
    p.add_argument("--max-mean-rounds", type=float, default=math.inf, help="rounds limit (mean over runs)")


def _mode_args(p) -> None:
    p.add_argument("--w1", help="mode-1 weight matrix file (default: Table III's complete K5, w_ii = 0.4)")
    p.add_argument("--w2", help="mode-2 weight matrix file (default: Table III's ring C5, w_ii = 0.6)")
    p.add_argument("--c1", type=float, default=600.0, help="tokens per mode-1 round (default 600, Table III)")
    p.add_argument("--c2", type=float, default=100.0, help="tokens per mode-2 round (default 100)")


def _output_args(p, what: str) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--out", help=f"also write {what} here")


def add_parsers(sub) -> None:
    d = sub.add_parser("design", help="choose weights (and more) before spending tokens")
    dsub = d.add_subparsers(dest="design_command", required=True)
    w = dsub.add_parser(
        "weights",
        help="fastest-contraction symmetric doubly stochastic weights on a graph",
        description=__doc__.split("\n\n")[2] if __doc__ else None,
    )
    w.add_argument(
        "--topology",
        action="append",
        help="a topology spec as `mascot diagnose` takes it, e.g. ring:8 or watts_strogatz:8:4:0.1:SEED (N = agents)",
    )
    w.add_argument("--adjacency", action="append", help="an adjacency file (.npy, .csv, .json)")
    w.add_argument("--costs", help="per-edge token costs: an n x n matrix file (.npy, .csv, .json)")
    w.add_argument(
        "--cost-weight",
        type=float,
        default=0.0,
        help="objective lambda + MU * sum_e c_e w_e (default 0: the rate alone)",
    )
    w.add_argument(
        "--gap-tol",
        type=float,
        default=1e-6,
        help="stop once the certified optimality gap (objective - dual bound) is below this (default 1e-6)",
    )
    _output_args(w, "weights.csv, design_weights.json and a figure")
    w.set_defaults(func=cmd_design_weights)

    b = dsub.add_parser("budget", help="P(BudgetFail) and the budget for a target risk, by Monte Carlo")
    _mode_args(b)
    b.add_argument("--eta", type=float, default=0.1, help="switching threshold (default 0.1)")
    b.add_argument("--eps", type=float, default=0.03, help="consensus tolerance (default 0.03)")
    b.add_argument("--noise", type=float, default=0.0, help="belief noise s.d. after every round (default 0)")
    b.add_argument("--runs", type=int, default=100_000, help="simulated runs (default 100000)")
    b.add_argument("--d", type=int, default=6, help="belief dimension (default 6, the paper's)")
    b.add_argument("--max-rounds", type=int, default=200, help="rounds after which a run counts as failed")
    b.add_argument("--alpha", type=float, default=0.05, help="target risk for the budget (default 0.05)")
    b.add_argument("--b0", type=float, help="also give P(BudgetFail) at this budget")
    b.add_argument("--seed", type=_seed, default=0)
    _output_args(b, "design_budget.json and a figure")
    b.set_defaults(func=cmd_design_budget)

    q = dsub.add_parser("policy", help="the switching threshold eta: certificate optimum and simulated frontier")
    _mode_args(q)
    q.add_argument("--eps", type=float, default=0.03, help="consensus tolerance (default 0.03)")
    q.add_argument("--d0", type=float, default=0.3009, help="D0 for the certificate optimum (default 0.3009)")
    q.add_argument("--etas", help="comma-separated thresholds to simulate (default: 14 from 1.2 eps to 0.6, and 0.1)")
    _constraint_args(q, "budget for the risk column and constraint")
    q.add_argument("--noise", type=float, default=0.0, help="belief noise s.d. after every round (default 0)")
    q.add_argument("--runs", type=int, default=2000, help="simulated runs per eta (default 2000)")
    q.add_argument("--seed", type=_seed, default=0)
    _output_args(q, "frontier.csv, design_policy.json and a figure")
    q.set_defaults(func=cmd_design_policy)

    s = dsub.add_parser("schedule", help="a D-dependent mode schedule for rates that depend on D (optax)")
    s.add_argument(
        "--model",
        help="a calibrated deliberation parameter file (mascot calibrate deliberation's "
        "params.toml): its agents are simulated and reduced to the scalar model (instead of the rate flags)",
    )
    s.add_argument("--lambda1", type=float, help="mode-1 rate at D = --d-ref")
    s.add_argument("--lambda2", type=float, help="mode-2 rate at D = --d-ref")
    s.add_argument("--slope1", type=float, default=0.0, help="d log lambda1 / d log D (default 0: constant)")
    s.add_argument("--slope2", type=float, default=0.0, help="d log lambda2 / d log D (default 0: constant)")
    s.add_argument("--d-ref", type=float, default=1.0, help="the D at which --lambda1/--lambda2 apply (default 1)")
    s.add_argument("--rate-sd1", type=float, default=0.0, help="s.d. of the mode-1 log-rate per round")
    s.add_argument("--rate-sd2", type=float, default=0.0, help="s.d. of the mode-2 log-rate per round")
    s.add_argument("--c1", type=float, default=600.0, help="mean tokens per mode-1 round (default 600)")
    s.add_argument("--c2", type=float, default=100.0, help="mean tokens per mode-2 round (default 100)")
    s.add_argument("--cost-cv", type=float, default=0.0, help="coefficient of variation of a round's cost")
    s.add_argument("--eps", type=float, help="consensus tolerance (with --model: the file's)")
    s.add_argument("--d0", type=float, help="initial disagreement, median (with --model: simulated)")
    s.add_argument("--d0-sd", type=float, help="s.d. of log D0 (default 0; with --model: simulated)")
    _constraint_args(s, "budget for the risk constraint (with --model: the file's)")
    s.add_argument(
        "--paper-eta",
        type=float,
        default=None,
        help="a threshold to place beside the design (default 0.1, the paper's, where it is above --eps)",
    )
    s.add_argument("--bins", type=int, default=8, help="schedule knots in log D (default 8)")
    s.add_argument("--steps", type=int, default=300, help="optimiser steps (default 300)")
    s.add_argument("--runs", type=int, default=2000, help="simulated runs (default 2000)")
    s.add_argument("--seed", type=_seed, default=0)
    _output_args(s, "design_schedule.json and a figure")
    s.set_defaults(func=cmd_design_schedule)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: mascot design ...")
