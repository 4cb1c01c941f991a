"""Benchmark and check: `mascot design weights` (an interior-point method with a dual bound) beside the
fastest-mixing SDP solved by cvxpy + Clarabel.

For each graph (paths, cycles, stars, 2-D grids, connected Erdos-Renyi graphs, n = 7..64) both methods
minimise lambda(W) over symmetric doubly stochastic W supported on the graph, in this one process; the
table gives the design, its certified lower bound and gap, the SDP optimum (up to its solver tolerance), the
design's distance from it, the Metropolis-Hastings default for comparison, and each method's wall time. Prints JSON and a Markdown table;
``--results DIR`` also writes DIR/weights_vs_sdp.csv and DIR/README.md (every sentence computed).

    python benchmarks/bench_design.py [--quick] [--json-out FILE] [--results results/design]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from mascot.design.weights import (  # noqa: E402
    contraction_rate_sym,
    fastest_weights,
    metropolis_edge_weights,
    support_edges,
    weights_matrix,
)
from test_design import connected_er, cycle, grid, path, sdp_optimum, star  # noqa: E402


def graphs(quick: bool):
    gs = [
        ("path", 8, path(8)),
        ("cycle", 9, cycle(9)),
        ("star", 8, star(7)),
        ("grid 3x3", 9, grid(3, 3)),
        ("grid 4x4", 16, grid(4, 4)),
        ("ER p=0.2 seed 1", 20, connected_er(20, 0.2, 1)),
    ]
    if not quick:
        gs += [
            ("path", 32, path(32)),
            ("cycle", 32, cycle(32)),
            ("star", 32, star(31)),
            ("grid 8x8", 64, grid(8, 8)),
            ("ER p=0.1 seed 2", 64, connected_er(64, 0.1, 2)),
            ("ER p=0.1 seed 3", 64, connected_er(64, 0.1, 3)),
        ]
    return gs


def metropolis(A):
    E = support_edges(A)
    n = A.shape[0]
    return contraction_rate_sym(weights_matrix(n, E, metropolis_edge_weights(n, E)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the five small graphs only")
    ap.add_argument("--json-out", help="also write the JSON here")
    ap.add_argument("--results", help="write weights_vs_sdp.csv and README.md to this directory")
    args = ap.parse_args(argv)
    rows = []
    for family, _, A in graphs(args.quick):
        n = A.shape[0]  # (the agents, whatever the label says: star(k) has k leaves and a hub)
        t = time.perf_counter()
        res = fastest_weights(A)
        t_design = time.perf_counter() - t
        t = time.perf_counter()
        opt = sdp_optimum(A)
        t_sdp = time.perf_counter() - t
        rows.append(
            dict(
                graph=family,
                n=n,
                edges=int(len(support_edges(A))),
                design_lambda=res.rate,
                lower_bound=res.lower_bound,
                certified_gap=res.gap,
                sdp_lambda=opt,
                gap=res.rate - opt,
                metropolis_lambda=metropolis(A),
                design_s=t_design,
                sdp_s=t_sdp,
                newton_steps=res.steps,
            )
        )
        print(
            f"{family:>16s} n={n:>3d}: design {res.rate:.8f} (gap {res.gap:.1e}, {t_design:.2f} s)  "
            f"SDP {opt:.8f} ({t_sdp:.2f} s)  design - SDP {res.rate - opt:+.1e}",
            file=sys.stderr,
            flush=True,
        )
    import cvxpy
    import scipy

    meta = dict(
        machine=platform.platform(),
        cpus=__import__("os").cpu_count(),
        numpy=np.__version__,
        scipy=scipy.__version__,
        cvxpy=cvxpy.__version__,
        solver="CLARABEL",
    )
    out = dict(meta=meta, rows=rows)
    print(json.dumps(out, indent=2))
    hdr = (
        "| graph | n | edges | design lambda | certified gap | SDP lambda | design - SDP | Metropolis lambda "
        "| design s | SDP s |"
    )
    lines = [hdr, "|" + "---|" * 10]
    for r in rows:
        lines.append(
            f"| {r['graph']} | {r['n']} | {r['edges']} | {r['design_lambda']:.8f} | {r['certified_gap']:.1e} | "
            f"{r['sdp_lambda']:.8f} | {r['gap']:+.1e} | {r['metropolis_lambda']:.6f} | {r['design_s']:.2f} | "
            f"{r['sdp_s']:.2f} |"
        )
    table = "\n".join(lines)
    print(table)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(out, indent=2) + "\n")
    if args.results:
        import pandas as pd

        from mascot.io import atomic_write_text, write_csv

        d = Path(args.results)
        d.mkdir(parents=True, exist_ok=True)
        df = pd.DataFrame(rows)
        write_csv(df, d / "weights_vs_sdp.csv", index=False, float_format="%.10g")
        worst = df.loc[df.gap.idxmax()]
        loose = df.loc[df.certified_gap.idxmax()]
        speed = df.sdp_s.sum() / df.design_s.sum()
        # rounds to contract by a factor are proportional to 1 / |log lambda|
        gain = (np.log(df.design_lambda) / np.log(df.metropolis_lambda)).replace([np.inf, -np.inf], np.nan)
        text = [
            "# Design: fastest-contraction weights (`mascot design weights`)",
            "",
            f"Made by `python benchmarks/bench_design.py --results {d}` ({meta['machine']}, {meta['cpus']} CPUs; "
            f"numpy {meta['numpy']}, scipy {meta['scipy']}, cvxpy {meta['cvxpy']} with {meta['solver']}).",
            "",
            "For each graph, the symmetric doubly stochastic W supported on it with the smallest contraction rate "
            "lambda(W) (the consensus paper's Def. 6): mascot's design (a barrier interior-point method whose every "
            "answer carries a dual lower bound: the certified gap) beside the semidefinite-programming optimum of "
            "the fastest-mixing problem (Boyd, Diaconis and Xiao) solved by cvxpy.",
            "",
            table,
            "",
            f"Largest certified gap: {loose.certified_gap:.1e} ({loose.graph}, n = {loose.n}); largest design - SDP: "
            f"{worst.gap:.1e} ({worst.graph}, n = {worst.n}); "
            f"{'every design is within 1e-6 of the SDP optimum' if (df.gap < 1e-6).all() else 'NOT every design is within 1e-6 of the SDP optimum'}; "
            f"{'no design beats the SDP by more than 1e-6 (as it should not)' if (df.gap > -1e-6).all() else 'a design beats the SDP by more than 1e-6: the SDP solve was inaccurate'}.",
            f"Against the Metropolis-Hastings default (w_e = 1 / (1 + max degree)) the designed weights need "
            f"{np.nanmin(gain):.2f}x to {np.nanmax(gain):.2f}x fewer rounds for the same contraction "
            f"(rounds are proportional to 1 / |log lambda|: the ratio is log lambda_design / log lambda_Metropolis).",
            f"Time over all graphs: design {df.design_s.sum():.1f} s, cvxpy + {meta['solver']} {df.sdp_s.sum():.1f} s "
            f"({speed:.1f}x).",
            "",
        ]
        atomic_write_text(d / "README.md", "\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
