"""``mascot design``: choose before you spend.

    mascot design weights (--topology SPEC | --adjacency FILE) [--costs FILE --cost-weight MU] [--json] [--out DIR]

``weights``: the symmetric doubly stochastic W supported on the graph (undirected: an edge wherever
``A[i, j]`` or ``A[j, i]`` is nonzero; self-loops implicit) with the smallest contraction rate lambda(W)
(the consensus paper's Def. 6), fitted with optax (:func:`mascot.design.fastest_weights`). Prints a table (or,
with ``--json``, ``{"lambda", "weights", "edges", "edge_weights", "metropolis_lambda", ...}``); with ``--out``
also writes ``weights.csv``, ``design_weights.json`` and a figure (W and the rate per stage).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

__all__ = ["add_parsers", "cmd_design_weights"]


def _metropolis(n, edges):
    from mascot.design.weights import weights_matrix
    import numpy as np

    deg = np.bincount(edges.ravel(), minlength=n)
    return weights_matrix(n, edges, 1.0 / (1.0 + np.maximum(deg[edges[:, 0]], deg[edges[:, 1]])))


def cmd_design_weights(args) -> int:
    import numpy as np

    from mascot.analysis.diagnose import graphs_from_args, load_adjacency
    from mascot.design.weights import contraction_rate_sym, fastest_weights

    graphs = graphs_from_args(args.topology, args.adjacency)
    if len(graphs) != 1:
        raise ValueError("give exactly one --topology SPEC or --adjacency FILE")
    (name, A), = graphs.items()
    costs = load_adjacency(args.costs) if args.costs else None
    if args.cost_weight and costs is None:
        raise ValueError("--cost-weight needs --costs FILE (per-edge token costs, an n x n matrix)")
    if args.steps < 1:
        raise ValueError(f"--steps must be >= 1; got {args.steps}")
    res = fastest_weights(A, costs=costs, cost_weight=args.cost_weight, steps_per_stage=args.steps, seed=args.seed)
    n = A.shape[0]
    metro = contraction_rate_sym(_metropolis(n, res.edges))
    obj = {"graph": name, "n": n, "edges_count": int(len(res.edges)), "lambda": res.rate,
           "metropolis_lambda": metro, "objective": res.objective, "cost_weight": args.cost_weight,
           "weights": res.W.tolist(), "edges": res.edges.tolist(), "edge_weights": res.edge_weights.tolist(),
           "steps": res.steps, "rate_per_stage": res.history.tolist()}
    if args.out:
        out = Path(args.out)
        if out.exists() and not out.is_dir():
            raise ValueError(f"--out {out} is a file, not a directory")
        out.mkdir(parents=True, exist_ok=True)
        _write_outputs(out, obj, res)
    if args.json:
        print(json.dumps(obj))
        return 0
    print(f"{name}: n = {n}, {len(res.edges)} edges")
    print(f"  lambda(W) designed     {res.rate:.6f}")
    print(f"  lambda(W) Metropolis   {metro:.6f}  (w_e = 1 / (1 + max degree), the usual default)")
    if args.cost_weight:
        print(f"  objective              {res.objective:.6f}  (lambda + {args.cost_weight:g} * sum_e c_e w_e)")
    rounds = np.log(1e-2) / np.log(res.rate) if 0 < res.rate < 1 else float("inf")
    rounds_m = np.log(1e-2) / np.log(metro) if 0 < metro < 1 else float("inf")
    print(f"  rounds to shrink D by 100x: {rounds:.1f} designed vs {rounds_m:.1f} Metropolis")
    k = min(len(res.edges), 12)
    print("  edge weights (largest first):" if len(res.edges) > k else "  edge weights:")
    order = np.argsort(-res.edge_weights)[:k]
    for e in order:
        i, j = res.edges[e]
        print(f"    {i:>3d} - {j:<3d} {res.edge_weights[e]:.4f}")
    if args.out:
        print(f"  wrote {args.out}/weights.csv, design_weights.json, design_weights.png/.pdf")
    return 0


def _write_outputs(out: Path, obj: dict, res) -> None:
    import numpy as np
    import pandas as pd

    from mascot.analysis.figures import plt, save_figure
    from mascot.io import atomic_write_text, write_csv

    write_csv(pd.DataFrame(res.W), out / "weights.csv", index=False, header=False, float_format="%.10g")
    atomic_write_text(out / "design_weights.json", json.dumps(obj, indent=2) + "\n")
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.8))
    im = a.imshow(res.W, cmap="viridis", vmin=0)
    a.set_title(f"designed W, lambda = {res.rate:.4f}")
    a.set_xlabel("j")
    a.set_ylabel("i")
    fig.colorbar(im, ax=a, fraction=0.046)
    b.plot(np.arange(1, len(res.history) + 1), res.history, marker="o", label="designed (best so far)")
    b.axhline(obj["metropolis_lambda"], color="gray", ls="--", label="Metropolis weights")
    b.set_xlabel("smoothing stage")
    b.set_ylabel("lambda(W)")
    b.set_title("contraction rate per stage")
    b.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, out / "design_weights")


def add_parsers(sub) -> None:
    d = sub.add_parser("design", help="choose weights (and more) before spending tokens")
    dsub = d.add_subparsers(dest="design_command", required=True)
    w = dsub.add_parser("weights", help="fastest-contraction symmetric doubly stochastic weights on a graph",
                        description=__doc__.split("\n\n")[2] if __doc__ else None)
    w.add_argument("--topology", action="append", help="a topology spec as `mascot diagnose` takes it, e.g. ring:8")
    w.add_argument("--adjacency", action="append", help="an adjacency file (.npy, .csv, .json)")
    w.add_argument("--costs", help="per-edge token costs: an n x n matrix file (.npy, .csv, .json)")
    w.add_argument("--cost-weight", type=float, default=0.0,
                   help="objective lambda + MU * sum_e c_e w_e (default 0: the rate alone)")
    w.add_argument("--steps", type=int, default=400, help="optimiser steps per smoothing stage (default 400)")
    w.add_argument("--seed", type=int, default=0, help="initial-point seed (default 0)")
    w.add_argument("--json", action="store_true", help="print one JSON object")
    w.add_argument("--out", help="also write weights.csv, design_weights.json and a figure here")
    w.set_defaults(func=cmd_design_weights)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: mascot design ...")
